/* backend_sim.c - the roofline-clocked backend without a model; see backend_sim.h. */
#include "backend_sim.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static const sim_profile profiles[] = {
    /* H100/H200: measured bf16 dense GEMM ceiling and HBM3 copy bandwidth. */
    {"h100", 790e12, 3.0e12, 80e9, 0.8, 0.85, -1},
    {"h200", 790e12, 4.3e12, 141e9, 0.8, 0.85, -1},
    /* A100-80GB SXM and A10G: datasheet peaks, hence the lower efficiencies. */
    {"a100", 312e12, 2.0e12, 80e9, 0.7, 0.8, -1},
    {"a10g", 125e12, 0.6e12, 24e9, 0.6, 0.8, -1},
};

rkv_status sim_profile_parse(const char *spec, sim_profile *out, char *err, size_t errlen)
{
    char buf[128];
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
        if (!strcmp(kv, "eff") && v > 0 && v <= 1) out->eff_compute = v;
        else if (!strcmp(kv, "mem_eff") && v > 0 && v <= 1) out->eff_memory = v;
        else if (!strcmp(kv, "overhead_ms")) out->overhead_s = v * 1e-3;
        else {
            snprintf(err, errlen,
                     "sim: bad GPU profile override '%s=%s' (eff, mem_eff in (0,1]; overhead_ms)",
                     kv, eq + 1);
            return RKV_EINVAL;
        }
    }
    return RKV_OK;
}

/* Without CUDA graphs a step launches about ten kernels per layer (norms,
 * GEMMs, RoPE, attention, activation) at ~4 us each, plus ~0.3 ms for input
 * copies, sampling and the host sync: 0.3 ms + 40 us per layer. */
static double default_overhead(const model_config *m)
{
    return 0.3e-3 + 40e-6 * m->num_layers;
}

double sim_step_seconds(const model_config *m, const sim_profile *p, const fwd_batch *b)
{
    double C = m->hidden_size, F = m->intermediate_size, V = m->vocab_size, L = m->num_layers;
    double qd = (double)m->num_heads * m->head_dim, kvd = (double)m->num_kv_heads * m->head_dim;
    double linear = L * (C * qd + 2 * C * kvd + qd * C + 3 * C * F);
    double T = b->num_tokens, S = 0, pairs = 0, kv_read = 0;
    for (int32_t i = 0; i < b->num_seqs; i++) {
        double s = b->q_starts[i + 1] - b->q_starts[i], pre = b->prefix_lens[i];
        pairs += s * pre + s * (s + 1) / 2;
        kv_read += pre + s;
        S += b->sample_rows[i] >= 0;
    }
    double flops = 2 * linear * T + 2 * C * V * S + 4.0 * m->num_heads * m->head_dim * L * pairs;
    double bytes = 2.0 * (double)model_config_num_params(m) +
                   (double)model_config_kv_bytes_per_token(m, 2) * (kv_read + T);
    double tc = flops / (p->peak_flops * p->eff_compute);
    double tm = bytes / (p->bandwidth * p->eff_memory);
    double over = p->overhead_s >= 0 ? p->overhead_s : default_overhead(m);
    return (tc > tm ? tc : tm) + over;
}

static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
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
            h = mix64(h ^ mix64((uint64_t)tok + 0x100000000ull * (uint64_t)(pos + 1)));
            sb->slot_hash[slot] = h;
            sb->slot_pos[slot] = pos + 1;
            if (b->sample_rows[i] == r) {
                const sampling_params *sp = &b->sampling[i];
                uint64_t x = h;
                if (sp->temperature > 0)
                    x = mix64(x ^ mix64(sp->seed) ^ (uint64_t)b->sample_steps[i] * 0xd1b54a32d192ed03ull);
                out_tokens[i] = (int32_t)(mix64(x) % (uint64_t)V);
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
