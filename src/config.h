/* The library's knobs, read from the environment in this one place. The edges (the C ABI when a context is
 * made or a stream opened, the CLI at start) call eli_config_read and hand the values down as parameters;
 * nothing below them reads the environment.
 *
 *   ELIZA_LLM_N_CTX           a stream's context when its config says 0 (default 8192; clamped to the
 *                             trained context)
 *   ELIZA_LLM_SEED            the sampler's seed (default 0)
 *   ELIZA_LLM_RESERVE         0: a stream's memory becomes resident as it is first written; 1 (default): at open
 *   ELIZA_LLM_KV_CHECKPOINTS  sliding-window checkpoints per stream, 0..64 (default 1)
 *   ELIZA_LLM_REPACK          0: the weights stay in the file mapping; 1 (default): copied into the device's layout
 *   ELIZA_LLM_BACKEND         a backend by name (backend.h); unset or empty: the selection rule picks one
 *   ELI_KERNELS               the CPU's kernel table by name (reference, avx2, avx512, neon, neon-dotprod);
 *                             unset: the best this CPU runs
 * Every value is checked: one that does not parse is an error naming the variable, never a silent default. */
#ifndef ELI_CONFIG_H
#define ELI_CONFIG_H

#include <stdint.h>

#include "error.h"

typedef struct eli_config {
    int64_t n_ctx; /* 0: unset */
    uint64_t seed;
    int reserve;
    int n_ckpt;
    int repack;
    char backend[64]; /* "" = unset */
    char kernels[32]; /* "" = the best */
} eli_config;

/* The defaults: n_ctx 0, seed 0, reserve 1, one checkpoint, repack 1, no backend, the best kernels. */
eli_config eli_config_defaults(void);
/* The defaults overridden by the environment. ELI_ERR_INVALID_ARG naming the variable and its value. */
int eli_config_read(eli_config *c, eli_error *err);

#endif
