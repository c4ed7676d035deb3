#!/usr/bin/env python3
"""No number typed by hand in the paper: every digit in paper/**/*.tex must be
inside a generated file (paper/generated/), a reference to one (\\rkv{...},
\\nbtable{...}, \\label, \\ref, ...), part of a name (SHA-256, H100,
Llama-3-8B), or one of the allowed constants below (facts of a design or a
format, not measurements).

Comparison words are numbers too: "an order of magnitude", "twice", "thrice",
"double(s/d)", "halve(s/d)", "N-fold", "faster", "slower" (any case, whole
words) typed in paper/**/*.tex outside generated/ and the bibliography fail the
same way; a notebook computes such a word from the rows and writes it into its
generated numbers (\\rkv{NAME/...}), where it holds by construction.

Usage: paper_numbers.py [PAPER_DIR | FILE.tex]
    exit 1 and a file:line list on a violation.

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
                "InputIfFileExists", "newcommand", "renewcommand", "setcounter")
PENDING = set()
NAME = re.compile(r"[A-Za-z][A-Za-z0-9.]*\d[A-Za-z0-9.]*(?:-[A-Za-z0-9.]+)*|"
                  r"\b[A-Za-z]+-\d+[A-Za-z0-9.-]*")
# Comparison words, whole words in any case: "an order of magnitude", "twice",
# "double(d)", "halves", "faster", "fold", "tenfold", "2-fold", "x-fold" (not
# "manifold" or "unfold").
WORDS = re.compile(r"\b(?:orders?\s+of\s+magnitude|twice|thrice|doubl(?:e|es|ed)|halv(?:e|es|ed)|"
                   r"[\w$\\{}]*-fold|(?:two|three|four|five|six|seven|eight|nine|ten|twenty|"
                   r"hundred|thousand|many|several|multi)?fold|faster|slower)\b", re.IGNORECASE)
DIM = re.compile(r"\d*\.?\d+\s*\\?(?:linewidth|textwidth|columnwidth|cm|mm|pt|em|ex|in)\b")


def strip(line):
    line = strip_commands(line)
    for a in ALLOWED:
        line = re.sub(a, " ", line)
    line = DIM.sub(" ", line)
    line = NAME.sub(" ", line)
    return line


def strip_commands(line):
    """The line without its comment and the arguments of ARG_COMMANDS (a label
    or a file name may say "fold")."""
    line = re.sub(r"(?<!\\)%.*", "", line)
    for c in ARG_COMMANDS:
        line = re.sub(r"\\" + c + r"\*?(\[[^\]]*\])?(\{[^{}]*(\{[^{}]*\}[^{}]*)*\})*", " ", line)
    return line


def scan(path):
    """[(line number, line, what)]: hand-typed numbers and comparison words."""
    bad = []
    in_bib = False
    with open(path) as f:
        # A phrase may break across lines ("an order of\nmagnitude"): the words
        # are also looked for across each line break.
        lines = f.read().split("\n")
    for no, line in enumerate(lines, 1):
        if "\\begin{thebibliography}" in line:
            in_bib = True
        if in_bib:
            in_bib = "\\end{thebibliography}" not in line
            continue
        found = []
        rest = strip(line)
        nums = re.findall(r"\d[\d.,]*", rest) if re.search(r"\d", rest) else []
        if nums:
            found.append(f"hand-typed number(s) {nums}")
        here = strip_commands(line).rstrip()
        words = [m.group(0) for m in WORDS.finditer(here)]
        if no < len(lines):
            # A phrase that starts on this line and ends on the next.
            joined = here + " " + strip_commands(lines[no]).lstrip()
            words += [m.group(0) for m in WORDS.finditer(joined)
                      if m.start() < len(here) < m.end()]
        if words:
            found.append(f"comparison word(s) typed by hand {words}")
        if found:
            bad.append((no, line.rstrip(), "; ".join(found)))
    return bad


def main():
    paper = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "..", "paper")
    failures = pending = 0
    if os.path.isfile(paper):
        paths = [paper]
        paper = os.path.dirname(paper)
    else:
        paths = []
        for dirpath, dirs, files in os.walk(paper):
            dirs[:] = sorted(d for d in dirs if d != "generated")
            paths += [os.path.join(dirpath, fn) for fn in sorted(files) if fn.endswith(".tex")]
    for path in paths:
        rel = os.path.relpath(path, paper)
        for no, line, what in scan(path):
            if rel in PENDING:
                pending += 1
                continue
            failures += 1
            print(f"{os.path.join(paper, rel)}:{no}: {what}: {line.strip()}")
    if pending:
        print(f"paper_numbers: {pending} lines with hand-typed numbers in files not yet generated "
              f"({len(PENDING)} files, see PENDING)", file=sys.stderr)
    if failures:
        print(f"paper_numbers: {failures} lines with hand-typed numbers or comparison words",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
