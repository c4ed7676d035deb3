#!/usr/bin/env python3
"""Script test of the registries through the CLI: `radixkv list [--json]`, and
every evicting kind taking the priority policy from a trace in both `cache-sim`
and `run --backend sim`.

Usage: test_policy_cli.py RADIXKV
"""
import json
import os
import random
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from cli_check import CliCheck  # noqa: E402

cli = CliCheck(sys.argv[1])
run, check = cli.run, cli.check


# radixkv list --json: one line, every list the CLI offers.
rc, out, err = run(["list", "--json"])
check(rc == 0 and out.count("\n") == 1, f"list --json is one line ({err.strip()})")
reg = json.loads(out)
names = [p["name"] for p in reg["policies"]]
check(names[:3] == ["lru", "lfu", "fifo"] and "priority" in names and "cost" in names,
      f"policies {names}")
kinds = {k["name"]: k for k in reg["kinds"]}
check(list(kinds)[0] == "radix" and {"hash", "hash-nocache", "trie", "none"} <= set(kinds),
      f"kinds {list(kinds)}")
for k in kinds.values():
    check(k["policies"] == (names if k["evicts"] else []), f"{k['name']} policies {k['policies']}")
    check(k["hash_fns"] == (reg["hash_fns"] if k["hashes"] else []), f"{k['name']} hash_fns")
check(reg["hash_fns"][0] == "xxh3" and {"cpu", "sim"} <= {b["name"] for b in reg["backends"]},
      "hash functions and backends")
check(reg["sched_policies"][0] == "fcfs", f"schedulers {reg['sched_policies']}")
rc, out, err = run(["list"])
check(rc == 0 and "eviction policies" in out and "priority" in out and "backends" in out,
      "list prints text to stdout (so that `radixkv list | grep` works)")
rc, out, err = run(["list", "--bogus"])
check(rc == 2 and "--bogus" in err, "list names a bad option")

# Four important conversations (priority 5) come back every round between six
# one-off prompts (no priority). The cache holds less than a round: lru loses
# every revisit, priority keeps the important prefixes.
rnd = random.Random(7)
imp = [[rnd.randrange(1000) for _ in range(64)] for _ in range(4)]
lines, i = [], 0
for _ in range(4):
    for p in imp:
        lines.append({"id": i, "tokens": p + [rnd.randrange(1000) for _ in range(8)], "priority": 5,
                      "max_tokens": 2})
        i += 1
    for _ in range(6):
        lines.append({"id": i, "tokens": [rnd.randrange(1000) for _ in range(64)], "max_tokens": 2})
        i += 1
with tempfile.TemporaryDirectory() as tmp:
    trace = os.path.join(tmp, "priority.jsonl")
    with open(trace, "w") as f:
        f.writelines(json.dumps(l) + "\n" for l in lines)
    for k in (k for k in kinds.values() if k["evicts"]):
        hit = {}
        for pol in ("lru", "priority"):
            rc, out, err = run(["cache-sim", "--cache", k["name"], "--capacity", "512",
                                "--page-size", "16", "--evict-policy", pol, trace])
            check(rc == 0, f"{k['name']} {pol} cache-sim ({err.strip()})")
            summ = json.loads(out.splitlines()[-1]) if rc == 0 else {}
            # Every evicting kind names the policy it applied (hash once left it out).
            check(summ.get("policy") == pol, f"{k['name']} {pol}: summary policy {summ.get('policy')}")
            sim = summ.get("hit_rate", -1)
            rc, out, err = run(["run", "--backend", "sim", "--cache", k["name"], "--evict-policy", pol,
                                "--trace", trace, "--kv-tokens", "512", "--page-size", "16",
                                "--max-running", "1"])
            check(rc == 0, f"{k['name']} {pol} run ({err.strip()})")
            hit[pol] = (sim, json.loads(out.splitlines()[-1])["hit_rate"] if rc == 0 else -1)
        # Three revisits of 64 tokens by four conversations: 768 matched tokens.
        best = 3 * 4 * 64 / sum(len(l["tokens"]) for l in lines)
        for j, what in enumerate(("cache-sim", "run")):
            check(hit["lru"][j] == 0 and abs(hit["priority"][j] - best) < 1e-4,
                  f"{k['name']} {what}: hit rate lru {hit['lru'][j]}, priority {hit['priority'][j]} "
                  f"(want 0 and {best:.4f})")

sys.exit(cli.finish("ok"))
