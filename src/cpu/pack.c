/* Packed weight layouts (pack.h): repacking at load and the scalar packed kernels. */
#include "fp_exact.h"

#include "pack.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "model.h"
#include "os.h"
#include "quants.h"

/* ---- the layouts: one block of one row <-> its lane of a group ---- */

/* Q4_0 (pack.h): qs dword k of lane r at 64k + 4r, d at 256 + 2r */
static void put_q4_0(const void *blk, uint8_t *g, int r) {
    const eli_block_q4_0 *b = blk;
    for (int k = 0; k < 4; k++) memcpy(g + 64 * k + 4 * r, b->qs + 4 * k, 4);
    memcpy(g + 256 + 2 * r, &b->d, 2);
}
static void get_q4_0(const uint8_t *g, int r, void *blk) {
    eli_block_q4_0 *b = blk;
    for (int k = 0; k < 4; k++) memcpy(b->qs + 4 * k, g + 64 * k + 4 * r, 4);
    memcpy(&b->d, g + 256 + 2 * r, 2);
}

/* Q4_K: d at 2r, dmin at 32 + 2r, sub-block j's 6-bit scale at 64 + 16j + r and min at 192 + 16j + r (one
 * byte each, unpacked), qs dword k (0..31) at 320 + 64k + 4r */
static void put_q4_K(const void *blk, uint8_t *g, int r) {
    const eli_block_q4_K *b = blk;
    memcpy(g + 2 * r, &b->d, 2);
    memcpy(g + 32 + 2 * r, &b->dmin, 2);
    for (int j = 0; j < 8; j++) eli_q4_K_scale_min(j, b->scales, g + 64 + 16 * j + r, g + 192 + 16 * j + r);
    for (int k = 0; k < 32; k++) memcpy(g + 320 + 64 * k + 4 * r, b->qs + 4 * k, 4);
}
static void get_q4_K(const uint8_t *g, int r, void *blk) {
    eli_block_q4_K *b = blk;
    uint8_t ls[8], lm[8];
    memcpy(&b->d, g + 2 * r, 2);
    memcpy(&b->dmin, g + 32 + 2 * r, 2);
    for (int j = 0; j < 8; j++) ls[j] = g[64 + 16 * j + r], lm[j] = g[192 + 16 * j + r];
    eli_q4_K_set_scales_mins(b->scales, ls, lm);
    for (int k = 0; k < 32; k++) memcpy(b->qs + 4 * k, g + 320 + 64 * k + 4 * r, 4);
}

/* F16, in blocks of 32 elements: element e of lane r at 32e + 2r */
static void put_f16(const void *blk, uint8_t *g, int r) {
    for (int e = 0; e < ELI_PACK_F16_QK; e++) memcpy(g + 32 * e + 2 * r, (const uint8_t *)blk + 2 * e, 2);
}
static void get_f16(const uint8_t *g, int r, void *blk) {
    for (int e = 0; e < ELI_PACK_F16_QK; e++) memcpy((uint8_t *)blk + 2 * e, g + 32 * e + 2 * r, 2);
}

/* ---- the dot order of the packed kernels, one block (pack.h) ---- */

static float dot_q4_0(const void *blk, const void *yb, float acc) {
    const eli_block_q4_0 *x = blk;
    const eli_block_q8_0 *y = yb;
    int32_t isum = 0;
    for (int j = 0; j < 16; j++) isum += ((x->qs[j] & 0x0F) - 8) * y->qs[j] + ((x->qs[j] >> 4) - 8) * y->qs[j + 16];
    return fmaf((float)isum, eli_fp16_to_fp32(x->d) * eli_fp16_to_fp32(y->d), acc);
}

static float dot_q4_K(const void *blk, const void *yb, float acc) {
    const eli_block_q4_K *x = blk;
    const eli_block_q8_K *y = yb;
    int32_t S = 0, M = 0;
    for (int j = 0; j < 8; j++) {
        uint8_t sc, m;
        eli_q4_K_scale_min(j, x->scales, &sc, &m);
        int32_t isum = 0;
        for (int l = 0; l < 32; l++) {
            const uint8_t q = x->qs[32 * (j / 2) + l];
            isum += (j % 2 ? q >> 4 : q & 0x0F) * y->qs[32 * j + l];
        }
        S += sc * isum;
        M += m * (y->bsums[2 * j] + y->bsums[2 * j + 1]);
    }
    acc = fmaf((float)S, eli_fp16_to_fp32(x->d) * y->d, acc);
    return fmaf(-(eli_fp16_to_fp32(x->dmin) * y->d), (float)M, acc);
}

static float dot_f16(const void *blk, const void *yb, float acc) {
    const eli_fp16 *x = blk, *y = yb;
    for (int e = 0; e < ELI_PACK_F16_QK; e++) acc = fmaf(eli_fp16_to_fp32(x[e]), eli_fp16_to_fp32(y[e]), acc);
    return acc;
}

typedef struct {
    uint32_t type, act;                  /* the weight type and its activation format */
    int qk;                              /* elements per block */
    size_t gbytes;                       /* one block column of one group */
    void (*put)(const void *blk, uint8_t *g, int lane);
    void (*get)(const uint8_t *g, int lane, void *blk);
    float (*dot)(const void *blk, const void *yb, float acc);
} pack_layout;

static const pack_layout layouts[] = {
    {ELI_TYPE_Q4_0, ELI_TYPE_Q8_0, ELI_QK4_0, ELI_PACK_Q4_0_BYTES, put_q4_0, get_q4_0, dot_q4_0},
    {ELI_TYPE_Q4_K, ELI_TYPE_Q8_K, ELI_QK_K, ELI_PACK_Q4_K_BYTES, put_q4_K, get_q4_K, dot_q4_K},
    {ELI_TYPE_F16, ELI_TYPE_F16, ELI_PACK_F16_QK, ELI_PACK_F16_BYTES, put_f16, get_f16, dot_f16},
};
_Static_assert(ELI_PACK_Q4_0_BYTES == ELI_PACK_GROUP * sizeof(eli_block_q4_0) &&
                   ELI_PACK_F16_BYTES == ELI_PACK_GROUP * ELI_PACK_F16_QK * sizeof(eli_fp16) &&
                   ELI_PACK_Q4_K_BYTES == ELI_PACK_GROUP * (sizeof(eli_block_q4_K) + 4),
               "the groups hold their rows' blocks (Q4_K's scales unpacked: 4 bytes more per row)");

static const pack_layout *layout_of(uint32_t type) {
    for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++)
        if (layouts[i].type == type) return &layouts[i];
    return NULL;
}

int eli_pack_supported(uint32_t type, int64_t rows, int64_t cols) {
    const pack_layout *L = layout_of(type);
    return L && rows > 0 && rows % ELI_PACK_GROUP == 0 && cols > 0 && cols % L->qk == 0;
}

size_t eli_pack_row_bytes(uint32_t type, int64_t cols) {
    const pack_layout *L = layout_of(type);
    return L && cols % L->qk == 0 ? (size_t)(cols / L->qk) * (L->gbytes / ELI_PACK_GROUP) : 0;
}

/* the group bytes of block b of row r, in a packed matrix of `rows` rows, and the row's lane in them */
static const uint8_t *group_of(const pack_layout *L, const uint8_t *packed, int64_t rows, int64_t nb, int64_t r,
                               int64_t b, int *lane) {
    const int64_t r0 = r / ELI_PACK_ROWS * ELI_PACK_ROWS;
    const int64_t ng = rows - r0 < ELI_PACK_ROWS ? (rows - r0) / ELI_PACK_GROUP : ELI_PACK_RUN;
    *lane = (int)(r % ELI_PACK_GROUP);
    return packed + (size_t)r0 * (size_t)nb * (L->gbytes / ELI_PACK_GROUP) +
           ((size_t)b * (size_t)ng + (size_t)((r - r0) / ELI_PACK_GROUP)) * L->gbytes;
}

void eli_pack(uint32_t type, const void *src, int64_t rows, int64_t cols, void *dst) {
    const pack_layout *L = layout_of(type);
    const int64_t nb = cols / L->qk;
    const size_t bs = eli_row_size(type, L->qk);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t b = 0; b < nb; b++) {
            int lane = 0;
            uint8_t *g = (uint8_t *)group_of(L, dst, rows, nb, r, b, &lane);
            L->put((const uint8_t *)src + (size_t)(r * nb + b) * bs, g, lane);
        }
}

/* one row-major block of any packed type */
typedef union {
    eli_block_q4_0 q4_0;
    eli_block_q4_K q4_K;
    eli_fp16 f16[ELI_PACK_F16_QK];
} any_block;

/* block b of packed row r (of a matrix or call of `rows` rows at packed), back in the row-major form */
static void block_of(const pack_layout *L, const uint8_t *packed, int64_t rows, int64_t nb, int64_t r, int64_t b,
                     any_block *blk) {
    int lane = 0;
    const uint8_t *g = group_of(L, packed, rows, nb, r, b, &lane);
    L->get(g, lane, blk);
}

void eli_pack_dequantize_row(uint32_t type, const void *packed, int64_t rows, int64_t cols, int64_t r, float *out) {
    const pack_layout *L = layout_of(type);
    const int64_t nb = cols / L->qk;
    for (int64_t b = 0; b < nb; b++) {
        any_block blk;
        block_of(L, packed, rows, nb, r, b, &blk);
        eli_dequantize_row(type, &blk, out + b * L->qk, L->qk);
    }
}

/* pack.h's dot of packed row r (of the call's nrows rows at x) with an activation row */
static float packed_dot(const pack_layout *L, const uint8_t *x, int64_t nrows, int64_t n, int64_t r, const void *y) {
    const int64_t nb = n / L->qk;
    const size_t ys = eli_row_size(L->act, L->qk);
    float acc = 0.0f;
    for (int64_t b = 0; b < nb; b++) {
        any_block blk;
        block_of(L, x, nrows, nb, r, b, &blk);
        acc = L->dot(&blk, (const uint8_t *)y + (size_t)b * ys, acc);
    }
    return acc;
}

#define PACKED_REF(T)                                                                                              \
    void eli_pack_gemv_##T##_ref(int64_t n, int64_t rows, const void *x, size_t bx, const void *y, float *s) {    \
        (void)bx;                                                                                                  \
        const pack_layout *L = layout_of(ELI_TYPE_##T);                                                            \
        for (int64_t r = 0; r < rows; r++) s[r] = packed_dot(L, x, rows, n, r, y);                                 \
    }                                                                                                              \
    void eli_pack_gemm_##T##_ref(int64_t n, int nr, int nt, const void *x, size_t bx, const void *y, size_t by,  \
                                 float *s, size_t bs) {                                                           \
        (void)bx;                                                                                                  \
        const pack_layout *L = layout_of(ELI_TYPE_##T);                                                            \
        for (int t = 0; t < nt; t++)                                                                               \
            for (int r = 0; r < nr; r++)                                                                           \
                s[(size_t)t * bs + r] = packed_dot(L, x, nr, n, r, (const uint8_t *)y + (size_t)t * by);          \
    }
PACKED_REF(Q4_0)
PACKED_REF(Q4_K)
PACKED_REF(F16)

/* ---- a model's matrices into anonymous memory ---- */

/* the matrices a forward pass multiplies with (not the PLE table, which is read by rows with pread, nor a
 * centroid-masked head, which is computed by selected rows) */
static int model_matrices(eli_model *m, eli_weight **out) {
    int n = 0;
#define ADD(w) (out ? (void)(out[n] = &(w)) : (void)0, n++)
    ADD(m->token_embd);
    if (!m->tied_output && !m->masked_centroids.data) ADD(m->output);
    ADD(m->ple_model_proj);
    ADD(m->nextn_pre_proj);
    ADD(m->nextn_post_proj);
    for (int il = 0; il < m->hp.n_layer; il++) {
        eli_layer *l = &m->layers[il];
        ADD(l->wq), ADD(l->wk), ADD(l->wv), ADD(l->wo), ADD(l->ffn_gate), ADD(l->ffn_up), ADD(l->ffn_down);
        ADD(l->gate_inp), ADD(l->gate_up_exps), ADD(l->gate_exps), ADD(l->up_exps), ADD(l->down_exps);
        ADD(l->inp_gate), ADD(l->proj);
    }
#undef ADD
    return n;
}

static size_t matrix_bytes(const eli_weight *w) { return (size_t)w->n_mat * (size_t)w->rows * w->row_bytes; }
/* packed when the kernel table has packed kernels for it, else copied as it is */
static int packs(const eli_kernels *k, const eli_weight *w) {
    return k->packed_gemv[w->type] && eli_pack_supported(w->type, w->rows, w->cols);
}
static size_t copy_bytes(const eli_kernels *k, const eli_weight *w) {
    return packs(k, w) ? (size_t)w->n_mat * (size_t)w->rows * eli_pack_row_bytes(w->type, w->cols) : matrix_bytes(w);
}
static size_t padded(size_t bytes) { return (bytes + 63) & ~(size_t)63; }

#define PACK_ALIGN ((size_t)2 << 20) /* huge page */
#define PACK_THREADS 4
#define PACK_HEADROOM ((size_t)512 << 20)

typedef struct {
    eli_weight **ws;
    uint8_t **dst; /* each matrix's place in the allocation */
    int i0, i1;
    const eli_kernels *k;
    const eli_gguf_file *file;
} pack_job;

static void *pack_task(void *arg) {
    const pack_job *j = arg;
    for (int i = j->i0; i < j->i1; i++) {
        eli_weight *w = j->ws[i];
        const void *src = w->data;
        const size_t mat = (size_t)w->rows * w->row_bytes, bytes = matrix_bytes(w);
        if (packs(j->k, w)) {
            const size_t pmat = (size_t)w->rows * eli_pack_row_bytes(w->type, w->cols);
            for (int64_t e = 0; e < w->n_mat; e++)
                eli_pack(w->type, (const uint8_t *)src + e * mat, w->rows, w->cols, j->dst[i] + e * pmat);
            w->packed = j->dst[i];
            w->packed_row_bytes = eli_pack_row_bytes(w->type, w->cols);
        } else {
            memcpy(j->dst[i], src, bytes);
            w->data = j->dst[i];
        }
        /* the copied pages leave this process (the page cache keeps them) */
        eli_gguf_drop_pages(j->file, src, bytes);
    }
    return NULL;
}

int eli_model_pack(eli_model *m, const eli_kernels *k, void **block, size_t *block_len, eli_error *err) {
    *block = NULL;
    *block_len = 0;
    const int n_all = model_matrices(m, NULL);
    eli_weight **ws = malloc((size_t)n_all * sizeof *ws);
    uint8_t **dst = malloc((size_t)n_all * sizeof *dst);
    if (!ws || !dst) {
        free(ws), free(dst);
        return eli_fail(err, ELI_ERR_OOM, "out of memory");
    }
    model_matrices(m, ws);
    int n = 0;
    size_t total = 0;
    for (int i = 0; i < n_all; i++)
        if (ws[i]->data) {
            ws[n++] = ws[i];
            total += padded(copy_bytes(k, ws[i]));
        }
    /* Anonymous memory cannot be paged back to the file: a model larger than what the machine has free
     * stays in the mapping, where the kernel can evict and re-read it (slowly, but it runs). */
    void *map = NULL;
    size_t len = 0;
    /* huge pages: a decode streams every matrix per token through the TLB: measured with 2 threads, E2B
     * Q4_0 decode 26.7-28.6 tok/s against 24.1-24.3 with the same copy in 4 KiB pages */
    uint8_t *base = n && total + PACK_HEADROOM <= eli_os_mem_available() ? eli_os_alloc(total, PACK_ALIGN, 1, &map, &len) : NULL;
    if (!base) {
        free(ws), free(dst);
        return ELI_OK;
    }
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        dst[i] = base + off;
        off += padded(copy_bytes(k, ws[i]));
    }
    /* a few threads, each a contiguous share of the bytes: the first touch of the new pages (zeroing) is
     * most of the time */
    const int ncpu = eli_os_cpu_count(), nth = ncpu > PACK_THREADS ? PACK_THREADS : ncpu;
    pack_job jobs[PACK_THREADS];
    pthread_t tid[PACK_THREADS];
    int started[PACK_THREADS] = {0}, i = 0;
    size_t done = 0;
    for (int t = 0; t < nth; t++) {
        jobs[t] = (pack_job){ws, dst, i, i, k, m->file};
        while (i < n && (t == nth - 1 || done < total / (size_t)nth * (size_t)(t + 1))) done += padded(copy_bytes(k, ws[i++]));
        jobs[t].i1 = i;
        if (t > 0) started[t] = pthread_create(&tid[t], NULL, pack_task, &jobs[t]) == 0;
        if (t > 0 && !started[t]) pack_task(&jobs[t]); /* no thread: this one does the share */
    }
    pack_task(&jobs[0]);
    for (int t = 1; t < nth; t++)
        if (started[t]) pthread_join(tid[t], NULL);
    if (m->tied_output) m->output = m->token_embd;
    free(ws), free(dst);
    *block = map;
    *block_len = len;
    return ELI_OK;
}
