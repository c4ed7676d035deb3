/* serve_fields.c - every field of vLLM's completion request, honoured or
 * refused by name (see serve.h).
 *
 * vLLM's protocol (CompletionRequest, vllm/entrypoints/openai/completion/
 * protocol.py as of 0.33) defines the fields below. A client that sends one
 * expects its effect; a field accepted and ignored gives another answer
 * without saying so. So each field is either honoured (parse_completion in
 * serve_http.c reads it, or it cannot change an answer of this server: there
 * are no special tokens in the ids vocabulary) or refused with a 400 naming
 * it unless its value asks for nothing (vLLM's default, null, an empty list).
 * A field vLLM does not define is ignored, as vLLM does (routers add their
 * own fields to what they forward).
 * tests/serve/test_serve_fields.py walks vLLM's list against this table.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "serve.h"

typedef enum field_kind {
    F_HONOURED,   /* parse_completion reads it */
    F_BOOL_NOOP,  /* a boolean about special tokens: the ids vocabulary has none */
    F_NULL,       /* refused unless null */
    F_FALSE,      /* refused unless null or false */
    F_NUM,        /* refused unless null or the number `neutral` */
    F_EMPTY,      /* refused unless null or an empty list/object */
    F_STR,        /* refused unless null or the string `neutral_str` */
} field_kind;

typedef struct field_rule {
    const char *name;
    field_kind kind;
    double neutral;
    const char *neutral_str;
    const char *why;   /* refused: what radixkv lacks */
} field_rule;

static const field_rule rules[] = {
    {"model", F_HONOURED, 0, NULL, NULL},
    {"prompt", F_HONOURED, 0, NULL, NULL},
    {"echo", F_HONOURED, 0, NULL, NULL},
    {"frequency_penalty", F_HONOURED, 0, NULL, NULL}, /* cpu backend; refused elsewhere by name */
    {"logit_bias", F_HONOURED, 0, NULL, NULL}, /* cpu backend; refused elsewhere by name */
    {"logprobs", F_HONOURED, 0, NULL, NULL},
    {"max_tokens", F_HONOURED, 0, NULL, NULL},
    {"n", F_HONOURED, 0, NULL, NULL},
    {"presence_penalty", F_HONOURED, 0, NULL, NULL}, /* cpu backend; refused elsewhere by name */
    {"seed", F_HONOURED, 0, NULL, NULL},
    {"stop", F_HONOURED, 0, NULL, NULL},
    {"stream", F_HONOURED, 0, NULL, NULL},
    {"stream_options", F_HONOURED, 0, NULL, NULL},
    {"suffix", F_NULL, 0, NULL, "suffix is not supported (nor by vLLM)"},
    {"temperature", F_HONOURED, 0, NULL, NULL},
    {"top_p", F_HONOURED, 0, NULL, NULL},
    {"user", F_HONOURED, 0, NULL, NULL}, /* names the end user; changes no answer (vLLM alike) */
    {"use_beam_search", F_FALSE, 0, NULL, "there is no beam search"},
    {"top_k", F_HONOURED, 0, NULL, NULL},
    {"min_p", F_HONOURED, 0, NULL, NULL},
    {"repetition_penalty", F_HONOURED, 0, NULL, NULL}, /* cpu backend; refused elsewhere by name */
    {"watermarking", F_FALSE, 0, NULL, "there is no watermarking"},
    {"length_penalty", F_NUM, 1, NULL, "there is no beam search"},
    {"stop_token_ids", F_HONOURED, 0, NULL, NULL},
    {"include_stop_str_in_output", F_HONOURED, 0, NULL, NULL},
    {"ignore_eos", F_HONOURED, 0, NULL, NULL}, /* the engine stops only at stop_token_ids */
    {"min_tokens", F_HONOURED, 0, NULL, NULL}, /* cpu backend; refused elsewhere by name */
    {"skip_special_tokens", F_BOOL_NOOP, 0, NULL, NULL},
    {"spaces_between_special_tokens", F_BOOL_NOOP, 0, NULL, NULL},
    {"truncate_prompt_tokens", F_HONOURED, 0, NULL, NULL},
    {"truncation_side", F_HONOURED, 0, NULL, NULL},
    {"allowed_token_ids", F_HONOURED, 0, NULL, NULL},
    {"prompt_logprobs", F_HONOURED, 0, NULL, NULL}, /* cpu backend; refused elsewhere by name */
    {"logprob_token_ids", F_NULL, 0, NULL, "logprobs are the top-k only"},
    {"bad_words", F_HONOURED, 0, NULL, NULL}, /* cpu backend, with a tokenizer; refused elsewhere by name */
    {"prompt_embeds", F_NULL, 0, NULL, "prompts are token ids"},
    {"add_special_tokens", F_BOOL_NOOP, 0, NULL, NULL},
    {"response_format", F_NULL, 0, NULL, "there is no structured output"},
    {"structured_outputs", F_NULL, 0, NULL, "there is no structured output"},
    {"priority", F_NUM, 0, NULL, "the scheduler has no priorities (vLLM alike without "
                                 "--scheduling-policy priority)"},
    {"request_id", F_HONOURED, 0, NULL, NULL},
    {"session_id", F_NULL, 0, NULL, "there are no sessions"},
    {"return_tokens_as_token_ids", F_HONOURED, 0, NULL, NULL},
    {"return_token_ids", F_HONOURED, 0, NULL, NULL},
    {"return_weight_versions", F_FALSE, 0, NULL, "weights have no versions"},
    {"routed_experts_prompt_start", F_NUM, 0, NULL, "there are no experts"},
    {"return_token_offsets", F_FALSE, 0, NULL, "token offsets are not returned"},
    {"mm_payload", F_STR, 0, "tensors", "there is no multimodal input"},
    {"return_mm_kwargs", F_FALSE, 0, NULL, "there is no multimodal input"},
    {"cache_salt", F_NULL, 0, NULL, "the prefix cache has no salts"},
    /* serve_pd.c: vllm-router's PD handoff with --role, refused without. */
    {"kv_transfer_params", F_HONOURED, 0, NULL, NULL},
    {"ec_transfer_params", F_NULL, 0, NULL, "there is no encoder-cache transfer"},
    {"vllm_xargs", F_NULL, 0, NULL, "there are no extra sampling arguments"},
    {"repetition_detection", F_NULL, 0, NULL, "there is no repetition detection"},
    {"thinking_token_budget", F_NULL, 0, NULL, "there is no reasoning budget"},
    {"stream_interval", F_NUM, 1, NULL, "streams send every token"},
};

static bool neutral(const field_rule *r, const json_t *v)
{
    if (json_is_null(v)) return true;
    switch (r->kind) {
    case F_FALSE: return json_is_false(v);
    case F_NUM: return json_is_number(v) && json_number_value(v) == r->neutral;
    case F_EMPTY:
        return (json_is_array(v) && json_array_size(v) == 0) ||
               (json_is_object(v) && json_object_size(v) == 0);
    case F_STR: return json_is_string(v) && !strcmp(json_string_value(v), r->neutral_str);
    default: return false;
    }
}

bool serve_fields_check(json_t *req, const char **param, char *msg, size_t len)
{
    const char *key;
    json_t *v;
    json_object_foreach(req, key, v) {
        const field_rule *r = NULL;
        for (size_t i = 0; i < sizeof rules / sizeof rules[0] && !r; i++)
            if (!strcmp(rules[i].name, key)) r = &rules[i];
        /* Not vLLM's: vLLM ignores it (with a warning in its log), and
         * routers add their own (sglang-router's no_stop_trim): so here. */
        if (!r) continue;
        *param = r->name;
        if (r->kind == F_HONOURED) continue;
        if (r->kind == F_BOOL_NOOP) {
            if (json_is_null(v) || json_is_boolean(v)) continue;
            snprintf(msg, len, "%s: expected a boolean", key);
            return false;
        }
        if (neutral(r, v)) continue;
        snprintf(msg, len, "%s: not supported by radixkv serve (%s); leave it out", key, r->why);
        return false;
    }
    return true;
}
