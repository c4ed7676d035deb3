/* serve_http.c - the HTTP side of `radixkv serve`: libmicrohttpd does the
 * protocol, jansson the JSON; this file checks requests, hands jobs to the
 * engine thread and writes answers (one JSON body, or server-sent events).
 *
 * A connection waiting for the engine is suspended (MHD_suspend_connection,
 * from the access handler or the stream's reader, with s->mu held) and the
 * engine thread resumes it when there is something to write; holding s->mu
 * across both makes a resume always follow its suspend.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <jansson.h>
#include <microhttpd.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "rkv_config.h"
#include "rkv_core.h"
#include "serve.h"
#include "serve_http.h"
#include "serve_text.h"

/* Per HTTP request. */
typedef struct conn_ctx {
    serve *s;
    char *body;
    size_t len, cap;
    bool too_big;
    bool oom;                  /* the body could not be kept: 500 at its end */
    bool answered;             /* refused from its headers: the rest is ignored */
    serve_job *job;            /* non-stream: waiting for the engine (a reference) */
    bool chat;                 /* the body is a chat request rewritten (serve_text.h) */
    /* A /v1/completions body of ASYNC_PARSE_BYTES or more is parsed on a
     * thread of its own while the connection is suspended, so that the HTTP
     * thread goes on serving other clients: */
    int parse;                 /* PARSE_INLINE, _RUNNING, _DONE */
    serve_job *parsed;         /* _DONE: the job, or NULL with why in pbad/pjerr */
    bool pmalformed;           /* _DONE: the body is not JSON (pjerr) */
    json_error_t pjerr;
    struct bad *pbad;          /* malloc'd with the thread */
    struct MHD_Connection *conn;
} conn_ctx;

enum { PARSE_INLINE = 0, PARSE_RUNNING, PARSE_DONE };
/* Parsing a body costs about 0.1-0.25 s per MB of token ids on a loaded core
 * (jansson makes a value per number); below this size inline is cheaper than
 * a thread. */
enum { ASYNC_PARSE_BYTES = 256 << 10 };

/* Per streaming response (owns the HTTP side's reference to the job). */
typedef struct stream_ctx {
    serve *s;
    serve_job *job;
} stream_ctx;

/* ---- answers ------------------------------------------------------------ */

/* Takes text (malloc'd). 503 and 429 say when to retry; allow: the methods a
 * 405 names. */
static enum MHD_Result send_text(struct MHD_Connection *c, unsigned status, const char *type,
                                 char *text, const char *allow)
{
    /* Out of memory building the answer: a body that needs none, so the
     * client still learns why (never a closed socket). */
    static const char oom[] = "{\"error\":{\"message\":\"out of memory\",\"type\":"
                              "\"InternalServerError\",\"param\":null,\"code\":500}}";
    struct MHD_Response *r =
        text ? MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE) : NULL;
    if (!r) {
        free(text);
        status = MHD_HTTP_INTERNAL_SERVER_ERROR;
        type = "application/json";
        r = MHD_create_response_from_buffer(sizeof oom - 1, (void *)oom, MHD_RESPMEM_PERSISTENT);
        if (!r) return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    if (status == 503 || status == 429) MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, "1");
    if (allow) MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, allow);
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result send_json(struct MHD_Connection *c, unsigned status, json_t *v)
{
    char *text = v ? json_dumps(v, JSON_COMPACT) : NULL;
    json_decref(v);
    return send_text(c, status, "application/json", text, NULL);
}

/* vLLM's error body: {"error": {"message", "type", "param", "code"}}, type
 * being the exception name vLLM's server gives that status. */
static const char *error_type(unsigned status)
{
    switch (status) {
    case 400: return "BadRequestError";
    case 404: return "NotFoundError";
    case 405: return "MethodNotAllowedError";
    case 413: return "RequestEntityTooLargeError";
    case 429: return "TooManyRequestsError";
    case 501: return "NotImplementedError";
    case 503: return "ServiceUnavailableError";
    default: return status >= 500 ? "InternalServerError" : "BadRequestError";
    }
}

static json_t *error_json(unsigned status, const char *param, const char *msg)
{
    return json_pack("{s:{s:s,s:s,s:s?,s:i}}", "error", "message", msg, "type",
                     error_type(status), "param", param, "code", (int)status);
}

static enum MHD_Result send_error_v(struct MHD_Connection *c, unsigned status, const char *param,
                                    const char *allow, const char *fmt, va_list ap)
{
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    json_t *v = error_json(status, param, msg);
    char *text = v ? json_dumps(v, JSON_COMPACT) : NULL;
    json_decref(v);
    return send_text(c, status, "application/json", text, allow);
}

static enum MHD_Result send_error(struct MHD_Connection *c, unsigned status, const char *param,
                                  const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static enum MHD_Result send_error(struct MHD_Connection *c, unsigned status, const char *param,
                                  const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    enum MHD_Result r = send_error_v(c, status, param, NULL, fmt, ap);
    va_end(ap);
    return r;
}

/* 405 with the Allow header naming what the path takes. */
static enum MHD_Result send_405(struct MHD_Connection *c, const char *allow, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static enum MHD_Result send_405(struct MHD_Connection *c, const char *allow, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    enum MHD_Result r = send_error_v(c, 405, NULL, allow, fmt, ap);
    va_end(ap);
    return r;
}

/* ---- checking a completion request -------------------------------------- */

struct bad {
    unsigned status;
    const char *param;
    char msg[400];
};
typedef struct bad bad;

static bool fail_param(bad *b, unsigned status, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static bool fail_param(bad *b, unsigned status, const char *param, const char *fmt, ...)
{
    b->status = status;
    b->param = param;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b->msg, sizeof b->msg, fmt, ap);
    va_end(ap);
    return false;
}

static const char *json_type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "a list";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a number";
    case JSON_TRUE: case JSON_FALSE: return "a boolean";
    default: return "null";
    }
}

/* Optional field: absent or null leaves *out alone. */
static bool get_int(json_t *o, const char *key, int64_t lo, int64_t hi, int64_t *out, bad *b)
{
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return true;
    if (!json_is_integer(v))
        return fail_param(b, 400, key, "%s: expected an integer, got %s", key, json_type_name(v));
    json_int_t x = json_integer_value(v);
    if (x < lo || x > hi)
        return fail_param(b, 400, key, "%s: %" JSON_INTEGER_FORMAT " is outside [%" PRId64 ", %" PRId64 "]",
                          key, x, lo, hi);
    *out = x;
    return true;
}

static bool get_num(json_t *o, const char *key, double lo, double hi, bool lo_open, double *out,
                    bad *b)
{
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return true;
    if (!json_is_number(v))
        return fail_param(b, 400, key, "%s: expected a number, got %s", key, json_type_name(v));
    double x = json_number_value(v);
    if (!(lo_open ? x > lo : x >= lo) || !(x <= hi))
        return fail_param(b, 400, key, "%s: %g is outside %s%g, %g]", key, x, lo_open ? "(" : "[",
                          lo, hi);
    *out = x;
    return true;
}

static bool get_bool(json_t *o, const char *key, bool *out, bad *b)
{
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return true;
    if (!json_is_boolean(v))
        return fail_param(b, 400, key, "%s: expected a boolean, got %s", key, json_type_name(v));
    *out = json_is_true(v);
    return true;
}

/* Decimal ids separated by white space (--tokenizer ids); errors name param
 * and where (the field and the element). */
static bool parse_text_ids(const serve *s, const char *text, const char *param, const char *where,
                           int32_t **out, int32_t *n, bad *b)
{
    size_t cap = strlen(text) / 2 + 1;
    int32_t *ids = malloc(sizeof(int32_t) * cap);
    if (!ids) return fail_param(b, 500, NULL, "out of memory");
    int32_t k = 0;
    const char *p = text;
    for (;;) {
        while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
        if (!*p) break;
        if (*p < '0' || *p > '9') {
            free(ids);
            return fail_param(b, 400, param,
                              "%s: character %td is not part of a token id (the ids "
                              "tokenizer reads decimal ids separated by spaces)", where, p - text);
        }
        /* The whole id is read (and quoted when too large), never a prefix. */
        const char *start = p;
        long long x = 0;
        while (*p >= '0' && *p <= '9') {
            if (x < s->vocab) x = x * 10 + (*p - '0');
            p++;
        }
        if (x >= s->vocab) {
            free(ids);
            return fail_param(b, 400, param,
                              "%s: token id %.*s at character %td is outside the vocabulary "
                              "[0, %d)", where, (int)(p - start > 40 ? 40 : p - start), start,
                              start - text, s->vocab);
        }
        ids[k++] = (int32_t)x;
    }
    *out = ids;
    *n = k;
    return true;
}

/* One prompt: a list of ids, or text with the ids tokenizer. */
static bool parse_one_prompt(const serve *s, const serve_job *j, json_t *v, const char *where,
                             int32_t **out, int32_t *n, bad *b)
{
    if (json_is_string(v) && s->cfg.tok) {
        /* --tokenizer DIR: the model's tokenizer, BOS/EOS as its post-processor adds them */
        char err[256];
        size_t m;
        if (tokenizer_encode(s->cfg.tok, json_string_value(v), json_string_length(v), true, out,
                             &m, err, sizeof err))
            return fail_param(b, 400, "prompt", "%s: %s", where, err);
        *n = (int32_t)m;
        for (int32_t i = 0; i < *n; i++)
            if ((*out)[i] >= s->vocab) {
                int32_t id = (*out)[i];
                free(*out);
                *out = NULL;
                return fail_param(b, 400, "prompt", "%s: token %d is id %d, outside the model's "
                                  "vocabulary [0, %d)", where, i, id, s->vocab);
            }
    } else if (json_is_string(v)) {
        if (!s->cfg.text_ids)
            return fail_param(b, 400, "prompt",
                              "%s: a text prompt needs a tokenizer and this server has none; send "
                              "token ids (a list of integers), or start it with --tokenizer ids",
                              where);
        if (!parse_text_ids(s, json_string_value(v), "prompt", where, out, n, b)) return false;
    } else if (json_is_array(v)) {
        size_t len = json_array_size(v);
        int32_t *ids = malloc(sizeof(int32_t) * (len ? len : 1));
        if (!ids) return fail_param(b, 500, NULL, "out of memory");
        for (size_t i = 0; i < len; i++) {
            json_t *t = json_array_get(v, i);
            if (!json_is_integer(t)) {
                free(ids);
                return fail_param(b, 400, "prompt", "%s[%zu]: expected an integer token id, got %s",
                                  where, i, json_type_name(t));
            }
            json_int_t x = json_integer_value(t);
            if (x < 0 || x >= s->vocab) {
                free(ids);
                return fail_param(b, 400, "prompt",
                                  "%s[%zu]: token id %" JSON_INTEGER_FORMAT
                                  " is outside the vocabulary [0, %d)", where, i, x, s->vocab);
            }
            ids[i] = (int32_t)x;
        }
        *out = ids;
        *n = (int32_t)len;
    } else {
        return fail_param(b, 400, "prompt", "%s: expected token ids (a list of integers), got %s",
                          where, json_type_name(v));
    }
    if (*n == 0) {
        free(*out);
        *out = NULL;
        return fail_param(b, 400, "prompt", "%s: empty", where);
    }
    /* truncate_prompt_tokens: vLLM keeps the last k (truncation_side left,
     * its default) or the first k, before the context is checked. */
    if (j->truncate > 0 && *n > j->truncate) {
        if (!j->truncate_right)
            memmove(*out, *out + (*n - j->truncate), sizeof(int32_t) * (size_t)j->truncate);
        *n = j->truncate;
    }
    if (*n > s->max_context) {
        free(*out);
        *out = NULL;
        return fail_param(b, 400, "prompt", "%s: %d tokens, longer than the model's context of %d",
                          where, *n, s->max_context);
    }
    return true;
}

/* The request's prompts into j->seq. */
static bool parse_prompts(const serve *s, json_t *req, serve_job *j, bad *b)
{
    json_t *p = json_object_get(req, "prompt");
    if (!p || json_is_null(p)) return fail_param(b, 400, "prompt", "prompt: missing");
    /* A list of prompts (lists or strings), or one prompt. */
    bool many = json_is_array(p) && json_array_size(p) > 0 &&
                (json_is_array(json_array_get(p, 0)) || json_is_string(json_array_get(p, 0)));
    size_t n = many ? json_array_size(p) : 1;
    if (n > 1024) return fail_param(b, 400, "prompt", "prompt: %zu prompts, at most 1024", n);
    j->seq = calloc(n, sizeof(serve_seq));
    if (!j->seq) return fail_param(b, 500, NULL, "out of memory");
    j->n_seq = (int32_t)n;
    for (size_t i = 0; i < n; i++) {
        char where[32];
        if (many) snprintf(where, sizeof where, "prompt[%zu]", i);
        else snprintf(where, sizeof where, "prompt");
        j->seq[i].eid = -1;
        j->seq[i].stop_reason = -1;
        j->seq[i].stop_str = -1;
        if (!parse_one_prompt(s, j, many ? json_array_get(p, i) : p, where, &j->seq[i].tokens,
                              &j->seq[i].n_tokens, b))
            return false;
    }
    return true;
}

/* n > 1: seq[i*n + k] is sample k of prompt i (OpenAI's choice order), each
 * with its own copy of the prompt. */
static bool expand_samples(serve_job *j, bad *b)
{
    const int32_t n = j->n_samples, np = j->n_seq;
    if (n == 1) return true;
    serve_seq *all = calloc((size_t)np * (size_t)n, sizeof *all);
    if (!all) return fail_param(b, 500, NULL, "out of memory");
    for (int32_t i = 0; i < np; i++)
        for (int32_t k = 0; k < n; k++) {
            all[i * n + k] = j->seq[i];
            all[i * n + k].sample = k;
            if (k) all[i * n + k].tokens = NULL;
        }
    free(j->seq); /* its prompts now belong to the samples 0 */
    j->seq = all;
    j->n_seq = np * n;
    for (int32_t i = 0; i < np; i++)
        for (int32_t k = 1; k < n; k++) {
            serve_seq *q = &all[i * n + k];
            if (!(q->tokens = malloc(sizeof(int32_t) * (size_t)q->n_tokens)))
                return fail_param(b, 500, NULL, "out of memory");
            memcpy(q->tokens, all[i * n].tokens, sizeof(int32_t) * (size_t)q->n_tokens);
        }
    return true;
}

/* One bad word's ids as vLLM's update_from_tokenizer encodes it: no special
 * tokens added; NULL *out (and true) when it encodes to nothing. */
static bool bad_word_encode(const serve *s, const char *text, size_t len, const char *where,
                            int32_t **out, int32_t *n, bad *b)
{
    *out = NULL;
    *n = 0;
    if (!s->cfg.tok) {
        char *z = strndup(text, len);
        if (!z) return fail_param(b, 500, NULL, "out of memory");
        bool ok = parse_text_ids(s, z, "bad_words", where, out, n, b);
        free(z);
        if (ok && !*n) {
            free(*out);
            *out = NULL;
        }
        return ok;
    }
    char err[256];
    size_t m;
    if (tokenizer_encode(s->cfg.tok, text, len, false, out, &m, err, sizeof err))
        return fail_param(b, 400, "bad_words", "%s: %s", where, err);
    *n = (int32_t)m;
    for (int32_t i = 0; i < *n; i++)
        if ((*out)[i] < 0 || (*out)[i] >= s->vocab) {
            int32_t id = (*out)[i];
            free(*out);
            *out = NULL;
            return fail_param(b, 400, "bad_words", "%s: token %d is id %d, outside the model's "
                              "vocabulary [0, %d)", where, i, id, s->vocab);
        }
    if (!*n) {
        free(*out);
        *out = NULL;
    }
    return true;
}

/* Append word (n ids) to the job's bad words; false (500) out of memory. */
static bool bad_word_add(serve_job *j, const int32_t *word, int32_t n, bad *b)
{
    int32_t have = j->procs.n_bad ? j->bad_starts[j->procs.n_bad] : 0;
    int32_t *ids = realloc(j->bad_ids, sizeof(int32_t) * (size_t)(have + n));
    if (!ids) return fail_param(b, 500, NULL, "out of memory");
    j->bad_ids = ids;
    memcpy(ids + have, word, sizeof(int32_t) * (size_t)n);
    j->bad_starts[++j->procs.n_bad] = have + n;
    return true;
}

#define SERVE_MAX_BAD_WORDS 128 /* vLLM's VLLM_MAX_NUM_BAD_WORDS default */

/* bad_words (vLLM's update_from_tokenizer): each distinct word, its leading
 * white space stripped, is encoded as it is and with one space before it
 * (a word at the start of the text and one after a space usually differ);
 * the spaced form is kept when it begins with another id and has as many
 * ids. At most 128 encoded words. Needs a tokenizer (--tokenizer ids or DIR).
 * Leading white space is ASCII's (Python's lstrip also strips Unicode
 * spaces such as U+00A0). */
static bool parse_bad_words(const serve *s, json_t *req, serve_job *j, bad *b)
{
    json_t *bw = json_object_get(req, "bad_words");
    if (!bw || json_is_null(bw) || (json_is_array(bw) && !json_array_size(bw))) return true;
    if (!json_is_array(bw))
        return fail_param(b, 400, "bad_words", "bad_words: expected a list of strings, got %s",
                          json_type_name(bw));
    if (!s->cfg.tok && !s->cfg.text_ids)
        return fail_param(b, 400, "bad_words", "bad_words: words need a tokenizer and this server "
                          "has none; start it with --tokenizer ids or --tokenizer DIR");
    if (!(j->bad_starts = calloc(SERVE_MAX_BAD_WORDS + 2, sizeof(int32_t))))
        return fail_param(b, 500, NULL, "out of memory");
    size_t n = json_array_size(bw);
    for (size_t i = 0; i < n; i++) {
        json_t *t = json_array_get(bw, i);
        char where[48];
        snprintf(where, sizeof where, "bad_words[%zu]", i);
        if (!json_is_string(t))
            return fail_param(b, 400, "bad_words", "%s: expected a string, got %s", where,
                              json_type_name(t));
        if (!json_string_length(t))
            return fail_param(b, 400, "bad_words", "%s: empty (vLLM refuses it too)", where);
        bool seen = false; /* vLLM drops repeats before encoding */
        for (size_t k = 0; k < i && !seen; k++)
            seen = json_equal(json_array_get(bw, k), t);
        if (seen) continue;
        const char *w = json_string_value(t);
        size_t len = json_string_length(t);
        while (len && (*w == ' ' || (*w >= '\t' && *w <= '\r') || (*w >= 0x1c && *w <= 0x1f))) {
            w++;
            len--;
        }
        int32_t *plain, *spaced, np, ns;
        if (!bad_word_encode(s, w, len, where, &plain, &np, b)) return false;
        if (!plain)
            return fail_param(b, 400, "bad_words", "%s: encodes to no token", where);
        char *sp = malloc(len + 2);
        if (!sp) {
            free(plain);
            return fail_param(b, 500, NULL, "out of memory");
        }
        sp[0] = ' ';
        memcpy(sp + 1, w, len);
        sp[len + 1] = 0;
        bool ok = bad_word_encode(s, sp, len + 1, where, &spaced, &ns, b);
        free(sp);
        bool keep = ok && spaced && ns == np && spaced[0] != plain[0];
        int32_t words = j->procs.n_bad + 1 + (keep ? 1 : 0);
        if (ok && words > SERVE_MAX_BAD_WORDS)
            ok = fail_param(b, 400, "bad_words", "bad_words: %d words after encoding, at most %d",
                            words, SERVE_MAX_BAD_WORDS);
        ok = ok && bad_word_add(j, plain, np, b) && (!keep || bad_word_add(j, spaced, ns, b));
        free(plain);
        free(spaced);
        if (!ok) return false;
    }
    j->procs.bad_ids = j->bad_ids;
    j->procs.bad_starts = j->bad_starts;
    return true;
}

/* vLLM's logit processors radixkv's sampler applies: allowed_token_ids,
 * logit_bias (clamped to [-100, 100] as vLLM does), min_p, min_tokens (holds
 * back stop_token_ids), and the repetition, frequency and presence penalties
 * (in vLLM's ranges; the engine hands the sampler each sequence's tokens).
 * Only the cpu
 * backend samples with that sampler (sim has no logits, cuda samples on its
 * own), so elsewhere they are refused by name. */
static bool parse_procs(const serve *s, json_t *req, serve_job *j, bad *b)
{
    double min_p = 0, rep = 1, freq = 0, pres = 0;
    int64_t min_tokens = 0;
    if (!get_num(req, "min_p", 0, 1, false, &min_p, b) ||
        !get_num(req, "repetition_penalty", 0, FLT_MAX, true, &rep, b) ||
        !get_num(req, "frequency_penalty", -2, 2, false, &freq, b) ||
        !get_num(req, "presence_penalty", -2, 2, false, &pres, b) ||
        !get_int(req, "min_tokens", 0, INT32_MAX, &min_tokens, b))
        return false;
    /* vLLM's check, against max_tokens as asked (0 with echo alone). */
    if (min_tokens > (j->echo_only ? 0 : j->max_tokens))
        return fail_param(b, 400, "min_tokens", "min_tokens: %lld is greater than max_tokens %d",
                          (long long)min_tokens, j->echo_only ? 0 : j->max_tokens);
    /* vLLM looks for stop strings only in the text after the first
     * min_tokens outputs; the stop string search here scans all of it. */
    if (min_tokens > 0 && j->n_stop_str)
        return fail_param(b, 400, "min_tokens", "min_tokens: not supported together with stop "
                          "strings (stop_token_ids are held back; leave out one of them)");
    /* Without stop ids there is nothing to hold back (no EOS in this
     * vocabulary unless stop_token_ids names one), so min_tokens is moot. */
    if (!j->n_stop) min_tokens = 0;
    json_t *lb = json_object_get(req, "logit_bias"), *al = json_object_get(req, "allowed_token_ids");
    if (lb && json_is_null(lb)) lb = NULL;
    if (al && json_is_null(al)) al = NULL;
    if (lb && !json_is_object(lb))
        return fail_param(b, 400, "logit_bias", "logit_bias: expected an object of token id -> "
                          "bias, got %s", json_type_name(lb));
    if (lb && json_object_size(lb) == 0) lb = NULL;
    if (al && (!json_is_array(al) || json_array_size(al) == 0))
        return fail_param(b, 400, "allowed_token_ids", "allowed_token_ids: expected a non-empty "
                          "list of token ids");
    if (!parse_bad_words(s, req, j, b)) return false;
    const char *first = al ? "allowed_token_ids" : j->procs.n_bad ? "bad_words"
                      : lb ? "logit_bias" : min_p > 0 ? "min_p"
                      : rep != 1 ? "repetition_penalty" : freq != 0 ? "frequency_penalty"
                      : pres != 0 ? "presence_penalty" : min_tokens > 0 ? "min_tokens" : NULL;
    if (!first) return true;
    if (strcmp(s->backend_name, "cpu"))
        return fail_param(b, 400, first, "%s: the %s backend does not sample with radixkv's "
                          "sampler, which applies it (--backend cpu does)", first, s->backend_name);
    j->procs.min_p = (float)min_p;
    j->procs.repetition_penalty = (float)rep;
    j->procs.frequency_penalty = (float)freq;
    j->procs.presence_penalty = (float)pres;
    j->procs.min_tokens = (int32_t)min_tokens;
    j->procs.stop_ids = j->stop_ids;
    j->procs.n_stop_ids = j->n_stop;
    if (al) {
        size_t n = json_array_size(al);
        if (!(j->allowed = malloc(sizeof(int32_t) * n))) return fail_param(b, 500, NULL, "out of memory");
        for (size_t i = 0; i < n; i++) {
            json_t *t = json_array_get(al, i);
            if (!json_is_integer(t) || json_integer_value(t) < 0 || json_integer_value(t) >= s->vocab)
                return fail_param(b, 400, "allowed_token_ids", "allowed_token_ids[%zu]: expected a "
                                  "token id in [0, %d)", i, s->vocab);
            j->allowed[i] = (int32_t)json_integer_value(t);
        }
        j->procs.allowed = j->allowed;
        j->procs.n_allowed = (int32_t)n;
    }
    if (lb) {
        size_t n = json_object_size(lb), i = 0;
        if (!(j->bias_ids = malloc(sizeof(int32_t) * n)) || !(j->bias_vals = malloc(sizeof(float) * n)))
            return fail_param(b, 500, NULL, "out of memory");
        const char *key;
        json_t *v;
        json_object_foreach(lb, key, v) {
            char *end;
            errno = 0;
            long long id = strtoll(key, &end, 10);
            if (!*key || *end || errno || id < 0 || id >= s->vocab)
                return fail_param(b, 400, "logit_bias", "logit_bias: key '%.40s' is not a token id "
                                  "in [0, %d)", key, s->vocab);
            if (!json_is_number(v))
                return fail_param(b, 400, "logit_bias", "logit_bias[%s]: expected a number, got %s",
                                  key, json_type_name(v));
            double x = json_number_value(v);
            j->bias_ids[i] = (int32_t)id;
            j->bias_vals[i++] = (float)(x < -100 ? -100 : x > 100 ? 100 : x);
        }
        j->procs.bias_ids = j->bias_ids;
        j->procs.bias_vals = j->bias_vals;
        j->procs.n_bias = (int32_t)n;
    }
    j->sampling.procs = &j->procs;
    return true;
}

/* prompt_logprobs (k, -1: the whole vocabulary), or with echo the
 * logprobs count, as vLLM's to_sampling_params: every prompt token's
 * logprob, rank and the k most likely, from the prompt rows the engine
 * computes (its cached prefix is not used then, as vLLM skips it). Not with
 * stream (vLLM alike); --backend cpu only; held to --max-logprobs. */
static bool parse_prompt_logprobs(const serve *s, json_t *req, serve_job *j, bad *b)
{
    j->prompt_lp = -1;
    json_t *v = json_object_get(req, "prompt_logprobs");
    int64_t k = -2;
    if (v && !json_is_null(v)) {
        if (!get_int(req, "prompt_logprobs", -1, INT32_MAX, &k, b)) return false;
        if (j->stream)
            return fail_param(b, 400, "prompt_logprobs", "prompt_logprobs: not available with "
                              "stream = true (as vLLM)");
        bool all = k == -1;
        if (all) k = s->vocab;
        if (k > s->cfg.max_logprobs)
            return fail_param(b, 400, "prompt_logprobs", "prompt_logprobs: %s%lld is above this "
                              "server's --max-logprobs %d", all ? "-1 (the whole vocabulary) = " : "",
                              (long long)k, s->cfg.max_logprobs);
    } else if (j->echo && j->logprobs >= 0) {
        k = j->logprobs;
    }
    if (k < 0) return true;
    const char *param = v && !json_is_null(v) ? "prompt_logprobs" : "logprobs";
    if (strcmp(s->backend_name, "cpu"))
        return fail_param(b, 400, param, "%s: the prompt's logprobs need the logits of every "
                          "prompt row, which the %s backend does not compute (--backend cpu "
                          "does)%s", param, s->backend_name,
                          *param == 'l' ? " (logprobs with echo asks for them)" : "");
    j->prompt_lp = (int32_t)k;
    j->prompt_lp_param = param;
    return true;
}

/* The body's shape, its fields against vLLM's (serve_fields.c), model, n
 * (best_of = n), echo and ignore_eos. */
static bool parse_head(const serve *s, json_t *req, serve_job *j, bad *b)
{
    if (!json_is_object(req))
        return fail_param(b, 400, NULL, "the body must be a JSON object, got %s", json_type_name(req));
    {
        const char *fp = NULL;
        char fm[sizeof b->msg];
        if (!serve_fields_check(req, &fp, fm, sizeof fm)) return fail_param(b, 400, fp, "%s", fm);
    }
    json_t *model = json_object_get(req, "model");
    if (model && !json_is_null(model)) {
        if (!json_is_string(model))
            return fail_param(b, 400, "model", "model: expected a string, got %s", json_type_name(model));
        if (strcmp(json_string_value(model), s->cfg.model_name))
            return fail_param(b, 404, "model", "model: '%s' is not served here (this server serves '%s')",
                              json_string_value(model), s->cfg.model_name);
    }
    int64_t x = 1;
    if (!get_int(req, "n", 1, SERVE_MAX_N, &x, b)) return false;
    j->n_samples = (int32_t)x;
    int64_t best_of = x;
    if (!get_int(req, "best_of", 1, SERVE_MAX_N, &best_of, b)) return false;
    if (best_of != x)
        return fail_param(b, 400, "best_of", "best_of: %lld differs from n = %lld; radixkv returns "
                          "every sample (best_of = n)", (long long)best_of, (long long)x);
    bool ignore_eos = false; /* the engine stops only at stop_token_ids: checked, no effect */
    return get_bool(req, "echo", &j->echo, b) && get_bool(req, "ignore_eos", &ignore_eos, b);
}

/* logprobs: the top-k per output token, held to --max-logprobs. */
static bool parse_logprobs(const serve *s, json_t *req, serve_job *j, bad *b)
{
    int64_t lp = -1;
    if (!get_int(req, "logprobs", -1, INT32_MAX, &lp, b)) return false;
    /* vLLM: -1 asks for the whole vocabulary, held to --max-logprobs like
     * any other count. */
    json_t *lpv = json_object_get(req, "logprobs");
    bool lp_all = lp == -1 && lpv && json_is_integer(lpv);
    if (lp_all) lp = s->vocab;
    /* Without --max-logprobs, logprobs 0 stays what it was: none asked. */
    if (lp > 0 && s->cfg.max_logprobs == 0)
        return fail_param(b, 400, "logprobs", "logprobs: %sthis server keeps no logits; start it "
                          "with --max-logprobs N to return log-probabilities",
                          lp_all ? "-1 (the whole vocabulary): " : "");
    if (lp > s->cfg.max_logprobs)
        return fail_param(b, 400, "logprobs", "logprobs: %s%lld is above this server's "
                          "--max-logprobs %d", lp_all ? "-1 (the whole vocabulary) = " : "",
                          (long long)lp, s->cfg.max_logprobs);
    j->logprobs = s->cfg.max_logprobs > 0 ? (int32_t)lp : -1;
    return true;
}

/* stop strings (need a tokenizer) and stop_token_ids. */
static bool parse_stops(const serve *s, json_t *req, serve_job *j, bad *b)
{
    json_t *stop = json_object_get(req, "stop");
    if (stop && !json_is_null(stop)) {
        size_t n = json_is_array(stop) ? json_array_size(stop) : 1;
        if (!json_is_string(stop) && !json_is_array(stop))
            return fail_param(b, 400, "stop", "stop: expected a string or a list of strings, got %s",
                              json_type_name(stop));
        if (n > 16) return fail_param(b, 400, "stop", "stop: %zu strings, at most 16", n);
        if (!(j->stop_str = calloc(n ? n : 1, sizeof(char *))))
            return fail_param(b, 500, NULL, "out of memory");
        for (size_t i = 0; i < n; i++) {
            json_t *t = json_is_array(stop) ? json_array_get(stop, i) : stop;
            if (!json_is_string(t))
                return fail_param(b, 400, "stop", "stop[%zu]: expected a string, got %s", i,
                                  json_type_name(t));
            const char *v = json_string_value(t);
            if (!*v) continue; /* an empty string stops nothing (as OpenAI) */
            if (!s->cfg.text_ids && !s->cfg.tok)
                return fail_param(b, 400, "stop",
                                  "stop: stop strings need a tokenizer; start the server with "
                                  "--tokenizer ids, or use stop_token_ids");
            if (!(j->stop_str[j->n_stop_str] = strdup(v)))
                return fail_param(b, 500, NULL, "out of memory");
            size_t len = strlen(v);
            if (len > j->stop_str_max) j->stop_str_max = len;
            j->n_stop_str++;
        }
    }
    json_t *sti = json_object_get(req, "stop_token_ids");
    if (sti && !json_is_null(sti)) {
        if (!json_is_array(sti))
            return fail_param(b, 400, "stop_token_ids",
                              "stop_token_ids: expected a list of token ids, got %s",
                              json_type_name(sti));
        size_t n = json_array_size(sti);
        if (n > 1024)
            return fail_param(b, 400, "stop_token_ids", "stop_token_ids: %zu ids, at most 1024", n);
        if (n && !(j->stop_ids = malloc(sizeof(int32_t) * n)))
            return fail_param(b, 500, NULL, "out of memory");
        for (size_t i = 0; i < n; i++) {
            json_t *t = json_array_get(sti, i);
            if (!json_is_integer(t) || json_integer_value(t) < 0 || json_integer_value(t) >= s->vocab)
                return fail_param(b, 400, "stop_token_ids",
                                  "stop_token_ids[%zu]: expected a token id in [0, %d)", i, s->vocab);
            j->stop_ids[j->n_stop++] = (int32_t)json_integer_value(t);
        }
    }
    return true;
}

/* max_tokens (0 only with echo), the output flags, user, request_id and
 * the prompt's truncation. */
static bool parse_lengths(const serve *s, json_t *req, serve_job *j, bad *b)
{
    int64_t max_tokens = s->cfg.default_max_tokens;
    if (!get_int(req, "max_tokens", 0, s->max_context, &max_tokens, b)) return false;
    /* vLLM: max_tokens 0 is for echo alone (prompt scoring); the engine
     * still runs one token, counted in usage, and the text is the prompt. */
    if (max_tokens == 0 && !j->echo)
        return fail_param(b, 400, "max_tokens", "max_tokens: 0 is outside [1, %d] (0 only with "
                          "echo)", s->max_context);
    j->echo_only = max_tokens == 0;
    j->max_tokens = max_tokens ? (int32_t)max_tokens : 1;
    if (!get_bool(req, "include_stop_str_in_output", &j->include_stop, b) ||
        !get_bool(req, "return_tokens_as_token_ids", &j->tokens_as_ids, b) ||
        !get_bool(req, "return_token_ids", &j->return_token_ids, b))
        return false;
    json_t *user = json_object_get(req, "user");
    if (user && !json_is_null(user) && !json_is_string(user))
        return fail_param(b, 400, "user", "user: expected a string, got %s", json_type_name(user));
    json_t *rid = json_object_get(req, "request_id");
    if (rid && !json_is_null(rid)) {
        if (!json_is_string(rid) || !*json_string_value(rid) ||
            strlen(json_string_value(rid)) > sizeof j->id - 8)
            return fail_param(b, 400, "request_id", "request_id: expected a string of 1 to %zu "
                              "characters", sizeof j->id - 8);
        snprintf(j->id, sizeof j->id, "cmpl-%s", json_string_value(rid));
    }
    int64_t trunc = 0;
    if (!get_int(req, "truncate_prompt_tokens", -1, INT64_MAX, &trunc, b)) return false;
    if (trunc == 0 && json_is_integer(json_object_get(req, "truncate_prompt_tokens")))
        return fail_param(b, 400, "truncate_prompt_tokens", "truncate_prompt_tokens: 0 would leave "
                          "an empty prompt (-1: the model's context, k >= 1: the last k tokens)");
    if (trunc > s->max_context)
        return fail_param(b, 400, "truncate_prompt_tokens", "truncate_prompt_tokens: %lld is "
                          "greater than the model's context of %d", (long long)trunc, s->max_context);
    j->truncate = trunc == -1 ? s->max_context : (int32_t)trunc;
    json_t *side = json_object_get(req, "truncation_side");
    if (side && !json_is_null(side)) {
        if (!json_is_string(side) || (strcmp(json_string_value(side), "left") &&
                                      strcmp(json_string_value(side), "right")))
            return fail_param(b, 400, "truncation_side", "truncation_side: expected \"left\" or "
                              "\"right\"");
        j->truncate_right = !strcmp(json_string_value(side), "right");
    }
    return true;
}

/* Temperature, top-p, top-k, seed, stream and stream_options. */
static bool parse_sampling(const serve *s, json_t *req, serve_job *j, bad *b)
{
    double temperature = 1, top_p = 1;
    int64_t top_k = 0, seed = -1;
    bool seeded = json_object_get(req, "seed") && !json_is_null(json_object_get(req, "seed"));
    if (!get_num(req, "temperature", 0, 100, false, &temperature, b) ||
        !get_num(req, "top_p", 0, 1, true, &top_p, b) ||
        !get_int(req, "top_k", -1, INT32_MAX, &top_k, b) ||
        !get_int(req, "seed", INT64_MIN, INT64_MAX, &seed, b) ||
        !get_bool(req, "stream", &j->stream, b))
        return false;
    j->tok = s->cfg.tok;
    json_t *so = json_object_get(req, "stream_options");
    if (so && !json_is_null(so)) {
        if (!json_is_object(so))
            return fail_param(b, 400, "stream_options", "stream_options: expected an object, got %s",
                              json_type_name(so));
        if (!get_bool(so, "include_usage", &j->include_usage, b) ||
            !get_bool(so, "continuous_usage_stats", &j->continuous_usage, b)) {
            b->param = "stream_options";
            return false;
        }
        if (!j->stream)
            return fail_param(b, 400, "stream_options", "stream_options: only with stream = true "
                              "(as vLLM)");
        /* vLLM: per-chunk usage only with the final one. */
        j->continuous_usage = j->continuous_usage && j->include_usage;
    }
    j->sampling = (sampling_params){
        .temperature = (float)temperature,
        .top_p = (float)top_p,
        .top_k = top_k < 0 ? 0 : (int32_t)top_k,
        /* as `radixkv run` maps a trace's seed: 0 means "derive one" */
        .seed = seeded ? ((uint64_t)seed << 1) | 1 : 0,
    };
    j->seeded = seeded;
    j->seed = (uint64_t)seed;
    return true;
}

/* Prompt and outputs within --max-model-len, and a request that can
 * never fit (context, pool) refused now, naming the field to shorten. */
static bool check_fits(const serve *s, serve_job *j, bad *b)
{
    /* Prompt logprobs: the engine holds every prompt row's logits (float,
     * the whole vocabulary) of each sample until it ends; a bound keeps one
     * request from taking the host's memory. */
    if (j->prompt_lp >= 0) {
        double bytes = 0;
        for (int32_t i = 0; i < j->n_seq; i++)
            bytes += (double)j->seq[i].n_tokens * j->n_samples * s->vocab * sizeof(float);
        if (bytes > SERVE_MAX_PROMPT_LOGITS_BYTES)
            return fail_param(b, 400, j->prompt_lp_param, "%s: the prompts' logits (tokens x n x "
                              "vocabulary %d) would take %.0f MiB, more than %d MiB; send "
                              "shorter or fewer prompts", j->prompt_lp_param, s->vocab,
                              bytes / 1048576.0, SERVE_MAX_PROMPT_LOGITS_BYTES >> 20);
    }
    /* --max-model-len: prompt and outputs within it (vLLM's check). */
    for (int32_t i = 0; s->cfg.max_model_len > 0 && i < j->n_seq; i++)
        if ((int64_t)j->seq[i].n_tokens + j->max_tokens > s->max_context)
            return fail_param(b, 400, "max_tokens", "max_tokens: %d prompt tokens + %d would exceed "
                              "--max-model-len %d", j->seq[i].n_tokens, j->max_tokens, s->max_context);
    /* Never fits (context, pool): refuse now, naming the field to shorten. */
    for (int32_t i = 0; i < j->n_seq; i++) {
        engine_request er = {.tokens = j->seq[i].tokens, .n_tokens = j->seq[i].n_tokens,
                             .max_tokens = j->max_tokens, .stop_token = -1,
                             .sampling = j->sampling};
        char why[256];
        if (engine_check_request(s->e, &er, why, sizeof why) == RKV_OK) continue;
        er.max_tokens = 1;
        char why1[256];
        bool prompt_alone = engine_check_request(s->e, &er, why1, sizeof why1) != RKV_OK;
        const char *param = prompt_alone ? "prompt" : "max_tokens";
        if (j->n_seq > 1 && prompt_alone)
            return fail_param(b, 400, param, "prompt[%d]: %s", i, why);
        return fail_param(b, 400, param, "%s: %s", param, why);
    }
    return true;
}

/* The samples expanded, room for each one's outputs and logprobs. */
static bool alloc_outputs(serve_job *j, bad *b)
{
    if (!expand_samples(j, b)) return false;
    for (int32_t i = 0; i < j->n_seq; i++) {
        serve_seq *q = &j->seq[i];
        const size_t mt = (size_t)j->max_tokens, K = j->logprobs > 0 ? (size_t)j->logprobs : 1;
        q->out = malloc(sizeof(int32_t) * mt);
        if (!q->out) return fail_param(b, 500, NULL, "out of memory");
        if (j->logprobs >= 0 && (!(q->lp = malloc(sizeof(float) * mt)) ||
                                 !(q->top_ids = malloc(sizeof(int32_t) * mt * K)) ||
                                 !(q->top_lp = malloc(sizeof(float) * mt * K))))
            return fail_param(b, 500, NULL, "out of memory");
        const size_t np = (size_t)q->n_tokens, PK = j->prompt_lp > 0 ? (size_t)j->prompt_lp : 1;
        if (j->prompt_lp >= 0 && q->sample == 0 &&
            (!(q->p_lp = malloc(sizeof(float) * np)) || !(q->p_rank = malloc(sizeof(int32_t) * np)) ||
             !(q->p_top_ids = malloc(sizeof(int32_t) * np * PK)) ||
             !(q->p_top_lp = malloc(sizeof(float) * np * PK))))
            return fail_param(b, 500, NULL, "out of memory");
    }
    return true;
}

static bool parse_completion(serve *s, json_t *req, serve_job *j, bad *b)
{
    if (!parse_head(s, req, j, b) || !parse_logprobs(s, req, j, b) ||
        !parse_stops(s, req, j, b) || !parse_lengths(s, req, j, b) ||
        !parse_sampling(s, req, j, b))
        return false;
    if (!parse_procs(s, req, j, b) || !parse_prompt_logprobs(s, req, j, b)) return false;
    if (j->n_stop_str && j->stream && !s->cfg.tok)
        return fail_param(b, 400, "stop", "stop: stop strings with stream are not supported (a "
                          "stream would have to hold back text that may start one); use "
                          "stop_token_ids, or stream = false");
    if (!parse_prompts(s, req, j, b)) return false;
    if (!check_fits(s, j, b) || !alloc_outputs(j, b)) return false;
    /* The prefill/decode handoff fields (serve_pd.h), read last so they see the
     * request as admitted. */
    const char *pdp;
    char pdm[sizeof b->msg];
    int pds = serve_pd_parse(s, req, j, &pdp, pdm, sizeof pdm);
    return pds ? fail_param(b, (unsigned)pds, pdp, "%s", pdm) : true;
}

/* ---- answers to a completion -------------------------------------------- */

static const char *finish_reason(const serve_job *j, const serve_seq *q)
{
    serve_finish f = serve_seq_finish(j, q);
    return serve_finish_names[f == SERVE_FINISH_ERROR ? SERVE_FINISH_ABORT : f];
}

/* vLLM's stop_reason: the stop token id or stop string that ended the
 * prompt, else null. */
static json_t *stop_reason_json(const serve_job *j, const serve_seq *q)
{
    if (q->stop_str >= 0) return json_string(j->stop_str[q->stop_str]);
    return q->stop_reason >= 0 ? json_integer(q->stop_reason) : json_null();
}

/* As vLLM counts: each prompt once whatever n (its samples share it), every
 * sample's outputs; cached tokens per prompt, the most any of its samples
 * found (samples after the first find its pages). */
static json_t *usage_json(const serve_job *j)
{
    int64_t prompt = 0, completion = 0, cached = 0, best = 0;
    for (int32_t i = 0; i < j->n_seq; i++) {
        const serve_seq *q = &j->seq[i];
        if (q->sample == 0) {
            prompt += q->n_tokens;
            cached += best;
            best = 0;
        }
        completion += q->n_out;
        if (q->cached_tokens > best) best = q->cached_tokens;
    }
    cached += best;
    return json_pack("{s:I,s:I,s:I,s:{s:I}}", "prompt_tokens", (json_int_t)prompt,
                     "completion_tokens", (json_int_t)completion, "total_tokens",
                     (json_int_t)(prompt + completion), "prompt_tokens_details", "cached_tokens",
                     (json_int_t)cached);
}

/* Outputs whose text shows: a stop token's text is left out unless
 * include_stop_str_in_output (vLLM's detokenizer alike); echo with
 * max_tokens 0 shows none. */
static int32_t shown_outputs(const serve_job *j, const serve_seq *q)
{
    if (j->echo_only) return 0;
    return q->n_out - (q->stop_reason >= 0 && !j->include_stop && q->n_out > 0);
}

/* The text a token stands for: " 123" with the ids tokenizer, else none
 * (the ids are in token_ids). Returns its length. */
static int token_text(const serve *s, int32_t id, char *buf, size_t n)
{
    if (!s->cfg.text_ids) return buf[0] = 0, 0;
    return snprintf(buf, n, " %d", id);
}

/* Text of ids, after lead (may be NULL); n_cut >= 0 keeps only its first
 * n_cut bytes of the ids' text (a stop string began there). */
static json_t *text_json(const serve *s, const char *lead, const int32_t *ids, int32_t n,
                         const char *cut_text, size_t n_cut)
{
    if (s->cfg.tok) return serve_text_json(s->cfg.tok, lead, ids, n, cut_text, n_cut);
    size_t ll = lead ? strlen(lead) : 0;
    char *t = malloc(ll + (cut_text ? n_cut : (size_t)n * 12) + 1), *p = t;
    if (!t) return NULL;
    memcpy(p, lead ? lead : "", ll);
    p += ll;
    if (cut_text) {
        memcpy(p, cut_text, n_cut);
        p += n_cut;
    } else {
        for (int32_t i = 0; i < n; i++) p += token_text(s, ids[i], p, 16);
    }
    *p = 0;
    json_t *v = json_string(t);
    free(t);
    return v;
}

/* The echoed prompt's text (malloc'd; "" without a tokenizer). */
static char *prompt_text(const serve *s, const serve_seq *q)
{
    if (s->cfg.tok) {
        char *t;
        size_t n;
        char err[64];
        return tokenizer_decode(s->cfg.tok, q->tokens, (size_t)q->n_tokens, true, &t, &n, err,
                                sizeof err) ? NULL : t;
    }
    char *t = malloc((size_t)q->n_tokens * 12 + 1), *p = t;
    if (!t) return NULL;
    *p = 0;
    for (int32_t i = 0; i < q->n_tokens; i++) p += token_text(s, q->tokens[i], p, 16);
    return t;
}

/* A token's name in logprobs: its text, or without a tokenizer vLLM's
 * "token_id:ID" (--return-tokens-as-token-ids). */
static void token_key(const serve *s, const serve_job *j, int32_t id, char *buf, size_t n)
{
    if (s->cfg.text_ids && !j->tokens_as_ids) snprintf(buf, n, " %d", id);
    else snprintf(buf, n, "token_id:%d", id);
}

/* A token's name in logprobs (malloc'd; NULL when out of memory) and in
 * *chars what it adds to text_offset: with a tokenizer its decoded text, in
 * characters, as vLLM gives them. */
static char *token_name(const serve *s, const serve_job *j, int32_t id, size_t *chars)
{
    if (s->cfg.tok && !j->tokens_as_ids) return serve_text_token_name(s->cfg.tok, id, chars);
    char key[32], txt[16];
    token_key(s, j, id, key, sizeof key);
    *chars = (size_t)token_text(s, id, txt, sizeof txt);
    return strdup(key);
}

/* Characters of a text_offset base (an echoed prompt): code points with a
 * tokenizer, as vLLM counts them; the ids tokenizer's text is ASCII. */
static size_t text_chars(const serve *s, const char *text)
{
    return s->cfg.tok ? serve_text_chars(text, strlen(text)) : strlen(text);
}

/* A logprob as vLLM writes it: -inf becomes OpenAI's -9999.0. */
static json_t *lp_real(float x)
{
    return json_real(x < -9999.0f ? -9999.0 : (double)x);
}

/* The echoed prompt's entries of the logprobs arrays (vLLM with echo and
 * logprobs): the first token has none (null); token t's top_logprobs are
 * vLLM's dict {token t, then the prompt_lp most likely} cut to its first
 * logprobs + 1 entries. *offset advances by each token's characters. */
static bool prompt_lp_entries(const serve *s, const serve_job *j, const serve_seq *lead,
                              json_t *toks, json_t *lps, json_t *tops, json_t *offs, size_t *offset)
{
    const int32_t PK = j->prompt_lp;
    for (int32_t t = 0; t < lead->n_tokens; t++) {
        size_t chars, unused;
        const int32_t tok = lead->tokens[t];
        char *key = token_name(s, j, tok, &chars);
        if (!key) return false;
        json_array_append_new(toks, json_string(key));
        json_array_append_new(offs, json_integer((json_int_t)*offset));
        *offset += chars;
        if (t == 0 || !lead->p_ready) {
            free(key);
            json_array_append_new(lps, json_null());
            json_array_append_new(tops, json_null());
            continue;
        }
        json_array_append_new(lps, lp_real(lead->p_lp[t]));
        json_t *top = json_object();
        json_object_set_new(top, key, lp_real(lead->p_lp[t]));
        free(key);
        for (int32_t k = 0; k < PK && json_object_size(top) < (size_t)j->logprobs + 1; k++) {
            char *kk = token_name(s, j, lead->p_top_ids[(size_t)t * (size_t)PK + (size_t)k],
                                  &unused);
            if (kk) json_object_set_new(top, kk, lp_real(lead->p_top_lp[(size_t)t * (size_t)PK +
                                                                         (size_t)k]));
            free(kk);
        }
        json_array_append_new(tops, top);
    }
    return true;
}

/* OpenAI's completion logprobs for outputs [from, from + n) of q: tokens,
 * token_logprobs, top_logprobs (the k most likely and the sampled one) and
 * text_offset from offset; with_prompt: the prompt's entries first (echo),
 * the offsets from 0. NULL (json null) when none were asked. */
static json_t *logprobs_json(const serve *s, const serve_job *j, const serve_seq *q, int32_t from,
                             int32_t n, size_t offset, bool with_prompt)
{
    if (j->logprobs < 0) return json_null();
    json_t *toks = json_array(), *lps = json_array(), *tops = json_array(), *offs = json_array();
    if (with_prompt) {
        offset = 0;
        if (!prompt_lp_entries(s, j, q - q->sample, toks, lps, tops, offs, &offset)) {
            json_decref(toks);
            json_decref(lps);
            json_decref(tops);
            json_decref(offs);
            return NULL;
        }
    }
    for (int32_t t = from; t < from + n; t++) {
        size_t chars, unused;
        char *key = token_name(s, j, q->out[t], &chars);
        if (!key) {
            json_decref(toks);
            json_decref(lps);
            json_decref(tops);
            json_decref(offs);
            return NULL;
        }
        json_array_append_new(toks, json_string(key));
        json_array_append_new(lps, json_real(q->lp[t]));
        json_t *top = json_object();
        for (int32_t k = 0; k < j->logprobs; k++) {
            char *kk = token_name(s, j, q->top_ids[(size_t)t * (size_t)j->logprobs + (size_t)k],
                                  &unused);
            if (kk)
                json_object_set_new(top, kk, json_real(q->top_lp[(size_t)t * (size_t)j->logprobs + (size_t)k]));
            free(kk);
        }
        json_object_set_new(top, key, json_real(q->lp[t]));
        free(key);
        json_array_append_new(tops, top);
        json_array_append_new(offs, json_integer((json_int_t)offset));
        offset += chars;
    }
    return json_pack("{s:o,s:o,s:o,s:o}", "tokens", toks, "token_logprobs", lps, "top_logprobs",
                     tops, "text_offset", offs);
}

/* vLLM's choice.prompt_logprobs: null for the first token, then per token
 * {"ID": {"logprob", "rank", "decoded_token"}} for the token itself and the
 * prompt_lp most likely (Python's dict order: the token first; a top entry
 * of the same id replaces its value in place). decoded_token: the token's
 * text (null without a tokenizer). */
static json_t *prompt_logprobs_json(const serve *s, const serve_seq *lead, int32_t PK)
{
    if (!lead->p_ready) return json_null(); /* never when it finished well */
    json_t *a = json_array();
    if (!a || json_array_append_new(a, json_null())) return json_decref(a), NULL;
    for (int32_t t = 1; t < lead->n_tokens; t++) {
        json_t *o = json_object();
        for (int32_t k = -1; o && k < PK; k++) {
            size_t at = (size_t)t * (size_t)PK + (size_t)k;
            int32_t id = k < 0 ? lead->tokens[t] : lead->p_top_ids[at];
            char key[16], txt[16];
            snprintf(key, sizeof key, "%d", id);
            size_t chars;
            char *name = s->cfg.tok ? serve_text_token_name(s->cfg.tok, id, &chars) : NULL;
            if (!s->cfg.tok && s->cfg.text_ids) token_text(s, id, txt, sizeof txt);
            json_t *e = json_pack("{s:o,s:i,s:o}", "logprob",
                                  lp_real(k < 0 ? lead->p_lp[t] : lead->p_top_lp[at]), "rank",
                                  (int)(k < 0 ? lead->p_rank[t] : k + 1), "decoded_token",
                                  name ? json_string(name) : s->cfg.text_ids && !s->cfg.tok
                                                            ? json_string(txt) : json_null());
            free(name);
            if (!e || json_object_set_new(o, key, e)) {
                json_decref(o);
                o = NULL;
            }
        }
        if (!o || json_array_append_new(a, o)) return json_decref(a), NULL;
    }
    return a;
}

static json_t *ids_json(const int32_t *ids, int32_t n)
{
    json_t *a = json_array();
    for (int32_t i = 0; a && i < n; i++) json_array_append_new(a, json_integer(ids[i]));
    return a;
}

/* A finished job's first failed prompt, which answers for all of it (the
 * whole body, or a stream's error event): its error, its index in *at and
 * the status (503 cancelled, else 500); NULL when none failed. */
static const char *job_error(const serve_job *j, int32_t *at, unsigned *status)
{
    for (int32_t i = 0; i < j->n_seq; i++)
        if (j->seq[i].error) {
            *at = i;
            *status = strcmp(j->seq[i].error, "cancelled") ? 500 : 503;
            return j->seq[i].error;
        }
    return NULL;
}

/* Under s->mu: the whole answer of a finished job. */
static enum MHD_Result answer_job(serve *s, struct MHD_Connection *c, serve_job *j)
{
    int32_t at;
    unsigned status;
    const char *failed = job_error(j, &at, &status);
    if (failed) return send_error(c, status, NULL, "prompt %d: %s", at, failed);
    json_t *choices = json_array();
    for (int32_t i = 0; choices && i < j->n_seq; i++) {
        const serve_seq *q = &j->seq[i];
        char *lead = j->echo ? prompt_text(s, q) : NULL;
        if (j->echo && !lead) {
            json_decref(choices);
            return send_error(c, 500, NULL, "out of memory writing the answer");
        }
        json_t *ch = json_pack("{s:i,s:o,s:o,s:o,s:s,s:o}", "index", (int)i, "text",
                               text_json(s, lead, q->out, shown_outputs(j, q),
                                         q->stop_str >= 0 ? q->text : NULL,
                                         q->text_cut + (q->stop_str >= 0 && j->include_stop
                                                        ? strlen(j->stop_str[q->stop_str]) : 0)),
                               "token_ids", ids_json(q->out, q->n_out), "logprobs",
                               logprobs_json(s, j, q, 0, j->echo_only ? 0 : q->n_out,
                                             lead ? text_chars(s, lead) : 0,
                                             j->echo && j->prompt_lp >= 0),
                               "finish_reason", finish_reason(j, q), "stop_reason",
                               stop_reason_json(j, q));
        free(lead);
        if (ch && j->prompt_lp >= 0 &&
            json_object_set_new(ch, "prompt_logprobs",
                                prompt_logprobs_json(s, q - q->sample, j->prompt_lp))) {
            json_decref(ch);
            ch = NULL;
        }
        if (ch && (j->echo || j->return_token_ids) &&
            json_object_set_new(ch, "prompt_token_ids", ids_json(q->tokens, q->n_tokens))) {
            json_decref(ch);
            ch = NULL;
        }
        /* A choice that could not be built: no answer with it missing. */
        if (!ch || json_array_append_new(choices, ch)) {
            json_decref(choices);
            return send_error(c, 500, NULL, "out of memory writing the answer");
        }
    }
    json_t *v = json_pack("{s:s,s:s,s:I,s:s,s:o,s:o}", "id", j->id, "object", "text_completion",
                          "created", (json_int_t)j->created, "model", s->cfg.model_name,
                          "choices", choices, "usage", usage_json(j));
    if (j->chat) v = serve_text_chat_answer(v);
    serve_pd_answer_locked(s, j, v); /* vllm-router's prefill: its kv_transfer_params */
    return send_json(c, MHD_HTTP_OK, v);
}

static bool sse_append(serve_job *j, const char *text)
{
    size_t n = strlen(text);
    if (rkv_grow_size((void **)&j->sse, &j->sse_cap, j->sse_len + n + 1, 1)) return false;
    memcpy(j->sse + j->sse_len, text, n + 1);
    j->sse_len += n;
    return true;
}

static bool sse_event(serve_job *j, json_t *v)
{
    char *t = v ? json_dumps(v, JSON_COMPACT) : NULL;
    json_decref(v);
    if (!t) return false;
    /* One append: an event goes in whole or not at all. */
    size_t n = strlen(t);
    char *e = malloc(n + 9);
    if (e) {
        memcpy(e, "data: ", 6);
        memcpy(e + 6, t, n);
        memcpy(e + 6 + n, "\n\n", 3);
    }
    bool ok = e && sse_append(j, e);
    free(e);
    free(t);
    return ok;
}

/* A chunk of choices; usage: continuous_usage_stats' per-chunk usage
 * (stolen), or the final chunk's, else none (vLLM leaves the key out). */
static json_t *chunk_json(const serve *s, const serve_job *j, json_t *choices, json_t *usage)
{
    json_t *v = json_pack("{s:s,s:s,s:I,s:s,s:o}", "id", j->id, "object", "text_completion",
                          "created", (json_int_t)j->created, "model", s->cfg.model_name, "choices",
                          choices);
    if (v && usage) json_object_set_new(v, "usage", usage);
    else json_decref(usage);
    return v && j->chat ? serve_text_chat_chunk(v) : v;
}

/* continuous_usage_stats: the prompt and the choice's outputs so far. */
static json_t *chunk_usage(const serve_job *j, const serve_seq *q, int32_t outputs)
{
    if (!j->continuous_usage) return NULL;
    return json_pack("{s:i,s:i,s:i}", "prompt_tokens", (int)q->n_tokens, "completion_tokens",
                     (int)outputs, "total_tokens", (int)(q->n_tokens + outputs));
}

/* The echoed prompt in front of a streamed piece (consumes piece). */
static json_t *lead_piece(const char *lead, json_t *piece)
{
    const char *t = json_string_value(piece);
    size_t ll = strlen(lead), tl = json_string_length(piece);
    char *both = t ? malloc(ll + tl + 1) : NULL;
    json_t *v = NULL;
    if (both) {
        memcpy(both, lead, ll);
        memcpy(both + ll, t, tl);
        v = json_stringn(both, ll + tl);
        free(both);
    }
    json_decref(piece);
    return v;
}

/* Under s->mu: events for what the engine published since the last call;
 * one chunk per token, the finish reason on a prompt's last (or a chunk of
 * its own: every prompt that ends says why, cancelled ones "abort"). With
 * echo the prompt leads the first chunk, as vLLM streams it. */
static bool sse_fill(serve *s, serve_job *j)
{
    for (int32_t i = 0; i < j->n_seq; i++) {
        serve_seq *q = &j->seq[i];
        const int32_t shown = shown_outputs(j, q);
        /* With a tokenizer: the byte of the raw output where a stop string
         * cut the text (its own text kept with include_stop_str_in_output). */
        const long cut = q->stop_str < 0 ? -1
                       : (long)(q->text_cut + (j->include_stop
                                               ? strlen(j->stop_str[q->stop_str]) : 0));
        while (q->sent < q->n_out) {
            bool last = q->done && q->sent + 1 == q->n_out;
            bool lead = j->echo && !q->echo_sent;
            char *ptext = lead ? prompt_text(s, q) : NULL;
            if (lead && !ptext) return false;
            if (lead) q->sent_chars = text_chars(s, ptext);
            json_t *piece;
            if (s->cfg.tok) {
                /* the text so far less what went out; a cut character and a
                 * possible stop string's start are held back */
                piece = serve_text_stream(s->cfg.tok, q->out, q->sent < shown ? q->sent + 1 : shown,
                                          &q->text_sent, j->stop_str, j->n_stop_str, cut, last);
                if (piece && ptext) piece = lead_piece(ptext, piece);
            } else {
                piece = text_json(s, ptext, q->out + q->sent, q->sent < shown, NULL, 0);
            }
            json_t *ch = json_pack("{s:i,s:o,s:o,s:o,s:s?,s:o}", "index", (int)i, "text", piece,
                                   "token_ids", ids_json(q->out + q->sent, 1), "logprobs",
                                   logprobs_json(s, j, q, q->sent, lead && j->echo_only ? 0 : 1,
                                                 q->sent_chars, lead && j->prompt_lp >= 0),
                                   "finish_reason", last ? finish_reason(j, q) : NULL,
                                   "stop_reason", last ? stop_reason_json(j, q) : json_null());
            free(ptext);
            if (ch && (lead || (j->return_token_ids && q->sent == 0)))
                json_object_set_new(ch, "prompt_token_ids", ids_json(q->tokens, q->n_tokens));
            if (!sse_event(j, chunk_json(s, j, json_pack("[o]", ch), chunk_usage(j, q, q->sent + 1))))
                return false;
            q->echo_sent = q->echo_sent || lead;
            size_t chars = 0;
            free(token_name(s, j, q->out[q->sent], &chars));
            q->sent_chars += chars;
            q->sent++;
            if (last) q->finish_sent = true;
        }
        if (q->done && !q->finish_sent) {
            /* with a tokenizer, what was held back goes out with the finish */
            json_t *rest = s->cfg.tok ? serve_text_stream(s->cfg.tok, q->out, shown, &q->text_sent,
                                                          j->stop_str, j->n_stop_str, cut, true)
                                      : json_string("");
            json_t *ch = json_pack("{s:i,s:o,s:[],s:n,s:s,s:o}", "index", (int)i, "text", rest,
                                   "token_ids", "logprobs", "finish_reason", finish_reason(j, q),
                                   "stop_reason", stop_reason_json(j, q));
            if (!sse_event(j, chunk_json(s, j, json_pack("[o]", ch), chunk_usage(j, q, q->n_out))))
                return false;
            q->finish_sent = true;
        }
    }
    if (j->n_done < j->n_seq || j->sse_final) return true;
    int32_t at;
    unsigned status;
    const char *failed = job_error(j, &at, &status);
    if (failed) {
        char msg[300];
        snprintf(msg, sizeof msg, "prompt %d: %s", at, failed);
        if (!sse_event(j, error_json(status, NULL, msg))) return false;
    }
    if (j->include_usage && !sse_event(j, chunk_json(s, j, json_array(), usage_json(j))))
        return false;
    if (!sse_append(j, "data: [DONE]\n\n")) return false;
    j->sse_final = true;
    return true;
}

static ssize_t sse_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    stream_ctx *sc = cls;
    serve *s = sc->s;
    serve_job *j = sc->job;
    (void)pos;
    pthread_mutex_lock(&s->mu);
    bool filled = true;
    if (j->sse_off == j->sse_len) {
        j->sse_off = j->sse_len = 0;
        filled = sse_fill(s, j);
    }
    if ((!filled && j->sse_len == 0 && !j->sse_final) || j->sse_oom) {
        /* Out of memory with nothing to send: end the stream with an error
         * event written from static text, as much per call as fits
         * (suspending here would leave the client waiting for good); what is
         * left of the job is cancelled when the response is freed. */
        static const char oom[] = "data: {\"error\":{\"message\":\"out of memory\",\"type\":"
                                  "\"InternalServerError\",\"param\":null,\"code\":500}}\n\n"
                                  "data: [DONE]\n\n";
        j->sse_oom = j->sse_final = true;
        size_t left = sizeof oom - 1 - j->oom_off, n = left < max ? left : max;
        memcpy(buf, oom + j->oom_off, n);
        j->oom_off += n;
        pthread_mutex_unlock(&s->mu);
        return n ? (ssize_t)n : MHD_CONTENT_READER_END_OF_STREAM;
    }
    if (j->sse_off == j->sse_len && j->keepalive && !j->sse_final) sse_append(j, ": keep-alive\n\n");
    j->keepalive = false;
    ssize_t n;
    if (j->sse_len > j->sse_off) {
        j->t_written = serve_wall();
        n = (ssize_t)(j->sse_len - j->sse_off < max ? j->sse_len - j->sse_off : max);
        memcpy(buf, j->sse + j->sse_off, (size_t)n);
        j->sse_off += (size_t)n;
    } else if (j->sse_final) {
        n = MHD_CONTENT_READER_END_OF_STREAM;
    } else {
        j->suspended = true;
        MHD_suspend_connection(j->conn);
        n = 0;
    }
    pthread_mutex_unlock(&s->mu);
    return n;
}

/* The connection let go of the job: cancel what is left of it. */
static void release_job_locked(serve *s, serve_job *j)
{
    if (--s->http_jobs == 0) pthread_cond_broadcast(&s->drained);
    j->conn = NULL;
    j->suspended = false;
    if (j->n_done < j->n_seq) {
        j->cancelled = true;
        s->cancel_pending = true;
        pthread_cond_signal(&s->wake);
    }
    serve_job_unref_locked(j);
}

static void sse_free(void *cls)
{
    stream_ctx *sc = cls;
    pthread_mutex_lock(&sc->s->mu);
    release_job_locked(sc->s, sc->job);
    pthread_mutex_unlock(&sc->s->mu);
    free(sc);
}

void serve_http_resume_locked(serve *s, serve_job *j)
{
    (void)s;
    if (j->suspended && j->conn) {
        j->suspended = false;
        MHD_resume_connection(j->conn);
    }
}

/* ---- GET endpoints ------------------------------------------------------ */

static json_t *server_info(const serve *s)
{
    const engine_config *ec = &s->cfg.run->ec;
    return json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:i,s:i,s:I,s:i,s:i,s:i,s:i,s:b}",
                     "version", RKV_VERSION, "model_path", s->cfg.model_name,
                     "backend", s->backend_name,
                     "cache", ec->cache_cfg.kind ? ec->cache_cfg.kind : "radix",
                     "policy", ec->policy, "schedule", ec->schedule,
                     "page_size", s->page_size, "num_pages", s->num_pages,
                     "max_total_num_tokens", (json_int_t)s->num_pages * s->page_size,
                     "max_running_requests", ec->max_running,
                     "max_num_batched_tokens", ec->max_num_batched_tokens,
                     "vocab_size", s->vocab, "context_length", s->max_context,
                     "text_ids_tokenizer", s->cfg.text_ids);
}

/* The paths GET (and HEAD) answer; anything else is 404 whatever the method. */
static const char *const get_paths[] = {"/health", "/v1/models", "/model_info", "/get_model_info",
                                        "/server_info", "/get_server_info", "/metrics", "/ping",
                                        "/version", NULL};

static bool is_get_path(const char *url)
{
    for (int i = 0; get_paths[i]; i++)
        if (!strcmp(url, get_paths[i])) return true;
    return false;
}

static enum MHD_Result handle_get(serve *s, struct MHD_Connection *c, const char *url)
{
    if (!strcmp(url, "/health")) {
        pthread_mutex_lock(&s->mu);
        bool ok = !s->draining && !s->fatal[0];
        pthread_mutex_unlock(&s->mu);
        return ok ? send_text(c, 200, "text/plain", strdup("ok\n"), NULL)
                  : send_error(c, 503, NULL, "the server is shutting down");
    }
    if (!strcmp(url, "/ping")) {
        /* vLLM's liveness probe: 200 while it serves, like /health. */
        pthread_mutex_lock(&s->mu);
        bool ok = !s->draining && !s->fatal[0];
        pthread_mutex_unlock(&s->mu);
        return ok ? send_text(c, 200, "application/json", strdup("{}"), NULL)
                  : send_error(c, 503, NULL, "the server is shutting down");
    }
    if (!strcmp(url, "/version"))
        return send_json(c, 200, json_pack("{s:s}", "version", RKV_VERSION));
    if (!strcmp(url, "/v1/models"))
        return send_json(c, 200, json_pack("{s:s,s:[{s:s,s:s,s:I,s:s,s:i}]}", "object", "list",
                                           "data", "id", s->cfg.model_name, "object", "model",
                                           "created", (json_int_t)time(NULL), "owned_by", "radixkv",
                                           "max_model_len", s->max_context));
    if (!strcmp(url, "/model_info") || !strcmp(url, "/get_model_info"))
        return send_json(c, 200, json_pack("{s:s,s:n,s:b}", "model_path", s->cfg.model_name,
                                           "tokenizer_path", "is_generation", 1));
    if (!strcmp(url, "/server_info") || !strcmp(url, "/get_server_info"))
        return send_json(c, 200, server_info(s));
    if (!strcmp(url, "/metrics")) {
        serve_metrics m;
        pthread_mutex_lock(&s->mu);
        m = s->m;
        pthread_mutex_unlock(&s->mu);
        return send_text(c, 200, "text/plain; version=0.0.4", serve_metrics_text(s, &m), NULL);
    }
    return send_error(c, 404, NULL, "no such endpoint: GET %s", url);
}

/* ---- POST /v1/completions ----------------------------------------------- */

/* The body of cc as a job: *out the job, or NULL with why in b (or, when the
 * body is not JSON, *malformed and jerr). No lock held; any thread. */
static void parse_body(serve *s, const conn_ctx *cc, serve_job **out, bad *b, bool *malformed,
                       json_error_t *jerr)
{
    *out = NULL;
    *malformed = false;
    json_t *req = json_loadb(cc->body ? cc->body : "", cc->len, JSON_REJECT_DUPLICATES, jerr);
    if (!req) {
        *malformed = true;
        return;
    }
    serve_job *j = calloc(1, sizeof *j);
    if (!j) {
        json_decref(req);
        fail_param(b, 500, NULL, "out of memory");
        return;
    }
    j->refs = 1;
    j->prompt_lp = -1;
    j->chat = cc->chat;
    bool ok = parse_completion(s, req, j, b);
    uint64_t room;
    bool told = !ok && serve_pd_room(s, req, &room); /* its decode side is told */
    json_decref(req);
    if (!ok) {
        pthread_mutex_lock(&s->mu);
        if (told) serve_pd_refused_locked(s, room, b->status, b->msg);
        serve_job_unref_locked(j);
        pthread_mutex_unlock(&s->mu);
        return;
    }
    *out = j;
}

static void *parse_thread(void *arg)
{
    conn_ctx *cc = arg;
    serve *s = cc->s;
    serve_job *j;
    bool malformed;
    parse_body(s, cc, &j, cc->pbad, &malformed, &cc->pjerr);
    pthread_mutex_lock(&s->mu);
    cc->parsed = j;
    cc->pmalformed = malformed;
    cc->parse = PARSE_DONE;
    MHD_resume_connection(cc->conn);
    /* serve_http_stop waits for this before it stops the daemon. */
    if (--s->http_parsing == 0) pthread_cond_broadcast(&s->drained);
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* Start parsing a large body on its own thread, the connection suspended
 * until it is done. false: no thread (parse inline). */
static bool parse_start(serve *s, struct MHD_Connection *c, conn_ctx *cc)
{
    if (!(cc->pbad = calloc(1, sizeof *cc->pbad))) return false;
    pthread_attr_t at;
    if (pthread_attr_init(&at)) return false;
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    cc->conn = c;
    cc->parse = PARSE_RUNNING;
    pthread_t t;
    /* Suspended before the thread may resume it, under s->mu. */
    pthread_mutex_lock(&s->mu);
    MHD_suspend_connection(c);
    s->http_parsing++;
    int err = pthread_create(&t, &at, parse_thread, cc);
    if (err) {
        s->http_parsing--;
        cc->parse = PARSE_INLINE;
        MHD_resume_connection(c);
    }
    pthread_mutex_unlock(&s->mu);
    pthread_attr_destroy(&at);
    return err == 0;
}

/* Under s->mu, a parsed job the server cannot queue now: true with the
 * answer sent in *res, the job's reference dropped and s->mu released. */
static bool refuse_locked(serve *s, struct MHD_Connection *c, serve_job *j, enum MHD_Result *res)
{
    if (j->n_seq > s->cfg.run->ec.max_running + s->cfg.max_queue) {
        /* It would never fit: retrying cannot help, so not 503. */
        int64_t cap = s->cfg.run->ec.max_running + s->cfg.max_queue;
        int32_t n = j->n_seq, per = j->n_samples;
        s->m.requests_rejected++;
        serve_job_unref_locked(j);
        pthread_mutex_unlock(&s->mu);
        if (per > 1)
            *res = send_error(c, 400, "n", "n: %d prompts x n = %d sequences, more than this "
                              "server ever holds at once (--max-running + --max-queue = %lld)",
                              n / per, n, (long long)cap);
        else
            *res = send_error(c, 400, "prompt",
                              "prompt: %d prompts, more than this server ever holds at once "
                              "(--max-running + --max-queue = %lld)", n, (long long)cap);
        return true;
    }
    if (s->draining || s->fatal[0] ||
        s->outstanding + j->n_seq > s->cfg.run->ec.max_running + s->cfg.max_queue) {
        const char *why = s->draining ? "the server is shutting down"
                        : s->fatal[0] ? "the engine failed"
                        : "the queue is full; retry later";
        s->m.requests_rejected++;
        if (!s->draining && !s->fatal[0]) s->m.queue_full++;
        /* A prefill half refused: its decode half is told (serve_pd.h). */
        if (j->pd.on && !j->pd.vllm) serve_pd_refused_locked(s, j->pd.room, 503, why);
        serve_job_unref_locked(j);
        pthread_mutex_unlock(&s->mu);
        *res = send_error(c, 503, NULL, "%s", why);
        return true;
    }
    return false;
}

static enum MHD_Result handle_completion(serve *s, struct MHD_Connection *c, conn_ctx *cc)
{
    serve_job *j = NULL;
    bool malformed = false;
    json_error_t jerr;
    bad b = {0};
    if (cc->parse == PARSE_RUNNING) return MHD_YES; /* resumed too early: not done yet */
    if (cc->parse == PARSE_DONE) {
        j = cc->parsed;
        cc->parsed = NULL;
        malformed = cc->pmalformed;
        jerr = cc->pjerr;
        b = *cc->pbad;
    } else if (!cc->too_big) {
        if (cc->len >= ASYNC_PARSE_BYTES && parse_start(s, c, cc)) return MHD_YES;
        parse_body(s, cc, &j, &b, &malformed, &jerr);
    }
    if (!j && (cc->too_big || malformed)) {
        pthread_mutex_lock(&s->mu);
        s->m.requests_rejected++;
        pthread_mutex_unlock(&s->mu);
        if (cc->too_big)
            return send_error(c, 413, NULL, "the body is larger than %lld bytes (--max-body-bytes)",
                              (long long)s->cfg.max_body);
        return send_error(c, 400, NULL, "malformed JSON at line %d, column %d: %s", jerr.line,
                          jerr.column, jerr.text);
    }
    pthread_mutex_lock(&s->mu);
    if (!j) {
        s->m.requests_rejected++;
        pthread_mutex_unlock(&s->mu);
        return send_error(c, b.status, b.param, "%s", b.msg);
    }
    enum MHD_Result refused;
    if (refuse_locked(s, c, j, &refused)) return refused;
    static uint64_t counter;
    if (!j->id[0])
        snprintf(j->id, sizeof j->id, "cmpl-%d-%llu", (int)getpid(), (unsigned long long)++counter);
    j->created = (int64_t)time(NULL);
    j->t_recv = j->t_written = serve_wall();
    j->conn = c;
    /* Allocated before the job is handed over, so a failure is a 500 and
     * not a stream cut before its first byte. */
    stream_ctx *sc = NULL;
    if (j->stream && !(sc = malloc(sizeof *sc))) {
        s->m.requests_failed++;
        if (j->pd.on && !j->pd.vllm) serve_pd_refused_locked(s, j->pd.room, 500, "out of memory");
        serve_job_unref_locked(j);
        pthread_mutex_unlock(&s->mu);
        return send_error(c, 500, NULL, "out of memory");
    }
    serve_submit_locked(s, j);
    s->http_jobs++;
    if (!j->stream) {
        cc->job = j;
        j->suspended = true;
        MHD_suspend_connection(c);
        pthread_mutex_unlock(&s->mu);
        return MHD_YES;
    }
    pthread_mutex_unlock(&s->mu);
    struct MHD_Response *r =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, sse_read, sc, sse_free);
    if (!r) {
        free(sc);
        pthread_mutex_lock(&s->mu);
        release_job_locked(s, j);
        pthread_mutex_unlock(&s->mu);
        return send_error(c, 500, NULL, "out of memory");
    }
    sc->s = s;
    sc->job = j;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ret;
}

/* "Authorization: Bearer KEY" (scheme in any case), compared in time that
 * does not depend on where the first difference is. */
static bool api_key_ok(const serve *s, struct MHD_Connection *c)
{
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!h || strncasecmp(h, "bearer ", 7)) return false;
    const char *got = h + 7, *want = s->cfg.api_key;
    size_t lg = strlen(got), lw = strlen(want);
    unsigned diff = lg != lw;
    for (size_t i = 0; i < lw; i++) diff |= (unsigned char)want[i] ^ (unsigned char)(i < lg ? got[i] : 0);
    return diff == 0;
}

static void *socket_context(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *i = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return i ? i->socket_context : NULL;
}

/* ---- POST /v1/chat/completions, /tokenize, /detokenize (--tokenizer DIR) -- */

/* A chat request becomes a completions request (serve_text_chat_request)
 * answered as chat; /tokenize and /detokenize answer at once. */
static enum MHD_Result serve_text_handle(serve *s, struct MHD_Connection *c, conn_ctx *cc,
                                         const char *url)
{
    /* Resumed after its body (a chat request already rewritten, or a body
     * that is not JSON) was parsed on a thread of its own. */
    if (cc->parse != PARSE_INLINE) return handle_completion(s, c, cc);
    json_error_t jerr;
    json_t *req = cc->too_big ? NULL
                : json_loadb(cc->body ? cc->body : "", cc->len, JSON_REJECT_DUPLICATES, &jerr);
    if (!req) return handle_completion(s, c, cc); /* its 413 and 400 answers */
    char err[512];
    unsigned st = 0;
    if (strcmp(url, "/v1/chat/completions")) {
        json_t *v = !strcmp(url, "/tokenize")
                        ? serve_text_tokenize(s->cfg.tok, s->cfg.chat, s->cfg.no_chat,
                                              s->max_context, req, &st, err, sizeof err)
                        : serve_text_detokenize(s->cfg.tok, req, &st, err, sizeof err);
        json_decref(req);
        return v ? send_json(c, MHD_HTTP_OK, v) : send_error(c, st, NULL, "%s", err);
    }
    st = serve_text_chat_request(s->cfg.tok, s->cfg.chat, s->cfg.no_chat, req, err, sizeof err);
    char *body = st ? NULL : json_dumps(req, JSON_COMPACT);
    json_decref(req);
    if (!body) {
        pthread_mutex_lock(&s->mu);
        s->m.requests_rejected++;
        pthread_mutex_unlock(&s->mu);
        return st ? send_error(c, st, NULL, "%s", err) : send_error(c, 500, NULL, "out of memory");
    }
    free(cc->body);
    cc->body = body;
    cc->len = cc->cap = strlen(body);
    cc->chat = true;
    return handle_completion(s, c, cc);
}

/* A request's first call: its connection context, and a body over the cap
 * refused from its Content-Length, before a byte of it is read (MHD then
 * closes the connection unread). */
static enum MHD_Result on_first_call(serve *s, struct MHD_Connection *c, void **con_cls)
{
    conn_ctx *cc = calloc(1, sizeof *cc);
    if (!cc) {
        /* Answered now; later calls of this request see oom_ctx. */
        static conn_ctx oom_ctx = {.answered = true};
        *con_cls = &oom_ctx;
        return send_text(c, 500, "application/json", NULL, NULL);
    }
    cc->s = s;
    *con_cls = cc;
    const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                                 MHD_HTTP_HEADER_CONTENT_LENGTH);
    unsigned long long n = 0;
    if (cl && sscanf(cl, "%llu", &n) == 1 && n > (unsigned long long)s->cfg.max_body) {
        cc->too_big = cc->answered = true;
        serve_guard_received(s->guard, socket_context(c), true);
        pthread_mutex_lock(&s->mu);
        s->m.requests_rejected++;
        pthread_mutex_unlock(&s->mu);
        return send_error(c, 413, NULL,
                          "the body is %llu bytes, more than %lld (--max-body-bytes)", n,
                          (long long)s->cfg.max_body);
    }
    return MHD_YES;
}

/* A suspended completion resumed: the engine has finished its job, or the
 * connection waits again. */
static enum MHD_Result on_resumed(serve *s, struct MHD_Connection *c, conn_ctx *cc)
{
    pthread_mutex_lock(&s->mu);
    enum MHD_Result ret;
    if (cc->job->n_done < cc->job->n_seq) {
        cc->job->suspended = true;
        MHD_suspend_connection(c);
        ret = MHD_YES;
    } else {
        ret = answer_job(s, c, cc->job);
    }
    pthread_mutex_unlock(&s->mu);
    return ret;
}

/* A piece of the body: kept up to the cap (beyond it, or out of memory, the
 * rest is read and dropped; the answer goes once the request is in). */
static enum MHD_Result on_upload(const serve *s, conn_ctx *cc, const char *upload_data,
                                 size_t *upload_size)
{
    if (cc->len + *upload_size > (size_t)s->cfg.max_body) {
        cc->too_big = true;
    } else if (!cc->too_big && !cc->oom) {
        if (rkv_grow_size((void **)&cc->body, &cc->cap, cc->len + *upload_size + 1, 1)) {
            /* The rest is read and dropped; the answer, a 500, goes
             * once the request is in (not while it uploads). */
            cc->oom = true;
            *upload_size = 0;
            return MHD_YES;
        }
        memcpy(cc->body + cc->len, upload_data, *upload_size);
        cc->len += *upload_size;
    }
    *upload_size = 0;
    return MHD_YES;
}

/* The whole request is in: --api-key, then the endpoint by path and method. */
static enum MHD_Result route(serve *s, struct MHD_Connection *c, conn_ctx *cc, const char *url,
                             const char *method)
{
    /* --api-key: vLLM guards the /v1 paths (not /health, /metrics, ...). */
    if (s->cfg.api_key && !strncmp(url, "/v1", 3) && (!url[3] || url[3] == '/') &&
        strcmp(method, "OPTIONS") && !api_key_ok(s, c))
        return send_text(c, 401, "application/json", strdup("{\"error\":\"Unauthorized\"}"), NULL);
    bool get = !strcmp(method, MHD_HTTP_METHOD_GET) || !strcmp(method, MHD_HTTP_METHOD_HEAD);
    bool post = !strcmp(method, MHD_HTTP_METHOD_POST);
    if (!strcmp(url, "/v1/completions")) {
        if (!post) return send_405(c, "POST", "%s /v1/completions: use POST", method);
        return handle_completion(s, c, cc);
    }
    if (!strcmp(url, "/v1/chat/completions")) {
        if (!s->cfg.tok)
            return send_error(c, 404, NULL, "chat completions need a tokenizer: start the server "
                                            "with --tokenizer DIR, or use /v1/completions");
        if (!post) return send_405(c, "POST", "%s /v1/chat/completions: use POST", method);
        return serve_text_handle(s, c, cc, url);
    }
    if (!strcmp(url, "/tokenize") || !strcmp(url, "/detokenize")) {
        if (!s->cfg.tok)
            return send_error(c, 404, NULL, "%s needs a tokenizer: start the server with "
                                            "--tokenizer DIR", url);
        if (!post) return send_405(c, "POST", "%s %s: use POST", method, url);
        return serve_text_handle(s, c, cc, url);
    }
    if (!is_get_path(url)) return send_error(c, 404, NULL, "no such endpoint: %s %s", method, url);
    if (!get) return send_405(c, "GET, HEAD", "%s %s: use GET", method, url);
    return handle_get(s, c, url);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_size, void **con_cls)
{
    serve *s = cls;
    (void)version;
    conn_ctx *cc = *con_cls;
    if (!cc) return on_first_call(s, c, con_cls);
    if (cc->answered) {
        *upload_size = 0;
        return MHD_YES;
    }
    if (cc->job) return on_resumed(s, c, cc);
    if (*upload_size) return on_upload(s, cc, upload_data, upload_size);
    /* The whole request is in: the read deadline no longer applies. */
    serve_guard_received(s->guard, socket_context(c), true);
    if (cc->oom) return send_error(c, 500, NULL, "out of memory reading the request body");
    return route(s, c, cc, url, method);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    serve *s = cls;
    conn_ctx *cc = *con_cls;
    (void)toe;
    serve_guard_received(s->guard, socket_context(c), false);
    if (!cc) return;
    if (!cc->s) { /* the static oom_ctx */
        *con_cls = NULL;
        return;
    }
    if (cc->job) {
        pthread_mutex_lock(&s->mu);
        release_job_locked(s, cc->job);
        pthread_mutex_unlock(&s->mu);
    }
    if (cc->parsed) {
        pthread_mutex_lock(&s->mu);
        serve_job_unref_locked(cc->parsed);
        pthread_mutex_unlock(&s->mu);
    }
    free(cc->pbad);
    free(cc->body);
    free(cc);
    *con_cls = NULL;
}

/* ---- daemon ------------------------------------------------------------- */

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_ctx,
                          enum MHD_ConnectionNotificationCode toe)
{
    serve *s = cls;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *i =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        *socket_ctx = NULL;
        if (i) serve_guard_opened(s->guard, i->connect_fd, socket_ctx);
    } else {
        serve_guard_closed(s->guard, *socket_ctx);
        *socket_ctx = NULL;
    }
}

/* MHD's URL decoding, but %00 stays as it is: a decoded NUL would end the
 * path early, so "/health%00.json" would answer as "/health". */
static int hexval(char ch)
{
    return ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
         : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10 : -1;
}

static size_t unescape_url(void *cls, struct MHD_Connection *c, char *uri)
{
    (void)cls;
    (void)c;
    char *w = uri;
    for (const char *r = uri; *r;) {
        int hi, lo;
        if (r[0] == '%' && (hi = hexval(r[1])) >= 0 && (lo = hexval(r[2])) >= 0 && (hi | lo)) {
            *w++ = (char)(hi * 16 + lo);
            r += 3;
        } else {
            *w++ = *r++;
        }
    }
    *w = 0;
    return (size_t)(w - uri);
}

int serve_http_start(serve *s, char *err, size_t errlen)
{
    s->http.resume_locked = serve_http_resume_locked;
    s->http.client_gone_locked = serve_http_client_gone_locked;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICHOST | AI_PASSIVE};
    struct addrinfo *ai = NULL;
    char port[16];
    snprintf(port, sizeof port, "%d", s->cfg.port);
    int rc = getaddrinfo(s->cfg.host, port, &hints, &ai);
    if (rc) {
        snprintf(err, errlen, "--host: '%s' is not a numeric address: %s", s->cfg.host,
                 gai_strerror(rc));
        return -1;
    }
    s->guard = serve_guard_start(s->cfg.read_timeout);
    if (!s->guard && s->cfg.read_timeout > 0) {
        freeaddrinfo(ai);
        snprintf(err, errlen, "--request-read-timeout: cannot start its watch (out of memory or "
                 "threads)");
        return -1;
    }
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME |
                     (ai->ai_family == AF_INET6 ? MHD_USE_IPv6 : 0);
    s->daemon = MHD_start_daemon(flags, 0, NULL, NULL, on_request, s,
                                 MHD_OPTION_SOCK_ADDR, ai->ai_addr,
                                 MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
                                 MHD_OPTION_UNESCAPE_CALLBACK, unescape_url, NULL,
                                 MHD_OPTION_CONNECTION_LIMIT, s->cfg.max_connections,
                                 MHD_OPTION_PER_IP_CONNECTION_LIMIT, s->cfg.max_per_peer,
                                 MHD_OPTION_NOTIFY_CONNECTION, on_connection, s,
                                 MHD_OPTION_CONNECTION_TIMEOUT, s->cfg.conn_timeout,
                                 MHD_OPTION_LISTEN_BACKLOG_SIZE, (unsigned)1024,
                                 MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!s->daemon) {
        serve_guard_stop(s->guard);
        s->guard = NULL;
        snprintf(err, errlen, "cannot listen on %s port %d: %s", s->cfg.host, s->cfg.port,
                 errno ? strerror(errno) : "libmicrohttpd refused");
        return -1;
    }
    return 0;
}

int serve_http_port(const serve *s)
{
    const union MHD_DaemonInfo *i = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
    return i ? i->port : s->cfg.port;
}

bool serve_http_client_gone_locked(const serve_job *j)
{
    if (!j->conn || !j->suspended) return false;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(j->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return false;
    char b;
    ssize_t r = recv(ci->connect_fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    return r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

void serve_http_stop(serve *s)
{
    /* A parse thread resumes its connection when done: the daemon must
     * outlive it. */
    pthread_mutex_lock(&s->mu);
    while (s->http_parsing > 0) pthread_cond_wait(&s->drained, &s->mu);
    pthread_mutex_unlock(&s->mu);
    if (s->daemon) MHD_stop_daemon(s->daemon);
    s->daemon = NULL;
    serve_guard_stop(s->guard);
    s->guard = NULL;
}
