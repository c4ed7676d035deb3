/* serve_pd.h - `radixkv serve --role prefill|decode`: prefill/decode
 * disaggregation between two servers sharing the remote tier (tier_remote.h),
 * behind a router's PD mode (sglang-router --pd-disaggregation).
 *
 *   router --same request + bootstrap_room R--> prefill server   decode server
 *                                               compute prompt    wait on R
 *                                               (max_tokens 1)    (BLPOP, with
 *                                               insert: full      --pd-timeout)
 *                                               pages SET in the     |
 *                                               tier (flushed)       |
 *                                               RPUSH rkv:NS:pd:R ---+
 *                                                                 engine: match
 *                                                                 loads the pages
 *                                                                 from the tier,
 *                                                                 decodes, streams
 *   router <------------------------------- the decode server's answer
 *
 * The handoff record pushed under rkv:<tier namespace>:pd:<room> is JSON:
 * {"prompt_tokens":N,"tokens":T,"page_size":P,"model":"<tier model id>"}
 * with T = the prompt's full pages the decode side can use (floor((N-1)/P)*P:
 * one token is always computed), or {"error":"why"} when the prefill failed.
 * The decode server admits the request only once the record came, and fails
 * it (500 / an SSE error event, naming the room and why) when: no record
 * within --pd-timeout, the record is an error, its prompt length, page size
 * or model id differs from this server's, or its engine matched fewer than T
 * tokens (a page missing from the tier).
 *
 * A prefill server that dies is noticed without waiting for --pd-timeout:
 * it keeps a liveness key rkv:NS:pd:live:ID (ID: host, pid and start time)
 * with a TTL of a few seconds, refreshed by its pd thread (deleted when it
 * stops), and marks each room it starts, before its engine sees the request:
 * SET rkv:NS:pd:taken:R {"live":ID,"server":"HOST:PORT pid N"}. The decode
 * server looks at the marks of its held rooms every half second; a room whose
 * taker's liveness key is gone and whose record never came fails at once,
 * naming the room and that server. --pd-timeout stays the bound of the whole
 * wait: for a room nobody takes (the router's prefill request was lost), a
 * record lost on the way, a tier the decode side cannot reach.
 *
 * vllm-router --vllm-pd-disaggregation is sequential: it posts the prefill
 * request (max_tokens 1, kv_transfer_params.do_remote_decode true) and, once
 * answered, the decode request with the prefill's answered kv_transfer_params
 * (do_remote_prefill true). The prefill server answers the handoff record
 * there, under "rkv"; the decode server checks it as above and needs no
 * wait: the pages reached the tier before the prefill answered.
 *
 * Threads: one pd thread per server owns the handoff connection to Redis
 * (the engine's tier keeps its own, on the engine thread). The prefill side's
 * HTTP thread queues taken marks and its engine thread records for it, and
 * it refreshes the liveness key; the decode side's HTTP thread hands it jobs
 * to hold. Everything shared is under serve->mu.
 * Ownership: serve_pd_stop frees what serve_pd_start made; a held job keeps
 * one reference until it is handed to the engine.
 */
#ifndef RKV_SERVE_PD_H
#define RKV_SERVE_PD_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum serve_pd_role { SERVE_PD_NONE, SERVE_PD_PREFILL, SERVE_PD_DECODE } serve_pd_role;
extern const char *const serve_pd_role_names[]; /* "none", "prefill", "decode", NULL */

typedef struct serve serve;
typedef struct serve_job serve_job;
typedef struct serve_seq serve_seq;
typedef struct serve_pd serve_pd;
struct pd_rec;

/* Per job: what the router's bootstrap fields asked. */
typedef struct serve_pd_job {
    bool on;                   /* bootstrap_room given, on a server with a role */
    bool waited;               /* decode: held for its handoff record (once), or
                                  given it in kv_transfer_params */
    bool vllm;                 /* prefill: vllm-router's kv_transfer_params asked */
    bool taken;                /* prefill: its room was marked taken (once) */
    struct pd_rec *rec;        /* prefill: its record's node, reserved with the mark
                                  so that the record goes out even when memory
                                  runs out at the end; the job owns it until then */
    uint64_t room;
    int32_t tokens;            /* decode: prompt tokens handed over (record's T) */
    double deadline;           /* decode: serve_wall() by which the record must come */
    char fail[256];            /* non-empty: the job is failed with this at admission */
} serve_pd_job;

/* Handoffs counted (under serve->mu), for the summary line. */
typedef struct serve_pd_counts {
    int64_t sent, lost;        /* prefill: records pushed; records the server never got */
    int64_t admitted, failed;  /* decode: requests admitted on their handoff record;
                                  requests failed for their handoff (no record in time, an
                                  error or mismatched record, or, once admitted, pages
                                  missing: such a request counts in both) */
} serve_pd_counts;

/* Starts the pd thread and its Redis connection (url: the tier's
 * redis://HOST:PORT[/DB], ns: the tier's key namespace). -1 with err. */
int serve_pd_start(serve *s, serve_pd_role role, const char *url, const char *ns,
                   double timeout_s, char *err, size_t errlen);
/* Fails what it still holds (reason: the server stops), stops the thread. */
void serve_pd_stop(serve *s);

/* HTTP thread, parsing a completion: reads bootstrap_host/port/room. 0: fine
 * (a prefill job's max_tokens becomes 1); else the HTTP status, with the
 * field in *param and why in msg. */
int serve_pd_parse(serve *s, json_t *req, serve_job *j, const char **param, char *msg, size_t len);
/* A prefill server refusing a request before its engine sees it (a parse
 * error, out of memory, the queue full, a drain): its room (read from req,
 * or j's when j is non-NULL) gets an error record naming status and why, so
 * the decode side fails it now rather than at --pd-timeout. serve_pd_room
 * reads the room of req (false: none, or not a prefill server's request). */
bool serve_pd_room(const serve *s, json_t *req, uint64_t *room);
void serve_pd_refused_locked(serve *s, uint64_t room, unsigned status, const char *why);

/* Under s->mu, a finished job's JSON answer v (NULL is fine): a vllm-router
 * prefill gets "kv_transfer_params" carrying its handoff record. */
void serve_pd_answer_locked(const serve *s, const serve_job *j, json_t *v);
/* serve_submit_locked asks first. A prefill job's room is marked taken (the
 * pd thread writes the mark); false. A decode job waiting for its record is
 * held by the pd thread: true, and the pd thread submits it again once its
 * record came or it failed. */
bool serve_pd_submit_locked(serve *s, serve_job *j);
/* Engine thread, a prefill job's prompt ended, however (error: why it
 * failed, else NULL): queue its handoff record. Out of memory, a reserved
 * record carries an error instead, so the decode side is not left waiting. */
void serve_pd_prefilled_locked(serve *s, serve_job *j, const serve_seq *q, const char *error);
/* Engine thread, a decode job's prompt got its first token having matched
 * `cached` tokens: NULL when that covers the handoff, else why not (in msg). */
const char *serve_pd_check_locked(serve *s, const serve_job *j, int32_t cached, char *msg,
                                  size_t len);
/* Frees what a job still owns of the handoff (a job freed before it ended). */
void serve_pd_job_clear(serve_pd_job *pj);
/* The cancel of a drain: every held job fails now. */
void serve_pd_cancel_locked(serve *s);

#endif
