/* The stream configuration the C-ABI tests start from: greedy, a 256-token context, defaults elsewhere. */
#ifndef ELI_TEST_FFI_CONFIG_H
#define ELI_TEST_FFI_CONFIG_H

#include <string.h>

#include "eliza_inference.h"

static inline eliza_llm_stream_config_t greedy_cfg(int max_tokens) {
    eliza_llm_stream_config_t c;
    memset(&c, 0, sizeof c);
    c.max_tokens = max_tokens;
    c.temperature = 0;
    c.slot_id = -1;
    c.n_gpu_layers = -1;
    c.context_size = 256;
    return c;
}

#endif
