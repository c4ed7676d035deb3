/* cuda_kernels.cuh - the small fused kernels of the cuda backend (everything
 * but the GEMMs, which are cuBLAS, and attention, which is attention/).
 *
 * Dimension letters as in model_config.h: T rows of the step, B sequences,
 * C hidden, F intermediate, V vocab, Hq/Hkv heads, D head dim. Activations:
 * the residual stream and every GEMM output are fp32, GEMM inputs bf16.
 *
 * Each launcher enqueues on `st` and returns cudaGetLastError(), so the caller
 * checks it with its file:line macro. None allocates or synchronises: all of
 * them may be captured into a CUDA graph.
 */
#ifndef RKV_CUDA_KERNELS_CUH
#define RKV_CUDA_KERNELS_CUH

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>

typedef __nv_bfloat16 bf16;

/* resid (T, C) fp32 = embed (V, C)[token_ids[t]]. */
cudaError_t rkv_embed(const bf16 *embed, const int32_t *token_ids, float *resid, int32_t T,
                      int32_t C, cudaStream_t st);

/* If add: resid += add (T, C). Then out = resid / rms(resid) * w, in bf16. */
cudaError_t rkv_add_rmsnorm(float *resid, const float *add, const float *w, bf16 *out,
                            int32_t T, int32_t C, float eps, cudaStream_t st);

/* proj (T, (Hq + 2 Hkv) D) fp32 (+ bias) -> q (T, Hq, D), k, v (T, Hkv, D) in
 * bf16, q and k rotated at positions[t] (rotate-half pairs (i, i + D/2));
 * rope (max_pos, D/2) holds (cos, sin) of pos * theta^(-2i/D). */
cudaError_t rkv_qkv_rope(const float *proj, const float *bias, const float2 *rope,
                         const int32_t *positions, bf16 *q, bf16 *k, bf16 *v, int32_t T,
                         int32_t Hq, int32_t Hkv, int32_t D, cudaStream_t st);

/* act (T, F) = silu(gu[:, :F]) * gu[:, F:], gu (T, 2F) fp32. */
cudaError_t rkv_swiglu(const float *gu, bf16 *act, int32_t T, int32_t F, cudaStream_t st);

/* For each b < B: out (B, C) row b = rmsnorm(resid[row] + add[row]) * w with
 * row = sample_rows[b], zeros when row < 0. Only sampling rows reach the head. */
cudaError_t rkv_final_gather(const float *resid, const float *add, const int32_t *sample_rows,
                             const float *w, bf16 *out, int32_t B, int32_t C, float eps,
                             cudaStream_t st);

/* out[b] = argmax of logits (B, V) row b (NaN as -inf, ties to the lowest id),
 * or -1 where sample_rows[b] < 0. */
cudaError_t rkv_argmax(const float *logits, const int32_t *sample_rows, int32_t *out, int32_t B,
                       int32_t V, cudaStream_t st);

/* Seeded weights, the CPU model's scheme element for element: with
 * u_i = (splitmix64(key + i) >> 11) 2^-53, element i is
 * (float)(mean + a (2 u_i - 1)) (computed in double), rounded to bf16 for
 * matrices. key is the tensor's stream (see backend_cuda.cu). */
cudaError_t rkv_init_seeded(void *p, int to_bf16, int64_t n, uint64_t key, double mean, double a,
                            cudaStream_t st);

#endif
