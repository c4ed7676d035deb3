/* policy_lru.c - least recently used: the oldest last access goes first
 * (SGLang's default). The default policy. */
#include "evict_policy.h"

static evict_key lru_key(const evict_node *n)
{
    return (evict_key){n->time, 0};
}

static const uint8_t lru_order[] = {EVICT_FIELD_TIME, EVICT_FIELD_END};

const evict_policy evict_policy_lru = {
    .name = "lru",
    .summary = "least recently used first (oldest last access), ties to the created first",
    .key = lru_key,
    .order = lru_order,
};
