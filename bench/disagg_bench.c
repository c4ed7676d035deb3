/* disagg_bench.c - what replaying a Mooncake trace through N engines on the
 * sim clock costs in CPU, colocated (`run --replicas E`) and disaggregated
 * (`run --prefill E/2 --decode E - E/2`), as the engine count grows.
 *
 *   disagg_bench [--trace FILE] [--engines 1,2,4,...,64] [--repeat R]
 *                [--modes colocated,disagg] [--model PRESET] [--kv-tokens N]
 *                [--router NAME] [--link SPEC] [--max-requests N]
 *                [--prefill-engines N]
 *
 * --trace: a Mooncake-format trace (the FAST25-release/traces/ folder of
 * github.com/kvcache-ai/Mooncake); default $RKV_MOONCAKE_DIR/
 * conversation_trace.jsonl. Without one the bench says so and exits 77.
 * --prefill-engines: disaggregated runs use N prefill engines and the rest
 * decode (default: half, E/2 + E - E/2).
 * Each run is the whole of replicas_run (trace parsing included) with its
 * per-request lines written to /dev/null. Runs are interleaved over repeats
 * (every configuration once, then again) so a busy machine's drift hits each
 * alike. One JSON line per (mode, engines):
 *
 *   {"bench": "disagg", "trace", "requests", "mode", "engines", "prefill",
 *    "decode", "repeat", "thread_cpu_s": {median, min, max}, "wall_s": {...},
 *    "cpu_us_per_request", "cpu_per_request_vs_first", "steps", "steps_moved",
 *    "step_calls"}
 *
 * steps: simulated steps over every engine; steps_moved: of them, stable
 * decode steps that moved the last batch by a row (engine.h steps_moved;
 * 0 with RKV_REBUILD_BATCHES=1); step_calls: the driver's calls that ran them,
 * several steps each up to its next event (engine_step_until; one step each
 * with RKV_STEP_ONCE=1).
 *
 * cpu_per_request_vs_first: this count's median thread CPU per request over
 * the smallest engine count's of the same mode, measured in the same run.
 * Build with -Db_ndebug=true: debug builds check every pool after every step.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "cli.h"
#include "engine.h"
#include "replicas.h"
#include "rkv_core.h"

static int split_list(char *s, char **out, int max)
{
    int n = 0;
    for (char *save = NULL, *t = strtok_r(s, ",", &save); t && n < max; t = strtok_r(NULL, ",", &save))
        out[n++] = t;
    return n;
}

/* The first max lines of src into a temporary file (path in out); the number
 * of lines in *n. */
static int copy_head(const char *src, int64_t max, char *out, size_t outlen, int64_t *n)
{
    FILE *in = fopen(src, "r");
    if (!in) return -1;
    snprintf(out, outlen, "/tmp/disagg_bench_XXXXXX");
    int fd = max > 0 ? mkstemp(out) : -1;
    FILE *o = fd >= 0 ? fdopen(fd, "w") : NULL;
    char *line = NULL;
    size_t cap = 0;
    *n = 0;
    while (getline(&line, &cap, in) > 0 && (max <= 0 || *n < max)) {
        if (o) fputs(line, o);
        (*n)++;
    }
    free(line);
    fclose(in);
    if (o) fclose(o);
    if (max <= 0) snprintf(out, outlen, "%s", src);
    return 0;
}

typedef struct conf {
    bool disagg;
    int32_t engines, prefill;
    double cpu[64], wall[64];
    struct replicas_steps steps; /* the last repeat's (every repeat runs the same steps) */
} conf;

static void stats3(double *v, int n, double *med, double *lo, double *hi)
{
    qsort(v, (size_t)n, sizeof *v, rkv_cmp_double);
    *med = rkv_percentile(v, n, 50);
    *lo = v[0];
    *hi = v[n - 1];
}

/* The grid of --modes x --engines (a disaggregated point needs one prefill
 * and one decode engine at least) into confs[0..32); its size, or -1 after
 * naming a bad value. */
static int make_confs(const char *engines_arg, const char *modes_arg, int64_t prefill_engines,
                      conf confs[32])
{
    char ebuf[256] = "1,2,4,8,16,32,64", mbuf[64] = "colocated,disagg";
    if (engines_arg) snprintf(ebuf, sizeof ebuf, "%s", engines_arg);
    if (modes_arg) snprintf(mbuf, sizeof mbuf, "%s", modes_arg);
    char *es[16], *ms[2];
    int ne = split_list(ebuf, es, 16), nm = split_list(mbuf, ms, 2);
    int nc = 0;
    for (int m = 0; m < nm; m++) {
        bool dis = !strcmp(ms[m], "disagg");
        if (!dis && strcmp(ms[m], "colocated")) {
            fprintf(stderr, "disagg_bench: --modes: '%s' (colocated | disagg)\n", ms[m]);
            return -1;
        }
        for (int k = 0; k < ne; k++) {
            int32_t e = atoi(es[k]);
            if (e < 1 || e > 1024) {
                fprintf(stderr, "disagg_bench: --engines: '%s' (1 to 1024)\n", es[k]);
                return -1;
            }
            if (dis && (e < 2 || (prefill_engines && prefill_engines >= e)))
                continue; /* one prefill and one decode engine at least */
            int32_t np = prefill_engines ? (int32_t)prefill_engines : e / 2;
            confs[nc++] = (conf){.disagg = dis, .engines = e, .prefill = dis ? np : 0};
        }
    }
    return nc;
}

/* repeat rounds over every point (rounds outer, so drift spreads over all
 * points): each point's replicas_run timed in thread CPU and wall time.
 * Returns 0, or 1 after naming the failure. */
static int run_confs(const engine_config *ec, conf *confs, int nc, int64_t repeat, router_kind rk,
                     const char *path, const char *link)
{
    FILE *null = fopen("/dev/null", "w");
    if (!null) {
        fprintf(stderr, "disagg_bench: cannot open /dev/null\n");
        return 1;
    }
    int rc = 0;
    for (int r = 0; r < repeat && !rc; r++) {
        for (int c = 0; c < nc && !rc; c++) {
            conf *cf = &confs[c];
            replicas_config rcfg = {
                .engine = ec, .replicas = cf->engines, .router = rk, .balance_threshold = 8,
                .cache_threshold = 0.5, .trace = path, .default_max_tokens = 16,
                .prefill = cf->prefill, .decode = cf->disagg ? cf->engines - cf->prefill : 0,
                .link = link,
                .decode_router = ROUTER_LEAST_LOAD,
                .steps = &cf->steps,
            };
            cf->steps = (struct replicas_steps){0, 0, 0};
            char err[512] = "";
            bool intr = false;
            double c0 = bench_clock_s(CLOCK_THREAD_CPUTIME_ID), w0 = bench_clock_s(CLOCK_MONOTONIC);
            rkv_status st = replicas_run(&rcfg, null, &intr, err, sizeof err);
            cf->cpu[r] = bench_clock_s(CLOCK_THREAD_CPUTIME_ID) - c0;
            cf->wall[r] = bench_clock_s(CLOCK_MONOTONIC) - w0;
            if (st || intr) {
                fprintf(stderr, "disagg_bench: %s\n", intr ? "interrupted" : err);
                rc = 1;
            }
        }
    }
    fclose(null);
    return rc;
}

/* One JSON line per point: medians and ranges, CPU per request, and its
 * ratio to the first point of the same mode. */
static void print_confs(conf *confs, int nc, int64_t repeat, const char *trace, int64_t nreq,
                        const char *model, int64_t kv_tokens, const char *router_name)
{
    double base[2] = {0, 0};
    for (int c = 0; c < nc; c++) {
        conf *cf = &confs[c];
        double cm, clo, chi, wm, wlo, whi;
        stats3(cf->cpu, (int)repeat, &cm, &clo, &chi);
        stats3(cf->wall, (int)repeat, &wm, &wlo, &whi);
        double per = cm / (double)nreq;
        if (base[cf->disagg] == 0) base[cf->disagg] = per;
        const char *tn = strrchr(trace, '/');
        printf("{\"bench\":\"disagg\",\"trace\":\"%s\",\"requests\":%lld,\"model\":\"%s\","
               "\"kv_tokens\":%lld,\"router\":\"%s\",\"mode\":\"%s\",\"engines\":%d,\"prefill\":%d,"
               "\"decode\":%d,\"repeat\":%lld,\"thread_cpu_s\":{\"median\":%.4f,\"min\":%.4f,"
               "\"max\":%.4f},\"wall_s\":{\"median\":%.4f,\"min\":%.4f,\"max\":%.4f},"
               "\"cpu_us_per_request\":%.2f,\"cpu_per_request_vs_first\":%.3f,"
               "\"steps\":%lld,\"steps_moved\":%lld,\"step_calls\":%lld}\n",
               tn ? tn + 1 : trace, (long long)nreq, model, (long long)kv_tokens, router_name,
               cf->disagg ? "disagg" : "colocated", cf->engines,
               cf->prefill, cf->disagg ? cf->engines - cf->prefill : 0,
               (long long)repeat, cm, clo, chi, wm, wlo, whi, 1e6 * per, per / base[cf->disagg],
               (long long)cf->steps.steps, (long long)cf->steps.moved,
               (long long)cf->steps.calls);
        fflush(stdout);
    }
}

int main(int argc, char **argv)
{
    const char *trace = NULL, *model = "qwen2.5-7b", *router_name = "round-robin", *link = NULL;
    const char *engines_arg = NULL, *modes_arg = NULL;
    int64_t repeat = 3, kv_tokens = 1000000, max_requests = 0, prefill_engines = 0;
    cli_opt table[] = {
        CLI_STR_OPT("--trace", &trace),
        CLI_STR_OPT("--engines", &engines_arg),
        CLI_STR_OPT("--modes", &modes_arg),
        CLI_STR_OPT("--model", &model),
        CLI_STR_OPT("--router", &router_name),
        CLI_STR_OPT("--link", &link),
        CLI_INT_OPT("--repeat", &repeat, 1, 64),
        CLI_INT_OPT("--kv-tokens", &kv_tokens, 16, INT32_MAX),
        CLI_INT_OPT("--max-requests", &max_requests, 0, INT32_MAX),
        CLI_INT_OPT("--prefill-engines", &prefill_engines, 1, 1023),
        CLI_END,
    };
    char perr[256];
    cli_args a;
    if (cli_parse("disagg_bench", table, argc, argv, &a, perr, sizeof perr) || a.npos || a.help) {
        fprintf(stderr, "disagg_bench: %s\n", a.help || a.npos ? "see the options at the top of "
                "bench/disagg_bench.c" : perr);
        return 2;
    }
    char dflt[4096];
    if (!trace) {
        const char *dir = getenv("RKV_MOONCAKE_DIR");
        if (dir) snprintf(dflt, sizeof dflt, "%s/conversation_trace.jsonl", dir);
        trace = dir ? dflt : NULL;
    }
    char path[4096];
    int64_t nreq = 0;
    if (!trace || copy_head(trace, max_requests, path, sizeof path, &nreq)) {
        fprintf(stderr, "disagg_bench: skip: no Mooncake trace %s%s (pass --trace or set "
                "RKV_MOONCAKE_DIR; the FAST25-release/traces/ folder of kvcache-ai/Mooncake)\n",
                trace ? "at " : "", trace ? trace : "");
        return 77;
    }
    router_kind rk;
    if (router_kind_parse(router_name, &rk)) {
        fprintf(stderr, "disagg_bench: --router: unknown '%s'\n", router_name);
        return 2;
    }
    conf confs[32];
    int nc = make_confs(engines_arg, modes_arg, prefill_engines, confs);
    if (nc < 0) return 2;
    engine_config ec;
    engine_config_default(&ec);
    ec.backend = "sim";
    ec.backend_cfg.model = model;
    ec.backend_cfg.num_pages = (kv_tokens + ec.backend_cfg.page_size - 1) / ec.backend_cfg.page_size;
    ec.fixed_clock = true;
    int rc = run_confs(&ec, confs, nc, repeat, rk, path, link);
    if (!rc) print_confs(confs, nc, repeat, trace, nreq, model, kv_tokens, router_name);
    if (max_requests > 0) unlink(path);
    return rc;
}
