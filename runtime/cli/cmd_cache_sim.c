/* cmd_cache_sim.c - `radixkv cache-sim`: replay a trace through one cache
 * kind without a model (cache_sim.h does the replay; this file is its command
 * line: options, the pool and cache, pins, a spill tier, the output). */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_sim.h"
#include "billing.h"
#include "block_hash.h"
#include "cache.h"
#include "cache_kinds.h"
#include "cache_sim.h"
#include "page_pool.h"
#include "cache_tier.h"
#include "cli.h"
#include "commands.h"
#include "host_mem.h"
#include "out_file.h"
#include "interrupt.h"
#include "evict_policy.h"
#include "model_config.h"
#include "pin_file.h"
#include "tier_opts.h"
#include "trace.h"

static void usage_cache_sim(FILE *f)
{
    fprintf(f,
        "usage: radixkv cache-sim --cache KIND --capacity TOKENS --page-size P [options] TRACE\n"
        "\n"
        "Replays a request trace through one prefix-cache kind, without a model.\n"
        "TRACE is JSON Lines ({\"id\", \"tokens\", \"step\"?, \"namespace\"?, ...} per line) or a\n"
        "Mooncake trace ({\"timestamp\", \"input_length\", \"output_length\", \"hash_ids\",\n"
        "\"namespace\"?}); '-' reads stdin. A field not listed in trace.h is an error.\n"
        "\n"
        "");
    cli_usage_choices(f, 19, "--cache KIND", NULL, cache_kind_names);
    fprintf(f,
        "  --capacity TOKENS   cache size in tokens (floor(TOKENS / P) pages)\n"
        "  --page-size P       tokens per page\n");
    cli_usage_choices(f, 19, "--evict-policy NAME", "", evict_policy_name_list);
    cli_usage_choices(f, 19, "--hash NAME", "block hash for hash kinds: ", block_hash_fn_names);
    fprintf(f,
        "  --hash-duplicates keep|dedup  hash: a full block computed twice is kept twice\n"
        "                      (keep, vLLM; the default under lru) or freed (dedup)\n"
        "  --step-semantics sglang|vllm  the requests of one step: all matched, then all\n"
        "                      inserted (sglang, the default: SGLang inserts when a request\n"
        "                      ends), or one after another, each inserted before the next\n"
        "                      is matched (vllm: vLLM caches full blocks at allocation)\n"
        "  --dump-dir DIR      the tree after every step as JSON and DOT (SVG with graphviz)\n"
        "  --out FILE          write the JSON Lines there instead of stdout\n"
        "  --check             full consistency check of the cache after every step\n"
        "  --no-progress       never draw the progress bar\n"
        "  --summary-only      print only the summary line (sweeps over long traces)\n"
        "  --pin FILE          pin static prefixes for the whole replay: JSON Lines of\n"
        "                      {\"tokens\": [...]} or [...]; each cut down to whole pages\n"
        "  --namespace NAME    cache namespace of trace lines without \"namespace\"\n"
        "                      (tenants never share cached pages; default: none)\n"
        "  --price-cached X    price per million cached input tokens (default 0.1)\n"
        "  --price-uncached X  price per million uncached input tokens (default 1)\n"
        "  --model PRESET      time model: price each request's prefill (and, with a tier,\n"
        "                      recomputing its tier hits) by the sim backend's roofline;\n"
        "                      a tier page then costs the model's K/V bytes to move\n"
        "  --gpu PROFILE       sim profile of the time model: h100 (default), h100@peer,\n"
        "                      h200, a100, a10g (radixkv list) [,key=X ...]\n"
        "  --sim-profile FILE  a sim profile JSON file instead\n");
    tier_opts_usage(f, 19);
    fprintf(f,
        "\n"
        "Output: {\"type\":\"request\",\"id\",\"step\",\"matched\",\"new\"} per request (or\n"
        "\"error\" for a request that can never fit), {\"type\":\"step\",\"step\",\"evicted\"} per\n"
        "step that evicted (each evicted node's own edge tokens, in eviction order), and\n"
        "one {\"type\":\"summary\",...} line, which also bills the prompt tokens: matched\n"
        "ones at the cached price, the rest at the uncached one (\"cost\", \"cost_no_cache\").\n");
}

/* The command's state: what the options say, then what they built. */
typedef struct sim_cmd {
    cache_config cfg;
    cache_sim_options o;
    billing_prices prices;
    int64_t page_size, pages;
    const char *trace, *out_path, *pin_path, *model_name, *gpu_name, *profile_file;
    const char *namespace_name, *step_name;
    tier_opts topt;
    model_config model;
    sim_profile gpu;
    page_pool pool;
    cache *c;
    cache_pins pins;
} sim_cmd;

static int check_cache_sim(sim_cmd *m);

/* Options into m; -1 to go on, else the exit status. */
static int parse_cache_sim(int argc, char **argv, sim_cmd *m)
{
    cache_sim_options *o = &m->o;
    billing_prices_default(&m->prices);
    o->prices = &m->prices;
    m->page_size = -1;
    o->capacity = -1;
    bool no_progress = false;
    tier_opts_init(&m->topt);
    cli_opt opts[32 + TIER_OPTS_CLI] = {
        CLI_CHOICE_OPT("--cache", &m->cfg.kind, cache_kind_names),
        CLI_INT_OPT("--capacity", &o->capacity, 1, INT64_MAX / 2),
        CLI_INT_OPT("--page-size", &m->page_size, 1, 1 << 20),
        CLI_CHOICE_OPT("--evict-policy", &m->cfg.policy, evict_policy_name_list),
        CLI_CHOICE_OPT("--hash", &m->cfg.hash_fn, block_hash_fn_names),
        CLI_CHOICE_OPT("--hash-duplicates", &m->cfg.hash_duplicates, cache_hash_duplicates_names),
        CLI_STR_OPT("--dump-dir", &o->dump_dir),
        CLI_STR_OPT("--out", &m->out_path),
        CLI_FLAG_OPT("--check", &o->check),
        CLI_FLAG_OPT("--no-progress", &no_progress),
        CLI_FLAG_OPT("--summary-only", &o->summary_only),
        CLI_STR_OPT("--pin", &m->pin_path),
        CLI_STR_OPT("--namespace", &m->namespace_name),
        CLI_CHOICE_OPT("--step-semantics", &m->step_name, cache_sim_step_names),
        CLI_STR_OPT("--model", &m->model_name),
        CLI_STR_OPT("--gpu", &m->gpu_name),
        CLI_STR_OPT("--sim-profile", &m->profile_file),
        CLI_CUSTOM_OPT("--price-cached", billing_parse_price_opt, &m->prices.cached),
        CLI_CUSTOM_OPT("--price-uncached", billing_parse_price_opt, &m->prices.uncached),
        CLI_RENAMED("--policy", "--evict-policy"),
    };
    int nopts = 0;
    while (opts[nopts].name) nopts++;
    tier_opts_cli(&m->topt, opts, &nopts);
    cli_args a;
    int rc = cli_command("cache-sim", opts, argc, argv, &a, usage_cache_sim);
    if (rc >= 0) return rc;
    if (a.npos > 1) {
        fprintf(stderr, "radixkv cache-sim: more than one TRACE ('%s', '%s')\n", a.pos[0], a.pos[1]);
        return 2;
    }
    m->trace = a.npos ? a.pos[0] : NULL;
    o->progress = !no_progress;
    return check_cache_sim(m);
}

/* What the options mean together; the time model. -1 to go on, else the
 * exit status. */
static int check_cache_sim(sim_cmd *m)
{
    cache_sim_options *o = &m->o;
    char err[512] = "";
    const char *missing = !m->cfg.kind ? "--cache" : o->capacity < 0 ? "--capacity"
                        : m->page_size < 0 ? "--page-size" : !m->trace ? "TRACE" : NULL;
    if (missing) {
        fprintf(stderr, "radixkv cache-sim: %s is required (see radixkv cache-sim --help)\n", missing);
        return 2;
    }
    m->pages = o->capacity / m->page_size;
    if (m->pages < 1 || m->pages > INT32_MAX) {
        fprintf(stderr, "radixkv cache-sim: --capacity %" PRId64 " with --page-size %" PRId64
                " gives %" PRId64 " pages (need 1 .. %d)\n", o->capacity, m->page_size, m->pages,
                INT32_MAX);
        return 2;
    }
    o->kind = m->cfg.kind;
    /* The kind's capabilities decide (cache_kinds.h), never its name. */
    const cache_kind *kd = cache_kind_find(m->cfg.kind);
    unsigned caps = kd ? kd->caps : 0;
    bool evicts = caps & CACHE_CAP_EVICTS;
    bool hash_kind = caps & CACHE_CAP_HASHES;
    if (m->cfg.hash_fn && !hash_kind) {
        fprintf(stderr, "radixkv cache-sim: --hash applies to the hash kinds, not --cache %s\n",
                m->cfg.kind);
        return 2;
    }
    if (m->cfg.hash_duplicates && strcmp(m->cfg.kind, "hash")) {
        fprintf(stderr, "radixkv cache-sim: --hash-duplicates applies to --cache hash, not --cache %s\n",
                m->cfg.kind);
        return 2;
    }
    o->hash_duplicates = m->cfg.hash_duplicates;
    o->step_semantics_given = m->step_name != NULL;
    o->step_semantics = m->step_name && !strcmp(m->step_name, "vllm") ? CACHE_SIM_STEP_VLLM
                                                                      : CACHE_SIM_STEP_SGLANG;
    o->policy = evicts ? (m->cfg.policy ? m->cfg.policy : evict_policies[0]->name) : NULL;
    o->hash_fn = hash_kind ? (m->cfg.hash_fn ? m->cfg.hash_fn : "xxh3") : NULL;
    if (m->gpu_name && m->profile_file) {
        fprintf(stderr, "radixkv cache-sim: --gpu and --sim-profile both given; pick one\n");
        return 2;
    }
    if (m->model_name || m->gpu_name || m->profile_file) {
        if (model_config_load(m->model_name, &m->model, err, sizeof err) != RKV_OK) {
            fprintf(stderr, "radixkv cache-sim: --model: %s\n", err);
            return 2;
        }
        if (m->profile_file
                ? sim_profile_load_file(m->profile_file, &m->gpu, err, sizeof err) != RKV_OK
                : sim_profile_parse(m->gpu_name, &m->gpu, err, sizeof err) != RKV_OK) {
            fprintf(stderr, "radixkv cache-sim: %s: %s\n", m->profile_file ? "--sim-profile" : "--gpu",
                    err);
            return 2;
        }
        o->model = &m->model;
        o->gpu = &m->gpu;
    }
    tier_opts_finish(&m->topt, (int32_t)m->page_size);
    if (o->model)
        m->topt.cfg.modelled_page_bytes =
            (double)model_config_kv_bytes_per_token(&m->model, 2) * (double)m->page_size;
    if (m->topt.on) o->tier = &m->topt;
    return -1;
}

/* Unlock the pins, then destroy the cache and the pool (each if built). */
static void teardown(sim_cmd *m)
{
    if (m->c) {
        cache_pins_release(m->c, &m->pins);
        cache_pins_free(&m->pins);
        cache_destroy(m->c);
    }
    page_pool_destroy(&m->pool);
}

/* The pool, the cache (under a spill tier if asked) and the pins; -1 to go
 * on, else the exit status (what was built is torn down). */
static int build_cache(sim_cmd *m)
{
    char err[512] = "";
    cache_pins_init(&m->pins);
    /* What start-up fills for every page: the pool's own bookkeeping,
     * and, unless only a summary is asked for, the page-token table (counted
     * for every kind: an upper bound, whether or not the kind logs evictions
     * through its node hook). */
    uint64_t per_page = !m->o.summary_only ? 4 * (uint64_t)m->page_size : 0;
    char what[128];
    snprintf(what, sizeof what, "--capacity %" PRId64 " (%" PRId64 " pages of %" PRId64 ")",
             m->o.capacity, m->pages, (int64_t)m->page_size);
    if (host_mem_check(what, page_pool_init_bytes(m->pages) + per_page * (uint64_t)m->pages,
                       err, sizeof err) != RKV_OK) {
        fprintf(stderr, "radixkv cache-sim: %s\n", err);
        return 2;
    }
    if (page_pool_init(&m->pool, (int32_t)m->pages, (int32_t)m->page_size) != RKV_OK) {
        fprintf(stderr, "radixkv cache-sim: cannot allocate %" PRId64 " pages: out of host memory\n", m->pages);
        return 1;
    }
    rkv_status st = cache_create(&m->cfg, &m->pool, &m->c, err, sizeof err);
    if (st != RKV_OK) {
        fprintf(stderr, "radixkv cache-sim: %s\n", err[0] ? err : rkv_status_str(st));
        teardown(m);
        return 2;
    }
    if (m->cfg.policy && !cache_can(m->c, CACHE_CAP_REUSE)) {
        fprintf(stderr, "radixkv cache-sim: --evict-policy does not apply to --cache %s (it never "
                "reuses a page, so it never chooses one to evict)\n", m->cfg.kind);
        teardown(m);
        return 2;
    }
    if (m->topt.on) {
        /* No K/V bytes here: the tier keeps keys and tokens, the time model the bytes. */
        cache *w = NULL;
        if ((st = cache_tier_wrap(m->c, &m->topt.cfg, NULL, &w, err, sizeof err)) != RKV_OK) {
            fprintf(stderr, "radixkv cache-sim: %s\n", err);
            teardown(m);
            return st == RKV_EIO || st == RKV_ENOMEM ? 1 : 2;
        }
        m->c = w;
    }
    if (!m->pin_path) return -1;
    pin_file_stats ps;
    if ((st = pin_file_apply(m->c, NULL, m->pin_path, 0, &m->pins, &ps, err, sizeof err))
        != RKV_OK) {
        fprintf(stderr, "radixkv cache-sim: --pin %s\n", err);
        teardown(m);
        return st == RKV_EIO || st == RKV_ENOMEM ? 1 : 2;
    }
    if (ps.cut_tokens)
        fprintf(stderr, "radixkv cache-sim: --pin %s: %" PRId64 " tokens of partial last pages"
                " not pinned (prefixes are cut to whole pages of %" PRId64 ")\n", m->pin_path,
                ps.cut_tokens, m->page_size);
    return -1;
}

/* The replay and its output; the exit status. */
static int replay(sim_cmd *m)
{
    char err[512] = "";
    trace_reader *tr = NULL;
    trace_options topt = {.format = TRACE_FORMAT_AUTO, .tokens = TRACE_TOKENS_BLOCK,
                          .namespace_name = m->namespace_name};
    rkv_status st = trace_open(m->trace, &topt, &tr, err, sizeof err);
    if (st != RKV_OK) {
        fprintf(stderr, "radixkv cache-sim: %s\n", err);
        return 1;
    }
    /* A temporary name renamed on close (out_file.h): a refusal leaves no file. */
    out_file of;
    FILE *raw = out_file_open(&of, m->out_path, err, sizeof err), *out = raw ? interrupt_stream(raw) : NULL;
    if (!out) {
        fprintf(stderr, "radixkv cache-sim: --out: %s\n", raw ? "out of host memory for the output stream" : err);
        if (raw && raw != stdout) fclose(raw);
        out_file_finish(&of, true, err, sizeof err);
        trace_close(tr);
        return 1;
    }
    /* Big output buffer: one line per request adds up on long traces. */
    static char obuf[1 << 16];
    setvbuf(out, obuf, _IOFBF, sizeof obuf);
    cache_sim_summary sum;
    st = cache_sim_run(m->c, &m->o, tr, out, &sum, err, sizeof err);
    int rc = 0;
    if (st == RKV_OK) {
        cache_sim_print_summary(out, &m->o, m->c, &sum);
        fputc('\n', out);
        const tier_stats *ts = cache_tier_get_stats(m->c);
        if (ts && cache_tier_last_error(m->c))
            fprintf(stderr, "radixkv cache-sim: warning: %llu spills failed (plain evictions); first: %s\n",
                    (unsigned long long)ts->spill_failures, cache_tier_last_error(m->c));
    } else {
        fprintf(stderr, "radixkv cache-sim: %s\n", err[0] ? err : rkv_status_str(st));
        rc = 1;
        /* A failure leaves the cache consistent (the fault-injection loop checks it). */
        if (cache_check(m->c, err, sizeof err) != RKV_OK)
            fprintf(stderr, "radixkv cache-sim: after that error the cache fails its check: %s\n", err);
    }
    if (sum.interrupted) {
        fprintf(stderr, "radixkv cache-sim: interrupted after step %" PRId64 " (%" PRId64 " requests)\n",
                sum.steps, sum.requests);
        rc = interrupt_exit_status();
    }
    if (fclose(out) != 0) {
        fprintf(stderr, "radixkv cache-sim: writing the output failed: %s\n", strerror(errno));
        rc = 1;
    }
    /* A failed replay leaves no file; a finished or interrupted one (its
     * summary written) is put in place. */
    if (out_file_finish(&of, st != RKV_OK, err, sizeof err)) {
        fprintf(stderr, "radixkv cache-sim: --out: %s\n", err);
        rc = 1;
    }
    trace_close(tr);
    if (m->pin_path && cache_pins_check(m->c, &m->pins, err, sizeof err) != RKV_OK) {
        fprintf(stderr, "radixkv cache-sim: %s\n", err);
        rc = 1;
    }
    return rc;
}

int cmd_cache_sim(int argc, char **argv)
{
    sim_cmd m;
    memset(&m, 0, sizeof m);
    int rc = parse_cache_sim(argc, argv, &m);
    if (rc >= 0) return rc;
    interrupt_install();
    if ((rc = build_cache(&m)) >= 0) return rc;
    rc = replay(&m);
    teardown(&m);
    return rc;
}
