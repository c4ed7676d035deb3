#!/usr/bin/env python3
"""Prefill/decode disaggregation across two processes: `radixkv serve --role
prefill` and `--role decode` sharing a redis-server (the remote tier, started
here on a free loopback port), behind sglang-router --pd-disaggregation.
  1. prompts with shared prefixes, streaming and not, through the router: the
     outputs equal a colocated server's (greedy), and the decode side's
     cached_tokens equal the full pages handed over, floor((n-1)/P)*P; the
     same through vllm-router --vllm-pd-disaggregation when it is installed
     (kv_transfer_params carry the handoff record);
  2. a handed-over page deleted from Redis before the decode side loads it:
     the request fails (500) naming the missing page, no hang;
  3. a room no prefill ever takes: 500 (and an SSE error event when
     streaming) at --pd-timeout (a second decode server, --pd-timeout 3);
  4. the prefill server frozen (SIGSTOP) with two rooms taken, one asked of
     the servers directly and one through the router, then killed: the decode
     server (--pd-timeout 600) fails both once the prefill's liveness key
     lapses, naming the room and the prefill server (its port and pid) --
     the client's 150 s timeout would fail the test had it waited for
     --pd-timeout; the decode server stays healthy and exits with no page in
     flight. The prefill's engine is held in its idle check (the
     RKV_SERVE_TEST_CHECK_GATE FIFO, never opened for writing) so that it
     takes the rooms and never hands them over.
Runs under RKV_SERVE_PYTHON (scripts/serve_venv.sh); exits 77 (skip) without
sglang-router or without redis-server on PATH.
Usage: test_serve_pd.py PATH/TO/radixkv"""
import json
import os
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_util import HOST, check, reexec_under_serve_python  # noqa: E402

reexec_under_serve_python(__file__, "sglang_router")
from pd_util import PdProcesses, PdRouter, post  # noqa: E402
from router_util import available  # noqa: E402

RADIXKV = sys.argv[1]
P = 4
TIMEOUT = 3  # --pd-timeout of the second decode server (part 3), seconds
LONG = 600  # --pd-timeout of the decode server behind the router: never reached
ENGINE = ["--model-name", "tiny", "--page-size", str(P), "--num-pages", "512",
          "--tokenizer", "ids", "--max-tokens", "8"]


def stream_result(events):
    """token ids (from the ids tokenizer's text), usage, error events of a stream."""
    text = "".join(e["choices"][0].get("text", "") for e in events if e.get("choices"))
    usage = [e["usage"] for e in events if e.get("usage")]
    errors = [e for e in events if "error" in e]
    return [int(t) for t in text.split()], usage[-1] if usage else None, errors


def prompts(seed=0):
    docs = [[(d * 389 + i * 53 + seed * 1117) % 3000 + 10 for i in range(22)] for d in range(2)]
    out = []
    for k in range(6):
        out.append(docs[k % 2] + [(k * 97 + i * 31 + seed * 577) % 3000 + 5 for i in range(3 + k)])
    return out


def text_of(ids):
    return " ".join(map(str, ids))


def dead_prefill(redis, pre, dec, router, ps):
    """Part 4 (module docstring); returns what the decode server and the router
    answered, for the summary line."""
    # A plain request, answered whole; the engine then waits in its idle check.
    st, r, _ = pre.post({"prompt": text_of(ps[4]), "max_tokens": 2})
    check(st == 200, f"gated prefill, plain request: {st} {r}")
    marks = set(redis.cmd("KEYS", "rkv:pdtest:pd:taken:*") or [])
    got = {}

    def ask(name, fn):
        try:
            got[name] = fn()
        except OSError as e:
            got[name] = (599, f"{type(e).__name__}: {e}")
    room = 4242
    direct = {"prompt": text_of(ps[2]), "max_tokens": 6, "temperature": 0, "bootstrap_room": room}
    routed = {"model": "tiny", "prompt": text_of(ps[3]), "max_tokens": 6, "temperature": 0}
    threads = [threading.Thread(target=ask, args=a) for a in [
        ("prefill", lambda: pre.post(direct, timeout=150)[:2]),
        ("decode", lambda: dec.post(direct, timeout=150)[:2]),
        ("router", lambda: post(router.port, routed, timeout=150))]]
    for t in threads:
        t.start()
    # Both rooms marked taken by the prefill server before it is frozen.
    for _ in range(3000):
        new = set(redis.cmd("KEYS", "rkv:pdtest:pd:taken:*") or []) - marks
        if len(new) == 2:
            break
        time.sleep(0.02)
    check(len(new) == 2 and f"rkv:pdtest:pd:taken:{room}" in new, f"rooms taken: {new}")
    pre.proc.send_signal(signal.SIGSTOP)
    frozen = time.time()
    threads[1].join(160)
    took = time.time() - frozen  # printed, never asserted
    st, r = got.get("decode", (0, "no answer"))
    msg = r["error"]["message"] if isinstance(r, dict) and "error" in r else str(r)
    name = f"{HOST}:{pre.port} pid {pre.proc.pid}"
    check(st == 500 and f"bootstrap_room {room}" in msg and name in msg and "liveness" in msg,
          f"frozen prefill, decode asked directly: {st} {msg}")
    pre.kill()
    for t in threads:
        t.join(160)
    st, r = got.get("router", (0, "no answer"))
    check(st >= 500, f"dead prefill through the router: {st} {r}")
    check(got.get("prefill", (0,))[0] == 599, f"the killed prefill answered: {got.get('prefill')}")
    return f"decode {msg!r} {took:.1f} s after the freeze; router {st}"


def main():
    pd = PdProcesses("rkv-pd-", "pdtest")
    redis, tier = pd.redis, pd.tier
    try:
        colo = pd.server(RADIXKV, *ENGINE)
        pre = pd.server(RADIXKV, *ENGINE, *tier, "--role", "prefill")
        dec = pd.server(RADIXKV, *ENGINE, *tier, "--role", "decode", "--pd-timeout", str(LONG))
        dec3 = pd.server(RADIXKV, *ENGINE, *tier, "--role", "decode", "--pd-timeout", str(TIMEOUT))
        router = pd.router = PdRouter(pre.base, dec.base)
        ps = prompts()
        ref = []
        for p in ps:
            st, r, _ = colo.post({"prompt": text_of(p), "max_tokens": 6, "temperature": 0})
            check(st == 200, f"colocated: {st} {r}")
            ref.append(r["choices"][0]["token_ids"])

        # 1. Through the router, plain and streaming.
        gen0 = pre.metrics()["radixkv:generation_tokens_total"]
        for i, p in enumerate(ps):
            want_cached = (len(p) - 1) // P * P
            body = {"model": "tiny", "prompt": text_of(p), "max_tokens": 6, "temperature": 0}
            st, r = post(router.port, body)
            check(st == 200, f"router, prompt {i}: {st} {r}")
            got = [int(t) for t in r["choices"][0]["text"].split()]
            check(got == ref[i], f"prompt {i}: {got} != colocated {ref[i]}")
            cached = r["usage"]["prompt_tokens_details"]["cached_tokens"]
            check(cached == want_cached, f"prompt {i}: cached_tokens {cached} != {want_cached}")
            st, ev = post(router.port, dict(body, stream=True,
                                            stream_options={"include_usage": True}))
            check(st == 200, f"router stream, prompt {i}: {st} {ev}")
            got, usage, errors = stream_result(ev)
            check(not errors and got == ref[i], f"stream {i}: {got} != {ref[i]} ({errors})")
            check(usage and usage["prompt_tokens_details"]["cached_tokens"] == want_cached,
                  f"stream {i}: usage {usage}")
        m = pre.metrics()
        gen = m["radixkv:generation_tokens_total"] - gen0
        check(gen == 2 * len(ps), f"the prefill side computes one token per request: {gen}")

        # 1b. The same through vllm-router's PD mode (prefill, then decode with
        # the prefill's kv_transfer_params), when it is installed, on prompts
        # neither side has seen. Its answer's usage is the prefill's (vLLM
        # counts the prefill's cache hits), so the decode side's matched
        # tokens are read from its own counter.
        vllm_requests = 0
        if available("vllm"):
            vr = PdRouter(pre.base, dec.base, kind="vllm")
            try:
                vllm_requests = 1  # its start-up probe
                hits0 = dec.metrics()["radixkv:prefix_cache_hits_total"]
                want_hits = 0
                for i, p in enumerate(prompts(seed=1)):
                    st, r, _ = colo.post({"prompt": text_of(p), "max_tokens": 6, "temperature": 0})
                    want = r["choices"][0]["token_ids"]
                    body = {"model": "tiny", "prompt": text_of(p), "max_tokens": 6,
                            "temperature": 0}
                    st, r = post(vr.port, body)
                    check(st == 200, f"vllm-router, prompt {i}: {st} {r}")
                    got = [int(t) for t in r["choices"][0]["text"].split()]
                    check(got == want, f"vllm-router, prompt {i}: {got} != colocated {want}")
                    st, ev = post(vr.port, dict(body, stream=True))
                    got, _, errors = stream_result(ev)
                    check(st == 200 and not errors and got == want,
                          f"vllm-router stream {i}: {st} {got} {errors}")
                    vllm_requests += 2
                    want_hits += 2 * ((len(p) - 1) // P * P)
                hits = dec.metrics()["radixkv:prefix_cache_hits_total"] - hits0
                check(hits == want_hits, f"vllm-router: decode matched {hits}, handed over {want_hits}")
            finally:
                vr.stop()
        # kv_transfer_params refused by name: without --role, without a record.
        for srv, kv, code in [(colo, {"do_remote_decode": True}, 400),
                              (dec, {"do_remote_prefill": True}, 400),
                              (dec, {"do_remote_decode": True}, 400),
                              (dec, {"do_remote_prefill": True,
                                     "rkv": {"prompt_tokens": 9, "tokens": 8, "page_size": 8}}, 500)]:
            st, r, _ = srv.post({"prompt": text_of(ps[0][:9]), "max_tokens": 2,
                                 "kv_transfer_params": kv})
            check(st == code and r["error"]["param"] == "kv_transfer_params", f"{kv}: {st} {r}")

        # 2. A handed-over page deleted before the decode side loads it.
        p = [(i * 71) % 2900 + 7 for i in range(17)]
        before = redis.page_keys("pdtest")
        st, r, _ = pre.post({"prompt": text_of(p), "max_tokens": 6, "bootstrap_room": 77})
        check(st == 200, f"prefill alone: {st} {r}")
        after = redis.page_keys("pdtest")
        new = sorted(after - before)
        check(len(new) == len(p) // P, f"prefill stored {len(new)} pages, expected {len(p) // P}")
        redis.cmd("DEL", new[0])
        # Under --pd-timeout 600 an answer naming the missing page came from
        # the record's check, not from the deadline; a hang is the client's
        # timeout.
        t0 = time.time()
        st, r, _ = dec.post({"prompt": text_of(p), "max_tokens": 6, "bootstrap_room": 77})
        check(st == 500 and "missing from the tier" in r["error"]["message"]
              and "77" in r["error"]["message"], f"deleted page: {st} {r}")
        timings = [f"deleted page {time.time() - t0:.1f} s"]

        # 3. A room nobody takes: the deadline, plain and streaming. Only the
        # held job's expiry (its --pd-timeout passed) writes this message, and
        # it names the timeout; the time it took is printed, not judged.
        deadline = f"no handoff from the prefill server within {TIMEOUT} s (--pd-timeout"
        for stream in (False, True):
            t0 = time.time()
            body = {"prompt": text_of(p[:9]), "max_tokens": 4, "bootstrap_room": 900 + stream}
            if stream:
                st, ev, _ = dec3.stream(body)
                errs = [e for e in ev if "error" in e]
                check(st == 200 and errs and deadline in errs[0]["error"]["message"]
                      and "bootstrap_room 901" in errs[0]["error"]["message"],
                      f"stream without handoff: {st} {ev}")
            else:
                st, r, _ = dec3.post(body)
                check(st == 500 and deadline in r["error"]["message"]
                      and "bootstrap_room 900" in r["error"]["message"], f"no handoff: {st} {r}")
            timings.append(f"no handoff{' (stream)' if stream else ''} {time.time() - t0:.1f} s"
                           f" at --pd-timeout {TIMEOUT}")

        # Bootstrap fields refused by name: without --role, a list of rooms,
        # more than one sequence.
        for srv, extra, param in [(colo, {"bootstrap_room": 5}, "bootstrap_room"),
                                  (dec, {"bootstrap_room": [5]}, "bootstrap_room"),
                                  (dec, {"bootstrap_room": 5, "n": 2}, "bootstrap_room"),
                                  (dec, {"bootstrap_room": 5, "bootstrap_port": "x"},
                                   "bootstrap_port")]:
            st, r, _ = srv.post(dict({"prompt": text_of(p[:9]), "max_tokens": 2}, **extra))
            check(st == 400 and r["error"]["param"] == param, f"{extra}: {st} {r}")

        # Records that do not fit this server, pushed by hand: named.
        q = p[:9]
        for room, rec, why in [
                (950, {"error": "out of pages"}, "prefill server failed: out of pages"),
                (951, {"prompt_tokens": 9, "tokens": 8, "page_size": 8}, "pages hold 8 tokens"),
                (952, {"prompt_tokens": 9, "tokens": 8, "page_size": P, "model": "0" * 16},
                 "another model"),
                (953, {"prompt_tokens": 10, "tokens": 8}, "prompt of 10 tokens")]:
            redis.cmd("RPUSH", f"rkv:pdtest:pd:{room}", json.dumps(rec))
            st, r, _ = dec.post({"prompt": text_of(q), "max_tokens": 4, "bootstrap_room": room})
            check(st == 500 and why in r["error"]["message"], f"record {rec}: {st} {r}")
        # An error longer than the job's 256-byte field: cut at a character
        # boundary (the message stays UTF-8) and marked with "...".
        redis.cmd("RPUSH", "rkv:pdtest:pd:954", json.dumps({"error": "\u00e9" * 300}))
        st, r, _ = dec.post({"prompt": text_of(q), "max_tokens": 4, "bootstrap_room": 954})
        msg = r["error"]["message"] if isinstance(r, dict) and "error" in r else ""
        cut = msg[msg.find("bootstrap_room 954: "):]
        check(st == 500 and cut.startswith("bootstrap_room 954: the prefill server failed: \u00e9")
              and cut.endswith("\u00e9...") and len(cut.encode()) <= 255, f"long error: {st} {r}")

        # A request the prefill server refuses before its engine sees it (here
        # a field only it was sent wrong; in earnest its queue full, a drain,
        # no memory) is an error record at once: the decode side, under
        # --pd-timeout 600, answers in the client's 150 s.
        st, r, _ = pre.post({"prompt": text_of(q), "max_tokens": "four", "bootstrap_room": 960})
        check(st == 400, f"prefill refusal: {st} {r}")
        st, r, _ = dec.post({"prompt": text_of(q), "max_tokens": 4, "bootstrap_room": 960},
                            timeout=150)
        check(st == 500 and "bootstrap_room 960: the prefill server failed: refused (400): "
              "max_tokens" in r["error"]["message"], f"refused by the prefill: {st} {r}")

        # The prefill server exits cleanly (its page check, and in the
        # sanitizer build no leak); a new one takes its port for part 4.
        rc, summary = pre.stop()
        check(rc == 0 and summary["pages_inflight"] == 0, f"prefill exit {rc}: {summary}")
        # A record per prefilled request (vllm-router's ride in its answers),
        # and the refusal's.
        check(summary["handoffs_sent"] == summary["requests_ok"] - vllm_requests + 1
              and summary["handoffs_lost"] == 0,
              f"a record per prefilled request: {summary}")
        rc, summary = dec3.stop()
        check(rc == 0 and summary["handoffs_failed"] == 2 == summary["requests_failed"],
              f"second decode server: exit {rc}: {summary}")
        gate = os.path.join(pd.tmp, "gate")
        os.mkfifo(gate)
        os.environ["RKV_SERVE_TEST_CHECK_GATE"] = gate
        try:
            pre = pd.server(RADIXKV, *ENGINE, *tier, "--role", "prefill", "--port", str(pre.port))
        finally:
            del os.environ["RKV_SERVE_TEST_CHECK_GATE"]
        dead = dead_prefill(redis, pre, dec, router, ps)

        dec.wait_idle(timeout=60)
        st, r, _ = dec.post({"prompt": text_of(ps[1]), "max_tokens": 6, "temperature": 0})
        check(st == 200 and r["choices"][0]["token_ids"] == ref[1], f"decode alone after: {st} {r}")
        rc, summary = dec.stop()
        check(rc == 0 and summary["pages_inflight"] == 0, f"decode exit {rc}: {summary}")
        # Failed for their handoff: the deleted page, 5 bad records, the
        # refusal, the two rooms of the dead prefill; admitted: every request
        # answered whole but the plain one, plus the deleted page's.
        check(summary["handoffs_failed"] == 9 == summary["requests_failed"]
              and summary["handoffs_admitted"] == summary["requests_ok"],
              f"decode handoffs: {summary}")
        vr_note = "and vllm-router's" if vllm_requests else "(vllm-router not installed)"
        print(f"serve pd: ok ({len(ps)} prompts x 2 through sglang-router's PD mode {vr_note}; "
              f"deleted page, missing handoff and dead prefill end in errors; dead prefill: {dead}; "
              f"answered after: {', '.join(timings)})")
    finally:
        pd.close()


if __name__ == "__main__":
    main()
