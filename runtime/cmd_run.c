/* cmd_run.c - `radixkv run`: serve a trace through the engine and report.
 *
 *   trace --> engine_add (all requests; arrivals honoured) --> engine_run
 *          per request, as it finishes: one JSON line (stdout or --out)
 *          at the end: a summary JSON line there too, a table on stderr
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_sim.h"
#include "cache.h"
#include "commands.h"
#include "engine.h"
#include "model_config.h"
#include "progress.h"
#include "trace.h"

/* ---- options ------------------------------------------------------------ */

typedef struct run_opts {
    engine_config ec;
    const char *trace;
    const char *out;
    int64_t kv_tokens;
    int32_t default_max_tokens;
    bool progress;
} run_opts;

static void usage_run(FILE *f)
{
    fprintf(f,
        "usage: radixkv run --trace FILE [options]\n"
        "\n"
        "Serves a request trace through the engine: continuous batching, chunked prefill,\n"
        "a prefix cache, a model backend. Per-request results and a summary go to stdout\n"
        "(or --out) as JSON Lines; a table and a progress bar go to stderr.\n"
        "TRACE: JSON Lines {\"id\", \"tokens\", \"max_tokens\"?, \"arrival\"?, \"temperature\"?,\n"
        "\"top_p\"?, \"top_k\"?, \"seed\"?} or a Mooncake trace; '-' reads stdin.\n"
        "\n"
        "  --backend NAME          cpu (default) | sim | cuda\n"
        "  --model PRESET|DIR      default | qwen2.5-0.5b | qwen2.5-3b | qwen2.5-7b | llama-3-8b |\n"
        "                          a config.json or a directory holding one\n"
        "  --weights PATH          safetensors file or directory (default: seeded random)\n"
        "  --cache KIND            radix (default) | hash | hash-nocache | trie | none\n"
        "  --evict-policy NAME     lru (default) | lfu | fifo\n"
        "  --hash NAME             xxh3 (default) | sha256 | md5\n"
        "  --policy NAME           fcfs (default) | lpm | dfs-weight | random\n"
        "  --schedule MODE         sync (default) | overlap\n"
        "  --page-size P           tokens per KV page (default 16)\n"
        "  --max-batched-tokens N  token budget per step (default 8192)\n"
        "  --max-running N         running requests at most (default 256)\n"
        "  --lpm-queue-limit N     lpm/dfs-weight act as fcfs above N waiting (default 128)\n"
        "  --num-pages N           KV pages (default: the backend decides)\n"
        "  --kv-tokens N           KV capacity in tokens (ceil(N / P) pages)\n"
        "  --max-tokens N          output length for lines without max_tokens (default 16)\n"
        "  --gpu PROFILE           sim: h100 (default) | h200 | a100 | a10g [,eff=X,mem_eff=X,overhead_ms=X]\n"
        "  --threads N             cpu: threads (default: all cores)\n"
        "  --seed N                weights, policy random, default sampling seeds (default 0)\n"
        "  --offline               ignore arrival times: everything at t = 0\n"
        "  --fixed-clock           sim: leave measured CPU time out of the clock (repeatable)\n"
        "  --out FILE              write the JSON Lines there instead of stdout\n"
        "  --no-progress           no progress bar\n");
}

static int bad(const char *opt, const char *v, const char *why)
{
    fprintf(stderr, "radixkv run: %s: %s '%s'\n", opt, why, v ? v : "");
    return 2;
}

static int parse_int(const char *opt, const char *v, int64_t lo, int64_t hi, int64_t *out)
{
    char *end;
    errno = 0;
    long long x = v ? strtoll(v, &end, 10) : 0;
    if (!v || errno || end == v || *end || x < lo || x > hi) {
        fprintf(stderr, "radixkv run: %s: expected an integer in [%" PRId64 ", %" PRId64 "], got '%s'\n",
                opt, lo, hi, v ? v : "");
        return 2;
    }
    *out = x;
    return 0;
}

static int choice(const char *opt, const char *v, const char *const *names)
{
    for (int i = 0; names[i]; i++)
        if (v && !strcmp(v, names[i])) return 0;
    fprintf(stderr, "radixkv run: %s: unknown value '%s' (one of:", opt, v ? v : "");
    for (int i = 0; names[i]; i++) fprintf(stderr, " %s", names[i]);
    fprintf(stderr, ")\n");
    return 2;
}

static const char *const backend_names[] = {"cpu", "sim", "cuda", NULL};
static const char *const policy_names[] = {"fcfs", "lpm", "dfs-weight", "random", NULL};
static const char *const schedule_names[] = {"sync", "overlap", NULL};
static const char *const evict_names[] = {"lru", "lfu", "fifo", NULL};
static const char *const hash_names[] = {"xxh3", "sha256", "md5", NULL};

/* Returns -1 to go on, else an exit status. */
static int parse_run(int argc, char **argv, run_opts *o)
{
    engine_config_default(&o->ec);
    o->default_max_tokens = 16;
    o->progress = true;
    for (int i = 1; i < argc; i++) {
        char name[64];
        const char *a = argv[i], *val = NULL;
        const char *eq = strchr(a, '=');
        if (a[0] == '-' && a[1] == '-' && eq && (size_t)(eq - a) < sizeof name) {
            memcpy(name, a, (size_t)(eq - a));
            name[eq - a] = 0;
            val = eq + 1;
        } else {
            snprintf(name, sizeof name, "%s", a);
        }
#define FLAG(s) (!strcmp(name, s))
#define VALUE() (val ? val : (i + 1 < argc ? argv[++i] : NULL))
#define NEED(v) do { if (!(v)) { fprintf(stderr, "radixkv run: %s needs a value\n", name); return 2; } } while (0)
        int64_t x;
        int rc;
        if (FLAG("--help") || FLAG("-h")) {
            usage_run(stdout);
            return 0;
        } else if (FLAG("--offline") || FLAG("--fixed-clock") || FLAG("--no-progress")) {
            if (val) return bad(name, val, "takes no value, got");
            if (FLAG("--offline")) o->ec.offline = true;
            else if (FLAG("--fixed-clock")) o->ec.fixed_clock = true;
            else o->progress = false;
            continue;
        }
        if (strncmp(name, "--", 2)) {
            fprintf(stderr, "radixkv run: unexpected argument '%s' (the trace goes after --trace)\n", a);
            return 2;
        }
        static const char *const value_opts[] = {
            "--trace", "--out", "--backend", "--model", "--weights", "--cache", "--evict-policy",
            "--hash", "--policy", "--schedule", "--page-size", "--max-batched-tokens",
            "--max-running", "--lpm-queue-limit", "--num-pages", "--kv-tokens", "--max-tokens",
            "--gpu", "--threads", "--seed", NULL};
        int known = 0;
        while (value_opts[known] && strcmp(value_opts[known], name)) known++;
        if (!value_opts[known]) {
            fprintf(stderr, "radixkv run: unknown option %s (see radixkv run --help)\n", name);
            return 2;
        }
        const char *v = VALUE();
        NEED(v);
        if (FLAG("--trace")) o->trace = v;
        else if (FLAG("--out")) o->out = v;
        else if (FLAG("--backend")) {
            if ((rc = choice(name, v, backend_names))) return rc;
            o->ec.backend = v;
        } else if (FLAG("--model")) o->ec.backend_cfg.model = v;
        else if (FLAG("--weights")) o->ec.backend_cfg.weights = v;
        else if (FLAG("--cache")) {
            if ((rc = choice(name, v, cache_kind_names))) return rc;
            o->ec.cache_cfg.kind = v;
        } else if (FLAG("--evict-policy")) {
            if ((rc = choice(name, v, evict_names))) return rc;
            o->ec.cache_cfg.policy = v;
        } else if (FLAG("--hash")) {
            if ((rc = choice(name, v, hash_names))) return rc;
            o->ec.cache_cfg.hash_fn = v;
        } else if (FLAG("--policy")) {
            if ((rc = choice(name, v, policy_names))) return rc;
            o->ec.policy = v;
        } else if (FLAG("--schedule")) {
            if ((rc = choice(name, v, schedule_names))) return rc;
            o->ec.schedule = v;
        } else if (FLAG("--page-size")) {
            if ((rc = parse_int(name, v, 1, 1 << 16, &x))) return rc;
            o->ec.backend_cfg.page_size = (int32_t)x;
        } else if (FLAG("--max-batched-tokens")) {
            if ((rc = parse_int(name, v, 1, INT32_MAX / 4, &x))) return rc;
            o->ec.max_num_batched_tokens = (int32_t)x;
        } else if (FLAG("--max-running")) {
            if ((rc = parse_int(name, v, 1, 1 << 20, &x))) return rc;
            o->ec.max_running = (int32_t)x;
        } else if (FLAG("--lpm-queue-limit")) {
            if ((rc = parse_int(name, v, 1, INT32_MAX, &x))) return rc;
            o->ec.lpm_queue_limit = (int32_t)x;
        } else if (FLAG("--num-pages")) {
            if ((rc = parse_int(name, v, 1, INT32_MAX, &x))) return rc;
            o->ec.backend_cfg.num_pages = x;
        } else if (FLAG("--kv-tokens")) {
            if ((rc = parse_int(name, v, 1, INT64_MAX / 2, &x))) return rc;
            o->kv_tokens = x;
        } else if (FLAG("--max-tokens")) {
            if ((rc = parse_int(name, v, 1, 1 << 24, &x))) return rc;
            o->default_max_tokens = (int32_t)x;
        } else if (FLAG("--gpu")) o->ec.backend_cfg.gpu_profile = v;
        else if (FLAG("--threads")) {
            if ((rc = parse_int(name, v, 0, 1024, &x))) return rc;
            o->ec.backend_cfg.num_threads = (int)x;
        } else if (FLAG("--seed")) {
            if ((rc = parse_int(name, v, 0, INT64_MAX, &x))) return rc;
            o->ec.seed = (uint64_t)x;
            o->ec.backend_cfg.seed = (uint64_t)x;
        } else {
            fprintf(stderr, "radixkv run: unknown option %s (see radixkv run --help)\n", name);
            return 2;
        }
#undef FLAG
#undef VALUE
#undef NEED
    }
    if (!o->trace) {
        fprintf(stderr, "radixkv run: --trace FILE is required (see radixkv run --help)\n");
        return 2;
    }
    /* Values the backend would reject later, named by their option now. */
    char err[512];
    model_config mc;
    if (model_config_load(o->ec.backend_cfg.model, &mc, err, sizeof err)) {
        fprintf(stderr, "radixkv run: --model: %s\n", err);
        return 2;
    }
    sim_profile sp;
    if (o->ec.backend_cfg.gpu_profile && sim_profile_parse(o->ec.backend_cfg.gpu_profile, &sp, err, sizeof err)) {
        fprintf(stderr, "radixkv run: --gpu: %s\n", err);
        return 2;
    }
    if (o->kv_tokens > 0) {
        if (o->ec.backend_cfg.num_pages > 0) {
            fprintf(stderr, "radixkv run: --kv-tokens and --num-pages both given; pick one\n");
            return 2;
        }
        int64_t P = o->ec.backend_cfg.page_size;
        if ((o->kv_tokens + P - 1) / P > INT32_MAX)
            return bad("--kv-tokens", "", "too many pages for");
        o->ec.backend_cfg.num_pages = (o->kv_tokens + P - 1) / P;
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

rkv_status run_load_trace(engine *e, const char *path, int32_t default_max_tokens, run_ids *ids,
                          char *err, size_t errlen)
{
    trace_options topt = {
        .format = TRACE_FORMAT_AUTO,
        .tokens = TRACE_TOKENS_VOCAB,
        .vocab_size = engine_backend(e)->vocab_size,
    };
    trace_reader *tr = NULL;
    rkv_status st = trace_open(path, &topt, &tr, err, errlen);
    if (st) return st;
    trace_request q;
    trace_request_init(&q);
    for (;;) {
        bool eof = false;
        if ((st = trace_next(tr, &q, &eof, err, errlen)) || eof) break;
        engine_request er = {
            .tokens = q.tokens,
            .n_tokens = q.n_tokens,
            .max_tokens = q.max_tokens >= 0 ? q.max_tokens : default_max_tokens,
            .stop_token = -1,
            .sampling = {
                .temperature = q.temperature >= 0 ? (float)q.temperature : 0.0f,
                .top_k = q.top_k >= 0 ? q.top_k : 0,
                .top_p = q.top_p >= 0 ? (float)q.top_p : 1.0f,
                /* 0 asks the engine to derive one; a given seed never maps to 0. */
                .seed = q.seed >= 0 ? ((uint64_t)q.seed << 1) | 1 : 0,
            },
            .arrival = q.arrival >= 0 ? q.arrival : 0,
        };
        int64_t id;
        char why[256];
        if ((st = engine_add(e, &er, &id, why, sizeof why))) {
            snprintf(err, errlen, "%s:%lld: %s", path, (long long)q.line, why);
            break;
        }
        if (ids) {
            if (ids->n == ids->cap) {
                int64_t nc = ids->cap ? ids->cap * 2 : 256;
                char **p = realloc(ids->id_json, sizeof(char *) * (size_t)nc);
                if (!p) {
                    st = RKV_ENOMEM;
                    break;
                }
                ids->id_json = p;
                ids->cap = nc;
            }
            ids->id_json[ids->n] = strdup(q.id_json ? q.id_json : "null");
            if (!ids->id_json[ids->n]) {
                st = RKV_ENOMEM;
                break;
            }
            ids->n++;
        }
    }
    if (st == RKV_ENOMEM) snprintf(err, errlen, "%s: out of host memory", path);
    trace_request_free(&q);
    trace_close(tr);
    return st;
}

/* ---- output -------------------------------------------------------------- */

typedef struct run_ctx {
    FILE *out;
    run_ids *ids;
    progress prog;
    int64_t done;
} run_ctx;

static void json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') fprintf(f, "\\%c", ch);
        else if (ch < 0x20) fprintf(f, "\\u%04x", ch);
        else fputc(ch, f);
    }
    fputc('"', f);
}

static void on_finish(void *vctx, engine *e, int64_t id)
{
    run_ctx *c = vctx;
    engine_result r;
    engine_result_get(e, id, &r);
    FILE *f = c->out;
    fprintf(f, "{\"type\":\"request\",\"id\":%s", id < c->ids->n ? c->ids->id_json[id] : "null");
    if (r.error) {
        fprintf(f, ",\"error\":");
        json_string(f, r.error);
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

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Nearest-rank percentile of sorted v (n > 0). */
static double pct(const double *v, int64_t n, double p)
{
    if (n == 0) return 0;
    int64_t k = (int64_t)ceil(p / 100.0 * (double)n);
    if (k < 1) k = 1;
    if (k > n) k = n;
    return v[k - 1];
}

int cmd_run(int argc, char **argv)
{
    run_opts o;
    memset(&o, 0, sizeof o);
    int rc = parse_run(argc, argv, &o);
    if (rc >= 0) return rc;

    char err[512] = "";
    engine *e = NULL;
    rkv_status st = engine_create(&o.ec, &e, err, sizeof err);
    if (st) {
        fprintf(stderr, "radixkv run: %s\n", err);
        return st == RKV_EINVAL || st == RKV_ENOTSUP ? 2 : 1;
    }
    backend *be = engine_backend(e);
    fprintf(stderr, "radixkv run: %s; cache %s, policy %s, schedule %s\n", be->description,
            o.ec.cache_cfg.kind ? o.ec.cache_cfg.kind : "radix", o.ec.policy, o.ec.schedule);

    run_ids ids = {0};
    if ((st = run_load_trace(e, o.trace, o.default_max_tokens, &ids, err, sizeof err))) {
        fprintf(stderr, "radixkv run: %s\n", err);
        run_ids_free(&ids);
        engine_destroy(e);
        return 1;
    }
    FILE *out = stdout;
    if (o.out && !(out = fopen(o.out, "w"))) {
        fprintf(stderr, "radixkv run: --out: cannot write '%s': %s\n", o.out, strerror(errno));
        run_ids_free(&ids);
        engine_destroy(e);
        return 1;
    }
    run_ctx ctx = {.out = out, .ids = &ids};
    progress_start(&ctx.prog, "run", "requests", ids.n, o.progress);
    engine_on_finish(e, on_finish, &ctx);
    /* Requests that failed at add time (never fit) were reported before the
     * callback existed: report them now. */
    for (int64_t i = 0; i < ids.n; i++) {
        engine_result r;
        engine_result_get(e, i, &r);
        if (r.finished) on_finish(&ctx, e, i);
    }
    st = engine_run(e, err, sizeof err);
    progress_finish(&ctx.prog);
    if (st) {
        fprintf(stderr, "radixkv run: %s\n", err);
        if (out != stdout) fclose(out);
        run_ids_free(&ids);
        engine_destroy(e);
        return 1;
    }

    engine_stats s;
    engine_get_stats(e, &s);
    double *ttft = malloc(sizeof(double) * (size_t)(ids.n + 1));
    double *tpot = malloc(sizeof(double) * (size_t)(ids.n + 1));
    int64_t nt = 0, np = 0;
    double t_end = 0;
    for (int64_t i = 0; ttft && tpot && i < ids.n; i++) {
        engine_result r;
        engine_result_get(e, i, &r);
        if (r.error) continue;
        ttft[nt++] = r.ttft;
        if (r.num_output > 1) tpot[np++] = r.tpot;
        if (r.finish_time > t_end) t_end = r.finish_time;
    }
    if (ttft) qsort(ttft, (size_t)nt, sizeof(double), cmp_double);
    if (tpot) qsort(tpot, (size_t)np, sizeof(double), cmp_double);
    double span = t_end > 0 ? t_end : 1e-9;
    double hit = s.prompt_tokens ? (double)s.cached_tokens / (double)s.prompt_tokens : 0;
    double sched_ms = s.steps ? s.sched_cpu_seconds / (double)s.steps * 1e3 : 0;
    double p50_ttft = ttft ? pct(ttft, nt, 50) : 0, p99_ttft = ttft ? pct(ttft, nt, 99) : 0;
    double p50_tpot = tpot ? pct(tpot, np, 50) : 0, p99_tpot = tpot ? pct(tpot, np, 99) : 0;
    fprintf(out,
            "{\"type\":\"summary\",\"backend\":\"%s\",\"cache\":\"%s\",\"policy\":\"%s\","
            "\"schedule\":\"%s\",\"requests\":%lld,\"errors\":%lld,\"duration\":%.6f,"
            "\"requests_per_s\":%.6f,\"output_tokens_per_s\":%.6f,\"prompt_tokens\":%lld,"
            "\"cached_tokens\":%lld,\"output_tokens\":%lld,\"hit_rate\":%.6f,"
            "\"ttft_p50\":%.6f,\"ttft_p99\":%.6f,\"tpot_p50\":%.6f,\"tpot_p99\":%.6f,"
            "\"preemptions\":%lld,\"steps\":%lld,\"max_step_tokens\":%lld,"
            "\"sched_cpu_ms_per_step\":%.6f,\"model_seconds\":%.6f,\"num_pages\":%lld}\n",
            be->ops->name, o.ec.cache_cfg.kind ? o.ec.cache_cfg.kind : "radix", o.ec.policy,
            o.ec.schedule, (long long)s.num_requests, (long long)s.num_errors, span,
            (double)(s.num_finished - s.num_errors) / span, (double)s.output_tokens / span,
            (long long)s.prompt_tokens, (long long)s.cached_tokens, (long long)s.output_tokens,
            hit, p50_ttft, p99_ttft, p50_tpot, p99_tpot, (long long)s.preemptions,
            (long long)s.steps, (long long)s.max_step_tokens, sched_ms, s.model_seconds,
            (long long)s.num_pages);
    fprintf(stderr,
            "  requests        %lld (%lld errors) in %.3f s%s\n"
            "  throughput      %.2f requests/s, %.1f output tokens/s\n"
            "  hit rate        %.1f %% (%lld of %lld prompt tokens cached)\n"
            "  TTFT            p50 %.2f ms, p99 %.2f ms\n"
            "  TPOT            p50 %.2f ms, p99 %.2f ms\n"
            "  steps           %lld, preemptions %lld, scheduler CPU %.3f ms/step\n",
            (long long)s.num_requests, (long long)s.num_errors, span,
            be->ops->name && !strcmp(be->ops->name, "sim") ? " (modelled)" : "",
            (double)(s.num_finished - s.num_errors) / span, (double)s.output_tokens / span,
            hit * 100, (long long)s.cached_tokens, (long long)s.prompt_tokens, p50_ttft * 1e3,
            p99_ttft * 1e3, p50_tpot * 1e3, p99_tpot * 1e3, (long long)s.steps,
            (long long)s.preemptions, sched_ms);
    free(ttft);
    free(tpot);
    int status = 0;
    if (out != stdout) {
        if (fclose(out)) {
            fprintf(stderr, "radixkv run: --out: write to '%s' failed\n", o.out);
            status = 1;
        }
    } else if (fflush(stdout)) {
        status = 1;
    }
    run_ids_free(&ids);
    engine_destroy(e);
    return status;
}
