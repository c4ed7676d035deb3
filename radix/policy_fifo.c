/* policy_fifo.c - first in, first out: every key is equal, so the caller's
 * tie rule (created first) is the whole order. */
#include "evict_policy.h"

static evict_key fifo_key(const evict_node *n)
{
    (void)n;
    return (evict_key){0, 0};
}

static const uint8_t fifo_order[] = {EVICT_FIELD_END};

const evict_policy evict_policy_fifo = {
    .name = "fifo",
    .summary = "created first goes first",
    .key = fifo_key,
    .order = fifo_order,
};
