/* host_mem.c - see host_mem.h. */
#include "host_mem.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One integer from a file ("max" and missing files give -1). */
static int64_t read_i64(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    long long v = -1;
    if (fscanf(f, "%lld", &v) != 1) v = -1;
    fclose(f);
    return v;
}

int64_t host_mem_available(void)
{
    const char *env = getenv("RKV_MEM_AVAILABLE");
    if (env && *env) {
        char *end;
        long long v = strtoll(env, &end, 10);
        if (*end == '\0' && v >= 0) return v;
    }
    int64_t avail = -1;
    FILE *f = fopen("/proc/meminfo", "r");
    if (f) {
        char line[256];
        long long kb;
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "MemAvailable: %lld kB", &kb) == 1) {
                avail = (int64_t)kb * 1024;
                break;
            }
        fclose(f);
    }
    /* A container's limit binds before the host's free memory does. */
    int64_t max = read_i64("/sys/fs/cgroup/memory.max"), cur = read_i64("/sys/fs/cgroup/memory.current");
    if (max >= 0 && cur >= 0) {
        int64_t left = max > cur ? max - cur : 0;
        if (avail < 0 || left < avail) avail = left;
    }
    return avail;
}

rkv_status host_mem_check(const char *what, uint64_t bytes, char *err, size_t errlen)
{
    int64_t avail = host_mem_available();
    if (avail < 0 || bytes <= (uint64_t)avail) return RKV_OK;
    const double gib = 1024.0 * 1024.0 * 1024.0;
    return rkv_fail(RKV_ENOMEM, err, errlen,
                    "%s needs about %.2f GiB (%" PRIu64 " bytes) of host memory, %.2f GiB available",
                    what, (double)bytes / gib, bytes, (double)avail / gib);
}
