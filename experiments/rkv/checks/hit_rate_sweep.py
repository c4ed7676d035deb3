"""The stated properties of experiments/hit_rate_sweep: (ok, text) pairs over the
result rows. Imported by experiments/hit_rate_sweep/run (--check) and by
notebooks/hit_rate_sweep.ipynb, so both judge the same rows the same way."""


def overlap_costs(rows, backend="sim"):
    """What overlap costs against sync per (hit rate, kind), from counts the
    clock does not move: overlap plans step n+1 while step n is in flight, so
    (a) it retires each admission wave's finished requests one step later, at
    most one extra step per wave of max_running requests, and (b) it admits one
    request while the prefill that caches the shared prefix is in flight, which
    then prefills that prefix again. With nothing for overlap to hide, its
    device time exceeds sync's by at most the extra steps, each costing no more
    than a full step of the uncached run (none, h = 0, sync: every step a full
    token budget), and the lost tokens, each one token of that run's prefill:
    overlap / sync >= T_sync / (T_sync + k * t_full + lost * t_token) (bound).
    Returns one dict per pair."""
    import math
    key = {(r["target_hit_rate"], r["cache_label"], r["schedule"]): r for r in rows if r["backend"] == backend}
    base = key.get((0.0, "none", "sync"))
    out = []
    for (h, lab, sched), o in sorted(key.items()):
        s = key.get((h, lab, "sync"))
        if sched != "overlap" or not s:
            continue
        waves = math.ceil(o["num_prompts"] / o["max_running"])
        sm = {"h": h, "label": lab, "steps_sync": s["steps"], "steps_overlap": o["steps"],
              "extra_steps": o["steps"] - s["steps"], "waves": waves, "num": o["num_prompts"],
              "max_running": o["max_running"], "lost_tokens": s["cached_tokens"] - o["cached_tokens"],
              "shared_len": o["shared_len"], "device_ratio": s["model_seconds"] / o["model_seconds"],
              "rps_ratio": o["requests_per_s"] / s["requests_per_s"], "bound": None}
        if base:
            t_full = base["model_seconds"] / base["steps"]
            t_tok = base["model_seconds"] / base["prompt_tokens"]
            extra = max(sm["extra_steps"], 0) * t_full + max(sm["lost_tokens"], 0) * t_tok
            sm.update(bound=s["model_seconds"] / (s["model_seconds"] + extra), full_step_ms=t_full * 1e3)
        out.append(sm)
    return out


def check(rows, cfg):
    """The issue's properties; (ok, text) pairs. Throughput properties are
    judged on the sim backend only (its clock is the calibrated cost model plus measured
    scheduler CPU, not wall time on a shared machine)."""
    tol0 = cfg["tolerances"]["zero_hit_within"]
    out = []
    key = {(r["backend"], r["target_hit_rate"], r["cache_label"], r["schedule"]): r for r in rows}
    backends = sorted({r["backend"] for r in rows})
    hs = sorted({r["target_hit_rate"] for r in rows})
    scheds = sorted({r["schedule"] for r in rows})
    for r in rows:
        if r["errors"]:
            out.append((False, f"{r['backend']} h={r['target_hit_rate']} {r['cache_label']}: "
                               f"{r['errors']} requests failed"))
    for b in backends:
        L = next(r["prompt_len"] for r in rows if r["backend"] == b)
        for s in scheds:
            # 1: at 0 % every kind within tol0 of none (sim).
            if b == "sim" and 0.0 in hs and (b, 0.0, "none", s) in key:
                base = key[(b, 0.0, "none", s)]["requests_per_s"]
                worst = min((r["requests_per_s"] / base, r["cache_label"]) for r in rows
                            if r["backend"] == b and r["target_hit_rate"] == 0.0
                            and r["schedule"] == s)
                out.append((abs(worst[0] - 1) <= tol0,
                            f"{b}/{s} h=0: every kind within {tol0:.0%} of none "
                            f"(furthest: {worst[1]} at {worst[0]:.4f}x)"))
            if 1.0 not in hs:
                continue
            # 2: reuse at 100 %: tree kinds at page size 1 all but the last token,
            # hash whole blocks only.
            for lab, want in (("radix-p1", L - 1), ("trie-p1", L - 1),
                              ("hash-xxh3", (L - 1) // 16 * 16), ("radix", (L - 1) // 16 * 16)):
                r = key.get((b, 1.0, lab, s))
                if r:
                    # Most requests (all but the first batch's) reuse exactly that;
                    # with few prompts, the first batch is a large share.
                    typical = (r["cached_per_request_median"] == want
                               if r["num_prompts"] >= 32 else True)
                    out.append((r["cached_per_request_max"] == want and typical,
                                f"{b}/{s} h=1: {lab} reuses {r['cached_per_request_median']:g} "
                                f"(max {r['cached_per_request_max']}) of {L} prompt tokens, "
                                f"expected {want}"))
            # 3: neither tree kind slower than hash at 100 % (page size 1, sim).
            hsh = key.get((b, 1.0, "hash-xxh3", s))
            for lab in ("radix-p1", "trie-p1"):
                r = key.get((b, 1.0, lab, s))
                if b == "sim" and r and hsh:
                    q = r["requests_per_s"] / hsh["requests_per_s"]
                    out.append((q >= 0.99, f"{b}/{s} h=1: {lab} at {q:.4f}x hash-xxh3's "
                                            f"requests/s (not slower, 1 % tie band)"))
        # 4: overlap against sync (sim), as counts the clock cannot move (every
        # request arrives at t = 0, so the schedule is the same on any clock).
        if b == "sim" and {"sync", "overlap"} <= set(scheds):
            costs = overlap_costs(rows, b)
            if costs:
                most = max(costs, key=lambda x: (x["extra_steps"] > x["waves"] or x["extra_steps"] < 0, x["extra_steps"]))
                out.append((all(0 <= x["extra_steps"] <= x["waves"] for x in costs),
                            f"{b}: overlap runs at most one step more than sync per admission wave of "
                            f"{most['max_running']} requests, and never fewer (most: {most['extra_steps']} more, "
                            f"{most['steps_overlap']} against {most['steps_sync']}, of ceil({most['num']}/"
                            f"{most['max_running']}) = {most['waves']} waves, {most['label']} at h={most['h']:g}): "
                            "it retires a wave's finished requests a step later"))
                lost = max(costs, key=lambda x: (x["lost_tokens"] > x["shared_len"], x["lost_tokens"]))
                out.append((all(0 <= x["lost_tokens"] <= x["shared_len"] for x in costs),
                            f"{b}: overlap finds at most one shared prefix fewer prompt tokens cached than sync "
                            f"(most: {lost['lost_tokens']} of {lost['shared_len']}, {lost['label']} at "
                            f"h={lost['h']:g}): one request is admitted while the prefill that caches it is in flight"))
                full = [x for x in costs if x["h"] == 1.0 and x["bound"] is not None]
                if full:
                    near = min(full, key=lambda x: (x["extra_steps"] + x["lost_tokens"] == 0,
                                                    x["device_ratio"] - x["bound"]))
                    out.append((all(x["device_ratio"] >= x["bound"] for x in full),
                                f"{b} h=1: overlap / sync in device time is at least the bound of those counts, "
                                f"each extra step a full {near['full_step_ms']:.2f} ms step and each lost token one "
                                f"of prefill (closest: {near['label']}, {near['device_ratio']:.4f} against "
                                f"{near['bound']:.4f})"))
        # 5: hash-nocache never hits; the hit rate grows with h for caching kinds.
        for r in rows:
            if r["backend"] == b and r["cache"] in ("none", "hash-nocache") and r["cached_tokens"]:
                out.append((False, f"{b}: {r['cache_label']} hit at h={r['target_hit_rate']}"))
        for lab in sorted({r["cache_label"] for r in rows if r["backend"] == b}):
            if lab in ("none", "hash-nocache"):
                continue
            for s in scheds:
                seq = [key[(b, h, lab, s)]["hit_rate"] for h in hs if (b, h, lab, s) in key]
                mono = all(x <= y + 1e-12 for x, y in zip(seq, seq[1:]))
                if not mono:
                    out.append((False, f"{b}/{s}: {lab}'s hit rate does not grow with h: {seq}"))
    if any(r["cache"] == "hash-nocache" for r in rows):
        out.append((all(r["cached_tokens"] == 0 for r in rows if r["cache"] == "hash-nocache"),
                    "hash-nocache never hits"))
    return out
