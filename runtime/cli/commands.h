/* commands.h - the radixkv subcommands, one file each (cmd_NAME.c; main.c's
 * table calls them with argv[0] = the command name), and the pieces of them
 * that tests drive directly. Exit status: 0 ok, 1 failure, 2 usage error. */
#ifndef RKV_COMMANDS_H
#define RKV_COMMANDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine.h"
#include "rkv_status.h"
#include "run_opts.h"

int cmd_cache_sim(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_gen(int argc, char **argv);
/* `radixkv serve` (cmd_serve.c): run's engine options behind an HTTP server. */
int cmd_serve(int argc, char **argv);


/* `radixkv run`'s options into o (zeroed by the caller); serve reuses them.
 * Returns -1 to go on, else an exit status (0 after --help, 2 for bad usage,
 * with a message naming the option). need_trace: --trace is required. */
int run_parse_options(int argc, char **argv, run_opts *o, bool need_trace);
int cmd_list(int argc, char **argv);
/* `radixkv tokenize` (cmd_tokenize.c): the model's tokenizer and the text -> trace converter. */
int cmd_tokenize(int argc, char **argv);

/* The ids of a loaded trace, as JSON text, by engine request id. */
typedef struct run_ids {
    char **id_json;
    int64_t n, cap;
} run_ids;

/* Add every request of a trace (JSON Lines or Mooncake, tokens folded into
 * the backend's vocabulary) to e. default_max_tokens applies to lines without
 * "max_tokens", namespace_name (NULL: the default) to lines without
 * "namespace" (trace.h). A bad line fails with "file:line: reason" in err and
 * nothing more is added. */
rkv_status run_load_trace(engine *e, const char *path, int32_t default_max_tokens,
                          const char *namespace_name, run_ids *ids, char *err, size_t errlen);
void run_ids_free(run_ids *ids);

#endif
