/* cache_sim.c - see cache_sim.h. */
#include "cache_sim.h"

#include <errno.h>
#include <inttypes.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "backend_sim.h"
#include "cache_client.h"
#include "rkv_core.h"
#include "cache_tier.h"
#include "interrupt.h"
#include "progress.h"
#include "tier_opts.h"

extern char **environ;

const char *const cache_sim_step_names[] = {"sglang", "vllm", NULL};

/* One request of the current step. */
typedef struct sim_req {
    trace_request q;
    cache_seq m;
    int32_t *pages;     /* (ceil(n / P)) matched pages, then the request's own */
    int32_t pages_cap;
    int32_t matched;
    int32_t need;       /* pages to allocate: ceil((n - matched) / P) */
    int32_t tier_hits;  /* tokens of the match loaded from a spill tier */
    bool locked;
    bool served;        /* matched, allocated and inserted */
    const char *error;  /* static message, NULL when served */
} sim_req;

/* The edge tokens of the nodes in a log (the step's evictions, the tree's
 * picture), one node's after another. */
typedef struct tok_log {
    int32_t *t;
    int64_t n, cap;
} tok_log;

/* One evicted node: its own edge tokens live in ev_toks.t[off .. off + len). */
typedef struct sim_evicted {
    uint64_t id, parent_id;
    int64_t off;
    int32_t len;
} sim_evicted;

typedef struct sim_node {
    uint64_t id, parent_id, time, created;
    int32_t len, lock;
    int32_t slot, parent_slot;
    int64_t off;        /* into node_toks.t */
    int64_t depth;      /* tokens above this node's edge */
    bool matched;       /* on the matched prefix of a request of the step */
} sim_node;

typedef struct sim {
    cache *c;
    page_pool *pool;
    bool node_log;      /* the kind reports evicted nodes (cache_set_evict_hook) */
    bool node_view;     /* the kind shows its nodes and clock: our own pictures */
    const cache_sim_options *opt;
    FILE *out;
    int32_t P;

    sim_req *reqs;      /* the current step; reqs[n_reqs] holds the read-ahead */
    int32_t n_reqs, reqs_cap;

    sim_evicted *ev;    /* evictions of the current step, in order */
    int32_t n_ev, ev_cap;
    tok_log ev_toks;
    bool ev_oom;

    sim_node *nodes;    /* picture of the tree (dumps only) */
    int32_t n_nodes, nodes_cap;
    tok_log node_toks;
    bool nodes_oom;

    /* Kinds without an eviction log (hash, trie, none): the tokens of every
     * page the cache adopted, (num_pages * P), so that an eviction can be
     * listed from the pages it returned to the pool. NULL for kinds with a
     * node log (cache_set_evict_hook). */
    int32_t *page_toks;

    /* --step-semantics vllm: held[pg] == held_gen marks a page that a request
     * of the current step holds (locked, so not evictable), for the fit check
     * made before anything is locked or evicted (step_vllm). NULL otherwise. */
    uint64_t *held;
    uint64_t held_gen;

    bool have_dot;      /* graphviz found: SVGs too */
    uint64_t clock0;    /* tree clock before the step */
    cache_sim_summary *sum;
} sim;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* One node into a log: room for one more record in rec (n records of size
 * bytes each) and the node's edge tokens appended to toks, at *off. The
 * caller writes the record. false when out of memory. */
static bool log_node(void **rec, int32_t *cap, int32_t n, size_t size, tok_log *toks,
                     const cache_node_info *node, int64_t *off)
{
    if (rkv_grow32(rec, cap, (int64_t)n + 1, size)) return false;
    if (rkv_grow((void **)&toks->t, &toks->cap, toks->n + node->len, sizeof *toks->t)) return false;
    if (node->len) memcpy(toks->t + toks->n, node->tokens, sizeof *toks->t * (size_t)node->len);
    *off = toks->n;
    toks->n += node->len;
    return true;
}

static void on_evict(void *ctx, const cache_node_info *node)
{
    sim *s = ctx;
    int64_t off;
    if (!log_node((void **)&s->ev, &s->ev_cap, s->n_ev, sizeof *s->ev, &s->ev_toks, node, &off)) {
        s->ev_oom = true;
        return;
    }
    s->ev[s->n_ev++] = (sim_evicted){node->id, node->parent_id, off, node->len};
}

static void on_visit(void *ctx, const cache_node_info *node)
{
    sim *s = ctx;
    int64_t off;
    if (!log_node((void **)&s->nodes, &s->nodes_cap, s->n_nodes, sizeof *s->nodes, &s->node_toks,
                  node, &off)) {
        s->nodes_oom = true;
        return;
    }
    s->nodes[s->n_nodes++] = (sim_node){node->id, node->parent_id, node->time, node->created,
                                        node->len, node->lock, node->slot, node->parent_slot,
                                        off, 0, false};
}

/* ---------------------------------------------------------------- dumps */

static bool find_in_path(const char *prog)
{
    const char *path = getenv("PATH");
    if (!path) return false;
    char buf[4096];
    while (*path) {
        const char *colon = strchr(path, ':');
        size_t n = colon ? (size_t)(colon - path) : strlen(path);
        if (n > 0 && n + strlen(prog) + 2 < sizeof buf) {
            memcpy(buf, path, n);
            buf[n] = '/';
            strcpy(buf + n + 1, prog);
            if (access(buf, X_OK) == 0) return true;
        }
        if (!colon) break;
        path = colon + 1;
    }
    return false;
}

/* Colours as in SGLang's figure, decided by tokens rather than by node
 * times: blue for the nodes on some request's matched prefix (a prefix split
 * off this step included: its tokens were reused), green for nodes created
 * this step off the matched paths, white for the rest (the suffix half of a
 * split too, although the split touched its time). */
static const char *node_state(const sim *s, const sim_node *n, uint64_t c1)
{
    if (n->id == 0) return "root";
    if (n->matched) return "matched";
    if (n->created > s->clock0 && n->created <= c1) return "created";
    return "cached";
}

/* Marks the nodes on the matched prefixes of the step's served requests.
 * visit lists parents before children, so one pass per request suffices. */
static rkv_status mark_matched(sim *s)
{
    int32_t slots = 0;
    for (int32_t i = 0; i < s->n_nodes; i++)
        if (s->nodes[i].slot >= slots) slots = s->nodes[i].slot + 1;
    int32_t *idx = malloc(sizeof(int32_t) * (size_t)(slots > 0 ? slots : 1));
    uint8_t *on = malloc((size_t)(slots > 0 ? slots : 1));
    if (!idx || !on) { free(idx); free(on); return RKV_ENOMEM; }
    for (int32_t i = 0; i < s->n_nodes; i++) {
        sim_node *n = &s->nodes[i];
        idx[n->slot] = i;
        n->depth = n->parent_slot < 0 ? 0 : s->nodes[idx[n->parent_slot]].depth
                                            + s->nodes[idx[n->parent_slot]].len;
    }
    for (int32_t r = 0; r < s->n_reqs; r++) {
        const sim_req *q = &s->reqs[r];
        if (!q->served || q->matched == 0) continue;
        for (int32_t i = 0; i < s->n_nodes; i++) {
            sim_node *n = &s->nodes[i];
            if (n->parent_slot < 0) { on[n->slot] = 1; continue; }
            int64_t end = n->depth + n->len;
            on[n->slot] = on[n->parent_slot] && n->len > 0 && end <= q->matched
                && memcmp(s->node_toks.t + n->off, q->q.tokens + n->depth,
                          sizeof(int32_t) * (size_t)n->len) == 0;
            if (on[n->slot]) n->matched = true;
        }
    }
    free(idx);
    free(on);
    return RKV_OK;
}

/* [t0,t1,...] as JSON. Evicted edges of a long trace add up to hundreds of
 * MB of digits, so the digits are formatted by hand into a buffer (fprintf
 * per token took 90% of a Mooncake replay). Token ids are never negative. */
static void json_tokens(FILE *f, const int32_t *t, int64_t n)
{
    char buf[4096];
    size_t k = 0;
    buf[k++] = '[';
    for (int64_t i = 0; i < n; i++) {
        if (k > sizeof buf - 16) {
            fwrite(buf, 1, k, f);
            k = 0;
        }
        if (i) buf[k++] = ',';
        char d[12];
        int nd = 0;
        uint32_t v = (uint32_t)t[i];
        do {
            d[nd++] = (char)('0' + v % 10);
            v /= 10;
        } while (v);
        while (nd) buf[k++] = d[--nd];
    }
    buf[k++] = ']';
    fwrite(buf, 1, k, f);
}

static void dot_label(FILE *f, const int32_t *t, int32_t n)
{
    enum { SHOW = 6 };
    for (int32_t i = 0; i < n && i < SHOW; i++) fprintf(f, i ? " %d" : "%d", t[i]);
    if (n > SHOW) fputs(" ...", f);
    fprintf(f, "\\n(%d)", n);
}

static const char *state_fill(const char *st)
{
    if (!strcmp(st, "created")) return "#9be39b";
    if (!strcmp(st, "matched")) return "#9cc3f0";
    if (!strcmp(st, "evicted")) return "#f4a0a0";
    return "#ffffff";
}

/* Our own picture of the step as JSON: the requests' matches (step >= 0),
 * the nodes as the clock c1 sees them, and those evicted. */
static void write_node_json(const sim *s, FILE *f, int64_t step, uint64_t c1)
{
    fprintf(f, "{\"step\":%" PRId64 ",\"kind\":\"%s\",\"page_size\":%d,"
            "\"clock\":[%" PRIu64 ",%" PRIu64 "],\"requests\":[",
            step, s->opt->kind ? s->opt->kind : "radix", s->P, s->clock0, c1);
    int first = 1;
    for (int32_t i = 0; i < s->n_reqs && step >= 0; i++) {
        sim_req *r = &s->reqs[i];
        fprintf(f, "%s{\"id\":%s,", first ? "" : ",", r->q.id_json);
        if (r->served) fprintf(f, "\"matched\":%d,\"new\":%d}", r->matched, r->q.n_tokens - r->matched);
        else fprintf(f, "\"error\":\"%s\"}", r->error);
        first = 0;
    }
    fputs("],\"nodes\":[", f);
    for (int32_t i = 0; i < s->n_nodes; i++) {
        sim_node *n = &s->nodes[i];
        fprintf(f, "%s{\"id\":%" PRIu64 ",\"parent\":%" PRIu64 ",\"state\":\"%s\",\"length\":%d,"
                "\"lock\":%d,\"time\":%" PRIu64 ",\"created\":%" PRIu64 ",\"tokens\":",
                i ? "," : "", n->id, n->parent_id, node_state(s, n, c1), n->len, n->lock,
                n->time, n->created);
        json_tokens(f, s->node_toks.t + n->off, n->len);
        fputc('}', f);
    }
    fputs("],\"evicted\":[", f);
    for (int32_t i = 0; i < s->n_ev; i++) {
        sim_evicted *e = &s->ev[i];
        fprintf(f, "%s{\"id\":%" PRIu64 ",\"parent\":%" PRIu64 ",\"state\":\"evicted\","
                "\"length\":%d,\"tokens\":", i ? "," : "", e->id, e->parent_id, e->len);
        json_tokens(f, s->ev_toks.t + e->off, e->len);
        fputc('}', f);
    }
    fputs("]}\n", f);
}

/* The same picture as a Graphviz digraph (evicted nodes dashed). */
static void write_node_dot(const sim *s, FILE *f, const char *name, int64_t step, uint64_t c1)
{
    fprintf(f, "digraph step_%" PRId64 " {\n  node [shape=box, style=\"rounded,filled\", "
            "fontname=\"Helvetica\", fontsize=10];\n  label=\"%s\";\n", step < 0 ? 0 : step, name);
    for (int32_t i = 0; i < s->n_nodes; i++) {
        sim_node *n = &s->nodes[i];
        const char *state = node_state(s, n, c1);
        fprintf(f, "  n%" PRIu64 " [fillcolor=\"%s\", label=\"", n->id, state_fill(state));
        if (n->id == 0) fputs("root", f);
        else dot_label(f, s->node_toks.t + n->off, n->len);
        fputs("\"];\n", f);
        if (n->id != 0) fprintf(f, "  n%" PRIu64 " -> n%" PRIu64 ";\n", n->parent_id, n->id);
    }
    for (int32_t i = 0; i < s->n_ev; i++) {
        sim_evicted *e = &s->ev[i];
        fprintf(f, "  n%" PRIu64 " [fillcolor=\"%s\", style=\"rounded,filled,dashed\", label=\"",
                e->id, state_fill("evicted"));
        dot_label(f, s->ev_toks.t + e->off, e->len);
        fprintf(f, "\"];\n  n%" PRIu64 " -> n%" PRIu64 " [style=dashed];\n", e->parent_id, e->id);
    }
    fputs("}\n", f);
}

static rkv_status write_dumps(sim *s, const char *name, int64_t step, char *err, size_t errlen)
{
    const char *dir = s->opt->dump_dir;
    size_t plen = strlen(dir) + strlen(name) + 16;
    char *path = malloc(plen);
    if (!path) return RKV_ENOMEM;
    rkv_status st = RKV_OK;
    uint64_t c1 = 0;
    if (s->node_view) {
        s->n_nodes = 0;
        s->node_toks.n = 0;
        cache_visit(s->c, on_visit, s);
        if (s->nodes_oom || (step >= 0 && mark_matched(s) != RKV_OK)) {
            free(path);
            return RKV_ENOMEM;
        }
        cache_clock(s->c, &c1);
    }

    /* JSON: our own picture of the step where the kind shows its nodes; the
     * kind's dump otherwise. */
    snprintf(path, plen, "%s/%s.json", dir, name);
    FILE *f = fopen(path, "w");
    if (!f) goto io_fail;
    if (s->node_view) {
        write_node_json(s, f, step, c1);
    } else {
        cache_dump(s->c, f, CACHE_DUMP_JSON);
    }
    if (fclose(f) != 0) goto io_fail;

    snprintf(path, plen, "%s/%s.dot", dir, name);
    f = fopen(path, "w");
    if (!f) goto io_fail;
    if (s->node_view) {
        write_node_dot(s, f, name, step, c1);
    } else {
        cache_dump(s->c, f, CACHE_DUMP_DOT);
    }
    if (fclose(f) != 0) goto io_fail;

    if (s->have_dot) {
        size_t slen = plen + 8;
        char *svg = malloc(slen);
        if (!svg) { free(path); return RKV_ENOMEM; }
        snprintf(svg, slen, "%s/%s.svg", dir, name);
        char *argv[] = {"dot", "-Tsvg", path, "-o", svg, NULL};
        pid_t pid;
        int wst = 0;
        if (posix_spawnp(&pid, "dot", NULL, NULL, argv, environ) == 0) waitpid(pid, &wst, 0);
        else wst = 1;
        if (!WIFEXITED(wst) || WEXITSTATUS(wst) != 0) {
            /* A broken graphviz costs the SVGs, not the replay. */
            fprintf(stderr, "radixkv cache-sim: warning: dot failed on %s; no more SVGs\n", path);
            s->have_dot = false;
        }
        free(svg);
    }
    free(path);
    return st;

io_fail:
    rkv_set_err(err, errlen, "%s: cannot write: %s", path, strerror(errno));
    free(path);
    return RKV_EIO;
}

/* ---------------------------------------------------------------- steps */

static rkv_status req_reserve_pages(sim_req *r, int32_t n)
{
    return rkv_grow32((void **)&r->pages, &r->pages_cap, n, sizeof(int32_t));
}

static void print_request(sim *s, const sim_req *r)
{
    if (r->served)
        fprintf(s->out, "{\"type\":\"request\",\"id\":%s,\"step\":%" PRId64 ",\"matched\":%d,\"new\":%d}\n",
                r->q.id_json, r->q.step, r->matched, r->q.n_tokens - r->matched);
    else
        fprintf(s->out, "{\"type\":\"request\",\"id\":%s,\"step\":%" PRId64 ",\"error\":\"%s\"}\n",
                r->q.id_json, r->q.step, r->error);
}

static rkv_status check_step(sim *s, int64_t step, char *err, size_t errlen)
{
    page_pool *p = s->pool;
    cache_sizes sz;
    cache_get_sizes(s->c, &sz);
    /* Between steps nothing is in flight and nothing is locked. */
    int64_t cached_pages = (sz.evictable_tokens + sz.protected_tokens) / s->P;
    if (p->num_inflight != 0 || p->num_free + cached_pages != p->num_pages
        || sz.protected_tokens != sz.pinned_tokens) {
        rkv_set_err(err, errlen, "after step %" PRId64 ": free %d + evictable %" PRId64
                " + protected %" PRId64 " + in-flight %d pages != pool %d (pinned %" PRId64 " tokens)",
                step, p->num_free, sz.evictable_tokens / s->P, sz.protected_tokens / s->P,
                p->num_inflight, p->num_pages, sz.pinned_tokens);
        return RKV_ECORRUPT;
    }
    if (s->opt->check) {
        /* A check may fail without writing a message: never print stale bytes. */
        char msg[512] = "";
        rkv_status cst = cache_check(s->c, msg, sizeof msg);
        const char *who = "cache check";
        if (cst == RKV_OK) {
            cst = page_pool_check(p, msg, sizeof msg);
            who = "page pool check";
        }
        if (cst != RKV_OK) {
            rkv_set_err(err, errlen, "after step %" PRId64 ": %s failed: %s", step, who,
                        msg[0] ? msg : rkv_status_str(cst));
            return RKV_ECORRUPT;
        }
    }
    return RKV_OK;
}

/* The sim backend's roofline for one request's prefill: pre cached tokens,
 * s new ones, the last sampled. */
static double prefill_seconds(const sim *s, int32_t pre, int32_t n)
{
    if (n < 1) n = 1;
    int32_t q_starts[2] = {0, n}, prefix = pre, sample = n - 1;
    fwd_batch b = {.num_seqs = 1, .num_tokens = n, .q_starts = q_starts, .prefix_lens = &prefix,
                   .sample_rows = &sample};
    return sim_step_seconds(s->opt->model, s->opt->gpu, &b);
}

/* Tokens the cache's host and disk tiers have supplied so far (0 without). */
static uint64_t tier_hit_tokens(const sim *s)
{
    const tier_stats *ts = cache_tier_get_stats(s->c);
    return ts ? ts->host_hit_tokens + ts->disk_hit_tokens : 0;
}

/* Request r at the start of its step, under either step semantics: nothing
 * served, locked or matched yet, *total its pages. false, with r->error, when
 * it needs more pages than the whole cache holds. */
static bool req_start(const sim *s, sim_req *r, int32_t *total)
{
    *total = (int32_t)(((int64_t)r->q.n_tokens + s->P - 1) / s->P);
    r->served = r->locked = false;
    r->error = NULL;
    r->matched = r->need = 0;
    if (*total <= s->pool->num_pages) return true;
    r->error = "request needs more pages than the whole cache holds";
    return false;
}

/* 1: match all but the last token and lock, in trace order; *need = the
 * pages the step's requests ask for. */
static rkv_status step_match(sim *s, int64_t step, int64_t *need, char *err, size_t errlen)
{
    rkv_status st;
    *need = 0;
    for (int32_t i = 0; i < s->n_reqs; i++) {
        sim_req *r = &s->reqs[i];
        int32_t n = r->q.n_tokens, total;
        if (!req_start(s, r, &total)) continue;
        if ((st = req_reserve_pages(r, total)) != RKV_OK) return st;
        uint64_t th0 = tier_hit_tokens(s);
        r->m.ns = r->q.ns;
        r->m.priority = r->q.priority;
        if ((st = cache_client_match(s->c, &r->m, r->q.tokens, n - 1)) != RKV_OK) {
            rkv_set_err(err, errlen, "step %" PRId64 ": match/lock failed: %s", step,
                        rkv_status_str(st));
            return st;
        }
        r->locked = true;
        r->matched = r->m.len;
        r->tier_hits = (int32_t)(tier_hit_tokens(s) - th0);
        r->need = total - r->m.num_pages;
        *need += r->need;
    }
    return RKV_OK;
}

/* 2: one eviction for the whole step's shortfall (need - free pages > 0);
 * under vllm step semantics, one per request that is short. */
static rkv_status step_evict(sim *s, int64_t need)
{
    page_pool *pool = s->pool;
    const int32_t P = s->P;
    int32_t free0 = pool->num_free;
    uint64_t mark = page_pool_free_mark(pool);
    int64_t freed = 0;
    /* Still short (locked entries): step 3 sorts out who gets pages. */
    (void)cache_client_make_room(s->c, need, &freed);
    /* Without an eviction log, the pages the pool logged as freed since the
     * mark are the evicted blocks, in the order the kind freed them. */
    const page_run *gone = NULL;
    int32_t ngone = 0;
    page_pool_freed_since(pool, mark, &gone, &ngone); /* eviction only frees */
    for (int32_t k = 0; s->page_toks && k < ngone; k++)
        for (int32_t pg = gone[k].first, end = pg + gone[k].count; pg < end; pg++)
            on_evict(s, &(cache_node_info){.id = (uint64_t)pg, .len = P,
                                           .tokens = s->page_toks + (int64_t)pg * P});
    if (s->ev_oom) return RKV_ENOMEM;
    s->sum->evicted_tokens += freed;
    s->sum->evict_calls++;
    /* Nodes from the kind's log; blocks (pages) for the other kinds. */
    s->sum->evicted_nodes += s->node_log ? s->n_ev : pool->num_free - free0;
    return RKV_OK;
}

/* 3: pages in trace order while they fit; the rest give up their locks.
 * Room was made once for the whole step: no second eviction here. */
static rkv_status step_allocate(sim *s)
{
    bool fits = true;
    for (int32_t i = 0; i < s->n_reqs; i++) {
        sim_req *r = &s->reqs[i];
        if (!r->locked) continue;
        if (fits && page_pool_alloc(s->pool, r->need, r->pages + r->m.num_pages) == RKV_OK)
            continue;
        fits = false;
        r->error = "locked pages leave no room for this request in its step";
        rkv_status st = cache_client_release(s->c, &r->m, NULL, 0);
        if (st != RKV_OK) return st;
        r->locked = false;
    }
    return RKV_OK;
}

/* Insert request r's pages 0..upto-1 (the matched ones, then its own) into
 * the cache, remember the tokens of each own page the cache now holds (the
 * eviction callback names them), and mark r served. *prefix (may be NULL):
 * the tokens insert found cached already. */
static rkv_status commit_request(sim *s, sim_req *r, int32_t upto, int32_t *prefix, int64_t step,
                                 char *err, size_t errlen)
{
    const int32_t P = s->P;
    int32_t mp = r->m.num_pages;
    if (mp) memcpy(r->pages, r->m.pages, sizeof(int32_t) * (size_t)mp);
    rkv_status st = cache_client_commit(s->c, &r->m, r->q.tokens, r->q.n_tokens, r->pages, mp,
                                        upto, prefix);
    if (st != RKV_OK) {
        rkv_set_err(err, errlen, "step %" PRId64 ": insert of request %s failed: %s", step,
                    r->q.id_json, rkv_status_str(st));
        return st;
    }
    for (int32_t k = mp; s->page_toks && k < upto; k++) {
        int32_t pg = r->pages[k];
        if (page_pool_state(s->pool, pg) == PAGE_CACHED)
            memcpy(s->page_toks + (int64_t)pg * P, r->q.tokens + (int64_t)k * P,
                   sizeof(int32_t) * (size_t)P);
    }
    r->served = true;
    return RKV_OK;
}

/* 4: insert in trace order (the cache frees what it did not adopt: pages an
 * earlier request of this step cached first, the partial last page, all for
 * kind none); 5: unlock. */
static rkv_status step_commit(sim *s, int64_t step, char *err, size_t errlen)
{
    rkv_status st;
    for (int32_t i = 0; i < s->n_reqs; i++) {
        sim_req *r = &s->reqs[i];
        if (!r->locked) continue;
        if ((st = commit_request(s, r, r->m.num_pages + r->need, NULL, step, err, errlen)) != RKV_OK)
            return st;
    }
    for (int32_t i = 0; i < s->n_reqs; i++) {
        sim_req *r = &s->reqs[i];
        if (!r->locked) continue;
        if ((st = cache_client_release(s->c, &r->m, NULL, 0)) != RKV_OK) {
            rkv_set_err(err, errlen, "step %" PRId64 ": unlock failed: %s", step, rkv_status_str(st));
            return st;
        }
        r->locked = false;
    }
    return RKV_OK;
}

/* Pages of m are held by a request of the current step (step_vllm). */
static void mark_held(sim *s, const cache_seq *m)
{
    for (int32_t k = 0; k < m->num_pages; k++) s->held[m->pages[k]] = s->held_gen;
}

/* vLLM's allocate_slots question, asked of r's unlocked match before any
 * eviction or lock: do the pages it needs fit in free + evictable pages, where
 * its own hits that are evictable now count against that room (locking them
 * takes them out of it, as vLLM counts hit blocks with ref_cnt 0 among the
 * blocks to allocate)? Locked pages are the ones earlier requests of this
 * step hold (marked). Pages pinned for the whole replay (--pin) are not known
 * here: a pinned hit is taken off the room as if it were evictable, so a
 * request whose match holds pinned pages may be refused up to that many pages
 * early. */
static bool vllm_fits(sim *s, const sim_req *r)
{
    if (r->need <= s->pool->num_free) return true;
    cache_sizes sz;
    cache_get_sizes(s->c, &sz);
    int64_t room = s->pool->num_free + sz.evictable_tokens / s->P;
    for (int32_t k = 0; k < r->m.num_pages; k++)
        if (s->held[r->m.pages[k]] != s->held_gen) room--;
    return r->need <= room;
}

/* The whole step under --step-semantics vllm (cache_sim.h): each request in
 * trace order is matched, given its pages (evicting its own shortfall) and
 * inserted before the next one is matched, so later requests of the step hit
 * the full blocks of earlier ones, as vLLM's scheduler caches full blocks at
 * allocation. A request holds its blocks until the step ends: its whole chain
 * is locked after the insert and its partial last page stays allocated; then
 * every request is released in trace order, its blocks tail first (vLLM's
 * free()). *evicts: the step evicted. */
/* vLLM: hold request r's whole chain of nfull full pages (mp of them
 * matched, prefix tokens adopted by its insert): its own pages when the kind
 * locks pages and insert adopted them all, else the chain a match of the full
 * pages finds (dedup freed copies; the tree kinds, where this match enters
 * the new nodes once more: their clock and hits move). */
static rkv_status vllm_hold_chain(sim *s, sim_req *r, int32_t nfull, int32_t mp, int32_t prefix,
                                  int64_t step, char *err, size_t errlen)
{
    const int32_t P = s->P;
    rkv_status st;
    cache_seq held;
    cache_seq_init(&held, r->q.ns, r->q.priority);
    if (cache_can(s->c, CACHE_CAP_LOCK_PAGES) && prefix == mp * P) {
        if ((st = cache_seq_reserve(&held, nfull)) == RKV_OK) {
            memcpy(held.pages, r->pages, sizeof(int32_t) * (size_t)nfull);
            held.num_pages = nfull;
            held.len = nfull * P;
            st = cache_lock(s->c, &held);
        }
    } else {
        st = cache_client_match(s->c, &held, r->q.tokens, nfull * P);
    }
    if (st == RKV_OK) st = cache_unlock(s->c, &r->m);
    if (st != RKV_OK) {
        cache_seq_free(&held);
        rkv_set_err(err, errlen, "step %" PRId64 ": holding request %s failed: %s", step,
                    r->q.id_json, rkv_status_str(st));
        return st;
    }
    cache_seq_free(&r->m);
    r->m = held;
    return RKV_OK;
}

static rkv_status step_vllm(sim *s, int64_t step, bool *evicts, char *err, size_t errlen)
{
    const int32_t P = s->P;
    rkv_status st;
    bool fits = true;
    *evicts = false;
    s->held_gen++; /* no page is held by this step yet */
    for (int32_t i = 0; i < s->n_reqs; i++) {
        sim_req *r = &s->reqs[i];
        int32_t n = r->q.n_tokens, nfull = n / P, total;
        if (!req_start(s, r, &total)) continue;
        /* vLLM stops scheduling at the first request that does not fit:
         * the rest of the step is not even matched. */
        if (!fits) {
            r->error = "locked pages leave no room for this request in its step";
            continue;
        }
        if ((st = req_reserve_pages(r, total)) != RKV_OK) return st;
        uint64_t th0 = tier_hit_tokens(s);
        /* Match without locking: the lock is vLLM's touch, made only once
         * the request is known to fit. */
        r->m.ns = r->q.ns;
        r->m.priority = r->q.priority;
        if ((st = cache_match_prefix(s->c, &r->m, r->q.tokens, n - 1)) != RKV_OK) {
            rkv_set_err(err, errlen, "step %" PRId64 ": match failed: %s", step, rkv_status_str(st));
            return st;
        }
        int32_t mp = r->m.num_pages;
        r->need = total - mp;
        if (!vllm_fits(s, r)) {
            /* Refused before any eviction or touch (vLLM's allocate_slots
             * returns None): the cache is left as the match found it. */
            fits = false;
            r->error = "locked pages leave no room for this request in its step";
            continue;
        }
        if ((st = cache_lock(s->c, &r->m)) != RKV_OK) {
            rkv_set_err(err, errlen, "step %" PRId64 ": lock failed: %s", step, rkv_status_str(st));
            return st;
        }
        r->locked = true;
        r->matched = r->m.len;
        r->tier_hits = (int32_t)(tier_hit_tokens(s) - th0);
        if (r->need > s->pool->num_free) {
            *evicts = true;
            if ((st = step_evict(s, r->need)) != RKV_OK) return st;
        }
        if (page_pool_alloc(s->pool, r->need, r->pages + mp) != RKV_OK) {
            fits = false;
            r->error = "locked pages leave no room for this request in its step";
            if ((st = cache_client_release(s->c, &r->m, NULL, 0)) != RKV_OK) return st;
            r->locked = false;
            continue;
        }
        int32_t prefix = 0;
        /* Full pages only: the partial last page stays the request's. */
        if ((st = commit_request(s, r, nfull, &prefix, step, err, errlen)) != RKV_OK) return st;
        if (!cache_can(s->c, CACHE_CAP_REUSE) || nfull == mp) {
            mark_held(s, &r->m);
            continue;
        }
        if ((st = vllm_hold_chain(s, r, nfull, mp, prefix, step, err, errlen)) != RKV_OK)
            return st;
        mark_held(s, &r->m);
    }
    for (int32_t i = 0; i < s->n_reqs; i++) {
        sim_req *r = &s->reqs[i];
        if (!r->locked) continue;
        int32_t n = r->q.n_tokens, nfull = n / P, partial = n % P ? 1 : 0;
        const int32_t *own = partial ? r->pages + nfull : NULL;
        if ((st = cache_client_release(s->c, &r->m, own, partial)) != RKV_OK) {
            rkv_set_err(err, errlen, "step %" PRId64 ": release failed: %s", step, rkv_status_str(st));
            return st;
        }
        r->locked = false;
    }
    return RKV_OK;
}

/* The step's request lines and counts, and its eviction line. */
static void step_report(sim *s, int64_t step, bool evicted)
{
    for (int32_t i = 0; i < s->n_reqs; i++) {
        sim_req *r = &s->reqs[i];
        if (!s->opt->summary_only) print_request(s, r);
        s->sum->requests++;
        if (!r->served) {
            s->sum->errors++;
            continue;
        }
        s->sum->prompt_tokens += r->q.n_tokens;
        s->sum->matched_tokens += r->matched;
        s->sum->new_tokens += r->q.n_tokens - r->matched;
        if (s->opt->model && s->opt->gpu) {
            int32_t nw = r->q.n_tokens - r->matched;
            double with = prefill_seconds(s, r->matched, nw);
            s->sum->prefill_seconds += with;
            if (r->tier_hits)
                s->sum->recompute_seconds +=
                    prefill_seconds(s, r->matched - r->tier_hits, r->tier_hits + nw) - with;
        }
    }
    if (evicted && !s->opt->summary_only) {
        fprintf(s->out, "{\"type\":\"step\",\"step\":%" PRId64, step);
        if (s->node_log || s->page_toks) {
            fputs(",\"evicted\":[", s->out);
            for (int32_t i = 0; i < s->n_ev; i++) {
                if (i) fputc(',', s->out);
                json_tokens(s->out, s->ev_toks.t + s->ev[i].off, s->ev[i].len);
            }
            fputc(']', s->out);
        }
        fputs("}\n", s->out);
    }
}

/* One step, as cache_sim.h numbers it. */
static rkv_status run_step(sim *s, char *err, size_t errlen)
{
    int64_t step = s->reqs[0].q.step, need = 0;
    rkv_status st;
    s->n_ev = 0;
    s->ev_toks.n = 0;
    s->clock0 = 0;
    cache_clock(s->c, &s->clock0);
    bool evicts = false;
    if (s->opt->step_semantics == CACHE_SIM_STEP_VLLM) {
        if ((st = step_vllm(s, step, &evicts, err, errlen)) != RKV_OK) return st;
    } else {
        if ((st = step_match(s, step, &need, err, errlen)) != RKV_OK) return st;
        evicts = need - s->pool->num_free > 0;
        if (evicts && (st = step_evict(s, need)) != RKV_OK) return st;
        if ((st = step_allocate(s)) != RKV_OK) return st;
        if ((st = step_commit(s, step, err, errlen)) != RKV_OK) return st;
    }
    step_report(s, step, evicts);
    s->sum->steps++;
    if ((st = check_step(s, step, err, errlen)) != RKV_OK) return st;
    if (s->opt->dump_dir) {
        char name[48];
        /* Numbered by position (the first step is 1, after "initial"), not by
         * the trace's step id, which is a 0-based line number by default. */
        snprintf(name, sizeof name, "step_%04" PRId64, s->sum->steps);
        if ((st = write_dumps(s, name, step, err, errlen)) != RKV_OK) return st;
    }
    return RKV_OK;
}

static rkv_status grow_reqs(sim *s, int32_t n)
{
    int32_t old = s->reqs_cap;
    if (rkv_grow32((void **)&s->reqs, &s->reqs_cap, n, sizeof *s->reqs)) return RKV_ENOMEM;
    /* the new slots start empty, so freeing the sim frees them all alike */
    for (int32_t i = old; i < s->reqs_cap; i++) {
        sim_req *a = &s->reqs[i];
        memset(a, 0, sizeof *a);
        trace_request_init(&a->q);
        cache_seq_init(&a->m, 0, 0);
    }
    return RKV_OK;
}

static void sim_free(sim *s)
{
    for (int32_t i = 0; i < s->reqs_cap; i++) {
        trace_request_free(&s->reqs[i].q);
        cache_seq_free(&s->reqs[i].m);
        free(s->reqs[i].pages);
    }
    free(s->reqs);
    free(s->ev);
    free(s->ev_toks.t);
    free(s->nodes);
    free(s->node_toks.t);
    free(s->page_toks);
    free(s->held);
    if (s->node_log) cache_set_evict_hook(s->c, NULL, NULL);
}

rkv_status cache_sim_run(cache *c, const cache_sim_options *opt, trace_reader *tr, FILE *out,
                         cache_sim_summary *sum, char *err, size_t errlen)
{
    memset(sum, 0, sizeof *sum);
    double t0 = now_s();
    sim s;
    memset(&s, 0, sizeof s);
    s.c = c;
    s.pool = c->pool;
    s.P = c->page_size;
    s.opt = opt;
    s.out = out;
    s.sum = sum;
    /* Under a spill tier too: the tier hands the hooks to its kind. */
    s.node_log = cache_set_evict_hook(c, on_evict, &s);
    s.node_view = cache_clock(c, &s.clock0);
    rkv_status st = RKV_OK;
    if (opt->step_semantics == CACHE_SIM_STEP_VLLM) {
        s.held = calloc((size_t)s.pool->num_pages + 1, sizeof *s.held);
        if (!s.held) {
            rkv_set_err(err, errlen, "no memory for the held marks of %d pages", s.pool->num_pages);
            sim_free(&s);
            return RKV_ENOMEM;
        }
    }
    if (!s.node_log && !opt->summary_only) {
        /* calloc: the OS commits only the pages of it the replay touches. */
        s.page_toks = calloc((size_t)s.pool->num_pages * (size_t)s.P + 1, sizeof(int32_t));
        /* step_evict reads the evicted pages from the pool's free log */
        if (!s.page_toks || page_pool_log_reserve(s.pool) != RKV_OK) {
            rkv_set_err(err, errlen, "no memory for the tokens of %d pages", s.pool->num_pages);
            sim_free(&s);
            return RKV_ENOMEM;
        }
    }

    if (opt->dump_dir) {
        if (mkdir(opt->dump_dir, 0777) != 0 && errno != EEXIST) {
            rkv_set_err(err, errlen, "--dump-dir %s: cannot create: %s", opt->dump_dir, strerror(errno));
            sim_free(&s);
            return RKV_EIO;
        }
        s.have_dot = find_in_path("dot");
        if ((st = write_dumps(&s, "initial", -1, err, errlen)) != RKV_OK) goto done;
    }

    progress bar;
    progress_start(&bar, "cache-sim", "bytes", trace_reader_size(tr), opt->progress);
    if ((st = grow_reqs(&s, 2)) != RKV_OK) goto done;
    /* reqs[n_reqs] is the slot the next line is read into; a line of another
     * step closes the current one and moves to slot 0. */
    for (;;) {
        if ((st = grow_reqs(&s, s.n_reqs + 1)) != RKV_OK) goto done;
        sim_req *next = &s.reqs[s.n_reqs];
        bool eof = false;
        if ((st = trace_next(tr, &next->q, &eof, err, errlen)) != RKV_OK) {
            /* The requests read before the bad line were accepted: replay and
             * print them (as the step they were gathering) before failing. */
            if (s.n_reqs > 0 && (st == RKV_EPARSE || st == RKV_ERANGE)) {
                char serr[512] = "";
                rkv_status st2 = run_step(&s, serr, sizeof serr);
                if (st2 != RKV_OK) {
                    rkv_set_err(err, errlen, "%s", serr[0] ? serr : rkv_status_str(st2));
                    st = st2;
                }
            }
            goto done;
        }
        if (!eof && (s.n_reqs == 0 || next->q.step == s.reqs[0].q.step)) {
            s.n_reqs++;
            continue;
        }
        if (s.n_reqs > 0 && (st = run_step(&s, err, errlen)) != RKV_OK) goto done;
        progress_update(&bar, trace_reader_offset(tr));
        if (eof) break;
        if (interrupt_pending()) {
            sum->interrupted = true;
            break;
        }
        sim_req tmp = s.reqs[0];
        s.reqs[0] = s.reqs[s.n_reqs];
        s.reqs[s.n_reqs] = tmp;
        s.n_reqs = 1;
    }
    progress_finish(&bar);
done:
    sum->seconds = now_s() - t0;
    sim_free(&s);
    return st;
}

void cache_sim_print_summary(FILE *out, const cache_sim_options *opt, const cache *c,
                             const cache_sim_summary *sum)
{
    double hit = sum->prompt_tokens ? (double)sum->matched_tokens / (double)sum->prompt_tokens : 0.0;
    fprintf(out, "{\"type\":\"summary\",\"kind\":\"%s\"", opt->kind ? opt->kind : "radix");
    if (opt->policy) fprintf(out, ",\"policy\":\"%s\"", opt->policy);
    if (opt->hash_fn) fprintf(out, ",\"hash\":\"%s\"", opt->hash_fn);
    if (opt->hash_duplicates) fprintf(out, ",\"hash_duplicates\":\"%s\"", opt->hash_duplicates);
    if (opt->step_semantics_given)
        fprintf(out, ",\"step_semantics\":\"%s\"", cache_sim_step_names[opt->step_semantics]);
    fprintf(out, ",\"capacity\":%" PRId64 ",\"page_size\":%d,\"pages\":%d,\"requests\":%" PRId64
            ",\"errors\":%" PRId64 ",\"steps\":%" PRId64 ",\"prompt_tokens\":%" PRId64
            ",\"matched_tokens\":%" PRId64 ",\"new_tokens\":%" PRId64 ",\"hit_rate\":%.6f"
            ",\"evicted_tokens\":%" PRId64 ",\"evicted_nodes\":%" PRId64 ",\"evict_calls\":%" PRId64
            ",\"hash_computations\":%" PRIu64 ",\"seconds\":%.6f",
            opt->capacity, c->page_size, c->pool->num_pages, sum->requests, sum->errors, sum->steps,
            sum->prompt_tokens, sum->matched_tokens, sum->new_tokens, hit, sum->evicted_tokens,
            sum->evicted_nodes, sum->evict_calls, c->stats.hash_computations, sum->seconds);
    billing_prices def;
    billing_prices_default(&def);
    const billing_prices *pr = opt->prices ? opt->prices : &def;
    billing b;
    billing_compute(pr, sum->prompt_tokens, sum->matched_tokens, &b);
    billing_print_json(out, pr, &b);
    cache_sizes sz;
    cache_get_sizes(c, &sz);
    fprintf(out, ",\"pinned_tokens\":%" PRId64, sz.pinned_tokens);
    /* The cache at the end of the replay: its size and how many operations
     * built it (page-size and overhead studies divide the time by these). */
    fprintf(out, ",\"nodes\":%" PRId64 ",\"cached_tokens\":%" PRId64 ",\"splits\":%" PRIu64
            ",\"match_calls\":%" PRIu64 ",\"insert_calls\":%" PRIu64,
            sz.num_nodes, sz.evictable_tokens + sz.protected_tokens, c->stats.splits,
            c->stats.match_calls, c->stats.insert_calls);
    const tier_stats *ts = cache_tier_get_stats(c);
    if (ts && opt->tier)
        tier_print_json(out, opt->tier, ts, cache_tier_remote_stats(c), sum->prompt_tokens,
                        sum->matched_tokens);
    if (opt->model && opt->gpu) {
        /* The model's name and a profile file's id are the user's text: escaped. */
        fputs(",\"model\":", out);
        rkv_json_string(out, opt->model->name);
        fputs(",\"gpu\":", out);
        rkv_json_string(out, opt->gpu->id);
        fprintf(out, ",\"sim_profile_hash\":\"%s\",\"prefill_seconds\":%.6f", opt->gpu->hash,
                sum->prefill_seconds);
        if (ts)
            fprintf(out, ",\"recompute_seconds_tier_hits\":%.6f,\"tier_seconds_saved\":%.6f",
                    sum->recompute_seconds, sum->recompute_seconds - ts->load_seconds);
    }
    if (sum->interrupted) fputs(",\"interrupted\":true", out);
    fputc('}', out);
}
