#!/usr/bin/env python3
"""`radixkv serve` keeps itself and its clients safe (standard library only):
signals on every thread and a second signal during the drain, a body cap read
from Content-Length, connection timeout and cap, the idle page check off the
global lock, and non-streaming requests cancelled when their client goes away.
Each wait is bounded by a deadline far above the time the step needs.
Usage: test_serve_safety.py PATH/TO/radixkv [PART...]"""
import ctypes
import json
import os
import signal
import socket
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from serve_util import HOST, Server, check  # noqa: E402

RADIXKV = sys.argv[1] if len(sys.argv) > 1 else None
LIBC = ctypes.CDLL(None, use_errno=True)
SYS_TGKILL = {"x86_64": 234, "aarch64": 131}.get(os.uname().machine)


def raw_request(port, body, stream=False, timeout=60):
    """A socket with a completion request sent (nothing read)."""
    sock = socket.create_connection((HOST, port), timeout=timeout)
    data = json.dumps(dict(body, stream=stream)).encode()
    sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\n\r\n" % len(data) + data)
    return sock


def read_all(sock):
    buf = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return buf
        buf += chunk


def wait_for(cond, what, timeout=60):
    deadline = time.time() + timeout
    while not cond():
        check(time.time() < deadline, what)
        time.sleep(0.02)


def signal_every_thread():
    # Item 1: a SIGTERM aimed at any one thread (a library's pool started before
    # main among them) never kills the server; a SIGTERM to the process drains it.
    if SYS_TGKILL is None:
        print("signal_every_thread: no tgkill number for this machine; skipped", file=sys.stderr)
        return
    n = None
    i = 0
    while n is None or i < n:  # a fresh server per thread: the first to drain ends it
        s = Server(RADIXKV)
        try:
            tids = sorted(int(t) for t in os.listdir(f"/proc/{s.proc.pid}/task"))
            n = n or len(tids)
            check(n >= 3, f"threads: {tids}")
            tid = tids[i % len(tids)]
            LIBC.syscall(SYS_TGKILL, s.proc.pid, tid, signal.SIGTERM)
            time.sleep(0.2)
            if s.proc.poll() is None:
                s.proc.send_signal(signal.SIGTERM)
            out, _ = s.proc.communicate(timeout=60)
            check(s.proc.returncode == 0,
                  f"SIGTERM to thread {tid} of {tids}: exit {s.proc.returncode}: {s.stderr()}")
            check('"type":"summary"' in out and "draining" in s.stderr(),
                  f"no drain: {out} {s.stderr()}")
        finally:
            s.kill()
        i += 1


def second_signal():
    # Item 1: SIGTERM under load starts the drain; a second one cancels the rest
    # at once; every client still gets a whole answer, the summary is written.
    s = Server(RADIXKV, "--max-running", "2", "--drain-timeout", "600")
    try:
        # A running stream, a running and two queued non-streaming requests.
        stream = raw_request(s.port, {"prompt": [9] * 8, "max_tokens": 8000}, stream=True)
        wait_for(lambda: s.metrics()["radixkv:num_requests_running"] == 1, "stream never ran")
        socks = [raw_request(s.port, {"prompt": [5 + k] * 8, "max_tokens": 8000}) for k in range(3)]
        wait_for(lambda: s.metrics()["radixkv:num_requests_waiting"] == 2, "requests never queued")
        s.proc.send_signal(signal.SIGTERM)
        wait_for(lambda: "draining" in s.stderr(), "no draining line")
        st, text, _ = s.request("GET", "/health")
        check(st == 503, f"/health while draining: {st} {text}")
        st, text, _ = s.request("POST", "/v1/completions", {"prompt": [1], "max_tokens": 1})
        check(st == 503 and "shutting down" in text, f"new work while draining: {st} {text}")
        check(s.proc.poll() is None, "the drain did not wait for the requests")
        s.proc.send_signal(signal.SIGTERM)
        out, _ = s.proc.communicate(timeout=120)
        check(s.proc.returncode == 0, f"exit {s.proc.returncode}: {s.stderr()}")
        summary = [json.loads(x) for x in out.splitlines() if '"summary"' in x]
        check(len(summary) == 1 and summary[0]["requests_cancelled"] == 4
              and summary[0]["pages_inflight"] == 0, f"summary: {out}")
        for k in socks:
            raw = read_all(k)
            head, _, body = raw.partition(b"\r\n\r\n")
            check(head.startswith(b"HTTP/1.1 ") and json.loads(body), f"answer: {raw[:200]!r}")
        raw = read_all(stream)
        check(raw.startswith(b"HTTP/1.1 200") and raw.count(b'"token_ids":[') > 1
              and raw.endswith(b"data: [DONE]\n\n\r\n0\r\n\r\n"), f"stream cut: {raw[-200:]!r}")
    finally:
        s.kill()


def body_cap():
    # Item 2: a Content-Length over the cap is refused before the body is sent.
    s = Server(RADIXKV, "--max-body-bytes", "4096")
    try:
        k = socket.create_connection((HOST, s.port), timeout=30)
        k.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n" % (60 << 20))
        try:
            raw = read_all(k)
        except socket.timeout:
            raw = b""
        check(raw.startswith(b"HTTP/1.1 413"), f"60 MiB Content-Length: {raw[:100]!r}")
        check(b"--max-body-bytes" in raw and b"62914560 bytes" in raw, f"413 body: {raw!r}")
        # Sent whole, or chunked (no Content-Length): 413 as well, naming the option.
        body = json.dumps({"prompt": [1] * 2000})
        st, text, _ = s.request("POST", "/v1/completions", raw=body)
        check(st == 413 and "--max-body-bytes" in text, f"large body: {st} {text}")
        k = socket.create_connection((HOST, s.port), timeout=30)
        chunk = body.encode()
        k.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                  + b"%x\r\n" % len(chunk) + chunk + b"\r\n0\r\n\r\n")
        raw = read_all(k)
        check(raw.startswith(b"HTTP/1.1 413"), f"chunked: {raw[:100]!r}")
        st, r, _ = s.post({"prompt": [1, 2, 3], "max_tokens": 2})
        check(st == 200, f"after 413s: {st} {r}")
    finally:
        s.kill()
    p = __import__("subprocess").run([RADIXKV, "serve", "--max-body-bytes", "0"],
                                     capture_output=True, text=True, timeout=60)
    check(p.returncode == 2 and "--max-body-bytes" in p.stderr, f"bad cap: {p.stderr}")


def connection_limits():
    # Item 3: half-sent requests time out; while they hold every slot, a client
    # waits in the backlog and is served once they are closed.
    s = Server(RADIXKV, "--connection-timeout", "1", "--max-connections", "8")
    try:
        half = []
        for i in range(8):
            k = socket.create_connection((HOST, s.port), timeout=60)
            k.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
            half.append(k)
        st, text, _ = s.request("GET", "/health", timeout=60)
        check(st == 200, f"/health behind half-sent connections: {st} {text}")
        for k in half:
            try:
                rest = read_all(k)
            except ConnectionResetError:
                rest = b""
            check(not rest.startswith(b"HTTP/1.1 200"), f"half-sent request answered: {rest!r}")
        st, r, _ = s.post({"prompt": [1, 2, 3], "max_tokens": 2})
        check(st == 200, f"after the timeouts: {st} {r}")
        # The timeout is for silence while sending: a request that waits on the
        # engine longer than it (suspended, then a stream) is answered whole.
        st, r, _ = s.post({"prompt": [1, 2, 3], "max_tokens": 600})
        check(st == 200 and len(r["choices"][0]["token_ids"]) == 600, f"long request: {st}")
        st, events, done = s.stream({"prompt": [4, 5], "max_tokens": 600})
        check(st == 200 and done and len(events) == 600, f"long stream: {st} {len(events)}")
    finally:
        s.kill()


def check_off_lock():
    # Item 4: while the engine runs its idle page check, the HTTP side answers.
    # The test holds the engine inside the check through a FIFO it opens.
    with tempfile.TemporaryDirectory() as d:
        gate = os.path.join(d, "gate")
        os.mkfifo(gate)
        os.environ["RKV_SERVE_TEST_CHECK_GATE"] = gate
        try:
            s = Server(RADIXKV)
        finally:
            del os.environ["RKV_SERVE_TEST_CHECK_GATE"]
        try:
            res = {}
            t = threading.Thread(target=lambda: res.update(
                r=s.post({"prompt": [1, 2, 3], "max_tokens": 3})))
            t.start()
            deadline = time.time() + 60
            while True:  # opens once the engine waits in the check
                try:
                    fd = os.open(gate, os.O_WRONLY | os.O_NONBLOCK)
                    break
                except OSError:
                    check(time.time() < deadline, "the engine never reached its idle check")
                    time.sleep(0.02)
            try:
                st, text, _ = s.request("GET", "/metrics", timeout=20)
                check(st == 200, f"/metrics during the check: {st}")
                st, text, _ = s.request("GET", "/health", timeout=20)
                check(st == 200, f"/health during the check: {st}")
            except socket.timeout:
                check(False, "the server did not answer while the engine checked its pages")
            finally:
                os.close(fd)
            t.join(timeout=60)
            check(res["r"][0] == 200, f"request: {res}")
            rc, summary = s.stop()
            check(rc == 0 and summary["pages_inflight"] == 0, f"exit {rc}: {summary}")
        finally:
            s.kill()


def cancel_on_disconnect():
    # Item 5: a non-streaming request whose client goes away stops generating.
    s = Server(RADIXKV, "--max-running", "1", "--keepalive", "0.1")
    try:
        k = raw_request(s.port, {"prompt": [5] * 8, "max_tokens": 8000})
        wait_for(lambda: s.metrics()["radixkv:num_requests_running"] == 1, "request never ran")
        k.close()

        def cancelled():
            m = s.metrics()
            check(m['radixkv:requests_total{outcome="ok"}'] == 0,
                  f"ran to the end after its client left: {m}")
            return m['radixkv:requests_total{outcome="cancelled"}'] == 1
        wait_for(cancelled, "a non-streaming request whose client left was not cancelled", 120)
        m = s.wait_idle()
        check(m["radixkv:generation_tokens_total"] < 8000 and m["radixkv:page_accounting_ok"] == 1,
              f"after cancel: {m}")
        st, r, _ = s.post({"prompt": [1, 2, 3], "max_tokens": 2})
        check(st == 200, f"after a disconnect: {st} {r}")
        rc, summary = s.stop()
        check(rc == 0 and summary["requests_cancelled"] == 1, f"exit {rc}: {summary}")
    finally:
        s.kill()


def main():
    only = sys.argv[2:]  # optional: names of the parts to run
    for t in [signal_every_thread, second_signal, body_cap, connection_limits, check_off_lock,
              cancel_on_disconnect]:
        if only and t.__name__ not in only:
            continue
        t()
        print(f"{t.__name__}: ok", file=sys.stderr)
    print("serve safety: ok")


if __name__ == "__main__":
    main()
