/* test_remote.c - the remote tier on a real Redis server (tier_remote.h under
 * cache_tier.h): pages loaded from the server hold exactly the bytes stored,
 * two engines share pages, and every fault is a miss or a drop, never an
 * error or a wrong page: the server killed, restarted empty, evicting keys on
 * its own (maxmemory + allkeys-lru), a corrupted or truncated value, another
 * namespace or model. Each test starts redis-server on 127.0.0.1 and a free
 * port in a temporary directory and stops it; exit 77 without redis-server or
 * without hiredis in the build. */
#include <check.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check_run.h"
#include "cache.h"
#include "cache_test_util.h"
#include "cache_tier.h"
#include "rkv_config.h"

#if RKV_HAVE_HIREDIS
#include <hiredis/hiredis.h>

enum { P = 4, PAGES = 24, PB = 32, MAXTOK = 64 };

/* ------------------------------------------------------------ the server */

typedef struct server { pid_t pid; int port; char dir[64]; char url[64]; } server;

static int free_port(void)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    ck_assert_int_eq(bind(s, (struct sockaddr *)&a, sizeof a), 0);
    socklen_t len = sizeof a;
    getsockname(s, (struct sockaddr *)&a, &len);
    close(s);
    return ntohs(a.sin_port);
}

static redisContext *server_cli(const server *sv)
{
    struct timeval tv = {1, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", sv->port, tv);
    if (c && c->err) {
        redisFree(c);
        return NULL;
    }
    return c;
}

/* Start (or restart, same port and directory) an empty server; waits until
 * it answers (at most 5 s). */
static void server_start(server *sv)
{
    if (!sv->dir[0]) {
        snprintf(sv->dir, sizeof sv->dir, "/tmp/rkv-redis-XXXXXX");
        ck_assert_ptr_nonnull(mkdtemp(sv->dir));
        sv->port = free_port();
        snprintf(sv->url, sizeof sv->url, "redis://127.0.0.1:%d", sv->port);
    }
    char port[16];
    snprintf(port, sizeof port, "%d", sv->port);
    sv->pid = fork();
    ck_assert_int_ge(sv->pid, 0);
    if (sv->pid == 0) {
        if (!freopen("/dev/null", "w", stdout)) _exit(126);
        execlp("redis-server", "redis-server", "--port", port, "--bind", "127.0.0.1", "--save", "",
               "--appendonly", "no", "--dir", sv->dir, "--daemonize", "no", (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 500; i++) {
        redisContext *c = server_cli(sv);
        if (c) {
            redisReply *r = redisCommand(c, "PING");
            bool ok = r && r->type == REDIS_REPLY_STATUS;
            if (r) freeReplyObject(r);
            redisFree(c);
            if (ok) return;
        }
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    ck_abort_msg("redis-server on port %d did not answer within 5 s", sv->port);
}

static void server_kill(server *sv)
{
    if (sv->pid <= 0) return;
    kill(sv->pid, SIGKILL);
    waitpid(sv->pid, NULL, 0);
    sv->pid = 0;
}

static void server_stop(server *sv)
{
    server_kill(sv);
    if (sv->dir[0]) rmdir(sv->dir);
}

/* One reply of a command to the server, as an integer (or -1). */
static long long server_int(const server *sv, const char *cmd)
{
    redisContext *c = server_cli(sv);
    ck_assert_ptr_nonnull(c);
    redisReply *r = redisCommand(c, cmd);
    long long v = r && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    if (r) freeReplyObject(r);
    redisFree(c);
    return v;
}

/* ------------------------------------------------------------ engines */

typedef struct fake_kv { uint8_t b[PAGES][PB]; } fake_kv;

static rkv_status kv_read(void *ctx, int32_t page, void *dst)
{
    memcpy(dst, ((fake_kv *)ctx)->b[page], PB);
    return RKV_OK;
}

static rkv_status kv_write(void *ctx, int32_t page, const void *src)
{
    memcpy(((fake_kv *)ctx)->b[page], src, PB);
    return RKV_OK;
}

/* An engine: its own pool, KV memory and tier wrapper over a kind. */
typedef struct eng { page_pool pool; fake_kv kv; cache *c; } eng;

static void eng_open_tiers(eng *e, const char *kind, const server *sv, const char *ns, uint64_t model,
                           bool write_back, int64_t host_pages, int64_t disk_pages, const char *disk_dir,
                           int64_t remote_pages)
{
    memset(e, 0, sizeof *e);
    ck_assert_int_eq(page_pool_init(&e->pool, PAGES, P), RKV_OK);
    cache *inner = tu_create(kind, NULL, &e->pool);
    tier_config tc;
    tier_config_default(&tc);
    tc.host_pages = host_pages;
    tc.disk_pages = disk_pages;
    tc.disk_dir = disk_dir;
    tc.remote.url = sv->url;
    tc.remote.ns = ns;
    tc.remote.model_id = model;
    tc.remote.write_back = write_back;
    tc.remote.timeout_s = 0.5;
    if (remote_pages) tc.remote.pages = remote_pages;
    tier_mover mv = {&e->kv, PB, kv_read, kv_write};
    char err[256] = "";
    ck_assert_msg(cache_tier_wrap(inner, &tc, &mv, &e->c, err, sizeof err) == RKV_OK, "%s", err);
}

static void eng_open(eng *e, const char *kind, const server *sv, const char *ns, uint64_t model,
                     bool write_back, int64_t host_pages, int64_t remote_pages)
{
    eng_open_tiers(e, kind, sv, ns, model, write_back, host_pages, 0, NULL, remote_pages);
}

/* No page leaks: everything evicted, every page is free again. */
static void eng_close(eng *e)
{
    ck_cache_ok(e->c);
    cache_evict(e->c, (int64_t)PAGES * P);
    ck_assert_int_eq(page_pool_num_free(&e->pool), PAGES);
    cache_destroy(e->c);
    page_pool_destroy(&e->pool);
}

/* One request as the engine makes it; every matched page must hold its
 * bytes. Returns the matched length. */
static int32_t request(eng *e, const int32_t *tokens, int32_t n)
{
    cache *c = e->c;
    cache_seq m;
    cache_seq_init(&m, 0, 0);
    ck_assert_int_eq(cache_match_prefix(c, &m, tokens, n), RKV_OK);
    ck_assert_int_eq(cache_lock(c, &m), RKV_OK);
    uint8_t want[PB];
    for (int32_t k = 0; k < m.num_pages; k++) {
        tu_page_bytes(tokens, k, P, want, PB);
        ck_assert_msg(!memcmp(e->kv.b[m.pages[k]], want, PB), "page %d of the match holds other bytes", k);
    }
    int32_t nb = n / P, need = nb - m.num_pages, len = m.len;
    if (need > page_pool_num_free(c->pool)) cache_evict(c, (int64_t)(need - page_pool_num_free(c->pool)) * P);
    ck_assert_int_ge(page_pool_num_free(c->pool), need);
    int32_t pages[PAGES];
    if (m.num_pages) memcpy(pages, m.pages, sizeof(int32_t) * (size_t)m.num_pages);
    ck_assert_int_eq(page_pool_alloc(c->pool, need, pages + m.num_pages), RKV_OK);
    for (int32_t k = m.num_pages; k < nb; k++) tu_page_bytes(tokens, k, P, e->kv.b[pages[k]], PB);
    int32_t prefix = 0;
    ck_assert_int_eq(cache_insert(c, &(cache_seq){0}, tokens, nb * P, pages, &prefix), RKV_OK);
    for (int32_t k = m.num_pages; k < nb; k++)
        if (page_pool_state(c->pool, pages[k]) == PAGE_INFLIGHT) ck_assert_int_eq(page_pool_free(c->pool, &pages[k], 1), RKV_OK);
    ck_assert_int_eq(cache_unlock(c, &m), RKV_OK);
    cache_seq_free(&m);
    ck_cache_ok(c);
    return len;
}

/* Document d: (3 + d % 3) pages of its own tokens, then one question page. */
static int32_t doc(int d, int32_t q, int32_t *toks)
{
    int32_t n = 0, len = (3 + d % 3) * P;
    for (int32_t j = 0; j < len; j++) toks[n++] = 1000 * (d + 1) + j;
    for (int32_t j = 0; j < P; j++) toks[n++] = q + j;
    return n;
}

static const tier_remote_stats *rstats(const eng *e)
{
    const tier_remote_stats *s = cache_tier_remote_stats(e->c);
    ck_assert_ptr_nonnull(s);
    return s;
}

static const char *const kinds[] = {"radix", "hash", "trie"};

/* ------------------------------------------------------------ tests */

/* Loop: kind (3) x where pages reach the server (4): write-through; write-back
 * straight from the KV memory (no local tier); write-back from a small host
 * tier's LRU end; write-back from a disk tier's LRU end. One engine; 12
 * documents revisited at random through a pool of 24 pages: most come back
 * from the server, holding exactly their bytes. */
START_TEST(test_remote_reloads_the_stored_bytes)
{
    server sv = {0};
    server_start(&sv);
    srand(4200u + (unsigned)_i);
    int variant = _i / 3;
    char dir[] = "/tmp/rkv-remote-disk-XXXXXX";
    if (variant == 3) ck_assert_ptr_nonnull(mkdtemp(dir));
    eng e;
    eng_open_tiers(&e, kinds[_i % 3], &sv, NULL, 1, variant > 0, variant == 2 ? 4 : variant == 3 ? 2 : 0,
                   variant == 3 ? 3 : 0, variant == 3 ? dir : NULL, 0);
    int32_t toks[MAXTOK];
    int32_t q = 1 << 20;
    for (int step = 0; step < 120; step++) {
        int32_t n = doc(rand() % 12, q, toks);
        q += P;
        request(&e, toks, n);
    }
    const tier_remote_stats *s = rstats(&e);
    ck_assert_msg(s->hit_pages > 20, "only %llu pages loaded from the server", (unsigned long long)s->hit_pages);
    ck_assert_uint_eq(s->corrupt_values, 0);
    ck_assert(!s->down);
    const tier_stats *ts = cache_tier_get_stats(e.c);
    if (variant >= 2) ck_assert_uint_gt(ts->host_hit_pages + ts->disk_hit_pages, 0);
    eng_close(&e);
    if (variant == 3) ck_assert_int_eq(rmdir(dir), 0); /* the tier removed its files */
    server_stop(&sv);
}
END_TEST

/* Two engines, one server: the second finds the first's prefixes; another
 * namespace or another model finds nothing. */
START_TEST(test_remote_shared_and_namespaces)
{
    server sv = {0};
    server_start(&sv);
    const char *kind = kinds[_i];
    eng a, b, other_ns, other_model;
    eng_open(&a, kind, &sv, "teamA", 7, false, 0, 0);
    int32_t toks[MAXTOK];
    for (int d = 0; d < 4; d++) request(&a, toks, doc(d, 5000 + 10 * d, toks));
    eng_open(&b, kind, &sv, "teamA", 7, false, 0, 0);
    eng_open(&other_ns, kind, &sv, "teamB", 7, false, 0, 0);
    eng_open(&other_model, kind, &sv, "teamA", 8, false, 0, 0);
    for (int d = 0; d < 4; d++) {
        int32_t n = doc(d, 9000 + 10 * d, toks);
        ck_assert_int_eq(request(&b, toks, n), (3 + d % 3) * P); /* the document, not the question */
        ck_assert_int_eq(request(&other_ns, toks, n), 0);
        ck_assert_int_eq(request(&other_model, toks, n), 0);
    }
    ck_assert_uint_gt(rstats(&b)->hit_tokens, 0);
    ck_assert_uint_eq(rstats(&other_ns)->hit_tokens, 0);
    ck_assert_uint_eq(rstats(&other_model)->hit_tokens, 0);
    eng_close(&a);
    eng_close(&b);
    eng_close(&other_ns);
    eng_close(&other_model);
    server_stop(&sv);
}
END_TEST

/* Killed mid-run: loads are misses, stores drops, no error; restarted empty:
 * a reconnect (at most one a second), misses, then sharing again. */
START_TEST(test_remote_server_killed_and_restarted)
{
    server sv = {0};
    server_start(&sv);
    const char *kind = kinds[_i];
    eng a, b;
    eng_open(&a, kind, &sv, NULL, 1, false, 0, 0);
    eng_open(&b, kind, &sv, NULL, 1, false, 0, 0);
    int32_t toks[MAXTOK];
    request(&a, toks, doc(0, 100, toks));
    server_kill(&sv);
    ck_assert_int_eq(request(&b, toks, doc(0, 200, toks)), 0);
    request(&a, toks, doc(1, 300, toks));
    ck_assert(rstats(&b)->down);
    ck_assert_uint_gt(rstats(&a)->dropped_pages, 0);
    ck_assert_uint_gt(rstats(&b)->failed_lookups, 0);
    server_start(&sv); /* empty */
    struct timespec ts = {1, 200 * 1000 * 1000};
    nanosleep(&ts, NULL);
    ck_assert_int_eq(request(&b, toks, doc(3, 400, toks)), 0); /* reconnects; nothing there */
    ck_assert_uint_eq(rstats(&b)->reconnects, 1);
    ck_assert(!rstats(&b)->down);
    request(&a, toks, doc(2, 500, toks)); /* a reconnects and stores again */
    ck_assert_int_eq(request(&b, toks, doc(2, 600, toks)), (3 + 2 % 3) * P);
    eng_close(&a);
    eng_close(&b);
    server_stop(&sv);
}
END_TEST

/* The server evicts on its own (maxmemory + allkeys-lru): missing keys are
 * misses, what is found is right. */
START_TEST(test_remote_server_evicts)
{
    server sv = {0};
    server_start(&sv);
    redisContext *cli = server_cli(&sv);
    redisReply *r = redisCommand(cli, "CONFIG SET maxmemory-policy allkeys-lru");
    freeReplyObject(r);
    r = redisCommand(cli, "CONFIG SET maxmemory 1500000"); /* ~1.5 MB: a few thousand pages */
    freeReplyObject(r);
    redisFree(cli);
    eng a, b;
    eng_open(&a, kinds[_i], &sv, NULL, 1, false, 0, 1 << 16);
    int32_t toks[MAXTOK];
    for (int d = 0; d < 3000; d++) request(&a, toks, doc(d, 7, toks));
    ck_assert_int_gt(server_int(&sv, "DBSIZE"), 0);
    eng_open(&b, kinds[_i], &sv, NULL, 1, false, 0, 0);
    int found = 0;
    for (int d = 0; d < 3000; d += 10) {
        int32_t n = doc(d, 8, toks);
        int32_t got = request(&b, toks, n);
        ck_assert(got == 0 || got % P == 0);
        found += got > 0;
    }
    ck_assert_msg(rstats(&b)->misses > 0, "the server evicted nothing (maxmemory too large?)");
    ck_assert_msg(found > 0, "nothing survived the server's eviction");
    eng_close(&a);
    eng_close(&b);
    server_stop(&sv);
}
END_TEST

/* A value changed on the server (one byte flipped; truncated) is rejected
 * by its checksum or length: a miss, counted, the match stops before it. */
START_TEST(test_remote_corrupt_values)
{
    server sv = {0};
    server_start(&sv);
    eng a, b;
    eng_open(&a, kinds[_i], &sv, NULL, 1, false, 0, 0);
    int32_t toks[MAXTOK];
    int32_t n = doc(2, 100, toks); /* 5 document pages */
    request(&a, toks, n);
    redisContext *cli = server_cli(&sv);
    redisReply *keys = redisCommand(cli, "KEYS rkv:*");
    ck_assert_int_eq(keys->type, REDIS_REPLY_ARRAY);
    ck_assert_int_ge((int)keys->elements, 5);
    /* Damage every stored page: half flipped, half truncated. */
    for (size_t i = 0; i < keys->elements; i++) {
        const char *k = keys->element[i]->str;
        redisReply *x = i % 2 ? redisCommand(cli, "SETRANGE %s 60 \xff\xfe", k)
                              : redisCommand(cli, "SET %s %b", k, "RKVP-short", (size_t)10);
        freeReplyObject(x);
    }
    freeReplyObject(keys);
    redisFree(cli);
    eng_open(&b, kinds[_i], &sv, NULL, 1, false, 0, 0);
    ck_assert_int_eq(request(&b, toks, doc(2, 200, toks)), 0);
    ck_assert_uint_eq(rstats(&b)->corrupt_values, 1);
    ck_assert_uint_eq(rstats(&b)->hit_pages, 0);
    eng_close(&a);
    eng_close(&b);
    server_stop(&sv);
}
END_TEST

/* Issue 29 item 2: a value carried nothing that tied it to its key. Pages
 * of one repeated token hold equal tokens after different prefixes, so
 * rotating their values on the server passed the checksum and the token
 * check, and a wrong page's K/V was used. Now the value carries the chain
 * hash, model id and namespace: a moved value is a miss, counted bad. The
 * same for a value copied to another namespace's key. */
START_TEST(test_remote_value_bound_to_its_key)
{
    server sv = {0};
    server_start(&sv);
    eng a, b, other;
    eng_open(&a, kinds[_i], &sv, "teamA", 1, false, 0, 0);
    int32_t toks[MAXTOK];
    for (int32_t j = 0; j < 6 * P; j++) toks[j] = 7; /* 6 equal pages */
    request(&a, toks, 6 * P);
    redisContext *cli = server_cli(&sv);
    redisReply *keys = redisCommand(cli, "KEYS rkv:teamA:*");
    ck_assert_int_eq(keys->type, REDIS_REPLY_ARRAY);
    ck_assert_int_eq((int)keys->elements, 6);
    /* Rotate: key i gets the value of key i + 1; and copy each to teamB. */
    redisReply *v[6];
    for (size_t i = 0; i < 6; i++) v[i] = redisCommand(cli, "GET %s", keys->element[i]->str);
    for (size_t i = 0; i < 6; i++) {
        const char *k = keys->element[i]->str;
        redisReply *x = redisCommand(cli, "SET %s %b", k, v[(i + 1) % 6]->str, v[(i + 1) % 6]->len);
        freeReplyObject(x);
        char k2[256];
        snprintf(k2, sizeof k2, "rkv:teamB:%s", k + strlen("rkv:teamA:"));
        x = redisCommand(cli, "SET %s %b", k2, v[i]->str, v[i]->len);
        freeReplyObject(x);
    }
    for (size_t i = 0; i < 6; i++) freeReplyObject(v[i]);
    freeReplyObject(keys);
    redisFree(cli);
    eng_open(&b, kinds[_i], &sv, "teamA", 1, false, 0, 0);
    ck_assert_int_eq(request(&b, toks, 6 * P), 0); /* request() checks every page's bytes */
    ck_assert_uint_eq(rstats(&b)->hit_pages, 0);
    ck_assert_uint_eq(rstats(&b)->corrupt_values, 1);
    eng_open(&other, kinds[_i], &sv, "teamB", 1, false, 0, 0);
    ck_assert_int_eq(request(&other, toks, 6 * P), 0);
    ck_assert_uint_eq(rstats(&other)->corrupt_values, 1);
    eng_close(&a);
    eng_close(&b);
    eng_close(&other);
    server_stop(&sv);
}
END_TEST

/* The value format alone: what encode writes, check accepts for exactly
 * that key, model, namespace and tokens. */
START_TEST(test_remote_value_format)
{
    int32_t toks[P] = {1, 2, 3, 4}, other[P] = {1, 2, 3, 5};
    uint8_t bytes[PB], val[512];
    for (int j = 0; j < PB; j++) bytes[j] = (uint8_t)(3 * j + 1);
    tier_remote_value_id id = {P, PB, 11, 22, 33, "ns"};
    size_t n = tier_remote_value_bytes(P, PB);
    ck_assert_uint_le(n, sizeof val);
    tier_remote_value_encode(&id, toks, bytes, 1e3, val);
    const uint8_t *got = tier_remote_value_check(&id, toks, val, n);
    ck_assert_ptr_nonnull(got);
    ck_assert(!memcmp(got, bytes, PB));
    ck_assert_ptr_null(tier_remote_value_check(&id, other, val, n));
    ck_assert_ptr_null(tier_remote_value_check(&id, toks, val, n - 1));
    tier_remote_value_id w = id;
    w.k0 = 12;
    ck_assert_ptr_null(tier_remote_value_check(&w, toks, val, n));
    w = id;
    w.k1 = 0;
    ck_assert_ptr_null(tier_remote_value_check(&w, toks, val, n));
    w = id;
    w.model_id = 34;
    ck_assert_ptr_null(tier_remote_value_check(&w, toks, val, n));
    w = id;
    w.ns = "ns2";
    ck_assert_ptr_null(tier_remote_value_check(&w, toks, val, n));
    /* Every byte is covered: any one flipped is refused. */
    for (size_t i = 0; i < n; i++) {
        if (i >= 16 && i < 24) continue; /* the modelled size: a number for the clock only */
        val[i] ^= 0x40;
        ck_assert_msg(tier_remote_value_check(&id, toks, val, n) == NULL, "byte %zu flipped", i);
        val[i] ^= 0x40;
    }
}
END_TEST

/* Issue 29 item 7: a reconnect emptied the index, so every key written
 * before it was orphaned (98 keys left with a share of 50). Now the index
 * keeps them through the outage and deletes them as they age out: the
 * server holds at most the share. */
START_TEST(test_remote_orphans_bounded_across_reconnects)
{
    server sv = {0};
    server_start(&sv);
    enum { SHARE = 10 };
    eng a;
    eng_open(&a, "radix", &sv, NULL, 1, false, 0, SHARE);
    int32_t toks[MAXTOK];
    for (int round = 0; round < 3; round++) {
        for (int d = 0; d < 6; d++) request(&a, toks, doc(10 * round + d, 50 + d, toks));
        ck_assert_int_le(server_int(&sv, "DBSIZE"), SHARE);
        /* Cut the engine's connection; it reconnects at most once a second. */
        ck_assert_int_ge(server_int(&sv, "CLIENT KILL TYPE normal SKIPME yes"), 1);
        request(&a, toks, doc(99, 1, toks));
        struct timespec ts = {1, 200 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    for (int d = 0; d < 6; d++) request(&a, toks, doc(40 + d, 50 + d, toks));
    ck_assert_uint_ge(rstats(&a)->reconnects, 2);
    ck_assert_int_le(server_int(&sv, "DBSIZE"), SHARE);
    eng_close(&a);
    server_stop(&sv);
}
END_TEST

/* Issue 29 item 7: SETs carried no expiry; now cfg.ttl_s (0: none). */
START_TEST(test_remote_keys_expire)
{
    server sv = {0};
    server_start(&sv);
    for (int ttl = 0; ttl < 2; ttl++) {
        page_pool pool;
        ck_assert_int_eq(page_pool_init(&pool, PAGES, P), RKV_OK);
        tier_config tc;
        tier_config_default(&tc);
        ck_assert_int_eq(tc.remote.ttl_s, 86400);
        tc.remote.url = sv.url;
        tc.remote.ns = ttl ? "ttl" : "none";
        tc.remote.ttl_s = ttl ? 600 : 0;
        fake_kv kv;
        tier_mover mv = {&kv, PB, kv_read, kv_write};
        eng e = {0};
        e.pool = pool;
        cache *inner = tu_create("radix", NULL, &e.pool);
        char err[256] = "";
        ck_assert_msg(cache_tier_wrap(inner, &tc, &mv, &e.c, err, sizeof err) == RKV_OK, "%s", err);
        int32_t toks[MAXTOK];
        request(&e, toks, doc(1, 5, toks));
        cache_evict(e.c, (int64_t)PAGES * P);
        cache_destroy(e.c);
        page_pool_destroy(&e.pool);
        redisContext *cli = server_cli(&sv);
        redisReply *keys = redisCommand(cli, ttl ? "KEYS rkv:ttl:*" : "KEYS rkv:none:*");
        ck_assert_int_ge((int)keys->elements, 1);
        for (size_t i = 0; i < keys->elements; i++) {
            redisReply *t = redisCommand(cli, "TTL %s", keys->element[i]->str);
            ck_assert_int_eq(t->type, REDIS_REPLY_INTEGER);
            if (ttl) ck_assert_msg(t->integer > 500 && t->integer <= 600, "TTL %lld", t->integer);
            else ck_assert_int_eq(t->integer, -1);
            freeReplyObject(t);
        }
        freeReplyObject(keys);
        redisFree(cli);
    }
    server_stop(&sv);
}
END_TEST

/* Issue 29 item 7: with a full server every SET failed and the run still
 * reported its pages stored (reply types never read). Now a refused store is
 * counted as refused, never stored, and its key leaves the index. */
START_TEST(test_remote_full_server_refuses)
{
    server sv = {0};
    server_start(&sv);
    redisContext *cli = server_cli(&sv);
    redisReply *r = redisCommand(cli, "CONFIG SET maxmemory-policy noeviction");
    freeReplyObject(r);
    r = redisCommand(cli, "CONFIG SET maxmemory 1");
    freeReplyObject(r);
    redisFree(cli);
    eng a;
    eng_open(&a, kinds[_i], &sv, NULL, 1, false, 0, 0);
    int32_t toks[MAXTOK];
    for (int d = 0; d < 4; d++) request(&a, toks, doc(d, 9, toks));
    ck_assert_int_eq(server_int(&sv, "DBSIZE"), 0);
    /* A lookup drains the queued replies first. */
    request(&a, toks, doc(0, 9, toks));
    const tier_remote_stats *s = rstats(&a);
    ck_assert_uint_eq(s->stored_pages, 0);
    ck_assert_uint_gt(s->refused_pages, 0);
    ck_assert_int_eq(s->indexed, 0);
    eng_close(&a);
    server_stop(&sv);
}
END_TEST

/* Count lines of stderr containing what, while fn runs. */
static int stderr_lines_with(void (*fn)(server *), server *sv, const char *what)
{
    char path[] = "/tmp/rkv-remote-err-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    fflush(stderr);
    int saved = dup(2);
    dup2(fd, 2);
    fn(sv);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    FILE *f = fopen(path, "r");
    char line[512];
    int n = 0;
    while (f && fgets(line, sizeof line, f)) n += strstr(line, what) != NULL;
    if (f) fclose(f);
    close(fd);
    unlink(path);
    return n;
}

static void two_outages(server *sv)
{
    eng a;
    eng_open(&a, "radix", sv, NULL, 1, false, 0, 0);
    int32_t toks[MAXTOK];
    for (int outage = 0; outage < 2; outage++) {
        request(&a, toks, doc(outage, 100, toks));
        server_kill(sv);
        /* New documents: the engine has to reach the server, and fails. */
        request(&a, toks, doc(20 + 2 * outage, 200, toks));
        request(&a, toks, doc(21 + 2 * outage, 300, toks));
        server_start(sv);
        struct timespec ts = {1, 200 * 1000 * 1000};
        nanosleep(&ts, NULL);
        request(&a, toks, doc(7 + outage, 400, toks)); /* reconnects */
        ck_assert_msg(!rstats(&a)->down, "outage %d: reconnects %llu", outage, (unsigned long long)rstats(&a)->reconnects);
    }
    ck_assert_uint_eq(rstats(&a)->reconnects, 2);
    eng_close(&a);
}

/* Issue 29 item 7: a second outage printed no warning. */
START_TEST(test_remote_second_outage_warns_again)
{
    server sv = {0};
    server_start(&sv);
    ck_assert_int_eq(stderr_lines_with(two_outages, &sv, "page lookups count as misses"), 2);
    server_stop(&sv);
}
END_TEST

/* Start-up against no server fails, naming the URL; a bad URL too. */
START_TEST(test_remote_unreachable)
{
    page_pool pool;
    ck_assert_int_eq(page_pool_init(&pool, PAGES, P), RKV_OK);
    cache *inner = tu_create("radix", NULL, &pool);
    tier_config tc;
    tier_config_default(&tc);
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", free_port());
    tc.remote.url = url;
    tc.remote.timeout_s = 0.5;
    cache *c = NULL;
    char err[256] = "";
    ck_assert_int_eq(cache_tier_wrap(inner, &tc, NULL, &c, err, sizeof err), RKV_EIO);
    ck_assert_ptr_null(c);
    ck_assert_msg(strstr(err, url) != NULL, "message '%s' names the URL", err);
    tc.remote.url = "redis://127.0.0.1";
    ck_assert_int_eq(cache_tier_wrap(inner, &tc, NULL, &c, err, sizeof err), RKV_EINVAL);
    ck_assert_msg(strstr(err, "redis://127.0.0.1") != NULL, "message '%s'", err);
    cache_destroy(inner);
    page_pool_destroy(&pool);
}
END_TEST

static int has_redis_server(void)
{
    return system("command -v redis-server >/dev/null 2>&1") == 0;
}

int main(void)
{
    if (!has_redis_server()) {
        fprintf(stderr, "redis-server not found: skipped\n");
        return 77;
    }
    Suite *s = suite_create("remote");
    TCase *tc = tcase_create("remote");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_remote_reloads_the_stored_bytes, 0, 12);
    tcase_add_loop_test(tc, test_remote_shared_and_namespaces, 0, 3);
    tcase_add_loop_test(tc, test_remote_server_killed_and_restarted, 0, 2);
    tcase_add_loop_test(tc, test_remote_server_evicts, 0, 1);
    tcase_add_loop_test(tc, test_remote_corrupt_values, 0, 3);
    tcase_add_test(tc, test_remote_unreachable);
    tcase_add_loop_test(tc, test_remote_value_bound_to_its_key, 0, 3);
    tcase_add_test(tc, test_remote_value_format);
    tcase_add_test(tc, test_remote_orphans_bounded_across_reconnects);
    tcase_add_test(tc, test_remote_keys_expire);
    tcase_add_loop_test(tc, test_remote_full_server_refuses, 0, 3);
    tcase_add_test(tc, test_remote_second_outage_warns_again);
    suite_add_tcase(s, tc);
    return check_run(s);
}

#else

int main(void)
{
    fprintf(stderr, "built without hiredis: skipped\n");
    return 77;
}

#endif
