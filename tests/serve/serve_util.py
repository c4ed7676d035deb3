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

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from venv_reexec import reexec_in_venv  # noqa: E402

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


class Checks:
    """check() that goes on: each failure printed as it happens and kept, so a
    test reports them all; finish() prints the count and is the exit status."""

    def __init__(self):
        self.fails = []

    def __call__(self, cond, what):
        if not cond:
            self.fails.append(what)
            print("FAIL:", what)
        return cond

    def finish(self, name):
        print(f"{name}: {len(self.fails)} failures")
        return 1 if self.fails else 0


def stop_checked(s, chk):
    """SIGTERM the server; chk that it exited 0 (its stderr's tail if not)."""
    code, _ = s.stop()
    chk(code == 0, f"server exit {code}: {s.stderr()[-400:]}")


def word_tokenizer(tmp, template_file):
    """The text tests' hand-made tokenizer in tmp/tok (its path returned): one
    token per byte (ids 0..255), four special tokens, the chat template read
    from template_file, and added tokens "<wN>" filling ids 260..4095, so that
    every id the built-in model samples has text."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "text"))
    from test_tokenize_cli import write_tokenizer
    with open(template_file, encoding="utf-8") as f:
        template = f.read()
    tok = os.path.join(tmp, "tok")
    write_tokenizer(tok, template)
    path = os.path.join(tok, "tokenizer.json")
    with open(path, encoding="utf-8") as f:
        tj = json.load(f)
    tj["added_tokens"] += [{"id": i, "content": f"<w{i}>", "single_word": False,
                            "lstrip": False, "rstrip": False, "normalized": False,
                            "special": False} for i in range(260, 4096)]
    with open(path, "w", encoding="utf-8") as f:
        json.dump(tj, f)
    return tok


def tokenizer_server(radixkv, tmp, template_file, *args):
    """`radixkv serve --tokenizer DIR` on word_tokenizer(tmp, template_file),
    with args; returns (server, DIR)."""
    tok = word_tokenizer(tmp, template_file)
    return Server(radixkv, "--tokenizer", tok, *args), tok


def reexec_under_serve_python(path, module):
    """Run the test where `module` imports: here, else under RKV_SERVE_PYTHON
    (a venv with it), else exit 77."""
    reexec_in_venv("RKV_SERVE_PYTHON", path, "scripts/serve_venv.sh makes it", needs=module)
