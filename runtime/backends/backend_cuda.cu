/* backend_cuda.cu - the Llama/Qwen2 model on one GPU: cuBLAS GEMMs (bf16 in,
 * fp32 accumulate and out), attention/ kernels over the paged KV pool, small
 * fused kernels (cuda_kernels.cuh) for the rest.
 *
 * One step on the stream:
 *
 *   pinned h_in[slot] --H2D (one copy)--> d_in: ids, positions, slots, lengths,
 *                                               sample rows, page table
 *   embed -> L x [ add+RMSNorm -> QKV GEMM -> bias+RoPE -> store K/V in pages
 *                  -> attention (decode: split-K over pages; else prefix pages +
 *                     suffix) -> O GEMM -> add+RMSNorm -> gate_up GEMM -> SwiGLU
 *                  -> down GEMM ]
 *        -> gather the rows that sample + final RMSNorm -> LM head GEMM (B rows)
 *        -> argmax
 *   d_out --D2H--> pinned h_out[slot]; event done[slot]
 *
 * Decode-only steps (one row per sequence) run as a CUDA graph captured per
 * (batch bucket, page-table stride), padded to the bucket: padding rows have
 * slot -1 (no K/V write), length 0 and sample row -1. Small mixed steps (up to
 * MIXED_GRAPH_TOKENS rows: a few prompt chunks among decodes, the common step
 * when prompts hit the cache) can be graphs too (graph level 2, opt-in until
 * verified on a GPU), keyed by (power-of-two rows, batch bucket, stride, suffix
 * bound); their padding rows belong to padding sequences that write nothing
 * and sample nothing.
 *
 * Overlap: submit() enqueues and returns; collect() waits for the oldest step.
 * Two slots of pinned buffers let the host fill step n+1 while step n runs.
 * Rows that sample with temperature/top-k/top-p bring their logits row back
 * and go through sampler_sample(), so every mode has the CPU's semantics
 * exactly; greedy rows (the common case) only bring back their token id.
 */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention.h"
#include "cuda_kernels.cuh"

extern "C" {
#include "backend.h"
#include "cuda_plan.h"
#include "model_config.h"
#include "sampler.h"
#if __has_include("safetensors.h")
#include "safetensors.h"
#define RKV_CUDA_SAFETENSORS 1
#endif
}
#include "backend_cuda.h"
#include "rkv_core.h"

#define MAX_SPLITS 32            /* split-K cap of decode attention */
#define MAX_GRAPHS 192
#define MIXED_GRAPH_TOKENS 256   /* mixed steps up to this many rows run as graphs too */
#define CUBLAS_WS_BYTES ((size_t)32 << 20)
#define GRAPH_RESERVE ((size_t)256 << 20) /* graphs, cuBLAS/driver internals */

/* A captured step shape: decode (one row per sequence) or mixed (prefill
 * attention), padded tokens and sequences, page-table stride, and the
 * suffix bound the prefill grid was sized for. */
typedef struct graph_entry {
    int32_t decode, tokens, bucket, stride, max_suffix;
    cudaGraphExec_t exec;
} graph_entry;

typedef struct pending {
    int32_t num_seqs;
    cuda_step_layout layout;    /* of h_in[slot]: its page table names a bad page's sequence */
    int want_logits, host_sample;
    int32_t *sample_rows;       /* (max_seqs) host copies for collect */
    int32_t *sample_steps;
    sampling_params *sampling;
} pending;

typedef struct cuda_backend {
    backend base; /* first: the engine sees a backend* */
    model_config cfg;
    attn_shape shape;
    cuda_weight_plan wp;
    cuda_act_plan ap;
    int32_t max_tokens, max_seqs, max_stride;
    cudaStream_t stream;
    cublasHandle_t cublas;
    void *cublas_ws;
    uint8_t *d_w;   /* weight arena */
    uint8_t *d_act; /* activation arena */
    uint8_t *d_kv;  /* (L, 2, NP, P, Hkv, D) bf16 */
    size_t kv_layer_bytes; /* one layer's K (or V): NP P Hkv D 2 */
    uint8_t *d_in;
    size_t in_cap;
    int32_t *d_out;           /* (max_seqs) */
    uint8_t *h_in[2];         /* pinned, in_cap each */
    int32_t *h_out[2];        /* pinned, max_seqs each */
    attn_cuda_error_record *h_err[2]; /* pinned: each step's pool-bounds record */
    float *h_logits[2];       /* pinned (max_seqs, V), allocated on first need */
    cudaEvent_t ev_start[2], ev_done[2];
    pending pend[2];
    int head, npend;
    int graphs_on;
    graph_entry graphs[MAX_GRAPHS];
    int num_graphs;
    void *sampler_scratch;
    char err[512];
} cuda_backend;

/* ---- checked calls ------------------------------------------------------- */

static rkv_status failf(cuda_backend *b, rkv_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b->err, sizeof b->err, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s\n", b->err);
    return st;
}

/* Every CUDA, cuBLAS and attention call: on failure the message names the
 * file, line and call, and the function returns RKV_EDEVICE. */
#define CU(call)                                                                              \
    do {                                                                                      \
        cudaError_t e_ = (call);                                                              \
        if (e_ != cudaSuccess)                                                                \
            return failf(b, RKV_EDEVICE, "%s:%d: %s: %s", __FILE__, __LINE__, #call,          \
                         cudaGetErrorString(e_));                                             \
    } while (0)
#define CB(call)                                                                              \
    do {                                                                                      \
        cublasStatus_t s_ = (call);                                                           \
        if (s_ != CUBLAS_STATUS_SUCCESS)                                                      \
            return failf(b, RKV_EDEVICE, "%s:%d: %s: %s", __FILE__, __LINE__, #call,          \
                         cublasGetStatusString(s_));                                          \
    } while (0)
#define AT(call)                                                                              \
    do {                                                                                      \
        int r_ = (call);                                                                      \
        if (r_ != ATTN_OK)                                                                    \
            return failf(b, RKV_EDEVICE, "%s:%d: %s: %s", __FILE__, __LINE__, #call,          \
                         attn_strerror(r_));                                                  \
    } while (0)
#define TRY(expr)                                                                             \
    do {                                                                                      \
        rkv_status t_ = (expr);                                                               \
        if (t_ != RKV_OK) return t_;                                                          \
    } while (0)

/* ---- weights --------------------------------------------------------------- */

static bf16 *wbf(cuda_backend *b, size_t off) { return (bf16 *)(b->d_w + off); }
static float *wf(cuda_backend *b, size_t off) { return (float *)(b->d_w + off); }

/* The CPU model's seeded weights (model.c), generated on the device so that
 * cpu and cuda runs of one seed hold the same weights (bf16-rounded here).
 * Tensors are numbered 1, 2, ... in the CPU model's walk order: embed; per
 * layer attn_norm, wq, wk, wv, [bq, bk, bv], wo, mlp_norm, gate, up, down;
 * final_norm; lm_head when untied. Tensor k draws from the stream
 * rkv_splitmix64(seed ^ rkv_splitmix64(k)); uniform(-a, a) around mean with
 * a = std sqrt(3): embeddings std 2/sqrt(C), projections 1/sqrt(fan_in),
 * norms 1 +- 0.05 std, biases 0.1 std. */
typedef struct init_walk {
    cuda_backend *b;
    uint64_t seed, index;
    rkv_status st;
} init_walk;

static void init_one(init_walk *w, void *p, int to_bf16, int64_t n, double mean, double std)
{
    const uint64_t key = rkv_splitmix64(w->seed ^ rkv_splitmix64(++w->index));
    if (w->st != RKV_OK) return;
    cudaError_t e = rkv_init_seeded(p, to_bf16, n, key, mean, std * sqrt(3.0), w->b->stream);
    if (e != cudaSuccess)
        w->st = failf(w->b, RKV_EDEVICE, "%s:%d: seeded init of tensor %llu: %s", __FILE__,
                      __LINE__, (unsigned long long)w->index, cudaGetErrorString(e));
}

static rkv_status init_random(cuda_backend *b, uint64_t seed)
{
    const model_config *c = &b->cfg;
    const cuda_weight_plan *w = &b->wp;
    const int64_t V = c->vocab_size, C = c->hidden_size, F = c->intermediate_size;
    const int64_t qd = w->q_dim, kvd = w->kv_dim;
    const double s_emb = 2.0 / sqrt((double)C), s_c = 1.0 / sqrt((double)C),
                 s_qd = 1.0 / sqrt((double)qd), s_f = 1.0 / sqrt((double)F);
    init_walk iw = {b, seed, 0, RKV_OK};
    init_one(&iw, wbf(b, w->embed), 1, V * C, 0.0, s_emb);
    for (int l = 0; l < c->num_layers; l++) {
        const size_t base = w->layer0 + (size_t)l * w->layer_stride;
        init_one(&iw, wf(b, base + w->attn_norm), 0, C, 1.0, 0.05);
        bf16 *qkv = wbf(b, base + w->wqkv);
        init_one(&iw, qkv, 1, qd * C, 0.0, s_c);
        init_one(&iw, qkv + qd * C, 1, kvd * C, 0.0, s_c);
        init_one(&iw, qkv + (qd + kvd) * C, 1, kvd * C, 0.0, s_c);
        if (c->qkv_bias) {
            float *bias = wf(b, base + w->bqkv);
            init_one(&iw, bias, 0, qd, 0.0, 0.1);
            init_one(&iw, bias + qd, 0, kvd, 0.0, 0.1);
            init_one(&iw, bias + qd + kvd, 0, kvd, 0.0, 0.1);
        }
        init_one(&iw, wbf(b, base + w->wo), 1, C * qd, 0.0, s_qd);
        init_one(&iw, wf(b, base + w->mlp_norm), 0, C, 1.0, 0.05);
        bf16 *gu = wbf(b, base + w->wgate_up);
        init_one(&iw, gu, 1, F * C, 0.0, s_c);
        init_one(&iw, gu + F * C, 1, F * C, 0.0, s_c);
        init_one(&iw, wbf(b, base + w->wdown), 1, C * F, 0.0, s_f);
    }
    init_one(&iw, wf(b, w->final_norm), 0, C, 1.0, 0.05);
    if (!c->tie_word_embeddings) init_one(&iw, wbf(b, w->lm_head), 1, V * C, 0.0, s_emb);
    TRY(iw.st);
    CU(cudaStreamSynchronize(b->stream));
    return RKV_OK;
}

static uint16_t f32_to_bf16_rne(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* Host fp32 tensor -> device, converted to bf16 (to_bf16) or kept fp32, through
 * a pinned staging buffer in chunks. */
[[maybe_unused]] static rkv_status upload(cuda_backend *b, size_t dst_off, const float *src, int64_t n,
                         int to_bf16)
{
    const int64_t chunk = (int64_t)1 << 22;
    void *stage = NULL;
    CU(cudaMallocHost(&stage, (size_t)chunk * 4));
    rkv_status st = RKV_OK;
    for (int64_t i = 0; i < n && st == RKV_OK; i += chunk) {
        const int64_t m = n - i < chunk ? n - i : chunk;
        size_t bytes;
        if (to_bf16) {
            uint16_t *h = (uint16_t *)stage;
            for (int64_t j = 0; j < m; j++) h[j] = f32_to_bf16_rne(src[i + j]);
            bytes = (size_t)m * 2;
        } else {
            memcpy(stage, src + i, (size_t)m * 4);
            bytes = (size_t)m * 4;
        }
        cudaError_t e = cudaMemcpy(b->d_w + dst_off + (size_t)i * (to_bf16 ? 2 : 4), stage, bytes,
                                   cudaMemcpyHostToDevice);
        if (e != cudaSuccess)
            st = failf(b, RKV_EDEVICE, "%s:%d: upload of weights: %s", __FILE__, __LINE__,
                       cudaGetErrorString(e));
    }
    cudaFreeHost(stage);
    return st;
}

#ifdef RKV_CUDA_SAFETENSORS
/* Hugging Face names; every tensor converted to bf16 (norms, biases fp32). */
static rkv_status load_safetensors(cuda_backend *b, const char *path, char *err, size_t errlen)
{
    const model_config *c = &b->cfg;
    const cuda_weight_plan *w = &b->wp;
    const int64_t V = c->vocab_size, C = c->hidden_size, F = c->intermediate_size;
    const int64_t qd = w->q_dim, kvd = w->kv_dim;
    safetensors *st = NULL;
    TRY(safetensors_open(path, &st, err, errlen));
    float *host = (float *)malloc((size_t)(V * C > 3 * F * C ? V * C : 3 * F * C) * 4);
    rkv_status rc = host ? RKV_OK : RKV_ENOMEM;
    if (!host) snprintf(err, errlen, "cuda: no host memory to convert %s", path);
    /* One tensor: read as fp32 (shape checked by the loader), upload. */
#define LOAD(name, r, cc, off, bf)                                                            \
    do {                                                                                      \
        if (rc != RKV_OK) break;                                                              \
        int64_t shp_[2] = {(r), (cc)};                                                        \
        rc = safetensors_read_f32(st, (name), (cc) > 0 ? 2 : 1, shp_, host, err, errlen);     \
        if (rc == RKV_OK) rc = upload(b, (off), host, (r) * ((cc) > 0 ? (cc) : 1), (bf));     \
    } while (0)
    char name[160];
    LOAD("model.embed_tokens.weight", V, C, w->embed, 1);
    LOAD("model.norm.weight", C, 0, w->final_norm, 0);
    if (!c->tie_word_embeddings) LOAD("lm_head.weight", V, C, w->lm_head, 1);
    for (int l = 0; l < c->num_layers && rc == RKV_OK; l++) {
        const size_t base = w->layer0 + (size_t)l * w->layer_stride;
#define LN(suffix) (snprintf(name, sizeof name, "model.layers.%d.%s", l, suffix), name)
        LOAD(LN("input_layernorm.weight"), C, 0, base + w->attn_norm, 0);
        LOAD(LN("self_attn.q_proj.weight"), qd, C, base + w->wqkv, 1);
        LOAD(LN("self_attn.k_proj.weight"), kvd, C, base + w->wqkv + (size_t)(qd * C) * 2, 1);
        LOAD(LN("self_attn.v_proj.weight"), kvd, C, base + w->wqkv + (size_t)((qd + kvd) * C) * 2,
             1);
        if (c->qkv_bias) {
            LOAD(LN("self_attn.q_proj.bias"), qd, 0, base + w->bqkv, 0);
            LOAD(LN("self_attn.k_proj.bias"), kvd, 0, base + w->bqkv + (size_t)qd * 4, 0);
            LOAD(LN("self_attn.v_proj.bias"), kvd, 0, base + w->bqkv + (size_t)(qd + kvd) * 4, 0);
        }
        LOAD(LN("self_attn.o_proj.weight"), C, qd, base + w->wo, 1);
        LOAD(LN("post_attention_layernorm.weight"), C, 0, base + w->mlp_norm, 0);
        LOAD(LN("mlp.gate_proj.weight"), F, C, base + w->wgate_up, 1);
        LOAD(LN("mlp.up_proj.weight"), F, C, base + w->wgate_up + (size_t)(F * C) * 2, 1);
        LOAD(LN("mlp.down_proj.weight"), C, F, base + w->wdown, 1);
#undef LN
    }
#undef LOAD
    if (rc == RKV_EDEVICE) snprintf(err, errlen, "%s", b->err);
    free(host);
    safetensors_close(st);
    return rc;
}
#endif

/* (cos, sin) at every position, computed as the CPU model does: inverse
 * frequencies in fp32 (as the HF rotary embedding), angle = (float)pos * inv in
 * fp32, cos/sin in double rounded to fp32. */
static rkv_status upload_rope(cuda_backend *b)
{
    const int32_t half = b->cfg.head_dim / 2, P = b->cfg.max_position;
    float *h = (float *)malloc((size_t)P * half * 2 * sizeof(float));
    float *inv = (float *)malloc((size_t)half * sizeof(float));
    if (!h || !inv) {
        free(h);
        free(inv);
        return failf(b, RKV_ENOMEM, "cuda: no host memory for the RoPE table");
    }
    for (int32_t i = 0; i < half; i++) {
        const float e = (float)(2 * i) / (float)b->cfg.head_dim;
        inv[i] = (float)(1.0 / (double)(float)pow(b->cfg.rope_theta, (double)e));
    }
    for (int32_t p = 0; p < P; p++)
        for (int32_t i = 0; i < half; i++) {
            const float ang = (float)p * inv[i];
            h[((size_t)p * half + i) * 2] = (float)cos((double)ang);
            h[((size_t)p * half + i) * 2 + 1] = (float)sin((double)ang);
        }
    cudaError_t e = cudaMemcpy(b->d_act + b->ap.rope, h, (size_t)P * half * 8,
                               cudaMemcpyHostToDevice);
    free(h);
    free(inv);
    CU(e);
    return RKV_OK;
}

/* ---- one step on the device ------------------------------------------------ */

typedef struct step_dev {
    int32_t T, B, stride, max_seq_len, max_suffix, decode;
    const int32_t *tok, *pos, *slots, *q_starts, *prefix_lens, *seq_lens, *sample_rows,
        *page_table;
} step_dev;

/* y (M, N) fp32 = x (M, K) bf16 . w (N, K)^T bf16, fp32 compute. cuBLAS is
 * column-major: it sees y^T (N, M) = w (N, K) . x^T, i.e. op(w) = T. */
static rkv_status gemm(cuda_backend *b, const bf16 *x, int32_t M, int32_t K, const bf16 *w,
                       int32_t N, float *y)
{
    if (M <= 0) return RKV_OK;
    const float one = 1.0f, zero = 0.0f;
    CB(cublasGemmEx(b->cublas, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &one, w, CUDA_R_16BF, K, x,
                    CUDA_R_16BF, K, &zero, y, CUDA_R_32F, N, CUBLAS_COMPUTE_32F,
                    CUBLAS_GEMM_DEFAULT));
    return RKV_OK;
}

static rkv_status enqueue_model(cuda_backend *b, const step_dev *s)
{
    const model_config *c = &b->cfg;
    const cuda_weight_plan *w = &b->wp;
    const cuda_act_plan *a = &b->ap;
    cudaStream_t st = b->stream;
    const int32_t C = c->hidden_size, F = c->intermediate_size, T = s->T;
    const float eps = (float)c->rms_eps;
    float *resid = (float *)(b->d_act + a->resid), *proj = (float *)(b->d_act + a->proj);
    bf16 *normed = (bf16 *)(b->d_act + a->normed), *q = (bf16 *)(b->d_act + a->q),
         *k = (bf16 *)(b->d_act + a->k), *v = (bf16 *)(b->d_act + a->v),
         *ao = (bf16 *)(b->d_act + a->attn_out), *act = (bf16 *)(b->d_act + a->act);
    const float2 *rope = (const float2 *)(b->d_act + a->rope);

    CU(rkv_embed(wbf(b, w->embed), s->tok, resid, T, C, st));
    for (int l = 0; l < c->num_layers; l++) {
        const size_t base = w->layer0 + (size_t)l * w->layer_stride;
        /* 1: previous layer's MLP output joins the residual; normalise. */
        CU(rkv_add_rmsnorm(resid, l ? proj : NULL, wf(b, base + w->attn_norm), normed, T, C, eps,
                           st));
        TRY(gemm(b, normed, T, C, wbf(b, base + w->wqkv), w->qkv_dim, proj));
        CU(rkv_qkv_rope(proj, c->qkv_bias ? wf(b, base + w->bqkv) : NULL, rope, s->pos, q, k, v,
                        T, c->num_heads, c->num_kv_heads, c->head_dim, st));
        /* 2: this step's K/V into their pages, then attention. */
        uint8_t *kc = b->d_kv + (size_t)(2 * l) * b->kv_layer_bytes;
        uint8_t *vc = kc + b->kv_layer_bytes;
        AT(attn_store_kv_cuda(&b->shape, ATTN_BF16, T, (int32_t)b->base.num_pages, s->slots, k,
                              v, kc, vc, st));
        if (s->decode) {
            AT(attn_decode_cuda(&b->shape, ATTN_BF16, s->B, s->seq_lens, s->page_table, s->stride,
                                (int32_t)b->base.num_pages, s->max_seq_len, q, kc, vc, ao, NULL,
                                b->d_act + a->decode_ws, MAX_SPLITS, st));
        } else {
            attn_batch ab;
            ab.num_seqs = s->B;
            ab.max_pages = s->stride;
            ab.q_starts = s->q_starts;
            ab.prefix_lens = s->prefix_lens;
            ab.page_table = s->page_table;
            ab.max_suffix = s->max_suffix;
            ab.num_pages = (int32_t)b->base.num_pages;
            AT(attn_prefill_cuda(&b->shape, &ab, ATTN_BF16, q, k, v, kc, vc, ao, NULL, st));
        }
        TRY(gemm(b, ao, T, w->q_dim, wbf(b, base + w->wo), C, proj));
        /* 3: MLP. */
        CU(rkv_add_rmsnorm(resid, proj, wf(b, base + w->mlp_norm), normed, T, C, eps, st));
        TRY(gemm(b, normed, T, C, wbf(b, base + w->wgate_up), 2 * F, proj));
        CU(rkv_swiglu(proj, act, T, F, st));
        TRY(gemm(b, act, T, F, wbf(b, base + w->wdown), C, proj));
    }
    /* 4: only the rows that sample reach the final norm and the LM head. */
    bf16 *head_in = (bf16 *)(b->d_act + a->head_in);
    float *logits = (float *)(b->d_act + a->logits);
    CU(rkv_final_gather(resid, proj, s->sample_rows, wf(b, w->final_norm), head_in, s->B, C, eps,
                        st));
    TRY(gemm(b, head_in, s->B, C, wbf(b, w->lm_head), c->vocab_size, logits));
    CU(rkv_argmax(logits, s->sample_rows, b->d_out, s->B, c->vocab_size, st));
    return RKV_OK;
}

static step_dev step_pointers(cuda_backend *b, const cuda_step_layout *l)
{
    step_dev s;
    memset(&s, 0, sizeof s);
    s.T = l->num_tokens;
    s.B = l->num_seqs;
    s.stride = l->stride;
    s.tok = (const int32_t *)(b->d_in + l->token_ids);
    s.pos = (const int32_t *)(b->d_in + l->positions);
    s.slots = (const int32_t *)(b->d_in + l->slots);
    s.q_starts = (const int32_t *)(b->d_in + l->q_starts);
    s.prefix_lens = (const int32_t *)(b->d_in + l->prefix_lens);
    s.seq_lens = (const int32_t *)(b->d_in + l->seq_lens);
    s.sample_rows = (const int32_t *)(b->d_in + l->sample_rows);
    s.page_table = (const int32_t *)(b->d_in + l->page_table);
    return s;
}

/* The graph of a decode bucket, captured on first use. NULL (and no error)
 * when graphs are off, the table is full, or capture failed once (then graphs
 * stay off and the step runs eagerly). */
static rkv_status graph_get(cuda_backend *b, const cuda_step_layout *l, int decode,
                            int32_t max_suffix, cudaGraphExec_t *out)
{
    *out = NULL;
    if (!b->graphs_on) return RKV_OK;
    for (int i = 0; i < b->num_graphs; i++) {
        const graph_entry *g = &b->graphs[i];
        if (g->decode == decode && g->tokens == l->num_tokens && g->bucket == l->num_seqs &&
            g->stride == l->stride && g->max_suffix == max_suffix) {
            *out = g->exec;
            return RKV_OK;
        }
    }
    if (b->num_graphs == MAX_GRAPHS) return RKV_OK;
    step_dev s = step_pointers(b, l);
    s.decode = decode;
    s.max_suffix = max_suffix;
    s.max_seq_len = l->stride * b->base.page_size; /* grid sized for the bucket's longest */
    CU(cudaStreamBeginCapture(b->stream, cudaStreamCaptureModeThreadLocal));
    rkv_status st = enqueue_model(b, &s);
    cudaGraph_t g = NULL;
    cudaError_t e = cudaStreamEndCapture(b->stream, &g);
    cudaGraphExec_t exec = NULL;
    if (st == RKV_OK && e == cudaSuccess) e = cudaGraphInstantiate(&exec, g, 0);
    if (g) cudaGraphDestroy(g);
    if (st != RKV_OK || e != cudaSuccess) {
        (void)cudaGetLastError();
        fprintf(stderr, "cuda: capturing the decode graph for batch %d failed (%s); decode "
                        "steps run without graphs\n",
                (int)l->num_seqs, e != cudaSuccess ? cudaGetErrorString(e) : b->err);
        b->graphs_on = 0;
        return RKV_OK;
    }
    b->graphs[b->num_graphs].decode = decode;
    b->graphs[b->num_graphs].tokens = l->num_tokens;
    b->graphs[b->num_graphs].bucket = l->num_seqs;
    b->graphs[b->num_graphs].stride = l->stride;
    b->graphs[b->num_graphs].max_suffix = max_suffix;
    b->graphs[b->num_graphs].exec = exec;
    b->num_graphs++;
    *out = exec;
    return RKV_OK;
}

/* ---- submit / collect -------------------------------------------------------- */

/* A batch without sampling parameters samples greedily, as the cpu backend. */
static const sampling_params greedy_params = {0.0f, 0, 1.0f, 0, NULL, NULL, 0, 0};

static int is_greedy(const sampling_params *sp) { return sp->temperature <= 0 || sp->top_k == 1; }

/* Everything the device will index is range-checked here, on the host, so a
 * bad batch is an error message, never an out-of-bounds access. */
static rkv_status validate(cuda_backend *b, const fwd_batch *f, int32_t *max_used_pages,
                           int32_t *max_suffix, int32_t *max_seq_len, int *decode)
{
    const int32_t B = f->num_seqs, T = f->num_tokens, P = b->base.page_size;
    if (B < 1 || T < 1 || !f->token_ids || !f->positions || !f->q_starts || !f->prefix_lens ||
        !f->page_table || !f->slot_mapping || !f->sample_rows)
        return failf(b, RKV_EINVAL, "cuda forward: empty batch or missing array (B=%d T=%d)",
                     (int)B, (int)T);
    if (T > b->max_tokens)
        return failf(b, RKV_EINVAL,
                     "cuda forward: %d tokens in one step, the backend was sized for %d "
                     "(RKV_CUDA_MAX_TOKENS)",
                     (int)T, (int)b->max_tokens);
    if (B > b->max_seqs)
        return failf(b, RKV_EINVAL,
                     "cuda forward: %d sequences in one step, the backend was sized for %d "
                     "(RKV_CUDA_MAX_SEQS)",
                     (int)B, (int)b->max_seqs);
    if (f->q_starts[0] != 0 || f->q_starts[B] != T)
        return failf(b, RKV_EINVAL, "cuda forward: q_starts must run from 0 to num_tokens %d",
                     (int)T);
    const int64_t slots = b->base.num_pages * (int64_t)P;
    *max_used_pages = 1;
    *max_suffix = 0;
    *max_seq_len = 0;
    *decode = 1;
    for (int32_t i = 0; i < B; i++) {
        const int32_t s = f->q_starts[i + 1] - f->q_starts[i], p = f->prefix_lens[i];
        if (s < 1 || p < 0)
            return failf(b, RKV_EINVAL, "cuda forward: sequence %d has %d rows, prefix %d", (int)i,
                         (int)s, (int)p);
        const int64_t len = (int64_t)p + s;
        if (len > b->cfg.max_position)
            return failf(b, RKV_ERANGE, "cuda forward: sequence %d reaches %lld tokens, past "
                                        "the model's %d positions",
                         (int)i, (long long)len, (int)b->cfg.max_position);
        const int32_t pages = (int32_t)((len + P - 1) / P);
        if (pages > f->max_pages)
            return failf(b, RKV_EINVAL, "cuda forward: sequence %d needs %d pages, the page "
                                        "table has %d per row",
                         (int)i, (int)pages, (int)f->max_pages);
        for (int32_t j = 0; j < pages; j++) {
            const int32_t pg = f->page_table[(size_t)i * f->max_pages + j];
            if (pg < 0 || pg >= b->base.num_pages)
                return failf(b, RKV_ERANGE, "cuda forward: page_table[%d][%d] = %d outside the "
                                            "pool of %lld pages",
                             (int)i, (int)j, (int)pg, (long long)b->base.num_pages);
        }
        if (pages > *max_used_pages) *max_used_pages = pages;
        if (s > *max_suffix) *max_suffix = s;
        if (len > *max_seq_len) *max_seq_len = (int32_t)len;
        if (s != 1) *decode = 0;
        const int32_t r = f->sample_rows[i];
        if (r >= 0 && (r < f->q_starts[i] || r >= f->q_starts[i + 1]))
            return failf(b, RKV_EINVAL, "cuda forward: sample_rows[%d] = %d outside its rows "
                                        "[%d, %d)",
                         (int)i, (int)r, (int)f->q_starts[i], (int)f->q_starts[i + 1]);
        const sampling_params *sp = f->sampling ? &f->sampling[i] : &greedy_params;
        if (r >= 0 && (isnan(sp->temperature) || sp->temperature < 0 || isnan(sp->top_p) ||
                       sp->top_p <= 0))
            return failf(b, RKV_EINVAL, "cuda forward: sequence %d: bad sampling parameters "
                                        "(temperature %g, top_p %g)",
                         (int)i, (double)sp->temperature, (double)sp->top_p);
    }
    for (int32_t t = 0; t < T; t++) {
        if (f->token_ids[t] < 0 || f->token_ids[t] >= b->base.vocab_size)
            return failf(b, RKV_ERANGE, "cuda forward: token_ids[%d] = %d outside the vocabulary "
                                        "of %d",
                         (int)t, (int)f->token_ids[t], (int)b->base.vocab_size);
        if (f->positions[t] < 0 || f->positions[t] >= b->cfg.max_position)
            return failf(b, RKV_ERANGE, "cuda forward: positions[%d] = %d outside [0, %d)", (int)t,
                         (int)f->positions[t], (int)b->cfg.max_position);
        if (f->slot_mapping[t] < -1 || f->slot_mapping[t] >= slots)
            return failf(b, RKV_ERANGE, "cuda forward: slot_mapping[%d] = %d outside the pool's "
                                        "%lld slots",
                         (int)t, (int)f->slot_mapping[t], (long long)slots);
    }
    return RKV_OK;
}

/* Pack the batch into the pinned buffer at layout l; rows and sequences past
 * the batch (graph padding) are inert. */
static void pack(const fwd_batch *f, const cuda_step_layout *l, int32_t used_pages, uint8_t *h)
{
    const int32_t T = f->num_tokens, B = f->num_seqs, Tp = l->num_tokens, Bp = l->num_seqs;
    int32_t *tok = (int32_t *)(h + l->token_ids), *pos = (int32_t *)(h + l->positions),
            *slot = (int32_t *)(h + l->slots), *qs = (int32_t *)(h + l->q_starts),
            *pl = (int32_t *)(h + l->prefix_lens), *sl = (int32_t *)(h + l->seq_lens),
            *sr = (int32_t *)(h + l->sample_rows), *ss = (int32_t *)(h + l->sample_steps),
            *tk = (int32_t *)(h + l->top_k), *pt = (int32_t *)(h + l->page_table);
    float *temp = (float *)(h + l->temperature), *tp = (float *)(h + l->top_p);
    uint64_t *seed = (uint64_t *)(h + l->seeds);
    memcpy(tok, f->token_ids, (size_t)T * 4);
    memcpy(pos, f->positions, (size_t)T * 4);
    memcpy(slot, f->slot_mapping, (size_t)T * 4);
    for (int32_t t = T; t < Tp; t++) {
        tok[t] = 0;
        pos[t] = 0;
        slot[t] = -1;
    }
    cuda_plan_pad_q_starts(f->q_starts, B, T, Bp, Tp, qs);
    for (int32_t i = 0; i < Bp; i++) {
        const int real = i < B;
        pl[i] = real ? f->prefix_lens[i] : 0;
        sl[i] = real ? f->prefix_lens[i] + f->q_starts[i + 1] - f->q_starts[i] : 0;
        sr[i] = real ? f->sample_rows[i] : -1;
        const sampling_params *sp = real && f->sampling ? &f->sampling[i] : &greedy_params;
        ss[i] = real && f->sample_steps ? f->sample_steps[i] : 0;
        tk[i] = sp->top_k;
        temp[i] = sp->temperature;
        tp[i] = sp->top_p;
        seed[i] = sp->seed;
        int32_t *row = pt + (size_t)i * l->stride;
        const int32_t n = real ? used_pages : 0;
        if (real) memcpy(row, f->page_table + (size_t)i * f->max_pages, (size_t)n * 4);
        for (int32_t j = n; j < l->stride; j++) row[j] = 0;
    }
}

static rkv_status submit_ex(cuda_backend *b, const fwd_batch *f, int want_logits)
{
    if (b->npend == 2)
        return failf(b, RKV_EINVAL, "cuda submit: two steps already in flight; collect first");
    int32_t used_pages = 1, max_suffix = 0, max_seq_len = 0;
    int decode = 0;
    TRY(validate(b, f, &used_pages, &max_suffix, &max_seq_len, &decode));
    const int slot = (b->head + b->npend) % 2;
    pending *pd = &b->pend[slot];

    /* Shape of what the device runs: a padded decode bucket, or the batch. */
    cuda_step_shape sh;
    cuda_plan_step_shape(b->graphs_on, decode, f->num_tokens, f->num_seqs, max_suffix,
                         used_pages, b->max_tokens, b->max_seqs, b->max_stride,
                         MIXED_GRAPH_TOKENS, &sh);
    const int graph = sh.graph;
    cuda_step_layout l;
    char msg[256];
    rkv_status st = graph ? cuda_plan_step_layout(sh.tokens, sh.seqs, sh.stride, b->in_cap, &l,
                                                  msg, sizeof msg)
                          : cuda_plan_step_layout(f->num_tokens, f->num_seqs, used_pages,
                                                  b->in_cap, &l, msg, sizeof msg);
    if (st != RKV_OK) return failf(b, st, "%s", msg);
    pack(f, &l, used_pages, b->h_in[slot]);

    pd->num_seqs = f->num_seqs;
    pd->want_logits = want_logits;
    pd->host_sample = 0;
    for (int32_t i = 0; i < f->num_seqs; i++) {
        pd->sample_rows[i] = f->sample_rows[i];
        pd->sample_steps[i] = f->sample_steps ? f->sample_steps[i] : 0;
        pd->sampling[i] = f->sampling ? f->sampling[i] : greedy_params;
        if (f->sample_rows[i] >= 0 && !is_greedy(&pd->sampling[i])) pd->host_sample = 1;
    }
    const size_t logit_bytes = (size_t)f->num_seqs * b->base.vocab_size * 4;
    if ((pd->host_sample || want_logits) && !b->h_logits[slot])
        CU(cudaMallocHost((void **)&b->h_logits[slot],
                          (size_t)b->max_seqs * b->base.vocab_size * 4));

    CU(cudaEventRecord(b->ev_start[slot], b->stream));
    CU(cudaMemcpyAsync(b->d_in, b->h_in[slot], l.bytes, cudaMemcpyHostToDevice, b->stream));
    cudaGraphExec_t exec = NULL;
    if (graph) TRY(graph_get(b, &l, decode, sh.suffix_bound, &exec));
    if (exec) {
        CU(cudaGraphLaunch(exec, b->stream));
    } else {
        /* Eager: the graph may have been refused, so lay the batch out unpadded. */
        if (graph) {
            TRY(cuda_plan_step_layout(f->num_tokens, f->num_seqs, used_pages, b->in_cap, &l, msg,
                                      sizeof msg));
            pack(f, &l, used_pages, b->h_in[slot]);
            CU(cudaMemcpyAsync(b->d_in, b->h_in[slot], l.bytes, cudaMemcpyHostToDevice,
                               b->stream));
        }
        step_dev s = step_pointers(b, &l);
        s.decode = decode;
        s.max_seq_len = max_seq_len;
        s.max_suffix = max_suffix;
        TRY(enqueue_model(b, &s));
    }
    CU(cudaMemcpyAsync(b->h_out[slot], b->d_out, (size_t)f->num_seqs * 4, cudaMemcpyDeviceToHost,
                       b->stream));
    if (pd->host_sample || want_logits)
        CU(cudaMemcpyAsync(b->h_logits[slot], b->d_act + b->ap.logits, logit_bytes,
                           cudaMemcpyDeviceToHost, b->stream));
    /* The kernels' pool-bounds record, copied out without a sync: collect reads it. */
    AT(attn_cuda_error_capture(b->h_err[slot], b->stream));
    pd->layout = l;
    CU(cudaEventRecord(b->ev_done[slot], b->stream));
    b->npend++;
    return RKV_OK;
}

/* A page id or slot outside the pool met by a kernel of the step in slot
 * (attention.h, "Pool bounds"): fail the step naming the first sequence of
 * the batch whose page table row holds that page. */
static rkv_status check_bounds(cuda_backend *b, int slot)
{
    const pending *pd = &b->pend[slot];
    if (attn_cuda_error_report(b->h_err[slot], "cuda step") == ATTN_OK) return RKV_OK;
    int32_t bad[3];
    attn_cuda_error_first(b->h_err[slot], &bad[0], &bad[1], &bad[2]);
    const int32_t page = bad[0] >= 0 ? bad[0] : bad[1];
    const cuda_step_layout *l = &pd->layout;
    const int32_t *pt = (const int32_t *)(b->h_in[slot] + l->page_table);
    for (int32_t i = 0; page >= 0 && i < pd->num_seqs; i++)
        for (int32_t j = 0; j < l->stride; j++)
            if (pt[(size_t)i * l->stride + j] == page)
                return failf(b, RKV_EDEVICE,
                             "cuda step: sequence %d of the batch uses page %d (entry %d of its "
                             "page table), outside the pool of %lld pages",
                             (int)i, (int)page, (int)j, (long long)b->base.num_pages);
    if (bad[2] >= 0)
        return failf(b, RKV_EDEVICE, "cuda step: K/V slot %d is outside the pool of %lld pages",
                     (int)bad[2], (long long)b->base.num_pages);
    return failf(b, RKV_EDEVICE, "cuda step: page %d is outside the pool of %lld pages",
                 (int)page, (long long)b->base.num_pages);
}

static rkv_status collect_ex(cuda_backend *b, int32_t *out_tokens, float *out_logits,
                             double *step_seconds)
{
    if (b->npend == 0) return failf(b, RKV_EINVAL, "cuda collect: no step in flight");
    const int slot = b->head;
    pending *pd = &b->pend[slot];
    b->head = (b->head + 1) % 2;
    b->npend--;
    CU(cudaEventSynchronize(b->ev_done[slot]));
    TRY(check_bounds(b, slot));
    float ms = 0.0f;
    CU(cudaEventElapsedTime(&ms, b->ev_start[slot], b->ev_done[slot]));
    if (step_seconds) *step_seconds = ms * 1e-3;
    const int32_t V = b->base.vocab_size;
    for (int32_t i = 0; i < pd->num_seqs; i++) {
        if (pd->sample_rows[i] < 0) continue;
        if (is_greedy(&pd->sampling[i])) {
            out_tokens[i] = b->h_out[slot][i];
        } else {
            rkv_status st = sampler_sample(b->h_logits[slot] + (size_t)i * V, V, &pd->sampling[i],
                                           pd->sample_steps[i], b->sampler_scratch,
                                           &out_tokens[i]);
            if (st != RKV_OK)
                return failf(b, st, "cuda collect: sampling sequence %d failed (%s)", (int)i,
                             rkv_status_str(st));
        }
    }
    if (out_logits && pd->want_logits)
        memcpy(out_logits, b->h_logits[slot], (size_t)pd->num_seqs * V * 4);
    return RKV_OK;
}

static rkv_status op_submit(backend *bb, const fwd_batch *f)
{
    return submit_ex((cuda_backend *)bb, f, 0);
}

static rkv_status op_collect(backend *bb, int32_t *out_tokens, double *step_seconds)
{
    return collect_ex((cuda_backend *)bb, out_tokens, NULL, step_seconds);
}

static rkv_status op_forward(backend *bb, const fwd_batch *f, int32_t *out_tokens,
                             float *out_logits, double *step_seconds)
{
    cuda_backend *b = (cuda_backend *)bb;
    /* A synchronous step after submitted ones would return their tokens. */
    if (b->npend) return failf(b, RKV_EINVAL, "cuda forward: collect the submitted steps first");
    TRY(submit_ex(b, f, out_logits != NULL));
    return collect_ex(b, out_tokens, out_logits, step_seconds);
}

/* ---- page copies (spill tier) ------------------------------------------------ */

static rkv_status op_page_bytes(backend *bb, size_t *bytes)
{
    cuda_backend *b = (cuda_backend *)bb;
    *bytes = cuda_plan_page_bytes(&b->cfg, b->base.page_size, 2);
    return RKV_OK;
}

/* Host layout of a page: (L, 2, P, Hkv, D) bf16. */
static rkv_status page_copy(cuda_backend *b, int32_t page, void *host, int to_host)
{
    if (page < 0 || page >= b->base.num_pages)
        return failf(b, RKV_ERANGE, "cuda page copy: page %d outside the pool of %lld", (int)page,
                     (long long)b->base.num_pages);
    const size_t pb = (size_t)b->base.page_size * b->cfg.num_kv_heads * b->cfg.head_dim * 2;
    CU(cudaStreamSynchronize(b->stream)); /* in-flight steps may write this page */
    for (int i = 0; i < 2 * b->cfg.num_layers; i++) {
        uint8_t *dev = b->d_kv + (size_t)i * b->kv_layer_bytes + (size_t)page * pb;
        uint8_t *h = (uint8_t *)host + (size_t)i * pb;
        if (to_host) CU(cudaMemcpyAsync(h, dev, pb, cudaMemcpyDeviceToHost, b->stream));
        else CU(cudaMemcpyAsync(dev, h, pb, cudaMemcpyHostToDevice, b->stream));
    }
    CU(cudaStreamSynchronize(b->stream));
    return RKV_OK;
}

static rkv_status op_read_page(backend *bb, int32_t page, void *dst)
{
    return page_copy((cuda_backend *)bb, page, dst, 1);
}

static rkv_status op_write_page(backend *bb, int32_t page, const void *src)
{
    return page_copy((cuda_backend *)bb, page, (void *)src, 0);
}

static void op_destroy(backend *bb)
{
    cuda_backend *b = (cuda_backend *)bb;
    if (!b) return;
    if (b->stream) cudaStreamSynchronize(b->stream);
    for (int i = 0; i < b->num_graphs; i++) cudaGraphExecDestroy(b->graphs[i].exec);
    for (int s = 0; s < 2; s++) {
        if (b->h_in[s]) cudaFreeHost(b->h_in[s]);
        if (b->h_out[s]) cudaFreeHost(b->h_out[s]);
        if (b->h_err[s]) cudaFreeHost(b->h_err[s]);
        if (b->h_logits[s]) cudaFreeHost(b->h_logits[s]);
        if (b->ev_start[s]) cudaEventDestroy(b->ev_start[s]);
        if (b->ev_done[s]) cudaEventDestroy(b->ev_done[s]);
        free(b->pend[s].sample_rows);
        free(b->pend[s].sample_steps);
        free(b->pend[s].sampling);
    }
    if (b->cublas) cublasDestroy(b->cublas);
    cudaFree(b->cublas_ws);
    cudaFree(b->d_w);
    cudaFree(b->d_act);
    cudaFree(b->d_kv);
    cudaFree(b->d_in);
    cudaFree(b->d_out);
    if (b->stream) cudaStreamDestroy(b->stream);
    free(b->sampler_scratch);
    free(b);
}

static const backend_ops cuda_ops = {
    "cuda", op_forward, op_submit, op_collect, op_page_bytes, op_read_page, op_write_page,
    op_destroy, 0,
};

/* ---- creation ------------------------------------------------------------------ */

/* An integer from the environment, def when unset, -1 when not an integer in
 * [lo, 2^24]. */
static int32_t env_int(const char *name, int32_t def, int32_t lo)
{
    const char *s = getenv(name);
    if (!s || !*s) return def;
    char *end;
    long v = strtol(s, &end, 10);
    return (*end || v < lo || v > (1L << 24)) ? -1 : (int32_t)v;
}

/* A named device allocation: on failure the message names the part. */
static rkv_status dev_alloc(cuda_backend *b, void **p, size_t bytes, const char *what)
{
    cudaError_t e = cudaMalloc(p, bytes ? bytes : 1);
    if (e == cudaSuccess) return RKV_OK;
    (void)cudaGetLastError();
    char sz[32];
    cuda_plan_format_bytes(bytes, sz, sizeof sz);
    return failf(b, e == cudaErrorMemoryAllocation ? RKV_ENOSPC : RKV_EDEVICE,
                 "%s:%d: cuda: allocating the %s (%s) failed: %s; lower --mem-fraction, "
                 "--num-pages or --max-batched-tokens, or choose a smaller --model",
                 __FILE__, __LINE__, what, sz, cudaGetErrorString(e));
}

/* The attention shape for page size P and the step limits from the
 * environment (RKV_CUDA_MAX_TOKENS, RKV_CUDA_MAX_SEQS). */
static rkv_status create_limits(cuda_backend *b, int32_t P, char *err, size_t errlen)
{
    const model_config *c = &b->cfg;
    b->shape.num_q_heads = c->num_heads;
    b->shape.num_kv_heads = c->num_kv_heads;
    b->shape.head_dim = c->head_dim;
    b->shape.page_size = P;
    b->shape.scale = 1.0f / sqrtf((float)c->head_dim);
    int rc = attn_shape_check(&b->shape);
    if (rc != ATTN_OK) {
        snprintf(err, errlen, "cuda: --page-size %d / model shape rejected by attention: %s",
                 (int)P, attn_strerror(rc));
        return RKV_EINVAL;
    }
    b->max_tokens = env_int("RKV_CUDA_MAX_TOKENS", 8192, 1);
    b->max_seqs = env_int("RKV_CUDA_MAX_SEQS", 256, 1);
    if (b->max_tokens < 1 || b->max_seqs < 1 || b->max_tokens > 65535) {
        snprintf(err, errlen, "cuda: RKV_CUDA_MAX_TOKENS must be an integer in [1, 65535] and "
                              "RKV_CUDA_MAX_SEQS a positive integer");
        return RKV_EINVAL;
    }
    if (b->max_seqs > b->max_tokens) b->max_seqs = b->max_tokens;
    b->max_stride = (c->max_position + P - 1) / P;
    return RKV_OK;
}

/* The weight, activation and step-input layouts, then the device memory
 * they leave for the KV pool (*m). Nothing is allocated yet. */
static rkv_status create_plan(cuda_backend *b, const backend_config *cfg, int32_t P,
                              cuda_mem_plan *m, char *err, size_t errlen)
{
    const model_config *c = &b->cfg;
    TRY(cuda_plan_weights(c, &b->wp, err, errlen));
    const size_t ws = attn_decode_workspace_bytes(&b->shape, b->max_seqs, MAX_SPLITS);
    TRY(cuda_plan_activations(c, b->max_tokens, b->max_seqs, c->max_position, ws, &b->ap, err,
                              errlen));
    cuda_step_layout big;
    TRY(cuda_plan_step_layout(b->max_tokens, b->max_seqs, b->max_stride, (size_t)-1, &big, err,
                              errlen));
    b->in_cap = big.bytes;

    size_t free_b = 0, total_b = 0;
    CU(cudaMemGetInfo(&free_b, &total_b));
    cuda_mem_request r;
    memset(&r, 0, sizeof r);
    r.free_bytes = free_b;
    r.mem_fraction = cfg && cfg->mem_fraction > 0 ? cfg->mem_fraction : 0.9;
    r.weight_bytes = b->wp.total_bytes;
    r.act_bytes = b->ap.total_bytes;
    r.act_tokens = b->max_tokens;
    r.reserve_bytes = CUBLAS_WS_BYTES + GRAPH_RESERVE + b->in_cap + (size_t)b->max_seqs * 4;
    r.page_bytes = cuda_plan_page_bytes(c, P, 2);
    r.num_pages = cfg ? cfg->num_pages : 0;
    r.min_pages = (b->max_tokens + P - 1) / P + b->max_seqs;
    TRY(cuda_plan_memory(&r, m, err, errlen));
    return RKV_OK;
}

/* The stream, the planned device buffers (KV zeroed) and cuBLAS on the
 * stream with its own workspace. */
static rkv_status create_device(cuda_backend *b, const cuda_mem_plan *m)
{
    CU(cudaStreamCreateWithFlags(&b->stream, cudaStreamNonBlocking));
    TRY(dev_alloc(b, (void **)&b->d_w, b->wp.total_bytes, "weights"));
    TRY(dev_alloc(b, (void **)&b->d_act, b->ap.total_bytes, "activations"));
    TRY(dev_alloc(b, (void **)&b->d_kv, m->kv_bytes, "KV pool"));
    TRY(dev_alloc(b, (void **)&b->d_in, b->in_cap, "step inputs"));
    TRY(dev_alloc(b, (void **)&b->d_out, (size_t)b->max_seqs * 4, "sampled ids"));
    TRY(dev_alloc(b, &b->cublas_ws, CUBLAS_WS_BYTES, "cuBLAS workspace"));
    b->kv_layer_bytes = m->kv_bytes / (2 * (size_t)b->cfg.num_layers);
    /* Unwritten KV must not be NaN bits: attention multiplies masked rows by 0. */
    CU(cudaMemsetAsync(b->d_kv, 0, m->kv_bytes, b->stream));

    CB(cublasCreate(&b->cublas));
    CB(cublasSetStream(b->cublas, b->stream));
    CB(cublasSetWorkspace(b->cublas, b->cublas_ws, CUBLAS_WS_BYTES));
    CB(cublasSetMathMode(b->cublas, CUBLAS_DEFAULT_MATH));
    return RKV_OK;
}

/* Per in-flight step slot (two): pinned input, output and error buffers,
 * its events and its sampling bookkeeping; then the host sampler's scratch. */
static rkv_status create_host(cuda_backend *b)
{
    for (int s = 0; s < 2; s++) {
        CU(cudaMallocHost((void **)&b->h_in[s], b->in_cap));
        CU(cudaMallocHost((void **)&b->h_out[s], (size_t)b->max_seqs * 4));
        CU(cudaMallocHost((void **)&b->h_err[s], sizeof(attn_cuda_error_record)));
        CU(cudaEventCreate(&b->ev_start[s]));
        CU(cudaEventCreate(&b->ev_done[s]));
        b->pend[s].sample_rows = (int32_t *)malloc((size_t)b->max_seqs * 4);
        b->pend[s].sample_steps = (int32_t *)malloc((size_t)b->max_seqs * 4);
        b->pend[s].sampling = (sampling_params *)malloc((size_t)b->max_seqs * sizeof(sampling_params));
        if (!b->pend[s].sample_rows || !b->pend[s].sample_steps || !b->pend[s].sampling)
            return failf(b, RKV_ENOMEM, "cuda: no host memory for step bookkeeping");
    }
    b->sampler_scratch = malloc(sampler_scratch_bytes(b->cfg.vocab_size));
    if (!b->sampler_scratch) return failf(b, RKV_ENOMEM, "cuda: no host memory for the sampler");
    return RKV_OK;
}

/* Weights from --weights (safetensors) or seeded random ones, and the RoPE
 * tables, on the device before the first step. */
static rkv_status create_weights(cuda_backend *b, const backend_config *cfg, char *err,
                                 size_t errlen)
{
    if (cfg && cfg->weights) {
#ifdef RKV_CUDA_SAFETENSORS
        TRY(load_safetensors(b, cfg->weights, err, errlen));
#else
        snprintf(err, errlen, "cuda: --weights needs the safetensors loader, not built in");
        return RKV_ENOTSUP;
#endif
    } else {
        TRY(init_random(b, cfg ? cfg->seed : 0));
    }
    TRY(upload_rope(b));
    CU(cudaStreamSynchronize(b->stream));
    return RKV_OK;
}

/* The backend's public fields, its one-line description and the memory
 * split on stderr. */
static rkv_status create_describe(cuda_backend *b, const cuda_mem_plan *m, int32_t P)
{
    const model_config *c = &b->cfg;
    b->base.ops = &cuda_ops;
    b->base.vocab_size = c->vocab_size;
    b->base.page_size = P;
    b->base.num_pages = m->num_pages;
    b->base.max_context = c->max_position;
    cudaDeviceProp prop;
    CU(cudaGetDeviceProperties(&prop, 0));
    char wsz[32], asz[32], ksz[32];
    cuda_plan_format_bytes(b->wp.total_bytes, wsz, sizeof wsz);
    cuda_plan_format_bytes(b->ap.total_bytes, asz, sizeof asz);
    cuda_plan_format_bytes(m->kv_bytes, ksz, sizeof ksz);
    snprintf(b->base.description, sizeof b->base.description,
             "cuda %.60s: %.40s L=%d C=%d V=%d bf16, KV pool %lld pages x %d tokens", prop.name,
             c->name, (int)c->num_layers, (int)c->hidden_size, (int)c->vocab_size,
             (long long)m->num_pages, (int)P);
    fprintf(stderr,
            "cuda: %s; weights %s, activations %s (%d tokens, %d sequences), KV pool %s = %lld "
            "pages of %d tokens (%lld tokens)\n",
            prop.name, wsz, asz, (int)b->max_tokens, (int)b->max_seqs, ksz,
            (long long)m->num_pages, (int)P, (long long)m->num_pages * P);
    return RKV_OK;
}

/* Model config, limits, memory plan, device and host buffers, weights,
 * graph mode, description: each step needs the ones before it. */
static rkv_status create(cuda_backend *b, const backend_config *cfg, char *err, size_t errlen)
{
    TRY(model_config_load(cfg ? cfg->model : NULL, &b->cfg, err, errlen));
    const int32_t P = cfg && cfg->page_size > 0 ? cfg->page_size : 16;
    TRY(create_limits(b, P, err, errlen));
    cuda_mem_plan m;
    TRY(create_plan(b, cfg, P, &m, err, errlen));
    TRY(create_device(b, &m));
    TRY(create_host(b));
    TRY(create_weights(b, cfg, err, errlen));

    b->graphs_on = env_int("RKV_CUDA_GRAPHS", 1, 0);
    if (b->graphs_on < 0 || b->graphs_on > 2) {
        snprintf(err, errlen, "cuda: RKV_CUDA_GRAPHS must be 0 (off), 1 (decode steps) or 2 "
                              "(decode and small mixed steps)");
        return RKV_EINVAL;
    }
    return create_describe(b, &m, P);
}

extern "C" int backend_cuda_available(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return n > 0;
}

extern "C" rkv_status backend_cuda_create(const backend_config *cfg, backend **out, char *err,
                                          size_t errlen)
{
    *out = NULL;
    if (!backend_cuda_available()) {
        snprintf(err, errlen, "backend cuda: no CUDA device found (use --backend cpu or sim)");
        return RKV_ENOTSUP;
    }
    cuda_backend *b = (cuda_backend *)calloc(1, sizeof *b);
    if (!b) {
        snprintf(err, errlen, "backend cuda: out of host memory");
        return RKV_ENOMEM;
    }
    err[0] = '\0';
    rkv_status st = create(b, cfg, err, errlen);
    if (st != RKV_OK) {
        if (!err[0]) snprintf(err, errlen, "%s", b->err);
        op_destroy(&b->base);
        return st;
    }
    *out = &b->base;
    return RKV_OK;
}

extern "C" int backend_cuda_set_graphs(backend *bb, int on)
{
    cuda_backend *b = (cuda_backend *)bb;
    b->graphs_on = on;
    return b->num_graphs;
}
