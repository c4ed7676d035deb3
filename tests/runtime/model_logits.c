/* model_logits.c - print the cpu backend's logits for given prompts, for the
 * Hugging Face reference test (hf_reference.py).
 *
 * Usage: model_logits MODEL_DIR REQUESTS.json
 *   MODEL_DIR: config.json + safetensors weights
 *   REQUESTS.json: [{"tokens": [..], "prefix": p}, ...]
 * All prompts run as one batch. With prefix p > 0 the first p tokens run in
 * an earlier step (their K/V land in pages) and the last step computes only
 * tokens[p..n) against that cached prefix: the path the engine takes on a
 * cache hit. Output: one JSON line per prompt, {"logits": [...]} of its last
 * token.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"

typedef struct prompt {
    int32_t *tokens;
    int32_t n, prefix;
    int32_t first_page;
} prompt;

/* Run rows [from[i], to[i]) of every prompt with to > from in one step. */
static int run_step(backend *b, prompt *p, int np, const int32_t *from, const int32_t *to,
                    float *logits, int32_t max_pages)
{
    int32_t T = 0, B = 0;
    for (int i = 0; i < np; i++) T += to[i] - from[i];
    int32_t *tok = calloc((size_t)T + 1, 4), *pos = calloc((size_t)T + 1, 4),
            *slot = calloc((size_t)T + 1, 4), *qs = calloc((size_t)np + 1, 4),
            *pl = calloc((size_t)np + 1, 4), *sr = calloc((size_t)np + 1, 4),
            *pt = calloc((size_t)np * (size_t)max_pages + 1, 4), *steps = calloc((size_t)np + 1, 4),
            *out = calloc((size_t)np + 1, 4), *which = calloc((size_t)np + 1, 4);
    sampling_params *sp = calloc((size_t)np + 1, sizeof *sp);
    const int32_t P = b->page_size, V = b->vocab_size;
    float *lg = malloc(sizeof(float) * (size_t)(np + 1) * (size_t)V);
    int32_t r = 0;
    for (int i = 0; i < np; i++) {
        if (to[i] <= from[i]) continue;
        pl[B] = from[i];
        for (int32_t j = 0; j < max_pages; j++) pt[(size_t)B * max_pages + j] = p[i].first_page + j;
        for (int32_t t = from[i]; t < to[i]; t++, r++) {
            tok[r] = p[i].tokens[t];
            pos[r] = t;
            slot[r] = (p[i].first_page + t / P) * P + t % P;
        }
        qs[B + 1] = r;
        sr[B] = r - 1;
        sp[B].top_p = 1.0f;
        which[B] = i;
        B++;
    }
    fwd_batch fb = {.num_seqs = B, .num_tokens = T, .token_ids = tok, .positions = pos,
                    .q_starts = qs, .prefix_lens = pl, .page_table = pt, .max_pages = max_pages,
                    .slot_mapping = slot, .sample_rows = sr, .sampling = sp,
                    .sample_steps = steps};
    rkv_status st = b->ops->forward(b, &fb, out, lg, NULL);
    if (st == RKV_OK && logits)
        for (int k = 0; k < B; k++)
            memcpy(logits + (size_t)which[k] * V, lg + (size_t)k * V, sizeof(float) * (size_t)V);
    free(tok); free(pos); free(slot); free(qs); free(pl); free(sr); free(pt); free(steps);
    free(out); free(which); free(sp); free(lg);
    return st == RKV_OK ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: model_logits MODEL_DIR REQUESTS.json\n");
        return 2;
    }
    json_error_t je;
    json_t *req = json_load_file(argv[2], 0, &je);
    if (!json_is_array(req)) {
        fprintf(stderr, "%s:%d: %s\n", argv[2], je.line, req ? "not an array" : je.text);
        return 2;
    }
    int np = (int)json_array_size(req);
    prompt *p = calloc((size_t)np + 1, sizeof *p);
    const int32_t P = 16;
    int32_t max_pages = 1, next_page = 0;
    for (int i = 0; i < np; i++) {
        json_t *o = json_array_get(req, (size_t)i), *t = json_object_get(o, "tokens");
        p[i].n = (int32_t)json_array_size(t);
        p[i].prefix = (int32_t)json_integer_value(json_object_get(o, "prefix"));
        if (p[i].n < 1 || p[i].prefix < 0 || p[i].prefix >= p[i].n) {
            fprintf(stderr, "%s: request %d: need 0 <= prefix < len(tokens)\n", argv[2], i);
            return 2;
        }
        p[i].tokens = malloc(sizeof(int32_t) * (size_t)p[i].n);
        for (int32_t j = 0; j < p[i].n; j++)
            p[i].tokens[j] = (int32_t)json_integer_value(json_array_get(t, (size_t)j));
        int32_t pages = (p[i].n + P - 1) / P;
        p[i].first_page = next_page;
        next_page += pages;
        if (pages > max_pages) max_pages = pages;
    }
    json_decref(req);

    /* weights NULL: a checkpoint directory as model brings its own weights */
    backend_config cfg = {.model = argv[1], .weights = NULL, .seed = 0, .page_size = P,
                          .num_pages = next_page + 1, .num_threads = 1};
    backend *b;
    char err[512];
    if (backend_create("cpu", &cfg, &b, err, sizeof err) != RKV_OK) {
        fprintf(stderr, "model_logits: %s\n", err);
        return 1;
    }
    fprintf(stderr, "model_logits: %s\n", b->description);
    int32_t *from = calloc((size_t)np + 1, 4), *to = calloc((size_t)np + 1, 4);
    float *logits = malloc(sizeof(float) * (size_t)np * (size_t)b->vocab_size);
    int rc = 0;
    /* step 1: the prefixes; step 2: the suffixes (or whole prompts) */
    for (int i = 0; i < np; i++) from[i] = 0, to[i] = p[i].prefix;
    rc |= run_step(b, p, np, from, to, NULL, max_pages);
    for (int i = 0; i < np; i++) from[i] = p[i].prefix, to[i] = p[i].n;
    rc |= run_step(b, p, np, from, to, logits, max_pages);
    for (int i = 0; i < np && !rc; i++) {
        printf("{\"logits\": [");
        for (int32_t v = 0; v < b->vocab_size; v++)
            printf("%s%.9g", v ? ", " : "", (double)logits[(size_t)i * b->vocab_size + v]);
        printf("]}\n");
    }
    for (int i = 0; i < np; i++) free(p[i].tokens);
    free(p); free(from); free(to); free(logits);
    backend_destroy(b);
    return rc;
}
