"""An existing router on 127.0.0.1 and a free port in front of radixkv serve
replicas; used by the router test and experiment. Kinds:
  sglang  sglang-router (PyPI sglang-router): text prompts only
  vllm    vllm-router (PyPI vllm-router): forwards token-id prompts too
"""
import http.client
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

HOST = "127.0.0.1"


def free_port():
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def vllm_router_binary():
    """The vllm-router executable beside this interpreter, else on PATH, else None."""
    here = os.path.join(os.path.dirname(sys.executable), "vllm-router")
    return here if os.access(here, os.X_OK) else shutil.which("vllm-router")


def available(kind):
    if kind == "vllm":
        return vllm_router_binary() is not None
    try:
        __import__("sglang_router")
        return True
    except ImportError:
        return False


class Router:
    def __init__(self, workers, policy, timeout=60, kind="sglang"):
        self.port = free_port()
        self.log = tempfile.TemporaryFile(mode="w+")
        if kind == "vllm":
            cmd = [vllm_router_binary(), "--log-level", "warning"]
        else:
            cmd = [sys.executable, "-m", "sglang_router.launch_router", "--log-level", "warn"]
        # Its metrics exporter too: loopback, and a port of its own so routers
        # started side by side do not collide.
        cmd += ["--host", HOST, "--port", str(self.port), "--policy", policy, "--worker-urls",
                *workers, "--disable-retries", "--disable-circuit-breaker",
                "--prometheus-host", HOST, "--prometheus-port", str(free_port())]
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=self.log)
        deadline = time.time() + timeout
        while True:
            try:
                c = http.client.HTTPConnection(HOST, self.port, timeout=5)
                c.request("GET", "/v1/models")
                r = c.getresponse()
                body = r.read()
                c.close()
                if r.status == 200 and json.loads(body).get("data"):
                    break
            except (OSError, ValueError):
                pass
            if self.proc.poll() is not None or time.time() > deadline:
                self.log.seek(0)
                raise RuntimeError("router did not start: " + self.log.read()[-2000:])
            time.sleep(0.2)

    def post(self, body, timeout=120):
        c = http.client.HTTPConnection(HOST, self.port, timeout=timeout)
        try:
            c.request("POST", "/v1/completions", body=json.dumps(body),
                      headers={"Content-Type": "application/json"})
            r = c.getresponse()
            text = r.read().decode()
            try:
                return r.status, json.loads(text)
            except ValueError:
                return r.status, text
        finally:
            c.close()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)
