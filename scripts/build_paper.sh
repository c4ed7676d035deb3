#!/usr/bin/env bash
# Build paper/main.pdf with latexmk.
# Usage: scripts/build_paper.sh [--install] [--strict] [--work DIR]
#   --install   install TeX first (scripts/deps.sh --with-docs); without it the
#               build is skipped, with a message and exit status 0, when latexmk
#               is missing.
#   --strict    also fail on an undefined reference or citation, on a figure or
#               table still shown as "not built yet", and on a number typed by
#               hand in paper/ (tests/experiments/paper_numbers.py).
#   --work DIR  leave the source tree alone: run every experiment the paper
#               reads at the tiny scale into DIR/results, its notebook into
#               DIR/figures, and build a copy of paper/ in DIR/paper (the test
#               suite's paper test; exit 77 without latexmk).
# Figures, tables and the macros that carry the prose's numbers
# (paper/generated/*.tex): each experiment's notebook re-draws them from its
# results into notebooks/figures/, copied here to paper/generated/. Missing
# results are produced first at the tiny scale where a radixkv binary is built
# ($RADIXKV, else build-release/, else build/); otherwise the paper shows a note
# in their place.
set -euo pipefail
cd "$(dirname "$0")/.."
strict=0
work=""
while (($#)); do
  case "$1" in
    --install) scripts/deps.sh --with-docs; shift ;;
    --strict) strict=1; shift ;;
    --work) work="${2:?--work needs a folder}"; shift 2 ;;
    *) echo "build_paper.sh: unknown option $1 (usage: scripts/build_paper.sh [--install] [--strict] [--work DIR])" >&2
       exit 2 ;;
  esac
done
if ! command -v latexmk >/dev/null; then
  echo "build_paper.sh: latexmk not found; skipping the paper (scripts/build_paper.sh --install adds TeX)" >&2
  [[ -n "$work" ]] && exit 77
  exit 0
fi
# Where results, figures and the built paper go.
figs=$PWD/notebooks/figures
paperdir=$PWD/paper
results() { echo "experiments/$1/results"; }
if [[ -n "$work" ]]; then
  mkdir -p "$work"
  work=$(cd "$work" && pwd)
  figs=$work/figures
  paperdir=$work/paper
  rm -rf "$paperdir" "$work/results"
  cp -r paper "$paperdir"
  rm -rf "$paperdir/generated" "$paperdir"/main.{aux,log,out,fls,fdb_latexmk,pdf}
  results() { echo "$work/results/$1"; }
fi
export RKV_FIGURES=$figs
radixkv="${RADIXKV:-}"
if [[ -z "$radixkv" ]]; then
  for b in build-release build; do
    if [[ -x $b/runtime/radixkv ]]; then radixkv="$PWD/$b/runtime/radixkv"; break; fi
  done
fi
if [[ -n "$radixkv" ]]; then export RADIXKV="$radixkv"; fi
# Experiments whose tables and figures the paper reads: re-draw from their
# results when those exist (a changed notebook shows at once), else run them
# at the tiny scale first when a binary exists.
for name in tree_evolution hit_rate_sweep long_prefill overhead sim_calibration sim_profiles tiered_capacity routing; do
  [[ -x experiments/$name/run ]] || continue
  out=$(results "$name")
  res=$out/$name.jsonl
  [[ $name == tree_evolution ]] && res=$out/cache_sim.jsonl
  if [[ -z "$work" && -f $res ]]; then
    [[ -f notebooks/$name.ipynb ]] && notebooks/run.sh "$name"
  elif [[ -n "$radixkv" ]]; then
    experiments/$name/run --scale tiny --no-progress --notebook --out "$out"
  fi
done
# Experiments II: re-draw from their results where they exist, else run them
# at the tiny scale (the Mooncake ones on a generated trace in the Mooncake
# format when the real traces are missing: they exit 77 then).
for name in real_trace_capacity eviction_policy page_size sglang_ablations remote_tier; do
  out=$(results "$name")
  # remote_tier starts a redis-server of its own: without one installed it is
  # re-drawn from existing results only.
  if [[ $name == remote_tier ]] && ! command -v redis-server >/dev/null; then
    [[ -z "$work" && -f $out/$name.jsonl ]] && notebooks/run.sh "$name"
    continue
  fi
  if [[ -z "$work" && -f $out/$name.jsonl ]]; then
    notebooks/run.sh "$name"
  elif [[ -n "$radixkv" ]]; then
    rc=0
    experiments/$name/run --scale tiny --no-progress --notebook --out "$out" || rc=$?
    if ((rc == 77)); then
      experiments/$name/run --scale tiny --no-progress --notebook --synthetic --out "$out"
    elif ((rc != 0)); then
      exit "$rc"
    fi
  fi
done
mkdir -p "$paperdir/generated"
shopt -s nullglob
for f in "$figs"/*.pdf "$figs"/*.png "$figs"/*.tex; do cp "$f" "$paperdir/generated/"; done
# The configured numbers the prose quotes (\rkv{cfg/NAME/...}), from config.json.
(cd experiments && python3 -m rkv.tex --config-numbers "$paperdir/generated/config_numbers.tex")
src=$PWD
cd "$paperdir"
# -g: rebuild even when latexmk's database says a previous run failed.
latexmk -g -pdf -interaction=nonstopmode -halt-on-error main.tex >/dev/null || {
  echo "build_paper.sh: latexmk failed; see $paperdir/main.log" >&2
  tail -20 main.log >&2
  exit 1
}
if ((strict)); then
  bad=0
  if grep -E "LaTeX Warning: (Reference|Citation) .* undefined|There were undefined references" main.log >&2; then
    bad=1
  fi
  if grep -q "not built yet" main.log; then
    grep "not built yet" main.log >&2
    bad=1
  fi
  python3 "$src/tests/experiments/paper_numbers.py" "$src/paper" >&2 || bad=1
  if ((bad)); then
    echo "build_paper.sh: --strict: the paper has the problems above" >&2
    exit 1
  fi
fi
echo "$paperdir/main.pdf"
