#!/usr/bin/env bash
# Create (or reuse) a virtual environment in which SGLang 0.5.23's own
# RadixCache runs on the CPU, kept outside the clone; suite peers' SGLang
# tests use it and skip without it. SGLang and the packages its RadixCache
# import pulls in are installed with --no-deps at the versions pinned in
# scripts/sglang_requirements.txt; torch (CPU use) is the torch reference
# venv's (scripts/torch_venv.sh), appended to sys.path by a .pth file; IPython
# (notebook helpers imported by sglang.utils) is an inert stand-in from
# scripts/sglang_standins. Prints the venv's python on stdout.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${RKV_SGLANG_VENV:-$HOME/.cache/radixkv/sglang-venv}"
probe="import sglang.srt.mem_cache.radix_cache, torch"
if [[ ! -x "$venv/bin/python" ]] || ! "$venv/bin/python" -c "$probe" 2>/dev/null; then
  torch_py=$(scripts/torch_venv.sh)
  torch_site=$("$torch_py" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
  echo "creating the sglang venv in $venv (one time)" >&2
  mkdir -p "$(dirname "$venv")"
  /usr/bin/python3 -m venv "$venv" >&2
  site=$("$venv/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
  "$venv/bin/pip" install -q --disable-pip-version-check --no-deps \
    -r scripts/sglang_requirements.txt >&2
  echo "import sys; sys.path.append('$torch_site')" > "$site/zz_radixkv_torch_venv.pth"
  cp -r scripts/sglang_standins/IPython "$site/"
  "$venv/bin/python" -c "$probe" >&2
fi
echo "$venv/bin/python"
