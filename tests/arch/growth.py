#!/usr/bin/env python3
"""Arrays grow through the one helper (rkv_grow and its forms, radix/rkv_core.c).

A hand-written growth site repeats what the helper does once: pick a new
capacity, check it for overflow, realloc, keep the old block on failure.
Copies drift (one starts at 8, one forgets the overflow check, one loses the
block when realloc fails), so outside the helper's own file every realloc()
call in C and CUDA code (radix/, attention/, runtime/, bench/, python/,
tests/) is read with its function, and it is a hand-written growth when

  1) doubling: realloc's size argument is written scaled by a constant
     factor (x * 2, 2 * x, (a + b) * 2, x << 1, x + x / 2, x * 3 / 2), or
     reads a name the function gives such a value (nc = 2 * cap, cap *= 2,
     cap <<= 1);
  2) a loop: the realloc sits in a loop (for, while, do) whose body or
     header also increases (x++, ++x, x += ..., x *= ..., x <<= ...) a name
     its size argument reads (subscripts aside): the array grows a step per
     pass.

A realloc to an exact or high-water size (a workspace sized to the largest
request seen, a one-off resize) is neither and passes. A site on ALLOWED
may stay, with the reason written beside it. Exit 1 naming each other
site as file:line.

usage: growth.py [ROOT] [--list]   (--list: print every realloc site with
what it was read as, and exit 0)
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from long_functions import arguments, c_code, c_functions, sources, warn_stale  # noqa: E402

FOLDERS = ["radix", "attention", "runtime", "bench", "python", "tests"]
C_EXT = (".c", ".h", ".cu", ".cuh")
HELPER = "radix/rkv_core.c"  # the helper itself: the one place growth is written
# "path:function" of hand-written growth that stays for now, each with why;
# an entry goes when its site moves to the helper (a stale entry only warns).
# Every site grows through the helper now.
ALLOWED = {}

_PATH = r'[A-Za-z_]\w*(?:\s*(?:->|\.)\s*[A-Za-z_]\w*|\s*\[[^\]\n]*\])*'
_CAST = r'(?:\(\s*[A-Za-z_][\w\s]*\)\s*)?'
# A pattern captures the scaled name as `x` where it is a name (and `y`
# where the same name must stand twice).
_DOUBLING = [re.compile(p) for p in (
    rf'(?P<x>{_PATH})\s*\*=\s*2\b',
    rf'(?P<x>{_PATH})\s*<<=\s*1\b',
    rf'(?<![\w.])2\s*\*\s*{_CAST}(?P<x>{_PATH})',
    rf'(?P<x>{_PATH})\s*\*\s*2\b(?!\s*[.\w])',
    rf'(?P<x>{_PATH})\s*<<\s*1\b(?!\s*[.\w])',
    rf'(?P<x>{_PATH})\s*\+\s*\(?\s*(?P<y>{_PATH})\s*(?:/\s*2|>>\s*1)\b',
    rf'(?P<x>{_PATH})\s*\*\s*3\s*/\s*2\b',
    r'\)\s*\*\s*2\b(?!\s*[.\w])',  # (a + b) * 2
    r'(?<![\w.])2\s*\*\s*\(',  # 2 * (a + b)
)]
_INCREASE = re.compile(rf'(?P<x>{_PATH})\s*(?:\+\+|\+=|\*=|<<=)|\+\+\s*(?P<y>{_PATH})')
_ASSIGN = re.compile(rf'(?P<x>{_PATH})\s*=(?!=)')
_REALLOC = re.compile(r'(?<![\w.>])realloc\s*\(')
_LOOP = re.compile(r'\b(for|while|do)\b')
_WORDS = re.compile(r'[A-Za-z_]\w*')
_NOT_NAMES = {"sizeof", "size_t", "int", "int32_t", "int64_t", "uint8_t", "uint32_t", "uint64_t",
              "char", "float", "double", "void", "const", "unsigned", "long", "struct"}


def _last_name(path):
    """t->cap_chunks -> cap_chunks, caps[i] -> caps: the field a path ends on."""
    return _WORDS.findall(re.sub(r'\[[^\]]*\]', '', path))[-1]


def _close(src, i, open_ch, close_ch):
    """Offset just past the bracket that closes the one at src[i]."""
    depth = 0
    for j in range(i, len(src)):
        if src[j] == open_ch:
            depth += 1
        elif src[j] == close_ch:
            depth -= 1
            if depth == 0:
                return j + 1
    return len(src)


def _statement(src, i):
    """(start, end) of the statement around offset i: from after the last
    ';', '{' or '}' before it to its ';'."""
    start = max(src.rfind(c, 0, i) for c in ";{}") + 1
    end = src.find(";", i)
    return start, (end + 1 if end >= 0 else len(src))


def _loops(src, lo, hi):
    """(start, end) of every loop, header and body, that starts in src[lo:hi]."""
    out = []
    for m in _LOOP.finditer(src, lo, hi):
        j = m.end()
        if m.group(1) != "do":
            while j < hi and src[j].isspace():
                j += 1
            if j >= hi or src[j] != "(":
                continue
            j = _close(src, j, "(", ")")
        while j < hi and src[j].isspace():
            j += 1
        if j < hi and src[j] == "{":
            end = _close(src, j, "{", "}")
        else:
            end = _statement(src, j)[1]
        if m.group(1) == "do":  # the condition after the body counts too
            end = _statement(src, end)[1]
        out.append((m.start(), min(end, hi)))
    return out


def _size_names(args):
    """Names the size argument of realloc(p, size) reads, subscripts left
    out (an index says which array, not how big it grows)."""
    depth, cut = 0, len(args)
    for j, ch in enumerate(args):
        depth += ch in "(["
        depth -= ch in ")]"
        if ch == "," and depth == 1:
            cut = j
            break
    size = re.sub(r'\[[^\]]*\]', '', args[cut:])
    return set(_WORDS.findall(size)) - _NOT_NAMES


def growth_sites(text):
    """[(line, function, why)] of every realloc call in C text; why is None
    where it is not hand-written growth."""
    src = c_code(text)
    lines = [0] + [m.end() for m in re.finditer(r'\n', src)]
    out = []
    for name, _, first, last in c_functions(text):
        lo, hi = lines[first - 1], (lines[last] if last < len(lines) else len(src))
        # Names given a scaled value: x *= 2, or y = <... 2 * x ...>; and
        # the spans of every scaling, for one written into realloc's size.
        scaled, spans = set(), []
        for pat in _DOUBLING:
            for m in pat.finditer(src, lo, hi):
                if m.groupdict().get("y") and _last_name(m["y"]) != _last_name(m["x"]):
                    continue
                spans.append(m.span())
                if m.groupdict().get("x") and re.match(r'\s*(?:\*=|<<=)',
                                                       src[m.end("x"):m.end()]):
                    scaled.add(_last_name(m["x"]))
                    continue
                s, _ = _statement(src, m.start())
                a = _ASSIGN.search(src, max(s, lo), m.start())
                if a:
                    scaled.add(_last_name(a["x"]))
        loops = _loops(src, lo, hi)
        for m in _REALLOC.finditer(src, lo, hi):
            end = _close(src, m.end() - 1, "(", ")")
            reads = _size_names(src[m.end() - 1:end])
            why = None
            if any(m.end() <= a and b <= end for a, b in spans):
                why = "doubling written into its size"
            elif scaled & reads:
                why = "doubling of " + ", ".join(sorted(scaled & reads))
            for ls, le in loops:
                if ls < m.start() < le and not why:
                    grown = {_last_name(g["x"] or g["y"]) for g in _INCREASE.finditer(src, ls, le)}
                    if grown & reads:
                        why = "grows in a loop by " + ", ".join(sorted(grown & reads))
            out.append((src.count("\n", 0, m.start()) + 1, name, why))
    return out


# The reader checked on itself first: each planted function is named for
# what it must be read as (grow_* hand-written growth, keep_* not).
_SAMPLE = r"""
static int grow_ternary(s *p) {
    if (p->n == p->cap) {
        int32_t nc = p->cap ? 2 * p->cap : 8;
        int *a = realloc(p->m, sizeof *a * (size_t)nc);
    }
}
static int grow_while(int **a, int64_t *cap, int64_t need) {
    int64_t nc = *cap;
    while (nc < need) nc *= 2;
    int *q = realloc(*a, (size_t)nc * sizeof **a);
}
static void grow_inline(char *buf, size_t cap) {
    char *nb = cap < 64 ? realloc(buf, cap << 1) : NULL;
}
static void grow_half(b *x) {
    size_t nc = x->cap + x->cap / 2;
    x->p = realloc(x->p, nc);
}
static bool grow_paren(j *j, size_t n) {
    if (j->len + n + 1 > j->cap) {
        size_t nc = (j->len + n + 1) * 2;
        char *p = realloc(j->s, nc);
    }
}
static void grow_by_one(t *t, int i) {
    for (i = 0; i < 9; i++) {
        int *p = realloc(t->first[i], (size_t)(t->n_first[i] + 1) * sizeof *p);
        p[t->n_first[i]++] = i;
    }
}
static void grow_do(r *r) {
    do {
        r->buf = realloc(r->buf, r->len + 4096);
        r->len += 4096;
    } while (more(r));
}
static int keep_exact(m *m, size_t floats) {
    if (floats > m->ws_floats) {
        float *n = realloc(m->ws, floats * sizeof(float));
    }
}
static int keep_helper(q *q) {
    /* realloc(q->a, q->cap * 2) in a comment */
    const char *s = "realloc(q->a, q->cap * 2)";
    return rkv_grow32((void **)&q->a, &q->cap, q->n + 1, sizeof *q->a);
}
static void keep_table(h *h) {
    size_t nb = 16;
    while (nb < 2 * h->n) nb *= 2;
    h->slots = calloc(nb, sizeof *h->slots);
    h->keys = realloc(h->keys, sizeof *h->keys * (size_t)h->n);
}
static void keep_loop_exact(f *f) {
    for (int i = 0; i < f->n; i++)
        f->row[i] = realloc(f->row[i], sizeof(float) * (size_t)f->len[i]);
}
"""


def _self_check():
    names = re.findall(r'^static \w+ (\w+)\(', _SAMPLE, re.M)
    got = dict.fromkeys(names, False)
    for _, name, why in growth_sites(_SAMPLE):
        got[name] = got[name] or why is not None
    want = {name: name.startswith("grow_") for name in names}
    if got != want:
        wrong = sorted(n for n in want if got.get(n) != want[n])
        print(f"growth: the reader misread the planted functions {wrong} (read as {got})")
        return False
    return True


def main(argv):
    root, list_all = arguments(argv)
    if not _self_check():
        return 1
    n = grown = bad = 0
    seen = set()
    for rel in sources(root, FOLDERS, C_EXT, skip=()):
        if rel == HELPER:
            continue
        with open(os.path.join(root, rel), encoding="utf-8") as fh:
            text = fh.read()
        for line, func, why in growth_sites(text):
            n += 1
            key = f"{rel}:{func}"
            if why is None:
                if list_all:
                    print(f"growth: {rel}:{line}: {func}: exact or one-off realloc")
                continue
            grown += 1
            seen.add(key)
            allowed = key in ALLOWED
            if list_all or not allowed:
                print(f"growth: {rel}:{line}: {func}: hand-written growth ({why})"
                      + (f" (allowed: {ALLOWED[key]})" if allowed else
                         ": use rkv_grow, rkv_grow32, rkv_grow_size or rkv_grow32_arrays"
                         " (radix/rkv_core.h)"))
            bad += not allowed
    warn_stale("growth", ALLOWED, seen, "grows through the helper now (or is gone)")
    print(f"growth: {n} realloc calls outside {HELPER}, {grown} hand-written growth, "
          f"{bad} not allowed")
    return 0 if list_all or not bad else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
