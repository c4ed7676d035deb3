/* fuzz_trace.c - trace files, built twice: fuzz_trace_jsonl (FUZZ_FORMAT =
 * TRACE_FORMAT_JSONL) and fuzz_trace_mooncake (TRACE_FORMAT_MOONCAKE); each
 * input is also read with the format left to the first request. Every
 * request read must satisfy trace.h's promises, a failure must name the file;
 * read with block tokens (cache-sim) and vocabulary tokens (run). */
#include <assert.h>

#include "fuzz_util.h"
#include "trace.h"

static void read_all(const char *path, const trace_options *opt)
{
    trace_reader *r;
    char err[512] = "";
    if (trace_open(path, opt, &r, err, sizeof err) != RKV_OK) abort();
    trace_request q;
    trace_request_init(&q);
    bool eof = false;
    rkv_status st;
    int64_t n = 0;
    while ((st = trace_next(r, &q, &eof, err, sizeof err)) == RKV_OK && !eof) {
        if (q.n_tokens < 1 || !q.id_json) abort();
        for (int32_t i = 0; i < q.n_tokens; i++)
            if (q.tokens[i] < 0) abort();
        /* Vocabulary ids are made for Mooncake blocks only; JSON Lines tokens
         * are the caller's (run checks them against the model). */
        if (opt && opt->tokens == TRACE_TOKENS_VOCAB && trace_reader_format(r) == TRACE_FORMAT_MOONCAKE)
            for (int32_t i = 0; i < q.n_tokens; i++)
                if (q.tokens[i] >= opt->vocab_size) abort();
        if (q.max_tokens == 0 || q.index != n++) abort();
    }
    if (st != RKV_OK && st != RKV_ENOMEM && !strstr(err, path)) abort();
    trace_request_free(&q);
    trace_close(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file(data, size, "trace.jsonl");
    trace_options block = {FUZZ_FORMAT, TRACE_TOKENS_BLOCK, 0, NULL};
    trace_options vocab = {FUZZ_FORMAT, TRACE_TOKENS_VOCAB, 1000, NULL};
    read_all(path, &block);
    read_all(path, &vocab);
    read_all(path, NULL);
    return 0;
}
