"""Figures drawn at the size the paper prints them.

The paper (paper/main.tex: a4paper, 2.2 cm margins, one column) is 166 mm wide;
a figure placed with \\nbfigure{NAME.pdf}{W\\linewidth} must be drawn W * 166 mm
wide, so that its fonts print at the size they were set at. Every notebook
draws through this module:

    from rkv import figures as rfig
    rfig.setup()                                   # fonts >= 7 pt, no offset labels
    fig, axes = rfig.subplots(1, 3, height=2.2)    # width = the text width
    ...
    rfig.save(fig, FIG, "name")                    # NAME.pdf, NAME.png, NAME.fig.json

save() writes NAME.fig.json beside the figure: its drawn size, the smallest
font of any visible text, any offset label ("+2.017e2", "1e6") an axis
shows and any text with a percentage printed without its thin space ("25%"). tests/experiments/figure_check.py compares these with where the paper
places the figure (scripts/build_paper.sh --strict runs it).
"""
import json
import re
from pathlib import Path

TEXT_WIDTH_MM = 166.0
TEXT_WIDTH_IN = TEXT_WIDTH_MM / 25.4
MIN_FONT_PT = 7.0
BASE_FONT_PT = 8.0


def setup():
    """matplotlib's defaults for print: 8 pt text, 7 pt ticks and legends,
    plain tick labels (no offset or scientific multiplier), a layout engine
    that keeps labels inside the drawn size."""
    import matplotlib
    matplotlib.rcParams.update({
        "font.size": BASE_FONT_PT,
        "axes.titlesize": BASE_FONT_PT,
        "axes.labelsize": BASE_FONT_PT,
        "xtick.labelsize": MIN_FONT_PT,
        "ytick.labelsize": MIN_FONT_PT,
        "legend.fontsize": MIN_FONT_PT,
        "legend.title_fontsize": MIN_FONT_PT,
        "figure.titlesize": BASE_FONT_PT,
        "axes.formatter.useoffset": False,
        "axes.formatter.limits": (-6, 9),
        "lines.linewidth": 1.0,
        "lines.markersize": 3.5,
        "axes.linewidth": 0.6,
        "xtick.major.width": 0.6,
        "ytick.major.width": 0.6,
        "legend.frameon": False,
        "figure.constrained_layout.use": True,
        "savefig.bbox": None,
        "pdf.fonttype": 42,
    })


def width_in(fraction=1.0):
    """The drawn width, in inches, of a figure placed at `fraction` of the text width."""
    return fraction * TEXT_WIDTH_IN


def subplots(nrows=1, ncols=1, height=2.4, width=1.0, **kw):
    """plt.subplots at the print width (`width` as a fraction of the text
    width) and `height` inches."""
    import matplotlib.pyplot as plt
    kw.setdefault("squeeze", False)
    return plt.subplots(nrows, ncols, figsize=(width_in(width), height), **kw)


def figure(height=2.4, width=1.0, **kw):
    import matplotlib.pyplot as plt
    return plt.figure(figsize=(width_in(width), height), **kw)


def inspect(fig):
    """What the figure check needs: size, the smallest visible font, offset
    labels, and the texts under the minimum."""
    from matplotlib.text import Text
    fig.canvas.draw()
    w, h = fig.get_size_inches()
    sizes, small, percent = [], [], []
    for t in fig.findobj(Text):
        if not t.get_visible() or not t.get_text().strip():
            continue
        s = float(t.get_fontsize())
        sizes.append(s)
        if s < MIN_FONT_PT - 1e-6:
            small.append({"text": t.get_text()[:40], "pt": s})
        # The paper prints a percentage with a thin space (27.5\,\%); a figure
        # beside it does the same ("25\u2009%"), never "25%".
        if re.search(r"[0-9]%", t.get_text()):
            percent.append(t.get_text()[:40])
    offsets = []
    for ax in fig.get_axes():
        for axis in (ax.xaxis, ax.yaxis):
            o = axis.get_offset_text()
            if o.get_visible() and o.get_text().strip():
                offsets.append(o.get_text())
    return {"width_in": round(float(w), 4), "height_in": round(float(h), 4),
            "min_font_pt": min(sizes) if sizes else None,
            "small_texts": small, "offset_texts": offsets, "percent_texts": percent}


def plain_log_ticks(fig):
    """One style of tick label on every log axis: matplotlib labels the minor
    ticks of a log axis that spans less than a decade in its own notation
    ("6x10^0") beside a major label a notebook printed plainly ("5"). Where two
    or more major ticks are in view, the minor ones go unlabelled; where fewer
    are, the majors are put at 1, 2 and 5 per decade and printed plainly."""
    from matplotlib import ticker
    for ax in fig.get_axes():
        for axis, lim in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
            if axis.get_scale() != "log":
                continue
            lo, hi = min(lim), max(lim)

            def in_view():
                return len([t for t in axis.get_majorticklocs() if lo <= t <= hi])
            # Ticks a notebook placed itself (set_xticks) stay as they are.
            if not isinstance(axis.get_major_locator(), ticker.FixedLocator) and in_view() < 2:
                old = (axis.get_major_locator(), axis.get_major_formatter())
                axis.set_major_locator(ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
                axis.set_major_formatter(ticker.FormatStrFormatter("%g"))
                if in_view() < 2:
                    # Less than a step of 1-2-5 in view: keep matplotlib's labels whole.
                    axis.set_major_locator(old[0])
                    axis.set_major_formatter(old[1])
                    continue
            axis.set_minor_formatter(ticker.NullFormatter())


MIN_LINE_POINTS = 3


def lone_points(fig):
    """A line between measured points only where a curve has enough of them: a
    curve with markers and fewer than MIN_LINE_POINTS points is drawn as its
    markers alone (two points joined by a line read as a measured trend, e.g.
    a smoke-test run's h = 0 and h = 1 beside a write-up's eleven points), in
    the legend too. Lines without markers (reference lines, bounds) stay.
    Returns the labels of the curves whose line was taken out (the unlabelled
    ones counted)."""
    from matplotlib.colors import to_hex
    from matplotlib.lines import Line2D

    def style(ln):
        # A legend built from handles copies their style, not their label: the
        # style is what ties a legend entry to its curves.
        return (to_hex(ln.get_color(), keep_alpha=True), str(ln.get_marker()), ln.get_linestyle())
    cut, kept, labels = set(), set(), set()
    for ax in fig.get_axes():
        for ln in ax.get_lines():
            marked = ln.get_marker() not in (None, "", "None", " ", "none")
            joined = ln.get_linestyle() not in ("None", "", " ", "none")
            if marked and joined and len(ln.get_xdata()) < MIN_LINE_POINTS:
                cut.add(style(ln))
                labels.add(ln.get_label())
                ln.set_linestyle("none")
            elif joined:
                kept.add(style(ln))
    cut -= kept
    legends = [ax.get_legend() for ax in fig.get_axes()] + list(fig.legends)
    for lg in legends:
        if lg is None:
            continue
        for h in getattr(lg, "legend_handles", None) or getattr(lg, "legendHandles", []):
            if isinstance(h, Line2D) and style(h) in cut:
                h.set_linestyle("none")
    # matplotlib names an unlabelled line "_childN": a count says as much.
    named = sorted(x for x in labels if not x.startswith("_"))
    return named + ([f"{len(labels) - len(named)} unlabelled"] if len(labels) > len(named) else [])


def save(fig, folder, name, width=1.0, png_dpi=200):
    """NAME.pdf and NAME.png in `folder`, and NAME.fig.json with what
    inspect() found and the placement width (fraction of the text width) the
    notebook drew for. Log axes get one style of tick label (plain_log_ticks);
    curves of too few points lose their line (lone_points)."""
    plain_log_ticks(fig)
    unjoined = lone_points(fig)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    meta = inspect(fig)
    meta.update({"name": name, "width_fraction": width, "text_width_in": round(TEXT_WIDTH_IN, 4),
                 "unjoined_curves": unjoined})
    fig.savefig(folder / f"{name}.pdf")
    fig.savefig(folder / f"{name}.png", dpi=png_dpi)
    (folder / f"{name}.fig.json").write_text(json.dumps(meta, indent=1) + "\n")
    return meta
