/* attention_common.c - error names and argument validation shared by the CPU
 * and CUDA attention code; see attention.h and attention_common.h. */
#include "attention_common.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *attn_strerror(int code)
{
    switch (code) {
    case ATTN_OK: return "ok";
    case ATTN_EHEADDIM: return "unsupported head dim (64 or 128)";
    case ATTN_EPAGESIZE: return "page size outside 1..256";
    case ATTN_EHEADS: return "query heads not a positive multiple of KV heads";
    case ATTN_EARG: return "bad argument";
    case ATTN_ENOMEM: return "out of host memory";
    case ATTN_ECUDA: return "CUDA call failed";
    case ATTN_ENOTSUP: return "dtype or path not compiled in";
    }
    return "unknown attention error";
}

int attn_fail_at(int code, const char *file, int line, const char *fn, const char *fmt, ...)
{
    /* Only the file name: the message must not depend on the build tree. */
    const char *base = strrchr(file, '/');
    base = base ? base + 1 : file;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "attention: %s:%d: %s: %s: ", base, line, fn, attn_strerror(code));
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return code;
}

int attn_shape_check_in(const char *fn, const attn_shape *s)
{
    if (!s) return ATTN_FAIL(ATTN_EARG, fn, "shape is NULL");
    if (s->head_dim != 64 && s->head_dim != 128)
        return ATTN_FAIL(ATTN_EHEADDIM, fn, "head_dim = %d", (int)s->head_dim);
    if (s->page_size < 1 || s->page_size > 256)
        return ATTN_FAIL(ATTN_EPAGESIZE, fn, "page_size = %d", (int)s->page_size);
    if (s->num_kv_heads < 1 || s->num_q_heads < 1 || s->num_q_heads % s->num_kv_heads != 0)
        return ATTN_FAIL(ATTN_EHEADS, fn, "num_q_heads = %d, num_kv_heads = %d",
                         (int)s->num_q_heads, (int)s->num_kv_heads);
    /* A NaN or infinite scale would turn every score into NaN. */
    if (!isfinite(s->scale)) return ATTN_FAIL(ATTN_EARG, fn, "scale = %g is not finite",
                                              (double)s->scale);
    return ATTN_OK;
}

int attn_shape_check(const attn_shape *s)
{
    return attn_shape_check_in("attn_shape_check", s);
}

/* Pages a sequence of len tokens reads: ceil(len / P), in 64 bits. */
static int64_t pages_for(int32_t len, int32_t page_size)
{
    return ((int64_t)len + page_size - 1) / page_size;
}

/* Rows of page_table a batch reads: each must fit max_pages and hold ids in
 * [0, num_pages), the pages of the pool. */
static int check_pages(const char *fn, const char *what, int32_t num_seqs, const int32_t *lens,
                       const int32_t *page_table, int32_t max_pages, int32_t page_size,
                       int32_t num_pages)
{
    if (num_pages < 0) return ATTN_FAIL(ATTN_EARG, fn, "num_pages = %d", (int)num_pages);
    for (int32_t i = 0; i < num_seqs; i++) {
        int64_t np = pages_for(lens[i], page_size);
        if (np == 0) continue;
        if (np > max_pages)
            return ATTN_FAIL(ATTN_EARG, fn,
                             "%s[%d] = %d needs %lld pages but max_pages = %d", what, (int)i,
                             (int)lens[i], (long long)np, (int)max_pages);
        if (!page_table) return ATTN_FAIL(ATTN_EARG, fn, "page_table is NULL");
        const int32_t *row = page_table + (int64_t)i * max_pages;
        for (int64_t k = 0; k < np; k++)
            if (row[k] < 0 || row[k] >= num_pages)
                return ATTN_FAIL(ATTN_EARG, fn,
                                 "page_table[%d][%lld] = %d is outside the pool [0, %d)", (int)i,
                                 (long long)k, (int)row[k], (int)num_pages);
    }
    return ATTN_OK;
}

int attn_batch_check_host(const char *fn, const attn_shape *s, const attn_batch *b,
                          int64_t *num_tokens, int *any_prefix)
{
    int rc = attn_shape_check_in(fn, s);
    if (rc) return rc;
    if (!b) return ATTN_FAIL(ATTN_EARG, fn, "batch is NULL");
    if (b->num_seqs < 0) return ATTN_FAIL(ATTN_EARG, fn, "num_seqs = %d", (int)b->num_seqs);
    if (b->max_pages < 0) return ATTN_FAIL(ATTN_EARG, fn, "max_pages = %d", (int)b->max_pages);
    if (b->max_suffix < 0)
        return ATTN_FAIL(ATTN_EARG, fn, "max_suffix = %d", (int)b->max_suffix);
    if (!b->q_starts) return ATTN_FAIL(ATTN_EARG, fn, "q_starts is NULL");
    if (b->q_starts[0] != 0)
        return ATTN_FAIL(ATTN_EARG, fn, "q_starts[0] = %d, must be 0", (int)b->q_starts[0]);
    if (b->num_seqs > 0 && !b->prefix_lens) return ATTN_FAIL(ATTN_EARG, fn, "prefix_lens is NULL");
    int prefix = 0;
    for (int32_t i = 0; i < b->num_seqs; i++) {
        /* Order first: the difference of a decreasing pair can overflow int32. */
        if (b->q_starts[i + 1] < b->q_starts[i])
            return ATTN_FAIL(ATTN_EARG, fn, "q_starts[%d] = %d < q_starts[%d] = %d", (int)i + 1,
                             (int)b->q_starts[i + 1], (int)i, (int)b->q_starts[i]);
        int32_t len = b->q_starts[i + 1] - b->q_starts[i];
        if (b->max_suffix > 0 && len > b->max_suffix)
            return ATTN_FAIL(ATTN_EARG, fn, "sequence %d has %d new tokens > max_suffix = %d",
                             (int)i, (int)len, (int)b->max_suffix);
        if (b->prefix_lens[i] < 0)
            return ATTN_FAIL(ATTN_EARG, fn, "prefix_lens[%d] = %d", (int)i,
                             (int)b->prefix_lens[i]);
        if (b->prefix_lens[i] > 0) prefix = 1;
        /* Keys of a sequence (prefix + suffix) are counted in int32 by the kernels. */
        if ((int64_t)b->prefix_lens[i] + len > INT32_MAX)
            return ATTN_FAIL(ATTN_EARG, fn, "sequence %d has more than 2^31 keys", (int)i);
    }
    rc = check_pages(fn, "prefix_lens", b->num_seqs, b->prefix_lens, b->page_table,
                     b->max_pages, s->page_size, b->num_pages);
    if (rc) return rc;
    if (num_tokens) *num_tokens = b->q_starts[b->num_seqs];
    if (any_prefix) *any_prefix = prefix;
    return ATTN_OK;
}

int attn_decode_check_host(const char *fn, const attn_shape *s, int32_t num_seqs,
                           const int32_t *seq_lens, const int32_t *page_table,
                           int32_t max_pages, int32_t num_pages, int32_t *max_len)
{
    int rc = attn_shape_check_in(fn, s);
    if (rc) return rc;
    if (num_seqs < 0) return ATTN_FAIL(ATTN_EARG, fn, "num_seqs = %d", (int)num_seqs);
    if (max_pages < 0) return ATTN_FAIL(ATTN_EARG, fn, "max_pages = %d", (int)max_pages);
    if (num_seqs > 0 && !seq_lens) return ATTN_FAIL(ATTN_EARG, fn, "seq_lens is NULL");
    int32_t longest = 0;
    for (int32_t i = 0; i < num_seqs; i++) {
        if (seq_lens[i] < 0)
            return ATTN_FAIL(ATTN_EARG, fn, "seq_lens[%d] = %d", (int)i, (int)seq_lens[i]);
        if (seq_lens[i] > longest) longest = seq_lens[i];
    }
    rc = check_pages(fn, "seq_lens", num_seqs, seq_lens, page_table, max_pages, s->page_size,
                     num_pages);
    if (rc) return rc;
    if (max_len) *max_len = longest;
    return ATTN_OK;
}

int attn_slots_check_host(const char *fn, const attn_shape *s, int32_t num_tokens,
                          int32_t num_pages, const int32_t *slot_mapping)
{
    if (num_pages < 0) return ATTN_FAIL(ATTN_EARG, fn, "num_pages = %d", (int)num_pages);
    const int64_t slots = (int64_t)num_pages * s->page_size;
    for (int32_t t = 0; t < num_tokens; t++)
        if (slot_mapping[t] >= slots)
            return ATTN_FAIL(ATTN_EARG, fn,
                             "slot_mapping[%d] = %d is past the pool (num_pages * page_size = "
                             "%lld slots)", (int)t, (int)slot_mapping[t], (long long)slots);
    return ATTN_OK;
}
