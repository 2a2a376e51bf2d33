/* KV cache of one sequence. Layers that own K/V get storage; KV-shared layers get none (they read their
 * source layer's). Full-attention layers hold n_ctx cells (cell = position). Sliding-window layers hold a
 * ring of min(n_ctx, n_swa + n_ubatch) cells (cell = position mod ring size): a ubatch of up to n_ubatch
 * tokens plus the n_swa - 1 positions before it is everything its queries can see. Cells store K after
 * k_norm + RoPE and V after the weightless norm, as f32 or f16. */
#ifndef ELI_KV_CACHE_H
#define ELI_KV_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "model.h"

typedef struct eli_kv_layer {
    void *k, *v;      /* n_cells x width elements each; NULL on KV-shared layers */
    int64_t n_cells;
    int64_t width;    /* n_head_kv * head_dim */
    int32_t *cell_pos; /* position held by each cell, -1 when empty */
} eli_kv_layer;

typedef struct eli_kv_cache {
    uint32_t type; /* ELI_TYPE_F32 or ELI_TYPE_F16 */
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
/* Bytes per element of the cache type. */
size_t eli_kv_elem_size(uint32_t type);

#endif
