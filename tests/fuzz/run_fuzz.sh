#!/usr/bin/env bash
# One libFuzzer run of a target over its seed corpus (build with -Dfuzz=true).
# Usage: run_fuzz.sh TARGET SEED_DIR WORK_DIR
# RKV_FUZZ_SECONDS (default 30) bounds it; new inputs go to WORK_DIR/corpus,
# a crashing input to WORK_DIR/crash-*. The longer run is the same with a
# larger RKV_FUZZ_SECONDS (tests/fuzz/README.md).
set -euo pipefail
target=$1 seeds=$2 work=$3
mkdir -p "$work/corpus"
# -error_exitcode: libFuzzer's default, 77, would read as a skip to meson.
exec "$target" -max_total_time="${RKV_FUZZ_SECONDS:-30}" -timeout=10 -rss_limit_mb=2048 -error_exitcode=1 \
  -print_final_stats=1 -artifact_prefix="$work/" "$work/corpus" "$seeds"
