#include "kv_types.h"

#include <string.h>

#include "quants.h"

/* The cache types by name, in one list for the lookup and for the names printed in errors. */
#define KV_TYPES(X) X("f32", F32) X("f16", F16) X("bf16", BF16) X("q8_0", Q8_0) X("q4_0", Q4_0) X("q4_1", Q4_1) \
    X("q5_0", Q5_0) X("q5_1", Q5_1)
#define KV_ENTRY(n, t) {n, ELI_TYPE_##t},
#define KV_NAME(n, t) " " n

static const struct {
    const char *name;
    uint32_t type;
} kv_names[] = {KV_TYPES(KV_ENTRY)};

int eli_kv_type_from_name(const char *name, uint32_t *type) {
    for (size_t i = 0; name && i < sizeof kv_names / sizeof kv_names[0]; i++)
        if (!strcmp(name, kv_names[i].name)) {
            *type = kv_names[i].type;
            return 0;
        }
    return -1;
}

const char *eli_kv_type_names(void) { return &KV_TYPES(KV_NAME)[1]; } /* past the leading separator */

static int type_of_config(const char *what, const char *name, uint32_t *type, eli_error *err) {
    /* the low-bit types the eliza hosts pass (../shared/spec/ffi.md) */
    static const char *const planned[] = {"qjl1_256", "q4_polar", "tbq3_0", "tbq4_0"};
    if (!name || !*name) name = "f16";
    if (!eli_kv_type_from_name(name, type)) return ELI_OK;
    for (size_t i = 0; i < sizeof planned / sizeof planned[0]; i++)
        if (!strcmp(name, planned[i]))
            return eli_fail(err, ELI_ERR_NOT_IMPLEMENTED, "%s '%s' is not supported yet in this build (known: %s)", what, name,
                            eli_kv_type_names());
    return eli_fail(err, ELI_ERR_INVALID_ARG, "unknown %s '%s' (known: %s)", what, name, eli_kv_type_names());
}

int eli_kv_types_from_names(const char *k, const char *v, uint32_t *type_k, uint32_t *type_v, eli_error *err) {
    int rc = type_of_config("cache_type_k", k, type_k, err);
    return rc ? rc : type_of_config("cache_type_v", v, type_v, err);
}
