/* pin_file.c - see pin_file.h. */
#include "pin_file.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backend.h"
#include "trace.h"

enum { PIN_CHUNK = 2048 };

/* cache_pin_fill_fn over a backend: one sequence, no sampling, in chunks. */
static rkv_status fill_backend(void *ctx, const int32_t *tokens, int32_t n, const int32_t *pages,
                               int32_t cached_len)
{
    backend *be = ctx;
    const int32_t P = be->page_size;
    if (n > be->max_context) return RKV_ERANGE;
    int32_t max_pages = (n + P - 1) / P;
    int32_t *pos = malloc(sizeof(int32_t) * PIN_CHUNK);
    int32_t *slots = malloc(sizeof(int32_t) * PIN_CHUNK);
    rkv_status st = pos && slots ? RKV_OK : RKV_ENOMEM;
    for (int32_t q0 = cached_len; st == RKV_OK && q0 < n; q0 += PIN_CHUNK) {
        int32_t t = n - q0 < PIN_CHUNK ? n - q0 : PIN_CHUNK;
        for (int32_t r = 0; r < t; r++) {
            pos[r] = q0 + r;
            slots[r] = pages[(q0 + r) / P] * P + (q0 + r) % P;
        }
        int32_t q_starts[2] = {0, t}, prefix = q0, sample = -1, step = 0, out = 0;
        sampling_params sp = {0};
        fwd_batch b = {
            .num_seqs = 1, .num_tokens = t, .token_ids = tokens + q0, .positions = pos,
            .q_starts = q_starts, .prefix_lens = &prefix, .page_table = pages,
            .max_pages = max_pages, .slot_mapping = slots, .sample_rows = &sample,
            .sampling = &sp, .sample_steps = &step,
        };
        double secs = 0;
        st = be->ops->forward(be, &b, &out, NULL, &secs);
    }
    free(pos);
    free(slots);
    return st;
}

/* One line, {"tokens": [...]} or [...], into toks[0..*n) (grown as needed);
 * token ids in [0, vocab_size) (any int32 >= 0 when vocab_size <= 0). */
static rkv_status parse_pin_line(const char *path, int64_t lineno, const char *s,
                                 int32_t vocab_size, int32_t **toks, size_t *toks_cap, size_t *n,
                                 char *err, size_t errlen)
{
    const int64_t hi = vocab_size > 0 ? vocab_size : INT32_MAX;
    json_error_t je;
    /* A key given twice is refused, as in traces (which "tokens" was meant?). */
    json_t *v = json_loads(s, JSON_DISABLE_EOF_CHECK | JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &je);
    json_t *arr = v && json_is_object(v) ? json_object_get(v, "tokens") : v;
    if (!v || !json_is_array(arr)) {
        snprintf(err, errlen, "%s:%lld: expected {\"tokens\": [...]} or [...]%s%s", path,
                 (long long)lineno, v ? "" : ": ", v ? "" : je.text);
        json_decref(v);
        return RKV_EPARSE;
    }
    *n = json_array_size(arr);
    if (*n > (size_t)INT32_MAX) *n = INT32_MAX;
    if (*n > *toks_cap) {
        /* exact: the line's length is known, the buffer serves the next line */
        int32_t *t = realloc(*toks, sizeof *t * *n);
        if (!t) {
            json_decref(v);
            snprintf(err, errlen, "%s:%lld: out of host memory", path, (long long)lineno);
            return RKV_ENOMEM;
        }
        *toks = t;
        *toks_cap = *n;
    }
    rkv_status st = RKV_OK;
    for (size_t i = 0; i < *n && st == RKV_OK; i++) {
        json_t *x = json_array_get(arr, i);
        if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) >= hi) {
            snprintf(err, errlen, "%s:%lld: token %zu must be an integer in [0, %lld)", path,
                     (long long)lineno, i, (long long)hi);
            st = vocab_size > 0 && json_is_integer(x) ? RKV_ERANGE : RKV_EPARSE;
        } else {
            (*toks)[i] = (int32_t)json_integer_value(x);
        }
    }
    json_decref(v);
    return st;
}

rkv_status pin_file_apply(cache *c, backend *be, const char *path, int32_t vocab_size,
                          cache_pins *pins, pin_file_stats *stats, char *err, size_t errlen)
{
    memset(stats, 0, sizeof *stats);
    if (be) {
        pins->fill = fill_backend;
        pins->fill_ctx = be;
    }
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "%s: cannot read: %s", path, strerror(errno));
        return RKV_EIO;
    }
    /* fopen takes a directory; say so instead of a bare read error later. */
    struct stat sb;
    if (fstat(fileno(f), &sb) == 0 && S_ISDIR(sb.st_mode)) {
        snprintf(err, errlen, "%s: cannot read: %s", path, strerror(EISDIR));
        fclose(f);
        return RKV_EIO;
    }
    char *line = NULL;
    size_t cap = 0, toks_cap = 0, n = 0;
    int32_t *toks = NULL;
    rkv_status st = RKV_OK;
    int64_t lineno = 0;
    ssize_t len;
    while ((errno = 0, len = getline(&line, &cap, f)) >= 0) {
        lineno++;
        const char *s = line + (lineno == 1 ? trace_bom_len(line, (size_t)len) : 0);
        s += strspn(s, " \t\r\n");
        if (!*s) continue;
        if ((st = parse_pin_line(path, lineno, s, vocab_size, &toks, &toks_cap, &n, err, errlen)))
            break;
        int32_t pinned = 0;
        char why[256];
        if (be && (int64_t)n > be->max_context) {
            snprintf(err, errlen, "%s:%lld: a prefix of %zu tokens is longer than the model's context (%d)",
                     path, (long long)lineno, n, be->max_context);
            st = RKV_ERANGE;
            break;
        }
        if ((st = cache_pin(c, pins, toks, (int32_t)n, 0, &pinned, why, sizeof why)) != RKV_OK) {
            snprintf(err, errlen, "%s:%lld: %s", path, (long long)lineno, why);
            break;
        }
        stats->prefixes++;
        stats->tokens += (int64_t)n - (int64_t)n % c->page_size;
        stats->cut_tokens += (int64_t)n % c->page_size;
    }
    if (st == RKV_OK && ferror(f)) {
        snprintf(err, errlen, "%s:%lld: read error: %s", path, (long long)lineno + 1,
                 strerror(errno ? errno : EIO));
        st = RKV_EIO;
    }
    free(line);
    free(toks);
    fclose(f);
    return st;
}
