/* KV cache of one sequence. Layers that own K/V get storage; KV-shared layers get none (they read their
 * source layer's). Full-attention layers hold n_ctx cells (cell = position). Sliding-window layers hold a
 * ring of min(n_ctx, n_swa + n_ubatch) cells (cell = position mod ring size): a ubatch of up to n_ubatch
 * tokens plus the n_swa - 1 positions before it is everything its queries can see. Cells store K after
 * k_norm + RoPE and V after the weightless norm, in the cache type: f32, f16, bf16, a block format
 * (q8_0, q4_0, ...) whose block size divides the head dim, so every head starts on a block boundary, or a
 * low-bit type of kvquant.h (tbq4_0, tbq3_0, q4_polar; qjl1_256 for K only), one code block per head, which
 * attention reads without dequantizing (ops.h). The cache holds one codec per (low-bit type, head dim):
 * sliding and full layers have different head dims (256 and 512 on the real models).
 *
 * Window checkpoints: a bounded number (eli_kv_create's n_ckpt: 1 by default, 0 = none) of
 * snapshots of the sliding rings taken at a position P (the cache then held exactly the positions < P).
 * When a truncation to n_keep needs ring cells that were overwritten, the nearest checkpoint <= n_keep
 * restores the rings and only positions P .. n_keep - 1 are recomputed. Their memory is counted in
 * ckpt_bytes (allocated on the first checkpoint, reused afterwards). */
#ifndef ELI_KV_CACHE_H
#define ELI_KV_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "kvquant.h"
#include "model.h"

typedef struct eli_kv_layer {
    uint8_t *k, *v;   /* n_cells rows of row_bytes_k / row_bytes_v each; NULL on KV-shared layers */
    int64_t n_cells;
    int64_t width;    /* n_head_kv * head_dim values per row */
    size_t row_bytes_k, row_bytes_v; /* bytes of one row in the K and the V type */
    int32_t *cell_pos; /* position held by each cell, -1 when empty */
    const eli_kvq *kq, *vq; /* the codecs of a low-bit K / V type at this layer's head dim (owned by the cache), else NULL */
} eli_kv_layer;

typedef struct eli_kv_checkpoint {
    int32_t pos;   /* -1: unused */
    uint8_t *data; /* the rings of every sliding layer: cell_pos, K, V (eli_kv_checkpoint_bytes) */
} eli_kv_checkpoint;

typedef struct eli_kv_cache {
    uint32_t type_k, type_v; /* ggml type ids of K and V, chosen independently (kv_types.h names them) */
    int n_layer;
    int64_t n_ctx;
    eli_kv_layer *layers;
    eli_kvq **codecs; /* the distinct low-bit codecs the layers point at (n_codecs of them) */
    int n_codecs;
    size_t bytes; /* K/V storage allocated (rings + full layers) */
    size_t bytes_swa, bytes_full; /* the same, split by layer kind (bytes = bytes_swa + bytes_full) */
    /* window checkpoints */
    int max_ckpt;
    eli_kv_checkpoint *ckpt; /* max_ckpt entries */
    size_t ckpt_bytes;       /* allocated for checkpoints */
    int64_t n_ckpt_taken, n_ckpt_restored;
} eli_kv_cache;

/* One KV head of a cache as attention reads it (ops.h eli_attend): the row of position p is at cell
 * p % n_cells; k and v point at this head's first element (or code block) in cell 0, their rows
 * k_row_bytes / v_row_bytes apart, stored in k_type / v_type; kq / vq are the codecs of a low-bit type. */
typedef struct eli_kv_view {
    const uint8_t *k, *v;
    uint32_t k_type, v_type;
    size_t k_row_bytes, v_row_bytes;
    int64_t n_cells;
    const eli_kvq *kq, *vq;
} eli_kv_view;
/* KV head g (of head_dim d) of layer il's storage (a layer that owns K/V; heads start on block boundaries). */
eli_kv_view eli_kv_head(const eli_kv_cache *kv, int il, int g, int d);

/* Cells a layer keeps: sliding layers min(n_ctx, n_swa + n_ubatch), full layers n_ctx. */
int64_t eli_kv_layer_cells(int is_swa, int n_swa, int64_t n_ctx, int64_t n_ubatch);
/* K+V bytes eli_kv_create allocates for these parameters, split by layer kind (either pointer may be NULL);
 * returns the total. Works on a model struct without a file (only hp and the layers' geometry are read). */
size_t eli_kv_predict_bytes(const eli_model *m, int64_t n_ctx, int64_t n_ubatch, uint32_t type_k, uint32_t type_v,
                            size_t *swa, size_t *full);

/* ELI_ERR_INVALID_ARG naming the problem when a cache of these types cannot hold m's heads (unknown type,
 * blocks that do not divide a head dim, a low-bit type at a head dim that is not a power of two in
 * 32..512) or when V is a keys-only type (qjl1_256). */
int eli_kv_check_types(const eli_model *m, uint32_t type_k, uint32_t type_v, eli_error *err);
/* n_ckpt: window checkpoints kept (0..64). */
eli_kv_cache *eli_kv_create(const eli_model *m, int64_t n_ctx, int64_t n_ubatch, uint32_t type_k, uint32_t type_v,
                            int n_ckpt, eli_error *err);
void eli_kv_free(eli_kv_cache *kv);
/* Makes every page of the cache resident now: the K/V rows of every layer and all max_ckpt checkpoint
 * buffers (allocated here rather than at the first checkpoint), so that memory does not grow with the
 * conversation afterwards. ELI_ERR_OOM when a checkpoint buffer cannot be allocated. */
int eli_kv_reserve(eli_kv_cache *kv, eli_error *err);
/* Forgets every cell (and every checkpoint). */
void eli_kv_clear(eli_kv_cache *kv);
/* Stores K and V (width floats each) of position pos in layer il. */
void eli_kv_store(eli_kv_cache *kv, int il, int32_t pos, const float *k, const float *v);
/* True when layer il's cache still holds position pos. */
int eli_kv_has(const eli_kv_cache *kv, int il, int32_t pos);
/* Drops positions >= n_keep. Returns 1 when every position < n_keep that a later query can see is still
 * held (the sliding rings may have overwritten some), 0 otherwise (the cache is then unchanged).
 * Checkpoints taken after n_keep are dropped on success. */
int eli_kv_truncate(eli_kv_cache *kv, int32_t n_keep, int n_swa);
/* True when layer il's cells (any array of n_cells positions) hold everything a query at position n sees. */
int eli_kv_window_ok(const int32_t *cell_pos, int64_t n_cells, int full, int32_t n, int n_swa);

/* ---- window checkpoints ---- */
/* Bytes of one checkpoint (0 when no layer has a true ring: then truncation always succeeds). */
size_t eli_kv_checkpoint_bytes(const eli_kv_cache *kv);
/* Sets how many checkpoints are kept (0..64); frees the ones beyond. */
void eli_kv_set_max_checkpoints(eli_kv_cache *kv, int n);
/* Snapshots the rings as they are at position pos (the caller guarantees the cache holds exactly the
 * positions < pos). Replaces the oldest checkpoint when all are used. Returns 1 taken, 0 not needed or
 * not possible (no rings, max 0, out of memory: checkpoints are an optimisation). */
int eli_kv_checkpoint_take(eli_kv_cache *kv, int32_t pos);
/* For a truncation to n_keep that eli_kv_truncate refused: restores the rings from the checkpoint with the
 * highest usable position r <= n_keep, drops positions >= r everywhere and returns r (the caller recomputes
 * r .. n_keep - 1). -1 when no checkpoint is usable (the cache is unchanged). */
int32_t eli_kv_checkpoint_restore(eli_kv_cache *kv, int32_t n_keep, int n_swa);

/* ---- the cells as bytes (slot files) ----
 * Per layer: its index, whether it has storage; with storage its cells, K and V row bytes, the number of
 * used cells, then their positions (in cell order; cell = position mod n_cells), their K rows, their V
 * rows. put receives the bytes in order. */
void eli_kv_save(const eli_kv_cache *kv, void (*put)(void *w, const void *p, size_t n), void *w);
/* The bytes of eli_kv_save for a cache that held exactly the positions < n_past: every record is checked
 * against this cache (cells, row sizes, positions in range and in order, what a query at n_past needs)
 * before any cell is replaced. ELI_ERR_INVALID_ARG naming the problem, nothing changed. */
int eli_kv_load(eli_kv_cache *kv, const uint8_t *p, size_t n, int32_t n_past, int n_swa, eli_error *err);

#endif
