#include "kv_types.h"

#include <string.h>

#include "kvquant.h"
#include "quants.h"

/* The cache types by name, in one list for the lookup and for the names printed in errors. */
#define KV_TYPES(X)                                                                                                  \
    X("f32", ELI_TYPE_F32) X("f16", ELI_TYPE_F16) X("bf16", ELI_TYPE_BF16) X("q8_0", ELI_TYPE_Q8_0)                 \
    X("q4_0", ELI_TYPE_Q4_0) X("q4_1", ELI_TYPE_Q4_1) X("q5_0", ELI_TYPE_Q5_0) X("q5_1", ELI_TYPE_Q5_1)             \
    X("tbq4_0", ELI_KV_TBQ4_0) X("tbq3_0", ELI_KV_TBQ3_0) X("q4_polar", ELI_KV_Q4_POLAR) X("qjl1_256", ELI_KV_QJL1_256)
#define KV_ENTRY(n, t) {n, t},
#define KV_NAME(n, t) " " n

static const struct {
    const char *name;
    uint32_t type;
} kv_names[] = {KV_TYPES(KV_ENTRY)};
#define N_KV_TYPES ((int)(sizeof kv_names / sizeof kv_names[0]))

int eli_kv_type_from_name(const char *name, uint32_t *type) {
    for (int i = 0; name && i < N_KV_TYPES; i++)
        if (!strcmp(name, kv_names[i].name)) {
            *type = kv_names[i].type;
            return 0;
        }
    return -1;
}

const char *eli_kv_type_names(void) { return &KV_TYPES(KV_NAME)[1]; } /* past the leading separator */

const char *eli_kv_type_name(uint32_t type) {
    for (int i = 0; i < N_KV_TYPES; i++)
        if (kv_names[i].type == type) return kv_names[i].name;
    return "unknown";
}

int eli_kv_type_count(void) { return N_KV_TYPES; }

uint32_t eli_kv_type_at(int i) { return kv_names[i].type; }

int eli_kv_type_holds_values(uint32_t type) { return !eli_kvq_keys_only(type); }

size_t eli_kv_row_bytes(uint32_t type, int64_t n_head, int64_t head_dim) {
    if (n_head < 0 || head_dim < 0) return 0;
    if (eli_kvq_is_type(type)) return (size_t)n_head * eli_kvq_head_bytes(type, head_dim);
    /* a block type must start every head on a block boundary */
    const eli_type_traits *tt = eli_type_info(type);
    if (!tt || head_dim % tt->block_size) return 0;
    return eli_row_size(type, n_head * head_dim);
}

static int type_of_config(const char *what, const char *name, uint32_t *type, eli_error *err) {
    if (!name || !*name) name = "f16";
    if (eli_kv_type_from_name(name, type))
        return eli_fail(err, ELI_ERR_INVALID_ARG, "unknown %s '%s' (known: %s)", what, name, eli_kv_type_names());
    return ELI_OK;
}

int eli_kv_types_from_names(const char *k, const char *v, uint32_t *type_k, uint32_t *type_v, eli_error *err) {
    int rc = type_of_config("cache_type_k", k, type_k, err);
    if (rc || (rc = type_of_config("cache_type_v", v, type_v, err))) return rc;
    if (!eli_kv_type_holds_values(*type_v))
        return eli_fail(err, ELI_ERR_INVALID_ARG,
                        "cache_type_v '%s' holds keys only (QJL estimates q.k, it cannot give the values back): use it as "
                        "cache_type_k with another V type",
                        v);
    return ELI_OK;
}
