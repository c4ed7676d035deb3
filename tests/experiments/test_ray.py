#!/usr/bin/env python3
"""Sweeps as independent jobs: experiments/routing/run at --scale tiny with --jobs 1,
--jobs 2 and --ray ADDRESS against a Ray head started here for the test (on this
machine, 2 CPUs, its own temp folder; stopped at the end by its process group) must
write the same rows (apart from date, host load and the --out folder in each command).

Usage: test_ray.py RADIXKV WORKDIR. Ray comes from the venv of scripts/ray_venv.sh
($RKV_RAY_PYTHON, else ~/.cache/radixkv/ray-venv/bin/python); without it: exit 77."""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
radixkv, work = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
py = os.environ.get("RKV_RAY_PYTHON") or os.path.expanduser("~/.cache/radixkv/ray-venv/bin/python")
if not (os.access(py, os.X_OK) and subprocess.run([py, "-c", "import ray"],
                                                  capture_output=True).returncode == 0):
    print(f"skip: no Python with ray ({py}); scripts/ray_venv.sh makes one")
    sys.exit(77)
ray_bin = os.path.join(os.path.dirname(py), "ray")
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
driver = os.path.join(ROOT, "experiments", "routing", "run")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rows(out):
    rs = []
    with open(os.path.join(out, "routing.jsonl")) as f:
        for line in f:
            r = json.loads(line)
            for k in ("date", "host"):
                r.pop(k, None)
            # The --out folder differs between the runs; commands name it relative to
            # the checkout when it is inside it.
            for o in (out, os.path.relpath(out, ROOT)):
                r["command"] = r["command"].replace(o, "OUT")
            rs.append(r)
    return rs


def run(out, *extra, python=sys.executable):
    p = subprocess.run([python, driver, "--scale", "tiny", "--check", "--no-progress",
                        "--radixkv", radixkv, "--out", out, *extra], capture_output=True, text=True)
    if p.returncode != 0:
        print(f"FAIL routing {' '.join(extra)}: exit {p.returncode}\n{p.stdout}\n{p.stderr[-3000:]}")
        sys.exit(1)
    return rows(out)


one = run(os.path.join(work, "jobs1"), "--jobs", "1")
two = run(os.path.join(work, "jobs2"), "--jobs", "2")
if one != two:
    print("FAIL --jobs 2 rows differ from --jobs 1")
    sys.exit(1)
print(f"ok   --jobs 2: the same {len(one)} rows as --jobs 1")

port = free_port()
tmp = os.path.join("/tmp", f"rkv-ray-{os.getpid()}")  # Ray's socket paths must stay short
head = subprocess.Popen([ray_bin, "start", "--head", "--block", f"--port={port}", "--num-cpus=2",
                         "--include-dashboard=false", "--disable-usage-stats", f"--temp-dir={tmp}"],
                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                        start_new_session=True)
try:
    ok = False
    for _ in range(120):
        time.sleep(1)
        if head.poll() is not None:
            break
        probe = subprocess.run([py, "-c", f"import ray; ray.init(address='127.0.0.1:{port}', "
                                "logging_level='ERROR'); ray.shutdown()"], capture_output=True)
        if probe.returncode == 0:
            ok = True
            break
    if not ok:
        out = head.stdout.read() if head.poll() is not None else ""
        print(f"FAIL the Ray head on port {port} did not come up\n{out[-3000:]}")
        sys.exit(1)
    on_ray = run(os.path.join(work, "ray"), "--ray", f"127.0.0.1:{port}", python=py)
finally:
    try:
        os.killpg(head.pid, signal.SIGTERM)
        head.wait(60)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        os.killpg(head.pid, signal.SIGKILL)
    shutil.rmtree(tmp, ignore_errors=True)
if on_ray != one:
    diff = next(((a, b) for a, b in zip(one, on_ray) if a != b), None)
    print(f"FAIL --ray rows differ from --jobs 1: {diff}")
    sys.exit(1)
print(f"ok   --ray 127.0.0.1:{port}: the same {len(one)} rows as --jobs 1")
