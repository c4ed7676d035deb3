/* policy_cost.c - cost-aware eviction in the manner of GreedyDual-Size-
 * Frequency: keep what is dearest to recompute per token of room it takes.
 *
 *   value(node) = hits × cost / size
 *
 * Recomputing a node of len tokens that starts at depth d (tokens before it)
 * is a prefill of those tokens over a context of d + i + 1 keys each. Per
 * token, the dense layers (QKV/O projections, MLP) cost the same at every
 * position while attention grows with the keys it reads; in units of the
 * attention work per key:
 *
 *   cost = Σ_{i=0}^{len-1} (C + d + i + 1) = len · (C + d) + len · (len + 1) / 2
 *   size = len
 *   value = hits · (C + d + (len + 1) / 2)
 *
 * C = COST_DENSE_KEYS is the dense work per token expressed in keys:
 * 2·params / (4·layers·d_model), about 8k for 7B-class models (6.7e9 params,
 * 32 layers, d_model 4096 give 25k; a 1B model about 8k); 8192 is used. A node
 * deep in a long prompt is therefore worth more than a short prefix hit as
 * often. The smallest value goes first; equal values go least recently used,
 * then created first. Values are exact binary64 (hits < 2^30, depth and len
 * below 2^31, so the sum stays well inside 2^53 per hit) and nonnegative, and
 * nonnegative doubles order like their bit patterns. No aging term (GDSF's L):
 * the key stays a pure function of the node, so nothing is ever re-keyed. */
#include "evict_policy.h"

#include <string.h>

enum { COST_DENSE_KEYS = 8192 };

static evict_key cost_key(const evict_node *n)
{
    double per_token = (double)COST_DENSE_KEYS + (double)n->depth + ((double)n->len + 1.0) / 2.0;
    double value = (double)n->hits * per_token;
    uint64_t bits;
    memcpy(&bits, &value, sizeof bits);
    return (evict_key){bits, n->time};
}

const evict_policy evict_policy_cost = {
    .name = "cost",
    .summary = "smallest hits x recompute cost / size first (cost grows with depth), then lru",
    .key = cost_key,
    .needs = EVICT_NEEDS_DEPTH | EVICT_NEEDS_HITS,
};
