/* test_safetensors.c - the safetensors loader on files this test writes:
 * f32/f16/bf16 round trips, sharded checkpoints, and every loader error
 * (suite runtime). */
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check_run.h"
#include "model.h"
#include "safetensors.h"

static char dir[256];

static void setup(void)
{
    snprintf(dir, sizeof dir, "/tmp/rkv_stXXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void teardown(void)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}

static model_config tiny(void)
{
    model_config c;
    memset(&c, 0, sizeof c);
    snprintf(c.name, sizeof c.name, "tiny");
    c.arch = MODEL_ARCH_QWEN2;
    c.vocab_size = 50;
    c.hidden_size = 64;
    c.intermediate_size = 48;
    c.num_layers = 2;
    c.num_heads = 2;
    c.num_kv_heads = 1;
    c.head_dim = 64;
    c.rope_theta = 10000.0;
    c.rms_eps = 1e-6;
    c.tie_word_embeddings = 0;
    c.qkv_bias = 1;
    c.max_position = 512;
    c.eos_token_id = -1;
    return c;
}

/* ---- the test's own list of HF tensors of a model ------------------------- */

typedef struct entry {
    char name[96];
    const char *dtype; /* what to write */
    int ndim;
    int64_t shape[2];
    const float *src;  /* fp32 values to convert */
    int skip;          /* leave out of the file */
} entry;

static int list_tensors(const model *m, entry *e)
{
    const model_config *c = &m->cfg;
    int n = 0, C = c->hidden_size, F = c->intermediate_size, V = c->vocab_size,
        QD = c->num_heads * c->head_dim, KD = c->num_kv_heads * c->head_dim;
#define ADD(PTR, ND, S0, S1, ...)                                                      \
    do {                                                                               \
        snprintf(e[n].name, sizeof e[n].name, __VA_ARGS__);                            \
        e[n].dtype = "F32"; e[n].ndim = ND; e[n].shape[0] = S0; e[n].shape[1] = S1;    \
        e[n].src = PTR; e[n].skip = 0; n++;                                            \
    } while (0)
    ADD(m->embed, 2, V, C, "model.embed_tokens.weight");
    for (int l = 0; l < c->num_layers; l++) {
        const model_layer *L = &m->layers[l];
        ADD(L->attn_norm, 1, C, 0, "model.layers.%d.input_layernorm.weight", l);
        ADD(L->wq, 2, QD, C, "model.layers.%d.self_attn.q_proj.weight", l);
        ADD(L->bq, 1, QD, 0, "model.layers.%d.self_attn.q_proj.bias", l);
        ADD(L->wk, 2, KD, C, "model.layers.%d.self_attn.k_proj.weight", l);
        ADD(L->bk, 1, KD, 0, "model.layers.%d.self_attn.k_proj.bias", l);
        ADD(L->wv, 2, KD, C, "model.layers.%d.self_attn.v_proj.weight", l);
        ADD(L->bv, 1, KD, 0, "model.layers.%d.self_attn.v_proj.bias", l);
        ADD(L->wo, 2, C, QD, "model.layers.%d.self_attn.o_proj.weight", l);
        ADD(L->mlp_norm, 1, C, 0, "model.layers.%d.post_attention_layernorm.weight", l);
        ADD(L->w_gate, 2, F, C, "model.layers.%d.mlp.gate_proj.weight", l);
        ADD(L->w_up, 2, F, C, "model.layers.%d.mlp.up_proj.weight", l);
        ADD(L->w_down, 2, C, F, "model.layers.%d.mlp.down_proj.weight", l);
    }
    ADD(m->final_norm, 1, C, 0, "model.norm.weight");
    ADD(m->lm_head, 2, V, C, "lm_head.weight");
#undef ADD
    return n;
}

static int64_t numel(const entry *e) { return e->shape[0] * (e->ndim == 2 ? e->shape[1] : 1); }

static int elem_size(const char *dt) { return !strcmp(dt, "F16") || !strcmp(dt, "BF16") ? 2 : 4; }

/* Write entries [lo, hi) as one safetensors file. raw_header, if given,
 * replaces the JSON header; header_len_delta corrupts the length field. */
static void write_file(const char *path, entry *e, int lo, int hi, const char *raw_header,
                       int64_t header_len_delta)
{
    json_t *h = json_object();
    json_object_set_new(h, "__metadata__", json_pack("{s:s}", "format", "pt"));
    size_t off = 0;
    for (int i = lo; i < hi; i++) {
        if (e[i].skip) continue;
        size_t nb = (size_t)numel(&e[i]) * (size_t)elem_size(e[i].dtype);
        json_t *shape = json_array();
        for (int d = 0; d < e[i].ndim; d++) json_array_append_new(shape, json_integer(e[i].shape[d]));
        json_object_set_new(h, e[i].name,
                            json_pack("{s:s,s:o,s:[I,I]}", "dtype", e[i].dtype, "shape", shape,
                                      "data_offsets", (json_int_t)off, (json_int_t)(off + nb)));
        off += nb;
    }
    char *js = json_dumps(h, JSON_COMPACT);
    json_decref(h);
    const char *hdr = raw_header ? raw_header : js;
    size_t hl = strlen(hdr), padded = (hl + 7) & ~(size_t)7;
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    uint64_t n = (uint64_t)((int64_t)padded + header_len_delta);
    unsigned char len[8];
    for (int i = 0; i < 8; i++) len[i] = (unsigned char)(n >> (8 * i));
    fwrite(len, 1, 8, f);
    fwrite(hdr, 1, hl, f);
    for (size_t i = hl; i < padded; i++) fputc(' ', f);
    for (int i = lo; i < hi; i++) {
        if (e[i].skip) continue;
        for (int64_t j = 0; j < numel(&e[i]); j++) {
            float x = e[i].src[j];
            if (!strcmp(e[i].dtype, "F16") || !strcmp(e[i].dtype, "BF16")) {
                uint16_t b = e[i].dtype[0] == 'F' ? st_f32_to_f16(x) : st_f32_to_bf16(x);
                fputc(b & 0xff, f);
                fputc(b >> 8, f);
            } else {
                fwrite(&x, 4, 1, f); /* F32 and I32 alike: 4 bytes, little-endian host */
            }
        }
    }
    fclose(f);
    free(js);
}

static const char *path_in(const char *name)
{
    static char p[2][512];
    static int k;
    k ^= 1;
    snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
    return p[k];
}

static model *random_model(uint64_t seed)
{
    model_config c = tiny();
    model *m;
    char err[256];
    ck_assert_msg(model_create(&c, NULL, seed, 1, &m, err, sizeof err) == RKV_OK, "%s", err);
    return m;
}

/* ---- conversions ------------------------------------------------------------- */

START_TEST(conversions)
{
    /* Every finite f16 survives f16 -> f32 -> f16; NaN stays NaN. */
    for (uint32_t h = 0; h < 65536; h++) {
        float f = st_f16_to_f32((uint16_t)h);
        if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) {
            ck_assert(isnan(f));
            continue;
        }
        ck_assert_msg(st_f32_to_f16(f) == h, "f16 0x%04x -> %g -> 0x%04x", h, (double)f,
                      st_f32_to_f16(f));
    }
    ck_assert(st_f16_to_f32(0x3c00) == 1.0f);
    ck_assert(st_f16_to_f32(0x7bff) == 65504.0f);
    ck_assert(st_f16_to_f32(0x0001) == ldexpf(1.0f, -24));
    ck_assert(st_f16_to_f32(0xc000) == -2.0f);
    ck_assert_int_eq(st_f32_to_f16(1e6f), 0x7c00);         /* overflow: inf */
    ck_assert_int_eq(st_f32_to_f16(ldexpf(1.0f, -26)), 0); /* underflow: 0 */
    ck_assert_int_eq(st_f32_to_f16(1.0f + ldexpf(1.0f, -11)), 0x3c00); /* tie to even */
    ck_assert_int_eq(st_f32_to_f16(1.0f + 3 * ldexpf(1.0f, -11)), 0x3c02);
    /* bf16: the high half, rounded to nearest even. */
    ck_assert(st_bf16_to_f32(0x3f80) == 1.0f);
    ck_assert(st_bf16_to_f32(0xc040) == -3.0f);
    ck_assert_int_eq(st_f32_to_bf16(1.0f + ldexpf(1.0f, -8)), 0x3f80);
    ck_assert_int_eq(st_f32_to_bf16(1.0f + 3 * ldexpf(1.0f, -8)), 0x3f82);
    for (uint32_t b = 0; b < 65536; b++) {
        float f = st_bf16_to_f32((uint16_t)b);
        if (isnan(f)) continue;
        ck_assert_int_eq(st_f32_to_bf16(f), b);
    }
}
END_TEST

/* ---- round trips -------------------------------------------------------------- */

static void round_trip(const char *dtype, double rel)
{
    model *m = random_model(5);
    entry e[64];
    int n = list_tensors(m, e);
    for (int i = 0; i < n; i++) e[i].dtype = dtype;
    write_file(path_in("model.safetensors"), e, 0, n, NULL, 0);
    model *m2;
    char err[512];
    model_config c = tiny();
    ck_assert_msg(model_create(&c, dir, 0, 1, &m2, err, sizeof err) == RKV_OK, "%s: %s", dtype,
                  err);
    entry e2[64];
    ck_assert_int_eq(list_tensors(m2, e2), n);
    for (int i = 0; i < n; i++) {
        for (int64_t j = 0; j < numel(&e[i]); j++) {
            float want = e[i].src[j], got = e2[i].src[j];
            if (!strcmp(dtype, "F32")) {
                ck_assert_msg(got == want, "%s %s[%lld]", dtype, e[i].name, (long long)j);
            } else {
                float conv = !strcmp(dtype, "F16") ? st_f16_to_f32(st_f32_to_f16(want))
                                                   : st_bf16_to_f32(st_f32_to_bf16(want));
                ck_assert(got == conv);
                /* and independently: within half an ulp of the format */
                ck_assert_msg(fabs(got - want) <= rel * fabs(want) + 1e-7, "%s %s[%lld]: %g vs %g",
                              dtype, e[i].name, (long long)j, (double)got, (double)want);
            }
        }
    }
    model_destroy(m2);
    model_destroy(m);
}

START_TEST(round_trip_f32) { round_trip("F32", 0); }
END_TEST
START_TEST(round_trip_f16) { round_trip("F16", ldexp(1.0, -11)); }
END_TEST
START_TEST(round_trip_bf16) { round_trip("BF16", ldexp(1.0, -8)); }
END_TEST

/* Two shards and an index; a tied model ignores a stored lm_head. */
START_TEST(sharded_and_tied)
{
    model *m = random_model(9);
    entry e[64];
    int n = list_tensors(m, e);
    write_file(path_in("model-00001-of-00002.safetensors"), e, 0, n / 2, NULL, 0);
    write_file(path_in("model-00002-of-00002.safetensors"), e, n / 2, n, NULL, 0);
    json_t *wm = json_object();
    for (int i = 0; i < n; i++)
        json_object_set_new(wm, e[i].name,
                            json_string(i < n / 2 ? "model-00001-of-00002.safetensors"
                                                  : "model-00002-of-00002.safetensors"));
    json_t *idx = json_pack("{s:{s:I},s:o}", "metadata", "total_size", (json_int_t)0,
                            "weight_map", wm);
    ck_assert_int_eq(json_dump_file(idx, path_in("model.safetensors.index.json"), 0), 0);
    json_decref(idx);
    model *m2;
    char err[512];
    model_config c = tiny();
    ck_assert_msg(model_create(&c, dir, 0, 1, &m2, err, sizeof err) == RKV_OK, "%s", err);
    ck_assert_int_eq(m2->weights_floats, m->weights_floats);
    entry e2[64];
    list_tensors(m2, e2);
    for (int i = 0; i < n; i++)
        ck_assert_msg(memcmp(e[i].src, e2[i].src, sizeof(float) * (size_t)numel(&e[i])) == 0,
                      "%s", e[i].name);
    model_destroy(m2);

    /* tied: the file's lm_head is not needed and not used */
    c.tie_word_embeddings = 1;
    ck_assert_msg(model_create(&c, dir, 0, 1, &m2, err, sizeof err) == RKV_OK, "%s", err);
    ck_assert_ptr_eq(m2->lm_head, m2->embed);
    model_destroy(m2);

    /* an index naming a shard that is not there */
    unlink(path_in("model-00002-of-00002.safetensors"));
    ck_assert_int_eq(model_create(&c, dir, 0, 1, &m2, err, sizeof err), RKV_EIO);
    ck_assert_ptr_nonnull(strstr(err, "model-00002-of-00002.safetensors"));
    model_destroy(m);
}
END_TEST

static rkv_status load(char *err, size_t errlen);

/* Write the two-shard checkpoint of e[0..n) with shard1 holding [0, cut) and
 * an index mapping tensor i to map(i). */
static const char *const shard_names[2] = {"model-00001-of-00002.safetensors",
                                            "model-00002-of-00002.safetensors"};

static void write_index(entry *e, int n, int cut, int wrong)
{
    json_t *wm = json_object();
    for (int i = 0; i < n; i++)
        json_object_set_new(wm, e[i].name, json_string(shard_names[(i < cut) ^ (i == wrong) ? 0 : 1]));
    json_t *idx = json_pack("{s:{s:I},s:o}", "metadata", "total_size", (json_int_t)0,
                            "weight_map", wm);
    ck_assert_int_eq(json_dump_file(idx, path_in("model.safetensors.index.json"), 0), 0);
    json_decref(idx);
}

/* Issue 29 item 3: the index is honoured exactly. Before, every shard was
 * opened and the first tensor of a name in any shard was used, whatever
 * weight_map said: a second lm_head in the other shard changed the outputs. */
START_TEST(index_honoured_exactly)
{
    model *m = random_model(11), *other = random_model(12);
    entry e[64], o[64];
    int n = list_tensors(m, e);
    list_tensors(other, o);
    int cut = n / 2, head = n - 1; /* lm_head, in shard 2 */
    ck_assert_str_eq(e[head].name, "lm_head.weight");
    char err[512] = "";
    model_config c = tiny();
    model *m2 = NULL;

    /* 1) a stray lm_head (another model's) in shard 1 besides the mapped one */
    e[cut] = o[head];
    write_file(path_in(shard_names[0]), e, 0, cut + 1, NULL, 0);
    list_tensors(m, e);
    write_file(path_in(shard_names[1]), e, cut, n, NULL, 0);
    write_index(e, n, cut, -1);
    ck_assert_int_eq(model_create(&c, dir, 0, 1, &m2, err, sizeof err), RKV_EPARSE);
    ck_assert_msg(strstr(err, "lm_head.weight") && strstr(err, "two shards"), "%s", err);

    /* 2) a tensor present only in a shard weight_map does not map it to */
    write_file(path_in(shard_names[0]), e, 0, cut, NULL, 0);
    write_file(path_in(shard_names[1]), e, cut, n, NULL, 0);
    write_index(e, n, cut, 3);
    ck_assert_int_eq(model_create(&c, dir, 0, 1, &m2, err, sizeof err), RKV_EPARSE);
    ck_assert_msg(strstr(err, e[3].name) && strstr(err, shard_names[0]) &&
                      strstr(err, "weight_map maps it to"), "%s", err);

    /* 3) a tensor in a shard but not in weight_map at all */
    write_index(e, n - 1, cut, -1);
    ck_assert_int_eq(model_create(&c, dir, 0, 1, &m2, err, sizeof err), RKV_EPARSE);
    ck_assert_msg(strstr(err, "lm_head.weight") && strstr(err, "not in weight_map"), "%s", err);

    /* 4) a shard name that leaves the directory */
    json_t *idx = json_pack("{s:{s:s}}", "weight_map", "model.norm.weight", "../x.safetensors");
    ck_assert_int_eq(json_dump_file(idx, path_in("model.safetensors.index.json"), 0), 0);
    json_decref(idx);
    ck_assert_int_eq(model_create(&c, dir, 0, 1, &m2, err, sizeof err), RKV_EPARSE);
    ck_assert_msg(strstr(err, "../x.safetensors") && strstr(err, "model.norm.weight"), "%s", err);

    /* and the right index loads the mapped weights */
    write_index(e, n, cut, -1);
    ck_assert_msg(model_create(&c, dir, 0, 1, &m2, err, sizeof err) == RKV_OK, "%s", err);
    ck_assert(memcmp(m2->lm_head, m->lm_head, sizeof(float) * (size_t)numel(&e[head])) == 0);
    model_destroy(m2);
    model_destroy(m);
    model_destroy(other);
}
END_TEST

/* Issue 29 item 3: a name twice in one header, and two tensors sharing bytes,
 * were accepted (one of the two silently used). */
START_TEST(duplicate_and_overlapping_tensors)
{
    const char *f = path_in("model.safetensors");
    char hdr[512], err[512] = "";
    snprintf(hdr, sizeof hdr, "{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]},"
             " \"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [8, 16]}}");
    float data[4] = {1, 2, 3, 4};
    entry e = {.name = "a", .dtype = "F32", .ndim = 1, .shape = {4, 0}, .src = data};
    write_file(f, &e, 0, 1, hdr, 0);
    safetensors *st = NULL;
    ck_assert_int_eq(safetensors_open(f, &st, err, sizeof err), RKV_EPARSE);
    ck_assert_msg(strstr(err, f) && strstr(err, "duplicate"), "%s", err);
    snprintf(hdr, sizeof hdr, "{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]},"
             " \"b\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [4, 12]}}");
    write_file(f, &e, 0, 1, hdr, 0);
    ck_assert_int_eq(safetensors_open(f, &st, err, sizeof err), RKV_EPARSE);
    ck_assert_msg(strstr(err, f) && strstr(err, "'a' and 'b' overlap"), "%s", err);
    /* adjacent is fine */
    snprintf(hdr, sizeof hdr, "{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]},"
             " \"b\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [8, 16]}}");
    write_file(f, &e, 0, 1, hdr, 0);
    ck_assert_msg(safetensors_open(f, &st, err, sizeof err) == RKV_OK, "%s", err);
    safetensors_close(st);
}
END_TEST

/* Issue 29 item 3: NaN and Inf weights were loaded; now named and refused. */
START_TEST(non_finite_weights)
{
    model *m = random_model(5);
    entry e[64];
    int n = list_tensors(m, e);
    const char *f = path_in("model.safetensors");
    static const char *dts[] = {"F32", "F16", "BF16"};
    for (int k = 0; k < 3; k++) {
        for (int bad = 0; bad < 2; bad++) {
            float *w = (float *)e[5].src;
            float keep = w[3];
            w[3] = bad ? INFINITY : NAN;
            e[5].dtype = dts[k];
            write_file(f, e, 0, n, NULL, 0);
            w[3] = keep;
            e[5].dtype = "F32";
            char err[512] = "";
            ck_assert_int_eq(load(err, sizeof err), RKV_EINVAL);
            ck_assert_msg(strstr(err, e[5].name) && strstr(err, bad ? "Inf" : "NaN") &&
                              strstr(err, "element 3"), "%s %s", dts[k], err);
        }
    }
    write_file(f, e, 0, n, NULL, 0);
    char err[512];
    ck_assert_msg(load(err, sizeof err) == RKV_OK, "%s", err);
    model_destroy(m);
}
END_TEST

/* ---- every loader error -------------------------------------------------------- */

static rkv_status load(char *err, size_t errlen)
{
    model_config c = tiny();
    model *m2 = NULL;
    rkv_status st = model_create(&c, dir, 0, 1, &m2, err, errlen);
    model_destroy(m2);
    return st;
}

static void expect(rkv_status want, const char *a, const char *b)
{
    char err[512] = "";
    rkv_status st = load(err, sizeof err);
    if (getenv("RKV_SHOW")) fprintf(stderr, "%s\n", err);
    ck_assert_msg(st == want, "status %d, want %d: %s", st, want, err);
    ck_assert_msg(strstr(err, a), "'%s' not in: %s", a, err);
    if (b) ck_assert_msg(strstr(err, b), "'%s' not in: %s", b, err);
}

START_TEST(loader_errors)
{
    model *m = random_model(3);
    entry e[64];
    int n = list_tensors(m, e);
    const char *file = path_in("model.safetensors");
    char fcopy[512];
    snprintf(fcopy, sizeof fcopy, "%s", file);

    /* 1) no checkpoint in the directory */
    expect(RKV_EIO, dir, "model.safetensors");

    /* 2) missing tensor */
    e[10].skip = 1;
    write_file(fcopy, e, 0, n, NULL, 0);
    expect(RKV_EINVAL, e[10].name, "missing");
    expect(RKV_EINVAL, dir, "missing");
    e[10].skip = 0;

    /* 3) shape that disagrees with the config (q_proj transposed) */
    int64_t s0 = e[2].shape[0];
    e[2].shape[0] = e[2].shape[1];
    e[2].shape[1] = s0;
    write_file(fcopy, e, 0, n, NULL, 0);
    expect(RKV_EINVAL, e[2].name, "shape");
    e[2].shape[1] = e[2].shape[0];
    e[2].shape[0] = s0;

    /* 4) bad header: not JSON, not an object, length beyond the file */
    write_file(fcopy, e, 0, n, "{\"a\": [1, 2", 0);
    expect(RKV_EPARSE, fcopy, "header");
    write_file(fcopy, e, 0, n, "[1, 2, 3]", 0);
    expect(RKV_EPARSE, fcopy, "header");
    write_file(fcopy, e, 0, n, NULL, 1 << 30);
    expect(RKV_EPARSE, fcopy, "header length");
    write_file(fcopy, e, 0, n, "{\"model.norm.weight\": {\"dtype\": \"F32\"}}", 0);
    expect(RKV_EPARSE, "model.norm.weight", "data_offsets");

    /* 5) truncated file: the last tensor runs past the end */
    write_file(fcopy, e, 0, n, NULL, 0);
    FILE *f = fopen(fcopy, "rb");
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fclose(f);
    ck_assert_int_eq(truncate(fcopy, size - 10), 0);
    expect(RKV_EPARSE, "truncated", e[n - 1].name);
    ck_assert_int_eq(truncate(fcopy, 5), 0);
    expect(RKV_EPARSE, "truncated", fcopy);

    /* 6) unknown dtype */
    e[4].dtype = "Q4";
    write_file(fcopy, e, 0, n, NULL, 0);
    expect(RKV_EPARSE, e[4].name, "unknown dtype");
    /* 7) a known dtype the loader cannot convert */
    e[4].dtype = "I32";
    write_file(fcopy, e, 0, n, NULL, 0);
    expect(RKV_ENOTSUP, e[4].name, "I32");
    e[4].dtype = "F32";

    /* 8) offsets that disagree with dtype x shape */
    write_file(fcopy, e, 0, n,
               "{\"model.norm.weight\": {\"dtype\": \"F32\", \"shape\": [64],"
               " \"data_offsets\": [0, 100]}}", 0);
    expect(RKV_EPARSE, "model.norm.weight", "data_offsets");

    /* and after all that, the good file loads */
    write_file(fcopy, e, 0, n, NULL, 0);
    char err[512];
    ck_assert_msg(load(err, sizeof err) == RKV_OK, "%s", err);

    /* direct API: find, count, a file path instead of a directory */
    safetensors *st;
    ck_assert_int_eq(safetensors_open(fcopy, &st, err, sizeof err), RKV_OK);
    ck_assert_int_eq(safetensors_count(st), n);
    const st_tensor *t = safetensors_find(st, "model.norm.weight");
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(t->ndim, 1);
    ck_assert_int_eq(t->shape[0], 64);
    ck_assert_ptr_null(safetensors_find(st, "nope"));
    safetensors_close(st);
    ck_assert_int_eq(safetensors_open(path_in("absent.safetensors"), &st, err, sizeof err),
                     RKV_EIO);
    model_destroy(m);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("safetensors");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, conversions);
    tcase_add_test(tc, round_trip_f32);
    tcase_add_test(tc, round_trip_f16);
    tcase_add_test(tc, round_trip_bf16);
    tcase_add_test(tc, sharded_and_tied);
    tcase_add_test(tc, loader_errors);
    tcase_add_test(tc, index_honoured_exactly);
    tcase_add_test(tc, duplicate_and_overlapping_tensors);
    tcase_add_test(tc, non_finite_weights);
    suite_add_tcase(s, tc);
    return check_run(s);
}
