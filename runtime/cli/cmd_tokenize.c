/* cmd_tokenize.c - `radixkv tokenize`: a model's tokenizer on the command
 * line, in batches (JSON Lines in, JSON Lines out), and the converter of text
 * datasets into radixkv token traces (see usage_tokenize). */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat_template.h"
#include "cli.h"
#include "commands.h"
#include "progress.h"
#include "rkv_core.h"
#include "tokenizer.h"

static void usage_tokenize(FILE *f)
{
    fprintf(f,
        "usage: radixkv tokenize --tokenizer DIR (--text STR | --ids LIST | --batch FILE |\n"
        "                                          --convert FILE) [options]\n"
        "\n"
        "The model's own tokenizer (DIR/tokenizer.json, DIR/tokenizer_config.json; byte-level\n"
        "BPE as in GPT-2, Qwen2/2.5, Llama-3), exact against Hugging Face's tokenizers.\n"
        "\n"
        "  --text STR        print {\"ids\": [...]} for STR\n"
        "  --ids 1,2,3       print {\"text\": \"...\"} for the ids\n"
        "  --batch FILE      JSON Lines (- for stdin), one answer line per line:\n"
        "                      {\"text\": S, \"add_special_tokens\": true}  -> {\"ids\": [...]}\n"
        "                      {\"ids\": [...], \"skip_special_tokens\": false} -> {\"text\": S}\n"
        "                      {\"messages\": [...], \"add_generation_prompt\": true}\n"
        "                                                       -> {\"text\": S, \"ids\": [...]}\n"
        "  --convert FILE    a text dataset -> a radixkv token trace (JSON Lines, the format\n"
        "                    `radixkv run` and `cache-sim` read). Each line (or element of a\n"
        "                    top-level JSON array) is one of:\n"
        "                      {\"messages\": [{\"role\": R, \"content\": S}, ...]}   (OpenAI chat)\n"
        "                      {\"conversations\": [{\"from\": \"human\"|\"gpt\"|\"system\",\n"
        "                                         \"value\": S}, ...]}           (ShareGPT)\n"
        "                      {\"prompt\": S} or {\"text\": S}                    (plain)\n"
        "                    A conversation gives one request per user turn whose prompt is\n"
        "                    the whole history rendered by the chat template (so turns share\n"
        "                    their prefix as a chat server sees them); max_tokens is the\n"
        "                    length of the assistant's answer that follows, else --max-tokens;\n"
        "                    ids are \"cN.tK\": entry N (0-based) of the dataset, turn K.\n"
        "  --output FILE     where --convert writes (default stdout)\n"
        "  --max-tokens N    (128) max_tokens of requests without an answer to measure\n"
        "  --chat-template FILE  a template file instead of tokenizer_config.json's\n"
        "  --no-special      --text: leave out the post-processor's BOS/EOS\n"
        "  --skip-special    --ids: leave out special tokens\n"
        "  --quiet           no progress on stderr\n");
}

/* Why there is no chat template, said when chat input needs one (the
 * command runs on one thread). */
static char no_template[512];

/* ------------------------------------------------------------ the JSON */

static json_t *ids_json(const int32_t *ids, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++)
        if (json_array_append_new(a, json_integer(ids[i]))) {
            json_decref(a);
            return NULL;
        }
    return a;
}

static void print_json(FILE *f, json_t *v)
{
    char *s = json_dumps(v, JSON_COMPACT | JSON_ENSURE_ASCII);
    if (s) fprintf(f, "%s\n", s);
    free(s);
}

/* ids of a JSON array into *ids (caller frees); where names it in err. */
static rkv_status ids_from_json(const json_t *a, int32_t **ids, size_t *n, const char *where,
                                char *err, size_t errlen)
{
    if (!json_is_array(a)) return rkv_fail(RKV_EPARSE, err, errlen, "%s: not an array", where);
    size_t m = json_array_size(a);
    int32_t *v = malloc((m ? m : 1) * sizeof *v);
    if (!v) return rkv_fail(RKV_ENOMEM, err, errlen, "%s: out of memory", where);
    for (size_t i = 0; i < m; i++) {
        const json_t *x = json_array_get(a, i);
        if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) > INT32_MAX) {
            free(v);
            return rkv_fail(RKV_EPARSE, err, errlen, "%s[%zu]: not a token id", where, i);
        }
        v[i] = (int32_t)json_integer_value(x);
    }
    *ids = v;
    *n = m;
    return RKV_OK;
}

static rkv_status encode_json(const tokenizer *t, const char *s, size_t n, bool special,
                              json_t **out, char *err, size_t errlen)
{
    int32_t *ids;
    size_t m;
    rkv_status st = tokenizer_encode(t, s, n, special, &ids, &m, err, errlen);
    if (st) return st;
    *out = ids_json(ids, m);
    free(ids);
    return *out ? RKV_OK : rkv_fail(RKV_ENOMEM, err, errlen, "out of memory");
}

/* One --batch line -> its answer (see usage). */
static rkv_status batch_line(const tokenizer *t, const chat_template *ct, const json_t *req,
                             json_t **ans, char *err, size_t errlen)
{
    *ans = NULL;
    if (!json_is_object(req)) return rkv_fail(RKV_EPARSE, err, errlen, "not a JSON object");
    const json_t *text = json_object_get(req, "text"), *ids = json_object_get(req, "ids");
    const json_t *msgs = json_object_get(req, "messages");
    rkv_status st;
    json_t *r = json_object();
    if (!r) return rkv_fail(RKV_ENOMEM, err, errlen, "out of memory");
    json_t *v = NULL;
    if (json_is_string(text)) {
        const json_t *sp = json_object_get(req, "add_special_tokens");
        st = encode_json(t, json_string_value(text), json_string_length(text),
                         !sp || json_is_true(sp), &v, err, errlen);
        if (!st) json_object_set_new(r, "ids", v);
    } else if (ids) {
        int32_t *iv;
        size_t n;
        st = ids_from_json(ids, &iv, &n, "ids", err, errlen);
        if (!st) {
            char *s;
            size_t sl;
            st = tokenizer_decode(t, iv, n, json_is_true(json_object_get(req, "skip_special_tokens")),
                                  &s, &sl, err, errlen);
            free(iv);
            if (!st) {
                json_object_set_new(r, "text", json_stringn(s, sl));
                free(s);
            }
        }
    } else if (msgs) {
        char *s = NULL;
        size_t sl = 0;
        const json_t *agp = json_object_get(req, "add_generation_prompt");
        st = !ct ? rkv_fail(RKV_EINVAL, err, errlen, "%s", no_template)
                 : chat_template_render_json(ct, msgs, !agp || json_is_true(agp), &s, &sl, err, errlen);
        if (!st) st = encode_json(t, s, sl, false, &v, err, errlen);
        if (!st) {
            json_object_set_new(r, "text", json_stringn(s, sl));
            json_object_set_new(r, "ids", v);
        }
        free(s);
    } else {
        st = rkv_fail(RKV_EPARSE, err, errlen, "needs \"text\" (a string), \"ids\" or \"messages\"");
    }
    if (st) {
        json_decref(r);
        return st;
    }
    *ans = r;
    return RKV_OK;
}

static int run_batch(const tokenizer *t, const chat_template *ct, const char *path)
{
    FILE *in = strcmp(path, "-") ? fopen(path, "rb") : stdin;
    if (!in) {
        fprintf(stderr, "radixkv tokenize: --batch %s: %s\n", path, strerror(errno));
        return 1;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t got;
    int64_t lineno = 0;
    int rc = 0;
    while ((got = getline(&line, &cap, in)) >= 0) {
        lineno++;
        json_error_t je;
        json_t *req = json_loadb(line, (size_t)got, JSON_ALLOW_NUL, &je), *ans = NULL;
        char err[512];
        rkv_status st = req ? batch_line(t, ct, req, &ans, err, sizeof err)
                            : rkv_fail(RKV_EPARSE, err, sizeof err, "%s", je.text);
        json_decref(req);
        if (st) {
            fprintf(stderr, "radixkv tokenize: %s:%" PRId64 ": %s\n", path, lineno, err);
            rc = 1;
            break;
        }
        print_json(stdout, ans);
        json_decref(ans);
    }
    free(line);
    if (in != stdin) fclose(in);
    if (fflush(stdout)) rc = 1;
    return rc;
}

/* ------------------------------------------------------------- convert */

typedef struct convert_ctx {
    const tokenizer *t;
    const chat_template *ct;
    FILE *out;
    int64_t max_tokens;
    int64_t requests, prompt_tokens;
} convert_ctx;

static rkv_status write_request(convert_ctx *c, const int32_t *ids, size_t n, int64_t max_tokens,
                                int64_t conv, int64_t turn, char *err, size_t errlen)
{
    if (n == 0) return rkv_fail(RKV_EPARSE, err, errlen, "turn %" PRId64 ": empty prompt", turn);
    json_t *r = json_object(), *a = ids_json(ids, n);
    if (!r || !a) {
        json_decref(r);
        json_decref(a);
        return rkv_fail(RKV_ENOMEM, err, errlen, "out of memory");
    }
    /* the id names the dataset entry and the turn: "c12.t3" (trace.h takes
     * no other fields) */
    char id[64];
    snprintf(id, sizeof id, "c%" PRId64 ".t%" PRId64, conv, turn);
    json_object_set_new(r, "id", json_string(id));
    json_object_set_new(r, "tokens", a);
    json_object_set_new(r, "max_tokens", json_integer(max_tokens));
    print_json(c->out, r);
    json_decref(r);
    c->requests++;
    c->prompt_tokens += (int64_t)n;
    return RKV_OK;
}

/* ShareGPT's {"from", "value"} turns as OpenAI {"role", "content"} messages. */
static rkv_status sharegpt_messages(const json_t *conv, json_t **out, char *err, size_t errlen)
{
    if (!json_is_array(conv)) return rkv_fail(RKV_EPARSE, err, errlen, "conversations: not an array");
    json_t *m = json_array();
    if (!m) return rkv_fail(RKV_ENOMEM, err, errlen, "out of memory");
    for (size_t i = 0; i < json_array_size(conv); i++) {
        const json_t *e = json_array_get(conv, i);
        const char *from = json_string_value(json_object_get(e, "from"));
        const json_t *val = json_object_get(e, "value");
        const char *role = !from ? NULL
                           : !strcmp(from, "human") || !strcmp(from, "user") ? "user"
                           : !strcmp(from, "gpt") || !strcmp(from, "assistant") || !strcmp(from, "chatgpt") ? "assistant"
                           : !strcmp(from, "system") ? "system" : NULL;
        if (!role || !json_is_string(val)) {
            json_decref(m);
            return rkv_fail(RKV_EPARSE, err, errlen,
                            "conversations[%zu]: needs \"from\" (human, gpt or system) and "
                            "\"value\" (a string)", i);
        }
        json_t *msg = json_pack("{s:s, s:O}", "role", role, "content", val);
        if (!msg || json_array_append_new(m, msg)) {
            json_decref(m);
            return rkv_fail(RKV_ENOMEM, err, errlen, "out of memory");
        }
    }
    *out = m;
    return RKV_OK;
}

/* One request per user turn: the history up to and including that user
 * message, rendered with the generation prompt; max_tokens is the length of
 * the assistant message that answers it, when the conversation has one. */
static rkv_status convert_chat(convert_ctx *c, const json_t *msgs, int64_t conv, char *err,
                               size_t errlen)
{
    if (!json_is_array(msgs)) return rkv_fail(RKV_EPARSE, err, errlen, "messages: not an array");
    if (!c->ct) return rkv_fail(RKV_EINVAL, err, errlen, "%s", no_template);
    size_t n = json_array_size(msgs);
    int64_t turn = 0;
    rkv_status st = RKV_OK;
    for (size_t i = 0; i < n && !st; i++) {
        const char *role = json_string_value(json_object_get(json_array_get(msgs, i), "role"));
        if (!role || strcmp(role, "user")) continue;
        json_t *hist = json_array();
        if (!hist) return rkv_fail(RKV_ENOMEM, err, errlen, "out of memory");
        for (size_t k = 0; k <= i; k++) json_array_append(hist, json_array_get(msgs, k));
        char *text = NULL;
        size_t tl = 0;
        st = chat_template_render_json(c->ct, hist, true, &text, &tl, err, errlen);
        json_decref(hist);
        int32_t *ids = NULL;
        size_t ni = 0;
        if (!st) st = tokenizer_encode(c->t, text, tl, false, &ids, &ni, err, errlen);
        free(text);
        int64_t max_tokens = c->max_tokens;
        const json_t *next = json_array_get(msgs, i + 1);
        const char *nrole = json_string_value(json_object_get(next, "role"));
        const json_t *ans = json_object_get(next, "content");
        if (!st && nrole && !strcmp(nrole, "assistant") && json_is_string(ans)) {
            int32_t *aid;
            size_t na;
            st = tokenizer_encode(c->t, json_string_value(ans), json_string_length(ans), false,
                                  &aid, &na, err, errlen);
            if (!st) {
                free(aid);
                if (na > 0) max_tokens = (int64_t)na;
            }
        }
        if (!st) st = write_request(c, ids, ni, max_tokens, conv, turn++, err, errlen);
        free(ids);
    }
    if (!st && turn == 0) st = rkv_fail(RKV_EPARSE, err, errlen, "no user message");
    return st;
}

static rkv_status convert_one(convert_ctx *c, const json_t *e, int64_t conv, char *err,
                              size_t errlen)
{
    if (!json_is_object(e)) return rkv_fail(RKV_EPARSE, err, errlen, "not a JSON object");
    const json_t *msgs = json_object_get(e, "messages");
    if (msgs) return convert_chat(c, msgs, conv, err, errlen);
    const json_t *sg = json_object_get(e, "conversations");
    if (!sg) sg = json_object_get(e, "conversation");
    if (sg) {
        json_t *m = NULL;
        rkv_status st = sharegpt_messages(sg, &m, err, errlen);
        if (st) return st;
        st = convert_chat(c, m, conv, err, errlen);
        json_decref(m);
        return st;
    }
    const json_t *p = json_object_get(e, "prompt");
    if (!p) p = json_object_get(e, "text");
    if (json_is_string(p)) {
        int32_t *ids;
        size_t n;
        rkv_status st = tokenizer_encode(c->t, json_string_value(p), json_string_length(p), true,
                                         &ids, &n, err, errlen);
        if (st) return st;
        const json_t *mt = json_object_get(e, "max_tokens");
        int64_t max_tokens = json_is_integer(mt) && json_integer_value(mt) > 0
                                 ? json_integer_value(mt) : c->max_tokens;
        st = write_request(c, ids, n, max_tokens, conv, 0, err, errlen);
        free(ids);
        return st;
    }
    return rkv_fail(RKV_EPARSE, err, errlen,
                    "needs \"messages\", \"conversations\", \"prompt\" or \"text\"");
}

static int run_convert(convert_ctx *c, const char *path, bool quiet)
{
    FILE *in = strcmp(path, "-") ? fopen(path, "rb") : stdin;
    if (!in) {
        fprintf(stderr, "radixkv tokenize: --convert %s: %s\n", path, strerror(errno));
        return 1;
    }
    int64_t total = 0;
    if (in != stdin && !fseek(in, 0, SEEK_END)) {
        total = ftell(in);
        rewind(in);
    }
    int first;
    do first = fgetc(in); while (first == ' ' || first == '\n' || first == '\r' || first == '\t');
    if (first != EOF) ungetc(first, in);
    char err[512];
    int rc = 0;
    progress pr;
    progress_start(&pr, "convert", "bytes", total, !quiet);
    if (first == '[') {
        /* a whole JSON array (ShareGPT's files): loaded at once */
        json_error_t je;
        json_t *root = json_loadf(in, JSON_ALLOW_NUL, &je);
        if (!root) {
            fprintf(stderr, "radixkv tokenize: %s:%d:%d: %s\n", path, je.line, je.column, je.text);
            rc = 1;
        }
        for (size_t i = 0; !rc && i < json_array_size(root); i++) {
            if (convert_one(c, json_array_get(root, i), (int64_t)i, err, sizeof err)) {
                fprintf(stderr, "radixkv tokenize: %s: element %zu: %s\n", path, i, err);
                rc = 1;
            }
            progress_update(&pr, total * (int64_t)(i + 1) / (int64_t)json_array_size(root));
        }
        json_decref(root);
    } else {
        char *line = NULL;
        size_t cap = 0;
        ssize_t got;
        int64_t lineno = 0, done = 0;
        while (!rc && (got = getline(&line, &cap, in)) >= 0) {
            lineno++;
            done += got;
            size_t k = 0;
            while (k < (size_t)got && strchr(" \t\r\n", line[k])) k++;
            if (k == (size_t)got) continue; /* blank line */
            json_error_t je;
            json_t *e = json_loadb(line, (size_t)got, JSON_ALLOW_NUL, &je);
            rkv_status st = e ? convert_one(c, e, lineno - 1, err, sizeof err)
                              : rkv_fail(RKV_EPARSE, err, sizeof err, "%s", je.text);
            json_decref(e);
            if (st) {
                fprintf(stderr, "radixkv tokenize: %s:%" PRId64 ": %s\n", path, lineno, err);
                rc = 1;
            }
            progress_update(&pr, done);
        }
        free(line);
    }
    progress_finish(&pr);
    if (in != stdin) fclose(in);
    if (!rc && !quiet)
        fprintf(stderr, "radixkv tokenize: %" PRId64 " requests, %" PRId64 " prompt tokens\n",
                c->requests, c->prompt_tokens);
    return rc;
}

/* --------------------------------------------------------------- main */

/* --ids: decode "1,2,3" and print {"text"}; the exit status. */
static int decode_ids(tokenizer *t, const char *ids, bool skip_special)
{
    char err[512];
    int rc = 0;
    /* "1,2,3" -> a JSON array, so one parser reads both */
    size_t n = strlen(ids);
    char *js = malloc(n + 3);
    json_t *arr = NULL;
    if (js) {
        snprintf(js, n + 3, "[%s]", ids);
        arr = json_loads(js, 0, NULL);
        free(js);
    }
    int32_t *iv = NULL;
    size_t m = 0;
    char *s = NULL;
    size_t sl;
    if (!arr || ids_from_json(arr, &iv, &m, "--ids", err, sizeof err) ||
        tokenizer_decode(t, iv, m, skip_special, &s, &sl, err, sizeof err)) {
        fprintf(stderr, "radixkv tokenize: --ids: %s\n",
                arr ? err : "not a comma-separated list of integers");
        rc = arr ? 1 : 2;
    } else {
        json_t *r = json_pack("{s:s%}", "text", s, sl);
        print_json(stdout, r);
        json_decref(r);
    }
    json_decref(arr);
    free(iv);
    free(s);
    return rc;
}

int cmd_tokenize(int argc, char **argv)
{
    const char *dir = NULL, *text = NULL, *ids = NULL, *batch = NULL, *convert = NULL;
    const char *output = NULL, *tmpl_path = NULL;
    int64_t max_tokens = 128;
    bool no_special = false, skip_special = false, quiet = false;
    cli_opt opts[] = {
        CLI_STR_OPT("--tokenizer", &dir),
        CLI_STR_OPT("--text", &text),
        CLI_STR_OPT("--ids", &ids),
        CLI_STR_OPT("--batch", &batch),
        CLI_STR_OPT("--convert", &convert),
        CLI_STR_OPT("--output", &output),
        CLI_STR_OPT("--chat-template", &tmpl_path),
        CLI_INT_OPT("--max-tokens", &max_tokens, 1, INT32_MAX),
        CLI_FLAG_OPT("--no-special", &no_special),
        CLI_FLAG_OPT("--skip-special", &skip_special),
        CLI_FLAG_OPT("--quiet", &quiet),
        CLI_END,
    };
    cli_args a;
    int rc = cli_command("tokenize", opts, argc, argv, &a, usage_tokenize);
    if (rc >= 0) return rc;
    int modes = !!text + !!ids + !!batch + !!convert;
    if (!dir || modes != 1 || a.npos) {
        fprintf(stderr, "radixkv tokenize: needs --tokenizer DIR and exactly one of --text, "
                        "--ids, --batch, --convert (see --help)\n");
        return 2;
    }
    if (output && !convert) {
        fprintf(stderr, "radixkv tokenize: --output goes with --convert\n");
        return 2;
    }
    char err[512];
    tokenizer *t;
    if (tokenizer_load(dir, &t, err, sizeof err)) {
        fprintf(stderr, "radixkv tokenize: %s\n", err);
        return 1;
    }
    /* the chat template: --chat-template's file, else the tokenizer config's */
    chat_template *ct = NULL;
    char *tmpl_text = NULL;
    const char *tmpl_src = tokenizer_chat_template(t);
    const char *tmpl_name = "tokenizer_config.json: chat_template";
    if (tmpl_path) {
        size_t tmpl_len;
        if (rkv_read_file(tmpl_path, 0, &tmpl_text, &tmpl_len, err, sizeof err)) {
            fprintf(stderr, "radixkv tokenize: --chat-template %s\n", err);
            tokenizer_free(t);
            return 1;
        }
        tmpl_src = tmpl_text;
        tmpl_name = tmpl_path;
    }
    /* only chat input needs a template: a missing or unknown one is said then */
    if (!tmpl_src)
        snprintf(no_template, sizeof no_template, "%s/tokenizer_config.json has no chat_template; "
                 "give one with --chat-template FILE", dir);
    else if (chat_template_create(tmpl_src, tmpl_name, tokenizer_bos_token(t),
                                  tokenizer_eos_token(t), &ct, no_template, sizeof no_template))
        ct = NULL;
    rc = 0;
    if (text) {
        json_t *v = NULL;
        if (encode_json(t, text, strlen(text), !no_special, &v, err, sizeof err)) {
            fprintf(stderr, "radixkv tokenize: --text: %s\n", err);
            rc = 1;
        } else {
            json_t *r = json_pack("{s:o}", "ids", v);
            print_json(stdout, r);
            json_decref(r);
        }
    } else if (ids) {
        rc = decode_ids(t, ids, skip_special);
    } else if (batch) {
        rc = run_batch(t, ct, batch);
    } else {
        convert_ctx c = {.t = t, .ct = ct, .max_tokens = max_tokens, .out = stdout};
        if (output && !(c.out = fopen(output, "w"))) {
            fprintf(stderr, "radixkv tokenize: --output %s: %s\n", output, strerror(errno));
            rc = 1;
        } else {
            rc = run_convert(&c, convert, quiet);
            if (output && fclose(c.out)) {
                fprintf(stderr, "radixkv tokenize: --output %s: %s\n", output, strerror(errno));
                rc = 1;
            }
        }
    }
    chat_template_free(ct);
    free(tmpl_text);
    tokenizer_free(t);
    return rc;
}
