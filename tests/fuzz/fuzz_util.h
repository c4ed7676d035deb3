/* fuzz_util.h - shared by the fuzz targets (one per input format). Every
 * reader under test takes a path, so the input is written to one temporary
 * file per process, rewritten for each input. */
#ifndef RKV_FUZZ_UTIL_H
#define RKV_FUZZ_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* data as the contents of a file named ...NAME (e.g. "config.json"); the
 * path stays valid until the next call. */
static char fuzz_path[256];

static inline void fuzz_file_remove(void) { unlink(fuzz_path); }

static inline const char *fuzz_file(const uint8_t *data, size_t size, const char *name)
{
    char *path = fuzz_path;
    if (!path[0]) {
        /* Memory-backed when there is one: the file is rewritten per input. */
        const char *tmp = getenv("TMPDIR");
        if (!tmp || !*tmp) tmp = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
        snprintf(path, sizeof fuzz_path, "%s/rkv-fuzz-%ld-%s", tmp, (long)getpid(), name);
        atexit(fuzz_file_remove);
    }
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    if (size && fwrite(data, 1, size, f) != size) abort();
    if (fclose(f) != 0) abort();
    return path;
}

#endif
