"""The stated properties of experiments/sim_calibration: (ok, text) pairs over the
result rows. Imported by experiments/sim_calibration/run (--check) and by
notebooks/sim_calibration.ipynb, so both judge the same rows the same way."""


def pct(x):
    return "" if x is None else f"{100 * x:+.1f} %"


def check(rows, cfg):
    bd = cfg["bounds"]
    out = []
    for r in rows:
        if r["kind"] == "step" and r["batch"] <= bd["step_max_batch"]:
            out.append((abs(r["rel_err"]) <= bd["step_rel_err"],
                        f"step {r['name']} ({r['mode']}): sim {r['sim_ms']:.2f} ms vs real "
                        f"{r['real_ms']:.2f} ms, error {pct(r['rel_err'])} "
                        f"(bound {bd['step_rel_err']:.0%})"))
        if r["kind"] == "e2e" and r["cache"] in bd["e2e_caches"]:
            out.append((abs(r["rel_err"]) <= bd["e2e_rel_err"],
                        f"e2e {r['set']} h={r['target_hit_rate']:g} {r['cache']} {r['schedule']}: "
                        f"sim {r['sim_requests_per_s']:.1f} vs real "
                        f"{r['real_requests_per_s']:.1f} req/s, error {pct(r['rel_err'])} "
                        f"(bound {bd['e2e_rel_err']:.0%})"))
    return out
