/* KV cache of one sequence. Layers that own K/V get storage; KV-shared layers get none (they read their
 * source layer's). Full-attention layers hold n_ctx cells (cell = position). Sliding-window layers hold a
 * ring of min(n_ctx, n_swa + n_ubatch) cells (cell = position mod ring size): a ubatch of up to n_ubatch
 * tokens plus the n_swa - 1 positions before it is everything its queries can see. Cells store K after
 * k_norm + RoPE and V after the weightless norm, in the cache type: f32, f16, bf16 or a block format
 * (q8_0, q4_0, ...) whose block size divides the head dim, so every head starts on a block boundary. */
#ifndef ELI_KV_CACHE_H
#define ELI_KV_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "model.h"

typedef struct eli_kv_layer {
    uint8_t *k, *v;   /* n_cells rows of row_bytes each; NULL on KV-shared layers */
    int64_t n_cells;
    int64_t width;    /* n_head_kv * head_dim values per row */
    size_t row_bytes; /* bytes of one row in the cache type */
    int32_t *cell_pos; /* position held by each cell, -1 when empty */
} eli_kv_layer;

typedef struct eli_kv_cache {
    uint32_t type; /* a ggml type id (see eli_kv_type_from_name) */
    int n_layer;
    int64_t n_ctx;
    eli_kv_layer *layers;
    size_t bytes; /* K/V storage allocated */
} eli_kv_cache;

eli_kv_cache *eli_kv_create(const eli_model *m, int64_t n_ctx, int64_t n_ubatch, uint32_t type, eli_error *err);
void eli_kv_free(eli_kv_cache *kv);
/* Forgets every cell. */
void eli_kv_clear(eli_kv_cache *kv);
/* Stores K and V (width floats each) of position pos in layer il. */
void eli_kv_store(eli_kv_cache *kv, int il, int32_t pos, const float *k, const float *v);
/* True when layer il's cache still holds position pos. */
int eli_kv_has(const eli_kv_cache *kv, int il, int32_t pos);
/* Cache type by name ("f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1"); -1 if unknown. */
int eli_kv_type_from_name(const char *name, uint32_t *type);
/* Drops positions >= n_keep. Returns 1 when every position < n_keep that a later query can see is still
 * held (the sliding rings may have overwritten some), 0 otherwise (the cache is then unchanged). */
int eli_kv_truncate(eli_kv_cache *kv, int32_t n_keep, int n_swa);

#endif
