"""The stated properties of experiments/disaggregation: (ok, text) pairs over
the result rows, so that --check (and a notebook) judge the same rows alike."""


def check(rows, cfg):
    out = []
    for s in rows:
        out.append((s["errors"] == 0 and s["requests"] == s["trace_requests"],
                    f"{s['workload']} {s['arm']} rate {s['rate']}: every request finished once "
                    f"({s['requests']} of {s['trace_requests']}, {s['errors']} errors)"))
    by = {(s["workload"], s["arm"], s["rate"]): s for s in rows}
    arms = sorted({s["arm"] for s in rows if s["mode"] == "disaggregated"})
    # Long prompts steal decode time from colocated engines (a prefill chunk
    # rides in the decode step): disaggregated decode engines keep TPOT steady.
    if any(s["workload"] == "long-prompt" for s in rows):
        top = max(s["rate"] for s in rows if s["workload"] == "long-prompt")
        col = by[("long-prompt", "colocated", top)]
        spread_c = col["tpot_p99"] / col["tpot_p50"]
        for arm in arms:
            d = by[("long-prompt", arm, top)]
            spread_d = d["tpot_p99"] / d["tpot_p50"]
            out.append((spread_d < spread_c,
                        f"long-prompt, rate {top}: {arm} TPOT p99/p50 {spread_d:.3f} < colocated "
                        f"{spread_c:.3f}"))
    # A decode engine's own cache keeps the shared prefix: most handed-over
    # pages are already there, so few cross the link.
    for s in rows:
        if s["workload"] == "static-prefix" and s["mode"] == "disaggregated":
            out.append((s["decode_hit_rate"] >= 0.8,
                        f"static-prefix {s['arm']} rate {s['rate']}: decode engines already held "
                        f"{s['decode_hit_rate']:.3f} of the handed-over pages (>= 0.8)"))
    return out
