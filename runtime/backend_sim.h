/* backend_sim.h - the `sim` backend: no model, a roofline clock.
 *
 * Each step is charged what a roofline model of a GPU says for the preset's
 * shapes (see SIM_COST_MODEL.md next to this file):
 *
 *   gemm_flops = 2 * linear_params * T  +  2 * C * V * S      (T rows, S sampled)
 *   attn_flops = 4 * Hq * D * L * sum_i (s_i * p_i + s_i * (s_i + 1) / 2)
 *   bytes      = 2 * params (bf16 weights, read once per step)
 *              + kv_bytes_per_token * (sum_i (p_i + s_i)  read  +  T  written)
 *   step       = max(flops / (peak * eff_compute), bytes / (bw * eff_memory)) + overhead
 *
 * Profiles (bf16 dense peak, HBM bandwidth, memory):
 *   h100  790 TFLOP/s (measured), 3.0 TB/s (measured), 80 GB
 *   h200  790 TFLOP/s, 4.3 TB/s, 141 GB
 *   a100  312 TFLOP/s, 2.0 TB/s (datasheet), 80 GB
 *   a10g  125 TFLOP/s, 0.6 TB/s (datasheet), 24 GB
 * The profile string may carry overrides: "h100,eff=0.8,mem_eff=0.85,overhead_ms=1.5".
 *
 * Outputs: the backend keeps, per KV slot, a hash chained over the tokens up
 * to it (what a real model's K/V depend on). A sampled token is a mix of the
 * context's chained hash (and, when temperature > 0, the request seed and the
 * output index) modulo the vocabulary. So outputs depend on the whole context
 * and only on it: a wrong page, a stale slot or a skipped row changes them,
 * while caching, chunking and preemption do not. A prefix slot that was never
 * written is an error (RKV_ECORRUPT), as is any malformed batch (RKV_EINVAL).
 */
#ifndef RKV_BACKEND_SIM_H
#define RKV_BACKEND_SIM_H

#include "backend.h"
#include "model_config.h"

typedef struct sim_profile {
    char name[16];
    double peak_flops;   /* FLOP/s, bf16 dense */
    double bandwidth;    /* bytes/s */
    double memory_bytes;
    double eff_compute;  /* fraction of peak reached */
    double eff_memory;
    double overhead_s;   /* fixed per step; < 0: from the layer count */
} sim_profile;

/* Parse "h100" | "h200" | "a100" | "a10g" with optional ",key=value"
 * overrides (eff, mem_eff, overhead_ms). NULL: h100. */
rkv_status sim_profile_parse(const char *spec, sim_profile *out, char *err, size_t errlen);

/* Modelled seconds of one step (exposed for tests and bench). */
double sim_step_seconds(const model_config *m, const sim_profile *p, const fwd_batch *b);

rkv_status backend_sim_create(const backend_config *cfg, backend **out, char *err,
                              size_t errlen);

#endif
