"""A private redis-server for the script tests that need one (the remote tier,
the prefill/decode handoff): experiments/rkv/redis_server.py's server (on
127.0.0.1 and a free port, no persistence), its files in the caller's folder,
and a failure to start ends the test. Every wait is bounded. A test finds it
beside its own folder:

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    import redis_util
    if redis_util.installed():
        redis = redis_util.Redis(tmp)
        ... redis.url ... redis.cmd("KEYS", "*") ...
        redis.stop()
"""
import os
import sys

# Appended, not inserted: experiments/ must not shadow the tests' own modules.
sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "experiments"))
from rkv.redis_server import RedisServer, installed  # noqa: E402

__all__ = ["Redis", "installed"]


class Redis(RedisServer):
    """The server, its files in tmp: started at once unless start=False (url
    then names a server not there yet). stop() and start() again keep the
    port: the same URL, an empty server."""

    def __init__(self, tmp, start=True):
        super().__init__(tmp)
        if start:
            self.start()

    def start(self):
        if not self.launch():
            raise SystemExit(f"redis-server on port {self.port} did not answer")
