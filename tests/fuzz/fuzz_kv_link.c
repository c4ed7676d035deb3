/* fuzz_kv_link.c - the handoff's link (--link NAME[,key=value]...): any
 * string either fails with a reason or gives a link whose every handoff
 * time is finite (bounded bandwidth, latency and per_page; kv_link.h). */
#include <math.h>

#include "fuzz_util.h"
#include "kv_link.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *spec = malloc(size + 1);
    if (!spec) return 0;
    memcpy(spec, data, size);
    spec[size] = 0;
    kv_link l;
    char why[320] = "";
    if (kv_link_parse(spec, &l, why, sizeof why) == RKV_OK) {
        if (!(l.bandwidth >= 1e3 && l.bandwidth <= 1e15) || !(l.latency >= 0 && l.latency <= 60) ||
            !(l.per_page >= 0 && l.per_page <= 1))
            abort();
        /* The most pages one request can hand over, of the largest page. */
        double t = kv_link_seconds(&l, INT32_MAX, 65536.0 * 4 * 1024 * 1024);
        if (!isfinite(t) || t < 0) abort();
    } else if (!why[0]) {
        abort(); /* a refusal always says why */
    }
    free(spec);
    return 0;
}
