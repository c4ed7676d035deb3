#!/usr/bin/env bash
# gpu_profile.sh - ONE call on a GPU machine that measures what the sim
# profiles are fitted from and writes ONE raw JSON file (schema
# radixkv-gpu-raw/1, as bench/results/h100-2026-11-23/raw.json); afterwards,
# on any machine, bench/sim_fit.py makes the own and the peer profile from it:
#   bench/sim_fit.py --sim-step-bench build/bench/sim_step_bench --raw RAW \
#       --engine own --id h100 --out runtime/backends/profiles/h100.json
#   (and --engine peer --id h100@peer)
#
# usage: bench/gpu_profile.sh [--build DIR] [--out FILE] [--model PRESET] [--dry-run]
#   --build DIR   build directory; on a GPU it is configured (-Dcuda=enabled,
#                 release) and built there when it lacks cuda_backend_bench
#                 (default: build-gpu-profile; --dry-run: build)
#   --out FILE    the raw JSON (default: gpu-raw.json); the benches' own outputs
#                 go to FILE.d/ beside it
#   --model NAME  model preset of the steps and the sweep (default: qwen2.5-3b)
#   --dry-run     no GPU: check the arguments and the build, turn the committed
#                 H100 raw file back into the benches' outputs, assemble them
#                 with bench/gpu_raw.py (must give the same raw rows back), and
#                 fit both profiles from a synthetic raw file (times x 1.1)
#                 through sim_step_bench. One JSON line; exit 0 when all holds.
#
# The measuring run, in order (each step under a time limit; about 5 minutes on
# an H100 after the build): device (nvidia-smi), radixkv's attention kernels
# (attn_gpu_bench: prefill and decode shapes, device copy rate), the cuda
# backend (cuda_backend_bench: GEMMs at the preset's shapes and M = 1 .. 1024 for the
# profile's GEMM tables, prefill, cached
# prefix, decode eager and as graphs), the peers' kernels on the same shapes
# (torch_peer_attn.py with $PYTHON, when it imports torch: cuDNN / FA2 prefill,
# GQA-native SDPA decode, copy and GEMM ceilings), the quick end-to-end sweep
# (e2e_gpu_sweep.sh --quick: requests/s, and host time per step from wall,
# device time and scheduler CPU). Not measured yet: GEMMs as graphs, the small
# kernels one by one, FlexAttention with the real mask.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
build="" out=gpu-raw.json dry=0 model=qwen2.5-3b
while [ $# -gt 0 ]; do
    case "$1" in
    --build) build=${2:?--build needs a directory}; shift 2 ;;
    --out) out=${2:?--out needs a file}; shift 2 ;;
    --model) model=${2:?--model needs a preset}; shift 2 ;;
    --dry-run) dry=1; shift ;;
    -h|--help) sed -n '2,33p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu_profile.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
py=/usr/bin/python3

if [ "$dry" = 1 ]; then
    build=${build:-build}
    bench=$build/bench/sim_step_bench
    [ -x "$bench" ] || { echo "gpu_profile.sh: --build $build: no $bench (build first)" >&2; exit 2; }
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    exec "$py" "$here/gpu_profile_dry_run.py" "$root" "$bench" "$tmp" "$out"
fi

command -v nvidia-smi >/dev/null 2>&1 || { echo "gpu_profile.sh: no nvidia-smi: not a GPU machine (try --dry-run)" >&2; exit 2; }
command -v nvcc >/dev/null 2>&1 || export PATH="/usr/local/cuda/bin:$PATH"
build=${build:-build-gpu-profile}
work="$out.d"
mkdir -p "$work"
t0=$(date +%s)
step() { echo "== $(( $(date +%s) - t0 )) s: $*" >&2; }

if [ ! -x "$build/bench/cuda_backend_bench" ]; then
    step "build ($build, -Dcuda=enabled, release)"
    [ -d "$build" ] || meson setup "$build" -Dcuda=enabled -Dbuildtype=release >"$work/build.log" 2>&1
    ninja -C "$build" >>"$work/build.log" 2>&1 || { tail -20 "$work/build.log" >&2; exit 1; }
fi
t0=$(date +%s)
step "device"
IFS=, read -r name driver mem < <(nvidia-smi --query-gpu=name,driver_version,memory.total \
    --format=csv,noheader,nounits | head -1)
cuda=$(nvcc --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/\1/p' || true)
"$py" - "$work/device.json" "$name" "$driver" "$mem" "${cuda:-unknown}" <<'PY'
import json, sys, datetime
path, name, driver, mem, cuda = sys.argv[1:6]
json.dump({"name": name.strip(), "driver": driver.strip(), "cuda": cuda,
           "memory_bytes": float(mem.strip()) * 2 ** 20,
           "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")},
          open(path, "w"))
PY
step "radixkv attention kernels"
timeout 90 "$build/bench/attn_gpu_bench" --reps 30 >"$work/attn_gpu_bench.jsonl"
step "cuda backend: GEMMs, prefill, decode"
timeout 150 "$build/bench/cuda_backend_bench" --model "$model" --reps 20 \
    --gemm-m 1,8,32,64,128,256,512,1024 >"$work/cuda_backend.jsonl"
tpy=${PYTHON:-python3}
if "$tpy" -c 'import torch' 2>/dev/null; then
    step "peer kernels (torch $("$tpy" -c 'import torch; print(torch.__version__)'))"
    timeout 90 "$tpy" "$here/torch_peer_attn.py" >"$work/torch_peer.jsonl" || echo "gpu_profile.sh: torch_peer_attn.py failed; no peer rows" >&2
else
    echo "gpu_profile.sh: \$PYTHON ($tpy) has no torch: no peer rows (only the own profile can be fitted)" >&2
fi
step "quick end-to-end sweep"
timeout 150 "$here/e2e_gpu_sweep.sh" --quick --model "$model" --radixkv "$build/runtime/radixkv" \
    >"$work/e2e.jsonl" 2>"$work/e2e.log"
step "assemble $out"
"$py" "$here/gpu_raw.py" --dir "$work" --model "$model" --out "$out"
step "done"
