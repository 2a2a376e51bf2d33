/* The Gemma 4 assistant (MTP drafter) forward on the CPU, spec section 6.3: a few Q-only layers that attend over
 * the TARGET's cache (its last sliding-window and last full layer that own K/V), fed with the target's
 * embedding of a token and a hidden state, at a constant position per drafting round. The drafter owns
 * no KV and never writes any. */
#ifndef ELI_DRAFTER_H
#define ELI_DRAFTER_H

#include <stdint.h>

#include "error.h"
#include "forward.h"
#include "model.h"


typedef struct eli_drafter eli_drafter;

/* Scratch for draft steps over a target context of up to n_ctx positions. */
eli_drafter *eli_drafter_create(const eli_model *draft, const eli_model *target, int64_t n_ctx, eli_error *err);
void eli_drafter_free(eli_drafter *d);

/* One draft step for token t at position pos (the target cache holds positions < pos), from h_in
 * (n_embd_out floats: the target's final hidden state, or the previous step's h_out). Writes the
 * drafter's logits (n_vocab) and h_out (n_embd_out, the next step's input). */
int eli_drafter_step(eli_drafter *d, eli_context *target, int32_t t, int32_t pos, const float *h_in, float *logits,
                     float *h_out, eli_error *err);

#endif
