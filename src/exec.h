/* The executor seam: one boundary between the session (the engine, speculative decoding, slot files, the
 * C ABI, the CLI) and the device that runs the model. The session talks only to this table; everything a
 * device does its own way (weight layouts, the KV cache, scratch memory, threads, kernels) lives behind
 * it, in the device's folder (src/cpu/ for the CPU).
 *
 * A device is a folder plus one line in the registry (exec.c): a table of these functions. Its objects:
 *   eli_xmodel  a model made ready for the device (prepare: the CPU packs its matrices; a GPU would
 *               upload them); the eli_model it came from outlives it and is rewired by it (its weights
 *               may point into the device's copy afterwards)
 *   eli_xseq    one sequence on it: its KV state and scratch
 *   eli_xdraft  an MTP drafter's scratch for steps over a target sequence
 *   eli_xtower  a multimodal tower (vision.h, audio.h) made ready like a model: its bound tower outlives
 *               it and is rewired by it; its encodes run one at a time (callers are serialised)
 *
 * A batch is token ids OR embedding rows (the soft tokens of an image or an audio clip, already in the
 * text model's width), at positions n_past .. n_past + n - 1, attending causally except inside the spans
 * marked bidirectional, whose rows see each other both ways (Gemma 4's image tokens). */
#ifndef ELI_EXEC_H
#define ELI_EXEC_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "model.h"

/* How prepare lays the weights out. */
typedef struct eli_exec_options {
    const char *kernels; /* CPU: a kernel table by name ("reference", "avx2", "avx512", "neon", "neon-dotprod";
                          * one this CPU cannot run is an error); NULL or "" = the best this CPU runs */
    int repack;          /* 1: the matrices move out of the file mapping into the device's own layout (the
                          * CPU's: packed rows in huge pages); 0: computed where they are mapped */
} eli_exec_options;

/* A sequence's shape; zero fields take the defaults noted. */
typedef struct eli_seq_params {
    int64_t n_ctx;    /* positions; 0 = min(trained context, 4096); clamped to the trained context */
    int64_t n_ubatch; /* rows per forward chunk (also sizes the sliding-window rings); 0 = 512 */
    uint32_t kv_type_k, kv_type_v; /* cache types (kv_cache.h names); 0 = ELI_TYPE_F32, see eli_seq_default */
    int n_threads;    /* 0 = every online CPU */
    int reserve;      /* 1: the KV cache, its checkpoints and scratch are resident from creation on; 0: as used */
    int n_ckpt;       /* sliding-window checkpoints kept (0..64) */
} eli_seq_params;

/* n_ctx 0, n_ubatch 0, f16 K and V, n_threads 0, reserve 1, one checkpoint. */
eli_seq_params eli_seq_default(void);

/* A row range [begin, end) of a batch. */
typedef struct eli_span {
    int64_t begin, end;
} eli_span;

typedef struct eli_batch {
    int64_t n;
    const int32_t *tokens; /* n ids, or NULL when embd is given */
    const float *embd;     /* n rows of n_embd floats, used as they are (no embedding scale) */
    const eli_span *bidir; /* the spans whose rows attend to each other both ways: sorted, disjoint, each inside
                            * [0, n) and no longer than n_ubatch (a span is never split across forward chunks) */
    int n_bidir;
} eli_batch;

/* What a decode returns: logits (n_vocab floats per row) and/or the final hidden state after output_norm
 * (n_embd floats per row: what embeddings and the MTP drafter use), for every row (all) or the last. */
typedef struct eli_outputs {
    float *logits;
    float *hidden;
    int all;
} eli_outputs;

/* What a sequence of this shape holds in memory, by part (for the planner). */
typedef struct eli_seq_memory {
    size_t kv_swa, kv_full; /* the K/V storage of the sliding-window and the full-attention layers */
    size_t kv_ckpt;         /* the window checkpoints */
    size_t scratch;         /* activations and other scratch, at their largest */
} eli_seq_memory;

typedef struct eli_exec eli_exec;

/* Every device's objects begin with these headers (its own structs embed them first), so the session
 * reaches the right functions from the object alone (eli_seq_* below). */
typedef struct eli_xmodel {
    const eli_exec *exec;
    eli_model *model;
} eli_xmodel;
typedef struct eli_xseq {
    const eli_exec *exec;
    eli_xmodel *xm;
} eli_xseq;
typedef struct eli_xdraft {
    const eli_exec *exec;
} eli_xdraft;
struct eli_vision;
struct eli_audio;
struct eli_image;
typedef struct eli_xtower {
    const eli_exec *exec;
    struct eli_vision *vision; /* the bound tower it runs: one of the two is set */
    struct eli_audio *audio;
} eli_xtower;

struct eli_exec {
    const char *name;
    const char *family; /* executors of one family share prepared models (cpu: the fast and the reference kernels) */
    int rank;           /* the default executor is the available one of highest rank */
    int (*available)(void);
    /* what runs a model prepared here, for reports (the CPU: its kernel table's name) */
    const char *(*describe)(const eli_xmodel *xm);

    /* a model made ready (m is changed and must outlive the result) */
    eli_xmodel *(*prepare)(eli_model *m, const eli_exec_options *o, eli_error *err);
    void (*release)(eli_xmodel *xm);
    /* memory of a sequence of this shape, from the geometry alone (m needs no file) */
    int (*plan)(const eli_model *m, const eli_seq_params *p, eli_seq_memory *out, eli_error *err);

    eli_xseq *(*seq_create)(eli_xmodel *xm, const eli_seq_params *p, eli_error *err);
    void (*seq_free)(eli_xseq *s);
    /* the parameters as resolved (defaults and clamps applied) */
    eli_seq_params (*seq_params)(const eli_xseq *s);
    int64_t (*n_past)(const eli_xseq *s);
    /* decodes b at n_past .. n_past + b->n - 1 and advances n_past; ids outside the vocabulary, a batch past
     * the context and a bad span are errors that change nothing */
    int (*decode)(eli_xseq *s, const eli_batch *b, const eli_outputs *out, eli_error *err);
    void (*reset)(eli_xseq *s);
    /* forgets positions >= n_keep: 1, or 0 when the sliding-window rings no longer hold what a query at
     * n_keep needs (nothing changed) */
    int (*truncate)(eli_xseq *s, int64_t n_keep);
    /* a window checkpoint at the current position (where later truncations often land) */
    void (*checkpoint)(eli_xseq *s);
    /* truncate to n_keep if possible (returns n_keep); else restores the nearest checkpoint r <= n_keep and
     * returns r (the caller decodes r .. n_keep - 1 again); else -1 (nothing changed) */
    int64_t (*resume)(eli_xseq *s, int64_t n_keep);
    /* the sequence's state (its cache and n_past) as bytes, for slot files: put is called with the bytes in
     * order; load validates all of them first and changes nothing unless they fit this sequence */
    int (*save_state)(eli_xseq *s, void (*put)(void *w, const void *p, size_t n), void *w, eli_error *err);
    int (*load_state)(eli_xseq *s, const uint8_t *p, size_t n, eli_error *err);

    /* MTP: draft steps of an assistant model (bound to the target with eli_model_bind_assistant, prepared
     * on the same device) over a target sequence's cache */
    eli_xdraft *(*draft_create)(eli_xmodel *draft, eli_xseq *target, eli_error *err);
    void (*draft_free)(eli_xdraft *d);
    /* one step for token t at position pos (the target holds positions < pos), from h_in (the target's final
     * hidden state or the previous step's h_out): the drafter's logits and its h_out */
    int (*draft_step)(eli_xdraft *d, eli_xseq *target, int32_t t, int32_t pos, const float *h_in, float *logits,
                      float *h_out, eli_error *err);

    /* Multimodal towers (NULL where the device has none: NOT_IMPLEMENTED). n_threads 0 = every online CPU. */
    eli_xtower *(*vision_prepare)(struct eli_vision *v, const eli_exec_options *o, int n_threads, eli_error *err);
    eli_xtower *(*audio_prepare)(struct eli_audio *a, const eli_exec_options *o, int n_threads, eli_error *err);
    void (*tower_release)(eli_xtower *t);
    /* an image preprocessed to the tower's size (eli_vision_preprocess; its patches within the position
     * table) -> out[(w / patch / merge) * (h / patch / merge)][n_embd_text] */
    int (*vision_encode)(eli_xtower *t, const struct eli_image *img, float *out, eli_error *err);
    /* one 30-second chunk's log-mel mel[T][n_mel], 1 <= T <= a chunk's frames -> out[eli_audio_chunk_tokens(T)][n_embd] */
    int (*audio_encode)(eli_xtower *t, const float *mel, int64_t T, float *out, eli_error *err);
};

/* The registered executors, NULL-terminated (exec.c). */
const eli_exec *const *eli_exec_registry(void);
/* The available executor of the highest rank. */
const eli_exec *eli_exec_default(void);
/* By name; NULL + err when unknown or not available on this machine. */
const eli_exec *eli_exec_named(const char *name, eli_error *err);

/* The session's calls, dispatched to the object's executor. */
eli_xmodel *eli_exec_prepare(const eli_exec *exec, eli_model *m, const eli_exec_options *o, eli_error *err);
void eli_xmodel_release(eli_xmodel *xm); /* NULL-safe */
/* A sequence of exec over xm, which any executor of exec's family prepared. */
eli_xseq *eli_seq_create(const eli_exec *exec, eli_xmodel *xm, const eli_seq_params *p, eli_error *err);
void eli_seq_free(eli_xseq *s); /* NULL-safe */
eli_seq_params eli_seq_params_of(const eli_xseq *s);
int64_t eli_seq_n_past(const eli_xseq *s);
int64_t eli_seq_n_ctx(const eli_xseq *s);
int eli_seq_decode(eli_xseq *s, const eli_batch *b, const eli_outputs *out, eli_error *err);
/* Token ids at the sequence's end (a batch without embeddings or spans). */
int eli_seq_decode_tokens(eli_xseq *s, const int32_t *ids, int64_t n, const eli_outputs *out, eli_error *err);
void eli_seq_reset(eli_xseq *s);
int eli_seq_truncate(eli_xseq *s, int64_t n_keep);
void eli_seq_checkpoint(eli_xseq *s);
int64_t eli_seq_resume(eli_xseq *s, int64_t n_keep);
int eli_seq_save_state(eli_xseq *s, void (*put)(void *w, const void *p, size_t n), void *w, eli_error *err);
int eli_seq_load_state(eli_xseq *s, const uint8_t *p, size_t n, eli_error *err);
/* A drafter of the prepared assistant draft over target (both on target's executor). */
eli_xdraft *eli_draft_create(eli_xmodel *draft, eli_xseq *target, eli_error *err);
void eli_draft_free(eli_xdraft *d); /* NULL-safe */
int eli_draft_step(eli_xdraft *d, eli_xseq *target, int32_t t, int32_t pos, const float *h_in, float *logits, float *h_out,
                   eli_error *err);
/* A bound tower made ready on exec (NOT_IMPLEMENTED where exec has no towers). */
eli_xtower *eli_vision_prepare(const eli_exec *exec, struct eli_vision *v, const eli_exec_options *o, int n_threads,
                               eli_error *err);
eli_xtower *eli_audio_prepare(const eli_exec *exec, struct eli_audio *a, const eli_exec_options *o, int n_threads,
                              eli_error *err);
void eli_xtower_release(eli_xtower *t); /* NULL-safe */
/* The device's encoders (see the table); sessions call eli_vision_encode / eli_audio_embed, which prepare
 * the input and size the output. */
int eli_xtower_encode_image(eli_xtower *t, const struct eli_image *img, float *out, eli_error *err);
int eli_xtower_encode_audio(eli_xtower *t, const float *mel, int64_t T, float *out, eli_error *err);

#endif
