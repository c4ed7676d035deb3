#!/usr/bin/env python3
"""/metrics as a vLLM dashboard reads it: parsed by prometheus_client's own text
parser, vLLM's names, types, labels (model_name) and bucket bounds, counters that
agree with radixkv's own, and Grafana-style queries (rate, histogram_quantile
on sum by le) over two scrapes that return data. Runs under RKV_SERVE_PYTHON
(scripts/serve_venv.sh installs prometheus_client); skips (77) without it.
Usage: test_serve_metrics.py PATH/TO/radixkv"""
import math
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from serve_util import Server, check, reexec_under_serve_python  # noqa: E402

reexec_under_serve_python(__file__, "prometheus_client")
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

RADIXKV = sys.argv[1]
MODEL = 'ti"ny'  # a quote in the name: label values must be escaped

VLLM = {  # family -> (type, histogram bounds)
    "vllm:num_requests_running": ("gauge", None),
    "vllm:num_requests_waiting": ("gauge", None),
    "vllm:kv_cache_usage_perc": ("gauge", None),
    "vllm:prefix_cache_queries": ("counter", None),
    "vllm:prefix_cache_hits": ("counter", None),
    "vllm:num_preemptions": ("counter", None),
    "vllm:prompt_tokens": ("counter", None),
    "vllm:generation_tokens": ("counter", None),
    "vllm:request_success": ("counter", None),
    "vllm:time_to_first_token_seconds": ("histogram", [
        0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
        10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0]),
    "vllm:inter_token_latency_seconds": ("histogram", [
        0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
        20.0, 40.0, 80.0]),
    "vllm:e2e_request_latency_seconds": ("histogram", [
        0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0,
        240.0, 480.0, 960.0, 1920.0, 7680.0]),
    # build_1_2_5_buckets(max_model_len), the default model's context being 16384
    "vllm:request_prompt_tokens": ("histogram", [m * 10 ** e for e in range(5) for m in (1, 2, 5)
                                                 if m * 10 ** e <= 16384]),
    "vllm:request_generation_tokens": ("histogram", [m * 10 ** e for e in range(5)
                                                     for m in (1, 2, 5) if m * 10 ** e <= 16384]),
    "vllm:request_params_max_tokens": ("histogram", [m * 10 ** e for e in range(5)
                                                     for m in (1, 2, 5) if m * 10 ** e <= 16384]),
    "vllm:request_params_n": ("histogram", [1, 2, 5, 10, 20]),
    # The rest of vLLM 0.33's v1/metrics/loggers.py for one engine (no KV transfer, LoRA,
    # watermark, NaN check or KV residency sampling).
    "vllm:num_requests_waiting_by_reason": ("gauge", None),
    "vllm:engine_sleep_state": ("gauge", None),
    "vllm:external_prefix_cache_queries": ("counter", None),
    "vllm:external_prefix_cache_hits": ("counter", None),
    "vllm:mm_cache_queries": ("counter", None),
    "vllm:mm_cache_hits": ("counter", None),
    "vllm:prompt_tokens_by_source": ("counter", None),
    "vllm:prompt_tokens_cached": ("counter", None),
    "vllm:prompt_tokens_cached_by_source": ("counter", None),
    "vllm:admission_rejections": ("counter", None),
    "vllm:iteration_tokens_total": ("histogram", [1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048,
                                                  4096, 8192, 16384]),
    "vllm:request_max_num_generation_tokens": ("histogram", [m * 10 ** e for e in range(5)
                                                             for m in (1, 2, 5)
                                                             if m * 10 ** e <= 16384]),
    "vllm:request_time_per_output_token_seconds": ("histogram", [
        0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
        20.0, 40.0, 80.0]),
    "vllm:request_decode_time_seconds": ("histogram", [
        0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0,
        240.0, 480.0, 960.0, 1920.0, 7680.0]),
    "vllm:request_num_preemptions": ("histogram", [1, 2, 3, 4, 5, 10, 20]),
    "vllm:request_queue_time_seconds": ("histogram", [
        0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0,
        240.0, 480.0, 960.0, 1920.0, 7680.0]),
    "vllm:request_inference_time_seconds": ("histogram", [
        0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0,
        240.0, 480.0, 960.0, 1920.0, 7680.0]),
    "vllm:request_prefill_time_seconds": ("histogram", [
        0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0,
        240.0, 480.0, 960.0, 1920.0, 7680.0]),
    "vllm:request_prefill_kv_computed_tokens": ("histogram", [m * 10 ** e for e in range(5)
                                                              for m in (1, 2, 5)
                                                              if m * 10 ** e <= 16384]),
}
# Label sets beside model_name (and engine), as vLLM writes them.
EXTRA_LABELS = {
    "vllm:num_requests_waiting_by_reason": ("reason", {"capacity", "deferred"}),
    "vllm:engine_sleep_state": ("sleep_state", {"awake", "weights_offloaded", "discard_all"}),
    "vllm:prompt_tokens_by_source": ("source", {"local_compute", "local_cache_hit",
                                                "external_kv_transfer"}),
    "vllm:prompt_tokens_cached_by_source": ("source", {"device", "host", "p2p", "disk",
                                                       "external_unspecified"}),
    "vllm:admission_rejections": ("reason", {"max_num_queued_reqs", "max_num_queued_tokens"}),
    "vllm:request_success": ("finished_reason", {"stop", "length", "abort", "error",
                                                 "repetition"}),
}


def scrape(s):
    st, text, headers = s.request("GET", "/metrics")
    check(st == 200 and headers["Content-Type"].startswith("text/plain"), f"/metrics: {st}")
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    samples = [x for f in fams.values() for x in f.samples]
    return fams, samples


def select(samples, name, **labels):
    """Samples of name whose labels include labels (a PromQL selector)."""
    return [x for x in samples if x.name == name
            and all(x.labels.get(k) == v for k, v in labels.items())]


def rate(a, b, name, dt, **labels):
    """rate(name{labels}[dt]) per label set, from two scrapes."""
    before = {tuple(sorted(x.labels.items())): x.value for x in select(a, name, **labels)}
    return {k: (x.value - before.get(k, 0)) / dt
            for x in select(b, name, **labels) for k in [tuple(sorted(x.labels.items()))]}


def histogram_quantile(q, buckets):
    """Prometheus' histogram_quantile over {le: cumulative count}."""
    les = sorted(buckets, key=float)
    total = buckets["+Inf"]
    if total <= 0:
        return math.nan
    rank = q * total
    prev_le, prev_c = 0.0, 0.0
    for le in les:
        c = buckets[le]
        if c >= rank:
            if le == "+Inf":
                return prev_le
            return prev_le + (float(le) - prev_le) * (rank - prev_c) / max(c - prev_c, 1e-12)
        prev_le, prev_c = float(le), c
    return prev_le


def main():
    s = Server(RADIXKV, "--model-name", MODEL, "--page-size", "4", "--num-pages", "256")
    try:
        fams0, s0 = scrape(s)
        p = [(7 * i) % 4000 + 1 for i in range(24)]
        for _ in range(3):
            st, r, _ = s.post({"prompt": p, "max_tokens": 4, "temperature": 0})
            check(st == 200, f"{st} {r}")
        out = r["choices"][0]["token_ids"]
        st, r, _ = s.post({"prompt": p, "max_tokens": 4, "temperature": 0,
                           "stop_token_ids": [out[0]]})
        check(r["choices"][0]["finish_reason"] == "stop", f"stop: {r}")
        s.wait_idle()
        fams, s1 = scrape(s)
        for name, (typ, bounds) in VLLM.items():
            check(name in fams and fams[name].type == typ,
                  f"{name}: {fams[name].type if name in fams else 'missing'}, want {typ}")
            for x in fams[name].samples:
                check(x.labels.get("model_name") == MODEL, f"{x.name} {x.labels}: no model_name")
            if name in EXTRA_LABELS:
                key, values = EXTRA_LABELS[name]
                got = {x.labels.get(key) for x in fams[name].samples}
                check(got == values, f"{name}: {key} values {got}, want {values}")
            if bounds:
                les = [x.labels["le"] for x in fams[name].samples if x.name == name + "_bucket"]
                check([float(v) for v in les[:-1]] == bounds and les[-1] == "+Inf",
                      f"{name} buckets {les}")
        reasons = {x.labels["finished_reason"]: x.value
                   for x in select(s1, "vllm:request_success_total", model_name=MODEL)}
        check(reasons.get("length") == 3 and reasons.get("stop") == 1 and reasons.get("abort") == 0,
              f"request_success_total: {reasons}")
        # Four requests of 24 prompt tokens: all in the (20, 50] bucket.
        pt = {x.labels["le"]: x.value for x in select(s1, "vllm:request_prompt_tokens_bucket")}
        check(pt["20"] == 0 and pt["50"] == 4 and pt["+Inf"] == 4, f"request_prompt_tokens: {pt}")
        gen = select(s1, "vllm:request_generation_tokens_sum")
        check(gen[0].value == 13, f"request_generation_tokens_sum: {gen}")
        # vLLM's and radixkv's counters count the same thing.
        for v, r_ in [("vllm:prefix_cache_hits_total", "radixkv:prefix_cache_hits_total"),
                      ("vllm:prefix_cache_queries_total", "radixkv:prefix_cache_queries_total"),
                      ("vllm:generation_tokens_total", "radixkv:generation_tokens_total"),
                      ("vllm:prompt_tokens_total", "radixkv:prompt_tokens_total")]:
            a, b = select(s1, v), select(s1, r_)
            check(len(a) == 1 and len(b) == 1 and a[0].value == b[0].value, f"{v} {a} vs {r_} {b}")
        check(select(s1, "vllm:prompt_tokens_total")[0].value == 96
              and select(s1, "vllm:generation_tokens_total")[0].value == 13,
              f"token counters: {select(s1, 'vllm:prompt_tokens_total')}")
        # Grafana-style queries (vLLM's dashboard) return data.
        dt = 15.0
        hit = rate(s0, s1, "vllm:prefix_cache_hits_total", dt, model_name=MODEL)
        qry = rate(s0, s1, "vllm:prefix_cache_queries_total", dt, model_name=MODEL)
        ratio = sum(hit.values()) / sum(qry.values())
        check(0 < ratio < 1, f"prefix hit rate from rate(): {ratio}")
        for name in ["vllm:time_to_first_token_seconds", "vllm:e2e_request_latency_seconds",
                     "vllm:inter_token_latency_seconds"]:
            by_le = {}
            for k, v in rate(s0, s1, name + "_bucket", dt, model_name=MODEL).items():
                le = dict(k)["le"]
                by_le[le] = by_le.get(le, 0) + v
            p99 = histogram_quantile(0.99, by_le)
            check(math.isfinite(p99) and p99 > 0, f"histogram_quantile(0.99, {name}): {p99}")
        # Histograms observed once per finished request (each sample one, as vLLM's
        # children); n and the most tokens generated once per prompt.
        st, r, _ = s.post({"prompt": p, "max_tokens": 3, "n": 2, "temperature": 1, "seed": 1})
        check(st == 200, f"n=2: {r}")
        s.wait_idle()
        _, s2 = scrape(s)
        done = sum(x.value for x in select(s2, "vllm:request_success_total"))
        check(done == 6, f"request_success_total: {done}")
        for name in ["vllm:e2e_request_latency_seconds", "vllm:request_prompt_tokens",
                     "vllm:request_generation_tokens", "vllm:request_decode_time_seconds",
                     "vllm:request_time_per_output_token_seconds", "vllm:request_num_preemptions",
                     "vllm:request_prefill_kv_computed_tokens", "vllm:request_params_max_tokens",
                     "vllm:request_queue_time_seconds", "vllm:request_inference_time_seconds",
                     "vllm:request_prefill_time_seconds"]:
            n = select(s2, name + "_count")[0].value
            check(n == done, f"{name}_count {n}, want one per finished request ({done})")
        for name in ["vllm:request_params_n", "vllm:request_max_num_generation_tokens"]:
            n = select(s2, name + "_count")[0].value
            check(n == 5, f"{name}_count {n}, want one per prompt (5)")
        check(select(s2, "vllm:request_params_n_sum")[0].value == 4 + 2, "request_params_n_sum")
        check(select(s2, "vllm:request_max_num_generation_tokens_sum")[0].value == 13 + 3,
              "request_max_num_generation_tokens_sum")
        it = select(s2, "vllm:iteration_tokens_total_sum")[0].value
        check(it >= 96 + 16 - select(s2, "vllm:prompt_tokens_cached_total")[0].value,
              f"iteration_tokens_total_sum {it}")
        kvc = select(s2, "vllm:request_prefill_kv_computed_tokens_sum")[0].value
        hits = select(s2, "vllm:prompt_tokens_cached_total")[0].value
        check(kvc == 24 * 6 - hits, f"prefill_kv_computed {kvc} vs 144 - hits {hits}")
        src = {x.labels["source"]: x.value for x in select(s2, "vllm:prompt_tokens_by_source_total")}
        check(src["local_cache_hit"] == hits and src["local_compute"] + hits == 24 * 6,
              f"prompt_tokens_by_source: {src}")
        # inference = prefill + decode per request, so their sums agree.
        inf = select(s2, "vllm:request_inference_time_seconds_sum")[0].value
        pre = select(s2, "vllm:request_prefill_time_seconds_sum")[0].value
        dec = select(s2, "vllm:request_decode_time_seconds_sum")[0].value
        check(inf > 0 and abs(inf - pre - dec) <= 1e-6 * max(1, inf),
              f"inference {inf} != prefill {pre} + decode {dec}")
        usage = select(s1, "vllm:kv_cache_usage_perc", model_name=MODEL)
        check(len(usage) == 1 and 0 <= usage[0].value <= 1, f"kv_cache_usage_perc: {usage}")
        for name in ["vllm:num_requests_running", "vllm:num_requests_waiting"]:
            check(select(s1, name, model_name=MODEL)[0].value == 0, f"{name} when idle")
        rc, _ = s.stop()
        check(rc == 0, f"exit {rc}")
    finally:
        s.kill()
    print("serve metrics: ok")


if __name__ == "__main__":
    main()
