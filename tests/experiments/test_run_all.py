#!/usr/bin/env python3
"""experiments/run_all with a property broken on purpose (RKV_FAIL_PROPERTY=routing)
in the middle of three fast experiments: every experiment still runs, the exit
status is 1, the last stdout line names routing, the bundle's manifest records each
outcome, and every row carries its provenance (command, config, commit, binary hash,
build type, scale, host CPU and load).

Usage: test_run_all.py RADIXKV WORKDIR"""
import json
import os
import shutil
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
radixkv, work = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
shutil.rmtree(work, ignore_errors=True)
env = dict(os.environ, RADIXKV=radixkv, RKV_FAIL_PROPERTY="routing")
p = subprocess.run([os.path.join(ROOT, "experiments", "run_all"), "--scale", "tiny", "--only",
                    "tree_evolution,routing,tiered_capacity", "--no-notebooks", "--out", work],
                   capture_output=True, text=True, env=env)
bad = []
last = p.stdout.strip().splitlines()[-1] if p.stdout.strip() else ""
if p.returncode != 1:
    bad.append(f"exit status {p.returncode}, expected 1")
if "routing" not in last or "failed" not in last:
    bad.append(f"the last stdout line does not name the failed experiment: {last!r}")
if "injected failure" not in p.stderr:
    bad.append("the failed property is not printed at the end")
try:
    with open(os.path.join(work, "manifest.json")) as f:
        m = json.load(f)
    states = {n: o["state"] for n, o in m["experiments"].items()}
    if states != {"tree_evolution": "ok", "routing": "FAIL", "tiered_capacity": "ok"}:
        bad.append(f"outcomes in the manifest: {states}")
    for k in ("scale", "commit", "binary_sha256", "build_type", "host", "date"):
        if not m.get(k):
            bad.append(f"manifest without {k}")
except (OSError, ValueError, KeyError) as e:
    bad.append(f"manifest: {e}")
need = ("command", "config", "commit", "binary_sha256", "build_type", "scale", "host")
for name in ("tree_evolution", "routing", "tiered_capacity"):
    path = os.path.join(work, name, name + ".jsonl")
    if not os.path.exists(path):
        bad.append(f"{path}: missing (the experiment did not run)")
        continue
    with open(path) as f:
        rows = [json.loads(x) for x in f if x.strip()]
    for r in rows:
        empty = [k for k in need if r.get(k) in (None, "", {})]
        host = r.get("host") or {}
        if empty or not host.get("cpu") or host.get("load") is None:
            bad.append(f"{name}: a row without {empty or 'host cpu/load'}")
            break
for b in bad:
    print("FAIL", b)
if bad:
    print(p.stdout[-3000:], p.stderr[-3000:], sep="\n")
    sys.exit(1)
print("run_all: every experiment ran, the failure is named at the end, rows carry provenance")
