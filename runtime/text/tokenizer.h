/* tokenizer.h - a model's own byte-level BPE tokenizer, read from Hugging
 * Face's tokenizer.json (GPT-2, Qwen2/2.5 and Llama-3 style), exact against
 * the `tokenizers` library.
 *
 * Encoding applies the file's steps in its order:
 *
 *   text --(added tokens, leftmost-longest, matched on the raw text first)-->
 *        segments | <|special|> | segments
 *   segment --normalizer (none | NFC)--> --pre-tokenizer--> words
 *        Split{Regex, Isolated} (PCRE2, JIT) and/or ByteLevel (prefix space,
 *        GPT-2 regex when use_regex)
 *   word --bytes through the byte-to-unicode map--> one symbol per byte
 *        --merges by rank (lowest first, leftmost on ties)--> token ids
 *   ids --post-processor (add_special_tokens)--> ids with BOS/EOS around them
 *
 * Decoding maps each id back to its bytes (the ByteLevel decoder: a token
 * whose every character is in the byte map gives those bytes, any other one
 * its own UTF-8), joins them and replaces every maximal invalid UTF-8 subpart
 * with U+FFFD, as Rust's from_utf8_lossy (and Python's "replace") do.
 *
 * Anything the code does not implement (another model type, an unknown
 * normalizer, pre-tokenizer, post-processor or decoder, a flag it ignores)
 * is refused at load with "tokenizer.json: field: reason" - never
 * approximated.
 *
 * Ownership: tokenizer_load* return a tokenizer the caller frees with
 * tokenizer_free; encode and decode allocate their results (caller frees
 * with free()). A loaded tokenizer is read-only: encode and decode may run
 * on several threads at once.
 */
#ifndef RKV_TOKENIZER_H
#define RKV_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rkv_status.h"

typedef struct tokenizer tokenizer;

/* Reads DIR/tokenizer.json (required) and DIR/tokenizer_config.json
 * (optional: its chat_template is kept, see tokenizer_chat_template). The
 * config's add_bos_token / add_eos_token change nothing, as in transformers
 * when a tokenizer.json is given (its post_processor adds BOS/EOS);
 * clean_up_tokenization_spaces is ignored for BPE as transformers does, and
 * refused by name when forced with ..._for_bpe_even_though_it_will_corrupt_
 * output, since radixkv never rewrites decoded text. */
rkv_status tokenizer_load(const char *dir, tokenizer **out, char *err, size_t errlen);
/* The same from the files' text; name is used in messages ("tokenizer.json").
 * config_json may be NULL. */
rkv_status tokenizer_load_text(const char *json, size_t len, const char *name,
                               const char *config_json, size_t config_len,
                               tokenizer **out, char *err, size_t errlen);
void tokenizer_free(tokenizer *t);

/* Token ids of text (len bytes, valid UTF-8 - anything else is refused,
 * naming the byte offset). add_special_tokens: the post-processor's
 * BOS/EOS. *ids is allocated (free()), *n its length. */
rkv_status tokenizer_encode(const tokenizer *t, const char *text, size_t len,
                            bool add_special_tokens, int32_t **ids, size_t *n,
                            char *err, size_t errlen);
/* Text of ids (valid UTF-8, NUL-terminated, *len without the NUL).
 * skip_special_tokens drops added tokens marked special. An id below 0 or
 * at least tokenizer_vocab_size is refused, naming its position; an id
 * inside that range that names no token is skipped, as `tokenizers` does. */
rkv_status tokenizer_decode(const tokenizer *t, const int32_t *ids, size_t n,
                            bool skip_special_tokens, char **text, size_t *len,
                            char *err, size_t errlen);

/* Raw bytes of one token as decoding joins them (not yet UTF-8 repaired);
 * NULL for an id outside the vocabulary. *special: an added special token. */
const uint8_t *tokenizer_token_bytes(const tokenizer *t, int32_t id, size_t *len,
                                     bool *special);
/* 1 + the largest id (model vocabulary and added tokens). */
int32_t tokenizer_vocab_size(const tokenizer *t);
/* The id of an exact token string (added tokens first, then the vocabulary),
 * or -1. */
int32_t tokenizer_token_id(const tokenizer *t, const char *token);
/* tokenizer_config.json's chat_template (a string), or NULL. */
const char *tokenizer_chat_template(const tokenizer *t);
/* tokenizer_config.json's bos_token / eos_token contents, or NULL. */
const char *tokenizer_bos_token(const tokenizer *t);
const char *tokenizer_eos_token(const tokenizer *t);

/* Replaces each maximal invalid UTF-8 subpart of src with U+FFFD into a new
 * NUL-terminated buffer (caller frees); NULL when out of memory. */
char *utf8_repair(const uint8_t *src, size_t n, size_t *out_len);
/* Bytes at the end of s[0..n) that start a UTF-8 sequence later bytes
 * could still complete (0 when the end is complete or plainly invalid). */
size_t utf8_incomplete_tail(const uint8_t *s, size_t n);
/* Length of the longest valid UTF-8 prefix of s (n when all of s is valid). */
size_t utf8_valid_prefix(const uint8_t *s, size_t n);

#endif
