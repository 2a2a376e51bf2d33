/* Stream state on disk (save_slot / restore_slot) and window checkpoints for exact prefix reuse.
 *
 * Slot file, version 4 (little-endian, native layout of the fields below):
 *   header   magic "ELISLOT\0", version, endian marker 0x01020304, model identity hash, model geometry
 *            (n_layer, n_embd, n_vocab, n_swa), stream config (n_ctx, n_ubatch, the K and V cache types:
 *            version 3 had one type for both and is refused), flags (pending,
 *            logits valid, done, MTP, hidden valid), n_tokens, n_past, n_generated, the size of the sampler's
 *            state (u64, then 3 reserved u64: a restored stream at temperature > 0 continues exactly;
 *            version 1 lacked the random state and is refused),
 *            then the MTP state when the stream drafts (eli_spec_resume: window, pause, pause length,
 *            reserved u32, random state u64, acceptance counts 2 x f64; zeros otherwise; version 2 lacked
 *            it and is refused, as a restored sampled MTP stream would not continue exactly)
 *   tokens   n_tokens int32 (the committed positions)
 *   logits   n_vocab float32, only when the logits-valid flag is set
 *   hidden   n_embd float32, the final hidden state of the last cached position (the drafter's input),
 *            only when the hidden-valid flag is set
 *   sampler  the sampler's state (eli_sampler_save: the random stream and every stage's, such as the
 *            penalties' history or a grammar's position)
 *   layers   per layer: index, has-storage; with storage: n_cells, K and V row bytes, n_used, then n_used positions
 *            (in increasing cell order; cell = position mod n_cells), their K rows, their V rows
 *   checksum 64-bit xxh64-style hash of every byte before it
 * Written atomically (fileio.h). Restore maps the file, checks the checksum first (truncated or corrupted
 * files fail there), then magic/version, the model identity and the config (a mismatch names what differs),
 * then every count and position against the live cache; nothing is changed unless all of it passes. */
#ifndef ELI_SLOT_H
#define ELI_SLOT_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "forward.h"
#include "model.h"
#include "sampler.h"
#include "speculative.h"

#define ELI_SLOT_VERSION 4

/* Streaming 64-bit hash (the XXH64 construction, seed 0). */
typedef struct eli_hash64 {
    uint64_t v[4];
    uint64_t total;
    uint8_t buf[32];
    size_t n_buf;
} eli_hash64;
void eli_hash64_init(eli_hash64 *h);
void eli_hash64_update(eli_hash64 *h, const void *data, size_t len);
uint64_t eli_hash64_final(const eli_hash64 *h);
uint64_t eli_hash64_bytes(const void *data, size_t len);

/* Identity of a model: the hash of its GGUF header, metadata and tensor directory (the file bytes before
 * the tensor data: two files with the same weights layout and metadata but different weights are told
 * apart by the tensor offsets only when sizes differ, which is why the first 4 KiB of tensor data are
 * hashed too). */
uint64_t eli_model_identity(const eli_model *m);

/* What a generation session adds to the KV cache. */
typedef struct eli_slot_state {
    int32_t *tokens; /* on load: malloc'ed, cap_tokens entries (>= n_tokens, >= 1); the caller owns it */
    int64_t n_tokens, cap_tokens;
    int pending, logits_valid, hidden_valid, done;
    int64_t n_generated;
    eli_sampler *sampler; /* save: its state is written; restore: it is loaded (NULL: none) */
    int has_mtp;     /* the stream drafts: mtp holds its state (eli_spec_get_resume) */
    eli_spec_resume mtp;
} eli_slot_state;

/* n_ubatch: the session's configured value (0 = default), resolved like eli_context_create does. */
int eli_slot_save(const char *path, const eli_model *m, eli_context *ctx, int64_t n_ubatch, const eli_slot_state *st,
                  const float *logits, const float *hidden, eli_error *err);
/* On success the cache holds the file's cells, n_past is set, logits (n_vocab floats) and hidden (n_embd)
 * receive the saved ones when they were valid, and *st the rest. On failure nothing is changed. */
int eli_slot_restore(const char *path, const eli_model *m, eli_context *ctx, int64_t n_ubatch, eli_slot_state *st,
                     float *logits, float *hidden, eli_error *err);

/* ---- window checkpoints over a context (see kv_cache.h) ---- */
/* Takes a checkpoint at the context's current position (no-op without rings). */
void eli_slot_checkpoint(eli_context *ctx);
/* Truncates the context to n_keep if the rings allow it (returns n_keep), else restores the nearest
 * checkpoint r <= n_keep and returns r (the caller decodes r .. n_keep - 1), else returns -1 (nothing changed). */
int64_t eli_slot_resume(eli_context *ctx, int64_t n_keep);

#endif
