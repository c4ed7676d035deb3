"""A private redis-server on loopback: the one starter of the experiments that
need a shared remote tier (radixkv --tier-remote) and of the tests' and
benches' (tests/redis_util.py builds on it). 127.0.0.1 and a free port, no
persistence, its files in a folder (the caller's, or a temporary one of its
own that stop() removes). Every wait is bounded.

start(radixkv) returns None, with the reason, where redis-server is missing,
does not answer, or radixkv was built without hiredis, so that a driver skips
what needs it instead of failing."""
import os
import shutil
import socket
import subprocess
import tempfile
import time

HOST = "127.0.0.1"
# start()'s reason when the binary refuses --tier-remote.
NO_HIREDIS = "radixkv was built without hiredis"


def installed():
    """Whether redis-server is on PATH."""
    return shutil.which("redis-server") is not None


def free_port():
    s = socket.socket()
    s.bind((HOST, 0))
    port = s.getsockname()[1]
    s.close()
    return port


class RedisServer:
    """redis-server on HOST and a free port, its files in folder (None: a
    temporary folder of its own, removed by stop()). Not started until
    launch(); stop() and launch() again keep the port: the same URL, an empty
    server."""

    def __init__(self, folder=None):
        self.own = folder is None
        self.dir = tempfile.mkdtemp(prefix="rkv-redis-") if self.own else folder
        self.proc, self.port = None, free_port()
        self.url = f"redis://{HOST}:{self.port}"

    def launch(self):
        """Start it and wait (5 s at most) until it answers PING: True, or
        False with it stopped again."""
        os.makedirs(self.dir, exist_ok=True)  # an own folder stop() removed
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", HOST, "--save", "",
             "--appendonly", "no", "--dir", self.dir, "--daemonize", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(500):  # at most 5 s
            if self.cmd("PING") == "PONG":
                return True
            time.sleep(0.01)
        self.stop()
        return False

    def cmd(self, *args):
        """One command in RESP: a simple reply, an integer, or a list of bulk
        strings; None when nothing answers."""
        try:
            with socket.create_connection((HOST, self.port), timeout=2) as s:
                out = f"*{len(args)}\r\n" + "".join(f"${len(a)}\r\n{a}\r\n" for a in args)
                s.sendall(out.encode())
                return self._reply(s.makefile("rb"))
        except OSError:
            return None

    def _reply(self, f):
        line = f.readline().decode().rstrip("\r\n")
        kind, rest = line[:1], line[1:]
        if not kind:
            raise OSError("connection closed")
        if kind in "+-":
            return rest
        if kind == ":":
            return int(rest)
        if kind == "$":
            n = int(rest)
            if n < 0:
                return None
            data = f.read(n + 2)[:-2]
            return data.decode("latin-1")
        if kind == "*":
            return [self._reply(f) for _ in range(int(rest))]
        raise ValueError(line)

    def stop(self):
        if self.proc:
            self.proc.kill()
            self.proc.wait(timeout=30)
            self.proc = None
        if self.own:
            shutil.rmtree(self.dir, ignore_errors=True)


def start(radixkv):
    """(server, None) or (None, why): a started server in a folder of its own,
    which radixkv accepts for --tier-remote."""
    if not installed():
        return None, "redis-server not found"
    server = RedisServer()
    if not server.launch():
        return None, f"redis-server on port {server.port} did not start"
    # A build without hiredis refuses the option; say so rather than fail every run.
    probe = subprocess.run([radixkv, "cache-sim", "--cache", "radix", "--capacity", "64", "--page-size",
                            "4", "--tier-remote", server.url, "-"], input="", capture_output=True,
                           text=True)
    if "no Redis client" in probe.stderr:
        server.stop()
        return None, NO_HIREDIS
    return server, None
