#!/usr/bin/env bash
# scripts/fetch_traces.sh without the network: a file:// source whose conversation trace
# is not the released one must be refused (exit 1, the file named, nothing installed),
# --check on a missing folder must fail naming both files; where the real traces are at
# hand (RKV_MOONCAKE_DIR, else ../shared/data/mooncake) a fetch from them must install
# both and --check must pass.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
fetch=$root/scripts/fetch_traces.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL $*" >&2; exit 1; }

mkdir "$tmp/src"
echo '{"timestamp": 0, "input_length": 512, "output_length": 1, "hash_ids": [0]}' \
  >"$tmp/src/conversation_trace.jsonl"
cp "$tmp/src/conversation_trace.jsonl" "$tmp/src/synthetic_trace.jsonl"
"$fetch" --dir "$tmp/dst" --from "file://$tmp/src" 2>"$tmp/err" && fail "a wrong trace was accepted"
grep -q "conversation_trace.jsonl: sha256" "$tmp/err" || fail "the refusal does not name the file: $(cat "$tmp/err")"
[[ -e $tmp/dst/conversation_trace.jsonl ]] && fail "a trace with a wrong sum was installed"
ls -A "$tmp/dst" | grep -q part && fail "a partial download was left behind"
echo "ok   a trace with a wrong sha256 is refused and not installed" >&2

"$fetch" --check --dir "$tmp/none" 2>"$tmp/err" && fail "--check passed on a missing folder"
[[ $(grep -c ": missing" "$tmp/err") == 2 ]] || fail "--check does not name both files: $(cat "$tmp/err")"
echo "ok   --check names each missing trace" >&2

real=${RKV_MOONCAKE_DIR:-$root/../shared/data/mooncake}
if [[ -f $real/conversation_trace.jsonl && -f $real/synthetic_trace.jsonl ]]; then
  "$fetch" --dir "$tmp/got" --from "file://$(cd "$real" && pwd)" 2>"$tmp/err" || fail "fetch from $real: $(cat "$tmp/err")"
  "$fetch" --check --dir "$tmp/got" 2>"$tmp/err" || fail "--check after the fetch: $(cat "$tmp/err")"
  echo "ok   the released traces install and pass --check" >&2
else
  echo "note: no Mooncake traces at hand; the download-and-install path is not exercised" >&2
fi
echo "fetch_traces: properties hold"
