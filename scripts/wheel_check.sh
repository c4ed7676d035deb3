#!/usr/bin/env bash
# The wheel, checked by hand (a full project compile, too slow for a CI test
# on two cores): `python -m build --wheel` in the package venv
# (scripts/py_venv.sh), the wheel installed with no index into a fresh venv,
# then the API tests against that copy (tests/python/test_installed.py).
# Usage: scripts/wheel_check.sh [OUTDIR]   (default: a temporary folder)
set -euo pipefail
cd "$(dirname "$0")/.."
py=$(scripts/py_venv.sh)
out="${1:-$(mktemp -d)}"
PATH="$(dirname "$py"):$PATH" "$py" -m build --wheel --no-isolation -Cbuild-dir=build-py \
  --outdir "$out/dist" . >&2
wheel=$(ls "$out"/dist/radixkv-*.whl | head -n 1)
/usr/bin/python3 -m venv "$out/venv"
"$out/venv/bin/pip" install -q --disable-pip-version-check --no-index "$wheel"
RKV_PYPKG_PYTHON="$out/venv/bin/python" /usr/bin/python3 tests/python/test_installed.py \
  tests/python/test_api.py
echo "wheel_check: $wheel installs and passes the API tests"
