/* policy_priority.c - SGLang's priority eviction: a request carries an
 * integer priority (trace field "priority", default 0); a node keeps the
 * highest priority of the requests whose match or insert entered it, so a
 * prefix shared with an important request is as safe as that request. The
 * lowest priority goes first; equal priorities go least recently used first,
 * then created first. With every priority equal it is exactly lru. */
#include "evict_policy.h"

static evict_key priority_key(const evict_node *n)
{
    return (evict_key){evict_key_of_signed(n->priority), n->time};
}

static const uint8_t priority_order[] = {EVICT_FIELD_PRIORITY, EVICT_FIELD_TIME, EVICT_FIELD_END};

const evict_policy evict_policy_priority = {
    .name = "priority",
    .summary = "lowest request priority first (a node keeps the highest that entered it), then lru",
    .key = priority_key,
    .needs = EVICT_NEEDS_PRIORITY,
    .order = priority_order,
};
