#!/usr/bin/env python3
"""radixkv's built-in chat template renderers against transformers'
apply_chat_template: 0 differences.

For each known template (tests/text/templates/: Qwen2.5, Llama-3, Llama-3.1,
Llama-3.2 - the models' own texts; 3.2 dates its system block today), a
tokenizer directory holds a small byte-level BPE trained here and a
tokenizer_config.json with that template, bos_token and eos_token.
transformers renders >= 1,000 generated conversations per template (system
prompt or not, user/assistant turns, a system message later on, other
roles, contents with whitespace at their ends, special tokens, empty
contents; add_generation_prompt on and off); one `radixkv tokenize --batch`
process renders and tokenizes the same conversations. Text and ids must be
equal (ids: apply_chat_template(tokenize=True), which adds no special
tokens). Also checks the (hash, length) pairs radixkv knows the templates by
and that an edited template is refused by name.

Runs under RKV_TORCH_PYTHON; exits 77 when unset.
Usage: hf_chat_template.py RADIXKV TEMPLATES_DIR [N_PER_TEMPLATE]
"""
import json
import os
import random
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from venv_reexec import reexec_in_venv  # noqa: E402
from textgen import LLAMA3_RE, SPECIALS, make_string  # noqa: E402

TEMPLATES = ["qwen2.5", "llama-3", "llama-3.1", "llama-3.2"]


def train(corpus):
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE(ignore_merges=True))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_RE), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(corpus, trainers.BpeTrainer(
        vocab_size=2000, special_tokens=SPECIALS, show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    return tok


def conversation(r):
    msgs = []
    if r.random() < 0.6:
        msgs.append({"role": "system", "content": make_string(r)})
    turns = r.randint(1, 5)
    for t in range(turns):
        k = r.random()
        if k < 0.05:
            msgs.append({"role": "system", "content": make_string(r)})
        elif k < 0.09:
            msgs.append({"role": r.choice(["developer", "narrator"]), "content": make_string(r)})
        msgs.append({"role": "user", "content": make_string(r)})
        if t < turns - 1 or r.random() < 0.3:
            c = make_string(r)
            if r.random() < 0.2:
                c = r.choice([" ", "\n"]) + c + r.choice(["  \n", "\t", "\u3000", "\x1f"])
            msgs.append({"role": "assistant", "content": c})
    return msgs


def fnv1a64(text):
    b = text.encode()
    if b.endswith(b"\n"):
        b = b[:-1]
    h = 1469598103934665603
    for c in b:
        h = ((h ^ c) * 1099511628211) & (2 ** 64 - 1)
    return h, len(b)


def main():
    reexec_in_venv("RKV_TORCH_PYTHON", __file__, "scripts/torch_venv.sh makes it")
    from transformers import PreTrainedTokenizerFast
    radixkv, tdir = sys.argv[1], sys.argv[2]
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 1000
    r = random.Random(20241129)
    hf_tok = train([make_string(r) for _ in range(3000)])
    bad = checked = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name in TEMPLATES:
            with open(os.path.join(tdir, name + ".jinja"), encoding="utf-8") as f:
                text = f.read()
            d = os.path.join(tmp, name)
            os.makedirs(d)
            hf_tok.save(os.path.join(d, "tokenizer.json"))
            cfg = {"chat_template": text, "bos_token": "<|begin_of_text|>",
                   "eos_token": "<|eot_id|>" if name.startswith("llama") else "<|im_end|>"}
            with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as f:
                json.dump(cfg, f)
            tf = PreTrainedTokenizerFast(tokenizer_file=os.path.join(d, "tokenizer.json"),
                                         bos_token=cfg["bos_token"], eos_token=cfg["eos_token"])
            tf.chat_template = text
            convs = [conversation(r) for _ in range(n)]
            agps = [r.random() < 0.7 for _ in convs]
            reqs = [{"messages": m, "add_generation_prompt": a} for m, a in zip(convs, agps)]
            # llama-3.2 writes today's date: a run across midnight compares two days
            day = time.strftime("%d %b %Y")
            p = subprocess.run([radixkv, "tokenize", "--tokenizer", d, "--batch", "-"],
                               input="".join(json.dumps(q) + "\n" for q in reqs),
                               capture_output=True, text=True, encoding="utf-8")
            if p.returncode != 0:
                print(p.stderr)
                return 1
            got = [json.loads(line) for line in p.stdout.splitlines()]
            if len(got) != len(reqs):
                print(f"{name}: {len(got)} answers for {len(reqs)} conversations")
                return 1
            for m, a, g in zip(convs, agps, got):
                want = tf.apply_chat_template(m, tokenize=False, add_generation_prompt=a)
                if day != time.strftime("%d %b %Y"):
                    print(f"{name}: the date changed while comparing; run the test again")
                    return 77
                want_ids = hf_tok.encode(want, add_special_tokens=False).ids
                if g["text"] != want or g["ids"] != want_ids:
                    bad += 1
                    if bad <= 5:
                        print(f"{name}: {json.dumps(m)[:400]} agp={a}\n  transformers {want!r}\n"
                              f"  radixkv      {g['text']!r}\n  ids equal: {g['ids'] == want_ids}")
                checked += 1
            # an edited template is refused by name, with its hash
            edited = text.replace("<|im_start|>", "<|im_begin|>").replace("eot_id", "eot")
            with open(os.path.join(d, "edited.jinja"), "w", encoding="utf-8") as f:
                f.write(edited)
            p = subprocess.run([radixkv, "tokenize", "--tokenizer", d, "--chat-template",
                                os.path.join(d, "edited.jinja"), "--batch", "-"],
                               input=json.dumps(reqs[0]) + "\n", capture_output=True, text=True)
            h, ln = fnv1a64(edited)
            if p.returncode != 1 or "unknown chat template" not in p.stderr or \
                    f"{h:016x}" not in p.stderr or "edited.jinja" not in p.stderr:
                print(f"{name}: an edited template was not refused by name: rc {p.returncode}, "
                      f"{p.stderr!r}")
                bad += 1
    print(f"hf_chat_template: {checked} conversations over {len(TEMPLATES)} templates, "
          f"{bad} differences")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
