/* tier_opts.c - see tier_opts.h. */
#include "tier_opts.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

void tier_opts_init(tier_opts *o)
{
    memset(o, 0, sizeof *o);
    tier_config_default(&o->cfg);
}

static bool parse_i64(const char *v, int64_t lo, int64_t *out)
{
    char *end;
    errno = 0;
    long long x = v ? strtoll(v, &end, 10) : 0;
    if (!v || errno || end == v || *end || x < lo) return false;
    *out = x;
    return true;
}

/* How a value is read; each kind has one message for a bad value. */
typedef enum tval {
    TV_TOKENS0,   /* tokens in [0, 2^40] (int64_t) */
    TV_TOKENS1,   /* tokens in [1, 2^40] (int64_t) */
    TV_COUNT,     /* an integer >= 0 (int64_t) */
    TV_MS,        /* milliseconds in [1, 600000] -> seconds (double) */
    TV_GBPS,      /* GB/s in [1e-6, 1e6] -> bytes/s (double) */
    TV_US,        /* microseconds in (0, 1e7] -> seconds (double) */
    TV_PATH,      /* any string (const char *) */
    TV_URL,       /* redis://HOST:PORT[/DB] (const char *) */
    TV_NS,        /* 1 to TIER_REMOTE_NS_MAX characters without ':' or spaces (const char *) */
    TV_TTL,       /* seconds in [0, TIER_REMOTE_TTL_MAX], 0: none (int64_t) */
    TV_SET_BY_WT, /* write-back | write-through -> bool, true for write-through */
    TV_SET_BY_WB, /* write-through | write-back -> bool, true for write-back */
} tval;

/* The options, in help order: name, value kind, where it goes, whether it
 * turns the tier on, and the help line (help_arg after the name). */
typedef struct tier_opt {
    const char *name, *arg;
    tval kind;
    size_t off;       /* offset of the destination in tier_opts */
    bool turns_on;
    const char *help;
} tier_opt;

#define OFF(f) offsetof(tier_opts, f)
static const tier_opt tier_table[TIER_OPTS_CLI] = {
    {"--tier-host", "TOKENS", TV_TOKENS0, OFF(host_tokens), true,
     "host-memory spill tier: evicted pages kept there, loaded back on a hit"},
    {"--tier-disk", "TOKENS", TV_TOKENS0, OFF(disk_tokens), true, "disk tier below it (0: none)"},
    {"--tier-dir", "DIR", TV_PATH, OFF(cfg.disk_dir), false,
     "the disk tier's file there, unlinked while open"},
    {"--tier-policy", "P", TV_SET_BY_WT, OFF(cfg.write_through), false,
     "write-back (default: spill on evict) | write-through (copy on insert)"},
    {"--host-bw", "GBPS", TV_GBPS, OFF(cfg.host_bw), false,
     "host <-> GPU bandwidth of the time model, GB/s (default 50)"},
    {"--disk-bw", "GBPS", TV_GBPS, OFF(cfg.disk_bw), false,
     "disk <-> host bandwidth of the time model, GB/s (default 3)"},
    {"--tier-fail-disk-after", "N", TV_COUNT, OFF(cfg.fail_disk_writes_after), false,
     "fault injection: the disk is full after N page writes"},
    {"--tier-remote", "URL", TV_URL, OFF(cfg.remote.url), true,
     "shared remote tier below host and disk on a Redis server"},
    {"--tier-remote-tokens", "T", TV_TOKENS1, OFF(remote_tokens), false,
     "this engine's share of it (default 65536 pages)"},
    {"--tier-remote-policy", "P", TV_SET_BY_WB, OFF(cfg.remote.write_back), false,
     "write-through (default: store on insert, shared at once) | write-back"},
    {"--tier-remote-timeout", "MS", TV_MS, OFF(cfg.remote.timeout_s), false,
     "connect and reply timeout, ms (default 1000)"},
    {"--tier-remote-ns", "NAME", TV_NS, OFF(cfg.remote.ns), false,
     "key namespace: engines share pages only within one (default: default)"},
    {"--tier-remote-ttl", "S", TV_TTL, OFF(cfg.remote.ttl_s), false,
     "expiry of stored pages on the server, seconds (default 86400; 0: none)"},
    {"--remote-bw", "GBPS", TV_GBPS, OFF(cfg.remote.bw), false,
     "remote bandwidth of the time model, GB/s (default 12.5)"},
    {"--remote-latency", "US", TV_US, OFF(cfg.remote.latency_s), false,
     "remote round trip of the time model, microseconds (default 50)"},
};
#undef OFF

static bool parse_double(const char *v, double *out)
{
    char *end;
    double g = v ? strtod(v, &end) : 0;
    if (!v || end == v || *end || !isfinite(g)) return false;
    *out = g;
    return true;
}

/* One value into o per its row; a message in bad when it is refused. */
static void tier_opt_set(tier_opts *o, const tier_opt *t, const char *v, char *bad, size_t badlen)
{
    void *dst = (char *)o + t->off;
    const char *name = t->name, *vs = v ? v : "";
    int64_t x;
    double g;
    switch (t->kind) {
    case TV_TOKENS0:
    case TV_TOKENS1: {
        int64_t lo = t->kind == TV_TOKENS1;
        if (!parse_i64(v, lo, &x) || x > ((int64_t)1 << 40))
            snprintf(bad, badlen, "%s: expected tokens in [%d, 2^40], got '%s'", name, (int)lo, vs);
        else *(int64_t *)dst = x;
        break;
    }
    case TV_COUNT:
        if (!parse_i64(v, 0, &x)) snprintf(bad, badlen, "%s: expected an integer >= 0, got '%s'", name, vs);
        else *(int64_t *)dst = x;
        break;
    case TV_MS:
        if (!parse_i64(v, 1, &x) || x > 600000)
            snprintf(bad, badlen, "%s: expected milliseconds in [1, 600000], got '%s'", name, vs);
        else *(double *)dst = (double)x / 1e3;
        break;
    case TV_GBPS:
        /* Bounded like the handoff's link (kv_link.h), so that a tier's load
         * time stays finite (GB/s 4.9e-324 made it inf). */
        if (!parse_double(v, &g) || !(g >= 1e-6 && g <= 1e6))
            snprintf(bad, badlen, "%s: expected GB/s in [1e-06, 1e+06], got '%s'", name, vs);
        else *(double *)dst = g * 1e9;
        break;
    case TV_US:
        if (!parse_double(v, &g) || g <= 0 || g > 1e7)
            snprintf(bad, badlen, "%s: expected microseconds in (0, 1e7], got '%s'", name, vs);
        else *(double *)dst = g * 1e-6;
        break;
    case TV_PATH: *(const char **)dst = v; break;
    case TV_URL: {
        char host[256], why[128];
        int port, db;
        if (tier_remote_parse_url(v, host, sizeof host, &port, &db, why, sizeof why))
            snprintf(bad, badlen, "%s: '%s': %s", name, vs, why);
        *(const char **)dst = v;
        break;
    }
    case TV_NS:
        if (!v || !*v || strlen(v) > TIER_REMOTE_NS_MAX || strpbrk(v, ": \t"))
            snprintf(bad, badlen, "%s: expected 1 to %d characters without ':' or spaces, got '%s'", name,
                     TIER_REMOTE_NS_MAX, vs);
        else *(const char **)dst = v;
        break;
    case TV_TTL:
        if (!parse_i64(v, 0, &x) || x > TIER_REMOTE_TTL_MAX)
            snprintf(bad, badlen, "%s: expected seconds in [0, %d] (0: no expiry), got '%s'", name,
                     TIER_REMOTE_TTL_MAX, vs);
        else *(int64_t *)dst = x;
        break;
    case TV_SET_BY_WT:
    case TV_SET_BY_WB: {
        /* Listed default first: the other choice sets the flag. */
        const char *yes = t->kind == TV_SET_BY_WT ? "write-through" : "write-back";
        const char *no = t->kind == TV_SET_BY_WT ? "write-back" : "write-through";
        if (v && !strcmp(v, yes)) *(bool *)dst = true;
        else if (v && !strcmp(v, no)) *(bool *)dst = false;
        else snprintf(bad, badlen, "%s: unknown value '%s' (one of: %s %s)", name, vs, no, yes);
        break;
    }
    }
    if (t->turns_on) o->on = true;
}

int tier_opts_parse(tier_opts *o, const char *name, const char *v, char *bad, size_t badlen)
{
    bad[0] = 0;
    for (int i = 0; i < TIER_OPTS_CLI; i++)
        if (!strcmp(name, tier_table[i].name)) {
            tier_opt_set(o, &tier_table[i], v, bad, badlen);
            return 1;
        }
    return 0;
}

static int parse_cli(void *ctx, const char *name, const char *v, char *err, size_t errlen)
{
    tier_opts_parse(ctx, name, v, err, errlen);
    return err[0] != '\0';
}

void tier_opts_cli(tier_opts *o, cli_opt *opts, int *n)
{
    for (int i = 0; i < TIER_OPTS_CLI; i++)
        opts[(*n)++] = (cli_opt)CLI_CUSTOM_OPT(tier_table[i].name, parse_cli, o);
}

void tier_opts_finish(tier_opts *o, int32_t P)
{
    o->cfg.host_pages = (o->host_tokens + P - 1) / P;
    o->cfg.disk_pages = (o->disk_tokens + P - 1) / P;
    if (o->remote_tokens > 0) o->cfg.remote.pages = (o->remote_tokens + P - 1) / P;
}

void tier_opts_set_model(tier_opts *o, const char *identity)
{
    o->cfg.remote.model_id = XXH3_64bits(identity, strlen(identity));
}

void tier_opts_usage(FILE *f, int w)
{
    for (int i = 0; i < TIER_OPTS_CLI; i++) {
        char left[64];
        snprintf(left, sizeof left, "%s %s", tier_table[i].name, tier_table[i].arg);
        fprintf(f, "  %-*s %s\n", w, left, tier_table[i].help);
    }
}

void tier_print_json(FILE *f, const tier_opts *o, const tier_stats *s,
                     const tier_remote_stats *remote, int64_t prompt_tokens, int64_t matched_tokens)
{
    if (!s) return;
    double pt = prompt_tokens > 0 ? (double)prompt_tokens : 1;
    const tier_remote_stats *rs = o->cfg.remote.url ? remote : NULL;
    int64_t tier_hits = (int64_t)(s->host_hit_tokens + s->disk_hit_tokens + (rs ? rs->hit_tokens : 0));
    /* run counts tier hits at every match (a preempted request's re-match, lpm's
     * look-ahead) but cached tokens at first admission: keep the split >= 0. */
    if (tier_hits > matched_tokens) tier_hits = matched_tokens;
    fprintf(f, ",\"tier_policy\":\"%s\",\"tier_host_pages\":%" PRId64 ",\"tier_disk_pages\":%" PRId64
            ",\"gpu_hit_tokens\":%" PRId64 ",\"host_hit_tokens\":%" PRIu64 ",\"disk_hit_tokens\":%" PRIu64
            ",\"gpu_hit_rate\":%.6f,\"host_hit_rate\":%.6f,\"disk_hit_rate\":%.6f"
            ",\"tier_spilled_pages\":%" PRIu64 ",\"tier_demoted_pages\":%" PRIu64
            ",\"tier_dropped_pages\":%" PRIu64 ",\"tier_spill_failures\":%" PRIu64
            ",\"tier_bytes_loaded\":%.0f,\"tier_bytes_spilled\":%.0f"
            ",\"tier_load_seconds\":%.6f,\"tier_spill_seconds\":%.6f",
            o->cfg.write_through ? "write-through" : "write-back", o->cfg.host_pages, o->cfg.disk_pages,
            matched_tokens - tier_hits, s->host_hit_tokens, s->disk_hit_tokens,
            (double)(matched_tokens - tier_hits) / pt, (double)s->host_hit_tokens / pt,
            (double)s->disk_hit_tokens / pt, s->spilled_pages, s->demoted_pages, s->dropped_pages,
            s->spill_failures, s->bytes_from_host, s->bytes_to_host + s->bytes_to_disk,
            s->load_seconds, s->spill_seconds);
    if (!rs) return;
    /* The same cut for the remote share: its hits at a re-match are counted
     * again, so the remote hit tokens can exceed the matched tokens (a rate
     * above 1 was seen); report the part that is within them. */
    uint64_t local = s->host_hit_tokens + s->disk_hit_tokens;
    uint64_t room = (uint64_t)tier_hits > local ? (uint64_t)tier_hits - local : 0;
    uint64_t remote_hits = rs->hit_tokens < room ? rs->hit_tokens : room;
    fprintf(f, ",\"remote_policy\":\"%s\",\"remote_hit_tokens\":%" PRIu64 ",\"remote_hit_rate\":%.6f"
            ",\"remote_lookups\":%" PRIu64 ",\"remote_misses\":%" PRIu64 ",\"remote_corrupt_values\":%" PRIu64
            ",\"remote_stored_pages\":%" PRIu64 ",\"remote_refused_pages\":%" PRIu64
            ",\"remote_skipped_pages\":%" PRIu64
            ",\"remote_deleted_pages\":%" PRIu64 ",\"remote_dropped_pages\":%" PRIu64
            ",\"remote_failed_lookups\":%" PRIu64 ",\"remote_reconnects\":%" PRIu64
            ",\"remote_bytes_loaded\":%.0f,\"remote_bytes_stored\":%.0f"
            ",\"remote_load_seconds\":%.6f,\"remote_store_seconds\":%.6f",
            o->cfg.remote.write_back ? "write-back" : "write-through", remote_hits,
            (double)remote_hits / pt, rs->lookups, rs->misses, rs->corrupt_values, rs->stored_pages,
            rs->refused_pages, rs->skipped_pages, rs->deleted_pages, rs->dropped_pages, rs->failed_lookups, rs->reconnects,
            rs->bytes_loaded, rs->bytes_stored, rs->load_seconds, rs->store_seconds);
}
