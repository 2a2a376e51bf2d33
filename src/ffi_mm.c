/* The C ABI's image and audio input: describe_image (greedy, over the chat template), its primed stream,
 * and the extensions that append an image or an audio clip to a stream at its position
 * (eliza_inference_llm_stream_prefill_image / _audio), plus what the speech-recognition calls (ffi_asr.c)
 * share with them: the towers' encodes, a stream as a prompt sink, greedy generation into a text.
 *
 * The towers are the context's (tower_cache.h): the bundle's projector, or the one a call names. Images
 * and audio are validated before anything reads them: sizes first (a length that cannot be real is refused
 * before a byte is touched), then the bytes (the image decoders) or the samples (finite). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "audio.h"
#include "chat.h"
#include "eliza_inference.h"
#include "ffi_internal.h"
#include "image.h"
#include "media_prompt.h"
#include "resample.h"
#include "vision.h"

#define BAD_CTX "invalid or destroyed context"
#define BAD_STREAM "invalid or closed stream"

int eliza_inference_vision_supported(void) { return eli_vision_available(); }
int eliza_inference_vision_stream_supported(void) { return eli_vision_available(); }

/* ---- shared with ffi_asr.c (ffi_media.h) ---- */

eliza_llm_stream_config_t eli_ffi_greedy_config(void) {
    eliza_llm_stream_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.max_tokens = ELI_FFI_MAX_NEW_TOKENS;
    cfg.slot_id = -1;
    cfg.n_gpu_layers = -1;
    return cfg;
}

static int sink_ids(void *p, const int32_t *ids, size_t n, eli_error *err) {
    const eli_ffi_stream *v = p;
    if (atomic_load(v->cancel)) return eli_fail(err, ELI_ERR_CANCELLED, "stream was cancelled");
    const int rc = v->backend->prefill(v->session, ids, n, v->cancel, err);
    return rc < 0 ? rc : ELI_OK;
}

static int sink_rows(void *p, const float *rows, int64_t n, int bidir, eli_error *err) {
    const eli_ffi_stream *v = p;
    if (!v->backend->prefill_embd)
        return eli_fail(err, ELI_ERR_NOT_IMPLEMENTED, "backend '%s' takes no embeddings (image or audio input)", v->backend->name);
    if (atomic_load(v->cancel)) return eli_fail(err, ELI_ERR_CANCELLED, "stream was cancelled");
    const int rc = v->backend->prefill_embd(v->session, rows, n, bidir, v->cancel, err);
    return rc < 0 ? rc : ELI_OK;
}

eli_media_sink eli_ffi_stream_sink(eli_ffi_stream *v) { return (eli_media_sink){v, sink_ids, sink_rows}; }

int eli_ffi_generate(const eli_ffi_stream *v, size_t text_room, eli_ffi_text *out, eli_error *err) {
    memset(out, 0, sizeof *out);
    char buf[512];
    int32_t t[16];
    size_t cap_text = 0, cap_ids = 0;
    while (out->len < text_room) {
        size_t k;
        const int r = v->backend->next(v->session, t, sizeof t / sizeof t[0], &k, buf, sizeof buf, NULL, NULL, v->cancel, err);
        if (r < 0) {
            eli_ffi_text_free(out);
            return r;
        }
        const size_t bl = strlen(buf);
        if (out->len + bl + 1 > cap_text || out->n_ids + k > cap_ids) {
            cap_text = 2 * (out->len + bl + 1) + 64;
            cap_ids = 2 * (out->n_ids + k) + 16;
            char *nt = realloc(out->text, cap_text);
            if (nt) out->text = nt;
            int32_t *ni = realloc(out->ids, cap_ids * sizeof *ni);
            if (ni) out->ids = ni;
            if (!nt || !ni) {
                eli_ffi_text_free(out);
                return eli_fail(err, ELI_ERR_OOM, "out of memory");
            }
        }
        memcpy(out->text + out->len, buf, bl + 1);
        out->len += bl;
        memcpy(out->ids + out->n_ids, t, k * sizeof *t);
        out->n_ids += k;
        if (r == 1) break;
    }
    return ELI_OK;
}

void eli_ffi_text_free(eli_ffi_text *t) {
    free(t->text);
    free(t->ids);
    memset(t, 0, sizeof *t);
}

int eli_ffi_put_text(const eli_ffi_text *t, char *out, size_t cap) {
    const size_t room = cap - 1 < (size_t)INT32_MAX ? cap - 1 : (size_t)INT32_MAX;
    const size_t w = t->text ? eli_ffi_utf8_prefix(t->text, t->len, room) : 0;
    if (w) memcpy(out, t->text, w);
    out[w] = '\0';
    return (int)w;
}

int eli_ffi_embed_audio(EliInferenceContext *c, const float *pcm16, int64_t n, int n_embd, float **rows, int64_t *n_rows,
                        int64_t *n_frames, eli_error *err) {
    eli_tower_use use;
    int rc = eli_tower_cache_begin(eli_ffi_towers(c), ELI_MM_AUDIO, NULL, n_embd, &use, err);
    if (rc) return rc;
    rc = eli_audio_embed(use.xt, pcm16, n, rows, n_rows, n_frames, err);
    eli_tower_cache_end(eli_ffi_towers(c), &use);
    return rc;
}

int eli_ffi_check_pcm(const float *pcm, size_t n, int rate, int64_t max_tokens, eli_error *err) {
    if (rate < ELI_PCM_MIN_RATE || rate > ELI_PCM_MAX_RATE)
        return eli_fail(err, ELI_ERR_INVALID_ARG, "sample_rate_hz %d: must be in [%d, %d]", rate, ELI_PCM_MIN_RATE, ELI_PCM_MAX_RATE);
    if (!pcm && n) return eli_fail(err, ELI_ERR_INVALID_ARG, "pcm is NULL with n_samples %zu", n);
    /* the size before any sample is read: what cannot fit the context is no audio this call could hold */
    const double seconds = (double)n / rate, max_seconds = (double)(max_tokens + 1) * ELI_MEL_CHUNK_SAMPLES /
                                                               (double)eli_media_audio_span() / ELI_AUDIO_RATE;
    if (seconds > max_seconds + 30.0 ||
        eli_audio_tokens(eli_resample_length((int64_t)n, rate, ELI_AUDIO_RATE), NULL) > max_tokens)
        return eli_fail(err, ELI_ERR_INVALID_ARG,
                        "%zu samples at %d Hz (%.1f s) are more audio than fits: at most %lld soft tokens, about %.0f s",
                        n, rate, seconds, (long long)max_tokens, max_seconds);
    return eli_pcm_check(pcm, (int64_t)n, "audio sample", err);
}

/* ---- images ---- */

static int check_image(const unsigned char *bytes, size_t n, eli_error *err) {
    if (!bytes || !n) return eli_fail(err, ELI_ERR_INVALID_ARG, "image_bytes is NULL or n_bytes is 0");
    if (n > ELI_IMAGE_MAX_FILE_BYTES)
        return eli_fail(err, ELI_ERR_INVALID_ARG, "n_bytes %zu: an image file may have at most %zu bytes", n,
                        ELI_IMAGE_MAX_FILE_BYTES);
    return ELI_OK;
}

/* The soft tokens of an encoded image on the vision tower of projector mmproj (NULL: the bundle's). The tower
 * is looked up first, so a context without one says so whatever the bytes are. */
static int encode_image(EliInferenceContext *c, const unsigned char *bytes, size_t n, const char *mmproj, int n_embd,
                        eli_vision_embd *e, eli_error *err) {
    memset(e, 0, sizeof *e);
    eli_tower_use use;
    int rc = eli_tower_cache_begin(eli_ffi_towers(c), ELI_MM_VISION, mmproj, n_embd, &use, err);
    if (rc) return rc;
    eli_image img;
    if (!(rc = eli_image_decode(bytes, n, &img, err))) {
        rc = eli_vision_encode(use.xt, &img, e, err);
        eli_image_free(&img);
    }
    eli_tower_cache_end(eli_ffi_towers(c), &use);
    return rc;
}

/* The prompt around one image: text NULL = its markers alone (prefill_image), else a user turn of the chat
 * template with the image before text; and the image's rows. */
static int image_prompt(EliInferenceContext *c, const unsigned char *bytes, size_t n, const char *mmproj, const char *text,
                        eli_media_prompt *mp, eli_vision_embd *e, eli_error *err) {
    memset(e, 0, sizeof *e);
    const eli_model *m;
    const eli_tokenizer *tok;
    const eli_media_kind kind = ELI_MEDIA_IMAGE;
    int rc = eli_ffi_text_begin(c, &m, &tok, err);
    if (rc) return rc;
    const int n_embd = m->hp.n_embd;
    rc = text ? eli_media_user_turn(tok, NULL, text, &kind, 1, mp, err)
              : eli_media_prompt_split(tok, ELI_CHAT_IMAGE_PART, strlen(ELI_CHAT_IMAGE_PART), &kind, 1, mp, err);
    eli_ffi_text_end(c);
    if (!rc && (rc = encode_image(c, bytes, n, mmproj, n_embd, e, err))) eli_media_prompt_free(mp);
    return rc;
}

/* Sends the prompt and the image to a stream the caller holds. */
static int prefill_image_prompt(eli_ffi_stream *v, const eli_media_prompt *mp, const eli_vision_embd *e, eli_error *err) {
    const eli_media_rows rows = {e->embd, e->n_tokens, e->n_embd};
    const eli_media_sink sink = eli_ffi_stream_sink(v);
    return eli_media_prompt_prefill(mp, &rows, 0, &sink, err);
}

/* A new greedy stream primed with a user turn holding the image and the prompt (describe_image's work). */
static int prime_image_stream(EliInferenceContext *c, const unsigned char *bytes, size_t n, const char *mmproj,
                              const char *prompt, EliLlmStream **out, char **out_error, const char *fn) {
    *out = NULL;
    eli_error err = {0};
    eli_media_prompt mp;
    eli_vision_embd e;
    if (check_image(bytes, n, &err) || image_prompt(c, bytes, n, mmproj, prompt ? prompt : ELI_VISION_DEFAULT_PROMPT, &mp, &e, &err))
        return eli_ffi_fail_err(out_error, fn, &err);
    const eliza_llm_stream_config_t cfg = eli_ffi_greedy_config();
    EliLlmStream *s = eli_ffi_open_stream(c, &cfg, &err);
    eli_ffi_stream v;
    int rc = s ? ELI_OK : err.code;
    if (s && eli_ffi_stream_acquire(s, &v)) {
        rc = prefill_image_prompt(&v, &mp, &e, &err);
        eli_ffi_stream_release(s);
    } else if (s) {
        rc = eli_fail(&err, ELI_ERR_INVALID_ARG, "the stream was closed while it was being primed");
    }
    eli_media_prompt_free(&mp);
    eli_vision_embd_free(&e);
    if (rc) {
        eliza_inference_llm_stream_close(s);
        return eli_ffi_fail_err(out_error, fn, &err);
    }
    *out = s;
    return ELI_OK;
}

int eliza_inference_describe_image(EliInferenceContext *ctx, const unsigned char *image_bytes, size_t n_bytes,
                                   const char *mmproj_path, const char *prompt, char *out_text, size_t max_text_bytes,
                                   char **out_error) {
    static const char fn[] = "eliza_inference_describe_image";
    if (!out_text || !max_text_bytes) return eli_ffi_fail(out_error, fn, ELIZA_ERR_INVALID_ARG, "out_text is NULL or max_text_bytes is 0");
    out_text[0] = '\0';
    if (!eli_ffi_context_acquire(ctx)) return eli_ffi_fail(out_error, fn, ELIZA_ERR_INVALID_ARG, BAD_CTX);
    EliLlmStream *s;
    int rc = prime_image_stream(ctx, image_bytes, n_bytes, mmproj_path, prompt, &s, out_error, fn);
    eli_ffi_stream v;
    if (!rc && eli_ffi_stream_acquire(s, &v)) {
        eli_error err = {0};
        eli_ffi_text t;
        rc = eli_ffi_generate(&v, max_text_bytes - 1, &t, &err);
        eli_ffi_stream_release(s);
        rc = rc ? eli_ffi_fail_err(out_error, fn, &err) : eli_ffi_put_text(&t, out_text, max_text_bytes);
        eli_ffi_text_free(&t);
    } else if (!rc) {
        rc = eli_ffi_fail(out_error, fn, ELIZA_ERR_INVALID_ARG, BAD_STREAM);
    }
    eliza_inference_llm_stream_close(s);
    eli_ffi_context_release(ctx);
    return rc;
}

EliLlmStream *eliza_inference_describe_image_stream_open(EliInferenceContext *ctx, const unsigned char *image_bytes,
                                                         size_t n_bytes, const char *mmproj_path, const char *prompt,
                                                         char **out_error) {
    static const char fn[] = "eliza_inference_describe_image_stream_open";
    if (!eli_ffi_context_acquire(ctx)) {
        eli_ffi_fail(out_error, fn, ELIZA_ERR_INVALID_ARG, BAD_CTX);
        return NULL;
    }
    EliLlmStream *s;
    prime_image_stream(ctx, image_bytes, n_bytes, mmproj_path, prompt, &s, out_error, fn);
    eli_ffi_context_release(ctx);
    return s;
}

int eliza_inference_llm_stream_prefill_image(EliLlmStream *s, const unsigned char *image_bytes, size_t n_bytes,
                                             const char *mmproj_path, char **out_error) {
    static const char fn[] = "eliza_inference_llm_stream_prefill_image";
    eli_ffi_stream v;
    if (!eli_ffi_stream_acquire(s, &v)) return eli_ffi_fail(out_error, fn, ELIZA_ERR_INVALID_ARG, BAD_STREAM);
    eli_error err = {0};
    eli_media_prompt mp;
    eli_vision_embd e;
    int rc = !v.backend->prefill_embd ? eli_fail(&err, ELI_ERR_NOT_IMPLEMENTED, "backend '%s' takes no embeddings", v.backend->name)
                                      : check_image(image_bytes, n_bytes, &err);
    if (!rc && !(rc = image_prompt(v.ctx, image_bytes, n_bytes, mmproj_path, NULL, &mp, &e, &err))) {
        rc = prefill_image_prompt(&v, &mp, &e, &err);
        eli_media_prompt_free(&mp);
        eli_vision_embd_free(&e);
    }
    eli_ffi_stream_release(s);
    return rc ? eli_ffi_fail_err(out_error, fn, &err) : ELIZA_OK;
}

/* ---- audio ---- */

int eliza_inference_llm_stream_prefill_audio(EliLlmStream *s, const float *pcm, size_t n_samples, int sample_rate_hz,
                                             char **out_error) {
    static const char fn[] = "eliza_inference_llm_stream_prefill_audio";
    eli_ffi_stream v;
    if (!eli_ffi_stream_acquire(s, &v)) return eli_ffi_fail(out_error, fn, ELIZA_ERR_INVALID_ARG, BAD_STREAM);
    eli_error err = {0};
    eli_media_prompt mp = {0};
    float *pcm16 = NULL, *rows = NULL;
    int64_t n16 = 0, n_rows = 0;
    const eli_model *m;
    const eli_tokenizer *tok;
    const eli_media_kind kind = ELI_MEDIA_AUDIO;
    int rc = !v.backend->prefill_embd ? eli_fail(&err, ELI_ERR_NOT_IMPLEMENTED, "backend '%s' takes no embeddings", v.backend->name)
                                      : eli_ffi_text_begin(v.ctx, &m, &tok, &err);
    int n_embd = 0;
    if (!rc) {
        n_embd = m->hp.n_embd;
        rc = eli_ffi_check_pcm(pcm, n_samples, sample_rate_hz, m->hp.n_ctx_train, &err);
        if (!rc) rc = eli_media_prompt_split(tok, ELI_CHAT_AUDIO_PART, strlen(ELI_CHAT_AUDIO_PART), &kind, 1, &mp, &err);
        eli_ffi_text_end(v.ctx);
    }
    if (!rc && !n_samples) rc = eli_fail(&err, ELI_ERR_INVALID_ARG, "no audio (n_samples is 0)");
    if (!rc) rc = eli_resample(pcm, (int64_t)n_samples, sample_rate_hz, ELI_AUDIO_RATE, &pcm16, &n16, &err);
    if (!rc) rc = eli_ffi_embed_audio(v.ctx, pcm16, n16, n_embd, &rows, &n_rows, NULL, &err);
    if (!rc) {
        const eli_media_rows r = {rows, n_rows, n_embd};
        const eli_media_sink sink = eli_ffi_stream_sink(&v);
        rc = eli_media_prompt_prefill(&mp, &r, 0, &sink, &err);
    }
    eli_ffi_stream_release(s);
    eli_media_prompt_free(&mp);
    free(pcm16);
    free(rows);
    return rc ? eli_ffi_fail_err(out_error, fn, &err) : ELIZA_OK;
}
