/* test_model_config.c - presets and config.json parsing (suite runtime). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check_run.h"
#include "model_config.h"

static char tmpdir[256];

static void setup(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/rkv_cfgXXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void teardown(void)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    ck_assert_int_eq(system(cmd), 0);
}

static const char *write_cfg(const char *text)
{
    static char path[512];
    snprintf(path, sizeof path, "%s/config.json", tmpdir);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
    return path;
}

START_TEST(presets_valid)
{
    char err[256];
    const char *const *names = model_config_preset_names();
    int n = 0;
    for (; names[n]; n++) {
        model_config c;
        ck_assert_int_eq(model_config_preset(names[n], &c, err, sizeof err), RKV_OK);
        ck_assert_str_eq(c.name, names[n]);
        ck_assert_msg(model_config_check(&c, err, sizeof err) == RKV_OK, "%s: %s", names[n], err);
    }
    ck_assert_int_eq(n, 5);
    model_config c;
    ck_assert_int_eq(model_config_preset(NULL, &c, err, sizeof err), RKV_OK);
    ck_assert_str_eq(c.name, "default");
    ck_assert_int_eq(c.head_dim, 64);
    ck_assert_int_eq(model_config_preset("qwen2.5-0.5b", &c, err, sizeof err), RKV_OK);
    /* Qwen2.5-0.5B is known to have ~494M parameters. */
    int64_t p = model_config_num_params(&c);
    ck_assert_msg(p > 480000000 && p < 500000000, "qwen2.5-0.5b params %lld", (long long)p);
    ck_assert_int_eq(model_config_preset("llama-3-8b", &c, err, sizeof err), RKV_OK);
    p = model_config_num_params(&c);
    ck_assert_msg(p > 8000000000LL && p < 8100000000LL, "llama-3-8b params %lld", (long long)p);
    ck_assert_int_eq(model_config_kv_bytes_per_token(&c, 2), 2 * 32 * 8 * 128 * 2);
    ck_assert_int_eq(model_config_preset("gpt-9", &c, err, sizeof err), RKV_EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "gpt-9"));
    ck_assert_ptr_nonnull(strstr(err, "qwen2.5-7b"));
}
END_TEST

START_TEST(parse_qwen2)
{
    const char *path = write_cfg(
        "{\"model_type\": \"qwen2\", \"vocab_size\": 1000, \"hidden_size\": 128,"
        " \"intermediate_size\": 300, \"num_hidden_layers\": 2, \"num_attention_heads\": 2,"
        " \"num_key_value_heads\": 1, \"rope_theta\": 1000000.0, \"rms_norm_eps\": 1e-06,"
        " \"tie_word_embeddings\": true, \"max_position_embeddings\": 512,"
        " \"hidden_act\": \"silu\", \"eos_token_id\": [7, 8], \"use_sliding_window\": false,"
        " \"rope_scaling\": null}");
    model_config c;
    char err[512];
    ck_assert_msg(model_config_from_json(path, &c, err, sizeof err) == RKV_OK, "%s", err);
    ck_assert_int_eq(c.arch, MODEL_ARCH_QWEN2);
    ck_assert_int_eq(c.qkv_bias, 1);
    ck_assert_int_eq(c.head_dim, 64);
    ck_assert_int_eq(c.num_kv_heads, 1);
    ck_assert_int_eq(c.tie_word_embeddings, 1);
    ck_assert_int_eq(c.eos_token_id, 7);
    ck_assert_int_eq(c.max_position, 512);
    ck_assert(c.rope_theta == 1e6 && c.rms_eps == 1e-6);
    /* A directory works through model_config_load. */
    model_config d;
    ck_assert_int_eq(model_config_load(tmpdir, &d, err, sizeof err), RKV_OK);
    ck_assert_int_eq(d.vocab_size, 1000);
}
END_TEST

START_TEST(parse_llama_defaults_and_rope_parameters)
{
    const char *path = write_cfg(
        "{\"model_type\": \"llama\", \"vocab_size\": 500, \"hidden_size\": 256,"
        " \"intermediate_size\": 300, \"num_hidden_layers\": 1, \"num_attention_heads\": 2,"
        " \"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\": 5000.0}}");
    model_config c;
    char err[512];
    ck_assert_msg(model_config_from_json(path, &c, err, sizeof err) == RKV_OK, "%s", err);
    ck_assert_int_eq(c.arch, MODEL_ARCH_LLAMA);
    ck_assert_int_eq(c.qkv_bias, 0);
    ck_assert_int_eq(c.head_dim, 128);
    ck_assert_int_eq(c.num_kv_heads, 2);
    ck_assert_int_eq(c.tie_word_embeddings, 0);
    ck_assert(c.rope_theta == 5000.0);
    ck_assert_int_eq(c.eos_token_id, -1);
}
END_TEST

/* Each rejected file must name the file and the field. */
START_TEST(rejections)
{
    static const struct { const char *json; rkv_status st; const char *field; } cases[] = {
        {"{\"model_type\": \"gpt2\"}", RKV_ENOTSUP, "model_type"},
        {"{\"vocab_size\": 5}", RKV_EPARSE, "model_type"},
        {"{\"model_type\": \"llama\", \"hidden_size\": 128}", RKV_EPARSE, "vocab_size"},
        {"{\"model_type\": \"llama\", \"vocab_size\": \"x\"}", RKV_EPARSE, "vocab_size"},
        {"{\"model_type\": \"llama\", \"vocab_size\": 10, \"hidden_size\": 96,"
         " \"intermediate_size\": 8, \"num_hidden_layers\": 1, \"num_attention_heads\": 3}",
         RKV_ENOTSUP, "head_dim"},
        {"{\"model_type\": \"llama\", \"vocab_size\": 10, \"hidden_size\": 128,"
         " \"intermediate_size\": 8, \"num_hidden_layers\": 1, \"num_attention_heads\": 2,"
         " \"num_key_value_heads\": 3}", RKV_ENOTSUP, "num_key_value_heads"},
        {"{\"model_type\": \"llama\", \"vocab_size\": 10, \"hidden_size\": 128,"
         " \"intermediate_size\": 8, \"num_hidden_layers\": 1, \"num_attention_heads\": 2,"
         " \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8.0}}", RKV_ENOTSUP,
         "rope_scaling"},
        {"{\"model_type\": \"llama\", \"vocab_size\": 10, \"hidden_size\": 128,"
         " \"intermediate_size\": 8, \"num_hidden_layers\": 1, \"num_attention_heads\": 2,"
         " \"attention_bias\": true}", RKV_ENOTSUP, "attention_bias"},
        {"{\"model_type\": \"llama\", \"vocab_size\": 10, \"hidden_size\": 128,"
         " \"intermediate_size\": 8, \"num_hidden_layers\": 1, \"num_attention_heads\": 2,"
         " \"hidden_act\": \"gelu\"}", RKV_ENOTSUP, "hidden_act"},
        {"{\"model_type\": \"qwen2\", \"vocab_size\": 10, \"hidden_size\": 128,"
         " \"intermediate_size\": 8, \"num_hidden_layers\": 1, \"num_attention_heads\": 2,"
         " \"use_sliding_window\": true}", RKV_ENOTSUP, "use_sliding_window"},
        {"{\"model_type\": \"llama\", \"vocab_size\": 10, \"hidden_size\": 128,"
         " \"intermediate_size\": 8, \"num_hidden_layers\": 0, \"num_attention_heads\": 2}",
         RKV_ENOTSUP, "num_hidden_layers"},
        {"{\"model_type\": \"llama\", \"vocab_size\": 10, \"hidden_size\": 128,"
         " \"intermediate_size\": 8, \"num_hidden_layers\": 1, \"num_attention_heads\": 2,"
         " \"rms_norm_eps\": -1}", RKV_ENOTSUP, "rms_norm_eps"},
        /* Issue 29 item 3: an eos id outside the vocabulary was dropped silently. */
        {"{\"model_type\": \"llama\", \"vocab_size\": 10, \"hidden_size\": 128,"
         " \"intermediate_size\": 8, \"num_hidden_layers\": 1, \"num_attention_heads\": 2,"
         " \"eos_token_id\": 10}", RKV_EINVAL, "'eos_token_id' = 10 is outside the vocabulary"},
        {"{\"model_type\": \"llama\", \"vocab_size\": 10, \"hidden_size\": 128,"
         " \"intermediate_size\": 8, \"num_hidden_layers\": 1, \"num_attention_heads\": 2,"
         " \"eos_token_id\": [3, -1]}", RKV_EINVAL, "'eos_token_id[1]' = -1"},
        {"{\"model_type\": \"llama\", \"vocab_size\": 10, \"hidden_size\": 128,"
         " \"intermediate_size\": 8, \"num_hidden_layers\": 1, \"num_attention_heads\": 2,"
         " \"eos_token_id\": \"2\"}", RKV_EPARSE, "'eos_token_id' must be an integer"},
        {"{\"model_type\": \"llama\", \"vocab_size\": 10,", RKV_EPARSE, "bad JSON"},
        {"[1, 2]", RKV_EPARSE, "object"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *path = write_cfg(cases[i].json);
        model_config c;
        char err[512] = "";
        rkv_status st = model_config_from_json(path, &c, err, sizeof err);
        ck_assert_msg(st == cases[i].st, "case %zu: status %d, want %d (%s)", i, st, cases[i].st,
                      err);
        ck_assert_msg(strstr(err, path) != NULL, "case %zu: file not named: %s", i, err);
        ck_assert_msg(strstr(err, cases[i].field) != NULL, "case %zu: '%s' not named: %s", i,
                      cases[i].field, err);
    }
    model_config c;
    char err[512];
    ck_assert_int_eq(model_config_load("/nonexistent/dir", &c, err, sizeof err), RKV_EIO);
    ck_assert_ptr_nonnull(strstr(err, "/nonexistent/dir"));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("model_config");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, presets_valid);
    tcase_add_test(tc, parse_qwen2);
    tcase_add_test(tc, parse_llama_defaults_and_rope_parameters);
    tcase_add_test(tc, rejections);
    suite_add_tcase(s, tc);
    return check_run(s);
}
