/* fault_attn.c - the allocation-failure loop over the CPU attention entry
 * points (built with -Dfault_injection=true only; radix/fault_alloc.h).
 *
 * For each entry point (plain, merge and cascade), allocation k = 1, 2, ... fails in turn until a call
 * makes no kth allocation. A call whose allocation failed must return
 * ATTN_ENOMEM; the first call that runs through must return ATTN_OK with the
 * output of an uninjected call, bit for bit (the kernels are deterministic on
 * one thread). Leaks are LeakSanitizer's to find at exit.
 * Prints "attention: POINTS allocation points, SURVIVED survived".
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention.h"
#include "fault_alloc.h"

enum { HQ = 4, HKV = 2, D = 64, P = 4, NP = 8, B = 2, T = 5 };

static float q[T * HQ * D], knew[T * HKV * D], vnew[T * HKV * D];
static float kc[NP * P * HKV * D], vc[NP * P * HKV * D];

static const attn_shape shape = {HQ, HKV, D, P, 0.125f};
static int32_t q_starts[B + 1] = {0, 3, 5}, prefix[B] = {6, 9};
static int32_t table[B * 3] = {0, 1, -1, 2, 3, 4};
static int32_t seq_lens[B] = {7, 11};

/* The cascade's batch: both sequences share pages 0 and 1 (a group). */
static int32_t shared_table[B * 3] = {0, 1, 2, 0, 1, 3};
static int32_t shared_prefix[B] = {9, 11}, shared_lens[B] = {10, 12};
static attn_cascade_plan plan_prefill, plan_decode;

static int call(int which, float *out, float *lse)
{
    attn_batch b = {.num_seqs = B, .max_pages = 3, .q_starts = q_starts, .prefix_lens = prefix,
                    .page_table = table, .num_pages = NP};
    attn_batch sb = {.num_seqs = B, .max_pages = 3, .q_starts = q_starts,
                     .prefix_lens = shared_prefix, .page_table = shared_table, .num_pages = NP};
    switch (which) {
    case 0: return attn_prefill_cpu(&shape, &b, q, knew, vnew, kc, vc, out, lse, 1);
    case 1: return attn_decode_cpu(&shape, B, seq_lens, table, 3, NP, q, kc, vc, out, lse, 3, 1);
    case 2: return attn_merge_cpu(T * HQ - 1, D, q, lse, q + D, lse, out, lse);
    case 3: {
        attn_cascade_plan p;
        int rc = attn_cascade_plan_build(B, shared_prefix, shared_table, 3, P, 1, &p);
        if (rc == ATTN_OK) {
            /* The plan as numbers in out, so the comparison covers it. */
            out[0] = (float)p.num_groups;
            out[1] = (float)p.pages_saved;
            attn_cascade_plan_free(&p);
        }
        return rc;
    }
    case 4:
        return attn_prefill_cascade_cpu(&shape, &sb, &plan_prefill, q, knew, vnew, kc, vc, out, lse, 1);
    default:
        return attn_decode_cascade_cpu(&shape, B, shared_lens, shared_table, 3, NP, &plan_decode, q, kc,
                                       vc, out, lse, 1);
    }
}

int main(void)
{
    srand(7);
    float *arrays[] = {q, knew, vnew, kc, vc};
    size_t sizes[] = {sizeof q, sizeof knew, sizeof vnew, sizeof kc, sizeof vc};
    for (int a = 0; a < 5; a++)
        for (size_t i = 0; i < sizes[a] / sizeof(float); i++) arrays[a][i] = (float)rand() / RAND_MAX - 0.5f;
    static const char *const names[] = {"attn_prefill_cpu", "attn_decode_cpu", "attn_merge_cpu",
                                        "attn_cascade_plan_build", "attn_prefill_cascade_cpu",
                                        "attn_decode_cascade_cpu"};
    enum { CALLS = sizeof names / sizeof names[0] };
    if (attn_cascade_plan_build(B, shared_prefix, shared_table, 3, P, 1, &plan_prefill) != ATTN_OK
        || attn_cascade_plan_build(B, shared_lens, shared_table, 3, P, 1, &plan_decode) != ATTN_OK
        || plan_prefill.num_groups != 1) {
        fprintf(stderr, "cascade plans: not one group\n");
        return 1;
    }
    int points = 0, survived = 0, bad = 0;
    static float ref[T * HQ * D], out[T * HQ * D], rlse[T * HQ], lse[T * HQ];
    for (int w = 0; w < CALLS; w++) {
        for (int i = 0; i < T * HQ; i++) rlse[i] = 0.25f * (float)i;
        memset(ref, 0, sizeof ref);
        fault_alloc_arm(0);
        if (call(w, ref, rlse) != ATTN_OK) {
            fprintf(stderr, "%s: fails without injection\n", names[w]);
            return 1;
        }
        for (int k = 1;; k++) {
            for (int i = 0; i < T * HQ; i++) lse[i] = 0.25f * (float)i;
            memset(out, 0, sizeof out);
            fault_alloc_arm(k);
            int rc = call(w, out, lse);
            bool fired = fault_alloc_fired();
            fault_alloc_arm(0);
            if (!fired) {
                if (rc != ATTN_OK || memcmp(out, ref, sizeof out) || memcmp(lse, rlse, sizeof lse)) {
                    fprintf(stderr, "%s: uninjected run %d differs (rc %d)\n", names[w], k, rc);
                    bad++;
                }
                break;
            }
            points++;
            if (rc == ATTN_ENOMEM) survived++;
            else {
                fprintf(stderr, "%s: allocation %d failed but the call returned %d\n", names[w], k, rc);
                bad++;
            }
        }
    }
    attn_cascade_plan_free(&plan_prefill);
    attn_cascade_plan_free(&plan_decode);
    printf("attention: %d allocation points, %d survived\n", points, survived);
    return bad ? 1 : 0;
}
