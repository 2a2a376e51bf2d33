/* The backend seam behind the one pipe (../shared/spec/ffi.md, "Backends behind the one pipe").
 *
 * A backend is a table of function pointers: identity and probes (name, available, can_serve,
 * preference_rank) and the stream operations over its own opaque session type. The registry holds every
 * backend compiled in; eli_backend_select applies the selection rule at every stream open:
 *   1. ELIZA_LLM_BACKEND (config.h) set and non-empty: hard select by name. The built-in names select the built-in
 *      engine; any other name must be registered, available and able to serve the bundle, else the open
 *      fails naming the reason. No silent fallback.
 *   2. Otherwise the available, can-serve backend with the highest rank above 0; none: the built-in engine.
 */
#ifndef ELI_BACKEND_H
#define ELI_BACKEND_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "eliza_inference.h"
#include "config.h"
#include "error.h"
#include "exec.h"
#include "tokenizer.h"

/* What a backend gets from the context when it opens a stream. */
typedef struct eli_backend_env {
    const char *bundle_dir;
    const char *text_path;  /* the bundle's text model */
    const char *mtp_path;   /* the bundle's drafter, NULL if none */
    eli_xmodel *xm;         /* the text model, loaded and prepared on the default executor (shared, read-only) */
    const eli_tokenizer *tok;
    eli_xmodel *drafter;    /* the bundle's MTP drafter bound to the text model and prepared alike, when the open
                             * asks for MTP */
    const eli_config *config; /* the knobs (config.h) as read when the stream opens */
    /* the tokenizer's index for grammar constraints (grammar_vocab.h), built when a stream asks for a
     * grammar (cfg->gbnf_grammar), else NULL */
    const struct eli_grammar_vocab *grammar_vocab;
    /* the context's speculative-decoding observer (eliza_inference_set_verifier_callback): a backend that
     * drafts calls it after every verification, on the thread driving the stream */
    void (*on_verify)(void *user, const EliVerifierEvent *ev);
    void *on_verify_user;
} eli_backend_env;

typedef struct eli_backend_session eli_backend_session;

typedef struct eli_backend {
    const char *name;
    int (*available)(void);                    /* compiled in and host dependencies present; cheap */
    int (*can_serve)(const char *bundle_dir);  /* cheap probe for its artifact */
    int (*preference_rank)(void);              /* higher wins; the built-in engine is 0 */
    eli_backend_session *(*open)(const eli_backend_env *env, const eliza_llm_stream_config_t *cfg, eli_error *err);
    /* cancel is the stream's flag, polled between batches and tokens */
    int (*prefill)(eli_backend_session *s, const int32_t *ids, size_t n, const atomic_int *cancel, eli_error *err);
    /* n embedding rows of the text model's width (an image's or audio clip's soft tokens) as one span,
     * bidirectional when bidir is set (eli_gen_prefill_embd); NULL: the backend takes no embeddings */
    int (*prefill_embd)(eli_backend_session *s, const float *embd, int64_t n, int bidir, const atomic_int *cancel,
                        eli_error *err);
    int (*next)(eli_backend_session *s, int32_t *tokens_out, size_t tokens_cap, size_t *num_tokens_out, char *text_out,
                size_t text_cap, int32_t *drafted, int32_t *accepted, const atomic_int *cancel, eli_error *err);
    int (*reset)(eli_backend_session *s);
    /* returns the number of positions kept (0 = full reset when it cannot keep a prefix); never fails */
    int (*reset_keep)(eli_backend_session *s, int32_t n_keep);
    int (*save)(eli_backend_session *s, const char *path, eli_error *err);
    int (*restore)(eli_backend_session *s, const char *path, eli_error *err);
    void (*close)(eli_backend_session *s);
    /* one pass over ids in a fresh sequence of n positions, for embeddings and end-of-turn scores: the final
     * hidden states of every row (hidden: n x n_embd floats) when hidden is set, else the logits of the last
     * row (logits: n_vocab floats). NULL here: the backend has no such pass (NOT_IMPLEMENTED). */
    int (*run_once)(const eli_backend_env *env, const int32_t *ids, size_t n, float *hidden, float *logits, eli_error *err);
} eli_backend;

/* The built-in engine ("builtin"; also selected by "cpu" and "eliza"). */
const eli_backend *eli_backend_builtin(void);
/* Registered backends, NULL-terminated. */
const eli_backend *const *eli_backend_registry(void);
/* Applies the selection rule above; want: ELIZA_LLM_BACKEND's value (config.h), "" or NULL = none. NULL +
 * err when the hard select fails. */
const eli_backend *eli_backend_select(const char *bundle_dir, const char *want, eli_error *err);

#endif
