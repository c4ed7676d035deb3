#!/usr/bin/env python3
"""Script test of the remote tier through `radixkv run` on the cpu backend,
against a redis-server this test starts on 127.0.0.1 and a free port in a
temporary directory (and stops): outputs identical with and without the tier
after forced spills and reloads; a second process loads what the first
stored, with the same outputs; another namespace shares nothing; start-up
against no server fails naming it; a server killed mid-run leaves a run that
finishes with the right outputs and one warning per direction.
Exits 77 without redis-server or without hiredis in the build.

Usage: test_remote_cli.py RADIXKV
"""
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from cli_check import CliCheck  # noqa: E402
from redis_util import Redis, installed  # noqa: E402

EXE = sys.argv[1]
cli = CliCheck(EXE)
check = cli.check


def outputs(out):
    rows = [json.loads(l) for l in out.splitlines() if l.strip()]
    reqs = {r["id"]: r.get("output_ids") for r in rows if r.get("type") == "request"}
    summ = [r for r in rows if r.get("type") == "summary"]
    for r in summ:  # a rate is a fraction; stores count only what the server took
        if "remote_hit_rate" in r:
            check(0 <= r["remote_hit_rate"] <= 1, f"remote_hit_rate {r['remote_hit_rate']} in [0, 1]")
            check(r["remote_hit_tokens"] <= r["cached_tokens"],
                  f"remote hits {r['remote_hit_tokens']} within cached {r['cached_tokens']}")
            check(r.get("remote_refused_pages") == 0, f"no store refused ({r.get('remote_refused_pages')})")
    return reqs, summ[-1] if summ else None


def trace_file(tmp, n):
    rnd = random.Random(3)
    docs = [[rnd.randrange(1, 200) for _ in range(48)] for _ in range(2)]
    path = os.path.join(tmp, f"trace{n}.jsonl")
    with open(path, "w") as f:
        for i in range(n):
            toks = docs[i % 2] + [rnd.randrange(1, 200) for _ in range(4 + i % 5)]
            f.write(json.dumps({"id": i, "tokens": toks, "max_tokens": 4}) + "\n")
    return path


BASE = ["run", "--backend", "cpu", "--page-size", "4", "--max-running", "1", "--no-progress"]


def run(args):
    return cli.run(BASE + args, stdin=None, timeout=120)


def main():
    if not installed():
        print("redis-server not found: skipped", file=sys.stderr)
        return 77
    tmp = tempfile.mkdtemp(prefix="rkv-remote-")
    sv = Redis(tmp, start=False)
    try:
        rc, _, err = run(["--trace", trace_file(tmp, 2), "--tier-remote", sv.url])
        if "no Redis client" in err:
            print("built without hiredis: skipped", file=sys.stderr)
            return 77
        # 1. No server: start-up fails, naming it; a bad URL names the option.
        check(rc != 0 and sv.url in err, f"unreachable server fails naming it (rc {rc}: {err.strip()})")
        rc, _, err = run(["--trace", trace_file(tmp, 2), "--tier-remote", "http://x"])
        check(rc == 2 and "--tier-remote" in err, f"bad URL names the option (rc {rc}: {err.strip()})")

        sv.start()
        trace = trace_file(tmp, 16)
        # 2. Forced spills and reloads: 24 pages hold one document at a time.
        rc, out, err = run(["--trace", trace])
        ref, _ = outputs(out)
        check(rc == 0 and len(ref) == 16, f"reference run ({err.strip()[-200:]})")
        rc, out, err = run(["--trace", trace, "--num-pages", "24"])
        small, s = outputs(out)
        check(rc == 0 and small == ref, "small pool, no tier: same outputs")
        check(s and s["cached_tokens"] == 0, "small pool, no tier: nothing survives")
        for policy, ns in [("write-back", "wb"), ("write-through", "wt")]:
            rc, out, err = run(["--trace", trace, "--num-pages", "24", "--tier-remote", sv.url,
                                "--tier-remote-policy", policy, "--tier-remote-ns", ns])
            got, s = outputs(out)
            check(rc == 0 and got == ref, f"{policy}: same outputs with the remote tier ({err.strip()[-300:]})")
            check(s and s.get("remote_hit_tokens", 0) > 0 and s["cached_tokens"] > 0,
                  f"{policy}: pages reloaded from the server ({s and s.get('remote_hit_tokens')})")
            check(s and s.get("remote_corrupt_values") == 0, f"{policy}: no bad values")

        # 3. Two processes: the second loads the first's prefixes.
        first = trace_file(tmp, 4)
        rc, out, err = run(["--trace", first, "--tier-remote", sv.url, "--tier-remote-ns", "share"])
        check(rc == 0, "first process")
        rc, out, err = run(["--trace", first, "--tier-remote", sv.url, "--tier-remote-ns", "share"])
        got, s = outputs(out)
        want, _ = outputs(run(["--trace", first])[1])
        check(rc == 0 and got == want, "second process: same outputs")
        check(s and s.get("remote_hit_tokens", 0) >= 96, f"second process hits the first's prefixes ({s})")
        rc, out, err = run(["--trace", first, "--tier-remote", sv.url, "--tier-remote-ns", "other"])
        got, s = outputs(out)
        check(rc == 0 and got == want and s and s.get("remote_hit_tokens") == 0,
              "another namespace shares nothing")

        # 4. The server goes away mid-run (once the engine is connected).
        sv.stop()
        sv.start()  # empty: its first key means the engine is running
        long_trace = trace_file(tmp, 24)
        want, _ = outputs(run(["--trace", long_trace])[1])
        p = subprocess.Popen([EXE] + BASE + ["--trace", long_trace, "--num-pages", "24", "--tier-remote",
                                             sv.url, "--tier-remote-ns", "kill", "--tier-remote-timeout", "200",
                                             "--tier-remote-policy", "write-through"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2000):  # at most 20 s until the engine has stored pages
            if (sv.cmd("DBSIZE") or 0) > 0 or p.poll() is not None:
                break
            time.sleep(0.01)
        sv.stop()
        out, err = p.communicate(timeout=120)
        got, s = outputs(out)
        check(p.returncode == 0 and got == want, f"server killed mid-run: finishes, same outputs ({err[-300:]})")
        warns = [l for l in err.splitlines() if "warning: remote tier" in l]
        check(1 <= len(warns) <= 2, f"one warning per direction: {warns}")
        check(s and (s.get("remote_failed_lookups", 0) + s.get("remote_dropped_pages", 0)) > 0,
              "the failures are counted")
    finally:
        sv.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    return cli.finish("ok")


sys.exit(main())
