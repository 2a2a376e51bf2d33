#include "ops.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "pack.h"
#include "quants.h"

void *eli_buf_reserve(eli_buf *b, size_t bytes) {
    if (bytes <= b->cap && b->p) return b->p;
    void *p = realloc(b->p, bytes ? bytes : 1);
    if (!p) return NULL;
    b->p = p;
    b->cap = bytes;
    return p;
}

void eli_buf_free(eli_buf *b) {
    free(b->p);
    b->p = NULL;
    b->cap = 0;
}

void eli_rms_norm(float *y, const float *x, const float *w, int64_t n, float eps) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) sum += (double)(x[i] * x[i]);
    const float mean = (float)(sum / (double)n);
    const float scale = 1.0f / sqrtf(mean + eps);
    for (int64_t i = 0; i < n; i++) y[i] = x[i] * scale;
    if (w)
        for (int64_t i = 0; i < n; i++) y[i] *= w[i];
}

/* gelu(x) and gelu_quick(x) for every fp16 x, rounded to fp16: the tables llama.cpp's CPU backend uses. */
static eli_fp16 gelu_table[1 << 16], gelu_quick_table[1 << 16];
static pthread_once_t gelu_once = PTHREAD_ONCE_INIT;

static void gelu_table_init(void) {
    const float sqrt_2_over_pi = 0.79788456080286535587989211986876f;
    for (uint32_t i = 0; i < (1u << 16); i++) {
        float x = eli_fp16_to_fp32((eli_fp16)i);
        float g = 0.5f * x * (1.0f + tanhf(sqrt_2_over_pi * x * (1.0f + 0.044715f * x * x)));
        gelu_table[i] = eli_fp32_to_fp16(g);
        gelu_quick_table[i] = eli_fp32_to_fp16(x * (1.0f / (1.0f + expf(-1.702f * x))));
    }
}

/* gate[i] = table(gate[i] rounded to fp16) * up[i]; with `saturate`, x itself beyond +-10 (0 below, x above)
 * as ggml's GELU does (its GELU-quick has no such range). The fp16 conversions go through the kernel table
 * (F16C / NEON) a chunk at a time: one element at a time they cost more than the FFN's matmuls'
 * per-element work (measured 7% of an E2B prefill). */
static void glu_table(const eli_kernels *k, const eli_fp16 *table, int saturate, int64_t n, float *gate, const float *up) {
    enum { CHUNK = 256 };
    eli_fp16 h[CHUNK];
    float g[CHUNK];
    for (int64_t i0 = 0; i0 < n; i0 += CHUNK) {
        const int64_t m = n - i0 < CHUNK ? n - i0 : CHUNK;
        float *x = gate + i0;
        k->quantize[ELI_TYPE_F16](x, h, m);
        for (int64_t i = 0; i < m; i++) h[i] = table[h[i]];
        k->f16_to_f32(m, h, g);
        for (int64_t i = 0; i < m; i++) {
            const float v = !saturate ? g[i] : x[i] <= -10.0f ? 0.0f : x[i] >= 10.0f ? x[i] : g[i];
            x[i] = v * up[i0 + i];
        }
    }
}

void eli_geglu(const eli_kernels *k, int64_t n, float *gate, const float *up) {
    pthread_once(&gelu_once, gelu_table_init);
    glu_table(k, gelu_table, 1, n, gate, up);
}

void eli_geglu_quick(const eli_kernels *k, int64_t n, float *gate, const float *up) {
    pthread_once(&gelu_once, gelu_table_init);
    glu_table(k, gelu_quick_table, 0, n, gate, up);
}

void eli_rope_neox(float *x, int n_head, int head_dim, int n_rot, int32_t pos, float base, const float *ff) {
    const int half = n_rot / 2;
    const float theta_scale = powf(base, -2.0f / (float)n_rot);
    /* The angle of pair i is pos * theta_scale^i, built by repeated multiplication as ggml does. */
    float cs[2048], sn[2048];
    float theta = (float)pos;
    for (int i = 0; i < half && i < 2048; i++) {
        float t = ff ? theta / ff[i] : theta;
        cs[i] = cosf(t);
        sn[i] = sinf(t);
        theta *= theta_scale;
    }
    for (int h = 0; h < n_head; h++) {
        float *v = x + (int64_t)h * head_dim;
        for (int i = 0; i < half; i++) {
            float x0 = v[i], x1 = v[i + half];
            v[i] = x0 * cs[i] - x1 * sn[i];
            v[i + half] = x0 * sn[i] + x1 * cs[i];
        }
    }
}

void eli_softmax_inplace(float *x, int64_t n) {
    float mx = -INFINITY;
    for (int64_t i = 0; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) {
        x[i] = expf(x[i] - mx);
        sum += (double)x[i];
    }
    const float inv = (float)(1.0 / sum);
    for (int64_t i = 0; i < n; i++) x[i] *= inv;
}

/* The start of the first 64-byte boundary at or after p (the low-bit kernels read prepared queries there). */
static void *align64(void *p) { return (void *)(((uintptr_t)p + 63) & ~(uintptr_t)63); }

/* A run of consecutive cells of positions p0 .. p0 + n - 1 of a window that ends at p_hi: at most max rows,
 * ending at the ring's end when the window wraps (the kernels stride through one run). */
static int64_t cell_run(int64_t p0, int32_t p_hi, int64_t n_cells, int64_t max) {
    int64_t n = p_hi - p0 + 1 < max ? p_hi - p0 + 1 : max;
    const int64_t c0 = p0 % n_cells;
    return n > n_cells - c0 ? n_cells - c0 : n;
}

void eli_attend(const eli_kernels *k, const float *q, int d, const eli_kv_view *kv, int32_t p_lo, int32_t p_hi,
                float *scores, float *tmp, float *out) {
    const int64_t n = (int64_t)p_hi - p_lo + 1, nc = kv->n_cells;
    for (int i = 0; i < d; i++) out[i] = 0.0f;
    if (kv->kq) {
        /* the query prepared once, every key scored from its codes (the run of cells up to the ring's end) */
        void *qp = align64(tmp);
        eli_kvq_prepare_query(kv->kq, q, qp);
        for (int64_t p0 = p_lo, run; p0 <= p_hi; p0 += run) {
            run = cell_run(p0, p_hi, nc, n);
            eli_kvq_score(k, kv->kq, (int)run, kv->k + (size_t)(p0 % nc) * kv->k_row_bytes, kv->k_row_bytes, 1, qp,
                          scores + (p0 - p_lo), (size_t)n);
        }
    } else if (kv->k_type == ELI_TYPE_F32) {
        for (int64_t j = 0; j < n; j++) {
            const float *kr = (const float *)(kv->k + (size_t)((p_lo + j) % nc) * kv->k_row_bytes);
            float s = 0.0f;
            for (int i = 0; i < d; i++) s += q[i] * kr[i];
            scores[j] = s;
        }
    } else {
        /* As llama.cpp: Q is converted to the cache type's dot-product format before Q·K. */
        uint8_t *qc = (uint8_t *)(tmp + d);
        const eli_vec_dot_fn dot = k->vec_dot[kv->k_type];
        k->quantize[eli_type_info(kv->k_type)->vec_dot_type](q, qc, d);
        for (int64_t j = 0; j < n; j++) scores[j] = dot(d, kv->k + (size_t)((p_lo + j) % nc) * kv->k_row_bytes, qc);
    }
    eli_softmax_inplace(scores, n);
    if (kv->vq) {
        /* the probability-weighted sum in the rotated domain, rotated back once */
        for (int64_t p0 = p_lo, run; p0 <= p_hi; p0 += run) {
            run = cell_run(p0, p_hi, nc, n);
            eli_kvq_accumulate(k, kv->vq, (int)run, kv->v + (size_t)(p0 % nc) * kv->v_row_bytes, kv->v_row_bytes, 1,
                               scores + (p0 - p_lo), (size_t)n, out);
        }
        eli_kvq_finish(kv->vq, out, out);
        return;
    }
    float *vrow = tmp;
    for (int64_t j = 0; j < n; j++) {
        const uint8_t *row = kv->v + (size_t)((p_lo + j) % nc) * kv->v_row_bytes;
        const float *v = (const float *)(const void *)row;
        if (kv->v_type != ELI_TYPE_F32) eli_dequantize_row(kv->v_type, row, vrow, d), v = vrow;
        /* an f16 V is multiplied with f16-rounded probabilities (llama.cpp's P·V on an f16 cache) */
        const float p = kv->v_type == ELI_TYPE_F16 ? eli_fp16_to_fp32(eli_fp32_to_fp16(scores[j])) : scores[j];
        for (int i = 0; i < d; i++) out[i] += p * v[i];
    }
}

void eli_weight_row(const eli_weight *w, int64_t mat, int64_t r, float *out) {
    /* from the packed copy when there is one (the model's matrices are copied out of the file mapping) */
    if (w->packed) {
        eli_pack_dequantize_row(w->type, (const uint8_t *)w->packed + (size_t)mat * (size_t)w->rows * w->packed_row_bytes,
                                w->rows, w->cols, r, out);
        return;
    }
    eli_dequantize_row(w->type, (const uint8_t *)w->data + ((size_t)mat * (size_t)w->rows + (size_t)r) * w->row_bytes,
                       out, w->cols);
}

typedef struct {
    const eli_kernels *k;
    const eli_weight *w;
    const uint8_t *mat_base; /* the matrix: packed (then packed is set) or row-major */
    int packed;
    size_t rb; /* bytes per row of mat_base */
    const void *xq;
    size_t xq_row;
    int64_t T;
    float *y;
    int64_t chunk;            /* rows per claim */
    atomic_int_fast64_t next; /* the first row not yet claimed */
} matmul_job;

#define MATMUL_TOKEN_TILE 16

/* rows r0..r1 of the job */
static void matmul_rows(const matmul_job *j, int64_t r0, int64_t r1) {
    const eli_weight *w = j->w;
    const int64_t rows = w->rows;
    /* A packed matrix (pack.h): calls of one run of rows (r0 is a multiple of ELI_PACK_ROWS, so every
     * run of the range starts at its row-major offset). */
    if (j->packed) {
        if (j->T == 1) {
            j->k->packed_gemv[w->type](w->cols, r1 - r0, j->mat_base + (size_t)r0 * j->rb, j->rb, j->xq, j->y + r0);
            return;
        }
        for (int64_t t0 = 0; t0 < j->T; t0 += ELI_KERNEL_MAX_NT) {
            const int nt = (int)(j->T - t0 < ELI_KERNEL_MAX_NT ? j->T - t0 : ELI_KERNEL_MAX_NT);
            const uint8_t *xq = (const uint8_t *)j->xq + (size_t)t0 * j->xq_row;
            for (int64_t r = r0; r < r1; r += ELI_PACK_ROWS) {
                const int nr = (int)(r1 - r < ELI_PACK_ROWS ? r1 - r : ELI_PACK_ROWS);
                j->k->packed_gemm[w->type](w->cols, nr, nt, j->mat_base + (size_t)r * j->rb, j->rb, xq, j->xq_row,
                                           j->y + t0 * rows + r, (size_t)rows);
            }
        }
        return;
    }
    /* Prefill: the 2-D microkernel, gemm_nr rows x up to ELI_KERNEL_MAX_NT tokens per call, each weight
     * block unpacked once per call. */
    const eli_gemm_fn gemm = j->T > 1 ? j->k->gemm[w->type] : NULL;
    if (gemm) {
        const int RM = j->k->gemm_nr[w->type];
        for (int64_t t0 = 0; t0 < j->T; t0 += ELI_KERNEL_MAX_NT) {
            const int nt = (int)(j->T - t0 < ELI_KERNEL_MAX_NT ? j->T - t0 : ELI_KERNEL_MAX_NT);
            const uint8_t *xq = (const uint8_t *)j->xq + (size_t)t0 * j->xq_row;
            for (int64_t r = r0; r < r1; r += RM) {
                const int nr = (int)(r1 - r < RM ? r1 - r : RM);
                gemm(w->cols, nr, nt, j->mat_base + (size_t)r * w->row_bytes, w->row_bytes, xq, j->xq_row,
                     j->y + t0 * rows + r, (size_t)rows);
            }
        }
        return;
    }
    const eli_gemv_fn gemv = j->T == 1 ? j->k->gemv[w->type] : NULL;
    if (gemv) {
        if (r1 > r0) gemv(w->cols, r1 - r0, j->mat_base + (size_t)r0 * w->row_bytes, w->row_bytes, j->xq, j->y + r0);
        return;
    }
    const eli_vec_dot_fn dot = j->k->vec_dot[w->type];
    /* Multi-row kernels only when the rows are reused by several tokens: streaming one matrix from DRAM
     * for a single token, one long sequential stream (one row at a time) keeps the hardware prefetcher
     * busy, while nr interleaved short row streams defeat it (measured: Q4_0 1536x65536, 1 thread,
     * 8.6 GB/s single-row vs 3.1 GB/s with 4 rows). In cache the multi-row kernel is faster. */
    const eli_vec_dot_nr_fn dot_nr = j->T > 1 ? j->k->vec_dot_nr[w->type] : NULL;
    int NR = dot_nr ? j->k->nr[w->type] : 1;
    if (NR < 1) NR = 1;
    if (NR > ELI_KERNEL_MAX_NR) NR = ELI_KERNEL_MAX_NR;
    for (int64_t t0 = 0; t0 < j->T; t0 += MATMUL_TOKEN_TILE) {
        const int64_t t1 = t0 + MATMUL_TOKEN_TILE < j->T ? t0 + MATMUL_TOKEN_TILE : j->T;
        for (int64_t r = r0; r < r1; r += NR) {
            const int nr = (int)(r1 - r < NR ? r1 - r : NR);
            const uint8_t *wr = j->mat_base + (size_t)r * w->row_bytes;
            for (int64_t t = t0; t < t1; t++) {
                const uint8_t *xq = (const uint8_t *)j->xq + (size_t)t * j->xq_row;
                float *yt = j->y + t * rows + r;
                if (dot_nr && nr > 1) {
                    dot_nr(w->cols, nr, wr, w->row_bytes, xq, yt);
                } else {
                    for (int i = 0; i < nr; i++) yt[i] = dot(w->cols, wr + (size_t)i * w->row_bytes, xq);
                }
            }
        }
    }
}

/* The threads claim chunks of rows from a shared counter instead of taking equal shares: on cores shared
 * with other work one thread often runs slower, and with equal shares the other then waits at the barrier
 * (measured: E2B Q4_0 prefill varied 39-56 tok/s between runs with equal shares, 54-57 with chunks). Each row's result is the
 * same whichever thread computes it. About 8 chunks per thread, a multiple of the gemm's rows per call;
 * a chunk's weights stay in L2 while a prefill's token tiles pass over them. */
static void matmul_task(void *ctx, int ith, int nth) {
    matmul_job *j = ctx;
    (void)ith, (void)nth;
    for (;;) {
        const int64_t r0 = atomic_fetch_add_explicit(&j->next, j->chunk, memory_order_relaxed);
        if (r0 >= j->w->rows) return;
        matmul_rows(j, r0, r0 + j->chunk < j->w->rows ? r0 + j->chunk : j->w->rows);
    }
}

static int64_t matmul_chunk(const eli_kernels *k, const eli_weight *w, int packed, int64_t T, int nth) {
    const int64_t unit = packed ? ELI_PACK_ROWS : T > 1 && k->gemm[w->type] ? k->gemm_nr[w->type] : 16;
    int64_t c = (w->rows + 8 * nth - 1) / (8 * nth);
    c = (c + unit - 1) / unit * unit;
    return c > 0 ? c : 1;
}

typedef struct {
    eli_quantize_fn quantize;
    const float *x;
    uint8_t *q;
    int64_t cols, T;
    size_t row;
} quantize_job;

static void quantize_task(void *ctx, int ith, int nth) {
    const quantize_job *j = ctx;
    int64_t b, e;
    eli_split(j->T, ith, nth, &b, &e);
    for (int64_t t = b; t < e; t++) j->quantize(j->x + t * j->cols, j->q + (size_t)t * j->row, j->cols);
}

int eli_matmul(eli_pool *pool, const eli_weight *w, int64_t mat, const float *x, int64_t T, float *y, eli_buf *scratch) {
    return eli_matmul_k(pool, NULL, w, mat, x, T, y, scratch);
}

int eli_matmul_k(eli_pool *pool, const eli_kernels *k, const eli_weight *w, int64_t mat, const float *x, int64_t T,
                 float *y, eli_buf *scratch) {
    if (!k) k = eli_kernels_best();
    pool = eli_pool_for(pool, w->rows * w->cols * T);
    const eli_type_traits *tt = eli_type_info(w->type);
    /* a table without packed kernels for the type (another backend's) multiplies the row-major data */
    const int packed = w->packed && k->packed_gemv[w->type];
    const size_t rb = packed ? w->packed_row_bytes : w->row_bytes;
    matmul_job j = {k,
                    w,
                    (const uint8_t *)(packed ? w->packed : w->data) + (size_t)mat * (size_t)w->rows * rb,
                    packed,
                    rb,
                    x,
                    (size_t)w->cols * sizeof(float),
                    T,
                    y,
                    matmul_chunk(k, w, packed, T, eli_pool_size(pool)),
                    0};
    atomic_init(&j.next, 0);
    if (tt->vec_dot_type != ELI_TYPE_F32) {
        size_t row = eli_row_size(tt->vec_dot_type, w->cols);
        uint8_t *q = eli_buf_reserve(scratch, row * (size_t)T);
        if (!q) return ELI_ERR_OOM;
        quantize_job qj = {k->quantize[tt->vec_dot_type], x, q, w->cols, T, row};
        if (T > 1) eli_pool_run(pool, quantize_task, &qj);
        else quantize_task(&qj, 0, 1);
        j.xq = q;
        j.xq_row = row;
    }
    eli_pool_run(pool, matmul_task, &j);
    return ELI_OK;
}

/* ---- fused attention ---- */

static int flash_plain(uint32_t t) { return t == ELI_TYPE_F32 || t == ELI_TYPE_F16; }

int eli_attend_flash_ok(uint32_t k_type, uint32_t v_type) {
    return (flash_plain(k_type) || eli_kvq_is_type(k_type)) &&
           (flash_plain(v_type) || (eli_kvq_is_type(v_type) && !eli_kvq_keys_only(v_type)));
}

/* A prepared low-bit query takes at most d floats (kvquant.h: tbq 64 + d bytes, polar and qjl d floats). */
static size_t kvq_query_bound(int d) { return (size_t)d * sizeof(float) + 64; }

size_t eli_flash_query_bytes(const eli_kv_view *kv, int d) {
    return kv->kq ? kv->kq->query_bytes : (size_t)d * sizeof(float);
}

size_t eli_attend_flash_work_size(int G, int d) {
    /* the G prepared queries (64-byte aligned), scores (G*CHUNK), a segment's partial: max and sum (2G) and
     * its sum of values (G*d), and the running max and sum (2G) */
    return (size_t)G * kvq_query_bound(d) + 64 +
           sizeof(float) * ((size_t)G * ELI_FLASH_CHUNK + (size_t)G * (size_t)d + 4 * (size_t)G);
}

void eli_flash_prepare(const eli_kernels *k, const eli_kv_view *kv, const float *q, int G, int d, void *qp) {
    const size_t qb = eli_flash_query_bytes(kv, d);
    for (int g = 0; g < G; g++) {
        const float *qg = q + (size_t)g * d;
        uint8_t *dst = (uint8_t *)qp + (size_t)g * qb;
        if (kv->kq) {
            /* a low-bit K: the query rotated (or projected) once for the whole window */
            eli_kvq_prepare_query(kv->kq, qg, dst);
        } else if (kv->k_type == ELI_TYPE_F16) {
            /* as llama.cpp (and eli_attend): Q is rounded to f16 before Q·K on an f16 cache; through the kernel
             * table, as the software conversions per element cost more than a short window's Q·K */
            eli_fp16 h[256];
            for (int i = 0; i < d; i += 256) {
                const int n = d - i < 256 ? d - i : 256;
                k->quantize[ELI_TYPE_F16](qg + i, h, n);
                k->f16_to_f32(n, h, (float *)(void *)dst + i);
            }
        } else {
            memcpy(dst, qg, (size_t)d * sizeof(float));
        }
    }
}

void eli_flash_span(const eli_kernels *k, const eli_kv_view *kv, const void *qp, int G, int d, int32_t p_a,
                    int32_t p_b, float *s, float *out, float *mx, float *sum) {
    const int64_t n_cells = kv->n_cells;
    const eli_attn_qk_fn qk = kv->kq ? NULL : k->attn_qk[kv->k_type];
    const eli_attn_pv_fn pv = kv->vq ? NULL : k->attn_pv[kv->v_type];
    for (int g = 0; g < G; g++) {
        mx[g] = -INFINITY;
        sum[g] = 0.0f;
        for (int i = 0; i < d; i++) out[(size_t)g * d + i] = 0.0f;
    }
    for (int64_t p0 = p_a, nc; p0 <= p_b; p0 += nc) {
        const int64_t c0 = p0 % n_cells;
        nc = cell_run(p0, p_b, n_cells, ELI_FLASH_CHUNK);
        const uint8_t *krows = kv->k + (size_t)c0 * kv->k_row_bytes, *vrows = kv->v + (size_t)c0 * kv->v_row_bytes;
        if (qk) qk(d, (int)nc, krows, kv->k_row_bytes, G, qp, s, ELI_FLASH_CHUNK);
        else eli_kvq_score(k, kv->kq, (int)nc, krows, kv->k_row_bytes, G, qp, s, ELI_FLASH_CHUNK);
        for (int g = 0; g < G; g++) {
            float *sg = s + g * ELI_FLASH_CHUNK;
            float cm = mx[g];
            for (int jj = 0; jj < nc; jj++) cm = sg[jj] > cm ? sg[jj] : cm;
            if (cm > mx[g]) {
                /* a low-bit V's sum is in the rotated domain: R is linear, the rescale is the same */
                if (mx[g] != -INFINITY) {
                    const float r = expf(mx[g] - cm);
                    k->scale_f32(d, r, out + (size_t)g * d);
                    sum[g] *= r;
                }
                mx[g] = cm;
            }
            sum[g] += k->exp_sum_f32(nc, cm, sg);
        }
        if (pv) pv(d, (int)nc, vrows, kv->v_row_bytes, G, s, ELI_FLASH_CHUNK, out);
        else eli_kvq_accumulate(k, kv->vq, (int)nc, vrows, kv->v_row_bytes, G, s, ELI_FLASH_CHUNK, out);
    }
}

void eli_flash_merge(int G, int d, float *out, float *mx, float *sum, const float *out_s, const float *mx_s,
                     const float *sum_s) {
    for (int g = 0; g < G; g++) {
        float *o = out + (size_t)g * d;
        const float *os = out_s + (size_t)g * d;
        if (mx[g] == -INFINITY) {
            memcpy(o, os, (size_t)d * sizeof(float));
            mx[g] = mx_s[g];
            sum[g] = sum_s[g];
            continue;
        }
        const float m = mx_s[g] > mx[g] ? mx_s[g] : mx[g];
        const float a = expf(mx[g] - m), b = expf(mx_s[g] - m);
        for (int i = 0; i < d; i++) o[i] = o[i] * a + os[i] * b;
        sum[g] = sum[g] * a + sum_s[g] * b;
        mx[g] = m;
    }
}

void eli_flash_finish(const eli_kernels *k, const eli_kv_view *kv, int G, int d, const float *sum, float *out) {
    for (int g = 0; g < G; g++) {
        k->scale_f32(d, 1.0f / sum[g], out + (size_t)g * d);
        if (kv->vq) eli_kvq_finish(kv->vq, out + (size_t)g * d, out + (size_t)g * d);
    }
}

void eli_attend_flash(const eli_kernels *k, const float *q, int G, int d, const eli_kv_view *kv, int32_t p_lo,
                      int32_t p_hi, void *work, float *out) {
    uint8_t *qp = align64(work);
    float *s = (float *)(void *)(qp + (size_t)G * kvq_query_bound(d));
    float *mx = s + (size_t)G * ELI_FLASH_CHUNK, *sum = mx + G, *mx_s = sum + G, *sum_s = mx_s + G;
    float *out_s = sum_s + G;
    eli_flash_prepare(k, kv, q, G, d, qp);
    /* the segments of the window one after the other, merged in order: what the split over threads computes */
    for (int32_t p0 = p_lo, p1; p0 <= p_hi; p0 = p1 + 1) {
        p1 = eli_flash_segment_end(p0, p_hi);
        if (p0 == p_lo) {
            eli_flash_span(k, kv, qp, G, d, p0, p1, s, out, mx, sum);
        } else {
            eli_flash_span(k, kv, qp, G, d, p0, p1, s, out_s, mx_s, sum_s);
            eli_flash_merge(G, d, out, mx, sum, out_s, mx_s, sum_s);
        }
    }
    eli_flash_finish(k, kv, G, d, sum, out);
}

/* ---- gathered rows (the drafter's centroid-masked head) ---- */

typedef struct {
    eli_vec_dot_fn dot;
    const eli_weight *w;
    const int32_t *rows;
    int64_t n;
    const void *xq;
    float *y;
} rows_job;

static void rows_task(void *ctx, int ith, int nth) {
    const rows_job *j = ctx;
    int64_t b, e;
    eli_split(j->n, ith, nth, &b, &e);
    for (int64_t i = b; i < e; i++)
        j->y[i] = j->dot(j->w->cols, (const uint8_t *)j->w->data + (size_t)j->rows[i] * j->w->row_bytes, j->xq);
}

int eli_matmul_rows(eli_pool *pool, const eli_kernels *k, const eli_weight *w, const int32_t *rows, int64_t n,
                    const float *x, float *y, eli_buf *scratch) {
    if (!k) k = eli_kernels_best();
    const eli_type_traits *tt = eli_type_info(w->type);
    rows_job j = {k->vec_dot[w->type], w, rows, n, x, y};
    if (tt->vec_dot_type != ELI_TYPE_F32) {
        uint8_t *q = eli_buf_reserve(scratch, eli_row_size(tt->vec_dot_type, w->cols));
        if (!q) return ELI_ERR_OOM;
        k->quantize[tt->vec_dot_type](x, q, w->cols);
        j.xq = q;
    }
    eli_pool_run(pool, rows_task, &j);
    return ELI_OK;
}

/* ---- the towers' clippable linears (mmproj.h) ---- */

/* ggml's clamp, MAX(MIN(v, hi), lo): NaN becomes hi, and lo wins when lo > hi. */
static void clamp_inplace(float *x, int64_t n, float lo, float hi) {
    for (int64_t i = 0; i < n; i++) {
        const float v = x[i] < hi ? x[i] : hi;
        x[i] = v > lo ? v : lo;
    }
}

int eli_mm_linear_apply(eli_pool *pool, const eli_kernels *k, const eli_mm_linear *l, float *x, int64_t T, float *y,
                        eli_buf *scratch, eli_error *err) {
    const eli_weight *w = &l->w;
    /* the defaults (+-FLT_MAX) change nothing finite; they are still applied for an infinite input, as in ggml */
    clamp_inplace(x, T * w->cols, l->in_min, l->in_max);
    if (eli_matmul_k(pool, k, w, 0, x, T, y, scratch)) return eli_fail(err, ELI_ERR_OOM, "out of memory multiplying '%s'", w->name);
    clamp_inplace(y, T * w->rows, l->out_min, l->out_max);
    if (l->bias)
        for (int64_t t = 0; t < T; t++)
            for (int64_t r = 0; r < w->rows; r++) y[t * w->rows + r] += l->bias[r];
    return ELI_OK;
}
