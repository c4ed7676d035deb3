/* cli.h - option-value parsing shared by the radixkv commands.
 *
 * Each returns 0 and writes *out, or prints "radixkv CMD: OPT: expected ..., got
 * 'V'" to stderr and returns 2 (the commands' exit status for bad usage). A
 * missing value (v == NULL) is an error too. */
#ifndef RKV_CLI_H
#define RKV_CLI_H

#include <stdint.h>

int cli_int(const char *cmd, const char *opt, const char *v, int64_t lo, int64_t hi,
            int64_t *out);
int cli_double(const char *cmd, const char *opt, const char *v, double lo, double hi,
               double *out);

#endif
