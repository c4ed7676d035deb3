#!/usr/bin/env python3
"""The include graph follows the layer order (docs/ARCHITECTURE.md, "Rooms").

A source file may include headers of its own room and of rooms below it;
the peer rooms of one level (server, cachesim, replicas) never include each
other, and nothing includes a room above its own. Every quoted include must
resolve to a header of a known room (or a generated one), so a new room
cannot slip in unchecked. Exit 1 naming every offending line.
"""
import os
import re
import sys

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                       os.path.join(os.path.dirname(__file__), "..", ".."))

# Rooms, top to bottom: (room folder, level). Equal levels are peers.
ROOMS = [
    ("python/radixkv", 9),  # the Python package's extension: above everything it binds
    ("runtime/cli", 8),
    ("runtime/server", 7), ("runtime/cachesim", 7), ("runtime/replicas", 7),
    ("runtime/io", 6),
    ("runtime/engine", 5),
    ("runtime/backends", 4),
    ("runtime/model", 3), ("runtime/text", 3),
    ("attention", 2),
    ("radix", 1),
]
GENERATED = {"rkv_config.h"}  # configure_file output, any room may include it
# attention/ and radix/ are independent libraries side by side; attention may
# use radix's libc-level core (status codes, shared helpers), nothing else.
ALLOWED_DOWN_ACROSS = {("attention", "radix"): {"rkv_status.h", "rkv_core.h"}}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def main():
    owner = {}  # header name -> room
    for room, _ in ROOMS:
        d = os.path.join(ROOT, room)
        for f in os.listdir(d):
            if f.endswith((".h", ".cuh")):
                if f in owner:
                    print(f"layers: header {f} exists in {owner[f]} and {room}")
                    return 1
                owner[f] = room
    level = dict(ROOMS)
    bad = []
    files = 0
    for room, lv in ROOMS:
        d = os.path.join(ROOT, room)
        for f in sorted(os.listdir(d)):
            if not f.endswith((".c", ".h", ".cu", ".cuh")):
                continue
            files += 1
            path = os.path.join(room, f)
            with open(os.path.join(d, f), encoding="utf-8") as fh:
                for n, line in enumerate(fh, 1):
                    m = INCLUDE.match(line)
                    if not m or m.group(1) in GENERATED:
                        continue
                    h = os.path.basename(m.group(1))
                    to = owner.get(h)
                    where = f"{path}:{n}: includes {m.group(1)}"
                    if to is None:
                        bad.append(f"{where}: a header of no known room")
                    elif to == room:
                        continue
                    elif level[to] > lv:
                        bad.append(f"{where} of {to}, a room above {room}")
                    elif level[to] == lv:
                        bad.append(f"{where} of {to}, a peer room of {room}")
                    elif lv <= 2 and h not in ALLOWED_DOWN_ACROSS.get((room, to), set()):
                        bad.append(f"{where} of {to}: {room} and {to} are side by side")
    for b in bad:
        print("layers:", b)
    print(f"layers: {files} files in {len(ROOMS)} rooms, {len(bad)} includes against the order")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
