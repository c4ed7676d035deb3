#!/usr/bin/env bash
# Create (or reuse) a virtual environment with the radixkv Python package
# installed from this clone (`pip install .`, meson-python), kept outside the
# clone; suite python's install test uses it and skips without it. The build
# directory build-py/ is kept, so a re-install after a change rebuilds only
# what changed. Prints the venv's python on stdout.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${RKV_PY_VENV:-$HOME/.cache/radixkv/py-venv}"
if [[ ! -x "$venv/bin/python" ]] || ! "$venv/bin/python" -c "import mesonpy, numpy, build" 2>/dev/null; then
  echo "creating the radixkv package venv in $venv (one time)" >&2
  mkdir -p "$(dirname "$venv")"
  /usr/bin/python3 -m venv "$venv" >&2
  "$venv/bin/pip" install -q --disable-pip-version-check -r scripts/py_requirements.txt >&2
fi
# The package itself, every time: it must match this clone.
PATH="$venv/bin:$PATH" "$venv/bin/pip" install -q --disable-pip-version-check --no-build-isolation \
  --config-settings=build-dir=build-py . >&2
echo "$venv/bin/python"
