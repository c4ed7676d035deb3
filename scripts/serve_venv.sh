#!/usr/bin/env bash
# Create (or reuse) a virtual environment with the official `openai` client,
# prometheus_client (its text parser reads /metrics as Prometheus would) and,
# when they install, sglang-router and vllm-router (Rust routers published on
# PyPI); kept outside the clone. The serve tests use it and skip without it.
# Prints the venv's python on stdout.
set -euo pipefail
venv="${RKV_SERVE_VENV:-$HOME/.cache/radixkv/serve-venv}"
if [[ ! -x "$venv/bin/python" ]] || ! "$venv/bin/python" -c "import openai, prometheus_client" 2>/dev/null; then
  echo "creating serve test venv in $venv (one time)" >&2
  mkdir -p "$(dirname "$venv")"
  [[ -x "$venv/bin/python" ]] || /usr/bin/python3 -m venv "$venv" >&2
  "$venv/bin/pip" install -q --disable-pip-version-check openai prometheus-client >&2
fi
# The routers are optional: the router test and experiment use those present.
if ! "$venv/bin/python" -c "import sglang_router" 2>/dev/null; then
  "$venv/bin/pip" install -q --disable-pip-version-check sglang-router >&2 ||
    echo "sglang-router did not install; the router test goes without it" >&2
fi
if [[ ! -x "$venv/bin/vllm-router" ]]; then
  "$venv/bin/pip" install -q --disable-pip-version-check vllm-router >&2 ||
    echo "vllm-router did not install; the router test goes without it" >&2
fi
# guidellm (a real benchmark client; tests/text/test_guidellm.py), optional as the routers.
if [[ ! -x "$venv/bin/guidellm" ]]; then
  "$venv/bin/pip" install -q --disable-pip-version-check guidellm >&2 ||
    echo "guidellm did not install; its test skips" >&2
fi
echo "$venv/bin/python"
