#!/usr/bin/env python3
"""`radixkv tokenize` on the command line, with a hand-made tokenizer (one
token per byte, so token counts are byte counts) and no Python packages:

- --convert turns OpenAI chat JSONL, a ShareGPT JSON array and plain prompts
  into a token trace: one request per user turn, each turn's prompt extending
  the one before it (the shared prefix a chat server sees), max_tokens the
  assistant answer's length; `radixkv cache-sim` replays the trace and finds
  the shared prefixes as cache hits.
- bad input fails with a message naming its place and exit status 1: a
  malformed tokenizer.json, an unsupported model type, a line that is not
  JSON or not valid UTF-8, a conversation without a template, an unknown
  template.

Usage: test_tokenize_cli.py RADIXKV TEMPLATES_DIR
"""
import json
import os
import subprocess
import sys
import tempfile


def byte_chars():
    keep = [b for b in range(256) if 33 <= b <= 126 or 161 <= b <= 172 or b >= 174]
    out, extra = {}, 0
    for b in range(256):
        if b in keep:
            out[b] = chr(b)
        else:
            out[b] = chr(256 + extra)
            extra += 1
    return out


def write_tokenizer(d, template=None, model_type="BPE"):
    os.makedirs(d, exist_ok=True)
    bc = byte_chars()
    vocab = {bc[b]: b for b in range(256)}
    specials = ["<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]
    added = [{"id": 256 + i, "content": s, "single_word": False, "lstrip": False,
              "rstrip": False, "normalized": False, "special": True}
             for i, s in enumerate(specials)]
    tj = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
          "normalizer": None,
          "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                            "use_regex": True},
          "post_processor": {"type": "TemplateProcessing",
                             "single": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}},
                                        {"Sequence": {"id": "A", "type_id": 0}}],
                             "pair": [{"Sequence": {"id": "A", "type_id": 0}},
                                      {"Sequence": {"id": "B", "type_id": 1}}],
                             "special_tokens": {"<|begin_of_text|>": {
                                 "id": "<|begin_of_text|>", "ids": [256],
                                 "tokens": ["<|begin_of_text|>"]}}},
          "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                      "use_regex": True},
          "model": {"type": model_type, "dropout": None, "unk_token": None, "vocab": vocab,
                    "merges": []}}
    with open(os.path.join(d, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tj, f)
    if template is not None:
        with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as f:
            json.dump({"chat_template": template, "bos_token": "<|begin_of_text|>",
                       "eos_token": "<|eot_id|>"}, f)


def run(args, **kw):
    return subprocess.run(args, capture_output=True, text=True, **kw)


def main():
    radixkv, tdir = sys.argv[1], sys.argv[2]
    fails = []

    def check(cond, what):
        if not cond:
            fails.append(what)
            print("FAIL:", what)

    with open(os.path.join(tdir, "llama-3.jinja"), encoding="utf-8") as f:
        llama3 = f.read()
    with tempfile.TemporaryDirectory() as tmp:
        tok = os.path.join(tmp, "tok")
        write_tokenizer(tok, llama3)
        # --text / --ids round trip
        p = run([radixkv, "tokenize", "--tokenizer", tok, "--text", "hé"])
        check(p.returncode == 0 and json.loads(p.stdout)["ids"] == [256, 104, 195, 169],
              f"--text: {p.stdout} {p.stderr}")
        p = run([radixkv, "tokenize", "--tokenizer", tok, "--ids", "256,104,195,169",
                 "--skip-special"])
        check(p.returncode == 0 and json.loads(p.stdout)["text"] == "hé", f"--ids: {p.stdout}")

        # --convert: OpenAI chat (two conversations), ShareGPT, plain
        chats = [
            {"messages": [{"role": "system", "content": "Be brief."},
                          {"role": "user", "content": "Hi"},
                          {"role": "assistant", "content": "Hello there"},
                          {"role": "user", "content": "Name a colour"},
                          {"role": "assistant", "content": "Blue"},
                          {"role": "user", "content": "Another"}]},
            {"messages": [{"role": "user", "content": "One turn"}]},
        ]
        src = os.path.join(tmp, "chats.jsonl")
        with open(src, "w", encoding="utf-8") as f:
            f.write("".join(json.dumps(c) + "\n" for c in chats) + "\n")
        out = os.path.join(tmp, "trace.jsonl")
        p = run([radixkv, "tokenize", "--tokenizer", tok, "--convert", src, "--output", out,
                 "--max-tokens", "7"])
        check(p.returncode == 0, f"--convert chats: {p.stderr}")
        reqs = [json.loads(line) for line in open(out, encoding="utf-8")]
        check(len(reqs) == 4, f"4 requests from 4 user turns, got {len(reqs)}")
        if len(reqs) == 4:
            a, b, c, d = reqs
            check(b["tokens"][:len(a["tokens"])] == a["tokens"], "turn 2 extends turn 1")
            check(c["tokens"][:len(b["tokens"])] == b["tokens"], "turn 3 extends turn 2")
            check([r["max_tokens"] for r in reqs] == [len("Hello there"), len("Blue"), 7, 7],
                  f"max_tokens {[r['max_tokens'] for r in reqs]}")
            check([r["id"] for r in reqs] == ["c0.t0", "c0.t1", "c0.t2", "c1.t0"],
                  f"ids name conversation and turn: {[r['id'] for r in reqs]}")
            text = run([radixkv, "tokenize", "--tokenizer", tok, "--ids",
                        ",".join(map(str, a["tokens"]))])
            check(json.loads(text.stdout)["text"] ==
                  "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief."
                  "<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
                  "<|start_header_id|>assistant<|end_header_id|>\n\n", f"turn 1 text {text.stdout}")
            # the shared prefixes are cache hits when the trace is replayed
            p = run([radixkv, "cache-sim", "--cache", "radix", "--capacity", "100000",
                     "--page-size", "1", out])
            summary = [json.loads(x) for x in p.stdout.splitlines()] if p.returncode == 0 else []
            hits = sum(x.get("matched", 0) for x in summary if x.get("type") == "request")
            check(p.returncode == 0 and hits >= len(a["tokens"]) + len(b["tokens"]),
                  f"cache-sim on the converted trace: rc {p.returncode}, cached {hits}, "
                  f"{p.stderr[-300:]} {p.stdout[-300:]}")
        sg = os.path.join(tmp, "sharegpt.json")
        with open(sg, "w", encoding="utf-8") as f:
            json.dump([{"id": "x", "conversations": [{"from": "human", "value": "Q1"},
                                                    {"from": "gpt", "value": "A1"},
                                                    {"from": "human", "value": "Q2"}]}], f)
        p = run([radixkv, "tokenize", "--tokenizer", tok, "--convert", sg, "--quiet"])
        lines = [json.loads(x) for x in p.stdout.splitlines()]
        check(p.returncode == 0 and len(lines) == 2 and lines[0]["max_tokens"] == 2,
              f"ShareGPT: {p.returncode} {p.stdout} {p.stderr}")
        pl = os.path.join(tmp, "plain.jsonl")
        with open(pl, "w", encoding="utf-8") as f:
            f.write(json.dumps({"prompt": "abc", "max_tokens": 3}) + "\n" +
                    json.dumps({"text": "xy"}) + "\n")
        p = run([radixkv, "tokenize", "--tokenizer", tok, "--convert", pl, "--quiet"])
        lines = [json.loads(x) for x in p.stdout.splitlines()]
        check(p.returncode == 0 and [x["tokens"] for x in lines] == [[256, 97, 98, 99], [256, 120, 121]]
              and [x["max_tokens"] for x in lines] == [3, 128], f"plain: {p.stdout} {p.stderr}")

        # bad input: each a message naming its place, exit status 1
        def refused(args, needle, what, stdin=None):
            q = run(args, input=stdin)
            check(q.returncode == 1 and needle in q.stderr,
                  f"{what}: rc {q.returncode}, stderr {q.stderr!r} lacks {needle!r}")

        bad = os.path.join(tmp, "bad.jsonl")
        with open(bad, "wb") as f:
            f.write(b'{"prompt": "fine"}\n{"prompt": "caf\xe9"}\n')
        refused([radixkv, "tokenize", "--tokenizer", tok, "--convert", bad], f"{bad}:2:",
                "invalid UTF-8 in a line")
        with open(bad, "w") as f:
            f.write('{"prompt": "fine"}\n\n{"messages": 3}\n')
        refused([radixkv, "tokenize", "--tokenizer", tok, "--convert", bad],
                f"{bad}:3: messages: not an array", "messages not an array")
        with open(bad, "w") as f:
            f.write('{"messages": [{"role": "user", "content": "x"}]}\n')
        notmpl = os.path.join(tmp, "notmpl")
        write_tokenizer(notmpl)
        refused([radixkv, "tokenize", "--tokenizer", notmpl, "--convert", bad],
                "has no chat_template; give one with --chat-template FILE", "no template")
        unknown = os.path.join(tmp, "unknown")
        write_tokenizer(unknown, "{{ messages }}")
        refused([radixkv, "tokenize", "--tokenizer", unknown, "--convert", bad],
                "tokenizer_config.json: chat_template: unknown chat template", "unknown template")
        p = run([radixkv, "tokenize", "--tokenizer", unknown, "--chat-template",
                 os.path.join(tdir, "llama-3.jinja"), "--convert", bad, "--quiet"])
        check(p.returncode == 0 and len(p.stdout.splitlines()) == 1,
              f"--chat-template FILE: {p.stderr}")
        broken = os.path.join(tmp, "broken")
        os.makedirs(broken)
        with open(os.path.join(broken, "tokenizer.json"), "w") as f:
            f.write('{"model": {"type": "BPE", "vocab": {"a": 0},\n "merges": [')
        refused([radixkv, "tokenize", "--tokenizer", broken, "--text", "a"],
                os.path.join(broken, "tokenizer.json") + ":2:", "malformed tokenizer.json")
        wp = os.path.join(tmp, "wordpiece")
        write_tokenizer(wp, model_type="WordPiece")
        refused([radixkv, "tokenize", "--tokenizer", wp, "--text", "a"],
                "model.type: 'WordPiece' is not supported", "unsupported model type")
        refused([radixkv, "tokenize", "--tokenizer", tok, "--batch", "-"], "-:2: needs",
                "a batch line of the wrong shape", stdin='{"text": "a"}\n{"foo": 1}\n')
        refused([radixkv, "tokenize", "--tokenizer", tok, "--ids", "1,99999"],
                "--ids: token 1: id 99999 is outside the vocabulary", "an id out of range")
        q = run([radixkv, "tokenize", "--tokenizer", tok])
        check(q.returncode == 2, "no mode is a usage error")
    print(f"test_tokenize_cli: {len(fails)} failures")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
