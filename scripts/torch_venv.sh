#!/usr/bin/env bash
# Create (or reuse) a virtual environment with torch (CPU use) and transformers,
# kept outside the clone; the reference tests use it and skip without it.
# Prints the venv's python on stdout.
set -euo pipefail
venv="${RKV_TORCH_VENV:-$HOME/.cache/radixkv/torch-venv}"
if [[ ! -x "$venv/bin/python" ]] || ! "$venv/bin/python" -c "import torch, transformers, safetensors" 2>/dev/null; then
  echo "creating torch reference venv in $venv (one time, a few minutes)" >&2
  mkdir -p "$(dirname "$venv")"
  /usr/bin/python3 -m venv "$venv" >&2
  "$venv/bin/pip" install -q --disable-pip-version-check torch transformers safetensors numpy >&2
fi
# tiktoken: bench/tokenizer_bench.py's second reference (an older venv gets it added).
if ! "$venv/bin/python" -c "import tiktoken" 2>/dev/null; then
  "$venv/bin/pip" install -q --disable-pip-version-check tiktoken >&2
fi
# pyflakes, pinned so that its findings do not change under the check
# (tests/arch/flakes.py, suite arch); an older venv gets it added.
if ! "$venv/bin/python" -c "import pyflakes, sys; sys.exit(pyflakes.__version__ != '4.1.0')" 2>/dev/null; then
  "$venv/bin/pip" install -q --disable-pip-version-check pyflakes==4.1.0 >&2
fi
echo "$venv/bin/python"
