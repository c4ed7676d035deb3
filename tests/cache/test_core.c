/* test_core.c - the shared helpers of rkv_core.h. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache_test_util.h"
#include "check_run.h"
#include "rkv_core.h"

/* The reference sequence of splitmix64 from state 0: the cpu and cuda
 * weights, the sampler and the workloads all depend on these exact values. */
START_TEST(splitmix64_matches_the_reference_sequence)
{
    ck_assert_uint_eq(rkv_splitmix64(0), 0xe220a8397b1dcdafull);
    uint64_t s = 0;
    ck_assert_uint_eq(rkv_splitmix64_next(&s), 0xe220a8397b1dcdafull);
    ck_assert_uint_eq(rkv_splitmix64_next(&s), 0x6e789e6aa1b965f4ull);
    ck_assert_uint_eq(rkv_splitmix64_next(&s), 0x06c45d188009454full);
    ck_assert_uint_eq(s, 3 * 0x9e3779b97f4a7c15ull);
}
END_TEST

START_TEST(grow_keeps_contents_and_refuses_overflow)
{
    int32_t *a = NULL;
    int64_t cap = 0;
    ck_assert_int_eq(rkv_grow((void **)&a, &cap, 3, sizeof *a), RKV_OK);
    ck_assert_int_ge(cap, 3);
    for (int i = 0; i < 3; i++) a[i] = i + 7;
    ck_assert_int_eq(rkv_grow((void **)&a, &cap, 1000, sizeof *a), RKV_OK);
    ck_assert_int_ge(cap, 1000);
    ck_assert_int_eq(a[0] + a[1] + a[2], 7 + 8 + 9);
    int32_t *b = a;
    int32_t c32 = 4;
    ck_assert_int_eq(rkv_grow32((void **)&b, &c32, (int64_t)INT32_MAX, sizeof *b), RKV_ENOMEM);
    ck_assert_int_eq(c32, 4);
    ck_assert_ptr_eq(b, a);
    ck_assert_int_eq(rkv_grow((void **)&a, &cap, INT64_MAX / 2, 8), RKV_ENOMEM);
    free(a);
}
END_TEST

/* Parallel arrays end at one capacity; a refused growth moves nothing. */
START_TEST(grow_arrays_share_one_capacity)
{
    int32_t *a = NULL;
    int64_t *b = NULL;
    int32_t cap = 0;
    void **arrays[] = {(void **)&a, (void **)&b};
    const size_t elem[] = {sizeof *a, sizeof *b};
    ck_assert_int_eq(rkv_grow32_arrays(arrays, elem, 2, &cap, 20), RKV_OK);
    ck_assert_int_ge(cap, 20);
    for (int32_t i = 0; i < cap; i++) a[i] = i, b[i] = -i;
    int32_t was = cap;
    ck_assert_int_eq(rkv_grow32_arrays(arrays, elem, 2, &cap, was + 1), RKV_OK);
    ck_assert_int_ge(cap, was + 1);
    ck_assert_int_eq(a[was - 1], was - 1);
    ck_assert_int_eq(b[was - 1], -(was - 1));
    was = cap;
    ck_assert_int_eq(rkv_grow32_arrays(arrays, elem, 2, &cap, INT32_MAX), RKV_ENOMEM);
    ck_assert_int_eq(cap, was);
    /* only the first n arrays grow: the second stays as it was */
    int64_t *b_was = b;
    ck_assert_int_eq(rkv_grow32_arrays(arrays, elem, 1, &cap, 4 * (int64_t)was), RKV_OK);
    ck_assert_ptr_eq(b, b_was);
    free(a);
    free(b);

    char *s = NULL;
    size_t sc = 0;
    ck_assert_int_eq(rkv_grow_size((void **)&s, &sc, 5, 1), RKV_OK);
    ck_assert_uint_ge(sc, 5);
    memcpy(s, "abcd", 5);
    ck_assert_int_eq(rkv_grow_size((void **)&s, &sc, 100, 1), RKV_OK);
    ck_assert_uint_ge(sc, 100);
    ck_assert_str_eq(s, "abcd");
    size_t sc_was = sc;
    ck_assert_int_eq(rkv_grow_size((void **)&s, &sc, SIZE_MAX, 1), RKV_ENOMEM);
    ck_assert_uint_eq(sc, sc_was);
    free(s);
}
END_TEST

START_TEST(percentile_is_nearest_rank)
{
    double v[] = {5, 1, 4, 2, 3};
    qsort(v, 5, sizeof *v, rkv_cmp_double);
    ck_assert(v[0] == 1 && v[4] == 5);
    ck_assert(rkv_percentile(v, 5, 50) == 3);
    ck_assert(rkv_percentile(v, 5, 99) == 5);
    ck_assert(rkv_percentile(v, 5, 20) == 1);
    ck_assert(rkv_percentile(v, 5, 21) == 2);
    ck_assert(rkv_percentile(v, 0, 50) == 0);
}
END_TEST

START_TEST(json_string_escapes)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    rkv_json_string(f, "a\"b\\c\nd\x01 \xc3\xa9");
    fclose(f);
    ck_assert_str_eq(buf, "\"a\\\"b\\\\c\\u000ad\\u0001 \xc3\xa9\"");
    free(buf);
}
END_TEST

/* rkv_read_file: every byte (NULs too, past one 64 KiB chunk) and a NUL after
 * them; an empty file is an empty string; each refusal names the path and
 * its reason and hands back nothing. */
START_TEST(read_file_whole_or_refused)
{
    char dir[] = "/tmp/rkv_core_XXXXXX", path[64], err[256];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/f", dir);
    enum { N = 200001 };
    char *want = malloc(N);
    for (int i = 0; i < N; i++) want[i] = (char)(i * 7 % 251);
    FILE *f = fopen(path, "wb");
    ck_assert_int_eq(fwrite(want, 1, N, f), N);
    fclose(f);
    char *got;
    size_t n;
    ck_assert_int_eq(rkv_read_file(path, 0, &got, &n, err, sizeof err), RKV_OK);
    ck_assert_uint_eq(n, N);
    ck_assert(memcmp(got, want, N) == 0 && got[N] == 0);
    free(got);
    ck_assert_int_eq(rkv_read_file(path, N, &got, &n, err, sizeof err), RKV_OK);
    ck_assert_uint_eq(n, N);
    free(got);
    ck_assert_int_eq(rkv_read_file(path, N - 1, &got, &n, err, sizeof err), RKV_EINVAL);
    ck_assert_ptr_null(got);
    ck_assert_msg(strstr(err, path) && strstr(err, "larger than 200000 bytes"), "%s", err);
    f = fopen(path, "wb");
    fclose(f);
    ck_assert_int_eq(rkv_read_file(path, 0, &got, &n, err, sizeof err), RKV_OK);
    ck_assert_uint_eq(n, 0);
    ck_assert_str_eq(got, "");
    free(got);
    unlink(path);
    ck_assert_int_eq(rkv_read_file(path, 0, &got, &n, err, sizeof err), RKV_EIO);
    ck_assert_ptr_null(got);
    ck_assert_msg(strstr(err, path) && strstr(err, "cannot open: No such file"), "%s", err);
    ck_assert_int_eq(rkv_read_file(dir, 0, &got, &n, err, sizeof err), RKV_EIO);
    ck_assert_ptr_null(got);
    ck_assert_msg(strstr(err, dir) && strstr(err, "cannot read: Is a directory"), "%s", err);
    rmdir(dir);
    free(want);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("core");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, splitmix64_matches_the_reference_sequence);
    tcase_add_test(tc, grow_keeps_contents_and_refuses_overflow);
    tcase_add_test(tc, grow_arrays_share_one_capacity);
    tcase_add_test(tc, percentile_is_nearest_rank);
    tcase_add_test(tc, json_string_escapes);
    tcase_add_test(tc, read_file_whole_or_refused);
    suite_add_tcase(s, tc);
    return check_run(s);
}
