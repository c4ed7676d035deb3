/* rkv_status.h - one status enum for the radix and runtime layers.
 *
 * Functions return an rkv_status and hand results back through out-pointers
 * (a page id of 0 is a real page, so no sentinel value is ever returned).
 * rkv_status_str() gives a short English name for messages.
 */
#ifndef RKV_STATUS_H
#define RKV_STATUS_H

typedef enum rkv_status {
    RKV_OK = 0,
    RKV_ENOMEM,   /* host allocation failed; the structure is unchanged */
    RKV_EINVAL,   /* bad argument (message says which) */
    RKV_ENOSPC,   /* not enough free pages / capacity */
    RKV_ERANGE,   /* a value outside its range (token id, length) */
    RKV_EPARSE,   /* malformed input (trace line, config, JSON) */
    RKV_EIO,      /* file could not be read or written */
    RKV_ENOTSUP,  /* option or kind not supported by this build */
    RKV_ECORRUPT, /* an invariant check failed */
    RKV_EDEVICE,  /* GPU / CUDA / cuBLAS failure */
} rkv_status;

const char *rkv_status_str(rkv_status s);

#include <stddef.h>

/* Format a message into err (when err is non-NULL and errlen > 0). */
void rkv_set_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* rkv_set_err, then return st: `return rkv_fail(RKV_EINVAL, err, errlen, ...)`. */
rkv_status rkv_fail(rkv_status st, char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
