#!/usr/bin/env python3
"""No function outside tests is longer than 100 lines.

Lists every C, CUDA and Python function in radix/, attention/, runtime/,
bench/ and python/ (test folders excluded) whose body is longer than LIMIT
lines: from its opening brace to its closing brace (C), from the first
statement of its body (docstring included) to its last line (Python). The
signature is left out, so a wrapped parameter list costs nothing. A function
on ALLOWED may stay long until it is split. Exit 1 naming each other
offender as file:line.

usage: long_functions.py [ROOT] [--list]   (--list: print every function
over LIMIT, allowed or not, and exit 0)
"""
import ast
import os
import re
import sys

LIMIT = 100
FOLDERS = ["radix", "attention", "runtime", "bench", "python"]
C_EXT = (".c", ".h", ".cu", ".cuh")
# "path:function" allowed over LIMIT, each with why it is not split yet.
ALLOWED = {
    # Tuned kernels: a split into device functions must be shown to keep
    # their registers, spills and speed (bench/ptxas_report.sh and
    # bench/gpu_check.sh on a GPU) before it lands.
    "attention/attn_decode.cuh:attn_decode_split_kernel": "tuned kernel, split with a GPU at hand",
    "attention/attn_prefill.cuh:attn_prefill_kernel": "tuned kernel, split with a GPU at hand",
}

# Comments, string and character literals, and preprocessor lines (with
# their continuations) blanked out, newlines kept so line numbers hold.
_C_NOISE = re.compile(
    r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\''
    r'|^[ \t]*#(?:\\\n|[^\n])*', re.S | re.M)
# Braces at file level that open a scope of definitions, not a body.
# (String literals are blanked by then: extern "C" reads as extern.)
_TRANSPARENT = re.compile(r'\b(?:extern|namespace(?:\s+\w+)?)\s*$')
_NAME = re.compile(r'([A-Za-z_]\w*)\s*$')


def _blank(m):
    return re.sub(r'[^\n]', ' ', m.group(0))


def c_code(text):
    """C text with comments, literals and preprocessor lines blanked out,
    newlines kept so offsets and lines hold."""
    return _C_NOISE.sub(_blank, text)


def c_functions(text):
    """(name, line of the name, first and last line of the body) of each
    function defined in C text."""
    src = c_code(text)
    out = []
    depth = 0          # brace depth, transparent scopes not counted
    opened = []        # per open brace: True if it is transparent
    start = 0          # offset after the last ';' or '}' at file level
    func = None        # (name, name offset) of the body being read
    body = 0           # offset of that body's opening brace
    for i, ch in enumerate(src):
        if ch == '{':
            head = src[start:i]
            if depth == 0 and _TRANSPARENT.search(head):
                opened.append(True)
                start = i + 1
                continue
            if depth == 0:
                func = _function_head(src, start, i)
                body = i
            opened.append(False)
            depth += 1
        elif ch == '}':
            if opened and opened.pop():
                start = i + 1
                continue
            depth -= 1
            if depth == 0:
                if func:
                    line = src.count('\n', 0, func[1]) + 1
                    out.append((func[0], line, src.count('\n', 0, body) + 1,
                                src.count('\n', 0, i) + 1))
                func = None
                start = i + 1
        elif ch == ';' and depth == 0:
            start = i + 1
    return out


def _function_head(src, start, brace):
    """(name, offset of the name) when src[start:brace] is a function's
    signature: it ends with a parameter list (after trailing qualifiers)."""
    head = src[start:brace].rstrip()
    head = re.sub(r'(?:\s+(?:const|noexcept|override))+$', '', head)
    if not head.endswith(')') or '=' in head.split('(')[0]:
        return None
    depth = 0
    for j in range(len(head) - 1, -1, -1):
        if head[j] == ')':
            depth += 1
        elif head[j] == '(':
            depth -= 1
            if depth == 0:
                m = _NAME.search(head, 0, j)
                if not m or m.group(1) in ("if", "for", "while", "switch", "return", "sizeof"):
                    return None
                return m.group(1), start + m.start(1)
    return None


def py_functions(text, path):
    out = []
    for node in ast.walk(ast.parse(text, path)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            first = node.body[0]
            # a docstring is part of the body; the signature may wrap
            out.append((node.name, node.lineno,
                        getattr(first, "lineno", node.lineno), node.end_lineno))
    return out


# The parser checked on itself first: braces in strings, characters,
# comments and macros, a wrapped signature, a table, extern "C", a kernel
# with launch bounds. (name, first body line, last body line) expected.
_SAMPLE = r"""/* { */
#define WRAP(x) do { x; } while (0)
static const int table[] = {1, 2};
struct s { int a; };
extern "C" {
static int one(int a,
               int b)
{
    const char *t = "}{"; char c = '{'; // }
    return a + b;
}
}
template <int N>
__global__ void __launch_bounds__(N) kern(int p)
{
    if (p) { p++; }
}
"""
_SAMPLE_WANT = [("one", 8, 11), ("kern", 15, 17)]


def _self_check():
    got = [(n, first, last) for n, _, first, last in c_functions(_SAMPLE)]
    if got != _SAMPLE_WANT:
        print(f"long_functions: the C parser read the sample as {got}, want {_SAMPLE_WANT}")
        return False
    return True


def sources(root, folders=FOLDERS, ext=C_EXT + (".py",), skip=("tests",)):
    """Paths, relative to root, of the files below folders that end in ext,
    folders named in skip (and hidden ones) left out."""
    for folder in folders:
        for d, dirs, files in os.walk(os.path.join(root, folder)):
            dirs[:] = sorted(x for x in dirs if x not in skip and not x.startswith("."))
            for f in sorted(files):
                if f.endswith(ext):
                    yield os.path.relpath(os.path.join(d, f), root)


def arguments(argv):
    """(root, list_all) from [ROOT] [--list]; ROOT defaults to the checkout."""
    args = [a for a in argv if not a.startswith("--")]
    return (os.path.abspath(args[0] if args else
                            os.path.join(os.path.dirname(__file__), "..", "..")),
            "--list" in argv)


def warn_stale(tool, allowed, seen, what):
    """A stale entry only warns: a branch that fixes one of the listed places
    must not turn the test red where the list has not been merged yet."""
    for key in sorted(set(allowed) - seen):
        print(f"{tool}: warning: {key} is on the allow-list but {what}: take it off the list")


def main(argv):
    root, list_all = arguments(argv)
    if not _self_check():
        return 1
    long_ones, n = [], 0
    for rel in sources(root):
        with open(os.path.join(root, rel), encoding="utf-8") as fh:
            text = fh.read()
        funcs = py_functions(text, rel) if rel.endswith(".py") else c_functions(text)
        n += len(funcs)
        for name, line, first, last in funcs:
            if last - first + 1 > LIMIT:
                long_ones.append((rel, name, line, last - first + 1))
    bad = 0
    seen = set()
    for rel, name, first, lines in long_ones:
        key = f"{rel}:{name}"
        seen.add(key)
        allowed = key in ALLOWED
        if list_all or not allowed:
            print(f"long_functions: {rel}:{first}: {name} is {lines} lines"
                  + (f" (allowed: {ALLOWED[key]})" if allowed else ""))
        bad += not allowed
    warn_stale("long_functions", ALLOWED, seen, f"not over {LIMIT} lines")
    print(f"long_functions: {n} functions, {len(long_ones)} over {LIMIT} lines, "
          f"{bad} not allowed")
    return 0 if list_all or not bad else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
