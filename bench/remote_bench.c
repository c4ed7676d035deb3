/* remote_bench.c - the remote tier (radix/tier_remote.h) on one Redis server
 * over loopback: what loading a prefix's K/V from it costs against
 * recomputing the prefix on the cpu backend, and how many pages per second
 * one server moves for 1, 2, 4 client processes.
 *
 *   load_vs_recompute  recompute = one prefill of N tokens through the cpu
 *                      backend's forward; remote load = tier_remote_fetch of
 *                      the N / P pages (pipelined GETs, checksums checked)
 *                      plus write_page of each into the KV memory. Stored
 *                      once before the repetitions.
 *   throughput         C processes, each storing K pages of page_bytes (SET,
 *                      pipelined in batches) then loading them back in runs
 *                      of 64 pages (GET); aggregate pages/s and GB/s from
 *                      the slowest process's wall time.
 *
 * Each figure: R repetitions, median with min and max, wall time beside the
 * thread CPU time of the measuring thread (summed over processes). Without
 * --url the bench starts its own redis-server on a free loopback port in a
 * temporary directory and stops it at the end.
 *
 * Usage: remote_bench [--url redis://HOST:PORT] [--tokens N] [--reps R]
 *                     [--pages K] [--clients 1,2,4] [--model PRESET]
 * Output: one JSON object per line.
 */
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"
#include "bench_replay.h"
#include "bench_util.h"
#include "cli.h"
#include "tier_remote.h"

/* ,"name[i]":{"median":..,"min":..,"max":..} of v[i][0..n) (sorted in place),
 * for each of the k figures. */
static void stats_json(const char *const *name, double **v, int k, int n)
{
    for (int i = 0; i < k; i++) {
        bench_stats s = bench_stats_of(v[i], n);
        printf(",\"%s\":{\"median\":%.6g,\"min\":%.6g,\"max\":%.6g}", name[i], s.med, s.lo,
               s.hi);
    }
}

/* ------------------------------------------------------------ own server */

static pid_t server_pid;
static char server_dir[64];

static int start_server(char *url, size_t n)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof a) || getsockname(s, (struct sockaddr *)&a, &len)) return -1;
    close(s);
    int port = ntohs(a.sin_port);
    snprintf(server_dir, sizeof server_dir, "/tmp/rkv-bench-redis-XXXXXX");
    if (!mkdtemp(server_dir)) return -1;
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    server_pid = fork();
    if (server_pid < 0) return -1;
    if (server_pid == 0) {
        if (!freopen("/dev/null", "w", stdout)) _exit(126);
        execlp("redis-server", "redis-server", "--port", ps, "--bind", "127.0.0.1", "--save", "",
               "--appendonly", "no", "--dir", server_dir, "--daemonize", "no", (char *)NULL);
        _exit(127);
    }
    snprintf(url, n, "redis://127.0.0.1:%d", port);
    for (int i = 0; i < 500; i++) { /* at most 5 s */
        tier_remote_config c;
        tier_remote_config_default(&c);
        c.url = url;
        tier_remote *r = NULL;
        char err[256];
        if (tier_remote_open(&c, 1, 0, &r, err, sizeof err) == RKV_OK) {
            tier_remote_close(r);
            return 0;
        }
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return -1;
}

static void stop_server(void)
{
    if (server_pid > 0) {
        kill(server_pid, SIGKILL);
        waitpid(server_pid, NULL, 0);
        rmdir(server_dir);
    }
}

/* ------------------------------------------------------------ keys */

/* A page's key: two draws of the shared generator from (salt, k). */
static void page_key(uint64_t salt, int64_t k, uint64_t key[2])
{
    uint64_t z = salt * 0x9e3779b97f4a7c15ull + (uint64_t)k;
    key[0] = rkv_splitmix64_next(&z);
    key[1] = rkv_splitmix64_next(&z);
}

/* ------------------------------------------------------------ throughput */

typedef struct client_result { double set_wall, set_cpu, get_wall, get_cpu; int64_t got; } client_result;

static int client_run(const char *url, int id, int64_t K, int32_t P, size_t pb, client_result *res)
{
    tier_remote_config c;
    tier_remote_config_default(&c);
    c.url = url;
    c.pages = K + 1;
    char ns[32];
    snprintf(ns, sizeof ns, "bench%d", id);
    c.ns = ns;
    tier_remote *r = NULL;
    char err[256];
    if (tier_remote_open(&c, P, pb, &r, err, sizeof err) != RKV_OK) {
        fprintf(stderr, "remote_bench: %s\n", err);
        return 1;
    }
    uint64_t *keys = malloc(sizeof(uint64_t) * 2 * (size_t)K);
    int32_t *toks = malloc(sizeof(int32_t) * (size_t)K * (size_t)P);
    uint8_t *bytes = malloc(pb);
    if (!keys || !toks || !bytes) return 1;
    for (int64_t k = 0; k < K; k++) {
        page_key((uint64_t)id + 1, k, keys + 2 * k);
        for (int32_t j = 0; j < P; j++) toks[k * P + j] = (int32_t)(k * P + j);
    }
    memset(bytes, 0x5a, pb);
    double w0 = bench_clock_s(CLOCK_MONOTONIC), c0 = bench_clock_s(CLOCK_THREAD_CPUTIME_ID);
    for (int64_t k = 0; k < K; k++) tier_remote_put(r, keys + 2 * k, toks + k * P, bytes);
    tier_remote_flush(r);
    double w1 = bench_clock_s(CLOCK_MONOTONIC), c1 = bench_clock_s(CLOCK_THREAD_CPUTIME_ID);
    int64_t got = 0;
    for (int64_t k = 0; k < K; k += 64) {
        int32_t n = (int32_t)(K - k < 64 ? K - k : 64);
        got += tier_remote_fetch(r, keys + 2 * k, toks + k * P, n);
    }
    double w2 = bench_clock_s(CLOCK_MONOTONIC), c2 = bench_clock_s(CLOCK_THREAD_CPUTIME_ID);
    *res = (client_result){w1 - w0, c1 - c0, w2 - w1, c2 - c1, got};
    tier_remote_close(r);
    free(keys);
    free(toks);
    free(bytes);
    return 0;
}

/* One repetition with C processes; aggregate over them. */
static int throughput_once(const char *url, int C, int64_t K, int32_t P, size_t pb, double out[4], int64_t *got)
{
    int fds[2];
    if (pipe(fds)) return 1;
    for (int i = 0; i < C; i++) {
        pid_t p = fork();
        if (p < 0) return 1;
        if (p == 0) {
            close(fds[0]);
            client_result res = {0};
            int rc = client_run(url, i, K, P, pb, &res);
            if (write(fds[1], &res, sizeof res) != (ssize_t)sizeof res) rc = 1;
            _exit(rc);
        }
    }
    close(fds[1]);
    double set_wall = 0, get_wall = 0, set_cpu = 0, get_cpu = 0;
    *got = 0;
    int bad = 0;
    for (int i = 0; i < C; i++) {
        client_result res;
        if (read(fds[0], &res, sizeof res) != (ssize_t)sizeof res) {
            bad = 1;
            break;
        }
        if (res.set_wall > set_wall) set_wall = res.set_wall;
        if (res.get_wall > get_wall) get_wall = res.get_wall;
        set_cpu += res.set_cpu;
        get_cpu += res.get_cpu;
        *got += res.got;
    }
    close(fds[0]);
    for (int i = 0; i < C; i++) {
        int st = 0;
        wait(&st);
        if (!WIFEXITED(st) || WEXITSTATUS(st)) bad = 1;
    }
    out[0] = set_wall;
    out[1] = set_cpu;
    out[2] = get_wall;
    out[3] = get_cpu;
    return bad;
}

/* 1: load N tokens of K/V from the server vs recompute them: R
 * repetitions, one JSON line. Returns 0 or 1 (a failure, on stderr). */
static int bench_load(backend *be, const char *url, int32_t N, int32_t P, int32_t R,
                      const char *model)
{
    int rc = 1;
    int32_t np = N / P;
    size_t pb = 0;
    be->ops->page_bytes(be, &pb);
    char err[512] = "";
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)N), *pos = malloc(sizeof(int32_t) * (size_t)N);
    int32_t *slots = malloc(sizeof(int32_t) * (size_t)N), *pages = malloc(sizeof(int32_t) * (size_t)np);
    uint64_t *keys = malloc(sizeof(uint64_t) * 2 * (size_t)np);
    uint8_t *page = malloc(pb);
    double *v[5] = {NULL};
    for (int i = 0; i < 5; i++) v[i] = malloc(sizeof(double) * (size_t)R);
    tier_remote *r = NULL;
    if (!tok || !pos || !slots || !pages || !keys || !page || !v[0] || !v[1] || !v[2] || !v[3] ||
        !v[4]) {
        fprintf(stderr, "remote_bench: out of host memory\n");
        goto out;
    }
    for (int32_t i = 0; i < N; i++) {
        tok[i] = (int32_t)((i * 2654435761u) % (uint32_t)be->vocab_size);
        pos[i] = i;
        slots[i] = i;
    }
    for (int32_t k = 0; k < np; k++) {
        pages[k] = k;
        page_key(99, k, keys + 2 * k);
    }
    int32_t qs[2] = {0, N}, pre = 0, sample = -1, step = 0, out = 0;
    sampling_params sp = {0};
    fwd_batch b = {.num_seqs = 1, .num_tokens = N, .token_ids = tok, .positions = pos, .q_starts = qs,
                   .prefix_lens = &pre, .page_table = pages, .max_pages = np, .slot_mapping = slots,
                   .sample_rows = &sample, .sampling = &sp, .sample_steps = &step};
    tier_remote_config rcfg;
    tier_remote_config_default(&rcfg);
    rcfg.url = url;
    rcfg.ns = "bench-load";
    if (tier_remote_open(&rcfg, P, pb, &r, err, sizeof err) != RKV_OK) {
        fprintf(stderr, "remote_bench: %s\n", err);
        goto out;
    }
    double secs = 0;
    if (be->ops->forward(be, &b, &out, NULL, &secs) != RKV_OK) goto out;
    /* stored once, before the repetitions */
    for (int32_t k = 0; k < np; k++) {
        be->ops->read_page(be, k, page);
        tier_remote_put(r, keys + 2 * k, tok + (int64_t)k * P, page);
    }
    tier_remote_flush(r);
    for (int rep = 0; rep < R; rep++) {
        double w0 = bench_clock_s(CLOCK_MONOTONIC), c0 = bench_clock_s(CLOCK_THREAD_CPUTIME_ID);
        if (be->ops->forward(be, &b, &out, NULL, &secs) != RKV_OK) goto out;
        double w1 = bench_clock_s(CLOCK_MONOTONIC), c1 = bench_clock_s(CLOCK_THREAD_CPUTIME_ID);
        int32_t got = tier_remote_fetch(r, keys, tok, np);
        for (int32_t k = 0; k < got; k++) be->ops->write_page(be, k, tier_remote_page(r, k));
        double w2 = bench_clock_s(CLOCK_MONOTONIC), c2 = bench_clock_s(CLOCK_THREAD_CPUTIME_ID);
        if (got != np) {
            fprintf(stderr, "remote_bench: %d of %d pages found\n", got, np);
            goto out;
        }
        v[0][rep] = w1 - w0;
        v[1][rep] = c1 - c0;
        v[2][rep] = w2 - w1;
        v[3][rep] = c2 - c1;
        v[4][rep] = (w2 - w1) / (w1 - w0);
    }
    printf("{\"bench\":\"remote_load_vs_recompute\",\"backend\":\"cpu\",\"model\":\"%s\",\"tokens\":%d,"
           "\"page_size\":%d,\"page_bytes\":%zu,\"reps\":%d", model ? model : "default", N, P, pb, R);
    static const char *const names[] = {"recompute_wall_s", "recompute_cpu_s", "load_wall_s",
                                        "load_cpu_s", "load_over_recompute"};
    stats_json(names, v, 5, R);
    printf("}\n");
    fflush(stdout);
    rc = 0;
out:
    tier_remote_close(r);
    for (int i = 0; i < 5; i++) free(v[i]);
    free(tok); free(pos); free(slots); free(pages); free(keys); free(page);
    return rc;
}

/* 2 for one client count C: R repetitions of K pages per client, one JSON
 * line. Returns 0 or 1 (a failure, on stderr). */
static int bench_throughput(const char *url, int C, int64_t K, int32_t P, size_t pb, int32_t R)
{
    double *w[8] = {NULL};
    int rc = 0;
    for (int i = 0; i < 8; i++)
        if (!(w[i] = malloc(sizeof(double) * (size_t)R))) rc = 1;
    if (rc) fprintf(stderr, "remote_bench: out of host memory\n");
    int64_t got = 0;
    for (int rep = 0; rep < R && !rc; rep++) {
        double o[4];
        if (throughput_once(url, C, K, P, pb, o, &got) || got != (int64_t)C * K) {
            fprintf(stderr, "remote_bench: a client failed (%lld of %lld pages back)\n",
                    (long long)got, (long long)C * K);
            rc = 1;
            break;
        }
        double pages_n = (double)C * (double)K;
        w[0][rep] = pages_n / o[0];
        w[1][rep] = pages_n * (double)pb / o[0] / 1e9;
        w[2][rep] = pages_n / o[2];
        w[3][rep] = pages_n * (double)pb / o[2] / 1e9;
        w[4][rep] = o[0];
        w[5][rep] = o[1];
        w[6][rep] = o[2];
        w[7][rep] = o[3];
    }
    if (!rc) {
        printf("{\"bench\":\"remote_throughput\",\"clients\":%d,\"pages_per_client\":%lld,\"page_bytes\":%zu,"
               "\"reps\":%d", C, (long long)K, pb, R);
        static const char *const names[] = {"set_pages_per_s", "set_gb_per_s", "get_pages_per_s",
                                            "get_gb_per_s",    "set_wall_s",   "set_cpu_s",
                                            "get_wall_s",      "get_cpu_s"};
        stats_json(names, w, 8, R);
        printf("}\n");
        fflush(stdout);
    }
    for (int i = 0; i < 8; i++) free(w[i]);
    return rc;
}

/* The client counts of --clients ("1,2,4"): 0, or 2 naming the bad one. */
static int parse_clients(const char *clients, int counts[64], int *n)
{
    *n = 0;
    for (const char *c = clients; *c && *n < 64;) {
        char *end;
        long v = strtol(c, &end, 10);
        if (end == c || (*end && *end != ',') || v < 1 || v > 64) {
            fprintf(stderr, "remote_bench: --clients: '%s': counts in [1, 64], comma-separated\n",
                    clients);
            return 2;
        }
        counts[(*n)++] = (int)v;
        c = *end ? end + 1 : end;
    }
    if (*n) return 0;
    fprintf(stderr, "remote_bench: --clients: no count given\n");
    return 2;
}

int main(int argc, char **argv)
{
    const int32_t P = 16;
    int64_t N = 1024, R = 5, K = 4096;
    const char *model = NULL, *url = NULL, *clients = "1,2,4";
    cli_opt table[] = {
        CLI_STR_OPT("--url", &url),
        CLI_INT_OPT("--tokens", &N, P, INT32_MAX),
        CLI_INT_OPT("--reps", &R, 1, 1000),
        CLI_INT_OPT("--pages", &K, 1, INT32_MAX),
        CLI_STR_OPT("--clients", &clients),
        CLI_STR_OPT("--model", &model),
        CLI_END,
    };
    char perr[256];
    cli_args a;
    if (cli_parse("remote_bench", table, argc, argv, &a, perr, sizeof perr) || a.npos || a.help) {
        fprintf(stderr, "remote_bench: %s\n", a.help || a.npos ? "see the usage at the top of "
                "bench/remote_bench.c" : perr);
        return 2;
    }
    int counts[64], nc = 0;
    if (parse_clients(clients, counts, &nc)) return 2;
    if (!tier_remote_available()) {
        fprintf(stderr, "remote_bench: built without hiredis\n");
        return 2;
    }
    char own_url[64];
    if (!url) {
        if (start_server(own_url, sizeof own_url)) {
            fprintf(stderr, "remote_bench: cannot start redis-server (is it installed?)\n");
            stop_server();
            return 1;
        }
        url = own_url;
    }
    N -= N % P;
    char err[512] = "";
    backend_config bc = {.model = model, .page_size = P, .num_pages = (int32_t)(N / P) + 1};
    backend *be = NULL;
    if (backend_create("cpu", &bc, &be, err, sizeof err) != RKV_OK) {
        fprintf(stderr, "remote_bench: %s\n", err);
        stop_server();
        return 1;
    }
    size_t pb = 0;
    be->ops->page_bytes(be, &pb);
    int rc = bench_load(be, url, (int32_t)N, P, (int32_t)R, model);
    /* 2: pages/s and GB/s through the server for each client count. */
    for (int i = 0; i < nc && !rc; i++) rc = bench_throughput(url, counts[i], K, P, pb, (int32_t)R);
    backend_destroy(be);
    stop_server();
    return rc;
}
