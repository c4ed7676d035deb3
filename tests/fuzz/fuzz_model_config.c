/* fuzz_model_config.c - Hugging Face config.json: a config that loads must
 * pass model_config_check (the model is built from it without more checks). */
#include "fuzz_util.h"
#include "model_config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file(data, size, "config.json");
    model_config mc;
    char err[512] = "";
    if (model_config_from_json(path, &mc, err, sizeof err) == RKV_OK) {
        if (model_config_check(&mc, err, sizeof err) != RKV_OK) abort();
        char buf[256];
        model_config_describe(&mc, buf, sizeof buf);
        (void)model_config_num_params(&mc);
        (void)model_config_kv_bytes_per_token(&mc, 2);
    }
    return 0;
}
