#!/usr/bin/env python3
"""The allocation-failure loop over `radixkv serve` (standard library only):
allocation k of radixkv's own code fails (radix/fault_alloc.h) while the
server answers a fixed script of requests (plain, streamed, n > 1, several
prompts) and then drains on SIGTERM, for a deterministic sample of the points
past start-up.

Each point must answer every request: 200 with a whole answer, or a JSON
error (500/503) naming what failed, or a stream that ends with [DONE] (an
error event before it allowed) -- never a connection closed without an
answer, an empty message, or a wait past the timeout. The process ends by
itself (0, or 1 with a "radixkv serve: ..." line), never by a signal (no
SIGABRT at daemon stop), with no sanitizer report; an allocation that fails
inside the page check is reported as memory, not as broken accounting.

Needs a build with -Dfault_injection=true; otherwise 77.
Usage: test_serve_faults.py RADIXKV [--max-points N]"""
import http.client
import json
import os
import signal
import subprocess
import sys
import tempfile

EXE = sys.argv[1]
MAX_POINTS = int(sys.argv[sys.argv.index("--max-points") + 1]) if "--max-points" in sys.argv else 40
HOST = "127.0.0.1"
ARGS = ["serve", "--host", HOST, "--port", "0", "--backend", "sim", "--drain-timeout", "5",
        "--page-size", "4", "--num-pages", "128", "--tokenizer", "ids"]
failures = 0


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print("FAIL:", what, file=sys.stderr)
    return cond


P = [(7 * i) % 4000 + 1 for i in range(12)]
SCRIPT = [
    ("plain", {"prompt": P, "max_tokens": 3, "temperature": 0}),
    ("stream", {"prompt": P, "max_tokens": 3, "stream": True,
                "stream_options": {"include_usage": True}}),
    ("n=2", {"prompt": P, "max_tokens": 2, "n": 2, "temperature": 1, "seed": 1}),
    ("stream n=2", {"prompt": P + [9], "max_tokens": 2, "n": 2, "stream": True}),
    ("two prompts", {"prompt": [P, P[:5]], "max_tokens": 2, "echo": True}),
]


def ask(port, body, timeout=30):
    """(status, text, error): error names what went wrong at the socket."""
    c = http.client.HTTPConnection(HOST, port, timeout=timeout)
    try:
        c.request("POST", "/v1/completions", body=json.dumps(body),
                  headers={"Content-Type": "application/json"})
        r = c.getresponse()
        return r.status, r.read().decode(), None
    except (OSError, http.client.HTTPException) as e:
        return None, "", f"{type(e).__name__}: {e}"
    finally:
        c.close()


def judge(what, status, text, err, stream):
    if not check(err is None, f"{what}: no answer ({err})"):
        return
    if status != 200:
        ok = False
        try:
            e = json.loads(text)["error"]
            ok = status in (500, 503) and e["message"]
        except (ValueError, KeyError, TypeError):
            pass
        check(ok, f"{what}: {status} without a JSON error: {text[:200]!r}")
        return
    if not stream:
        try:
            ok = len(json.loads(text)["choices"]) > 0
        except (ValueError, KeyError):
            ok = False
        check(ok, f"{what}: 200 without a whole answer: {text[:200]!r}")
        return
    check(text.endswith("data: [DONE]\n\n"), f"{what}: stream cut short: {text[-200:]!r}")


def serve_once(k, log):
    env = dict(os.environ, RKV_FAULT_ALLOC=str(k), RKV_FAULT_ALLOC_LOG=log)
    env.setdefault("ASAN_OPTIONS", "detect_leaks=1")
    if os.path.exists(log):
        os.unlink(log)
    err = tempfile.TemporaryFile(mode="w+")
    p = subprocess.Popen([EXE] + ARGS, stdout=subprocess.PIPE, stderr=err, text=True, env=env)
    line = p.stdout.readline()
    started = bool(line)
    if started:
        port = json.loads(line)["port"]
        for name, body in SCRIPT:
            st, text, e = ask(port, body)
            if e and p.poll() is None:
                # A server on its way out (the engine failed) may close the
                # socket of a request that came after the failure; one that
                # goes on has dropped a client.
                try:
                    p.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    pass
            if e and p.poll() is not None:
                check(p.returncode == 1, f"allocation {k}: {name}: no answer ({e}) and the "
                      f"server exited {p.returncode}")
                break
            judge(f"allocation {k}: {name}", st, text, e, body.get("stream"))
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    try:
        out, _ = p.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        p.kill()
        out, _ = p.communicate()
        check(False, f"allocation {k}: the server did not exit after SIGTERM")
    err.seek(0)
    stderr = err.read()
    calls = fired = 0
    if os.path.exists(log):
        with open(log) as f:
            calls, fired = (int(x) for x in f.read().split())
    return started, p.returncode, out, stderr, calls, fired


def main():
    with tempfile.TemporaryDirectory() as tmp:
        log = os.path.join(tmp, "alloc.log")
        started, rc, out, err, total, _ = serve_once(0, log)
        if total == 0:
            print("radixkv was built without -Dfault_injection=true: skipping", file=sys.stderr)
            sys.exit(77)
        check(started and rc == 0, f"the run without a failure: exit {rc} {err[-300:]}")
        # Start-up alone, so the points tried are those of serving.
        p = subprocess.Popen([EXE] + ARGS, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             text=True, env=dict(os.environ, RKV_FAULT_ALLOC="0",
                                                 RKV_FAULT_ALLOC_LOG=log))
        p.stdout.readline()
        p.send_signal(signal.SIGTERM)
        p.communicate(timeout=60)
        with open(log) as f:
            start = int(f.read().split()[0])
        span = list(range(start + 1, total + 1))
        if len(span) > MAX_POINTS:
            step = len(span) / MAX_POINTS
            span = sorted({span[int(i * step)] for i in range(MAX_POINTS)})
        print(f"allocations: {start} at start-up, {total} in all; trying {len(span)}",
              file=sys.stderr)
        for k in span:
            started, rc, out, err, calls, fired = serve_once(k, log)
            what = f"allocation {k} of {total}"
            check("Sanitizer" not in err and "runtime error" not in err,
                  f"{what}: sanitizer report\n{err[-3000:]}")
            check(rc is not None and rc >= 0, f"{what}: killed by signal {-rc if rc else rc}\n"
                  f"{err[-1000:]}")
            check(rc in (0, 1), f"{what}: exit {rc}\n{err[-500:]}")
            if rc == 1:
                msg = [ln for ln in err.splitlines() if ln.startswith("radixkv serve:")]
                check(msg, f"{what}: exit 1 without a message\n{err[-500:]}")
            if fired and "accounting broken" in err:
                check(False, f"{what}: a failed allocation reported as broken accounting\n"
                      f"{err[-500:]}")
    if failures:
        print(f"{failures} failures", file=sys.stderr)
        sys.exit(1)
    print("serve allocation faults: ok")


if __name__ == "__main__":
    main()
