"""The stated properties of experiments/hit_rate_sweep: (ok, text) pairs over the
result rows. Imported by experiments/hit_rate_sweep/run (--check) and by
notebooks/hit_rate_sweep.ipynb, so both judge the same rows the same way."""


def check(rows, cfg):
    """The issue's properties; (ok, text) pairs. Throughput properties are
    judged on the sim backend only (its clock is the calibrated cost model plus measured
    scheduler CPU, not wall time on a shared machine)."""
    tol0 = cfg["tolerances"]["zero_hit_within"]
    tolo = cfg["tolerances"]["overlap_vs_sync"]
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
        # 4: overlap >= sync (sim), within tolo.
        if b == "sim" and {"sync", "overlap"} <= set(scheds):
            worst = None
            for r in rows:
                if r["backend"] != b or r["schedule"] != "overlap":
                    continue
                sy = key.get((b, r["target_hit_rate"], r["cache_label"], "sync"))
                if sy:
                    q = r["requests_per_s"] / sy["requests_per_s"]
                    if worst is None or q < worst[0]:
                        worst = (q, r["cache_label"], r["target_hit_rate"])
            if worst:
                out.append((worst[0] >= 1 - tolo,
                            f"{b}: overlap >= sync within {tolo:.0%} (lowest ratio {worst[0]:.4f} "
                            f"for {worst[1]} at h={worst[2]})"))
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
