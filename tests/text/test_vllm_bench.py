#!/usr/bin/env python3
"""vLLM's own benchmark client (vllm.benchmarks.serve, its datasets and its
request functions, unmodified) against `radixkv serve --tokenizer DIR` on the
cpu model, with the random dataset and a ShareGPT-format file the test
writes. The client loads the same tokenizer directory with transformers.

The `vllm bench serve` command itself needs the server extras (uvicorn) the
CPU-only vllm venv lacks, so the test calls the module's own argument parser
and main() - the code that command runs. Checked per dataset: every request
succeeds; the prompt_tokens the server reported per request equal
transformers' count of each dataset prompt with the same tokenizer (BOS
included, as vLLM's server counts; for ShareGPT also the dataset's own
prompt_len); every request's output is the dataset's length; vLLM's
total input and generated tokens equal the growth of the server's
vllm:prompt_tokens_total and vllm:generation_tokens_total.

Runs under RKV_VLLM_PYTHON (run_tests sets it); exits 77 (skip) without it.
Usage: test_vllm_bench.py RADIXKV TEMPLATES_DIR
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from venv_reexec import reexec_in_venv  # noqa: E402

if __name__ == "__main__":
    reexec_in_venv("RKV_VLLM_PYTHON", __file__, "scripts/vllm_venv.sh makes it")

import argparse  # noqa: E402
import asyncio  # noqa: E402
import json  # noqa: E402
import random  # noqa: E402
import tempfile  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "serve"))
sys.path.insert(0, HERE)
from serve_util import Checks, Server, stop_checked, word_tokenizer  # noqa: E402

N = 8
WORDS = ["cache", "prefix", "radix", "tree", "token", "page", "hit", "miss", "server", "über",
         "naïve", "東京", "ok", "the", "a", "of"]


def sharegpt_file(path, r):
    def text(lo, hi):
        return " ".join(r.choice(WORDS) for _ in range(r.randint(lo, hi)))
    convs = [{"id": str(i), "conversations": [{"from": "human", "value": text(4, 12)},
                                              {"from": "gpt", "value": text(2, 6)}]}
             for i in range(3 * N)]
    with open(path, "w", encoding="utf-8") as f:
        json.dump(convs, f)


def totals(s):
    m = s.metrics()
    return {k: sum(v for name, v in m.items() if name.split("{")[0] == k)
            for k in ("vllm:prompt_tokens_total", "vllm:generation_tokens_total")}


def main():
    radixkv, tdir = sys.argv[1], sys.argv[2]
    try:
        from transformers import AutoTokenizer
        from vllm.benchmarks import serve as bench
        from vllm.benchmarks.datasets import get_samples
    except ImportError as e:
        print(f"vllm's benchmark modules do not import ({e}): skipping", file=sys.stderr)
        sys.exit(77)
    check = Checks()
    with tempfile.TemporaryDirectory() as tmp:
        tok = word_tokenizer(tmp, os.path.join(tdir, "llama-3.jinja"))
        share = os.path.join(tmp, "sharegpt.json")
        sharegpt_file(share, random.Random(40))
        s = Server(radixkv, "--model-name", tok, "--tokenizer", tok)
        try:
            base = ["--backend", "vllm", "--base-url", s.base, "--model", tok, "--tokenizer", tok,
                    "--num-prompts", str(N), "--ignore-eos", "--disable-tqdm", "--seed", "7",
                    "--save-detailed"]
            runs = {"random": ["--dataset-name", "random", "--random-input-len", "24",
                               "--random-output-len", "6"],
                    "sharegpt": ["--dataset-name", "sharegpt", "--dataset-path", share]}
            for name, extra in runs.items():
                p = argparse.ArgumentParser()
                bench.add_cli_args(p)
                args = p.parse_args(base + extra)
                # the dataset's own requests, drawn as main draws them (same seed)
                hf = AutoTokenizer.from_pretrained(tok)
                want = get_samples(args, hf)
                # what vLLM's server would count: the prompt encoded with special tokens (the
                # random dataset's prompt_len leaves the BOS out, ShareGPT's keeps it)
                hf_lens = sorted(len(hf(q.prompt).input_ids) for q in want)
                before = totals(s)
                r = bench.main(args)
                if asyncio.iscoroutine(r):
                    r = asyncio.run(r)
                after = totals(s)
                grew = {k: after[k] - before[k] for k in after}
                check(r["completed"] == N and not r.get("failed"),
                      f"{name}: {r['completed']} completed of {N}, {r.get('failed')} failed")
                # input_lens: the server's usage.prompt_tokens per request; the dataset's
                # prompt_len: the client's count with the same tokenizer
                check(sorted(r["input_lens"]) == hf_lens,
                      f"{name}: server prompt tokens {sorted(r['input_lens'])} != transformers' "
                      f"{hf_lens}")
                if name == "sharegpt":
                    check(hf_lens == sorted(q.prompt_len for q in want),
                          f"{name}: the dataset's prompt_len {sorted(q.prompt_len for q in want)}")
                check(r["total_input_tokens"] == grew["vllm:prompt_tokens_total"],
                      f"{name}: vllm input tokens {r['total_input_tokens']} != server "
                      f"{grew['vllm:prompt_tokens_total']}")
                check(r["total_output_tokens"] == grew["vllm:generation_tokens_total"] and
                      r["total_output_tokens"] == sum(q.expected_output_len for q in want),
                      f"{name}: vllm output tokens {r['total_output_tokens']} != server "
                      f"{grew['vllm:generation_tokens_total']} or the dataset's "
                      f"{sum(q.expected_output_len for q in want)}")
                print(f"{name}: {r['total_input_tokens']} input, {r['total_output_tokens']} "
                      f"output tokens on both sides")
        finally:
            stop_checked(s, check)
    return check.finish("test_vllm_bench")


if __name__ == "__main__":
    sys.exit(main())
