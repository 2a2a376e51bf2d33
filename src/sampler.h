/* Token sampler: a chain of stages (the repetition penalties, a grammar, ...), then top-k, top-p, min-p,
 * temperature and a seeded random draw.
 *
 * The chain, in this order (the order of llama.cpp's default chain, minus the samplers we do not have):
 *   1. stages      the penalties first, over the last repeat_last_n tokens of the context (llama.cpp
 *                  semantics: a logit <= 0 is multiplied by repeat_penalty, a positive one divided;
 *                  then minus count * frequency_penalty + presence_penalty); then the stages added
 *                  later (eli_sampler_add_stage: a grammar);
 *   2. top-k       keep the k highest logits;
 *   3. top-p       keep the smallest prefix (by probability, highest first) whose mass reaches top_p;
 *   4. min-p       keep tokens whose probability is at least min_p times the highest one;
 *   5. temperature divide the surviving logits by temperature;
 *   6. sample      draw from the softmax of what is left.
 * Why this order: the filters decide *which* tokens are plausible on the model's own (temperature 1)
 * distribution, so a high temperature cannot smuggle junk tokens back in; temperature then only reshapes
 * the choice among the survivors. Penalties come first because they change which tokens are plausible.
 * temperature <= 0 means greedy: the argmax of the penalized logits (ties: lowest id).
 *
 * Determinism: every result depends only on the parameters, the seed, the stages' states, the accepted
 * tokens and the logits; ties are broken by token id, nothing depends on threads or global state. Not thread-safe per
 * handle (use one handle per sequence). */
#ifndef ELI_SAMPLER_H
#define ELI_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"

typedef struct {
    float temperature;       /* <= 0: greedy */
    int32_t top_k;           /* <= 0: off */
    float top_p;             /* >= 1: off */
    float min_p;             /* <= 0: off */
    float repeat_penalty;    /* 1: off; must be > 0 */
    float frequency_penalty; /* 0: off */
    float presence_penalty;  /* 0: off */
    int32_t repeat_last_n;   /* history length for the penalties, 0..65536 (0: penalties off) */
    uint64_t seed;
} eli_sampler_params;

/* llama.cpp's defaults: temperature 0.8, top_k 40, top_p 0.95, min_p 0.05, penalties off (1.0, 0, 0),
 * repeat_last_n 64, seed 0. */
eli_sampler_params eli_sampler_default_params(void);

typedef struct eli_sampler eli_sampler;

/* n_vocab: the length of every logits row. ELI_ERR_INVALID_ARG on bad parameters, ELI_ERR_OOM. The chain
 * starts with one stage, the penalties (when the parameters turn them on). */
int eli_sampler_create(const eli_sampler_params *params, int32_t n_vocab, eli_sampler **out, eli_error *err);
void eli_sampler_free(eli_sampler *s);

/* ---- stages ----
 * A stage is state that reshapes or narrows the next-token distribution and follows the tokens (the
 * penalties follow the whole context; a grammar, the generated tokens). Stages run in the order they
 * were added, on a copy of the logits, before the filters (top-k, top-p, min-p, temperature) and the
 * draw. The sampler owns a stage once added. */
typedef struct eli_sampler_stage {
    const char *name; /* in messages and in snapshots */
    void *self;
    /* apply only removes tokens (sets their logit to -INFINITY) and allows can tell which: greedy
     * sampling then takes the unmasked argmax when every such stage allows it (the same token, without
     * the cost of a whole mask), and a drafted token can be checked alone */
    int mask_only;
    int (*apply)(void *self, float *logits, int32_t n_vocab, eli_error *err); /* ELI_OK or negative */
    int (*allows)(void *self, int32_t token, eli_error *err);                 /* 1, 0, or negative; mask_only */
    /* a token joins the sequence: generated is 1 for the model's own tokens, 0 for context (prompt) ones */
    int (*accept)(void *self, int32_t token, int generated, eli_error *err);
    void (*reset)(void *self);
    /* snapshots, for slot files and rollbacks: state_size bytes (for the current state) written by save,
     * read back by load (which validates them, their size included: a damaged snapshot is an error and
     * changes nothing) */
    size_t (*state_size)(const void *self);
    void (*save)(const void *self, void *buf);
    int (*load)(void *self, const void *buf, size_t n, eli_error *err);
    void (*free)(void *self);
    /* drafting ahead (eli_sampler_draft_*): remember the current state, go back to it; NULL: the stage
     * takes no part in drafting */
    void (*mark)(void *self);
    void (*rewind)(void *self);
} eli_sampler_stage;

/* Appends a stage (copied; the sampler frees its self with it, also when this fails). */
int eli_sampler_add_stage(eli_sampler *s, const eli_sampler_stage *stage, eli_error *err);

/* Draws a token from logits[n_vocab] (not modified). Does not record it: call eli_sampler_accept with
 * the token that is actually kept. Negative when a stage fails (err). */
int eli_sampler_sample(eli_sampler *s, const float *logits, int32_t *token, eli_error *err);

/* The distribution eli_sampler_sample draws from, for these logits and the current state, written to
 * probs[n_vocab] (0 for every filtered token; one-hot when greedy). Consumes no randomness. Returns the
 * number of tokens with non-zero probability (>= 1), negative when a stage fails. For speculative
 * decoding. */
int32_t eli_sampler_probs(eli_sampler *s, const float *logits, float *probs, eli_error *err);

/* 1 when every mask-only stage lets token come next (a drafted token's check), 0 if one refuses it,
 * negative on a stage error. */
int eli_sampler_allows(eli_sampler *s, int32_t token, eli_error *err);

/* Drafting (speculative decoding): the stages that can mark and rewind (a grammar) mask a draft model's
 * logits as if the drafts so far had been accepted, so that drafts the target would refuse are not made.
 * begin marks; mask applies them to logits[n_vocab] and returns how many tokens are left (0: drafting
 * should stop); accept follows a draft (negative when a stage refuses it); end rewinds every stage to
 * the mark. Nothing else of the sampler changes. */
void eli_sampler_draft_begin(eli_sampler *s);
int32_t eli_sampler_draft_mask(eli_sampler *s, float *logits, eli_error *err);
int eli_sampler_draft_accept(eli_sampler *s, int32_t token, eli_error *err);
void eli_sampler_draft_end(eli_sampler *s);

/* A generated token joins the sequence: every stage follows it (a grammar refuses one it does not allow:
 * ELI_ERR_INVALID_ARG, nothing changed). Ids outside [0, n_vocab) are ignored. */
int eli_sampler_accept(eli_sampler *s, int32_t token, eli_error *err);
/* A context (prompt) token: only the stages that follow the whole context see it (the penalties). */
void eli_sampler_note(eli_sampler *s, int32_t token);

/* Resets every stage and restarts the random stream from the seed: after a reset the sampler repeats
 * exactly what it did after creation. */
void eli_sampler_reset(eli_sampler *s);
/* Same, with a new seed. */
void eli_sampler_reseed(eli_sampler *s, uint64_t seed);
/* A new generation begins (a prompt was added): the mask-only stages, which constrain one generation (a
 * grammar), start over; the random stream and the other stages (the penalties' history) go on. */
void eli_sampler_new_generation(eli_sampler *s);

/* The whole state (the random stream and every stage's), for slot files and rollbacks: restoring a saved
 * state continues exactly. load checks the stage names against this sampler's chain, each stage checks
 * its own bytes (their size may vary with the stage's state), and the sampler is left unchanged on any
 * mismatch. */
size_t eli_sampler_state_size(const eli_sampler *s);
void eli_sampler_save(const eli_sampler *s, void *buf);
int eli_sampler_load(eli_sampler *s, const void *buf, size_t n, eli_error *err);

/* Plain softmax of logits[n] into probs[n] (max-subtracted, accumulated in double; NaN counts as -inf;
 * if every logit is -inf the result is uniform). */
void eli_softmax(const float *logits, size_t n, float *probs);

#endif
