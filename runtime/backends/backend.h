/* backend.h - what the engine asks of a model backend (cpu, cuda, sim).
 *
 * The engine owns the scheduler, the cache and the page pool; a backend owns
 * the model and the KV pages' memory (num_pages pages of page_size tokens, page
 * ids shared with the engine's page_pool). Per step the engine hands over a
 * flat batch and gets back one sampled token per sequence that samples.
 *
 *   seq i:  [ prefix: prefix_lens[i] tokens already in pages ][ this step's rows ]
 *           rows q_starts[i] .. q_starts[i+1] of token_ids / positions / slots
 *
 * A decode step is a sequence with one row. A chunk of a long prompt that does
 * not sample has sample_rows[i] = -1.
 */
#ifndef RKV_BACKEND_H
#define RKV_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fwd_batch.h"
#include "rkv_status.h"


typedef struct backend_config {
    const char *model;        /* preset name or path to a config.json; NULL: built-in default */
    const char *weights;      /* safetensors file or directory; NULL: seeded random */
    uint64_t seed;            /* weight seed */
    int32_t page_size;
    int64_t num_pages;        /* <= 0: backend decides (cuda: from memory fraction) */
    double mem_fraction;      /* cuda: fraction of free device memory for weights+KV */
    int num_threads;          /* cpu: <= 0 all cores */
    const char *gpu_profile;  /* sim: a built-in profile ("h100", the default; `radixkv list`) */
    const char *sim_profile_file; /* sim: a profile JSON file instead (not with gpu_profile) */
    int cascade;              /* cpu: 1 = cascade attention over pages shared by several
                                 sequences of a step (attention.h); 0 = off (default) */
} backend_config;

typedef struct backend backend;

/* What a backend is, so that the engine asks instead of comparing names. */
enum {
    /* step_seconds is a model's estimate, not a measurement: the engine's
     * clock advances by it (plus measured host time) instead of wall time. */
    BACKEND_CAP_MODELLED_TIME = 1u << 0,
    /* The K/V pages live in host memory, in fp32 (run's up-front memory
     * check counts them). */
    BACKEND_CAP_HOST_KV = 1u << 1,
    /* The model runs on a pool of host threads (--threads sizes it). */
    BACKEND_CAP_HOST_THREADS = 1u << 2,
    /* forward writes fwd_batch.row_logits (every row's logits: prompt
     * logprobs); a backend without it ignores them. */
    BACKEND_CAP_ROW_LOGITS = 1u << 3,
};

typedef struct backend_ops {
    const char *name;
    /* Run one step. out_tokens[i] is written for every i with sample_rows[i] >= 0.
     * out_logits, if non-NULL, receives (B, vocab) fp32 logits of the sampled rows
     * (tests). *step_seconds: measured time (cpu, cuda) or modelled time (sim). */
    rkv_status (*forward)(backend *b, const fwd_batch *batch, int32_t *out_tokens,
                          float *out_logits, double *step_seconds);
    /* Optional overlap: submit a step, then collect its tokens. NULL: the engine
     * calls forward. */
    rkv_status (*submit)(backend *b, const fwd_batch *batch);
    rkv_status (*collect)(backend *b, int32_t *out_tokens, double *step_seconds);
    /* Copy one page between KV memory and host bytes (spill tier); optional. */
    rkv_status (*page_bytes)(backend *b, size_t *bytes_per_page);
    rkv_status (*read_page)(backend *b, int32_t page, void *dst);
    rkv_status (*write_page)(backend *b, int32_t page, const void *src);
    void (*destroy)(backend *b);
    unsigned caps;         /* BACKEND_CAP_* */
} backend_ops;

struct backend {
    const backend_ops *ops;
    int32_t vocab_size;
    int32_t page_size;
    int64_t num_pages;
    int32_t max_context;   /* model's max positions */
    char description[256]; /* one line for logs: model shape, dtype, device */
};

/* Every backend name, NULL-terminated, built into this binary or not. */
extern const char *const backend_names[];
/* Whether backend name is built into this binary. */
bool backend_built(const char *name);
/* The capabilities (BACKEND_CAP_*) every backend of that name has; NULL:
 * the default backend; 0 for an unknown name. */
unsigned backend_caps(const char *name);
/* Its one-line summary (for `radixkv list` and help); NULL when unknown. */
const char *backend_summary(const char *name);
/* Create by name: "cpu", "cuda", "sim". Unknown name or a backend not built in:
 * RKV_EINVAL / RKV_ENOTSUP with a message in err. */
rkv_status backend_create(const char *name, const backend_config *cfg, backend **out,
                          char *err, size_t errlen);
static inline void backend_destroy(backend *b) { if (b) b->ops->destroy(b); }

#endif
