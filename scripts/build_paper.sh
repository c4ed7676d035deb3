#!/usr/bin/env bash
# Build paper/main.pdf with latexmk.
# Usage: scripts/build_paper.sh [--install]
#   --install   install TeX first (scripts/deps.sh --with-docs); without it the
#               build is skipped, with a message and exit status 0, when latexmk
#               is missing.
# Figures and tables: copied from notebooks/figures/ into paper/generated/;
# each experiment's notebook re-draws them from its results first, and missing
# results are produced first when the radixkv binary is built (experiment run
# at the small scale + notebook); otherwise the paper shows a note in their place.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ "${1:-}" == "--install" ]]; then
  scripts/deps.sh --with-docs
elif [[ -n "${1:-}" ]]; then
  echo "build_paper.sh: unknown option $1 (usage: scripts/build_paper.sh [--install])" >&2
  exit 2
fi
if ! command -v latexmk >/dev/null; then
  echo "build_paper.sh: latexmk not found; skipping the paper (scripts/build_paper.sh --install adds TeX)" >&2
  exit 0
fi
if [[ ! -f notebooks/figures/tree_evolution.pdf && -x build/runtime/radixkv ]]; then
  experiments/tree_evolution/run --check --notebook
fi
# Experiments whose tables and figures the paper reads: re-draw from their
# results when those exist (a changed notebook shows at once), else run them
# at the small scale first.
for name in hit_rate_sweep long_prefill overhead; do
  [[ -x experiments/$name/run ]] || continue
  if [[ -f experiments/$name/results/$name.jsonl ]]; then
    notebooks/run.sh "$name"
  elif [[ -x build/runtime/radixkv || -x build-release/runtime/radixkv ]]; then
    experiments/$name/run --notebook
  fi
done
# tiered_capacity, routing and Experiments II: re-draw from their results where
# they exist (the Mooncake ones need the traces, so they are not run from here).
for name in tiered_capacity routing real_trace_capacity eviction_policy page_size sglang_ablations remote_tier; do
  if [[ -f experiments/$name/results/$name.jsonl ]]; then
    notebooks/run.sh "$name"
  fi
done
mkdir -p paper/generated
shopt -s nullglob
for f in notebooks/figures/*.pdf notebooks/figures/*.png notebooks/figures/*.tex; do cp "$f" paper/generated/; done
cd paper
latexmk -pdf -interaction=nonstopmode -halt-on-error main.tex >/dev/null || {
  echo "build_paper.sh: latexmk failed; see paper/main.log" >&2
  tail -20 main.log >&2
  exit 1
}
echo "paper/main.pdf"
