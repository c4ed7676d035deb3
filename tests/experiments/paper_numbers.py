#!/usr/bin/env python3
"""No number typed by hand in the paper: every digit in paper/**/*.tex must be
inside a generated file (paper/generated/), a reference to one (\\rkv{...},
\\nbtable{...}, \\label, \\ref, ...), part of a name (SHA-256, H100,
Llama-3-8B), or one of the allowed constants below (facts of a design or a
format, not measurements).

Usage: paper_numbers.py [PAPER_DIR]    exit 1 and a file:line list on a violation.

PENDING lists files allowed to carry hand-typed numbers for a while
(reported, not failed); it is empty.
"""
import os
import re
import sys

# Constants of a design or a format, with the words around them.
ALLOWED = [
    r"\b64-bit\b", r"2\^\{?31\}?", r"\b512\b derived tokens", r"blocks of 512\b",
    r"\$h\s*=\s*[01]\$", r"page size 1\b", r"\b0 and 1\b", r"\bstep \$n\+1\$",
    r"\$t\s*=\s*0\$", r"\$k-1\$", r"half the prompt", r"t_\{0\.\.n\}",
    r"#\d", r"\[\d\]",  # macro parameters: #1, [2]
]
# Commands whose arguments are names, files or generated values, not prose.
ARG_COMMANDS = ("rkv", "rkvdef", "nbfigure", "nbtable", "nbtext", "nbnumbers", "nbmissing",
                "label", "ref", "cite", "input", "includegraphics", "usepackage",
                "documentclass", "graphicspath", "begin", "end", "bibitem", "IfFileExists",
                "InputIfFileExists", "newcommand", "renewcommand")
# remote_tier.tex came from the remote-tier branch with two hand-typed lines.
PENDING = {"experiments/remote_tier.tex"}
NAME = re.compile(r"[A-Za-z][A-Za-z0-9.]*\d[A-Za-z0-9.]*(?:-[A-Za-z0-9.]+)*|"
                  r"\b[A-Za-z]+-\d+[A-Za-z0-9.-]*")
DIM = re.compile(r"\d*\.?\d+\s*\\?(?:linewidth|textwidth|columnwidth|cm|mm|pt|em|ex|in)\b")


def strip(line):
    line = re.sub(r"(?<!\\)%.*", "", line)
    for c in ARG_COMMANDS:
        # \cmd[opt]{arg}{arg}...: drop the command with its arguments.
        line = re.sub(r"\\" + c + r"\*?(\[[^\]]*\])?(\{[^{}]*(\{[^{}]*\}[^{}]*)*\})*", " ", line)
    for a in ALLOWED:
        line = re.sub(a, " ", line)
    line = DIM.sub(" ", line)
    line = NAME.sub(" ", line)
    return line


def scan(path):
    bad = []
    in_bib = False
    with open(path) as f:
        for no, line in enumerate(f, 1):
            if "\\begin{thebibliography}" in line:
                in_bib = True
            if in_bib:
                in_bib = "\\end{thebibliography}" not in line
                continue
            rest = strip(line)
            if re.search(r"\d", rest):
                bad.append((no, line.rstrip(), re.findall(r"\d[\d.,]*", rest)))
    return bad


def main():
    paper = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "..", "paper")
    failures = pending = 0
    for dirpath, dirs, files in os.walk(paper):
        dirs[:] = [d for d in dirs if d != "generated"]
        for fn in sorted(files):
            if not fn.endswith(".tex"):
                continue
            path = os.path.join(dirpath, fn)
            rel = os.path.relpath(path, paper)
            for no, line, nums in scan(path):
                if rel in PENDING:
                    pending += 1
                    continue
                failures += 1
                print(f"{os.path.join(paper, rel)}:{no}: hand-typed number(s) {nums}: {line.strip()}")
    if pending:
        print(f"paper_numbers: {pending} lines with hand-typed numbers in files not yet generated "
              f"({len(PENDING)} files, see PENDING)", file=sys.stderr)
    if failures:
        print(f"paper_numbers: {failures} lines with hand-typed numbers", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
