/* bench_util.h - what the C benchmarks here share: the clocks (wall and
 * thread CPU seconds), the summary of repeats (median with its range), and
 * the argument check of a bench that takes positionals only. Header only
 * (static inline), as bench_replay.h, so a bench linking the attention
 * library alone needs nothing more; bench_args needs cli.c (bench_cli). */
#ifndef RKV_BENCH_UTIL_H
#define RKV_BENCH_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "cli.h"

/* Seconds on clock id: CLOCK_MONOTONIC for wall time,
 * CLOCK_THREAD_CPUTIME_ID for the calling thread's CPU time. */
static inline double bench_clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct bench_stats {
    double med, lo, hi;
} bench_stats;

/* v[0..n) sorted in place (n >= 1); the median (the mean of the middle two
 * for an even n), the least and the most. */
static inline bench_stats bench_stats_of(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    bench_stats s = {n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]), v[0], v[n - 1]};
    return s;
}

/* A bench without options: argv through the commands' parser (which refuses
 * an option and answers --help), then lo..hi positionals in *a. 0, or 2 (the
 * exit status) after the parser's message or the usage line on stderr. */
static inline int bench_args(const char *name, const char *usage, int lo, int hi, int argc,
                             char **argv, cli_args *a)
{
    cli_opt table[] = {CLI_END};
    char perr[256];
    if (cli_parse(name, table, argc, argv, a, perr, sizeof perr)) {
        fprintf(stderr, "%s: %s\n", name, perr);
        return 2;
    }
    if (a->help || a->npos < lo || a->npos > hi) {
        fprintf(stderr, "usage: %s %s\n", name, usage);
        return 2;
    }
    return 0;
}

#endif
