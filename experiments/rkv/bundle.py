"""Provenance of rows and results bundles.

Every row says what made it (Meta.row in rkv.core adds these fields):

    binary         the program that produced the numbers, relative to the checkout
    binary_sha256  its sha256 (two builds of one commit differ; this tells them apart)
    build_type     meson's buildtype, with ndebug and sanitizers, of its build folder
    host           {"cpu": model name, "cpus": online CPUs, "load": 1-minute load
                    average when the row was written}: wall-clock numbers mean
                    something only beside the load they were measured under

A results bundle is one folder of one scale, the unit the paper is built from:

    BUNDLE/manifest.json      written here: scale, commit, binary, build type,
                              host, date, each experiment's outcome
    BUNDLE/NAME/NAME.jsonl    each experiment's rows (experiments/NAME/run --out BUNDLE/NAME)
    BUNDLE/figures/           the notebooks' figures and tables

`python3 -m rkv.bundle scales DIR...` prints the scales the rows under DIR carry
(scripts/build_paper.sh refuses a bundle with more than one); `tex BUNDLE OUT`
writes the paper's title-page note on the bundle.
"""
import hashlib
import json
import os
import platform
import sys

from . import core

_SHA = {}


def sha256_of(path):
    """sha256 of a file, once per process per path."""
    path = os.path.abspath(path)
    if path not in _SHA:
        h = hashlib.sha256()
        try:
            with open(path, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
            _SHA[path] = h.hexdigest()
        except OSError:
            _SHA[path] = None
    return _SHA[path]


def build_type(binary):
    """The build folder's options: 'release, ndebug' or 'debug, sanitize=address,undefined';
    None when the binary is not in a meson build folder."""
    d = os.path.dirname(os.path.abspath(binary))
    while d != os.path.dirname(d):
        info = os.path.join(d, "meson-info", "intro-buildoptions.json")
        if os.path.exists(info):
            with open(info) as f:
                opts = {o["name"]: o["value"] for o in json.load(f)}
            parts = [str(opts.get("buildtype"))]
            # if-release: meson defines NDEBUG for the release buildtype only.
            if opts.get("b_ndebug") in ("true", True) or (
                    opts.get("b_ndebug") == "if-release" and opts.get("buildtype") == "release"):
                parts.append("ndebug")
            if opts.get("b_sanitize") not in (None, "none", []):
                s = opts["b_sanitize"]
                parts.append("sanitize=" + (",".join(s) if isinstance(s, list) else str(s)))
            return ", ".join(parts)
        d = os.path.dirname(d)
    return None


_CPU = []


def cpu_model():
    if not _CPU:
        _CPU.append(_read_cpu_model())
    return _CPU[0]


def _read_cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def host():
    try:
        load = round(os.getloadavg()[0], 2)
    except OSError:
        load = None
    return {"cpu": cpu_model(), "cpus": os.cpu_count(), "load": load}


def binary_fields(binary):
    """binary, binary_sha256 and build_type of one program."""
    if not binary:
        return {"binary": None, "binary_sha256": None, "build_type": None}
    return {"binary": core.command_text([os.path.abspath(binary)]),
            "binary_sha256": sha256_of(binary), "build_type": build_type(binary)}


def write_manifest(out, scale, binary, outcome):
    """BUNDLE/manifest.json: what the bundle is and how each experiment ended."""
    m = {"scale": scale, "commit": core.git_commit(), "date": core.utc_now(),
         **binary_fields(binary), "host": host(),
         "python": platform.python_version(), "system": platform.platform(),
         "mooncake_traces": os.path.isdir(core.default_mooncake_dir()),
         "experiments": outcome}
    tmp = os.path.join(out, "manifest.json.tmp")
    with open(tmp, "w") as f:
        json.dump(m, f, indent=1, sort_keys=True)
        f.write("\n")
    os.replace(tmp, os.path.join(out, "manifest.json"))
    return m


def rows_of(folders):
    """(path, row) over each experiment's rows: FOLDER/NAME.jsonl where an
    experiment's results folder is named NAME (a bundle's NAME/), else the one
    *.jsonl in it whose rows name an experiment (experiments/NAME/results/)."""
    for d in folders:
        d = os.path.abspath(d)
        cands = [os.path.join(d, os.path.basename(d) + ".jsonl")]
        if os.path.basename(d) == "results":
            name = os.path.basename(os.path.dirname(d))
            cands = [os.path.join(d, name + ".jsonl")]
        for p in cands:
            if not os.path.exists(p):
                continue
            with open(p) as f:
                for line in f:
                    if line.strip():
                        yield p, json.loads(line)


def scales(folders):
    """{scale: [files]}: the scales a set of results folders mixes."""
    seen = {}
    for p, r in rows_of(folders):
        s = r.get("scale") or (r.get("config") or {}).get("scale")
        seen.setdefault(s, set()).add(p)
    return {k: sorted(v) for k, v in seen.items()}


def rows_tex(out, folders, paper_flags=""):
    """The title-page note for results without a manifest (experiments/NAME/results)."""
    sc, commits, builds, dates = set(), set(), set(), []
    for _, r in rows_of(folders):
        sc.add(str(r.get("scale") or (r.get("config") or {}).get("scale")))
        commits.add(str(r.get("commit")))
        builds.add(str(r.get("build_type") or "unknown"))
        if r.get("date"):
            dates.append(r["date"][:10])
    def tt(xs):
        return ", ".join(f"\\texttt{{{tex_escape(x)}}}" for x in sorted(xs)) or "none"
    span = f"{min(dates)} to {max(dates)}" if dates else "unknown dates"
    nd = "; ".join(sorted({ndebug_text(b) for b in builds}))
    with open(out, "w") as f:
        f.write(f"Results: each experiment's own folder (no bundle manifest); scale {tt(sc)}, "
                f"commit {tt(commits)}, {', '.join(sorted(builds))} build ({nd}), {span}. "
                f"Made by \\texttt{{experiments/NAME/run -{{}}-scale SCALE}} per experiment and "
                f"\\texttt{{{tt_cmd(('scripts/build_paper.sh ' + paper_flags).strip())}}}.{scale_note(sc)}\n")


def ndebug_text(build):
    """Whether the build's assertions (and the consistency checks under them)
    were compiled out, from a build_type string: a debugoptimized build runs the
    radix tree's full check after every step, which a timing includes."""
    if not build or build == "unknown":
        return "NDEBUG unknown"
    return "NDEBUG on" if "ndebug" in build else "NDEBUG off, so assertions and consistency checks run"


def scale_note(scales):
    """The title page's word on what a PDF of this scale is: the tiny scale is
    the test suite's smoke test (seconds per experiment, a few points, a fixed
    clock), not the paper's numbers."""
    if scales == {"tiny"}:
        return ("\\par\\smallskip \\textbf{Smoke test:} built from the \\texttt{tiny} scale, which checks that "
                "every experiment and figure runs; its numbers are not the paper's. "
                "Build the paper from the \\texttt{small} scale.")
    return ""


def commands_tex(scale, bundle_dir=None, paper_flags="", work=None):
    """The two commands that made the results and the paper, as they were run.

    paper_flags are build_paper.sh's own flags (--strict, --mixed-scales) and
    work the basename of its --work folder, from build_paper.sh: folders by
    basename only, since the path of the machine that built it says nothing.
    A --work build ran run_all itself, so its command comes first."""
    flags = (" " + paper_flags.strip()) if paper_flags.strip() else ""
    if work:
        run_all = f"experiments/run_all --scale {scale} --out {work}/results --no-paper"
        return (f"\\par\\smallskip Made by \\texttt{{{tt_cmd('scripts/build_paper.sh' + flags + ' --work ' + work)}}}, "
                f"which runs \\texttt{{{tt_cmd(run_all)}}}")
    # run_all's default folder unless the bundle was named otherwise.
    base = os.path.basename(os.path.normpath(bundle_dir)) if bundle_dir else scale
    out = "results/" + scale if base in ("results", scale) else base
    return (f"\\par\\smallskip Made by \\texttt{{{tt_cmd(f'experiments/run_all --scale {scale} --out {out}')}}} and "
            f"\\texttt{{{tt_cmd(f'scripts/build_paper.sh{flags} --bundle {out}')}}}")


def tt_cmd(cmd):
    """A command line for \\texttt: escaped, and "--" kept as two hyphens
    (TeX would join them into an en dash)."""
    return tex_escape(cmd).replace("--", "-{}-")


def tex_escape(s):
    return "".join("\\" + c if c in "&%$#_{}" else c for c in str(s))


def title_tex(bundle_dir, out, paper_flags="", work=None):
    """The paper's title-page note on the results it was built from."""
    path = os.path.join(bundle_dir, "manifest.json")
    with open(path) as f:
        m = json.load(f)
    date = (m.get("date") or "")[:10]
    line = (f"Results: scale \\texttt{{{tex_escape(m['scale'])}}}, commit "
            f"\\texttt{{{tex_escape(m['commit'])}}}, {tex_escape(m.get('build_type') or 'unknown')} build "
            f"({ndebug_text(m.get('build_type'))}), "
            f"{tex_escape(date)}, on {tex_escape(m['host']['cpu'])} "
            f"({m['host']['cpus']} CPUs, load {m['host']['load']})")
    skipped = sorted(n for n, o in m.get("experiments", {}).items() if o.get("state") == "skipped")
    generated = sorted(n for n, o in m.get("experiments", {}).items() if o.get("trace") == "synthetic")
    if generated:
        line += "; generated stand-in for the Mooncake traces in " + ", ".join(
            f"\\texttt{{{tex_escape(n)}}}" for n in generated)
    if skipped:
        line += "; skipped: " + ", ".join(f"\\texttt{{{tex_escape(n)}}}" for n in skipped)
    line += "." + commands_tex(m["scale"], bundle_dir, paper_flags, work) + "." + scale_note({str(m["scale"])})
    with open(out, "w") as f:
        f.write(line + "\n")


def main(argv):
    # build_paper.sh names its own flags and --work folder first, so the title
    # page prints the command as it was run.
    paper_flags, work = "", None
    while len(argv) >= 2 and argv[0] in ("--paper-flags", "--work"):
        if argv[0] == "--paper-flags":
            paper_flags = argv[1]
        else:
            work = argv[1]
        argv = argv[2:]
    if len(argv) >= 2 and argv[0] == "scales":
        found = scales(argv[1:])
        for s, files in sorted(found.items(), key=lambda kv: str(kv[0])):
            print(f"{s}\t{len(files)}\t{' '.join(files)}")
        return 0
    if len(argv) == 3 and argv[0] == "tex":
        title_tex(argv[1], argv[2], paper_flags, work)
        return 0
    if len(argv) >= 2 and argv[0] == "tex-rows":
        rows_tex(argv[1], argv[2:], paper_flags)
        return 0
    if len(argv) == 4 and argv[0] == "manifest":
        write_manifest(argv[1], argv[2], argv[3], {})
        return 0
    print("usage: python3 -m rkv.bundle [--paper-flags FLAGS] [--work NAME] scales DIR... | tex BUNDLE OUT.tex | manifest DIR SCALE BINARY",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
