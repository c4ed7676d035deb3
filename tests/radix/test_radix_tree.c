/* test_radix_tree.c - hand-written cases for the compressed radix tree: every
 * branch of insert/match/split, locks and sizes, eviction order, cascade,
 * namespaces, policies, dumps. Every operation is followed by the invariant
 * check. */
#include <check.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "check_run.h"
#include "radix_tree.h"

static page_pool pool;
static radix_tree *t;

/* eviction log: each evicted node's id, length and own edge tokens */
enum { LOG_MAX = 64 };
static struct {
    int n;
    uint64_t id[LOG_MAX];
    int32_t len[LOG_MAX];
    int32_t tok0[LOG_MAX];
    int32_t tok1[LOG_MAX];
} elog;

static void on_evict(void *ctx, const radix_node_info *in)
{
    (void)ctx;
    if (elog.n < LOG_MAX) {
        elog.id[elog.n] = in->id;
        elog.len[elog.n] = in->len;
        elog.tok0[elog.n] = in->tokens[0];
        elog.tok1[elog.n] = in->len > 1 ? in->tokens[1] : -1;
    }
    elog.n++;
}

static void check_tree(void)
{
    char err[512];
    rkv_status st = radix_tree_check(t, err, sizeof err);
    ck_assert_msg(st == RKV_OK, "%s", err);
    ck_assert_int_eq(page_pool_check(&pool, err, sizeof err), RKV_OK);
}

static void open_tree(int32_t P, int32_t pages, radix_policy pol)
{
    ck_assert_int_eq(page_pool_init(&pool, pages, P), RKV_OK);
    ck_assert_int_eq(radix_tree_create(&pool, pol, &t), RKV_OK);
    memset(&elog, 0, sizeof elog);
    radix_tree_set_evict_cb(t, on_evict, NULL);
    check_tree();
}

static void close_tree(void)
{
    radix_tree_destroy(t);
    t = NULL;
    /* destroy gave every cached page back */
    ck_assert_int_eq(pool.num_cached, 0);
    page_pool_destroy(&pool);
}

/* Insert like a finished request: pages for all whole pages, duplicates of
 * the cached prefix freed by the caller. Returns the prefix length; the new
 * pages are written to pages_out when given. */
static int32_t ins_ns(const int32_t *tok, int32_t n, uint64_t ns, int32_t *pages_out)
{
    int32_t np = n / pool.page_size;
    int32_t pages[256];
    ck_assert_int_le(np, 256);
    ck_assert_int_eq(page_pool_alloc(&pool, np, pages), RKV_OK);
    int32_t prefix = -1;
    ck_assert_int_eq(radix_tree_insert(t, tok, n, pages, ns, &prefix), RKV_OK);
    ck_assert_int_eq(prefix % pool.page_size, 0);
    ck_assert_int_eq(page_pool_free(&pool, pages, prefix / pool.page_size), RKV_OK);
    if (pages_out) memcpy(pages_out, pages, sizeof(int32_t) * (size_t)np);
    check_tree();
    return prefix;
}

static int32_t ins(const int32_t *tok, int32_t n) { return ins_ns(tok, n, 0, NULL); }

static int32_t mat_ns(const int32_t *tok, int32_t n, uint64_t ns, int32_t *node, int32_t *pages)
{
    int32_t buf[256], len = -1, nd = -1;
    ck_assert_int_eq(radix_tree_match(t, tok, n, ns, pages ? pages : buf, &len, &nd), RKV_OK);
    if (node) *node = nd;
    check_tree();
    return len;
}

static int32_t mat(const int32_t *tok, int32_t n, int32_t *node)
{
    return mat_ns(tok, n, 0, node, NULL);
}

static radix_tree_sizes sizes(void)
{
    radix_tree_sizes s;
    radix_tree_get_sizes(t, &s);
    return s;
}

/* Info of one node, by slot, via the visitor. */
typedef struct find_ctx {
    int32_t slot;
    radix_node_info info;
    int found;
    int count;
} find_ctx;

static void find_fn(void *vc, const radix_node_info *in)
{
    find_ctx *f = vc;
    f->count++;
    if (in->slot == f->slot) {
        f->info = *in;
        f->info.tokens = NULL;
        f->info.pages = NULL;
        f->found = 1;
    }
}

static radix_node_info info(int32_t slot)
{
    find_ctx f = {.slot = slot};
    radix_tree_visit(t, find_fn, &f);
    ck_assert_msg(f.found, "slot %d not in the tree", slot);
    return f.info;
}

enum { A = 1, B, C, D, E, X, Y, Z };

START_TEST(empty_tree)
{
    open_tree(1, 16, RADIX_LRU);
    int32_t tok[] = {A, B, C};
    int32_t node = -1;
    ck_assert_int_eq(mat(tok, 3, &node), 0);
    ck_assert_int_eq(node, 0); /* the root */
    ck_assert_int_eq(mat(tok, 0, &node), 0);
    ck_assert_int_eq(radix_tree_clock(t), 2);
    ck_assert_int_eq(radix_tree_evict(t, 10), 0);
    ck_assert_int_eq(sizes().num_nodes, 0);
    /* insert into the empty tree: one leaf, nothing was cached */
    ck_assert_int_eq(ins(tok, 3), 0);
    ck_assert_int_eq(sizes().num_nodes, 1);
    ck_assert_int_eq(sizes().evictable_tokens, 3);
    ck_assert_int_eq(sizes().num_candidates, 1);
    ck_assert_int_eq(pool.num_cached, 3);
    close_tree();
}
END_TEST

START_TEST(edge_fully_matched)
{
    open_tree(1, 16, RADIX_LRU);
    int32_t tok[] = {A, B, C, D, E, X};
    int32_t pages[8], got[8], node = -1, node2 = -1;
    ck_assert_int_eq(ins_ns(tok, 5, 0, pages), 0);
    ck_assert_int_eq(mat_ns(tok, 5, 0, &node, got), 5);
    ck_assert_mem_eq(got, pages, 5 * sizeof(int32_t));
    /* a longer query stops at the end of the cached edge */
    ck_assert_int_eq(mat(tok, 6, &node2), 5);
    ck_assert_int_eq(node, node2);
    ck_assert_int_eq(sizes().splits, 0);
    ck_assert_int_eq(sizes().num_nodes, 1);
    radix_node_info in = info(node);
    ck_assert_uint_eq(in.time, 3);
    ck_assert_uint_eq(in.created, 1);
    ck_assert_uint_eq(in.hits, 3);
    /* inserting the same tokens again: all already cached */
    ck_assert_int_eq(ins(tok, 5), 5);
    ck_assert_int_eq(pool.num_cached, 5);
    close_tree();
}
END_TEST

START_TEST(match_ends_inside_edge)
{
    open_tree(1, 16, RADIX_LRU);
    int32_t tok[] = {A, B, C, D, E};
    int32_t pages[8], got[8], node = -1, leaf = -1;
    ins_ns(tok, 5, 0, pages);
    mat(tok, 5, &leaf);
    uint64_t leaf_id = info(leaf).id;
    ck_assert_int_eq(mat_ns(tok, 3, 0, &node, got), 3);
    ck_assert_mem_eq(got, pages, 3 * sizeof(int32_t));
    ck_assert_int_eq(sizes().splits, 1);
    ck_assert_int_eq(sizes().num_nodes, 2);
    ck_assert_int_ne(node, leaf);
    /* the prefix is new (created at the split, k = 1), the suffix keeps
     * identity; both halves take the match's time */
    radix_node_info pre = info(node), suf = info(leaf);
    ck_assert_uint_eq(pre.id, 3u << 2 | 1);
    ck_assert_uint_eq(pre.created, 3);
    ck_assert_uint_eq(suf.id, leaf_id);
    ck_assert_uint_eq(suf.created, 1);
    ck_assert_uint_eq(pre.time, 3);
    ck_assert_uint_eq(suf.time, 3);
    ck_assert_int_eq(pre.len, 3);
    ck_assert_int_eq(suf.len, 2);
    ck_assert_int_eq(suf.parent_slot, node);
    ck_assert_int_eq(pre.num_children, 1);
    /* matching the split point again splits nothing */
    ck_assert_int_eq(mat(tok, 3, NULL), 3);
    ck_assert_int_eq(sizes().splits, 1);
    ck_assert_int_eq(mat(tok, 5, NULL), 5);
    ck_assert_int_eq(sizes().evictable_tokens, 5);
    close_tree();
}
END_TEST

START_TEST(insert_diverges_and_ends_inside)
{
    open_tree(1, 32, RADIX_LRU);
    int32_t t1[] = {A, B, C, D, E}, t2[] = {A, B, X, Y}, t3[] = {A, B, Z}, t4[] = {X, Y, Z};
    ins(t1, 5);
    /* diverges inside the edge: split at 2, new leaf XY */
    ck_assert_int_eq(ins(t2, 4), 2);
    ck_assert_int_eq(sizes().num_nodes, 3);
    ck_assert_int_eq(sizes().splits, 1);
    ck_assert_int_eq(pool.num_cached, 7);
    /* diverges at a child (AB is a whole node, no child starts with Z) */
    int32_t node = -1;
    ck_assert_int_eq(mat(t3, 3, &node), 2);
    ck_assert_int_eq(info(node).len, 2);
    ck_assert_int_eq(sizes().splits, 1);
    ck_assert_int_eq(ins(t3, 3), 2);
    ck_assert_int_eq(sizes().num_nodes, 4);
    ck_assert_int_eq(info(node).num_children, 3);
    /* no child of the root starts with X */
    ck_assert_int_eq(mat(t4, 3, NULL), 0);
    /* insert ending inside an edge splits it and adopts nothing */
    int32_t before = pool.num_cached;
    ck_assert_int_eq(ins(t1, 4), 4);
    ck_assert_int_eq(pool.num_cached, before);
    ck_assert_int_eq(sizes().num_nodes, 5);
    ck_assert_int_eq(sizes().splits, 2);
    close_tree();
}
END_TEST

START_TEST(pages_cut_when_p_gt_1)
{
    open_tree(2, 32, RADIX_LRU);
    int32_t t1[] = {1, 2, 3, 4, 5, 6, 7};
    int32_t pages[8], got[8];
    /* 7 tokens: the partial last page is cut, 6 cached in 3 pages */
    ck_assert_int_eq(ins_ns(t1, 7, 0, pages), 0);
    ck_assert_int_eq(sizes().evictable_tokens, 6);
    ck_assert_int_eq(pool.num_cached, 3);
    /* a 5-token match is cut to 4 (2 pages) and splits after 2 pages */
    ck_assert_int_eq(mat_ns(t1, 5, 0, NULL, got), 4);
    ck_assert_mem_eq(got, pages, 2 * sizeof(int32_t));
    ck_assert_int_eq(sizes().splits, 1);
    /* 1 2 3 9: diverges inside the second page, so only the first page is
     * shared and the split lands on a page boundary */
    int32_t t2[] = {1, 2, 3, 9};
    ck_assert_int_eq(mat(t2, 4, NULL), 2);
    ck_assert_int_eq(ins(t2, 4), 2);
    /* same first token, different first page: a sibling of its own */
    int32_t t3[] = {1, 5, 6, 6};
    ck_assert_int_eq(mat(t3, 4, NULL), 0);
    ck_assert_int_eq(ins(t3, 4), 0);
    int32_t node = -1;
    ck_assert_int_eq(mat(t3, 4, &node), 4);
    ck_assert_int_eq(info(node).len, 4);
    ck_assert_int_eq(mat(t1, 6, NULL), 6);
    ck_assert_int_eq(mat(t2, 3, NULL), 2);
    /* fewer tokens than one page: nothing */
    ck_assert_int_eq(mat(t1, 1, &node), 0);
    ck_assert_int_eq(node, 0);
    int32_t prefix = -1;
    ck_assert_int_eq(radix_tree_insert(t, t1, 1, pages, 0, &prefix), RKV_OK);
    ck_assert_int_eq(prefix, 0);
    check_tree();
    close_tree();
}
END_TEST

START_TEST(many_children_table)
{
    /* A node with hundreds of children grows and shrinks its table. At P = 3
     * all children share their first token and differ inside the first page. */
    for (int32_t P = 1; P <= 3; P += 2) {
        open_tree(P, 4096, RADIX_FIFO);
        int32_t tok[8];
        for (int32_t round = 0; round < 2; round++) {
            for (int32_t i = 0; i < 300; i++) {
                for (int32_t j = 0; j < 2 * P; j++) tok[j] = 50 + j;
                tok[P == 1 ? 0 : 1] = 1000 + i;
                ck_assert_int_eq(round == 0 ? ins(tok, 2 * P) : mat(tok, 2 * P, NULL),
                                 round == 0 ? 0 : 2 * P);
            }
        }
        ck_assert_int_eq(sizes().num_nodes, 300);
        /* FIFO evicts in creation order, the table shrinking on the way */
        for (int32_t i = 0; i < 299; i++) {
            ck_assert_int_eq(radix_tree_evict(t, 1), 2 * P);
            check_tree();
        }
        ck_assert_int_eq(sizes().num_nodes, 1);
        ck_assert_int_eq(elog.n, 299);
        for (int32_t i = 0; i < LOG_MAX; i++)
            ck_assert_int_eq(P == 1 ? elog.tok0[i] : elog.tok1[i], 1000 + i);
        close_tree();
    }
}
END_TEST

START_TEST(lock_unlock_sizes)
{
    open_tree(1, 16, RADIX_LRU);
    int32_t tok[] = {A, B, C, D, E};
    ins(tok, 5);
    int32_t node = -1;
    ck_assert_int_eq(mat(tok, 3, &node), 3);
    ck_assert_int_eq(radix_tree_lock(t, node), RKV_OK);
    check_tree();
    ck_assert_int_eq(sizes().protected_tokens, 3);
    ck_assert_int_eq(sizes().evictable_tokens, 2);
    /* a second lock on the same path moves nothing */
    ck_assert_int_eq(radix_tree_lock(t, node), RKV_OK);
    ck_assert_int_eq(sizes().protected_tokens, 3);
    ck_assert_int_eq(info(node).lock, 2);
    ck_assert_int_eq(radix_tree_unlock(t, node), RKV_OK);
    ck_assert_int_eq(sizes().protected_tokens, 3);
    /* 1 -> 0 moves the tokens back */
    ck_assert_int_eq(radix_tree_unlock(t, node), RKV_OK);
    check_tree();
    ck_assert_int_eq(sizes().protected_tokens, 0);
    ck_assert_int_eq(sizes().evictable_tokens, 5);
    /* unbalanced unlock is refused and changes nothing */
    ck_assert_int_eq(radix_tree_unlock(t, node), RKV_EINVAL);
    ck_assert_int_eq(radix_tree_lock(t, 12345), RKV_EINVAL);
    check_tree();
    /* the root handle (nothing matched) locks as a no-op */
    ck_assert_int_eq(radix_tree_lock(t, 0), RKV_OK);
    ck_assert_int_eq(radix_tree_unlock(t, 0), RKV_OK);
    check_tree();
    /* locking the leaf protects the whole path */
    int32_t leaf = -1;
    ck_assert_int_eq(mat(tok, 5, &leaf), 5);
    ck_assert_int_eq(radix_tree_lock(t, leaf), RKV_OK);
    ck_assert_int_eq(sizes().protected_tokens, 5);
    ck_assert_int_eq(sizes().num_candidates, 0);
    ck_assert_int_eq(radix_tree_unlock(t, leaf), RKV_OK);
    ck_assert_int_eq(sizes().num_candidates, 1);
    check_tree();
    close_tree();
}
END_TEST

START_TEST(eviction_order_ties)
{
    open_tree(1, 32, RADIX_LRU);
    int32_t t1[] = {A, B, C, D}, t2[] = {A, B, X, Y}, t3[] = {Z, Z};
    ins(t3, 2);                 /* clock 1: ZZ */
    ins(t1, 4);                 /* clock 2: ABCD, id 2<<2|2 */
    ins(t2, 4);                 /* clock 3: split: AB (id 3<<2|1), CD, XY (id 3<<2|2), all time 3 */
    /* ZZ is oldest; CD and XY tie on time 3, CD was created first */
    ck_assert_int_eq(radix_tree_evict(t, 1), 2);
    ck_assert_int_eq(elog.tok0[0], Z);
    ck_assert_int_eq(radix_tree_evict(t, 1), 2);
    ck_assert_int_eq(elog.tok0[1], C);
    ck_assert_uint_eq(elog.id[1], 2u << 2 | 2);
    ck_assert_int_eq(radix_tree_evict(t, 1), 2);
    ck_assert_int_eq(elog.tok0[2], X);
    ck_assert_uint_eq(elog.id[2], 3u << 2 | 2);
    /* AB became a candidate as soon as it lost its last child */
    ck_assert_int_eq(sizes().num_candidates, 1);
    ck_assert_int_eq(radix_tree_evict(t, 1), 2);
    ck_assert_int_eq(elog.tok0[3], A);
    ck_assert_int_eq(pool.num_cached, 0);
    check_tree();
    close_tree();
}
END_TEST

START_TEST(fifo_split_prefix_created_at_split)
{
    open_tree(1, 32, RADIX_FIFO);
    int32_t t1[] = {A, B, C, D}, t2[] = {X, Y};
    ins(t1, 4); /* clock 1, id 6 */
    ins(t2, 2); /* clock 2, id 10 */
    mat(t1, 2, NULL); /* clock 3: AB is created now (id 13), CD keeps id 6 */
    for (int i = 0; i < 3; i++) ck_assert_int_eq(radix_tree_evict(t, 1), 2);
    ck_assert_int_eq(elog.tok0[0], C);
    ck_assert_int_eq(elog.tok0[1], X);
    ck_assert_int_eq(elog.tok0[2], A);
    ck_assert_uint_eq(elog.id[2], 3u << 2 | 1);
    check_tree();
    close_tree();
}
END_TEST

/* insert A(1), insert B(2), match B(3), match B(4), insert C(5), match A(6):
 *   A: hits 2, time 6, created 1;  B: hits 3, time 4;  C: hits 1, time 5.
 * lru evicts B, lfu evicts C, fifo evicts A. */
static int32_t first_victim(radix_policy pol)
{
    open_tree(1, 32, pol);
    int32_t a[] = {A, A}, b[] = {B, B}, c[] = {C, C};
    ins(a, 2);
    ins(b, 2);
    mat(b, 2, NULL);
    mat(b, 2, NULL);
    ins(c, 2);
    mat(a, 2, NULL);
    ck_assert_int_eq(radix_tree_evict(t, 1), 2);
    int32_t v = elog.tok0[0];
    check_tree();
    close_tree();
    return v;
}

START_TEST(policies_choose_differently)
{
    ck_assert_int_eq(first_victim(RADIX_LRU), B);
    ck_assert_int_eq(first_victim(RADIX_LFU), C);
    ck_assert_int_eq(first_victim(RADIX_FIFO), A);
    radix_policy p;
    ck_assert_int_eq(radix_policy_parse("lfu", &p), RKV_OK);
    ck_assert_int_eq(p, RADIX_LFU);
    ck_assert_int_eq(radix_policy_parse(NULL, &p), RKV_OK);
    ck_assert_int_eq(p, RADIX_LRU);
    ck_assert_int_eq(radix_policy_parse("mru", &p), RKV_EINVAL);
}
END_TEST

START_TEST(cascade)
{
    open_tree(1, 32, RADIX_LRU);
    int32_t t1[] = {A, B, C, D}, t2[] = {A, B, X, Y};
    ins(t1, 4);
    ins(t2, 4);
    /* 3 tokens asked: CD and XY go (4 freed), AB stays as a candidate */
    ck_assert_int_eq(radix_tree_evict(t, 3), 4);
    ck_assert_int_eq(elog.n, 2);
    ck_assert_int_eq(sizes().num_nodes, 1);
    ck_assert_int_eq(sizes().num_candidates, 1);
    check_tree();
    /* re-grow, then ask for 5: CD, XY, and then their parent AB */
    ins(t1, 4);
    ins(t2, 4);
    elog.n = 0;
    ck_assert_int_eq(radix_tree_evict(t, 5), 6);
    ck_assert_int_eq(elog.n, 3);
    ck_assert_int_eq(elog.tok0[2], A);
    ck_assert_int_eq(sizes().num_nodes, 0);
    ck_assert_int_eq(pool.num_free, 32);
    check_tree();
    close_tree();
}
END_TEST

START_TEST(locked_paths_never_evicted)
{
    open_tree(1, 32, RADIX_LRU);
    int32_t t1[] = {A, B, C, D}, t2[] = {A, B, X, Y};
    ins(t1, 4);
    ins(t2, 4);
    int32_t node = -1;
    ck_assert_int_eq(mat(t1, 3, &node), 3); /* AB | C | D */
    ck_assert_int_eq(radix_tree_lock(t, node), RKV_OK);
    /* more than is evictable: only D and XY go, the result says how much */
    ck_assert_int_eq(radix_tree_evict(t, 100), 3);
    check_tree();
    ck_assert_int_eq(sizes().evictable_tokens, 0);
    ck_assert_int_eq(sizes().protected_tokens, 3);
    ck_assert_int_eq(radix_tree_evict(t, 100), 0);
    ck_assert_int_eq(mat(t1, 4, NULL), 3);
    ck_assert_int_eq(radix_tree_unlock(t, node), RKV_OK);
    check_tree();
    ck_assert_int_eq(radix_tree_evict(t, 100), 3);
    ck_assert_int_eq(pool.num_free, 32);
    check_tree();
    close_tree();
}
END_TEST

START_TEST(namespaces_apart)
{
    open_tree(1, 32, RADIX_LRU);
    int32_t tok[] = {A, B, C};
    int32_t p0[4], p7[4], got[4], node = -1;
    ck_assert_int_eq(ins_ns(tok, 3, 0, p0), 0);
    ck_assert_int_eq(ins_ns(tok, 3, 7, p7), 0); /* nothing shared across tenants */
    ck_assert_int_eq(pool.num_cached, 6);
    ck_assert_int_eq(mat_ns(tok, 3, 7, &node, got), 3);
    ck_assert_mem_eq(got, p7, 3 * sizeof(int32_t));
    ck_assert_uint_eq(info(node).ns, 7);
    ck_assert_int_eq(mat_ns(tok, 3, 0, NULL, got), 3);
    ck_assert_mem_eq(got, p0, 3 * sizeof(int32_t));
    ck_assert_int_eq(mat_ns(tok, 3, 5, &node, NULL), 0); /* unknown tenant */
    ck_assert_int_eq(mat_ns(tok, 3, UINT64_MAX, NULL, NULL), 0);
    ck_assert_int_eq(sizes().num_nodes, 2);
    /* both leaves are evictable; the namespace node never is */
    ck_assert_int_eq(radix_tree_evict(t, 100), 6);
    ck_assert_int_eq(sizes().num_nodes, 0);
    ck_assert_int_eq(mat_ns(tok, 3, 7, NULL, NULL), 0);
    ck_assert_int_eq(ins_ns(tok, 3, 7, NULL), 0);
    check_tree();
    close_tree();
}
END_TEST

START_TEST(bad_pages_change_nothing)
{
    open_tree(1, 16, RADIX_LRU);
    int32_t tok[] = {A, B, C};
    int32_t pages[3] = {0, 1, 2}; /* FREE, not handed out: a caller bug */
    int32_t prefix = -1;
    ck_assert_int_eq(radix_tree_insert(t, tok, 3, pages, 0, &prefix), RKV_EINVAL);
    check_tree();
    ck_assert_int_eq(sizes().num_nodes, 0);
    ck_assert_int_eq(pool.num_free, 16);
    ck_assert_int_eq(radix_tree_insert(t, tok, -1, pages, 0, &prefix), RKV_EINVAL);
    close_tree();
}
END_TEST

START_TEST(dumps)
{
    open_tree(1, 32, RADIX_LRU);
    int32_t t1[] = {A, B, C, D, E}, t2[] = {A, B, X};
    ins(t1, 5);
    ins_ns(t2, 3, 9, NULL);
    ins(t2, 3);
    char *buf = NULL;
    size_t sz = 0;
    FILE *f = open_memstream(&buf, &sz);
    radix_tree_dump_json(t, f, 2);
    fclose(f);
    /* exactly one line */
    ck_assert_ptr_eq(strchr(buf, '\n'), buf + sz - 1);
    json_error_t jerr;
    json_t *doc = json_loads(buf, 0, &jerr);
    ck_assert_msg(doc != NULL, "bad JSON: %s", jerr.text);
    ck_assert_int_eq(json_integer_value(json_object_get(doc, "clock")), 3);
    json_t *nodes = json_object_get(doc, "nodes");
    /* root, AB, CDE, X, namespace 9, ABX */
    ck_assert_int_eq(json_array_size(nodes), 6);
    int truncated = 0, ns9 = 0;
    for (size_t i = 0; i < json_array_size(nodes); i++) {
        json_t *n = json_array_get(nodes, i);
        ck_assert_ptr_nonnull(json_object_get(n, "id"));
        ck_assert_ptr_nonnull(json_object_get(n, "parent"));
        ck_assert_ptr_nonnull(json_object_get(n, "lock"));
        ck_assert_ptr_nonnull(json_object_get(n, "time"));
        ck_assert_ptr_nonnull(json_object_get(n, "created"));
        json_int_t len = json_integer_value(json_object_get(n, "length"));
        size_t shown = json_array_size(json_object_get(n, "tokens"));
        ck_assert_int_eq((json_int_t)shown, len > 2 ? 2 : len);
        if (json_is_true(json_object_get(n, "truncated"))) truncated++;
        if (json_integer_value(json_object_get(n, "ns")) == 9) ns9++;
    }
    ck_assert_int_eq(truncated, 2); /* CDE and ABX */
    ck_assert_int_eq(ns9, 2);       /* namespace node and its leaf */
    json_decref(doc);
    free(buf);

    f = open_memstream(&buf, &sz);
    radix_tree_dump_dot(t, f, 3);
    fclose(f);
    ck_assert_ptr_nonnull(strstr(buf, "digraph"));
    ck_assert_ptr_nonnull(strstr(buf, "3 4 5\\nlen=3 lock=0 t=3"));
    ck_assert_ptr_nonnull(strstr(buf, "->"));
    free(buf);

    f = open_memstream(&buf, &sz);
    radix_tree_dump_text(t, f, -1);
    fclose(f);
    ck_assert_ptr_nonnull(strstr(buf, "  [3 4 5] id="));
    ck_assert_ptr_nonnull(strstr(buf, "namespace 9"));
    free(buf);
    close_tree();
}
END_TEST

/* Per-step pictures: created/entered nodes are told by their clock times. */
typedef struct step_ctx {
    uint64_t c0, c1;
    int created, entered;
} step_ctx;

static void step_fn(void *vc, const radix_node_info *in)
{
    step_ctx *s = vc;
    if (in->len == 0) return;
    if (in->created > s->c0 && in->created <= s->c1) s->created++;
    if (in->time > s->c0 && in->time <= s->c1) s->entered++;
}

START_TEST(step_times)
{
    open_tree(1, 32, RADIX_LRU);
    int32_t t1[] = {A, B, C, D}, t2[] = {X, Y}, t3[] = {A, B, Z};
    ins(t1, 4);
    ins(t2, 2);
    step_ctx s = {.c0 = radix_tree_clock(t)};
    mat(t3, 3, NULL); /* splits ABCD: AB created, CD entered */
    ins(t3, 3);       /* Z created under AB */
    s.c1 = radix_tree_clock(t);
    radix_tree_visit(t, step_fn, &s);
    ck_assert_int_eq(s.created, 2);
    ck_assert_int_eq(s.entered, 3);
    close_tree();
}
END_TEST

/* Edges are compared in growing memcmp chunks, then blocks, then tokens: a
 * divergence anywhere in a long edge, at chunk and block borders included,
 * must end the match exactly there (cut to whole pages). */
START_TEST(long_edge_diverges_anywhere)
{
    enum { LONG = 20000 };
    static const int32_t at[] = {0,   1,    63,   64,   65,   127,  128,   191,   192,
                                 959, 960,  4031, 4032, 8127, 8128, 16319, 16320, 19999};
    int32_t *base = malloc(sizeof(int32_t) * LONG), *q = malloc(sizeof(int32_t) * LONG);
    int32_t *pages = malloc(sizeof(int32_t) * LONG), *got = malloc(sizeof(int32_t) * LONG);
    for (int32_t i = 0; i < LONG; i++) base[i] = 7 + i % 1000;
    for (int32_t P = 1; P <= 4; P += 3) {
        for (size_t k = 0; k < sizeof at / sizeof at[0]; k++) {
            ck_assert_int_eq(page_pool_init(&pool, LONG, P), RKV_OK);
            ck_assert_int_eq(radix_tree_create(&pool, RADIX_LRU, &t), RKV_OK);
            ck_assert_int_eq(page_pool_alloc(&pool, LONG / P, pages), RKV_OK);
            int32_t prefix = -1, len = -1, node = -1;
            ck_assert_int_eq(radix_tree_insert(t, base, LONG, pages, 0, &prefix), RKV_OK);
            memcpy(q, base, sizeof(int32_t) * LONG);
            q[at[k]] = -1;
            ck_assert_int_eq(radix_tree_match(t, q, LONG, 0, got, &len, &node), RKV_OK);
            int32_t want = at[k] - at[k] % P;
            ck_assert_msg(len == want, "P=%d diverging at %d: matched %d", P, at[k], len);
            ck_assert_mem_eq(got, pages, sizeof(int32_t) * (size_t)(want / P));
            /* and the whole edge still matches in full */
            ck_assert_int_eq(radix_tree_match(t, base, LONG, 0, got, &len, &node), RKV_OK);
            ck_assert_int_eq(len, LONG);
            check_tree();
            close_tree();
        }
    }
    free(base);
    free(q);
    free(pages);
    free(got);
}
END_TEST

/* A flat tree of 20k leaves, evicted one leaf per call: eviction's prefetch
 * stages (radix_tree.c, evict_ahead) guess the next victims from the heap,
 * and a change to them (deeper stages, stages skipped by tree size) must not
 * change which leaf goes next. Every call is a clock step, so LRU's order is
 * the order of last access, which the test keeps itself. */
enum { BIG_LEAVES = 20000 };
static struct {
    int32_t n;
    int32_t tok0[BIG_LEAVES];
} big_log;

static void on_evict_big(void *ctx, const radix_node_info *in)
{
    (void)ctx;
    if (big_log.n < BIG_LEAVES) big_log.tok0[big_log.n] = in->tokens[0];
    big_log.n++;
}

static int32_t *big_last; /* by leaf: the step of its last access */
static int cmp_last(const void *a, const void *b)
{
    int32_t x = big_last[*(const int32_t *)a], y = big_last[*(const int32_t *)b];
    return (x > y) - (x < y);
}

START_TEST(eviction_order_large_tree)
{
    enum { N = BIG_LEAVES, BASE = 100 };
    open_tree(1, 2 * N, RADIX_LRU);
    radix_tree_set_evict_cb(t, on_evict_big, NULL);
    big_log.n = 0;
    int32_t *order = malloc(sizeof *order * N);
    big_last = malloc(sizeof *big_last * N);
    ck_assert_ptr_nonnull(order);
    ck_assert_ptr_nonnull(big_last);
    int32_t step = 0;
    for (int32_t i = 0; i < N; i++) {
        int32_t tok[2] = {BASE + i, BASE + i}, pages[2], prefix = -1;
        ck_assert_int_eq(page_pool_alloc(&pool, 2, pages), RKV_OK);
        ck_assert_int_eq(radix_tree_insert(t, tok, 2, pages, 0, &prefix), RKV_OK);
        ck_assert_int_eq(prefix, 0);
        big_last[i] = step++;
    }
    check_tree();
    uint64_t x = 12345; /* touch half the leaves, in a seeded order */
    for (int32_t k = 0; k < N / 2; k++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        int32_t i = (int32_t)((x >> 33) % N), tok[2] = {BASE + i, BASE + i}, pages[2];
        int32_t len = -1, node = -1;
        ck_assert_int_eq(radix_tree_match(t, tok, 2, 0, pages, &len, &node), RKV_OK);
        ck_assert_int_eq(len, 2);
        big_last[i] = step++;
    }
    for (int32_t i = 0; i < N; i++) order[i] = i;
    qsort(order, N, sizeof *order, cmp_last);
    ck_assert_int_gt(radix_tree_slots(t), N); /* the leaves and the root */
    for (int32_t i = 0; i < N; i++) ck_assert_int_eq(radix_tree_evict(t, 1), 2);
    ck_assert_int_eq(big_log.n, N);
    for (int32_t i = 0; i < N; i++)
        ck_assert_msg(big_log.tok0[i] == BASE + order[i], "eviction %d: leaf %d, expected %d",
                      i, big_log.tok0[i] - BASE, order[i]);
    ck_assert_int_eq(pool.num_cached, 0);
    check_tree();
    free(order);
    free(big_last);
    big_last = NULL;
    close_tree();
}
END_TEST

Suite *radix_tree_suite(void)
{
    Suite *s = suite_create("radix_tree");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, empty_tree);
    tcase_add_test(tc, edge_fully_matched);
    tcase_add_test(tc, match_ends_inside_edge);
    tcase_add_test(tc, insert_diverges_and_ends_inside);
    tcase_add_test(tc, pages_cut_when_p_gt_1);
    tcase_add_test(tc, many_children_table);
    tcase_add_test(tc, lock_unlock_sizes);
    tcase_add_test(tc, eviction_order_ties);
    tcase_add_test(tc, fifo_split_prefix_created_at_split);
    tcase_add_test(tc, policies_choose_differently);
    tcase_add_test(tc, cascade);
    tcase_add_test(tc, locked_paths_never_evicted);
    tcase_add_test(tc, namespaces_apart);
    tcase_add_test(tc, bad_pages_change_nothing);
    tcase_add_test(tc, dumps);
    tcase_add_test(tc, step_times);
    tcase_add_test(tc, long_edge_diverges_anywhere);
    tcase_add_test(tc, eviction_order_large_tree);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return check_run(radix_tree_suite());
}
