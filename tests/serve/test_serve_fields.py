#!/usr/bin/env python3
"""Every field of vLLM's completion request is honoured or refused by name
(standard library only).

Walks vllm_completion_fields.txt (vLLM 0.33's CompletionRequest fields): each
field is sent with a value that asks for something; the answer must be a 400
whose param names the field, or a 200 for a field this test knows radixkv
honours, and README.md's field table must say the same. A field vLLM adds that
nobody classified fails here. Then the honoured fields' effects, as vLLM gives
them: usage with n > 1, a stop token's text, include_stop_str_in_output, echo
with max_tokens 0, echo merged with the first streamed token, a finish chunk on
every stream, continuous_usage_stats, truncation, request_id, logprobs -1,
vLLM's CLI spellings, /ping, /version and the API key.
Usage: test_serve_fields.py PATH/TO/radixkv"""
import http.client
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from serve_util import HOST, Server, check  # noqa: E402

RADIXKV = sys.argv[1] if len(sys.argv) > 1 else None
HERE = os.path.dirname(os.path.abspath(__file__))
README = os.path.join(HERE, "..", "..", "README.md")

# A value for each field that asks for something (not vLLM's default).
SAMPLES = {
    "model": "m", "prompt": [5, 6, 7], "echo": True, "frequency_penalty": 0.5,
    "logit_bias": {"5": 1.0}, "logprobs": 0, "max_tokens": 2, "n": 2, "presence_penalty": 0.5,
    "seed": 3, "stop": [""], "stream": False, "stream_options": None, "suffix": "x",
    "temperature": 0.5, "top_p": 0.9, "user": "u", "use_beam_search": True, "top_k": 3,
    "min_p": 0.1, "repetition_penalty": 1.2, "watermarking": True, "length_penalty": 0.5,
    "stop_token_ids": [9], "include_stop_str_in_output": True, "ignore_eos": True,
    "min_tokens": 1, "skip_special_tokens": False, "spaces_between_special_tokens": False,
    "truncate_prompt_tokens": 2, "truncation_side": "right", "allowed_token_ids": [5],
    "prompt_logprobs": 1, "logprob_token_ids": [5], "bad_words": ["5 6"], "prompt_embeds": "AA==",
    "add_special_tokens": False, "response_format": {"type": "json_object"},
    "structured_outputs": {"json": {}}, "priority": 1, "request_id": "abc",
    "session_id": "s", "return_tokens_as_token_ids": True, "return_token_ids": True,
    "return_weight_versions": True, "routed_experts_prompt_start": 1,
    "return_token_offsets": True, "mm_payload": "bytes", "return_mm_kwargs": True,
    "cache_salt": "salt", "kv_transfer_params": {"a": 1}, "ec_transfer_params": {"a": 1},
    "vllm_xargs": {"a": 1}, "repetition_detection": {"max_pattern_size": 2},
    "thinking_token_budget": 4, "stream_interval": 2,
}
# Fields radixkv honours (their effects are checked below or in the other serve tests).
HONOURED = {"model", "prompt", "echo", "logprobs", "max_tokens", "n", "seed", "stop", "stream",
            "stream_options", "temperature", "top_p", "user", "top_k", "stop_token_ids",
            "include_stop_str_in_output", "ignore_eos", "skip_special_tokens",
            "spaces_between_special_tokens", "truncate_prompt_tokens", "truncation_side",
            "add_special_tokens", "request_id", "return_tokens_as_token_ids",
            "return_token_ids", "logit_bias", "allowed_token_ids", "min_p", "frequency_penalty",
            "presence_penalty", "repetition_penalty", "min_tokens", "bad_words",
            "prompt_logprobs"}


def vllm_fields():
    with open(os.path.join(HERE, "vllm_completion_fields.txt")) as f:
        return [ln.strip() for ln in f if ln.strip() and not ln.startswith("#")]


def readme_table():
    """README.md's field table: {field: 'honoured' | 'refused'}."""
    got = {}
    with open(README) as f:
        for ln in f:
            m = re.match(r"\|\s*`([a-z_]+)`\s*\|\s*(honoured|refused)\b", ln)
            if m:
                got[m.group(1)] = m.group(2)
    return got


def walk(s):
    fields = vllm_fields()
    check(len(fields) > 40, f"field list too short: {len(fields)}")
    table = readme_table()
    for f in fields:
        check(f in SAMPLES, f"vLLM field {f!r} has no sample here: classify it")
        body = {"prompt": [5, 6, 7], "max_tokens": 2}
        body[f] = SAMPLES[f]
        if f == "model":
            body[f] = "m"
        if f == "echo":
            body["max_tokens"] = 2
        st, r, _ = s.post(body)
        if st == 400 and r["error"]["param"] == f:
            got = "refused"
            check(f in r["error"]["message"], f"{f}: the message does not name it: {r}")
        elif st == 200:
            got = "honoured"
            check(f in HONOURED, f"{f}: accepted (200) but not among the honoured fields: {r}")
        else:
            check(False, f"{f}: neither honoured nor refused by name: {st} {r}")
        check(table.get(f) == got, f"{f}: README's table says {table.get(f)!r}, the server {got}")
        # vLLM's default value (or null) asks for nothing and is never refused.
        if got == "refused":
            st, r, _ = s.post({"prompt": [5, 6, 7], "max_tokens": 2, f: None})
            check(st == 200, f"{f}: null refused: {st} {r}")
    for f in HONOURED:
        check(f in fields, f"{f}: honoured here but not one of vLLM's fields")
    # A field vLLM does not define: ignored, as vLLM does (routers add their own).
    st, r, _ = s.post({"prompt": [5], "max_tokens": 1, "no_such_field": 1})
    check(st == 200, f"unknown field: {st} {r}")


def prompt(seed, n):
    return [(seed * 131 + i * 17) % 4000 + 1 for i in range(n)]


def effects(s):
    p = prompt(1, 8)
    # Usage counts the prompt once whatever n (vLLM and OpenAI).
    st, r, _ = s.post({"prompt": p, "max_tokens": 3, "n": 2, "temperature": 0})
    u = r["usage"]
    check(st == 200 and u["prompt_tokens"] == 8 and u["completion_tokens"] == 6
          and u["total_tokens"] == 14 and u["prompt_tokens_details"]["cached_tokens"] <= 8,
          f"usage with n=2: {u}")
    # A stop token's text is left out unless include_stop_str_in_output.
    st, r, _ = s.post({"prompt": p, "max_tokens": 4, "temperature": 0})
    out = r["choices"][0]["token_ids"]
    stop = out[1]
    want = out[:out.index(stop) + 1]
    st, r, _ = s.post({"prompt": p, "max_tokens": 4, "temperature": 0, "stop_token_ids": [stop]})
    ch = r["choices"][0]
    kept = " ".join(str(t) for t in want[:-1])
    check(ch["token_ids"] == want and ch["text"].split() == kept.split()
          and ch["finish_reason"] == "stop", f"stop token text left out: {ch} (want {want})")
    st, r, _ = s.post({"prompt": p, "max_tokens": 4, "temperature": 0, "stop_token_ids": [stop],
                       "include_stop_str_in_output": True})
    ch = r["choices"][0]
    check(ch["text"].split() == [str(t) for t in want], f"include_stop_str_in_output: {ch}")
    # The same in a stream: the stop token's chunk carries no text.
    st, ev, done = s.stream({"prompt": p, "max_tokens": 4, "temperature": 0,
                             "stop_token_ids": [stop]})
    text = "".join(e["choices"][0]["text"] for e in ev if e["choices"])
    check(done and text.split() == kept.split(), f"stream stop text: {ev}")
    # echo with max_tokens 0: the prompt alone, one token run (vLLM counts it).
    st, r, _ = s.post({"prompt": "5 6 7", "max_tokens": 0, "echo": True})
    ch = r["choices"][0]
    check(st == 200 and ch["text"].split() == ["5", "6", "7"] and ch["finish_reason"] == "length"
          and r["usage"]["prompt_tokens"] == 3, f"echo, max_tokens 0: {st} {r}")
    st, r, _ = s.post({"prompt": "5 6 7", "max_tokens": 0})
    check(st == 400 and r["error"]["param"] == "max_tokens", f"max_tokens 0 alone: {st} {r}")
    # Streamed echo: the prompt leads the first token's chunk (no chunk of its own).
    st, ev, done = s.stream({"prompt": "5 6 7", "max_tokens": 3, "temperature": 0, "echo": True})
    first = ev[0]["choices"][0]
    check(done and first["text"].split()[:3] == ["5", "6", "7"] and len(first["text"].split()) == 4
          and len(first["token_ids"]) == 1 and first["prompt_token_ids"] == [5, 6, 7],
          f"echo merged with the first token: {ev[0]}")
    # continuous_usage_stats: usage in every chunk, the choice's outputs so far.
    st, ev, done = s.stream({"prompt": p, "max_tokens": 3, "temperature": 0, "stream_options":
                             {"include_usage": True, "continuous_usage_stats": True}})
    got = [e["usage"]["completion_tokens"] for e in ev if e["choices"]]
    check(done and got == [1, 2, 3] and ev[-1]["choices"] == []
          and ev[-1]["usage"]["completion_tokens"] == 3 and ev[0]["usage"]["prompt_tokens"] == 8,
          f"continuous usage: {ev}")
    st, ev, done = s.stream({"prompt": p, "max_tokens": 2, "stream_options": {"include_usage": True}})
    check(all("usage" not in e for e in ev[:-1]), f"usage only in the last chunk: {ev}")
    # Truncation keeps the last k tokens (first k with truncation_side right).
    st, r, _ = s.post({"prompt": p, "max_tokens": 1, "truncate_prompt_tokens": 3,
                       "return_token_ids": True})
    check(st == 200 and r["usage"]["prompt_tokens"] == 3
          and r["choices"][0]["prompt_token_ids"] == p[-3:], f"truncate left: {r}")
    st, r, _ = s.post({"prompt": p, "max_tokens": 1, "truncate_prompt_tokens": 3,
                       "truncation_side": "right", "return_token_ids": True})
    check(st == 200 and r["choices"][0]["prompt_token_ids"] == p[:3], f"truncate right: {r}")
    st, r, _ = s.post({"prompt": p, "max_tokens": 1, "request_id": "abc"})
    check(st == 200 and r["id"] == "cmpl-abc", f"request_id: {r}")
    # The sampler's processors (cpu backend): one allowed id, or a +100 bias,
    # makes every greedy output that id; min_p 1 keeps only the most likely.
    st, g, _ = s.post({"prompt": p, "max_tokens": 4, "temperature": 0})
    greedy = g["choices"][0]["token_ids"]
    x = next(t for t in range(7, 4000) if t not in greedy)
    st, r, _ = s.post({"prompt": p, "max_tokens": 4, "temperature": 0, "allowed_token_ids": [x]})
    check(st == 200 and r["choices"][0]["token_ids"] == [x] * 4, f"allowed_token_ids: {st} {r}")
    st, r, _ = s.post({"prompt": p, "max_tokens": 4, "temperature": 0, "logit_bias": {str(x): 100}})
    check(st == 200 and r["choices"][0]["token_ids"] == [x] * 4, f"logit_bias: {st} {r}")
    st, r, _ = s.post({"prompt": p, "max_tokens": 4, "temperature": 1.0, "seed": 5, "min_p": 1.0})
    check(st == 200 and r["choices"][0]["token_ids"] == greedy, f"min_p 1: {r} vs {greedy}")
    st, r, _ = s.post({"prompt": p, "max_tokens": 4, "temperature": 1.0, "seed": 5, "min_p": 1.0,
                       "logit_bias": {str(x): 100}})
    check(st == 200 and r["choices"][0]["token_ids"] == [x] * 4, f"bias then min_p: {r}")
    for bad in [{"allowed_token_ids": []}, {"allowed_token_ids": [10 ** 9]},
                {"logit_bias": {"a": 1}}, {"min_p": 2}]:
        st, r, _ = s.post(dict({"prompt": p, "max_tokens": 1}, **bad))
        check(st == 400 and r["error"]["param"] == next(iter(bad)), f"{bad}: {st} {r}")
    # logprobs -1: the whole vocabulary, above --max-logprobs: refused by name.
    st, r, _ = s.post({"prompt": p, "max_tokens": 1, "logprobs": -1})
    check(st == 400 and r["error"]["param"] == "logprobs" and "-1" in r["error"]["message"],
          f"logprobs -1: {st} {r}")


def finish_on_drain():
    """Streams cut by a drain's cancel each end with a finish_reason."""
    import threading
    s = Server(RADIXKV, "--drain-timeout", "0.2", "--backend", "sim")
    results = []

    def one(i):
        results.append(s.stream({"prompt": prompt(i, 16), "max_tokens": 3000}, timeout=120))

    try:
        # The sim backend has no logits: the sampler's processors are refused by name.
        for f, v in [("logit_bias", {"5": 1}), ("allowed_token_ids", [5]), ("min_p", 0.5)]:
            st, r, _ = s.post({"prompt": [5, 6], "max_tokens": 1, f: v})
            check(st == 400 and r["error"]["param"] == f and "sim" in r["error"]["message"],
                  f"{f} on sim: {st} {r}")
        ts = [threading.Thread(target=one, args=(i,)) for i in range(4)]
        for t in ts:
            t.start()
        # Wait until all four run, then drain.
        import time
        for _ in range(400):
            if s.metrics()["radixkv:num_requests_running"] + \
               s.metrics()["radixkv:num_requests_waiting"] >= 4:
                break
            time.sleep(0.05)
        code, _ = s.stop()
        for t in ts:
            t.join(timeout=120)
        check(code == 0 and len(results) == 4, f"drain: exit {code}, {len(results)} streams")
        for st, ev, done in results:
            fins = [e["choices"][0]["finish_reason"] for e in ev if e.get("choices")]
            check(st == 200 and fins and fins[-1] == "abort", f"stream cut by the drain: {ev[-3:]}")
    finally:
        s.kill()


def cli_and_paths():
    s = Server(RADIXKV, "--served-model-name", "vm", "--block-size", "16", "--max-num-seqs", "8",
               "--max-num-batched-tokens", "512", "--enable-prefix-caching",
               "--disable-log-requests", "--max-model-len", "64", "--api-key", "k1")
    try:
        st, text, _ = s.request("GET", "/ping")
        check(st == 200, f"/ping: {st} {text}")
        st, text, _ = s.request("GET", "/version")
        check(st == 200 and json.loads(text)["version"], f"/version: {st} {text}")
        st, text, _ = s.request("GET", "/v1/models")
        check(st == 401 and json.loads(text) == {"error": "Unauthorized"}, f"no key: {st} {text}")
        c = http.client.HTTPConnection(HOST, s.port, timeout=60)
        c.request("POST", "/v1/completions", body=json.dumps({"prompt": [1, 2], "max_tokens": 2,
                                                             "model": "vm"}),
                  headers={"Content-Type": "application/json", "Authorization": "Bearer k1"})
        r = c.getresponse()
        body = json.loads(r.read())
        c.close()
        check(r.status == 200 and body["model"] == "vm", f"with the key: {r.status} {body}")
        c = http.client.HTTPConnection(HOST, s.port, timeout=60)
        c.request("POST", "/v1/completions", body=json.dumps({"prompt": [1] * 60, "max_tokens": 8}),
                  headers={"Content-Type": "application/json", "Authorization": "Bearer k1"})
        r = c.getresponse()
        body = json.loads(r.read())
        c.close()
        check(r.status == 400 and body["error"]["param"] == "max_tokens"
              and "--max-model-len" in body["error"]["message"], f"max-model-len: {body}")
        st, text, _ = s.request("GET", "/server_info")
        info = json.loads(text)
        check(info["page_size"] == 16 and info["max_running_requests"] == 8
              and info["max_num_batched_tokens"] == 512, f"renamed options: {info}")
    finally:
        s.kill()
    # An option vLLM has and radixkv does not: refused by name.
    out = subprocess.run([RADIXKV, "serve", "--port", "0", "--gpu-memory-utilization", "0.9"],
                         capture_output=True, text=True, timeout=60)
    check(out.returncode == 2 and "--gpu-memory-utilization" in out.stderr, f"{out.stderr}")


def main():
    if not RADIXKV:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    s = Server(RADIXKV, "--tokenizer", "ids", "--model-name", "m", "--max-logprobs", "2")
    try:
        walk(s)
        effects(s)
    finally:
        s.kill()
    cli_and_paths()
    finish_on_drain()
    print("serve fields: ok")


if __name__ == "__main__":
    main()
