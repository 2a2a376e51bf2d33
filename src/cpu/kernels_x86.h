/* Helpers shared by the x86 kernel files (kernels_avx2.c, kernels_avx512.c), which include this after
 * <immintrin.h> and are compiled with at least -mavx2 -mfma -mf16c. Not a public header. */
#ifndef ELI_KERNELS_X86_H
#define ELI_KERNELS_X86_H

#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kernels.h"

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

/* the fp16 at p, converted, in all 8 lanes */
static inline __m256 h2f_bcast(const void *p) {
    uint16_t h;
    memcpy(&h, p, sizeof h);
    return _mm256_cvtph_ps(_mm_set1_epi16((short)h));
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

/* The prefill microkernel of the 32-element formats (quants.c, lanes8_fma), shared like ELI_X86_ROWS32 by
 * the AVX2 and the AVX-512 tables, which differ in how a block pair's 8 int32 lane sums are computed:
 *   WX_T w = UX(xb)        a weight block prepared once per tile (GNT tokens),
 *   YP_T p = YPREP(yb)     an activation block prepared once per tile (GRM rows),
 *   PAIR(w, p)             the pair's 8 int32 lane sums (lane l: elements 4l..4l+3).
 * Up to ELI_KERNEL_MAX_GEMM_NR rows x ELI_KERNEL_MAX_NT tokens per call, in tiles of GRM x GNT pairs, each
 * with one 8-lane accumulator doing exactly the one-row kernel's operations. The blocks go in chunks of
 * X86_GCHUNK: per chunk the tokens' fp16 scales are converted once for all the call's rows, and per group
 * of GRM rows the scale products d_x * d_y of every (row, token) pair once into dd, so a pair's float work
 * per block is one convert and one FMA with a broadcast operand. (Converting the scales per pair, or per
 * call of 8 rows, took up to a quarter of the kernel's time.) Q4_1 / Q5_1 (HAS_MIN) add their min terms
 * m_x * s_y per pair, in block order, in the same pass. Each tile runs over the chunk with its
 * accumulators loaded from and stored back to acc. Rows past nr and tokens past nt repeat the last valid
 * one (memory that exists); their results are dropped. */
/* The decode kernel of the 32-element formats (same pieces as ELI_X86_GEMM32 below): nr rows against one
 * activation row, the activation block prepared once for all rows; one specialisation per row count keeps
 * the accumulators in registers. HAS_MIN: Q4_1 / Q5_1, whose blocks carry m after d (and the Q8_1
 * activation s after d): one more FMA chain per row, in block order. */
#define LD8_F16(p) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p)))

/* the float weight formats of the kernels below; the activation row is in the same format */
enum { FL_F16, FL_BF16, FL_F32 };
#define FL_ES(W) ((W) == FL_F32 ? 4 : 2) /* bytes per element */
/* rows per gemm call (the accumulators of a call live on the stack: FL_GEMM_NR x ELI_KERNEL_MAX_NT chains) */
#define FL_GEMM_NR 32
static inline __attribute__((always_inline)) __m256 fl_ld8(int W, const uint8_t *p) {
    if (W == FL_F16) return LD8_F16(p);
    if (W == FL_BF16) /* a bf16 is the top half of its float */
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)), 16));
    return _mm256_loadu_ps((const float *)(const void *)p);
}
static inline __attribute__((always_inline)) float fl_ld1(int W, const uint8_t *p) {
    if (W == FL_F16) return h2f(p);
    uint32_t u = 0;
    memcpy(&u, p, (size_t)FL_ES(W));
    if (W == FL_BF16) u <<= 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Float weights -- F16 (whole small models are F16), BF16 and F32 -- shared by the AVX2 and AVX-512
 * tables: float FMA accumulation instead of the reference's double accumulation, which costs twice the
 * work per element: a float reordering within the kernels.h bound (normalised MSE <= 1e-7). Every kernel
 * of a format (one row, the gemv and the gemm tiles) performs exactly this chain per (row, token): element
 * i < n16 = n rounded down to 16 goes to accumulator (i / 8) % 2, lane i % 8, in order of i; fl_finish
 * does the same tail and reduction for all of them, so prefill, decode and MTP verification agree bit for
 * bit.
 *
 * What bounds these kernels is the FMA latency when there are few chains (the one-row, one-token kernel
 * has two) and the conversions to f32 (vcvtph2ps for F16, a shift for BF16). So the gemv (decode) and
 * the gemm (prefill, MTP verification) convert the activation rows to f32 once per call (exact: every
 * fp16 and bf16 is a float) and only the weights per tile: the gemv FL_GV rows at a time (8 chains), the
 * gemm FL_RM rows x up to 3 tokens per tile (AVX2's 16 registers: 2 x 3, 12 accumulators; AVX-512's 32:
 * 4 x 3, 24). One zmm per chain (both accumulators in one register) was measured slower on the Zen 4
 * here: F16 gemv 21 against 26 GMAC/s, a 4 x 4 zmm gemm no faster than 4 x 3 ymm. */
static inline __attribute__((always_inline)) float fl_finish(int W, __m256 a0, __m256 a1, int64_t i, int64_t n,
                                                             const uint8_t *px, const uint8_t *py) {
    for (; i + 8 <= n; i += 8) a0 = _mm256_fmadd_ps(fl_ld8(W, px + FL_ES(W) * i), fl_ld8(W, py + FL_ES(W) * i), a0);
    const __m256 a = _mm256_add_ps(a0, a1);
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_movehdup_ps(h));
    double sum = _mm_cvtss_f32(h);
    for (; i < n; i++) sum += (double)(fl_ld1(W, px + FL_ES(W) * i) * fl_ld1(W, py + FL_ES(W) * i));
    return (float)sum;
}

#if defined(__AVX512F__)
#define FL_RM 4
#else
#define FL_RM 2
#endif
#define FL_TT 3
#define FL_GV 4

/* software prefetch distance along the rows: 4096 bytes left the gemv waiting when other processes had
 * evicted the weights from L3 (nano decode 0.47-0.98 ms between runs, against 0.47-0.48 with 8192) */
#define FL_PREFETCH 8192

/* The chains of R rows (bx bytes apart) x TT tokens over the elements [i0, i1) (multiples of 16), into
 * a[r * TT + t]. The activations: fp16 rows (YF = 0, token t at y + t * ly bytes, element i at 2 i) or
 * f32 copies of them (YF = 1, element i at float i - i0 of y + t * ly bytes). R and TT are constants at
 * every call, so the loops unroll and the accumulators stay in registers. */
static inline __attribute__((always_inline)) void fl_chains(int W, int R, int TT, int YF, int64_t i0, int64_t i1,
                                                             const uint8_t *x, size_t bx, const uint8_t *y, size_t ly,
                                                             __m256 a[][2]) {
    for (int64_t i = i0; i < i1; i += 16) {
        for (int l = 0; l < R; l += 2) _mm_prefetch((const char *)(x + FL_PREFETCH + FL_ES(W) * (R * i + 16 * l)), _MM_HINT_T0);
        for (int j = 0; j < 2; j++) {
            __m256 w[FL_RM > FL_GV ? FL_RM : FL_GV];
            for (int r = 0; r < R; r++) w[r] = fl_ld8(W, x + (size_t)r * bx + FL_ES(W) * (i + 8 * j));
            for (int t = 0; t < TT; t++) {
                const __m256 v = YF ? _mm256_loadu_ps((const float *)(y + (size_t)t * ly) + (i - i0 + 8 * j))
                                    : fl_ld8(W, y + (size_t)t * ly + FL_ES(W) * (i + 8 * j));
                for (int r = 0; r < R; r++) a[r * TT + t][j] = _mm256_fmadd_ps(w[r], v, a[r * TT + t][j]);
            }
        }
    }
}

/* out[p] = fl_finish of the chains a[p] for p < P when there is no tail (n = n16; the double rounding
 * of fl_finish is then exact): the same additions, eight chains at a time in three transposing steps
 * (lo + hi halves, then elements 0 + 2 and 1 + 3, then 0 + 1) instead of a horizontal sum per chain. */
static inline void fl_sums(int P, __m256 a[][2], float *out) {
    for (int p0 = 0; p0 < P; p0 += 8) {
        __m256 v[8], u[4];
        for (int k = 0; k < 8; k++) v[k] = p0 + k < P ? _mm256_add_ps(a[p0 + k][0], a[p0 + k][1]) : _mm256_setzero_ps();
        for (int k = 0; k < 4; k++) /* [lo + hi of v2k | lo + hi of v2k+1] */
            u[k] = _mm256_add_ps(_mm256_permute2f128_ps(v[2 * k], v[2 * k + 1], 0x20),
                                 _mm256_permute2f128_ps(v[2 * k], v[2 * k + 1], 0x31));
        const __m256 y01 = _mm256_add_ps(_mm256_shuffle_ps(u[0], u[1], 0x44), _mm256_shuffle_ps(u[0], u[1], 0xEE));
        const __m256 y23 = _mm256_add_ps(_mm256_shuffle_ps(u[2], u[3], 0x44), _mm256_shuffle_ps(u[2], u[3], 0xEE));
        /* lanes: v0, v2, v4, v6, v1, v3, v5, v7 */
        float r[8];
        _mm256_storeu_ps(r, _mm256_add_ps(_mm256_shuffle_ps(y01, y23, 0x88), _mm256_shuffle_ps(y01, y23, 0xDD)));
        static const int order[8] = {0, 4, 1, 5, 2, 6, 3, 7};
        for (int k = 0; k < 8 && p0 + k < P; k++) out[p0 + k] = r[order[k]];
    }
}

/* s[t * bs + r] for the chains a of R rows x TT tokens (fp16 rows y, by bytes apart) that hold n16 elements */
static inline __attribute__((always_inline)) void fl_done(int W, int R, int TT, __m256 a[][2], int64_t n16, int64_t n,
                                                           const uint8_t *x, size_t bx, const uint8_t *y, size_t by,
                                                           float *s, size_t bs) {
    if (n16 == n && R * TT > 1) {
        float v[FL_RM * FL_TT > FL_GV ? FL_RM * FL_TT : FL_GV];
        fl_sums(R * TT, a, v);
        for (int r = 0; r < R; r++)
            for (int t = 0; t < TT; t++) s[(size_t)t * bs + r] = v[r * TT + t];
        return;
    }
    for (int r = 0; r < R; r++)
        for (int t = 0; t < TT; t++)
            s[(size_t)t * bs + r] =
                fl_finish(W, a[r * TT + t][0], a[r * TT + t][1], n16, n, x + (size_t)r * bx, y + (size_t)t * by);
}

/* R rows x 1 token over the whole row: fp16 activations (YF = 0) or their f32 copy yf (YF = 1) */
static inline __attribute__((always_inline)) void fl_rows(int W, int R, int YF, int64_t n, const uint8_t *x, size_t bx,
                                                           const uint8_t *y, const float *yf, float *s) {
    const int64_t n16 = n & ~(int64_t)15;
    __m256 a[FL_GV][2];
    for (int p = 0; p < R; p++) a[p][0] = a[p][1] = _mm256_setzero_ps();
    fl_chains(W, R, 1, YF, 0, n16, x, bx, YF ? (const uint8_t *)yf : y, 0, a);
    fl_done(W, R, 1, a, n16, n, x, bx, y, 0, s, 1);
}

/* fp16 -> f32 of n elements (a multiple of 8) */
static inline __attribute__((always_inline)) void fl_widen(int W, int64_t n, const uint8_t *h, float *f) {
    for (int64_t i = 0; i < n; i += 8) _mm256_storeu_ps(f + i, fl_ld8(W, h + FL_ES(W) * i));
}

/* the elements per gemm chunk whose f32 activations sit on the stack, and the longest gemv row */
#define FL_KC 512
#define FL_GEMV_MAX 16384

/* One gemm tile of R rows x TT tokens over the chunk [i0, i1) of the f32 activations yf (FL_KC floats
 * per token): the chains start at zero on the first chunk, else from acc (the call's [row][token], rows
 * ELI_KERNEL_MAX_NT apart); on the last chunk the results go to s, else back to acc. */
static inline __attribute__((always_inline)) void fl_gemm_tile(int W, int R, int TT, int64_t i0, int64_t i1, int64_t n16,
                                                                int64_t n, const uint8_t *x, size_t bx, const float *yf,
                                                                const uint8_t *y, size_t by, __m256 (*acc)[2],
                                                                float *s, size_t bs) {
    __m256 a[FL_RM * FL_TT][2];
    for (int r = 0; r < R; r++)
        for (int t = 0; t < TT; t++)
            for (int j = 0; j < 2; j++) a[r * TT + t][j] = i0 ? acc[r * ELI_KERNEL_MAX_NT + t][j] : _mm256_setzero_ps();
    fl_chains(W, R, TT, 1, i0, i1, x, bx, (const uint8_t *)yf, sizeof(float) * FL_KC, a);
    if (i1 == n16) {
        fl_done(W, R, TT, a, n16, n, x, bx, y, by, s, bs);
        return;
    }
    for (int r = 0; r < R; r++)
        for (int t = 0; t < TT; t++)
            for (int j = 0; j < 2; j++) acc[r * ELI_KERNEL_MAX_NT + t][j] = a[r * TT + t][j];
}

/* the tile for R <= FL_RM rows x TT <= 3 tokens, with constant sizes */
static inline __attribute__((always_inline)) void fl_gemm_rt(int W, int R, int TT, int64_t i0, int64_t i1, int64_t n16, int64_t n, const uint8_t *x,
                               size_t bx, const float *yf, const uint8_t *y, size_t by, __m256 (*acc)[2], float *s,
                               size_t bs) {
#define FL_R(RR)                                                                                                \
    case RR:                                                                                                     \
        if (TT == 1) fl_gemm_tile(W, RR, 1, i0, i1, n16, n, x, bx, yf, y, by, acc, s, bs);                         \
        else if (TT == 2) fl_gemm_tile(W, RR, 2, i0, i1, n16, n, x, bx, yf, y, by, acc, s, bs);                    \
        else fl_gemm_tile(W, RR, 3, i0, i1, n16, n, x, bx, yf, y, by, acc, s, bs);                                 \
        break
    switch (R) {
        FL_R(1);
#if FL_RM == 4
        FL_R(2);
        FL_R(3);
#endif
    default:
        FL_R(FL_RM);
    }
#undef F16_R
}

/* The entry points of a table for one float weight format W (NAME f16, bf16 or f32; the activation is in
 * the same format, the weight's vec_dot_type): one row (vec_dot), the gemv and the gemm. */
#define ELI_X86_FLOAT(NAME, W)                                                                                   \
    static float vec_dot_##NAME(int64_t n, const void *vx, const void *vy) {                                     \
        float s;                                                                                                 \
        fl_rows(W, 1, 0, n, vx, 0, vy, NULL, &s);                                                                \
        return s;                                                                                                \
    }                                                                                                            \
    static void gemv_##NAME(int64_t n, int64_t rows, const void *vx, size_t bx, const void *vy, float *s) {     \
        const uint8_t *x = vx, *y = vy;                                                                          \
        const int64_t n16 = n & ~(int64_t)15;                                                                    \
        if (n16 > FL_GEMV_MAX) {                                                                                 \
            for (int64_t r = 0; r < rows; r++) s[r] = vec_dot_##NAME(n, x + (size_t)r * bx, vy);                 \
            return;                                                                                              \
        }                                                                                                        \
        _Alignas(64) float yf[FL_GEMV_MAX];                                                                      \
        fl_widen(W, n16, y, yf);                                                                                 \
        int64_t r = 0;                                                                                           \
        for (; r + FL_GV <= rows; r += FL_GV) fl_rows(W, FL_GV, 1, n, x + (size_t)r * bx, bx, y, yf, s + r);     \
        for (; r < rows; r++) fl_rows(W, 1, 1, n, x + (size_t)r * bx, 0, y, yf, s + r);                          \
    }                                                                                                            \
    static void gemm_##NAME(int64_t n, int nr, int nt, const void *vx, size_t bx, const void *vy, size_t by,    \
                            float *s, size_t bs) {                                                               \
        const uint8_t *x = vx, *y = vy;                                                                          \
        const int64_t n16 = n & ~(int64_t)15;                                                                    \
        if (n16 == 0) { /* the tails only */                                                                     \
            for (int t = 0; t < nt; t++)                                                                         \
                for (int r = 0; r < nr; r++)                                                                     \
                    s[(size_t)t * bs + r] = vec_dot_##NAME(n, x + (size_t)r * bx, y + (size_t)t * by);           \
            return;                                                                                              \
        }                                                                                                        \
        _Alignas(64) float yf[ELI_KERNEL_MAX_NT * FL_KC];                                                        \
        _Alignas(64) __m256 acc[FL_GEMM_NR * ELI_KERNEL_MAX_NT][2];                                              \
        for (int64_t i0 = 0; i0 < n16; i0 += FL_KC) {                                                            \
            const int64_t i1 = n16 - i0 < FL_KC ? n16 : i0 + FL_KC;                                              \
            for (int t = 0; t < nt; t++)                                                                         \
                fl_widen(W, i1 - i0, y + (size_t)t * by + FL_ES(W) * i0, yf + (size_t)t * FL_KC);                \
            for (int r = 0; r < nr; r += FL_RM)                                                                  \
                for (int t = 0; t < nt; t += FL_TT)                                                              \
                    fl_gemm_rt(W, nr - r < FL_RM ? nr - r : FL_RM, nt - t < FL_TT ? nt - t : FL_TT, i0, i1, n16, n, \
                               x + (size_t)r * bx, bx, yf + (size_t)t * FL_KC, y + (size_t)t * by, by,           \
                               acc + (size_t)r * ELI_KERNEL_MAX_NT + t, s + (size_t)t * bs + r, bs);             \
        }                                                                                                        \
    }

/* blocks of the activation row gemv prepares on its stack (longer rows go through the one-row kernel) */
#define X86_GEMV_MAXB 768

#define ELI_X86_ROWS32(NAME, XB, YB, UX, YP_T, YPREP, PAIR, HAS_MIN)                                             \
    static inline __attribute__((always_inline)) void rows_##NAME(int64_t n, const int nr, const void *vx,       \
                                                                  size_t bx, const void *vy, float *s) {         \
        const int64_t nb = n / 32;                                                                               \
        const YB *y = vy;                                                                                        \
        __m256 acc[ELI_KERNEL_MAX_NR];                                                                           \
        float summ[ELI_KERNEL_MAX_NR] = {0};                                                                     \
        for (int r = 0; r < nr; r++) acc[r] = _mm256_setzero_ps();                                               \
        for (int64_t ib = 0; ib < nb; ib++) {                                                                    \
            const YP_T p = YPREP(y + ib);                                                                        \
            const __m256 dy = h2f_bcast(y + ib);                                                                 \
            for (int r = 0; r < nr; r++) {                                                                       \
                const XB *x = (const XB *)((const uint8_t *)vx + (size_t)r * bx) + ib;                           \
                /* decode streams the matrix from DRAM: ask for the block 128 ahead (a little faster than 64  \
                 * with two threads streaming) */                                                                \
                _mm_prefetch((const char *)(x + 128), _MM_HINT_T0);                                              \
                acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(PAIR(UX(x), p)), _mm256_mul_ps(h2f_bcast(x), dy), acc[r]); \
                if (HAS_MIN) summ[r] = fmaf(h2f((const uint8_t *)x + 2), h2f((const uint8_t *)(y + ib) + 2), summ[r]); \
            }                                                                                                    \
        }                                                                                                        \
        for (int r = 0; r < nr; r++) s[r] = HAS_MIN ? hsum_ps(acc[r]) + summ[r] : hsum_ps(acc[r]);              \
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
    }                                                                                                            \
    /* decode: the activation's prepared blocks and scales once for all rows (the one-row kernel redoes  \
     * them for every row: a fifth of its instructions), then the rows one after the other */                \
    static void gemv_##NAME(int64_t n, int64_t rows, const void *vx, size_t bx, const void *vy, float *s) {     \
        const int64_t nb = n / 32;                                                                               \
        const YB *y = vy;                                                                                        \
        if (nb > X86_GEMV_MAXB) {                                                                                \
            for (int64_t r = 0; r < rows; r++) rows_##NAME(n, 1, (const uint8_t *)vx + (size_t)r * bx, 0, vy, s + r); \
            return;                                                                                              \
        }                                                                                                        \
        YP_T p[X86_GEMV_MAXB];                                                                                   \
        float dy[X86_GEMV_MAXB];                                                                                 \
        for (int64_t ib = 0; ib < nb; ib++) p[ib] = YPREP(y + ib), dy[ib] = h2f(y + ib);                         \
        for (int64_t r = 0; r < rows; r++) {                                                                     \
            const XB *x = (const XB *)((const uint8_t *)vx + (size_t)r * bx);                                    \
            __m256 acc = _mm256_setzero_ps();                                                                    \
            float summ = 0.0f;                                                                                   \
            for (int64_t ib = 0; ib < nb; ib++) {                                                                \
                _mm_prefetch((const char *)(x + ib + 128), _MM_HINT_T0);                                         \
                const __m256 d = _mm256_mul_ps(h2f_bcast(x + ib), _mm256_set1_ps(dy[ib]));                       \
                acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(PAIR(UX(x + ib), p[ib])), d, acc);                      \
                if (HAS_MIN) summ = fmaf(h2f((const uint8_t *)(x + ib) + 2), h2f((const uint8_t *)(y + ib) + 2), summ); \
            }                                                                                                    \
            s[r] = HAS_MIN ? hsum_ps(acc) + summ : hsum_ps(acc);                                                 \
        }                                                                                                        \
    }

/* dst[r] = x[r] * d for r < n, one vector multiply when n is 4 or 8 (n is a constant at every call) */
static inline void scale_rows(float *dst, const float *x, float d, int n) {
    if (n == 8) {
        _mm256_storeu_ps(dst, _mm256_mul_ps(_mm256_loadu_ps(x), _mm256_set1_ps(d)));
    } else if (n == 4) {
        _mm_storeu_ps(dst, _mm_mul_ps(_mm_loadu_ps(x), _mm_set1_ps(d)));
    } else {
        for (int r = 0; r < n; r++) dst[r] = x[r] * d;
    }
}

#define X86_GCHUNK 32

#define ELI_X86_GEMM32(NAME, XB, YB, WX_T, UX, YP_T, YPREP, PAIR, GRM, GNT, HAS_MIN)                             \
    _Static_assert(ELI_KERNEL_MAX_GEMM_NR % (GRM) == 0 && ELI_KERNEL_MAX_NT % (GNT) == 0, "tiles must divide"); \
    static void gemm_##NAME(int64_t n, int nr, int nt, const void *vx, size_t bx, const void *vy, size_t by,    \
                            float *s, size_t bs) {                                                               \
        const int64_t nb = n / 32;                                                                               \
        const int ngr = (nr + (GRM)-1) / (GRM), ntp = (nt + (GNT)-1) / (GNT) * (GNT);                            \
        const YB *yt[ELI_KERNEL_MAX_NT];                                                                         \
        for (int t = 0; t < ntp; t++) yt[t] = (const YB *)((const uint8_t *)vy + (size_t)(t < nt ? t : nt - 1) * by); \
        __m256 acc[ELI_KERNEL_MAX_GEMM_NR / (GRM)][ELI_KERNEL_MAX_NT][GRM];                                      \
        float summ[ELI_KERNEL_MAX_GEMM_NR / (GRM)][ELI_KERNEL_MAX_NT][GRM];                                      \
        for (int g = 0; g < ngr; g++)                                                                            \
            for (int t = 0; t < ntp; t++)                                                                        \
                for (int r = 0; r < (GRM); r++) acc[g][t][r] = _mm256_setzero_ps(), summ[g][t][r] = 0.0f;        \
        for (int64_t c0 = 0; c0 < nb; c0 += X86_GCHUNK) {                                                        \
            const int cn = (int)(nb - c0 < X86_GCHUNK ? nb - c0 : X86_GCHUNK);                                   \
            float dy[X86_GCHUNK][ELI_KERNEL_MAX_NT], sy[X86_GCHUNK][ELI_KERNEL_MAX_NT];                          \
            for (int i = 0; i < cn; i++)                                                                         \
                for (int t = 0; t < ntp; t++) {                                                                  \
                    dy[i][t] = h2f(yt[t] + c0 + i);                                                              \
                    if (HAS_MIN) sy[i][t] = h2f((const uint8_t *)(yt[t] + c0 + i) + 2);                          \
                }                                                                                                \
            for (int g = 0; g < ngr; g++) {                                                                      \
                const XB *xr[GRM];                                                                               \
                for (int r = 0; r < (GRM); r++) {                                                                \
                    const int row = g * (GRM) + r < nr ? g * (GRM) + r : nr - 1;                                 \
                    xr[r] = (const XB *)((const uint8_t *)vx + (size_t)row * bx);                                \
                }                                                                                                \
                float dd[X86_GCHUNK][ELI_KERNEL_MAX_NT][GRM]; /* a block's products contiguous */               \
                WX_T wx[X86_GCHUNK][GRM]; /* the weight blocks, prepared once for all token groups */           \
                for (int i = 0; i < cn; i++) {                                                                   \
                    /* the next GRM rows' blocks: GRM row streams at once defeat the hardware prefetcher, and \
                     * a few tokens (an MTP verification) read the weights once from DRAM */                     \
                    for (int r = 0; r < (GRM); r++)                                                              \
                        _mm_prefetch((const char *)(xr[r] + c0 + i) + (size_t)(GRM) * bx, _MM_HINT_T0);          \
                    for (int r = 0; r < (GRM); r++) wx[i][r] = UX(xr[r] + c0 + i);                               \
                    float dx[GRM], mx[GRM];                                                                      \
                    for (int r = 0; r < (GRM); r++) {                                                            \
                        dx[r] = h2f(xr[r] + c0 + i);                                                             \
                        mx[r] = HAS_MIN ? h2f((const uint8_t *)(xr[r] + c0 + i) + 2) : 0.0f;                     \
                    }                                                                                            \
                    for (int t = 0; t < ntp; t++) scale_rows(dd[i][t], dx, dy[i][t], GRM);                       \
                    if (HAS_MIN)                                                                                 \
                        for (int t = 0; t < ntp; t++)                                                            \
                            for (int r = 0; r < (GRM); r++) summ[g][t][r] = fmaf(mx[r], sy[i][t], summ[g][t][r]); \
                }                                                                                                \
                for (int t0 = 0; t0 < ntp; t0 += (GNT)) {                                                        \
                    __m256 a[GNT][GRM];                                                                          \
                    for (int t = 0; t < (GNT); t++)                                                              \
                        for (int r = 0; r < (GRM); r++) a[t][r] = acc[g][t0 + t][r];                             \
                    for (int i = 0; i < cn; i++) {                                                               \
                        const int64_t ib = c0 + i;                                                               \
                        for (int t = 0; t < (GNT); t++) {                                                        \
                            const YP_T p = YPREP(yt[t0 + t] + ib);                                               \
                            for (int r = 0; r < (GRM); r++)                                                      \
                                a[t][r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(PAIR(wx[i][r], p)),                 \
                                                          _mm256_set1_ps(dd[i][t0 + t][r]), a[t][r]);            \
                        }                                                                                        \
                    }                                                                                            \
                    for (int t = 0; t < (GNT); t++)                                                              \
                        for (int r = 0; r < (GRM); r++) acc[g][t0 + t][r] = a[t][r];                             \
                }                                                                                                \
            }                                                                                                    \
        }                                                                                                        \
        for (int t = 0; t < nt; t++)                                                                             \
            for (int r = 0; r < nr; r++) {                                                                       \
                const float v = hsum_ps(acc[r / (GRM)][t][r % (GRM)]);                                           \
                s[(size_t)t * bs + r] = HAS_MIN ? v + summ[r / (GRM)][t][r % (GRM)] : v;                         \
            }                                                                                                    \
    }

#endif
