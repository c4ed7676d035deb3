/* cache_trie.c - the `trie` kind: one node per token, uncompressed (the
 * "YOCO" per-token trie), the ablation of the radix tree's compression.
 *
 * Tokens "a b c d" then "a b e f" with P = 2 (one root per namespace):
 *
 *            (root ns=0)
 *                 |
 *                 a
 *                 |
 *                 b [p0]            page p0 holds tokens (a b)
 *                / \
 *               c   e
 *               |   |
 *        [p1]   d   f   [p2]        p1 holds (c d), p2 holds (e f)
 *
 * Page ownership: a page is owned by the node of its LAST token, so the node
 * at depth kP owns the page of tokens [(k-1)P, kP). Branching may happen
 * anywhere (a node inside a page may have several children); since inserts
 * are cut to whole pages, every leaf and every node at a depth multiple of P
 * owns a page, and the nodes strictly inside a page own none. Sizes count
 * owners only (evictable/protected = owning nodes x P), so they equal the
 * cache's pages in the pool; num_nodes counts every token node.
 *
 * Clock and eviction, as in the radix kind: the clock advances by one at
 * every match and insert; every node the call walks through takes the time.
 * Lock and unlock add/remove a reference on every node from the handle (the
 * last matched owner) up to the namespace root. Eviction candidates are the
 * unlocked owners without children, in a min-heap ordered by the eviction
 * policy's key (evict_policy.h), then created first; the policy sees a page
 * owner as a node of len P at depth (its depth - P), with its own time, hits
 * and priority (every node the call enters counts a hit and takes the highest
 * request priority); evicting one frees its page and removes the ownerless nodes above it up to
 * the next owner (a page at a time), which then may become a candidate.
 *
 * Children: a node with few children keeps them in its sibling list only
 * (most nodes have one child, usually the next slot in memory); once it has
 * more than WIDE children they are also indexed in one table keyed by
 * (parent, token), so a wide node (a root) finds a child in O(1) too.
 */
#include <stdlib.h>
#include <string.h>

#include "cache_kinds.h"
#include "evict_policy.h"
#include "rkv_core.h"

typedef struct tnode {
    int32_t token;
    int32_t page;      /* owned page, or -1 (roots and nodes inside a page) */
    int32_t parent;    /* -1 for a namespace root */
    int32_t depth;     /* tokens from the root; -1 marks a free slot */
    int32_t first_child, next_sib, prev_sib; /* next_sib links the free list too */
    int32_t nchildren;
    int32_t hnext;     /* next node in the same child-table bucket */
    int32_t ref;       /* locks through this node */
    int32_t heap_pos;  /* slot in the eviction heap, -1 when not a candidate */
    int32_t indexed;   /* 1 once the children are in the child table */
    uint64_t time;     /* clock of the last call that entered the node */
    uint64_t created;  /* creation order: ties go to the created-first */
    uint64_t ns;       /* roots only */
} tnode;

/* Per-node state only some policies read (evict_policy.h `needs`), beside the
 * nodes so that lru keeps the trie's footprint. */
typedef struct tmeta {
    uint32_t hits;      /* calls that entered it, its creation included */
    int32_t priority;   /* highest request priority that entered it */
    uint64_t prev_time; /* clock of the call before its last (0: none) */
} tmeta;
/* The needs tmeta serves. */
#define TRIE_META_NEEDS (EVICT_NEEDS_HITS | EVICT_NEEDS_PRIORITY | EVICT_NEEDS_PREV_TIME)

/* A candidate in the eviction heap, with its key (see heap_less). */
typedef struct theap {
    evict_key key;
    uint64_t created;
    int32_t node;
} theap;

typedef struct cache_trie {
    cache base;
    tnode *nodes;        /* (cap) */
    int32_t cap, high;   /* slots allocated, slots ever used */
    int32_t free_head;   /* free slots below high, linked by next_sib */
    int32_t live;        /* nodes in use, roots included */
    int32_t *buckets;    /* (mask + 1) child table, -1 empty */
    uint32_t mask;
    theap *heap;         /* (heap_cap) candidates, min (policy key, created) first */
    const evict_policy *pol;
    tmeta *meta;         /* (cap) by node; NULL when the policy reads neither */
    int32_t heap_n, heap_cap;
    int32_t *roots;      /* (nroots) root node of each namespace */
    int32_t nroots, roots_cap;
    uint64_t clock, seq;
    int64_t owners, locked_owners, num_tokens; /* num_tokens: non-root nodes */
    int32_t priority;    /* the current match / insert's request priority (its cache_seq's) */
} cache_trie;

static const cache_ops trie_ops;

enum { WIDE = 8 }; /* children scanned in a list up to this many */

/* ---- node slots and the child table ------------------------------------- */

static uint32_t child_bucket(const cache_trie *t, int32_t parent, int32_t token)
{
    uint64_t x = ((uint64_t)(uint32_t)parent << 32) | (uint32_t)token;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return (uint32_t)x & t->mask;
}

static int32_t child_find(const cache_trie *t, int32_t parent, int32_t token)
{
    /* Most nodes have one child, usually the next slot in memory: try it
     * before the table, whose buckets are scattered. */
    const tnode *p = &t->nodes[parent];
    if (p->first_child >= 0 && t->nodes[p->first_child].token == token) return p->first_child;
    if (!p->indexed) {
        for (int32_t x = p->first_child; x >= 0; x = t->nodes[x].next_sib)
            if (t->nodes[x].token == token) return x;
        return -1;
    }
    for (int32_t x = t->buckets[child_bucket(t, parent, token)]; x >= 0; x = t->nodes[x].hnext)
        if (t->nodes[x].parent == parent && t->nodes[x].token == token) return x;
    return -1;
}

static void table_add(cache_trie *t, int32_t x)
{
    uint32_t b = child_bucket(t, t->nodes[x].parent, t->nodes[x].token);
    t->nodes[x].hnext = t->buckets[b];
    t->buckets[b] = x;
}

static void table_remove(cache_trie *t, int32_t x)
{
    int32_t *link = &t->buckets[child_bucket(t, t->nodes[x].parent, t->nodes[x].token)];
    while (*link != x) link = &t->nodes[*link].hnext;
    *link = t->nodes[x].hnext;
}

/* Make room for `more` new nodes (slots, heap, table) before any change, so
 * an allocation failure leaves the trie as it was. */
static rkv_status reserve_nodes(cache_trie *t, int64_t more)
{
    int64_t want = (int64_t)t->live + more;
    if (want > INT32_MAX / 2) return RKV_ENOMEM;
    if (want > t->cap) {
        /* meta only when the policy reads it */
        void **arrays[] = {(void **)&t->nodes, (void **)&t->meta};
        const size_t elem[] = {sizeof *t->nodes, sizeof *t->meta};
        int n = t->pol->needs & TRIE_META_NEEDS ? 2 : 1;
        if (rkv_grow32_arrays(arrays, elem, n, &t->cap, want)) return RKV_ENOMEM;
    }
    if ((uint64_t)want > (uint64_t)t->mask + 1) {
        uint32_t nb = (t->mask + 1) * 2;
        while (nb < (uint64_t)want) nb *= 2;
        int32_t *b = malloc(sizeof *b * (size_t)nb);
        if (!b) return RKV_ENOMEM;
        free(t->buckets);
        t->buckets = b;
        t->mask = nb - 1;
        for (uint32_t i = 0; i < nb; i++) b[i] = -1;
        for (int32_t x = 0; x < t->high; x++)
            if (t->nodes[x].depth > 0 && t->nodes[t->nodes[x].parent].indexed) table_add(t, x);
    }
    return RKV_OK;
}

/* Room in the eviction heap for every owner after `more` new pages. A
 * candidate owns a page, so owners bound the candidates; the node count does
 * not divide by P into a bound, since pages that share leading tokens share
 * their nodes (P = 16: six pages that differ only in their last token are 21
 * nodes and six candidates). */
static rkv_status reserve_heap(cache_trie *t, int64_t more)
{
    int64_t want = t->owners + more;
    if (want <= t->heap_cap) return RKV_OK;
    return rkv_grow32((void **)&t->heap, &t->heap_cap, want, sizeof *t->heap);
}

static inline int32_t node_new(cache_trie *t, int32_t parent, int32_t token)
{
    int32_t x;
    if (t->free_head >= 0) {
        x = t->free_head;
        t->free_head = t->nodes[x].next_sib;
    } else {
        x = t->high++;
    }
    tnode *n = &t->nodes[x];
    memset(n, 0, sizeof *n);
    n->token = token;
    n->page = -1;
    n->parent = parent;
    n->first_child = n->next_sib = n->prev_sib = n->hnext = -1;
    n->heap_pos = -1;
    n->time = t->clock;
    if (t->meta) t->meta[x] = (tmeta){.hits = 1, .priority = t->priority};
    n->created = t->seq++;
    t->live++;
    if (parent >= 0) {
        tnode *p = &t->nodes[parent];
        n->depth = p->depth + 1;
        n->next_sib = p->first_child;
        if (p->first_child >= 0) t->nodes[p->first_child].prev_sib = x;
        p->first_child = x;
        p->nchildren++;
        if (p->indexed) {
            table_add(t, x);
        } else if (p->nchildren > WIDE) {
            p->indexed = 1;
            for (int32_t y = p->first_child; y >= 0; y = t->nodes[y].next_sib) table_add(t, y);
        }
        t->num_tokens++;
    }
    return x;
}

static void node_delete(cache_trie *t, int32_t x)
{
    tnode *n = &t->nodes[x];
    tnode *p = &t->nodes[n->parent];
    if (p->indexed) table_remove(t, x);
    if (n->prev_sib >= 0) t->nodes[n->prev_sib].next_sib = n->next_sib;
    else p->first_child = n->next_sib;
    if (n->next_sib >= 0) t->nodes[n->next_sib].prev_sib = n->prev_sib;
    p->nchildren--;
    n->depth = -1;
    n->next_sib = t->free_head;
    t->free_head = x;
    t->live--;
    t->num_tokens--;
}

/* ---- the eviction heap: min (policy key, created) ------------------------ */

static evict_key node_key(const cache_trie *t, int32_t a)
{
    const tnode *x = &t->nodes[a];
    evict_node v = {.time = x->time, .depth = x->depth - t->base.page_size, .len = t->base.page_size};
    if (t->meta)
        v.hits = t->meta[a].hits, v.priority = t->meta[a].priority,
        v.prev_time = t->meta[a].prev_time;
    return t->pol->key(&v);
}

/* Heap entries carry their node's key, computed when the node changes, so a
 * sift compares entries in the heap array and calls no policy. */
static int heap_less(const theap *a, const theap *b)
{
    if (a->key.k0 != b->key.k0 || a->key.k1 != b->key.k1) return evict_key_less(a->key, b->key);
    return a->created < b->created;
}

static void heap_set(cache_trie *t, int32_t i, theap e)
{
    t->heap[i] = e;
    t->nodes[e.node].heap_pos = i;
}

static void heap_sift(cache_trie *t, int32_t i)
{
    theap x = t->heap[i];
    while (i > 0 && heap_less(&x, &t->heap[(i - 1) / 2])) {
        heap_set(t, i, t->heap[(i - 1) / 2]);
        i = (i - 1) / 2;
    }
    for (;;) {
        int32_t l = 2 * i + 1, m = i;
        const theap *best = &x;
        if (l < t->heap_n && heap_less(&t->heap[l], best)) m = l, best = &t->heap[l];
        if (l + 1 < t->heap_n && heap_less(&t->heap[l + 1], best)) m = l + 1, best = &t->heap[l + 1];
        if (m == i) break;
        heap_set(t, i, *best);
        i = m;
    }
    heap_set(t, i, x);
}

/* x's key changed: re-key its entry and move it. */
static void heap_rekey(cache_trie *t, int32_t x)
{
    int32_t i = t->nodes[x].heap_pos;
    t->heap[i].key = node_key(t, x);
    heap_sift(t, i);
}

static void heap_remove(cache_trie *t, int32_t x)
{
    int32_t i = t->nodes[x].heap_pos;
    t->nodes[x].heap_pos = -1;
    theap last = t->heap[--t->heap_n];
    if (i < t->heap_n) {
        heap_set(t, i, last);
        heap_sift(t, i);
    }
}

static int is_candidate(const tnode *n)
{
    return n->page >= 0 && n->nchildren == 0 && n->ref == 0 && n->parent >= 0;
}

/* Bring x's heap membership and position up to date after any change. */
static inline void refresh(cache_trie *t, int32_t x)
{
    tnode *n = &t->nodes[x];
    int cand = is_candidate(n);
    if (n->heap_pos >= 0 && !cand) heap_remove(t, x);
    else if (n->heap_pos >= 0) heap_sift(t, n->heap_pos); /* keys change only in enter() */
    else if (cand) {
        heap_set(t, t->heap_n++, (theap){node_key(t, x), n->created, x});
        heap_sift(t, t->heap_n - 1);
    }
}

/* The current call enters node x: new time, one more hit, the request's
 * priority if higher; its heap key can only grow. */
static void enter(cache_trie *t, int32_t x)
{
    tnode *n = &t->nodes[x];
    if (t->meta && n->time != t->clock) t->meta[x].prev_time = n->time;
    n->time = t->clock;
    if (t->meta) {
        tmeta *m = &t->meta[x];
        if (m->hits != UINT32_MAX) m->hits++;
        if (t->priority > m->priority) m->priority = t->priority;
    }
    if (n->heap_pos >= 0) heap_rekey(t, x);
}

/* ---- namespaces ---------------------------------------------------------- */

static int32_t root_find(const cache_trie *t, uint64_t ns)
{
    for (int32_t i = 0; i < t->nroots; i++)
        if (t->nodes[t->roots[i]].ns == ns) return t->roots[i];
    return -1;
}

/* A namespace whose last page went is forgotten, so namespaces used once
 * (a salt per request) do not pile up in the root list. */
static void root_delete(cache_trie *t, int32_t x)
{
    for (int32_t i = 0; i < t->nroots; i++)
        if (t->roots[i] == x) t->roots[i] = t->roots[--t->nroots];
    t->nodes[x].depth = -1;
    t->nodes[x].next_sib = t->free_head;
    t->free_head = x;
    t->live--;
}

/* ---- the interface ------------------------------------------------------- */

/* A match's handle is its last owner's index + 1, not a pointer: the node
 * array moves when it grows. */
static void *handle_of(int32_t x) { return (void *)(uintptr_t)(x + 1); }

/* The live owner a handle names, or -1 (a stale handle is a caller bug). */
static int32_t node_of(const cache_trie *t, const cache_seq *m)
{
    uintptr_t h = (uintptr_t)m->handle;
    if (h == 0 || h > (uintptr_t)t->high) return -1;
    int32_t x = (int32_t)(h - 1);
    const tnode *n = &t->nodes[x];
    if (n->depth <= 0 || n->page < 0 || n->depth != m->len) return -1;
    return x;
}

static rkv_status trie_match(cache *c, cache_seq *out, const int32_t *tokens, int32_t n)
{
    cache_trie *t = (cache_trie *)c;
    const uint64_t ns = out->ns;
    t->priority = out->priority;
    const int32_t P = c->page_size;
    if (n < 0 || (n > 0 && !tokens)) return RKV_EINVAL;
    t->clock++;
    c->stats.match_calls++;
    int32_t last = -1, x = root_find(t, ns);
    for (int32_t d = 0; x >= 0 && d < n; d++) {
        int32_t y = child_find(t, x, tokens[d]);
        if (y < 0) break;
        x = y;
        enter(t, x);
        if ((d + 1) % P == 0) last = x;
    }
    int32_t np = last >= 0 ? t->nodes[last].depth / P : 0;
    rkv_status st = cache_seq_reserve(out, np);
    if (st != RKV_OK) return st;
    for (int32_t y = last, i = np; i > 0; y = t->nodes[y].parent)
        if (t->nodes[y].page >= 0) out->pages[--i] = t->nodes[y].page;
    out->num_pages = np;
    out->len = np * P;
    out->handle = last >= 0 ? handle_of(last) : NULL;
    c->stats.matched_tokens += (uint64_t)out->len;
    return RKV_OK;
}

static rkv_status trie_insert(cache *c, const cache_seq *s, const int32_t *tokens, int32_t n,
                              const int32_t *pages, int32_t *prefix_len)
{
    cache_trie *t = (cache_trie *)c;
    const uint64_t ns = s->ns;
    t->priority = s->priority;
    const int32_t P = c->page_size;
    if (n < 0 || (n >= P && (!tokens || !pages)) || !prefix_len) return RKV_EINVAL;
    int32_t m = n / P * P;
    t->clock++;
    c->stats.insert_calls++;
    /* 1: walk what is there, stamping the nodes entered. */
    int32_t x = root_find(t, ns), d = 0;
    for (; x >= 0 && d < m; d++) {
        int32_t y = child_find(t, x, tokens[d]);
        if (y < 0) break;
        x = y;
        enter(t, x);
    }
    int32_t k = d / P; /* whole pages already cached: nodes at depth jP own pages */
    *prefix_len = k * P;
    if (d == m) return RKV_OK;
    /* 2: room for the new nodes (and a root), then the pages, before any change. */
    rkv_status st = reserve_nodes(t, (int64_t)(m - d) + (x < 0));
    if (st == RKV_OK) st = reserve_heap(t, m / P - k);
    if (st != RKV_OK) return st;
    if (x < 0 && (st = rkv_grow32((void **)&t->roots, &t->roots_cap, (int64_t)t->nroots + 1,
                                  sizeof *t->roots)))
        return st;
    st = page_pool_adopt(c->pool, pages + k, m / P - k);
    if (st != RKV_OK) return st;
    if (x < 0) {
        x = node_new(t, -1, 0);
        t->nodes[x].ns = ns;
        t->roots[t->nroots++] = x;
    }
    /* 3: one node per new token; the last token of each page owns it. */
    int32_t top = x;
    for (; d < m; d++) {
        x = node_new(t, x, tokens[d]);
        if ((d + 1) % P == 0) {
            t->nodes[x].page = pages[(d + 1) / P - 1];
            t->owners++;
        }
    }
    refresh(t, top); /* it has a child now */
    refresh(t, x);   /* the new leaf */
    c->stats.inserted_tokens += (uint64_t)(m - k * P);
    return RKV_OK;
}

/* Walk from the handle to its root; up = +1 locks, -1 unlocks. Checked first,
 * so a bad handle or an unlock without a lock changes nothing. */
static rkv_status lock_path(cache_trie *t, const cache_seq *m, int up)
{
    if (m->len == 0 && !m->handle) return RKV_OK;
    int32_t h = node_of(t, m);
    if (h < 0) return RKV_EINVAL;
    if (up < 0)
        for (int32_t x = h; t->nodes[x].parent >= 0; x = t->nodes[x].parent)
            if (t->nodes[x].ref <= 0) return RKV_EINVAL;
    for (int32_t x = h; t->nodes[x].parent >= 0; x = t->nodes[x].parent) {
        tnode *n = &t->nodes[x];
        int was = n->ref > 0;
        n->ref += up;
        if (n->page >= 0 && was != (n->ref > 0)) t->locked_owners += up;
        refresh(t, x);
    }
    return RKV_OK;
}

static rkv_status trie_lock(cache *c, const cache_seq *m)
{
    return lock_path((cache_trie *)c, m, +1);
}

static rkv_status trie_unlock(cache *c, const cache_seq *m)
{
    return lock_path((cache_trie *)c, m, -1);
}

static int64_t trie_evict(cache *c, int64_t n_tokens)
{
    cache_trie *t = (cache_trie *)c;
    int64_t freed = 0;
    c->stats.evict_calls++;
    while (freed < n_tokens && t->heap_n > 0) {
        int32_t x = t->heap[0].node;
        heap_remove(t, x);
        page_pool_free(c->pool, &t->nodes[x].page, 1); /* CACHED: cannot fail */
        t->owners--;
        freed += c->page_size;
        /* Remove the leaf and the ownerless nodes of its page above it. */
        int32_t p = t->nodes[x].parent;
        node_delete(t, x);
        while (t->nodes[p].parent >= 0 && t->nodes[p].page < 0 && t->nodes[p].nchildren == 0) {
            int32_t q = t->nodes[p].parent;
            node_delete(t, p);
            p = q;
        }
        if (t->nodes[p].parent < 0 && t->nodes[p].nchildren == 0) root_delete(t, p);
        else refresh(t, p);
    }
    c->stats.evicted_tokens += (uint64_t)freed;
    return freed;
}

static void trie_sizes(const cache *c, cache_sizes *out)
{
    const cache_trie *t = (const cache_trie *)c;
    out->evictable_tokens = (t->owners - t->locked_owners) * c->page_size;
    out->protected_tokens = t->locked_owners * c->page_size;
    out->pinned_tokens = 0;
    out->num_nodes = t->num_tokens;
}

#define FAIL(...)                                                   \
    do {                                                            \
        if (err) snprintf(err, errlen, "cache_trie: " __VA_ARGS__); \
        free(nchild);                                               \
        return RKV_ECORRUPT;                                        \
    } while (0)

static rkv_status trie_check(const cache *c, char *err, size_t errlen)
{
    const cache_trie *t = (const cache_trie *)c;
    const page_pool *pool = c->pool;
    const int32_t P = c->page_size;
    int32_t *nchild = NULL;
    rkv_status st = page_pool_check(pool, err, errlen);
    if (st != RKV_OK) return st;
    nchild = calloc((size_t)(t->high ? t->high : 1), sizeof *nchild);
    if (!nchild) return RKV_ENOMEM;
    int64_t live = 0, tokens = 0, owners = 0, locked = 0, cands = 0;
    for (int32_t x = 0; x < t->high; x++) {
        const tnode *n = &t->nodes[x];
        if (n->depth < 0) continue;
        live++;
        if (n->ref < 0) FAIL("node %d: ref %d", x, n->ref);
        if (n->parent < 0) {
            int found = 0;
            for (int32_t i = 0; i < t->nroots; i++) found += t->roots[i] == x;
            if (found != 1 || n->depth != 0 || n->page >= 0) FAIL("node %d: a stray root", x);
            if (n->first_child < 0) FAIL("root %d of namespace %llu is empty", x, (unsigned long long)n->ns);
            continue;
        }
        tokens++;
        const tnode *p = &t->nodes[n->parent];
        if (n->parent >= t->high || p->depth < 0) FAIL("node %d: parent %d not live", x, n->parent);
        if (n->depth != p->depth + 1) FAIL("node %d: depth %d under depth %d", x, n->depth, p->depth);
        nchild[n->parent]++;
        if (child_find(t, n->parent, n->token) != x) FAIL("node %d not found by its token", x);
        if (p->indexed) {
            int32_t y = t->buckets[child_bucket(t, n->parent, n->token)];
            while (y >= 0 && y != x) y = t->nodes[y].hnext;
            if (y != x) FAIL("node %d missing from the child table", x);
        }
        /* Owners are exactly the nodes at page ends; leaves are owners. */
        if ((n->page >= 0) != (n->depth % P == 0))
            FAIL("node %d at depth %d: page %d", x, n->depth, n->page);
        if (n->page >= 0) {
            owners++;
            if (n->page >= pool->num_pages || page_pool_state(pool, n->page) != PAGE_CACHED)
                FAIL("node %d: page %d is not a cached page", x, n->page);
            if (n->ref > 0) locked++;
        }
        if (p->parent >= 0 && p->ref < n->ref) FAIL("node %d: ref %d above parent's %d", x, n->ref, p->ref);
        if (is_candidate(n) != (n->heap_pos >= 0)) FAIL("node %d: candidate %d, heap slot %d", x, is_candidate(n), n->heap_pos);
        if (n->heap_pos >= 0) {
            cands++;
            if (n->heap_pos >= t->heap_n || t->heap[n->heap_pos].node != x) FAIL("node %d: heap slot %d", x, n->heap_pos);
            const theap *e = &t->heap[n->heap_pos];
            evict_key k = node_key(t, x);
            if (e->key.k0 != k.k0 || e->key.k1 != k.k1 || e->created != n->created)
                FAIL("node %d: stale heap key", x);
            if (n->heap_pos > 0 && heap_less(e, &t->heap[(n->heap_pos - 1) / 2])) FAIL("node %d: heap order", x);
        }
    }
    for (int32_t x = 0; x < t->high; x++) {
        const tnode *n = &t->nodes[x];
        if (n->depth < 0) continue;
        if (nchild[x] != n->nchildren) FAIL("node %d: %d children, counted %d", x, n->nchildren, nchild[x]);
        int32_t k = 0;
        for (int32_t y = n->first_child, prev = -1; y >= 0; prev = y, y = t->nodes[y].next_sib) {
            if (t->nodes[y].parent != x || t->nodes[y].prev_sib != prev || ++k > nchild[x])
                FAIL("node %d: sibling list broken at %d", x, y);
        }
        if (k != nchild[x]) FAIL("node %d: sibling list holds %d of %d children", x, k, nchild[x]);
        if (n->nchildren == 0 && n->parent >= 0 && n->page < 0) FAIL("node %d: a leaf without a page", x);
    }
    if (t->heap_n > t->heap_cap || t->owners > t->heap_cap)
        FAIL("heap holds %d of %d slots for %lld owners", t->heap_n, t->heap_cap, (long long)t->owners);
    if (live != t->live || tokens != t->num_tokens || owners != t->owners ||
        locked != t->locked_owners || cands != t->heap_n)
        FAIL("counts: live %lld/%d tokens %lld/%lld owners %lld/%lld locked %lld/%lld heap %lld/%d",
             (long long)live, t->live, (long long)tokens, (long long)t->num_tokens,
             (long long)owners, (long long)t->owners, (long long)locked,
             (long long)t->locked_owners, (long long)cands, t->heap_n);
    if (pool->num_cached != owners)
        FAIL("pool has %d cached pages, evictable + protected = %lld", pool->num_cached,
             (long long)owners);
    free(nchild);
    return RKV_OK;
}

#undef FAIL

static void dump_text(const cache_trie *t, FILE *f, int32_t x)
{
    const tnode *n = &t->nodes[x];
    if (n->parent < 0) fprintf(f, "ns %llu\n", (unsigned long long)n->ns);
    else if (n->page >= 0)
        fprintf(f, "%*s%d page %d ref %d t %llu\n", 2 * n->depth, "", n->token, n->page, n->ref,
                (unsigned long long)n->time);
    else
        fprintf(f, "%*s%d ref %d t %llu\n", 2 * n->depth, "", n->token, n->ref,
                (unsigned long long)n->time);
    for (int32_t y = n->first_child; y >= 0; y = t->nodes[y].next_sib) dump_text(t, f, y);
}

static void trie_dump(const cache *c, FILE *f, cache_dump_format fmt)
{
    const cache_trie *t = (const cache_trie *)c;
    if (fmt == CACHE_DUMP_TEXT) {
        fprintf(f, "trie (page %d): %lld token nodes, %lld pages, %lld locked, clock %llu\n",
                c->page_size, (long long)t->num_tokens, (long long)t->owners,
                (long long)t->locked_owners, (unsigned long long)t->clock);
        for (int32_t i = 0; i < t->nroots; i++) dump_text(t, f, t->roots[i]);
        return;
    }
    if (fmt == CACHE_DUMP_DOT) {
        fprintf(f, "digraph trie {\n  node [shape=box, fontname=\"monospace\"];\n");
        for (int32_t x = 0; x < t->high; x++) {
            const tnode *n = &t->nodes[x];
            if (n->depth < 0) continue;
            if (n->parent < 0) {
                fprintf(f, "  n%d [label=\"ns %llu\", shape=ellipse];\n", x,
                        (unsigned long long)n->ns);
                continue;
            }
            fprintf(f, "  n%d [label=\"%d", x, n->token);
            if (n->page >= 0) fprintf(f, "\\np%d", n->page);
            fprintf(f, "\"%s];\n  n%d -> n%d;\n", n->ref ? ", style=filled, fillcolor=lightgrey" : "",
                    n->parent, x);
        }
        fprintf(f, "}\n");
        return;
    }
    fprintf(f, "{\"kind\":\"trie\",\"page_size\":%d,\"clock\":%llu,\"nodes\":[", c->page_size,
            (unsigned long long)t->clock);
    int first = 1;
    for (int32_t x = 0; x < t->high; x++) {
        const tnode *n = &t->nodes[x];
        if (n->depth < 0) continue;
        if (n->parent < 0)
            fprintf(f, "%s{\"id\":%d,\"parent\":-1,\"ns\":%llu,\"tokens\":[]}", first ? "" : ",", x,
                    (unsigned long long)n->ns);
        else
            fprintf(f, "%s{\"id\":%d,\"parent\":%d,\"tokens\":[%d],\"page\":%d,\"ref\":%d,"
                       "\"time\":%llu,\"created\":%llu}",
                    first ? "" : ",", x, n->parent, n->token, n->page, n->ref,
                    (unsigned long long)n->time, (unsigned long long)n->created);
        first = 0;
    }
    fprintf(f, "]}\n");
}

static void trie_destroy(cache *c)
{
    cache_trie *t = (cache_trie *)c;
    if (!t) return;
    /* Cached pages go back to the pool, which outlives the cache. */
    for (int32_t x = 0; x < t->high; x++)
        if (t->nodes[x].depth > 0 && t->nodes[x].page >= 0)
            page_pool_free(c->pool, &t->nodes[x].page, 1);
    free(t->nodes);
    free(t->buckets);
    free(t->heap);
    free(t->meta);
    free(t->roots);
    free(t);
}

static const cache_ops trie_ops = {
    .name = "trie",
    .match = trie_match,
    .insert = trie_insert,
    .lock = trie_lock,
    .unlock = trie_unlock,
    .evict = trie_evict,
    .sizes = trie_sizes,
    .check = trie_check,
    .dump = trie_dump,
    .destroy = trie_destroy,
};

rkv_status cache_trie_create(const cache_config *cfg, page_pool *pool, cache **out, char *err,
                             size_t errlen)
{
    *out = NULL;
    if (!pool || pool->page_size < 1) {
        if (err) snprintf(err, errlen, "cache_trie: no page pool");
        return RKV_EINVAL;
    }
    const evict_policy *pol = evict_policy_lookup(cfg ? cfg->policy : NULL, "cache_trie", err, errlen);
    if (!pol) return RKV_EINVAL;
    cache_trie *t = calloc(1, sizeof *t);
    if (!t) return RKV_ENOMEM;
    t->pol = pol;
    t->base.ops = &trie_ops;
    t->base.pool = pool;
    t->base.page_size = pool->page_size;
    t->free_head = -1;
    t->mask = 63;
    t->buckets = malloc(sizeof *t->buckets * 64);
    if (t->buckets)
        for (int i = 0; i < 64; i++) t->buckets[i] = -1;
    if (!t->buckets || reserve_nodes(t, 64) != RKV_OK) {
        trie_destroy(&t->base);
        return RKV_ENOMEM;
    }
    *out = &t->base;
    return RKV_OK;
}
