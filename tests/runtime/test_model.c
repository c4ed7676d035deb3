/* test_model.c - the CPU model against a plain double-precision reference,
 * RoPE at shifted positions (whole prompt vs prefix in pages + suffix, chunks,
 * token by token), batch validation and the cpu backend (suite runtime).
 * Seeded; the seed is printed on failure. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_run.h"
#include "backend.h"
#include "model.h"
#include "sampler.h"

/* fp32 engine vs double reference: |a - b| <= TOL * (1 + |b|). */
#define TOL 1e-4

static model_config tiny(model_arch arch, int layers, int tied)
{
    model_config c;
    memset(&c, 0, sizeof c);
    snprintf(c.name, sizeof c.name, "tiny");
    c.arch = arch;
    c.vocab_size = 97;
    c.hidden_size = 96;
    c.intermediate_size = 80;
    c.num_layers = layers;
    c.num_heads = 4;
    c.num_kv_heads = 2;
    c.head_dim = 64; /* Hq * D = 256 != C: exercises the projections' shapes */
    c.rope_theta = 10000.0;
    c.rms_eps = 1e-5;
    c.tie_word_embeddings = tied;
    c.qkv_bias = arch == MODEL_ARCH_QWEN2;
    c.max_position = 4096;
    c.eos_token_id = -1;
    return c;
}

/* ---- reference forward: naive loops, double, whole sequence from position 0 */

static void ref_rmsnorm(double *out, const double *x, const float *w, int C, double eps)
{
    double ss = 0;
    for (int i = 0; i < C; i++) ss += x[i] * x[i];
    double r = 1.0 / sqrt(ss / C + eps);
    for (int i = 0; i < C; i++) out[i] = x[i] * r * w[i];
}

static void ref_linear(double *out, const double *in, const float *w, const float *b, int N,
                       int K)
{
    for (int n = 0; n < N; n++) {
        double s = b ? b[n] : 0.0;
        for (int k = 0; k < K; k++) s += (double)w[(size_t)n * K + k] * in[k];
        out[n] = s;
    }
}

static void ref_rope(double *v, int H, int D, int pos, double theta)
{
    for (int h = 0; h < H; h++)
        for (int i = 0; i < D / 2; i++) {
            double ang = pos * pow(theta, -2.0 * i / D);
            double a = v[h * D + i], b = v[h * D + i + D / 2];
            v[h * D + i] = a * cos(ang) - b * sin(ang);
            v[h * D + i + D / 2] = b * cos(ang) + a * sin(ang);
        }
}

/* logits (V) of the last token of tokens[0..n). */
static void ref_forward(const model *m, const int32_t *tokens, int n, double *logits)
{
    const model_config *c = &m->cfg;
    const int C = c->hidden_size, F = c->intermediate_size, Hq = c->num_heads,
              Hkv = c->num_kv_heads, D = c->head_dim, QD = Hq * D, KD = Hkv * D;
    double *x = calloc((size_t)n * C, sizeof *x), *h = malloc(sizeof(double) * C);
    double *q = malloc(sizeof(double) * (size_t)n * QD), *k = malloc(sizeof(double) * (size_t)n * KD),
           *v = malloc(sizeof(double) * (size_t)n * KD), *a = malloc(sizeof(double) * QD),
           *o = malloc(sizeof(double) * C), *g = malloc(sizeof(double) * F),
           *u = malloc(sizeof(double) * F), *s = malloc(sizeof(double) * n);
    for (int t = 0; t < n; t++)
        for (int i = 0; i < C; i++) x[(size_t)t * C + i] = m->embed[(size_t)tokens[t] * C + i];
    for (int l = 0; l < c->num_layers; l++) {
        const model_layer *L = &m->layers[l];
        for (int t = 0; t < n; t++) {
            ref_rmsnorm(h, x + (size_t)t * C, L->attn_norm, C, c->rms_eps);
            ref_linear(q + (size_t)t * QD, h, L->wq, L->bq, QD, C);
            ref_linear(k + (size_t)t * KD, h, L->wk, L->bk, KD, C);
            ref_linear(v + (size_t)t * KD, h, L->wv, L->bv, KD, C);
            ref_rope(q + (size_t)t * QD, Hq, D, t, c->rope_theta);
            ref_rope(k + (size_t)t * KD, Hkv, D, t, c->rope_theta);
        }
        for (int t = 0; t < n; t++) { /* causal attention for query t */
            for (int hq = 0; hq < Hq; hq++) {
                int kh = hq / (Hq / Hkv);
                double mx = -INFINITY, sum = 0;
                for (int j = 0; j <= t; j++) {
                    double d = 0;
                    for (int e = 0; e < D; e++)
                        d += q[(size_t)t * QD + hq * D + e] * k[(size_t)j * KD + kh * D + e];
                    s[j] = d / sqrt((double)D);
                    mx = fmax(mx, s[j]);
                }
                for (int j = 0; j <= t; j++) sum += s[j] = exp(s[j] - mx);
                for (int e = 0; e < D; e++) {
                    double acc = 0;
                    for (int j = 0; j <= t; j++) acc += s[j] * v[(size_t)j * KD + kh * D + e];
                    a[hq * D + e] = acc / sum;
                }
            }
            ref_linear(o, a, L->wo, NULL, C, QD);
            for (int i = 0; i < C; i++) x[(size_t)t * C + i] += o[i];
        }
        for (int t = 0; t < n; t++) {
            ref_rmsnorm(h, x + (size_t)t * C, L->mlp_norm, C, c->rms_eps);
            ref_linear(g, h, L->w_gate, NULL, F, C);
            ref_linear(u, h, L->w_up, NULL, F, C);
            for (int i = 0; i < F; i++) g[i] = g[i] / (1.0 + exp(-g[i])) * u[i];
            ref_linear(o, g, L->w_down, NULL, C, F);
            for (int i = 0; i < C; i++) x[(size_t)t * C + i] += o[i];
        }
    }
    ref_rmsnorm(h, x + (size_t)(n - 1) * C, m->final_norm, C, c->rms_eps);
    ref_linear(logits, h, m->lm_head, NULL, c->vocab_size, C);
    free(x); free(h); free(q); free(k); free(v); free(a); free(o); free(g); free(u); free(s);
}

/* ---- a tiny driver: sequences with their own pages, run in steps --------- */

typedef struct seq {
    const int32_t *tokens;
    int32_t len;      /* tokens in pages so far */
    int32_t pages[64];
} seq;

/* One step: for each seq i, feed tokens [seqs[i].len, seqs[i].len + n[i]) with
 * that prefix in pages; sample from the last row. logits (B, V). */
static rkv_status step(model *m, kv_cache *kv, seq *seqs, const int32_t *n, int B, float *logits,
                       int shift_positions)
{
    int32_t T = 0;
    for (int i = 0; i < B; i++) T += n[i];
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)(T + 1)),
            *pos = malloc(sizeof(int32_t) * (size_t)(T + 1)),
            *slot = malloc(sizeof(int32_t) * (size_t)(T + 1));
    int32_t qs[9], pl[8], sr[8], pt[8 * 64];
    const int P = kv->page_size;
    qs[0] = 0;
    for (int i = 0, r = 0; i < B; i++) {
        pl[i] = seqs[i].len;
        for (int j = 0; j < n[i]; j++, r++) {
            int32_t p = seqs[i].len + j;
            tok[r] = seqs[i].tokens[p];
            pos[r] = shift_positions ? p : j;
            slot[r] = seqs[i].pages[p / P] * P + p % P;
        }
        qs[i + 1] = r;
        sr[i] = n[i] > 0 ? r - 1 : -1;
        memcpy(pt + i * 64, seqs[i].pages, sizeof seqs[i].pages);
    }
    fwd_batch b = {.num_seqs = B, .num_tokens = T, .token_ids = tok, .positions = pos,
                   .q_starts = qs, .prefix_lens = pl, .page_table = pt, .max_pages = 64,
                   .slot_mapping = slot, .sample_rows = sr};
    char err[256];
    rkv_status st = model_forward(m, kv, &b, logits, err, sizeof err);
    if (st) fprintf(stderr, "forward: %s\n", err);
    for (int i = 0; i < B; i++) seqs[i].len += n[i];
    free(tok); free(pos); free(slot);
    return st;
}

static void random_tokens(int32_t *t, int n, int V, uint64_t seed)
{
    for (int i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        t[i] = (int32_t)((seed >> 33) % (uint64_t)V);
    }
}

static void assign_pages(seq *s, int first, int count)
{
    for (int j = 0; j < 64; j++) s->pages[j] = j < count ? first + (count - 1 - j) : -1;
}

static double max_err(const float *a, const double *ref, int n)
{
    double e = 0;
    for (int i = 0; i < n; i++) e = fmax(e, fabs(a[i] - ref[i]) / (1 + fabs(ref[i])));
    return e;
}

static double max_diff(const float *a, const float *b, int n)
{
    double e = 0;
    for (int i = 0; i < n; i++) e = fmax(e, fabs((double)a[i] - b[i]) / (1 + fabs((double)b[i])));
    return e;
}

/* One layer (and two), both architectures, tied and untied, against the
 * reference; a batch of two sequences, one with a prefix already in pages. */
START_TEST(layers_match_reference)
{
    const struct { model_arch arch; int layers, tied; } cases[] = {
        {MODEL_ARCH_LLAMA, 1, 1}, {MODEL_ARCH_QWEN2, 1, 0}, {MODEL_ARCH_QWEN2, 2, 1},
        {MODEL_ARCH_LLAMA, 2, 0},
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        uint64_t seed = 1000 + ci;
        model_config c = tiny(cases[ci].arch, cases[ci].layers, cases[ci].tied);
        model *m;
        char err[256];
        ck_assert_msg(model_create(&c, NULL, seed, 1, &m, err, sizeof err) == RKV_OK, "%s", err);
        kv_cache kv;
        ck_assert_int_eq(kv_cache_init(&kv, &c, 32, 4), RKV_OK);
        int32_t ta[23], tb[9];
        random_tokens(ta, 23, c.vocab_size, seed);
        random_tokens(tb, 9, c.vocab_size, seed + 77);
        seq s[2] = {{.tokens = ta}, {.tokens = tb}};
        assign_pages(&s[0], 0, 6);
        assign_pages(&s[1], 10, 3);
        float logits[2 * 97];
        double ref[97];
        /* seq a: 13 tokens first (alone), then 10 more beside b's whole prompt */
        int32_t n1[1] = {13};
        ck_assert_int_eq(step(m, &kv, s, n1, 1, logits, 1), RKV_OK);
        ref_forward(m, ta, 13, ref);
        double e = max_err(logits, ref, c.vocab_size);
        ck_assert_msg(e < TOL, "seed %llu case %zu: first chunk err %g",
                      (unsigned long long)seed, ci, e);
        int32_t n2[2] = {10, 9};
        ck_assert_int_eq(step(m, &kv, s, n2, 2, logits, 1), RKV_OK);
        ref_forward(m, ta, 23, ref);
        e = max_err(logits, ref, c.vocab_size);
        ck_assert_msg(e < TOL, "seed %llu case %zu: seq a with prefix err %g",
                      (unsigned long long)seed, ci, e);
        ref_forward(m, tb, 9, ref);
        e = max_err(logits + c.vocab_size, ref, c.vocab_size);
        ck_assert_msg(e < TOL, "seed %llu case %zu: seq b err %g", (unsigned long long)seed, ci,
                      e);
        /* The logits are not degenerate: a spread of at least a unit. */
        double lo = INFINITY, hi = -INFINITY;
        for (int i = 0; i < c.vocab_size; i++) lo = fmin(lo, logits[i]), hi = fmax(hi, logits[i]);
        ck_assert_msg(hi - lo > 1.0 && hi - lo < 100.0, "logit spread %g", hi - lo);
        kv_cache_destroy(&kv);
        model_destroy(m);
    }
}
END_TEST

/* The default model: a 45-token prompt whole, as prefix + suffix, in chunks
 * of 7 and token by token, with page sizes that do and do not divide the
 * chunks, all give the same final logits. Unshifted positions must not. */
START_TEST(rope_shifted_positions)
{
    model_config c;
    char err[256];
    ck_assert_int_eq(model_config_preset(NULL, &c, err, sizeof err), RKV_OK);
    model *m;
    const uint64_t seed = 42;
    ck_assert_msg(model_create(&c, NULL, seed, 1, &m, err, sizeof err) == RKV_OK, "%s", err);
    enum { N = 45 };
    int32_t toks[N];
    random_tokens(toks, N, c.vocab_size, seed);
    const int V = c.vocab_size;
    float *whole = malloc(sizeof(float) * V), *got = malloc(sizeof(float) * V);
    const int page_sizes[] = {16, 5, 1};
    for (size_t pi = 0; pi < 3; pi++) {
        kv_cache kv;
        ck_assert_int_eq(kv_cache_init(&kv, &c, 100, page_sizes[pi]), RKV_OK);
        int np = (N + page_sizes[pi] - 1) / page_sizes[pi];
        seq s = {.tokens = toks};
        assign_pages(&s, 0, np);
        int32_t n = N;
        ck_assert_int_eq(step(m, &kv, &s, &n, 1, whole, 1), RKV_OK);

        /* prefix of 32 (two whole pages at P = 16) then the 13-token suffix */
        s.len = 0;
        n = 32;
        ck_assert_int_eq(step(m, &kv, &s, &n, 1, got, 1), RKV_OK);
        n = N - 32;
        ck_assert_int_eq(step(m, &kv, &s, &n, 1, got, 1), RKV_OK);
        double e = max_diff(got, whole, V);
        ck_assert_msg(e < TOL, "P=%d prefix+suffix differs by %g", page_sizes[pi], e);

        /* chunks of 7, on fresh pages so nothing stale can help */
        seq s2 = {.tokens = toks};
        assign_pages(&s2, np, np);
        while (s2.len < N) {
            n = N - s2.len < 7 ? N - s2.len : 7;
            ck_assert_int_eq(step(m, &kv, &s2, &n, 1, got, 1), RKV_OK);
        }
        e = max_diff(got, whole, V);
        ck_assert_msg(e < TOL, "P=%d chunks of 7 differ by %g", page_sizes[pi], e);

        /* token by token (decode) */
        s2.len = 0;
        while (s2.len < N) {
            n = 1;
            ck_assert_int_eq(step(m, &kv, &s2, &n, 1, got, 1), RKV_OK);
        }
        e = max_diff(got, whole, V);
        ck_assert_msg(e < TOL, "P=%d token by token differs by %g", page_sizes[pi], e);

        /* The same split with positions restarting at 0 in the suffix (no
         * shift) must change the logits: the test can see RoPE. */
        s.len = 0;
        n = 32;
        ck_assert_int_eq(step(m, &kv, &s, &n, 1, got, 1), RKV_OK);
        n = N - 32;
        ck_assert_int_eq(step(m, &kv, &s, &n, 1, got, 0), RKV_OK);
        e = max_diff(got, whole, V);
        ck_assert_msg(e > 1e-3, "P=%d unshifted positions went unnoticed (%g)", page_sizes[pi],
                      e);
        kv_cache_destroy(&kv);
    }
    free(whole);
    free(got);
    model_destroy(m);
}
END_TEST

/* A pure decode step runs the split-K decode kernel; it must agree with the
 * prefill kernel on the same batch, also for a context longer than one split. */
START_TEST(decode_kernel_matches_prefill)
{
    model_config c = tiny(MODEL_ARCH_QWEN2, 2, 0);
    c.max_position = 8192;
    model *m;
    char err[256];
    const uint64_t seed = 77;
    ck_assert_int_eq(model_create(&c, NULL, seed, 2, &m, err, sizeof err), RKV_OK);
    kv_cache kv;
    ck_assert_int_eq(kv_cache_init(&kv, &c, 200, 16), RKV_OK);
    enum { NA = 64 * 16, NB = 37, NC = 3 }; /* NA: two decode splits of 512 */
    int32_t *ta = malloc(sizeof(int32_t) * NA), tb[NB], tc[NC];
    random_tokens(ta, NA, c.vocab_size, seed);
    random_tokens(tb, NB, c.vocab_size, seed + 1);
    random_tokens(tc, NC, c.vocab_size, seed + 2);
    seq s[3] = {{.tokens = ta}, {.tokens = tb}, {.tokens = tc}};
    assign_pages(&s[0], 136, 64);
    assign_pages(&s[1], 100, 3);
    assign_pages(&s[2], 110, 1);
    int32_t n[3] = {NA - 1, NB - 1, NC - 1};
    float lg[3 * 97], lg2[3 * 97];
    ck_assert_int_eq(step(m, &kv, s, n, 3, lg, 1), RKV_OK);
    int32_t one[3] = {1, 1, 1};
    m->use_decode_kernel = 1;
    ck_assert_int_eq(step(m, &kv, s, one, 3, lg, 1), RKV_OK);
    for (int i = 0; i < 3; i++) s[i].len--;
    m->use_decode_kernel = 0;
    ck_assert_int_eq(step(m, &kv, s, one, 3, lg2, 1), RKV_OK);
    double e = max_diff(lg, lg2, 3 * c.vocab_size);
    ck_assert_msg(e < 1e-5, "seed %llu: decode vs prefill kernel %g", (unsigned long long)seed, e);
    free(ta);
    kv_cache_destroy(&kv);
    model_destroy(m);
}
END_TEST

/* Cascade attention (attention.h) gives the logits of plain attention: four
 * sequences share a 5-page prompt in the same pages (as the radix tree hands
 * them out), a fifth shares nothing; a prefill step and a decode step, each
 * run with the cascade on and off over the same pages. */
START_TEST(cascade_equals_plain)
{
    model_config c = tiny(MODEL_ARCH_QWEN2, 2, 0);
    model *m;
    char err[256];
    ck_assert_msg(model_create(&c, NULL, 4242, 2, &m, err, sizeof err) == RKV_OK, "%s", err);
    kv_cache kv;
    ck_assert_int_eq(kv_cache_init(&kv, &c, 64, 4), RKV_OK);
    enum { NS = 20, NO = 9, B = 5 };
    int32_t toks[B][NS + NO + 1];
    random_tokens(toks[0], NS, c.vocab_size, 99);
    for (int i = 0; i < B; i++) {
        if (i > 0 && i < 4) memcpy(toks[i], toks[0], sizeof(int32_t) * NS);
        random_tokens(toks[i] + (i < 4 ? NS : 0), i < 4 ? NO + 1 : NS + NO + 1, c.vocab_size,
                      100 + i);
    }
    /* The shared prompt computed once into pages 0..4. */
    seq s[B];
    for (int i = 0; i < B; i++) {
        s[i] = (seq){.tokens = toks[i]};
        for (int j = 0; j < 64; j++) s[i].pages[j] = -1;
        for (int j = 0; j < 8; j++) s[i].pages[j] = (i < 4 && j < 5) ? j : 8 + 8 * i + j;
    }
    float lg[B * 97], ref[B * 97];
    int32_t nshared[1] = {NS};
    ck_assert_int_eq(step(m, &kv, s, nshared, 1, lg, 1), RKV_OK);
    for (int i = 0; i < B; i++) s[i].len = i < 4 ? NS : 0;
    /* Prefill: the own tokens over the shared pages (the fifth: all of its tokens). */
    int32_t n[B] = {NO, NO, NO, NO, NS + NO};
    for (int on = 1; on >= 0; on--) {
        m->cascade = on;
        for (int i = 0; i < B; i++) s[i].len = i < 4 ? NS : 0;
        ck_assert_int_eq(step(m, &kv, s, n, B, on ? lg : ref, 1), RKV_OK);
    }
    double e = max_diff(lg, ref, B * c.vocab_size);
    ck_assert_msg(e < 1e-5, "prefill: cascade vs plain %g", e);
    /* Decode: one more token each, context = shared pages + own pages. */
    int32_t one[B] = {1, 1, 1, 1, 1};
    for (int on = 1; on >= 0; on--) {
        m->cascade = on;
        for (int i = 0; i < B; i++) s[i].len = NS + NO;
        ck_assert_int_eq(step(m, &kv, s, one, B, on ? lg : ref, 1), RKV_OK);
    }
    e = max_diff(lg, ref, B * c.vocab_size);
    ck_assert_msg(e < 1e-5, "decode: cascade vs plain %g", e);
    kv_cache_destroy(&kv);
    model_destroy(m);
}
END_TEST

/* Batch-invariant mode: the final logits are the same bits however the
 * prompt is split and whatever shares the step. */
START_TEST(batch_invariant_bitwise)
{
    model_config c;
    char err[256];
    ck_assert_int_eq(model_config_preset(NULL, &c, err, sizeof err), RKV_OK);
    model *m;
    const uint64_t seed = 4242;
    ck_assert_int_eq(model_create(&c, NULL, seed, 2, &m, err, sizeof err), RKV_OK);
    m->batch_invariant = 1;
    const int V = c.vocab_size;
    enum { N = 150, NO = 41 };
    int32_t toks[N], other[NO];
    random_tokens(toks, N, V, seed);
    random_tokens(other, NO, V, seed + 1);
    kv_cache kv;
    ck_assert_int_eq(kv_cache_init(&kv, &c, 64, 16), RKV_OK);
    float *whole = malloc(sizeof(float) * 2 * V), *got = malloc(sizeof(float) * 2 * V);
    seq s = {.tokens = toks};
    assign_pages(&s, 0, 10);
    int32_t n = N;
    ck_assert_int_eq(step(m, &kv, &s, &n, 1, whole, 1), RKV_OK);
    /* the same prompt on fresh pages, in uneven chunks, beside another
     * sequence that changes every step's batch, then its last token alone */
    seq two[2] = {{.tokens = toks}, {.tokens = other}};
    assign_pages(&two[0], 20, 10);
    assign_pages(&two[1], 40, 3);
    const int32_t chunks[][2] = {{33, 20}, {50, 1}, {1, 19}, {65, 1}};
    for (size_t k = 0; k < 4; k++) {
        int32_t nn[2] = {chunks[k][0], chunks[k][1]};
        ck_assert_int_eq(step(m, &kv, two, nn, 2, got, 1), RKV_OK);
    }
    ck_assert_int_eq(two[0].len, N - 1);
    int32_t last[2] = {1, 0};
    ck_assert_int_eq(step(m, &kv, two, last, 1, got, 1), RKV_OK);
    ck_assert_msg(memcmp(got, whole, sizeof(float) * V) == 0,
                  "seed %llu: chunked + batched logits differ from the whole prompt's (%g)",
                  (unsigned long long)seed, max_diff(got, whole, V));
    /* token by token */
    two[0].len = 0;
    while (two[0].len < N) {
        int32_t one = 1;
        ck_assert_int_eq(step(m, &kv, two, &one, 1, got, 1), RKV_OK);
    }
    ck_assert_msg(memcmp(got, whole, sizeof(float) * V) == 0,
                  "seed %llu: token-by-token logits differ from the whole prompt's (%g)",
                  (unsigned long long)seed, max_diff(got, whole, V));
    free(whole);
    free(got);
    kv_cache_destroy(&kv);
    model_destroy(m);
}
END_TEST

START_TEST(bad_batches)
{
    model_config c = tiny(MODEL_ARCH_LLAMA, 1, 1);
    model *m;
    char err[256];
    ck_assert_int_eq(model_create(&c, NULL, 1, 1, &m, err, sizeof err), RKV_OK);
    kv_cache kv;
    ck_assert_int_eq(kv_cache_init(&kv, &c, 4, 4), RKV_OK);
    int32_t tok[2] = {1, 2}, pos[2] = {0, 1}, qs[2] = {0, 2}, pl[1] = {0}, pt[4] = {0, 1, 2, 3},
            slot[2] = {0, 1}, sr[1] = {1};
    float logits[97];
    fwd_batch good = {.num_seqs = 1, .num_tokens = 2, .token_ids = tok, .positions = pos,
                      .q_starts = qs, .prefix_lens = pl, .page_table = pt, .max_pages = 4,
                      .slot_mapping = slot, .sample_rows = sr};
    ck_assert_int_eq(model_forward(m, &kv, &good, logits, err, sizeof err), RKV_OK);
    struct { const char *field; rkv_status st; } cases[] = {
        {"token_ids", RKV_ERANGE}, {"positions", RKV_ERANGE}, {"slot_mapping", RKV_ERANGE},
        {"sample_rows", RKV_EINVAL}, {"q_starts", RKV_EINVAL}, {"page_table", RKV_ERANGE},
        {"prefix_lens", RKV_EINVAL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int32_t t2[2] = {1, 2}, p2[2] = {0, 1}, q2[2] = {0, 2}, l2[1] = {0}, g2[4] = {0, 1, 2, 3},
                s2[2] = {0, 1}, r2[1] = {1};
        switch (i) {
        case 0: t2[1] = 97; break;
        case 1: p2[0] = -1; break;
        case 2: s2[1] = 16; break;
        case 3: r2[0] = 2; break;
        case 4: q2[1] = 3; break;
        case 5: l2[0] = 1; g2[0] = 9; break;
        case 6: l2[0] = -2; break;
        }
        fwd_batch b = good;
        b.token_ids = t2; b.positions = p2; b.q_starts = q2; b.prefix_lens = l2;
        b.page_table = g2; b.slot_mapping = s2; b.sample_rows = r2;
        err[0] = 0;
        rkv_status st = model_forward(m, &kv, &b, logits, err, sizeof err);
        ck_assert_msg(st == cases[i].st, "case %s: status %d (%s)", cases[i].field, st, err);
        ck_assert_msg(strstr(err, cases[i].field), "case %s not named: %s", cases[i].field, err);
    }
    kv_cache_destroy(&kv);
    model_destroy(m);
}
END_TEST

/* Through backend_create: greedy tokens are the argmax of the returned
 * logits; a page copied out and back into another page serves as prefix. */
START_TEST(cpu_backend)
{
    char err[256];
    backend *b;
    backend_config cfg = {.model = NULL, .seed = 7, .page_size = 4, .num_pages = 16,
                          .num_threads = 1};
    ck_assert_msg(backend_create("cpu", &cfg, &b, err, sizeof err) == RKV_OK, "%s", err);
    ck_assert_int_eq(b->num_pages, 16);
    ck_assert_int_eq(b->page_size, 4);
    ck_assert_int_eq(b->vocab_size, 4096);
    ck_assert_ptr_nonnull(strstr(b->description, "cpu"));
    const int V = b->vocab_size;
    int32_t tok[6] = {5, 9, 200, 3000, 17, 4}, pos[6] = {0, 1, 2, 3, 4, 5};
    int32_t qs[2] = {0, 6}, pl[1] = {0}, pt[2] = {2, 3}, slot[6] = {8, 9, 10, 11, 12, 13},
            sr[1] = {5}, steps[1] = {0}, out[1] = {-1};
    sampling_params sp = {.temperature = 0, .top_k = 0, .top_p = 1, .seed = 1};
    fwd_batch fb = {.num_seqs = 1, .num_tokens = 6, .token_ids = tok, .positions = pos,
                    .q_starts = qs, .prefix_lens = pl, .page_table = pt, .max_pages = 2,
                    .slot_mapping = slot, .sample_rows = sr, .sampling = &sp,
                    .sample_steps = steps};
    float *lg = malloc(sizeof(float) * V), *lg2 = malloc(sizeof(float) * V);
    double secs = -1;
    ck_assert_int_eq(b->ops->forward(b, &fb, out, lg, &secs), RKV_OK);
    ck_assert_int_eq(out[0], sampler_argmax(lg, V));
    ck_assert(secs >= 0);

    /* Spill page 2 (tokens 0..3) and restore it as page 7; then tokens 4..5
     * with prefix 4 in page 7 must give the same logits. */
    size_t pb;
    ck_assert_int_eq(b->ops->page_bytes(b, &pb), RKV_OK);
    ck_assert_int_eq(pb, 2 * 4 * 4 * 2 * 64 * sizeof(float));
    void *buf = malloc(pb);
    ck_assert_int_eq(b->ops->read_page(b, 2, buf), RKV_OK);
    ck_assert_int_eq(b->ops->write_page(b, 7, buf), RKV_OK);
    ck_assert_int_eq(b->ops->read_page(b, 16, buf), RKV_ERANGE);
    int32_t qs2[2] = {0, 2}, pl2[1] = {4}, pt2[2] = {7, 9}, slot2[2] = {36, 37}, sr2[1] = {1};
    fwd_batch fb2 = {.num_seqs = 1, .num_tokens = 2, .token_ids = tok + 4, .positions = pos + 4,
                     .q_starts = qs2, .prefix_lens = pl2, .page_table = pt2, .max_pages = 2,
                     .slot_mapping = slot2, .sample_rows = sr2, .sampling = &sp,
                     .sample_steps = steps};
    ck_assert_int_eq(b->ops->forward(b, &fb2, out, lg2, NULL), RKV_OK);
    ck_assert_msg(max_diff(lg2, lg, V) < TOL, "restored page differs: %g", max_diff(lg2, lg, V));

    /* Temperature sampling is a function of (seed, step) only. */
    sampling_params hot = {.temperature = 1.0f, .top_k = 50, .top_p = 0.9f, .seed = 3};
    fb2.sampling = &hot;
    int32_t t1, t2;
    ck_assert_int_eq(b->ops->forward(b, &fb2, &t1, NULL, NULL), RKV_OK);
    ck_assert_int_eq(b->ops->forward(b, &fb2, &t2, NULL, NULL), RKV_OK);
    ck_assert_int_eq(t1, t2);
    int32_t t3;
    ck_assert_int_eq(sampler_sample(lg2, V, &hot, 0, NULL, &t3), RKV_OK);
    ck_assert_int_eq(t1, t3);

    free(buf);
    free(lg);
    free(lg2);
    backend_destroy(b);

    /* batch-invariant mode from the environment; a bad value names the variable */
    setenv("RKV_CPU_BATCH_INVARIANT", "yes", 1);
    ck_assert_int_eq(backend_create("cpu", &cfg, &b, err, sizeof err), RKV_EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "RKV_CPU_BATCH_INVARIANT"));
    setenv("RKV_CPU_BATCH_INVARIANT", "1", 1);
    ck_assert_int_eq(backend_create("cpu", &cfg, &b, err, sizeof err), RKV_OK);
    ck_assert_ptr_nonnull(strstr(b->description, "batch-invariant"));
    backend_destroy(b);
    unsetenv("RKV_CPU_BATCH_INVARIANT");

    ck_assert_int_eq(backend_create("tpu", &cfg, &b, err, sizeof err), RKV_EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "tpu"));
    backend_config bad = cfg;
    bad.model = "no-such-preset";
    ck_assert_int_eq(backend_create("cpu", &bad, &b, err, sizeof err), RKV_EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "no-such-preset"));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("model");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, layers_match_reference);
    tcase_add_test(tc, rope_shifted_positions);
    tcase_add_test(tc, decode_kernel_matches_prefill);
    tcase_add_test(tc, batch_invariant_bitwise);
    tcase_add_test(tc, cascade_equals_plain);
    tcase_add_test(tc, bad_batches);
    tcase_add_test(tc, cpu_backend);
    suite_add_tcase(s, tc);
    return check_run(s);
}
