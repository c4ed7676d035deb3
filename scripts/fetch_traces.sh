#!/usr/bin/env bash
# Download the Mooncake request traces the Mooncake experiments replay, and check them.
# Usage: scripts/fetch_traces.sh [--dir DIR] [--check] [--from URL]
#   --dir DIR   where they go (default: $RKV_MOONCAKE_DIR, else ../shared/data/mooncake
#               beside the checkout: the folder the experiments read when neither
#               --mooncake-dir nor RKV_MOONCAKE_DIR names another)
#   --check     download nothing: check the sha256 of the copies in DIR
#   --from URL  the folder to download from (default: the FAST25-release/traces folder
#               of github.com/kvcache-ai/Mooncake; a file:// URL works too)
# Every file is checked against the sha256 below before it is put in place; a file
# already there with the right sum is kept. Exit status 1 names each file that is
# missing or differs. Needs curl (or wget) and internet access; without them, copy the
# two files from that folder by hand and run --check.
set -euo pipefail
cd "$(dirname "$0")/.."
# The traces as released with the FAST'25 paper (Apache-2.0), unchanged.
files=(conversation_trace.jsonl synthetic_trace.jsonl)
declare -A sha=(
  [conversation_trace.jsonl]=b8cbb061a85206d729d91cdc2981f43c9e0d99209dce588d3af5f7934408b9df
  [synthetic_trace.jsonl]=bd070915a98fc0ed264d7cfef2ce746002eb3076a695ec31ba2674c0111ec131
)
from=https://raw.githubusercontent.com/kvcache-ai/Mooncake/main/FAST25-release/traces
dir="${RKV_MOONCAKE_DIR:-../shared/data/mooncake}"
check=0
usage="usage: scripts/fetch_traces.sh [--dir DIR] [--check] [--from URL]"
while (($#)); do
  case "$1" in
    --dir) dir="${2:?--dir needs a folder ($usage)}"; shift 2 ;;
    --check) check=1; shift ;;
    --from) from="${2:?--from needs a URL ($usage)}"; shift 2 ;;
    -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "fetch_traces.sh: unknown option $1 ($usage)" >&2; exit 2 ;;
  esac
done
sum_ok() {  # file name: whether the file has the committed sum
  [[ -f $1 ]] && [[ "$(sha256sum "$1" | cut -d' ' -f1)" == "${sha[$2]}" ]]
}
bad=()
if ((check)); then
  for f in "${files[@]}"; do
    if [[ ! -f $dir/$f ]]; then bad+=("$dir/$f: missing")
    elif ! sum_ok "$dir/$f" "$f"; then bad+=("$dir/$f: sha256 differs from ${sha[$f]}")
    else echo "fetch_traces.sh: $dir/$f: ok" >&2; fi
  done
else
  if command -v curl >/dev/null; then get() { curl -fsSL --retry 2 -o "$2" "$1"; }
  elif command -v wget >/dev/null; then get() { wget -q -O "$2" "$1"; }
  else echo "fetch_traces.sh: needs curl or wget (apt-get install curl)" >&2; exit 1; fi
  mkdir -p "$dir"
  for f in "${files[@]}"; do
    if sum_ok "$dir/$f" "$f"; then
      echo "fetch_traces.sh: $dir/$f: present, sha256 ok" >&2
      continue
    fi
    tmp="$dir/.$f.part"
    echo "fetch_traces.sh: $from/$f -> $dir/$f" >&2
    if ! get "$from/$f" "$tmp"; then
      rm -f "$tmp"
      bad+=("$from/$f: download failed")
    elif ! sum_ok "$tmp" "$f"; then
      bad+=("$from/$f: sha256 $(sha256sum "$tmp" | cut -d' ' -f1), expected ${sha[$f]} (not installed)")
      rm -f "$tmp"
    else
      mv "$tmp" "$dir/$f"
    fi
  done
fi
if ((${#bad[@]})); then
  printf 'fetch_traces.sh: %s\n' "${bad[@]}" >&2
  exit 1
fi
abs=$(cd "$dir" && pwd)
echo "fetch_traces.sh: the Mooncake traces are in $abs (the experiments read them with --mooncake-dir $abs or RKV_MOONCAKE_DIR=$abs)" >&2
