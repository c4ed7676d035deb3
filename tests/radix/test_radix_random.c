/* test_radix_random.c - seeded random operations on the radix tree against a
 * reference model that always tells the truth.
 *
 * The model is a trie of whole pages: one element per cached page, each with
 * its page tokens, page id, time, hits and lock count, plus an "end" flag
 * marking the last page of a tree node (splits only ever add ends; nothing
 * merges). Everything is found by walking sibling lists and chosen by full
 * scans, so it is slow and obviously right:
 *
 *   ns 0:  [A B]e -- [C D] -- [E F]e       (P = 2; "e" = node end)
 *               \--- [X Y]e
 *
 * After every operation the test compares return values, the eviction order
 * (evicted node ids and lengths), the sizes, and the whole per-page state
 * (path, page id, time, hits, lock, node ends and node ids), and runs
 * radix_tree_check. Set RKV_SEED to replay a printed seed.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_run.h"
#include "cache_test_util.h"
#include "radix_tree.h"

enum { PMAX = 16, MAXE = 512, MAXTOK = 64, MAXHELD = 8, NUM_NS = 3 };
static const uint64_t ns_vals[NUM_NS] = {0, 1, 0xfeedface12345ULL};

typedef struct melem {
    int alive;
    int parent;         /* element index, -1: top level of its namespace */
    int ns;             /* index into ns_vals */
    int first_child, next_sibling;
    int nchild;
    int32_t tok[PMAX];
    int32_t page;
    uint64_t time, hits, cre; /* cre: node id, meaningful at an end */
    int lock;
    int end;
    uint64_t path; /* hash of namespace and all tokens up to this page */
} melem;

static struct model {
    int P;
    radix_policy pol;
    uint64_t clock;
    melem e[MAXE];
    int top[NUM_NS]; /* first top-level element per namespace */
} M;

static page_pool pool;
static radix_tree *T;
static uint64_t seed, rng;
static long op_no;

#define REQUIRE(cond, ...)                                                              \
    do {                                                                                \
        if (!(cond)) {                                                                  \
            char msg_[512];                                                             \
            snprintf(msg_, sizeof msg_, __VA_ARGS__);                                   \
            ck_abort_msg("seed %llu (RKV_SEED=%llu), op %ld: %s", (unsigned long long)seed, \
                         (unsigned long long)seed, op_no, msg_);                        \
        }                                                                               \
    } while (0)

static uint64_t next(void)
{
    uint64_t z = (rng += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
static int rnd(int n) { return (int)(next() % (uint64_t)n); }

static uint64_t hash_page(uint64_t h, const int32_t *tok, int P)
{
    /* A full 64-bit mix per token: a plain FNV step lets different paths
     * cancel out through the xor on the adversarial workload's tokens. */
    for (int i = 0; i < P; i++) {
        h = (h ^ (uint32_t)tok[i]) * 0x100000001b3ULL + 0x9e37;
        h ^= h >> 31;
        h *= 0xbf58476d1ce4e5b9ULL;
        h ^= h >> 29;
    }
    return h;
}
/* Mixed, so that a namespace's seed and a first token never cancel out in
 * the first xor (seeds 0 and 1 once met as 7 ^ 129 == 38 ^ 160). */
static uint64_t ns_seed(int ns)
{
    uint64_t h = 0xcbf29ce484222325ULL ^ (ns_vals[ns] * 31 + 7);
    h ^= h >> 31;
    h *= 0x94d049bb133111ebULL;
    return h ^ (h >> 29);
}

/* ---- model ---------------------------------------------------------------- */

static int m_child(int parent, int ns, const int32_t *tok)
{
    int c = parent < 0 ? M.top[ns] : M.e[parent].first_child;
    for (; c >= 0; c = M.e[c].next_sibling)
        if (!memcmp(M.e[c].tok, tok, sizeof(int32_t) * (size_t)M.P)) return c;
    return -1;
}

static int m_walk(int ns, const int32_t *tok, int n, int *path)
{
    int m = 0, parent = -1;
    for (int i = 0; i + M.P <= n; i += M.P) {
        int c = m_child(parent, ns, tok + i);
        if (c < 0) break;
        path[m++] = parent = c;
    }
    return m;
}

static void m_touch(int x, uint64_t now)
{
    M.e[x].time = now;
    M.e[x].hits++;
}

/* Enter the matched path; split after its last page if that is inside a node
 * and enter the suffix too. */
static void m_enter(const int *path, int m, uint64_t now)
{
    for (int i = 0; i < m; i++) m_touch(path[i], now);
    if (m == 0 || M.e[path[m - 1]].end) return;
    int x = path[m - 1];
    M.e[x].end = 1;
    M.e[x].cre = now << 2 | 1;
    for (int y = M.e[x].first_child;; y = M.e[y].first_child) {
        m_touch(y, now);
        if (M.e[y].end) break;
    }
}

static int m_match(int ns, const int32_t *tok, int n, int32_t *pages)
{
    int path[MAXTOK];
    uint64_t now = ++M.clock;
    int m = m_walk(ns, tok, n, path);
    m_enter(path, m, now);
    for (int i = 0; i < m; i++) pages[i] = M.e[path[i]].page;
    return m ? path[m - 1] : -1;
}

static int m_len(int ns, const int32_t *tok, int n)
{
    int path[MAXTOK];
    return m_walk(ns, tok, n, path) * M.P;
}

static int m_new(void)
{
    for (int i = 0; i < MAXE; i++)
        if (!M.e[i].alive) return i;
    return -1;
}

static int m_insert(int ns, const int32_t *tok, int n, const int32_t *pages)
{
    int path[MAXTOK];
    uint64_t now = ++M.clock;
    int m = m_walk(ns, tok, n, path);
    m_enter(path, m, now);
    int parent = m ? path[m - 1] : -1;
    int np = n / M.P;
    for (int i = m; i < np; i++) {
        int x = m_new();
        REQUIRE(x >= 0, "model full");
        melem *e = &M.e[x];
        memset(e, 0, sizeof *e);
        e->alive = 1;
        e->parent = parent;
        e->ns = ns;
        memcpy(e->tok, tok + i * M.P, sizeof(int32_t) * (size_t)M.P);
        e->page = pages[i];
        e->time = now;
        e->hits = 1;
        e->first_child = -1;
        e->path = hash_page(parent < 0 ? ns_seed(ns) : M.e[parent].path, e->tok, M.P);
        if (parent < 0) {
            e->next_sibling = M.top[ns];
            M.top[ns] = x;
        } else {
            e->next_sibling = M.e[parent].first_child;
            M.e[parent].first_child = x;
            M.e[parent].nchild++;
        }
        parent = x;
    }
    if (np > m) {
        M.e[parent].end = 1;
        M.e[parent].cre = now << 2 | 2;
    }
    return m * M.P;
}

static void m_lock(int h, int d)
{
    for (int x = h; x >= 0; x = M.e[x].parent) M.e[x].lock += d;
}

static int m_before(const melem *a, const melem *b)
{
    switch (M.pol) {
    case RADIX_LFU:
        if (a->hits != b->hits) return a->hits < b->hits;
        /* fall through */
    case RADIX_LRU:
        if (a->time != b->time) return a->time < b->time;
        /* fall through */
    case RADIX_FIFO:
        break;
    }
    return a->cre < b->cre;
}

static void m_unlink(int x)
{
    melem *e = &M.e[x];
    int *link = e->parent < 0 ? &M.top[e->ns] : &M.e[e->parent].first_child;
    while (*link != x) link = &M.e[*link].next_sibling;
    *link = e->next_sibling;
    if (e->parent >= 0) M.e[e->parent].nchild--;
    e->alive = 0;
}

/* Evict; the victims' node ids and lengths go to ids/lens. */
static int64_t m_evict(int64_t n, uint64_t *ids, int32_t *lens, int *count)
{
    int64_t freed = 0;
    *count = 0;
    while (freed < n) {
        int best = -1;
        for (int i = 0; i < MAXE; i++) {
            melem *e = &M.e[i];
            if (!e->alive || !e->end || e->nchild || e->lock) continue;
            if (best < 0 || m_before(e, &M.e[best])) best = i;
        }
        if (best < 0) break;
        ids[*count] = M.e[best].cre;
        int32_t len = 0;
        for (int y = best;;) {
            int p = M.e[y].parent;
            m_unlink(y);
            len += M.P;
            if (p < 0 || M.e[p].end) break;
            y = p;
        }
        lens[(*count)++] = len;
        freed += len;
    }
    return freed;
}

/* ---- comparing the tree with the model ----------------------------------- */

typedef struct rec {
    uint64_t path, time, hits, cre;
    int32_t page;
    int32_t lock, end;
} rec;

static struct {
    rec r[MAXE];
    int n;
    uint64_t *path; /* (slots) path hash at each node's end */
    int over;
} tv;

static void visit_fn(void *ctx, const radix_node_info *in)
{
    (void)ctx;
    uint64_t h;
    if (in->parent_slot < 0 || in->len == 0) {
        int k = 0;
        while (k < NUM_NS && ns_vals[k] != in->ns) k++;
        h = ns_seed(k);
    } else {
        h = tv.path[in->parent_slot];
    }
    for (int32_t i = 0; i < in->len / M.P; i++) {
        h = hash_page(h, in->tokens + i * M.P, M.P);
        if (tv.n == MAXE) {
            tv.over = 1;
            return;
        }
        rec *r = &tv.r[tv.n++];
        r->path = h;
        r->page = in->pages[i];
        r->time = in->time;
        r->hits = in->hits;
        r->lock = in->lock;
        r->end = i == in->len / M.P - 1;
        r->cre = r->end ? in->id : 0;
    }
    tv.path[in->slot] = h;
}

static void compare(void)
{
    char err[512];
    rkv_status st = radix_tree_check(T, err, sizeof err);
    REQUIRE(st == RKV_OK, "%s", err);
    tv.path = calloc((size_t)radix_tree_slots(T), sizeof(uint64_t));
    tv.n = 0;
    tv.over = 0;
    radix_tree_visit(T, visit_fn, NULL);
    free(tv.path);
    REQUIRE(!tv.over, "tree holds more pages than the model can");
    static rec mr[MAXE];
    int mn = 0;
    int64_t evictable = 0, protect = 0, nodes = 0, cands = 0;
    for (int i = 0; i < MAXE; i++) {
        melem *e = &M.e[i];
        if (!e->alive) continue;
        mr[mn++] = (rec){e->path, e->time, e->hits, e->end ? e->cre : 0, e->page, e->lock, e->end};
        if (e->lock) protect += M.P;
        else evictable += M.P;
        nodes += e->end;
        cands += e->end && !e->nchild && !e->lock;
    }
    REQUIRE(mn == tv.n, "model caches %d pages, tree %d", mn, tv.n);
    /* pair the tree's pages with the model's by path (paths are unique) */
    enum { HT = 2048 };
    static int16_t ht[HT];
    memset(ht, -1, sizeof ht);
    for (int i = 0; i < tv.n; i++) {
        uint32_t h = (uint32_t)(tv.r[i].path ^ (tv.r[i].path >> 29)) & (HT - 1);
        while (ht[h] >= 0) {
            REQUIRE(tv.r[ht[h]].path != tv.r[i].path, "tree caches one path twice");
            h = (h + 1) & (HT - 1);
        }
        ht[h] = (int16_t)i;
    }
    for (int i = 0; i < mn; i++) {
        rec *a = &mr[i], *b = NULL;
        for (uint32_t h = (uint32_t)(a->path ^ (a->path >> 29)) & (HT - 1); ht[h] >= 0;
             h = (h + 1) & (HT - 1))
            if (tv.r[ht[h]].path == a->path) {
                b = &tv.r[ht[h]];
                break;
            }
        REQUIRE(b != NULL, "a page the model caches is missing from the tree");
        REQUIRE(a->page == b->page, "page id: model %d tree %d", a->page, b->page);
        REQUIRE(a->time == b->time, "time: model %llu tree %llu", (unsigned long long)a->time,
                (unsigned long long)b->time);
        REQUIRE(a->hits == b->hits, "hits: model %llu tree %llu", (unsigned long long)a->hits,
                (unsigned long long)b->hits);
        REQUIRE(a->lock == b->lock, "lock: model %d tree %d", a->lock, b->lock);
        REQUIRE(a->end == b->end, "node end: model %d tree %d", a->end, b->end);
        REQUIRE(a->cre == b->cre, "node id: model %llu tree %llu", (unsigned long long)a->cre,
                (unsigned long long)b->cre);
    }
    radix_tree_sizes s;
    radix_tree_get_sizes(T, &s);
    REQUIRE(s.evictable_tokens == evictable && s.protected_tokens == protect &&
                s.num_nodes == nodes && s.num_candidates == cands,
            "sizes: tree %lld/%lld/%lld/%lld model %lld/%lld/%lld/%lld", (long long)s.evictable_tokens,
            (long long)s.protected_tokens, (long long)s.num_nodes, (long long)s.num_candidates,
            (long long)evictable, (long long)protect, (long long)nodes, (long long)cands);
    REQUIRE(radix_tree_clock(T) == M.clock, "clock");
    REQUIRE(pool.num_cached == mn, "pool caches %d pages, model %d", pool.num_cached, mn);
}

/* ---- operations on both ----------------------------------------------- */

static struct {
    uint64_t ids[MAXE];
    int32_t lens[MAXE];
    int n;
} tlog;

static void on_evict(void *ctx, const radix_node_info *in)
{
    (void)ctx;
    tlog.ids[tlog.n] = in->id;
    tlog.lens[tlog.n++] = in->len;
}

static void evict_both(int64_t n)
{
    uint64_t ids[MAXE];
    int32_t lens[MAXE];
    int cnt;
    tlog.n = 0;
    int64_t got = radix_tree_evict(T, n);
    int64_t want = m_evict(n, ids, lens, &cnt);
    REQUIRE(got == want, "evict(%lld) freed %lld, model %lld", (long long)n, (long long)got,
            (long long)want);
    REQUIRE(tlog.n == cnt, "evicted %d nodes, model %d", tlog.n, cnt);
    for (int i = 0; i < cnt; i++)
        REQUIRE(tlog.ids[i] == ids[i] && tlog.lens[i] == lens[i],
                "victim %d: tree id %llu len %d, model id %llu len %d", i,
                (unsigned long long)tlog.ids[i], tlog.lens[i], (unsigned long long)ids[i], lens[i]);
}

typedef struct held {
    int32_t slot;
    int elem;
} held;
static held hold[MAXHELD];
static int nheld;

static int32_t stems[8][32];
static int adversarial;            /* draw requests with tu_adversarial() */
static int32_t prev_tok[MAXTOK], prev_n;

static int gen_tokens(int32_t *tok)
{
    if (adversarial) {
        int n = tu_adversarial(&rng, M.P, prev_tok, prev_n, MAXTOK, tok);
        memcpy(prev_tok, tok, sizeof(int32_t) * (size_t)n);
        prev_n = n;
        return n;
    }
    const int32_t *stem = stems[rnd(8)];
    int cut = rnd(33), n = cut + rnd(12);
    if (n > MAXTOK) n = MAXTOK;
    for (int i = 0; i < n; i++) tok[i] = i < cut ? stem[i] : rnd(3);
    return n;
}

static rkv_status alloc_pages(int np, int32_t *pages)
{
    if (np > pool.num_free) evict_both((int64_t)(np - pool.num_free) * M.P);
    return page_pool_alloc(&pool, np, pages);
}

static void do_match(int lock)
{
    int32_t tok[MAXTOK], tp[MAXTOK], mp[MAXTOK];
    int n = gen_tokens(tok), ns = rnd(NUM_NS);
    int32_t len = -1, slot = -1;
    REQUIRE(radix_tree_match(T, tok, n, ns_vals[ns], tp, &len, &slot) == RKV_OK, "match failed");
    int h = m_match(ns, tok, n, mp);
    int mlen = h < 0 ? 0 : m_len(ns, tok, n);
    REQUIRE(len == mlen, "match length: tree %d model %d", len, mlen);
    REQUIRE(!memcmp(tp, mp, sizeof(int32_t) * (size_t)(len / M.P)), "matched pages differ");
    if (lock && nheld < MAXHELD) {
        REQUIRE(radix_tree_lock(T, slot) == RKV_OK, "lock failed");
        m_lock(h, 1);
        hold[nheld++] = (held){slot, h};
    }
}

/* A request that allocated pages for all its tokens, inserted, and frees the
 * duplicates of the prefix that was already cached. */
static void do_insert(void)
{
    int32_t tok[MAXTOK], pages[MAXTOK];
    int n = gen_tokens(tok), ns = rnd(NUM_NS), np = n / M.P;
    if (alloc_pages(np, pages) != RKV_OK) return;
    int32_t prefix = -1;
    REQUIRE(radix_tree_insert(T, tok, n, pages, ns_vals[ns], &prefix) == RKV_OK, "insert failed");
    int mp = m_insert(ns, tok, n, pages);
    REQUIRE(prefix == mp, "insert prefix: tree %d model %d", prefix, mp);
    REQUIRE(page_pool_free(&pool, pages, prefix / M.P) == RKV_OK, "freeing duplicates");
}

/* The engine's flow: match and lock, allocate the rest, insert cached pages +
 * new ones, free what turned out cached meanwhile, unlock. */
static void do_request(void)
{
    int32_t tok[MAXTOK], pages[MAXTOK], mp[MAXTOK];
    int n = gen_tokens(tok), ns = rnd(NUM_NS), np = n / M.P;
    int32_t len = -1, slot = -1;
    REQUIRE(radix_tree_match(T, tok, n, ns_vals[ns], pages, &len, &slot) == RKV_OK, "match");
    int h = m_match(ns, tok, n, mp);
    REQUIRE(radix_tree_lock(T, slot) == RKV_OK, "lock");
    m_lock(h, 1);
    compare();
    int have = len / M.P;
    if (alloc_pages(np - have, pages + have) == RKV_OK) {
        int32_t prefix = -1;
        REQUIRE(radix_tree_insert(T, tok, n, pages, ns_vals[ns], &prefix) == RKV_OK, "insert");
        int want = m_insert(ns, tok, n, pages);
        REQUIRE(prefix == want && prefix >= len, "insert prefix: tree %d model %d matched %d",
                prefix, want, len);
        REQUIRE(page_pool_free(&pool, pages + have, prefix / M.P - have) == RKV_OK, "free dups");
    }
    REQUIRE(radix_tree_unlock(T, slot) == RKV_OK, "unlock");
    m_lock(h, -1);
}

static void do_unlock(void)
{
    if (!nheld) return;
    int i = rnd(nheld);
    REQUIRE(radix_tree_unlock(T, hold[i].slot) == RKV_OK, "unlock");
    m_lock(hold[i].elem, -1);
    hold[i] = hold[--nheld];
}

static void run(int P, radix_policy pol, uint64_t s, int ops)
{
    seed = rng = s;
    op_no = 0;
    memset(&M, 0, sizeof M);
    M.P = P;
    M.pol = pol;
    for (int k = 0; k < NUM_NS; k++) M.top[k] = -1;
    nheld = 0;
    prev_n = 0;
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 32; j++) stems[i][j] = rnd(4) ? rnd(6) : 100 + i;
    REQUIRE(page_pool_init(&pool, 160 / P * 2, P) == RKV_OK, "pool");
    REQUIRE(radix_tree_create(&pool, pol, &T) == RKV_OK, "create");
    radix_tree_set_evict_cb(T, on_evict, NULL);
    for (op_no = 0; op_no < ops; op_no++) {
        int r = rnd(100);
        if (r < 30) do_match(rnd(10) < 7);
        else if (r < 60) do_insert();
        else if (r < 72) do_request();
        else if (r < 88) do_unlock();
        else evict_both(rnd(3 * P + 12));
        compare();
    }
    while (nheld) do_unlock();
    evict_both(INT64_MAX);
    compare();
    REQUIRE(pool.num_free == pool.num_pages, "pages left after evicting all");
    radix_tree_destroy(T);
    page_pool_destroy(&pool);
}

static uint64_t base_seed(void)
{
    const char *e = getenv("RKV_SEED");
    return e ? strtoull(e, NULL, 0) : 20261123ULL;
}

START_TEST(random_vs_model)
{
    static const int Ps[] = {1, 2, 4};
    int P = Ps[_i % 3];
    radix_policy pol = (radix_policy)(_i / 3);
    run(P, pol, base_seed() + (uint64_t)_i * 1000003ULL, 12000);
}
END_TEST

/* Issue 29: the adversarial workload (tu_adversarial: pages that share all
 * but their last token, repeated-token pages, cuts beside page boundaries),
 * P in {1, 2, 4, 16} x lru, lfu, fifo. */
START_TEST(adversarial_vs_model)
{
    static const int Ps[] = {1, 2, 4, 16};
    int P = Ps[_i % 4];
    radix_policy pol = (radix_policy)(_i / 4);
    long ops = tu_diff_steps(6000);
    adversarial = 1;
    run(P, pol, base_seed() + 77 + (uint64_t)_i * 1000003ULL, (int)ops);
    adversarial = 0;
    printf("radix %s P %d: %ld adversarial operations against the model, 0 divergences\n",
           radix_policy_name(pol), P, ops);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("radix_random");
    TCase *tc = tcase_create("model");
    tcase_set_timeout(tc, 120);
    /* P in {1, 2, 4} x policy in {lru, lfu, fifo}: 9 x 12000 = 108k operations */
    tcase_add_loop_test(tc, random_vs_model, 0, 9);
    tcase_add_loop_test(tc, adversarial_vs_model, 0, 12);
    suite_add_tcase(s, tc);
    return check_run(s);
}
