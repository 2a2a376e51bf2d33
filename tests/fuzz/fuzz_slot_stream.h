/* The stream whose slot files fuzz_slot restores and fuzz_seeds saves: the golden e2b-mini model (sliding
 * and full layers, KV-shared layers, per-layer embeddings) in a small context, so a slot file of a short
 * stream is a few KB, and a sampler with a stage. Both must agree on it: restore refuses a file of another
 * configuration early. */
#ifndef ELI_FUZZ_SLOT_STREAM_H
#define ELI_FUZZ_SLOT_STREAM_H

#include "exec.h"
#include "quants.h"
#include "sampler.h"

#define FUZZ_SLOT_MODEL ELI_SHARED_DIR "/golden/models/e2b-mini-f32.gguf"

static inline eli_seq_params fuzz_slot_params(void) {
    eli_seq_params p = eli_seq_default();
    p.n_ctx = 16;
    p.n_ubatch = 4;
    p.kv_type_k = ELI_TYPE_Q8_0; /* K and V of different types: both row sizes in the file */
    p.kv_type_v = ELI_TYPE_Q4_0;
    p.n_threads = 1;
    p.reserve = 0;
    return p;
}

/* penalties on: the slot file carries their history (a stage of the sampler's snapshot) */
static inline eli_sampler_params fuzz_slot_sampler_params(void) {
    eli_sampler_params p = eli_sampler_default_params();
    p.repeat_penalty = 1.1f;
    p.repeat_last_n = 8;
    p.seed = 7;
    return p;
}

#endif
