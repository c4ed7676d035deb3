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

#include "bench_util.h"
#include "rkv_core.h"
#include "tokenizer.h"

int main(int argc, char **argv)
{
    /* No options, two or three positionals: the table still refuses what
     * is not one and answers --help. */
    char perr[256];
    cli_args a;
    int64_t rep = 5;
    int rc = bench_args("tokenizer_bench", "TOKENIZER_DIR CORPUS.jsonl [REPEAT]", 2, 3, argc, argv,
                        &a);
    if (rc) return rc;
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
        double c0 = bench_clock_s(CLOCK_THREAD_CPUTIME_ID), w0 = bench_clock_s(CLOCK_MONOTONIC);
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
        cpu[r] = bench_clock_s(CLOCK_THREAD_CPUTIME_ID) - c0;
        wall[r] = bench_clock_s(CLOCK_MONOTONIC) - w0;
    }
    bench_stats cs = bench_stats_of(cpu, repeat), ws = bench_stats_of(wall, repeat);
    printf("{\"bench\":\"tokenizer\",\"impl\":\"radixkv\",\"texts\":%zu,\"bytes\":%zu,"
           "\"tokens\":%zu,\"threads\":1,\"repeat\":%d,"
           "\"cpu_s\":{\"median\":%.6f,\"min\":%.6f,\"max\":%.6f},"
           "\"wall_s\":{\"median\":%.6f,\"min\":%.6f,\"max\":%.6f},"
           "\"mb_per_s_cpu\":{\"median\":%.3f,\"min\":%.3f,\"max\":%.3f}}\n",
           n, bytes, tokens, repeat, cs.med, cs.lo, cs.hi, ws.med, ws.lo, ws.hi,
           bytes / 1e6 / cs.med, bytes / 1e6 / cs.hi, bytes / 1e6 / cs.lo);
    for (size_t i = 0; i < n; i++) json_decref(texts[i]);
    free(texts);
    free(cpu);
    free(wall);
    tokenizer_free(t);
    return 0;
}
