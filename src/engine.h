/* A generation session of the built-in engine: one context (KV state), a sampler and a streaming
 * detokenizer over a shared model. Both the C ABI streams (through the backend table) and the CLI's
 * run/chat drive generation through this, so they produce the same tokens.
 *
 * State: `tokens` are the committed positions (prompt and generated). The last generated token is
 * "pending" until the next step needs the model: it is emitted, but decoded into the KV cache lazily, so
 * a step that ends the stream costs no forward pass. A position may also be an embedding row (an image's
 * or an audio clip's soft token): its entry in `tokens` is ELI_MEDIA_ID and the session keeps the rows
 * (media spans), so reset_keep can recompute them and slot files carry them. */
#ifndef ELI_ENGINE_H
#define ELI_ENGINE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "eliza_inference.h"
#include "error.h"
#include "exec.h"
#include "model.h"
#include "sampler.h"
#include "speculative.h"
#include "tokenizer.h"

typedef struct eli_gen_params {
    eli_seq_params seq;
    eli_sampler_params sampling;
    int64_t max_tokens; /* per generation (reset by prefill); <= 0: until EOG or the context is full */
    /* MTP speculative decoding: on when draft is an assistant bound to the model (eli_model_bind_assistant),
     * prepared on the session's executor, and 1 <= draft_min <= draft_max */
    eli_xmodel *draft;
    int draft_min, draft_max;
    /* called after every MTP verification (see EliVerifierEvent in the public header), on the thread that
     * drives the session; NULL: none */
    void (*on_verify)(void *user, const EliVerifierEvent *ev);
    void *on_verify_user;
    /* a GBNF grammar that generation must follow (NULL: none; a sampler stage, grammar_stage.h: it starts
     * where generation starts, every prefill and reset restarts it, MTP drafts only what it allows), and the
     * index of the session's tokenizer it needs (grammar_vocab.h) */
    const char *grammar;
    size_t grammar_len;
    const struct eli_grammar_vocab *grammar_vocab;
} eli_gen_params;

eli_gen_params eli_gen_default_params(void);

/* The context size of a stream: requested (> 0), else fallback (> 0: ELIZA_LLM_N_CTX, config.h), else 8192;
 * clamped to the model's trained context. ELI_ERR_INVALID_ARG for a negative request. */
int eli_gen_context_size(int64_t requested, const eli_model *m, int64_t fallback, int64_t *out, eli_error *err);

typedef struct eli_gen eli_gen;

/* A session on a sequence of exec over xm (prepared by an executor of exec's family). */
eli_gen *eli_gen_create(const eli_exec *exec, eli_xmodel *xm, const eli_tokenizer *tok, const eli_gen_params *p,
                        eli_error *err);
void eli_gen_free(eli_gen *g);

/* Appends ids at the current position in ubatch-sized chunks, polling cancel (may be NULL) between them.
 * Starts a new generation: the max_tokens count and the end-of-stream flag are cleared. */
int eli_gen_prefill(eli_gen *g, const int32_t *ids, size_t n, const atomic_int *cancel, eli_error *err);

/* Appends n embedding rows (n_embd floats each, used as they are: no embedding scale) at the current
 * position as one media span; bidir 1: its rows attend to each other both ways (an image; then n must not
 * exceed the stream's n_ubatch). Starts a new generation like prefill. A reset_keep that would cut a span
 * keeps none of it. */
int eli_gen_prefill_embd(eli_gen *g, const float *embd, int64_t n, int bidir, const atomic_int *cancel, eli_error *err);

/* One step of up to tokens_cap tokens: see eliza_inference_llm_stream_next for the contract (0 more to
 * come, 1 final, negative error). text_cap is 0 (text dropped) or >= 5. drafted / accepted (may be NULL)
 * receive this step's MTP counts. */
int eli_gen_next(eli_gen *g, int32_t *tokens_out, size_t tokens_cap, size_t *n_out, char *text_out, size_t text_cap,
                 int32_t *drafted, int32_t *accepted, const atomic_int *cancel, eli_error *err);

/* Clears KV, sampler (re-seeded), counters and the end-of-stream flag. */
void eli_gen_reset(eli_gen *g);
/* Keeps the first n_keep committed positions (clamped to [0, n_committed]) and returns how many were
 * kept. Exact: when the sliding-window rings no longer hold what the kept prefix needs, the prefix is
 * recomputed. */
int64_t eli_gen_reset_keep(eli_gen *g, int64_t n_keep);

/* Stream state to a slot file (slot.h) and back: tokens, pending flag, logits, KV cells. Restore refuses a
 * file of another model or configuration, or a damaged one, and then leaves the session unchanged. */
int eli_gen_save(eli_gen *g, const char *path, eli_error *err);
int eli_gen_restore(eli_gen *g, const char *path, eli_error *err);

/* Committed positions (prompt + generated tokens, the pending one included; ELI_MEDIA_ID for embedding rows). */
int64_t eli_gen_n_committed(const eli_gen *g);
const int32_t *eli_gen_tokens(const eli_gen *g);
/* Tokens generated since the last prefill, and whether the stream has ended. */
int64_t eli_gen_n_generated(const eli_gen *g);
/* Prompt positions run through the model since creation: those prefill decoded, plus those reset_keep
 * (or a later step) recomputed because the sliding-window rings no longer held what the kept prefix
 * needs. Lets a benchmark check that a follow-up turn computed only its new tokens. */
int64_t eli_gen_n_prompt_decoded(const eli_gen *g);
int eli_gen_done(const eli_gen *g);
/* MTP totals since creation (all zero without a drafter). */
eli_spec_stats eli_gen_spec_stats(const eli_gen *g);

#endif
