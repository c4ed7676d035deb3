/* cuda_plan.c - sizes and layouts of the cuda backend; see cuda_plan.h. */
#include "cuda_plan.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static size_t align_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

/* Appends a region of `bytes` at the aligned end of *cursor; returns its offset. */
static size_t take(size_t *cursor, size_t bytes, size_t align)
{
    size_t off = align_up(*cursor, align);
    *cursor = off + bytes;
    return off;
}

void cuda_plan_format_bytes(size_t bytes, char *buf, size_t len)
{
    double b = (double)bytes;
    if (b >= 1024.0 * 1024 * 1024) snprintf(buf, len, "%.2f GiB", b / (1024.0 * 1024 * 1024));
    else if (b >= 1024.0 * 1024) snprintf(buf, len, "%.1f MiB", b / (1024.0 * 1024));
    else snprintf(buf, len, "%zu B", bytes);
}

rkv_status cuda_plan_weights(const model_config *c, cuda_weight_plan *out, char *err,
                             size_t errlen)
{
    rkv_status st = model_config_check(c, err, errlen);
    if (st != RKV_OK) return st;
    memset(out, 0, sizeof *out);
    const size_t V = (size_t)c->vocab_size, C = (size_t)c->hidden_size,
                 F = (size_t)c->intermediate_size, D = (size_t)c->head_dim;
    out->q_dim = c->num_heads * c->head_dim;
    out->kv_dim = c->num_kv_heads * c->head_dim;
    out->qkv_dim = out->q_dim + 2 * out->kv_dim;
    const size_t qkv = (size_t)out->qkv_dim, qd = (size_t)c->num_heads * D;

    size_t cur = 0;
    out->embed = take(&cur, V * C * 2, CUDA_PLAN_ALIGN);
    out->layer0 = align_up(cur, CUDA_PLAN_ALIGN);

    /* One layer block, offsets relative to its start. */
    size_t lc = 0;
    out->attn_norm = take(&lc, C * 4, CUDA_PLAN_ALIGN);
    out->wqkv = take(&lc, qkv * C * 2, CUDA_PLAN_ALIGN);
    out->bqkv = c->qkv_bias ? take(&lc, qkv * 4, CUDA_PLAN_ALIGN) : CUDA_PLAN_NO_TENSOR;
    out->wo = take(&lc, C * qd * 2, CUDA_PLAN_ALIGN);
    out->mlp_norm = take(&lc, C * 4, CUDA_PLAN_ALIGN);
    out->wgate_up = take(&lc, 2 * F * C * 2, CUDA_PLAN_ALIGN);
    out->wdown = take(&lc, C * F * 2, CUDA_PLAN_ALIGN);
    out->layer_stride = align_up(lc, CUDA_PLAN_ALIGN);

    cur = out->layer0 + (size_t)c->num_layers * out->layer_stride;
    out->final_norm = take(&cur, C * 4, CUDA_PLAN_ALIGN);
    out->lm_head = c->tie_word_embeddings ? out->embed : take(&cur, V * C * 2, CUDA_PLAN_ALIGN);
    out->total_bytes = align_up(cur, CUDA_PLAN_ALIGN);
    return RKV_OK;
}

rkv_status cuda_plan_activations(const model_config *c, int32_t max_tokens, int32_t max_seqs,
                                 int32_t max_position, size_t decode_ws_bytes,
                                 cuda_act_plan *out, char *err, size_t errlen)
{
    rkv_status st = model_config_check(c, err, errlen);
    if (st != RKV_OK) return st;
    if (max_tokens < 1 || max_seqs < 1 || max_seqs > max_tokens)
        return rkv_fail(RKV_EINVAL, err, errlen,
                    "cuda_plan_activations: need 1 <= max_seqs (%d) <= max_tokens (%d)",
                    (int)max_seqs, (int)max_tokens);
    if (max_position < 1)
        return rkv_fail(RKV_EINVAL, err, errlen, "cuda_plan_activations: max_position %d < 1",
                    (int)max_position);
    memset(out, 0, sizeof *out);
    out->max_tokens = max_tokens;
    out->max_seqs = max_seqs;
    const size_t T = (size_t)max_tokens, B = (size_t)max_seqs, C = (size_t)c->hidden_size,
                 F = (size_t)c->intermediate_size, D = (size_t)c->head_dim,
                 V = (size_t)c->vocab_size;
    const size_t qd = (size_t)c->num_heads * D, kvd = (size_t)c->num_kv_heads * D;
    size_t proj_cols = qd + 2 * kvd;
    if (2 * F > proj_cols) proj_cols = 2 * F;
    if (C > proj_cols) proj_cols = C;

    size_t cur = 0;
    out->resid = take(&cur, T * C * 4, CUDA_PLAN_ALIGN);
    out->normed = take(&cur, T * C * 2, CUDA_PLAN_ALIGN);
    out->proj = take(&cur, T * proj_cols * 4, CUDA_PLAN_ALIGN);
    out->q = take(&cur, T * qd * 2, CUDA_PLAN_ALIGN);
    out->k = take(&cur, T * kvd * 2, CUDA_PLAN_ALIGN);
    out->v = take(&cur, T * kvd * 2, CUDA_PLAN_ALIGN);
    out->attn_out = take(&cur, T * qd * 2, CUDA_PLAN_ALIGN);
    out->act = take(&cur, T * F * 2, CUDA_PLAN_ALIGN);
    out->head_in = take(&cur, B * C * 2, CUDA_PLAN_ALIGN);
    out->logits = take(&cur, B * V * 4, CUDA_PLAN_ALIGN);
    out->rope = take(&cur, (size_t)max_position * (D / 2) * 8, CUDA_PLAN_ALIGN);
    out->decode_ws = take(&cur, decode_ws_bytes, CUDA_PLAN_ALIGN);
    out->total_bytes = align_up(cur, CUDA_PLAN_ALIGN);
    return RKV_OK;
}

size_t cuda_plan_page_bytes(const model_config *c, int32_t page_size, int elem_bytes)
{
    return (size_t)c->num_layers * 2 * (size_t)page_size * (size_t)c->num_kv_heads *
           (size_t)c->head_dim * (size_t)elem_bytes;
}

rkv_status cuda_plan_memory(const cuda_mem_request *r, cuda_mem_plan *out, char *err,
                            size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (!(r->mem_fraction > 0.0 && r->mem_fraction <= 1.0))
        return rkv_fail(RKV_EINVAL, err, errlen,
                    "--mem-fraction %g: must be in (0, 1] (share of free device memory)",
                    r->mem_fraction);
    if (r->page_bytes == 0)
        return rkv_fail(RKV_EINVAL, err, errlen, "cuda_plan_memory: page size of 0 bytes");
    out->budget = (size_t)((double)r->free_bytes * r->mem_fraction);
    char bud[32], a[32], b[32];
    cuda_plan_format_bytes(out->budget, bud, sizeof bud);

    /* The parts in the order they are allocated; the first that overflows is
     * the one the message names. */
    if (r->weight_bytes > out->budget) {
        cuda_plan_format_bytes(r->weight_bytes, a, sizeof a);
        return rkv_fail(RKV_ENOSPC, err, errlen,
                    "cuda: the weights (%s in bf16) do not fit in %s (%.0f%% of the free "
                    "device memory): choose a smaller --model or raise --mem-fraction",
                    a, bud, r->mem_fraction * 100.0);
    }
    size_t used = r->weight_bytes;
    if (r->act_bytes > out->budget - used) {
        cuda_plan_format_bytes(r->act_bytes, a, sizeof a);
        cuda_plan_format_bytes(out->budget - used, b, sizeof b);
        return rkv_fail(RKV_ENOSPC, err, errlen,
                    "cuda: the activations for %d tokens per step (%s) do not fit in the %s "
                    "left after the weights: lower --max-batched-tokens or raise "
                    "--mem-fraction",
                    (int)r->act_tokens, a, b);
    }
    used += r->act_bytes;
    if (r->reserve_bytes > out->budget - used) {
        cuda_plan_format_bytes(r->reserve_bytes, a, sizeof a);
        cuda_plan_format_bytes(out->budget - used, b, sizeof b);
        return rkv_fail(RKV_ENOSPC, err, errlen,
                    "cuda: the cuBLAS/graph workspace (%s) does not fit in the %s left after "
                    "weights and activations: lower --max-batched-tokens or raise "
                    "--mem-fraction",
                    a, b);
    }
    used += r->reserve_bytes;
    out->fixed_bytes = used;
    const size_t left = out->budget - used;
    const int64_t fit = (int64_t)(left / r->page_bytes);
    cuda_plan_format_bytes(left, b, sizeof b);
    if (r->num_pages > 0) {
        if (r->num_pages > fit) {
            cuda_plan_format_bytes((size_t)r->num_pages * r->page_bytes, a, sizeof a);
            return rkv_fail(RKV_ENOSPC, err, errlen,
                        "cuda: the KV pool of %lld pages (%s) does not fit in the %s left "
                        "after weights and activations (room for %lld pages): lower "
                        "--num-pages or raise --mem-fraction",
                        (long long)r->num_pages, a, b, (long long)fit);
        }
        out->num_pages = r->num_pages;
    } else {
        if (fit < r->min_pages || fit < 1) {
            return rkv_fail(RKV_ENOSPC, err, errlen,
                        "cuda: only %lld KV pages fit in the %s left after weights and "
                        "activations, at least %lld needed: lower --max-batched-tokens, "
                        "choose a smaller --model or raise --mem-fraction",
                        (long long)fit, b, (long long)(r->min_pages > 1 ? r->min_pages : 1));
        }
        /* Page ids are int32 throughout the engine. */
        out->num_pages = fit > INT32_MAX ? INT32_MAX : fit;
    }
    out->kv_bytes = (size_t)out->num_pages * r->page_bytes;
    return RKV_OK;
}

rkv_status cuda_plan_step_layout(int32_t num_tokens, int32_t num_seqs, int32_t stride,
                                 size_t capacity, cuda_step_layout *out, char *err,
                                 size_t errlen)
{
    if (num_tokens < 0 || num_seqs < 0 || stride < 0)
        return rkv_fail(RKV_EINVAL, err, errlen,
                    "cuda step: negative size (tokens %d, sequences %d, page stride %d)",
                    (int)num_tokens, (int)num_seqs, (int)stride);
    memset(out, 0, sizeof *out);
    out->num_tokens = num_tokens;
    out->num_seqs = num_seqs;
    out->stride = stride;
    const size_t T = (size_t)num_tokens, B = (size_t)num_seqs, A = 16;
    size_t cur = 0;
    out->token_ids = take(&cur, T * 4, A);
    out->positions = take(&cur, T * 4, A);
    out->slots = take(&cur, T * 4, A);
    out->q_starts = take(&cur, (B + 1) * 4, A);
    out->prefix_lens = take(&cur, B * 4, A);
    out->seq_lens = take(&cur, B * 4, A);
    out->sample_rows = take(&cur, B * 4, A);
    out->sample_steps = take(&cur, B * 4, A);
    out->top_k = take(&cur, B * 4, A);
    out->temperature = take(&cur, B * 4, A);
    out->top_p = take(&cur, B * 4, A);
    out->seeds = take(&cur, B * 8, A);
    out->page_table = take(&cur, B * (size_t)stride * 4, A);
    out->bytes = align_up(cur, A);
    if (out->bytes > capacity)
        return rkv_fail(RKV_ENOSPC, err, errlen,
                    "cuda step: inputs of %d tokens, %d sequences and %d pages per sequence "
                    "need %zu bytes, the step buffer holds %zu",
                    (int)num_tokens, (int)num_seqs, (int)stride, out->bytes, capacity);
    return RKV_OK;
}

int32_t cuda_plan_graph_bucket(int32_t bs, int32_t max_bs)
{
    if (bs < 1 || bs > max_bs) return -1;
    int32_t b;
    if (bs <= 8) {
        b = 1;
        while (b < bs) b *= 2;
    } else if (bs <= 64) {
        b = (bs + 7) / 8 * 8;
    } else if (bs <= 128) {
        b = (bs + 15) / 16 * 16;
    } else {
        b = (bs + 31) / 32 * 32;
    }
    /* The top bucket is max_bs itself, so every bs <= max_bs has one. */
    return b > max_bs ? max_bs : b;
}

int32_t cuda_plan_graph_buckets(int32_t max_bs, int32_t *out, int32_t cap)
{
    int32_t n = 0, last = 0;
    for (int32_t bs = 1; bs <= max_bs; bs++) {
        int32_t b = cuda_plan_graph_bucket(bs, max_bs);
        if (b != last) {
            if (n < cap) out[n] = b;
            n++;
            last = b;
        }
    }
    return n < cap ? n : cap;
}

int32_t cuda_plan_stride_bucket(int32_t max_pages, int32_t limit)
{
    if (max_pages > limit) return -1;
    int32_t s = 4;
    while (s < max_pages) s *= 2;
    return s > limit ? limit : s;
}

void cuda_plan_step_shape(int graph_level, int decode, int32_t num_tokens, int32_t num_seqs,
                          int32_t max_suffix, int32_t used_pages, int32_t max_tokens,
                          int32_t max_seqs, int32_t max_stride, int32_t mixed_max_tokens,
                          cuda_step_shape *out)
{
    cuda_step_shape eager = {0, num_tokens, num_seqs, used_pages, max_suffix};
    *out = eager;
    int32_t tokens, seqs, bound = 1;
    if (decode && graph_level >= 1) {
        seqs = cuda_plan_graph_bucket(num_seqs, max_seqs);
        tokens = seqs;
    } else if (!decode && graph_level >= 2 && num_tokens <= mixed_max_tokens) {
        tokens = 16;
        while (tokens < num_tokens) tokens *= 2;
        seqs = cuda_plan_graph_bucket(num_seqs + (tokens > num_tokens), max_seqs);
        if (seqs > tokens) seqs = -1;
        const int32_t pad_rows = tokens - num_tokens;
        while (bound < max_suffix || bound < pad_rows) bound *= 2;
        if (bound > tokens) bound = tokens;
    } else {
        return;
    }
    const int32_t stride = cuda_plan_stride_bucket(used_pages, max_stride);
    if (seqs < 1 || stride < 1 || tokens > max_tokens) return;
    out->graph = 1;
    out->tokens = tokens;
    out->seqs = seqs;
    out->stride = stride;
    out->suffix_bound = decode ? 1 : bound;
}

void cuda_plan_pad_q_starts(const int32_t *q_starts, int32_t num_seqs, int32_t num_tokens,
                            int32_t padded_seqs, int32_t padded_tokens, int32_t *out)
{
    for (int32_t i = 0; i <= padded_seqs; i++) {
        if (i <= num_seqs) out[i] = q_starts[i];
        else if (i == padded_seqs) out[i] = padded_tokens;
        else out[i] = num_tokens + (i - num_seqs) < padded_tokens ? num_tokens + (i - num_seqs)
                                                                  : padded_tokens;
    }
}

/* K/V rows a query tile [r0, r1) of a sequence with prefix p reads: its last
 * row sees the prefix and the suffix rows up to itself (causal). */
static int64_t tile_kv_rows(int32_t prefix, int32_t r1) { return (int64_t)prefix + r1; }

rkv_status cuda_plan_mixed(const int32_t *q_starts, const int32_t *prefix_lens, int32_t num_seqs,
                           int32_t tile_rows, int32_t group, int32_t *decode_seqs,
                           int32_t *tile_seq, int32_t *tile_row, int32_t cap_tiles,
                           cuda_mixed_plan *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (num_seqs < 0 || tile_rows < 1 || group < 1 || cap_tiles < 0)
        return rkv_fail(RKV_EINVAL, err, errlen,
                        "cuda_plan_mixed: need num_seqs >= 0 (%d), tile_rows >= 1 (%d), "
                        "group >= 1 (%d), cap_tiles >= 0 (%d)",
                        (int)num_seqs, (int)tile_rows, (int)group, (int)cap_tiles);
    if (num_seqs > 0 && q_starts[0] != 0)
        return rkv_fail(RKV_EINVAL, err, errlen, "cuda_plan_mixed: q_starts[0] is %d, not 0",
                        (int)q_starts[0]);
    int32_t max_suffix = 0;
    for (int32_t i = 0; i < num_seqs; i++) {
        const int32_t s = q_starts[i + 1] - q_starts[i];
        if (s < 1 || prefix_lens[i] < 0)
            return rkv_fail(RKV_EINVAL, err, errlen,
                            "cuda_plan_mixed: sequence %d has %d new rows and prefix %d "
                            "(need >= 1 and >= 0)",
                            (int)i, (int)s, (int)prefix_lens[i]);
        if (s > max_suffix) max_suffix = s;
    }
    out->tile_rows = tile_rows;
    const int32_t today_tiles = (max_suffix + tile_rows - 1) / tile_rows;
    out->today_ctas = (int64_t)num_seqs * today_tiles;
    for (int32_t i = 0; i < num_seqs; i++) {
        const int32_t s = q_starts[i + 1] - q_starts[i], p = prefix_lens[i];
        /* Today: every tile with a row of this sequence reads up to its last
         * real row; tiles past s exit before reading. */
        for (int32_t r0 = 0; r0 < s; r0 += tile_rows)
            out->today_kv_rows += tile_kv_rows(p, r0 + tile_rows < s ? r0 + tile_rows : s);
        if (s == 1) {
            decode_seqs[out->num_decode++] = i;
            /* One CTA row per KV head reads the context for all `group` heads. */
            const int64_t ctx = tile_kv_rows(p, 1);
            out->planned_kv_rows += (ctx + group - 1) / group;
            continue;
        }
        out->num_prefill++;
        for (int32_t r0 = 0; r0 < s; r0 += tile_rows) {
            if (out->num_tiles == cap_tiles)
                return rkv_fail(RKV_ENOSPC, err, errlen,
                                "cuda_plan_mixed: more than %d prefill tiles of %d rows",
                                (int)cap_tiles, (int)tile_rows);
            tile_seq[out->num_tiles] = i;
            tile_row[out->num_tiles] = r0;
            out->num_tiles++;
            out->planned_kv_rows += tile_kv_rows(p, r0 + tile_rows < s ? r0 + tile_rows : s);
        }
    }
    return RKV_OK;
}

void cuda_plan_mixed_gather(const cuda_mixed_plan *plan, const int32_t *q_starts,
                            const int32_t *prefix_lens, const int32_t *page_table,
                            int32_t stride, int32_t num_seqs, const int32_t *decode_seqs,
                            int32_t *pq_starts, int32_t *pprefix, int32_t *ptable,
                            int32_t *prow, int32_t *dseq_lens, int32_t *dtable, int32_t *drow)
{
    int32_t np = 0, nd = 0;
    pq_starts[0] = 0;
    for (int32_t i = 0; i < num_seqs; i++) {
        const int32_t s = q_starts[i + 1] - q_starts[i];
        const int32_t *row = page_table + (size_t)i * stride;
        if (nd < plan->num_decode && decode_seqs[nd] == i) {
            dseq_lens[nd] = prefix_lens[i] + 1;
            memcpy(dtable + (size_t)nd * stride, row, (size_t)stride * sizeof *row);
            drow[nd] = q_starts[i];
            nd++;
            continue;
        }
        pq_starts[np + 1] = pq_starts[np] + s;
        pprefix[np] = prefix_lens[i];
        memcpy(ptable + (size_t)np * stride, row, (size_t)stride * sizeof *row);
        prow[np] = i;
        np++;
    }
}
