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

With --pd, the same loop over a prefill/decode pair (`--role prefill` and
`--role decode` sharing a redis-server, a tier namespace of their own per
point): allocation k fails in one of the two, the other counting only, while
a script of disaggregated requests runs as a router would send them (each to
both servers at once with one bootstrap_room, plain and streamed, a shared
prefix; and vllm-router's sequential kv_transfer_params). Each answer is whole
and equal to the run without a failure, or a JSON error / an error event
naming what failed; both servers end by themselves with no sanitizer report,
the one without a failure with 0. Skips (77) without redis-server.

Needs a build with -Dfault_injection=true; otherwise 77.
Usage: test_serve_faults.py RADIXKV [--max-points N] [--pd]"""
import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from cli_check import CliCheck  # noqa: E402

EXE = sys.argv[1]
MAX_POINTS = int(sys.argv[sys.argv.index("--max-points") + 1]) if "--max-points" in sys.argv else 40
HOST = "127.0.0.1"
ARGS = ["serve", "--host", HOST, "--port", "0", "--backend", "sim", "--drain-timeout", "5",
        "--page-size", "4", "--num-pages", "128", "--tokenizer", "ids"]
cli = CliCheck(EXE)
check = cli.check


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
    sys.exit(cli.finish("serve allocation faults: ok"))


# ---- --pd: the prefill/decode pair ------------------------------------------

PD_ENGINE = ["--backend", "sim", "--drain-timeout", "5", "--page-size", "4", "--num-pages", "128",
             "--tokenizer", "ids"]
# A decode request whose room nobody takes waits this long (a prefill that
# died before taking it); the liveness key ends the others sooner.
PD_TIMEOUT = "5"
Q = [(11 * i) % 4000 + 3 for i in range(13)]
# (name, body, how): "pair" posts it to both servers at once with a room, as
# sglang-router does; "vllm" to the prefill, then to the decode with the
# prefill's kv_transfer_params, as vllm-router does.
PD_SCRIPT = [
    ("plain", {"prompt": P, "max_tokens": 3, "temperature": 0}, "pair"),
    ("stream", {"prompt": P + [9, 10], "max_tokens": 3, "temperature": 0, "stream": True,
                "stream_options": {"include_usage": True}}, "pair"),
    ("shared prefix", {"prompt": P[:8] + [77, 78, 79, 80, 81], "max_tokens": 2,
                       "temperature": 0}, "pair"),
    ("vllm", {"prompt": Q, "max_tokens": 3, "temperature": 0}, "vllm"),
]


def output_ids(text, stream):
    """The token ids of a 200 answer (the ids tokenizer's text when streamed);
    None for a stream that ended with an error event (judge saw it whole)."""
    if not stream:
        return json.loads(text)["choices"][0]["token_ids"]
    out = []
    for raw in text.split("\n\n"):
        raw = raw.strip()
        if raw.startswith("data: ") and raw != "data: [DONE]":
            e = json.loads(raw[len("data: "):])
            if "error" in e:
                if os.environ.get("RKV_FAULT_VERBOSE"):
                    print("error event:", e["error"].get("message"), file=sys.stderr)
                return None
            if e.get("choices"):
                out += [int(t) for t in e["choices"][0].get("text", "").split()]
    return out


def start_pd(role, k, log, tier):
    """A --role server, allocation k failing (0: counting only); (proc, port or None, err file)."""
    env = dict(os.environ, RKV_FAULT_ALLOC=str(k), RKV_FAULT_ALLOC_LOG=log)
    env.setdefault("ASAN_OPTIONS", "detect_leaks=1")
    if os.path.exists(log):
        os.unlink(log)
    err = tempfile.TemporaryFile(mode="w+")
    args = ["serve", "--host", HOST, "--port", "0", *PD_ENGINE, *tier, "--role", role]
    if role == "decode":
        args += ["--pd-timeout", PD_TIMEOUT]
    p = subprocess.Popen([EXE] + args, stdout=subprocess.PIPE, stderr=err, text=True, env=env)
    line = p.stdout.readline()
    return p, json.loads(line)["port"] if line else None, err


def pd_request(ports, name, body, how, room):
    """One scripted request: {role: (status, text, error)} and the stream flag."""
    stream = bool(body.get("stream"))
    got = {}
    if how == "vllm":
        got["prefill"] = ask(ports["prefill"], dict(body, kv_transfer_params={
            "do_remote_decode": True}))
        st, text, e = got["prefill"]
        kv = None
        if st == 200:
            kv = json.loads(text).get("kv_transfer_params")
        if kv:
            got["decode"] = ask(ports["decode"], dict(body, kv_transfer_params=kv))
        return got, stream
    b = dict(body, bootstrap_room=room)
    # The prefill side never streams: the router reads its answer whole.
    pre = dict(b, stream=False)
    pre.pop("stream_options", None)
    threads = [threading.Thread(target=lambda r, x: got.__setitem__(r, ask(ports[r], x, 60)),
                                args=a) for a in [("prefill", pre), ("decode", b)]]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return got, stream


def pd_point(role, k, logs, redis, point):
    """Run the script with allocation k of the role's server failing (k 0: none).
    Returns ({name: decode's output ids or None}, {role: (rc, stderr, calls, fired)})."""
    tier = ["--tier-remote", redis.url, "--tier-remote-ns", f"f{point}",
            "--tier-remote-tokens", "100000"]
    procs, ports, errs = {}, {}, {}
    for r in ("prefill", "decode"):
        procs[r], ports[r], errs[r] = start_pd(r, k if r == role else 0, logs[r], tier)
    outs = {}
    if all(ports.values()):
        for i, (name, body, how) in enumerate(PD_SCRIPT):
            got, stream = pd_request(ports, name, body, how, 1000 * point + i)
            gone = False
            for r, (st, text, e) in got.items():
                if e and procs[r].poll() is None and r == role:
                    try:
                        procs[r].wait(timeout=15)
                    except subprocess.TimeoutExpired:
                        pass
                if e and r == role and procs[r].poll() is not None:
                    check(procs[r].returncode == 1, f"{role} allocation {k}: {name}: no answer "
                          f"from the {r} server ({e}), which exited {procs[r].returncode}")
                    gone = True
                    continue
                judge(f"{role} allocation {k}: {name}, {r} server", st, text, e,
                      stream and r == "decode")
                if r == "decode" and st == 200:
                    outs[name] = output_ids(text, stream)
                elif st and st != 200 and os.environ.get("RKV_FAULT_VERBOSE"):
                    print(f"{role} {k} {name} {r}: {st} {text[:300]}", file=sys.stderr)
            if gone:
                break
    for r in procs:
        if procs[r].poll() is None:
            procs[r].send_signal(signal.SIGTERM)
    ends = {}
    for r in procs:
        try:
            procs[r].communicate(timeout=60)
        except subprocess.TimeoutExpired:
            procs[r].kill()
            procs[r].communicate()
            check(False, f"{role} allocation {k}: the {r} server did not exit after SIGTERM")
        errs[r].seek(0)
        calls = fired = 0
        if os.path.exists(logs[r]):
            with open(logs[r]) as f:
                calls, fired = (int(x) for x in f.read().split())
        ends[r] = (procs[r].returncode, errs[r].read(), calls, fired)
    return outs, ends


def startup_calls(role, log, redis):
    """Allocations of a --role server's start-up alone."""
    p, _, _ = start_pd(role, 0, log, ["--tier-remote", redis.url, "--tier-remote-ns", "start"])
    p.send_signal(signal.SIGTERM)
    p.communicate(timeout=60)
    with open(log) as f:
        return int(f.read().split()[0])


def main_pd():
    if not shutil.which("redis-server"):
        print("redis-server not found on PATH: skipping", file=sys.stderr)
        sys.exit(77)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from pd_util import Redis
    with tempfile.TemporaryDirectory() as tmp:
        redis = Redis(tmp)
        try:
            logs = {r: os.path.join(tmp, f"{r}.log") for r in ("prefill", "decode")}
            ref, ends = pd_point("prefill", 0, logs, redis, 0)
            if ends["prefill"][2] == 0:
                print("radixkv was built without -Dfault_injection=true: skipping",
                      file=sys.stderr)
                sys.exit(77)
            for r, (rc, err, _, _) in ends.items():
                check(rc == 0, f"the run without a failure: {r} exit {rc} {err[-300:]}")
            check(len(ref) == len(PD_SCRIPT), f"the run without a failure answered {sorted(ref)}")
            point = 1
            for role in ("prefill", "decode"):
                start = startup_calls(role, logs[role], redis)
                span = list(range(start + 1, ends[role][2] + 1))
                if len(span) > MAX_POINTS:
                    step = len(span) / MAX_POINTS
                    span = sorted({span[int(i * step)] for i in range(MAX_POINTS)})
                print(f"{role}: allocations {start} at start-up, {ends[role][2]} in all; "
                      f"trying {len(span)}", file=sys.stderr)
                for k in span:
                    outs, got = pd_point(role, k, logs, redis, point)
                    point += 1
                    pd_judge_ends(role, k, ref, outs, got)
        finally:
            redis.stop()
    sys.exit(cli.finish("serve allocation faults, prefill and decode roles: ok"))


def pd_judge_ends(role, k, ref, outs, ends):
    for name, ids in outs.items():
        check(ids is None or ids == ref.get(name), f"{role} allocation {k}: {name}: {ids} != {ref.get(name)}")
    for r, (rc, err, calls, fired) in ends.items():
        what = f"{role} allocation {k}, {r} server"
        check("Sanitizer" not in err and "runtime error" not in err,
              f"{what}: sanitizer report\n{err[-3000:]}")
        check(rc is not None and rc >= 0, f"{what}: killed by signal\n{err[-1000:]}")
        check(rc == 0 if r != role else rc in (0, 1), f"{what}: exit {rc}\n{err[-500:]}")
        if rc == 1:
            check([ln for ln in err.splitlines() if ln.startswith("radixkv serve:")],
                  f"{what}: exit 1 without a message\n{err[-500:]}")
        if fired and "accounting broken" in err:
            check(False, f"{what}: a failed allocation reported as broken accounting")


if __name__ == "__main__":
    main_pd() if "--pd" in sys.argv else main()
