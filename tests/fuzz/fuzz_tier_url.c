/* fuzz_tier_url.c - the remote tier's URL (--tier-remote redis://HOST:PORT[/DB]):
 * parsing any string either fails with a reason or gives a host that fits
 * its buffer, a port in [1, 65535] and a database in [0, 1023]. */
#include "fuzz_util.h"
#include "tier_remote.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *url = malloc(size + 1);
    if (!url) return 0;
    memcpy(url, data, size);
    url[size] = 0;
    char host[64], why[128] = "";
    int port = -1, db = -1;
    if (tier_remote_parse_url(url, host, sizeof host, &port, &db, why, sizeof why) == 0) {
        if (strnlen(host, sizeof host) >= sizeof host || !host[0]) abort();
        if (port < 1 || port > 65535 || db < 0 || db > 1023) abort();
        if (strncmp(url, "redis://", 8)) abort();
    } else if (!why[0]) {
        abort(); /* a refusal always says why */
    }
    free(url);
    return 0;
}
