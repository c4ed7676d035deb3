/* policy_lru2.c - LRU-2 (O'Neil, O'Neil and Weikum, 1993): the oldest
 * second-to-last access goes first. A node entered only once has no such
 * access (prev_time 0) and goes before every node entered twice, oldest last
 * access first among them; so a prefix seen once (a one-off prompt) leaves
 * before one that came back, however long ago that was.
 *
 * The key only rises on access: the old last access becomes the previous one
 * (prev_time grows to time) and the last access grows, so the lazy heaps'
 * contract holds. */
#include "evict_policy.h"

static evict_key lru2_key(const evict_node *n)
{
    return (evict_key){n->prev_time, n->time};
}

const evict_policy evict_policy_lru2 = {
    .name = "lru2",
    .summary = "oldest second-to-last access first (entered once: first, by last access), then lru",
    .key = lru2_key,
    .needs = EVICT_NEEDS_PREV_TIME,
};
