#!/usr/bin/env python3
"""`radixkv run --backend sim` with its profiles: --gpu h100@peer runs and its
summary names the profile and the file's hash; --sim-profile FILE gives the
same numbers as the built-in profile it copies; a malformed file, both options
at once and an unknown id fail with exit 2 naming the option and the field;
`radixkv list --json` lists every profile with its hash.

usage: test_sim_profile_cli.py RADIXKV PROFILE_DIR TRACE"""
import hashlib
import json
import os
import subprocess
import sys
import tempfile

RADIXKV, PROFILES, TRACE = sys.argv[1:4]
RUN = [RADIXKV, "run", "--backend", "sim", "--no-progress", "--fixed-clock", "--trace", TRACE]


def run(args):
    return subprocess.run(RUN + args, capture_output=True, text=True)


def summary(p):
    assert p.returncode == 0, p.stderr
    return [json.loads(l) for l in p.stdout.splitlines() if '"summary"' in l][-1]


def file_hash(name):
    with open(os.path.join(PROFILES, name), "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()[:16]


own = summary(run(["--gpu", "h100"]))
peer = summary(run(["--gpu", "h100@peer"]))
assert own["sim_profile"] == "h100" and own["sim_profile_hash"] == file_hash("h100.json"), own
assert peer["sim_profile"] == "h100@peer", peer
assert peer["sim_profile_hash"] == file_hash("h100@peer.json"), peer
# Faster attention kernels: the same schedule takes less model time.
assert peer["model_seconds"] < own["model_seconds"], (peer["model_seconds"], own["model_seconds"])
default = summary(run([]))
assert default["sim_profile"] == "h100", default

with tempfile.TemporaryDirectory() as d:
    src = open(os.path.join(PROFILES, "h100.json")).read()
    mine = os.path.join(d, "mine.json")
    open(mine, "w").write(src.replace('"id": "h100"', '"id": "my-h100"'))
    s = summary(run(["--sim-profile", mine]))
    assert s["sim_profile"] == "my-h100", s
    for k in ("model_seconds", "duration", "steps", "requests_per_s"):
        assert s[k] == own[k], (k, s[k], own[k])
    bad = os.path.join(d, "bad.json")
    open(bad, "w").write(src.replace('"kv": 0.77', '"kv": 7.7'))
    p = run(["--sim-profile", bad])
    assert p.returncode == 2 and "--sim-profile" in p.stderr and "efficiency.kv" in p.stderr \
        and bad in p.stderr, p.stderr
    p = run(["--sim-profile", mine, "--gpu", "h100"])
    assert p.returncode == 2 and "pick one" in p.stderr, p.stderr
    # cache-sim's time model takes the same profiles.
    cs = [RADIXKV, "cache-sim", "--no-progress", "--cache", "radix", "--model", "qwen2.5-3b",
          "--capacity", "4096", "--page-size", "16"]
    q = subprocess.run(cs + ["--sim-profile", mine, TRACE], capture_output=True, text=True)
    assert q.returncode == 0, q.stderr
    cs_sum = [json.loads(l) for l in q.stdout.splitlines() if '"summary"' in l][-1]
    assert cs_sum["gpu"] == "my-h100" and cs_sum["sim_profile_hash"] == \
        hashlib.sha256(open(mine, "rb").read()).hexdigest()[:16], cs_sum
    q = subprocess.run(cs + ["--gpu", "h100", TRACE], capture_output=True, text=True)
    ref = [json.loads(l) for l in q.stdout.splitlines() if '"summary"' in l][-1]
    assert ref["prefill_seconds"] == cs_sum["prefill_seconds"], (ref, cs_sum)
    q = subprocess.run(cs + ["--sim-profile", bad, TRACE], capture_output=True, text=True)
    assert q.returncode == 2 and "--sim-profile" in q.stderr and "efficiency.kv" in q.stderr, q.stderr
p = run(["--gpu", "h100@nobody"])
assert p.returncode == 2 and "--gpu" in p.stderr and "h100@nobody" in p.stderr, p.stderr

lst = json.loads(subprocess.run([RADIXKV, "list", "--json"], capture_output=True, text=True,
                                check=True).stdout)
names = {p["name"]: p["hash"] for p in lst["sim_profiles"]}
want = sorted(f[:-5] for f in os.listdir(PROFILES) if f.endswith(".json"))
assert sorted(names) == want, (names, want)
assert all(names[n] == file_hash(n + ".json") for n in want), names
print("ok: profiles named in summaries, files load, errors name the field")
