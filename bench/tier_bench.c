/* tier_bench.c - what a spill-tier hit costs against recomputing the same
 * prefix, measured on the cpu backend (built-in model or a preset), and the
 * same pair as the sim backend's time model prices it for a GPU.
 *
 * Measured (cpu): recompute = one prefill of N tokens (no prefix, no sample)
 * through backend forward; tier hit = for each of the N / P pages, the copy a
 * host-tier load makes (write_page from a host buffer), and the spill's
 * read_page. Best of R repetitions each; the ratio is load / recompute.
 * Modelled (sim): the roofline prefill of N tokens against N * kv_bytes /
 * host_bw (and / disk_bw) for the given model and GPU.
 *
 * Usage: tier_bench [--tokens N] [--reps R] [--model PRESET] [--sim-model PRESET]
 *                   [--gpu PROFILE] [--host-bw GBPS] [--disk-bw GBPS]
 * Output: one JSON object per line.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "bench_util.h"
#include "backend_sim.h"
#include "model_config.h"
#include "cli.h"

int main(int argc, char **argv)
{
    int32_t P = 16;
    int64_t tokens = 1024, reps = 5;
    const char *model = NULL, *sim_model = "llama-3-8b", *gpu = "h100";
    double host_gbps = 50, disk_gbps = 3;
    cli_opt table[] = {
        CLI_INT_OPT("--tokens", &tokens, 1, 1 << 24),
        CLI_INT_OPT("--reps", &reps, 1, 1000),
        CLI_STR_OPT("--model", &model),
        CLI_STR_OPT("--sim-model", &sim_model),
        CLI_STR_OPT("--gpu", &gpu),
        CLI_DOUBLE_OPT("--host-bw", &host_gbps, 1e-6, 1e6),
        CLI_DOUBLE_OPT("--disk-bw", &disk_gbps, 1e-6, 1e6),
        CLI_END,
    };
    char perr[256];
    cli_args a;
    if (cli_parse("tier_bench", table, argc, argv, &a, perr, sizeof perr) || a.npos || a.help) {
        fprintf(stderr, "tier_bench: %s\n", a.help || a.npos ? "usage: tier_bench [--tokens N] "
                "[--reps R] [--model M] [--sim-model M] [--gpu G] [--host-bw GBPS] "
                "[--disk-bw GBPS]" : perr);
        return 2;
    }
    int32_t N = (int32_t)tokens, R = (int32_t)reps;
    double host_bw = host_gbps * 1e9, disk_bw = disk_gbps * 1e9;
    if (N < P || R < 1) {
        fprintf(stderr, "tier_bench: --tokens must be >= %d and --reps >= 1\n", P);
        return 2;
    }
    N -= N % P;
    int32_t np = N / P;
    char err[512] = "";
    backend_config bc = {.model = model, .page_size = P, .num_pages = np + 1};
    backend *be = NULL;
    if (backend_create("cpu", &bc, &be, err, sizeof err) != RKV_OK) {
        fprintf(stderr, "tier_bench: %s\n", err);
        return 1;
    }
    size_t pb = 0;
    be->ops->page_bytes(be, &pb);
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)N), *pos = malloc(sizeof(int32_t) * (size_t)N);
    int32_t *slots = malloc(sizeof(int32_t) * (size_t)N), *pages = malloc(sizeof(int32_t) * (size_t)np);
    uint8_t *host = malloc(pb * (size_t)np);
    if (!tok || !pos || !slots || !pages || !host) return 1;
    for (int32_t i = 0; i < N; i++) {
        tok[i] = (int32_t)((i * 2654435761u) % (uint32_t)be->vocab_size);
        pos[i] = i;
        slots[i] = i;
    }
    for (int32_t k = 0; k < np; k++) pages[k] = k;
    int32_t qs[2] = {0, N}, pre = 0, sample = -1, step = 0, out = 0;
    sampling_params sp = {0};
    fwd_batch b = {.num_seqs = 1, .num_tokens = N, .token_ids = tok, .positions = pos, .q_starts = qs,
                   .prefix_lens = &pre, .page_table = pages, .max_pages = np, .slot_mapping = slots,
                   .sample_rows = &sample, .sampling = &sp, .sample_steps = &step};
    double best_fwd = 1e30, best_load = 1e30, best_spill = 1e30;
    for (int r = 0; r < R; r++) {
        double t0 = bench_clock_s(CLOCK_MONOTONIC), secs = 0;
        if (be->ops->forward(be, &b, &out, NULL, &secs) != RKV_OK) return 1;
        double t1 = bench_clock_s(CLOCK_MONOTONIC);
        for (int32_t k = 0; k < np; k++) be->ops->read_page(be, k, host + (size_t)k * pb);
        double t2 = bench_clock_s(CLOCK_MONOTONIC);
        for (int32_t k = 0; k < np; k++) be->ops->write_page(be, k, host + (size_t)k * pb);
        double t3 = bench_clock_s(CLOCK_MONOTONIC);
        if (t1 - t0 < best_fwd) best_fwd = t1 - t0;
        if (t2 - t1 < best_spill) best_spill = t2 - t1;
        if (t3 - t2 < best_load) best_load = t3 - t2;
    }
    printf("{\"bench\":\"tier_hit_cpu\",\"backend\":\"cpu\",\"model\":\"%s\",\"tokens\":%d,\"page_size\":%d,"
           "\"page_bytes\":%zu,\"recompute_s\":%.6g,\"load_s\":%.6g,\"spill_s\":%.6g,"
           "\"load_over_recompute\":%.6g,\"load_gb_per_s\":%.3f}\n",
           model ? model : "default", N, P, pb, best_fwd, best_load, best_spill, best_load / best_fwd,
           (double)pb * np / best_load / 1e9);

    model_config m;
    sim_profile prof;
    if (model_config_load(sim_model, &m, err, sizeof err) != RKV_OK
        || sim_profile_parse(gpu, &prof, err, sizeof err) != RKV_OK) {
        fprintf(stderr, "tier_bench: %s\n", err);
        return 1;
    }
    int32_t qs2[2] = {0, N}, sample2 = N - 1;
    fwd_batch sb = {.num_seqs = 1, .num_tokens = N, .q_starts = qs2, .prefix_lens = &pre, .sample_rows = &sample2};
    double recompute = sim_step_seconds(&m, &prof, &sb);
    double bytes = (double)model_config_kv_bytes_per_token(&m, 2) * N;
    printf("{\"bench\":\"tier_hit_sim\",\"backend\":\"sim\",\"model\":\"%s\",\"gpu\":\"%s\",\"tokens\":%d,"
           "\"kv_bytes\":%.0f,\"recompute_s\":%.6g,\"host_load_s\":%.6g,\"disk_load_s\":%.6g,"
           "\"host_over_recompute\":%.6g,\"disk_over_recompute\":%.6g}\n",
           m.name, prof.id, N, bytes, recompute, bytes / host_bw, bytes / host_bw + bytes / disk_bw,
           bytes / host_bw / recompute, (bytes / host_bw + bytes / disk_bw) / recompute);
    free(tok); free(pos); free(slots); free(pages); free(host);
    backend_destroy(be);
    return 0;
}
