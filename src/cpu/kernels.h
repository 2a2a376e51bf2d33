/* The compute kernels behind the forward pass, as a table of function pointers chosen once at run time.
 *
 * eli_kernels_reference() is the scalar code of quants.c (plus plain loops for attention): the "reference"
 * backend. eli_kernels_best() picks the fastest table this CPU supports (CPUID, see cpu.h): AVX2+FMA+F16C
 * when present; on aarch64 NEON with dotprod (HWCAP_ASIMDDP) when present, else plain NEON; else the
 * reference. eli_kernels_named picks one by name (the CPU executor's "kernels" option, ELI_KERNELS in
 * config.h); a table the CPU cannot run is never returned.
 *
 * Contract, tested by tests/test_kernels.c on random data:
 *  - quantize[act] produces the same bytes as the reference quantizer of that activation format;
 *  - vec_dot[w] of the integer formats (Q4_0 .. Q6_K) returns bit-identical floats to the reference:
 *    same integer sums and the same float operations in the same order per block;
 *  - vec_dot of F32 / F16 / BF16 may reorder the (double) accumulation: normalised MSE <= 1e-7;
 *  - vec_dot_nr computes nr rows at once and returns, for each row, exactly what vec_dot returns for
 *    it, so the grouping of rows (which depends on the thread split) never changes a result;
 *  - gemv (decode) computes any number of rows one after the other against one activation row, with
 *    the activation side prepared once for all of them, and returns for each row exactly what vec_dot
 *    returns;
 *  - gemm (the prefill microkernel) computes a tile of nr rows x nt tokens, unpacking each weight block
 *    once for all the tile's tokens, and returns for every (row, token) exactly what vec_dot returns,
 *    so neither the tiling nor the thread split changes a result;
 *  - packed_gemv / packed_gemm return bit-identical floats to the reference's (pack.c), the dot order of
 *    pack.h, which is not vec_dot's: a packed matrix is only ever multiplied through them. */
#ifndef ELI_KERNELS_H
#define ELI_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "kvquant.h"
#include "quants.h"

#define ELI_KERNEL_MAX_NR 8
#define ELI_KERNEL_MAX_GEMM_NR 32 /* rows per gemm call */
#define ELI_KERNEL_MAX_NT 16 /* tokens per gemm call */

/* s[i] = dot(row i of x, y) for i < nr; rows are bx bytes apart; y is in the weight's vec_dot_type. */
typedef void (*eli_vec_dot_nr_fn)(int64_t n, int nr, const void *x, size_t bx, const void *y, float *s);
/* s[i] = dot(row i of x, y) for i < rows, the rows streamed one after the other (bx bytes apart). */
typedef void (*eli_gemv_fn)(int64_t n, int64_t rows, const void *x, size_t bx, const void *y, float *s);
/* s[t * bs + i] = dot(row i of x, token t of y) for i < nr (<= gemm_nr), t < nt (<= ELI_KERNEL_MAX_NT);
 * rows are bx bytes apart, tokens (in the weight's vec_dot_type) by bytes apart. */
typedef void (*eli_gemm_fn)(int64_t n, int nr, int nt, const void *x, size_t bx, const void *y, size_t by, float *s,
                            size_t bs);
/* Fused attention over nc consecutive cache rows of d elements (F32 or F16, rows rb bytes apart) for the G
 * query heads that share them (float accumulation):
 *   qk: s[g * ss + j] = dot(row j, q + g * d);
 *   pv: out[g * d + i] += p[g * ss + j] * row j [i], for j = 0 .. nc-1 in that order, one rounding per term
 *       (FMA where the table has it), the values held in registers across the rows. */
typedef void (*eli_attn_qk_fn)(int64_t d, int nc, const void *rows, size_t rb, int G, const float *q, float *s,
                               size_t ss);
typedef void (*eli_attn_pv_fn)(int64_t d, int nc, const void *rows, size_t rb, int G, const float *p, size_t ss,
                               float *out);

typedef struct eli_kernels {
    const char *name;
    /* per weight type (ggml id): dot with an activation row in the type's vec_dot_type; NULL = none */
    eli_vec_dot_fn vec_dot[ELI_TYPE_COUNT];
    eli_vec_dot_nr_fn vec_dot_nr[ELI_TYPE_COUNT]; /* NULL = call vec_dot per row */
    int nr[ELI_TYPE_COUNT];                       /* rows per vec_dot_nr call (<= ELI_KERNEL_MAX_NR) */
    eli_gemv_fn gemv[ELI_TYPE_COUNT];             /* NULL = call vec_dot per row */
    eli_gemm_fn gemm[ELI_TYPE_COUNT];             /* NULL = none (vec_dot_nr per token) */
    int gemm_nr[ELI_TYPE_COUNT];                  /* rows per gemm call (<= ELI_KERNEL_MAX_GEMM_NR) */
    /* per weight type: decode and prefill over the packed layout of pack.h (x at the start of a run of
     * ELI_PACK_ROWS rows, up to one run per gemm call); NULL = this table multiplies the row-major data */
    eli_gemv_fn packed_gemv[ELI_TYPE_COUNT];
    eli_gemm_fn packed_gemm[ELI_TYPE_COUNT];
    /* per activation type (Q8_0, Q8_1, Q8_K, F16, BF16): f32 row -> that format */
    eli_quantize_fn quantize[ELI_TYPE_COUNT];
    /* per KV cache type (F32, F16): the fused attention's two halves */
    eli_attn_qk_fn attn_qk[ELI_TYPE_COUNT];
    eli_attn_pv_fn attn_pv[ELI_TYPE_COUNT];
    /* per low-bit KV type (kvquant.h): attention straight from the quantized cache */
    eli_kvq_kernels kvq;
    /* n floats */
    void (*f16_to_f32)(int64_t n, const eli_fp16 *x, float *y);
    void (*scale_f32)(int64_t n, float a, float *y);                /* y *= a */
    /* x = c * tanh(x / c) (the final logit softcap): within 4e-7 relative of c * tanhf(x * (1 / c)) */
    void (*softcap_f32)(int64_t n, float c, float *x);
    /* x[i] = exp(x[i] - m) for x[i] <= m, returning their sum (the fused attention's softmax numerators):
     * within 4e-7 relative of expf, results below 1e-37 may come out as 0 or as tiny values */
    float (*exp_sum_f32)(int64_t n, float m, float *x);
} eli_kernels;

/* The low-bit KV kernels (kvquant.h) of table k for codec c. */
static inline void eli_kvq_score(const eli_kernels *k, const eli_kvq *c, int nc, const uint8_t *rows, size_t rb, int G,
                                 const void *qp, float *s, size_t ss) {
    k->kvq.score[c->type - ELI_KVQ_FIRST](c, nc, rows, rb, G, qp, s, ss);
}
static inline void eli_kvq_accumulate(const eli_kernels *k, const eli_kvq *c, int nc, const uint8_t *rows, size_t rb,
                                      int G, const float *p, size_t ss, float *acc) {
    eli_kvq_accum_decoded(c, nc, rows, rb, G, p, ss, acc, k->kvq.decode[c->type - ELI_KVQ_FIRST], k->kvq.pv);
}

const eli_kernels *eli_kernels_reference(void);
const eli_kernels *eli_kernels_best(void);
/* The AVX2 table, or NULL when not compiled in or the CPU lacks AVX2/FMA/F16C. */
const eli_kernels *eli_kernels_avx2(void);
/* The AVX2 table with the AVX-512 VNNI kernels over it, or NULL when not compiled in or the CPU lacks any
 * of AVX-512 F/BW/VL/VNNI (or the OS does not save the ZMM state). */
const eli_kernels *eli_kernels_avx512(void);
/* The aarch64 NEON tables (kernels_neon.c): plain NEON, NULL when not an aarch64 build; the one using the
 * dotprod instructions (SDOT), NULL unless the CPU has them. */
const eli_kernels *eli_kernels_neon(void);
const eli_kernels *eli_kernels_neon_dotprod(void);
/* The table of this name ("reference", "avx2", "avx512", "neon", "neon-dotprod"), NULL when unknown or when
 * this CPU cannot run it. */
const eli_kernels *eli_kernels_named(const char *name);
/* Every table this CPU can run, the reference first, into out (at most cap); returns how many. */
int eli_kernels_all(const eli_kernels **out, int cap);

#endif
