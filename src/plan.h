/* Memory planner: what a stream of a model costs in resident memory, predicted from the same code that
 * allocates it (the default executor's plan, exec.h) plus the mapping's touched bytes.
 *
 *   weights resident  file bytes that decoding touches: every tensor except the per-layer-embedding (PLE)
 *                     table, plus the header/metadata (read at load). The matrices are copied out of the
 *                     mapping into anonymous memory at load (pack.h) and their file pages dropped, so the
 *                     count is the same (packed Q4_K takes 2.8% more than its file bytes: not counted).
 *   PLE table         not resident at all: its rows are read from the file one per token with pread
 *                     (eli_model_ple_row, POSIX_FADV_RANDOM) into a one-row scratch buffer, so they live in
 *                     the page cache, not in this process.
 *   KV                sliding rings and full layers separately (per the cache type's row size), plus the
 *                     window checkpoints (n_ckpt snapshots of the rings).
 *   scratch           eli_context_create's buffers and the matmul activation-conversion buffer.
 *   session           per-stream token history, logits, hidden state, sampler arrays.
 *   tokenizer         its heap (measured when a file is given and glibc's mallinfo2 is available, else an
 *                     estimate from the vocabulary).
 *   baseline          the process itself (binary, libc, touched thread stacks): a constant estimate.
 * peak RSS is their sum: what a stream holds from its creation on (the context reserves its KV and
 * scratch by default, eli_context_params.reserve), however long the conversation. */
#ifndef ELI_PLAN_H
#define ELI_PLAN_H

#include <stdint.h>

#include "error.h"
#include "model.h"

typedef struct eli_plan_params {
    int64_t n_ctx;    /* 0 = 4096 (clamped to the trained context) */
    int64_t n_ubatch; /* 0 = 512 */
    uint32_t kv_type_k, kv_type_v; /* ELI_TYPE_F16 default */
    int n_threads;    /* 0 = online CPUs */
    int n_ckpt;       /* window checkpoints per stream (0..64); 1 by default */
} eli_plan_params;

eli_plan_params eli_plan_default_params(void);

typedef struct eli_plan {
    int64_t n_ctx, n_ubatch, swa_cells;
    int n_threads, n_ckpt;
    uint64_t file_bytes, weights_resident, ple_table;
    uint64_t kv_swa, kv_full, kv_ckpt;
    uint64_t scratch, session, tokenizer, baseline;
    uint64_t peak_rss;
} eli_plan;

/* For a loaded model (m->file set). tokenizer_bytes: measured heap of its tokenizer, 0 = estimate. */
int eli_plan_model(const eli_model *m, const eli_plan_params *p, uint64_t tokenizer_bytes, eli_plan *out, eli_error *err);
/* For the true geometry of a Gemma 4 size ("e2b", "e4b", "12b", "31b", "26b-a4b"; spec section 4) and a
 * weight type ("f16", "q8_0", "q4_0", "q4_k_m", llama-quantize's type choices), without any file. */
int eli_plan_arch(const char *arch, const char *wtype, const eli_plan_params *p, eli_plan *out, eli_error *err);
/* The largest context (<= the trained one) whose peak RSS fits in bytes, for the model or arch as above
 * (m NULL: arch/wtype); 0 when not even 1 position fits. */
int64_t eli_plan_fit(const eli_model *m, const char *arch, const char *wtype, const eli_plan_params *p,
                     uint64_t tokenizer_bytes, uint64_t bytes, eli_error *err);

/* The bytes one position takes in a KV cache of this type (K or V alike), summed over the layers that store
 * K/V: *full on the full-attention layers (one row per position of the context), *swa on the sliding ones
 * (one row per ring cell); *elems the values they hold (both kinds). 0 bytes where the type cannot hold the
 * geometry's heads. For the model or arch as eli_plan_fit takes them (m NULL: arch/wtype). */
int eli_plan_kv_type_bytes(const eli_model *m, const char *arch, const char *wtype, uint32_t type, uint64_t *full,
                           uint64_t *swa, uint64_t *elems, eli_error *err);

/* Resident bytes of the PLE table's range: mapped into this process (/proc/self/pagemap present bits; what
 * counts toward RSS) and in the page cache (mincore). Either is UINT64_MAX when it cannot be read. */
void eli_plan_ple_resident(const eli_model *m, uint64_t *mapped, uint64_t *cached);
/* VmRSS / VmHWM of this process in bytes (0 when unavailable). */
uint64_t eli_plan_vm_rss(void);
uint64_t eli_plan_vm_hwm(void);

#endif
