/* Helpers shared by the x86 kernel files (kernels_avx2.c, kernels_avx512.c), which include this after
 * <immintrin.h> and are compiled with at least -mavx2 -mfma -mf16c. Not a public header. */
#ifndef ELI_KERNELS_X86_H
#define ELI_KERNELS_X86_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

static inline float h2f(const void *p) {
    uint16_t h;
    memcpy(&h, p, sizeof h);
    return _cvtsh_ss(h);
}

/* ((v0 + v4) + (v2 + v6)) + ((v1 + v5) + (v3 + v7)): quants.c's lanes8_total */
static inline float hsum_ps(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline __m256i loadu256(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }

/* 32 nibbles -> 32 bytes: the low nibbles of qs[0..15] in bytes 0..15, the high ones in bytes 16..31 */
static inline __m256i nibbles32(const uint8_t *qs) {
    const __m128i t = _mm_loadu_si128((const __m128i *)qs);
    const __m256i b = _mm256_inserti128_si256(_mm256_castsi128_si256(t), _mm_srli_epi16(t, 4), 1);
    return _mm256_and_si256(b, _mm256_set1_epi8(0x0F));
}

/* byte j = 0xFF when bit j of the 32-bit little-endian word at p is set, else 0 */
static inline __m256i bits32(const uint8_t *p) {
    uint32_t w;
    memcpy(&w, p, sizeof w);
    const __m256i sel = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3,
                                         3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    const __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32((int)w), sel);
    return _mm256_cmpeq_epi8(_mm256_and_si256(bytes, bit), bit);
}

#endif
