#!/usr/bin/env bash
# Create (or reuse) a virtual environment with Ray from PyPI, outside the clone, for
# experiment sweeps on a Ray cluster (experiments/NAME/run --ray ADDRESS) and the test
# that starts a local Ray head. Prints the venv's python on stdout; the drivers run
# under it (RKV_RAY_PYTHON names it for the test). Tests never call this script; they
# skip (77) without the venv.
set -euo pipefail
venv="${RKV_RAY_VENV:-$HOME/.cache/radixkv/ray-venv}"
if [[ ! -x "$venv/bin/python" ]] || ! "$venv/bin/python" -c "import ray" 2>/dev/null; then
  echo "creating the Ray venv in $venv (one time; Ray is a large wheel)" >&2
  mkdir -p "$(dirname "$venv")"
  /usr/bin/python3 -m venv "$venv" >&2
  "$venv/bin/pip" install -q --disable-pip-version-check ray >&2
fi
echo "$venv/bin/python"
