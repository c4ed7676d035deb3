#!/usr/bin/env python3
"""Script test of disaggregated prefill/decode on the sim clock (issue 34):
`radixkv run --backend sim --prefill N --decode M [--link SPEC]` and the
SLO goodput of `--slo-ttft/--slo-tpot`.

  1. conservation: every request finishes once, with the tokens a colocated
     engine gives at temperature 0, under every router and several N:M;
  2. the handoff's time is the link model's, on a hand-computed case, and a
     faster link lowers latency and TPOT by exactly that difference;
  3. the decode engine's cache keeps what was sent: a later request of the
     same prefix is sent only the pages it lacks;
  4. determinism: the same run twice prints the same bytes;
  5. the requests within both SLOs, per second of the run
     (good_requests_per_s; DistServe's goodput is a rate sweep's);
  6. bad options fail at once, naming the option;
  7. one NIC per engine: handoffs out of one prefill engine queue, hand-computed;
  8. a request no decode engine can hold ends before its prefill;
  9. --decode-router cache-aware pairs a prompt with the engine holding it;
 10. the tier counters in the disaggregated summary.

Usage: test_disagg.py RADIXKV
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from cli_check import CliCheck  # noqa: E402

cli = CliCheck(sys.argv[1])
run, check = cli.run, cli.check


def lines(out):
    return [json.loads(l) for l in out.splitlines() if l.strip()]


def requests(out):
    return [l for l in lines(out) if l.get("type") == "request"]


def summary(out):
    s = [l for l in lines(out) if l.get("type") == "summary"]
    return s[-1] if s else None


def close(a, b, tol=2e-6):
    return abs(a - b) <= tol


SIM = ["run", "--backend", "sim", "--trace", "-", "--fixed-clock", "--no-progress", "--kv-tokens", "16384"]

# A trace with shared prefixes, Poisson arrivals and mixed output lengths.
rc, trace, err = run(["gen", "multi-turn", "--num", "12", "--turns", "3", "--prompt-len", "90",
                      "--output-len", "7", "--shared-len", "200", "--rate", "40", "--seed", "3"])
check(rc == 0 and trace.count("\n") == 36, f"gen multi-turn ({err.strip()[-200:]})")
ids = [json.dumps(json.loads(l)["id"]) for l in trace.splitlines()]

# 1. Conservation and tokens against one colocated engine.
rc, out, err = run(SIM + ["--max-running", "1"], trace)
ref = {json.dumps(r["id"]): r["output_ids"] for r in requests(out)}
check(rc == 0 and len(ref) == len(ids), f"colocated reference ({err.strip()[-200:]})")
for router in ["round-robin", "least-load", "cache-aware"]:
    for n, m in [(1, 1), (2, 3), (3, 2)]:
        what = f"--router {router} --prefill {n} --decode {m}"
        rc, out, err = run(SIM + ["--router", router, "--prefill", str(n), "--decode", str(m)], trace)
        reqs = requests(out)
        s = summary(out)
        got = [json.dumps(r["id"]) for r in reqs]
        check(rc == 0 and s is not None, f"{what}: runs ({err.strip()[-300:]})")
        check(s is None or s.get("sim_profile") == "h100", f"{what}: the summary names the sim profile")
        if s is None:
            continue
        check(sorted(got) == sorted(ids), f"{what}: every request finishes exactly once")
        check(all(ref.get(json.dumps(r["id"])) == r.get("output_ids") for r in reqs),
              f"{what}: outputs equal the colocated engine's")
        check(s["requests"] == len(ids) and s["errors"] == 0, f"{what}: summary counts")
        check(sum(s["per_prefill_requests"]) == len(ids) and len(s["per_prefill_requests"]) == n,
              f"{what}: each request prefilled once")
        check(sum(s["per_decode_requests"]) == len(ids) and len(s["per_decode_requests"]) == m,
              f"{what}: each request decoded once")
        check(all(0 <= r["prefill"] < n and 0 <= r["decode"] < m for r in reqs),
              f"{what}: engines named in range")
        check(all(close(r["latency"], r["ttft"] + r["tpot"] * (r["output_tokens"] - 1), 1e-6 * r["output_tokens"]) for r in reqs),
              f"{what}: latency = ttft + tpot * (outputs - 1)")
        check(s["kv_pages"] == sum(r["kv_pages"] for r in reqs) and
              s["kv_local_pages"] == sum(r["kv_local_pages"] for r in reqs),
              f"{what}: summary pages are the requests' sum")

# 2. The link model on one request: 100 tokens, P = 16 -> 6 full pages sent.
one = '{"id": "a", "tokens": [%s], "max_tokens": 5}\n' % ",".join(str(7 + i) for i in range(100))
ONE = SIM + ["--page-size", "16", "--prefill", "1", "--decode", "1"]


def one_run(link):
    rc, out, err = run(ONE + ["--link", link], one)
    r = requests(out)
    check(rc == 0 and len(r) == 1, f"--link {link}: runs ({err.strip()[-300:]})")
    return r[0] if r else None


slow = one_run("tcp,bandwidth=1e9,latency=1e-3,per_page=2e-4")
fast = one_run("tcp,bandwidth=1e9,latency=0,per_page=0")
wide = one_run("tcp,bandwidth=2e9,latency=0,per_page=0")
if slow and fast and wide:
    check(slow["kv_pages"] == 6 and slow["kv_local_pages"] == 0, f"6 pages sent: {slow}")
    pb = slow["kv_bytes"] / 6
    check(pb > 0 and slow["kv_bytes"] == fast["kv_bytes"], "bytes per page the same on every link")
    check(close(slow["transfer"], 1e-3 + 6 * (2e-4 + pb / 1e9)), f"transfer = latency + pages*(per_page + bytes/bw): {slow['transfer']}")
    check(close(fast["transfer"], 6 * pb / 1e9), "transfer without latency")
    check(slow["ttft"] == fast["ttft"], "TTFT is the prefill engine's: the link does not move it")
    d = 1e-3 + 6 * 2e-4
    check(close(slow["latency"] - fast["latency"], d), f"latency grows by the link difference: {slow['latency'] - fast['latency']} vs {d}")
    check(close(slow["tpot"] - fast["tpot"], d / 4), "TPOT grows by it over 4 decode tokens")
    d2 = 6 * pb * (1 / 1e9 - 1 / 2e9)
    check(close(fast["latency"] - wide["latency"], d2), "twice the bandwidth saves half the byte time")
    check(slow["output_ids"] == fast["output_ids"] == wide["output_ids"] and len(slow["output_ids"]) == 5,
          "the link never changes the tokens")

# 3. The decode engine keeps what it was sent: the second request shares 64
# tokens (4 pages) and arrives after the first finished.
pre = [900 + i for i in range(64)]
two = ('{"id": 0, "tokens": [%s], "max_tokens": 3, "arrival": 0}\n' % ",".join(map(str, pre + list(range(1, 37)))) +
       '{"id": 1, "tokens": [%s], "max_tokens": 3, "arrival": 5}\n' % ",".join(map(str, pre + list(range(40, 76)))))
rc, out, err = run(SIM + ["--page-size", "16", "--prefill", "2", "--decode", "1"], two)
r = {x["id"]: x for x in requests(out)}
check(rc == 0 and len(r) == 2, f"two requests ({err.strip()[-300:]})")
if len(r) == 2:
    check(r[0]["kv_pages"] == 6 and r[0]["kv_local_pages"] == 0, f"first: 6 pages sent {r[0]}")
    check(r[1]["kv_local_pages"] == 4 and r[1]["kv_pages"] == 2,
          f"second: the shared 4 pages found on the decode engine, 2 sent {r[1]}")
    check(r[1]["prefill"] == 1 and r[1]["cached_tokens"] == 0, "round-robin: the second prefill engine had nothing")
    s = summary(out)
    check(close(s["decode_hit_rate"], 4 / 12), f"decode hit rate 4 of 12 pages: {s['decode_hit_rate']}")

# 3b. A decode pool too small to keep every handoff (5 pages; 12 requests of 3
# full pages at once): nothing may wait forever on pages held for requests not
# yet admitted (regression: "6 requests waiting and none can be scheduled").
tight = "".join('{"id": %d, "tokens": [%s], "max_tokens": 8, "arrival": 0}\n'
                % (i, ",".join(str((i * 7 + j) % 4000 + 1) for j in range(48))) for i in range(12))
TIGHT = ["run", "--backend", "sim", "--trace", "-", "--fixed-clock", "--no-progress",
         "--kv-tokens", "80", "--page-size", "16"]
rc, out, err = run(TIGHT + ["--max-running", "1"], tight)
tref = {r["id"]: r["output_ids"] for r in requests(out)}
rc, out, err = run(TIGHT + ["--prefill", "1", "--decode", "1"], tight)
s = summary(out)
check(rc == 0 and s is not None and s["errors"] == 0, f"tight decode pool: runs ({err.strip()[-300:]})")
check(sorted(r["id"] for r in requests(out)) == list(range(12)) and
      all(tref.get(r["id"]) == r["output_ids"] for r in requests(out)),
      "tight decode pool: every request once, with the colocated tokens")
check(s is not None and s["kv_waited_requests"] + s["kv_evicted_requests"] > 0,
      "tight decode pool: some handoffs found no room (the path under test ran)")
# A handoff that finds its busy decode engine full waits there for a finish
# instead of recomputing the prompt on the decode engine.
check(s is not None and s["kv_waited_requests"] > 0 and s["kv_recompute_requests"] == 0,
      f"tight decode pool: full handoffs waited, none recomputed: {s and s['kv_waited_requests']}")
check(any(r["link_wait"] > 0 for r in requests(out)),
      "tight decode pool: a waited handoff left after its decode engine's finish")

# 4. Determinism.
args = SIM + ["--router", "cache-aware", "--prefill", "2", "--decode", "2", "--slo-ttft", "0.05"]
a, b = run(args, trace), run(args, trace)
check(a[0] == 0 and a[1] == b[1], "the same run twice prints the same bytes")

# 5. Goodput: the requests within both SLOs, over the run's duration.
rc, out, err = run(SIM + ["--prefill", "1", "--decode", "1"], trace)
reqs = requests(out)
ttfts = sorted(x["ttft"] for x in reqs)
tpots = sorted(x["tpot"] for x in reqs)
slo_ttft, slo_tpot = ttfts[len(ttfts) // 2], tpots[len(tpots) * 3 // 4]
rc, out, err = run(SIM + ["--prefill", "1", "--decode", "1", "--slo-ttft", repr(slo_ttft),
                          "--slo-tpot", repr(slo_tpot)], trace)
s = summary(out)
met = sum(1 for x in requests(out) if x["ttft"] <= slo_ttft + 5e-7 and x["tpot"] <= slo_tpot + 5e-7)
check(rc == 0 and s["slo_met"] == met and 0 < met < len(ids), f"slo_met {s['slo_met']} == {met}")
check(close(s["slo_attainment"], met / len(ids)) and
      close(s["good_requests_per_s"], met / s["duration"], 1e-3),
      "attainment and good requests per second follow slo_met")
check("goodput" not in s, "no per-run number is called goodput (DistServe's is a rate sweep's)")
# Colocated runs report the same fields with an SLO, and none without one.
rc, out, err = run(SIM + ["--replicas", "2", "--router", "least-load", "--slo-tpot", "1"], trace)
s = summary(out)
check(rc == 0 and s["slo_met"] == len(ids) and s["slo_ttft"] is None, "colocated: SLO fields")
rc, out, err = run(SIM + ["--replicas", "2", "--router", "least-load"], trace)
check(rc == 0 and "good_requests_per_s" not in summary(out), "colocated without SLOs: no SLO fields")

# 7. Link contention (kv_link.h): one prefill engine hands two requests of 6
# pages over at the same first token; its NIC sends them one after the other,
# the second waiting for the first's bytes (not its latency).
a100 = ",".join(str(7 + i) for i in range(100))
b100 = ",".join(str(1007 + i) for i in range(100))
pair = ('{"id": "a", "tokens": [%s], "max_tokens": 5}\n{"id": "b", "tokens": [%s], "max_tokens": 5}\n'
        % (a100, b100))
LINK = "tcp,bandwidth=1e9,latency=1e-3,per_page=2e-4"
rc, out, err = run(SIM + ["--page-size", "16", "--prefill", "1", "--decode", "2", "--link", LINK], pair)
r = {x["id"]: x for x in requests(out)}
check(rc == 0 and len(r) == 2, f"contention: runs ({err.strip()[-300:]})")
if len(r) == 2:
    pb = r["a"]["kv_bytes"] / 6
    busy = 6 * (2e-4 + pb / 1e9)
    check(r["a"]["ttft"] == r["b"]["ttft"] and r["a"]["decode"] != r["b"]["decode"],
          "contention: one prefill batch, two decode engines")
    check(r["a"]["link_wait"] == 0 and close(r["b"]["link_wait"], busy),
          f"contention: the second waits for the first's bytes: {r['b']['link_wait']} vs {busy}")
    s = summary(out)
    check(close(s["link_wait_seconds"], busy), "contention: the summary sums the waits")
# Two prefill engines into two decode engines: separate NICs, no wait.
rc, out, err = run(SIM + ["--page-size", "16", "--prefill", "2", "--decode", "2", "--link", LINK], pair)
check(rc == 0 and all(x["link_wait"] == 0 for x in requests(out)), "no contention across NIC pairs")

# 8. A request the decode engines can never hold is refused before its
# prefill, as a colocated engine refuses it (5 pages; 48 + 100 tokens).
big = '{"id": "big", "tokens": [%s], "max_tokens": 100}\n' % ",".join(str(3 + i) for i in range(48))
rc, out, err = run(TIGHT + ["--prefill", "1", "--decode", "1"], big + tight)
r = {x["id"]: x for x in requests(out)}
s = summary(out)
check(rc == 0 and "error" in r.get("big", {}) and r["big"]["prefill"] is None and
      r["big"]["decode"] is None, f"never fits: error line without a prefill: {r.get('big')}")
check(s is not None and s["errors"] == 1 and sum(s["per_prefill_requests"]) == 12,
      "never fits: counted as an error, never prefilled")
rc, out, err = run(TIGHT, big)
check(rc in (0, 1) and "error" in requests(out)[0], "never fits: colocated ends it with an error too")

# 9. Pairing: --decode-router cache-aware sends the second request of a shared
# prefix to the decode engine that holds it (4 pages not sent again).
rc, out, err = run(SIM + ["--page-size", "16", "--prefill", "2", "--decode", "2", "--decode-router",
                          "cache-aware"], two)
r = {x["id"]: x for x in requests(out)}
s = summary(out)
check(rc == 0 and len(r) == 2 and s["decode_router"] == "cache-aware",
      f"--decode-router cache-aware runs ({err.strip()[-300:]})")
if len(r) == 2:
    check(r[1]["decode"] == r[0]["decode"] and r[1]["kv_local_pages"] == 4,
          f"cache-aware pairing: the holder of the prefix takes it: {r[1]}")
rc, out, err = run(SIM + ["--prefill", "2", "--decode", "2"], trace)
check(rc == 0 and summary(out)["decode_router"] == "least-load", "least-load pairing by default")

# 10. The spill tier's counters in the disaggregated summary, as --replicas
# prints them.
rc, out, err = run(SIM + ["--prefill", "1", "--decode", "2", "--tier-host", "4096"], trace)
s = summary(out)
check(rc == 0 and s is not None and "host_hit_tokens" in s and "model_seconds" in s,
      f"tier statistics in the disaggregated summary ({err.strip()[-200:]})")

# 6. Bad options, named.
for extra, name in [(["--prefill", "2"], "--decode"),
                    (["--decode", "2"], "--prefill"),
                    (["--prefill", "0", "--decode", "1"], "--prefill"),
                    (["--prefill", "1", "--decode", "1", "--replicas", "2"], "--replicas"),
                    (["--link", "rdma"], "--link"),
                    (["--decode-router", "least-load"], "--decode-router"),
                    (["--prefill", "1", "--decode", "1", "--decode-router", "nearest"],
                     "--decode-router"),
                    (["--prefill", "1", "--decode", "1", "--link", "carrier-pigeon"], "--link"),
                    (["--prefill", "1", "--decode", "1", "--link", "rdma,speed=3"], "--link"),
                    (["--prefill", "1", "--decode", "1", "--link", "tcp,bandwidth=0"], "--link"),
                    (["--prefill", "1", "--decode", "1", "--cache", "none"], "--cache"),
                    (["--slo-ttft", "-1"], "--slo-ttft")]:
    rc, out, err = run(SIM + extra, trace)
    check(rc == 2 and name in err and not out, f"{' '.join(extra)}: exit 2 naming {name}: rc {rc}, {err.strip()[-200:]}")
rc, out, err = run(["run", "--trace", "-", "--no-progress", "--prefill", "1", "--decode", "1"], trace)
check(rc == 2 and "--backend sim" in err, f"cpu backend refused: {err.strip()[-200:]}")

sys.exit(cli.finish("disagg: all passed"))
