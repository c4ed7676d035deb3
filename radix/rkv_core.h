/* rkv_core.h - the small helpers every layer shares, written once.
 *
 *   rkv_splitmix64       the one 64-bit mixer: seeded weights (cpu and cuda
 *                        must agree bit for bit, so host and device compile
 *                        this same function), sampling, workloads, traces
 *   rkv_grow             amortized growth of a malloc'd array
 *   rkv_read_file        a whole file into one malloc'd, NUL-terminated buffer
 *   rkv_percentile       nearest-rank percentile of a sorted sample
 *   rkv_json_string      a C string as a JSON string literal
 *   rkv_name_index,      a name in a registry's NULL-terminated name list, and
 *   rkv_join_names       the list as "a, b, c" for messages
 *   RKV_WIDE             a loop over long arrays compiled twice on x86-64,
 *                        the AVX2 copy chosen at load where the CPU has it
 *   rkv_fail, rkv_set_err (rkv_status.h) the error helpers: a message into the
 *                        caller's buffer, naming the place, and a status back
 *
 * Usable from C and from CUDA (host and device) for the inline parts; the
 * rest is host code in rkv_core.c. Owns nothing.
 */
#ifndef RKV_CORE_H
#define RKV_CORE_H

#include <stddef.h>
#include <stdint.h>

#include "rkv_status.h"

#ifdef __CUDACC__
#define RKV_HOSTDEV __host__ __device__
#else
#define RKV_HOSTDEV
#endif

/* For a function whose loop -O2 vectorizes at the SSE2 baseline: on x86-64
 * (host code) it is compiled twice, and the AVX2 copy (twice the width)
 * runs where the CPU has it, chosen once at load. Elsewhere nothing. */
#if defined(__x86_64__) && !defined(__CUDACC__) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define RKV_WIDE __attribute__((target_clones("avx2", "default")))
#endif
#endif
#ifndef RKV_WIDE
#define RKV_WIDE
#endif

/* splitmix64 (Steele, Lea, Flood): a bijective mix of x + golden gamma.
 * Stateless form: the same x always gives the same value. */
static inline RKV_HOSTDEV uint64_t rkv_splitmix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* The generator form: advance *state by the gamma and return the mix. */
static inline RKV_HOSTDEV uint64_t rkv_splitmix64_next(uint64_t *state)
{
    uint64_t x = *state;
    *state += 0x9e3779b97f4a7c15ull;
    return rkv_splitmix64(x);
}

#ifdef __cplusplus
extern "C" {
#endif

#ifndef __CUDA_ARCH__
#include <stdio.h>

/* Make *p (elements of elem bytes, capacity *cap) hold at least need:
 * capacity doubles from 16. RKV_ENOMEM (nothing changed) when out of memory
 * or past what size_t holds. */
rkv_status rkv_grow(void **p, int64_t *cap, int64_t need, size_t elem);
/* The same for an int32_t capacity (need beyond INT32_MAX / 2: RKV_ENOMEM). */
rkv_status rkv_grow32(void **p, int32_t *cap, int64_t need, size_t elem);
/* The same for a size_t capacity (byte buffers, size_t counts). */
rkv_status rkv_grow_size(void **p, size_t *cap, size_t need, size_t elem);
/* rkv_grow32 for n parallel arrays that share one capacity *cap: p[i]
 * holds elements of elem[i] bytes. On RKV_ENOMEM *cap is unchanged and each
 * array still holds at least *cap elements (some may have grown), so the
 * caller's structure stays valid and nothing leaks. */
rkv_status rkv_grow32_arrays(void **const p[], const size_t elem[], int n, int32_t *cap,
                             int64_t need);

/* The whole file at path into *data (malloc'd, the caller frees it), *len
 * bytes followed by a NUL that *len does not count, so text parses in place;
 * the bytes may hold NULs of their own. A file of more than max bytes is
 * refused (max 0: no limit). On an error *data is NULL and err names the path
 * and the reason: RKV_EIO (cannot open, cannot read: a directory, a failed
 * read), RKV_EINVAL (larger than max), RKV_ENOMEM. */
rkv_status rkv_read_file(const char *path, size_t max, char **data, size_t *len, char *err,
                         size_t errlen);

/* Nearest-rank percentile p (0..100] of sorted v[0..n); 0 when n = 0. */
double rkv_percentile(const double *sorted, int64_t n, double p);
/* qsort comparator for doubles, ascending. */
int rkv_cmp_double(const void *a, const void *b);

/* s as a JSON string, quotes included: '"' and '\\' escaped, control
 * characters as \u00XX; other bytes (UTF-8) as they are. */
void rkv_json_string(FILE *f, const char *s);

/* Index of name in names (NULL-terminated), -1 when absent or name is NULL. */
int rkv_name_index(const char *const *names, const char *name);
/* names joined as "a, b, c" into buf (cut to len); returns buf. */
const char *rkv_join_names(char *buf, size_t len, const char *const *names);
#endif

#ifdef __cplusplus
}
#endif

#endif
