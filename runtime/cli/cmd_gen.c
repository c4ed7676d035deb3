/* cmd_gen.c - `radixkv gen KIND`: write a synthetic trace (see workloads.h). */
#include <errno.h>
#include <stdbool.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "model_config.h"
#include "rkv_core.h"
#include "out_file.h"
#include "workloads.h"

static void usage_gen(FILE *f)
{
    fprintf(f,
        "usage: radixkv gen KIND [options]\n"
        "\n"
        "Writes a seeded synthetic trace as JSON Lines (the format `radixkv run` and\n"
        "`radixkv cache-sim` read) to stdout or --out.\n"
        "\n"
        "KIND (N, L, O, h, T, S, B, D, E, K below are the options):\n"
        "  sweep             N prompts of L tokens, the first floor(h*L) shared by all\n"
        "  multi-turn        N chat sessions of T turns after a shared S-token system prompt;\n"
        "                    user turns of L tokens, answers of O tokens\n"
        "  few-shot          N requests in groups of B sharing K of E examples (S tokens each)\n"
        "                    after a common instruction, then an L-token question\n"
        "  long-doc          N documents of S tokens, B questions of L tokens each\n"
        "  tree-of-thought   N problems of L tokens, a tree of branching B and depth D,\n"
        "                    S tokens per thought, one request per node\n"
        "  self-consistency  N problems of L tokens, each sampled B times (temperature 0.7)\n"
        "  judge             branch-solve-merge: N problems of L tokens, B shared criteria\n"
        "                    (S tokens), then a merge over the B judgements (O tokens each)\n"
        "\n"
        "  --num N           (64)        --prompt-len L   (1000)     --output-len O  (24)\n"
        "  --hit-rate h      (0.5)       --turns T        (4)        --shared-len S  (256)\n"
        "  --branching B     (4)         --depth D        (2)        --examples E    (16)\n"
        "  --shots K         (4)         --rate R  requests/s, Poisson arrivals (0: none)\n"
        "  --think-time SEC  (1)  multi-turn: between a session's turns\n"
        "  --seed N          (1)         --vocab V (from --model, default 4096)\n"
        "  --model PRESET    take the vocabulary size from a model preset or config.json\n"
        "  --out FILE        instead of stdout\n");
}

/* Options into c and *out_path; -1 to go on, else the exit status. */
static int parse_gen(int argc, char **argv, workload_config *cp, const char **out_path)
{
    workload_config c;
    workload_config_default(&c);
    const char *model = NULL;
    const int64_t BIG = 1 << 24;
    int64_t num = c.num, prompt_len = c.prompt_len, output_len = c.output_len, turns = c.turns;
    int64_t shared_len = c.shared_len, branching = c.branching, depth = c.depth;
    int64_t examples = c.examples, shots = c.shots, seed = (int64_t)c.seed, vocab = c.vocab_size;
    cli_opt opts[] = {
        CLI_STR_OPT("--out", out_path),
        CLI_STR_OPT("--model", &model),
        CLI_INT_OPT("--num", &num, 1, BIG),
        CLI_INT_OPT("--prompt-len", &prompt_len, 1, BIG),
        CLI_INT_OPT("--output-len", &output_len, 1, BIG),
        CLI_INT_OPT("--turns", &turns, 1, BIG),
        CLI_INT_OPT("--shared-len", &shared_len, 1, BIG),
        CLI_INT_OPT("--branching", &branching, 1, BIG),
        CLI_INT_OPT("--depth", &depth, 0, 32),
        CLI_INT_OPT("--examples", &examples, 1, BIG),
        CLI_INT_OPT("--shots", &shots, 0, BIG),
        CLI_INT_OPT("--seed", &seed, 0, INT64_MAX),
        CLI_INT_OPT("--vocab", &vocab, 1, INT32_MAX),
        CLI_DOUBLE_OPT("--hit-rate", &c.hit_rate, 0, 1),
        CLI_DOUBLE_OPT("--rate", &c.rate, 0, 1e9),
        CLI_DOUBLE_OPT("--think-time", &c.think_s, 0, 1e9),
        CLI_END,
    };
    char err[512];
    cli_args a;
    int rc = cli_command("gen", opts, argc, argv, &a, usage_gen);
    if (rc >= 0) return rc;
    if (a.npos == 0) {
        fprintf(stderr, "radixkv gen: KIND is required (see radixkv gen --help)\n");
        return 2;
    }
    if (a.npos > 1) {
        fprintf(stderr, "radixkv gen: unexpected argument '%s' (one KIND only)\n", a.pos[1]);
        return 2;
    }
    int k = rkv_name_index(workload_kinds, a.pos[0]);
    if (k < 0) {
        fprintf(stderr, "radixkv gen: unknown kind '%s' (one of:", a.pos[0]);
        for (k = 0; workload_kinds[k]; k++) fprintf(stderr, " %s", workload_kinds[k]);
        fprintf(stderr, ")\n");
        return 2;
    }
    c.kind = workload_kinds[k];
    c.num = (int32_t)num;
    c.prompt_len = (int32_t)prompt_len;
    c.output_len = (int32_t)output_len;
    c.turns = (int32_t)turns;
    c.shared_len = (int32_t)shared_len;
    c.branching = (int32_t)branching;
    c.depth = (int32_t)depth;
    c.examples = (int32_t)examples;
    c.shots = (int32_t)shots;
    c.seed = (uint64_t)seed;
    c.vocab_size = (int32_t)vocab;
    bool have_vocab = cli_given(opts, "--vocab");
    if (model) {
        if (have_vocab) {
            fprintf(stderr, "radixkv gen: --vocab and --model both given; pick one\n");
            return 2;
        }
        model_config mc;
        if (model_config_load(model, &mc, err, sizeof err)) {
            fprintf(stderr, "radixkv gen: --model: %s\n", err);
            return 2;
        }
        c.vocab_size = mc.vocab_size;
    }
    *cp = c;
    return -1;
}

int cmd_gen(int argc, char **argv)
{
    workload_config c;
    const char *out_path = NULL;
    int rc = parse_gen(argc, argv, &c, &out_path);
    if (rc >= 0) return rc;
    char err[512];
    workload w;
    rkv_status st = workload_generate(&c, &w, err, sizeof err);
    if (st) {
        fprintf(stderr, "radixkv gen: %s\n", err);
        return st == RKV_EINVAL ? 2 : 1;
    }
    /* A temporary name renamed on close (out_file.h): a failure leaves no file. */
    out_file of;
    FILE *f = out_file_open(&of, out_path, err, sizeof err);
    if (!f) {
        fprintf(stderr, "radixkv gen: --out: %s\n", err);
        workload_free(&w);
        return 1;
    }
    st = workload_write_jsonl(&w, f);
    int bad = f != stdout ? fclose(f) != 0 : fflush(f) != 0;
    if (out_file_finish(&of, st || bad, err, sizeof err)) {
        fprintf(stderr, "radixkv gen: --out: %s\n", err);
        bad = 1;
    }
    fprintf(stderr, "radixkv gen: %s, %lld requests\n", c.kind, (long long)w.n);
    workload_free(&w);
    if (st || bad) {
        fprintf(stderr, "radixkv gen: writing the trace failed\n");
        return 1;
    }
    return 0;
}
