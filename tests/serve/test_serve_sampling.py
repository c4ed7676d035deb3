#!/usr/bin/env python3
"""n > 1, logprobs, echo, stop strings, penalties and min_tokens of `radixkv serve`
(standard library only).

logprobs are checked against the cpu model's own logits: this test writes a
small Llama checkpoint (config.json + model.safetensors, seeded weights), serves
it, and recomputes the last-token logits of prompt + outputs[:t] with
tests/runtime/model_logits on the same files; the served token_logprobs and
top_logprobs must equal log_softmax of those (|diff| <= 1e-4). Penalties and
min_tokens and bad_words: greedy answers equal vLLM's formulas applied to
those logits. prompt_logprobs and echo with logprobs: the prompt tokens'
logprobs equal log_softmax of the logits of the rows before them.
n > 1: the samples of one prompt share its pages (each sample after the first
finds the prompt's full pages cached) and differ under sampling.
Usage: test_serve_sampling.py PATH/TO/radixkv PATH/TO/model_logits [PART...]"""
import json
import math
import os
import random
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
from serve_util import Server, check  # noqa: E402

RADIXKV, MODEL_LOGITS = sys.argv[1], sys.argv[2]
TOL = 1e-4
CFG = dict(architectures=["LlamaForCausalLM"], model_type="llama", vocab_size=160,
           hidden_size=128, intermediate_size=160, num_hidden_layers=2, num_attention_heads=2,
           num_key_value_heads=1, head_dim=64, max_position_embeddings=512, rms_norm_eps=1e-5,
           rope_theta=10000.0, tie_word_embeddings=False, hidden_act="silu",
           torch_dtype="float32")


def write_model(d):
    """config.json + model.safetensors (float32) with unit-scale activations."""
    rng = random.Random(20251125)
    C, F, V = CFG["hidden_size"], CFG["intermediate_size"], CFG["vocab_size"]
    QD = CFG["num_attention_heads"] * CFG["head_dim"]
    KD = CFG["num_key_value_heads"] * CFG["head_dim"]
    shapes = {"model.embed_tokens.weight": (V, C), "model.norm.weight": (C,),
              "lm_head.weight": (V, C)}
    for layer in range(CFG["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        shapes.update({p + "input_layernorm.weight": (C,), p + "post_attention_layernorm.weight": (C,),
                       p + "self_attn.q_proj.weight": (QD, C), p + "self_attn.k_proj.weight": (KD, C),
                       p + "self_attn.v_proj.weight": (KD, C), p + "self_attn.o_proj.weight": (C, QD),
                       p + "mlp.gate_proj.weight": (F, C), p + "mlp.up_proj.weight": (F, C),
                       p + "mlp.down_proj.weight": (C, F)})
    header, blobs, off = {}, [], 0
    for name, shape in shapes.items():
        n = math.prod(shape)
        if name.endswith("norm.weight"):
            vals = [1.0 + 0.1 * rng.gauss(0, 1) for _ in range(n)]
        elif "embed_tokens" in name or name.startswith("lm_head"):
            vals = [rng.gauss(0, 1) * 2.0 / shape[1] ** 0.5 for _ in range(n)]
        else:
            vals = [rng.gauss(0, 1) / shape[1] ** 0.5 for _ in range(n)]
        blob = struct.pack(f"<{n}f", *vals)
        header[name] = {"dtype": "F32", "shape": list(shape), "data_offsets": [off, off + len(blob)]}
        blobs.append(blob)
        off += len(blob)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(os.path.join(d, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(CFG, f)


def model_logprobs(d, prompts):
    """log_softmax of the cpu model's last-token logits, per prompt."""
    req = os.path.join(d, "requests.json")
    with open(req, "w") as f:
        json.dump([{"tokens": p, "prefix": 0} for p in prompts], f)
    out = subprocess.run([MODEL_LOGITS, d, req], capture_output=True, text=True, timeout=300)
    check(out.returncode == 0, f"model_logits: {out.stderr}")
    res = []
    for line in out.stdout.splitlines():
        lg = json.loads(line)["logits"]
        m = max(lg)
        lse = m + math.log(sum(math.exp(x - m) for x in lg))
        res.append([x - lse for x in lg])
    check(len(res) == len(prompts), f"model_logits gave {len(res)} rows")
    return res


def logprobs(d):
    s = Server(RADIXKV, "--model", d, "--max-logprobs", "5", "--page-size", "4",
               "--model-name", "m")
    try:
        p = [(i * 37 + 11) % 160 for i in range(13)]
        for body in [{"temperature": 0}, {"temperature": 1.0, "seed": 3}]:
            st, r, _ = s.post(dict(body, prompt=p, max_tokens=4, logprobs=5))
            check(st == 200, f"{st} {r}")
            ch = r["choices"][0]
            out, lp = ch["token_ids"], ch["logprobs"]
            check(lp["tokens"] == [f"token_id:{t}" for t in out] and len(lp["top_logprobs"]) == 4,
                  f"logprobs shape: {lp}")
            ref = model_logprobs(d, [p + out[:t] for t in range(len(out))])
            for t, tok in enumerate(out):
                check(abs(lp["token_logprobs"][t] - ref[t][tok]) <= TOL,
                      f"{body} token {t}: {lp['token_logprobs'][t]} vs model {ref[t][tok]}")
                best = sorted(range(160), key=lambda v: (-ref[t][v], v))[:5]
                got = lp["top_logprobs"][t]
                want = {f"token_id:{v}": ref[t][v] for v in best + [tok]}
                check(set(got) == set(want) and all(abs(got[k] - want[k]) <= TOL for k in want),
                      f"{body} top_logprobs {t}: {got} vs {want}")
                if body["temperature"] == 0:
                    check(tok == best[0], f"greedy token {tok} is not the model's argmax {best[0]}")
        # The stream carries the same numbers, one token per chunk.
        st, events, done = s.stream({"prompt": p, "max_tokens": 4, "logprobs": 2, "temperature": 0})
        streamed = [e["choices"][0]["logprobs"]["token_logprobs"][0] for e in events if e["choices"]]
        st, r, _ = s.post({"prompt": p, "max_tokens": 4, "logprobs": 2, "temperature": 0})
        check(done and streamed == r["choices"][0]["logprobs"]["token_logprobs"],
              f"stream logprobs {streamed} vs {r['choices'][0]['logprobs']}")
        # logprobs 0: the sampled token's alone.
        st, r, _ = s.post({"prompt": p, "max_tokens": 3, "logprobs": 0, "temperature": 0})
        lp0 = r["choices"][0]["logprobs"]
        check(st == 200 and [list(t) for t in lp0["top_logprobs"]] == [[k] for k in lp0["tokens"]],
              f"logprobs 0: {lp0}")
        st, r, _ = s.post({"prompt": p, "max_tokens": 2, "logprobs": 6})
        check(st == 400 and "--max-logprobs" in r["error"]["message"], f"logprobs 6: {r}")
    finally:
        s.kill()
    s = Server(RADIXKV, "--page-size", "4")
    try:
        st, r, _ = s.post({"prompt": [1, 2], "max_tokens": 2, "logprobs": 1})
        check(st == 400 and "--max-logprobs" in r["error"]["message"], f"no --max-logprobs: {r}")
    finally:
        s.kill()


def samples():
    s = Server(RADIXKV, "--page-size", "4", "--num-pages", "256", "--max-running", "8")
    try:
        p = [(i * 53 + 7) % 4000 + 1 for i in range(26)]
        st, r, _ = s.post({"prompt": p, "max_tokens": 5, "n": 4, "temperature": 1.0, "seed": 11})
        check(st == 200 and [c["index"] for c in r["choices"]] == [0, 1, 2, 3], f"n=4: {r}")
        outs = [tuple(c["token_ids"]) for c in r["choices"]]
        check(len(set(outs)) > 1, f"four samples alike: {outs}")
        # Samples 1..3 find the prompt's 6 full pages (24 tokens) cached; usage
        # counts the prompt once and its cached tokens as the samples found most.
        check(r["usage"]["prompt_tokens"] == 26 and
              r["usage"]["prompt_tokens_details"]["cached_tokens"] == 24, f"usage: {r['usage']}")
        # Sample 0 is what n = 1 gives with the same seed.
        st, one, _ = s.post({"prompt": p, "max_tokens": 5, "temperature": 1.0, "seed": 11})
        check(tuple(one["choices"][0]["token_ids"]) == outs[0], f"sample 0 {outs[0]} vs n=1 {one}")
        # Two prompts x n = 2: choices i*n + k; greedy samples are equal.
        q = [5, 6, 7, 8, 9]
        st, r, _ = s.post({"prompt": [p, q], "max_tokens": 3, "n": 2, "temperature": 0})
        ids = [c["token_ids"] for c in r["choices"]]
        check(st == 200 and len(ids) == 4 and ids[0] == ids[1] and ids[2] == ids[3], f"{ids}")
        st, events, done = s.stream({"prompt": p, "max_tokens": 3, "n": 3, "temperature": 0})
        per = {}
        for e in events:
            for c in e["choices"]:
                per.setdefault(c["index"], []).extend(c["token_ids"])
        check(done and sorted(per) == [0, 1, 2] and per[0] == per[1] == per[2], f"stream n=3: {per}")
        # More sequences than the server ever holds (8 + 1024): 400 naming n.
        st, r, _ = s.post({"prompt": [[1, 2]] * 9, "max_tokens": 1, "n": 128})
        check(st == 400 and r["error"]["param"] == "n", f"9 x 128: {r}")
        for bad, param in [({"n": 0}, "n"), ({"n": 129}, "n"), ({"n": 2, "best_of": 3}, "best_of")]:
            st, r, _ = s.post(dict(bad, prompt=[1, 2], max_tokens=1))
            check(st == 400 and r["error"]["param"] == param, f"{bad}: {r}")
        m = s.wait_idle()
        check(m["radixkv:page_accounting_ok"] == 1, f"accounting: {m}")
        rc, summary = s.stop()
        check(rc == 0 and summary["pages_inflight"] == 0, f"exit {rc}: {summary}")
    finally:
        s.kill()


def echo_and_stop():
    s = Server(RADIXKV, "--tokenizer", "ids", "--page-size", "4")
    try:
        st, r, _ = s.post({"prompt": "5 6 7", "max_tokens": 8, "temperature": 0})
        base = r["choices"][0]
        out = base["token_ids"]
        check(base["text"] == "".join(f" {t}" for t in out), f"text: {base}")
        st, r, _ = s.post({"prompt": "5 6 7", "max_tokens": 8, "temperature": 0, "echo": True})
        ch = r["choices"][0]
        check(ch["text"] == " 5 6 7" + base["text"] and ch["prompt_token_ids"] == [5, 6, 7]
              and ch["token_ids"] == out, f"echo: {ch}")
        st, events, done = s.stream({"prompt": "5 6 7", "max_tokens": 8, "temperature": 0,
                                     "echo": True})
        text = "".join(c["text"] for e in events for c in e["choices"])
        check(done and text == " 5 6 7" + base["text"], f"stream echo: {text!r}")
        # A stop string across two tokens: the text ends before it, the ids
        # with the token that completed it; stop_reason names it.
        stop = f"{out[2]} {str(out[3])[:1]}"
        first = base["text"].find(stop)
        ends = [len("".join(f" {t}" for t in out[:i + 1])) for i in range(len(out))]
        last = next(i for i, e in enumerate(ends) if e >= first + len(stop))
        st, r, _ = s.post({"prompt": "5 6 7", "max_tokens": 8, "temperature": 0,
                           "stop": ["999999", stop]})
        ch = r["choices"][0]
        check(ch["finish_reason"] == "stop" and ch["stop_reason"] == stop
              and ch["text"] == base["text"][:first] and ch["token_ids"] == out[:last + 1],
              f"stop {stop!r}: {ch}")
        st, r, _ = s.post({"prompt": "5 6 7", "max_tokens": 2, "stop": "1", "stream": True})
        check(st == 400 and r["error"]["param"] == "stop", f"stop + stream: {r}")
    finally:
        s.kill()
    s = Server(RADIXKV)
    try:
        st, r, _ = s.post({"prompt": [1, 2], "max_tokens": 2, "stop": ["x"]})
        check(st == 400 and "--tokenizer ids" in r["error"]["message"], f"stop, no tokenizer: {r}")
        st, r, _ = s.post({"prompt": [1, 2], "max_tokens": 2, "stop": [""]})
        check(st == 200, f"empty stop string: {r}")
    finally:
        s.kill()


def model_logits(d, prompt):
    """The cpu model's raw last-token logits of one prompt."""
    req = os.path.join(d, "requests.json")
    with open(req, "w") as f:
        json.dump([{"tokens": prompt, "prefix": 0}], f)
    out = subprocess.run([MODEL_LOGITS, d, req], capture_output=True, text=True, timeout=300)
    check(out.returncode == 0, f"model_logits: {out.stderr}")
    return json.loads(out.stdout.splitlines()[0])["logits"]


def predict_greedy(d, prompt, n, rep=1.0, freq=0.0, pres=0.0, min_tokens=0, stop_ids=()):
    """Greedy outputs as vLLM's sampler makes them: stop ids at -inf while
    fewer than min_tokens outputs, then repetition (prompt + outputs),
    frequency and presence (outputs) penalties, then argmax (lowest id on
    ties); stops after a stop id."""
    out = []
    while len(out) < n:
        lg = model_logits(d, prompt + out)
        if len(out) < min_tokens:
            for t in stop_ids:
                lg[t] = -math.inf
        seen = set(prompt) | set(out)
        for v in range(len(lg)):
            if v in seen:
                lg[v] = lg[v] / rep if lg[v] > 0 else lg[v] * rep
            c = out.count(v)
            lg[v] -= freq * c + (pres if c else 0.0)
        out.append(max(range(len(lg)), key=lambda v: (lg[v], -v)))
        if out[-1] in stop_ids:
            break
    return out


def penalties(d):
    """repetition/frequency/presence penalties and min_tokens change greedy
    answers as vLLM's formulas over the model's own logits predict."""
    s = Server(RADIXKV, "--model", d, "--page-size", "4", "--model-name", "m")
    try:
        p = [(i * 37 + 11) % 160 for i in range(13)]
        n = 6
        st, r, _ = s.post({"prompt": p, "max_tokens": n, "temperature": 0})
        plain = r["choices"][0]["token_ids"]
        check(plain == predict_greedy(d, p, n), f"plain greedy {plain}")
        predicted = []
        for body in [{"repetition_penalty": 3.0}, {"repetition_penalty": 0.5},
                     {"frequency_penalty": 2.0}, {"presence_penalty": 2.0},
                     {"repetition_penalty": 1.5, "frequency_penalty": 0.5, "presence_penalty": -1.0}]:
            want = predict_greedy(d, p, n, rep=body.get("repetition_penalty", 1.0),
                                  freq=body.get("frequency_penalty", 0.0),
                                  pres=body.get("presence_penalty", 0.0))
            st, r, _ = s.post(dict(body, prompt=p, max_tokens=n, temperature=0))
            check(st == 200 and r["choices"][0]["token_ids"] == want,
                  f"{body}: {st} {r} vs predicted {want}")
            predicted.append((body, want))
            # Sampled with a seed the same request repeats itself exactly.
            st2, r2, _ = s.post(dict(body, prompt=p, max_tokens=n, temperature=0.8, seed=4))
            st3, r3, _ = s.post(dict(body, prompt=p, max_tokens=n, temperature=0.8, seed=4))
            check(st2 == 200 and r2["choices"][0]["token_ids"] == r3["choices"][0]["token_ids"],
                  f"{body} seeded: {r2} vs {r3}")
        # A penalty that changes nothing would make this test unable to fail.
        check(predict_greedy(d, p, n, pres=2.0) != plain or
              predict_greedy(d, p, n, rep=3.0) != plain, "the penalties leave this prompt's answer alone")
        # min_tokens holds back the stop ids: without it the first token ends
        # the answer; with min_tokens 3 it cannot come before the third.
        stop = plain[0]
        st, r, _ = s.post({"prompt": p, "max_tokens": n, "temperature": 0, "stop_token_ids": [stop]})
        check(st == 200 and r["choices"][0]["token_ids"] == [stop], f"stop at once: {r}")
        want = predict_greedy(d, p, n, min_tokens=3, stop_ids=[stop])
        st, r, _ = s.post({"prompt": p, "max_tokens": n, "temperature": 0, "stop_token_ids": [stop],
                           "min_tokens": 3})
        got = r["choices"][0]["token_ids"]
        check(st == 200 and got == want and len(got) >= 3 and stop not in got[:3],
              f"min_tokens 3: {r} vs predicted {want}")
        for bad in [{"repetition_penalty": 0}, {"frequency_penalty": 2.5},
                    {"presence_penalty": -3}, {"min_tokens": n + 1}, {"min_tokens": -1}]:
            st, r, _ = s.post(dict({"prompt": p, "max_tokens": n}, **bad))
            check(st == 400 and r["error"]["param"] == next(iter(bad)), f"{bad}: {st} {r}")
    finally:
        s.kill()
    # The overlap schedule builds a step while the one before is in flight:
    # the sampler must still see every output before the one it samples.
    s = Server(RADIXKV, "--model", d, "--page-size", "4", "--model-name", "m",
               "--schedule", "overlap")
    try:
        for body, want in predicted:
            st, r, _ = s.post(dict(body, prompt=p, max_tokens=n, temperature=0))
            check(st == 200 and r["choices"][0]["token_ids"] == want,
                  f"overlap {body}: {st} {r} vs predicted {want}")
    finally:
        s.kill()
    # The sim backend has no logits: penalties are refused by name there.
    s = Server(RADIXKV, "--backend", "sim")
    try:
        for f, v in [("repetition_penalty", 1.2), ("frequency_penalty", 0.5),
                     ("presence_penalty", 0.5)]:
            st, r, _ = s.post({"prompt": [5, 6], "max_tokens": 2, f: v})
            check(st == 400 and r["error"]["param"] == f and "sim" in r["error"]["message"],
                  f"{f} on sim: {st} {r}")
        st, r, _ = s.post({"prompt": [5, 6], "max_tokens": 2, "min_tokens": 1, "stop_token_ids": [3]})
        check(st == 400 and r["error"]["param"] == "min_tokens", f"min_tokens on sim: {st} {r}")
    finally:
        s.kill()


def predict_bad_words(d, prompt, n, words):
    """Greedy outputs under vLLM's apply_bad_words: a word (ids) bans its
    last id when the outputs (not the prompt) end with the ids before it."""
    out = []
    while len(out) < n:
        lg = model_logits(d, prompt + out)
        for w in words:
            if len(w) - 1 <= len(out) and (len(w) == 1 or out[len(out) - (len(w) - 1):] == w[:-1]):
                lg[w[-1]] = -math.inf
        out.append(max(range(len(lg)), key=lambda v: (lg[v], -v)))
    return out


def bad_words(d):
    """bad_words (with --tokenizer ids: a word is decimal ids) change greedy
    answers as vLLM's bad-words processor over the model's logits predicts."""
    s = Server(RADIXKV, "--model", d, "--page-size", "4", "--model-name", "m",
               "--tokenizer", "ids")
    try:
        p = [(i * 37 + 11) % 160 for i in range(13)]
        n = 6
        st, r, _ = s.post({"prompt": p, "max_tokens": n, "temperature": 0})
        plain = r["choices"][0]["token_ids"]
        cases = [[str(plain[0])],                        # one id: never sampled
                 [f"{plain[0]} {plain[1]}"],              # plain[1] never right after plain[0]
                 [f" {plain[2]}  {plain[3]}", f"{plain[0]} {plain[1]}", f"{plain[0]} {plain[1]}"],
                 [f"{p[-1]} {plain[0]}"]]                 # the prompt's tail does not count
        for words in cases:
            ids = [[int(x) for x in w.split()] for w in words]
            want = predict_bad_words(d, p, n, ids)
            st, r, _ = s.post({"prompt": p, "max_tokens": n, "temperature": 0, "bad_words": words})
            check(st == 200 and r["choices"][0]["token_ids"] == want,
                  f"bad_words {words}: {st} {r} vs predicted {want}")
            # The same through the overlap of a stream (one token per chunk).
            st, ev, done = s.stream({"prompt": p, "max_tokens": n, "temperature": 0,
                                     "bad_words": words})
            got = [t for e in ev if e["choices"] for t in e["choices"][0]["token_ids"]]
            check(done and got == want, f"streamed bad_words {words}: {got} vs {want}")
        # A ban that changes nothing would make this test unable to fail.
        check(predict_bad_words(d, p, n, [[plain[0], plain[1]]]) != plain
              and predict_bad_words(d, p, n, [[p[-1], plain[0]]]) == plain,
              "the bad words leave this prompt's answer alone")
        for bad, why in [(["x"], "character"), ([""], "empty"), (["  "], "no token"),
                         ("5", "list"), ([5], "string"), (["5 999"], "vocabulary"),
                         ([str(i) for i in range(129)], "at most 128")]:
            st, r, _ = s.post({"prompt": p, "max_tokens": 2, "bad_words": bad})
            check(st == 400 and r["error"]["param"] == "bad_words" and why in r["error"]["message"],
                  f"bad_words {bad!r}: {st} {r}")
    finally:
        s.kill()
    # Words need a tokenizer; the sim backend has no logits: refused by name.
    for args, why in [(("--model", d, "--page-size", "4"), "tokenizer"),
                      (("--backend", "sim", "--tokenizer", "ids"), "sim")]:
        s = Server(RADIXKV, *args)
        try:
            st, r, _ = s.post({"prompt": [5, 6], "max_tokens": 2, "bad_words": ["5"]})
            check(st == 400 and r["error"]["param"] == "bad_words" and why in r["error"]["message"],
                  f"bad_words with {args}: {st} {r}")
            st, r, _ = s.post({"prompt": [5, 6], "max_tokens": 2, "bad_words": []})
            check(st == 200, f"bad_words [] with {args}: {st} {r}")
        finally:
            s.kill()


def check_prompt_entry(where, got, ref_row, tok, k):
    """vLLM's prompt_logprobs entry: the token and the k most likely ids, each
    {logprob, rank, decoded_token}; the token's rank counts ids at least as likely."""
    best = sorted(range(len(ref_row)), key=lambda v: (-ref_row[v], v))[:k]
    check(set(got) == {str(v) for v in best + [tok]}, f"{where}: ids {sorted(got)} vs {best} + {tok}")
    check(next(iter(got)) == str(tok), f"{where}: the prompt token is not first: {got}")
    for v in best + [tok]:
        e = got[str(v)]
        check(abs(e["logprob"] - ref_row[v]) <= TOL and e["decoded_token"] is None,
              f"{where} id {v}: {e} vs model {ref_row[v]}")
    for i, v in enumerate(best):
        check(got[str(v)]["rank"] == i + 1, f"{where}: top id {v} rank {got[str(v)]['rank']}")
    if tok not in best:
        rank = sum(x >= ref_row[tok] for x in ref_row)
        check(got[str(tok)]["rank"] == rank, f"{where}: token rank {got[str(tok)]} vs {rank}")


def prompt_logprobs(d):
    """prompt_logprobs and echo with logprobs: the prompt tokens' logprobs
    equal log_softmax of the model's logits of the rows before them, in
    vLLM's shapes, whether the prompt is cached or not."""
    s = Server(RADIXKV, "--model", d, "--max-logprobs", "5", "--page-size", "4",
               "--model-name", "m")
    try:
        p = [(i * 37 + 11) % 160 for i in range(13)]
        ref = model_logprobs(d, [p[:t] for t in range(1, len(p))])  # ref[t - 1]: token t
        # Cached first: the prompt logprobs must not come from a skipped prefix.
        st, plain, _ = s.post({"prompt": p, "max_tokens": 3, "logprobs": 2, "temperature": 0})
        check(st == 200, f"{st} {plain}")
        st, r, _ = s.post({"prompt": p, "max_tokens": 3, "temperature": 0, "prompt_logprobs": 3,
                           "n": 2})
        check(st == 200 and len(r["choices"]) == 2, f"prompt_logprobs: {st} {r}")
        for ch in r["choices"]:
            pl = ch["prompt_logprobs"]
            check(len(pl) == len(p) and pl[0] is None, f"prompt_logprobs shape: {pl}")
            for t in range(1, len(p)):
                check_prompt_entry(f"prompt_logprobs[{t}]", pl[t], ref[t - 1], p[t], 3)
        check(r["choices"][0]["token_ids"] == plain["choices"][0]["token_ids"]
              and r["usage"]["prompt_tokens_details"]["cached_tokens"] == 0,
              f"prompt_logprobs changed the answer or matched the cache: {r} vs {plain}")
        # echo + logprobs: the prompt's entries lead the arrays (vLLM's
        # dict {token, top-k} cut to logprobs + 1 entries), then the outputs'.
        st, r, _ = s.post({"prompt": p, "max_tokens": 3, "logprobs": 2, "temperature": 0,
                           "echo": True})
        ch = r["choices"][0]
        lp, out = ch["logprobs"], plain["choices"][0]["logprobs"]
        check(st == 200 and lp["tokens"] == [f"token_id:{t}" for t in p] + out["tokens"]
              and lp["token_logprobs"][0] is None and lp["top_logprobs"][0] is None
              and lp["token_logprobs"][len(p):] == out["token_logprobs"]
              and lp["top_logprobs"][len(p):] == out["top_logprobs"]
              and len(ch["prompt_logprobs"]) == len(p), f"echo + logprobs: {st} {r}")
        for t in range(1, len(p)):
            row = ref[t - 1]
            check(abs(lp["token_logprobs"][t] - row[p[t]]) <= TOL, f"echo token {t}: {lp}")
            order = [p[t]] + [v for v in sorted(range(160), key=lambda v: (-row[v], v))[:2]
                              if v != p[t]]
            want = {f"token_id:{v}": row[v] for v in order[:3]}
            got = lp["top_logprobs"][t]
            check(set(got) == set(want) and all(abs(got[k] - want[k]) <= TOL for k in want),
                  f"echo top_logprobs {t}: {got} vs {want}")
        # echo with max_tokens 0 (prompt scoring): the prompt's entries alone.
        st, r, _ = s.post({"prompt": p, "max_tokens": 0, "logprobs": 1, "echo": True})
        lp0 = r["choices"][0]["logprobs"]
        check(st == 200 and len(lp0["tokens"]) == len(p)
              and lp0["token_logprobs"][1:] == lp["token_logprobs"][1:len(p)],
              f"echo, max_tokens 0, logprobs 1: {st} {r}")
        # Streamed: the first chunk carries the prompt's entries and the first token's.
        st, ev, done = s.stream({"prompt": p, "max_tokens": 3, "logprobs": 2, "temperature": 0,
                                 "echo": True})
        first = ev[0]["choices"][0]["logprobs"]
        check(done and first["token_logprobs"] == lp["token_logprobs"][:len(p) + 1],
              f"streamed echo + logprobs: {first}")
        for body, param in [({"prompt_logprobs": 1, "stream": True}, "prompt_logprobs"),
                            ({"prompt_logprobs": 6}, "prompt_logprobs"),
                            ({"prompt_logprobs": -1}, "prompt_logprobs"),
                            ({"prompt_logprobs": -2}, "prompt_logprobs"),
                            ({"prompt_logprobs": "1"}, "prompt_logprobs")]:
            st, r, _ = s.post(dict(body, prompt=p, max_tokens=2))
            check(st == 400 and r["error"]["param"] == param, f"{body}: {st} {r}")
    finally:
        s.kill()
    # The rows' logits a request may hold are bounded (the built-in model: 4096 ids,
    # 16384 positions): past 256 MiB it is refused, naming the field that asked.
    s = Server(RADIXKV, "--page-size", "16", "--max-logprobs", "1")
    try:
        long = [(i * 7) % 4000 for i in range(16000)]
        for body, param in [({"prompt_logprobs": 0, "n": 2}, "prompt_logprobs"),
                            ({"logprobs": 0, "echo": True, "n": 2}, "logprobs")]:
            st, r, _ = s.post(dict(body, prompt=long, max_tokens=1))
            check(st == 400 and r["error"]["param"] == param and "MiB" in r["error"]["message"],
                  f"prompt logits over the bound ({body}): {st} {(r or {}).get('error')}")
    finally:
        s.kill()
    # The sim backend computes no logits: refused by name.
    s = Server(RADIXKV, "--backend", "sim")
    try:
        st, r, _ = s.post({"prompt": [5, 6], "max_tokens": 2, "prompt_logprobs": 0})
        check(st == 400 and r["error"]["param"] == "prompt_logprobs" and "sim" in r["error"]["message"],
              f"prompt_logprobs on sim: {st} {r}")
    finally:
        s.kill()


def main():
    only = sys.argv[3:]
    with tempfile.TemporaryDirectory() as d:
        write_model(d)
        for name, t in [("samples", samples), ("echo_and_stop", echo_and_stop),
                        ("logprobs", lambda: logprobs(d)), ("penalties", lambda: penalties(d)),
                        ("bad_words", lambda: bad_words(d)),
                        ("prompt_logprobs", lambda: prompt_logprobs(d))]:
            if not only or name in only:
                t()
                print(f"{name}: ok", file=sys.stderr)
    print("serve sampling: ok")


if __name__ == "__main__":
    main()
