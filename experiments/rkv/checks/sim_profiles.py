"""The stated properties of experiments/sim_profiles: (ok, text) pairs over the
result rows. Imported by experiments/sim_profiles/run (--check) and by
notebooks/sim_profiles.ipynb, so both judge the same rows the same way."""


def fixed_split(rows, profile):
    """ms per 100 %-hit step of each fixed term, from the override rows."""
    F = {r["variant"]: r for r in rows if r["kind"] == "fixed" and r["profile"] == profile}
    base = F["base"]
    return {k: (base["model_seconds_h1"] - F[k]["model_seconds_h1"]) / base["steps_h1"] * 1e3
            for k in ("host", "kernel_floors", "launches", "gemm_latency", "all")}


def check(rows, cfg, listed=None):
    out = []
    hashes = {p["name"]: p["hash"] for p in (listed or {}).get("sim_profiles", [])}
    bad = [r for r in rows if r["errors"]]
    out.append((not bad, f"no run has request errors ({len(bad)} do)"))
    for prof in cfg["profiles"]:
        mine = [r for r in rows if r["profile"] == prof]
        ids = {(r["sim_profile"], r["sim_profile_hash"]) for r in mine if r["kind"] == "sweep"}
        want = {(prof, hashes.get(prof))} if listed else ids
        out.append((ids == want and len(ids) == 1,
                    f"{prof}: every sweep row names the profile and the hash radixkv list "
                    f"gives ({sorted(ids)})"))
        F = {r["variant"]: r for r in mine if r["kind"] == "fixed"}
        steps = {(r["steps_h0"], r["steps_h1"]) for r in F.values()}
        out.append((len(steps) == 1, f"{prof}: every override charges the same steps ({steps})"))
        split = fixed_split(rows, prof)
        parts = sum(v for k, v in split.items() if k != "all")
        # model_seconds is printed to the microsecond: six runs' rounding per step.
        tol = 6 * 0.5e-6 / F["base"]["steps_h1"] * 1e3
        out.append((abs(parts - split["all"]) <= tol,
                    f"{prof}: the fixed terms add up ({parts:.4f} vs {split['all']:.4f} ms/step)"))
        out.append((F["all"]["speedup"] > F["base"]["speedup"] and
                    F["host"]["speedup"] > F["base"]["speedup"],
                    f"{prof}: removing fixed costs raises the 100 %-hit speedup "
                    f"({F['base']['speedup']:.3f}x -> host {F['host']['speedup']:.3f}x, "
                    f"all {F['all']['speedup']:.3f}x)"))
        L = {r["pass"]: r for r in mine if r["kind"] == "long_prefill"}
        if L:
            out.append((L[2]["hit_rate"] > 0.9 and L[2]["ttft_mean"] < L[1]["ttft_mean"],
                        f"{prof}: long prefill pass 2 finds its prompts cached (hit rate "
                        f"{L[2]['hit_rate']:.3f}) and its TTFT falls "
                        f"({L[1]['ttft_mean'] * 1e3:.1f} -> {L[2]['ttft_mean'] * 1e3:.1f} ms)"))
        curve = sorted((r for r in mine if r["kind"] == "fixed" and r["host_factor"] is not None),
                       key=lambda r: r["host_factor"])
        mono = all(a["speedup"] >= b["speedup"] for a, b in zip(curve, curve[1:]))
        out.append((mono, f"{prof}: the speedup falls as the host time per step grows "
                          "(" + ", ".join(f"{r['speedup']:.3f}" for r in curve) + ")"))
    return out
