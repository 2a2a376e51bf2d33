/* Windowed-sinc resampling (the filter is described in resample.h).
 *
 * Measured with tests/test_audio.c on analytic sines from 44.1, 48, 22.05 and 8 kHz, away from the ends:
 * passband error at most 3.2e-5 of the amplitude (-90 dB), tones that would fold back below 8 kHz at
 * -99 dB or less (BENCHMARKS.md compares miniaudio's: -5.6 dB at 8.5 kHz from 44.1 kHz). */
#include "resample.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define ATTEN_DB 90.0
#define PASS_FRAC 0.9  /* passband edge / fN */
#define TABLE_PER 512  /* kernel points per input sample */

static int64_t gcd64(int64_t a, int64_t b) {
    while (b) {
        const int64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

int64_t eli_resample_length(int64_t n, int rate_in, int rate_out) {
    if (n <= 0) return 0;
    if (rate_in == rate_out) return n;
    const uint64_t un = (uint64_t)n, ri = (uint64_t)rate_in, ro = (uint64_t)rate_out;
    const uint64_t out = un * ro / ri;
    /* miniaudio's estimate of the input needed for `out` frames, which adds a frame when it fits in n;
     * reproduced so that token counts match llama.cpp's. It only fits when rate_in is a multiple of
     * rate_out (the first term is 0 then). */
    const uint64_t need = out * (ri % ro) + out * (ri / ro) / ro;
    return (int64_t)(need <= un ? out + 1 : out);
}

/* The zeroth-order modified Bessel function of the first kind, by its power series (converges fast for
 * the arguments of a Kaiser window, <= beta). */
static double bessel_i0(double x) {
    double sum = 1.0, term = 1.0;
    const double q = x * x / 4.0;
    for (int k = 1; k < 200 && term > sum * 1e-17; k++) {
        term *= q / ((double)k * k);
        sum += term;
    }
    return sum;
}

/* The interpolation kernel in input-sample units, tabulated for |tau| in [0, half]. */
typedef struct {
    float *tab; /* tab[m] = h(m / TABLE_PER), two zeros past the end for the interpolation */
    int64_t n_tab;
    double half; /* support radius in input samples */
} kernel;

static int kernel_make(kernel *k, int rate_in, int rate_out, eli_error *err) {
    const double f_n = 0.5 * (rate_in < rate_out ? rate_in : rate_out); /* Hz */
    const double df = (1.0 - PASS_FRAC) * f_n, fc = f_n - 0.5 * df;
    const double beta = 0.1102 * (ATTEN_DB - 8.7);
    const double len_s = (ATTEN_DB - 7.95) / (14.36 * df); /* Kaiser's estimate of the whole length, seconds */
    k->half = 0.5 * len_s * rate_in;
    const double fcn = fc / rate_in; /* cycles per input sample */
    k->n_tab = (int64_t)ceil(k->half * TABLE_PER) + 2;
    k->tab = malloc((size_t)k->n_tab * sizeof *k->tab);
    if (!k->tab) return eli_fail(err, ELI_ERR_OOM, "out of memory for the resampling kernel");
    const double i0b = bessel_i0(beta);
    for (int64_t m = 0; m < k->n_tab; m++) {
        const double tau = (double)m / TABLE_PER, r = tau / k->half;
        if (r >= 1.0) {
            k->tab[m] = 0.0f;
            continue;
        }
        const double x = 2.0 * fcn * tau;
        const double sinc = m == 0 ? 1.0 : sin(M_PI * x) / (M_PI * x);
        k->tab[m] = (float)(2.0 * fcn * sinc * bessel_i0(beta * sqrt(1.0 - r * r)) / i0b);
    }
    return ELI_OK;
}

int eli_resample(const float *x, int64_t n, int rate_in, int rate_out, float **y, int64_t *n_out, eli_error *err) {
    *y = NULL;
    *n_out = 0;
    if (rate_in < ELI_PCM_MIN_RATE || rate_in > ELI_PCM_MAX_RATE || rate_out < ELI_PCM_MIN_RATE || rate_out > ELI_PCM_MAX_RATE)
        return eli_fail(err, ELI_ERR_INVALID_ARG, "sample rates %d -> %d Hz: each must be in [%d, %d]", rate_in, rate_out,
                        ELI_PCM_MIN_RATE, ELI_PCM_MAX_RATE);
    if (n < 1) return eli_fail(err, ELI_ERR_INVALID_ARG, "no samples to resample");
    const int64_t m = eli_resample_length(n, rate_in, rate_out);
    float *out = malloc((size_t)m * sizeof *out);
    if (!out) return eli_fail(err, ELI_ERR_OOM, "out of memory for %lld resampled samples", (long long)m);
    if (rate_in == rate_out) {
        memcpy(out, x, (size_t)n * sizeof *out);
        *y = out;
        *n_out = n;
        return ELI_OK;
    }
    kernel k;
    int rc = kernel_make(&k, rate_in, rate_out, err);
    if (rc) {
        free(out);
        return rc;
    }
    /* output j at input time j * M / L = i0 + r / L exactly */
    const int64_t g = gcd64(rate_in, rate_out), L = rate_out / g, M = rate_in / g;
    const int64_t reach = (int64_t)ceil(k.half);
    int64_t i0 = 0, r = 0;
    for (int64_t j = 0; j < m; j++) {
        const double frac = (double)r / (double)L;
        int64_t lo = i0 - reach + 1, hi = i0 + reach; /* |i0 + frac - i| < half */
        if (lo < 0) lo = 0;
        if (hi > n - 1) hi = n - 1;
        double acc = 0.0;
        for (int64_t i = lo; i <= hi; i++) {
            const double a = fabs((double)(i0 - i) + frac) * TABLE_PER;
            const int64_t t = (int64_t)a;
            if (t >= k.n_tab - 1) continue;
            const double f = a - (double)t;
            acc += (double)x[i] * ((double)k.tab[t] + f * ((double)k.tab[t + 1] - (double)k.tab[t]));
        }
        out[j] = (float)acc;
        r += M;
        i0 += r / L;
        r %= L;
    }
    free(k.tab);
    *y = out;
    *n_out = m;
    return ELI_OK;
}

int eli_pcm_to_mono16k(const eli_pcm *in, float **out, int64_t *n_out, eli_error *err) {
    *out = NULL;
    *n_out = 0;
    if (in->channels != 1 && in->channels != 2)
        return eli_fail(err, ELI_ERR_INVALID_ARG, "%d channels: only mono and stereo are supported", in->channels);
    if (in->channels == 1) return eli_resample(in->samples, in->n_frames, in->rate, ELI_AUDIO_RATE, out, n_out, err);
    float *mono = malloc((size_t)(in->n_frames > 0 ? in->n_frames : 1) * sizeof *mono);
    if (!mono) return eli_fail(err, ELI_ERR_OOM, "out of memory for %lld mono samples", (long long)in->n_frames);
    for (int64_t i = 0; i < in->n_frames; i++) mono[i] = (in->samples[2 * i] + in->samples[2 * i + 1]) * 0.5f;
    const int rc = eli_resample(mono, in->n_frames, in->rate, ELI_AUDIO_RATE, out, n_out, err);
    free(mono);
    return rc;
}
