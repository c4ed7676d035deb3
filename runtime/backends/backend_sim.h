/* backend_sim.h - the `sim` backend: no model, a clock calibrated on a GPU.
 *
 * Each step is charged what a per-kernel model of a GPU says for the preset's
 * shapes, calibrated against the cuda backend on an H100 (SIM_COST_MODEL.md
 * next to this file has the equations, each parameter's source and the
 * errors). For a step of T rows over B sequences (sequence i: p_i cached, s_i
 * new rows):
 *
 *   gemm(M,N,K) = max(2MNK / (peak eff_gemm), gemm_latency + 2NK / (bw eff_weight))
 *   t_gemm = L (gemm(T,qkv,C) + gemm(T,C,qd) + gemm(T,2F,C) + gemm(T,C,F)) + gemm(B,V,C)
 *   t_attn = L max(kv_layer sum(p_i+s_i) / (bw eff_kv),
 *                  4 qd sum(s_i p_i + s_i(s_i+1)/2) / (peak eff_attn min(1, Hq tiles / SMs)))
 *            (the second term only for steps with a suffix longer than one row)
 *   t_act  = L T act_bytes_per_row / (bw eff_act)
 *   step   = t_gemm + t_attn + t_act + kernels (kernel + launch if not a graph) + host
 *
 * The constants come from a profile (below); the profile string may carry
 * overrides, e.g. "h100,eff=0.9,kernel_us=4,graphs=0" (keys: eff, mem_eff,
 * attn_eff, kv_eff, act_eff, gemm_us, kernel_us, launch_us, overhead_ms, graphs).
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

#include <stdbool.h>

#include "backend.h"
#include "model_config.h"

/* A measured GEMM table of a profile ("tables": {"gemm": [...]}): the times
 * of y (M, N) = x (M, K) w^T at increasing M for one (N, K). A GEMM of that
 * (N, K) is charged, between two measured M, the straight line through them;
 * below the first M, the first time; above the last, the last time x M /
 * M_last (large GEMMs grow linearly in M). Other shapes use the formula. */
#define SIM_GEMM_TABLES 16
#define SIM_GEMM_POINTS 32
typedef struct sim_gemm_table {
    double n, k;
    int points;
    double m[SIM_GEMM_POINTS], s[SIM_GEMM_POINTS]; /* M ascending, seconds */
} sim_gemm_table;

/* A sim profile: the cost model's constants for one (GPU, engine) pair, read
 * from a JSON file (runtime/backends/profiles/<id>.json, built into the
 * binary, or a user's file). SIM_COST_MODEL.md documents every field and
 * bench/sim_fit.py writes the built-in files from raw measurements. */
typedef struct sim_profile {
    char id[256];          /* "h100", "h100@peer", a file's "id"; the spec when overrides follow */
    char hash[17];         /* first 16 hex digits of the SHA-256 of the profile file */
    double peak_flops;     /* FLOP/s, bf16 dense GEMM ceiling */
    double bandwidth;      /* bytes/s, device copy ceiling */
    double memory_bytes;
    int sms;               /* streaming multiprocessors */
    double eff_gemm;       /* fraction of peak reached by large GEMMs */
    double eff_weight;     /* fraction of bandwidth streaming weights in skinny GEMMs */
    double eff_attn;       /* fraction of peak reached by the prefill attention kernel */
    double eff_kv;         /* fraction of bandwidth reading K/V in attention */
    double eff_act;        /* fraction of bandwidth in the small elementwise kernels */
    double gemm_latency_s; /* fixed time of one GEMM (launch, fill, tail) */
    double kernel_s;       /* floor of one small kernel, also inside a graph */
    double launch_s;       /* extra per kernel when a step is launched without a graph */
    double overhead_s;     /* host time per step, not hidden by overlap */
    int graphs;            /* 0: no graphs; 1: decode-only steps; 2: also mixed steps <= mixed_graph_rows */
    int mixed_graph_rows;
    bool decode_rows_full_tile; /* a decode row beside prompt rows costs a full prefill tile */
    /* Activation bytes per row per layer of the small kernels:
     * act_bytes[0] C + act_bytes[1] (qd + 2 kvd) + act_bytes[2] kvd + act_bytes[3] F. */
    double act_bytes[4];
    int small_kernels_per_layer; /* kernels that are not GEMMs, per layer (attention included) */
    int step_kernels;            /* non-GEMM kernels once per step */
    int gemms_per_layer;         /* GEMM launches per layer (eager launch cost only) */
    int step_gemms;              /* GEMM launches once per step (the LM head) */
    int gemm_tables;             /* measured GEMM tables in use (0: the formula only) */
    sim_gemm_table gemm_table[SIM_GEMM_TABLES];
} sim_profile;

/* The terms of one step, in seconds; their sum is sim_step_seconds(). */
typedef struct sim_step_parts {
    double gemm, attn, act, kernels, host;
} sim_step_parts;

/* Parse "ID[,key=value...]": ID a built-in profile (see sim_profile_ids; NULL
 * spec: h100), the keys overrides (see above). */
rkv_status sim_profile_parse(const char *spec, sim_profile *out, char *err, size_t errlen);

/* Load the profile in FILE (a user's JSON file, same schema as the built-in
 * ones); errors name the file and the field. */
rkv_status sim_profile_load_file(const char *path, sim_profile *out, char *err, size_t errlen);

/* The built-in profiles' ids, NULL-terminated, and the summary line each file
 * carries (for `radixkv list`). */
extern const char *const sim_profile_ids[];
const char *sim_profile_summary(const char *id);

/* Modelled seconds of one step (exposed for tests and bench). */
double sim_step_seconds(const model_config *m, const sim_profile *p, const fwd_batch *b);
void sim_step_terms(const model_config *m, const sim_profile *p, const fwd_batch *b,
                    sim_step_parts *out);

/* The profile a sim backend runs with; NULL for other backends. */
const sim_profile *backend_sim_profile(const backend *b);

rkv_status backend_sim_create(const backend_config *cfg, backend **out, char *err,
                              size_t errlen);

#endif
