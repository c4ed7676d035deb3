/* radix_tree.h - compressed radix tree of token ids owning KV-cache pages
 * (RadixAttention as in SGLang, made deterministic).
 *
 * Ownership: the tree owns the pages of every cached node (state CACHED in the
 * page pool). insert() adopts the caller's pages beyond the already-cached
 * prefix; evict() and destroy() free pages back to the pool. The pool must
 * outlive the tree. Token and page arrays passed in are only read.
 *
 * Shape (P = 1; each node holds its edge tokens and its pages, one per P
 * tokens, stored as runs of consecutive ids):
 *
 *   insert "ABCDE", insert "ABXY", match "ABC":
 *
 *        (root)                  (root)                      (root)
 *          |                       |                           |
 *       [ABCDE]       ->         [AB]  <- split prefix       [AB]
 *                               /    \   (new node)         /    \
 *                           [CDE]   [XY]                 [C]     [XY]
 *                   (old node keeps                       |
 *                    identity, children)                 [DE] <- old [ABCDE]
 *
 *   A match that ends inside a node splits it, so a matched prefix is always
 *   a path of whole nodes and its last node is the match handle.
 *
 * Namespaces: namespace 0 hangs off the root; every other namespace gets one
 * empty "namespace node" (length 0, never evicted) under the root, created by
 * the first insert in it. Tokens in different namespaces never share nodes.
 *
 * Clock and times: a logical clock advances by one at every match and insert
 * call. Every node the call enters, also one it enters only partly, takes the
 * current clock as its time and counts one hit. A split gives both halves that
 * time; the prefix node inherits the lock count and hit count and counts as
 * created at the split, the suffix keeps its identity, children and creation
 * order. Lock, unlock and evict never move the clock.
 *
 * Node ids: every node gets a unique, never reused 64-bit id in creation
 * order, id = clock << 2 | k (k = 0 namespace node, 1 split prefix, 2 new
 * leaf; at most one of each per call). The root is id 0. Hence a node's
 * creation time is id >> 2, and "created first" (the eviction tie rule) is
 * "smaller id".
 *
 * Eviction: candidates are the unlocked leaves (not the root or namespace
 * nodes), kept in a 4-ary heap of entries carrying their keys, fixed lazily
 * at eviction time (a match only writes the node's time and hits), so each
 * evicted leaf costs O(log n) amortized and nothing is ever rebuilt. The
 * order is the policy's key (evict_policy.h; one file per policy), then the
 * smaller id (radix_tree.c: entry_key()):
 *   lru       oldest time
 *   lfu       fewest hits, then oldest time
 *   fifo      (no key: created first)
 *   priority  lowest priority, then oldest time; a node's priority is the
 *             highest radix_tree_set_priority() value of the calls that
 *             entered or created it (a split prefix inherits it)
 *   cost      smallest hits x recompute cost / size, then oldest time;
 *             depth = tokens on the path above the node's first token
 *   lru2      oldest time before the last (0 for a node entered once), then
 *             oldest time; a split prefix inherits it, both halves then take
 *             their time before the split as it
 * Depth, priority and the time before the last are kept per slot beside the
 * nodes, only for policies that ask for them. lru, lfu and fifo, whose keys are node fields in turn,
 * have them packed into the entry in place; the others' entries hold their
 * key function's key (second part saturated to 32 bits). The lazy heap asks
 * that a node's key never fall while it lives.
 *
 * Pictures per step (for the cache simulator): radix_tree_clock() before and
 * after a step gives the clock range (c0, c1] of its calls; radix_tree_visit()
 * then tells each node's time and created time, so nodes with
 * c0 < created <= c1 were created during the step and nodes with
 * c0 < time <= c1 were entered (matched or inserted through) during it. The
 * JSON dump carries the same fields. radix_tree_set_evict_cb() reports every
 * evicted node, with its own edge tokens, in eviction order.
 */
#ifndef RKV_RADIX_TREE_H
#define RKV_RADIX_TREE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "page_pool.h"
#include "rkv_status.h"

typedef struct radix_tree radix_tree;

/* An index into evict_policies[] (evict_policy.h); the first three have
 * names here for callers that pick one in code. */
typedef enum radix_policy {
    RADIX_LRU = 0,
    RADIX_LFU,
    RADIX_FIFO,
} radix_policy;

/* Any registered policy name (NULL means lru). RKV_EINVAL otherwise. */
rkv_status radix_policy_parse(const char *name, radix_policy *out);
const char *radix_policy_name(radix_policy p);

/* What radix_tree_visit() and the eviction callback see of one node. The
 * pointers stay valid only during the callback. */
typedef struct radix_node_info {
    uint64_t id;         /* unique, creation order; root 0 */
    uint64_t parent_id;  /* root's is 0 too */
    int32_t slot;        /* internal index (reused after eviction), < radix_tree_slots() */
    int32_t parent_slot; /* -1 for the root */
    uint64_t ns;         /* namespace */
    int32_t len;         /* edge tokens, a multiple of P; 0 for root / namespace nodes */
    int32_t lock;        /* handles at or below this node */
    uint64_t time;       /* clock of the last call that entered it */
    uint64_t created;    /* clock of the call that created it (id >> 2) */
    uint64_t hits;       /* calls that entered it (lfu); saturates at 2^29 - 1 */
    int32_t num_children;
    const int32_t *tokens; /* (len) this node's own edge tokens */
    const int32_t *pages;  /* (len / P) page ids, expanded from the node's runs;
                              NULL for root / namespace nodes, or when host
                              memory for the expansion ran out */
} radix_node_info;

typedef void (*radix_node_fn)(void *ctx, const radix_node_info *node);

/* A tree over pool (P = pool->page_size). */
rkv_status radix_tree_create(page_pool *pool, radix_policy policy, radix_tree **out);
/* Frees every cached page back to the pool, then the tree. */
void radix_tree_destroy(radix_tree *t);
/* Priority of the request the following match / insert calls are for (0 at
 * creation); only the priority policy reads it. */
void radix_tree_set_priority(radix_tree *t, int32_t priority);

/* Longest cached prefix of tokens[0..n) in namespace ns, cut to whole pages.
 * Writes its page ids to pages_out (room for n / P), its length to *len and
 * the handle (last node of the path; the root or namespace node when nothing
 * matched) to *node. Advances the clock; splits the node the match ends in.
 * RKV_ENOMEM leaves the tree as it was before the split. */
rkv_status radix_tree_match(radix_tree *t, const int32_t *tokens, int32_t n, uint64_t ns,
                            int32_t *pages_out, int32_t *len, int32_t *node);

/* A run of consecutive page ids: first, first + 1, .., first + count - 1
 * (the pool's own type, so that an insert's new pages go from the pool's
 * allocation into the caller's runs with no copy). */
typedef page_run radix_page_run;

/* radix_tree_match(), with the matched page ids as runs: runs_out (room for
 * n / P runs) gets *num_runs maximal runs (consecutive across nodes merged),
 * in token order. The tree stores pages as runs, so this costs one write per
 * run instead of one per page. */
rkv_status radix_tree_match_runs(radix_tree *t, const int32_t *tokens, int32_t n, uint64_t ns,
                                 radix_page_run *runs_out, int32_t *num_runs, int32_t *len,
                                 int32_t *node);

/* radix_tree_match_runs() over the caller's int64 ids, compared against the
 * tree's int32 tokens as the walk goes (no narrowed copy of the key; the key
 * is read only up to where the match stops). An id outside [0, INT32_MAX]
 * matches nothing, so the match ends before it; the tree is left as
 * radix_tree_match_runs() on the narrowed ids up to there would leave it. */
rkv_status radix_tree_match_runs64(radix_tree *t, const int64_t *tokens, int32_t n, uint64_t ns,
                                   radix_page_run *runs_out, int32_t *num_runs, int32_t *len,
                                   int32_t *node);

/* The page ids of runs[0..nruns) one by one into pages_out (room for the sum
 * of counts), for callers that need a flat page table. Returns the count. */
int32_t radix_page_runs_expand(const radix_page_run *runs, int32_t nruns, int32_t *pages_out);

/* Store tokens[0..n) (cut to whole pages) with pages[0..n/P) in namespace ns.
 * *prefix_len = tokens already cached; pages[prefix_len/P .. n/P) are adopted
 * (INFLIGHT -> CACHED), the caller keeps and frees the others. Advances the
 * clock. RKV_EINVAL if those pages are not INFLIGHT (nothing adopted, nothing
 * new cached); RKV_ENOMEM likewise caches nothing new. */
rkv_status radix_tree_insert(radix_tree *t, const int32_t *tokens, int32_t n,
                             const int32_t *pages, uint64_t ns, int32_t *prefix_len);

/* radix_tree_insert(), which also says where the inserted path is: runs_out
 * (room for n / P runs) gets the *num_runs runs of the pages that were
 * already cached (tokens [0, *prefix_len)), and *node the path's last node (a
 * handle for lock, as from a match; the new leaf when one was added). The
 * path's pages are those runs followed by pages[*prefix_len / P .. n / P). */
rkv_status radix_tree_insert_runs(radix_tree *t, const int32_t *tokens, int32_t n,
                                  const int32_t *pages, uint64_t ns, int32_t *prefix_len,
                                  radix_page_run *runs_out, int32_t *num_runs, int32_t *node);

/* radix_tree_insert_runs() for a caller that has no pages yet: after the walk
 * the tree takes the pages for tokens [*prefix_len, n) from its pool as runs
 * (page_pool_alloc_runs) and adopts them, so only what is missing is ever
 * allocated. runs_out (room for n / P runs) gets the whole path's pages: the
 * cached part's runs, then the taken ones (the first merged into the last
 * cached run when it continues it), *num_runs in all. RKV_ENOSPC when the
 * pool is short (nothing new cached; the walk has entered the cached part,
 * as a match would). */
rkv_status radix_tree_insert_take(radix_tree *t, const int32_t *tokens, int32_t n, uint64_t ns,
                                  int32_t *prefix_len, radix_page_run *runs_out,
                                  int32_t *num_runs, int32_t *node);

/* radix_tree_insert_take() over the caller's int64 ids (the walk as in
 * radix_tree_match_runs64(), the new leaf's tokens narrowed into it as they
 * are checked). An id outside [0, INT32_MAX] past the cached part is
 * RKV_EINVAL with its index in *bad (-1 otherwise); nothing new is cached,
 * and the walk has entered the cached part as a match would. */
rkv_status radix_tree_insert_take64(radix_tree *t, const int64_t *tokens, int32_t n,
                                    uint64_t ns, int32_t *prefix_len, radix_page_run *runs_out,
                                    int32_t *num_runs, int32_t *node, int32_t *bad);

/* Reference counts from node up to the root (handles from match). Moving a
 * node's count 0 -> 1 moves its tokens from evictable to protected, and back.
 * unlock of a node whose count is 0 is RKV_EINVAL and changes nothing. A
 * handle is valid until the node is evicted: lock right after the match. */
rkv_status radix_tree_lock(radix_tree *t, int32_t node);
rkv_status radix_tree_unlock(radix_tree *t, int32_t node);

/* Remove unlocked leaves in policy order until at least n_tokens are freed
 * or no candidate is left; a parent left childless and unlocked becomes a
 * candidate at once. Returns the tokens freed (pages go back to the pool). */
int64_t radix_tree_evict(radix_tree *t, int64_t n_tokens);

/* Called for every evicted node, in eviction order, before it is freed. */
void radix_tree_set_evict_cb(radix_tree *t, radix_node_fn fn, void *ctx);

typedef struct radix_tree_sizes {
    int64_t evictable_tokens; /* lock == 0 */
    int64_t protected_tokens; /* lock > 0 */
    int64_t num_nodes;        /* nodes holding tokens (root and namespace nodes excluded) */
    int64_t num_candidates;   /* unlocked leaves */
    int64_t host_bytes;       /* host memory the tree allocated (requested sizes) */
    uint64_t splits;          /* splits so far */
    uint64_t evictions;       /* nodes evicted so far */
    uint64_t heap_steps;      /* levels the candidate heap moved entries so far */
} radix_tree_sizes;

void radix_tree_get_sizes(const radix_tree *t, radix_tree_sizes *out);
uint64_t radix_tree_clock(const radix_tree *t);
/* Upper bound of radix_node_info.slot, for arrays indexed by slot. */
int32_t radix_tree_slots(const radix_tree *t);

/* Every node, parents before children (depth first; children in table order). */
void radix_tree_visit(const radix_tree *t, radix_node_fn fn, void *ctx);

/* Structure, first-page child keys, lock counts, sizes, candidate heap, times
 * and page ownership (pool CACHED count = (evictable + protected) / P, each
 * page owned once). RKV_ECORRUPT with a message in err on failure. */
rkv_status radix_tree_check(const radix_tree *t, char *err, size_t errlen);

/* Dumps. max_tokens caps the tokens shown per edge (-1: all); a cut edge gets
 * "truncated": true in JSON and "..." in text/DOT.
 *   text: one indented line per node.
 *   json: one line {"clock":..,"policy":..,"page_size":..,"nodes":[{"id","parent","ns",
 *         "tokens","truncated","length","lock","time","created","hits"},..]}.
 *   dot:  digraph, label = first tokens, length, lock count, time. */
void radix_tree_dump_text(const radix_tree *t, FILE *f, int32_t max_tokens);
void radix_tree_dump_json(const radix_tree *t, FILE *f, int32_t max_tokens);
void radix_tree_dump_dot(const radix_tree *t, FILE *f, int32_t max_tokens);

/* The tree behind a cache of kind "radix"; NULL for any other kind. Lets the
 * simulator set the eviction callback and read node times. */
struct cache;
radix_tree *cache_radix_tree(struct cache *c);

/* cache_match_prefix() for a cache of kind "radix" over int64 ids
 * (radix_tree_match_runs64), counted in the cache's stats as a match. The
 * matched pages come back as runs instead of a flat table: *runs (*num_runs
 * of them, in token order) is the cache's scratch, valid until its next call;
 * s gets len and handle, and num_pages 0 (s->pages is not written: expand the
 * runs with radix_page_runs_expand() where a flat table is needed).
 * RKV_ENOTSUP for any other kind, RKV_EINVAL while s holds locks. */
struct cache_seq;
rkv_status cache_radix_match64(struct cache *c, struct cache_seq *s, const int64_t *tokens,
                               int32_t n, const radix_page_run **runs, int32_t *num_runs);
/* cache_insert_hold() with pages NULL for a cache of kind "radix" over int64
 * ids (radix_tree_insert_take64), counted as an insert: s then holds the
 * inserted path (its locks moved there), len and handle set, num_pages 0;
 * the path's pages come back as runs as from cache_radix_match64(), the
 * pages the cache took for tokens [*prefix_len, n) being the last ones. An
 * id out of range past the cached part: RKV_EINVAL, its index in *bad.
 * RKV_ENOTSUP for any other kind. */
rkv_status cache_radix_insert_hold64(struct cache *c, struct cache_seq *s, const int64_t *tokens,
                                     int32_t n, int32_t *prefix_len, const radix_page_run **runs,
                                     int32_t *num_runs, int32_t *bad);

#endif
