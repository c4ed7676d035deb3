/* workloads.c - synthetic traces; see workloads.h. */
#include "workloads.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "rkv_core.h"

/* The registry of kinds: each generator below, in list order. */
#define WORKLOAD_LIST(X)                                                                     \
    X("sweep", gen_sweep) X("multi-turn", gen_multi_turn) X("few-shot", gen_few_shot)        \
    X("long-doc", gen_long_doc) X("tree-of-thought", gen_tree_of_thought)                   \
    X("self-consistency", gen_self_consistency) X("judge", gen_judge)
#define WL_NAME(n, f) n,
const char *const workload_kinds[] = {WORKLOAD_LIST(WL_NAME) NULL};

void workload_config_default(workload_config *c)
{
    memset(c, 0, sizeof *c);
    c->kind = "sweep";
    c->seed = 1;
    c->vocab_size = 4096;
    c->num = 64;
    c->prompt_len = 1000;
    c->output_len = 24;
    c->hit_rate = 0.5;
    c->turns = 4;
    c->shared_len = 256;
    c->branching = 4;
    c->depth = 2;
    c->examples = 16;
    c->shots = 4;
    c->think_s = 1.0;
}

typedef struct rng {
    uint64_t s;
} rng;

static double rng_uniform(rng *r) { return (double)(rkv_splitmix64_next(&r->s) >> 11) * 0x1.0p-53; }

/* A growable token sequence under construction. */
typedef struct seq {
    int32_t *t;
    int32_t n, cap;
} seq;

static rkv_status seq_put(seq *s, const int32_t *t, int32_t n)
{
    if (n == 0) return RKV_OK; /* t may be NULL (an empty shared prefix) */
    if ((int64_t)s->n + n > ((int64_t)1 << 28)) return RKV_ERANGE; /* one prompt past the budget */
    if (rkv_grow32((void **)&s->t, &s->cap, (int64_t)s->n + n, sizeof *s->t)) return RKV_ENOMEM;
    memcpy(s->t + s->n, t, sizeof(int32_t) * (size_t)n);
    s->n += n;
    return RKV_OK;
}

/* n fresh random tokens appended to s. */
static rkv_status seq_random(seq *s, rng *r, int32_t vocab, int32_t n)
{
    for (int32_t i = 0; i < n; i++) {
        int32_t t = (int32_t)(rkv_splitmix64_next(&r->s) % (uint64_t)vocab);
        rkv_status st = seq_put(s, &t, 1);
        if (st) return st;
    }
    return RKV_OK;
}

typedef struct gen {
    const workload_config *c;
    workload *w;
    rng r;
    double t;      /* arrival clock */
    int64_t tokens; /* prompt tokens emitted so far */
} gen;

/* The most prompt tokens one workload may hold (1 GiB of ids, some GB of JSON): a request for
 * more (e.g. --num 2^24 --prompt-len 2^24) is refused, not grown without end. */
#define WORKLOAD_MAX_TOKENS ((int64_t)1 << 28)

static double next_arrival(gen *g)
{
    if (g->c->rate <= 0) return -1;
    g->t += -log(1.0 - rng_uniform(&g->r)) / g->c->rate;
    return g->t;
}

static rkv_status emit(gen *g, const seq *s, int32_t max_tokens, double arrival,
                       double temperature, int64_t seed)
{
    workload *w = g->w;
    if ((g->tokens += s->n) > WORKLOAD_MAX_TOKENS) return RKV_ERANGE;
    if (rkv_grow((void **)&w->reqs, &w->cap, w->n + 1, sizeof *w->reqs)) return RKV_ENOMEM;
    wl_request *q = &w->reqs[w->n];
    q->tokens = malloc(sizeof(int32_t) * (size_t)(s->n ? s->n : 1));
    if (!q->tokens) return RKV_ENOMEM;
    memcpy(q->tokens, s->t, sizeof(int32_t) * (size_t)s->n);
    q->n_tokens = s->n;
    q->max_tokens = max_tokens;
    q->arrival = arrival;
    q->temperature = temperature;
    q->seed = seed;
    w->n++;
    return RKV_OK;
}

/* The request most kinds emit: the next arrival, greedy, no seed. */
static rkv_status emit_next(gen *g, const seq *s)
{
    return emit(g, s, g->c->output_len, next_arrival(g), -1, -1);
}

/* s becomes prefix (NULL: none) followed by n fresh random tokens: a prompt
 * built over a shared part. */
static rkv_status seq_over(gen *g, seq *s, const seq *prefix, int32_t n)
{
    s->n = 0;
    rkv_status st = prefix ? seq_put(s, prefix->t, prefix->n) : RKV_OK;
    return st ? st : seq_random(s, &g->r, g->c->vocab_size, n);
}

#define TRY(x) do { if ((st = (x)) != RKV_OK) goto out; } while (0)

static rkv_status gen_sweep(gen *g)
{
    const workload_config *c = g->c;
    rkv_status st = RKV_OK;
    seq shared = {0}, s = {0};
    int32_t h = (int32_t)floor(c->hit_rate * c->prompt_len);
    TRY(seq_random(&shared, &g->r, c->vocab_size, h));
    for (int32_t i = 0; i < c->num; i++) {
        TRY(seq_over(g, &s, &shared, c->prompt_len - h));
        TRY(emit_next(g, &s));
    }
out:
    free(shared.t);
    free(s.t);
    return st;
}

static rkv_status gen_multi_turn(gen *g)
{
    const workload_config *c = g->c;
    rkv_status st = RKV_OK;
    seq sys = {0};
    TRY(seq_random(&sys, &g->r, c->vocab_size, c->shared_len));
    /* Turn-major order, so a trace replayed in order sees each turn after
     * the previous turn of its session. */
    seq *sess = calloc((size_t)c->num, sizeof *sess);
    double *start = calloc((size_t)c->num, sizeof *start);
    if (!sess || !start) {
        free(sess);
        free(start);
        st = RKV_ENOMEM;
        goto out;
    }
    for (int32_t i = 0; i < c->num && st == RKV_OK; i++) {
        st = seq_put(&sess[i], sys.t, sys.n);
        start[i] = next_arrival(g);
    }
    for (int32_t t = 0; t < c->turns && st == RKV_OK; t++) {
        for (int32_t i = 0; i < c->num && st == RKV_OK; i++) {
            st = seq_random(&sess[i], &g->r, c->vocab_size, c->prompt_len);
            if (st == RKV_OK)
                st = emit(g, &sess[i], c->output_len,
                          start[i] < 0 ? -1 : start[i] + t * c->think_s, -1, -1);
            /* The answer the next turn carries in its history. */
            if (st == RKV_OK) st = seq_random(&sess[i], &g->r, c->vocab_size, c->output_len);
        }
    }
    for (int32_t i = 0; i < c->num; i++) free(sess[i].t);
    free(sess);
    free(start);
out:
    free(sys.t);
    return st;
}

static rkv_status gen_few_shot(gen *g)
{
    const workload_config *c = g->c;
    rkv_status st = RKV_OK;
    seq instr = {0}, s = {0};
    seq *ex = calloc((size_t)c->examples, sizeof *ex);
    int32_t *pick = malloc(sizeof(int32_t) * (size_t)c->examples);
    if (!ex || !pick) {
        st = RKV_ENOMEM;
        goto out;
    }
    TRY(seq_random(&instr, &g->r, c->vocab_size, c->shared_len / 4 + 1));
    for (int32_t e = 0; e < c->examples; e++)
        TRY(seq_random(&ex[e], &g->r, c->vocab_size, c->shared_len));
    for (int32_t i = 0; i < c->num; i++) {
        if (i % c->branching == 0) {
            /* A new group: K distinct examples, partial Fisher-Yates. */
            for (int32_t e = 0; e < c->examples; e++) pick[e] = e;
            for (int32_t k = 0; k < c->shots; k++) {
                int32_t j =
                    k + (int32_t)(rkv_splitmix64_next(&g->r.s) % (uint64_t)(c->examples - k));
                int32_t tmp = pick[k];
                pick[k] = pick[j];
                pick[j] = tmp;
            }
        }
        s.n = 0;
        TRY(seq_put(&s, instr.t, instr.n));
        for (int32_t k = 0; k < c->shots; k++) TRY(seq_put(&s, ex[pick[k]].t, ex[pick[k]].n));
        TRY(seq_random(&s, &g->r, c->vocab_size, c->prompt_len));
        TRY(emit_next(g, &s));
    }
out:
    if (ex)
        for (int32_t e = 0; e < c->examples; e++) free(ex[e].t);
    free(ex);
    free(pick);
    free(instr.t);
    free(s.t);
    return st;
}

static rkv_status gen_long_doc(gen *g)
{
    const workload_config *c = g->c;
    rkv_status st = RKV_OK;
    seq doc = {0}, s = {0};
    for (int32_t d = 0; d < c->num; d++) {
        TRY(seq_over(g, &doc, NULL, c->shared_len));
        for (int32_t q = 0; q < c->branching; q++) {
            TRY(seq_over(g, &s, &doc, c->prompt_len));
            TRY(emit_next(g, &s));
        }
    }
out:
    free(doc.t);
    free(s.t);
    return st;
}

/* Depth-first, so a child always follows its parent in the trace. */
static rkv_status tot_node(gen *g, seq *path, int32_t depth)
{
    const workload_config *c = g->c;
    rkv_status st = emit_next(g, path);
    if (st || depth == c->depth) return st;
    int32_t n0 = path->n;
    for (int32_t b = 0; b < c->branching; b++) {
        path->n = n0;
        if ((st = seq_random(path, &g->r, c->vocab_size, c->shared_len))) return st;
        if ((st = tot_node(g, path, depth + 1))) return st;
    }
    path->n = n0;
    return RKV_OK;
}

static rkv_status gen_tree_of_thought(gen *g)
{
    const workload_config *c = g->c;
    rkv_status st = RKV_OK;
    seq s = {0};
    for (int32_t i = 0; i < c->num; i++) {
        TRY(seq_over(g, &s, NULL, c->prompt_len));
        TRY(tot_node(g, &s, 0));
    }
out:
    free(s.t);
    return st;
}

static rkv_status gen_self_consistency(gen *g)
{
    const workload_config *c = g->c;
    rkv_status st = RKV_OK;
    seq s = {0};
    for (int32_t i = 0; i < c->num; i++) {
        TRY(seq_over(g, &s, NULL, c->prompt_len));
        for (int32_t k = 0; k < c->branching; k++)
            TRY(emit(g, &s, c->output_len, next_arrival(g), 0.7,
                     (int64_t)(rkv_splitmix64_next(&g->r.s) >> 33) + 1));
    }
out:
    free(s.t);
    return st;
}

static rkv_status gen_judge(gen *g)
{
    const workload_config *c = g->c;
    rkv_status st = RKV_OK;
    seq s = {0}, merge = {0};
    seq *crit = calloc((size_t)c->branching, sizeof *crit);
    if (!crit) return RKV_ENOMEM;
    for (int32_t b = 0; b < c->branching; b++)
        TRY(seq_random(&crit[b], &g->r, c->vocab_size, c->shared_len));
    TRY(seq_random(&merge, &g->r, c->vocab_size, c->shared_len / 2 + 1));
    for (int32_t i = 0; i < c->num; i++) {
        seq prob = {0};
        TRY(seq_random(&prob, &g->r, c->vocab_size, c->prompt_len));
        for (int32_t b = 0; b < c->branching && st == RKV_OK; b++) {
            s.n = 0;
            st = seq_put(&s, prob.t, prob.n);
            if (st == RKV_OK) st = seq_put(&s, crit[b].t, crit[b].n);
            if (st == RKV_OK) st = emit_next(g, &s);
        }
        s.n = 0;
        if (st == RKV_OK) st = seq_put(&s, prob.t, prob.n);
        for (int32_t b = 0; b < c->branching && st == RKV_OK; b++)
            st = seq_random(&s, &g->r, c->vocab_size, c->output_len);
        if (st == RKV_OK) st = seq_put(&s, merge.t, merge.n);
        if (st == RKV_OK) st = emit_next(g, &s);
        free(prob.t);
        if (st) goto out;
    }
out:
    for (int32_t b = 0; b < c->branching; b++) free(crit[b].t);
    free(crit);
    free(merge.t);
    free(s.t);
    return st;
}

rkv_status workload_generate(const workload_config *c, workload *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    const char *kind = c->kind ? c->kind : "sweep";
    struct { const char *name; int64_t v, lo; } f[] = {
        {"vocab_size", c->vocab_size, 1}, {"num", c->num, 1}, {"prompt_len", c->prompt_len, 1},
        {"output_len", c->output_len, 1}, {"turns", c->turns, 1}, {"shared_len", c->shared_len, 1},
        {"branching", c->branching, 1}, {"depth", c->depth, 0}, {"examples", c->examples, 1},
        {"shots", c->shots, 0},
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        if (f[i].v < f[i].lo || f[i].v > (1 << 24)) {
            snprintf(err, errlen, "workload: %s = %lld out of range [%lld, %d]", f[i].name,
                     (long long)f[i].v, (long long)f[i].lo, 1 << 24);
            return RKV_EINVAL;
        }
    }
    if (!(c->hit_rate >= 0 && c->hit_rate <= 1)) {
        snprintf(err, errlen, "workload: hit_rate %g must be in [0, 1]", c->hit_rate);
        return RKV_EINVAL;
    }
    if (!(c->rate >= 0) || isinf(c->rate) || !(c->think_s >= 0)) {
        snprintf(err, errlen, "workload: rate and think time must be finite and >= 0");
        return RKV_EINVAL;
    }
    if (c->shots > c->examples) {
        snprintf(err, errlen, "workload: shots %d exceeds examples %d", c->shots, c->examples);
        return RKV_EINVAL;
    }
    double nodes = 0, level = 1;
    for (int32_t d = 0; d <= c->depth; d++, level *= c->branching) nodes += level;
    if (!strcmp(kind, "tree-of-thought") && nodes * c->num > 1e7) {
        snprintf(err, errlen, "workload: tree-of-thought of %g requests is too large", nodes * c->num);
        return RKV_EINVAL;
    }
    /* The prompt tokens a kind emits at least (workloads.h's shapes), known
     * before anything is drawn: a request far past the limit is refused at
     * once (2^48 tokens were once refused only after 2^28 were generated). */
    double N = c->num, L = c->prompt_len, O = c->output_len, S = c->shared_len, B = c->branching;
    double least = !strcmp(kind, "multi-turn")         ? N * c->turns * (S + L)
                   : !strcmp(kind, "few-shot")         ? N * (c->shots * S + L)
                   : !strcmp(kind, "long-doc")         ? N * B * (S + L)
                   : !strcmp(kind, "tree-of-thought")  ? nodes * N * L
                   : !strcmp(kind, "self-consistency") ? N * B * L
                   : !strcmp(kind, "judge")            ? N * (B * (L + S) + L + B * O)
                                                       : N * L;
    if (least > (double)WORKLOAD_MAX_TOKENS) {
        snprintf(err, errlen, "workload: %s would hold more than %lld prompt tokens (at least "
                 "%.4g; lower --num, --prompt-len or the kind's other sizes)",
                 kind, (long long)WORKLOAD_MAX_TOKENS, least);
        return RKV_EINVAL;
    }
    gen g = {.c = c, .w = out, .r = {c->seed}, .t = 0};
    static const struct { const char *name; rkv_status (*fn)(gen *); } kinds[] = {
#define WL_ENTRY(n, f) {n, f},
        WORKLOAD_LIST(WL_ENTRY)
    };
    size_t k = 0;
    while (k < sizeof kinds / sizeof *kinds && strcmp(kind, kinds[k].name)) k++;
    if (k == sizeof kinds / sizeof *kinds) {
        char names[256];
        snprintf(err, errlen, "workload: unknown kind '%s' (%s)", kind,
                 rkv_join_names(names, sizeof names, workload_kinds));
        return RKV_EINVAL;
    }
    rkv_status st = kinds[k].fn(&g);
    if (st == RKV_ERANGE) {
        workload_free(out);
        snprintf(err, errlen, "workload: %s would hold more than %lld prompt tokens "
                 "(lower --num, --prompt-len or the kind's other sizes)",
                 kind, (long long)WORKLOAD_MAX_TOKENS);
        return RKV_EINVAL;
    }
    if (st) {
        workload_free(out);
        snprintf(err, errlen, "workload: %s", rkv_status_str(st));
    }
    return st;
}

rkv_status workload_write_jsonl(const workload *w, FILE *f)
{
    for (int64_t i = 0; i < w->n; i++) {
        const wl_request *q = &w->reqs[i];
        fprintf(f, "{\"id\":%lld,\"tokens\":[", (long long)i);
        for (int32_t j = 0; j < q->n_tokens; j++) fprintf(f, j ? ",%d" : "%d", q->tokens[j]);
        fprintf(f, "],\"max_tokens\":%d", q->max_tokens);
        if (q->arrival >= 0) fprintf(f, ",\"arrival\":%.6f", q->arrival);
        if (q->temperature >= 0) fprintf(f, ",\"temperature\":%g", q->temperature);
        if (q->seed >= 0) fprintf(f, ",\"seed\":%lld", (long long)q->seed);
        fputs("}\n", f);
    }
    return ferror(f) ? RKV_EIO : RKV_OK;
}

void workload_free(workload *w)
{
    for (int64_t i = 0; i < w->n; i++) free(w->reqs[i].tokens);
    free(w->reqs);
    memset(w, 0, sizeof *w);
}
