/* AVX-512 kernels (F + BW + VL + VNNI) for the 32-element formats whose weights are an unsigned byte
 * minus a constant: Q4_0 (nibble - 8), Q5_0 (5-bit - 16) and Q8_0 (byte ^ 0x80 = q + 128, minus 128).
 * This file alone is compiled with the AVX-512 flags (CMakeLists.txt); kernels.c lays its table over
 * the AVX2 one (every other format stays AVX2) after CPUID and XGETBV say the CPU and the OS support it.
 *
 * The vectors are 256 bits wide (AVX512VL): a 32-element block pair fits one, and on the cores measured
 * here 512-bit operations run as two 256-bit halves anyway. What AVX-512 adds is VPDPBUSD, which does the
 * u8 x s8 products, their 4-element sums and the int32 accumulation in one instruction (AVX2 needs
 * vpmaddubsw + vpmaddwd plus the sign trick), and 32 vector registers, which hold an 8 x 2 prefill tile of accumulators.
 *
 * Bit-exact with quants.c (lanes8_fma): lane l of dpbusd sums elements 4l..4l+3 of a block, exactly the
 * reference's integer lane; the offset is folded in by starting the accumulation at -offset * (the lane's
 * activation sum); then one FMA per block with d = d_x * d_y and the lanes8_total tree at the end. */
#if defined(__FAST_MATH__)
#error "kernels_avx512.c must not be built with -ffast-math"
#endif
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include "kernels.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512VNNI__) && \
    defined(__FMA__) && defined(__F16C__)

#include <immintrin.h>
#include <string.h>

#include "kernels_x86.h"

/* nibbles32 in one instruction fewer: the 16 bytes broadcast to both halves, the upper half shifted by 4
 * with AVX512BW's per-word variable shift */
static inline __m256i nibbles32_bw(const uint8_t *qs) {
    const __m256i b = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qs));
    const __m256i sh = _mm256_setr_epi16(0, 0, 0, 0, 0, 0, 0, 0, 4, 4, 4, 4, 4, 4, 4, 4);
    return _mm256_and_si256(_mm256_srlv_epi16(b, sh), _mm256_set1_epi8(0x0F));
}

/* Per format: UX(xb) = the block's 32 weights as unsigned bytes (element order), OFF = what to subtract */
static inline __m256i ux_q4_0(const eli_block_q4_0 *x) { return nibbles32_bw(x->qs); }
static inline __m256i ux_q5_0(const eli_block_q5_0 *x) {
    return _mm256_or_si256(nibbles32_bw(x->qs), _mm256_and_si256(bits32(x->qh), _mm256_set1_epi8(0x10)));
}
static inline __m256i ux_q8_0(const eli_block_q8_0 *x) {
    return _mm256_xor_si256(loadu256(x->qs), _mm256_set1_epi8((char)0x80));
}

/* -off * (the activation block's 4-element lane sums): where a pair's dpbusd starts */
static inline __m256i neg_offset(__m256i yq, int off) {
    return _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8((char)off), yq));
}

/* decode and prefill (kernels_x86.h); the prefill in 8 x 2 tiles, measured 11% faster than 4 x 4 and
 * 2 x 8, as the activation's offset is then shared by 8 rows */
typedef struct {
    __m256i q, no;
} yp512_t;
static inline yp512_t yprep_off(__m256i yq, int off) {
    const yp512_t p = {yq, neg_offset(yq, off)};
    return p;
}
#define YP_OFF8(yb) yprep_off(loadu256((yb)->qs), 8)
#define YP_OFF16(yb) yprep_off(loadu256((yb)->qs), 16)
#define YP_OFF128(yb) yprep_off(loadu256((yb)->qs), 128)
#define PAIR_VNNI(w, p) _mm256_dpbusd_epi32((p).no, w, (p).q)

ELI_X86_ROWS32(q4_0, eli_block_q4_0, eli_block_q8_0, ux_q4_0, yp512_t, YP_OFF8, PAIR_VNNI, 0)
ELI_X86_ROWS32(q5_0, eli_block_q5_0, eli_block_q8_0, ux_q5_0, yp512_t, YP_OFF16, PAIR_VNNI, 0)
ELI_X86_ROWS32(q8_0, eli_block_q8_0, eli_block_q8_0, ux_q8_0, yp512_t, YP_OFF128, PAIR_VNNI, 0)
ELI_X86_GEMM32(q4_0, eli_block_q4_0, eli_block_q8_0, __m256i, ux_q4_0, yp512_t, YP_OFF8, PAIR_VNNI, 8, 2, 0)
ELI_X86_GEMM32(q5_0, eli_block_q5_0, eli_block_q8_0, __m256i, ux_q5_0, yp512_t, YP_OFF16, PAIR_VNNI, 8, 2, 0)
ELI_X86_GEMM32(q8_0, eli_block_q8_0, eli_block_q8_0, __m256i, ux_q8_0, yp512_t, YP_OFF128, PAIR_VNNI, 8, 2, 0)

/* the table (data only: nothing here runs before kernels.c has checked CPUID); empty entries keep the
 * AVX2 kernels */
const eli_kernels eli_kernels_avx512_table = {
    .name = "avx512",
    .vec_dot = {[ELI_TYPE_Q4_0] = vec_dot_q4_0, [ELI_TYPE_Q5_0] = vec_dot_q5_0, [ELI_TYPE_Q8_0] = vec_dot_q8_0},
    .vec_dot_nr = {[ELI_TYPE_Q4_0] = vec_dot_q4_0_nr, [ELI_TYPE_Q5_0] = vec_dot_q5_0_nr, [ELI_TYPE_Q8_0] = vec_dot_q8_0_nr},
    .nr = {[ELI_TYPE_Q4_0] = 4, [ELI_TYPE_Q5_0] = 4, [ELI_TYPE_Q8_0] = 4},
    .gemv = {[ELI_TYPE_Q4_0] = gemv_q4_0, [ELI_TYPE_Q5_0] = gemv_q5_0, [ELI_TYPE_Q8_0] = gemv_q8_0},
    .gemm = {[ELI_TYPE_Q4_0] = gemm_q4_0, [ELI_TYPE_Q5_0] = gemm_q5_0, [ELI_TYPE_Q8_0] = gemm_q8_0},
    .gemm_nr = {[ELI_TYPE_Q4_0] = ELI_KERNEL_MAX_GEMM_NR, [ELI_TYPE_Q5_0] = ELI_KERNEL_MAX_GEMM_NR,
                [ELI_TYPE_Q8_0] = ELI_KERNEL_MAX_GEMM_NR},
};

#else
/* Built without the AVX-512 flags (non-x86 host or a compiler without them): no table. */
const eli_kernels eli_kernels_avx512_table = {.name = NULL};
#endif
