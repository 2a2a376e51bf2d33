/* The KV cache types by name, as the C ABI (cache_type_k / cache_type_v) and the CLI (--kv, --kv-k, --kv-v)
 * take them. Whether a device can store a type for a given model is the device's question
 * (cpu/kv_cache.h, eli_kv_check_type). */
#ifndef ELI_KV_TYPES_H
#define ELI_KV_TYPES_H

#include <stdint.h>

#include "error.h"

/* Cache type by name ("f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1"); -1 if unknown. */
int eli_kv_type_from_name(const char *name, uint32_t *type);
/* The names eli_kv_type_from_name knows, space-separated (for error messages). */
const char *eli_kv_type_names(void);
/* The K and V types of a stream configuration's names (NULL or "" = f16). An unknown name is
 * ELI_ERR_INVALID_ARG naming it and the known ones; a name the eliza hosts pass that this build does not
 * have yet is ELI_ERR_NOT_IMPLEMENTED. */
int eli_kv_types_from_names(const char *k, const char *v, uint32_t *type_k, uint32_t *type_v, eli_error *err);

#endif
