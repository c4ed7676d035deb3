/* sim_step_bench.c - the sim backend's modelled time of single steps, JSON Lines.
 *
 * usage: sim_step_bench [--model PRESET] [--gpu PROFILE | --sim-profile FILE]
 *                       [--page-size P] --step NAME:B:PREFIX:ROWS [--step ...]
 *
 * Each --step is B sequences, each with PREFIX tokens already in KV pages and
 * ROWS new rows, the last of which samples (the shapes of bench/
 * cuda_backend_bench.c: prefill 1:0:1024, cached prefix 1:960:64, decode
 * B:1023:1). The step goes through sim_step_seconds(), the function the sim
 * backend charges each engine step with, so the figure is exactly what a
 * `radixkv run --backend sim` step of that shape costs. One line per step:
 *
 *   {"bench":"sim_step","name","model","gpu","sim_profile","sim_profile_hash","batch",
 *    "prefix","rows","ms","gemm_ms","attn_ms","act_ms","kernels_ms","host_ms"}
 *
 * (the terms of sim_step_terms(), which add up to ms; bench/sim_fit.py fits
 * a profile's latencies from them).
 *
 * No timing of this machine is involved: the output is a pure function of the
 * arguments (experiments/sim_calibration compares it with the GPU's figures).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_sim.h"
#include "cli.h"
#include "model_config.h"

static int usage(const char *msg)
{
    fprintf(stderr,
            "sim_step_bench: %s\nusage: sim_step_bench [--model PRESET] [--gpu PROFILE] "
            "[--page-size P] --step NAME:B:PREFIX:ROWS [--step ...]\n",
            msg);
    return 2;
}

/* Seconds of one step of b sequences at (prefix, rows); the page table is
 * laid out per sequence (its values do not enter the cost). */
static void step_terms(const model_config *m, const sim_profile *p, int page, int b,
                       int prefix, int rows, sim_step_parts *t)
{
    const int T = b * rows, mp = (prefix + rows + page - 1) / page;
    int32_t *qs = malloc(sizeof(int32_t) * (size_t)(b + 1));
    int32_t *pl = malloc(sizeof(int32_t) * (size_t)b);
    int32_t *sr = malloc(sizeof(int32_t) * (size_t)b);
    int32_t *pt = malloc(sizeof(int32_t) * (size_t)b * (size_t)mp);
    if (!qs || !pl || !sr || !pt) {
        fprintf(stderr, "sim_step_bench: out of memory for a batch of %d sequences\n", b);
        exit(1);
    }
    for (int i = 0; i < b; i++) {
        qs[i] = i * rows;
        pl[i] = prefix;
        sr[i] = i * rows + rows - 1;
        for (int j = 0; j < mp; j++) pt[(size_t)i * mp + j] = i * mp + j;
    }
    qs[b] = T;
    fwd_batch fb = {.num_seqs = b, .num_tokens = T, .q_starts = qs, .prefix_lens = pl,
                    .page_table = pt, .max_pages = mp, .sample_rows = sr};
    sim_step_terms(m, p, &fb, t);
    free(qs);
    free(pl);
    free(sr);
    free(pt);
}

/* --step is repeated: each one is kept, in order, for the loop below. */
typedef struct step_list {
    const char *spec[256];
    int n;
} step_list;

static int add_step(void *ctx, const char *name, const char *v, char *err, size_t errlen)
{
    step_list *l = ctx;
    if (l->n == 256) {
        snprintf(err, errlen, "%s: at most 256 of them", name);
        return 1;
    }
    l->spec[l->n++] = v;
    return 0;
}

int main(int argc, char **argv)
{
    const char *model = "qwen2.5-3b", *gpu = NULL, *file = NULL;
    int64_t page64 = 16;
    step_list steps = {.n = 0};
    cli_opt table[] = {
        CLI_STR_OPT("--model", &model),
        CLI_STR_OPT("--gpu", &gpu),
        CLI_STR_OPT("--sim-profile", &file),
        CLI_INT_OPT("--page-size", &page64, 1, 1 << 20),
        CLI_REPEATED_OPT("--step", add_step, &steps),
        CLI_END,
    };
    char perr[256];
    cli_args a;
    if (cli_parse("sim_step_bench", table, argc, argv, &a, perr, sizeof perr))
        return usage(perr);
    if (a.help || a.npos) return usage(a.help ? "options" : "no positional arguments");
    if (!steps.n) return usage("no --step given");
    if (gpu && file) return usage("--gpu and --sim-profile both given; pick one");
    int page = (int)page64;
    char err[256];
    model_config m;
    sim_profile p;
    if (model_config_load(model, &m, err, sizeof err) != RKV_OK ||
        (file ? sim_profile_load_file(file, &p, err, sizeof err)
              : sim_profile_parse(gpu, &p, err, sizeof err)) != RKV_OK) {
        fprintf(stderr, "sim_step_bench: %s\n", err);
        return 2;
    }
    for (int i = 0; i < steps.n; i++) {
        const char *spec = steps.spec[i];
        char name[64];
        int b, prefix, rows, used = 0;
        if (sscanf(spec, "%63[^:]:%d:%d:%d%n", name, &b, &prefix, &rows, &used) != 4 ||
            spec[used] || b < 1 || prefix < 0 || rows < 1 || prefix + rows > m.max_position) {
            fprintf(stderr, "sim_step_bench: --step '%s': want NAME:B:PREFIX:ROWS with B >= 1, "
                            "PREFIX >= 0, ROWS >= 1, PREFIX + ROWS <= %d\n",
                    spec, (int)m.max_position);
            return 2;
        }
        sim_step_parts t;
        step_terms(&m, &p, page, b, prefix, rows, &t);
        printf("{\"bench\":\"sim_step\",\"name\":\"%s\",\"model\":\"%s\",\"gpu\":\"%s\","
               "\"sim_profile\":\"%s\",\"sim_profile_hash\":\"%s\","
               "\"batch\":%d,\"prefix\":%d,\"rows\":%d,\"ms\":%.6f,\"gemm_ms\":%.6f,"
               "\"attn_ms\":%.6f,\"act_ms\":%.6f,\"kernels_ms\":%.6f,\"host_ms\":%.6f}\n",
               name, model, file ? file : gpu ? gpu : "h100", p.id, p.hash, b, prefix, rows,
               1e3 * (t.gemm + t.attn + t.act + t.kernels + t.host), 1e3 * t.gemm, 1e3 * t.attn,
               1e3 * t.act, 1e3 * t.kernels, 1e3 * t.host);
    }
    return 0;
}
