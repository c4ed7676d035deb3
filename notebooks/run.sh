#!/usr/bin/env bash
# Execute notebooks headless; figures land in notebooks/figures/ (not committed).
# Usage: notebooks/run.sh [NAME...]   (default: every notebook)
# The executed copies go to notebooks/figures/executed/, the sources stay clean.
# Environment: RKV_FIGURES (where figures go; default notebooks/figures).
set -euo pipefail
cd "$(dirname "$0")"
PY=/usr/bin/python3
names=("$@")
if ((${#names[@]} == 0)); then
  for nb in *.ipynb; do names+=("${nb%.ipynb}"); done
fi
executed="${RKV_FIGURES:-figures}/executed"
mkdir -p "$executed"
for name in "${names[@]}"; do
  echo "notebook: $name" >&2
  # `python3 -m nbconvert` works where the jupyter-nbconvert launcher is not installed.
  "$PY" -m nbconvert --to notebook --execute "$name.ipynb" \
    --output-dir "$executed" --ExecutePreprocessor.timeout=600 >/dev/null
done
