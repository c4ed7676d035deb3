/* block_hash.h - chained block hashes for the hash cache kinds (vLLM v1 style).
 *
 * A block's identity is a 128-bit digest of
 *
 *     parent's digest (16 B) | namespace (8 B) | tokens (P x int32, native order)
 *
 * so equal blocks under different parents or namespaces get different digests,
 * and a block's digest stands for its whole prefix. The first block of a
 * sequence chains block_hash_root. Functions, by name:
 *
 *     xxh3    xxHash XXH3, 128-bit output (libxxhash)
 *     sha256  SHA-256 (libcrypto EVP), truncated to its first 128 bits
 *     md5     MD5 (libcrypto EVP), 128 bits
 *
 * Truncating SHA-256 keeps one digest size for every function; the cache
 * re-checks tokens on a hit, so a collision can never return wrong pages.
 *
 * A block_hasher owns a scratch buffer and (for libcrypto) a digest context;
 * it is not thread-safe. The caller owns the hasher and destroys it.
 */
#ifndef RKV_BLOCK_HASH_H
#define RKV_BLOCK_HASH_H

#include <stddef.h>
#include <stdint.h>

#include "rkv_status.h"

typedef struct block_hash {
    uint64_t lo, hi;
} block_hash;

typedef enum block_hash_fn {
    BLOCK_HASH_XXH3 = 0,
    BLOCK_HASH_SHA256,
    BLOCK_HASH_MD5,
} block_hash_fn;

/* Names accepted by block_hasher_init, NULL-terminated. */
extern const char *const block_hash_fn_names[];
/* The parent digest of every sequence's first block. */
extern const block_hash block_hash_root;

typedef struct block_hasher {
    block_hash_fn fn;
    const char *name;  /* static string, one of block_hash_fn_names */
    uint8_t *buf;      /* (cap) scratch: parent | ns | tokens */
    size_t cap;
    void *md_ctx;      /* EVP_MD_CTX *, libcrypto functions only */
    const void *md;    /* const EVP_MD * */
} block_hasher;

/* name NULL means "xxh3". Unknown name: RKV_EINVAL, message in err naming it and
 * the accepted names. max_tokens sizes the scratch buffer (tokens per block). */
rkv_status block_hasher_init(block_hasher *h, const char *name, int32_t max_tokens,
                             char *err, size_t errlen);
void block_hasher_destroy(block_hasher *h);

/* *out = H(parent | ns | tokens[0..n)), n <= max_tokens. */
void block_hasher_hash(block_hasher *h, const block_hash *parent, uint64_t ns,
                       const int32_t *tokens, int32_t n, block_hash *out);

static inline int block_hash_equal(const block_hash *a, const block_hash *b)
{
    return a->lo == b->lo && a->hi == b->hi;
}

#endif
