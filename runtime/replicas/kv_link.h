/* kv_link.h - what moving a request's KV pages from a prefill engine to a
 * decode engine costs on the sim clock (`run --prefill N --decode M --link`).
 *
 *   seconds(n pages) = latency + n * (per_page + page_bytes / bandwidth)
 *
 * latency is paid once per handoff (the request's token ids and first token
 * travel even when no page does: the decode engine already held them all);
 * per_page is the fixed cost of one page's transfer (a work request posted and
 * completed, or a copy and a syscall); page_bytes is the model's K and V of
 * one page in bf16 (model_config_kv_bytes_per_token(m, 2) * P), not the sim
 * backend's bookkeeping bytes.
 *
 * Presets (nominal numbers, not measurements; override any key):
 *   rdma  bandwidth 25e9 B/s: one 200 Gb/s InfiniBand HDR / RoCE NIC at line
 *         rate (Mooncake's transfer engine and DistServe's cross-node setting
 *         use NICs of this class); latency 5e-6 s, a one-way RDMA write
 *         across one switch; per_page 1e-6 s, one posted work request and its
 *         completion per page.
 *   tcp   bandwidth 3.125e9 B/s: 25 Gb/s Ethernet at line rate; latency
 *         50e-6 s, a kernel TCP round trip in one rack; per_page 10e-6 s, a
 *         send and a host copy per page.
 * Spec: NAME[,bandwidth=B/s][,latency=S][,per_page=S]  (e.g. "tcp,latency=1e-4").
 * Bounds (so every handoff time is finite): bandwidth in [1e3, 1e15] B/s,
 * latency in [0, 60] s, per_page in [0, 1] s.
 *
 * Contention: every engine has one NIC. A handoff of n pages occupies the
 * prefill engine's NIC and the decode engine's NIC for
 *
 *   busy(n) = n * (per_page + page_bytes / bandwidth)
 *
 * starting when both are free, no earlier than the first token; handoffs
 * take the NICs in the order of their first tokens (first come, first
 * served). latency follows the last byte and occupies neither NIC (it is
 * the path, not the port). So 16 handoffs at once out of one prefill engine
 * leave one after the other, each at the whole bandwidth, instead of all at
 * once; two prefill engines sending to two decode engines do not slow each
 * other (a non-blocking switch).
 *
 *   prefill NIC  |--A--|--B--|         A: p0 -> d0, B: p0 -> d1, C: p1 -> d1
 *   decode d0    |--A--|
 *   decode d1          |--B--|--C--|   C waits for d1 although p1 is free
 */
#ifndef RKV_KV_LINK_H
#define RKV_KV_LINK_H

#include <stddef.h>
#include <stdint.h>

#include "rkv_status.h"

typedef struct kv_link {
    char name[16];          /* the preset it started from */
    double bandwidth;       /* bytes per second, > 0 */
    double latency;         /* seconds per handoff, >= 0 */
    double per_page;        /* seconds per page, >= 0 */
} kv_link;

/* Preset names, NULL-terminated (for --help). */
extern const char *const kv_link_names[];

/* Parse a spec (NULL: "rdma"). Unknown preset or key, or a bad value:
 * RKV_EINVAL with a message naming it. */
rkv_status kv_link_parse(const char *spec, kv_link *out, char *err, size_t errlen);

/* The handoff's time for n pages of page_bytes each, without waiting. */
double kv_link_seconds(const kv_link *l, int64_t pages, double page_bytes);
/* How long n pages keep a NIC busy: kv_link_seconds less the latency. */
double kv_link_busy_seconds(const kv_link *l, int64_t pages, double page_bytes);

#endif
