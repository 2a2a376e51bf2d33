/* Packed weight layouts: a copy of a matrix with its rows interleaved for the kernels that keep one row
 * per vector lane (kernels.h, packed_gemv / packed_gemm), made once when a model is loaded; and the move of
 * a model's matrices into anonymous huge-page memory that comes with it.
 *
 * Why: a row-major Q4_0 matrix lets a kernel put the elements of one row in the lanes of a vector, so
 * every (row, token) pair needs its own vector accumulator, a float FMA per block per 8 lanes, and a
 * horizontal sum at the end. With 16 rows side by side, lane r of a vector holds row r: a block's integer
 * sums for 16 rows come out of one VPDPBUSD per 4 elements, and the float work of a block is one convert
 * and one FMA per 16 rows, for decode and prefill alike. Transposing row-major blocks on the fly instead
 * costs more than the dot itself for one token (measured: decode 0.76x of the row-major kernel), so the
 * transposition is paid once, at load.
 *
 * The layout: rows in groups of 16 (rows must be a multiple of 16); groups in runs of up to ELI_PACK_RUN
 * (4) consecutive groups, i.e. 64 rows, the last run of a matrix holding what is left. A run of g groups
 * stores, for every block column b in order, its g groups one after the other, each G bytes holding the
 * 16 rows' block b with every field interleaved by row (lane r = row r of the group):
 *   Q4_0 (G = 288):  qs dword k (0..3) of lane r at 64k + 4r (low nibbles: elements 4k..4k+3, high:
 *                    16+4k..16+4k+3); d (fp16) at 256 + 2r;
 *   Q4_K (G = 2368): d at 2r, dmin at 32 + 2r; sub-block j's (0..7) 6-bit scale at 64 + 16j + r and its
 *                    min at 192 + 16j + r, one byte each (unpacked: 4 bytes more per row than the 12
 *                    packed ones); qs dword k (0..31) at 320 + 64k + 4r;
 *   F16 (G = 1024):  blocks of 32 elements, element e of lane r at 32e + 2r;
 * So a run is one linear stream (the decode reads it front to back), and row r0 (a multiple of 64) starts
 * at r0 * eli_pack_row_bytes: the row-major size for Q4_0 and F16, 148 instead of 144 bytes per 256 elements for
 * Q4_K. (Q6_K had a packed layout too, with kernels bit-identical to its scalar ones, but they measured
 * slower than the row-major Q6_K kernels, whose decode was not compute-bound: E2B Q4_K_M pp256 88 against
 * 103-106 tok/s, tg64 17.3-18.5 against 19.7-20.5; commit "Packed Q4_K and Q6_K kernels" has them.)
 *
 * The dot of the packed kernels, per row, one FMA chain over the blocks in order (not quants.c's 8 lanes:
 * it is what a vector with a row per lane computes), from acc = 0, the integer sums exact:
 *   Q4_0: acc = fmaf((float)isum, d_x * d_y, acc),   isum = sum of (q - 8) * y over the block;
 *   Q4_K: acc = fmaf((float)S, d_x * d_y, acc); acc = fmaf(-(dmin_x * d_y), (float)M, acc),
 *         S = sum over sub-blocks j of sc_j * (sum of q * y), M = sum of m_j * (the activation's
 *         bsums of sub-block j);
 *   F16:  acc = fmaf(w_e, y_e, acc) for every element e in order (y: the activation rounded to f16).
 * Every kernel table's packed kernels return exactly these floats (tests/test_kernels.c). */
#ifndef ELI_PACK_H
#define ELI_PACK_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"

#define ELI_PACK_GROUP 16 /* rows side by side */
#define ELI_PACK_RUN 4    /* groups per run */
#define ELI_PACK_ROWS (ELI_PACK_GROUP * ELI_PACK_RUN) /* rows per run: row ranges start at multiples of it */
#define ELI_PACK_Q4_0_BYTES 288                       /* one block column of one group */
#define ELI_PACK_Q4_K_BYTES 2368
#define ELI_PACK_F16_QK 32 /* F16 elements per block column */
#define ELI_PACK_F16_BYTES 1024

struct eli_model;

/* Whether a matrix of this type and shape has a packed layout (Q4_0, Q4_K, F16; rows a multiple of 16,
 * cols of the block size). */
int eli_pack_supported(uint32_t type, int64_t rows, int64_t cols);
/* Bytes per row of the packed layout (a run of 64 rows starts at 64 * that); 0 when none. */
size_t eli_pack_row_bytes(uint32_t type, int64_t cols);
/* Packs one matrix of `rows` row-major rows of `cols` values from src into dst (rows * eli_pack_row_bytes). */
void eli_pack(uint32_t type, const void *src, int64_t rows, int64_t cols, void *dst);
/* Row r of a packed matrix of `rows` rows, dequantized (cols floats into out), exactly as the row-major
 * row dequantizes. */
void eli_pack_dequantize_row(uint32_t type, const void *packed, int64_t rows, int64_t cols, int64_t r, float *out);

/* The scalar packed kernels (the reference table's, and what the SIMD ones are tested against), with the
 * signatures of kernels.h: x points at the start of a run (a row that is a multiple of ELI_PACK_ROWS), bx
 * is the packed row size; rows is a multiple of ELI_PACK_ROWS or the rest of the matrix, and so is nr,
 * which is at most ELI_PACK_ROWS (one run). */
void eli_pack_gemv_Q4_0_ref(int64_t n, int64_t rows, const void *x, size_t bx, const void *y, float *s);
void eli_pack_gemm_Q4_0_ref(int64_t n, int nr, int nt, const void *x, size_t bx, const void *y, size_t by, float *s,
                            size_t bs);
void eli_pack_gemv_F16_ref(int64_t n, int64_t rows, const void *x, size_t bx, const void *y, float *s);
void eli_pack_gemm_F16_ref(int64_t n, int nr, int nt, const void *x, size_t bx, const void *y, size_t by, float *s,
                           size_t bs);
void eli_pack_gemv_Q4_K_ref(int64_t n, int64_t rows, const void *x, size_t bx, const void *y, float *s);
void eli_pack_gemm_Q4_K_ref(int64_t n, int nr, int nt, const void *x, size_t bx, const void *y, size_t by, float *s,
                            size_t bs);

struct eli_kernels;

/* Moves the matrices a forward pass multiplies with out of the file mapping into one anonymous allocation
 * (huge pages where the kernel gives them): those the kernel table k has packed kernels for in the packed
 * layout (eli_weight.packed), the others as they are (eli_weight.data then points there). Reading 1-4 GB
 * per decoded token through 4 KiB file pages cost up to a third of the decode speed (measured:
 * BENCHMARKS.md). The mapped pages of each matrix are dropped from the process as it is copied, so
 * resident memory stays the weights' size, anonymous instead of file-backed. Skipped (the weights stay
 * mapped, where the kernel can evict and re-read them; *block NULL) when the copy would not fit in the
 * memory available less 512 MiB. *block / *block_len: the allocation, for eli_os_free once the model is
 * no longer used. */
int eli_model_pack(struct eli_model *m, const struct eli_kernels *k, void **block, size_t *block_len, eli_error *err);

#endif
