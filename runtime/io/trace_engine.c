/* trace_engine.c - see trace_engine.h. */
#include "trace_engine.h"

#include <stdio.h>

void trace_engine_request(const trace_request *q, int32_t default_max_tokens, engine_request *er)
{
    *er = (engine_request){
        .tokens = q->tokens,
        .n_tokens = q->n_tokens,
        .max_tokens = q->max_tokens >= 0 ? q->max_tokens : default_max_tokens,
        .stop_token = -1,
        .sampling = {
            .temperature = q->temperature >= 0 ? (float)q->temperature : 0.0f,
            .top_k = q->top_k >= 0 ? q->top_k : 0,
            .top_p = q->top_p >= 0 ? (float)q->top_p : 1.0f,
            /* 0 asks the engine to derive one; a given seed never maps to 0. */
            .seed = q->seed >= 0 ? ((uint64_t)q->seed << 1) | 1 : 0,
        },
        .arrival = q->arrival >= 0 ? q->arrival : 0,
        .priority = q->priority,
    };
}

rkv_status trace_engine_load(const char *path, int32_t vocab_size, int32_t default_max_tokens,
                             trace_engine_fn fn, void *ctx, char *err, size_t errlen)
{
    trace_options topt = {
        .format = TRACE_FORMAT_AUTO,
        .tokens = TRACE_TOKENS_VOCAB,
        .vocab_size = vocab_size,
    };
    trace_reader *tr = NULL;
    rkv_status st = trace_open(path, &topt, &tr, err, errlen);
    if (st) return st;
    trace_request q;
    trace_request_init(&q);
    for (;;) {
        bool eof = false;
        if ((st = trace_next(tr, &q, &eof, err, errlen)) || eof) break;
        engine_request er;
        trace_engine_request(&q, default_max_tokens, &er);
        char why[256] = "";
        if ((st = fn(ctx, &q, &er, why, sizeof why))) {
            snprintf(err, errlen, "%s:%lld: %s", path, (long long)q.line,
                     why[0] ? why : rkv_status_str(st));
            break;
        }
    }
    trace_request_free(&q);
    trace_close(tr);
    return st;
}
