#!/usr/bin/env python3
"""Chat completions through prefill/decode disaggregation: `radixkv serve
--role prefill` and `--role decode` with a tokenizer and its chat template
(the text tests' hand-made tokenizer, llama-3's template), sharing a
redis-server, behind sglang-router --pd-disaggregation. For conversations
sharing a system prompt, /v1/chat/completions through the router, whole and
streamed, answers what a colocated server with the same tokenizer answers
(greedy): the same message content, the streamed deltas joining to it, the
same prompt_tokens; the decode side's cached_tokens equal the full pages the
prefill handed over, floor((n-1)/P)*P; the prefill computed one token per
request. sglang-router's chat body carries continue_final_message: false,
accepted as the default it is (true stays refused by name). Checks are on
counts and strings, never on time.
Runs under RKV_SERVE_PYTHON (scripts/serve_venv.sh); exits 77 (skip) without
sglang-router or without redis-server on PATH.
Usage: test_serve_pd_chat.py PATH/TO/radixkv"""
import http.client
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from serve_util import HOST, Checks, reexec_under_serve_python, word_tokenizer  # noqa: E402

reexec_under_serve_python(__file__, "sglang_router")
from pd_util import PdProcesses, PdRouter  # noqa: E402

RADIXKV = sys.argv[1]
TEMPLATE = os.path.join(HERE, "..", "text", "templates", "llama-3.jinja")
P = 4
ENGINE = ["--model-name", "tiny", "--page-size", str(P), "--num-pages", "512",
          "--max-tokens", "8"]


def chat(port, body, timeout=120):
    """(status, answer) of /v1/chat/completions; streamed: (status, {"content",
    "usage", "errors", "done"}) from its chunks."""
    c = http.client.HTTPConnection(HOST, port, timeout=timeout)
    try:
        c.request("POST", "/v1/chat/completions", body=json.dumps(body),
                  headers={"Content-Type": "application/json"})
        r = c.getresponse()
        text = r.read().decode()
    finally:
        c.close()
    if r.status != 200 or not body.get("stream"):
        try:
            return r.status, json.loads(text)
        except ValueError:
            return r.status, text
    chunks = [json.loads(x.strip()[len("data: "):]) for x in text.split("\n\n")
              if x.strip().startswith("data: ") and x.strip() != "data: [DONE]"]
    return r.status, {
        "content": "".join(ch["choices"][0]["delta"].get("content") or ""
                           for ch in chunks if ch.get("choices")),
        "usage": [ch["usage"] for ch in chunks if ch.get("usage")],
        "errors": [ch for ch in chunks if "error" in ch],
        "objects": {ch.get("object") for ch in chunks if "error" not in ch},
        "done": text.rstrip().endswith("data: [DONE]")}


def conversations():
    system = {"role": "system", "content": "You answer in one short line, plainly."}
    users = ["Hi", "What is a radix tree?", "Name a prime number.", "Say hello in French."]
    out = [[system, {"role": "user", "content": u}] for u in users]
    # a later turn: its earlier turns are a shared prefix too
    out.append(out[1] + [{"role": "assistant", "content": "A compressed trie."},
                         {"role": "user", "content": "And its depth?"}])
    return out


def main():
    check = Checks()
    pd = PdProcesses("rkv-pd-chat-", "pdchat")
    tier = pd.tier
    try:
        tok = word_tokenizer(pd.tmp, TEMPLATE)
        colo = pd.server(RADIXKV, "--tokenizer", tok, *ENGINE)
        pre = pd.server(RADIXKV, "--tokenizer", tok, *ENGINE, *tier, "--role", "prefill")
        dec = pd.server(RADIXKV, "--tokenizer", tok, *ENGINE, *tier, "--role", "decode")
        router = pd.router = PdRouter(pre.base, dec.base)
        gen0 = pre.metrics()["radixkv:generation_tokens_total"]
        convs = conversations()
        for i, msgs in enumerate(convs):
            body = {"model": "tiny", "messages": msgs, "max_tokens": 6, "temperature": 0}
            st, ref = chat(colo.port, body)
            if not check(st == 200 and ref["choices"][0]["message"]["content"],
                         f"colocated, conversation {i}: {st} {ref}"):
                continue
            want = ref["choices"][0]["message"]["content"]
            n = ref["usage"]["prompt_tokens"]
            want_cached = (n - 1) // P * P
            st, r = chat(router.port, body)
            ok = check(st == 200 and r.get("object") == "chat.completion",
                       f"router, conversation {i}: {st} {r}")
            if ok:
                got = r["choices"][0]["message"]
                check(got["role"] == "assistant" and got["content"] == want,
                      f"conversation {i}: {got} != colocated {want!r}")
                check(r["usage"]["prompt_tokens"] == n and
                      r["usage"]["prompt_tokens_details"]["cached_tokens"] == want_cached,
                      f"conversation {i}: usage {r['usage']}, want {n} prompt tokens, "
                      f"{want_cached} cached")
            st, sr = chat(router.port, dict(body, stream=True,
                                            stream_options={"include_usage": True}))
            ok = check(st == 200 and isinstance(sr, dict), f"router stream {i}: {st} {sr}")
            if ok:
                check(sr["done"] and not sr["errors"] and sr["content"] == want and
                      sr["objects"] == {"chat.completion.chunk"},
                      f"stream {i}: {sr['content']!r} != {want!r} ({sr['errors']}, "
                      f"{sr['objects']}, done {sr['done']})")
                u = sr["usage"][-1] if sr["usage"] else {}
                check(u.get("prompt_tokens") == n and
                      u.get("prompt_tokens_details", {}).get("cached_tokens") == want_cached,
                      f"stream {i}: usage {sr['usage']}")
        # sglang-router writes continue_final_message: false (its default) into
        # every chat request it forwards: accepted; true stays refused by name.
        for value, code in [(False, 200), (True, 400)]:
            st, r = chat(colo.port, {"messages": convs[0], "max_tokens": 2,
                                     "continue_final_message": value})
            check(st == code and (code == 200 or "continue_final_message" in
                                  r["error"]["message"]),
                  f"continue_final_message {value}: {st} {r}")
        gen = pre.metrics()["radixkv:generation_tokens_total"] - gen0
        check(gen == 2 * len(convs), f"the prefill side computes one token per request: {gen}")
        router.stop()
        pd.router = None
        for name, srv in [("prefill", pre), ("decode", dec)]:
            rc, summary = srv.stop()
            check(rc == 0 and summary and summary["pages_inflight"] == 0,
                  f"{name} exit {rc}: {summary}")
        check(summary and summary["handoffs_admitted"] == 2 * len(convs) + 1
              and summary["handoffs_failed"] == 0,
              f"decode handoffs (the router's start-up probe is one): {summary}")
    finally:
        pd.close()
    sys.exit(check.finish("serve pd chat"))


if __name__ == "__main__":
    main()
