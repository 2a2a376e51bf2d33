/* Packed weight layouts (pack.h): repacking at load and the scalar packed kernels. */
#if defined(__FAST_MATH__)
#error "pack.c must not be built with -ffast-math: the reference kernels rely on exact IEEE float semantics"
#endif
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include "pack.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "kernels.h"
#include "model.h"
#include "plan.h"
#include "quants.h"

_Static_assert(ELI_PACK_Q4_0_BYTES == ELI_PACK_GROUP * sizeof(eli_block_q4_0), "a packed group is its rows' blocks");

int eli_pack_supported(uint32_t type, int64_t rows, int64_t cols) {
    return type == ELI_TYPE_Q4_0 && rows > 0 && rows % ELI_PACK_GROUP == 0 && cols > 0 && cols % ELI_QK4_0 == 0;
}

/* where block b of row r lives: its group's 288 bytes, and the row's lane in them */
static const uint8_t *q4_0_group(const uint8_t *packed, int64_t rows, int64_t nb, int64_t r, int64_t b, int *lane) {
    const int64_t run = r / ELI_PACK_ROWS, r0 = run * ELI_PACK_ROWS;
    const int64_t ng = rows - r0 < ELI_PACK_ROWS ? (rows - r0) / ELI_PACK_GROUP : ELI_PACK_RUN;
    const int64_t g = (r - r0) / ELI_PACK_GROUP;
    *lane = (int)(r % ELI_PACK_GROUP);
    return packed + (size_t)r0 * (size_t)nb * sizeof(eli_block_q4_0) + ((size_t)b * (size_t)ng + (size_t)g) * ELI_PACK_Q4_0_BYTES;
}

void eli_pack_q4_0(const void *src, int64_t rows, int64_t cols, void *dst) {
    const int64_t nb = cols / ELI_QK4_0;
    const eli_block_q4_0 *x = src;
    uint8_t *p = dst;
    /* in the packed order, so the destination is written front to back */
    for (int64_t r0 = 0; r0 < rows; r0 += ELI_PACK_ROWS) {
        const int ng = rows - r0 < ELI_PACK_ROWS ? (int)((rows - r0) / ELI_PACK_GROUP) : ELI_PACK_RUN;
        for (int64_t b = 0; b < nb; b++)
            for (int g = 0; g < ng; g++, p += ELI_PACK_Q4_0_BYTES)
                for (int lane = 0; lane < ELI_PACK_GROUP; lane++) {
                    const eli_block_q4_0 *blk = x + (r0 + g * ELI_PACK_GROUP + lane) * nb + b;
                    for (int k = 0; k < 4; k++) memcpy(p + 64 * k + 4 * lane, blk->qs + 4 * k, 4);
                    memcpy(p + 256 + 2 * lane, &blk->d, 2);
                }
    }
}

/* row r's block b back in the row-major form */
static void q4_0_block(const uint8_t *packed, int64_t rows, int64_t nb, int64_t r, int64_t b, eli_block_q4_0 *out) {
    int lane;
    const uint8_t *p = q4_0_group(packed, rows, nb, r, b, &lane);
    for (int k = 0; k < 4; k++) memcpy(out->qs + 4 * k, p + 64 * k + 4 * lane, 4);
    memcpy(&out->d, p + 256 + 2 * lane, 2);
}

void eli_pack_q4_0_dequantize_row(const void *packed, int64_t rows, int64_t cols, int64_t r, float *out) {
    const int64_t nb = cols / ELI_QK4_0;
    for (int64_t b = 0; b < nb; b++) {
        eli_block_q4_0 blk;
        q4_0_block(packed, rows, nb, r, b, &blk);
        eli_dequantize_row(ELI_TYPE_Q4_0, &blk, out + b * ELI_QK4_0, ELI_QK4_0);
    }
}

/* pack.h's dot of one packed row (the call's rows: row 0 at x, nrows of them) with an activation row */
static float q4_0_dot(const uint8_t *x, int64_t nrows, int64_t nb, int64_t r, const eli_block_q8_0 *y) {
    float acc = 0.0f;
    for (int64_t b = 0; b < nb; b++) {
        eli_block_q4_0 blk;
        q4_0_block(x, nrows, nb, r, b, &blk);
        int32_t isum = 0;
        for (int j = 0; j < 16; j++)
            isum += ((blk.qs[j] & 0x0F) - 8) * y[b].qs[j] + ((blk.qs[j] >> 4) - 8) * y[b].qs[j + 16];
        acc = fmaf((float)isum, eli_fp16_to_fp32(blk.d) * eli_fp16_to_fp32(y[b].d), acc);
    }
    return acc;
}

void eli_pack_gemv_q4_0_ref(int64_t n, int64_t rows, const void *x, size_t bx, const void *y, float *s) {
    (void)bx;
    for (int64_t r = 0; r < rows; r++) s[r] = q4_0_dot(x, rows, n / ELI_QK4_0, r, y);
}

void eli_pack_gemm_q4_0_ref(int64_t n, int nr, int nt, const void *x, size_t bx, const void *y, size_t by, float *s,
                            size_t bs) {
    (void)bx;
    for (int t = 0; t < nt; t++)
        for (int r = 0; r < nr; r++)
            s[(size_t)t * bs + r] = q4_0_dot(x, nr, n / ELI_QK4_0, r, (const eli_block_q8_0 *)((const uint8_t *)y + t * by));
}

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
static size_t padded(size_t bytes) { return (bytes + 63) & ~(size_t)63; }

#define PACK_ALIGN ((size_t)2 << 20) /* huge page */
#define PACK_THREADS 4
#define PACK_HEADROOM ((size_t)512 << 20)

typedef struct {
    eli_weight **ws;
    uint8_t **dst; /* each matrix's place in the allocation */
    int i0, i1;
    const eli_kernels *k;
    const gguf_file *file;
} pack_job;

static void *pack_task(void *arg) {
    const pack_job *j = arg;
    for (int i = j->i0; i < j->i1; i++) {
        eli_weight *w = j->ws[i];
        const void *src = w->data;
        const size_t mat = (size_t)w->rows * w->row_bytes, bytes = matrix_bytes(w);
        if (j->k->packed_gemv[w->type] && eli_pack_supported(w->type, w->rows, w->cols)) {
            for (int64_t e = 0; e < w->n_mat; e++)
                eli_pack_q4_0((const uint8_t *)src + e * mat, w->rows, w->cols, j->dst[i] + e * mat);
            w->packed = j->dst[i];
        } else {
            memcpy(j->dst[i], src, bytes);
            w->data = j->dst[i];
        }
        /* the copied pages leave this process (the page cache keeps them) */
        gguf_drop_pages(j->file, src, bytes);
    }
    return NULL;
}

int eli_model_pack(eli_model *m, eli_error *err) {
    const char *env = getenv("ELIZA_LLM_REPACK");
    if (env && strcmp(env, "0") && strcmp(env, "1"))
        return eli_fail(err, ELI_ERR_INVALID_ARG, "ELIZA_LLM_REPACK='%s': expected 0 (weights stay in the file mapping) or 1",
                        env);
    if (env && !strcmp(env, "0")) return ELI_OK;
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
            total += padded(matrix_bytes(ws[i]));
        }
    /* Anonymous memory cannot be paged back to the file: a model larger than what the machine has free
     * stays in the mapping, where the kernel can evict and re-read it (slowly, but it runs). */
    const long avail_kb = eli_plan_proc_kb("/proc/meminfo", "MemAvailable");
    const size_t avail = avail_kb > 0 ? (size_t)avail_kb * 1024 : (size_t)sysconf(_SC_PHYS_PAGES) * (size_t)sysconf(_SC_PAGESIZE) / 2;
    uint8_t *map = MAP_FAILED;
    const size_t len = total + PACK_ALIGN;
    if (n && total + PACK_HEADROOM <= avail) map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED) {
        free(ws), free(dst);
        return ELI_OK;
    }
    uint8_t *base = (uint8_t *)(((uintptr_t)map + PACK_ALIGN - 1) & ~(uintptr_t)(PACK_ALIGN - 1));
#ifdef MADV_HUGEPAGE
    /* a decode streams every matrix per token through the TLB: measured with 2 threads, E2B Q4_0 decode
     * 26.7-28.6 tok/s against 24.1-24.3 with 4 KiB pages; E2B Q4_K_M 28.5-30.7 against 18.2-21.0 tok/s
     * read through the file mapping */
    (void)madvise(base, total, MADV_HUGEPAGE);
#endif
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        dst[i] = base + off;
        off += padded(matrix_bytes(ws[i]));
    }
    /* a few threads, each a contiguous share of the bytes: the first touch of the new pages (zeroing) is
     * most of the time */
    const long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    const int nth = ncpu < 1 ? 1 : ncpu > PACK_THREADS ? PACK_THREADS : (int)ncpu;
    const eli_kernels *k = eli_kernels_best();
    pack_job jobs[PACK_THREADS];
    pthread_t tid[PACK_THREADS];
    int started[PACK_THREADS] = {0}, i = 0;
    size_t done = 0;
    for (int t = 0; t < nth; t++) {
        jobs[t] = (pack_job){ws, dst, i, i, k, m->file};
        while (i < n && (t == nth - 1 || done < total / (size_t)nth * (size_t)(t + 1))) done += padded(matrix_bytes(ws[i++]));
        jobs[t].i1 = i;
        if (t > 0) started[t] = pthread_create(&tid[t], NULL, pack_task, &jobs[t]) == 0;
        if (t > 0 && !started[t]) pack_task(&jobs[t]); /* no thread: this one does the share */
    }
    pack_task(&jobs[0]);
    for (int t = 1; t < nth; t++)
        if (started[t]) pthread_join(tid[t], NULL);
    if (m->tied_output) m->output = m->token_embd;
    free(ws), free(dst);
    m->packed_map = map;
    m->packed_map_len = len;
    return ELI_OK;
}

void eli_model_unpack(eli_model *m) {
    if (m->packed_map) munmap(m->packed_map, m->packed_map_len);
    m->packed_map = NULL;
    m->packed_map_len = 0;
}
