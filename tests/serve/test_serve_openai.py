#!/usr/bin/env python3
"""The official `openai` Python client against `radixkv serve`: completions,
streams, usage with cached tokens; greedy outputs equal `radixkv run`'s on the
same requests; n > 1, logprobs and echo as the client's types carry them; a
bad request surfaces as the client's BadRequestError.
Runs under RKV_SERVE_PYTHON (scripts/serve_venv.sh); exits 77 (skip) without it.
Usage: test_serve_openai.py PATH/TO/radixkv"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_util import Server, check, reexec_under_serve_python, run_reference  # noqa: E402

reexec_under_serve_python(__file__, "openai")
import openai  # noqa: E402

RADIXKV = sys.argv[1]
ENGINE = ["--page-size", "4", "--num-pages", "256"]


def main():
    s = Server(RADIXKV, "--model-name", "tiny", "--max-logprobs", "3", *ENGINE)
    try:
        client = openai.OpenAI(base_url=s.base + "/v1", api_key="none", max_retries=0, timeout=120)
        check([m.id for m in client.models.list().data] == ["tiny"], "models.list")
        p = [(i * 37) % 4000 + 1 for i in range(30)]
        a = client.completions.create(model="tiny", prompt=p, max_tokens=5, temperature=0)
        ids = a.choices[0].token_ids
        check(len(ids) == 5 and a.choices[0].finish_reason == "length", f"{a}")
        check(a.usage.prompt_tokens == 30 and a.usage.completion_tokens == 5, f"{a.usage}")
        b = client.completions.create(model="tiny", prompt=p, max_tokens=5, temperature=0)
        check(b.usage.prompt_tokens_details.cached_tokens == 28, f"cached: {b.usage}")
        check(b.choices[0].token_ids == ids, "outputs differ on a cache hit")
        chunks = list(client.completions.create(model="tiny", prompt=p, max_tokens=5,
                                                temperature=0, stream=True,
                                                stream_options={"include_usage": True}))
        streamed = [t for c in chunks if c.choices for t in c.choices[0].token_ids]
        check(streamed == ids, f"stream {streamed} != {ids}")
        check(chunks[-1].usage.completion_tokens == 5 and
              chunks[-1].usage.prompt_tokens_details.cached_tokens == 28, f"{chunks[-1]}")
        reqs = [([(k * 101 + i * 7) % 4000 + 1 for i in range(3 + 5 * k)], 3 + k) for k in range(5)]
        served = [client.completions.create(model="tiny", prompt=t, max_tokens=mt,
                                            temperature=0).choices[0].token_ids for t, mt in reqs]
        ref = run_reference(RADIXKV, reqs, *ENGINE)
        check(served == ref, f"served {served} != run {ref}")
        # n samples share the prompt's pages (usage counts it once, as vLLM); logprobs; echo.
        many = client.completions.create(model="tiny", prompt=p, max_tokens=3, n=3,
                                         temperature=1.0, seed=5)
        check([c.index for c in many.choices] == [0, 1, 2] and
              many.usage.prompt_tokens == 30 and
              many.usage.prompt_tokens_details.cached_tokens == 28, f"n=3: {many}")
        lp = client.completions.create(model="tiny", prompt=p, max_tokens=3, temperature=0,
                                       logprobs=3).choices[0].logprobs
        check(len(lp.token_logprobs) == 3 and all(x <= 0 for x in lp.token_logprobs) and
              all(len(t) == 3 and max(t.values()) == x
                  for t, x in zip(lp.top_logprobs, lp.token_logprobs)) and
              lp.tokens == [f"token_id:{t}" for t in ids[:3]], f"logprobs: {lp}")
        e = client.completions.create(model="tiny", prompt=p, max_tokens=2, temperature=0,
                                      echo=True).choices[0]
        check(e.model_extra["prompt_token_ids"] == p and e.token_ids == ids[:2], f"echo: {e}")
        try:
            client.completions.create(model="tiny", prompt=[1, 99999], max_tokens=2)
            check(False, "an id outside the vocabulary was accepted")
        except openai.BadRequestError as e:
            check(e.status_code == 400 and "outside the vocabulary" in str(e), f"{e}")
        rc, summary = s.stop()
        check(rc == 0 and summary["pages_inflight"] == 0, f"exit {rc}: {summary}")
    finally:
        s.kill()
    print("serve openai: ok")


if __name__ == "__main__":
    main()
