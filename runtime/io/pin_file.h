/* pin_file.h - `--pin FILE` of `radixkv run` and `radixkv cache-sim`: read
 * static prefixes from JSON Lines and pin each in a cache (cache_pin.h).
 *
 * One prefix per line, either {"tokens": [t0, t1, ...]} (other keys ignored)
 * or a bare array [t0, t1, ...] (texts must be tokenized beforehand). Blank
 * lines are skipped. Token ids are integers in [0, vocab_size) (vocab_size 0:
 * any non-negative int32). Each prefix is cut down to whole pages; the tokens
 * cut off are counted in *cut_tokens (the commands say so on stderr). Pins go
 * in the default namespace 0.
 *
 * Errors, as "FILE:LINE: reason": unreadable file, malformed line, a token
 * out of range, a prefix shorter than one page, a prefix (or all of them
 * together) needing more pages than the pool holds. Pins made before the bad
 * line stay in the set; the caller releases them.
 */
#ifndef RKV_PIN_FILE_H
#define RKV_PIN_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "cache.h"
#include "cache_pin.h"

typedef struct pin_file_stats {
    int64_t prefixes;     /* lines pinned */
    int64_t tokens;       /* tokens pinned over all lines (shared prefixes counted per line) */
    int64_t cut_tokens;   /* tokens of partial last pages, not pinned */
} pin_file_stats;

/* be: the backend that owns the KV memory of c's pool; each new pin's pages
 * are filled by a prefill through it (chunks of at most 2048 rows, no sampling)
 * before they are inserted. NULL (cache-sim): no data, no vocabulary limit
 * beyond vocab_size. A prefix longer than the model's context is refused. */
struct backend;
rkv_status pin_file_apply(cache *c, struct backend *be, const char *path, int32_t vocab_size,
                          cache_pins *pins, pin_file_stats *stats, char *err, size_t errlen);

#endif
