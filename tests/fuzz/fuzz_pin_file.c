/* fuzz_pin_file.c - pin files (cache-sim's reading: no backend) into a small
 * radix cache; afterwards the pins must check and release to an empty,
 * consistent cache. */
#include "cache.h"
#include "cache_pin.h"
#include "fuzz_util.h"
#include "pin_file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file(data, size, "pins.jsonl");
    page_pool pool;
    if (page_pool_init(&pool, 64, 2) != RKV_OK) abort();
    cache_config cfg = {"radix", NULL, NULL, NULL};
    cache *c = NULL;
    char err[512] = "";
    if (cache_create(&cfg, &pool, &c, err, sizeof err) != RKV_OK) abort();
    cache_pins pins;
    cache_pins_init(&pins);
    pin_file_stats ps;
    rkv_status st = pin_file_apply(c, NULL, path, 0, &pins, &ps, err, sizeof err);
    if (st != RKV_OK && !strstr(err, path)) abort();
    if (st == RKV_OK && cache_pins_check(c, &pins, err, sizeof err) != RKV_OK) abort();
    cache_pins_release(c, &pins);
    cache_pins_free(&pins);
    if (cache_check(c, err, sizeof err) != RKV_OK) abort();
    cache_destroy(c);
    if (pool.num_free != pool.num_pages) abort();
    page_pool_destroy(&pool);
    return 0;
}
