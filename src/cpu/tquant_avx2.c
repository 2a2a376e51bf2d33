/* AVX2 + FMA + F16C kernels of the rotated-codebook formats (tquant.h): the tq4_0 weights and their Q8_TQ
 * activations, and the low-bit KV types (kvquant.h); kernels.c lays them over the AVX2 table after its CPUID
 * check. Bit-exact with the scalar reference (tquant_x86.h says how).
 *  - tbq score: per 32 values the int8 levels come from one vpshufb of the codes, the products with the
 *    int8 query from vpmaddubsw (|level| times the query with the level's sign), the per-16 multiplier from
 *    vpmaddwd; one int32 accumulator per query head, one row decoded for up to 8 heads.
 *  - accumulate: the decoders of rows to floats (the table's f32 attn_pv sums them); polar and qjl scores:
 *    float, in the reference's 8 lanes. */
#include "fp_exact.h"

#include "kernels.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)

#define TBQ_ACC(acc, p16, ms) _mm256_add_epi32(acc, _mm256_madd_epi16(p16, ms))
#include "tquant_x86.h"

/* ---- accumulate: the decoders (m * level, or polar's unit vector, into floats); kernels.c pairs them with
 * the table's f32 attn_pv (one FMA per term, rows in order: the reference's steps) ---- */

static inline __attribute__((always_inline)) float tbq_decode(int four, const eli_kvq *c, const uint8_t *blk, float *x) {
    const __m256i lut = tbq_lut(c);
    __m256 mf = _mm256_setzero_ps(); /* the multipliers of 8 sub-blocks (4 chunks of 32 values) as floats */
    for (int ch = 0; ch < c->d / 32; ch++) {
        if (ch % 4 == 0) mf = _mm256_cvtepi32_ps(_mm256_and_si256(tbq_mult_words(c, blk, 2 * ch), _mm256_set1_epi32(0xFFFF)));
        const __m256i lv = _mm256_shuffle_epi8(lut, tbq_codes32(four, blk + 2 + c->sub_bytes, ch));
        const __m128i h[2] = {_mm256_castsi256_si128(lv), _mm256_extracti128_si256(lv, 1)};
        for (int k = 0; k < 4; k++) {
            const __m128i b8 = k & 1 ? _mm_srli_si128(h[k / 2], 8) : h[k / 2];
            /* m * level: both small integers, the float product is exact (the reference's int product) */
            const __m256 m = _mm256_permutevar8x32_ps(mf, _mm256_set1_epi32(2 * (ch % 4) + k / 2));
            _mm256_storeu_ps(x + 32 * ch + 8 * k, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b8)), m));
        }
    }
    return h2f(blk);
}

/* the vector code covers tbq4_0 from 64 values, tbq3_0 from 128 */
static float decode_tbq4(const eli_kvq *c, const uint8_t *blk, float *x) {
    return c->d >= 64 ? tbq_decode(1, c, blk, x) : eli_kvq_decode_ref(c, blk, x);
}
static float decode_tbq3(const eli_kvq *c, const uint8_t *blk, float *x) {
    return c->d >= 128 ? tbq_decode(0, c, blk, x) : eli_kvq_decode_ref(c, blk, x);
}

/* ---- q4_polar ---- */

/* the decoded unit vector (kvquant.c, polar_unit: its halves e, o into e[0..d)), its scale r returned: the
 * radii tree top-down, the levels of 8 or more angles 8 lanes at a time (their 3-bit codes 8 to 3 bytes), level 1 with its 5-bit codes 8 to 5
 * bytes and the 32 cells' cos / sin from the first quadrant's 8 turned by quarter turns */
static float decode_polar(const eli_kvq *c, const uint8_t *blk, float *e) {
    float *o = e + c->d / 2;
    const int d = c->d, h = d / 2;
    const uint8_t *up = blk + ELI_KVQ_POLAR_L1_BYTES(d);
    float rho[ELI_KVQ_MAX_DIM / 2];
    rho[0] = 1.0f;
    for (int l = c->log2d; l >= 2; l--) {
        const int n = d >> l;
        const size_t base = (size_t)h - ((size_t)d >> (l - 1));
        if (n < 8) {
            eli_kvq_polar_level(c, blk, l, rho);
            continue;
        }
        const __m256 ct = _mm256_loadu_ps(c->cosl[l - 2]), st = _mm256_loadu_ps(c->sinl[l - 2]);
        for (int i = 0; i < n; i += 8) {
            uint32_t w = 0;
            memcpy(&w, up + 3 * (base + (size_t)i) / 8, 4); /* 3 bytes and the next (the stream or r follows) */
            const __m256i k = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32((int)w), _mm256_setr_epi32(0, 3, 6, 9, 12, 15, 18, 21)),
                                               _mm256_set1_epi32(7));
            const __m256 a = _mm256_loadu_ps(rho + i);
            _mm256_storeu_ps(rho + i, _mm256_mul_ps(a, _mm256_permutevar8x32_ps(ct, k)));
            _mm256_storeu_ps(rho + i + n, _mm256_mul_ps(a, _mm256_permutevar8x32_ps(st, k)));
        }
    }
    const __m256 cb = _mm256_loadu_ps(c->cos1), sb = _mm256_loadu_ps(c->sin1);
    const __m256i sign = _mm256_set1_epi32((int)0x80000000u);
    for (int i = 0; i < h; i += 8) {
        uint64_t w = 0;
        memcpy(&w, blk + 5 * (size_t)i / 8, 8); /* 5 bytes and 3 more (the 3-bit stream follows) */
        const __m256i v = _mm256_set1_epi64x((long long)w);
        const __m256i lo = _mm256_srlv_epi64(v, _mm256_setr_epi64x(0, 5, 10, 15));
        const __m256i hi = _mm256_srlv_epi64(v, _mm256_setr_epi64x(20, 25, 30, 35));
        const __m256i k = _mm256_and_si256(
            _mm256_permutevar8x32_epi32(_mm256_blend_epi32(lo, _mm256_slli_epi64(hi, 32), 0xAA), _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7)),
            _mm256_set1_epi32(31));
        /* cell 8q + r: (cos, sin) of cell r, swapped for odd q, cos negated for q = 1, 2 and sin for q = 2, 3 */
        const __m256i r = _mm256_and_si256(k, _mm256_set1_epi32(7));
        const __m256 c0 = _mm256_permutevar8x32_ps(cb, r), s0 = _mm256_permutevar8x32_ps(sb, r);
        const __m256 odd = _mm256_castsi256_ps(_mm256_slli_epi32(k, 28));
        const __m256i b4 = _mm256_slli_epi32(k, 27);
        const __m256 cn = _mm256_castsi256_ps(_mm256_and_si256(_mm256_xor_si256(_mm256_slli_epi32(k, 28), b4), sign));
        const __m256 sn = _mm256_castsi256_ps(_mm256_and_si256(b4, sign));
        const __m256 cs = _mm256_xor_ps(_mm256_blendv_ps(c0, s0, odd), cn);
        const __m256 sn2 = _mm256_xor_ps(_mm256_blendv_ps(s0, c0, odd), sn);
        const __m256 rr = _mm256_loadu_ps(rho + i);
        _mm256_storeu_ps(e + i, _mm256_mul_ps(rr, cs));
        _mm256_storeu_ps(o + i, _mm256_mul_ps(rr, sn2));
    }
    return h2f(blk + c->head_bytes - 2);
}

/* the reference's 8 lanes: lane i % 8 takes q[i] * e[i], then q[i + d/2] * o[i] */
static float polar_dot(const eli_kvq *c, const float *q, const float *x) {
    const int h = c->d / 2;
    __m256 acc = _mm256_setzero_ps();
    for (int i = 0; i < h; i += 8) {
        acc = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), _mm256_loadu_ps(x + i), acc);
        acc = _mm256_fmadd_ps(_mm256_loadu_ps(q + h + i), _mm256_loadu_ps(x + h + i), acc);
    }
    return hsum_ps(acc);
}

static void score_polar(const eli_kvq *c, int nc, const uint8_t *rows, size_t rb, int G, const void *qp, float *s,
                        size_t ss) {
    eli_kvq_score_decoded(c, nc, rows, rb, G, qp, s, ss, decode_polar, polar_dot);
}

/* ---- qjl1_256: +-Sq by the sign bits (an XOR of the float sign), 8 lanes ---- */

static void score_qjl(const eli_kvq *c, int nc, const uint8_t *rows, size_t rb, int G, const void *qp, float *s,
                      size_t ss) {
    const int d = c->d;
    const __m256i sel = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    const __m256 neg = _mm256_set1_ps(-0.0f);
    for (int j = 0; j < nc; j++) {
        const uint8_t *blk = rows + (size_t)j * rb;
        const float w = h2f(blk + d / 8) * c->qjl_factor;
        for (int g0 = 0; g0 < G; g0 += 8) {
            const int GB = G - g0 < 8 ? G - g0 : 8;
            __m256 acc[8];
            for (int g = 0; g < GB; g++) acc[g] = _mm256_setzero_ps();
            for (int i = 0; i < d; i += 8) {
                const __m256i set = _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32(blk[i / 8]), sel), sel);
                const __m256 flip = _mm256_andnot_ps(_mm256_castsi256_ps(set), neg);
                for (int g = 0; g < GB; g++) {
                    const float *z = (const float *)((const uint8_t *)qp + (size_t)(g0 + g) * c->query_bytes);
                    acc[g] = _mm256_add_ps(acc[g], _mm256_xor_ps(_mm256_loadu_ps(z + i), flip));
                }
            }
            for (int g = 0; g < GB; g++) s[(size_t)(g0 + g) * ss + j] = w * hsum_ps(acc[g]);
        }
    }
}

/* ---- Q8_TQ: the activation rotated per 256 (the butterflies of eli_tq_fwht, 8 lanes at a time: the same
 * a + b and a - b of the same values) and rounded to int8 (vcvtps2dq rounds to nearest even, as nearest_int) ---- */

/* one butterfly stage inside each vector: lanes l and l ^ h (h = 1, 2, 4) */
static inline __m256 fwht_in(__m256 v, __m256 sw, int blend) {
    const __m256 sum = _mm256_add_ps(v, sw), dif = _mm256_sub_ps(sw, v);
    switch (blend) {
    case 1: return _mm256_blend_ps(sum, dif, 0xAA);
    case 2: return _mm256_blend_ps(sum, dif, 0xCC);
    default: return _mm256_blend_ps(sum, dif, 0xF0);
    }
}

static void quantize_q8_tq(const float *x, void *dst, int64_t k) {
    const __m256i sel = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    const __m256 neg = _mm256_set1_ps(-0.0f), scale = _mm256_set1_ps(eli_tq_inv_sqrt(256));
    for (int64_t b = 0; b < k / 256; b++) {
        __m256 v[32];
        for (int j = 0; j < 32; j++) {
            const unsigned byte = (unsigned)(eli_tq_sign_bits[j / 8] >> (8 * (j % 8))) & 0xFF;
            const __m256i set = _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32((int)byte), sel), sel);
            v[j] = _mm256_xor_ps(_mm256_loadu_ps(x + b * 256 + 8 * j), _mm256_and_ps(_mm256_castsi256_ps(set), neg));
            v[j] = fwht_in(v[j], _mm256_permute_ps(v[j], 0xB1), 1);
            v[j] = fwht_in(v[j], _mm256_permute_ps(v[j], 0x4E), 2);
            v[j] = fwht_in(v[j], _mm256_permute2f128_ps(v[j], v[j], 1), 4);
        }
        for (int h = 1; h < 32; h <<= 1)
            for (int i = 0; i < 32; i += 2 * h)
                for (int j = i; j < i + h; j++) {
                    const __m256 a = v[j], c = v[j + h];
                    v[j] = _mm256_add_ps(a, c);
                    v[j + h] = _mm256_sub_ps(a, c);
                }
        __m256 mx = _mm256_setzero_ps();
        for (int j = 0; j < 32; j++) {
            v[j] = _mm256_mul_ps(v[j], scale);
            mx = _mm256_max_ps(mx, _mm256_andnot_ps(neg, v[j]));
        }
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        const float amax = _mm_cvtss_f32(m4);
        const float id = amax > 0.0f && amax <= 3.40282347e38f ? 127.0f / amax : 0.0f;
        eli_block_q8_tq *y = (eli_block_q8_tq *)dst + b;
        const __m256 idv = _mm256_set1_ps(id);
        const __m256i lim = _mm256_set1_epi32(127);
        for (int j = 0; j < 32; j += 4) {
            __m256i q[4];
            for (int u = 0; u < 4; u++)
                q[u] = _mm256_max_epi32(_mm256_min_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(v[j + u], idv)), lim),
                                        _mm256_sub_epi32(_mm256_setzero_si256(), lim));
            const __m256i p16 = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
            _mm256_storeu_si256((__m256i *)(y->qs + 8 * j),
                                _mm256_permutevar8x32_epi32(p16, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
        }
        const float d = id > 0.0f ? amax / 127.0f : 0.0f;
        memcpy(&y->d, &d, sizeof d);
    }
}

/* laid over the AVX2 table by kernels.c (not a table of its own: no name) */
const eli_kernels eli_tquant_avx2_table = {
    .vec_dot = {[ELI_TYPE_TQ4_0] = vec_dot_tq4_0},
    .gemm = {[ELI_TYPE_TQ4_0] = gemm_tq4_0},
    .gemm_nr = {[ELI_TYPE_TQ4_0] = 8},
    .quantize = {[ELI_TYPE_Q8_TQ] = quantize_q8_tq},
    .kvq = {.score = {score_tbq, score_tbq, score_polar, score_qjl}, .decode = {decode_tbq4, decode_tbq3, decode_polar, NULL}},
};

#else
/* Built without the AVX2 flags: no kernels (kernels.c references them on x86 only). */
const eli_kernels eli_tquant_avx2_table = {.name = NULL};
#endif
