/* WAV (RIFF/WAVE) decoding to float samples: PCM 16-, 24- and 32-bit integer and 32-bit IEEE float, in the
 * plain and the WAVE_FORMAT_EXTENSIBLE headers, any sample rate, mono or stereo.
 *
 * The bytes are hostile: every chunk size is checked against what remains, the fmt fields against each
 * other (block align = channels x bytes per sample), and a file with a truncated data chunk, a missing fmt
 * or data chunk, an unsupported format, or more than two channels gets an error naming the problem.
 * Integers are scaled as miniaudio (llama.cpp's decoder) scales them: by 1 / 2^(bits-1), so a 16-bit
 * sample s becomes s / 32768 exactly. */
#ifndef ELI_WAV_H
#define ELI_WAV_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"

/* Decoded audio: n_frames frames of `channels` interleaved float samples at `rate` Hz. */
typedef struct eli_pcm {
    float *samples; /* malloc'ed, n_frames * channels */
    int64_t n_frames;
    int channels; /* 1 or 2 */
    int rate;     /* Hz */
} eli_pcm;

/* The sample rates accepted (Hz): anything a recording plausibly has, and far from overflowing the
 * resampler's arithmetic. */
#define ELI_PCM_MIN_RATE 1000
#define ELI_PCM_MAX_RATE 768000

/* The largest sample magnitude accepted, full scale being 1: float PCM may go somewhat beyond full scale, but a
 * sample of 1e30 is no recording, and the resampler's and the log-mel's sums of such samples overflow. */
#define ELI_PCM_MAX_ABS 1.0e4f

/* ELI_ERR_INVALID_ARG naming the first of n samples that is not a finite number or lies beyond
 * +-ELI_PCM_MAX_ABS ("<what> <index> is ..."). Every way audio comes in (WAV files, a host's PCM) checks it. */
int eli_pcm_check(const float *s, int64_t n, const char *what, eli_error *err);

/* Decodes a whole WAV file held in memory. On failure *out is left empty. */
int eli_wav_decode(const void *buf, size_t len, eli_pcm *out, eli_error *err);
/* Reads and decodes a WAV file (errors are prefixed with the path). */
int eli_wav_load(const char *path, eli_pcm *out, eli_error *err);
void eli_pcm_free(eli_pcm *p);

#endif
