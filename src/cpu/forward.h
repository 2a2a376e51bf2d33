/* A model context: one sequence's KV cache, scratch buffers and thread pool, and the Gemma 4 forward pass
 * over it (spec section 3). */
#ifndef ELI_FORWARD_H
#define ELI_FORWARD_H

#include <stdint.h>

#include "error.h"
#include "kv_cache.h"
#include "model.h"
#include "ops.h"
#include "threadpool.h"

typedef struct eli_context_params {
    int64_t n_ctx;    /* cells of the full-attention cache; 0 = min(trained context, 4096) */
    int64_t n_ubatch; /* tokens per forward chunk (also sizes the sliding-window rings); 0 = 512 */
    uint32_t kv_type_k, kv_type_v; /* cache types of K and V, ELI_TYPE_F16 by default (eli_kv_type_from_name) */
    int n_threads;    /* 0 = number of online CPUs */
    int reference_kernels; /* 1: plain scalar reference kernels only (the "reference" backend) */
    /* 1: touch the whole KV cache, its window checkpoints and the scratch buffers at creation, so the
     * resident memory is what the planner predicts from the start and stays flat however long the
     * conversation; 0: pages become resident as they are first written (a short chat holds less);
     * -1 (the default) = environment ELIZA_LLM_RESERVE ("0" or "1"), else 1. */
    int reserve;
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

/* Decodes n tokens at positions n_past .. n_past+n-1 and advances n_past. logits may be NULL; otherwise it
 * receives n rows of n_vocab floats when all_logits is set, else the last row only. Ids outside the
 * vocabulary and context overflow are errors (nothing is changed). */
int eli_decode(eli_context *c, const int32_t *tokens, int64_t n, float *logits, int all_logits, eli_error *err);

/* What a decode returns: logits (n_vocab floats per row) and/or the final hidden state after output_norm
 * (n_embd floats per row, what embeddings and the MTP drafter use), for every row or the last only. */
typedef struct eli_outputs {
    float *logits;
    float *hidden;
    int all;
} eli_outputs;
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
/* For slot restore and window checkpoints (slot.c): the cache itself, and setting the position count after
 * the cache was rewritten to hold exactly the positions < n_past. */
eli_kv_cache *eli_context_kv_mut(eli_context *c);
void eli_context_set_n_past(eli_context *c, int64_t n_past);

/* Forgets positions >= n_keep. Returns 1 on success, 0 when the sliding-window rings no longer hold what a
 * query at n_keep would need (nothing is changed; the caller must recompute). */
int eli_context_truncate(eli_context *c, int64_t n_keep);

#endif
