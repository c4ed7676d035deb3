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
#include "rkv_core.h"

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

/* The registry, in the order lists show it; the first is the default. A
 * backend compiled out of this build keeps its line (create NULL) so that its
 * name is known and refused with the reason. */
typedef struct backend_entry {
    const char *name;
    rkv_status (*create)(const backend_config *cfg, backend **out, char *err, size_t errlen);
    const char *missing; /* why create is NULL in this build */
    unsigned caps;       /* BACKEND_CAP_* every instance has */
    const char *summary;
} backend_entry;

#ifndef RKV_HAVE_BACKEND_SIM
#define backend_sim_create NULL
#endif
#ifndef RKV_HAVE_BACKEND_CUDA
#define backend_cuda_create NULL
#endif

/* name, constructor, what a build without it lacks, capabilities, summary. */
#define BACKEND_LIST(X)                                                                     \
    X("cpu", backend_cpu_create, "",                                                        \
      BACKEND_CAP_HOST_KV | BACKEND_CAP_HOST_THREADS | BACKEND_CAP_ROW_LOGITS,              \
      "the model on the CPU (OpenBLAS GEMMs, CPU attention)")                               \
    X("sim", backend_sim_create, "", BACKEND_CAP_MODELLED_TIME,                              \
      "no model: step times from a per-kernel cost model of a GPU")                         \
    X("cuda", backend_cuda_create, " (needs CUDA)", 0,                                      \
      "the model on the GPU (cuBLAS GEMMs, CUDA attention)")

#define BACKEND_ENTRY(n, c, m, k, s) {n, c, m, k, s},
#define BACKEND_NAME(n, c, m, k, s) n,
static const backend_entry backends[] = {BACKEND_LIST(BACKEND_ENTRY)};
enum { NUM_BACKENDS = sizeof backends / sizeof *backends };
const char *const backend_names[] = {BACKEND_LIST(BACKEND_NAME) NULL};

static const backend_entry *backend_find(const char *name)
{
    for (int i = 0; i < NUM_BACKENDS; i++)
        if (!strcmp(name, backends[i].name)) return &backends[i];
    return NULL;
}

bool backend_built(const char *name)
{
    const backend_entry *b = backend_find(name);
    return b && b->create;
}

unsigned backend_caps(const char *name)
{
    const backend_entry *b = backend_find(name ? name : backends[0].name);
    return b ? b->caps : 0;
}

const char *backend_summary(const char *name)
{
    const backend_entry *b = backend_find(name);
    return b ? b->summary : NULL;
}

rkv_status backend_create(const char *name, const backend_config *cfg, backend **out,
                          char *err, size_t errlen)
{
    *out = NULL;
    const backend_entry *b = backend_find(name ? name : backends[0].name);
    if (!b) {
        char names[128];
        snprintf(err, errlen, "unknown backend '%s' (%s)", name,
                 rkv_join_names(names, sizeof names, backend_names));
        return RKV_EINVAL;
    }
    if (!b->create) {
        snprintf(err, errlen, "backend '%s' is not built into this binary%s", b->name, b->missing);
        return RKV_ENOTSUP;
    }
    return b->create(cfg, out, err, errlen);
}
