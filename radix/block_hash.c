/* block_hash.c - see block_hash.h. */
#include "block_hash.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>
#include <xxhash.h>

const char *const block_hash_fn_names[] = {"xxh3", "sha256", "md5", NULL};

/* Any fixed value works; a non-zero one keeps an all-zero block of the root
 * from hashing like a zeroed parent. */
const block_hash block_hash_root = {0x9e3779b97f4a7c15ull, 0xd1b54a32d192ed03ull};

enum { HDR_BYTES = sizeof(block_hash) + sizeof(uint64_t) };

rkv_status block_hasher_init(block_hasher *h, const char *name, int32_t max_tokens,
                             char *err, size_t errlen)
{
    memset(h, 0, sizeof *h);
    if (!name) name = "xxh3";
    int fn = -1;
    for (int i = 0; block_hash_fn_names[i]; i++)
        if (strcmp(name, block_hash_fn_names[i]) == 0) fn = i;
    if (fn < 0) {
        if (err)
            snprintf(err, errlen, "block_hash: unknown hash function '%s' (xxh3|sha256|md5)",
                     name);
        return RKV_EINVAL;
    }
    if (max_tokens < 1) {
        if (err) snprintf(err, errlen, "block_hash: max_tokens %d < 1", max_tokens);
        return RKV_EINVAL;
    }
    h->fn = (block_hash_fn)fn;
    h->name = block_hash_fn_names[fn];
    h->cap = HDR_BYTES + sizeof(int32_t) * (size_t)max_tokens;
    h->buf = malloc(h->cap);
    if (!h->buf) return RKV_ENOMEM;
    if (h->fn != BLOCK_HASH_XXH3) {
        /* Fetch the implementation once: OpenSSL 3 would otherwise look it
         * up (under a lock) at every EVP_DigestInit_ex. */
        h->md = EVP_MD_fetch(NULL, h->fn == BLOCK_HASH_SHA256 ? "SHA256" : "MD5", NULL);
        h->md_ctx = EVP_MD_CTX_new();
        if (!h->md || !h->md_ctx) {
            if (err) snprintf(err, errlen, "block_hash: libcrypto has no %s digest", name);
            block_hasher_destroy(h);
            return RKV_ENOTSUP;
        }
    }
    return RKV_OK;
}

void block_hasher_destroy(block_hasher *h)
{
    if (h->md_ctx) EVP_MD_CTX_free(h->md_ctx);
    if (h->md) EVP_MD_free((EVP_MD *)h->md);
    free(h->buf);
    memset(h, 0, sizeof *h);
}

void block_hasher_hash(block_hasher *h, const block_hash *parent, uint64_t ns,
                       const int32_t *tokens, int32_t n, block_hash *out)
{
    /* One contiguous buffer, so every function sees the same bytes in one
     * call: copying P tokens is cheap next to any of the digests. */
    size_t len = HDR_BYTES + sizeof(int32_t) * (size_t)n;
    memcpy(h->buf, parent, sizeof *parent);
    memcpy(h->buf + sizeof *parent, &ns, sizeof ns);
    memcpy(h->buf + HDR_BYTES, tokens, sizeof(int32_t) * (size_t)n);
    if (h->fn == BLOCK_HASH_XXH3) {
        XXH128_hash_t d = XXH3_128bits(h->buf, len);
        out->lo = d.low64;
        out->hi = d.high64;
        return;
    }
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    EVP_MD_CTX *ctx = h->md_ctx;
    /* Init/Update/Final on a reused context cannot fail for these built-in
     * digests once the context exists; a zeroed digest would still be safe,
     * since hits re-check tokens. */
    if (!EVP_DigestInit_ex(ctx, h->md, NULL) || !EVP_DigestUpdate(ctx, h->buf, len) ||
        !EVP_DigestFinal_ex(ctx, md, &mdlen) || mdlen < sizeof *out)
        memset(md, 0, sizeof *out);
    memcpy(&out->lo, md, 8);
    memcpy(&out->hi, md + 8, 8);
}
