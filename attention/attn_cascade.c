/* attn_cascade.c - the cascade planner (host, shared by the CPU and CUDA
 * paths) and the CPU cascade: level 1 over each group's shared pages, level 2
 * over each sequence's own rest, merged through the lse (attention.h).
 *
 * Planner. A group of m sequences sharing d pages saves (m - 1) d page reads;
 * the plan maximises the sum over disjoint groups, exactly:
 *   1) the sequences with at least min_shared full pages, sorted by their
 *      page lists; lcp[k] = pages sorted[k-1] and sorted[k] share;
 *   2) from these the tree of shared prefixes (the radix tree's shape over
 *      the batch, built with a stack): an inner node per distinct shared
 *      depth, a leaf per sequence under the node of its own depth;
 *
 *          root (0)                 seqs  A = a b c x    C = a b y
 *            |                            B = a b c z    D = q
 *          ab (2) --- C                   tree: A, B meet at abc (3),
 *            |                                  with C at ab (2)
 *          abc (3) --- A, B
 *
 *   3) bottom up, f_v[k] = the most saved inside v's subtree when k of its
 *      sequences are left ungrouped (for an ancestor to take): the children's
 *      tables combined by (max, +) convolution, then at v one group of j >= 2
 *      of the leftovers (one group per node is enough: two at the same depth
 *      save less than their union), worth (j - 1) depth(v);
 *   4) top down, the choices replayed; a group takes its members from
 *      different children (round robin), so its shared pages are exactly the
 *      node's depth: the deepest pages common to all its members.
 * Time and memory O(B^2) in the worst case (a batch: hundreds).
 */
#include <stdlib.h>
#include <string.h>

#include "attention_common.h"

void attn_cascade_plan_free(attn_cascade_plan *p)
{
    if (!p) return;
    free(p->group_starts);
    free(p->members);
    free(p->shared_pages);
    free(p->seq_shared);
    memset(p, 0, sizeof *p);
}

typedef struct sort_ctx {
    const int32_t *table, *full;
    int32_t stride;
} sort_ctx;

static _Thread_local const sort_ctx *g_sort;

/* Whole pages sequences a and b share at the start of their tables. */
static int32_t shared_of(const sort_ctx *c, int32_t a, int32_t b)
{
    const int32_t n = c->full[a] < c->full[b] ? c->full[a] : c->full[b];
    const int32_t *ra = c->table + (int64_t)a * c->stride, *rb = c->table + (int64_t)b * c->stride;
    int32_t k = 0;
    while (k < n && ra[k] == rb[k]) k++;
    return k;
}

static int cmp_pages(const void *x, const void *y)
{
    const sort_ctx *c = g_sort;
    const int32_t a = *(const int32_t *)x, b = *(const int32_t *)y;
    const int32_t k = shared_of(c, a, b);
    const int32_t *ra = c->table + (int64_t)a * c->stride, *rb = c->table + (int64_t)b * c->stride;
    if (k < c->full[a] && k < c->full[b] && ra[k] != rb[k]) return ra[k] < rb[k] ? -1 : 1;
    if (c->full[a] != c->full[b]) return c->full[a] < c->full[b] ? -1 : 1;
    return a < b ? -1 : a > b;
}

static int cmp_int(const void *x, const void *y)
{
    const int32_t a = *(const int32_t *)x, b = *(const int32_t *)y;
    return a < b ? -1 : a > b;
}

/* ---- the tree of shared prefixes and its (max, +) tables ---------------- */

#define NEG_INF INT64_MIN

typedef struct tnode {
    int32_t depth, seq;            /* seq >= 0: a leaf (one sequence) */
    int32_t child, sibling, last;  /* first child, next sibling, last child */
    int32_t n;                     /* sequences below */
    int64_t *f;                    /* (n + 1) best saving with k left over */
    int32_t *take;                 /* (n + 1) group size j chosen at this node */
    int32_t **split;               /* per child i > 0: (n_upto + 1) leftovers taken from it */
} tnode;

typedef struct tree {
    tnode *v;
    int32_t count;
    int32_t min_shared;
    attn_cascade_plan *plan;
    int32_t groups, members;
    int32_t *buf; /* leftover sequences during the replay */
} tree;

static int32_t tree_add(tree *t, int32_t depth, int32_t seq)
{
    tnode *x = &t->v[t->count];
    memset(x, 0, sizeof *x);
    x->depth = depth;
    x->seq = seq;
    x->child = x->sibling = x->last = -1;
    return t->count++;
}

static void tree_link(tree *t, int32_t parent, int32_t child)
{
    tnode *p = &t->v[parent];
    if (p->last < 0) p->child = child;
    else t->v[p->last].sibling = child;
    p->last = child;
}

/* Step 3 for node v (children first). Returns 0 or -1 (out of memory). */
static int tree_solve(tree *t, int32_t v)
{
    tnode *x = &t->v[v];
    if (x->seq >= 0) {
        x->n = 1;
        x->f = malloc(sizeof(int64_t) * 2);
        if (!x->f) return -1;
        x->f[0] = NEG_INF;
        x->f[1] = 0;
        return 0;
    }
    int32_t nch = 0;
    for (int32_t c = x->child; c >= 0; c = t->v[c].sibling) {
        if (tree_solve(t, c)) return -1;
        x = &t->v[v];
        nch++;
    }
    x->split = calloc((size_t)(nch > 0 ? nch : 1), sizeof(int32_t *));
    if (!x->split) return -1;
    /* g = (max, +) convolution of the children's tables, child by child. */
    int64_t *g = malloc(sizeof(int64_t));
    if (!g) return -1;
    g[0] = 0;
    int32_t n = 0, i = 0;
    for (int32_t c = x->child; c >= 0; c = t->v[c].sibling, i++) {
        const tnode *y = &t->v[c];
        int64_t *h = malloc(sizeof(int64_t) * (size_t)(n + y->n + 1));
        int32_t *sp = malloc(sizeof(int32_t) * (size_t)(n + y->n + 1));
        if (!h || !sp) {
            free(h);
            free(sp);
            free(g);
            return -1;
        }
        for (int32_t k = 0; k <= n + y->n; k++) {
            h[k] = NEG_INF;
            sp[k] = 0;
        }
        for (int32_t a = 0; a <= n; a++) {
            if (g[a] == NEG_INF) continue;
            for (int32_t b = 0; b <= y->n; b++) {
                if (y->f[b] == NEG_INF) continue;
                if (g[a] + y->f[b] > h[a + b]) {
                    h[a + b] = g[a] + y->f[b];
                    sp[a + b] = b;
                }
            }
        }
        free(g);
        g = h;
        n += y->n;
        x->split[i] = sp;
    }
    x->n = n;
    x->f = malloc(sizeof(int64_t) * (size_t)(n + 1));
    x->take = malloc(sizeof(int32_t) * (size_t)(n + 1));
    if (!x->f || !x->take) {
        free(g);
        return -1;
    }
    for (int32_t k = 0; k <= n; k++) {
        x->f[k] = g[k];
        x->take[k] = 0;
        if (x->depth < t->min_shared) continue;
        for (int32_t j = 2; k + j <= n; j++) {
            if (g[k + j] == NEG_INF) continue;
            const int64_t val = g[k + j] + (int64_t)(j - 1) * x->depth;
            if (val > x->f[k]) {
                x->f[k] = val;
                x->take[k] = j;
            }
        }
    }
    free(g);
    return 0;
}

/* Step 4: node v leaves k sequences over, written to out (round robin over
 * the children, so a group's first members come from different children);
 * the group chosen at v is emitted. Returns how many were written (k). */
static int32_t tree_replay(tree *t, int32_t v, int32_t k, int32_t *out)
{
    const tnode *x = &t->v[v];
    if (x->seq >= 0) {
        out[0] = x->seq;
        return 1;
    }
    const int32_t j = x->take[k];
    int32_t nch = 0;
    for (int32_t c = x->child; c >= 0; c = t->v[c].sibling) nch++;
    /* How many each child leaves over: undo the convolution, last child first. */
    int32_t *want = malloc(sizeof(int32_t) * (size_t)(2 * nch + 1));
    int32_t *lists = malloc(sizeof(int32_t) * (size_t)(k + j + 1));
    if (!want || !lists) {
        free(want);
        free(lists);
        return -1;
    }
    int32_t *got = want + nch;
    int32_t rest = k + j;
    for (int32_t i = nch - 1; i >= 0; i--) {
        want[i] = x->split[i][rest];
        rest -= want[i];
    }
    int32_t at = 0, i = 0;
    for (int32_t c = x->child; c >= 0; c = t->v[c].sibling, i++) {
        got[i] = at;
        /* an inner child is replayed even when it leaves nothing over: its
         * own groups are emitted there */
        if ((want[i] > 0 || t->v[c].seq < 0) && tree_replay(t, c, want[i], lists + at) < 0) {
            free(want);
            free(lists);
            return -1;
        }
        at += want[i];
    }
    /* Round robin over the children's lists: the first j form the group. */
    int32_t w = 0, *pos = malloc(sizeof(int32_t) * (size_t)(nch + 1));
    if (!pos) {
        free(want);
        free(lists);
        return -1;
    }
    for (int32_t c = 0; c < nch; c++) pos[c] = 0;
    int32_t *order = t->buf;
    while (w < k + j)
        for (int32_t c = 0; c < nch; c++)
            if (pos[c] < want[c]) order[w++] = lists[got[c] + pos[c]++];
    if (j > 0) {
        attn_cascade_plan *pl = t->plan;
        pl->group_starts[t->groups] = t->members;
        pl->shared_pages[t->groups] = x->depth;
        for (int32_t q = 0; q < j; q++) {
            pl->members[t->members++] = order[q];
            pl->seq_shared[order[q]] = x->depth;
        }
        t->groups++;
        pl->group_starts[t->groups] = t->members;
    }
    memcpy(out, order + j, sizeof(int32_t) * (size_t)k);
    free(pos);
    free(want);
    free(lists);
    return k;
}

/* Steps 2-4 over the n sorted candidates; groups written to plan. */
static int plan_groups(const char *fn, attn_cascade_plan *plan, const int32_t *sorted,
                       const int32_t *lcp, const int32_t *full, int32_t n, int32_t min_shared,
                       int32_t *num_groups)
{
    tree t = {.min_shared = min_shared, .plan = plan};
    int32_t *stack = malloc(sizeof(int32_t) * (size_t)(2 * n + 2));
    t.v = malloc(sizeof(tnode) * (size_t)(3 * n + 2));
    t.buf = malloc(sizeof(int32_t) * (size_t)(n + 1));
    int32_t *left = malloc(sizeof(int32_t) * (size_t)(n + 1));
    int rc = ATTN_OK;
    if (!stack || !t.v || !t.buf || !left) {
        rc = ATTN_FAIL(ATTN_ENOMEM, fn, "tree of %d sequences", (int)n);
        goto out;
    }
    /* 2) The tree: a stack of inner nodes of increasing depth. */
    int32_t top = 0;
    stack[0] = tree_add(&t, 0, -1);
    for (int32_t k = 0; k < n; k++) {
        if (k > 0) {
            const int32_t l = lcp[k];
            while (t.v[stack[top]].depth > l) {
                const int32_t u = stack[top--];
                if (t.v[stack[top]].depth >= l) {
                    tree_link(&t, stack[top], u);
                } else {
                    const int32_t w = tree_add(&t, l, -1);
                    tree_link(&t, w, u);
                    stack[++top] = w;
                }
            }
        }
        const int32_t d = full[sorted[k]];
        if (t.v[stack[top]].depth < d) {
            const int32_t w = tree_add(&t, d, -1);
            stack[++top] = w;
        }
        tree_link(&t, stack[top], tree_add(&t, d, sorted[k]));
    }
    while (top > 0) {
        const int32_t u = stack[top--];
        tree_link(&t, stack[top], u);
    }
    /* 3) Tables, then 4) the best leftover count at the root, replayed. */
    if (tree_solve(&t, 0)) {
        rc = ATTN_FAIL(ATTN_ENOMEM, fn, "tables of %d sequences", (int)n);
        goto out;
    }
    int32_t kbest = 0;
    for (int32_t k = 0; k <= t.v[0].n; k++)
        if (t.v[0].f[k] > t.v[0].f[kbest]) kbest = k;
    plan->pages_saved = t.v[0].f[kbest];
    plan->group_starts[0] = 0;
    if (tree_replay(&t, 0, kbest, left) < 0) {
        rc = ATTN_FAIL(ATTN_ENOMEM, fn, "replay of %d sequences", (int)n);
        goto out;
    }
    for (int32_t g = 0; g < t.groups; g++)
        qsort(plan->members + plan->group_starts[g],
              (size_t)(plan->group_starts[g + 1] - plan->group_starts[g]), sizeof(int32_t),
              cmp_int);
    *num_groups = t.groups;
out:
    if (t.v)
        for (int32_t i = 0; i < t.count; i++) {
            free(t.v[i].f);
            free(t.v[i].take);
            if (t.v[i].split) {
                int32_t nch = 0;
                for (int32_t c = t.v[i].child; c >= 0; c = t.v[c].sibling) nch++;
                for (int32_t c = 0; c < nch; c++) free(t.v[i].split[c]);
                free(t.v[i].split);
            }
        }
    free(t.v);
    free(t.buf);
    free(stack);
    free(left);
    return rc;
}

int attn_cascade_plan_build(int32_t num_seqs, const int32_t *ctx_lens, const int32_t *page_table,
                            int32_t max_pages, int32_t page_size, int32_t min_shared,
                            attn_cascade_plan *plan)
{
    static const char fn[] = "attn_cascade_plan_build";
    if (!plan) return ATTN_FAIL(ATTN_EARG, fn, "plan is NULL");
    memset(plan, 0, sizeof *plan);
    if (num_seqs < 0 || max_pages < 0 || page_size < 1)
        return ATTN_FAIL(ATTN_EARG, fn, "num_seqs = %d, max_pages = %d, page_size = %d",
                         (int)num_seqs, (int)max_pages, (int)page_size);
    if (num_seqs > 0 && !ctx_lens) return ATTN_FAIL(ATTN_EARG, fn, "ctx_lens is NULL");
    if (num_seqs > 0 && max_pages > 0 && !page_table)
        return ATTN_FAIL(ATTN_EARG, fn, "page_table is NULL");
    if (min_shared < 1) min_shared = 1;
    const size_t B = (size_t)num_seqs;
    int32_t *full = malloc(sizeof(int32_t) * (B + 1)), *sorted = malloc(sizeof(int32_t) * (B + 1));
    int32_t *lcp = malloc(sizeof(int32_t) * (B + 1));
    plan->group_starts = malloc(sizeof(int32_t) * (B / 2 + 2));
    plan->members = malloc(sizeof(int32_t) * (B + 1));
    plan->shared_pages = malloc(sizeof(int32_t) * (B / 2 + 1));
    plan->seq_shared = calloc(B + 1, sizeof(int32_t));
    int rc = ATTN_OK;
    if (!full || !sorted || !lcp || !plan->group_starts || !plan->members ||
        !plan->shared_pages || !plan->seq_shared) {
        rc = ATTN_FAIL(ATTN_ENOMEM, fn, "plan for %d sequences", (int)num_seqs);
        goto out;
    }
    plan->num_seqs = num_seqs;

    /* 1) Candidates, sorted by page lists. */
    int32_t n = 0;
    for (int32_t i = 0; i < num_seqs; i++) {
        if (ctx_lens[i] < 0) {
            rc = ATTN_FAIL(ATTN_EARG, fn, "ctx_lens[%d] = %d", (int)i, (int)ctx_lens[i]);
            goto out;
        }
        full[i] = ctx_lens[i] / page_size;
        if (((int64_t)ctx_lens[i] + page_size - 1) / page_size > max_pages) {
            rc = ATTN_FAIL(ATTN_EARG, fn, "sequence %d: %d tokens need more than max_pages = %d",
                           (int)i, (int)ctx_lens[i], (int)max_pages);
            goto out;
        }
        if (full[i] >= min_shared) sorted[n++] = i;
    }
    sort_ctx c = {.table = page_table, .full = full, .stride = max_pages};
    g_sort = &c;
    qsort(sorted, (size_t)n, sizeof(int32_t), cmp_pages);
    g_sort = NULL;

    /* 2)-4) The tree of shared prefixes and the exact grouping. */
    for (int32_t k = 1; k < n; k++) lcp[k] = shared_of(&c, sorted[k - 1], sorted[k]);
    int32_t g = 0;
    rc = plan_groups(fn, plan, sorted, lcp, full, n, min_shared, &g);
    if (rc) goto out;
    plan->num_groups = g;
out:
    free(full);
    free(sorted);
    free(lcp);
    if (rc) attn_cascade_plan_free(plan);
    return rc;
}

/* ---- the CPU cascade ------------------------------------------------------ */

/* Level 1 for the rows of every group: gathers the members' query rows
 * (rows_of[i] rows of Hq heads starting at row_start[i]) group by group,
 * attends them to the shared pages and merges the result into out/lse (which
 * hold level 2). */
static int shared_level(const char *fn, const attn_shape *s, const attn_cascade_plan *plan,
                        const int32_t *row_start, const int32_t *rows_of,
                        const int32_t *page_table, int32_t max_pages, int32_t num_pages,
                        const float *q, const float *k_cache, const float *v_cache, float *out,
                        float *lse, int num_threads)
{
    const int64_t G = plan->num_groups, Hq = s->num_q_heads, D = s->head_dim;
    if (G == 0) return ATTN_OK;
    int64_t rows = 0, widest = 0;
    for (int64_t g = 0; g < G; g++) {
        for (int32_t k = plan->group_starts[g]; k < plan->group_starts[g + 1]; k++)
            rows += rows_of[plan->members[k]];
        if (plan->shared_pages[g] > widest) widest = plan->shared_pages[g];
    }
    int32_t *qs, *plen, *pt;
    float *qg, *og, *lg;
    qs = malloc(sizeof(int32_t) * (size_t)(G + 1));
    plen = malloc(sizeof(int32_t) * (size_t)G);
    pt = malloc(sizeof(int32_t) * (size_t)(G * (widest > 0 ? widest : 1)));
    qg = calloc((size_t)(rows * Hq * D + 1), sizeof(float)); /* every row is copied in */
    og = malloc(sizeof(float) * (size_t)(rows * Hq * D + 1));
    lg = malloc(sizeof(float) * (size_t)(rows * Hq + 1));
    int rc = ATTN_OK;
    if (!qs || !plen || !pt || !qg || !og || !lg) {
        rc = ATTN_FAIL(ATTN_ENOMEM, fn, "shared level of %lld rows", (long long)rows);
        goto out;
    }
    int64_t r = 0;
    qs[0] = 0;
    for (int64_t g = 0; g < G; g++) {
        const int32_t first = plan->members[plan->group_starts[g]];
        plen[g] = plan->shared_pages[g] * s->page_size;
        memcpy(pt + g * widest, page_table + (int64_t)first * max_pages,
               sizeof(int32_t) * (size_t)plan->shared_pages[g]);
        for (int32_t k = plan->group_starts[g]; k < plan->group_starts[g + 1]; k++) {
            const int32_t i = plan->members[k];
            memcpy(qg + r * Hq * D, q + (int64_t)row_start[i] * Hq * D,
                   sizeof(float) * (size_t)((int64_t)rows_of[i] * Hq * D));
            r += rows_of[i];
        }
        qs[g + 1] = (int32_t)r;
    }
    attn_batch gb = {.num_seqs = (int32_t)G, .max_pages = (int32_t)widest, .q_starts = qs,
                     .prefix_lens = plen, .page_table = pt, .num_pages = num_pages};
    rc = attn_prefill_shared_cpu(s, &gb, qg, k_cache, v_cache, og, lg, num_threads);
    if (rc) goto out;
    r = 0;
    for (int64_t g = 0; g < G; g++)
        for (int32_t k = plan->group_starts[g]; k < plan->group_starts[g + 1]; k++) {
            const int32_t i = plan->members[k];
            const int64_t n = (int64_t)rows_of[i] * Hq, at = (int64_t)row_start[i] * Hq;
            attn_merge_cpu(n, (int32_t)D, out + at * D, lse + at, og + r * D, lg + r, out + at * D,
                           lse + at);
            r += n;
        }
out:
    free(qs);
    free(plen);
    free(pt);
    free(qg);
    free(og);
    free(lg);
    return rc;
}

/* The page table with each row's shared pages cut off the front. */
static int32_t *own_table(const attn_cascade_plan *plan, int32_t num_seqs,
                          const int32_t *page_table, int32_t max_pages)
{
    int32_t *t = malloc(sizeof(int32_t) * (size_t)((int64_t)num_seqs * max_pages + 1));
    if (!t) return NULL;
    for (int32_t i = 0; i < num_seqs; i++) {
        const int32_t cut = plan->seq_shared[i];
        const int32_t *src = page_table + (int64_t)i * max_pages;
        int32_t *dst = t + (int64_t)i * max_pages;
        memcpy(dst, src + cut, sizeof(int32_t) * (size_t)(max_pages - cut));
        for (int32_t k = max_pages - cut; k < max_pages; k++) dst[k] = -1;
    }
    return t;
}

static int plan_matches(const char *fn, const attn_cascade_plan *plan, int32_t num_seqs,
                        const int32_t *lens, int32_t page_size)
{
    if (!plan) return ATTN_FAIL(ATTN_EARG, fn, "plan is NULL");
    if (plan->num_seqs != num_seqs)
        return ATTN_FAIL(ATTN_EARG, fn, "plan for %d sequences, batch of %d", (int)plan->num_seqs,
                         (int)num_seqs);
    for (int32_t i = 0; i < num_seqs; i++)
        if ((int64_t)plan->seq_shared[i] * page_size > lens[i])
            return ATTN_FAIL(ATTN_EARG, fn, "sequence %d: %d shared pages but %d tokens in pages",
                             (int)i, (int)plan->seq_shared[i], (int)lens[i]);
    return ATTN_OK;
}

int attn_prefill_cascade_cpu(const attn_shape *s, const attn_batch *b,
                             const attn_cascade_plan *plan, const float *q, const float *k_new,
                             const float *v_new, const float *k_cache, const float *v_cache,
                             float *out, float *lse, int num_threads)
{
    static const char fn[] = "attn_prefill_cascade_cpu";
    int64_t T;
    int any_prefix;
    int rc = attn_batch_check_host(fn, s, b, &T, &any_prefix);
    if (rc) return rc;
    if ((rc = plan_matches(fn, plan, b->num_seqs, b->prefix_lens, s->page_size))) return rc;
    const int32_t B = b->num_seqs;
    int32_t *own_len = malloc(sizeof(int32_t) * (size_t)(B + 1));
    int32_t *rows_of = malloc(sizeof(int32_t) * (size_t)(B + 1));
    int32_t *table = b->max_pages > 0 ? own_table(plan, B, b->page_table, b->max_pages) : NULL;
    float *own_lse = lse ? lse : malloc(sizeof(float) * (size_t)(T * s->num_q_heads + 1));
    if (!own_len || !rows_of || (b->max_pages > 0 && !table) || !own_lse) {
        rc = ATTN_FAIL(ATTN_ENOMEM, fn, "own level of %d sequences", (int)B);
        goto out;
    }
    for (int32_t i = 0; i < B; i++) {
        own_len[i] = b->prefix_lens[i] - plan->seq_shared[i] * s->page_size;
        rows_of[i] = b->q_starts[i + 1] - b->q_starts[i];
    }
    attn_batch ob = *b;
    ob.prefix_lens = own_len;
    ob.page_table = table;
    rc = attn_prefill_cpu(s, &ob, q, k_new, v_new, k_cache, v_cache, out, own_lse, num_threads);
    if (!rc)
        rc = shared_level(fn, s, plan, b->q_starts, rows_of, b->page_table, b->max_pages,
                          b->num_pages, q, k_cache, v_cache, out, own_lse, num_threads);
out:
    free(own_len);
    free(rows_of);
    free(table);
    if (own_lse != lse) free(own_lse);
    return rc;
}

int attn_decode_cascade_cpu(const attn_shape *s, int32_t num_seqs, const int32_t *seq_lens,
                            const int32_t *page_table, int32_t max_pages, int32_t num_pages,
                            const attn_cascade_plan *plan, const float *q, const float *k_cache,
                            const float *v_cache, float *out, float *lse, int num_threads)
{
    static const char fn[] = "attn_decode_cascade_cpu";
    int32_t longest;
    int rc = attn_decode_check_host(fn, s, num_seqs, seq_lens, page_table, max_pages, num_pages,
                                    &longest);
    if (rc) return rc;
    if ((rc = plan_matches(fn, plan, num_seqs, seq_lens, s->page_size))) return rc;
    const int32_t B = num_seqs;
    int32_t *own_len = malloc(sizeof(int32_t) * (size_t)(B + 1));
    int32_t *row_start = malloc(sizeof(int32_t) * (size_t)(B + 1));
    int32_t *rows_of = malloc(sizeof(int32_t) * (size_t)(B + 1));
    int32_t *table = max_pages > 0 ? own_table(plan, B, page_table, max_pages) : NULL;
    float *own_lse = lse ? lse : malloc(sizeof(float) * (size_t)((int64_t)B * s->num_q_heads + 1));
    if (!own_len || !row_start || !rows_of || (max_pages > 0 && !table) || !own_lse) {
        rc = ATTN_FAIL(ATTN_ENOMEM, fn, "own level of %d sequences", (int)B);
        goto out;
    }
    for (int32_t i = 0; i < B; i++) {
        own_len[i] = seq_lens[i] - plan->seq_shared[i] * s->page_size;
        row_start[i] = i;
        rows_of[i] = 1;
    }
    rc = attn_decode_cpu(s, B, own_len, table, max_pages, num_pages, q, k_cache, v_cache, out,
                         own_lse, 0, num_threads);
    if (!rc)
        rc = shared_level(fn, s, plan, row_start, rows_of, page_table, max_pages, num_pages, q,
                          k_cache, v_cache, out, own_lse, num_threads);
out:
    free(own_len);
    free(row_start);
    free(rows_of);
    free(table);
    if (own_lse != lse) free(own_lse);
    return rc;
}
