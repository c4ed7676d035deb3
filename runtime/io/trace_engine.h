/* trace_engine.h - a trace's requests as engine requests: the one loader that
 * `radixkv run`, the multi-replica driver (replicas.h) and the tests share.
 *
 *   trace file --trace_next--> trace_request --trace_engine_request--> engine_request --fn-->
 *
 * Fields absent from a line take the engine's defaults: max_tokens the
 * caller's default, greedy sampling, arrival 0, priority 0; a given seed is
 * mapped to an odd value so that it never reads as "derive one" (0).
 */
#ifndef RKV_TRACE_ENGINE_H
#define RKV_TRACE_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "engine.h"
#include "trace.h"

/* er's fields from q (er->tokens points into q: valid until q changes). */
void trace_engine_request(const trace_request *q, int32_t default_max_tokens, engine_request *er);

/* Called once per request, in file order. A non-OK return stops the load;
 * its message (err) is prefixed with "file:line: ". */
typedef rkv_status (*trace_engine_fn)(void *ctx, const trace_request *q, const engine_request *er,
                                      char *err, size_t errlen);

/* Reads path ("-": stdin; JSON Lines or Mooncake, tokens folded into
 * vocab_size) and hands every request to fn. A bad line fails with
 * "file:line: reason" in err; requests before it have been handed over. */
rkv_status trace_engine_load(const char *path, int32_t vocab_size, int32_t default_max_tokens,
                             trace_engine_fn fn, void *ctx, char *err, size_t errlen);

#endif
