#!/usr/bin/env bash
# scripts/build_paper.sh --bundle refuses results of two scales (naming them) unless
# --mixed-scales is given, and refuses a folder without a manifest. Rows are made up;
# nothing is built past the refusal. Exit 77 without latexmk (the script skips then).
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
command -v latexmk >/dev/null || { echo "skip: latexmk not installed (scripts/deps.sh --with-docs)"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL $*" >&2; exit 1; }
b=$tmp/bundle
mkdir -p "$b/routing" "$b/overhead"
echo '{"scale": "tiny", "commit": "x", "date": "2026-01-01T00:00:00Z", "host": {"cpu": "c", "cpus": 1, "load": 0}, "experiments": {}}' >"$b/manifest.json"
echo '{"experiment": "routing", "scale": "tiny"}' >"$b/routing/routing.jsonl"
echo '{"experiment": "overhead", "scale": "full"}' >"$b/overhead/overhead.jsonl"
"$root/scripts/build_paper.sh" --bundle "$b" --drawn 2>"$tmp/err" && fail "mixed scales were accepted"
grep -q "mix scales" "$tmp/err" && grep -q "full" "$tmp/err" && grep -q "tiny" "$tmp/err" \
  || fail "the refusal does not name the scales: $(cat "$tmp/err")"
echo "ok   a bundle mixing tiny and full is refused, both named" >&2
mkdir "$tmp/plain"
"$root/scripts/build_paper.sh" --bundle "$tmp/plain" 2>"$tmp/err" && fail "a folder without manifest.json was accepted"
grep -q "manifest.json" "$tmp/err" || fail "the refusal does not name the manifest: $(cat "$tmp/err")"
echo "ok   a folder without a manifest is refused" >&2
echo "paper_scales: properties hold"
