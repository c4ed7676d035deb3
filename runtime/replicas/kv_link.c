/* kv_link.c - see kv_link.h. */
#include "kv_link.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const kv_link_names[] = {"rdma", "tcp", NULL};

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
        char *end = NULL;
        double v = eq ? strtod(eq + 1, &end) : NAN;
        if (!eq || end == eq + 1 || *end || !(v >= 0) || isinf(v)) {
            snprintf(err, errlen, "bad link override '%s' (want key=number >= 0)", kv);
            return RKV_EINVAL;
        }
        *eq = 0;
        if (!strcmp(kv, "bandwidth") && v > 0) l.bandwidth = v;
        else if (!strcmp(kv, "latency")) l.latency = v;
        else if (!strcmp(kv, "per_page")) l.per_page = v;
        else {
            snprintf(err, errlen, "bad link key '%s' (bandwidth > 0 in B/s, latency and per_page "
                     "in s)", kv);
            return RKV_EINVAL;
        }
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
