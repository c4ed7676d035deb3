/* safetensors.h - read-only, memory-mapped safetensors checkpoints.
 *
 * File layout (little-endian):
 *
 *   +----------+---------------------------+-------------------------------+
 *   | u64 N    | N bytes of JSON header    | data: tensors at data_offsets  |
 *   +----------+---------------------------+-------------------------------+
 *   header: {"name": {"dtype": "F32", "shape": [r, c], "data_offsets": [b, e]},
 *            ..., "__metadata__": {...}}   offsets relative to the data start
 *
 * A checkpoint is one file, or a directory with model.safetensors, or a
 * directory with model.safetensors.index.json whose "weight_map" names the
 * shard of every tensor. Every header is validated when opened (offsets inside
 * the file, sizes matching dtype x shape), so a truncated file fails at open.
 *
 * Ownership: the handle owns its mappings; tensor pointers stay valid until
 * safetensors_close(). Errors name the file and the tensor.
 */
#ifndef RKV_SAFETENSORS_H
#define RKV_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "rkv_status.h"

enum { ST_MAX_DIMS = 8 };

typedef struct st_tensor {
    const char *name;
    const char *dtype;             /* as in the header: "F32", "BF16", ... */
    int elem_bytes;
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    int64_t numel;
    const void *data;              /* inside the mapping, maybe unaligned */
    int file;                      /* index of the shard that holds it */
} st_tensor;

typedef struct safetensors safetensors;

/* Open a file or a directory (see above). RKV_EIO: missing/unreadable;
 * RKV_EPARSE: bad header, unknown dtype, truncated data. */
rkv_status safetensors_open(const char *path, safetensors **out, char *err, size_t errlen);
void safetensors_close(safetensors *st);

int safetensors_count(const safetensors *st);
const st_tensor *safetensors_at(const safetensors *st, int i);
/* NULL when absent. */
const st_tensor *safetensors_find(const safetensors *st, const char *name);
/* Path of shard i (for messages). */
const char *safetensors_file(const safetensors *st, int i);

/* Copy tensor `name` into dst as fp32, converting F16/BF16. The shape must be
 * exactly shape[0..ndim). Missing tensor, other shape or a dtype other than
 * F32/F16/BF16: RKV_EINVAL / RKV_ENOTSUP with the tensor named. */
rkv_status safetensors_read_f32(const safetensors *st, const char *name, int ndim,
                                const int64_t *shape, float *dst, char *err, size_t errlen);

/* Scalar conversions (exposed for tests). */
float st_f16_to_f32(uint16_t h);
float st_bf16_to_f32(uint16_t b);
uint16_t st_f32_to_f16(float f);  /* round to nearest even */
uint16_t st_f32_to_bf16(float f); /* round to nearest even */

#endif
