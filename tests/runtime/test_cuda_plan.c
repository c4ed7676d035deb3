/* test_cuda_plan.c - the cuda backend's host-side planning (suite runtime, no GPU). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <math.h>

#include "check_run.h"
#include "attention.h"
#include "cuda_plan.h"

typedef struct region {
    size_t off, bytes;
    const char *name;
} region;

/* Every region aligned, inside [0, total), and no two overlap. */
static void check_regions(const region *r, int n, size_t total, size_t align)
{
    for (int i = 0; i < n; i++) {
        ck_assert_msg(r[i].off % align == 0, "%s at %zu not %zu-aligned", r[i].name, r[i].off,
                      align);
        ck_assert_msg(r[i].off + r[i].bytes <= total, "%s [%zu, +%zu) past total %zu",
                      r[i].name, r[i].off, r[i].bytes, total);
        for (int j = 0; j < i; j++) {
            int disjoint = r[i].off + r[i].bytes <= r[j].off || r[j].off + r[j].bytes <= r[i].off;
            ck_assert_msg(disjoint || r[i].bytes == 0 || r[j].bytes == 0, "%s overlaps %s",
                          r[i].name, r[j].name);
        }
    }
}

static model_config preset(const char *name)
{
    model_config c;
    char err[256];
    ck_assert_int_eq(model_config_preset(name, &c, err, sizeof err), RKV_OK);
    return c;
}

START_TEST(weights_layout_every_preset)
{
    const char *const *names = model_config_preset_names();
    for (int p = 0; names[p]; p++) {
        model_config c = preset(names[p]);
        cuda_weight_plan w;
        char err[256];
        ck_assert_int_eq(cuda_plan_weights(&c, &w, err, sizeof err), RKV_OK);
        const size_t V = c.vocab_size, C = c.hidden_size, F = c.intermediate_size,
                     D = c.head_dim, Hq = c.num_heads, Hkv = c.num_kv_heads;
        ck_assert_int_eq(w.qkv_dim, (int)((Hq + 2 * Hkv) * D));
        /* Regions: globals plus the first and the last layer block (the middle
         * ones are the same block shifted by layer_stride). */
        region r[32];
        int n = 0;
        r[n++] = (region){w.embed, V * C * 2, "embed"};
        r[n++] = (region){w.final_norm, C * 4, "final_norm"};
        if (!c.tie_word_embeddings) r[n++] = (region){w.lm_head, V * C * 2, "lm_head"};
        else ck_assert_uint_eq(w.lm_head, w.embed);
        size_t raw_layer = 0;
        for (int l = 0; l < c.num_layers; l += c.num_layers - 1) {
            size_t base = w.layer0 + (size_t)l * w.layer_stride;
            r[n++] = (region){base + w.attn_norm, C * 4, "attn_norm"};
            r[n++] = (region){base + w.wqkv, (size_t)w.qkv_dim * C * 2, "wqkv"};
            if (c.qkv_bias) r[n++] = (region){base + w.bqkv, (size_t)w.qkv_dim * 4, "bqkv"};
            else ck_assert_uint_eq(w.bqkv, CUDA_PLAN_NO_TENSOR);
            r[n++] = (region){base + w.wo, C * Hq * D * 2, "wo"};
            r[n++] = (region){base + w.mlp_norm, C * 4, "mlp_norm"};
            r[n++] = (region){base + w.wgate_up, 2 * F * C * 2, "wgate_up"};
            r[n++] = (region){base + w.wdown, C * F * 2, "wdown"};
            if (l == c.num_layers - 1) break;
        }
        check_regions(r, n, w.total_bytes, CUDA_PLAN_ALIGN);
        ck_assert_uint_ge(w.layer_stride, w.wdown + C * F * 2);
        /* Bytes against an independent count: matrices bf16, vectors fp32. */
        raw_layer = (size_t)w.qkv_dim * C * 2 + C * Hq * D * 2 + 3 * F * C * 2 + 2 * C * 4 +
                    (c.qkv_bias ? (size_t)w.qkv_dim * 4 : 0);
        size_t raw = V * C * 2 * (c.tie_word_embeddings ? 1 : 2) + C * 4 +
                     (size_t)c.num_layers * raw_layer;
        ck_assert_uint_ge(w.total_bytes, raw);
        /* Padding is at most one alignment unit per tensor. */
        ck_assert_uint_le(w.total_bytes, raw + (size_t)(c.num_layers * 8 + 4) * CUDA_PLAN_ALIGN);
        /* And the count agrees with the config's own parameter count. */
        int64_t params = model_config_num_params(&c);
        size_t vec = C + (size_t)c.num_layers * (2 * C + (c.qkv_bias ? (size_t)w.qkv_dim : 0));
        ck_assert_uint_eq(raw, ((size_t)params - vec) * 2 + vec * 4);
    }
}
END_TEST

START_TEST(activations_layout)
{
    model_config c = preset("qwen2.5-3b");
    cuda_act_plan a;
    char err[256];
    ck_assert_int_eq(cuda_plan_activations(&c, 1024, 32, 4096, 12345, &a, err, sizeof err),
                     RKV_OK);
    const size_t T = 1024, B = 32, C = c.hidden_size, F = c.intermediate_size, D = c.head_dim,
                 qd = c.num_heads * D, kvd = c.num_kv_heads * D;
    region r[] = {
        {a.resid, T * C * 4, "resid"},        {a.normed, T * C * 2, "normed"},
        {a.proj, T * 2 * F * 4, "proj"},      {a.q, T * qd * 2, "q"},
        {a.k, T * kvd * 2, "k"},              {a.v, T * kvd * 2, "v"},
        {a.attn_out, T * qd * 2, "attn_out"}, {a.act, T * F * 2, "act"},
        {a.head_in, B * C * 2, "head_in"},    {a.logits, B * (size_t)c.vocab_size * 4, "logits"},
        {a.rope, 4096 * D / 2 * 8, "rope"},   {a.decode_ws, 12345, "decode_ws"},
    };
    check_regions(r, (int)(sizeof r / sizeof r[0]), a.total_bytes, CUDA_PLAN_ALIGN);
    /* proj holds the widest GEMM output: qkv, gate_up or C. */
    ck_assert_uint_ge(2 * F, qd + 2 * kvd);

    /* More tokens never need less memory. */
    cuda_act_plan a2;
    ck_assert_int_eq(cuda_plan_activations(&c, 2048, 32, 4096, 12345, &a2, err, sizeof err),
                     RKV_OK);
    ck_assert_uint_gt(a2.total_bytes, a.total_bytes);

    ck_assert_int_eq(cuda_plan_activations(&c, 8, 16, 4096, 0, &a, err, sizeof err), RKV_EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "max_seqs"));
    ck_assert_int_eq(cuda_plan_activations(&c, 0, 0, 4096, 0, &a, err, sizeof err), RKV_EINVAL);
    c.head_dim = 96;
    ck_assert_int_eq(cuda_plan_activations(&c, 8, 1, 4096, 0, &a, err, sizeof err), RKV_EINVAL);
}
END_TEST

static cuda_mem_request base_request(void)
{
    cuda_mem_request r = {
        .free_bytes = (size_t)80 << 30, .mem_fraction = 0.9, .weight_bytes = (size_t)6 << 30,
        .act_bytes = (size_t)2 << 30, .act_tokens = 8192, .reserve_bytes = (size_t)512 << 20,
        .page_bytes = (size_t)16 * 36 * 2 * 2 * 128 * 2, .num_pages = 0, .min_pages = 600,
    };
    return r;
}

START_TEST(memory_fits_and_pool_takes_the_rest)
{
    cuda_mem_request r = base_request();
    cuda_mem_plan m;
    char err[512];
    ck_assert_int_eq(cuda_plan_memory(&r, &m, err, sizeof err), RKV_OK);
    size_t budget = (size_t)((double)r.free_bytes * 0.9);
    ck_assert_uint_eq(m.budget, budget);
    ck_assert_uint_eq(m.fixed_bytes, r.weight_bytes + r.act_bytes + r.reserve_bytes);
    size_t left = budget - m.fixed_bytes;
    ck_assert_int_eq(m.num_pages, (int64_t)(left / r.page_bytes));
    ck_assert_uint_eq(m.kv_bytes, (size_t)m.num_pages * r.page_bytes);
    ck_assert_uint_le(m.fixed_bytes + m.kv_bytes, budget);
    ck_assert_uint_gt(m.fixed_bytes + m.kv_bytes + r.page_bytes, budget); /* nothing wasted */

    /* An explicit pool size is honoured exactly when it fits. */
    r.num_pages = 1000;
    ck_assert_int_eq(cuda_plan_memory(&r, &m, err, sizeof err), RKV_OK);
    ck_assert_int_eq(m.num_pages, 1000);
    /* A smaller fraction gives a smaller pool. */
    r.num_pages = 0;
    cuda_mem_plan m2;
    r.mem_fraction = 0.5;
    ck_assert_int_eq(cuda_plan_memory(&r, &m2, err, sizeof err), RKV_OK);
    ck_assert_int_lt(m2.num_pages, (int64_t)(left / r.page_bytes));
}
END_TEST

START_TEST(memory_names_what_did_not_fit)
{
    cuda_mem_plan m;
    char err[512];
    cuda_mem_request r = base_request();
    r.weight_bytes = (size_t)100 << 30;
    ck_assert_int_eq(cuda_plan_memory(&r, &m, err, sizeof err), RKV_ENOSPC);
    ck_assert_ptr_nonnull(strstr(err, "weights"));
    ck_assert_ptr_nonnull(strstr(err, "--model"));

    r = base_request();
    r.act_bytes = (size_t)70 << 30;
    ck_assert_int_eq(cuda_plan_memory(&r, &m, err, sizeof err), RKV_ENOSPC);
    ck_assert_ptr_nonnull(strstr(err, "activations for 8192 tokens"));
    ck_assert_ptr_nonnull(strstr(err, "--max-batched-tokens"));

    r = base_request();
    r.reserve_bytes = (size_t)70 << 30;
    ck_assert_int_eq(cuda_plan_memory(&r, &m, err, sizeof err), RKV_ENOSPC);
    ck_assert_ptr_nonnull(strstr(err, "workspace"));

    r = base_request();
    r.num_pages = 100000000;
    ck_assert_int_eq(cuda_plan_memory(&r, &m, err, sizeof err), RKV_ENOSPC);
    ck_assert_ptr_nonnull(strstr(err, "--num-pages"));
    ck_assert_ptr_nonnull(strstr(err, "100000000 pages"));

    /* Auto-sized pool smaller than the minimum. */
    r = base_request();
    r.free_bytes = (size_t)9 << 30;
    r.mem_fraction = 1.0;
    r.min_pages = 1 << 20;
    ck_assert_int_eq(cuda_plan_memory(&r, &m, err, sizeof err), RKV_ENOSPC);
    ck_assert_ptr_nonnull(strstr(err, "KV pages fit"));

    r = base_request();
    r.mem_fraction = 0.0;
    ck_assert_int_eq(cuda_plan_memory(&r, &m, err, sizeof err), RKV_EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "--mem-fraction"));
    r.mem_fraction = 1.5;
    ck_assert_int_eq(cuda_plan_memory(&r, &m, err, sizeof err), RKV_EINVAL);
    r = base_request();
    r.page_bytes = 0;
    ck_assert_int_eq(cuda_plan_memory(&r, &m, err, sizeof err), RKV_EINVAL);
}
END_TEST

START_TEST(page_bytes_matches_config)
{
    model_config c = preset("qwen2.5-3b");
    ck_assert_uint_eq(cuda_plan_page_bytes(&c, 16, 2),
                      (size_t)16 * (size_t)model_config_kv_bytes_per_token(&c, 2));
    ck_assert_uint_eq(cuda_plan_page_bytes(&c, 1, 2), (size_t)36 * 2 * 2 * 128 * 2);
}
END_TEST

START_TEST(step_layout_packs_every_input)
{
    /* A seeded sweep of shapes; the seed is fixed, printed on failure. */
    unsigned seed = 20261123;
    srand(seed);
    for (int it = 0; it < 500; it++) {
        int32_t B = 1 + rand() % 300, T = B + rand() % 2000, S = rand() % 513;
        cuda_step_layout l;
        char err[256];
        ck_assert_msg(cuda_plan_step_layout(T, B, S, (size_t)-1, &l, err, sizeof err) == RKV_OK,
                      "seed %u it %d: %s", seed, it, err);
        const size_t t = T, b = B;
        region r[] = {
            {l.token_ids, t * 4, "token_ids"},     {l.positions, t * 4, "positions"},
            {l.slots, t * 4, "slots"},             {l.q_starts, (b + 1) * 4, "q_starts"},
            {l.prefix_lens, b * 4, "prefix_lens"}, {l.seq_lens, b * 4, "seq_lens"},
            {l.sample_rows, b * 4, "sample_rows"}, {l.sample_steps, b * 4, "sample_steps"},
            {l.top_k, b * 4, "top_k"},             {l.temperature, b * 4, "temperature"},
            {l.top_p, b * 4, "top_p"},             {l.seeds, b * 8, "seeds"},
            {l.page_table, b * (size_t)S * 4, "page_table"},
        };
        check_regions(r, (int)(sizeof r / sizeof r[0]), l.bytes, 16);
        /* Tight: only alignment padding beyond the payload. */
        size_t payload = t * 12 + (b + 1) * 4 + b * 36 + b * (size_t)S * 4;
        ck_assert_uint_le(l.bytes, payload + 13 * 16);
        /* Exactly at capacity fits; one byte less does not, and names the sizes. */
        cuda_step_layout l2;
        ck_assert_int_eq(cuda_plan_step_layout(T, B, S, l.bytes, &l2, err, sizeof err), RKV_OK);
        ck_assert_int_eq(cuda_plan_step_layout(T, B, S, l.bytes - 1, &l2, err, sizeof err),
                         RKV_ENOSPC);
        ck_assert_ptr_nonnull(strstr(err, "sequences"));
    }
    cuda_step_layout l;
    char err[256];
    ck_assert_int_eq(cuda_plan_step_layout(-1, 1, 1, 1 << 20, &l, err, sizeof err), RKV_EINVAL);
}
END_TEST

START_TEST(graph_buckets)
{
    for (int32_t max_bs = 1; max_bs <= 300; max_bs++) {
        int32_t list[128];
        int32_t n = cuda_plan_graph_buckets(max_bs, list, 128);
        ck_assert_int_ge(n, 1);
        ck_assert_int_eq(list[n - 1], max_bs); /* the largest batch has a graph */
        for (int i = 1; i < n; i++) ck_assert_int_lt(list[i - 1], list[i]);
        int32_t prev = 0;
        for (int32_t bs = 1; bs <= max_bs; bs++) {
            int32_t b = cuda_plan_graph_bucket(bs, max_bs);
            ck_assert_int_ge(b, bs);
            ck_assert_int_ge(b, prev); /* monotone */
            prev = b;
            int found = 0;
            for (int i = 0; i < n; i++) found |= list[i] == b;
            ck_assert_msg(found, "bucket %d of bs %d not listed (max %d)", b, bs, max_bs);
            /* Padding waste below the bucket granularity: doubling up to 8,
             * then steps of 8, 16, 32. */
            int32_t gran = bs <= 8 ? bs : bs <= 64 ? 8 : bs <= 128 ? 16 : 32;
            ck_assert_msg(b - bs < gran, "bs %d -> %d", bs, b);
        }
        ck_assert_int_eq(cuda_plan_graph_bucket(max_bs + 1, max_bs), -1);
        ck_assert_int_eq(cuda_plan_graph_bucket(0, max_bs), -1);
    }
    /* Few graphs: 256 sequences need no more than 20 captures. */
    int32_t list[128];
    ck_assert_int_le(cuda_plan_graph_buckets(256, list, 128), 20);
    ck_assert_int_eq(cuda_plan_graph_bucket(3, 256), 4);
    ck_assert_int_eq(cuda_plan_graph_bucket(9, 256), 16);
    ck_assert_int_eq(cuda_plan_graph_bucket(65, 256), 80);
    ck_assert_int_eq(cuda_plan_graph_bucket(129, 256), 160);
}
END_TEST

START_TEST(stride_buckets)
{
    for (int32_t p = 0; p <= 2048; p++) {
        int32_t s = cuda_plan_stride_bucket(p, 2048);
        ck_assert_int_ge(s, p);
        ck_assert_int_ge(s, 4);
        ck_assert_int_eq(s & (s - 1), 0);
        ck_assert(s < 2 * p || s == 4);
    }
    ck_assert_int_eq(cuda_plan_stride_bucket(2049, 2048), -1);
    ck_assert_int_eq(cuda_plan_stride_bucket(1500, 1500), 1500); /* capped, still >= p */
}
END_TEST

START_TEST(step_shapes_and_padding)
{
    unsigned seed = 77123;
    srand(seed);
    const int32_t max_tokens = 8192, max_seqs = 256, max_stride = 2048, mixed_max = 256;
    int graphs[3] = {0, 0, 0};
    for (int it = 0; it < 4000; it++) {
        const int level = rand() % 3, decode = rand() % 2;
        int32_t B = 1 + rand() % 300, T = decode ? B : B + rand() % (rand() % 2 ? 64 : 600);
        if (T > max_tokens) T = max_tokens;
        if (B > T) B = T;
        /* A random partition of T rows into B sequences of >= 1 row. */
        int32_t qs[1024];
        qs[0] = 0;
        int32_t left = T - B, max_suffix = 0;
        for (int32_t i = 0; i < B; i++) {
            int32_t extra = i == B - 1 ? left : (left ? rand() % (left + 1) : 0);
            left -= extra;
            qs[i + 1] = qs[i] + 1 + extra;
            if (1 + extra > max_suffix) max_suffix = 1 + extra;
        }
        const int32_t used = 1 + rand() % 2100;
        cuda_step_shape sh;
        cuda_plan_step_shape(level, decode, T, B, max_suffix, used, max_tokens, max_seqs,
                             max_stride, mixed_max, &sh);
        if (!sh.graph) {
            /* Eager: the batch as it is. */
            ck_assert(sh.tokens == T && sh.seqs == B && sh.stride == used);
            ck_assert_msg(level == 0 || B > max_seqs || used > max_stride || (!decode && level < 2) ||
                              (!decode && T > mixed_max) || (!decode && B + 1 > max_seqs),
                          "seed %u it %d: level %d decode %d T %d B %d used %d refused", seed, it,
                          level, decode, T, B, used);
            continue;
        }
        graphs[level]++;
        ck_assert_int_ge(level, decode ? 1 : 2);
        ck_assert(sh.tokens >= T && sh.seqs >= B && sh.stride >= used);
        ck_assert(sh.tokens <= max_tokens && sh.seqs <= max_seqs && sh.stride <= max_stride);
        ck_assert_int_le(sh.seqs, sh.tokens);
        if (decode) {
            ck_assert_int_eq(sh.tokens, sh.seqs);
            ck_assert_int_eq(sh.suffix_bound, 1);
        } else {
            ck_assert_int_ge(sh.tokens, 16);
            ck_assert_int_eq(sh.tokens & (sh.tokens - 1), 0);
            ck_assert_int_lt(sh.tokens, 2 * (T > 16 ? T : 16));
            if (sh.tokens > T) ck_assert_int_gt(sh.seqs, B); /* someone owns the padding */
            ck_assert(sh.suffix_bound >= max_suffix && sh.suffix_bound <= sh.tokens);
        }
        /* The padded q_starts: the batch's, then padding sequences to Tp. */
        int32_t pq[1024];
        cuda_plan_pad_q_starts(qs, B, T, sh.seqs, sh.tokens, pq);
        /* (Plain loops, one assertion: Check's per-assertion cost adds up.) */
        int same = 1, bad_pad = -1;
        for (int32_t i = 0; i <= B; i++) same &= pq[i] == qs[i];
        for (int32_t i = B; i < sh.seqs; i++)
            if (pq[i] > pq[i + 1] || pq[i + 1] - pq[i] > sh.suffix_bound) bad_pad = i;
        ck_assert_msg(same && pq[sh.seqs] == sh.tokens && bad_pad < 0,
                      "seed %u it %d: padded q_starts wrong (padding sequence %d, bound %d)",
                      seed, it, bad_pad, sh.suffix_bound);
    }
    ck_assert_int_eq(graphs[0], 0);
    ck_assert_int_gt(graphs[1], 50); /* decode graphs at level 1 */
    ck_assert_int_gt(graphs[2], 50);
    /* Level 1 never captures a mixed step; level 2 stops at the mixed limit. */
    cuda_step_shape sh;
    cuda_plan_step_shape(1, 0, 40, 8, 10, 4, max_tokens, max_seqs, max_stride, mixed_max, &sh);
    ck_assert_int_eq(sh.graph, 0);
    cuda_plan_step_shape(2, 0, 257, 8, 200, 4, max_tokens, max_seqs, max_stride, mixed_max, &sh);
    ck_assert_int_eq(sh.graph, 0);
    cuda_plan_step_shape(2, 0, 40, 8, 10, 4, max_tokens, max_seqs, max_stride, mixed_max, &sh);
    ck_assert(sh.graph && sh.tokens == 64 && sh.seqs == 16 && sh.stride == 4);
    ck_assert_int_eq(sh.suffix_bound, 32); /* 24 padding rows in one sequence at most */
}
END_TEST

/* ---- mixed steps ------------------------------------------------------------ */

static uint64_t mix_rng = 0x9e3779b97f4a7c15ull;
static uint32_t mix_next(void)
{
    mix_rng ^= mix_rng << 13;
    mix_rng ^= mix_rng >> 7;
    mix_rng ^= mix_rng << 17;
    return (uint32_t)(mix_rng >> 32);
}

/* The example drawn in cuda_plan.h, counted by hand. */
START_TEST(mixed_plan_drawn_example)
{
    const int32_t qs[] = {0, 150, 151, 152, 192}, pre[] = {10, 300, 20, 0};
    int32_t dec[4], ts[16], tr[16];
    cuda_mixed_plan pl;
    char err[256];
    ck_assert_int_eq(cuda_plan_mixed(qs, pre, 4, 64, 4, dec, ts, tr, 16, &pl, err, sizeof err),
                     RKV_OK);
    ck_assert_int_eq(pl.num_decode, 2);
    ck_assert(dec[0] == 1 && dec[1] == 2);
    ck_assert_int_eq(pl.num_prefill, 2);
    ck_assert_int_eq(pl.num_tiles, 4);
    ck_assert(ts[0] == 0 && tr[0] == 0 && ts[1] == 0 && tr[1] == 64 && ts[2] == 0 &&
              tr[2] == 128 && ts[3] == 3 && tr[3] == 0);
    ck_assert_int_eq(pl.today_ctas, 12);
    /* today: seq 0 reads 10+64, 10+128, 10+150; seq 1 301; seq 2 21; seq 3 40 */
    ck_assert_int_eq(pl.today_kv_rows, 74 + 138 + 160 + 301 + 21 + 40);
    /* planned: the decodes read ceil(301 / 4) and ceil(21 / 4) per query head */
    ck_assert_int_eq(pl.planned_kv_rows, 74 + 138 + 160 + 76 + 6 + 40);
    /* Too few tiles and bad sizes are refused by name. */
    ck_assert_int_eq(cuda_plan_mixed(qs, pre, 4, 64, 4, dec, ts, tr, 3, &pl, err, sizeof err),
                     RKV_ENOSPC);
    ck_assert_ptr_nonnull(strstr(err, "more than 3 prefill tiles"));
    const int32_t bad[] = {0, 5, 5};
    ck_assert_int_eq(cuda_plan_mixed(bad, pre, 2, 64, 4, dec, ts, tr, 16, &pl, err, sizeof err),
                     RKV_EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "sequence 1 has 0 new rows"));
}
END_TEST

/* Random mixed batches: the plan covers every row of the batch exactly once
 * (decode rows by the decode list, the rest by tiles of existing rows), never
 * launches more CTAs or reads more K/V than today's grid, and the attention it
 * implies (CPU prefill over the prefill sub-batch + CPU decode over the decode
 * sub-batch) equals today's (CPU prefill over the whole batch). */
START_TEST(mixed_plan_equals_todays_grid)
{
    const int32_t P = 4, Hq = 4, Hkv = 2, D = 64, BM = 16, stride = 40;
    const attn_shape sh = {Hq, Hkv, D, P, 0.125f};
    int checked = 0, with_decodes = 0, fewer = 0;
    for (int trial = 0; trial < 60; trial++) {
        const int32_t B = 1 + (int32_t)(mix_next() % 9);
        int32_t qs[10], pre[9], table[9 * 40], dec[9], ts[256], tr[256];
        qs[0] = 0;
        int32_t pages = 0;
        for (int32_t i = 0; i < B; i++) {
            const int32_t s = mix_next() % 2 ? 1 : 1 + (int32_t)(mix_next() % 40);
            pre[i] = (int32_t)(mix_next() % 60);
            qs[i + 1] = qs[i] + s;
            const int32_t need = (pre[i] + s + P - 1) / P;
            for (int32_t j = 0; j < stride; j++) table[i * stride + j] = j < need ? pages++ : -1;
        }
        const int32_t T = qs[B];
        cuda_mixed_plan pl;
        char err[256];
        ck_assert_int_eq(cuda_plan_mixed(qs, pre, B, BM, Hq / Hkv, dec, ts, tr, 256, &pl, err,
                                         sizeof err),
                         RKV_OK);
        /* Coverage: each (sequence, row) exactly once. */
        int32_t seen[400] = {0};
        for (int32_t d = 0; d < pl.num_decode; d++) {
            ck_assert_int_eq(qs[dec[d] + 1] - qs[dec[d]], 1);
            seen[qs[dec[d]]]++;
        }
        for (int32_t t = 0; t < pl.num_tiles; t++) {
            const int32_t i = ts[t], s = qs[i + 1] - qs[i];
            ck_assert(s > 1 && tr[t] < s && tr[t] % BM == 0);
            for (int32_t r = tr[t]; r < tr[t] + BM && r < s; r++) seen[qs[i] + r]++;
        }
        for (int32_t r = 0; r < T; r++) ck_assert_int_eq(seen[r], 1);
        ck_assert_int_le(pl.num_tiles + pl.num_decode, pl.today_ctas);
        ck_assert_int_le(pl.planned_kv_rows, pl.today_kv_rows);
        if (pl.num_decode && pl.num_prefill) with_decodes++;
        if (pl.planned_kv_rows < pl.today_kv_rows) fewer++;

        /* Attention both ways. Pages hold every sequence's whole context
         * (prefix and new rows); k_new / v_new repeat the new rows. */
        const size_t kvw = (size_t)Hkv * D, qw = (size_t)Hq * D;
        float *kc = malloc((size_t)pages * P * kvw * 4), *vc = malloc((size_t)pages * P * kvw * 4);
        float *q = malloc(T * qw * 4), *kn = malloc(T * kvw * 4), *vn = malloc(T * kvw * 4);
        float *want = malloc(T * qw * 4), *got = malloc(T * qw * 4);
        for (size_t x = 0; x < (size_t)pages * P * kvw; x++) {
            kc[x] = (float)((int)(mix_next() % 2001) - 1000) / 1000.0f;
            vc[x] = (float)((int)(mix_next() % 2001) - 1000) / 1000.0f;
        }
        for (size_t x = 0; x < T * qw; x++) q[x] = (float)((int)(mix_next() % 2001) - 1000) / 500.0f;
        for (int32_t i = 0; i < B; i++)
            for (int32_t r = 0; r < qs[i + 1] - qs[i]; r++) {
                const int32_t pos = pre[i] + r, page = table[i * stride + pos / P];
                const size_t src = ((size_t)page * P + pos % P) * kvw;
                memcpy(kn + (size_t)(qs[i] + r) * kvw, kc + src, kvw * 4);
                memcpy(vn + (size_t)(qs[i] + r) * kvw, vc + src, kvw * 4);
            }
        const attn_batch all = {B, stride, qs, pre, table, 0, pages};
        ck_assert_int_eq(attn_prefill_cpu(&sh, &all, q, kn, vn, kc, vc, want, NULL, 1), 0);

        int32_t pq[10], pp[9], ptab[9 * 40], prow[9], dl[9], dtab[9 * 40], drow[9];
        cuda_plan_mixed_gather(&pl, qs, pre, table, stride, B, dec, pq, pp, ptab, prow, dl, dtab,
                               drow);
        const int32_t Tp = pq[pl.num_prefill];
        ck_assert_int_eq(Tp + pl.num_decode, T);
        float *sq = malloc((T + 1) * qw * 4), *sk = malloc((T + 1) * kvw * 4),
              *sv = malloc((T + 1) * kvw * 4), *so = malloc((T + 1) * qw * 4);
        for (int32_t j = 0; j < pl.num_prefill; j++) {
            const int32_t i = prow[j], s = qs[i + 1] - qs[i];
            memcpy(sq + (size_t)pq[j] * qw, q + (size_t)qs[i] * qw, s * qw * 4);
            memcpy(sk + (size_t)pq[j] * kvw, kn + (size_t)qs[i] * kvw, s * kvw * 4);
            memcpy(sv + (size_t)pq[j] * kvw, vn + (size_t)qs[i] * kvw, s * kvw * 4);
        }
        const attn_batch pb = {pl.num_prefill, stride, pq, pp, ptab, 0, pages};
        if (pl.num_prefill)
            ck_assert_int_eq(attn_prefill_cpu(&sh, &pb, sq, sk, sv, kc, vc, so, NULL, 1), 0);
        for (int32_t j = 0; j < pl.num_prefill; j++) {
            const int32_t i = prow[j], s = qs[i + 1] - qs[i];
            memcpy(got + (size_t)qs[i] * qw, so + (size_t)pq[j] * qw, s * qw * 4);
        }
        for (int32_t d = 0; d < pl.num_decode; d++)
            memcpy(sq + (size_t)d * qw, q + (size_t)drow[d] * qw, qw * 4);
        if (pl.num_decode)
            ck_assert_int_eq(attn_decode_cpu(&sh, pl.num_decode, dl, dtab, stride, pages, sq, kc,
                                             vc, so, NULL, 0, 1),
                             0);
        for (int32_t d = 0; d < pl.num_decode; d++)
            memcpy(got + (size_t)drow[d] * qw, so + (size_t)d * qw, qw * 4);
        for (size_t x = 0; x < T * qw; x++)
            ck_assert_msg(fabsf(got[x] - want[x]) <= 1e-5f + 1e-4f * fabsf(want[x]),
                          "trial %d element %zu: planned %g, today %g", trial, x, got[x], want[x]);
        checked++;
        free(kc); free(vc); free(q); free(kn); free(vn); free(want); free(got);
        free(sq); free(sk); free(sv); free(so);
    }
    /* The draw must exercise the interesting case, or the test proves little. */
    ck_assert_int_ge(with_decodes, 20);
    ck_assert_int_ge(fewer, 20);
    ck_assert_int_eq(checked, 60);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cuda_plan");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, weights_layout_every_preset);
    tcase_add_test(tc, activations_layout);
    tcase_add_test(tc, memory_fits_and_pool_takes_the_rest);
    tcase_add_test(tc, memory_names_what_did_not_fit);
    tcase_add_test(tc, page_bytes_matches_config);
    tcase_add_test(tc, step_layout_packs_every_input);
    tcase_add_test(tc, graph_buckets);
    tcase_add_test(tc, stride_buckets);
    tcase_add_test(tc, step_shapes_and_padding);
    tcase_add_test(tc, mixed_plan_drawn_example);
    tcase_add_test(tc, mixed_plan_equals_todays_grid);
    suite_add_tcase(s, tc);
    return check_run(s);
}
