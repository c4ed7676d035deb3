#!/usr/bin/env python3
"""bench/gpu_profile.sh --dry-run, without a GPU (a CI test runs it):

1. The committed H100 raw file is turned back into the outputs of the benches
   gpu_profile.sh runs (attn_gpu_bench, cuda_backend_bench, torch_peer_attn.py,
   e2e_gpu_sweep.sh, the device line), bench/gpu_raw.py assembles them, and
   every row they carry (GEMMs, radixkv's and torch's attention, steps, the
   quick sweep's points) must come back unchanged.
2. A synthetic raw file (the committed one with every time x 1.1 and every
   rate / 1.1) is fitted into an own, a peer and an own profile with GEMM
   tables by bench/sim_fit.py, and each is loaded through sim_step_bench
   --sim-profile.

usage: gpu_profile_dry_run.py ROOT SIM_STEP_BENCH TMPDIR OUT
Prints one JSON line; exit 0 when every check holds.
"""
import json
import os
import subprocess
import sys

root, bench, tmp, out = sys.argv[1:5]
SECTIONS = {"schema": str, "provenance": dict, "model": str, "device": dict, "gemm": list,
            "attention": dict, "steps": list, "host": dict, "e2e": dict}
src = os.path.join(root, "bench", "results", "h100-2026-11-23", "raw.json")
raw = json.load(open(src))
problems = []
for k, t in SECTIONS.items():
    if not isinstance(raw.get(k), t):
        problems.append(f"{src}: section {k} missing or not a {t.__name__}")


def jl(name, rows):
    with open(os.path.join(tmp, name), "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")


# 1. The benches' outputs, from the committed rows.
prov, dev = raw["provenance"], raw["device"]
json.dump({"name": dev["name"], "driver": prov["driver"], "cuda": prov["cuda"],
           "memory_bytes": dev["memory_bytes"], "date": prov["date"]},
          open(os.path.join(tmp, "device.json"), "w"))
att = raw["attention"]
jl("attn_gpu_bench.jsonl",
   [{"bench": "device", "name": dev["name"], "sms": dev["sms"], "copy_TBps": dev["copy_TBps"][0]}]
   + [{"bench": "attn_prefill_cuda", "dtype": "bf16", "tile_variant": -1, "reps": 30, **r}
      for r in att["radixkv"]["prefill"]]
   + [{"bench": "attn_decode_cuda", "dtype": "bf16", "reps": 30, **r}
      for r in att["radixkv"]["decode"]])
cb = []
st = {s["name"]: s for s in raw["steps"]}
pf = next(s for s in raw["steps"] if s["prefix"] == 0 and s["rows"] > 1)
cached = next(s for s in raw["steps"] if s["prefix"] > 0 and s["rows"] > 1)
cb.append({"bench": "cuda_backend", "scenario": "prefill", "tokens": pf["rows"], "ms": pf["ms"],
           "cached_prefix": cached["prefix"], "cached_ms": cached["ms"]})
for s in raw["steps"]:
    if s["rows"] == 1 and s["graph"]:
        cb.append({"bench": "cuda_backend", "scenario": "decode", "batch": s["batch"],
                   "context": s["prefix"] + 1, "graph_ms": s["ms"],
                   "eager_ms": st[s["name"] + "_eager"]["ms"]})
for g in raw["gemm"]:
    cb.append({"bench": "cuda_backend", "scenario": "gemm", "gemm": g["name"], "M": g["M"],
               "N": g["N"], "K": g["K"], "ms_f32_out": g["us"] / 1e3,
               "tflops_f32_out": 2 * g["M"] * g["N"] * g["K"] / (g["us"] * 1e-6) / 1e12})
jl("cuda_backend.jsonl", cb)
jl("torch_peer.jsonl",
   [{"bench": "torch_peer", "kind": "device", "torch": prov["torch"],
     "copy_TBps": dev["copy_TBps"][0], "gemm_TFLOPs": dev["gemm_TFLOPs"][0]}]
   + [{"bench": "torch_peer", "kind": "prefill", **r} for r in att["torch"]["prefill"]]
   + [{"bench": "torch_peer", "kind": "decode", **r} for r in att["torch"]["decode"]])
wl, eng = raw["e2e"]["workload"], raw["e2e"]["engine"]
quick = [p for p in raw["e2e"]["points"] if p["set"] == "quick"]
jl("e2e.jsonl", [{"bench": "e2e_gpu_sweep", "quick": 1, "model": raw["model"],
                  "target_hit_rate": p["hit_rate"], "prompts": p["num"],
                  "prompt_len": wl["prompt_len"], "output_len": wl["output_len"],
                  "budget": eng["max_batched_tokens"], "max_running": eng["max_running"],
                  "page_size": eng["page_size"], "type": "summary", "backend": "cuda",
                  "cache": p["cache"], "schedule": p["schedule"],
                  "requests_per_s": p["requests_per_s"], "duration": 4.0, "model_seconds": 3.0,
                  "steps": 500, "sched_cpu_ms_per_step": 0.5} for p in quick])
assembled = os.path.join(tmp, "assembled.json")
subprocess.run([sys.executable, os.path.join(root, "bench", "gpu_raw.py"), "--dir", tmp,
                "--model", raw["model"], "--out", assembled], check=True)
a = json.load(open(assembled))
for k, t in SECTIONS.items():
    if not isinstance(a.get(k), t):
        problems.append(f"assembled: section {k} missing or not a {t.__name__}")
for what, got, want in (("gemm", a["gemm"], raw["gemm"]),
                        ("attention", a["attention"], raw["attention"]),
                        ("steps", a["steps"], raw["steps"]),
                        ("e2e quick points", a["e2e"]["points"], quick)):
    if got != want:
        problems.append(f"gpu_raw.py: {what} do not come back unchanged")
# wall 4 s - device 3 s over 500 steps = 2 ms, less 0.5 ms of scheduler CPU.
if not a["host"]["per_step_ms"] or any(abs(h["ms"] - 1.5) > 1e-9 for h in a["host"]["per_step_ms"]):
    problems.append(f"gpu_raw.py: host per step {a['host']['per_step_ms']}, want 1.5 ms each")

# 2. Both fits on a synthetic raw file (a slower GPU of the same shape).
f = 1.1
syn = json.loads(json.dumps(raw))
syn["provenance"]["date"] = "synthetic"
syn["device"]["copy_TBps"] = [x / f for x in raw["device"]["copy_TBps"]]
syn["device"]["gemm_TFLOPs"] = [x / f for x in raw["device"]["gemm_TFLOPs"]]
for g in syn["gemm"]:
    g["us"] *= f
for side in syn["attention"].values():
    for r in side["prefill"]:
        r["TFLOPs"] /= f
    for r in side["decode"]:
        r["TBps"] /= f
for s in syn["steps"]:
    s["ms"] *= f
for h in syn["host"]["per_step_ms"]:
    h["ms"] *= f
# sim_fit.py names raw files relative to the repository: the synthetic one
# lives there under a temporary name while it runs.
path = os.path.join(root, "bench", "results", f".dry-run-{os.getpid()}.json")
json.dump(syn, open(path, "w"), indent=1)
res = {}
try:
    for eng in ("own", "peer", "own+tables"):
        prof = os.path.join(tmp, f"{eng}.json")
        subprocess.run([sys.executable, os.path.join(root, "bench", "sim_fit.py"),
                        "--sim-step-bench", bench, "--raw", path, "--engine", eng.split("+")[0],
                        "--id", f"synthetic-{eng}", "--out", prof]
                       + (["--tables"] if eng.endswith("tables") else []), check=True)
        line = json.loads(subprocess.run([bench, "--sim-profile", prof, "--step", "d:1:1023:1"],
                                         check=True, capture_output=True, text=True).stdout)
        p = json.load(open(prof))
        res[eng] = {"id": line["sim_profile"], "hash": line["sim_profile_hash"],
                    "peak_flops": p["device"]["peak_flops"], "eff_attn": p["efficiency"]["attn"],
                    "decode_b1_ms": line["ms"]}
finally:
    os.unlink(path)
if not res["own"]["peak_flops"] < 790e12:
    problems.append("synthetic own fit: a slower GPU kept the H100's ceiling")
# With its GEMM table the own fit charges decode batch 1 its measured GEMMs
# (x 1.1 here) instead of the formula's: a different step time.
if res["own+tables"]["decode_b1_ms"] == res["own"]["decode_b1_ms"]:
    problems.append("synthetic fit with --tables: the GEMM table changed nothing")
if not res["peer"]["eff_attn"] > res["own"]["eff_attn"]:
    problems.append("synthetic peer fit: attention not faster than radixkv's")
print(json.dumps({"bench": "gpu_profile", "dry_run": True, "out": out,
                  "sections": list(SECTIONS), "profiles": res, "problems": problems,
                  "ok": not problems}))
for p in problems:
    print(f"gpu_profile.sh --dry-run: {p}", file=sys.stderr)
sys.exit(1 if problems else 0)
