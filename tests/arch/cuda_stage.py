#!/usr/bin/env python3
"""CUDA objects are rebuilt when a header they include changes
(scripts/cuda_stage.py; docs/ARCHITECTURE.md, "Building").

usage: cuda_stage.py SOURCE_ROOT BUILD_ROOT HAVE_CUDA CC...

1. The stage script on a small tree in a temporary folder: the depfile names
   exactly the source and the project headers it reaches (quoted includes from
   the including file's folder first, then the include dirs; angle includes
   from the include dirs only; system and missing headers left out), spaces
   escaped; the C compiler's own -M on the same wrapper finds nothing the
   depfile lacks; a rerun moves the wrapper's mtime; a missing source is an
   error naming it.
2. With HAVE_CUDA=true, the build itself: every CUDA compile in build.ninja
   reads a staged wrapper whose edge has a depfile read as gcc deps, and the
   headers ninja recorded for each wrapper include every project header
   nvcc -M reports for its compile command.
Exit 1 naming every failed check.
"""
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile

ROOT, BUILD, HAVE_CUDA, CC = (os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2]),
                              sys.argv[3] == "true", sys.argv[4:])
STAGE = os.path.join(ROOT, "scripts", "cuda_stage.py")
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print(f"cuda_stage: FAIL: {what}")
    return ok


def make_deps(text):
    """The prerequisites of a Makefile-style rule (-M output, a depfile)."""
    text = text.replace("\\\n", " ")
    _, _, prereqs = text.partition(": ")
    return [p.replace("\\ ", " ").replace("$$", "$")
            for p in re.findall(r"(?:\\ |[^ \n])+", prereqs)]


# The tree, as (path, text): src/k.cu includes k.cuh, which reaches inc/ and
# inc2/ (the include dirs); src/stdio.h and inc/dup.h are decoys.
TREE = {
    "src/k.cu": '#include <stdio.h>\n#include "k.cuh"\n#include "missing.h"\n'
                '  #  include <angle.h>\n#include "dup.h"\n',
    "src/k.cuh": '#pragma once\n#include "lib.h"\n#include "both.h"\n#include "k.cuh"\n',
    "src/dup.h": "",      # "dup.h" from src/k.cu: its own folder wins over inc/dup.h
    "src/stdio.h": "",    # <stdio.h> never looks in the including file's folder
    "inc/lib.h": '#pragma once\n#include "sub/deep.h"\n#include "sp ace.h"\n',
    "inc/sub/deep.h": '#pragma once\n#include "../lib.h"\n',  # back up: a cycle, followed once
    "inc/angle.h": "",    # <angle.h> through the include dirs
    "inc/both.h": "",     # "both.h" is in both include dirs: both listed
    "inc/dup.h": "",
    "inc/unused.h": "",
    "inc2/both.h": "",
    "inc2/sp ace.h": "",
}
EXPECTED = {"src/k.cu", "src/k.cuh", "src/dup.h", "inc/lib.h", "inc/sub/deep.h",
            "inc2/sp ace.h", "inc/angle.h", "inc/both.h", "inc2/both.h"}
# Of the two both.h, the compiler takes the first include dir's.
NOT_TAKEN = {"inc2/both.h"}


def run_stage(tmp, source, wrapper, depfile):
    return subprocess.run([sys.executable, STAGE, source, wrapper, depfile,
                           os.path.join(tmp, "inc"), os.path.join(tmp, "inc2")],
                          cwd=tmp, capture_output=True, text=True)


def check_script():
    with tempfile.TemporaryDirectory() as tmp:
        tmp = os.path.realpath(tmp)
        for rel, text in TREE.items():
            os.makedirs(os.path.dirname(os.path.join(tmp, rel)), exist_ok=True)
            with open(os.path.join(tmp, rel), "w") as fh:
                fh.write(text)
        os.mkdir(os.path.join(tmp, "out"))
        r = run_stage(tmp, "src/k.cu", "out/k.cu", "out/k.cu.d")
        if not check(r.returncode == 0, f"stage exited {r.returncode}: {r.stderr.strip()}"):
            return
        with open(os.path.join(tmp, "out/k.cu.d")) as fh:
            dep = fh.read()
        check(dep.startswith("out/k.cu:"), f"depfile's target is not the wrapper: {dep[:40]!r}")
        listed = make_deps(dep)
        got = {os.path.relpath(p, tmp) for p in listed}
        check(got == EXPECTED, f"depfile lists {sorted(got)}, expected {sorted(EXPECTED)}")
        check(len(listed) == len(got), f"depfile lists a file twice: {listed}")
        check("sp\\ ace.h" in dep, "a space in a path is not escaped in the depfile")
        with open(os.path.join(tmp, "out/k.cu")) as fh:
            wrapper = fh.read()
        want = f'#include "{os.path.join(tmp, "src/k.cu")}"'
        check(want in wrapper.splitlines(), f"wrapper lacks {want}: {wrapper!r}")

        # The C compiler resolves the same includes: nothing it reads in the
        # tree is missing from the depfile (-MG: missing.h is no error).
        r = subprocess.run(CC + ["-x", "c", "-M", "-MG", "-I", "inc", "-I", "inc2", "out/k.cu"],
                           cwd=tmp, capture_output=True, text=True)
        if check(r.returncode == 0,
                 f"{' '.join(CC)} -M exited {r.returncode}: {r.stderr.strip()[-500:]}"):
            cc_read = {os.path.relpath(os.path.realpath(os.path.join(tmp, p)), tmp)
                       for p in make_deps(r.stdout) if os.path.isfile(os.path.join(tmp, p))}
            cc_read = {p for p in cc_read if not p.startswith("..") and p != "out/k.cu"}
            check(cc_read == EXPECTED - NOT_TAKEN,
                  f"the C compiler reads {sorted(cc_read)}, the depfile lists {sorted(got)}")

        # ninja's custom-command rule has restat: the wrapper must be newer
        # after every run, or the object would not be rebuilt.
        past = os.stat(os.path.join(tmp, "out/k.cu")).st_mtime_ns - 3600 * 10**9
        os.utime(os.path.join(tmp, "out/k.cu"), ns=(past, past))
        r = run_stage(tmp, "src/k.cu", "out/k.cu", "out/k.cu.d")
        check(r.returncode == 0 and os.stat(os.path.join(tmp, "out/k.cu")).st_mtime_ns > past,
              "a rerun leaves the wrapper's mtime where it was")

        r = run_stage(tmp, "src/gone.cu", "out/gone.cu", "out/gone.cu.d")
        check(r.returncode != 0 and "src/gone.cu" in r.stderr
              and not os.path.exists(os.path.join(tmp, "out/gone.cu")),
              f"a missing source: exit {r.returncode}, stderr {r.stderr.strip()!r}")


def ninja_edges():
    """build.ninja's edges as (outputs, rule, inputs, variables), and the
    variables of each rule."""
    edges, rules, cur = [], {}, None
    with open(os.path.join(BUILD, "build.ninja")) as fh:
        text = fh.read().replace("$\n", "")
    for line in text.splitlines():
        if line.startswith("build "):
            outs, _, rest = line[6:].partition(": ")
            rule, _, ins = rest.partition(" ")
            cur = {}
            edges.append((outs.split(), rule, ins.split("|")[0].split(), cur))
        elif line.startswith("rule "):
            cur = rules.setdefault(line[5:].strip(), {})
        elif line.startswith(" ") and cur is not None and " = " in line:
            key, _, value = line.strip().partition(" = ")
            cur[key] = value
        else:
            cur = None
    return edges, rules


def project_file(path, cwd):
    real = os.path.realpath(os.path.join(cwd, path))
    inside = [r for r in (BUILD, ROOT) if real.startswith(r + os.sep)]
    return real if inside and os.path.isfile(real) else None


def check_build():
    edges, rules = ninja_edges()
    producer = {out: (rule, vars_) for outs, rule, _, vars_ in edges for out in outs}
    compiles = [(outs[0], ins[0]) for outs, rule, ins, _ in edges if rule == "cuda_COMPILER"]
    if not check(compiles, "a CUDA build with no cuda_COMPILER edge in build.ninja"):
        return
    rule = rules.get("CUSTOM_COMMAND_DEP", {})
    check(rule.get("deps") == "gcc" and "depfile" in rule,
          f"rule CUSTOM_COMMAND_DEP does not read its depfile as gcc deps: {rule}")
    with open(os.path.join(BUILD, "compile_commands.json")) as fh:
        commands = {os.path.normpath(e["file"]): e for e in json.load(fh)}
    for obj, src in compiles:
        made = producer.get(src)
        if not check(made and made[0] == "CUSTOM_COMMAND_DEP" and "DEPFILE" in made[1]
                     and "cuda_stage.py" in made[1].get("COMMAND", ""),
                     f"{obj} compiles {src}, which is not staged with a depfile by "
                     "scripts/cuda_stage.py (see attention/meson.build)"):
            continue
        r = subprocess.run(["ninja", "-C", BUILD, "-t", "deps", src], capture_output=True,
                           text=True)
        recorded = {project_file(line.strip(), BUILD) for line in r.stdout.splitlines()[1:]
                    if line.strip()} - {None}
        if not check(r.returncode == 0 and "#deps 0" not in r.stdout and recorded,
                     f"ninja recorded no headers for {src} (build first): {r.stdout.strip()}"):
            continue
        entry = commands.get(os.path.normpath(src))
        if not check(entry, f"{src} is not in compile_commands.json"):
            continue
        argv = shlex.split(entry["command"])
        i = argv.index("-o")
        argv = argv[:i] + [a for a in argv[i + 2:] if a != "-c"] + ["-M"]
        m = subprocess.run(argv, cwd=entry["directory"], capture_output=True, text=True)
        if not check(m.returncode == 0, f"nvcc -M for {src} exited {m.returncode}: "
                     f"{m.stderr.strip()[-500:]}"):
            continue
        wrapper = os.path.realpath(os.path.join(entry["directory"], src))
        read = {project_file(p, entry["directory"]) for p in make_deps(m.stdout)} - {None, wrapper}
        check(read <= recorded, f"{src}: nvcc reads {sorted(read - recorded)}, which ninja "
              "did not record: a missing include dir in its cuda_stage command?")
        print(f"cuda_stage: {src}: ninja records {len(recorded)} project files, nvcc reads "
              f"{len(read)}")


def main():
    check_script()
    if HAVE_CUDA:
        check_build()
    else:
        print("cuda_stage: no CUDA in this build; build.ninja not checked")
    print(f"cuda_stage: {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
