/* replicas.c - see replicas.h. */
#include "replicas.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend_sim.h"
#include "cache.h"
#include "cache_client.h"
#include "cache_pin.h"
#include "cache_tier.h"
#include "page_pool.h"
#include "pin_file.h"
#include "progress.h"
#include "interrupt.h"
#include "model_config.h"
#include "rkv_core.h"
#include "router.h"
#include "trace_engine.h"

typedef struct rreq {
    engine_request er;  /* its tokens are owned here */
    char *id_json;
    int32_t replica;
    int64_t eid;
    int32_t predicted; /* -1: no prediction */
    /* Disaggregated only: */
    int32_t decode;    /* decode engine (index among all), -1: none (yet) */
    int64_t deid;
    int32_t *dtokens;  /* prompt + first token, the decode engine's prompt */
    uint8_t *kv;       /* (kv_pages_read, page bytes) the pages in flight */
    int32_t kv_read, kv_sent, kv_local; /* pages read at prefill, sent, already at decode */
    double t_first, transfer;
    double t_ready;    /* the handoff may leave: t_first, or when its decode
                          engine had room again */
    double link_wait;  /* from t_first until the link took it: waiting for
                          room on the decode engine, then for both NICs */
    int32_t waits;     /* times it found its decode engine full */
    int32_t decode_cached; /* tokens the decode engine found at admission */
    bool recompute;
    bool ok, finished; /* the whole request (both halves) */
    double ttft, tpot, latency;
    int32_t outputs, first, prompt_tokens, cached_tokens;
} rreq;

typedef struct replica {
    engine *e;
    cache_pins pins;
    bool busy;
    int64_t *req_of; /* (routed) engine id -> index into reqs */
    int64_t req_cap;
    double nic_free; /* disaggregated: when its NIC is free (kv_link.h) */
    int64_t *wait;   /* decode: handoffs waiting for room (requests) */
    int64_t nwait, wait_cap;
} replica;

/* A binary min-heap of (time, id), ties to the lower id: the busy engines
 * by clock (the lower index first, as a scan in index order picks) and the
 * queued handoffs by first-token time (the request earlier in the trace
 * first). With pos (engines), each id's slot, -1 when out. A driver step
 * then costs O(log engines) instead of a pass over every engine.
 *
 *          (0.20, 3)             slot k's children: 2k+1, 2k+2
 *         /         \
 *   (0.25, 0)     (0.20, 7)      a parent never after its children
 */
typedef struct hent {
    double t;
    int64_t id;
} hent;

typedef struct theap {
    hent *a;
    int64_t n, cap;
    int32_t *pos; /* engines: id -> slot or -1; NULL: not tracked */
} theap;

static bool hent_before(hent x, hent y) { return x.t < y.t || (x.t == y.t && x.id < y.id); }

static void theap_set(theap *h, int64_t k, hent v)
{
    h->a[k] = v;
    if (h->pos) h->pos[v.id] = (int32_t)k;
}

static int64_t theap_up(theap *h, int64_t k)
{
    hent v = h->a[k];
    for (; k > 0 && hent_before(v, h->a[(k - 1) / 2]); k = (k - 1) / 2)
        theap_set(h, k, h->a[(k - 1) / 2]);
    theap_set(h, k, v);
    return k;
}

static void theap_down(theap *h, int64_t k)
{
    hent v = h->a[k];
    for (;;) {
        int64_t c = 2 * k + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && hent_before(h->a[c + 1], h->a[c])) c++;
        if (!hent_before(h->a[c], v)) break;
        theap_set(h, k, h->a[c]);
        k = c;
    }
    theap_set(h, k, v);
}

static rkv_status theap_push(theap *h, double t, int64_t id)
{
    if (rkv_grow((void **)&h->a, &h->cap, h->n + 1, sizeof *h->a)) return RKV_ENOMEM;
    theap_set(h, h->n, (hent){t, id});
    theap_up(h, h->n++);
    return RKV_OK;
}

/* Take slot k out. */
static void theap_remove(theap *h, int64_t k)
{
    if (h->pos) h->pos[h->a[k].id] = -1;
    if (k == --h->n) return;
    theap_set(h, k, h->a[h->n]);
    theap_down(h, theap_up(h, k));
}

/* Slot k's time is now t. */
static void theap_move(theap *h, int64_t k, double t)
{
    h->a[k].t = t;
    theap_down(h, theap_up(h, k));
}

typedef struct driver {
    const replicas_config *rc;
    int32_t engines;   /* replicas, or prefill + decode */
    engine_config ec;  /* every engine's; never offline when disaggregated
                          (arrivals were zeroed already, and a handoff's must
                          stay) */
    int32_t np;        /* prefill engines (disaggregated), else 0 */
    router *drt;       /* decode engines' router (least-load) */
    kv_link link;
    double kv_page_bytes; /* the model's bf16 K/V of one page */
    size_t page_bytes;    /* the backend's page (read_page / write_page) */
    /* Finished in the last step, to be handled between steps (the
     * callback runs inside the step): (request, engine) pairs. */
    int64_t *post;
    int64_t npost, post_cap;
    theap pending;     /* handoffs waiting for the clocks to reach t_first */
    theap busy;        /* the engines with work, by clock */
    theap pbusy;       /* disaggregated: the prefill engines among them (the
                          earliest step that could start a handoff) */
    int64_t delivered; /* handoffs so far (the decode router's request count) */
    rkv_status fail;
    char fail_msg[400];
    replica *r;
    router_load *load; /* (replicas) what the router sees */
    router *rt;
    rreq *reqs;
    int64_t n, cap;
    FILE *out;
    progress prog;
    int64_t done;
    bool interrupted;  /* a signal stopped the run between steps (interrupt.h) */
} driver;

typedef struct fin_ctx { driver *d; int32_t i; } fin_ctx;

static void on_finish(void *vctx, engine *e, int64_t eid)
{
    fin_ctx *fc = vctx;
    driver *d = fc->d;
    replica *rp = &d->r[fc->i];
    d->load[fc->i].outstanding--;
    if (d->np) {
        /* Handled between steps (disagg_post): it touches caches. */
        if (rkv_grow((void **)&d->post, &d->post_cap, d->npost + 2, sizeof *d->post)) {
            if (!d->fail) snprintf(d->fail_msg, sizeof d->fail_msg, "replicas: out of host memory");
            d->fail = RKV_ENOMEM;
            return;
        }
        d->post[d->npost++] = rp->req_of[eid];
        d->post[d->npost++] = fc->i;
        return;
    }
    rreq *q = &d->reqs[rp->req_of[eid]];
    engine_result res;
    engine_result_get(e, eid, &res);
    FILE *f = d->out;
    fprintf(f, "{\"type\":\"request\",\"id\":%s,\"replica\":%d", q->id_json, fc->i);
    if (q->predicted >= 0) fprintf(f, ",\"predicted\":%d", q->predicted);
    if (res.error) {
        fputs(",\"error\":", f);
        rkv_json_string(f, res.error);
        fprintf(f, ",\"prompt_tokens\":%d}\n", res.prompt_tokens);
    } else {
        fprintf(f, ",\"ttft\":%.6f,\"latency\":%.6f,\"prompt_tokens\":%d,\"cached_tokens\":%d,"
                "\"output_tokens\":%d,\"output_ids\":[", res.ttft, res.latency, res.prompt_tokens,
                res.cached_tokens, res.num_output);
        for (int32_t k = 0; k < res.num_output; k++) fprintf(f, k ? ",%d" : "%d", res.output_ids[k]);
        fputs("]}\n", f);
    }
    progress_update(&d->prog, ++d->done);
}

/* Engine i has work now: into the heap of busy engines, at its clock. */
static rkv_status mark_busy(driver *d, int32_t i)
{
    d->r[i].busy = true;
    if (d->busy.pos[i] >= 0) return RKV_OK;
    if (theap_push(&d->busy, engine_now(d->r[i].e), i)) return RKV_ENOMEM;
    if (i < d->np && theap_push(&d->pbusy, engine_now(d->r[i].e), i)) {
        theap_remove(&d->busy, d->busy.pos[i]); /* in both heaps or in neither */
        return RKV_ENOMEM;
    }
    return RKV_OK;
}

/* ---- Disaggregation: prefill engines hand requests to decode engines. ---- */

static rkv_status disagg_fail(driver *d, rkv_status st, const char *what)
{
    if (!d->fail) {
        d->fail = st;
        snprintf(d->fail_msg, sizeof d->fail_msg, "%s: %s", what, rkv_status_str(st));
    }
    return st;
}

/* The whole request's line (both halves) and its times: error, or the
 * decode half's outputs (dec, n_dec) after the first token, finished at
 * finish. The engines forget the request once it is written (a trace of
 * 145 M tokens would otherwise stay in memory three times). */
static void disagg_line(driver *d, rreq *q, const char *error, const int32_t *dec, int32_t n_dec,
                        double finish)
{
    FILE *f = d->out;
    q->finished = true;
    fprintf(f, "{\"type\":\"request\",\"id\":%s,\"prefill\":", q->id_json);
    if (q->replica >= 0) fprintf(f, "%d", q->replica);
    else fputs("null", f);
    fputs(",\"decode\":", f);
    if (q->decode >= 0) fprintf(f, "%d", q->decode - d->np);
    else fputs("null", f);
    if (error) {
        fputs(",\"error\":", f);
        rkv_json_string(f, error);
        fprintf(f, ",\"prompt_tokens\":%d}\n", q->prompt_tokens);
    } else {
        q->outputs = 1 + n_dec;
        q->latency = finish - q->er.arrival;
        q->tpot = q->outputs > 1 ? (finish - q->t_first) / (q->outputs - 1) : 0;
        q->ok = true;
        fprintf(f, ",\"ttft\":%.6f,\"tpot\":%.6f,\"latency\":%.6f,\"prompt_tokens\":%d,"
                "\"cached_tokens\":%d,\"kv_pages\":%d,\"kv_local_pages\":%d,\"kv_bytes\":%.0f,"
                "\"transfer\":%.6f,\"link_wait\":%.6f,\"decode_cached_tokens\":%d,"
                "\"output_tokens\":%d,\"output_ids\":[%d",
                q->ttft, q->tpot, q->latency, q->prompt_tokens, q->cached_tokens, q->kv_sent,
                q->kv_local, q->kv_sent * d->kv_page_bytes, q->transfer, q->link_wait,
                q->decode_cached, q->outputs, q->first);
        for (int32_t k = 0; k < n_dec; k++) fprintf(f, ",%d", dec[k]);
        fputs("]}\n", f);
    }
    progress_update(&d->prog, ++d->done);
}

/* A prompt computed on prefill engine i: done there (error, one output, stop
 * token), or its full pages read out of i's cache and the handoff queued. */
static rkv_status prefill_done(driver *d, int64_t qi)
{
    rreq *q = &d->reqs[qi];
    engine *e = d->r[q->replica].e;
    engine_result res;
    engine_result_get(e, q->eid, &res);
    q->prompt_tokens = res.prompt_tokens;
    q->cached_tokens = res.cached_tokens;
    q->t_first = res.first_token_time;
    q->ttft = res.ttft;
    q->first = res.num_output > 0 ? res.output_ids[0] : -1;
    if (res.error || q->er.max_tokens <= 1 || res.num_output < 1 ||
        (q->er.stop_token >= 0 && res.output_ids[0] == q->er.stop_token)) {
        disagg_line(d, q, res.error ? res.error : res.num_output < 1 ? "no output" : NULL, NULL, 0,
                    res.finish_time);
        engine_forget(e, q->eid);
        return RKV_OK;
    }
    int32_t n = q->er.n_tokens;
    q->dtokens = malloc(sizeof(int32_t) * ((size_t)n + 1));
    if (!q->dtokens) return disagg_fail(d, RKV_ENOMEM, "replicas: the decode prompt");
    memcpy(q->dtokens, q->er.tokens, sizeof(int32_t) * (size_t)n);
    q->dtokens[n] = res.output_ids[0];
    /* The pages the prompt left in i's cache (all of them but after an
     * eviction in the same step, which a commit never does). */
    cache *c = engine_cache(e);
    backend *b = engine_backend(e);
    cache_seq m;
    cache_seq_init(&m, q->er.ns, q->er.priority);
    rkv_status st = cache_client_match(c, &m, q->er.tokens, n);
    if (st == RKV_OK && m.num_pages > 0 && !(q->kv = malloc(d->page_bytes * (size_t)m.num_pages)))
        st = RKV_ENOMEM;
    for (int32_t k = 0; st == RKV_OK && k < m.num_pages; k++)
        st = b->ops->read_page(b, m.pages[k], q->kv + d->page_bytes * (size_t)k);
    if (st == RKV_OK) q->kv_read = m.num_pages;
    rkv_status rst = cache_client_release(c, &m, NULL, 0);
    cache_seq_free(&m);
    if (st || (st = rst)) return disagg_fail(d, st, "replicas: reading a prompt's pages");
    engine_forget(e, q->eid);
    free((void *)q->er.tokens); /* dtokens has them */
    q->er.tokens = NULL;
    q->t_ready = q->t_first;
    if (theap_push(&d->pending, q->t_ready, qi))
        return disagg_fail(d, RKV_ENOMEM, "replicas: the handoff queue");
    return RKV_OK;
}

/* The handoff at t_ready: a decode engine by least-load (kept on a retry),
 * the pages it lacks written and cached there, unlocked like any cached
 * prefix, the request added to arrive when the link has moved them (both
 * NICs free, kv_link.h). When j has no room even after eviction while it
 * runs requests, the handoff waits on j (replica.wait) and is tried again
 * each time one of them finishes: the pages stay with the prefill side
 * meanwhile, as a real transfer engine holds them until the decode side
 * has allocated its pages. */
static rkv_status deliver(driver *d, int64_t qi, int64_t k)
{
    rreq *q = &d->reqs[qi];
    int32_t j, pred;
    char why[256] = "";
    rkv_status st = RKV_OK;
    if (q->decode < 0) {
        st = router_route(d->drt, q->dtokens, q->er.n_tokens + 1, q->er.ns, k, d->load + d->np, &j,
                          &pred, why, sizeof why);
        if (st) return disagg_fail(d, st, "replicas: decode router");
        q->decode = d->np + j;
        d->load[q->decode].outstanding++; /* waiting or running, j has it */
    }
    int32_t di = q->decode;
    j = di - d->np;
    replica *rp = &d->r[di];
    cache *c = engine_cache(rp->e);
    backend *b = engine_backend(rp->e);
    int32_t P = b->page_size, nfull = q->kv_read;
    int32_t *pages = malloc(sizeof(int32_t) * ((size_t)nfull + 1));
    if (!pages) return disagg_fail(d, RKV_ENOMEM, "replicas: a handoff's pages");
    cache_seq m;
    cache_seq_init(&m, q->er.ns, q->er.priority);
    st = cache_client_admit(c, &m, q->dtokens, nfull * P, nfull, pages, NULL);
    if (st == RKV_ENOSPC && rp->busy) {
        /* Wait for room: j's running requests hold its pages and will
         * finish. */
        cache_seq_free(&m);
        free(pages);
        q->waits++;
        if (rkv_grow((void **)&rp->wait, &rp->wait_cap, rp->nwait + 1, sizeof *rp->wait))
            return disagg_fail(d, RKV_ENOMEM, "replicas: a decode engine's waiting handoffs");
        rp->wait[rp->nwait++] = qi;
        return RKV_OK;
    }
    if (st == RKV_ENOSPC) {
        /* No room on an idle j (its pins fill it): j computes the prompt
         * again. */
        q->recompute = true;
        st = RKV_OK;
    } else if (st == RKV_OK) {
        q->kv_local = m.num_pages;
        for (int32_t p = m.num_pages; st == RKV_OK && p < nfull; p++)
            st = b->ops->write_page(b, pages[p], q->kv + d->page_bytes * (size_t)p);
        if (st == RKV_OK) {
            st = cache_client_commit(c, &m, q->dtokens, nfull * P, pages, m.num_pages, nfull,
                                     NULL);
        } else {
            cache_client_release(c, &m, pages + m.num_pages, nfull - m.num_pages);
        }
        rkv_status rst = cache_client_release(c, &m, NULL, 0);
        if (st == RKV_OK) st = rst;
        /* Not held until j admits the request: holds of requests still
         * waiting could fill j's pool so that none of them could run. The
         * pages are j's newest, so its evictions take them last; when they
         * do, j recomputes them ("decode_cached_tokens" says so). */
        q->kv_sent = nfull - q->kv_local;
    }
    cache_seq_free(&m);
    free(pages);
    free(q->kv);
    q->kv = NULL;
    if (st) return disagg_fail(d, st, "replicas: caching a handoff's pages");
    /* Both NICs, first come first served (kv_link.h). The arrival is
     * t_first + wait + transfer, so that an uncontended handoff's is
     * t_first + transfer to the bit. */
    replica *pp = &d->r[q->replica];
    double start = q->t_ready;
    if (pp->nic_free > start) start = pp->nic_free;
    if (rp->nic_free > start) start = rp->nic_free;
    double busy = kv_link_busy_seconds(&d->link, q->kv_sent, d->kv_page_bytes);
    if (busy > 0) pp->nic_free = rp->nic_free = start + busy;
    q->link_wait = start - q->t_first;
    q->transfer = kv_link_seconds(&d->link, q->kv_sent, d->kv_page_bytes);
    engine_request er = q->er;
    er.tokens = q->dtokens;
    er.n_tokens = q->er.n_tokens + 1;
    er.max_tokens = q->er.max_tokens - 1;
    er.arrival = q->t_first + q->link_wait + q->transfer;
    router_load *ld = &d->load[di];
    if (rkv_grow((void **)&rp->req_of, &rp->req_cap, ld->routed + 1, sizeof *rp->req_of))
        return disagg_fail(d, RKV_ENOMEM, "replicas: decode bookkeeping");
    rp->req_of[ld->routed] = qi;
    ld->routed++;
    if ((st = engine_add(rp->e, &er, &q->deid, why, sizeof why))) {
        if (!d->fail) {
            d->fail = st;
            snprintf(d->fail_msg, sizeof d->fail_msg, "%s: request %s at decode engine %d: %s",
                     d->rc->trace, q->id_json, j, why[0] ? why : rkv_status_str(st));
        }
        return st;
    }
    if (mark_busy(d, di)) return disagg_fail(d, RKV_ENOMEM, "replicas: the busy engines");
    free(q->dtokens); /* the engine copied them */
    q->dtokens = NULL;
    return RKV_OK;
}

/* Decode engine i finished a request (or went idle) at time t: its oldest
 * waiting handoff goes back to the queue, at t. One per finish: a finish
 * frees about one request's pages, and handoffs retried together would
 * each evict the one before (their pages are not held until admitted). */
static rkv_status wake_waiting(driver *d, int32_t i, double t)
{
    replica *rp = &d->r[i];
    int64_t qi = rp->wait[0];
    rreq *q = &d->reqs[qi];
    memmove(rp->wait, rp->wait + 1, sizeof *rp->wait * (size_t)(rp->nwait - 1));
    rp->nwait--;
    q->t_ready = t > q->t_ready ? t : q->t_ready;
    if (theap_push(&d->pending, q->t_ready, qi))
        return disagg_fail(d, RKV_ENOMEM, "replicas: the handoff queue");
    return RKV_OK;
}

/* What the last step finished: prefill halves hand over, decode halves
 * write the request's line. */
static rkv_status disagg_post(driver *d)
{
    for (int64_t k = 0; k + 1 < d->npost && !d->fail; k += 2) {
        int64_t qi = d->post[k];
        int32_t i = (int32_t)d->post[k + 1];
        rreq *q = &d->reqs[qi];
        if (i < d->np) {
            prefill_done(d, qi);
            continue;
        }
        engine_result dec;
        engine_result_get(d->r[i].e, q->deid, &dec);
        q->decode_cached = dec.cached_tokens;
        disagg_line(d, q, dec.error, dec.output_ids, dec.num_output, dec.finish_time);
        engine_forget(d->r[i].e, q->deid);
        if (d->r[i].nwait) wake_waiting(d, i, dec.finish_time);
    }
    d->npost = 0;
    return d->fail;
}

/* Engine steps between events before advance looks again (a signal is seen
 * at least this often). */
#define STEPS_PER_CALL 4096

/* A bound (until, inclusive) lowered to time c, inclusive only where every
 * bound at the lowest time is. */
static void bound_by(double c, bool incl, double *until, bool *inclusive)
{
    if (c < *until) {
        *until = c;
        *inclusive = incl;
    } else if (c == *until) {
        *inclusive = *inclusive && incl;
    }
}

/* How far engine pick (the busy heap's root, picked for target t) may step
 * in one engine_step_until (engine.h):
 *   until: before advance would pick anything else: strictly below t (the
 *     next arrival routes at t), below the first queued handoff (it goes
 *     first at a tie), and not past the next busy engine in the heap's order
 *     (its clock; a tie goes to the lower index).
 *   quiet_until: quiet steps (no finish, nothing shared touched) while
 *     nothing can reach pick: below t (a request routed to it) and the first
 *     queued handoff (delivered to it), and, for a decode engine, below every
 *     busy prefill engine's clock (a step of one may finish a prompt, whose
 *     handoff could come to pick; at a tie the prefill engine, of lower
 *     index, goes first). Replicas hand each other nothing: a replica's
 *     quiet steps may pass every other replica's clock, whose steps see
 *     nothing of them (the router reads loads, which only finishes change).
 * Any step of pick's finishes a request only as its last in the call. */
static void horizon(const driver *d, double t, int32_t pick, engine_horizon *h)
{
    h->until = t < 0 ? INFINITY : t;
    h->inclusive = false;
    if (d->pending.n) bound_by(d->pending.a[0].t, false, &h->until, &h->inclusive);
    h->quiet_until = h->until; /* t and the first handoff */
    if (d->np && pick < d->np) h->quiet_until = -INFINITY; /* prefill: every prompt finishes */
    else if (d->np && d->pbusy.n && d->pbusy.a[0].t < h->quiet_until)
        h->quiet_until = d->pbusy.a[0].t;
    const hent *next = NULL;
    for (int64_t c = 1; c <= 2 && c < d->busy.n; c++)
        if (!next || hent_before(d->busy.a[c], *next)) next = &d->busy.a[c];
    if (next) bound_by(next->t, pick < next->id, &h->until, &h->inclusive);
    h->max_steps = STEPS_PER_CALL;
}

/* Step the busy engine furthest behind while it is behind t (t < 0: until
 * every engine is done). A queued handoff at t1 goes first once no busy
 * engine is behind t1, so the decode router and cache see time t1. The
 * engine picked steps on until the next of these events (horizon,
 * engine_step_until): the steps are the ones a call per step would take. */
static rkv_status advance(driver *d, double t, char *err, size_t errlen)
{
    for (;;) {
        if ((d->interrupted = interrupt_pending() != 0)) return RKV_OK;
        /* The busy engine with the lowest clock (ties: the lowest index). */
        int32_t pick = -1;
        double low = 0;
        if (d->busy.n && (t < 0 || d->busy.a[0].t < t)) {
            pick = (int32_t)d->busy.a[0].id;
            low = d->busy.a[0].t;
        }
        if (d->pending.n) {
            double th = d->pending.a[0].t;
            if ((t < 0 || th <= t) && (pick < 0 || th <= low)) {
                int64_t qi = d->pending.a[0].id;
                theap_remove(&d->pending, 0);
                if (deliver(d, qi, d->delivered++)) goto failed;
                continue;
            }
        }
        if (pick < 0) return RKV_OK;
        bool done = false;
        char why[400] = "";
        engine_horizon h;
        int64_t steps;
        horizon(d, t, pick, &h);
        rkv_status st = engine_step_until(d->r[pick].e, &h, &done, &steps, why, sizeof why);
        if (st != RKV_OK) {
            snprintf(err, errlen, "%s %d: %s", d->np ? (pick < d->np ? "prefill engine" : "decode engine")
                     : "replica", d->np && pick >= d->np ? pick - d->np : pick,
                     why[0] ? why : rkv_status_str(st));
            return st;
        }
        if (done) {
            d->r[pick].busy = false;
            theap_remove(&d->busy, d->busy.pos[pick]);
            if (pick < d->np) theap_remove(&d->pbusy, d->pbusy.pos[pick]);
            /* A handoff that found it full since its last finish. */
            if (d->r[pick].nwait && wake_waiting(d, pick, engine_now(d->r[pick].e))) goto failed;
        } else {
            theap_move(&d->busy, d->busy.pos[pick], engine_now(d->r[pick].e));
            if (pick < d->np) theap_move(&d->pbusy, d->pbusy.pos[pick], engine_now(d->r[pick].e));
        }
        if (d->np && (d->fail || disagg_post(d))) goto failed;
    }
failed:
    snprintf(err, errlen, "%s", d->fail_msg);
    return d->fail;
}

/* One trace request kept for dispatch (trace_engine_load's callback). */
static rkv_status keep_request(void *vctx, const trace_request *tq, const engine_request *er,
                               char *err, size_t errlen)
{
    driver *d = vctx;
    if (rkv_grow((void **)&d->reqs, &d->cap, d->n + 1, sizeof *d->reqs)) goto oom;
    rreq *r = &d->reqs[d->n];
    memset(r, 0, sizeof *r);
    r->er = *er;
    r->eid = -1;
    /* Offline: every request is there at time 0 (arrivals ignored). */
    if (d->rc->engine->offline) r->er.arrival = 0;
    int32_t *tokens = malloc(sizeof(int32_t) * (size_t)er->n_tokens);
    r->id_json = strdup(tq->id_json ? tq->id_json : "null");
    if (!tokens || !r->id_json) {
        free(tokens);
        free(r->id_json);
        goto oom;
    }
    memcpy(tokens, er->tokens, sizeof(int32_t) * (size_t)er->n_tokens);
    r->er.tokens = tokens;
    d->n++;
    return RKV_OK;
oom:
    snprintf(err, errlen, "out of host memory");
    return RKV_ENOMEM;
}

static int cmp_arrival(const void *a, const void *b, void *ctx)
{
    const rreq *r = ctx;
    int64_t i = *(const int64_t *)a, j = *(const int64_t *)b;
    if (r[i].er.arrival != r[j].er.arrival) return r[i].er.arrival < r[j].er.arrival ? -1 : 1;
    return (i > j) - (i < j);
}

/* Requests within both SLOs (an unset one always holds); errors never are. */
static bool slo_met(const replicas_config *rc, double ttft, double tpot)
{
    return (rc->slo_ttft <= 0 || ttft <= rc->slo_ttft) && (rc->slo_tpot <= 0 || tpot <= rc->slo_tpot);
}

/* The SLO fields of a summary: TPOT percentiles, the share of requests
 * within both SLOs ("slo_attainment") and their count per second of this
 * run ("good_requests_per_s"). DistServe's goodput is another number: the
 * highest request rate at which at least 90 % of requests meet both SLOs,
 * found by running a rate sweep (experiments/disaggregation). tpot sorted. */
static void slo_print(FILE *f, const replicas_config *rc, const double *tpot, int64_t ntpot,
                      int64_t met, int64_t requests, double span)
{
    fprintf(f, ",\"tpot_p50\":%.6f,\"tpot_p99\":%.6f", rkv_percentile(tpot, ntpot, 50),
            rkv_percentile(tpot, ntpot, 99));
    if (rc->slo_ttft <= 0 && rc->slo_tpot <= 0) return;
    fputs(",\"slo_ttft\":", f);
    if (rc->slo_ttft > 0) fprintf(f, "%.6f", rc->slo_ttft);
    else fputs("null", f);
    fputs(",\"slo_tpot\":", f);
    if (rc->slo_tpot > 0) fprintf(f, "%.6f", rc->slo_tpot);
    else fputs("null", f);
    fprintf(f, ",\"slo_met\":%lld,\"slo_attainment\":%.6f,\"good_requests_per_s\":%.6f", (long long)met,
            requests ? (double)met / (double)requests : 0, (double)met / span);
}

/* Spill and remote tiers, summed over every engine (the remote experiment;
 * the shared pool under disaggregation), and the engines' model seconds. */
static void tiers_print(driver *d, FILE *f)
{
    tier_stats tsum = {0};
    tier_remote_stats rsum = {0};
    bool any_tier = false, any_remote = false;
    double model_s = 0;
    for (int32_t i = 0; i < d->engines; i++) {
        engine_stats s;
        engine_get_stats(d->r[i].e, &s);
        model_s += s.model_seconds;
        const tier_stats *ts = cache_tier_get_stats(engine_cache(d->r[i].e));
        const tier_remote_stats *rs = cache_tier_remote_stats(engine_cache(d->r[i].e));
        if (ts) {
            any_tier = true;
            tsum.host_hit_tokens += ts->host_hit_tokens;
            tsum.disk_hit_tokens += ts->disk_hit_tokens;
            tsum.load_seconds += ts->load_seconds;
        }
        if (rs) {
            any_remote = true;
            tier_remote_stats_add(&rsum, rs);
        }
    }
    fprintf(f, ",\"model_seconds\":%.6f", model_s);
    if (any_tier)
        fprintf(f, ",\"host_hit_tokens\":%llu,\"disk_hit_tokens\":%llu,\"tier_load_seconds\":%.6f",
                (unsigned long long)tsum.host_hit_tokens, (unsigned long long)tsum.disk_hit_tokens,
                tsum.load_seconds);
    if (any_remote)
        fprintf(f, ",\"remote_hit_tokens\":%llu,\"remote_stored_pages\":%llu,\"remote_deleted_pages\":%llu"
                ",\"remote_bytes_loaded\":%.0f,\"remote_bytes_stored\":%.0f,\"remote_load_seconds\":%.6f",
                (unsigned long long)rsum.hit_tokens, (unsigned long long)rsum.stored_pages,
                (unsigned long long)rsum.deleted_pages, rsum.bytes_loaded, rsum.bytes_stored,
                rsum.load_seconds);
}

static rkv_status disagg_summary(driver *d, char *err, size_t errlen)
{
    const replicas_config *rc = d->rc;
    int64_t n = d->n, ok = 0, errors = 0, met = 0, outputs = 0, prompt = 0, cached = 0;
    int64_t sent = 0, local = 0, recompute = 0, lost = 0, waited = 0;
    int32_t P = engine_backend(d->r[0].e)->page_size;
    double t_end = 0, transfer = 0, link_wait = 0;
    double *v = malloc(sizeof(double) * 3 * (size_t)(n + 1));
    if (!v) {
        snprintf(err, errlen, "out of host memory for the summary's latency percentiles");
        return RKV_ENOMEM;
    }
    double *ttft = v, *tpot = v + n + 1, *lat = v + 2 * (n + 1);
    for (int64_t k = 0; k < n; k++) {
        rreq *q = &d->reqs[k];
        if (!q->finished) continue;
        if (!q->ok) {
            errors++;
            continue;
        }
        prompt += q->prompt_tokens;
        cached += q->cached_tokens;
        outputs += q->outputs;
        sent += q->kv_sent;
        local += q->kv_local;
        recompute += q->recompute;
        lost += q->decode >= 0 && q->decode_cached < (q->kv_local + q->kv_sent) * P;
        transfer += q->transfer;
        link_wait += q->link_wait;
        waited += q->waits > 0;
        ttft[ok] = q->ttft;
        tpot[ok] = q->tpot;
        lat[ok] = q->latency;
        ok++;
        met += slo_met(rc, q->ttft, q->tpot);
        if (q->er.arrival + q->latency > t_end) t_end = q->er.arrival + q->latency;
    }
    qsort(ttft, (size_t)ok, sizeof(double), rkv_cmp_double);
    qsort(tpot, (size_t)ok, sizeof(double), rkv_cmp_double);
    qsort(lat, (size_t)ok, sizeof(double), rkv_cmp_double);
    double span = t_end > 0 ? t_end : 1e-9;
    FILE *f = d->out;
    fprintf(f, "{\"type\":\"summary\",\"mode\":\"disaggregated\",\"prefill\":%d,\"decode\":%d,"
            "\"router\":\"%s\",\"decode_router\":\"%s\",\"cache\":\"%s\",\"link\":\"%s\","
            "\"link_bandwidth\":%.6g,\"link_latency\":%.6g,\"link_per_page\":%.6g,"
            "\"requests\":%lld,\"errors\":%lld,\"duration\":%.6f,\"requests_per_s\":%.6f,"
            "\"output_tokens_per_s\":%.6f,\"prompt_tokens\":%lld,\"cached_tokens\":%lld,"
            "\"hit_rate\":%.6f,\"ttft_p50\":%.6f,\"ttft_p99\":%.6f,\"latency_p50\":%.6f,"
            "\"latency_p99\":%.6f",
            d->np, d->engines - d->np, router_names[rc->router], router_names[rc->decode_router],
            rc->engine->cache_cfg.kind ? rc->engine->cache_cfg.kind : "radix", d->link.name,
            d->link.bandwidth, d->link.latency, d->link.per_page, (long long)n, (long long)errors,
            span, (double)ok / span, (double)outputs / span, (long long)prompt, (long long)cached,
            prompt ? (double)cached / (double)prompt : 0, rkv_percentile(ttft, ok, 50),
            rkv_percentile(ttft, ok, 99), rkv_percentile(lat, ok, 50), rkv_percentile(lat, ok, 99));
    slo_print(f, rc, tpot, ok, met, n, span);
    fprintf(f, ",\"kv_pages\":%lld,\"kv_bytes\":%.0f,\"kv_local_pages\":%lld,\"decode_hit_rate\":%.6f,"
            "\"kv_recompute_requests\":%lld,\"kv_evicted_requests\":%lld,\"kv_waited_requests\":%lld,"
            "\"transfer_seconds\":%.6f,\"link_wait_seconds\":%.6f,\"per_prefill_requests\":[",
            (long long)sent, (double)sent * d->kv_page_bytes, (long long)local,
            sent + local ? (double)local / (double)(sent + local) : 0, (long long)recompute,
            (long long)lost, (long long)waited, transfer, link_wait);
    for (int32_t i = 0; i < d->engines; i++) {
        if (i == d->np) fputs("],\"per_decode_requests\":[", f);
        fprintf(f, i && i != d->np ? ",%lld" : "%lld", (long long)d->load[i].routed);
    }
    fputs("],\"per_prefill_hit_rate\":[", f);
    for (int32_t i = 0; i < d->np; i++) {
        engine_stats s;
        engine_get_stats(d->r[i].e, &s);
        fprintf(f, i ? ",%.6f" : "%.6f", s.prompt_tokens ? (double)s.cached_tokens / (double)s.prompt_tokens : 0);
    }
    fputc(']', f);
    billing_prices def;
    billing_prices_default(&def);
    billing b;
    billing_compute(rc->prices ? rc->prices : &def, prompt, cached, &b);
    billing_print_json(f, rc->prices ? rc->prices : &def, &b);
    const sim_profile *sp = backend_sim_profile(engine_backend(d->r[0].e));
    if (sp) {
        fputs(",\"sim_profile\":", f);
        rkv_json_string(f, sp->id); /* a profile file's id is the user's text */
        fprintf(f, ",\"sim_profile_hash\":\"%s\"", sp->hash);
    }
    tiers_print(d, f);
    if (d->interrupted) fputs(",\"interrupted\":true", f);
    fputs("}\n", f);
    fprintf(stderr, "  disaggregated   %d prefill + %d decode engines, router %s, link %s\n"
            "  requests        %lld (%lld errors) in %.3f s\n"
            "  TTFT p50 %.2f ms, TPOT p50 %.2f ms; %lld pages sent (%.1f MB), %lld already there\n",
            d->np, d->engines - d->np, router_names[rc->router], d->link.name, (long long)n,
            (long long)errors, span, 1e3 * rkv_percentile(ttft, ok, 50),
            1e3 * rkv_percentile(tpot, ok, 50), (long long)sent, 1e-6 * (double)sent * d->kv_page_bytes,
            (long long)local);
    free(v);
    return RKV_OK;
}

static rkv_status summary(driver *d, char *err, size_t errlen)
{
    const replicas_config *rc = d->rc;
    int64_t prompt = 0, cached = 0, outputs = 0, errors = 0, nt = 0, npred = 0, over = 0;
    double t_end = 0, abs_err = 0, pred_prompt = 0;
    double *ttft = malloc(sizeof(double) * 2 * (size_t)(d->n + 1));
    double *tpot = ttft ? ttft + d->n + 1 : NULL;
    int64_t met = 0;
    bool slo = rc->slo_ttft > 0 || rc->slo_tpot > 0;
    if (!ttft) {
        /* Without them the summary's times would be zeros that look measured. */
        snprintf(err, errlen, "out of host memory for the summary's latency percentiles");
        return RKV_ENOMEM;
    }
    for (int64_t k = 0; k < d->n; k++) {
        rreq *q = &d->reqs[k];
        if (q->eid < 0) continue; /* never dispatched (interrupted) */
        engine_result res;
        engine_result_get(d->r[q->replica].e, q->eid, &res);
        if (!res.finished) continue;
        if (res.error) {
            errors++;
            continue;
        }
        prompt += res.prompt_tokens;
        cached += res.cached_tokens;
        outputs += res.num_output;
        tpot[nt] = res.tpot;
        met += slo_met(rc, res.ttft, res.tpot);
        ttft[nt++] = res.ttft;
        if (res.finish_time > t_end) t_end = res.finish_time;
        if (q->predicted >= 0) {
            npred++;
            abs_err += fabs((double)q->predicted - res.cached_tokens);
            pred_prompt += res.prompt_tokens;
            over += q->predicted > res.cached_tokens;
        }
    }
    qsort(ttft, (size_t)nt, sizeof(double), rkv_cmp_double);
    qsort(tpot, (size_t)nt, sizeof(double), rkv_cmp_double);
    double span = t_end > 0 ? t_end : 1e-9;
    double hit = prompt ? (double)cached / (double)prompt : 0;
    FILE *f = d->out;
    fprintf(f, "{\"type\":\"summary\",\"replicas\":%d,\"router\":\"%s\",\"cache\":\"%s\",\"requests\":%lld,"
            "\"errors\":%lld,\"duration\":%.6f,\"requests_per_s\":%.6f,\"output_tokens_per_s\":%.6f,"
            "\"prompt_tokens\":%lld,\"cached_tokens\":%lld,\"hit_rate\":%.6f,\"ttft_p50\":%.6f,"
            "\"ttft_p99\":%.6f,\"per_replica_requests\":[",
            rc->replicas, router_names[rc->router],
            rc->engine->cache_cfg.kind ? rc->engine->cache_cfg.kind : "radix", (long long)d->n,
            (long long)errors, span, (double)(d->n - errors) / span, (double)outputs / span,
            (long long)prompt, (long long)cached, hit, ttft ? rkv_percentile(ttft, nt, 50) : 0,
            ttft ? rkv_percentile(ttft, nt, 99) : 0);
    for (int32_t i = 0; i < rc->replicas; i++) fprintf(f, i ? ",%lld" : "%lld", (long long)d->load[i].routed);
    fputs("],\"per_replica_hit_rate\":[", f);
    for (int32_t i = 0; i < rc->replicas; i++) {
        engine_stats s;
        engine_get_stats(d->r[i].e, &s);
        fprintf(f, i ? ",%.6f" : "%.6f", s.prompt_tokens ? (double)s.cached_tokens / (double)s.prompt_tokens : 0);
    }
    fputc(']', f);
    /* Only when asked, so that runs without SLOs print what they always did. */
    if (slo) slo_print(f, rc, tpot, nt, met, d->n, span);
    if (npred)
        fprintf(f, ",\"predicted_requests\":%lld,\"router_abs_error\":%.6f,\"router_overestimates\":%.6f",
                (long long)npred, pred_prompt > 0 ? abs_err / pred_prompt : 0, (double)over / (double)npred);
    /* Every modelled number names the profile that made it (replicas share one). */
    const sim_profile *sp = backend_sim_profile(engine_backend(d->r[0].e));
    if (sp) {
        fputs(",\"sim_profile\":", f);
        rkv_json_string(f, sp->id); /* a profile file's id is the user's text */
        fprintf(f, ",\"sim_profile_hash\":\"%s\"", sp->hash);
    }
    billing_prices def;
    billing_prices_default(&def);
    billing b;
    billing_compute(rc->prices ? rc->prices : &def, prompt, cached, &b);
    billing_print_json(f, rc->prices ? rc->prices : &def, &b);
    tiers_print(d, f);
    cache_sizes sz;
    cache_get_sizes(engine_cache(d->r[0].e), &sz);
    fprintf(f, ",\"pinned_tokens\":%lld", (long long)sz.pinned_tokens); /* in every replica */
    if (d->interrupted) fputs(",\"interrupted\":true", f);
    fputs("}\n", f);
    fprintf(stderr, "  replicas        %d, router %s\n  requests        %lld (%lld errors) in %.3f s\n"
            "  hit rate        %.1f %%, TTFT p50 %.2f ms, p99 %.2f ms\n", rc->replicas,
            router_names[rc->router], (long long)d->n, (long long)errors, span, 100 * hit,
            ttft ? 1e3 * rkv_percentile(ttft, nt, 50) : 0, ttft ? 1e3 * rkv_percentile(ttft, nt, 99) : 0);
    if (npred)
        fprintf(stderr, "  router error    %.1f %% of prompt tokens mispredicted, %.1f %% of requests over\n",
                pred_prompt > 0 ? 100 * abs_err / pred_prompt : 0, 100.0 * (double)over / (double)npred);
    free(ttft);
    return RKV_OK;
}

/* Replica i: its engine (reporting to on_finish through fc) and its pins. */
static rkv_status replica_open(driver *d, int32_t i, fin_ctx *fc, char *err, size_t errlen)
{
    const replicas_config *rc = d->rc;
    replica *rp = &d->r[i];
    rkv_status st = engine_create(&d->ec, &rp->e, err, errlen);
    if (st) return st;
    *fc = (fin_ctx){d, i};
    engine_on_finish(rp->e, on_finish, fc);
    cache_pins_init(&rp->pins);
    if (rc->pin) {
        pin_file_stats ps;
        backend *pb = engine_backend(rp->e);
        char why[400] = "";
        if ((st = pin_file_apply(engine_cache(rp->e), pb, rc->pin, pb->vocab_size, &rp->pins, &ps,
                                 why, sizeof why))) {
            snprintf(err, errlen, "--pin %s", why[0] ? why : rkv_status_str(st));
            return st;
        }
    }
    return RKV_OK;
}

/* The router over the open replicas: cache-aware trees of the replicas' KV
 * tokens unless --router-tokens says otherwise. */
static rkv_status router_open(driver *d, char *err, size_t errlen)
{
    const replicas_config *rc = d->rc;
    backend *be = engine_backend(d->r[0].e);
    int32_t n = d->np ? d->np : rc->replicas; /* the engines a request arrives at */
    int64_t *pages = malloc(sizeof(int64_t) * (size_t)n);
    if (!pages) return RKV_ENOMEM;
    for (int32_t i = 0; i < n; i++) {
        backend *bi = engine_backend(d->r[i].e);
        pages[i] = rc->approx_tokens > 0 ? (rc->approx_tokens + bi->page_size - 1) / bi->page_size
                                         : bi->num_pages;
    }
    router_config cfg = {
        .kind = rc->router, .replicas = n, .balance_threshold = rc->balance_threshold,
        .cache_threshold = rc->cache_threshold, .page_size = be->page_size, .approx_pages = pages,
    };
    rkv_status st = router_create(&cfg, &d->rt, err, errlen);
    free(pages);
    if (st || !d->np) return st;
    int32_t nd = d->engines - d->np;
    if (!(pages = malloc(sizeof(int64_t) * (size_t)nd))) return RKV_ENOMEM;
    for (int32_t i = 0; i < nd; i++) {
        backend *bi = engine_backend(d->r[d->np + i].e);
        pages[i] = rc->approx_tokens > 0 ? (rc->approx_tokens + bi->page_size - 1) / bi->page_size
                                         : bi->num_pages;
    }
    router_config dcfg = {.kind = rc->decode_router, .replicas = nd,
                          .balance_threshold = rc->balance_threshold,
                          .cache_threshold = rc->cache_threshold, .page_size = be->page_size,
                          .approx_pages = pages};
    st = router_create(&dcfg, &d->drt, err, errlen);
    free(pages);
    return st;
}

/* Every request in arrival order (order[]): the clock advances to its
 * arrival, the router picks a replica, the replica's engine takes it. */
static rkv_status dispatch(driver *d, const int64_t *order, char *err, size_t errlen)
{
    rkv_status st = RKV_OK;
    for (int64_t j = 0; j < d->n && st == RKV_OK; j++) {
        rreq *q = &d->reqs[order[j]];
        if ((st = advance(d, q->er.arrival, err, errlen)) || d->interrupted) break;
        if (d->np) {
            /* Disaggregated: a request the decode engines can never hold
             * (prompt and outputs beyond the context or the pool) ends
             * before its prefill, as a colocated engine ends it at once;
             * a bad field fails the run there as engine_add does. */
            char why[256] = "";
            st = engine_check_request(d->r[d->np].e, &q->er, why, sizeof why);
            if (st == RKV_ENOSPC) {
                q->replica = -1;
                q->prompt_tokens = q->er.n_tokens;
                disagg_line(d, q, why, NULL, 0, 0);
                st = RKV_OK;
                continue;
            }
            if (st) {
                snprintf(err, errlen, "%s: request %s: %s", d->rc->trace, q->id_json,
                         why[0] ? why : rkv_status_str(st));
                break;
            }
        }
        int32_t i;
        if ((st = router_route(d->rt, q->er.tokens, q->er.n_tokens, q->er.ns, j, d->load, &i, &q->predicted,
                               err, errlen)))
            break;
        replica *rp = &d->r[i];
        router_load *ld = &d->load[i];
        /* Disaggregated: the prefill engine computes the prompt and the
         * first token only. */
        engine_request er = q->er;
        if (d->np) er.max_tokens = 1;
        if ((st = rkv_grow((void **)&rp->req_of, &rp->req_cap, ld->routed + 1,
                           sizeof *rp->req_of))) {
            snprintf(err, errlen, "replicas: out of host memory");
            break;
        }
        rp->req_of[ld->routed] = order[j];
        q->replica = i;
        ld->outstanding++;
        ld->routed++;
        char why[256] = "";
        if ((st = engine_add(rp->e, &er, &q->eid, why, sizeof why))) {
            snprintf(err, errlen, "%s: request %s: %s", d->rc->trace, q->id_json,
                     why[0] ? why : rkv_status_str(st));
            break;
        }
        if ((st = mark_busy(d, i))) {
            snprintf(err, errlen, "replicas: out of host memory");
            break;
        }
    }
    if (st == RKV_OK && !d->interrupted) st = advance(d, -1, err, errlen);
    return st;
}

static void driver_free(driver *d)
{
    for (int64_t k = 0; k < d->n; k++) {
        rreq *q = &d->reqs[k];
        free(q->dtokens);
        free(q->kv);
    }
    for (int32_t i = 0; d->r && i < d->engines; i++) {
        replica *rp = &d->r[i];
        if (rp->e && d->rc->steps) {
            engine_stats es;
            engine_get_stats(rp->e, &es);
            d->rc->steps->steps += es.steps;
            d->rc->steps->moved += es.steps_moved;
            d->rc->steps->calls += es.step_calls;
        }
        if (rp->e) cache_pins_release(engine_cache(rp->e), &rp->pins);
        cache_pins_free(&rp->pins);
        engine_destroy(rp->e);
        free(rp->req_of);
        free(rp->wait);
    }
    for (int64_t k = 0; k < d->n; k++) {
        free((void *)d->reqs[k].er.tokens);
        free(d->reqs[k].id_json);
    }
    router_destroy(d->rt);
    router_destroy(d->drt);
    free(d->reqs);
    free(d->load);
    free(d->r);
    free(d->post);
    free(d->pending.a);
    free(d->busy.a);
    free(d->busy.pos);
    free(d->pbusy.a);
    free(d->pbusy.pos);
}

/* Disaggregated: what the engines must be able to do, and the link. */
static rkv_status disagg_open(driver *d, char *err, size_t errlen)
{
    const replicas_config *rc = d->rc;
    engine *e = d->r[0].e;
    backend *b = engine_backend(e);
    if (!(b->ops->caps & BACKEND_CAP_MODELLED_TIME) || !b->ops->read_page || !b->ops->write_page ||
        !b->ops->page_bytes) {
        snprintf(err, errlen, "--prefill/--decode: the handoff runs on the sim clock; use "
                 "--backend sim (not %s)", b->ops->name);
        return RKV_ENOTSUP;
    }
    if (!cache_can(engine_cache(e), CACHE_CAP_REUSE)) {
        snprintf(err, errlen, "--prefill/--decode: --cache %s keeps no pages for the prefill engine "
                 "to hand over", rc->engine->cache_cfg.kind);
        return RKV_ENOTSUP;
    }
    rkv_status st = kv_link_parse(rc->link, &d->link, err, errlen);
    if (st) {
        char why[300];
        snprintf(why, sizeof why, "%s", err);
        snprintf(err, errlen, "--link: %s", why);
        return st;
    }
    model_config m;
    if ((st = model_config_load(d->ec.backend_cfg.model, &m, err, errlen))) return st;
    d->kv_page_bytes = (double)model_config_kv_bytes_per_token(&m, 2) * b->page_size;
    return b->ops->page_bytes(b, &d->page_bytes);
}

rkv_status replicas_run(const replicas_config *rc, FILE *out, bool *interrupted, char *err,
                        size_t errlen)
{
    *interrupted = false;
    bool disagg = rc->prefill > 0 || rc->decode > 0;
    if (disagg ? rc->prefill < 1 || rc->decode < 1 : rc->replicas < 1) {
        snprintf(err, errlen, disagg ? "--prefill and --decode go together, each >= 1"
                                     : "--replicas must be >= 1");
        return RKV_EINVAL;
    }
    driver d = {.rc = rc, .out = out, .ec = *rc->engine};
    d.engines = disagg ? rc->prefill + rc->decode : rc->replicas;
    d.np = disagg ? rc->prefill : 0;
    if (disagg) d.ec.offline = false;
    /* No summary here reports the scheduler's CPU time: on a fixed clock the
     * engines need not read the CPU clock for it. */
    d.ec.unmeasured_sched = true;
    rkv_status st = RKV_OK;
    d.r = calloc((size_t)d.engines, sizeof *d.r);
    d.load = calloc((size_t)d.engines, sizeof *d.load);
    fin_ctx *fc = calloc((size_t)d.engines, sizeof *fc);
    d.busy.pos = malloc(sizeof(int32_t) * (size_t)d.engines);
    d.pbusy.pos = malloc(sizeof(int32_t) * (size_t)d.engines);
    int64_t *order = NULL;
    for (int32_t i = 0; d.busy.pos && d.pbusy.pos && i < d.engines; i++)
        d.busy.pos[i] = d.pbusy.pos[i] = -1;
    if (!d.r || !d.load || !fc || !d.busy.pos || !d.pbusy.pos) {
        st = RKV_ENOMEM;
        goto done;
    }
    for (int32_t i = 0; i < d.engines && st == RKV_OK; i++)
        st = replica_open(&d, i, &fc[i], err, errlen);
    if (st || (disagg && (st = disagg_open(&d, err, errlen))) || (st = router_open(&d, err, errlen)))
        goto done;
    if (disagg)
        fprintf(stderr, "radixkv run: %d prefill + %d decode engines of %s; router %s, link %s\n",
                rc->prefill, rc->decode, engine_backend(d.r[0].e)->description,
                router_names[rc->router], d.link.name);
    else
        fprintf(stderr, "radixkv run: %d replicas of %s; router %s\n", rc->replicas,
                engine_backend(d.r[0].e)->description, router_names[rc->router]);
    if ((st = trace_engine_load(rc->trace, engine_backend(d.r[0].e)->vocab_size,
                                rc->default_max_tokens, rc->namespace_name, keep_request, &d,
                                err, errlen)))
        goto done;
    for (int64_t k = 0; k < d.n; k++) d.reqs[k].decode = -1;
    order = malloc(sizeof(int64_t) * (size_t)(d.n + 1));
    if (!order) {
        st = RKV_ENOMEM;
        goto done;
    }
    for (int64_t k = 0; k < d.n; k++) order[k] = k;
    qsort_r(order, (size_t)d.n, sizeof *order, cmp_arrival, d.reqs);
    progress_start(&d.prog, "run", "requests", d.n, rc->progress);
    st = dispatch(&d, order, err, errlen);
    progress_finish(&d.prog);
    for (int32_t i = 0; st == RKV_OK && !d.interrupted && i < d.engines; i++) {
        char why[400] = "";
        if ((st = engine_check(d.r[i].e, why, sizeof why)))
            snprintf(err, errlen, "%s %d: %s", disagg ? (i < d.np ? "prefill engine" : "decode engine")
                     : "replica", disagg && i >= d.np ? i - d.np : i, why[0] ? why : rkv_status_str(st));
    }
    if (st == RKV_OK) st = disagg ? disagg_summary(&d, err, errlen) : summary(&d, err, errlen);
    *interrupted = d.interrupted;
done:
    if (st == RKV_ENOMEM && !err[0]) snprintf(err, errlen, "replicas: out of host memory");
    driver_free(&d);
    free(fc);
    free(order);
    return st;
}
