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

/* ---- the streaming resampler ---- */

struct eli_resampler {
    int rate_in, rate_out;
    int64_t L, M;   /* output j sits at input time j * M / L */
    int64_t reach;  /* input samples i with |t - i| < half: i in (t - reach, t + reach] around floor(t) */
    kernel k;       /* unused when the rates are equal */
    float *buf;     /* input samples [base, n_in) */
    int64_t base, n_in, cap;
};

eli_resampler *eli_resampler_new(int rate_in, int rate_out, eli_error *err) {
    if (rate_in < ELI_PCM_MIN_RATE || rate_in > ELI_PCM_MAX_RATE || rate_out < ELI_PCM_MIN_RATE || rate_out > ELI_PCM_MAX_RATE) {
        eli_fail(err, ELI_ERR_INVALID_ARG, "sample rates %d -> %d Hz: each must be in [%d, %d]", rate_in, rate_out,
                 ELI_PCM_MIN_RATE, ELI_PCM_MAX_RATE);
        return NULL;
    }
    eli_resampler *r = calloc(1, sizeof *r);
    if (!r) {
        eli_fail(err, ELI_ERR_OOM, "out of memory");
        return NULL;
    }
    r->rate_in = rate_in;
    r->rate_out = rate_out;
    const int64_t g = gcd64(rate_in, rate_out);
    r->L = rate_out / g;
    r->M = rate_in / g;
    if (rate_in != rate_out) {
        if (kernel_make(&r->k, rate_in, rate_out, err)) {
            free(r);
            return NULL;
        }
        r->reach = (int64_t)ceil(r->k.half);
    }
    return r;
}

void eli_resampler_free(eli_resampler *r) {
    if (!r) return;
    free(r->k.tab);
    free(r->buf);
    free(r);
}

/* The first input sample output j reads. */
static int64_t first_input(const eli_resampler *r, int64_t j) {
    const int64_t lo = j * r->M / r->L - r->reach + 1;
    return lo > 0 ? lo : 0;
}

int eli_resampler_push(eli_resampler *r, const float *x, int64_t n, eli_error *err) {
    if (n <= 0) return ELI_OK;
    if (n > INT64_MAX / 4 - r->n_in) return eli_fail(err, ELI_ERR_INVALID_ARG, "%lld samples are too many", (long long)n);
    const int64_t have = r->n_in - r->base;
    if (have + n > r->cap) {
        int64_t cap = r->cap ? r->cap : 4096;
        while (cap < have + n) cap *= 2;
        float *b = realloc(r->buf, (size_t)cap * sizeof *b);
        if (!b) return eli_fail(err, ELI_ERR_OOM, "out of memory for %lld samples", (long long)cap);
        r->buf = b;
        r->cap = cap;
    }
    memcpy(r->buf + have, x, (size_t)n * sizeof *x);
    r->n_in += n;
    return ELI_OK;
}

int64_t eli_resampler_n_final(const eli_resampler *r) {
    if (r->rate_in == r->rate_out) return r->n_in;
    /* output j reads up to input floor(j M / L) + reach: final once that sample has arrived */
    const int64_t last = r->n_in - 1 - r->reach;
    if (last < 0) return 0;
    const int64_t j = ((last + 1) * r->L + r->M - 1) / r->M; /* the j with floor(j M / L) <= last, i.e. j M < (last + 1) L */
    const int64_t total = eli_resample_length(r->n_in, r->rate_in, r->rate_out);
    return j < total ? j : total;
}

int64_t eli_resampler_n_total(const eli_resampler *r) { return eli_resample_length(r->n_in, r->rate_in, r->rate_out); }

int eli_resampler_read(const eli_resampler *r, int64_t j0, int64_t j1, float *out, eli_error *err) {
    if (j0 < 0 || j1 < j0 || j1 > eli_resampler_n_total(r) || (j0 < j1 && first_input(r, j0) < r->base))
        return eli_fail(err, ELI_ERR_FFI_FAULT, "resampler outputs [%lld, %lld) are not available", (long long)j0, (long long)j1);
    const float *x = r->buf - r->base; /* x[i] for i in [base, n_in) */
    const int64_t n = r->n_in;
    if (r->rate_in == r->rate_out) {
        if (j1 > j0) memcpy(out, x + j0, (size_t)(j1 - j0) * sizeof *out);
        return ELI_OK;
    }
    const kernel *k = &r->k;
    /* output j at input time j * M / L = i0 + q / L exactly */
    int64_t i0 = j0 * r->M / r->L, q = j0 * r->M % r->L;
    for (int64_t j = j0; j < j1; j++) {
        const double frac = (double)q / (double)r->L;
        int64_t lo = i0 - r->reach + 1, hi = i0 + r->reach; /* |i0 + frac - i| < half */
        if (lo < 0) lo = 0;
        if (hi > n - 1) hi = n - 1;
        double acc = 0.0;
        for (int64_t i = lo; i <= hi; i++) {
            const double a = fabs((double)(i0 - i) + frac) * TABLE_PER;
            const int64_t t = (int64_t)a;
            if (t >= k->n_tab - 1) continue;
            const double f = a - (double)t;
            acc += (double)x[i] * ((double)k->tab[t] + f * ((double)k->tab[t + 1] - (double)k->tab[t]));
        }
        out[j - j0] = (float)acc;
        q += r->M;
        i0 += q / r->L;
        q %= r->L;
    }
    return ELI_OK;
}

void eli_resampler_discard(eli_resampler *r, int64_t j) {
    int64_t keep = j > 0 ? first_input(r, j) : 0;
    if (keep > r->n_in) keep = r->n_in;
    if (keep <= r->base) return;
    memmove(r->buf, r->buf + (keep - r->base), (size_t)(r->n_in - keep) * sizeof *r->buf);
    r->base = keep;
}

int eli_resample(const float *x, int64_t n, int rate_in, int rate_out, float **y, int64_t *n_out, eli_error *err) {
    *y = NULL;
    *n_out = 0;
    eli_resampler *r = eli_resampler_new(rate_in, rate_out, err);
    if (!r) return err ? err->code : ELI_ERR_INVALID_ARG;
    int rc = n < 1 ? eli_fail(err, ELI_ERR_INVALID_ARG, "no samples to resample") : eli_resampler_push(r, x, n, err);
    const int64_t m = rc ? 0 : eli_resampler_n_total(r);
    float *out = rc ? NULL : malloc((size_t)m * sizeof *out);
    if (!rc && !out) rc = eli_fail(err, ELI_ERR_OOM, "out of memory for %lld resampled samples", (long long)m);
    if (!rc) rc = eli_resampler_read(r, 0, m, out, err);
    eli_resampler_free(r);
    if (rc) {
        free(out);
        return rc;
    }
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
