#!/usr/bin/env python3
"""Build step: stage a CUDA source so ninja rebuilds its object when a header
it includes changes.

usage: cuda_stage.py SOURCE.cu WRAPPER.cu DEPFILE [INCLUDE_DIR...]

Meson before 1.4 gives nvcc no depfile arguments, so ninja records no header
for a .cu object and a changed .cuh/.h leaves it stale (its struct layouts can
then disagree with the C objects'). Each .cu is therefore compiled through
WRAPPER, one line that #includes SOURCE by absolute path (diagnostics and
SOURCE's own relative includes still point into the source tree). This step
writes WRAPPER and a depfile naming SOURCE and every project header it
includes transitively; when one of them changes, ninja reruns the step,
WRAPPER's mtime moves (it is rewritten every time: meson's custom-command rule
has restat, so an untouched WRAPPER would stop the rebuild) and the object is
rebuilt.

Resolution follows the preprocessor: #include "x" looks in the including
file's directory, then in the INCLUDE_DIRs; #include <x> only in the
INCLUDE_DIRs. Pass the dirs the target compiles with (its own, its
dependencies', the build root for rkv_config.h), not the system ones. Where a
name is not in the including file's directory but in several INCLUDE_DIRs,
all of them are listed: which one the compiler takes depends on the order
meson writes the -I flags, which differs between meson versions, and one
header too many costs a rebuild where one too few leaves a stale object.
For the same reason every #include line counts, also one inside #if 0 or a
comment. A name found in none of them is left out and not followed: it is a
system header (found on the compiler's own path) or missing, which the
compiler reports itself; listing a path that does not exist would make ninja
rerun the step on every build. Computed includes (#include MACRO) are not
followed; the project has none.
"""
import os
import re
import sys

INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*([<"])([^>"\n]+)[>"]', re.M)


def fail(msg):
    sys.exit(f"cuda_stage.py: {msg}")


def read_text(path, place):
    try:
        with open(path, encoding="utf-8", errors="surrogateescape") as fh:
            return fh.read()
    except OSError as e:
        fail(f"{place}: cannot read {path}: {e.strerror}")


def resolve(name, quoted, including_dir, include_dirs):
    """The files #include name can mean, in the order the preprocessor tries."""
    if os.path.isabs(name):
        return [name] if os.path.isfile(name) else []
    if quoted:
        here = os.path.join(including_dir, name)
        if os.path.isfile(here):
            return [here]
    return [p for p in (os.path.join(d, name) for d in include_dirs) if os.path.isfile(p)]


def headers(source, include_dirs):
    """SOURCE and every file it includes transitively, as real paths, in the
    order first met (SOURCE first)."""
    order, seen = [], set()
    stack = [(source, "command line")]
    while stack:
        path, place = stack.pop()
        real = os.path.realpath(path)
        if real in seen:
            continue
        seen.add(real)
        order.append(real)
        text = read_text(path, place)
        found = []
        for m in INCLUDE.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            for hit in resolve(m.group(2), m.group(1) == '"', os.path.dirname(real), include_dirs):
                found.append((hit, f"{path}:{line}"))
        stack.extend(reversed(found))  # depth first, in include order
    return order


def depfile_path(path, place):
    """A path as a Makefile-style depfile names it (the subset ninja reads)."""
    if "\n" in path or "\\" in path:
        fail(f"{place}: {path!r}: a newline or backslash cannot be written in a depfile")
    return path.replace("$", "$$").replace("#", "\\#").replace(" ", "\\ ")


def write_replace(path, text):
    # A fresh file renamed over the old one: its mtime is now even when the
    # text is unchanged, and a failed write leaves no half a file.
    tmp = path + ".tmp"
    try:
        with open(tmp, "w", encoding="utf-8", errors="surrogateescape") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except OSError as e:
        fail(f"cannot write {path}: {e.strerror}")


def main(argv):
    if len(argv) < 3:
        fail("usage: cuda_stage.py SOURCE.cu WRAPPER.cu DEPFILE [INCLUDE_DIR...]")
    source, wrapper, depfile, include_dirs = argv[0], argv[1], argv[2], argv[3:]
    if not os.path.isfile(source):
        fail(f"{source}: no such source file")
    absolute = os.path.abspath(source)
    if '"' in absolute or "\\" in absolute or "\n" in absolute:
        fail(f"{source}: {absolute!r}: a quote, backslash or newline cannot be named in #include")
    deps = headers(source, include_dirs)
    # ninja checks that the depfile names the edge's output as its target.
    rule = (depfile_path(wrapper, "WRAPPER") + ":"
            + "".join(" \\\n " + depfile_path(p, source) for p in deps) + "\n")
    write_replace(depfile, rule)
    write_replace(wrapper,
                  "/* Generated by scripts/cuda_stage.py; do not edit. */\n"
                  f'#include "{absolute}"\n')
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
