/* model.c - weights and the fp32 CPU forward; see model.h. */
#include "model.h"

#include <cblas.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attention.h"
#include "safetensors.h"
#include "rkv_core.h"

/* ---- weight layout --------------------------------------------------------
 * Every tensor is a slice of one fp32 allocation. layout() walks the tensors
 * in a fixed order; with base NULL it only counts floats. The same walk names
 * each tensor (HF names) and gives its shape, so random init and the loader
 * cannot disagree on what exists. */

typedef struct tensor_ref {
    float **slot;        /* where the pointer goes */
    char name[96];       /* HF name */
    int ndim;
    int64_t shape[2];
    int kind;            /* what random init fills it with (RI_*) */
} tensor_ref;

enum { RI_EMBED, RI_LINEAR_C, RI_LINEAR_QD, RI_LINEAR_F, RI_NORM, RI_BIAS };

typedef void (*tensor_fn)(void *ctx, const tensor_ref *t, float *data);

static size_t walk(model *m, float *base, tensor_fn fn, void *ctx)
{
    const model_config *c = &m->cfg;
    const int64_t C = c->hidden_size, F = c->intermediate_size, V = c->vocab_size;
    const int64_t QD = (int64_t)c->num_heads * c->head_dim;
    const int64_t KD = (int64_t)c->num_kv_heads * c->head_dim;
    size_t off = 0;
    tensor_ref t;
#define TENSOR(SLOT, KIND, ND, S0, S1, ...)                                   \
    do {                                                                      \
        t.slot = (SLOT);                                                      \
        snprintf(t.name, sizeof t.name, __VA_ARGS__);                         \
        t.ndim = (ND);                                                        \
        t.shape[0] = (S0);                                                    \
        t.shape[1] = (S1);                                                    \
        t.kind = (KIND);                                                      \
        size_t n_ = (size_t)(S0) * (size_t)((ND) == 2 ? (S1) : 1);            \
        if (base) {                                                           \
            *t.slot = base + off;                                             \
            if (fn) fn(ctx, &t, base + off);                                  \
        }                                                                     \
        off += (n_ + 15) & ~(size_t)15; /* 64-byte aligned slices */          \
    } while (0)

    TENSOR(&m->embed, RI_EMBED, 2, V, C, "model.embed_tokens.weight");
    for (int l = 0; l < c->num_layers; l++) {
        model_layer *L = &m->layers[l];
        const char *p = "model.layers";
        TENSOR(&L->attn_norm, RI_NORM, 1, C, 0, "%s.%d.input_layernorm.weight", p, l);
        TENSOR(&L->wq, RI_LINEAR_C, 2, QD, C, "%s.%d.self_attn.q_proj.weight", p, l);
        TENSOR(&L->wk, RI_LINEAR_C, 2, KD, C, "%s.%d.self_attn.k_proj.weight", p, l);
        TENSOR(&L->wv, RI_LINEAR_C, 2, KD, C, "%s.%d.self_attn.v_proj.weight", p, l);
        if (c->qkv_bias) {
            TENSOR(&L->bq, RI_BIAS, 1, QD, 0, "%s.%d.self_attn.q_proj.bias", p, l);
            TENSOR(&L->bk, RI_BIAS, 1, KD, 0, "%s.%d.self_attn.k_proj.bias", p, l);
            TENSOR(&L->bv, RI_BIAS, 1, KD, 0, "%s.%d.self_attn.v_proj.bias", p, l);
        }
        TENSOR(&L->wo, RI_LINEAR_QD, 2, C, QD, "%s.%d.self_attn.o_proj.weight", p, l);
        TENSOR(&L->mlp_norm, RI_NORM, 1, C, 0, "%s.%d.post_attention_layernorm.weight", p, l);
        TENSOR(&L->w_gate, RI_LINEAR_C, 2, F, C, "%s.%d.mlp.gate_proj.weight", p, l);
        TENSOR(&L->w_up, RI_LINEAR_C, 2, F, C, "%s.%d.mlp.up_proj.weight", p, l);
        TENSOR(&L->w_down, RI_LINEAR_F, 2, C, F, "%s.%d.mlp.down_proj.weight", p, l);
    }
    TENSOR(&m->final_norm, RI_NORM, 1, C, 0, "model.norm.weight");
    if (!c->tie_word_embeddings) TENSOR(&m->lm_head, RI_EMBED, 2, V, C, "lm_head.weight");
    else if (base) m->lm_head = m->embed;
#undef TENSOR
    return off;
}

/* ---- seeded random weights ------------------------------------------------ */

typedef struct init_ctx {
    const model_config *cfg;
    uint64_t seed;
    uint64_t index; /* tensor counter: each tensor gets its own stream */
} init_ctx;

/* Uniform values with the standard deviation that keeps each projection's
 * output at unit scale (1/sqrt(fan_in)); embeddings at 2/sqrt(C) so that the
 * (tied) LM head gives logits with a spread of about 2, neither flat nor
 * one-hot. Norm weights near 1 and small biases, so tests see them matter. */
static void init_tensor(void *ctxp, const tensor_ref *t, float *data)
{
    init_ctx *ctx = ctxp;
    const model_config *c = ctx->cfg;
    double std = 0, mean = 0;
    switch (t->kind) {
    case RI_EMBED: std = 2.0 / sqrt((double)c->hidden_size); break;
    case RI_LINEAR_C: std = 1.0 / sqrt((double)c->hidden_size); break;
    case RI_LINEAR_QD: std = 1.0 / sqrt((double)c->num_heads * c->head_dim); break;
    case RI_LINEAR_F: std = 1.0 / sqrt((double)c->intermediate_size); break;
    case RI_NORM: mean = 1.0; std = 0.05; break;
    case RI_BIAS: std = 0.1; break;
    }
    double a = std * sqrt(3.0); /* uniform(-a, a) has standard deviation std */
    uint64_t key = rkv_splitmix64(ctx->seed ^ rkv_splitmix64(++ctx->index));
    size_t n = (size_t)t->shape[0] * (size_t)(t->ndim == 2 ? t->shape[1] : 1);
    for (size_t i = 0; i < n; i++) {
        double u = (double)(rkv_splitmix64(key + i) >> 11) * 0x1.0p-53;
        data[i] = (float)(mean + a * (2.0 * u - 1.0));
    }
}

/* ---- safetensors loading --------------------------------------------------- */

typedef struct load_ctx {
    const safetensors *st;
    rkv_status status;
    char *err;
    size_t errlen;
} load_ctx;

static void load_tensor(void *ctxp, const tensor_ref *t, float *data)
{
    load_ctx *ctx = ctxp;
    if (ctx->status) return;
    ctx->status = safetensors_read_f32(ctx->st, t->name, t->ndim, t->shape, data, ctx->err,
                                       ctx->errlen);
}

/* ---- create / destroy ------------------------------------------------------- */

rkv_status model_create(const model_config *cfg, const char *weights_path, uint64_t seed,
                        int num_threads, model **out, char *err, size_t errlen)
{
    *out = NULL;
    rkv_status st = model_config_check(cfg, err, errlen);
    if (st) return st;
    model *m = calloc(1, sizeof *m);
    if (!m) return RKV_ENOMEM;
    m->cfg = *cfg;
    m->num_threads = num_threads;
    m->use_decode_kernel = 1;
    m->layers = calloc((size_t)cfg->num_layers, sizeof *m->layers);
    m->rope_inv_freq = malloc(sizeof(float) * (size_t)(cfg->head_dim / 2));
    if (!m->layers || !m->rope_inv_freq) {
        model_destroy(m);
        return RKV_ENOMEM;
    }
    /* As the HF rotary embedding computes it: exponents and inverse in fp32. */
    for (int i = 0; i < cfg->head_dim / 2; i++) {
        float e = (float)(2 * i) / (float)cfg->head_dim;
        m->rope_inv_freq[i] = (float)(1.0 / (double)(float)pow(cfg->rope_theta, (double)e));
    }

    size_t n = walk(m, NULL, NULL, NULL);
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    double phys = pages > 0 && psz > 0 ? (double)pages * (double)psz : 0;
    if (phys > 0 && (double)n * 4.0 > 0.8 * phys) {
        char d[256];
        model_config_describe(cfg, d, sizeof d);
        model_destroy(m);
        return rkv_fail(RKV_ENOMEM, err, errlen,
                    "model %s: fp32 weights need %.1f GiB, more than this machine's memory "
                    "(%.1f GiB); large presets are meant for the sim backend", d,
                    (double)n * 4.0 / (1 << 30), phys / (1 << 30));
    }
    m->weights = aligned_alloc(64, ((n ? n : 1) * sizeof(float) + 63) & ~(size_t)63);
    if (!m->weights) {
        model_destroy(m);
        return rkv_fail(RKV_ENOMEM, err, errlen, "model: cannot allocate %.1f MiB of weights",
                    (double)n * 4.0 / (1 << 20));
    }
    m->weights_floats = n;

    if (!weights_path) {
        init_ctx ic = {.cfg = cfg, .seed = seed, .index = 0};
        walk(m, m->weights, init_tensor, &ic);
    } else {
        safetensors *sf;
        if ((st = safetensors_open(weights_path, &sf, err, errlen))) {
            model_destroy(m);
            return st;
        }
        load_ctx lc = {.st = sf, .status = RKV_OK, .err = err, .errlen = errlen};
        walk(m, m->weights, load_tensor, &lc);
        safetensors_close(sf);
        if (lc.status) {
            model_destroy(m);
            return lc.status;
        }
    }
    if (num_threads > 0) openblas_set_num_threads(num_threads);
    *out = m;
    return RKV_OK;
}

void model_destroy(model *m)
{
    if (!m) return;
    free(m->weights);
    free(m->layers);
    free(m->rope_inv_freq);
    free(m->ws);
    free(m);
}

/* ---- KV memory --------------------------------------------------------------- */

rkv_status kv_cache_init(kv_cache *kv, const model_config *cfg, int32_t num_pages,
                         int32_t page_size)
{
    memset(kv, 0, sizeof *kv);
    if (num_pages < 1 || page_size < 1 || page_size > 256) return RKV_EINVAL;
    kv->num_layers = cfg->num_layers;
    kv->num_pages = num_pages;
    kv->page_size = page_size;
    kv->num_kv_heads = cfg->num_kv_heads;
    kv->head_dim = cfg->head_dim;
    kv->layer_floats = (size_t)num_pages * (size_t)page_size * (size_t)cfg->num_kv_heads *
                       (size_t)cfg->head_dim;
    /* calloc: pages the engine never touches are never committed. */
    kv->k = calloc(kv->layer_floats * (size_t)cfg->num_layers, sizeof(float));
    kv->v = calloc(kv->layer_floats * (size_t)cfg->num_layers, sizeof(float));
    if (!kv->k || !kv->v) {
        kv_cache_destroy(kv);
        return RKV_ENOMEM;
    }
    return RKV_OK;
}

void kv_cache_destroy(kv_cache *kv)
{
    free(kv->k);
    free(kv->v);
    memset(kv, 0, sizeof *kv);
}

static size_t page_floats(const kv_cache *kv)
{
    return (size_t)kv->page_size * (size_t)kv->num_kv_heads * (size_t)kv->head_dim;
}

size_t kv_cache_page_bytes(const kv_cache *kv)
{
    return 2 * (size_t)kv->num_layers * page_floats(kv) * sizeof(float);
}

rkv_status kv_cache_read_page(const kv_cache *kv, int32_t page, void *dst)
{
    if (page < 0 || page >= kv->num_pages) return RKV_ERANGE;
    size_t pf = page_floats(kv);
    float *d = dst;
    for (int32_t l = 0; l < kv->num_layers; l++) {
        size_t off = (size_t)l * kv->layer_floats + (size_t)page * pf;
        memcpy(d, kv->k + off, pf * sizeof(float));
        memcpy(d + pf, kv->v + off, pf * sizeof(float));
        d += 2 * pf;
    }
    return RKV_OK;
}

rkv_status kv_cache_write_page(kv_cache *kv, int32_t page, const void *src)
{
    if (page < 0 || page >= kv->num_pages) return RKV_ERANGE;
    size_t pf = page_floats(kv);
    const float *s = src;
    for (int32_t l = 0; l < kv->num_layers; l++) {
        size_t off = (size_t)l * kv->layer_floats + (size_t)page * pf;
        memcpy(kv->k + off, s, pf * sizeof(float));
        memcpy(kv->v + off, s + pf, pf * sizeof(float));
        s += 2 * pf;
    }
    return RKV_OK;
}

/* ---- forward ------------------------------------------------------------------- */

/* out (T, N) = in (T, K) W^T + beta out, W (N, K) row-major, out rows ldo
 * apart. sgemm's result for a row depends on how many rows it is given
 * (blocking, edge kernels, thread split), so in batch-invariant mode every
 * row is its own sgemv: the same bits whatever the batch, 2-4x slower. */
static void gemm_rows(const model *m, float *out, int ldo, const float *in, const float *w,
                      int T, int N, int K, float beta)
{
    if (!m->batch_invariant) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, N, K, 1.0f, in, K, w, K, beta,
                    out, ldo);
        return;
    }
    for (int t = 0; t < T; t++)
        cblas_sgemv(CblasRowMajor, CblasNoTrans, N, K, 1.0f, w, K, in + (size_t)t * K, 1, beta,
                    out + (size_t)t * ldo, 1);
}

/* out (T, N) = in (T, K) W^T, W (N, K) row-major; + bias (N) when given. */
static void linear(const model *m, float *out, const float *in, const float *w,
                   const float *bias, int T, int N, int K)
{
    gemm_rows(m, out, N, in, w, T, N, K, 0.0f);
    if (bias)
        for (int t = 0; t < T; t++)
            for (int j = 0; j < N; j++) out[(size_t)t * N + j] += bias[j];
}

/* out (C) = x / sqrt(mean(x^2) + eps) * w */
static void rmsnorm(float *out, const float *x, const float *w, int C, double eps)
{
    double ss = 0;
    for (int i = 0; i < C; i++) ss += (double)x[i] * x[i];
    float r = (float)(1.0 / sqrt(ss / C + eps));
    for (int i = 0; i < C; i++) out[i] = w[i] * (x[i] * r);
}

/* Rotate each head of rows (T, H, D) in place: dimension i pairs with i + D/2,
 * angle = position * inv_freq[i] (cos/sin tables (T, D/2)). */
static void rope(float *x, int T, int H, int D, const float *cosb, const float *sinb)
{
    const int half = D / 2;
    for (int t = 0; t < T; t++) {
        const float *c = cosb + (size_t)t * half, *s = sinb + (size_t)t * half;
        for (int h = 0; h < H; h++) {
            float *v = x + ((size_t)t * H + h) * D;
            for (int i = 0; i < half; i++) {
                float a = v[i], b = v[i + half];
                v[i] = a * c[i] - b * s[i];
                v[i + half] = b * c[i] + a * s[i];
            }
        }
    }
}

static rkv_status check_batch(const model *m, const kv_cache *kv, const fwd_batch *b, char *err,
                              size_t errlen)
{
    const int32_t B = b->num_seqs, T = b->num_tokens, P = kv->page_size;
    if (B < 0 || T < 0 || !b->q_starts || (B > 0 && (!b->prefix_lens || !b->sample_rows)))
        return rkv_fail(RKV_EINVAL, err, errlen, "forward: num_seqs/num_tokens/arrays invalid");
    if (b->q_starts[0] != 0 || b->q_starts[B] != T)
        return rkv_fail(RKV_EINVAL, err, errlen,
                    "forward: q_starts must run from 0 to num_tokens (%d), got %d..%d", T,
                    b->q_starts[0], b->q_starts[B]);
    if (T > 0 && (!b->token_ids || !b->positions || !b->slot_mapping))
        return rkv_fail(RKV_EINVAL, err, errlen, "forward: token_ids/positions/slot_mapping NULL");
    for (int32_t t = 0; t < T; t++) {
        if (b->token_ids[t] < 0 || b->token_ids[t] >= m->cfg.vocab_size)
            return rkv_fail(RKV_ERANGE, err, errlen, "forward: token_ids[%d] = %d outside [0, %d)", t,
                        b->token_ids[t], m->cfg.vocab_size);
        if (b->positions[t] < 0 || b->positions[t] >= m->cfg.max_position)
            return rkv_fail(RKV_ERANGE, err, errlen, "forward: positions[%d] = %d outside [0, %d)",
                        t, b->positions[t], m->cfg.max_position);
        if (b->slot_mapping[t] < 0 || (int64_t)b->slot_mapping[t] >= (int64_t)kv->num_pages * P)
            return rkv_fail(RKV_ERANGE, err, errlen,
                        "forward: slot_mapping[%d] = %d outside [0, %lld)", t,
                        b->slot_mapping[t], (long long)kv->num_pages * P);
    }
    for (int32_t i = 0; i < B; i++) {
        int32_t s0 = b->q_starts[i], s1 = b->q_starts[i + 1], p = b->prefix_lens[i];
        if (s1 < s0)
            return rkv_fail(RKV_EINVAL, err, errlen, "forward: q_starts not ascending at seq %d", i);
        if (p < 0)
            return rkv_fail(RKV_EINVAL, err, errlen, "forward: prefix_lens[%d] = %d < 0", i, p);
        int32_t np = (p + P - 1) / P;
        if (np > b->max_pages || (np > 0 && !b->page_table))
            return rkv_fail(RKV_EINVAL, err, errlen,
                        "forward: seq %d needs %d prefix pages, max_pages is %d", i, np,
                        b->max_pages);
        for (int32_t j = 0; j < np; j++) {
            int32_t pg = b->page_table[(size_t)i * b->max_pages + j];
            if (pg < 0 || pg >= kv->num_pages)
                return rkv_fail(RKV_ERANGE, err, errlen,
                            "forward: page_table[%d][%d] = %d outside [0, %d)", i, j, pg,
                            kv->num_pages);
        }
        int32_t r = b->sample_rows[i];
        if (r != -1 && (r < s0 || r >= s1))
            return rkv_fail(RKV_EINVAL, err, errlen,
                        "forward: sample_rows[%d] = %d not among the sequence's rows [%d, %d)",
                        i, r, s0, s1);
        if (b->row_logits && b->row_logits[i] &&
            (!b->row_logits_n || b->row_logits_n[i] < 0 || b->row_logits_n[i] > s1 - s0))
            return rkv_fail(RKV_EINVAL, err, errlen,
                        "forward: row_logits_n[%d] = %d outside the sequence's %d rows", i,
                        b->row_logits_n ? b->row_logits_n[i] : -1, s1 - s0);
    }
    return RKV_OK;
}

/* Context lengths for the decode kernel, or NULL when the step is not pure
 * decode (or a seq's page table does not hold its new token's slot). The
 * decode kernel's split-K sums differ in the last bits from the prefill
 * kernel's, so batch-invariant mode never takes it. */
static int32_t *decode_lens(const model *m, const kv_cache *kv, const fwd_batch *b)
{
    const int32_t B = b->num_seqs, P = kv->page_size;
    if (B == 0 || b->num_tokens != B || !b->page_table || !m->use_decode_kernel ||
        m->batch_invariant)
        return NULL;
    for (int32_t i = 0; i < B; i++) {
        int32_t p = b->prefix_lens[i];
        if (b->q_starts[i + 1] - b->q_starts[i] != 1 || p / P >= b->max_pages ||
            (int64_t)b->page_table[(size_t)i * b->max_pages + p / P] * P + p % P !=
                b->slot_mapping[b->q_starts[i]])
            return NULL;
    }
    int32_t *lens = malloc(sizeof(int32_t) * (size_t)(uint32_t)B);
    if (!lens) return NULL; /* the prefill path needs no allocation */
    for (int32_t i = 0; i < B; i++) lens[i] = b->prefix_lens[i] + 1;
    return lens;
}

/* Batch-invariant attention: the prefill kernel groups a sequence's query
 * rows into tiles, and a row's last bits depend on its place in the tile. So
 * every row becomes a sequence of its own, one query with all earlier keys
 * in pages (its K/V and its predecessors' were stored before attention):
 *
 *   seq i, rows r0..r1, prefix p   ->   rows r: prefix p + (r - r0), suffix 1
 *
 * That needs each row's slot in its page table. *rows owns q_starts,
 * prefix_lens and page_table of the new batch ab. */
static rkv_status split_rows(const kv_cache *kv, const fwd_batch *b, attn_batch *ab,
                             int32_t **rows, char *err, size_t errlen)
{
    const int32_t T = b->num_tokens, P = kv->page_size, MP = b->max_pages;
    int32_t *buf = malloc(sizeof(int32_t) * ((size_t)2 * T + 1 + (size_t)T * (size_t)MP));
    if (!buf) return rkv_fail(RKV_ENOMEM, err, errlen, "forward: batch-invariant page tables");
    int32_t *qs = buf, *pl = qs + T + 1, *pt = pl + T;
    for (int32_t i = 0; i < b->num_seqs; i++) {
        const int32_t *row_pt = b->page_table + (size_t)i * MP;
        for (int32_t r = b->q_starts[i]; r < b->q_starts[i + 1]; r++) {
            int32_t p = b->prefix_lens[i] + (r - b->q_starts[i]);
            if (p / P >= MP ||
                (int64_t)row_pt[p / P] * P + p % P != (int64_t)b->slot_mapping[r]) {
                free(buf);
                return rkv_fail(RKV_EINVAL, err, errlen,
                            "forward: batch-invariant mode needs page_table[%d] to hold the "
                            "slot of row %d (slot_mapping %d)", i, r, b->slot_mapping[r]);
            }
            qs[r] = r;
            pl[r] = p;
            memcpy(pt + (size_t)r * MP, row_pt, sizeof(int32_t) * (size_t)MP);
        }
    }
    qs[T] = T;
    ab->num_seqs = T;
    ab->q_starts = qs;
    ab->prefix_lens = pl;
    ab->page_table = pt;
    *rows = buf;
    return RKV_OK;
}

static float *workspace(model *m, size_t floats)
{
    if (floats > m->ws_floats) {
        /* exact, not doubled: sizes repeat step after step, so it settles at
         * the largest forward seen */
        float *n = realloc(m->ws, floats * sizeof(float));
        if (!n) return NULL;
        m->ws = n;
        m->ws_floats = floats;
    }
    return m->ws;
}

/* Angles as HF computes them: fp32 position x fp32 inv_freq, rounded to
 * fp32 before cos/sin. Equal positions give equal tables, so a token's
 * rotation does not depend on how the prompt was split. cosb, sinb: (T, D/2). */
static void rope_tables(const model *m, const fwd_batch *b, float *cosb, float *sinb)
{
    const int half = m->cfg.head_dim / 2;
    for (int t = 0; t < b->num_tokens; t++) {
        float pos = (float)b->positions[t];
        for (int i = 0; i < half; i++) {
            float ang = pos * m->rope_inv_freq[i];
            cosb[(size_t)t * half + i] = (float)cos((double)ang);
            sinb[(size_t)t * half + i] = (float)sin((double)ang);
        }
    }
}

/* The MLP block of layer L on T rows: x += down(silu(gate(h)) * up(h)) with
 * h = rmsnorm(x); g and u are (T, F) scratch. */
static void mlp(const model *m, const model_layer *L, int T, float *x, float *h, float *g, float *u)
{
    const model_config *c = &m->cfg;
    const int C = c->hidden_size, F = c->intermediate_size;
    for (int t = 0; t < T; t++)
        rmsnorm(h + (size_t)t * C, x + (size_t)t * C, L->mlp_norm, C, c->rms_eps);
    linear(m, g, h, L->w_gate, NULL, T, F, C);
    linear(m, u, h, L->w_up, NULL, T, F, C);
    for (size_t i = 0; i < (size_t)T * F; i++) g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
    gemm_rows(m, x, C, g, L->w_down, T, C, F, 1.0f);
}

/* LM head only on the rows that sample: gather them (in seq order) into h,
 * then one sgemm per run of consecutive sampling sequences writes straight
 * into logits rows. */
static void lm_head(const model *m, const fwd_batch *b, const float *x, float *h, float *logits)
{
    const model_config *c = &m->cfg;
    const int B = b->num_seqs, C = c->hidden_size, V = c->vocab_size;
    int r = 0;
    for (int i = 0; i < B; i++)
        if (b->sample_rows[i] >= 0)
            rmsnorm(h + (size_t)r++ * C, x + (size_t)b->sample_rows[i] * C, m->final_norm, C,
                    c->rms_eps);
    r = 0;
    for (int i = 0; i < B;) {
        if (b->sample_rows[i] < 0) {
            i++;
            continue;
        }
        int j = i;
        while (j < B && b->sample_rows[j] >= 0) j++;
        gemm_rows(m, logits + (size_t)i * V, V, h + (size_t)r * C, m->lm_head, j - i, V, C,
                  0.0f);
        r += j - i;
        i = j;
    }
}

/* The rows fwd_batch.row_logits asks for: the final norm of each into h,
 * then one sgemm per sequence straight into its destination. h holds T rows,
 * and a sequence asks for at most its own. */
static void lm_head_rows(const model *m, const fwd_batch *b, const float *x, float *h)
{
    const model_config *c = &m->cfg;
    const int C = c->hidden_size, V = c->vocab_size;
    for (int i = 0; b->row_logits && i < b->num_seqs; i++) {
        const int n = b->row_logits_n[i], r0 = b->q_starts[i];
        if (!b->row_logits[i] || n <= 0) continue;
        for (int r = 0; r < n; r++)
            rmsnorm(h + (size_t)r * C, x + (size_t)(r0 + r) * C, m->final_norm, C, c->rms_eps);
        gemm_rows(m, b->row_logits[i], V, h, m->lm_head, n, V, C, 0.0f);
    }
}

/* Cascade: one plan for every layer (the page tables are the layers'), when
 * the model cascades and the batch can share; *cascade: the plan has groups. */
static rkv_status cascade_plan(const model *m, const kv_cache *kv, const fwd_batch *b,
                               const int32_t *seq_lens, attn_cascade_plan *plan, int *cascade,
                               char *err, size_t errlen)
{
    *cascade = 0;
    if (!m->cascade || m->batch_invariant || b->num_seqs <= 1 || !b->page_table) return RKV_OK;
    int rc = attn_cascade_plan_build(b->num_seqs, seq_lens ? seq_lens : b->prefix_lens,
                                     b->page_table, b->max_pages, kv->page_size, 1, plan);
    if (rc != ATTN_OK)
        return rkv_fail(rc == ATTN_ENOMEM ? RKV_ENOMEM : RKV_EINVAL, err, errlen,
                        "forward: cascade plan: %s", attn_strerror(rc));
    *cascade = plan->num_groups > 0;
    return RKV_OK;
}

rkv_status model_forward(model *m, kv_cache *kv, const fwd_batch *b, float *logits, char *err,
                         size_t errlen)
{
    rkv_status st = check_batch(m, kv, b, err, errlen);
    if (st) return st;
    const model_config *c = &m->cfg;
    const int T = b->num_tokens, B = b->num_seqs;
    const int C = c->hidden_size, F = c->intermediate_size;
    const int Hq = c->num_heads, Hkv = c->num_kv_heads, D = c->head_dim, half = D / 2;
    const int QD = Hq * D, KD = Hkv * D;
    if (T == 0) return RKV_OK;

    /* Workspace parts, all (T, ...) row-major. */
    size_t sz_x = (size_t)T * C, sz_q = (size_t)T * QD, sz_k = (size_t)T * KD;
    size_t sz_f = (size_t)T * F, sz_r = (size_t)T * half;
    float *ws = workspace(m, 2 * sz_x + 2 * sz_q + 2 * sz_k + 2 * sz_f + 2 * sz_r);
    if (!ws) return rkv_fail(RKV_ENOMEM, err, errlen, "forward: workspace for %d tokens", T);
    float *x = ws;            /* (T, C) residual stream */
    float *h = x + sz_x;      /* (T, C) normed input of a block */
    float *q = h + sz_x;      /* (T, Hq, D) */
    float *att = q + sz_q;    /* (T, Hq, D) attention output */
    float *k = att + sz_q;    /* (T, Hkv, D) */
    float *v = k + sz_k;      /* (T, Hkv, D) */
    float *g = v + sz_k;      /* (T, F) gate, then silu(gate) * up */
    float *u = g + sz_f;      /* (T, F) up */
    float *cosb = u + sz_f;   /* (T, D/2) */
    float *sinb = cosb + sz_r;/* (T, D/2) */

    rope_tables(m, b, cosb, sinb);
    for (int t = 0; t < T; t++)
        memcpy(x + (size_t)t * C, m->embed + (size_t)b->token_ids[t] * C, sizeof(float) * C);

    /* A pure decode step (one row per sequence) goes through the split-K
     * decode kernel: the new token's K/V is stored first, so the whole
     * context is in pages. That needs the page table to name the page of
     * the new token's slot; when it does not, the prefill kernel (which takes
     * the suffix from k/v) is used instead. Both compute the same attention. */
    int32_t *seq_lens = decode_lens(m, kv, b);
    attn_shape shape = {.num_q_heads = Hq, .num_kv_heads = Hkv, .head_dim = D,
                        .page_size = kv->page_size, .scale = 1.0f / sqrtf((float)D)};
    attn_batch ab = {.num_seqs = B, .max_pages = b->max_pages, .q_starts = b->q_starts,
                     .prefix_lens = b->prefix_lens, .page_table = b->page_table,
                     .max_suffix = 0, .num_pages = kv->num_pages};
    int32_t *rows = NULL;
    if (m->batch_invariant && (st = split_rows(kv, b, &ab, &rows, err, errlen))) {
        free(seq_lens);
        return st;
    }
    attn_cascade_plan plan = {0};
    int cascade = 0;
    if ((st = cascade_plan(m, kv, b, seq_lens, &plan, &cascade, err, errlen))) {
        free(seq_lens);
        free(rows);
        return st;
    }
    for (int l = 0; l < c->num_layers; l++) {
        const model_layer *L = &m->layers[l];
        float *kc = kv->k + (size_t)l * kv->layer_floats;
        float *vc = kv->v + (size_t)l * kv->layer_floats;
        for (int t = 0; t < T; t++)
            rmsnorm(h + (size_t)t * C, x + (size_t)t * C, L->attn_norm, C, c->rms_eps);
        linear(m, q, h, L->wq, L->bq, T, QD, C);
        linear(m, k, h, L->wk, L->bk, T, KD, C);
        linear(m, v, h, L->wv, L->bv, T, KD, C);
        rope(q, T, Hq, D, cosb, sinb);
        rope(k, T, Hkv, D, cosb, sinb);
        /* The prefix is read from pages, the suffix from k/v: storing first is
         * safe because the suffix's slots are not prefix slots. */
        int rc = attn_store_kv_cpu(&shape, T, kv->num_pages, b->slot_mapping, k, v, kc, vc);
        if (rc == ATTN_OK && seq_lens && cascade)
            rc = attn_decode_cascade_cpu(&shape, B, seq_lens, b->page_table, b->max_pages,
                                         kv->num_pages, &plan, q, kc, vc, att, NULL,
                                         m->num_threads);
        else if (rc == ATTN_OK && seq_lens)
            rc = attn_decode_cpu(&shape, B, seq_lens, b->page_table, b->max_pages,
                                 kv->num_pages, q, kc, vc, att, NULL, 0, m->num_threads);
        else if (rc == ATTN_OK && cascade)
            rc = attn_prefill_cascade_cpu(&shape, &ab, &plan, q, k, v, kc, vc, att, NULL,
                                          m->num_threads);
        else if (rc == ATTN_OK)
            rc = attn_prefill_cpu(&shape, &ab, q, k, v, kc, vc, att, NULL, m->num_threads);
        if (rc != ATTN_OK) {
            attn_cascade_plan_free(&plan);
            free(seq_lens);
            free(rows);
            return rkv_fail(rc == ATTN_ENOMEM ? RKV_ENOMEM : RKV_EINVAL, err, errlen,
                        "forward: layer %d attention: %s", l, attn_strerror(rc));
        }
        /* x += att Wo^T (beta = 1 accumulates into the residual) */
        gemm_rows(m, x, C, att, L->wo, T, C, QD, 1.0f);
        mlp(m, L, T, x, h, g, u);
    }

    attn_cascade_plan_free(&plan);
    free(seq_lens);
    free(rows);

    lm_head(m, b, x, h, logits);
    lm_head_rows(m, b, x, h);
    return RKV_OK;
}
