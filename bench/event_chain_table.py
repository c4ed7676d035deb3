#!/usr/bin/env python3
"""The SHA-256 chain table of bench/RESULTS.md from the JSON of
bench/sha256_chain_bench.c (the chain alone, in C) and
bench/event_chain_bench.py (through sglang_event_hashes), so that no number
in it is typed by hand: per run and page size, thread CPU ns a page on the
CPU's SHA instructions and on libcrypto (median, least-most) and their ratio.

    /usr/bin/python3 bench/event_chain_table.py a.json b.json
"""
import argparse
import json
import os
import sys


def cell(row, route):
    s = row[route]["thread_cpu_ns_per_page"]
    return f"{s['median']:.1f} ({s['min']:.1f}–{s['max']:.1f})"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("runs", nargs="+", metavar="JSON")
    args = ap.parse_args()
    lines = ["| run | through | page size | SHA instructions, ns a page | libcrypto, ns a page "
             "| ratio |", "|---" * 6 + "|"]
    for path in args.runs:
        try:
            with open(path) as f:
                d = json.load(f)
            through = {"sha256_chain_bench": "C", "event_chain_bench": "Python"}.get(d.get("bench"))
            if through is None:
                sys.exit(f"event_chain_table: {path}: not a chain bench's JSON")
            for name, row in d["rows"].items():
                if "sha_ni" not in row:
                    sys.exit(f"event_chain_table: {path}: {name} has no sha_ni route "
                             "(the CPU lacked the SHA instructions)")
                lines.append(f"| {os.path.basename(path)} | {through} | {name.split('_')[-1]} "
                             f"| {cell(row, 'sha_ni')} | {cell(row, 'libcrypto')} "
                             f"| {row['sha_ni_over_libcrypto_cpu']:.2f} |")
        except (OSError, ValueError, KeyError) as e:
            sys.exit(f"event_chain_table: {path}: {e!r}")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
