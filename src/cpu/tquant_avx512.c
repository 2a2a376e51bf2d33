/* AVX-512 (F + BW + VL + VNNI) kernels of the rotated-codebook formats: the tq4_0 dot products and the tbq
 * scores with VPDPWSSD doing the per-16 multiplier product and the int32 accumulation in one instruction
 * (AVX2 needs vpmaddwd + vpaddd); everything else stays AVX2 (kernels.c lays this over the AVX-512 table
 * after CPUID). 256-bit vectors, as in kernels_avx512.c. */
#include "fp_exact.h"

#include "kernels.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512VNNI__) && \
    defined(__FMA__) && defined(__F16C__)

#define TBQ_ACC(acc, p16, ms) _mm256_dpwssd_epi32(acc, p16, ms)
#include "tquant_x86.h"

const eli_kernels eli_tquant_avx512_table = {
    .vec_dot = {[ELI_TYPE_TQ4_0] = vec_dot_tq4_0},
    .gemm = {[ELI_TYPE_TQ4_0] = gemm_tq4_0},
    .gemm_nr = {[ELI_TYPE_TQ4_0] = 8},
    .kvq = {.score = {score_tbq, score_tbq}},
};

#else
/* Built without the AVX-512 flags: no kernels. */
const eli_kernels eli_tquant_avx512_table = {.name = NULL};
#endif
