/* The x86 kernels of the rotated-codebook formats (tquant.h: the tq4_0 weights and the low-bit KV types of
 * kvquant.h), shared by tquant_avx2.c and tquant_avx512.c, which
 * include this after defining TBQ_ACC(acc, p16, ms): acc (8 int32) += the int16 pair sums p16 times the
 * int16 multipliers ms, pairwise (AVX2: vpmaddwd + vpaddd; AVX-512 VNNI: one vpdpwssd). Compiled with at
 * least -mavx2 -mfma -mf16c; not a public header.
 *
 * Bit-exact with the reference (kvquant.c): tbq scores are integer sums (any order) times the same two
 * float multiplies; the float kernels do the reference's per-element FMAs in its order and its 8-lane sums
 * (lane i % 8 is vector lane i % 8) with kernels_x86.h's hsum_ps tree. Head dims the vector code does not
 * cover (tbq4_0 below 64, tbq3_0 below 128) go to the reference. */
#ifndef ELI_TQUANT_X86_H
#define ELI_TQUANT_X86_H

#include <immintrin.h>
#include <string.h>

#include "kernels_x86.h"
#include "kvquant.h"
#include "tquant.h"

static inline int kvq_hsum_epi32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
    return _mm_cvtsi128_si32(s);
}

/* ---- tbq4_0 / tbq3_0 ---- */

/* the multipliers of sub-blocks k0 .. k0+7 (k0 a multiple of 8) as int32 words m * 0x10001 (m in both int16
 * halves, for vpmaddwd); reads 4 bytes (whole words: a load of 3 bytes would be assembled on the stack and
 * stall the vector load that follows), past the stream into the codes that follow it in the head */
static inline __m256i tbq_mult_words(const eli_kvq *c, const uint8_t *blk, int k0) {
    if (!c->sub_bits) return _mm256_set1_epi32(0x10001);
    uint32_t w = 0;
    __m256i m;
    if (c->sub_bits == 3) {
        memcpy(&w, blk + 2 + 3 * k0 / 8, 4);
        m = _mm256_add_epi32(_mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32((int)w), _mm256_setr_epi32(0, 3, 6, 9, 12, 15, 18, 21)),
                                              _mm256_set1_epi32(7)),
                             _mm256_set1_epi32(7));
    } else {
        memcpy(&w, blk + 2 + k0 / 4, 4);
        m = _mm256_add_epi32(_mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32((int)w), _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14)),
                                              _mm256_set1_epi32(3)),
                             _mm256_set1_epi32(4));
    }
    return _mm256_or_si256(m, _mm256_slli_epi32(m, 16));
}

/* the codes of values 32 ch .. 32 ch + 31 as bytes */
static inline __attribute__((always_inline)) __m256i tbq_codes32(int four, const uint8_t *codes, int ch) {
    if (four) {
        __m256i raw = loadu256(codes + 32 * (ch >> 1));
        if (ch & 1) raw = _mm256_srli_epi16(raw, 4);
        return _mm256_and_si256(raw, _mm256_set1_epi8(0x0F));
    }
    const uint8_t *g = codes + 48 * (ch >> 2);
    const int m = ch & 3;
    const __m256i lo = _mm256_and_si256(_mm256_srl_epi16(loadu256(g), _mm_cvtsi32_si128(2 * m)), _mm256_set1_epi8(3));
    const __m256i hb = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(g + 32)));
    const __m256i bit = _mm256_setr_m128i(_mm_set1_epi8((char)(1 << (2 * m))), _mm_set1_epi8((char)(1 << (2 * m + 1))));
    const __m256i hi = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hb, bit), bit), _mm256_set1_epi8(4));
    return _mm256_or_si256(lo, hi);
}

static inline __m256i tbq_lut(const eli_kvq *c) {
    int8_t l[16] = {0};
    memcpy(l, c->cb->levels, (size_t)c->cb->n_levels);
    return _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)l));
}

/* one block (a head of c, or a tq4_0 block: the same bytes as a tbq4_0 head of 256) against GB (<= 8) int8
 * vectors qstride bytes apart, their int8 values at qoff: acc[g] = its int32 lane sums, lane l taking
 * values 4l..4l+3 of every 32 (times their multiplier) */
static inline __attribute__((always_inline)) void tbq_block_lanes(int four, int GB, const eli_kvq *c, __m256i lut,
                                                                  const uint8_t *blk, const uint8_t *qp, size_t qstride,
                                                                  size_t qoff, __m256i *acc) {
    const uint8_t *codes = blk + 2 + c->sub_bytes;
    const __m256i idx[4] = {_mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1), _mm256_setr_epi32(2, 2, 2, 2, 3, 3, 3, 3),
                            _mm256_setr_epi32(4, 4, 4, 4, 5, 5, 5, 5), _mm256_setr_epi32(6, 6, 6, 6, 7, 7, 7, 7)};
    for (int g = 0; g < GB; g++) acc[g] = _mm256_setzero_si256();
    __m256i words = _mm256_setzero_si256();
    for (int ch = 0; ch < c->d / 32; ch++) {
        if (ch % 4 == 0) words = tbq_mult_words(c, blk, 2 * ch);
        const __m256i ms = _mm256_permutevar8x32_epi32(words, idx[ch & 3]);
        const __m256i lv = _mm256_shuffle_epi8(lut, tbq_codes32(four, codes, ch));
        const __m256i a = _mm256_abs_epi8(lv);
        for (int g = 0; g < GB; g++) {
            const __m256i q = loadu256(qp + (size_t)g * qstride + qoff + 32 * ch);
            acc[g] = TBQ_ACC(acc[g], _mm256_maddubs_epi16(a, _mm256_sign_epi8(q, lv)), ms);
        }
    }
}

/* one KV head against GB prepared queries: s[g * ss] = (scale * dq_g) * isum_g */
static inline __attribute__((always_inline)) void tbq_score_row(int four, int GB, const eli_kvq *c, __m256i lut,
                                                                const uint8_t *blk, const uint8_t *qp, float *s,
                                                                size_t ss) {
    __m256i acc[8];
    tbq_block_lanes(four, GB, c, lut, blk, qp, c->query_bytes, 64, acc);
    const float sk = h2f(blk);
    for (int g = 0; g < GB; g++) {
        float dq;
        memcpy(&dq, qp + (size_t)g * c->query_bytes, sizeof dq);
        s[(size_t)g * ss] = (sk * dq) * (float)kvq_hsum_epi32(acc[g]);
    }
}

static inline __attribute__((always_inline)) void tbq_score(int four, const eli_kvq *c, int nc, const uint8_t *rows,
                                                            size_t rb, int G, const void *qp, float *s, size_t ss) {
    if (c->d < (four ? 64 : 128)) {
        eli_kvq_score_ref(c, nc, rows, rb, G, qp, s, ss);
        return;
    }
    const __m256i lut = tbq_lut(c);
    for (int g0 = 0; g0 < G; g0 += 8) {
        const uint8_t *qg = (const uint8_t *)qp + (size_t)g0 * c->query_bytes;
        float *sg = s + (size_t)g0 * ss;
        for (int j = 0; j < nc; j++) {
            const uint8_t *blk = rows + (size_t)j * rb;
            switch (G - g0 < 8 ? G - g0 : 8) {
            case 1: tbq_score_row(four, 1, c, lut, blk, qg, sg + j, ss); break;
            case 2: tbq_score_row(four, 2, c, lut, blk, qg, sg + j, ss); break;
            case 3: tbq_score_row(four, 3, c, lut, blk, qg, sg + j, ss); break;
            case 4: tbq_score_row(four, 4, c, lut, blk, qg, sg + j, ss); break;
            case 5: tbq_score_row(four, 5, c, lut, blk, qg, sg + j, ss); break;
            case 6: tbq_score_row(four, 6, c, lut, blk, qg, sg + j, ss); break;
            case 7: tbq_score_row(four, 7, c, lut, blk, qg, sg + j, ss); break;
            default: tbq_score_row(four, 8, c, lut, blk, qg, sg + j, ss); break;
            }
        }
    }
}

static void score_tbq(const eli_kvq *c, int nc, const uint8_t *rows, size_t rb, int G, const void *qp, float *s,
                      size_t ss) {
    if (c->type == ELI_KV_TBQ4_0) tbq_score(1, c, nc, rows, rb, G, qp, s, ss);
    else tbq_score(0, c, nc, rows, rb, G, qp, s, ss);
}

/* ---- tq4_0 weights (quants.h) against Q8_TQ activations ---- */

/* a tq4_0 block is laid out as a tbq4_0 head of 256 (scale, 3-bit multipliers, 4-bit codes) */
static const eli_kvq tq4_block = {.type = ELI_KV_TBQ4_0, .d = 256, .log2d = 8, .cb = &eli_tq_cb4, .sub_bits = 3, .sub_bytes = 6};

/* quants.c's vec_dot: 8 float lanes, per block lane l = fma((float)isum_l, d_x * d_y, lane l), the lanes added
 * in hsum_ps's tree at the end */
static float vec_dot_tq4_0(int64_t n, const void *vx, const void *vy) {
    const __m256i lut = tbq_lut(&tq4_block);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / 256; b++) {
        const uint8_t *x = (const uint8_t *)vx + b * sizeof(eli_block_tq4_0), *y = (const uint8_t *)vy + b * sizeof(eli_block_q8_tq);
        __m256i l;
        tbq_block_lanes(1, 1, &tq4_block, lut, x, y, 0, 4, &l);
        float dy;
        memcpy(&dy, y, sizeof dy);
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(l), _mm256_set1_ps(h2f(x) * dy), acc);
    }
    return hsum_ps(acc);
}

/* nr rows x nt tokens: each weight block decoded once per group of up to 8 tokens; every (row, token) has its
 * own 8 float lanes, as vec_dot */
static void gemm_tq4_0(int64_t n, int nr, int nt, const void *vx, size_t bx, const void *vy, size_t by, float *s,
                       size_t bs) {
    const __m256i lut = tbq_lut(&tq4_block);
    for (int r = 0; r < nr; r++) {
        __m256 acc[ELI_KERNEL_MAX_NT];
        for (int t = 0; t < nt; t++) acc[t] = _mm256_setzero_ps();
        const uint8_t *x = (const uint8_t *)vx + (size_t)r * bx;
        for (int64_t b = 0; b < n / 256; b++) {
            const uint8_t *xb = x + b * sizeof(eli_block_tq4_0);
            const float dx = h2f(xb);
            for (int t0 = 0; t0 < nt; t0 += 8) {
                const uint8_t *yb = (const uint8_t *)vy + (size_t)t0 * by + b * sizeof(eli_block_q8_tq);
                __m256i l[8];
                const int gb = nt - t0 < 8 ? nt - t0 : 8;
                switch (gb) {
                case 1: tbq_block_lanes(1, 1, &tq4_block, lut, xb, yb, by, 4, l); break;
                case 2: tbq_block_lanes(1, 2, &tq4_block, lut, xb, yb, by, 4, l); break;
                case 3: tbq_block_lanes(1, 3, &tq4_block, lut, xb, yb, by, 4, l); break;
                case 4: tbq_block_lanes(1, 4, &tq4_block, lut, xb, yb, by, 4, l); break;
                case 5: tbq_block_lanes(1, 5, &tq4_block, lut, xb, yb, by, 4, l); break;
                case 6: tbq_block_lanes(1, 6, &tq4_block, lut, xb, yb, by, 4, l); break;
                case 7: tbq_block_lanes(1, 7, &tq4_block, lut, xb, yb, by, 4, l); break;
                default: tbq_block_lanes(1, 8, &tq4_block, lut, xb, yb, by, 4, l); break;
                }
                for (int g = 0; g < gb; g++) {
                    float dy;
                    memcpy(&dy, yb + (size_t)g * by, sizeof dy);
                    acc[t0 + g] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(l[g]), _mm256_set1_ps(dx * dy), acc[t0 + g]);
                }
            }
        }
        for (int t = 0; t < nt; t++) s[(size_t)t * bs + r] = hsum_ps(acc[t]);
    }
}

#endif
