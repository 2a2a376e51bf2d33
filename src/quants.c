/* Scalar reference implementations of the ggml/GGUF weight and activation formats.
 *
 * Everything here is written for clarity and bit-exactness, not speed:
 *  - the quantizers reproduce the bytes of ggml's reference quantizers (the `quantize_row_*_ref` path that
 *    llama-quantize takes when no importance matrix is given), so that re-quantizing an F32 tensor yields
 *    the same file bytes;
 *  - the dequantizers perform the same float operations, in the same order, as ggml's scalar ("generic")
 *    code; the dot products accumulate in 8 lanes of our own definition, the SIMD-natural one (32-element
 *    formats: see lanes8_fma; K-quants: see klanes_chunk). Either way the order is fixed here, so the SIMD
 *    kernels elsewhere can be tested against it bit for bit.
 *
 * Bit-exactness depends on evaluation order of float expressions, which is why many expressions below are
 * written in a specific (sometimes odd-looking) form, e.g. `(w * x) * l` rather than `w * (x * l)`. Do not
 * "simplify" them. For the same reason the compiler must not fuse a*b+c into an FMA (that changes the
 * rounding): FP_CONTRACT is switched off (fp_exact.h) for clang, and for GCC through its optimize pragma (GCC
 * already defaults to -ffp-contract=off in ISO C mode, but not with -std=gnu11).
 *
 * Measured on the golden files: with FMA contraction (gcc -std=gnu11 -march=native without the pragma)
 * about 6% of Q4_K rows and 1-2% of Q6_K rows come out different from llama-quantize's; without it, all rows
 * match. llama-quantize's reference quantizers live in ggml-base, which is built without -march flags, so
 * on x86-64 they never use FMA. clang's -ffp-contract=fast overrides the pragma: do not build with it (nor
 * with -ffast-math, rejected there).
 *
 * Blocks are read and written through memcpy into local structs, so rows need no particular alignment. */
#include "fp_exact.h"

#include "quants.h"

#include <assert.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "tquant.h"

#if defined(__BYTE_ORDER__) && defined(__ORDER_BIG_ENDIAN__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#error "quants.c assumes a little-endian host (GGUF block fields are little-endian)"
#endif

/* The on-disk block sizes; a mismatch here means the structs in quants.h picked up padding. */
_Static_assert(sizeof(eli_block_q4_0) == 2 + ELI_QK4_0 / 2, "q4_0 block size");
_Static_assert(sizeof(eli_block_q4_1) == 4 + ELI_QK4_1 / 2, "q4_1 block size");
_Static_assert(sizeof(eli_block_q5_0) == 2 + 4 + ELI_QK5_0 / 2, "q5_0 block size");
_Static_assert(sizeof(eli_block_q5_1) == 4 + 4 + ELI_QK5_1 / 2, "q5_1 block size");
_Static_assert(sizeof(eli_block_q8_0) == 34, "q8_0 block size");
_Static_assert(sizeof(eli_block_q8_1) == 36, "q8_1 block size");
_Static_assert(sizeof(eli_block_q4_K) == 144, "q4_K block size");
_Static_assert(sizeof(eli_block_q5_K) == 176, "q5_K block size");
_Static_assert(sizeof(eli_block_q6_K) == 210, "q6_K block size");
_Static_assert(sizeof(eli_block_q8_K) == 292, "q8_K block size");
_Static_assert(sizeof(float) == 4 && sizeof(eli_fp16) == 2, "float/half sizes");

/* ggml's threshold below which a group counts as all zero. */
#define GROUP_MAX_EPS 1e-15f

static inline int imin(int a, int b) { return a < b ? a : b; }
static inline int imax(int a, int b) { return a > b ? a : b; }

/* ------------------------------------------------------------------------------------------------------
 * Half-precision conversions
 * ---------------------------------------------------------------------------------------------------- */

static inline uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float f32_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

float eli_fp16_to_fp32(eli_fp16 h) {
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1fu;
    const uint32_t man = h & 0x3ffu;
    if (exp == 0) {
        /* Zero or subnormal: value = man * 2^-24, exact in float (a normal float there). */
        const float mag = (float)man * 0x1p-24f;
        return sign ? -mag : mag;
    }
    if (exp == 31) {
        /* Inf, or NaN with its payload kept in the top mantissa bits. */
        return f32_from_bits(sign | 0x7f800000u | (man << 13));
    }
    /* Normal: rebias the exponent from 15 to 127. */
    return f32_from_bits(sign | ((exp + 112u) << 23) | (man << 13));
}

/* Rounds the integer `v >> shift` to nearest, ties to even. */
static inline uint32_t shift_round_even(uint32_t v, unsigned shift) {
    const uint32_t q = v >> shift;
    const uint32_t rem = v & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1);
    return q + (rem > half || (rem == half && (q & 1u)));
}

eli_fp16 eli_fp32_to_fp16(float f) {
    const uint32_t x = f32_bits(f);
    const uint32_t sign = (x >> 16) & 0x8000u;
    const uint32_t ax = x & 0x7fffffffu;

    if (ax > 0x7f800000u) {
        /* NaN: keep the top payload bits and force the quiet bit (as F16C / IEEE convertFormat do). */
        return (eli_fp16)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
    }
    if (ax >= 0x477ff000u) {
        /* >= 65520 (half-way between 65504, the largest half, and 65536) rounds to infinity; ties go to
         * the even neighbour, which is infinity here. Includes infinity itself. */
        return (eli_fp16)(sign | 0x7c00u);
    }
    if (ax >= 0x38800000u) {
        /* Normal half range [2^-14, 65520): rebias the exponent (127 -> 15) in place and drop 13 mantissa
         * bits with rounding; a carry out of the mantissa correctly bumps the exponent. */
        return (eli_fp16)(sign | shift_round_even(ax - 0x38000000u, 13));
    }
    if (ax <= 0x33000000u) {
        /* <= 2^-25, half the smallest subnormal: rounds to (signed) zero; exactly 2^-25 ties to even 0. */
        return (eli_fp16)sign;
    }
    /* Subnormal half: value / 2^-24 = mant24 * 2^(e - 126), with e in [102, 112]. The result may round up
     * to 0x400, which is the correct encoding of the smallest normal. */
    const uint32_t e = ax >> 23;
    const uint32_t mant24 = (ax & 0x7fffffu) | 0x800000u;
    return (eli_fp16)(sign | shift_round_even(mant24, 126u - e));
}

float eli_bf16_to_fp32(eli_bf16 h) { return f32_from_bits((uint32_t)h << 16); }

eli_bf16 eli_fp32_to_bf16(float f) {
    const uint32_t x = f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) {
        /* NaN: truncate and force the quiet bit, so the payload cannot round into infinity. */
        return (eli_bf16)((x >> 16) | 0x40u);
    }
    /* Round to nearest even on the low 16 bits; subnormals are rounded, not flushed (as current ggml).
     * Overflow carries into the exponent and yields infinity, as it should. */
    return (eli_bf16)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

static inline float fp16_load(const eli_fp16 *p) { return eli_fp16_to_fp32(*p); }

/* ------------------------------------------------------------------------------------------------------
 * Helpers shared by the quantizers
 * ---------------------------------------------------------------------------------------------------- */

/* Round to nearest (ties to even) for |fval| <= 4194303, ggml's way: adding 1.5 * 2^23 puts the integer
 * into the low mantissa bits. Unlike lrintf it does not depend on the rounding mode, and NaN or huge inputs
 * give a garbage value instead of undefined behaviour. */
static inline int nearest_int(float fval) {
    const float val = fval + 12582912.f;
    int32_t i;
    memcpy(&i, &val, sizeof i);
    return (i & 0x007fffff) - 0x00400000;
}

/* C's float -> integer conversion (truncation toward zero), made total: the reference quantizers cast
 * floats that are in range for finite inputs; NaN and out-of-range values (only possible from non-finite
 * inputs) would be undefined behaviour, so they are mapped to 0 / clamped here instead. */
static inline int trunc_to_int(float v) {
    if (!(v == v)) return 0;
    if (v >= 2147483648.f) return INT32_MAX;
    if (v < -2147483648.f) return INT32_MIN;
    return (int)v;
}

/* Same for roundf() followed by a conversion to int8 (Q8_0 / Q8_1): half-way cases away from zero. */
static inline int8_t round_to_i8(float v) {
    const float r = roundf(v);
    if (!(r == r)) return 0;
    if (r > 127.f) return 127;
    if (r < -128.f) return -128;
    return (int8_t)r;
}

/* Same as C's (int8_t)(float) for the values the Q4_0 / Q5_0 quantizers produce. */
static inline int trunc_to_i8(float v) {
    const int i = trunc_to_int(v);
    return i > 127 ? 127 : i < -128 ? -128 : i;
}

/* Symmetric quantization of n values to integers in [-nmax, nmax-1] with a least-squares scale, weighting
 * each value by x^2 (ggml's make_qx_quants with rmse_type 1 and no importance weights). Tries 19 candidate
 * inverse scales around -nmax/max and keeps the one that maximises sumlx^2/suml2. L[i] receives q + nmax.
 * Returns the scale. */
static float make_qx_quants(int n, int nmax, const float *x, int8_t *L) {
    float max = 0;
    float amax = 0;
    for (int i = 0; i < n; ++i) {
        const float ax = fabsf(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    if (amax < GROUP_MAX_EPS) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        return 0.f;
    }
    float iscale = (float)(-nmax) / max;
    float sumlx = 0;
    float suml2 = 0;
    for (int i = 0; i < n; ++i) {
        int l = nearest_int(iscale * x[i]);
        l = imax(-nmax, imin(nmax - 1, l));
        L[i] = (int8_t)(l + nmax);
        const float w = x[i] * x[i];
        sumlx += (w * x[i]) * (float)l; /* order as in ggml: w*x[i]*l */
        suml2 += (w * (float)l) * (float)l;
    }
    float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; ++is) {
        if (is == 0) continue;
        iscale = -((float)nmax + 0.1f * (float)is) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; ++i) {
            int l = nearest_int(iscale * x[i]);
            l = imax(-nmax, imin(nmax - 1, l));
            const float w = x[i] * x[i];
            sumlx += (w * x[i]) * (float)l;
            suml2 += (w * (float)l) * (float)l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; ++i) {
                const int l = nearest_int(iscale * x[i]);
                L[i] = (int8_t)(nmax + imax(-nmax, imin(nmax - 1, l)));
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/* Asymmetric quantization x ~ scale * L - the_min with L in [0, nmax] (ggml's make_qkx2_quants): starts from
 * the min/max fit, then tries nstep+1 inverse scales (rmin + rdelta*is + nmax)/(max - min), solving the
 * weighted least-squares scale and offset for each candidate rounding, and keeps the lowest weighted
 * squared error. Note that `min` is updated whenever a better fit is found and the following candidates are
 * computed from the updated value; that is part of the reference behaviour. */
static float make_qkx2_quants(int n, int nmax, const float *x, const float *weights, uint8_t *L,
                              float *the_min, uint8_t *Laux, float rmin, float rdelta, int nstep) {
    float min = x[0];
    float max = x[0];
    float sum_w = weights[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; ++i) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        const float w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if (min > 0) min = 0;
    if (max == min) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        *the_min = -min;
        return 0.f;
    }
    float iscale = (float)nmax / (max - min);
    float scale = 1 / iscale;
    float best_error = 0;
    for (int i = 0; i < n; ++i) {
        const int l = nearest_int(iscale * (x[i] - min));
        L[i] = (uint8_t)imax(0, imin(nmax, l));
        float diff = (scale * (float)L[i] + min) - x[i];
        diff = diff * diff;
        best_error += weights[i] * diff;
    }
    if (nstep < 1) {
        *the_min = -min;
        return scale;
    }
    for (int is = 0; is <= nstep; ++is) {
        iscale = ((rmin + rdelta * (float)is) + (float)nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; ++i) {
            int l = nearest_int(iscale * (x[i] - min));
            l = imax(0, imin(nmax, l));
            Laux[i] = (uint8_t)l;
            const float w = weights[i];
            sum_l += w * (float)l;
            sum_l2 += (w * (float)l) * (float)l;
            sum_xl += (w * (float)l) * x[i];
        }
        const float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float cur_error = 0;
            for (int i = 0; i < n; ++i) {
                float diff = (this_scale * (float)Laux[i] + this_min) - x[i];
                diff = diff * diff;
                cur_error += weights[i] * diff;
            }
            if (cur_error < best_error) {
                for (int i = 0; i < n; ++i) L[i] = Laux[i];
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *the_min = -min;
    return scale;
}

/* The 6-bit scale and min of sub-block j (0..7) of a Q4_K / Q5_K super-block. Bytes 0..3 hold the scales
 * of sub-blocks 0..3 in their low 6 bits, bytes 4..7 the mins; sub-blocks 4..7 keep their low 4 bits in
 * bytes 8..11 (scale low nibble, min high nibble) and their top 2 bits in the spare top bits of bytes
 * 0..3 (scale) and 4..7 (min). */
void eli_q4_K_scale_min(int j, const uint8_t *q, uint8_t *sc, uint8_t *m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4));
    }
}

/* Inverse of get_scale_min_k4 for all 8 sub-blocks (in order j = 0..7, as the packing ORs into bytes
 * written by earlier iterations). */
void eli_q4_K_set_scales_mins(uint8_t *scales, const uint8_t ls[8], const uint8_t lm[8]) {
    for (int j = 0; j < 8; ++j) {
        if (j < 4) {
            scales[j] = ls[j];
            scales[j + 4] = lm[j];
        } else {
            scales[j + 4] = (uint8_t)((ls[j] & 0xF) | ((lm[j] & 0xF) << 4));
            scales[j - 4] |= (uint8_t)((ls[j] >> 4) << 6);
            scales[j - 0] |= (uint8_t)((lm[j] >> 4) << 6);
        }
    }
}

/* ------------------------------------------------------------------------------------------------------
 * F32, F16, BF16
 * ---------------------------------------------------------------------------------------------------- */

static void dequantize_row_f32(const void *src, float *dst, int64_t n) { memcpy(dst, src, (size_t)n * sizeof(float)); }
static void quantize_row_f32(const float *src, void *dst, int64_t n) { memcpy(dst, src, (size_t)n * sizeof(float)); }

static void dequantize_row_f16(const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    for (int64_t i = 0; i < n; ++i) {
        eli_fp16 h;
        memcpy(&h, p + 2 * i, sizeof h);
        dst[i] = eli_fp16_to_fp32(h);
    }
}

static void quantize_row_f16(const float *src, void *dst, int64_t n) {
    uint8_t *p = dst;
    for (int64_t i = 0; i < n; ++i) {
        const eli_fp16 h = eli_fp32_to_fp16(src[i]);
        memcpy(p + 2 * i, &h, sizeof h);
    }
}

static void dequantize_row_bf16(const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    for (int64_t i = 0; i < n; ++i) {
        eli_bf16 h;
        memcpy(&h, p + 2 * i, sizeof h);
        dst[i] = eli_bf16_to_fp32(h);
    }
}

static void quantize_row_bf16(const float *src, void *dst, int64_t n) {
    uint8_t *p = dst;
    for (int64_t i = 0; i < n; ++i) {
        const eli_bf16 h = eli_fp32_to_bf16(src[i]);
        memcpy(p + 2 * i, &h, sizeof h);
    }
}

/* ggml's scalar dot products for the float types: each product is rounded to float, then accumulated in
 * double (ggml_float). */
static float vec_dot_f32(int64_t n, const void *vx, const void *vy) {
    const uint8_t *px = vx, *py = vy;
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) {
        float a, b;
        memcpy(&a, px + 4 * i, sizeof a);
        memcpy(&b, py + 4 * i, sizeof b);
        sum += (double)(a * b);
    }
    return (float)sum;
}

static float vec_dot_f16(int64_t n, const void *vx, const void *vy) {
    const uint8_t *px = vx, *py = vy;
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) {
        eli_fp16 a, b;
        memcpy(&a, px + 2 * i, sizeof a);
        memcpy(&b, py + 2 * i, sizeof b);
        sum += (double)(eli_fp16_to_fp32(a) * eli_fp16_to_fp32(b));
    }
    return (float)sum;
}

static float vec_dot_bf16(int64_t n, const void *vx, const void *vy) {
    const uint8_t *px = vx, *py = vy;
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) {
        eli_bf16 a, b;
        memcpy(&a, px + 2 * i, sizeof a);
        memcpy(&b, py + 2 * i, sizeof b);
        sum += (double)(eli_bf16_to_fp32(a) * eli_bf16_to_fp32(b));
    }
    return (float)sum;
}

/* ------------------------------------------------------------------------------------------------------
 * Dot products of the 32-element formats (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 against Q8_0 / Q8_1).
 *
 * Our own accumulation order, not ggml's generic one: ggml's scalar code adds one float term per block to a
 * single running sum, a serial chain that no SIMD kernel can reproduce without a scalar add per block (it
 * bounded our decode speed). Here there are 8 float lanes: lane l takes the integer sum of elements
 * 4l..4l+3 of every block, multiplied by the block pair's scale product d_x * d_y and added with one fused
 * multiply-add per block; the lanes are added in the fixed tree ((l0 + l4) + (l2 + l6)) + ((l1 + l5) +
 * (l3 + l7)) at the end. Q4_1 / Q5_1 add their min terms m_x * s_y into a separate sum, one FMA per block
 * in block order, added last. That is what the hardware computes naturally -- a 32-byte block pair reduces
 * to 8 int32 lanes of 4 consecutive elements (AVX2 vpmaddubsw + vpmaddwd, AVX-512 VNNI vpdpbusd, NEON sdot
 * over the two 16-byte halves) and one FMA adds them into an 8-lane accumulator -- so every kernel table
 * reproduces this bit for bit (and llama.cpp's x86 kernels accumulate the same way; the golden tests bound
 * the difference).
 * ---------------------------------------------------------------------------------------------------- */

/* acc[l] += d * (sum of a[4l + k] * y[4l + k], k < 4), fused */
static inline void lanes8_fma(float acc[8], const int8_t a[32], const int8_t y[32], float d) {
    for (int l = 0; l < 8; ++l) {
        int s = 0;
        for (int k = 0; k < 4; ++k) s += a[4 * l + k] * y[4 * l + k];
        acc[l] = fmaf((float)s, d, acc[l]);
    }
}

static inline float lanes8_total(const float acc[8]) {
    return ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
}

/* the 32 quants of a 4-bit block in element order (low nibbles first), minus off */
static inline void unpack_nibbles(const uint8_t qs[16], int off, int8_t a[32]) {
    for (int j = 0; j < 16; ++j) {
        a[j] = (int8_t)((qs[j] & 0x0F) - off);
        a[j + 16] = (int8_t)((qs[j] >> 4) - off);
    }
}

/* the same with the fifth bits of qh (bit j for element j), minus off */
static inline void unpack_nibbles5(const uint8_t qs[16], const uint8_t qh_bytes[4], int off, int8_t a[32]) {
    uint32_t qh;
    memcpy(&qh, qh_bytes, sizeof qh);
    for (int j = 0; j < 16; ++j) {
        a[j] = (int8_t)(((qs[j] & 0x0F) | (((qh >> j) & 1) << 4)) - off);
        a[j + 16] = (int8_t)(((qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4)) - off);
    }
}

/* ------------------------------------------------------------------------------------------------------
 * Q4_0: 32 values, x = d * (q - 8), q in [0, 15]; value j in the low nibble of qs[j], value j+16 in the
 * high nibble.
 * ---------------------------------------------------------------------------------------------------- */

static void quantize_row_q4_0(const float *x, void *dst, int64_t k) {
    const int qk = ELI_QK4_0;
    assert(k % qk == 0);
    const int64_t nb = k / qk;
    uint8_t *out = dst;
    for (int64_t i = 0; i < nb; i++, x += qk) {
        /* The value of largest magnitude (first one on ties) maps to -8, so the full range [-8, 7] is used
         * on its side. */
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < qk; j++) {
            if (amax < fabsf(x[j])) {
                amax = fabsf(x[j]);
                max = x[j];
            }
        }
        const float d = max / -8;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        eli_block_q4_0 b;
        b.d = eli_fp32_to_fp16(d);
        for (int j = 0; j < qk / 2; ++j) {
            const float x0 = x[j] * id;
            const float x1 = x[qk / 2 + j] * id;
            /* +8.5 then truncation: round half up in the shifted domain. */
            const int xi0 = imin(15, trunc_to_i8(x0 + 8.5f));
            const int xi1 = imin(15, trunc_to_i8(x1 + 8.5f));
            b.qs[j] = (uint8_t)(xi0 | (xi1 << 4));
        }
        memcpy(out + i * sizeof b, &b, sizeof b);
    }
}

static void dequantize_row_q4_0(const void *src, float *y, int64_t k) {
    const int qk = ELI_QK4_0;
    assert(k % qk == 0);
    const int64_t nb = k / qk;
    const uint8_t *in = src;
    for (int64_t i = 0; i < nb; i++, y += qk) {
        eli_block_q4_0 b;
        memcpy(&b, in + i * sizeof b, sizeof b);
        const float d = fp16_load(&b.d);
        for (int j = 0; j < qk / 2; ++j) {
            const int x0 = (b.qs[j] & 0x0F) - 8;
            const int x1 = (b.qs[j] >> 4) - 8;
            y[j] = (float)x0 * d;
            y[j + qk / 2] = (float)x1 * d;
        }
    }
}

static float vec_dot_q4_0_q8_0(int64_t n, const void *vx, const void *vy) {
    assert(n % ELI_QK8_0 == 0);
    const int64_t nb = n / ELI_QK8_0;
    const uint8_t *px = vx, *py = vy;
    float acc[8] = {0};
    for (int64_t ib = 0; ib < nb; ++ib) {
        eli_block_q4_0 x;
        eli_block_q8_0 y;
        memcpy(&x, px + ib * sizeof x, sizeof x);
        memcpy(&y, py + ib * sizeof y, sizeof y);
        int8_t a[32];
        unpack_nibbles(x.qs, 8, a);
        lanes8_fma(acc, a, y.qs, fp16_load(&x.d) * fp16_load(&y.d));
    }
    return lanes8_total(acc);
}

/* ------------------------------------------------------------------------------------------------------
 * Q4_1: 32 values, x = d * q + m, q in [0, 15]; same nibble layout as Q4_0.
 * ---------------------------------------------------------------------------------------------------- */

static void quantize_row_q4_1(const float *x, void *dst, int64_t k) {
    const int qk = ELI_QK4_1;
    assert(k % qk == 0);
    const int64_t nb = k / qk;
    uint8_t *out = dst;
    for (int64_t i = 0; i < nb; i++, x += qk) {
        float min = FLT_MAX, max = -FLT_MAX;
        for (int j = 0; j < qk; j++) {
            if (x[j] < min) min = x[j];
            if (x[j] > max) max = x[j];
        }
        const float d = (max - min) / ((1 << 4) - 1);
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        eli_block_q4_1 b;
        b.d = eli_fp32_to_fp16(d);
        b.m = eli_fp32_to_fp16(min);
        for (int j = 0; j < qk / 2; ++j) {
            const float x0 = (x[j] - min) * id;
            const float x1 = (x[qk / 2 + j] - min) * id;
            const int xi0 = imin(15, trunc_to_i8(x0 + 0.5f));
            const int xi1 = imin(15, trunc_to_i8(x1 + 0.5f));
            b.qs[j] = (uint8_t)(xi0 | (xi1 << 4));
        }
        memcpy(out + i * sizeof b, &b, sizeof b);
    }
}

static void dequantize_row_q4_1(const void *src, float *y, int64_t k) {
    const int qk = ELI_QK4_1;
    assert(k % qk == 0);
    const int64_t nb = k / qk;
    const uint8_t *in = src;
    for (int64_t i = 0; i < nb; i++, y += qk) {
        eli_block_q4_1 b;
        memcpy(&b, in + i * sizeof b, sizeof b);
        const float d = fp16_load(&b.d);
        const float m = fp16_load(&b.m);
        for (int j = 0; j < qk / 2; ++j) {
            const int x0 = b.qs[j] & 0x0F;
            const int x1 = b.qs[j] >> 4;
            y[j] = (float)x0 * d + m;
            y[j + qk / 2] = (float)x1 * d + m;
        }
    }
}

static float vec_dot_q4_1_q8_1(int64_t n, const void *vx, const void *vy) {
    assert(n % ELI_QK8_1 == 0);
    const int64_t nb = n / ELI_QK8_1;
    const uint8_t *px = vx, *py = vy;
    float acc[8] = {0}, summ = 0;
    for (int64_t ib = 0; ib < nb; ++ib) {
        eli_block_q4_1 x;
        eli_block_q8_1 y;
        memcpy(&x, px + ib * sizeof x, sizeof x);
        memcpy(&y, py + ib * sizeof y, sizeof y);
        int8_t a[32];
        unpack_nibbles(x.qs, 0, a);
        lanes8_fma(acc, a, y.qs, fp16_load(&x.d) * fp16_load(&y.d));
        /* the min term uses y.s = d_y * sum(y.qs), precomputed by the Q8_1 quantizer */
        summ = fmaf(fp16_load(&x.m), fp16_load(&y.s), summ);
    }
    return lanes8_total(acc) + summ;
}

/* ------------------------------------------------------------------------------------------------------
 * Q5_0: 32 values, x = d * (q - 16), q in [0, 31]; low 4 bits as in Q4_0, bit 4 of value j in bit j of
 * the 32-bit little-endian qh.
 * ---------------------------------------------------------------------------------------------------- */

static void quantize_row_q5_0(const float *x, void *dst, int64_t k) {
    const int qk = ELI_QK5_0;
    assert(k % qk == 0);
    const int64_t nb = k / qk;
    uint8_t *out = dst;
    for (int64_t i = 0; i < nb; i++, x += qk) {
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < qk; j++) {
            if (amax < fabsf(x[j])) {
                amax = fabsf(x[j]);
                max = x[j];
            }
        }
        const float d = max / -16;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        eli_block_q5_0 b;
        b.d = eli_fp32_to_fp16(d);
        uint32_t qh = 0;
        for (int j = 0; j < qk / 2; ++j) {
            const float x0 = x[j] * id;
            const float x1 = x[qk / 2 + j] * id;
            const uint32_t xi0 = (uint32_t)imin(31, trunc_to_i8(x0 + 16.5f));
            const uint32_t xi1 = (uint32_t)imin(31, trunc_to_i8(x1 + 16.5f));
            b.qs[j] = (uint8_t)((xi0 & 0x0F) | ((xi1 & 0x0F) << 4));
            qh |= ((xi0 & 0x10u) >> 4) << (j + 0);
            qh |= ((xi1 & 0x10u) >> 4) << (j + qk / 2);
        }
        memcpy(b.qh, &qh, sizeof qh);
        memcpy(out + i * sizeof b, &b, sizeof b);
    }
}

static void dequantize_row_q5_0(const void *src, float *y, int64_t k) {
    const int qk = ELI_QK5_0;
    assert(k % qk == 0);
    const int64_t nb = k / qk;
    const uint8_t *in = src;
    for (int64_t i = 0; i < nb; i++, y += qk) {
        eli_block_q5_0 b;
        memcpy(&b, in + i * sizeof b, sizeof b);
        const float d = fp16_load(&b.d);
        uint32_t qh;
        memcpy(&qh, b.qh, sizeof qh);
        for (int j = 0; j < qk / 2; ++j) {
            const int xh0 = (int)(((qh >> (j + 0)) << 4) & 0x10);
            const int xh1 = (int)((qh >> (j + 12)) & 0x10);
            const int x0 = ((b.qs[j] & 0x0F) | xh0) - 16;
            const int x1 = ((b.qs[j] >> 4) | xh1) - 16;
            y[j] = (float)x0 * d;
            y[j + qk / 2] = (float)x1 * d;
        }
    }
}

static float vec_dot_q5_0_q8_0(int64_t n, const void *vx, const void *vy) {
    assert(n % ELI_QK8_0 == 0);
    const int64_t nb = n / ELI_QK8_0;
    const uint8_t *px = vx, *py = vy;
    float acc[8] = {0};
    for (int64_t ib = 0; ib < nb; ++ib) {
        eli_block_q5_0 x;
        eli_block_q8_0 y;
        memcpy(&x, px + ib * sizeof x, sizeof x);
        memcpy(&y, py + ib * sizeof y, sizeof y);
        int8_t a[32];
        unpack_nibbles5(x.qs, x.qh, 16, a);
        lanes8_fma(acc, a, y.qs, fp16_load(&x.d) * fp16_load(&y.d));
    }
    return lanes8_total(acc);
}

/* ------------------------------------------------------------------------------------------------------
 * Q5_1: 32 values, x = d * q + m, q in [0, 31]; bit layout as Q5_0.
 * ---------------------------------------------------------------------------------------------------- */

static void quantize_row_q5_1(const float *x, void *dst, int64_t k) {
    const int qk = ELI_QK5_1;
    assert(k % qk == 0);
    const int64_t nb = k / qk;
    uint8_t *out = dst;
    for (int64_t i = 0; i < nb; i++, x += qk) {
        float min = FLT_MAX, max = -FLT_MAX;
        for (int j = 0; j < qk; j++) {
            if (x[j] < min) min = x[j];
            if (x[j] > max) max = x[j];
        }
        const float d = (max - min) / ((1 << 5) - 1);
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        eli_block_q5_1 b;
        b.d = eli_fp32_to_fp16(d);
        b.m = eli_fp32_to_fp16(min);
        uint32_t qh = 0;
        for (int j = 0; j < qk / 2; ++j) {
            const float x0 = (x[j] - min) * id;
            const float x1 = (x[qk / 2 + j] - min) * id;
            /* ggml casts to uint8_t without clamping; the values are in [0, 31] for finite input, and any
             * overflow only touches bits that are masked off below. */
            const uint32_t xi0 = (uint32_t)trunc_to_int(x0 + 0.5f) & 0xFFu;
            const uint32_t xi1 = (uint32_t)trunc_to_int(x1 + 0.5f) & 0xFFu;
            b.qs[j] = (uint8_t)((xi0 & 0x0F) | ((xi1 & 0x0F) << 4));
            qh |= ((xi0 & 0x10u) >> 4) << (j + 0);
            qh |= ((xi1 & 0x10u) >> 4) << (j + qk / 2);
        }
        memcpy(b.qh, &qh, sizeof qh);
        memcpy(out + i * sizeof b, &b, sizeof b);
    }
}

static void dequantize_row_q5_1(const void *src, float *y, int64_t k) {
    const int qk = ELI_QK5_1;
    assert(k % qk == 0);
    const int64_t nb = k / qk;
    const uint8_t *in = src;
    for (int64_t i = 0; i < nb; i++, y += qk) {
        eli_block_q5_1 b;
        memcpy(&b, in + i * sizeof b, sizeof b);
        const float d = fp16_load(&b.d);
        const float m = fp16_load(&b.m);
        uint32_t qh;
        memcpy(&qh, b.qh, sizeof qh);
        for (int j = 0; j < qk / 2; ++j) {
            const int xh0 = (int)(((qh >> (j + 0)) << 4) & 0x10);
            const int xh1 = (int)((qh >> (j + 12)) & 0x10);
            const int x0 = (b.qs[j] & 0x0F) | xh0;
            const int x1 = (b.qs[j] >> 4) | xh1;
            y[j] = (float)x0 * d + m;
            y[j + qk / 2] = (float)x1 * d + m;
        }
    }
}

static float vec_dot_q5_1_q8_1(int64_t n, const void *vx, const void *vy) {
    assert(n % ELI_QK8_1 == 0);
    const int64_t nb = n / ELI_QK8_1;
    const uint8_t *px = vx, *py = vy;
    float acc[8] = {0}, summ = 0;
    for (int64_t ib = 0; ib < nb; ++ib) {
        eli_block_q5_1 x;
        eli_block_q8_1 y;
        memcpy(&x, px + ib * sizeof x, sizeof x);
        memcpy(&y, py + ib * sizeof y, sizeof y);
        int8_t a[32];
        unpack_nibbles5(x.qs, x.qh, 0, a);
        lanes8_fma(acc, a, y.qs, fp16_load(&x.d) * fp16_load(&y.d));
        summ = fmaf(fp16_load(&x.m), fp16_load(&y.s), summ);
    }
    return lanes8_total(acc) + summ;
}

/* ------------------------------------------------------------------------------------------------------
 * Q8_0: 32 values, x = d * q, q in [-127, 127].
 * ---------------------------------------------------------------------------------------------------- */

static void quantize_row_q8_0(const float *x, void *dst, int64_t k) {
    assert(k % ELI_QK8_0 == 0);
    const int64_t nb = k / ELI_QK8_0;
    uint8_t *out = dst;
    for (int64_t i = 0; i < nb; i++, x += ELI_QK8_0) {
        float amax = 0.0f;
        for (int j = 0; j < ELI_QK8_0; j++) {
            const float a = fabsf(x[j]);
            amax = amax > a ? amax : a; /* ggml's MAX(amax, a) */
        }
        const float d = amax / ((1 << 7) - 1);
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        eli_block_q8_0 b;
        b.d = eli_fp32_to_fp16(d);
        for (int j = 0; j < ELI_QK8_0; ++j) b.qs[j] = round_to_i8(x[j] * id);
        memcpy(out + i * sizeof b, &b, sizeof b);
    }
}

static void dequantize_row_q8_0(const void *src, float *y, int64_t k) {
    assert(k % ELI_QK8_0 == 0);
    const int64_t nb = k / ELI_QK8_0;
    const uint8_t *in = src;
    for (int64_t i = 0; i < nb; i++, y += ELI_QK8_0) {
        eli_block_q8_0 b;
        memcpy(&b, in + i * sizeof b, sizeof b);
        const float d = fp16_load(&b.d);
        for (int j = 0; j < ELI_QK8_0; ++j) y[j] = (float)b.qs[j] * d;
    }
}

static float vec_dot_q8_0_q8_0(int64_t n, const void *vx, const void *vy) {
    assert(n % ELI_QK8_0 == 0);
    const int64_t nb = n / ELI_QK8_0;
    const uint8_t *px = vx, *py = vy;
    float acc[8] = {0};
    for (int64_t ib = 0; ib < nb; ++ib) {
        eli_block_q8_0 x, y;
        memcpy(&x, px + ib * sizeof x, sizeof x);
        memcpy(&y, py + ib * sizeof y, sizeof y);
        lanes8_fma(acc, x.qs, y.qs, fp16_load(&x.d) * fp16_load(&y.d));
    }
    return lanes8_total(acc);
}

/* ------------------------------------------------------------------------------------------------------
 * Q8_1 (activations for Q4_1 / Q5_1): Q8_0 plus s = d * sum(q), which folds the weights' min into one
 * product per block.
 * ---------------------------------------------------------------------------------------------------- */

static void quantize_row_q8_1(const float *x, void *dst, int64_t k) {
    assert(k % ELI_QK8_1 == 0);
    const int64_t nb = k / ELI_QK8_1;
    uint8_t *out = dst;
    for (int64_t i = 0; i < nb; i++, x += ELI_QK8_1) {
        float amax = 0.0f;
        for (int j = 0; j < ELI_QK8_1; j++) {
            const float a = fabsf(x[j]);
            amax = amax > a ? amax : a;
        }
        const float d = amax / ((1 << 7) - 1);
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        eli_block_q8_1 b;
        b.d = eli_fp32_to_fp16(d);
        int sum = 0;
        for (int j = 0; j < ELI_QK8_1 / 2; ++j) {
            b.qs[j] = round_to_i8(x[j] * id);
            b.qs[ELI_QK8_1 / 2 + j] = round_to_i8(x[ELI_QK8_1 / 2 + j] * id);
            sum += b.qs[j];
            sum += b.qs[ELI_QK8_1 / 2 + j];
        }
        /* ggml multiplies by the unrounded float d here. */
        b.s = eli_fp32_to_fp16((float)sum * d);
        memcpy(out + i * sizeof b, &b, sizeof b);
    }
}

static void dequantize_row_q8_1(const void *src, float *y, int64_t k) {
    assert(k % ELI_QK8_1 == 0);
    const int64_t nb = k / ELI_QK8_1;
    const uint8_t *in = src;
    for (int64_t i = 0; i < nb; i++, y += ELI_QK8_1) {
        eli_block_q8_1 b;
        memcpy(&b, in + i * sizeof b, sizeof b);
        const float d = fp16_load(&b.d);
        for (int j = 0; j < ELI_QK8_1; ++j) y[j] = (float)b.qs[j] * d;
    }
}

/* ------------------------------------------------------------------------------------------------------
 * Q8_K (activations for the K-quants): 256 values, float scale, q in [-127, 127] (-128 never occurs), and
 * the sums of each 16 quants (used for the weights' mins).
 * ---------------------------------------------------------------------------------------------------- */

static void quantize_row_q8_K(const float *x, void *dst, int64_t k) {
    assert(k % ELI_QK_K == 0);
    const int64_t nb = k / ELI_QK_K;
    uint8_t *out = dst;
    for (int64_t i = 0; i < nb; i++, x += ELI_QK_K) {
        eli_block_q8_K b;
        float max = 0, amax = 0;
        for (int j = 0; j < ELI_QK_K; ++j) {
            const float ax = fabsf(x[j]);
            if (ax > amax) {
                amax = ax;
                max = x[j];
            }
        }
        if (amax == 0.0f) {
            /* ggml leaves bsums untouched here; they are zeroed for determinism (they are multiplied by
             * d = 0 anyway). */
            memset(&b, 0, sizeof b);
        } else {
            /* -127 rather than -128 keeps q in [-127, 127]. */
            const float iscale = -127.f / max;
            for (int j = 0; j < ELI_QK_K; ++j) {
                const int v = nearest_int(iscale * x[j]);
                b.qs[j] = (int8_t)imax(-128, imin(127, v));
            }
            for (int j = 0; j < ELI_QK_K / 16; ++j) {
                int sum = 0;
                for (int ii = 0; ii < 16; ++ii) sum += b.qs[j * 16 + ii];
                b.bsums[j] = (int16_t)sum;
            }
            b.d = 1 / iscale;
        }
        memcpy(out + i * sizeof b, &b, sizeof b);
    }
}

static void dequantize_row_q8_K(const void *src, float *y, int64_t k) {
    assert(k % ELI_QK_K == 0);
    const int64_t nb = k / ELI_QK_K;
    const uint8_t *in = src;
    for (int64_t i = 0; i < nb; i++, y += ELI_QK_K) {
        eli_block_q8_K b;
        memcpy(&b, in + i * sizeof b, sizeof b);
        for (int j = 0; j < ELI_QK_K; ++j) y[j] = b.d * (float)b.qs[j];
    }
}

/* ------------------------------------------------------------------------------------------------------
 * Q4_K: super-block of 256 = 8 sub-blocks of 32; x = d*sc_j * q - dmin*m_j with 6-bit sc_j, m_j and
 * q in [0, 15]. qs holds 4 groups of 64 values: 32 bytes, low nibbles = first 32, high nibbles = next 32.
 * ---------------------------------------------------------------------------------------------------- */

static void quantize_row_q4_K(const float *x, void *dst, int64_t k) {
    assert(k % ELI_QK_K == 0);
    const int64_t nb = k / ELI_QK_K;
    uint8_t *out = dst;
    uint8_t L[ELI_QK_K];
    uint8_t Laux[32];
    float weights[32];
    float mins[ELI_QK_K / 32];
    float scales[ELI_QK_K / 32];

    for (int64_t i = 0; i < nb; i++, x += ELI_QK_K) {
        eli_block_q4_K b;
        memset(&b, 0, sizeof b);
        float max_scale = 0; /* the min is subtracted, so scales are positive */
        float max_min = 0;
        for (int j = 0; j < ELI_QK_K / 32; ++j) {
            /* Weight each value by rms(sub-block) + |x|: large values matter more. */
            float sum_x2 = 0;
            for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
            const float av_x = sqrtf(sum_x2 / 32);
            for (int l = 0; l < 32; ++l) weights[l] = av_x + fabsf(x[32 * j + l]);
            scales[j] = make_qkx2_quants(32, 15, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, -1.f, 0.1f, 20);
            if (scales[j] > max_scale) max_scale = scales[j];
            if (mins[j] > max_min) max_min = mins[j];
        }

        /* Quantize the 8 scales and 8 mins to 6 bits against their maxima. */
        const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
        const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
        uint8_t ls[8], lm[8];
        for (int j = 0; j < ELI_QK_K / 32; ++j) {
            /* ggml stores nearest_int() into a uint8_t (modulo 256) before clamping; kept as is. */
            ls[j] = (uint8_t)imin(63, (uint8_t)nearest_int(inv_scale * scales[j]));
            lm[j] = (uint8_t)imin(63, (uint8_t)nearest_int(inv_min * mins[j]));
        }
        eli_q4_K_set_scales_mins(b.scales, ls, lm);
        b.d = eli_fp32_to_fp16(max_scale / 63.f);
        b.dmin = eli_fp32_to_fp16(max_min / 63.f);

        /* Re-quantize every value against the final (rounded) scale and min. A sub-block whose scale
         * rounded to zero keeps the levels make_qkx2_quants chose. */
        for (int j = 0; j < ELI_QK_K / 32; ++j) {
            uint8_t sc, m;
            eli_q4_K_scale_min(j, b.scales, &sc, &m);
            const float d = fp16_load(&b.d) * (float)sc;
            if (d == 0.0f) continue;
            const float dm = fp16_load(&b.dmin) * (float)m;
            for (int ii = 0; ii < 32; ++ii) {
                const int l = nearest_int((x[32 * j + ii] + dm) / d);
                L[32 * j + ii] = (uint8_t)imax(0, imin(15, l));
            }
        }

        uint8_t *q = b.qs;
        for (int j = 0; j < ELI_QK_K; j += 64, q += 32) {
            for (int l = 0; l < 32; ++l) q[l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 4));
        }
        memcpy(out + i * sizeof b, &b, sizeof b);
    }
}

static void dequantize_row_q4_K(const void *src, float *y, int64_t k) {
    assert(k % ELI_QK_K == 0);
    const int64_t nb = k / ELI_QK_K;
    const uint8_t *in = src;
    for (int64_t i = 0; i < nb; i++) {
        eli_block_q4_K b;
        memcpy(&b, in + i * sizeof b, sizeof b);
        const float d = fp16_load(&b.d);
        const float min = fp16_load(&b.dmin);
        const uint8_t *q = b.qs;
        int is = 0;
        for (int j = 0; j < ELI_QK_K; j += 64, q += 32, is += 2) {
            uint8_t sc, m;
            eli_q4_K_scale_min(is + 0, b.scales, &sc, &m);
            const float d1 = d * (float)sc, m1 = min * (float)m;
            eli_q4_K_scale_min(is + 1, b.scales, &sc, &m);
            const float d2 = d * (float)sc, m2 = min * (float)m;
            for (int l = 0; l < 32; ++l) *y++ = d1 * (float)(q[l] & 0xF) - m1;
            for (int l = 0; l < 32; ++l) *y++ = d2 * (float)(q[l] >> 4) - m2;
        }
    }
}

/* ------------------------------------------------------------------------------------------------------
 * Dot products of the K-quants (Q4_K, Q5_K, Q6_K against Q8_K): our own order, like the 32-element formats
 * (not ggml's generic one, whose lane l takes the elements l, l+8, l+16, ... -- the SIMD kernels had to
 * permute both operands to reproduce it).
 *
 * Per super-block 8 int32 lanes: within each 32-element chunk, lane l takes elements 4l..4l+3, their
 * integer products times the chunk's sub-block scale (Q4_K / Q5_K: one per chunk; Q6_K: elements 0..15
 * of the chunk, lanes 0..3, have sub-block 2c's scale, elements 16..31, lanes 4..7, sub-block 2c+1's),
 * summed over the 8 chunks. That is what maddubs + madd with a scale vector (AVX2), maddubs + vpdpwssd
 * (AVX-512 VNNI) or SDOT on the two 16-byte halves (NEON) produce, with no permutation.
 *
 * Offsets enter through the activation's 16-element sums (bsums), also as 8 lanes, lane l holding
 * sub-blocks 2l and 2l+1 (elements 32l..32l+31, one madd of bsums with the pairs-duplicated mins):
 *  - Q4_K / Q5_K: min lane l = m_l * (bsums[2l] + bsums[2l+1]), scaled by dmin = dmin_x * d_y;
 *  - Q6_K: the quants are taken unsigned (u = q + 32, in [0, 63]) in the chunk lanes, and lane l subtracts
 *    32 * (sc[2l] * bsums[2l] + sc[2l+1] * bsums[2l+1]) in int32, so no kernel needs a per-chunk offset
 *    product. (Exact: the lanes differ from the signed per-lane sums, but only the float steps below
 *    depend on the lanes, and they are fixed here.)
 * Float steps per super-block, lane by lane: acc[l] = fma(aux32[l], d, acc[l]) with d = d_x * d_y, then
 * (Q4_K / Q5_K) acc[l] = fma(min32[l], -dmin, acc[l]); at the end lanes8_total (the same tree as the
 * 32-element formats). Every kernel table reproduces exactly these operations.
 * ---------------------------------------------------------------------------------------------------- */

/* aux32[l] += sc[l / 4] * (sum of a[4l + k] * q8[4l + k], k < 4) over one 32-element chunk */
static inline void klanes_chunk(int32_t aux32[8], const int8_t q8[32], const int8_t a[32], int32_t sc0, int32_t sc1) {
    for (int l = 0; l < 8; ++l) {
        int32_t s = 0;
        for (int k = 0; k < 4; ++k) s += a[4 * l + k] * q8[4 * l + k];
        aux32[l] += (l < 4 ? sc0 : sc1) * s;
    }
}

/* the float steps of one super-block: acc[l] = fma(aux32[l], d, acc[l]), then fma(min32[l], -dmin, .) */
static inline void klanes_fma(float acc[8], const int32_t aux32[8], float d, const int32_t *min32, float dmin) {
    for (int l = 0; l < 8; ++l) {
        acc[l] = fmaf((float)aux32[l], d, acc[l]);
        if (min32) acc[l] = fmaf((float)min32[l], -dmin, acc[l]);
    }
}

static float vec_dot_q4_K_q8_K(int64_t n, const void *vx, const void *vy) {
    assert(n % ELI_QK_K == 0);
    const int64_t nb = n / ELI_QK_K;
    const uint8_t *px = vx, *py = vy;
    float acc[8] = {0};
    for (int64_t i = 0; i < nb; ++i) {
        eli_block_q4_K x;
        eli_block_q8_K y;
        memcpy(&x, px + i * sizeof x, sizeof x);
        memcpy(&y, py + i * sizeof y, sizeof y);

        /* Unpack the 4-bit quants in element order. */
        int8_t a[ELI_QK_K];
        for (int j = 0; j < ELI_QK_K / 64; ++j) {
            for (int l = 0; l < 32; ++l) a[64 * j + l] = (int8_t)(x.qs[32 * j + l] & 0xF);
            for (int l = 0; l < 32; ++l) a[64 * j + 32 + l] = (int8_t)(x.qs[32 * j + l] >> 4);
        }
        uint8_t sc[8], mn[8];
        for (int j = 0; j < 8; ++j) eli_q4_K_scale_min(j, x.scales, &sc[j], &mn[j]);

        /* Min lanes: lane l = m_l times the activation sum of sub-block l. */
        int32_t min32[8];
        for (int l = 0; l < 8; ++l) min32[l] = mn[l] * (y.bsums[2 * l] + y.bsums[2 * l + 1]);

        int32_t aux32[8] = {0};
        for (int j = 0; j < ELI_QK_K / 32; ++j) klanes_chunk(aux32, y.qs + 32 * j, a + 32 * j, sc[j], sc[j]);

        klanes_fma(acc, aux32, fp16_load(&x.d) * y.d, min32, fp16_load(&x.dmin) * y.d);
    }
    return lanes8_total(acc);
}

/* ------------------------------------------------------------------------------------------------------
 * Q5_K: Q4_K plus a fifth bit per value: bit (2*g) of qh[l] is bit 4 of value 64g + l, bit (2*g+1) that of
 * value 64g + 32 + l.
 * ---------------------------------------------------------------------------------------------------- */

static void quantize_row_q5_K(const float *x, void *dst, int64_t k) {
    assert(k % ELI_QK_K == 0);
    const int64_t nb = k / ELI_QK_K;
    uint8_t *out = dst;
    uint8_t L[ELI_QK_K];
    float mins[ELI_QK_K / 32];
    float scales[ELI_QK_K / 32];
    float weights[32];
    uint8_t Laux[32];

    for (int64_t i = 0; i < nb; i++, x += ELI_QK_K) {
        eli_block_q5_K b;
        memset(&b, 0, sizeof b);
        float max_scale = 0, max_min = 0;
        for (int j = 0; j < ELI_QK_K / 32; ++j) {
            float sum_x2 = 0;
            for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
            const float av_x = sqrtf(sum_x2 / 32);
            for (int l = 0; l < 32; ++l) weights[l] = av_x + fabsf(x[32 * j + l]);
            scales[j] = make_qkx2_quants(32, 31, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, -0.5f, 0.1f, 15);
            if (scales[j] > max_scale) max_scale = scales[j];
            if (mins[j] > max_min) max_min = mins[j];
        }

        const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
        const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
        uint8_t ls[8], lm[8];
        for (int j = 0; j < ELI_QK_K / 32; ++j) {
            ls[j] = (uint8_t)imin(63, (uint8_t)nearest_int(inv_scale * scales[j]));
            lm[j] = (uint8_t)imin(63, (uint8_t)nearest_int(inv_min * mins[j]));
        }
        eli_q4_K_set_scales_mins(b.scales, ls, lm);
        b.d = eli_fp32_to_fp16(max_scale / 63.f);
        b.dmin = eli_fp32_to_fp16(max_min / 63.f);

        for (int j = 0; j < ELI_QK_K / 32; ++j) {
            uint8_t sc, m;
            eli_q4_K_scale_min(j, b.scales, &sc, &m);
            const float d = fp16_load(&b.d) * (float)sc;
            if (d == 0.0f) continue;
            const float dm = fp16_load(&b.dmin) * (float)m;
            for (int ii = 0; ii < 32; ++ii) {
                const int l = nearest_int((x[32 * j + ii] + dm) / d);
                L[32 * j + ii] = (uint8_t)imax(0, imin(31, l));
            }
        }

        uint8_t *qh = b.qh;
        uint8_t *ql = b.qs;
        uint8_t m1 = 1, m2 = 2;
        for (int g = 0; g < ELI_QK_K; g += 64, ql += 32) {
            for (int j = 0; j < 32; ++j) {
                int l1 = L[g + j];
                if (l1 > 15) {
                    l1 -= 16;
                    qh[j] |= m1;
                }
                int l2 = L[g + j + 32];
                if (l2 > 15) {
                    l2 -= 16;
                    qh[j] |= m2;
                }
                ql[j] = (uint8_t)(l1 | (l2 << 4));
            }
            m1 = (uint8_t)(m1 << 2);
            m2 = (uint8_t)(m2 << 2);
        }
        memcpy(out + i * sizeof b, &b, sizeof b);
    }
}

static void dequantize_row_q5_K(const void *src, float *y, int64_t k) {
    assert(k % ELI_QK_K == 0);
    const int64_t nb = k / ELI_QK_K;
    const uint8_t *in = src;
    for (int64_t i = 0; i < nb; i++) {
        eli_block_q5_K b;
        memcpy(&b, in + i * sizeof b, sizeof b);
        const float d = fp16_load(&b.d);
        const float min = fp16_load(&b.dmin);
        const uint8_t *ql = b.qs;
        const uint8_t *qh = b.qh;
        int is = 0;
        unsigned u1 = 1, u2 = 2;
        for (int j = 0; j < ELI_QK_K; j += 64, ql += 32, is += 2, u1 <<= 2, u2 <<= 2) {
            uint8_t sc, m;
            eli_q4_K_scale_min(is + 0, b.scales, &sc, &m);
            const float d1 = d * (float)sc, m1 = min * (float)m;
            eli_q4_K_scale_min(is + 1, b.scales, &sc, &m);
            const float d2 = d * (float)sc, m2 = min * (float)m;
            for (int l = 0; l < 32; ++l) *y++ = d1 * (float)((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
            for (int l = 0; l < 32; ++l) *y++ = d2 * (float)((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
        }
    }
}

static float vec_dot_q5_K_q8_K(int64_t n, const void *vx, const void *vy) {
    assert(n % ELI_QK_K == 0);
    const int64_t nb = n / ELI_QK_K;
    const uint8_t *px = vx, *py = vy;
    float acc[8] = {0};
    for (int64_t i = 0; i < nb; ++i) {
        eli_block_q5_K x;
        eli_block_q8_K y;
        memcpy(&x, px + i * sizeof x, sizeof x);
        memcpy(&y, py + i * sizeof y, sizeof y);

        int8_t a[ELI_QK_K];
        unsigned m = 1;
        for (int j = 0; j < ELI_QK_K / 64; ++j) {
            for (int l = 0; l < 32; ++l) a[64 * j + l] = (int8_t)((x.qs[32 * j + l] & 0xF) + (x.qh[l] & m ? 16 : 0));
            m <<= 1;
            for (int l = 0; l < 32; ++l) a[64 * j + 32 + l] = (int8_t)((x.qs[32 * j + l] >> 4) + (x.qh[l] & m ? 16 : 0));
            m <<= 1;
        }
        uint8_t sc[8], mn[8];
        for (int j = 0; j < 8; ++j) eli_q4_K_scale_min(j, x.scales, &sc[j], &mn[j]);

        int32_t min32[8];
        for (int l = 0; l < 8; ++l) min32[l] = mn[l] * (y.bsums[2 * l] + y.bsums[2 * l + 1]);

        int32_t aux32[8] = {0};
        for (int j = 0; j < ELI_QK_K / 32; ++j) klanes_chunk(aux32, y.qs + 32 * j, a + 32 * j, sc[j], sc[j]);

        klanes_fma(acc, aux32, fp16_load(&x.d) * y.d, min32, fp16_load(&x.dmin) * y.d);
    }
    return lanes8_total(acc);
}

/* ------------------------------------------------------------------------------------------------------
 * Q6_K: super-block of 256 = 16 sub-blocks of 16; x = d * sc_j * (q - 32), 8-bit signed sc_j, 6-bit q.
 * Per 128 values (l in 0..31): ql[l] low/high nibble = values l / l+64, ql[l+32] = values l+32 / l+96,
 * qh[l] bit pairs 0,2,4,6 = top 2 bits of values l, l+32, l+64, l+96.
 * ---------------------------------------------------------------------------------------------------- */

static void quantize_row_q6_K(const float *x, void *dst, int64_t k) {
    assert(k % ELI_QK_K == 0);
    const int64_t nb = k / ELI_QK_K;
    uint8_t *out = dst;
    int8_t L[ELI_QK_K];
    float scales[ELI_QK_K / 16];

    for (int64_t i = 0; i < nb; i++, x += ELI_QK_K) {
        eli_block_q6_K b;
        memset(&b, 0, sizeof b);
        float max_scale = 0, max_abs_scale = 0;
        for (int ib = 0; ib < ELI_QK_K / 16; ++ib) {
            const float scale = make_qx_quants(16, 32, x + 16 * ib, L + 16 * ib);
            scales[ib] = scale;
            const float abs_scale = fabsf(scale);
            if (abs_scale > max_abs_scale) {
                max_abs_scale = abs_scale;
                max_scale = scale;
            }
        }

        if (max_abs_scale < GROUP_MAX_EPS) {
            /* All-zero super-block: everything zero (b was cleared), d = +0. */
            memcpy(out + i * sizeof b, &b, sizeof b);
            continue;
        }

        /* The sub-block scale of largest magnitude maps to -128; the rest are clamped to 127. */
        const float iscale = -128.f / max_scale;
        b.d = eli_fp32_to_fp16(1 / iscale);
        for (int ib = 0; ib < ELI_QK_K / 16; ++ib) b.scales[ib] = (int8_t)imax(-128, imin(127, nearest_int(iscale * scales[ib])));

        /* Re-quantize against the rounded scales; a zero scale keeps make_qx_quants's levels. */
        for (int j = 0; j < ELI_QK_K / 16; ++j) {
            const float d = fp16_load(&b.d) * (float)b.scales[j];
            if (d == 0.0f) continue;
            for (int ii = 0; ii < 16; ++ii) {
                const int l = nearest_int(x[16 * j + ii] / d);
                L[16 * j + ii] = (int8_t)(imax(-32, imin(31, l)) + 32);
            }
        }

        uint8_t *ql = b.ql;
        uint8_t *qh = b.qh;
        for (int j = 0; j < ELI_QK_K; j += 128, ql += 64, qh += 32) {
            for (int l = 0; l < 32; ++l) {
                const int q1 = L[j + l + 0] & 0xF;
                const int q2 = L[j + l + 32] & 0xF;
                const int q3 = L[j + l + 64] & 0xF;
                const int q4 = L[j + l + 96] & 0xF;
                ql[l + 0] = (uint8_t)(q1 | (q3 << 4));
                ql[l + 32] = (uint8_t)(q2 | (q4 << 4));
                qh[l] = (uint8_t)((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) | ((L[j + l + 64] >> 4) << 4) |
                                  ((L[j + l + 96] >> 4) << 6));
            }
        }
        memcpy(out + i * sizeof b, &b, sizeof b);
    }
}

/* The 256 signed 6-bit quants of a Q6_K block, in element order. */
static void unpack_q6_K(const eli_block_q6_K *b, int8_t a[ELI_QK_K]) {
    const uint8_t *ql = b->ql;
    const uint8_t *qh = b->qh;
    for (int j = 0; j < ELI_QK_K; j += 128, ql += 64, qh += 32) {
        for (int l = 0; l < 32; ++l) {
            a[j + l + 0] = (int8_t)(((ql[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32);
            a[j + l + 32] = (int8_t)(((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
            a[j + l + 64] = (int8_t)(((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
            a[j + l + 96] = (int8_t)(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
        }
    }
}

static void dequantize_row_q6_K(const void *src, float *y, int64_t k) {
    assert(k % ELI_QK_K == 0);
    const int64_t nb = k / ELI_QK_K;
    const uint8_t *in = src;
    for (int64_t i = 0; i < nb; i++, y += ELI_QK_K) {
        eli_block_q6_K b;
        memcpy(&b, in + i * sizeof b, sizeof b);
        const float d = fp16_load(&b.d);
        int8_t a[ELI_QK_K];
        unpack_q6_K(&b, a);
        /* (d * sc) * q, as ggml evaluates d * sc[is] * q. */
        for (int j = 0; j < ELI_QK_K; ++j) y[j] = (d * (float)b.scales[j / 16]) * (float)a[j];
    }
}

static float vec_dot_q6_K_q8_K(int64_t n, const void *vx, const void *vy) {
    assert(n % ELI_QK_K == 0);
    const int64_t nb = n / ELI_QK_K;
    const uint8_t *px = vx, *py = vy;
    float acc[8] = {0};
    for (int64_t i = 0; i < nb; ++i) {
        eli_block_q6_K x;
        eli_block_q8_K y;
        memcpy(&x, px + i * sizeof x, sizeof x);
        memcpy(&y, py + i * sizeof y, sizeof y);
        /* unsigned quants u = q + 32; the offset through the bsums (see above) */
        int8_t a[ELI_QK_K];
        unpack_q6_K(&x, a);
        for (int j = 0; j < ELI_QK_K; ++j) a[j] = (int8_t)(a[j] + 32);
        int32_t aux32[8];
        for (int l = 0; l < 8; ++l)
            aux32[l] = -32 * (x.scales[2 * l] * y.bsums[2 * l] + x.scales[2 * l + 1] * y.bsums[2 * l + 1]);
        for (int c = 0; c < ELI_QK_K / 32; ++c)
            klanes_chunk(aux32, y.qs + 32 * c, a + 32 * c, x.scales[2 * c], x.scales[2 * c + 1]);
        klanes_fma(acc, aux32, fp16_load(&x.d) * y.d, NULL, 0.0f);
    }
    return lanes8_total(acc);
}

/* ------------------------------------------------------------------------------------------------------
 * TQ4_0 (ours, tquant.h): 256 weights rotated, 4-bit Lloyd-Max codes at d * m, m per 16 weights from a
 * 3-bit code; the least-squares d. Its activation Q8_TQ is rotated the same way, so a dot product is the
 * one of the rotated vectors (the map is orthogonal), in the 8 lanes of lanes8_fma: lane l takes the integer
 * sum of the values m * level times y over elements 4l..4l+3 of every 32, one FMA per block with d_w * d_y,
 * the lanes added in lanes8_total's tree (what the SIMD tables compute without a horizontal sum per block).
 * ---------------------------------------------------------------------------------------------------- */

_Static_assert(sizeof(eli_block_tq4_0) == 136, "tq4_0 block size");
_Static_assert(sizeof(eli_block_q8_tq) == 260, "q8_tq block size");

static void quantize_row_tq4_0(const float *x, void *dst, int64_t k) {
    eli_block_tq4_0 *y = dst;
    for (int64_t b = 0; b < k / ELI_QK_K; b++) {
        float r[ELI_QK_K];
        uint8_t code[ELI_QK_K], sub[ELI_QK_K / 16];
        eli_block_tq4_0 blk;
        eli_tq_rotate(x + b * ELI_QK_K, r, ELI_QK_K);
        blk.d = eli_fp32_to_fp16(eli_tq_quantize(&eli_tq_cb4, 3, 0, 1, r, ELI_QK_K, code, sub));
        memset(blk.scales, 0, sizeof blk.scales);
        for (int j = 0; j < ELI_QK_K / 16; j++) eli_tq_bits_put(blk.scales, (size_t)j * 3, sub[j], 3);
        eli_tq_pack4(code, ELI_QK_K, blk.qs);
        memcpy(y + b, &blk, sizeof blk);
    }
}

/* the levels times their multipliers of a block: m * level[code] for its 256 weights */
static void tq4_0_ints(const eli_block_tq4_0 *b, int16_t v[ELI_QK_K]) {
    uint8_t code[ELI_QK_K];
    eli_tq_unpack4(b->qs, ELI_QK_K, code);
    for (int i = 0; i < ELI_QK_K; i++)
        v[i] = (int16_t)(eli_tq_mult(3, eli_tq_bits_get(b->scales, sizeof b->scales, (size_t)(i / 16) * 3, 3)) *
                         eli_tq_cb4.levels[code[i]]);
}

static void dequantize_row_tq4_0(const void *src, float *y, int64_t k) {
    for (int64_t b = 0; b < k / ELI_QK_K; b++) {
        eli_block_tq4_0 blk;
        int16_t v[ELI_QK_K];
        memcpy(&blk, (const eli_block_tq4_0 *)src + b, sizeof blk);
        tq4_0_ints(&blk, v);
        const float d = fp16_load(&blk.d);
        for (int i = 0; i < ELI_QK_K; i++) y[b * ELI_QK_K + i] = d * (float)v[i];
        eli_tq_unrotate(y + b * ELI_QK_K, y + b * ELI_QK_K, ELI_QK_K);
    }
}

static void quantize_row_q8_tq(const float *x, void *dst, int64_t k) {
    eli_block_q8_tq *y = dst;
    for (int64_t b = 0; b < k / ELI_QK_K; b++) {
        float r[ELI_QK_K];
        eli_block_q8_tq blk;
        eli_tq_rotate(x + b * ELI_QK_K, r, ELI_QK_K);
        float amax = 0.0f;
        for (int i = 0; i < ELI_QK_K; i++) amax = fabsf(r[i]) > amax ? fabsf(r[i]) : amax;
        const float id = amax > 0.0f && amax <= FLT_MAX ? 127.0f / amax : 0.0f;
        for (int i = 0; i < ELI_QK_K; i++) blk.qs[i] = (int8_t)imax(-127, imin(127, nearest_int(r[i] * id)));
        blk.d = id > 0.0f ? amax / 127.0f : 0.0f;
        memcpy(y + b, &blk, sizeof blk);
    }
}

static void dequantize_row_q8_tq(const void *src, float *y, int64_t k) {
    for (int64_t b = 0; b < k / ELI_QK_K; b++) {
        eli_block_q8_tq blk;
        memcpy(&blk, (const eli_block_q8_tq *)src + b, sizeof blk);
        for (int i = 0; i < ELI_QK_K; i++) y[b * ELI_QK_K + i] = blk.d * (float)blk.qs[i];
        eli_tq_unrotate(y + b * ELI_QK_K, y + b * ELI_QK_K, ELI_QK_K);
    }
}

static float vec_dot_tq4_0_q8_tq(int64_t n, const void *vx, const void *vy) {
    float acc[8] = {0};
    for (int64_t b = 0; b < n / ELI_QK_K; b++) {
        eli_block_tq4_0 x;
        eli_block_q8_tq y;
        int16_t v[ELI_QK_K];
        memcpy(&x, (const eli_block_tq4_0 *)vx + b, sizeof x);
        memcpy(&y, (const eli_block_q8_tq *)vy + b, sizeof y);
        tq4_0_ints(&x, v);
        const float d = fp16_load(&x.d) * y.d;
        for (int l = 0; l < 8; l++) {
            int32_t s = 0;
            for (int i0 = 0; i0 < ELI_QK_K; i0 += 32)
                for (int k = 0; k < 4; k++) s += v[i0 + 4 * l + k] * y.qs[i0 + 4 * l + k];
            acc[l] = fmaf((float)s, d, acc[l]);
        }
    }
    return lanes8_total(acc);
}

/* ------------------------------------------------------------------------------------------------------
 * Traits table
 * ---------------------------------------------------------------------------------------------------- */

#define T_(id_, name_, bs_, ts_, vdt_, deq_, q_, dot_) \
    [id_] = {name_, bs_, ts_, vdt_, deq_, q_, dot_}
/* Layout only: the engine cannot compute with these. */
#define TL(id_, name_, bs_, ts_, vdt_) T_(id_, name_, bs_, ts_, vdt_, NULL, NULL, NULL)

static const eli_type_traits type_table[ELI_TYPE_COUNT] = {
    T_(ELI_TYPE_F32, "f32", 1, 4, ELI_TYPE_F32, dequantize_row_f32, quantize_row_f32, vec_dot_f32),
    T_(ELI_TYPE_F16, "f16", 1, 2, ELI_TYPE_F16, dequantize_row_f16, quantize_row_f16, vec_dot_f16),
    T_(ELI_TYPE_Q4_0, "q4_0", ELI_QK4_0, sizeof(eli_block_q4_0), ELI_TYPE_Q8_0, dequantize_row_q4_0,
       quantize_row_q4_0, vec_dot_q4_0_q8_0),
    T_(ELI_TYPE_Q4_1, "q4_1", ELI_QK4_1, sizeof(eli_block_q4_1), ELI_TYPE_Q8_1, dequantize_row_q4_1,
       quantize_row_q4_1, vec_dot_q4_1_q8_1),
    T_(ELI_TYPE_Q5_0, "q5_0", ELI_QK5_0, sizeof(eli_block_q5_0), ELI_TYPE_Q8_0, dequantize_row_q5_0,
       quantize_row_q5_0, vec_dot_q5_0_q8_0),
    T_(ELI_TYPE_Q5_1, "q5_1", ELI_QK5_1, sizeof(eli_block_q5_1), ELI_TYPE_Q8_1, dequantize_row_q5_1,
       quantize_row_q5_1, vec_dot_q5_1_q8_1),
    T_(ELI_TYPE_Q8_0, "q8_0", ELI_QK8_0, sizeof(eli_block_q8_0), ELI_TYPE_Q8_0, dequantize_row_q8_0,
       quantize_row_q8_0, vec_dot_q8_0_q8_0),
    /* Activation formats: no dot product of their own. */
    T_(ELI_TYPE_Q8_1, "q8_1", ELI_QK8_1, sizeof(eli_block_q8_1), ELI_TYPE_Q8_1, dequantize_row_q8_1,
       quantize_row_q8_1, NULL),
    TL(ELI_TYPE_Q2_K, "q2_K", ELI_QK_K, 84, ELI_TYPE_Q8_K),
    TL(ELI_TYPE_Q3_K, "q3_K", ELI_QK_K, 110, ELI_TYPE_Q8_K),
    T_(ELI_TYPE_Q4_K, "q4_K", ELI_QK_K, sizeof(eli_block_q4_K), ELI_TYPE_Q8_K, dequantize_row_q4_K,
       quantize_row_q4_K, vec_dot_q4_K_q8_K),
    T_(ELI_TYPE_Q5_K, "q5_K", ELI_QK_K, sizeof(eli_block_q5_K), ELI_TYPE_Q8_K, dequantize_row_q5_K,
       quantize_row_q5_K, vec_dot_q5_K_q8_K),
    T_(ELI_TYPE_Q6_K, "q6_K", ELI_QK_K, sizeof(eli_block_q6_K), ELI_TYPE_Q8_K, dequantize_row_q6_K,
       quantize_row_q6_K, vec_dot_q6_K_q8_K),
    T_(ELI_TYPE_Q8_K, "q8_K", ELI_QK_K, sizeof(eli_block_q8_K), ELI_TYPE_Q8_K, dequantize_row_q8_K,
       quantize_row_q8_K, NULL),
    TL(ELI_TYPE_IQ2_XXS, "iq2_xxs", ELI_QK_K, 66, ELI_TYPE_Q8_K),
    TL(ELI_TYPE_IQ2_XS, "iq2_xs", ELI_QK_K, 74, ELI_TYPE_Q8_K),
    TL(ELI_TYPE_IQ3_XXS, "iq3_xxs", ELI_QK_K, 98, ELI_TYPE_Q8_K),
    TL(ELI_TYPE_IQ1_S, "iq1_s", ELI_QK_K, 50, ELI_TYPE_Q8_K),
    TL(ELI_TYPE_IQ4_NL, "iq4_nl", 32, 18, ELI_TYPE_Q8_0),
    TL(ELI_TYPE_IQ3_S, "iq3_s", ELI_QK_K, 110, ELI_TYPE_Q8_K),
    TL(ELI_TYPE_IQ2_S, "iq2_s", ELI_QK_K, 82, ELI_TYPE_Q8_K),
    TL(ELI_TYPE_IQ4_XS, "iq4_xs", ELI_QK_K, 136, ELI_TYPE_Q8_K),
    TL(ELI_TYPE_I8, "i8", 1, 1, ELI_TYPE_I8),
    TL(ELI_TYPE_I16, "i16", 1, 2, ELI_TYPE_I16),
    TL(ELI_TYPE_I32, "i32", 1, 4, ELI_TYPE_I32),
    TL(ELI_TYPE_I64, "i64", 1, 8, ELI_TYPE_I64),
    TL(ELI_TYPE_F64, "f64", 1, 8, ELI_TYPE_F64),
    TL(ELI_TYPE_IQ1_M, "iq1_m", ELI_QK_K, 56, ELI_TYPE_Q8_K),
    T_(ELI_TYPE_BF16, "bf16", 1, 2, ELI_TYPE_BF16, dequantize_row_bf16, quantize_row_bf16, vec_dot_bf16),
    TL(ELI_TYPE_TQ1_0, "tq1_0", ELI_QK_K, 54, ELI_TYPE_Q8_K),
    TL(ELI_TYPE_TQ2_0, "tq2_0", ELI_QK_K, 66, ELI_TYPE_Q8_K),
    TL(ELI_TYPE_MXFP4, "mxfp4", 32, 17, ELI_TYPE_Q8_0),
    T_(ELI_TYPE_TQ4_0, "tq4_0", ELI_QK_K, sizeof(eli_block_tq4_0), ELI_TYPE_Q8_TQ, dequantize_row_tq4_0,
       quantize_row_tq4_0, vec_dot_tq4_0_q8_tq),
    T_(ELI_TYPE_Q8_TQ, "q8_tq", ELI_QK_K, sizeof(eli_block_q8_tq), ELI_TYPE_Q8_TQ, dequantize_row_q8_tq,
       quantize_row_q8_tq, NULL),
    /* Ids 4, 5 (removed Q4_2/Q4_3), 31-33 and 36-38 (removed repacked layouts) stay zeroed: not types. */
};

#undef TL
#undef T_

const eli_type_traits *eli_type_info(uint32_t type) {
    if (type >= ELI_TYPE_COUNT || type_table[type].name == NULL) return NULL;
    return &type_table[type];
}

const char *eli_type_name(uint32_t type) {
    const eli_type_traits *t = eli_type_info(type);
    return t ? t->name : "unknown";
}

size_t eli_row_size(uint32_t type, int64_t n) {
    const eli_type_traits *t = eli_type_info(type);
    if (!t || n < 0 || n % t->block_size != 0) return 0;
    const uint64_t nblocks = (uint64_t)n / t->block_size;
    if (nblocks > SIZE_MAX / t->type_size) return 0;
    return (size_t)nblocks * t->type_size;
}

void eli_dequantize_row(uint32_t type, const void *src, float *dst, int64_t n) {
    const eli_type_traits *t = eli_type_info(type);
    assert(t && t->dequantize && n >= 0 && n % t->block_size == 0);
    if (!t || !t->dequantize || n < 0 || n % t->block_size != 0) return;
    t->dequantize(src, dst, n);
}

void eli_quantize_row(uint32_t type, const float *src, void *dst, int64_t n) {
    const eli_type_traits *t = eli_type_info(type);
    assert(t && t->quantize && n >= 0 && n % t->block_size == 0);
    if (!t || !t->quantize || n < 0 || n % t->block_size != 0) return;
    t->quantize(src, dst, n);
}

float eli_vec_dot(uint32_t type, int64_t n, const void *x, const void *y) {
    const eli_type_traits *t = eli_type_info(type);
    assert(t && t->vec_dot && n >= 0 && n % t->block_size == 0);
    if (!t || !t->vec_dot || n < 0 || n % t->block_size != 0) return NAN;
    return t->vec_dot(n, x, y);
}
