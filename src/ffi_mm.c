/* The C ABI's image and audio input (Gemma 4 vision and speech recognition): not built in yet, so every
 * call answers ELIZA_ERR_NOT_IMPLEMENTED naming the family, and the probes say 0. */
#include <stddef.h>

#include "eliza_inference.h"
#include "ffi_internal.h"

static const char VISION[] = "this build has no image input (Gemma 4 vision is not built in)";
static const char ASR[] = "this build has no speech recognition (Gemma 4 audio input is not built in)";

int eliza_inference_vision_supported(void) { return 0; }
int eliza_inference_vision_stream_supported(void) { return 0; }

int eliza_inference_describe_image(EliInferenceContext *ctx, const unsigned char *image_bytes, size_t n_bytes,
                                   const char *mmproj_path, const char *prompt, char *out_text, size_t max_text_bytes,
                                   char **out_error) {
    (void)ctx, (void)image_bytes, (void)n_bytes, (void)mmproj_path, (void)prompt;
    if (out_text && max_text_bytes) out_text[0] = '\0';
    return eli_ffi_absent(out_error, __func__, VISION);
}

EliLlmStream *eliza_inference_describe_image_stream_open(EliInferenceContext *ctx, const unsigned char *image_bytes,
                                                         size_t n_bytes, const char *mmproj_path, const char *prompt,
                                                         char **out_error) {
    (void)ctx, (void)image_bytes, (void)n_bytes, (void)mmproj_path, (void)prompt;
    eli_ffi_absent(out_error, __func__, VISION);
    return NULL;
}

int eliza_inference_asr_transcribe(EliInferenceContext *ctx, const float *pcm, size_t n_samples, int sample_rate_hz,
                                   char *out_text, size_t max_text_bytes, char **out_error) {
    (void)ctx, (void)pcm, (void)n_samples, (void)sample_rate_hz;
    if (out_text && max_text_bytes) out_text[0] = '\0';
    return eli_ffi_absent(out_error, __func__, ASR);
}

int eliza_inference_asr_stream_supported(void) { return 0; }

EliAsrStream *eliza_inference_asr_stream_open(EliInferenceContext *ctx, int sample_rate_hz, char **out_error) {
    (void)ctx, (void)sample_rate_hz;
    eli_ffi_absent(out_error, __func__, ASR);
    return NULL;
}

int eliza_inference_asr_stream_feed(EliAsrStream *s, const float *pcm, size_t n_samples, char **out_error) {
    (void)s, (void)pcm, (void)n_samples;
    return eli_ffi_absent(out_error, __func__, ASR);
}

int eliza_inference_asr_stream_partial(EliAsrStream *s, char *out_text, size_t max_text_bytes, int32_t *out_tokens,
                                       size_t *io_n_tokens, char **out_error) {
    (void)s, (void)out_tokens;
    if (out_text && max_text_bytes) out_text[0] = '\0';
    if (io_n_tokens) *io_n_tokens = 0;
    return eli_ffi_absent(out_error, __func__, ASR);
}

int eliza_inference_asr_stream_finish(EliAsrStream *s, char *out_text, size_t max_text_bytes, int32_t *out_tokens,
                                      size_t *io_n_tokens, char **out_error) {
    (void)s, (void)out_tokens;
    if (out_text && max_text_bytes) out_text[0] = '\0';
    if (io_n_tokens) *io_n_tokens = 0;
    return eli_ffi_absent(out_error, __func__, ASR);
}

/* no ASR stream is ever handed out */
void eliza_inference_asr_stream_close(EliAsrStream *s) { (void)s; }
