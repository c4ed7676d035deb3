#!/usr/bin/env bash
# gpu_check.sh - the CUDA attention kernels on a GPU machine, unattended, in one go:
# configure + build with CUDA, the gpu suite, the benchmarks (radixkv and torch SDPA
# in the same run), ptxas resource usage and the prefill kernel's SASS.
#
#   bench/gpu_check.sh OUTDIR
#
# Run from the repository root. Writes into OUTDIR: build.log, test_gpu.log,
# attn_gpu_bench.jsonl, torch_sdpa.jsonl, ptxas.txt, prefill.sass, summary.txt.
# Honours PKG_CONFIG_PATH, PKG_CONFIG_SYSROOT_DIR, LD_LIBRARY_PATH (libraries
# carried in from elsewhere), and:
#   RKV_GPU_BUILD     build directory (default build-gpu-check)
#   RKV_GPU_PREBUILT  a directory holding test_attention_cuda and attn_gpu_bench
#                     already built: used when the meson build fails
#   RKV_BENCH_REPS    timed repeats per benchmark case (default 30)
#   PYTHON            interpreter with torch (default python3)
# Each step runs even if an earlier one failed; the summary says which failed.
set -u
out=${1:?usage: bench/gpu_check.sh OUTDIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
build=${RKV_GPU_BUILD:-build-gpu-check}
reps=${RKV_BENCH_REPS:-30}
py=${PYTHON:-python3}
status=()
note() { status+=("$1"); echo "== $1"; }

# meson and ninja: on PATH, or as python modules (pip installs both ways).
if command -v meson >/dev/null 2>&1; then meson=(meson)
elif "$py" -m mesonbuild.mesonmain --version >/dev/null 2>&1; then meson=("$py" -m mesonbuild.mesonmain)
elif python3 -m mesonbuild.mesonmain --version >/dev/null 2>&1; then meson=(python3 -m mesonbuild.mesonmain)
else meson=(); fi
if ! command -v ninja >/dev/null 2>&1; then
    nj=$("$py" -c 'import ninja, os; print(os.path.join(ninja.BIN_DIR))' 2>/dev/null) \
        && export PATH="$nj:$PATH"
fi
command -v nvcc >/dev/null 2>&1 || export PATH="/usr/local/cuda/bin:$PATH"

{
    echo "date: $(date -u +%FT%TZ)"
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1
    nvcc --version | tail -1
    echo "git: $(git rev-parse --short HEAD 2>/dev/null) $(git status --porcelain 2>/dev/null | wc -l) changed files"
} > "$out/env.txt"
cat "$out/env.txt"

# 1. Configure and build (jemalloc only when pkg-config finds it).
test_bin="" bench_bin=""
if ((${#meson[@]})); then
    opts=(-Dcuda=enabled -Dtests=true -Dbuildtype=release)
    pkg-config --exists jemalloc 2>/dev/null || opts+=(-Djemalloc=false)
    if [[ -f "$build/build.ninja" ]]; then
        "${meson[@]}" configure "$build" "${opts[@]}" > "$out/build.log" 2>&1
    else
        "${meson[@]}" setup "$build" "${opts[@]}" > "$out/build.log" 2>&1
    fi
    # The whole tree first; if anything fails, still try our two targets alone
    # so one missing library (say check.h) does not also cost the benchmarks.
    if ninja -C "$build" >> "$out/build.log" 2>&1; then
        note "build: ok"
    else
        note "build: FAILED for some targets (see build.log)"
        for t in tests/gpu/test_attention_cuda bench/attn_gpu_bench; do
            ninja -C "$build" "$t" >> "$out/build.log" 2>&1 && note "build $t: ok"
        done
    fi
    [[ -x $build/tests/gpu/test_attention_cuda ]] && test_bin=$build/tests/gpu/test_attention_cuda
    [[ -x $build/bench/attn_gpu_bench ]] && bench_bin=$build/bench/attn_gpu_bench
    pkg-config --exists check 2>/dev/null \
        || note "note: pkg-config finds no 'check' (the gpu suite needs check.h and libcheck)"
else
    note "build: FAILED (no meson: pip install meson ninja)"
fi
if [[ -n "${RKV_GPU_PREBUILT:-}" ]]; then
    [[ -z "$test_bin" ]] && test_bin=$RKV_GPU_PREBUILT/test_attention_cuda \
        && note "using the prebuilt $test_bin"
    [[ -z "$bench_bin" ]] && bench_bin=$RKV_GPU_PREBUILT/attn_gpu_bench \
        && note "using the prebuilt $bench_bin"
fi

# 2. The gpu suite (through meson when it built, so the suite is what CI runs).
#    (--no-rebuild: built above; a program of the suite that failed to build
#    fails alone.)
if [[ -n "$test_bin" && "$test_bin" == "$build/"* ]]; then
    "${meson[@]}" test -C "$build" --suite gpu --no-rebuild --print-errorlogs \
        > "$out/test_gpu.meson.log" 2>&1
    rc=$?
    cp "$build/meson-logs/testlog.txt" "$out/test_gpu.log" 2>/dev/null
    note "meson test --suite gpu: rc=$rc"
elif [[ -n "$test_bin" ]]; then
    "$test_bin" > "$out/test_gpu.log" 2>&1
    note "test_attention_cuda: rc=$?"
else
    note "tests: not run (nothing built)"
fi
# The tuning variants the benchmark times must be right too: the same program
# once per non-default prefill tile and with 128-thread decode CTAs.
if [[ -n "$test_bin" && -x "$test_bin" ]]; then
    for v in 1 2 3; do
        RKV_ATTN_PREFILL_TILE=$v "$test_bin" > "$out/test_gpu_tile$v.log" 2>&1
        note "test_attention_cuda, RKV_ATTN_PREFILL_TILE=$v: rc=$?"
    done
    RKV_ATTN_DECODE_NT=128 "$test_bin" > "$out/test_gpu_nt128.log" 2>&1
    note "test_attention_cuda, RKV_ATTN_DECODE_NT=128: rc=$?"
fi

# 3. Benchmarks: radixkv, then torch SDPA (flash) in the same run, with ratios.
if [[ -n "$bench_bin" && -x "$bench_bin" ]]; then
    "$bench_bin" --reps "$reps" --variants > "$out/attn_gpu_bench.jsonl" 2> "$out/attn_gpu_bench.err"
    note "attn_gpu_bench: rc=$?"
else
    note "attn_gpu_bench: not run (nothing built)"
fi
if "$py" -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
    "$py" bench/torch_sdpa.py "$out/attn_gpu_bench.jsonl" > "$out/torch_sdpa.jsonl" 2> "$out/torch_sdpa.txt"
    note "torch_sdpa.py: rc=$?"
else
    note "torch_sdpa.py: not run (no torch with CUDA in $py)"
fi

# 4. Registers and spills of every kernel; SASS of the prefill kernels with
#    their HMMA (tensor core) instruction counts.
inc=(-Iattention -I"$build")
arch=(-gencode=arch=compute_90,code=sm_90 -std=c++17 --expt-relaxed-constexpr -O3)
if nvcc -c attention/attention_cuda.cu "${inc[@]}" "${arch[@]}" -Xptxas -v \
        -o "$out/attention_cuda.o" > "$out/ptxas.txt" 2>&1; then
    note "ptxas -v: ok"
    if command -v cuobjdump >/dev/null 2>&1; then
        cuobjdump -sass "$out/attention_cuda.o" > "$out/all.sass" 2>&1
        awk '/Function :/ { keep = ($3 ~ /attn_prefill_kernel/) } keep' "$out/all.sass" > "$out/prefill.sass"
        awk '/Function :/ { f = $3 } /HMMA/ { n[f]++ } /LDL|STL/ { l[f]++ }
             END { for (k in n) printf "%6d HMMA %4d LDL/STL  %s\n", n[k], l[k], k }' \
            "$out/all.sass" | sort -k4 > "$out/hmma.txt"
        # Opcode histogram of the default bf16 D=128 prefill kernel (what the
        # inner loop spends its issue slots on).
        awk '/Function :/ { keep = ($3 ~ /attn_prefill_kernelI13__nv_bfloat16Li128ELi128ELi64ELi8ELi3E/) }
             keep && /\/\*[0-9a-f]+\*\// { for (i = 1; i <= NF; i++) if ($i ~ /^[A-Z][A-Z0-9_.]+$/) { split($i, o, "."); n[o[1]]++; break } }
             END { for (k in n) printf "%6d %s\n", n[k], k }' "$out/all.sass" | sort -rn > "$out/prefill_opcodes.txt"
        rm -f "$out/all.sass"
        note "cuobjdump: ok"
    else
        note "cuobjdump: not found"
    fi
    rm -f "$out/attention_cuda.o"
else
    note "ptxas -v: FAILED (see ptxas.txt)"
fi

# 5. Summary.
{
    echo "== steps"
    printf '%s\n' "${status[@]}"
    echo "== gpu suite"
    grep -E "^[0-9]+%: Checks|FAIL" "$out/test_gpu.log" 2>/dev/null | head -20
    for f in "$out"/test_gpu_*.log; do
        [[ -f $f ]] && echo "  $(basename "$f"): $(grep -E '^[0-9]+%: Checks' "$f")"
    done
    grep -E "^(Ok|Fail|Skipped|Timeout):" "$out/test_gpu.meson.log" 2>/dev/null
    echo "== kernels: registers / spills (ptxas)"
    awk '/Function properties for/ { f = $NF } /spill stores/ { sp = $5 " spill st" }
         /Used [0-9]+ registers/ { printf "  %-4s regs  %-16s %s\n", $5, sp, f }' \
        "$out/ptxas.txt" 2>/dev/null | sed 's/_Z[0-9]*//' | sort -u | head -40
    echo "== prefill SASS (HMMA count, local-memory ops)"
    grep prefill "$out/hmma.txt" 2>/dev/null
    echo "== opcodes of the default bf16 D=128 prefill kernel (top 15)"
    head -15 "$out/prefill_opcodes.txt" 2>/dev/null | paste -sd' '
    echo "== radixkv benchmarks"
    "$py" - "$out/attn_gpu_bench.jsonl" <<'PY' 2>/dev/null
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r["bench"] == "device":
        print(f"  device {r['name']}  copy {r['copy_TBps']} TB/s")
    elif r["bench"] == "attn_prefill_cuda":
        v = r.get("tile_variant", -1)
        print(f"  prefill {r['dtype']} B={r['B']:<3} P={r['P']:<6} S={r['S']:<5} tile={v:<3} "
              f"{r['ms']:8.3f} ms {r['TFLOPs']:7.1f} TFLOP/s")
    elif r["bench"] == "attn_decode_cuda":
        print(f"  decode  {r['dtype']} B={r['B']:<3} L={r['L']:<6} page={r['page']:<3} "
              f"{r['ms']:8.3f} ms {r['TBps']:6.3f} TB/s  {100 * r['ratio_to_copy']:5.1f}% of copy")
PY
    echo "== radixkv / torch SDPA flash"
    cat "$out/torch_sdpa.txt" 2>/dev/null
} > "$out/summary.txt"
cat "$out/summary.txt"
