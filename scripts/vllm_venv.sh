#!/usr/bin/env bash
# Create (or reuse) the venv of the peers suite's vLLM harnesses (tests/peers/):
# vLLM 0.33.0 installed without its dependencies (its CUDA kernels and server
# stack are not needed to drive its cache manager and scheduler on the CPU), the
# light packages those modules (and the model-config check) import pinned in tests/peers/requirements-vllm.txt,
# and torch (CPU use) with transformers from the torch reference venv, seen
# through a .pth file instead of a second copy. Prints the venv's python on stdout.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
req="$here/../tests/peers/requirements-vllm.txt"
venv="${RKV_VLLM_VENV:-$HOME/.cache/radixkv/vllm-venv}"
probe='import einops, vllm, vllm.v1.core.kv_cache_manager, vllm.v1.core.sched.scheduler; assert vllm.__version__ == "0.33.0"'
if [[ ! -x "$venv/bin/python" ]] || ! "$venv/bin/python" -c "$probe" 2>/dev/null; then
  echo "creating the vLLM peers venv in $venv (one time; vLLM is a large wheel)" >&2
  torch_py=$("$here/torch_venv.sh")
  mkdir -p "$(dirname "$venv")"
  /usr/bin/python3 -m venv "$venv" >&2
  site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  "$torch_py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' > "$site/radixkv-torch-venv.pth"
  "$venv/bin/pip" install -q --disable-pip-version-check --no-deps -r "$req" >&2
  "$venv/bin/python" -c "$probe" >&2
fi
echo "$venv/bin/python"
