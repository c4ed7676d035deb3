#!/usr/bin/env python3
"""Fit the sim backend's profiles (runtime/backends/profiles/<id>.json) from raw
GPU measurements (bench/results/*/raw.json, the schema bench/gpu_profile.sh
writes), and check that every committed profile is what its raw file gives.

usage:
  sim_fit.py --sim-step-bench BIN --raw RAW.json --engine own|peer --id ID [--out FILE]
      fit one profile from a raw file (own: radixkv's kernels; peer: torch's
      attention kernels, with the assumptions listed in PEER_ASSUMPTIONS)
  sim_fit.py --sim-step-bench BIN --write-all
      rewrite every committed profile from the recipe in its "fit" field
  sim_fit.py --sim-step-bench BIN --check
      re-derive every committed profile from its raw files and compare it with
      the file, field by field; exit 1 naming each field that differs

The fit needs the sim's own cost function for the terms it subtracts (kernel
floor, activation efficiency): it calls bench/sim_step_bench with a candidate
profile, so the model is written once, in backend_sim.c. Paths in a profile's
"fit" are relative to the repository root. Every constant is rounded as the
rule next to it says; the rules are the ones SIM_COST_MODEL.md documents.
"""
import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROFILES = os.path.join(ROOT, "runtime", "backends", "profiles")
DATASHEETS = "bench/results/datasheets.json"

# radixkv's cuda backend: fp32 residual stream and GEMM outputs, bf16 GEMM
# inputs (backend_sim.c, act_bytes_per_row, has the per-kernel sums).
OWN_ACT = {"hidden": 28, "qkv": 6, "kv": 8, "ffn": 10}
# bf16 throughout, as vLLM and SGLang run: fused add+RMSNorm reads resid and
# proj and writes resid and normed (2 x 8 C), RoPE in place on q and k plus v
# read (4 (qd + 2 kvd)), the K/V store (8 kvd), SiLU-and-mul reads 2F writes F (6 F).
PEER_ACT = {"hidden": 16, "qkv": 4, "kv": 8, "ffn": 6}

OWN_ASSUMPTIONS = [
    "Host time per step (host.step_s) was measured with the engine's overlap running through "
    "forward, so none of it was hidden; it is charged in sync and overlap alike.",
    "Decode at batch 128 runs longer on the GPU than these terms explain (see the accuracy "
    "table); nothing here is fitted to it.",
]
PEER_ASSUMPTIONS = [
    "Prefill attention (efficiency.attn) runs at cuDNN's no-mask rate on the same shapes "
    "(median at P >= 4096, S >= 2048): the closest measured stand-in for FlashAttention-3, "
    "which SGLang and vLLM use on an H100 and which was not measured. The mask only skips "
    "tiles, and the model counts only the tiles a bottom-right causal mask needs. FlexAttention "
    "with the real mask reached 296-395 TFLOP/s there, FA2 without a mask 339-357.",
    "Decode attention (efficiency.kv) reads K/V at the rate of torch SDPA with enable_gqa=True "
    "(GQA-native, no K/V expansion), median over the measured batches.",
    "Decode rows beside prompt rows cost their K/V read, not a full prefill tile "
    "(switches.mixed_decode_rows = decode): FlashInfer sizes its query tile from the rows "
    "present and FA3 packs GQA heads into the tile. Not measured.",
    "Activations are bf16 end to end (switches.act_bytes_per_row: fused add+RMSNorm, RoPE in "
    "place, SiLU-and-mul), as in vLLM and SGLang; the bandwidth fraction of these kernels "
    "(efficiency.act) is radixkv's measured one. Not measured for the peers.",
    "GEMMs are cuBLAS in both engines (torch calls cuBLAS): efficiency.gemm, efficiency.weight "
    "and latency.gemm_s are radixkv's measured ones.",
    "Kernel floor, launch cost, kernels per layer, CUDA graphs for decode steps and the host "
    "time per step (latency.kernel_s, latency.launch_s, host.step_s, switches) are radixkv's "
    "measured ones: no peer engine's fixed per-step costs were measured, and keeping them "
    "equal isolates what the kernel libraries change. A peer that hides its host time "
    "behind the GPU (SGLang's overlap scheduler) would have a higher 100 %-hit speedup than "
    "this profile gives.",
]


# Constants kept at their published value where this fit's rule gives another:
# per raw file, field path -> (value kept, why). Every profile fitted from that
# raw file records each hold in fit.held with the value the rule gives, so
# --check still re-derives it (a changed raw file shows) and releasing a hold
# is one deleted line here plus --write-all (which changes the golden outputs).
HOLDS = {
    "bench/results/h100-2026-11-23/raw.json": {
        "latency.kernel_s": (5.4e-6, "the hand fit of 2026-11-23 took 1.19 ms over 219 kernels "
                             "(5.43 us) where this rule gives 1.196 ms (5.46 us, rounded 5.5); "
                             "kept so that --gpu h100 stays byte-identical with the published runs"),
        "efficiency.act": (0.66, "the hand fit of 2026-11-23 found 3.45 ms of activation traffic "
                           "in the 1024-token prefill where this rule finds 3.35 ms (0.678); kept "
                           "so that --gpu h100 stays byte-identical with the published runs"),
    },
}


def apply_holds(p, raw_rel):
    if p["fit"].get("tables"):
        return  # a new kind of profile: nothing published to keep
    held = {}
    for path, (value, why) in HOLDS.get(raw_rel, {}).items():
        sec, key = path.split(".")
        held[path] = {"value": value, "fit": p[sec][key], "why": why}
        p[sec][key] = value
    if held:
        p["fit"]["held"] = held


def die(msg):
    sys.exit(f"sim_fit.py: {msg}")


def sha256_of(rel):
    with open(os.path.join(ROOT, rel), "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def dec(x):
    """The double a C literal of x's shortest decimal form gives (x as written)."""
    return float(repr(x))


def rnd(x, digits):
    return float(f"{x:.{digits}f}")


class Sim:
    """sim_step_bench on a candidate profile: the cost function's terms."""

    def __init__(self, exe, model):
        self.exe, self.model = exe, model

    def terms(self, profile, batch, prefix, rows):
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(profile, f)
            path = f.name
        try:
            out = subprocess.run([self.exe, "--model", self.model, "--sim-profile", path,
                                  "--step", f"s:{batch}:{prefix}:{rows}"],
                                 capture_output=True, text=True)
        finally:
            os.unlink(path)
        if out.returncode:
            die(f"{self.exe} failed: {out.stderr.strip()}")
        return json.loads(out.stdout)


def profile_skeleton(pid, engine, summary, device, act, act_dtype, mixed_rows):
    return {
        "schema": 1,
        "id": pid,
        "engine": engine,
        "summary": summary,
        "device": device,
        "efficiency": {},
        "latency": {},
        "host": {},
        "switches": {
            "mixed_decode_rows": mixed_rows,
            "graphs": "decode",
            "mixed_graph_rows": 256,
            "act_dtype": act_dtype,
            "act_bytes_per_row": dict(act),
            "small_kernels_per_layer": 6,
            "step_kernels": 3,
            "gemms_per_layer": 4,
            "step_gemms": 1,
        },
    }


def decode_pairs(raw):
    """The decode steps measured both as a CUDA graph and eagerly: (graph, eager)."""
    steps = {(s["name"]): s for s in raw["steps"]}
    return [(steps[n], steps[n + "_eager"]) for n in steps
            if n + "_eager" in steps and steps[n]["graph"]]


def floor_step(pairs):
    """The step the kernel floor is solved from: the smallest decode batch as a graph."""
    return min((g for g, _ in pairs), key=lambda s: s["batch"])


def prefill_step(raw):
    """The step the activation efficiency is solved from: the longest uncached prefill."""
    return max((s for s in raw["steps"] if s["prefix"] == 0 and s["rows"] > 1),
               key=lambda s: s["rows"])


def host_point_case(pt):
    """An end-to-end point's name in raw["host"]["per_step_ms"] (gpu_raw.py's
    'sweep N, h = H, cache'), or None for a point that cannot appear there
    (gpu_raw.py takes host time from sync runs only)."""
    if pt["schedule"] != "sync":
        return None
    return f"sweep {pt['num']}, h = {pt['hit_rate']:g}, {pt['cache']}"


def fit_points(raw):
    """The reference points of a raw file whose measurement entered a fitted
    constant of an own or peer profile: {("step", name) or ("e2e", (set, num,
    hit_rate, cache, schedule)): [the constants, in the order fitted]}. fit_measured picks its points
    through the same selectors, so any point not listed here entered no constant
    (it is held out of the fit, though it comes from the same run). The GEMM and
    attention microbenchmarks, which set the efficiencies, are not reference
    points of the accuracy table and are not listed."""
    used = {}
    pairs = decode_pairs(raw)
    for g, e in pairs:
        for s in (g, e):
            used.setdefault(("step", s["name"]), []).append("latency.launch_s")
    used.setdefault(("step", floor_step(pairs)["name"]), []).append("latency.kernel_s")
    used.setdefault(("step", prefill_step(raw)["name"]), []).append("efficiency.act")
    cases = {h["case"] for h in raw["host"]["per_step_ms"]}
    for pt in raw["e2e"]["points"]:
        if host_point_case(pt) in cases:
            key = (pt["set"], pt["num"], pt["hit_rate"], pt["cache"], pt["schedule"])
            used.setdefault(("e2e", key), []).append("host.step_s")
    return used


def fit_launch_and_floors(p, raw, sim_exe, bw):
    """Launches and floors come from radixkv's own steps (for the peer they are
    an assumption, see PEER_ASSUMPTIONS), with the cost function's terms:
    p's latency.launch_s, latency.kernel_s and efficiency.act set in place."""
    sim = Sim(sim_exe, raw["model"])
    dec_pairs = decode_pairs(raw)
    # Launch: eager - graph over the decode steps, mean to 0.01 ms, over the
    # kernels an eager step launches (3 significant digits).
    diff = rnd(statistics.mean(e["ms"] - g["ms"] for g, e in dec_pairs), 2)
    q = json.loads(json.dumps(p))
    q["latency"]["launch_s"] = 1e-6
    q["switches"]["graphs"] = "none"
    g0 = dec_pairs[0][0]
    launches = round(sim.terms(q, g0["batch"], g0["prefix"], g0["rows"])["kernels_ms"] * 1e3)
    launch_us = float(f"{diff * 1e3 / launches:.3g}")
    p["latency"]["launch_s"] = float(f"{launch_us}e-6")
    # Kernel floor and activation efficiency, from decode batch 1 as a graph
    # (mostly floors) and the 1024-token prefill (mostly activation traffic):
    # each step's time less the other terms, solved together (the two
    # hardly interact; three rounds settle both to their rounding).
    d1 = floor_step(dec_pairs)
    pf = prefill_step(raw)
    kernel_s, eff_act = 0.0, 1.0
    for _ in range(3):
        q = json.loads(json.dumps(p))
        q["efficiency"]["act"], q["latency"]["kernel_s"] = eff_act, 1e-6
        t = sim.terms(q, d1["batch"], d1["prefix"], d1["rows"])
        floors = t["kernels_ms"] * 1e3
        kernel_s = (d1["ms"] - t["gemm_ms"] - t["attn_ms"] - t["act_ms"]) * 1e-3 / floors
        q["latency"]["kernel_s"] = kernel_s
        t = sim.terms(q, pf["batch"], pf["prefix"], pf["rows"])
        act_bytes = t["act_ms"] * 1e-3 * bw * eff_act
        eff_act = act_bytes / ((pf["ms"] - t["gemm_ms"] - t["attn_ms"] - t["kernels_ms"]) * 1e-3) / bw
    p["latency"]["kernel_s"] = float(f"{rnd(kernel_s * 1e6, 1)}e-6")
    p["efficiency"]["act"] = rnd(eff_act, 2)


def fit_measured(raw_rel, engine, pid, sim_exe, tables=False):
    """own / peer from one raw file. Each rule's comment is its documentation.
    tables: also keep the measured GEMM times as the profile's tables (the sim
    then interpolates them, backend_sim.h) and fit the floors against them."""
    raw = json.load(open(os.path.join(ROOT, raw_rel)))
    if raw.get("schema") != "radixkv-gpu-raw/1":
        die(f"{raw_rel}: schema {raw.get('schema')!r}, want 'radixkv-gpu-raw/1'")
    dev, prov = raw["device"], raw["provenance"]
    # Ceilings: the best GEMM rate measured, down to 10 TFLOP/s; the best
    # copy rate, to 0.1 TB/s.
    peak_t = int(max(dev["gemm_TFLOPs"]) // 10 * 10)
    bw_t = rnd(max(dev["copy_TBps"]), 1)
    peak, bw = float(f"{peak_t}e12"), float(f"{bw_t}e12")
    device = {"name": dev["name"], "peak_flops": peak, "bandwidth": bw,
              "memory_bytes": dec(dev["memory_bytes"]), "sms": dev["sms"]}
    own = engine == "own"
    p = profile_skeleton(
        pid, "radixkv" if own else "peer (torch/cuDNN kernels)",
        (f"radixkv's cuda backend on an {dev['name']}, fitted from {raw_rel}" if own else
         f"torch/cuDNN attention kernels (GQA-native decode) on an {dev['name']}, with radixkv's "
         f"measured fixed costs; fitted from {raw_rel}"),
        device, OWN_ACT if own else PEER_ACT,
        "fp32 residual and GEMM outputs, bf16 GEMM inputs" if own else "bf16",
        "full_tile" if own else "decode")
    # Large GEMMs: the four layer GEMMs at M = 1024 together, FLOPs over time.
    big = [g for g in raw["gemm"] if g["M"] == 1024 and not g["graph"]]
    flops = sum(2 * g["M"] * g["N"] * g["K"] for g in big)
    eff_gemm = rnd(flops / (sum(g["us"] for g in big) * 1e-6) / peak, 2)
    # Skinny GEMMs: the line through the M = 1 GEMMs with the fewest and the
    # most weight bytes; its slope gives the weight-streaming rate, its
    # intercept the fixed latency (to 0.1 us).
    m1 = sorted((g for g in raw["gemm"] if g["M"] == 1 and not g["graph"]),
                key=lambda g: g["N"] * g["K"])
    lo, hi = m1[0], m1[-1]
    b_lo, b_hi = 2 * lo["N"] * lo["K"], 2 * hi["N"] * hi["K"]
    slope = (hi["us"] - lo["us"]) * 1e-6 / (b_hi - b_lo)
    eff_weight = rnd(1 / slope / bw, 2)
    gemm_us = rnd((lo["us"] * 1e-6 - b_lo * slope) * 1e6, 1)
    att = raw["attention"]["radixkv" if own else "torch"]
    if own:
        # radixkv's prefill kernel: its plateau, the median rate at P >= 4096, S >= 2048.
        rates = [r["TFLOPs"] for r in att["prefill"] if r["P"] >= 4096 and r["S"] >= 2048]
        # Its decode kernel at the batches the sweeps run (B >= 64): the
        # slowest rate (the median, 2.35 TB/s, would give 0.78).
        kv = min(r["TBps"] for r in att["decode"] if r["B"] >= 64)
    else:
        rates = [r["TFLOPs"] for r in att["prefill"]
                 if r["case"].startswith("cudnn") and r["P"] >= 4096 and r["S"] >= 2048]
        kv = statistics.median(r["TBps"] for r in att["decode"] if r["case"] == "sdpa-gqa-native")
    eff_attn = rnd(statistics.median(rates) * 1e12 / peak, 2)
    eff_kv = rnd(kv * 1e12 / bw, 2)
    # Host time per step: the median of the sweep runs' (wall - model) / steps, to 0.1 ms.
    host_ms = rnd(statistics.median(h["ms"] for h in raw["host"]["per_step_ms"]), 1)
    p["efficiency"] = {"gemm": eff_gemm, "weight": eff_weight, "attn": eff_attn, "kv": eff_kv,
                       "act": 1.0}
    p["latency"] = {"gemm_s": float(f"{gemm_us}e-6"), "kernel_s": 0.0, "launch_s": 0.0}
    p["host"] = {"step_s": float(f"{host_ms}e-3"), "hidden_by_overlap": False}
    if tables:
        # Eager GEMM times by M for each measured (N, K), in seconds.
        by = {}
        for g in raw["gemm"]:
            if not g["graph"]:
                by.setdefault((g["name"], g["N"], g["K"]), []).append((g["M"], g["us"]))
        p["tables"] = {"gemm": [{"name": n, "N": N, "K": K, "M": [m for m, _ in sorted(v)],
                                 "s": [float(f"{us}e-6") for _, us in sorted(v)]}
                                for (n, N, K), v in by.items()]}
    p["provenance"] = {k: prov[k] for k in ("device", "driver", "cuda", "cublas", "torch", "date")
                       if k in prov}
    p["provenance"].update({"raw": raw_rel, "raw_sha256": sha256_of(raw_rel)})

    fit_launch_and_floors(p, raw, sim_exe, bw)
    p["assumptions"] = OWN_ASSUMPTIONS if own else PEER_ASSUMPTIONS
    p["fit"] = {"method": engine, "raw": [raw_rel], "tool": "bench/sim_fit.py"}
    if tables:
        p["fit"]["tables"] = True
    apply_holds(p, raw_rel)
    return p


def fit_scaled(base_id, device_id, sim_exe):
    """A GPU without measurements: the measured profile's fractions and
    latencies, its ceilings scaled by the datasheet (what the measured GPU
    reached of its own datasheet, to 2 decimals, times the other's)."""
    base = json.load(open(os.path.join(PROFILES, base_id + ".json")))
    raw_rel = base["fit"]["raw"][0]
    base = fit_measured(raw_rel, base["fit"]["method"], base_id, sim_exe)
    ds = json.load(open(os.path.join(ROOT, DATASHEETS)))["devices"]
    ref_key = base_id.split("@")[0]
    ref, dev = ds[ref_key], ds[device_id]
    r_peak = rnd(base["device"]["peak_flops"] / (ref["peak_TFLOPs"] * 1e12), 2)
    r_bw = rnd(base["device"]["bandwidth"] / (ref["bandwidth_TBps"] * 1e12), 2)
    p = json.loads(json.dumps(base))
    p["id"] = device_id
    # A GPU with the measured one's compute die (h200: the H100's) keeps the
    # measured GEMM ceiling and SM count; only its memory differs.
    same_die = dev.get("compute_of") == ref_key
    p["summary"] = (f"{dev['name']}: {base_id}'s fractions and latencies, datasheet ceilings x "
                    f"{r_peak} (GEMM) and x {r_bw} (copy) as the {ref_key} reached")
    p["device"] = {"name": dev["name"],
                   "peak_flops": (base["device"]["peak_flops"] if same_die
                                  else float(f"{dev['peak_TFLOPs']}e12") * r_peak),
                   "bandwidth": float(f"{dev['bandwidth_TBps']}e12") * r_bw,
                   "memory_bytes": dec(dev["memory_bytes"]), "sms": dev["sms"]}
    p["assumptions"] = [
        f"Not measured on this GPU: every fraction, latency, switch and the host time are "
        f"{base_id}'s; the ceilings are datasheet figures ({DATASHEETS}) times what the "
        f"{ref_key} reached of its own datasheet."] + base["assumptions"]
    p["provenance"] = dict(base["provenance"])
    p["provenance"].update({"datasheets": DATASHEETS, "datasheets_sha256": sha256_of(DATASHEETS)})
    p["fit"] = {"method": "scaled", "base": base_id, "raw": [raw_rel, DATASHEETS],
                "tool": "bench/sim_fit.py"}
    if "held" in base["fit"]:
        p["fit"]["held"] = base["fit"]["held"]
    return p


def derive(recipe_profile, sim_exe):
    fit = recipe_profile.get("fit") or die(f"profile {recipe_profile.get('id')}: no 'fit' recipe")
    if fit["method"] in ("own", "peer"):
        return fit_measured(fit["raw"][0], fit["method"], recipe_profile["id"], sim_exe,
                            fit.get("tables", False))
    if fit["method"] == "scaled":
        return fit_scaled(fit["base"], recipe_profile["id"], sim_exe)
    die(f"profile {recipe_profile['id']}: unknown fit method {fit['method']!r}")


def text(p):
    return json.dumps(p, indent=1) + "\n"


def diff(a, b, path=""):
    """Field paths where a and b differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            out += diff(a.get(k), b.get(k), f"{path}.{k}" if path else k)
        return out
    return [] if a == b and type(a) == type(b) else [f"{path}: file {a!r}, fit {b!r}"]


def committed():
    return sorted(f for f in os.listdir(PROFILES) if f.endswith(".json"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sim-step-bench", required=True)
    ap.add_argument("--raw")
    ap.add_argument("--engine", choices=("own", "peer"))
    ap.add_argument("--id")
    ap.add_argument("--out")
    ap.add_argument("--tables", action="store_true",
                    help="keep the measured GEMM times as tables in the profile")
    ap.add_argument("--write-all", action="store_true")
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args()
    exe = a.sim_step_bench
    if a.check or a.write_all:
        # Measured profiles first: scaled ones re-derive from them.
        files = sorted(committed(), key=lambda f: json.load(open(os.path.join(PROFILES, f)))
                       .get("fit", {}).get("method") == "scaled")
        bad = 0
        for f in files:
            path = os.path.join(PROFILES, f)
            cur = json.load(open(path))
            new = derive(cur, exe)
            if f != cur["id"] + ".json":
                print(f"{f}: id {cur['id']!r} does not match the file name")
                bad += 1
            if a.write_all:
                open(path, "w").write(text(new))
                print(f"wrote {os.path.relpath(path, ROOT)}")
                continue
            for rel in new["fit"]["raw"]:
                print(f"{f}: raw {rel} sha256 {sha256_of(rel)[:16]}")
            d = diff(cur, new)
            if not d and open(path).read() != text(new):
                d = ["(formatting: rewrite with --write-all)"]
            for line in d:
                print(f"{f}: {line}")
            bad += bool(d)
            if not d:
                print(f"{f}: every constant re-derived from its raw file(s)")
        if a.check and bad:
            die(f"{bad} profile(s) differ from their fit")
        return
    if not (a.raw and a.engine and a.id):
        die("give --raw, --engine and --id (or --check / --write-all)")
    raw = os.path.relpath(os.path.abspath(a.raw), ROOT)
    p = fit_measured(raw, a.engine, a.id, exe, a.tables)
    out = text(p)
    if a.out:
        open(a.out, "w").write(out)
    else:
        sys.stdout.write(out)


if __name__ == "__main__":
    main()
