/* fuzz_tokenizer.c - tokenizer.json: a file either loads or is refused with
 * a message naming tokenizer.json; a tokenizer that loads encodes fixed
 * strings and the input itself (when it is UTF-8), and decodes every id
 * sequence to valid UTF-8. */
#include "fuzz_util.h"
#include "tokenizer.h"

static void check_decode(const tokenizer *t, const int32_t *ids, size_t n)
{
    for (int skip = 0; skip < 2; skip++) {
        char *s;
        size_t len;
        char err[256];
        if (tokenizer_decode(t, ids, n, skip, &s, &len, err, sizeof err) != RKV_OK) abort();
        if (utf8_valid_prefix((const uint8_t *)s, len) != len || strlen(s) > len) abort();
        free(s);
    }
}

static void check_encode(const tokenizer *t, const char *text, size_t n)
{
    int32_t *ids;
    size_t m;
    char err[256];
    rkv_status st = tokenizer_encode(t, text, n, true, &ids, &m, err, sizeof err);
    if (st == RKV_ENOMEM) return;
    /* valid UTF-8 always encodes (a regex that gives up names itself) */
    if (st != RKV_OK) {
        if (!strstr(err, "regex")) abort();
        return;
    }
    for (size_t i = 0; i < m; i++)
        if (ids[i] < 0 || ids[i] >= tokenizer_vocab_size(t)) abort();
    check_decode(t, ids, m);
    free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tokenizer *t = NULL;
    char err[512] = "";
    rkv_status st = tokenizer_load_text((const char *)data, size, "tokenizer.json", NULL, 0, &t,
                                        err, sizeof err);
    if (st != RKV_OK) {
        if (t || !strstr(err, "tokenizer.json")) abort();
        return 0;
    }
    static const char *const texts[] = {"", "Hello world! It's 12345.", "  \n\n\t x  ",
                                        "caf\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x98\x80",
                                        "<|endoftext|>a<s>b</s>"};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++)
        check_encode(t, texts[i], strlen(texts[i]));
    if (utf8_valid_prefix(data, size) == size && size < 4096) check_encode(t, (const char *)data, size);
    /* ids from the input's bytes, cutting UTF-8 sequences anywhere */
    int32_t ids[64];
    size_t n = 0;
    int32_t v = tokenizer_vocab_size(t);
    for (size_t i = 0; i + 1 < size && n < 64; i += 2) ids[n++] = (int32_t)((data[i] << 8 | data[i + 1]) % v);
    check_decode(t, ids, n);
    tokenizer_free(t);
    return 0;
}
