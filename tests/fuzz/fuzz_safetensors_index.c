/* fuzz_safetensors_index.c - a sharded checkpoint's
 * model.safetensors.index.json, beside two fixed shards (a.safetensors holds
 * x and y, b.safetensors holds z). A checkpoint that opens must hold exactly
 * the tensors its weight_map names, each from the shard it names; one that
 * does not open must say why. */
#include <errno.h>
#include <sys/stat.h>

#include "fuzz_util.h"
#include "safetensors.h"

static char dir[256];

static void write_shard(const char *name, const char *header, size_t data_bytes)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "wb");
    if (!f) abort();
    uint64_t n = strlen(header);
    for (int i = 0; i < 8; i++) fputc((int)(n >> (8 * i)) & 0xff, f);
    fputs(header, f);
    for (size_t i = 0; i < data_bytes; i++) fputc(0, f);
    fclose(f);
}

static void remove_dir(void)
{
    const char *names[] = {"a.safetensors", "b.safetensors", "model.safetensors.index.json"};
    char p[512];
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        unlink(p);
    }
    rmdir(dir);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!dir[0]) {
        const char *tmp = getenv("TMPDIR");
        if (!tmp || !*tmp) tmp = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
        snprintf(dir, sizeof dir, "%s/rkv-fuzz-%ld-index", tmp, (long)getpid());
        if (mkdir(dir, 0700) && errno != EEXIST) abort();
        atexit(remove_dir);
        write_shard("a.safetensors",
                    "{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                    "\"y\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}", 12);
        write_shard("b.safetensors", "{\"z\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4);
    }
    char p[512];
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", dir);
    FILE *f = fopen(p, "wb");
    if (!f) abort();
    if (size && fwrite(data, 1, size, f) != size) abort();
    fclose(f);
    safetensors *st = NULL;
    char err[512] = "";
    if (safetensors_open(dir, &st, err, sizeof err) != RKV_OK) {
        if (!err[0]) abort();
        return 0;
    }
    /* Opened: every tensor found comes from the shard that holds it. */
    for (int i = 0; i < safetensors_count(st); i++) {
        const st_tensor *t = safetensors_at(st, i);
        const char *file = safetensors_file(st, t->file);
        const char *want = strcmp(t->name, "z") ? "/a.safetensors" : "/b.safetensors";
        if (strlen(file) < strlen(want) || strcmp(file + strlen(file) - strlen(want), want)) abort();
        if (safetensors_find(st, t->name) != t) abort();
        float buf[2];
        int64_t shape[1] = {t->shape[0]};
        if (t->numel <= 2 && safetensors_read_f32(st, t->name, 1, shape, buf, err, sizeof err) != RKV_OK)
            abort();
    }
    safetensors_close(st);
    return 0;
}
