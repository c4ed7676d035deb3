#!/usr/bin/env python3
"""experiments/reproduce --scale tiny against the committed tiny reference: every
experiment that runs here is reproduced (exit 0); then the same bundle against a
copy of the reference with one number moved beyond its tolerance must be reported
NOT reproduced, naming the experiment, with exit 1.

Usage: test_reproduce.py RADIXKV WORKDIR"""
import json
import os
import shutil
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
radixkv, work = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
env = dict(os.environ, RADIXKV=radixkv)
env.pop("RKV_FAIL_PROPERTY", None)
repro = os.path.join(ROOT, "experiments", "reproduce")
bundle = os.path.join(work, "bundle")
p = subprocess.run([repro, "--scale", "tiny", "--out", bundle], capture_output=True, text=True, env=env)
print(p.stderr[-4000:])
if p.returncode != 0 or "results reproduced" not in p.stdout:
    print(f"FAIL reproduce --scale tiny: exit {p.returncode}: {p.stdout.strip()}")
    sys.exit(1)
print("ok  ", p.stdout.strip())

with open(os.path.join(ROOT, "experiments", "reference", "tiny.json")) as f:
    ref = json.load(f)
with open(os.path.join(bundle, "manifest.json")) as f:
    ran = {n for n, o in json.load(f)["experiments"].items() if o["state"] == "ok"}
# routing's first hit rate (exact: a fixed-clock sim run), moved by 0.1.
row = next(r for r in ref["rows"] if r["experiment"] == "routing")
row["numbers"]["hit_rate"]["value"] += 0.1
bad_ref = os.path.join(work, "moved.json")
with open(bad_ref, "w") as f:
    json.dump(ref, f)
p = subprocess.run([repro, "--scale", "tiny", "--bundle", bundle, "--reference", bad_ref],
                   capture_output=True, text=True, env=env)
if p.returncode != 1 or "NOT reproduced" not in p.stdout or "routing" not in p.stdout:
    print(f"FAIL a moved reference number passed: exit {p.returncode}: {p.stdout.strip()}\n{p.stderr}")
    sys.exit(1)
print("ok  ", p.stdout.strip())
