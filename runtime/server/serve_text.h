/* serve_text.h - the text side of `radixkv serve --tokenizer DIR`: text
 * prompts, the text of outputs (whole, and incremental for streams), stop
 * strings on the decoded bytes, chat completions (messages rendered by the
 * model's chat template, then tokenized), and vLLM's /tokenize and
 * /detokenize. serve_http.c calls these at a few hooks; all JSON in and out
 * is jansson's, and each function is pure (no server state), so the engine
 * and HTTP threads may call them at once.
 *
 * Decoding skips special tokens (vLLM's default skip_special_tokens).
 */
#ifndef RKV_SERVE_TEXT_H
#define RKV_SERVE_TEXT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "chat_template.h"
#include "tokenizer.h"

/* The text of ids[0..n), special tokens skipped, without a trailing UTF-8
 * sequence that later tokens may still complete (a stream holds it back,
 * as vLLM's detokenizer does). NUL-terminated; caller frees; NULL when out
 * of memory. */
char *serve_text_upto(const tokenizer *t, const int32_t *ids, int32_t n, size_t *len);

/* A stream's next piece: the text of ids[0..n) from byte *sent on, *sent
 * advanced past it. Held back: an incomplete UTF-8 character and, until
 * the stream ends, a tail that may begin one of the stop strings. cut >= 0:
 * a stop string was found; the text ends at byte cut. final: the last
 * piece (nothing held). NULL when out of memory. */
json_t *serve_text_stream(const tokenizer *t, const int32_t *ids, int32_t n, size_t *sent,
                          char *const *stops, int32_t n_stops, long cut, bool final);

/* lead (may be NULL) + the text of ids; cut != NULL: cut's first n_cut raw
 * bytes (the output up to a stop string) instead of the ids. */
json_t *serve_text_json(const tokenizer *t, const char *lead, const int32_t *ids, int32_t n,
                        const char *cut, size_t n_cut);

/* Stop strings: appends tok's bytes (nothing for a special token) to the
 * growing buffer *text (*len, *cap). false when out of memory. */
bool serve_text_append(const tokenizer *t, int32_t tok, char **text, size_t *len, size_t *cap);

/* A token's name in logprobs as vLLM gives it with a tokenizer, which is
 * tokenizer.decode([id]): the token's bytes with invalid UTF-8 replaced by
 * U+FFFD, special tokens included, "" for an id the tokenizer does not name.
 * *chars: its length in characters (code points), which is what vLLM's
 * text_offset counts. Caller frees; NULL when out of memory. */
char *serve_text_token_name(const tokenizer *t, int32_t id, size_t *chars);
/* Characters (code points) in the valid UTF-8 s[0..n). */
size_t serve_text_chars(const char *s, size_t n);

/* A chat request (OpenAI's chat.completions body) rewritten in place into a
 * completions body: "messages" rendered with ct and tokenized (no BOS/EOS
 * added: the template writes them) into "prompt"; max_completion_tokens
 * becomes max_tokens; fields only chat has are dropped where they change
 * nothing (their defaults) and refused otherwise. Returns 0, or the HTTP
 * status with the message in err. */
unsigned serve_text_chat_request(const tokenizer *t, const chat_template *ct,
                                 const char *no_template, json_t *req, char *err, size_t errlen);
/* A completion answer or stream chunk reshaped as chat.completion /
 * chat.completion.chunk (text -> message/delta content). Takes v. */
json_t *serve_text_chat_answer(json_t *v);
json_t *serve_text_chat_chunk(json_t *v);

/* POST /tokenize and /detokenize bodies, as vLLM shapes them:
 *   {"prompt": S, "add_special_tokens": true}  or
 *   {"messages": [...], "add_generation_prompt": true}
 *       -> {"count": N, "max_model_len": L, "tokens": [...], "token_strs": null}
 *   {"tokens": [...]} -> {"prompt": S}
 * NULL with *status and err on bad input. */
json_t *serve_text_tokenize(const tokenizer *t, const chat_template *ct, const char *no_template,
                            int32_t max_model_len, json_t *req, unsigned *status, char *err,
                            size_t errlen);
json_t *serve_text_detokenize(const tokenizer *t, json_t *req, unsigned *status, char *err,
                              size_t errlen);

#endif
