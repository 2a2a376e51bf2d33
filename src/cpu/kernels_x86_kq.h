/* K-quant helpers shared by the x86 kernel files (kernels_avx2.c, kernels_avx512.c), which include this
 * after kernels.h and kernels_x86.h. The lane order they serve is quants.c's (klanes_chunk): 8 int32 lanes
 * per super-block, lane l = elements 4l..4l+3 of every 32-element chunk; the min lanes (Q4_K / Q5_K) and
 * Q6_K's offset lanes come from one madd of the activation's bsums. Not a public header. */
#ifndef ELI_KERNELS_X86_KQ_H
#define ELI_KERNELS_X86_KQ_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "kernels_x86.h"
#include "quants.h"

/* Q4_K / Q5_K: the 12 bytes of 6-bit scales and mins as 16 bytes [sc0..sc7, m0..m7]. Bytes 0..3 hold
 * sc0..3 (low 6 bits; the top 2 are bits 4..5 of sc4..7), bytes 4..7 m0..3 (likewise for m4..7), bytes
 * 8..11 the low nibbles of sc4..7 and the high nibbles of m4..7: two 64-bit words do all 16 at once. */
static inline __m128i k4_scales(const uint8_t *q) {
    uint64_t a;
    uint32_t w;
    memcpy(&a, q, 8);
    memcpy(&w, q + 8, 4);
    const uint64_t b = (uint64_t)w | ((uint64_t)(w >> 4) << 32);
    const uint64_t lo = a & 0x3f3f3f3f3f3f3f3fULL;                                          /* sc0..3, m0..3 */
    const uint64_t hi = (b & 0x0f0f0f0f0f0f0f0fULL) | ((a >> 2) & 0x3030303030303030ULL); /* sc4..7, m4..7 */
    return _mm_shuffle_epi8(_mm_set_epi64x((long long)hi, (long long)lo),
                            _mm_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 12, 13, 14, 15));
}

/* From the [sc, m] bytes in both 128-bit halves (b): int16 sc[j] in every lane (a madd operand) ... */
#define K4_SC(b, j) _mm256_shuffle_epi8(b, _mm256_set1_epi16((short)(0x8000 | (j))))
/* ... and int16 m[l] in the two int16 of lane l: madd with the bsums gives the 8 min lanes */
#define K4_MW(b)                                                                                            \
    _mm256_shuffle_epi8(b, _mm256_setr_epi16((short)0x8008, (short)0x8008, (short)0x8009, (short)0x8009,     \
                                             (short)0x800a, (short)0x800a, (short)0x800b, (short)0x800b,     \
                                             (short)0x800c, (short)0x800c, (short)0x800d, (short)0x800d,     \
                                             (short)0x800e, (short)0x800e, (short)0x800f, (short)0x800f))
static inline __m256i k4_min_lanes(__m256i b, const eli_block_q8_K *y) {
    return _mm256_madd_epi16(loadu256(y->bsums), K4_MW(b));
}

/* Q6_K: the int16 scales of one 128-element half in both 128-bit halves (b, from 8 int8), then for
 * chunk c of that half: sub-block 2c's scale in the low 128 bits (lanes 0..3), 2c+1's in the high */
static inline __m256i k6_scales_half(const int8_t *sc) {
    return _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(_mm_loadl_epi64((const __m128i *)sc)));
}
#define K6_SC(b, c)                                                                                        \
    _mm256_shuffle_epi8(b, _mm256_setr_epi8(4 * (c), 4 * (c) + 1, 4 * (c), 4 * (c) + 1, 4 * (c), 4 * (c) + 1, \
                                            4 * (c), 4 * (c) + 1, 4 * (c), 4 * (c) + 1, 4 * (c), 4 * (c) + 1, \
                                            4 * (c), 4 * (c) + 1, 4 * (c), 4 * (c) + 1, 4 * (c) + 2,         \
                                            4 * (c) + 3, 4 * (c) + 2, 4 * (c) + 3, 4 * (c) + 2, 4 * (c) + 3, \
                                            4 * (c) + 2, 4 * (c) + 3, 4 * (c) + 2, 4 * (c) + 3, 4 * (c) + 2, \
                                            4 * (c) + 3, 4 * (c) + 2, 4 * (c) + 3, 4 * (c) + 2, 4 * (c) + 3))
/* Q6_K: -32 * the 16 scales as int16 (|.| <= 4096), so that madd with the bsums gives the start of the
 * lanes, -32 * (sc[2l] bsums[2l] + sc[2l+1] bsums[2l+1]) */
static inline __m256i k6_offset_weights(const eli_block_q6_K *x) {
    const __m256i sc = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)x->scales));
    return _mm256_slli_epi16(_mm256_sub_epi16(_mm256_setzero_si256(), sc), 5);
}
static inline __m256i k6_offset_lanes(const eli_block_q6_K *x, const eli_block_q8_K *y) {
    return _mm256_madd_epi16(loadu256(y->bsums), k6_offset_weights(x));
}

/* Q4_K / Q5_K: [d_x, dmin_x] (fp16, adjacent at the block start) times d_y, each broadcast */
static inline void k4_d(const void *x, float dy, __m256 *d, __m256 *dmin) {
    uint32_t w;
    memcpy(&w, x, 4);
    const __m128 f = _mm_mul_ps(_mm_cvtph_ps(_mm_cvtsi32_si128((int)w)), _mm_set1_ps(dy));
    *d = _mm256_broadcastss_ps(f);
    *dmin = _mm256_broadcastss_ps(_mm_movehdup_ps(f));
}

/* Q5_K: bit c of qh[b] is bit 4 of element b of chunk c; moved to position 4 */
static inline __m256i q5k_hbit(__m256i qh, int c) {
    const __m256i m = _mm256_and_si256(qh, _mm256_set1_epi8((char)(1 << c)));
    return c < 4 ? _mm256_slli_epi16(m, 4 - c) : c == 4 ? m : _mm256_srli_epi16(m, c - 4);
}

/* Q6_K: u = low 4 bits | 2 high bits << 4, in [0, 63], for chunk k (0..3) of a 128-element half:
 * l0 / l1 = ql bytes 0..31 / 32..63 of the half, qh = its 32 qh bytes */
static inline __m256i q6k_u(__m256i l0, __m256i l1, __m256i qh, int k) {
    const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);
    const __m256i lo = k == 0 ? _mm256_and_si256(l0, m4)
                     : k == 1 ? _mm256_and_si256(l1, m4)
                     : k == 2 ? _mm256_and_si256(_mm256_srli_epi16(l0, 4), m4)
                              : _mm256_and_si256(_mm256_srli_epi16(l1, 4), m4);
    const __m256i hb = k == 0 ? _mm256_slli_epi16(qh, 4) : k == 1 ? _mm256_slli_epi16(qh, 2) : k == 2 ? qh : _mm256_srli_epi16(qh, 2);
    return _mm256_or_si256(lo, _mm256_and_si256(hb, m30));
}

/* The prefill microkernels' unpacked rows: KX_RM rows of a super-block, each 32-element chunk's quants
 * with its madd scale vector, the int16 weights of the 16 bsums and d / dmin. */
#define KX_RM 4
typedef struct {
    __m256i q[KX_RM][8];  /* unsigned quants, element order */
    __m256i sc[KX_RM][8]; /* the chunk's scales (int16; Q6_K: the two 16-element sub-blocks by halves) */
    __m256i bw[KX_RM];    /* int16 weights of the 16 bsums */
    float d[KX_RM], dmin[KX_RM];
} kx_t;

static inline void kx_q45_K(kx_t *k, const uint8_t *const x[KX_RM], const int q5) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    for (int r = 0; r < KX_RM; r++) {
        const uint8_t *sc = q5 ? ((const eli_block_q5_K *)x[r])->scales : ((const eli_block_q4_K *)x[r])->scales;
        const uint8_t *qs = q5 ? ((const eli_block_q5_K *)x[r])->qs : ((const eli_block_q4_K *)x[r])->qs;
        const __m256i qh = q5 ? loadu256(((const eli_block_q5_K *)x[r])->qh) : _mm256_setzero_si256();
        const __m256i b = _mm256_broadcastsi128_si256(k4_scales(sc));
        for (int j = 0; j < 4; j++) {
            const __m256i q = loadu256(qs + 32 * j);
            __m256i lo = _mm256_and_si256(q, m4);
            __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
            if (q5) lo = _mm256_or_si256(lo, q5k_hbit(qh, 2 * j)), hi = _mm256_or_si256(hi, q5k_hbit(qh, 2 * j + 1));
            k->q[r][2 * j] = lo;
            k->q[r][2 * j + 1] = hi;
        }
        k->sc[r][0] = K4_SC(b, 0), k->sc[r][1] = K4_SC(b, 1), k->sc[r][2] = K4_SC(b, 2), k->sc[r][3] = K4_SC(b, 3);
        k->sc[r][4] = K4_SC(b, 4), k->sc[r][5] = K4_SC(b, 5), k->sc[r][6] = K4_SC(b, 6), k->sc[r][7] = K4_SC(b, 7);
        k->bw[r] = K4_MW(b);
        k->d[r] = h2f(x[r]);
        k->dmin[r] = h2f(x[r] + 2);
    }
}
static inline void kx_q4_K(kx_t *k, const uint8_t *const x[KX_RM]) { kx_q45_K(k, x, 0); }
static inline void kx_q5_K(kx_t *k, const uint8_t *const x[KX_RM]) { kx_q45_K(k, x, 1); }

static inline void kx_q6_K(kx_t *k, const uint8_t *const x[KX_RM]) {
    for (int r = 0; r < KX_RM; r++) {
        const eli_block_q6_K *xb = (const eli_block_q6_K *)x[r];
        for (int h = 0; h < 2; h++) {
            const __m256i l0 = loadu256(xb->ql + 64 * h), l1 = loadu256(xb->ql + 64 * h + 32);
            const __m256i qh = loadu256(xb->qh + 32 * h);
            const __m256i b = k6_scales_half(xb->scales + 8 * h);
            k->q[r][4 * h + 0] = q6k_u(l0, l1, qh, 0), k->sc[r][4 * h + 0] = K6_SC(b, 0);
            k->q[r][4 * h + 1] = q6k_u(l0, l1, qh, 1), k->sc[r][4 * h + 1] = K6_SC(b, 1);
            k->q[r][4 * h + 2] = q6k_u(l0, l1, qh, 2), k->sc[r][4 * h + 2] = K6_SC(b, 2);
            k->q[r][4 * h + 3] = q6k_u(l0, l1, qh, 3), k->sc[r][4 * h + 3] = K6_SC(b, 3);
        }
        k->bw[r] = k6_offset_weights(xb);
        k->d[r] = h2f(&xb->d);
        k->dmin[r] = 0.0f;
    }
}

/* The K-quant decode kernels of both x86 tables: nr rows against one activation row, each row doing the
 * reference's per-super-block steps. The 8 chunk products go into two int32 sums (two dependency
 * chains). No software prefetch: the rows stream sequentially and the hardware prefetcher does better
 * alone (measured, one thread, 256 MiB Q4_K matrix: 19-21 GB/s without against 16-17 with prefetcht0 8
 * super-blocks ahead). KACC(acc, p, sc), defined by the including file, adds the int16 pair products p
 * times the scales sc to the int32 lanes of acc (AVX2: vpmaddwd + vpaddd; AVX-512: one vpdpwssd). */
#ifndef KACC
#error "define KACC before including kernels_x86_kq.h"
#endif
static inline __attribute__((always_inline)) void krows_q45(int64_t n, const int nr, const void *vx, size_t bx,
                                                            const void *vy, float *s, const int q5) {
    const int64_t nb = n / ELI_QK_K;
    const eli_block_q8_K *y = vy;
    __m256 acc[ELI_KERNEL_MAX_NR];
    for (int r = 0; r < nr; r++) acc[r] = _mm256_setzero_ps();
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    for (int64_t i = 0; i < nb; i++) {
        const int8_t *yq = y[i].qs;
        for (int r = 0; r < nr; r++) {
            const uint8_t *x0 = (const uint8_t *)vx + (size_t)r * bx + (size_t)i * (q5 ? sizeof(eli_block_q5_K) : sizeof(eli_block_q4_K));
            const uint8_t *qs = q5 ? ((const eli_block_q5_K *)x0)->qs : ((const eli_block_q4_K *)x0)->qs;
            const uint8_t *sc = q5 ? ((const eli_block_q5_K *)x0)->scales : ((const eli_block_q4_K *)x0)->scales;
            const __m256i qh = q5 ? loadu256(((const eli_block_q5_K *)x0)->qh) : _mm256_setzero_si256();
            const __m256i b = _mm256_broadcastsi128_si256(k4_scales(sc));
            const __m256i mins = k4_min_lanes(b, y + i);
            __m256i s0 = _mm256_setzero_si256(), s1 = _mm256_setzero_si256();
            for (int j = 0; j < 4; j++) {
                const __m256i q = loadu256(qs + 32 * j);
                __m256i lo = _mm256_and_si256(q, m4);
                __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
                if (q5) lo = _mm256_or_si256(lo, q5k_hbit(qh, 2 * j)), hi = _mm256_or_si256(hi, q5k_hbit(qh, 2 * j + 1));
                s0 = KACC(s0, _mm256_maddubs_epi16(lo, loadu256(yq + 64 * j)), K4_SC(b, 2 * j));
                s1 = KACC(s1, _mm256_maddubs_epi16(hi, loadu256(yq + 64 * j + 32)), K4_SC(b, 2 * j + 1));
            }
            __m256 d, dmin;
            k4_d(x0, y[i].d, &d, &dmin);
            acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(s0, s1)), d, acc[r]);
            acc[r] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(mins), dmin, acc[r]);
        }
    }
    for (int r = 0; r < nr; r++) s[r] = hsum_ps(acc[r]);
}

static inline __attribute__((always_inline)) void krows_q6(int64_t n, const int nr, const void *vx, size_t bx,
                                                           const void *vy, float *s) {
    const int64_t nb = n / ELI_QK_K;
    const eli_block_q8_K *y = vy;
    __m256 acc[ELI_KERNEL_MAX_NR];
    for (int r = 0; r < nr; r++) acc[r] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const int8_t *yq = y[i].qs;
        for (int r = 0; r < nr; r++) {
            const eli_block_q6_K *x = (const eli_block_q6_K *)((const uint8_t *)vx + (size_t)r * bx) + i;
            __m256i s0 = k6_offset_lanes(x, y + i), s1 = _mm256_setzero_si256();
            for (int h = 0; h < 2; h++) {
                const __m256i l0 = loadu256(x->ql + 64 * h), l1 = loadu256(x->ql + 64 * h + 32);
                const __m256i qh = loadu256(x->qh + 32 * h);
                const __m256i b = k6_scales_half(x->scales + 8 * h);
                const int8_t *yh = yq + 128 * h;
                s0 = KACC(s0, _mm256_maddubs_epi16(q6k_u(l0, l1, qh, 0), loadu256(yh)), K6_SC(b, 0));
                s1 = KACC(s1, _mm256_maddubs_epi16(q6k_u(l0, l1, qh, 1), loadu256(yh + 32)), K6_SC(b, 1));
                s0 = KACC(s0, _mm256_maddubs_epi16(q6k_u(l0, l1, qh, 2), loadu256(yh + 64)), K6_SC(b, 2));
                s1 = KACC(s1, _mm256_maddubs_epi16(q6k_u(l0, l1, qh, 3), loadu256(yh + 96)), K6_SC(b, 3));
            }
            const __m256 d = _mm256_set1_ps(h2f(&x->d) * y[i].d);
            acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(s0, s1)), d, acc[r]);
        }
    }
    for (int r = 0; r < nr; r++) s[r] = hsum_ps(acc[r]);
}

static inline __attribute__((always_inline)) void krows_q4_K(int64_t n, int nr, const void *vx, size_t bx, const void *vy, float *s) {
    krows_q45(n, nr, vx, bx, vy, s, 0);
}
static inline __attribute__((always_inline)) void krows_q5_K(int64_t n, int nr, const void *vx, size_t bx, const void *vy, float *s) {
    krows_q45(n, nr, vx, bx, vy, s, 1);
}
static inline __attribute__((always_inline)) void krows_q6_K(int64_t n, int nr, const void *vx, size_t bx, const void *vy, float *s) {
    krows_q6(n, nr, vx, bx, vy, s);
}

#define DEF_KROWS(NAME)                                                                                          \
    static void vec_dot_##NAME##_nr(int64_t n, int nr, const void *vx, size_t bx, const void *vy, float *s) {   \
        switch (nr) {                                                                                            \
        case 1: krows_##NAME(n, 1, vx, bx, vy, s); break;                                                        \
        case 2: krows_##NAME(n, 2, vx, bx, vy, s); break;                                                        \
        case 3: krows_##NAME(n, 3, vx, bx, vy, s); break;                                                        \
        default: krows_##NAME(n, 4, vx, bx, vy, s); break;                                                       \
        }                                                                                                        \
    }                                                                                                            \
    static float vec_dot_##NAME(int64_t n, const void *vx, const void *vy) {                                     \
        float s;                                                                                                 \
        krows_##NAME(n, 1, vx, 0, vy, &s);                                                                       \
        return s;                                                                                                \
    }

DEF_KROWS(q4_K)
DEF_KROWS(q5_K)
DEF_KROWS(q6_K)

#endif
