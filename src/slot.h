/* Stream state on disk (save_slot / restore_slot).
 *
 * Slot file, version 5 (little-endian, native layout of the fields below):
 *   header   magic "ELISLOT\0", version, endian marker 0x01020304, model identity hash, model geometry
 *            (n_layer, n_embd, n_vocab, n_swa), the sequence's shape (n_ctx, n_ubatch, the K and V cache
 *            types), flags (pending, logits valid, done, MTP, hidden valid), n_tokens, n_past, n_generated,
 *            the sizes of the sampler's and the sequence's states (u64 each), n_media (u64), a reserved u64, then the
 *            MTP state when the stream drafts (eli_spec_resume: window, pause, pause length, reserved u32,
 *            random state u64, acceptance counts 2 x f64; zeros otherwise)
 *   tokens   n_tokens int32 (the committed positions; one more than n_past when the last generated token is
 *            pending, which a full context never caches; ELI_MEDIA_ID where a position is an embedding row)
 *   media    per media span (n_media, in the header): pos, n (i64 each), bidir, reserved (u32 each), then its
 *            n rows of n_embd float32; the spans are in order, disjoint, and cover exactly the ELI_MEDIA_ID
 *            positions
 *   logits   n_vocab float32, only when the logits-valid flag is set
 *   hidden   n_embd float32, the final hidden state of the last cached position (the drafter's input),
 *            only when the hidden-valid flag is set
 *   sampler  the sampler's state (eli_sampler_save: the random stream and every stage's, such as the
 *            penalties' history or a grammar's position)
 *   sequence the executor's state of the sequence (exec.h save_state: for the CPU, n_past and the KV cells,
 *            cpu/kv_cache.h eli_kv_save)
 *   checksum 64-bit xxh64-style hash of every byte before it
 * Older versions are refused naming what they lack: 1 the sampler's random state, 2 the MTP state, 3
 * separate K and V types and the sampler's whole state, 4 embedding rows (media spans). Written atomically
 * (fileio.h). Restore maps the file, checks the checksum first (truncated or corrupted files fail there), then magic/version, the
 * model identity and the shape (a mismatch names what differs), then every count; the sampler and the
 * executor check their parts before changing anything, and nothing is changed unless all of it passes. */
#ifndef ELI_SLOT_H
#define ELI_SLOT_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "exec.h"
#include "model.h"
#include "sampler.h"
#include "speculative.h"

#define ELI_SLOT_VERSION 5

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

/* The entry of a committed position that is an embedding row, not a token. */
#define ELI_MEDIA_ID (-1)

/* A run of embedding rows among the committed positions (an image's or an audio clip's soft tokens). */
typedef struct eli_media_span {
    int64_t pos, n; /* positions [pos, pos + n) */
    int bidir;      /* its rows attend to each other both ways */
    float *embd;    /* n rows of n_embd floats, malloc'ed */
} eli_media_span;

/* What a generation session adds to the KV cache. */
typedef struct eli_slot_state {
    int32_t *tokens; /* on load: malloc'ed, cap_tokens entries (>= n_tokens, >= 1); the caller owns it */
    int64_t n_tokens, cap_tokens;
    eli_media_span *media; /* in order; on load malloc'ed (each span's rows too), the caller owns them */
    int n_media;
    int pending, logits_valid, hidden_valid, done;
    int64_t n_generated;
    eli_sampler *sampler; /* save: its state is written; restore: it is loaded (NULL: none) */
    int has_mtp;     /* the stream drafts: mtp holds its state (eli_spec_get_resume) */
    eli_spec_resume mtp;
} eli_slot_state;

/* The stream's state and seq's (its KV cache, through the executor) to path, atomically. */
int eli_slot_save(const char *path, eli_xseq *seq, const eli_slot_state *st, const float *logits, const float *hidden,
                  eli_error *err);
/* On success seq holds the file's state, logits (n_vocab floats) and hidden (n_embd) receive the saved ones
 * when they were valid, st->sampler (when set) the saved sampler state, and *st the rest. On failure
 * nothing is changed, except when another process cuts the file shorter after it was checked and while it
 * is copied: then seq is reset (eli_seq_n_past 0) and the error says so. */
int eli_slot_restore(const char *path, eli_xseq *seq, eli_slot_state *st, float *logits, float *hidden, eli_error *err);

#endif
