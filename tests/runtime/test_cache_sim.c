/* test_cache_sim.c - the cache simulator's step semantics (docs/ARCHITECTURE.md, "Cache
 * simulator contract") on small traces whose output is worked out by hand in
 * the comments, through the real radix kind. */
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check_run.h"
#include "cache.h"
#include "cache_kinds.h"
#include "cache_sim.h"
#include "evict_policy.h"
#include "trace.h"

typedef struct sim_out {
    json_t *lines[64];
    int n;
    cache_sim_summary sum;
    rkv_status st;
    char err[512];
    int32_t free_pages, num_pages;
} sim_out;

/* Replays trace text through a fresh cache; keeps every output line parsed. */
static void run_sim(const char *kind, const char *policy, int64_t capacity, int32_t P,
                    const char *text, sim_out *o)
{
    memset(o, 0, sizeof *o);
    char path[] = "/tmp/rkv_sim_XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);

    page_pool pool;
    ck_assert_int_eq(page_pool_init(&pool, (int32_t)(capacity / P), P), RKV_OK);
    cache_config cfg = {kind, policy, NULL, NULL};
    cache *c;
    char err[256];
    ck_assert_int_eq(cache_create(&cfg, &pool, &c, err, sizeof err), RKV_OK);
    trace_reader *tr;
    ck_assert_int_eq(trace_open(path, NULL, &tr, err, sizeof err), RKV_OK);
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    cache_sim_options opt = {.kind = kind, .policy = policy, .capacity = capacity, .check = true};
    o->st = cache_sim_run(c, &opt, tr, out, &o->sum, o->err, sizeof o->err);
    if (o->st == RKV_OK) cache_sim_print_summary(out, &opt, c, &o->sum);
    fclose(out);
    o->free_pages = pool.num_free;
    o->num_pages = pool.num_pages;
    char *save = NULL;
    for (char *l = strtok_r(buf, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        json_error_t je;
        json_t *j = json_loads(l, 0, &je);
        ck_assert_msg(j != NULL, "output line is not JSON: %s", l);
        ck_assert_int_lt(o->n, 64);
        o->lines[o->n++] = j;
    }
    free(buf);
    trace_close(tr);
    cache_destroy(c);
    page_pool_destroy(&pool);
    unlink(path);
}

static void free_out(sim_out *o)
{
    for (int i = 0; i < o->n; i++) json_decref(o->lines[i]);
}

static const char *type_of(const json_t *j) { return json_string_value(json_object_get(j, "type")); }
static long long geti(const json_t *j, const char *k) { return json_integer_value(json_object_get(j, k)); }

static void expect_request(const json_t *j, long long id, long long step, long long matched,
                           long long nw)
{
    ck_assert_str_eq(type_of(j), "request");
    ck_assert_int_eq(geti(j, "id"), id);
    ck_assert_int_eq(geti(j, "step"), step);
    ck_assert_msg(json_object_get(j, "error") == NULL, "request %lld: unexpected error", id);
    ck_assert_int_eq(geti(j, "matched"), matched);
    ck_assert_int_eq(geti(j, "new"), nw);
}

static void expect_error(const json_t *j, long long id, const char *what)
{
    ck_assert_str_eq(type_of(j), "request");
    ck_assert_int_eq(geti(j, "id"), id);
    const char *e = json_string_value(json_object_get(j, "error"));
    ck_assert_ptr_nonnull(e);
    ck_assert_msg(strstr(e, what) != NULL, "error '%s' lacks '%s'", e, what);
    ck_assert_ptr_null(json_object_get(j, "matched"));
}

/* evicted must be exactly the given edges, each given as a -1-terminated list. */
static void expect_evicted(const json_t *j, long long step, int n_edges, const int *edges)
{
    ck_assert_str_eq(type_of(j), "step");
    ck_assert_int_eq(geti(j, "step"), step);
    json_t *ev = json_object_get(j, "evicted");
    ck_assert_int_eq((int)json_array_size(ev), n_edges);
    int k = 0;
    for (int e = 0; e < n_edges; e++) {
        json_t *edge = json_array_get(ev, (size_t)e);
        size_t i = 0;
        for (; edges[k] >= 0; k++, i++)
            ck_assert_int_eq(json_integer_value(json_array_get(edge, i)), edges[k]);
        ck_assert_int_eq((int)json_array_size(edge), (int)i);
        k++;
    }
}

/* P = 1, 10 pages:
 *   step 0  a [1 2 3 4]            matched 0, new 4          cache 4
 *   step 1  b [1 2 3 5 6]          match [1 2 3 5] -> 3      cache 6 (split [1 2 3]|[4])
 *   step 2  c [7 8 9 10 11]        new 5, free 4: evict(1) -> [4] (oldest leaf)
 *   step 3  big, 11 tokens         more than the 10 pages: error, nothing touched
 *   step 4  d [1 2 3 5 6 20]       matched 5, new 1 (locks [1 2 3], [5 6])
 *           e [30 .. 38]           new 9; need 10, free 0: evict(10) frees only
 *                                  [7..11] (5); d gets its page, e does not fit:
 *                                  error, unlocked, not inserted
 *   step 5  e again                new 9, free 4: evict(5) -> [20], then [5 6]
 *                                  and [1 2 3] as they become leaves (6 tokens) */
static const char trace_p1[] =
    "{\"id\": 0, \"step\": 0, \"tokens\": [1, 2, 3, 4]}\n"
    "{\"id\": 1, \"step\": 1, \"tokens\": [1, 2, 3, 5, 6]}\n"
    "{\"id\": 2, \"step\": 2, \"tokens\": [7, 8, 9, 10, 11]}\n"
    "{\"id\": 3, \"step\": 3, \"tokens\": [40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50]}\n"
    "{\"id\": 4, \"step\": 4, \"tokens\": [1, 2, 3, 5, 6, 20]}\n"
    "{\"id\": 5, \"step\": 4, \"tokens\": [30, 31, 32, 33, 34, 35, 36, 37, 38]}\n"
    "{\"id\": 6, \"step\": 5, \"tokens\": [30, 31, 32, 33, 34, 35, 36, 37, 38]}\n";

START_TEST(test_steps_page1)
{
    sim_out o;
    run_sim("radix", "lru", 10, 1, trace_p1, &o);
    ck_assert_msg(o.st == RKV_OK, "%s", o.err);
    ck_assert_int_eq(o.n, 11);
    expect_request(o.lines[0], 0, 0, 0, 4);
    expect_request(o.lines[1], 1, 1, 3, 2);
    expect_request(o.lines[2], 2, 2, 0, 5);
    expect_evicted(o.lines[3], 2, 1, (const int[]){4, -1});
    expect_error(o.lines[4], 3, "more pages than the whole cache");
    expect_request(o.lines[5], 4, 4, 5, 1);
    expect_error(o.lines[6], 5, "locked pages leave no room");
    expect_evicted(o.lines[7], 4, 1, (const int[]){7, 8, 9, 10, 11, -1});
    expect_request(o.lines[8], 6, 5, 0, 9);
    expect_evicted(o.lines[9], 5, 3, (const int[]){20, -1, 5, 6, -1, 1, 2, 3, -1});
    json_t *s = o.lines[10];
    ck_assert_str_eq(type_of(s), "summary");
    ck_assert_int_eq(geti(s, "requests"), 7);
    ck_assert_int_eq(geti(s, "errors"), 2);
    ck_assert_int_eq(geti(s, "steps"), 6);
    ck_assert_int_eq(geti(s, "prompt_tokens"), 4 + 5 + 5 + 6 + 9);
    ck_assert_int_eq(geti(s, "matched_tokens"), 3 + 5);
    ck_assert_int_eq(geti(s, "evicted_tokens"), 1 + 5 + 6);
    ck_assert_int_eq(geti(s, "evict_calls"), 3);
    ck_assert(fabs(json_real_value(json_object_get(s, "hit_rate")) - 8.0 / 29.0) < 1e-6);
    ck_assert_int_eq(o.free_pages, 1);           /* e's 9 pages cached at the end */
    free_out(&o);
}
END_TEST

/* P = 2, 4 pages:
 *   step 0  [1 2 3 4 5]            3 pages; [1 2 3 4] cached, the partial page freed
 *   step 1  [1 2 3 4 5 6]          match 5 tokens -> 4 (whole pages); new 2, 1 page
 *   step 2  two equal requests [9 9 8 8]: both match 0 (nothing of the step is
 *           inserted before the matches), new 4 each: need 4 pages, free 1:
 *           evict(6) -> [5 6] then [1 2 3 4]; the second insert finds the first's
 *           pages and frees its own. */
static const char trace_p2[] =
    "{\"id\": \"a\", \"tokens\": [1, 2, 3, 4, 5]}\n"
    "{\"id\": \"b\", \"tokens\": [1, 2, 3, 4, 5, 6]}\n"
    "{\"id\": \"c\", \"step\": 9, \"tokens\": [9, 9, 8, 8]}\n"
    "{\"id\": \"d\", \"step\": 9, \"tokens\": [9, 9, 8, 8]}\n";

START_TEST(test_steps_page2)
{
    sim_out o;
    run_sim("radix", "lru", 9, 2, trace_p2, &o);  /* floor(9 / 2) = 4 pages */
    ck_assert_msg(o.st == RKV_OK, "%s", o.err);
    ck_assert_int_eq(o.num_pages, 4);
    ck_assert_int_eq(o.n, 6);
    ck_assert_str_eq(json_string_value(json_object_get(o.lines[0], "id")), "a");
    ck_assert_int_eq(geti(o.lines[0], "step"), 0);  /* no step: its position */
    ck_assert_int_eq(geti(o.lines[0], "new"), 5);
    ck_assert_int_eq(geti(o.lines[1], "step"), 1);
    ck_assert_int_eq(geti(o.lines[1], "matched"), 4);
    ck_assert_int_eq(geti(o.lines[1], "new"), 2);
    ck_assert_int_eq(geti(o.lines[2], "matched"), 0);
    ck_assert_int_eq(geti(o.lines[2], "new"), 4);
    ck_assert_int_eq(geti(o.lines[3], "matched"), 0);
    ck_assert_int_eq(geti(o.lines[3], "new"), 4);
    expect_evicted(o.lines[4], 9, 2, (const int[]){5, 6, -1, 1, 2, 3, 4, -1});
    ck_assert_int_eq(geti(o.lines[5], "evicted_tokens"), 6);
    ck_assert_int_eq(o.free_pages, 2);           /* one copy of [9 9 8 8] kept */
    free_out(&o);
}
END_TEST

/* Kinds without an eviction log list the evicted blocks from the pages they
 * return. Hash (vLLM's free queue): a finished request's blocks go to the tail,
 * its last block first, and a hit takes a block out of the queue.
 *   after step 0: queue 4 3 2 1
 *   step 1 hits 1 2 3; then 6 5 3 2 1 join:         4 6 5 3 2 1
 *   step 2 evict(1):  [4];  then 11 10 9 8 7 join:  6 5 3 2 1 11 10 9 8 7
 *   step 3 evict(7):  [6] [5] [3] [2] [1] [11] [10] */
START_TEST(test_hash_evicted_blocks)
{
    sim_out o;
    run_sim("hash", NULL, 10, 1,
            "{\"id\": 0, \"tokens\": [1, 2, 3, 4]}\n"
            "{\"id\": 1, \"tokens\": [1, 2, 3, 5, 6]}\n"
            "{\"id\": 2, \"tokens\": [7, 8, 9, 10, 11]}\n"
            "{\"id\": 3, \"tokens\": [20, 21, 22, 23, 24, 25, 26]}\n", &o);
    ck_assert_msg(o.st == RKV_OK, "%s", o.err);
    ck_assert_int_eq(o.n, 7);
    expect_request(o.lines[1], 1, 1, 3, 2);
    expect_evicted(o.lines[3], 2, 1, (const int[]){4, -1});
    expect_evicted(o.lines[5], 3, 7, (const int[]){6, -1, 5, -1, 3, -1, 2, -1, 1, -1, 11, -1, 10, -1});
    free_out(&o);
}
END_TEST

/* Kind none never matches and never keeps a page. */
START_TEST(test_kind_none)
{
    sim_out o;
    run_sim("none", NULL, 10, 1, trace_p1, &o);
    ck_assert_msg(o.st == RKV_OK, "%s", o.err);
    for (int i = 0; i < o.n; i++) {
        if (strcmp(type_of(o.lines[i]), "request") || json_object_get(o.lines[i], "error")) continue;
        ck_assert_int_eq(geti(o.lines[i], "matched"), 0);
    }
    ck_assert_int_eq(o.free_pages, 10);
    free_out(&o);
}
END_TEST

START_TEST(test_malformed_trace_stops)
{
    sim_out o;
    run_sim("radix", "lru", 10, 1,
            "{\"id\": 0, \"tokens\": [1, 2]}\n{\"id\": 1, \"tokens\": [1, -2]}\n", &o);
    ck_assert_int_eq(o.st, RKV_EPARSE);
    ck_assert_msg(strstr(o.err, ":2: token 1 is negative") != NULL, "%s", o.err);
    free_out(&o);
}
END_TEST

/* The trace's "priority" reaches the cache: X (priority 5) is the oldest, Y
 * (default 0) next; Z needs room, and the priority policy evicts Y where lru
 * evicts X, so X's tokens still match for request 3. Every kind that evicts in
 * an order (the registry says which). A priority that is not an integer stops
 * the replay naming the line and the field. */
START_TEST(test_priority_from_trace)
{
    static const char trace[] =
        "{\"id\": 0, \"tokens\": [1, 2, 3, 4], \"priority\": 5}\n"
        "{\"id\": 1, \"tokens\": [5, 6, 7, 8]}\n"
        "{\"id\": 2, \"tokens\": [9, 10, 11, 12], \"priority\": -3}\n"
        "{\"id\": 3, \"tokens\": [1, 2, 3, 4, 99]}\n";
    for (const cache_kind *k = cache_kinds; k->name; k++) {
        if (!(k->caps & CACHE_CAP_EVICTS)) continue;
        for (int p = 0; p < 2; p++) {
            sim_out o;
            run_sim(k->name, p ? "lru" : "priority", 8, 1, trace, &o);
            ck_assert_msg(o.st == RKV_OK, "%s: %s", k->name, o.err);
            long long m3 = -1;
            for (int i = 0; i < o.n; i++)
                if (!strcmp(type_of(o.lines[i]), "request") && geti(o.lines[i], "id") == 3)
                    m3 = geti(o.lines[i], "matched");
            ck_assert_msg(m3 == (p ? 0 : 4), "%s %s: request 3 matched %lld", k->name,
                          p ? "lru" : "priority", m3);
            free_out(&o);
        }
    }
    /* Regression: a line without "priority" is 0, not what an earlier line of
     * the reader said. A and B have 5; C and D none; D's room evicts C (0), so
     * B still matches for request 4. */
    sim_out o;
    run_sim("radix", "priority", 8, 1,
            "{\"id\": 0, \"tokens\": [1, 2, 3, 4], \"priority\": 5}\n"
            "{\"id\": 1, \"tokens\": [5, 6, 7, 8], \"priority\": 5}\n"
            "{\"id\": 2, \"tokens\": [9, 10, 11, 12]}\n"
            "{\"id\": 3, \"tokens\": [13, 14, 15, 16]}\n"
            "{\"id\": 4, \"tokens\": [5, 6, 7, 8, 99]}\n", &o);
    ck_assert_msg(o.st == RKV_OK, "%s", o.err);
    for (int i = 0; i < o.n; i++)
        if (!strcmp(type_of(o.lines[i]), "request") && geti(o.lines[i], "id") == 4)
            ck_assert_int_eq(geti(o.lines[i], "matched"), 4);
    free_out(&o);
    run_sim("radix", "priority", 8, 1,
            "{\"id\": 0, \"tokens\": [1, 2]}\n{\"id\": 1, \"tokens\": [3], \"priority\": \"high\"}\n", &o);
    ck_assert_int_eq(o.st, RKV_EPARSE);
    ck_assert_msg(strstr(o.err, ":2: \"priority\" must be an integer") != NULL, "%s", o.err);
    free_out(&o);
}
END_TEST

/* Regression (issue 21, defect 6): with two good lines and a bad third, the
 * second request was lost (a step is replayed only when the next line is read). */
START_TEST(test_regress_last_request_before_bad_line)
{
    sim_out o;
    run_sim("radix", "lru", 10, 1,
            "{\"id\": 0, \"tokens\": [1, 2]}\n{\"id\": 1, \"tokens\": [1, 3]}\n{\"id\": 2, \"tokens\": x}\n",
            &o);
    ck_assert_int_eq(o.st, RKV_EPARSE);
    ck_assert_msg(strstr(o.err, ":3: bad JSON") != NULL, "%s", o.err);
    ck_assert_int_eq(o.n, 2);
    ck_assert_int_eq(json_integer_value(json_object_get(o.lines[1], "id")), 1);
    ck_assert_int_eq(json_integer_value(json_object_get(o.lines[1], "matched")), 1);
    ck_assert_int_eq(o.free_pages + 3, o.num_pages); /* [1, 2] and the 3 after 1: all cached */
    free_out(&o);
}
END_TEST

/* A kind whose check fails without writing a message. */
static rkv_status silent_check(const cache *c, char *err, size_t errlen)
{
    (void)c;
    (void)err;
    (void)errlen;
    return RKV_ECORRUPT;
}

/* Regression (issue 21, defect 5): a check that failed without a message made
 * cache-sim print its uninitialised buffer ("after step 2: <garbage>"). */
START_TEST(test_regress_silent_check_message)
{
    char path[] = "/tmp/rkv_sim_XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    const char *text = "{\"id\": 0, \"tokens\": [1, 2]}\n";
    ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    page_pool pool;
    ck_assert_int_eq(page_pool_init(&pool, 8, 1), RKV_OK);
    cache_config cfg = {"radix", NULL, NULL, NULL};
    cache *c;
    char err[512];
    ck_assert_int_eq(cache_create(&cfg, &pool, &c, err, sizeof err), RKV_OK);
    cache_ops ops = *c->ops;
    ops.check = silent_check;
    const cache_ops *real = c->ops;
    c->ops = &ops;
    trace_reader *tr;
    ck_assert_int_eq(trace_open(path, NULL, &tr, err, sizeof err), RKV_OK);
    FILE *out = fopen("/dev/null", "w");
    cache_sim_options opt = {.kind = "radix", .capacity = 8, .check = true};
    cache_sim_summary sum;
    memset(err, 'Z', sizeof err); /* what an uninitialised buffer might hold */
    err[sizeof err - 1] = 0;
    ck_assert_int_eq(cache_sim_run(c, &opt, tr, out, &sum, err, sizeof err), RKV_ECORRUPT);
    ck_assert_str_eq(err, "after step 0: cache check failed: invariant violated");
    fclose(out);
    trace_close(tr);
    c->ops = real;
    cache_destroy(c);
    page_pool_destroy(&pool);
    unlink(path);
}
END_TEST

/* A seeded random trace with the full check after every step: nothing leaks,
 * and every request's matched + new adds up. */
START_TEST(test_random_invariants)
{
    unsigned seed = 4242u + (unsigned)_i;
    srand(seed);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    int lens[40];
    for (int r = 0; r < 40; r++) {
        fprintf(f, "{\"id\": %d, \"step\": %d, \"tokens\": [", r, r / 3);
        int n = 1 + rand() % 20, prefix = rand() % 4;
        lens[r] = n;
        for (int k = 0; k < n; k++) fprintf(f, k ? ", %d" : "%d", k < 4 ? prefix : rand() % 5);
        fputs("]}\n", f);
    }
    fclose(f);
    sim_out o;
    run_sim("radix", evict_policy_name_list[_i % evict_policy_count()], 24, 1 + _i % 3, text, &o);
    ck_assert_msg(o.st == RKV_OK, "seed %u: %s", seed, o.err);
    int32_t P = 1 + _i % 3;
    for (int i = 0; i < o.n; i++) {
        json_t *j = o.lines[i];
        if (strcmp(type_of(j), "request") || json_object_get(j, "error")) continue;
        long long id = geti(j, "id"), m = geti(j, "matched");
        ck_assert_msg(m % P == 0 && m < lens[id], "seed %u: request %lld matched %lld", seed, id, m);
        ck_assert_msg(m + geti(j, "new") == lens[id], "seed %u: request %lld", seed, id);
    }
    free(text);
    free_out(&o);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cache_sim");
    TCase *tc = tcase_create("cache_sim");
    tcase_add_test(tc, test_steps_page1);
    tcase_add_test(tc, test_steps_page2);
    tcase_add_test(tc, test_kind_none);
    tcase_add_test(tc, test_hash_evicted_blocks);
    tcase_add_test(tc, test_malformed_trace_stops);
    tcase_add_test(tc, test_regress_last_request_before_bad_line);
    tcase_add_test(tc, test_regress_silent_check_message);
    tcase_add_test(tc, test_priority_from_trace);
    /* every policy, each page size at least twice */
    tcase_add_loop_test(tc, test_random_invariants, 0, 3 * (evict_policy_count() > 2 ? evict_policy_count() : 2));
    suite_add_tcase(s, tc);
    return check_run(s);
}
