/* Every SIMD kernel against the scalar reference (kernels.h contract) on random data of many lengths:
 * activation quantizers byte-identical, integer dot products bit-identical (also through the multi-row
 * kernels, for every row count, and through the prefill gemm tiles, for every tile shape), float dot
 * products within normalised MSE 1e-7; the packed Q4_0 kernels (pack.h) against a serial dot over the
 * row-major blocks written here, bit for bit; the fused attention against the two-pass eli_attend. Every table the CPU supports is checked (eli_kernels_all). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "ops.h"
#include "pack.h"
#include "quants.h"
#include "test.h"

static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static uint32_t rnd32(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng >> 32);
}
static float uniform(void) { return ((float)rnd32() + 0.5f) * (1.0f / 4294967296.0f); }
static float gauss(void) { return sqrtf(-2.0f * logf(uniform())) * cosf(6.2831853f * uniform()); }

/* random floats of a few shapes: gaussian, gaussian with outliers, small integers (ties), zero runs */
static void fill(float *x, int64_t n, int kind) {
    for (int64_t i = 0; i < n; i++) {
        switch (kind % 4) {
        case 0: x[i] = gauss(); break;
        case 1: x[i] = gauss() * (rnd32() % 17 == 0 ? 30.0f : 0.05f); break;
        case 2: x[i] = (float)((int)(rnd32() % 33) - 16) * 0.25f; break;
        default: x[i] = (i / 32) % 3 == 1 ? 0.0f : gauss() * 1e-3f; break;
        }
    }
}

static const uint32_t weight_types[] = {ELI_TYPE_F32, ELI_TYPE_F16, ELI_TYPE_BF16, ELI_TYPE_Q8_0,
                                        ELI_TYPE_Q4_0, ELI_TYPE_Q4_1, ELI_TYPE_Q5_0, ELI_TYPE_Q5_1,
                                        ELI_TYPE_Q4_K, ELI_TYPE_Q5_K, ELI_TYPE_Q6_K};

static int is_float_type(uint32_t t) { return t == ELI_TYPE_F32 || t == ELI_TYPE_F16 || t == ELI_TYPE_BF16; }

/* The prefill microkernel: every tile shape (rows 1..gemm_nr, tokens 1..ELI_KERNEL_MAX_NT) at every
 * offset of a 2*MAX_NT-token, (2*gemm_nr+1)-row problem returns for each (row, token) the one-row vec_dot
 * bit for bit, and writes nothing outside its tile. The float formats (no blocks) run lengths around the
 * kernels' 8/16/32-element steps, so every tail is exercised, and are also held to the reference's
 * normalised MSE bound. */
static void check_gemm(const eli_kernels *K, const eli_kernels *R) {
    for (size_t w = 0; w < sizeof weight_types / sizeof weight_types[0]; w++) {
        const uint32_t t = weight_types[w];
        if (!K->gemm[t]) continue;
        const eli_type_traits *tt = eli_type_info(t);
        const uint32_t at = tt->vec_dot_type;
        const int RM = K->gemm_nr[t];
        CHECK(RM >= 1 && RM <= ELI_KERNEL_MAX_GEMM_NR, "%s: %s gemm_nr %d", K->name, eli_type_name(t), RM);
        const int64_t mult[] = {1, 2, 3, 9, 18, 33, 70}; /* 33, 70: past the kernels' block chunks */
        const int64_t float_n[] = {1, 7, 8, 15, 16, 17, 31, 32, 33, 47, 100, 256, 263, 1031};
        const int fl = is_float_type(t);
        const size_t n_len = fl ? sizeof float_n / sizeof float_n[0] : sizeof mult / sizeof mult[0];
        int bad = 0, bad_canary = 0, n_tiles = 0;
        double err2 = 0, ref2 = 0;
        for (size_t mi = 0; mi < n_len; mi++) {
            const int64_t n = fl ? float_n[mi] : tt->block_size * mult[mi];
            if (n > 4608) continue;
            const int rows = 2 * RM + 1, toks = 2 * ELI_KERNEL_MAX_NT;
            const size_t wrs = eli_row_size(t, n), ars = eli_row_size(at, n);
            float *xf = malloc(sizeof(float) * (size_t)n);
            uint8_t *wq = malloc(wrs * (size_t)rows), *aq = malloc(ars * (size_t)toks);
            /* row 0 and token 0 are constants: the largest block sums (e.g. Q4_0: -8 * -127 everywhere) */
            for (int r = 0; r < rows; r++) {
                fill(xf, n, (int)mi + r);
                if (r == 0)
                    for (int64_t i = 0; i < n; i++) xf[i] = 1.0f;
                eli_quantize_row(t, xf, wq + (size_t)r * wrs, n);
            }
            for (int k = 0; k < toks; k++) {
                fill(xf, n, (int)mi + 3 * k + 1);
                if (k == 0)
                    for (int64_t i = 0; i < n; i++) xf[i] = -1.0f;
                K->quantize[at](xf, aq + (size_t)k * ars, n);
            }
            float *ref = malloc(sizeof(float) * (size_t)(rows * toks)), *got = malloc(sizeof(float) * (size_t)(rows * toks));
            for (int k = 0; k < toks; k++)
                for (int r = 0; r < rows; r++) {
                    ref[k * rows + r] = K->vec_dot[t](n, wq + (size_t)r * wrs, aq + (size_t)k * ars);
                    if (fl) {
                        const double e = R->vec_dot[t](n, wq + (size_t)r * wrs, aq + (size_t)k * ars);
                        err2 += (e - ref[k * rows + r]) * (e - ref[k * rows + r]);
                        ref2 += e * e;
                    }
                }
            for (int nr = 1; nr <= RM; nr++) {
                for (int nt = 1; nt <= ELI_KERNEL_MAX_NT; nt++) {
                    const int r0 = (nr * 7 + nt) % (rows - nr + 1), k0 = (nt * 5 + nr) % (toks - nt + 1);
                    for (int i = 0; i < rows * toks; i++) got[i] = -12345.0f;
                    K->gemm[t](n, nr, nt, wq + (size_t)r0 * wrs, wrs, aq + (size_t)k0 * ars, ars, got + k0 * rows + r0,
                               (size_t)rows);
                    n_tiles++;
                    for (int k = 0; k < toks; k++) {
                        for (int r = 0; r < rows; r++) {
                            const int in = k >= k0 && k < k0 + nt && r >= r0 && r < r0 + nr;
                            const float g = got[k * rows + r];
                            if (!in) {
                                if (g != -12345.0f) bad_canary++;
                            } else if (memcmp(&g, &ref[k * rows + r], sizeof g)) {
                                if (bad++ < 3)
                                    fprintf(stderr, "  gemm %s n=%lld tile %dx%d row %d token %d: dot %.9g gemm %.9g\n",
                                            eli_type_name(t), (long long)n, nr, nt, r, k, ref[k * rows + r], g);
                            }
                        }
                    }
                }
            }
            free(xf), free(wq), free(aq), free(ref), free(got);
        }
        printf("  %-5s gemm %4d tiles: %d results differ from vec_dot, %d writes outside the tile\n", eli_type_name(t),
               n_tiles, bad, bad_canary);
        if (fl) {
            const double nmse = ref2 > 0 ? err2 / ref2 : err2;
            printf("  %-5s gemm vs reference: normalised MSE %.3g\n", eli_type_name(t), nmse);
            CHECK(nmse <= 1e-7, "%s: %s gemm NMSE %.3g", K->name, eli_type_name(t), nmse);
        }
        CHECK(bad == 0 && bad_canary == 0, "%s: %s gemm differs from vec_dot %d times, %d stray writes", K->name,
              eli_type_name(t), bad, bad_canary);
    }
}

/* pack.h's dot orders, computed here from the row-major blocks: one fused chain per row over the blocks'
 * exact integer sums */
static float serial_dot(uint32_t t, int64_t n, const void *vx, const void *vy) {
    float acc = 0.0f;
    if (t == ELI_TYPE_F16) {
        const eli_fp16 *x = vx, *y = vy;
        for (int64_t e = 0; e < n; e++) acc = fmaf(eli_fp16_to_fp32(x[e]), eli_fp16_to_fp32(y[e]), acc);
        return acc;
    }
    if (t == ELI_TYPE_Q4_0) {
        const eli_block_q4_0 *x = vx;
        const eli_block_q8_0 *y = vy;
        for (int64_t b = 0; b < n / 32; b++) {
            int32_t isum = 0;
            for (int j = 0; j < 16; j++)
                isum += ((x[b].qs[j] & 0x0F) - 8) * y[b].qs[j] + ((x[b].qs[j] >> 4) - 8) * y[b].qs[j + 16];
            acc = fmaf((float)isum, eli_fp16_to_fp32(x[b].d) * eli_fp16_to_fp32(y[b].d), acc);
        }
        return acc;
    }
    const eli_block_q4_K *x = vx; /* Q4_K */
    const eli_block_q8_K *y = vy;
    for (int64_t b = 0; b < n / 256; b++) {
        int32_t S = 0, M = 0;
        for (int j = 0; j < 8; j++) {
            uint8_t sc, m;
            eli_q4_K_scale_min(j, x[b].scales, &sc, &m);
            int32_t isum = 0, ysum = 0;
            for (int l = 0; l < 32; l++) {
                const int q = j % 2 ? x[b].qs[32 * (j / 2) + l] >> 4 : x[b].qs[32 * (j / 2) + l] & 0x0F;
                isum += q * y[b].qs[32 * j + l];
                ysum += y[b].qs[32 * j + l];
            }
            S += sc * isum;
            M += m * ysum;
        }
        acc = fmaf((float)S, eli_fp16_to_fp32(x[b].d) * y[b].d, acc);
        acc = fmaf(-(eli_fp16_to_fp32(x[b].dmin) * y[b].d), (float)M, acc);
    }
    return acc;
}

/* The packed kernels (pack.h) of Q4_0, Q4_K and F16: for matrices of 16 .. 176 rows (runs of 1-4
 * groups), decode over every range of runs and prefill for every run and token count 1..ELI_KERNEL_MAX_NT,
 * each (row, token) bit for bit the serial dot above, nothing written outside the call's outputs; a packed
 * row dequantizes to the original row. Token 0 is the extreme -128 in every quant (beyond what the
 * quantizer makes; F16: as filled), row 0 constant. */
static void check_packed(const eli_kernels *K) {
    static const uint32_t types[] = {ELI_TYPE_Q4_0, ELI_TYPE_Q4_K, ELI_TYPE_F16};
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        const uint32_t t = types[ti], at = eli_type_info(t)->vec_dot_type;
        if (!K->packed_gemv[t]) continue;
        CHECK(K->packed_gemm[t] != NULL, "%s: %s packed gemv without gemm", K->name, eli_type_name(t));
        const int qk = t == ELI_TYPE_F16 ? ELI_PACK_F16_QK : (int)eli_type_info(t)->block_size;
        const int64_t row_counts[] = {16, 32, 48, 176}, mult[] = {1, 2, 3, 9, 33, 70};
        int bad = 0, bad_canary = 0, bad_row = 0, calls = 0;
        for (size_t ri = 0; ri < sizeof row_counts / sizeof row_counts[0]; ri++)
            for (size_t mi = 0; mi < sizeof mult / sizeof mult[0]; mi++) {
                const int64_t rows = row_counts[ri], n = qk * mult[mi];
                if (n > 4608) continue;
                const int toks = ELI_KERNEL_MAX_NT + 3;
                const size_t wrs = eli_row_size(t, n), prs = eli_pack_row_bytes(t, n), ars = eli_row_size(at, n);
                float *xf = malloc(sizeof(float) * (size_t)n), *a = malloc(sizeof(float) * (size_t)n),
                      *e = malloc(sizeof(float) * (size_t)n);
                uint8_t *wq = malloc(wrs * (size_t)rows), *wp = malloc(prs * (size_t)rows), *aq = malloc(ars * (size_t)toks);
                for (int64_t r = 0; r < rows; r++) {
                    fill(xf, n, (int)(mi + r));
                    if (r == 0)
                        for (int64_t i = 0; i < n; i++) xf[i] = -1.0f;
                    eli_quantize_row(t, xf, wq + (size_t)r * wrs, n);
                }
                for (int k = 0; k < toks; k++) {
                    fill(xf, n, (int)mi + 3 * k + 1);
                    K->quantize[at](xf, aq + (size_t)k * ars, n);
                }
                if (at == ELI_TYPE_Q8_0) {
                    for (int64_t b = 0; b < n / 32; b++) memset(((eli_block_q8_0 *)aq)[b].qs, 0x80, 32);
                } else if (at == ELI_TYPE_Q8_K) {
                    for (int64_t b = 0; b < n / 256; b++) {
                        eli_block_q8_K *y = (eli_block_q8_K *)aq + b;
                        memset(y->qs, 0x80, 256);
                        for (int j = 0; j < 16; j++) y->bsums[j] = -128 * 16;
                    }
                }
                eli_pack(t, wq, rows, n, wp);
                for (int64_t r = 0; r < rows; r++) {
                    eli_dequantize_row(t, wq + (size_t)r * wrs, e, n);
                    eli_pack_dequantize_row(t, wp, rows, n, r, a);
                    bad_row += memcmp(a, e, sizeof(float) * (size_t)n) != 0;
                }
                float *ref = malloc(sizeof(float) * (size_t)(rows * toks)), *got = malloc(sizeof(float) * (size_t)(rows * toks));
                for (int k = 0; k < toks; k++)
                    for (int64_t r = 0; r < rows; r++)
                        ref[k * rows + r] = serial_dot(t, n, wq + (size_t)r * wrs, aq + (size_t)k * ars);
                /* decode: rows [r0, rows) for every run start r0, against tokens 0 and 1 */
                for (int k = 0; k < 2; k++)
                    for (int64_t r0 = 0; r0 < rows; r0 += ELI_PACK_ROWS) {
                        for (int64_t i = 0; i < rows * toks; i++) got[i] = -12345.0f;
                        K->packed_gemv[t](n, rows - r0, wp + (size_t)r0 * prs, prs, aq + (size_t)k * ars, got + k * rows + r0);
                        calls++;
                        for (int64_t i = 0; i < rows * toks; i++) {
                            const int in = i >= k * rows + r0 && i < (k + 1) * rows;
                            if (!in) bad_canary += got[i] != -12345.0f;
                            else if (memcmp(&got[i], &ref[i], sizeof(float)) && bad++ < 3)
                                fprintf(stderr, "  %s %s packed gemv rows=%lld n=%lld token %d row %lld: %.9g, serial %.9g\n",
                                        K->name, eli_type_name(t), (long long)rows, (long long)n, k,
                                        (long long)(i - k * rows), got[i], ref[i]);
                        }
                    }
                /* prefill: each run, tokens [k0, k0 + nt) */
                for (int64_t r0 = 0; r0 < rows; r0 += ELI_PACK_ROWS) {
                    const int nr = (int)(rows - r0 < ELI_PACK_ROWS ? rows - r0 : ELI_PACK_ROWS);
                    for (int nt = 1; nt <= ELI_KERNEL_MAX_NT; nt++) {
                        const int k0 = nt % (toks - nt + 1);
                        for (int64_t i = 0; i < rows * toks; i++) got[i] = -12345.0f;
                        K->packed_gemm[t](n, nr, nt, wp + (size_t)r0 * prs, prs, aq + (size_t)k0 * ars, ars,
                                          got + k0 * rows + r0, (size_t)rows);
                        calls++;
                        for (int k = 0; k < toks; k++)
                            for (int64_t r = 0; r < rows; r++) {
                                const int in = k >= k0 && k < k0 + nt && r >= r0 && r < r0 + nr;
                                const float g = got[k * rows + r];
                                if (!in) bad_canary += g != -12345.0f;
                                else if (memcmp(&g, &ref[k * rows + r], sizeof g) && bad++ < 3)
                                    fprintf(stderr, "  %s %s packed gemm rows=%lld n=%lld %dx%d row %lld token %d: %.9g, serial %.9g\n",
                                            K->name, eli_type_name(t), (long long)rows, (long long)n, nr, nt,
                                            (long long)r, k, g, ref[k * rows + r]);
                            }
                    }
                }
                free(xf), free(a), free(e), free(wq), free(wp), free(aq), free(ref), free(got);
            }
        printf("  %-5s packed: %d calls, %d results differ from the serial dot, %d stray writes, %d rows unpack wrong\n",
               eli_type_name(t), calls, bad, bad_canary, bad_row);
        CHECK(bad == 0 && bad_canary == 0 && bad_row == 0, "%s: packed %s: %d differ, %d stray writes, %d bad rows",
              K->name, eli_type_name(t), bad, bad_canary, bad_row);
    }
    CHECK(eli_pack_supported(ELI_TYPE_Q4_0, 32, 64) && !eli_pack_supported(ELI_TYPE_Q4_0, 24, 64) &&
              !eli_pack_supported(ELI_TYPE_Q4_0, 32, 48) && !eli_pack_supported(ELI_TYPE_Q8_0, 32, 64) &&
              eli_pack_supported(ELI_TYPE_Q4_K, 16, 512) && !eli_pack_supported(ELI_TYPE_Q4_K, 16, 128) &&
              !eli_pack_supported(ELI_TYPE_Q6_K, 16, 512) && eli_pack_supported(ELI_TYPE_F16, 16, 64) &&
              !eli_pack_supported(ELI_TYPE_F16, 16, 48),
          "eli_pack_supported: Q4_0 / Q4_K / F16 with rows a multiple of 16 and whole blocks only");
}

static void check_table(const eli_kernels *K, const eli_kernels *R) {
    printf("checking kernel table '%s'\n", K->name);
    /* activation quantizers: identical bytes */
    const uint32_t acts[] = {ELI_TYPE_Q8_0, ELI_TYPE_Q8_1, ELI_TYPE_Q8_K, ELI_TYPE_F16, ELI_TYPE_BF16};
    for (size_t a = 0; a < sizeof acts / sizeof acts[0]; a++) {
        const uint32_t t = acts[a];
        const int64_t bs = eli_type_info(t)->block_size;
        int bad = 0;
        for (int it = 0; it < 64; it++) {
            const int64_t n = (bs == 1 ? 1 + rnd32() % 600 : bs * (1 + rnd32() % 24));
            float *x = malloc(sizeof(float) * (size_t)n);
            fill(x, n, it);
            const size_t rs = eli_row_size(t, n);
            uint8_t *q0 = calloc(1, rs), *q1 = calloc(1, rs);
            R->quantize[t](x, q0, n);
            K->quantize[t](x, q1, n);
            if (memcmp(q0, q1, rs)) bad++;
            free(x), free(q0), free(q1);
        }
        CHECK(bad == 0, "%s: quantize %s differs from the reference in %d of 64 rows", K->name, eli_type_name(t), bad);
    }

    /* dot products */
    for (size_t w = 0; w < sizeof weight_types / sizeof weight_types[0]; w++) {
        const uint32_t t = weight_types[w];
        const eli_type_traits *tt = eli_type_info(t);
        const uint32_t at = tt->vec_dot_type;
        const int64_t bs = tt->block_size == 1 ? 32 : tt->block_size;
        const int64_t mult[] = {1, 2, 3, 5, 7, 8, 9, 15, 16, 17, 31, 64, 72};
        int bad_exact = 0, bad_nr = 0, n_cases = 0;
        double err2 = 0, ref2 = 0;
        for (size_t mi = 0; mi < sizeof mult / sizeof mult[0]; mi++) {
            for (int extra = 0; extra < (tt->block_size == 1 ? 3 : 1); extra++) {
                const int64_t n = bs * mult[mi] + (tt->block_size == 1 ? extra * 3 : 0);
                if (n > 4608) continue;
                const int rows = ELI_KERNEL_MAX_NR;
                const size_t wrs = eli_row_size(t, n), ars = eli_row_size(at, n);
                float *xf = malloc(sizeof(float) * (size_t)n);
                uint8_t *wq = malloc(wrs * rows), *aq = malloc(ars);
                for (int r = 0; r < rows; r++) {
                    fill(xf, n, (int)(mi + (size_t)r));
                    eli_quantize_row(t, xf, wq + (size_t)r * wrs, n);
                }
                fill(xf, n, (int)mi + 1);
                R->quantize[at](xf, aq, n);
                float ref[ELI_KERNEL_MAX_NR], got[ELI_KERNEL_MAX_NR];
                for (int r = 0; r < rows; r++) {
                    ref[r] = R->vec_dot[t](n, wq + (size_t)r * wrs, aq);
                    got[r] = K->vec_dot[t](n, wq + (size_t)r * wrs, aq);
                    n_cases++;
                    if (is_float_type(t)) {
                        err2 += ((double)ref[r] - got[r]) * ((double)ref[r] - got[r]);
                        ref2 += (double)ref[r] * ref[r];
                    } else if (memcmp(&ref[r], &got[r], sizeof(float))) {
                        if (bad_exact++ < 3)
                            fprintf(stderr, "  %s n=%lld row %d: ref %.9g got %.9g\n", eli_type_name(t), (long long)n, r,
                                    ref[r], got[r]);
                    }
                }
                if (K->vec_dot_nr[t]) {
                    for (int nr = 1; nr <= K->nr[t] && nr <= ELI_KERNEL_MAX_NR; nr++) {
                        for (int r0 = 0; r0 + nr <= rows; r0 += nr) {
                            float s[ELI_KERNEL_MAX_NR];
                            K->vec_dot_nr[t](n, nr, wq + (size_t)r0 * wrs, wrs, aq, s);
                            for (int i = 0; i < nr; i++)
                                if (memcmp(&s[i], &got[r0 + i], sizeof(float))) bad_nr++;
                        }
                    }
                }
                if (K->gemv[t]) {
                    for (int nrows = 1; nrows <= rows; nrows++) {
                        float s[ELI_KERNEL_MAX_NR + 1];
                        s[nrows] = -1.0f; /* canary */
                        K->gemv[t](n, nrows, wq, wrs, aq, s);
                        for (int i = 0; i < nrows; i++)
                            if (memcmp(&s[i], &got[i], sizeof(float))) bad_nr++;
                        if (s[nrows] != -1.0f) bad_nr++;
                    }
                }
                free(xf), free(wq), free(aq);
            }
        }
        if (is_float_type(t)) {
            const double nmse = ref2 > 0 ? err2 / ref2 : err2;
            printf("  %-5s %4d dots: normalised MSE %.3g\n", eli_type_name(t), n_cases, nmse);
            CHECK(nmse <= 1e-7, "%s: %s dot NMSE %.3g", K->name, eli_type_name(t), nmse);
        } else {
            printf("  %-5s %4d dots: %d differ from the reference\n", eli_type_name(t), n_cases, bad_exact);
            CHECK(bad_exact == 0, "%s: %s dot differs in %d of %d", K->name, eli_type_name(t), bad_exact, n_cases);
        }
        if (K->gemv[t]) {
            /* rows longer than the activation gemv prepares on its stack take its one-row path */
            const int64_t n = 256 * 101, rows = 3;
            const size_t wrs = eli_row_size(t, n), ars = eli_row_size(at, n);
            float *xf = malloc(sizeof(float) * (size_t)n), s[3];
            uint8_t *wq = malloc(wrs * rows), *aq = malloc(ars);
            for (int r = 0; r < rows; r++) {
                fill(xf, n, 50 + r);
                eli_quantize_row(t, xf, wq + (size_t)r * wrs, n);
            }
            fill(xf, n, 60);
            K->quantize[at](xf, aq, n);
            K->gemv[t](n, rows, wq, wrs, aq, s);
            for (int r = 0; r < rows; r++) {
                const float want = K->vec_dot[t](n, wq + (size_t)r * wrs, aq);
                if (memcmp(&s[r], &want, sizeof(float))) bad_nr++;
            }
            free(xf), free(wq), free(aq);
        }
        CHECK(bad_nr == 0, "%s: %s multi-row kernel (nr or gemv) differs from the single-row one %d times", K->name,
              eli_type_name(t), bad_nr);
    }

    check_gemm(K, R);
    check_packed(K);

    /* the fused attention's kernels: against the reference within normalised MSE 1e-7, and each head's
     * result the same bits whatever the number of heads in the call (the thread split groups heads) */
    {
        const uint32_t types[] = {ELI_TYPE_F32, ELI_TYPE_F16};
        for (size_t ti = 0; ti < 2; ti++) {
            const uint32_t type = types[ti];
            double e2 = 0, r2 = 0;
            int bad_g = 0;
            for (int it = 0; it < 60; it++) {
                const int64_t d = it < 4 ? 64 << (it % 2) : 1 + (int64_t)(rnd32() % 300);
                const int nc = 1 + (int)(rnd32() % 70), G = 1 + (int)(rnd32() % 9);
                const size_t rb = eli_row_size(type, d) + 4 * (rnd32() % 3); /* rows need not be packed */
                uint8_t *rows = calloc((size_t)nc, rb);
                float *x = malloc(sizeof(float) * (size_t)(d * G)), *p = malloc(sizeof(float) * (size_t)(nc * G));
                float *s0 = malloc(sizeof(float) * (size_t)(nc * G)), *s1 = malloc(sizeof(float) * (size_t)(nc * G));
                float *o0 = malloc(sizeof(float) * (size_t)(d * G)), *o1 = malloc(sizeof(float) * (size_t)(d * G));
                float *o2 = malloc(sizeof(float) * (size_t)(d * G)), *s2 = malloc(sizeof(float) * (size_t)nc);
                for (int j = 0; j < nc; j++) {
                    fill(x, d, it + j);
                    eli_quantize_row(type, x, rows + (size_t)j * rb, d);
                }
                fill(x, d * G, it);
                for (int i = 0; i < nc * G; i++) p[i] = uniform();
                R->attn_qk[type](d, nc, rows, rb, G, x, s0, (size_t)nc);
                K->attn_qk[type](d, nc, rows, rb, G, x, s1, (size_t)nc);
                for (int i = 0; i < nc * G; i++) e2 += ((double)s0[i] - s1[i]) * ((double)s0[i] - s1[i]), r2 += (double)s0[i] * s0[i];
                for (int g = 0; g < G; g++) {
                    K->attn_qk[type](d, nc, rows, rb, 1, x + g * d, s2, (size_t)nc);
                    bad_g += memcmp(s2, s1 + g * nc, sizeof(float) * (size_t)nc) != 0;
                }
                fill(o0, d * G, it + 1);
                memcpy(o1, o0, sizeof(float) * (size_t)(d * G));
                memcpy(o2, o0, sizeof(float) * (size_t)(d * G));
                R->attn_pv[type](d, nc, rows, rb, G, p, (size_t)nc, o0);
                K->attn_pv[type](d, nc, rows, rb, G, p, (size_t)nc, o1);
                for (int g = 0; g < G; g++) K->attn_pv[type](d, nc, rows, rb, 1, p + g * nc, (size_t)nc, o2 + g * d);
                bad_g += memcmp(o1, o2, sizeof(float) * (size_t)(d * G)) != 0;
                for (int i = 0; i < d * G; i++) e2 += ((double)o0[i] - o1[i]) * ((double)o0[i] - o1[i]), r2 += (double)o0[i] * o0[i];
                free(rows), free(x), free(p), free(s0), free(s1), free(s2), free(o0), free(o1), free(o2);
            }
            printf("  attention kernels %s: normalised MSE %.3g\n", eli_type_name(type), e2 / r2);
            CHECK(e2 / r2 <= 1e-7, "%s: %s attention kernels NMSE %.3g", K->name, eli_type_name(type), e2 / r2);
            CHECK(bad_g == 0, "%s: %s attention kernels depend on the number of heads (%d)", K->name,
                  eli_type_name(type), bad_g);
        }
        double e2 = 0, r2 = 0;
        for (int it = 0; it < 50; it++) {
            const int64_t n = 1 + rnd32() % 600;
            float *a = malloc(sizeof(float) * (size_t)n), *y0 = malloc(sizeof(float) * (size_t)n);
            float *y1 = malloc(sizeof(float) * (size_t)n);
            eli_fp16 *h = malloc(sizeof(eli_fp16) * (size_t)n);
            fill(a, n, 0);
            for (int64_t i = 0; i < n; i++) h[i] = eli_fp32_to_fp16(a[i]);
            R->f16_to_f32(n, h, y0);
            K->f16_to_f32(n, h, y1);
            CHECK(!memcmp(y0, y1, sizeof(float) * (size_t)n), "%s: f16_to_f32", K->name);
            R->scale_f32(n, 1.7f, y0);
            K->scale_f32(n, 1.7f, y1);
            for (int64_t i = 0; i < n; i++) e2 += ((double)y0[i] - y1[i]) * ((double)y0[i] - y1[i]), r2 += (double)y0[i] * y0[i];
            free(a), free(h), free(y0), free(y1);
        }
        CHECK(e2 / r2 <= 1e-7, "%s: scale_f32 NMSE %.3g", K->name, e2 / r2);
    }

    /* the softcap: every float tanh argument on a fine grid over [-12, 12] (and the lengths' tails), held
     * to the contract against tanhf: 4e-7 relative to the result (a few ulp), and exactly +-c and 0 where
     * tanhf gives +-1 and 0 */
    {
        const float c = 30.0f;
        const int64_t n = 240007; /* odd: a tail */
        float *x = malloc(sizeof(float) * (size_t)n), *y = malloc(sizeof(float) * (size_t)n);
        for (int64_t i = 0; i < n; i++) x[i] = c * (-12.0f + 24.0f * (float)i / (float)(n - 1));
        x[n / 2] = 0.0f, x[1] = -INFINITY, x[2] = 1e-30f;
        memcpy(y, x, sizeof(float) * (size_t)n);
        K->softcap_f32(n, c, y);
        double worst = 0;
        int bad = 0;
        for (int64_t i = 0; i < n; i++) {
            const float want = tanhf(x[i] * (1.0f / c)) * c;
            const double rel = fabs((double)y[i] - want) / (fabs((double)want) > 1e-30 ? fabs((double)want) : 1e-30);
            worst = rel > worst ? rel : worst;
            bad += rel > 4e-7 || ((fabsf(want) == c || want == 0.0f) && y[i] != want);
        }
        printf("  softcap: worst relative error %.3g (%s)\n", worst, K->name);
        CHECK(bad == 0, "%s: softcap off tanhf in %d of %lld", K->name, bad, (long long)n);
        free(x), free(y);
    }

    /* the softmax numerators: exp on a fine grid over [-90, 0] (every length's tail), each within 4e-7
     * relative of expf where expf is normal, the sum within 1e-5 relative */
    {
        const int64_t n = 90011;
        float *x = malloc(sizeof(float) * (size_t)n), *y = malloc(sizeof(float) * (size_t)n);
        const float m = 3.5f;
        for (int64_t i = 0; i < n; i++) x[i] = m - 90.0f * (float)i / (float)(n - 1);
        int bad = 0;
        double worst = 0;
        const int64_t lens[] = {1, 3, 7, 8, 9, 15, 17, 31, 64, 65, 1000};
        for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
            for (int64_t off = 0; off < n; off += lens[li]) { /* runs of that length over the whole grid */
                const int64_t l = n - off < lens[li] ? n - off : lens[li];
                memcpy(y, x + off, sizeof(float) * (size_t)l);
                const float sum = K->exp_sum_f32(l, m, y);
                double want_sum = 0;
                for (int64_t i = 0; i < l; i++) {
                    const float want = expf(x[off + i] - m);
                    want_sum += want;
                    if (want < 1e-37f) continue;
                    const double rel = fabs((double)y[i] - want) / want;
                    worst = rel > worst ? rel : worst;
                    bad += rel > 4e-7;
                }
                /* float accumulation, as the reference; sums of only sub-1e-37 values may differ */
                bad += want_sum > 1e-30 && fabs(sum - want_sum) > 1e-5 * want_sum;
            }
        }
        printf("  exp_sum: worst relative error %.3g (%s)\n", worst, K->name);
        CHECK(bad == 0, "%s: exp_sum off expf in %d cases", K->name, bad);
        free(x), free(y);
    }
}

/* the fused attention against the two-pass reference, f32 and f16 caches (K and V alike and mixed),
 * head dims 256 and 512, GQA groups, windows that wrap the ring */
static void check_attention(const eli_kernels *K) {
    const uint32_t types[][2] = {{ELI_TYPE_F32, ELI_TYPE_F32}, {ELI_TYPE_F16, ELI_TYPE_F16},
                                 {ELI_TYPE_F32, ELI_TYPE_F16}, {ELI_TYPE_F16, ELI_TYPE_F32}};
    const int dims[] = {64, 256, 512};
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        for (size_t di = 0; di < 3; di++) {
            const uint32_t tk = types[ti][0], tv = types[ti][1];
            const int d = dims[di], G = 4;
            const int64_t n_cells = 300;
            const size_t kb = eli_row_size(tk, d), vb = eli_row_size(tv, d);
            uint8_t *kc = malloc(kb * (size_t)n_cells), *vc = malloc(vb * (size_t)n_cells);
            float *tmp = malloc(sizeof(float) * (size_t)d);
            for (int64_t c = 0; c < n_cells; c++) {
                fill(tmp, d, 0);
                for (int i = 0; i < d; i++) tmp[i] *= 0.3f;
                eli_quantize_row(tk, tmp, kc + (size_t)c * kb, d);
                fill(tmp, d, 0);
                eli_quantize_row(tv, tmp, vc + (size_t)c * vb, d);
            }
            const eli_kv_view view = {kc, vc, tk, tv, kb, vb, n_cells, NULL, NULL};
            float *q = malloc(sizeof(float) * (size_t)(G * d)), *ref = malloc(sizeof(float) * (size_t)(G * d));
            float *got = malloc(sizeof(float) * (size_t)(G * d));
            float *scores = malloc(sizeof(float) * 1024), *t2 = malloc(sizeof(float) * (size_t)(2 * d + 64));
            float *work = malloc(eli_attend_flash_work_size(G, d));
            double e2 = 0, r2 = 0;
            const int32_t ranges[][2] = {{0, 0}, {0, 7}, {3, 40}, {0, 299}, {250, 520}, {100, 163}};
            for (size_t ri = 0; ri < sizeof ranges / sizeof ranges[0]; ri++) {
                fill(q, (int64_t)G * d, 0);
                for (int g = 0; g < G; g++)
                    eli_attend(eli_kernels_reference(), q + g * d, d, &view, ranges[ri][0], ranges[ri][1], scores, t2,
                               ref + g * d);
                eli_attend_flash(K, q, G, d, &view, ranges[ri][0], ranges[ri][1], work, got);
                for (int i = 0; i < G * d; i++)
                    e2 += ((double)ref[i] - got[i]) * ((double)ref[i] - got[i]), r2 += (double)ref[i] * ref[i];
            }
            printf("  flash attention K %s V %s d=%d (%s): normalised MSE %.3g\n", eli_type_name(tk), eli_type_name(tv), d,
                   K->name, e2 / r2);
            CHECK(e2 / r2 <= (tk == ELI_TYPE_F32 && tv == ELI_TYPE_F32 ? 1e-10 : 1e-6), "flash attention %s/%s d=%d NMSE %.3g",
                  eli_type_name(tk), eli_type_name(tv), d, e2 / r2);
            free(kc), free(vc), free(tmp), free(q), free(ref), free(got), free(scores), free(t2), free(work);
        }
    }
}

int main(void) {
    const eli_kernels *R = eli_kernels_reference();
    CHECK(R && R->vec_dot[ELI_TYPE_Q4_K], "reference table");
    /* every table this CPU runs (reference, avx2, neon, neon-dotprod); the reference table against
     * itself exercises the harness and the nr fallback */
    const eli_kernels *all[8];
    const int n_all = eli_kernels_all(all, 8);
    CHECK(n_all >= 1 && all[0] == R, "eli_kernels_all lists the reference first");
    for (int i = 0; i < n_all; i++) check_table(all[i], R);
    if (n_all == 1) printf("no SIMD table for this CPU: only the reference table is checked\n");
    printf("best table: %s\n", eli_kernels_best()->name);
    for (int i = 0; i < n_all; i++) check_attention(all[i]);
    TEST_MAIN_END();
}
