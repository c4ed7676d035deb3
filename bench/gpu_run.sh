#!/usr/bin/env bash
# gpu_run.sh - everything a lent GPU is for, as ONE unattended call that
# ends inside a time budget and keeps what it has when it is stopped.
#
# usage: bench/gpu_run.sh [--out DIR] [--build DIR] [--budget SECONDS] [--dry-run]
#   --out DIR       raw files (default bench/results/<device>-<date>, device and
#                   date read from nvidia-smi and the clock; dry run: required)
#   --build DIR     build directory; configured with CUDA in release and built
#                   when it lacks bench/cuda_backend_bench (default
#                   build-gpu-run). A build made on a machine with nvcc but
#                   no GPU can be carried in, so the device does not compile.
#   --budget S      wall-clock seconds for the whole call (default 480): each
#                   step runs under min(its own limit, what is left); a step
#                   that no longer fits is recorded as skipped, not started
#   --dry-run       no GPU: every step runs its CPU stand-in (the plan, the
#                   build's programs, the gpu suite's list, gpu_profile.sh
#                   --dry-run, the anchor script compiled) and writes the same
#                   manifest. CI runs this (test gpu_run_dry_run).
#
# Steps, in the order their results matter to the simulator's profile:
#   env        nvidia-smi, nvcc, commit and dirty state of the tree
#   build      meson + ninja with -Dcuda=enabled -Dbuildtype=release (NDEBUG)
#   gpu_suite  meson test --suite gpu (the kernels and the cuda backend
#              against the CPU reference)
#   profile    bench/gpu_profile.sh: attention kernels, the cuda backend's
#              GEMMs/prefill/decode, torch's kernels on the same shapes, and
#              the quick end-to-end sweep (hit rates 0 / 0.5 / 1, caches none /
#              hash / radix, schedules sync and overlap) -> raw.json, the file
#              bench/sim_fit.py refits the own profile from
#   anchor     ../shared/bench/torch_attention_anchor.py when present (torch's
#              SDPA / FlexAttention / cuDNN, copy and GEMM ceilings)
#   attn_sdpa  attn_gpu_bench beside bench/torch_sdpa.py on the same shapes
#
# manifest.json in DIR is rewritten after every step: each step's status (ok,
# failed with its exit code, timeout, skipped, interrupted), seconds, limit and
# log file. SIGINT/SIGTERM stop the running step, mark it and the run
# interrupted, and keep every file written so far.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
out="" build="" budget=480 dry=0
while [ $# -gt 0 ]; do
    case "$1" in
    --out) out=${2:?--out needs a directory}; shift 2 ;;
    --build) build=${2:?--build needs a directory}; shift 2 ;;
    --budget) budget=${2:?--budget needs seconds}; shift 2 ;;
    --dry-run) dry=1; shift ;;
    -h|--help) sed -n '2,37p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu_run.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
case "$budget" in
''|*[!0-9]*) echo "gpu_run.sh: --budget '$budget': need whole seconds" >&2; exit 2 ;;
esac
if [ "$budget" -lt 60 ] || [ "$budget" -gt 3600 ]; then
    echo "gpu_run.sh: --budget $budget: need 60 to 3600 seconds" >&2; exit 2
fi
py=/usr/bin/python3
command -v nvcc >/dev/null 2>&1 || export PATH="/usr/local/cuda/bin:$PATH"

if [ "$dry" = 1 ]; then
    [ -n "$out" ] || { echo "gpu_run.sh: --dry-run needs --out DIR" >&2; exit 2; }
    build=${build:-build}
    [ -f "$build/build.ninja" ] || { echo "gpu_run.sh: --build $build: not a meson build directory" >&2; exit 2; }
else
    command -v nvidia-smi >/dev/null 2>&1 || { echo "gpu_run.sh: no nvidia-smi: not a GPU machine (try --dry-run)" >&2; exit 2; }
    build=${build:-build-gpu-run}
    if [ -z "$out" ]; then
        dev=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tr 'A-Z' 'a-z' |
              sed 's/nvidia //; s/[^a-z0-9]\+/-/g; s/-$//')
        out="$root/bench/results/${dev:-gpu}-$(date -u +%F)"
    fi
fi
build=$(cd "$build" 2>/dev/null && pwd || echo "$build")
mkdir -p "$out" || { echo "gpu_run.sh: --out $out: cannot create" >&2; exit 2; }
out=$(cd "$out" && pwd)
manifest="$out/manifest.json"
t_start=$(date +%s)
names=() states=() secs=() limits=() logs=()
interrupted=0 child=0

write_manifest() { # final? -> manifest.json (atomically: temp name, then rename)
    local tmp="$manifest.tmp.$$"
    {
        printf '%s\n' "$dry" "$budget" "$interrupted" "$1" "$(( $(date +%s) - t_start ))"
        local i
        for i in "${!names[@]}"; do
            printf '%s\t%s\t%s\t%s\t%s\n' "${names[$i]}" "${states[$i]}" "${secs[$i]}" "${limits[$i]}" "${logs[$i]}"
        done
    } | "$py" -c '
import json, sys
lines = sys.stdin.read().split("\n")
dry, budget, intr, final, elapsed = lines[:5]
steps = []
for l in lines[5:]:
    if not l:
        continue
    name, state, sec, limit, log = l.split("\t")
    steps.append({"step": name, "status": state, "seconds": int(sec), "limit_s": int(limit),
                  "log": log})
json.dump({"schema": "radixkv-gpu-run/1", "dry_run": dry == "1", "budget_s": int(budget),
           "elapsed_s": int(elapsed), "finished": final == "1", "interrupted": intr == "1",
           "steps": steps}, sys.stdout, indent=1)
print()' >"$tmp" && mv -f "$tmp" "$manifest"
}

on_signal() {
    interrupted=1
    [ "$child" -gt 0 ] && kill -TERM -- "-$child" 2>/dev/null
}
trap on_signal INT TERM

# run_step NAME LIMIT FUNCTION: the function (exported) under min(LIMIT, budget left), in its own
# process group so a timeout or a signal stops everything it started.
run_step() {
    local name=$1 limit=$2; shift 2
    local left=$(( budget - ($(date +%s) - t_start) ))
    local log="$name.log" i=${#names[@]}
    names+=("$name"); secs+=(0); logs+=("$log")
    if [ "$interrupted" = 1 ]; then states+=("skipped: interrupted"); limits+=(0); write_manifest 0; return; fi
    if [ "$left" -lt 10 ]; then states+=("skipped: budget"); limits+=(0); write_manifest 0; return; fi
    [ "$limit" -gt "$left" ] && limit=$left
    limits+=("$limit"); states+=("running")
    write_manifest 0
    echo "== $(( $(date +%s) - t_start )) s: $name (limit $limit s)" >&2
    local t0=$(date +%s) rc
    setsid timeout --kill-after=5 "$limit" bash -c "$1" >"$out/$log" 2>&1 &
    child=$!
    wait "$child"; rc=$?
    # A signal interrupts `wait` itself: wait again for the step to end.
    while kill -0 "$child" 2>/dev/null; do wait "$child"; rc=$?; done
    child=0
    secs[$i]=$(( $(date +%s) - t0 ))
    if [ "$interrupted" = 1 ]; then states[$i]="interrupted"
    elif [ "$rc" = 0 ]; then states[$i]="ok"
    elif [ "$rc" = 124 ] || [ "$rc" = 137 ]; then states[$i]="timeout"
    elif [ "$rc" = 77 ]; then states[$i]="skipped: exit 77"
    else states[$i]="failed: exit $rc"; fi
    write_manifest 0
}

# In a dry run a step may be told to stall (RKV_GPU_RUN_STALL=NAME), so the
# test can stop the run in the middle of it.
# The sleep's fraction is RKV_GPU_RUN_STALL_TAG (digits), so a test can tell
# its own stalled process from any other sleep on the machine.
stall() { [ "${RKV_GPU_RUN_STALL:-}" = "$1" ] && sleep "300.${RKV_GPU_RUN_STALL_TAG:-0}"; return 0; }

env_step() {
    echo "date: $(date -u +%FT%TZ)"
    if [ "$dry" = 1 ]; then echo "device: none (dry run)"
    else nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; fi
    echo "nvcc: $(nvcc --version 2>/dev/null | tail -1)"
    echo "commit: $(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)"
    echo "dirty: $(git -C "$root" status --porcelain 2>/dev/null | wc -l) changed files"
    echo "build: $build (release, NDEBUG)"
    stall env
}
build_step() {
    stall build
    if [ "$dry" = 1 ]; then
        command -v meson && command -v ninja && command -v nvcc || return 1
        for p in runtime/radixkv bench/sim_step_bench; do
            [ -x "$build/$p" ] || { echo "missing $build/$p"; return 1; }
        done
        echo "dry run: the CUDA release build is configured and built on the device"
        return 0
    fi
    if [ ! -x "$build/bench/cuda_backend_bench" ]; then
        [ -f "$build/build.ninja" ] ||
            meson setup "$build" -Dcuda=enabled -Dbuildtype=release -Dtests=true || return 1
        ninja -C "$build" || return 1
    fi
}
suite_step() {
    stall gpu_suite
    if [ "$dry" = 1 ]; then meson test -C "$build" --no-rebuild --suite gpu --list; return; fi
    meson test -C "$build" --no-rebuild --suite gpu --print-errorlogs
}
profile_step() {
    stall profile
    if [ "$dry" = 1 ]; then
        "$here/gpu_profile.sh" --dry-run --build "$build" --out "$out/raw-dry.json"; return
    fi
    "$here/gpu_profile.sh" --build "$build" --out "$out/raw.json"
}
anchor_step() {
    stall anchor
    local a="$root/../shared/bench/torch_attention_anchor.py" tpy=${PYTHON:-python3}
    [ -f "$a" ] || { echo "no $a (optional): no anchor rows"; return 77; }
    if [ "$dry" = 1 ]; then "$py" -m py_compile "$a" && echo "anchor compiles"; return; fi
    OUT="$out" "$tpy" "$a"
}
sdpa_step() {
    stall attn_sdpa
    local tpy=${PYTHON:-python3}
    if [ "$dry" = 1 ]; then
        "$py" -m py_compile "$here/torch_sdpa.py" && echo "torch_sdpa.py compiles"; return
    fi
    "$build/bench/attn_gpu_bench" --reps 30 >"$out/attn_gpu_bench.jsonl" || return 1
    "$tpy" "$here/torch_sdpa.py" >"$out/torch_sdpa.jsonl"
}

export -f stall env_step build_step suite_step profile_step anchor_step sdpa_step
export dry build out here root py

# Limits: the build dominates when nothing was carried in; the profile's own
# steps have limits of their own inside it.
run_step env 15 env_step
run_step build 200 build_step
run_step gpu_suite 90 suite_step
run_step profile 330 profile_step
run_step anchor 90 anchor_step
run_step attn_sdpa 90 sdpa_step
write_manifest 1
echo "== $(( $(date +%s) - t_start )) s: done; manifest $manifest" >&2
grep -q '"status": "\(failed\|timeout\|interrupted\)' "$manifest" && exit 1
exit 0
