/* safetensors.c - memory-mapped safetensors reader; see safetensors.h. */
#include "safetensors.h"
#include "rkv_core.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct st_file {
    char *path;
    void *map;
    size_t size;
} st_file;

struct safetensors {
    char *root;      /* the path given to open (file or directory) */
    st_file *files;
    int32_t num_files, cap_files;
    st_tensor *tensors;
    int32_t num_tensors, cap_tensors;
    json_t *headers; /* array of parsed headers: they own the name/dtype strings */
};

/* Element sizes of the dtypes safetensors defines; only F32/F16/BF16 can be
 * read, the others are sized so a checkpoint carrying them still opens. */
static int dtype_bytes(const char *d)
{
    static const struct { const char *name; int bytes; } t[] = {
        {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8}, {"U64", 8},
        {"I32", 4}, {"U32", 4}, {"I16", 2}, {"U16", 2}, {"I8", 1}, {"U8", 1},
        {"BOOL", 1}, {"F8_E4M3", 1}, {"F8_E5M2", 1},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (!strcmp(t[i].name, d)) return t[i].bytes;
    return 0;
}

static rkv_status map_file(const char *path, st_file *f, char *err, size_t errlen)
{
    memset(f, 0, sizeof *f);
    int fd = open(path, O_RDONLY);
    if (fd < 0) return rkv_fail(RKV_EIO, err, errlen, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) < 0) {
        int e = errno;
        close(fd);
        return rkv_fail(RKV_EIO, err, errlen, "%s: cannot stat: %s", path, strerror(e));
    }
    f->path = strdup(path);
    f->size = (size_t)sb.st_size;
    if (!f->path) {
        close(fd);
        return RKV_ENOMEM;
    }
    if (f->size > 0) {
        f->map = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (f->map == MAP_FAILED) {
            int e = errno;
            f->map = NULL;
            free(f->path);
            f->path = NULL;
            close(fd);
            return rkv_fail(RKV_EIO, err, errlen, "%s: mmap failed: %s", path, strerror(e));
        }
    }
    close(fd);
    return RKV_OK;
}

static rkv_status push_tensor(safetensors *st, const st_tensor *t)
{
    if (rkv_grow32((void **)&st->tensors, &st->cap_tensors, (int64_t)st->num_tensors + 1,
                   sizeof *st->tensors))
        return RKV_ENOMEM;
    st->tensors[st->num_tensors++] = *t;
    return RKV_OK;
}

static const st_tensor *sort_base;
static int by_offset(const void *a, const void *b)
{
    const unsigned char *x = sort_base[*(const int *)a].data, *y = sort_base[*(const int *)b].data;
    return x < y ? -1 : x > y;
}

/* Tensors first.. of one file (just parsed) may not share bytes: two that
 * overlap would read each other's data as weights. */
static rkv_status check_overlap(safetensors *st, int first, const char *path, char *err,
                                size_t errlen)
{
    int n = st->num_tensors - first;
    if (n < 2) return RKV_OK;
    int *ix = malloc(sizeof *ix * (size_t)n);
    if (!ix) return rkv_fail(RKV_ENOMEM, err, errlen, "%s: out of host memory", path);
    for (int i = 0; i < n; i++) ix[i] = first + i;
    sort_base = st->tensors;
    qsort(ix, (size_t)n, sizeof *ix, by_offset);
    rkv_status s = RKV_OK;
    const st_tensor *prev = NULL;
    for (int i = 0; i < n && !s; i++) {
        const st_tensor *t = &st->tensors[ix[i]];
        if (t->numel == 0) continue;
        if (prev && (const unsigned char *)prev->data + prev->numel * prev->elem_bytes >
                        (const unsigned char *)t->data)
            s = rkv_fail(RKV_EPARSE, err, errlen, "%s: tensors '%s' and '%s' overlap in the data",
                         path, prev->name, t->name);
        prev = t;
    }
    free(ix);
    return s;
}

/* Parse and validate the header of shard fi; every tensor must lie inside
 * the file with exactly dtype x shape bytes. */
static rkv_status parse_header(safetensors *st, int fi, char *err, size_t errlen)
{
    const st_file *f = &st->files[fi];
    if (f->size < 8)
        return rkv_fail(RKV_EPARSE, err, errlen, "%s: truncated: %zu bytes, no header length",
                    f->path, f->size);
    uint64_t n = 0;
    const unsigned char *p = f->map;
    for (int i = 7; i >= 0; i--) n = (n << 8) | p[i];
    if (n > f->size - 8)
        return rkv_fail(RKV_EPARSE, err, errlen,
                    "%s: truncated or bad header: header length %llu exceeds the file "
                    "(%zu bytes)", f->path, (unsigned long long)n, f->size);
    json_error_t je;
    /* A name given twice would leave one of its two tensors unused, silently. */
    json_t *h = json_loadb((const char *)p + 8, (size_t)n, JSON_REJECT_DUPLICATES, &je);
    if (!h) return rkv_fail(RKV_EPARSE, err, errlen, "%s: bad header JSON: %s", f->path, je.text);
    if (!json_is_object(h)) {
        json_decref(h);
        return rkv_fail(RKV_EPARSE, err, errlen, "%s: header is not a JSON object", f->path);
    }
    json_array_append_new(st->headers, h); /* keeps the strings alive */
    const unsigned char *data = p + 8 + n;
    uint64_t data_size = f->size - 8 - n;
    const int first = st->num_tensors;

    const char *name;
    json_t *v;
    json_object_foreach(h, name, v) {
        if (!strcmp(name, "__metadata__")) continue;
        st_tensor t;
        memset(&t, 0, sizeof t);
        t.name = name;
        t.file = fi;
        json_t *dt = json_object_get(v, "dtype"), *sh = json_object_get(v, "shape"),
               *off = json_object_get(v, "data_offsets");
        if (!json_is_object(v) || !json_is_string(dt) || !json_is_array(sh) ||
            !json_is_array(off) || json_array_size(off) != 2)
            return rkv_fail(RKV_EPARSE, err, errlen,
                        "%s: tensor '%s': header entry needs dtype, shape and "
                        "data_offsets [begin, end]", f->path, name);
        t.dtype = json_string_value(dt);
        t.elem_bytes = dtype_bytes(t.dtype);
        if (!t.elem_bytes)
            return rkv_fail(RKV_EPARSE, err, errlen, "%s: tensor '%s': unknown dtype \"%s\"", f->path,
                        name, t.dtype);
        if (json_array_size(sh) > ST_MAX_DIMS)
            return rkv_fail(RKV_EPARSE, err, errlen, "%s: tensor '%s': more than %d dimensions",
                        f->path, name, ST_MAX_DIMS);
        t.ndim = (int)json_array_size(sh);
        t.numel = 1;
        for (int d = 0; d < t.ndim; d++) {
            json_t *x = json_array_get(sh, (size_t)d);
            if (!json_is_integer(x) || json_integer_value(x) < 0 ||
                json_integer_value(x) > (INT64_MAX >> 4) / (t.numel ? t.numel : 1))
                return rkv_fail(RKV_EPARSE, err, errlen, "%s: tensor '%s': bad shape", f->path, name);
            t.shape[d] = json_integer_value(x);
            t.numel *= t.shape[d];
        }
        json_t *b = json_array_get(off, 0), *e = json_array_get(off, 1);
        if (!json_is_integer(b) || !json_is_integer(e) || json_integer_value(b) < 0 ||
            json_integer_value(e) < json_integer_value(b))
            return rkv_fail(RKV_EPARSE, err, errlen, "%s: tensor '%s': bad data_offsets", f->path,
                        name);
        uint64_t begin = (uint64_t)json_integer_value(b), end = (uint64_t)json_integer_value(e);
        if (end - begin != (uint64_t)t.numel * (uint64_t)t.elem_bytes)
            return rkv_fail(RKV_EPARSE, err, errlen,
                        "%s: tensor '%s': data_offsets span %llu bytes, dtype %s x shape needs "
                        "%llu", f->path, name, (unsigned long long)(end - begin), t.dtype,
                        (unsigned long long)t.numel * (unsigned long long)t.elem_bytes);
        if (end > data_size)
            return rkv_fail(RKV_EPARSE, err, errlen,
                        "%s: truncated: tensor '%s' ends at data byte %llu, the file has %llu",
                        f->path, name, (unsigned long long)end, (unsigned long long)data_size);
        t.data = data + begin;
        rkv_status s = push_tensor(st, &t);
        if (s) return s;
    }
    return check_overlap(st, first, f->path, err, errlen);
}

static rkv_status add_file(safetensors *st, const char *path, char *err, size_t errlen)
{
    if (rkv_grow32((void **)&st->files, &st->cap_files, (int64_t)st->num_files + 1,
                   sizeof *st->files))
        return RKV_ENOMEM;
    rkv_status s = map_file(path, &st->files[st->num_files], err, errlen);
    if (s) return s;
    st->num_files++;
    return parse_header(st, st->num_files - 1, err, errlen);
}

/* Sharded checkpoint: open every distinct shard the index names, then hold
 * the shards to the index exactly: every tensor of a shard is mapped to that
 * shard, every mapped tensor is in its shard, no name is in two shards. A
 * lookup then finds the tensor weight_map names and no other. */
static rkv_status open_index(safetensors *st, const char *dir, const char *index, char *err,
                             size_t errlen)
{
    json_error_t je;
    json_t *root = json_load_file(index, JSON_REJECT_DUPLICATES, &je);
    if (!root) return rkv_fail(RKV_EPARSE, err, errlen, "%s:%d: bad JSON: %s", index, je.line, je.text);
    json_t *wm = json_object_get(root, "weight_map");
    json_t *shards = json_object(), *owner = json_object();
    rkv_status s = RKV_OK;
    if (!shards || !owner) {
        s = rkv_fail(RKV_ENOMEM, err, errlen, "%s: out of host memory", index);
        goto out;
    }
    if (!json_is_object(wm)) {
        s = rkv_fail(RKV_EPARSE, err, errlen, "%s: missing object 'weight_map'", index);
        goto out;
    }
    const char *tname;
    json_t *v;
    json_object_foreach(wm, tname, v) {
        if (!json_is_string(v)) {
            s = rkv_fail(RKV_EPARSE, err, errlen, "%s: weight_map entry '%s' is not a file name",
                     index, tname);
            break;
        }
        const char *shard = json_string_value(v);
        if (!*shard || strchr(shard, '/') || !strcmp(shard, "..") || !strcmp(shard, ".")) {
            s = rkv_fail(RKV_EPARSE, err, errlen, "%s: weight_map entry '%s': shard \"%s\" is not a "
                         "file name in the checkpoint's directory", index, tname, shard);
            break;
        }
        if (json_object_get(shards, shard)) continue;
        if (json_object_set_new(shards, shard, json_integer(st->num_files))) {
            s = rkv_fail(RKV_ENOMEM, err, errlen, "%s: out of host memory", index);
            break;
        }
        char p[PATH_MAX];
        snprintf(p, sizeof p, "%s/%s", dir, shard);
        if ((s = add_file(st, p, err, errlen))) break;
    }
    /* Each tensor of each shard: once in all shards, */
    for (int i = 0; !s && i < st->num_tensors; i++) {
        const st_tensor *t = &st->tensors[i];
        json_t *o = json_object_get(owner, t->name);
        if (o)
            s = rkv_fail(RKV_EPARSE, err, errlen, "%s: tensor '%s' is in two shards, %s and %s", index,
                         t->name, st->files[json_integer_value(o)].path, st->files[t->file].path);
        else if (json_object_set_new(owner, t->name, json_integer(t->file)))
            s = rkv_fail(RKV_ENOMEM, err, errlen, "%s: out of host memory", index);
    }
    /* and mapped to its own shard. */
    for (int i = 0; !s && i < st->num_tensors; i++) {
        const st_tensor *t = &st->tensors[i];
        json_t *m = json_object_get(wm, t->name);
        if (!m)
            s = rkv_fail(RKV_EPARSE, err, errlen, "%s: tensor '%s' is not in weight_map (shard %s holds it)",
                         index, t->name, st->files[t->file].path);
        else if (json_integer_value(json_object_get(shards, json_string_value(m))) != t->file)
            s = rkv_fail(RKV_EPARSE, err, errlen, "%s: tensor '%s' is in shard %s, weight_map maps it to %s",
                         index, t->name, st->files[t->file].path, json_string_value(m));
    }
    if (!s) { /* every mapped name must exist in its shard */
        json_object_foreach(wm, tname, v) {
            if (!json_object_get(owner, tname)) {
                s = rkv_fail(RKV_EPARSE, err, errlen, "%s: tensor '%s' listed in weight_map is not in "
                         "shard %s", index, tname, json_string_value(v));
                break;
            }
        }
    }
out:
    json_decref(shards);
    json_decref(owner);
    json_decref(root);
    return s;
}

rkv_status safetensors_open(const char *path, safetensors **out, char *err, size_t errlen)
{
    *out = NULL;
    safetensors *st = calloc(1, sizeof *st);
    if (!st) return RKV_ENOMEM;
    st->headers = json_array();
    st->root = strdup(path);
    if (!st->headers || !st->root) {
        safetensors_close(st);
        return RKV_ENOMEM;
    }
    rkv_status s;
    struct stat sb;
    if (stat(path, &sb) < 0) {
        s = rkv_fail(RKV_EIO, err, errlen, "%s: %s", path, strerror(errno));
    } else if (S_ISDIR(sb.st_mode)) {
        char p[PATH_MAX];
        snprintf(p, sizeof p, "%s/model.safetensors.index.json", path);
        if (access(p, R_OK) == 0) {
            s = open_index(st, path, p, err, errlen);
        } else {
            snprintf(p, sizeof p, "%s/model.safetensors", path);
            if (access(p, R_OK) == 0)
                s = add_file(st, p, err, errlen);
            else
                s = rkv_fail(RKV_EIO, err, errlen,
                         "%s: neither model.safetensors nor model.safetensors.index.json found",
                         path);
        }
    } else {
        s = add_file(st, path, err, errlen);
    }
    if (s) {
        safetensors_close(st);
        return s;
    }
    *out = st;
    return RKV_OK;
}

void safetensors_close(safetensors *st)
{
    if (!st) return;
    for (int i = 0; i < st->num_files; i++) {
        if (st->files[i].map) munmap(st->files[i].map, st->files[i].size);
        free(st->files[i].path);
    }
    free(st->files);
    free(st->tensors);
    free(st->root);
    json_decref(st->headers);
    free(st);
}

int safetensors_count(const safetensors *st) { return st->num_tensors; }
const st_tensor *safetensors_at(const safetensors *st, int i) { return &st->tensors[i]; }
const char *safetensors_file(const safetensors *st, int i) { return st->files[i].path; }

const st_tensor *safetensors_find(const safetensors *st, const char *name)
{
    /* Linear: a checkpoint has a few hundred tensors, each looked up once. */
    for (int i = 0; i < st->num_tensors; i++)
        if (!strcmp(st->tensors[i].name, name)) return &st->tensors[i];
    return NULL;
}

float st_bf16_to_f32(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

float st_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff, u;
    if (exp == 0x1f) {
        u = sign | 0x7f800000u | (man << 13); /* inf / nan */
    } else if (exp) {
        u = sign | ((exp + 112) << 23) | (man << 13);
    } else if (man) { /* subnormal: normalise */
        int e = -1;
        do {
            man <<= 1;
            e++;
        } while (!(man & 0x400));
        u = sign | ((uint32_t)(112 - e) << 23) | ((man & 0x3ff) << 13);
    } else {
        u = sign;
    }
    float f;
    memcpy(&f, &u, 4);
    return f;
}

uint16_t st_f32_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet nan */
    u += 0x7fff + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}

uint16_t st_f32_to_f16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return sign | 0x7e00;
    if (a >= 0x477ff000u) return sign | 0x7c00; /* rounds to >= 65520: inf */
    if (a < 0x38800000u) {                       /* below 2^-14: subnormal or zero */
        if (a < 0x33000000u) return sign;        /* below half the smallest subnormal */
        uint32_t man = (a & 0x7fffff) | 0x800000;
        /* value = man * 2^(E - 150); in units of 2^-24 that is man >> (126 - E) */
        int shift = 126 - (int)(a >> 23);
        uint32_t q = man >> shift, rem = man & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1))) q++;
        return sign | (uint16_t)q;
    }
    uint32_t r = a + 0xfff + ((a >> 13) & 1);
    return sign | (uint16_t)((r - 0x38000000u) >> 13);
}

rkv_status safetensors_read_f32(const safetensors *st, const char *name, int ndim,
                                const int64_t *shape, float *dst, char *err, size_t errlen)
{
    const st_tensor *t = safetensors_find(st, name);
    if (!t) return rkv_fail(RKV_EINVAL, err, errlen, "%s: missing tensor '%s'", st->root, name);
    int same = t->ndim == ndim;
    for (int d = 0; same && d < ndim; d++) same = t->shape[d] == shape[d];
    if (!same) {
        char want[128] = "", got[128] = "";
        for (int d = 0; d < ndim; d++)
            snprintf(want + strlen(want), sizeof want - strlen(want), "%s%lld", d ? ", " : "",
                     (long long)shape[d]);
        for (int d = 0; d < t->ndim; d++)
            snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", d ? ", " : "",
                     (long long)t->shape[d]);
        return rkv_fail(RKV_EINVAL, err, errlen,
                    "%s: tensor '%s' has shape [%s], the config needs [%s]",
                    st->files[t->file].path, name, got, want);
    }
    const unsigned char *src = t->data;
    if (!strcmp(t->dtype, "F32")) {
        memcpy(dst, src, (size_t)t->numel * 4);
    } else if (!strcmp(t->dtype, "F16") || !strcmp(t->dtype, "BF16")) {
        int bf = t->dtype[0] == 'B';
        for (int64_t i = 0; i < t->numel; i++) {
            uint16_t h = (uint16_t)(src[2 * i] | (src[2 * i + 1] << 8)); /* unaligned-safe */
            dst[i] = bf ? st_bf16_to_f32(h) : st_f16_to_f32(h);
        }
    } else {
        return rkv_fail(RKV_ENOTSUP, err, errlen,
                    "%s: tensor '%s' has dtype %s; only F32, F16 and BF16 are supported",
                    st->files[t->file].path, name, t->dtype);
    }
    /* A NaN or Inf weight turns every output it touches into NaN, which the
     * sampler would read as some token: refuse it here, named. */
    for (int64_t i = 0; i < t->numel; i++)
        if (!isfinite(dst[i]))
            return rkv_fail(RKV_EINVAL, err, errlen, "%s: tensor '%s' holds %s at element %lld",
                            st->files[t->file].path, name, isnan(dst[i]) ? "NaN" : "Inf",
                            (long long)i);
    return RKV_OK;
}
