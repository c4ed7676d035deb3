/* rkv_core.c - see rkv_core.h. */
#include "rkv_core.h"

#include <errno.h>
#include <string.h>

#include <math.h>
#include <stdlib.h>

rkv_status rkv_grow(void **p, int64_t *cap, int64_t need, size_t elem)
{
    if (need <= *cap) return RKV_OK;
    int64_t nc = *cap > 0 ? *cap : 16;
    while (nc < need) nc *= 2;
    if (elem && (uint64_t)nc > SIZE_MAX / elem) return RKV_ENOMEM;
    void *q = realloc(*p, (size_t)nc * elem);
    if (!q) return RKV_ENOMEM;
    *p = q;
    *cap = nc;
    return RKV_OK;
}

rkv_status rkv_grow32(void **p, int32_t *cap, int64_t need, size_t elem)
{
    if (need <= *cap) return RKV_OK;
    if (need > INT32_MAX / 2) return RKV_ENOMEM;
    int64_t c = *cap;
    rkv_status st = rkv_grow(p, &c, need, elem);
    if (st == RKV_OK) *cap = (int32_t)c;
    return st;
}

rkv_status rkv_grow_size(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return RKV_OK;
    if (need > (size_t)INT64_MAX / 2) return RKV_ENOMEM;
    int64_t c = (int64_t)*cap; /* below need, so below INT64_MAX / 2 */
    rkv_status st = rkv_grow(p, &c, (int64_t)need, elem);
    if (st == RKV_OK) *cap = (size_t)c;
    return st;
}

rkv_status rkv_grow32_arrays(void **const p[], const size_t elem[], int n, int32_t *cap,
                             int64_t need)
{
    if (need <= *cap) return RKV_OK;
    int32_t grown = *cap;
    /* Each array grows from the same capacity to the same need, so all end
     * at one capacity; *cap moves only once every array has it. */
    for (int i = 0; i < n; i++) {
        int32_t c = *cap;
        rkv_status st = rkv_grow32(p[i], &c, need, elem[i]);
        if (st != RKV_OK) return st;
        grown = c;
    }
    *cap = grown;
    return RKV_OK;
}

rkv_status rkv_read_file(const char *path, size_t max, char **data, size_t *len, char *err,
                         size_t errlen)
{
    *data = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return rkv_fail(RKV_EIO, err, errlen, "%s: cannot open: %s", path, strerror(errno));
    char *buf = NULL;
    size_t cap = 0, n = 0, got;
    rkv_status st = RKV_OK;
    do {
        if (max && n > max) {
            st = rkv_fail(RKV_EINVAL, err, errlen, "%s: larger than %zu bytes", path, max);
            break;
        }
        /* Room for a chunk past what is read and the closing NUL. */
        if (rkv_grow_size((void **)&buf, &cap, n + 65536 + 1, 1)) {
            st = rkv_fail(RKV_ENOMEM, err, errlen, "%s: out of memory", path);
            break;
        }
        /* Read no more than one byte past max: enough to know it is larger. */
        size_t want = cap - n - 1;
        if (max && want > max + 1 - n) want = max + 1 - n;
        errno = 0;
        got = fread(buf + n, 1, want, f);
        n += got;
    } while (got > 0);
    /* fopen opens a directory; its first read fails with EISDIR. */
    if (st == RKV_OK && ferror(f))
        st = rkv_fail(RKV_EIO, err, errlen, "%s: cannot read: %s", path,
                      errno ? strerror(errno) : "read error");
    fclose(f);
    if (st) {
        free(buf);
        return st;
    }
    buf[n] = '\0';
    *data = buf;
    *len = n;
    return RKV_OK;
}

double rkv_percentile(const double *sorted, int64_t n, double p)
{
    if (n == 0) return 0;
    int64_t k = (int64_t)ceil(p / 100.0 * (double)n);
    if (k < 1) k = 1;
    if (k > n) k = n;
    return sorted[k - 1];
}

int rkv_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void rkv_json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') fprintf(f, "\\%c", ch);
        else if (ch < 0x20) fprintf(f, "\\u%04x", ch);
        else fputc(ch, f);
    }
    fputc('"', f);
}

int rkv_name_index(const char *const *names, const char *name)
{
    for (int i = 0; name && names[i]; i++)
        if (!strcmp(names[i], name)) return i;
    return -1;
}

const char *rkv_join_names(char *buf, size_t len, const char *const *names)
{
    size_t used = 0;
    if (len) buf[0] = 0;
    for (int i = 0; names[i] && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%s", i ? ", " : "", names[i]);
    return buf;
}
