/* test_tokenizer.c - the tokenizer and chat templates on hand-made inputs:
 * merges by rank, added tokens, decoding and its UTF-8 repair, and every
 * refusal naming its field (suite text). Exactness against Hugging Face on
 * large corpora is hf_tokenizer.py's and hf_chat_template.py's job. */
#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check_run.h"
#include "chat_template.h"
#include "tokenizer.h"

/* The GPT-2 byte map: the character byte b stands for in vocabulary strings. */
static void byte_char(int b, char out[3])
{
    bool keep = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
    int cp = b, extra = 0;
    if (!keep) {
        for (int x = 0; x < b; x++)
            if (!((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || (x >= 174))) extra++;
        cp = 256 + extra;
    }
    if (cp < 0x80) {
        out[0] = (char)cp;
        out[1] = 0;
    } else {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        out[2] = 0;
    }
}

/* A GPT-2-shaped tokenizer.json: ids 0..255 are the bytes, then
 * 256 "he", 257 "ll", 258 "hell" (merges in that rank order), 259 "<s>"
 * (an added special token), 260 "Ġw" ("Ġ" is the space). */
static json_t *tiny(void)
{
    json_t *vocab = json_object();
    for (int b = 0; b < 256; b++) {
        char c[3];
        byte_char(b, c);
        json_object_set_new(vocab, c, json_integer(b));
    }
    json_object_set_new(vocab, "he", json_integer(256));
    json_object_set_new(vocab, "ll", json_integer(257));
    json_object_set_new(vocab, "hell", json_integer(258));
    json_object_set_new(vocab, "\xC4\xA0w", json_integer(260));
    json_t *root = json_pack(
        "{s:n, s:n, s:[{s:i, s:s, s:b, s:b, s:b, s:b, s:b}], s:n,"
        " s:{s:s, s:b, s:b}, s:n, s:{s:s},"
        " s:{s:s, s:o, s:[s, s, s, s], s:n}}",
        "truncation", "padding",
        "added_tokens", "id", 259, "content", "<s>", "single_word", 0, "lstrip", 0, "rstrip", 0,
        "normalized", 0, "special", 1,
        "normalizer",
        "pre_tokenizer", "type", "ByteLevel", "add_prefix_space", 0, "use_regex", 1,
        "post_processor", "decoder", "type", "ByteLevel",
        "model", "type", "BPE", "vocab", vocab, "merges", "h e", "l l", "he ll", "\xC4\xA0 w",
        "dropout");
    ck_assert_ptr_nonnull(root);
    return root;
}

static rkv_status load_json(json_t *root, tokenizer **t, char *err, size_t errlen)
{
    char *s = json_dumps(root, JSON_COMPACT);
    ck_assert_ptr_nonnull(s);
    rkv_status st = tokenizer_load_text(s, strlen(s), "tokenizer.json", NULL, 0, t, err, errlen);
    free(s);
    json_decref(root);
    return st;
}

static void check_encode(const tokenizer *t, const char *text, const int32_t *want, size_t n)
{
    int32_t *ids;
    size_t m;
    char err[256];
    ck_assert_int_eq(tokenizer_encode(t, text, strlen(text), true, &ids, &m, err, sizeof err),
                     RKV_OK);
    ck_assert_uint_eq(m, n);
    for (size_t i = 0; i < n; i++) ck_assert_int_eq(ids[i], want[i]);
    free(ids);
}

START_TEST(test_merges_and_added)
{
    tokenizer *t;
    char err[256];
    ck_assert_int_eq(load_json(tiny(), &t, err, sizeof err), RKV_OK);
    ck_assert_int_eq(tokenizer_vocab_size(t), 261);
    /* "hello": h e -> he (rank 0), l l -> ll (1), he ll -> hell (2), then o */
    check_encode(t, "hello", (const int32_t[]){258, 'o'}, 2);
    /* "hhe": the pair h h has no merge; h e does */
    check_encode(t, "hhe", (const int32_t[]){'h', 256}, 2);
    /* the GPT-2 regex splits " w" off as a word with its space */
    check_encode(t, "a w", (const int32_t[]){'a', 260}, 2);
    /* the added token is matched before the regex, even inside a word */
    check_encode(t, "a<s>b", (const int32_t[]){'a', 259, 'b'}, 3);
    check_encode(t, "", (const int32_t[]){0}, 0);
    char *s;
    size_t n;
    const int32_t ids[] = {258, 'o', 259, 260};
    ck_assert_int_eq(tokenizer_decode(t, ids, 4, false, &s, &n, err, sizeof err), RKV_OK);
    ck_assert_str_eq(s, "hello<s> w");
    free(s);
    ck_assert_int_eq(tokenizer_decode(t, ids, 4, true, &s, &n, err, sizeof err), RKV_OK);
    ck_assert_str_eq(s, "hello w");
    free(s);
    /* one byte of a three-byte character: held as U+FFFD by decode */
    const int32_t cut[] = {0xE2, 0x82, 'A'};
    ck_assert_int_eq(tokenizer_decode(t, cut, 3, false, &s, &n, err, sizeof err), RKV_OK);
    ck_assert_str_eq(s, "\xEF\xBF\xBD" "A");
    free(s);
    ck_assert_int_eq(tokenizer_token_id(t, "<s>"), 259);
    ck_assert_int_eq(tokenizer_token_id(t, "hell"), 258);
    ck_assert_int_eq(tokenizer_token_id(t, "nope"), -1);
    tokenizer_free(t);
}
END_TEST

START_TEST(test_bad_text_and_ids)
{
    tokenizer *t;
    char err[256];
    ck_assert_int_eq(load_json(tiny(), &t, err, sizeof err), RKV_OK);
    int32_t *ids;
    size_t n;
    ck_assert_int_eq(tokenizer_encode(t, "abc\xff" "d", 5, true, &ids, &n, err, sizeof err),
                     RKV_EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "not valid UTF-8 at byte 3"));
    ck_assert_int_eq(tokenizer_encode(t, "ab\xed\xa0\x80", 5, true, &ids, &n, err, sizeof err),
                     RKV_EINVAL); /* an encoded surrogate */
    char *s;
    const int32_t bad[] = {1, 261};
    ck_assert_int_eq(tokenizer_decode(t, bad, 2, false, &s, &n, err, sizeof err), RKV_ERANGE);
    ck_assert_ptr_nonnull(strstr(err, "token 1: id 261"));
    const int32_t neg[] = {-1};
    ck_assert_int_eq(tokenizer_decode(t, neg, 1, false, &s, &n, err, sizeof err), RKV_ERANGE);
    tokenizer_free(t);
}
END_TEST

START_TEST(test_utf8_repair)
{
    static const struct {
        const char *in;
        size_t n;
        const char *want;
    } cases[] = {
        {"\xff", 1, "\xEF\xBF\xBD"},
        {"\xe2\x82", 2, "\xEF\xBF\xBD"},                       /* a cut 3-byte sequence */
        {"\xf0\x9f\x98" "A", 4, "\xEF\xBF\xBD" "A"},
        {"\xed\xa0\x80", 3, "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"}, /* a surrogate */
        {"\xc0\xaf", 2, "\xEF\xBF\xBD\xEF\xBF\xBD"},             /* overlong */
        {"\xf4\x90\x80\x80", 4, "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"},
        {"a\xc3\xa9z", 4, "a\xc3\xa9z"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t n;
        char *s = utf8_repair((const uint8_t *)cases[i].in, cases[i].n, &n);
        ck_assert_str_eq(s, cases[i].want);
        free(s);
    }
    ck_assert_uint_eq(utf8_valid_prefix((const uint8_t *)"ab\xe2\x82", 4), 2);
}
END_TEST

/* Loads tiny() with one change and expects st with every needle in err. */
static void refused(json_t *root, rkv_status st, const char *needle)
{
    tokenizer *t = NULL;
    char err[512] = "";
    ck_assert_int_eq(load_json(root, &t, err, sizeof err), st);
    ck_assert_ptr_null(t);
    ck_assert_msg(strstr(err, "tokenizer.json") && strstr(err, needle), "'%s' lacks '%s'", err,
                  needle);
}

START_TEST(test_refusals)
{
    tokenizer *t = NULL;
    char err[512];
    ck_assert_int_eq(tokenizer_load_text("{\"model\": [1,", 13, "tokenizer.json", NULL, 0, &t, err,
                                         sizeof err), RKV_EPARSE);
    ck_assert_ptr_nonnull(strstr(err, "tokenizer.json:1:"));
    json_t *r;
    r = tiny();
    json_object_set_new(json_object_get(r, "model"), "type", json_string("WordPiece"));
    refused(r, RKV_ENOTSUP, "model.type: 'WordPiece'");
    r = tiny();
    json_object_set_new(r, "normalizer", json_pack("{s:s}", "type", "NFKC"));
    refused(r, RKV_ENOTSUP, "normalizer.type: 'NFKC'");
    r = tiny();
    json_object_set_new(r, "pre_tokenizer", json_pack("{s:s}", "type", "Whitespace"));
    refused(r, RKV_ENOTSUP, "pre_tokenizer.type: 'Whitespace'");
    r = tiny();
    json_object_set_new(r, "pre_tokenizer", json_pack("{s:s, s:[{s:s, s:{s:s}, s:s}]}", "type",
                        "Sequence", "pretokenizers", "type", "Split", "pattern", "Regex", "\\s+",
                        "behavior", "Removed"));
    refused(r, RKV_ENOTSUP, "pre_tokenizer.pretokenizers[0].behavior: 'Removed'");
    r = tiny();
    json_object_set_new(r, "pre_tokenizer", json_pack("{s:s, s:[{s:s, s:{s:s}, s:s}]}", "type",
                        "Sequence", "pretokenizers", "type", "Split", "pattern", "Regex", "(a",
                        "behavior", "Isolated"));
    refused(r, RKV_EPARSE, "pre_tokenizer.pretokenizers[0].pattern.Regex: the regex does not compile");
    r = tiny();
    json_object_set_new(r, "pre_tokenizer", json_pack("{s:s, s:[{s:s, s:{s:s}, s:s}]}", "type",
                        "Sequence", "pretokenizers", "type", "Split", "pattern", "Regex", "\\s+",
                        "behavior", "Isolated"));
    refused(r, RKV_ENOTSUP, "no ByteLevel step");
    r = tiny();
    json_object_set_new(r, "decoder", json_pack("{s:s}", "type", "WordPiece"));
    refused(r, RKV_ENOTSUP, "decoder.type: 'WordPiece'");
    r = tiny();
    json_array_append_new(json_object_get(json_object_get(r, "model"), "merges"),
                          json_string("x zz"));
    refused(r, RKV_EPARSE, "model.merges[4]");
    r = tiny();
    json_object_set_new(json_array_get(json_object_get(r, "added_tokens"), 0), "lstrip",
                        json_true());
    refused(r, RKV_ENOTSUP, "added_tokens[0].lstrip");
    r = tiny();
    json_object_set_new(json_object_get(r, "model"), "byte_fallback", json_true());
    refused(r, RKV_ENOTSUP, "model.byte_fallback");
    r = tiny();
    json_object_set_new(json_object_get(json_object_get(r, "model"), "vocab"), "x",
                        json_integer(-3));
    refused(r, RKV_EPARSE, "model.vocab[\"x\"]");
    r = tiny();
    json_object_set_new(r, "post_processor", json_pack("{s:s}", "type", "RobertaProcessing"));
    refused(r, RKV_ENOTSUP, "post_processor.type: 'RobertaProcessing'");
    /* a config with a chat template list */
    const char *cfg = "{\"chat_template\": [{\"name\": \"default\", \"template\": \"x\"}]}";
    char *s = json_dumps(r = tiny(), JSON_COMPACT);
    json_decref(r);
    ck_assert_int_eq(tokenizer_load_text(s, strlen(s), "tokenizer.json", cfg, strlen(cfg), &t,
                                         err, sizeof err), RKV_ENOTSUP);
    ck_assert_ptr_nonnull(strstr(err, "tokenizer_config.json: chat_template"));
    /* config flags: add_bos/add_eos change nothing (the post-processor
     * decides, as in transformers), the forced clean-up and a non-boolean
     * flag are refused naming the field */
    static const struct {
        const char *cfg;
        rkv_status st;
        const char *needle;
    } flags[] = {
        {"{\"add_bos_token\": true, \"add_eos_token\": true, "
         "\"clean_up_tokenization_spaces\": true}", RKV_OK, NULL},
        {"{\"clean_up_tokenization_spaces\": true, "
         "\"clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output\": true}",
         RKV_ENOTSUP, "tokenizer_config.json: clean_up_tokenization_spaces: true with"},
        {"{\"add_eos_token\": \"yes\"}", RKV_EPARSE,
         "tokenizer_config.json: add_eos_token: not true, false or null"},
    };
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
        err[0] = 0;
        t = NULL;
        ck_assert_int_eq(tokenizer_load_text(s, strlen(s), "tokenizer.json", flags[i].cfg,
                                             strlen(flags[i].cfg), &t, err, sizeof err),
                         flags[i].st);
        if (flags[i].needle) {
            ck_assert_ptr_null(t);
            ck_assert_msg(strstr(err, flags[i].needle), "%s", err);
            continue;
        }
        int32_t *ids = NULL;
        size_t n = 0;
        ck_assert_int_eq(tokenizer_encode(t, "ab", 2, true, &ids, &n, err, sizeof err), RKV_OK);
        ck_assert_uint_eq(n, 2); /* tiny()'s ByteLevel post-processor adds neither BOS nor EOS */
        free(ids);
        tokenizer_free(t);
    }
    free(s);
}
END_TEST

/* ------------------------------------------------------ chat templates */

static char *read_template(const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.jinja", RKV_TEMPLATES_DIR, name);
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    static char buf[16384];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return buf;
}

START_TEST(test_chat_llama3)
{
    chat_template *ct;
    char err[512];
    const char *text = read_template("llama-3");
    ck_assert_int_eq(chat_template_create(text, "x", NULL, NULL, &ct, err, sizeof err), RKV_EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "needs bos_token"));
    ck_assert_int_eq(chat_template_create(text, "x", "<B>", NULL, &ct, err, sizeof err), RKV_OK);
    ck_assert_str_eq(chat_template_kind(ct), "llama-3");
    /* trim: Python's whitespace, U+3000 and the separators \x1c-\x1f included */
    chat_message m[] = {{"system", " \x1fS\t", 4}, {"user", "\xe3\x80\x80U \xe3\x80\x80", 8}};
    char *s;
    size_t n;
    ck_assert_int_eq(chat_template_render(ct, m, 2, true, &s, &n, err, sizeof err), RKV_OK);
    ck_assert_str_eq(s, "<B><|start_header_id|>system<|end_header_id|>\n\nS<|eot_id|>"
                        "<|start_header_id|>user<|end_header_id|>\n\nU<|eot_id|>"
                        "<|start_header_id|>assistant<|end_header_id|>\n\n");
    free(s);
    ck_assert_int_eq(chat_template_render(ct, m, 0, true, &s, &n, err, sizeof err), RKV_EINVAL);
    chat_message tool[] = {{"tool", "x", 1}};
    ck_assert_int_eq(chat_template_render(ct, tool, 1, true, &s, &n, err, sizeof err), RKV_ENOTSUP);
    ck_assert_ptr_nonnull(strstr(err, "messages[0].role: 'tool'"));
    chat_template_free(ct);
}
END_TEST

START_TEST(test_chat_llama31)
{
    chat_template *ct;
    char err[512];
    const char *text = read_template("llama-3.1");
    ck_assert_int_eq(chat_template_create(text, "x", NULL, NULL, &ct, err, sizeof err), RKV_EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "the llama-3.1 template needs bos_token"));
    ck_assert_int_eq(chat_template_create(text, "x", "<B>", NULL, &ct, err, sizeof err), RKV_OK);
    ck_assert_str_eq(chat_template_kind(ct), "llama-3.1");
    /* the system prompt stripped into the dated system block; without one the block is empty */
    chat_message m[] = {{"system", " S\n", 3}, {"user", "U ", 2}, {"assistant", "A", 1}};
    char *s;
    size_t n;
    ck_assert_int_eq(chat_template_render(ct, m, 3, false, &s, &n, err, sizeof err), RKV_OK);
    ck_assert_str_eq(s, "<B><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge "
                        "Date: December 2023\nToday Date: 26 Jul 2024\n\nS<|eot_id|>"
                        "<|start_header_id|>user<|end_header_id|>\n\nU<|eot_id|>"
                        "<|start_header_id|>assistant<|end_header_id|>\n\nA<|eot_id|>");
    free(s);
    ck_assert_int_eq(chat_template_render(ct, m + 1, 1, true, &s, &n, err, sizeof err), RKV_OK);
    ck_assert_str_eq(s, "<B><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge "
                        "Date: December 2023\nToday Date: 26 Jul 2024\n\n<|eot_id|>"
                        "<|start_header_id|>user<|end_header_id|>\n\nU<|eot_id|>"
                        "<|start_header_id|>assistant<|end_header_id|>\n\n");
    free(s);
    chat_message ipy[] = {{"user", "x", 1}, {"ipython", "{}", 2}};
    ck_assert_int_eq(chat_template_render(ct, ipy, 2, true, &s, &n, err, sizeof err), RKV_ENOTSUP);
    ck_assert_ptr_nonnull(strstr(err, "messages[1].role: 'ipython'"));
    chat_template_free(ct);
}
END_TEST

START_TEST(test_chat_llama32)
{
    chat_template *ct;
    char err[512];
    ck_assert_int_eq(chat_template_create(read_template("llama-3.2"), "x", "<B>", NULL, &ct, err,
                                          sizeof err), RKV_OK);
    ck_assert_str_eq(chat_template_kind(ct), "llama-3.2");
    chat_message m[] = {{"user", " U", 2}};
    char *s, day[64], want[512];
    size_t n;
    time_t now = time(NULL);
    struct tm tm;
    ck_assert_ptr_nonnull(localtime_r(&now, &tm));
    ck_assert_uint_gt(strftime(day, sizeof day, "%d %b %Y", &tm), 0);
    ck_assert_int_eq(chat_template_render(ct, m, 1, true, &s, &n, err, sizeof err), RKV_OK);
    snprintf(want, sizeof want, "<B><|start_header_id|>system<|end_header_id|>\n\nCutting "
             "Knowledge Date: December 2023\nToday Date: %s\n\n<|eot_id|>"
             "<|start_header_id|>user<|end_header_id|>\n\nU<|eot_id|>"
             "<|start_header_id|>assistant<|end_header_id|>\n\n", day);
    /* a render across midnight may hold the next day */
    if (strcmp(s, want)) {
        now = time(NULL);
        ck_assert_ptr_nonnull(localtime_r(&now, &tm));
        ck_assert_uint_gt(strftime(day, sizeof day, "%d %b %Y", &tm), 0);
        ck_assert_ptr_nonnull(strstr(s, day));
    }
    free(s);
    chat_template_free(ct);
}
END_TEST

START_TEST(test_chat_qwen_and_unknown)
{
    chat_template *ct;
    char err[512];
    const char *text = read_template("qwen2.5");
    ck_assert_int_eq(chat_template_create(text, "x", NULL, NULL, &ct, err, sizeof err), RKV_OK);
    json_t *msgs = json_pack("[{s:s, s:s}]", "role", "user", "content", "hi");
    char *s;
    size_t n;
    ck_assert_int_eq(chat_template_render_json(ct, msgs, false, &s, &n, err, sizeof err), RKV_OK);
    ck_assert_str_eq(s, "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a "
                        "helpful assistant.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n");
    free(s);
    json_decref(msgs);
    msgs = json_pack("[{s:s, s:[{s:s, s:s}, {s:s, s:s}]}]", "role", "user", "content", "type",
                     "text", "text", "a", "type", "text", "text", "b");
    ck_assert_int_eq(chat_template_render_json(ct, msgs, true, &s, &n, err, sizeof err), RKV_OK);
    ck_assert_ptr_nonnull(strstr(s, "user\na\nb<|im_end|>\n<|im_start|>assistant\n"));
    free(s);
    json_decref(msgs);
    msgs = json_pack("[{s:s, s:s, s:[{}]}]", "role", "assistant", "content", "", "tool_calls");
    ck_assert_int_eq(chat_template_render_json(ct, msgs, true, &s, &n, err, sizeof err),
                     RKV_ENOTSUP);
    ck_assert_ptr_nonnull(strstr(err, "messages[0].tool_calls"));
    json_decref(msgs);
    msgs = json_pack("[{s:s, s:i}]", "role", "user", "content", 3);
    ck_assert_int_eq(chat_template_render_json(ct, msgs, true, &s, &n, err, sizeof err), RKV_EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "messages[0].content"));
    json_decref(msgs);
    chat_template_free(ct);
    ck_assert_int_eq(chat_template_create("{{ messages }}", "my.jinja", NULL, NULL, &ct, err,
                                          sizeof err), RKV_ENOTSUP);
    ck_assert_ptr_nonnull(strstr(err, "my.jinja: unknown chat template"));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("tokenizer");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_merges_and_added);
    tcase_add_test(tc, test_bad_text_and_ids);
    tcase_add_test(tc, test_utf8_repair);
    tcase_add_test(tc, test_refusals);
    tcase_add_test(tc, test_chat_llama3);
    tcase_add_test(tc, test_chat_qwen_and_unknown);
    tcase_add_test(tc, test_chat_llama31);
    tcase_add_test(tc, test_chat_llama32);
    suite_add_tcase(s, tc);
    return check_run(s);
}
