/* test_gen.c - synthetic workloads (shapes, seeds, errors), their JSON Lines
 * read back through the trace reader, bad traces reported with file, line and
 * reason, and the `run` / `gen` commands end to end on the sim backend. */
#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check_run.h"
#include "commands.h"
#include "engine.h"
#include "trace.h"
#include "workloads.h"

static char tmpdir[256];

static void setup(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/rkv_gen_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void teardown(void)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    ck_assert_int_eq(system(cmd), 0);
}

static const char *tmp_path(const char *name)
{
    static char path[2][512];
    static int k;
    k ^= 1;
    snprintf(path[k], sizeof path[k], "%s/%s", tmpdir, name);
    return path[k];
}

static workload_config cfg(const char *kind)
{
    workload_config c;
    workload_config_default(&c);
    c.kind = kind;
    c.num = 6;
    c.prompt_len = 20;
    c.output_len = 5;
    c.shared_len = 12;
    c.turns = 3;
    c.branching = 3;
    c.depth = 2;
    c.examples = 5;
    c.shots = 2;
    c.hit_rate = 0.6;
    return c;
}

static void generate(const workload_config *c, workload *w)
{
    char err[256];
    ck_assert_msg(workload_generate(c, w, err, sizeof err) == RKV_OK, "%s", err);
}

static bool has_prefix(const wl_request *a, const wl_request *p)
{
    return a->n_tokens >= p->n_tokens &&
           !memcmp(a->tokens, p->tokens, sizeof(int32_t) * (size_t)p->n_tokens);
}

static bool same_tokens(const workload *a, const workload *b)
{
    if (a->n != b->n) return false;
    for (int64_t i = 0; i < a->n; i++)
        if (a->reqs[i].n_tokens != b->reqs[i].n_tokens ||
            memcmp(a->reqs[i].tokens, b->reqs[i].tokens,
                   sizeof(int32_t) * (size_t)a->reqs[i].n_tokens))
            return false;
    return true;
}

START_TEST(test_every_kind_seeded)
{
    for (int k = 0; workload_kinds[k]; k++) {
        workload_config c = cfg(workload_kinds[k]);
        workload a, b, d;
        generate(&c, &a);
        generate(&c, &b);
        c.seed = 99;
        generate(&c, &d);
        ck_assert_msg(a.n > 0, "%s: empty", workload_kinds[k]);
        ck_assert_msg(same_tokens(&a, &b), "%s: same seed, different trace", workload_kinds[k]);
        ck_assert_msg(!same_tokens(&a, &d), "%s: another seed, same trace", workload_kinds[k]);
        for (int64_t i = 0; i < a.n; i++) {
            ck_assert_int_ge(a.reqs[i].max_tokens, 1);
            for (int32_t j = 0; j < a.reqs[i].n_tokens; j++)
                ck_assert(a.reqs[i].tokens[j] >= 0 && a.reqs[i].tokens[j] < c.vocab_size);
        }
        workload_free(&a);
        workload_free(&b);
        workload_free(&d);
    }
}
END_TEST

START_TEST(test_shapes)
{
    workload w;
    workload_config c = cfg("sweep");
    generate(&c, &w);
    ck_assert_int_eq(w.n, 6);
    int32_t h = 12; /* floor(0.6 * 20) */
    for (int64_t i = 1; i < w.n; i++) {
        ck_assert_int_eq(w.reqs[i].n_tokens, 20);
        ck_assert_int_eq(memcmp(w.reqs[i].tokens, w.reqs[0].tokens, sizeof(int32_t) * h), 0);
        ck_assert_int_ne(memcmp(w.reqs[i].tokens + h, w.reqs[0].tokens + h,
                                sizeof(int32_t) * (20 - h)), 0);
        ck_assert_int_eq(w.reqs[i].max_tokens, 5);
        ck_assert(w.reqs[i].arrival < 0);
    }
    workload_free(&w);

    /* multi-turn: turn-major; turn t+1 of a session extends its turn t by the
     * answer (O) and the next user message (L). */
    c = cfg("multi-turn");
    generate(&c, &w);
    ck_assert_int_eq(w.n, 6 * 3);
    for (int64_t i = 6; i < w.n; i++) {
        ck_assert(has_prefix(&w.reqs[i], &w.reqs[i - 6]));
        ck_assert_int_eq(w.reqs[i].n_tokens, w.reqs[i - 6].n_tokens + 5 + 20);
    }
    ck_assert_int_eq(memcmp(w.reqs[0].tokens, w.reqs[1].tokens, sizeof(int32_t) * 12), 0);
    workload_free(&w);

    /* tree-of-thought: N * (1 + 3 + 9) nodes, each child extends a request
     * before it by one thought of S tokens. */
    c = cfg("tree-of-thought");
    generate(&c, &w);
    ck_assert_int_eq(w.n, 6 * 13);
    for (int64_t i = 0; i < w.n; i++) {
        if (w.reqs[i].n_tokens == 20) continue; /* a root */
        bool parent = false;
        for (int64_t j = 0; j < i && !parent; j++)
            parent = w.reqs[j].n_tokens + 12 == w.reqs[i].n_tokens && has_prefix(&w.reqs[i], &w.reqs[j]);
        ck_assert_msg(parent, "node %lld has no parent before it", (long long)i);
    }
    workload_free(&w);

    /* self-consistency: B identical prompts, sampled, distinct seeds. */
    c = cfg("self-consistency");
    generate(&c, &w);
    ck_assert_int_eq(w.n, 6 * 3);
    for (int64_t i = 0; i < w.n; i += 3) {
        for (int k = 1; k < 3; k++) {
            ck_assert(has_prefix(&w.reqs[i + k], &w.reqs[i]) &&
                      w.reqs[i + k].n_tokens == w.reqs[i].n_tokens);
            ck_assert(w.reqs[i + k].seed != w.reqs[i].seed);
        }
        ck_assert(w.reqs[i].temperature > 0);
    }
    workload_free(&w);

    /* few-shot: groups of B share instruction and examples. */
    c = cfg("few-shot");
    generate(&c, &w);
    ck_assert_int_eq(w.n, 6);
    int32_t shared = 12 / 4 + 1 + 2 * 12;
    ck_assert_int_eq(w.reqs[0].n_tokens, shared + 20);
    ck_assert_int_eq(memcmp(w.reqs[0].tokens, w.reqs[2].tokens, sizeof(int32_t) * shared), 0);
    workload_free(&w);

    /* long-doc: N documents x B questions; judge: B branches + 1 merge. */
    c = cfg("long-doc");
    generate(&c, &w);
    ck_assert_int_eq(w.n, 18);
    ck_assert_int_eq(memcmp(w.reqs[0].tokens, w.reqs[2].tokens, sizeof(int32_t) * 12), 0);
    workload_free(&w);
    c = cfg("judge");
    generate(&c, &w);
    ck_assert_int_eq(w.n, 6 * 4);
    ck_assert_int_eq(w.reqs[3].n_tokens, 20 + 3 * 5 + 12 / 2 + 1);
    ck_assert_int_eq(memcmp(w.reqs[0].tokens, w.reqs[3].tokens, sizeof(int32_t) * 20), 0);
    workload_free(&w);
}
END_TEST

START_TEST(test_bad_configs)
{
    const char *fields[] = {"num", "hit_rate", "unknown kind", "shots"};
    char err[256];
    workload w;
    workload_config c = cfg("sweep");
    c.num = 0;
    ck_assert_int_eq(workload_generate(&c, &w, err, sizeof err), RKV_EINVAL);
    ck_assert_msg(strstr(err, fields[0]), "%s", err);
    c = cfg("sweep");
    c.hit_rate = 1.5;
    ck_assert_int_eq(workload_generate(&c, &w, err, sizeof err), RKV_EINVAL);
    ck_assert_msg(strstr(err, fields[1]), "%s", err);
    c = cfg("chat");
    ck_assert_int_eq(workload_generate(&c, &w, err, sizeof err), RKV_EINVAL);
    ck_assert_msg(strstr(err, fields[2]), "%s", err);
    c = cfg("few-shot");
    c.shots = 9;
    ck_assert_int_eq(workload_generate(&c, &w, err, sizeof err), RKV_EINVAL);
    ck_assert_msg(strstr(err, fields[3]), "%s", err);
}
END_TEST

START_TEST(test_jsonl_round_trip)
{
    workload w;
    workload_config c = cfg("self-consistency");
    c.rate = 5;
    generate(&c, &w);
    const char *path = tmp_path("w.jsonl");
    FILE *f = fopen(path, "w");
    ck_assert_int_eq(workload_write_jsonl(&w, f), RKV_OK);
    fclose(f);
    trace_reader *tr;
    char err[256];
    ck_assert_int_eq(trace_open(path, NULL, &tr, err, sizeof err), RKV_OK);
    trace_request q;
    trace_request_init(&q);
    double last = 0;
    for (int64_t i = 0;; i++) {
        bool eof;
        ck_assert_msg(trace_next(tr, &q, &eof, err, sizeof err) == RKV_OK, "%s", err);
        if (eof) {
            ck_assert_int_eq(i, w.n);
            break;
        }
        ck_assert_int_eq(q.n_tokens, w.reqs[i].n_tokens);
        ck_assert_int_eq(memcmp(q.tokens, w.reqs[i].tokens, sizeof(int32_t) * (size_t)q.n_tokens), 0);
        ck_assert_int_eq(q.max_tokens, w.reqs[i].max_tokens);
        ck_assert(q.arrival > last); /* Poisson arrivals increase */
        last = q.arrival;
        ck_assert(q.temperature > 0.69 && q.temperature < 0.71);
        ck_assert_int_eq(q.seed, w.reqs[i].seed);
    }
    trace_request_free(&q);
    trace_close(tr);
    workload_free(&w);
}
END_TEST

static engine *sim_engine(void)
{
    engine_config c;
    engine_config_default(&c);
    c.backend = "sim";
    c.backend_cfg.page_size = 4;
    c.backend_cfg.num_pages = 256;
    c.fixed_clock = true;
    engine *e;
    char err[256];
    ck_assert_int_eq(engine_create(&c, &e, err, sizeof err), RKV_OK);
    return e;
}

/* Each bad trace fails naming the file, the line and the reason, and adds
 * nothing from that line on. */
START_TEST(test_bad_traces)
{
    struct { const char *text; int line; const char *reason; } cases[] = {
        {"{\"id\": 1, \"tokens\": [1, 2]}\n{\"id\": 2, \"tokens\": [1, 4096]}\n", 2, "vocabulary"},
        {"{\"id\": 1, \"tokens\": [1, 2], \"max_tokens\": 0}\n", 1, "max_tokens"},
        {"{\"id\": 1, \"tokens\": [1, 2]}\n\n{\"id\": 2, \"tokens\": [1, 2]\n", 3, ""},
        {"{\"id\": 1, \"tokens\": [1, 2], \"arrival\": -3}\n", 1, "arrival"},
        {"{\"id\": 1}\n", 1, "tokens"},
        {"{\"id\": 1, \"tokens\": []}\n", 1, ""},
        {"{\"id\": 1, \"tokens\": [1, 2], \"temperature\": \"hot\"}\n", 1, "temperature"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const char *path = tmp_path("bad.jsonl");
        FILE *f = fopen(path, "w");
        fputs(cases[k].text, f);
        fclose(f);
        engine *e = sim_engine();
        run_ids ids = {0};
        char err[512] = "", want[600];
        rkv_status st = run_load_trace(e, path, 4, NULL, &ids, err, sizeof err);
        ck_assert_msg(st != RKV_OK, "case %zu accepted", k);
        snprintf(want, sizeof want, "%s:%d: ", path, cases[k].line);
        ck_assert_msg(!strncmp(err, want, strlen(want)), "case %zu: '%s' lacks '%s'", k, err, want);
        ck_assert_msg(strstr(err, cases[k].reason), "case %zu: '%s' lacks '%s'", k, err,
                      cases[k].reason);
        ck_assert_int_eq(ids.n, cases[k].line - 1 - (k == 2)); /* blank line 2 in case 2 */
        run_ids_free(&ids);
        engine_destroy(e);
    }
}
END_TEST

static int run_cmd(int (*fn)(int, char **), const char *const *args)
{
    char *argv[32];
    int argc = 0;
    for (; args[argc]; argc++) argv[argc] = (char *)args[argc];
    argv[argc] = NULL;
    fflush(stdout);
    return fn(argc, argv);
}

START_TEST(test_commands)
{
    char trace[512], out[512];
    snprintf(trace, sizeof trace, "%s", tmp_path("sweep.jsonl"));
    snprintf(out, sizeof out, "%s", tmp_path("out.jsonl"));
    ck_assert_int_eq(run_cmd(cmd_gen, (const char *[]){"gen", "sweep", "--num", "5", "--prompt-len",
                             "30", "--output-len", "4", "--hit-rate", "0.5", "--out", trace, NULL}), 0);
    ck_assert_int_eq(run_cmd(cmd_gen, (const char *[]){"gen", "sweep", "--bogus", "1", NULL}), 2);
    ck_assert_int_eq(run_cmd(cmd_gen, (const char *[]){"gen", "sweep", "--hit-rate", "2", NULL}), 2);
    ck_assert_int_eq(run_cmd(cmd_gen, (const char *[]){"gen", "nonsense", NULL}), 2);
    ck_assert_int_eq(run_cmd(cmd_run, (const char *[]){"run", "--backend", "sim", NULL}), 2);
    ck_assert_int_eq(run_cmd(cmd_run, (const char *[]){"run", "--trace", trace, "--frobnicate", NULL}), 2);
    ck_assert_int_eq(run_cmd(cmd_run, (const char *[]){"run", "--trace", trace, "--page-size", "0", NULL}), 2);
    ck_assert_int_eq(run_cmd(cmd_run, (const char *[]){"run", "--trace", trace, "--sched-policy", "lifo", NULL}), 2);
    ck_assert_int_eq(run_cmd(cmd_run, (const char *[]){"run", "--trace", trace, "--cache", "lru", NULL}), 2);
    ck_assert_int_eq(run_cmd(cmd_run, (const char *[]){"run", "--trace", trace, "--model", "gpt-5", NULL}), 2);
    ck_assert_int_eq(run_cmd(cmd_run, (const char *[]){"run", "--trace", trace, "--gpu", "v100", NULL}), 2);
    ck_assert_int_eq(run_cmd(cmd_run, (const char *[]){"run", "--trace", trace, "--gpu", "h100,eff=2", NULL}), 2);
    ck_assert_int_eq(run_cmd(cmd_run, (const char *[]){"run", "--trace", trace, "--max-running", "-1", NULL}), 2);
    ck_assert_int_eq(run_cmd(cmd_run, (const char *[]){"run", "--trace", trace, "--offline=yes", NULL}), 2);
    ck_assert_int_eq(run_cmd(cmd_run, (const char *[]){"run", "--trace", tmp_path("missing"), "--backend", "sim",
                             "--no-progress", NULL}), 1);
    ck_assert_int_eq(run_cmd(cmd_run, (const char *[]){"run", "--trace", trace, "--backend", "sim",
                             "--max-running", "1", "--kv-tokens", "4096", "--page-size", "4",
                             "--fixed-clock",
                             "--no-progress", "--out", out, NULL}), 0);
    FILE *f = fopen(out, "r");
    ck_assert_ptr_nonnull(f);
    char line[65536];
    int requests = 0, summaries = 0;
    while (fgets(line, sizeof line, f)) {
        json_error_t je;
        json_t *j = json_loads(line, 0, &je);
        ck_assert_msg(j, "not JSON: %s", line);
        const char *type = json_string_value(json_object_get(j, "type"));
        if (!strcmp(type, "request")) {
            requests++;
            ck_assert_int_eq(json_array_size(json_object_get(j, "output_ids")), 4);
            ck_assert_int_eq(json_integer_value(json_object_get(j, "prompt_tokens")), 30);
            /* one at a time: every request after the first finds the 15 shared
             * tokens, cut to whole pages of 4 */
            int64_t id = json_integer_value(json_object_get(j, "id"));
            ck_assert_int_eq(json_integer_value(json_object_get(j, "cached_tokens")), id ? 12 : 0);
            ck_assert(json_real_value(json_object_get(j, "ttft")) > 0);
        } else {
            ck_assert_str_eq(type, "summary");
            summaries++;
            ck_assert_int_eq(json_integer_value(json_object_get(j, "requests")), 5);
            ck_assert(json_real_value(json_object_get(j, "requests_per_s")) > 0);
            ck_assert_int_eq(json_integer_value(json_object_get(j, "num_pages")), 1024);
            ck_assert(json_real_value(json_object_get(j, "hit_rate")) > 0.3);
        }
        json_decref(j);
    }
    fclose(f);
    ck_assert_int_eq(requests, 5);
    ck_assert_int_eq(summaries, 1);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("gen");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_every_kind_seeded);
    tcase_add_test(tc, test_shapes);
    tcase_add_test(tc, test_bad_configs);
    tcase_add_test(tc, test_jsonl_round_trip);
    tcase_add_test(tc, test_bad_traces);
    tcase_add_test(tc, test_commands);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return check_run(suite());
}
