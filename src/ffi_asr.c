/* Speech recognition through the C ABI: asr_transcribe and the streaming family, on the Gemma 4 audio tower
 * of the bundle's projector and the text model, greedy over the chat template (one user turn: the audio,
 * then ELI_ASR_DEFAULT_PROMPT).
 *
 * An ASR stream is a text stream plus the audio so far. Its KV prefix (the template's head, "<|audio>", the
 * rows of every finished 30-second chunk) is computed once and kept: each transcript resets the text stream
 * to that prefix, appends the current chunk's rows, "<audio|>" and the rest of the template, and generates.
 * A chunk is finished when its 16 kHz samples are final: the streaming resampler (resample.h) gives every
 * output sample only once the input reaches as far as its filter does, so a finished chunk's samples, and
 * hence its rows, never change; it is encoded once, on the first transcript after it completes. The
 * samples not yet final (the filter's last few milliseconds) enter a partial transcript as if the input
 * ended there, which is what asr_transcribe of the audio so far does.
 *
 * asr_transcribe is a stream fed everything at once and finished, so a stream's finish and asr_transcribe of
 * the same audio run the same computations. Feed, partial and finish do their work under the stream's lock
 * (one call at a time); close may come from any thread (it cancels the text stream and waits). */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "audio.h"
#include "config.h"
#include "eliza_inference.h"
#include "engine.h"
#include "ffi_internal.h"
#include "handles.h"
#include "media_prompt.h"
#include "resample.h"

#define BAD_CTX "invalid or destroyed context"
#define BAD_ASR "invalid or closed ASR stream"

struct EliAsrStream {
    EliInferenceContext *ctx;
    EliLlmStream *llm;  /* its KV holds the prefix */
    pthread_mutex_t mu; /* one call at a time */
    int rate, n_embd;
    eli_resampler *rs;
    int64_t fed;    /* input samples */
    int64_t taken;  /* resampler outputs moved to pcm */
    float *pcm;     /* final 16 kHz samples not in the prefix yet: whole chunks waiting to be encoded, then the current one */
    int64_t n_pcm, cap_pcm;
    int64_t prefix; /* positions kept between transcripts */
    int64_t chunks; /* finished chunks in the prefix */
    int32_t *tail;  /* "<audio|>" and the rest of the template */
    size_t n_tail;
    int64_t max16;  /* the most 16 kHz samples the stream holds (its audio and a whole transcript fit the context) */
    int64_t encoded_frames;
    int finished;
};

static eli_handle_set live_asr = ELI_HANDLE_SET_INIT;

__attribute__((destructor)) static void free_registry(void) { eli_handle_set_free(&live_asr); }

int eliza_inference_asr_stream_supported(void) { return 1; }

static void close_all(EliInferenceContext *c);

static void asr_free(EliAsrStream *s) {
    EliInferenceContext *c = s->ctx;
    eli_tower_cache_hold(eli_ffi_towers(c), ELI_MM_AUDIO, -1);
    eliza_inference_llm_stream_close(s->llm);
    eli_resampler_free(s->rs);
    free(s->pcm);
    free(s->tail);
    pthread_mutex_destroy(&s->mu);
    eli_ffi_context_streams(c, -1); /* last: a destroy waiting for it may free c */
}

/* The largest number of 16 kHz samples whose soft tokens fit in room. */
static int64_t samples_fitting(int64_t room) {
    /* a chunk's 750 tokens take 480000 samples, 640 a token: (room + 3) x 640 samples make more than room */
    int64_t lo = 0, hi = (room + 3) * 640;
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo + 1) / 2;
        if (eli_audio_tokens(mid, NULL) <= room) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

/* Opens the text stream and primes it with the template's head (caller holds c). */
static int asr_open(EliInferenceContext *c, int rate, EliAsrStream **out, eli_error *err) {
    *out = NULL;
    if (rate < ELI_PCM_MIN_RATE || rate > ELI_PCM_MAX_RATE)
        return eli_fail(err, ELI_ERR_INVALID_ARG, "sample_rate_hz %d: must be in [%d, %d]", rate, ELI_PCM_MIN_RATE, ELI_PCM_MAX_RATE);
    int rc = eli_ffi_tower_load(c, ELI_MM_AUDIO, err);
    if (rc) return rc;
    eli_ffi_set_stream_closer(close_all);
    const eli_model *m;
    const eli_tokenizer *tok;
    const eli_media_kind kind = ELI_MEDIA_AUDIO;
    eli_media_prompt mp = {0};
    eli_config knobs;
    int64_t n_ctx = 0;
    if ((rc = eli_config_read(&knobs, err)) || (rc = eli_ffi_text_begin(c, &m, &tok, err))) return rc;
    const int n_embd = m->hp.n_embd;
    rc = eli_gen_context_size(0, m, knobs.n_ctx, &n_ctx, err);
    if (!rc) rc = eli_media_user_turn(tok, NULL, ELI_ASR_DEFAULT_PROMPT, &kind, 1, &mp, err);
    eli_ffi_text_end(c);
    if (rc) return rc;
    const int64_t room = n_ctx - (int64_t)(mp.n_ids[0] + mp.n_ids[1]) - ELI_FFI_MAX_NEW_TOKENS;
    EliAsrStream *s = room >= 1 ? calloc(1, sizeof *s) : NULL;
    if (!s) {
        eli_media_prompt_free(&mp);
        return room < 1 ? eli_fail(err, ELI_ERR_INVALID_ARG, "the text model's context of %lld positions has no room for audio",
                                   (long long)n_ctx)
                        : eli_fail(err, ELI_ERR_OOM, "out of memory");
    }
    s->ctx = c;
    s->rate = rate;
    s->n_embd = n_embd;
    s->max16 = samples_fitting(room);
    pthread_mutex_init(&s->mu, NULL);
    eli_ffi_context_streams(c, 1);
    eli_tower_cache_hold(eli_ffi_towers(c), ELI_MM_AUDIO, 1);
    /* the rest of the template is kept for every transcript */
    s->tail = mp.ids[1];
    s->n_tail = mp.n_ids[1];
    mp.ids[1] = NULL;
    const eliza_llm_stream_config_t cfg = eli_ffi_greedy_config();
    if (!(s->rs = eli_resampler_new(rate, ELI_AUDIO_RATE, err)) || !(s->llm = eli_ffi_open_stream(c, &cfg, err))) rc = err->code;
    eli_ffi_stream v;
    if (!rc && !eli_ffi_stream_acquire(s->llm, &v)) rc = eli_fail(err, ELI_ERR_INVALID_ARG, "the text stream was closed");
    else if (!rc) {
        const eli_media_sink sink = eli_ffi_stream_sink(&v);
        rc = sink.ids(sink.p, mp.ids[0], mp.n_ids[0], err);
        eli_ffi_stream_release(s->llm);
    }
    s->prefix = (int64_t)mp.n_ids[0];
    eli_media_prompt_free(&mp);
    if (rc) {
        asr_free(s);
        free(s);
        return rc;
    }
    *out = s;
    return ELI_OK;
}

/* Moves the resampler's outputs up to j into pcm. */
static int take_pcm(EliAsrStream *s, int64_t j, eli_error *err) {
    const int64_t n = j - s->taken;
    if (n <= 0) return ELI_OK;
    if (s->n_pcm + n > s->cap_pcm) {
        const int64_t cap = 2 * (s->n_pcm + n) + 4096;
        float *p = realloc(s->pcm, (size_t)cap * sizeof *p);
        if (!p) return eli_fail(err, ELI_ERR_OOM, "out of memory for %lld samples", (long long)cap);
        s->pcm = p;
        s->cap_pcm = cap;
    }
    int rc = eli_resampler_read(s->rs, s->taken, j, s->pcm + s->n_pcm, err);
    if (rc) return rc;
    s->n_pcm += n;
    s->taken = j;
    eli_resampler_discard(s->rs, j);
    return ELI_OK;
}

static int asr_feed(EliAsrStream *s, const float *pcm, size_t n, eli_error *err) {
    if (s->finished) return eli_fail(err, ELI_ERR_INVALID_ARG, "the stream is finished: open a new one for more audio");
    if (!pcm && n) return eli_fail(err, ELI_ERR_INVALID_ARG, "pcm is NULL with n_samples %zu", n);
    if (!n) return ELI_OK;
    /* the size before any sample is read (a guess in floating point first keeps the exact count from overflowing) */
    const double held = (double)s->max16 / ELI_AUDIO_RATE, have = (double)s->fed / s->rate;
    if ((double)n / s->rate > held + 1.0 || eli_resample_length(s->fed + (int64_t)n, s->rate, ELI_AUDIO_RATE) > s->max16)
        return eli_fail(err, ELI_ERR_INVALID_ARG,
                        "%zu more samples (%.2f s) do not fit: the stream holds at most %.2f s of audio (the text model's context) "
                        "and has %.2f s; finish it and open another",
                        n, (double)n / s->rate, held, have);
    int rc = eli_pcm_check(pcm, (int64_t)n, "audio sample", err);
    if (rc) return rc;
    rc = eli_resampler_push(s->rs, pcm, (int64_t)n, err);
    if (rc) return rc;
    s->fed += (int64_t)n;
    return take_pcm(s, eli_resampler_n_final(s->rs), err);
}

/* Keeps the text stream's prefix and drops the rest (the last transcript). */
static int back_to_prefix(EliAsrStream *s, const eli_ffi_stream *v, eli_error *err) {
    const int kept = v->backend->reset_keep(v->session, (int32_t)s->prefix);
    return kept == s->prefix ? ELI_OK
                             : eli_fail(err, ELI_ERR_FFI_FAULT, "the text stream kept %d of its %lld prefix positions", kept,
                                        (long long)s->prefix);
}

/* Encodes the finished chunks waiting in pcm and appends their rows to the prefix. */
static int settle(EliAsrStream *s, eli_ffi_stream *v, eli_error *err) {
    const eli_media_sink sink = eli_ffi_stream_sink(v);
    while (s->n_pcm >= ELI_MEL_CHUNK_SAMPLES) {
        float *rows = NULL;
        int64_t n_rows = 0, frames = 0;
        int rc = eli_ffi_embed_audio(s->ctx, s->pcm, ELI_MEL_CHUNK_SAMPLES, s->n_embd, &rows, &n_rows, &frames, err);
        if (!rc) {
            s->encoded_frames += frames;
            if (!(rc = back_to_prefix(s, v, err))) rc = sink.rows(sink.p, rows, n_rows, 0, err);
            if (rc) v->backend->reset_keep(v->session, (int32_t)s->prefix); /* nothing of a chunk that did not get in */
        }
        free(rows);
        if (rc) return rc;
        s->prefix += n_rows;
        s->chunks++;
        s->n_pcm -= ELI_MEL_CHUNK_SAMPLES;
        memmove(s->pcm, s->pcm + ELI_MEL_CHUNK_SAMPLES, (size_t)s->n_pcm * sizeof *s->pcm);
    }
    return ELI_OK;
}

/* The transcript of all the audio so far (final: the input has ended, so every sample is final). */
static int asr_transcript(EliAsrStream *s, int final, size_t text_room, eli_ffi_text *t, eli_error *err) {
    memset(t, 0, sizeof *t);
    eli_ffi_stream v;
    if (!eli_ffi_stream_acquire(s->llm, &v)) return eli_fail(err, ELI_ERR_INVALID_ARG, "the stream's context was destroyed");
    float *cur = NULL, *rows = NULL;
    int64_t n_rows = 0, frames = 0;
    int rc = final && !s->finished ? take_pcm(s, eli_resampler_n_total(s->rs), err) : ELI_OK;
    if (!rc && final) s->finished = 1;
    if (!rc) rc = settle(s, &v, err);
    /* the current chunk: its final samples, and the rest as if the input ended now */
    const int64_t n_tail = final ? 0 : eli_resampler_n_total(s->rs) - s->taken, n_cur = s->n_pcm + n_tail;
    if (!rc && !(cur = malloc((size_t)(n_cur > 0 ? n_cur : 1) * sizeof *cur)))
        rc = eli_fail(err, ELI_ERR_OOM, "out of memory for %lld samples", (long long)n_cur);
    if (!rc) {
        if (s->n_pcm) memcpy(cur, s->pcm, (size_t)s->n_pcm * sizeof *cur);
        rc = eli_resampler_read(s->rs, s->taken, s->taken + n_tail, cur + s->n_pcm, err);
    }
    const int any = s->chunks > 0 || eli_audio_tokens(n_cur, NULL) > 0;
    if (!rc && any) rc = back_to_prefix(s, &v, err);
    if (!rc && any && eli_audio_tokens(n_cur, NULL) > 0) {
        rc = eli_ffi_embed_audio(s->ctx, cur, n_cur, s->n_embd, &rows, &n_rows, &frames, err);
        s->encoded_frames += frames;
        const eli_media_rows r = {rows, n_rows, s->n_embd};
        const eli_media_sink sink = eli_ffi_stream_sink(&v);
        if (!rc) rc = eli_media_rows_prefill(ELI_MEDIA_AUDIO, &r, 0, &sink, err);
    }
    if (!rc && any) {
        const eli_media_sink sink = eli_ffi_stream_sink(&v);
        if (!(rc = sink.ids(sink.p, s->tail, s->n_tail, err))) rc = eli_ffi_generate(&v, text_room, t, err);
    }
    eli_ffi_stream_release(s->llm);
    free(cur);
    free(rows);
    return rc;
}

/* The transcript's text into out_text and its ids into out_tokens (the first *io_n_tokens of them). */
static int put_transcript(const eli_ffi_text *t, char *out_text, size_t max_text_bytes, int32_t *out_tokens, size_t *io_n_tokens) {
    if (io_n_tokens) {
        const size_t n = out_tokens && *io_n_tokens < t->n_ids ? *io_n_tokens : t->n_ids;
        if (out_tokens && n) memcpy(out_tokens, t->ids, n * sizeof *out_tokens);
        *io_n_tokens = n;
    }
    return eli_ffi_put_text(t, out_text, max_text_bytes);
}

/* ---- the ABI ---- */

int eliza_inference_asr_transcribe(EliInferenceContext *ctx, const float *pcm, size_t n_samples, int sample_rate_hz,
                                   char *out_text, size_t max_text_bytes, char **out_error) {
    static const char fn[] = "eliza_inference_asr_transcribe";
    if (!out_text || !max_text_bytes) return eli_ffi_fail(out_error, fn, ELIZA_ERR_INVALID_ARG, "out_text is NULL or max_text_bytes is 0");
    out_text[0] = '\0';
    if (!eli_ffi_context_acquire(ctx)) return eli_ffi_fail(out_error, fn, ELIZA_ERR_INVALID_ARG, BAD_CTX);
    eli_error err = {0};
    EliAsrStream *s = NULL;
    eli_ffi_text t = {0};
    int rc = !pcm && n_samples ? eli_fail(&err, ELI_ERR_INVALID_ARG, "pcm is NULL with n_samples %zu", n_samples)
                               : asr_open(ctx, sample_rate_hz, &s, &err);
    if (!rc && !(rc = asr_feed(s, pcm, n_samples, &err))) rc = asr_transcript(s, 1, max_text_bytes - 1, &t, &err);
    if (s) {
        asr_free(s);
        free(s);
    }
    eli_ffi_context_release(ctx);
    if (rc) {
        if (rc == ELI_ERR_NOT_IMPLEMENTED) eli_error_prefix(&err, "speech recognition");
        return eli_ffi_fail_err(out_error, fn, &err);
    }
    rc = eli_ffi_put_text(&t, out_text, max_text_bytes);
    eli_ffi_text_free(&t);
    return rc;
}

EliAsrStream *eliza_inference_asr_stream_open(EliInferenceContext *ctx, int sample_rate_hz, char **out_error) {
    static const char fn[] = "eliza_inference_asr_stream_open";
    if (!eli_ffi_context_acquire(ctx)) {
        eli_ffi_fail(out_error, fn, ELIZA_ERR_INVALID_ARG, BAD_CTX);
        return NULL;
    }
    eli_error err = {0};
    EliAsrStream *s;
    int rc = asr_open(ctx, sample_rate_hz, &s, &err);
    if (!rc && !eli_handle_add(&live_asr, s)) {
        asr_free(s);
        free(s);
        rc = eli_fail(&err, ELI_ERR_OOM, "out of memory");
    }
    eli_ffi_context_release(ctx);
    if (rc) {
        if (rc == ELI_ERR_NOT_IMPLEMENTED) eli_error_prefix(&err, "speech recognition");
        eli_ffi_fail_err(out_error, fn, &err);
        return NULL;
    }
    return s;
}

int eliza_inference_asr_stream_feed(EliAsrStream *s, const float *pcm, size_t n_samples, char **out_error) {
    static const char fn[] = "eliza_inference_asr_stream_feed";
    if (n_samples > (size_t)INT32_MAX)
        return eli_ffi_fail(out_error, fn, ELIZA_ERR_INVALID_ARG, "n_samples %zu: more than one call can report", n_samples);
    if (!eli_handle_acquire(&live_asr, s)) return eli_ffi_fail(out_error, fn, ELIZA_ERR_INVALID_ARG, BAD_ASR);
    eli_error err = {0};
    pthread_mutex_lock(&s->mu);
    int rc = asr_feed(s, pcm, n_samples, &err);
    pthread_mutex_unlock(&s->mu);
    eli_handle_release(&live_asr, s);
    return rc ? eli_ffi_fail_err(out_error, fn, &err) : (int)n_samples;
}

static int transcript_call(EliAsrStream *s, int final, char *out_text, size_t max_text_bytes, int32_t *out_tokens,
                           size_t *io_n_tokens, char **out_error, const char *fn) {
    if (!out_text || !max_text_bytes) {
        if (io_n_tokens) *io_n_tokens = 0;
        return eli_ffi_fail(out_error, fn, ELIZA_ERR_INVALID_ARG, "out_text is NULL or max_text_bytes is 0");
    }
    out_text[0] = '\0';
    if (out_tokens && !io_n_tokens)
        return eli_ffi_fail(out_error, fn, ELIZA_ERR_INVALID_ARG, "out_tokens is given without io_n_tokens (its capacity)");
    if (!eli_handle_acquire(&live_asr, s)) {
        if (io_n_tokens) *io_n_tokens = 0;
        return eli_ffi_fail(out_error, fn, ELIZA_ERR_INVALID_ARG, BAD_ASR);
    }
    eli_error err = {0};
    eli_ffi_text t;
    pthread_mutex_lock(&s->mu);
    int rc = asr_transcript(s, final, max_text_bytes - 1, &t, &err);
    pthread_mutex_unlock(&s->mu);
    eli_handle_release(&live_asr, s);
    if (rc) {
        if (io_n_tokens) *io_n_tokens = 0;
        return eli_ffi_fail_err(out_error, fn, &err);
    }
    rc = put_transcript(&t, out_text, max_text_bytes, out_tokens, io_n_tokens);
    eli_ffi_text_free(&t);
    return rc;
}

int eliza_inference_asr_stream_partial(EliAsrStream *s, char *out_text, size_t max_text_bytes, int32_t *out_tokens,
                                       size_t *io_n_tokens, char **out_error) {
    return transcript_call(s, 0, out_text, max_text_bytes, out_tokens, io_n_tokens, out_error, "eliza_inference_asr_stream_partial");
}

int eliza_inference_asr_stream_finish(EliAsrStream *s, char *out_text, size_t max_text_bytes, int32_t *out_tokens,
                                      size_t *io_n_tokens, char **out_error) {
    return transcript_call(s, 1, out_text, max_text_bytes, out_tokens, io_n_tokens, out_error, "eliza_inference_asr_stream_finish");
}

/* A close on another thread stops a transcript in flight. */
static void raise_cancel(void *p) { eliza_inference_llm_stream_cancel(((EliAsrStream *)p)->llm); }

static void close_retired(EliAsrStream *s) {
    asr_free(s);
    eli_handle_bury(&live_asr, s);
}

void eliza_inference_asr_stream_close(EliAsrStream *s) {
    if (eli_handle_retire(&live_asr, s, raise_cancel)) close_retired(s);
}

static int stream_of_context(const void *s, const void *c) { return ((const EliAsrStream *)s)->ctx == c; }

/* The ASR streams of a context being destroyed (ffi.c calls this through eli_ffi_set_stream_closer). */
static void close_all(EliInferenceContext *c) {
    for (EliAsrStream *s; (s = eli_handle_find(&live_asr, stream_of_context, c));)
        if (eli_handle_retire(&live_asr, s, raise_cancel)) close_retired(s);
}

int64_t eli_ffi_asr_encoded_frames(EliAsrStream *s) {
    if (!eli_handle_acquire(&live_asr, s)) return -1;
    pthread_mutex_lock(&s->mu);
    const int64_t n = s->encoded_frames;
    pthread_mutex_unlock(&s->mu);
    eli_handle_release(&live_asr, s);
    return n;
}
