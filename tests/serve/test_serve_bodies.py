#!/usr/bin/env python3
"""Large /v1/completions bodies are parsed on a thread of their own while
their connection waits, and answer as small ones do (standard library only).

A body of 256 KiB or more goes that way; padding a request with JSON
whitespace or with a field vLLM does not define (ignored, as vLLM ignores it)
makes one without changing what it asks. Checked: the same answers as the
small request (plain and streamed), malformed JSON and a refused field still
named, several at once beside small requests, and a SIGTERM while they parse
(exit 0, nothing leaked in the sanitizer build). How long a big body kept
other clients waiting before is a measurement, not a test: see the README.
Usage: test_serve_bodies.py PATH/TO/radixkv"""
import json
import os
import sys
import tempfile
import threading

sys.path.insert(0, os.path.dirname(__file__))
from serve_util import Server, check  # noqa: E402

RADIXKV = sys.argv[1]
BIG = 300 << 10  # over the server's 256 KiB threshold


def padded(body):
    """body as JSON text with whitespace enough to be big."""
    text = json.dumps(body)
    return text[:-1] + " " * BIG + "}"


def choices(r):
    return [(c["token_ids"], c["finish_reason"]) for c in r["choices"]]


def main():
    s = Server(RADIXKV)
    try:
        p = [5, 6, 7, 8, 9, 10, 11, 12]
        for body in [{"prompt": p, "max_tokens": 4, "temperature": 0, "return_token_ids": True},
                     {"prompt": [p, p[:5]], "max_tokens": 3, "temperature": 0.9, "seed": 7,
                      "n": 2, "return_token_ids": True}]:
            st, small, _ = s.post(body)
            check(st == 200, f"small: {st} {small}")
            st, text, _ = s.request("POST", "/v1/completions", raw=padded(body))
            check(st == 200 and choices(json.loads(text)) == choices(small),
                  f"big body {st}: {text[:300]} vs {small}")
        # Streamed: the same tokens.
        st, text, _ = s.request("POST", "/v1/completions",
                                raw=padded({"prompt": p, "max_tokens": 3, "temperature": 0,
                                            "stream": True}))
        check(st == 200 and text.rstrip().endswith("data: [DONE]"), f"big stream: {st} {text[:300]}")
        # Malformed and refused, as for small bodies.
        st, text, _ = s.request("POST", "/v1/completions",
                                raw=padded({"prompt": p, "max_tokens": 2})[:-1])
        err = json.loads(text)["error"]
        check(st == 400 and "malformed JSON" in err["message"], f"big malformed: {st} {text[:300]}")
        st, text, _ = s.request("POST", "/v1/completions",
                                raw=padded({"prompt": p, "max_tokens": 2, "use_beam_search": True}))
        err = json.loads(text)["error"]
        check(st == 400 and err["param"] == "use_beam_search", f"big refused: {st} {text[:300]}")
        # Several big ones at once, small ones between them.
        out = []

        def one(i):
            body = {"prompt": p, "max_tokens": 2, "temperature": 0, "x_pad": list(range(40000))}
            st, text, _ = s.request("POST", "/v1/completions", raw=json.dumps(body))
            out.append((st, json.loads(text)))

        ts = [threading.Thread(target=one, args=(i,)) for i in range(4)]
        for t in ts:
            t.start()
        for _ in range(5):
            st, r, _ = s.post({"prompt": p, "max_tokens": 1})
            check(st == 200, f"small beside big: {st} {r}")
        for t in ts:
            t.join(timeout=120)
        check(len(out) == 4 and all(st == 200 for st, _ in out)
              and len({tuple(r["choices"][0]["token_ids"]) for _, r in out}) == 1,
              f"big bodies at once: {[(st, r.get('error')) for st, r in out]}")
    finally:
        s.kill()
    # SIGTERM while big bodies parse: their answers (or a closed socket), and
    # a clean exit.
    s = Server(RADIXKV)
    try:
        res = []

        def big(i):
            body = {"prompt": [5, 6], "max_tokens": 1, "x_pad": list(range(300000))}
            try:
                st, text, _ = s.request("POST", "/v1/completions", raw=json.dumps(body), timeout=120)
                res.append(st)
            except OSError as e:
                res.append(str(e))

        ts = [threading.Thread(target=big, args=(i,)) for i in range(3)]
        for t in ts:
            t.start()
        st, r, _ = s.post({"prompt": [5, 6], "max_tokens": 1})
        code, _ = s.stop()
        for t in ts:
            t.join(timeout=120)
        check(code == 0, f"exit {code} after SIGTERM with big bodies in flight: {s.stderr()[-2000:]}")
        check(len(res) == 3, f"clients: {res}")
    finally:
        s.kill()
    chat()
    print("serve bodies: ok")


def chat():
    """A big chat request (rewritten into a completion, then parsed on its
    thread) answers as the small one."""
    text_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "text")
    sys.path.insert(0, text_dir)
    from test_tokenize_cli import write_tokenizer  # noqa: E402
    with open(os.path.join(text_dir, "templates", "llama-3.jinja"), encoding="utf-8") as f:
        template = f.read()
    with tempfile.TemporaryDirectory() as tmp:
        tok = os.path.join(tmp, "tok")
        write_tokenizer(tok, template)
        s = Server(RADIXKV, "--tokenizer", tok)
        try:
            body = {"messages": [{"role": "user", "content": "hello " * 20}], "max_tokens": 3,
                    "temperature": 0}
            st, small, _ = s.request("POST", "/v1/chat/completions", raw=json.dumps(body))
            check(st == 200, f"small chat: {st} {small}")
            # Rewritten into a completion of 256 KiB or more (more tokens than
            # the context: refused for its length, after the parse thread).
            big = dict(body, messages=[{"role": "user", "content": "hello " * 20},
                                       {"role": "assistant", "content": "x " * 4000}] * 40
                       + body["messages"])
            st, text, _ = s.request("POST", "/v1/chat/completions", raw=json.dumps(big))
            err = json.loads(text).get("error", {})
            check(st == 400 and err.get("param") in ("prompt", "max_tokens")
                  and "context" in err.get("message", ""), f"big chat: {st} {text[:300]}")
            st, text, _ = s.request("POST", "/v1/chat/completions", raw=padded(body))
            check(st == 200 and json.loads(text)["choices"][0]["message"]
                  == json.loads(small)["choices"][0]["message"], f"padded chat: {st} {text[:300]}")
        finally:
            s.kill()


if __name__ == "__main__":
    main()
