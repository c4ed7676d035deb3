"""A private redis-server on loopback for the experiments that need a shared
remote tier (radixkv --tier-remote): a free port, no persistence, a temporary
folder; stop() ends it and removes the folder. start() returns None, with the
reason, where redis-server is missing or radixkv was built without hiredis,
so that a driver skips what needs it instead of failing."""
import shutil
import socket
import subprocess
import tempfile
import time


class RedisServer:
    def __init__(self, port, folder, proc):
        self.port, self.dir, self.proc = port, folder, proc
        self.url = f"redis://127.0.0.1:{port}"

    def stop(self):
        if self.proc:
            self.proc.kill()
            self.proc.wait()
            self.proc = None
        shutil.rmtree(self.dir, ignore_errors=True)


def start(radixkv):
    """(server, None) or (None, why)."""
    if not shutil.which("redis-server"):
        return None, "redis-server not found"
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    folder = tempfile.mkdtemp(prefix="rkv-redis-")
    proc = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", "no", "--dir", folder, "--daemonize", "no"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    server = RedisServer(port, folder, proc)
    for _ in range(500):  # at most 5 s
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.01)
    else:
        server.stop()
        return None, f"redis-server on port {port} did not start"
    # A build without hiredis refuses the option; say so rather than fail every run.
    probe = subprocess.run([radixkv, "cache-sim", "--cache", "radix", "--capacity", "64", "--page-size",
                            "4", "--tier-remote", server.url, "-"], input="", capture_output=True,
                           text=True)
    if "no Redis client" in probe.stderr:
        server.stop()
        return None, "radixkv was built without hiredis"
    return server, None
