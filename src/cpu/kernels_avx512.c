/* AVX-512 kernels (F + BW + VL + VNNI) for the 32-element formats whose weights are an unsigned byte
 * minus a constant: Q4_0 (nibble - 8), Q5_0 (5-bit - 16) and Q8_0 (byte ^ 0x80 = q + 128, minus 128),
 * and for the K-quants Q4_K / Q5_K / Q6_K (below: VPDPWSSD for their scale multiply-accumulate).
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
#include "fp_exact.h"

#include "kernels.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512VNNI__) && \
    defined(__FMA__) && defined(__F16C__)

#include <immintrin.h>
#include <string.h>

#include "kernels_x86.h"
/* the K-quant scale multiply-accumulate of the decode kernels in kernels_x86_kq.h: one VPDPWSSD */
#define KACC(acc, p, sc) _mm256_dpwssd_epi32(acc, p, sc)
#include "kernels_x86_kq.h"

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

/* packed Q4_0 (pack.h, kernels_x86_packed.h): a packed group's 16 rows per 512-bit vector, 2 x 4 prefill tiles
 * (8 int32 and 8 float accumulators; measured 2 x 2: 89, 1 x 8: 95-121, 2 x 4: 122 GMAC/s on the earlier
 * transposing kernel); a dword group is one VPDPBUSD, the activation dword broadcast from memory once for
 * the tile's two row vectors */
#define Q4_W 16
typedef __m512i q4vi;
typedef __m512 q4vf;
#define Q4_TR 2
#define Q4_TT 4
#define Q4_TR_SMALL 4
#define PF_TR 2
#define PF_TR_SMALL 4
#define PF_TT 8
#define q4_raw(p, h) ((void)(h), _mm512_loadu_si512(p))
#define pk_f16(p, h) ((void)(h), _mm512_cvtph_ps(loadu256(p)))
#define pk_u8(p, h) ((void)(h), _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(p))))
#define PK_DOT4(a, w, p) _mm512_dpbusd_epi32(a, w, _mm512_set1_epi32(q4_ld32(p)))
#define Q4V(op) _mm512_##op
#define Q4_AND _mm512_and_si512
#define Q4_OR _mm512_or_si512
#define Q4_ZERO _mm512_setzero_si512
#define Q4_ACC0(o) _mm512_set1_epi32(o)
#define Q4_STEP(a, w, p) _mm512_dpbusd_epi32(a, w, _mm512_set1_epi32(q4_ld32(p)))
#define Q4_END(a, o) (a)
#include "kernels_x86_packed.h"

/* ---------------------------------------------------------------------------------------------------
 * K-quants (Q4_K, Q5_K, Q6_K against Q8_K): the reference's lanes (quants.c, klanes_chunk) as in
 * kernels_avx2.c, with VPDPWSSD doing the scale madd and the int32 accumulation in one instruction
 * (AVX2: vpmaddwd + vpaddd), and in the prefill microkernel a 4 x 4 tile of int32 sums in registers.
 * ------------------------------------------------------------------------------------------------- */

/* the same in inline assembly, for the prefill tile: GCC's register allocation of the intrinsic moves the
 * 16 sums between ymm16-31 and ymm0-15 around every instruction (measured Q4_K: 76 against 81 GMAC/s) */
static inline __m256i kacc_asm(__m256i acc, __m256i p, __m256i sc) {
    __asm__("vpdpwssd %2, %1, %0" : "+v"(acc) : "v"(p), "vm"(sc));
    return acc;
}


/* Prefill: KRM rows x up to ELI_KERNEL_MAX_NT tokens per call. Per super-block the rows are unpacked once
 * (kx_t: 8 chunks of unsigned quants with their scale vectors, the bsums weights, d and dmin), then every
 * group of KNT tokens (the last group: what is left, 1..3, so that a verify batch of 2 tokens does not pay
 * for 4) runs the 8 chunks with the KRM x TT int32 sums in registers, followed by each pair's float steps.
 * Rows past nr repeat the last valid one; their results are dropped. */
#define KRM KX_RM
#define KNT 4
/* rows ahead (two calls) that a call prefetches, super-block by super-block: KRM row streams at once defeat
 * the hardware prefetcher (measured, one thread, Q6_K 65536 x 1536 from DRAM: 2 tokens 12.8 against 4.7 ms
 * with it; one row at a time, the decode kernel, 2.7 ms per token) */
#define KPF (2 * KRM)

/* TT tokens (yb) x the KRM unpacked rows of one super-block into their chains acc[t][r] */
static inline __attribute__((always_inline)) void kgemm_tile(const int TT, const int kmin, const kx_t *k,
                                                             const eli_block_q8_K *const yb[],
                                                             const float dd[][KRM], const float dm[][KRM],
                                                             __m256 acc[][KRM]) {
    /* Q6_K: the offset lanes start the sums; the min lanes are made after the chunks */
    __m256i a[KNT][KRM];
    for (int t = 0; t < TT; t++)
        for (int r = 0; r < KRM; r++)
            a[t][r] = kmin ? _mm256_setzero_si256() : _mm256_madd_epi16(loadu256(yb[t]->bsums), k->bw[r]);
    for (int j = 0; j < 8; j++)
        for (int t = 0; t < TT; t++) {
            const __m256i yq = loadu256(yb[t]->qs + 32 * j);
            for (int r = 0; r < KRM; r++) a[t][r] = kacc_asm(a[t][r], _mm256_maddubs_epi16(k->q[r][j], yq), k->sc[r][j]);
        }
    for (int t = 0; t < TT; t++)
        for (int r = 0; r < KRM; r++) {
            acc[t][r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(a[t][r]), _mm256_set1_ps(dd[t][r]), acc[t][r]);
            if (kmin)
                acc[t][r] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(loadu256(yb[t]->bsums), k->bw[r])),
                                             _mm256_set1_ps(dm[t][r]), acc[t][r]);
        }
}

#define DEF_KGEMM(NAME, XB, KX, KMIN)                                                                            \
    static void gemm_##NAME(int64_t n, int nr, int nt, const void *vx, size_t bx, const void *vy, size_t by,    \
                            float *s, size_t bs) {                                                               \
        const int64_t nb = n / ELI_QK_K;                                                                         \
        const XB *xr[KRM];                                                                                       \
        const eli_block_q8_K *yt[ELI_KERNEL_MAX_NT];                                                             \
        for (int r = 0; r < KRM; r++) xr[r] = (const XB *)((const uint8_t *)vx + (size_t)(r < nr ? r : nr - 1) * bx); \
        for (int t = 0; t < nt; t++) yt[t] = (const eli_block_q8_K *)((const uint8_t *)vy + (size_t)t * by);     \
        __m256 acc[ELI_KERNEL_MAX_NT][KRM];                                                                      \
        for (int t = 0; t < nt; t++)                                                                             \
            for (int r = 0; r < KRM; r++) acc[t][r] = _mm256_setzero_ps();                                       \
        kx_t k;                                                                                                  \
        for (int64_t i = 0; i < nb; i++) {                                                                       \
            const uint8_t *xi[KRM];                                                                              \
            for (int r = 0; r < KRM; r++) xi[r] = (const uint8_t *)(xr[r] + i);                                  \
            for (int r = KPF; r < KPF + KRM; r++)                                                                \
                for (size_t l = 0; l < sizeof(XB); l += 64)                                                      \
                    _mm_prefetch((const char *)vx + (size_t)r * bx + (size_t)i * sizeof(XB) + l, _MM_HINT_T0);   \
            KX(&k, xi);                                                                                          \
            /* the scale products of every (token, row) pair, computed before they are needed */                \
            float dd[ELI_KERNEL_MAX_NT][KRM], dm[ELI_KERNEL_MAX_NT][KRM];                                        \
            const __m128 dx = _mm_loadu_ps(k.d), mx = _mm_loadu_ps(k.dmin);                                      \
            const eli_block_q8_K *yb[ELI_KERNEL_MAX_NT];                                                         \
            for (int t = 0; t < nt; t++) {                                                                       \
                yb[t] = yt[t] + i;                                                                               \
                const __m128 dy = _mm_set1_ps(yt[t][i].d);                                                       \
                _mm_storeu_ps(dd[t], _mm_mul_ps(dx, dy));                                                        \
                if (KMIN) _mm_storeu_ps(dm[t], _mm_mul_ps(mx, dy));                                              \
            }                                                                                                    \
            int t0 = 0;                                                                                          \
            for (; t0 + KNT <= nt; t0 += KNT) kgemm_tile(KNT, KMIN, &k, yb + t0, dd + t0, dm + t0, acc + t0);    \
            switch (nt - t0) {                                                                                   \
            case 3: kgemm_tile(3, KMIN, &k, yb + t0, dd + t0, dm + t0, acc + t0); break;                         \
            case 2: kgemm_tile(2, KMIN, &k, yb + t0, dd + t0, dm + t0, acc + t0); break;                         \
            case 1: kgemm_tile(1, KMIN, &k, yb + t0, dd + t0, dm + t0, acc + t0); break;                         \
            default: break;                                                                                      \
            }                                                                                                    \
        }                                                                                                        \
        for (int t = 0; t < nt; t++)                                                                             \
            for (int r = 0; r < nr; r++) s[(size_t)t * bs + r] = hsum_ps(acc[t][r]);                             \
    }

_Static_assert(ELI_KERNEL_MAX_NT % KNT == 0, "token groups must divide the call");

DEF_KGEMM(q4_K, eli_block_q4_K, kx_q4_K, 1)
DEF_KGEMM(q5_K, eli_block_q5_K, kx_q5_K, 1)
DEF_KGEMM(q6_K, eli_block_q6_K, kx_q6_K, 0)

/* float weights (kernels_x86.h): the same ymm chains as AVX2, gemm tiles of 4 rows x 3 tokens in 32 registers */
ELI_X86_FLOAT(f16, FL_F16)
ELI_X86_FLOAT(bf16, FL_BF16)
ELI_X86_FLOAT(f32, FL_F32)

/* the table (data only: nothing here runs before kernels.c has checked CPUID); empty entries keep the
 * AVX2 kernels */
const eli_kernels eli_kernels_avx512_table = {
    .name = "avx512",
    .vec_dot = {[ELI_TYPE_F32] = vec_dot_f32, [ELI_TYPE_F16] = vec_dot_f16, [ELI_TYPE_BF16] = vec_dot_bf16, [ELI_TYPE_Q4_0] = vec_dot_q4_0, [ELI_TYPE_Q5_0] = vec_dot_q5_0, [ELI_TYPE_Q8_0] = vec_dot_q8_0,
                [ELI_TYPE_Q4_K] = vec_dot_q4_K, [ELI_TYPE_Q5_K] = vec_dot_q5_K, [ELI_TYPE_Q6_K] = vec_dot_q6_K},
    .vec_dot_nr = {[ELI_TYPE_Q4_0] = vec_dot_q4_0_nr, [ELI_TYPE_Q5_0] = vec_dot_q5_0_nr, [ELI_TYPE_Q8_0] = vec_dot_q8_0_nr,
                   [ELI_TYPE_Q4_K] = vec_dot_q4_K_nr, [ELI_TYPE_Q5_K] = vec_dot_q5_K_nr, [ELI_TYPE_Q6_K] = vec_dot_q6_K_nr},
    .nr = {[ELI_TYPE_Q4_0] = 4, [ELI_TYPE_Q5_0] = 4, [ELI_TYPE_Q8_0] = 4, [ELI_TYPE_Q4_K] = 4, [ELI_TYPE_Q5_K] = 4,
           [ELI_TYPE_Q6_K] = 4},
    .gemv = {[ELI_TYPE_F32] = gemv_f32, [ELI_TYPE_F16] = gemv_f16, [ELI_TYPE_BF16] = gemv_bf16, [ELI_TYPE_Q4_0] = gemv_q4_0, [ELI_TYPE_Q5_0] = gemv_q5_0, [ELI_TYPE_Q8_0] = gemv_q8_0},
    .gemm = {[ELI_TYPE_F32] = gemm_f32, [ELI_TYPE_F16] = gemm_f16, [ELI_TYPE_BF16] = gemm_bf16, [ELI_TYPE_Q4_0] = gemm_q4_0, [ELI_TYPE_Q5_0] = gemm_q5_0, [ELI_TYPE_Q8_0] = gemm_q8_0,
             [ELI_TYPE_Q4_K] = gemm_q4_K, [ELI_TYPE_Q5_K] = gemm_q5_K, [ELI_TYPE_Q6_K] = gemm_q6_K},
    /* the K-quants unpack KRM rows per super-block */
    .gemm_nr = {[ELI_TYPE_F32] = FL_GEMM_NR, [ELI_TYPE_F16] = FL_GEMM_NR, [ELI_TYPE_BF16] = FL_GEMM_NR,
                [ELI_TYPE_Q4_0] = ELI_KERNEL_MAX_GEMM_NR, [ELI_TYPE_Q5_0] = ELI_KERNEL_MAX_GEMM_NR,
                [ELI_TYPE_Q8_0] = ELI_KERNEL_MAX_GEMM_NR, [ELI_TYPE_Q4_K] = KRM, [ELI_TYPE_Q5_K] = KRM,
                [ELI_TYPE_Q6_K] = KRM},
    .packed_gemv = {[ELI_TYPE_Q4_0] = packed_gemv_q4_0, [ELI_TYPE_F16] = packed_gemv_f16, [ELI_TYPE_Q4_K] = packed_gemv_q4_K},
    .packed_gemm = {[ELI_TYPE_Q4_0] = packed_gemm_q4_0, [ELI_TYPE_F16] = packed_gemm_f16, [ELI_TYPE_Q4_K] = packed_gemm_q4_K},
};

#else
/* Built without the AVX-512 flags (non-x86 host or a compiler without them): no table. */
const eli_kernels eli_kernels_avx512_table = {.name = NULL};
#endif
