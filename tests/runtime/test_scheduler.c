/* test_scheduler.c - policies on crafted queues; seeded random runs under a
 * small pool checking the token budget, the running cap and the page
 * accounting after every step, with every request completing. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_run.h"
#include "cache.h"
#include "page_pool.h"
#include "scheduler.h"
#include "rkv_core.h"

typedef struct fixture {
    page_pool pool;
    cache *c;
    scheduler s;
    sched_req *reqs[64];
    int n;
} fixture;

static void fx_init(fixture *f, const char *kind, int32_t pages, int32_t P, sched_policy pol,
                    int32_t budget, int32_t max_running, int32_t queue_limit, uint64_t seed)
{
    memset(f, 0, sizeof *f);
    ck_assert_int_eq(page_pool_init(&f->pool, pages, P), RKV_OK);
    cache_config cc = {.kind = kind};
    char err[256];
    ck_assert_int_eq(cache_create(&cc, &f->pool, &f->c, err, sizeof err), RKV_OK);
    scheduler_config sc = {.policy = pol, .max_num_batched_tokens = budget,
                           .max_running = max_running, .lpm_queue_limit = queue_limit,
                           .seed = seed, .insert_unfinished = strcmp(kind, "none") != 0,
                           .dedup_tokens = strcmp(kind, "none") ? 8 : 0};
    ck_assert_int_eq(scheduler_init(&f->s, &sc, f->c, &f->pool), RKV_OK);
}

static sched_req *fx_req(fixture *f, const int32_t *tokens, int32_t n, int32_t max_tokens)
{
    sched_req *r = calloc(1, sizeof *r);
    r->id = f->n;
    r->tokens = malloc(sizeof(int32_t) * (size_t)(n + max_tokens + 1));
    r->cap = n + max_tokens + 1;
    memcpy(r->tokens, tokens, sizeof(int32_t) * (size_t)n);
    r->n_tokens = r->prompt_len = n;
    r->max_tokens = max_tokens;
    r->stop_token = -1;
    r->out_ids = malloc(sizeof(int32_t) * (size_t)max_tokens);
    cache_seq_init(&r->match, 0, 0);
    f->reqs[f->n++] = r;
    ck_assert_int_eq(scheduler_add(&f->s, r), RKV_OK);
    return r;
}

static void fx_free(fixture *f)
{
    scheduler_destroy(&f->s);
    for (int i = 0; i < f->n; i++) {
        sched_req_free(f->reqs[i]);
        free(f->reqs[i]);
    }
    cache_destroy(f->c);
    page_pool_destroy(&f->pool);
}

/* Put tokens into the cache directly, as a finished request would. */
static void fx_cache(fixture *f, const int32_t *tokens, int32_t n)
{
    int32_t np = n / f->pool.page_size, pages[64], prefix = 0;
    ck_assert_int_eq(page_pool_alloc(&f->pool, np, pages), RKV_OK);
    ck_assert_int_eq(cache_insert(f->c, &(cache_seq){0}, tokens, np * f->pool.page_size, pages,
                                  &prefix), RKV_OK);
    ck_assert_int_eq(prefix, 0);
}

static void seq(int32_t *t, int32_t n, int32_t start)
{
    for (int32_t i = 0; i < n; i++) t[i] = start + i;
}

static void assert_order(fixture *f, const int32_t *want)
{
    int32_t got[64];
    ck_assert_int_eq(scheduler_policy_order(&f->s, got), RKV_OK);
    for (int32_t i = 0; i < f->s.num_waiting; i++)
        ck_assert_msg(got[i] == want[i], "position %d: got request %d, want %d", i, got[i], want[i]);
}

/* Three waiting requests: no cached prefix, 16 cached tokens, 8 cached. */
static void lpm_queue(fixture *f)
{
    int32_t a[16], b[8], t[24];
    seq(a, 16, 1);
    seq(b, 8, 100);
    fx_cache(f, a, 16);
    fx_cache(f, b, 8);
    seq(t, 20, 200);
    fx_req(f, t, 20, 4);
    seq(t, 16, 1);
    seq(t + 16, 3, 50);
    fx_req(f, t, 19, 4);
    seq(t, 8, 100);
    seq(t + 8, 4, 60);
    fx_req(f, t, 12, 4);
}

START_TEST(test_policy_fcfs_and_lpm)
{
    fixture f;
    fx_init(&f, "radix", 64, 4, SCHED_FCFS, 256, 8, 128, 1);
    lpm_queue(&f);
    assert_order(&f, (int32_t[]){0, 1, 2});
    f.s.cfg.policy = SCHED_LPM;
    assert_order(&f, (int32_t[]){1, 2, 0});
    /* Past the queue limit lpm is fcfs (matching every request costs too much). */
    f.s.cfg.lpm_queue_limit = 2;
    assert_order(&f, (int32_t[]){0, 1, 2});
    fx_free(&f);
}
END_TEST

START_TEST(test_policy_lpm_admits_longest_first)
{
    fixture f;
    /* A budget of 8 rows in lpm order: request 1 (16 cached, 3 rows), then
     * request 2 (8 cached, 4 rows), then request 0 gets the one row left. */
    fx_init(&f, "radix", 64, 4, SCHED_LPM, 8, 8, 128, 1);
    lpm_queue(&f);
    sched_plan plan = {0};
    char err[256];
    ck_assert_int_eq(scheduler_schedule(&f.s, &plan, true, err, sizeof err), RKV_OK);
    ck_assert_int_eq(plan.n, 3);
    ck_assert_ptr_eq(plan.e[2].r, f.reqs[0]);
    ck_assert_int_eq(plan.e[2].rows, 1);
    ck_assert_ptr_eq(plan.e[0].r, f.reqs[1]);
    ck_assert_int_eq(plan.e[0].start, 16);
    ck_assert_int_eq(plan.e[0].rows, 3);
    ck_assert(plan.e[0].sample);
    ck_assert_ptr_eq(plan.e[1].r, f.reqs[2]);
    ck_assert_int_eq(plan.e[1].start, 8);
    ck_assert_int_eq(plan.num_tokens, 8);
    ck_assert_int_eq(f.reqs[1]->cached_tokens, 16);
    ck_assert_int_eq(scheduler_check(&f.s, err, sizeof err), RKV_OK);
    sched_plan_free(&plan);
    fx_free(&f);
}
END_TEST

START_TEST(test_policy_dfs_weight)
{
    fixture f;
    fx_init(&f, "radix", 64, 4, SCHED_DFS_WEIGHT, 256, 8, 128, 1);
    fx_req(&f, (int32_t[]){1, 2, 3, 9}, 4, 1); /* A */
    fx_req(&f, (int32_t[]){5, 6}, 2, 1);       /* B */
    fx_req(&f, (int32_t[]){1, 2, 4, 9}, 4, 1); /* C */
    fx_req(&f, (int32_t[]){1, 2, 3, 8}, 4, 1); /* D */
    fx_req(&f, (int32_t[]){5, 7}, 2, 1);       /* E */
    /* Subtree 1 (A, C, D) weighs 3 > subtree 5 (B, E); inside it 1-2-3 (A, D)
     * weighs 2 > 1-2-4 (C); equal weights keep queue order. */
    assert_order(&f, (int32_t[]){0, 3, 2, 1, 4});
    fx_free(&f);

    fx_init(&f, "radix", 64, 4, SCHED_DFS_WEIGHT, 256, 8, 128, 1);
    fx_req(&f, (int32_t[]){9, 1}, 2, 1);
    fx_req(&f, (int32_t[]){7, 1}, 2, 1);
    fx_req(&f, (int32_t[]){7, 2}, 2, 1);
    fx_req(&f, (int32_t[]){7}, 1, 1);
    /* The heavier subtree 7 comes first even though it starts later; the
     * request ending at node 7 precedes its children. */
    assert_order(&f, (int32_t[]){3, 1, 2, 0});
    fx_free(&f);
}
END_TEST

START_TEST(test_policy_random_seeded)
{
    int32_t first[16], again[16];
    bool differs = false;
    for (uint64_t seed = 1; seed <= 4; seed++) {
        fixture f;
        fx_init(&f, "radix", 64, 4, SCHED_RANDOM, 256, 8, 128, seed);
        for (int32_t i = 0; i < 16; i++) fx_req(&f, (int32_t[]){i}, 1, 1);
        ck_assert_int_eq(scheduler_policy_order(&f.s, first), RKV_OK);
        fx_free(&f);
        fx_init(&f, "radix", 64, 4, SCHED_RANDOM, 256, 8, 128, seed);
        for (int32_t i = 0; i < 16; i++) fx_req(&f, (int32_t[]){i}, 1, 1);
        ck_assert_int_eq(scheduler_policy_order(&f.s, again), RKV_OK);
        fx_free(&f);
        bool seen[16] = {false};
        for (int32_t i = 0; i < 16; i++) {
            ck_assert_int_eq(first[i], again[i]);
            ck_assert(!seen[first[i]]);
            seen[first[i]] = true;
            differs |= first[i] != i;
        }
    }
    ck_assert_msg(differs, "four seeds all kept queue order");
}
END_TEST

/* Requests with shared prefixes under a pool far too small for all of them:
 * every step stays under the budget and the running cap, the accounting holds
 * after every step, preemption happens, and every request finishes with all
 * its outputs. Both planning modes (allow_preempt false is overlap's). */
static void random_run(const char *kind, sched_policy pol, uint64_t seed, bool overlap_like)
{
    uint64_t x = seed;
    fixture f;
    const int32_t P = 4, budget = 24, max_running = 6, pages = 40;
    fx_init(&f, kind, pages, P, pol, budget, max_running, 128, seed);
    int32_t base[3][40];
    for (int b = 0; b < 3; b++)
        for (int i = 0; i < 40; i++) base[b][i] = (int32_t)(rkv_splitmix64_next(&x) % 1000);
    int nreq = 24;
    for (int i = 0; i < nreq; i++) {
        int32_t t[64];
        int32_t n = 8 + (int32_t)(rkv_splitmix64_next(&x) % 50);
        int b = (int)(rkv_splitmix64_next(&x) % 3);
        int32_t shared = (int32_t)(rkv_splitmix64_next(&x) % 40);
        if (shared > n) shared = n;
        memcpy(t, base[b], sizeof(int32_t) * (size_t)shared);
        for (int32_t j = shared; j < n; j++) t[j] = (int32_t)(rkv_splitmix64_next(&x) % 1000);
        /* prompt + outputs - 1 <= 40 pages * 4 tokens: every one fits alone */
        fx_req(&f, t, n, 1 + (int32_t)(rkv_splitmix64_next(&x) % 40));
    }
    sched_plan plan = {0};
    int32_t tokens[64];
    char err[256] = "";
    int steps = 0;
    while (!scheduler_idle(&f.s)) {
        ck_assert_msg(++steps < 5000, "seed %llu: no progress", (unsigned long long)seed);
        bool allow = !overlap_like || steps % 2 == 0;
        ck_assert_int_eq(scheduler_schedule(&f.s, &plan, allow, err, sizeof err), RKV_OK);
        ck_assert_msg(plan.num_tokens <= budget, "seed %llu: %d rows over budget %d",
                      (unsigned long long)seed, plan.num_tokens, budget);
        ck_assert_int_le(f.s.num_running, max_running);
        int32_t rows = 0;
        for (int32_t i = 0; i < plan.n; i++) {
            rows += plan.e[i].rows;
            ck_assert_int_ge(plan.e[i].rows, 1);
            /* pages cover every row */
            ck_assert_int_ge(plan.e[i].r->num_pages * P, plan.e[i].start + plan.e[i].rows);
            tokens[i] = (int32_t)(rkv_splitmix64_next(&x) % 1000);
        }
        ck_assert_int_eq(rows, plan.num_tokens);
        ck_assert_int_eq(scheduler_commit(&f.s, &plan, tokens, err, sizeof err), RKV_OK);
        ck_assert_msg(scheduler_check(&f.s, err, sizeof err) == RKV_OK, "seed %llu: %s",
                      (unsigned long long)seed, err);
    }
    ck_assert_int_eq(f.s.num_finished, nreq);
    for (int i = 0; i < nreq; i++) {
        ck_assert_ptr_null(f.reqs[i]->error);
        ck_assert_int_eq(f.reqs[i]->num_out, f.reqs[i]->max_tokens);
    }
    ck_assert_msg(f.s.num_preemptions > 0, "seed %llu: the small pool never preempted",
                  (unsigned long long)seed);
    sched_plan_free(&plan);
    fx_free(&f);
}

START_TEST(test_random_small_pool)
{
    const char *kinds[] = {"radix", "hash", "trie", "none"};
    sched_policy pols[] = {SCHED_FCFS, SCHED_LPM, SCHED_DFS_WEIGHT, SCHED_RANDOM};
    for (int k = 0; k < 4; k++)
        for (int p = 0; p < 4; p++)
            for (uint64_t seed = 1; seed <= 3; seed++)
                random_run(kinds[k], pols[p], seed * 7919 + (uint64_t)(k * 4 + p), seed == 2);
}
END_TEST

START_TEST(test_chunked_prefill_and_decode_mix)
{
    fixture f;
    fx_init(&f, "radix", 64, 4, SCHED_FCFS, 10, 4, 128, 1);
    int32_t t[40];
    seq(t, 4, 1);
    fx_req(&f, t, 4, 8);          /* short: decodes after step 1 */
    seq(t, 30, 300);
    fx_req(&f, t, 30, 2);         /* long: chunked */
    sched_plan plan = {0};
    char err[256];
    int32_t tok[8] = {0};
    ck_assert_int_eq(scheduler_schedule(&f.s, &plan, true, err, sizeof err), RKV_OK);
    /* step 1: request 0 prefills 4 rows and samples; request 1 gets 6 rows */
    ck_assert_int_eq(plan.n, 2);
    ck_assert_int_eq(plan.e[0].rows, 4);
    ck_assert(plan.e[0].sample);
    ck_assert_int_eq(plan.e[1].rows, 6);
    ck_assert(!plan.e[1].sample);
    ck_assert_int_eq(scheduler_commit(&f.s, &plan, tok, err, sizeof err), RKV_OK);
    /* step 2: the decode of request 0 and 9 more rows of request 1 */
    ck_assert_int_eq(scheduler_schedule(&f.s, &plan, true, err, sizeof err), RKV_OK);
    ck_assert_int_eq(plan.n, 2);
    ck_assert_int_eq(plan.e[0].rows, 1);
    ck_assert_int_eq(plan.e[1].start, 6);
    ck_assert_int_eq(plan.e[1].rows, 9);
    ck_assert_int_eq(plan.num_tokens, 10);
    ck_assert_int_eq(scheduler_commit(&f.s, &plan, tok, err, sizeof err), RKV_OK);
    /* The prefilled full pages are in the cache already, locked: one page of
     * request 0, three of request 1. */
    cache_sizes cs;
    cache_get_sizes(f.c, &cs);
    ck_assert_int_eq(cs.protected_tokens, 16);
    ck_assert_int_eq(f.reqs[0]->num_cache_pages, 1);
    ck_assert_int_eq(f.reqs[1]->num_cache_pages, 3);
    ck_assert_int_eq(scheduler_check(&f.s, err, sizeof err), RKV_OK);
    sched_plan_free(&plan);
    fx_free(&f);
}
END_TEST

START_TEST(test_in_batch_dedup)
{
    fixture f;
    fx_init(&f, "radix", 64, 4, SCHED_FCFS, 256, 8, 128, 1);
    f.s.cfg.dedup_tokens = 8;
    int32_t t[40];
    seq(t, 40, 500);
    fx_req(&f, t, 40, 3);
    fx_req(&f, t, 40, 3);       /* the same prompt: waits a step */
    seq(t, 40, 900);
    fx_req(&f, t, 40, 3);       /* unrelated: admitted at once */
    sched_plan plan = {0};
    char err[256];
    int32_t tok[8] = {1, 2, 3};
    ck_assert_int_eq(scheduler_schedule(&f.s, &plan, true, err, sizeof err), RKV_OK);
    ck_assert_int_eq(plan.n, 2);
    ck_assert_ptr_eq(plan.e[0].r, f.reqs[0]);
    ck_assert_ptr_eq(plan.e[1].r, f.reqs[2]);
    ck_assert_int_eq(f.s.num_waiting, 1);
    ck_assert(!f.reqs[1]->locked);
    ck_assert_int_eq(scheduler_commit(&f.s, &plan, tok, err, sizeof err), RKV_OK);
    ck_assert_int_eq(scheduler_schedule(&f.s, &plan, true, err, sizeof err), RKV_OK);
    ck_assert_int_eq(plan.n, 3);
    ck_assert_ptr_eq(plan.e[2].r, f.reqs[1]);
    ck_assert_int_eq(f.reqs[1]->cached_tokens, 36);
    ck_assert_int_eq(plan.e[2].rows, 4);
    ck_assert_int_eq(scheduler_check(&f.s, err, sizeof err), RKV_OK);
    sched_plan_free(&plan);
    fx_free(&f);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("scheduler");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_policy_fcfs_and_lpm);
    tcase_add_test(tc, test_policy_lpm_admits_longest_first);
    tcase_add_test(tc, test_policy_dfs_weight);
    tcase_add_test(tc, test_policy_random_seeded);
    tcase_add_test(tc, test_chunked_prefill_and_decode_mix);
    tcase_add_test(tc, test_in_batch_dedup);
    tcase_add_test(tc, test_random_small_pool);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return check_run(suite());
}
