/* evict_policy.c - the one table of eviction policies (see evict_policy.h).
 * Adding a policy: write radix/policy_<name>.c, add X(<name>) below and the
 * file to radix/meson.build. The first entry is the default. */
#include "evict_policy.h"
#include "rkv_core.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define EVICT_POLICY_LIST(X) \
    X(lru)                   \
    X(lfu)                   \
    X(fifo)                  \
    X(priority)              \
    X(cost)                  \
    X(lru2)                  \
    /* one line per policy, above this one */

#define DECLARE(n) extern const evict_policy evict_policy_##n;
EVICT_POLICY_LIST(DECLARE)
#undef DECLARE

#define ENTRY(n) &evict_policy_##n,
const evict_policy *const evict_policies[] = {EVICT_POLICY_LIST(ENTRY) NULL};
#undef ENTRY

#define NAME(n) #n,
const char *const evict_policy_name_list[] = {EVICT_POLICY_LIST(NAME) NULL};
#undef NAME

int evict_policy_count(void)
{
    return (int)(sizeof evict_policies / sizeof evict_policies[0]) - 1;
}

const evict_policy *evict_policy_find(const char *name)
{
    if (!name) return evict_policies[0];
    for (int i = 0; evict_policies[i]; i++)
        if (!strcmp(evict_policies[i]->name, name)) return evict_policies[i];
    return NULL;
}

const evict_policy *evict_policy_lookup(const char *name, const char *who, char *err,
                                        size_t errlen)
{
    const evict_policy *p = evict_policy_find(name);
    if (!p && err) {
        char names[256];
        snprintf(err, errlen, "%s: unknown eviction policy '%s' (expected one of: %s)", who, name,
                 evict_policy_names(names, sizeof names));
    }
    return p;
}

int evict_policy_index(const evict_policy *p)
{
    for (int i = 0; evict_policies[i]; i++)
        if (evict_policies[i] == p) return i;
    return -1;
}

const char *evict_policy_names(char *buf, size_t len)
{
    return rkv_join_names(buf, len, evict_policy_name_list);
}

bool evict_policy_key_never_falls(const evict_policy *p, int trials, uint64_t seed, char *err,
                                  size_t errlen)
{
    uint64_t r = seed;
    for (int i = 0; i < trials; i++) {
        /* Small ranges as well as large ones, so that ties and edges occur. */
        uint64_t span = i % 2 ? 1000 : UINT64_C(1) << 40;
        evict_node a = {
            .time = rkv_splitmix64_next(&r) % span,
            .hits = 1 + rkv_splitmix64_next(&r) % span,
            .depth = (int64_t)(rkv_splitmix64_next(&r) % span),
            .len = 1 + (int32_t)(rkv_splitmix64_next(&r) % 4096),
            .priority = (int32_t)(rkv_splitmix64_next(&r) % 200) - 100,
        };
        a.prev_time = i % 3 ? rkv_splitmix64_next(&r) % (a.time + 1) : 0;
        evict_node b = a;
        b.prev_time = a.time;
        b.time += 1 + rkv_splitmix64_next(&r) % span;
        b.hits += 1;
        int32_t pr = (int32_t)(rkv_splitmix64_next(&r) % 200) - 100;
        if (pr > b.priority) b.priority = pr;
        if (evict_key_less(p->key(&b), p->key(&a))) {
            if (err)
                snprintf(err, errlen, "policy %s: key fell on access: time %" PRIu64 " -> %" PRIu64
                         " (previous %" PRIu64 " -> %" PRIu64 "), hits %" PRIu64 " -> %" PRIu64 ", priority %d -> %d", p->name, a.time,
                         b.time, a.prev_time, b.prev_time, a.hits, b.hits, a.priority, b.priority);
            return false;
        }
    }
    return true;
}
