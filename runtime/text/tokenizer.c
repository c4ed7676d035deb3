/* tokenizer.c - byte-level BPE from tokenizer.json (see tokenizer.h). */
#define PCRE2_CODE_UNIT_WIDTH 8

#include "tokenizer.h"
#include "rkv_core.h"

#include <errno.h>
#include <jansson.h>
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unicode/unorm2.h>
#include <unicode/ustring.h>

/* ------------------------------------------------------------------ UTF-8 */

/* Length of the valid UTF-8 sequence at s[0..n) (1..4), or minus the length
 * of its maximal invalid subpart (the bytes one U+FFFD replaces, >= 1):
 * a lead byte followed by the continuation bytes it allows, cut where the
 * next byte does not fit (Unicode 15, section 3.9, "U+FFFD substitution of
 * maximal subparts"). */
static int utf8_step(const uint8_t *s, size_t n)
{
    uint8_t b = s[0];
    if (b < 0x80) return 1;
    int need;
    uint8_t lo = 0x80, hi = 0xBF;
    if (b >= 0xC2 && b <= 0xDF) need = 1;
    else if (b == 0xE0) need = 2, lo = 0xA0;
    else if (b == 0xED) need = 2, hi = 0x9F;
    else if (b >= 0xE1 && b <= 0xEF) need = 2;
    else if (b == 0xF0) need = 3, lo = 0x90;
    else if (b == 0xF4) need = 3, hi = 0x8F;
    else if (b >= 0xF1 && b <= 0xF3) need = 3;
    else return -1;
    for (int k = 1; k <= need; k++) {
        if ((size_t)k >= n) return -k;
        uint8_t c = s[k];
        uint8_t l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xBF;
        if (c < l || c > h) return -k;
    }
    return need + 1;
}

size_t utf8_valid_prefix(const uint8_t *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        int k = utf8_step(s + i, n - i);
        if (k < 0) return i;
        i += (size_t)k;
    }
    return n;
}

size_t utf8_incomplete_tail(const uint8_t *s, size_t n)
{
    for (size_t back = 1; back <= 3 && back <= n; back++) {
        if ((s[n - back] & 0xC0) == 0x80) continue; /* a continuation byte: look further back */
        /* a lead byte: held when every byte after it fits and more are needed */
        uint8_t b = s[n - back];
        return b >= 0xC2 && b <= 0xF4 && utf8_step(s + n - back, back) == -(int)back ? back : 0;
    }
    return 0;
}

char *utf8_repair(const uint8_t *src, size_t n, size_t *out_len)
{
    /* worst case: every byte becomes U+FFFD (3 bytes) */
    char *out = malloc(n * 3 + 1);
    if (!out) return NULL;
    size_t o = 0, i = 0;
    while (i < n) {
        int k = utf8_step(src + i, n - i);
        if (k > 0) {
            memcpy(out + o, src + i, (size_t)k);
            o += (size_t)k;
            i += (size_t)k;
        } else {
            memcpy(out + o, "\xEF\xBF\xBD", 3);
            o += 3;
            i += (size_t)-k;
        }
    }
    out[o] = '\0';
    if (out_len) *out_len = o;
    return out;
}

/* Code point of the valid sequence of length k at s. */
static uint32_t utf8_cp(const uint8_t *s, int k)
{
    if (k == 1) return s[0];
    if (k == 2) return ((uint32_t)(s[0] & 0x1F) << 6) | (s[1] & 0x3F);
    if (k == 3)
        return ((uint32_t)(s[0] & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) | (s[2] & 0x3F);
    return ((uint32_t)(s[0] & 0x07) << 18) | ((uint32_t)(s[1] & 0x3F) << 12) |
           ((uint32_t)(s[2] & 0x3F) << 6) | (s[3] & 0x3F);
}

static int utf8_put(uint32_t cp, char *out)
{
    if (cp < 0x80) { out[0] = (char)cp; return 1; }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    out[0] = (char)(0xE0 | (cp >> 12));
    out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
}

/* ------------------------------------------------------- growable buffers */

typedef struct bytes_buf {
    char *p;
    size_t n, cap;
} bytes_buf;

static bool buf_reserve(bytes_buf *b, size_t extra)
{
    return rkv_grow_size((void **)&b->p, &b->cap, b->n + extra, 1) == RKV_OK;
}

static bool buf_put(bytes_buf *b, const void *s, size_t n)
{
    if (!n) return true; /* b->p may still be NULL */
    if (!buf_reserve(b, n)) return false;
    memcpy(b->p + b->n, s, n);
    b->n += n;
    return true;
}

typedef struct ids_buf {
    int32_t *p;
    size_t n, cap;
} ids_buf;

static bool ids_push(ids_buf *v, int32_t id)
{
    if (rkv_grow_size((void **)&v->p, &v->cap, v->n + 1, sizeof *v->p)) return false;
    v->p[v->n++] = id;
    return true;
}

/* ----------------------------------------------------------- hash tables */

static uint64_t hash_bytes(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a, then a final mix */
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 1099511628211ULL;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return h;
}

/* string -> id; keys point at strings the tokenizer owns. */
typedef struct str_slot {
    const char *key; /* NULL: empty */
    uint32_t len;
    int32_t val;
} str_slot;

typedef struct str_map {
    str_slot *s;
    size_t cap, n; /* cap a power of two */
} str_map;

static bool str_map_init(str_map *m, size_t want)
{
    size_t cap = 16;
    while (cap < want * 2) cap *= 2;
    m->s = calloc(cap, sizeof *m->s);
    m->cap = cap;
    m->n = 0;
    return m->s != NULL;
}

static str_slot *str_map_slot(const str_map *m, const char *k, size_t n)
{
    size_t i = hash_bytes(k, n) & (m->cap - 1);
    for (;;) {
        str_slot *s = &m->s[i];
        if (!s->key || (s->len == n && !memcmp(s->key, k, n))) return s;
        i = (i + 1) & (m->cap - 1);
    }
}

static int32_t str_map_get(const str_map *m, const char *k, size_t n)
{
    if (!m->cap) return -1;
    str_slot *s = str_map_slot(m, k, n);
    return s->key ? s->val : -1;
}

/* (left id, right id) -> (rank, merged id) */
typedef struct pair_slot {
    uint64_t key; /* UINT64_MAX: empty */
    int32_t rank, id;
} pair_slot;

typedef struct pair_map {
    pair_slot *s;
    size_t cap;
} pair_map;

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

static pair_slot *pair_map_slot(const pair_map *m, uint64_t key)
{
    size_t i = mix64(key) & (m->cap - 1);
    for (;;) {
        pair_slot *s = &m->s[i];
        if (s->key == UINT64_MAX || s->key == key) return s;
        i = (i + 1) & (m->cap - 1);
    }
}

static const pair_slot *pair_map_get(const pair_map *m, int32_t a, int32_t b)
{
    if (!m->cap) return NULL;
    const pair_slot *s = pair_map_slot(m, ((uint64_t)(uint32_t)a << 32) | (uint32_t)b);
    return s->key == UINT64_MAX ? NULL : s;
}

/* ------------------------------------------------------------ the struct */

enum { MAX_PRE_STEPS = 8 };

typedef struct added_token {
    char *content;
    uint32_t len;
    int32_t id;
    bool special, normalized;
} added_token;

typedef struct pre_step {
    pcre2_code *re;       /* the split regex (Split, or ByteLevel with use_regex) */
    bool add_prefix_space; /* ByteLevel only */
    bool byte_level;
} pre_step;

struct tokenizer {
    int32_t n_ids;        /* 1 + the largest id */
    char **tok;           /* (n_ids) token text (vocab or added content), NULL: no token */
    uint32_t *tok_len;
    uint8_t **dec;        /* (n_ids) bytes the decoder gives for the token */
    uint32_t *dec_len;
    uint8_t *special;     /* (n_ids) an added token marked special */
    str_map vocab;        /* the model's vocabulary */
    str_map added_map;    /* added token content -> id */
    pair_map merges;
    int32_t byte_id[256]; /* id of the one-byte symbol, -1 when not in the vocab */
    char byte_chr[256][2]; /* the byte's character in the vocabulary's strings (UTF-8) */
    uint8_t byte_chr_len[256];
    bool ignore_merges;
    int32_t unk_id;       /* -1: none */
    bool fuse_unk;
    added_token *added;   /* (n_added) */
    size_t n_added;
    /* for each first byte, indices into added[] of the tokens starting with
     * it, longest first; [0]: raw-text (normalized=false) tokens, [1]: the rest */
    int32_t *first[2][256];
    int32_t n_first[2][256];
    int32_t cap_first[2][256];
    bool nfc;
    pre_step steps[MAX_PRE_STEPS];
    int n_steps;
    int32_t *prefix, *suffix; /* the post-processor's ids around the sequence */
    size_t n_prefix, n_suffix;
    char *chat_template, *bos_token, *eos_token;
};

/* The GPT-2 byte-to-unicode map: printable Latin-1 bytes stand for
 * themselves, the other 68 bytes for U+0100 onwards in byte order, so that
 * every byte is a visible character in the vocabulary's strings. */
static void byte_map_build(uint32_t cp_of[256], int16_t byte_of[512])
{
    for (int i = 0; i < 512; i++) byte_of[i] = -1;
    int extra = 0;
    for (int b = 0; b < 256; b++) {
        bool keep = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
        cp_of[b] = keep ? (uint32_t)b : (uint32_t)(256 + extra++);
        byte_of[cp_of[b]] = (int16_t)b;
    }
}

static const char GPT2_PATTERN[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

void tokenizer_free(tokenizer *t)
{
    if (!t) return;
    for (int32_t i = 0; i < t->n_ids; i++) {
        if (t->dec) free(t->dec[i]);
        if (t->tok) free(t->tok[i]);
    }
    free(t->tok);
    free(t->tok_len);
    free(t->dec);
    free(t->dec_len);
    free(t->special);
    free(t->vocab.s);
    free(t->added_map.s);
    free(t->merges.s);
    for (size_t i = 0; i < t->n_added; i++) free(t->added[i].content);
    free(t->added);
    for (int c = 0; c < 2; c++)
        for (int b = 0; b < 256; b++) free(t->first[c][b]);
    for (int i = 0; i < t->n_steps; i++) pcre2_code_free(t->steps[i].re);
    free(t->prefix);
    free(t->suffix);
    free(t->chat_template);
    free(t->bos_token);
    free(t->eos_token);
    free(t);
}

/* ------------------------------------------------------------- loading */

typedef struct load_ctx {
    const char *name; /* "tokenizer.json" */
    char *err;
    size_t errlen;
} load_ctx;

#define LOAD_FAIL(st, ...) rkv_fail((st), c->err, c->errlen, __VA_ARGS__)

static bool json_is_null_or_absent(const json_t *v) { return !v || json_is_null(v); }

static rkv_status compile_regex(load_ctx *c, const char *field, const char *pat,
                                pcre2_code **out)
{
    int ec;
    PCRE2_SIZE off;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED,
                                   PCRE2_UTF | PCRE2_UCP, &ec, &off, NULL);
    if (!re) {
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(ec, msg, sizeof msg);
        return LOAD_FAIL(RKV_EPARSE, "%s: %s: the regex does not compile at offset %zu: %s",
                         c->name, field, (size_t)off, (const char *)msg);
    }
    /* No JIT (an unsupported CPU, a hardened kernel) only costs speed. */
    (void)pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);
    *out = re;
    return RKV_OK;
}

static rkv_status load_normalizer(load_ctx *c, tokenizer *t, const json_t *n)
{
    if (json_is_null_or_absent(n)) return RKV_OK;
    const char *type = json_string_value(json_object_get(n, "type"));
    if (!type) return LOAD_FAIL(RKV_EPARSE, "%s: normalizer.type: missing or not a string", c->name);
    if (!strcmp(type, "NFC")) {
        t->nfc = true;
        return RKV_OK;
    }
    if (!strcmp(type, "Sequence")) {
        const json_t *a = json_object_get(n, "normalizers");
        if (!json_is_array(a))
            return LOAD_FAIL(RKV_EPARSE, "%s: normalizer.normalizers: not an array", c->name);
        if (json_array_size(a) == 0) return RKV_OK;
        if (json_array_size(a) == 1) return load_normalizer(c, t, json_array_get(a, 0));
    }
    return LOAD_FAIL(RKV_ENOTSUP,
                     "%s: normalizer.type: '%s' is not supported (none or NFC only)", c->name, type);
}

/* One step of a pipeline (pre_tokenizer, post_processor) at where. */
typedef rkv_status (*load_step_fn)(load_ctx *c, tokenizer *t, const json_t *p,
                                   const char *where);

/* A Sequence step: each element of p[key] loaded by step, in order, named
 * where.key[i] in errors. */
static rkv_status load_sequence(load_ctx *c, tokenizer *t, const json_t *p, const char *where,
                                const char *key, load_step_fn step)
{
    const json_t *a = json_object_get(p, key);
    if (!json_is_array(a))
        return LOAD_FAIL(RKV_EPARSE, "%s: %s.%s: not an array", c->name, where, key);
    for (size_t i = 0; i < json_array_size(a); i++) {
        char sub[96];
        snprintf(sub, sizeof sub, "%s.%s[%zu]", where, key, i);
        rkv_status st = step(c, t, json_array_get(a, i), sub);
        if (st) return st;
    }
    return RKV_OK;
}

static rkv_status load_pre_step(load_ctx *c, tokenizer *t, const json_t *p, const char *where)
{
    const char *type = json_string_value(json_object_get(p, "type"));
    if (!type) return LOAD_FAIL(RKV_EPARSE, "%s: %s.type: missing or not a string", c->name, where);
    if (t->n_steps == MAX_PRE_STEPS)
        return LOAD_FAIL(RKV_ENOTSUP, "%s: %s: more than %d steps", c->name, where, MAX_PRE_STEPS);
    pre_step *s = &t->steps[t->n_steps];
    char field[96];
    if (!strcmp(type, "Split")) {
        const json_t *pat = json_object_get(p, "pattern");
        const char *re = json_string_value(json_object_get(pat, "Regex"));
        if (!re)
            return LOAD_FAIL(RKV_ENOTSUP, "%s: %s.pattern: only {\"Regex\": ...} is supported",
                             c->name, where);
        const char *beh = json_string_value(json_object_get(p, "behavior"));
        if (!beh || strcmp(beh, "Isolated"))
            return LOAD_FAIL(RKV_ENOTSUP, "%s: %s.behavior: '%s' is not supported (Isolated only)",
                             c->name, where, beh ? beh : "(missing)");
        if (json_is_true(json_object_get(p, "invert")))
            return LOAD_FAIL(RKV_ENOTSUP, "%s: %s.invert: true is not supported", c->name, where);
        snprintf(field, sizeof field, "%s.pattern.Regex", where);
        rkv_status st = compile_regex(c, field, re, &s->re);
        if (st) return st;
        t->n_steps++;
        return RKV_OK;
    }
    if (!strcmp(type, "ByteLevel")) {
        s->byte_level = true;
        s->add_prefix_space = json_is_true(json_object_get(p, "add_prefix_space"));
        const json_t *ur = json_object_get(p, "use_regex");
        /* use_regex defaults to true in tokenizers */
        if (!ur || json_is_true(ur)) {
            snprintf(field, sizeof field, "%s.use_regex", where);
            rkv_status st = compile_regex(c, field, GPT2_PATTERN, &s->re);
            if (st) return st;
        }
        t->n_steps++;
        return RKV_OK;
    }
    if (!strcmp(type, "Sequence"))
        return load_sequence(c, t, p, where, "pretokenizers", load_pre_step);
    return LOAD_FAIL(RKV_ENOTSUP,
                     "%s: %s.type: '%s' is not supported (Split, ByteLevel, Sequence)", c->name,
                     where, type);
}

/* Sets t->tok[id] (a copy), failing on a second token for one id unless
 * it is the same text (an added token that is also in the vocabulary). */
static rkv_status set_token(load_ctx *c, tokenizer *t, int32_t id, const char *s, size_t n,
                            const char *where)
{
    if (t->tok[id]) {
        if (t->tok_len[id] == n && !memcmp(t->tok[id], s, n)) return RKV_OK;
        return LOAD_FAIL(RKV_EPARSE, "%s: %s: id %d is given to two different tokens", c->name,
                         where, (int)id);
    }
    char *copy = malloc(n + 1);
    if (!copy) return LOAD_FAIL(RKV_ENOMEM, "%s: out of memory", c->name);
    memcpy(copy, s, n);
    copy[n] = '\0';
    t->tok[id] = copy;
    t->tok_len[id] = (uint32_t)n;
    return RKV_OK;
}

static int cmp_added_len_desc(const void *a, const void *b, void *ctx)
{
    const added_token *tk = ctx;
    uint32_t la = tk[*(const int32_t *)a].len, lb = tk[*(const int32_t *)b].len;
    if (la != lb) return la > lb ? -1 : 1;
    return *(const int32_t *)a - *(const int32_t *)b;
}

static rkv_status load_added(load_ctx *c, tokenizer *t, const json_t *a)
{
    if (json_is_null_or_absent(a)) return RKV_OK;
    if (!json_is_array(a)) return LOAD_FAIL(RKV_EPARSE, "%s: added_tokens: not an array", c->name);
    size_t n = json_array_size(a);
    t->added = calloc(n ? n : 1, sizeof *t->added);
    if (!t->added) return LOAD_FAIL(RKV_ENOMEM, "%s: out of memory", c->name);
    for (size_t i = 0; i < n; i++) {
        const json_t *e = json_array_get(a, i);
        const json_t *jc = json_object_get(e, "content"), *jid = json_object_get(e, "id");
        if (!json_is_string(jc) || json_string_length(jc) == 0)
            return LOAD_FAIL(RKV_EPARSE, "%s: added_tokens[%zu].content: missing or empty",
                             c->name, i);
        if (!json_is_integer(jid) || json_integer_value(jid) < 0 ||
            json_integer_value(jid) >= INT32_MAX)
            return LOAD_FAIL(RKV_EPARSE, "%s: added_tokens[%zu].id: not an id in [0, 2^31-1)",
                             c->name, i);
        static const char *const refused[] = {"single_word", "lstrip", "rstrip"};
        for (size_t k = 0; k < 3; k++)
            if (json_is_true(json_object_get(e, refused[k])))
                return LOAD_FAIL(RKV_ENOTSUP, "%s: added_tokens[%zu].%s: true is not supported",
                                 c->name, i, refused[k]);
        added_token *tk = &t->added[t->n_added];
        tk->len = (uint32_t)json_string_length(jc);
        tk->content = malloc(tk->len + 1);
        if (!tk->content) return LOAD_FAIL(RKV_ENOMEM, "%s: out of memory", c->name);
        memcpy(tk->content, json_string_value(jc), tk->len + 1);
        tk->id = (int32_t)json_integer_value(jid);
        tk->special = json_is_true(json_object_get(e, "special"));
        /* tokenizers' default: normalized = !special */
        const json_t *jn = json_object_get(e, "normalized");
        tk->normalized = jn ? json_is_true(jn) : !tk->special;
        t->n_added++;
    }
    return RKV_OK;
}

static rkv_status load_post(load_ctx *c, tokenizer *t, const json_t *p, const char *where)
{
    if (json_is_null_or_absent(p)) return RKV_OK;
    const char *type = json_string_value(json_object_get(p, "type"));
    if (!type) return LOAD_FAIL(RKV_EPARSE, "%s: %s.type: missing or not a string", c->name, where);
    if (!strcmp(type, "ByteLevel")) return RKV_OK; /* offsets only */
    if (!strcmp(type, "Sequence")) return load_sequence(c, t, p, where, "processors", load_post);
    if (strcmp(type, "TemplateProcessing"))
        return LOAD_FAIL(RKV_ENOTSUP,
                         "%s: %s.type: '%s' is not supported (ByteLevel, TemplateProcessing, "
                         "Sequence)", c->name, where, type);
    if (t->n_prefix || t->n_suffix)
        return LOAD_FAIL(RKV_ENOTSUP, "%s: %s: a second TemplateProcessing", c->name, where);
    const json_t *single = json_object_get(p, "single");
    const json_t *sp = json_object_get(p, "special_tokens");
    if (!json_is_array(single))
        return LOAD_FAIL(RKV_EPARSE, "%s: %s.single: not an array", c->name, where);
    size_t n = json_array_size(single);
    ids_buf pre = {0}, suf = {0};
    bool seen_seq = false;
    rkv_status st = RKV_OK;
    for (size_t i = 0; i < n && !st; i++) {
        const json_t *e = json_array_get(single, i);
        const json_t *seq = json_object_get(e, "Sequence"), *tok = json_object_get(e, "SpecialToken");
        if (seq) {
            const char *sid = json_string_value(json_object_get(seq, "id"));
            if (seen_seq || !sid || strcmp(sid, "A")) {
                st = LOAD_FAIL(RKV_ENOTSUP, "%s: %s.single[%zu]: only one Sequence A is supported",
                               c->name, where, i);
                break;
            }
            seen_seq = true;
            continue;
        }
        const char *name = json_string_value(json_object_get(tok, "id"));
        const json_t *ids = json_object_get(json_object_get(sp, name ? name : ""), "ids");
        if (!name || !json_is_array(ids)) {
            st = LOAD_FAIL(RKV_EPARSE, "%s: %s.single[%zu]: a SpecialToken not in special_tokens",
                           c->name, where, i);
            break;
        }
        for (size_t k = 0; k < json_array_size(ids); k++) {
            const json_t *v = json_array_get(ids, k);
            if (!json_is_integer(v) || json_integer_value(v) < 0 ||
                json_integer_value(v) >= INT32_MAX) {
                st = LOAD_FAIL(RKV_EPARSE, "%s: %s.special_tokens.%s.ids[%zu]: not an id", c->name,
                               where, name, k);
                break;
            }
            if (!ids_push(seen_seq ? &suf : &pre, (int32_t)json_integer_value(v)))
                st = LOAD_FAIL(RKV_ENOMEM, "%s: out of memory", c->name);
        }
    }
    if (!st && !seen_seq)
        st = LOAD_FAIL(RKV_EPARSE, "%s: %s.single: no Sequence A", c->name, where);
    if (st) {
        free(pre.p);
        free(suf.p);
        return st;
    }
    t->prefix = pre.p;
    t->n_prefix = pre.n;
    t->suffix = suf.p;
    t->n_suffix = suf.n;
    return RKV_OK;
}

static rkv_status load_decoder(load_ctx *c, const json_t *d, const char *where)
{
    if (json_is_null_or_absent(d))
        return LOAD_FAIL(RKV_ENOTSUP, "%s: %s: null is not supported (ByteLevel only)", c->name,
                         where);
    const char *type = json_string_value(json_object_get(d, "type"));
    if (type && !strcmp(type, "ByteLevel")) return RKV_OK;
    if (type && !strcmp(type, "Sequence")) {
        const json_t *a = json_object_get(d, "decoders");
        if (json_is_array(a) && json_array_size(a) == 1) {
            char sub[64];
            snprintf(sub, sizeof sub, "%s.decoders[0]", where);
            return load_decoder(c, json_array_get(a, 0), sub);
        }
    }
    return LOAD_FAIL(RKV_ENOTSUP, "%s: %s.type: '%s' is not supported (ByteLevel only)", c->name,
                     where, type ? type : "(missing)");
}

/* Splits "a b" (the old merges format) or takes ["a", "b"]. */
static bool merge_parts(const json_t *m, const char **a, size_t *na, const char **b, size_t *nb)
{
    if (json_is_string(m)) {
        const char *s = json_string_value(m);
        size_t n = json_string_length(m);
        const char *sp = memchr(s, ' ', n);
        if (!sp || memchr(sp + 1, ' ', n - (size_t)(sp + 1 - s))) return false;
        *a = s;
        *na = (size_t)(sp - s);
        *b = sp + 1;
        *nb = n - *na - 1;
        return *na && *nb;
    }
    if (json_is_array(m) && json_array_size(m) == 2 && json_is_string(json_array_get(m, 0)) &&
        json_is_string(json_array_get(m, 1))) {
        *a = json_string_value(json_array_get(m, 0));
        *na = json_string_length(json_array_get(m, 0));
        *b = json_string_value(json_array_get(m, 1));
        *nb = json_string_length(json_array_get(m, 1));
        return true;
    }
    return false;
}

/* The model's options other than its vocabulary and merges: only plain
 * byte-level BPE is read, anything else is refused by name. */
static rkv_status model_check_options(load_ctx *c, tokenizer *t, const json_t *m)
{
    if (!json_is_object(m)) return LOAD_FAIL(RKV_EPARSE, "%s: model: missing or not an object", c->name);
    const char *type = json_string_value(json_object_get(m, "type"));
    /* Old files leave out the type of a BPE model. */
    if (type && strcmp(type, "BPE"))
        return LOAD_FAIL(RKV_ENOTSUP, "%s: model.type: '%s' is not supported (BPE only)", c->name,
                         type);
    if (!json_is_null_or_absent(json_object_get(m, "dropout")))
        return LOAD_FAIL(RKV_ENOTSUP, "%s: model.dropout: only null is supported", c->name);
    if (json_is_true(json_object_get(m, "byte_fallback")))
        return LOAD_FAIL(RKV_ENOTSUP, "%s: model.byte_fallback: true is not supported", c->name);
    static const char *const affixes[] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (int k = 0; k < 2; k++) {
        const json_t *v = json_object_get(m, affixes[k]);
        if (!json_is_null_or_absent(v) && !(json_is_string(v) && json_string_length(v) == 0))
            return LOAD_FAIL(RKV_ENOTSUP, "%s: model.%s: only null or \"\" is supported", c->name,
                             affixes[k]);
    }
    t->ignore_merges = json_is_true(json_object_get(m, "ignore_merges"));
    t->fuse_unk = json_is_true(json_object_get(m, "fuse_unk"));
    return RKV_OK;
}

/* The tables indexed by id (text, decoded text, special flag), sized for
 * the largest id of the vocabulary and the added tokens. */
static rkv_status model_alloc_ids(load_ctx *c, tokenizer *t, const json_t *vocab,
                                  int32_t max_added)
{
    int32_t max_id = max_added;
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)vocab, key, v) {
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= INT32_MAX)
            return LOAD_FAIL(RKV_EPARSE, "%s: model.vocab[\"%.40s\"]: not an id in [0, 2^31-1)",
                             c->name, key);
        if (json_integer_value(v) > max_id) max_id = (int32_t)json_integer_value(v);
    }
    /* Real vocabularies number their tokens 0..n-1; the tables are indexed
     * by id, so ids far beyond the number of tokens are refused rather than
     * allocated for. */
    size_t n_tokens = json_object_size(vocab) + t->n_added;
    if ((size_t)max_id >= 4 * n_tokens + 65536)
        return LOAD_FAIL(RKV_ERANGE, "%s: model.vocab: id %d with only %zu tokens (ids must be "
                         "dense)", c->name, (int)max_id, n_tokens);
    t->n_ids = max_id + 1;
    t->tok = calloc((size_t)t->n_ids, sizeof *t->tok);
    t->tok_len = calloc((size_t)t->n_ids, sizeof *t->tok_len);
    t->dec = calloc((size_t)t->n_ids, sizeof *t->dec);
    t->dec_len = calloc((size_t)t->n_ids, sizeof *t->dec_len);
    t->special = calloc((size_t)t->n_ids, 1);
    if (!t->tok || !t->tok_len || !t->dec || !t->dec_len || !t->special ||
        !str_map_init(&t->vocab, json_object_size(vocab)))
        return LOAD_FAIL(RKV_ENOMEM, "%s: out of memory", c->name);
    return RKV_OK;
}

/* model.vocab into the id tables and the text -> id map, then unk_token
 * and each byte's own token (the pieces a word falls back to). */
static rkv_status model_load_vocab(load_ctx *c, tokenizer *t, const json_t *m, int32_t max_added)
{
    const json_t *vocab = json_object_get(m, "vocab");
    if (!json_is_object(vocab))
        return LOAD_FAIL(RKV_EPARSE, "%s: model.vocab: missing or not an object", c->name);
    rkv_status st = model_alloc_ids(c, t, vocab, max_added);
    if (st) return st;
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)vocab, key, v) {
        int32_t id = (int32_t)json_integer_value(v);
        /* jansson keys are NUL-terminated; a key with an embedded NUL is cut */
        size_t n = strlen(key);
        if ((st = set_token(c, t, id, key, n, "model.vocab"))) return st;
        str_slot *s = str_map_slot(&t->vocab, t->tok[id], n);
        if (s->key)
            return LOAD_FAIL(RKV_EPARSE, "%s: model.vocab: token '%.40s' appears twice", c->name, key);
        s->key = t->tok[id];
        s->len = (uint32_t)n;
        s->val = id;
        t->vocab.n++;
    }
    const json_t *unk = json_object_get(m, "unk_token");
    t->unk_id = -1;
    if (json_is_string(unk)) {
        t->unk_id = str_map_get(&t->vocab, json_string_value(unk), json_string_length(unk));
        if (t->unk_id < 0)
            return LOAD_FAIL(RKV_EPARSE, "%s: model.unk_token: '%.40s' is not in the vocabulary",
                             c->name, json_string_value(unk));
    }
    uint32_t cp_of[256];
    int16_t byte_of[512];
    byte_map_build(cp_of, byte_of);
    for (int b = 0; b < 256; b++) {
        char u[4];
        int k = utf8_put(cp_of[b], u);
        memcpy(t->byte_chr[b], u, (size_t)k);
        t->byte_chr_len[b] = (uint8_t)k;
        t->byte_id[b] = str_map_get(&t->vocab, u, (size_t)k);
    }
    return RKV_OK;
}

/* model.merges into the pair -> (rank, merged id) map; every token of a
 * merge must be in the vocabulary. */
static rkv_status model_load_merges(load_ctx *c, tokenizer *t, const json_t *m)
{
    const json_t *merges = json_object_get(m, "merges");
    if (!json_is_array(merges))
        return LOAD_FAIL(RKV_EPARSE, "%s: model.merges: missing or not an array", c->name);
    size_t nm = json_array_size(merges);
    size_t cap = 16;
    while (cap < nm * 2) cap *= 2;
    t->merges.s = malloc(cap * sizeof *t->merges.s);
    if (!t->merges.s) return LOAD_FAIL(RKV_ENOMEM, "%s: out of memory", c->name);
    t->merges.cap = cap;
    for (size_t i = 0; i < cap; i++) t->merges.s[i].key = UINT64_MAX;
    bytes_buf joined = {0};
    for (size_t i = 0; i < nm; i++) {
        const char *a, *b;
        size_t na, nb;
        if (!merge_parts(json_array_get(merges, i), &a, &na, &b, &nb)) {
            free(joined.p);
            return LOAD_FAIL(RKV_EPARSE, "%s: model.merges[%zu]: not \"a b\" or [\"a\", \"b\"]",
                             c->name, i);
        }
        int32_t ia = str_map_get(&t->vocab, a, na), ib = str_map_get(&t->vocab, b, nb);
        joined.n = 0;
        if (!buf_put(&joined, a, na) || !buf_put(&joined, b, nb)) {
            free(joined.p);
            return LOAD_FAIL(RKV_ENOMEM, "%s: out of memory", c->name);
        }
        int32_t iab = str_map_get(&t->vocab, joined.p, joined.n);
        if (ia < 0 || ib < 0 || iab < 0) {
            free(joined.p);
            return LOAD_FAIL(RKV_EPARSE, "%s: model.merges[%zu]: a token of the merge is not in "
                             "the vocabulary", c->name, i);
        }
        /* a repeated pair keeps its last rank, as tokenizers' map does */
        pair_slot *s = pair_map_slot(&t->merges, ((uint64_t)(uint32_t)ia << 32) | (uint32_t)ib);
        s->key = ((uint64_t)(uint32_t)ia << 32) | (uint32_t)ib;
        s->rank = (int32_t)i;
        s->id = iab;
    }
    free(joined.p);
    return RKV_OK;
}

/* The "model" step: options, vocabulary, then merges, which look their
 * tokens up in the vocabulary. */
static rkv_status load_model(load_ctx *c, tokenizer *t, const json_t *m, int32_t max_added)
{
    rkv_status st = model_check_options(c, t, m);
    if (!st) st = model_load_vocab(c, t, m, max_added);
    if (!st) st = model_load_merges(c, t, m);
    return st;
}

/* The bytes the ByteLevel decoder gives for token text s (see tokenizer.h). */
static rkv_status token_decoded(tokenizer *t, int32_t id, const int16_t byte_of[512])
{
    const uint8_t *s = (const uint8_t *)t->tok[id];
    size_t n = t->tok_len[id];
    uint8_t *out = malloc(n ? n : 1);
    if (!out) return RKV_ENOMEM;
    size_t o = 0, i = 0;
    bool mapped = true;
    while (i < n) {
        int k = utf8_step(s + i, n - i);
        uint32_t cp = k > 0 ? utf8_cp(s + i, k) : 0xFFFFFFFF;
        if (k <= 0 || cp >= 512 || byte_of[cp] < 0) {
            mapped = false;
            break;
        }
        out[o++] = (uint8_t)byte_of[cp];
        i += (size_t)k;
    }
    if (!mapped) {
        memcpy(out, s, n);
        o = n;
    }
    t->dec[id] = out;
    t->dec_len[id] = (uint32_t)o;
    return RKV_OK;
}

static char *dup_config_token(const json_t *v)
{
    /* "eos_token": "<|im_end|>" or {"content": "<|im_end|>", ...} */
    if (json_is_object(v)) v = json_object_get(v, "content");
    return json_is_string(v) ? strdup(json_string_value(v)) : NULL;
}

static rkv_status load_config(load_ctx *c, tokenizer *t, const char *text, size_t len)
{
    json_error_t je;
    json_t *root = json_loadb(text, len, JSON_ALLOW_NUL, &je);
    if (!root)
        return LOAD_FAIL(RKV_EPARSE, "%s:%d:%d: %s", c->name, je.line, je.column, je.text);
    rkv_status st = RKV_OK;
    if (!json_is_object(root)) {
        st = LOAD_FAIL(RKV_EPARSE, "%s: not a JSON object", c->name);
        goto done;
    }
    const json_t *ct = json_object_get(root, "chat_template");
    if (json_is_string(ct)) {
        t->chat_template = strdup(json_string_value(ct));
        if (!t->chat_template) st = LOAD_FAIL(RKV_ENOMEM, "%s: out of memory", c->name);
    } else if (!json_is_null_or_absent(ct)) {
        /* a list of named templates: radixkv needs the one to use named */
        st = LOAD_FAIL(RKV_ENOTSUP, "%s: chat_template: only a string is supported", c->name);
    }
    /* Flags transformers reads from the config, checked by name. With a
     * tokenizer.json (the only form radixkv reads) transformers drops
     * add_bos_token and add_eos_token before building the tokenizer: the
     * file's post_processor alone decides BOS/EOS, so they change nothing
     * here either. It also ignores clean_up_tokenization_spaces for a BPE
     * model unless clean_up_tokenization_spaces_for_bpe_even_though_it_will_
     * corrupt_output is set too; that pair rewrites decoded text (" ," to
     * ",", " 's" to "'s", ...), which radixkv does not do, so it is refused. */
    static const char *const flags[] = {
        "add_bos_token", "add_eos_token", "clean_up_tokenization_spaces",
        "clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output"};
    bool on[4] = {false};
    for (int i = 0; i < 4 && !st; i++) {
        const json_t *v = json_object_get(root, flags[i]);
        if (json_is_null_or_absent(v)) continue;
        if (!json_is_boolean(v))
            st = LOAD_FAIL(RKV_EPARSE, "%s: %s: not true, false or null", c->name, flags[i]);
        on[i] = json_is_true(v);
    }
    if (!st && on[2] && on[3])
        st = LOAD_FAIL(RKV_ENOTSUP, "%s: clean_up_tokenization_spaces: true with %s true is not "
                       "supported (decoded text is never rewritten; set either to false)",
                       c->name, flags[3]);
    if (!st) {
        t->bos_token = dup_config_token(json_object_get(root, "bos_token"));
        t->eos_token = dup_config_token(json_object_get(root, "eos_token"));
    }
done:
    json_decref(root);
    return st;
}

/* The added tokens into their text -> id map, their special flags and,
 * per first byte and class (normalized or not), the list of those that may
 * start there, longest first (the first match found is the longest). */
static rkv_status index_added(load_ctx *c, tokenizer *t)
{
    if (!str_map_init(&t->added_map, t->n_added))
        return LOAD_FAIL(RKV_ENOMEM, "%s: out of memory", c->name);
    rkv_status st;
    for (size_t i = 0; i < t->n_added; i++) {
        added_token *tk = &t->added[i];
        if ((st = set_token(c, t, tk->id, tk->content, tk->len, "added_tokens"))) return st;
        str_slot *s = str_map_slot(&t->added_map, tk->content, tk->len);
        if (s->key)
            return LOAD_FAIL(RKV_EPARSE, "%s: added_tokens[%zu].content: '%.40s' appears twice",
                             c->name, i, tk->content);
        s->key = tk->content;
        s->len = tk->len;
        s->val = tk->id;
        t->added_map.n++;
        t->special[tk->id] = tk->special;
        int cls = tk->normalized ? 1 : 0;
        uint8_t b0 = (uint8_t)tk->content[0];
        int32_t *nf = &t->n_first[cls][b0];
        if (rkv_grow32((void **)&t->first[cls][b0], &t->cap_first[cls][b0], (int64_t)*nf + 1,
                       sizeof(int32_t)))
            return LOAD_FAIL(RKV_ENOMEM, "%s: out of memory", c->name);
        t->first[cls][b0][(*nf)++] = (int32_t)i;
    }
    for (int cls = 0; cls < 2; cls++)
        for (int b = 0; b < 256; b++)
            if (t->n_first[cls][b] > 1)
                qsort_r(t->first[cls][b], (size_t)t->n_first[cls][b], sizeof(int32_t),
                        cmp_added_len_desc, t->added);
    return RKV_OK;
}

/* The pre_tokenizer step, which must hold a ByteLevel step somewhere:
 * only byte-level BPE is read. */
static rkv_status load_pre_tokenizer(load_ctx *c, tokenizer *t, const json_t *pre)
{
    if (json_is_null_or_absent(pre))
        return LOAD_FAIL(RKV_ENOTSUP, "%s: pre_tokenizer: null is not supported (byte-level BPE "
                         "needs a ByteLevel step)", c->name);
    rkv_status st = load_pre_step(c, t, pre, "pre_tokenizer");
    if (st) return st;
    bool has_bl = false;
    for (int i = 0; i < t->n_steps; i++) has_bl |= t->steps[i].byte_level;
    if (!has_bl)
        return LOAD_FAIL(RKV_ENOTSUP, "%s: pre_tokenizer: no ByteLevel step (only byte-level BPE "
                         "is supported)", c->name);
    return RKV_OK;
}

/* Every id the post_processor adds (prefix, then suffix) names a token. */
static rkv_status check_post_ids(load_ctx *c, const tokenizer *t)
{
    for (size_t i = 0; i < t->n_prefix; i++)
        if (t->prefix[i] >= t->n_ids || !t->tok[t->prefix[i]])
            return LOAD_FAIL(RKV_EPARSE, "%s: post_processor: id %d names no token", c->name,
                             (int)t->prefix[i]);
    for (size_t i = 0; i < t->n_suffix; i++)
        if (t->suffix[i] >= t->n_ids || !t->tok[t->suffix[i]])
            return LOAD_FAIL(RKV_EPARSE, "%s: post_processor: id %d names no token", c->name,
                             (int)t->suffix[i]);
    return RKV_OK;
}

/* Each token's decoded bytes, kept beside its text for decode. */
static rkv_status decode_all(load_ctx *c, tokenizer *t)
{
    uint32_t cp_of[256];
    int16_t byte_of[512];
    byte_map_build(cp_of, byte_of);
    for (int32_t id = 0; id < t->n_ids; id++)
        if (t->tok[id] && token_decoded(t, id, byte_of))
            return LOAD_FAIL(RKV_ENOMEM, "%s: out of memory", c->name);
    return RKV_OK;
}

static rkv_status load_text(const char *json, size_t len, const char *name,
                            const char *config_json, size_t config_len, const char *config_name,
                            tokenizer **out, char *err, size_t errlen)
{
    load_ctx cx = {name ? name : "tokenizer.json", err, errlen}, *c = &cx;
    *out = NULL;
    json_error_t je;
    json_t *root = json_loadb(json, len, JSON_ALLOW_NUL, &je);
    if (!root) return LOAD_FAIL(RKV_EPARSE, "%s:%d:%d: %s", c->name, je.line, je.column, je.text);
    tokenizer *t = calloc(1, sizeof *t);
    rkv_status st = RKV_OK;
    if (!t) {
        json_decref(root);
        return LOAD_FAIL(RKV_ENOMEM, "%s: out of memory", c->name);
    }
    if (!json_is_object(root)) {
        st = LOAD_FAIL(RKV_EPARSE, "%s: not a JSON object", c->name);
        goto done;
    }
    if (!json_is_null_or_absent(json_object_get(root, "truncation")) ||
        !json_is_null_or_absent(json_object_get(root, "padding"))) {
        st = LOAD_FAIL(RKV_ENOTSUP, "%s: truncation/padding: only null is supported", c->name);
        goto done;
    }
    if ((st = load_added(c, t, json_object_get(root, "added_tokens")))) goto done;
    int32_t max_added = -1;
    for (size_t i = 0; i < t->n_added; i++)
        if (t->added[i].id > max_added) max_added = t->added[i].id;
    if ((st = load_model(c, t, json_object_get(root, "model"), max_added))) goto done;
    if ((st = index_added(c, t))) goto done;
    if ((st = load_normalizer(c, t, json_object_get(root, "normalizer")))) goto done;
    if ((st = load_pre_tokenizer(c, t, json_object_get(root, "pre_tokenizer")))) goto done;
    if ((st = load_post(c, t, json_object_get(root, "post_processor"), "post_processor"))) goto done;
    if ((st = check_post_ids(c, t))) goto done;
    if ((st = load_decoder(c, json_object_get(root, "decoder"), "decoder"))) goto done;
    if ((st = decode_all(c, t))) goto done;
    if (config_json) {
        load_ctx cc = {config_name, err, errlen};
        if ((st = load_config(&cc, t, config_json, config_len))) goto done;
    }
done:
    json_decref(root);
    if (st) {
        tokenizer_free(t);
        return st;
    }
    *out = t;
    return RKV_OK;
}

rkv_status tokenizer_load_text(const char *json, size_t len, const char *name,
                               const char *config_json, size_t config_len,
                               tokenizer **out, char *err, size_t errlen)
{
    return load_text(json, len, name, config_json, config_len, "tokenizer_config.json", out, err,
                     errlen);
}

rkv_status tokenizer_load(const char *dir, tokenizer **out, char *err, size_t errlen)
{
    *out = NULL;
    size_t dl = strlen(dir);
    char *p1 = malloc(dl + 32), *p2 = malloc(dl + 32);
    char *tj = NULL, *cj = NULL;
    size_t tl = 0, cl = 0;
    rkv_status st = RKV_ENOMEM;
    if (!p1 || !p2) goto done;
    snprintf(p1, dl + 32, "%s/tokenizer.json", dir);
    snprintf(p2, dl + 32, "%s/tokenizer_config.json", dir);
    if ((st = rkv_read_file(p1, 0, &tj, &tl, err, errlen))) goto done;
    FILE *probe = fopen(p2, "rb");
    if (probe) {
        fclose(probe);
        if ((st = rkv_read_file(p2, 0, &cj, &cl, err, errlen))) goto done;
    }
    st = load_text(tj, tl, p1, cj, cl, p2, out, err, errlen);
done:
    if (st == RKV_ENOMEM && (!p1 || !p2)) rkv_set_err(err, errlen, "%s: out of memory", dir);
    free(p1);
    free(p2);
    free(tj);
    free(cj);
    return st;
}

/* ------------------------------------------------------------- encoding */

/* One merge candidate: the pair starting at symbol pos, merging into id. */
typedef struct merge_cand {
    int32_t rank, pos, id;
} merge_cand;

static bool cand_less(const merge_cand *a, const merge_cand *b)
{
    return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos;
}

typedef struct bpe_scratch {
    int32_t *sym, *prev, *next;
    uint8_t *alive;
    merge_cand *heap;
    int32_t cap; /* of sym, prev, next and alive */
    size_t hcap, hn;
    bytes_buf word; /* the word in the vocabulary's characters (ignore_merges) */
} bpe_scratch;

static bool heap_push(bpe_scratch *s, merge_cand c)
{
    if (rkv_grow_size((void **)&s->heap, &s->hcap, s->hn + 1, sizeof *s->heap)) return false;
    size_t i = s->hn++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!cand_less(&c, &s->heap[p])) break;
        s->heap[i] = s->heap[p];
        i = p;
    }
    s->heap[i] = c;
    return true;
}

static merge_cand heap_pop(bpe_scratch *s)
{
    merge_cand top = s->heap[0], last = s->heap[--s->hn];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        const merge_cand *best = &last;
        if (l < s->hn && cand_less(&s->heap[l], best)) m = l, best = &s->heap[l];
        if (r < s->hn && cand_less(&s->heap[r], best)) m = r;
        if (m == i) break;
        s->heap[i] = s->heap[m];
        i = m;
    }
    if (s->hn) s->heap[i] = last;
    return top;
}

/* Symbols are counted in int32_t, so a word past INT32_MAX / 2 bytes is
 * refused here (as out of memory) rather than overflowing the count. */
static bool scratch_reserve(bpe_scratch *s, size_t n)
{
    void **const arrays[] = {(void **)&s->sym, (void **)&s->prev, (void **)&s->next,
                             (void **)&s->alive};
    const size_t elem[] = {sizeof *s->sym, sizeof *s->prev, sizeof *s->next, sizeof *s->alive};
    return n <= INT32_MAX && rkv_grow32_arrays(arrays, elem, 4, &s->cap, (int64_t)n) == RKV_OK;
}

static void scratch_free(bpe_scratch *s)
{
    free(s->sym);
    free(s->prev);
    free(s->next);
    free(s->alive);
    free(s->heap);
    free(s->word.p);
}

/* The BPE of one pre-tokenized word (its raw bytes) appended to out.
 *
 * 1) ignore_merges: a word that is a vocabulary token is that token.
 * 2) One symbol per byte (its one-character token); a byte without one is
 *    the unknown token (fused runs when fuse_unk) or dropped.
 * 3) Every adjacent pair with a merge goes on a heap ordered by (rank,
 *    position). Pop the best: skip it if either symbol was merged away or
 *    the pair there no longer merges into the same id; else merge right
 *    into left and push the new symbol's pairs with its neighbours. This is
 *    tokenizers' own procedure, so ties and stale entries resolve alike. */
static bool bpe_word(const tokenizer *t, const uint8_t *w, size_t n, bpe_scratch *s, ids_buf *out)
{
    if (t->ignore_merges) {
        s->word.n = 0;
        if (!buf_reserve(&s->word, n * 2)) return false;
        for (size_t i = 0; i < n; i++) {
            memcpy(s->word.p + s->word.n, t->byte_chr[w[i]], t->byte_chr_len[w[i]]);
            s->word.n += t->byte_chr_len[w[i]];
        }
        int32_t id = str_map_get(&t->vocab, s->word.p, s->word.n);
        if (id >= 0) return ids_push(out, id);
    }
    if (!scratch_reserve(s, n)) return false;
    /* 2: symbols */
    int32_t m = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t id = t->byte_id[w[i]];
        if (id < 0) {
            if (t->unk_id < 0) continue;
            if (t->fuse_unk && m > 0 && s->sym[m - 1] == t->unk_id) continue;
            id = t->unk_id;
        }
        s->sym[m] = id;
        s->prev[m] = m - 1;
        s->next[m] = m + 1;
        s->alive[m] = 1;
        m++;
    }
    if (m == 0) return true;
    s->next[m - 1] = -1;
    /* 3: merges */
    s->hn = 0;
    for (int32_t i = 0; i + 1 < m; i++) {
        const pair_slot *p = pair_map_get(&t->merges, s->sym[i], s->sym[i + 1]);
        if (p && !heap_push(s, (merge_cand){p->rank, i, p->id})) return false;
    }
    while (s->hn) {
        merge_cand c = heap_pop(s);
        if (!s->alive[c.pos] || s->next[c.pos] < 0) continue;
        int32_t r = s->next[c.pos];
        const pair_slot *p = pair_map_get(&t->merges, s->sym[c.pos], s->sym[r]);
        if (!p || p->id != c.id) continue;
        s->sym[c.pos] = c.id;
        s->alive[r] = 0;
        s->next[c.pos] = s->next[r];
        if (s->next[r] >= 0) s->prev[s->next[r]] = c.pos;
        int32_t l = s->prev[c.pos];
        if (l >= 0) {
            p = pair_map_get(&t->merges, s->sym[l], s->sym[c.pos]);
            if (p && !heap_push(s, (merge_cand){p->rank, l, p->id})) return false;
        }
        if (s->next[c.pos] >= 0) {
            p = pair_map_get(&t->merges, s->sym[c.pos], s->sym[s->next[c.pos]]);
            if (p && !heap_push(s, (merge_cand){p->rank, c.pos, p->id})) return false;
        }
    }
    for (int32_t i = 0; i >= 0; i = s->next[i])
        if (!ids_push(out, s->sym[i])) return false;
    return true;
}

/* A piece of text: [off, off + len) of the arena. */
typedef struct piece {
    size_t off, len;
} piece;

typedef struct piece_list {
    piece *p;
    size_t n, cap;
} piece_list;

static bool piece_push(piece_list *l, size_t off, size_t len)
{
    if (!len) return true;
    if (rkv_grow_size((void **)&l->p, &l->cap, l->n + 1, sizeof *l->p)) return false;
    l->p[l->n++] = (piece){off, len};
    return true;
}

typedef struct enc_ctx {
    const tokenizer *t;
    bytes_buf arena;
    piece_list a, b;
    bpe_scratch bpe;
    pcre2_match_data *md;
    bytes_buf norm;
    char *err;
    size_t errlen;
} enc_ctx;

/* Splits every piece of in at the regex's matches (Isolated: the matches
 * and the text between them are all pieces) into out. */
static rkv_status split_regex(enc_ctx *e, const pcre2_code *re, const piece_list *in,
                              piece_list *out)
{
    out->n = 0;
    for (size_t i = 0; i < in->n; i++) {
        const char *s = e->arena.p + in->p[i].off;
        size_t n = in->p[i].len, at = 0, last = 0;
        while (at <= n) {
            int rc = pcre2_match(re, (PCRE2_SPTR)s, n, at, PCRE2_NO_UTF_CHECK, e->md, NULL);
            if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
                rc = pcre2_match(re, (PCRE2_SPTR)s, n, at, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, e->md,
                                 NULL);
            if (rc == PCRE2_ERROR_NOMATCH) break;
            if (rc < 0) {
                PCRE2_UCHAR msg[120];
                pcre2_get_error_message(rc, msg, sizeof msg);
                return rkv_fail(RKV_EINVAL, e->err, e->errlen,
                                "pre-tokenizer regex failed at byte %zu: %s", at, (char *)msg);
            }
            PCRE2_SIZE *ov = pcre2_get_ovector_pointer(e->md);
            size_t ms = ov[0], me = ov[1];
            if (me == ms) { /* an empty match splits nothing: step one character on */
                if (ms >= n) break;
                at = ms + (size_t)utf8_step((const uint8_t *)s + ms, n - ms);
                continue;
            }
            if (!piece_push(out, in->p[i].off + last, ms - last) ||
                !piece_push(out, in->p[i].off + ms, me - ms))
                return rkv_fail(RKV_ENOMEM, e->err, e->errlen, "out of memory");
            last = at = me;
        }
        if (!piece_push(out, in->p[i].off + last, n - last))
            return rkv_fail(RKV_ENOMEM, e->err, e->errlen, "out of memory");
    }
    return RKV_OK;
}

/* Normalized text of one segment -> pre-tokenizer -> BPE, appended to out. */
static rkv_status encode_plain(enc_ctx *e, const char *s, size_t n, ids_buf *out)
{
    const tokenizer *t = e->t;
    e->arena.n = 0;
    if (!buf_put(&e->arena, s, n)) return rkv_fail(RKV_ENOMEM, e->err, e->errlen, "out of memory");
    e->a.n = 0;
    if (!piece_push(&e->a, 0, n)) return rkv_fail(RKV_ENOMEM, e->err, e->errlen, "out of memory");
    piece_list *cur = &e->a, *nxt = &e->b;
    for (int k = 0; k < t->n_steps; k++) {
        const pre_step *st = &t->steps[k];
        if (st->byte_level && st->add_prefix_space) {
            for (size_t i = 0; i < cur->n; i++) {
                if (e->arena.p[cur->p[i].off] == ' ') continue;
                size_t off = e->arena.n;
                if (!buf_reserve(&e->arena, cur->p[i].len + 1))
                    return rkv_fail(RKV_ENOMEM, e->err, e->errlen, "out of memory");
                e->arena.p[e->arena.n++] = ' ';
                memcpy(e->arena.p + e->arena.n, e->arena.p + cur->p[i].off, cur->p[i].len);
                e->arena.n += cur->p[i].len;
                cur->p[i].off = off;
                cur->p[i].len++;
            }
        }
        if (st->re) {
            rkv_status r = split_regex(e, st->re, cur, nxt);
            if (r) return r;
            piece_list *tmp = cur;
            cur = nxt;
            nxt = tmp;
        }
    }
    for (size_t i = 0; i < cur->n; i++)
        if (!bpe_word(t, (const uint8_t *)e->arena.p + cur->p[i].off, cur->p[i].len, &e->bpe, out))
            return rkv_fail(RKV_ENOMEM, e->err, e->errlen, "out of memory");
    return RKV_OK;
}

/* NFC of s into e->norm (ICU, through UTF-16). */
static rkv_status nfc(enc_ctx *e, const char *s, size_t n, const char **res, size_t *rn)
{
    bool ascii = true;
    for (size_t i = 0; i < n && ascii; i++) ascii = (uint8_t)s[i] < 0x80;
    if (ascii || n > INT32_MAX / 4) {
        *res = s;
        *rn = n;
        return RKV_OK;
    }
    UErrorCode ue = U_ZERO_ERROR;
    const UNormalizer2 *nf = unorm2_getNFCInstance(&ue);
    int32_t cap16 = (int32_t)n + 1;
    UChar *u = malloc((size_t)cap16 * sizeof *u), *v = NULL;
    rkv_status st = RKV_OK;
    if (!u) return rkv_fail(RKV_ENOMEM, e->err, e->errlen, "out of memory");
    int32_t n16 = 0;
    u_strFromUTF8(u, cap16, &n16, s, (int32_t)n, &ue);
    int32_t capv = n16 * 3 + 16;
    v = malloc((size_t)capv * sizeof *v);
    if (!v) {
        st = rkv_fail(RKV_ENOMEM, e->err, e->errlen, "out of memory");
        goto done;
    }
    int32_t nv = U_SUCCESS(ue) ? unorm2_normalize(nf, u, n16, v, capv, &ue) : 0;
    e->norm.n = 0;
    if (U_SUCCESS(ue) && buf_reserve(&e->norm, (size_t)nv * 3 + 1)) {
        int32_t n8 = 0;
        u_strToUTF8(e->norm.p, (int32_t)e->norm.cap, &n8, v, nv, &ue);
        e->norm.n = (size_t)n8;
    }
    if (U_FAILURE(ue))
        st = rkv_fail(RKV_EINVAL, e->err, e->errlen, "NFC normalization failed: %s",
                      u_errorName(ue));
    *res = e->norm.p;
    *rn = e->norm.n;
done:
    free(u);
    free(v);
    return st;
}

/* The longest added token of class cls at s[0..n), or -1. */
static int32_t added_at(const tokenizer *t, int cls, const char *s, size_t n)
{
    uint8_t b = (uint8_t)s[0];
    for (int32_t k = 0; k < t->n_first[cls][b]; k++) {
        const added_token *tk = &t->added[t->first[cls][b][k]];
        if (tk->len <= n && !memcmp(tk->content, s, tk->len)) return t->first[cls][b][k];
    }
    return -1;
}

/* Normalized segment: split at normalized added tokens, the rest encoded. */
static rkv_status encode_normalized(enc_ctx *e, const char *s, size_t n, ids_buf *out)
{
    size_t last = 0;
    bool any = false;
    for (int b = 0; b < 256 && !any; b++) any = e->t->n_first[1][b] > 0;
    if (any) {
        for (size_t i = 0; i < n;) {
            int32_t k = added_at(e->t, 1, s + i, n - i);
            if (k < 0) {
                i++;
                continue;
            }
            if (i > last) {
                rkv_status st = encode_plain(e, s + last, i - last, out);
                if (st) return st;
            }
            if (!ids_push(out, e->t->added[k].id))
                return rkv_fail(RKV_ENOMEM, e->err, e->errlen, "out of memory");
            i += e->t->added[k].len;
            last = i;
        }
    }
    return last < n ? encode_plain(e, s + last, n - last, out) : RKV_OK;
}

static rkv_status encode_segment(enc_ctx *e, const char *s, size_t n, ids_buf *out)
{
    const char *ns = s;
    size_t nn = n;
    if (e->t->nfc) {
        rkv_status st = nfc(e, s, n, &ns, &nn);
        if (st) return st;
        /* encode_plain copies the text into its arena, so e->norm is free to reuse */
    }
    return encode_normalized(e, ns, nn, out);
}

rkv_status tokenizer_encode(const tokenizer *t, const char *text, size_t len,
                            bool add_special_tokens, int32_t **ids, size_t *n,
                            char *err, size_t errlen)
{
    *ids = NULL;
    *n = 0;
    size_t valid = utf8_valid_prefix((const uint8_t *)text, len);
    if (valid != len)
        return rkv_fail(RKV_EINVAL, err, errlen, "text is not valid UTF-8 at byte %zu", valid);
    enc_ctx e = {.t = t, .err = err, .errlen = errlen};
    ids_buf out = {0};
    rkv_status st = RKV_OK;
    /* any regex's match data fits them all: every pattern has few groups */
    for (int k = 0; k < t->n_steps && !e.md; k++)
        if (t->steps[k].re) e.md = pcre2_match_data_create(32, NULL);
    bool nomem = !e.md;
    if (add_special_tokens)
        for (size_t i = 0; i < t->n_prefix; i++) nomem |= !ids_push(&out, t->prefix[i]);
    if (nomem) {
        st = rkv_fail(RKV_ENOMEM, err, errlen, "out of memory");
        goto done;
    }
    /* added tokens matched on the raw text first (leftmost, then longest) */
    size_t last = 0;
    for (size_t i = 0; i < len;) {
        int32_t k = added_at(t, 0, text + i, len - i);
        if (k < 0) {
            i++;
            continue;
        }
        if (i > last && (st = encode_segment(&e, text + last, i - last, &out))) goto done;
        if (!ids_push(&out, t->added[k].id)) {
            st = rkv_fail(RKV_ENOMEM, err, errlen, "out of memory");
            goto done;
        }
        i += t->added[k].len;
        last = i;
    }
    if (last < len && (st = encode_segment(&e, text + last, len - last, &out))) goto done;
    if (add_special_tokens)
        for (size_t i = 0; i < t->n_suffix; i++)
            if (!ids_push(&out, t->suffix[i])) {
                st = rkv_fail(RKV_ENOMEM, err, errlen, "out of memory");
                goto done;
            }
done:
    pcre2_match_data_free(e.md);
    free(e.arena.p);
    free(e.a.p);
    free(e.b.p);
    free(e.norm.p);
    scratch_free(&e.bpe);
    if (st) {
        free(out.p);
        return st;
    }
    if (!out.p) out.p = malloc(sizeof(int32_t)); /* a valid pointer even for no ids */
    if (!out.p) return rkv_fail(RKV_ENOMEM, err, errlen, "out of memory");
    *ids = out.p;
    *n = out.n;
    return RKV_OK;
}

/* ------------------------------------------------------------- decoding */

rkv_status tokenizer_decode(const tokenizer *t, const int32_t *ids, size_t n,
                            bool skip_special_tokens, char **text, size_t *len,
                            char *err, size_t errlen)
{
    *text = NULL;
    bytes_buf b = {0};
    for (size_t i = 0; i < n; i++) {
        int32_t id = ids[i];
        if (id < 0 || id >= t->n_ids) {
            free(b.p);
            return rkv_fail(RKV_ERANGE, err, errlen,
                            "token %zu: id %d is outside the vocabulary [0, %d)", i, (int)id,
                            (int)t->n_ids);
        }
        if (!t->tok[id] || (skip_special_tokens && t->special[id])) continue;
        if (!buf_put(&b, t->dec[id], t->dec_len[id])) {
            free(b.p);
            return rkv_fail(RKV_ENOMEM, err, errlen, "out of memory");
        }
    }
    *text = utf8_repair((const uint8_t *)(b.p ? b.p : ""), b.n, len);
    free(b.p);
    if (!*text) return rkv_fail(RKV_ENOMEM, err, errlen, "out of memory");
    return RKV_OK;
}

const uint8_t *tokenizer_token_bytes(const tokenizer *t, int32_t id, size_t *len, bool *special)
{
    if (id < 0 || id >= t->n_ids || !t->tok[id]) return NULL;
    *len = t->dec_len[id];
    if (special) *special = t->special[id];
    return t->dec[id];
}

int32_t tokenizer_vocab_size(const tokenizer *t) { return t->n_ids; }

int32_t tokenizer_token_id(const tokenizer *t, const char *token)
{
    size_t n = strlen(token);
    int32_t id = str_map_get(&t->added_map, token, n);
    return id >= 0 ? id : str_map_get(&t->vocab, token, n);
}

const char *tokenizer_chat_template(const tokenizer *t) { return t->chat_template; }
const char *tokenizer_bos_token(const tokenizer *t) { return t->bos_token; }
const char *tokenizer_eos_token(const tokenizer *t) { return t->eos_token; }
