/* tier_remote.c - see tier_remote.h.
 *
 * The index is a chained hash map on the 128-bit key plus one LRU list
 * (head = most recent) over a fixed array of entries; free entries form a
 * stack. Values are built in one buffer: header | tokens | bytes.
 */
#include "tier_remote.h"

#include <errno.h>
#include <stddef.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <xxhash.h>

#include "rkv_config.h"
#include "rkv_core.h"

void tier_remote_config_default(tier_remote_config *c)
{
    memset(c, 0, sizeof *c);
    c->pages = 65536;
    c->ttl_s = 86400;
}

int tier_remote_parse_url(const char *url, char *host, size_t hostlen, int *port, int *db,
                          char *why, size_t whylen)
{
    const char *pre = "redis://";
    if (!url || strncmp(url, pre, strlen(pre))) {
        snprintf(why, whylen, "expected redis://HOST:PORT[/DB]");
        return -1;
    }
    const char *h = url + strlen(pre), *colon = strchr(h, ':');
    if (!colon || colon == h || (size_t)(colon - h) >= hostlen) {
        snprintf(why, whylen, "expected redis://HOST:PORT[/DB] (host missing or too long)");
        return -1;
    }
    memcpy(host, h, (size_t)(colon - h));
    host[colon - h] = 0;
    char *end;
    errno = 0;
    long p = strtol(colon + 1, &end, 10);
    if (errno || end == colon + 1 || p < 1 || p > 65535 || (*end && *end != '/')) {
        snprintf(why, whylen, "port must be in [1, 65535]");
        return -1;
    }
    *port = (int)p;
    *db = 0;
    if (*end == '/') {
        const char *d = end + 1;
        long x = strtol(d, &end, 10);
        if (end == d || *end || x < 0 || x > 1023) {
            snprintf(why, whylen, "database must be an integer in [0, 1023]");
            return -1;
        }
        *db = (int)x;
    }
    return 0;
}

void tier_remote_stats_add(tier_remote_stats *sum, const tier_remote_stats *s)
{
    sum->hit_pages += s->hit_pages;
    sum->hit_tokens += s->hit_tokens;
    sum->lookups += s->lookups;
    sum->misses += s->misses;
    sum->corrupt_values += s->corrupt_values;
    sum->stored_pages += s->stored_pages;
    sum->skipped_pages += s->skipped_pages;
    sum->deleted_pages += s->deleted_pages;
    sum->dropped_pages += s->dropped_pages;
    sum->refused_pages += s->refused_pages;
    sum->failed_lookups += s->failed_lookups;
    sum->reconnects += s->reconnects;
    sum->bytes_loaded += s->bytes_loaded;
    sum->bytes_stored += s->bytes_stored;
    sum->load_seconds += s->load_seconds;
    sum->store_seconds += s->store_seconds;
    sum->indexed += s->indexed;
    sum->down = sum->down || s->down;
}


/* ---------------------------------------------------------------- values */

enum { HDR_BYTES = 120 };
#define RKV_MAGIC 0x50564b52u /* "RKVP" little-endian */
#define RKV_VALUE_VERSION 2

/* Version 2 carries what the key names (chain hash, model id, namespace), so
 * a valid value stored under another key, e.g. one of an equal page of
 * tokens after a different prefix, is told apart from the right one. */
typedef struct rhdr {
    uint32_t magic;
    uint16_t version, hdr_bytes;
    uint32_t page_size;
    uint32_t payload;   /* page bytes after the tokens */
    double modelled;    /* bytes the page stands for in the time model */
    uint64_t sum;       /* XXH3-64 of everything after this field */
    uint64_t k0, k1;    /* the chain hash: the key it belongs to */
    uint64_t model_id;
    char ns[64];        /* NUL-padded */
} rhdr;
_Static_assert(sizeof(rhdr) == HDR_BYTES, "header layout");
_Static_assert(sizeof(((rhdr *)0)->ns) >= TIER_REMOTE_NS_MAX + 1, "namespace fits the header");

#define SUM_FROM offsetof(rhdr, k0)

size_t tier_remote_value_bytes(int32_t P, size_t page_bytes)
{
    return HDR_BYTES + sizeof(int32_t) * (size_t)P + page_bytes;
}

void tier_remote_value_encode(const tier_remote_value_id *id, const int32_t *toks, const void *bytes,
                              double modelled, uint8_t *out)
{
    rhdr h;
    memset(&h, 0, sizeof h);
    h.magic = RKV_MAGIC;
    h.version = RKV_VALUE_VERSION;
    h.hdr_bytes = HDR_BYTES;
    h.page_size = (uint32_t)id->page_size;
    h.payload = (uint32_t)id->page_bytes;
    h.modelled = modelled;
    h.k0 = id->k0;
    h.k1 = id->k1;
    h.model_id = id->model_id;
    snprintf(h.ns, sizeof h.ns, "%s", id->ns);
    memcpy(out, &h, HDR_BYTES);
    uint8_t *body = out + HDR_BYTES;
    memcpy(body, toks, sizeof(int32_t) * (size_t)id->page_size);
    if (id->page_bytes) memcpy(body + sizeof(int32_t) * (size_t)id->page_size, bytes, id->page_bytes);
    h.sum = XXH3_64bits(out + SUM_FROM, tier_remote_value_bytes(id->page_size, id->page_bytes) - SUM_FROM);
    memcpy(out + offsetof(rhdr, sum), &h.sum, sizeof h.sum);
}

const void *tier_remote_value_check(const tier_remote_value_id *id, const int32_t *toks,
                                    const void *val, size_t len)
{
    const int32_t P = id->page_size;
    if (P < 1 || len != tier_remote_value_bytes(P, id->page_bytes)) return NULL;
    rhdr h;
    memcpy(&h, val, HDR_BYTES);
    const uint8_t *body = (const uint8_t *)val + HDR_BYTES;
    char ns[sizeof h.ns];
    memset(ns, 0, sizeof ns);
    snprintf(ns, sizeof ns, "%s", id->ns);
    if (h.magic != RKV_MAGIC || h.version != RKV_VALUE_VERSION || h.hdr_bytes != HDR_BYTES
        || h.page_size != (uint32_t)P || h.payload != id->page_bytes
        || h.k0 != id->k0 || h.k1 != id->k1 || h.model_id != id->model_id
        || memcmp(h.ns, ns, sizeof ns)
        || h.sum != XXH3_64bits((const uint8_t *)val + SUM_FROM, len - SUM_FROM)
        || memcmp(body, toks, sizeof(int32_t) * (size_t)P))
        return NULL;
    return body + sizeof(int32_t) * (size_t)P;
}

#if RKV_HAVE_HIREDIS

#include <hiredis/hiredis.h>

enum { KEY_MAX = 160 };

/* An index entry: a key this engine stored, and under which connection. */
typedef struct rent {
    uint64_t k0, k1;
    int32_t hnext, prev, next;
    uint32_t epoch;        /* the connection (r->epoch) its SET went out on */
    double stored_at;      /* monotonic seconds of that SET (expiry refresh) */
} rent;

/* A command whose reply is still unread, in pipeline order. */
typedef struct qop {
    uint64_t k0, k1;
    bool set;              /* SET (else DEL) */
} qop;

struct tier_remote {
    tier_remote_config cfg;
    char host[256];
    int port, db;
    char ns[64];
    redisContext *c;
    int32_t P;
    size_t page_bytes, value_bytes;
    double page_cost;
    tier_remote_stats st;
    bool warned_load, warned_store, warned_refused;
    double next_retry;     /* monotonic seconds */
    uint32_t epoch;        /* connections made so far */

    int32_t queued;        /* SETs and DELs appended, replies unread */
    qop q[TIER_REMOTE_BATCH + 1]; /* (queued) what they were */
    uint8_t *val;          /* (value_bytes) */

    uint8_t *got;          /* (got_cap, page_bytes) bytes of the last fetch */
    int32_t got_cap, got_n, got_batches;

    rent *ent;             /* (cap) */
    int32_t *bucket;       /* (nb) */
    uint64_t mask;
    int32_t cap, head, tail, free_top;
    int32_t *free_stack;
};

bool tier_remote_available(void) { return true; }

static double mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static struct timeval tv_of(double s)
{
    struct timeval tv = {(time_t)s, (suseconds_t)((s - (double)(time_t)s) * 1e6)};
    return tv;
}

static double timeout_of(const tier_remote *r) { return r->cfg.timeout_s > 0 ? r->cfg.timeout_s : 1.0; }
static double bw_of(const tier_remote *r) { return r->cfg.bw > 0 ? r->cfg.bw : 12.5e9; }
static double latency_of(const tier_remote *r) { return r->cfg.latency_s > 0 ? r->cfg.latency_s : 50e-6; }

static int key_string(const tier_remote *r, uint64_t k0, uint64_t k1, char *buf)
{
    return snprintf(buf, KEY_MAX, "rkv:%s:%016" PRIx64 ":p%d:%016" PRIx64 "%016" PRIx64, r->ns,
                    r->cfg.model_id, r->P, k1, k0);
}

/* ---------------------------------------------------------------- connection */

static redisContext *connect_to(const tier_remote *r, char *err, size_t errlen)
{
    redisContext *c = redisConnectWithTimeout(r->host, r->port, tv_of(timeout_of(r)));
    if (!c || c->err) {
        snprintf(err, errlen, "%s", c ? c->errstr : "out of memory");
        if (c) redisFree(c);
        return NULL;
    }
    redisSetTimeout(c, tv_of(timeout_of(r)));
    redisReply *rep = r->db ? redisCommand(c, "SELECT %d", r->db) : redisCommand(c, "PING");
    bool ok = rep && rep->type != REDIS_REPLY_ERROR;
    if (!ok) snprintf(err, errlen, "%s", rep ? rep->str : c->errstr);
    if (rep) freeReplyObject(rep);
    if (!ok) {
        redisFree(c);
        return NULL;
    }
    return c;
}

static void index_clear(tier_remote *r);

/* The connection broke: drop it; warn once per direction. */
static void go_down(tier_remote *r, bool loading)
{
    char why[256];
    snprintf(why, sizeof why, "%s", r->c && r->c->err ? r->c->errstr : "unreachable");
    if (r->c) redisFree(r->c);
    r->c = NULL;
    /* SETs sent but never confirmed: dropped. Their keys stay in the index
     * (they may be on the server), so they are stored again when met again
     * and deleted when they age out of it: nothing is orphaned. */
    for (int32_t i = 0; i < r->queued; i++) r->st.dropped_pages += r->q[i].set;
    r->queued = 0;
    r->st.down = true;
    r->next_retry = mono_now() + 1.0;
    bool *w = loading ? &r->warned_load : &r->warned_store;
    if (!*w) {
        *w = true;
        fprintf(stderr, "radixkv: warning: remote tier redis://%s:%d: %s; %s\n", r->host, r->port, why,
                loading ? "page lookups count as misses while it is down"
                        : "page stores are dropped while it is down");
    }
}

/* Usable connection now? Tries one reconnect a second while down. */
static bool up(tier_remote *r)
{
    if (r->c) return true;
    if (mono_now() < r->next_retry) return false;
    char err[256];
    r->c = connect_to(r, err, sizeof err);
    if (!r->c) {
        r->next_retry = mono_now() + 1.0;
        return false;
    }
    /* The server may have restarted empty: what we stored is unknown now.
     * The index keeps those keys (they bound this engine's share, and are
     * deleted when they age out) but a new epoch makes each of them stored
     * again before it counts as there. A later outage warns again. */
    r->epoch++;
    r->st.down = false;
    r->st.reconnects++;
    r->warned_load = r->warned_store = false;
    return true;
}

static int32_t index_find(const tier_remote *r, uint64_t k0, uint64_t k1);
static void index_remove(tier_remote *r, int32_t e);

/* Read the replies of queued stores. A SET counts as stored only when the
 * server says OK; one it refuses (an error reply: out of memory under
 * maxmemory with noeviction, a read-only replica, ...) is counted, warned
 * about once, and its key leaves the index (it is not there). */
static void drain(tier_remote *r)
{
    int32_t done = 0;
    while (r->c && done < r->queued) {
        redisReply *rep = NULL;
        if (redisGetReply(r->c, (void **)&rep) != REDIS_OK) {
            memmove(r->q, r->q + done, sizeof *r->q * (size_t)(r->queued - done));
            r->queued -= done;
            go_down(r, false);
            return;
        }
        const qop *op = &r->q[done++];
        bool ok = rep && rep->type != REDIS_REPLY_ERROR;
        if (op->set && ok && rep->type == REDIS_REPLY_STATUS) {
            r->st.stored_pages++;
            r->st.bytes_stored += r->page_cost;
        } else if (op->set) {
            r->st.refused_pages++;
            int32_t e = index_find(r, op->k0, op->k1);
            if (e >= 0) index_remove(r, e);
            if (!r->warned_refused) {
                r->warned_refused = true;
                fprintf(stderr, "radixkv: warning: remote tier redis://%s:%d refused a page store: %s; "
                        "refused stores are counted (remote_refused_pages), never as stored\n",
                        r->host, r->port, rep && rep->type == REDIS_REPLY_ERROR ? rep->str : "unexpected reply");
            }
        }
        if (rep) freeReplyObject(rep);
    }
    r->queued = 0;
}

/* ---------------------------------------------------------------- index */

static void index_unlink(tier_remote *r, int32_t e)
{
    rent *x = &r->ent[e];
    if (x->prev >= 0) r->ent[x->prev].next = x->next; else r->head = x->next;
    if (x->next >= 0) r->ent[x->next].prev = x->prev; else r->tail = x->prev;
    x->prev = x->next = -1;
}

static void index_push(tier_remote *r, int32_t e)
{
    rent *x = &r->ent[e];
    x->prev = -1;
    x->next = r->head;
    if (r->head >= 0) r->ent[r->head].prev = e; else r->tail = e;
    r->head = e;
}

static int32_t index_find(const tier_remote *r, uint64_t k0, uint64_t k1)
{
    for (int32_t e = r->bucket[k0 & r->mask]; e >= 0; e = r->ent[e].hnext)
        if (r->ent[e].k0 == k0 && r->ent[e].k1 == k1) return e;
    return -1;
}

static void index_remove(tier_remote *r, int32_t e)
{
    int32_t *pp = &r->bucket[r->ent[e].k0 & r->mask];
    while (*pp != e) pp = &r->ent[*pp].hnext;
    *pp = r->ent[e].hnext;
    index_unlink(r, e);
    r->free_stack[r->free_top++] = e;
    r->st.indexed--;
}

static void index_clear(tier_remote *r)
{
    for (uint64_t b = 0; b <= r->mask; b++) r->bucket[b] = -1;
    r->head = r->tail = -1;
    r->free_top = 0;
    for (int32_t e = r->cap - 1; e >= 0; e--) r->free_stack[r->free_top++] = e;
    r->st.indexed = 0;
}

/* ---------------------------------------------------------------- open, close */

rkv_status tier_remote_open(const tier_remote_config *cfg, int32_t P, size_t page_bytes,
                            tier_remote **out, char *err, size_t errlen)
{
    *out = NULL;
    char why[256];
    if (!cfg || !cfg->url || P < 1) {
        snprintf(err, errlen, "remote tier: no URL or page size");
        return RKV_EINVAL;
    }
    if (cfg->ttl_s < 0 || cfg->ttl_s > TIER_REMOTE_TTL_MAX) {
        snprintf(err, errlen, "remote tier %s: key expiry must be in [0, %d] seconds", cfg->url,
                 TIER_REMOTE_TTL_MAX);
        return RKV_EINVAL;
    }
    if (cfg->pages < 1 || cfg->pages > INT32_MAX / 2) {
        snprintf(err, errlen, "remote tier %s: capacity must be in [1, %d] pages", cfg->url, INT32_MAX / 2);
        return RKV_EINVAL;
    }
    if (cfg->ns && (strlen(cfg->ns) == 0 || strlen(cfg->ns) > TIER_REMOTE_NS_MAX || strpbrk(cfg->ns, ": \t\r\n"))) {
        snprintf(err, errlen, "remote tier namespace '%s': 1 to %d characters, no ':' or spaces", cfg->ns,
                 TIER_REMOTE_NS_MAX);
        return RKV_EINVAL;
    }
    tier_remote *r = calloc(1, sizeof *r);
    if (!r) {
        snprintf(err, errlen, "remote tier: out of host memory");
        return RKV_ENOMEM;
    }
    r->cfg = *cfg;
    if (tier_remote_parse_url(cfg->url, r->host, sizeof r->host, &r->port, &r->db, why, sizeof why)) {
        snprintf(err, errlen, "remote tier URL '%s': %s", cfg->url, why);
        free(r);
        return RKV_EINVAL;
    }
    snprintf(r->ns, sizeof r->ns, "%s", cfg->ns ? cfg->ns : "default");
    r->P = P;
    r->page_bytes = page_bytes;
    r->value_bytes = tier_remote_value_bytes(P, page_bytes);
    r->page_cost = cfg->modelled_page_bytes > 0 ? cfg->modelled_page_bytes : (double)page_bytes;
    r->cap = (int32_t)cfg->pages;
    uint64_t nb = 16;
    while (nb < 2 * (uint64_t)r->cap) nb *= 2;
    r->mask = nb - 1;
    r->ent = malloc(sizeof *r->ent * (size_t)r->cap);
    r->bucket = malloc(sizeof *r->bucket * nb);
    r->free_stack = malloc(sizeof *r->free_stack * (size_t)r->cap);
    r->val = malloc(r->value_bytes);
    if (!r->ent || !r->bucket || !r->free_stack || !r->val) {
        tier_remote_close(r);
        snprintf(err, errlen, "remote tier: out of host memory for %d index entries", (int)cfg->pages);
        return RKV_ENOMEM;
    }
    for (int32_t e = 0; e < r->cap; e++) r->ent[e].hnext = r->ent[e].prev = r->ent[e].next = -1;
    index_clear(r);
    r->c = connect_to(r, why, sizeof why);
    if (!r->c) {
        snprintf(err, errlen, "remote tier %s: cannot reach the server: %s", cfg->url, why);
        tier_remote_close(r);
        return RKV_EIO;
    }
    *out = r;
    return RKV_OK;
}

void tier_remote_close(tier_remote *r)
{
    if (!r) return;
    if (r->c) {
        drain(r);
        if (r->c) redisFree(r->c);
    }
    free(r->ent);
    free(r->bucket);
    free(r->free_stack);
    free(r->val);
    free(r->got);
    free(r);
}

/* ---------------------------------------------------------------- store */

void tier_remote_flush(tier_remote *r) { drain(r); }

void tier_remote_put(tier_remote *r, const uint64_t key[2], const int32_t *toks, const void *bytes)
{
    int32_t e = index_find(r, key[0], key[1]);
    double now = mono_now();
    if (e >= 0 && r->ent[e].epoch == r->epoch
        && (r->cfg.ttl_s <= 0 || now - r->ent[e].stored_at < 0.5 * (double)r->cfg.ttl_s)) {
        index_unlink(r, e); /* stored already (by us, on this connection): keep it young */
        index_push(r, e);
        r->st.skipped_pages++;
        return;
    }
    if (!up(r)) {
        r->st.dropped_pages++;
        if (!r->warned_store) go_down(r, false);
        return;
    }
    char k[KEY_MAX];
    if (e < 0 && r->free_top == 0) { /* our share is full: its oldest key goes */
        int32_t old = r->tail;
        int kl = key_string(r, r->ent[old].k0, r->ent[old].k1, k);
        redisAppendCommand(r->c, "DEL %b", k, (size_t)kl);
        r->q[r->queued++] = (qop){r->ent[old].k0, r->ent[old].k1, false};
        index_remove(r, old);
        r->st.deleted_pages++;
    }
    tier_remote_value_id id = {r->P, r->page_bytes, key[0], key[1], r->cfg.model_id, r->ns};
    tier_remote_value_encode(&id, toks, bytes, r->page_cost, r->val);
    int kl = key_string(r, key[0], key[1], k);
    /* An expiry bounds what an engine that stops without deleting its keys
     * (killed, or cut off from the server) leaves behind. */
    if (r->cfg.ttl_s > 0)
        redisAppendCommand(r->c, "SET %b %b EX %lld", k, (size_t)kl, r->val, r->value_bytes,
                           (long long)r->cfg.ttl_s);
    else
        redisAppendCommand(r->c, "SET %b %b", k, (size_t)kl, r->val, r->value_bytes);
    r->q[r->queued++] = (qop){key[0], key[1], true};
    if (e < 0) {
        e = r->free_stack[--r->free_top];
        r->ent[e].k0 = key[0];
        r->ent[e].k1 = key[1];
        r->ent[e].hnext = r->bucket[key[0] & r->mask];
        r->bucket[key[0] & r->mask] = e;
        r->st.indexed++;
    } else {
        index_unlink(r, e);
    }
    index_push(r, e);
    r->ent[e].epoch = r->epoch;
    r->ent[e].stored_at = now;
    r->st.store_seconds += r->page_cost / bw_of(r);
    if (r->queued >= TIER_REMOTE_BATCH) drain(r);
}

/* ---------------------------------------------------------------- load */

/* Is reply rep the valid value of key kk for tokens toks? Copies its bytes to dst. */
static bool accept(tier_remote *r, const redisReply *rep, const uint64_t *kk, const int32_t *toks,
                   uint8_t *dst)
{
    if (rep->type != REDIS_REPLY_STRING) return false;
    tier_remote_value_id id = {r->P, r->page_bytes, kk[0], kk[1], r->cfg.model_id, r->ns};
    const void *bytes = tier_remote_value_check(&id, toks, rep->str, rep->len);
    if (!bytes) return false;
    if (r->page_bytes) memcpy(dst, bytes, r->page_bytes);
    return true;
}

int32_t tier_remote_fetch(tier_remote *r, const uint64_t *keys, const int32_t *tokens, int32_t n)
{
    r->got_n = r->got_batches = 0;
    if (n <= 0) return 0;
    if (!up(r)) {
        r->st.failed_lookups++;
        if (!r->warned_load) go_down(r, true);
        return 0;
    }
    drain(r); /* our own stores first: a lookup may want them */
    if (!r->c) return 0;
    if (rkv_grow32((void **)&r->got, &r->got_cap, n, r->page_bytes ? r->page_bytes : 1)) return 0;
    char k[KEY_MAX];
    int32_t done = 0;
    bool miss = false;
    while (done < n && !miss) {
        int32_t b = n - done < TIER_REMOTE_BATCH ? n - done : TIER_REMOTE_BATCH;
        for (int32_t i = 0; i < b; i++) {
            const uint64_t *kk = keys + 2 * (int64_t)(done + i);
            int kl = key_string(r, kk[0], kk[1], k);
            redisAppendCommand(r->c, "GET %b", k, (size_t)kl);
        }
        r->got_batches++;
        r->st.lookups += (uint64_t)b;
        for (int32_t i = 0; i < b; i++) { /* every reply is read, also after a miss */
            redisReply *rep = NULL;
            if (redisGetReply(r->c, (void **)&rep) != REDIS_OK) {
                go_down(r, true);
                r->st.failed_lookups++;
                return r->got_n = done;
            }
            int32_t at = done + i;
            if (!miss && rep->type == REDIS_REPLY_NIL) {
                miss = true;
                r->st.misses++;
            } else if (!miss) {
                const uint64_t *kk = keys + 2 * (int64_t)at;
                if (accept(r, rep, kk, tokens + (int64_t)at * r->P, r->got + (size_t)at * r->page_bytes)) {
                    r->got_n = at + 1;
                    int32_t e = index_find(r, kk[0], kk[1]);
                    if (e >= 0) { /* ours and read again: keep it young */
                        index_unlink(r, e);
                        index_push(r, e);
                    }
                } else {
                    miss = true;
                    r->st.corrupt_values++;
                }
            }
            freeReplyObject(rep);
        }
        done = r->got_n;
    }
    return r->got_n;
}

const void *tier_remote_page(const tier_remote *r, int32_t i)
{
    return i >= 0 && i < r->got_n && r->page_bytes ? r->got + (size_t)i * r->page_bytes : NULL;
}

double tier_remote_take_loaded(tier_remote *r, int32_t used)
{
    if (used < 0) used = 0;
    if (used > r->got_n) used = r->got_n;
    double s = latency_of(r) * r->got_batches + (double)used * r->page_cost / bw_of(r);
    r->st.hit_pages += (uint64_t)used;
    r->st.hit_tokens += (uint64_t)used * (uint64_t)r->P;
    r->st.bytes_loaded += (double)used * r->page_cost;
    r->st.load_seconds += s;
    r->got_batches = 0; /* round trips are charged once */
    return s;
}

bool tier_remote_write_back(const tier_remote *r) { return r && r->cfg.write_back; }
const tier_remote_stats *tier_remote_get_stats(const tier_remote *r) { return r ? &r->st : NULL; }

#else /* no hiredis: the tier cannot be opened; nothing else is reachable */

struct tier_remote { int unused; };

bool tier_remote_available(void) { return false; }

rkv_status tier_remote_open(const tier_remote_config *cfg, int32_t P, size_t page_bytes,
                            tier_remote **out, char *err, size_t errlen)
{
    *out = NULL;
    snprintf(err, errlen, "remote tier %s: this build has no Redis client (install libhiredis-dev and "
             "reconfigure)", cfg && cfg->url ? cfg->url : "");
    return RKV_ENOTSUP;
}

void tier_remote_close(tier_remote *r) { (void)r; }
void tier_remote_put(tier_remote *r, const uint64_t key[2], const int32_t *toks, const void *bytes) {}
void tier_remote_flush(tier_remote *r) {}
int32_t tier_remote_fetch(tier_remote *r, const uint64_t *keys, const int32_t *tokens, int32_t n) { return 0; }
const void *tier_remote_page(const tier_remote *r, int32_t i) { return NULL; }
double tier_remote_take_loaded(tier_remote *r, int32_t used) { return 0; }
bool tier_remote_write_back(const tier_remote *r) { return false; }
const tier_remote_stats *tier_remote_get_stats(const tier_remote *r) { return NULL; }

#endif
