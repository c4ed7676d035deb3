#!/usr/bin/env python3
"""guidellm, unmodified and with its defaults (chat completions, its own
synthetic text tokenized by the model's tokenizer), against `radixkv serve
--tokenizer DIR` on the cpu model. The server names its model after the
tokenizer directory, so guidellm loads the same tokenizer with transformers
from the model name, as it would a Hugging Face model id. 4 synchronous
requests of 32 synthetic prompt tokens and 8 output tokens; guidellm's
per-request prompt and output token counts must sum to the server's
vllm:prompt_tokens_total and vllm:generation_tokens_total.

Runs under RKV_SERVE_PYTHON with guidellm installed (scripts/serve_venv.sh);
exits 77 (skip) without it.
Usage: test_guidellm.py RADIXKV TEMPLATES_DIR"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "serve"))
sys.path.insert(0, HERE)
from serve_util import (Server, check, reexec_under_serve_python, stop_checked,  # noqa: E402
                        word_tokenizer)

reexec_under_serve_python(__file__, "guidellm")


def main():
    radixkv, tdir = sys.argv[1], sys.argv[2]
    guidellm = os.path.join(os.path.dirname(sys.executable), "guidellm")
    if not os.access(guidellm, os.X_OK):
        print(f"{guidellm} not found: skipping", file=sys.stderr)
        sys.exit(77)
    with tempfile.TemporaryDirectory() as tmp:
        # the model is named by the tokenizer's directory, as a Hugging Face id would be
        tok = word_tokenizer(tmp, os.path.join(tdir, "llama-3.jinja"))
        s = Server(radixkv, "--model-name", tok, "--tokenizer", tok)
        try:
            scen = os.path.join(tmp, "scenario.json")
            with open(scen, "w") as f:
                json.dump({"spec": {
                    "backend": {"kind": "openai_http", "target": s.base},
                    "profile": {"kind": "synchronous"},
                    "data": [{"kind": "synthetic_text", "prompt_tokens": 32, "output_tokens": 8}],
                    "constraints": [{"kind": "max_requests", "count": 4}]}}, f)
            out = os.path.join(tmp, "guidellm.json")
            p = subprocess.run([guidellm, "run", "--scenario", scen, "--output",
                                f"kind=json,path={out}", "--disable-console-interactive"],
                               capture_output=True, text=True, timeout=600, cwd=tmp)
            check(p.returncode == 0, f"guidellm failed ({p.returncode}): {p.stdout[-1500:]}"
                                     f"{p.stderr[-1500:]}")
            with open(out) as f:
                report = json.load(f)
            reqs = report["benchmarks"][0]["requests"]
            ok = reqs["successful"]
            check(len(ok) == 4 and not reqs.get("errored"), f"guidellm requests: {len(ok)} ok, "
                  f"{len(reqs.get('errored') or [])} errored")
            m = s.metrics()
            server = {k: sum(v for name, v in m.items() if name.split("{")[0] == k)
                      for k in ("vllm:prompt_tokens_total", "vllm:generation_tokens_total")}
            prompt = sum(r["prompt_tokens"] for r in ok)
            output = sum(r["output_tokens"] for r in ok)
            check(all(r["output_tokens"] == 8 for r in ok), f"output tokens {[r['output_tokens'] for r in ok]}")
            check(prompt == server["vllm:prompt_tokens_total"], f"guidellm prompt tokens {prompt} != "
                  f"server {server['vllm:prompt_tokens_total']}")
            check(output == server["vllm:generation_tokens_total"], f"guidellm output tokens {output} "
                  f"!= server {server['vllm:generation_tokens_total']}")
        finally:
            stop_checked(s, check)
    print(f"test_guidellm: ok ({prompt} prompt, {output} output tokens on both sides)")


if __name__ == "__main__":
    main()
