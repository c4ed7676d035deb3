#!/usr/bin/env bash
# Build paper/main.pdf with latexmk from one set of results.
# Usage: scripts/build_paper.sh [--install] [--strict] [--scale S] [--bundle DIR | --work DIR] [--mixed-scales]
#   --install   install TeX first (scripts/deps.sh --with-docs); without it the
#               build is skipped, with a message and exit status 0, when latexmk
#               is missing.
#   --strict    also fail on an undefined reference or citation, on a figure,
#               table or text still shown as "not built yet", and on a number typed
#               by hand in paper/ (tests/experiments/paper_numbers.py), on an
#               overfull box, on a figure not drawn at the size it is placed
#               at (tests/experiments/figure_check.py), and on a simulated caption
#               without its profile, a generated trace called Mooncake or a number
#               with two definitions (tests/experiments/paper_claims.py).
#   --bundle DIR  the results bundle experiments/run_all wrote (DIR/manifest.json,
#               DIR/NAME/NAME.jsonl): the paper reads it and nothing else; its
#               notebooks draw into DIR/figures. No experiment is run.
#   --work DIR  leave the source tree alone: experiments/run_all --scale tiny into the
#               bundle DIR/results, then the paper from it in a copy of paper/ in
#               DIR/paper (the test suite's paper test; exit 77 without latexmk).
#   --scale S   the scale a missing experiment is run at without --bundle or
#               --work (default small: the paper; tiny is the smoke test, and its
#               title page says so).
#   --mixed-scales  accept results of more than one scale (refused otherwise: a
#               paper quietly mixing tiny and full numbers says nothing).
#   --drawn     with --bundle: the notebooks already drew DIR/figures from these
#               rows (run_all does); do not run them again.
# Without --bundle or --work the results are experiments/NAME/results/, each
# experiment's own (missing ones are run first at --scale, small by default, where a radixkv
# binary is built: $RADIXKV, else build-release/, else build/).
# Figures, tables and the macros that carry the prose's numbers
# (paper/generated/*.tex) are re-drawn by each experiment's notebook from the
# results and copied to paper/generated/; the title page names the results
# (scale, commit, build type, date, host: paper/generated/bundle.tex).
set -euo pipefail
cd "$(dirname "$0")/.."
strict=0
work=""
bundle=""
mixed=0
drawn=0
scale=small
usage="usage: scripts/build_paper.sh [--install] [--strict] [--scale tiny|small|full] [--bundle DIR [--drawn] | --work DIR] [--mixed-scales]"
while (($#)); do
  case "$1" in
    --install) scripts/deps.sh --with-docs; shift ;;
    --strict) strict=1; shift ;;
    --scale) scale="${2:?--scale needs tiny, small or full ($usage)}"; shift 2
             [[ $scale =~ ^(tiny|small|full)$ ]] || { echo "build_paper.sh: --scale $scale: not tiny, small or full ($usage)" >&2; exit 2; } ;;
    --work) work="${2:?--work needs a folder ($usage)}"; shift 2 ;;
    --bundle) bundle="${2:?--bundle needs a folder ($usage)}"; shift 2 ;;
    --mixed-scales) mixed=1; shift ;;
    --drawn) drawn=1; shift ;;
    *) echo "build_paper.sh: unknown option $1 ($usage)" >&2
       exit 2 ;;
  esac
done
if [[ -n "$work" && -n "$bundle" ]]; then
  echo "build_paper.sh: --bundle and --work exclude each other ($usage)" >&2
  exit 2
fi
if [[ -n "$bundle" && ! -f $bundle/manifest.json ]]; then
  echo "build_paper.sh: --bundle $bundle: no manifest.json there (experiments/run_all writes bundles)" >&2
  exit 2
fi
if ! command -v latexmk >/dev/null; then
  echo "build_paper.sh: latexmk not found; skipping the paper (scripts/build_paper.sh --install adds TeX)" >&2
  [[ -n "$work" ]] && exit 77
  exit 0
fi
# Where results, figures and the built paper go.
figs=$PWD/notebooks/figures
paperdir=$PWD/paper
results() { echo "experiments/$1/results"; }
radixkv="${RADIXKV:-}"
if [[ -z "$radixkv" ]]; then
  for b in build-release build; do
    if [[ -x $b/runtime/radixkv ]]; then radixkv="$PWD/$b/runtime/radixkv"; break; fi
  done
fi
if [[ -n "$radixkv" ]]; then export RADIXKV="$radixkv"; fi
if [[ -n "$work" ]]; then
  mkdir -p "$work"
  work=$(cd "$work" && pwd)
  paperdir=$work/paper
  rm -rf "$paperdir" "$work/results"
  cp -r paper "$paperdir"
  rm -rf "$paperdir/generated" "$paperdir"/main.{aux,log,out,fls,fdb_latexmk,pdf}
  if [[ -z "$radixkv" ]]; then
    echo "build_paper.sh: --work needs a radixkv binary (\$RADIXKV, build-release/ or build/)" >&2
    exit 1
  fi
  # Every experiment into one bundle, with its notebook; a failed property is
  # reported by run_all but still leaves its figures, so the paper goes on.
  rc=0
  experiments/run_all --scale tiny --out "$work/results" --no-paper || rc=$?
  [[ -f $work/results/manifest.json ]] || exit "${rc:-1}"
  bundle=$work/results
  drawn=1
fi
if [[ -n "$bundle" ]]; then
  bundle=$(cd "$bundle" && pwd)
  figs=$bundle/figures
  results() { echo "$bundle/$1"; }
fi
export RKV_FIGURES=$figs
# One scale, unless told otherwise.
dirs=()
for d in experiments/*/; do
  name=$(basename "$d")
  [[ -f $(results "$name")/$name.jsonl ]] && dirs+=("$(cd "$(results "$name")" && pwd)")
done
if ((${#dirs[@]})); then
  found=$(cd experiments && python3 -m rkv.bundle scales "${dirs[@]}")
  if (($(printf '%s\n' "$found" | grep -c .) > 1)) && ((!mixed)); then
    echo "build_paper.sh: the results mix scales (scale, files, paths):" >&2
    printf '%s\n' "$found" | cut -c1-300 >&2
    echo "build_paper.sh: rerun them at one scale, build from one bundle (--bundle), or pass --mixed-scales" >&2
    exit 1
  fi
fi
if [[ -n "$bundle" ]]; then
  # Re-draw every figure from the bundle's rows (a changed notebook shows at once).
  ((drawn)) || for name in $(ls experiments); do
    [[ -f $bundle/$name/$name.jsonl && -f notebooks/$name.ipynb ]] || continue
    RKV_RESULTS=$bundle/$name notebooks/run.sh "$name"
  done
else
  # Experiments whose tables and figures the paper reads: re-draw from their
  # results when those exist, else run them at --scale first when a
  # binary exists (the Mooncake ones on a generated trace in the Mooncake format
  # when the real traces are missing: they exit 77 then). remote_tier starts a
  # redis-server of its own: without one installed it is re-drawn from existing
  # results only. disaggregation runs its pooled arms only where redis-server is
  # installed (it says so on stderr otherwise). sglang_dropin needs an SGLang venv
  # and exits 77 without one. serve_router is not here: the paper reads none of it.
  for name in tree_evolution hit_rate_sweep long_prefill overhead sim_calibration sim_profiles mechanisms tiered_capacity \
              routing real_trace_capacity eviction_policy page_size sglang_ablations remote_tier disaggregation \
              sglang_dropin; do
    out=$(results "$name")
    if [[ -f $out/$name.jsonl ]]; then
      [[ -f notebooks/$name.ipynb ]] && RKV_RESULTS=$PWD/$out notebooks/run.sh "$name"
      continue
    fi
    [[ -n "$radixkv" ]] || continue
    [[ $name == remote_tier ]] && ! command -v redis-server >/dev/null && continue
    rc=0
    experiments/$name/run --scale "$scale" --no-progress --notebook --out "$out" || rc=$?
    if ((rc == 77)) && grep -q -- --synthetic "experiments/$name/run"; then
      experiments/$name/run --scale "$scale" --no-progress --notebook --synthetic --out "$out"
    elif ((rc != 0 && rc != 77)); then
      exit "$rc"
    fi
  done
fi
mkdir -p "$paperdir/generated"
shopt -s nullglob
rm -f "$paperdir/generated"/*
for f in "$figs"/*.pdf "$figs"/*.png "$figs"/*.tex "$figs"/*.fig.json; do cp "$f" "$paperdir/generated/"; done
# The title page's line on the results: the bundle's manifest, else what the
# rows say; with this script's command as it was run (its flags, --work by name).
made=(--paper-flags "$( ((strict)) && printf -- '--strict '; ((mixed)) && printf -- '--mixed-scales'; true)")
[[ -n "$work" ]] && made+=(--work "$(basename "$work")")
if [[ -n "$bundle" ]]; then
  (cd experiments && python3 -m rkv.bundle "${made[@]}" tex "$bundle" "$paperdir/generated/bundle.tex")
else
  (cd experiments && python3 -m rkv.bundle "${made[@]}" tex-rows "$paperdir/generated/bundle.tex" "${dirs[@]}")
fi
# The engine profile of every experiment's simulated rows (\simprofile{NAME}) and
# the name of the Mooncake traces, "generated" where a stand-in ran.
# The folders again: experiments run above have results now.
dirs=()
for d in experiments/*/; do
  name=$(basename "$d")
  [[ -f $(results "$name")/$name.jsonl ]] && dirs+=("$(cd "$(results "$name")" && pwd)")
done
(cd experiments && python3 -m rkv.tex --profiles "$paperdir/generated/profiles_numbers.tex" ${dirs[@]+"${dirs[@]}"})
# The full-hit gain under each of its definitions, the write-up's beside ours (rkv.gains).
(cd experiments && python3 -m rkv.gains "$paperdir/generated" ${dirs[@]+"${dirs[@]}"} >/dev/null)
# The configured numbers the prose quotes (\rkv{cfg/NAME/...}), from config.json.
(cd experiments && python3 -m rkv.tex --config-numbers "$paperdir/generated/config_numbers.tex")
src=$PWD
cd "$paperdir"
# -g: rebuild even when latexmk's database says a previous run failed.
latexmk -g -pdf -interaction=nonstopmode -halt-on-error main.tex >/dev/null || {
  echo "build_paper.sh: latexmk failed; see $paperdir/main.log" >&2
  tail -20 main.log >&2
  exit 1
}
if ((strict)); then
  bad=0
  if grep -E "LaTeX Warning: (Reference|Citation) .* undefined|There were undefined references" main.log >&2; then
    bad=1
  fi
  if grep -q "not built yet" main.log; then
    grep "not built yet" main.log >&2
    bad=1
  fi
  # A box LaTeX could not fit (a table or line wider than the text) prints past the margin.
  if grep -E "^Overfull \\\\[hv]box" main.log >&2; then
    bad=1
  fi
  python3 "$src/tests/experiments/paper_numbers.py" "$src/paper" >&2 || bad=1
  # Every simulated caption names its profile, no stand-in called Mooncake, one
  # definition per number (tests/experiments/paper_claims.py).
  python3 "$src/tests/experiments/paper_claims.py" "$paperdir" >&2 || bad=1
  # Every placed figure drawn at its print width, fonts >= 7 pt, no offset labels.
  python3 "$src/tests/experiments/figure_check.py" "$paperdir" >&2 || bad=1
  if ((bad)); then
    echo "build_paper.sh: --strict: the paper has the problems above" >&2
    exit 1
  fi
fi
echo "$paperdir/main.pdf"
