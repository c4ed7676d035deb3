/* ev_sha256: the one-shot SHA-256 of the KV-event chain (FIPS 180-4),
 * SHA-256(a || b) of short messages, on the CPU's SHA instructions where it
 * has them and on libcrypto elsewhere. Holds no memory; the caller owns every
 * buffer. Safe to call from any thread without the GIL. */
#ifndef RKV_EV_SHA256_H
#define RKV_EV_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define EV_SHA256_DIGEST 32

/* out = SHA-256(a[0..na) || b[0..nb)); a or b may be NULL when its length is
 * 0. 1, or 0 when libcrypto failed (only the portable path can fail). */
int ev_sha256_pair(const uint8_t *a, size_t na, const uint8_t *b, size_t nb,
                   uint8_t out[EV_SHA256_DIGEST]);

/* The KV-event chain over ntok tokens, le[0 .. 4 ntok) as little-endian
 * u32s, in pages of P tokens (P >= 1; the last page may be shorter):
 * dig[32 j ..] = SHA-256(dig[32 (j - 1) ..], or prior for page 0 (NULL:
 * nothing) || page j's 4 P bytes). dig holds 32 bytes a page. 1, or 0 when
 * libcrypto failed. */
int ev_sha256_chain(const uint8_t *prior, const uint8_t *le, size_t ntok, size_t P,
                    uint8_t *dig);

/* The same digest from libcrypto alone, whatever the CPU has: the reference
 * the fast path is tested against. */
int ev_sha256_pair_portable(const uint8_t *a, size_t na, const uint8_t *b, size_t nb,
                            uint8_t out[EV_SHA256_DIGEST]);

/* 1 when ev_sha256_pair runs on the SHA instructions, 0 when on libcrypto
 * (no such instructions, or forced by ev_sha256_force_portable). */
int ev_sha256_uses_sha_ni(void);

/* Route ev_sha256_pair to libcrypto (on != 0) or back to the CPU's best
 * (on == 0), for tests that compare the two on whole chains; returns the
 * previous setting. */
int ev_sha256_force_portable(int on);

#endif
