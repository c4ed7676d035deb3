#!/usr/bin/env bash
# Execute notebooks headless; figures land in notebooks/figures/ (not committed).
# Usage: notebooks/run.sh [NAME...]   (default: every notebook)
# The executed copies go to notebooks/figures/executed/, the sources stay clean.
# Environment: RKV_FIGURES (where figures go; default notebooks/figures);
# RKV_PYTHON (the Python to use; default the first of Debian's /usr/bin/python3
# and python3 on PATH that has matplotlib and nbconvert, which scripts/deps.sh
# installs for the former).
set -euo pipefail
cd "$(dirname "$0")"
PY=""
for c in "${RKV_PYTHON:-}" /usr/bin/python3 "$(command -v python3 || true)"; do
  if [[ -n "$c" && -x "$c" ]] && "$c" -c "import matplotlib, nbconvert" 2>/dev/null; then PY=$c; break; fi
done
if [[ -z "$PY" ]]; then
  echo "notebooks/run.sh: no Python with matplotlib and nbconvert (scripts/deps.sh installs them; RKV_PYTHON picks one)" >&2
  exit 77
fi
# The kernel's debugger checks frozen modules and warns on every start;
# nothing here debugs, so both the check and the freezing are turned off.
export PYDEVD_DISABLE_FILE_VALIDATION=1
export RKV_ROOT="${RKV_ROOT:-$(cd .. && pwd)}"
names=("$@")
if ((${#names[@]} == 0)); then
  for nb in *.ipynb; do names+=("${nb%.ipynb}"); done
fi
executed="${RKV_FIGURES:-figures}/executed"
mkdir -p "$executed"
for name in "${names[@]}"; do
  echo "notebook: $name" >&2
  # `python3 -m nbconvert` works where the jupyter-nbconvert launcher is not installed.
  "$PY" -Xfrozen_modules=off -m nbconvert --to notebook --execute "$name.ipynb" \
    --output-dir "$executed" --ExecutePreprocessor.timeout=600 >/dev/null
done
