/* The Q4_0 kernels of the x86 tables (kernels_avx2.c, kernels_avx512.c), one template for both: quants.c's
 * Q4_0 order, one serial chain per row, acc = fma(d_x * d_y, (float)isum, acc) over the blocks, where isum
 * is the block pair's exact integer sum of (q - 8) * y. Not a public header.
 *
 * "Lane = row": lane r of a vector of Q4_W rows (AVX-512: 16, AVX2: 8) holds row r's chain, so the float
 * work of a block is one convert, one multiply and one FMA per Q4_W rows. For that the weight blocks are
 * transposed first (q4_pack): per block and dword group k (0..7) one vector whose lane r holds row r's
 * four unsigned nibbles of elements 4k..4k+3 (k < 4: the low nibbles of qs dword k; k >= 4: the high ones
 * of dword k - 4), plus the rows' d. Against such a vector, the activation's dword k broadcast to every
 * lane gives each row its 4-element sum in one instruction (AVX-512: VPDPBUSD, accumulating in int32 from
 * -8 * (sum of the activation block), which folds the nibbles' offset in; AVX2: VPMADDUBSW, the 8 groups'
 * int16 pair sums added in int16 and one VPMADDWD at the end, then the offset). The transposition is done
 * once per block chunk and call, for all the call's tokens.
 *
 * The including file defines, before including this:
 *   Q4_W                   rows per vector; q4vi / q4vf its integer and float vector types
 *   Q4_TR, Q4_TT           the prefill register tile: Q4_TR row vectors x Q4_TT tokens
 *   q4_in(xr, j, off)      the vector whose 128-bit lane i holds the 16 qs bytes of block (at byte off) of
 *                          row 4i + j (xr: the Q4_W row pointers)
 *   q4_d(x, ix, off)       the Q4_W rows' d of that block, as floats (row r at x + lane r of ix)
 *   Q4V(op)                the intrinsic _mm512_op / _mm256_op (the operations whose names differ only so)
 *   Q4_AND, Q4_LOADI(p)    and_si512 / and_si256; Q4_W int32 from p
 *   Q4_ACC0(o), Q4_STEP(a, w, p), Q4_END(a, o)   a block's integer sums: start (o = -8 * the activation
 *                          block's sum), one dword group (w the weights, p the activation's 4 bytes), the
 *                          per-row int32 result (q4_ld32(p): those 4 bytes as an int32)
 *   q4_lanes(x, y)         one block pair's isum as 8 int32 partial sums (the one-row kernel) */
#ifndef ELI_KERNELS_X86_Q4_H
#define ELI_KERNELS_X86_Q4_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "kernels_x86.h"
#include "quants.h"

static inline int32_t q4_ld32(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

typedef struct {
    q4vi w[8]; /* dword groups: lane r = row r's nibbles of elements 4k..4k+3 */
    q4vf d;    /* lane r = row r's d */
} q4_blk;

/* rows per call in vectors, blocks per chunk: the chunk's transposed weights (ELI_KERNEL_MAX_GEMM_NR = 64
 * rows x Q4_CHUNK blocks: 18 KiB) stay in L1 while all token tiles pass over them. Measured (AVX-512, one
 * thread, 16 tokens, cached): 64 rows per call 130 GMAC/s against 125 with 32 (the activation's block
 * sums are computed once per call, and the transposition once per call and block); chunks of 8 blocks
 * 125 against 123 (16) and 122 (32) with 32 rows */
#define Q4_GV (ELI_KERNEL_MAX_GEMM_NR / Q4_W)
#define Q4_CHUNK 8
_Static_assert(ELI_KERNEL_MAX_GEMM_NR % Q4_W == 0 && Q4_GV % Q4_TR == 0 && ELI_KERNEL_MAX_NT % Q4_TT == 0 && Q4_TT > 1,
               "the tiles must divide the call (TT = 1 is the decode path)");

static inline __attribute__((always_inline)) void q4_pack(const uint8_t *const xr[Q4_W], const uint8_t *x, q4vi ix,
                                                          size_t off, q4_blk *b) {
    const q4vi i0 = q4_in(xr, 0, off), i1 = q4_in(xr, 1, off), i2 = q4_in(xr, 2, off), i3 = q4_in(xr, 3, off);
    /* 4 x 4 dword transposition in every 128-bit lane: o_k lane i dword j = row 4i + j's dword k */
    const q4vi t0 = Q4V(unpacklo_epi32)(i0, i1), t1 = Q4V(unpackhi_epi32)(i0, i1);
    const q4vi t2 = Q4V(unpacklo_epi32)(i2, i3), t3 = Q4V(unpackhi_epi32)(i2, i3);
    const q4vi o[4] = {Q4V(unpacklo_epi64)(t0, t2), Q4V(unpackhi_epi64)(t0, t2), Q4V(unpacklo_epi64)(t1, t3),
                       Q4V(unpackhi_epi64)(t1, t3)};
    const q4vi m = Q4V(set1_epi8)(0x0F);
    for (int k = 0; k < 4; k++) {
        b->w[k] = Q4_AND(o[k], m);
        b->w[k + 4] = Q4_AND(Q4V(srli_epi32)(o[k], 4), m);
    }
    b->d = q4_d(x, ix, off);
}

/* -8 * the sum of an activation block's 32 quants */
static inline int32_t q4_yoff(const eli_block_q8_0 *y) {
    const __m256i s = _mm256_sad_epu8(_mm256_xor_si256(loadu256(y->qs), _mm256_set1_epi8((char)0x80)),
                                      _mm256_setzero_si256()); /* 4 sums of q + 128 */
    __m128i t = _mm_add_epi64(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    t = _mm_add_epi64(t, _mm_unpackhi_epi64(t, t));
    return -8 * (_mm_cvtsi128_si32(t) - 32 * 128);
}

/* TR row vectors (from v0) x TT tokens (from t0) over the chunk's cn blocks (c0..), their chains loaded
 * from and stored back to acc */
static inline __attribute__((always_inline)) void q4_tile(const int TR, const int TT, int cn, int64_t c0,
                                                          const q4_blk wb[][Q4_GV], int v0,
                                                          const eli_block_q8_0 *const yt[], int t0,
                                                          const int32_t yo[][ELI_KERNEL_MAX_NT],
                                                          const float dy[][ELI_KERNEL_MAX_NT],
                                                          q4vf acc[][ELI_KERNEL_MAX_NT]) {
    q4vf f[Q4_TR][Q4_TT];
    for (int v = 0; v < TR; v++)
        for (int t = 0; t < TT; t++) f[v][t] = acc[v0 + v][t0 + t];
    for (int i = 0; i < cn; i++) {
        const q4_blk *b = &wb[i][v0];
        q4vi a[Q4_TR][Q4_TT];
        for (int v = 0; v < TR; v++)
            for (int t = 0; t < TT; t++) a[v][t] = Q4_ACC0(yo[i][t0 + t]);
        for (int k = 0; k < 8; k++)
            for (int t = 0; t < TT; t++) {
                const int8_t *p = yt[t0 + t][c0 + i].qs + 4 * k;
                for (int v = 0; v < TR; v++) a[v][t] = Q4_STEP(a[v][t], b[v].w[k], p);
            }
        for (int t = 0; t < TT; t++) {
            const q4vf d = Q4V(set1_ps)(dy[i][t0 + t]);
            for (int v = 0; v < TR; v++)
                f[v][t] = Q4V(fmadd_ps)(Q4V(cvtepi32_ps)(Q4_END(a[v][t], yo[i][t0 + t])), Q4V(mul_ps)(b[v].d, d),
                                        f[v][t]);
        }
    }
    for (int v = 0; v < TR; v++)
        for (int t = 0; t < TT; t++) acc[v0 + v][t0 + t] = f[v][t];
}

/* nr (<= ELI_KERNEL_MAX_GEMM_NR) rows x nt (<= ELI_KERNEL_MAX_NT) tokens in tiles of Q4_TR x TT (TT: a
 * constant at every call). Rows past nr and tokens past nt repeat the last valid one (memory that exists);
 * their results are dropped. Prefill: per chunk of Q4_CHUNK blocks the rows are transposed once into wb,
 * then every token tile passes over the chunk. Decode (one token, TT = 1): each block is transposed in
 * registers and used at once, and the bytes of the next as many rows are prefetched into L2 as the blocks
 * advance (one linear stream instead of one per row; the matrix streams from DRAM). The rows' byte offsets
 * are the d gather's 32-bit indices: 63 rows of bx bytes stay below 2 GiB for rows up to 34 MB. */
static inline __attribute__((always_inline)) void q4_gemm(const int TT, int64_t n, int nr, int nt, const void *vx,
                                                          size_t bx, const void *vy, size_t by, float *s,
                                                          size_t bs) {
    const int64_t nb = n / 32;
    const int nv = (nr + Q4_W - 1) / Q4_W, ntp = (nt + TT - 1) / TT * TT;
    const uint8_t *x = vx, *xr[ELI_KERNEL_MAX_GEMM_NR];
    int32_t io[ELI_KERNEL_MAX_GEMM_NR];
    for (int r = 0; r < nv * Q4_W; r++) {
        io[r] = (int32_t)((size_t)(r < nr ? r : nr - 1) * bx);
        xr[r] = x + io[r];
    }
    q4vi ix[Q4_GV];
    for (int v = 0; v < nv; v++) ix[v] = Q4_LOADI(io + v * Q4_W);
    const eli_block_q8_0 *yt[ELI_KERNEL_MAX_NT];
    for (int t = 0; t < ntp; t++)
        yt[t] = (const eli_block_q8_0 *)((const uint8_t *)vy + (size_t)(t < nt ? t : nt - 1) * by);
    q4vf acc[Q4_GV][ELI_KERNEL_MAX_NT];
    for (int v = 0; v < nv; v++)
        for (int t = 0; t < ntp; t++) acc[v][t] = Q4V(setzero_ps)();
    if (TT == 1) {
        const uint8_t *pf = x + (size_t)(nv * Q4_W) * bx;
        const size_t pf_step = (size_t)(nv * Q4_W) * sizeof(eli_block_q4_0);
        for (int64_t ib = 0; ib < nb; ib++) {
            const size_t off = (size_t)ib * sizeof(eli_block_q4_0);
            for (size_t l = 0; l < pf_step; l += 64)
                _mm_prefetch((const char *)(pf + (size_t)ib * pf_step + l), _MM_HINT_T1);
            q4_blk wb[1][Q4_GV];
            for (int v = 0; v < nv; v++) q4_pack(xr + v * Q4_W, x, ix[v], off, &wb[0][v]);
            const int32_t yo[1][ELI_KERNEL_MAX_NT] = {{q4_yoff(yt[0] + ib)}};
            const float dy[1][ELI_KERNEL_MAX_NT] = {{h2f(&yt[0][ib].d)}};
            int v0 = 0;
            for (; v0 + Q4_TR <= nv; v0 += Q4_TR) q4_tile(Q4_TR, 1, 1, ib, wb, v0, yt, 0, yo, dy, acc);
            for (; v0 < nv; v0++) q4_tile(1, 1, 1, ib, wb, v0, yt, 0, yo, dy, acc);
        }
    } else {
        for (int64_t c0 = 0; c0 < nb; c0 += Q4_CHUNK) {
            const int cn = (int)(nb - c0 < Q4_CHUNK ? nb - c0 : Q4_CHUNK);
            q4_blk wb[Q4_CHUNK][Q4_GV];
            int32_t yo[Q4_CHUNK][ELI_KERNEL_MAX_NT];
            float dy[Q4_CHUNK][ELI_KERNEL_MAX_NT];
            for (int i = 0; i < cn; i++) {
                const size_t off = (size_t)(c0 + i) * sizeof(eli_block_q4_0);
                for (int v = 0; v < nv; v++) q4_pack(xr + v * Q4_W, x, ix[v], off, &wb[i][v]);
                for (int t = 0; t < ntp; t++) {
                    yo[i][t] = q4_yoff(yt[t] + c0 + i);
                    dy[i][t] = h2f(&yt[t][c0 + i].d);
                }
            }
            for (int t0 = 0; t0 < ntp; t0 += TT) {
                int v0 = 0;
                for (; v0 + Q4_TR <= nv; v0 += Q4_TR) q4_tile(Q4_TR, TT, cn, c0, wb, v0, yt, t0, yo, dy, acc);
                for (; v0 < nv; v0++) q4_tile(1, TT, cn, c0, wb, v0, yt, t0, yo, dy, acc);
            }
        }
    }
    for (int v = 0; v < nv; v++)
        for (int t = 0; t < nt; t++) {
            float o[Q4_W];
            Q4V(storeu_ps)(o, acc[v][t]);
            const int m = nr - v * Q4_W < Q4_W ? nr - v * Q4_W : Q4_W;
            memcpy(s + (size_t)t * bs + v * Q4_W, o, sizeof(float) * (size_t)m);
        }
}

static void gemm_q4_0(int64_t n, int nr, int nt, const void *vx, size_t bx, const void *vy, size_t by, float *s,
                      size_t bs) {
    q4_gemm(Q4_TT, n, nr, nt, vx, bx, vy, by, s, bs);
}

/* decode: the rows in groups of one gemm call each, for the one token; 64 rows per group while they span
 * at most Q4_DEC_BYTES, else 32 or 16 (measured, one thread, DRAM: 2048 columns 17.9 GB/s with 64 rows
 * against 12-14 with 32; 8192 columns 15.7-15.9 with 32 against 14.4-14.5 with 64) */
#define Q4_DEC_BYTES (160 * 1024)
static void gemv_q4_0(int64_t n, int64_t rows, const void *vx, size_t bx, const void *vy, float *s) {
    const int g = 64 * bx <= Q4_DEC_BYTES ? 64 : 32 * bx <= Q4_DEC_BYTES ? 32 : 16;
    for (int64_t r = 0; r < rows; r += g) {
        const int nr = (int)(rows - r < g ? rows - r : g);
        q4_gemm(1, n, nr, 1, (const uint8_t *)vx + (size_t)r * bx, bx, vy, 0, s + r, 0);
    }
}

/* one row (the selected-rows matmul, a Q4_0 KV cache): the chain in scalar steps, the integer sums of two
 * blocks reduced together (12.0 against 9.6 GB/s one at a time, AVX-512; AVX2 9.9 against 8.2) */
static float vec_dot_q4_0(int64_t n, const void *vx, const void *vy) {
    const int64_t nb = n / 32;
    const eli_block_q4_0 *x = vx;
    const eli_block_q8_0 *y = vy;
    float acc = 0.0f;
    int64_t ib = 0;
    for (; ib + 2 <= nb; ib += 2) { /* two blocks' lanes reduced together: [isum0, isum1, isum0, isum1] */
        const __m256i h = _mm256_hadd_epi32(q4_lanes(x + ib, y + ib), q4_lanes(x + ib + 1, y + ib + 1));
        const __m128i s = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
        const __m128 f = _mm_cvtepi32_ps(_mm_hadd_epi32(s, s));
        acc = fmaf(h2f(&x[ib].d) * h2f(&y[ib].d), _mm_cvtss_f32(f), acc);
        acc = fmaf(h2f(&x[ib + 1].d) * h2f(&y[ib + 1].d), _mm_cvtss_f32(_mm_movehdup_ps(f)), acc);
    }
    if (ib < nb) acc = fmaf(h2f(&x[ib].d) * h2f(&y[ib].d), (float)hsum_epi32(q4_lanes(x + ib, y + ib)), acc);
    return acc;
}

#endif
