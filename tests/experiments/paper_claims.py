#!/usr/bin/env python3
"""What a reader takes a paper's numbers to be, checked on a built paper folder
(PAPER_DIR with generated/, as scripts/build_paper.sh leaves it):

  profile   every \\caption in experiments/NAME.tex of an experiment with
            simulated rows (generated/profiles_numbers.tex: "% simulated: NAME")
            names its engine with \\simprofile{NAME}; an experiment whose
            simulated rows carry no profile hash ("% unprofiled: NAME") fails;
            "H100" typed in prose is either \\simprofile{...} or \\realhw{H100}
            (a measurement on the real GPU). A caption with no simulated value
            says so on a comment line at most two lines above it:
            "% caption without simulated values: WHY".
  mooncake  "Mooncake trace(s)" is never typed in prose (\\rkv{bundle/traces}
            and its variants say "generated" when the stand-in ran); when the
            stand-in ran ("% traces: generated"), no generated table, caption
            text or number calls anything Mooncake except as the format or what
            the stand-in stands in for.
  one definition  a number's macro (\\rkvdef{KEY}{...}) defined with two
            different values in generated/ fails: the prose would print
            whichever came last. A gain is quoted through the one macro that
            defines it: prose that prints one of the write-up's gains
            (generated/gains_numbers.tex, gains/wu-*) through another gain or
            speedup macro fails (the same quantity named twice drifts apart:
            4.711 here, 4.70 there).

  glitches  one format for a percentage: a number and its percent sign
            apart by a thin space (27.5\\,\\%, as rkv.tex.pct prints it), never
            "27.5\\%" beside "58\\,\\%"; no range whose two ends print the
            same ("31 to 31 times": rkv.tex.span prints one value then).

Usage: paper_claims.py PAPER_DIR   (exit 1 and a list of file:line problems)
"""
import os
import re
import sys

CAPTION_WAIVER = "% caption without simulated values:"
# "Mooncake" allowed in generated text only as the format or what a stand-in stands for.
MOONCAKE_OK = re.compile(r"(stand-in for (both |the )?|generated |standing in for |in the )mooncake|"
                         r"mooncake[- ]format|mooncake's format|mooncake traces' stand-in|"
                         r"mooncake (conversation )?traces? (is|are) not (part of|installed)|"
                         r"where the mooncake traces are not installed", re.IGNORECASE)
TRACE_WORDS = re.compile(r"Mooncake(?:\s+production)?\s+traces?\b")
# A number as the paper prints it: digits, a decimal point, thin-space thousands.
NUM = r"[0-9]+(?:\\,[0-9]{3})*(?:\.[0-9]+)?"
# A percent sign right after a number, or after a space or tie, not a thin space.
BAD_PCT = re.compile(r"[0-9](?:\s*|~|\\ )\\%")
SAME_RANGE = re.compile(r"(?<![\w.\\,$-])(\$-\$)?(" + NUM + r")(?:\$\\times\$)?\s+to\s+(\$-\$)?(" + NUM
                        + r")(?![0-9]|\.[0-9]|\\,[0-9])")


def uncomment(line):
    return re.sub(r"(?<!\\)%.*", "", line)


def captions(text):
    """[(line number, caption text, waived)] of every \\caption{...} (braces balanced)."""
    out = []
    for m in re.finditer(r"\\caption\{", text):
        depth, i = 1, m.end()
        while i < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        no = text.count("\n", 0, m.start()) + 1
        # The waiver on one of the three lines before the caption (above it, or
        # above the \begin{table} it shares a line with).
        before = text[:m.start()].split("\n")[-3:]
        body = "\n".join(uncomment(x) for x in text[m.end():i - 1].split("\n"))
        out.append((no, body, any(b.strip().startswith(CAPTION_WAIVER) for b in before)))
    return out


def tex_files(paper):
    for dirpath, dirs, files in os.walk(paper):
        dirs[:] = sorted(d for d in dirs if d != "generated")
        for fn in sorted(files):
            if fn.endswith(".tex"):
                yield os.path.join(dirpath, fn)


def read(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def prose_lines(path):
    """(line number, line without comment) outside the bibliography."""
    in_bib = False
    for no, line in enumerate(read(path).split("\n"), 1):
        if "\\begin{thebibliography}" in line:
            in_bib = True
        if in_bib:
            in_bib = "\\end{thebibliography}" not in line
            continue
        yield no, uncomment(line)


def glitches(path, no, line):
    """The printing glitches of one line of tex (comments removed)."""
    out = []
    if BAD_PCT.search(line):
        out.append(f"{path}:{no}: a percentage without the thin space (write 27.5\\,\\%, "
                   f"rkv.tex.pct): {line.strip()[:120]}")
    for m in SAME_RANGE.finditer(line):
        if (m.group(1), m.group(2)) == (m.group(3), m.group(4)):
            out.append(f"{path}:{no}: a range whose ends print the same ('{m.group(0)}'; rkv.tex.span "
                       f"prints one value): {line.strip()[:120]}")
    return out


def check(paper):
    bad = []
    gen = os.path.join(paper, "generated")
    prof_path = os.path.join(gen, "profiles_numbers.tex")
    simulated, unprofiled, generated_traces = set(), set(), False
    if os.path.exists(prof_path):
        for line in read(prof_path).split("\n"):
            if line.startswith("% simulated: "):
                simulated.add(line.split(": ", 1)[1].strip())
            elif line.startswith("% unprofiled: "):
                unprofiled.add(line.split(": ", 1)[1].strip())
            elif line.strip() == "% traces: generated":
                generated_traces = True
    else:
        bad.append(f"{prof_path}: missing (python3 -m rkv.tex --profiles writes it)")
    for name in sorted(unprofiled):
        bad.append(f"{prof_path}: {name}: simulated rows without sim_profile_hash "
                   f"(store core.sim_profile_of(summary) in every row)")

    # profile: captions of simulated experiments, and H100 in prose.
    for path in tex_files(paper):
        name = os.path.splitext(os.path.basename(path))[0]
        text = read(path)
        if name in simulated and os.path.basename(os.path.dirname(path)) == "experiments":
            for no, body, waived in captions(text):
                if not waived and f"\\simprofile{{{name}}}" not in body:
                    bad.append(f"{path}:{no}: caption of simulated values without \\simprofile{{{name}}} "
                               f"(or a '{CAPTION_WAIVER} WHY' line above it)")
        for no, line in prose_lines(path):
            bad += glitches(path, no, line)
            rest = re.sub(r"\\realhw\{[^{}]*\}", " ", line)
            if re.search(r"\bH100\b", rest):
                bad.append(f"{path}:{no}: 'H100' without its profile: write \\simprofile{{NAME}} for a "
                           f"simulated number, \\realhw{{H100}} for a measurement on the GPU")
            rest = re.sub(r"\\(cite|label|ref|rkv|nbtext|nbtable|nbfigure)\{[^{}]*\}", " ", line)
            if TRACE_WORDS.search(rest):
                bad.append(f"{path}:{no}: 'Mooncake traces' typed by hand: \\rkv{{bundle/traces}} "
                           f"(or -short, -title, -both) says 'generated' when the stand-in ran")

    # mooncake: the generated text when the stand-in ran.
    defs = {}
    if os.path.isdir(gen):
        for fn in sorted(os.listdir(gen)):
            if not fn.endswith(".tex"):
                continue
            path = os.path.join(gen, fn)
            for no, line in enumerate(read(path).split("\n"), 1):
                bad += glitches(path, no, uncomment(line))
                if generated_traces and fn not in ("profiles_numbers.tex", "config_numbers.tex"):
                    rest = re.sub(r"(~|\\cite\{[^{}]*\})", " ", uncomment(line))
                    rest = MOONCAKE_OK.sub(" ", re.sub(r"\s+", " ", rest))
                    if re.search(r"mooncake", rest, re.IGNORECASE):
                        bad.append(f"{path}:{no}: the generated stand-in called Mooncake: "
                                   f"{line.strip()[:160]}")
                for m in re.finditer(r"\\rkvdef\{([^{}]*)\}\{((?:[^{}]|\{[^{}]*\})*)\}", line):
                    defs.setdefault(m.group(1), []).append((m.group(2), f"{path}:{no}"))
    # one definition per number.
    for key, vals in sorted(defs.items()):
        if len({v for v, _ in vals}) > 1:
            where = "; ".join(f"{w} = {v}" for v, w in vals)
            bad.append(f"\\rkv{{{key}}} has two definitions: {where}")
    # one macro per gain: the write-up's gains only through gains/wu-*.
    wu = {}
    for key, vals in defs.items():
        if key.startswith("gains/wu-over-"):
            x = number(vals[0][0])
            if x is not None:
                wu[round(x, 2)] = key
    for path in tex_files(paper):
        for no, line in prose_lines(path):
            for m in re.finditer(r"\\rkv\{([^{}]*)\}", line):
                key = m.group(1)
                if key.startswith("gains/") or not re.search(r"gain|speedup", key) or key not in defs:
                    continue
                x = number(defs[key][0][0])
                if x is not None and round(x, 2) in wu:
                    bad.append(f"{path}:{no}: \\rkv{{{key}}} prints the write-up's gain "
                               f"\\rkv{{{wu[round(x, 2)]}}} under a second macro: quote it through that one")
    return bad


def number(text):
    """The float a generated value prints, or None (words, ranges)."""
    try:
        return float(text.replace("\\,", ""))
    except ValueError:
        return None


def main():
    if len(sys.argv) != 2 or not os.path.isdir(sys.argv[1]):
        print("usage: paper_claims.py PAPER_DIR (a folder with experiments/*.tex and generated/)",
              file=sys.stderr)
        return 2
    bad = check(sys.argv[1])
    for b in bad:
        print(b)
    if bad:
        print(f"paper_claims: {len(bad)} problem(s)")
        return 1
    print("paper_claims: every simulated caption names its profile, no stand-in is called "
          "Mooncake, every number has one definition, percentages and ranges print in one form")
    return 0


if __name__ == "__main__":
    sys.exit(main())
