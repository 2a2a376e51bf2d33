/* AArch64 NEON kernels of the rotated-codebook formats (tquant.h): the tq4_0 weights and their Q8_TQ
 * activations, and the low-bit KV types (kvquant.h). Two sets like kernels_neon.c: plain NEON, and the
 * integer sums with SDOT (the dotprod set, handed out by kernels.c only after its HWCAP check). On any other
 * architecture this file compiles to nothing.
 *
 * Bit-exact with the scalar reference (kvquant.c): tbq scores are integer sums per 16 values (vmull_s8 and
 * pairwise adds, or one SDOT) times the 16 values' multiplier, then the reference's two float multiplies;
 * the float kernels do the reference's per-element FMAs (vfmaq) in its order, and its 8 lanes as two
 * float32x4 (lanes 0-3 and 4-7) added in its tree. */
#include "fp_exact.h"

#include "kernels.h"

#if defined(__aarch64__) && defined(__ARM_NEON)

#include <arm_neon.h>
#include <string.h>

#include "tquant.h"

#include "neon_dotprod.h"

static inline float h2f(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, sizeof h);
    return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))), 0);
}

/* ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)) of lanes lo = 0-3, hi = 4-7 */
static inline float lanes8_sum(float32x4_t lo, float32x4_t hi) {
    const float32x4_t s = vaddq_f32(lo, hi);
    return (vgetq_lane_f32(s, 0) + vgetq_lane_f32(s, 2)) + (vgetq_lane_f32(s, 1) + vgetq_lane_f32(s, 3));
}

/* ---- tbq4_0 / tbq3_0 ---- */

static inline int8x16_t tbq_lut(const eli_kvq *c) {
    int8_t l[16] = {0};
    memcpy(l, c->cb->levels, (size_t)c->cb->n_levels);
    return vld1q_s8(l);
}

/* the int8 levels of values 16 b .. 16 b + 15 */
static inline __attribute__((always_inline)) int8x16_t tbq_levels16(int four, int8x16_t lut, const uint8_t *codes, int b) {
    const int i0 = 16 * b;
    if (four) {
        const int pos = i0 % 64;
        uint8x16_t raw = vld1q_u8(codes + 32 * (i0 / 64) + pos % 32);
        raw = pos >= 32 ? vshrq_n_u8(raw, 4) : vandq_u8(raw, vdupq_n_u8(0x0F));
        return vqtbl1q_s8(lut, raw);
    }
    const uint8_t *g = codes + 48 * (i0 / 128);
    const int pos = i0 % 128, m = pos / 32, half = (pos % 32) / 16;
    const uint8x16_t lo = vandq_u8(vshlq_u8(vld1q_u8(g + pos % 32), vdupq_n_s8((int8_t)(-2 * m))), vdupq_n_u8(3));
    const uint8x16_t hi = vandq_u8(vshlq_u8(vld1q_u8(g + 32), vdupq_n_s8((int8_t)(-(2 * m + half)))), vdupq_n_u8(1));
    return vqtbl1q_s8(lut, vorrq_u8(lo, vshlq_n_u8(hi, 2)));
}

/* the int32 sums of 4 products per lane of 16 levels and 16 query bytes, lane l taking values 4l..4l+3 (as
 * SDOT: tq4_0's dot keeps its lanes apart) */
static inline int32x4_t dot16(int8x16_t lv, int8x16_t q) {
    const int16x8_t p = vpaddq_s16(vmull_s8(vget_low_s8(lv), vget_low_s8(q)), vmull_high_s8(lv, q)); /* |.| <= 32258 */
    return vpaddlq_s16(p);
}

#define DEF_TBQ_SCORE(NAME, ATTR, DOT)                                                                               \
    static ATTR void NAME(int four, const eli_kvq *c, int nc, const uint8_t *rows, size_t rb, int G, const void *qp,  \
                          float *s, size_t ss) {                                                                      \
        if (c->d < (four ? 64 : 128)) {                                                                               \
            eli_kvq_score_ref(c, nc, rows, rb, G, qp, s, ss);                                                         \
            return;                                                                                                   \
        }                                                                                                             \
        const int8x16_t lut = tbq_lut(c);                                                                            \
        int32_t m[ELI_KVQ_MAX_DIM / 16];                                                                              \
        for (int j = 0; j < nc; j++) {                                                                                \
            const uint8_t *blk = rows + (size_t)j * rb, *codes = blk + 2 + c->sub_bytes;                             \
            eli_kvq_tbq_mults(c, blk, m);                                                                                     \
            const float sk = h2f(blk);                                                                                \
            for (int g0 = 0; g0 < G; g0 += 8) {                                                                       \
                const int GB = G - g0 < 8 ? G - g0 : 8;                                                               \
                int32x4_t acc[8];                                                                                     \
                for (int g = 0; g < GB; g++) acc[g] = vdupq_n_s32(0);                                                 \
                for (int b = 0; b < c->d / 16; b++) {                                                                 \
                    const int8x16_t lv = tbq_levels16(four, lut, codes, b);                                           \
                    for (int g = 0; g < GB; g++) {                                                                    \
                        const int8_t *q8 = (const int8_t *)qp + (size_t)(g0 + g) * c->query_bytes + 64;              \
                        acc[g] = vmlaq_n_s32(acc[g], DOT(lv, vld1q_s8(q8 + 16 * b)), m[b]);                           \
                    }                                                                                                 \
                }                                                                                                     \
                for (int g = 0; g < GB; g++) {                                                                        \
                    float dq;                                                                                         \
                    memcpy(&dq, (const uint8_t *)qp + (size_t)(g0 + g) * c->query_bytes, sizeof dq);                  \
                    s[(size_t)(g0 + g) * ss + j] = (sk * dq) * (float)vaddvq_s32(acc[g]);                             \
                }                                                                                                     \
            }                                                                                                         \
        }                                                                                                             \
    }

static inline DOTPROD int32x4_t dot16_dp(int8x16_t lv, int8x16_t q) { return sdot(vdupq_n_s32(0), lv, q); }

DEF_TBQ_SCORE(tbq_score, , dot16)
DEF_TBQ_SCORE(tbq_score_dp, DOTPROD, dot16_dp)

static void score_tbq(const eli_kvq *c, int nc, const uint8_t *rows, size_t rb, int G, const void *qp, float *s,
                      size_t ss) {
    tbq_score(c->type == ELI_KV_TBQ4_0, c, nc, rows, rb, G, qp, s, ss);
}
static DOTPROD void score_tbq_dp(const eli_kvq *c, int nc, const uint8_t *rows, size_t rb, int G, const void *qp,
                                 float *s, size_t ss) {
    tbq_score_dp(c->type == ELI_KV_TBQ4_0, c, nc, rows, rb, G, qp, s, ss);
}
/* ---- accumulate: the decoders (m * level, or polar's unit vector, into floats); kernels.c pairs them with
 * the table's f32 attn_pv (one FMA per term, rows in order: the reference's steps) ---- */

static inline __attribute__((always_inline)) float tbq_decode(int four, const eli_kvq *c, const uint8_t *blk, float *x) {
    const int8x16_t lut = tbq_lut(c);
    int32_t m[ELI_KVQ_MAX_DIM / 16];
    eli_kvq_tbq_mults(c, blk, m);
    for (int b = 0; b < c->d / 16; b++) {
        const int8x16_t lv = tbq_levels16(four, lut, blk + 2 + c->sub_bytes, b);
        const int16x8_t l0 = vmovl_s8(vget_low_s8(lv)), l1 = vmovl_high_s8(lv);
        const float mf = (float)m[b];
        vst1q_f32(x + 16 * b, vmulq_n_f32(vcvtq_f32_s32(vmovl_s16(vget_low_s16(l0))), mf));
        vst1q_f32(x + 16 * b + 4, vmulq_n_f32(vcvtq_f32_s32(vmovl_high_s16(l0)), mf));
        vst1q_f32(x + 16 * b + 8, vmulq_n_f32(vcvtq_f32_s32(vmovl_s16(vget_low_s16(l1))), mf));
        vst1q_f32(x + 16 * b + 12, vmulq_n_f32(vcvtq_f32_s32(vmovl_high_s16(l1)), mf));
    }
    return h2f(blk);
}

/* the vector code covers tbq4_0 from 64 values, tbq3_0 from 128 */
static float decode_tbq4(const eli_kvq *c, const uint8_t *blk, float *x) {
    return c->d >= 64 ? tbq_decode(1, c, blk, x) : eli_kvq_decode_ref(c, blk, x);
}
static float decode_tbq3(const eli_kvq *c, const uint8_t *blk, float *x) {
    return c->d >= 128 ? tbq_decode(0, c, blk, x) : eli_kvq_decode_ref(c, blk, x);
}

/* ---- q4_polar ---- */

/* 8 floats of table t (8 entries) at the 8 indices k (two uint32x4) */
static inline void lookup8(const float *t, uint32x4_t k0, uint32x4_t k1, float32x4_t *v0, float32x4_t *v1) {
    const uint8x16x2_t tab = {{vld1q_u8((const uint8_t *)t), vld1q_u8((const uint8_t *)t + 16)}};
    const uint32x4_t spread = vdupq_n_u32(0x04040404u), base = vdupq_n_u32(0x03020100u);
    *v0 = vreinterpretq_f32_u8(vqtbl2q_u8(tab, vreinterpretq_u8_u32(vmlaq_u32(base, k0, spread))));
    *v1 = vreinterpretq_f32_u8(vqtbl2q_u8(tab, vreinterpretq_u8_u32(vmlaq_u32(base, k1, spread))));
}

/* the decoded unit vector (kvquant.c, polar_unit: its halves e, o into e[0..d)), its scale r returned; 8
 * angles at a time where a level has 8 */
static float decode_polar(const eli_kvq *c, const uint8_t *blk, float *e) {
    float *o = e + c->d / 2;
    const int d = c->d, h = d / 2;
    const uint8_t *up = blk + ELI_KVQ_POLAR_L1_BYTES(d);
    static const int32_t sh3[8] = {0, -3, -6, -9, -12, -15, -18, -21};
    float rho[ELI_KVQ_MAX_DIM / 2];
    rho[0] = 1.0f;
    for (int l = c->log2d; l >= 2; l--) {
        const int n = d >> l;
        const size_t base = (size_t)h - ((size_t)d >> (l - 1));
        if (n < 8) {
            eli_kvq_polar_level(c, blk, l, rho);
            continue;
        }
        for (int i = 0; i < n; i += 8) {
            uint32_t w = 0;
            memcpy(&w, up + 3 * (base + (size_t)i) / 8, 4); /* 3 bytes and the next (the stream or r follows) */
            const uint32x4_t wv = vdupq_n_u32(w), seven = vdupq_n_u32(7);
            const uint32x4_t k0 = vandq_u32(vshlq_u32(wv, vld1q_s32(sh3)), seven);
            const uint32x4_t k1 = vandq_u32(vshlq_u32(wv, vld1q_s32(sh3 + 4)), seven);
            float32x4_t c0, c1, s0, s1;
            lookup8(c->cosl[l - 2], k0, k1, &c0, &c1);
            lookup8(c->sinl[l - 2], k0, k1, &s0, &s1);
            const float32x4_t a0 = vld1q_f32(rho + i), a1 = vld1q_f32(rho + i + 4);
            vst1q_f32(rho + i, vmulq_f32(a0, c0));
            vst1q_f32(rho + i + 4, vmulq_f32(a1, c1));
            vst1q_f32(rho + i + n, vmulq_f32(a0, s0));
            vst1q_f32(rho + i + n + 4, vmulq_f32(a1, s1));
        }
    }
    static const int64_t sh5[8] = {0, -5, -10, -15, -20, -25, -30, -35};
    const uint32x4_t sign = vdupq_n_u32(0x80000000u);
    for (int i = 0; i < h; i += 8) {
        uint64_t w = 0;
        memcpy(&w, blk + 5 * (size_t)i / 8, 8); /* 5 bytes and 3 more (the 3-bit stream follows) */
        const uint64x2_t wv = vdupq_n_u64(w);
        uint32x4_t k[2];
        for (int hf = 0; hf < 2; hf++)
            k[hf] = vandq_u32(vcombine_u32(vmovn_u64(vshlq_u64(wv, vld1q_s64(sh5 + 4 * hf))),
                                           vmovn_u64(vshlq_u64(wv, vld1q_s64(sh5 + 4 * hf + 2)))),
                              vdupq_n_u32(31));
        /* cell 8q + r: (cos, sin) of cell r, swapped for odd q, cos negated for q = 1, 2 and sin for q = 2, 3 */
        float32x4_t cb[2], sb[2];
        lookup8(c->cos1, vandq_u32(k[0], vdupq_n_u32(7)), vandq_u32(k[1], vdupq_n_u32(7)), &cb[0], &cb[1]);
        lookup8(c->sin1, vandq_u32(k[0], vdupq_n_u32(7)), vandq_u32(k[1], vdupq_n_u32(7)), &sb[0], &sb[1]);
        for (int hf = 0; hf < 2; hf++) {
            const uint32x4_t odd = vtstq_u32(k[hf], vdupq_n_u32(8));
            const uint32x4_t b4 = vshlq_n_u32(k[hf], 27), b3 = vshlq_n_u32(k[hf], 28);
            const uint32x4_t cn = vandq_u32(veorq_u32(b3, b4), sign), sn = vandq_u32(b4, sign);
            const float32x4_t cs = vreinterpretq_f32_u32(veorq_u32(vreinterpretq_u32_f32(vbslq_f32(odd, sb[hf], cb[hf])), cn));
            const float32x4_t ss = vreinterpretq_f32_u32(veorq_u32(vreinterpretq_u32_f32(vbslq_f32(odd, cb[hf], sb[hf])), sn));
            const float32x4_t rr = vld1q_f32(rho + i + 4 * hf);
            vst1q_f32(e + i + 4 * hf, vmulq_f32(rr, cs));
            vst1q_f32(o + i + 4 * hf, vmulq_f32(rr, ss));
        }
    }
    return h2f(blk + c->head_bytes - 2);
}

/* the reference's 8 lanes (lo: 0-3, hi: 4-7): lane i % 8 takes q[i] * e[i], then q[i + d/2] * o[i] */
static float polar_dot(const eli_kvq *c, const float *q, const float *x) {
    const int h = c->d / 2;
    float32x4_t lo = vdupq_n_f32(0.0f), hi = vdupq_n_f32(0.0f);
    for (int i = 0; i < h; i += 8) {
        lo = vfmaq_f32(lo, vld1q_f32(q + i), vld1q_f32(x + i));
        hi = vfmaq_f32(hi, vld1q_f32(q + i + 4), vld1q_f32(x + i + 4));
        lo = vfmaq_f32(lo, vld1q_f32(q + h + i), vld1q_f32(x + h + i));
        hi = vfmaq_f32(hi, vld1q_f32(q + h + i + 4), vld1q_f32(x + h + i + 4));
    }
    return lanes8_sum(lo, hi);
}

static void score_polar(const eli_kvq *c, int nc, const uint8_t *rows, size_t rb, int G, const void *qp, float *s,
                        size_t ss) {
    eli_kvq_score_decoded(c, nc, rows, rb, G, qp, s, ss, decode_polar, polar_dot);
}

/* ---- qjl1_256 ---- */

static void score_qjl(const eli_kvq *c, int nc, const uint8_t *rows, size_t rb, int G, const void *qp, float *s,
                      size_t ss) {
    const int d = c->d;
    static const uint32_t sel[8] = {1, 2, 4, 8, 16, 32, 64, 128};
    const uint32x4_t sel0 = vld1q_u32(sel), sel1 = vld1q_u32(sel + 4), neg = vdupq_n_u32(0x80000000u);
    for (int j = 0; j < nc; j++) {
        const uint8_t *blk = rows + (size_t)j * rb;
        const float w = h2f(blk + d / 8) * c->qjl_factor;
        for (int g = 0; g < G; g++) {
            const float *z = (const float *)((const uint8_t *)qp + (size_t)g * c->query_bytes);
            float32x4_t lo = vdupq_n_f32(0.0f), hi = vdupq_n_f32(0.0f);
            for (int i = 0; i < d; i += 8) {
                const uint32x4_t bv = vdupq_n_u32(blk[i / 8]);
                const uint32x4_t f0 = vbicq_u32(neg, vtstq_u32(bv, sel0)), f1 = vbicq_u32(neg, vtstq_u32(bv, sel1));
                lo = vaddq_f32(lo, vreinterpretq_f32_u32(veorq_u32(vreinterpretq_u32_f32(vld1q_f32(z + i)), f0)));
                hi = vaddq_f32(hi, vreinterpretq_f32_u32(veorq_u32(vreinterpretq_u32_f32(vld1q_f32(z + i + 4)), f1)));
            }
            s[(size_t)g * ss + j] = w * lanes8_sum(lo, hi);
        }
    }
}

/* ---- tq4_0 weights against Q8_TQ activations: quants.c's 8 lanes, lanes 0-3 (4-7) from the first (second)
 * 16 values of every 32, times their multiplier, one vfmaq per block with d_x * d_y ---- */

static const eli_kvq tq4_block = {.type = ELI_KV_TBQ4_0, .d = 256, .log2d = 8, .cb = &eli_tq_cb4, .sub_bits = 3, .sub_bytes = 6};

#define DEF_TQ4_DOT(NAME, ATTR, DOT)                                                                             \
    static ATTR float NAME(int64_t n, const void *vx, const void *vy) {                                          \
        const int8x16_t lut = tbq_lut(&tq4_block);                                                               \
        int32_t m[16];                                                                                           \
        float32x4_t lo = vdupq_n_f32(0.0f), hi = vdupq_n_f32(0.0f);                                              \
        for (int64_t b = 0; b < n / 256; b++) {                                                                  \
            const uint8_t *x = (const uint8_t *)vx + b * sizeof(eli_block_tq4_0);                                \
            const uint8_t *y = (const uint8_t *)vy + b * sizeof(eli_block_q8_tq);                                \
            eli_kvq_tbq_mults(&tq4_block, x, m);                                                                 \
            int32x4_t l0 = vdupq_n_s32(0), l1 = vdupq_n_s32(0);                                                  \
            for (int k = 0; k < 16; k += 2) {                                                                    \
                l0 = vmlaq_n_s32(l0, DOT(tbq_levels16(1, lut, x + 8, k), vld1q_s8((const int8_t *)y + 4 + 16 * k)), m[k]); \
                l1 = vmlaq_n_s32(l1, DOT(tbq_levels16(1, lut, x + 8, k + 1), vld1q_s8((const int8_t *)y + 20 + 16 * k)), m[k + 1]); \
            }                                                                                                    \
            float dy;                                                                                            \
            memcpy(&dy, y, sizeof dy);                                                                           \
            const float d = h2f(x) * dy;                                                                         \
            lo = vfmaq_n_f32(lo, vcvtq_f32_s32(l0), d);                                                          \
            hi = vfmaq_n_f32(hi, vcvtq_f32_s32(l1), d);                                                          \
        }                                                                                                        \
        return lanes8_sum(lo, hi);                                                                               \
    }

DEF_TQ4_DOT(vec_dot_tq4_0, , dot16)
DEF_TQ4_DOT(vec_dot_tq4_0_dp, DOTPROD, dot16_dp)

/* Q8_TQ: the butterflies of eli_tq_fwht 4 lanes at a time (lanes l and l ^ h for h = 1, 2 inside a vector,
 * whole vectors beyond), rounded to nearest even (FCVTNS, as nearest_int) */
static void quantize_q8_tq(const float *x, void *dst, int64_t k) {
    static const uint32_t sel[4] = {1, 2, 4, 8}, odd[4] = {0, ~0u, 0, ~0u}, hi[4] = {0, 0, ~0u, ~0u};
    const uint32x4_t selv = vld1q_u32(sel), oddv = vld1q_u32(odd), hiv = vld1q_u32(hi), neg = vdupq_n_u32(0x80000000u);
    const float scale = eli_tq_inv_sqrt(256);
    for (int64_t b = 0; b < k / 256; b++) {
        float32x4_t v[64];
        for (int j = 0; j < 64; j++) {
            const uint32_t nib = (uint32_t)(eli_tq_sign_bits[j / 16] >> (4 * (j % 16))) & 15;
            const uint32x4_t flip = vandq_u32(vtstq_u32(vdupq_n_u32(nib), selv), neg);
            float32x4_t t = vreinterpretq_f32_u32(veorq_u32(vreinterpretq_u32_f32(vld1q_f32(x + b * 256 + 4 * j)), flip));
            float32x4_t sw = vrev64q_f32(t);
            t = vbslq_f32(oddv, vsubq_f32(sw, t), vaddq_f32(t, sw));
            sw = vextq_f32(t, t, 2);
            v[j] = vbslq_f32(hiv, vsubq_f32(sw, t), vaddq_f32(t, sw));
        }
        for (int h = 1; h < 64; h <<= 1)
            for (int i = 0; i < 64; i += 2 * h)
                for (int j = i; j < i + h; j++) {
                    const float32x4_t a = v[j], c = v[j + h];
                    v[j] = vaddq_f32(a, c);
                    v[j + h] = vsubq_f32(a, c);
                }
        float32x4_t mx = vdupq_n_f32(0.0f);
        for (int j = 0; j < 64; j++) {
            v[j] = vmulq_n_f32(v[j], scale);
            mx = vmaxq_f32(mx, vabsq_f32(v[j]));
        }
        const float amax = vmaxvq_f32(mx);
        const float id = amax > 0.0f && amax <= 3.40282347e38f ? 127.0f / amax : 0.0f;
        eli_block_q8_tq *y = (eli_block_q8_tq *)dst + b;
        for (int j = 0; j < 64; j += 2) {
            const int32x4_t lim = vdupq_n_s32(127);
            const int32x4_t q0 = vmaxq_s32(vminq_s32(vcvtnq_s32_f32(vmulq_n_f32(v[j], id)), lim), vnegq_s32(lim));
            const int32x4_t q1 = vmaxq_s32(vminq_s32(vcvtnq_s32_f32(vmulq_n_f32(v[j + 1], id)), lim), vnegq_s32(lim));
            vst1_s8(y->qs + 4 * j, vqmovn_s16(vcombine_s16(vqmovn_s32(q0), vqmovn_s32(q1))));
        }
        const float d = id > 0.0f ? amax / 127.0f : 0.0f;
        memcpy(&y->d, &d, sizeof d);
    }
}

/* laid over the NEON tables by kernels.c (not tables of their own: no name) */
const eli_kernels eli_tquant_neon_table = {
    .vec_dot = {[ELI_TYPE_TQ4_0] = vec_dot_tq4_0},
    .quantize = {[ELI_TYPE_Q8_TQ] = quantize_q8_tq},
    .kvq = {.score = {score_tbq, score_tbq, score_polar, score_qjl}, .decode = {decode_tbq4, decode_tbq3, decode_polar, NULL}},
};
const eli_kernels eli_tquant_neon_dotprod_table = {
    .vec_dot = {[ELI_TYPE_TQ4_0] = vec_dot_tq4_0_dp},
    .kvq = {.score = {score_tbq_dp, score_tbq_dp}},
};

#else
/* Not an aarch64 NEON build: nothing here (kernels.c only references these sets on aarch64). */
typedef int eli_tquant_neon_unused;
#endif
