/* cache_tier.c - see cache_tier.h.
 *
 * Entries (one per kept page) live in one array; each is in exactly one of
 * three lists: free, host LRU, disk LRU (head = most recent). A chained hash
 * map on the key finds them. Per pool page the layer remembers the key and
 * tokens it was adopted with (meta), valid from adoption to eviction.
 *
 *   meta[page] --evict--> spill: lookup(key)? touch : put in host
 *   host full: host tail --demote--> disk (disk full: disk tail dropped)
 */
#include "cache_tier.h"
#include "block_hash.h"
#include "cache_client.h"
#include "rkv_core.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { T_FREE = 0, T_HOST = 1, T_DISK = 2 };

typedef struct tent {
    uint64_t k0, k1;   /* key */
    int32_t hnext;     /* next in its hash bucket, -1 */
    int32_t prev, next; /* its list */
    int32_t slot;      /* slot in its tier */
    int8_t tier;
} tent;

typedef struct tier_list { int32_t head, tail; int64_t n; } tier_list;

typedef struct cache_tier {
    cache base;
    cache *inner;
    tier_config cfg;
    tier_mover mv;      /* zeroed without a mover */
    tier_stats st;
    double pending_load; /* seconds not yet taken by the engine */
    char last_error[256];

    int32_t P;
    int64_t num_entries;
    tent *ent;          /* (num_entries) */
    int32_t *ent_toks;  /* (num_entries, P) */
    tier_list lists[3]; /* by T_* */
    int32_t *bucket;    /* (nb) heads, -1 */
    uint64_t mask;
    int32_t *host_slots, *disk_slots; /* free slot stacks */
    int64_t host_free, disk_free;
    uint8_t *host_buf;  /* (host_pages, page_bytes) when data moves */
    uint8_t *scratch;   /* (page_bytes) */
    int64_t disk_writes;
    int instance;
    int disk_fd;          /* the disk tier's backing file, unlinked at once; -1: none */
    tier_remote *remote; /* NULL: no remote tier */

    /* per pool page */
    uint64_t *meta_k;   /* (num_pages, 2) */
    uint8_t *meta_valid;
    int32_t *meta_toks; /* (num_pages, P) */

    /* scratch for chain hashes and loads */
    uint64_t *keys;     /* (cap, 2) */
    int32_t *run;       /* (cap) entries of a load run */
    int32_t *pages;     /* (cap) */
    int32_t cap;
    block_hasher hasher; /* xxh3: the same chained block digests as the hash kind */
} cache_tier;

static const cache_ops tier_ops;

void tier_config_default(tier_config *c)
{
    memset(c, 0, sizeof *c);
    c->fail_disk_writes_after = -1;
    tier_remote_config_default(&c->remote);
}

static double page_cost_bytes(const cache_tier *t)
{
    return t->cfg.modelled_page_bytes > 0 ? t->cfg.modelled_page_bytes : (double)t->mv.page_bytes;
}
static double host_bw(const cache_tier *t) { return t->cfg.host_bw > 0 ? t->cfg.host_bw : 50e9; }
static double disk_bw(const cache_tier *t) { return t->cfg.disk_bw > 0 ? t->cfg.disk_bw : 3e9; }

static void note_error(cache_tier *t, const char *fmt, ...)
{
    t->st.spill_failures++;
    if (t->last_error[0]) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->last_error, sizeof t->last_error, fmt, ap);
    va_end(ap);
}

/* ---------------------------------------------------------------- keys */

/* A page's key is its chained block digest (block_hash.h): it stands for the
 * whole prefix up to and including the page, in namespace ns. */
static void key_next(cache_tier *t, const uint64_t prev[2], uint64_t ns, const int32_t *toks,
                     uint64_t out[2])
{
    block_hash parent = {prev[0], prev[1]}, h;
    block_hasher_hash(&t->hasher, &parent, ns, toks, t->P, &h);
    out[0] = h.lo;
    out[1] = h.hi;
}

static rkv_status reserve(cache_tier *t, int32_t n)
{
    /* two keys (the 128-bit hash) per page */
    void **arrays[] = {(void **)&t->keys, (void **)&t->run, (void **)&t->pages};
    const size_t elem[] = {2 * sizeof *t->keys, sizeof *t->run, sizeof *t->pages};
    return rkv_grow32_arrays(arrays, elem, 3, &t->cap, n);
}

/* keys[0 .. 2 * np) for pages 0 .. np of tokens in ns. */
static rkv_status chain_keys(cache_tier *t, const int32_t *tokens, int32_t np, uint64_t ns)
{
    rkv_status st = reserve(t, np + 1);
    if (st != RKV_OK) return st;
    const uint64_t root[2] = {block_hash_root.lo, block_hash_root.hi};
    for (int32_t i = 0; i < np; i++)
        key_next(t, i ? t->keys + 2 * (i - 1) : root, ns, tokens + (int64_t)i * t->P,
                 t->keys + 2 * i);
    return RKV_OK;
}

/* ---------------------------------------------------------------- lists, map */

static void list_remove(cache_tier *t, int32_t e)
{
    tent *x = &t->ent[e];
    tier_list *l = &t->lists[x->tier];
    if (x->prev >= 0) t->ent[x->prev].next = x->next; else l->head = x->next;
    if (x->next >= 0) t->ent[x->next].prev = x->prev; else l->tail = x->prev;
    x->prev = x->next = -1;
    l->n--;
}

static void list_push_head(cache_tier *t, int32_t e, int8_t tier)
{
    tent *x = &t->ent[e];
    tier_list *l = &t->lists[tier];
    x->tier = tier;
    x->prev = -1;
    x->next = l->head;
    if (l->head >= 0) t->ent[l->head].prev = e; else l->tail = e;
    l->head = e;
    l->n++;
}

static void map_remove(cache_tier *t, int32_t e)
{
    int32_t *pp = &t->bucket[t->ent[e].k0 & t->mask];
    while (*pp != e) pp = &t->ent[*pp].hnext;
    *pp = t->ent[e].hnext;
    t->ent[e].hnext = -1;
}

static int32_t map_find(const cache_tier *t, const uint64_t k[2], const int32_t *toks)
{
    for (int32_t e = t->bucket[k[0] & t->mask]; e >= 0; e = t->ent[e].hnext)
        if (t->ent[e].k0 == k[0] && t->ent[e].k1 == k[1]
            && !memcmp(t->ent_toks + (int64_t)e * t->P, toks, sizeof(int32_t) * (size_t)t->P))
            return e;
    return -1;
}

static void sync_used(cache_tier *t)
{
    t->st.host_used = t->lists[T_HOST].n;
    t->st.disk_used = t->lists[T_DISK].n;
}

/* Entry e leaves its tier for good. */
static void drop(cache_tier *t, int32_t e)
{
    tent *x = &t->ent[e];
    if (x->tier == T_HOST) t->host_slots[t->host_free++] = x->slot;
    if (x->tier == T_DISK) t->disk_slots[t->disk_free++] = x->slot;
    map_remove(t, e);
    list_remove(t, e);
    list_push_head(t, e, T_FREE);
    sync_used(t);
}

/* ---------------------------------------------------------------- disk */

/* The disk tier is one file under disk_dir holding every slot at
 * slot * page_bytes. It is unlinked right after it is created and the tier
 * keeps the descriptor: whatever ends the process (a second signal, SIGKILL,
 * a crash), nothing is left behind in the directory. */
static bool disk_on_files(const cache_tier *t) { return t->disk_fd >= 0 && t->mv.page_bytes > 0; }

static rkv_status disk_write(cache_tier *t, int32_t slot, const void *src)
{
    if (t->cfg.fail_disk_writes_after >= 0 && t->disk_writes >= t->cfg.fail_disk_writes_after) {
        errno = ENOSPC;
        return RKV_EIO;
    }
    if (disk_on_files(t)) {
        const off_t base = (off_t)slot * (off_t)t->mv.page_bytes;
        size_t done = 0;
        while (done < t->mv.page_bytes) {
            ssize_t w = pwrite(t->disk_fd, (const uint8_t *)src + done, t->mv.page_bytes - done,
                               base + (off_t)done);
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0) {
                if (w == 0) errno = ENOSPC;
                return RKV_EIO;
            }
            done += (size_t)w;
        }
    }
    t->disk_writes++;
    return RKV_OK;
}

static rkv_status disk_read(cache_tier *t, int32_t slot, void *dst)
{
    if (!disk_on_files(t)) return RKV_OK;
    const off_t base = (off_t)slot * (off_t)t->mv.page_bytes;
    size_t done = 0;
    while (done < t->mv.page_bytes) {
        ssize_t r = pread(t->disk_fd, (uint8_t *)dst + done, t->mv.page_bytes - done,
                          base + (off_t)done);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return RKV_EIO;
        done += (size_t)r;
    }
    return RKV_OK;
}

/* ---------------------------------------------------------------- spill */

static uint8_t *host_bytes(cache_tier *t, int32_t slot)
{
    return t->host_buf ? t->host_buf + (size_t)slot * t->mv.page_bytes : NULL;
}

/* Remote tier, write-back: entry e leaves the last local tier; its bytes go
 * to the server first (a failed read is a plain drop). */
static void remote_keep_entry(cache_tier *t, int32_t e)
{
    if (!t->remote || !tier_remote_write_back(t->remote)) return;
    const tent *x = &t->ent[e];
    const void *src = NULL;
    if (x->tier == T_HOST) src = host_bytes(t, x->slot);
    else if (disk_read(t, x->slot, t->scratch) == RKV_OK) src = t->scratch;
    else return;
    tier_remote_put(t->remote, (const uint64_t[2]){x->k0, x->k1}, t->ent_toks + (int64_t)e * t->P, src);
}

/* Remote tier: pool page pg (its meta valid) straight from the KV memory. */
static void remote_keep_page(cache_tier *t, int32_t pg)
{
    if (t->mv.page_bytes && t->mv.read_page(t->mv.ctx, pg, t->scratch) != RKV_OK) {
        note_error(t, "tier: reading page %d from the KV memory failed", pg);
        return;
    }
    tier_remote_put(t->remote, t->meta_k + 2 * (int64_t)pg, t->meta_toks + (int64_t)pg * t->P, t->scratch);
}

/* Host tail moves to disk (or is dropped). */
static void demote_host_tail(cache_tier *t)
{
    int32_t e = t->lists[T_HOST].tail;
    if (e < 0) return;
    if (t->cfg.disk_pages <= 0) {
        remote_keep_entry(t, e);
        drop(t, e);
        t->st.dropped_pages++;
        return;
    }
    if (t->disk_free == 0) {
        remote_keep_entry(t, t->lists[T_DISK].tail);
        drop(t, t->lists[T_DISK].tail);
        t->st.dropped_pages++;
    }
    int32_t dslot = t->disk_slots[--t->disk_free];
    if (disk_write(t, dslot, host_bytes(t, t->ent[e].slot)) != RKV_OK) {
        t->disk_slots[t->disk_free++] = dslot;
        note_error(t, "tier disk %s: writing a page failed: %s", t->cfg.disk_dir ? t->cfg.disk_dir : "(simulated)",
                   strerror(errno));
        drop(t, e);
        t->st.dropped_pages++;
        return;
    }
    t->host_slots[t->host_free++] = t->ent[e].slot;
    list_remove(t, e);
    t->ent[e].slot = dslot;
    list_push_head(t, e, T_DISK);
    t->st.demoted_pages++;
    t->st.bytes_to_disk += page_cost_bytes(t);
    t->st.spill_seconds += page_cost_bytes(t) / disk_bw(t);
    sync_used(t);
}

/* Keep pool page pg (its meta is valid) in the tiers unless it is kept already. */
static void spill(cache_tier *t, int32_t pg)
{
    const uint64_t *k = t->meta_k + 2 * (int64_t)pg;
    const int32_t *toks = t->meta_toks + (int64_t)pg * t->P;
    int32_t e = map_find(t, k, toks);
    if (e >= 0) { /* kept already (write-through, or loaded from a tier): touch */
        int8_t tier = t->ent[e].tier;
        list_remove(t, e);
        list_push_head(t, e, tier);
        return;
    }
    if (t->cfg.host_pages <= 0 && t->cfg.disk_pages <= 0) {
        if (t->remote && tier_remote_write_back(t->remote)) remote_keep_page(t, pg);
        return;
    }
    bool to_host = t->cfg.host_pages > 0;
    if (to_host && t->host_free == 0) demote_host_tail(t);
    if (!to_host && t->disk_free == 0) {
        remote_keep_entry(t, t->lists[T_DISK].tail);
        drop(t, t->lists[T_DISK].tail);
        t->st.dropped_pages++;
    }
    /* Entries = both capacities, so a free slot means a free entry. */
    if (t->lists[T_FREE].head < 0 || (to_host ? t->host_free : t->disk_free) == 0) return;
    int32_t slot;
    if (to_host) {
        slot = t->host_slots[--t->host_free];
        if (t->mv.page_bytes && t->mv.read_page(t->mv.ctx, pg, host_bytes(t, slot)) != RKV_OK) {
            t->host_slots[t->host_free++] = slot;
            note_error(t, "tier: reading page %d from the KV memory failed", pg);
            return;
        }
    } else {
        slot = t->disk_slots[--t->disk_free];
        rkv_status rs = t->mv.page_bytes ? t->mv.read_page(t->mv.ctx, pg, t->scratch) : RKV_OK;
        if (rs == RKV_OK && disk_write(t, slot, t->scratch) != RKV_OK) rs = RKV_EIO;
        if (rs != RKV_OK) {
            t->disk_slots[t->disk_free++] = slot;
            note_error(t, "tier disk %s: spilling page %d failed: %s",
                       t->cfg.disk_dir ? t->cfg.disk_dir : "(simulated)", pg, strerror(errno));
            return;
        }
        t->st.bytes_to_disk += page_cost_bytes(t);
        t->st.spill_seconds += page_cost_bytes(t) / disk_bw(t);
    }
    e = t->lists[T_FREE].head;
    list_remove(t, e);
    tent *x = &t->ent[e];
    x->k0 = k[0];
    x->k1 = k[1];
    x->slot = slot;
    memcpy(t->ent_toks + (int64_t)e * t->P, toks, sizeof(int32_t) * (size_t)t->P);
    x->hnext = t->bucket[k[0] & t->mask];
    t->bucket[k[0] & t->mask] = e;
    list_push_head(t, e, to_host ? T_HOST : T_DISK);
    t->st.spilled_pages++;
    t->st.bytes_to_host += page_cost_bytes(t);
    t->st.spill_seconds += page_cost_bytes(t) / host_bw(t);
    sync_used(t);
}

/* ---------------------------------------------------------------- ops */

static inline cache_tier *tier_of(cache *c) { return (cache_tier *)c; }

static void mirror_stats(cache_tier *t)
{
    uint64_t mc = t->base.stats.match_calls, mt = t->base.stats.matched_tokens;
    t->base.stats = t->inner->stats;
    t->base.stats.match_calls = mc;
    t->base.stats.matched_tokens = mt;
}

/* Remember what the kind adopted: pages [from, np) that are now CACHED. */
static void record(cache_tier *t, const int32_t *tokens, const int32_t *pages, int32_t from,
                   int32_t np)
{
    const page_pool *pool = t->base.pool;
    for (int32_t k = from; k < np; k++) {
        int32_t pg = pages[k];
        if (pg < 0 || pg >= pool->num_pages || page_pool_state(pool, pg) != PAGE_CACHED) continue;
        memcpy(t->meta_k + 2 * (int64_t)pg, t->keys + 2 * k, 16);
        memcpy(t->meta_toks + (int64_t)pg * t->P, tokens + (int64_t)k * t->P,
               sizeof(int32_t) * (size_t)t->P);
        t->meta_valid[pg] = 1;
        if (t->cfg.write_through) spill(t, pg);
        if (t->remote && !tier_remote_write_back(t->remote)) remote_keep_page(t, pg);
    }
}

static int64_t tier_evict(cache *c, int64_t n_tokens)
{
    cache_tier *t = tier_of(c);
    page_pool *pool = c->pool;
    uint64_t mark = page_pool_free_mark(pool);
    int64_t freed = cache_evict(t->inner, n_tokens);
    /* Evict only frees: the pool's log since the mark holds the pages it
     * returned, and their bytes stay put until someone allocates them. */
    const page_run *gone = NULL;
    int32_t ngone = 0;
    page_pool_freed_since(pool, mark, &gone, &ngone); /* no allocation between */
    for (int32_t k = 0; k < ngone; k++)
        for (int32_t pg = gone[k].first, end = pg + gone[k].count; pg < end; pg++) {
            if (!t->meta_valid[pg]) continue;
            spill(t, pg);
            t->meta_valid[pg] = 0;
        }
    /* Stores reach the server before this call returns: another engine's
     * next lookup sees them (and replicas in one process stay repeatable). */
    if (t->remote) tier_remote_flush(t->remote);
    mirror_stats(t);
    return freed;
}

static rkv_status tier_insert(cache *c, const cache_seq *s, const int32_t *tokens, int32_t n,
                              const int32_t *pages, int32_t *prefix_len)
{
    cache_tier *t = tier_of(c);
    const uint64_t ns = s->ns;
    rkv_status st = cache_insert(t->inner, s, tokens, n, pages, prefix_len);
    mirror_stats(t);
    if (st != RKV_OK) return st;
    int32_t np = n / t->P, from = *prefix_len / t->P;
    if (from < np) {
        if ((st = chain_keys(t, tokens, np, ns)) != RKV_OK) return st;
        record(t, tokens, pages, from, np);
        if (t->remote) tier_remote_flush(t->remote);
    }
    return RKV_OK;
}

/* Chain page k, kept on host or disk, back into KV page t->pages[k], its
 * load time and hit counted; false ends the match's run (not kept any more,
 * or a read that failed: the entry is then dropped). */
static bool load_kept_page(cache_tier *t, int32_t k, const int32_t *tokens)
{
    const int32_t P = t->P;
    int32_t e = map_find(t, t->keys + 2 * k, tokens + (int64_t)k * P);
    if (e < 0) return false;
    tent *x = &t->ent[e];
    const uint8_t *src = NULL;
    rkv_status rs = RKV_OK;
    if (x->tier == T_HOST) src = host_bytes(t, x->slot);
    else if ((rs = disk_read(t, x->slot, t->scratch)) == RKV_OK) src = t->scratch;
    if (rs == RKV_OK && t->mv.page_bytes) rs = t->mv.write_page(t->mv.ctx, t->pages[k], src);
    if (rs != RKV_OK) {
        note_error(t, "tier: loading a page back failed (%s)", x->tier == T_DISK ? "disk" : "host");
        drop(t, e);
        return false;
    }
    double b = page_cost_bytes(t), secs = b / host_bw(t);
    if (x->tier == T_DISK) {
        secs += b / disk_bw(t);
        t->st.bytes_from_disk += b;
        t->st.disk_hit_pages++;
        t->st.disk_hit_tokens += (uint64_t)P;
    } else {
        t->st.host_hit_pages++;
        t->st.host_hit_tokens += (uint64_t)P;
    }
    t->st.bytes_from_host += b;
    t->st.load_seconds += secs;
    t->pending_load += secs;
    return true;
}

/* The wrapped cache sees the request's seq as it is: its namespace and
 * priority, and the locks this match takes and lets go in step 2 to 4. */
static rkv_status tier_match(cache *c, cache_seq *out, const int32_t *tokens, int32_t n)
{
    cache_tier *t = tier_of(c);
    const int32_t P = t->P;
    const uint64_t ns = out->ns;
    page_pool *pool = c->pool;
    int32_t remote_used = 0; /* pages loaded from the server */
    rkv_status st = cache_match_prefix(t->inner, out, tokens, n);
    c->stats.match_calls++;
    if (st != RKV_OK || n < 0) goto done;
    int32_t np = n / P, L = out->num_pages;
    if (L >= np || (t->lists[T_HOST].n + t->lists[T_DISK].n == 0 && !t->remote)) goto done;

    /* 1: the run of kept pages right after the kind's match. */
    if ((st = chain_keys(t, tokens, np, ns)) != RKV_OK) goto done;
    int32_t run = 0;
    for (int32_t k = L; k < np; k++) {
        int32_t e = map_find(t, t->keys + 2 * k, tokens + (int64_t)k * P);
        if (e < 0) break;
        int8_t tier = t->ent[e].tier;
        list_remove(t, e); /* touch: the spills below evict others first */
        list_push_head(t, e, tier);
        run++;
    }
    /* Pages [L + local, L + run) come from the server, after the local run. */
    int32_t local = run;
    if (t->remote && L + run < np)
        run += tier_remote_fetch(t->remote, t->keys + 2 * (L + run), tokens + (int64_t)(L + run) * P, np - L - run);
    if (run == 0) goto done;

    /* 2: room for them, the match locked so that eviction spares it. */
    if ((st = cache_lock(t->inner, out)) != RKV_OK) goto done;
    (void)cache_client_make_room(c, run, NULL); /* spills; short: a shorter run below */
    int32_t got = 0;
    for (; got < run && got < page_pool_num_free(pool); got++) /* still kept after the spills? */
        if (got < local && map_find(t, t->keys + 2 * (L + got), tokens + (int64_t)(L + got) * P) < 0) break;
    run = got;
    if (run == 0 || (st = reserve(t, np + 1)) != RKV_OK
        || (st = page_pool_alloc(pool, run, t->pages + L)) != RKV_OK) {
        cache_unlock(t->inner, out);
        goto done;
    }

    /* 3: bytes back into the KV memory, page by page; a failed read ends the run. */
    int32_t loaded = 0;
    for (; loaded < run; loaded++) {
        int32_t k = L + loaded;
        if (loaded >= local) { /* the fetched bytes are in the remote tier's buffer */
            if (t->mv.page_bytes
                && t->mv.write_page(t->mv.ctx, t->pages[k], tier_remote_page(t->remote, loaded - local)) != RKV_OK) {
                note_error(t, "tier: loading a page back failed (remote)");
                break;
            }
            continue;
        }
        if (!load_kept_page(t, k, tokens)) break;
    }
    if (loaded > local) remote_used = loaded - local;
    if (loaded < run) page_pool_free(pool, t->pages + L + loaded, run - loaded);

    /* 4: hand them to the kind, then match again for one ordinary handle. */
    int32_t prefix = 0;
    if (L) memcpy(t->pages, out->pages, sizeof(int32_t) * (size_t)L);
    if (loaded > 0)
        st = cache_client_commit(t->inner, out, tokens, (L + loaded) * P, t->pages, L, L + loaded,
                                 &prefix);
    if (st == RKV_OK && loaded > 0) {
        for (int32_t k = L; k < L + loaded; k++) { /* pages are ours from here */
            int32_t pg = t->pages[k];
            if (page_pool_state(pool, pg) != PAGE_CACHED) continue;
            memcpy(t->meta_k + 2 * (int64_t)pg, t->keys + 2 * k, 16);
            memcpy(t->meta_toks + (int64_t)pg * P, tokens + (int64_t)k * P, sizeof(int32_t) * (size_t)P);
            t->meta_valid[pg] = 1;
        }
    }
    rkv_status us = cache_unlock(t->inner, out);
    if (st == RKV_OK) st = us;
    if (st == RKV_OK) st = cache_match_prefix(t->inner, out, tokens, n);
done:
    if (t->remote) { /* a lookup costs its round trips, hit or miss */
        double secs = tier_remote_take_loaded(t->remote, remote_used)
                      + (double)remote_used * page_cost_bytes(t) / host_bw(t);
        t->st.load_seconds += secs;
        t->pending_load += secs;
    }
    if (st == RKV_OK) c->stats.matched_tokens += (uint64_t)out->len;
    mirror_stats(t);
    return st;
}

/* The kind's own ops: cache_lock() on the tier counts s->locks once. */
static rkv_status tier_lock(cache *c, const cache_seq *s)
{
    cache *in = tier_of(c)->inner;
    return in->ops->lock(in, s);
}
static rkv_status tier_unlock(cache *c, const cache_seq *s)
{
    cache *in = tier_of(c)->inner;
    return in->ops->unlock(in, s);
}

static void tier_sizes(const cache *c, cache_sizes *out)
{
    const cache_tier *t = (const cache_tier *)c;
    t->inner->ops->sizes(t->inner, out);
}

static rkv_status tier_check(const cache *c, char *err, size_t errlen)
{
    const cache_tier *t = (const cache_tier *)c;
    rkv_status st = cache_check(t->inner, err, errlen);
    if (st != RKV_OK) return st;
    int64_t seen[3] = {0, 0, 0};
    for (int tier = 0; tier < 3; tier++) {
        int32_t prev = -1;
        for (int32_t e = t->lists[tier].head; e >= 0; prev = e, e = t->ent[e].next) {
            if (t->ent[e].tier != tier || t->ent[e].prev != prev || ++seen[tier] > t->num_entries)
                return rkv_fail(RKV_ECORRUPT, err, errlen, "tier: list %d broken at entry %d", tier, e);
            if (tier != T_FREE
                && map_find(t, (uint64_t[2]){t->ent[e].k0, t->ent[e].k1}, t->ent_toks + (int64_t)e * t->P) != e)
                return rkv_fail(RKV_ECORRUPT, err, errlen, "tier: entry %d not found by its key", e);
        }
        if (seen[tier] != t->lists[tier].n || prev != t->lists[tier].tail)
            return rkv_fail(RKV_ECORRUPT, err, errlen, "tier: list %d counts %lld, holds %lld", tier,
                        (long long)t->lists[tier].n, (long long)seen[tier]);
    }
    if (seen[0] + seen[1] + seen[2] != t->num_entries || seen[T_HOST] > t->cfg.host_pages
        || seen[T_DISK] > t->cfg.disk_pages || seen[T_HOST] + t->host_free != t->cfg.host_pages
        || seen[T_DISK] + t->disk_free != t->cfg.disk_pages)
        return rkv_fail(RKV_ECORRUPT, err, errlen, "tier: host %lld + %lld free / %lld, disk %lld + %lld free / %lld",
                    (long long)seen[T_HOST], (long long)t->host_free, (long long)t->cfg.host_pages,
                    (long long)seen[T_DISK], (long long)t->disk_free, (long long)t->cfg.disk_pages);
    return RKV_OK;
}

static void tier_dump(const cache *c, FILE *f, cache_dump_format fmt)
{
    const cache_tier *t = (const cache_tier *)c;
    cache_dump(t->inner, f, fmt);
}

static void tier_destroy(cache *c)
{
    cache_tier *t = tier_of(c);
    cache_destroy(t->inner);
    tier_remote_close(t->remote);
    if (t->disk_fd >= 0) close(t->disk_fd);
    free(t->ent);
    free(t->ent_toks);
    free(t->bucket);
    free(t->host_slots);
    free(t->disk_slots);
    free(t->host_buf);
    free(t->scratch);
    free(t->meta_k);
    free(t->meta_valid);
    free(t->meta_toks);
    free(t->keys);
    free(t->run);
    free(t->pages);
    block_hasher_destroy(&t->hasher);
    free(t);
}

/* The node hooks are the kind's: the tier keeps pages, not nodes. */
static bool tier_set_evict_hook(cache *c, cache_node_fn fn, void *ctx)
{
    return cache_set_evict_hook(tier_of(c)->inner, fn, ctx);
}

static bool tier_visit(const cache *c, cache_node_fn fn, void *ctx)
{
    return cache_visit(((const cache_tier *)c)->inner, fn, ctx);
}

static bool tier_clock(const cache *c, uint64_t *out)
{
    return cache_clock(((const cache_tier *)c)->inner, out);
}

static const cache_ops tier_ops = {
    .name = "tier",
    .match = tier_match,
    .insert = tier_insert,
    .lock = tier_lock,
    .unlock = tier_unlock,
    .evict = tier_evict,
    .sizes = tier_sizes,
    .check = tier_check,
    .dump = tier_dump,
    .destroy = tier_destroy,
    .set_evict_hook = tier_set_evict_hook,
    .visit = tier_visit,
    .clock = tier_clock,
};

/* The disk tier's file in cfg.disk_dir. A directory we cannot write fails
 * now, not at the first spill; a missing one (its parent existing) is made,
 * as --dump-dir is. The file is written once to be sure the directory takes
 * data, then unlinked while open (see disk_write). */
static rkv_status disk_open(cache_tier *t, char *err, size_t errlen)
{
    const char *dir = t->cfg.disk_dir;
    char path[4096];
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        int e = errno;
        return rkv_fail(RKV_EIO, err, errlen, "tier directory %s cannot be written (nor created): %s",
                        dir, strerror(e));
    }
    snprintf(path, sizeof path, "%s/rkv-%ld-%d.pages", dir, (long)getpid(), t->instance);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    bool ok = fd >= 0 && write(fd, "x", 1) == 1;
    int e = errno;
    if (fd >= 0) unlink(path);
    if (ok) {
        t->disk_fd = fd;
        return RKV_OK;
    }
    if (fd >= 0) close(fd);
    return rkv_fail(RKV_EIO, err, errlen, "tier directory %s cannot be written: %s", dir,
                    strerror(e));
}

rkv_status cache_tier_wrap(cache *inner, const tier_config *cfg, const tier_mover *mover,
                           cache **out, char *err, size_t errlen)
{
    static int instances;
    *out = NULL;
    if (!inner || !cfg) return rkv_fail(RKV_EINVAL, err, errlen, "tier: no cache or configuration");
    if (cfg->host_pages < 0 || cfg->disk_pages < 0 || cfg->host_pages + cfg->disk_pages > INT32_MAX / 2)
        return rkv_fail(RKV_EINVAL, err, errlen, "tier: capacities must be in [0, %d] pages", INT32_MAX / 2);
    if (cfg->host_bw < 0 || cfg->disk_bw < 0 || cfg->modelled_page_bytes < 0)
        return rkv_fail(RKV_EINVAL, err, errlen, "tier: bandwidths and page bytes must be >= 0");
    size_t pb = mover && mover->read_page && mover->write_page ? mover->page_bytes : 0;
    if (cfg->disk_pages > 0 && pb > 0 && !cfg->disk_dir)
        return rkv_fail(RKV_EINVAL, err, errlen, "tier: a disk tier that holds data needs a directory");
    cache_tier *t = calloc(1, sizeof *t);
    if (!t) return rkv_fail(RKV_ENOMEM, err, errlen, "tier: out of host memory");
    t->cfg = *cfg;
    if (mover && pb) t->mv = *mover;
    t->instance = instances++;
    t->disk_fd = -1;
    t->inner = inner;
    t->P = inner->page_size;
    t->base.ops = &tier_ops;
    t->base.pool = inner->pool;
    t->base.page_size = inner->page_size;
    t->base.caps = inner->caps; /* a spill tier changes where pages live, not what a match finds */
    t->num_entries = cfg->host_pages + cfg->disk_pages;
    const int64_t E = t->num_entries > 0 ? t->num_entries : 1, NP = inner->pool->num_pages + 1;
    uint64_t nb = 16;
    while (nb < 2 * (uint64_t)E) nb *= 2;
    t->mask = nb - 1;
    t->ent = calloc((size_t)E, sizeof *t->ent);
    t->ent_toks = malloc(sizeof(int32_t) * (size_t)E * (size_t)t->P);
    t->bucket = malloc(sizeof(int32_t) * nb);
    t->host_slots = malloc(sizeof(int32_t) * (size_t)(cfg->host_pages + 1));
    t->disk_slots = malloc(sizeof(int32_t) * (size_t)(cfg->disk_pages + 1));
    t->host_buf = pb && cfg->host_pages ? malloc(pb * (size_t)cfg->host_pages) : NULL;
    t->scratch = malloc(pb ? pb : 1);
    t->meta_k = malloc(sizeof(uint64_t) * 2 * (size_t)NP);
    t->meta_valid = calloc((size_t)NP, 1);
    t->meta_toks = malloc(sizeof(int32_t) * (size_t)NP * (size_t)t->P);
    bool hashed = block_hasher_init(&t->hasher, "xxh3", t->P, NULL, 0) == RKV_OK;
    if (!t->ent || !t->ent_toks || !t->bucket || !t->host_slots || !t->disk_slots
        || (pb && cfg->host_pages && !t->host_buf) || !t->scratch || !t->meta_k || !t->meta_valid
        || !t->meta_toks || !hashed || reserve(t, 64) != RKV_OK
        || page_pool_log_reserve(inner->pool) != RKV_OK) { /* tier_evict reads the log */
        /* The count is read before the tier goes; inner survives: the caller keeps it. */
        const long long entries = (long long)t->num_entries;
        t->inner = NULL;
        cache_destroy(&t->base);
        return rkv_fail(RKV_ENOMEM, err, errlen, "tier: out of host memory for %lld entries", entries);
    }
    for (uint64_t i = 0; i < nb; i++) t->bucket[i] = -1;
    for (int tier = 0; tier < 3; tier++) t->lists[tier] = (tier_list){-1, -1, 0};
    for (int32_t e = (int32_t)t->num_entries - 1; e >= 0; e--) {
        t->ent[e].hnext = -1;
        list_push_head(t, e, T_FREE);
    }
    for (int64_t s = 0; s < cfg->host_pages; s++) t->host_slots[s] = (int32_t)(cfg->host_pages - 1 - s);
    for (int64_t s = 0; s < cfg->disk_pages; s++) t->disk_slots[s] = (int32_t)(cfg->disk_pages - 1 - s);
    t->host_free = cfg->host_pages;
    t->disk_free = cfg->disk_pages;

    if (cfg->disk_pages > 0 && cfg->disk_dir) {
        rkv_status ds = disk_open(t, err, errlen);
        if (ds != RKV_OK) {
            t->inner = NULL;
            t->cfg.disk_dir = NULL;
            cache_destroy(&t->base);
            return ds;
        }
    }
    if (cfg->remote.url) {
        tier_remote_config rc = cfg->remote;
        if (rc.modelled_page_bytes <= 0) rc.modelled_page_bytes = page_cost_bytes(t);
        rkv_status rs = tier_remote_open(&rc, t->P, pb, &t->remote, err, errlen);
        if (rs != RKV_OK) {
            t->inner = NULL;
            t->cfg.disk_dir = NULL;
            cache_destroy(&t->base);
            return rs;
        }
    }
    *out = &t->base;
    return RKV_OK;
}

const tier_stats *cache_tier_get_stats(const cache *c)
{
    return c && c->ops == &tier_ops ? &((const cache_tier *)c)->st : NULL;
}

cache *cache_tier_inner(cache *c) { return c && c->ops == &tier_ops ? tier_of(c)->inner : c; }

double cache_tier_take_seconds(cache *c)
{
    if (!c || c->ops != &tier_ops) return 0;
    double s = tier_of(c)->pending_load;
    tier_of(c)->pending_load = 0;
    return s;
}

const tier_remote_stats *cache_tier_remote_stats(const cache *c)
{
    return c && c->ops == &tier_ops ? tier_remote_get_stats(((const cache_tier *)c)->remote) : NULL;
}

const char *cache_tier_last_error(const cache *c)
{
    if (!c || c->ops != &tier_ops) return NULL;
    const cache_tier *t = (const cache_tier *)c;
    return t->last_error[0] ? t->last_error : NULL;
}
