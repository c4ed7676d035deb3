/* fuzz_remote_value.c - a value read back from the remote tier's server
 * (tier_remote.h): the first bytes pick the page size, page bytes and which
 * key, model and namespace the reader expects; the rest is the value. Any
 * value must be refused or accepted without reading outside it; one that is
 * accepted must be exactly what the encoder writes for that key (so the
 * check is no weaker than the format), and the encoder's own value must be
 * accepted. */
#include "fuzz_util.h"
#include "tier_remote.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 4) return 0;
    int32_t P = 1 + data[0] % 16;
    size_t pb = (size_t)data[1] % 64;
    uint64_t k0 = data[2] & 3, k1 = data[3] >> 4;
    static const char *const nss[] = {"default", "a", "teamA"};
    const char *ns = nss[data[3] % 3];
    data += 4, size -= 4;
    int32_t toks[16];
    for (int32_t i = 0; i < P; i++) toks[i] = i * 7;
    tier_remote_value_id id = {P, pb, k0, k1, 1, ns};
    /* The value in a buffer of its own size: reads past it are caught. */
    uint8_t *val = malloc(size ? size : 1);
    if (!val) return 0;
    if (size) memcpy(val, data, size);
    const uint8_t *got = tier_remote_value_check(&id, toks, val, size);
    size_t n = tier_remote_value_bytes(P, pb);
    uint8_t *mine = malloc(n);
    if (!mine) abort();
    uint8_t bytes[64];
    if (got) {
        if (got < val || got + pb > val + size) abort();
        memcpy(bytes, got, pb);
        /* Accepted: it must be the encoding of its own bytes (the modelled
         * size, a number for the clock, may differ). */
        double modelled;
        memcpy(&modelled, val + 16, sizeof modelled);
        tier_remote_value_encode(&id, toks, bytes, modelled, mine);
        if (size != n || memcmp(mine, val, n)) abort();
    }
    for (size_t i = 0; i < pb; i++) bytes[i] = (uint8_t)(i ^ size);
    tier_remote_value_encode(&id, toks, bytes, 1.0, mine);
    got = tier_remote_value_check(&id, toks, mine, n);
    if (!got || memcmp(got, bytes, pb)) abort();
    free(mine);
    free(val);
    return 0;
}
