/* policy_lfu.c - least frequently used: fewest hits go first, then the
 * oldest last access (SGLang's lfu key, hits then time). */
#include "evict_policy.h"

static evict_key lfu_key(const evict_node *n)
{
    return (evict_key){n->hits, n->time};
}

static const uint8_t lfu_order[] = {EVICT_FIELD_HITS, EVICT_FIELD_TIME, EVICT_FIELD_END};

const evict_policy evict_policy_lfu = {
    .name = "lfu",
    .summary = "fewest hits first, then least recently used, then created first",
    .key = lfu_key,
    .needs = EVICT_NEEDS_HITS,
    .order = lfu_order,
};
