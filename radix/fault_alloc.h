/* fault_alloc.h - allocation-failure injection (meson -Dfault_injection=true).
 *
 * The build links radixkv's own objects with -Wl,--wrap=malloc,calloc,realloc,
 * strdup,aligned_alloc: every call our code makes goes through fault_alloc.c,
 * which counts it and fails the Nth (returns NULL, errno = ENOMEM). Calls made
 * inside shared libraries (libc's getline, jansson, OpenBLAS) are not counted:
 * the loop tests our handling of failure, not theirs.
 *
 *   RKV_FAULT_ALLOC=N        fail the Nth allocation of the process (1-based);
 *                            0 or unset: count only
 *   RKV_FAULT_ALLOC_LOG=F    at exit, write "CALLS FAILED\n" to file F (CALLS:
 *                            allocations counted, FAILED: 1 if the Nth was
 *                            reached), so a driver learns how many points to try
 *
 * In-process tests arm it around one call with fault_alloc_arm(). Without the
 * option none of this is compiled and these functions do not exist.
 */
#ifndef RKV_FAULT_ALLOC_H
#define RKV_FAULT_ALLOC_H

#include <stdbool.h>
#include <stdint.h>

/* Restart the count and fail the nth allocation from now (0: never). */
void fault_alloc_arm(int64_t nth);
/* The same, but the nth and every allocation after it fail until the next
 * arm: memory that stays short, for the paths that retry a failed growth
 * (one failure alone never reaches their last fallback). */
void fault_alloc_arm_from(int64_t nth);
/* Allocations counted since the last arm (or process start). */
int64_t fault_alloc_calls(void);
/* Whether the armed failure has happened. */
bool fault_alloc_fired(void);

#endif
