/* test_trace.c - trace reading: JSON Lines, Mooncake, and every malformed case
 * with its file:line message. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check_run.h"
#include "trace.h"

/* Writes text to a fresh temporary file; returns its path (caller frees). */
static char *write_tmp(const char *text)
{
    char *path = strdup("/tmp/rkv_trace_XXXXXX");
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    FILE *f = fdopen(fd, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
    return path;
}

/* Reads every request; returns the status of the first failure (or OK) and
 * the number of requests read before it. */
static rkv_status read_all(const char *path, const trace_options *opt, int *n, char *err,
                           size_t errlen)
{
    trace_reader *r;
    rkv_status st = trace_open(path, opt, &r, err, errlen);
    if (st != RKV_OK) return st;
    trace_request q;
    trace_request_init(&q);
    *n = 0;
    bool eof = false;
    while ((st = trace_next(r, &q, &eof, err, errlen)) == RKV_OK && !eof) (*n)++;
    trace_request_free(&q);
    trace_close(r);
    return st;
}

START_TEST(test_jsonl_fields)
{
    char *path = write_tmp(
        "{\"id\": 7, \"tokens\": [1, 2, 3], \"step\": 4, \"max_tokens\": 9, \"arrival\": 0.5}\n"
        "\n"
        "{\"id\": \"a\\\"b\", \"tokens\": [2147483647], \"temperature\": 0.7, \"top_p\": 0.9, "
        "\"top_k\": 40, \"seed\": 3}\n");
    trace_reader *r;
    char err[256];
    ck_assert_int_eq(trace_open(path, NULL, &r, err, sizeof err), RKV_OK);
    trace_request q;
    trace_request_init(&q);
    bool eof;
    ck_assert_int_eq(trace_next(r, &q, &eof, err, sizeof err), RKV_OK);
    ck_assert(!eof);
    ck_assert_int_eq(trace_reader_format(r), TRACE_FORMAT_JSONL);
    ck_assert(q.id_is_int);
    ck_assert_int_eq(q.id_int, 7);
    ck_assert_str_eq(q.id_json, "7");
    ck_assert_int_eq(q.n_tokens, 3);
    ck_assert_int_eq(q.tokens[2], 3);
    ck_assert(q.has_step);
    ck_assert_int_eq(q.step, 4);
    ck_assert_int_eq(q.max_tokens, 9);
    ck_assert(q.arrival == 0.5);
    ck_assert_int_eq(q.line, 1);
    ck_assert_int_eq(trace_next(r, &q, &eof, err, sizeof err), RKV_OK);
    ck_assert(!eof);
    ck_assert(!q.id_is_int);
    ck_assert_str_eq(q.id_json, "\"a\\\"b\"");
    ck_assert_int_eq(q.line, 3);              /* the blank line still counts */
    ck_assert(!q.has_step);
    ck_assert_int_eq(q.step, 1);              /* its position among requests */
    ck_assert_int_eq(q.tokens[0], 2147483647);
    ck_assert_int_eq(q.max_tokens, -1);
    ck_assert_int_eq(q.top_k, 40);
    ck_assert_int_eq(q.seed, 3);
    ck_assert(q.temperature == 0.7 && q.top_p == 0.9);
    ck_assert_int_eq(trace_next(r, &q, &eof, err, sizeof err), RKV_OK);
    ck_assert(eof);
    trace_request_free(&q);
    trace_close(r);
    unlink(path);
    free(path);
}
END_TEST

/* Each malformed line, placed on line 2 after a good line: the message must
 * name the file, line 2 and the reason. */
static const struct {
    const char *line;
    const char *reason;
} bad_cases[] = {
    {"{\"id\": 1, \"tokens\": [1, 2}", "bad JSON"},
    {"not json at all", "bad JSON"},
    {"[1, 2, 3]", "must be a JSON object"},
    {"{\"tokens\": [1, 2]}", "missing field \"id\""},
    {"{\"id\": 1}", "missing field \"tokens\""},
    {"{\"id\": 1, \"tokens\": 5}", "\"tokens\" must be an array"},
    {"{\"id\": 1, \"tokens\": []}", "\"tokens\" is empty"},
    {"{\"id\": 1, \"tokens\": [1, -5]}", "token 1 is negative (-5)"},
    {"{\"id\": 1, \"tokens\": [1.5]}", "token 0 is not an integer"},
    {"{\"id\": 1, \"tokens\": [\"7\"]}", "token 0 is not an integer"},
    {"{\"id\": 1, \"tokens\": [2147483648]}", "token 0 is out of range"},
    {"{\"id\": [1], \"tokens\": [1]}", "\"id\" must be an integer or a string"},
    {"{\"id\": 1, \"tokens\": [1], \"step\": -1}", "\"step\" out of range"},
    {"{\"id\": 1, \"tokens\": [1], \"step\": 1.5}", "\"step\" must be an integer"},
    {"{\"id\": 1, \"tokens\": [1], \"max_tokens\": \"x\"}", "\"max_tokens\" must be an integer"},
    {"{\"id\": 1, \"tokens\": [1], \"top_p\": 2}", "\"top_p\" out of range"},
    /* Regression (issue 28): fields the reader did not know were dropped
     * silently; "namespace" was one and changed which requests share pages. */
    {"{\"id\": 1, \"tokens\": [1], \"salt\": \"a\"}", "unknown field \"salt\""},
    {"{\"id\": 1, \"tokens\": [1], \"Namespace\": \"a\"}", "unknown field \"Namespace\""},
    {"{\"id\": 1, \"tokens\": [1], \"namespace\": 3}", "\"namespace\" must be a string"},
};

START_TEST(test_malformed)
{
    char text[512];
    snprintf(text, sizeof text, "{\"id\": 0, \"tokens\": [1]}\n%s\n{\"id\": 2, \"tokens\": [1]}\n",
             bad_cases[_i].line);
    char *path = write_tmp(text);
    char err[512] = "";
    int n = -1;
    rkv_status st = read_all(path, NULL, &n, err, sizeof err);
    ck_assert_msg(st == RKV_EPARSE, "case %d: status %d", _i, st);
    ck_assert_int_eq(n, 1);
    char where[300];
    snprintf(where, sizeof where, "%s:2: ", path);
    ck_assert_msg(strncmp(err, where, strlen(where)) == 0, "case %d: '%s' lacks '%s'", _i, err, where);
    ck_assert_msg(strstr(err, bad_cases[_i].reason) != NULL, "case %d: '%s' lacks '%s'", _i, err,
                  bad_cases[_i].reason);
    unlink(path);
    free(path);
}
END_TEST

START_TEST(test_missing_file)
{
    trace_reader *r;
    char err[256] = "";
    ck_assert_int_eq(trace_open("/nonexistent/trace.jsonl", NULL, &r, err, sizeof err), RKV_EIO);
    ck_assert_ptr_nonnull(strstr(err, "/nonexistent/trace.jsonl"));
}
END_TEST

/* Two Mooncake lines sharing their first block; the second ends in a partial block. */
static const char mooncake[] =
    "{\"timestamp\": 0, \"input_length\": 1024, \"output_length\": 10, \"hash_ids\": [0, 1]}\n"
    "{\"timestamp\": 1500, \"input_length\": 600, \"output_length\": 3, \"hash_ids\": [0, 2]}\n";

START_TEST(test_mooncake_block_tokens)
{
    char *path = write_tmp(mooncake);
    trace_reader *r;
    char err[256];
    ck_assert_int_eq(trace_open(path, NULL, &r, err, sizeof err), RKV_OK);
    trace_request q;
    trace_request_init(&q);
    bool eof;
    ck_assert_int_eq(trace_next(r, &q, &eof, err, sizeof err), RKV_OK);
    ck_assert_int_eq(trace_reader_format(r), TRACE_FORMAT_MOONCAKE);
    ck_assert_int_eq(q.n_tokens, 1024);
    for (int j = 0; j < 1024; j++) ck_assert_int_eq(q.tokens[j], j); /* blocks 0 and 1 */
    ck_assert_str_eq(q.id_json, "0");
    ck_assert_int_eq(q.step, 0);
    ck_assert_int_eq(q.max_tokens, 10);
    ck_assert_int_eq(trace_next(r, &q, &eof, err, sizeof err), RKV_OK);
    ck_assert_int_eq(q.n_tokens, 600);
    ck_assert_str_eq(q.id_json, "1");
    ck_assert_int_eq(q.step, 1);
    ck_assert(q.arrival == 1.5);
    ck_assert_int_eq(q.n_hash_ids, 2);
    ck_assert_int_eq(q.tokens[511], 511);        /* shared first block */
    ck_assert_int_eq(q.tokens[512], 2 * 512);    /* block 2, token 0 */
    ck_assert_int_eq(q.tokens[599], 2 * 512 + 87);
    ck_assert_int_eq(trace_next(r, &q, &eof, err, sizeof err), RKV_OK);
    ck_assert(eof);
    trace_request_free(&q);
    trace_close(r);
    unlink(path);
    free(path);
}
END_TEST

START_TEST(test_mooncake_vocab_tokens)
{
    char *path = write_tmp(mooncake);
    trace_options opt = {TRACE_FORMAT_AUTO, TRACE_TOKENS_VOCAB, 1000, NULL};
    trace_reader *r;
    char err[256];
    ck_assert_int_eq(trace_open(path, &opt, &r, err, sizeof err), RKV_OK);
    trace_request a, b;
    trace_request_init(&a);
    trace_request_init(&b);
    bool eof;
    ck_assert_int_eq(trace_next(r, &a, &eof, err, sizeof err), RKV_OK);
    ck_assert_int_eq(trace_next(r, &b, &eof, err, sizeof err), RKV_OK);
    /* Equal hash ids give equal blocks; different ones differ somewhere. */
    ck_assert_mem_eq(a.tokens, b.tokens, 512 * sizeof(int32_t));
    ck_assert(memcmp(a.tokens + 512, b.tokens + 512, 88 * sizeof(int32_t)) != 0);
    for (int j = 0; j < a.n_tokens; j++) ck_assert(a.tokens[j] >= 0 && a.tokens[j] < 1000);
    ck_assert_int_eq(a.tokens[700], trace_vocab_token(1, 700 - 512, 1000));
    trace_request_free(&a);
    trace_request_free(&b);
    trace_close(r);
    unlink(path);
    free(path);
}
END_TEST

static const struct {
    const char *line;
    const char *reason;
} bad_mooncake[] = {
    {"{\"timestamp\": 0, \"input_length\": 10, \"hash_ids\": [0]}", "missing field \"output_length\""},
    {"{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 1, \"hash_ids\": [0, -1]}",
     "hash id 1 is negative"},
    {"{\"timestamp\": 0, \"input_length\": 513, \"output_length\": 1, \"hash_ids\": [0]}",
     "does not fit 1 blocks"},
    {"{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 1, \"hash_ids\": [0, 1]}",
     "does not fit 2 blocks"},
    {"{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 1, \"hash_ids\": [0.5]}",
     "hash id 0 is not an integer"},
    {"{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 1, \"hash_ids\": [4194304]}",
     "too large for block tokens"},
    {"{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 1, \"hash_ids\": [0], \"id\": 3}",
     "unknown field \"id\" (a Mooncake trace line has"},
    {"{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 1, \"hash_ids\": [0], "
     "\"namespace\": null}", "\"namespace\" must be a string"},
};

/* "namespace" in both formats, the reader's default for lines without it,
 * and "" as the default namespace (trace.h). */
START_TEST(test_namespace)
{
    char *path = write_tmp(
        "{\"id\": 0, \"tokens\": [1, 2], \"namespace\": \"tenant-a\"}\n"
        "{\"id\": 1, \"tokens\": [1, 2], \"namespace\": \"tenant-b\"}\n"
        "{\"id\": 2, \"tokens\": [1, 2], \"namespace\": \"\"}\n"
        "{\"id\": 3, \"tokens\": [1, 2]}\n"
        "{\"id\": 4, \"tokens\": [1, 2], \"namespace\": \"tenant-a\"}\n");
    char *moon = write_tmp(
        "{\"timestamp\": 0, \"input_length\": 4, \"output_length\": 1, \"hash_ids\": [0], "
        "\"namespace\": \"tenant-a\"}\n"
        "{\"timestamp\": 0, \"input_length\": 4, \"output_length\": 1, \"hash_ids\": [0]}\n");
    uint64_t a = trace_namespace_id("tenant-a", 8), b = trace_namespace_id("tenant-b", 8);
    ck_assert(a != 0 && b != 0 && a != b);
    ck_assert_uint_eq(trace_namespace_id("", 0), 0);
    ck_assert_uint_eq(trace_namespace_id(NULL, 0), 0);
    for (int with_default = 0; with_default < 2; with_default++) {
        trace_options opt = {TRACE_FORMAT_AUTO, TRACE_TOKENS_BLOCK, 0,
                             with_default ? "tenant-b" : NULL};
        uint64_t dflt = with_default ? b : 0;
        uint64_t want[] = {a, b, 0, dflt, a};
        trace_reader *r;
        char err[256];
        trace_request q;
        trace_request_init(&q);
        bool eof;
        ck_assert_int_eq(trace_open(path, &opt, &r, err, sizeof err), RKV_OK);
        for (int i = 0; i < 5; i++) {
            ck_assert_int_eq(trace_next(r, &q, &eof, err, sizeof err), RKV_OK);
            ck_assert_msg(q.ns == want[i], "line %d (default %d): ns %llu", i + 1, with_default,
                          (unsigned long long)q.ns);
        }
        trace_close(r);
        ck_assert_int_eq(trace_open(moon, &opt, &r, err, sizeof err), RKV_OK);
        ck_assert_int_eq(trace_next(r, &q, &eof, err, sizeof err), RKV_OK);
        ck_assert_uint_eq(q.ns, a);
        ck_assert_int_eq(trace_next(r, &q, &eof, err, sizeof err), RKV_OK);
        ck_assert_uint_eq(q.ns, dflt);
        trace_close(r);
        trace_request_free(&q);
    }
    unlink(path);
    unlink(moon);
    free(path);
    free(moon);
}
END_TEST

START_TEST(test_mooncake_malformed)
{
    char text[512];
    snprintf(text, sizeof text,
             "{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [0]}\n%s\n",
             bad_mooncake[_i].line);
    char *path = write_tmp(text);
    char err[512] = "";
    int n = -1;
    ck_assert_int_eq(read_all(path, NULL, &n, err, sizeof err), RKV_EPARSE);
    ck_assert_int_eq(n, 1);
    char where[300];
    snprintf(where, sizeof where, "%s:2: ", path);
    ck_assert_msg(strncmp(err, where, strlen(where)) == 0, "'%s' lacks '%s'", err, where);
    ck_assert_msg(strstr(err, bad_mooncake[_i].reason) != NULL, "'%s' lacks '%s'", err,
                  bad_mooncake[_i].reason);
    unlink(path);
    free(path);
}
END_TEST

/* Regression (issue 21, defect 2): hash ids of 2^54 and above overflowed
 * h * 512 inside the range check; 2^55 wrapped to block 0's tokens and
 * 2^63 - 1 gave negative token ids (and a UBSan report). */
START_TEST(test_regress_mooncake_hash_overflow)
{
    static const char *const ids[] = {"4194303", "18014398509481984", "36028797018963968",
                                      "9223372036854775807"};
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        char text[256];
        snprintf(text, sizeof text,
                 "{\"timestamp\": 0, \"input_length\": 600, \"output_length\": 1, "
                 "\"hash_ids\": [1, %s]}\n", ids[i]);
        char *path = write_tmp(text);
        char err[512] = "";
        int n = -1;
        rkv_status st = read_all(path, NULL, &n, err, sizeof err);
        if (i == 0) {
            /* The largest id whose tokens stay below 2^31. */
            ck_assert_int_eq(st, RKV_OK);
            ck_assert_int_eq(n, 1);
        } else {
            ck_assert_int_eq(st, RKV_EPARSE);
            ck_assert_int_eq(n, 0);
            ck_assert_msg(strstr(err, ":1: hash id 1 is too large") != NULL, "%s", err);
        }
        /* Vocabulary tokens (run): up to 2^54 - 1; beyond, the mix key wraps. */
        trace_options vocab = {TRACE_FORMAT_AUTO, TRACE_TOKENS_VOCAB, 1000, NULL};
        st = read_all(path, &vocab, &n, err, sizeof err);
        ck_assert_int_eq(st, i == 0 ? RKV_OK : RKV_EPARSE);
        if (i > 0) ck_assert_msg(strstr(err, ":1: hash id 1 is too large (") != NULL, "%s", err);
        unlink(path);
        free(path);
    }
}
END_TEST

/* Regression (issue 21, defect 7): a UTF-8 byte-order mark before the first
 * line was "bad JSON". */
START_TEST(test_regress_utf8_bom)
{
    char *path = write_tmp("\xEF\xBB\xBF{\"id\": 1, \"tokens\": [5, 6]}\n{\"id\": 2, \"tokens\": [7]}\n");
    char err[256] = "";
    int n = -1;
    ck_assert_msg(read_all(path, NULL, &n, err, sizeof err) == RKV_OK, "%s", err);
    ck_assert_int_eq(n, 2);
    unlink(path);
    free(path);
    /* Only at the start of the file: elsewhere it is still malformed. */
    path = write_tmp("{\"id\": 1, \"tokens\": [5]}\n\xEF\xBB\xBF{\"id\": 2, \"tokens\": [7]}\n");
    ck_assert_int_eq(read_all(path, NULL, &n, err, sizeof err), RKV_EPARSE);
    ck_assert_int_eq(n, 1);
    ck_assert_msg(strstr(err, ":2: bad JSON") != NULL, "%s", err);
    unlink(path);
    free(path);
}
END_TEST

/* Regression (issue 21, defect 7): Mooncake output_length 0 (and JSON Lines
 * max_tokens 0) passed cache-sim but failed run; the reader now refuses it for
 * both, naming the line. */
START_TEST(test_regress_zero_output_length)
{
    static const char *const lines[] = {
        "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 0, \"hash_ids\": [0]}",
        "{\"id\": 0, \"tokens\": [1], \"max_tokens\": 0}",
    };
    static const char *const reason[] = {"\"output_length\" must be >= 1", "\"max_tokens\" must be >= 1"};
    for (int i = 0; i < 2; i++) {
        char text[256];
        snprintf(text, sizeof text, "%s\n", lines[i]);
        char *path = write_tmp(text);
        char err[512] = "";
        int n = -1;
        ck_assert_int_eq(read_all(path, NULL, &n, err, sizeof err), RKV_EPARSE);
        ck_assert_msg(strstr(err, ":1: ") && strstr(err, reason[i]), "%s", err);
        unlink(path);
        free(path);
    }
}
END_TEST

START_TEST(test_vocab_token_spread)
{
    /* The fold the mix replaces: with V a multiple of 512, (h*512 + j) mod V
     * maps block h and block h + V/512 to the same tokens. The mix must not. */
    const int32_t V = 32768;
    int same = 0;
    for (int j = 0; j < 512; j++)
        same += trace_vocab_token(3, j, V) == trace_vocab_token(3 + V / 512, j, V);
    ck_assert_int_lt(same, 8);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("trace");
    TCase *tc = tcase_create("trace");
    tcase_add_test(tc, test_jsonl_fields);
    tcase_add_test(tc, test_namespace);
    tcase_add_loop_test(tc, test_malformed, 0, (int)(sizeof bad_cases / sizeof bad_cases[0]));
    tcase_add_test(tc, test_missing_file);
    tcase_add_test(tc, test_mooncake_block_tokens);
    tcase_add_test(tc, test_mooncake_vocab_tokens);
    tcase_add_loop_test(tc, test_mooncake_malformed, 0,
                        (int)(sizeof bad_mooncake / sizeof bad_mooncake[0]));
    tcase_add_test(tc, test_vocab_token_spread);
    tcase_add_test(tc, test_regress_mooncake_hash_overflow);
    tcase_add_test(tc, test_regress_utf8_bom);
    tcase_add_test(tc, test_regress_zero_output_length);
    suite_add_tcase(s, tc);
    return check_run(s);
}
