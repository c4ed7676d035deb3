"""The stated properties of experiments/sglang_dropin: (ok, text) pairs over its
rows (one per cache and phase of bench/sglang_cache_bench.py). Imported by
experiments/sglang_dropin/run (--check) and notebooks/sglang_dropin.ipynb, so
both judge the same rows the same way.

Decided: every cache answers the first requests' matches alike, and in the
whole replay every SGLang-interface cache takes the same hit tokens and the
same number of evict calls, at least one (the caches behave alike, and the
replay evicts as its capacity intends); with assert_speed (the config's, per
scale), the adapter's thread CPU time in each of insert, match and evict is
below both SGLang caches' (SGLang's Python RadixCache and its
UnifiedRadixCache over the tree core that ran) on the same calls. Reported
(ok None): per-call and in-cache replay ratios against the goals, and each
cache's in-call time over the replay's memory floor, and the adapter's calls
alone beside the C tree and the floor. Decided too: the
floor's replay (bench/replay_floor.py, the same trace) takes the replay's
hit tokens."""

ADAPTER = "radixkv_adapter"
PYTHON = "sglang_python"
UNIFIED = "sglang_unified"
PHASES = ("insert", "match", "evict")


def per_call(rows):
    """{(cache, phase): row} of the per-call rows."""
    return {(r["cache"], r["phase"]): r for r in rows if r.get("record") == "per_call"}


def replay(rows):
    """{cache: row} of the replay rows."""
    return {r["cache"]: r for r in rows if r.get("record") == "replay"}


def floor(rows):
    """{cache: row} of the floor rows (bench/replay_floor.py): "floor" is the
    floor's own row, the others each cache's in-call time beside it."""
    return {r["cache"]: r for r in rows if r.get("record") == "floor"}


def check(rows, assert_speed, goals):
    out = []
    pc, rp, fl = per_call(rows), replay(rows), floor(rows)
    caches = sorted({c for c, _ in pc})
    for need in (PYTHON, ADAPTER):
        if need not in caches:
            out.append((False, f"no per-call rows of {need}"))
    matched = {c: pc[(c, "match")].get("matched_first_50") for c in caches if (c, "match") in pc}
    if matched:
        ref = matched.get(PYTHON)
        odd = {c: m for c, m in matched.items() if m != ref}
        out.append((not odd and ref is not None,
                    f"the first 50 requests' matched tokens are equal across {len(matched)} caches"
                    + (f" ({ref})" if not odd else f": {PYTHON} {ref}, {odd}")))
    if not rp:
        out.append((False, "no replay rows"))
    else:
        hits = {c: r["hit_tokens"] for c, r in rp.items()}
        evicts = {c: r.get("evict_calls") for c, r in rp.items()}
        for what, per in (("hit tokens", hits), ("evict calls", evicts)):
            same = len(set(per.values())) == 1
            shown = next(iter(per.values())) if same else per
            out.append((same, f"replay {what} equal across {len(per)} caches: {shown}"))
        cap = rp.get(ADAPTER, next(iter(rp.values()))).get("capacity_tokens")
        out.append((all(isinstance(e, int) and e > 0 for e in evicts.values()),
                    f"the replay evicts: every cache makes at least one evict call "
                    f"(capacity {cap} tokens)"))
    # The floor's replay is the bench's replay again (same trace, seed,
    # capacity): the same hit tokens, or the two are not the same replay.
    if "floor" not in fl:
        out.append((False, "no floor row (bench/replay_floor.py)"))
    elif rp:
        want = next(iter(rp.values()))["hit_tokens"]
        got = fl["floor"]["hit_tokens"]
        out.append((got == want, f"the floor's replay takes the replay's hit tokens: {got}"
                                 + ("" if got == want else f" against {want}")))
    for phase in PHASES:
        a = pc.get((ADAPTER, phase))
        if a is None:
            continue
        for other in (PYTHON, UNIFIED):
            o = pc.get((other, phase))
            if o is None:
                if other == UNIFIED:
                    out.append((False if assert_speed else None,
                                f"{phase}: no {UNIFIED} row (UnifiedRadixCache did not import: "
                                f"{a.get('rust_unavailable_because')})"))
                continue
            over = f" over its {o.get('tree_core')} core" if other == UNIFIED else ""
            text = (f"{phase}: adapter thread CPU below {other}{over}'s on the same calls: "
                    f"{a['thread_cpu_s']:.4f} against {o['thread_cpu_s']:.4f} s (median per call "
                    f"{a['median_us_per_call']:.2f} against {o['median_us_per_call']:.2f} us)")
            out.append((a["thread_cpu_s"] < o["thread_cpu_s"] if assert_speed else None, text))
    # The goals of the issue, per call and for the replay's time inside the
    # cache; the Rust-core goal says so when SGLang fell back to its Python core.
    core = next((r.get("tree_core") for r in rows if r.get("tree_core")), None)
    unified = "the Rust core" if core == "rust" else f"UnifiedRadixCache over its {core} core (not Rust)"
    for phase in PHASES:
        a = pc.get((ADAPTER, phase))
        if a is None:
            continue
        for field, other, goal in (("speedup_vs_sglang_unified", unified, goals["vs_rust_core"]),
                                   ("speedup_vs_sglang_python", "the Python cache", goals["vs_python"])):
            if a.get(field) is not None:
                out.append((None, f"{phase}: adapter {a[field]:.2f}x {other} per call "
                                  f"(goal {goal}x: {'met' if a[field] >= goal else 'not met'})"))
    a = rp.get(ADAPTER)
    if a:
        for field, other, goal in (("in_cache_speedup_cpu_vs_sglang_unified", unified,
                                    goals["vs_rust_core"]),
                                   ("in_cache_speedup_cpu_vs_sglang_python", "the Python cache",
                                    goals["vs_python"])):
            if a.get(field) is not None:
                out.append((None, f"replay: adapter {a[field]:.2f}x {other} by thread CPU inside "
                                  f"the cache's calls (goal {goal}x: "
                                  f"{'met' if a[field] >= goal else 'not met'})"))
    if "floor" in fl:
        f = fl["floor"]
        over = ", ".join(f"{c} {r['over_floor_cpu']:.2f}x" for c, r in fl.items() if c != "floor")
        out.append((None, f"replay floor {f['total_ms']['median']:.3f} ms thread CPU (the "
                          f"caller's ids read, the KV indices written); the caches' calls: "
                          f"{over}; the Python cache's time allows "
                          f"{f['python_over_floor_cpu']:.1f}x over it"))
        if "tree_total_ms" in f:
            out.append((None, f"radixkv's tree alone in C on the same requests "
                              f"{f['tree_total_ms']['median']:.3f} ms "
                              f"({f['tree_over_floor_cpu']:.2f}x the floor), with 1 MB of other "
                              f"memory between requests {f['tree_churn_total_ms']['median']:.3f} ms "
                              f"({f['tree_churn_over_floor_cpu']:.2f}x); the adapter's interface "
                              f"adds {f['adapter_minus_tree_churn_cpu_ms']:.3f} ms to the latter"))
        if "adapter_calls_cpu_ms" in f:
            out.append((None, f"the adapter's calls alone (two-token keys, "
                              f"{f['evict_calls']} evict calls) {f['adapter_calls_cpu_ms']:.3f} ms; "
                              f"with the C tree {f['tree_plus_calls_cpu_ms']:.3f} ms, with the "
                              f"floor {f['floor_plus_calls_cpu_ms']:.3f} ms, against the Python "
                              f"cache's time over 20, {f['python_cpu_ms_over_20']:.3f} ms"))
    return out
