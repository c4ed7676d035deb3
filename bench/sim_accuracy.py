#!/usr/bin/env python3
"""The sim against every measured GPU step and end-to-end point in
bench/results/*/raw.json, per profile: a generated table, (sim - real) / real.

usage: sim_accuracy.py --radixkv BIN --sim-step-bench BIN [--profiles h100,h100@peer]
                       [--sets quick,full] [--out-md FILE] [--out-jsonl FILE]

Steps go through sim_step_bench with the host time left out (CUDA event times
cover the device only: overhead_ms=0) and, for eager rows, graphs=0. End-to-end
points run `radixkv gen sweep` + `radixkv run --backend sim` on the raw file's
workload and engine settings, with the scheduler's measured CPU time on the
clock (as the GPU runs had), so the e2e columns move a little between runs.
Goal for the own profile: |error| <= 10 % per step up to batch 128 and end to end.
A peer profile models another engine, so its column against radixkv's GPU runs is
not an accuracy figure: it shows how far the kernels alone move each point.

Each point is marked by its place in the profile's fit: "in" when its measurement
entered a fitted constant (sim_fit.fit_points names which), "held out" when it comes
from a raw file the profile was fitted from but entered no constant, "out" when the
raw file is not among the profile's fit.raw (an independent run). Only "out" points
test the model as a prediction; the summary counts the three apart.
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sim_fit  # noqa: E402  (the fit's own point selectors)

SAMPLES = ("in", "held out", "out")
BOUND = 0.10  # the table's "within": |sim - real| / real <= BOUND


def sample_of(raw, rel, prof):
    """point key -> "in" / "held out" / "out" for one profile (see the module doc)."""
    path = os.path.join(ROOT, "runtime", "backends", "profiles", prof + ".json")
    try:
        fitted = json.load(open(path)).get("fit", {}).get("raw", [])
    except OSError as e:
        sys.exit(f"sim_accuracy.py: profile {prof}: {e}")
    used = sim_fit.fit_points(raw) if rel in fitted else {}
    return lambda key: ("in" if key in used else "held out") if rel in fitted else "out"


def sh(cmd):
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    if p.returncode:
        sys.exit(f"sim_accuracy.py: {' '.join(map(str, cmd))} failed: {p.stderr.strip()}")
    return p.stdout


def steps(raw, prof, bench):
    for s in raw["steps"]:
        spec = prof + ",overhead_ms=0" + ("" if s["graph"] or s["rows"] > 1 else ",graphs=0")
        o = json.loads(sh([bench, "--model", raw["model"], "--gpu", spec, "--step",
                           f"{s['name']}:{s['batch']}:{s['prefix']}:{s['rows']}"]))
        yield {"kind": "step", "key": ("step", s["name"]), "name": s["name"], "batch": s["batch"], "graph": s["graph"],
               "real": s["ms"], "sim": o["ms"], "unit": "ms",
               "sim_profile": prof, "sim_profile_hash": o["sim_profile_hash"]}


def e2e(raw, prof, radixkv, sets, tmp):
    wl, eng = raw["e2e"]["workload"], raw["e2e"]["engine"]
    for pt in raw["e2e"]["points"]:
        if pt["set"] not in sets:
            continue
        trace = os.path.join(tmp, f"sweep_n{pt['num']}_h{pt['hit_rate']}.jsonl")
        if not os.path.exists(trace):
            sh([radixkv, "gen", "sweep", "--num", pt["num"], "--prompt-len", wl["prompt_len"],
                "--output-len", wl["output_len"], "--hit-rate", pt["hit_rate"],
                "--seed", wl["seed"], "--model", raw["model"], "--out", trace])
        cmd = [radixkv, "run", "--trace", trace, "--backend", "sim", "--gpu", prof,
               "--model", raw["model"], "--cache", pt["cache"], "--schedule", pt["schedule"],
               "--page-size", eng["page_size"], "--max-batched-tokens", eng["max_batched_tokens"],
               "--max-running", eng["max_running"], "--no-progress"]
        if eng.get("offline"):
            cmd.append("--offline")
        summ = [json.loads(l) for l in sh(cmd).splitlines() if '"summary"' in l][-1]
        yield {"kind": "e2e", "key": ("e2e", (pt["set"], pt["num"], pt["hit_rate"], pt["cache"],
                                              pt["schedule"])),
               "name": f"{pt['set']} {pt['num']}, h = {pt['hit_rate']:g}, "
               f"{pt['cache']} {pt['schedule']}", "cache": pt["cache"],
               "real": pt["requests_per_s"], "sim": summ["requests_per_s"], "unit": "req/s",
               "sim_profile": summ["sim_profile"], "sim_profile_hash": summ["sim_profile_hash"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--radixkv", required=True)
    ap.add_argument("--sim-step-bench", required=True)
    ap.add_argument("--profiles", default="h100,h100@peer")
    ap.add_argument("--sets", default="quick,full")
    ap.add_argument("--out-md")
    ap.add_argument("--out-jsonl")
    a = ap.parse_args()
    profs, sets = a.profiles.split(","), set(a.sets.split(","))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for path in sorted(glob.glob(os.path.join(ROOT, "bench", "results", "*", "raw.json"))):
            raw = json.load(open(path))
            rel = os.path.relpath(path, ROOT)
            for prof in profs:
                sample = sample_of(raw, rel, prof)
                for r in list(steps(raw, prof, a.sim_step_bench)) + \
                        list(e2e(raw, prof, a.radixkv, sets, tmp)):
                    r["sample"] = sample(r.pop("key"))
                    r["raw"] = rel
                    r["rel_err"] = (r["sim"] - r["real"]) / r["real"]
                    rows.append(r)
    if a.out_jsonl:
        with open(a.out_jsonl, "w") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
    lines = ["# sim accuracy (generated by bench/sim_accuracy.py; do not edit)", "",
             "Error = (sim - real) / real. Steps: device time (host time left out), eager rows "
             "with graphs=0. End to end: requests/s with the scheduler's measured CPU time. "
             "The real runs are radixkv's own engine: only its profile's column is an accuracy "
             "figure; a peer column shows what the peer's kernels change.",
             "Fit: \"in\" when the point's measurement entered a fitted constant of the "
             "profiles (bench/sim_fit.py, fit_points), \"held out\" when it comes from the run "
             "the profiles were fitted from but entered no constant; an \"in\" error is a "
             "residual of the fit. Within = |sim - real| / real <= "
             f"{100 * BOUND:.0f} %.",
             "Real figures: " + ", ".join(sorted({r["raw"] for r in rows})) + ".", ""]
    hdr = "| point | fit | real | " + " | ".join(f"{p} | error" for p in profs) + " |"
    lines += [hdr, "|" + "---|" * (3 + 2 * len(profs))]
    keyed = {}
    for r in rows:
        keyed.setdefault((r["kind"], r["name"]), {})[r["sim_profile"]] = r
    for (kind, name), by in keyed.items():
        first = next(iter(by.values()))
        fits = sorted({r["sample"] for r in by.values()}, key=SAMPLES.index)
        cells = [f"{name} ({first['unit']})", " / ".join(fits), f"{first['real']:.2f}"]
        for p in profs:
            r = by.get(p)
            cells += [f"{r['sim']:.2f}", f"{100 * r['rel_err']:+.1f} %"] if r else ["", ""]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    for p in profs:
        pr = [r for r in rows if r["sim_profile"] == p]
        if not pr:
            continue
        parts = []
        for smp in SAMPLES:
            sr = [r for r in pr if r["sample"] == smp]
            if not sr:
                parts.append(f"no {smp} point")
                continue
            worst = max(sr, key=lambda r: abs(r["rel_err"]))
            within = sum(abs(r["rel_err"]) <= BOUND for r in sr)
            parts.append(f"{smp}: {within} of {len(sr)} within {100 * BOUND:.0f} %, worst {worst['name']} "
                         f"{100 * worst['rel_err']:+.1f} %")
        lines.append(f"- {p} (hash {pr[0]['sim_profile_hash']}): " + "; ".join(parts) + ".")
    if not any(r["sample"] == "out" for r in rows):
        lines += ["", "No out-of-sample GPU run exists yet: every point above comes from a run "
                  "the profiles were fitted from, so no error here is a prediction."]
    text = "\n".join(lines) + "\n"
    if a.out_md:
        open(a.out_md, "w").write(text)
    sys.stdout.write(text)


if __name__ == "__main__":
    main()
