/* chat_template.h - a model's chat template (tokenizer_config.json's
 * "chat_template", a Jinja program) rendered exactly as transformers'
 * apply_chat_template renders it, by built-in renderers.
 *
 * radixkv has no Jinja interpreter: a template is recognised by its exact
 * text (a 64-bit FNV-1a hash and the length; one trailing newline, which
 * Jinja drops, is ignored), and a C renderer written for that text produces
 * the same string. Known templates:
 *
 *   qwen2.5   Qwen2.5 instruct models (messages without tools)
 *   llama-3   Llama-3 instruct models (3.0)
 *   llama-3.1 Llama-3.1 and 3.3 instruct models (one text; no tools, and the
 *             template's default date)
 *   llama-3.2 Llama-3.2 instruct models (no tools; today's local date, as
 *             transformers' strftime_now gives it)
 *
 * Any other text is refused by create, naming the template's source and
 * its hash, so that a user can supply a known one with --chat-template FILE.
 * Within a known template, what the renderer does not implement (tools,
 * tool calls, the "tool" role, content that is not a string) is refused
 * when rendering, naming the message and the field; what the template
 * itself would reject (no messages) is refused the same way.
 *
 * Ownership: create returns a template the caller frees; render allocates
 * the text (caller frees with free()).
 */
#ifndef RKV_CHAT_TEMPLATE_H
#define RKV_CHAT_TEMPLATE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rkv_status.h"

typedef struct chat_template chat_template;

typedef struct chat_message {
    const char *role;    /* NUL-terminated */
    const char *content; /* content_len bytes of UTF-8 */
    size_t content_len;
} chat_message;

/* Recognises text (from `source`, named in messages). bos_token and
 * eos_token: the tokenizer config's, which templates may use (copied; NULL
 * when the config has none). */
rkv_status chat_template_create(const char *text, const char *source, const char *bos_token,
                                const char *eos_token, chat_template **out, char *err,
                                size_t errlen);
/* A known template by its name ("qwen2.5", "llama-3") without its text
 * (the fuzz target and tests that have no template file). */
rkv_status chat_template_by_name(const char *name, const char *bos_token, const char *eos_token,
                                 chat_template **out, char *err, size_t errlen);
void chat_template_free(chat_template *ct);
/* "qwen2.5", "llama-3", "llama-3.1" or "llama-3.2" */
const char *chat_template_kind(const chat_template *ct);
/* The hash create compares (FNV-1a 64 of the text without one trailing newline). */
uint64_t chat_template_hash(const char *text, size_t len);

rkv_status chat_template_render(const chat_template *ct, const chat_message *m, size_t n,
                                bool add_generation_prompt, char **text, size_t *len, char *err,
                                size_t errlen);
/* render for OpenAI-shaped messages: [{"role": R, "content": S}, ...];
 * content may also be a list of {"type": "text", "text": S} parts, joined
 * with "\n" as vLLM joins them. */
rkv_status chat_template_render_json(const chat_template *ct, const json_t *messages,
                                     bool add_generation_prompt, char **text, size_t *len,
                                     char *err, size_t errlen);

#endif
