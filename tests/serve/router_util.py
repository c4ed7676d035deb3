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


class RouterProcess:
    """A router process started with cmd (its output in a temporary file),
    up once ready() returns true; stop() ends it. Router and pd_util's
    PdRouter differ only in their command line and readiness probe."""

    def __init__(self, cmd, ready, timeout):
        self.log = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=self.log)
        deadline = time.time() + timeout
        while True:
            try:
                if ready():
                    return
            except (OSError, ValueError):
                pass
            if self.proc.poll() is not None or time.time() > deadline:
                self.log.seek(0)
                raise RuntimeError("router did not start: " + self.log.read()[-2000:])
            time.sleep(0.2)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)


def router_command(kind):
    """The start of a router's command line: sglang-router or vllm-router."""
    if kind == "vllm":
        return [vllm_router_binary(), "--log-level", "warning"]
    return [sys.executable, "-m", "sglang_router.launch_router", "--log-level", "warn"]


def router_common_args(port):
    """Loopback on port, no retries or circuit breaker (a test sees each answer as the
    worker gave it), and the metrics exporter on loopback and a port of its own so
    routers started side by side do not collide."""
    return ["--host", HOST, "--port", str(port), "--disable-retries",
            "--disable-circuit-breaker", "--prometheus-host", HOST, "--prometheus-port",
            str(free_port())]


class Router(RouterProcess):
    def __init__(self, workers, policy, timeout=60, kind="sglang"):
        self.port = free_port()
        cmd = router_command(kind) + router_common_args(self.port) + [
            "--policy", policy, "--worker-urls", *workers]
        super().__init__(cmd, self._models_listed, timeout)

    def _models_listed(self):
        c = http.client.HTTPConnection(HOST, self.port, timeout=5)
        try:
            c.request("GET", "/v1/models")
            r = c.getresponse()
            body = r.read()
            return r.status == 200 and bool(json.loads(body).get("data"))
        finally:
            c.close()

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
