#!/usr/bin/env python3
"""The official `openai` client, unmodified, against `radixkv serve --tokenizer
DIR` on the cpu model: a text completion, a chat completion and a streamed
chat completion with usage. Counts are checked against the server's own
/tokenize, texts against /detokenize of the ids, the stream against the
whole answer; a chat with a role the renderer refuses is the client's
BadRequestError.
Runs under RKV_SERVE_PYTHON (scripts/serve_venv.sh); exits 77 (skip) without it.
Usage: test_serve_text_openai.py RADIXKV TEMPLATES_DIR"""
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "serve"))
sys.path.insert(0, HERE)
from serve_util import check, reexec_under_serve_python, stop_checked, tokenizer_server  # noqa: E402

reexec_under_serve_python(__file__, "openai")
import openai  # noqa: E402


def main():
    radixkv, tdir = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as tmp:
        s, _ = tokenizer_server(radixkv, tmp, os.path.join(tdir, "qwen2.5.jinja"),
                                "--model-name", "tiny")
        try:
            def post(path, body):
                st, text, _ = s.request("POST", path, body)
                check(st == 200, f"{path}: {st} {text}")
                return json.loads(text)

            client = openai.OpenAI(base_url=s.base + "/v1", api_key="none", max_retries=0,
                                   timeout=120)
            a = client.completions.create(model="tiny", prompt="Once upon a time", max_tokens=6,
                                          temperature=0)
            n = post("/tokenize", {"prompt": "Once upon a time"})["count"]
            check(a.usage.prompt_tokens == n == 17, f"text prompt tokens {a.usage} vs {n}")
            text = post("/detokenize", {"tokens": a.choices[0].token_ids})["prompt"]
            check(a.choices[0].text == text and text, f"text {a.choices[0].text!r} vs {text!r}")
            msgs = [{"role": "system", "content": "You answer briefly."},
                    {"role": "user", "content": "Name a prime."}]
            c = client.chat.completions.create(model="tiny", messages=msgs, max_tokens=5,
                                               temperature=0)
            n = post("/tokenize", {"messages": msgs})["count"]
            check(c.usage.prompt_tokens == n and c.choices[0].message.role == "assistant" and
                  c.choices[0].message.content, f"chat {c}")
            chunks = list(client.chat.completions.create(
                model="tiny", messages=msgs, max_tokens=5, temperature=0, stream=True,
                stream_options={"include_usage": True}))
            joined = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
            check(joined == c.choices[0].message.content, f"stream {joined!r} vs whole")
            check(chunks[-1].usage.prompt_tokens == n and
                  chunks[-1].usage.prompt_tokens_details.cached_tokens > 0, f"{chunks[-1].usage}")
            try:
                client.chat.completions.create(model="tiny", max_tokens=2, messages=[
                    {"role": "tool", "content": "x", "tool_call_id": "a"}])
                check(False, "a tool message was accepted")
            except openai.BadRequestError as e:
                check("not supported" in str(e), f"{e}")
        finally:
            stop_checked(s, check)
    print("test_serve_text_openai: ok")


if __name__ == "__main__":
    main()
