#!/usr/bin/env python3
"""`radixkv serve` answers as vLLM's OpenAI server does where a client can tell
(standard library only): a request that can never fit is 400 not 503,
finish_reason and stop_reason, several stop_token_ids, counters that move for
every request however it ends, 404 vs 405 with Allow, %00 in a path, the ids
tokenizer's errors, vLLM's error bodies ({"error": {message, type, param,
code}} with vLLM's type names). vLLM's metric names: test_serve_metrics.py.
Usage: test_serve_compat.py PATH/TO/radixkv [PART...]"""
import json
import os
import socket
import sys

sys.path.insert(0, os.path.dirname(__file__))
from serve_util import HOST, Server, check  # noqa: E402

RADIXKV = sys.argv[1] if len(sys.argv) > 1 else None


def prompt(seed, n):
    return [(seed * 131 + i * 17) % 4000 + 1 for i in range(n)]


def never_fits(s):
    # --max-running 2 + --max-queue 1: four prompts in one request never fit.
    st, r, h = s.post({"prompt": [[1, 2], [3, 4], [5, 6], [7, 8]], "max_tokens": 1})
    check(st == 400 and r["error"]["param"] == "prompt" and "--max-queue" in r["error"]["message"]
          and r["error"]["type"] == "BadRequestError" and "Retry-After" not in h,
          f"4 prompts: {st} {r} {h}")
    st, r, _ = s.post({"prompt": [[1, 2], [3, 4], [5, 6]], "max_tokens": 1})
    check(st == 200 and len(r["choices"]) == 3, f"3 prompts: {st} {r}")


def stop_reasons(s):
    # A stop token that is also the last allowed token ends the prompt as "stop".
    for seed in range(40):
        p = prompt(seed, 12)
        st, r, _ = s.post({"prompt": p, "max_tokens": 3, "temperature": 0})
        out = r["choices"][0]["token_ids"]
        if out[2] not in out[:2]:
            break
    else:
        check(False, "no prompt whose third greedy token is new")
    ch = r["choices"][0]
    check(ch["finish_reason"] == "length" and ch["stop_reason"] is None, f"length: {ch}")
    st, r, _ = s.post({"prompt": p, "max_tokens": 3, "temperature": 0, "stop_token_ids": [out[2]]})
    ch = r["choices"][0]
    check(ch["token_ids"] == out and ch["finish_reason"] == "stop" and ch["stop_reason"] == out[2],
          f"stop token on the last allowed position: {ch}")
    st, events, done = s.stream({"prompt": p, "max_tokens": 3, "temperature": 0,
                                 "stop_token_ids": [out[2]]})
    last = [e for e in events if e["choices"]][-1]["choices"][0]
    check(done and last["finish_reason"] == "stop" and last["stop_reason"] == out[2],
          f"stream stop_reason: {events}")
    # Several stop ids: the output ends at the first one met, whichever it is.
    st, r, _ = s.post({"prompt": p, "max_tokens": 12, "temperature": 0})
    long = r["choices"][0]["token_ids"]
    absent = next(t for t in range(1, 4000) if t not in long)
    k = next(i for i in range(4, 12) if long[i] not in long[:i])
    st, r, _ = s.post({"prompt": p, "max_tokens": 12, "temperature": 0,
                       "stop_token_ids": [absent, long[k]]})
    ch = r["choices"][0]
    check(st == 200 and ch["token_ids"] == long[:k + 1] and ch["finish_reason"] == "stop"
          and ch["stop_reason"] == long[k], f"second of two stop ids ({long[k]} at {k}): {ch}")
    check(r["usage"]["completion_tokens"] == k + 1, f"usage after a stop: {r['usage']}")
    st, r, _ = s.post({"prompt": p, "max_tokens": 2, "stop_token_ids": [1, "x"]})
    check(st == 400 and r["error"]["param"] == "stop_token_ids"
          and "stop_token_ids[1]" in r["error"]["message"], f"bad stop id: {r}")
    s.wait_idle()


def counters_move(s):
    # Token and prefix-cache counters move while a request runs and when it is
    # cancelled, not only when it finishes well.
    before = s.metrics()
    sock = socket.create_connection((HOST, s.port), timeout=60)
    data = json.dumps({"prompt": [3] * 40, "max_tokens": 8000, "stream": True}).encode()
    sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\n\r\n" % len(data) + data)
    buf = b""
    while buf.count(b"data: ") < 3:
        chunk = sock.recv(4096)
        check(chunk, "stream closed")
        buf += chunk
    m = s.metrics()
    check(m["radixkv:generation_tokens_total"] - before["radixkv:generation_tokens_total"] >= 3
          and m["radixkv:prompt_tokens_total"] - before["radixkv:prompt_tokens_total"] == 40
          and m["radixkv:prefix_cache_queries_total"]
          - before["radixkv:prefix_cache_queries_total"] == 40,
          f"counters while running: {before} -> {m}")
    sock.close()
    m = s.wait_idle()
    check(m["radixkv:prompt_tokens_total"] - before["radixkv:prompt_tokens_total"] == 40,
          f"after cancel: {m}")


def routing(s):
    cases = [("POST", "/nope", 404, None), ("DELETE", "/nope", 404, None),
             ("POST", "/health", 405, "GET, HEAD"), ("PUT", "/metrics", 405, "GET, HEAD"),
             ("GET", "/v1/completions", 405, "POST"), ("GET", "/health%00.json", 404, None),
             ("GET", "/health%2500", 404, None), ("GET", "/%68ealth", 200, None)]
    for method, path, status, allow in cases:
        st, text, h = s.request(method, path)
        check(st == status and h.get("Allow") == allow, f"{method} {path}: {st} {h} {text}")
        if status != 200:
            err = json.loads(text)["error"]
            want = {404: "NotFoundError", 405: "MethodNotAllowedError"}[status]
            check(err["code"] == status and err["type"] == want, f"{method} {path}: {text}")


def text_ids():
    s = Server(RADIXKV, "--tokenizer", "ids")
    try:
        st, r, _ = s.post({"prompt": "1 2 123456789012 3", "max_tokens": 1})
        check(st == 400 and "123456789012" in r["error"]["message"]
              and "character 4" in r["error"]["message"], f"long id: {r}")
    finally:
        s.kill()


def main():
    only = sys.argv[2:]
    s = Server(RADIXKV, "--max-running", "2", "--max-queue", "1")
    try:
        for t in [never_fits, stop_reasons, counters_move, routing]:
            if not only or t.__name__ in only:
                t(s)
                print(f"{t.__name__}: ok", file=sys.stderr)
    finally:
        s.kill()
    if not only or "text_ids" in only:
        text_ids()
    print("serve compat: ok")


if __name__ == "__main__":
    main()
