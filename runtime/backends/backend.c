/* backend.c - backend_create(): pick a backend by name.
 *
 * The sim and cuda backends live in their own files and may be absent from a
 * build: meson defines RKV_HAVE_BACKEND_SIM / RKV_HAVE_BACKEND_CUDA only when
 * their sources are compiled in, and a name whose backend is missing answers
 * RKV_ENOTSUP instead of failing to link.
 */
#include <stdio.h>
#include <string.h>

#include "backend.h"

rkv_status backend_cpu_create(const backend_config *cfg, backend **out, char *err,
                              size_t errlen);
#ifdef RKV_HAVE_BACKEND_SIM
rkv_status backend_sim_create(const backend_config *cfg, backend **out, char *err,
                              size_t errlen);
#endif
#ifdef RKV_HAVE_BACKEND_CUDA
rkv_status backend_cuda_create(const backend_config *cfg, backend **out, char *err,
                               size_t errlen);
#endif

const char *const backend_names[] = {"cpu", "sim", "cuda", NULL};

bool backend_built(const char *name)
{
    if (!strcmp(name, "cpu")) return true;
#ifdef RKV_HAVE_BACKEND_SIM
    if (!strcmp(name, "sim")) return true;
#endif
#ifdef RKV_HAVE_BACKEND_CUDA
    if (!strcmp(name, "cuda")) return true;
#endif
    return false;
}

rkv_status backend_create(const char *name, const backend_config *cfg, backend **out,
                          char *err, size_t errlen)
{
    *out = NULL;
    if (!name || !strcmp(name, "cpu")) return backend_cpu_create(cfg, out, err, errlen);
    if (!strcmp(name, "sim")) {
#ifdef RKV_HAVE_BACKEND_SIM
        return backend_sim_create(cfg, out, err, errlen);
#else
        snprintf(err, errlen, "backend 'sim' is not built into this binary");
        return RKV_ENOTSUP;
#endif
    }
    if (!strcmp(name, "cuda")) {
#ifdef RKV_HAVE_BACKEND_CUDA
        return backend_cuda_create(cfg, out, err, errlen);
#else
        snprintf(err, errlen, "backend 'cuda' is not built into this binary (needs CUDA)");
        return RKV_ENOTSUP;
#endif
    }
    snprintf(err, errlen, "unknown backend '%s' (cpu, sim, cuda)", name);
    return RKV_EINVAL;
}
