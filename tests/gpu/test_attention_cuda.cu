/* test_attention_cuda.cu - suite `gpu`: the CUDA attention kernels against a
 * double-precision host reference. Exits 77 (skip) without a CUDA device.
 *
 * Inputs are drawn in fp32, rounded to the kernel's dtype, and the reference
 * (attn_prefill_ref for prefill, a local double loop for decode and merge)
 * runs on the rounded values, so the tolerance covers only the kernel's own
 * rounding (P and O in 16 bits): relative Frobenius error per sequence
 * <= 1e-2 in bf16, <= 2e-3 in fp16. Outputs are poisoned with NaN before every
 * launch and unused pool pages hold NaN, so an unwritten output or a read
 * outside the sequence's pages fails. One line per case goes to stdout.
 *
 * RKV_TEST_SEED overrides the seed (printed on every line that fails).
 */
#include <check.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "attention.h"
#include "check_run.h"

static uint64_t g_seed = 0x5eed1234u;

#define CUDA_OK(call)                                                                  \
    do {                                                                               \
        cudaError_t e_ = (call);                                                       \
        ck_assert_msg(e_ == cudaSuccess, "%s:%d: %s: %s", __FILE__, __LINE__, #call,   \
                      cudaGetErrorString(e_));                                         \
    } while (0)

/* ---- host helpers -------------------------------------------------------- */

struct rng {
    uint64_t s;
    explicit rng(uint64_t seed) : s(seed * 0x9e3779b97f4a7c15ull + 1) {}
    uint64_t next()
    {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        return s;
    }
    float uni() { return (float)((next() >> 40) * (1.0 / 16777216.0)) * 2.f - 1.f; } /* [-1,1) */
    int below(int n) { return (int)(next() % (uint64_t)n); }
};

static uint16_t to_bits(float f, attn_dtype dt)
{
    uint16_t u;
    if (dt == ATTN_BF16) {
        u = __nv_bfloat16_raw(__float2bfloat16_rn(f)).x;
    } else {
        u = __half_raw(__float2half_rn(f)).x;
    }
    return u;
}
static float from_bits(uint16_t u, attn_dtype dt)
{
    if (dt == ATTN_BF16) {
        __nv_bfloat16_raw raw;
        raw.x = u;
        return __bfloat162float(__nv_bfloat16(raw));
    }
    __half_raw raw;
    raw.x = u;
    return __half2float(__half(raw));
}
static const uint16_t NAN_BITS = 0xffff; /* a NaN in both bf16 and fp16 */

/* A host tensor kept both as 16-bit bits (what the GPU gets) and as the float
 * value of those bits (what the reference uses). */
struct htensor {
    std::vector<uint16_t> bits;
    std::vector<float> val;
    void fill_random(size_t n, rng &r, attn_dtype dt)
    {
        bits.resize(n);
        val.resize(n);
        for (size_t i = 0; i < n; i++) {
            bits[i] = to_bits(r.uni(), dt);
            val[i] = from_bits(bits[i], dt);
        }
    }
};

template <typename V> static V *dev_upload(const std::vector<V> &h)
{
    V *d = NULL;
    size_t n = h.size() ? h.size() : 1;
    if (cudaMalloc(&d, n * sizeof(V)) != cudaSuccess)
        return NULL;
    if (h.size())
        cudaMemcpy(d, h.data(), h.size() * sizeof(V), cudaMemcpyHostToDevice);
    return d;
}
template <typename V> static std::vector<V> dev_download(const V *d, size_t n)
{
    std::vector<V> h(n);
    cudaMemcpy(h.data(), d, n * sizeof(V), cudaMemcpyDeviceToHost);
    return h;
}

/* Reference: one query row over nkeys keys, key(i)/val(i) return row pointers. */
template <typename KF, typename VF>
static void ref_row(const float *q, int D, int nkeys, double scale, KF key, VF val, double *o,
                    double *lse)
{
    std::vector<double> sc(nkeys > 0 ? nkeys : 1);
    double m = -INFINITY;
    for (int i = 0; i < nkeys; i++) {
        const float *k = key(i);
        double acc = 0;
        for (int d = 0; d < D; d++)
            acc += (double)q[d] * k[d];
        sc[i] = acc * scale;
        if (sc[i] > m)
            m = sc[i];
    }
    for (int d = 0; d < D; d++)
        o[d] = 0;
    if (nkeys == 0) {
        *lse = -INFINITY;
        return;
    }
    double sum = 0;
    for (int i = 0; i < nkeys; i++) {
        double p = exp(sc[i] - m);
        sum += p;
        const float *v = val(i);
        for (int d = 0; d < D; d++)
            o[d] += p * v[d];
    }
    for (int d = 0; d < D; d++)
        o[d] /= sum;
    *lse = m + log(sum);
}

static const char *dt_name(attn_dtype dt) { return dt == ATTN_BF16 ? "bf16" : "fp16"; }
static double dt_tol(attn_dtype dt) { return dt == ATTN_BF16 ? 1e-2 : 2e-3; }

/* ---- prefill ------------------------------------------------------------- */

/* One batch mixing prefix {0, short, several pages + partial} x suffix {1,
 * short, long (> one 128-row tile)} for one (dtype, D, page size, GQA). */
static int run_prefill_case(attn_dtype dt, int D, int P, int G, uint64_t seed,
                            bool pass_max_suffix = true)
{
    rng r(seed);
    const int HQ = 8, HKV = HQ / G;
    const int long_prefix = 3 * P + P / 2 + 1 > 150 ? 3 * P + P / 2 + 1 : 150;
    const int prefixes[3] = {0, 5, long_prefix};
    const int suffixes[3] = {1, 7, 200};
    std::vector<int> plen, slen;
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 3; b++) {
            plen.push_back(prefixes[a]);
            slen.push_back(suffixes[(a + b) % 3]);
        }
    const int B = (int)plen.size();
    std::vector<int32_t> q_starts(B + 1, 0);
    int max_pages = 1, total_pages = 0, max_suffix = 0;
    for (int i = 0; i < B; i++) {
        q_starts[i + 1] = q_starts[i] + slen[i];
        int np = (plen[i] + P - 1) / P;
        total_pages += np;
        if (np > max_pages)
            max_pages = np;
        if (slen[i] > max_suffix)
            max_suffix = slen[i];
    }
    const int T = q_starts[B], NP = total_pages + 3;
    /* Scatter each sequence's pages over the pool in random order. */
    std::vector<int> perm(NP);
    for (int i = 0; i < NP; i++)
        perm[i] = i;
    for (int i = NP - 1; i > 0; i--) {
        int j = r.below(i + 1);
        int t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    std::vector<int32_t> table((size_t)B * max_pages, -1);
    int next = 0;
    for (int i = 0; i < B; i++)
        for (int pg = 0; pg < (plen[i] + P - 1) / P; pg++)
            table[(size_t)i * max_pages + pg] = perm[next++];

    htensor q, kn, vn, kc, vc;
    q.fill_random((size_t)T * HQ * D, r, dt);
    kn.fill_random((size_t)T * HKV * D, r, dt);
    vn.fill_random((size_t)T * HKV * D, r, dt);
    kc.fill_random((size_t)NP * P * HKV * D, r, dt);
    vc.fill_random((size_t)NP * P * HKV * D, r, dt);
    /* Unused pages and the slots past each prefix hold NaN: reading them fails. */
    const size_t row = (size_t)HKV * D;
    std::vector<char> used((size_t)NP * P, 0);
    for (int i = 0; i < B; i++)
        for (int pos = 0; pos < plen[i]; pos++)
            used[(size_t)table[(size_t)i * max_pages + pos / P] * P + pos % P] = 1;
    for (size_t slot = 0; slot < (size_t)NP * P; slot++)
        if (!used[slot])
            for (size_t e = 0; e < row; e++) {
                kc.bits[slot * row + e] = vc.bits[slot * row + e] = NAN_BITS;
                kc.val[slot * row + e] = vc.val[slot * row + e] = NAN;
            }

    const double scale = 1.0 / sqrt((double)D);
    attn_shape s = {HQ, HKV, D, P, (float)scale};
    uint16_t *dq = dev_upload(q.bits), *dkn = dev_upload(kn.bits), *dvn = dev_upload(vn.bits);
    uint16_t *dkc = dev_upload(kc.bits), *dvc = dev_upload(vc.bits);
    int32_t *dqs = dev_upload(q_starts), *dpt = dev_upload(table);
    std::vector<int32_t> plen32(plen.begin(), plen.end());
    int32_t *dpl = dev_upload(plen32);
    uint16_t *dout = NULL;
    float *dlse = NULL;
    CUDA_OK(cudaMalloc(&dout, (size_t)T * HQ * D * 2));
    CUDA_OK(cudaMalloc(&dlse, (size_t)T * HQ * 4));
    CUDA_OK(cudaMemset(dout, 0xff, (size_t)T * HQ * D * 2)); /* poison: NaN */
    CUDA_OK(cudaMemset(dlse, 0xff, (size_t)T * HQ * 4));
    /* max_suffix = 0 ("not known") must give the same rows as the true value. */
    if (!pass_max_suffix)
        max_suffix = 0;
    attn_batch b = {B, max_pages, dqs, dpl, dpt, max_suffix, NP};
    int rc = attn_prefill_cuda(&s, &b, dt, dq, dkn, dvn, dkc, dvc, dout, dlse, NULL);
    ck_assert_msg(rc == 0, "attn_prefill_cuda returned %d", rc);
    CUDA_OK(cudaDeviceSynchronize());
    std::vector<uint16_t> out = dev_download(dout, (size_t)T * HQ * D);
    std::vector<float> lse = dev_download(dlse, (size_t)T * HQ);

    /* The CPU reference (double accumulation) on the same rounded inputs. */
    attn_batch hb = {B, max_pages, q_starts.data(), plen32.data(), table.data(), max_suffix,
                     NP};
    std::vector<double> ref_o((size_t)T * HQ * D), ref_l((size_t)T * HQ);
    rc = attn_prefill_ref(&s, &hb, q.val.data(), kn.val.data(), vn.val.data(), kc.val.data(),
                          vc.val.data(), ref_o.data(), ref_l.data());
    ck_assert_msg(rc == 0, "attn_prefill_ref returned %d", rc);
    int failures = 0;
    for (int i = 0; i < B; i++) {
        double num = 0, den = 0, lse_err = 0;
        int bad = 0;
        for (int j = 0; j < slen[i]; j++) {
            int t = q_starts[i] + j;
            for (int h = 0; h < HQ; h++) {
                const double *ro = &ref_o[((size_t)t * HQ + h) * D];
                double rl = ref_l[(size_t)t * HQ + h];
                for (int d = 0; d < D; d++) {
                    float got = from_bits(out[((size_t)t * HQ + h) * D + d], dt);
                    if (!isfinite(got) || !isfinite(ro[d]))
                        bad++;
                    num += (got - ro[d]) * (got - ro[d]);
                    den += ro[d] * ro[d];
                }
                float gl = lse[(size_t)t * HQ + h];
                if (!isfinite(gl))
                    bad++;
                else if (fabs(gl - rl) > lse_err)
                    lse_err = fabs(gl - rl);
            }
        }
        double rel = sqrt(num / (den > 0 ? den : 1));
        bool ok = !bad && rel <= dt_tol(dt) && lse_err <= dt_tol(dt);
        printf("prefill %s D=%d page=%d gqa=%d seq=%d prefix=%d suffix=%d rel_err=%.3e "
               "lse_err=%.3e nonfinite=%d %s (seed %llu)\n",
               dt_name(dt), D, P, G, i, plen[i], slen[i], rel, lse_err, bad, ok ? "ok" : "FAIL",
               (unsigned long long)seed);
        failures += !ok;
    }
    fflush(stdout);
    cudaFree(dq), cudaFree(dkn), cudaFree(dvn), cudaFree(dkc), cudaFree(dvc);
    cudaFree(dqs), cudaFree(dpt), cudaFree(dpl), cudaFree(dout), cudaFree(dlse);
    return failures;
}

static const attn_dtype DTS[2] = {ATTN_BF16, ATTN_FP16};
static const int PAGES[3] = {1, 16, 64}, GQAS[3] = {1, 4, 8}, DIMS[2] = {64, 128};

START_TEST(test_prefill_grid)
{
    /* _i: dtype x head dim; the loop covers page sizes x GQA ratios. */
    attn_dtype dt = DTS[_i / 2];
    int D = DIMS[_i % 2], failures = 0;
    for (int pi = 0; pi < 3; pi++)
        for (int gi = 0; gi < 3; gi++)
            failures += run_prefill_case(dt, D, PAGES[pi], GQAS[gi],
                                         g_seed + 100 * _i + 10 * pi + gi);
    ck_assert_msg(failures == 0, "%d prefill sequences out of tolerance (see the log)", failures);
}
END_TEST

/* max_suffix = 0 is accepted by the CPU (it is not needed there) and must
 * behave the same on CUDA: every row written, the same values. */
START_TEST(test_prefill_max_suffix_zero)
{
    int failures = 0;
    for (int pi = 0; pi < 3; pi++)
        failures += run_prefill_case(DTS[_i], 128, PAGES[pi], 4, g_seed + 900 + pi, false);
    ck_assert_msg(failures == 0, "%d sequences out of tolerance with max_suffix = 0", failures);
}
END_TEST

/* Cascade level 1: groups of stacked query rows against their shared pages,
 * no mask, against the fp32 CPU version on the same rounded inputs. */
START_TEST(test_prefill_shared_level)
{
    attn_dtype dt = DTS[_i % 2];
    const int D = _i < 2 ? 128 : 64, P = 16, HQ = 8, HKV = 2;
    rng r(g_seed + 1300 + _i);
    const int G = 3, rows[G] = {1, 64, 200}, shared[G] = {5 * P, 3 * P, 40 * P};
    std::vector<int32_t> qs(G + 1, 0), plen(G);
    int max_pages = 0, NP = 0;
    for (int g = 0; g < G; g++) {
        qs[g + 1] = qs[g] + rows[g];
        plen[g] = shared[g];
        max_pages = shared[g] / P > max_pages ? shared[g] / P : max_pages;
        NP += shared[g] / P;
    }
    std::vector<int32_t> table((size_t)G * max_pages, -1);
    for (int g = 0, next = 0; g < G; g++)
        for (int k = 0; k < shared[g] / P; k++)
            table[(size_t)g * max_pages + k] = (next++ * 7) % NP; /* 7 is prime to NP */
    const int T = qs[G];
    htensor q, kc, vc;
    q.fill_random((size_t)T * HQ * D, r, dt);
    kc.fill_random((size_t)NP * P * HKV * D, r, dt);
    vc.fill_random((size_t)NP * P * HKV * D, r, dt);
    attn_shape s = {HQ, HKV, D, P, (float)(1.0 / sqrt((double)D))};
    uint16_t *dq = dev_upload(q.bits), *dkc = dev_upload(kc.bits), *dvc = dev_upload(vc.bits);
    int32_t *dqs = dev_upload(qs), *dpl = dev_upload(plen), *dpt = dev_upload(table);
    uint16_t *dout = NULL;
    float *dlse = NULL;
    CUDA_OK(cudaMalloc(&dout, (size_t)T * HQ * D * 2));
    CUDA_OK(cudaMalloc(&dlse, (size_t)T * HQ * 4));
    CUDA_OK(cudaMemset(dout, 0xff, (size_t)T * HQ * D * 2));
    CUDA_OK(cudaMemset(dlse, 0xff, (size_t)T * HQ * 4));
    attn_batch b = {G, max_pages, dqs, dpl, dpt, 200, NP};
    int rc = attn_prefill_shared_cuda(&s, &b, dt, dq, dkc, dvc, dout, dlse, NULL);
    ck_assert_msg(rc == 0, "attn_prefill_shared_cuda returned %d", rc);
    CUDA_OK(cudaDeviceSynchronize());
    ck_assert_int_eq(attn_cuda_check_error(NULL), ATTN_OK);
    std::vector<uint16_t> out = dev_download(dout, (size_t)T * HQ * D);
    std::vector<float> lse = dev_download(dlse, (size_t)T * HQ);
    attn_batch hb = {G, max_pages, qs.data(), plen.data(), table.data(), 0, NP};
    std::vector<float> ref_o((size_t)T * HQ * D), ref_l((size_t)T * HQ);
    rc = attn_prefill_shared_cpu(&s, &hb, q.val.data(), kc.val.data(), vc.val.data(),
                                 ref_o.data(), ref_l.data(), 0);
    ck_assert_int_eq(rc, ATTN_OK);
    double num = 0, den = 0, lse_err = 0;
    int bad = 0;
    for (size_t i = 0; i < ref_o.size(); i++) {
        float got = from_bits(out[i], dt);
        bad += !isfinite(got);
        num += (got - ref_o[i]) * (got - ref_o[i]);
        den += (double)ref_o[i] * ref_o[i];
    }
    for (size_t i = 0; i < ref_l.size(); i++) {
        bad += !isfinite(lse[i]);
        if (fabs(lse[i] - ref_l[i]) > lse_err)
            lse_err = fabs(lse[i] - ref_l[i]);
    }
    double rel = sqrt(num / (den > 0 ? den : 1));
    printf("shared level %s D=%d rel_err=%.3e lse_err=%.3e nonfinite=%d\n", dt_name(dt), D, rel,
           lse_err, bad);
    ck_assert_msg(!bad && rel <= dt_tol(dt) && lse_err <= dt_tol(dt),
                  "shared level %s D=%d: rel %.3e lse %.3e nonfinite %d", dt_name(dt), D, rel,
                  lse_err, bad);
    cudaFree(dq), cudaFree(dkc), cudaFree(dvc), cudaFree(dqs), cudaFree(dpl), cudaFree(dpt);
    cudaFree(dout), cudaFree(dlse);
}
END_TEST

/* Attention over (prefix, suffix) equals attention over the concatenation
 * seen as one suffix: same kernel, two layouts of the same keys. */
START_TEST(test_prefill_split_equals_whole)
{
    attn_dtype dt = ATTN_FP16;
    const int D = 128, P = 16, HQ = 4, HKV = 2, L = 300, S = 50, PFX = L - S;
    rng r(g_seed + 7);
    htensor q, k, v;
    q.fill_random((size_t)L * HQ * D, r, dt);
    k.fill_random((size_t)L * HKV * D, r, dt);
    v.fill_random((size_t)L * HKV * D, r, dt);
    attn_shape s = {HQ, HKV, D, P, 0.2f};
    /* Whole: L suffix tokens, no prefix. */
    uint16_t *dq = dev_upload(q.bits), *dk = dev_upload(k.bits), *dv = dev_upload(v.bits);
    std::vector<int32_t> qs_whole = {0, L}, zero = {0}, table_whole = {0};
    int32_t *dqs_w = dev_upload(qs_whole), *dz = dev_upload(zero), *dt_w = dev_upload(table_whole);
    uint16_t *dout_w, *dout_s;
    CUDA_OK(cudaMalloc(&dout_w, (size_t)L * HQ * D * 2));
    CUDA_OK(cudaMalloc(&dout_s, (size_t)S * HQ * D * 2));
    CUDA_OK(cudaMemset(dout_w, 0xff, (size_t)L * HQ * D * 2));
    CUDA_OK(cudaMemset(dout_s, 0xff, (size_t)S * HQ * D * 2));
    attn_batch bw = {1, 1, dqs_w, dz, dt_w, L, 1};
    ck_assert_int_eq(attn_prefill_cuda(&s, &bw, dt, dq, dk, dv, dk, dv, dout_w, NULL, NULL), 0);
    /* Split: the first PFX tokens are pages 0.. of a cache laid out in order
     * (token pos = slot pos), the last S the suffix. */
    std::vector<int32_t> qs_split = {0, S}, pl = {PFX}, table((PFX + P - 1) / P);
    for (size_t i = 0; i < table.size(); i++)
        table[i] = (int32_t)i;
    int32_t *dqs_s = dev_upload(qs_split), *dpl = dev_upload(pl), *dtab = dev_upload(table);
    const size_t off_q = (size_t)PFX * HQ * D, off_kv = (size_t)PFX * HKV * D;
    /* The pool: the whole pages of k/v (L tokens). */
    attn_batch bs = {1, (int32_t)table.size(), dqs_s, dpl, dtab, S, L / P};
    ck_assert_int_eq(attn_prefill_cuda(&s, &bs, dt, dq + off_q, dk + off_kv, dv + off_kv, dk, dv,
                                       dout_s, NULL, NULL),
                     0);
    CUDA_OK(cudaDeviceSynchronize());
    std::vector<uint16_t> ow = dev_download(dout_w + off_q, (size_t)S * HQ * D);
    std::vector<uint16_t> os = dev_download(dout_s, (size_t)S * HQ * D);
    double num = 0, den = 0;
    for (size_t i = 0; i < ow.size(); i++) {
        double a = from_bits(ow[i], dt), c = from_bits(os[i], dt);
        ck_assert_msg(isfinite(a) && isfinite(c), "non-finite output at %zu", i);
        num += (a - c) * (a - c);
        den += a * a;
    }
    double rel = sqrt(num / den);
    printf("prefill split-vs-whole fp16 D=%d page=%d L=%d S=%d rel_diff=%.3e\n", D, P, L, S, rel);
    ck_assert_msg(rel <= 2e-3, "split and whole differ: %.3e (seed %llu)", rel,
                  (unsigned long long)g_seed);
    cudaFree(dq), cudaFree(dk), cudaFree(dv), cudaFree(dqs_w), cudaFree(dz), cudaFree(dt_w);
    cudaFree(dout_w), cudaFree(dout_s), cudaFree(dqs_s), cudaFree(dpl), cudaFree(dtab);
}
END_TEST

/* ---- decode -------------------------------------------------------------- */

static int run_decode_case(attn_dtype dt, int D, int P, int G, int max_splits, bool own_ws,
                           uint64_t seed)
{
    rng r(seed);
    const int HQ = 8, HKV = HQ / G;
    std::vector<int32_t> lens = {0, 1, 17, 3 * P + P / 2 + 1, 1000, 2500};
    const int B = (int)lens.size();
    int max_len = 0, max_pages = 1, total = 0;
    for (int L : lens) {
        max_len = L > max_len ? L : max_len;
        int np = (L + P - 1) / P;
        max_pages = np > max_pages ? np : max_pages;
        total += np;
    }
    const int NP = total + 2;
    std::vector<int> perm(NP);
    for (int i = 0; i < NP; i++)
        perm[i] = i;
    for (int i = NP - 1; i > 0; i--) {
        int j = r.below(i + 1), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    std::vector<int32_t> table((size_t)B * max_pages, -1);
    int next = 0;
    for (int i = 0; i < B; i++)
        for (int pg = 0; pg < (lens[i] + P - 1) / P; pg++)
            table[(size_t)i * max_pages + pg] = perm[next++];
    htensor q, kc, vc;
    q.fill_random((size_t)B * HQ * D, r, dt);
    kc.fill_random((size_t)NP * P * HKV * D, r, dt);
    vc.fill_random((size_t)NP * P * HKV * D, r, dt);
    const double scale = 1.5 / sqrt((double)D);
    attn_shape s = {HQ, HKV, D, P, (float)scale};
    uint16_t *dq = dev_upload(q.bits), *dkc = dev_upload(kc.bits), *dvc = dev_upload(vc.bits);
    int32_t *dlen = dev_upload(lens), *dpt = dev_upload(table);
    uint16_t *dout;
    float *dlse;
    void *ws = NULL;
    CUDA_OK(cudaMalloc(&dout, (size_t)B * HQ * D * 2));
    CUDA_OK(cudaMalloc(&dlse, (size_t)B * HQ * 4));
    CUDA_OK(cudaMemset(dout, 0xff, (size_t)B * HQ * D * 2));
    CUDA_OK(cudaMemset(dlse, 0xff, (size_t)B * HQ * 4));
    if (own_ws) {
        size_t wb = attn_decode_workspace_bytes(&s, B, max_splits);
        ck_assert(wb > 0);
        CUDA_OK(cudaMalloc(&ws, wb));
        CUDA_OK(cudaMemset(ws, 0xff, wb));
    }
    int rc = attn_decode_cuda(&s, dt, B, dlen, dpt, max_pages, NP, max_len, dq, dkc, dvc, dout,
                              dlse, ws, max_splits, NULL);
    ck_assert_msg(rc == 0, "attn_decode_cuda returned %d", rc);
    CUDA_OK(cudaDeviceSynchronize());
    std::vector<uint16_t> out = dev_download(dout, (size_t)B * HQ * D);
    std::vector<float> lse = dev_download(dlse, (size_t)B * HQ);
    int failures = 0;
    std::vector<double> ro(D);
    for (int i = 0; i < B; i++) {
        double num = 0, den = 0, lse_err = 0;
        int bad = 0;
        for (int h = 0; h < HQ; h++) {
            int kvh = h / G;
            auto at = [&](const htensor &c, int pos) {
                size_t slot = (size_t)table[(size_t)i * max_pages + pos / P] * P + pos % P;
                return &c.val[(slot * HKV + kvh) * D];
            };
            double rl;
            ref_row(
                &q.val[((size_t)i * HQ + h) * D], D, lens[i], scale,
                [&](int pos) { return at(kc, pos); }, [&](int pos) { return at(vc, pos); },
                ro.data(), &rl);
            for (int d = 0; d < D; d++) {
                float got = from_bits(out[((size_t)i * HQ + h) * D + d], dt);
                if (!isfinite(got))
                    bad++;
                num += (got - ro[d]) * (got - ro[d]);
                den += ro[d] * ro[d];
            }
            float gl = lse[(size_t)i * HQ + h];
            if (lens[i] == 0) {
                if (!(isinf(gl) && gl < 0) || num != 0)
                    bad++;
            } else if (!isfinite(gl)) {
                bad++;
            } else if (fabs(gl - rl) > lse_err) {
                lse_err = fabs(gl - rl);
            }
        }
        double rel = den > 0 ? sqrt(num / den) : sqrt(num);
        bool ok = !bad && rel <= dt_tol(dt) && lse_err <= dt_tol(dt);
        printf("decode %s D=%d page=%d gqa=%d splits<=%d ws=%s seq=%d len=%d rel_err=%.3e "
               "lse_err=%.3e bad=%d %s (seed %llu)\n",
               dt_name(dt), D, P, G, max_splits, own_ws ? "caller" : "internal", i, lens[i], rel,
               lse_err, bad, ok ? "ok" : "FAIL", (unsigned long long)seed);
        failures += !ok;
    }
    fflush(stdout);
    cudaFree(dq), cudaFree(dkc), cudaFree(dvc), cudaFree(dlen), cudaFree(dpt);
    cudaFree(dout), cudaFree(dlse), cudaFree(ws);
    return failures;
}

START_TEST(test_decode_grid)
{
    attn_dtype dt = DTS[_i / 2];
    int D = DIMS[_i % 2], failures = 0;
    for (int pi = 0; pi < 3; pi++)
        for (int gi = 0; gi < 3; gi++) {
            uint64_t sd = g_seed + 1000 + 100 * _i + 10 * pi + gi;
            failures += run_decode_case(dt, D, PAGES[pi], GQAS[gi], 0, true, sd);
            failures += run_decode_case(dt, D, PAGES[pi], GQAS[gi], 1, false, sd);
            failures += run_decode_case(dt, D, PAGES[pi], GQAS[gi], 7, false, sd);
        }
    ck_assert_msg(failures == 0, "%d decode sequences out of tolerance (see the log)", failures);
}
END_TEST

/* ---- merge --------------------------------------------------------------- */

START_TEST(test_merge)
{
    attn_dtype dt = DTS[_i / 2];
    const int D = DIMS[_i % 2], rows = 777;
    rng r(g_seed + 5000 + _i);
    htensor o1, o2;
    o1.fill_random((size_t)rows * D, r, dt);
    o2.fill_random((size_t)rows * D, r, dt);
    std::vector<float> l1(rows), l2(rows);
    for (int i = 0; i < rows; i++) {
        l1[i] = 5.f * r.uni();
        l2[i] = 5.f * r.uni();
        if (i % 10 == 3)
            l1[i] = -INFINITY; /* an empty side: its o is ignored */
        if (i % 10 == 7)
            l2[i] = -INFINITY;
        if (i % 50 == 9)
            l1[i] = l2[i] = -INFINITY;
    }
    for (int aliased = 0; aliased < 2; aliased++) {
        uint16_t *d1 = dev_upload(o1.bits), *d2 = dev_upload(o2.bits), *dout = NULL;
        float *dl1 = dev_upload(l1), *dl2 = dev_upload(l2), *dlo = NULL;
        if (aliased) {
            dout = d1;
            dlo = dl1;
        } else {
            CUDA_OK(cudaMalloc(&dout, (size_t)rows * D * 2));
            CUDA_OK(cudaMalloc(&dlo, rows * 4));
            CUDA_OK(cudaMemset(dout, 0xff, (size_t)rows * D * 2));
            CUDA_OK(cudaMemset(dlo, 0xff, rows * 4));
        }
        ck_assert_int_eq(attn_merge_cuda(dt, rows, D, d1, dl1, d2, dl2, dout, dlo, NULL), 0);
        CUDA_OK(cudaDeviceSynchronize());
        std::vector<uint16_t> out = dev_download(dout, (size_t)rows * D);
        std::vector<float> lo = dev_download(dlo, rows);
        double num = 0, den = 0, lerr = 0;
        int bad = 0;
        for (int i = 0; i < rows; i++) {
            double a = l1[i], b2 = l2[i], m = a > b2 ? a : b2, l, w1 = 0, w2 = 0;
            if (isinf(m) && m < 0) {
                l = -INFINITY;
            } else {
                l = m + log(exp(a - m) + exp(b2 - m));
                w1 = exp(a - l);
                w2 = exp(b2 - l);
            }
            if (isinf(l)) {
                if (!(isinf(lo[i]) && lo[i] < 0))
                    bad++;
            } else if (fabs(lo[i] - l) > lerr) {
                lerr = fabs(lo[i] - l);
            }
            for (int d = 0; d < D; d++) {
                double ref = (w1 > 0 ? w1 * o1.val[(size_t)i * D + d] : 0) +
                             (w2 > 0 ? w2 * o2.val[(size_t)i * D + d] : 0);
                double got = from_bits(out[(size_t)i * D + d], dt);
                if (!isfinite(got))
                    bad++;
                num += (got - ref) * (got - ref);
                den += ref * ref;
            }
        }
        double rel = sqrt(num / den);
        bool ok = !bad && rel <= dt_tol(dt) && lerr <= 1e-5;
        printf("merge %s D=%d rows=%d aliased=%d rel_err=%.3e lse_err=%.3e bad=%d %s\n",
               dt_name(dt), D, rows, aliased, rel, lerr, bad, ok ? "ok" : "FAIL");
        ck_assert_msg(ok, "merge out of tolerance (seed %llu)", (unsigned long long)g_seed);
        if (!aliased)
            cudaFree(dout), cudaFree(dlo);
        cudaFree(d1), cudaFree(d2), cudaFree(dl1), cudaFree(dl2);
    }
}
END_TEST

/* ---- store ----------------------------------------------------------------- */

START_TEST(test_store_kv)
{
    attn_dtype dt = DTS[_i / 2];
    const int D = DIMS[_i % 2], P = 16, HKV = 2, NP = 8, T = 70;
    rng r(g_seed + 6000 + _i);
    attn_shape s = {4, HKV, D, P, 0.1f};
    const size_t row = (size_t)HKV * D, nslot = (size_t)NP * P;
    htensor kn, vn, kc, vc;
    kn.fill_random(T * row, r, dt);
    vn.fill_random(T * row, r, dt);
    kc.fill_random(nslot * row, r, dt);
    vc.fill_random(nslot * row, r, dt);
    std::vector<int> perm(nslot);
    for (size_t i = 0; i < nslot; i++)
        perm[i] = (int)i;
    for (size_t i = nslot - 1; i > 0; i--) {
        size_t j = r.below((int)i + 1);
        int t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    std::vector<int32_t> slots(T);
    for (int t = 0; t < T; t++)
        slots[t] = t % 9 == 4 ? -1 : perm[t]; /* some tokens skipped */
    uint16_t *dkn = dev_upload(kn.bits), *dvn = dev_upload(vn.bits);
    uint16_t *dkc = dev_upload(kc.bits), *dvc = dev_upload(vc.bits);
    int32_t *dsl = dev_upload(slots);
    ck_assert_int_eq(attn_store_kv_cuda(&s, dt, T, NP, dsl, dkn, dvn, dkc, dvc, NULL), 0);
    CUDA_OK(cudaDeviceSynchronize());
    std::vector<uint16_t> k2 = dev_download(dkc, nslot * row), v2 = dev_download(dvc, nslot * row);
    std::vector<int> from(nslot, -1);
    for (int t = 0; t < T; t++)
        if (slots[t] >= 0)
            from[slots[t]] = t;
    int wrong = 0;
    for (size_t sl = 0; sl < nslot; sl++)
        for (size_t e = 0; e < row; e++) {
            uint16_t ek = from[sl] >= 0 ? kn.bits[from[sl] * row + e] : kc.bits[sl * row + e];
            uint16_t ev = from[sl] >= 0 ? vn.bits[from[sl] * row + e] : vc.bits[sl * row + e];
            wrong += k2[sl * row + e] != ek || v2[sl * row + e] != ev;
        }
    printf("store_kv %s D=%d tokens=%d wrong=%d %s\n", dt_name(dt), D, T, wrong,
           wrong ? "FAIL" : "ok");
    ck_assert_int_eq(wrong, 0);
    cudaFree(dkn), cudaFree(dvn), cudaFree(dkc), cudaFree(dvc), cudaFree(dsl);
}
END_TEST

/* ---- page ids and slots outside the pool ---------------------------------- */

/* Relative Frobenius error of 16-bit device output against a reference;
 * *bad counts non-finite values. */
template <typename R>
static double rel_err_bits(const std::vector<uint16_t> &got, const R *ref, attn_dtype dt,
                           int *bad)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < got.size(); i++) {
        double g = from_bits(got[i], dt), e = (double)ref[i];
        if (!isfinite(g) || !isfinite(e))
            (*bad)++;
        num += (g - e) * (g - e);
        den += e * e;
    }
    return sqrt(num / (den > 0 ? den : 1));
}

/* The pool of NP pages sits between GUARD pages of NaN on each side. A page id
 * outside [0, NP) must read as zeros (a guard page read would put NaN into the
 * output), a slot past the pool must not be written (the guards keep their
 * bits), and attn_cuda_check_error reports each once, then ATTN_OK. The host
 * reference maps every bad id to an extra page of zeros, page NP. */
START_TEST(test_pool_bounds)
{
    attn_dtype dt = DTS[_i / 2];
    const int D = DIMS[_i % 2], P = 16, HQ = 8, HKV = 2, NP = 12, GUARD = 4;
    rng r(g_seed + 7000 + _i);
    attn_shape s = {HQ, HKV, D, P, (float)(1.0 / sqrt((double)D))};
    const size_t row = (size_t)HKV * D, page = (size_t)P * row;
    const size_t all = (size_t)(NP + 2 * GUARD) * page;
    htensor kc, vc; /* host pool: NP pages, then the zero page */
    kc.fill_random((size_t)(NP + 1) * page, r, dt);
    vc.fill_random((size_t)(NP + 1) * page, r, dt);
    for (size_t e = (size_t)NP * page; e < (size_t)(NP + 1) * page; e++) {
        kc.bits[e] = vc.bits[e] = to_bits(0.f, dt);
        kc.val[e] = vc.val[e] = 0.f;
    }
    std::vector<uint16_t> k_all(all, NAN_BITS), v_all(all, NAN_BITS);
    memcpy(&k_all[GUARD * page], kc.bits.data(), NP * page * sizeof(uint16_t));
    memcpy(&v_all[GUARD * page], vc.bits.data(), NP * page * sizeof(uint16_t));
    uint16_t *dk_all = dev_upload(k_all), *dv_all = dev_upload(v_all);
    uint16_t *dkc = dk_all + GUARD * page, *dvc = dv_all + GUARD * page;
    /* Every earlier test used good ids only: nothing is recorded. */
    ck_assert_int_eq(attn_cuda_check_error(NULL), ATTN_OK);
    std::vector<int> perm(NP);
    for (int i = 0; i < NP; i++)
        perm[i] = i;
    for (int i = NP - 1; i > 0; i--) {
        int j = r.below(i + 1), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }

    /* Prefill: sequence 1's second page is one past the pool. */
    {
        const int B = 2, MP = 4;
        std::vector<int32_t> qs = {0, 5, 25}, pre = {2 * P + 3, 3 * P + 1};
        std::vector<int32_t> table = {perm[0], perm[1], perm[2], -1,
                                      perm[3], NP,      perm[4], perm[5]};
        const int T = qs[B];
        htensor q, kn, vn;
        q.fill_random((size_t)T * HQ * D, r, dt);
        kn.fill_random((size_t)T * row, r, dt);
        vn.fill_random((size_t)T * row, r, dt);
        uint16_t *dq = dev_upload(q.bits), *dkn = dev_upload(kn.bits), *dvn = dev_upload(vn.bits);
        int32_t *dqs = dev_upload(qs), *dpre = dev_upload(pre), *dpt = dev_upload(table);
        uint16_t *dout;
        CUDA_OK(cudaMalloc(&dout, (size_t)T * HQ * D * 2));
        CUDA_OK(cudaMemset(dout, 0xff, (size_t)T * HQ * D * 2));
        attn_batch b = {B, MP, dqs, dpre, dpt, 20, NP};
        ck_assert_int_eq(attn_prefill_cuda(&s, &b, dt, dq, dkn, dvn, dkc, dvc, dout, NULL, NULL),
                         ATTN_OK);
        ck_assert_int_eq(attn_cuda_check_error(NULL), ATTN_EARG);
        ck_assert_int_eq(attn_cuda_check_error(NULL), ATTN_OK); /* cleared */
        attn_batch hb = {B, MP, qs.data(), pre.data(), table.data(), 20, NP + 1};
        std::vector<double> ref((size_t)T * HQ * D);
        ck_assert_int_eq(attn_prefill_ref(&s, &hb, q.val.data(), kn.val.data(), vn.val.data(),
                                          kc.val.data(), vc.val.data(), ref.data(), NULL),
                         ATTN_OK);
        int bad = 0;
        double e = rel_err_bits(dev_download(dout, (size_t)T * HQ * D), ref.data(), dt, &bad);
        printf("pool_bounds prefill %s D=%d rel_err=%.3e nonfinite=%d\n", dt_name(dt), D, e, bad);
        ck_assert_msg(bad == 0 && e <= dt_tol(dt), "prefill with a bad page id: err %.3e, %d "
                      "non-finite (seed %llu)", e, bad, (unsigned long long)g_seed);
        cudaFree(dq), cudaFree(dkn), cudaFree(dvn), cudaFree(dqs), cudaFree(dpre), cudaFree(dpt);
        cudaFree(dout);
    }

    /* Decode: sequence 1 has a page -1, sequence 2 one at the far guard's end. */
    {
        const int B = 3, MP = 4;
        std::vector<int32_t> lens = {40, 3 * P + 5, 7};
        std::vector<int32_t> table = {perm[6], perm[7],  perm[8], -1,      /* seq 0 */
                                      perm[9], perm[10], -1,      perm[11], /* seq 1 */
                                      NP + GUARD - 1, -1, -1,     -1};      /* seq 2 */
        std::vector<int32_t> host_table = table;
        host_table[1 * MP + 2] = NP;
        host_table[2 * MP + 0] = NP;
        htensor q;
        q.fill_random((size_t)B * HQ * D, r, dt);
        uint16_t *dq = dev_upload(q.bits), *dout;
        int32_t *dlen = dev_upload(lens), *dpt = dev_upload(table);
        CUDA_OK(cudaMalloc(&dout, (size_t)B * HQ * D * 2));
        CUDA_OK(cudaMemset(dout, 0xff, (size_t)B * HQ * D * 2));
        ck_assert_int_eq(attn_decode_cuda(&s, dt, B, dlen, dpt, MP, NP, 3 * P + 5, dq, dkc, dvc,
                                          dout, NULL, NULL, 3, NULL),
                         ATTN_OK);
        ck_assert_int_eq(attn_cuda_check_error(NULL), ATTN_EARG);
        ck_assert_int_eq(attn_cuda_check_error(NULL), ATTN_OK);
        std::vector<float> ref((size_t)B * HQ * D);
        ck_assert_int_eq(attn_decode_cpu(&s, B, lens.data(), host_table.data(), MP, NP + 1,
                                         q.val.data(), kc.val.data(), vc.val.data(), ref.data(),
                                         NULL, 0, 1),
                         ATTN_OK);
        int bad = 0;
        double e = rel_err_bits(dev_download(dout, (size_t)B * HQ * D), ref.data(), dt, &bad);
        printf("pool_bounds decode %s D=%d rel_err=%.3e nonfinite=%d\n", dt_name(dt), D, e, bad);
        ck_assert_msg(bad == 0 && e <= dt_tol(dt), "decode with bad page ids: err %.3e, %d "
                      "non-finite (seed %llu)", e, bad, (unsigned long long)g_seed);
        cudaFree(dq), cudaFree(dlen), cudaFree(dpt), cudaFree(dout);
    }

    /* Store: two slots past the pool (into the guard after it) are skipped. */
    {
        const int T = 10;
        htensor kn, vn;
        kn.fill_random((size_t)T * row, r, dt);
        vn.fill_random((size_t)T * row, r, dt);
        std::vector<int32_t> slots(T);
        for (int t = 0; t < T; t++)
            slots[t] = perm[t] * P + t % P; /* distinct pages, so distinct slots */
        slots[3] = NP * P;
        slots[6] = NP * P + P + 5;
        slots[8] = -1;
        uint16_t *dkn = dev_upload(kn.bits), *dvn = dev_upload(vn.bits);
        int32_t *dsl = dev_upload(slots);
        ck_assert_int_eq(attn_store_kv_cuda(&s, dt, T, NP, dsl, dkn, dvn, dkc, dvc, NULL),
                         ATTN_OK);
        ck_assert_int_eq(attn_cuda_check_error(NULL), ATTN_EARG);
        ck_assert_int_eq(attn_cuda_check_error(NULL), ATTN_OK);
        std::vector<uint16_t> k2 = dev_download(dk_all, all), v2 = dev_download(dv_all, all);
        /* Expected: the guards as they were, the pool with the good tokens. */
        for (int t = 0; t < T; t++)
            if (slots[t] >= 0 && slots[t] < NP * P)
                for (size_t e = 0; e < row; e++) {
                    k_all[GUARD * page + slots[t] * row + e] = kn.bits[t * row + e];
                    v_all[GUARD * page + slots[t] * row + e] = vn.bits[t * row + e];
                }
        size_t wrong = 0, guard_hit = 0;
        for (size_t e = 0; e < all; e++) {
            bool diff = k2[e] != k_all[e] || v2[e] != v_all[e];
            wrong += diff;
            guard_hit += diff && (e < GUARD * page || e >= (GUARD + NP) * page);
        }
        printf("pool_bounds store %s D=%d wrong=%zu in_guards=%zu\n", dt_name(dt), D, wrong,
               guard_hit);
        ck_assert_msg(wrong == 0, "store: %zu elements differ, %zu of them in the guards", wrong,
                      guard_hit);
        cudaFree(dkn), cudaFree(dvn), cudaFree(dsl);
    }
    cudaFree(dk_all), cudaFree(dv_all);
}
END_TEST

/* ---- bad arguments --------------------------------------------------------- */

START_TEST(test_bad_args)
{
    /* Every call below is rejected before any memory is touched, so fake but
     * non-NULL pointers are enough. */
    void *p = (void *)0x1000;
    const int32_t *ip = (const int32_t *)p;
    attn_batch b = {1, 1, ip, ip, ip, 4, 1};
    attn_shape ok = {8, 2, 128, 16, 0.1f};
    attn_shape hd = ok, ps0 = ok, ps257 = ok, hh = ok, h0 = ok;
    hd.head_dim = 96;
    ps0.page_size = 0;
    ps257.page_size = 257;
    hh.num_kv_heads = 3;
    h0.num_kv_heads = 0;
    struct {
        const attn_shape *s;
        int want;
        const char *name;
    } cases[] = {{&hd, ATTN_EHEADDIM, "head_dim 96"},   {&ps0, ATTN_EPAGESIZE, "page 0"},
                 {&ps257, ATTN_EPAGESIZE, "page 257"}, {&hh, ATTN_EHEADS, "8 q / 3 kv heads"},
                 {&h0, ATTN_EHEADS, "0 kv heads"}};
    for (auto &c : cases) {
        int r1 = attn_prefill_cuda(c.s, &b, ATTN_BF16, p, p, p, p, p, p, NULL, NULL);
        int r2 =
            attn_decode_cuda(c.s, ATTN_BF16, 1, ip, ip, 1, 1, 4, p, p, p, p, NULL, NULL, 0, NULL);
        int r3 = attn_store_kv_cuda(c.s, ATTN_FP16, 1, 1, ip, p, p, p, p, NULL);
        printf("bad_args %s: prefill %d decode %d store %d (want %d)\n", c.name, r1, r2, r3,
               c.want);
        ck_assert_int_eq(r1, c.want);
        ck_assert_int_eq(r2, c.want);
        ck_assert_int_eq(r3, c.want);
    }
    /* NULL pointers, negative lengths, unknown dtype, lengths past the table. */
    ck_assert_int_eq(attn_prefill_cuda(&ok, &b, ATTN_BF16, NULL, p, p, p, p, p, NULL, NULL),
                     ATTN_EARG);
    ck_assert_int_eq(attn_prefill_cuda(&ok, NULL, ATTN_BF16, p, p, p, p, p, p, NULL, NULL),
                     ATTN_EARG);
    attn_batch neg = b;
    neg.num_seqs = -1;
    ck_assert_int_eq(attn_prefill_cuda(&ok, &neg, ATTN_BF16, p, p, p, p, p, p, NULL, NULL),
                     ATTN_EARG);
    ck_assert_int_eq(attn_prefill_cuda(&ok, &b, (attn_dtype)7, p, p, p, p, p, p, NULL, NULL),
                     ATTN_EARG);
    neg = b;
    neg.num_pages = -1;
    ck_assert_int_eq(attn_prefill_cuda(&ok, &neg, ATTN_BF16, p, p, p, p, p, p, NULL, NULL),
                     ATTN_EARG);
    ck_assert_int_eq(
        attn_decode_cuda(&ok, ATTN_BF16, 1, ip, ip, 1, 1, 17, p, p, p, p, NULL, NULL, 0, NULL),
        ATTN_EARG); /* 17 tokens do not fit 1 page of 16 */
    ck_assert_int_eq(
        attn_decode_cuda(&ok, ATTN_BF16, -2, ip, ip, 1, 1, 4, p, p, p, p, NULL, NULL, 0, NULL),
        ATTN_EARG);
    ck_assert_int_eq(
        attn_decode_cuda(&ok, ATTN_BF16, 1, ip, ip, 1, -1, 4, p, p, p, p, NULL, NULL, 0, NULL),
        ATTN_EARG); /* a negative pool */
    ck_assert_int_eq(attn_store_kv_cuda(&ok, ATTN_BF16, -1, 1, ip, p, p, p, p, NULL), ATTN_EARG);
    ck_assert_int_eq(attn_store_kv_cuda(&ok, ATTN_BF16, 3, 1, NULL, p, p, p, p, NULL), ATTN_EARG);
    ck_assert_int_eq(attn_store_kv_cuda(&ok, ATTN_BF16, 3, -1, ip, p, p, p, p, NULL), ATTN_EARG);
    ck_assert_int_eq(attn_merge_cuda(ATTN_BF16, 4, 96, p, (float *)p, p, (float *)p, p,
                                     (float *)p, NULL),
                     ATTN_EHEADDIM);
    ck_assert_int_eq(attn_merge_cuda(ATTN_BF16, -4, 64, p, (float *)p, p, (float *)p, p,
                                     (float *)p, NULL),
                     ATTN_EARG);
    ck_assert_int_eq(attn_merge_cuda(ATTN_FP16, 4, 64, p, NULL, p, (float *)p, p, (float *)p,
                                     NULL),
                     ATTN_EARG);
    CUDA_OK(cudaDeviceSynchronize()); /* nothing was launched, nothing faulted */
}
END_TEST

int main(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        printf("no CUDA device: skipping the gpu suite\n");
        return 77;
    }
    if (!attn_cuda_available()) {
        printf("attn_cuda_available() is 0 although a device was counted\n");
        return 1;
    }
    const char *env = getenv("RKV_TEST_SEED");
    if (env)
        g_seed = strtoull(env, NULL, 0);
    cudaDeviceProp prop;
    cudaGetDeviceProperties(&prop, 0);
    printf("device %s, seed %llu\n", prop.name, (unsigned long long)g_seed);

    Suite *s = suite_create("gpu");
    TCase *tc = tcase_create("attention_cuda");
    tcase_add_loop_test(tc, test_prefill_grid, 0, 4);
    tcase_add_test(tc, test_prefill_split_equals_whole);
    tcase_add_loop_test(tc, test_prefill_max_suffix_zero, 0, 2);
    tcase_add_loop_test(tc, test_prefill_shared_level, 0, 4);
    tcase_add_loop_test(tc, test_decode_grid, 0, 4);
    tcase_add_loop_test(tc, test_merge, 0, 4);
    tcase_add_loop_test(tc, test_store_kv, 0, 4);
    tcase_add_loop_test(tc, test_pool_bounds, 0, 4);
    tcase_add_test(tc, test_bad_args);
    suite_add_tcase(s, tc);
    /* CUDA contexts do not survive fork(): run the tests in this process. */
    return check_run_nofork(s);
}
