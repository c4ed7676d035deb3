/* fuzz_chat_template.c - chat messages (OpenAI JSON) through the built-in
 * renderers: each renders or is refused with a message naming messages; a
 * rendering is valid UTF-8 that holds every message's role. The input as a
 * template's own text is refused by name unless it is a known one. Byte 0
 * picks the template (bit 0: qwen2.5 or a llama one, bits 2-3: which llama)
 * and add_generation_prompt (bit 1). */
#include <jansson.h>

#include "chat_template.h"
#include "fuzz_util.h"
#include "tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    static const char *const names[] = {"qwen2.5", "llama-3", "llama-3.1", "llama-3.2"};
    size_t pick = (data[0] & 1) ? 1 + (size_t)((data[0] >> 2) & 3) % 3 : 0;
    chat_template *ct;
    char err[512];
    if (chat_template_by_name(names[pick], "<|begin_of_text|>", "<|eot_id|>", &ct, err,
                              sizeof err) != RKV_OK)
        abort();
    json_t *msgs = json_loadb((const char *)data + 1, size - 1, JSON_ALLOW_NUL, NULL);
    if (msgs) {
        char *s;
        size_t n;
        rkv_status st = chat_template_render_json(ct, msgs, data[0] & 2, &s, &n, err, sizeof err);
        if (st == RKV_OK) {
            if (utf8_valid_prefix((const uint8_t *)s, n) != n) abort();
            for (size_t i = 0; i < json_array_size(msgs); i++) {
                const char *role = json_string_value(json_object_get(json_array_get(msgs, i), "role"));
                /* qwen2.5 writes only the roles it knows; the llama ones every one */
                if ((data[0] & 1) && role && !memmem(s, n, role, strlen(role))) abort();
            }
            free(s);
        } else if (st != RKV_ENOMEM && !strstr(err, "messages")) {
            abort();
        }
        json_decref(msgs);
    }
    chat_template_free(ct);
    char *text = malloc(size);
    if (!text) return 0;
    memcpy(text, data + 1, size - 1);
    text[size - 1] = 0;
    if (chat_template_create(text, "fuzz.jinja", "<s>", NULL, &ct, err, sizeof err) == RKV_OK)
        chat_template_free(ct);
    else if (!strstr(err, "fuzz.jinja")) abort();
    free(text);
    return 0;
}
