/* cache_hash.c - the `hash` and `hash-nocache` kinds: vLLM v1 prefix caching
 * of full blocks (block = page), behind cache.h.
 *
 * Every cached block is one page; its metadata lives in arrays indexed by page
 * id, so a block needs no allocation of its own.
 *
 *   tokens  | a b c d | e f g h | i j k l | m n      (P = 4)
 *   digest    h0        h1        h2                  hk = H(h(k-1) | ns | block k)
 *   table     h0 -> p7  h1 -> p2  (miss)              h(-1) = block_hash_root
 *   match     len 8, pages {p7, p2}; the partial block "m n" is never cached
 *
 * The table maps a digest to blocks (chained per bucket). A hit also compares
 * the block's namespace, parent page and tokens with the request's, so a
 * digest collision can never return another prefix's pages; with that check,
 * the digest only has to find candidates fast.
 *
 * Reference counts and the free-block queue (vLLM's FreeKVCacheBlockQueue,
 * restricted to the blocks this cache holds; never-hashed pages stay in the
 * page pool):
 *
 *   head -> [b5] <-> [b9] <-> [b2] <- tail        ref == 0, evictable
 *   evict takes from the head; a block whose ref drops to 0 goes to the tail,
 *   a request's blocks in reverse order (its tail block first), so a request's
 *   tail is evicted before its head; lock() on a queued block (a hit on a free
 *   block) takes it out of the queue.
 *
 * Eviction policies (evict_policy.h): the free queue is this kind's LRU, so
 * lru evicts from its head, exactly vLLM. Any other policy evicts, among the
 * queued blocks without cached children (the queue's leaves; the head always
 * is one), the one with the smallest key, then the first cached. The policy
 * sees a block as a node of len P at depth (its index in the chain) x P, with
 * time = its place in the queue (release order), hits = calls whose chain
 * reached it (its insert included), priority = the highest request priority
 * of those calls. These policies scan the queue per evicted block (O(queue)):
 * they exist for ablations, lru stays O(1).
 *
 * Insert plays "the request frees its blocks": the new blocks and any
 * unlocked blocks of the same chain are appended tail first; locked ones
 * follow when the matches holding them unlock. (Under dedup, "the chain" is
 * every block insert's own walk found, so blocks another request cached
 * after this one's match move to the tail too, not only the new ones.)
 * Under dedup a parent always leaves the queue after its children (check()
 * verifies it) and eviction only ever removes leaves.
 *
 * Duplicate blocks (--hash-duplicates). Two requests that compute the same
 * full block before either caches it (in one step under SGLang's step
 * semantics; a block-aligned prompt, whose last block is recomputed because
 * a match leaves its last token out) each hold a page with the same content:
 *
 *   dedup  insert finds the first copy and frees the second (radix-like):
 *          blocks name their parent by page, a tree of unique blocks.
 *   keep   (vLLM v1: BlockPool.cache_full_blocks never looks up, so block
 *          tables stay append-only) insert caches every page the caller
 *          owns beyond its matched prefix, copies included. A block names
 *          its parent by prefix: it stores the parent's digest (pfull), and
 *          a lookup takes, among the blocks of equal digest, namespace,
 *          tokens and parent digest, the one cached first (vLLM's
 *          get_one_block: the first of its dict). Copies and blocks whose
 *          parent was evicted (vLLM keeps both until they reach the queue's
 *          head) are evicted in queue order like any block; only lru
 *          (vLLM's order) is allowed. Parent pages are not tracked (-1).
 *
 * Digests chain on the full 128-bit digest of the parent (pfull); with the
 * debug truncation (cache_hash_debug_set_bits) only the stored digest that
 * finds candidates is cut, so the parent check of keep stays 128-bit.
 *
 * The interface keeps no state between calls, so both match and insert hash
 * every full block they are given (vLLM hashes a request's blocks once; here
 * insert repeats the work). hash-nocache does the same hashing, counted in
 * stats.hash_computations, and caches nothing: match returns 0 and insert
 * gives the pages straight back to the pool (the cache owns pages beyond
 * *prefix_len = 0 and drops them), which isolates the cost of hashing.
 */
#include "cache_hash.h"

#include <stdlib.h>
#include <string.h>

#include "block_hash.h"
#include "cache_kinds.h"
#include "evict_policy.h"
#include "rkv_core.h"

typedef struct hblock {
    block_hash hash;   /* digest as stored (truncated in debug mode) */
    block_hash pfull;  /* the parent's full digest (block_hash_root for a first block) */
    uint64_t ns;
    int32_t parent;    /* page of the parent block, -1 for a first block (and under keep) */
    int32_t children;  /* cached blocks whose parent is this one */
    int32_t ref;       /* locks held by matches; 0 = in the free queue */
    int32_t prev, next; /* free-queue links, -1 at the ends */
    int32_t hnext;     /* next block in the same bucket, -1 at the end */
    uint8_t cached;
    uint8_t queued;
} hblock;

/* What a policy other than lru reads of a block, beside the blocks so that
 * lru (the free queue alone) keeps vLLM's footprint and speed. */
typedef struct hmeta {
    uint64_t time;     /* release order: when it last joined the free queue */
    uint64_t prev_time; /* the release order before that (0: none) */
    uint64_t id;       /* the order it was cached in (the tie rule) */
    uint32_t hits;     /* calls whose chain reached it, its insert included */
    int32_t priority;  /* highest request priority of those calls */
    int32_t index;     /* its place in its chain (depth = index x P) */
} hmeta;

typedef struct cache_hash {
    cache base;
    bool nocache;
    bool keep;            /* --hash-duplicates keep (see the top of the file) */
    int bits;             /* 128, or 1..64 when debug truncation is on */
    block_hasher hasher;
    hblock *blk;          /* (num_pages) by page id */
    int32_t *tok;         /* (num_pages, P) each cached block's tokens */
    int32_t *buckets;     /* (mask + 1) first block of each bucket, -1 empty */
    uint32_t mask;
    int32_t qhead, qtail; /* free queue */
    uint64_t qseq, seq;   /* release and caching counters */
    const evict_policy *pol;
    hmeta *meta;          /* (num_pages) by page id; NULL under lru */
    int64_t num_cached, num_locked;
    block_hash *hs;       /* (hs_cap) per-call digests, truncated as stored */
    block_hash *full;     /* (hs_cap) per-call full digests */
    int32_t *chain;       /* (hs_cap) per-call pages of the chain */
    int32_t hs_cap;
    int32_t priority;     /* the current match / insert's request priority (its cache_seq's) */
} cache_hash;

static const cache_ops hash_ops, nocache_ops;

const char *const cache_hash_duplicates_names[] = {"keep", "dedup", NULL};

/* ---- digests and the table ---------------------------------------------- */

/* *full = H(parent's full digest | ns | t); *out = *full as stored. */
static void digest(cache_hash *h, const block_hash *parent, uint64_t ns, const int32_t *t,
                   block_hash *full, block_hash *out)
{
    block_hasher_hash(&h->hasher, parent, ns, t, h->base.page_size, full);
    *out = *full;
    if (h->bits < 128) {
        out->lo &= h->bits == 64 ? ~0ull : ((1ull << h->bits) - 1);
        out->hi = 0;
    }
}

static uint32_t bucket_of(const cache_hash *h, const block_hash *d)
{
    uint64_t x = d->lo ^ (d->hi * 0x9e3779b97f4a7c15ull);
    return (uint32_t)(x ^ (x >> 32)) & h->mask;
}

/* The cached block with digest d whose namespace, parent and tokens are the
 * request's, or -1. The digest narrows the search; the rest decides. The
 * parent is its page under dedup, its full digest pfull under keep; buckets
 * list blocks in caching order, so keep finds the copy cached first. */
static int32_t lookup(const cache_hash *h, const block_hash *d, int32_t parent,
                      const block_hash *pfull, uint64_t ns, const int32_t *t)
{
    size_t bytes = sizeof(int32_t) * (size_t)h->base.page_size;
    for (int32_t b = h->buckets[bucket_of(h, d)]; b >= 0; b = h->blk[b].hnext) {
        const hblock *k = &h->blk[b];
        if (block_hash_equal(&k->hash, d) && k->ns == ns &&
            (h->keep ? block_hash_equal(&k->pfull, pfull) : k->parent == parent) &&
            memcmp(h->tok + (size_t)b * (size_t)h->base.page_size, t, bytes) == 0)
            return b;
    }
    return -1;
}

/* Append b to its bucket's list (caching order). */
static void table_add(cache_hash *h, int32_t b)
{
    int32_t *link = &h->buckets[bucket_of(h, &h->blk[b].hash)];
    while (*link >= 0) link = &h->blk[*link].hnext;
    *link = b;
    h->blk[b].hnext = -1;
}

static void table_remove(cache_hash *h, int32_t b)
{
    int32_t *link = &h->buckets[bucket_of(h, &h->blk[b].hash)];
    while (*link != b) link = &h->blk[*link].hnext;
    *link = h->blk[b].hnext;
    h->blk[b].hnext = -1;
}

/* ---- the free queue ----------------------------------------------------- */

static void queue_remove(cache_hash *h, int32_t b)
{
    hblock *k = &h->blk[b];
    if (k->prev >= 0) h->blk[k->prev].next = k->next;
    else h->qhead = k->next;
    if (k->next >= 0) h->blk[k->next].prev = k->prev;
    else h->qtail = k->prev;
    k->prev = k->next = -1;
    k->queued = 0;
}

static void queue_append(cache_hash *h, int32_t b)
{
    hblock *k = &h->blk[b];
    k->prev = h->qtail;
    k->next = -1;
    if (h->meta) h->meta[b].prev_time = h->meta[b].time, h->meta[b].time = ++h->qseq;
    if (h->qtail >= 0) h->blk[h->qtail].next = b;
    else h->qhead = b;
    h->qtail = b;
    k->queued = 1;
}

static rkv_status reserve_scratch(cache_hash *h, int32_t nb)
{
    void **arrays[] = {(void **)&h->hs, (void **)&h->full, (void **)&h->chain};
    const size_t elem[] = {sizeof *h->hs, sizeof *h->full, sizeof *h->chain};
    return rkv_grow32_arrays(arrays, elem, 3, &h->hs_cap, nb);
}

/* Digest all nb full blocks into h->hs and look up the longest cached chain
 * (pages into h->chain); returns its length in blocks. */
static int32_t walk(cache_hash *h, const int32_t *tokens, int32_t nb, uint64_t ns, bool reuse)
{
    const int32_t P = h->base.page_size;
    const block_hash *parent_hash = &block_hash_root;
    int32_t parent = -1, hit = 0;
    for (int32_t i = 0; i < nb; i++) {
        digest(h, parent_hash, ns, tokens + (size_t)i * (size_t)P, &h->full[i], &h->hs[i]);
        if (reuse && hit == i) {
            int32_t b = lookup(h, &h->hs[i], parent, parent_hash, ns, tokens + (size_t)i * (size_t)P);
            if (b >= 0) {
                h->chain[hit++] = b;
                parent = b;
            }
        }
        parent_hash = &h->full[i];
    }
    h->base.stats.hash_computations += (uint64_t)nb;
    /* The chain's blocks were reached by this call (policies other than lru). */
    for (int32_t i = 0; h->meta && i < hit; i++) {
        hmeta *k = &h->meta[h->chain[i]];
        if (k->hits != UINT32_MAX) k->hits++;
        if (h->priority > k->priority) k->priority = h->priority;
    }
    return hit;
}

/* ---- the interface ------------------------------------------------------ */

static rkv_status hash_match(cache *c, cache_seq *out, const int32_t *tokens, int32_t n)
{
    cache_hash *h = (cache_hash *)c;
    const uint64_t ns = out->ns;
    h->priority = out->priority;
    if (n < 0 || (n > 0 && !tokens)) return RKV_EINVAL;
    int32_t nb = n / c->page_size;
    rkv_status st = reserve_scratch(h, nb);
    if (st != RKV_OK) return st;
    int32_t hit = walk(h, tokens, nb, ns, !h->nocache);
    st = cache_seq_reserve(out, hit);
    if (st != RKV_OK) return st;
    if (hit) memcpy(out->pages, h->chain, sizeof(int32_t) * (size_t)hit);
    out->num_pages = hit;
    out->len = hit * c->page_size;
    out->handle = NULL;
    c->stats.match_calls++;
    c->stats.matched_tokens += (uint64_t)out->len;
    return RKV_OK;
}

static rkv_status hash_insert(cache *c, const cache_seq *s, const int32_t *tokens, int32_t n,
                              const int32_t *pages, int32_t *prefix_len)
{
    cache_hash *h = (cache_hash *)c;
    const uint64_t ns = s->ns;
    h->priority = s->priority;
    const int32_t P = c->page_size;
    if (n < 0 || (n >= P && (!tokens || !pages)) || !prefix_len) return RKV_EINVAL;
    int32_t nb = n / P;
    rkv_status st = reserve_scratch(h, nb);
    if (st != RKV_OK) return st;
    /* keep: the caller's matched prefix is the leading pages that are cached
     * blocks (the rest are its own, INFLIGHT); no lookup beyond it. */
    int32_t k = walk(h, tokens, nb, ns, !h->nocache && !h->keep);
    if (h->keep) {
        for (k = 0; k < nb && pages[k] >= 0 && pages[k] < c->pool->num_pages
                    && h->blk[pages[k]].cached; k++) {
            const hblock *b = &h->blk[pages[k]];
            if (!block_hash_equal(&b->hash, &h->hs[k]) || b->ns != ns) return RKV_EINVAL;
            h->chain[k] = pages[k];
        }
    }
    c->stats.insert_calls++;
    if (h->nocache) {
        /* The cache owns everything beyond *prefix_len = 0 and keeps nothing. */
        st = page_pool_free(c->pool, pages, nb);
        if (st != RKV_OK) return st;
        *prefix_len = 0;
        return RKV_OK;
    }
    for (int32_t i = k; h->keep && i < nb; i++)
        if (pages[i] < 0 || pages[i] >= c->pool->num_pages) return RKV_EINVAL;
    /* Adopt first: it checks the whole batch, so a bad page changes nothing. */
    st = page_pool_adopt(c->pool, pages + k, nb - k);
    if (st != RKV_OK) return st;
    for (int32_t i = k; i < nb; i++) {
        int32_t b = pages[i];
        hblock *blk = &h->blk[b];
        memset(blk, 0, sizeof *blk);
        blk->hash = h->hs[i];
        blk->pfull = i > 0 ? h->full[i - 1] : block_hash_root;
        blk->ns = ns;
        blk->parent = i > 0 && !h->keep ? h->chain[i - 1] : -1;
        blk->prev = blk->next = -1;
        blk->cached = 1;
        if (h->meta)
            h->meta[b] = (hmeta){.id = ++h->seq, .hits = 1, .priority = h->priority, .index = i};
        if (blk->parent >= 0) h->blk[blk->parent].children++;
        memcpy(h->tok + (size_t)b * (size_t)P, tokens + (size_t)i * (size_t)P,
               sizeof(int32_t) * (size_t)P);
        table_add(h, b);
        h->chain[i] = b;
    }
    h->num_cached += nb - k;
    /* The request "frees" its chain: unlocked blocks go to the tail, its tail
     * block first; locked ones follow when their matches unlock. */
    for (int32_t i = nb - 1; i >= 0; i--) {
        int32_t b = h->chain[i];
        if (h->blk[b].ref > 0) continue;
        if (h->blk[b].queued) queue_remove(h, b);
        queue_append(h, b);
    }
    *prefix_len = k * P;
    c->stats.inserted_tokens += (uint64_t)(nb - k) * (uint64_t)P;
    return RKV_OK;
}

static rkv_status check_pages(const cache_hash *h, const cache_seq *m, bool need_ref)
{
    if (m->num_pages < 0 || (m->num_pages > 0 && !m->pages)) return RKV_EINVAL;
    for (int32_t i = 0; i < m->num_pages; i++) {
        int32_t b = m->pages[i];
        if (b < 0 || b >= h->base.pool->num_pages || !h->blk[b].cached) return RKV_EINVAL;
        if (need_ref && h->blk[b].ref <= 0) return RKV_EINVAL;
    }
    return RKV_OK;
}

static rkv_status hash_lock(cache *c, const cache_seq *m)
{
    cache_hash *h = (cache_hash *)c;
    rkv_status st = check_pages(h, m, false);
    if (st != RKV_OK) return st;
    for (int32_t i = 0; i < m->num_pages; i++) {
        hblock *k = &h->blk[m->pages[i]];
        if (k->ref++ == 0) {
            queue_remove(h, m->pages[i]); /* a hit on a free block revives it */
            h->num_locked++;
        }
    }
    return RKV_OK;
}

static rkv_status hash_unlock(cache *c, const cache_seq *m)
{
    cache_hash *h = (cache_hash *)c;
    rkv_status st = check_pages(h, m, true);
    if (st != RKV_OK) return st;
    /* Tail first, so the request's tail block is evicted before its head. */
    for (int32_t i = m->num_pages - 1; i >= 0; i--) {
        hblock *k = &h->blk[m->pages[i]];
        if (--k->ref == 0) {
            queue_append(h, m->pages[i]);
            h->num_locked--;
        }
    }
    return RKV_OK;
}

/* The queued leaf the policy evicts first (see the top of the file). */
static int32_t policy_victim(const cache_hash *h)
{
    int32_t best = -1;
    evict_key bk = {0, 0};
    for (int32_t b = h->qhead; b >= 0; b = h->blk[b].next) {
        if (h->blk[b].children) continue;
        const hmeta *k = &h->meta[b];
        evict_node v = {.time = k->time, .prev_time = k->prev_time, .hits = k->hits, .depth = (int64_t)k->index * h->base.page_size,
                        .len = h->base.page_size, .priority = k->priority};
        evict_key key = h->pol->key(&v);
        if (best < 0 || evict_key_less(key, bk) ||
            (key.k0 == bk.k0 && key.k1 == bk.k1 && k->id < h->meta[best].id))
            best = b, bk = key;
    }
    return best;
}

static int64_t hash_evict(cache *c, int64_t n_tokens)
{
    cache_hash *h = (cache_hash *)c;
    int64_t freed = 0;
    bool lru = !h->meta;
    c->stats.evict_calls++;
    while (freed < n_tokens && h->qhead >= 0) {
        int32_t b = lru ? h->qhead : policy_victim(h);
        hblock *k = &h->blk[b];
        queue_remove(h, b);
        table_remove(h, b);
        if (k->parent >= 0) h->blk[k->parent].children--;
        k->cached = 0;
        h->num_cached--;
        page_pool_free(c->pool, &b, 1); /* b is CACHED: cannot fail */
        freed += c->page_size;
    }
    c->stats.evicted_tokens += (uint64_t)freed;
    return freed;
}

static void hash_sizes(const cache *c, cache_sizes *out)
{
    const cache_hash *h = (const cache_hash *)c;
    out->evictable_tokens = (h->num_cached - h->num_locked) * c->page_size;
    out->protected_tokens = h->num_locked * c->page_size;
    out->pinned_tokens = 0;
    out->num_nodes = h->num_cached;
}

#define FAIL(...)                                           \
    do {                                                    \
        if (err) snprintf(err, errlen, "cache_hash: " __VA_ARGS__); \
        free(pos);                                          \
        free(nchild);                                       \
        return RKV_ECORRUPT;                                \
    } while (0)

static rkv_status hash_check(const cache *c, char *err, size_t errlen)
{
    cache_hash *h = (cache_hash *)c; /* the hasher's scratch is mutable */
    const page_pool *pool = c->pool;
    const int32_t P = c->page_size;
    int64_t *pos = NULL; /* (num_pages) queue position + 1, 0 = not queued */
    int32_t *nchild = NULL; /* (num_pages) children counted */
    rkv_status st = page_pool_check(pool, err, errlen);
    if (st != RKV_OK) return st;
    size_t np = (size_t)(pool->num_pages ? pool->num_pages : 1);
    pos = calloc(np, sizeof *pos);
    nchild = calloc(np, sizeof *nchild);
    if (!pos || !nchild) {
        free(pos);
        free(nchild);
        return RKV_ENOMEM;
    }
    /* 1: the free queue, head to tail: linked both ways, only unlocked blocks. */
    int64_t qn = 0;
    for (int32_t b = h->qhead, prev = -1; b >= 0; prev = b, b = h->blk[b].next) {
        const hblock *k = &h->blk[b];
        if (!k->cached || !k->queued || k->ref != 0 || k->prev != prev)
            FAIL("free queue slot %lld holds block %d (cached %d queued %d ref %d)",
                 (long long)qn, b, k->cached, k->queued, k->ref);
        if (++qn > pool->num_pages) FAIL("free queue has a cycle");
        pos[b] = qn;
        if (k->next < 0 && h->qtail != b) FAIL("free queue tail is %d, list ends at %d", h->qtail, b);
    }
    /* 2: every block: pool state, counts, parent order, digest, table entry. */
    int64_t cached = 0, locked = 0;
    for (int32_t b = 0; b < pool->num_pages; b++) {
        const hblock *k = &h->blk[b];
        if (!k->cached) continue;
        cached++;
        if (page_pool_state(pool, b) != PAGE_CACHED) FAIL("block %d: page state %d, not cached", b, page_pool_state(pool, b));
        if (k->ref < 0) FAIL("block %d: ref %d", b, k->ref);
        if (k->ref > 0) locked++;
        if ((k->ref == 0) != (pos[b] > 0)) FAIL("block %d: ref %d but queued %d", b, k->ref, pos[b] > 0);
        const block_hash *ph = &block_hash_root;
        block_hash pf, pd; /* the parent's full digest, recomputed */
        if (k->parent >= 0) {
            if (k->parent >= pool->num_pages) FAIL("block %d: parent %d out of range", b, k->parent);
            nchild[k->parent]++;
            const hblock *p = &h->blk[k->parent];
            if (!p->cached) FAIL("block %d: parent %d not cached", b, k->parent);
            if (p->ns != k->ns) FAIL("block %d: namespace differs from parent %d", b, k->parent);
            /* A parent leaves the queue after its children: evict takes leaves. */
            if (k->ref > 0 && p->ref == 0) FAIL("block %d locked, parent %d not", b, k->parent);
            if (k->ref == 0 && p->ref == 0 && pos[k->parent] < pos[b])
                FAIL("block %d queued after its parent %d", b, k->parent);
            digest(h, &p->pfull, p->ns, h->tok + (size_t)k->parent * (size_t)P, &pf, &pd);
            ph = &pf;
        } else if (h->keep) {
            ph = &k->pfull; /* named by prefix: nothing to compare it with */
        }
        if (!block_hash_equal(ph, &k->pfull)) FAIL("block %d: parent digest is stale", b);
        block_hash d, df;
        digest(h, ph, k->ns, h->tok + (size_t)b * (size_t)P, &df, &d);
        if (!block_hash_equal(&d, &k->hash)) FAIL("block %d: stored digest is stale", b);
        int32_t x = h->buckets[bucket_of(h, &k->hash)];
        while (x >= 0 && x != b) x = h->blk[x].hnext;
        if (x != b) FAIL("block %d missing from its bucket", b);
    }
    int64_t in_table = 0;
    for (uint32_t i = 0; i <= h->mask; i++)
        for (int32_t x = h->buckets[i]; x >= 0; x = h->blk[x].hnext)
            if (++in_table > cached || !h->blk[x].cached) FAIL("bucket %u holds block %d not cached", i, x);
    if (in_table != cached) FAIL("table holds %lld blocks, %lld cached", (long long)in_table, (long long)cached);
    if (cached != h->num_cached || locked != h->num_locked || qn != cached - locked)
        FAIL("counts: cached %lld/%lld locked %lld/%lld queued %lld", (long long)cached,
             (long long)h->num_cached, (long long)locked, (long long)h->num_locked, (long long)qn);
    if (pool->num_cached != cached)
        FAIL("pool has %d cached pages, evictable + protected = %lld", pool->num_cached,
             (long long)cached);
    if (h->nocache && cached) FAIL("hash-nocache holds %lld blocks", (long long)cached);
    for (int32_t b = 0; b < pool->num_pages; b++)
        if (h->blk[b].cached && nchild[b] != h->blk[b].children)
            FAIL("block %d: %d children, counted %d", b, h->blk[b].children, nchild[b]);
    free(pos);
    free(nchild);
    return RKV_OK;
}

#undef FAIL

static void dump_tokens(FILE *f, const int32_t *t, int32_t n, const char *sep)
{
    for (int32_t i = 0; i < n; i++) fprintf(f, "%s%d", i ? sep : "", t[i]);
}

/* The parent page a dump shows: under keep, the first cached block whose
 * full digest is b's parent digest (-1 when none is cached); the blocks do
 * not store it because evictions would leave it dangling. Dumps only. */
static int32_t shown_parent(const cache_hash *h, int32_t b)
{
    const hblock *k = &h->blk[b];
    if (!h->keep || block_hash_equal(&k->pfull, &block_hash_root)) return k->parent;
    block_hash want = k->pfull;
    if (h->bits < 128) {
        want.lo &= h->bits == 64 ? ~0ull : ((1ull << h->bits) - 1);
        want.hi = 0;
    }
    cache_hash *m = (cache_hash *)h; /* the hasher's scratch is mutable */
    for (int32_t x = h->buckets[bucket_of(h, &want)]; x >= 0; x = h->blk[x].hnext) {
        block_hash full, d;
        if (!block_hash_equal(&h->blk[x].hash, &want) || h->blk[x].ns != k->ns) continue;
        digest(m, &h->blk[x].pfull, h->blk[x].ns, h->tok + (size_t)x * (size_t)h->base.page_size,
               &full, &d);
        if (block_hash_equal(&full, &k->pfull)) return x;
    }
    return -1;
}

static void hash_dump(const cache *c, FILE *f, cache_dump_format fmt)
{
    const cache_hash *h = (const cache_hash *)c;
    const int32_t P = c->page_size;
    const page_pool *pool = c->pool;
    if (fmt == CACHE_DUMP_DOT) {
        fprintf(f, "digraph %s {\n  node [shape=box, fontname=\"monospace\"];\n", "hash");
        for (int32_t b = 0; b < pool->num_pages; b++) {
            const hblock *k = &h->blk[b];
            if (!k->cached) continue;
            fprintf(f, "  b%d [label=\"p%d ref %d\\n", b, b, k->ref);
            dump_tokens(f, h->tok + (size_t)b * (size_t)P, P, " ");
            fprintf(f, "\"%s];\n", k->ref ? ", style=filled, fillcolor=lightgrey" : "");
            if (shown_parent(h, b) >= 0) fprintf(f, "  b%d -> b%d;\n", shown_parent(h, b), b);
        }
        fprintf(f, "}\n");
        return;
    }
    if (fmt == CACHE_DUMP_JSON) {
        fprintf(f, "{\"kind\":\"%s\",\"hash_fn\":\"%s\",\"page_size\":%d,\"blocks\":[",
                c->ops->name, h->hasher.name, P);
        int first = 1;
        for (int32_t b = 0; b < pool->num_pages; b++) {
            const hblock *k = &h->blk[b];
            if (!k->cached) continue;
            fprintf(f, "%s{\"page\":%d,\"parent\":%d,\"ns\":%llu,\"ref\":%d,"
                       "\"hash\":\"%016llx%016llx\",\"tokens\":[",
                    first ? "" : ",", b, shown_parent(h, b), (unsigned long long)k->ns, k->ref,
                    (unsigned long long)k->hash.hi, (unsigned long long)k->hash.lo);
            dump_tokens(f, h->tok + (size_t)b * (size_t)P, P, ",");
            fprintf(f, "]}");
            first = 0;
        }
        fprintf(f, "],\"free_queue\":[");
        for (int32_t b = h->qhead; b >= 0; b = h->blk[b].next)
            fprintf(f, "%s%d", b == h->qhead ? "" : ",", b);
        fprintf(f, "]}\n");
        return;
    }
    fprintf(f, "%s (%s, page %d): %lld blocks, %lld locked\nfree queue (head first):",
            c->ops->name, h->hasher.name, P, (long long)h->num_cached, (long long)h->num_locked);
    for (int32_t b = h->qhead; b >= 0; b = h->blk[b].next) fprintf(f, " %d", b);
    fprintf(f, "\n");
    for (int32_t b = 0; b < pool->num_pages; b++) {
        const hblock *k = &h->blk[b];
        if (!k->cached) continue;
        fprintf(f, "  block %d parent %d ns %llu ref %d hash %016llx%016llx [", b, shown_parent(h, b),
                (unsigned long long)k->ns, k->ref, (unsigned long long)k->hash.hi,
                (unsigned long long)k->hash.lo);
        dump_tokens(f, h->tok + (size_t)b * (size_t)P, P, " ");
        fprintf(f, "]\n");
    }
}

static void hash_destroy(cache *c)
{
    cache_hash *h = (cache_hash *)c;
    if (!h) return;
    /* Cached pages go back to the pool, which outlives the cache. */
    for (int32_t b = 0; h->blk && b < c->pool->num_pages; b++)
        if (h->blk[b].cached) page_pool_free(c->pool, &b, 1);
    block_hasher_destroy(&h->hasher);
    free(h->blk);
    free(h->meta);
    free(h->tok);
    free(h->buckets);
    free(h->hs);
    free(h->full);
    free(h->chain);
    free(h);
}

static const cache_ops hash_ops = {
    "hash", hash_match, hash_insert, hash_lock, hash_unlock, hash_evict, hash_sizes, hash_check,
    hash_dump, hash_destroy, NULL, NULL, NULL, NULL,
};
static const cache_ops nocache_ops = {
    "hash-nocache", hash_match, hash_insert, hash_lock, hash_unlock, hash_evict, hash_sizes,
    hash_check, hash_dump, hash_destroy, NULL, NULL, NULL, NULL,
};

rkv_status cache_hash_create(const cache_config *cfg, page_pool *pool, bool nocache,
                             cache **out, char *err, size_t errlen)
{
    *out = NULL;
    if (!pool || pool->page_size < 1) {
        if (err) snprintf(err, errlen, "cache_hash: no page pool");
        return RKV_EINVAL;
    }
    const evict_policy *pol = evict_policy_lookup(cfg ? cfg->policy : NULL, "cache_hash", err, errlen);
    if (!pol) return RKV_EINVAL;
    const char *dup = cfg ? cfg->hash_duplicates : NULL;
    if (dup && strcmp(dup, "keep") && strcmp(dup, "dedup")) {
        if (err) snprintf(err, errlen, "cache_hash: unknown duplicate rule '%s' (keep|dedup)", dup);
        return RKV_EINVAL;
    }
    bool keep = dup ? !strcmp(dup, "keep") : pol == evict_policies[0];
    if (keep && pol != evict_policies[0] && !nocache) {
        if (err) snprintf(err, errlen, "cache_hash: duplicates 'keep' needs the lru policy (vLLM's "
                          "free queue), not '%s'; use dedup", pol->name);
        return RKV_EINVAL;
    }
    cache_hash *h = calloc(1, sizeof *h);
    if (!h) return RKV_ENOMEM;
    h->pol = pol;
    rkv_status st = block_hasher_init(&h->hasher, cfg ? cfg->hash_fn : NULL, pool->page_size,
                                      err, errlen);
    if (st != RKV_OK) {
        free(h);
        return st;
    }
    h->base.ops = nocache ? &nocache_ops : &hash_ops;
    h->base.pool = pool;
    h->base.page_size = pool->page_size;
    h->nocache = nocache;
    h->keep = keep && !nocache;
    h->bits = 128;
    h->qhead = h->qtail = -1;
    size_t np = (size_t)(pool->num_pages ? pool->num_pages : 1);
    uint32_t nbk = 16;
    while (nbk < np && nbk < (1u << 30)) nbk *= 2;
    h->mask = nbk - 1;
    h->blk = calloc(np, sizeof *h->blk);
    if (pol != evict_policies[0] && !(h->meta = calloc(np, sizeof *h->meta))) {
        hash_destroy(&h->base);
        return RKV_ENOMEM;
    }
    h->tok = malloc(np * (size_t)pool->page_size * sizeof *h->tok);
    h->buckets = malloc((size_t)nbk * sizeof *h->buckets);
    if (!h->blk || !h->tok || !h->buckets) {
        hash_destroy(&h->base);
        return RKV_ENOMEM;
    }
    for (uint32_t i = 0; i < nbk; i++) h->buckets[i] = -1;
    for (size_t b = 0; b < np; b++) h->blk[b].prev = h->blk[b].next = h->blk[b].hnext = -1;
    *out = &h->base;
    return RKV_OK;
}

rkv_status cache_hash_reuse_create(const cache_config *cfg, page_pool *pool, cache **out,
                                   char *err, size_t errlen)
{
    return cache_hash_create(cfg, pool, false, out, err, errlen);
}

rkv_status cache_hash_nocache_create(const cache_config *cfg, page_pool *pool, cache **out,
                                     char *err, size_t errlen)
{
    return cache_hash_create(cfg, pool, true, out, err, errlen);
}

rkv_status cache_hash_debug_set_bits(cache *c, int bits)
{
    if (!c || (c->ops != &hash_ops && c->ops != &nocache_ops)) return RKV_EINVAL;
    cache_hash *h = (cache_hash *)c;
    if (h->num_cached != 0 || !((bits >= 1 && bits <= 64) || bits == 128)) return RKV_EINVAL;
    h->bits = bits;
    return RKV_OK;
}
