/* The tq4_0 weight type and its Q8_TQ activation (quants.h, tquant.h):
 *  - bytes and decoded values against an independent numpy implementation (tools/kvquant_ref.py ->
 *    tests/data/tq4_ref.bin);
 *  - reconstruction error against Q4_K on gaussian rows (the rotation cannot help there: the codebook and
 *    the per-16 multipliers must) and on rows with outlier columns (where the rotation spreads them);
 *  - the dot product against the one of the dequantized vectors (the rotation is orthogonal);
 *  - every SIMD table's Q8_TQ quantizer, vec_dot and gemm tiles against the reference, bit for bit;
 *  - the goal of the format on the golden e2b-mini master: `eliza-infer quantize ... tq4_0` gives a file no
 *    larger than llama-quantize's Q4_K_M with a mean KLD against the F32 model's logits no larger than that
 *    Q4_K_M file's (both run by this engine, f32 KV cache). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "forward.h"
#include "kernels.h"
#include "quantize.h"
#include "quants.h"
#include "test.h"

static uint64_t rng = 0x13198a2e03707344ULL;
static uint32_t rnd32(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng >> 32);
}
static float uniform(void) { return ((float)rnd32() + 0.5f) * (1.0f / 4294967296.0f); }
static float gauss(void) { return sqrtf(-2.0f * logf(uniform())) * cosf(6.2831853f * uniform()); }

static void check_reference_file(void) {
    FILE *f = fopen(ELI_SOURCE_DIR "/tests/data/tq4_ref.bin", "rb");
    CHECK(f != NULL, "tests/data/tq4_ref.bin");
    if (!f) return;
    char magic[8];
    uint32_t rows = 0, cols = 0;
    CHECK(fread(magic, 1, 8, f) == 8 && !memcmp(magic, "TQ4REF01", 8) && fread(&rows, 4, 1, f) == 1 &&
              fread(&cols, 4, 1, f) == 1 && rows == 2 && cols == 512,
          "header");
    if (rows != 2 || cols != 512) {
        fclose(f);
        return;
    }
    float w[2 * 512], dec[512], got[512], a[512];
    uint8_t want[272], q[272], aq[520], aw[520];
    CHECK(fread(w, 4, 2 * 512, f) == 2 * 512, "weights");
    for (int r = 0; r < 2; r++) {
        CHECK(fread(want, 1, 272, f) == 272 && fread(dec, 4, 512, f) == 512, "row %d", r);
        eli_quantize_row(ELI_TYPE_TQ4_0, w + 512 * r, q, 512);
        CHECK(!memcmp(q, want, 272), "row %d: tq4_0 bytes", r);
        eli_dequantize_row(ELI_TYPE_TQ4_0, q, got, 512);
        CHECK(!memcmp(got, dec, sizeof got), "row %d: decoded values", r);
    }
    CHECK(fread(a, 4, 512, f) == 512 && fread(aw, 1, 520, f) == 520 && fgetc(f) == EOF, "activation");
    eli_quantize_row(ELI_TYPE_Q8_TQ, a, aq, 512);
    CHECK(!memcmp(aq, aw, 520), "Q8_TQ bytes");
    fclose(f);
}

/* relative MSE of a type's round trip over rows */
static double round_trip(uint32_t type, const float *x, int rows, int n) {
    uint8_t *q = malloc(eli_row_size(type, n));
    float *y = malloc(sizeof(float) * (size_t)n);
    double e = 0, s = 0;
    for (int r = 0; r < rows; r++) {
        eli_quantize_row(type, x + (size_t)r * n, q, n);
        eli_dequantize_row(type, q, y, n);
        for (int i = 0; i < n; i++) e += (double)(x[(size_t)r * n + i] - y[i]) * (x[(size_t)r * n + i] - y[i]), s += (double)x[(size_t)r * n + i] * x[(size_t)r * n + i];
    }
    free(q), free(y);
    return e / s;
}

static void check_error(void) {
    const int rows = 64, n = 1024;
    float *x = malloc(sizeof(float) * rows * n);
    for (int i = 0; i < rows * n; i++) x[i] = gauss() * 0.02f;
    const double t_g = round_trip(ELI_TYPE_TQ4_0, x, rows, n), k_g = round_trip(ELI_TYPE_Q4_K, x, rows, n);
    /* a few columns 8x larger (the outlier channels of real models) */
    for (int r = 0; r < rows; r++)
        for (int i = 0; i < n; i += 37) x[(size_t)r * n + i] *= 8.0f;
    const double t_o = round_trip(ELI_TYPE_TQ4_0, x, rows, n), k_o = round_trip(ELI_TYPE_Q4_K, x, rows, n);
    printf("relative MSE, gaussian rows: tq4_0 %.5f (4.25 bits), q4_K %.5f (4.5 bits); with outlier columns: tq4_0 "
           "%.5f, q4_K %.5f\n",
           t_g, k_g, t_o, k_o);
    CHECK(t_g < 1.03 * k_g && t_g > 0.0045, "gaussian: tq4_0 %.5f vs q4_K %.5f", t_g, k_g);
    CHECK(t_o < 0.8 * k_o, "outlier columns: tq4_0 %.5f vs q4_K %.5f", t_o, k_o);
    /* a zero row decodes to zeros; a non-finite one does not crash */
    float z[256] = {0}, back[256];
    uint8_t q[136];
    eli_quantize_row(ELI_TYPE_TQ4_0, z, q, 256);
    eli_dequantize_row(ELI_TYPE_TQ4_0, q, back, 256);
    int zero = 1;
    for (int i = 0; i < 256; i++) zero &= back[i] == 0.0f;
    CHECK(zero, "zero row");
    z[5] = NAN, z[7] = INFINITY;
    eli_quantize_row(ELI_TYPE_TQ4_0, z, q, 256);
    free(x);
}

static void check_dot(void) {
    const int n = 1536;
    float *w = malloc(sizeof(float) * n), *a = malloc(sizeof(float) * n), *wd = malloc(sizeof(float) * n),
          *ad = malloc(sizeof(float) * n);
    uint8_t *qw = malloc(eli_row_size(ELI_TYPE_TQ4_0, n)), *qa = malloc(eli_row_size(ELI_TYPE_Q8_TQ, n));
    double worst = 0;
    for (int r = 0; r < 20; r++) {
        for (int i = 0; i < n; i++) w[i] = gauss(), a[i] = gauss() * (i % 50 == 0 ? 10.0f : 1.0f);
        eli_quantize_row(ELI_TYPE_TQ4_0, w, qw, n);
        eli_quantize_row(ELI_TYPE_Q8_TQ, a, qa, n);
        eli_dequantize_row(ELI_TYPE_TQ4_0, qw, wd, n);
        eli_dequantize_row(ELI_TYPE_Q8_TQ, qa, ad, n);
        double want = 0, ww = 0, aa = 0;
        for (int i = 0; i < n; i++) want += (double)wd[i] * ad[i], ww += (double)wd[i] * wd[i], aa += (double)ad[i] * ad[i];
        const double e = fabs(eli_vec_dot(ELI_TYPE_TQ4_0, n, qw, qa) - want) / sqrt(ww * aa);
        worst = e > worst ? e : worst;
    }
    CHECK(worst < 1e-6, "vec_dot vs the dot of the dequantized rows: worst %.2e of |w||a|", worst);
    free(w), free(a), free(wd), free(ad), free(qw), free(qa);
}

static void check_simd(void) {
    const eli_kernels *tabs[8];
    const int nt = eli_kernels_all(tabs, 8);
    const eli_kernels *R = eli_kernels_reference();
    const int64_t lens[] = {256, 512, 1536, 2816};
    for (int ti = 1; ti < nt; ti++) {
        const eli_kernels *K = tabs[ti];
        int bad_q = 0, bad_d = 0, bad_g = 0;
        for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
            const int64_t n = lens[li];
            const int rows = 9, toks = ELI_KERNEL_MAX_NT + 3;
            const size_t bx = eli_row_size(ELI_TYPE_TQ4_0, n), by = eli_row_size(ELI_TYPE_Q8_TQ, n);
            float *x = malloc(sizeof(float) * (size_t)n);
            uint8_t *w = malloc(bx * rows), *a = malloc(by * toks), *a2 = malloc(by);
            for (int r = 0; r < rows; r++) {
                for (int64_t i = 0; i < n; i++) x[i] = gauss() * (r % 3 == 2 ? 1e-3f : 1.0f);
                eli_quantize_row(ELI_TYPE_TQ4_0, x, w + (size_t)r * bx, n);
            }
            for (int t = 0; t < toks; t++) {
                for (int64_t i = 0; i < n; i++) x[i] = t % 4 == 3 ? 0.0f : gauss() * (i % 97 == 0 ? 30.0f : 1.0f);
                R->quantize[ELI_TYPE_Q8_TQ](x, a + (size_t)t * by, n);
                K->quantize[ELI_TYPE_Q8_TQ](x, a2, n);
                bad_q += memcmp(a2, a + (size_t)t * by, by) != 0;
            }
            for (int r = 0; r < rows; r++)
                for (int t = 0; t < toks; t++) {
                    const float u = R->vec_dot[ELI_TYPE_TQ4_0](n, w + (size_t)r * bx, a + (size_t)t * by);
                    const float v = K->vec_dot[ELI_TYPE_TQ4_0](n, w + (size_t)r * bx, a + (size_t)t * by);
                    bad_d += memcmp(&u, &v, sizeof u) != 0;
                }
            if (K->gemm[ELI_TYPE_TQ4_0]) {
                float s[ELI_KERNEL_MAX_NT * 16];
                for (int nr = 1; nr <= rows && nr <= K->gemm_nr[ELI_TYPE_TQ4_0]; nr++)
                    for (int ntk = 1; ntk <= ELI_KERNEL_MAX_NT; ntk++) {
                        K->gemm[ELI_TYPE_TQ4_0](n, nr, ntk, w, bx, a + by, by, s, 16);
                        for (int r = 0; r < nr; r++)
                            for (int t = 0; t < ntk; t++) {
                                const float u = R->vec_dot[ELI_TYPE_TQ4_0](n, w + (size_t)r * bx, a + (size_t)(t + 1) * by);
                                bad_g += memcmp(&u, &s[t * 16 + r], sizeof u) != 0;
                            }
                    }
            }
            free(x), free(w), free(a), free(a2);
        }
        CHECK(bad_q == 0 && bad_d == 0 && bad_g == 0, "%s: %d Q8_TQ rows, %d dots, %d gemm results differ", K->name, bad_q,
              bad_d, bad_g);
    }
}

/* mean KLD(ref || model's logits) over the 96 golden positions, f32 KV cache; -1 on error */
static double kld_of(const char *model_path, const float *ref, const int32_t *ids) {
    eli_error err = {0};
    eli_model *m = eli_model_load(model_path, &err);
    CHECK(m != NULL, "%s: %s", model_path, err.msg);
    if (!m) return -1;
    eli_context_params cp = eli_context_default_params();
    cp.kv_type_k = cp.kv_type_v = ELI_TYPE_F32;
    cp.n_ctx = 128;
    cp.n_threads = 1; /* no worker threads: the test also runs under qemu-user (tests/cross) */
    eli_context *c = eli_context_create(m, &cp, &err);
    const int64_t nv = m->hp.n_vocab;
    float *lg = malloc(sizeof(float) * 96 * (size_t)nv);
    double kld = -1;
    if (c && lg && eli_decode(c, ids, 96, lg, 1, &err) == ELI_OK) {
        kld = 0;
        for (int p = 0; p < 96; p++) {
            const float *a = ref + (size_t)p * nv, *b = lg + (size_t)p * nv;
            double ma = -INFINITY, mb = -INFINITY, za = 0, zb = 0, k = 0;
            for (int64_t i = 0; i < nv; i++) ma = a[i] > ma ? a[i] : ma, mb = b[i] > mb ? b[i] : mb;
            for (int64_t i = 0; i < nv; i++) za += exp(a[i] - ma), zb += exp(b[i] - mb);
            for (int64_t i = 0; i < nv; i++) {
                const double la = a[i] - ma - log(za), lb = b[i] - mb - log(zb);
                k += exp(la) * (la - lb);
            }
            kld += k / 96;
        }
    }
    CHECK(kld >= 0, "%s: decode: %s", model_path, err.msg);
    free(lg);
    eli_context_free(c);
    eli_model_free(m);
    return kld;
}

static void check_golden_goal(void) {
    char out[256];
    snprintf(out, sizeof out, "/tmp/eli_test_tq4.%d.gguf", (int)getpid());
    eli_error err = {0};
    CHECK(eli_quantize_file(eli_shared_path("golden/models/e2b-mini-f32.gguf"), out, eli_qftype_find("tq4_0"), 2, NULL,
                            &err) == 0,
          "quantize: %s", err.msg);
    int32_t ids[96];
    float *ref = malloc(sizeof(float) * 96 * 1024);
    FILE *f = fopen(eli_shared_path("golden/models/e2b-mini-f32.logits.f32"), "rb");
    const int ok = read_ids(eli_shared_path("golden/models/e2b-mini.tokens.txt"), ids, 96) == 96 && f &&
                   fread(ref, sizeof(float), 96 * 1024, f) == 96 * 1024;
    if (f) fclose(f);
    CHECK(ok, "golden tokens and logits");
    struct stat st_t, st_k;
    const char *q4km = eli_shared_path("golden/models/e2b-mini-q4_k_m.gguf");
    if (ok && stat(out, &st_t) == 0 && stat(q4km, &st_k) == 0) {
        const double kt = kld_of(out, ref, ids), kk = kld_of(q4km, ref, ids);
        printf("e2b-mini vs its F32 logits: tq4_0 file %lld bytes, mean KLD %.4e; Q4_K_M (llama-quantize) %lld bytes, "
               "mean KLD %.4e\n",
               (long long)st_t.st_size, kt, (long long)st_k.st_size, kk);
        CHECK(st_t.st_size <= st_k.st_size, "tq4_0 file larger than Q4_K_M's");
        CHECK(kt >= 0 && kt <= kk, "tq4_0 KLD %.4e above Q4_K_M's %.4e", kt, kk);
    }
    unlink(out);
    free(ref);
}

int main(void) {
    check_reference_file();
    check_error();
    check_dot();
    check_simd();
    check_golden_goal();
    TEST_MAIN_END();
}
