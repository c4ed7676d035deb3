"""A private redis-server for the script tests that need one (the remote tier,
the prefill/decode handoff): on 127.0.0.1 and a free port, no persistence, its
files in the caller's folder. Every wait is bounded. A test finds it beside its
own folder:

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    import redis_util
    if redis_util.installed():
        redis = redis_util.Redis(tmp)
        ... redis.url ...
        redis.stop()
"""
import shutil
import socket
import subprocess
import time

HOST = "127.0.0.1"


def installed():
    """Whether redis-server is on PATH."""
    return shutil.which("redis-server") is not None


def free_port():
    s = socket.socket()
    s.bind((HOST, 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Redis:
    """redis-server on HOST and a free port, its files in tmp: started at once
    unless start=False (url then names a server not there yet). stop() and
    start() again keep the port: the same URL, an empty server."""

    def __init__(self, tmp, start=True):
        self.tmp, self.proc, self.port = tmp, None, free_port()
        self.url = f"redis://{HOST}:{self.port}"
        if start:
            self.start()

    def start(self):
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", HOST, "--save", "",
             "--appendonly", "no", "--dir", self.tmp, "--daemonize", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(500):  # at most 5 s
            if self.cmd("PING") == "PONG":
                return
            time.sleep(0.01)
        self.stop()
        raise SystemExit(f"redis-server on port {self.port} did not answer")

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
