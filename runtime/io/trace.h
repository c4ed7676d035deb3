/* trace.h - request traces, read one line at a time (cache-sim and run).
 *
 * Two formats, recognised from the fields of the first request:
 *
 *   JSON Lines   {"id": 7, "tokens": [1, 2, 3], "step": 0,
 *                 "max_tokens": 32, "arrival": 0.5,
 *                 "temperature": 0.7, "top_p": 0.9, "top_k": 40, "seed": 1,
 *                 "priority": 2}
 *                id (integer or string) and tokens are required; the rest is
 *                optional and kept for the runtime. priority (a 32-bit signed
 *                integer, default 0) is what the priority eviction policy
 *                keeps: lower is evicted first.
 *   Mooncake     {"timestamp": ms, "input_length": n, "output_length": m,
 *                 "hash_ids": [h0, h1, ...]}
 *                each hash id names a block of 512 tokens; id and step are the
 *                0-based line number, arrival = timestamp / 1000 s, max_tokens
 *                = output_length.
 *
 * Mooncake tokens, block h, token j (0-based), n blocks:
 *
 *   TRACE_TOKENS_BLOCK  h*512 + j                      (cache-sim; ids < 2^31)
 *   TRACE_TOKENS_VOCAB  mix64(h, j) mod vocab_size     (run: ids in the vocab)
 *
 *   hash_ids   [ h0        | h1        | ... | h(n-1)      ]
 *   tokens     [ 512 tokens| 512 tokens| ... | the first    ]
 *                                              input_length - 512(n-1)
 *
 * Streaming: only the current line's JSON is held (one getline buffer and one
 * jansson tree at a time). Errors name the file, the line and the reason:
 * "trace.jsonl:12: token 3 is negative (-5)".
 *
 * Ownership: the reader owns its buffers; a trace_request is owned by the
 * caller (trace_request_init/free) and reused from line to line.
 */
#ifndef RKV_TRACE_H
#define RKV_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rkv_status.h"

enum { TRACE_MOONCAKE_BLOCK = 512 };

typedef enum trace_format {
    TRACE_FORMAT_AUTO = 0, /* decided by the first request */
    TRACE_FORMAT_JSONL,
    TRACE_FORMAT_MOONCAKE,
} trace_format;

typedef enum trace_tokens {
    TRACE_TOKENS_BLOCK = 0, /* h*512 + j */
    TRACE_TOKENS_VOCAB,     /* mix64(h, j) mod vocab_size */
} trace_tokens;

typedef struct trace_options {
    trace_format format;     /* AUTO unless the caller insists */
    trace_tokens tokens;     /* Mooncake only */
    int32_t vocab_size;      /* TRACE_TOKENS_VOCAB only, >= 1 */
} trace_options;

typedef struct trace_request {
    int64_t line;        /* 1-based line of the file */
    int64_t index;       /* 0-based position among the requests */
    char *id_json;       /* the id as JSON text, ready to print: 7 or "a\"b" */
    bool id_is_int;
    int64_t id_int;      /* valid when id_is_int */
    int64_t step;        /* given, or index when absent */
    bool has_step;
    int32_t *tokens;     /* (n_tokens) token ids, each in [0, 2^31) */
    int32_t n_tokens;    /* >= 1 */
    int32_t max_tokens;  /* -1 when absent */
    double arrival;      /* seconds; -1 when absent */
    double temperature;  /* -1 when absent */
    double top_p;        /* -1 when absent */
    int32_t top_k;       /* -1 when absent */
    int64_t seed;        /* -1 when absent */
    int32_t priority;    /* eviction priority (evict_policy priority); 0 when absent */
    /* Mooncake only (format MOONCAKE); tokens are derived from them. */
    int32_t n_hash_ids;
    int64_t *hash_ids;   /* (n_hash_ids) */
    /* internal capacities */
    int32_t tok_cap, hash_cap, id_cap;
} trace_request;

typedef struct trace_reader trace_reader;

void trace_request_init(trace_request *r);
void trace_request_free(trace_request *r);

/* Opens path ("-" = stdin). opt may be NULL (auto format, block tokens). */
rkv_status trace_open(const char *path, const trace_options *opt, trace_reader **out,
                      char *err, size_t errlen);
/* Reads the next request into req. At end of file returns RKV_OK with *eof =
 * true. Blank lines are skipped (they still count for line numbers). On a bad
 * line returns RKV_EPARSE (or RKV_ERANGE) with "file:line: reason" in err;
 * the reader is then positioned after that line. */
rkv_status trace_next(trace_reader *r, trace_request *req, bool *eof, char *err, size_t errlen);
/* The format decided so far (AUTO before the first request). */
trace_format trace_reader_format(const trace_reader *r);
/* Bytes consumed so far and the file's size (0 for a pipe): for progress. */
int64_t trace_reader_offset(const trace_reader *r);
int64_t trace_reader_size(const trace_reader *r);
const char *trace_reader_path(const trace_reader *r);
void trace_close(trace_reader *r);

/* 3 when s starts with a UTF-8 byte-order mark (editors on Windows write
 * one), else 0: the first line of a trace or pin file skips it. */
static inline size_t trace_bom_len(const char *s, size_t n)
{
    return n >= 3 && (unsigned char)s[0] == 0xEF && (unsigned char)s[1] == 0xBB
        && (unsigned char)s[2] == 0xBF ? 3 : 0;
}

/* Token j of Mooncake block h under each scheme. */
static inline int64_t trace_block_token(int64_t h, int32_t j)
{
    return h * TRACE_MOONCAKE_BLOCK + j;
}
int32_t trace_vocab_token(int64_t h, int32_t j, int32_t vocab_size);

#endif
