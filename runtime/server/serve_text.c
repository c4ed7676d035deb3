/* serve_text.c - text prompts, output text, chat and /tokenize for serve
 * (see serve_text.h). */
#include "serve_text.h"

#include "rkv_core.h"

#include <stdlib.h>
#include <string.h>

/* Raw bytes of ids (special tokens skipped) into a new buffer. */
static char *raw_bytes(const tokenizer *t, const int32_t *ids, int32_t n, size_t *len)
{
    size_t cap = 64, m = 0;
    char *b = malloc(cap);
    for (int32_t i = 0; b && i < n; i++) {
        size_t k;
        bool special;
        const uint8_t *p = tokenizer_token_bytes(t, ids[i], &k, &special);
        if (!p || special) continue;
        if (rkv_grow_size((void **)&b, &cap, m + k + 1, 1)) {
            free(b);
            return NULL;
        }
        memcpy(b + m, p, k);
        m += k;
    }
    *len = m;
    return b;
}

char *serve_text_upto(const tokenizer *t, const int32_t *ids, int32_t n, size_t *len)
{
    size_t m;
    char *b = raw_bytes(t, ids, n, &m);
    if (!b) return NULL;
    size_t hold = utf8_incomplete_tail((const uint8_t *)b, m);
    char *s = utf8_repair((const uint8_t *)b, m - hold, len);
    free(b);
    return s;
}

json_t *serve_text_stream(const tokenizer *t, const int32_t *ids, int32_t n, size_t *sent,
                          char *const *stops, int32_t n_stops, long cut, bool final)
{
    size_t m, tl;
    char *raw = raw_bytes(t, ids, n, &m);
    if (!raw) return NULL;
    /* cut is a byte of the raw output (the stop-string search's); the text
     * is its repaired form, so the repaired prefix ends the stream */
    size_t use = cut >= 0 ? ((size_t)cut < m ? (size_t)cut : m)
               : final ? m : m - utf8_incomplete_tail((const uint8_t *)raw, m);
    char *all = utf8_repair((const uint8_t *)raw, use, &tl);
    free(raw);
    if (!all) return NULL;
    size_t end = tl;
    if (cut < 0 && !final) {
        /* the longest tail that a stop string starts with */
        size_t hold = 0;
        for (int32_t i = 0; i < n_stops; i++) {
            size_t len = strlen(stops[i]);
            for (size_t k = len - 1 < tl ? len - 1 : tl; k > hold; k--)
                if (!memcmp(all + tl - k, stops[i], k)) {
                    hold = k;
                    break;
                }
        }
        end = tl - hold;
    }
    if (end < *sent) end = *sent;
    json_t *v = json_stringn(all + *sent, end - *sent);
    *sent = end;
    free(all);
    return v;
}

json_t *serve_text_json(const tokenizer *t, const char *lead, const int32_t *ids, int32_t n,
                        const char *cut, size_t n_cut)
{
    size_t m;
    char *b = cut ? NULL : raw_bytes(t, ids, n, &m);
    if (!cut && !b) return NULL;
    const char *src = cut ? cut : b;
    size_t sl = cut ? n_cut : m;
    size_t tl;
    char *txt = utf8_repair((const uint8_t *)src, sl, &tl);
    free(b);
    if (!txt) return NULL;
    size_t ll = lead ? strlen(lead) : 0;
    char *all = malloc(ll + tl + 1);
    json_t *v = NULL;
    if (all) {
        memcpy(all, lead ? lead : "", ll);
        memcpy(all + ll, txt, tl + 1);
        v = json_stringn(all, ll + tl);
    }
    free(all);
    free(txt);
    return v;
}

bool serve_text_append(const tokenizer *t, int32_t tok, char **text, size_t *len, size_t *cap)
{
    size_t k;
    bool special;
    const uint8_t *p = tokenizer_token_bytes(t, tok, &k, &special);
    if (!p || special) k = 0;
    if (rkv_grow_size((void **)text, cap, *len + k + 1, 1)) return false;
    if (k) memcpy(*text + *len, p, k);
    *len += k;
    (*text)[*len] = '\0';
    return true;
}

char *serve_text_token_name(const tokenizer *t, int32_t id, size_t *chars)
{
    size_t k = 0, n;
    bool special;
    const uint8_t *p = tokenizer_token_bytes(t, id, &k, &special);
    char *name = utf8_repair(p ? p : (const uint8_t *)"", p ? k : 0, &n);
    if (name) *chars = serve_text_chars(name, n);
    return name;
}

size_t serve_text_chars(const char *s, size_t n)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++) c += ((uint8_t)s[i] & 0xC0) != 0x80;
    return c;
}

/* ------------------------------------------------------------------ chat */

/* messages -> ids (the template adds BOS and the rest). */
static unsigned chat_ids(const tokenizer *t, const chat_template *ct, const char *no_template,
                         const json_t *msgs, bool agp, json_t **ids, char *err, size_t errlen)
{
    if (!ct) return rkv_set_err(err, errlen, "%s", no_template), 400;
    char *text;
    size_t tl;
    rkv_status st = chat_template_render_json(ct, msgs, agp, &text, &tl, err, errlen);
    if (st) return st == RKV_ENOMEM ? 500 : 400;
    int32_t *v;
    size_t n;
    st = tokenizer_encode(t, text, tl, false, &v, &n, err, errlen);
    free(text);
    if (st) return st == RKV_ENOMEM ? 500 : 400;
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++) json_array_append_new(a, json_integer(v[i]));
    free(v);
    if (!a) return rkv_set_err(err, errlen, "out of memory"), 500;
    *ids = a;
    return 0;
}

unsigned serve_text_chat_request(const tokenizer *t, const chat_template *ct,
                                 const char *no_template, json_t *req, char *err, size_t errlen)
{
    if (!json_is_object(req)) return rkv_set_err(err, errlen, "the body is not a JSON object"), 400;
    const json_t *msgs = json_object_get(req, "messages");
    if (!msgs) return rkv_set_err(err, errlen, "messages: missing"), 400;
    if (json_object_get(req, "prompt"))
        return rkv_set_err(err, errlen, "prompt: not a chat completions field (send messages)"), 400;
    /* fields only chat has: defaults are dropped, anything else refused */
    const json_t *agp = json_object_get(req, "add_generation_prompt");
    if (agp && !json_is_boolean(agp))
        return rkv_set_err(err, errlen, "add_generation_prompt: expected a boolean"), 400;
    static const char *const refused[] = {"tools", "tool_choice", "functions", "response_format",
                                          "logit_bias", "chat_template", "continue_final_message"};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        const json_t *v = json_object_get(req, refused[i]);
        /* A value that asks for nothing: null, "none", an empty list, and
         * continue_final_message's default false (sglang-router writes it
         * into every chat request it forwards). */
        bool dflt_false = json_is_false(v) && !strcmp(refused[i], "continue_final_message");
        if (v && !json_is_null(v) && !dflt_false &&
            !(json_is_string(v) && !strcmp(json_string_value(v), "none")) &&
            !(json_is_array(v) && json_array_size(v) == 0))
            return rkv_set_err(err, errlen, "%s: not supported by this server", refused[i]), 400;
        json_object_del(req, refused[i]);
    }
    const json_t *lp = json_object_get(req, "logprobs");
    if (lp && !json_is_null(lp) && !json_is_false(lp))
        return rkv_set_err(err, errlen, "logprobs: not supported for chat completions"), 400;
    json_object_del(req, "logprobs");
    json_object_del(req, "top_logprobs");
    json_object_del(req, "parallel_tool_calls");
    json_t *mct = json_object_get(req, "max_completion_tokens");
    if (mct && !json_is_null(mct)) {
        if (json_object_get(req, "max_tokens") && !json_is_null(json_object_get(req, "max_tokens")))
            return rkv_set_err(err, errlen, "max_completion_tokens: give it or max_tokens, not "
                               "both"), 400;
        json_object_set(req, "max_tokens", mct);
    }
    json_object_del(req, "max_completion_tokens");
    json_t *ids = NULL;
    unsigned st = chat_ids(t, ct, no_template, msgs, !agp || json_is_true(agp), &ids, err, errlen);
    if (st) return st;
    json_object_del(req, "messages");
    json_object_del(req, "add_generation_prompt");
    json_object_set_new(req, "prompt", ids);
    return 0;
}

/* Each choice's "text" moved into key ("message" or "delta") as content;
 * prompt_logprobs (one prompt: the same on every choice) moves to the
 * response, where vLLM's chat answer carries it. */
static json_t *chat_shape(json_t *v, const char *object, const char *key)
{
    if (!v) return NULL;
    json_object_set_new(v, "object", json_string(object));
    json_t *choices = json_object_get(v, "choices");
    json_t *plp = json_object_get(json_array_get(choices, 0), "prompt_logprobs");
    if (plp) json_object_set(v, "prompt_logprobs", plp);
    for (size_t i = 0; i < json_array_size(choices); i++) {
        json_t *ch = json_array_get(choices, i);
        json_t *text = json_object_get(ch, "text");
        json_t *m = json_pack("{s:s, s:O}", "role", "assistant", "content",
                              text ? text : json_string(""));
        json_object_set_new(ch, key, m);
        json_object_del(ch, "text");
        json_object_del(ch, "prompt_token_ids");
        json_object_del(ch, "prompt_logprobs");
    }
    return v;
}

json_t *serve_text_chat_answer(json_t *v) { return chat_shape(v, "chat.completion", "message"); }
json_t *serve_text_chat_chunk(json_t *v) { return chat_shape(v, "chat.completion.chunk", "delta"); }

/* ------------------------------------------------------ /tokenize */

json_t *serve_text_tokenize(const tokenizer *t, const chat_template *ct, const char *no_template,
                            int32_t max_model_len, json_t *req, unsigned *status, char *err,
                            size_t errlen)
{
    *status = 400;
    if (!json_is_object(req)) return rkv_set_err(err, errlen, "the body is not a JSON object"), NULL;
    const json_t *p = json_object_get(req, "prompt"), *m = json_object_get(req, "messages");
    const json_t *sp = json_object_get(req, "add_special_tokens");
    if (sp && !json_is_boolean(sp))
        return rkv_set_err(err, errlen, "add_special_tokens: expected a boolean"), NULL;
    json_t *ids = NULL;
    if (json_is_string(p)) {
        int32_t *v;
        size_t n;
        rkv_status st = tokenizer_encode(t, json_string_value(p), json_string_length(p),
                                         !sp || json_is_true(sp), &v, &n, err, errlen);
        if (st) {
            *status = st == RKV_ENOMEM ? 500 : 400;
            return NULL;
        }
        ids = json_array();
        for (size_t i = 0; ids && i < n; i++) json_array_append_new(ids, json_integer(v[i]));
        free(v);
    } else if (m) {
        if (sp && json_is_true(sp))
            return rkv_set_err(err, errlen, "add_special_tokens: true with messages would add a "
                               "second BOS (the template writes it)"), NULL;
        const json_t *agp = json_object_get(req, "add_generation_prompt");
        unsigned st = chat_ids(t, ct, no_template, m, !agp || json_is_true(agp), &ids, err, errlen);
        if (st) {
            *status = st;
            return NULL;
        }
    } else {
        return rkv_set_err(err, errlen, "prompt: expected a string (or send messages)"), NULL;
    }
    if (!ids) {
        *status = 500;
        return rkv_set_err(err, errlen, "out of memory"), NULL;
    }
    return json_pack("{s:I, s:i, s:o, s:n}", "count", (json_int_t)json_array_size(ids),
                     "max_model_len", (int)max_model_len, "tokens", ids, "token_strs");
}

json_t *serve_text_detokenize(const tokenizer *t, json_t *req, unsigned *status, char *err,
                              size_t errlen)
{
    *status = 400;
    const json_t *a = json_object_get(req, "tokens");
    if (!json_is_array(a)) return rkv_set_err(err, errlen, "tokens: expected a list of token ids"), NULL;
    size_t n = json_array_size(a);
    int32_t *v = malloc((n ? n : 1) * sizeof *v);
    if (!v) {
        *status = 500;
        return rkv_set_err(err, errlen, "out of memory"), NULL;
    }
    for (size_t i = 0; i < n; i++) {
        const json_t *x = json_array_get(a, i);
        if (!json_is_integer(x) || json_integer_value(x) < 0 ||
            json_integer_value(x) >= tokenizer_vocab_size(t)) {
            free(v);
            return rkv_set_err(err, errlen, "tokens[%zu]: expected a token id in [0, %d)", i,
                               (int)tokenizer_vocab_size(t)), NULL;
        }
        v[i] = (int32_t)json_integer_value(x);
    }
    char *s;
    size_t sl;
    rkv_status st = tokenizer_decode(t, v, n, true, &s, &sl, err, errlen);
    free(v);
    if (st) return NULL;
    json_t *r = json_pack("{s:s%}", "prompt", s, sl);
    free(s);
    return r;
}
