/* Low-bit KV cache types that attention reads without dequantizing: TurboQuant (tbq4_0, tbq3_0), PolarQuant
 * (q4_polar) and QJL (qjl1_256, keys only).
 *
 * Every type stores each head vector (head_dim values, a power of two 32..512) on its own, so a cache row of
 * n_head_kv heads is n_head_kv * eli_kvq_head_bytes() bytes and head h starts at h * head_bytes:
 *  - tbq4_0 / tbq3_0 (tquant.h): the vector is rotated by a fixed random orthogonal map R (a seeded sign
 *    flip, then the fast Walsh-Hadamard transform over the head, scaled by 1/sqrt(head_dim)); each rotated
 *    coordinate gets the nearest of 16 / 8 Lloyd-Max levels for N(0, 1) (int8 steps); the unit is one fp16
 *    scale s per vector times an integer multiplier m per 16 coordinates, as wide as the bit budget allows
 *    (3 bits at head dims >= 256, 2 at 128, none below). s makes the decoded vector s * m * level[code]
 *    project onto the original exactly (s = |y|^2 / <y, m * level[code]>: no systematic shrink of the
 *    attention logits). 4.25 / 3.25 bits per element at head dims 64..256, 4.22 / 3.22 at 512.
 *  - q4_polar: the rotated vector in polar coordinates (PolarQuant): level 1 pairs (y[i], y[i + d/2]) into
 *    a radius and an angle in [0, 2 pi) (32 uniform cells, 5 bits); level l >= 2 pairs the radii i and
 *    i + d/2^l of level l - 1 into a radius and an angle in [0, pi/2] (8 Lloyd-Max cells for that level's
 *    angle density, 3 bits), up to one radius, stored as the fp16 scale r that makes the decoded vector
 *    project onto the original exactly. 4 + 12/head_dim bits per element plus byte padding: 4.0625 at 256.
 *  - qjl1_256: the signs of S k, S a seeded head_dim x head_dim matrix of N(0, 1) entries (a Johnson-
 *    Lindenstrauss projection, QJL), and the fp16 norm |k|. q.k is estimated without bias as
 *    sqrt(pi/2) / head_dim * |k| * <S q, sign(S k)>. 1 + 16/head_dim bits (1.0625 at 256). Keys only.
 * At head_dim 32 the fp16 scale costs half a bit: tbq4_0 4.5, tbq3_0 3.5, q4_polar 4.5 bits.
 * Measured on gaussian vectors (tests/test_kvquant.c) the relative MSE per vector is 0.0055 (tbq4_0 at
 * 256), 0.022 (tbq3_0), 0.0095 (q4_polar); q4_0 at 4.5 bits has 0.0074.
 *
 * Attention over such a cache (the score and accumulate kernels below):
 * each query head is prepared once (rotated, or projected for QJL, into a scratch of query_bytes), every
 * cached key is scored against it from its codes (tbq: an integer dot product of the int8 levels with the
 * query rounded to int8, one float multiply per key), the probability-weighted values are summed in the
 * rotated domain, and eli_kvq_finish rotates the sum back once per head. R is orthogonal, so q.k = Rq.Rk
 * and sum p_j v_j = R^T sum p_j Rv_j.
 *
 * The type ids continue the id space of quants.h well above ggml's (0..42 today) and above our own weight
 * types, so one uint32_t names any cache type (and a slot file can record it) without ever being read as a
 * ggml type. The codebooks, rotation signs and the QJL matrix are fixed by the format: produced by
 * integer and IEEE-exact arithmetic only, the same on every machine. */
#ifndef ELI_KVQUANT_H
#define ELI_KVQUANT_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"

enum {
    ELI_KV_TBQ4_0 = 112,
    ELI_KV_TBQ3_0 = 113,
    ELI_KV_Q4_POLAR = 114,
    ELI_KV_QJL1_256 = 115,
};
#define ELI_KVQ_FIRST ELI_KV_TBQ4_0
#define ELI_KVQ_COUNT 4
#define ELI_KVQ_MIN_DIM 32
#define ELI_KVQ_MAX_DIM 512

/* 1 when type is one of the ids above. */
int eli_kvq_is_type(uint32_t type);
/* "tbq4_0", "tbq3_0", "q4_polar", "qjl1_256"; NULL for any other id. */
const char *eli_kvq_name(uint32_t type);
/* 1 for the types that can only hold keys (qjl1_256: its estimator scores, it does not reconstruct). */
int eli_kvq_keys_only(uint32_t type);
/* Bytes of one head vector; 0 when type is not ours or head_dim is not a power of two in 32..512. */
size_t eli_kvq_head_bytes(uint32_t type, int64_t head_dim);

/* The codec of one type at one head dim: read-only after eli_kvq_create, shared by any number of threads.
 * The kernels read its fields. */
typedef struct eli_kvq {
    uint32_t type;
    int d, log2d;
    size_t head_bytes;  /* bytes of one head vector in the cache */
    size_t query_bytes; /* bytes of one prepared query (a multiple of 64) */
    const struct eli_tq_codebook *cb; /* tbq: the int8 codebook (tquant.h) */
    int sub_bits;                     /* tbq: width of the per-16 multiplier codes (3, 2 or 0) */
    size_t sub_bytes;                 /* tbq: bytes of their stream */
    float *proj;          /* qjl: S, d x d row-major */
    float qjl_factor;     /* qjl: sqrt(pi/2) / d */
    /* polar: cos / sin of the level-1 cells, and of the level l >= 2 angles (row l - 2) */
    const float *cos1, *sin1;
    const float (*cosl)[8], (*sinl)[8];
} eli_kvq;

/* The codec of type at head_dim; NULL + err (ELI_ERR_INVALID_ARG naming the problem, or ELI_ERR_OOM). */
eli_kvq *eli_kvq_create(uint32_t type, int64_t head_dim, eli_error *err);
void eli_kvq_free(eli_kvq *c);

/* n_head head vectors of d floats (x, back to back) -> n_head * head_bytes bytes at dst. */
void eli_kvq_quantize(const eli_kvq *c, const float *x, int n_head, void *dst);
/* The inverse as far as the format allows: the vector each stored head decodes to (qjl1_256: the vector
 * whose dot product with any q is the estimate). For tests and for converting a cache to another type. */
void eli_kvq_dequantize(const eli_kvq *c, const void *src, int n_head, float *x);

/* Query side. One query head of d floats -> query_bytes at qp (64-byte aligned for the SIMD kernels):
 *   tbq:   float dq, then at offset 64 int8 q8[d]: Rq rounded to dq * q8, |q8| <= 127;
 *   polar: float Rq[d];
 *   qjl:   float Sq[d]. */
void eli_kvq_prepare_query(const eli_kvq *c, const float *q, void *qp);
/* One head's rotated-domain sum (d floats) -> the output vector (out may alias acc); tbq and polar only. */
void eli_kvq_finish(const eli_kvq *c, const float *acc, float *out);

/* The two halves of attention over nc consecutive cache rows of this head (rows rb bytes apart, rows
 * pointing at the head's block in the first row) for the G query heads that share the KV head:
 *   score:      s[g * ss + j] = estimate of q_g . k_j, the G prepared queries query_bytes apart at qp;
 *   accumulate: acc[g * d + i] += p[g * ss + j] * (R v_j)[i] for j = 0 .. nc-1 in that order (tbq, polar).
 * Exact arithmetic (the SIMD tables must return the same bits):
 *   tbq score:   (s_j * dq) * (float)isum, isum = sum over the 16-value groups of m * (sum q8[i] * level[code_i]);
 *   tbq accum:   w = p * s_j, then acc[i] = fma(w, (float)(m * level[code_i]), acc[i]);
 *   polar:       u_j = the decoded unit vector (the radii tree top-down, every step one float multiply), as
 *                e[i] = rho[i] * cos1, o[i] = rho[i] * sin1 (i < d/2); score r_j * T where T sums, in 8 lanes
 *                (lane i % 8), fma(q[i], e[i], .) then fma(q[i + d/2], o[i], .), added in the tree
 *                ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)); accum w = p * r_j, fma(w, e[i], acc[i]),
 *                fma(w, o[i], acc[i + d/2]);
 *   qjl score:   (|k| * qjl_factor) * T where T sums +-Sq[i] (the sign bit of S k) in the same 8 lanes. */
typedef void (*eli_kvq_score_fn)(const eli_kvq *c, int nc, const uint8_t *rows, size_t rb, int G, const void *qp,
                                 float *s, size_t ss);
/* The accumulate half is a decoder and a float sum: each head's rotated-domain values before its scale (tbq:
 * m * level, polar: the unit vector) decoded into d floats, its scale returned; then per row w = p * scale
 * and acc[i] = fma(w, value[i], acc[i]) for the rows in order, which is what a kernel table's f32 attn_pv
 * (cpu/kernels.h) computes. eli_kvq_accum_decoded runs the two over nc rows, 16 at a time. */
typedef float (*eli_kvq_decode_fn)(const eli_kvq *c, const uint8_t *blk, float *x);
typedef void (*eli_kvq_pv_fn)(int64_t d, int nc, const void *rows, size_t rb, int G, const float *p, size_t ss,
                              float *out);
void eli_kvq_accum_decoded(const eli_kvq *c, int nc, const uint8_t *rows, size_t rb, int G, const float *p, size_t ss,
                           float *acc, eli_kvq_decode_fn decode, eli_kvq_pv_fn pv);

/* q4_polar's score is the same pair the other way: the decoded unit vector x (its scale r returned), then
 * r * dot(q, x), the dot in the 8 lanes above (eli_kvq_polar_dot_ref); eli_kvq_score_decoded runs them. */
typedef float (*eli_kvq_dot_fn)(const eli_kvq *c, const float *q, const float *x);
void eli_kvq_score_decoded(const eli_kvq *c, int nc, const uint8_t *rows, size_t rb, int G, const void *qp, float *s,
                           size_t ss, eli_kvq_decode_fn decode, eli_kvq_dot_fn dot);
float eli_kvq_polar_dot_ref(const eli_kvq *c, const float *q, const float *x);

/* One kernel set per table (cpu/kernels.h holds one; score and decode indexed by type - ELI_KVQ_FIRST, NULL
 * entries fall back to the table below it, qjl1_256 has no decoder; pv is the table's f32 attn_pv, with
 * the FMA per term the SIMD tables have). */
typedef struct eli_kvq_kernels {
    eli_kvq_score_fn score[ELI_KVQ_COUNT];
    eli_kvq_decode_fn decode[ELI_KVQ_COUNT];
    eli_kvq_pv_fn pv;
} eli_kvq_kernels;

/* The scalar reference (the "reference" kernel table): the scores, the decoder of the tbq and polar types,
 * and the f32 sum with a fused multiply-add per term (the reference table's own attn_pv rounds twice). */
void eli_kvq_score_ref(const eli_kvq *c, int nc, const uint8_t *rows, size_t rb, int G, const void *qp, float *s,
                       size_t ss);
float eli_kvq_decode_ref(const eli_kvq *c, const uint8_t *blk, float *x);
void eli_kvq_pv_fma(int64_t d, int nc, const void *rows, size_t rb, int G, const float *p, size_t ss, float *out);

/* The CPU runs them through its kernel table (cpu/kernels.h: eli_kvq_score, eli_kvq_accumulate). */

/* ---- the code layouts the SIMD kernels read (kvquant.c writes them) ----
 * tbq4_0 / tbq3_0 head: fp16 s, the multiplier codes of the 16-value groups as a stream of sub_bits-bit
 *   fields (sub_bytes), then the codes:
 * tbq4_0 codes: d/2 bytes: per group of G = min(64, d) values, byte j holds the code of value j (low
 *   nibble) and of value j + G/2 (high nibble).
 * tbq3_0 codes: per group of G = min(128, d) values: G/4 bytes holding the low 2 bits of values
 *   j, j + G/4, j + G/2, j + 3G/4 at bits 0-1, 2-3, 4-5, 6-7 of byte j; then G/8 bytes of high bits: value
 *   m * G/4 + j has its third bit in byte j % (G/8), bit 2m + j / (G/8).
 * q4_polar head: the d/2 level-1 codes as a 5-bit stream, then the d/2 - 1 codes of levels 2, 3, .. (d/4,
 *   d/8, .. codes each) as a 3-bit stream (both least significant bit first, code k at bit k * width, the
 *   second stream padded to a byte), then fp16 r. A group of 8 codes starts on a byte boundary.
 * qjl1_256 head: d/8 bytes of sign bits (bit i % 8 of byte i / 8 is set when (S k)[i] >= 0), then fp16 |k|. */
#define ELI_KVQ_POLAR_L1_BYTES(d) ((size_t)(d) * 5 / 16)
#define ELI_KVQ_POLAR_UP_BYTES(d) (((size_t)(d) / 2 - 1) * 3 / 8 + 1)

/* Pieces of the reference that the SIMD kernels share: a tbq head's multipliers (d/16 of them), and one
 * level l (>= 2) of a q4_polar head's radii tree, top-down in place (rho[i], rho[i + n] from rho[i]). */
void eli_kvq_tbq_mults(const eli_kvq *c, const uint8_t *blk, int32_t *m);
void eli_kvq_polar_level(const eli_kvq *c, const uint8_t *blk, int l, float *rho);

#endif
