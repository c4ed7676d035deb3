#!/usr/bin/env bash
# Create (or reuse) a virtual environment in which SGLang 0.5.23's Rust
# TreeCore loads on the CPU, kept outside the clone; bench/sglang_cache_bench.py
# run in it measures the Rust core beside SGLang's Python RadixCache and the
# radixkv adapter. Not used by CI (the bench is not a test).
#
# Why a venv of its own: the core (sglang/srt/mem_cache/rust_tree_core, a
# PyO3 module linked against libtorch_cpu/libc10/libtorch_python) is gated by
# SGLang's loader to torch 2.11-2.14 (rust_extensions/torch_build.py), and the
# torch reference venv (scripts/torch_venv.sh), which the sglang venv borrows,
# has torch 2.15. So this venv installs torch 2.14.1 itself, from PyPI, with
# --no-deps: its CUDA libraries are loaded only when a GPU is used, and the
# CUDA 13 libraries torch's import preloads (same sonames) come from the torch
# reference venv, appended to sys.path by a .pth file after this venv's own
# site-packages, as are numpy, sympy, networkx, jinja2 and the rest of torch's
# pure-Python dependencies. SGLang and the packages its caches import are the
# pins of scripts/sglang_requirements.txt (torchvision 0.29.2 is the one built
# for torch 2.14). Prints the venv's python on stdout.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${RKV_SGLANG_RUST_VENV:-$HOME/.cache/radixkv/sglang-rust-venv}"
torch_pin="torch==2.14.1"
probe="import torch, sglang.srt.mem_cache.rust_tree_core.extension as e; print(torch.__version__, e.bindings.__name__)"
if [[ ! -x "$venv/bin/python" ]] || ! "$venv/bin/python" -c "$probe" >/dev/null 2>&1; then
  torch_py=$(scripts/torch_venv.sh)
  torch_site=$("$torch_py" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
  echo "creating the sglang Rust-core venv in $venv (one time, a 555 MB torch wheel)" >&2
  mkdir -p "$(dirname "$venv")"
  /usr/bin/python3 -m venv "$venv" >&2
  site=$("$venv/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
  "$venv/bin/pip" install -q --disable-pip-version-check --no-deps \
    -r scripts/sglang_requirements.txt "$torch_pin" >&2
  echo "import sys; sys.path.append('$torch_site')" > "$site/zz_radixkv_torch_venv.pth"
  cp -r scripts/sglang_standins/IPython "$site/"
  "$venv/bin/python" -c "$probe" >&2
fi
echo "$venv/bin/python"
