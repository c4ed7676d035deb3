/* test_radix_int64.c - the entries over a caller's int64 ids
 * (radix_tree_match_runs64, radix_tree_insert_take64) against the int32 ones
 * (radix_tree_match_runs, radix_tree_insert_take): two trees over two pools,
 * fed the same seeded random calls (narrowed ids to one, the int64 ids to the
 * other), must answer alike and stay alike (lengths, runs, handles, evicted
 * tokens, sizes, clocks) with the invariant check after every call.
 *
 * An id outside [0, INT32_MAX] at index j: the int64 match is the int32
 * match of the ids before j, and the int64 insert is refused with j in *bad
 * after walking like that match (so the reference takes that match). */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "check_run.h"
#include "radix_tree.h"

enum { MAXN = 96, NOPS = 3000 };

typedef struct side {
    page_pool pool;
    radix_tree *t;
} side;

static uint64_t rng_state;

static uint32_t rnd(uint32_t n)
{
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (uint32_t)(rng_state >> 33) % n;
}

static void side_open(side *s, int32_t P)
{
    ck_assert_int_eq(page_pool_init(&s->pool, 4096, P), RKV_OK);
    ck_assert_int_eq(radix_tree_create(&s->pool, RADIX_LRU, &s->t), RKV_OK);
}

static void side_close(side *s)
{
    radix_tree_destroy(s->t);
    page_pool_destroy(&s->pool);
}

static void check_side(const side *s)
{
    char err[512];
    ck_assert_msg(radix_tree_check(s->t, err, sizeof err) == RKV_OK, "%s", err);
    ck_assert_msg(page_pool_check(&s->pool, err, sizeof err) == RKV_OK, "%s", err);
}

static void same_state(const side *a, const side *b, int op)
{
    radix_tree_sizes x, y;
    radix_tree_get_sizes(a->t, &x);
    radix_tree_get_sizes(b->t, &y);
    ck_assert_msg(x.evictable_tokens == y.evictable_tokens && x.protected_tokens == y.protected_tokens
                  && x.num_nodes == y.num_nodes && x.splits == y.splits,
                  "op %d: sizes differ", op);
    ck_assert_int_eq(radix_tree_clock(a->t), radix_tree_clock(b->t));
    check_side(a);
    check_side(b);
}

static void same_runs(const radix_page_run *r, int32_t nr, const radix_page_run *q, int32_t nq,
                      int op)
{
    ck_assert_msg(nr == nq, "op %d: %d runs against %d", op, nr, nq);
    for (int32_t i = 0; i < nr; i++)
        ck_assert_msg(r[i].first == q[i].first && r[i].count == q[i].count,
                      "op %d: run %d differs", op, i);
}

static void run_ops(int32_t P)
{
    side a, b;
    side_open(&a, P);
    side_open(&b, P);
    rng_state = 0x5eed0000u + (uint64_t)P;
    int32_t k32[MAXN];
    int64_t k64[MAXN];
    radix_page_run ra[MAXN], rb[MAXN];
    for (int op = 0; op < NOPS; op++) {
        int32_t n = (int32_t)rnd(MAXN) + 1;
        uint64_t ns = rnd(4) == 0 ? 7 : 0;
        /* few distinct ids, so keys share prefixes and split nodes */
        for (int32_t i = 0; i < n; i++) {
            k32[i] = (int32_t)(rnd(3) == 0 ? rnd(1u << 31) : rnd(4));
            k64[i] = k32[i];
        }
        int32_t bad = -1;
        if (rnd(6) == 0) {
            bad = (int32_t)rnd((uint32_t)n);
            static const int64_t wrong[] = {-1, INT64_MIN, (int64_t)INT32_MAX + 1, INT64_MAX};
            k64[bad] = wrong[rnd(4)];
        }
        if (page_pool_num_free(&a.pool) < MAXN) /* room for the next insert */
            ck_assert_int_eq(radix_tree_evict(a.t, 8 * MAXN), radix_tree_evict(b.t, 8 * MAXN));
        uint32_t what = rnd(10);
        if (what < 4) { /* match */
            int32_t la, lb, na, nb, ea, eb;
            ck_assert_int_eq(radix_tree_match_runs(a.t, k32, bad >= 0 ? bad : n, ns, ra, &na,
                                                   &la, &ea), RKV_OK);
            ck_assert_int_eq(radix_tree_match_runs64(b.t, k64, n, ns, rb, &nb, &lb, &eb), RKV_OK);
            ck_assert_msg(la == lb && ea == eb, "op %d: match %d/%d against %d/%d", op, la, ea,
                          lb, eb);
            same_runs(ra, na, rb, nb, op);
        } else if (what < 9) { /* insert */
            int32_t pa, pb, na, nb, ea, eb, bb;
            rkv_status sb = radix_tree_insert_take64(b.t, k64, n, ns, &pb, rb, &nb, &eb, &bb);
            /* The refusal needs a bad id past the aligned cached part;
             * one in the tail past the last whole page is not read. */
            if (bad >= 0 && bad < n - n % P) {
                ck_assert_msg(sb == RKV_EINVAL && bb == bad, "op %d: bad id %d: %d, %d", op, bad,
                              sb, bb);
                int32_t la, ea2;
                ck_assert_int_eq(radix_tree_match_runs(a.t, k32, bad, ns, ra, &na, &la, &ea2),
                                 RKV_OK);
            } else {
                ck_assert_int_eq(sb, RKV_OK);
                ck_assert_int_eq(bb, -1);
                ck_assert_int_eq(radix_tree_insert_take(a.t, k32, n, ns, &pa, ra, &na, &ea),
                                 RKV_OK);
                ck_assert_msg(pa == pb && ea == eb, "op %d: insert %d/%d against %d/%d", op, pa,
                              ea, pb, eb);
                same_runs(ra, na, rb, nb, op); /* the whole path's, taken pages too */
            }
        } else { /* evict */
            int64_t want = (int64_t)rnd(64);
            ck_assert_int_eq(radix_tree_evict(a.t, want), radix_tree_evict(b.t, want));
        }
        same_state(&a, &b, op);
    }
    side_close(&a);
    side_close(&b);
}

START_TEST(int64_entries_match_int32_p1) { run_ops(1); }
END_TEST

START_TEST(int64_entries_match_int32_p4) { run_ops(4); }
END_TEST

int main(void)
{
    Suite *s = suite_create("radix_int64");
    TCase *tc = tcase_create("lockstep");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, int64_entries_match_int32_p1);
    tcase_add_test(tc, int64_entries_match_int32_p4);
    suite_add_tcase(s, tc);
    return check_run(s);
}
