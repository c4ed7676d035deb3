/* kv_link.c - see kv_link.h. */
#include "kv_link.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const kv_link_names[] = {"rdma", "tcp", NULL};

/* The keys a spec may override and their bounds: bandwidth from a slow
 * modem's 1 kB/s to 1 PB/s, latency up to a minute, per_page up to a second. */
typedef struct link_key {
    const char *key;
    size_t off;
    double lo, hi;
    const char *unit;
} link_key;

static const link_key link_keys[] = {
    {"bandwidth", offsetof(kv_link, bandwidth), 1e3, 1e15, "B/s"},
    {"latency", offsetof(kv_link, latency), 0, 60, "s"},
    {"per_page", offsetof(kv_link, per_page), 0, 1, "s"},
};

static const kv_link presets[] = {
    {"rdma", 25e9, 5e-6, 1e-6},
    {"tcp", 3.125e9, 50e-6, 10e-6},
};

rkv_status kv_link_parse(const char *spec, kv_link *out, char *err, size_t errlen)
{
    char buf[256];
    if (!spec) spec = "rdma";
    if (strlen(spec) >= sizeof buf) {
        snprintf(err, errlen, "link spec '%.40s...' is too long", spec);
        return RKV_EINVAL;
    }
    strcpy(buf, spec);
    char *save = NULL;
    char *name = strtok_r(buf, ",", &save);
    size_t i = 0;
    for (; name && i < sizeof presets / sizeof presets[0]; i++)
        if (!strcmp(name, presets[i].name)) break;
    if (!name || i == sizeof presets / sizeof presets[0]) {
        snprintf(err, errlen, "unknown link '%s' (choose rdma or tcp, then ,key=value)",
                 name ? name : "");
        return RKV_EINVAL;
    }
    kv_link l = presets[i];
    for (char *kv = strtok_r(NULL, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(kv, '=');
        if (eq) *eq = 0;
        size_t k = 0;
        for (; k < sizeof link_keys / sizeof link_keys[0]; k++)
            if (!strcmp(kv, link_keys[k].key)) break;
        if (!eq || k == sizeof link_keys / sizeof link_keys[0]) {
            snprintf(err, errlen, "unknown link key '%s' (bandwidth in B/s, latency and per_page "
                     "in s, each as key=number)", kv);
            return RKV_EINVAL;
        }
        /* Bounded here, so that every time the handoff adds to the clock is
         * finite and the summary prints numbers (latency=1e308 once printed
         * "transfer_seconds":inf; bandwidth=1e-300 a TPOT of 1e304 ms). */
        const link_key *lk = &link_keys[k];
        char *end = NULL;
        double v = strtod(eq + 1, &end);
        if (end == eq + 1 || *end || !(v >= lk->lo && v <= lk->hi)) {
            snprintf(err, errlen, "%s=%s: want a number in [%g, %g] %s", kv, eq + 1, lk->lo, lk->hi,
                     lk->unit);
            return RKV_EINVAL;
        }
        *(double *)((char *)&l + lk->off) = v;
    }
    *out = l;
    return RKV_OK;
}

double kv_link_busy_seconds(const kv_link *l, int64_t pages, double page_bytes)
{
    return (double)pages * (l->per_page + page_bytes / l->bandwidth);
}

double kv_link_seconds(const kv_link *l, int64_t pages, double page_bytes)
{
    return l->latency + kv_link_busy_seconds(l, pages, page_bytes);
}
