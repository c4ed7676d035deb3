/* backend_cpu.c - the "cpu" backend: the fp32 model of model.c, KV pages in
 * host memory, sampling on the host. See backend.h for the contract.
 *
 *   engine --fwd_batch--> model_forward --logits (B, V)--> sampler --> tokens
 *
 * Errors inside forward have no message channel in backend_ops, so they are
 * written to stderr (one line naming the field) and returned as a status.
 *
 * RKV_CPU_BATCH_INVARIANT=1 in the environment turns on the model's
 * batch-invariant mode (model.h): a sequence's logits are then the same bits
 * however it is chunked, cached or batched, at 2-4x the cost. Tests that
 * demand identical greedy tokens across cache kinds can rely on it; by
 * default results agree to about 1e-5 (sgemm's blocking depends on the
 * number of rows).
 *
 * Weights: cfg->weights when given; else, when cfg->model is a checkpoint
 * directory (config.json beside model.safetensors or its index), that
 * directory; else seeded random from cfg->seed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"
#include "model.h"
#include "sampler.h"

rkv_status backend_cpu_create(const backend_config *cfg, backend **out, char *err,
                              size_t errlen);

/* Default KV capacity for the CPU: 64 Ki tokens, capped at 1 GiB of pages. */
enum { CPU_DEFAULT_TOKENS = 65536, CPU_DEFAULT_PAGE_SIZE = 16 };
#define CPU_DEFAULT_KV_BYTES (1LL << 30)

typedef struct cpu_backend {
    backend base;
    model *m;
    kv_cache kv;
    float *logits;        /* (cap_seqs, V) */
    int32_t cap_seqs;
    void *scratch;        /* sampler scratch */
} cpu_backend;

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A directory holding safetensors weights (single file or index)? */
static int is_checkpoint_dir(const char *path)
{
    struct stat sb;
    char p[4096];
    if (!path || stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode)) return 0;
    snprintf(p, sizeof p, "%s/model.safetensors", path);
    if (access(p, R_OK) == 0) return 1;
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", path);
    return access(p, R_OK) == 0;
}

static rkv_status cpu_forward(backend *bb, const fwd_batch *b, int32_t *out_tokens,
                              float *out_logits, double *step_seconds)
{
    cpu_backend *cb = (cpu_backend *)bb;
    const int32_t V = cb->m->cfg.vocab_size, B = b->num_seqs;
    double t0 = now_seconds();
    char err[256];
    if (B > cb->cap_seqs) {
        /* exact, not doubled: batch sizes repeat, so it settles at the largest */
        float *n = realloc(cb->logits, sizeof(float) * (size_t)B * (size_t)V);
        if (!n) return RKV_ENOMEM;
        cb->logits = n;
        cb->cap_seqs = B;
    }
    rkv_status st = model_forward(cb->m, &cb->kv, b, cb->logits, err, sizeof err);
    if (st) {
        fprintf(stderr, "radixkv: cpu backend: %s\n", err);
        return st;
    }
    for (int32_t i = 0; i < B; i++) {
        if (b->sample_rows[i] < 0) continue;
        const float *row = cb->logits + (size_t)i * V;
        sampling_params greedy = {.temperature = 0, .top_k = 0, .top_p = 1, .seed = 0};
        const sampling_params *sp = b->sampling ? &b->sampling[i] : &greedy;
        int64_t step = b->sample_steps ? b->sample_steps[i] : 0;
        if ((st = sampler_sample(row, V, sp, step, cb->scratch, &out_tokens[i]))) {
            fprintf(stderr, "radixkv: cpu backend: bad sampling parameters for sequence %d "
                    "(temperature %g, top_p %g, or penalties/min_tokens without the "
                    "sequence's tokens)\n", i, (double)sp->temperature, (double)sp->top_p);
            return st;
        }
        if (out_logits) memcpy(out_logits + (size_t)i * V, row, sizeof(float) * (size_t)V);
    }
    if (step_seconds) *step_seconds = now_seconds() - t0;
    return RKV_OK;
}

static rkv_status cpu_page_bytes(backend *bb, size_t *bytes)
{
    *bytes = kv_cache_page_bytes(&((cpu_backend *)bb)->kv);
    return RKV_OK;
}

static rkv_status cpu_read_page(backend *bb, int32_t page, void *dst)
{
    return kv_cache_read_page(&((cpu_backend *)bb)->kv, page, dst);
}

static rkv_status cpu_write_page(backend *bb, int32_t page, const void *src)
{
    return kv_cache_write_page(&((cpu_backend *)bb)->kv, page, src);
}

static void cpu_destroy(backend *bb)
{
    cpu_backend *cb = (cpu_backend *)bb;
    if (!cb) return;
    model_destroy(cb->m);
    kv_cache_destroy(&cb->kv);
    free(cb->logits);
    free(cb->scratch);
    free(cb);
}

static const backend_ops cpu_ops = {
    .name = "cpu",
    .forward = cpu_forward,
    .submit = NULL,
    .collect = NULL,
    .page_bytes = cpu_page_bytes,
    .read_page = cpu_read_page,
    .write_page = cpu_write_page,
    .destroy = cpu_destroy,
    /* the same words as its registry line (backend.c) */
    .caps = BACKEND_CAP_HOST_KV | BACKEND_CAP_HOST_THREADS | BACKEND_CAP_ROW_LOGITS,
};

rkv_status backend_cpu_create(const backend_config *cfg, backend **out, char *err,
                              size_t errlen)
{
    *out = NULL;
    backend_config dflt = {0};
    if (!cfg) cfg = &dflt;
    model_config mc;
    rkv_status st = model_config_load(cfg->model, &mc, err, errlen);
    if (st) return st;
    int32_t P = cfg->page_size > 0 ? cfg->page_size : CPU_DEFAULT_PAGE_SIZE;
    if (P > 256) {
        snprintf(err, errlen, "cpu backend: page size %d outside 1..256", P);
        return RKV_EINVAL;
    }
    int invariant = 0;
    const char *inv = getenv("RKV_CPU_BATCH_INVARIANT");
    if (inv && *inv) {
        if (strcmp(inv, "0") && strcmp(inv, "1")) {
            snprintf(err, errlen, "environment RKV_CPU_BATCH_INVARIANT: expected 0 or 1, got '%s'",
                     inv);
            return RKV_EINVAL;
        }
        invariant = inv[0] == '1';
    }
    int64_t np = cfg->num_pages;
    if (np <= 0) {
        int64_t per_token = model_config_kv_bytes_per_token(&mc, 4);
        int64_t tokens = CPU_DEFAULT_KV_BYTES / per_token;
        if (tokens > CPU_DEFAULT_TOKENS) tokens = CPU_DEFAULT_TOKENS;
        np = tokens / P > 0 ? tokens / P : 1;
    }
    if (np > INT32_MAX) {
        snprintf(err, errlen, "cpu backend: num_pages %lld too large", (long long)np);
        return RKV_EINVAL;
    }
    cpu_backend *cb = calloc(1, sizeof *cb);
    if (!cb) return RKV_ENOMEM;
    const char *weights = cfg->weights;
    if (!weights && is_checkpoint_dir(cfg->model)) weights = cfg->model;
    if ((st = model_create(&mc, weights, cfg->seed, cfg->num_threads, &cb->m, err, errlen))) {
        free(cb);
        return st;
    }
    if ((st = kv_cache_init(&cb->kv, &mc, (int32_t)np, P))) {
        snprintf(err, errlen, "cpu backend: cannot allocate %lld KV pages of %d tokens",
                 (long long)np, P);
        cpu_destroy(&cb->base);
        return st;
    }
    cb->m->batch_invariant = invariant;
    cb->m->cascade = cfg->cascade;
    cb->scratch = malloc(sampler_scratch_bytes(mc.vocab_size));
    if (!cb->scratch) {
        cpu_destroy(&cb->base);
        return RKV_ENOMEM;
    }
    cb->base.ops = &cpu_ops;
    cb->base.vocab_size = mc.vocab_size;
    cb->base.page_size = P;
    cb->base.num_pages = np;
    cb->base.max_context = mc.max_position;
    char d[180];
    model_config_describe(&mc, d, sizeof d);
    snprintf(cb->base.description, sizeof cb->base.description, "cpu fp32 %s, %s weights%s%s", d,
             weights ? "safetensors" : "random", invariant ? ", batch-invariant" : "",
             cfg->cascade ? ", cascade attention" : "");
    *out = &cb->base;
    return RKV_OK;
}
