/* Kernels used by the forward pass: norms, activations, RoPE, softmax, attention over the KV cache and
 * the weight-times-activation matmul. The numerics follow llama.cpp's CPU backend where that matters
 * for matching its logits (double-accumulated RMS sums, the fp16 GELU table, iterated RoPE angles,
 * activations converted to the weight's dot-product format). */
#ifndef ELI_OPS_H
#define ELI_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "kernels.h"
#include "kv_cache.h"
#include "mmproj.h"
#include "model.h"
#include "threadpool.h"

/* A growable scratch buffer. */
typedef struct eli_buf {
    void *p;
    size_t cap;
} eli_buf;
/* Ensures capacity; returns NULL on OOM. */
void *eli_buf_reserve(eli_buf *b, size_t bytes);
void eli_buf_free(eli_buf *b);

/* y = RMS(x) (* w when w != NULL), n values. y may alias x. */
void eli_rms_norm(float *y, const float *x, const float *w, int64_t n, float eps);
/* gate[i] = gelu(gate[i]) * up[i] for i < n: GELU (tanh form) through the fp16 table as llama.cpp's CPU
 * backend computes it; k does the fp16 conversions. */
void eli_geglu(const eli_kernels *k, int64_t n, float *gate, const float *up);
/* The same with GELU-quick, x * sigmoid(1.702 x), through its fp16 table (the vision tower's default). */
void eli_geglu_quick(const eli_kernels *k, int64_t n, float *gate, const float *up);
/* In place NEOX RoPE on n_head vectors of head_dim floats: pairs (i, i + n_rot/2) for i < n_rot/2. */
void eli_rope_neox(float *x, int n_head, int head_dim, int n_rot, int32_t pos, float base, const float *freq_factors);
/* In place softmax of n values (max-subtracted, double sum). */
void eli_softmax_inplace(float *x, int64_t n);

/* One head of attention: q (d floats) against the cache rows of positions [p_lo, p_hi]. scores needs
 * p_hi - p_lo + 1 floats, tmp 2*d floats. Scale 1.0, no softcap (Gemma 4). Q·K goes through the dot of the
 * kernel table k; on a low-bit K (kvquant.h) the query is prepared once and every key scored from its codes,
 * on a low-bit V the values are summed in the rotated domain and rotated back once. */
void eli_attend(const eli_kernels *k, const float *q, int d, const eli_kv_view *kv, int32_t p_lo, int32_t p_hi,
                float *scores, float *tmp, float *out);

/* Fused (flash-style) attention of G query heads that share one KV head: q and out hold G vectors of d
 * floats back to back. One pass over the cache in chunks with an online softmax (running max and sum per
 * head); K and V rows are loaded once for all G heads. K f32, f16 or low-bit (the G queries prepared once,
 * keys scored from their codes), V f32, f16 or a low-bit type that holds values (summed in the rotated
 * domain, rescaled there as the running max moves, rotated back once per head); others: eli_attend,
 * eli_attend_flash_ok tells. Every head's result is independent of G, so any grouping of the heads gives
 * identical bits. work needs eli_attend_flash_work_size(G, d) bytes.
 *
 * The window is cut at the multiples of ELI_FLASH_SEG positions; each segment's partial (per head: the
 * unnormalized sum of values, the max and the sum of exponentials) is computed on its own by eli_flash_span
 * and the partials are merged in position order by eli_flash_merge. eli_attend_flash runs these steps one
 * after the other; a caller may run the segments on different threads (decode, where one KV head's rows are
 * the work) and merge them afterwards: the bits are the same either way. */
#define ELI_FLASH_CHUNK 64 /* rows scored at a time */
#define ELI_FLASH_SEG 256  /* positions per segment, a multiple of ELI_FLASH_CHUNK */
int eli_attend_flash_ok(uint32_t k_type, uint32_t v_type);
size_t eli_attend_flash_work_size(int G, int d);
void eli_attend_flash(const eli_kernels *k, const float *q, int G, int d, const eli_kv_view *kv, int32_t p_lo,
                      int32_t p_hi, void *work, float *out);
/* The last position of the segment that p0 is in, at most p_hi. */
static inline int32_t eli_flash_segment_end(int32_t p0, int32_t p_hi) {
    const int64_t e = ((int64_t)p0 / ELI_FLASH_SEG + 1) * ELI_FLASH_SEG - 1;
    return e < p_hi ? (int32_t)e : p_hi;
}
/* The pieces. A prepared query takes eli_flash_query_bytes (a multiple of 64 on a low-bit K; qp 64-byte
 * aligned); s is G * ELI_FLASH_CHUNK floats of scratch; out holds G * d floats, mx and sum G each. */
size_t eli_flash_query_bytes(const eli_kv_view *kv, int d);
void eli_flash_prepare(const eli_kernels *k, const eli_kv_view *kv, const float *q, int G, int d, void *qp);
/* The partial of positions [p_a, p_b] (within one segment) for the G prepared queries at qp. */
void eli_flash_span(const eli_kernels *k, const eli_kv_view *kv, const void *qp, int G, int d, int32_t p_a,
                    int32_t p_b, float *s, float *out, float *mx, float *sum);
/* (out, mx, sum) followed by the next segment's partial; an accumulator with mx = -inf takes the partial as is. */
void eli_flash_merge(int G, int d, float *out, float *mx, float *sum, const float *out_s, const float *mx_s,
                     const float *sum_s);
/* out /= sum per head, then rotated back on a low-bit V. */
void eli_flash_finish(const eli_kernels *k, const eli_kv_view *kv, int G, int d, const float *sum, float *out);

/* y[t][r] = dot(W[mat] row r, x[t]) for T rows of x (each w->cols floats); y rows are w->rows floats.
 * Activations are converted to the weight's vec_dot format once, into scratch, with the quantizer of
 * the kernel table k (NULL = eli_kernels_best()). Threads split the output rows; each output is one
 * vec_dot (or one row of a multi-row kernel, which is bit-identical), so the result does not depend on
 * the thread count. Rows are processed nr at a time (the activation block is loaded once for nr rows
 * and their serial float chains interleave); for T > 1 the tokens are walked in tiles inside each row
 * group so the group's weights stay in L1 while the activations stream from L2. */
int eli_matmul_k(eli_pool *pool, const eli_kernels *k, const eli_weight *w, int64_t mat, const float *x, int64_t T,
                 float *y, eli_buf *scratch);
/* eli_matmul_k with the best kernels for this CPU. */
int eli_matmul(eli_pool *pool, const eli_weight *w, int64_t mat, const float *x, int64_t T, float *y, eli_buf *scratch);

/* y[i] = dot(row rows[i] of w (first matrix), x) for i < n: one activation row against a gathered set of
 * weight rows (the drafter's centroid-masked head). Same per-row results as eli_matmul_k. */
int eli_matmul_rows(eli_pool *pool, const eli_kernels *k, const eli_weight *w, const int32_t *rows, int64_t n,
                    const float *x, float *y, eli_buf *scratch);

/* Dequantizes row r of matrix mat of w into out (w->cols floats). */
void eli_weight_row(const eli_weight *w, int64_t mat, int64_t r, float *out);

/* A tower's clippable linear (mmproj.h) on T rows: x [T][n_in] is clamped in place, then y [T][n_out] =
 * clamp_out(W x) + bias, as llama.cpp's Gemma 4 towers compute it. */
int eli_mm_linear_apply(eli_pool *pool, const eli_kernels *k, const eli_mm_linear *l, float *x, int64_t T, float *y,
                        eli_buf *scratch, eli_error *err);

#endif
