#!/usr/bin/env bash
# e2e_gpu_sweep.sh - wde's hit-rate sweep end to end on the GPU:
# `radixkv run --backend cuda` with Qwen2.5-3B-shaped seeded weights.
#
#   N prompts of 1000 tokens whose first floor(h * 1000) tokens are shared,
#   24 output tokens, 1024-token step budget, at most 32 running requests,
#   page size 16, everything at t = 0; caches none / hash-nocache / hash /
#   trie / radix; schedules sync and overlap.
#
# Prints one JSON object per run on stdout (the run's summary plus the sweep's
# settings and the ratio to `none` at the same hit rate and schedule), then a
# table on stderr. Published for comparison (wde, its own GPU): 0 % none 21.03
# req/s, hash 20.62, trie 19.86; 100 % hash 98.84 sync, 124.47 async.
#
# usage: bench/e2e_gpu_sweep.sh [--quick] [--radixkv PATH] [--model PRESET] [--keep DIR]
#                               [--hits "0 1"] [--caches "none radix"] [--num N]
#   --quick   200 prompts, hit rates 0 / 0.5 / 1, caches none / hash / radix:
#             about 75 s on an H100
#   full      1000 prompts, hit rates 0, 0.1, ..., 1, all five caches
#   --hits, --caches, --num override the lists of either scale
# The environment reaches the backend: RKV_CUDA_GRAPHS=2 also runs small mixed
# steps (prompt chunks among decodes) as CUDA graphs.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
radixkv=""
for c in "$here/build/runtime/radixkv" "$here/build/radixkv" "$(command -v radixkv || true)"; do
    if [ -n "$c" ] && [ -x "$c" ]; then radixkv=$c; break; fi
done
quick=0
model=qwen2.5-3b
keep=""
o_hits=""; o_caches=""; o_num=""
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) quick=1 ;;
        --radixkv) radixkv=$2; shift ;;
        --model) model=$2; shift ;;
        --keep) keep=$2; shift ;;
        --hits) o_hits=$2; shift ;;
        --caches) o_caches=$2; shift ;;
        --num) o_num=$2; shift ;;
        -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
        *) echo "e2e_gpu_sweep.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done
if [ -z "$radixkv" ] || [ ! -x "$radixkv" ]; then
    echo "e2e_gpu_sweep.sh: no radixkv binary found; build it or pass --radixkv PATH" >&2
    exit 2
fi

if [ $quick = 1 ]; then
    num=200; hits="0 0.5 1"; caches="none hash radix"
else
    num=1000; hits="0 0.1 0.2 0.3 0.4 0.5 0.6 0.7 0.8 0.9 1"
    caches="none hash-nocache hash trie radix"
fi
[ -n "$o_hits" ] && hits=$o_hits
[ -n "$o_caches" ] && caches=$o_caches
[ -n "$o_num" ] && num=$o_num
schedules="sync overlap"
plen=1000; olen=24; budget=1024; running=32; page=16

work=${keep:-$(mktemp -d /tmp/rkv_sweep.XXXXXX)}
mkdir -p "$work"
[ -z "$keep" ] && trap 'rm -rf "$work"' EXIT
results="$work/results.jsonl"
: >"$results"

# `none` runs first at each hit rate and schedule, so every line can carry its
# ratio to it; lines are printed as runs end (a cut-off sweep keeps them).
case " $caches " in *" none "*) caches="none ${caches/none/}" ;; esac
field() { sed -n "s/.*\"$1\":\([-0-9.eE+]*\).*/\1/p" <<<"$2"; }
for h in $hits; do
    trace="$work/sweep_$h.jsonl"
    "$radixkv" gen sweep --num $num --prompt-len $plen --output-len $olen --hit-rate "$h" \
        --model "$model" --seed 1 --out "$trace" 2>/dev/null
    for s in $schedules; do
        base=""
        for c in $caches; do
            out="$work/run.jsonl"
            log="$work/log_${h}_${c}_${s}.txt"
            "$radixkv" run --backend cuda --model "$model" --cache "$c" --schedule "$s" \
                --page-size $page --max-batched-tokens $budget --max-running $running \
                --offline --no-progress --trace "$trace" --out "$out" 2>"$log" \
                || { echo "e2e_gpu_sweep.sh: run failed (h=$h cache=$c schedule=$s):" >&2;
                     tail -5 "$log" >&2; exit 1; }
            summary=$(grep '"type":"summary"' "$out" | tail -1)
            rps=$(field requests_per_s "$summary")
            [ "$c" = none ] && base=$rps
            ratio=$(awk -v a="$rps" -v b="$base" 'BEGIN { printf("%.4f", (b > 0 ? a / b : 0)) }')
            # The sweep's settings in front of the summary's own fields.
            line="{\"bench\":\"e2e_gpu_sweep\",\"quick\":$quick,\"model\":\"$model\",\"target_hit_rate\":$h,\"prompts\":$num,\"prompt_len\":$plen,\"output_len\":$olen,\"budget\":$budget,\"max_running\":$running,\"page_size\":$page,${summary#\{}"
            line="${line%\}},\"ratio_vs_none\":$ratio}"
            echo "$line" | tee -a "$results"
        done
    done
done

awk '
function num(line, key,   m) {
    if (match(line, "\"" key "\":[-0-9.eE+]+")) { m = substr(line, RSTART, RLENGTH); sub(/.*:/, "", m); return m + 0 }
    return -1
}
function str(line, key,   m) {
    if (match(line, "\"" key "\":\"[^\"]*\"")) { m = substr(line, RSTART, RLENGTH); sub(/^[^:]*:"/, "", m); sub(/"$/, "", m); return m }
    return ""
}
{ h = num($0, "target_hit_rate"); c = str($0, "cache"); s = str($0, "schedule")
  rps[h, c, s] = num($0, "requests_per_s"); rat[h, c, s] = num($0, "ratio_vs_none")
  if (!(h in seenh)) { seenh[h] = 1; hs[++nh] = h }
  if (!(c in seenc)) { seenc[c] = 1; cs[++nc] = c } }
END {
  printf "\nhit-rate sweep on the GPU (requests/s; x = ratio to none)\n" > "/dev/stderr"
  printf "%-6s", "hit" > "/dev/stderr"
  for (j = 1; j <= nc; j++) { printf " %22s", cs[j] "/sync" > "/dev/stderr"; printf " %22s", cs[j] "/overlap" > "/dev/stderr" }
  printf "\n" > "/dev/stderr"
  for (i = 1; i <= nh; i++) {
      printf "%-6s", hs[i] > "/dev/stderr"
      for (j = 1; j <= nc; j++) for (q = 0; q < 2; q++) {
          s = q ? "overlap" : "sync"
          printf(" %13.2f (%5.2fx)", rps[hs[i], cs[j], s], rat[hs[i], cs[j], s]) > "/dev/stderr"
      }
      printf "\n" > "/dev/stderr"
  }
}' "$results"
