/* Rotated codebook quantization (tquant.h). Scalar code only, run when a KV row is stored or a weight is
 * quantized; its float steps are fixed (fp_exact.h) so that tools/kvquant_ref.py reproduces the bytes. */
#include "fp_exact.h"

#include "tquant.h"

#include <math.h>
#include <string.h>

#include "kvquant_tables.h"

const eli_tq_codebook eli_tq_cb4 = {kvq_tbq4_levels, 16, KVQ_TBQ4_UNITS};
const eli_tq_codebook eli_tq_cb3 = {kvq_tbq3_levels, 8, KVQ_TBQ3_UNITS};

#define ROTATION_SEED 0x6b76712d726f7431ULL /* "kvq-rot1" */

void eli_tq_signs(float *sign, int n) {
    uint64_t s = ROTATION_SEED, bits = 0;
    for (int i = 0; i < n; i++) {
        if (i % 64 == 0) { /* splitmix64 */
            uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
            z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
            z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
            bits = z ^ (z >> 31);
        }
        sign[i] = (bits >> (i % 64)) & 1 ? -1.0f : 1.0f;
    }
}

void eli_tq_fwht(float *x, int n) {
    for (int h = 1; h < n; h <<= 1)
        for (int i = 0; i < n; i += 2 * h)
            for (int j = i; j < i + h; j++) {
                const float a = x[j], b = x[j + h];
                x[j] = a + b;
                x[j + h] = a - b;
            }
}

void eli_tq_rotate(const float *sign, float inv_sqrt_n, const float *x, float *y, int n) {
    for (int i = 0; i < n; i++) y[i] = x[i] * sign[i];
    eli_tq_fwht(y, n);
    for (int i = 0; i < n; i++) y[i] *= inv_sqrt_n;
}

void eli_tq_unrotate(const float *sign, float inv_sqrt_n, const float *y, float *x, int n) {
    if (x != y) memcpy(x, y, (size_t)n * sizeof(float));
    eli_tq_fwht(x, n);
    for (int i = 0; i < n; i++) x[i] = x[i] * inv_sqrt_n * sign[i];
}

/* index of the level nearest to t: the number of midpoints below it (binary search; a NaN counts none) */
static int nearest_level(const float *mid, int n_levels, float t) {
    int k = 0;
    for (int step = n_levels / 2; step >= 1; step /= 2)
        if (t > mid[k + step - 1]) k += step;
    return k;
}

float eli_tq_quantize(const eli_tq_codebook *cb, int bits, int projecting, const float *y, int n, uint8_t *code,
                      uint8_t *sub) {
    if (n < 16) return 0.0f;
    const int n_levels = cb->n_levels, n_mult = bits ? 1 << bits : 1;
    float mid[15];
    for (int b = 0; b + 1 < n_levels; b++) mid[b] = 0.5f * (float)(cb->levels[b] + cb->levels[b + 1]);
    double yy = 0.0;
    for (int i = 0; i < n; i++) yy += (double)y[i] * y[i];
    memset(code, 0, (size_t)n);
    memset(sub, 0, (size_t)n / 16);
    if (!(yy > 0.0 && yy < 1e300)) return 0.0f;
    /* t: the values in level steps at the block's RMS; candidate k codes t * mean_m / m_k and costs the
     * squared error in those steps */
    const double mean_m = bits == 3 ? 10.5 : bits == 2 ? 5.5 : 1.0;
    const float f = (float)(cb->units / sqrt(yy / n));
    float g[8], r[8];
    for (int k = 0; k < n_mult; k++) {
        g[k] = (float)(mean_m / eli_tq_mult(bits, (unsigned)k));
        r[k] = (float)(eli_tq_mult(bits, (unsigned)k) / mean_m);
    }
    double yu = 0.0, uu = 0.0;
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
        }
    }
    const double s = projecting ? yy / yu : yu / uu;
    return yu > 0.0 ? (float)(s < 65504.0 ? s : 65504.0) : 0.0f;
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
