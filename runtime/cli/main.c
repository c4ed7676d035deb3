/* main.c - the `radixkv` command line: one table of subcommands.
 *
 *   radixkv --help | --version
 *   radixkv COMMAND --help
 *
 * Adding a command: write `int cmd_NAME(int argc, char **argv)` in its own
 * file cmd_NAME.c (argv[0] is the command name; its options in a cli.h table;
 * usage on --help; a bad option fails at once, naming it), declare it in
 * commands.h and add a line to commands[] below. JSON goes to stdout,
 * everything for humans to stderr.
 */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "rkv_config.h"

/* ------------------------------------------------------------- the table */

typedef struct command {
    const char *name;
    const char *summary;
    int (*main)(int argc, char **argv);
} command;

static const command commands[] = {
    {"cache-sim", "replay a request trace through one cache kind, no model", cmd_cache_sim},
    {"run", "serve a trace through the engine (cpu or sim backend) and report", cmd_run},
    {"gen", "write a synthetic trace (hit-rate sweep, multi-turn, few-shot, ...)", cmd_gen},
    {"serve", "an OpenAI-compatible HTTP server over the engine (token-id prompts)", cmd_serve},
    {"tokenize", "a model's tokenizer: text <-> ids, text datasets -> token traces", cmd_tokenize},
    {"list", "cache kinds, eviction policies, hash functions, backends, schedulers", cmd_list},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: radixkv COMMAND [options]   (radixkv COMMAND --help for its options)\n\n"
               "commands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-12s %s\n", commands[i].name, commands[i].summary);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("radixkv %s\n", RKV_VERSION);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].main(argc - 1, argv + 1);
    fprintf(stderr, "radixkv: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
