#!/usr/bin/env python3
"""A drip-fed slowloris does not lock other clients out (standard library only).

Every connection slot is taken by sockets that send one header byte at a time,
never silent long enough for the silence timeout; the drip goes on for longer
than the new client waits. --request-read-timeout shuts each dripping socket
once it has had its time to deliver a request, so a new client is answered
while the drip goes on; without the deadline it would wait the drip out and
fail. Then --max-connections-per-peer: one address cannot hold every slot.
Usage: test_serve_slow.py PATH/TO/radixkv"""
import os
import select
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from serve_util import HOST, Server, check  # noqa: E402

RADIXKV = sys.argv[1] if len(sys.argv) > 1 else None
SLOTS = 24
DRIP_SECONDS = 240   # longer than the new client waits
CLIENT_WAIT = 120


def drip(port, stop, closed):
    """One slowloris socket: a header byte every 0.3 s until stopped or closed."""
    try:
        s = socket.create_connection((HOST, port), timeout=10)
    except OSError:
        closed.append("refused")
        return
    msg = b"GET /health HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 10000
    try:
        for b in msg:
            if stop.is_set():
                break
            s.send(bytes([b]))
            time.sleep(0.3)
    except OSError:
        closed.append("closed")
    finally:
        s.close()


def main():
    s = Server(RADIXKV, "--max-connections", str(SLOTS), "--max-connections-per-peer", str(SLOTS),
               "--request-read-timeout", "3", "--connection-timeout", "10")
    stop = threading.Event()
    closed = []
    ts = [threading.Thread(target=drip, args=(s.port, stop, closed), daemon=True)
          for _ in range(SLOTS)]
    try:
        for t in ts:
            t.start()
        time.sleep(1)  # the drip holds every slot now
        # A new client: answered once the deadline shut the dripping sockets.
        st, text, _ = s.request("GET", "/health", timeout=CLIENT_WAIT)
        check(st == 200, f"new client during the drip: {st} {text}")
        for _ in range(100):
            if len(closed) == SLOTS:
                break
            time.sleep(0.2)
        check(len(closed) == SLOTS and set(closed) == {"closed"},
              f"dripping sockets closed by the server: {len(closed)} of {SLOTS} {set(closed)}")
    finally:
        stop.set()
        s.kill()
    # One address holds at most --max-connections-per-peer: the others are
    # closed at once, and a request from that address still gets through.
    s = Server(RADIXKV, "--max-connections", "64", "--max-connections-per-peer", "8",
               "--request-read-timeout", "0", "--connection-timeout", "0")
    socks = []
    try:
        for _ in range(12):
            socks.append(socket.create_connection((HOST, s.port), timeout=10))
        # Over the cap: closed by the server as it accepts them (no timeout is on,
        # so nothing else closes one); wait until four are, at most a minute.
        gone = set()
        deadline = time.time() + 60
        while len(gone) < 4 and time.time() < deadline:
            r, _, _ = select.select([k for k in socks if k not in gone], [], [], 0.5)
            for k in r:
                try:
                    if k.recv(1) == b"":
                        gone.add(k)
                except OSError:
                    gone.add(k)
        r, _, _ = select.select([k for k in socks if k not in gone], [], [], 0.5)
        check(len(gone) == 4 and not r, f"connections over the per-peer cap closed: {len(gone)}"
              f" (+{len(r)}) of 4")
        for k in socks:
            k.close()
        socks = []
        # Once the server has seen them closed, the address may connect again.
        st, deadline = None, time.time() + 60
        while st != 200 and time.time() < deadline:
            try:
                st = s.request("GET", "/health", timeout=60)[0]
            except OSError:
                time.sleep(0.2)
        check(st == 200, f"after the cap: {st}")
    finally:
        for k in socks:
            k.close()
        s.kill()
    print("serve slow clients: ok")


if __name__ == "__main__":
    main()
