/* scheduler.c - see scheduler.h. */
#include "scheduler.h"

#include "cache_client.h"
#include "rkv_core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "rkv_core.h"

#define SCHED_DEFAULT_QUEUE_LIMIT 128

/* The registry, in sched_policy order (the first is the default). */
const char *const sched_policy_names[] = {"fcfs", "lpm", "dfs-weight", "random", NULL};

rkv_status sched_policy_parse(const char *name, sched_policy *out)
{
    int i = name ? rkv_name_index(sched_policy_names, name) : 0; /* NULL: the default */
    if (i < 0) return RKV_EINVAL;
    *out = (sched_policy)i;
    return RKV_OK;
}

const char *sched_policy_name(sched_policy p)
{
    return (unsigned)p < sizeof sched_policy_names / sizeof *sched_policy_names - 1
        ? sched_policy_names[p] : "?";
}

rkv_status scheduler_init(scheduler *s, const scheduler_config *cfg, cache *c, page_pool *pool)
{
    memset(s, 0, sizeof *s);
    if (cfg->max_num_batched_tokens < 1 || cfg->max_running < 1) return RKV_EINVAL;
    s->cfg = *cfg;
    if (s->cfg.lpm_queue_limit <= 0) s->cfg.lpm_queue_limit = SCHED_DEFAULT_QUEUE_LIMIT;
    s->cache = c;
    s->pool = pool;
    s->rng = cfg->seed ^ 0x5eedull;
    return RKV_OK;
}

/* Give back everything r holds: its own pages to the pool, its match unlocked. */
static rkv_status req_release(scheduler *s, sched_req *r)
{
    rkv_status st = cache_client_release(s->cache, r->locked ? &r->match : NULL,
                                         r->pages + r->num_cache_pages,
                                         r->num_pages - r->num_cache_pages);
    r->locked = false;
    r->match.len = r->match.num_pages = 0;
    r->match.handle = NULL;
    r->num_pages = r->num_cache_pages = 0;
    r->kv_sched = r->kv_done = 0;
    return st;
}

void scheduler_destroy(scheduler *s)
{
    for (int32_t i = 0; i < s->num_running; i++) req_release(s, s->running[i]);
    free(s->waiting);
    free(s->running);
    free(s->finished);
    free(s->order);
    free(s->keys);
    memset(s, 0, sizeof *s);
}

void sched_req_free(sched_req *r)
{
    free(r->tokens);
    free(r->out_ids);
    free(r->pages);
    free(r->error);
    cache_seq_free(&r->match);
}

rkv_status scheduler_add(scheduler *s, sched_req *r)
{
    rkv_status st = rkv_grow32((void **)&s->waiting, &s->waiting_cap, s->num_waiting + 1, sizeof(void *));
    if (st) return st;
    s->waiting[s->num_waiting++] = r;
    r->state = REQ_WAITING;
    return RKV_OK;
}

static rkv_status push_finished(scheduler *s, sched_req *r)
{
    rkv_status st = rkv_grow32((void **)&s->finished, &s->finished_cap, s->num_finished + 1,
                         sizeof(void *));
    if (st) return st;
    s->finished[s->num_finished++] = r;
    r->state = REQ_FINISHED;
    return RKV_OK;
}

rkv_status scheduler_fail(scheduler *s, sched_req *r, const char *msg)
{
    free(r->error);
    r->error = strdup(msg);
    if (!r->error) return RKV_ENOMEM;
    return push_finished(s, r);
}

/* ---- policies ----------------------------------------------------------- */

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* DFS over the prefix tree of the waiting prompts, without building it: idx
 * holds queue indices whose tokens agree on [0, depth). At each node, the
 * requests ending there come first, then the children, heaviest (most
 * requests) first, ties by the earliest queue position. A chain with one child
 * only advances depth in the loop; recursion happens at branch points only. */
static void dfs_order(sched_req **w, int32_t *idx, int32_t n, int32_t depth, int32_t *out,
                      int32_t *nout, int64_t *tmp)
{
    while (n > 0) {
        /* 1: requests that end at this depth. */
        int32_t m = 0;
        for (int32_t i = 0; i < n; i++) {
            if (w[idx[i]]->n_tokens <= depth) out[(*nout)++] = idx[i];
            else idx[m++] = idx[i];
        }
        n = m;
        if (n == 0) return;
        /* 2: a single child: go one token deeper. */
        int32_t t0 = w[idx[0]]->tokens[depth];
        bool one = true;
        for (int32_t i = 1; i < n && one; i++) one = w[idx[i]]->tokens[depth] == t0;
        if (one) {
            depth++;
            continue;
        }
        /* 3: group by token, order groups by size then first queue index. */
        for (int32_t i = 0; i < n; i++)
            tmp[i] = ((int64_t)(uint32_t)w[idx[i]]->tokens[depth] << 32) | (uint32_t)idx[i];
        qsort(tmp, (size_t)n, sizeof *tmp, cmp_i64);
        int32_t ngroups = 0;
        /* group g: start, size, min index; reuse tmp's tail as three int32 arrays is
         * awkward, so allocate small arrays. */
        int32_t *gs = malloc(sizeof(int32_t) * 3 * (size_t)n);
        if (!gs) { /* out of memory: plain queue order for the rest */
            for (int32_t i = 0; i < n; i++) out[(*nout)++] = idx[i];
            return;
        }
        for (int32_t i = 0; i < n; i++) idx[i] = (int32_t)(tmp[i] & 0xffffffff);
        for (int32_t i = 0; i < n;) {
            int32_t j = i;
            while (j < n && (tmp[j] >> 32) == (tmp[i] >> 32)) j++;
            gs[3 * ngroups] = i;
            gs[3 * ngroups + 1] = j - i;
            gs[3 * ngroups + 2] = idx[i]; /* sorted by index within the group */
            ngroups++;
            i = j;
        }
        /* insertion sort of groups: size desc, first index asc */
        for (int32_t a = 1; a < ngroups; a++) {
            int32_t g0 = gs[3 * a], g1 = gs[3 * a + 1], g2 = gs[3 * a + 2];
            int32_t b = a - 1;
            while (b >= 0 && (gs[3 * b + 1] < g1 || (gs[3 * b + 1] == g1 && gs[3 * b + 2] > g2))) {
                memcpy(gs + 3 * (b + 1), gs + 3 * b, sizeof(int32_t) * 3);
                b--;
            }
            gs[3 * (b + 1)] = g0;
            gs[3 * (b + 1) + 1] = g1;
            gs[3 * (b + 1) + 2] = g2;
        }
        for (int32_t g = 0; g < ngroups; g++)
            dfs_order(w, idx + gs[3 * g], gs[3 * g + 1], depth + 1, out, nout, tmp);
        free(gs);
        return;
    }
}

rkv_status scheduler_policy_order(scheduler *s, int32_t *out)
{
    int32_t n = s->num_waiting;
    for (int32_t i = 0; i < n; i++) out[i] = i;
    if (n <= 1) return RKV_OK;
    sched_policy p = s->cfg.policy;
    if ((p == SCHED_LPM || p == SCHED_DFS_WEIGHT) && n > s->cfg.lpm_queue_limit) p = SCHED_FCFS;
    if (p == SCHED_FCFS) return RKV_OK;
    if (p == SCHED_RANDOM) {
        for (int32_t i = n - 1; i > 0; i--) {
            int32_t j = (int32_t)(rkv_splitmix64_next(&s->rng) % (uint64_t)(i + 1));
            int32_t t = out[i];
            out[i] = out[j];
            out[j] = t;
        }
        return RKV_OK;
    }
    int64_t *tmp = malloc(sizeof(int64_t) * (size_t)n);
    if (!tmp) return RKV_ENOMEM;
    if (p == SCHED_LPM) {
        /* key: matched length desc, then queue index asc */
        cache_seq m;
        cache_seq_init(&m, 0, 0);
        for (int32_t i = 0; i < n; i++) {
            sched_req *r = s->waiting[i];
            m.ns = r->ns;
            m.priority = r->priority;
            rkv_status st = cache_match_prefix(s->cache, &m, r->tokens, r->n_tokens - 1);
            if (st) {
                cache_seq_free(&m);
                free(tmp);
                return st;
            }
            tmp[i] = ((int64_t)(INT32_MAX - m.len) << 32) | (uint32_t)i;
        }
        cache_seq_free(&m);
        qsort(tmp, (size_t)n, sizeof *tmp, cmp_i64);
        for (int32_t i = 0; i < n; i++) out[i] = (int32_t)(tmp[i] & 0xffffffff);
    } else {
        int32_t *idx = malloc(sizeof(int32_t) * (size_t)n);
        if (!idx) {
            free(tmp);
            return RKV_ENOMEM;
        }
        for (int32_t i = 0; i < n; i++) idx[i] = i;
        int32_t nout = 0;
        dfs_order(s->waiting, idx, n, 0, out, &nout, tmp);
        free(idx);
    }
    free(tmp);
    return RKV_OK;
}

/* ---- pages -------------------------------------------------------------- */

static rkv_status ensure_page_cap(sched_req *r, int32_t n)
{
    return rkv_grow32((void **)&r->pages, &r->page_cap, n, sizeof(int32_t));
}

static void running_remove_at(scheduler *s, int32_t i)
{
    memmove(s->running + i, s->running + i + 1, sizeof(void *) * (size_t)(s->num_running - i - 1));
    s->num_running--;
}

/* Back to the front of the waiting queue; K/V recomputed on readmission. */
static rkv_status preempt(scheduler *s, int32_t i)
{
    sched_req *r = s->running[i];
    rkv_status st = req_release(s, r);
    running_remove_at(s, i);
    rkv_status st2 = rkv_grow32((void **)&s->waiting, &s->waiting_cap, s->num_waiting + 1, sizeof(void *));
    if (st2) return st2;
    memmove(s->waiting + 1, s->waiting, sizeof(void *) * (size_t)s->num_waiting);
    s->waiting[0] = r;
    s->num_waiting++;
    r->state = REQ_WAITING;
    r->num_preemptions++;
    s->num_preemptions++;
    return st;
}

static rkv_status plan_push(sched_plan *plan, sched_req *r, int32_t start, int32_t rows)
{
    rkv_status st = rkv_grow32((void **)&plan->e, &plan->cap, plan->n + 1, sizeof(sched_entry));
    if (st) return st;
    sched_entry *e = &plan->e[plan->n++];
    e->r = r;
    e->start = start;
    e->rows = rows;
    e->sample = false;
    e->sample_index = -1;
    r->kv_sched = start + rows;
    if (r->kv_sched == r->n_tokens) {
        /* The last row samples: reserve the slot of the output being sampled. */
        st = rkv_grow32((void **)&r->tokens, &r->cap, r->n_tokens + 1, sizeof(int32_t));
        if (st) return st;
        r->tokens[r->n_tokens++] = -1;
        e->sample = true;
        e->sample_index = r->out_planned++;
    }
    plan->num_tokens += rows;
    if (rows > 1) plan->num_prefill_rows += rows;
    return RKV_OK;
}

void sched_plan_free(sched_plan *plan)
{
    free(plan->e);
    memset(plan, 0, sizeof *plan);
}

void sched_plan_compact(sched_plan *plan)
{
    int32_t m = 0;
    plan->num_tokens = 0;
    for (int32_t i = 0; i < plan->n; i++) {
        if (plan->e[i].r->state != REQ_RUNNING) continue;
        plan->e[m++] = plan->e[i];
        plan->num_tokens += plan->e[i].rows;
    }
    plan->n = m;
}

/* ---- one step ------------------------------------------------------------ */

/* In-batch prefix sharing (SGLang's in-batch prefix caching check): would r
 * compute at least dedup_tokens tokens beyond its cached prefix that a request
 * admitted in this same step computes too? Then r waits one step: the other's
 * prefill is inserted into the cache at the end of this step, and r finds it
 * there. Cheap: the window just past r's match is compared first. */
static bool shares_with_admitted(const scheduler *s, const sched_plan *plan, const sched_req *r,
                                 int32_t matched)
{
    int32_t w = s->cfg.dedup_tokens;
    if (w <= 0 || plan->num_admitted == 0 || r->n_tokens - 1 < matched + w) return false;
    for (int32_t i = plan->n - plan->num_admitted; i < plan->n; i++) {
        const sched_req *a = plan->e[i].r;
        if (a->ns != r->ns || a->n_tokens < matched + w) continue;
        if (memcmp(a->tokens + matched, r->tokens + matched, sizeof(int32_t) * (size_t)w)) continue;
        if (!memcmp(a->tokens, r->tokens, sizeof(int32_t) * (size_t)matched)) return true;
    }
    return false;
}

/* 2: pages for running request i's next rows; on a shortage preempt the
 * newest running requests, then i itself. *stop: no more planning this step
 * (a shortage while planning in flight, or i preempted). */
static rkv_status reserve_or_preempt(scheduler *s, int32_t i, int32_t need, bool allow_preempt,
                                     int32_t *decodes_behind, bool *stop)
{
    sched_req *r = s->running[i];
    rkv_status st = ensure_page_cap(r, r->num_pages + need);
    if (st) return st;
    st = cache_client_reserve(s->cache, need, r->pages + r->num_pages, NULL);
    if (st == RKV_ENOSPC && !allow_preempt) {
        *stop = true;
        return RKV_OK;
    }
    while (st == RKV_ENOSPC && s->num_running - 1 > i) {
        sched_req *v = s->running[s->num_running - 1];
        *decodes_behind -= v->n_tokens - v->kv_sched == 1;
        if ((st = preempt(s, s->num_running - 1))) return st;
        st = cache_client_reserve(s->cache, need, r->pages + r->num_pages, NULL);
    }
    if (st == RKV_ENOSPC) {
        bool alone = s->num_running == 1;
        if ((st = preempt(s, i))) return st;
        if (alone) {
            /* Nothing else holds pages: it can never fit. add() rejects
             * such requests, so this is a safety net, not a path. */
            memmove(s->waiting, s->waiting + 1, sizeof(void *) * (size_t)(s->num_waiting - 1));
            s->num_waiting--;
            if ((st = scheduler_fail(s, r, "request does not fit the page pool"))) return st;
        }
        *stop = true;
        return RKV_OK;
    }
    if (st) return st;
    r->num_pages += need;
    return RKV_OK;
}

/* 1: running requests, oldest first, each its next chunk under the budget;
 * a prefill chunk leaves one row for each decode behind it. */
static rkv_status schedule_running(scheduler *s, sched_plan *plan, bool allow_preempt,
                                   int32_t *budget, bool *stop)
{
    rkv_status st;
    int32_t decodes_behind = 0;
    for (int32_t i = 0; i < s->num_running; i++)
        decodes_behind += s->running[i]->n_tokens - s->running[i]->kv_sched == 1;
    for (int32_t i = 0; i < s->num_running && *budget > 0;) {
        sched_req *r = s->running[i];
        int32_t remaining = r->n_tokens - r->kv_sched;
        if (remaining == 1) decodes_behind--;
        /* Finishing in flight (overlap): its last output is being sampled. */
        if (remaining <= 0 || r->out_planned >= r->max_tokens) {
            i++;
            continue;
        }
        int32_t rows = remaining < *budget ? remaining : *budget;
        if (remaining > 1 && *budget - decodes_behind >= 1 && rows > *budget - decodes_behind)
            rows = *budget - decodes_behind;
        int32_t need = page_pool_pages_for(s->pool, r->kv_sched + rows) - r->num_pages;
        if (need > 0) {
            if ((st = reserve_or_preempt(s, i, need, allow_preempt, &decodes_behind, stop)))
                return st;
            if (*stop) return RKV_OK;
        }
        if ((st = plan_push(plan, r, r->kv_sched, rows))) return st;
        *budget -= rows;
        i++;
    }
    return RKV_OK;
}

/* Admit waiting request r: match and lock its cached prefix, pages for its
 * first chunk. *admitted false with RKV_OK: it waits (in-batch sharing, or
 * *full: no pages even after eviction, which ends admission this step). */
static rkv_status admit(scheduler *s, sched_plan *plan, sched_req *r, int32_t budget,
                        int32_t *rows_out, bool *admitted, bool *full, char *err, size_t errlen)
{
    *admitted = *full = false;
    rkv_status st = cache_seq_reset(&r->match, r->ns, r->priority);
    if (st == RKV_OK)
        st = cache_client_match(s->cache, &r->match, r->tokens, r->no_match ? 0 : r->n_tokens - 1);
    if (st) {
        snprintf(err, errlen, "scheduler: cache match/lock failed: %s", rkv_status_str(st));
        return st;
    }
    r->locked = true;
    int32_t matched = r->match.len;
    if (shares_with_admitted(s, plan, r, matched)) {
        cache_client_release(s->cache, &r->match, NULL, 0);
        r->locked = false;
        return RKV_OK;
    }
    int32_t rows = r->n_tokens - matched;
    if (rows > budget) rows = budget;
    int32_t total = page_pool_pages_for(s->pool, matched + rows);
    if ((st = ensure_page_cap(r, total))) return st;
    int32_t need = total - r->match.num_pages;
    st = cache_client_reserve(s->cache, need, r->pages + r->match.num_pages, NULL);
    if (st == RKV_ENOSPC) {
        cache_client_release(s->cache, &r->match, NULL, 0);
        r->locked = false;
        *full = true;
        return RKV_OK;
    }
    if (st) return st;
    if (r->match.num_pages > 0)
        memcpy(r->pages, r->match.pages, sizeof(int32_t) * (size_t)r->match.num_pages);
    r->num_cache_pages = r->match.num_pages;
    r->num_pages = total;
    r->kv_sched = r->kv_done = matched;
    if (!r->admitted_once) {
        r->cached_tokens = matched;
        r->admitted_once = true;
    }
    r->admit_seq = s->admit_counter++;
    r->state = REQ_RUNNING;
    if ((st = rkv_grow32((void **)&s->running, &s->running_cap, s->num_running + 1,
                         sizeof(void *))))
        return st;
    s->running[s->num_running++] = r;
    *rows_out = rows;
    *admitted = true;
    return plan_push(plan, r, matched, rows);
}

/* 3: admissions in policy order while budget, running slots and pages last. */
static rkv_status schedule_waiting(scheduler *s, sched_plan *plan, int32_t *budget, char *err,
                                   size_t errlen)
{
    int32_t n = s->num_waiting;
    rkv_status st = rkv_grow32((void **)&s->order, &s->scratch_cap, n, sizeof(int32_t));
    if (st || (st = scheduler_policy_order(s, s->order))) return st;
    bool *taken = calloc((size_t)n, 1);
    if (!taken) return RKV_ENOMEM;
    for (int32_t k = 0; k < n; k++) {
        if (*budget <= 0 || s->num_running >= s->cfg.max_running) break;
        int32_t rows = 0;
        bool admitted = false, full = false;
        st = admit(s, plan, s->waiting[s->order[k]], *budget, &rows, &admitted, &full, err,
                   errlen);
        if (st || full) break;
        if (!admitted) continue;
        taken[s->order[k]] = true;
        plan->num_admitted++;
        *budget -= rows;
    }
    if (st == RKV_OK) {
        int32_t m = 0;
        for (int32_t i = 0; i < n; i++)
            if (!taken[i]) s->waiting[m++] = s->waiting[i];
        s->num_waiting = m;
    }
    free(taken);
    return st;
}

rkv_status scheduler_schedule(scheduler *s, sched_plan *plan, bool allow_preempt, char *err,
                              size_t errlen)
{
    plan->n = plan->num_tokens = plan->num_prefill_rows = plan->num_admitted = 0;
    int32_t budget = s->cfg.max_num_batched_tokens;
    bool stop = false;
    rkv_status st = schedule_running(s, plan, allow_preempt, &budget, &stop);
    if (st) return st;
    if (!stop && budget > 0 && s->num_waiting > 0 && s->num_running < s->cfg.max_running
        && (st = schedule_waiting(s, plan, &budget, err, errlen)))
        return st;
    s->num_steps++;
    return RKV_OK;
}

/* ---- commit -------------------------------------------------------------- */

/* Insert r's computed full pages; the cache then owns them and r holds them
 * through a fresh locked match. Duplicate pages (another request inserted the
 * same tokens first) are freed. final: also give back everything else. */
static rkv_status req_insert(scheduler *s, sched_req *r, bool final, char *err, size_t errlen)
{
    const int32_t P = s->pool->page_size;
    int32_t nfull = r->kv_done / P;
    rkv_status st;
    if (nfull > r->num_cache_pages) {
        /* Whatever the cache did not adopt goes back to the pool: duplicates
         * of what was cached meanwhile, or every page for kinds that keep
         * nothing (none). */
        st = cache_client_commit(s->cache, &r->match, r->tokens, nfull * P, r->pages,
                                 r->num_cache_pages, nfull, NULL);
        if (st) {
            snprintf(err, errlen, "scheduler: cache insert of request %lld failed: %s",
                     (long long)r->id, rkv_status_str(st));
            return st;
        }
        if (!final) {
            cache_seq m2;
            bool named = false;
            cache_seq_init(&m2, r->ns, r->priority);
            st = cache_client_match(s->cache, &m2, r->tokens, nfull * P);
            if (st == RKV_OK && m2.len != nfull * P) {
                snprintf(err, errlen,
                         "scheduler: request %lld: %d tokens just inserted, match finds %d",
                         (long long)r->id, nfull * P, m2.len);
                cache_unlock(s->cache, &m2);
                st = RKV_ECORRUPT;
                named = true;
            }
            if (st == RKV_OK && r->locked) st = cache_unlock(s->cache, &r->match);
            if (st) {
                if (!named) /* a failed match or unlock: name it */
                    snprintf(err, errlen, "scheduler: re-matching request %lld after its insert failed: %s",
                             (long long)r->id, rkv_status_str(st));
                cache_seq_free(&m2);
                return st;
            }
            cache_seq_free(&r->match);
            r->match = m2;
            r->locked = true;
            memcpy(r->pages, m2.pages, sizeof(int32_t) * (size_t)nfull);
        }
        r->num_cache_pages = nfull;
    }
    if (final) {
        st = req_release(s, r);
        if (st) {
            snprintf(err, errlen, "scheduler: releasing request %lld failed: %s",
                     (long long)r->id, rkv_status_str(st));
            return st;
        }
    }
    return RKV_OK;
}

rkv_status scheduler_commit(scheduler *s, const sched_plan *plan, const int32_t *tokens,
                            char *err, size_t errlen)
{
    rkv_status st;
    bool any_finished = false;
    for (int32_t i = 0; i < plan->n; i++) {
        const sched_entry *e = &plan->e[i];
        sched_req *r = e->r;
        if (r->state != REQ_RUNNING) continue;
        if (e->start + e->rows > r->kv_done) r->kv_done = e->start + e->rows;
        bool finished = false;
        if (e->sample) {
            int32_t t = tokens[i];
            r->tokens[r->prompt_len + e->sample_index] = t;
            r->out_ids[e->sample_index] = t;
            r->num_out = e->sample_index + 1;
            finished = t == r->stop_token || r->num_out >= r->max_tokens;
        }
        if (finished) {
            /* Outputs planned past this one (overlap) are dropped. */
            r->out_planned = r->num_out;
            if ((st = req_insert(s, r, true, err, errlen))) return st;
            if ((st = push_finished(s, r))) return st;
            any_finished = true;
        } else if (e->rows > 1 && s->cfg.insert_unfinished) {
            if ((st = req_insert(s, r, false, err, errlen))) return st;
        }
    }
    if (any_finished) {
        int32_t m = 0;
        for (int32_t i = 0; i < s->num_running; i++)
            if (s->running[i]->state == REQ_RUNNING) s->running[m++] = s->running[i];
        s->num_running = m;
    }
    return RKV_OK;
}

rkv_status scheduler_check(const scheduler *s, char *err, size_t errlen)
{
    rkv_status st = page_pool_check(s->pool, err, errlen);
    if (st) return st;
    if ((st = cache_check(s->cache, err, errlen))) return st;
    int64_t held = 0;
    for (int32_t i = 0; i < s->num_running; i++)
        held += s->running[i]->num_pages - s->running[i]->num_cache_pages;
    for (int32_t i = 0; i < s->num_waiting; i++) {
        if (s->waiting[i]->num_pages != 0 || s->waiting[i]->locked) {
            snprintf(err, errlen, "scheduler: waiting request %lld holds pages",
                     (long long)s->waiting[i]->id);
            return RKV_ECORRUPT;
        }
    }
    if (held != s->pool->num_inflight) {
        snprintf(err, errlen, "scheduler: running requests hold %lld pages, pool has %d in flight",
                 (long long)held, s->pool->num_inflight);
        return RKV_ECORRUPT;
    }
    return RKV_OK;
}

rkv_status scheduler_cancel(scheduler *s, sched_req *r, const char *msg, char *err,
                            size_t errlen)
{
    sched_req **list = r->state == REQ_WAITING ? s->waiting : s->running;
    int32_t *n = r->state == REQ_WAITING ? &s->num_waiting : &s->num_running;
    if (r->state != REQ_WAITING && r->state != REQ_RUNNING) return RKV_OK;
    int32_t i = 0;
    while (i < *n && list[i] != r) i++;
    if (i == *n) {
        snprintf(err, errlen, "scheduler: request %lld is not in its queue", (long long)r->id);
        return RKV_ECORRUPT;
    }
    if (r->state == REQ_RUNNING) {
        /* Outputs planned past the committed ones (overlap) are dropped. */
        r->out_planned = r->num_out;
        rkv_status st = req_insert(s, r, true, err, errlen);
        if (st) return st;
    }
    memmove(list + i, list + i + 1, sizeof(void *) * (size_t)(*n - i - 1));
    (*n)--;
    return scheduler_fail(s, r, msg);
}
