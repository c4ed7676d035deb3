/* host_mem.h - refuse, before allocating, a configured size the host cannot
 * hold (a --capacity of 2^31 pages would otherwise spend half a minute filling
 * 10 GB of page lists, or be killed by the OOM killer).
 *
 * Available memory is the smaller of /proc/meminfo's MemAvailable and the
 * cgroup v2 limit left (memory.max - memory.current). RKV_MEM_AVAILABLE=BYTES
 * overrides both (tests, and hosts whose limit is set some other way).
 */
#ifndef RKV_HOST_MEM_H
#define RKV_HOST_MEM_H

#include <stddef.h>
#include <stdint.h>

#include "rkv_status.h"

/* Bytes of host memory available now; -1 when unknown. */
int64_t host_mem_available(void);

/* RKV_OK when `bytes` (what `what` needs, e.g. "--capacity 4096 (4096 pages)")
 * fits the available memory or the amount is unknown; else RKV_ENOMEM with
 * "WHAT needs about X GiB of host memory, Y GiB available" in err. */
rkv_status host_mem_check(const char *what, uint64_t bytes, char *err, size_t errlen);

#endif
