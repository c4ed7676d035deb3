#!/usr/bin/env python3
"""SIGINT / SIGTERM (issue 21): the command finishes its step, writes whole
lines and a summary with "interrupted": true, removes the tier's files and
exits 130 / 143; a second signal changes nothing (the summary is still
written), a third exits at once, and even then the output ends at a line
boundary and no tier file is left. A signal inherited as ignored stays
ignored. Every wait is bounded.

Usage: test_signals.py RADIXKV
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from cli_check import CliCheck  # noqa: E402

EXE = sys.argv[1]
cli = CliCheck(EXE)
check = cli.check


def interrupt(args, sigs, out_path, wait_lines=1, gap=0.0, ignore=None, during=None):
    """Starts radixkv writing to out_path, waits (at most 60 s) for wait_lines
    lines there, calls during() (checks while it runs), sends the signals,
    returns (exit status, stderr). ignore: a signal the child inherits as
    ignored."""
    pre = (lambda: signal.signal(ignore, signal.SIG_IGN)) if ignore else None
    with open(out_path, "w") as out:
        p = subprocess.Popen([EXE] + args, stdout=out, stderr=subprocess.PIPE, text=True,
                             preexec_fn=pre)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and p.poll() is None:
            with open(out_path) as f:
                if f.read().count("\n") >= wait_lines:
                    break
            time.sleep(0.02)
        if during and p.poll() is None:
            during()
        for s in sigs:
            if p.poll() is None:
                p.send_signal(s)
            time.sleep(gap)
        try:
            _, err = p.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            p.kill()
            _, err = p.communicate()
            err += "\n(killed: did not stop within 120 s)"
    return p.returncode, err


def lines_of(path):
    with open(path) as f:
        text = f.read()
    ok = text == "" or text.endswith("\n")
    out = []
    for l in text.splitlines():
        try:
            out.append(json.loads(l))
        except ValueError:
            ok = False
    return ok, out


with tempfile.TemporaryDirectory() as tmp:
    big = os.path.join(tmp, "big.jsonl")
    with open(big, "w") as f:
        for i in range(300000):
            f.write(json.dumps({"id": i, "tokens": [i % 97, (i * 7) % 1013, i % 5000, i]}) + "\n")
    sim = ["cache-sim", "--cache", "radix", "--capacity", "200", "--page-size", "1", "--tier-host", "100",
           "--no-progress", big]
    for sig, code in [(signal.SIGINT, 130), (signal.SIGTERM, 143)]:
        out = os.path.join(tmp, "sim.jsonl")
        rc, err = interrupt(sim, [sig], out, wait_lines=100)
        whole, lines = lines_of(out)
        reqs = [l for l in lines if l["type"] == "request"]
        summ = lines[-1] if lines else {}
        check(rc == code and whole and summ.get("type") == "summary" and summ.get("interrupted") is True
              and summ["requests"] == len(reqs) and 0 < len(reqs) < 300000 and "interrupted after" in err,
              f"cache-sim {sig.name}: exit {rc}, {len(reqs)} requests, summary {str(summ)[:120]}, {err.strip()[-200:]}")
    # A second signal changes nothing: the summary is still written.
    out = os.path.join(tmp, "sim2.jsonl")
    rc, err = interrupt(sim, [signal.SIGINT, signal.SIGINT], out, wait_lines=100)
    whole, lines = lines_of(out)
    check(rc == 130 and whole and lines and lines[-1].get("interrupted") is True,
          f"cache-sim, two SIGINTs: exit {rc}, whole lines {whole}, last {str(lines[-1:])[:100]}")
    # A third: out at once, still only whole lines.
    out = os.path.join(tmp, "sim3.jsonl")
    rc, err = interrupt(sim, [signal.SIGINT] * 3, out, wait_lines=100)
    whole, lines = lines_of(out)
    check(rc == 130 and whole, f"cache-sim, three SIGINTs: exit {rc}, whole lines {whole}")
    # SIGINT inherited as ignored (`radixkv ... &`): it stays ignored, the
    # replay runs to its end (a short trace), SIGTERM still works.
    small = os.path.join(tmp, "small.jsonl")
    with open(small, "w") as f:
        for i in range(20000):
            f.write(json.dumps({"id": i, "tokens": [i % 97, i % 13, i]}) + "\n")
    out = os.path.join(tmp, "sim_ign.jsonl")
    rc, err = interrupt(sim[:-1] + [small], [signal.SIGINT], out, wait_lines=10, ignore=signal.SIGINT)
    whole, lines = lines_of(out)
    check(rc == 0 and whole and lines and lines[-1].get("type") == "summary"
          and "interrupted" not in lines[-1] and lines[-1].get("requests") == 20000,
          f"cache-sim with SIGINT ignored by its parent: exit {rc}, last {str(lines[-1:])[:120]}")

    # run: cpu backend, pins, a disk tier with files; SIGTERM after the first request.
    trace = os.path.join(tmp, "run.jsonl")
    with open(trace, "w") as f:
        for i in range(400):
            f.write(json.dumps({"id": i, "tokens": [1, 2, 3, 4, 5, 6, 7, 8] + [100 + i, 200 + i], "max_tokens": 4}) + "\n")
    pin = os.path.join(tmp, "pin.jsonl")
    with open(pin, "w") as f:
        f.write("[1, 2, 3, 4]\n")
    tdir = os.path.join(tmp, "tier")
    run = ["run", "--no-progress", "--threads", "1", "--trace", trace, "--pin", pin, "--kv-tokens", "64",
           "--page-size", "2", "--max-running", "2", "--tier-host", "8", "--tier-disk", "64", "--tier-dir", tdir]
    out = os.path.join(tmp, "run.jsonl.out")
    rc, err = interrupt(run, [signal.SIGTERM], out, wait_lines=3)
    whole, lines = lines_of(out)
    summ = lines[-1] if lines else {}
    check(rc == 143 and whole and summ.get("type") == "summary" and summ.get("interrupted") is True
          and len(lines) - 1 < 400 and os.path.isdir(tdir) and os.listdir(tdir) == [],
          f"run SIGTERM: exit {rc}, {len(lines)} lines, summary {str(summ)[:120]}, tier files "
          f"{os.listdir(tdir)[:3] if os.path.isdir(tdir) else None}, {err.strip()[-300:]}")
    # The disk tier's file is unlinked while the run holds it: the directory
    # is empty even mid-run, so no way of ending the process leaves a file.
    seen = []
    out = os.path.join(tmp, "run2.jsonl.out")
    rc, err = interrupt(run, [signal.SIGINT, signal.SIGINT], out, wait_lines=3,
                        during=lambda: seen.append(os.listdir(tdir)))
    whole, lines = lines_of(out)
    check(rc == 130 and whole and lines and lines[-1].get("interrupted") is True and seen == [[]],
          f"run, two SIGINTs: exit {rc}, whole lines {whole}, last {str(lines[-1:])[:100]}, "
          f"tier dir mid-run {seen}")
    out = os.path.join(tmp, "run3.jsonl.out")
    rc, err = interrupt(run, [signal.SIGINT] * 3, out, wait_lines=3)
    whole, _ = lines_of(out)
    check(rc == 130 and whole and os.listdir(tdir) == [],
          f"run, three SIGINTs: exit {rc}, whole lines {whole}, tier files {os.listdir(tdir)[:3]}")
    # run --replicas stops like a single engine (it once ignored signals).
    many = os.path.join(tmp, "many.jsonl")
    with open(many, "w") as f:
        for i in range(100000):
            f.write(json.dumps({"id": i, "tokens": [i % 97, (i * 7) % 1013, i % 4000]}) + "\n")
    rep = ["run", "--no-progress", "--backend", "sim", "--trace", many, "--replicas", "2",
           "--router", "cache-aware", "--max-tokens", "2"]
    out = os.path.join(tmp, "rep.jsonl.out")
    rc, err = interrupt(rep, [signal.SIGTERM], out, wait_lines=20)
    whole, lines = lines_of(out)
    summ = lines[-1] if lines else {}
    check(rc == 143 and whole and summ.get("type") == "summary" and summ.get("interrupted") is True
          and 0 < summ.get("requests", 0) and len(lines) - 1 < 100000,
          f"run --replicas SIGTERM: exit {rc}, {len(lines)} lines, summary {str(summ)[:120]}, "
          f"{err.strip()[-200:]}")

sys.exit(cli.finish("signals end runs cleanly"))
