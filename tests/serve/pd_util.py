"""A redis-server and sglang-router's PD mode on loopback, for the prefill/decode
tests and benches (`radixkv serve --role prefill|decode`). Every wait is bounded."""
import http.client
import json
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import redis_util  # noqa: E402
from router_util import RouterProcess, free_port, router_command, router_common_args  # noqa: E402
from serve_util import HOST, Server  # noqa: E402


class Redis(redis_util.Redis):
    """tests/redis_util.py's server, with the handoff tests' view of its keys."""

    def page_keys(self, ns):
        """Page keys of namespace ns (handoff records, rkv:NS:pd:ROOM, left out)."""
        return {k for k in self.cmd("KEYS", f"rkv:{ns}:*") or []
                if not k.startswith(f"rkv:{ns}:pd:")}


def need_redis_server():
    """Exit 77 (skip), saying why, when redis-server is not on PATH."""
    if not shutil.which("redis-server"):
        print("redis-server not found on PATH: skipping", file=sys.stderr)
        sys.exit(77)


class PdProcesses:
    """What a prefill/decode test starts, ended together by close() however the
    test ended: a redis-server in a temporary directory (skipping the test
    without one), the servers started through server(), and the router put in
    .router. tier holds the --tier-remote options for namespace ns."""

    def __init__(self, prefix, ns):
        need_redis_server()
        self.tmp = tempfile.mkdtemp(prefix=prefix)
        self.servers, self.router = [], None
        try:
            self.redis = Redis(self.tmp)
        except BaseException:
            shutil.rmtree(self.tmp, ignore_errors=True)
            raise
        self.tier = ["--tier-remote", self.redis.url, "--tier-remote-ns", ns,
                     "--tier-remote-tokens", "100000"]

    def server(self, radixkv, *args):
        """`radixkv serve` with args, killed by close() if still running."""
        s = Server(radixkv, *args)
        self.servers.append(s)
        return s

    def close(self):
        if self.router:
            self.router.stop()
            self.router = None
        for s in self.servers:
            s.kill()
        self.redis.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)


class PdRouter(RouterProcess):
    """A router in PD mode in front of one prefill and one decode server:
    sglang-router --pd-disaggregation (both at once, bootstrap_room) or, kind
    "vllm", vllm-router --vllm-pd-disaggregation (prefill, then decode with the
    prefill's kv_transfer_params)."""

    def __init__(self, prefill, decode, timeout=60, kind="sglang"):
        self.port = free_port()
        if kind == "vllm":
            pd = ["--vllm-pd-disaggregation", "--prefill", prefill, "--decode", decode]
        else:
            pd = ["--pd-disaggregation", "--prefill", prefill, "none", "--decode", decode]
        cmd = router_command(kind) + pd + router_common_args(self.port) + [
            "--policy", "round_robin"]
        super().__init__(cmd, self._answers, timeout)

    def _answers(self):
        return post(self.port, {"model": "tiny", "prompt": "1 2 3", "max_tokens": 1},
                    timeout=10)[0] == 200


def post(port, body, timeout=60):
    """(status, parsed body) of a completion; with stream, (status, [events])."""
    c = http.client.HTTPConnection(HOST, port, timeout=timeout)
    try:
        c.request("POST", "/v1/completions", body=json.dumps(body),
                  headers={"Content-Type": "application/json"})
        r = c.getresponse()
        text = r.read().decode()
        if not body.get("stream") or r.status != 200:
            try:
                return r.status, json.loads(text)
            except ValueError:
                return r.status, text
        events = []
        for raw in text.split("\n\n"):
            raw = raw.strip()
            if raw.startswith("data: ") and raw != "data: [DONE]":
                events.append(json.loads(raw[len("data: "):]))
        return r.status, events
    finally:
        c.close()
