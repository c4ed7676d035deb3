#!/usr/bin/env python3
"""experiments/run_all and experiments/reproduce at their edges: every bad
argument (an empty or repeated --only item, --jobs 0 or -3, an --out that is
a file, a manifest or reference that is not JSON, is {} or [], or lacks a
field) is one line on stderr naming the argument, exit 2, no traceback;
--record refuses a bundle made from a dirty tree; reproduce covers every
experiment run_all runs; and a SIGTERM to run_all reaches the running driver
and its radixkv (none is left running), and the partial bundle's manifest
says it was interrupted (exit 143).

Usage: test_drivers.py RADIXKV WORKDIR"""
import json
import os
import shutil
import signal
import subprocess
import sys
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "experiments"))
radixkv, work = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
env = dict(os.environ, RADIXKV=radixkv)
env.pop("RKV_FAIL_PROPERTY", None)
RUN_ALL = os.path.join(ROOT, "experiments", "run_all")
REPRO = os.path.join(ROOT, "experiments", "reproduce")
bad = []


def refused(cmd, names):
    what = " ".join(os.path.basename(c) if c.startswith("/") else c for c in cmd[1:])
    # In a group of its own: a driver that wrongly starts running experiments
    # is stopped whole when it overruns.
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                         start_new_session=True)
    try:
        err = p.communicate(timeout=120)[1].strip()
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        bad.append(f"{what}: still running after 120 s (it should have refused at once)")
        return
    if p.returncode != 2:
        bad.append(f"{what}: exit {p.returncode}, want 2: {err[-300:]}")
    elif "Traceback" in err or len(err.splitlines()) != 1:
        bad.append(f"{what}: not one line: {err[-500:]}")
    elif names not in err:
        bad.append(f"{what}: the error does not name {names!r}: {err}")


a_file = os.path.join(work, "a_file")
with open(a_file, "w") as f:
    f.write("x\n")
for args, names in ((["--only", ","], "--only"), (["--only", ""], "--only"),
                    (["--only", "routing,routing"], "--only"), (["--only", "nosuch"], "--only"),
                    (["--jobs", "0"], "--jobs"), (["--jobs", "-3"], "--jobs"),
                    (["--out", a_file], "--out"), (["--out", os.path.join(a_file, "sub")], "--out")):
    out = [] if "--out" in args else ["--out", os.path.join(work, "never")]
    refused([sys.executable, RUN_ALL, "--scale", "tiny", "--no-notebooks"] + out + args, names)

# reproduce: manifests and references that are not what they claim.
good_ref = os.path.join(ROOT, "experiments", "reference", "tiny.json")
bundle = os.path.join(work, "bundle")
os.makedirs(bundle)
manifest = {"scale": "tiny", "commit": "0123456789ab", "experiments": {}}
cases = {"not_json": "{", "empty_object": "{}", "list": "[]", "string": '"x"'}
for name, text in cases.items():
    path = os.path.join(work, name + ".json")
    with open(path, "w") as f:
        f.write(text)
    refused([sys.executable, REPRO, "--scale", "tiny", "--bundle", bundle, "--reference", path],
            "--reference")
    with open(os.path.join(bundle, "manifest.json"), "w") as f:
        f.write(text)
    refused([sys.executable, REPRO, "--scale", "tiny", "--bundle", bundle, "--reference", good_ref],
            "--bundle")
for field in ("scale", "commit", "experiments"):
    m = {k: v for k, v in manifest.items() if k != field}
    with open(os.path.join(bundle, "manifest.json"), "w") as f:
        json.dump(m, f)
    refused([sys.executable, REPRO, "--scale", "tiny", "--bundle", bundle, "--reference", good_ref],
            field)
for field in ("rows", "commit"):
    path = os.path.join(work, "no_" + field + ".json")
    with open(path, "w") as f:
        json.dump({k: v for k, v in {"rows": [], "commit": "x"}.items() if k != field}, f)
    refused([sys.executable, REPRO, "--scale", "tiny", "--bundle", bundle, "--reference", path], field)
refused([sys.executable, REPRO, "--scale", "tiny", "--jobs", "0", "--out", os.path.join(work, "never")],
        "--jobs")
# --record: never from a dirty tree (the tree's own state, or the bundle's).
with open(os.path.join(bundle, "manifest.json"), "w") as f:
    json.dump(dict(manifest, commit="0123456789ab-dirty"), f)
refused([sys.executable, REPRO, "--scale", "tiny", "--bundle", bundle, "--record",
         "--reference", os.path.join(work, "recorded.json")], "--record")
if os.path.exists(os.path.join(work, "recorded.json")):
    bad.append("--record from a dirty bundle wrote a reference")

# reproduce compares every experiment run_all runs.
import importlib.machinery  # noqa: E402
import importlib.util  # noqa: E402
from rkv import reference  # noqa: E402
loader = importlib.machinery.SourceFileLoader("run_all", RUN_ALL)
spec = importlib.util.spec_from_loader("run_all", loader)
run_all = importlib.util.module_from_spec(spec)
loader.exec_module(run_all)
missing = [n for n in run_all.EXPERIMENTS if n not in reference.FIELDS]
if missing:
    bad.append(f"reproduce does not compare {', '.join(missing)} (rkv.reference.FIELDS)")
if "disaggregation" not in run_all.EXPERIMENTS:
    bad.append("disaggregation (in README.md's experiment table) is not in run_all")

# SIGTERM in the middle: forwarded, waited for, the manifest marked.
out = os.path.join(work, "interrupted")
p = subprocess.Popen([sys.executable, RUN_ALL, "--scale", "tiny", "--no-notebooks", "--only",
                      "hit_rate_sweep,long_prefill,mechanisms", "--out", out],
                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)


def others_with(path):
    """Processes (not this one) whose command line names path."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if path in cmd:
            found.append(f"{pid}: {cmd[:160]}")
    return found


# Wait (no deadline that decides anything: the test's meson timeout bounds it)
# until a radixkv of the first experiment runs, then signal run_all alone.
while p.poll() is None and not any(radixkv in x for x in others_with(out)):
    time.sleep(0.05)
if p.poll() is not None:
    bad.append(f"run_all ended before it could be signalled: exit {p.returncode}")
else:
    p.send_signal(signal.SIGTERM)
    err = p.communicate(timeout=240)[1]
    if p.returncode != 128 + signal.SIGTERM:
        bad.append(f"SIGTERM: run_all exit {p.returncode}, want 143: {err[-500:]}")
    left = others_with(out)
    if left:
        bad.append(f"SIGTERM: left running: {left}")
        for x in left:
            try:
                os.kill(int(x.split(":")[0]), signal.SIGKILL)
            except OSError:
                pass
    try:
        with open(os.path.join(out, "manifest.json")) as f:
            m = json.load(f)
        if m.get("interrupted") != "SIGTERM":
            bad.append(f"SIGTERM: the manifest is not marked interrupted: {m.get('interrupted')}")
        if "hit_rate_sweep" not in m["experiments"] or "mechanisms" not in m.get("not_run", []):
            bad.append(f"SIGTERM: manifest experiments {list(m['experiments'])}, "
                       f"not run {m.get('not_run')}")
    except (OSError, ValueError, KeyError) as e:
        bad.append(f"SIGTERM: manifest: {e}")

for b in bad:
    print("FAIL", b)
if bad:
    sys.exit(1)
print("drivers: bad arguments are one line with exit 2; SIGTERM stops run_all cleanly")
