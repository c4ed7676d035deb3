#!/usr/bin/env bash
# bench/gpu_run.sh --dry-run: the one device call's plan runs on the CPU,
# writes its manifest, refuses bad arguments, and when stopped in the middle
# of a step marks that step and the run interrupted, skips the rest, keeps
# the earlier steps' files and leaves no process behind.
# usage: test_gpu_run.sh SOURCE_ROOT BUILD_DIR
set -u
src=$1 build=$2
script="$src/bench/gpu_run.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
field() { /usr/bin/python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$@"; }

# 1. Bad arguments: exit 2, a line naming the argument, no manifest.
for args in "--budget 5" "--budget x" "--frobnicate" "--dry-run"; do
    # shellcheck disable=SC2086
    "$script" $args --build "$build" >"$tmp/out" 2>&1
    rc=$?
    [ "$rc" = 2 ] || fail "'$args' exited $rc, not 2"
done
grep -q "budget" <("$script" --dry-run --budget 5 --out "$tmp/b" 2>&1) || fail "--budget 5 not named"
[ ! -e "$tmp/b/manifest.json" ] || fail "a refused call wrote a manifest"

# 2. The whole dry run: every step ok (the anchor may be absent: a clone has no ../shared).
"$script" --dry-run --build "$build" --out "$tmp/run" 2>"$tmp/run.err" || { cat "$tmp/run.err"; cat "$tmp/run"/*.log; fail "dry run exited non-zero"; }
m="$tmp/run/manifest.json"
[ "$(field "$m" 'm["finished"] and not m["interrupted"]')" = True ] || fail "manifest not finished"
[ "$(field "$m" '[s["step"] for s in m["steps"]]')" = "['env', 'build', 'gpu_suite', 'profile', 'anchor', 'attn_sdpa']" ] ||
    fail "steps: $(field "$m" '[s["step"] for s in m["steps"]]')"
bad=$(field "$m" '[s["step"] for s in m["steps"] if s["status"] != "ok" and not (s["step"] == "anchor" and s["status"] == "skipped: exit 77")]')
[ "$bad" = "[]" ] || fail "steps not ok: $bad"
grep -q '"problems": \[\], "ok": true' "$tmp/run/profile.log" || fail "gpu_profile.sh --dry-run did not report ok: $(cat "$tmp/run/profile.log")"

# 3. Stopped in the middle of the profile step.
RKV_GPU_RUN_STALL=profile RKV_GPU_RUN_STALL_TAG=$$ "$script" --dry-run --build "$build" --out "$tmp/stop" 2>/dev/null &
pid=$!
m="$tmp/stop/manifest.json"
for _ in $(seq 600); do
    [ -f "$m" ] && grep -q '"step": "profile"' "$m" && grep -q '"status": "running"' "$m" && break
    sleep 0.1
done
grep -q '"status": "running"' "$m" || fail "the profile step never started"
sleep 0.5 # let the stalled step reach its sleep
kill -TERM "$pid"
wait "$pid"
rc=$?
[ "$rc" != 0 ] || fail "an interrupted run exited 0"
[ "$(field "$m" 'm["interrupted"] and m["finished"]')" = True ] || fail "manifest not marked interrupted: $(cat "$m")"
got=$(field "$m" '[(s["step"], s["status"]) for s in m["steps"]]')
want="[('env', 'ok'), ('build', 'ok'), ('gpu_suite', 'ok'), ('profile', 'interrupted'), ('anchor', 'skipped: interrupted'), ('attn_sdpa', 'skipped: interrupted')]"
[ "$got" = "$want" ] || fail "statuses after the stop: $got"
[ -s "$tmp/stop/env.log" ] && [ -s "$tmp/stop/gpu_suite.log" ] || fail "earlier steps' logs lost"
sleep 0.5
if pgrep -f "^sleep 300\\.$$\$" >/dev/null; then
    fail "a stalled step's process outlived the run"
fi
echo "gpu_run dry run: plan, refusals and interruption hold"
