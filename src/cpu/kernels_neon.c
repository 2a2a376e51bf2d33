/* AArch64 Advanced SIMD (NEON) kernels, two tables:
 *  - "neon": plain ARMv8.0 NEON (every aarch64 CPU);
 *  - "neon-dotprod": the same with SDOT (vdotq_s32, ARMv8.2 dotprod) in the integer kernels that can use
 *    it. Those functions carry a target attribute, so the file needs no -march flag; kernels.c hands this
 *    table out only after eli_kernels_neon_has_dotprod() (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) says yes.
 * On any other architecture this file compiles to nothing (kernels.c does not reference it there).
 *
 * Bit-exactness with quants.c (kernels.h), as in kernels_avx2.c: the integer formats compute the same
 * integer sums as the scalar reference (in any order: integer addition is associative) and then perform
 * the same float operations in the same order:
 *  - Q4_0 / Q4_1 / Q5_0 / Q5_1 / Q8_0: 8 float lanes per row (quants.c, lanes8_fma), lane l taking the
 *    int32 sum of elements 4l..4l+3 of every block, one FMA per block with d = d_x * d_y, the lanes added
 *    in a fixed tree at the end; Q4_1 / Q5_1 keep their min terms in one more FMA chain. SDOT on the two
 *    16-byte halves of a block yields lanes 0-3 and 4-7 directly; plain NEON gets the same sums from
 *    vmull_s8 and pairwise adds. The 8 lanes live in two float32x4 (vfmaq with the broadcast d), so no
 *    kernel has a serial chain across blocks beyond the per-lane FMA;
 *  - Q4_K / Q5_K / Q6_K: 8 int32 lanes per super-block (quants.c, klanes_chunk), lane l taking
 *    elements 4l..4l+3 of every 32-element chunk times the sub-block scale (Q6_K: lanes 0-3 and 4-7 have
 *    the chunk's two 16-element sub-blocks). SDOT on the chunk's two 16-byte halves gives the lane sums
 *    directly; plain NEON gets them from vmull_s8 and three pairwise adds. The min lanes (Q4_K / Q5_K)
 *    and Q6_K's offset lanes come from the activation's bsums; then one vfmaq per super-block with d
 *    (and one vfmsq with dmin), the lanes8_total tree at the end.
 * The prefill microkernels (gemm_*, the 32-element formats) unpack each weight block once for a tile of
 * rows x tokens and keep these exact per-(row, token) operations.
 * fp16 <-> fp32 go through FCVTL / FCVTN (round to nearest even, subnormals kept: the Linux default
 * FPCR), which agree with eli_fp16_to_fp32 / eli_fp32_to_fp16 on every non-NaN value.
 * Float contraction is off (as in quants.c): a*b+c must not become an FMA in the exact paths; the fused
 * steps (the integer formats' lanes, the attention helpers) are written as explicit FMAs. */
#include "fp_exact.h"

#include "kernels.h"

#if defined(__aarch64__) && defined(__ARM_NEON)

#include <arm_neon.h>
#include <math.h>
#include <stddef.h>
#include <string.h>

#if defined(__linux__)
#include <sys/auxv.h>
#endif
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1UL << 20)
#endif

#include "neon_dotprod.h"

int eli_kernels_neon_has_dotprod(void);
int eli_kernels_neon_has_dotprod(void) {
#if defined(__linux__)
    return (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
#elif defined(__ARM_FEATURE_DOTPROD)
    return 1;
#else
    return 0;
#endif
}

/* ---------------------------------------------------------------------------------------------------
 * helpers
 * ------------------------------------------------------------------------------------------------- */

static inline float h2f(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, sizeof h);
    return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))), 0);
}

static inline eli_fp16 f2h(float f) {
    return vget_lane_u16(vreinterpret_u16_f16(vcvt_f16_f32(vdupq_n_f32(f))), 0);
}

static inline float ld_f32(const uint8_t *p) {
    float f;
    memcpy(&f, p, sizeof f);
    return f;
}

static inline int8x16_t s8(uint8x16_t v) { return vreinterpretq_s8_u8(v); }

/* byte j of m0 (m1) = 0xFF when bit j (16 + j) of the 32-bit little-endian word at p is set, else 0 */
static inline void bits32(const uint8_t *p, uint8x16_t *m0, uint8x16_t *m1) {
    static const uint8_t idx[32] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                    2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3};
    static const uint8_t bit[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    uint32_t w;
    memcpy(&w, p, sizeof w);
    const uint8x16_t b = vreinterpretq_u8_u32(vdupq_n_u32(w));
    const uint8x16_t bits = vld1q_u8(bit);
    *m0 = vtstq_u8(vqtbl1q_u8(b, vld1q_u8(idx)), bits);
    *m1 = vtstq_u8(vqtbl1q_u8(b, vld1q_u8(idx + 16)), bits);
}

/* ---------------------------------------------------------------------------------------------------
 * activation quantizers (same bytes as quants.c for finite input)
 * ------------------------------------------------------------------------------------------------- */

/* 32 floats times id, C roundf (half away from zero: FCVTAS, NaN -> 0), clamped to [-128, 127] */
static inline void round32_i8(const float32x4_t v[8], float id, int8x16_t *q0, int8x16_t *q1) {
    const float32x4_t vid = vdupq_n_f32(id);
    int16x8_t h[4];
    for (int j = 0; j < 4; j++)
        h[j] = vcombine_s16(vqmovn_s32(vcvtaq_s32_f32(vmulq_f32(v[2 * j], vid))),
                            vqmovn_s32(vcvtaq_s32_f32(vmulq_f32(v[2 * j + 1], vid))));
    *q0 = vcombine_s8(vqmovn_s16(h[0]), vqmovn_s16(h[1]));
    *q1 = vcombine_s8(vqmovn_s16(h[2]), vqmovn_s16(h[3]));
}

static inline float amax32(const float *x, float32x4_t v[8]) {
    float32x4_t mx = vdupq_n_f32(0.0f);
    for (int j = 0; j < 8; j++) {
        v[j] = vld1q_f32(x + 4 * j);
        mx = vmaxq_f32(mx, vabsq_f32(v[j]));
    }
    return vmaxvq_f32(mx);
}

static void quantize_q8_0(const float *x, void *dst, int64_t k) {
    const int64_t nb = k / ELI_QK8_0;
    uint8_t *out = dst;
    for (int64_t i = 0; i < nb; i++, x += 32) {
        float32x4_t v[8];
        const float amax = amax32(x, v);
        const float d = amax / ((1 << 7) - 1);
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        eli_block_q8_0 b;
        b.d = f2h(d);
        int8x16_t q0, q1;
        round32_i8(v, id, &q0, &q1);
        vst1q_s8(b.qs, q0);
        vst1q_s8(b.qs + 16, q1);
        memcpy(out + i * sizeof b, &b, sizeof b);
    }
}

static void quantize_q8_1(const float *x, void *dst, int64_t k) {
    const int64_t nb = k / ELI_QK8_1;
    uint8_t *out = dst;
    for (int64_t i = 0; i < nb; i++, x += 32) {
        float32x4_t v[8];
        const float amax = amax32(x, v);
        const float d = amax / ((1 << 7) - 1);
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        eli_block_q8_1 b;
        int8x16_t q0, q1;
        round32_i8(v, id, &q0, &q1);
        const int sum = (int)vaddlvq_s8(q0) + (int)vaddlvq_s8(q1);
        b.d = f2h(d);
        b.s = f2h((float)sum * d);
        vst1q_s8(b.qs, q0);
        vst1q_s8(b.qs + 16, q1);
        memcpy(out + i * sizeof b, &b, sizeof b);
    }
}

/* ggml's nearest_int (magic-number rounding), lane-wise, bit for bit */
static inline int32x4_t nearest_int4(float32x4_t v) {
    const float32x4_t t = vaddq_f32(v, vdupq_n_f32(12582912.f));
    return vsubq_s32(vandq_s32(vreinterpretq_s32_f32(t), vdupq_n_s32(0x007fffff)), vdupq_n_s32(0x00400000));
}

static void quantize_q8_K(const float *x, void *dst, int64_t k) {
    const int64_t nb = k / ELI_QK_K;
    uint8_t *out = dst;
    for (int64_t i = 0; i < nb; i++, x += ELI_QK_K) {
        eli_block_q8_K b;
        float32x4_t mx = vdupq_n_f32(0.0f);
        for (int j = 0; j < ELI_QK_K; j += 4) mx = vmaxnmq_f32(mx, vabsq_f32(vld1q_f32(x + j))); /* NaN skipped */
        const float amax = vmaxnmvq_f32(mx);
        if (amax == 0.0f) {
            memset(&b, 0, sizeof b);
            memcpy(out + i * sizeof b, &b, sizeof b);
            continue;
        }
        /* the first element of largest magnitude */
        float max = 0;
        for (int j = 0; j < ELI_QK_K; j++) {
            if (__builtin_fabsf(x[j]) == amax) {
                max = x[j];
                break;
            }
        }
        const float iscale = -127.f / max;
        const float32x4_t vis = vdupq_n_f32(iscale);
        const int32x4_t lo = vdupq_n_s32(-128), hi = vdupq_n_s32(127);
        for (int j = 0; j < ELI_QK_K; j += 16) {
            int16x4_t h[4];
            for (int u = 0; u < 4; u++) {
                const int32x4_t n = nearest_int4(vmulq_f32(vis, vld1q_f32(x + j + 4 * u)));
                h[u] = vmovn_s32(vmaxq_s32(lo, vminq_s32(hi, n)));
            }
            const int8x16_t q = vcombine_s8(vmovn_s16(vcombine_s16(h[0], h[1])), vmovn_s16(vcombine_s16(h[2], h[3])));
            vst1q_s8(b.qs + j, q);
            b.bsums[j / 16] = (int16_t)vaddlvq_s8(q);
        }
        b.d = 1 / iscale;
        memcpy(out + i * sizeof b, &b, sizeof b);
    }
}

static void quantize_f16(const float *x, void *dst, int64_t n) {
    uint8_t *p = dst;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1_u8(p + 2 * i, vreinterpret_u8_f16(vcvt_f16_f32(vld1q_f32(x + i))));
    for (; i < n; i++) {
        const eli_fp16 h = f2h(x[i]);
        memcpy(p + 2 * i, &h, 2);
    }
}

static void quantize_bf16(const float *x, void *dst, int64_t n) {
    uint8_t *p = dst;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const uint32x4_t u = vreinterpretq_u32_f32(vld1q_f32(x + i));
        const uint32x4_t odd = vandq_u32(vshrq_n_u32(u, 16), vdupq_n_u32(1));
        const uint32x4_t r = vshrq_n_u32(vaddq_u32(vaddq_u32(u, vdupq_n_u32(0x7fff)), odd), 16);
        const uint32x4_t nan = vcgtq_u32(vandq_u32(u, vdupq_n_u32(0x7fffffff)), vdupq_n_u32(0x7f800000));
        const uint32x4_t qn = vorrq_u32(vshrq_n_u32(u, 16), vdupq_n_u32(0x40));
        vst1_u8(p + 2 * i, vreinterpret_u8_u16(vmovn_u32(vbslq_u32(nan, qn, r))));
    }
    for (; i < n; i++) {
        const eli_bf16 h = eli_fp32_to_bf16(x[i]);
        memcpy(p + 2 * i, &h, 2);
    }
}

/* ---------------------------------------------------------------------------------------------------
 * 32-element block formats: per (row, activation) pair the reference's 8 float lanes (quants.c,
 * lanes8_fma) in two float32x4, lo = lanes 0-3 (elements 0..15), hi = lanes 4-7 (elements 16..31); each
 * block adds its int32 lane sums, converted, times d = d_x * d_y (the reference's rounded float product)
 * with one vfmaq; Q4_1 / Q5_1 keep their min terms m_x * s_y in one more FMA chain, in block order.
 * ------------------------------------------------------------------------------------------------- */

/* unpack_*: the 32 weights of one block (at p) as two int8x16 (elements 0..15, 16..31) */
static inline void nibbles(const uint8_t *qs, int8x16_t *x0, int8x16_t *x1) {
    const uint8x16_t v = vld1q_u8(qs);
    *x0 = s8(vandq_u8(v, vdupq_n_u8(0x0F)));
    *x1 = s8(vshrq_n_u8(v, 4));
}
static inline void unpack_q4_0(const uint8_t *p, int8x16_t *x0, int8x16_t *x1) {
    const uint8x16_t v = vld1q_u8(p + offsetof(eli_block_q4_0, qs));
    *x0 = s8(vsubq_u8(vandq_u8(v, vdupq_n_u8(0x0F)), vdupq_n_u8(8)));
    *x1 = s8(vsubq_u8(vshrq_n_u8(v, 4), vdupq_n_u8(8)));
}
/* Q4_0 as the unsigned nibbles u = q + 8, for the kernels that subtract 8 * y on the activation side */
static inline void unpack_q4_0u(const uint8_t *p, int8x16_t *x0, int8x16_t *x1) {
    nibbles(p + offsetof(eli_block_q4_0, qs), x0, x1);
}
static inline void unpack_q8_0(const uint8_t *p, int8x16_t *x0, int8x16_t *x1) {
    *x0 = vld1q_s8((const int8_t *)(p + offsetof(eli_block_q8_0, qs)));
    *x1 = vld1q_s8((const int8_t *)(p + offsetof(eli_block_q8_0, qs) + 16));
}
static inline void unpack_q4_1(const uint8_t *p, int8x16_t *x0, int8x16_t *x1) {
    nibbles(p + offsetof(eli_block_q4_1, qs), x0, x1);
}
/* Q5_0: (nibble | bit4 << 4) - 16 = nibble when bit4 is set, else nibble | 0xF0 as int8 */
static inline void unpack_q5_0(const uint8_t *p, int8x16_t *x0, int8x16_t *x1) {
    uint8x16_t m0, m1;
    bits32(p + offsetof(eli_block_q5_0, qh), &m0, &m1);
    const uint8x16_t v = vld1q_u8(p + offsetof(eli_block_q5_0, qs));
    const uint8x16_t f0 = vdupq_n_u8(0xF0);
    *x0 = s8(vorrq_u8(vandq_u8(v, vdupq_n_u8(0x0F)), vbicq_u8(f0, m0)));
    *x1 = s8(vorrq_u8(vshrq_n_u8(v, 4), vbicq_u8(f0, m1)));
}
static inline void unpack_q5_1(const uint8_t *p, int8x16_t *x0, int8x16_t *x1) {
    uint8x16_t m0, m1;
    bits32(p + offsetof(eli_block_q5_1, qh), &m0, &m1);
    const uint8x16_t v = vld1q_u8(p + offsetof(eli_block_q5_1, qs));
    const uint8x16_t b4 = vdupq_n_u8(0x10);
    *x0 = s8(vorrq_u8(vandq_u8(v, vdupq_n_u8(0x0F)), vandq_u8(m0, b4)));
    *x1 = s8(vorrq_u8(vshrq_n_u8(v, 4), vandq_u8(m1, b4)));
}

/* The reference's lane sums of one 16-byte half: int32 lane l = init lane l + sum of x[4l + k] * y[4l + k]
 * (k < 4). SDOT adds exactly those 4 bytes into lane l. Plain NEON: vmull_s8 gives the 16 products as
 * int16 and two pairwise adds bring 4 consecutive ones into one int32 lane; l4_narrow adds the pairs in
 * int16, exact for the 4- and 5-bit formats (|x| <= 31, so a pair is below 2 * 31 * 128), while Q8_0
 * pairs can reach 2 * 128 * 128 and are widened first (l4_wide). The plain kernels pass no offset (init
 * is zero and ignored). */
static inline int32x4_t l4_narrow(int8x16_t x, int8x16_t y) {
    return vpaddlq_s16(vpaddq_s16(vmull_s8(vget_low_s8(x), vget_low_s8(y)), vmull_high_s8(x, y)));
}
static inline int32x4_t l4_wide(int8x16_t x, int8x16_t y) {
    return vpaddq_s32(vpaddlq_s16(vmull_s8(vget_low_s8(x), vget_low_s8(y))), vpaddlq_s16(vmull_high_s8(x, y)));
}
#define L4_NARROW(init, x, y) l4_narrow(x, y)
#define L4_WIDE(init, x, y) l4_wide(x, y)
#define L4_SDOT(init, x, y) sdot(init, x, y)

/* The init of the activation half q (once per activation block, for all rows). In the dotprod row
 * kernels Q4_0 goes in as unsigned nibbles u and sdot(-8 * sum4(y), u, y) = sum4((u - 8) * y): the
 * per-row subtraction of 8 moves to the activation side. */
#define YOFF_NONE(q) vdupq_n_s32(0)
#define YOFF_8(q) sdot(vdupq_n_s32(0), vdupq_n_s8(-8), q)

/* lane k of v set to the 2 bytes at p; the lane of vset_lane is an immediate, the switch folds away
 * once the caller's loop over k is unrolled */
static inline uint16x4_t set_h(uint16x4_t v, const uint8_t *p, int k) {
    uint16_t h;
    memcpy(&h, p, sizeof h);
    switch (k) {
    case 0: return vset_lane_u16(h, v, 0);
    case 1: return vset_lane_u16(h, v, 1);
    case 2: return vset_lane_u16(h, v, 2);
    default: return vset_lane_u16(h, v, 3);
    }
}

/* lane k < cnt (<= 4): the fp16 at p[k] + off, as float; the other lanes 0 */
static inline float32x4_t h4_gather(const uint8_t *const p[], size_t off, int cnt) {
    uint16x4_t v = vdup_n_u16(0);
    for (int k = 0; k < cnt; k++) v = set_h(v, p[k] + off, k);
    return vcvt_f32_f16(vreinterpret_f16_u16(v));
}

/* acc + v * d[k], fused (as fmaf); k folds to a constant as in set_h */
static inline float32x4_t fma_lane(float32x4_t acc, float32x4_t v, float32x4_t d, int k) {
    switch (k) {
    case 0: return vfmaq_laneq_f32(acc, v, d, 0);
    case 1: return vfmaq_laneq_f32(acc, v, d, 1);
    case 2: return vfmaq_laneq_f32(acc, v, d, 2);
    default: return vfmaq_laneq_f32(acc, v, d, 3);
    }
}

/* the reference's tree ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)) */
static inline float lanes8_total(float32x4_t lo, float32x4_t hi) {
    const float32x4_t t = vaddq_f32(lo, hi);                           /* t_k = l_k + l_(k+4) */
    const float32x2_t u = vadd_f32(vget_low_f32(t), vget_high_f32(t)); /* t0 + t2, t1 + t3 */
    return vget_lane_f32(u, 0) + vget_lane_f32(u, 1);
}

/* NAME_nr / NAME: UNPACK the weight block, L4 the lane sums, YOFF the activation-side init; HAS_MIN:
 * Q4_1 / Q5_1, whose blocks carry m after d (and the Q8_1 activation s after d). rows_NAME does up to 4
 * rows with the activation block loaded (and offset) once for all of them, their 4 scales gathered into
 * one vector (lane r: row r), and the min terms of the 4 rows in the lanes of one more vector. */
#define DEF_Q32(NAME, ATTR, XB, YB, UNPACK, L4, YOFF, HAS_MIN)                                                  \
    static inline __attribute__((always_inline)) ATTR void rows_##NAME(int64_t n, const int nr, const void *vx,   \
                                                                       size_t bx, const void *vy, float *s) {    \
        const int64_t nb = n / 32;                                                                               \
        const uint8_t *xr[4];                                                                                    \
        float32x4_t lo[4], hi[4];                                                                                \
        float32x4_t summ = vdupq_n_f32(0.0f); /* lane r: row r's min terms */                                    \
        for (int r = 0; r < nr; r++) {                                                                           \
            xr[r] = (const uint8_t *)vx + (size_t)r * bx;                                                        \
            lo[r] = hi[r] = vdupq_n_f32(0.0f);                                                                   \
        }                                                                                                        \
        for (int64_t ib = 0; ib < nb; ib++) {                                                                    \
            const uint8_t *yb = (const uint8_t *)vy + (size_t)ib * sizeof(YB);                                   \
            const int8x16_t y0 = vld1q_s8((const int8_t *)(yb + offsetof(YB, qs)));                              \
            const int8x16_t y1 = vld1q_s8((const int8_t *)(yb + offsetof(YB, qs) + 16));                         \
            const int32x4_t o0 = YOFF(y0), o1 = YOFF(y1);                                                        \
            (void)o0, (void)o1;                                                                                  \
            const size_t ox = (size_t)ib * sizeof(XB);                                                           \
            const float32x4_t d = vmulq_n_f32(h4_gather(xr, ox, nr), h2f(yb));                                   \
            for (int r = 0; r < nr; r++) {                                                                       \
                int8x16_t x0, x1;                                                                                \
                UNPACK(xr[r] + ox, &x0, &x1);                                                                    \
                lo[r] = fma_lane(lo[r], vcvtq_f32_s32(L4(o0, x0, y0)), d, r);                                    \
                hi[r] = fma_lane(hi[r], vcvtq_f32_s32(L4(o1, x1, y1)), d, r);                                    \
            }                                                                                                    \
            if (HAS_MIN) summ = vfmaq_n_f32(summ, h4_gather(xr, ox + 2, nr), h2f(yb + 2));                       \
        }                                                                                                        \
        float sm[4];                                                                                             \
        vst1q_f32(sm, summ);                                                                                     \
        for (int r = 0; r < nr; r++) s[r] = HAS_MIN ? lanes8_total(lo[r], hi[r]) + sm[r] : lanes8_total(lo[r], hi[r]); \
    }                                                                                                            \
    /* one specialisation per row count keeps the accumulators in registers */                                  \
    static ATTR void vec_dot_##NAME##_nr(int64_t n, int nr, const void *vx, size_t bx, const void *vy, float *s) { \
        for (int r0 = 0; r0 < nr; r0 += 4) {                                                                     \
            const void *x = (const uint8_t *)vx + (size_t)r0 * bx;                                               \
            switch (nr - r0) {                                                                                   \
            case 1: rows_##NAME(n, 1, x, bx, vy, s + r0); break;                                                 \
            case 2: rows_##NAME(n, 2, x, bx, vy, s + r0); break;                                                 \
            case 3: rows_##NAME(n, 3, x, bx, vy, s + r0); break;                                                 \
            default: rows_##NAME(n, 4, x, bx, vy, s + r0); break;                                                \
            }                                                                                                    \
        }                                                                                                        \
    }                                                                                                            \
    static ATTR float vec_dot_##NAME(int64_t n, const void *vx, const void *vy) {                                \
        float s;                                                                                                 \
        rows_##NAME(n, 1, vx, 0, vy, &s);                                                                        \
        return s;                                                                                                \
    }

/* The prefill microkernel: tiles of G32_RM rows x G32_NT tokens, one lo / hi pair per (row, token) doing
 * exactly the row kernel's operations, so every weight block is unpacked once for G32_NT tokens and every
 * activation block loaded once for G32_RM rows. The scales of a block come as one vector per row (lane t:
 * d_x(r) * d_y(t)), the min terms as one vector per row (lane t: token t). A partial tile repeats its
 * last row / token (computed, not stored). No activation-side offset here: it would cost 2 SDOTs per
 * token and block against 2 byte subtractions per row and block, shared by G32_NT tokens. */
#define G32_RM 2
#define G32_NT 4
_Static_assert(G32_NT == 4, "DEF_GEMM32 keeps one token per float lane");

#define DEF_GEMM32(NAME, ATTR, XB, YB, UNPACK, L4, HAS_MIN)                                                     \
    static ATTR void gemm_##NAME(int64_t n, int nr, int nt, const void *vx, size_t bx, const void *vy, size_t by, \
                                 float *s, size_t bs) {                                                          \
        const int64_t nb = n / 32;                                                                               \
        const int32x4_t z = vdupq_n_s32(0);                                                                      \
        (void)z;                                                                                                 \
        for (int r0 = 0; r0 < nr; r0 += G32_RM)                                                                  \
            for (int t0 = 0; t0 < nt; t0 += G32_NT) {                                                            \
                const uint8_t *xr[G32_RM], *yt[G32_NT];                                                          \
                for (int r = 0; r < G32_RM; r++)                                                                 \
                    xr[r] = (const uint8_t *)vx + (size_t)(r0 + r < nr ? r0 + r : nr - 1) * bx;                  \
                for (int t = 0; t < G32_NT; t++)                                                                 \
                    yt[t] = (const uint8_t *)vy + (size_t)(t0 + t < nt ? t0 + t : nt - 1) * by;                  \
                float32x4_t lo[G32_RM][G32_NT], hi[G32_RM][G32_NT], summ[G32_RM];                                \
                for (int r = 0; r < G32_RM; r++) {                                                               \
                    summ[r] = vdupq_n_f32(0.0f);                                                                 \
                    for (int t = 0; t < G32_NT; t++) lo[r][t] = hi[r][t] = vdupq_n_f32(0.0f);                    \
                }                                                                                                \
                for (int64_t ib = 0; ib < nb; ib++) {                                                            \
                    const size_t ox = (size_t)ib * sizeof(XB), oy = (size_t)ib * sizeof(YB);                     \
                    const float32x4_t dy = h4_gather(yt, oy, G32_NT);                                            \
                    int8x16_t x0[G32_RM], x1[G32_RM];                                                            \
                    float32x4_t d[G32_RM];                                                                       \
                    for (int r = 0; r < G32_RM; r++) {                                                           \
                        UNPACK(xr[r] + ox, &x0[r], &x1[r]);                                                      \
                        d[r] = vmulq_n_f32(dy, h2f(xr[r] + ox));                                                 \
                    }                                                                                            \
                    for (int t = 0; t < G32_NT; t++) {                                                           \
                        const int8x16_t y0 = vld1q_s8((const int8_t *)(yt[t] + oy + offsetof(YB, qs)));          \
                        const int8x16_t y1 = vld1q_s8((const int8_t *)(yt[t] + oy + offsetof(YB, qs) + 16));     \
                        for (int r = 0; r < G32_RM; r++) {                                                       \
                            lo[r][t] = fma_lane(lo[r][t], vcvtq_f32_s32(L4(z, x0[r], y0)), d[r], t);             \
                            hi[r][t] = fma_lane(hi[r][t], vcvtq_f32_s32(L4(z, x1[r], y1)), d[r], t);             \
                        }                                                                                        \
                    }                                                                                            \
                    if (HAS_MIN) {                                                                               \
                        const float32x4_t sy = h4_gather(yt, oy + 2, G32_NT);                                    \
                        for (int r = 0; r < G32_RM; r++) summ[r] = vfmaq_n_f32(summ[r], sy, h2f(xr[r] + ox + 2)); \
                    }                                                                                            \
                }                                                                                                \
                for (int r = 0; r < G32_RM && r0 + r < nr; r++) {                                                \
                    float sm[G32_NT];                                                                            \
                    vst1q_f32(sm, summ[r]);                                                                      \
                    for (int t = 0; t < G32_NT && t0 + t < nt; t++) {                                            \
                        const float v = lanes8_total(lo[r][t], hi[r][t]);                                        \
                        s[(size_t)(t0 + t) * bs + r0 + r] = HAS_MIN ? v + sm[t] : v;                             \
                    }                                                                                            \
                }                                                                                                \
            }                                                                                                    \
    }

#define NOATTR
DEF_Q32(q4_0, NOATTR, eli_block_q4_0, eli_block_q8_0, unpack_q4_0, L4_NARROW, YOFF_NONE, 0)
DEF_Q32(q8_0, NOATTR, eli_block_q8_0, eli_block_q8_0, unpack_q8_0, L4_WIDE, YOFF_NONE, 0)
DEF_Q32(q5_0, NOATTR, eli_block_q5_0, eli_block_q8_0, unpack_q5_0, L4_NARROW, YOFF_NONE, 0)
DEF_Q32(q4_1, NOATTR, eli_block_q4_1, eli_block_q8_1, unpack_q4_1, L4_NARROW, YOFF_NONE, 1)
DEF_Q32(q5_1, NOATTR, eli_block_q5_1, eli_block_q8_1, unpack_q5_1, L4_NARROW, YOFF_NONE, 1)
DEF_Q32(q4_0_dp, DOTPROD, eli_block_q4_0, eli_block_q8_0, unpack_q4_0u, L4_SDOT, YOFF_8, 0)
DEF_Q32(q8_0_dp, DOTPROD, eli_block_q8_0, eli_block_q8_0, unpack_q8_0, L4_SDOT, YOFF_NONE, 0)
DEF_Q32(q5_0_dp, DOTPROD, eli_block_q5_0, eli_block_q8_0, unpack_q5_0, L4_SDOT, YOFF_NONE, 0)
DEF_Q32(q4_1_dp, DOTPROD, eli_block_q4_1, eli_block_q8_1, unpack_q4_1, L4_SDOT, YOFF_NONE, 1)
DEF_Q32(q5_1_dp, DOTPROD, eli_block_q5_1, eli_block_q8_1, unpack_q5_1, L4_SDOT, YOFF_NONE, 1)

DEF_GEMM32(q4_0, NOATTR, eli_block_q4_0, eli_block_q8_0, unpack_q4_0, L4_NARROW, 0)
DEF_GEMM32(q8_0, NOATTR, eli_block_q8_0, eli_block_q8_0, unpack_q8_0, L4_WIDE, 0)
DEF_GEMM32(q5_0, NOATTR, eli_block_q5_0, eli_block_q8_0, unpack_q5_0, L4_NARROW, 0)
DEF_GEMM32(q4_1, NOATTR, eli_block_q4_1, eli_block_q8_1, unpack_q4_1, L4_NARROW, 1)
DEF_GEMM32(q5_1, NOATTR, eli_block_q5_1, eli_block_q8_1, unpack_q5_1, L4_NARROW, 1)
DEF_GEMM32(q4_0_dp, DOTPROD, eli_block_q4_0, eli_block_q8_0, unpack_q4_0, L4_SDOT, 0)
DEF_GEMM32(q8_0_dp, DOTPROD, eli_block_q8_0, eli_block_q8_0, unpack_q8_0, L4_SDOT, 0)
DEF_GEMM32(q5_0_dp, DOTPROD, eli_block_q5_0, eli_block_q8_0, unpack_q5_0, L4_SDOT, 0)
DEF_GEMM32(q4_1_dp, DOTPROD, eli_block_q4_1, eli_block_q8_1, unpack_q4_1, L4_SDOT, 1)
DEF_GEMM32(q5_1_dp, DOTPROD, eli_block_q5_1, eli_block_q8_1, unpack_q5_1, L4_SDOT, 1)

/* ---------------------------------------------------------------------------------------------------
 * K-quants: 8 int32 lanes per super-block, lane l = elements 4l..4l+3 of every 32-element chunk
 * (quants.c, klanes_chunk), then one FMA per super-block (and one for the min lanes)
 * ------------------------------------------------------------------------------------------------- */

#define Q8K_QS offsetof(eli_block_q8_K, qs)
#define Q8K_BSUMS offsetof(eli_block_q8_K, bsums)

/* Q4_K / Q5_K: the 12 bytes of 6-bit scales and mins. Bytes 0..3 hold sc0..3 (low 6 bits; the top 2
 * are bits 4..5 of sc4..7), bytes 4..7 m0..3 (likewise for m4..7), bytes 8..11 the low nibbles of
 * sc4..7 and the high nibbles of m4..7: two 64-bit words do all 16 at once. */
static inline void k4_scales(const uint8_t *q, uint8_t sc[8], uint8x8_t *mn) {
    uint64_t a;
    uint32_t w;
    memcpy(&a, q, 8);
    memcpy(&w, q + 8, 4);
    const uint64_t b = (uint64_t)w | ((uint64_t)(w >> 4) << 32);
    const uint64_t lo = a & 0x3f3f3f3f3f3f3f3fULL;                                          /* sc0..3, m0..3 */
    const uint64_t hi = (b & 0x0f0f0f0f0f0f0f0fULL) | ((a >> 2) & 0x3030303030303030ULL); /* sc4..7, m4..7 */
    const uint64_t s = (lo & 0xffffffffULL) | (hi << 32);
    memcpy(sc, &s, 8);
    *mn = vcreate_u8((lo >> 32) | (hi & 0xffffffff00000000ULL));
}

/* the 8 min lanes: lane l = m_l * (bsums[2l] + bsums[2l+1]) (pair sums |.| <= 2 * 16 * 128, int16) */
static inline void k4_min_lanes(const uint8_t *bsums, uint8x8_t mn, int32x4_t *m0, int32x4_t *m1) {
    const int16x8_t b = vpaddq_s16(vreinterpretq_s16_u8(vld1q_u8(bsums)), vreinterpretq_s16_u8(vld1q_u8(bsums + 16)));
    const int16x8_t m = vreinterpretq_s16_u16(vmovl_u8(mn));
    *m0 = vmull_s16(vget_low_s16(b), vget_low_s16(m));
    *m1 = vmull_high_s16(b, m);
}

/* Q6_K: the start of the lanes, -32 * (sc[2l] bsums[2l] + sc[2l+1] bsums[2l+1]) */
static inline void k6_offset_lanes(const int8_t *scales, const uint8_t *bsums, int32x4_t *l0, int32x4_t *l1) {
    const int8x16_t sc8 = vld1q_s8(scales);
    const int16x8_t s0 = vmovl_s8(vget_low_s8(sc8)), s1 = vmovl_high_s8(sc8);
    const int16x8_t b0 = vreinterpretq_s16_u8(vld1q_u8(bsums)), b1 = vreinterpretq_s16_u8(vld1q_u8(bsums + 16));
    const int32x4_t p0 = vpaddq_s32(vmull_s16(vget_low_s16(b0), vget_low_s16(s0)), vmull_high_s16(b0, s0));
    const int32x4_t p1 = vpaddq_s32(vmull_s16(vget_low_s16(b1), vget_low_s16(s1)), vmull_high_s16(b1, s1));
    *l0 = vmulq_n_s32(p0, -32);
    *l1 = vmulq_n_s32(p1, -32);
}

/* One 32-element chunk (a0 / y0: elements 0..15, a1 / y1: 16..31; a unsigned, at most 63):
 * l0 (lanes 0..3) += sc0 * lane sums, l1 (lanes 4..7) += sc1 * lane sums. Plain NEON: vmull_s8 and
 * three pairwise adds give the 8 four-element sums in int16 (|sum| <= 4 * 63 * 128, no overflow); the
 * dotprod table takes them from SDOT on each 16-byte half. */
static inline void kchunk_plain(int32x4_t *l0, int32x4_t *l1, uint8x16_t a0, uint8x16_t a1, const int8_t *y,
                                int16_t sc0, int16_t sc1) {
    const int8x16_t x0 = s8(a0), x1 = s8(a1), y0 = vld1q_s8(y), y1 = vld1q_s8(y + 16);
    const int16x8_t p0 = vpaddq_s16(vmull_s8(vget_low_s8(x0), vget_low_s8(y0)), vmull_high_s8(x0, y0));
    const int16x8_t p1 = vpaddq_s16(vmull_s8(vget_low_s8(x1), vget_low_s8(y1)), vmull_high_s8(x1, y1));
    const int16x8_t q = vpaddq_s16(p0, p1);
    *l0 = vmlal_n_s16(*l0, vget_low_s16(q), sc0);
    *l1 = vmlal_high_n_s16(*l1, q, sc1);
}
static inline DOTPROD void kchunk_sdot(int32x4_t *l0, int32x4_t *l1, uint8x16_t a0, uint8x16_t a1, const int8_t *y,
                                       int16_t sc0, int16_t sc1) {
    const int32x4_t z = vdupq_n_s32(0);
    *l0 = vmlaq_n_s32(*l0, sdot(z, s8(a0), vld1q_s8(y)), sc0);
    *l1 = vmlaq_n_s32(*l1, sdot(z, s8(a1), vld1q_s8(y + 16)), sc1);
}

/* Q4_K / Q5_K share everything but the fifth bit: HAS_QH selects Q5_K. CHUNK: kchunk_plain / _sdot. */
#define DEF_Q45K(NAME, ATTR, XB, HAS_QH, CHUNK)                                                                  \
    static ATTR void vec_dot_##NAME##_nr(int64_t n, int nr, const void *vx, size_t bx, const void *vy, float *s) { \
        const int64_t nb = n / ELI_QK_K;                                                                         \
        float32x4_t acc0[ELI_KERNEL_MAX_NR], acc1[ELI_KERNEL_MAX_NR];                                            \
        for (int r = 0; r < nr; r++) acc0[r] = acc1[r] = vdupq_n_f32(0.0f);                                      \
        const uint8x16_t m4 = vdupq_n_u8(0x0F), b4 = vdupq_n_u8(0x10);                                           \
        for (int64_t i = 0; i < nb; i++) {                                                                       \
            const uint8_t *y = (const uint8_t *)vy + (size_t)i * sizeof(eli_block_q8_K);                         \
            const int8_t *yq = (const int8_t *)(y + Q8K_QS);                                                     \
            const float yd = ld_f32(y);                                                                          \
            for (int r = 0; r < nr; r++) {                                                                       \
                const uint8_t *x = (const uint8_t *)vx + (size_t)r * bx + (size_t)i * sizeof(XB);                \
                uint8_t sc[8];                                                                                   \
                uint8x8_t mn;                                                                                    \
                k4_scales(x + offsetof(XB, scales), sc, &mn);                                                    \
                int32x4_t m0, m1;                                                                                \
                k4_min_lanes(y + Q8K_BSUMS, mn, &m0, &m1);                                                       \
                const uint8_t *qs = x + offsetof(XB, qs);                                                        \
                uint8x16_t h0 = vdupq_n_u8(0), h1 = h0;                                                          \
                if (HAS_QH) {                                                                                    \
                    h0 = vld1q_u8(x + offsetof(eli_block_q5_K, qh));                                             \
                    h1 = vld1q_u8(x + offsetof(eli_block_q5_K, qh) + 16);                                        \
                }                                                                                                \
                int32x4_t l0 = vdupq_n_s32(0), l1 = l0;                                                          \
                for (int j = 0; j < 4; j++) {                                                                    \
                    const uint8x16_t q0 = vld1q_u8(qs + 32 * j), q1 = vld1q_u8(qs + 32 * j + 16);                \
                    uint8x16_t lo0 = vandq_u8(q0, m4), lo1 = vandq_u8(q1, m4);                                   \
                    uint8x16_t hi0 = vshrq_n_u8(q0, 4), hi1 = vshrq_n_u8(q1, 4);                                 \
                    if (HAS_QH) {                                                                                \
                        const uint8x16_t bl = vdupq_n_u8((uint8_t)(1u << (2 * j)));                              \
                        const uint8x16_t bh = vdupq_n_u8((uint8_t)(2u << (2 * j)));                              \
                        lo0 = vorrq_u8(lo0, vandq_u8(vtstq_u8(h0, bl), b4));                                     \
                        lo1 = vorrq_u8(lo1, vandq_u8(vtstq_u8(h1, bl), b4));                                     \
                        hi0 = vorrq_u8(hi0, vandq_u8(vtstq_u8(h0, bh), b4));                                     \
                        hi1 = vorrq_u8(hi1, vandq_u8(vtstq_u8(h1, bh), b4));                                     \
                    }                                                                                            \
                    CHUNK(&l0, &l1, lo0, lo1, yq + 64 * j, sc[2 * j], sc[2 * j]);                                \
                    CHUNK(&l0, &l1, hi0, hi1, yq + 64 * j + 32, sc[2 * j + 1], sc[2 * j + 1]);                   \
                }                                                                                                \
                const float32x4_t d = vdupq_n_f32(h2f(x + offsetof(XB, d)) * yd);                                \
                const float32x4_t dmin = vdupq_n_f32(h2f(x + offsetof(XB, dmin)) * yd);                          \
                acc0[r] = vfmsq_f32(vfmaq_f32(acc0[r], vcvtq_f32_s32(l0), d), vcvtq_f32_s32(m0), dmin);          \
                acc1[r] = vfmsq_f32(vfmaq_f32(acc1[r], vcvtq_f32_s32(l1), d), vcvtq_f32_s32(m1), dmin);          \
            }                                                                                                    \
        }                                                                                                        \
        for (int r = 0; r < nr; r++) s[r] = lanes8_total(acc0[r], acc1[r]);                                      \
    }                                                                                                            \
    static ATTR float vec_dot_##NAME(int64_t n, const void *vx, const void *vy) {                                \
        float s;                                                                                                 \
        vec_dot_##NAME##_nr(n, 1, vx, 0, vy, &s);                                                                \
        return s;                                                                                                \
    }

/* Q6_K: u = low 4 bits | 2 high bits << 4 in [0, 63] (the -32 is in the offset lanes); per 128 values,
 * vector m (elements 16m..16m+15, sub-block 8h + m) takes its low bits from ql (m mod 4), low or high
 * nibble (m >= 4), and its high bits from qh (m odd: bytes 16..31) at shift 2 * (m / 2); chunk c of the
 * half is u[2c], u[2c+1]. */
#define DEF_Q6K(NAME, ATTR, CHUNK)                                                                               \
    static ATTR void vec_dot_##NAME##_nr(int64_t n, int nr, const void *vx, size_t bx, const void *vy, float *s) { \
        const int64_t nb = n / ELI_QK_K;                                                                         \
        float32x4_t acc0[ELI_KERNEL_MAX_NR], acc1[ELI_KERNEL_MAX_NR];                                            \
        for (int r = 0; r < nr; r++) acc0[r] = acc1[r] = vdupq_n_f32(0.0f);                                      \
        const uint8x16_t m4 = vdupq_n_u8(0x0F), m3 = vdupq_n_u8(0x30);                                           \
        for (int64_t i = 0; i < nb; i++) {                                                                       \
            const uint8_t *y = (const uint8_t *)vy + (size_t)i * sizeof(eli_block_q8_K);                         \
            const int8_t *yq = (const int8_t *)(y + Q8K_QS);                                                     \
            const float yd = ld_f32(y);                                                                          \
            for (int r = 0; r < nr; r++) {                                                                       \
                const uint8_t *x = (const uint8_t *)vx + (size_t)r * bx + (size_t)i * sizeof(eli_block_q6_K);    \
                const int8_t *scales = (const int8_t *)(x + offsetof(eli_block_q6_K, scales));                   \
                int32x4_t l0, l1;                                                                                \
                k6_offset_lanes(scales, y + Q8K_BSUMS, &l0, &l1);                                                \
                for (int h = 0; h < 2; h++) {                                                                    \
                    const uint8_t *ql = x + offsetof(eli_block_q6_K, ql) + 64 * h;                               \
                    const uint8_t *qh = x + offsetof(eli_block_q6_K, qh) + 32 * h;                               \
                    const uint8x16_t L0 = vld1q_u8(ql), L1 = vld1q_u8(ql + 16), L2 = vld1q_u8(ql + 32),          \
                                     L3 = vld1q_u8(ql + 48);                                                     \
                    const uint8x16_t H0 = vld1q_u8(qh), H1 = vld1q_u8(qh + 16);                                  \
                    uint8x16_t u[8];                                                                             \
                    u[0] = vorrq_u8(vandq_u8(L0, m4), vandq_u8(vshlq_n_u8(H0, 4), m3));                          \
                    u[1] = vorrq_u8(vandq_u8(L1, m4), vandq_u8(vshlq_n_u8(H1, 4), m3));                          \
                    u[2] = vorrq_u8(vandq_u8(L2, m4), vandq_u8(vshlq_n_u8(H0, 2), m3));                          \
                    u[3] = vorrq_u8(vandq_u8(L3, m4), vandq_u8(vshlq_n_u8(H1, 2), m3));                          \
                    u[4] = vorrq_u8(vshrq_n_u8(L0, 4), vandq_u8(H0, m3));                                        \
                    u[5] = vorrq_u8(vshrq_n_u8(L1, 4), vandq_u8(H1, m3));                                        \
                    u[6] = vorrq_u8(vshrq_n_u8(L2, 4), vandq_u8(vshrq_n_u8(H0, 2), m3));                         \
                    u[7] = vorrq_u8(vshrq_n_u8(L3, 4), vandq_u8(vshrq_n_u8(H1, 2), m3));                         \
                    for (int c = 0; c < 4; c++)                                                                  \
                        CHUNK(&l0, &l1, u[2 * c], u[2 * c + 1], yq + 128 * h + 32 * c, scales[8 * h + 2 * c],   \
                              scales[8 * h + 2 * c + 1]);                                                        \
                }                                                                                                \
                const float32x4_t d = vdupq_n_f32(h2f(x + offsetof(eli_block_q6_K, d)) * yd);                   \
                acc0[r] = vfmaq_f32(acc0[r], vcvtq_f32_s32(l0), d);                                              \
                acc1[r] = vfmaq_f32(acc1[r], vcvtq_f32_s32(l1), d);                                              \
            }                                                                                                    \
        }                                                                                                        \
        for (int r = 0; r < nr; r++) s[r] = lanes8_total(acc0[r], acc1[r]);                                      \
    }                                                                                                            \
    static ATTR float vec_dot_##NAME(int64_t n, const void *vx, const void *vy) {                                \
        float s;                                                                                                 \
        vec_dot_##NAME##_nr(n, 1, vx, 0, vy, &s);                                                                \
        return s;                                                                                                \
    }

DEF_Q45K(q4_K, NOATTR, eli_block_q4_K, 0, kchunk_plain)
DEF_Q45K(q5_K, NOATTR, eli_block_q5_K, 1, kchunk_plain)
DEF_Q6K(q6_K, NOATTR, kchunk_plain)
DEF_Q45K(q4_K_dp, DOTPROD, eli_block_q4_K, 0, kchunk_sdot)
DEF_Q45K(q5_K_dp, DOTPROD, eli_block_q5_K, 1, kchunk_sdot)
DEF_Q6K(q6_K_dp, DOTPROD, kchunk_sdot)

/* ---------------------------------------------------------------------------------------------------
 * float formats: products rounded to float, accumulated in double (order differs from the reference)
 * ------------------------------------------------------------------------------------------------- */

#define LD4_F32(p) vreinterpretq_f32_u8(vld1q_u8(p))
#define LD4_F16(p) vcvt_f32_f16(vreinterpret_f16_u8(vld1_u8(p)))
#define LD4_BF16(p) vreinterpretq_f32_u32(vshll_n_u16(vreinterpret_u16_u8(vld1_u8(p)), 16))

static inline float ld_bf16(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return eli_bf16_to_fp32(h);
}

#define DEF_FDOT(NAME, ESZ, LOAD4, LOAD1)                                                      \
    static float NAME(int64_t n, const void *vx, const void *vy) {                             \
        const uint8_t *px = vx, *py = vy;                                                      \
        float64x2_t a0 = vdupq_n_f64(0.0), a1 = a0, a2 = a0, a3 = a0;                          \
        int64_t i = 0;                                                                         \
        for (; i + 8 <= n; i += 8) {                                                           \
            const float32x4_t p0 = vmulq_f32(LOAD4(px + ESZ * i), LOAD4(py + ESZ * i));        \
            const float32x4_t p1 = vmulq_f32(LOAD4(px + ESZ * (i + 4)), LOAD4(py + ESZ * (i + 4))); \
            a0 = vaddq_f64(a0, vcvt_f64_f32(vget_low_f32(p0)));                                \
            a1 = vaddq_f64(a1, vcvt_high_f64_f32(p0));                                         \
            a2 = vaddq_f64(a2, vcvt_f64_f32(vget_low_f32(p1)));                                \
            a3 = vaddq_f64(a3, vcvt_high_f64_f32(p1));                                         \
        }                                                                                      \
        for (; i + 4 <= n; i += 4) {                                                           \
            const float32x4_t p0 = vmulq_f32(LOAD4(px + ESZ * i), LOAD4(py + ESZ * i));        \
            a0 = vaddq_f64(a0, vcvt_f64_f32(vget_low_f32(p0)));                                \
            a1 = vaddq_f64(a1, vcvt_high_f64_f32(p0));                                         \
        }                                                                                      \
        double sum = vaddvq_f64(vaddq_f64(vaddq_f64(a0, a1), vaddq_f64(a2, a3)));              \
        for (; i < n; i++) sum += (double)(LOAD1(px + ESZ * i) * LOAD1(py + ESZ * i));         \
        return (float)sum;                                                                     \
    }

DEF_FDOT(vec_dot_f32, 4, LD4_F32, ld_f32)
DEF_FDOT(vec_dot_f16, 2, LD4_F16, h2f)
DEF_FDOT(vec_dot_bf16, 2, LD4_BF16, ld_bf16)

/* ---------------------------------------------------------------------------------------------------
 * attention helpers (float accumulation, FMA)
 * ------------------------------------------------------------------------------------------------- */

#define LDH4(p) vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p)))

/* 4 elements of a cache row, F16 or F32, as floats */
static inline float32x4_t ld4_row(int f16, const uint8_t *r, int64_t i) {
    return f16 ? LDH4((const uint16_t *)r + i) : vld1q_f32((const float *)r + i);
}

static inline float elem_row(int f16, const uint8_t *r, int64_t i) {
    return f16 ? h2f(r + 2 * i) : ((const float *)r)[i];
}

/* Scores of C cells x GB heads: each K row is loaded (and converted) once for all the heads, and the
 * C * GB accumulators are independent FMA chains. */
static inline __attribute__((always_inline)) void qk_tile(int f16, int C, int GB, int64_t d, const uint8_t *r,
                                                          size_t rb, const float *q, float *s, size_t ss) {
    float32x4_t acc[2][4];
    for (int c = 0; c < C; c++)
        for (int g = 0; g < GB; g++) acc[c][g] = vdupq_n_f32(0.0f);
    int64_t i = 0;
    for (; i + 4 <= d; i += 4) {
        float32x4_t k[2];
        for (int c = 0; c < C; c++) k[c] = ld4_row(f16, r + (size_t)c * rb, i);
        for (int g = 0; g < GB; g++) {
            const float32x4_t qv = vld1q_f32(q + (size_t)g * d + i);
            for (int c = 0; c < C; c++) acc[c][g] = vfmaq_f32(acc[c][g], k[c], qv);
        }
    }
    for (int c = 0; c < C; c++)
        for (int g = 0; g < GB; g++) {
            float v = vaddvq_f32(acc[c][g]);
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

/* out[g][i0 .. i0 + 4W) += sum_j p[g][j] * row j, for GB heads: the outputs stay in registers over
 * all nc rows, each V slice is loaded once for the GB heads. */
static inline __attribute__((always_inline)) void pv_tile(int f16, int W, int GB, int64_t d, int64_t i0, int nc,
                                                          const uint8_t *rows, size_t rb, const float *p, size_t ss,
                                                          float *out) {
    float32x4_t acc[4][4];
    for (int g = 0; g < GB; g++)
        for (int w = 0; w < W; w++) acc[g][w] = vld1q_f32(out + (size_t)g * d + i0 + 4 * w);
    for (int j = 0; j < nc; j++) {
        const uint8_t *r = rows + (size_t)j * rb;
        float32x4_t v[4];
        for (int w = 0; w < W; w++) v[w] = ld4_row(f16, r, i0 + 4 * w);
        for (int g = 0; g < GB; g++) {
            const float pg = p[(size_t)g * ss + j];
            for (int w = 0; w < W; w++) acc[g][w] = vfmaq_n_f32(acc[g][w], v[w], pg);
        }
    }
    for (int g = 0; g < GB; g++)
        for (int w = 0; w < W; w++) vst1q_f32(out + (size_t)g * d + i0 + 4 * w, acc[g][w]);
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
        for (; i + 16 <= d; i += 16) PV_TILES(4, gb)
        for (; i + 4 <= d; i += 4) PV_TILES(1, gb)
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
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, LDH4(x + i));
    for (; i < n; i++) y[i] = h2f((const uint8_t *)(x + i));
}

static void scale_f32(int64_t n, float a, float *y) {
    const float32x4_t va = vdupq_n_f32(a);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vmulq_f32(va, vld1q_f32(y + i)));
    for (; i < n; i++) y[i] *= a;
}

/* exp(y) for 4 floats, as exp8 of kernels_avx2.c: y clamped to [-87, 88], 2^n exp(r) with |r| <= ln2/2
 * (two-part ln2) and exp(r) by its Taylor series to r^7, 2^n applied in two factors. */
static inline float32x4_t exp4(float32x4_t y) {
    y = vminq_f32(vmaxq_f32(y, vdupq_n_f32(-87.0f)), vdupq_n_f32(88.0f));
    const float32x4_t n = vrndnq_f32(vmulq_f32(y, vdupq_n_f32(1.44269504088896341f)));
    float32x4_t r = vfmsq_f32(y, n, vdupq_n_f32(0.693145751953125f));
    r = vfmsq_f32(r, n, vdupq_n_f32(1.428606765330187e-06f));
    float32x4_t e = vdupq_n_f32(1.0f / 5040.0f);
    e = vfmaq_f32(vdupq_n_f32(1.0f / 720.0f), e, r);
    e = vfmaq_f32(vdupq_n_f32(1.0f / 120.0f), e, r);
    e = vfmaq_f32(vdupq_n_f32(1.0f / 24.0f), e, r);
    e = vfmaq_f32(vdupq_n_f32(1.0f / 6.0f), e, r);
    e = vfmaq_f32(vdupq_n_f32(0.5f), e, r);
    e = vfmaq_f32(vdupq_n_f32(1.0f), e, r);
    e = vfmaq_f32(vdupq_n_f32(1.0f), e, r);
    const int32x4_t ni = vcvtq_s32_f32(n), half = vshrq_n_s32(ni, 1);
    const float32x4_t s1 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(half, vdupq_n_s32(127)), 23));
    const float32x4_t s2 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(vsubq_s32(ni, half), vdupq_n_s32(127)), 23));
    return vmulq_f32(vmulq_f32(e, s1), s2);
}

/* tanh(x) for 4 floats, as tanh8 of kernels_avx2.c: the odd Taylor series to x^13 below |x| = 0.4, else
 * 1 - 2 / (exp(2|x|) + 1) with the sign put back; |x| clamped at 10, where tanh rounds to 1. */
static inline float32x4_t tanh4(float32x4_t x) {
    const uint32x4_t sign = vandq_u32(vreinterpretq_u32_f32(x), vdupq_n_u32(0x80000000u));
    const float32x4_t a = vminq_f32(vabsq_f32(x), vdupq_n_f32(10.0f));
    const float32x4_t z = vmulq_f32(a, a);
    float32x4_t t = vdupq_n_f32(21844.0f / 6081075.0f);
    t = vfmaq_f32(vdupq_n_f32(-1382.0f / 155925.0f), t, z);
    t = vfmaq_f32(vdupq_n_f32(62.0f / 2835.0f), t, z);
    t = vfmaq_f32(vdupq_n_f32(-17.0f / 315.0f), t, z);
    t = vfmaq_f32(vdupq_n_f32(2.0f / 15.0f), t, z);
    t = vfmaq_f32(vdupq_n_f32(-1.0f / 3.0f), t, z);
    const float32x4_t small = vfmaq_f32(a, vmulq_f32(t, z), a);
    const float32x4_t one = vdupq_n_f32(1.0f);
    const float32x4_t e = exp4(vaddq_f32(a, a));
    const float32x4_t big = vsubq_f32(one, vdivq_f32(vdupq_n_f32(2.0f), vaddq_f32(e, one)));
    const float32x4_t res = vbslq_f32(vcltq_f32(a, vdupq_n_f32(0.4f)), small, big);
    return vreinterpretq_f32_u32(vorrq_u32(vreinterpretq_u32_f32(res), sign));
}

/* x[i] = exp(x[i] - m), returning their sum: the softmax numerators of a chunk of attention scores */
static float exp_sum_f32(int64_t n, float m, float *x) {
    const float32x4_t vm = vdupq_n_f32(m);
    float32x4_t acc = vdupq_n_f32(0.0f);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const float32x4_t e = exp4(vsubq_f32(vld1q_f32(x + i), vm));
        vst1q_f32(x + i, e);
        acc = vaddq_f32(acc, e);
    }
    float sum = vaddvq_f32(acc);
    if (i < n) { /* the tail through a padded vector, so every element sees the same function */
        float buf[4];
        for (int j = 0; j < 4; j++) buf[j] = i + j < n ? x[i + j] : m;
        vst1q_f32(buf, exp4(vsubq_f32(vld1q_f32(buf), vm)));
        for (int j = 0; i + j < n; j++) x[i + j] = buf[j], sum += buf[j];
    }
    return sum;
}

static void softcap_f32(int64_t n, float c, float *x) {
    const float inv = 1.0f / c;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(x + i, vmulq_n_f32(tanh4(vmulq_n_f32(vld1q_f32(x + i), inv)), c));
    if (i < n) { /* the tail through a padded vector, so every element sees the same function */
        float buf[4] = {0};
        memcpy(buf, x + i, sizeof(float) * (size_t)(n - i));
        vst1q_f32(buf, vmulq_n_f32(tanh4(vmulq_n_f32(vld1q_f32(buf), inv)), c));
        memcpy(x + i, buf, sizeof(float) * (size_t)(n - i));
    }
}

/* ---------------------------------------------------------------------------------------------------
 * the tables (data only: the dotprod one is used only after kernels.c checked HWCAP_ASIMDDP)
 * ------------------------------------------------------------------------------------------------- */

#define NEON_COMMON                                                                   \
    .nr = {[ELI_TYPE_Q4_0] = 4, [ELI_TYPE_Q4_1] = 4, [ELI_TYPE_Q5_0] = 4, [ELI_TYPE_Q5_1] = 4, \
           [ELI_TYPE_Q8_0] = 4, [ELI_TYPE_Q4_K] = 4, [ELI_TYPE_Q5_K] = 4, [ELI_TYPE_Q6_K] = 4}, \
    .quantize = {[ELI_TYPE_Q8_0] = quantize_q8_0, [ELI_TYPE_Q8_1] = quantize_q8_1,    \
                 [ELI_TYPE_Q8_K] = quantize_q8_K, [ELI_TYPE_F16] = quantize_f16,      \
                 [ELI_TYPE_BF16] = quantize_bf16},                                    \
    .gemm_nr = {[ELI_TYPE_Q4_0] = 4, [ELI_TYPE_Q4_1] = 4, [ELI_TYPE_Q5_0] = 4, [ELI_TYPE_Q5_1] = 4, \
                [ELI_TYPE_Q8_0] = 4},                                                 \
    .attn_qk = {[ELI_TYPE_F32] = attn_qk_f32, [ELI_TYPE_F16] = attn_qk_f16},              \
    .attn_pv = {[ELI_TYPE_F32] = attn_pv_f32, [ELI_TYPE_F16] = attn_pv_f16},              \
    .f16_to_f32 = f16_to_f32, .scale_f32 = scale_f32, .softcap_f32 = softcap_f32, \
    .exp_sum_f32 = exp_sum_f32

const eli_kernels eli_kernels_neon_table = {
    .name = "neon",
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
            [ELI_TYPE_Q4_0] = vec_dot_q4_0_nr,
            [ELI_TYPE_Q4_1] = vec_dot_q4_1_nr,
            [ELI_TYPE_Q5_0] = vec_dot_q5_0_nr,
            [ELI_TYPE_Q5_1] = vec_dot_q5_1_nr,
            [ELI_TYPE_Q8_0] = vec_dot_q8_0_nr,
            [ELI_TYPE_Q4_K] = vec_dot_q4_K_nr,
            [ELI_TYPE_Q5_K] = vec_dot_q5_K_nr,
            [ELI_TYPE_Q6_K] = vec_dot_q6_K_nr,
        },
    .gemm =
        {
            [ELI_TYPE_Q4_0] = gemm_q4_0,
            [ELI_TYPE_Q4_1] = gemm_q4_1,
            [ELI_TYPE_Q5_0] = gemm_q5_0,
            [ELI_TYPE_Q5_1] = gemm_q5_1,
            [ELI_TYPE_Q8_0] = gemm_q8_0,
        },
    NEON_COMMON,
};

const eli_kernels eli_kernels_neon_dotprod_table = {
    .name = "neon-dotprod",
    .vec_dot =
        {
            [ELI_TYPE_F32] = vec_dot_f32,
            [ELI_TYPE_F16] = vec_dot_f16,
            [ELI_TYPE_BF16] = vec_dot_bf16,
            [ELI_TYPE_Q4_0] = vec_dot_q4_0_dp,
            [ELI_TYPE_Q4_1] = vec_dot_q4_1_dp,
            [ELI_TYPE_Q5_0] = vec_dot_q5_0_dp,
            [ELI_TYPE_Q5_1] = vec_dot_q5_1_dp,
            [ELI_TYPE_Q8_0] = vec_dot_q8_0_dp,
            [ELI_TYPE_Q4_K] = vec_dot_q4_K_dp,
            [ELI_TYPE_Q5_K] = vec_dot_q5_K_dp,
            [ELI_TYPE_Q6_K] = vec_dot_q6_K_dp,
        },
    .vec_dot_nr =
        {
            [ELI_TYPE_Q4_0] = vec_dot_q4_0_dp_nr,
            [ELI_TYPE_Q4_1] = vec_dot_q4_1_dp_nr,
            [ELI_TYPE_Q5_0] = vec_dot_q5_0_dp_nr,
            [ELI_TYPE_Q5_1] = vec_dot_q5_1_dp_nr,
            [ELI_TYPE_Q8_0] = vec_dot_q8_0_dp_nr,
            [ELI_TYPE_Q4_K] = vec_dot_q4_K_dp_nr,
            [ELI_TYPE_Q5_K] = vec_dot_q5_K_dp_nr,
            [ELI_TYPE_Q6_K] = vec_dot_q6_K_dp_nr,
        },
    .gemm =
        {
            [ELI_TYPE_Q4_0] = gemm_q4_0_dp,
            [ELI_TYPE_Q4_1] = gemm_q4_1_dp,
            [ELI_TYPE_Q5_0] = gemm_q5_0_dp,
            [ELI_TYPE_Q5_1] = gemm_q5_1_dp,
            [ELI_TYPE_Q8_0] = gemm_q8_0_dp,
        },
    NEON_COMMON,
};

#else
/* Not an aarch64 NEON build: nothing here (kernels.c only references the NEON tables on aarch64). */
typedef int eli_kernels_neon_unused;
#endif
