/* Audio to the encoder's input: channels averaged to mono, then resampled to 16 kHz.
 *
 * The resampler is a windowed-sinc interpolator evaluated at the exact output times (output frame j sits
 * at input time j * rate_in / rate_out, kept as an exact fraction), zero-phase, zeros outside the input:
 *   - band edge fN = min(rate_in, rate_out) / 2; passband to 0.9 fN, stopband from fN (for 16 kHz output of
 *     a faster input: flat to 7.2 kHz, nothing above 8 kHz folds back), cutoff (-6 dB) 0.95 fN;
 *   - Kaiser window, beta 8.96, designed for 90 dB stopband attenuation (passband ripple of the same
 *     order, about 3e-5); total length (90 - 7.95) / (14.36 x 0.1 fN) seconds: 7.1 ms, 315 taps per output
 *     at 44.1 kHz in;
 *   - the kernel is tabulated at 512 points per input sample and linearly interpolated between them.
 * Measured on analytic sines (tests/test_audio.c): see resample.c. llama.cpp's decoder (miniaudio's linear
 * interpolator behind a 4th-order low-pass at the output Nyquist) lets most of 8-12 kHz fold back.
 *
 * The number of output frames is the one llama.cpp's decoder reports for the same input (see
 * eli_resample_length), so a resampled clip yields the same number of audio tokens as there. */
#ifndef ELI_RESAMPLE_H
#define ELI_RESAMPLE_H

#include <stdint.h>

#include "error.h"
#include "wav.h"

/* The rate the audio encoder's front end takes. */
#define ELI_AUDIO_RATE 16000

/* Frames out for n frames in: n when the rates are equal, otherwise floor(n x out / in) plus one frame in
 * the cases where miniaudio's frame-count estimate adds one (for 16 kHz out: inputs at a multiple of 16
 * kHz, such as 48 kHz). */
int64_t eli_resample_length(int64_t n, int rate_in, int rate_out);

/* Resamples n mono samples x from rate_in to rate_out (both in [ELI_PCM_MIN_RATE, ELI_PCM_MAX_RATE]):
 * *y (malloc'ed) receives eli_resample_length(n, ...) samples. Equal rates copy. */
int eli_resample(const float *x, int64_t n, int rate_in, int rate_out, float **y, int64_t *n_out, eli_error *err);

/* Decoded PCM to mono at ELI_AUDIO_RATE: stereo frames become (L + R) / 2, then eli_resample. */
int eli_pcm_to_mono16k(const eli_pcm *in, float **out, int64_t *n_out, eli_error *err);

#endif
