#!/usr/bin/env python3
"""What holds the 100 %-hit speedup down: the hit-rate sweep's two ends on the
sim under each profile, the 100 %-hit run's modelled time split into the cost
function's terms, and the speedup as the per-step fixed cost varies.

usage: sim_fixed_cost.py --radixkv BIN [--profiles h100,h100@peer] [--num 200]
                         [--model qwen2.5-3b]

Workload: the sweep of bench/e2e_gpu_sweep.sh (1000-token prompts, 24 outputs,
budget 1024, 32 running, page size 16, offline), `none` at h = 0 against
`radix` at h = 1, sync, --fixed-clock (modelled time only, so every number is a
pure function of the arguments). Offline, the schedule does not depend on the
clock, so each override changes only the time charged for the same steps.

Terms by difference (each a profile override, the rest unchanged): host time
(overhead_ms=0), kernel floors (kernel_us=0), launches of eager steps
(launch_us=0), GEMM latency (gemm_us=0); fixed cost = their sum. Speedup
against fixed cost: the host time per step set to 0 .. 2x its value, and all
four fixed terms removed. One JSON line per run, then one per profile with the
split; the last line of each profile is its summary.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile


def run(radixkv, trace, gpu, model, cache):
    cmd = [radixkv, "run", "--trace", trace, "--backend", "sim", "--gpu", gpu, "--model", model,
           "--cache", cache, "--schedule", "sync", "--page-size", "16",
           "--max-batched-tokens", "1024", "--max-running", "32", "--offline", "--fixed-clock",
           "--no-progress"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode:
        sys.exit(f"sim_fixed_cost.py: {' '.join(cmd)}: {p.stderr.strip()}")
    return [json.loads(l) for l in p.stdout.splitlines() if '"summary"' in l][-1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--radixkv", required=True)
    ap.add_argument("--profiles", default="h100,h100@peer")
    ap.add_argument("--num", type=int, default=200)
    ap.add_argument("--model", default="qwen2.5-3b")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        traces = {}
        for h in (0, 1):
            traces[h] = os.path.join(tmp, f"h{h}.jsonl")
            subprocess.run([a.radixkv, "gen", "sweep", "--num", str(a.num), "--prompt-len", "1000",
                            "--output-len", "24", "--hit-rate", str(h), "--seed", "1",
                            "--model", a.model, "--out", traces[h]], check=True)
        for prof in a.profiles.split(","):
            def pair(over=""):
                g = prof + over
                s0 = run(a.radixkv, traces[0], g, a.model, "none")
                s1 = run(a.radixkv, traces[1], g, a.model, "radix")
                row = {"bench": "sim_fixed_cost", "gpu": g, "sim_profile_hash": s1["sim_profile_hash"],
                       "rps_h0_none": s0["requests_per_s"], "rps_h1_radix": s1["requests_per_s"],
                       "speedup": s1["requests_per_s"] / s0["requests_per_s"],
                       "steps_h1": s1["steps"], "model_s_h1": s1["model_seconds"],
                       "steps_h0": s0["steps"], "model_s_h0": s0["model_seconds"]}
                print(json.dumps(row))
                return row
            base = pair()
            split = {}
            for term, over in (("host", "overhead_ms=0"), ("kernel_floors", "kernel_us=0"),
                               ("launches", "launch_us=0"), ("gemm_latency", "gemm_us=0")):
                r = pair("," + over)
                split[term + "_ms_per_step"] = (base["model_s_h1"] - r["model_s_h1"]) / base["steps_h1"] * 1e3
                split[term + "_removed_speedup"] = r["speedup"]
            curve = []
            host_ms = split["host_ms_per_step"]
            for f in (0, 0.25, 0.5, 1, 2):
                r = pair(f",overhead_ms={host_ms * f:.6g}") if f != 1 else base
                fixed = host_ms * f + split["kernel_floors_ms_per_step"] + \
                    split["launches_ms_per_step"] + split["gemm_latency_ms_per_step"]
                curve.append({"host_ms": host_ms * f, "fixed_ms_per_step": fixed,
                              "speedup": r["speedup"]})
            none = pair(",overhead_ms=0,kernel_us=0,launch_us=0,gemm_us=0")
            print(json.dumps({
                "bench": "sim_fixed_cost_summary", "sim_profile": prof,
                "sim_profile_hash": base["sim_profile_hash"], "speedup": base["speedup"],
                "step_ms_h1": base["model_s_h1"] / base["steps_h1"] * 1e3,
                **split,
                "fixed_ms_per_step": sum(v for k, v in split.items() if k.endswith("_ms_per_step")),
                "speedup_without_fixed_costs": none["speedup"], "curve": curve}))


if __name__ == "__main__":
    main()
