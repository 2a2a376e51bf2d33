/* The KV cache types by name, as the C ABI (cache_type_k / cache_type_v) and the CLI (--kv, --kv-k, --kv-v)
 * take them, and the bytes one cache row of a type takes. The ggml block types and our low-bit types
 * (kvquant.h: tbq4_0, tbq3_0, q4_polar, qjl1_256) share one id space. Whether a device can store a type for
 * a given model is the device's question (cpu/kv_cache.h, eli_kv_check_types). */
#ifndef ELI_KV_TYPES_H
#define ELI_KV_TYPES_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"

/* Cache type by name ("f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "tbq4_0", "tbq3_0",
 * "q4_polar", "qjl1_256"); -1 if unknown. */
int eli_kv_type_from_name(const char *name, uint32_t *type);
/* The names eli_kv_type_from_name knows, space-separated (for error messages). */
const char *eli_kv_type_names(void);
/* The name of a cache type id ("unknown" for an id that is none). */
const char *eli_kv_type_name(uint32_t type);
/* The number of cache types and the id of the i-th (in the order of eli_kv_type_names). */
int eli_kv_type_count(void);
uint32_t eli_kv_type_at(int i);
/* 1 when a cache of this type can hold values too (qjl1_256 only estimates q.k: keys only). */
int eli_kv_type_holds_values(uint32_t type);
/* Bytes of one cache row: n_head heads of head_dim values. 0 when the type cannot hold such heads (a block
 * that does not divide head_dim, a low-bit type at a head dim that is not a power of two in 32..512). */
size_t eli_kv_row_bytes(uint32_t type, int64_t n_head, int64_t head_dim);
/* The K and V types of a stream configuration's names (NULL or "" = f16). An unknown name, and a keys-only
 * type as V, are ELI_ERR_INVALID_ARG naming the problem (and the known names). */
int eli_kv_types_from_names(const char *k, const char *v, uint32_t *type_k, uint32_t *type_v, eli_error *err);

#endif
