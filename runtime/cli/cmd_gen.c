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

int cmd_gen(int argc, char **argv)
{
    workload_config c;
    workload_config_default(&c);
    const char *out_path = NULL, *model = NULL;
    bool have_kind = false, have_vocab = false;
    for (int i = 1; i < argc; i++) {
        char name[64];
        const char *a = argv[i], *val = NULL;
        const char *eq = strchr(a, '=');
        if (a[0] == '-' && a[1] == '-' && eq && (size_t)(eq - a) < sizeof name) {
            memcpy(name, a, (size_t)(eq - a));
            name[eq - a] = 0;
            val = eq + 1;
        } else {
            snprintf(name, sizeof name, "%s", a);
        }
        if (!strcmp(name, "--help") || !strcmp(name, "-h")) {
            usage_gen(stdout);
            return 0;
        }
        if (strncmp(name, "--", 2)) {
            if (have_kind) {
                fprintf(stderr, "radixkv gen: unexpected argument '%s' (one KIND only)\n", a);
                return 2;
            }
            int k = 0;
            while (workload_kinds[k] && strcmp(workload_kinds[k], a)) k++;
            if (!workload_kinds[k]) {
                fprintf(stderr, "radixkv gen: unknown kind '%s' (one of:", a);
                for (k = 0; workload_kinds[k]; k++) fprintf(stderr, " %s", workload_kinds[k]);
                fprintf(stderr, ")\n");
                return 2;
            }
            c.kind = workload_kinds[k];
            have_kind = true;
            continue;
        }
        const char *v = val ? val : (i + 1 < argc ? argv[++i] : NULL);
        if (!v) {
            fprintf(stderr, "radixkv gen: %s needs a value\n", name);
            return 2;
        }
        int64_t x = 0;
        int rc = 0;
        const int64_t BIG = 1 << 24;
        if (!strcmp(name, "--out")) out_path = v;
        else if (!strcmp(name, "--model")) model = v;
        else if (!strcmp(name, "--num")) { rc = cli_int("gen", name, v, 1, BIG, &x); c.num = (int32_t)x; }
        else if (!strcmp(name, "--prompt-len")) { rc = cli_int("gen", name, v, 1, BIG, &x); c.prompt_len = (int32_t)x; }
        else if (!strcmp(name, "--output-len")) { rc = cli_int("gen", name, v, 1, BIG, &x); c.output_len = (int32_t)x; }
        else if (!strcmp(name, "--turns")) { rc = cli_int("gen", name, v, 1, BIG, &x); c.turns = (int32_t)x; }
        else if (!strcmp(name, "--shared-len")) { rc = cli_int("gen", name, v, 1, BIG, &x); c.shared_len = (int32_t)x; }
        else if (!strcmp(name, "--branching")) { rc = cli_int("gen", name, v, 1, BIG, &x); c.branching = (int32_t)x; }
        else if (!strcmp(name, "--depth")) { rc = cli_int("gen", name, v, 0, 32, &x); c.depth = (int32_t)x; }
        else if (!strcmp(name, "--examples")) { rc = cli_int("gen", name, v, 1, BIG, &x); c.examples = (int32_t)x; }
        else if (!strcmp(name, "--shots")) { rc = cli_int("gen", name, v, 0, BIG, &x); c.shots = (int32_t)x; }
        else if (!strcmp(name, "--seed")) { rc = cli_int("gen", name, v, 0, INT64_MAX, &x); c.seed = (uint64_t)x; }
        else if (!strcmp(name, "--vocab")) {
            rc = cli_int("gen", name, v, 1, INT32_MAX, &x);
            c.vocab_size = (int32_t)x;
            have_vocab = true;
        } else if (!strcmp(name, "--hit-rate")) rc = cli_double("gen", name, v, 0, 1, &c.hit_rate);
        else if (!strcmp(name, "--rate")) rc = cli_double("gen", name, v, 0, 1e9, &c.rate);
        else if (!strcmp(name, "--think-time")) rc = cli_double("gen", name, v, 0, 1e9, &c.think_s);
        else {
            fprintf(stderr, "radixkv gen: unknown option %s (see radixkv gen --help)\n", name);
            return 2;
        }
        if (rc) return rc;
    }
    if (!have_kind) {
        fprintf(stderr, "radixkv gen: KIND is required (see radixkv gen --help)\n");
        return 2;
    }
    char err[512];
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
    workload w;
    rkv_status st = workload_generate(&c, &w, err, sizeof err);
    if (st) {
        fprintf(stderr, "radixkv gen: %s\n", err);
        return st == RKV_EINVAL ? 2 : 1;
    }
    FILE *f = stdout;
    if (out_path && !(f = fopen(out_path, "w"))) {
        fprintf(stderr, "radixkv gen: --out: cannot write '%s': %s\n", out_path, strerror(errno));
        workload_free(&w);
        return 1;
    }
    st = workload_write_jsonl(&w, f);
    int bad = f != stdout ? fclose(f) != 0 : fflush(f) != 0;
    fprintf(stderr, "radixkv gen: %s, %lld requests\n", c.kind, (long long)w.n);
    workload_free(&w);
    if (st || bad) {
        fprintf(stderr, "radixkv gen: writing the trace failed\n");
        return 1;
    }
    return 0;
}
