/* libelizainference — the one pipe between an app and on-device Gemma 4 text generation.
 *
 * A flat C ABI (the LLM subset of the eliza ABI, generation "13"): hosts (Bun/Node FFI, Android JNI,
 * Swift) load this one library and drive everything through these functions, in their own process.
 *
 * Conventions
 * - Status codes are int: >= 0 success, negative failure (ELIZA_ERR_*).
 * - Every fallible call takes `char **out_error` last. On failure a malloc'ed, NUL-terminated message
 *   "[libelizainference] <function>: <reason>" is stored there; free it with eliza_inference_free_string.
 *   out_error may be NULL. Calls returning a pointer return NULL on failure. The library prints nothing.
 * - Arrays the library allocates are freed with eliza_inference_free_tokens, strings with
 *   eliza_inference_free_string; both accept NULL.
 * - Threading: a context may have several open streams, each with its own KV state over the shared
 *   read-only weights. One stream is driven by one thread at a time; eliza_inference_llm_stream_cancel may
 *   be called from any thread at any time. Context-level loads are serialized inside the library.
 * - Host protocol: create -> tokenize(prompt) -> llm_stream_open(cfg) -> prefill(ids) -> next(...) until
 *   it returns 1 -> close; or keep the stream and, per turn, reset_keep(longest common prefix) and prefill
 *   the rest, falling back to reset when reset_keep returns less than asked. No chat template is applied.
 */
#ifndef ELIZA_INFERENCE_H
#define ELIZA_INFERENCE_H

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#define ELIZA_API __declspec(dllexport)
#elif defined(__GNUC__)
#define ELIZA_API __attribute__((visibility("default")))
#else
#define ELIZA_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define ELIZA_INFERENCE_ABI_VERSION "13"

/* Status codes. */
#define ELIZA_OK 0
#define ELIZA_ERR_NOT_IMPLEMENTED (-1)
#define ELIZA_ERR_INVALID_ARG (-2)
#define ELIZA_ERR_BUNDLE_INVALID (-3)
#define ELIZA_ERR_FFI_FAULT (-4)
#define ELIZA_ERR_OOM (-5)
#define ELIZA_ERR_ABI_MISMATCH (-6)
#define ELIZA_ERR_CANCELLED (-7)

/* Embedding pooling. ELIZA_POOLING_NONE is rejected by eliza_inference_embed. */
#define ELIZA_POOLING_NONE 0
#define ELIZA_POOLING_MEAN 1
#define ELIZA_POOLING_CLS 2
#define ELIZA_POOLING_LAST 3

typedef struct EliInferenceContext EliInferenceContext;
typedef struct EliLlmStream EliLlmStream;

/* Stream configuration: 88 bytes on 64-bit targets, natural alignment, little-endian. Zero-initialise and
 * set what you need; prompt_cache_key, mtp_drafter_path, gbnf_grammar, cache_type_k/v may be NULL. */
typedef struct eliza_llm_stream_config_t {
    int32_t max_tokens;        /*  0: generation cap; <= 0 unbounded (up to the context size) */
    float temperature;         /*  4: <= 0 greedy */
    float top_p;               /*  8: applied when 0 < top_p < 1 */
    int32_t top_k;             /* 12: applied when > 0 */
    float repeat_penalty;      /* 16: applied when != 0 and != 1, over the last 64 tokens */
    int32_t slot_id;           /* 20: -1 = none (host queueing; ignored by the library) */
    const char *prompt_cache_key; /* 24: may be NULL (ignored) */
    int32_t draft_min;         /* 32: MTP is on when draft_min > 0 and draft_max > 0 */
    int32_t draft_max;         /* 36: MTP draft window upper bound */
    const char *mtp_drafter_path; /* 40: drafter GGUF; NULL = the bundle's mtp/ drafter */
    const char *gbnf_grammar;  /* 48: NULL or "" = none; a non-empty grammar is rejected (not implemented) */
    int32_t disable_thinking;  /* 56: reserved */
    int32_t n_gpu_layers;      /* 60: -1 default, 0 CPU only (CPU only in this build) */
    const char *cache_type_k;  /* 64: KV K storage type name ("f32", "f16"), NULL = f16 */
    const char *cache_type_v;  /* 72: KV V storage type name, NULL = f16 */
    int32_t context_size;      /* 80: 0 = env ELIZA_LLM_N_CTX, else 8192; clamped to the trained context */
    /* 84: 4 bytes of padding */
} eliza_llm_stream_config_t;

#if defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L && !defined(__cplusplus)
#define ELIZA_STATIC_ASSERT _Static_assert
#elif defined(__cplusplus) && __cplusplus >= 201103L
#define ELIZA_STATIC_ASSERT static_assert
#endif
#if defined(ELIZA_STATIC_ASSERT) && UINTPTR_MAX == 0xffffffffffffffffu
ELIZA_STATIC_ASSERT(sizeof(eliza_llm_stream_config_t) == 88, "eliza_llm_stream_config_t must be 88 bytes");
ELIZA_STATIC_ASSERT(offsetof(eliza_llm_stream_config_t, prompt_cache_key) == 24, "prompt_cache_key offset");
ELIZA_STATIC_ASSERT(offsetof(eliza_llm_stream_config_t, draft_min) == 32, "draft_min offset");
ELIZA_STATIC_ASSERT(offsetof(eliza_llm_stream_config_t, mtp_drafter_path) == 40, "mtp_drafter_path offset");
ELIZA_STATIC_ASSERT(offsetof(eliza_llm_stream_config_t, gbnf_grammar) == 48, "gbnf_grammar offset");
ELIZA_STATIC_ASSERT(offsetof(eliza_llm_stream_config_t, disable_thinking) == 56, "disable_thinking offset");
ELIZA_STATIC_ASSERT(offsetof(eliza_llm_stream_config_t, cache_type_k) == 64, "cache_type_k offset");
ELIZA_STATIC_ASSERT(offsetof(eliza_llm_stream_config_t, cache_type_v) == 72, "cache_type_v offset");
ELIZA_STATIC_ASSERT(offsetof(eliza_llm_stream_config_t, context_size) == 80, "context_size offset");
#endif

/* The ABI generation as a static decimal string ("13"). Hosts refuse to bind on mismatch. */
ELIZA_API const char *eliza_inference_abi_version(void);

/* ---- context over a bundle ----
 * bundle_dir is a directory (text/<model>.gguf: the first .gguf under text/, sorted, whose lowercase name
 * contains none of "mmproj", "tokenizer", "codec"; optional mtp/drafter-<slug>.gguf, vision/,
 * eliza-1.manifest.json) or, for convenience, the path of one .gguf file. No weights are loaded here. */
ELIZA_API EliInferenceContext *eliza_inference_create(const char *bundle_dir, char **out_error);
/* NULL-safe. Streams must be closed first (open streams are closed by it). */
ELIZA_API void eliza_inference_destroy(EliInferenceContext *ctx);
/* Loads ("acquire") or drops ("evict") a region: "text" (and "mtp"; "vision" is not available in this
 * build). Evicting a region an open stream uses is refused with ELIZA_ERR_INVALID_ARG. Loading copies the
 * weight matrices out of the file mapping into anonymous huge-page memory, rearranged for the CPU's
 * kernels (E2B: 0.3-2.6 s measured, most of it the first touch of the new pages), when they fit in the
 * memory available; ELIZA_LLM_REPACK=0 keeps them in the mapping ("1", the default, copies; any other
 * value fails the load with ELIZA_ERR_INVALID_ARG). Either way evicting frees them. Each context holds
 * its own copy: two contexts over one bundle take twice the weights' memory (mapped, they shared the
 * page cache), so share one context between streams where memory is tight. */
ELIZA_API int eliza_inference_mmap_acquire(EliInferenceContext *ctx, const char *region, char **out_error);
ELIZA_API int eliza_inference_mmap_evict(EliInferenceContext *ctx, const char *region, char **out_error);

/* ---- streaming generation ---- */

/* Chooses a backend (ELIZA_LLM_BACKEND, else the highest-ranked available one, else built-in), loads the
 * text model on first use and creates the stream's KV state and sampler. cfg is copied. The stream's KV
 * cache, window checkpoints and scratch buffers are made resident here, so its memory does not grow
 * afterwards however long the conversation (about 0.4 s for E2B at a 32K context); the environment
 * variable ELIZA_LLM_RESERVE=0 lets their pages become resident as they are first written instead
 * ("1", the default, reserves; any other value fails the open with ELIZA_ERR_INVALID_ARG). */
ELIZA_API EliLlmStream *eliza_inference_llm_stream_open(EliInferenceContext *ctx, const eliza_llm_stream_config_t *cfg,
                                                        char **out_error);
/* Appends n tokens at the stream's position, in batches, checking the cancel flag between batches
 * (ELIZA_ERR_CANCELLED). Ids outside the vocabulary and context overflow are ELIZA_ERR_INVALID_ARG.
 * n == 0 is OK. */
ELIZA_API int eliza_inference_llm_stream_prefill(EliLlmStream *s, const int32_t *ids, size_t n, char **out_error);
/* One step: up to tokens_cap committed tokens (bounded by max_tokens) and their text (NUL-terminated, at
 * most text_cap - 1 bytes; a UTF-8 character is never split; special tokens render as empty text).
 * An end-of-generation token is not emitted and ends the stream. Returns 0 = more to come, 1 = final
 * (EOG or max_tokens; later calls keep returning 1 with no tokens), negative on error
 * (ELIZA_ERR_CANCELLED after a cancel). drafter_*_out (may be NULL) receive this step's MTP drafted and
 * accepted counts (0 without MTP). */
ELIZA_API int eliza_inference_llm_stream_next(EliLlmStream *s, int32_t *tokens_out, size_t tokens_cap,
                                              size_t *num_tokens_out, char *text_out, size_t text_cap,
                                              int32_t *drafter_drafted_out, int32_t *drafter_accepted_out,
                                              char **out_error);
/* Sets an atomic flag (any thread); it holds until reset / reset_keep. Returns ELIZA_OK. */
ELIZA_API int eliza_inference_llm_stream_cancel(EliLlmStream *s);
/* Clears KV, sampler, counters, end-of-stream and cancel. */
ELIZA_API int eliza_inference_llm_stream_reset(EliLlmStream *s);
/* Keeps the first n_keep positions (clamped to [0, n_past]), drops the rest, clears end-of-stream and
 * cancel; returns the number kept (>= 0). */
ELIZA_API int eliza_inference_llm_stream_reset_keep(EliLlmStream *s, int32_t n_keep);
/* Persist / restore the stream's tokens and KV. Restore checks that the file belongs to the same model
 * and configuration. */
ELIZA_API int eliza_inference_llm_stream_save_slot(EliLlmStream *s, const char *path, char **out_error);
ELIZA_API int eliza_inference_llm_stream_restore_slot(EliLlmStream *s, const char *path, char **out_error);
/* NULL-safe. */
ELIZA_API void eliza_inference_llm_stream_close(EliLlmStream *s);

/* ---- text utilities ---- */

/* Tokenizes text (text_len bytes; invalid UTF-8 goes through byte fallback). add_special prepends <bos>;
 * parse_special lets control-token text match. *out_tokens is allocated even when empty. */
ELIZA_API int eliza_inference_tokenize(EliInferenceContext *ctx, const char *text, size_t text_len, int add_special,
                                       int parse_special, int **out_tokens, size_t *out_n, char **out_error);
/* Writes the text of tokens (NUL-terminated) and returns the bytes written (without the NUL). A buffer too
 * small is ELIZA_ERR_INVALID_ARG with the needed size in the message. remove_special drops <bos>/<eos>;
 * unparse_special renders control tokens. */
ELIZA_API int eliza_inference_detokenize(EliInferenceContext *ctx, const int *tokens, size_t n, int remove_special,
                                         int unparse_special, char *out_text, size_t max_text_bytes,
                                         char **out_error);
/* Embedding of text: the model's final hidden states (after output_norm) pooled (MEAN, CLS = first token,
 * LAST) and L2-normalized. out_capacity < dimension: writes nothing, sets *out_dim, ELIZA_ERR_INVALID_ARG. */
ELIZA_API int eliza_inference_embed(EliInferenceContext *ctx, const char *text, size_t text_len, int pooling,
                                    float *out, size_t out_capacity, int *out_dim, char **out_error);
/* Probability of target_id as the next token after ids, and the most likely token with its probability. */
ELIZA_API int eliza_inference_llm_eot_score(EliInferenceContext *ctx, const int32_t *ids, size_t n, int32_t target_id,
                                            float *out_target_prob, int32_t *out_top_token, float *out_top_prob,
                                            char **out_error);

/* ---- capability probes: 1 supported, 0 not ---- */
ELIZA_API int eliza_inference_llm_stream_supported(void);
ELIZA_API int eliza_inference_llm_mtp_supported(void);
ELIZA_API int eliza_inference_llm_kv_quant_supported(void);
ELIZA_API int eliza_inference_tokenize_supported(void);
ELIZA_API int eliza_inference_embed_supported(void);
ELIZA_API int eliza_inference_llm_eot_supported(void);

/* ---- ownership ---- */
ELIZA_API void eliza_inference_free_string(char *s);
ELIZA_API void eliza_inference_free_tokens(int *tokens);

#ifdef __cplusplus
}
#endif

#endif
