/* The arithmetic follows llama.cpp's float steps one for one (window, FFT butterflies, magnitudes, the
 * filterbank sums), so that the log-mel comes out bit for bit the same from the same PCM: the encoder
 * rounds it to fp16 for its first convolution, and a value that rounds the other way there grows, in a
 * tower with Q8_0 matrices, into differences of 1e-2 at the output (measured on random Q8_0 towers of
 * 1-12 blocks; the same input scaled by 1 + 1e-6 moves them as much). */
#include "fp_exact.h"

#include "audio_mel.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MEL_RATE 16000.0
#define LOG_FLOOR 1e-3f /* a float, widened: llama.cpp's floor is the double of 0.001f */

static double hz_to_mel(double f) { return 2595.0 * log10(1.0 + f / 700.0); }
static double mel_to_hz(double m) { return 700.0 * (pow(10.0, m / 2595.0) - 1.0); }

int eli_mel_init(eli_mel_frontend *f, int n_mel, eli_error *err) {
    memset(f, 0, sizeof *f);
    if (n_mel < 1 || n_mel > ELI_MEL_MAX_BINS)
        return eli_fail(err, ELI_ERR_INVALID_ARG, "%d mel bins is outside [1, %d]", n_mel, ELI_MEL_MAX_BINS);
    f->n_mel = n_mel;
    /* in float, as llama.cpp builds them: the window from a float angle, the twiddles as sinf / cosf of the
     * double angle rounded to float */
    for (int i = 0; i < ELI_MEL_WINDOW; i++) f->window[i] = 0.5f - 0.5f * cosf(2.0f * (float)M_PI * (float)i / (float)ELI_MEL_WINDOW);
    for (int k = 0; k < ELI_MEL_FFT / 2; k++) {
        const float a = (float)(2.0 * M_PI * k / ELI_MEL_FFT);
        f->tw_re[k] = cosf(a);
        f->tw_im[k] = -sinf(a);
    }
    f->filters = calloc((size_t)n_mel * ELI_MEL_BINS_FFT, sizeof *f->filters);
    f->lo = malloc((size_t)n_mel * sizeof *f->lo);
    f->hi = malloc((size_t)n_mel * sizeof *f->hi);
    double *edge = malloc((size_t)(n_mel + 2) * sizeof *edge);
    if (!f->filters || !f->lo || !f->hi || !edge) {
        free(edge);
        eli_mel_free(f);
        return eli_fail(err, ELI_ERR_OOM, "out of memory for the mel filterbank");
    }
    const double m_hi = hz_to_mel(MEL_RATE / 2);
    for (int i = 0; i < n_mel + 2; i++) edge[i] = mel_to_hz(m_hi * ((double)i / (n_mel + 1)));
    for (int m = 0; m < n_mel; m++) {
        const double l = edge[m], c = edge[m + 1], r = edge[m + 2];
        const double dl = c - l > 1e-30 ? c - l : 1e-30, dr = r - c > 1e-30 ? r - c : 1e-30;
        float *row = f->filters + (size_t)m * ELI_MEL_BINS_FFT;
        f->lo[m] = ELI_MEL_BINS_FFT;
        f->hi[m] = 0;
        for (int k = 0; k < ELI_MEL_BINS_FFT; k++) {
            const double hz = k * MEL_RATE / ELI_MEL_FFT;
            const double w = hz >= l && hz <= c ? (hz - l) / dl : hz > c && hz <= r ? (r - hz) / dr : 0.0;
            row[k] = (float)w;
            if (row[k] != 0.0f) {
                if (k < f->lo[m]) f->lo[m] = k;
                f->hi[m] = k + 1;
            }
        }
        if (f->hi[m] == 0) f->lo[m] = 0; /* an empty triangle (many bins, few FFT points): sums nothing */
    }
    free(edge);
    return ELI_OK;
}

void eli_mel_free(eli_mel_frontend *f) {
    free(f->filters);
    free(f->lo);
    free(f->hi);
    f->filters = NULL;
    f->lo = f->hi = NULL;
}

int64_t eli_mel_frames(int64_t n) {
    if (n <= 1) return 0;
    const int64_t a = n + ELI_MEL_WINDOW / 2 - (ELI_MEL_WINDOW + 1);
    /* trunc toward zero, as the C++ reference's int division: -159..-1 give 0 */
    return (a >= 0 ? a / ELI_MEL_HOP : -(-a / ELI_MEL_HOP)) + 1;
}

/* In-place radix-2 FFT of 512 complex values (re, im), decimation in time. Each butterfly rounds as
 * llama.cpp's recursive FFT does: (e + w_re o_re) - w_im o_im, and so on, left to right, in float. */
static void fft512(const eli_mel_frontend *f, float *re, float *im) {
    for (int i = 1, j = 0; i < ELI_MEL_FFT; i++) {
        int bit = ELI_MEL_FFT >> 1;
        for (; j & bit; bit >>= 1) j ^= bit;
        j |= bit;
        if (i < j) {
            float t = re[i];
            re[i] = re[j], re[j] = t;
            t = im[i];
            im[i] = im[j], im[j] = t;
        }
    }
    for (int len = 2; len <= ELI_MEL_FFT; len <<= 1) {
        const int half = len >> 1, step = ELI_MEL_FFT / len;
        for (int s = 0; s < ELI_MEL_FFT; s += len)
            for (int k = 0; k < half; k++) {
                const float wr = f->tw_re[k * step], wi = f->tw_im[k * step];
                const int a = s + k, b = a + half;
                const float er = re[a], ei = im[a], or_ = re[b], oi = im[b];
                re[a] = er + wr * or_ - wi * oi;
                im[a] = ei + wr * oi + wi * or_;
                re[b] = er - wr * or_ + wi * oi;
                im[b] = ei - wr * oi - wi * or_;
            }
    }
}

/* One thread, no executor: about 3 ms per second of audio, 1% of the encoder's time on the real tower. */
void eli_mel_chunk(const eli_mel_frontend *f, const float *pcm, int64_t n, float *out) {
    float re[ELI_MEL_FFT], im[ELI_MEL_FFT], mag[ELI_MEL_BINS_FFT];
    const int64_t T = eli_mel_frames(n);
    for (int64_t t = 0; t < T; t++) {
        /* frame t starts 160 t into the chunk with its 160 leading zeros */
        const int64_t start = t * ELI_MEL_HOP - ELI_MEL_WINDOW / 2;
        for (int i = 0; i < ELI_MEL_FFT; i++) {
            const int64_t s = start + i;
            re[i] = i < ELI_MEL_WINDOW && s >= 0 && s < n ? f->window[i] * pcm[s] : 0.0f;
            im[i] = 0.0f;
        }
        fft512(f, re, im);
        for (int k = 0; k < ELI_MEL_BINS_FFT; k++) mag[k] = sqrtf(re[k] * re[k] + im[k] * im[k]);
        float *o = out + t * f->n_mel;
        for (int m = 0; m < f->n_mel; m++) {
            const float *row = f->filters + (size_t)m * ELI_MEL_BINS_FFT;
            /* llama.cpp's grouping: four float products added in float, the groups in double; the zero weights
             * outside the triangle add nothing, so the groups that hold none of [lo, hi) are skipped */
            double sum = 0.0;
            int k = f->lo[m] & ~3;
            for (; k < f->hi[m] && k + 4 <= ELI_MEL_BINS_FFT; k += 4)
                sum += (double)(mag[k] * row[k] + mag[k + 1] * row[k + 1] + mag[k + 2] * row[k + 2] + mag[k + 3] * row[k + 3]);
            for (; k < f->hi[m]; k++) sum += (double)(mag[k] * row[k]);
            o[m] = (float)log(sum > (double)LOG_FLOOR ? sum : (double)LOG_FLOOR);
        }
    }
}
