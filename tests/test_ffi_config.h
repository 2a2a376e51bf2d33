/* The stream configuration the C-ABI tests start from (greedy, a 256-token context, defaults elsewhere) and
 * a stream drained to its end. */
#ifndef ELI_TEST_FFI_CONFIG_H
#define ELI_TEST_FFI_CONFIG_H

#include <stdio.h>
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

/* Runs next() with 32-token steps until it returns 1; returns the number of tokens. */
static inline int generate(EliLlmStream *s, int32_t *out, int cap, char *text, size_t text_cap) {
    int n = 0;
    size_t used = 0;
    if (text_cap) text[0] = '\0';
    for (int guard = 0; guard < 1000; guard++) {
        int32_t step[32];
        size_t got = 0;
        char buf[1024];
        char *err = NULL;
        int rc = eliza_inference_llm_stream_next(s, step, 32, &got, buf, sizeof buf, NULL, NULL, &err);
        if (rc < 0) {
            fprintf(stderr, "next: %s\n", err ? err : "?");
            eliza_inference_free_string(err);
            return -1;
        }
        for (size_t i = 0; i < got && n < cap; i++) out[n++] = step[i];
        size_t bl = strlen(buf);
        if (text_cap && used + bl < text_cap) memcpy(text + used, buf, bl + 1), used += bl;
        if (rc == 1) return n;
    }
    return -1;
}

#endif
