/* model_config.c - presets and Hugging Face config.json parsing; see model_config.h. */
#include "model_config.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

/* Real shapes from the published config.json files. The default is ours: a
 * model that runs a few hundred tokens per second per core, with head_dim 64
 * so it exercises the same attention path as Qwen2.5-0.5B. */
typedef struct preset {
    const char *name;
    model_config cfg;
} preset;

static const preset presets[] = {
    {"default", {.arch = MODEL_ARCH_LLAMA, .vocab_size = 4096, .hidden_size = 256,
                 .intermediate_size = 688, .num_layers = 4, .num_heads = 8,
                 .num_kv_heads = 2, .head_dim = 64, .rope_theta = 10000.0,
                 .rms_eps = 1e-5, .tie_word_embeddings = 1, .qkv_bias = 0,
                 .max_position = 16384, .eos_token_id = -1}},
    {"qwen2.5-0.5b", {.arch = MODEL_ARCH_QWEN2, .vocab_size = 151936, .hidden_size = 896,
                      .intermediate_size = 4864, .num_layers = 24, .num_heads = 14,
                      .num_kv_heads = 2, .head_dim = 64, .rope_theta = 1000000.0,
                      .rms_eps = 1e-6, .tie_word_embeddings = 1, .qkv_bias = 1,
                      .max_position = 32768, .eos_token_id = 151643}},
    {"qwen2.5-3b", {.arch = MODEL_ARCH_QWEN2, .vocab_size = 151936, .hidden_size = 2048,
                    .intermediate_size = 11008, .num_layers = 36, .num_heads = 16,
                    .num_kv_heads = 2, .head_dim = 128, .rope_theta = 1000000.0,
                    .rms_eps = 1e-6, .tie_word_embeddings = 1, .qkv_bias = 1,
                    .max_position = 32768, .eos_token_id = 151643}},
    {"qwen2.5-7b", {.arch = MODEL_ARCH_QWEN2, .vocab_size = 152064, .hidden_size = 3584,
                    .intermediate_size = 18944, .num_layers = 28, .num_heads = 28,
                    .num_kv_heads = 4, .head_dim = 128, .rope_theta = 1000000.0,
                    .rms_eps = 1e-6, .tie_word_embeddings = 0, .qkv_bias = 1,
                    .max_position = 32768, .eos_token_id = 151643}},
    {"llama-3-8b", {.arch = MODEL_ARCH_LLAMA, .vocab_size = 128256, .hidden_size = 4096,
                    .intermediate_size = 14336, .num_layers = 32, .num_heads = 32,
                    .num_kv_heads = 8, .head_dim = 128, .rope_theta = 500000.0,
                    .rms_eps = 1e-5, .tie_word_embeddings = 0, .qkv_bias = 0,
                    .max_position = 8192, .eos_token_id = 128001}},
};
#define NUM_PRESETS (sizeof presets / sizeof presets[0])

static const char *const preset_names[] = {"default", "qwen2.5-0.5b", "qwen2.5-3b",
                                           "qwen2.5-7b", "llama-3-8b", NULL};

const char *const *model_config_preset_names(void) { return preset_names; }

rkv_status model_config_preset(const char *name, model_config *out, char *err, size_t errlen)
{
    if (!name || !strcmp(name, "small")) name = MODEL_CONFIG_DEFAULT;
    for (size_t i = 0; i < NUM_PRESETS; i++) {
        if (!strcmp(presets[i].name, name)) {
            *out = presets[i].cfg;
            snprintf(out->name, sizeof out->name, "%s", presets[i].name);
            return RKV_OK;
        }
    }
    char known[256] = "";
    for (size_t i = 0; preset_names[i]; i++) {
        strncat(known, i ? ", " : "", sizeof known - strlen(known) - 1);
        strncat(known, preset_names[i], sizeof known - strlen(known) - 1);
    }
    return rkv_fail(RKV_EINVAL, err, errlen, "unknown model preset '%s' (known: %s, or a config.json path)",
                name, known);
}

rkv_status model_config_check(const model_config *c, char *err, size_t errlen)
{
    struct { const char *field; int64_t v; } pos[] = {
        {"vocab_size", c->vocab_size}, {"hidden_size", c->hidden_size},
        {"intermediate_size", c->intermediate_size}, {"num_hidden_layers", c->num_layers},
        {"num_attention_heads", c->num_heads}, {"num_key_value_heads", c->num_kv_heads},
        {"max_position_embeddings", c->max_position},
    };
    for (size_t i = 0; i < sizeof pos / sizeof pos[0]; i++)
        if (pos[i].v < 1)
            return rkv_fail(RKV_EINVAL, err, errlen, "model %s: %s must be >= 1 (got %lld)", c->name,
                        pos[i].field, (long long)pos[i].v);
    if (c->num_heads % c->num_kv_heads)
        return rkv_fail(RKV_EINVAL, err, errlen,
                    "model %s: num_attention_heads (%d) is not a multiple of "
                    "num_key_value_heads (%d)", c->name, c->num_heads, c->num_kv_heads);
    if (c->head_dim != 64 && c->head_dim != 128)
        return rkv_fail(RKV_EINVAL, err, errlen,
                    "model %s: head_dim %d not supported (attention supports 64 and 128)",
                    c->name, c->head_dim);
    if (!(c->rope_theta > 0) || !isfinite(c->rope_theta))
        return rkv_fail(RKV_EINVAL, err, errlen, "model %s: rope_theta must be > 0", c->name);
    if (!(c->rms_eps > 0) || !isfinite(c->rms_eps))
        return rkv_fail(RKV_EINVAL, err, errlen, "model %s: rms_norm_eps must be > 0", c->name);
    if (c->eos_token_id >= c->vocab_size)
        return rkv_fail(RKV_EINVAL, err, errlen, "model %s: eos_token_id %d outside the vocabulary",
                    c->name, c->eos_token_id);
    return RKV_OK;
}

/* ---- config.json ---------------------------------------------------------- */

/* Integer field: required unless def_ok; a non-integer is a parse error. */
static rkv_status get_int(json_t *root, const char *path, const char *field, int have_def,
                          int64_t def, int64_t lo, int64_t hi, int32_t *out, char *err,
                          size_t errlen)
{
    json_t *v = json_object_get(root, field);
    if (!v || json_is_null(v)) {
        if (!have_def)
            return rkv_fail(RKV_EPARSE, err, errlen, "%s: missing field '%s'", path, field);
        *out = (int32_t)def;
        return RKV_OK;
    }
    if (!json_is_integer(v))
        return rkv_fail(RKV_EPARSE, err, errlen, "%s: field '%s' must be an integer", path, field);
    json_int_t x = json_integer_value(v);
    if (x < lo || x > hi)
        return rkv_fail(RKV_ENOTSUP, err, errlen, "%s: field '%s' = %lld outside [%lld, %lld]", path,
                    field, (long long)x, (long long)lo, (long long)hi);
    *out = (int32_t)x;
    return RKV_OK;
}

static rkv_status get_num(json_t *obj, const char *path, const char *field, double def,
                          double *out, char *err, size_t errlen)
{
    json_t *v = json_object_get(obj, field);
    if (!v || json_is_null(v)) {
        *out = def;
        return RKV_OK;
    }
    if (!json_is_number(v))
        return rkv_fail(RKV_EPARSE, err, errlen, "%s: field '%s' must be a number", path, field);
    *out = json_number_value(v);
    if (!(*out > 0) || !isfinite(*out))
        return rkv_fail(RKV_ENOTSUP, err, errlen, "%s: field '%s' must be > 0", path, field);
    return RKV_OK;
}

static rkv_status get_bool(json_t *root, const char *path, const char *field, int def, int *out,
                           char *err, size_t errlen)
{
    json_t *v = json_object_get(root, field);
    if (!v || json_is_null(v)) {
        *out = def;
        return RKV_OK;
    }
    if (!json_is_boolean(v))
        return rkv_fail(RKV_EPARSE, err, errlen, "%s: field '%s' must be true or false", path, field);
    *out = json_is_true(v);
    return RKV_OK;
}

/* Checks that only change what the model computes (and that we do not
 * implement) must reject the file rather than silently compute something else. */
/* RoPE: older files carry rope_theta at the top; newer transformers write
 * rope_parameters {rope_type, rope_theta}. Only plain RoPE is implemented. */
static rkv_status parse_rope(json_t *root, const char *path, model_config *c, char *err,
                             size_t errlen)
{
    rkv_status st;
    if ((st = get_num(root, path, "rope_theta", 10000.0, &c->rope_theta, err, errlen)))
        return st;
    const char *scaling_fields[] = {"rope_scaling", "rope_parameters"};
    for (int i = 0; i < 2; i++) {
        json_t *rs = json_object_get(root, scaling_fields[i]);
        if (!rs || json_is_null(rs)) continue;
        if (!json_is_object(rs))
            return rkv_fail(RKV_EPARSE, err, errlen, "%s: field '%s' must be an object or null", path,
                        scaling_fields[i]);
        json_t *rt = json_object_get(rs, "rope_type");
        if (!rt) rt = json_object_get(rs, "type");
        if (rt && !(json_is_string(rt) && !strcmp(json_string_value(rt), "default")))
            return rkv_fail(RKV_ENOTSUP, err, errlen,
                        "%s: field '%s' asks for RoPE scaling \"%s\"; only plain RoPE is "
                        "supported", path, scaling_fields[i],
                        json_is_string(rt) ? json_string_value(rt) : "?");
        if ((st = get_num(rs, path, "rope_theta", c->rope_theta, &c->rope_theta, err, errlen)))
            return st;
    }
    return RKV_OK;
}

/* eos_token_id may be null, an integer or a list (the first one stops).
 * Each id must be a token of the vocabulary: one outside it could never
 * be sampled, so generation would silently never stop at it. */
static rkv_status parse_eos(json_t *root, const char *path, model_config *c, char *err,
                            size_t errlen)
{
    c->eos_token_id = -1;
    json_t *eos = json_object_get(root, "eos_token_id");
    size_t neos = json_is_array(eos) ? json_array_size(eos) : eos && !json_is_null(eos);
    for (size_t i = 0; i < neos; i++) {
        json_t *x = json_is_array(eos) ? json_array_get(eos, i) : eos;
        char where[48] = "";
        if (json_is_array(eos)) snprintf(where, sizeof where, "[%zu]", i);
        if (!json_is_integer(x))
            return rkv_fail(RKV_EPARSE, err, errlen, "%s: field 'eos_token_id%s' must be an integer",
                            path, where);
        json_int_t e = json_integer_value(x);
        if (e < 0 || e >= c->vocab_size)
            return rkv_fail(RKV_EINVAL, err, errlen,
                            "%s: field 'eos_token_id%s' = %lld is outside the vocabulary [0, %d)",
                            path, where, (long long)e, c->vocab_size);
        if (i == 0) c->eos_token_id = (int32_t)e;
    }
    return RKV_OK;
}

static rkv_status parse_config(json_t *root, const char *path, model_config *c, char *err,
                               size_t errlen)
{
    rkv_status st;
    if (!json_is_object(root))
        return rkv_fail(RKV_EPARSE, err, errlen, "%s: top level is not a JSON object", path);

    json_t *mt = json_object_get(root, "model_type");
    if (!json_is_string(mt))
        return rkv_fail(RKV_EPARSE, err, errlen, "%s: missing field 'model_type' (a string)", path);
    const char *type = json_string_value(mt);
    if (!strcmp(type, "llama")) c->arch = MODEL_ARCH_LLAMA;
    else if (!strcmp(type, "qwen2")) c->arch = MODEL_ARCH_QWEN2;
    else
        return rkv_fail(RKV_ENOTSUP, err, errlen,
                    "%s: field 'model_type' = \"%s\" not supported (llama, qwen2)", path, type);
    c->qkv_bias = c->arch == MODEL_ARCH_QWEN2;

    const int64_t big = INT32_MAX;
    if ((st = get_int(root, path, "vocab_size", 0, 0, 1, big, &c->vocab_size, err, errlen)) ||
        (st = get_int(root, path, "hidden_size", 0, 0, 1, big, &c->hidden_size, err, errlen)) ||
        (st = get_int(root, path, "intermediate_size", 0, 0, 1, big, &c->intermediate_size, err,
                      errlen)) ||
        /* Layers bound the per-layer tables sized before any weight: 2^31
         * layers once grew without end instead of naming the field. */
        (st = get_int(root, path, "num_hidden_layers", 0, 0, 1, MODEL_MAX_LAYERS, &c->num_layers,
                      err, errlen)) ||
        (st = get_int(root, path, "num_attention_heads", 0, 0, 1, big, &c->num_heads, err,
                      errlen)))
        return st;
    if ((st = get_int(root, path, "num_key_value_heads", 1, c->num_heads, 1, c->num_heads,
                      &c->num_kv_heads, err, errlen)))
        return st;
    if (c->num_heads % c->num_kv_heads)
        return rkv_fail(RKV_ENOTSUP, err, errlen,
                    "%s: field 'num_key_value_heads' = %d does not divide "
                    "num_attention_heads = %d", path, c->num_kv_heads, c->num_heads);
    int32_t def_hd = c->hidden_size / c->num_heads;
    if ((st = get_int(root, path, "head_dim", 1, def_hd, 1, big, &c->head_dim, err, errlen)))
        return st;
    if (c->head_dim != 64 && c->head_dim != 128)
        return rkv_fail(RKV_ENOTSUP, err, errlen,
                    "%s: field 'head_dim' = %d (hidden_size / num_attention_heads when absent) "
                    "not supported: attention supports 64 and 128", path, c->head_dim);
    if ((st = get_int(root, path, "max_position_embeddings", 1,
                      c->arch == MODEL_ARCH_QWEN2 ? 32768 : 2048, 1, big, &c->max_position, err,
                      errlen)))
        return st;

    if ((st = parse_rope(root, path, c, err, errlen))) return st;
    if ((st = get_num(root, path, "rms_norm_eps", 1e-6, &c->rms_eps, err, errlen))) return st;
    if ((st = get_bool(root, path, "tie_word_embeddings", 0, &c->tie_word_embeddings, err,
                       errlen)))
        return st;

    json_t *act = json_object_get(root, "hidden_act");
    if (act && !(json_is_string(act) && !strcmp(json_string_value(act), "silu")))
        return rkv_fail(RKV_ENOTSUP, err, errlen, "%s: field 'hidden_act' must be \"silu\"", path);
    int flag;
    const char *off_fields[] = {"attention_bias", "mlp_bias", "use_sliding_window"};
    for (int i = 0; i < 3; i++) {
        if ((st = get_bool(root, path, off_fields[i], 0, &flag, err, errlen))) return st;
        if (flag)
            return rkv_fail(RKV_ENOTSUP, err, errlen, "%s: field '%s' = true is not supported", path,
                        off_fields[i]);
    }
    return parse_eos(root, path, c, err, errlen);
}

rkv_status model_config_from_json(const char *path, model_config *out, char *err, size_t errlen)
{
    model_config c;
    memset(&c, 0, sizeof c);
    FILE *f = fopen(path, "rb");
    if (!f) return rkv_fail(RKV_EIO, err, errlen, "%s: cannot open: %s", path, strerror(errno));
    json_error_t je;
    json_t *root = json_loadf(f, 0, &je);
    fclose(f);
    if (!root)
        return rkv_fail(RKV_EPARSE, err, errlen, "%s:%d: bad JSON: %s", path, je.line, je.text);
    rkv_status st = parse_config(root, path, &c, err, errlen);
    json_decref(root);
    if (st) return st;
    /* Keep the tail of long paths: the directory name identifies the model. */
    size_t n = strlen(path);
    snprintf(c.name, sizeof c.name, "%s", n >= sizeof c.name ? path + n - (sizeof c.name - 1) : path);
    if ((st = model_config_check(&c, err, errlen))) return st;
    *out = c;
    return RKV_OK;
}

rkv_status model_config_load(const char *name_or_path, model_config *out, char *err,
                             size_t errlen)
{
    if (!name_or_path) return model_config_preset(NULL, out, err, errlen);
    struct stat sb;
    if (stat(name_or_path, &sb) == 0) {
        if (S_ISDIR(sb.st_mode)) {
            char p[4096];
            int n = snprintf(p, sizeof p, "%s/config.json", name_or_path);
            if (n < 0 || (size_t)n >= sizeof p)
                return rkv_fail(RKV_EINVAL, err, errlen, "%s: path too long", name_or_path);
            return model_config_from_json(p, out, err, errlen);
        }
        return model_config_from_json(name_or_path, out, err, errlen);
    }
    if (strchr(name_or_path, '/') || strstr(name_or_path, ".json"))
        return rkv_fail(RKV_EIO, err, errlen, "%s: no such file or directory", name_or_path);
    return model_config_preset(name_or_path, out, err, errlen);
}

int64_t model_config_num_params(const model_config *c)
{
    int64_t C = c->hidden_size, F = c->intermediate_size, V = c->vocab_size;
    int64_t qd = (int64_t)c->num_heads * c->head_dim, kvd = (int64_t)c->num_kv_heads * c->head_dim;
    int64_t attn = C * qd + 2 * C * kvd + qd * C + (c->qkv_bias ? qd + 2 * kvd : 0);
    int64_t layer = attn + 3 * C * F + 2 * C;
    return V * C * (c->tie_word_embeddings ? 1 : 2) + c->num_layers * layer + C;
}

int64_t model_config_kv_bytes_per_token(const model_config *c, int elem_bytes)
{
    return 2LL * c->num_layers * c->num_kv_heads * c->head_dim * elem_bytes;
}

void model_config_describe(const model_config *c, char *buf, size_t len)
{
    snprintf(buf, len, "%s (%s) C=%d L=%d Hq=%d Hkv=%d D=%d F=%d V=%d%s %.2fM params",
             c->name, c->arch == MODEL_ARCH_QWEN2 ? "qwen2" : "llama", c->hidden_size,
             c->num_layers, c->num_heads, c->num_kv_heads, c->head_dim, c->intermediate_size,
             c->vocab_size, c->tie_word_embeddings ? " tied" : "",
             (double)model_config_num_params(c) / 1e6);
}
