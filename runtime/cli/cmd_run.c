/* cmd_run.c - `radixkv run`: serve a trace through the engine and report.
 *
 *   trace --> engine_add (all requests; arrivals honoured) --> engine_run
 *          per request, as it finishes: one JSON line (stdout or --out)
 *          at the end: a summary JSON line there too, a table on stderr
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_sim.h"
#include "billing.h"
#include "block_hash.h"
#include "cache.h"
#include "cache_tier.h"
#include "commands.h"
#include "cli.h"
#include "engine.h"
#include "block_hash.h"
#include "cache_kinds.h"
#include "scheduler.h"
#include "backend.h"
#include "router.h"
#include "host_mem.h"
#include "interrupt.h"
#include "kv_link.h"
#include "out_file.h"
#include "evict_policy.h"
#include "model_config.h"
#include "pin_file.h"
#include "replicas.h"
#include "tier_opts.h"
#include "progress.h"
#include "trace.h"
#include "trace_engine.h"
#include "rkv_core.h"

/* ---- options ------------------------------------------------------------ */


static void usage_run(FILE *f)
{
    fprintf(f,
        "usage: radixkv run --trace FILE [options]\n"
        "\n"
        "Serves a request trace through the engine: continuous batching, chunked prefill,\n"
        "a prefix cache, a model backend. Per-request results and a summary go to stdout\n"
        "(or --out) as JSON Lines; a table and a progress bar go to stderr.\n"
        "TRACE: JSON Lines {\"id\", \"tokens\", \"max_tokens\"?, \"arrival\"?, \"temperature\"?,\n"
        "\"top_p\"?, \"top_k\"?, \"seed\"?, \"priority\"?, \"namespace\"?} or a Mooncake trace\n"
        "(\"namespace\"? too); '-' reads stdin. Any other field is an error.\n"
        "\n"
    );
    cli_usage_choices(f, 23, "--backend NAME", NULL, backend_names);
    fprintf(f,
        "  --model PRESET|DIR      default | qwen2.5-0.5b | qwen2.5-3b | qwen2.5-7b | llama-3-8b |\n"
        "                          a config.json or a directory holding one\n"
        "  --weights PATH          safetensors file or directory (default: seeded random)\n");
    cli_usage_choices(f, 23, "--cache KIND", NULL, cache_kind_names);
    cli_usage_choices(f, 23, "--evict-policy NAME", NULL, evict_policy_name_list);
    cli_usage_choices(f, 23, "--hash NAME", NULL, block_hash_fn_names);
    fprintf(f,
        "  --hash-duplicates keep|dedup  hash: keep a full block computed twice (vLLM;\n"
        "                          the default under lru) or free the copy (dedup)\n");
    cli_usage_choices(f, 23, "--sched-policy NAME", NULL, sched_policy_names);
    cli_usage_choices(f, 23, "--schedule MODE", NULL, engine_schedule_names);
    fprintf(f,
        "  --page-size P           tokens per KV page (default 16)\n"
        "  --max-batched-tokens N  token budget per step (default 8192)\n"
        "  --max-running N         running requests at most (default 256)\n"
        "  --lpm-queue-limit N     lpm/dfs-weight act as fcfs above N waiting (default 128)\n"
        "  --num-pages N           KV pages (default: the backend decides)\n"
        "  --kv-tokens N           KV capacity in tokens (ceil(N / P) pages)\n"
        "  --max-tokens N          output length for lines without max_tokens (default 16)\n"
        "  --gpu PROFILE           sim: a built-in profile, h100 (default), h100@peer, h200,\n"
        "                          a100, a10g (radixkv list) [,key=X ...]\n"
        "  --sim-profile FILE      sim: a profile JSON file instead (SIM_COST_MODEL.md)\n"
        "  --threads N             cpu: threads (default: all cores)\n"
        "  --seed N                weights, policy random, default sampling seeds (default 0)\n"
        "  --offline               ignore arrival times: everything at t = 0\n"
        "  --fixed-clock           sim: leave measured CPU time out of the clock (repeatable)\n"
        "  --sim-host-us-per-step X  sim: add X microseconds of host time to every step on the\n"
        "                          clock, as scheduler time (overlap hides it behind the step\n"
        "                          in flight, sync does not); counted with --fixed-clock too\n"
        "  --sim-host-ns-per-token X  sim: add X nanoseconds of host time per token the cache\n"
        "                          matches or inserts, as scheduler time (SIM_COST_MODEL.md)\n"
        "  --namespace NAME        cache namespace of trace lines without \"namespace\"\n"
        "                          (tenants never share cached pages; default: none)\n"
        "  --out FILE              write the JSON Lines there instead of stdout\n"
        "  --no-progress           no progress bar\n"
        "  --pin FILE              pin static prefixes for the engine's life: JSON Lines of\n"
        "                          {\"tokens\": [...]} or [...], each cut down to whole pages\n"
        "  --price-cached X        price per million cached input tokens (default 0.1)\n"
        "  --price-uncached X      price per million uncached input tokens (default 1)\n"
        "  --replicas N            N engines (data parallel) on one clock behind a router\n"
    );
    cli_usage_choices(f, 23, "--router NAME", NULL, router_names);
    fprintf(f,
        "  --router-threshold N    cache-aware: load gap (requests) that forces least-load (8)\n"
        "  --router-tokens N       cache-aware: capacity of each approximate tree (default:\n"
        "                          the replica's KV tokens)\n"
        "  --router-cache-threshold X  cache-aware: below this matched share of the prompt,\n"
        "                          route to the replica with the smallest tree (0.5)\n"
        "  --prefill N --decode M  sim: disaggregated, N prefill engines (routed by --router)\n"
        "                          hand each request with its first token and its prompt's\n"
        "                          full pages to one of M decode engines (least-load); each\n"
        "                          engine has its own cache (see replicas/replicas.h)\n"
        "  --decode-router NAME    which decode engine takes a handoff: least-load (default),\n"
        "                          round-robin, cache-aware (fewest pages to send)\n"
        "  --link SPEC             the handoff's cost on the sim clock: rdma (default) | tcp\n"
        "                          [,bandwidth=B/s][,latency=S][,per_page=S] (kv_link.h)\n"
        "  --slo-ttft S            SLO on time to first token (seconds): the summary adds the\n"
        "  --slo-tpot S            share of requests within both SLOs and how many per second\n"
        "                          (DistServe's goodput is the highest rate with >= 90 %% in\n"
        "                          both: a rate sweep); with either, the multi-engine driver\n"
    );
    tier_opts_usage(f, 23);
    fprintf(f,
        "\n"
        "The summary bills each request's prompt tokens: those matched in the cache at its\n"
        "first admission at the cached price, the rest at the uncached one.\n");
}


/* The command whose options these are ("run", or "serve", which hands its
 * engine options over): every refusal names it. */
static const char *opt_cmd = "run";

static void opt_refuse(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void opt_refuse(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "radixkv %s: ", opt_cmd);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
}

static int check_run(run_opts *o, bool need_trace);

int run_parse_options(int argc, char **argv, run_opts *o, bool need_trace)
{
    opt_cmd = argc > 0 && argv[0] ? argv[0] : "run";
    engine_config_default(&o->ec);
    o->progress = true;
    o->router_cache_threshold = 0.5;
    billing_prices_default(&o->prices);
    tier_opts_init(&o->tier);
    /* Integers land in int64_t first, then in their narrower fields. */
    int64_t page_size = o->ec.backend_cfg.page_size, batched = o->ec.max_num_batched_tokens;
    int64_t running = o->ec.max_running, queue_limit = o->ec.lpm_queue_limit, num_pages = 0;
    int64_t max_tokens = 16, replicas = 1, router_threshold = 8, threads = 0, seed = 0;
    int64_t prefill = 0, decode = 0;
    double host_us = -1, host_ns = -1; /* < 0: not given */
    bool no_progress = false;
    cli_opt opts[50 + TIER_OPTS_CLI] = {
        CLI_STR_OPT("--trace", &o->trace),
        CLI_STR_OPT("--namespace", &o->namespace_name),
        CLI_STR_OPT("--out", &o->out),
        CLI_STR_OPT("--pin", &o->pin),
        CLI_CHOICE_OPT("--backend", &o->ec.backend, backend_names),
        CLI_STR_OPT("--model", &o->ec.backend_cfg.model),
        CLI_STR_OPT("--weights", &o->ec.backend_cfg.weights),
        CLI_CHOICE_OPT("--cache", &o->ec.cache_cfg.kind, cache_kind_names),
        CLI_CHOICE_OPT("--evict-policy", &o->ec.cache_cfg.policy, evict_policy_name_list),
        CLI_CHOICE_OPT("--hash", &o->ec.cache_cfg.hash_fn, block_hash_fn_names),
        CLI_CHOICE_OPT("--hash-duplicates", &o->ec.cache_cfg.hash_duplicates,
                       cache_hash_duplicates_names),
        CLI_CHOICE_OPT("--sched-policy", &o->ec.policy, sched_policy_names),
        CLI_CHOICE_OPT("--schedule", &o->ec.schedule, engine_schedule_names),
        CLI_INT_OPT("--page-size", &page_size, 1, 1 << 16),
        CLI_INT_OPT("--max-batched-tokens", &batched, 1, INT32_MAX / 4),
        CLI_INT_OPT("--max-running", &running, 1, 1 << 20),
        CLI_INT_OPT("--lpm-queue-limit", &queue_limit, 1, INT32_MAX),
        CLI_INT_OPT("--num-pages", &num_pages, 1, INT32_MAX),
        CLI_INT_OPT("--kv-tokens", &o->kv_tokens, 1, INT64_MAX / 2),
        CLI_INT_OPT("--max-tokens", &max_tokens, 1, 1 << 24),
        CLI_STR_OPT("--gpu", &o->ec.backend_cfg.gpu_profile),
        CLI_STR_OPT("--sim-profile", &o->ec.backend_cfg.sim_profile_file),
        CLI_INT_OPT("--threads", &threads, 0, 1024),
        CLI_INT_OPT("--seed", &seed, 0, INT64_MAX),
        CLI_FLAG_OPT("--offline", &o->ec.offline),
        CLI_FLAG_OPT("--fixed-clock", &o->ec.fixed_clock),
        CLI_DOUBLE_OPT("--sim-host-us-per-step", &host_us, 0, 1e9),
        CLI_DOUBLE_OPT("--sim-host-ns-per-token", &host_ns, 0, 1e12),
        CLI_FLAG_OPT("--no-progress", &no_progress),
        CLI_CUSTOM_OPT("--price-cached", billing_parse_price_opt, &o->prices.cached),
        CLI_CUSTOM_OPT("--price-uncached", billing_parse_price_opt, &o->prices.uncached),
        CLI_INT_OPT("--replicas", &replicas, 1, 1024),
        CLI_CHOICE_OPT("--router", &o->router, router_names),
        CLI_INT_OPT("--router-threshold", &router_threshold, 0, INT32_MAX),
        CLI_DOUBLE_OPT("--router-cache-threshold", &o->router_cache_threshold, 0, 1),
        CLI_INT_OPT("--router-tokens", &o->router_tokens, 1, INT64_MAX / 2),
        CLI_INT_OPT("--prefill", &prefill, 1, 1024),
        CLI_INT_OPT("--decode", &decode, 1, 1024),
        CLI_STR_OPT("--link", &o->link),
        CLI_CHOICE_OPT("--decode-router", &o->decode_router, router_names),
        CLI_DOUBLE_OPT("--slo-ttft", &o->slo_ttft, 1e-9, 1e9),
        CLI_DOUBLE_OPT("--slo-tpot", &o->slo_tpot, 1e-9, 1e9),
        CLI_RENAMED("--policy", "--sched-policy"),
    };
    int nopts = 0;
    while (opts[nopts].name) nopts++;
    tier_opts_cli(&o->tier, opts, &nopts);
    cli_args a;
    int rc = cli_command(opt_cmd, opts, argc, argv, &a, usage_run);
    if (rc >= 0) return rc;
    if (a.npos) {
        opt_refuse("unexpected argument '%s' (the trace goes after --trace)\n",
                   a.pos[0]);
        return 2;
    }
    o->ec.backend_cfg.page_size = (int32_t)page_size;
    o->ec.max_num_batched_tokens = (int32_t)batched;
    o->ec.max_running = (int32_t)running;
    o->ec.lpm_queue_limit = (int32_t)queue_limit;
    o->ec.backend_cfg.num_pages = num_pages;
    o->default_max_tokens = (int32_t)max_tokens;
    o->replicas = (int32_t)replicas;
    o->prefill = (int32_t)prefill;
    o->decode = (int32_t)decode;
    o->router_threshold = (int32_t)router_threshold;
    o->ec.backend_cfg.num_threads = (int)threads;
    if (cli_given(opts, "--threads") && !(backend_caps(o->ec.backend) & BACKEND_CAP_HOST_THREADS)) {
        opt_refuse("--threads applies to a backend that runs the model on host threads (cpu), "
                   "not %s\n", o->ec.backend ? o->ec.backend : backend_names[0]);
        return 2;
    }
    o->ec.seed = o->ec.backend_cfg.seed = (uint64_t)seed;
    o->progress = !no_progress;
    o->sim_host = host_us >= 0 || host_ns >= 0;
    o->ec.host_step_s = host_us > 0 ? host_us * 1e-6 : 0;
    o->ec.host_token_s = host_ns > 0 ? host_ns * 1e-9 : 0;
    return check_run(o, need_trace);
}

/* --kv-tokens into pages, and the pool's host memory checked before anything
 * is sized. 2: refused (said why). */
static int check_pool(run_opts *o, const model_config *mc)
{
    char err[512];
    if (o->kv_tokens > 0) {
        if (o->ec.backend_cfg.num_pages > 0) {
            opt_refuse("--kv-tokens and --num-pages both given; pick one\n");
            return 2;
        }
        int64_t P = o->ec.backend_cfg.page_size;
        if ((o->kv_tokens + P - 1) / P > INT32_MAX) {
            opt_refuse("--kv-tokens %lld with --page-size %lld gives %lld pages"
                       " (at most %d)\n", (long long)o->kv_tokens, (long long)P,
                       (long long)((o->kv_tokens + P - 1) / P), INT32_MAX);
            return 2;
        }
        o->ec.backend_cfg.num_pages = (o->kv_tokens + P - 1) / P;
    }
    if (o->ec.backend_cfg.num_pages > 0) {
        /* Refused before anything is sized (--num-pages 2^31 - 1 once grew to
         * gigabytes until killed): the pool's and the cache's bookkeeping per
         * page, and on the cpu backend the page's fp32 K/V in host memory. */
        int64_t pages = o->ec.backend_cfg.num_pages, P = o->ec.backend_cfg.page_size;
        bool host_kv = backend_caps(o->ec.backend) & BACKEND_CAP_HOST_KV;
        uint64_t per_page = 64 + (host_kv ? (uint64_t)model_config_kv_bytes_per_token(mc, 4) * (uint64_t)P : 0);
        /* Every engine holds its own pool: the size given is per engine. */
        int64_t engines = o->prefill ? (int64_t)o->prefill + o->decode : o->replicas > 1 ? o->replicas : 1;
        char what[200], times[48] = "";
        if (engines > 1) snprintf(times, sizeof times, ", times %lld engines", (long long)engines);
        snprintf(what, sizeof what, "%s (%lld pages of %lld tokens%s)",
                 o->kv_tokens > 0 ? "--kv-tokens" : "--num-pages", (long long)pages, (long long)P,
                 times);
        /* Saturated: a product past 2^64 is refused, never wrapped to a small size. */
        uint64_t n = (uint64_t)pages * (uint64_t)engines; /* < 2^31 * 2^11 */
        uint64_t all = per_page > UINT64_MAX / n ? UINT64_MAX : per_page * n;
        if (host_mem_check(what, all, err, sizeof err)) {
            opt_refuse("%s\n", err);
            return 2;
        }
    }
    return 0;
}

/* What the options mean together, and values the backend would reject later,
 * named by their option now. -1 to go on, else the exit status. */
static int check_run(run_opts *o, bool need_trace)
{
    const char *kind = o->ec.cache_cfg.kind ? o->ec.cache_cfg.kind : "radix";
    if (o->ec.cache_cfg.hash_fn && strncmp(kind, "hash", 4)) {
        opt_refuse("--hash applies to the hash kinds, not --cache %s\n", kind);
        return 2;
    }
    if (o->ec.cache_cfg.hash_duplicates && strcmp(kind, "hash")) {
        opt_refuse("--hash-duplicates applies to --cache hash, not --cache %s\n", kind);
        return 2;
    }
    if (!o->trace && need_trace) {
        opt_refuse("--trace FILE is required (see radixkv run --help)\n");
        return 2;
    }
    if ((o->prefill > 0) != (o->decode > 0)) {
        opt_refuse("--%s needs --%s too (N prefill and M decode engines)\n",
                   o->prefill ? "prefill" : "decode", o->prefill ? "decode" : "prefill");
        return 2;
    }
    if (o->prefill && o->replicas > 1) {
        opt_refuse("--replicas and --prefill/--decode exclude each other "
                   "(colocated or disaggregated engines)\n");
        return 2;
    }
    if ((o->link || o->decode_router) && !o->prefill) {
        opt_refuse("--%s applies to --prefill/--decode (the handoff)\n",
                   o->link ? "link" : "decode-router");
        return 2;
    }
    kv_link link;
    char lerr[320];
    if (o->link && kv_link_parse(o->link, &link, lerr, sizeof lerr)) {
        opt_refuse("--link: %s\n", lerr);
        return 2;
    }
    if (o->prefill && !(backend_caps(o->ec.backend) & BACKEND_CAP_MODELLED_TIME)) {
        opt_refuse("--prefill/--decode run on the sim clock: use --backend sim"
                   " (not %s)\n", o->ec.backend ? o->ec.backend : backend_names[0]);
        return 2;
    }
    if (o->sim_host && !(backend_caps(o->ec.backend) & BACKEND_CAP_MODELLED_TIME)) {
        opt_refuse("--sim-host-us-per-step/--sim-host-ns-per-token add host time"
                   " to the sim clock: use --backend sim (not %s, whose clock is wall time)\n",
                   o->ec.backend ? o->ec.backend : backend_names[0]);
        return 2;
    }
    /* Asked of the backend's capability words, never of its name: a profile
     * is what clocks a modelled backend, and the fixed clock leaves measured
     * time out of a modelled one; a backend on wall time would drop both. */
    const char *sim_opt = o->ec.backend_cfg.sim_profile_file ? "--sim-profile"
                          : o->ec.backend_cfg.gpu_profile ? "--gpu"
                          : o->ec.fixed_clock ? "--fixed-clock" : NULL;
    if (sim_opt && !(backend_caps(o->ec.backend) & BACKEND_CAP_MODELLED_TIME)) {
        opt_refuse("%s applies to a backend with modelled time (--backend sim),"
                   " not %s, whose clock is wall time\n", sim_opt,
                   o->ec.backend ? o->ec.backend : backend_names[0]);
        return 2;
    }
    char err[512];
    model_config mc;
    if (model_config_load(o->ec.backend_cfg.model, &mc, err, sizeof err)) {
        opt_refuse("--model: %s\n", err);
        return 2;
    }
    sim_profile sp;
    if (o->ec.backend_cfg.gpu_profile && sim_profile_parse(o->ec.backend_cfg.gpu_profile, &sp, err, sizeof err)) {
        opt_refuse("--gpu: %s\n", err);
        return 2;
    }
    if (o->ec.backend_cfg.sim_profile_file) {
        if (o->ec.backend_cfg.gpu_profile) {
            opt_refuse("--gpu and --sim-profile both given; pick one\n");
            return 2;
        }
        if (sim_profile_load_file(o->ec.backend_cfg.sim_profile_file, &sp, err, sizeof err)) {
            opt_refuse("--sim-profile: %s\n", err);
            return 2;
        }
    }
    if (check_pool(o, &mc)) return 2;
    tier_opts_finish(&o->tier, o->ec.backend_cfg.page_size);
    if (o->tier.cfg.remote.url) {
        /* Pages are shared only between engines whose K/V would be equal. */
        char desc[512], id[1024];
        model_config_describe(&mc, desc, sizeof desc);
        snprintf(id, sizeof id, "%s|weights=%s|seed=%llu|backend=%s", desc,
                 o->ec.backend_cfg.weights ? o->ec.backend_cfg.weights : "random",
                 (unsigned long long)o->ec.backend_cfg.seed, o->ec.backend ? o->ec.backend : "default");
        tier_opts_set_model(&o->tier, id);
    }
    if (o->tier.on) {
        o->ec.tier = &o->tier.cfg;
        /* sim moves stand-in bytes: the time model charges the model's K/V. */
        if (backend_caps(o->ec.backend) & BACKEND_CAP_MODELLED_TIME)
            o->tier.cfg.modelled_page_bytes =
                (double)model_config_kv_bytes_per_token(&mc, 2) * o->ec.backend_cfg.page_size;
    }
    return -1;
}

/* ---- trace --------------------------------------------------------------- */

void run_ids_free(run_ids *ids)
{
    for (int64_t i = 0; i < ids->n; i++) free(ids->id_json[i]);
    free(ids->id_json);
    memset(ids, 0, sizeof *ids);
}

typedef struct load_ctx {
    engine *e;
    run_ids *ids;
} load_ctx;

static rkv_status load_one(void *vctx, const trace_request *q, const engine_request *er, char *err,
                           size_t errlen)
{
    load_ctx *c = vctx;
    int64_t id;
    rkv_status st = engine_add(c->e, er, &id, err, errlen);
    if (st || !c->ids) return st;
    run_ids *ids = c->ids;
    if ((st = rkv_grow((void **)&ids->id_json, &ids->cap, ids->n + 1, sizeof *ids->id_json)))
        return st;
    if (!(ids->id_json[ids->n] = strdup(q->id_json ? q->id_json : "null"))) {
        snprintf(err, errlen, "out of host memory");
        return RKV_ENOMEM;
    }
    ids->n++;
    return RKV_OK;
}

rkv_status run_load_trace(engine *e, const char *path, int32_t default_max_tokens,
                          const char *namespace_name, run_ids *ids, char *err, size_t errlen)
{
    load_ctx c = {e, ids};
    return trace_engine_load(path, engine_backend(e)->vocab_size, default_max_tokens, namespace_name,
                             load_one, &c,
                             err, errlen);
}

/* ---- output -------------------------------------------------------------- */

typedef struct run_ctx {
    FILE *out;
    run_ids *ids;
    progress prog;
    int64_t done;
} run_ctx;

static void on_finish(void *vctx, engine *e, int64_t id)
{
    run_ctx *c = vctx;
    engine_result r;
    engine_result_get(e, id, &r);
    FILE *f = c->out;
    fprintf(f, "{\"type\":\"request\",\"id\":%s", id < c->ids->n ? c->ids->id_json[id] : "null");
    if (r.error) {
        fprintf(f, ",\"error\":");
        rkv_json_string(f, r.error);
        fprintf(f, ",\"prompt_tokens\":%d}\n", r.prompt_tokens);
    } else {
        fprintf(f,
                ",\"ttft\":%.6f,\"tpot\":%.6f,\"latency\":%.6f,\"prompt_tokens\":%d,"
                "\"cached_tokens\":%d,\"output_tokens\":%d,\"preemptions\":%d,\"output_ids\":[",
                r.ttft, r.tpot, r.latency, r.prompt_tokens, r.cached_tokens, r.num_output,
                r.num_preemptions);
        for (int32_t i = 0; i < r.num_output; i++) fprintf(f, i ? ",%d" : "%d", r.output_ids[i]);
        fputs("]}\n", f);
    }
    progress_update(&c->prog, ++c->done);
}

/* Pins are unlocked before the cache goes, so the kinds see balanced locks. */
static void run_teardown(engine *e, cache_pins *pins)
{
    cache_pins_release(engine_cache(e), pins);
    cache_pins_free(pins);
    engine_destroy(e);
}

/* "radixkv run: WHAT: MESSAGE", the status's name when a layer left no message. */
static void report(const char *what, rkv_status st, const char *err)
{
    fprintf(stderr, "radixkv run: %s%s%s\n", what, what[0] ? ": " : "", err[0] ? err : rkv_status_str(st));
}

/* Run every request to its end, one JSON line each on out as it finishes;
 * engine_run step by step, so that a signal (interrupt.h) stops it between
 * steps (*interrupted). */
static rkv_status serve(engine *e, const run_opts *o, run_ids *ids, FILE *out, bool *interrupted,
                        char *err, size_t errlen)
{
    run_ctx ctx = {.out = out, .ids = ids};
    progress_start(&ctx.prog, "run", "requests", ids->n, o->progress);
    engine_on_finish(e, on_finish, &ctx);
    /* Requests that failed at add time (never fit) were reported before the
     * callback existed: report them now. */
    for (int64_t i = 0; i < ids->n; i++) {
        engine_result r;
        engine_result_get(e, i, &r);
        if (r.finished) on_finish(&ctx, e, i);
    }
    rkv_status st = RKV_OK;
    bool done = false;
    err[0] = '\0';
    while (!done && !(*interrupted = interrupt_pending()) && !(st = engine_step(e, &done, err, errlen)))
        ;
    char msg[400] = "";
    if (!st && done && (st = engine_check(e, msg, sizeof msg)))
        snprintf(err, errlen, "engine: page accounting broken: %s", msg[0] ? msg : rkv_status_str(st));
    progress_finish(&ctx.prog);
    engine_on_finish(e, NULL, NULL); /* ctx ends here */
    return st;
}

/* --out (out_file.h: a temporary name renamed on close, so a refusal leaves
 * no file) behind a whole-line writer (interrupt.h); NULL after saying why. */
static FILE *open_out(const run_opts *o, out_file *of)
{
    char err[512];
    FILE *raw = out_file_open(of, o->out, err, sizeof err), *out = raw ? interrupt_stream(raw) : NULL;
    if (!out) {
        fprintf(stderr, "radixkv run: --out: %s\n", raw ? "out of host memory for the output stream" : err);
        if (raw && raw != stdout) fclose(raw);
        out_file_finish(of, true, err, sizeof err);
    }
    return out;
}

/* Closes out and puts the file in place, or removes it when the run failed
 * (failed: a refusal or an error, as opposed to a summary written, even an
 * interrupted one); 0, or -1 after saying why. */
static int close_out(const run_opts *o, FILE *out, out_file *of, bool failed)
{
    char err[512];
    int rc = fclose(out) ? -1 : 0;
    if (rc) fprintf(stderr, "radixkv run: writing the output to '%s' failed\n", o->out ? o->out : "-");
    if (out_file_finish(of, failed || rc, err, sizeof err)) {
        fprintf(stderr, "radixkv run: --out: %s\n", err);
        rc = -1;
    }
    return rc;
}

/* --replicas / --router: N engines behind a router (replicas.h). */
static int run_replicas(const run_opts *o)
{
    char err[512] = "";
    replicas_config rcfg = {
        .engine = &o->ec, .replicas = o->replicas, .balance_threshold = o->router_threshold,
        .cache_threshold = o->router_cache_threshold,
        .approx_tokens = o->router_tokens, .trace = o->trace, .namespace_name = o->namespace_name,
        .default_max_tokens = o->default_max_tokens, .prices = &o->prices, .pin = o->pin,
        .progress = o->progress, .prefill = o->prefill, .decode = o->decode, .link = o->link,
        .slo_ttft = o->slo_ttft, .slo_tpot = o->slo_tpot,
    };
    router_kind_parse(o->router ? o->router : "round-robin", &rcfg.router);
    router_kind_parse(o->decode_router ? o->decode_router : "least-load", &rcfg.decode_router);
    out_file of;
    FILE *rout = open_out(o, &of);
    if (!rout) return 1;
    bool interrupted = false;
    rkv_status rst = replicas_run(&rcfg, rout, &interrupted, err, sizeof err);
    if (rst) fprintf(stderr, "radixkv run: %s\n", err[0] ? err : rkv_status_str(rst));
    int wrc = close_out(o, rout, &of, rst != RKV_OK);
    if (!rst && interrupted) {
        fprintf(stderr, "radixkv run: interrupted\n");
        return interrupt_exit_status();
    }
    return rst ? (rst == RKV_EINVAL || rst == RKV_ENOTSUP ? 2 : 1) : (wrc ? 1 : 0);
}

/* Pins first: their KV is computed (a prefill through the backend, before the
 * engine's clock starts) and cached before any request arrives. -1 to go on,
 * else the exit status. */
static int apply_pins(engine *e, const run_opts *o, cache_pins *pins)
{
    if (!o->pin) return -1;
    char err[512] = "";
    backend *be = engine_backend(e);
    pin_file_stats ps;
    rkv_status st = pin_file_apply(engine_cache(e), be, o->pin, be->vocab_size, pins, &ps, err,
                                   sizeof err);
    if (st) {
        fprintf(stderr, "radixkv run: --pin %s\n", err);
        return st == RKV_EIO || st == RKV_ENOMEM ? 1 : 2;
    }
    cache_sizes sz;
    cache_get_sizes(engine_cache(e), &sz);
    fprintf(stderr, "radixkv run: pinned %lld prefixes, %lld tokens", (long long)ps.prefixes,
            (long long)sz.pinned_tokens);
    if (ps.cut_tokens)
        fprintf(stderr, " (%lld tokens of partial last pages not pinned)", (long long)ps.cut_tokens);
    fputc('\n', stderr);
    return -1;
}

/* The stderr table's thread CPU per step phase (engine_phase), when measured. */
static void print_phases(const engine_stats *s)
{
    double sum = 0;
    for (int p = 0; p < ENGINE_NUM_PHASES; p++) sum += s->phase_cpu_seconds[p];
    if (s->steps == 0 || sum <= 0) return;
    fputs("  step phases     ", stderr);
    for (int p = 0; p < ENGINE_NUM_PHASES; p++)
        fprintf(stderr, "%s%s %.3f", p ? ", " : "", engine_phase_names[p],
                s->phase_cpu_seconds[p] / (double)s->steps * 1e3);
    fputs(" ms/step (thread CPU)\n", stderr);
}

/* The stderr table's spill tier lines, with a tier. */
static void print_tier_table(engine *e, const tier_stats *ts)
{
    if (!ts) return;
    fprintf(stderr, "  spill tier      %llu host + %llu disk tokens loaded back, %llu pages spilled"
            ", %.3f ms loading\n", (unsigned long long)ts->host_hit_tokens,
            (unsigned long long)ts->disk_hit_tokens, (unsigned long long)ts->spilled_pages,
            ts->load_seconds * 1e3);
    const tier_remote_stats *rs = cache_tier_remote_stats(engine_cache(e));
    if (rs)
        fprintf(stderr, "  remote tier     %llu tokens loaded, %llu pages stored, %llu misses, %llu bad values%s\n",
                (unsigned long long)rs->hit_tokens, (unsigned long long)rs->stored_pages,
                (unsigned long long)rs->misses, (unsigned long long)rs->corrupt_values,
                rs->down ? " (server down at the end)" : "");
    if (cache_tier_last_error(engine_cache(e)))
        fprintf(stderr, "radixkv run: warning: %llu spills failed (plain evictions); first: %s\n",
                (unsigned long long)ts->spill_failures, cache_tier_last_error(engine_cache(e)));
}

/* The summary line on out and the table on stderr. */
static int print_summary(engine *e, const run_opts *o, const run_ids *ids, bool interrupted, FILE *out)
{
    backend *be = engine_backend(e);
    engine_stats s;
    engine_get_stats(e, &s);
    double *ttft = malloc(sizeof(double) * (size_t)(ids->n + 1));
    double *tpot = malloc(sizeof(double) * (size_t)(ids->n + 1));
    if (!ttft || !tpot) {
        /* Without them the summary's times would be zeros that look measured. */
        fprintf(stderr, "radixkv run: out of host memory for the summary's latency percentiles"
                " (%lld requests); no summary written\n", (long long)ids->n);
        free(ttft);
        free(tpot);
        return 1;
    }
    int64_t nt = 0, np = 0;
    double t_end = 0;
    for (int64_t i = 0; ttft && tpot && i < ids->n; i++) {
        engine_result r;
        engine_result_get(e, i, &r);
        if (r.error) continue;
        ttft[nt++] = r.ttft;
        if (r.num_output > 1) tpot[np++] = r.tpot;
        if (r.finish_time > t_end) t_end = r.finish_time;
    }
    if (ttft) qsort(ttft, (size_t)nt, sizeof(double), rkv_cmp_double);
    if (tpot) qsort(tpot, (size_t)np, sizeof(double), rkv_cmp_double);
    double span = t_end > 0 ? t_end : 1e-9;
    double hit = s.prompt_tokens ? (double)s.cached_tokens / (double)s.prompt_tokens : 0;
    double sched_ms = s.steps ? s.sched_cpu_seconds / (double)s.steps * 1e3 : 0;
    double p50_ttft = ttft ? rkv_percentile(ttft, nt, 50) : 0, p99_ttft = ttft ? rkv_percentile(ttft, nt, 99) : 0;
    double p50_tpot = tpot ? rkv_percentile(tpot, np, 50) : 0, p99_tpot = tpot ? rkv_percentile(tpot, np, 99) : 0;
    fprintf(out,
            "{\"type\":\"summary\",\"backend\":\"%s\",\"cache\":\"%s\",\"policy\":\"%s\","
            "\"schedule\":\"%s\",\"requests\":%lld,\"errors\":%lld,\"duration\":%.6f,"
            "\"requests_per_s\":%.6f,\"output_tokens_per_s\":%.6f,\"prompt_tokens\":%lld,"
            "\"cached_tokens\":%lld,\"output_tokens\":%lld,\"hit_rate\":%.6f,"
            "\"ttft_p50\":%.6f,\"ttft_p99\":%.6f,\"tpot_p50\":%.6f,\"tpot_p99\":%.6f,"
            "\"preemptions\":%lld,\"steps\":%lld,\"max_step_tokens\":%lld,"
            "\"sched_cpu_ms_per_step\":%.6f,\"model_seconds\":%.6f,\"num_pages\":%lld",
            be->ops->name, o->ec.cache_cfg.kind ? o->ec.cache_cfg.kind : "radix", o->ec.policy,
            o->ec.schedule, (long long)s.num_requests, (long long)s.num_errors, span,
            (double)(s.num_finished - s.num_errors) / span, (double)s.output_tokens / span,
            (long long)s.prompt_tokens, (long long)s.cached_tokens, (long long)s.output_tokens,
            hit, p50_ttft, p99_ttft, p50_tpot, p99_tpot, (long long)s.preemptions,
            (long long)s.steps, (long long)s.max_step_tokens, sched_ms, s.model_seconds,
            (long long)s.num_pages);
    /* Every modelled number names the profile that made it. */
    const sim_profile *sp = backend_sim_profile(be);
    if (sp) {
        fputs(",\"sim_profile\":", out);
        rkv_json_string(out, sp->id);
        fprintf(out, ",\"sim_profile_hash\":\"%s\"", sp->hash);
    }
    if (o->sim_host)
        fprintf(out, ",\"sim_host_us_per_step\":%.6g,\"sim_host_ns_per_token\":%.6g,"
                "\"cache_touched_tokens\":%lld,\"injected_host_seconds\":%.6f",
                o->ec.host_step_s * 1e6, o->ec.host_token_s * 1e9,
                (long long)s.cache_touched_tokens, s.injected_host_seconds);
    billing bill;
    billing_compute(&o->prices, s.prompt_tokens, s.cached_tokens, &bill);
    billing_print_json(out, &o->prices, &bill);
    cache_sizes csz;
    cache_get_sizes(engine_cache(e), &csz);
    fprintf(out, ",\"pinned_tokens\":%lld", (long long)csz.pinned_tokens);
    const tier_stats *ts = cache_tier_get_stats(engine_cache(e));
    tier_print_json(out, &o->tier, ts, cache_tier_remote_stats(engine_cache(e)), s.prompt_tokens,
                    s.cached_tokens);
    if (interrupted) fputs(",\"interrupted\":true", out);
    fputs("}\n", out);
    fprintf(stderr,
            "  requests        %lld (%lld errors) in %.3f s%s\n"
            "  throughput      %.3g requests/s, %.3g output tokens/s\n"
            "  hit rate        %.1f %% (%lld of %lld prompt tokens cached)\n"
            "  TTFT            p50 %.2f ms, p99 %.2f ms\n"
            "  TPOT            p50 %.2f ms, p99 %.2f ms\n"
            "  steps           %lld, preemptions %lld, scheduler CPU %.3f ms/step\n"
            "  input bill      %.6g (%.6g without a cache, %.1f %% saved)\n",
            (long long)s.num_requests, (long long)s.num_errors, span,
            (be->ops->caps & BACKEND_CAP_MODELLED_TIME) ? " (modelled)" : "",
            (double)(s.num_finished - s.num_errors) / span, (double)s.output_tokens / span,
            hit * 100, (long long)s.cached_tokens, (long long)s.prompt_tokens, p50_ttft * 1e3,
            p99_ttft * 1e3, p50_tpot * 1e3, p99_tpot * 1e3, (long long)s.steps,
            (long long)s.preemptions, sched_ms, bill.cost, bill.cost_no_cache, bill.saving * 100);
    print_phases(&s);
    print_tier_table(e, ts);
    free(ttft);
    free(tpot);
    if (interrupted) {
        fprintf(stderr, "radixkv run: interrupted after %lld steps (%lld of %lld requests finished)\n",
                (long long)s.steps, (long long)s.num_finished, (long long)s.num_requests);
        return interrupt_exit_status();
    }
    if (s.num_requests > 0 && s.num_errors == s.num_requests) {
        fprintf(stderr, "radixkv run: every request failed (%lld of %lld); see their error lines\n",
                (long long)s.num_errors, (long long)s.num_requests);
        return 1;
    }
    return 0;
}

int cmd_run(int argc, char **argv)
{
    run_opts o;
    memset(&o, 0, sizeof o);
    int rc = run_parse_options(argc, argv, &o, true);
    if (rc >= 0) return rc;
    interrupt_install();
    if (o.replicas > 1 || o.router || o.prefill || o.slo_ttft > 0 || o.slo_tpot > 0)
        return run_replicas(&o);

    char err[512] = "";
    engine *e = NULL;
    rkv_status st = engine_create(&o.ec, &e, err, sizeof err);
    if (st) {
        report("starting the engine", st, err);
        return st == RKV_EINVAL || st == RKV_ENOTSUP ? 2 : 1;
    }
    if (o.ec.cache_cfg.policy && !cache_can(engine_cache(e), CACHE_CAP_REUSE)) {
        fprintf(stderr, "radixkv run: --evict-policy does not apply to --cache %s (it never "
                "reuses a page, so it never chooses one to evict)\n", o.ec.cache_cfg.kind);
        engine_destroy(e);
        return 2;
    }
    backend *be = engine_backend(e);
    fprintf(stderr, "radixkv run: %s; cache %s, policy %s, schedule %s\n", be->description,
            o.ec.cache_cfg.kind ? o.ec.cache_cfg.kind : "radix", o.ec.policy, o.ec.schedule);
    cache_pins pins;
    cache_pins_init(&pins);
    if ((rc = apply_pins(e, &o, &pins)) >= 0) {
        run_teardown(e, &pins);
        return rc;
    }
    run_ids ids = {0};
    if ((st = run_load_trace(e, o.trace, o.default_max_tokens, o.namespace_name, &ids, err, sizeof err))) {
        report("", st, err);
        run_ids_free(&ids);
        run_teardown(e, &pins);
        return 1;
    }
    out_file of;
    FILE *out = open_out(&o, &of);
    if (!out) {
        run_ids_free(&ids);
        run_teardown(e, &pins);
        return 1;
    }
    bool interrupted = false;
    if ((st = serve(e, &o, &ids, out, &interrupted, err, sizeof err))) {
        engine_stats es;
        engine_get_stats(e, &es);
        char what[64];
        snprintf(what, sizeof what, "step %lld", (long long)es.steps);
        report(what, st, err);
        /* A failure leaves the cache consistent (the fault-injection loop checks it). */
        if (cache_check(engine_cache(e), err, sizeof err))
            fprintf(stderr, "radixkv run: after that error the cache fails its check: %s\n", err);
        close_out(&o, out, &of, true);
        run_ids_free(&ids);
        run_teardown(e, &pins);
        return 1;
    }

    int status = print_summary(e, &o, &ids, interrupted, out);
    if (o.pin && cache_pins_check(engine_cache(e), &pins, err, sizeof err)) {
        fprintf(stderr, "radixkv run: %s\n", err);
        status = 1;
    }
    if (close_out(&o, out, &of, false)) status = 1;
    run_ids_free(&ids);
    run_teardown(e, &pins);
    return status;
}
