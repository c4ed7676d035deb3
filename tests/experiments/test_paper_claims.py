#!/usr/bin/env python3
"""paper_claims.py on small paper folders: a sound one passes, and each broken
claim is reported with its place: a simulated caption without \\simprofile, an
experiment whose simulated rows carry no profile hash, H100 typed without its
profile, "Mooncake traces" typed by hand, a generated stand-in called Mooncake
in a generated table, a number's macro with two definitions, a percentage
without its thin space and a range whose two ends print the same."""
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import paper_claims  # noqa: E402

PROFILES = ("% simulated: sweep\n"
            "\\rkvdef{sweep/sim-profile}{\\texttt{h100}, hash \\texttt{0123456789ab}}\n"
            "\\rkvdef{sweep/sim-profile-gpu}{H100}\n"
            "% traces: generated\n"
            "\\rkvdef{bundle/traces}{a generated stand-in for the Mooncake traces}\n")
SOUND = {
    "experiments/sweep.tex": (
        "\\section{Sweep}\nOn a \\simprofile{sweep}, measured on a \\realhw{H100}; the\n"
        "traces Mooncake published~\\cite{mooncake} are replaced by \\rkv{bundle/traces}.\n"
        "\\begin{figure}\\caption{Requests per second. Engine:\n  \\simprofile{sweep}.}\\end{figure}\n"
        "% caption without simulated values: the write-up's own numbers.\n"
        "\\begin{table}\\caption{The write-up's values.}\\end{table}\n"),
    "experiments/overhead.tex": "\\begin{figure}\\caption{Host cost, measured.}\\end{figure}\n",
    "generated/profiles_numbers.tex": PROFILES,
    "generated/sweep_numbers.tex": ("\\rkvdef{sweep/gain}{3.75}\n\\rkvdef{sweep/gain}{3.75}\n"
                                    "\\rkvdef{sweep/wu-gain}{4.711}\n"
                                    "\\rkvdef{sweep/share}{0\\,\\% to 58\\,\\% of the optimum, "
                                    "1\\,024 to 1\\,025 tokens, $-$3 to 3 points, 31 to 31.5 times}\n"),
    "generated/gains_numbers.tex": "\\rkvdef{gains/wu-over-none-h1}{4.71}\n",
    "generated/capacity_table.tex": ("generated (stand-in for the Mooncake traces) & 0.5 \\\\\n"
                                     "a generated Mooncake-format trace & 0.4 \\\\\n"),
    "main.tex": ("among them \\rkv{bundle/traces}\n\\begin{thebibliography}{9}\n"
                 "\\bibitem{mooncake} Mooncake traces, H100.\n\\end{thebibliography}\n"),
}
BROKEN = [
    ("caption without profile", "experiments/sweep.tex",
     lambda s: s.replace("Engine:\n  \\simprofile{sweep}.", "On the sim backend."),
     "caption of simulated values without \\simprofile{sweep}"),
    ("unprofiled rows", "generated/profiles_numbers.tex",
     lambda s: s + "% unprofiled: sweep\n", "simulated rows without sim_profile_hash"),
    ("bare H100", "experiments/overhead.tex",
     lambda s: s + "Times of an H100.\n", "'H100' without its profile"),
    ("Mooncake traces typed", "main.tex",
     lambda s: "the Mooncake production traces\n" + s, "'Mooncake traces' typed by hand"),
    ("stand-in called Mooncake", "generated/capacity_table.tex",
     lambda s: s + "mooncake-conversation & 0.5 \\\\\n", "the generated stand-in called Mooncake"),
    ("two definitions", "generated/sweep_numbers.tex",
     lambda s: s + "\\rkvdef{sweep/gain}{3.02}\n", "\\rkv{sweep/gain} has two definitions"),
    ("a percentage without its thin space", "generated/sweep_numbers.tex",
     lambda s: s + "\\rkvdef{sweep/none-share}{0\\%}\n", "a percentage without the thin space"),
    ("a percentage typed in prose with a space", "experiments/overhead.tex",
     lambda s: s + "About 58 \\% of it.\n", "a percentage without the thin space"),
    ("a range with equal ends", "generated/sweep_numbers.tex",
     lambda s: s + "\\rkvdef{sweep/speed}{31 to 31 times}\n", "a range whose ends print the same"),
    ("a range of thousands with equal ends", "generated/capacity_table.tex",
     lambda s: s + "from 1\\,024 to 1\\,024 tokens \\\\\n", "a range whose ends print the same"),
    ("a gain under a second macro", "experiments/overhead.tex",
     lambda s: s + "The write-up gains \\rkv{sweep/wu-gain} times.\n",
     "\\rkv{sweep/wu-gain} prints the write-up's gain"),
]


def write(root, files):
    for rel, text in files.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)


def main():
    fails = 0
    with tempfile.TemporaryDirectory() as tmp:
        good = os.path.join(tmp, "good")
        write(good, SOUND)
        bad = paper_claims.check(good)
        if bad:
            print("FAIL sound paper reported:", *bad, sep="\n  ")
            fails += 1
        else:
            print("ok   a sound paper passes")
        for i, (what, rel, breaks, expect) in enumerate(BROKEN):
            root = os.path.join(tmp, f"bad{i}")
            files = dict(SOUND)
            files[rel] = breaks(files[rel])
            write(root, files)
            found = paper_claims.check(root)
            if not any(expect in b for b in found):
                print(f"FAIL {what}: expected '{expect}', got {found}")
                fails += 1
            elif len(found) != 1:
                print(f"FAIL {what}: one problem expected, got {found}")
                fails += 1
            else:
                print(f"ok   {what}: {found[0]}")
        # Without the stand-in the Mooncake names in generated text are the real traces'.
        real = os.path.join(tmp, "real")
        files = dict(SOUND)
        files["generated/profiles_numbers.tex"] = PROFILES.replace("% traces: generated",
                                                                   "% traces: mooncake")
        files["generated/capacity_table.tex"] += "mooncake-conversation & 0.5 \\\\\n"
        write(real, files)
        found = paper_claims.check(real)
        if found:
            print("FAIL real traces named Mooncake reported:", found)
            fails += 1
        else:
            print("ok   the real traces may be called Mooncake")
    print(f"test_paper_claims: {fails} failure(s)")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
