/* test_engine_cancel.c - the engine functions a server needs: engine_cancel
 * (waiting, running, not yet arrived, finished), engine_forget (also while a
 * step in flight names the request) and engine_check_request. After every
 * cancel the page accounting holds, and the requests left finish with the
 * outputs they would have had without the cancelled ones (greedy, sim). */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "check_run.h"
#include "engine.h"

static engine *make(const char *schedule, int32_t num_pages, int32_t max_running)
{
    engine_config c;
    engine_config_default(&c);
    c.backend = "sim";
    c.backend_cfg.page_size = 4;
    c.backend_cfg.num_pages = num_pages;
    c.schedule = schedule;
    c.max_running = max_running;
    c.fixed_clock = true;
    c.offline = true;
    engine *e = NULL;
    char err[256] = "";
    ck_assert_msg(engine_create(&c, &e, err, sizeof err) == RKV_OK, "%s", err);
    return e;
}

static int64_t add(engine *e, int32_t seed, int32_t n, int32_t max_tokens)
{
    int32_t tok[64];
    for (int32_t i = 0; i < n; i++) tok[i] = (seed * 131 + i * 17) % 1000 + 1;
    engine_request r = {.tokens = tok, .n_tokens = n, .max_tokens = max_tokens, .stop_token = -1,
                        .sampling = {.temperature = 0, .top_p = 1}};
    int64_t id;
    char err[256];
    ck_assert_msg(engine_add(e, &r, &id, err, sizeof err) == RKV_OK, "%s", err);
    return id;
}

static void check_ok(engine *e)
{
    char err[256];
    ck_assert_msg(engine_check(e, err, sizeof err) == RKV_OK, "%s", err);
}

static void run_sched(const char *schedule)
{
    /* Reference: request 0 alone. */
    engine *ref = make(schedule, 64, 2);
    add(ref, 1, 20, 12);
    char err[256];
    ck_assert_msg(engine_run(ref, err, sizeof err) == RKV_OK, "%s", err);
    engine_result want;
    engine_result_get(ref, 0, &want);

    /* max_running 2: 0 and 1 run, 2 waits. */
    engine *e = make(schedule, 64, 2);
    int64_t a = add(e, 1, 20, 12), b = add(e, 2, 30, 40), w = add(e, 3, 10, 5);
    bool done = false;
    for (int k = 0; k < 4; k++) ck_assert(engine_step(e, &done, err, sizeof err) == RKV_OK);
    engine_stats st;
    engine_get_stats(e, &st);
    ck_assert_int_eq(st.num_running, 2);
    ck_assert_int_eq(st.num_waiting, 1);
    ck_assert(engine_cancel(e, w, err, sizeof err) == RKV_OK);
    ck_assert(engine_cancel(e, b, err, sizeof err) == RKV_OK);
    check_ok(e);
    engine_result r;
    engine_result_get(e, b, &r);
    ck_assert(r.finished && r.error && !strcmp(r.error, "cancelled"));
    ck_assert_int_lt(r.num_output, 40);
    engine_result_get(e, w, &r);
    ck_assert(r.finished && r.num_output == 0);
    /* Cancelling twice, or a finished request, changes nothing. */
    ck_assert(engine_cancel(e, b, err, sizeof err) == RKV_OK);
    engine_forget(e, b);
    /* sync: freed at once; overlap: the step in flight names it, freed after. */
    if (!strcmp(schedule, "sync")) ck_assert(engine_result_get(e, b, &r) != RKV_OK);
    ck_assert(engine_cancel(e, b, err, sizeof err) == RKV_OK);
    ck_assert_msg(engine_run(e, err, sizeof err) == RKV_OK, "%s", err);
    ck_assert(engine_result_get(e, b, &r) != RKV_OK);
    engine_result_get(e, a, &r);
    ck_assert(r.finished && !r.error);
    ck_assert_int_eq(r.num_output, want.num_output);
    ck_assert(!memcmp(r.output_ids, want.output_ids, sizeof(int32_t) * (size_t)r.num_output));
    /* The cancelled request's computed full pages stay cached: 30 prompt
     * tokens were prefilled, so its first 28 (7 pages) are found again. */
    int64_t again = add(e, 2, 30, 2);
    ck_assert_msg(engine_run(e, err, sizeof err) == RKV_OK, "%s", err);
    engine_result_get(e, again, &r);
    ck_assert_int_eq(r.cached_tokens, 28);
    for (int64_t id = 0; id <= again; id++) engine_forget(e, id);
    check_ok(e);
    engine_destroy(e);
    engine_destroy(ref);
}

START_TEST(test_cancel_sync) { run_sched("sync"); }
END_TEST

START_TEST(test_cancel_overlap) { run_sched("overlap"); }
END_TEST

START_TEST(test_cancel_future)
{
    engine_config c;
    engine_config_default(&c);
    c.backend = "sim";
    c.backend_cfg.page_size = 4;
    c.backend_cfg.num_pages = 64;
    c.fixed_clock = true;
    engine *e = NULL;
    char err[256];
    ck_assert(engine_create(&c, &e, err, sizeof err) == RKV_OK);
    int32_t tok[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    engine_request r = {.tokens = tok, .n_tokens = 8, .max_tokens = 3, .stop_token = -1,
                        .sampling = {.temperature = 0, .top_p = 1}, .arrival = 100};
    int64_t id, id2;
    ck_assert(engine_add(e, &r, &id, err, sizeof err) == RKV_OK);
    r.arrival = 200;
    ck_assert(engine_add(e, &r, &id2, err, sizeof err) == RKV_OK);
    ck_assert(engine_cancel(e, id, err, sizeof err) == RKV_OK);
    ck_assert_msg(engine_run(e, err, sizeof err) == RKV_OK, "%s", err);
    engine_result res;
    engine_result_get(e, id, &res);
    ck_assert(res.error && !strcmp(res.error, "cancelled"));
    engine_result_get(e, id2, &res);
    ck_assert(!res.error && res.num_output == 3);
    check_ok(e);
    engine_destroy(e);
}
END_TEST

START_TEST(test_check_request)
{
    engine *e = make("sync", 8, 4);
    int32_t tok[40] = {0};
    char err[256];
    engine_request r = {.tokens = tok, .n_tokens = 20, .max_tokens = 5, .stop_token = -1,
                        .sampling = {.temperature = 0, .top_p = 1}};
    ck_assert(engine_check_request(e, &r, err, sizeof err) == RKV_OK);
    r.max_tokens = 20; /* 39 tokens of K/V: 10 pages > 8 */
    ck_assert(engine_check_request(e, &r, err, sizeof err) == RKV_ENOSPC);
    ck_assert_msg(strstr(err, "the pool has 8"), "%s", err);
    r.max_tokens = 1;
    tok[3] = 1 << 30;
    ck_assert(engine_check_request(e, &r, err, sizeof err) == RKV_ERANGE);
    engine_stats st;
    engine_get_stats(e, &st);
    ck_assert_int_eq(st.num_requests, 0); /* nothing added */
    engine_destroy(e);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("engine_cancel");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_cancel_sync);
    tcase_add_test(tc, test_cancel_overlap);
    tcase_add_test(tc, test_cancel_future);
    tcase_add_test(tc, test_check_request);
    suite_add_tcase(s, tc);
    return check_run(s);
}
