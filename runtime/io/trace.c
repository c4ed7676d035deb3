/* trace.c - see trace.h. */
#include "trace.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <xxhash.h>

#include "rkv_core.h"

struct trace_reader {
    FILE *f;
    bool own_file;     /* false for stdin */
    char *path;        /* for messages */
    char *buf;         /* getline buffer, reused */
    size_t buf_cap;
    int64_t line;      /* lines read so far */
    int64_t index;     /* requests returned so far */
    int64_t offset;    /* bytes read so far */
    int64_t size;      /* file size, 0 if unknown */
    trace_options opt;
    trace_format format;
};

void trace_request_init(trace_request *r) { memset(r, 0, sizeof *r); }

void trace_request_free(trace_request *r)
{
    free(r->tokens);
    free(r->hash_ids);
    free(r->id_json);
    memset(r, 0, sizeof *r);
}

rkv_status trace_open(const char *path, const trace_options *opt, trace_reader **out,
                      char *err, size_t errlen)
{
    *out = NULL;
    trace_options o = {TRACE_FORMAT_AUTO, TRACE_TOKENS_BLOCK, 0, NULL};
    if (opt) o = *opt;
    if (o.tokens == TRACE_TOKENS_VOCAB && o.vocab_size < 1) {
        rkv_set_err(err, errlen, "%s: vocabulary size must be >= 1 (got %d)", path, o.vocab_size);
        return RKV_EINVAL;
    }
    trace_reader *r = calloc(1, sizeof *r);
    bool is_stdin = strcmp(path, "-") == 0;
    if (r) r->path = strdup(is_stdin ? "<stdin>" : path);
    if (!r || !r->path) {
        free(r);
        return rkv_fail(RKV_ENOMEM, err, errlen, "%s: out of host memory for the trace reader", path);
    }
    if (is_stdin) {
        r->f = stdin;
    } else {
        r->f = fopen(path, "r");
        if (!r->f) {
            rkv_set_err(err, errlen, "%s: cannot open: %s", path, strerror(errno));
            free(r->path);
            free(r);
            return RKV_EIO;
        }
        r->own_file = true;
        struct stat st;
        if (fstat(fileno(r->f), &st) == 0 && S_ISREG(st.st_mode)) r->size = st.st_size;
    }
    r->opt = o;
    r->format = o.format;
    *out = r;
    return RKV_OK;
}

void trace_close(trace_reader *r)
{
    if (!r) return;
    if (r->own_file) fclose(r->f);
    free(r->buf);
    free(r->path);
    free(r);
}

trace_format trace_reader_format(const trace_reader *r) { return r->format; }
int64_t trace_reader_offset(const trace_reader *r) { return r->offset; }
int64_t trace_reader_size(const trace_reader *r) { return r->size; }
const char *trace_reader_path(const trace_reader *r) { return r->path; }

int32_t trace_vocab_token(int64_t h, int32_t j, int32_t vocab_size)
{
    /* splitmix64 over a unique 64-bit key per (h, j): whole blocks
     * land on unrelated ids, unlike (h*512 + j) mod V, which folds block h onto
     * block h + V/512 whenever 512 divides V. */
    uint64_t x = rkv_splitmix64((uint64_t)h * TRACE_MOONCAKE_BLOCK + (uint64_t)j);
    return (int32_t)(x % (uint64_t)vocab_size);
}

uint64_t trace_namespace_id(const char *name, size_t len)
{
    if (!name || len == 0) return 0;
    /* A fixed seed keeps ids equal across processes and builds; 0 is the
     * default namespace, so a name hashing to 0 moves to 1. */
    uint64_t h = XXH3_64bits_withSeed(name, len, 0x6e616d6573706163ull);
    return h ? h : 1;
}

static const char *json_type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a real number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
    }
    return "unknown";
}

#define FAIL(...)                                                        \
    do {                                                                 \
        char msg_[256];                                                  \
        snprintf(msg_, sizeof msg_, __VA_ARGS__);                        \
        rkv_set_err(err, errlen, "%s:%" PRId64 ": %s", r->path, r->line, msg_); \
        return RKV_EPARSE;                                               \
    } while (0)

static rkv_status grow_tokens(trace_request *q, int64_t n)
{
    if (n > INT32_MAX) return RKV_ERANGE;
    return rkv_grow32((void **)&q->tokens, &q->tok_cap, n, sizeof *q->tokens);
}

static rkv_status set_id(trace_request *q, const char *text)
{
    size_t n = strlen(text) + 1;
    if ((int64_t)n > q->id_cap) {
        char *s = realloc(q->id_json, n);
        if (!s) return RKV_ENOMEM;
        q->id_json = s;
        q->id_cap = (int32_t)n;
    }
    memcpy(q->id_json, text, n);
    return RKV_OK;
}

/* Optional non-negative integer field; *out untouched when absent. */
static rkv_status opt_int(trace_reader *r, json_t *o, const char *key, int64_t max, int64_t *out,
                          char *err, size_t errlen)
{
    json_t *v = json_object_get(o, key);
    if (!v) return RKV_OK;
    if (!json_is_integer(v)) FAIL("\"%s\" must be an integer, got %s", key, json_type_name(v));
    json_int_t x = json_integer_value(v);
    if (x < 0 || x > max) FAIL("\"%s\" out of range (%lld)", key, (long long)x);
    *out = x;
    return RKV_OK;
}

/* Optional non-negative number field. */
static rkv_status opt_num(trace_reader *r, json_t *o, const char *key, double max, double *out,
                          char *err, size_t errlen)
{
    json_t *v = json_object_get(o, key);
    if (!v) return RKV_OK;
    if (!json_is_number(v)) FAIL("\"%s\" must be a number, got %s", key, json_type_name(v));
    double x = json_number_value(v);
    if (!(x >= 0 && x <= max)) FAIL("\"%s\" out of range (%g)", key, x);
    *out = x;
    return RKV_OK;
}

/* The fields each format reads (trace.h); any other is refused. */
static const char *const jsonl_fields[] = {"id", "tokens", "step", "max_tokens", "arrival",
                                           "temperature", "top_p", "top_k", "seed", "priority",
                                           "namespace", NULL};
static const char *const mooncake_fields[] = {"timestamp", "input_length", "output_length",
                                              "hash_ids", "namespace", NULL};

static rkv_status known_fields(trace_reader *r, json_t *o, const char *const *fields,
                               const char *format, char *err, size_t errlen)
{
    const char *key;
    json_t *v;
    json_object_foreach(o, key, v) {
        bool ok = false;
        for (int i = 0; fields[i] && !ok; i++) ok = strcmp(key, fields[i]) == 0;
        if (ok) continue;
        char list[160];
        size_t used = 0;
        for (int i = 0; fields[i] && used < sizeof list; i++)
            used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "", fields[i]);
        FAIL("unknown field \"%.60s\" (a %s line has: %s)", key, format, list);
    }
    return RKV_OK;
}

/* "namespace", else the reader's default (trace.h). */
static rkv_status parse_namespace(trace_reader *r, json_t *o, trace_request *q, char *err,
                                  size_t errlen)
{
    json_t *v = json_object_get(o, "namespace");
    if (!v) {
        const char *d = r->opt.namespace_name;
        q->ns = trace_namespace_id(d, d ? strlen(d) : 0);
        return RKV_OK;
    }
    if (!json_is_string(v)) FAIL("\"namespace\" must be a string, got %s", json_type_name(v));
    q->ns = trace_namespace_id(json_string_value(v), json_string_length(v));
    return RKV_OK;
}

static rkv_status parse_jsonl(trace_reader *r, json_t *o, trace_request *q, char *err,
                              size_t errlen)
{
    rkv_status st = known_fields(r, o, jsonl_fields, "JSON Lines trace", err, errlen);
    if (st != RKV_OK) return st;
    json_t *id = json_object_get(o, "id");
    if (!id) FAIL("missing field \"id\"");
    if (json_is_integer(id)) {
        char b[32];
        q->id_is_int = true;
        q->id_int = json_integer_value(id);
        snprintf(b, sizeof b, "%lld", (long long)q->id_int);
        if ((st = set_id(q, b)) != RKV_OK) return st;
    } else if (json_is_string(id)) {
        q->id_is_int = false;
        char *s = json_dumps(id, JSON_ENCODE_ANY);
        if (!s) return RKV_ENOMEM;
        st = set_id(q, s);
        free(s);
        if (st != RKV_OK) return st;
    } else {
        FAIL("\"id\" must be an integer or a string, got %s", json_type_name(id));
    }

    json_t *toks = json_object_get(o, "tokens");
    if (!toks) FAIL("missing field \"tokens\"");
    if (!json_is_array(toks)) FAIL("\"tokens\" must be an array of integers, got %s",
                                   json_type_name(toks));
    size_t n = json_array_size(toks);
    if (n == 0) FAIL("\"tokens\" is empty (a request needs at least one token)");
    if ((st = grow_tokens(q, (int64_t)n)) != RKV_OK) {
        if (st == RKV_ERANGE) FAIL("too many tokens (%zu)", n);
        return st;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *t = json_array_get(toks, i);
        if (!json_is_integer(t)) FAIL("token %zu is not an integer (%s)", i, json_type_name(t));
        json_int_t v = json_integer_value(t);
        if (v < 0) FAIL("token %zu is negative (%lld)", i, (long long)v);
        if (v > INT32_MAX) FAIL("token %zu is out of range (%lld > %d)", i, (long long)v, INT32_MAX);
        q->tokens[i] = (int32_t)v;
    }
    q->n_tokens = (int32_t)n;

    int64_t x = -1;
    if ((st = opt_int(r, o, "step", INT64_MAX, &x, err, errlen)) != RKV_OK) return st;
    q->has_step = x >= 0;
    q->step = q->has_step ? x : q->index;
    x = -1;
    if ((st = opt_int(r, o, "max_tokens", INT32_MAX, &x, err, errlen)) != RKV_OK) return st;
    if (x == 0) FAIL("\"max_tokens\" must be >= 1 (got 0)");
    q->max_tokens = (int32_t)x;
    x = -1;
    if ((st = opt_int(r, o, "top_k", INT32_MAX, &x, err, errlen)) != RKV_OK) return st;
    q->top_k = (int32_t)x;
    if ((st = opt_int(r, o, "seed", INT64_MAX, &q->seed, err, errlen)) != RKV_OK) return st;
    if ((st = opt_num(r, o, "arrival", 1e18, &q->arrival, err, errlen)) != RKV_OK) return st;
    if ((st = opt_num(r, o, "temperature", 1e6, &q->temperature, err, errlen)) != RKV_OK) return st;
    if ((st = opt_num(r, o, "top_p", 1.0, &q->top_p, err, errlen)) != RKV_OK) return st;
    /* Signed, unlike the fields above: priorities below the default are allowed. */
    json_t *pv = json_object_get(o, "priority");
    if (pv) {
        if (!json_is_integer(pv)) FAIL("\"priority\" must be an integer, got %s", json_type_name(pv));
        json_int_t p = json_integer_value(pv);
        if (p < INT32_MIN || p > INT32_MAX) FAIL("\"priority\" out of range (%lld)", (long long)p);
        q->priority = (int32_t)p;
    }
    return parse_namespace(r, o, q, err, errlen);
}

static rkv_status parse_mooncake(trace_reader *r, json_t *o, trace_request *q, char *err,
                                 size_t errlen)
{
    rkv_status st = known_fields(r, o, mooncake_fields, "Mooncake trace", err, errlen);
    if (st != RKV_OK) return st;
    for (size_t i = 0; i < 4; i++) /* the first four are required */
        if (!json_object_get(o, mooncake_fields[i]))
            FAIL("missing field \"%s\" (Mooncake format)", mooncake_fields[i]);
    if ((st = parse_namespace(r, o, q, err, errlen)) != RKV_OK) return st;
    double ts = -1;
    if ((st = opt_num(r, o, "timestamp", 1e18, &ts, err, errlen)) != RKV_OK) return st;
    int64_t in_len = 0, out_len = 0;
    if ((st = opt_int(r, o, "input_length", INT32_MAX, &in_len, err, errlen)) != RKV_OK) return st;
    if ((st = opt_int(r, o, "output_length", INT32_MAX, &out_len, err, errlen)) != RKV_OK) return st;
    if (in_len < 1) FAIL("\"input_length\" must be >= 1");
    /* run cannot serve a request that produces nothing; cache-sim refuses it too,
     * so both commands accept the same traces. */
    if (out_len < 1) FAIL("\"output_length\" must be >= 1 (got %lld)", (long long)out_len);
    json_t *ids = json_object_get(o, "hash_ids");
    if (!json_is_array(ids)) FAIL("\"hash_ids\" must be an array of integers, got %s",
                                  json_type_name(ids));
    size_t n = json_array_size(ids);
    if (n == 0) FAIL("\"hash_ids\" is empty");
    if ((int64_t)n > q->hash_cap) {
        /* exact: the array's length is known, the buffer serves the next line */
        int64_t *h = realloc(q->hash_ids, sizeof(int64_t) * n);
        if (!h) return RKV_ENOMEM;
        q->hash_ids = h;
        q->hash_cap = (int32_t)n;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *h = json_array_get(ids, i);
        if (!json_is_integer(h)) FAIL("hash id %zu is not an integer (%s)", i, json_type_name(h));
        json_int_t v = json_integer_value(h);
        if (v < 0) FAIL("hash id %zu is negative (%lld)", i, (long long)v);
        /* Compared before any multiplication: h * 512 overflows int64 from 2^54. */
        if (r->opt.tokens == TRACE_TOKENS_BLOCK
            && v > ((json_int_t)INT32_MAX - (TRACE_MOONCAKE_BLOCK - 1)) / TRACE_MOONCAKE_BLOCK)
            FAIL("hash id %zu is too large for block tokens (%lld)", i, (long long)v);
        /* Vocabulary tokens mix the key h * 512 + j, kept within int64 (h < 2^54):
         * from 2^55 on it would wrap onto smaller ids' blocks (2^55 onto block 0)
         * and fake cache hits. */
        if (v > (json_int_t)((INT64_MAX - (TRACE_MOONCAKE_BLOCK - 1)) / TRACE_MOONCAKE_BLOCK))
            FAIL("hash id %zu is too large (%lld >= 2^54)", i, (long long)v);
        q->hash_ids[i] = v;
    }
    q->n_hash_ids = (int32_t)n;
    if (in_len > (int64_t)n * TRACE_MOONCAKE_BLOCK || in_len <= ((int64_t)n - 1) * TRACE_MOONCAKE_BLOCK)
        FAIL("input_length %lld does not fit %zu blocks of %d tokens", (long long)in_len, n,
             TRACE_MOONCAKE_BLOCK);
    if ((st = grow_tokens(q, in_len)) != RKV_OK) return st;
    /* Block i contributes 512 tokens, the last one only what input_length leaves. */
    int32_t k = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t m = (int32_t)(in_len - (int64_t)i * TRACE_MOONCAKE_BLOCK);
        if (m > TRACE_MOONCAKE_BLOCK) m = TRACE_MOONCAKE_BLOCK;
        int64_t h = q->hash_ids[i];
        if (r->opt.tokens == TRACE_TOKENS_BLOCK) {
            int32_t base = (int32_t)trace_block_token(h, 0);
            for (int32_t j = 0; j < m; j++) q->tokens[k++] = base + j;
        } else {
            for (int32_t j = 0; j < m; j++) q->tokens[k++] = trace_vocab_token(h, j, r->opt.vocab_size);
        }
    }
    q->n_tokens = k;
    char b[32];
    snprintf(b, sizeof b, "%" PRId64, q->index);
    if ((st = set_id(q, b)) != RKV_OK) return st;
    q->id_is_int = true;
    q->id_int = q->index;
    q->has_step = true;
    q->step = q->index;
    q->max_tokens = (int32_t)out_len;
    q->arrival = ts / 1000.0;
    return RKV_OK;
}

static bool blank(const char *s, ssize_t n)
{
    for (ssize_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\n' && s[i] != '\r') return false;
    return true;
}

rkv_status trace_next(trace_reader *r, trace_request *q, bool *eof, char *err, size_t errlen)
{
    *eof = false;
    ssize_t len;
    for (;;) {
        errno = 0;
        len = getline(&r->buf, &r->buf_cap, r->f);
        if (len < 0) {
            if (ferror(r->f)) {
                rkv_set_err(err, errlen, "%s:%" PRId64 ": read error: %s", r->path, r->line + 1,
                        strerror(errno ? errno : EIO));
                return RKV_EIO;
            }
            *eof = true;
            return RKV_OK;
        }
        r->line++;
        r->offset += len;
        if (r->line == 1 && trace_bom_len(r->buf, (size_t)len)) {
            len -= 3;
            memmove(r->buf, r->buf + 3, (size_t)len + 1);
        }
        if (!blank(r->buf, len)) break;
    }
    json_error_t je;
    /* A key given twice is refused (jansson would keep the last silently),
     * as the profile reader does: which of two namespaces was meant? */
    json_t *o = json_loadb(r->buf, (size_t)len, JSON_REJECT_DUPLICATES, &je);
    if (!o && !strncmp(je.text, "duplicate object key", 20))
        FAIL("a field given twice: %s (column %d)", je.text, je.column);
    if (!o) FAIL("bad JSON: %s (column %d)", je.text, je.column);
    q->line = r->line;
    q->index = r->index;
    q->max_tokens = -1;
    q->arrival = q->temperature = q->top_p = -1;
    q->top_k = -1;
    q->seed = -1;
    q->priority = 0;
    q->ns = 0;
    q->n_hash_ids = 0;
    q->n_tokens = 0;
    rkv_status st;
    if (!json_is_object(o)) {
        const char *tn = json_type_name(o);
        json_decref(o);
        FAIL("a request must be a JSON object, got %s", tn);
    }
    if (r->format == TRACE_FORMAT_AUTO)
        r->format = json_object_get(o, "hash_ids") ? TRACE_FORMAT_MOONCAKE : TRACE_FORMAT_JSONL;
    if (r->format == TRACE_FORMAT_MOONCAKE) st = parse_mooncake(r, o, q, err, errlen);
    else st = parse_jsonl(r, o, q, err, errlen);
    json_decref(o);
    if (st == RKV_ENOMEM)
        rkv_set_err(err, errlen, "%s:%" PRId64 ": out of host memory for the request", r->path, r->line);
    if (st != RKV_OK) return st;
    r->index++;
    return RKV_OK;
}
