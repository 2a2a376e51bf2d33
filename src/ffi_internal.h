/* What the files of the C ABI (ffi*.c) share: the out_error convention of the public header, and what
 * ffi.c (contexts and text streams) lends ffi_mm.c (images, audio) and ffi_asr.c (speech recognition). */
#ifndef ELI_FFI_INTERNAL_H
#define ELI_FFI_INTERNAL_H

#include <stdatomic.h>
#include <stddef.h>

#include "backend.h"
#include "eliza_inference.h"
#include "error.h"
#include "mmproj.h"
#include "model.h"
#include "tokenizer.h"
#include "media_prompt.h"
#include "tower_cache.h"

/* Stores "[libelizainference] fn: <message>" (malloc'ed) in *out_error when out_error is not NULL and
 * returns code. */
int eli_ffi_fail(char **out_error, const char *fn, int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
/* The same with err's message; returns err's code (ELIZA_ERR_INVALID_ARG when it holds none). */
int eli_ffi_fail_err(char **out_error, const char *fn, const eli_error *err);
/* ELIZA_ERR_NOT_IMPLEMENTED with the message "<family>" (what this build lacks). */
int eli_ffi_absent(char **out_error, const char *fn, const char *family);
/* The longest prefix of text[0..len) of at most cap bytes that does not end inside a UTF-8 character. */
size_t eli_ffi_utf8_prefix(const char *text, size_t len, size_t cap);

/* ---- contexts (ffi.c) ---- */
/* 1 and a reference when c is a live context (release it), else 0. */
int eli_ffi_context_acquire(EliInferenceContext *c);
void eli_ffi_context_release(EliInferenceContext *c);
/* The context's text model and tokenizer, loaded when needed and read-locked until eli_ffi_text_end. */
int eli_ffi_text_begin(EliInferenceContext *c, const eli_model **m, const eli_tokenizer **tok, eli_error *err);
void eli_ffi_text_end(EliInferenceContext *c);
/* The context's image and audio towers. */
eli_tower_cache *eli_ffi_towers(EliInferenceContext *c);
/* Loads the bundle's tower of that kind (mmap_acquire "vision" / "asr"), the text model first. */
int eli_ffi_tower_load(EliInferenceContext *c, eli_mm_tower kind, eli_error *err);
/* Counts another kind of stream (+1 when it opens, -1 as the last step of its close) among the context's:
 * the text model is not evicted while any is open, and destroy waits for their closes. */
void eli_ffi_context_streams(EliInferenceContext *c, int delta);
/* eliza_inference_llm_stream_open's work on a context the caller holds. */
EliLlmStream *eli_ffi_open_stream(EliInferenceContext *c, const eliza_llm_stream_config_t *cfg, eli_error *err);

/* ---- text streams (ffi.c) ---- */
typedef struct eli_ffi_stream {
    EliInferenceContext *ctx;
    const eli_backend *backend;
    eli_backend_session *session;
    atomic_int *cancel; /* the stream's flag, raised by cancel and by a close on another thread */
} eli_ffi_stream;
/* 1 and a reference when s is a live stream (release it), with what it is made of in *v; else 0. */
int eli_ffi_stream_acquire(EliLlmStream *s, eli_ffi_stream *v);
void eli_ffi_stream_release(EliLlmStream *s);

/* ---- media in streams (ffi_mm.c) ---- */
/* The most tokens describe_image and a transcription generate. */
#define ELI_FFI_MAX_NEW_TOKENS 512
/* The stream configuration of describe_image and transcription: greedy, ELI_FFI_MAX_NEW_TOKENS. */
eliza_llm_stream_config_t eli_ffi_greedy_config(void);
/* A stream the caller holds as a prompt sink (rows: NOT_IMPLEMENTED when its backend takes no embeddings). */
eli_media_sink eli_ffi_stream_sink(eli_ffi_stream *v);
/* Generated text and its token ids. */
typedef struct eli_ffi_text {
    char *text; /* NUL-terminated when len > 0 */
    size_t len;
    int32_t *ids;
    size_t n_ids;
} eli_ffi_text;
/* Generates on a stream the caller holds until the stream ends (end of generation, max_tokens, a full
 * context) or the text reaches text_room bytes. */
int eli_ffi_generate(const eli_ffi_stream *v, size_t text_room, eli_ffi_text *out, eli_error *err);
void eli_ffi_text_free(eli_ffi_text *t);
/* t's text into out (cap >= 1 bytes, NUL-terminated, cut at a UTF-8 character boundary); the bytes written. */
int eli_ffi_put_text(const eli_ffi_text *t, char *out, size_t cap);
/* Validates host PCM before use: the rate, the pointer, a size that fits max_tokens soft tokens (checked
 * before any sample is read), then every sample finite. */
int eli_ffi_check_pcm(const float *pcm, size_t n, int rate, int64_t max_tokens, eli_error *err);
/* The audio tower's soft tokens of 16 kHz mono PCM (the bundle's projector; *rows malloc'ed). */
int eli_ffi_embed_audio(EliInferenceContext *c, const float *pcm16, int64_t n, int n_embd, float **rows, int64_t *n_rows,
                        int64_t *n_frames, eli_error *err);

/* Registers how another kind of stream closes its streams of a context that is being destroyed (ffi_asr.c,
 * before it opens its first stream; each holds a text stream of the context). */
void eli_ffi_set_stream_closer(void (*close_all)(EliInferenceContext *c));

/* ---- speech recognition streams (ffi_asr.c) ---- */
/* For tests: the mel frames a stream has run through the audio encoder (-1 for a closed stream). */
int64_t eli_ffi_asr_encoded_frames(EliAsrStream *s);

#endif
