/* tier_opts.c - see tier_opts.h. */
#include "tier_opts.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
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

int tier_opts_parse(tier_opts *o, const char *name, const char *v, char *bad, size_t badlen)
{
    bad[0] = 0;
    int64_t x;
    if (!strcmp(name, "--tier-host") || !strcmp(name, "--tier-disk")) {
        if (!parse_i64(v, 0, &x) || x > ((int64_t)1 << 40))
            snprintf(bad, badlen, "%s: expected tokens in [0, 2^40], got '%s'", name, v ? v : "");
        else if (name[7] == 'h') o->host_tokens = x;
        else o->disk_tokens = x;
        o->on = true;
    } else if (!strcmp(name, "--tier-dir")) {
        o->cfg.disk_dir = v;
    } else if (!strcmp(name, "--tier-policy")) {
        if (v && !strcmp(v, "write-back")) o->cfg.write_through = false;
        else if (v && !strcmp(v, "write-through")) o->cfg.write_through = true;
        else snprintf(bad, badlen, "%s: unknown value '%s' (one of: write-back write-through)", name, v ? v : "");
    } else if (!strcmp(name, "--host-bw") || !strcmp(name, "--disk-bw")) {
        char *end;
        double g = v ? strtod(v, &end) : 0;
        if (!v || end == v || *end || !isfinite(g) || g <= 0)
            snprintf(bad, badlen, "%s: expected GB/s > 0, got '%s'", name, v ? v : "");
        else if (name[2] == 'h') o->cfg.host_bw = g * 1e9;
        else o->cfg.disk_bw = g * 1e9;
    } else if (!strcmp(name, "--tier-remote")) {
        char host[256], why[128];
        int port, db;
        if (tier_remote_parse_url(v, host, sizeof host, &port, &db, why, sizeof why))
            snprintf(bad, badlen, "%s: '%s': %s", name, v ? v : "", why);
        o->cfg.remote.url = v;
        o->on = true;
    } else if (!strcmp(name, "--tier-remote-tokens")) {
        if (!parse_i64(v, 1, &x) || x > ((int64_t)1 << 40))
            snprintf(bad, badlen, "%s: expected tokens in [1, 2^40], got '%s'", name, v ? v : "");
        else o->remote_tokens = x;
    } else if (!strcmp(name, "--tier-remote-policy")) {
        if (v && !strcmp(v, "write-back")) o->cfg.remote.write_back = true;
        else if (v && !strcmp(v, "write-through")) o->cfg.remote.write_back = false;
        else snprintf(bad, badlen, "%s: unknown value '%s' (one of: write-through write-back)", name, v ? v : "");
    } else if (!strcmp(name, "--tier-remote-timeout")) {
        if (!parse_i64(v, 1, &x) || x > 600000)
            snprintf(bad, badlen, "%s: expected milliseconds in [1, 600000], got '%s'", name, v ? v : "");
        else o->cfg.remote.timeout_s = (double)x / 1e3;
    } else if (!strcmp(name, "--tier-remote-ns")) {
        if (!v || !*v || strlen(v) > TIER_REMOTE_NS_MAX || strpbrk(v, ": \t"))
            snprintf(bad, badlen, "%s: expected 1 to %d characters without ':' or spaces, got '%s'", name,
                     TIER_REMOTE_NS_MAX, v ? v : "");
        else o->cfg.remote.ns = v;
    } else if (!strcmp(name, "--tier-remote-ttl")) {
        if (!parse_i64(v, 0, &x) || x > TIER_REMOTE_TTL_MAX)
            snprintf(bad, badlen, "%s: expected seconds in [0, %d] (0: no expiry), got '%s'", name,
                     TIER_REMOTE_TTL_MAX, v ? v : "");
        else o->cfg.remote.ttl_s = x;
    } else if (!strcmp(name, "--remote-bw")) {
        char *end;
        double g = v ? strtod(v, &end) : 0;
        if (!v || end == v || *end || !isfinite(g) || g <= 0)
            snprintf(bad, badlen, "%s: expected GB/s > 0, got '%s'", name, v ? v : "");
        else o->cfg.remote.bw = g * 1e9;
    } else if (!strcmp(name, "--remote-latency")) {
        char *end;
        double us = v ? strtod(v, &end) : 0;
        if (!v || end == v || *end || !isfinite(us) || us <= 0 || us > 1e7)
            snprintf(bad, badlen, "%s: expected microseconds in (0, 1e7], got '%s'", name, v ? v : "");
        else o->cfg.remote.latency_s = us * 1e-6;
    } else if (!strcmp(name, "--tier-fail-disk-after")) {
        if (!parse_i64(v, 0, &x)) snprintf(bad, badlen, "%s: expected an integer >= 0, got '%s'", name, v ? v : "");
        else o->cfg.fail_disk_writes_after = x;
    } else {
        return 0;
    }
    return 1;
}

static int parse_cli(void *ctx, const char *name, const char *v, char *err, size_t errlen)
{
    tier_opts_parse(ctx, name, v, err, errlen);
    return err[0] != '\0';
}

void tier_opts_cli(tier_opts *o, cli_opt *opts, int *n)
{
    static const char *const names[TIER_OPTS_CLI] = {
        "--tier-host", "--tier-disk", "--tier-dir", "--tier-policy",
        "--host-bw", "--disk-bw", "--tier-fail-disk-after",
        "--tier-remote", "--tier-remote-tokens", "--tier-remote-policy", "--tier-remote-timeout",
        "--tier-remote-ns", "--tier-remote-ttl", "--remote-bw", "--remote-latency",
    };
    for (int i = 0; i < TIER_OPTS_CLI; i++)
        opts[(*n)++] = (cli_opt)CLI_CUSTOM_OPT(names[i], parse_cli, o);
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
    fprintf(f,
        "  %-*s host-memory spill tier: evicted pages kept there, loaded back on a hit\n"
        "  %-*s disk tier below it (0: none)\n"
        "  %-*s one file per page under DIR (needed when K/V bytes move)\n"
        "  %-*s write-back (default: spill on evict) | write-through (copy on insert)\n"
        "  %-*s host <-> GPU bandwidth of the time model, GB/s (default 50)\n"
        "  %-*s disk <-> host bandwidth of the time model, GB/s (default 3)\n"
        "  %-*s fault injection: the disk is full after N page writes\n"
        "  %-*s shared remote tier below host and disk on a Redis server\n"
        "  %-*s this engine's share of it (default 65536 pages)\n"
        "  %-*s write-through (default: store on insert, shared at once) | write-back\n"
        "  %-*s connect and reply timeout, ms (default 1000)\n"
        "  %-*s key namespace: engines share pages only within one (default: default)\n"
        "  %-*s expiry of stored pages on the server, seconds (default 86400; 0: none)\n"
        "  %-*s remote bandwidth of the time model, GB/s (default 12.5)\n"
        "  %-*s remote round trip of the time model, microseconds (default 50)\n",
        w, "--tier-host TOKENS", w, "--tier-disk TOKENS", w, "--tier-dir DIR", w, "--tier-policy P",
        w, "--host-bw GBPS", w, "--disk-bw GBPS", w, "--tier-fail-disk-after N",
        w, "--tier-remote URL", w, "--tier-remote-tokens T", w, "--tier-remote-policy P",
        w, "--tier-remote-timeout MS", w, "--tier-remote-ns NAME", w, "--tier-remote-ttl S", w, "--remote-bw GBPS",
        w, "--remote-latency US");
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
