/* The host-surface families this library has no engine for: text to speech (and Kokoro, reference
 * encoding), voice activity detection, wake word, speaker embedding, diarization. The eliza hosts bind
 * these symbols with the rest, so they exist, and answer honestly (../shared/spec/ffi.md, "The whole host
 * surface"): probes 0, opens NULL, calls ELIZA_ERR_NOT_IMPLEMENTED with a message naming the family,
 * close/free accept anything and do nothing (no handle of these kinds is ever handed out). Arguments are
 * not looked at: there is nothing they could change. */
#include <stddef.h>

#include "eliza_inference.h"
#include "ffi_internal.h"

static const char TTS[] = "this build has no text-to-speech engine";
static const char KOKORO[] = "this build has no Kokoro text-to-speech engine";
static const char REFERENCE[] = "this build has no voice reference encoder (text to speech)";
static const char VAD[] = "this build has no voice activity detector";
static const char WAKEWORD[] = "this build has no wake-word detector";
static const char SPEAKER[] = "this build has no speaker-embedding model";
static const char DIARIZ[] = "this build has no speaker diarization";

/* ---- text to speech ---- */

int eliza_inference_tts_synthesize(EliInferenceContext *ctx, const char *text, size_t text_len,
                                   const char *speaker_preset_id, float *out_pcm, size_t max_samples, char **out_error) {
    (void)ctx, (void)text, (void)text_len, (void)speaker_preset_id, (void)out_pcm, (void)max_samples;
    return eli_ffi_absent(out_error, __func__, TTS);
}

int eliza_inference_tts_stream_supported(void) { return 0; }

int eliza_inference_tts_synthesize_stream(EliInferenceContext *ctx, const char *text, size_t text_len,
                                          const char *speaker_preset_id, eliza_tts_chunk_cb on_chunk, void *user_data,
                                          char **out_error) {
    (void)ctx, (void)text, (void)text_len, (void)speaker_preset_id, (void)on_chunk, (void)user_data;
    return eli_ffi_absent(out_error, __func__, TTS);
}

int eliza_inference_cancel_tts(EliInferenceContext *ctx, char **out_error) {
    (void)ctx, (void)out_error;
    return ELIZA_OK; /* nothing runs, so there is nothing to cancel */
}

int eliza_inference_encode_reference(EliInferenceContext *ctx, const float *pcm, size_t n_samples, int sample_rate_hz,
                                     int *out_K, int *out_ref_T, int32_t **out_tokens, char **out_error) {
    (void)ctx, (void)pcm, (void)n_samples, (void)sample_rate_hz, (void)out_K, (void)out_ref_T;
    if (out_tokens) *out_tokens = NULL;
    return eli_ffi_absent(out_error, __func__, REFERENCE);
}

int eliza_inference_kokoro_load(EliInferenceContext *ctx, const char *gguf_path, const char *voice_bin_path,
                                int style_dim, char **out_error) {
    (void)ctx, (void)gguf_path, (void)voice_bin_path, (void)style_dim;
    return eli_ffi_absent(out_error, __func__, KOKORO);
}

int eliza_inference_kokoro_synthesize(EliInferenceContext *ctx, const char *text, size_t text_len, float speed,
                                      float *out_pcm, size_t max_samples, char **out_error) {
    (void)ctx, (void)text, (void)text_len, (void)speed, (void)out_pcm, (void)max_samples;
    return eli_ffi_absent(out_error, __func__, KOKORO);
}

int eliza_inference_kokoro_sample_rate(EliInferenceContext *ctx) {
    (void)ctx;
    return ELIZA_ERR_NOT_IMPLEMENTED; /* no Kokoro model is ever loaded */
}

/* ---- voice activity detection ---- */

int eliza_inference_vad_supported(void) { return 0; }

EliVad *eliza_inference_vad_open(EliInferenceContext *ctx, int sample_rate_hz, char **out_error) {
    (void)ctx, (void)sample_rate_hz;
    eli_ffi_absent(out_error, __func__, VAD);
    return NULL;
}

int eliza_inference_vad_process(EliVad *vad, const float *pcm, size_t n_samples, float *out_probability,
                                char **out_error) {
    (void)vad, (void)pcm, (void)n_samples, (void)out_probability;
    return eli_ffi_absent(out_error, __func__, VAD);
}

int eliza_inference_vad_reset(EliVad *vad, char **out_error) {
    (void)vad;
    return eli_ffi_absent(out_error, __func__, VAD);
}

void eliza_inference_vad_close(EliVad *vad) { (void)vad; }

/* ---- wake word ---- */

int eliza_inference_wakeword_supported(void) { return 0; }

EliWakeWord *eliza_inference_wakeword_open(EliInferenceContext *ctx, int sample_rate_hz, const char *head_name,
                                           char **out_error) {
    (void)ctx, (void)sample_rate_hz, (void)head_name;
    eli_ffi_absent(out_error, __func__, WAKEWORD);
    return NULL;
}

int eliza_inference_wakeword_score(EliWakeWord *wake, const float *pcm, size_t n_samples, float *out_probability,
                                   char **out_error) {
    (void)wake, (void)pcm, (void)n_samples, (void)out_probability;
    return eli_ffi_absent(out_error, __func__, WAKEWORD);
}

int eliza_inference_wakeword_reset(EliWakeWord *wake, char **out_error) {
    (void)wake;
    return eli_ffi_absent(out_error, __func__, WAKEWORD);
}

void eliza_inference_wakeword_close(EliWakeWord *wake) { (void)wake; }

/* ---- speaker embedding ---- */

int eliza_inference_speaker_supported(void) { return 0; }

EliSpeaker *eliza_inference_speaker_open(EliInferenceContext *ctx, const char *gguf_path, char **out_error) {
    (void)ctx, (void)gguf_path;
    eli_ffi_absent(out_error, __func__, SPEAKER);
    return NULL;
}

int eliza_inference_speaker_embed(EliSpeaker *spk, const float *pcm, size_t n_samples, float *out_embedding,
                                  char **out_error) {
    (void)spk, (void)pcm, (void)n_samples, (void)out_embedding;
    return eli_ffi_absent(out_error, __func__, SPEAKER);
}

/* the library never hands out an embedding, so there is nothing of ours to free */
void eliza_inference_speaker_free(float *embedding) { (void)embedding; }

void eliza_inference_speaker_close(EliSpeaker *spk) { (void)spk; }

/* ---- diarization ---- */

int eliza_inference_diariz_supported(void) { return 0; }

EliDiariz *eliza_inference_diariz_open(EliInferenceContext *ctx, const char *gguf_path, char **out_error) {
    (void)ctx, (void)gguf_path;
    eli_ffi_absent(out_error, __func__, DIARIZ);
    return NULL;
}

int eliza_inference_diariz_segment(EliDiariz *d, const float *pcm, size_t n_samples, int8_t *out_labels,
                                   size_t *io_n_labels, char **out_error) {
    (void)d, (void)pcm, (void)n_samples, (void)out_labels;
    if (io_n_labels) *io_n_labels = 0;
    return eli_ffi_absent(out_error, __func__, DIARIZ);
}

void eliza_inference_diariz_close(EliDiariz *d) { (void)d; }
