#!/usr/bin/env python3
"""No pyflakes finding in the repository's Python, but the allow-listed ones.

Reads every Python file of the checkout: files ending in .py, files without
an extension whose first line names python (experiments/*/run), and the code
cells of notebooks/*.ipynb, read as one program in cell order (a name a cell
defines is used by later ones). Unused imports and variables, undefined
names, redefinitions and f-strings without placeholders are the findings
that tell of dead or broken code; each is printed as PATH:LINE:COL (a
notebook's as PATH:cell N:LINE) and the test exits 1 unless the finding is
in flakes_allowed.txt beside this file, which names each deliberate one with
why it stays. An entry matches by path and message, not by line, so that
edits above it do not move it; an entry no finding matches only warns.

The files are those git tracks or would track (untracked, not ignored);
without git, every file below ROOT but hidden folders, build*/ and the
folders .gitignore names for outputs.

pyflakes is not in the standard library: the test runs under the first of
this Python, RKV_TORCH_PYTHON (scripts/torch_venv.sh installs pyflakes
there; run_tests exports it) and /usr/bin/python3 that imports it, and
skips (77) naming them when none does.

usage: flakes.py [ROOT] [--list]   (--list: print every finding, allowed or
not, and exit 0)
"""
import fnmatch
import importlib.util
import json
import os
import re
import subprocess
import sys

SKIP = 77
ALLOWED_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "flakes_allowed.txt")
# Without git: output folders that .gitignore names (executed notebooks,
# experiment results, the paper's generated files) beside the build trees.
_OUTPUTS = ("build*", "notebooks/figures", "paper/generated", "results", "experiments/*/results")
# IPython magics and shell escapes, written at the margin: not Python.
_MAGIC = re.compile(r"^[%!]")


def _has_pyflakes(python):
    try:
        return subprocess.run([python, "-c", "import pyflakes"], capture_output=True,
                              timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _pyflakes_here():
    """Returns when pyflakes imports in this Python; otherwise re-executes
    this script under the first candidate Python that has it, or exits SKIP
    naming the ones tried."""
    if importlib.util.find_spec("pyflakes") is not None:
        return
    tried = [sys.executable]
    marker = "RKV_FLAKES_REEXEC"
    if os.environ.get(marker) != "1":
        for python in (os.environ.get("RKV_TORCH_PYTHON"), "/usr/bin/python3"):
            if not python or python in tried:
                continue
            tried.append(python)
            if os.access(python, os.X_OK) and _has_pyflakes(python):
                sys.stdout.flush()
                os.execve(python, [python, os.path.abspath(__file__)] + sys.argv[1:],
                          dict(os.environ, **{marker: "1"}))
    print(f"skip: pyflakes does not import under {', '.join(tried)} (scripts/torch_venv.sh "
          "installs it; run_tests exports RKV_TORCH_PYTHON)", file=sys.stderr)
    sys.exit(SKIP)


def _is_python(root, rel):
    if rel.endswith((".py", ".ipynb")):
        return True
    if "." in os.path.basename(rel):
        return False
    try:
        with open(os.path.join(root, rel), "rb") as f:
            first = f.readline(200)
    except OSError:
        return False
    return first.startswith(b"#!") and b"python" in first


def _candidates(root):
    """Paths, relative to root, of the files that may hold Python."""
    try:
        p = subprocess.run(["git", "-C", root, "ls-files", "-z", "--cached", "--others",
                            "--exclude-standard"], capture_output=True, timeout=120)
        if p.returncode == 0:
            return sorted({x for x in p.stdout.decode().split("\0")
                           if x and os.path.isfile(os.path.join(root, x))})
    except (OSError, subprocess.TimeoutExpired):
        pass
    out = []
    for d, dirs, files in os.walk(root):
        rel_d = os.path.relpath(d, root)
        dirs[:] = sorted(x for x in dirs if not x.startswith(".") and x != "__pycache__"
                         and not any(fnmatch.fnmatch(os.path.normpath(os.path.join(rel_d, x)), o)
                                     for o in _OUTPUTS))
        out += [os.path.normpath(os.path.join(rel_d, f)) for f in files]
    return sorted(out)


def _notebook_source(nb):
    """(source, starts): a notebook's (parsed JSON) code cells joined in
    order, magics blanked, and per cell (number counted from 1 over all
    cells, first line in source)."""
    lines, starts = [], []
    for n, cell in enumerate(nb.get("cells", []), 1):
        if cell.get("cell_type") != "code":
            continue
        src = cell.get("source", "")
        src = "".join(src) if isinstance(src, list) else src
        starts.append((n, len(lines) + 1))
        lines += ["#" if _MAGIC.match(x) else x for x in src.splitlines()] + [""]
    return "\n".join(lines) + "\n", starts


def _place(rel, line, col, starts):
    if not starts:
        return f"{rel}:{line}:{col}"
    cell, first = ([s for s in starts if s[1] <= line] or starts)[0 if line < 1 else -1]
    return f"{rel}:cell {cell}:{line - first + 1}"


def findings(root):
    """(path, place, message) of every pyflakes finding under root, and the
    number of files read."""
    out, n = [], 0
    for rel in _candidates(root):
        if not _is_python(root, rel):
            continue
        path = os.path.join(root, rel)
        starts = []
        try:
            with open(path, encoding="utf-8") as f:
                src = f.read()
            if rel.endswith(".ipynb"):
                src, starts = _notebook_source(json.loads(src))
        except (OSError, UnicodeDecodeError, ValueError, AttributeError) as e:
            out.append((rel, rel, f"cannot be read: {e}"))
            continue
        n += 1
        out += [(rel, place, msg) for place, msg in _check(rel, src, starts)]
    return out, n


def _check(rel, src, starts):
    """(place, message) of pyflakes' findings in one file's source."""
    from pyflakes import api

    class Collect:
        def __init__(self):
            self.got = []

        def unexpectedError(self, filename, msg):
            self.got.append((None, f"cannot be read: {msg}"))

        def syntaxError(self, filename, msg, lineno, offset, text):
            self.got.append(((lineno or 0, offset or 0), f"syntax error: {msg}"))

        def flake(self, m):
            self.got.append(((m.lineno, m.col + 1), m.message % m.message_args))

    c = Collect()
    api.check(src, rel, c)
    return [(_place(rel, *where, starts) if where else rel, msg) for where, msg in c.got]


# The test must be able to fail: a file and a notebook with known findings
# (a name a later cell uses from an earlier one is not one; a magic is not
# read as Python) must read as these.
_SAMPLE = "import os\n\n\ndef f():\n    x = 1\n    return y\n"
_SAMPLE_NB = {"cells": [{"cell_type": "code", "source": ["import sys\n", "%matplotlib inline\n",
                                                           "a = 1"]},
                        {"cell_type": "markdown", "source": "text"},
                        {"cell_type": "code", "source": "print(a, f'x')\n"}]}
_SAMPLE_WANT = [("s.py:1:1", "'os' imported but unused"),
                ("s.py:5:5", "local variable 'x' is assigned to but never used"),
                ("s.py:6:12", "undefined name 'y'"),
                ("n.ipynb:cell 1:1", "'sys' imported but unused"),
                ("n.ipynb:cell 3:1", "f-string is missing placeholders")]


def _self_check():
    got = sorted(_check("s.py", _SAMPLE, [])) + sorted(_check("n.ipynb", *_notebook_source(_SAMPLE_NB)))
    if got != _SAMPLE_WANT:
        print(f"flakes: the samples read as {got}, want {_SAMPLE_WANT}")
        return False
    return True


def read_allowed(path):
    """{(path, message): reason} from the allow-list; a malformed line is an
    error naming its place."""
    allowed = {}
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(f, 1):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            parts = [p.strip() for p in line.rstrip("\n").split(" | ")]
            if len(parts) != 3 or not all(parts):
                raise ValueError(f"{path}:{i}: want PATH | MESSAGE | REASON, got {line.strip()!r}")
            if (parts[0], parts[1]) in allowed:
                raise ValueError(f"{path}:{i}: {parts[0]} | {parts[1]} is listed twice")
            allowed[(parts[0], parts[1])] = parts[2]
    return allowed


def main(argv):
    args = [a for a in argv if not a.startswith("--")]
    root = os.path.abspath(args[0] if args else os.path.join(os.path.dirname(__file__), "..", ".."))
    list_all = "--list" in argv
    _pyflakes_here()
    import pyflakes
    try:
        allowed = read_allowed(ALLOWED_FILE)
    except (OSError, ValueError) as e:
        print(f"flakes: {e}")
        return 1
    if not _self_check():
        return 1
    found, n = findings(root)
    bad, seen = 0, set()
    for rel, place, msg in found:
        key = (rel, msg)
        seen.add(key)
        if list_all or key not in allowed:
            print(f"flakes: {place}: {msg}" + (f" (allowed: {allowed[key]})" if key in allowed else ""))
        bad += key not in allowed
    for rel, msg in sorted(set(allowed) - seen):
        print(f"flakes: warning: {rel} | {msg} is on the allow-list but pyflakes no longer "
              "finds it: take it off the list")
    print(f"flakes: pyflakes {pyflakes.__version__} under {sys.executable}: {n} files, "
          f"{len(found)} findings, {bad} not allowed")
    return 0 if list_all or not bad else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
