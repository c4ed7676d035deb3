#!/usr/bin/env python3
"""The title page names the commands as they were run, and run_all finds the
serve venv as run_tests does (issue 47):
- rkv.bundle's title line with build_paper.sh's flags: --strict printed when the
  build was strict, absent when not; a --work build names build_paper.sh --work
  and the run_all it ran; no folder path beyond a basename;
- run_all's serve_python_default sets RKV_SERVE_PYTHON to
  HOME/.cache/radixkv/serve-venv/bin/python when unset and that python exists,
  says so, and leaves a set variable, a missing venv, and a run without
  serve_router alone."""
import importlib.machinery
import importlib.util
import json
import os
import stat
import sys
import tempfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "experiments"))
from rkv import bundle  # noqa: E402

fails = []


def expect(ok, text):
    print(("ok   " if ok else "FAIL ") + text)
    if not ok:
        fails.append(text)


def made(text):
    return text[text.find("Made by"):text.find("Smoke")]


def title(d, **kw):
    out = os.path.join(d, "bundle.tex")
    bundle.title_tex(os.path.join(d, "results"), out, **kw)
    with open(out) as f:
        return f.read()


def load_run_all():
    path = os.path.join(ROOT, "experiments", "run_all")
    loader = importlib.machinery.SourceFileLoader("run_all", path)
    spec = importlib.util.spec_from_loader("run_all", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


with tempfile.TemporaryDirectory() as d:
    os.makedirs(os.path.join(d, "results"))
    with open(os.path.join(d, "results", "manifest.json"), "w") as f:
        json.dump({"scale": "tiny", "commit": "abc123", "build_type": "release-ndebug", "date": "2026-11-28T00:00",
                   "host": {"cpu": "cpu", "cpus": 2, "load": 0.5}, "experiments": {}}, f)
    strict = title(d, paper_flags="--strict")
    expect("build\\_paper.sh -{}-strict -{}-bundle results/tiny}" in strict,
           f"a strict --bundle build prints --strict: {made(strict)!r}")
    plain = title(d)
    expect("strict" not in plain and "build\\_paper.sh -{}-bundle results/tiny}" in plain,
           f"a plain build prints no --strict: {made(plain)!r}")
    work = title(d, paper_flags="--strict", work="paper_work")
    expect("build\\_paper.sh -{}-strict -{}-work paper\\_work}" in work
           and "run\\_all -{}-scale tiny -{}-out paper\\_work/results -{}-no-paper}" in work,
           f"a --work build names itself and the run_all it ran: {made(work)!r}")
    expect(d not in strict + plain + work, "no path of the machine in the title line")
    expect(bundle.main(["--paper-flags", "--strict", "tex", os.path.join(d, "results"),
                        os.path.join(d, "m.tex")]) == 0
           and "-{}-strict" in open(os.path.join(d, "m.tex")).read(),
           "python3 -m rkv.bundle --paper-flags --strict tex BUNDLE OUT prints --strict")

run_all = load_run_all()
with tempfile.TemporaryDirectory() as home:
    names = run_all.EXPERIMENTS
    env = {}
    expect(run_all.serve_python_default(names, env, home) is None and "RKV_SERVE_PYTHON" not in env,
           "no serve venv: RKV_SERVE_PYTHON stays unset (serve_router skips as before)")
    py = os.path.join(home, ".cache", "radixkv", "serve-venv", "bin", "python")
    os.makedirs(os.path.dirname(py))
    with open(py, "w") as f:
        f.write("#!/bin/sh\nexit 0\n")
    os.chmod(py, stat.S_IRWXU)
    env = {}
    note = run_all.serve_python_default(names, env, home)
    expect(env.get("RKV_SERVE_PYTHON") == py and note and py in note,
           f"the serve venv is used when the variable is unset, and said: {note!r}")
    env = {"RKV_SERVE_PYTHON": "/other/python"}
    expect(run_all.serve_python_default(names, env, home) is None and env["RKV_SERVE_PYTHON"] == "/other/python",
           "a set RKV_SERVE_PYTHON is kept")
    env = {}
    expect(run_all.serve_python_default(("tree_evolution",), env, home) is None and not env,
           "a run without serve_router leaves the variable alone")
if fails:
    sys.exit(1)
print("the title page names the commands as run; run_all defaults RKV_SERVE_PYTHON to the serve venv")
