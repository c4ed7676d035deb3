/* fuzz_safetensors.c - a safetensors file (8-byte header length, JSON
 * header, data): every tensor of a file that opens must lie inside the file,
 * and reading each as fp32 must stay inside it too. */
#include "fuzz_util.h"
#include "safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file(data, size, "model.safetensors");
    safetensors *st = NULL;
    char err[512] = "";
    if (safetensors_open(path, &st, err, sizeof err) != RKV_OK) return 0;
    for (int i = 0; i < safetensors_count(st); i++) {
        const st_tensor *t = safetensors_at(st, i);
        int64_t n = t->numel;
        if (n < 0 || n > (1 << 20)) continue;
        float *dst = malloc(sizeof(float) * (size_t)(n ? n : 1));
        if (!dst) continue;
        (void)safetensors_read_f32(st, t->name, t->ndim, t->shape, dst, err, sizeof err);
        free(dst);
    }
    safetensors_close(st);
    return 0;
}
