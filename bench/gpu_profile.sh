#!/usr/bin/env bash
# gpu_profile.sh - one call on a GPU machine that measures what the sim
# profiles are fitted from, into ONE raw JSON file (schema radixkv-gpu-raw/1,
# the one bench/results/h100-2026-11-23/raw.json follows); bench/sim_fit.py
# then makes the own and the peer profile from it on any machine.
#
# usage: bench/gpu_profile.sh [--build DIR] [--out FILE] [--dry-run]
#   --build DIR  a build with sim_step_bench (and, on a GPU, cuda_backend_bench)
#                (default: build)
#   --out FILE   the raw JSON to write (default: gpu-raw.json)
#   --dry-run    no GPU: check the arguments and the build, print the raw
#                schema's sections, make a synthetic raw file from the
#                committed H100 one (every time x 1.1, every rate / 1.1) and
#                fit both profiles from it, loading each through
#                sim_step_bench. Prints one JSON line; exit 0 when all holds.
#
# Status: only --dry-run is implemented. The measuring run (device ceilings,
# GEMMs eager and as a graph, radixkv's attention beside FlexAttention, FA2,
# cuDNN and GQA SDPA decode on the same shapes, the small kernels, whole-step
# and exposed host time, the quick sweep, in at most 8 minutes) is not written
# yet: without --dry-run the script says so and exits 2.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
build=build out=gpu-raw.json dry=0
while [ $# -gt 0 ]; do
    case "$1" in
    --build) build=${2:?--build needs a directory}; shift 2 ;;
    --out) out=${2:?--out needs a file}; shift 2 ;;
    --dry-run) dry=1; shift ;;
    -h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu_profile.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
bench=$build/bench/sim_step_bench
[ -x "$bench" ] || { echo "gpu_profile.sh: --build $build: no $bench (build first)" >&2; exit 2; }
if [ "$dry" = 0 ]; then
    echo "gpu_profile.sh: the measuring run is not implemented yet; only --dry-run is" >&2
    exit 2
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
/usr/bin/python3 - "$root" "$bench" "$tmp" "$out" <<'PY'
import json, os, subprocess, sys
root, bench, tmp, out = sys.argv[1:5]
SECTIONS = {"schema": str, "provenance": dict, "model": str, "device": dict, "gemm": list,
            "attention": dict, "steps": list, "host": dict, "e2e": dict}
src = os.path.join(root, "bench", "results", "h100-2026-11-23", "raw.json")
raw = json.load(open(src))
for k, t in SECTIONS.items():
    if not isinstance(raw.get(k), t):
        sys.exit(f"gpu_profile.sh: {src}: section {k} missing or not a {t.__name__}")
# Synthetic: a slower GPU of the same shape (times x 1.1, rates / 1.1).
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
# The fit reads raw files inside the repository (paths in a profile are
# relative to it): the synthetic one goes to a temporary name there.
rel = os.path.join("bench", "results", f".dry-run-{os.getpid()}.json")
path = os.path.join(root, rel)
json.dump(syn, open(path, "w"), indent=1)
try:
    res = {}
    for eng in ("own", "peer"):
        prof = os.path.join(tmp, f"{eng}.json")
        subprocess.run(["/usr/bin/python3", os.path.join(root, "bench", "sim_fit.py"),
                        "--sim-step-bench", bench, "--raw", path, "--engine", eng,
                        "--id", f"synthetic-{eng}", "--out", prof], check=True)
        line = subprocess.run([bench, "--sim-profile", prof, "--step", "d:1:1023:1"],
                              check=True, capture_output=True, text=True).stdout
        p = json.load(open(prof))
        res[eng] = {"id": p["id"], "hash": json.loads(line)["sim_profile_hash"],
                    "peak_flops": p["device"]["peak_flops"], "eff_attn": p["efficiency"]["attn"],
                    "decode_b1_ms": json.loads(line)["ms"]}
finally:
    os.unlink(path)
ok = res["own"]["peak_flops"] < 790e12 and res["peer"]["eff_attn"] > res["own"]["eff_attn"]
print(json.dumps({"bench": "gpu_profile", "dry_run": True, "out": out,
                  "sections": list(SECTIONS), "profiles": res, "ok": ok}))
sys.exit(0 if ok else 1)
PY
