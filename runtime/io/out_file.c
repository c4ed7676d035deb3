/* out_file.c - see out_file.h. */
#include "out_file.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

FILE *out_file_open(out_file *of, const char *path, char *err, size_t errlen)
{
    memset(of, 0, sizeof *of);
    if (!path) return stdout;
    /* DIR/.NAME.XXXXXX: hidden, and in path's own folder (a rename across
     * file systems would not be atomic). */
    const char *slash = strrchr(path, '/');
    size_t dirlen = slash ? (size_t)(slash - path) + 1 : 0;
    size_t n = strlen(path) + 16;
    of->path = strdup(path);
    of->tmp = malloc(n);
    if (!of->path || !of->tmp) {
        snprintf(err, errlen, "cannot write '%s': out of host memory", path);
        goto fail;
    }
    snprintf(of->tmp, n, "%.*s.%s.XXXXXX", (int)dirlen, path, path + dirlen);
    struct stat st;
    bool exists = stat(path, &st) == 0;
    if (!path[dirlen] || (exists && S_ISDIR(st.st_mode))) {
        snprintf(err, errlen, "cannot write '%s': %s", path, path[dirlen] ? "a directory" : "no file name");
        goto fail;
    }
    if (exists && !S_ISREG(st.st_mode)) {
        /* /dev/null, a pipe, a terminal: written as it is (a rename would
         * replace the device or fifo with a plain file). */
        free(of->tmp);
        of->tmp = NULL;
        FILE *f = fopen(path, "w");
        if (!f) {
            snprintf(err, errlen, "cannot write '%s': %s", path, strerror(errno));
            goto fail;
        }
        return f;
    }
    int fd = mkstemp(of->tmp);
    if (fd < 0) {
        snprintf(err, errlen, "cannot write '%s': %s", path, strerror(errno));
        goto fail;
    }
    /* mkstemp's 0600 would make outputs unreadable to the group; use what
     * fopen would have given. */
    mode_t um = umask(0);
    umask(um);
    (void)fchmod(fd, 0666 & ~um);
    FILE *f = fdopen(fd, "w");
    if (!f) {
        snprintf(err, errlen, "cannot write '%s': %s", path, strerror(errno));
        close(fd);
        unlink(of->tmp);
        goto fail;
    }
    return f;
fail:
    free(of->path);
    free(of->tmp);
    memset(of, 0, sizeof *of);
    return NULL;
}

int out_file_finish(out_file *of, bool discard, char *err, size_t errlen)
{
    if (!of->tmp) { /* stdout, a device written directly, or finished */
        free(of->path);
        memset(of, 0, sizeof *of);
        return 0;
    }
    int rc = 0;
    struct stat st;
    bool keep = !discard && stat(of->tmp, &st) == 0 && st.st_size > 0;
    if (keep && rename(of->tmp, of->path)) {
        snprintf(err, errlen, "cannot rename '%s' onto '%s': %s", of->tmp, of->path,
                 strerror(errno));
        rc = -1;
    }
    if (!keep) unlink(of->tmp);
    free(of->path);
    free(of->tmp);
    memset(of, 0, sizeof *of);
    return rc;
}
