/* AVX2 + FMA + F16C kernels. This file alone is compiled with -mavx2 -mfma -mf16c (CMakeLists.txt), and
 * kernels.c only hands out its table after CPUID says the CPU and OS support all three.
 *
 * Bit-exactness with quants.c (see kernels.h): the integer formats compute the same integer sums as the
 * scalar reference (integer addition is associative, so any SIMD order is fine) and then perform the
 * same float operations in the same order:
 *  - Q4_0 / Q4_1 / Q5_0 / Q5_1 / Q8_0: 8 float lanes per row, one FMA per block of the 8 int32 lane
 *    sums that maddubs + madd produce (lane l: elements 4l..4l+3), the lanes added in a fixed tree at
 *    the end (quants.c, lanes8_fma); Q4_1 / Q5_1 keep their min terms in one more FMA chain.
 *  - Q4_K / Q5_K / Q6_K: the reference keeps 8 int32 "lanes" per super-block, lane l summing the
 *    elements whose index is l mod 8, then 8 float lane sums. The SIMD code reproduces those lanes: both
 *    operands are permuted (per 32 bytes) so that byte 4l+k holds element l+8k; maddubs then pairs
 *    elements of the same lane and madd yields the 8 lane sums in order.
 * The prefill microkernels (gemm_*) unpack each weight block once for a tile of rows x tokens and keep
 * these exact per-(row, token) operations.
 * Float contraction is off (as in quants.c): a*b+c must not become an FMA where the reference rounds the
 * product; the fused steps are written as explicit FMAs. */
#if defined(__FAST_MATH__)
#error "kernels_avx2.c must not be built with -ffast-math"
#endif
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include "kernels.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)

#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "kernels_x86.h"

/* ---------------------------------------------------------------------------------------------------
 * helpers
 * ------------------------------------------------------------------------------------------------- */

static inline eli_fp16 f2h(float f) { return (eli_fp16)_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT); }

/* the 8 int32 lane sums of v0..v7, as one vector [sum(v0), ..., sum(v7)] */
static inline __m256i hsum8_epi32(const __m256i v[8]) {
    const __m256i a = _mm256_hadd_epi32(v[0], v[1]);
    const __m256i b = _mm256_hadd_epi32(v[2], v[3]);
    const __m256i c = _mm256_hadd_epi32(v[4], v[5]);
    const __m256i d = _mm256_hadd_epi32(v[6], v[7]);
    const __m256i ab = _mm256_hadd_epi32(a, b);
    const __m256i cd = _mm256_hadd_epi32(c, d);
    return _mm256_add_epi32(_mm256_permute2x128_si256(ab, cd, 0x20), _mm256_permute2x128_si256(ab, cd, 0x31));
}

static inline int hsum_epi32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

/* the lane permutation of the K-quant kernels: output byte 4l+k = input byte l+8k (l < 8, k < 4) */
static inline __m256i lane_perm(__m256i v) {
    const __m256i d = _mm256_permutevar8x32_epi32(v, _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7));
    const __m256i s = _mm256_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15, 0, 4, 8, 12, 1, 5, 9, 13,
                                       2, 6, 10, 14, 3, 7, 11, 15);
    return _mm256_shuffle_epi8(d, s);
}

/* ---------------------------------------------------------------------------------------------------
 * activation quantizers (same bytes as quants.c for finite input)
 * ------------------------------------------------------------------------------------------------- */

static inline __m256 vabs(__m256 v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }

static inline float hmax_ps(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

/* C roundf (half away from zero), NaN -> 0, clamped to [-128, 127], as int32 */
static inline __m256i round_i8(__m256 v) {
    const __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __m256 frac = _mm256_sub_ps(v, t); /* exact */
    const __m256 half = _mm256_cmp_ps(vabs(frac), _mm256_set1_ps(0.5f), _CMP_GE_OQ);
    const __m256 one = _mm256_or_ps(_mm256_set1_ps(1.0f), _mm256_and_ps(v, _mm256_set1_ps(-0.0f)));
    __m256 r = _mm256_add_ps(t, _mm256_and_ps(half, one));
    r = _mm256_and_ps(r, _mm256_cmp_ps(v, v, _CMP_ORD_Q));
    r = _mm256_min_ps(_mm256_max_ps(r, _mm256_set1_ps(-128.f)), _mm256_set1_ps(127.f));
    return _mm256_cvttps_epi32(r);
}

/* 4 vectors of 8 int32 (each in [-128, 127]) -> 32 int8 in order */
static inline __m256i pack_i8(__m256i i0, __m256i i1, __m256i i2, __m256i i3) {
    const __m256i a = _mm256_packs_epi32(i0, i1);
    const __m256i b = _mm256_packs_epi32(i2, i3);
    const __m256i c = _mm256_packs_epi16(a, b);
    return _mm256_permutevar8x32_epi32(c, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

static void quantize_q8_0(const float *x, void *dst, int64_t k) {
    const int64_t nb = k / ELI_QK8_0;
    uint8_t *out = dst;
    for (int64_t i = 0; i < nb; i++, x += 32) {
        __m256 v[4];
        __m256 mx = _mm256_setzero_ps();
        for (int j = 0; j < 4; j++) {
            v[j] = _mm256_loadu_ps(x + 8 * j);
            mx = _mm256_max_ps(mx, vabs(v[j]));
        }
        const float amax = hmax_ps(mx);
        const float d = amax / ((1 << 7) - 1);
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        const __m256 vid = _mm256_set1_ps(id);
        eli_block_q8_0 b;
        b.d = f2h(d);
        const __m256i q = pack_i8(round_i8(_mm256_mul_ps(v[0], vid)), round_i8(_mm256_mul_ps(v[1], vid)),
                                  round_i8(_mm256_mul_ps(v[2], vid)), round_i8(_mm256_mul_ps(v[3], vid)));
        _mm256_storeu_si256((__m256i *)b.qs, q);
        memcpy(out + i * sizeof b, &b, sizeof b);
    }
}

static void quantize_q8_1(const float *x, void *dst, int64_t k) {
    const int64_t nb = k / ELI_QK8_1;
    uint8_t *out = dst;
    for (int64_t i = 0; i < nb; i++, x += 32) {
        __m256 v[4];
        __m256 mx = _mm256_setzero_ps();
        for (int j = 0; j < 4; j++) {
            v[j] = _mm256_loadu_ps(x + 8 * j);
            mx = _mm256_max_ps(mx, vabs(v[j]));
        }
        const float amax = hmax_ps(mx);
        const float d = amax / ((1 << 7) - 1);
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        const __m256 vid = _mm256_set1_ps(id);
        __m256i iq[4];
        for (int j = 0; j < 4; j++) iq[j] = round_i8(_mm256_mul_ps(v[j], vid));
        const int sum = hsum_epi32(_mm256_add_epi32(_mm256_add_epi32(iq[0], iq[1]), _mm256_add_epi32(iq[2], iq[3])));
        eli_block_q8_1 b;
        b.d = f2h(d);
        b.s = f2h((float)sum * d);
        _mm256_storeu_si256((__m256i *)b.qs, pack_i8(iq[0], iq[1], iq[2], iq[3]));
        memcpy(out + i * sizeof b, &b, sizeof b);
    }
}

/* ggml's nearest_int (magic-number rounding), lane-wise, bit for bit */
static inline __m256i nearest_int8(__m256 v) {
    const __m256 t = _mm256_add_ps(v, _mm256_set1_ps(12582912.f));
    const __m256i i = _mm256_and_si256(_mm256_castps_si256(t), _mm256_set1_epi32(0x007fffff));
    return _mm256_sub_epi32(i, _mm256_set1_epi32(0x00400000));
}

static void quantize_q8_K(const float *x, void *dst, int64_t k) {
    const int64_t nb = k / ELI_QK_K;
    uint8_t *out = dst;
    for (int64_t i = 0; i < nb; i++, x += ELI_QK_K) {
        eli_block_q8_K b;
        __m256 mx = _mm256_setzero_ps();
        for (int j = 0; j < ELI_QK_K; j += 8) mx = _mm256_max_ps(vabs(_mm256_loadu_ps(x + j)), mx); /* NaN skipped */
        const float amax = hmax_ps(mx);
        if (amax == 0.0f) {
            memset(&b, 0, sizeof b);
            memcpy(out + i * sizeof b, &b, sizeof b);
            continue;
        }
        /* the first element of largest magnitude */
        float max = 0;
        const __m256 va = _mm256_set1_ps(amax);
        for (int j = 0; j < ELI_QK_K; j += 8) {
            const int m = _mm256_movemask_ps(_mm256_cmp_ps(vabs(_mm256_loadu_ps(x + j)), va, _CMP_EQ_OQ));
            if (m) {
                max = x[j + __builtin_ctz((unsigned)m)];
                break;
            }
        }
        const float iscale = -127.f / max;
        const __m256 vis = _mm256_set1_ps(iscale);
        const __m256i lo = _mm256_set1_epi32(-128), hi = _mm256_set1_epi32(127);
        for (int j = 0; j < ELI_QK_K; j += 32) {
            __m256i q[4];
            for (int u = 0; u < 4; u++) {
                const __m256i n = nearest_int8(_mm256_mul_ps(vis, _mm256_loadu_ps(x + j + 8 * u)));
                q[u] = _mm256_max_epi32(lo, _mm256_min_epi32(hi, n));
            }
            const __m256i p = pack_i8(q[0], q[1], q[2], q[3]);
            _mm256_storeu_si256((__m256i *)(b.qs + j), p);
            /* bsums of the two 16-groups: sign-extend to int16, madd with ones, reduce per 128-bit half */
            const __m256i w0 = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(p));
            const __m256i w1 = _mm256_cvtepi8_epi16(_mm256_extracti128_si256(p, 1));
            b.bsums[j / 16] = (int16_t)hsum_epi32(_mm256_madd_epi16(w0, _mm256_set1_epi16(1)));
            b.bsums[j / 16 + 1] = (int16_t)hsum_epi32(_mm256_madd_epi16(w1, _mm256_set1_epi16(1)));
        }
        b.d = 1 / iscale;
        memcpy(out + i * sizeof b, &b, sizeof b);
    }
}

static void quantize_f16(const float *x, void *dst, int64_t n) {
    uint8_t *p = dst;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(p + 2 * i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) {
        const eli_fp16 h = f2h(x[i]);
        memcpy(p + 2 * i, &h, 2);
    }
}

static void quantize_bf16(const float *x, void *dst, int64_t n) {
    uint8_t *p = dst;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256i u = _mm256_castps_si256(_mm256_loadu_ps(x + i));
        const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
        __m256i r = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), odd), 16);
        const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)),
                                               _mm256_set1_epi32(0x7f800000));
        const __m256i qn = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
        r = _mm256_blendv_epi8(r, qn, nan);
        const __m256i pk = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);
        _mm_storeu_si128((__m128i *)(p + 2 * i), _mm256_castsi256_si128(pk));
    }
    for (; i < n; i++) {
        const eli_bf16 h = eli_fp32_to_bf16(x[i]);
        memcpy(p + 2 * i, &h, 2);
    }
}

/* ---------------------------------------------------------------------------------------------------
 * 32-element block formats: per row 8 float lanes with one FMA per block (quants.c, lanes8_fma)
 * ------------------------------------------------------------------------------------------------- */

/* 32-element blocks: tiles of G32_RM rows x G32_NT tokens, one 8-lane accumulator per (row, token) pair
 * doing exactly the one-row kernel's operations, so every weight block is unpacked once for G32_NT tokens
 * and every activation block prepared once for G32_RM rows. GX(xb) prepares a weight block (a = unsigned
 * operand, b = sign source), GY(yb) an activation block (q = quants, o = offset pair sums), GP(x, y) gives
 * the pair's 8 int32 lane sums. */
#define G32_RM 2
#define G32_NT 4

typedef struct {
    __m256i a, b;
} gx_t;
typedef struct {
    __m256i q, o;
} gy_t;

/* Q4_0: u = nibble in [0, 15]; (u - 8) * y pair sums = maddubs(u, y) - maddubs(8, y), exact in int16 */
static inline gx_t gx_q4_0(const eli_block_q4_0 *x) {
    const gx_t g = {nibbles32(x->qs), _mm256_setzero_si256()};
    return g;
}
static inline gy_t gy_off8(const eli_block_q8_0 *y) {
    const __m256i q = loadu256(y->qs);
    const gy_t g = {q, _mm256_maddubs_epi16(_mm256_set1_epi8(8), q)};
    return g;
}
#define GP_OFF(x, y) _mm256_madd_epi16(_mm256_sub_epi16(_mm256_maddubs_epi16((x).a, (y).q), (y).o), _mm256_set1_epi16(1))

/* Q8_0: |x| * (sign(x) y) */
static inline gx_t gx_q8_0(const eli_block_q8_0 *x) {
    const __m256i q = loadu256(x->qs);
    const gx_t g = {_mm256_sign_epi8(q, q), q};
    return g;
}
static inline gy_t gy_plain_q8_0(const eli_block_q8_0 *y) {
    const gy_t g = {loadu256(y->qs), _mm256_setzero_si256()};
    return g;
}
#define GP_Q8_0(x, y) _mm256_madd_epi16(_mm256_maddubs_epi16((x).a, _mm256_sign_epi8((y).q, (x).b)), _mm256_set1_epi16(1))

/* Q5_0: u = nibble | bit4 << 4 in [0, 31]; (u - 16) * y = maddubs(u, y) - maddubs(16, y) */
static inline gx_t gx_q5_0(const eli_block_q5_0 *x) {
    const gx_t g = {_mm256_or_si256(nibbles32(x->qs), _mm256_and_si256(bits32(x->qh), _mm256_set1_epi8(0x10))),
                    _mm256_setzero_si256()};
    return g;
}
static inline gy_t gy_off16(const eli_block_q8_0 *y) {
    const __m256i q = loadu256(y->qs);
    const gy_t g = {q, _mm256_maddubs_epi16(_mm256_set1_epi8(16), q)};
    return g;
}

/* Q4_1 / Q5_1: unsigned u * y */
static inline gx_t gx_q4_1(const eli_block_q4_1 *x) {
    const gx_t g = {nibbles32(x->qs), _mm256_setzero_si256()};
    return g;
}
static inline gx_t gx_q5_1(const eli_block_q5_1 *x) {
    const gx_t g = {_mm256_or_si256(nibbles32(x->qs), _mm256_and_si256(bits32(x->qh), _mm256_set1_epi8(0x10))),
                    _mm256_setzero_si256()};
    return g;
}
static inline gy_t gy_plain_q8_1(const eli_block_q8_1 *y) {
    const gy_t g = {loadu256(y->qs), _mm256_setzero_si256()};
    return g;
}
#define GP_U(x, y) _mm256_madd_epi16(_mm256_maddubs_epi16((x).a, (y).q), _mm256_set1_epi16(1))

/* the fp16 two bytes into block b, as float */
#define H2F_AT(b, off) h2f((const uint8_t *)(b) + (off))

#define DEF_GEMM32(NAME, XB, YB, GX, GY, GP, HAS_MIN)                                                           \
    static void gemm_##NAME(int64_t n, int nr, int nt, const void *vx, size_t bx, const void *vy, size_t by,   \
                            float *s, size_t bs) {                                                              \
        const int64_t nb = n / 32;                                                                              \
        for (int r0 = 0; r0 < nr; r0 += G32_RM)                                                                 \
            for (int t0 = 0; t0 < nt; t0 += G32_NT) {                                                           \
                const XB *xr[G32_RM];                                                                           \
                const YB *yt[G32_NT];                                                                           \
                for (int r = 0; r < G32_RM; r++)                                                                \
                    xr[r] = (const XB *)((const uint8_t *)vx + (size_t)(r0 + r < nr ? r0 + r : nr - 1) * bx);   \
                for (int t = 0; t < G32_NT; t++)                                                                \
                    yt[t] = (const YB *)((const uint8_t *)vy + (size_t)(t0 + t < nt ? t0 + t : nt - 1) * by);   \
                __m256 acc[G32_RM][G32_NT];                                                                     \
                for (int r = 0; r < G32_RM; r++)                                                                \
                    for (int t = 0; t < G32_NT; t++) acc[r][t] = _mm256_setzero_ps();                           \
                __m256 summ = _mm256_setzero_ps(); /* lane 4r + t: the min terms of pair (r, t) */              \
                for (int64_t ib = 0; ib < nb; ib++) {                                                           \
                    gx_t gx[G32_RM];                                                                            \
                    __m256 dx[G32_RM];                                                                          \
                    for (int r = 0; r < G32_RM; r++) {                                                          \
                        gx[r] = GX(xr[r] + ib);                                                                 \
                        dx[r] = _mm256_set1_ps(H2F_AT(xr[r] + ib, 0));                                          \
                    }                                                                                           \
                    for (int t = 0; t < G32_NT; t++) {                                                          \
                        const gy_t gy = GY(yt[t] + ib);                                                         \
                        const __m256 dy = _mm256_set1_ps(H2F_AT(yt[t] + ib, 0));                                \
                        for (int r = 0; r < G32_RM; r++)                                                        \
                            acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(GP(gx[r], gy)), _mm256_mul_ps(dx[r], dy), \
                                                        acc[r][t]);                                             \
                    }                                                                                           \
                    if (HAS_MIN) {                                                                              \
                        const __m256 mx = _mm256_set_m128(_mm_set1_ps(H2F_AT(xr[1] + ib, 2)),                   \
                                                          _mm_set1_ps(H2F_AT(xr[0] + ib, 2)));                  \
                        const __m128 sy4 = _mm_setr_ps(H2F_AT(yt[0] + ib, 2), H2F_AT(yt[1] + ib, 2),            \
                                                       H2F_AT(yt[2] + ib, 2), H2F_AT(yt[3] + ib, 2));           \
                        summ = _mm256_fmadd_ps(mx, _mm256_set_m128(sy4, sy4), summ);                            \
                    }                                                                                           \
                }                                                                                               \
                float sm[8];                                                                                    \
                _mm256_storeu_ps(sm, summ);                                                                     \
                for (int r = 0; r < G32_RM && r0 + r < nr; r++)                                                 \
                    for (int t = 0; t < G32_NT && t0 + t < nt; t++) {                                           \
                        const float v = hsum_ps(acc[r][t]);                                                     \
                        s[(size_t)(t0 + t) * bs + r0 + r] = HAS_MIN ? v + sm[4 * r + t] : v;                    \
                    }                                                                                           \
            }                                                                                                   \
    }

_Static_assert(G32_RM == 2 && G32_NT == 4, "the min-term lanes of DEF_GEMM32 assume a 2 x 4 tile");

DEF_GEMM32(q4_0, eli_block_q4_0, eli_block_q8_0, gx_q4_0, gy_off8, GP_OFF, 0)
DEF_GEMM32(q8_0, eli_block_q8_0, eli_block_q8_0, gx_q8_0, gy_plain_q8_0, GP_Q8_0, 0)
DEF_GEMM32(q5_0, eli_block_q5_0, eli_block_q8_0, gx_q5_0, gy_off16, GP_OFF, 0)
DEF_GEMM32(q4_1, eli_block_q4_1, eli_block_q8_1, gx_q4_1, gy_plain_q8_1, GP_U, 1)
DEF_GEMM32(q5_1, eli_block_q5_1, eli_block_q8_1, gx_q5_1, gy_plain_q8_1, GP_U, 1)


/* HAS_MIN: Q4_1 / Q5_1, whose blocks carry m after d (and the Q8_1 activation s after d): one more FMA
 * chain per row, in block order. GX / GY / GP: the block preparation and pair sums of the prefill
 * microkernels above; the activation block is prepared once for all nr rows. */
#define DEF_Q32(NAME, XB, YB, GX, GY, GP, HAS_MIN)                                                               \
    static inline __attribute__((always_inline)) void rows_##NAME(int64_t n, const int nr, const void *vx,       \
                                                                  size_t bx, const void *vy, float *s) {         \
        const int64_t nb = n / 32;                                                                               \
        const YB *y = vy;                                                                                        \
        __m256 acc[ELI_KERNEL_MAX_NR];                                                                           \
        float summ[ELI_KERNEL_MAX_NR] = {0};                                                                     \
        for (int r = 0; r < nr; r++) acc[r] = _mm256_setzero_ps();                                               \
        for (int64_t ib = 0; ib < nb; ib++) {                                                                    \
            const gy_t gy = GY(y + ib);                                                                          \
            const float dy = h2f(&y[ib]);                                                                        \
            for (int r = 0; r < nr; r++) {                                                                       \
                const XB *x = (const XB *)((const uint8_t *)vx + (size_t)r * bx) + ib;                           \
                /* decode streams the matrix from DRAM: ask for the block 64 ahead */                            \
                _mm_prefetch((const char *)(x + 64), _MM_HINT_T0);                                               \
                acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(GP(GX(x), gy)), _mm256_set1_ps(h2f(x) * dy), acc[r]); \
                if (HAS_MIN) summ[r] = fmaf(h2f((const uint8_t *)x + 2), h2f((const uint8_t *)&y[ib] + 2), summ[r]); \
            }                                                                                                    \
        }                                                                                                        \
        for (int r = 0; r < nr; r++) s[r] = HAS_MIN ? hsum_ps(acc[r]) + summ[r] : hsum_ps(acc[r]);              \
    }                                                                                                            \
    /* one specialisation per row count keeps the accumulators in registers */                                  \
    static void vec_dot_##NAME##_nr(int64_t n, int nr, const void *vx, size_t bx, const void *vy, float *s) {   \
        switch (nr) {                                                                                            \
        case 1: rows_##NAME(n, 1, vx, bx, vy, s); break;                                                         \
        case 2: rows_##NAME(n, 2, vx, bx, vy, s); break;                                                         \
        case 3: rows_##NAME(n, 3, vx, bx, vy, s); break;                                                         \
        default: rows_##NAME(n, 4, vx, bx, vy, s); break;                                                        \
        }                                                                                                        \
    }                                                                                                            \
    static float vec_dot_##NAME(int64_t n, const void *vx, const void *vy) {                                     \
        float s;                                                                                                 \
        rows_##NAME(n, 1, vx, 0, vy, &s);                                                                        \
        return s;                                                                                                \
    }

DEF_Q32(q4_0, eli_block_q4_0, eli_block_q8_0, gx_q4_0, gy_off8, GP_OFF, 0)
DEF_Q32(q8_0, eli_block_q8_0, eli_block_q8_0, gx_q8_0, gy_plain_q8_0, GP_Q8_0, 0)
DEF_Q32(q5_0, eli_block_q5_0, eli_block_q8_0, gx_q5_0, gy_off16, GP_OFF, 0)
DEF_Q32(q4_1, eli_block_q4_1, eli_block_q8_1, gx_q4_1, gy_plain_q8_1, GP_U, 1)
DEF_Q32(q5_1, eli_block_q5_1, eli_block_q8_1, gx_q5_1, gy_plain_q8_1, GP_U, 1)


/* ---------------------------------------------------------------------------------------------------
 * K-quants: the reference's 8 lanes per super-block
 * ------------------------------------------------------------------------------------------------- */

static inline void scales_mins_k4(const uint8_t *q, uint8_t sc[8], uint8_t mn[8]) {
    for (int j = 0; j < 4; j++) {
        sc[j] = q[j] & 63;
        mn[j] = q[j + 4] & 63;
    }
    for (int j = 4; j < 8; j++) {
        sc[j] = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        mn[j] = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

/* the 8 lane-permuted 32-byte chunks of a Q8_K block's quants */
typedef struct {
    __m256i q[8];
} yperm_t;

static inline void yperm_load(yperm_t *p, const eli_block_q8_K *y) {
    for (int j = 0; j < 8; j++) p->q[j] = lane_perm(loadu256(y->qs + 32 * j));
}

/* sum over the 16 bsums of bsums[j] * mn[j / 2] */
static inline int min_term(const eli_block_q8_K *y, const uint8_t mn[8]) {
    const __m256i bs = loadu256(y->bsums);
    const __m256i m = _mm256_cvtepu8_epi16(_mm_setr_epi8((char)mn[0], (char)mn[0], (char)mn[1], (char)mn[1],
                                                         (char)mn[2], (char)mn[2], (char)mn[3], (char)mn[3],
                                                         (char)mn[4], (char)mn[4], (char)mn[5], (char)mn[5],
                                                         (char)mn[6], (char)mn[6], (char)mn[7], (char)mn[7]));
    return hsum_epi32(_mm256_madd_epi16(bs, m));
}

static inline float lanes_total(float sumf, __m256 acc) {
    float a[8];
    _mm256_storeu_ps(a, acc);
    for (int l = 0; l < 8; l++) sumf += a[l];
    return sumf;
}

static void vec_dot_q4_K_nr(int64_t n, int nr, const void *vx, size_t bx, const void *vy, float *s) {
    const int64_t nb = n / ELI_QK_K;
    const eli_block_q8_K *y = vy;
    float sumf[ELI_KERNEL_MAX_NR] = {0};
    __m256 acc[ELI_KERNEL_MAX_NR];
    for (int r = 0; r < nr; r++) acc[r] = _mm256_setzero_ps();
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    for (int64_t i = 0; i < nb; i++) {
        yperm_t yp;
        yperm_load(&yp, y + i);
        for (int r = 0; r < nr; r++) {
            const eli_block_q4_K *x = (const eli_block_q4_K *)((const uint8_t *)vx + (size_t)r * bx) + i;
            for (size_t pf = 0; pf < sizeof *x; pf += 64) _mm_prefetch((const char *)(x + 8) + pf, _MM_HINT_T0);
            uint8_t sc[8], mn[8];
            scales_mins_k4(x->scales, sc, mn);
            const int sumi = min_term(y + i, mn);
            __m256i aux = _mm256_setzero_si256();
            for (int j = 0; j < 4; j++) {
                const __m256i q = lane_perm(loadu256(x->qs + 32 * j));
                const __m256i lo = _mm256_and_si256(q, m4);
                const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
                const __m256i p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, yp.q[2 * j]), _mm256_set1_epi16(sc[2 * j]));
                const __m256i p1 =
                    _mm256_madd_epi16(_mm256_maddubs_epi16(hi, yp.q[2 * j + 1]), _mm256_set1_epi16(sc[2 * j + 1]));
                aux = _mm256_add_epi32(aux, _mm256_add_epi32(p0, p1));
            }
            const float d = h2f(&x->d) * y[i].d;
            acc[r] = _mm256_add_ps(acc[r], _mm256_mul_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(aux)));
            const float dmin = h2f(&x->dmin) * y[i].d;
            sumf[r] -= dmin * (float)sumi;
        }
    }
    for (int r = 0; r < nr; r++) s[r] = lanes_total(sumf[r], acc[r]);
}

/* Q5_K: bit (2g) of qh[l] -> bit 4 of element 64g + l, bit (2g+1) -> of element 64g + 32 + l. In the
 * permuted domain qh is permuted like qs; the bit is masked and shifted to position 4. */
#define Q5K_UP(qh, b, sh) _mm256_slli_epi16(_mm256_and_si256(qh, _mm256_set1_epi8((char)(1 << (b)))), sh)
#define Q5K_DN(qh, b, sh) _mm256_srli_epi16(_mm256_and_si256(qh, _mm256_set1_epi8((char)(1 << (b)))), sh)

static void vec_dot_q5_K_nr(int64_t n, int nr, const void *vx, size_t bx, const void *vy, float *s) {
    const int64_t nb = n / ELI_QK_K;
    const eli_block_q8_K *y = vy;
    float sumf[ELI_KERNEL_MAX_NR] = {0};
    __m256 acc[ELI_KERNEL_MAX_NR];
    for (int r = 0; r < nr; r++) acc[r] = _mm256_setzero_ps();
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    for (int64_t i = 0; i < nb; i++) {
        yperm_t yp;
        yperm_load(&yp, y + i);
        for (int r = 0; r < nr; r++) {
            const eli_block_q5_K *x = (const eli_block_q5_K *)((const uint8_t *)vx + (size_t)r * bx) + i;
            for (size_t pf = 0; pf < sizeof *x; pf += 64) _mm_prefetch((const char *)(x + 8) + pf, _MM_HINT_T0);
            uint8_t sc[8], mn[8];
            scales_mins_k4(x->scales, sc, mn);
            const int sumi = min_term(y + i, mn);
            const __m256i qh = lane_perm(loadu256(x->qh));
            __m256i h[8];
            h[0] = Q5K_UP(qh, 0, 4), h[1] = Q5K_UP(qh, 1, 3), h[2] = Q5K_UP(qh, 2, 2), h[3] = Q5K_UP(qh, 3, 1);
            h[4] = _mm256_and_si256(qh, _mm256_set1_epi8(0x10)), h[5] = Q5K_DN(qh, 5, 1);
            h[6] = Q5K_DN(qh, 6, 2), h[7] = Q5K_DN(qh, 7, 3);
            __m256i aux = _mm256_setzero_si256();
            for (int j = 0; j < 4; j++) {
                const __m256i q = lane_perm(loadu256(x->qs + 32 * j));
                const __m256i lo = _mm256_or_si256(_mm256_and_si256(q, m4), h[2 * j]);
                const __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4), h[2 * j + 1]);
                const __m256i p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, yp.q[2 * j]), _mm256_set1_epi16(sc[2 * j]));
                const __m256i p1 =
                    _mm256_madd_epi16(_mm256_maddubs_epi16(hi, yp.q[2 * j + 1]), _mm256_set1_epi16(sc[2 * j + 1]));
                aux = _mm256_add_epi32(aux, _mm256_add_epi32(p0, p1));
            }
            const float d = h2f(&x->d) * y[i].d;
            acc[r] = _mm256_add_ps(acc[r], _mm256_mul_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(aux)));
            const float dmin = h2f(&x->dmin) * y[i].d;
            sumf[r] -= dmin * (float)sumi;
        }
    }
    for (int r = 0; r < nr; r++) s[r] = lanes_total(sumf[r], acc[r]);
}

/* Q6_K: values are u - 32 with u in [0, 63]; maddubs(u, y) - maddubs(32, y) per pair is the exact
 * signed pair sum. The 16-element sub-blocks alternate in the int16 pairs (element l+8k: k < 2 is the
 * first sub-block of the 32-chunk), so madd takes the scale pair (sc0, sc1). */
static void vec_dot_q6_K_nr(int64_t n, int nr, const void *vx, size_t bx, const void *vy, float *s) {
    const int64_t nb = n / ELI_QK_K;
    const eli_block_q8_K *y = vy;
    __m256 acc[ELI_KERNEL_MAX_NR];
    for (int r = 0; r < nr; r++) acc[r] = _mm256_setzero_ps();
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i m2 = _mm256_set1_epi8(0x03);
    for (int64_t i = 0; i < nb; i++) {
        yperm_t yp;
        yperm_load(&yp, y + i);
        __m256i off[8];
        for (int c = 0; c < 8; c++) off[c] = _mm256_maddubs_epi16(_mm256_set1_epi8(32), yp.q[c]);
        for (int r = 0; r < nr; r++) {
            const eli_block_q6_K *x = (const eli_block_q6_K *)((const uint8_t *)vx + (size_t)r * bx) + i;
            for (size_t pf = 0; pf < sizeof *x; pf += 64) _mm_prefetch((const char *)(x + 8) + pf, _MM_HINT_T0);
            __m256i aux = _mm256_setzero_si256();
            for (int h = 0; h < 2; h++) {
                const __m256i l0 = lane_perm(loadu256(x->ql + 64 * h));
                const __m256i l1 = lane_perm(loadu256(x->ql + 64 * h + 32));
                const __m256i qh = lane_perm(loadu256(x->qh + 32 * h));
                __m256i u[4];
                u[0] = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_slli_epi16(_mm256_and_si256(qh, m2), 4));
                u[1] = _mm256_or_si256(_mm256_and_si256(l1, m4),
                                       _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), m2), 4));
                u[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                                       _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), m2), 4));
                u[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                       _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), m2), 4));
                for (int k = 0; k < 4; k++) {
                    const int c = 4 * h + k; /* 32-chunk of the super-block: sub-blocks 2c, 2c+1 */
                    const __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(u[k], yp.q[c]), off[c]);
                    const uint32_t sc2 = (uint32_t)(uint16_t)(int16_t)x->scales[2 * c] |
                                          ((uint32_t)(uint16_t)(int16_t)x->scales[2 * c + 1] << 16);
                    aux = _mm256_add_epi32(aux, _mm256_madd_epi16(p, _mm256_set1_epi32((int)sc2)));
                }
            }
            const float d = h2f(&x->d) * y[i].d;
            acc[r] = _mm256_add_ps(acc[r], _mm256_mul_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(aux)));
        }
    }
    for (int r = 0; r < nr; r++) s[r] = lanes_total(0.0f, acc[r]);
}

static float vec_dot_q4_K(int64_t n, const void *vx, const void *vy) {
    float s;
    vec_dot_q4_K_nr(n, 1, vx, 0, vy, &s);
    return s;
}
static float vec_dot_q5_K(int64_t n, const void *vx, const void *vy) {
    float s;
    vec_dot_q5_K_nr(n, 1, vx, 0, vy, &s);
    return s;
}
static float vec_dot_q6_K(int64_t n, const void *vx, const void *vy) {
    float s;
    vec_dot_q6_K_nr(n, 1, vx, 0, vy, &s);
    return s;
}

/* ---------------------------------------------------------------------------------------------------
 * K-quant prefill microkernels (gemm): GEMM_RM weight rows x up to ELI_KERNEL_MAX_NT tokens per call
 *
 * Each weight block is unpacked once per call (per token group) and multiplied with the tile's tokens.
 * Results are bit-identical to the one-row kernels above (kernels.h): per (row, token) the same integer
 * sums (any order) and the same float operations in the same order. Rows past nr and tokens past nt
 * repeat the last valid one (memory that exists); their results are computed like any other and dropped.
 * ------------------------------------------------------------------------------------------------- */

#define GEMM_RM 4
#define GEMM_NP (ELI_KERNEL_MAX_NT / 2) /* token pairs per call */

static inline int ld_u16(const void *p) {
    uint16_t h;
    memcpy(&h, p, sizeof h);
    return h;
}

/* [f(p0), f(p1), f(p2), f(p3)] twice: the fp16 at p0..p3 (one per row) for both tokens of a pair */
static inline __m256 h_rows(const void *p0, const void *p1, const void *p2, const void *p3) {
    __m128i v = _mm_cvtsi32_si128(ld_u16(p0));
    v = _mm_insert_epi16(v, ld_u16(p1), 1);
    v = _mm_insert_epi16(v, ld_u16(p2), 2);
    v = _mm_insert_epi16(v, ld_u16(p3), 3);
    const __m128 f = _mm_cvtph_ps(v);
    return _mm256_insertf128_ps(_mm256_castps128_ps256(f), f, 1);
}

static inline __m256 f_toks(float a, float b) { return _mm256_insertf128_ps(_mm256_set1_ps(a), _mm_set1_ps(b), 1); }

/* K-quants: per super-block the GEMM_RM weight rows are unpacked (lane-permuted, as in the one-row
 * kernels) into 8 chunks of 32 bytes each with its scale, then every token pair is multiplied with them.
 * Per (row, token) this keeps the one-row kernel's 8 float lanes (acc) and its scalar sumf, the latter as
 * one lane of a pair vector. */
typedef struct {
    __m256i q[GEMM_RM][8];  /* unsigned quants, lane-permuted */
    __m256i sc[GEMM_RM][8]; /* the chunk's scale (int16 pairs: for Q6_K the two 16-element sub-blocks) */
    __m256i mn[GEMM_RM];    /* Q4_K / Q5_K: the 16 bsum weights (mins) */
    __m256 d, dmin;         /* the rows' d and dmin, as h_rows */
} kx_t;

static inline void kx_q4_K(kx_t *k, const eli_block_q4_K *const x[GEMM_RM]) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    for (int r = 0; r < GEMM_RM; r++) {
        uint8_t sc[8], mn[8];
        scales_mins_k4(x[r]->scales, sc, mn);
        for (int j = 0; j < 4; j++) {
            const __m256i q = lane_perm(loadu256(x[r]->qs + 32 * j));
            k->q[r][2 * j] = _mm256_and_si256(q, m4);
            k->q[r][2 * j + 1] = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
        }
        for (int j = 0; j < 8; j++) k->sc[r][j] = _mm256_set1_epi16(sc[j]);
        k->mn[r] = _mm256_cvtepu8_epi16(_mm_setr_epi8((char)mn[0], (char)mn[0], (char)mn[1], (char)mn[1], (char)mn[2],
                                                      (char)mn[2], (char)mn[3], (char)mn[3], (char)mn[4], (char)mn[4],
                                                      (char)mn[5], (char)mn[5], (char)mn[6], (char)mn[6], (char)mn[7],
                                                      (char)mn[7]));
    }
    k->d = h_rows(&x[0]->d, &x[1]->d, &x[2]->d, &x[3]->d);
    k->dmin = h_rows(&x[0]->dmin, &x[1]->dmin, &x[2]->dmin, &x[3]->dmin);
}

static inline void kx_q5_K(kx_t *k, const eli_block_q5_K *const x[GEMM_RM]) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    for (int r = 0; r < GEMM_RM; r++) {
        uint8_t sc[8], mn[8];
        scales_mins_k4(x[r]->scales, sc, mn);
        const __m256i qh = lane_perm(loadu256(x[r]->qh));
        __m256i h[8];
        h[0] = Q5K_UP(qh, 0, 4), h[1] = Q5K_UP(qh, 1, 3), h[2] = Q5K_UP(qh, 2, 2), h[3] = Q5K_UP(qh, 3, 1);
        h[4] = _mm256_and_si256(qh, _mm256_set1_epi8(0x10)), h[5] = Q5K_DN(qh, 5, 1);
        h[6] = Q5K_DN(qh, 6, 2), h[7] = Q5K_DN(qh, 7, 3);
        for (int j = 0; j < 4; j++) {
            const __m256i q = lane_perm(loadu256(x[r]->qs + 32 * j));
            k->q[r][2 * j] = _mm256_or_si256(_mm256_and_si256(q, m4), h[2 * j]);
            k->q[r][2 * j + 1] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4), h[2 * j + 1]);
        }
        for (int j = 0; j < 8; j++) k->sc[r][j] = _mm256_set1_epi16(sc[j]);
        k->mn[r] = _mm256_cvtepu8_epi16(_mm_setr_epi8((char)mn[0], (char)mn[0], (char)mn[1], (char)mn[1], (char)mn[2],
                                                      (char)mn[2], (char)mn[3], (char)mn[3], (char)mn[4], (char)mn[4],
                                                      (char)mn[5], (char)mn[5], (char)mn[6], (char)mn[6], (char)mn[7],
                                                      (char)mn[7]));
    }
    k->d = h_rows(&x[0]->d, &x[1]->d, &x[2]->d, &x[3]->d);
    k->dmin = h_rows(&x[0]->dmin, &x[1]->dmin, &x[2]->dmin, &x[3]->dmin);
}

static inline void kx_q6_K(kx_t *k, const eli_block_q6_K *const x[GEMM_RM]) {
    const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(0x03);
    for (int r = 0; r < GEMM_RM; r++) {
        for (int h = 0; h < 2; h++) {
            const __m256i l0 = lane_perm(loadu256(x[r]->ql + 64 * h));
            const __m256i l1 = lane_perm(loadu256(x[r]->ql + 64 * h + 32));
            const __m256i qh = lane_perm(loadu256(x[r]->qh + 32 * h));
            __m256i *u = &k->q[r][4 * h];
            u[0] = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_slli_epi16(_mm256_and_si256(qh, m2), 4));
            u[1] = _mm256_or_si256(_mm256_and_si256(l1, m4),
                                   _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), m2), 4));
            u[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                                   _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), m2), 4));
            u[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                   _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), m2), 4));
        }
        for (int c = 0; c < 8; c++) {
            const uint32_t sc2 = (uint32_t)(uint16_t)(int16_t)x[r]->scales[2 * c] |
                                 ((uint32_t)(uint16_t)(int16_t)x[r]->scales[2 * c + 1] << 16);
            k->sc[r][c] = _mm256_set1_epi32((int)sc2);
        }
    }
    k->d = h_rows(&x[0]->d, &x[1]->d, &x[2]->d, &x[3]->d);
    k->dmin = _mm256_setzero_ps();
}

/* KMIN: Q4_K / Q5_K (mins against the bsums); KOFF: Q6_K (u - 32: maddubs(u, y) - maddubs(32, y)) */
#define DEF_GEMMK(NAME, XB, KX, KMIN, KOFF)                                                                      \
    static void gemm_##NAME(int64_t n, int nr, int nt, const void *vx, size_t bx, const void *vy, size_t by,    \
                            float *s, size_t bs) {                                                               \
        const int64_t nb = n / ELI_QK_K;                                                                         \
        const int np = (nt + 1) / 2;                                                                             \
        const XB *xr[GEMM_RM];                                                                                   \
        const eli_block_q8_K *yt[2 * GEMM_NP];                                                                   \
        for (int r = 0; r < GEMM_RM; r++) xr[r] = (const XB *)((const uint8_t *)vx + (size_t)(r < nr ? r : nr - 1) * bx); \
        for (int t = 0; t < 2 * np; t++)                                                                         \
            yt[t] = (const eli_block_q8_K *)((const uint8_t *)vy + (size_t)(t < nt ? t : nt - 1) * by);          \
        __m256 acc[2 * GEMM_NP][GEMM_RM]; /* the one-row kernel's acc, per token and row */                     \
        __m256 sumf[GEMM_NP];             /* its sumf, per pair lane */                                         \
        for (int p = 0; p < np; p++) {                                                                           \
            sumf[p] = _mm256_setzero_ps();                                                                       \
            for (int r = 0; r < GEMM_RM; r++) acc[2 * p][r] = acc[2 * p + 1][r] = _mm256_setzero_ps();           \
        }                                                                                                        \
        kx_t k;                                                                                                  \
        for (int64_t i = 0; i < nb; i++) {                                                                       \
            const XB *xi[GEMM_RM];                                                                               \
            for (int r = 0; r < GEMM_RM; r++) xi[r] = xr[r] + i;                                                 \
            KX(&k, xi);                                                                                          \
            for (int p = 0; p < np; p++) {                                                                       \
                const eli_block_q8_K *ya = yt[2 * p] + i, *yb = yt[2 * p + 1] + i;                               \
                __m256i aa[GEMM_RM], ab[GEMM_RM];                                                                \
                for (int r = 0; r < GEMM_RM; r++) aa[r] = ab[r] = _mm256_setzero_si256();                        \
                for (int j = 0; j < 8; j++) {                                                                    \
                    const __m256i qa = lane_perm(loadu256(ya->qs + 32 * j));                                     \
                    const __m256i qb = lane_perm(loadu256(yb->qs + 32 * j));                                     \
                    __m256i oa = _mm256_setzero_si256(), ob = oa;                                                \
                    if (KOFF) {                                                                                  \
                        oa = _mm256_maddubs_epi16(_mm256_set1_epi8(32), qa);                                     \
                        ob = _mm256_maddubs_epi16(_mm256_set1_epi8(32), qb);                                     \
                    }                                                                                            \
                    for (int r = 0; r < GEMM_RM; r++) {                                                          \
                        __m256i pa = _mm256_maddubs_epi16(k.q[r][j], qa);                                        \
                        __m256i pb = _mm256_maddubs_epi16(k.q[r][j], qb);                                        \
                        if (KOFF) pa = _mm256_sub_epi16(pa, oa), pb = _mm256_sub_epi16(pb, ob);                  \
                        aa[r] = _mm256_add_epi32(aa[r], _mm256_madd_epi16(pa, k.sc[r][j]));                      \
                        ab[r] = _mm256_add_epi32(ab[r], _mm256_madd_epi16(pb, k.sc[r][j]));                      \
                    }                                                                                            \
                }                                                                                                \
                const __m256 dy = f_toks(ya->d, yb->d);                                                          \
                float dd[8];                                                                                     \
                _mm256_storeu_ps(dd, _mm256_mul_ps(k.d, dy));                                                    \
                for (int r = 0; r < GEMM_RM; r++) {                                                              \
                    acc[2 * p][r] = _mm256_add_ps(acc[2 * p][r], _mm256_mul_ps(_mm256_set1_ps(dd[r]), _mm256_cvtepi32_ps(aa[r]))); \
                    acc[2 * p + 1][r] =                                                                          \
                        _mm256_add_ps(acc[2 * p + 1][r], _mm256_mul_ps(_mm256_set1_ps(dd[4 + r]), _mm256_cvtepi32_ps(ab[r]))); \
                }                                                                                                \
                if (KMIN) {                                                                                      \
                    const __m256i ba = loadu256(ya->bsums), bb = loadu256(yb->bsums);                            \
                    __m256i v[8];                                                                                \
                    for (int r = 0; r < GEMM_RM; r++) {                                                          \
                        v[r] = _mm256_madd_epi16(ba, k.mn[r]);                                                   \
                        v[4 + r] = _mm256_madd_epi16(bb, k.mn[r]);                                               \
                    }                                                                                            \
                    const __m256 sumi = _mm256_cvtepi32_ps(hsum8_epi32(v));                                      \
                    sumf[p] = _mm256_sub_ps(sumf[p], _mm256_mul_ps(_mm256_mul_ps(k.dmin, dy), sumi));            \
                }                                                                                                \
            }                                                                                                    \
        }                                                                                                        \
        for (int t = 0; t < nt; t++) {                                                                           \
            float sf[8];                                                                                         \
            _mm256_storeu_ps(sf, sumf[t / 2]);                                                                   \
            for (int r = 0; r < nr; r++) s[(size_t)t * bs + r] = lanes_total(sf[4 * (t % 2) + r], acc[t][r]);    \
        }                                                                                                        \
    }

DEF_GEMMK(q4_K, eli_block_q4_K, kx_q4_K, 1, 0)
DEF_GEMMK(q5_K, eli_block_q5_K, kx_q5_K, 1, 0)
DEF_GEMMK(q6_K, eli_block_q6_K, kx_q6_K, 0, 1)

/* ---------------------------------------------------------------------------------------------------
 * float formats: products rounded to float, accumulated in double (order differs from the reference)
 * ------------------------------------------------------------------------------------------------- */

static inline void acc_pd(__m256d *a0, __m256d *a1, __m256 p) {
    *a0 = _mm256_add_pd(*a0, _mm256_cvtps_pd(_mm256_castps256_ps128(p)));
    *a1 = _mm256_add_pd(*a1, _mm256_cvtps_pd(_mm256_extractf128_ps(p, 1)));
}

static inline double hsum_pd(__m256d a) {
    __m128d s = _mm_add_pd(_mm256_castpd256_pd128(a), _mm256_extractf128_pd(a, 1));
    s = _mm_add_sd(s, _mm_unpackhi_pd(s, s));
    return _mm_cvtsd_f64(s);
}

static inline __m256 load_bf16x8(const uint8_t *p) {
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}

#define DEF_FDOT(NAME, ESZ, LOAD8, LOAD1)                                                   \
    static float NAME(int64_t n, const void *vx, const void *vy) {                          \
        const uint8_t *px = vx, *py = vy;                                                   \
        __m256d a0 = _mm256_setzero_pd(), a1 = a0, a2 = a0, a3 = a0;                        \
        int64_t i = 0;                                                                      \
        for (; i + 16 <= n; i += 16) {                                                      \
            acc_pd(&a0, &a1, _mm256_mul_ps(LOAD8(px + ESZ * i), LOAD8(py + ESZ * i)));      \
            acc_pd(&a2, &a3, _mm256_mul_ps(LOAD8(px + ESZ * (i + 8)), LOAD8(py + ESZ * (i + 8)))); \
        }                                                                                   \
        for (; i + 8 <= n; i += 8) acc_pd(&a0, &a1, _mm256_mul_ps(LOAD8(px + ESZ * i), LOAD8(py + ESZ * i))); \
        double sum = hsum_pd(_mm256_add_pd(_mm256_add_pd(a0, a1), _mm256_add_pd(a2, a3)));  \
        for (; i < n; i++) sum += (double)(LOAD1(px + ESZ * i) * LOAD1(py + ESZ * i));      \
        return (float)sum;                                                                  \
    }

static inline float ld_f32(const uint8_t *p) {
    float f;
    memcpy(&f, p, 4);
    return f;
}
static inline float ld_bf16(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return eli_bf16_to_fp32(h);
}
#define LD8_F32(p) _mm256_loadu_ps((const float *)(p))
#define LD8_F16(p) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p)))

DEF_FDOT(vec_dot_f32, 4, LD8_F32, ld_f32)
DEF_FDOT(vec_dot_bf16, 2, load_bf16x8, ld_bf16)

/* F16 weights (whole small models are F16): float FMA accumulation instead of the reference's double
 * accumulation, which costs twice the work per element: a float reordering within the kernels.h bound
 * (normalised MSE <= 1e-7). Every F16 kernel (one row, several rows, the gemm tiles) performs exactly
 * this chain per (row, token): element i < n16 = n rounded down to 16 goes to accumulator (i / 8) % 2,
 * lane i % 8, in order of i; f16_finish does the same tail and reduction for all of them, so prefill,
 * decode and MTP verification agree bit for bit.
 * Two accumulators, not four: the loads (vcvtph2ps from memory) are what bounds these kernels, and with
 * two chains per (row, token) the 16 ymm registers hold tiles of 2 rows x 3 tokens, which load 10
 * vectors per 12 FMAs instead of the one-row kernel's 2 per FMA. The price is decode (one token, the
 * one-row kernel): nano at 0.90-0.93 ms per token against 0.84-0.88 with four accumulators (one thread,
 * CPU time), for 2.6 vs 3.3 ms per 4-token verify batch and +38% prefill (BENCHMARKS.md); the weights
 * stream from L3 there, and the 4-row kernel for one token was slower still (1.1-2.4 ms). */
static inline float f16_finish(__m256 a0, __m256 a1, int64_t i, int64_t n, const uint8_t *px, const uint8_t *py) {
    for (; i + 8 <= n; i += 8) a0 = _mm256_fmadd_ps(LD8_F16(px + 2 * i), LD8_F16(py + 2 * i), a0);
    const __m256 a = _mm256_add_ps(a0, a1);
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_movehdup_ps(h));
    double sum = _mm_cvtss_f32(h);
    for (; i < n; i++) sum += (double)(h2f(px + 2 * i) * h2f(py + 2 * i));
    return (float)sum;
}

/* s[t * bs + r] for a tile of R rows (bx bytes apart) x TT tokens (by bytes apart). R and TT are constants
 * at every call, so the loops unroll and the 2 * R * TT accumulators stay in registers (R * TT <= 6). */
#define F16_PREFETCH 4096
static inline __attribute__((always_inline)) void f16_tile(int R, int TT, int64_t n, const uint8_t *x, size_t bx,
                                                           const uint8_t *y, size_t by, float *s, size_t bs) {
    const int64_t n16 = n & ~(int64_t)15;
    __m256 a[6][2];
    for (int p = 0; p < R * TT; p++) a[p][0] = a[p][1] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n16; i += 16) {
        for (int l = 0; l < R; l += 2) _mm_prefetch((const char *)(x + F16_PREFETCH + 2 * R * i + 32 * l), _MM_HINT_T0);
        for (int j = 0; j < 2; j++) {
            __m256 w[4];
            for (int r = 0; r < R; r++) w[r] = LD8_F16(x + (size_t)r * bx + 2 * (i + 8 * j));
            for (int t = 0; t < TT; t++) {
                const __m256 v = LD8_F16(y + (size_t)t * by + 2 * (i + 8 * j));
                for (int r = 0; r < R; r++) a[r * TT + t][j] = _mm256_fmadd_ps(w[r], v, a[r * TT + t][j]);
            }
        }
    }
    for (int r = 0; r < R; r++)
        for (int t = 0; t < TT; t++)
            s[(size_t)t * bs + r] =
                f16_finish(a[r * TT + t][0], a[r * TT + t][1], n16, n, x + (size_t)r * bx, y + (size_t)t * by);
}

static float vec_dot_f16(int64_t n, const void *vx, const void *vy) {
    float s;
    f16_tile(1, 1, n, vx, 0, vy, 0, &s, 1);
    return s;
}

/* one token: 4-row tiles, then the row tail */
static void vec_dot_f16_nr(int64_t n, int nr, const void *vx, size_t bx, const void *vy, float *s) {
    const uint8_t *x = vx;
    int r = 0;
    for (; r + 4 <= nr; r += 4) f16_tile(4, 1, n, x + (size_t)r * bx, bx, vy, 0, s + r, 1);
    switch (nr - r) {
    case 3: f16_tile(3, 1, n, x + (size_t)r * bx, bx, vy, 0, s + r, 1); break;
    case 2: f16_tile(2, 1, n, x + (size_t)r * bx, bx, vy, 0, s + r, 1); break;
    case 1: f16_tile(1, 1, n, x + (size_t)r * bx, bx, vy, 0, s + r, 1); break;
    default: break;
    }
}

/* 2 rows x 3 tokens tiles; a token tail of 2 in 2 x 2 tiles (an MTP verify batch of 2 or 5 tokens would
 * otherwise read its weights once more per token), of 1 through the one-token kernel */
static void gemm_f16(int64_t n, int nr, int nt, const void *vx, size_t bx, const void *vy, size_t by, float *s,
                     size_t bs) {
    const uint8_t *x = vx, *y = vy;
    int t = 0;
    for (; t + 3 <= nt; t += 3) {
        const uint8_t *yt = y + (size_t)t * by;
        float *st = s + (size_t)t * bs;
        int r = 0;
        for (; r + 2 <= nr; r += 2) f16_tile(2, 3, n, x + (size_t)r * bx, bx, yt, by, st + r, bs);
        if (r < nr) f16_tile(1, 3, n, x + (size_t)r * bx, bx, yt, by, st + r, bs);
    }
    if (nt - t == 2) {
        const uint8_t *yt = y + (size_t)t * by;
        float *st = s + (size_t)t * bs;
        int r = 0;
        for (; r + 2 <= nr; r += 2) f16_tile(2, 2, n, x + (size_t)r * bx, bx, yt, by, st + r, bs);
        if (r < nr) f16_tile(1, 2, n, x + (size_t)r * bx, bx, yt, by, st + r, bs);
        t += 2;
    }
    if (t < nt) vec_dot_f16_nr(n, nr, vx, bx, y + (size_t)t * by, s + (size_t)t * bs);
}

/* ---------------------------------------------------------------------------------------------------
 * attention helpers (float accumulation, FMA)
 * ------------------------------------------------------------------------------------------------- */

/* 8 elements of a cache row, F16 or F32, as floats */
static inline __m256 ld8_row(int f16, const uint8_t *r, int64_t i) {
    return f16 ? LD8_F16(r + 2 * i) : _mm256_loadu_ps((const float *)r + i);
}

static inline float elem_row(int f16, const uint8_t *r, int64_t i) {
    return f16 ? _cvtsh_ss(((const eli_fp16 *)r)[i]) : ((const float *)r)[i];
}

/* Scores of C cells x GB heads: each K row is loaded (and converted) once for all the heads, and the
 * C * GB accumulators are independent FMA chains. */
static inline __attribute__((always_inline)) void qk_tile(int f16, int C, int GB, int64_t d, const uint8_t *r,
                                                          size_t rb, const float *q, float *s, size_t ss) {
    __m256 acc[2][4];
    for (int c = 0; c < C; c++)
        for (int g = 0; g < GB; g++) acc[c][g] = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= d; i += 8) {
        __m256 k[2];
        for (int c = 0; c < C; c++) k[c] = ld8_row(f16, r + (size_t)c * rb, i);
        for (int g = 0; g < GB; g++) {
            const __m256 qv = _mm256_loadu_ps(q + (size_t)g * d + i);
            for (int c = 0; c < C; c++) acc[c][g] = _mm256_fmadd_ps(k[c], qv, acc[c][g]);
        }
    }
    for (int c = 0; c < C; c++)
        for (int g = 0; g < GB; g++) {
            float v = hsum_ps(acc[c][g]);
            for (int64_t t = i; t < d; t++) v += elem_row(f16, r + (size_t)c * rb, t) * q[(size_t)g * d + t];
            s[(size_t)g * ss + c] = v;
        }
}

static inline __attribute__((always_inline)) void attn_qk(int f16, int64_t d, int nc, const void *rows, size_t rb,
                                                          int G, const float *q, float *s, size_t ss) {
    for (int g0 = 0; g0 < G; g0 += 4) {
        const int gb = G - g0 < 4 ? G - g0 : 4;
        const float *qg = q + (size_t)g0 * d;
        float *sg = s + (size_t)g0 * ss;
        int j = 0;
        for (; j + 2 <= nc; j += 2) {
            const uint8_t *r = (const uint8_t *)rows + (size_t)j * rb;
            switch (gb) {
            case 1: qk_tile(f16, 2, 1, d, r, rb, qg, sg + j, ss); break;
            case 2: qk_tile(f16, 2, 2, d, r, rb, qg, sg + j, ss); break;
            case 3: qk_tile(f16, 2, 3, d, r, rb, qg, sg + j, ss); break;
            default: qk_tile(f16, 2, 4, d, r, rb, qg, sg + j, ss); break;
            }
        }
        if (j < nc) {
            const uint8_t *r = (const uint8_t *)rows + (size_t)j * rb;
            switch (gb) {
            case 1: qk_tile(f16, 1, 1, d, r, rb, qg, sg + j, ss); break;
            case 2: qk_tile(f16, 1, 2, d, r, rb, qg, sg + j, ss); break;
            case 3: qk_tile(f16, 1, 3, d, r, rb, qg, sg + j, ss); break;
            default: qk_tile(f16, 1, 4, d, r, rb, qg, sg + j, ss); break;
            }
        }
    }
}

/* out[g][i0 .. i0 + 8W) += sum_j p[g][j] * row j, for GB heads: the outputs stay in registers over
 * all nc rows, each V slice is loaded once for the GB heads. */
static inline __attribute__((always_inline)) void pv_tile(int f16, int W, int GB, int64_t d, int64_t i0, int nc,
                                                          const uint8_t *rows, size_t rb, const float *p, size_t ss,
                                                          float *out) {
    __m256 acc[4][2];
    for (int g = 0; g < GB; g++)
        for (int w = 0; w < W; w++) acc[g][w] = _mm256_loadu_ps(out + (size_t)g * d + i0 + 8 * w);
    for (int j = 0; j < nc; j++) {
        const uint8_t *r = rows + (size_t)j * rb;
        __m256 v[2];
        for (int w = 0; w < W; w++) v[w] = ld8_row(f16, r, i0 + 8 * w);
        for (int g = 0; g < GB; g++) {
            const __m256 pg = _mm256_broadcast_ss(p + (size_t)g * ss + j);
            for (int w = 0; w < W; w++) acc[g][w] = _mm256_fmadd_ps(pg, v[w], acc[g][w]);
        }
    }
    for (int g = 0; g < GB; g++)
        for (int w = 0; w < W; w++) _mm256_storeu_ps(out + (size_t)g * d + i0 + 8 * w, acc[g][w]);
}

#define PV_TILES(W, GB_EXPR)                                                                                     \
    switch (GB_EXPR) {                                                                                           \
    case 1: pv_tile(f16, W, 1, d, i, nc, r, rb, pg, ss, og); break;                                              \
    case 2: pv_tile(f16, W, 2, d, i, nc, r, rb, pg, ss, og); break;                                              \
    case 3: pv_tile(f16, W, 3, d, i, nc, r, rb, pg, ss, og); break;                                              \
    default: pv_tile(f16, W, 4, d, i, nc, r, rb, pg, ss, og); break;                                             \
    }

static inline __attribute__((always_inline)) void attn_pv(int f16, int64_t d, int nc, const void *rows, size_t rb,
                                                          int G, const float *p, size_t ss, float *out) {
    const uint8_t *r = rows;
    for (int g0 = 0; g0 < G; g0 += 4) {
        const int gb = G - g0 < 4 ? G - g0 : 4;
        const float *pg = p + (size_t)g0 * ss;
        float *og = out + (size_t)g0 * d;
        int64_t i = 0;
        for (; i + 16 <= d; i += 16) PV_TILES(2, gb)
        for (; i + 8 <= d; i += 8) PV_TILES(1, gb)
        for (; i < d; i++)
            for (int j = 0; j < nc; j++)
                for (int g = 0; g < gb; g++)
                    og[(size_t)g * d + i] = fmaf(pg[(size_t)g * ss + j], elem_row(f16, r + (size_t)j * rb, i),
                                                 og[(size_t)g * d + i]);
    }
}

static void attn_qk_f32(int64_t d, int nc, const void *rows, size_t rb, int G, const float *q, float *s, size_t ss) {
    attn_qk(0, d, nc, rows, rb, G, q, s, ss);
}
static void attn_qk_f16(int64_t d, int nc, const void *rows, size_t rb, int G, const float *q, float *s, size_t ss) {
    attn_qk(1, d, nc, rows, rb, G, q, s, ss);
}
static void attn_pv_f32(int64_t d, int nc, const void *rows, size_t rb, int G, const float *p, size_t ss, float *out) {
    attn_pv(0, d, nc, rows, rb, G, p, ss, out);
}
static void attn_pv_f16(int64_t d, int nc, const void *rows, size_t rb, int G, const float *p, size_t ss, float *out) {
    attn_pv(1, d, nc, rows, rb, G, p, ss, out);
}

static void f16_to_f32(int64_t n, const eli_fp16 *x, float *y) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, LD8_F16(x + i));
    for (; i < n; i++) y[i] = _cvtsh_ss(x[i]);
}

static void scale_f32(int64_t n, float a, float *y) {
    const __m256 va = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(va, _mm256_loadu_ps(y + i)));
    for (; i < n; i++) y[i] *= a;
}

/* exp(y) for 8 floats, y clamped to [-87, 88] (the normal range): 2^n exp(r), n = round(y / ln2),
 * r = y - n ln2 in two parts (ln2 = hi + lo, hi exact in 15 bits) so |r| <= ln2/2, exp(r) by its Taylor
 * series to r^7 (the next term is under 1e-8 relative). */
static inline __m256 exp8(__m256 y) {
    y = _mm256_min_ps(_mm256_max_ps(y, _mm256_set1_ps(-87.0f)), _mm256_set1_ps(88.0f));
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(y, _mm256_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145751953125f), y);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.428606765330187e-06f), r);
    __m256 e = _mm256_set1_ps(1.0f / 5040.0f);
    e = _mm256_fmadd_ps(e, r, _mm256_set1_ps(1.0f / 720.0f));
    e = _mm256_fmadd_ps(e, r, _mm256_set1_ps(1.0f / 120.0f));
    e = _mm256_fmadd_ps(e, r, _mm256_set1_ps(1.0f / 24.0f));
    e = _mm256_fmadd_ps(e, r, _mm256_set1_ps(1.0f / 6.0f));
    e = _mm256_fmadd_ps(e, r, _mm256_set1_ps(0.5f));
    e = _mm256_fmadd_ps(e, r, _mm256_set1_ps(1.0f));
    e = _mm256_fmadd_ps(e, r, _mm256_set1_ps(1.0f));
    /* 2^n in two factors, as 2^88 itself is not a float */
    const __m256i ni = _mm256_cvtps_epi32(n), half = _mm256_srai_epi32(ni, 1);
    const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(half, _mm256_set1_epi32(127)), 23));
    const __m256 s2 =
        _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_sub_epi32(ni, half), _mm256_set1_epi32(127)), 23));
    return _mm256_mul_ps(_mm256_mul_ps(e, s1), s2);
}

/* tanh(x) for 8 floats: the odd Taylor series to x^13 below |x| = 0.4 (the next term is under 4e-9
 * relative there), else 1 - 2 / (exp(2|x|) + 1) with the sign put back, where the subtraction loses at most
 * a factor 1.7 of exp's ~1 ulp. |x| is clamped at 10, where tanh rounds to 1. */
static inline __m256 tanh8(__m256 x) {
    const __m256 sign = _mm256_and_ps(x, _mm256_set1_ps(-0.0f));
    const __m256 a = _mm256_min_ps(vabs(x), _mm256_set1_ps(10.0f));
    const __m256 z = _mm256_mul_ps(a, a);
    __m256 t = _mm256_set1_ps(21844.0f / 6081075.0f);
    t = _mm256_fmadd_ps(t, z, _mm256_set1_ps(-1382.0f / 155925.0f));
    t = _mm256_fmadd_ps(t, z, _mm256_set1_ps(62.0f / 2835.0f));
    t = _mm256_fmadd_ps(t, z, _mm256_set1_ps(-17.0f / 315.0f));
    t = _mm256_fmadd_ps(t, z, _mm256_set1_ps(2.0f / 15.0f));
    t = _mm256_fmadd_ps(t, z, _mm256_set1_ps(-1.0f / 3.0f));
    const __m256 small = _mm256_fmadd_ps(_mm256_mul_ps(t, z), a, a);
    const __m256 one = _mm256_set1_ps(1.0f);
    const __m256 e = exp8(_mm256_add_ps(a, a));
    const __m256 big = _mm256_sub_ps(one, _mm256_div_ps(_mm256_set1_ps(2.0f), _mm256_add_ps(e, one)));
    const __m256 res = _mm256_blendv_ps(big, small, _mm256_cmp_ps(a, _mm256_set1_ps(0.4f), _CMP_LT_OQ));
    return _mm256_or_ps(res, sign);
}

/* x[i] = exp(x[i] - m), returning their sum: the softmax numerators of a chunk of attention scores */
static float exp_sum_f32(int64_t n, float m, float *x) {
    const __m256 vm = _mm256_set1_ps(m);
    __m256 acc = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm));
        _mm256_storeu_ps(x + i, e);
        acc = _mm256_add_ps(acc, e);
    }
    float sum = hsum_ps(acc);
    if (i < n) { /* the tail through a padded vector, so every element sees the same function */
        float buf[8];
        for (int j = 0; j < 8; j++) buf[j] = i + j < n ? x[i + j] : m;
        _mm256_storeu_ps(buf, exp8(_mm256_sub_ps(_mm256_loadu_ps(buf), vm)));
        for (int j = 0; i + j < n; j++) x[i + j] = buf[j], sum += buf[j];
    }
    return sum;
}

static void softcap_f32(int64_t n, float c, float *x) {
    const __m256 vc = _mm256_set1_ps(c), inv = _mm256_set1_ps(1.0f / c);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(tanh8(_mm256_mul_ps(_mm256_loadu_ps(x + i), inv)), vc));
    if (i < n) { /* the tail through a padded vector, so every element sees the same function */
        float buf[8] = {0};
        memcpy(buf, x + i, sizeof(float) * (size_t)(n - i));
        _mm256_storeu_ps(buf, _mm256_mul_ps(tanh8(_mm256_mul_ps(_mm256_loadu_ps(buf), inv)), vc));
        memcpy(x + i, buf, sizeof(float) * (size_t)(n - i));
    }
}

/* ---------------------------------------------------------------------------------------------------
 * the table (data only: nothing here runs before kernels.c has checked CPUID)
 * ------------------------------------------------------------------------------------------------- */

const eli_kernels eli_kernels_avx2_table = {
    .name = "avx2",
    .vec_dot =
        {
            [ELI_TYPE_F32] = vec_dot_f32,
            [ELI_TYPE_F16] = vec_dot_f16,
            [ELI_TYPE_BF16] = vec_dot_bf16,
            [ELI_TYPE_Q4_0] = vec_dot_q4_0,
            [ELI_TYPE_Q4_1] = vec_dot_q4_1,
            [ELI_TYPE_Q5_0] = vec_dot_q5_0,
            [ELI_TYPE_Q5_1] = vec_dot_q5_1,
            [ELI_TYPE_Q8_0] = vec_dot_q8_0,
            [ELI_TYPE_Q4_K] = vec_dot_q4_K,
            [ELI_TYPE_Q5_K] = vec_dot_q5_K,
            [ELI_TYPE_Q6_K] = vec_dot_q6_K,
        },
    .vec_dot_nr =
        {
            [ELI_TYPE_F16] = vec_dot_f16_nr,
            [ELI_TYPE_Q4_0] = vec_dot_q4_0_nr,
            [ELI_TYPE_Q4_1] = vec_dot_q4_1_nr,
            [ELI_TYPE_Q5_0] = vec_dot_q5_0_nr,
            [ELI_TYPE_Q5_1] = vec_dot_q5_1_nr,
            [ELI_TYPE_Q8_0] = vec_dot_q8_0_nr,
            [ELI_TYPE_Q4_K] = vec_dot_q4_K_nr,
            [ELI_TYPE_Q5_K] = vec_dot_q5_K_nr,
            [ELI_TYPE_Q6_K] = vec_dot_q6_K_nr,
        },
    .nr =
        {
            [ELI_TYPE_F16] = ELI_KERNEL_MAX_NR,
            [ELI_TYPE_Q4_0] = 4,
            [ELI_TYPE_Q4_1] = 4,
            [ELI_TYPE_Q5_0] = 4,
            [ELI_TYPE_Q5_1] = 4,
            [ELI_TYPE_Q8_0] = 4,
            [ELI_TYPE_Q4_K] = 4,
            [ELI_TYPE_Q5_K] = 4,
            [ELI_TYPE_Q6_K] = 4,
        },
    .gemm =
        {
            [ELI_TYPE_F16] = gemm_f16,
            [ELI_TYPE_Q4_0] = gemm_q4_0,
            [ELI_TYPE_Q4_1] = gemm_q4_1,
            [ELI_TYPE_Q5_0] = gemm_q5_0,
            [ELI_TYPE_Q5_1] = gemm_q5_1,
            [ELI_TYPE_Q8_0] = gemm_q8_0,
            [ELI_TYPE_Q4_K] = gemm_q4_K,
            [ELI_TYPE_Q5_K] = gemm_q5_K,
            [ELI_TYPE_Q6_K] = gemm_q6_K,
        },
    .gemm_nr =
        {
            [ELI_TYPE_F16] = ELI_KERNEL_MAX_NR,
            [ELI_TYPE_Q4_0] = GEMM_RM,
            [ELI_TYPE_Q4_1] = GEMM_RM,
            [ELI_TYPE_Q5_0] = GEMM_RM,
            [ELI_TYPE_Q5_1] = GEMM_RM,
            [ELI_TYPE_Q8_0] = GEMM_RM,
            [ELI_TYPE_Q4_K] = GEMM_RM,
            [ELI_TYPE_Q5_K] = GEMM_RM,
            [ELI_TYPE_Q6_K] = GEMM_RM,
        },
    .quantize =
        {
            [ELI_TYPE_Q8_0] = quantize_q8_0,
            [ELI_TYPE_Q8_1] = quantize_q8_1,
            [ELI_TYPE_Q8_K] = quantize_q8_K,
            [ELI_TYPE_F16] = quantize_f16,
            [ELI_TYPE_BF16] = quantize_bf16,
        },
    .attn_qk = {[ELI_TYPE_F32] = attn_qk_f32, [ELI_TYPE_F16] = attn_qk_f16},
    .attn_pv = {[ELI_TYPE_F32] = attn_pv_f32, [ELI_TYPE_F16] = attn_pv_f16},
    .softcap_f32 = softcap_f32,
    .exp_sum_f32 = exp_sum_f32,
    .f16_to_f32 = f16_to_f32,
    .scale_f32 = scale_f32,
};

#else
/* Built without the AVX2 flags (non-x86 host or a compiler without them): no table. */
const eli_kernels eli_kernels_avx2_table = {.name = NULL};
#endif
