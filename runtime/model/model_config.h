/* model_config.h - the shape of a Llama/Qwen2-family decoder.
 *
 * One struct describes every model the runtime knows: the built-in default
 * (small enough for 2 CPU cores), presets with the real shapes of public
 * checkpoints (for the sim and cuda backends), or a Hugging Face config.json.
 *
 *   tokens -> embed (V, C) -> L x [ RMSNorm -> attention (Hq, Hkv, D, RoPE)
 *                                   RMSNorm -> SwiGLU MLP (C -> F -> C) ]
 *          -> RMSNorm -> LM head (V, C) (the embedding itself when tied)
 *
 * Dimension letters used across runtime/: V vocab, C hidden, F intermediate,
 * L layers, Hq query heads, Hkv KV heads, D head dim.
 *
 * The struct is plain data (no pointers): copy it freely.
 */
#ifndef RKV_MODEL_CONFIG_H
#define RKV_MODEL_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "rkv_status.h"

/* The most layers a config may give (real checkpoints have at most a few hundred). */
#define MODEL_MAX_LAYERS 4096

typedef enum model_arch {
    MODEL_ARCH_LLAMA = 0, /* no biases */
    MODEL_ARCH_QWEN2 = 1, /* bias on q, k, v projections */
} model_arch;

typedef struct model_config {
    char name[64];             /* preset name or the config.json path (cut) */
    model_arch arch;
    int32_t vocab_size;        /* V */
    int32_t hidden_size;       /* C */
    int32_t intermediate_size; /* F */
    int32_t num_layers;        /* L */
    int32_t num_heads;         /* Hq */
    int32_t num_kv_heads;      /* Hkv, divides Hq */
    int32_t head_dim;          /* D: 64 or 128 (what attention/ supports) */
    double rope_theta;         /* RoPE base */
    double rms_eps;            /* RMSNorm epsilon */
    int tie_word_embeddings;   /* 1: LM head = embedding matrix */
    int qkv_bias;              /* 1: q/k/v projections carry a bias (Qwen2) */
    int32_t max_position;      /* max_position_embeddings */
    int32_t eos_token_id;      /* -1: none */
} model_config;

/* Name of the built-in default preset ("default"; "small" is an alias). */
#define MODEL_CONFIG_DEFAULT "default"

/* A preset by name: "default" (alias "small"), "qwen2.5-0.5b", "qwen2.5-3b",
 * "qwen2.5-7b", "llama-3-8b". NULL means the default. Unknown name: RKV_EINVAL
 * with the known names in err. */
rkv_status model_config_preset(const char *name, model_config *out, char *err, size_t errlen);

/* NULL-terminated list of preset names (for --help and errors). */
const char *const *model_config_preset_names(void);

/* Parse a Hugging Face config.json (model_type "llama" or "qwen2"). Fields
 * the runtime cannot honour (rope_scaling, sliding windows, biases on llama,
 * a head_dim other than 64/128, a non-silu activation) are rejected with the
 * file and the field named: RKV_EIO (unreadable), RKV_EPARSE (bad JSON or a
 * field of the wrong type), RKV_ENOTSUP (unsupported value). */
rkv_status model_config_from_json(const char *path, model_config *out, char *err,
                                  size_t errlen);

/* What backend_config.model means: NULL -> default; a preset name; a path to
 * a config.json; a directory holding config.json. */
rkv_status model_config_load(const char *name_or_path, model_config *out, char *err,
                             size_t errlen);

/* Range and consistency checks (positive sizes, Hq % Hkv == 0, D in {64,128}).
 * RKV_EINVAL naming the field. */
rkv_status model_config_check(const model_config *c, char *err, size_t errlen);

/* Parameter count (weights only, tied head counted once). */
int64_t model_config_num_params(const model_config *c);

/* KV bytes per token over all layers for elements of elem_bytes (K and V). */
int64_t model_config_kv_bytes_per_token(const model_config *c, int elem_bytes);

/* One line: "qwen2 C=896 L=24 Hq=14 Hkv=2 D=64 F=4864 V=151936 ...". */
void model_config_describe(const model_config *c, char *buf, size_t len);

#endif
