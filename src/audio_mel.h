/* The log-mel front end of the Gemma 4 audio encoder, as llama.cpp's mtmd computes it for gemma4a
 * (../shared/spec/gemma4-mm.md "Audio front end"):
 *   - 16 kHz mono input, cut into chunks of 30 s (the last one shorter), each encoded on its own;
 *   - per chunk of n samples: 160 zeros in front, T = trunc((n + 160 - 321) / 160) + 1 frames (C division,
 *     so 2-160 samples give one frame and a single sample none); frame t is the 512 samples from 160 t of
 *     the padded chunk (zeros past its end), times a periodic Hann window of length 320 (left-aligned,
 *     zero beyond);
 *   - 512-point FFT, magnitude |X_k| for k = 0..256 (not the power);
 *   - n_mel HTK-scale triangles over 0-8000 Hz (n_mel + 2 edges equally spaced in 2595 log10(1 + f/700)),
 *     no area normalisation;
 *   - ln(max(mel, 1e-3)); no further normalisation.
 * n_mel comes from the projector (clip.audio.num_mel_bins; 128 in Gemma 4). The float steps are llama.cpp's,
 * so the result is bit for bit its log-mel of the same PCM (audio_mel.c says why that matters). */
#ifndef ELI_AUDIO_MEL_H
#define ELI_AUDIO_MEL_H

#include <stdint.h>

#include "error.h"

#define ELI_MEL_FFT 512
#define ELI_MEL_BINS_FFT (ELI_MEL_FFT / 2 + 1)
#define ELI_MEL_WINDOW 320
#define ELI_MEL_HOP 160
#define ELI_MEL_CHUNK_SAMPLES (30 * 16000)
#define ELI_MEL_MAX_BINS 1024

typedef struct eli_mel_frontend {
    int n_mel;
    float window[ELI_MEL_FFT];                           /* Hann over the first 320, zeros after */
    float tw_re[ELI_MEL_FFT / 2], tw_im[ELI_MEL_FFT / 2]; /* e^{-2 pi i k / 512} */
    float *filters;  /* [n_mel][257]: the triangles, zero outside [lo, hi) */
    int *lo, *hi;    /* each triangle's nonzero bins */
} eli_mel_frontend;

/* Builds the window, FFT twiddles and filterbank for n_mel bins (1..ELI_MEL_MAX_BINS). */
int eli_mel_init(eli_mel_frontend *f, int n_mel, eli_error *err);
void eli_mel_free(eli_mel_frontend *f);

/* Frames of a chunk of n samples (0 for n <= 1). */
int64_t eli_mel_frames(int64_t n);

/* Log-mel of one chunk of n samples (n <= ELI_MEL_CHUNK_SAMPLES) into out[eli_mel_frames(n)][n_mel];
 * pure C, on the calling thread. */
void eli_mel_chunk(const eli_mel_frontend *f, const float *pcm, int64_t n, float *out);

#endif
