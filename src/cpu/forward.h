/* A model context: one sequence's KV cache, scratch buffers and thread pool, and the Gemma 4 forward pass
 * over it (spec section 3). */
#ifndef ELI_FORWARD_H
#define ELI_FORWARD_H

#include <stdint.h>

#include "error.h"
#include "exec.h"
#include "kv_cache.h"
#include "model.h"
#include "ops.h"
#include "threadpool.h"

typedef struct eli_context_params {
    int64_t n_ctx;    /* cells of the full-attention cache; 0 = min(trained context, 4096) */
    int64_t n_ubatch; /* tokens per forward chunk (also sizes the sliding-window rings); 0 = 512 */
    uint32_t kv_type_k, kv_type_v; /* cache types of K and V, ELI_TYPE_F16 by default (kv_types.h) */
    int n_threads;    /* 0 = number of online CPUs */
    const eli_kernels *kernels; /* the kernel table; NULL = eli_kernels_best() (the reference table: the
                                 * "reference" executor, plain scalar code and no fused attention) */
    /* 1 (the default): touch the whole KV cache, its window checkpoints and the scratch buffers at
     * creation, so the resident memory is what the planner predicts from the start and stays flat however
     * long the conversation; 0: pages become resident as they are first written (a short chat holds less) */
    int reserve;
    int n_ckpt; /* sliding-window checkpoints kept (kv_cache.h), 0..64; 1 by default */
} eli_context_params;

eli_context_params eli_context_default_params(void);

typedef struct eli_context eli_context;

eli_context *eli_context_create(const eli_model *m, const eli_context_params *p, eli_error *err);
void eli_context_free(eli_context *c);

/* Number of positions already in the cache. */
int64_t eli_context_n_past(const eli_context *c);
int64_t eli_context_n_ctx(const eli_context *c);
const eli_model *eli_context_model(const eli_context *c);
/* Drops everything: the next decode starts at position 0. */
void eli_context_reset(eli_context *c);

/* Decodes a batch (exec.h: token ids or embedding rows, bidirectional spans) at positions n_past .. and
 * advances n_past; everything is checked first (ids, sizes, spans), and an error changes nothing. */
int eli_decode_batch(eli_context *c, const eli_batch *b, const eli_outputs *out, eli_error *err);

/* Decodes n tokens at positions n_past .. n_past+n-1 and advances n_past. logits may be NULL; otherwise it
 * receives n rows of n_vocab floats when all_logits is set, else the last row only. Ids outside the
 * vocabulary and context overflow are errors (nothing is changed). */
int eli_decode(eli_context *c, const int32_t *tokens, int64_t n, float *logits, int all_logits, eli_error *err);

int eli_decode_ex(eli_context *c, const int32_t *tokens, int64_t n, const eli_outputs *out, eli_error *err);

/* What a second model reading this context's cache needs (the MTP drafter, drafter.c). */
const eli_kv_cache *eli_context_kv(const eli_context *c);
eli_pool *eli_context_pool(eli_context *c);
const eli_kernels *eli_context_kernels(const eli_context *c);

/* Bytes of the scratch buffers eli_context_create allocates for these parameters (computed by the same
 * code), and an upper bound of the activation-conversion buffer that grows during the first decodes. Only
 * m->hp and the layers' geometry are read (a model struct without a file works). 0 on invalid params. */
size_t eli_context_scratch_bytes(const eli_model *m, const eli_context_params *p);
size_t eli_context_qbuf_bound(const eli_model *m, const eli_context_params *p);
/* The cache itself (tests look into it). */
eli_kv_cache *eli_context_kv_mut(eli_context *c);
/* The parameters as resolved at creation (defaults and clamps applied). */
eli_context_params eli_context_get_params(const eli_context *c);

/* A window checkpoint at n_past (kv_cache.h; nothing without rings). */
void eli_context_checkpoint(eli_context *c);
/* Truncates to n_keep if the rings allow it (returns n_keep), else restores the nearest checkpoint
 * r <= n_keep and returns r (the caller decodes r .. n_keep - 1), else returns -1 (nothing changed). */
int64_t eli_context_resume(eli_context *c, int64_t n_keep);
/* The state for slot files: n_past (int64), then the cache's cells (eli_kv_save); load checks it all
 * against this context before changing anything. */
void eli_context_save_state(const eli_context *c, void (*put)(void *w, const void *p, size_t n), void *w);
int eli_context_load_state(eli_context *c, const uint8_t *p, size_t n, eli_error *err);

/* Forgets positions >= n_keep. Returns 1 on success, 0 when the sliding-window rings no longer hold what a
 * query at n_keep would need (nothing is changed; the caller must recompute). */
int eli_context_truncate(eli_context *c, int64_t n_keep);

#endif
