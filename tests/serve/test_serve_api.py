#!/usr/bin/env python3
"""`radixkv serve` over plain HTTP (standard library only): the endpoints, greedy
outputs equal to `radixkv run` on the same requests, usage and cached tokens,
every bad request's status and message, a full queue, a client that disconnects
mid-stream (its pages come back), and SIGTERM draining in-flight work.
Usage: test_serve_api.py PATH/TO/radixkv"""
import json
import socket
import sys
import threading
import time

sys.path.insert(0, __import__("os").path.dirname(__file__))
from serve_util import HOST, Server, check, run_reference  # noqa: E402

RADIXKV = sys.argv[1] if len(sys.argv) > 1 else None
ENGINE = ["--page-size", "4", "--num-pages", "64", "--max-running", "4"]


def prompt(seed, n):
    return [(seed * 131 + i * 17) % 4000 + 1 for i in range(n)]


def endpoints(s):
    st, text, _ = s.request("GET", "/health")
    check(st == 200 and text.strip() == "ok", f"/health: {st} {text}")
    st, text, _ = s.request("GET", "/v1/models")
    models = json.loads(text)
    check(st == 200 and models["data"][0]["id"] == "tiny", f"/v1/models: {text}")
    st, text, _ = s.request("GET", "/model_info")
    check(st == 200 and json.loads(text)["model_path"] == "tiny", f"/model_info: {text}")
    st, text, _ = s.request("GET", "/server_info")
    info = json.loads(text)
    check(st == 200 and info["page_size"] == 4 and info["num_pages"] == 64, f"/server_info: {text}")
    st, text, _ = s.request("GET", "/nope")
    check(st == 404 and "no such endpoint" in text, f"/nope: {st} {text}")
    st, text, _ = s.request("GET", "/v1/completions")
    check(st == 405 and "use POST" in text, f"GET /v1/completions: {st} {text}")
    m = s.metrics()
    for name in ["radixkv:prefix_cache_queries_total", "radixkv:prefix_cache_hits_total",
                 "radixkv:num_requests_running", "radixkv:num_requests_waiting",
                 'radixkv:kv_pages{state="free"}', "radixkv:evicted_tokens_total",
                 "radixkv:time_to_first_token_seconds_count",
                 'radixkv:inter_token_latency_seconds_bucket{le="+Inf"}']:
        check(name in m, f"/metrics lacks {name}")
    check(m['radixkv:kv_pages{state="free"}'] == 64, f"fresh pool not all free: {m}")


def completions(s):
    p = prompt(1, 20)
    st, a, _ = s.post({"model": "tiny", "prompt": p, "max_tokens": 6, "temperature": 0})
    check(st == 200, f"completion: {st} {a}")
    ch = a["choices"][0]
    check(len(ch["token_ids"]) == 6 and ch["finish_reason"] == "length", f"choice: {ch}")
    u = a["usage"]
    check(u["prompt_tokens"] == 20 and u["completion_tokens"] == 6 and u["total_tokens"] == 26
          and u["prompt_tokens_details"]["cached_tokens"] == 0, f"usage: {u}")
    # The same prompt again: its first 16 tokens (4 whole pages of the 19 matched) are cached.
    st, b, _ = s.post({"prompt": p, "max_tokens": 6, "temperature": 0})
    check(b["usage"]["prompt_tokens_details"]["cached_tokens"] == 16, f"cached: {b['usage']}")
    check(b["choices"][0]["token_ids"] == ch["token_ids"], "greedy outputs differ on a cache hit")
    # Streaming: one event per token, the finish reason on the last, usage, [DONE].
    st, events, done = s.stream({"prompt": p, "max_tokens": 6, "temperature": 0,
                                 "stream_options": {"include_usage": True}})
    check(st == 200 and done, f"stream: {st} {events}")
    toks = [e["choices"][0]["token_ids"] for e in events if e["choices"]]
    check(all(len(t) == 1 for t in toks) and sum(toks, []) == ch["token_ids"],
          f"stream tokens {toks} != {ch['token_ids']}")
    fins = [e["choices"][0]["finish_reason"] for e in events if e["choices"]]
    check(fins == [None] * 5 + ["length"], f"finish reasons {fins}")
    check(events[-1]["choices"] == [] and events[-1]["usage"]["completion_tokens"] == 6,
          f"usage chunk: {events[-1]}")
    # A list of prompts: one choice each, in order; usage summed.
    q = prompt(2, 9)
    st, c, _ = s.post({"prompt": [p, q], "max_tokens": 3, "temperature": 0})
    check(st == 200 and [x["index"] for x in c["choices"]] == [0, 1], f"two prompts: {c}")
    check(c["usage"]["prompt_tokens"] == 29 and c["usage"]["completion_tokens"] == 6, f"{c}")
    # Greedy outputs equal `radixkv run`'s on the same requests.
    reqs = [(prompt(k, 5 + 7 * k), 4 + k) for k in range(6)]
    served = []
    for toks_, mt in reqs:
        st, r, _ = s.post({"prompt": toks_, "max_tokens": mt, "temperature": 0})
        check(st == 200, f"{st} {r}")
        served.append(r["choices"][0]["token_ids"])
    ref = run_reference(RADIXKV, reqs, *ENGINE)
    check(served == ref, f"served {served} != run {ref}")


def bad_requests(s):
    long_ctx = [1] * 17000
    cases = [
        (b"{", 400, None, "malformed JSON"),
        (b"[1, 2]", 400, None, "must be a JSON object"),
        ({}, 400, "prompt", "prompt: missing"),
        ({"prompt": "hello"}, 400, "prompt", "needs a tokenizer"),
        ({"prompt": []}, 400, "prompt", "prompt: empty"),
        ({"prompt": {"a": 1}}, 400, "prompt", "expected token ids"),
        ({"prompt": [1, "a"]}, 400, "prompt", "prompt[1]: expected an integer token id"),
        ({"prompt": [1, 5000]}, 400, "prompt", "prompt[1]: token id 5000 is outside the vocabulary"),
        ({"prompt": [[1, 2], [3, -1]]}, 400, "prompt", "prompt[1][1]: token id -1"),
        ({"prompt": [1], "max_tokens": "5"}, 400, "max_tokens", "max_tokens: expected an integer"),
        ({"prompt": [1], "max_tokens": 0}, 400, "max_tokens", "max_tokens: 0 is outside"),
        ({"prompt": [1], "temperature": -1}, 400, "temperature", "temperature: -1 is outside"),
        ({"prompt": [1], "temperature": "hot"}, 400, "temperature", "expected a number"),
        ({"prompt": [1], "top_p": 0}, 400, "top_p", "top_p: 0 is outside"),
        ({"prompt": [1], "top_k": 1.5}, 400, "top_k", "top_k: expected an integer"),
        ({"prompt": [1], "seed": "x"}, 400, "seed", "seed: expected an integer"),
        ({"prompt": [1], "stream": "yes"}, 400, "stream", "stream: expected a boolean"),
        ({"prompt": [1], "n": 0}, 400, "n", "n: 0 is outside [1, 128]"),
        ({"prompt": [1], "echo": "yes"}, 400, "echo", "echo: expected a boolean"),
        ({"prompt": [1], "stop": ["x"]}, 400, "stop", "stop strings need a tokenizer"),
        ({"prompt": [1], "model": 3}, 400, "model", "model: expected a string"),
        ({"prompt": [1], "model": "other"}, 404, "model", "'other' is not served here"),
        ({"prompt": [1] * 300}, 400, "prompt", "KV pages, the pool has 64"),
        ({"prompt": [1] * 200, "max_tokens": 100}, 400, "max_tokens", "KV pages, the pool has 64"),
        ({"prompt": long_ctx}, 400, "prompt", "longer than the model's context of 16384"),
    ]
    for body, status, param, msg in cases:
        raw = body if isinstance(body, bytes) else None
        st, text, _ = s.request("POST", "/v1/completions", None if raw else body, raw=raw)
        label = raw or json.dumps(body)[:80]
        check(st == status, f"{label}: status {st}, want {status}: {text}")
        err = json.loads(text)["error"]
        check(err["param"] == param, f"{label}: param {err['param']}, want {param}")
        check(msg in err["message"], f"{label}: message {err['message']!r} lacks {msg!r}")
        check(err["code"] == status, f"{label}: code {err['code']}")
    m = s.metrics()
    check(m['radixkv:requests_total{outcome="rejected"}'] >= len(cases), f"rejected count: {m}")


def open_stream(port, body):
    """A raw socket with a streaming request sent and the first event read."""
    sock = socket.create_connection((HOST, port), timeout=60)
    data = json.dumps(dict(body, stream=True)).encode()
    sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\n\r\n" % len(data) + data)
    buf = b""
    deadline = time.time() + 60
    while b"data: " not in buf:
        check(time.time() < deadline, "no event within 60 s")
        chunk = sock.recv(4096)
        check(chunk, f"connection closed before the first event: {buf!r}")
        buf += chunk
    check(buf.startswith(b"HTTP/1.1 200"), f"stream status: {buf[:60]!r}")
    return sock


def queue_and_disconnect(radixkv):
    # One running, one waiting at most: a third prompt is refused with 503 + Retry-After.
    s = Server(radixkv, "--model-name", "tiny", "--page-size", "16", "--num-pages", "512",
               "--max-running", "1", "--max-queue", "1", "--keepalive", "0.1")
    try:
        sock = open_stream(s.port, {"prompt": [[5] * 8, [6] * 8], "max_tokens": 3000,
                                    "temperature": 0})
        st, text, headers = s.request("POST", "/v1/completions", {"prompt": [7], "max_tokens": 1})
        check(st == 503 and "queue is full" in text, f"full queue: {st} {text}")
        check(headers.get("Retry-After") == "1", f"Retry-After: {headers}")
        # The client goes away mid-stream: both prompts are cancelled, every page
        # they held comes back (free or cached), the accounting holds.
        sock.close()
        m = s.wait_idle()
        check(m['radixkv:requests_total{outcome="cancelled"}'] == 2, f"cancelled: {m}")
        check(m["radixkv:generation_tokens_total"] < 6000, f"ran to the end: {m}")
        check(m['radixkv:kv_pages{state="free"}'] + m['radixkv:kv_pages{state="cached"}'] == 512,
              f"pages lost: {m}")
        check(m["radixkv:page_accounting_ok"] == 1, f"accounting: {m}")
        # A client that goes away while its request is still queued (no token
        # written yet) is noticed by the stream's keep-alive and cancelled.
        running = open_stream(s.port, {"prompt": [5] * 8, "max_tokens": 8000, "temperature": 0})
        queued = socket.create_connection((HOST, s.port), timeout=60)
        data = json.dumps({"prompt": [6] * 8, "max_tokens": 5, "stream": True}).encode()
        queued.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
                       b"application/json\r\nContent-Length: %d\r\n\r\n" % len(data) + data)
        deadline = time.time() + 60
        while s.metrics()["radixkv:num_requests_waiting"] < 1:
            check(time.time() < deadline, "second request never queued")
            time.sleep(0.02)
        queued.close()
        while s.metrics()['radixkv:requests_total{outcome="cancelled"}'] < 3:
            check(time.time() < deadline, "a queued request whose client left was not cancelled")
            time.sleep(0.05)
        check(s.metrics()["radixkv:num_requests_running"] == 1, "the running stream stopped")
        running.close()
        m = s.wait_idle()
        check(m['radixkv:requests_total{outcome="cancelled"}'] == 4, f"cancelled: {m}")
        # The server still serves.
        st, r, _ = s.post({"prompt": [7, 8, 9], "max_tokens": 2})
        check(st == 200 and len(r["choices"][0]["token_ids"]) == 2, f"after disconnect: {st} {r}")
        rc, summary = s.stop()
        check(rc == 0 and summary["pages_inflight"] == 0, f"exit {rc}, summary {summary}")
    finally:
        s.kill()


def drain(s):
    # SIGTERM while a request runs: it completes, exit 0.
    result = {}

    def worker():
        result["r"] = s.post({"prompt": prompt(9, 12), "max_tokens": 40, "temperature": 0})

    t = threading.Thread(target=worker)
    t.start()
    deadline = time.time() + 60
    while s.metrics()["radixkv:num_requests_running"] < 1 and t.is_alive():
        check(time.time() < deadline, "request never started")
        time.sleep(0.005)
    rc, summary = s.stop()
    t.join(timeout=60)
    st, r, _ = result["r"]
    check(st == 200 and len(r["choices"][0]["token_ids"]) == 40, f"drained request: {st} {r}")
    check(rc == 0, f"exit status {rc}: {s.stderr()}")
    check(summary["pages_inflight"] == 0 and summary["requests_failed"] == 0, f"summary {summary}")


def command_line():
    # Bad options fail at once (exit 2) naming the option; a taken port too.
    import subprocess
    cases = [(["--trace", "t.jsonl"], "--trace is an option of run only"),
             (["--replicas", "2"], "--replicas is an option of run only"),
             (["--tokenizer", "bpe"], "--tokenizer: unknown value 'bpe'"),
             (["--port", "70000"], "--port: expected an integer in [0, 65535]"),
             (["--keepalive", "0"], "--keepalive: expected a number in [0.01, 3600]"),
             (["--host", "localhost"], "--host: 'localhost' is not a numeric address"),
             (["--page-size", "0"], "--page-size"),
             (["--bogus"], "unknown option --bogus")]
    for args, msg in cases:
        p = subprocess.run([RADIXKV, "serve", *args], capture_output=True, text=True, timeout=60)
        check(p.returncode == 2 and msg in p.stderr, f"serve {args}: {p.returncode} {p.stderr}")
    s = Server(RADIXKV)
    try:
        p = subprocess.run([RADIXKV, "serve", "--host", HOST, "--port", str(s.port)],
                           capture_output=True, text=True, timeout=60)
        check(p.returncode != 0 and f"cannot listen on {HOST} port {s.port}" in p.stderr,
              f"taken port: {p.returncode} {p.stderr}")
    finally:
        s.kill()


def overlap():
    # --schedule overlap: concurrent requests equal run's outputs; streams cut off
    # while a step is in flight give their pages back.
    eng = ["--schedule", "overlap", "--page-size", "4", "--num-pages", "512", "--max-running", "8"]
    s = Server(RADIXKV, *eng)
    try:
        reqs = [([(k * 37 + i * 11) % 4000 + 1 for i in range(10 + 3 * k)], 5 + k) for k in range(12)]
        res = [None] * len(reqs)

        def worker(i):
            res[i] = s.post({"prompt": reqs[i][0], "max_tokens": reqs[i][1], "temperature": 0})

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(reqs))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        got = [r[1]["choices"][0]["token_ids"] if r and r[0] == 200 else r for r in res]
        ref = run_reference(RADIXKV, reqs, *eng)
        check(got == ref, f"overlap: served {got} != run {ref}")
        for k in range(5):
            open_stream(s.port, {"prompt": [[5 + k] * 9, [6 + k] * 13], "max_tokens": 2000,
                                 "temperature": 0}).close()
        m = s.wait_idle()
        check(m["radixkv:page_accounting_ok"] == 1 and
              m['radixkv:requests_total{outcome="cancelled"}'] == 10, f"overlap cancels: {m}")
        rc, summary = s.stop()
        check(rc == 0 and summary["pages_inflight"] == 0, f"exit {rc}: {summary}")
    finally:
        s.kill()


def pinned():
    # run's --pin works for serve too: the first request already finds the prefix.
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        pin = __import__("os").path.join(d, "pin.jsonl")
        with open(pin, "w") as f:
            f.write(json.dumps({"tokens": list(range(1, 33))}) + "\n")
        s = Server(RADIXKV, "--pin", pin, "--page-size", "16")
        try:
            st, r, _ = s.post({"prompt": list(range(1, 41)), "max_tokens": 2})
            check(st == 200 and r["usage"]["prompt_tokens_details"]["cached_tokens"] == 32,
                  f"pinned prefix: {st} {r}")
            rc, summary = s.stop()
            check(rc == 0 and summary["pages_cached"] == 2, f"exit {rc}: {summary}")
        finally:
            s.kill()


def main():
    command_line()
    pinned()
    overlap()
    s = Server(RADIXKV, "--model-name", "tiny", *ENGINE)
    try:
        endpoints(s)
        completions(s)
        bad_requests(s)
        drain(s)
    finally:
        s.kill()
    queue_and_disconnect(RADIXKV)
    print("serve api: ok")


if __name__ == "__main__":
    main()
