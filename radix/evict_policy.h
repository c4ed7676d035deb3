/* evict_policy.h - eviction policies as plug-ins, and the one table of them.
 *
 * A policy is a single file radix/policy_<name>.c defining one evict_policy:
 * its name, a one-line summary and a key function. Registering it is one line
 * in evict_policy.c's table; every cache kind, the CLI (`radixkv list`), the
 * help texts, the tests and the experiments then know it by name.
 *
 * The order a policy defines: among the candidates a kind may evict (unlocked
 * leaves for the tree kinds, free leaf blocks for hash), the one with the
 * smallest key goes first; equal keys go to the smaller id (created first,
 * docs/ARCHITECTURE.md's tie rule). The caller applies that last tie, never the policy,
 * so no policy can break it. Keys compare as (k0, k1), unsigned.
 *
 * What a kind tells a policy about a node (evict_node): the logical clock of
 * the last call that entered it and of the call before that, how many calls
 * entered it, its size, its depth
 * in its sequence and the highest request priority that entered it. A kind
 * keeps the per-node state a policy asks for in `needs` (depth, priority,
 * previous access time) and
 * only then: LRU costs nothing it did not cost before. Keys are a pure function
 * of that state, so a kind recomputes a key only when it changes a node.
 *
 * Per kind, what the fields are:
 *   radix  time/hits per node (radix_tree.h), depth = tokens above the node's
 *          first token, len = its edge tokens. A split's new prefix node
 *          inherits the hits, the lock count and the priority of the node it
 *          was cut from and counts as created at the split; the suffix keeps
 *          its id, its hits and its priority, and its depth grows by the
 *          prefix's length (the cost policy reads the new depth).
 *   trie   the same per token node (len = 1; a page owner's depth is that of
 *          the page's first token)
 *   hash   per cached block: time = release order in vLLM's free queue (so lru
 *          is exactly the queue), hits = every call whose chain reached it,
 *          inserts included (its own insert counts one, so hits = matches +
 *          inserts that walked through it), depth = block index × P, len = P,
 *          id = the order it was cached; prev_time = its release order
 *          before the last. These policies run only under
 *          --hash-duplicates dedup (cache_hash.c).
 */
#ifndef RKV_EVICT_POLICY_H
#define RKV_EVICT_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A node as a policy sees it. */
typedef struct evict_node {
    uint64_t time;     /* logical clock of the last call that entered it */
    uint64_t prev_time; /* that of the call before it (0: entered once); 0 unless
                          needs PREV_TIME */
    uint64_t hits;     /* calls that entered it (creation counts one); 0 unless needs HITS */
    int64_t depth;     /* tokens before its first token; 0 unless needs DEPTH */
    int32_t len;       /* tokens it holds (its size) */
    int32_t priority;  /* highest request priority that entered it; 0 unless needs PRIORITY */
} evict_node;

/* Smaller is evicted first; (k0, k1) compared as unsigned, then the kind's id. */
typedef struct evict_key {
    uint64_t k0, k1;
} evict_key;

enum {
    EVICT_NEEDS_DEPTH = 1u << 0,    /* the kind tracks evict_node.depth */
    EVICT_NEEDS_PRIORITY = 1u << 1, /* the kind tracks evict_node.priority */
    EVICT_NEEDS_HITS = 1u << 2,     /* the kind tracks evict_node.hits (radix always does) */
    EVICT_NEEDS_PREV_TIME = 1u << 3, /* the kind tracks evict_node.prev_time */
};

/* Fields of evict_node, for evict_policy.order. */
enum { EVICT_FIELD_END = 0, EVICT_FIELD_TIME, EVICT_FIELD_HITS, EVICT_FIELD_PRIORITY };

typedef struct evict_policy {
    const char *name;    /* as given to --evict-policy / cache_config.policy */
    const char *summary; /* one line, for `radixkv list` and help */
    evict_key (*key)(const evict_node *n);
    unsigned needs;      /* EVICT_NEEDS_* */
    /* Optional: when the key is nothing but some fields compared in turn
     * (smaller first; priority as a signed number), those fields, ending in
     * EVICT_FIELD_END (fifo: no field at all). A kind may then compare its
     * nodes in place instead of calling key or storing keys; the order must
     * be the key's (the cache suite checks it). NULL: the kind stores keys. */
    const uint8_t *order;
} evict_policy;

/* The table (evict_policy.c), NULL-terminated, in registration order; index 0
 * is the default (lru). */
extern const evict_policy *const evict_policies[];
/* Their names, NULL-terminated, same order (for option choices). */
extern const char *const evict_policy_name_list[];
/* Number of registered policies. */
int evict_policy_count(void);
/* The policy named name (NULL means the default); NULL when unknown. */
const evict_policy *evict_policy_find(const char *name);
/* evict_policy_find(), and when the name is unknown a message in err naming
 * it, the caller (who) and the choices: "<who>: unknown eviction policy ...". */
const evict_policy *evict_policy_lookup(const char *name, const char *who, char *err,
                                        size_t errlen);
/* The contract every policy keeps: its key never falls when a node is
 * accessed (time grows and the old time becomes prev_time, hits grow,
 * priority may only rise; depth and len do not change). Radix keeps its heap ordered lazily and fixes a key only when
 * the node surfaces, which is exact only under this rule; a key that falls on
 * access (MRU) would make radix evict in another order than trie and hash,
 * silently. Checked here on `trials` random accesses from `seed` (the cache
 * suite runs it over every registered policy): true when the key never fell;
 * else false with the counter-example in err. */
bool evict_policy_key_never_falls(const evict_policy *p, int trials, uint64_t seed, char *err,
                                  size_t errlen);
/* Index of p in the table, -1 if it is not registered. */
int evict_policy_index(const evict_policy *p);
/* "lru, lfu, ..." into buf (for error messages); returns buf. */
const char *evict_policy_names(char *buf, size_t len);

static inline bool evict_key_less(evict_key a, evict_key b)
{
    return a.k0 != b.k0 ? a.k0 < b.k0 : a.k1 < b.k1;
}

/* A signed priority as an unsigned key part with the same order. */
static inline uint64_t evict_key_of_signed(int64_t v)
{
    return (uint64_t)v ^ (UINT64_C(1) << 63);
}

/* A policy file defines `const evict_policy evict_policy_<name>`; the table
 * lists it once in EVICT_POLICY_LIST (evict_policy.c). */

#endif
