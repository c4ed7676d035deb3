#!/usr/bin/env bash
# ptxas_report.sh - registers, stack and spills of every attention kernel, for
# sm_90 and sm_80, from the build's own compile command (no GPU needed).
#
#   bench/ptxas_report.sh BUILD_DIR OUTDIR
#
# BUILD_DIR: a meson build with CUDA (-Dcuda=enabled). Writes OUTDIR/ptxas_sm90.txt,
# OUTDIR/ptxas_sm80.txt (ptxas -v as printed) and OUTDIR/ptxas_summary.jsonl
# (one line per kernel and architecture).
set -euo pipefail
build=${1:?usage: bench/ptxas_report.sh BUILD_DIR OUTDIR}
out=${2:?usage: bench/ptxas_report.sh BUILD_DIR OUTDIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$build"
cmd=$(python3 - <<'PY'
import json
for e in json.load(open("compile_commands.json")):
    if e["file"].endswith("attention/attention_cuda.cu"):
        print(e["command"])
        break
PY
)
[[ -n "$cmd" ]] || { echo "no attention_cuda.cu in $build/compile_commands.json (CUDA off?)" >&2; exit 1; }
for arch in 90 80; do
  c=$(sed -E "s/-gencode=arch=compute_[0-9]+,code=(sm|compute)_[0-9]+//g; s/ -o [^ ]+\.o/ -o \/dev\/null/" <<<"$cmd")
  eval "$c -gencode=arch=compute_$arch,code=sm_$arch -Xptxas -v" > "$out/ptxas_sm$arch.txt" 2>&1
done
python3 - "$out" <<'PY'
import json, re, subprocess, sys
out = sys.argv[1]
with open(f"{out}/ptxas_summary.jsonl", "w") as f:
    for arch in ("90", "80"):
        fn = None
        for line in open(f"{out}/ptxas_sm{arch}.txt"):
            m = re.search(r"Compiling entry function '([^']+)'", line)
            if m:
                fn = m.group(1)
                continue
            m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
            if m and fn:
                rec = {"arch": "sm_" + arch, "kernel": fn, "stack": int(m.group(1)),
                       "spill_stores": int(m.group(2)), "spill_loads": int(m.group(3))}
            m2 = re.search(r"Used (\d+) registers", line)
            if m2 and fn:
                rec["registers"] = int(m2.group(1))
                try:
                    rec["name"] = subprocess.run(["c++filt", fn], capture_output=True, text=True).stdout.strip()
                except OSError:
                    pass
                f.write(json.dumps(rec) + "\n")
                fn = None
PY
echo "kernels with spills:" >&2
grep -h '"spill_stores": [1-9]' "$out/ptxas_summary.jsonl" | python3 -c '
import json, sys
for l in sys.stdin:
    r = json.loads(l); print(" ", r["arch"], r.get("name", r["kernel"]), r["spill_stores"], "bytes") ' >&2 || true
