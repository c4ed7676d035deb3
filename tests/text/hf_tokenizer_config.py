#!/usr/bin/env python3
"""tokenizer_config.json's flags read as transformers reads them: 0 differences.

A small byte-level BPE trained with `tokenizers` is saved with each of four
post-processors (none, ByteLevel, BOS by TemplateProcessing, BOS and EOS by
TemplateProcessing) beside a tokenizer_config.json that sets add_bos_token,
add_eos_token and clean_up_tokenization_spaces to every mix of absent, true
and false, under several tokenizer_class names. For each pair transformers'
AutoTokenizer encodes (with and without special tokens) and decodes seeded
strings - ones with " ," and " 's", which the clean-up would rewrite - and
`radixkv tokenize --batch` must give the same ids and text.

The one mix radixkv refuses (clean_up_tokenization_spaces with
clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output)
must fail to load naming the field, and transformers must really rewrite
the text under it (else the refusal would be needless).

Runs under RKV_TORCH_PYTHON; exits 77 when unset.
Usage: hf_tokenizer_config.py RADIXKV [N_STRINGS]
"""
import itertools
import json
import logging
import os
import random
import subprocess
import sys
import tempfile
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from hf_tokenizer import run_batch  # noqa: E402
from venv_reexec import reexec_in_venv  # noqa: E402
from textgen import SPECIALS, make_string  # noqa: E402

# Classes that take tokenizer.json's pipeline as it is. transformers' model
# classes such as Qwen2Tokenizer rebuild the normalizer and pre-tokenizer from
# their own code (for a real Qwen2 model the same as its tokenizer.json, not
# for this test's GPT-2-shaped one), so they are left out.
CLASSES = [None, "PreTrainedTokenizerFast", "LlamaTokenizerFast", "GPT2Tokenizer"]
CLEANUP_BAIT = ["it 's fine , isn't it ?", "we 're here . you 've seen , i 'm sure !",
                "do n't say ' no ' ", "a , b . c ? d !"]


def build(tmp, corpus):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    bl = pre_tokenizers.ByteLevel
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = bl(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(corpus, trainers.BpeTrainer(
        vocab_size=800, special_tokens=SPECIALS, initial_alphabet=bl.alphabet(),
        show_progress=False))
    bos, eos = "<|begin_of_text|>", "<|endoftext|>"
    posts = {
        "none": None,
        "bytelevel": processors.ByteLevel(trim_offsets=False),
        "bos": processors.TemplateProcessing(
            single=f"{bos} $A", pair=f"{bos} $A {bos} $B",
            special_tokens=[(bos, tok.token_to_id(bos))]),
        "bos_eos": processors.TemplateProcessing(
            single=f"{bos} $A {eos}", pair=f"{bos} $A {eos} {bos} $B {eos}",
            special_tokens=[(bos, tok.token_to_id(bos)), (eos, tok.token_to_id(eos))]),
    }
    out = {}
    for name, post in posts.items():
        if post is not None:
            tok.post_processor = post
        d = os.path.join(tmp, name)
        os.makedirs(d)
        tok.save(os.path.join(d, "tokenizer.json"))
        if post is None:  # the saved file must really hold null
            with open(os.path.join(d, "tokenizer.json")) as f:
                assert json.load(f)["post_processor"] is None
        out[name] = d
    return out, bos, eos


def write_config(d, cfg):
    with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
        json.dump(cfg, f)


def main():
    reexec_in_venv("RKV_TORCH_PYTHON", __file__, "scripts/torch_venv.sh makes it")
    warnings.filterwarnings("ignore")
    import transformers
    from transformers import AutoTokenizer
    transformers.logging.set_verbosity_error()
    logging.disable(logging.WARNING)
    radixkv = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 100
    r = random.Random(40)
    corpus = [make_string(r) for _ in range(3000)] + CLEANUP_BAIT * 50
    strings = CLEANUP_BAIT + [make_string(r) for _ in range(n)]
    bad = pairs = checked = 0
    with tempfile.TemporaryDirectory() as tmp:
        dirs, bos, eos = build(tmp, corpus)
        flag = [None, True, False]
        for (post, d), ab, ae, cu in itertools.product(dirs.items(), flag, flag, flag):
            cfg = {"bos_token": bos, "eos_token": eos}
            cls = r.choice(CLASSES)
            if cls:
                cfg["tokenizer_class"] = cls
            for k, v in (("add_bos_token", ab), ("add_eos_token", ae),
                         ("clean_up_tokenization_spaces", cu)):
                if v is not None:
                    cfg[k] = v
            write_config(d, cfg)
            hf = AutoTokenizer.from_pretrained(d)
            adds = [r.random() < 0.5 for _ in strings]
            want = [hf.encode(s, add_special_tokens=a) for s, a in zip(strings, adds)]
            plain = [hf.encode(s, add_special_tokens=False) for s in strings]
            skips = [r.random() < 0.5 for _ in strings]
            dec = [hf.decode(ids, skip_special_tokens=k) for ids, k in zip(want, skips)]
            reqs = [{"text": s, "add_special_tokens": a} for s, a in zip(strings, adds)]
            reqs += [{"ids": ids, "skip_special_tokens": k} for ids, k in zip(want, skips)]
            got = run_batch(radixkv, d, reqs)
            for i, s in enumerate(strings):
                g, gd = got[i].get("ids"), got[len(strings) + i].get("text")
                if g != want[i] or gd != dec[i]:
                    bad += 1
                    if bad <= 10:
                        print(f"{post} {cfg}: {s!r} add_special_tokens={adds[i]}:\n"
                              f"  transformers {want[i]} {dec[i]!r}\n  radixkv      {g} {gd!r}")
            # the clean-up never applies to a BPE model unless forced
            if any(hf.decode(p) != hf.backend_tokenizer.decode(p, skip_special_tokens=False)
                   for p in plain):
                bad += 1
                print(f"{post} {cfg}: transformers rewrote decoded text; the test's premise broke")
            pairs += 1
            checked += len(strings)
        # The forced clean-up: transformers rewrites, radixkv refuses by name.
        d = dirs["none"]
        write_config(d, {"clean_up_tokenization_spaces": True,
                         "clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output":
                         True})
        hf = AutoTokenizer.from_pretrained(d)
        ids = hf.encode(CLEANUP_BAIT[0], add_special_tokens=False)
        if hf.decode(ids) == CLEANUP_BAIT[0]:
            bad += 1
            print("transformers did not rewrite under the forced clean-up")
        p = subprocess.run([radixkv, "tokenize", "--tokenizer", d, "--batch", "-"], input="",
                           capture_output=True, text=True)
        if p.returncode == 0 or "tokenizer_config.json: clean_up_tokenization_spaces:" not in \
                p.stderr:
            bad += 1
            print(f"forced clean-up: want a load error naming the field, got rc={p.returncode} "
                  f"{p.stderr!r}")
        for field, value in (("add_bos_token", "yes"), ("clean_up_tokenization_spaces", 1)):
            write_config(d, {field: value})
            p = subprocess.run([radixkv, "tokenize", "--tokenizer", d, "--batch", "-"],
                               input="", capture_output=True, text=True)
            if p.returncode == 0 or f"tokenizer_config.json: {field}: not true" not in p.stderr:
                bad += 1
                print(f"{field}={value!r}: want a load error naming the field, got "
                      f"rc={p.returncode} {p.stderr!r}")
    print(f"hf_tokenizer_config: {pairs} tokenizer/config pairs, {checked} strings encoded and "
          f"decoded, {bad} differences")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
