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
 * - Token ids are int32_t everywhere (the hosts' Int32Array / jint[] / [Int32]). Arrays the library
 *   allocates are freed with eliza_inference_free_tokens, strings with eliza_inference_free_string; both
 *   accept NULL.
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

/* Status codes (eliza_inference_strerror names them). */
#define ELIZA_OK 0                    /* success (calls that return a count return it, >= 0) */
#define ELIZA_ERR_NOT_IMPLEMENTED (-1) /* this build or bundle lacks the feature (a family without an engine,
                                        * a region whose file is absent, a cache type not built in) */
#define ELIZA_ERR_INVALID_ARG (-2)    /* a bad argument, handle, configuration or state; also a file that
                                        * is not what it claims (a damaged slot file) */
#define ELIZA_ERR_BUNDLE_INVALID (-3) /* the bundle directory or one of its model files is unusable */
#define ELIZA_ERR_FFI_FAULT (-4)      /* an internal invariant failed (a bug: please report it) */
#define ELIZA_ERR_OOM (-5)            /* out of memory */
#define ELIZA_ERR_ABI_MISMATCH (-6)   /* a struct or file of another ABI generation */
#define ELIZA_ERR_CANCELLED (-7)      /* eliza_inference_llm_stream_cancel was called */

/* Embedding pooling. ELIZA_POOLING_NONE is rejected by eliza_inference_embed. */
#define ELIZA_POOLING_NONE 0
#define ELIZA_POOLING_MEAN 1
#define ELIZA_POOLING_CLS 2
#define ELIZA_POOLING_LAST 3

typedef struct EliInferenceContext EliInferenceContext;
typedef struct EliLlmStream EliLlmStream;
/* Handles of the families this build answers with ELIZA_ERR_NOT_IMPLEMENTED (see "the whole host
 * surface" below); their open functions return NULL. */
typedef struct EliAsrStream EliAsrStream;
typedef struct EliVad EliVad;
typedef struct EliWakeWord EliWakeWord;
typedef struct EliSpeaker EliSpeaker;
typedef struct EliDiariz EliDiariz;

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
/* The name and meaning of a status code ("ELIZA_ERR_CANCELLED: ..."), a static string; codes >= 0 are
 * "ELIZA_OK", unknown negative codes "unknown status code". */
ELIZA_API const char *eliza_inference_strerror(int code);

/* ---- context over a bundle ----
 * bundle_dir is a directory (text/<model>.gguf: the first .gguf under text/, sorted, whose lowercase name
 * contains none of "mmproj", "tokenizer", "codec"; optional mtp/drafter-<slug>.gguf, vision/,
 * eliza-1.manifest.json) or, for convenience, the path of one .gguf file. No weights are loaded here.
 * A manifest, when present, is checked: every file it lists ("files": an array of {path, size} entries, or
 * an object of such arrays by role; "sizeBytes" is read as "size") must exist inside the bundle with the
 * declared size, else ELIZA_ERR_BUNDLE_INVALID naming the file (sha256 sums are the installer's job). */
ELIZA_API EliInferenceContext *eliza_inference_create(const char *bundle_dir, char **out_error);
/* NULL-safe, and safe on a handle already destroyed (it is refused, not freed twice; the library
 * remembers the last 256 closed handles of each kind). Open streams of the context are closed with it;
 * calls running on other threads are waited for (streams get their cancel flag raised first). Do not
 * call it from inside a callback of the same context. */
ELIZA_API void eliza_inference_destroy(EliInferenceContext *ctx);
/* Loads ("acquire") or drops ("evict") a region. The names: "text" (the text model and its tokenizer),
 * "mtp" and "dflash" (both the MTP drafter), "vision", "asr", "tts", "vad", "wakeword". A region this
 * build or bundle lacks (no drafter in the bundle; no vision or audio tower; no TTS, VAD or wake-word
 * engine in this build) answers ELIZA_ERR_NOT_IMPLEMENTED; any other name ELIZA_ERR_INVALID_ARG.
 * "vision" and "asr" load that tower of the bundle's vision/mmproj-*.gguf (and the text model, whose width
 * its embeddings must have); NOT_IMPLEMENTED also for a build without image decoding ("vision") and a
 * projector without the tower. Evicting them waits for encodes in flight and is refused (INVALID_ARG)
 * while an ASR stream is open; a later call loads them again.
 * Evicting the text model while a stream (also an ASR stream) is open is refused with ELIZA_ERR_INVALID_ARG; tokenize,
 * detokenize, embed and eot_score calls in flight on other threads finish first. Loading copies the
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
 * text model on first use and creates the stream's KV state and sampler. cfg is copied and validated:
 * non-finite or negative sampling values, a draft window with draft_min > draft_max, a negative
 * context_size (an older 80-byte struct leaves whatever lies at offset 80: any value is checked) and
 * unknown cache type names are ELIZA_ERR_INVALID_ARG; cache_type_k and cache_type_v are chosen
 * independently among f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 and the low-bit tbq4_0 tbq3_0 q4_polar
 * qjl1_256 (TurboQuant, PolarQuant, QJL: attention reads their codes directly; qjl1_256 estimates scores and
 * cannot hold values, so as cache_type_v it is ELIZA_ERR_INVALID_ARG). The stream's KV
 * cache, window checkpoints and scratch buffers are made resident here, so its memory does not grow
 * afterwards however long the conversation (about 0.4 s for E2B at a 32K context); the environment
 * variable ELIZA_LLM_RESERVE=0 lets their pages become resident as they are first written instead
 * ("1", the default, reserves; any other value fails the open with ELIZA_ERR_INVALID_ARG). */
ELIZA_API EliLlmStream *eliza_inference_llm_stream_open(EliInferenceContext *ctx, const eliza_llm_stream_config_t *cfg,
                                                        char **out_error);
/* Appends n tokens at the stream's position, in batches, checking the cancel flag between batches
 * (ELIZA_ERR_CANCELLED). Ids outside the vocabulary and context overflow (the last generated token counts:
 * it takes a position too) are ELIZA_ERR_INVALID_ARG, checked before any id is read. n == 0 is OK. */
ELIZA_API int eliza_inference_llm_stream_prefill(EliLlmStream *s, const int32_t *ids, size_t n, char **out_error);
/* One step: up to tokens_cap committed tokens (bounded by max_tokens) and their text (NUL-terminated, at
 * most text_cap - 1 bytes; a UTF-8 character is never split; special tokens render as empty text; text_cap
 * 0 drops the text, else it must be >= 5). An end-of-generation token is not emitted and ends the stream.
 * Returns 0 = more to come, 1 = final (EOG, max_tokens or a full context; later calls keep returning 1
 * with no tokens), negative on error (ELIZA_ERR_CANCELLED after a cancel). The step that reaches
 * max_tokens or fills the context returns 1 itself (no extra call that yields nothing), unless its text
 * did not fit in text_cap: the rest comes with the next call. drafter_*_out (may be NULL) receive this
 * step's MTP drafted and accepted counts (0 without MTP). */
ELIZA_API int eliza_inference_llm_stream_next(EliLlmStream *s, int32_t *tokens_out, size_t tokens_cap,
                                              size_t *num_tokens_out, char *text_out, size_t text_cap,
                                              int32_t *drafter_drafted_out, int32_t *drafter_accepted_out,
                                              char **out_error);
/* Sets an atomic flag (any thread, at any time, also while the stream is being closed); it holds until
 * reset / reset_keep. Returns ELIZA_OK, or ELIZA_ERR_INVALID_ARG for a closed or unknown stream. */
ELIZA_API int eliza_inference_llm_stream_cancel(EliLlmStream *s);
/* Clears KV, sampler, counters, end-of-stream and cancel. */
ELIZA_API int eliza_inference_llm_stream_reset(EliLlmStream *s);
/* Keeps the first n_keep positions (clamped to [0, n_past]), drops the rest, clears end-of-stream and
 * cancel; returns the number kept (>= 0). */
ELIZA_API int eliza_inference_llm_stream_reset_keep(EliLlmStream *s, int32_t n_keep);
/* Persist / restore the stream's tokens and KV (also a stream whose context is full). Restore checks that
 * the file belongs to the same model and configuration (context size, ubatch, K and V types) and is intact
 * (checksum, counts, finite logits); on any error the stream is unchanged. */
ELIZA_API int eliza_inference_llm_stream_save_slot(EliLlmStream *s, const char *path, char **out_error);
ELIZA_API int eliza_inference_llm_stream_restore_slot(EliLlmStream *s, const char *path, char **out_error);
/* NULL-safe and safe on a stream already closed. A next() or prefill() running on another thread is
 * cancelled and waited for. */
ELIZA_API void eliza_inference_llm_stream_close(EliLlmStream *s);

/* Extensions for hosts that build their own prompt: media appended at the stream's position (after a
 * prefill, before the next next()), as llama.cpp's mtmd places them (../shared/spec/gemma4-mm.md):
 *   prefill_image: the text "<|image>", the image's soft tokens (attending to each other both ways), the
 *     text "<image|>". image_bytes is an encoded file (PNG, JPEG, WebP); mmproj_path NULL = the bundle's
 *     vision/mmproj-*.gguf projector, else that file (the context keeps the last one named).
 *   prefill_audio: the text "<|audio>", the soft tokens of every 30-second chunk of the clip (causal), the
 *     text "<audio|>". PCM is mono float at any sample_rate_hz in [1000, 768000] (resampled to 16 kHz);
 *     the bundle's projector.
 * The markers are tokenised with special tokens parsed; the media's positions are not token ids (save_slot
 * and reset_keep keep them: a reset_keep that would cut one keeps none of it). Errors: a bad stream,
 * image or PCM (empty, undecodable, a sample that is not finite, more audio than the context can hold,
 * checked before any sample is read) ELIZA_ERR_INVALID_ARG; no projector or no such tower in it, a build
 * without image decoding, a backend that takes no embeddings ELIZA_ERR_NOT_IMPLEMENTED; a projector whose
 * embeddings are not the text model's width ELIZA_ERR_INVALID_ARG; cancel ELIZA_ERR_CANCELLED; context
 * overflow ELIZA_ERR_INVALID_ARG. After an error the begin marker may have been appended: reset_keep to the
 * position before the media to take it back. */
ELIZA_API int eliza_inference_llm_stream_prefill_image(EliLlmStream *s, const unsigned char *image_bytes, size_t n_bytes,
                                                       const char *mmproj_path, char **out_error);
ELIZA_API int eliza_inference_llm_stream_prefill_audio(EliLlmStream *s, const float *pcm, size_t n_samples,
                                                       int sample_rate_hz, char **out_error);

/* ---- text utilities ---- */

/* Tokenizes text (text_len bytes; invalid UTF-8 goes through byte fallback). add_special prepends <bos>;
 * parse_special lets control-token text match. *out_tokens is allocated even when empty. */
ELIZA_API int eliza_inference_tokenize(EliInferenceContext *ctx, const char *text, size_t text_len, int add_special,
                                       int parse_special, int32_t **out_tokens, size_t *out_n, char **out_error);
/* Writes the text of tokens (NUL-terminated) and returns the bytes written (without the NUL). A buffer too
 * small for all of it receives as much as fits, cut at a UTF-8 character boundary, and the call still
 * succeeds (the return value tells how much). remove_special drops <bos>/<eos>; unparse_special renders
 * control tokens. */
ELIZA_API int eliza_inference_detokenize(EliInferenceContext *ctx, const int32_t *tokens, size_t n, int remove_special,
                                         int unparse_special, char *out_text, size_t max_text_bytes,
                                         char **out_error);
/* Embedding of text: the model's final hidden states (after output_norm) pooled (MEAN, CLS = first token,
 * LAST) and L2-normalized. out NULL or out_capacity < dimension: writes nothing, sets *out_dim (to ask for
 * the dimension), ELIZA_ERR_INVALID_ARG. */
ELIZA_API int eliza_inference_embed(EliInferenceContext *ctx, const char *text, size_t text_len, int pooling,
                                    float *out, size_t out_capacity, int *out_dim, char **out_error);
/* Probability of target_id as the next token after ids, and the most likely token with its probability.
 * More ids than the scoring context holds (ELIZA_LLM_N_CTX, else 8192, clamped to the model's trained
 * context): the last ones that fit are scored (tail truncation), not an error. */
ELIZA_API int eliza_inference_llm_eot_score(EliInferenceContext *ctx, const int32_t *ids, size_t n, int32_t target_id,
                                            float *out_target_prob, int32_t *out_top_token, float *out_top_prob,
                                            char **out_error);

/* ---- speculative decoding events ----
 * After every MTP verification (a stream opened with draft_min > 0 and draft_max > 0), on the thread
 * that drives the stream and before the tokens of that round are returned by next():
 *   accepted_token_ids / n_accepted: the drafted tokens the target model accepted (committed);
 *   rejected_from / rejected_to: the half-open range of output-token indices the rejected drafts would
 *     have taken (-1 / -1 when every draft was accepted); index 0 is the first token generated since the
 *     last prefill;
 *   corrected_token_ids / n_corrected: the target's own token at rejected_from (0 or 1 of them; none
 *     when every draft was accepted: the target's extra token then is no correction).
 * The stream never emits a token before it is verified, so a host has nothing to roll back; the events
 * tell it how speculation went. The arrays live only during the callback. */
typedef struct {
    const int32_t *accepted_token_ids;
    size_t n_accepted;
    int rejected_from;
    int rejected_to;
    const int32_t *corrected_token_ids;
    size_t n_corrected;
} EliVerifierEvent;
typedef void (*eliza_verifier_cb)(const EliVerifierEvent *ev, void *user_data);
/* One callback per context (NULL clears it); it applies to every stream of the context, open or opened
 * later. When this call returns, no invocation of the previous callback is running or will start, so the
 * host may free it. The callback may call this function (to clear itself) but must not close the stream
 * or destroy the context. */
ELIZA_API int eliza_inference_set_verifier_callback(EliInferenceContext *ctx, eliza_verifier_cb cb, void *user_data,
                                                    char **out_error);

/* ---- the whole host surface ----
 * The eliza hosts bind every symbol below in one table, so all of them are exported. What this build
 * does with each family (also in the README):
 *   vision (describe_image*)       Gemma 4 image input through the bundle's vision/mmproj-*.gguf (or a named
 *                                  projector); needs a build with image decoding (vision_supported() says)
 *   speech recognition (asr_*)     Gemma 4 audio input through the same projector's audio tower
 *   text to speech, Kokoro, reference encoding, VAD, wake word, speaker embedding, diarization:
 *                                  ELIZA_ERR_NOT_IMPLEMENTED: no such engine in this library
 * A family without an engine answers honestly: its *_supported() probe returns 0, its open functions
 * return NULL with a message naming the family in *out_error, its calls return ELIZA_ERR_NOT_IMPLEMENTED
 * with that message, and its close / free functions accept anything (NULL included) and do nothing.
 * PCM is mono float. */

/* Vision: an encoded image (PNG, JPEG, WebP; at most 256 MiB), the bundle's vision/mmproj-*.gguf (or
 * mmproj_path: the context keeps the last projector named), a prompt (NULL: "Describe this image."). The
 * prompt is one user turn of the chat template holding the image, then the prompt; greedy, at most 512
 * new tokens. describe_image writes the NUL-terminated answer (generation stops once max_text_bytes - 1
 * bytes are there; a UTF-8 character is never split) and returns its bytes. The stream variant returns an
 * ordinary stream primed with the same prompt (greedy, max_tokens 512), drained with
 * eliza_inference_llm_stream_next (reset_keep, slots and close work as for any stream). Errors as for
 * eliza_inference_llm_stream_prefill_image above; the *_supported() probes are 1 when this build decodes
 * images. */
ELIZA_API int eliza_inference_vision_supported(void);
ELIZA_API int eliza_inference_vision_stream_supported(void);
ELIZA_API int eliza_inference_describe_image(EliInferenceContext *ctx, const unsigned char *image_bytes, size_t n_bytes,
                                             const char *mmproj_path, const char *prompt, char *out_text,
                                             size_t max_text_bytes, char **out_error);
ELIZA_API EliLlmStream *eliza_inference_describe_image_stream_open(EliInferenceContext *ctx,
                                                                   const unsigned char *image_bytes, size_t n_bytes,
                                                                   const char *mmproj_path, const char *prompt,
                                                                   char **out_error);

/* Speech recognition (the bundle's projector's audio tower and the text model; mmap_acquire "asr" loads the
 * tower): mono float PCM, finite, at any sample rate in [1000, 768000] Hz (resampled to 16 kHz: resample.h
 * in the sources states the filter). The prompt is one user turn of the chat template: the audio, then
 * "Transcribe this audio."; greedy, at most 512 new tokens; the text stops once max_text_bytes - 1 bytes
 * are there (never inside a UTF-8 character). No audio (or too little for one mel frame) transcribes to "".
 * transcribe writes the NUL-terminated transcript and returns its bytes.
 * A stream holds as much audio as its text context takes together with a whole transcript (about 60 s at
 * a 2048-token context, 5 minutes at 8192). feed takes PCM as it arrives and returns the samples consumed:
 * all of them, or an error (ELIZA_ERR_INVALID_ARG, nothing consumed) when they do not fit or are not valid;
 * it only resamples and buffers. partial returns the transcript of all the audio fed so far, finish the
 * final one (after it, feed is refused; partial and finish give the final transcript again). A finished
 * 30-second chunk is encoded once and kept in the stream's KV cache: a transcript costs the encoding of
 * the current chunk and the generation. finish equals asr_transcribe of the same audio. out_tokens /
 * io_n_tokens (both may be NULL; out_tokens needs io_n_tokens) receive the transcript's text-model token
 * ids: capacity in, count out; a capacity smaller than the transcript gets its first ids (truncation, not
 * an error); io_n_tokens without out_tokens receives the count. Close is NULL-safe and safe on a closed
 * stream; a partial or finish running on another thread is cancelled (ELIZA_ERR_CANCELLED) and waited
 * for. Destroying the context closes its ASR streams. */
ELIZA_API int eliza_inference_asr_transcribe(EliInferenceContext *ctx, const float *pcm, size_t n_samples,
                                             int sample_rate_hz, char *out_text, size_t max_text_bytes,
                                             char **out_error);
ELIZA_API int eliza_inference_asr_stream_supported(void);
ELIZA_API EliAsrStream *eliza_inference_asr_stream_open(EliInferenceContext *ctx, int sample_rate_hz, char **out_error);
ELIZA_API int eliza_inference_asr_stream_feed(EliAsrStream *s, const float *pcm, size_t n_samples, char **out_error);
ELIZA_API int eliza_inference_asr_stream_partial(EliAsrStream *s, char *out_text, size_t max_text_bytes,
                                                 int32_t *out_tokens, size_t *io_n_tokens, char **out_error);
ELIZA_API int eliza_inference_asr_stream_finish(EliAsrStream *s, char *out_text, size_t max_text_bytes, int32_t *out_tokens,
                                                size_t *io_n_tokens, char **out_error);
ELIZA_API void eliza_inference_asr_stream_close(EliAsrStream *s);

/* Text to speech (not a Gemma 4 capability; no engine in this library). */
typedef int (*eliza_tts_chunk_cb)(const float *pcm, size_t n_samples, int is_final, void *user_data);
ELIZA_API int eliza_inference_tts_synthesize(EliInferenceContext *ctx, const char *text, size_t text_len,
                                             const char *speaker_preset_id, float *out_pcm, size_t max_samples,
                                             char **out_error);
ELIZA_API int eliza_inference_tts_stream_supported(void);
ELIZA_API int eliza_inference_tts_synthesize_stream(EliInferenceContext *ctx, const char *text, size_t text_len,
                                                    const char *speaker_preset_id, eliza_tts_chunk_cb on_chunk,
                                                    void *user_data, char **out_error);
/* ELIZA_OK: nothing runs. */
ELIZA_API int eliza_inference_cancel_tts(EliInferenceContext *ctx, char **out_error);
ELIZA_API int eliza_inference_encode_reference(EliInferenceContext *ctx, const float *pcm, size_t n_samples,
                                               int sample_rate_hz, int *out_K, int *out_ref_T, int32_t **out_tokens,
                                               char **out_error);
ELIZA_API int eliza_inference_kokoro_load(EliInferenceContext *ctx, const char *gguf_path, const char *voice_bin_path,
                                          int style_dim, char **out_error);
ELIZA_API int eliza_inference_kokoro_synthesize(EliInferenceContext *ctx, const char *text, size_t text_len, float speed,
                                                float *out_pcm, size_t max_samples, char **out_error);
/* Negative (ELIZA_ERR_NOT_IMPLEMENTED): no Kokoro model is loaded. */
ELIZA_API int eliza_inference_kokoro_sample_rate(EliInferenceContext *ctx);

/* Voice classifiers (separate small models in the eliza app; none in this library). */
ELIZA_API int eliza_inference_vad_supported(void);
ELIZA_API EliVad *eliza_inference_vad_open(EliInferenceContext *ctx, int sample_rate_hz, char **out_error);
ELIZA_API int eliza_inference_vad_process(EliVad *vad, const float *pcm, size_t n_samples, float *out_probability,
                                          char **out_error);
ELIZA_API int eliza_inference_vad_reset(EliVad *vad, char **out_error);
ELIZA_API void eliza_inference_vad_close(EliVad *vad);
ELIZA_API int eliza_inference_wakeword_supported(void);
ELIZA_API EliWakeWord *eliza_inference_wakeword_open(EliInferenceContext *ctx, int sample_rate_hz, const char *head_name,
                                                     char **out_error);
ELIZA_API int eliza_inference_wakeword_score(EliWakeWord *wake, const float *pcm, size_t n_samples,
                                             float *out_probability, char **out_error);
ELIZA_API int eliza_inference_wakeword_reset(EliWakeWord *wake, char **out_error);
ELIZA_API void eliza_inference_wakeword_close(EliWakeWord *wake);
ELIZA_API int eliza_inference_speaker_supported(void);
ELIZA_API EliSpeaker *eliza_inference_speaker_open(EliInferenceContext *ctx, const char *gguf_path, char **out_error);
ELIZA_API int eliza_inference_speaker_embed(EliSpeaker *spk, const float *pcm, size_t n_samples, float *out_embedding,
                                            char **out_error);
ELIZA_API void eliza_inference_speaker_free(float *embedding);
ELIZA_API void eliza_inference_speaker_close(EliSpeaker *spk);
ELIZA_API int eliza_inference_diariz_supported(void);
ELIZA_API EliDiariz *eliza_inference_diariz_open(EliInferenceContext *ctx, const char *gguf_path, char **out_error);
ELIZA_API int eliza_inference_diariz_segment(EliDiariz *d, const float *pcm, size_t n_samples, int8_t *out_labels,
                                             size_t *io_n_labels, char **out_error);
ELIZA_API void eliza_inference_diariz_close(EliDiariz *d);

/* ---- capability probes: 1 supported, 0 not ---- */
ELIZA_API int eliza_inference_llm_stream_supported(void);
ELIZA_API int eliza_inference_llm_mtp_supported(void);
ELIZA_API int eliza_inference_llm_kv_quant_supported(void);
ELIZA_API int eliza_inference_tokenize_supported(void);
ELIZA_API int eliza_inference_embed_supported(void);
ELIZA_API int eliza_inference_llm_eot_supported(void);

/* ---- ownership ---- */
ELIZA_API void eliza_inference_free_string(char *s);
ELIZA_API void eliza_inference_free_tokens(int32_t *tokens);

#ifdef __cplusplus
}
#endif

#endif
