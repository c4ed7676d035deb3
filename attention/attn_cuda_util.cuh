/* attn_cuda_util.cuh - device helpers shared by the CUDA attention kernels:
 * checked CUDA calls, the two 16-bit dtypes behind one traits struct, and the
 * PTX wrappers (cp.async, ldmatrix, mma.sync m16n8k16).
 *
 * Fragment layouts of mma.sync.m16n8k16 (g = lane / 4, c = lane % 4), which the
 * prefill kernel relies on to reuse the S accumulator as the A operand of P·V:
 *
 *   A (16x16, row):  a0 = A[g][2c..2c+1]    a1 = A[g+8][2c..2c+1]
 *                    a2 = A[g][2c+8..+9]    a3 = A[g+8][2c+8..+9]
 *   B (16x8, col):   b0 = B[2c..2c+1][g]    b1 = B[2c+8..+9][g]
 *   C (16x8, f32):   c0,c1 = C[g][2c..2c+1] c2,c3 = C[g+8][2c..2c+1]
 *
 * so two adjacent 8-column C tiles, rounded to 16 bits, are one 16-column A tile.
 */
#ifndef RKV_ATTN_CUDA_UTIL_CUH
#define RKV_ATTN_CUDA_UTIL_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>

#include "attention.h"

/* Every CUDA runtime call goes through this: on failure it prints the place and
 * CUDA's message and makes the enclosing function return ATTN_ECUDA. */
#define ATTN_CUDA_CHECK(call)                                                          \
    do {                                                                               \
        cudaError_t err_ = (call);                                                     \
        if (err_ != cudaSuccess) {                                                     \
            fprintf(stderr, "%s:%d: CUDA error in %s: %s (%s)\n", __FILE__, __LINE__,  \
                    #call, cudaGetErrorString(err_), cudaGetErrorName(err_));          \
            return ATTN_ECUDA;                                                         \
        }                                                                              \
    } while (0)

/* After a kernel launch: launch-configuration errors surface here. */
#define ATTN_CUDA_CHECK_LAUNCH() ATTN_CUDA_CHECK(cudaGetLastError())

/* The record of ids outside the pool (attention.h, "Pool bounds"), one per
 * device: word 0 holds a bit per kernel kind that met one, word 1 + k the
 * first bad value kind k met (a page id, or a slot for the store): only the
 * thread whose atomicOr set its kind's bit writes it. Static: only
 * attention_cuda.cu includes the kernel headers, so there is one copy.
 *
 *   word:  [ kinds | prefill id | decode id | store slot ]
 */
enum { ATTN_BAD_PREFILL = 0, ATTN_BAD_DECODE = 1, ATTN_BAD_STORE = 2, ATTN_BAD_KINDS = 3 };
static __device__ unsigned int attn_bad_page_word[1 + ATTN_BAD_KINDS];

__device__ __forceinline__ void attn_flag_bad_page(int kind, int value)
{
    if (!(atomicOr(&attn_bad_page_word[0], 1u << kind) & (1u << kind)))
        attn_bad_page_word[1 + kind] = (unsigned int)value;
}

#define ATTN_LOG2E 1.4426950408889634f
#define ATTN_LN2 0.6931471805599453f

template <typename T> struct attn_dt;

/* The two specializations differ only in the 2-lane type (PAIR), its
 * conversions from and to float2 and the type's name in the mma's PTX. */
#define ATTN_DT_TRAITS(T, PAIR, FROM_FLOATS, TO_FLOAT2, PTX)                               \
    template <> struct attn_dt<T> {                                                        \
        static __device__ __forceinline__ uint32_t pack(float a, float b)                  \
        {                                                                                  \
            PAIR h = FROM_FLOATS(a, b);                                                    \
            return *reinterpret_cast<uint32_t *>(&h);                                      \
        }                                                                                  \
        static __device__ __forceinline__ float2 unpack(uint32_t u)                        \
        {                                                                                  \
            return TO_FLOAT2(*reinterpret_cast<PAIR *>(&u));                               \
        }                                                                                  \
        static __device__ __forceinline__ void mma(float c[4], const uint32_t a[4],        \
                                                   uint32_t b0, uint32_t b1)               \
        {                                                                                  \
            asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." PTX "." PTX ".f32 "      \
                         "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"         \
                         : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])                  \
                         : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));  \
        }                                                                                  \
    };

ATTN_DT_TRAITS(__half, __half2, __floats2half2_rn, __half22float2, "f16")
ATTN_DT_TRAITS(__nv_bfloat16, __nv_bfloat162, __floats2bfloat162_rn, __bfloat1622float2, "bf16")
#undef ATTN_DT_TRAITS

/* 16-byte global->shared copy that bypasses L1; src_bytes 0 zero-fills the
 * destination without reading (rows past the end, masked page slots). */
__device__ __forceinline__ void attn_cp_async16(void *smem, const void *gmem, int src_bytes)
{
    uint32_t s = (uint32_t)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem),
                 "r"(src_bytes));
}
__device__ __forceinline__ void attn_cp_async_commit() { asm volatile("cp.async.commit_group;\n"); }
template <int N> __device__ __forceinline__ void attn_cp_async_wait()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void attn_ldmatrix_x4(uint32_t r[4], const void *smem)
{
    uint32_t s = (uint32_t)__cvta_generic_to_shared(smem);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(s));
}
__device__ __forceinline__ void attn_ldmatrix_x4_trans(uint32_t r[4], const void *smem)
{
    uint32_t s = (uint32_t)__cvta_generic_to_shared(smem);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(s));
}

/* attention_common.h's merge of two partial states, on the device and in
 * log2 units (m = lse * log2 e):
 * returns the merged m and the two weights; both -inf gives weights 0. */
__device__ __forceinline__ float attn_merge_weights_dev(float m1, float m2, float *w1, float *w2)
{
    float m = fmaxf(m1, m2);
    if (m == -INFINITY) {
        *w1 = 0.f;
        *w2 = 0.f;
        return -INFINITY;
    }
    float e1 = exp2f(m1 - m), e2 = exp2f(m2 - m);
    float inv = 1.f / (e1 + e2);
    *w1 = e1 * inv;
    *w2 = e2 * inv;
    return m + log2f(e1 + e2);
}

#endif
