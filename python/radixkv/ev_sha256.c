/* ev_sha256: SHA-256 (FIPS 180-4) of the KV-event chain's short messages.
 *
 * A chain page is SHA-256(previous digest || the page's tokens as u32s): 36
 * bytes at page size 1 (one 64-byte block once padded), 96 at page size 16
 * (two blocks). libcrypto's SHA256_Init/Update/Final run the CPU's SHA
 * instructions too, but a page costs 47 ns through them (a C loop at page
 * size 1) where one block's 32 dependent SHA256RNDS2 take ~32: the calls,
 * the buffering and padding in memory, and the digest's trip through memory
 * into the next page's message. Here a page's message words are made in
 * registers (the previous digest's words are the state itself; the tokens'
 * tail, the 0x80 and the length are set word by word) and each block goes
 * straight to the rounds: 36 ns a page. Without the SHA extensions every
 * digest comes from libcrypto.
 *
 * Padding (FIPS 180-4 5.1.1): the message, one 0x80 byte, zeros up to 56
 * mod 64, then the message's length in bits as a big-endian u64.
 *
 *   36-byte page:  | digest 32 | tok 4 | 80 | 00 .. 00 | len=288 |   1 block
 *   96-byte page:  | digest 32 | tokens 0-7, 32 |                block 1
 *                  | tokens 8-15, 32 | 80 | 00 .. 00 | len=768 | block 2
 */
#define OPENSSL_SUPPRESS_DEPRECATED
#include "ev_sha256.h"

#include <openssl/sha.h>
#include <stdatomic.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define EV_HAVE_X86 1
#include <cpuid.h>
#include <immintrin.h>
#else
#define EV_HAVE_X86 0
#endif

/* 0: not yet probed; 1: libcrypto; 2: SHA instructions. Relaxed atomics: any
 * thread may probe first, and every probe finds the same answer. */
static atomic_int ev_route;
static atomic_int ev_forced;

int ev_sha256_pair_portable(const uint8_t *a, size_t na, const uint8_t *b, size_t nb,
                            uint8_t out[EV_SHA256_DIGEST])
{
    SHA256_CTX c;
    return SHA256_Init(&c) == 1 && (!na || SHA256_Update(&c, a, na) == 1)
           && (!nb || SHA256_Update(&c, b, nb) == 1) && SHA256_Final(out, &c) == 1;
}

#if EV_HAVE_X86

/* FIPS 180-4 4.2.2: the first 32 bits of the fractional parts of the cube
 * roots of the first 64 primes. */
static const uint32_t ev_k[64] __attribute__((aligned(16))) = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
    0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
    0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
    0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
    0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
    0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
    0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
    0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
    0xc67178f2};

/* FIPS 180-4 5.3.3: H(0). */
static const uint32_t ev_h0[8] __attribute__((aligned(16))) = {
    0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab,
    0x5be0cd19};

#define EV_SHA_TARGET __attribute__((target("sha,sse4.1,ssse3")))

/* Four rounds from message words m (W[4g .. 4g+3], dword 0 the lowest t).
 * The state as SHA256RNDS2 wants it: two registers, dwords high to low,
 * abef = (A, B, E, F) and cdgh = (C, D, G, H). One SHA256RNDS2 runs two
 * rounds from (cdgh, abef) and the low two dwords of W+K, and returns the new
 * (A, B, E, F); the old abef is then the new (C, D, G, H), so swapping which
 * register is the destination needs no moves. */
#define EV_ROUNDS4(g, m)                                                                  \
    do {                                                                                  \
        const __m128i wk_ = _mm_add_epi32((m), _mm_load_si128((const __m128i *)(ev_k + 4 * (g)))); \
        s1 = _mm_sha256rnds2_epu32(s1, s0, wk_);                                          \
        s0 = _mm_sha256rnds2_epu32(s0, s1, _mm_shuffle_epi32(wk_, 0x0E));                 \
    } while (0)

/* FIPS 180-4 6.2.2 step 1, four words at once, w4 (W[t-16 ..]) replaced by
 * W[t ..]: W[t] = s1(W[t-2]) + W[t-7] + s0(W[t-15]) + W[t-16]. MSG1 gives
 * W[t-16 ..] + s0(W[t-15 ..]) from w4 and w3; ALIGNR gathers W[t-7 .. t-4]
 * from w1 and w2; MSG2 adds s1(W[t-2 ..]) from w1, chaining through the
 * words it makes. */
#define EV_SCHEDULE(w4, w3, w2, w1)                                                       \
    (w4) = _mm_sha256msg2_epu32(                                                          \
        _mm_add_epi32(_mm_sha256msg1_epu32((w4), (w3)), _mm_alignr_epi8((w1), (w2), 4)), (w1))

/* One 64-byte block, as its sixteen message words m0..m3 (dword 0 the
 * lowest t), into the state. Unrolled by hand so the schedule stays in
 * registers (a loop over an array of them went through the stack: 71 ns a
 * block against libcrypto's 48). */
EV_SHA_TARGET static inline void ev_compress_ni(__m128i *abef, __m128i *cdgh, __m128i m0,
                                                __m128i m1, __m128i m2, __m128i m3)
{
    __m128i s0 = *abef, s1 = *cdgh;
    EV_ROUNDS4(0, m0);
    EV_ROUNDS4(1, m1);
    EV_ROUNDS4(2, m2);
    EV_ROUNDS4(3, m3);
    for (int g = 4; g < 16; g += 4) {
        EV_SCHEDULE(m0, m1, m2, m3);
        EV_ROUNDS4(g, m0);
        EV_SCHEDULE(m1, m2, m3, m0);
        EV_ROUNDS4(g + 1, m1);
        EV_SCHEDULE(m2, m3, m0, m1);
        EV_ROUNDS4(g + 2, m2);
        EV_SCHEDULE(m3, m0, m1, m2);
        EV_ROUNDS4(g + 3, m3);
    }
    *abef = _mm_add_epi32(s0, *abef);
    *cdgh = _mm_add_epi32(s1, *cdgh);
}

/* Four message words from 16 bytes: big-endian, so each dword's bytes are
 * reversed. */
EV_SHA_TARGET static inline __m128i ev_words_ni(const uint8_t *p)
{
    const __m128i bswap = _mm_set_epi8(12, 13, 14, 15, 8, 9, 10, 11, 4, 5, 6, 7, 0, 1, 2, 3);
    return _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)p), bswap);
}

EV_SHA_TARGET static inline void ev_block_ni(__m128i *abef, __m128i *cdgh, const uint8_t *p)
{
    ev_compress_ni(abef, cdgh, ev_words_ni(p), ev_words_ni(p + 16), ev_words_ni(p + 32),
                   ev_words_ni(p + 48));
}

/* H(0) from (a b c d), (e f g h) into (a b e f), (c d g h). */
EV_SHA_TARGET static inline void ev_start_ni(__m128i *abef, __m128i *cdgh)
{
    const __m128i lo = _mm_shuffle_epi32(_mm_load_si128((const __m128i *)ev_h0), 0xB1);
    const __m128i hi = _mm_shuffle_epi32(_mm_load_si128((const __m128i *)(ev_h0 + 4)), 0x1B);
    *abef = _mm_alignr_epi8(lo, hi, 8);
    *cdgh = _mm_blend_epi16(hi, lo, 0xF0);
}

/* The state back in word order: *w0 = (a b c d), *w1 = (e f g h), dword 0
 * first; these are also the message words of the digest as the next page's
 * first 32 bytes. */
EV_SHA_TARGET static inline void ev_finish_ni(__m128i abef, __m128i cdgh, __m128i *w0,
                                              __m128i *w1)
{
    const __m128i fa = _mm_shuffle_epi32(abef, 0x1B); /* (f e b a) -> (a b e f), low first */
    const __m128i hc = _mm_shuffle_epi32(cdgh, 0xB1); /* (h g d c) -> (g h c d), low first */
    *w0 = _mm_blend_epi16(fa, hc, 0xF0);
    *w1 = _mm_alignr_epi8(hc, fa, 8);
}

EV_SHA_TARGET static inline void ev_store_ni(uint8_t *out, __m128i w0, __m128i w1)
{
    const __m128i bswap = _mm_set_epi8(12, 13, 14, 15, 8, 9, 10, 11, 4, 5, 6, 7, 0, 1, 2, 3);
    _mm_storeu_si128((__m128i *)out, _mm_shuffle_epi8(w0, bswap));
    _mm_storeu_si128((__m128i *)(out + 16), _mm_shuffle_epi8(w1, bswap));
}

EV_SHA_TARGET static void ev_sha256_ni(const uint8_t *a, size_t na, const uint8_t *b, size_t nb,
                                       uint8_t out[EV_SHA256_DIGEST])
{
    __m128i abef, cdgh;
    ev_start_ni(&abef, &cdgh);
    /* Whole blocks straight from the caller's bytes; the tail, the padding
     * and the length through one or two blocks on the stack. */
    uint8_t buf[128];
    size_t fill = 0;
    const uint8_t *part[2] = {a, b};
    const size_t plen[2] = {na, nb};
    for (int p = 0; p < 2; p++) {
        const uint8_t *src = part[p];
        size_t left = plen[p];
        if (fill && left) {
            size_t take = 64 - fill < left ? 64 - fill : left;
            memcpy(buf + fill, src, take);
            fill += take;
            src += take;
            left -= take;
            if (fill == 64) {
                ev_block_ni(&abef, &cdgh, buf);
                fill = 0;
            }
        }
        for (; left >= 64; src += 64, left -= 64) ev_block_ni(&abef, &cdgh, src);
        if (left) {
            memcpy(buf + fill, src, left);
            fill += left;
        }
    }
    const uint64_t bits = 8 * (uint64_t)(na + nb);
    const size_t total = fill + 9 <= 64 ? 64 : 128;
    buf[fill] = 0x80;
    memset(buf + fill + 1, 0, total - 8 - fill - 1);
    for (int i = 0; i < 8; i++) buf[total - 1 - i] = (uint8_t)(bits >> (8 * i));
    ev_block_ni(&abef, &cdgh, buf);
    if (total == 128) ev_block_ni(&abef, &cdgh, buf + 64);
    __m128i w0, w1;
    ev_finish_ni(abef, cdgh, &w0, &w1);
    ev_store_ni(out, w0, w1);
}

/* Message word v (counting 4-word vectors) of a chain page, with the page's
 * vectors laid out as
 *
 *   | p0 p1 (the previous digest, when have) | nfull vectors of 4 tokens |
 *   | t: the last rw tokens, 0x80000000, zeros | zeros .. | len: W14, W15 |
 *
 * where t and len are one vector when ntail is 1. Everything after the whole
 * vectors is made in registers: built in a stack buffer, its narrow stores
 * feeding wide loads stalled each page on store forwarding. */
EV_SHA_TARGET static inline __m128i ev_vec_ni(size_t v, int have, __m128i p0, __m128i p1,
                                              const uint8_t *b, size_t nfull, size_t ntail,
                                              __m128i t, __m128i len)
{
    if (have) {
        if (v < 2) return v ? p1 : p0;
        v -= 2;
    }
    if (v < nfull) return ev_words_ni(b + 16 * v);
    v -= nfull;
    if (v == 0) return ntail == 1 ? _mm_or_si128(t, len) : t;
    return v == ntail - 1 ? len : _mm_setzero_si128();
}

/* Token i of le as a big-endian message word. */
static inline int ev_word(const uint8_t *le, size_t i)
{
    uint32_t w;
    memcpy(&w, le + 4 * i, 4);
    return (int)__builtin_bswap32(w);
}

/* The chain on the SHA instructions. A page's digest goes on as the next
 * page's first eight message words in registers: the words are the state
 * itself, so the serial path from one page to the next is the compression
 * alone, with no store, reload and byte swap of the digest in it. */
EV_SHA_TARGET static void ev_chain_ni(const uint8_t *prior, const uint8_t *le, size_t ntok,
                                      size_t P, uint8_t *dig)
{
    __m128i p0 = _mm_setzero_si128(), p1 = _mm_setzero_si128();
    int have = prior != NULL;
    if (have) {
        p0 = ev_words_ni(prior);
        p1 = ev_words_ni(prior + 16);
    }
    for (size_t s = 0; s < ntok; s += P, dig += EV_SHA256_DIGEST) {
        const uint8_t *b = le + 4 * s;
        const size_t cnt = ntok - s < P ? ntok - s : P;
        const size_t nbytes = (have ? 32 : 0) + 4 * cnt;
        /* FIPS 180-4 5.1.1: message, 0x80, zeros, then the length in bits
         * as a big-endian u64, in whole 64-byte blocks. */
        const size_t nvec = (nbytes + 9 + 63) / 64 * 4;
        const size_t nfull = cnt / 4, rw = cnt % 4;
        const size_t ntail = nvec - (have ? 2 : 0) - nfull;
        const uint64_t bits = 8 * (uint64_t)nbytes;
        const __m128i len = _mm_set_epi32((int)(uint32_t)bits, (int)(uint32_t)(bits >> 32), 0, 0);
        const uint8_t *r = b + 16 * nfull;
        const int end = (int)0x80000000u;
        __m128i t;
        switch (rw) {
        case 0: t = _mm_set_epi32(0, 0, 0, end); break;
        case 1: t = _mm_set_epi32(0, 0, end, ev_word(r, 0)); break;
        case 2: t = _mm_set_epi32(0, end, ev_word(r, 1), ev_word(r, 0)); break;
        default: t = _mm_set_epi32(end, ev_word(r, 2), ev_word(r, 1), ev_word(r, 0)); break;
        }
        __m128i abef, cdgh;
        ev_start_ni(&abef, &cdgh);
        for (size_t v = 0; v < nvec; v += 4)
            ev_compress_ni(&abef, &cdgh,
                           ev_vec_ni(v, have, p0, p1, b, nfull, ntail, t, len),
                           ev_vec_ni(v + 1, have, p0, p1, b, nfull, ntail, t, len),
                           ev_vec_ni(v + 2, have, p0, p1, b, nfull, ntail, t, len),
                           ev_vec_ni(v + 3, have, p0, p1, b, nfull, ntail, t, len));
        ev_finish_ni(abef, cdgh, &p0, &p1);
        ev_store_ni(dig, p0, p1);
        have = 1;
    }
}

/* The SHA extensions (CPUID leaf 7, EBX bit 29), with SSSE3 (leaf 1, ECX
 * bit 9) and SSE4.1 (ECX bit 19) for the shuffles and blends around them.
 * CPUID itself rather than __builtin_cpu_supports, which not every
 * compiler knows "sha" in. */
static int ev_probe(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 9)) || !(c & (1u << 19))) return 1;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 1;
    return b & (1u << 29) ? 2 : 1;
}

#else

static int ev_probe(void)
{
    return 1;
}

#endif

int ev_sha256_uses_sha_ni(void)
{
    int r = atomic_load_explicit(&ev_route, memory_order_relaxed);
    if (!r) {
        r = ev_probe();
        atomic_store_explicit(&ev_route, r, memory_order_relaxed);
    }
    return r == 2 && !atomic_load_explicit(&ev_forced, memory_order_relaxed);
}

int ev_sha256_force_portable(int on)
{
    return atomic_exchange_explicit(&ev_forced, on != 0, memory_order_relaxed);
}

int ev_sha256_pair(const uint8_t *a, size_t na, const uint8_t *b, size_t nb,
                   uint8_t out[EV_SHA256_DIGEST])
{
#if EV_HAVE_X86
    if (ev_sha256_uses_sha_ni()) {
        ev_sha256_ni(a, na, b, nb, out);
        return 1;
    }
#endif
    return ev_sha256_pair_portable(a, na, b, nb, out);
}

int ev_sha256_chain(const uint8_t *prior, const uint8_t *le, size_t ntok, size_t P,
                    uint8_t *dig)
{
#if EV_HAVE_X86
    if (ev_sha256_uses_sha_ni()) {
        ev_chain_ni(prior, le, ntok, P, dig);
        return 1;
    }
#endif
    for (size_t s = 0; s < ntok; s += P, dig += EV_SHA256_DIGEST) {
        const size_t cnt = ntok - s < P ? ntok - s : P;
        if (!ev_sha256_pair_portable(prior, prior ? EV_SHA256_DIGEST : 0, le + 4 * s, 4 * cnt,
                                     dig))
            return 0;
        prior = dig;
    }
    return 1;
}
