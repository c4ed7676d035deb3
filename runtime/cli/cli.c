/* cli.c - see cli.h. */
#include "cli.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

int cli_int(const char *cmd, const char *opt, const char *v, int64_t lo, int64_t hi,
            int64_t *out)
{
    char *end;
    errno = 0;
    long long x = v ? strtoll(v, &end, 10) : 0;
    if (!v || errno || end == v || *end || x < lo || x > hi) {
        fprintf(stderr, "radixkv %s: %s: expected an integer in [%" PRId64 ", %" PRId64 "], got '%s'\n",
                cmd, opt, lo, hi, v ? v : "");
        return 2;
    }
    *out = x;
    return 0;
}

int cli_double(const char *cmd, const char *opt, const char *v, double lo, double hi,
               double *out)
{
    char *end;
    errno = 0;
    double x = v ? strtod(v, &end) : 0;
    if (!v || errno || end == v || *end || !(x >= lo && x <= hi)) {
        fprintf(stderr, "radixkv %s: %s: expected a number in [%g, %g], got '%s'\n", cmd, opt, lo,
                hi, v ? v : "");
        return 2;
    }
    *out = x;
    return 0;
}
