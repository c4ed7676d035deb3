#!/usr/bin/env python3
"""radixkv's tokenizer against Hugging Face `tokenizers`: 0 differences.

Trains small byte-level BPE tokenizers with `tokenizers` in the shapes real
models use - Qwen2 (NFC, its split regex, one digit per word), Llama-3 (no
normalizer, its regex, digits in threes, ignore_merges, BOS by a
TemplateProcessing post-processor) and GPT-2 (ByteLevel with its own regex,
with and without add_prefix_space) - each with special tokens and one
normalized added token, saves tokenizer.json, and has one `radixkv tokenize
--batch` process per tokenizer encode and decode a seeded corpus of generated
strings: Unicode of many scripts, emoji sequences, combining marks (which NFC
composes), digits of several scripts, code, whitespace runs, contractions,
control characters and special tokens inside text. Decoding is checked on the
ids of every string and on random id sequences (which cut UTF-8 sequences, so
the U+FFFD repair is compared too), with and without skip_special_tokens.

Every difference is printed (up to 10) and fails the test; the counts checked
are printed at the end. Runs under RKV_TORCH_PYTHON; exits 77 when unset.
Usage: hf_tokenizer.py RADIXKV [N_STRINGS_PER_TOKENIZER]
"""
import json
import os
import random
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from textgen import LLAMA3_RE, NORMALIZED_ADDED, QWEN2_RE, SPECIALS, make_string  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from venv_reexec import reexec_in_venv  # noqa: E402


# ------------------------------------------------------------ tokenizers

def build_tokenizers(outdir, corpus):
    from tokenizers import (AddedToken, Regex, Tokenizer, decoders, models, normalizers,
                            pre_tokenizers, processors, trainers)
    bl = pre_tokenizers.ByteLevel
    shapes = {
        "qwen2": dict(norm=normalizers.NFC(), pre=pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(QWEN2_RE), behavior="isolated", invert=False),
            bl(add_prefix_space=False, use_regex=False)]),
            post=processors.ByteLevel(trim_offsets=False), ignore_merges=False),
        "llama3": dict(norm=None, pre=pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(LLAMA3_RE), behavior="isolated", invert=False),
            bl(add_prefix_space=False, trim_offsets=True, use_regex=False)]),
            post="bos", ignore_merges=True),
        "gpt2": dict(norm=None, pre=bl(add_prefix_space=False), post=None, ignore_merges=False),
        "gpt2_prefix": dict(norm=None, pre=bl(add_prefix_space=True),
                            post=processors.ByteLevel(trim_offsets=True), ignore_merges=False),
    }
    dirs = {}
    for name, s in shapes.items():
        tok = Tokenizer(models.BPE(ignore_merges=s["ignore_merges"]))
        if s["norm"] is not None:
            tok.normalizer = s["norm"]
        tok.pre_tokenizer = s["pre"]
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(vocab_size=3000, min_frequency=2, special_tokens=SPECIALS,
                                      initial_alphabet=bl.alphabet(), show_progress=False)
        tok.train_from_iterator(corpus, trainer)
        tok.add_tokens([AddedToken(NORMALIZED_ADDED, normalized=True, special=False)])
        if s["post"] == "bos":
            tok.post_processor = processors.TemplateProcessing(
                single="<|begin_of_text|> $A", pair="<|begin_of_text|> $A <|begin_of_text|> $B",
                special_tokens=[("<|begin_of_text|>", tok.token_to_id("<|begin_of_text|>"))])
        elif s["post"] is not None:
            tok.post_processor = s["post"]
        d = os.path.join(outdir, name)
        os.makedirs(d)
        tok.save(os.path.join(d, "tokenizer.json"))
        dirs[name] = (d, Tokenizer.from_file(os.path.join(d, "tokenizer.json")))
    return dirs


def run_batch(radixkv, d, requests):
    inp = "".join(json.dumps(q) + "\n" for q in requests)
    p = subprocess.run([radixkv, "tokenize", "--tokenizer", d, "--batch", "-"], input=inp,
                       capture_output=True, text=True, encoding="utf-8", errors="surrogatepass")
    if p.returncode != 0:
        print(p.stderr, file=sys.stderr)
        raise SystemExit(f"radixkv tokenize --batch failed ({p.returncode}) for {d}")
    out = [json.loads(line) for line in p.stdout.splitlines()]
    if len(out) != len(requests):
        raise SystemExit(f"{d}: {len(out)} answers for {len(requests)} requests")
    return out


def main():
    reexec_in_venv("RKV_TORCH_PYTHON", __file__, "scripts/torch_venv.sh makes it")
    radixkv = sys.argv[1]
    per_tok = int(sys.argv[2]) if len(sys.argv) > 2 else 25000
    r = random.Random(20241128)
    corpus = [make_string(r) for _ in range(20000)]
    strings = [make_string(r) for _ in range(per_tok)]
    bad = 0
    checked_enc = checked_dec = 0
    with tempfile.TemporaryDirectory() as tmp:
        toks = build_tokenizers(tmp, corpus)
        for name, (d, hf) in toks.items():
            vocab = hf.get_vocab_size(with_added_tokens=True)
            adds = [r.random() < 0.5 for _ in strings]
            want = [e.ids for e in hf.encode_batch(strings, add_special_tokens=False)]
            want_sp = [e.ids for e in hf.encode_batch(strings, add_special_tokens=True)]
            id_seqs = [r.choices(range(vocab), k=r.randint(0, 12)) for _ in range(per_tok // 2)]
            id_seqs += want[: per_tok - len(id_seqs)]
            skips = [r.random() < 0.5 for _ in id_seqs]
            reqs = [{"text": s, "add_special_tokens": a} for s, a in zip(strings, adds)]
            reqs += [{"ids": ids, "skip_special_tokens": k} for ids, k in zip(id_seqs, skips)]
            got = run_batch(radixkv, d, reqs)
            for i, s in enumerate(strings):
                w = want_sp[i] if adds[i] else want[i]
                if got[i].get("ids") != w:
                    bad += 1
                    if bad <= 10:
                        print(f"{name}: encode({s!r}, add_special_tokens={adds[i]}):\n"
                              f"  tokenizers {w}\n  radixkv    {got[i].get('ids')}")
            checked_enc += len(strings)
            dec_want = [hf.decode(ids, skip_special_tokens=k) for ids, k in zip(id_seqs, skips)]
            for j, (ids, w) in enumerate(zip(id_seqs, dec_want)):
                g = got[len(strings) + j].get("text")
                if g != w:
                    bad += 1
                    if bad <= 10:
                        print(f"{name}: decode({ids}, skip_special_tokens={skips[j]}):\n"
                              f"  tokenizers {w!r}\n  radixkv    {g!r}")
            checked_dec += len(id_seqs)
    print(f"hf_tokenizer: {checked_enc} strings encoded, {checked_dec} id sequences decoded, "
          f"{len(toks)} tokenizers, {bad} differences")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
