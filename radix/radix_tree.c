/* radix_tree.c - see radix_tree.h.
 *
 * Storage, chosen to keep a cached token under 8 bytes of host memory at P = 1
 * (4 for the token, a share of its node's page runs) plus a share of one
 * small node:
 *
 *   chunks[]  --> [rt_node x 1024][rt_node x 1024] ...   node "slot" s is
 *                  chunk s >> 10, entry s & 1023; int32 slots, not pointers
 *
 *   rt_node.edge --> [ t0 t1 ... t(len-1) | page runs ]
 *                      edge tokens          (one array; see "page runs")
 *
 *   children, by number (rt_node.kind):
 *     0    none
 *     1    kids.one = the child's slot, kids.one_key its key (as in a table)
 *     >=2  kids.tab = a table of { key, child } entries, key = first token
 *          (P = 1) or a hash of the first page; tab[0] = {capacity, count}:
 *            capacity 2 .. 8   searched linearly, grown one entry at a time
 *                              (most inner nodes have 2-7 children: a hash
 *                              would waste room; 8 entries are one cache line)
 *            capacity >= 16    open addressing, linear probing, grown at 3/4
 *                              load, shrunk below 1/8, backward-shift deletion
 *
 *   heap[]  4-ary min-heap of (eviction key, slot) entries, at most one per
 *           node, kept lazily: see "candidate heap" below.
 */
#include "radix_tree.h"

#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "cache.h"
#include "evict_policy.h"
#include "rkv_core.h"

#define RT_CHUNK_BITS 10
#define RT_CHUNK (1 << RT_CHUNK_BITS)
#define RT_ROOT 0

typedef struct rt_slot {
    uint32_t key;
    int32_t child; /* -1: empty */
} rt_slot;

/* 48 bytes. The children union is tagged by `kind`. */
enum { KIDS_NONE = 0, KIDS_ONE = 1, KIDS_TAB = 2 };
#define HITS_MAX ((1u << 29) - 1)

typedef struct rt_node {
    int32_t *edge;  /* (len + len/P) tokens then pages; NULL when len == 0 */
    uint64_t id;    /* clock << 2 | k, see radix_tree.h */
    uint64_t time;
    union {
        rt_slot *tab; /* KIDS_TAB: tab[0] = {capacity, count} */
        struct {
            int32_t one;      /* KIDS_ONE: the child's slot */
            uint32_t one_key; /* and its key (see child tables), so a lookup
                                 at P = 1 that misses never reads the child */
        };
    } kids;
    int32_t len;      /* -1 marks a free slot */
    int32_t parent;   /* free slots chain through parent */
    int32_t lock;
    uint32_t hits : 29;  /* saturates at HITS_MAX */
    uint32_t queued : 1; /* has an entry in the heap (maybe stale) */
    uint32_t kind : 2;   /* KIDS_* */
} rt_node;
_Static_assert(sizeof(rt_node) == 48, "rt_node grew: host bytes per token depend on it");

/* A heap entry: the eviction key of node `slot` when it was queued. */
typedef struct rt_entry {
    uint64_t key;
    uint32_t tie;
    int32_t slot;
} rt_entry;
_Static_assert(sizeof(rt_entry) == 16, "four heap entries per cache line");

/* Per-node state a policy asks for (evict_policy.h `needs`), by slot; kept
 * beside the nodes, and only for such policies, so an rt_node stays 48 bytes
 * and lru's footprint is what it was. */
typedef struct rt_pstate {
    int32_t depth;    /* tokens above the node's first token */
    int32_t priority; /* highest request priority that entered it */
} rt_pstate;
/* The needs rt_pstate serves; hits every node has anyway. */
#define RT_PSTATE_NEEDS (EVICT_NEEDS_DEPTH | EVICT_NEEDS_PRIORITY)

struct radix_tree {
    page_pool *pool;
    int32_t P;
    radix_policy policy;
    const evict_policy *pol;
    uint8_t key_mode;    /* KEY_*: how heap entries get their key, from pol->order */
    rt_pstate *pst;      /* (pst_cap) by slot; NULL when the policy needs none */
    uint64_t *prev;      /* (pst_cap) by slot: the time before a node's last
                            one; NULL unless the policy needs PREV_TIME */
    int32_t pst_cap;
    int32_t priority;    /* of the request the next match / insert is for */
    uint64_t clock;
    rt_node **chunks;
    int32_t num_chunks, cap_chunks;
    int32_t free_head; /* -1: none */
    int32_t num_slots; /* slots ever handed out */
    int64_t num_nodes; /* live nodes with len > 0 */
    int64_t evictable, protect;
    int64_t bytes;
    uint64_t splits, evictions;
    uint64_t heap_steps; /* levels moved by sift-up/down, to show O(log n) */
    rt_entry *heap, *heap_base; /* heap = heap_base + HEAP_PAD */
    int32_t heap_n, heap_cap;
    int64_t num_cands; /* unlocked leaves */
    /* namespaces other than 0, in creation order, with a hash index */
    uint64_t *ns_val;
    int32_t *ns_slot;
    int32_t ns_n, ns_cap;
    int32_t *ns_idx; /* (ns_idx_cap) index into ns_val, -1 empty */
    int32_t ns_idx_cap;
    rt_slot *spare; /* an empty 4-entry child table, see child_reserve() */
    radix_page_run *runs_tmp; /* scratch for split() */
    int32_t runs_tmp_cap;
    int32_t *info_pages; /* scratch: an evicted node's page ids for the callback */
    int32_t info_cap;
    radix_node_fn evict_cb;
    void *evict_ctx;
};

/* ---- small utilities -------------------------------------------------- */

static inline rt_node *N(const radix_tree *t, int32_t s)
{
    return &t->chunks[s >> RT_CHUNK_BITS][s & (RT_CHUNK - 1)];
}

/* ---- page runs ---------------------------------------------------------
 *
 * A node's page ids follow its tokens in the same allocation, as runs of
 * consecutive ids (the pool hands out runs when it can):
 *
 *   [ t0 .. t(len-1) | f ]                     one run: pages f .. f + len/P - 1
 *   [ t0 .. t(len-1) | -r  f1 c1  f2 c2 .. ]   r >= 2 runs of c_i pages from f_i
 *
 * Runs are maximal (a run never continues the one before it), so a node's
 * encoding is unique; at P = 1 a cached token costs its token id plus a share
 * of one word per node instead of a page id of its own. */

static inline int32_t *node_area(const rt_node *x) { return x->edge + x->len; }

static inline int32_t area_nruns(const int32_t *area) { return area[0] >= 0 ? 1 : -area[0]; }

static inline int32_t area_words(int32_t nruns) { return nruns == 1 ? 1 : 1 + 2 * nruns; }

/* Run i of an area of np pages. */
static inline radix_page_run area_run(const int32_t *area, int32_t i, int32_t np)
{
    if (area[0] >= 0) return (radix_page_run){area[0], np};
    return (radix_page_run){area[1 + 2 * i], area[2 + 2 * i]};
}

/* Runs of pages[0..n) when consecutive ids are merged (in 64 bits: the ids
 * are the caller's and not yet checked). */
static int32_t flat_nruns(const int32_t *pages, int32_t n)
{
    int32_t r = n > 0;
    for (int32_t i = 1; i < n; i++) r += (int64_t)pages[i] != (int64_t)pages[i - 1] + 1;
    return r;
}

/* Append run (f, c) to runs[0..*nr), merging with the last one when it
 * continues it. */
static inline void runs_push(radix_page_run *runs, int32_t *nr, int32_t f, int32_t c)
{
    if (*nr > 0 && runs[*nr - 1].first + runs[*nr - 1].count == f) runs[*nr - 1].count += c;
    else runs[(*nr)++] = (radix_page_run){f, c};
}

/* Write the area of runs[0..nr). */
static void area_write(int32_t *area, const radix_page_run *runs, int32_t nr)
{
    if (nr == 1) {
        area[0] = runs[0].first;
        return;
    }
    area[0] = -nr;
    for (int32_t i = 0; i < nr; i++) {
        area[1 + 2 * i] = runs[i].first;
        area[2 + 2 * i] = runs[i].count;
    }
}

/* The area of pages[0..n), which form nr runs (flat_nruns). */
static void area_from_flat(int32_t *area, const int32_t *pages, int32_t n, int32_t nr)
{
    if (nr == 1) {
        area[0] = pages[0];
        return;
    }
    area[0] = -nr;
    int32_t k = 0;
    for (int32_t i = 0; i < n; i++) {
        if (i > 0 && pages[i] == pages[i - 1] + 1) {
            area[2 + 2 * (k - 1)]++;
            continue;
        }
        area[1 + 2 * k] = pages[i];
        area[2 + 2 * k] = 1;
        k++;
    }
}

/* The runs of pages [a, b) of an area of np pages, into runs[] (room for
 * the area's run count); returns how many. */
static int32_t area_slice(const int32_t *area, int32_t np, int32_t a, int32_t b,
                          radix_page_run *runs)
{
    int32_t nr = 0, pos = 0, n = area_nruns(area);
    for (int32_t i = 0; i < n && pos < b; i++) {
        radix_page_run r = area_run(area, i, np);
        int32_t lo = a > pos ? a : pos, hi = b < pos + r.count ? b : pos + r.count;
        if (lo < hi) runs[nr++] = (radix_page_run){r.first + (lo - pos), hi - lo};
        pos += r.count;
    }
    return nr;
}

static inline size_t edge_bytes_nr(int32_t len, int32_t nruns)
{
    return sizeof(int32_t) * (size_t)(len + area_words(nruns));
}

/* Bytes of x's edge allocation (tokens and page runs). */
static inline size_t node_edge_bytes(const rt_node *x)
{
    return x->len > 0 ? edge_bytes_nr(x->len, area_nruns(node_area(x))) : 0;
}

/* Page ids of a run one by one: dst[0..count) = first, first + 1, ... Long
 * runs are a store-bound loop (RKV_WIDE). */
RKV_WIDE static void run_expand_long(int32_t *dst, int32_t first, int32_t count)
{
    for (int32_t j = 0; j < count; j++) dst[j] = first + j;
}

static inline void run_expand(int32_t *dst, int32_t first, int32_t count)
{
    if (count >= 64) {
        run_expand_long(dst, first, count);
        return;
    }
    for (int32_t j = 0; j < count; j++) dst[j] = first + j;
}

/* x's page ids one by one into out (room for len / P). */
static void node_pages_expand(const rt_node *x, int32_t P, int32_t *out)
{
    const int32_t *area = node_area(x);
    int32_t np = x->len / P, n = area_nruns(area), o = 0;
    for (int32_t i = 0; i < n; i++) {
        radix_page_run r = area_run(area, i, np);
        run_expand(out + o, r.first, r.count);
        o += r.count;
    }
}

/* Free x's pages back to the pool, run by run. */
static void node_pages_free(radix_tree *t, const rt_node *x)
{
    const int32_t *area = node_area(x);
    int32_t np = x->len / t->P, n = area_nruns(area);
    for (int32_t i = 0; i < n; i++) {
        radix_page_run r = area_run(area, i, np);
        page_pool_free_run(t->pool, r.first, r.count);
    }
}

int32_t radix_page_runs_expand(const radix_page_run *runs, int32_t nruns, int32_t *pages_out)
{
    int32_t o = 0;
    for (int32_t i = 0; i < nruns; i++) {
        run_expand(pages_out + o, runs[i].first, runs[i].count);
        o += runs[i].count;
    }
    return o;
}

static void *rt_alloc(radix_tree *t, size_t n)
{
    void *p = malloc(n);
    if (p) t->bytes += (int64_t)n;
    return p;
}

static void rt_free(radix_tree *t, void *p, size_t n)
{
    if (!p) return;
    t->bytes -= (int64_t)n;
    free(p);
}


static inline uint32_t mix32(uint32_t x)
{
    x ^= x >> 16;
    x *= 0x7feb352dU;
    x ^= x >> 15;
    x *= 0x846ca68bU;
    x ^= x >> 16;
    return x;
}

/* Child key of a page: the token itself at P = 1, else a hash of the page
 * (equal keys are then confirmed with a compare of the page). */
static inline uint32_t page_key(const int32_t *tok, int32_t P)
{
    if (P == 1) return (uint32_t)tok[0];
    uint64_t h = 0x9e3779b97f4a7c15ULL;
    for (int32_t i = 0; i < P; i++) h = (h ^ (uint32_t)tok[i]) * 0xff51afd7ed558ccdULL;
    return (uint32_t)(h ^ (h >> 32));
}

static inline bool page_eq(const int32_t *a, const int32_t *b, int32_t P)
{
    return P == 1 ? a[0] == b[0] : memcmp(a, b, sizeof(int32_t) * (size_t)P) == 0;
}

/* Common prefix of a[i..n) and b[i..n), from i, four tokens per compare
 * (SSE2 on x86-64, else two per 64-bit word): short edges (most are 12-28
 * tokens) and the last block of a long one. */
static inline int32_t common_prefix_short(const int32_t *a, const int32_t *b, int32_t i, int32_t n)
{
#if defined(__SSE2__)
    for (; i + 4 <= n; i += 4) {
        __m128i x = _mm_loadu_si128((const __m128i *)(const void *)(a + i));
        __m128i y = _mm_loadu_si128((const __m128i *)(const void *)(b + i));
        unsigned ne = ~(unsigned)_mm_movemask_epi8(_mm_cmpeq_epi32(x, y)) & 0xffffu;
        if (ne) return i + __builtin_ctz(ne) / 4;
    }
#elif __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    for (; i + 2 <= n; i += 2) {
        uint64_t x, y;
        memcpy(&x, a + i, sizeof x);
        memcpy(&y, b + i, sizeof y);
        if (x != y) return i + (__builtin_ctzll(x ^ y) >= 32);
    }
#endif
    while (i < n && a[i] == b[i]) i++;
    return i;
}

/* Length of the common prefix of a and b, at most n. Chunks that grow while
 * they match go through memcmp (libc's vector code), so a long cached edge
 * costs a few calls at memory speed; a mismatching chunk is searched again in
 * blocks of CMP_BLOCK, the last block four tokens at a time. */
enum { CMP_BLOCK = 64, CMP_MAX_CHUNK = 8192 };
static inline int32_t common_prefix(const int32_t *a, const int32_t *b, int32_t n)
{
    int32_t i = 0;
    for (int32_t step = CMP_BLOCK; i + step <= n; ) {
        if (memcmp(a + i, b + i, sizeof(int32_t) * (size_t)step)) break;
        i += step;
        if (step < CMP_MAX_CHUNK) step *= 2;
    }
    for (; i + CMP_BLOCK <= n; i += CMP_BLOCK)
        if (memcmp(a + i, b + i, sizeof(int32_t) * CMP_BLOCK)) break;
    return common_prefix_short(a, b, i, n < i + CMP_BLOCK ? n : i + CMP_BLOCK);
}

/* ---- node slots ------------------------------------------------------- */

static bool pstate_reserve(radix_tree *t, int32_t n);

static int32_t slot_alloc(radix_tree *t)
{
    if (t->free_head >= 0) {
        int32_t s = t->free_head;
        t->free_head = N(t, s)->parent;
        return s;
    }
    if (t->num_slots == t->num_chunks * RT_CHUNK) {
        if (t->num_chunks == t->cap_chunks) {
            void *c = t->chunks;
            int32_t nc = t->cap_chunks;
            if (rkv_grow32(&c, &nc, (int64_t)t->num_chunks + 1, sizeof *t->chunks) != RKV_OK)
                return -1;
            t->bytes += (int64_t)(sizeof *t->chunks * (size_t)(nc - t->cap_chunks));
            t->chunks = c;
            t->cap_chunks = nc;
        }
        rt_node *chunk = rt_alloc(t, sizeof(rt_node) * RT_CHUNK);
        if (!chunk) return -1;
        t->chunks[t->num_chunks++] = chunk;
    }
    if (!pstate_reserve(t, t->num_slots + 1)) return -1;
    return t->num_slots++;
}

static void slot_free(radix_tree *t, int32_t s)
{
    rt_node *x = N(t, s);
    memset(x, 0, sizeof *x);
    x->len = -1;
    x->parent = t->free_head;
    t->free_head = s;
}

/* A fresh node over edge (len tokens, allocated by the caller, who keeps
 * it on failure), or -1. */
static int32_t node_wrap(radix_tree *t, int32_t *edge, int32_t len)
{
    int32_t s = slot_alloc(t);
    if (s < 0) return -1;
    rt_node *x = N(t, s);
    memset(x, 0, sizeof *x);
    x->edge = edge;
    x->len = len;
    x->parent = -1;
    return s;
}

/* A fresh node; edge allocated for len tokens and nruns page runs (none for
 * len 0). */
static int32_t node_new(radix_tree *t, int32_t len, int32_t nruns)
{
    int32_t *edge = NULL;
    if (len > 0) {
        edge = rt_alloc(t, edge_bytes_nr(len, nruns));
        if (!edge) return -1;
    }
    int32_t s = node_wrap(t, edge, len);
    if (s < 0 && edge) rt_free(t, edge, edge_bytes_nr(len, nruns));
    return s;
}

static inline bool is_special(const rt_node *x) { return x->len == 0; }

static inline int32_t nkids(const rt_node *x)
{
    return x->kind == KIDS_TAB ? x->kids.tab[0].child : (int32_t)x->kind;
}

static inline bool is_candidate(const rt_node *x)
{
    return !is_special(x) && x->kind == KIDS_NONE && x->lock == 0;
}

/* Child tables (see below): capacity in the header entry. */
static inline uint32_t tab_cap(const rt_slot *tab) { return tab[0].key; }
enum { TAB_LINEAR_MAX = 8 }; /* tables up to this capacity are searched linearly */
static inline bool tab_linear(const rt_slot *tab) { return tab[0].key <= TAB_LINEAR_MAX; }

/* ---- candidate heap ---------------------------------------------------- */

/* A 4-ary min-heap of entries that carry their eviction key inline, so a
 * sift reads and writes only the heap array (the four children of a level sit
 * in one 64-byte line: the array starts 3 entries before a line, see
 * heap_reserve()). Upkeep is lazy:
 *
 *   - touch() only writes the node's time and hits; its entry keeps the old,
 *     smaller key ("stale");
 *   - a node that stops being a candidate (locked, got a child) keeps its
 *     entry too;
 *   - eviction pops the smallest entry and compares it with the node: a
 *     current key on a candidate is evicted; a stale key on a candidate is
 *     replaced by the current one and sifted down; an entry of a node that is
 *     no candidate any more is dropped.
 *
 * Keys only grow while a node lives (time and hits never go back, ids never
 * change), so every candidate's entry is a lower bound of its key and the
 * first current entry popped is the true minimum: the eviction order is
 * exactly the eager one. Each node has at most one entry (rt_node.queued),
 * so the heap never holds more entries than slots. */
enum { HEAP_D = 4, HEAP_PAD = 3 };

/* How a heap entry's key is made, chosen once from the policy's declared
 * field order (evict_policy.order, which the cache suite checks against its
 * key): the orders of lru, lfu and fifo are packed straight from the node's
 * fields, as the tree always did; any other policy's key comes from its key
 * function. */
enum { KEY_ID, KEY_TIME, KEY_HITS_TIME, KEY_POLICY };

static uint8_t key_mode_of(const evict_policy *p)
{
    const uint8_t *o = p->order;
    if (!o) return KEY_POLICY;
    if (o[0] == EVICT_FIELD_END) return KEY_ID;
    if (o[0] == EVICT_FIELD_TIME && o[1] == EVICT_FIELD_END) return KEY_TIME;
    if (o[0] == EVICT_FIELD_HITS && o[1] == EVICT_FIELD_TIME && o[2] == EVICT_FIELD_END)
        return KEY_HITS_TIME;
    return KEY_POLICY;
}

/* The policy's key of node s (evict_policy.h) as an entry: key = k0, tie = k1
 * saturated to 32 bits (exact while k1 < 2^32; priority and cost put the
 * clock there). Kept out of line: only the lazy heap's pushes and pops need
 * it, never touch(). The lazy heap needs keys that never fall while a node
 * lives; the shipped policies' do (time, hits and priority only rise, depth
 * only grows when a split moves a node's first token down, by more than half
 * what its length loses), and radix_tree_check() catches one that does. */
__attribute__((noinline)) static rt_entry policy_entry(const radix_tree *t, const rt_node *x,
                                                       int32_t s)
{
    evict_node v = {.time = x->time, .hits = x->hits, .len = x->len};
    if (t->pst) v.depth = t->pst[s].depth, v.priority = t->pst[s].priority;
    if (t->prev) v.prev_time = t->prev[s];
    evict_key k = t->pol->key(&v);
    return (rt_entry){k.k0, k.k1 > UINT32_MAX ? UINT32_MAX : (uint32_t)k.k1, s};
}

/* The eviction key of a node as (key, tie): entries compare key first, then
 * tie, then (both equal: ids past 2^32, i.e. 2^30 calls) the nodes' ids,
 * which never change. Exact for lru and fifo at any clock; lfu orders by time
 * exactly while the clock is below 2^34.
 *   lru   key = time,                                       tie = id (saturated to 32 bits)
 *   lfu   key = hits << 34 | time (time saturated to 34 bits), tie = id
 *   fifo  key = id,                                         tie = 0
 *   other policy_entry() */
static inline rt_entry entry_key(const radix_tree *t, const rt_node *x, int32_t s)
{
    uint32_t tie = x->id > UINT32_MAX ? UINT32_MAX : (uint32_t)x->id;
    uint64_t time34 = x->time >= (1ull << 34) ? (1ull << 34) - 1 : x->time;
    switch (t->key_mode) {
    case KEY_HITS_TIME: return (rt_entry){(uint64_t)x->hits << 34 | time34, tie, s};
    case KEY_TIME: return (rt_entry){x->time, tie, s};
    case KEY_ID: return (rt_entry){x->id, 0, s};
    default: break;
    }
    return policy_entry(t, x, s);
}

/* Policy state of a node the current call enters or creates: its depth
 * follows from its parent's (entered before it in the same call) and its
 * priority only rises. A no-op unless the policy keeps state. */
static inline void pstate_enter(radix_tree *t, int32_t s)
{
    if (!t->pst) return;
    const rt_node *x = N(t, s);
    rt_pstate *ps = &t->pst[s];
    ps->depth = x->parent >= 0 ? t->pst[x->parent].depth + N(t, x->parent)->len : 0;
    if (t->priority > ps->priority) ps->priority = t->priority;
}

/* Policy state of a node just created in slot s (slots are reused, so it is
 * always set): a copy of node from's (a split prefix inherits its priority),
 * or fresh; then entered. Its parent must be linked. */
static void pstate_new(radix_tree *t, int32_t s, int32_t from)
{
    if (t->pst) t->pst[s] = from >= 0 ? t->pst[from] : (rt_pstate){0, INT32_MIN};
    if (t->prev) t->prev[s] = from >= 0 ? t->prev[from] : 0;
    pstate_enter(t, s);
}

/* Room for the policy state of n slots (nothing unless the policy needs
 * state); slot_alloc() calls it before handing out a new slot. */
static bool pstate_reserve(radix_tree *t, int32_t n)
{
    bool st = t->pol->needs & RT_PSTATE_NEEDS, prev = t->pol->needs & EVICT_NEEDS_PREV_TIME;
    if (!(st || prev) || n <= t->pst_cap) return true;
    /* the arrays the policy uses share pst_cap; a failure leaves it (and
     * every array holding at least that many) as it was */
    void **arr[2];
    size_t elem[2];
    int na = 0;
    if (st) arr[na] = (void **)&t->pst, elem[na++] = sizeof *t->pst;
    if (prev) arr[na] = (void **)&t->prev, elem[na++] = sizeof *t->prev;
    int32_t cap = t->pst_cap;
    if (rkv_grow32_arrays(arr, elem, na, &cap, n) != RKV_OK) return false;
    for (int i = 0; i < na; i++) /* new slots start zero */
        memset((char *)*arr[i] + elem[i] * (size_t)t->pst_cap, 0,
               elem[i] * (size_t)(cap - t->pst_cap));
    size_t per = (st ? sizeof *t->pst : 0) + (prev ? sizeof *t->prev : 0);
    t->bytes += (int64_t)(per * (size_t)(cap - t->pst_cap));
    t->pst_cap = cap;
    return true;
}

static inline bool entry_before(const radix_tree *t, const rt_entry *a, const rt_entry *b)
{
    if (a->key != b->key) return a->key < b->key;
    if (a->tie != b->tie) return a->tie < b->tie;
    return N(t, a->slot)->id < N(t, b->slot)->id;
}

static inline bool entry_current(const rt_entry *e, const rt_entry *now)
{
    return e->key == now->key && e->tie == now->tie;
}

static void heap_up(radix_tree *t, int32_t i)
{
    rt_entry *h = t->heap, e = h[i];
    while (i > 0) {
        int32_t p = (i - 1) / HEAP_D;
        if (!entry_before(t, &e, &h[p])) break;
        h[i] = h[p];
        i = p;
        t->heap_steps++;
    }
    h[i] = e;
}

static void heap_down(radix_tree *t, int32_t i)
{
    rt_entry *h = t->heap, e = h[i];
    for (;;) {
        int32_t l = HEAP_D * i + 1, best = -1;
        if (l >= t->heap_n) break;
        int32_t end = l + HEAP_D < t->heap_n ? l + HEAP_D : t->heap_n;
        const rt_entry *be = &e;
        /* the next level's line is one of these four children's: ask for all
         * four while this level is compared (a large heap misses below the
         * top levels) */
        for (int32_t c = l; c < end; c++) __builtin_prefetch(&h[HEAP_D * c + 1]);
        for (int32_t c = l; c < end; c++)
            if (entry_before(t, &h[c], be)) best = c, be = &h[c];
        if (best < 0) break;
        h[i] = h[best];
        i = best;
        t->heap_steps++;
    }
    h[i] = e;
}

/* Room for n entries. Growth by a quarter keeps the slack small (the heap is
 * part of every cached token's host bytes); pushes never fail once reserved. */
static bool heap_reserve(radix_tree *t, int32_t n)
{
    if (n <= t->heap_cap) return true;
    int32_t nc = t->heap_cap ? t->heap_cap : 64;
    while (nc < n) nc += nc / 4;
    size_t bytes = sizeof(rt_entry) * (size_t)(nc + HEAP_PAD);
    /* 64-byte aligned base + HEAP_PAD entries: children 4i+1..4i+4 of entry i
     * land at 4(i+1)..4(i+1)+3 from the base, one line. */
    rt_entry *base = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
    if (!base) return false;
    if (t->heap_n) memcpy(base + HEAP_PAD, t->heap, sizeof(rt_entry) * (size_t)t->heap_n);
    free(t->heap_base);
    t->bytes += (int64_t)(sizeof(rt_entry) * (size_t)(nc - t->heap_cap));
    t->heap_base = base;
    t->heap = base + HEAP_PAD;
    t->heap_cap = nc;
    return true;
}

static void heap_push(radix_tree *t, int32_t s)
{
    rt_node *x = N(t, s);
    x->queued = 1;
    t->heap[t->heap_n++] = entry_key(t, x, s);
    heap_up(t, t->heap_n - 1);
}

/* A node became a candidate: give it an entry unless it still has one (that
 * one is fixed when it reaches the top). */
static void cand_enter(radix_tree *t, int32_t s)
{
    t->num_cands++;
    if (!N(t, s)->queued) heap_push(t, s);
}

/* ---- eviction pipeline ---------------------------------------------------
 *
 * Evicting a leaf reads a chain of lines, each found through the one before:
 *
 *   heap entry -> node -> edge (tokens, then page runs) -> parent's node ->
 *   parent's child-table slot (found by the leaf's key, its first page) and
 *   the pool's lines of its runs
 *
 * Taken one victim at a time, a large tree pays that chain in serial misses.
 * The next victims are already known: h[0] after a pop is the next one, and
 * the one after it is, nearly always, the smallest of h[1..4] (all four in one
 * heap line). So every pop advances three stages by one victim each:
 *
 *   stage 1  nodes of h[1..4]                      (two and more pops ahead)
 *   stage 2  the smallest of h[1..4]: its edge     (its node was asked for by
 *            lines, its parent's node               stage 1 one pop earlier)
 *   stage 3  h[0]: its parent's child-table slot   (its edge and parent were
 *            and the pool lines of its first run    asked for by stage 2)
 *
 * and a victim's lines have been in flight for two pops when it is evicted.
 * These are only hints: a wrong guess (a stale entry, a parent that joins the
 * candidates) costs a line fetched for nothing, never a different result.
 * Every slot in the heap is a live node with an edge (len > 0), so the reads
 * are always in bounds. */

/* GCC (12, -O3) dropped the call to a plain static evict_ahead() whole, its
 * prefetches with it (a function that only reads and prefetches looks free of
 * effects); forced inline, they stay where they are issued (the release
 * object has them: objdump -d shows the prefetcht0 in radix_tree_evict). */
#if defined(__GNUC__)
#define RT_AHEAD_INLINE static inline __attribute__((always_inline))
#else
#define RT_AHEAD_INLINE static inline
#endif

/* Stage 2 for node s: its edge's first line and its page runs' line, and its
 * parent's node. */
RT_AHEAD_INLINE void evict_ahead_edge(const radix_tree *t, int32_t s)
{
    const rt_node *x = N(t, s);
    __builtin_prefetch(x->edge);
    __builtin_prefetch(x->edge + x->len);
    __builtin_prefetch(N(t, x->parent));
}

/* Stage 3 for node s: the line of the parent's child table that holds s (the
 * table's header too; a linear table is its own slot) and the pool's lines
 * for freeing its first run. */
RT_AHEAD_INLINE void evict_ahead_slot(const radix_tree *t, int32_t s)
{
    const rt_node *x = N(t, s), *p = N(t, x->parent);
    if (p->kind == KIDS_TAB) {
        const rt_slot *tab = p->kids.tab;
        uint32_t cap = tab_cap(tab);
        if (tab_linear(tab)) __builtin_prefetch(tab + 8, 1);
        else __builtin_prefetch(tab + 1 + (mix32(page_key(x->edge, t->P)) & (cap - 1)), 1);
    }
    const int32_t *area = node_area(x);
    radix_page_run r = area_run(area, 0, x->len / t->P);
    page_pool_prefetch_run(t->pool, r.first, r.count);
}

RT_AHEAD_INLINE void evict_ahead(const radix_tree *t)
{
    const rt_entry *h = t->heap;
    int32_t n = t->heap_n;
    if (n == 0) return;
    int32_t end = n < 1 + HEAP_D ? n : 1 + HEAP_D, best = -1;
    for (int32_t c = 1; c < end; c++) {
        __builtin_prefetch(N(t, h[c].slot));
        if (best < 0 || entry_before(t, &h[c], &h[best])) best = c;
    }
    if (best > 0) evict_ahead_edge(t, h[best].slot);
    evict_ahead_slot(t, h[0].slot);
}

/* Pop entries until the top is a candidate with its current key; returns its
 * slot (its entry removed) or -1 when no candidate is left. */
static int32_t heap_pop_min(radix_tree *t)
{
    while (t->heap_n > 0) {
        rt_entry *top = &t->heap[0];
        int32_t s = top->slot;
        rt_node *x = N(t, s);
        if (is_candidate(x)) {
            rt_entry now = entry_key(t, x, s);
            if (!entry_current(top, &now)) { /* stale: re-sort with the key it has now */
                *top = now;
                heap_down(t, 0);
                continue;
            }
        }
        x->queued = 0;
        t->heap[0] = t->heap[--t->heap_n];
        if (t->heap_n > 0) {
            heap_down(t, 0);
            evict_ahead(t);
        }
        if (is_candidate(x)) return s;
    }
    return -1;
}

/* The call entering a node: new time, one more hit. Its heap entry, if any,
 * is left stale (see the heap above). */
static inline void touch(radix_tree *t, int32_t s, uint64_t now)
{
    rt_node *x = N(t, s);
    if (t->prev && x->time != now) t->prev[s] = x->time;
    x->time = now;
    if (x->hits != HITS_MAX) x->hits++;
    pstate_enter(t, s);
}

/* ---- child tables ------------------------------------------------------ */

static inline uint32_t child_key(const radix_tree *t, int32_t c)
{
    return page_key(N(t, c)->edge, t->P);
}

/* Child of x whose edge starts with the page tok[0..P), or -1. */
static int32_t child_find(const radix_tree *t, const rt_node *x, const int32_t *tok)
{
    if (x->kind == KIDS_NONE) return -1;
    if (x->kind == KIDS_ONE) {
        if (t->P == 1) return x->kids.one_key == (uint32_t)tok[0] ? x->kids.one : -1;
        return page_eq(N(t, x->kids.one)->edge, tok, t->P) ? x->kids.one : -1;
    }
    const rt_slot *e = x->kids.tab + 1;
    uint32_t cap = tab_cap(x->kids.tab), key = page_key(tok, t->P);
    if (cap <= TAB_LINEAR_MAX) {
        for (uint32_t i = 0; i < cap; i++)
            if (e[i].child >= 0 && e[i].key == key &&
                (t->P == 1 || page_eq(N(t, e[i].child)->edge, tok, t->P)))
                return e[i].child;
        return -1;
    }
    uint32_t mask = cap - 1;
    for (uint32_t i = mix32(key) & mask;; i = (i + 1) & mask) {
        if (e[i].child < 0) return -1;
        if (e[i].key == key && (t->P == 1 || page_eq(N(t, e[i].child)->edge, tok, t->P)))
            return e[i].child;
    }
}

/* Put an entry into a table with room for it (the count is the caller's). */
static void tab_put(rt_slot *tab, uint32_t key, int32_t child)
{
    rt_slot *e = tab + 1;
    uint32_t cap = tab_cap(tab), mask = cap - 1;
    uint32_t i = 0;
    if (tab_linear(tab)) { /* any capacity: the first hole */
        while (e[i].child >= 0) i++;
    } else {
        for (i = mix32(key) & mask; e[i].child >= 0; i = (i + 1) & mask) {}
    }
    e[i].key = key;
    e[i].child = child;
}

static rt_slot *tab_new(radix_tree *t, uint32_t cap)
{
    rt_slot *tab = rt_alloc(t, sizeof(rt_slot) * (cap + 1));
    if (!tab) return NULL;
    tab[0].key = cap;
    tab[0].child = 0;
    for (uint32_t i = 1; i <= cap; i++) tab[i].child = -1;
    return tab;
}

static void tab_free(radix_tree *t, rt_slot *tab)
{
    rt_free(t, tab, sizeof(rt_slot) * (tab_cap(tab) + 1));
}

/* Move a table's entries into a new one of capacity cap. */
static bool tab_resize(radix_tree *t, rt_node *x, uint32_t cap)
{
    rt_slot *old = x->kids.tab, *tab = tab_new(t, cap);
    if (!tab) return false;
    for (uint32_t i = 1; i <= tab_cap(old); i++)
        if (old[i].child >= 0) tab_put(tab, old[i].key, old[i].child);
    tab[0].child = old[0].child;
    tab_free(t, old);
    x->kids.tab = tab;
    return true;
}

/* Make sure adding one child to x cannot fail. Going from one child to two
 * needs a table; it is set aside in t->spare, so that x keeps its one-child
 * form until child_add() and a later failure leaves nothing half-changed. A
 * full table is regrown here (a bigger table is as valid as the old one). */
static bool child_reserve(radix_tree *t, rt_node *x)
{
    if (x->kind == KIDS_NONE) return true;
    if (x->kind == KIDS_ONE) {
        if (!t->spare) t->spare = tab_new(t, 2);
        return t->spare != NULL;
    }
    uint32_t cap = tab_cap(x->kids.tab), n = (uint32_t)nkids(x) + 1;
    if (cap <= TAB_LINEAR_MAX ? n <= cap : n * 4 <= cap * 3) return true;
    /* linear tables grow one entry at a time (a node's children fill them
     * exactly); past TAB_LINEAR_MAX they double as hash tables */
    return tab_resize(t, x, cap < TAB_LINEAR_MAX ? cap + 1 : cap * 2);
}

/* Add child c under x; child_reserve(x) must have succeeded, and x must not
 * be in the heap (it is no leaf afterwards). */
static void child_add(radix_tree *t, rt_node *x, int32_t c)
{
    if (x->kind == KIDS_NONE) {
        x->kids.one = c;
        x->kids.one_key = child_key(t, c);
        x->kind = KIDS_ONE;
    } else if (x->kind == KIDS_ONE) {
        rt_slot *tab = t->spare;
        t->spare = NULL;
        tab_put(tab, child_key(t, x->kids.one), x->kids.one);
        tab_put(tab, child_key(t, c), c);
        tab[0].child = 2;
        x->kids.tab = tab;
        x->kind = KIDS_TAB;
    } else {
        tab_put(x->kids.tab, child_key(t, c), c);
        x->kids.tab[0].child++;
    }
}

/* Index (0-based, after the header) of child c in a table. */
static uint32_t tab_index(const radix_tree *t, const rt_slot *tab, int32_t c)
{
    const rt_slot *e = tab + 1;
    uint32_t mask = tab_cap(tab) - 1, i = 0;
    if (tab_linear(tab)) {
        while (e[i].child != c) i++;
    } else {
        for (i = mix32(child_key(t, c)) & mask; e[i].child != c; i = (i + 1) & mask) {}
    }
    return i;
}

/* Remove child c of x. x becomes a leaf (kind 0, not in the heap yet) when it
 * was its last child. */
static void child_remove(radix_tree *t, rt_node *x, int32_t c)
{
    if (x->kind == KIDS_ONE) {
        x->kind = KIDS_NONE;
        x->kids.one = 0;
        return;
    }
    rt_slot *tab = x->kids.tab, *e = tab + 1;
    uint32_t cap = tab_cap(tab), mask = cap - 1;
    uint32_t i = tab_index(t, tab, c);
    if (!tab_linear(tab)) {
        /* Backward-shift deletion: pull later entries of the probe run into
         * the hole when their home slot does not lie (cyclically) in (i, j]. */
        for (uint32_t j = i;;) {
            j = (j + 1) & mask;
            if (e[j].child < 0) break;
            uint32_t h = mix32(e[j].key) & mask;
            bool stays = (i <= j) ? (i < h && h <= j) : (i < h || h <= j);
            if (!stays) {
                e[i] = e[j];
                i = j;
            }
        }
    }
    e[i].child = -1;
    int32_t n = --tab[0].child;
    if (n == 1) {
        int32_t only = -1;
        uint32_t key = 0;
        for (uint32_t k = 0; k < cap; k++)
            if (e[k].child >= 0) only = e[k].child, key = e[k].key;
        tab_free(t, tab);
        x->kids.one = only;
        x->kids.one_key = key;
        x->kind = KIDS_ONE;
    } else if (cap > 2 * TAB_LINEAR_MAX && (uint32_t)n * 8 < cap) {
        tab_resize(t, x, cap / 2); /* optional: on failure the big table stays */
    }
}

/* Point x's entry for old (same first page) at neu. */
static void child_replace(radix_tree *t, rt_node *x, int32_t old, int32_t neu)
{
    if (x->kind == KIDS_ONE) x->kids.one = neu;
    else x->kids.tab[1 + tab_index(t, x->kids.tab, old)].child = neu;
}

/* ---- namespaces -------------------------------------------------------- */

static inline uint32_t ns_hash(uint64_t ns)
{
    return mix32((uint32_t)ns ^ mix32((uint32_t)(ns >> 32)));
}

/* Slot of namespace ns's node, or -1 (ns 0 is the root). */
static int32_t ns_find(const radix_tree *t, uint64_t ns)
{
    if (ns == 0) return RT_ROOT;
    if (!t->ns_idx_cap) return -1;
    uint32_t mask = (uint32_t)t->ns_idx_cap - 1;
    for (uint32_t i = ns_hash(ns) & mask;; i = (i + 1) & mask) {
        int32_t k = t->ns_idx[i];
        if (k < 0) return -1;
        if (t->ns_val[k] == ns) return t->ns_slot[k];
    }
}

static void ns_index_put(radix_tree *t, int32_t k)
{
    uint32_t mask = (uint32_t)t->ns_idx_cap - 1;
    uint32_t i = ns_hash(t->ns_val[k]) & mask;
    while (t->ns_idx[i] >= 0) i = (i + 1) & mask;
    t->ns_idx[i] = k;
}

static int32_t ns_create(radix_tree *t, uint64_t ns, uint64_t now)
{
    if (t->ns_n == t->ns_cap) {
        int32_t nc = t->ns_cap ? 2 * t->ns_cap : 4;
        uint64_t *v = rt_alloc(t, sizeof *v * (size_t)nc);
        int32_t *s = rt_alloc(t, sizeof *s * (size_t)nc);
        int32_t *idx = rt_alloc(t, sizeof *idx * (size_t)nc * 2);
        if (!v || !s || !idx) {
            rt_free(t, v, sizeof *v * (size_t)nc);
            rt_free(t, s, sizeof *s * (size_t)nc);
            rt_free(t, idx, sizeof *idx * (size_t)nc * 2);
            return -1;
        }
        if (t->ns_n) {
            memcpy(v, t->ns_val, sizeof *v * (size_t)t->ns_n);
            memcpy(s, t->ns_slot, sizeof *s * (size_t)t->ns_n);
        }
        rt_free(t, t->ns_val, sizeof *v * (size_t)t->ns_cap);
        rt_free(t, t->ns_slot, sizeof *s * (size_t)t->ns_cap);
        rt_free(t, t->ns_idx, sizeof *idx * (size_t)t->ns_idx_cap);
        t->ns_val = v;
        t->ns_slot = s;
        t->ns_idx = idx;
        t->ns_cap = nc;
        t->ns_idx_cap = nc * 2;
        for (int32_t i = 0; i < t->ns_idx_cap; i++) t->ns_idx[i] = -1;
        for (int32_t k = 0; k < t->ns_n; k++) ns_index_put(t, k);
    }
    int32_t s = node_new(t, 0, 0);
    if (s < 0) return -1;
    rt_node *x = N(t, s);
    x->id = now << 2 | 0;
    x->time = now;
    x->hits = 1;
    x->parent = RT_ROOT;
    pstate_new(t, s, -1);
    int32_t k = t->ns_n++;
    t->ns_val[k] = ns;
    t->ns_slot[k] = s;
    ns_index_put(t, k);
    return s;
}

/* ---- create / destroy -------------------------------------------------- */

rkv_status radix_policy_parse(const char *name, radix_policy *out)
{
    int i = evict_policy_index(evict_policy_find(name));
    if (i < 0) return RKV_EINVAL;
    *out = (radix_policy)i;
    return RKV_OK;
}

const char *radix_policy_name(radix_policy p)
{
    return (unsigned)p < (unsigned)evict_policy_count() ? evict_policies[p]->name : "?";
}

void radix_tree_set_priority(radix_tree *t, int32_t priority)
{
    t->priority = priority;
}

rkv_status radix_tree_create(page_pool *pool, radix_policy policy, radix_tree **out)
{
    *out = NULL;
    if (!pool || pool->page_size < 1 || (unsigned)policy >= (unsigned)evict_policy_count())
        return RKV_EINVAL;
    radix_tree *t = calloc(1, sizeof *t);
    if (!t) return RKV_ENOMEM;
    t->bytes = sizeof *t;
    t->pool = pool;
    t->P = pool->page_size;
    t->policy = policy;
    t->pol = evict_policies[policy];
    t->key_mode = key_mode_of(t->pol);
    t->free_head = -1;
    if (node_new(t, 0, 0) != RT_ROOT || !heap_reserve(t, 64)) {
        radix_tree_destroy(t);
        return RKV_ENOMEM;
    }
    *out = t;
    return RKV_OK;
}

void radix_tree_destroy(radix_tree *t)
{
    if (!t) return;
    for (int32_t s = 0; s < t->num_slots; s++) {
        rt_node *x = N(t, s);
        if (x->len < 0) continue;
        if (x->len > 0) node_pages_free(t, x);
        free(x->edge);
        if (x->kind == KIDS_TAB) free(x->kids.tab);
    }
    for (int32_t c = 0; c < t->num_chunks; c++) free(t->chunks[c]);
    free(t->chunks);
    free(t->heap_base);
    free(t->pst);
    free(t->prev);
    free(t->ns_val);
    free(t->ns_slot);
    free(t->ns_idx);
    free(t->spare);
    free(t->runs_tmp);
    free(t->info_pages);
    free(t);
}

void radix_tree_set_evict_cb(radix_tree *t, radix_node_fn fn, void *ctx)
{
    t->evict_cb = fn;
    t->evict_ctx = ctx;
}

/* ---- split -------------------------------------------------------------- */

static bool runs_tmp_reserve(radix_tree *t, int32_t n)
{
    if (n <= t->runs_tmp_cap) return true;
    int32_t nc = t->runs_tmp_cap ? t->runs_tmp_cap : 16;
    while (nc < n) nc *= 2;
    radix_page_run *r = rt_alloc(t, sizeof *r * (size_t)nc);
    if (!r) return false;
    rt_free(t, t->runs_tmp, sizeof *r * (size_t)t->runs_tmp_cap);
    t->runs_tmp = r;
    t->runs_tmp_cap = nc;
    return true;
}

/* Split node c after k tokens (0 < k < len, k % P == 0):
 *
 *   parent -> c[ t0 .. t(len-1) ]   becomes   parent -> pre[ t0 .. t(k-1) ] -> c[ tk .. ]
 *
 * 1) allocate pre and the suffix's shorter edge first, so failure changes
 *    nothing; 2) pre takes c's place in the parent's table (same first page);
 * 3) c keeps its slot, id, children, lock and heap position, with its edge cut
 *    to the suffix; pre inherits lock and hits and gets a new id. Sizes and the
 *    candidate set do not change: pre is internal, c stays what it was. */
static int32_t split(radix_tree *t, int32_t cs, int32_t k, uint64_t now)
{
    int32_t P = t->P;
    if (!heap_reserve(t, (int32_t)t->num_nodes + 1)) return -1;
    rt_node *c = N(t, cs);
    int32_t rest = c->len - k, np = c->len / P;
    size_t old_bytes = node_edge_bytes(c);
    /* 1: the runs of each part (a run across the cut goes to both halves) */
    if (!runs_tmp_reserve(t, area_nruns(node_area(c)) + 1)) return -1;
    radix_page_run *tmp = t->runs_tmp;
    int32_t npre = area_slice(node_area(c), np, 0, k / P, tmp);
    int32_t nsuf = area_slice(node_area(c), np, k / P, np, tmp + npre);
    int32_t *suf = rt_alloc(t, edge_bytes_nr(rest, nsuf));
    if (!suf) return -1;
    int32_t ps = node_new(t, k, npre); /* may move nothing: chunks are stable */
    if (ps < 0) {
        rt_free(t, suf, edge_bytes_nr(rest, nsuf));
        return -1;
    }
    c = N(t, cs);
    rt_node *pre = N(t, ps);
    memcpy(pre->edge, c->edge, sizeof(int32_t) * (size_t)k);
    area_write(pre->edge + k, tmp, npre);
    memcpy(suf, c->edge + k, sizeof(int32_t) * (size_t)rest);
    area_write(suf + rest, tmp + npre, nsuf);
    /* 2: hang pre where c was. */
    child_replace(t, N(t, c->parent), cs, ps);
    pre->parent = c->parent;
    pre->id = now << 2 | 1;
    pre->time = c->time;
    pre->hits = c->hits;
    pre->lock = c->lock;
    pstate_new(t, ps, cs);
    pre->kind = KIDS_ONE;
    pre->kids.one = cs;
    pre->kids.one_key = page_key(suf, P);
    /* 3: c becomes the suffix. */
    rt_free(t, c->edge, old_bytes);
    c->edge = suf;
    c->len = rest;
    c->parent = ps;
    t->num_nodes++;
    t->splits++;
    return ps;
}

/* ---- match / insert ---------------------------------------------------- */

/* Where a match puts its page ids: one per page, merged runs, or both. */
typedef struct page_sink {
    int32_t *flat;
    radix_page_run *runs;
    int32_t nflat, nruns;
} page_sink;

static void sink_runs(page_sink *o, const int32_t *area, int32_t np)
{
    int32_t n = area_nruns(area);
    for (int32_t i = 0; i < n; i++) {
        radix_page_run r = area_run(area, i, np);
        if (o->runs) runs_push(o->runs, &o->nruns, r.first, r.count);
        if (o->flat) run_expand(o->flat + o->nflat, r.first, r.count);
        o->nflat += r.count;
    }
}

/* x's pages into o. A node of one run going to runs only (an insert's or a
 * kv_match's walk, nearly every node) is one push, inline: the call and the
 * general loop were ~60 instructions a node, about 1,500 of an insert's
 * ~14,500 on sglang_cache_bench's keys (callgrind). */
static inline void sink_node(page_sink *o, const rt_node *x, int32_t P)
{
    const int32_t *area = node_area(x);
    int32_t np = P == 1 ? x->len : x->len / P;
    if (area[0] >= 0 && o->runs && !o->flat) {
        runs_push(o->runs, &o->nruns, area[0], np);
        o->nflat += np;
        return;
    }
    sink_runs(o, area, np);
}

/* ---- keys: the tree's int32 ids or a caller's int64 array ---------------
 *
 * radix_tree_match_runs64() and radix_tree_insert_take64() walk the caller's
 * own int64 array (numpy's default, SGLang's token arrays),
 * compared against the edges' int32 tokens as it goes. Narrowing the whole
 * key first cost a write and a re-read of every token, also past the point
 * where the match stops; here each token is read once, and only up to the
 * first mismatch. The tree holds only ids in [0, INT32_MAX] (inserts check
 * them), so an id outside that range is a mismatch like any other. */

static inline bool id_in_range(int64_t v) { return (uint64_t)v <= (uint64_t)INT32_MAX; }

/* page_key() of a page given as int64 ids; false when one is out of range
 * (no edge can start with it). */
static inline bool page_key64(const int64_t *tok, int32_t P, uint32_t *key)
{
    if (P == 1) {
        *key = (uint32_t)tok[0];
        return id_in_range(tok[0]);
    }
    uint64_t h = 0x9e3779b97f4a7c15ULL;
    for (int32_t i = 0; i < P; i++) {
        if (!id_in_range(tok[i])) return false;
        h = (h ^ (uint32_t)tok[i]) * 0xff51afd7ed558ccdULL;
    }
    *key = (uint32_t)(h ^ (h >> 32));
    return true;
}

static inline bool page_eq64(const int32_t *edge, const int64_t *tok, int32_t P)
{
    for (int32_t i = 0; i < P; i++)
        if ((int64_t)edge[i] != tok[i]) return false;
    return true;
}

/* child_find() for an int64 page tok[0..P). */
static int32_t child_find64(const radix_tree *t, const rt_node *x, const int64_t *tok)
{
    uint32_t key;
    if (x->kind == KIDS_NONE || !page_key64(tok, t->P, &key)) return -1;
    if (x->kind == KIDS_ONE) {
        if (t->P == 1) return x->kids.one_key == key ? x->kids.one : -1;
        return page_eq64(N(t, x->kids.one)->edge, tok, t->P) ? x->kids.one : -1;
    }
    const rt_slot *e = x->kids.tab + 1;
    uint32_t cap = tab_cap(x->kids.tab);
    if (cap <= TAB_LINEAR_MAX) {
        for (uint32_t i = 0; i < cap; i++)
            if (e[i].child >= 0 && e[i].key == key &&
                (t->P == 1 || page_eq64(N(t, e[i].child)->edge, tok, t->P)))
                return e[i].child;
        return -1;
    }
    uint32_t mask = cap - 1;
    for (uint32_t i = mix32(key) & mask;; i = (i + 1) & mask) {
        if (e[i].child < 0) return -1;
        if (e[i].key == key && (t->P == 1 || page_eq64(N(t, e[i].child)->edge, tok, t->P)))
            return e[i].child;
    }
}

/* Common prefix of edge[0..n) and key[0..n). Blocks of CMP64_BLOCK tokens
 * are compared by OR-ing the differences (diff64: an edge token is >= 0, so
 * its zero extension is its value, and an out-of-range key id differs in its
 * high half); the block that differs is searched token by token. RKV_WIDE: an insert walks
 * the cached part of its key again after the request's match, most of its
 * time (sglang_cache_bench's replay, ~6,000 cached tokens an insert); the
 * AVX2 copy took 0.85 -> 0.78 us for 6,000 tokens out of L2 (from memory,
 * where a caller's key mostly is, both take the same time). A match is
 * mostly this loop too: kv_match in the replay, ~6,100 tokens matched, the
 * key again right away 1.6 -> 1.3 us, the key cold 4.0 -> 3.7 us (medians
 * of 6 passes of 300, interleaved; 2 KB ahead then). */
enum { CMP64_BLOCK = 16, CMP64_AHEAD = 1024 };
/* The OR of the differences of edge[0..w) and key[0..w): 0 when they are equal
 * (an edge token is >= 0, so its zero extension is its value, and an
 * out-of-range key id differs in its high half). w is a constant at every
 * call, so the loop is a fixed count the vectorizer takes: a block of 16 is
 * one 512-bit load of edge ids, two zero extensions, two XORs and an OR
 * reduction. "unroll 1" keeps it a loop until then: -O3 (a release build,
 * and the Python package, which meson-python builds as one) otherwise
 * unrolls it completely first and leaves 16 scalar loads, XORs and ORs a
 * block, and the adapter's match_prefix took 1.16x the time of -O2's
 * (sglang_cache_bench, 2 runs each; vector types written out by hand were
 * as slow at -O2, their zero extension split in halves). */
static inline __attribute__((always_inline)) uint64_t diff64(const int32_t *edge,
                                                             const int64_t *key, int32_t w)
{
    uint64_t d = 0;
#pragma GCC unroll 1
    for (int32_t k = 0; k < w; k++) d |= (uint64_t)key[k] ^ (uint64_t)(uint32_t)edge[k];
    return d;
}
/* A third copy for AVX-512 (x86-64-v4) beside RKV_WIDE's two: a block of 16
 * is then two 512-bit compares where AVX2 takes four 256-bit ones. The
 * replay's insert, whose key and edges are in cache, 0.96x [0.90-0.99] of
 * the AVX2 copy's thread CPU (sglang_replay_methods.py, 10 alternating
 * rounds); its match, reading the key from memory, unchanged (0.99x).
 * GCC's clone names; elsewhere RKV_WIDE's. */
#if defined(__x86_64__) && !defined(__CUDACC__) && defined(__GNUC__) && !defined(__clang__)
#define CMP64_CLONES __attribute__((target_clones("arch=x86-64-v4", "avx2", "default")))
#else
#define CMP64_CLONES RKV_WIDE
#endif
CMP64_CLONES static int32_t common_prefix64(const int32_t *edge, const int64_t *key, int32_t n,
                                            int32_t rest)
{
    int32_t i = 0;
    for (; i + CMP64_BLOCK <= n; i += CMP64_BLOCK) {
        /* The key is the caller's, usually not in cache (a scheduler's
         * request keys are many and long): the block's two lines 8 KB ahead
         * are asked for now, far enough to cover a miss to memory (a
         * quarter of kv_match's time on sglang_cache_bench's keys at 2 KB;
         * 8 KB against 2 KB: 6,000 cold tokens 2.25 -> 1.9 us, the replay's
         * kv_insert about 6 % less). Never past the key's end (rest: what
         * is left of it from key[0]): lines asked for and not read cost
         * bandwidth, 8 KB of it per call where a key ends or differs soon. */
        if (i + CMP64_AHEAD < rest) {
            __builtin_prefetch(key + i + CMP64_AHEAD);
            __builtin_prefetch(key + i + CMP64_AHEAD + 8);
        }
        if (diff64(edge + i, key + i, CMP64_BLOCK)) break;
    }
    /* The tail (i < n, fewer than a block left, or the block that differs)
     * in at most two steps of whole blocks that overlap what came before:
     * the last block of the edge when it has one, else the first and last
     * 8 (or 4) tokens of an edge shorter than a block. A tree of short
     * nodes ends nearly every compare with a tail: sglang_cache_bench's
     * inserts compare 25.6 edges a call, and the token-by-token loop was
     * 1,340 of the compare's 4,870 instructions a call (callgrind; 125 of
     * 4,560 now). The loop below runs only where a difference is known to
     * lie ahead, or for an edge of under 4 tokens. */
    if (i < n && i + CMP64_BLOCK > n) { /* fewer than a block left, all before equal */
        uint64_t d = 1;
        if (n >= CMP64_BLOCK)
            d = diff64(edge + n - CMP64_BLOCK, key + n - CMP64_BLOCK, CMP64_BLOCK);
        else if (n >= 8)
            d = diff64(edge, key, 8) | diff64(edge + n - 8, key + n - 8, 8);
        else if (n >= 4)
            d = diff64(edge, key, 4) | diff64(edge + n - 4, key + n - 4, 4);
        if (!d) return n;
    }
    while (i < n && (int64_t)edge[i] == key[i]) i++;
    return i;
}


/* A key as the walk reads it: the tree's own int32 ids (k32) or a caller's
 * int64 array (k64, the other NULL). One walk serves both; the branch on the
 * width is taken once per node and always the same way within a call. */
typedef struct key_view {
    const int32_t *k32;
    const int64_t *k64;
} key_view;

static inline int32_t key_child(const radix_tree *t, const rt_node *x, key_view k, int32_t p)
{
    return k.k64 ? child_find64(t, x, k.k64 + p) : child_find(t, x, k.k32 + p);
}

/* rest: the key's tokens from p on (lim or more), how far ahead its lines may
 * be asked for. */
static inline int32_t key_common(const int32_t *edge, key_view k, int32_t p, int32_t lim,
                                 int32_t rest)
{
    return k.k64 ? common_prefix64(edge, k.k64 + p, lim, rest) : common_prefix(edge, k.k32 + p, lim);
}

/* The first index in [from, n) holding an id the tree cannot hold, or -1.
 * int32 keys were checked by the cache layer; int64 ones are checked here,
 * with one OR over the ids for the common case of none. */
static int32_t key_bad(key_view k, int32_t from, int32_t n)
{
    if (!k.k64) return -1;
    uint64_t wide = 0;
    for (int32_t i = from; i < n; i++) wide |= (uint64_t)k.k64[i] >> 31;
    if (!wide) return -1;
    for (int32_t i = from; i < n; i++)
        if (!id_in_range(k.k64[i])) return i;
    return -1;
}

/* tok[0..n) narrowed into dst[0..n), each id checked as it is narrowed:
 * the first index holding an id outside [0, INT32_MAX], or -1 (dst is then
 * written up to somewhere past it). One pass over the caller's ids where a
 * check and then a copy read them twice: blocks of NARROW_BLOCK ids are
 * narrowed and their high bits OR-ed without a branch (a fixed inner count,
 * which -O2's cheap vectorizer takes), and only a block holding a bad id is
 * searched one by one: 1,840 ids in 0.26 us (0.20 in the RKV_WIDE copy),
 * where the scalar check and copy took 0.91. */
enum { NARROW_BLOCK = 16 };
RKV_WIDE static int32_t key_narrow(int32_t *restrict dst, const int64_t *restrict tok, int32_t n)
{
    int32_t i = 0;
    for (; i + NARROW_BLOCK <= n; i += NARROW_BLOCK) {
        uint64_t wide = 0;
        for (int32_t k = 0; k < NARROW_BLOCK; k++) {
            wide |= (uint64_t)tok[i + k] >> 31;
            dst[i + k] = (int32_t)tok[i + k];
        }
        if (wide) break;
    }
    for (; i < n; i++) {
        if (!id_in_range(tok[i])) return i;
        dst[i] = (int32_t)tok[i];
    }
    return -1;
}

/* Walk from node at tokens[pos..n), entering and splitting as the contract
 * says. Returns the last node of the matched path (-1 on ENOMEM) and the
 * matched length in *pos; hands each whole node's pages to out when set. */
static int32_t walk(radix_tree *t, int32_t node, key_view key, int32_t n, int32_t *pos,
                    page_sink *out, uint64_t now)
{
    int32_t P = t->P;
    int32_t p = *pos;
    while (p < n) {
        int32_t cs = key_child(t, N(t, node), key, p);
        if (cs < 0) break;
        rt_node *c = N(t, cs);
        int32_t lim = c->len < n - p ? c->len : n - p;
        int32_t k = key_common(c->edge, key, p, lim, n - p);
        if (P > 1) k -= k % P; /* >= P: the first page matched (no division at P = 1) */
        if (k < c->len) {
            int32_t ps = split(t, cs, k, now);
            if (ps < 0) {
                *pos = p;
                return -1;
            }
            touch(t, ps, now);
            touch(t, cs, now);
            if (out) sink_node(out, N(t, ps), P);
            *pos = p + k;
            return ps;
        }
        touch(t, cs, now);
        if (out) sink_node(out, c, P);
        p += k;
        node = cs;
    }
    *pos = p;
    return node;
}

static rkv_status match_into(radix_tree *t, key_view key, int32_t n, uint64_t ns,
                             page_sink *out, int32_t *len, int32_t *node)
{
    *len = 0;
    *node = RT_ROOT;
    if (n < 0 || (n > 0 && !key.k32 && !key.k64)) return RKV_EINVAL;
    n -= n % t->P;
    uint64_t now = ++t->clock;
    touch(t, RT_ROOT, now);
    int32_t start = ns_find(t, ns);
    if (start < 0) return RKV_OK;
    if (start != RT_ROOT) touch(t, start, now);
    /* A caller's int64 key is mostly not in cache when its match starts (a
     * scheduler's request arrays are many and long), and common_prefix64 asks
     * for key lines CMP64_AHEAD tokens ahead of each block it compares, so
     * the first CMP64_AHEAD tokens are never asked for ahead: they are here,
     * before the walk. Like the compare's own look-ahead, bounded by the key,
     * not by the match (8 KB of lines not read when it ends soon).
     * replay_floor --capacity (bench/results/tree-walk-2026-11-28, 5 sets of
     * 6-20 alternating pairs, medians of the per-pair ratios; each set's
     * pairs range below 1 too, the machine was loaded): the match 1.04-1.08x
     * faster with 1 MB of other memory written between calls, 1.09-1.15x
     * without; the adapter's match_prefix 0.86x [0.83-1.05] of its time.
     * What that churn costs this match is reading its key from memory, not
     * the tree's nodes and edges: with the key read just before each match
     * (outside the clock) the churned match is 1.78x faster, no slower than
     * the match alone. So a look-ahead to the next node in walk() (its node,
     * edge and kids table asked for before the current edge's compare), and
     * edge, page-run or kids-table prefetches, measured no gain or a loss:
     * likely as the look-ahead reads the key one edge ahead, a miss of its own. */
    if (key.k64) {
        int32_t head = n < CMP64_AHEAD ? n : CMP64_AHEAD;
        for (int32_t i = 0; i < head; i += 8) __builtin_prefetch(key.k64 + i);
    }
    int32_t pos = 0;
    int32_t end = walk(t, start, key, n, &pos, out, now);
    if (end < 0) return RKV_ENOMEM;
    *len = pos;
    *node = end;
    return RKV_OK;
}

rkv_status radix_tree_match(radix_tree *t, const int32_t *tokens, int32_t n, uint64_t ns,
                            int32_t *pages_out, int32_t *len, int32_t *node)
{
    page_sink out = {pages_out, NULL, 0, 0};
    return match_into(t, (key_view){tokens, NULL}, n, ns, pages_out ? &out : NULL, len, node);
}

/* match_into() with the path's pages as runs (both key widths). */
static rkv_status match_runs_into(radix_tree *t, key_view key, int32_t n, uint64_t ns,
                                  radix_page_run *runs_out, int32_t *num_runs, int32_t *len,
                                  int32_t *node)
{
    page_sink out = {NULL, runs_out, 0, 0};
    rkv_status st = match_into(t, key, n, ns, &out, len, node);
    *num_runs = st == RKV_OK ? out.nruns : 0;
    return st;
}

rkv_status radix_tree_match_runs(radix_tree *t, const int32_t *tokens, int32_t n, uint64_t ns,
                                 radix_page_run *runs_out, int32_t *num_runs, int32_t *len,
                                 int32_t *node)
{
    return match_runs_into(t, (key_view){tokens, NULL}, n, ns, runs_out, num_runs, len, node);
}

rkv_status radix_tree_match_runs64(radix_tree *t, const int64_t *tokens, int32_t n, uint64_t ns,
                                   radix_page_run *runs_out, int32_t *num_runs, int32_t *len,
                                   int32_t *node)
{
    return match_runs_into(t, (key_view){NULL, tokens}, n, ns, runs_out, num_runs, len, node);
}

/* The leaf ls (its edge filled) hangs under at; its len tokens become
 * evictable. */
static void leaf_link(radix_tree *t, int32_t ls, int32_t at, uint64_t now)
{
    rt_node *leaf = N(t, ls);
    leaf->id = now << 2 | 2;
    leaf->time = now;
    leaf->hits = 1;
    leaf->parent = at;
    pstate_new(t, ls, -1);
    if (is_candidate(N(t, at))) t->num_cands--; /* no leaf any more; its entry goes lazily */
    child_add(t, N(t, at), ls);
    t->num_nodes++;
    t->evictable += leaf->len;
    cand_enter(t, ls);
}

/* A new leaf under at for key[pos, n) with the caller's pages[pos / P ..):
 * everything that can fail first (reserves, the node), then the adoption,
 * the only step that checks the caller's pages (RKV_EINVAL, nothing
 * changed), then the link. The key is an int32 one: only the entry points
 * of int32 keys give pages (an int64 key's pages are taken, leaf_take). */
static rkv_status leaf_given(radix_tree *t, key_view key, int32_t pos, int32_t n,
                             const int32_t *pages, int32_t at, uint64_t now, int32_t *node)
{
    int32_t P = t->P, len = n - pos;
    const int32_t *own = pages + pos / P;
    if (!heap_reserve(t, (int32_t)t->num_nodes + 1) || !child_reserve(t, N(t, at)))
        return RKV_ENOMEM;
    int32_t nr = flat_nruns(own, len / P);
    int32_t ls = node_new(t, len, nr);
    if (ls < 0) return RKV_ENOMEM;
    rt_node *leaf = N(t, ls);
    if (page_pool_adopt(t->pool, own, len / P) != RKV_OK) {
        rt_free(t, leaf->edge, edge_bytes_nr(len, nr));
        slot_free(t, ls);
        return RKV_EINVAL;
    }
    memcpy(leaf->edge, key.k32 + pos, sizeof(int32_t) * (size_t)len);
    area_from_flat(leaf->edge + len, own, len / P, nr);
    leaf_link(t, ls, at, now);
    *node = ls;
    return RKV_OK;
}

/* A new leaf under at for key[pos, n) with pages taken from the pool, as
 * runs appended to out's (the first merged into the last one when it
 * continues it).
 *
 * 1) the reserves and the leaf's edge, sized for one run (what the pool
 *    gives whenever one free extent holds the pages);
 * 2) the key's ids narrowed into the edge and checked in the same pass
 *    (an int64 key: RKV_EINVAL with the index in *bad, nothing taken);
 * 3) the pages, taken as runs straight into CACHED (no page list: the
 *    leaf, the caller and the pool all keep runs);
 * 4) an edge of more runs when the pool gave them, and the node's slot,
 *    the pages going back if either fails; 5) the link. */
static rkv_status leaf_take(radix_tree *t, key_view key, int32_t pos, int32_t n, int32_t at,
                            page_sink *out, uint64_t now, int32_t *node, int32_t *bad)
{
    int32_t P = t->P, len = n - pos;
    /* 1 */
    if (!heap_reserve(t, (int32_t)t->num_nodes + 1) || !child_reserve(t, N(t, at)))
        return RKV_ENOMEM;
    size_t bytes = edge_bytes_nr(len, 1);
    int32_t *edge = rt_alloc(t, bytes);
    if (!edge) return RKV_ENOMEM;
    /* 2 */
    if (key.k64) {
        int32_t b = key_narrow(edge, key.k64 + pos, len);
        if (b >= 0) {
            rt_free(t, edge, bytes);
            *bad = pos + b;
            return RKV_EINVAL;
        }
    } else {
        memcpy(edge, key.k32 + pos, sizeof(int32_t) * (size_t)len);
    }
    /* 3 */
    radix_page_run *runs = out->runs + out->nruns;
    int32_t nr = 0;
    if (page_pool_alloc_runs(t->pool, len / P, PAGE_CACHED, runs, &nr) != RKV_OK) {
        rt_free(t, edge, bytes);
        return RKV_ENOSPC;
    }
    /* 4 */
    int32_t ls = -1;
    if (nr > 1) {
        int32_t *wide = rt_alloc(t, edge_bytes_nr(len, nr));
        if (wide) memcpy(wide, edge, sizeof(int32_t) * (size_t)len);
        rt_free(t, edge, bytes);
        edge = wide;
        bytes = edge_bytes_nr(len, nr);
    }
    if (edge) ls = node_wrap(t, edge, len);
    if (ls < 0) {
        for (int32_t i = 0; i < nr; i++) page_pool_free_run(t->pool, runs[i].first, runs[i].count);
        if (edge) rt_free(t, edge, bytes);
        return RKV_ENOMEM;
    }
    /* 5 */
    area_write(edge + len, runs, nr);
    leaf_link(t, ls, at, now);
    if (out->nruns > 0 && runs[-1].first + runs[-1].count == runs[0].first) {
        runs[-1].count += runs[0].count;
        memmove(runs, runs + 1, sizeof *runs * (size_t)(nr - 1));
        nr--;
    }
    out->nruns += nr;
    *node = ls;
    return RKV_OK;
}

/* radix_tree_insert(); out (may be NULL) gets the pages of the part already
 * cached, *node the last node of the inserted path. take (pages NULL): the
 * new leaf's pages come from the pool, and out (not NULL) gets their runs
 * after the cached part's. */
static rkv_status insert_into(radix_tree *t, key_view key, int32_t n, const int32_t *pages,
                              bool take, uint64_t ns, int32_t *prefix_len, page_sink *out,
                              int32_t *node, int32_t *bad)
{
    *prefix_len = 0;
    *node = RT_ROOT;
    *bad = -1;
    if (n < 0 || (n > 0 && ((!key.k32 && !key.k64) || (!pages && !(take && out)))))
        return RKV_EINVAL;
    int32_t P = t->P;
    n -= n % P;
    uint64_t now = ++t->clock;
    touch(t, RT_ROOT, now);
    int32_t start = ns_find(t, ns);
    if (start < 0) {
        if (n == 0) return RKV_OK;
        if ((*bad = key_bad(key, 0, n)) >= 0) return RKV_EINVAL;
        start = ns_create(t, ns, now);
        if (start < 0) return RKV_ENOMEM;
    } else if (start != RT_ROOT) {
        touch(t, start, now);
    }
    int32_t pos = 0;
    int32_t at = walk(t, start, key, n, &pos, out, now);
    if (at < 0) return RKV_ENOMEM;
    *prefix_len = pos;
    *node = at;
    if (pos == n) return RKV_OK;
    /* A new leaf for tokens[pos..n). An int64 key's new ids are checked
     * before any page is taken or adopted (the walk has entered, and may
     * have split, the cached part, as a match would; nothing new is
     * cached). */
    if (take) return leaf_take(t, key, pos, n, at, out, now, node, bad);
    if ((*bad = key_bad(key, pos, n)) >= 0) return RKV_EINVAL;
    return leaf_given(t, key, pos, n, pages, at, now, node);
}

rkv_status radix_tree_insert(radix_tree *t, const int32_t *tokens, int32_t n,
                             const int32_t *pages, uint64_t ns, int32_t *prefix_len)
{
    int32_t node, bad;
    return insert_into(t, (key_view){tokens, NULL}, n, pages, false, ns, prefix_len, NULL, &node,
                       &bad);
}

rkv_status radix_tree_insert_runs(radix_tree *t, const int32_t *tokens, int32_t n,
                                  const int32_t *pages, uint64_t ns, int32_t *prefix_len,
                                  radix_page_run *runs_out, int32_t *num_runs, int32_t *node)
{
    page_sink out = {NULL, runs_out, 0, 0};
    int32_t bad;
    rkv_status st = insert_into(t, (key_view){tokens, NULL}, n, pages, false, ns, prefix_len,
                                &out, node, &bad);
    *num_runs = st == RKV_OK ? out.nruns : 0;
    return st;
}

rkv_status radix_tree_insert_take(radix_tree *t, const int32_t *tokens, int32_t n, uint64_t ns,
                                  int32_t *prefix_len, radix_page_run *runs_out,
                                  int32_t *num_runs, int32_t *node)
{
    page_sink out = {NULL, runs_out, 0, 0};
    int32_t bad;
    rkv_status st = insert_into(t, (key_view){tokens, NULL}, n, NULL, true, ns, prefix_len,
                                runs_out ? &out : NULL, node, &bad);
    *num_runs = st == RKV_OK ? out.nruns : 0;
    return st;
}

rkv_status radix_tree_insert_take64(radix_tree *t, const int64_t *tokens, int32_t n,
                                    uint64_t ns, int32_t *prefix_len, radix_page_run *runs_out,
                                    int32_t *num_runs, int32_t *node, int32_t *bad)
{
    page_sink out = {NULL, runs_out, 0, 0};
    rkv_status st = insert_into(t, (key_view){NULL, tokens}, n, NULL, true, ns, prefix_len,
                                runs_out ? &out : NULL, node, bad);
    *num_runs = st == RKV_OK ? out.nruns : 0;
    return st;
}

/* ---- lock / unlock / evict --------------------------------------------- */

static bool slot_valid(const radix_tree *t, int32_t s)
{
    return s >= 0 && s < t->num_slots && N(t, s)->len >= 0;
}

rkv_status radix_tree_lock(radix_tree *t, int32_t node)
{
    if (!slot_valid(t, node)) return RKV_EINVAL;
    for (int32_t s = node; !is_special(N(t, s)); s = N(t, s)->parent) {
        rt_node *x = N(t, s);
        if (x->lock++ == 0) {
            t->evictable -= x->len;
            t->protect += x->len;
            if (x->kind == KIDS_NONE) t->num_cands--; /* its entry goes lazily */
        }
    }
    return RKV_OK;
}

rkv_status radix_tree_unlock(radix_tree *t, int32_t node)
{
    if (!slot_valid(t, node)) return RKV_EINVAL;
    if (is_special(N(t, node))) return RKV_OK;
    if (N(t, node)->lock <= 0) return RKV_EINVAL;
    for (int32_t s = node; !is_special(N(t, s)); s = N(t, s)->parent) {
        rt_node *x = N(t, s);
        if (--x->lock == 0) {
            t->protect -= x->len;
            t->evictable += x->len;
            if (x->kind == KIDS_NONE) cand_enter(t, s);
        }
    }
    return RKV_OK;
}

/* pages: room for the node's len / P page ids (expanded from its runs), or
 * NULL to leave in->pages NULL. */
static void node_info(const radix_tree *t, int32_t s, uint64_t ns, int32_t *pages,
                      radix_node_info *in)
{
    const rt_node *x = N(t, s);
    in->id = x->id;
    in->slot = s;
    in->parent_slot = x->parent;
    in->parent_id = x->parent >= 0 ? N(t, x->parent)->id : 0;
    in->ns = ns;
    in->len = x->len;
    in->lock = x->lock;
    in->time = x->time;
    in->created = x->id >> 2;
    in->hits = x->hits;
    in->num_children = nkids(x);
    in->tokens = x->edge;
    in->pages = NULL;
    if (x->len > 0 && pages) {
        node_pages_expand(x, t->P, pages);
        in->pages = pages;
    }
}

/* Namespace of a node: that of the namespace node on its path. */
static uint64_t node_ns(const radix_tree *t, int32_t s)
{
    while (s != RT_ROOT && !is_special(N(t, s))) s = N(t, s)->parent;
    if (s == RT_ROOT) return 0;
    for (int32_t k = 0; k < t->ns_n; k++)
        if (t->ns_slot[k] == s) return t->ns_val[k];
    return 0;
}

int64_t radix_tree_evict(radix_tree *t, int64_t n_tokens)
{
    int64_t freed = 0;
    while (freed < n_tokens) {
        int32_t s = heap_pop_min(t);
        if (s < 0) break;
        rt_node *x = N(t, s);
        t->num_cands--;
        if (t->evict_cb) {
            radix_node_info in;
            int32_t np = x->len / t->P;
            if (np > t->info_cap) {
                int32_t *p = rt_alloc(t, sizeof *p * (size_t)np);
                if (p) {
                    rt_free(t, t->info_pages, sizeof *p * (size_t)t->info_cap);
                    t->info_pages = p;
                    t->info_cap = np;
                }
            }
            node_info(t, s, node_ns(t, s), np <= t->info_cap ? t->info_pages : NULL, &in);
            t->evict_cb(t->evict_ctx, &in);
        }
        /* the pool's lines for its runs are asked for first and read after
         * the parent's child table is updated: their misses overlap */
        const int32_t *area = node_area(x);
        int32_t np = x->len / t->P, nr = area_nruns(area);
        for (int32_t i = 0; i < nr; i++) {
            radix_page_run r = area_run(area, i, np);
            page_pool_prefetch_run(t->pool, r.first, r.count);
        }
        int32_t ps = x->parent;
        child_remove(t, N(t, ps), s);
        node_pages_free(t, x);
        freed += x->len;
        t->evictable -= x->len;
        t->num_nodes--;
        t->evictions++;
        rt_free(t, x->edge, node_edge_bytes(x));
        slot_free(t, s);
        if (is_candidate(N(t, ps))) cand_enter(t, ps); /* a childless, unlocked parent */
    }
    return freed;
}

/* ---- queries, visit, check --------------------------------------------- */

void radix_tree_get_sizes(const radix_tree *t, radix_tree_sizes *out)
{
    out->evictable_tokens = t->evictable;
    out->protected_tokens = t->protect;
    out->num_nodes = t->num_nodes;
    out->num_candidates = t->num_cands;
    out->host_bytes = t->bytes;
    out->splits = t->splits;
    out->evictions = t->evictions;
    out->heap_steps = t->heap_steps;
}

uint64_t radix_tree_clock(const radix_tree *t) { return t->clock; }
int32_t radix_tree_slots(const radix_tree *t) { return t->num_slots; }

static int cmp_id(const void *a, const void *b, void *ctx)
{
    const radix_tree *t = ctx;
    uint64_t x = N(t, *(const int32_t *)a)->id, y = N(t, *(const int32_t *)b)->id;
    return (x > y) - (x < y);
}

/* Children of x into out[] (nkids entries), in creation order. */
static void children_sorted(const radix_tree *t, const rt_node *x, int32_t *out)
{
    if (x->kind == KIDS_ONE) {
        out[0] = x->kids.one;
    } else if (x->kind == KIDS_TAB) {
        int32_t k = 0;
        for (uint32_t i = 1; i <= tab_cap(x->kids.tab); i++)
            if (x->kids.tab[i].child >= 0) out[k++] = x->kids.tab[i].child;
        qsort_r(out, (size_t)k, sizeof *out, cmp_id, (void *)t);
    }
}

void radix_tree_visit(const radix_tree *t, radix_node_fn fn, void *ctx)
{
    /* The stack never holds more than the number of live slots. */
    int32_t *stack = malloc(sizeof(int32_t) * (size_t)(t->num_slots + 1));
    uint64_t *nss = malloc(sizeof(uint64_t) * (size_t)(t->num_slots + 1));
    int32_t *kids = malloc(sizeof(int32_t) * (size_t)(t->num_slots + 1));
    int32_t maxp = 1;
    for (int32_t s = 0; s < t->num_slots; s++)
        if (N(t, s)->len / t->P > maxp) maxp = N(t, s)->len / t->P;
    int32_t *pages = malloc(sizeof(int32_t) * (size_t)maxp); /* one node's ids, expanded */
    if (!stack || !nss || !kids || !pages) goto out;
    int32_t sp = 0;
    /* Namespace nodes after namespace 0, in creation order: push reversed. */
    for (int32_t k = t->ns_n - 1; k >= 0; k--) {
        stack[sp] = t->ns_slot[k];
        nss[sp++] = t->ns_val[k];
    }
    stack[sp] = RT_ROOT;
    nss[sp++] = 0;
    while (sp > 0) {
        sp--;
        int32_t s = stack[sp];
        uint64_t ns = nss[sp];
        radix_node_info in;
        node_info(t, s, ns, pages, &in);
        fn(ctx, &in);
        const rt_node *x = N(t, s);
        children_sorted(t, x, kids);
        for (int32_t i = nkids(x) - 1; i >= 0; i--) {
            stack[sp] = kids[i];
            nss[sp++] = ns;
        }
    }
out:
    free(stack);
    free(nss);
    free(kids);
    free(pages);
}

/* Parts of radix_tree_check(); each returns RKV_ECORRUPT with the message
 * in err at the first broken rule. */
#define PART_FAIL(...)                                                      \
    do {                                                                    \
        if (err) snprintf(err, errlen, "radix_tree_check: " __VA_ARGS__);   \
        return RKV_ECORRUPT;                                                \
    } while (0)

/* Node x's page runs (maximal, covering its length) and its pages: in range,
 * CACHED in the pool, owned by no node seen before (pg marks them; *pages
 * counts them). */
static rkv_status check_node_pages(const radix_tree *t, const rt_node *x, uint8_t *pg,
                                   int64_t *pages, char *err, size_t errlen)
{
    unsigned long long id = (unsigned long long)x->id;
    const int32_t *area = node_area(x);
    int32_t nr = area_nruns(area), np = x->len / t->P, sum = 0;
    if (area[0] < 0 && nr < 2) PART_FAIL("node %llu has a run list of %d runs", id, nr);
    for (int32_t i = 0; i < nr; i++) {
        radix_page_run r = area_run(area, i, np), q = i ? area_run(area, i - 1, np) : r;
        if (r.count < 1 || (i > 0 && q.first + q.count == r.first))
            PART_FAIL("node %llu run %d (%d, %d) empty or not maximal", id, i, r.first, r.count);
        sum += r.count;
    }
    if (sum != np) PART_FAIL("node %llu runs cover %d pages, length says %d", id, sum, np);
    for (int32_t i = 0, k = 0, pos = 0; i < np; i++) {
        radix_page_run r = area_run(area, k, np);
        int32_t g = r.first + (i - pos);
        if (i + 1 == pos + r.count) pos += r.count, k++;
        if (g < 0 || g >= t->pool->num_pages)
            PART_FAIL("node %llu holds page id %d out of range", id, g);
        if (pg[g]) PART_FAIL("page %d owned twice (node %llu)", g, id);
        if (page_pool_state(t->pool, g) != PAGE_CACHED)
            PART_FAIL("page %d of node %llu is not CACHED in the pool", g, id);
        pg[g] = 1;
        (*pages)++;
    }
    return RKV_OK;
}

/* Node s's children: live, keyed by their first page, in a table of a
 * fitting capacity, pointing back at s, none empty, their locks summing to at
 * most s's; pushed onto stack[*sp..] (room for cap entries) for the walk. */
static rkv_status check_children(const radix_tree *t, int32_t s, int32_t *stack, int32_t *sp,
                                 int32_t cap_stack, char *err, size_t errlen)
{
    const rt_node *x = N(t, s);
    unsigned long long id = (unsigned long long)x->id;
    int64_t child_locks = 0;
    int32_t count = 0, nk = nkids(x);
    if (x->kind == KIDS_ONE) {
        int32_t c = x->kids.one;
        if (!slot_valid(t, c)) PART_FAIL("node %llu has a dead child slot %d", id, c);
        if (x->kids.one_key != child_key(t, c))
            PART_FAIL("node %llu only child's key %u is not its first page's", id, x->kids.one_key);
        if (*sp >= cap_stack) PART_FAIL("more children than slots (cycle?)");
        stack[(*sp)++] = c;
        count = 1;
    } else if (x->kind == KIDS_TAB) {
        uint32_t cap = tab_cap(x->kids.tab);
        bool fits = cap <= TAB_LINEAR_MAX ? (uint32_t)nk <= cap : (uint32_t)nk * 4 <= cap * 3;
        bool pow2 = (cap & (cap - 1)) == 0;
        if (nk < 2 || cap < 2 || (cap > TAB_LINEAR_MAX && !pow2) || !fits)
            PART_FAIL("node %llu child table capacity %u for %d children", id, cap, nk);
        for (uint32_t i = 1; i <= cap; i++) {
            int32_t c = x->kids.tab[i].child;
            if (c < 0) continue;
            if (!slot_valid(t, c)) PART_FAIL("node %llu has a dead child slot %d", id, c);
            if (x->kids.tab[i].key != child_key(t, c))
                PART_FAIL("node %llu child key %u is not its first page's", id, x->kids.tab[i].key);
            if (*sp >= cap_stack) PART_FAIL("more children than slots (cycle?)");
            stack[(*sp)++] = c;
            count++;
        }
    }
    if (count != nk) PART_FAIL("node %llu counts %d children, table has %d", id, nk, count);
    for (int32_t i = *sp - count; i < *sp; i++) {
        const rt_node *c = N(t, stack[i]);
        if (c->parent != s)
            PART_FAIL("child %llu of node %llu points to parent slot %d",
                      (unsigned long long)c->id, id, c->parent);
        if (is_special(c)) PART_FAIL("empty node %llu under node %llu", (unsigned long long)c->id, id);
        child_locks += c->lock;
    }
    if (!is_special(x) && x->lock < child_locks)
        PART_FAIL("node %llu lock %d below its children's sum %lld", id, x->lock,
                  (long long)child_locks);
    return RKV_OK;
}

/* The heap: one entry per queued node, each a lower bound of its node's key,
 * in heap order. seen: zeroed, one byte per slot. */
static rkv_status check_heap(const radix_tree *t, uint8_t *seen, char *err, size_t errlen)
{
    for (int32_t i = 0; i < t->heap_n; i++) {
        const rt_entry *e = &t->heap[i];
        if (!slot_valid(t, e->slot) || !N(t, e->slot)->queued || seen[e->slot])
            PART_FAIL("heap entry %d names slot %d (dead, not queued or twice)", i, e->slot);
        seen[e->slot] = 1;
        rt_entry now = entry_key(t, N(t, e->slot), e->slot);
        if (entry_before(t, &now, e)) PART_FAIL("heap entry %d has a key above its node's", i);
        if (i > 0 && entry_before(t, e, &t->heap[(i - 1) / HEAP_D]))
            PART_FAIL("heap order broken at %d", i);
    }
    for (int32_t s = 0; s < t->num_slots; s++)
        if (N(t, s)->len >= 0 && N(t, s)->queued && !seen[s])
            PART_FAIL("node slot %d is queued without a heap entry", s);
    return RKV_OK;
}

#define FAIL(...)                                                   \
    do {                                                            \
        if (err) snprintf(err, errlen, "radix_tree_check: " __VA_ARGS__); \
        st = RKV_ECORRUPT;                                          \
        goto done;                                                  \
    } while (0)

rkv_status radix_tree_check(const radix_tree *t, char *err, size_t errlen)
{
    rkv_status st = RKV_OK;
    int32_t P = t->P;
    int32_t ns_total = t->num_slots + 1;
    int32_t *stack = malloc(sizeof(int32_t) * (size_t)ns_total);
    uint8_t *seen = calloc((size_t)ns_total, 1);
    uint8_t *pg = calloc((size_t)(t->pool->num_pages ? t->pool->num_pages : 1), 1);
    int64_t evictable = 0, protect = 0, nodes = 0, pages = 0, cands = 0, live = 0;
    if (!stack || !seen || !pg) {
        /* The check could not look: ENOMEM, not a verdict on the tree. */
        if (err) snprintf(err, errlen, "radix_tree_check: out of host memory");
        st = RKV_ENOMEM;
        goto done;
    }

    const rt_node *root = N(t, RT_ROOT);
    if (root->len != 0 || root->parent != -1 || root->lock != 0 || root->queued)
        FAIL("root slot is not a root (len %d parent %d lock %d)", root->len, root->parent,
             root->lock);
    int32_t sp = 0;
    stack[sp++] = RT_ROOT;
    for (int32_t k = 0; k < t->ns_n; k++) {
        int32_t s = t->ns_slot[k];
        if (!slot_valid(t, s) || N(t, s)->len != 0 || N(t, s)->parent != RT_ROOT)
            FAIL("namespace %llu has a bad node slot %d", (unsigned long long)t->ns_val[k], s);
        if (ns_find(t, t->ns_val[k]) != s)
            FAIL("namespace %llu not found by its index", (unsigned long long)t->ns_val[k]);
        stack[sp++] = s;
    }
    while (sp > 0) {
        int32_t s = stack[--sp];
        if (seen[s]) FAIL("node slot %d reached twice", s);
        seen[s] = 1;
        const rt_node *x = N(t, s);
        uint64_t id = x->id;
        if (x->time > t->clock) FAIL("node %llu time %llu after clock %llu", (unsigned long long)id,
                                     (unsigned long long)x->time, (unsigned long long)t->clock);
        if ((id >> 2) > t->clock) FAIL("node %llu created after the clock", (unsigned long long)id);
        if (!is_special(x)) {
            const rt_node *p = N(t, x->parent);
            if (x->len % P != 0) FAIL("node %llu length %d not a multiple of P=%d",
                                      (unsigned long long)id, x->len, P);
            if (child_find(t, p, x->edge) != s)
                FAIL("node %llu not found under its parent by its first page",
                     (unsigned long long)id);
            if (p->time < x->time) FAIL("node %llu time %llu newer than its parent's %llu",
                                        (unsigned long long)id, (unsigned long long)x->time,
                                        (unsigned long long)p->time);
            if (p->hits < x->hits && p->hits != HITS_MAX)
                FAIL("node %llu has more hits than its parent", (unsigned long long)id);
            if (x->lock < 0) FAIL("node %llu lock %d < 0", (unsigned long long)id, x->lock);
            if (x->lock == 0) evictable += x->len;
            else protect += x->len;
            nodes++;
            if ((st = check_node_pages(t, x, pg, &pages, err, errlen)) != RKV_OK) goto done;
        } else if (x->lock != 0) {
            FAIL("root/namespace node slot %d has lock %d", s, x->lock);
        }
        bool cand = is_candidate(x);
        if (cand && !x->queued)
            FAIL("node %llu is a candidate without a heap entry", (unsigned long long)id);
        if (is_special(x) && x->queued)
            FAIL("root/namespace node slot %d has a heap entry", s);
        cands += cand;
        if ((st = check_children(t, s, stack, &sp, ns_total, err, errlen)) != RKV_OK) goto done;
    }
    for (int32_t s = 0; s < t->num_slots; s++)
        if (N(t, s)->len >= 0) live++;
    if (live != nodes + 1 + t->ns_n) FAIL("%lld live slots but %lld reachable nodes", (long long)live,
                                         (long long)(nodes + 1 + t->ns_n));
    if (evictable != t->evictable || protect != t->protect || nodes != t->num_nodes)
        FAIL("sizes: counted evictable %lld protected %lld nodes %lld, kept %lld %lld %lld",
             (long long)evictable, (long long)protect, (long long)nodes, (long long)t->evictable,
             (long long)t->protect, (long long)t->num_nodes);
    if (cands != t->num_cands)
        FAIL("%lld candidates but %lld counted", (long long)cands, (long long)t->num_cands);
    memset(seen, 0, (size_t)ns_total);
    if ((st = check_heap(t, seen, err, errlen)) != RKV_OK) goto done;
    if ((evictable + protect) / P != pages || pages != t->pool->num_cached)
        FAIL("pool holds %d cached pages, tree %lld (evictable %lld + protected %lld tokens, P=%d)",
             t->pool->num_cached, (long long)pages, (long long)evictable, (long long)protect, P);
done:
    free(stack);
    free(seen);
    free(pg);
    return st;
}

/* ---- dumps -------------------------------------------------------------- */

typedef struct dump_ctx {
    FILE *f;
    int32_t max_tokens;
    int32_t P;
    int first;
    int32_t *depth; /* (slots) */
} dump_ctx;

static int32_t shown(const radix_node_info *in, int32_t max_tokens)
{
    return max_tokens >= 0 && in->len > max_tokens ? max_tokens : in->len;
}

static void dump_text_node(void *vc, const radix_node_info *in)
{
    dump_ctx *d = vc;
    int32_t depth = in->parent_slot >= 0 ? d->depth[in->parent_slot] + 1 : 0;
    d->depth[in->slot] = depth;
    fprintf(d->f, "%*s", 2 * depth, "");
    if (in->parent_slot < 0) fprintf(d->f, "root");
    else if (in->len == 0) fprintf(d->f, "namespace %llu", (unsigned long long)in->ns);
    else {
        int32_t k = shown(in, d->max_tokens);
        fputc('[', d->f);
        for (int32_t i = 0; i < k; i++) fprintf(d->f, i ? " %d" : "%d", in->tokens[i]);
        fprintf(d->f, "%s]", k < in->len ? " ..." : "");
    }
    fprintf(d->f, " id=%llu len=%d lock=%d time=%llu created=%llu hits=%llu\n",
            (unsigned long long)in->id, in->len, in->lock, (unsigned long long)in->time,
            (unsigned long long)in->created, (unsigned long long)in->hits);
}

static void dump_json_node(void *vc, const radix_node_info *in)
{
    dump_ctx *d = vc;
    fprintf(d->f, "%s{\"id\":%llu,\"parent\":", d->first ? "" : ",", (unsigned long long)in->id);
    d->first = 0;
    if (in->parent_slot < 0) fprintf(d->f, "null");
    else fprintf(d->f, "%llu", (unsigned long long)in->parent_id);
    fprintf(d->f, ",\"ns\":%llu,\"tokens\":[", (unsigned long long)in->ns);
    int32_t k = shown(in, d->max_tokens);
    for (int32_t i = 0; i < k; i++) fprintf(d->f, i ? ",%d" : "%d", in->tokens[i]);
    fprintf(d->f, "],\"truncated\":%s,\"length\":%d,\"lock\":%d,\"time\":%llu,\"created\":%llu,"
            "\"hits\":%llu}",
            k < in->len ? "true" : "false", in->len, in->lock, (unsigned long long)in->time,
            (unsigned long long)in->created, (unsigned long long)in->hits);
}

static void dump_dot_node(void *vc, const radix_node_info *in)
{
    dump_ctx *d = vc;
    fprintf(d->f, "  n%llu [label=\"", (unsigned long long)in->id);
    if (in->parent_slot < 0) fprintf(d->f, "root");
    else if (in->len == 0) fprintf(d->f, "ns %llu", (unsigned long long)in->ns);
    else {
        int32_t k = shown(in, d->max_tokens);
        for (int32_t i = 0; i < k; i++) fprintf(d->f, i ? " %d" : "%d", in->tokens[i]);
        if (k < in->len) fprintf(d->f, " ...");
    }
    fprintf(d->f, "\\nlen=%d lock=%d t=%llu\"];\n", in->len, in->lock, (unsigned long long)in->time);
    if (in->parent_slot >= 0)
        fprintf(d->f, "  n%llu -> n%llu;\n", (unsigned long long)in->parent_id,
                (unsigned long long)in->id);
}

void radix_tree_dump_text(const radix_tree *t, FILE *f, int32_t max_tokens)
{
    dump_ctx d = {f, max_tokens, t->P, 1, calloc((size_t)t->num_slots + 1, sizeof(int32_t))};
    if (!d.depth) return;
    radix_tree_visit(t, dump_text_node, &d);
    free(d.depth);
}

void radix_tree_dump_json(const radix_tree *t, FILE *f, int32_t max_tokens)
{
    dump_ctx d = {f, max_tokens, t->P, 1, NULL};
    fprintf(f, "{\"clock\":%llu,\"policy\":\"%s\",\"page_size\":%d,\"nodes\":[",
            (unsigned long long)t->clock, t->pol->name, t->P);
    radix_tree_visit(t, dump_json_node, &d);
    fprintf(f, "]}\n");
}

void radix_tree_dump_dot(const radix_tree *t, FILE *f, int32_t max_tokens)
{
    dump_ctx d = {f, max_tokens, t->P, 1, NULL};
    fprintf(f, "digraph radix {\n  node [shape=box, fontname=\"monospace\"];\n");
    radix_tree_visit(t, dump_dot_node, &d);
    fprintf(f, "}\n");
}
