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
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "kernels.h"
#include "model.h"
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

/* ---- packing a model ---- */

/* the matrices a forward pass multiplies with (not the PLE table, which is read by rows, nor a
 * centroid-masked head, which is computed by selected rows, eli_matmul_rows) */
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

static size_t packed_bytes(const eli_weight *w) {
    return w->data && eli_pack_supported(w->type, w->rows, w->cols) ? (size_t)w->n_mat * (size_t)w->rows * w->row_bytes
                                                                      : 0;
}

#define PACK_ALIGN ((size_t)2 << 20) /* huge page */

int eli_model_pack(eli_model *m, eli_error *err) {
    const char *env = getenv("ELIZA_LLM_REPACK");
    if (env && strcmp(env, "0") && strcmp(env, "1"))
        return eli_fail(err, ELI_ERR_INVALID_ARG, "ELIZA_LLM_REPACK='%s': expected 0 (weights stay in the file mapping) or 1",
                        env);
    const eli_kernels *k = eli_kernels_best();
    if ((env && !strcmp(env, "0")) || k == eli_kernels_reference()) return ELI_OK;
    const int n = model_matrices(m, NULL);
    eli_weight **ws = malloc((size_t)n * sizeof *ws);
    if (!ws) return eli_fail(err, ELI_ERR_OOM, "out of memory");
    model_matrices(m, ws);
    size_t total = 0;
    for (int i = 0; i < n; i++)
        if (k->packed_gemv[ws[i]->type]) total += (packed_bytes(ws[i]) + 63) & ~(size_t)63;
    if (!total) {
        free(ws);
        return ELI_OK;
    }
    const size_t len = total + PACK_ALIGN;
    uint8_t *map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED) {
        free(ws);
        return eli_fail(err, ELI_ERR_OOM, "out of memory for %zu bytes of packed weights", total);
    }
    uint8_t *base = (uint8_t *)(((uintptr_t)map + PACK_ALIGN - 1) & ~(uintptr_t)(PACK_ALIGN - 1));
#ifdef MADV_HUGEPAGE
    (void)madvise(base, total, MADV_HUGEPAGE); /* fewer TLB misses while a decode streams the weights */
#endif
    const uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        eli_weight *w = ws[i];
        const size_t bytes = packed_bytes(w);
        if (!bytes || !k->packed_gemv[w->type]) continue;
        const size_t mat = (size_t)w->rows * w->row_bytes;
        for (int64_t e = 0; e < w->n_mat; e++)
            eli_pack_q4_0((const uint8_t *)w->data + e * mat, w->rows, w->cols, base + off + e * mat);
        w->packed = base + off;
        /* the copied pages leave this process (the file keeps them); a row-major read faults them back */
        const uintptr_t lo = ((uintptr_t)w->data + pg - 1) & ~(pg - 1), hi = ((uintptr_t)w->data + bytes) & ~(pg - 1);
        if (pg && hi > lo) (void)madvise((void *)lo, hi - lo, MADV_DONTNEED);
        off += (bytes + 63) & ~(size_t)63;
    }
    if (m->tied_output) m->output.packed = m->token_embd.packed;
    free(ws);
    m->packed_map = map;
    m->packed_map_len = len;
    return ELI_OK;
}

void eli_model_unpack(eli_model *m) {
    if (m->packed_map) munmap(m->packed_map, m->packed_map_len);
    m->packed_map = NULL;
    m->packed_map_len = 0;
}
