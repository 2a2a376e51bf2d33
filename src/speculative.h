/* MTP speculative decoding with a Gemma 4 assistant drafter (spec section 6.5).
 *
 * A round starts with the target cache holding P positions, the last sampled token id_last (not yet in
 * the cache) and the target's final hidden state at position P-1 (the row whose logits produced
 * id_last). The drafter proposes up to w tokens at the constant position P; the target checks
 * [id_last, d_1 .. d_w] in one batched pass; drafts are accepted while they agree with the target
 * (greedy: equal to the target's choice; sampling: speculative rejection sampling with the drafter's
 * probabilities, so the output distribution is the target's); one more token comes from the target
 * (the correction or the bonus). Rejected positions are removed from the cache, sliding rings included.
 *
 * The draft window is chosen after every round, within [draft_min, draft_max], as the one with the most
 * tokens per unit of time: a round of w drafts yields 1 + a + .. + a^w tokens on average, a being the
 * acceptance rate (decayed counts of accepted and rejected drafts), and costs w draft steps plus a
 * verify batch of w + 1 tokens. When even the best window is slower than plain steps, drafting pauses
 * for a growing number of tokens, so a poor drafter (or a machine where verifying is not cheaper than
 * decoding) costs little. Greedy decoding measures the costs (eli_spec_note_plain, after the first 4 plain
 * steps of a stream, which run slow while the weights come back into the caches; and the rounds
 * themselves; the median of each cost's last 9 samples counts, so one preempted step does not pause
 * drafting): its output never depends on the window. Sampling (temperature > 0) uses fixed nominal
 * costs instead, so every decision depends on the sampled tokens only and a seed gives the same sequence
 * in every run (its distribution is the target's either way). */
#ifndef ELI_SPECULATIVE_H
#define ELI_SPECULATIVE_H

#include <stdint.h>

#include "error.h"
#include "exec.h"
#include "sampler.h"

typedef struct eli_spec eli_spec;

typedef struct eli_spec_stats {
    int64_t rounds, drafted, accepted; /* totals since creation */
    int window;                        /* current draft window */
} eli_spec_stats;

/* draft: an assistant bound to the target's model (eli_model_bind_assistant) and prepared on the target's
 * executor; target: the sequence it drafts for. */
eli_spec *eli_spec_create(eli_xmodel *draft, eli_xseq *target, int draft_min, int draft_max,
                          float temperature, uint64_t seed, eli_error *err);
void eli_spec_free(eli_spec *s);

/* The window the next round would use given room for at most max_tokens more tokens, 0 = do a plain
 * step instead (paused, or no room). Advances the pause counter when it returns 0 because of a pause. */
int eli_spec_window(eli_spec *s, int64_t max_tokens);

/* One round with window w >= 1 (see above). The sampler's history is updated with every token returned.
 * out receives the new committed tokens (accepted drafts, then the target's token), *n_out >= 1 of them;
 * the last one is the new id_last (not in the cache); h_last is overwritten with the hidden state of the
 * position before it. *drafted / *accepted: this round's counts. */
int eli_spec_round(eli_spec *s, eli_xseq *target, eli_sampler *smp, int32_t id_last, float *h_last, int w,
                   int32_t *out, int *n_out, int *drafted, int *accepted, eli_error *err);

/* Reports the wall time of one plain (non-speculative) decode step, for the cost model (greedy only;
 * ignored when sampling). */
void eli_spec_note_plain(eli_spec *s, double seconds);

/* Restarts the window, the pause and the random stream (a stream reset). */
void eli_spec_reset(eli_spec *s);
eli_spec_stats eli_spec_get_stats(const eli_spec *s);

/* What a stream restored from a slot file needs to continue exactly as the original would: the random
 * stream of the acceptance draws, the window, the pause and the acceptance counts (sampling decides on
 * these alone; greedy output never depends on them, and its measured costs are simply measured again). */
typedef struct eli_spec_resume {
    uint64_t rng;
    int32_t window, pause, pause_len;
    double n_acc, n_rej;
} eli_spec_resume;
void eli_spec_get_resume(const eli_spec *s, eli_spec_resume *r);
/* ELI_ERR_INVALID_ARG when r is out of range: counts negative or not finite, a pause longer than the
 * longest, a window outside [1, 64]. */
int eli_spec_resume_check(const eli_spec_resume *r, eli_error *err);
/* Takes a checked r; a window outside this stream's [draft_min, draft_max] is clamped into it. */
void eli_spec_set_resume(eli_spec *s, const eli_spec_resume *r);

#endif
