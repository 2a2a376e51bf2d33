/* The packed kernels of the x86 tables (kernels_avx2.c, kernels_avx512.c), one template for both: the
 * layouts and the dot orders of pack.h (Q4_0, F16, Q4_K), one serial FMA chain per row. Not a public
 * header. Q4_0 first, then F16, then Q4_K.
 *
 * Lane r of a vector of Q4_W rows (AVX-512: 16 = one packed group, AVX2: 8 = half a group) holds row r's
 * chain. Per block and dword group k (0..7) the vector of the rows' four nibbles of elements 4k..4k+3 is
 * one load of 64 (32) packed bytes and a mask (k < 4: low nibbles of qs dword k; k >= 4: the high ones
 * of dword k - 4); against the activation's dword k broadcast to every lane it gives each row its
 * 4-element sum in one instruction (AVX-512: VPDPBUSD accumulating in int32 from -8 * (sum of the
 * activation block), which folds the nibbles' offset in; AVX2: VPMADDUBSW, the 8 groups' int16 pair sums
 * added in int16 and one VPMADDWD at the end, then the offset). The float work of a block is then one
 * convert, one multiply and one FMA per Q4_W rows.
 *
 * The including file defines, before including this:
 *   Q4_W                   rows per vector; q4vi / q4vf its integer and float vector types
 *   Q4_TR, Q4_TT           the prefill register tile: Q4_TR row vectors x Q4_TT tokens
 *   Q4_TR_SMALL            the row vectors of a prefill tile of 2 tokens
 *   q4_raw(p, h)           the packed bytes of this vector's rows at p (a dword group of a group), h the
 *                          vector's half of its group (always 0 when Q4_W = 16)
 *   pk_f16(p, h)           the vector's rows' fp16 field at p (a group's 16 values) as floats
 *   pk_u8(p, h)            the vector's rows' byte field at p (16 bytes), zero extended to int32
 *   PF_TR, PF_TT           the F16 prefill register tile: PF_TR row vectors x PF_TT tokens
 *   PF_TR_SMALL            the row vectors of a tile of 1 or 2 tokens
 *   PK_DOT4(a, w, p)       a + the 4-element sums of the unsigned bytes of w with the activation's 4 bytes at p,
 *                          in int32 (the K-quants)
 *   Q4V(op)                the intrinsic _mm512_op / _mm256_op (the operations whose names differ only so)
 *   Q4_AND, Q4_OR, Q4_ZERO and_si512 / and_si256, or_, setzero_
 *   Q4_ACC0(o), Q4_STEP(a, w, p), Q4_END(a, o)   a block's integer sums: start (o = -8 * the activation
 *                          block's sum), one dword group (w the weights, p the activation's 4 bytes), the
 *                          per-row int32 result (q4_ld32(p): those 4 bytes as an int32) */
#ifndef ELI_KERNELS_X86_PACKED_H
#define ELI_KERNELS_X86_PACKED_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "kernels_x86.h"
#include "pack.h"
#include "quants.h"

static inline int32_t q4_ld32(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

#define Q4_VG (ELI_PACK_GROUP / Q4_W) /* vectors per packed group */
#define Q4_GV (ELI_PACK_ROWS / Q4_W)  /* vectors per run */

typedef struct {
    q4vi w[8]; /* dword groups: lane r = row r's nibbles of elements 4k..4k+3 */
    q4vf d;    /* lane r = row r's d */
} q4_blk;

/* blocks per prefill chunk: a run's unpacked chunk (64 rows x 8 blocks: 18 KiB) stays in L1 while all
 * token tiles pass over it (measured on the earlier transposing kernel: 8 blocks 125 GMAC/s against 123
 * with 16 and 122 with 32) */
#define Q4_CHUNK 8
_Static_assert(Q4_GV % Q4_TR == 0 && Q4_GV % Q4_TR_SMALL == 0 && ELI_KERNEL_MAX_NT % Q4_TT == 0 && Q4_TT > 1 &&
                   ELI_KERNEL_MAX_NT % PF_TT == 0,
               "the tiles must divide a call");

/* vector v's weights of the block column at p (its run's ng groups' packed bytes) */
static inline __attribute__((always_inline)) void q4_unpack(const uint8_t *p, int v, q4_blk *b) {
    const uint8_t *g = p + (size_t)(v / Q4_VG) * ELI_PACK_Q4_0_BYTES;
    const int h = v % Q4_VG;
    const q4vi m = Q4V(set1_epi8)(0x0F);
    for (int k = 0; k < 4; k++) {
        const q4vi raw = q4_raw(g + 64 * k, h);
        b->w[k] = Q4_AND(raw, m);
        b->w[k + 4] = Q4_AND(Q4V(srli_epi16)(raw, 4), m);
    }
    b->d = pk_f16(g + 256, h);
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
 * from and stored back to acc (TR x TT is Q4_TR x Q4_TT or less for prefill, all of a run's vectors x 1
 * for decode) */
static inline __attribute__((always_inline)) void q4_tile(const int TR, const int TT, int cn, int64_t c0,
                                                          const q4_blk wb[][Q4_GV], int v0,
                                                          const eli_block_q8_0 *const yt[], int t0,
                                                          const int32_t yo[][ELI_KERNEL_MAX_NT],
                                                          const float dy[][ELI_KERNEL_MAX_NT],
                                                          q4vf acc[][ELI_KERNEL_MAX_NT]) {
    q4vf f[Q4_GV][Q4_TT];
    for (int v = 0; v < TR; v++)
        for (int t = 0; t < TT; t++) f[v][t] = acc[v0 + v][t0 + t];
    for (int i = 0; i < cn; i++) {
        const q4_blk *b = &wb[i][v0];
        q4vi a[Q4_GV][Q4_TT];
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

/* all nv row vectors x TT tokens from t0 in tiles of TR vectors (TT = Q4_TT: Q4_TR; 2: Q4_TR_SMALL; 1, decode
 * and the last token of a prefill: the whole run), the vectors left over one at a time */
static inline __attribute__((always_inline)) void q4_tiles(const int TT, int nv, int cn, int64_t c0,
                                                           const q4_blk wb[][Q4_GV], const eli_block_q8_0 *const yt[],
                                                           int t0, const int32_t yo[][ELI_KERNEL_MAX_NT],
                                                           const float dy[][ELI_KERNEL_MAX_NT],
                                                           q4vf acc[][ELI_KERNEL_MAX_NT]) {
    const int TR = TT == Q4_TT ? Q4_TR : TT == 2 ? Q4_TR_SMALL : Q4_GV;
    if (nv == TR) { /* one tile from vector 0: its chains stay in registers (measured, AVX2 decode: 2.1 against 2.8 ms) */
        q4_tile(TR, TT, cn, c0, wb, 0, yt, t0, yo, dy, acc);
        return;
    }
    int v0 = 0;
    for (; v0 + TR <= nv; v0 += TR) q4_tile(TR, TT, cn, c0, wb, v0, yt, t0, yo, dy, acc);
    for (; v0 < nv; v0++) q4_tile(1, TT, cn, c0, wb, v0, yt, t0, yo, dy, acc);
}

/* the accumulated chains of nv row vectors x nt tokens into s (token t's row r at s[t * bs + r]) */
static inline void q4_store(int nv, int nt, q4vf acc[][ELI_KERNEL_MAX_NT], float *s, size_t bs) {
    for (int v = 0; v < nv; v++)
        for (int t = 0; t < nt; t++) Q4V(storeu_ps)(s + (size_t)t * bs + v * Q4_W, acc[v][t]);
}

/* Prefill: one run of nr rows (a multiple of 16, at most 64) x nt tokens. Per chunk of Q4_CHUNK blocks the
 * run's weights are unpacked once into wb, then every token tile passes over the chunk: Q4_TR x Q4_TT
 * tiles, then a tail of 2 tokens in Q4_TR_SMALL x 2 tiles and one of 1 token over all the run's vectors. */
static void packed_gemm_q4_0(int64_t n, int nr, int nt, const void *vx, size_t bx, const void *vy, size_t by,
                             float *s, size_t bs) {
    (void)bx;
    const int64_t nb = n / 32;
    const int ng = nr / ELI_PACK_GROUP, nv = ng * Q4_VG;
    const uint8_t *x = vx;
    const eli_block_q8_0 *yt[ELI_KERNEL_MAX_NT];
    for (int t = 0; t < nt; t++) yt[t] = (const eli_block_q8_0 *)((const uint8_t *)vy + (size_t)t * by);
    q4vf acc[Q4_GV][ELI_KERNEL_MAX_NT];
    for (int v = 0; v < nv; v++)
        for (int t = 0; t < nt; t++) acc[v][t] = Q4V(setzero_ps)();
    for (int64_t c0 = 0; c0 < nb; c0 += Q4_CHUNK) {
        const int cn = (int)(nb - c0 < Q4_CHUNK ? nb - c0 : Q4_CHUNK);
        q4_blk wb[Q4_CHUNK][Q4_GV];
        int32_t yo[Q4_CHUNK][ELI_KERNEL_MAX_NT];
        float dy[Q4_CHUNK][ELI_KERNEL_MAX_NT];
        for (int i = 0; i < cn; i++) {
            const size_t col = (size_t)ng * ELI_PACK_Q4_0_BYTES;
            const uint8_t *p = x + (size_t)(c0 + i) * col;
            /* as in decode: a few tokens stream the weights once, from L3 or DRAM */
            for (size_t l = 0; l < col; l += 64) _mm_prefetch((const char *)(p + 8 * col + l), _MM_HINT_T0);
            for (int v = 0; v < nv; v++) q4_unpack(p, v, &wb[i][v]);
            for (int t = 0; t < nt; t++) {
                yo[i][t] = q4_yoff(yt[t] + c0 + i);
                dy[i][t] = h2f(&yt[t][c0 + i].d);
            }
        }
        int t0 = 0;
        for (; t0 + Q4_TT <= nt; t0 += Q4_TT) q4_tiles(Q4_TT, nv, cn, c0, wb, yt, t0, yo, dy, acc);
        /* token tails of 2 and 1 (an MTP verify batch of 2, 3, 5, 6 ..: no padded tokens) */
        if (nt - t0 >= 2) q4_tiles(2, nv, cn, c0, wb, yt, t0, yo, dy, acc), t0 += 2;
        if (t0 < nt) q4_tiles(1, nv, cn, c0, wb, yt, t0, yo, dy, acc);
    }
    q4_store(nv, nt, acc, s, bs);
}

/* Decode: the runs one after the other, each read front to back as one stream (its block columns in
 * order), all of a run's row vectors' chains advancing together block by block. */
static void packed_gemv_q4_0(int64_t n, int64_t rows, const void *vx, size_t bx, const void *vy, float *s) {
    const int64_t nb = n / 32;
    const eli_block_q8_0 *y = vy;
    const eli_block_q8_0 *const yt[1] = {y};
    for (int64_t r0 = 0; r0 < rows; r0 += ELI_PACK_ROWS) {
        const int ng = (int)(rows - r0 < ELI_PACK_ROWS ? (rows - r0) / ELI_PACK_GROUP : ELI_PACK_RUN);
        const int nv = ng * Q4_VG;
        const uint8_t *x = (const uint8_t *)vx + (size_t)r0 * bx;
        const size_t col = (size_t)ng * ELI_PACK_Q4_0_BYTES;
        q4vf acc[Q4_GV][ELI_KERNEL_MAX_NT];
        for (int v = 0; v < nv; v++) acc[v][0] = Q4V(setzero_ps)();
        for (int64_t ib = 0; ib < nb; ib++) {
            const uint8_t *p = x + (size_t)ib * col;
            for (size_t l = 0; l < col; l += 64) _mm_prefetch((const char *)(p + 8 * col + l), _MM_HINT_T0);
            q4_blk wb[1][Q4_GV];
            for (int v = 0; v < nv; v++) q4_unpack(p, v, &wb[0][v]);
            const int32_t yo[1][ELI_KERNEL_MAX_NT] = {{q4_yoff(y + ib)}};
            const float dy[1][ELI_KERNEL_MAX_NT] = {{h2f(&y[ib].d)}};
            q4_tiles(1, nv, 1, ib, wb, yt, 0, yo, dy, acc);
        }
        q4_store(nv, 1, acc, s + r0, 0);
    }
}

/* ---- F16: a row's chain takes one FMA per element, 32 elements per block column ---- */

/* the activation's 32 halves of block ib, as floats */
static inline void pf_act(const eli_fp16 *y, float *o) {
    for (int i = 0; i < 4; i++) _mm256_storeu_ps(o + 8 * i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(y + 8 * i))));
}

/* NV row vectors' chains over one block column at p, interleaved element by element */
static inline __attribute__((always_inline)) void pf_col(const int NV, const uint8_t *p, const float yf[ELI_PACK_F16_QK],
                                                         q4vf acc[]) {
    for (int e = 0; e < ELI_PACK_F16_QK; e++) {
        const q4vf ye = Q4V(set1_ps)(yf[e]);
        for (int v = 0; v < NV; v++)
            acc[v] = Q4V(fmadd_ps)(pk_f16(p + (size_t)(v / Q4_VG) * ELI_PACK_F16_BYTES + 32 * e, v % Q4_VG), ye, acc[v]);
    }
}

static void packed_gemv_f16(int64_t n, int64_t rows, const void *vx, size_t bx, const void *vy, float *s) {
    const int64_t nb = n / ELI_PACK_F16_QK;
    const eli_fp16 *y = vy;
    for (int64_t r0 = 0; r0 < rows; r0 += ELI_PACK_ROWS) {
        const int ng = (int)(rows - r0 < ELI_PACK_ROWS ? (rows - r0) / ELI_PACK_GROUP : ELI_PACK_RUN);
        const int nv = ng * Q4_VG;
        const uint8_t *x = (const uint8_t *)vx + (size_t)r0 * bx;
        const size_t col = (size_t)ng * ELI_PACK_F16_BYTES;
        q4vf acc[Q4_GV];
        for (int v = 0; v < nv; v++) acc[v] = Q4V(setzero_ps)();
        for (int64_t ib = 0; ib < nb; ib++) {
            const uint8_t *p = x + (size_t)ib * col;
            for (size_t l = 0; l < col; l += 64) _mm_prefetch((const char *)(p + 2 * col + l), _MM_HINT_T0);
            float yf[ELI_PACK_F16_QK];
            pf_act(y + ib * ELI_PACK_F16_QK, yf);
            if (nv == Q4_GV) pf_col(Q4_GV, p, yf, acc); /* a whole run: the count a constant the loops unroll by */
            else pf_col(nv, p, yf, acc);
        }
        for (int v = 0; v < nv; v++) Q4V(storeu_ps)(s + r0 + v * Q4_W, acc[v]);
    }
}

/* TR row vectors (from v0) x TT tokens (from t0) over block column p, their chains in acc */
static inline __attribute__((always_inline)) void pf_tile(const int TR, const int TT, const uint8_t *p, int v0, int t0,
                                                          const float yf[][ELI_PACK_F16_QK], q4vf acc[][ELI_KERNEL_MAX_NT]) {
    q4vf f[PF_TR_SMALL][PF_TT];
    for (int v = 0; v < TR; v++)
        for (int t = 0; t < TT; t++) f[v][t] = acc[v0 + v][t0 + t];
    for (int e = 0; e < ELI_PACK_F16_QK; e++) {
        q4vf w[PF_TR_SMALL];
        for (int v = 0; v < TR; v++)
            w[v] = pk_f16(p + (size_t)((v0 + v) / Q4_VG) * ELI_PACK_F16_BYTES + 32 * e, (v0 + v) % Q4_VG);
        for (int t = 0; t < TT; t++) {
            const q4vf ye = Q4V(set1_ps)(yf[t0 + t][e]);
            for (int v = 0; v < TR; v++) f[v][t] = Q4V(fmadd_ps)(w[v], ye, f[v][t]);
        }
    }
    for (int v = 0; v < TR; v++)
        for (int t = 0; t < TT; t++) acc[v0 + v][t0 + t] = f[v][t];
}

/* all row vectors x TT tokens from t0: PF_TR row vectors per tile, PF_TR_SMALL for 1 or 2 tokens (an MTP
 * verification), whose FMA chains would otherwise be too few to cover the FMA latency */
static inline __attribute__((always_inline)) void pf_tiles(const int TT, int nv, const uint8_t *p, int t0,
                                                           const float yf[][ELI_PACK_F16_QK], q4vf acc[][ELI_KERNEL_MAX_NT]) {
    const int TR = TT <= 2 ? PF_TR_SMALL : PF_TR;
    int v0 = 0;
    for (; v0 + TR <= nv; v0 += TR) pf_tile(TR, TT, p, v0, t0, yf, acc);
    for (; v0 < nv; v0++) pf_tile(1, TT, p, v0, t0, yf, acc);
}

/* Prefill: one run of nr rows x nt tokens; per block column the tokens' activations are widened once, then
 * register tiles of PF_TR row vectors x PF_TT tokens (one conversion of a weight vector per PF_TT FMAs). */
static void packed_gemm_f16(int64_t n, int nr, int nt, const void *vx, size_t bx, const void *vy, size_t by, float *s,
                            size_t bs) {
    (void)bx;
    const int64_t nb = n / ELI_PACK_F16_QK;
    const int ng = nr / ELI_PACK_GROUP, nv = ng * Q4_VG;
    q4vf acc[Q4_GV][ELI_KERNEL_MAX_NT];
    for (int v = 0; v < nv; v++)
        for (int t = 0; t < nt; t++) acc[v][t] = Q4V(setzero_ps)();
    for (int64_t ib = 0; ib < nb; ib++) {
        const uint8_t *p = (const uint8_t *)vx + (size_t)ib * (size_t)ng * ELI_PACK_F16_BYTES;
        /* a few tokens stream the weights once: the next columns from L3 or DRAM ahead of the FMA chains */
        for (size_t l = 0; l < (size_t)ng * ELI_PACK_F16_BYTES; l += 64)
            _mm_prefetch((const char *)(p + 2 * (size_t)ng * ELI_PACK_F16_BYTES + l), _MM_HINT_T0);
        float yf[ELI_KERNEL_MAX_NT][ELI_PACK_F16_QK];
        for (int t = 0; t < nt; t++)
            pf_act((const eli_fp16 *)((const uint8_t *)vy + (size_t)t * by) + ib * ELI_PACK_F16_QK, yf[t]);
        /* full tiles, then the tail in tiles of 4, 2 and 1 token (an MTP verification has 2-7) */
        int t0 = 0;
        for (; t0 + PF_TT <= nt; t0 += PF_TT) pf_tiles(PF_TT, nv, p, t0, yf, acc);
        if (PF_TT > 4 && t0 + 4 <= nt) pf_tiles(4, nv, p, t0, yf, acc), t0 += 4;
        if (t0 + 2 <= nt) pf_tiles(2, nv, p, t0, yf, acc), t0 += 2;
        if (t0 < nt) pf_tiles(1, nv, p, t0, yf, acc);
    }
    q4_store(nv, nt, acc, s, bs);
}

/* ---- K-quants: one super-block of one row vector against one activation block ---- */

/* Q4_K: S = sum over sub-blocks j of sc_j * (q . y over j), M = sum of m_j * (y's sum over j), for TT (1 or
 * 2) tokens y[t] at once, which share the unpacking of the nibbles */
static inline __attribute__((always_inline)) void pk_q4_K_sums(const int TT, const uint8_t *g, int h,
                                                               const eli_block_q8_K *const y[], q4vi S[], q4vi M[]) {
    const q4vi m = Q4V(set1_epi8)(0x0F);
    for (int t = 0; t < TT; t++) S[t] = Q4_ZERO(), M[t] = Q4_ZERO();
    for (int c = 0; c < 4; c++) {
        q4vi lo[2], hi[2];
        for (int t = 0; t < TT; t++) lo[t] = Q4_ZERO(), hi[t] = Q4_ZERO();
        for (int i = 0; i < 8; i++) {
            const q4vi raw = q4_raw(g + 320 + 64 * (8 * c + i), h);
            const q4vi wl = Q4_AND(raw, m), wh = Q4_AND(Q4V(srli_epi16)(raw, 4), m);
            for (int t = 0; t < TT; t++) {
                lo[t] = PK_DOT4(lo[t], wl, y[t]->qs + 64 * c + 4 * i);
                hi[t] = PK_DOT4(hi[t], wh, y[t]->qs + 64 * c + 32 + 4 * i);
            }
        }
        const q4vi sl = pk_u8(g + 64 + 16 * (2 * c), h), sh = pk_u8(g + 64 + 16 * (2 * c + 1), h);
        for (int t = 0; t < TT; t++) {
            S[t] = Q4V(add_epi32)(S[t], Q4V(mullo_epi32)(lo[t], sl));
            S[t] = Q4V(add_epi32)(S[t], Q4V(mullo_epi32)(hi[t], sh));
        }
    }
    for (int j = 0; j < 8; j++) {
        const q4vi mj = pk_u8(g + 192 + 16 * j, h);
        for (int t = 0; t < TT; t++) {
            const q4vi ys = Q4V(set1_epi32)(y[t]->bsums[2 * j] + y[t]->bsums[2 * j + 1]);
            M[t] = Q4V(add_epi32)(M[t], Q4V(mullo_epi32)(mj, ys));
        }
    }
}

/* one super-block of row vector v (its run's block column at p, ng groups) into the chains f[t] of TT (1 or
 * 2) tokens y[t] */
static inline __attribute__((always_inline)) void pk_q4_K_step(const int TT, const uint8_t *p, int v,
                                                               const eli_block_q8_K *const y[], q4vf f[]) {
    const uint8_t *g = p + (size_t)(v / Q4_VG) * ELI_PACK_Q4_K_BYTES;
    const int h = v % Q4_VG;
    q4vi S[2], M[2];
    pk_q4_K_sums(TT, g, h, y, S, M);
    for (int t = 0; t < TT; t++) {
        const q4vf dy = Q4V(set1_ps)(y[t]->d);
        f[t] = Q4V(fmadd_ps)(Q4V(cvtepi32_ps)(S[t]), Q4V(mul_ps)(pk_f16(g, h), dy), f[t]);
        f[t] = Q4V(fnmadd_ps)(Q4V(cvtepi32_ps)(M[t]), Q4V(mul_ps)(pk_f16(g + 32, h), dy), f[t]);
    }
}

/* Decode and prefill of Q4_K: the runs' super-blocks in order, each row vector's chain advanced by
 * one super-block per token (prefill: the run's bytes of a super-block stay in L1 for all the call's
 * tokens, which go through them two at a time) */
#define ELI_X86_PACKED_K(NAME, GBYTES, STEP)                                                                          \
    static void packed_gemv_##NAME(int64_t n, int64_t rows, const void *vx, size_t bx, const void *vy, float *s) {   \
        const int64_t nb = n / 256;                                                                                   \
        const eli_block_q8_K *y = vy;                                                                                 \
        for (int64_t r0 = 0; r0 < rows; r0 += ELI_PACK_ROWS) {                                                        \
            const int ng = (int)(rows - r0 < ELI_PACK_ROWS ? (rows - r0) / ELI_PACK_GROUP : ELI_PACK_RUN);             \
            const int nv = ng * Q4_VG;                                                                                \
            const uint8_t *x = (const uint8_t *)vx + (size_t)r0 * bx;                                                 \
            const size_t col = (size_t)ng * (GBYTES);                                                                 \
            q4vf acc[Q4_GV];                                                                                          \
            for (int v = 0; v < nv; v++) acc[v] = Q4V(setzero_ps)();                                                  \
            for (int64_t ib = 0; ib < nb; ib++) {                                                                     \
                const uint8_t *p = x + (size_t)ib * col;                                                              \
                for (size_t l = 0; l < col; l += 64) _mm_prefetch((const char *)(p + col + l), _MM_HINT_T0);     \
                const eli_block_q8_K *const yb[1] = {y + ib};                                                         \
                for (int v = 0; v < nv; v++) STEP(1, p, v, yb, acc + v);                                              \
            }                                                                                                         \
            for (int v = 0; v < nv; v++) Q4V(storeu_ps)(s + r0 + v * Q4_W, acc[v]);                                   \
        }                                                                                                             \
    }                                                                                                                 \
    static void packed_gemm_##NAME(int64_t n, int nr, int nt, const void *vx, size_t bx, const void *vy, size_t by,  \
                                   float *s, size_t bs) {                                                             \
        (void)bx;                                                                                                     \
        const int64_t nb = n / 256;                                                                                   \
        const int ng = nr / ELI_PACK_GROUP, nv = ng * Q4_VG;                                                          \
        const size_t col = (size_t)ng * (GBYTES);                                                                     \
        q4vf acc[Q4_GV][ELI_KERNEL_MAX_NT];                                                                           \
        for (int v = 0; v < nv; v++)                                                                                  \
            for (int t = 0; t < nt; t++) acc[v][t] = Q4V(setzero_ps)();                                               \
        for (int64_t ib = 0; ib < nb; ib++) {                                                                         \
            const uint8_t *p = (const uint8_t *)vx + (size_t)ib * col;                                                \
            for (size_t l = 0; l < col; l += 64) _mm_prefetch((const char *)(p + col + l), _MM_HINT_T0);             \
            const eli_block_q8_K *yb[ELI_KERNEL_MAX_NT];                                                              \
            for (int t = 0; t < nt; t++) yb[t] = (const eli_block_q8_K *)((const uint8_t *)vy + (size_t)t * by) + ib; \
            for (int v = 0; v < nv; v++) {                                                                            \
                int t = 0;                                                                                            \
                for (; t + 2 <= nt; t += 2) STEP(2, p, v, yb + t, acc[v] + t);                                        \
                if (t < nt) STEP(1, p, v, yb + t, acc[v] + t);                                                        \
            }                                                                                                         \
        }                                                                                                             \
        q4_store(nv, nt, acc, s, bs);                                                                                 \
    }

ELI_X86_PACKED_K(q4_K, ELI_PACK_Q4_K_BYTES, pk_q4_K_step)

#endif
