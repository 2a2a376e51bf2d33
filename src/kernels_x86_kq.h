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

#endif
