/* main.c - the `radixkv` command line: one table of subcommands.
 *
 *   radixkv --help | --version
 *   radixkv COMMAND --help
 *   radixkv cache-sim --cache KIND --capacity TOKENS --page-size P ... TRACE
 *
 * Adding a command: write `static int cmd_NAME(int argc, char **argv)` (argv[0]
 * is the command name; print usage on --help; fail at once naming a bad
 * option) and add a line to commands[] below. The option helpers (opt_*) are
 * shared. JSON goes to stdout, everything for humans to stderr.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "billing.h"
#include "cache.h"
#include "cache_sim.h"
#include "backend_sim.h"
#include "cache_tier.h"
#include "model_config.h"
#include "pin_file.h"
#include "tier_opts.h"
#include "rkv_config.h"
#include "commands.h"
#include "evict_policy.h"
#include "trace.h"

/* ------------------------------------------------------- option helpers */

/* Walks argv: "--name value", "--name=value", flags and positionals. */
typedef struct opt_iter {
    int argc, i;
    char **argv;
    const char *cmd;   /* for messages */
    const char *name;  /* current option, e.g. "--capacity" */
    const char *inl;   /* value after '=' or NULL */
    char namebuf[64];
} opt_iter;

/* Next argument: returns 1 for an option (it->name), 2 for a positional
 * (it->name is the argument), 0 at the end. */
static int opt_next(opt_iter *it)
{
    if (++it->i >= it->argc) return 0;
    const char *a = it->argv[it->i];
    it->inl = NULL;
    if (a[0] == '-' && a[1] == '-' && a[2]) {
        const char *eq = strchr(a, '=');
        if (eq && (size_t)(eq - a) < sizeof it->namebuf) {
            memcpy(it->namebuf, a, (size_t)(eq - a));
            it->namebuf[eq - a] = '\0';
            it->name = it->namebuf;
            it->inl = eq + 1;
        } else {
            it->name = a;
        }
        return 1;
    }
    if (a[0] == '-' && a[1] == 'h' && !a[2]) { it->name = "--help"; return 1; }
    it->name = a;
    return 2;
}

static bool opt_is(const opt_iter *it, const char *name) { return strcmp(it->name, name) == 0; }

/* The option's value; exits with a message when it is missing. */
static const char *opt_value(opt_iter *it)
{
    if (it->inl) return it->inl;
    if (it->i + 1 >= it->argc) {
        fprintf(stderr, "radixkv %s: %s needs a value\n", it->cmd, it->name);
        exit(2);
    }
    return it->argv[++it->i];
}

static int64_t opt_int(opt_iter *it, int64_t lo, int64_t hi)
{
    const char *v = opt_value(it);
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (errno || end == v || *end || x < lo || x > hi) {
        fprintf(stderr, "radixkv %s: %s: expected an integer in [%" PRId64 ", %" PRId64 "], got '%s'\n",
                it->cmd, it->name, lo, hi, v);
        exit(2);
    }
    return x;
}

/* value must be one of names (NULL-terminated). */
static const char *opt_choice(opt_iter *it, const char *const *names)
{
    const char *v = opt_value(it);
    for (int i = 0; names[i]; i++)
        if (!strcmp(v, names[i])) return v;
    fprintf(stderr, "radixkv %s: %s: unknown value '%s' (one of:", it->cmd, it->name, v);
    for (int i = 0; names[i]; i++) fprintf(stderr, " %s", names[i]);
    fprintf(stderr, ")\n");
    exit(2);
}

/* A price per million tokens (billing.h). */
static double opt_price(opt_iter *it)
{
    const char *v = opt_value(it);
    double x;
    if (billing_parse_price(v, &x) != RKV_OK) {
        fprintf(stderr, "radixkv %s: %s: expected a price >= 0 per million tokens, got '%s'\n",
                it->cmd, it->name, v);
        exit(2);
    }
    return x;
}

static void opt_unknown(const opt_iter *it)
{
    fprintf(stderr, "radixkv %s: unknown option %s (see radixkv %s --help)\n", it->cmd, it->name,
            it->cmd);
    exit(2);
}

/* ------------------------------------------------------------ cache-sim */

static const char *const hash_names[] = {"xxh3", "sha256", "md5", NULL};

static void usage_cache_sim(FILE *f)
{
    fprintf(f,
        "usage: radixkv cache-sim --cache KIND --capacity TOKENS --page-size P [options] TRACE\n"
        "\n"
        "Replays a request trace through one prefix-cache kind, without a model.\n"
        "TRACE is JSON Lines ({\"id\", \"tokens\", \"step\"?} per line) or a Mooncake trace\n"
        "({\"timestamp\", \"input_length\", \"output_length\", \"hash_ids\"}); '-' reads stdin.\n"
        "\n"
        "  --cache KIND        ");
    for (int i = 0; cache_kind_names[i]; i++) fprintf(f, "%s%s", i ? " | " : "", cache_kind_names[i]);
    fprintf(f,
        "\n"
        "  --capacity TOKENS   cache size in tokens (floor(TOKENS / P) pages)\n"
        "  --page-size P       tokens per page\n"
        "  --policy NAME       eviction policy (radixkv list): lru (default) | ...\n"
        "  --hash NAME         block hash for hash kinds: xxh3 (default) | sha256 | md5\n"
        "  --dump-dir DIR      the tree after every step as JSON and DOT (SVG with graphviz)\n"
        "  --out FILE          write the JSON Lines there instead of stdout\n"
        "  --check             full consistency check of the cache after every step\n"
        "  --no-progress       never draw the progress bar\n"
        "  --summary-only      print only the summary line (sweeps over long traces)\n"
        "  --pin FILE          pin static prefixes for the whole replay: JSON Lines of\n"
        "                      {\"tokens\": [...]} or [...]; each cut down to whole pages\n"
        "  --price-cached X    price per million cached input tokens (default 0.1)\n"
        "  --price-uncached X  price per million uncached input tokens (default 1)\n"
        "  --model PRESET      time model: price each request's prefill (and, with a tier,\n"
        "                      recomputing its tier hits) by the sim backend's roofline;\n"
        "                      a tier page then costs the model's K/V bytes to move\n"
        "  --gpu PROFILE       GPU of the time model: h100 (default) | h200 | a100 | a10g\n");
    tier_opts_usage(f, 19);
    fprintf(f,
        "\n"
        "Output: {\"type\":\"request\",\"id\",\"step\",\"matched\",\"new\"} per request (or\n"
        "\"error\" for a request that can never fit), {\"type\":\"step\",\"step\",\"evicted\"} per\n"
        "step that evicted (each evicted node's own edge tokens, in eviction order), and\n"
        "one {\"type\":\"summary\",...} line, which also bills the prompt tokens: matched\n"
        "ones at the cached price, the rest at the uncached one (\"cost\", \"cost_no_cache\").\n");
}

static int cmd_cache_sim(int argc, char **argv)
{
    opt_iter it = {.argc = argc, .i = 0, .argv = argv, .cmd = "cache-sim"};
    cache_config cfg = {NULL, NULL, NULL};
    cache_sim_options o = {0};
    o.progress = true;
    billing_prices prices;
    billing_prices_default(&prices);
    o.prices = &prices;
    int64_t page_size = -1;
    const char *trace = NULL, *out_path = NULL, *pin_path = NULL, *model_name = NULL;
    const char *gpu_name = NULL;
    tier_opts topt;
    tier_opts_init(&topt);
    char bad[256];
    o.capacity = -1;
    int k;
    while ((k = opt_next(&it)) != 0) {
        if (k == 2) {
            if (trace) {
                fprintf(stderr, "radixkv cache-sim: more than one TRACE ('%s', '%s')\n", trace, it.name);
                return 2;
            }
            trace = it.name;
        } else if (opt_is(&it, "--help")) {
            usage_cache_sim(stdout);
            return 0;
        } else if (opt_is(&it, "--cache")) {
            cfg.kind = opt_choice(&it, (const char *const *)cache_kind_names);
        } else if (opt_is(&it, "--capacity")) {
            o.capacity = opt_int(&it, 1, INT64_MAX / 2);
        } else if (opt_is(&it, "--page-size")) {
            page_size = opt_int(&it, 1, 1 << 20);
        } else if (opt_is(&it, "--policy")) {
            cfg.policy = opt_choice(&it, evict_policy_name_list);
        } else if (opt_is(&it, "--hash")) {
            cfg.hash_fn = opt_choice(&it, hash_names);
        } else if (opt_is(&it, "--dump-dir")) {
            o.dump_dir = opt_value(&it);
        } else if (opt_is(&it, "--out")) {
            out_path = opt_value(&it);
        } else if (opt_is(&it, "--check")) {
            o.check = true;
        } else if (opt_is(&it, "--no-progress")) {
            o.progress = false;
        } else if (opt_is(&it, "--summary-only")) {
            o.summary_only = true;
        } else if (opt_is(&it, "--pin")) {
            pin_path = opt_value(&it);
        } else if (opt_is(&it, "--model")) {
            model_name = opt_value(&it);
        } else if (opt_is(&it, "--gpu")) {
            gpu_name = opt_value(&it);
        } else if (!strncmp(it.name, "--tier-", 7) || opt_is(&it, "--host-bw") || opt_is(&it, "--disk-bw")
                   || opt_is(&it, "--remote-bw") || opt_is(&it, "--remote-latency")) {
            if (!tier_opts_parse(&topt, it.name, opt_value(&it), bad, sizeof bad)) opt_unknown(&it);
            if (bad[0]) {
                fprintf(stderr, "radixkv cache-sim: %s\n", bad);
                return 2;
            }
        } else if (opt_is(&it, "--price-cached")) {
            prices.cached = opt_price(&it);
        } else if (opt_is(&it, "--price-uncached")) {
            prices.uncached = opt_price(&it);
        } else if (!strcmp(it.name, "-")) {
            trace = it.name;
        } else {
            opt_unknown(&it);
        }
    }
    const char *missing = !cfg.kind ? "--cache" : o.capacity < 0 ? "--capacity"
                        : page_size < 0 ? "--page-size" : !trace ? "TRACE" : NULL;
    if (missing) {
        fprintf(stderr, "radixkv cache-sim: %s is required (see radixkv cache-sim --help)\n", missing);
        return 2;
    }
    int64_t pages = o.capacity / page_size;
    if (pages < 1 || pages > INT32_MAX) {
        fprintf(stderr, "radixkv cache-sim: --capacity %" PRId64 " with --page-size %" PRId64
                " gives %" PRId64 " pages (need 1 .. %d)\n", o.capacity, page_size, pages, INT32_MAX);
        return 2;
    }
    o.kind = cfg.kind;
    bool tree_kind = !strcmp(cfg.kind, "radix") || !strcmp(cfg.kind, "trie");
    bool hash_kind = !strncmp(cfg.kind, "hash", 4);
    o.policy = tree_kind ? (cfg.policy ? cfg.policy : "lru") : NULL;
    o.hash_fn = hash_kind ? (cfg.hash_fn ? cfg.hash_fn : "xxh3") : NULL;

    char err[512] = "";
    model_config model;
    sim_profile gpu;
    if (model_name || gpu_name) {
        if (model_config_load(model_name, &model, err, sizeof err) != RKV_OK) {
            fprintf(stderr, "radixkv cache-sim: --model: %s\n", err);
            return 2;
        }
        if (sim_profile_parse(gpu_name, &gpu, err, sizeof err) != RKV_OK) {
            fprintf(stderr, "radixkv cache-sim: --gpu: %s\n", err);
            return 2;
        }
        o.model = &model;
        o.gpu = &gpu;
    }
    tier_opts_finish(&topt, (int32_t)page_size);
    if (o.model) topt.cfg.modelled_page_bytes = (double)model_config_kv_bytes_per_token(&model, 2) * (double)page_size;
    if (topt.on) o.tier = &topt;
    page_pool pool;
    if (page_pool_init(&pool, (int32_t)pages, (int32_t)page_size) != RKV_OK) {
        fprintf(stderr, "radixkv cache-sim: cannot allocate %" PRId64 " pages\n", pages);
        return 1;
    }
    cache *c = NULL;
    rkv_status st = cache_create(&cfg, &pool, &c, err, sizeof err);
    if (st != RKV_OK) {
        fprintf(stderr, "radixkv cache-sim: %s\n", err[0] ? err : rkv_status_str(st));
        page_pool_destroy(&pool);
        return 2;
    }
    if (topt.on) {
        /* No K/V bytes here: the tier keeps keys and tokens, the time model the bytes. */
        cache *w = NULL;
        if ((st = cache_tier_wrap(c, &topt.cfg, NULL, &w, err, sizeof err)) != RKV_OK) {
            fprintf(stderr, "radixkv cache-sim: %s\n", err);
            cache_destroy(c);
            page_pool_destroy(&pool);
            return st == RKV_EIO || st == RKV_ENOMEM ? 1 : 2;
        }
        c = w;
    }
    cache_pins pins;
    cache_pins_init(&pins);
    if (pin_path) {
        pin_file_stats ps;
        if ((st = pin_file_apply(c, NULL, pin_path, 0, &pins, &ps, err, sizeof err)) != RKV_OK) {
            fprintf(stderr, "radixkv cache-sim: --pin %s\n", err);
            cache_pins_release(c, &pins);
            cache_pins_free(&pins);
            cache_destroy(c);
            page_pool_destroy(&pool);
            return st == RKV_EIO || st == RKV_ENOMEM ? 1 : 2;
        }
        if (ps.cut_tokens)
            fprintf(stderr, "radixkv cache-sim: --pin %s: %" PRId64 " tokens of partial last pages"
                    " not pinned (prefixes are cut to whole pages of %" PRId64 ")\n", pin_path,
                    ps.cut_tokens, page_size);
    }
    trace_reader *tr = NULL;
    if ((st = trace_open(trace, NULL, &tr, err, sizeof err)) != RKV_OK) {
        fprintf(stderr, "radixkv cache-sim: %s\n", err);
        cache_pins_release(c, &pins);
        cache_pins_free(&pins);
        cache_destroy(c);
        page_pool_destroy(&pool);
        return 1;
    }
    FILE *out = stdout;
    if (out_path && !(out = fopen(out_path, "w"))) {
        fprintf(stderr, "radixkv cache-sim: --out %s: %s\n", out_path, strerror(errno));
        trace_close(tr);
        cache_pins_release(c, &pins);
        cache_pins_free(&pins);
        cache_destroy(c);
        page_pool_destroy(&pool);
        return 1;
    }
    /* Big output buffer: one line per request adds up on long traces. */
    static char obuf[1 << 16];
    setvbuf(out, obuf, _IOFBF, sizeof obuf);
    cache_sim_summary sum;
    st = cache_sim_run(c, &o, tr, out, &sum, err, sizeof err);
    int rc = 0;
    if (st == RKV_OK) {
        cache_sim_print_summary(out, &o, c, &sum);
        fputc('\n', out);
    } else {
        fprintf(stderr, "radixkv cache-sim: %s\n", err[0] ? err : rkv_status_str(st));
        rc = 1;
    }
    if (fflush(out) != 0 || (out != stdout && fclose(out) != 0)) {
        fprintf(stderr, "radixkv cache-sim: writing the output failed: %s\n", strerror(errno));
        rc = 1;
    }
    trace_close(tr);
    if (pin_path && cache_pins_check(c, &pins, err, sizeof err) != RKV_OK) {
        fprintf(stderr, "radixkv cache-sim: %s\n", err);
        rc = 1;
    }
    cache_pins_release(c, &pins);
    cache_pins_free(&pins);
    cache_destroy(c);
    page_pool_destroy(&pool);
    return rc;
}

/* ------------------------------------------------------------- the table */

typedef struct command {
    const char *name;
    const char *summary;
    int (*main)(int argc, char **argv);
} command;

static const command commands[] = {
    {"cache-sim", "replay a request trace through one cache kind, no model", cmd_cache_sim},
    {"run", "serve a trace through the engine (cpu or sim backend) and report", cmd_run},
    {"gen", "write a synthetic trace (hit-rate sweep, multi-turn, few-shot, ...)", cmd_gen},
    {"list", "cache kinds, eviction policies, hash functions, backends, schedulers", cmd_list},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: radixkv COMMAND [options]   (radixkv COMMAND --help for its options)\n\n"
               "commands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-12s %s\n", commands[i].name, commands[i].summary);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("radixkv %s\n", RKV_VERSION);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].main(argc - 1, argv + 1);
    fprintf(stderr, "radixkv: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
