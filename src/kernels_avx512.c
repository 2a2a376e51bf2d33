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

/* the fp16 at p, converted, in all 8 lanes */
static inline __m256 h2f_bcast(const void *p) {
    uint16_t h;
    memcpy(&h, p, sizeof h);
    return _mm256_cvtph_ps(_mm_set1_epi16((short)h));
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

/* decode: nr rows against one activation row; the activation side is prepared once for all rows */
#define DEF_ROWS(NAME, XB, UX, OFF)                                                                              \
    static inline __attribute__((always_inline)) void rows_##NAME(int64_t n, const int nr, const void *vx,       \
                                                                  size_t bx, const void *vy, float *s) {         \
        const int64_t nb = n / 32;                                                                               \
        const eli_block_q8_0 *y = vy;                                                                            \
        __m256 acc[ELI_KERNEL_MAX_NR];                                                                           \
        for (int r = 0; r < nr; r++) acc[r] = _mm256_setzero_ps();                                               \
        for (int64_t ib = 0; ib < nb; ib++) {                                                                    \
            const __m256i yq = loadu256(y[ib].qs);                                                               \
            const __m256i no = neg_offset(yq, OFF);                                                              \
            const __m256 dy = h2f_bcast(&y[ib]);                                                                 \
            for (int r = 0; r < nr; r++) {                                                                       \
                const XB *x = (const XB *)((const uint8_t *)vx + (size_t)r * bx) + ib;                           \
                /* decode streams the matrix from DRAM: ask for the block 128 ahead */                            \
                _mm_prefetch((const char *)(x + 128), _MM_HINT_T0);                                               \
                const __m256i isum = _mm256_dpbusd_epi32(no, UX(x), yq);                                         \
                acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(h2f_bcast(x), dy), acc[r]);           \
            }                                                                                                    \
        }                                                                                                        \
        for (int r = 0; r < nr; r++) s[r] = hsum_ps(acc[r]);                                                     \
    }                                                                                                            \
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

/* prefill: up to ELI_KERNEL_MAX_GEMM_NR rows x ELI_KERNEL_MAX_NT tokens per call, in tiles of GRM x GNT
 * pairs (16 accumulators in registers; 8 rows x 2 tokens measured 11% faster than 4 x 4 and 2 x 8, as
 * the activation's offset is then shared by 8 rows). The blocks go in chunks of GCHUNK: per chunk the
 * tokens' fp16 scales are converted once for all the call's rows, and per group of GRM rows the scale
 * products d_x * d_y of every (row, token) pair once into dd (the FMA then takes its operand from memory,
 * broadcast), so a pair costs dpbusd + convert + FMA per block. (Converting the scales per group of 8
 * rows instead of per 32 took a quarter of the kernel's time.) Each tile runs over the chunk with its
 * accumulators loaded from and stored back to acc. Rows past nr and tokens past nt repeat the last valid
 * one (memory that exists); their results are dropped. */
#define GRM 8
#define GNT 2
#define GCHUNK 32
#define GGROUPS (ELI_KERNEL_MAX_GEMM_NR / GRM)

#define DEF_GEMM(NAME, XB, UX, OFF)                                                                              \
    static void gemm_##NAME(int64_t n, int nr, int nt, const void *vx, size_t bx, const void *vy, size_t by,    \
                            float *s, size_t bs) {                                                               \
        const int64_t nb = n / 32;                                                                               \
        const int ngr = (nr + GRM - 1) / GRM, ntp = (nt + GNT - 1) / GNT * GNT;                                  \
        const eli_block_q8_0 *yt[ELI_KERNEL_MAX_NT];                                                             \
        for (int t = 0; t < ntp; t++)                                                                            \
            yt[t] = (const eli_block_q8_0 *)((const uint8_t *)vy + (size_t)(t < nt ? t : nt - 1) * by);          \
        __m256 acc[GGROUPS][ELI_KERNEL_MAX_NT][GRM];                                                             \
        for (int g = 0; g < ngr; g++)                                                                            \
            for (int t = 0; t < ntp; t++)                                                                        \
                for (int r = 0; r < GRM; r++) acc[g][t][r] = _mm256_setzero_ps();                                \
        for (int64_t c0 = 0; c0 < nb; c0 += GCHUNK) {                                                            \
            const int cn = (int)(nb - c0 < GCHUNK ? nb - c0 : GCHUNK);                                           \
            float dy[GCHUNK][ELI_KERNEL_MAX_NT];                                                                 \
            for (int i = 0; i < cn; i++)                                                                         \
                for (int t = 0; t < ntp; t++) dy[i][t] = h2f(yt[t] + c0 + i);                                    \
            for (int g = 0; g < ngr; g++) {                                                                      \
                const XB *xr[GRM];                                                                               \
                for (int r = 0; r < GRM; r++) {                                                                  \
                    const int row = g * GRM + r < nr ? g * GRM + r : nr - 1;                                     \
                    xr[r] = (const XB *)((const uint8_t *)vx + (size_t)row * bx);                                \
                }                                                                                                \
                /* dd[i][t][r]: a block's products contiguous, so the tile reads them at fixed offsets */      \
                float dd[GCHUNK][ELI_KERNEL_MAX_NT][GRM];                                                        \
                for (int i = 0; i < cn; i++) {                                                                   \
                    float dx[GRM];                                                                               \
                    for (int r = 0; r < GRM; r++) dx[r] = h2f(xr[r] + c0 + i);                                   \
                    const __m256 dxv = _mm256_loadu_ps(dx);                                                      \
                    for (int t = 0; t < ntp; t++) _mm256_storeu_ps(dd[i][t], _mm256_mul_ps(dxv, _mm256_set1_ps(dy[i][t]))); \
                }                                                                                                \
                for (int t0 = 0; t0 < ntp; t0 += GNT) {                                                          \
                    __m256 a[GNT][GRM];                                                                          \
                    for (int t = 0; t < GNT; t++)                                                                \
                        for (int r = 0; r < GRM; r++) a[t][r] = acc[g][t0 + t][r];                               \
                    for (int i = 0; i < cn; i++) {                                                               \
                        const int64_t ib = c0 + i;                                                               \
                        __m256i u[GRM];                                                                          \
                        for (int r = 0; r < GRM; r++) u[r] = UX(xr[r] + ib);                                     \
                        for (int t = 0; t < GNT; t++) {                                                          \
                            const __m256i yq = loadu256(yt[t0 + t][ib].qs);                                      \
                            const __m256i no = neg_offset(yq, OFF);                                              \
                            for (int r = 0; r < GRM; r++)                                                        \
                                a[t][r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_dpbusd_epi32(no, u[r], yq)), \
                                                          _mm256_set1_ps(dd[i][t0 + t][r]), a[t][r]);            \
                        }                                                                                        \
                    }                                                                                            \
                    for (int t = 0; t < GNT; t++)                                                                \
                        for (int r = 0; r < GRM; r++) acc[g][t0 + t][r] = a[t][r];                               \
                }                                                                                                \
            }                                                                                                    \
        }                                                                                                        \
        for (int t = 0; t < nt; t++)                                                                             \
            for (int r = 0; r < nr; r++) s[(size_t)t * bs + r] = hsum_ps(acc[r / GRM][t][r % GRM]);              \
    }

_Static_assert(ELI_KERNEL_MAX_GEMM_NR % GRM == 0 && ELI_KERNEL_MAX_NT % GNT == 0, "tiles must divide the call");

DEF_ROWS(q4_0, eli_block_q4_0, ux_q4_0, 8)
DEF_ROWS(q5_0, eli_block_q5_0, ux_q5_0, 16)
DEF_ROWS(q8_0, eli_block_q8_0, ux_q8_0, 128)
DEF_GEMM(q4_0, eli_block_q4_0, ux_q4_0, 8)
DEF_GEMM(q5_0, eli_block_q5_0, ux_q5_0, 16)
DEF_GEMM(q8_0, eli_block_q8_0, ux_q8_0, 128)

/* the table (data only: nothing here runs before kernels.c has checked CPUID); empty entries keep the
 * AVX2 kernels */
const eli_kernels eli_kernels_avx512_table = {
    .name = "avx512",
    .vec_dot = {[ELI_TYPE_Q4_0] = vec_dot_q4_0, [ELI_TYPE_Q5_0] = vec_dot_q5_0, [ELI_TYPE_Q8_0] = vec_dot_q8_0},
    .vec_dot_nr = {[ELI_TYPE_Q4_0] = vec_dot_q4_0_nr, [ELI_TYPE_Q5_0] = vec_dot_q5_0_nr, [ELI_TYPE_Q8_0] = vec_dot_q8_0_nr},
    .nr = {[ELI_TYPE_Q4_0] = 4, [ELI_TYPE_Q5_0] = 4, [ELI_TYPE_Q8_0] = 4},
    .gemm = {[ELI_TYPE_Q4_0] = gemm_q4_0, [ELI_TYPE_Q5_0] = gemm_q5_0, [ELI_TYPE_Q8_0] = gemm_q8_0},
    .gemm_nr = {[ELI_TYPE_Q4_0] = ELI_KERNEL_MAX_GEMM_NR, [ELI_TYPE_Q5_0] = ELI_KERNEL_MAX_GEMM_NR,
                [ELI_TYPE_Q8_0] = ELI_KERNEL_MAX_GEMM_NR},
};

#else
/* Built without the AVX-512 flags (non-x86 host or a compiler without them): no table. */
const eli_kernels eli_kernels_avx512_table = {.name = NULL};
#endif
