"""Shared by the serve tests: start `radixkv serve` on 127.0.0.1 and a free port,
talk to it with the standard library, stop it with SIGTERM. Every wait is bounded."""
import http.client
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

HOST = "127.0.0.1"


class Server:
    def __init__(self, radixkv, *args, timeout=60):
        self.err = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(
            [radixkv, "serve", "--host", HOST, "--port", "0", *args],
            stdout=subprocess.PIPE, stderr=self.err, text=True)
        line = self.proc.stdout.readline()  # the listening line (or EOF on failure)
        if not line:
            self.proc.wait(timeout=timeout)
            raise RuntimeError("server did not start: " + self.stderr())
        info = json.loads(line)
        assert info["type"] == "listening", info
        self.port = info["port"]
        self.base = f"http://{HOST}:{self.port}"
        deadline = time.time() + timeout
        while True:
            try:
                if self.request("GET", "/health")[0] == 200:
                    break
            except OSError:
                pass
            if time.time() > deadline:
                raise RuntimeError("server never became healthy")
            time.sleep(0.05)

    def stderr(self):
        self.err.seek(0)
        return self.err.read()

    def request(self, method, path, body=None, timeout=120, raw=None):
        c = http.client.HTTPConnection(HOST, self.port, timeout=timeout)
        try:
            data = raw if raw is not None else (json.dumps(body) if body is not None else None)
            c.request(method, path, body=data, headers={"Content-Type": "application/json"})
            r = c.getresponse()
            text = r.read().decode()
            return r.status, text, dict(r.getheaders())
        finally:
            c.close()

    def post(self, body, **kw):
        status, text, headers = self.request("POST", "/v1/completions", body, **kw)
        return status, json.loads(text) if text else None, headers

    def stream(self, body, timeout=120):
        """POST with stream=true; returns (status, [event dicts], saw_done)."""
        c = http.client.HTTPConnection(HOST, self.port, timeout=timeout)
        try:
            c.request("POST", "/v1/completions", body=json.dumps(dict(body, stream=True)),
                      headers={"Content-Type": "application/json"})
            r = c.getresponse()
            if r.status != 200:
                return r.status, [json.loads(r.read())], False
            events, done = [], False
            for raw in r.read().decode().split("\n\n"):
                raw = raw.strip()
                if not raw or raw.startswith(":"):  # SSE comments: keep-alives
                    continue
                assert raw.startswith("data: "), raw
                payload = raw[len("data: "):]
                if payload == "[DONE]":
                    done = True
                else:
                    assert not done, "event after [DONE]"
                    events.append(json.loads(payload))
            return r.status, events, done
        finally:
            c.close()

    def metrics(self):
        status, text, _ = self.request("GET", "/metrics")
        assert status == 200
        out = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                out[name] = float(value)
        return out

    def wait_idle(self, timeout=60):
        """Until nothing runs or waits and no page is in flight."""
        deadline = time.time() + timeout
        while True:
            m = self.metrics()
            if (m["radixkv:num_requests_running"] == 0 and m["radixkv:num_requests_waiting"] == 0
                    and m['radixkv:kv_pages{state="inflight"}'] == 0):
                return m
            if time.time() > deadline:
                raise AssertionError(f"server not idle after {timeout} s: {m}")
            time.sleep(0.05)

    def stop(self, timeout=60, sig=signal.SIGTERM):
        """SIGTERM (or sig); returns (exit status, summary dict)."""
        self.proc.send_signal(sig)
        out, _ = self.proc.communicate(timeout=timeout)
        summary = None
        for line in out.splitlines():
            d = json.loads(line)
            if d.get("type") == "summary":
                summary = d
        return self.proc.returncode, summary

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)


def run_reference(radixkv, requests, *args):
    """`radixkv run` on the same requests (greedy): output ids by request index."""
    with tempfile.TemporaryDirectory() as d:
        trace = os.path.join(d, "trace.jsonl")
        with open(trace, "w") as f:
            for i, (tokens, max_tokens) in enumerate(requests):
                f.write(json.dumps({"id": i, "tokens": tokens, "max_tokens": max_tokens}) + "\n")
        out = subprocess.run([radixkv, "run", "--trace", trace, "--no-progress", "--offline", *args],
                             capture_output=True, text=True, timeout=600)
        assert out.returncode == 0, out.stderr
        got = {}
        for line in out.stdout.splitlines():
            d = json.loads(line)
            if d["type"] == "request":
                got[d["id"]] = d["output_ids"]
        return [got[i] for i in range(len(requests))]


def check(cond, msg):
    if not cond:
        print("FAIL: " + msg, file=sys.stderr)
        sys.exit(1)


def reexec_under_serve_python(path, module):
    """Run the test under RKV_SERVE_PYTHON (a venv with `module`), else exit 77."""
    try:
        __import__(module)
        return
    except ImportError:
        pass
    want = os.environ.get("RKV_SERVE_PYTHON")
    if not want or os.environ.get("RKV_SERVE_REEXEC"):
        print(f"{module} not importable and RKV_SERVE_PYTHON unset: skipping", file=sys.stderr)
        sys.exit(77)
    if not os.access(want, os.X_OK):
        print(f"RKV_SERVE_PYTHON={want} is not executable: skipping", file=sys.stderr)
        sys.exit(77)
    os.environ["RKV_SERVE_REEXEC"] = "1"
    os.execv(want, [want, os.path.abspath(path)] + sys.argv[1:])
