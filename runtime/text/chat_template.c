/* chat_template.c - built-in renderers for known chat templates (see
 * chat_template.h). */
#include "chat_template.h"
#include "rkv_core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef enum chat_kind {
    CHAT_QWEN25 = 0,
    CHAT_LLAMA3,
    CHAT_LLAMA31,
    CHAT_LLAMA32,
} chat_kind;

/* The known templates by (hash, length) of their text; the texts are test
 * fixtures (tests/text/templates/), where the test checks these values. */
static const struct known_template {
    const char *name;
    chat_kind kind;
    uint64_t hash;
    size_t len;
} KNOWN[] = {
    {"qwen2.5", CHAT_QWEN25, 0x81caee86d484f13fULL, 2506},
    {"llama-3", CHAT_LLAMA3, 0x5ab8b1eb5778a624ULL, 393},
    /* Llama-3.1 instruct models; Llama-3.3 ships the same text
     * (tests/text/templates/llama-3.1.jinja) */
    {"llama-3.1", CHAT_LLAMA31, 0x20d2eb6b6cfa618aULL, 4613},
    /* Llama-3.2 instruct models: today's date instead of a fixed one */
    {"llama-3.2", CHAT_LLAMA32, 0x67fd6bd9cc9cd066ULL, 3826},
};

struct chat_template {
    chat_kind kind;
    const char *name;
    char *bos, *eos;
};

uint64_t chat_template_hash(const char *text, size_t len)
{
    if (len && text[len - 1] == '\n') len--;
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < len; i++) h = (h ^ (uint8_t)text[i]) * 1099511628211ULL;
    return h;
}

static rkv_status create_known(const struct known_template *k, const char *source,
                               const char *bos_token, const char *eos_token, chat_template **out,
                               char *err, size_t errlen);

rkv_status chat_template_by_name(const char *name, const char *bos_token, const char *eos_token,
                                 chat_template **out, char *err, size_t errlen)
{
    *out = NULL;
    for (size_t i = 0; i < sizeof KNOWN / sizeof KNOWN[0]; i++)
        if (!strcmp(KNOWN[i].name, name))
            return create_known(&KNOWN[i], name, bos_token, eos_token, out, err, errlen);
    return rkv_fail(RKV_EINVAL, err, errlen, "chat template '%s': not a built-in one (qwen2.5, "
                    "llama-3, llama-3.1, llama-3.2)", name);
}

rkv_status chat_template_create(const char *text, const char *source, const char *bos_token,
                                const char *eos_token, chat_template **out, char *err,
                                size_t errlen)
{
    *out = NULL;
    size_t len = strlen(text);
    uint64_t h = chat_template_hash(text, len);
    size_t cut = len && text[len - 1] == '\n' ? len - 1 : len;
    const struct known_template *k = NULL;
    for (size_t i = 0; i < sizeof KNOWN / sizeof KNOWN[0]; i++)
        if (KNOWN[i].hash == h && KNOWN[i].len == cut) k = &KNOWN[i];
    if (!k)
        return rkv_fail(RKV_ENOTSUP, err, errlen,
                        "%s: unknown chat template (fnv1a64 %016llx, %zu bytes); radixkv renders "
                        "qwen2.5, llama-3, llama-3.1 and llama-3.2 templates only - give one "
                        "with --chat-template FILE",
                        source, (unsigned long long)h, cut);
    return create_known(k, source, bos_token, eos_token, out, err, errlen);
}

static rkv_status create_known(const struct known_template *k, const char *source,
                               const char *bos_token, const char *eos_token, chat_template **out,
                               char *err, size_t errlen)
{
    if (k->kind != CHAT_QWEN25 && !bos_token)
        return rkv_fail(RKV_EINVAL, err, errlen,
                        "%s: the %s template needs bos_token (tokenizer_config.json)", source,
                        k->name);
    chat_template *ct = calloc(1, sizeof *ct);
    if (!ct) return rkv_fail(RKV_ENOMEM, err, errlen, "out of memory");
    ct->kind = k->kind;
    ct->name = k->name;
    ct->bos = bos_token ? strdup(bos_token) : NULL;
    ct->eos = eos_token ? strdup(eos_token) : NULL;
    if ((bos_token && !ct->bos) || (eos_token && !ct->eos)) {
        chat_template_free(ct);
        return rkv_fail(RKV_ENOMEM, err, errlen, "out of memory");
    }
    *out = ct;
    return RKV_OK;
}

void chat_template_free(chat_template *ct)
{
    if (!ct) return;
    free(ct->bos);
    free(ct->eos);
    free(ct);
}

const char *chat_template_kind(const chat_template *ct) { return ct->name; }

/* ------------------------------------------------------------- output */

typedef struct out_buf {
    char *p;
    size_t n, cap;
    bool oom;
} out_buf;

static void put(out_buf *o, const char *s, size_t n)
{
    if (o->oom) return;
    if (rkv_grow_size((void **)&o->p, &o->cap, o->n + n + 1, 1)) {
        o->oom = true;
        return;
    }
    memcpy(o->p + o->n, s, n);
    o->n += n;
    o->p[o->n] = '\0';
}

static void puts_(out_buf *o, const char *s) { put(o, s, strlen(s)); }

/* Is the character at s[0..n) whitespace to Python's str.strip() (what
 * Jinja's trim filter calls)? Returns its length in bytes, 0 when not. */
static int py_space(const uint8_t *s, size_t n)
{
    uint8_t b = s[0];
    if ((b >= 0x09 && b <= 0x0D) || (b >= 0x1C && b <= 0x20)) return 1;
    if (b == 0xC2 && n >= 2 && (s[1] == 0x85 || s[1] == 0xA0)) return 2;
    if (n >= 3 && b == 0xE1 && s[1] == 0x9A && s[2] == 0x80) return 3;           /* U+1680 */
    if (n >= 3 && b == 0xE2 && s[1] == 0x80 &&
        ((s[2] >= 0x80 && s[2] <= 0x8A) || s[2] == 0xA8 || s[2] == 0xA9 || s[2] == 0xAF))
        return 3;                                                                  /* U+2000-200A, 2028, 2029, 202F */
    if (n >= 3 && b == 0xE2 && s[1] == 0x81 && s[2] == 0x9F) return 3;           /* U+205F */
    if (n >= 3 && b == 0xE3 && s[1] == 0x80 && s[2] == 0x80) return 3;           /* U+3000 */
    return 0;
}

/* s[0..n) without Python-whitespace at both ends: *start, *len. */
static void py_strip(const char *s, size_t n, size_t *start, size_t *len)
{
    const uint8_t *u = (const uint8_t *)s;
    size_t a = 0, b = n;
    int k;
    while (a < b && (k = py_space(u + a, b - a)) > 0) a += (size_t)k;
    /* from the right: step back to each character's start */
    while (b > a) {
        size_t c = b - 1;
        while (c > a && (u[c] & 0xC0) == 0x80) c--;
        if (py_space(u + c, b - c) != (int)(b - c)) break;
        b = c;
    }
    *start = a;
    *len = b - a;
}

/* ------------------------------------------------------------ renderers */

/* Qwen2.5 without tools: the first message's system prompt (or the default
 * one), then each user message, each system message after the first and each
 * assistant message as <|im_start|>ROLE\nCONTENT<|im_end|>\n; other roles
 * give nothing. */
static void render_qwen25(const chat_template *ct, const chat_message *m, size_t n, bool agp,
                          out_buf *o)
{
    (void)ct;
    if (!strcmp(m[0].role, "system")) {
        puts_(o, "<|im_start|>system\n");
        put(o, m[0].content, m[0].content_len);
        puts_(o, "<|im_end|>\n");
    } else {
        puts_(o, "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
                 "assistant.<|im_end|>\n");
    }
    for (size_t i = 0; i < n; i++) {
        const char *r = m[i].role;
        if (!strcmp(r, "user") || (!strcmp(r, "system") && i > 0) || !strcmp(r, "assistant")) {
            puts_(o, "<|im_start|>");
            puts_(o, r);
            puts_(o, "\n");
            put(o, m[i].content, m[i].content_len);
            puts_(o, "<|im_end|>\n");
        }
    }
    if (agp) puts_(o, "<|im_start|>assistant\n");
}

/* Llama-3: BOS, then every message as a header with its role and the
 * content stripped of whitespace, ended by <|eot_id|>. */
static void render_llama3(const chat_template *ct, const chat_message *m, size_t n, bool agp,
                          out_buf *o)
{
    for (size_t i = 0; i < n; i++) {
        if (i == 0) puts_(o, ct->bos);
        puts_(o, "<|start_header_id|>");
        puts_(o, m[i].role);
        puts_(o, "<|end_header_id|>\n\n");
        size_t a, len;
        py_strip(m[i].content, m[i].content_len, &a, &len);
        put(o, m[i].content + a, len);
        puts_(o, "<|eot_id|>");
    }
    if (agp) puts_(o, "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

/* Llama-3.1 and 3.2 without tools (no tools, custom_tools or builtin_tools
 * passed, date_string not passed): BOS, a system header whose body is the
 * knowledge and date lines and then the first message's content stripped
 * when that message is a system one (else nothing), then every other
 * message as in Llama-3. date: 3.1's fixed default, or for 3.2 what
 * transformers' strftime_now("%d %b %Y") gives (the local date). */
static void render_llama31(const chat_template *ct, const chat_message *m, size_t n, bool agp,
                           const char *date, out_buf *o)
{
    puts_(o, ct->bos);
    puts_(o, "<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December "
             "2023\nToday Date: ");
    puts_(o, date);
    puts_(o, "\n\n");
    size_t first = 0, a, len;
    if (!strcmp(m[0].role, "system")) {
        py_strip(m[0].content, m[0].content_len, &a, &len);
        put(o, m[0].content + a, len);
        first = 1;
    }
    puts_(o, "<|eot_id|>");
    for (size_t i = first; i < n; i++) {
        puts_(o, "<|start_header_id|>");
        puts_(o, m[i].role);
        puts_(o, "<|end_header_id|>\n\n");
        py_strip(m[i].content, m[i].content_len, &a, &len);
        put(o, m[i].content + a, len);
        puts_(o, "<|eot_id|>");
    }
    if (agp) puts_(o, "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

rkv_status chat_template_render(const chat_template *ct, const chat_message *m, size_t n,
                                bool add_generation_prompt, char **text, size_t *len, char *err,
                                size_t errlen)
{
    *text = NULL;
    if (n == 0) return rkv_fail(RKV_EINVAL, err, errlen, "messages: empty (the template needs one)");
    for (size_t i = 0; i < n; i++) {
        if (!m[i].role || !m[i].content)
            return rkv_fail(RKV_EINVAL, err, errlen, "messages[%zu]: needs role and content", i);
        if (!strcmp(m[i].role, "tool") || !strcmp(m[i].role, "ipython"))
            return rkv_fail(RKV_ENOTSUP, err, errlen,
                            "messages[%zu].role: '%s' is not supported by the built-in %s "
                            "renderer", i, m[i].role, ct->name);
    }
    char date[64] = "26 Jul 2024";
    if (ct->kind == CHAT_LLAMA32) {
        /* Python's strftime without setlocale, as radixkv: the C locale's
         * month names */
        time_t now = time(NULL);
        struct tm tm;
        if (!localtime_r(&now, &tm) || !strftime(date, sizeof date, "%d %b %Y", &tm))
            return rkv_fail(RKV_EINVAL, err, errlen, "%s: today's date (strftime_now) cannot be "
                            "formatted", ct->name);
    }
    out_buf o = {0};
    if (ct->kind == CHAT_QWEN25) render_qwen25(ct, m, n, add_generation_prompt, &o);
    else if (ct->kind == CHAT_LLAMA3) render_llama3(ct, m, n, add_generation_prompt, &o);
    else render_llama31(ct, m, n, add_generation_prompt, date, &o);
    if (!o.oom && !o.p) put(&o, "", 0);
    if (o.oom) {
        free(o.p);
        return rkv_fail(RKV_ENOMEM, err, errlen, "out of memory");
    }
    *text = o.p;
    *len = o.n;
    return RKV_OK;
}

rkv_status chat_template_render_json(const chat_template *ct, const json_t *messages,
                                     bool add_generation_prompt, char **text, size_t *len,
                                     char *err, size_t errlen)
{
    *text = NULL;
    if (!ct)
        return rkv_fail(RKV_EINVAL, err, errlen, "no chat template (tokenizer_config.json has "
                        "none); give one with --chat-template FILE");
    if (!json_is_array(messages)) return rkv_fail(RKV_EINVAL, err, errlen, "messages: not an array");
    size_t n = json_array_size(messages);
    chat_message *m = calloc(n ? n : 1, sizeof *m);
    char **joined = calloc(n ? n : 1, sizeof *joined);
    rkv_status st = RKV_OK;
    if (!m || !joined) {
        st = rkv_fail(RKV_ENOMEM, err, errlen, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < n && !st; i++) {
        const json_t *e = json_array_get(messages, i);
        if (!json_is_object(e)) {
            st = rkv_fail(RKV_EINVAL, err, errlen, "messages[%zu]: not an object", i);
            break;
        }
        static const char *const refused[] = {"tool_calls", "tool_call_id", "function_call"};
        for (size_t k = 0; k < 3 && !st; k++) {
            const json_t *v = json_object_get(e, refused[k]);
            if (v && !json_is_null(v) && !(json_is_array(v) && json_array_size(v) == 0))
                st = rkv_fail(RKV_ENOTSUP, err, errlen,
                              "messages[%zu].%s: not supported by the built-in %s renderer", i,
                              refused[k], ct->name);
        }
        if (st) break;
        const json_t *role = json_object_get(e, "role"), *c = json_object_get(e, "content");
        if (!json_is_string(role)) {
            st = rkv_fail(RKV_EINVAL, err, errlen, "messages[%zu].role: missing or not a string", i);
            break;
        }
        m[i].role = json_string_value(role);
        if (strlen(m[i].role) != json_string_length(role)) {
            st = rkv_fail(RKV_EINVAL, err, errlen, "messages[%zu].role: holds a NUL", i);
            break;
        }
        if (json_is_string(c)) {
            m[i].content = json_string_value(c);
            m[i].content_len = json_string_length(c);
        } else if (json_is_array(c)) {
            /* text parts joined with "\n" */
            out_buf o = {0};
            for (size_t k = 0; k < json_array_size(c); k++) {
                const json_t *p = json_array_get(c, k);
                const char *type = json_string_value(json_object_get(p, "type"));
                const json_t *tx = json_object_get(p, "text");
                if (!type || strcmp(type, "text") || !json_is_string(tx)) {
                    st = rkv_fail(RKV_ENOTSUP, err, errlen,
                                  "messages[%zu].content[%zu]: only {\"type\": \"text\", "
                                  "\"text\": ...} parts are supported", i, k);
                    break;
                }
                if (k) put(&o, "\n", 1);
                put(&o, json_string_value(tx), json_string_length(tx));
            }
            if (!o.p) put(&o, "", 0);
            joined[i] = o.p;
            if (!st && o.oom) st = rkv_fail(RKV_ENOMEM, err, errlen, "out of memory");
            m[i].content = o.p;
            m[i].content_len = o.n;
        } else {
            st = rkv_fail(RKV_EINVAL, err, errlen,
                          "messages[%zu].content: missing or not a string or a list of text "
                          "parts", i);
        }
    }
    if (!st) st = chat_template_render(ct, m, n, add_generation_prompt, text, len, err, errlen);
done:
    if (joined)
        for (size_t i = 0; i < n; i++) free(joined[i]);
    free(joined);
    free(m);
    return st;
}
