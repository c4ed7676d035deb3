/* fuzz_sim_profile.c - a sim profile file (--sim-profile FILE): reading any
 * bytes either fails with a message naming the profile, or gives a profile
 * whose id prints as one JSON-safe line and whose numbers are finite and
 * within the bounds the reader promises (backend_sim.h). */
#include <math.h>

#include "backend_sim.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file(data, size, "profile.json");
    sim_profile p;
    char err[512] = "";
    if (sim_profile_load_file(path, &p, err, sizeof err) != RKV_OK) {
        if (!strstr(err, "sim profile")) abort(); /* a refusal names the profile */
        return 0;
    }
    if (!p.id[0] || strlen(p.hash) != 16) abort();
    for (const char *c = p.id; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == '"' || *c == '\\' || *c == ',') abort();
    const double v[] = {p.peak_flops, p.bandwidth, p.memory_bytes, p.eff_gemm, p.eff_weight,
                        p.eff_attn, p.eff_kv, p.eff_act, p.gemm_latency_s, p.kernel_s,
                        p.launch_s, p.overhead_s};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        if (!isfinite(v[i]) || v[i] < 0) abort();
    if (p.gemm_tables < 0 || p.gemm_tables > SIM_GEMM_TABLES) abort();
    for (int i = 0; i < p.gemm_tables; i++)
        for (int j = 0; j < i; j++)
            if (p.gemm_table[i].n == p.gemm_table[j].n && p.gemm_table[i].k == p.gemm_table[j].k)
                abort(); /* duplicate rows are refused */
    return 0;
}
