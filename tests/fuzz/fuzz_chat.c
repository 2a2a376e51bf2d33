/* JSON parser + Gemma 4 chat template on arbitrary bytes: eli_json_parse, then every string of the document
 * quoted with eli_json_quote and parsed back (it must come back byte for byte) and every number's literal
 * parsed back to the same value; a document that parses is split into messages and tools and rendered
 * (the input's size picks the options), which must give a prompt starting with "<bos>" or a clean error. */
#include <string.h>

#include "chat.h"
#include "fuzz.h"
#include "json.h"

static void check_string(const char *s, size_t len) {
    char *q = eli_json_quote(s, len);
    FUZZ_ASSERT(q != NULL, "quote: out of memory");
    eli_error err = {0};
    eli_json *back = eli_json_parse(q, strlen(q), &err);
    FUZZ_ASSERT(back && back->type == ELI_JSON_STRING, "quoted string does not parse back: %s", err.msg);
    FUZZ_ASSERT(back->str_len == len && !memcmp(back->str, s, len), "quoted string parses back to other bytes");
    eli_json_free(back);
    free(q);
}

static void walk(const eli_json *v, int depth) {
    FUZZ_ASSERT(depth <= 1024, "document nested %d deep was accepted", depth);
    if (v->type == ELI_JSON_STRING) {
        check_string(v->str, v->str_len);
    } else if (v->type == ELI_JSON_NUMBER) {
        eli_error err = {0};
        eli_json *back = eli_json_parse(v->str, v->str_len, &err);
        FUZZ_ASSERT(back && back->type == ELI_JSON_NUMBER && back->number == v->number,
                    "number literal '%s' does not parse back to %g: %s", v->str, v->number, err.msg);
        eli_json_free(back);
    } else if (v->type == ELI_JSON_ARRAY || v->type == ELI_JSON_OBJECT) {
        for (size_t i = 0; i < v->n; i++) {
            if (v->type == ELI_JSON_OBJECT) {
                check_string(v->keys[i], strlen(v->keys[i]));
                FUZZ_ASSERT(eli_json_get(v, v->keys[i]) != NULL, "key '%s' not found", v->keys[i]);
            }
            walk(&v->items[i], depth + 1);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    eli_error err = {0};
    eli_json *doc = eli_json_parse((const char *)data, size, &err);
    if (!doc) {
        FUZZ_ASSERT(err.code < 0 && err.msg[0], "parse failed without a message");
        return 0;
    }
    walk(doc, 0);
    const eli_json *messages = NULL, *tools = NULL;
    if (eli_chat_split_document(doc, &messages, &tools, &err) == ELI_OK) {
        eli_chat_options opt = eli_chat_default_options();
        opt.add_generation_prompt = (size & 1) != 0;
        opt.enable_thinking = (size & 2) != 0;
        opt.tools = tools;
        char *out = NULL;
        size_t out_len = 0;
        const int rc = eli_chat_render(messages, &opt, &out, &out_len, &err);
        if (rc == ELI_OK)
            FUZZ_ASSERT(out && out_len >= 5 && !memcmp(out, "<bos>", 5) && out[out_len] == '\0', "rendered prompt");
        else
            FUZZ_ASSERT((rc == ELI_ERR_INVALID_ARG || rc == ELI_ERR_OOM) && err.msg[0], "render returned %d", rc);
        free(out);
    } else {
        FUZZ_ASSERT(err.msg[0], "split failed without a message");
    }
    eli_json_free(doc);
    return 0;
}
