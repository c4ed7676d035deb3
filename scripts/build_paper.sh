#!/usr/bin/env bash
# Build paper/main.pdf with latexmk.
# Usage: scripts/build_paper.sh [--install] [--strict]
#   --install   install TeX first (scripts/deps.sh --with-docs); without it the
#               build is skipped, with a message and exit status 0, when latexmk
#               is missing.
#   --strict    also fail on an undefined reference or citation, on a figure or
#               table still shown as "not built yet", and on a number typed by
#               hand in paper/ (tests/experiments/paper_numbers.py).
# Figures, tables and the macros that carry the prose's numbers
# (paper/generated/*.tex): each experiment's notebook re-draws them from its
# results into notebooks/figures/, copied here to paper/generated/. Missing
# results are produced first at the tiny scale where a radixkv binary is built
# ($RADIXKV, else build-release/, else build/); otherwise the paper shows a note
# in their place.
set -euo pipefail
cd "$(dirname "$0")/.."
strict=0
while (($#)); do
  case "$1" in
    --install) scripts/deps.sh --with-docs; shift ;;
    --strict) strict=1; shift ;;
    *) echo "build_paper.sh: unknown option $1 (usage: scripts/build_paper.sh [--install] [--strict])" >&2
       exit 2 ;;
  esac
done
if ! command -v latexmk >/dev/null; then
  echo "build_paper.sh: latexmk not found; skipping the paper (scripts/build_paper.sh --install adds TeX)" >&2
  exit 0
fi
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
for name in tree_evolution hit_rate_sweep long_prefill overhead sim_calibration tiered_capacity routing; do
  [[ -x experiments/$name/run ]] || continue
  res=experiments/$name/results/$name.jsonl
  [[ $name == tree_evolution ]] && res=experiments/tree_evolution/results/cache_sim.jsonl
  if [[ -f $res ]]; then
    [[ -f notebooks/$name.ipynb ]] && notebooks/run.sh "$name"
  elif [[ -n "$radixkv" ]]; then
    experiments/$name/run --scale tiny --no-progress --notebook
  fi
done
# Experiments II: re-draw from their results where they exist, else run them
# at the tiny scale (the Mooncake ones on a generated trace in the Mooncake
# format when the real traces are missing: they exit 77 then).
for name in real_trace_capacity eviction_policy page_size sglang_ablations; do
  if [[ -f experiments/$name/results/$name.jsonl ]]; then
    notebooks/run.sh "$name"
  elif [[ -n "$radixkv" ]]; then
    rc=0
    experiments/$name/run --scale tiny --no-progress --notebook || rc=$?
    if ((rc == 77)); then
      experiments/$name/run --scale tiny --no-progress --notebook --synthetic
    elif ((rc != 0)); then
      exit "$rc"
    fi
  fi
done
mkdir -p paper/generated
shopt -s nullglob
for f in notebooks/figures/*.pdf notebooks/figures/*.png notebooks/figures/*.tex; do cp "$f" paper/generated/; done
# The configured numbers the prose quotes (\rkv{cfg/NAME/...}), from config.json.
(cd experiments && python3 -m rkv.tex --config-numbers ../paper/generated/config_numbers.tex)
cd paper
# -g: rebuild even when latexmk's database says a previous run failed.
latexmk -g -pdf -interaction=nonstopmode -halt-on-error main.tex >/dev/null || {
  echo "build_paper.sh: latexmk failed; see paper/main.log" >&2
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
  python3 ../tests/experiments/paper_numbers.py . >&2 || bad=1
  if ((bad)); then
    echo "build_paper.sh: --strict: the paper has the problems above" >&2
    exit 1
  fi
fi
echo "paper/main.pdf"
