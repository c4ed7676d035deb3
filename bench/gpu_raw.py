#!/usr/bin/env python3
"""Assemble the outputs of one bench/gpu_profile.sh run into the raw file the
sim profiles are fitted from (schema radixkv-gpu-raw/1, what
bench/results/h100-2026-11-23/raw.json follows; bench/sim_fit.py reads it).

usage: gpu_raw.py --dir DIR --model PRESET --out FILE

DIR holds what gpu_profile.sh wrote there:
  device.json          {"name", "driver", "cuda", "memory_bytes", "date"} (nvidia-smi)
  attn_gpu_bench.jsonl radixkv's attention kernels; its "device" line: copy rate, SMs
  cuda_backend.jsonl   cuda_backend_bench: prefill, decode (graph and eager), GEMMs
  torch_peer.jsonl     bench/torch_peer_attn.py (optional: without it the raw file has
                       no torch rows, and only the own profile can be fitted)
  e2e.jsonl            bench/e2e_gpu_sweep.sh --quick (requests/s; host time per step)
"""
import argparse
import json
import os
import sys


def rows(path, optional=False):
    if not os.path.exists(path):
        if optional:
            return []
        sys.exit(f"gpu_raw.py: {path}: missing")
    out = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line.startswith("{"):
                continue
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError as e:
                sys.exit(f"gpu_raw.py: {path}:{n}: {e}")
    return out


def one(rs, what, path):
    if not rs:
        sys.exit(f"gpu_raw.py: {path}: no {what} line")
    return rs[0]


def assemble(d, model):
    dev = json.load(open(os.path.join(d, "device.json")))
    attn_p = os.path.join(d, "attn_gpu_bench.jsonl")
    attn = rows(attn_p)
    cb_p = os.path.join(d, "cuda_backend.jsonl")
    cb = rows(cb_p)
    peer = rows(os.path.join(d, "torch_peer.jsonl"), optional=True)
    e2e_p = os.path.join(d, "e2e.jsonl")
    e2e = rows(e2e_p)
    adev = one([r for r in attn if r.get("bench") == "device"], "device", attn_p)
    pdev = [r for r in peer if r.get("kind") == "device"]
    gemm = [{"name": r["gemm"], "M": r["M"], "N": r["N"], "K": r["K"],
             "us": round(r["ms_f32_out"] * 1e3, 2), "graph": False}
            for r in cb if r.get("scenario") == "gemm"]
    gemm_tflops = [max(r["tflops_f32_out"] for r in cb if r.get("scenario") == "gemm")]
    copy = [adev["copy_TBps"]]
    prov = {"device": dev["name"], "driver": dev["driver"], "cuda": dev["cuda"],
            "date": dev["date"], "build": dev.get("build", "meson -Dcuda=enabled, release"),
            "sources": "bench/gpu_profile.sh (attn_gpu_bench, cuda_backend_bench, "
                       "torch_peer_attn.py, e2e_gpu_sweep.sh --quick), assembled by bench/gpu_raw.py"}
    if pdev:
        prov["torch"] = pdev[0]["torch"]
        copy.append(pdev[0]["copy_TBps"])
        gemm_tflops.append(pdev[0]["gemm_TFLOPs"])
    steps = []
    for r in cb:
        if r.get("scenario") == "prefill":
            steps.append({"name": f"prefill_{r['tokens']}", "batch": 1, "prefix": 0,
                          "rows": r["tokens"], "graph": False, "ms": r["ms"]})
            steps.append({"name": f"cached_{r['cached_prefix']}_{r['tokens'] - r['cached_prefix']}",
                          "batch": 1, "prefix": r["cached_prefix"],
                          "rows": r["tokens"] - r["cached_prefix"], "graph": False,
                          "ms": r["cached_ms"]})
    for r in cb:
        if r.get("scenario") == "decode":
            base = {"batch": r["batch"], "prefix": r["context"] - 1, "rows": 1}
            steps.append({"name": f"decode_b{r['batch']}", **base, "graph": True, "ms": r["graph_ms"]})
            steps.append({"name": f"decode_b{r['batch']}_eager", **base, "graph": False,
                          "ms": r["eager_ms"]})
    # Host time per step beyond the scheduler's: wall - device time - the
    # scheduler's CPU, over the steps, in the sync runs of none and radix.
    sweep = [r for r in e2e if r.get("bench") == "e2e_gpu_sweep"]
    host = [{"case": f"sweep {r['prompts']}, h = {r['target_hit_rate']:g}, {r['cache']}",
             "ms": round((r["duration"] - r["model_seconds"]) / r["steps"] * 1e3
                         - r["sched_cpu_ms_per_step"], 3)}
            for r in sweep if r["schedule"] == "sync" and r["cache"] in ("none", "radix")
            and r["steps"] > 0]
    if not sweep:
        sys.exit(f"gpu_raw.py: {e2e_p}: no e2e_gpu_sweep lines")
    first = sweep[0]
    return {
        "schema": "radixkv-gpu-raw/1",
        "provenance": prov,
        "model": model,
        "device": {"name": dev["name"], "sms": adev["sms"], "memory_bytes": dev["memory_bytes"],
                   "copy_TBps": copy, "gemm_TFLOPs": gemm_tflops},
        "gemm": gemm,
        "attention": {
            "radixkv": {
                "prefill": [{k: r[k] for k in ("B", "P", "S", "Hq", "Hkv", "D", "page", "ms", "TFLOPs")}
                            for r in attn if r.get("bench") == "attn_prefill_cuda"
                            and r.get("dtype") == "bf16" and r.get("tile_variant", -1) == -1],
                "decode": [{k: r[k] for k in ("B", "L", "Hq", "Hkv", "D", "page", "ms", "TBps")}
                           for r in attn if r.get("bench") == "attn_decode_cuda"
                           and r.get("dtype") == "bf16" and r.get("page") == 16]},
            "torch": {
                "prefill": [{k: r[k] for k in ("case", "B", "P", "S", "Hq", "Hkv", "D", "ms", "TFLOPs")}
                            for r in peer if r.get("kind") == "prefill"],
                "decode": [{k: r[k] for k in ("case", "B", "L", "Hq", "Hkv", "D", "ms", "TBps")}
                           for r in peer if r.get("kind") == "decode"]}},
        "steps": steps,
        "host": {"per_step_ms": host,
                 "note": "(wall - device time) / steps - the scheduler's CPU per step, sync runs"},
        "e2e": {"workload": {"kind": "sweep", "prompt_len": first["prompt_len"],
                             "output_len": first["output_len"], "seed": 1},
                "engine": {"max_batched_tokens": first["budget"],
                           "max_running": first["max_running"], "page_size": first["page_size"],
                           "offline": True},
                "points": [{"set": "quick" if r["quick"] else "full", "num": r["prompts"],
                            "hit_rate": float(r["target_hit_rate"]), "cache": r["cache"],
                            "schedule": r["schedule"], "requests_per_s": r["requests_per_s"]}
                           for r in sweep]},
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    raw = assemble(a.dir, a.model)
    with open(a.out, "w") as f:
        json.dump(raw, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
