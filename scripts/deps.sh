#!/usr/bin/env bash
# Install the Debian packages radixkv needs, only those missing.
# Usage: scripts/deps.sh [--with-docs]   (--with-docs adds TeX for the paper)
set -euo pipefail
# clang + libclang-rt-14-dev (Debian 12): libFuzzer for the fuzz targets (tests/fuzz);
# curl: scripts/fetch_traces.sh.
# libpcre2-dev, libicu-dev: the tokenizer's split regex (PCRE2 with its JIT) and NFC (runtime/text).
pkgs=(meson ninja-build pkg-config gcc check libjemalloc-dev libopenblas-dev
      libxxhash-dev libssl-dev libjansson-dev libmicrohttpd-dev graphviz python3 python3-matplotlib
      python3-nbconvert python3-ipykernel python3-venv redis-server libhiredis-dev clang
      libclang-rt-14-dev curl libpcre2-dev libicu-dev)
if [[ "${1:-}" == "--with-docs" ]]; then
  # lmodern: main.tex's font (not pulled in without recommends);
  # texlive-fonts-recommended: the T1 Type 1 fonts pdflatex embeds.
  pkgs+=(latexmk texlive-latex-base texlive-latex-recommended texlive-latex-extra
         lmodern texlive-fonts-recommended)
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}" >&2
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi
