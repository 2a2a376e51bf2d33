/* Rotated codebook quantization (tquant.h). Scalar code only, run when a KV row is stored or a weight is
 * quantized; its float steps are fixed (fp_exact.h) so that tools/kvquant_ref.py reproduces the bytes. */
#include "fp_exact.h"

#include "tquant.h"

#include <math.h>
#include <string.h>

#include "kvquant_tables.h"

const eli_tq_codebook eli_tq_cb4 = {kvq_tbq4_levels, 16, KVQ_TBQ4_UNITS};
const eli_tq_codebook eli_tq_cb3 = {kvq_tbq3_levels, 8, KVQ_TBQ3_UNITS};

const uint64_t eli_tq_sign_bits[ELI_TQ_MAX_N / 64] = {KVQ_ROTATION_SIGNS};

float eli_tq_inv_sqrt(int n) { return (float)(1.0 / sqrt((double)n)); }

static inline float flip(float v, int i) { return (eli_tq_sign_bits[i / 64] >> (i % 64)) & 1 ? -v : v; }

void eli_tq_fwht(float *x, int n) {
    for (int h = 1; h < n; h <<= 1)
        for (int i = 0; i < n; i += 2 * h)
            for (int j = i; j < i + h; j++) {
                const float a = x[j], b = x[j + h];
                x[j] = a + b;
                x[j + h] = a - b;
            }
}

void eli_tq_rotate(const float *x, float *y, int n) {
    const float s = eli_tq_inv_sqrt(n);
    for (int i = 0; i < n; i++) y[i] = flip(x[i], i);
    eli_tq_fwht(y, n);
    for (int i = 0; i < n; i++) y[i] *= s;
}

void eli_tq_unrotate(const float *y, float *x, int n) {
    const float s = eli_tq_inv_sqrt(n);
    if (x != y) memcpy(x, y, (size_t)n * sizeof(float));
    eli_tq_fwht(x, n);
    for (int i = 0; i < n; i++) x[i] = flip(x[i] * s, i);
}

void eli_tq_pack4(const uint8_t *code, int n, uint8_t *qs) {
    const int G = n < 64 ? n : 64;
    for (int g0 = 0; g0 < n; g0 += G)
        for (int j = 0; j < G / 2; j++) *qs++ = (uint8_t)(code[g0 + j] | code[g0 + G / 2 + j] << 4);
}

void eli_tq_unpack4(const uint8_t *qs, int n, uint8_t *code) {
    const int G = n < 64 ? n : 64;
    for (int g0 = 0; g0 < n; g0 += G)
        for (int j = 0; j < G / 2; j++, qs++) {
            code[g0 + j] = *qs & 15;
            code[g0 + G / 2 + j] = *qs >> 4;
        }
}

/* index of the level nearest to t: the number of midpoints below it (binary search; a NaN counts none) */
static int nearest_level(const float *mid, int n_levels, float t) {
    int k = 0;
    for (int step = n_levels / 2; step >= 1; step /= 2)
        if (t > mid[k + step - 1]) k += step;
    return k;
}

/* The codes and multipliers of n values for the unit fs / mean_m level steps per (m * level) (t: the values
 * in level steps at the block's RMS); returns the least-squares scale in value units and, in *err, the
 * squared error at it, and sums <y, u>, |u|^2 */
static double assign(const eli_tq_codebook *cb, const float *mid, int bits, double mean_m, double fs, const float *y,
                     float f, int n, uint8_t *code, uint8_t *sub, double *yu_out, double *err) {
    const int n_levels = cb->n_levels, n_mult = bits ? 1 << bits : 1;
    float g[8], r[8];
    for (int k = 0; k < n_mult; k++) {
        g[k] = (float)(mean_m / fs / eli_tq_mult(bits, (unsigned)k));
        r[k] = (float)(eli_tq_mult(bits, (unsigned)k) * fs / mean_m);
    }
    double yu = 0.0, uu = 0.0, yy = 0.0;
    for (int i0 = 0; i0 < n; i0 += 16) {
        int best = 0;
        float best_e = INFINITY;
        for (int k = 0; k < n_mult; k++) {
            float e = 0.0f;
            for (int i = i0; i < i0 + 16; i++) {
                const float t = y[i] * f;
                const float dv = t - r[k] * (float)cb->levels[nearest_level(mid, n_levels, t * g[k])];
                e += dv * dv;
            }
            if (e < best_e) best_e = e, best = k;
        }
        sub[i0 / 16] = (uint8_t)best;
        const int m = eli_tq_mult(bits, (unsigned)best);
        for (int i = i0; i < i0 + 16; i++) {
            const int c = nearest_level(mid, n_levels, y[i] * f * g[best]);
            code[i] = (uint8_t)c;
            const double u = (double)(m * cb->levels[c]);
            yu += (double)y[i] * u;
            uu += u * u;
            yy += (double)y[i] * y[i];
        }
    }
    const double s = yu > 0.0 ? yu / uu : 0.0;
    *err = yy - 2.0 * s * yu + s * s * uu;
    *yu_out = yu;
    return s;
}

float eli_tq_quantize(const eli_tq_codebook *cb, int bits, int projecting, int search, const float *y, int n,
                      uint8_t *code, uint8_t *sub) {
    if (n < 16 || n > ELI_TQ_MAX_N) return 0.0f;
    const int n_levels = cb->n_levels;
    float mid[15];
    for (int b = 0; b + 1 < n_levels; b++) mid[b] = 0.5f * (float)(cb->levels[b] + cb->levels[b + 1]);
    double yy = 0.0;
    for (int i = 0; i < n; i++) yy += (double)y[i] * y[i];
    memset(code, 0, (size_t)n);
    memset(sub, 0, (size_t)n / 16);
    if (!(yy > 0.0 && yy < 1e300)) return 0.0f;
    const double mean_m = bits == 3 ? 10.5 : bits == 2 ? 5.5 : 1.0;
    const float f = (float)(cb->units / sqrt(yy / n));
    /* search: several starting units around the RMS one, each refined twice (assign, refit) */
    static const double starts[] = {1.0, 0.8, 0.87, 0.93, 1.07, 1.15, 1.25};
    const int n_starts = search ? (int)(sizeof starts / sizeof starts[0]) : 1, passes = search ? 3 : 1;
    uint8_t c2[ELI_TQ_MAX_N], s2[ELI_TQ_MAX_N / 16];
    double best_err = INFINITY, best_s = 0.0, best_yu = 0.0;
    for (int si = 0; si < n_starts; si++) {
        double fs = starts[si], s = 0.0, yu = 0.0, err = 0.0;
        for (int p = 0; p < passes; p++) {
            s = assign(cb, mid, bits, mean_m, fs, y, f, n, c2, s2, &yu, &err);
            if (!(s > 0.0)) break;
            fs = s * f * mean_m;
        }
        if (err < best_err) {
            best_err = err, best_s = s, best_yu = yu;
            memcpy(code, c2, (size_t)n);
            memcpy(sub, s2, (size_t)n / 16);
        }
    }
    const double s = projecting ? yy / best_yu : best_s;
    return best_yu > 0.0 ? (float)(s < 65504.0 ? s : 65504.0) : 0.0f;
}

unsigned eli_tq_bits_get(const uint8_t *p, size_t nbytes, size_t off, int width) {
    const size_t b = off / 8;
    unsigned v = p[b];
    if (b + 1 < nbytes) v |= (unsigned)p[b + 1] << 8;
    return (v >> (off % 8)) & ((1u << width) - 1);
}

void eli_tq_bits_put(uint8_t *p, size_t off, unsigned v, int width) {
    for (int k = 0; k < width; k++, off++)
        if ((v >> k) & 1) p[off / 8] |= (uint8_t)(1u << (off % 8));
}
