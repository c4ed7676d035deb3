/* cli.h - the one option parser of the radixkv commands and the benches.
 *
 * A command describes its options in a table and hands argv over:
 *
 *   int64_t cap = -1; const char *kind = NULL; bool check = false;
 *   cli_opt opts[] = {
 *       CLI_CHOICE_OPT("--cache", &kind, cache_kind_names),
 *       CLI_INT_OPT("--capacity", &cap, 1, INT64_MAX / 2),
 *       CLI_FLAG_OPT("--check", &check),
 *       CLI_RENAMED("--policy", "--evict-policy"),
 *       CLI_END,
 *   };
 *   cli_args a;
 *   int rc = cli_parse("radixkv cache-sim", opts, argc, argv, &a, err, sizeof err);
 *
 * Accepted: "--name value", "--name=value", flags without a value, "-h" for
 * "--help", and positionals ("-" is one: stdin). Refused, with a message in
 * err that names the option: an unknown option, a missing value, a value out
 * of range or not among the choices, a value given to a flag, an option given
 * twice, and a retired spelling (the message names its replacement).
 * cli_parse never prints and never exits: the command prints
 * "radixkv CMD: <err>" and returns 2.
 *
 * Ownership: values are pointers into argv (strings) or written to the
 * caller's variables; the table is the caller's.
 */
#ifndef RKV_CLI_H
#define RKV_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" { /* bench/attn_gpu_bench.cu parses its options here too */
#endif

typedef enum cli_kind {
    CLI_END_KIND = 0, /* end of the table */
    CLI_FLAG,         /* bool *: set to true */
    CLI_STR,          /* const char **: the value */
    CLI_INT,          /* int64_t *: an integer in [lo, hi] */
    CLI_DOUBLE,       /* double *: a number in [dlo, dhi] */
    CLI_CHOICE,       /* const char **: one of choices (NULL-terminated) */
    CLI_CUSTOM,       /* parse(ctx, name, value, err, errlen) != 0: refused */
    CLI_RENAMED,      /* a retired spelling: refused, naming renamed_to */
} cli_kind;

typedef struct cli_opt {
    const char *name;
    cli_kind kind;
    void *dst;
    int64_t lo, hi;
    double dlo, dhi;
    const char *const *choices;
    int (*parse)(void *ctx, const char *name, const char *value, char *err, size_t errlen);
    void *ctx;
    const char *renamed_to;
    bool repeat;      /* may be given more than once (a custom option that collects) */
    bool seen;        /* set by cli_parse: the option was given */
} cli_opt;

#define CLI_FLAG_OPT(n, d) {.name = (n), .kind = CLI_FLAG, .dst = (d)}
#define CLI_STR_OPT(n, d) {.name = (n), .kind = CLI_STR, .dst = (d)}
#define CLI_INT_OPT(n, d, l, h) {.name = (n), .kind = CLI_INT, .dst = (d), .lo = (l), .hi = (h)}
#define CLI_DOUBLE_OPT(n, d, l, h) {.name = (n), .kind = CLI_DOUBLE, .dst = (d), .dlo = (l), .dhi = (h)}
#define CLI_CHOICE_OPT(n, d, c) {.name = (n), .kind = CLI_CHOICE, .dst = (d), .choices = (c)}
#define CLI_CUSTOM_OPT(n, f, c) {.name = (n), .kind = CLI_CUSTOM, .parse = (f), .ctx = (c)}
#define CLI_REPEATED_OPT(n, f, c) {.name = (n), .kind = CLI_CUSTOM, .parse = (f), .ctx = (c), .repeat = true}
#define CLI_RENAMED(old, now) {.name = (old), .kind = CLI_RENAMED, .renamed_to = (now)}
#define CLI_END {.name = NULL}

enum { CLI_MAX_POSITIONALS = 8 };

typedef struct cli_args {
    const char *pos[CLI_MAX_POSITIONALS]; /* positionals, in order */
    int npos;
    bool help;                            /* --help or -h was given */
} cli_args;

/* Parse argv[1..argc) (argv[0] is the command) against opts. Returns 0, or 2
 * with the message in err (a usage error). prog names the program in the
 * message's hint ("see radixkv cache-sim --help"). With --help, returns 0 at once with
 * a->help set. More positionals than CLI_MAX_POSITIONALS is an error. */
int cli_parse(const char *prog, cli_opt *opts, int argc, char **argv, cli_args *a, char *err,
              size_t errlen);

/* cli_parse for a radixkv command (cmd: "run", "cache-sim", ...): prints
 * "radixkv CMD: <error>" to stderr, or the usage to stdout on --help.
 * Returns -1 to go on, else the exit status (2: bad usage, 0: help). */
int cli_command(const char *cmd, cli_opt *opts, int argc, char **argv, cli_args *a,
                void (*usage)(FILE *f));

/* Was the option named `name` given? (false for a name not in the table) */
bool cli_given(const cli_opt *opts, const char *name);

/* One help line listing an option's choices from its registry (never typed
 * by hand): "  OPT<pad>first (default) | second | ...", OPT padded to width
 * columns; note, if not NULL, is printed first ("block hash for hash kinds: "). */
void cli_usage_choices(FILE *f, int width, const char *opt, const char *note,
                       const char *const *names);

/* Value parsers for custom options, same messages as the table's: 0 or 2. */
int cli_parse_int(const char *opt, const char *v, int64_t lo, int64_t hi, int64_t *out,
                  char *err, size_t errlen);
int cli_parse_double(const char *opt, const char *v, double lo, double hi, double *out,
                     char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif
