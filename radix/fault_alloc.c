/* fault_alloc.c - see fault_alloc.h. Linked only with -Dfault_injection=true,
 * together with -Wl,--wrap for each function below; __real_X is the libc (or
 * sanitizer) allocator the linker names for us. */
#include "fault_alloc.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void *__real_malloc(size_t n);
void *__real_calloc(size_t k, size_t n);
void *__real_realloc(void *p, size_t n);
char *__real_strdup(const char *s);
void *__real_aligned_alloc(size_t a, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t k, size_t n);
void *__wrap_realloc(void *p, size_t n);
char *__wrap_strdup(const char *s);
void *__wrap_aligned_alloc(size_t a, size_t n);

/* Threads (the cpu backend's team) allocate too: the counter is atomic, and a
 * driver that wants a repeatable order runs with one thread. */
static atomic_int_fast64_t calls;
static atomic_int_fast64_t fail_at;
static atomic_bool fired;
static atomic_bool sticky; /* fail_at and every later call */
static const char *log_path;

static void write_log(void)
{
    if (!log_path) return;
    FILE *f = fopen(log_path, "w");
    if (!f) return;
    fprintf(f, "%lld %d\n", (long long)atomic_load(&calls), atomic_load(&fired) ? 1 : 0);
    fclose(f);
}

__attribute__((constructor)) static void fault_alloc_init(void)
{
    const char *n = getenv("RKV_FAULT_ALLOC");
    if (n && *n) atomic_store(&fail_at, strtoll(n, NULL, 10));
    log_path = getenv("RKV_FAULT_ALLOC_LOG");
    if (log_path && *log_path) atexit(write_log);
}

void fault_alloc_arm(int64_t nth)
{
    atomic_store(&fail_at, 0);
    atomic_store(&sticky, false);
    atomic_store(&calls, 0);
    atomic_store(&fired, false);
    atomic_store(&fail_at, nth);
}

void fault_alloc_arm_from(int64_t nth)
{
    fault_alloc_arm(0);
    atomic_store(&sticky, nth > 0);
    atomic_store(&fail_at, nth);
}

int64_t fault_alloc_calls(void) { return atomic_load(&calls); }
bool fault_alloc_fired(void) { return atomic_load(&fired); }

/* True when this call is the one to fail. */
static bool fail_now(void)
{
    int64_t k = atomic_fetch_add(&calls, 1) + 1, at = atomic_load(&fail_at);
    if (k != at && !(atomic_load(&sticky) && at > 0 && k > at)) return false;
    atomic_store(&fired, true);
    errno = ENOMEM;
    return true;
}

void *__wrap_malloc(size_t n) { return fail_now() ? NULL : __real_malloc(n); }
void *__wrap_calloc(size_t k, size_t n) { return fail_now() ? NULL : __real_calloc(k, n); }
void *__wrap_realloc(void *p, size_t n) { return fail_now() ? NULL : __real_realloc(p, n); }
char *__wrap_strdup(const char *s) { return fail_now() ? NULL : __real_strdup(s); }
void *__wrap_aligned_alloc(size_t a, size_t n) { return fail_now() ? NULL : __real_aligned_alloc(a, n); }
