/* backend_sim.c - the roofline-clocked backend without a model; see backend_sim.h. */
#include "backend_sim.h"

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "rkv_core.h"

typedef struct sim_backend {
    backend base;
    model_config model;
    sim_profile prof;
    /* Per KV slot (num_pages * page_size): the chained context hash and the
     * position + 1 written there (0: never written). calloc'd, so untouched
     * pages of a large pool cost no memory. */
    uint64_t *slot_hash;
    int32_t *slot_pos;
} sim_backend;

/* Ceilings and per-kernel figures; the h100 row is fitted to the cuda backend
 * on an H100 (SIM_COST_MODEL.md, "Calibration"). The efficiencies are
 * fractions of each profile's ceiling and are shared by all profiles; the
 * ceilings of a100/a10g are their datasheet peaks scaled by what the H100
 * reached of its own datasheet (GEMM 790 of 989 TFLOP/s: 0.80; copy 2.98 of
 * 3.35 TB/s: 0.89), so every row means "what a kernel can reach". */
#define SIM_FRACTIONS 0.95, 0.91, 0.27, 0.77, 0.66
#define SIM_LATENCIES 9.2e-6, 5.4e-6, 1.43e-6, 1.3e-3, 1
static const sim_profile profiles[] = {
    /* name, peak, bandwidth, memory, SMs, eff_gemm, eff_weight, eff_attn, eff_kv,
     * eff_act, gemm_latency, kernel, launch, overhead, graphs */
    {"h100", 790e12, 3.0e12, 80e9, 132, SIM_FRACTIONS, SIM_LATENCIES},
    /* Same compute die and driver as the H100, HBM3e. */
    {"h200", 790e12, 4.3e12, 141e9, 132, SIM_FRACTIONS, SIM_LATENCIES},
    /* A100-80GB SXM (312 TFLOP/s, 2.0 TB/s) and A10G (125, 0.6): datasheet x 0.80 / 0.89. */
    {"a100", 312e12 * 0.80, 2.0e12 * 0.89, 80e9, 108, SIM_FRACTIONS, SIM_LATENCIES},
    {"a10g", 125e12 * 0.80, 0.6e12 * 0.89, 24e9, 80, SIM_FRACTIONS, SIM_LATENCIES},
};

typedef struct sim_key {
    const char *key;
    size_t off;
    double scale, lo, hi; /* value * scale, accepted when lo < value <= hi */
} sim_key;

static const sim_key keys[] = {
    {"eff", offsetof(sim_profile, eff_gemm), 1, 0, 1},
    {"mem_eff", offsetof(sim_profile, eff_weight), 1, 0, 1},
    {"attn_eff", offsetof(sim_profile, eff_attn), 1, 0, 1},
    {"kv_eff", offsetof(sim_profile, eff_kv), 1, 0, 1},
    {"act_eff", offsetof(sim_profile, eff_act), 1, 0, 1},
    {"gemm_us", offsetof(sim_profile, gemm_latency_s), 1e-6, -1, 1e6},
    {"kernel_us", offsetof(sim_profile, kernel_s), 1e-6, -1, 1e6},
    {"launch_us", offsetof(sim_profile, launch_s), 1e-6, -1, 1e6},
    {"overhead_ms", offsetof(sim_profile, overhead_s), 1e-3, -1, 1e6},
};

rkv_status sim_profile_parse(const char *spec, sim_profile *out, char *err, size_t errlen)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", spec ? spec : "h100");
    char *save = NULL;
    char *name = strtok_r(buf, ",", &save);
    if (!name) name = "h100";
    size_t i = 0;
    for (; i < sizeof profiles / sizeof profiles[0]; i++)
        if (!strcmp(profiles[i].name, name)) break;
    if (i == sizeof profiles / sizeof profiles[0]) {
        snprintf(err, errlen, "sim: unknown GPU profile '%s' (known: h100, h200, a100, a10g)",
                 name);
        return RKV_EINVAL;
    }
    *out = profiles[i];
    for (char *kv = strtok_r(NULL, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(kv, '=');
        char *end = NULL;
        double v = eq ? strtod(eq + 1, &end) : NAN;
        if (!eq || end == eq + 1 || *end || !(v >= 0)) {
            snprintf(err, errlen, "sim: bad GPU profile override '%s' (want key=number)", kv);
            return RKV_EINVAL;
        }
        *eq = 0;
        size_t k = 0;
        for (; k < sizeof keys / sizeof keys[0]; k++)
            if (!strcmp(kv, keys[k].key)) break;
        if (k < sizeof keys / sizeof keys[0] && v > keys[k].lo && v <= keys[k].hi) {
            *(double *)((char *)out + keys[k].off) = v * keys[k].scale;
        } else if (!strcmp(kv, "graphs") && (v == 0 || v == 1 || v == 2)) {
            out->graphs = (int)v;
        } else {
            snprintf(err, errlen,
                     "sim: bad GPU profile override '%s=%s' (eff, mem_eff, attn_eff, kv_eff, "
                     "act_eff in (0,1]; gemm_us, kernel_us, launch_us, overhead_ms >= 0; "
                     "graphs 0|1|2)",
                     kv, eq + 1);
            return RKV_EINVAL;
        }
    }
    return RKV_OK;
}

/* One GEMM y (M, N) = x (M, K) w (N, K)^T: compute-bound at large M, else a
 * fixed latency plus streaming the bf16 weights. */
static double gemm_seconds(const sim_profile *p, double M, double N, double K)
{
    double tc = 2 * M * N * K / (p->peak_flops * p->eff_gemm);
    double tw = p->gemm_latency_s + 2 * N * K / (p->bandwidth * p->eff_weight);
    return tc > tw ? tc : tw;
}

/* Activation bytes per row per layer of the small kernels around the GEMMs
 * (fp32 residual stream and GEMM outputs, bf16 GEMM inputs):
 *   2 x add+RMSNorm   read resid, proj (fp32), write resid (fp32), normed (bf16): 2 x 14 C
 *   bias+RoPE         read qkv (fp32), write q, k, v (bf16):                  6 (qd + 2 kvd)
 *   store K/V         read k, v, write them into pages (bf16):                8 kvd
 *   SwiGLU            read gate, up (fp32), write act (bf16):                 10 F */
static double act_bytes_per_row(const model_config *m)
{
    double C = m->hidden_size, F = m->intermediate_size;
    double qd = (double)m->num_heads * m->head_dim, kvd = (double)m->num_kv_heads * m->head_dim;
    return 28 * C + 6 * (qd + 2 * kvd) + 8 * kvd + 10 * F;
}

#define SIM_SMALL_KERNELS_PER_LAYER 6 /* 2 norms, RoPE, K/V store, attention, SwiGLU */
#define SIM_STEP_KERNELS 3            /* embed, final norm + gather, argmax */
#define SIM_MIXED_GRAPH_ROWS 256      /* graphs=2: mixed steps up to this many rows */

double sim_step_seconds(const model_config *m, const sim_profile *p, const fwd_batch *b)
{
    double C = m->hidden_size, F = m->intermediate_size, V = m->vocab_size, L = m->num_layers;
    double qd = (double)m->num_heads * m->head_dim, kvd = (double)m->num_kv_heads * m->head_dim;
    double T = b->num_tokens, B = b->num_seqs, pairs = 0, ctx = 0, tiles = 0;
    int32_t max_s = 0;
    for (int32_t i = 0; i < b->num_seqs; i++) {
        int32_t s = b->q_starts[i + 1] - b->q_starts[i];
        if (s > max_s) max_s = s;
    }
    /* The prefill kernel's row tile: 128 rows, 64 when no suffix is longer. */
    const double bm = max_s > 64 ? 128 : 64;
    for (int32_t i = 0; i < b->num_seqs; i++) {
        double s = b->q_starts[i + 1] - b->q_starts[i], pre = b->prefix_lens[i];
        double nt = ceil(s / bm);
        /* Query-key pairs the prefill kernel computes: whole row tiles, each
         * over the keys up to its last row (bm rows even when the sequence
         * has one: a decode row among prompt rows costs a full tile). */
        pairs += bm * (nt * pre + bm * nt * (nt - 1) / 2 + s);
        ctx += pre + s;
        tiles += nt;
    }
    const bool decode = max_s <= 1;

    /* GEMMs of one layer (qkv, o, gate_up, down) and the LM head over the
     * step's sequences (the backend runs it on one row per sequence). */
    double t_gemm = L * (gemm_seconds(p, T, qd + 2 * kvd, C) + gemm_seconds(p, T, C, qd) +
                         gemm_seconds(p, T, 2 * F, C) + gemm_seconds(p, T, C, F));
    if (B > 0) t_gemm += gemm_seconds(p, B, V, C);

    /* Attention, one kernel per layer: reads each sequence's K/V once (decode
     * kernel: bandwidth-bound); the prefill kernel is also bound by its
     * tensor-core rate, scaled by the share of SMs its (head, row tile) CTAs fill. */
    double kv_layer = (double)model_config_kv_bytes_per_token(m, 2) / L;
    double t_attn = kv_layer * ctx / (p->bandwidth * p->eff_kv);
    if (!decode && pairs > 0) {
        double fill = m->num_heads * tiles / (double)p->sms;
        double tc = 4.0 * qd * pairs / (p->peak_flops * p->eff_attn * (fill < 1 ? fill : 1));
        if (tc > t_attn) t_attn = tc;
    }
    t_attn *= L;

    double t_act = L * T * act_bytes_per_row(m) / (p->bandwidth * p->eff_act);
    double kernels = SIM_SMALL_KERNELS_PER_LAYER * L + SIM_STEP_KERNELS;
    bool graph = (p->graphs >= 1 && decode) || (p->graphs >= 2 && T <= SIM_MIXED_GRAPH_ROWS);
    double t_launch = kernels * p->kernel_s;
    if (!graph) t_launch += (kernels + 4 * L + 1) * p->launch_s;
    return t_gemm + t_attn + t_act + t_launch + p->overhead_s;
}

static rkv_status sim_forward(backend *bb, const fwd_batch *b, int32_t *out_tokens,
                              float *out_logits, double *step_seconds)
{
    sim_backend *sb = (sim_backend *)bb;
    const int32_t P = bb->page_size, V = bb->vocab_size;
    const int64_t nslots = bb->num_pages * P;
    if (b->num_seqs < 0 || b->q_starts[0] != 0 || b->q_starts[b->num_seqs] != b->num_tokens)
        return RKV_EINVAL;
    for (int32_t i = 0; i < b->num_seqs; i++) {
        int32_t q0 = b->q_starts[i], q1 = b->q_starts[i + 1], pre = b->prefix_lens[i];
        if (q1 < q0 || pre < 0 || pre + (q1 - q0) > bb->max_context) return RKV_EINVAL;
        const int32_t *pt = b->page_table + (size_t)i * b->max_pages;
        if ((pre + (q1 - q0) + P - 1) / P > b->max_pages) return RKV_EINVAL;
        for (int32_t k = 0; k < (pre + (q1 - q0) + P - 1) / P; k++)
            if (pt[k] < 0 || pt[k] >= bb->num_pages) return RKV_EINVAL;
        /* The context so far: the hash stored at the last prefix slot. */
        uint64_t h = 0x243f6a8885a308d3ull;
        if (pre > 0) {
            int64_t slot = (int64_t)pt[(pre - 1) / P] * P + (pre - 1) % P;
            if (sb->slot_pos[slot] != pre) return RKV_ECORRUPT;
            h = sb->slot_hash[slot];
        }
        for (int32_t r = q0; r < q1; r++) {
            int32_t pos = pre + (r - q0);
            int32_t tok = b->token_ids[r];
            int64_t slot = (int64_t)pt[pos / P] * P + pos % P;
            if (tok < 0 || tok >= V || b->positions[r] != pos || b->slot_mapping[r] != slot ||
                slot >= nslots)
                return RKV_EINVAL;
            h = rkv_splitmix64(h ^ rkv_splitmix64((uint64_t)tok + 0x100000000ull * (uint64_t)(pos + 1)));
            sb->slot_hash[slot] = h;
            sb->slot_pos[slot] = pos + 1;
            if (b->sample_rows[i] == r) {
                const sampling_params *sp = &b->sampling[i];
                uint64_t x = h;
                if (sp->temperature > 0)
                    x = rkv_splitmix64(x ^ rkv_splitmix64(sp->seed) ^ (uint64_t)b->sample_steps[i] * 0xd1b54a32d192ed03ull);
                out_tokens[i] = (int32_t)(rkv_splitmix64(x) % (uint64_t)V);
                if (out_logits) {
                    float *row = out_logits + (size_t)i * V;
                    for (int32_t v = 0; v < V; v++) row[v] = 0.0f;
                    row[out_tokens[i]] = 1.0f;
                }
            }
        }
        if (b->sample_rows[i] >= 0 && (b->sample_rows[i] < q0 || b->sample_rows[i] >= q1))
            return RKV_EINVAL;
    }
    if (step_seconds) *step_seconds = sim_step_seconds(&sb->model, &sb->prof, b);
    return RKV_OK;
}

static void sim_destroy(backend *bb)
{
    sim_backend *sb = (sim_backend *)bb;
    free(sb->slot_hash);
    free(sb->slot_pos);
    free(sb);
}

/* A page's "K/V" here is its slots' chained hashes and positions, so a spill
 * tier moves them like real K/V: a page loaded back into another page id
 * must carry them or the next step fails its prefix check. */
static rkv_status sim_page_bytes(backend *bb, size_t *bytes)
{
    *bytes = (size_t)bb->page_size * (sizeof(uint64_t) + sizeof(int32_t));
    return RKV_OK;
}

static rkv_status sim_read_page(backend *bb, int32_t page, void *dst)
{
    sim_backend *sb = (sim_backend *)bb;
    if (page < 0 || page >= bb->num_pages) return RKV_EINVAL;
    size_t P = (size_t)bb->page_size, off = (size_t)page * P;
    memcpy(dst, sb->slot_hash + off, P * sizeof(uint64_t));
    memcpy((uint8_t *)dst + P * sizeof(uint64_t), sb->slot_pos + off, P * sizeof(int32_t));
    return RKV_OK;
}

static rkv_status sim_write_page(backend *bb, int32_t page, const void *src)
{
    sim_backend *sb = (sim_backend *)bb;
    if (page < 0 || page >= bb->num_pages) return RKV_EINVAL;
    size_t P = (size_t)bb->page_size, off = (size_t)page * P;
    memcpy(sb->slot_hash + off, src, P * sizeof(uint64_t));
    memcpy(sb->slot_pos + off, (const uint8_t *)src + P * sizeof(uint64_t), P * sizeof(int32_t));
    return RKV_OK;
}

static const backend_ops sim_ops = {
    .name = "sim",
    .forward = sim_forward,
    .page_bytes = sim_page_bytes,
    .read_page = sim_read_page,
    .write_page = sim_write_page,
    .destroy = sim_destroy,
    .caps = BACKEND_CAP_MODELLED_TIME,
};

rkv_status backend_sim_create(const backend_config *cfg, backend **out, char *err, size_t errlen)
{
    *out = NULL;
    sim_backend *sb = calloc(1, sizeof *sb);
    if (!sb) return RKV_ENOMEM;
    rkv_status st = model_config_load(cfg->model, &sb->model, err, errlen);
    if (st == RKV_OK) st = sim_profile_parse(cfg->gpu_profile, &sb->prof, err, errlen);
    if (st) {
        free(sb);
        return st;
    }
    if (cfg->page_size < 1) {
        snprintf(err, errlen, "sim: page size %d must be >= 1", cfg->page_size);
        free(sb);
        return RKV_EINVAL;
    }
    int64_t num_pages = cfg->num_pages;
    double weights = 2.0 * (double)model_config_num_params(&sb->model);
    double page_bytes = (double)model_config_kv_bytes_per_token(&sb->model, 2) * cfg->page_size;
    if (num_pages <= 0) {
        /* What the GPU's memory holds beside the bf16 weights. */
        double frac = cfg->mem_fraction > 0 && cfg->mem_fraction <= 1 ? cfg->mem_fraction : 0.9;
        double room = sb->prof.memory_bytes * frac - weights;
        num_pages = room > 0 ? (int64_t)(room / page_bytes) : 0;
        if (num_pages > INT32_MAX / cfg->page_size) num_pages = INT32_MAX / cfg->page_size;
        if (num_pages < 1) {
            snprintf(err, errlen, "sim: %s weights (%.1f GB) leave no KV memory on %s",
                     sb->model.name, weights / 1e9, sb->prof.name);
            free(sb);
            return RKV_ENOSPC;
        }
    }
    if (num_pages > INT32_MAX / cfg->page_size) {
        snprintf(err, errlen, "sim: %lld pages of %d tokens is too many", (long long)num_pages,
                 cfg->page_size);
        free(sb);
        return RKV_EINVAL;
    }
    size_t nslots = (size_t)num_pages * (size_t)cfg->page_size;
    sb->slot_hash = calloc(nslots, sizeof(uint64_t));
    sb->slot_pos = calloc(nslots, sizeof(int32_t));
    if (!sb->slot_hash || !sb->slot_pos) {
        sim_destroy(&sb->base);
        return RKV_ENOMEM;
    }
    sb->base.ops = &sim_ops;
    sb->base.vocab_size = sb->model.vocab_size;
    sb->base.page_size = cfg->page_size;
    sb->base.num_pages = num_pages;
    sb->base.max_context = sb->model.max_position;
    snprintf(sb->base.description, sizeof sb->base.description,
             "sim %s: %s, %lld pages x %d tokens", sb->prof.name, sb->model.name,
             (long long)num_pages, cfg->page_size);
    *out = &sb->base;
    return RKV_OK;
}
