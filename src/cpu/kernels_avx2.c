/* AVX2 + FMA + F16C kernels. This file alone is compiled with -mavx2 -mfma -mf16c (CMakeLists.txt), and
 * kernels.c only hands out its table after CPUID says the CPU and OS support all three.
 *
 * Bit-exactness with quants.c (see kernels.h): the integer formats compute the same integer sums as the
 * scalar reference (integer addition is associative, so any SIMD order is fine) and then perform the
 * same float operations in the same order:
 *  - Q4_0 / Q4_1 / Q5_0 / Q5_1 / Q8_0: 8 float lanes per row, one FMA per block of the 8 int32 lane
 *    sums that maddubs + madd produce (lane l: elements 4l..4l+3), the lanes added in a fixed tree at
 *    the end (quants.c, lanes8_fma); Q4_1 / Q5_1 keep their min terms in one more FMA chain.
 *  - Q4_K / Q5_K / Q6_K: 8 int32 lanes per super-block, lane l taking elements 4l..4l+3 of every
 *    32-element chunk times the sub-block scale (quants.c, klanes_chunk): maddubs on the unpacked chunk
 *    in element order, then madd with the scale vector (Q6_K: one scale per 128-bit half). The min
 *    lanes (Q4_K / Q5_K) and Q6_K's offset lanes are one madd of the activation's bsums per super-block;
 *    then one FMA per super-block with d (and one with -dmin), the lanes8_total tree at the end.
 * The prefill microkernels (gemm_*) unpack each weight block once for a tile of rows x tokens and keep
 * these exact per-(row, token) operations.
 * Float contraction is off (as in quants.c): a*b+c must not become an FMA where the reference rounds the
 * product; the fused steps are written as explicit FMAs. */
#include "fp_exact.h"

#include "kernels.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)

#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "kernels_x86.h"
/* the K-quant scale multiply-accumulate of the decode kernels in kernels_x86_kq.h: vpmaddwd + vpaddd */
#define KACC(acc, p, sc) _mm256_add_epi32(acc, _mm256_madd_epi16(p, sc))
#include "kernels_x86_kq.h"

/* ---------------------------------------------------------------------------------------------------
 * helpers
 * ------------------------------------------------------------------------------------------------- */

static inline eli_fp16 f2h(float f) { return (eli_fp16)_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT); }

static inline int hsum_epi32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

/* ---------------------------------------------------------------------------------------------------
 * activation quantizers (same bytes as quants.c for finite input)
 * ------------------------------------------------------------------------------------------------- */

static inline __m256 vabs(__m256 v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }

static inline float hmax_ps(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

/* C roundf (half away from zero), NaN -> 0, clamped to [-128, 127], as int32 */
static inline __m256i round_i8(__m256 v) {
    const __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __m256 frac = _mm256_sub_ps(v, t); /* exact */
    const __m256 half = _mm256_cmp_ps(vabs(frac), _mm256_set1_ps(0.5f), _CMP_GE_OQ);
    const __m256 one = _mm256_or_ps(_mm256_set1_ps(1.0f), _mm256_and_ps(v, _mm256_set1_ps(-0.0f)));
    __m256 r = _mm256_add_ps(t, _mm256_and_ps(half, one));
    r = _mm256_and_ps(r, _mm256_cmp_ps(v, v, _CMP_ORD_Q));
    r = _mm256_min_ps(_mm256_max_ps(r, _mm256_set1_ps(-128.f)), _mm256_set1_ps(127.f));
    return _mm256_cvttps_epi32(r);
}

/* 4 vectors of 8 int32 (each in [-128, 127]) -> 32 int8 in order */
static inline __m256i pack_i8(__m256i i0, __m256i i1, __m256i i2, __m256i i3) {
    const __m256i a = _mm256_packs_epi32(i0, i1);
    const __m256i b = _mm256_packs_epi32(i2, i3);
    const __m256i c = _mm256_packs_epi16(a, b);
    return _mm256_permutevar8x32_epi32(c, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

static void quantize_q8_0(const float *x, void *dst, int64_t k) {
    const int64_t nb = k / ELI_QK8_0;
    uint8_t *out = dst;
    for (int64_t i = 0; i < nb; i++, x += 32) {
        __m256 v[4];
        __m256 mx = _mm256_setzero_ps();
        for (int j = 0; j < 4; j++) {
            v[j] = _mm256_loadu_ps(x + 8 * j);
            mx = _mm256_max_ps(mx, vabs(v[j]));
        }
        const float amax = hmax_ps(mx);
        const float d = amax / ((1 << 7) - 1);
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        const __m256 vid = _mm256_set1_ps(id);
        eli_block_q8_0 b;
        b.d = f2h(d);
        const __m256i q = pack_i8(round_i8(_mm256_mul_ps(v[0], vid)), round_i8(_mm256_mul_ps(v[1], vid)),
                                  round_i8(_mm256_mul_ps(v[2], vid)), round_i8(_mm256_mul_ps(v[3], vid)));
        _mm256_storeu_si256((__m256i *)b.qs, q);
        memcpy(out + i * sizeof b, &b, sizeof b);
    }
}

static void quantize_q8_1(const float *x, void *dst, int64_t k) {
    const int64_t nb = k / ELI_QK8_1;
    uint8_t *out = dst;
    for (int64_t i = 0; i < nb; i++, x += 32) {
        __m256 v[4];
        __m256 mx = _mm256_setzero_ps();
        for (int j = 0; j < 4; j++) {
            v[j] = _mm256_loadu_ps(x + 8 * j);
            mx = _mm256_max_ps(mx, vabs(v[j]));
        }
        const float amax = hmax_ps(mx);
        const float d = amax / ((1 << 7) - 1);
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        const __m256 vid = _mm256_set1_ps(id);
        __m256i iq[4];
        for (int j = 0; j < 4; j++) iq[j] = round_i8(_mm256_mul_ps(v[j], vid));
        const int sum = hsum_epi32(_mm256_add_epi32(_mm256_add_epi32(iq[0], iq[1]), _mm256_add_epi32(iq[2], iq[3])));
        eli_block_q8_1 b;
        b.d = f2h(d);
        b.s = f2h((float)sum * d);
        _mm256_storeu_si256((__m256i *)b.qs, pack_i8(iq[0], iq[1], iq[2], iq[3]));
        memcpy(out + i * sizeof b, &b, sizeof b);
    }
}

/* ggml's nearest_int (magic-number rounding), lane-wise, bit for bit */
static inline __m256i nearest_int8(__m256 v) {
    const __m256 t = _mm256_add_ps(v, _mm256_set1_ps(12582912.f));
    const __m256i i = _mm256_and_si256(_mm256_castps_si256(t), _mm256_set1_epi32(0x007fffff));
    return _mm256_sub_epi32(i, _mm256_set1_epi32(0x00400000));
}

static void quantize_q8_K(const float *x, void *dst, int64_t k) {
    const int64_t nb = k / ELI_QK_K;
    uint8_t *out = dst;
    for (int64_t i = 0; i < nb; i++, x += ELI_QK_K) {
        eli_block_q8_K b;
        __m256 mx = _mm256_setzero_ps();
        for (int j = 0; j < ELI_QK_K; j += 8) mx = _mm256_max_ps(vabs(_mm256_loadu_ps(x + j)), mx); /* NaN skipped */
        const float amax = hmax_ps(mx);
        if (amax == 0.0f) {
            memset(&b, 0, sizeof b);
            memcpy(out + i * sizeof b, &b, sizeof b);
            continue;
        }
        /* the first element of largest magnitude */
        float max = 0;
        const __m256 va = _mm256_set1_ps(amax);
        for (int j = 0; j < ELI_QK_K; j += 8) {
            const int m = _mm256_movemask_ps(_mm256_cmp_ps(vabs(_mm256_loadu_ps(x + j)), va, _CMP_EQ_OQ));
            if (m) {
                max = x[j + __builtin_ctz((unsigned)m)];
                break;
            }
        }
        const float iscale = -127.f / max;
        const __m256 vis = _mm256_set1_ps(iscale);
        const __m256i lo = _mm256_set1_epi32(-128), hi = _mm256_set1_epi32(127);
        for (int j = 0; j < ELI_QK_K; j += 32) {
            __m256i q[4];
            for (int u = 0; u < 4; u++) {
                const __m256i n = nearest_int8(_mm256_mul_ps(vis, _mm256_loadu_ps(x + j + 8 * u)));
                q[u] = _mm256_max_epi32(lo, _mm256_min_epi32(hi, n));
            }
            const __m256i p = pack_i8(q[0], q[1], q[2], q[3]);
            _mm256_storeu_si256((__m256i *)(b.qs + j), p);
            /* bsums of the two 16-groups: sign-extend to int16, madd with ones, reduce per 128-bit half */
            const __m256i w0 = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(p));
            const __m256i w1 = _mm256_cvtepi8_epi16(_mm256_extracti128_si256(p, 1));
            b.bsums[j / 16] = (int16_t)hsum_epi32(_mm256_madd_epi16(w0, _mm256_set1_epi16(1)));
            b.bsums[j / 16 + 1] = (int16_t)hsum_epi32(_mm256_madd_epi16(w1, _mm256_set1_epi16(1)));
        }
        b.d = 1 / iscale;
        memcpy(out + i * sizeof b, &b, sizeof b);
    }
}

static void quantize_f16(const float *x, void *dst, int64_t n) {
    uint8_t *p = dst;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(p + 2 * i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) {
        const eli_fp16 h = f2h(x[i]);
        memcpy(p + 2 * i, &h, 2);
    }
}

static void quantize_bf16(const float *x, void *dst, int64_t n) {
    uint8_t *p = dst;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256i u = _mm256_castps_si256(_mm256_loadu_ps(x + i));
        const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
        __m256i r = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), odd), 16);
        const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)),
                                               _mm256_set1_epi32(0x7f800000));
        const __m256i qn = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
        r = _mm256_blendv_epi8(r, qn, nan);
        const __m256i pk = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);
        _mm_storeu_si128((__m128i *)(p + 2 * i), _mm256_castsi256_si128(pk));
    }
    for (; i < n; i++) {
        const eli_bf16 h = eli_fp32_to_bf16(x[i]);
        memcpy(p + 2 * i, &h, 2);
    }
}

/* ---------------------------------------------------------------------------------------------------
 * 32-element block formats: per row 8 float lanes with one FMA per block (quants.c, lanes8_fma)
 * ------------------------------------------------------------------------------------------------- */

/* 32-element blocks, prefill: the pieces of ELI_X86_GEMM32 (kernels_x86.h). GX(xb) prepares a weight
 * block (a = unsigned operand, b = sign source), GY(yb) an activation block (q = quants, o = offset pair
 * sums), GP(x, y) gives the pair's 8 int32 lane sums. */
/* 2 x 4 tiles: 6% faster than 4 x 2 on cached Q4_0 (8 accumulators either way in the 16 registers) */
#define G32_RM 2
#define G32_NT 4

typedef struct {
    __m256i a, b;
} gx_t;
typedef struct {
    __m256i q, o;
} gy_t;

/* Q4_0: u = nibble in [0, 15]; (u - 8) * y pair sums = maddubs(u, y) - maddubs(8, y), exact in int16 */
static inline gx_t gx_q4_0(const eli_block_q4_0 *x) {
    const gx_t g = {nibbles32(x->qs), _mm256_setzero_si256()};
    return g;
}
static inline gy_t gy_off8(const eli_block_q8_0 *y) {
    const __m256i q = loadu256(y->qs);
    const gy_t g = {q, _mm256_maddubs_epi16(_mm256_set1_epi8(8), q)};
    return g;
}
#define GP_OFF(x, y) _mm256_madd_epi16(_mm256_sub_epi16(_mm256_maddubs_epi16((x).a, (y).q), (y).o), _mm256_set1_epi16(1))

/* Q8_0: |x| * (sign(x) y) */
static inline gx_t gx_q8_0(const eli_block_q8_0 *x) {
    const __m256i q = loadu256(x->qs);
    const gx_t g = {_mm256_sign_epi8(q, q), q};
    return g;
}
static inline gy_t gy_plain_q8_0(const eli_block_q8_0 *y) {
    const gy_t g = {loadu256(y->qs), _mm256_setzero_si256()};
    return g;
}
#define GP_Q8_0(x, y) _mm256_madd_epi16(_mm256_maddubs_epi16((x).a, _mm256_sign_epi8((y).q, (x).b)), _mm256_set1_epi16(1))

/* Q5_0: u = nibble | bit4 << 4 in [0, 31]; (u - 16) * y = maddubs(u, y) - maddubs(16, y) */
static inline gx_t gx_q5_0(const eli_block_q5_0 *x) {
    const gx_t g = {_mm256_or_si256(nibbles32(x->qs), _mm256_and_si256(bits32(x->qh), _mm256_set1_epi8(0x10))),
                    _mm256_setzero_si256()};
    return g;
}
static inline gy_t gy_off16(const eli_block_q8_0 *y) {
    const __m256i q = loadu256(y->qs);
    const gy_t g = {q, _mm256_maddubs_epi16(_mm256_set1_epi8(16), q)};
    return g;
}

/* Q4_1 / Q5_1: unsigned u * y */
static inline gx_t gx_q4_1(const eli_block_q4_1 *x) {
    const gx_t g = {nibbles32(x->qs), _mm256_setzero_si256()};
    return g;
}
static inline gx_t gx_q5_1(const eli_block_q5_1 *x) {
    const gx_t g = {_mm256_or_si256(nibbles32(x->qs), _mm256_and_si256(bits32(x->qh), _mm256_set1_epi8(0x10))),
                    _mm256_setzero_si256()};
    return g;
}
static inline gy_t gy_plain_q8_1(const eli_block_q8_1 *y) {
    const gy_t g = {loadu256(y->qs), _mm256_setzero_si256()};
    return g;
}
#define GP_U(x, y) _mm256_madd_epi16(_mm256_maddubs_epi16((x).a, (y).q), _mm256_set1_epi16(1))

/* the prefill microkernel (kernels_x86.h) in tiles of G32_RM rows x G32_NT tokens */
ELI_X86_GEMM32(q4_0, eli_block_q4_0, eli_block_q8_0, gx_t, gx_q4_0, gy_t, gy_off8, GP_OFF, G32_RM, G32_NT, 0)
ELI_X86_GEMM32(q8_0, eli_block_q8_0, eli_block_q8_0, gx_t, gx_q8_0, gy_t, gy_plain_q8_0, GP_Q8_0, G32_RM, G32_NT, 0)
ELI_X86_GEMM32(q5_0, eli_block_q5_0, eli_block_q8_0, gx_t, gx_q5_0, gy_t, gy_off16, GP_OFF, G32_RM, G32_NT, 0)
ELI_X86_GEMM32(q4_1, eli_block_q4_1, eli_block_q8_1, gx_t, gx_q4_1, gy_t, gy_plain_q8_1, GP_U, G32_RM, G32_NT, 1)
ELI_X86_GEMM32(q5_1, eli_block_q5_1, eli_block_q8_1, gx_t, gx_q5_1, gy_t, gy_plain_q8_1, GP_U, G32_RM, G32_NT, 1)

/* packed Q4_0 (pack.h, kernels_x86_packed.h): half a packed group, 8 rows, per 256-bit vector, 1 x 4 prefill
 * tiles (3% faster than 2 x 2 on the earlier transposing kernel). A dword group of 8 rows is one VPMADDUBSW of the unsigned nibbles u
 * (<= 15) with the broadcast activation dword y: int16 pair sums u0 y0 + u1 y1, |.| <= 2 * 15 * 128 =
 * 3840, no saturation; the 8 groups' pair sums are added in int16, |.| <= 8 * 3840 = 30720 < 32768, exact
 * (for any int8 activation, -128 included); one VPMADDWD with ones then gives each row's sum of u * y in
 * int32, and adding -8 * (sum of y) its isum */
#define Q4_W 8
typedef __m256i q4vi;
typedef __m256 q4vf;
#define Q4_TR 1
#define Q4_TT 4
#define Q4_TR_SMALL 2
#define PF_TR 2
#define PF_TR_SMALL 4
#define PF_TT 4
#define q4_raw(p, h) loadu256((p) + 32 * (h))
#define pk_f16(p, h) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((p) + 16 * (h))))
#define pk_u8(p, h) _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)((p) + 8 * (h))))
/* K-quants: u8 * s8 pair sums (|.| <= 2 * 15 * 128, no saturation) to int32 at once */
#define PK_DOT4(a, w, p)                                                                                          \
    _mm256_add_epi32(a, _mm256_madd_epi16(_mm256_maddubs_epi16(w, _mm256_set1_epi32(q4_ld32(p))), _mm256_set1_epi16(1)))
#define Q4V(op) _mm256_##op
#define Q4_AND _mm256_and_si256
#define Q4_OR _mm256_or_si256
#define Q4_ZERO _mm256_setzero_si256
#define Q4_ACC0(o) _mm256_setzero_si256()
#define Q4_STEP(a, w, p) _mm256_add_epi16(a, _mm256_maddubs_epi16(w, _mm256_set1_epi32(q4_ld32(p))))
#define Q4_END(a, o) _mm256_add_epi32(_mm256_madd_epi16(a, _mm256_set1_epi16(1)), _mm256_set1_epi32(o))
#include "kernels_x86_packed.h"

/* the decode kernels (kernels_x86.h) */
ELI_X86_ROWS32(q4_0, eli_block_q4_0, eli_block_q8_0, gx_q4_0, gy_t, gy_off8, GP_OFF, 0)
ELI_X86_ROWS32(q8_0, eli_block_q8_0, eli_block_q8_0, gx_q8_0, gy_t, gy_plain_q8_0, GP_Q8_0, 0)
ELI_X86_ROWS32(q5_0, eli_block_q5_0, eli_block_q8_0, gx_q5_0, gy_t, gy_off16, GP_OFF, 0)
ELI_X86_ROWS32(q4_1, eli_block_q4_1, eli_block_q8_1, gx_q4_1, gy_t, gy_plain_q8_1, GP_U, 1)
ELI_X86_ROWS32(q5_1, eli_block_q5_1, eli_block_q8_1, gx_q5_1, gy_t, gy_plain_q8_1, GP_U, 1)


/* ---------------------------------------------------------------------------------------------------
 * K-quants: 8 int32 lanes per super-block, lane l = elements 4l..4l+3 of every 32-element chunk
 * (quants.c, klanes_chunk), then one FMA per super-block (and one for the min lanes). The decode
 * kernels and the unpacking helpers (scales, fifth bits, Q6_K quants, bsums lanes, the prefill's
 * unpacked rows) are shared with kernels_avx512.c through kernels_x86_kq.h; the prefill tile is below.
 * ------------------------------------------------------------------------------------------------- */

/* ---------------------------------------------------------------------------------------------------
 * K-quant prefill microkernels (gemm): GEMM_RM weight rows x up to ELI_KERNEL_MAX_NT tokens per call
 *
 * Each weight block is unpacked once per call (per token group) and multiplied with the tile's tokens.
 * Results are bit-identical to the one-row kernels above (kernels.h): per (row, token) the same integer
 * sums (any order) and the same float operations in the same order. Rows past nr and tokens past nt
 * repeat the last valid one (memory that exists); their results are computed like any other and dropped.
 * ------------------------------------------------------------------------------------------------- */

#define GEMM_RM KX_RM
#define GEMM_NP (ELI_KERNEL_MAX_NT / 2) /* token pairs per call */
/* rows ahead (two calls) that a call prefetches, super-block by super-block: GEMM_RM row streams at once
 * defeat the hardware prefetcher (measured on AVX-512, one thread, Q6_K 65536 x 1536 from DRAM: 2 tokens
 * 12.8 against 4.7 ms, one row at a time 2.7 ms per token) */
#define GEMM_PF (2 * GEMM_RM)

/* Per super-block the GEMM_RM weight rows are unpacked (kx_t, kernels_x86_kq.h), then every token pair is
 * multiplied with them. */
/* acc + v (int32), in inline assembly: with the intrinsic GCC re-associates the tile's 8 chains of 8 chunk
 * products into trees, storing every product to the stack first (measured Q4_K: 63 against 71 GMAC/s) */
static inline __m256i kacc(__m256i acc, __m256i v) {
    __asm__("vpaddd %1, %0, %0" : "+x"(acc) : "x"(v));
    return acc;
}

/* KMIN: Q4_K / Q5_K (min lanes, dmin after d at the block start); otherwise Q6_K (offset lanes: the bsums
 * product starts the int32 sums) */
#define DEF_GEMMK(NAME, XB, KX, KMIN)                                                                            \
    static void gemm_##NAME(int64_t n, int nr, int nt, const void *vx, size_t bx, const void *vy, size_t by,    \
                            float *s, size_t bs) {                                                               \
        const int64_t nb = n / ELI_QK_K;                                                                         \
        const int np = (nt + 1) / 2;                                                                             \
        const XB *xr[GEMM_RM];                                                                                   \
        const eli_block_q8_K *yt[2 * GEMM_NP];                                                                   \
        for (int r = 0; r < GEMM_RM; r++) xr[r] = (const XB *)((const uint8_t *)vx + (size_t)(r < nr ? r : nr - 1) * bx); \
        for (int t = 0; t < 2 * np; t++)                                                                         \
            yt[t] = (const eli_block_q8_K *)((const uint8_t *)vy + (size_t)(t < nt ? t : nt - 1) * by);          \
        __m256 acc[2 * GEMM_NP][GEMM_RM]; /* the one-row kernel's acc, per token and row */                     \
        for (int t = 0; t < 2 * np; t++)                                                                         \
            for (int r = 0; r < GEMM_RM; r++) acc[t][r] = _mm256_setzero_ps();                                   \
        kx_t k;                                                                                                  \
        for (int64_t i = 0; i < nb; i++) {                                                                       \
            const uint8_t *xi[GEMM_RM];                                                                          \
            for (int r = 0; r < GEMM_RM; r++) xi[r] = (const uint8_t *)(xr[r] + i);                              \
            for (int r = GEMM_PF; r < GEMM_PF + GEMM_RM; r++)                                                    \
                for (size_t l = 0; l < sizeof(XB); l += 64)                                                      \
                    _mm_prefetch((const char *)vx + (size_t)r * bx + (size_t)i * sizeof(XB) + l, _MM_HINT_T0);   \
            KX(&k, xi);                                                                                          \
            for (int p = 0; p < np; p++) {                                                                       \
                const eli_block_q8_K *ya = yt[2 * p] + i, *yb = yt[2 * p + 1] + i;                               \
                /* Q6_K: the offset lanes start the sums; the min lanes are made after the chunks */             \
                __m256i aa[GEMM_RM], ab[GEMM_RM];                                                                \
                for (int r = 0; r < GEMM_RM; r++) {                                                              \
                    aa[r] = KMIN ? _mm256_setzero_si256() : _mm256_madd_epi16(loadu256(ya->bsums), k.bw[r]);     \
                    ab[r] = KMIN ? _mm256_setzero_si256() : _mm256_madd_epi16(loadu256(yb->bsums), k.bw[r]);     \
                }                                                                                                \
                for (int j = 0; j < 8; j++) {                                                                    \
                    const __m256i qa = loadu256(ya->qs + 32 * j), qb = loadu256(yb->qs + 32 * j);                \
                    for (int r = 0; r < GEMM_RM; r++) {                                                          \
                        aa[r] = kacc(aa[r], _mm256_madd_epi16(_mm256_maddubs_epi16(k.q[r][j], qa), k.sc[r][j]));  \
                        ab[r] = kacc(ab[r], _mm256_madd_epi16(_mm256_maddubs_epi16(k.q[r][j], qb), k.sc[r][j]));  \
                    }                                                                                            \
                }                                                                                                \
                for (int r = 0; r < GEMM_RM; r++) {                                                              \
                    const float da = k.d[r] * ya->d, db = k.d[r] * yb->d;                                        \
                    acc[2 * p][r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(aa[r]), _mm256_set1_ps(da), acc[2 * p][r]); \
                    acc[2 * p + 1][r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ab[r]), _mm256_set1_ps(db), acc[2 * p + 1][r]); \
                    if (KMIN) {                                                                                  \
                        const float ma_ = k.dmin[r] * ya->d, mb_ = k.dmin[r] * yb->d;                            \
                        const __m256i ma = _mm256_madd_epi16(loadu256(ya->bsums), k.bw[r]);                      \
                        const __m256i mb = _mm256_madd_epi16(loadu256(yb->bsums), k.bw[r]);                      \
                        acc[2 * p][r] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(ma), _mm256_set1_ps(ma_), acc[2 * p][r]); \
                        acc[2 * p + 1][r] =                                                                      \
                            _mm256_fnmadd_ps(_mm256_cvtepi32_ps(mb), _mm256_set1_ps(mb_), acc[2 * p + 1][r]);    \
                    }                                                                                            \
                }                                                                                                \
            }                                                                                                    \
        }                                                                                                        \
        for (int t = 0; t < nt; t++)                                                                             \
            for (int r = 0; r < nr; r++) s[(size_t)t * bs + r] = hsum_ps(acc[t][r]);                             \
    }

DEF_GEMMK(q4_K, eli_block_q4_K, kx_q4_K, 1)
DEF_GEMMK(q5_K, eli_block_q5_K, kx_q5_K, 1)
DEF_GEMMK(q6_K, eli_block_q6_K, kx_q6_K, 0)

/* ---------------------------------------------------------------------------------------------------
 * float formats (kernels_x86.h): F16 gemm tiles of 2 rows x 3 tokens fit the 16 ymm registers
 * ------------------------------------------------------------------------------------------------- */

ELI_X86_FLOAT(f16, FL_F16)
ELI_X86_FLOAT(bf16, FL_BF16)
ELI_X86_FLOAT(f32, FL_F32)

/* ---------------------------------------------------------------------------------------------------
 * attention helpers (float accumulation, FMA)
 * ------------------------------------------------------------------------------------------------- */

/* 8 elements of a cache row, F16 or F32, as floats */
static inline __m256 ld8_row(int f16, const uint8_t *r, int64_t i) {
    return f16 ? LD8_F16(r + 2 * i) : _mm256_loadu_ps((const float *)r + i);
}

static inline float elem_row(int f16, const uint8_t *r, int64_t i) {
    return f16 ? _cvtsh_ss(((const eli_fp16 *)r)[i]) : ((const float *)r)[i];
}

/* Scores of C cells x GB heads: each K row is loaded (and converted) once for all the heads, and the
 * C * GB accumulators are independent FMA chains. */
static inline __attribute__((always_inline)) void qk_tile(int f16, int C, int GB, int64_t d, const uint8_t *r,
                                                          size_t rb, const float *q, float *s, size_t ss) {
    __m256 acc[2][4];
    for (int c = 0; c < C; c++)
        for (int g = 0; g < GB; g++) acc[c][g] = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= d; i += 8) {
        __m256 k[2];
        for (int c = 0; c < C; c++) k[c] = ld8_row(f16, r + (size_t)c * rb, i);
        for (int g = 0; g < GB; g++) {
            const __m256 qv = _mm256_loadu_ps(q + (size_t)g * d + i);
            for (int c = 0; c < C; c++) acc[c][g] = _mm256_fmadd_ps(k[c], qv, acc[c][g]);
        }
    }
    for (int c = 0; c < C; c++)
        for (int g = 0; g < GB; g++) {
            float v = hsum_ps(acc[c][g]);
            for (int64_t t = i; t < d; t++) v += elem_row(f16, r + (size_t)c * rb, t) * q[(size_t)g * d + t];
            s[(size_t)g * ss + c] = v;
        }
}

static inline __attribute__((always_inline)) void attn_qk(int f16, int64_t d, int nc, const void *rows, size_t rb,
                                                          int G, const float *q, float *s, size_t ss) {
    for (int g0 = 0; g0 < G; g0 += 4) {
        const int gb = G - g0 < 4 ? G - g0 : 4;
        const float *qg = q + (size_t)g0 * d;
        float *sg = s + (size_t)g0 * ss;
        int j = 0;
        for (; j + 2 <= nc; j += 2) {
            const uint8_t *r = (const uint8_t *)rows + (size_t)j * rb;
            switch (gb) {
            case 1: qk_tile(f16, 2, 1, d, r, rb, qg, sg + j, ss); break;
            case 2: qk_tile(f16, 2, 2, d, r, rb, qg, sg + j, ss); break;
            case 3: qk_tile(f16, 2, 3, d, r, rb, qg, sg + j, ss); break;
            default: qk_tile(f16, 2, 4, d, r, rb, qg, sg + j, ss); break;
            }
        }
        if (j < nc) {
            const uint8_t *r = (const uint8_t *)rows + (size_t)j * rb;
            switch (gb) {
            case 1: qk_tile(f16, 1, 1, d, r, rb, qg, sg + j, ss); break;
            case 2: qk_tile(f16, 1, 2, d, r, rb, qg, sg + j, ss); break;
            case 3: qk_tile(f16, 1, 3, d, r, rb, qg, sg + j, ss); break;
            default: qk_tile(f16, 1, 4, d, r, rb, qg, sg + j, ss); break;
            }
        }
    }
}

/* out[g][i0 .. i0 + 8W) += sum_j p[g][j] * row j, for GB heads: the outputs stay in registers over
 * all nc rows, each V slice is loaded once for the GB heads. */
static inline __attribute__((always_inline)) void pv_tile(int f16, int W, int GB, int64_t d, int64_t i0, int nc,
                                                          const uint8_t *rows, size_t rb, const float *p, size_t ss,
                                                          float *out) {
    __m256 acc[4][2];
    for (int g = 0; g < GB; g++)
        for (int w = 0; w < W; w++) acc[g][w] = _mm256_loadu_ps(out + (size_t)g * d + i0 + 8 * w);
    for (int j = 0; j < nc; j++) {
        const uint8_t *r = rows + (size_t)j * rb;
        __m256 v[2];
        for (int w = 0; w < W; w++) v[w] = ld8_row(f16, r, i0 + 8 * w);
        for (int g = 0; g < GB; g++) {
            const __m256 pg = _mm256_broadcast_ss(p + (size_t)g * ss + j);
            for (int w = 0; w < W; w++) acc[g][w] = _mm256_fmadd_ps(pg, v[w], acc[g][w]);
        }
    }
    for (int g = 0; g < GB; g++)
        for (int w = 0; w < W; w++) _mm256_storeu_ps(out + (size_t)g * d + i0 + 8 * w, acc[g][w]);
}

#define PV_TILES(W, GB_EXPR)                                                                                     \
    switch (GB_EXPR) {                                                                                           \
    case 1: pv_tile(f16, W, 1, d, i, nc, r, rb, pg, ss, og); break;                                              \
    case 2: pv_tile(f16, W, 2, d, i, nc, r, rb, pg, ss, og); break;                                              \
    case 3: pv_tile(f16, W, 3, d, i, nc, r, rb, pg, ss, og); break;                                              \
    default: pv_tile(f16, W, 4, d, i, nc, r, rb, pg, ss, og); break;                                             \
    }

static inline __attribute__((always_inline)) void attn_pv(int f16, int64_t d, int nc, const void *rows, size_t rb,
                                                          int G, const float *p, size_t ss, float *out) {
    const uint8_t *r = rows;
    for (int g0 = 0; g0 < G; g0 += 4) {
        const int gb = G - g0 < 4 ? G - g0 : 4;
        const float *pg = p + (size_t)g0 * ss;
        float *og = out + (size_t)g0 * d;
        int64_t i = 0;
        for (; i + 16 <= d; i += 16) PV_TILES(2, gb)
        for (; i + 8 <= d; i += 8) PV_TILES(1, gb)
        for (; i < d; i++)
            for (int j = 0; j < nc; j++)
                for (int g = 0; g < gb; g++)
                    og[(size_t)g * d + i] = fmaf(pg[(size_t)g * ss + j], elem_row(f16, r + (size_t)j * rb, i),
                                                 og[(size_t)g * d + i]);
    }
}

static void attn_qk_f32(int64_t d, int nc, const void *rows, size_t rb, int G, const float *q, float *s, size_t ss) {
    attn_qk(0, d, nc, rows, rb, G, q, s, ss);
}
static void attn_qk_f16(int64_t d, int nc, const void *rows, size_t rb, int G, const float *q, float *s, size_t ss) {
    attn_qk(1, d, nc, rows, rb, G, q, s, ss);
}
static void attn_pv_f32(int64_t d, int nc, const void *rows, size_t rb, int G, const float *p, size_t ss, float *out) {
    attn_pv(0, d, nc, rows, rb, G, p, ss, out);
}
static void attn_pv_f16(int64_t d, int nc, const void *rows, size_t rb, int G, const float *p, size_t ss, float *out) {
    attn_pv(1, d, nc, rows, rb, G, p, ss, out);
}

static void f16_to_f32(int64_t n, const eli_fp16 *x, float *y) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, LD8_F16(x + i));
    for (; i < n; i++) y[i] = _cvtsh_ss(x[i]);
}

static void scale_f32(int64_t n, float a, float *y) {
    const __m256 va = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(va, _mm256_loadu_ps(y + i)));
    for (; i < n; i++) y[i] *= a;
}

/* exp(y) for 8 floats, y clamped to [-87, 88] (the normal range): 2^n exp(r), n = round(y / ln2),
 * r = y - n ln2 in two parts (ln2 = hi + lo, hi exact in 15 bits) so |r| <= ln2/2, exp(r) by its Taylor
 * series to r^7 (the next term is under 1e-8 relative). */
static inline __m256 exp8(__m256 y) {
    y = _mm256_min_ps(_mm256_max_ps(y, _mm256_set1_ps(-87.0f)), _mm256_set1_ps(88.0f));
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(y, _mm256_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145751953125f), y);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.428606765330187e-06f), r);
    __m256 e = _mm256_set1_ps(1.0f / 5040.0f);
    e = _mm256_fmadd_ps(e, r, _mm256_set1_ps(1.0f / 720.0f));
    e = _mm256_fmadd_ps(e, r, _mm256_set1_ps(1.0f / 120.0f));
    e = _mm256_fmadd_ps(e, r, _mm256_set1_ps(1.0f / 24.0f));
    e = _mm256_fmadd_ps(e, r, _mm256_set1_ps(1.0f / 6.0f));
    e = _mm256_fmadd_ps(e, r, _mm256_set1_ps(0.5f));
    e = _mm256_fmadd_ps(e, r, _mm256_set1_ps(1.0f));
    e = _mm256_fmadd_ps(e, r, _mm256_set1_ps(1.0f));
    /* 2^n in two factors, as 2^88 itself is not a float */
    const __m256i ni = _mm256_cvtps_epi32(n), half = _mm256_srai_epi32(ni, 1);
    const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(half, _mm256_set1_epi32(127)), 23));
    const __m256 s2 =
        _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_sub_epi32(ni, half), _mm256_set1_epi32(127)), 23));
    return _mm256_mul_ps(_mm256_mul_ps(e, s1), s2);
}

/* tanh(x) for 8 floats: the odd Taylor series to x^13 below |x| = 0.4 (the next term is under 4e-9
 * relative there), else 1 - 2 / (exp(2|x|) + 1) with the sign put back, where the subtraction loses at most
 * a factor 1.7 of exp's ~1 ulp. |x| is clamped at 10, where tanh rounds to 1. */
static inline __m256 tanh8(__m256 x) {
    const __m256 sign = _mm256_and_ps(x, _mm256_set1_ps(-0.0f));
    const __m256 a = _mm256_min_ps(vabs(x), _mm256_set1_ps(10.0f));
    const __m256 z = _mm256_mul_ps(a, a);
    __m256 t = _mm256_set1_ps(21844.0f / 6081075.0f);
    t = _mm256_fmadd_ps(t, z, _mm256_set1_ps(-1382.0f / 155925.0f));
    t = _mm256_fmadd_ps(t, z, _mm256_set1_ps(62.0f / 2835.0f));
    t = _mm256_fmadd_ps(t, z, _mm256_set1_ps(-17.0f / 315.0f));
    t = _mm256_fmadd_ps(t, z, _mm256_set1_ps(2.0f / 15.0f));
    t = _mm256_fmadd_ps(t, z, _mm256_set1_ps(-1.0f / 3.0f));
    const __m256 small = _mm256_fmadd_ps(_mm256_mul_ps(t, z), a, a);
    const __m256 one = _mm256_set1_ps(1.0f);
    const __m256 e = exp8(_mm256_add_ps(a, a));
    const __m256 big = _mm256_sub_ps(one, _mm256_div_ps(_mm256_set1_ps(2.0f), _mm256_add_ps(e, one)));
    const __m256 res = _mm256_blendv_ps(big, small, _mm256_cmp_ps(a, _mm256_set1_ps(0.4f), _CMP_LT_OQ));
    return _mm256_or_ps(res, sign);
}

/* x[i] = exp(x[i] - m), returning their sum: the softmax numerators of a chunk of attention scores */
static float exp_sum_f32(int64_t n, float m, float *x) {
    const __m256 vm = _mm256_set1_ps(m);
    __m256 acc = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm));
        _mm256_storeu_ps(x + i, e);
        acc = _mm256_add_ps(acc, e);
    }
    float sum = hsum_ps(acc);
    if (i < n) { /* the tail through a padded vector, so every element sees the same function */
        float buf[8];
        for (int j = 0; j < 8; j++) buf[j] = i + j < n ? x[i + j] : m;
        _mm256_storeu_ps(buf, exp8(_mm256_sub_ps(_mm256_loadu_ps(buf), vm)));
        for (int j = 0; i + j < n; j++) x[i + j] = buf[j], sum += buf[j];
    }
    return sum;
}

static void softcap_f32(int64_t n, float c, float *x) {
    const __m256 vc = _mm256_set1_ps(c), inv = _mm256_set1_ps(1.0f / c);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(tanh8(_mm256_mul_ps(_mm256_loadu_ps(x + i), inv)), vc));
    if (i < n) { /* the tail through a padded vector, so every element sees the same function */
        float buf[8] = {0};
        memcpy(buf, x + i, sizeof(float) * (size_t)(n - i));
        _mm256_storeu_ps(buf, _mm256_mul_ps(tanh8(_mm256_mul_ps(_mm256_loadu_ps(buf), inv)), vc));
        memcpy(x + i, buf, sizeof(float) * (size_t)(n - i));
    }
}

/* ---------------------------------------------------------------------------------------------------
 * the table (data only: nothing here runs before kernels.c has checked CPUID)
 * ------------------------------------------------------------------------------------------------- */

const eli_kernels eli_kernels_avx2_table = {
    .name = "avx2",
    .vec_dot =
        {
            [ELI_TYPE_F32] = vec_dot_f32,
            [ELI_TYPE_F16] = vec_dot_f16,
            [ELI_TYPE_BF16] = vec_dot_bf16,
            [ELI_TYPE_Q4_0] = vec_dot_q4_0,
            [ELI_TYPE_Q4_1] = vec_dot_q4_1,
            [ELI_TYPE_Q5_0] = vec_dot_q5_0,
            [ELI_TYPE_Q5_1] = vec_dot_q5_1,
            [ELI_TYPE_Q8_0] = vec_dot_q8_0,
            [ELI_TYPE_Q4_K] = vec_dot_q4_K,
            [ELI_TYPE_Q5_K] = vec_dot_q5_K,
            [ELI_TYPE_Q6_K] = vec_dot_q6_K,
        },
    .vec_dot_nr =
        {
            [ELI_TYPE_Q4_0] = vec_dot_q4_0_nr,
            [ELI_TYPE_Q4_1] = vec_dot_q4_1_nr,
            [ELI_TYPE_Q5_0] = vec_dot_q5_0_nr,
            [ELI_TYPE_Q5_1] = vec_dot_q5_1_nr,
            [ELI_TYPE_Q8_0] = vec_dot_q8_0_nr,
            [ELI_TYPE_Q4_K] = vec_dot_q4_K_nr,
            [ELI_TYPE_Q5_K] = vec_dot_q5_K_nr,
            [ELI_TYPE_Q6_K] = vec_dot_q6_K_nr,
        },
    .gemv =
        {
            [ELI_TYPE_F32] = gemv_f32,
            [ELI_TYPE_F16] = gemv_f16,
            [ELI_TYPE_BF16] = gemv_bf16,
            [ELI_TYPE_Q4_0] = gemv_q4_0,
            [ELI_TYPE_Q4_1] = gemv_q4_1,
            [ELI_TYPE_Q5_0] = gemv_q5_0,
            [ELI_TYPE_Q5_1] = gemv_q5_1,
            [ELI_TYPE_Q8_0] = gemv_q8_0,
        },
    .nr =
        {
            [ELI_TYPE_Q4_0] = 4,
            [ELI_TYPE_Q4_1] = 4,
            [ELI_TYPE_Q5_0] = 4,
            [ELI_TYPE_Q5_1] = 4,
            [ELI_TYPE_Q8_0] = 4,
            [ELI_TYPE_Q4_K] = 4,
            [ELI_TYPE_Q5_K] = 4,
            [ELI_TYPE_Q6_K] = 4,
        },
    .gemm =
        {
            [ELI_TYPE_F32] = gemm_f32,
            [ELI_TYPE_F16] = gemm_f16,
            [ELI_TYPE_BF16] = gemm_bf16,
            [ELI_TYPE_Q4_0] = gemm_q4_0,
            [ELI_TYPE_Q4_1] = gemm_q4_1,
            [ELI_TYPE_Q5_0] = gemm_q5_0,
            [ELI_TYPE_Q5_1] = gemm_q5_1,
            [ELI_TYPE_Q8_0] = gemm_q8_0,
            [ELI_TYPE_Q4_K] = gemm_q4_K,
            [ELI_TYPE_Q5_K] = gemm_q5_K,
            [ELI_TYPE_Q6_K] = gemm_q6_K,
        },
    .gemm_nr =
        {
            [ELI_TYPE_F32] = FL_GEMM_NR,
            [ELI_TYPE_F16] = FL_GEMM_NR,
            [ELI_TYPE_BF16] = FL_GEMM_NR,
            [ELI_TYPE_Q4_0] = ELI_KERNEL_MAX_GEMM_NR,
            [ELI_TYPE_Q4_1] = ELI_KERNEL_MAX_GEMM_NR,
            [ELI_TYPE_Q5_0] = ELI_KERNEL_MAX_GEMM_NR,
            [ELI_TYPE_Q5_1] = ELI_KERNEL_MAX_GEMM_NR,
            [ELI_TYPE_Q8_0] = ELI_KERNEL_MAX_GEMM_NR,
            [ELI_TYPE_Q4_K] = GEMM_RM,
            [ELI_TYPE_Q5_K] = GEMM_RM,
            [ELI_TYPE_Q6_K] = GEMM_RM,
        },
    .packed_gemv = {[ELI_TYPE_Q4_0] = packed_gemv_q4_0, [ELI_TYPE_F16] = packed_gemv_f16, [ELI_TYPE_Q4_K] = packed_gemv_q4_K},
    .packed_gemm = {[ELI_TYPE_Q4_0] = packed_gemm_q4_0, [ELI_TYPE_F16] = packed_gemm_f16, [ELI_TYPE_Q4_K] = packed_gemm_q4_K},
    .quantize =
        {
            [ELI_TYPE_Q8_0] = quantize_q8_0,
            [ELI_TYPE_Q8_1] = quantize_q8_1,
            [ELI_TYPE_Q8_K] = quantize_q8_K,
            [ELI_TYPE_F16] = quantize_f16,
            [ELI_TYPE_BF16] = quantize_bf16,
        },
    .attn_qk = {[ELI_TYPE_F32] = attn_qk_f32, [ELI_TYPE_F16] = attn_qk_f16},
    .attn_pv = {[ELI_TYPE_F32] = attn_pv_f32, [ELI_TYPE_F16] = attn_pv_f16},
    .softcap_f32 = softcap_f32,
    .exp_sum_f32 = exp_sum_f32,
    .f16_to_f32 = f16_to_f32,
    .scale_f32 = scale_f32,
};

#else
/* Built without the AVX2 flags (non-x86 host or a compiler without them): no table. */
const eli_kernels eli_kernels_avx2_table = {.name = NULL};
#endif
