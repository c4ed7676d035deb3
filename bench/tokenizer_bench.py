#!/usr/bin/env python3
"""Encode throughput on one thread: radixkv's tokenizer (bench/tokenizer_bench)
against Hugging Face `tokenizers` (Rust) and `tiktoken`, on the same
tokenizer and the same corpus. Prints one JSON line per implementation and a
summary line with the ratios to tokenizers (same run, medians of REPEAT).

The tokenizer is a byte-level BPE in Llama-3's shape (its split regex, digits
in threes, ignore_merges), trained here with `tokenizers` to --vocab tokens
on the corpus itself; tiktoken gets the same vocabulary (its ranks are the
ids, which are in merge order for a trained BPE) and the same regex. The
corpus: this repository's text files (C, Python, Markdown, LaTeX) and
seeded generated multilingual text (tests/text/textgen.py), one line each.

All three run on one thread: tokenizers with RAYON_NUM_THREADS=1 and
TOKENIZERS_PARALLELISM=false (encode_batch, so Python's per-call cost is
not counted against it), tiktoken with encode_ordinary_batch(num_threads=1).
Both hand the work to one worker thread, so their CPU time is the process's
(time.process_time: that thread and the idle caller); radixkv's is its thread's.
CPU time beside wall time; MB/s from the CPU time (a loaded machine stretches
wall time, not CPU time).

Usage (under the torch venv, scripts/torch_venv.sh):
  RKV_TORCH_PYTHON=... bench/tokenizer_bench.py --bench build/bench/tokenizer_bench \
      [--vocab 32000] [--repeat 5] [--generated 20000]
"""
import argparse
import glob
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["RAYON_RS_NUM_THREADS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "text"))
from textgen import LLAMA3_RE, make_string  # noqa: E402


def corpus(generated):
    texts = []
    for pat in ["**/*.c", "**/*.h", "**/*.py", "**/*.md", "**/*.tex"]:
        for p in sorted(glob.glob(os.path.join(ROOT, pat), recursive=True)):
            if "/build" in p[len(ROOT):]:
                continue
            with open(p, encoding="utf-8", errors="replace") as f:
                texts += [line for line in f.read().split("\n\n") if line.strip()]
    r = random.Random(7)
    texts += [make_string(r) for _ in range(generated)]
    return texts


def stats(v):
    return {"median": statistics.median(v), "min": min(v), "max": max(v)}


def timed(fn, repeat):
    cpu, wall = [], []
    out = None
    for _ in range(repeat):
        c0, w0 = time.process_time(), time.perf_counter()
        out = fn()
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - w0)
    return out, cpu, wall


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", required=True, help="build/bench/tokenizer_bench")
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--generated", type=int, default=20000)
    a = ap.parse_args()
    import tiktoken
    import tokenizers
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    texts = corpus(a.generated)
    nbytes = sum(len(t.encode()) for t in texts)
    tok = Tokenizer(models.BPE(ignore_merges=True))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_RE), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(texts, trainers.BpeTrainer(
        vocab_size=a.vocab, show_progress=False, special_tokens=["<|begin_of_text|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        tok.save(os.path.join(tmp, "tokenizer.json"))
        with open(os.path.join(tmp, "corpus.jsonl"), "w", encoding="utf-8") as f:
            for t in texts:
                f.write(json.dumps({"text": t}) + "\n")
        p = subprocess.run([a.bench, tmp, os.path.join(tmp, "corpus.jsonl"), str(a.repeat)],
                           capture_output=True, text=True, check=True)
        results.append(json.loads(p.stdout))
    hf_ids, cpu, wall = timed(lambda: tok.encode_batch(texts, add_special_tokens=False), a.repeat)
    ntok = sum(len(e.ids) for e in hf_ids)
    results.append({"bench": "tokenizer", "impl": "tokenizers " + tokenizers.__version__,
                    "texts": len(texts), "bytes": nbytes, "tokens": ntok, "threads": 1,
                    "repeat": a.repeat, "cpu_s": stats(cpu), "wall_s": stats(wall),
                    "mb_per_s_cpu": {k: nbytes / 1e6 / v for k, v in
                                     [("median", statistics.median(cpu)), ("min", max(cpu)),
                                      ("max", min(cpu))]}})
    # tiktoken on the same vocabulary: bytes of each token, rank = id
    byte_of = {}
    keep = [b for b in range(256) if 33 <= b <= 126 or 161 <= b <= 172 or b >= 174]
    extra = 0
    for b in range(256):
        if b in keep:
            byte_of[chr(b)] = b
        else:
            byte_of[chr(256 + extra)] = b
            extra += 1
    ranks = {bytes(byte_of[c] for c in s): i for s, i in tok.get_vocab(with_added_tokens=False).items()}
    enc = tiktoken.Encoding("radixkv-bench", pat_str=LLAMA3_RE, mergeable_ranks=ranks,
                            special_tokens={})
    tk_ids, cpu, wall = timed(lambda: enc.encode_ordinary_batch(texts, num_threads=1), a.repeat)
    same = sum(x == e.ids for x, e in zip(tk_ids, hf_ids))
    results.append({"bench": "tokenizer", "impl": "tiktoken " + tiktoken.__version__,
                    "texts": len(texts), "bytes": nbytes, "tokens": sum(map(len, tk_ids)),
                    "threads": 1, "repeat": a.repeat, "cpu_s": stats(cpu), "wall_s": stats(wall),
                    "mb_per_s_cpu": {k: nbytes / 1e6 / v for k, v in
                                     [("median", statistics.median(cpu)), ("min", max(cpu)),
                                      ("max", min(cpu))]},
                    "texts_equal_to_tokenizers": same})
    for r in results:
        print(json.dumps(r))
    base = results[1]["mb_per_s_cpu"]["median"]
    print(json.dumps({"bench": "tokenizer_summary", "vocab": a.vocab, "bytes": nbytes,
                      "tokens_equal": results[0]["tokens"] == ntok,
                      "mb_per_s_cpu_median": {r["impl"]: round(r["mb_per_s_cpu"]["median"], 3)
                                              for r in results},
                      "ratio_to_tokenizers": {r["impl"]: round(r["mb_per_s_cpu"]["median"] / base, 3)
                                              for r in results}}))


if __name__ == "__main__":
    main()
