/* sha256_chain_bench: the KV-event chain's SHA-256 alone
 * (python/radixkv/ev_sha256.c, no Python): ns a page of ev_sha256_chain over
 * --tokens random token ids on the CPU's SHA instructions and on libcrypto,
 * the two alternating repeat by repeat in one run, and the digests of the
 * two compared. One JSON object on stdout: per page size, thread CPU and wall
 * ns a page (median, least, most over --repeats) of each route and the SHA
 * route's ratio to libcrypto's.
 *
 *   build/bench/sha256_chain_bench [--tokens N] [--repeats N]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "ev_sha256.h"

enum { ROUTES = 2 };

int main(int argc, char **argv)
{
    int64_t ntok = 100000, repeats = 15;
    cli_opt opts[] = {
        CLI_INT_OPT("--tokens", &ntok, 1, 1 << 26),
        CLI_INT_OPT("--repeats", &repeats, 1, 1000),
        CLI_END,
    };
    cli_args a;
    char err[256];
    if (cli_parse("sha256_chain_bench", opts, argc, argv, &a, err, sizeof err) != 0) {
        fprintf(stderr, "sha256_chain_bench: %s\n", err);
        return 2;
    }
    if (a.help || a.npos) {
        fprintf(a.help ? stdout : stderr, "usage: sha256_chain_bench [--tokens N] [--repeats N]\n");
        return a.help ? 0 : 2;
    }
    const int fast = ev_sha256_uses_sha_ni();
    const int routes = fast ? ROUTES : 1; /* route 0: SHA instructions, 1: libcrypto */
    const size_t n = (size_t)ntok;
    uint8_t *le = malloc(4 * n);
    uint8_t *dig[ROUTES] = {malloc(32 * n), malloc(32 * n)};
    double *cpu = malloc(sizeof(double) * (size_t)repeats * ROUTES);
    double *wall = malloc(sizeof(double) * (size_t)repeats * ROUTES);
    if (!le || !dig[0] || !dig[1] || !cpu || !wall) {
        fprintf(stderr, "sha256_chain_bench: out of memory for %zu tokens\n", n);
        return 1;
    }
    uint64_t x = 0x9e3779b97f4a7c15u; /* xorshift64: token ids below 2**31 */
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        const uint32_t t = (uint32_t)(x >> 33);
        memcpy(le + 4 * i, &t, 4);
    }
    static const size_t sizes[] = {1, 16};
    printf("{\"bench\": \"sha256_chain_bench\", \"tokens\": %zu, \"repeats\": %lld, "
           "\"sha_ni_available\": %s, \"rows\": {",
           n, (long long)repeats, fast ? "true" : "false");
    int rc = 0;
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
        const size_t P = sizes[si], pages = (n + P - 1) / P;
        for (int64_t r = 0; r < repeats; r++) {
            for (int k = 0; k < routes; k++) {
                ev_sha256_force_portable(k == 1 || !fast);
                const double w0 = bench_clock_s(CLOCK_MONOTONIC);
                const double c0 = bench_clock_s(CLOCK_THREAD_CPUTIME_ID);
                const int ok = ev_sha256_chain(NULL, le, n, P, dig[k]);
                const double c1 = bench_clock_s(CLOCK_THREAD_CPUTIME_ID);
                const double w1 = bench_clock_s(CLOCK_MONOTONIC);
                if (!ok) {
                    fprintf(stderr, "sha256_chain_bench: libcrypto's SHA-256 failed\n");
                    return 1;
                }
                cpu[k * repeats + r] = 1e9 * (c1 - c0) / (double)pages;
                wall[k * repeats + r] = 1e9 * (w1 - w0) / (double)pages;
            }
        }
        ev_sha256_force_portable(0);
        if (routes == 2 && memcmp(dig[0], dig[1], 32 * pages) != 0) {
            fprintf(stderr, "sha256_chain_bench: the routes' digests differ at page size %zu\n", P);
            rc = 1;
        }
        printf("%s\"page_size_%zu\": {\"pages\": %zu", si ? ", " : "", P, pages);
        static const char *const name[ROUTES] = {"sha_ni", "libcrypto"};
        double med[ROUTES] = {0, 0};
        for (int k = 0; k < routes; k++) {
            const int slot = fast ? k : 1;
            bench_stats c = bench_stats_of(cpu + k * repeats, (int)repeats);
            bench_stats w = bench_stats_of(wall + k * repeats, (int)repeats);
            med[slot] = c.med;
            printf(", \"%s\": {\"thread_cpu_ns_per_page\": {\"median\": %.2f, \"min\": %.2f, "
                   "\"max\": %.2f}, \"wall_ns_per_page\": {\"median\": %.2f, \"min\": %.2f, "
                   "\"max\": %.2f}}",
                   name[slot], c.med, c.lo, c.hi, w.med, w.lo, w.hi);
        }
        if (routes == 2) printf(", \"sha_ni_over_libcrypto_cpu\": %.4f", med[0] / med[1]);
        printf("}");
    }
    printf("}}\n");
    free(le);
    free(dig[0]);
    free(dig[1]);
    free(cpu);
    free(wall);
    return rc;
}
