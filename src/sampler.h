/* Token sampler: repetition penalties, top-k, top-p, min-p, temperature, then a seeded random draw.
 *
 * The chain, in this order (the order of llama.cpp's default chain, minus the samplers we do not have):
 *   1. penalties   over the last repeat_last_n accepted tokens (llama.cpp semantics: a logit <= 0 is
 *                  multiplied by repeat_penalty, a positive one divided; then minus
 *                  count * frequency_penalty + presence_penalty);
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
 * Determinism: every result depends only on the parameters, the seed, the accepted tokens and the
 * logits; ties are broken by token id, nothing depends on threads or global state. Not thread-safe per
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

/* n_vocab: the length of every logits row. ELI_ERR_INVALID_ARG on bad parameters, ELI_ERR_OOM. */
int eli_sampler_create(const eli_sampler_params *params, int32_t n_vocab, eli_sampler **out, eli_error *err);
void eli_sampler_free(eli_sampler *s);

/* Draws a token from logits[n_vocab] (not modified). Does not record it: call eli_sampler_accept with
 * the token that is actually kept (and, if wanted, with the prompt tokens). */
int32_t eli_sampler_sample(eli_sampler *s, const float *logits);

/* The distribution eli_sampler_sample draws from, for these logits and the current history, written to
 * probs[n_vocab] (0 for every filtered token; one-hot when greedy). Consumes no randomness. Returns the
 * number of tokens with non-zero probability. For speculative decoding. */
int32_t eli_sampler_probs(eli_sampler *s, const float *logits, float *probs);

/* Adds a token to the penalty history (ids outside [0, n_vocab) are ignored). */
void eli_sampler_accept(eli_sampler *s, int32_t token);

/* Clears the history and restarts the random stream from the seed: after a reset the sampler repeats
 * exactly what it did after creation. */
void eli_sampler_reset(eli_sampler *s);
/* Same, with a new seed. */
void eli_sampler_reseed(eli_sampler *s, uint64_t seed);
/* The random stream's state, for save/restore: setting a saved state continues the stream exactly. */
void eli_sampler_get_rng(const eli_sampler *s, uint64_t state[4]);
void eli_sampler_set_rng(eli_sampler *s, const uint64_t state[4]);

/* Plain softmax of logits[n] into probs[n] (max-subtracted, accumulated in double; NaN counts as -inf;
 * if every logit is -inf the result is uniform). */
void eli_softmax(const float *logits, size_t n, float *probs);

#endif
