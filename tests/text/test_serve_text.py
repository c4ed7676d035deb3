#!/usr/bin/env python3
"""`radixkv serve --tokenizer DIR` on the built-in cpu model (no download, no
venv): text prompts, output text, stop strings (with and without
include_stop_str_in_output), /v1/chat/completions (whole and streamed),
/tokenize and /detokenize, bad_words encoded as vLLM encodes them, and bad
input.

The tokenizer is hand-made: one token per byte (ids 0..255), four special
tokens and 3836 added tokens "<wN>" filling the model's 4096 ids, so every id
the random model samples has text. Checks are on counts and strings, never
on time: prompt_tokens equals /tokenize's count, the text equals /detokenize
of token_ids, a stream's deltas join to the whole answer, a stop string cuts
the text exactly where it begins.

Usage: test_serve_text.py RADIXKV TEMPLATES_DIR
"""
import http.client
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "serve"))
sys.path.insert(0, HERE)
from serve_util import Checks, Server, stop_checked, tokenizer_server  # noqa: E402
from test_tokenize_cli import write_tokenizer  # noqa: E402


def main():
    radixkv, tdir = sys.argv[1], sys.argv[2]
    check = Checks()
    with tempfile.TemporaryDirectory() as tmp:
        s, tok = tokenizer_server(radixkv, tmp, os.path.join(tdir, "llama-3.jinja"),
                                  "--max-running", "4")
        with open(os.path.join(tok, "tokenizer.json"), encoding="utf-8") as f:
            tj = json.load(f)
        try:
            def post(path, body):
                st, text, _ = s.request("POST", path, body)
                return st, json.loads(text) if text else None

            # a text prompt: BOS + one token per byte
            st, r = post("/v1/completions", {"prompt": "Hello wörld", "max_tokens": 8,
                                             "temperature": 0})
            check(st == 200, f"text prompt: {st} {r}")
            st, tk = post("/tokenize", {"prompt": "Hello wörld"})
            check(st == 200 and tk["count"] == 13 and tk["tokens"][0] == 256,
                  f"/tokenize: {tk}")
            if st == 200 and r:
                check(r["usage"]["prompt_tokens"] == tk["count"], "prompt_tokens == /tokenize count")
                ids = r["choices"][0]["token_ids"]
                st, dt = post("/detokenize", {"tokens": ids})
                check(st == 200 and dt["prompt"] == r["choices"][0]["text"] and dt["prompt"],
                      f"text == /detokenize(token_ids): {r['choices'][0]['text']!r} {dt}")
                # stop strings: a later token's text stops the answer where it begins
                text = r["choices"][0]["text"]
                later = [i for i in ids[1:] if i >= 260]
                check(later, f"no output token after the first has an added token's text: {ids}")
                stop = f"<w{later[0]}>" if later else None
                if stop:
                    cut = text.index(stop)
                    st, r2 = post("/v1/completions", {"prompt": "Hello wörld", "max_tokens": 8,
                                                      "temperature": 0, "stop": [stop]})
                    check(st == 200 and r2["choices"][0]["text"] == text[:cut] and
                          r2["choices"][0]["finish_reason"] == "stop" and
                          r2["choices"][0]["stop_reason"] == stop, f"stop string: {r2}")
                    st, r3 = post("/v1/completions", {"prompt": "Hello wörld", "max_tokens": 8,
                                                      "temperature": 0, "stop": stop,
                                                      "include_stop_str_in_output": True})
                    check(st == 200 and r3["choices"][0]["text"] == text[:cut + len(stop)],
                          f"include_stop_str_in_output: {r3}")
                    # streamed: text that may start the stop string is held back, so the
                    # pieces join to the same cut text
                    for inc in (False, True):
                        st, events, done = s.stream({"prompt": "Hello wörld", "max_tokens": 8,
                                                     "temperature": 0, "stop": [stop, "zz"],
                                                     "include_stop_str_in_output": inc})
                        joined = "".join(e["choices"][0]["text"] for e in events if e["choices"])
                        want = text[:cut + (len(stop) if inc else 0)]
                        check(st == 200 and done and joined == want and
                              events[-1]["choices"][0]["finish_reason"] == "stop",
                              f"streamed stop (include={inc}): {joined!r} != {want!r}")
                # echo, whole and streamed: the prompt's text leads the answer's, and
                # in a stream it leads the first token's piece
                st, re_ = post("/v1/completions", {"prompt": "Hello wörld", "max_tokens": 8,
                                                   "temperature": 0, "echo": True})
                check(st == 200 and re_["choices"][0]["text"] == "Hello wörld" + text,
                      f"echo with a tokenizer: {re_}")
                st, events, done = s.stream({"prompt": "Hello wörld", "max_tokens": 8,
                                             "temperature": 0, "echo": True})
                pieces = [e["choices"][0]["text"] for e in events if e["choices"]]
                check(st == 200 and done and "".join(pieces) == "Hello wörld" + text and
                      pieces[0].startswith("Hello wörld") and
                      events[0]["choices"][0]["token_ids"], f"streamed echo: {pieces}")
                # a stop token id: its text is left out unless include_stop_str_in_output
                k = next((i for i in range(1, len(ids)) if ids[i] >= 260 and ids[i] not in ids[:i]), None)
                check(k is not None, f"no fresh added token to stop at: {ids}")
                if k is not None:
                    for inc in (False, True):
                        st, dt = post("/detokenize", {"tokens": ids[:k + (1 if inc else 0)]})
                        body = {"prompt": "Hello wörld", "max_tokens": 8, "temperature": 0,
                                "stop_token_ids": [ids[k]], "include_stop_str_in_output": inc}
                        st, rs = post("/v1/completions", body)
                        check(st == 200 and rs["choices"][0]["text"] == dt["prompt"] and
                              rs["choices"][0]["token_ids"] == ids[:k + 1],
                              f"stop token (include={inc}): {rs} want {dt}")
                        st, events, done = s.stream(body)
                        joined = "".join(e["choices"][0]["text"] for e in events if e["choices"])
                        check(st == 200 and done and joined == dt["prompt"],
                              f"streamed stop token (include={inc}): {joined!r} != {dt['prompt']!r}")
            # chat: the template's prompt, whole and streamed
            msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
            st, tk = post("/tokenize", {"messages": msgs})
            st2, c = post("/v1/chat/completions", {"messages": msgs, "max_tokens": 6,
                                                   "temperature": 0})
            check(st == 200 and st2 == 200 and c["object"] == "chat.completion" and
                  c["usage"]["prompt_tokens"] == tk["count"] and
                  c["choices"][0]["message"]["role"] == "assistant",
                  f"chat: {st} {st2} {c} {tk}")
            # serve_util.stream posts to /v1/completions: chat streams by hand
            conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=120)
            conn.request("POST", "/v1/chat/completions", body=json.dumps(
                {"messages": msgs, "max_tokens": 6, "temperature": 0, "stream": True,
                 "stream_options": {"include_usage": True}}))
            resp = conn.getresponse()
            body = resp.read().decode()
            conn.close()
            chunks = [json.loads(x[len("data: "):]) for x in body.split("\n\n")
                      if x.startswith("data: ") and x != "data: [DONE]"]
            joined = "".join(ch["choices"][0]["delta"]["content"] for ch in chunks if ch["choices"])
            usage = [ch["usage"] for ch in chunks if ch.get("usage")]
            check(resp.status == 200 and body.rstrip().endswith("data: [DONE]") and
                  all(ch["object"] == "chat.completion.chunk" for ch in chunks) and
                  st2 == 200 and joined == c["choices"][0]["message"]["content"] and
                  usage and usage[-1]["prompt_tokens"] == tk["count"] and
                  usage[-1]["prompt_tokens_details"]["cached_tokens"] > 0,
                  f"streamed chat: {joined!r} vs {c['choices'][0]['message']['content']!r}, {usage}")
            # bad input: each a 400 naming its place
            st, text, _ = s.request("POST", "/v1/completions",
                                    raw=b'{"prompt": "caf\xe9", "max_tokens": 2}')
            check(st == 400 and "malformed JSON" in text, f"invalid UTF-8: {st} {text}")
            st, r = post("/v1/chat/completions", {"messages": [], "max_tokens": 2})
            check(st == 400 and "messages: empty" in r["error"]["message"], f"no messages: {r}")
            st, r = post("/v1/chat/completions", {"messages": [{"role": "tool", "content": "x"}]})
            check(st == 400 and "messages[0].role: 'tool'" in r["error"]["message"], f"tool: {r}")
            st, r = post("/detokenize", {"tokens": [1, 5000]})
            check(st == 400 and "tokens[1]" in r["error"]["message"], f"/detokenize: {r}")
            st, r = post("/tokenize", {"prompt": 3})
            check(st == 400 and "prompt" in r["error"]["message"], f"/tokenize: {r}")
        finally:
            stop_checked(s, check)
        # without a tokenizer, chat says what it needs; an unknown template is refused by name
        s = Server(radixkv)
        try:
            st, text, _ = s.request("POST", "/v1/chat/completions",
                                    {"messages": [{"role": "user", "content": "x"}]})
            check(st == 404 and "--tokenizer DIR" in text, f"no tokenizer: {st} {text}")
        finally:
            s.stop()
        # logprobs with a tokenizer: token names are each token decoded alone (vLLM's
        # tokenizer.decode([id]): a lone byte >= 0x80 is U+FFFD, special tokens kept) and
        # text_offset counts characters (U+FFFD is one, its byte three)
        special = {a["id"]: a["content"] for a in tj["added_tokens"]}

        def name(i):
            return special[i] if i in special else chr(i) if i < 0x80 else "\ufffd"

        s = Server(radixkv, "--tokenizer", tok, "--max-logprobs", "5")
        try:
            body = {"prompt": "Hello wörld", "max_tokens": 40, "temperature": 0, "logprobs": 2}
            st, text, _ = s.request("POST", "/v1/completions", body)
            r = json.loads(text) if st == 200 else None
            check(r is not None, f"logprobs: {st} {text}")
            if r:
                c = r["choices"][0]
                lp, ids = c["logprobs"], c["token_ids"]
                want = [name(i) for i in ids]
                offs, at = [], 0
                for w in want:
                    offs.append(at)
                    at += len(w)
                check(lp["tokens"] == want and lp["text_offset"] == offs,
                      f"logprobs names/offsets: {lp['tokens']} {lp['text_offset']} want {want} "
                      f"{offs}")
                check(all(want[k] in lp["top_logprobs"][k] and len(lp["top_logprobs"][k]) <= 3
                          for k in range(len(ids))), f"top_logprobs keys: {lp['top_logprobs']}")
                st, text, _ = s.request("POST", "/v1/completions", dict(body, stream=True))
                chunks = [json.loads(x[6:]) for x in text.split("\n")
                          if x.startswith("data: {")]
                toks = [t for ch in chunks for t in (ch["choices"][0]["logprobs"] or {}).get(
                    "tokens", [])]
                so = [t for ch in chunks for t in (ch["choices"][0]["logprobs"] or {}).get(
                    "text_offset", [])]
                check(st == 200 and toks == want and so == offs,
                      f"streamed logprobs: {toks} {so} want {want} {offs}")
            # prompt_logprobs in a chat answer: on the response, as vLLM's chat puts them
            msgs = [{"role": "user", "content": "Hi"}]
            st, text, _ = s.request("POST", "/v1/chat/completions",
                                    {"messages": msgs, "max_tokens": 2, "prompt_logprobs": 1})
            r = json.loads(text) if st == 200 else {}
            st2, text2, _ = s.request("POST", "/tokenize", {"messages": msgs})
            pl = r.get("prompt_logprobs") or []
            check(st == 200 and len(pl) == json.loads(text2)["count"] and pl[0] is None and
                  all(len(e) in (1, 2) for e in pl[1:]) and
                  "prompt_logprobs" not in r["choices"][0], f"chat prompt_logprobs: {st} {text[:300]}")
        finally:
            s.stop()
        # --model DIR holding tokenizer.json: that is the tokenizer unless --tokenizer says
        # otherwise (random weights of the built-in model's shape: no safetensors)
        with open(os.path.join(tok, "config.json"), "w", encoding="utf-8") as f:
            json.dump(dict(architectures=["LlamaForCausalLM"], model_type="llama",
                           vocab_size=4096, hidden_size=256, intermediate_size=688,
                           num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=2,
                           head_dim=64, max_position_embeddings=16384, rms_norm_eps=1e-5,
                           rope_theta=10000.0, tie_word_embeddings=True), f)
        for extra, want in (((), 200), (("--tokenizer", "none"), 404)):
            s = Server(radixkv, "--model", tok, *extra)
            try:
                st, text, _ = s.request("POST", "/tokenize", {"prompt": "Hello wörld"})
                ok = st == want and (want != 200 or json.loads(text)["count"] == 13)
                check(ok, f"--model DIR {extra}: /tokenize {st} {text}")
            finally:
                s.stop()
        # bad_words with a tokenizer, encoded as vLLM's update_from_tokenizer does: "x" and
        # " x" (one merged token here, id 260, so that form is kept too) are both banned;
        # logit_bias makes x then " x" the greedy choices, so a ban that misses either shows
        merged = os.path.join(tmp, "merged")
        write_tokenizer(merged, None)
        with open(os.path.join(merged, "tokenizer.json"), encoding="utf-8") as f:
            mj = json.load(f)
        mj["added_tokens"] = [a for a in mj["added_tokens"] if a["id"] == 256]
        mj["model"]["vocab"]["\u0120x"] = 260
        mj["model"]["merges"] = ["\u0120 x"]
        with open(os.path.join(merged, "tokenizer.json"), "w", encoding="utf-8") as f:
            json.dump(mj, f)
        s = Server(radixkv, "--tokenizer", merged)
        try:
            body = {"prompt": "a x", "max_tokens": 3, "temperature": 0,
                    "logit_bias": {"120": 100, "260": 90}}
            st, text, _ = s.request("POST", "/tokenize", {"prompt": "a x"})
            check(st == 200 and json.loads(text)["tokens"] == [256, 97, 260], f"merge: {text}")
            st, text, _ = s.request("POST", "/v1/completions", body)
            got = json.loads(text)["choices"][0]["token_ids"] if st == 200 else None
            check(got == [120, 120, 120], f"biased toward x: {st} {text}")
            st, text, _ = s.request("POST", "/v1/completions", dict(body, bad_words=["  x"]))
            got = json.loads(text)["choices"][0]["token_ids"] if st == 200 else None
            check(got is not None and not {120, 260} & set(got), f"bad_words x: {st} {text}")
            st, text, _ = s.request("POST", "/v1/completions", dict(body, bad_words=["\u00e9"]))
            got = json.loads(text)["choices"][0]["token_ids"] if st == 200 else None
            check(got == [120, 120, 120], f"bad_words of two bytes only after the first: {text}")
        finally:
            stop_checked(s, check)
        unknown = os.path.join(tmp, "unknown")
        write_tokenizer(unknown, "{{ messages }}")
        s = Server(radixkv, "--tokenizer", unknown)
        try:
            st, text, _ = s.request("POST", "/v1/chat/completions",
                                    {"messages": [{"role": "user", "content": "x"}]})
            check(st == 400 and "unknown chat template" in text, f"unknown template: {st} {text}")
        finally:
            s.stop()
    return check.finish("test_serve_text")


if __name__ == "__main__":
    sys.exit(main())
