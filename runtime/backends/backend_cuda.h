/* backend_cuda.h - the cuda backend's constructor and its test hooks.
 *
 * The backend owns, on one device and one stream: the weights (bf16, one
 * arena), the activations of a step, the KV pool and the cuBLAS handle. The
 * engine reaches it through backend.h; backend_create("cuda", ...) calls
 * backend_cuda_create().
 *
 * Sizes the engine does not pass through backend_config (yet) come from the
 * environment, read once at creation:
 *   RKV_CUDA_MAX_TOKENS  rows per step the activations are sized for (8192)
 *   RKV_CUDA_MAX_SEQS    sequences per step (256)
 *   RKV_CUDA_GRAPHS      0: no CUDA graphs; 1: decode steps (default);
 *                        2: also mixed steps of up to 256 rows (not yet
 *                        verified on a GPU)
 * A larger step is refused with an error naming the variable.
 */
#ifndef RKV_BACKEND_CUDA_H
#define RKV_BACKEND_CUDA_H

#include <stddef.h>

#include "backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* RKV_ENOTSUP when built without CUDA or when no device is present;
 * RKV_ENOSPC when the model does not fit (message names the part). */
rkv_status backend_cuda_create(const backend_config *cfg, backend **out, char *err,
                               size_t errlen);

/* 1 when a CUDA device can be used by this build (tests skip otherwise). */
int backend_cuda_available(void);

/* Tests: the graph level (0, 1, 2 as RKV_CUDA_GRAPHS); returns the number of
 * graphs captured so far. */
int backend_cuda_set_graphs(backend *b, int on);

#ifdef __cplusplus
}
#endif
#endif
