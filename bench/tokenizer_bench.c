/* tokenizer_bench.c - encode throughput of radixkv's tokenizer on one thread.
 *
 *   tokenizer_bench TOKENIZER_DIR CORPUS.jsonl [REPEAT]
 *
 * CORPUS holds one {"text": S} per line; every repeat encodes every text
 * (no BOS/EOS). Prints one JSON line: bytes, tokens, thread CPU and wall
 * seconds per repeat (median, min, max) and MB/s from the CPU median.
 * bench/tokenizer_bench.py runs it beside Hugging Face tokenizers and
 * tiktoken on the same corpus. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "rkv_core.h"
#include "tokenizer.h"

static double clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    /* No options, two or three positionals: the table still refuses what
     * is not one and answers --help. */
    cli_opt table[] = {CLI_END};
    char perr[256];
    cli_args a;
    int64_t rep = 5;
    if (cli_parse("tokenizer_bench", table, argc, argv, &a, perr, sizeof perr)) {
        fprintf(stderr, "tokenizer_bench: %s\n", perr);
        return 2;
    }
    if (a.help || a.npos < 2 || a.npos > 3) {
        fprintf(stderr, "usage: tokenizer_bench TOKENIZER_DIR CORPUS.jsonl [REPEAT]\n");
        return 2;
    }
    if (a.npos == 3 && cli_parse_int("REPEAT", a.pos[2], 1, 1000, &rep, perr, sizeof perr)) {
        fprintf(stderr, "tokenizer_bench: %s\n", perr);
        return 2;
    }
    const int repeat = (int)rep;
    const char *dir = a.pos[0], *corpus = a.pos[1];
    char err[512];
    tokenizer *t;
    if (tokenizer_load(dir, &t, err, sizeof err)) {
        fprintf(stderr, "tokenizer_bench: %s\n", err);
        return 1;
    }
    FILE *f = fopen(corpus, "r");
    if (!f) {
        fprintf(stderr, "tokenizer_bench: cannot open %s\n", corpus);
        return 1;
    }
    json_t **texts = NULL;
    size_t n = 0, cap = 0, bytes = 0;
    char *line = NULL;
    size_t lcap = 0;
    ssize_t got;
    while ((got = getline(&line, &lcap, f)) > 0) {
        json_t *o = json_loadb(line, (size_t)got, JSON_ALLOW_NUL, NULL);
        json_t *s = json_object_get(o, "text");
        if (!json_is_string(s)) {
            fprintf(stderr, "tokenizer_bench: %s:%zu: needs {\"text\": S}\n", corpus, n + 1);
            return 1;
        }
        if (rkv_grow_size((void **)&texts, &cap, n + 1, sizeof *texts)) return 1;
        texts[n++] = json_incref(s);
        bytes += json_string_length(s);
        json_decref(o);
    }
    free(line);
    fclose(f);
    double *cpu = malloc(sizeof(double) * (size_t)repeat), *wall = malloc(sizeof(double) * (size_t)repeat);
    size_t tokens = 0;
    for (int r = 0; r < repeat; r++) {
        tokens = 0;
        double c0 = clock_s(CLOCK_THREAD_CPUTIME_ID), w0 = clock_s(CLOCK_MONOTONIC);
        for (size_t i = 0; i < n; i++) {
            int32_t *ids;
            size_t m;
            if (tokenizer_encode(t, json_string_value(texts[i]), json_string_length(texts[i]), false,
                                 &ids, &m, err, sizeof err)) {
                fprintf(stderr, "tokenizer_bench: text %zu: %s\n", i, err);
                return 1;
            }
            tokens += m;
            free(ids);
        }
        cpu[r] = clock_s(CLOCK_THREAD_CPUTIME_ID) - c0;
        wall[r] = clock_s(CLOCK_MONOTONIC) - w0;
    }
    qsort(cpu, (size_t)repeat, sizeof(double), cmp_d);
    qsort(wall, (size_t)repeat, sizeof(double), cmp_d);
    double cm = repeat % 2 ? cpu[repeat / 2] : 0.5 * (cpu[repeat / 2 - 1] + cpu[repeat / 2]);
    double wm = repeat % 2 ? wall[repeat / 2] : 0.5 * (wall[repeat / 2 - 1] + wall[repeat / 2]);
    printf("{\"bench\":\"tokenizer\",\"impl\":\"radixkv\",\"texts\":%zu,\"bytes\":%zu,"
           "\"tokens\":%zu,\"threads\":1,\"repeat\":%d,"
           "\"cpu_s\":{\"median\":%.6f,\"min\":%.6f,\"max\":%.6f},"
           "\"wall_s\":{\"median\":%.6f,\"min\":%.6f,\"max\":%.6f},"
           "\"mb_per_s_cpu\":{\"median\":%.3f,\"min\":%.3f,\"max\":%.3f}}\n",
           n, bytes, tokens, repeat, cm, cpu[0], cpu[repeat - 1], wm, wall[0], wall[repeat - 1],
           bytes / 1e6 / cm, bytes / 1e6 / cpu[repeat - 1], bytes / 1e6 / cpu[0]);
    for (size_t i = 0; i < n; i++) json_decref(texts[i]);
    free(texts);
    free(cpu);
    free(wall);
    tokenizer_free(t);
    return 0;
}
