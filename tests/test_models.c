/* Logits of the engine vs llama.cpp's on the golden models (../shared/golden/models, see its README):
 * the whole 96-token sequence as one batch with an f32 KV cache. F32 files: argmax equal at every
 * position and mean KLD <= 1e-5; quantized files: mean KLD <= 1e-3 and argmax agreement >= 98%.
 * Also: batch vs one token at a time, thread-count invariance, f16 KV, and the 16 greedy ids. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "forward.h"
#include "ops.h"
#include "quants.h"
#include "kernels.h"
#include "test.h"
#include "test_exec.h"

#define N_TOK 96

static float *read_f32(const char *path, size_t n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    float *d = malloc(n * sizeof *d);
    size_t got = d ? fread(d, sizeof *d, n, f) : 0;
    fclose(f);
    if (got != n) {
        free(d);
        return NULL;
    }
    return d;
}

typedef struct {
    double mean_kld, max_kld, argmax_agree, max_abs;
} cmp_stats;

/* KLD(ref || ours) per row in float64, as the golden README defines it. */
static cmp_stats compare(const float *ref, const float *ours, int rows, int n_vocab) {
    cmp_stats s = {0, 0, 0, 0};
    for (int r = 0; r < rows; r++) {
        const float *a = ref + (size_t)r * n_vocab, *b = ours + (size_t)r * n_vocab;
        double ma = -INFINITY, mb = -INFINITY;
        int ia = 0, ib = 0;
        for (int j = 0; j < n_vocab; j++) {
            if (a[j] > ma) ma = a[j], ia = j;
            if (b[j] > mb) mb = b[j], ib = j;
            double d = fabs((double)a[j] - b[j]);
            if (d > s.max_abs) s.max_abs = d;
        }
        double sa = 0, sb = 0;
        for (int j = 0; j < n_vocab; j++) sa += exp(a[j] - ma), sb += exp(b[j] - mb);
        double la = log(sa) + ma, lb = log(sb) + mb, kld = 0;
        for (int j = 0; j < n_vocab; j++) {
            double pa = a[j] - la, pb = b[j] - lb;
            kld += exp(pa) * (pa - pb);
        }
        s.mean_kld += kld / rows;
        if (kld > s.max_kld) s.max_kld = kld;
        s.argmax_agree += ia == ib;
    }
    s.argmax_agree /= rows;
    return s;
}

static float *run_kv(const eli_model *m, const int32_t *ids, int n, uint32_t kv_k, uint32_t kv_v, int threads, int step,
                     int reference) {
    eli_context_params p = eli_context_default_params();
    p.kernels = reference ? eli_kernels_reference() : NULL;
    p.n_ctx = 128;
    p.kv_type_k = kv_k;
    p.kv_type_v = kv_v;
    p.n_threads = threads;
    eli_error err = {0};
    eli_context *c = eli_context_create(m, &p, &err);
    if (!c) {
        fprintf(stderr, "context: %s\n", err.msg);
        return NULL;
    }
    float *logits = malloc(sizeof(float) * (size_t)n * m->hp.n_vocab);
    int rc = 0;
    if (step)
        for (int i = 0; i < n && !rc; i++) rc = eli_decode(c, ids + i, 1, logits + (size_t)i * m->hp.n_vocab, 0, &err);
    else
        rc = eli_decode(c, ids, n, logits, 1, &err);
    if (rc) {
        fprintf(stderr, "decode: %s\n", err.msg);
        free(logits);
        logits = NULL;
    }
    eli_context_free(c);
    return logits;
}

static float *run_k(const eli_model *m, const int32_t *ids, int n, uint32_t kv, int threads, int step, int reference) {
    return run_kv(m, ids, n, kv, kv, threads, step, reference);
}

static float *run(const eli_model *m, const int32_t *ids, int n, uint32_t kv, int threads, int step) {
    return run_k(m, ids, n, kv, threads, step, 0);
}

/* K and V cache types chosen independently (the hosts pass f16 K with q8_0 V, q8_0 K with a 4-bit V):
 * every pair against llama.cpp's f32-KV logits, batch and one token at a time, on both attention paths
 * (the fused one needs f32/f16 on both sides). Each bound is about 3x what this build measured (6e-8,
 * 1.2e-7, 1.2e-5, 3.9e-5, 3.1e-3, 5.0e-3 in the order of the table). */
static void check_kv_pairs(void) {
    eli_error err = {0};
    test_model t;
    CHECK(!test_model_load(eli_shared_path("golden/models/e2b-mini-f32.gguf"), 0, NULL, &t, &err), "%s", err.msg);
    const eli_model *m = t.m;
    if (!m) return;
    int32_t ids[N_TOK];
    CHECK(read_ids(eli_shared_path("golden/models/e2b-mini.tokens.txt"), ids, N_TOK) == N_TOK, "tokens");
    const int V = m->hp.n_vocab;
    float *want = read_f32(eli_shared_path("golden/models/e2b-mini-f32.logits.f32"), (size_t)N_TOK * V);
    static const struct {
        uint32_t k, v;
        double bound;
    } pairs[] = {{ELI_TYPE_F32, ELI_TYPE_F16, 2e-7},  {ELI_TYPE_F16, ELI_TYPE_F32, 4e-7},
                 {ELI_TYPE_F16, ELI_TYPE_Q8_0, 4e-5}, {ELI_TYPE_Q8_0, ELI_TYPE_F16, 1.2e-4},
                 {ELI_TYPE_Q8_0, ELI_TYPE_Q4_0, 1e-2}, {ELI_TYPE_Q4_0, ELI_TYPE_Q8_0, 1.5e-2}};
    for (size_t i = 0; want && i < sizeof pairs / sizeof pairs[0]; i++) {
        float *got = run_kv(m, ids, N_TOK, pairs[i].k, pairs[i].v, 2, 0, 0);
        float *step = run_kv(m, ids, N_TOK, pairs[i].k, pairs[i].v, 1, 1, 0);
        CHECK(got && step, "K %s V %s: forward failed", eli_type_name(pairs[i].k), eli_type_name(pairs[i].v));
        if (got && step) {
            cmp_stats s = compare(want, got, N_TOK, V), d = compare(got, step, N_TOK, V);
            printf("K %-4s V %-4s: mean KLD %.3g  argmax %.1f%%  batch vs step KLD %.3g\n", eli_type_name(pairs[i].k),
                   eli_type_name(pairs[i].v), s.mean_kld, 100 * s.argmax_agree, d.mean_kld);
            CHECK(s.mean_kld <= pairs[i].bound && s.argmax_agree >= 0.95, "K %s V %s: KLD %.3g (bound %.3g) argmax %.3f",
                  eli_type_name(pairs[i].k), eli_type_name(pairs[i].v), s.mean_kld, pairs[i].bound, s.argmax_agree);
            CHECK(d.mean_kld <= 1e-5, "K %s V %s: batch vs step KLD %.3g", eli_type_name(pairs[i].k),
                  eli_type_name(pairs[i].v), d.mean_kld);
        }
        free(got), free(step);
    }
    free(want);
    test_model_free(&t);
}

static int argmax(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

/* 16 greedy tokens after the sequence, one at a time, as the golden greedy files were made. */
static void check_greedy(const eli_model *m, const int32_t *ids, const char *greedy_path, const char *name) {
    int32_t want[16];
    int nw = read_ids(greedy_path, want, 16);
    CHECK(nw == 16, "%s: cannot read %s", name, greedy_path);
    if (nw != 16) return;
    eli_context_params p = eli_context_default_params();
    p.n_ctx = 128;
    p.kv_type_k = p.kv_type_v = ELI_TYPE_F32;
    eli_error err = {0};
    eli_context *c = eli_context_create(m, &p, &err);
    float *logits = malloc(sizeof(float) * (size_t)m->hp.n_vocab);
    int rc = eli_decode(c, ids, N_TOK, logits, 0, &err);
    int same = 0;
    for (int i = 0; i < 16 && !rc; i++) {
        int32_t t = argmax(logits, m->hp.n_vocab);
        same += t == want[i];
        rc = eli_decode(c, &t, 1, logits, 0, &err);
    }
    CHECK(!rc && same == 16, "%s: greedy continuation matches %d/16 (%s)", name, same, err.msg);
    free(logits);
    eli_context_free(c);
}

static void check_model(const char *model, const char *base, int is_f32) {
    char path[256], tok[256], ref[256], greedy[256];
    snprintf(path, sizeof path, "golden/models/%s.gguf", model);
    snprintf(tok, sizeof tok, "golden/models/%s.tokens.txt", base);
    snprintf(ref, sizeof ref, "golden/models/%s.logits.f32", model);
    snprintf(greedy, sizeof greedy, "golden/models/%s.greedy.txt", model);
    eli_error err = {0};
    test_model t; /* packed where the kernels have packed layouts, as streams run it */
    CHECK(!test_model_load(eli_shared_path(path), 0, NULL, &t, &err), "%s: %s", model, err.msg);
    const eli_model *m = t.m;
    if (!m) return;
    int32_t ids[N_TOK];
    CHECK(read_ids(eli_shared_path(tok), ids, N_TOK) == N_TOK, "%s: cannot read tokens", model);
    const int V = m->hp.n_vocab;
    float *want = read_f32(eli_shared_path(ref), (size_t)N_TOK * V);
    CHECK(want != NULL, "%s: cannot read reference logits", model);
    float *got = run(m, ids, N_TOK, ELI_TYPE_F32, 2, 0);
    CHECK(got != NULL, "%s: forward failed", model);
    if (want && got) {
        cmp_stats s = compare(want, got, N_TOK, V);
        printf("%-20s batch f32 KV: mean KLD %.3g  max KLD %.3g  argmax %.1f%%  max|diff| %.3g\n", model, s.mean_kld,
               s.max_kld, 100 * s.argmax_agree, s.max_abs);
        if (is_f32) {
            CHECK(s.argmax_agree >= 1.0 && s.mean_kld <= 1e-5, "%s: KLD %.3g argmax %.3f", model, s.mean_kld,
                  s.argmax_agree);
        } else {
            CHECK(s.argmax_agree >= 0.98 && s.mean_kld <= 1e-3, "%s: KLD %.3g argmax %.3f", model, s.mean_kld,
                  s.argmax_agree);
        }
        /* one token at a time must agree with the batch */
        float *step = run(m, ids, N_TOK, ELI_TYPE_F32, 2, 1);
        if (step) {
            cmp_stats d = compare(got, step, N_TOK, V);
            printf("%-20s batch vs step: max|diff| %.3g  mean KLD %.3g\n", model, d.max_abs, d.mean_kld);
            if (is_f32) CHECK(d.max_abs <= 1e-4, "%s: batch vs step max|diff| %.3g", model, d.max_abs);
            else CHECK(d.mean_kld <= 1e-6, "%s: batch vs step KLD %.3g", model, d.mean_kld);
        }
        free(step);
        /* the thread count must not change a single bit */
        float *one = run(m, ids, N_TOK, ELI_TYPE_F32, 1, 0);
        CHECK(one && !memcmp(one, got, sizeof(float) * (size_t)N_TOK * V), "%s: 1 thread differs from 2", model);
        free(one);
        /* an f16 cache moves the logits by about llama.cpp's own f16-vs-f32 noise floor */
        float *h = run(m, ids, N_TOK, ELI_TYPE_F16, 2, 0);
        if (h) {
            cmp_stats s16 = compare(want, h, N_TOK, V);
            printf("%-20s batch f16 KV: mean KLD %.3g  argmax %.1f%%\n", model, s16.mean_kld, 100 * s16.argmax_agree);
            CHECK(s16.mean_kld <= (is_f32 ? 1e-5 : 1e-3), "%s: f16 KV KLD %.3g", model, s16.mean_kld);
        }
        free(h);
    }
    check_greedy(m, ids, eli_shared_path(greedy), model);
    free(want);
    free(got);
    test_model_free(&t);
}

/* Q4_0, Q4_K and F16 matrices are packed when the CPU executor prepares a model, for the best kernel table
 * when it has packed kernels for them (pack.h), so check_model above measured the packed path; here the
 * row-major one (a model no executor prepared, as with ELIZA_LLM_REPACK=0) and the reference table's scalar
 * packed kernels are held to the golden logits too, and a packed row reads back as the row-major one. */
#define N_LAYER0 7
static const eli_weight *layer0(const eli_model *m, int i) {
    const eli_layer *l = &m->layers[0];
    const eli_weight *w[N_LAYER0] = {&l->wq, &l->wk, &l->wo, &l->ffn_gate, &l->ffn_up, &l->ffn_down, &m->token_embd};
    return w[i];
}

static void check_packing(const char *model) {
    char path[256], ref_path[256];
    snprintf(path, sizeof path, "golden/models/%s.gguf", model);
    snprintf(ref_path, sizeof ref_path, "golden/models/%s.logits.f32", model);
    int32_t ids[N_TOK];
    CHECK(read_ids(eli_shared_path("golden/models/e2b-mini.tokens.txt"), ids, N_TOK) == N_TOK, "cannot read tokens");
    eli_error err = {0};
    test_model t;
    CHECK(!test_model_load(eli_shared_path(path), 0, NULL, &t, &err), "%s", err.msg);
    const eli_model *m = t.m;
    if (!m) return;
    const int V = m->hp.n_vocab;
    float *want = read_f32(eli_shared_path(ref_path), (size_t)N_TOK * V);
    const eli_kernels *best = eli_kernels_best();
    int n_packed = 0, wrong = 0, pi = -1; /* pi: a packed matrix */
    for (int i = 0; i < N_LAYER0; i++) {
        const eli_weight *w = layer0(m, i);
        const int want_packed = best->packed_gemv[w->type] != NULL && w->rows % 16 == 0;
        n_packed += w->packed != NULL;
        wrong += (w->packed != NULL) != want_packed;
        if (w->packed) pi = i;
    }
    CHECK(wrong == 0 && (n_packed > 0 || !best->packed_gemv[ELI_TYPE_Q4_0]),
          "%s: %d matrices of layer 0 packed against the %s table's packed kernels (%d packed)", model, wrong, best->name,
          n_packed);
    float *ref = run_k(m, ids, N_TOK, ELI_TYPE_F32, 2, 0, 1);
    /* a model no executor prepared computes where the file maps it (ELIZA_LLM_REPACK=0 does the same) */
    eli_model *rm = eli_model_load(eli_shared_path(path), &err);
    CHECK(rm && !rm->layers[0].wq.packed && !rm->layers[0].ffn_down.packed, "an unprepared model is packed (%s)", err.msg);
    float *rowmajor = rm ? run(rm, ids, N_TOK, ELI_TYPE_F32, 2, 0) : NULL;
    /* a row of a packed matrix (what an embedding lookup reads) equals the row-major one */
    if (rm && pi >= 0) {
        const eli_weight *pw = layer0(m, pi), *rw = layer0(rm, pi);
        float *a = malloc(sizeof(float) * (size_t)pw->cols), *b = malloc(sizeof(float) * (size_t)pw->cols);
        int same = 0;
        for (int64_t r = 0; r < pw->rows; r++) {
            eli_weight_row(pw, 0, r, a);
            eli_weight_row(rw, 0, r, b);
            same += !memcmp(a, b, sizeof(float) * (size_t)pw->cols);
        }
        CHECK(same == pw->rows, "%s packed rows: %d of %lld equal the row-major ones", model, same, (long long)pw->rows);
        free(a), free(b);
    }
    const char *names[] = {"reference kernels", "row-major (not repacked)"};
    float *logits[] = {ref, rowmajor};
    for (int i = 0; i < 2; i++) {
        CHECK(want && logits[i], "%s %s: no logits", model, names[i]);
        if (!want || !logits[i]) continue;
        cmp_stats s = compare(want, logits[i], N_TOK, V);
        printf("%-20s %s: mean KLD %.3g  argmax %.1f%%\n", model, names[i], s.mean_kld, 100 * s.argmax_agree);
        CHECK(s.argmax_agree >= 0.98 && s.mean_kld <= 1e-3, "%s %s: KLD %.3g", model, names[i], s.mean_kld);
    }
    free(want), free(ref), free(rowmajor);
    eli_model_free(rm);
    test_model_free(&t);
}

int main(void) {
    check_kv_pairs();
    check_packing("e2b-mini-q4_0");
    check_packing("e2b-mini-q4_k_m");
    check_packing("e2b-mini-f16");
    check_model("e2b-mini-f32", "e2b-mini", 1);
    check_model("e2b-mini-f16", "e2b-mini", 0);
    check_model("e2b-mini-q8_0", "e2b-mini", 0);
    check_model("e2b-mini-q6_k", "e2b-mini", 0);
    check_model("e2b-mini-q4_k_m", "e2b-mini", 0);
    check_model("e2b-mini-q4_0", "e2b-mini", 0);
    check_model("dense-kv-mini-f32", "dense-kv-mini", 1);
    check_model("moe-mini-f32", "moe-mini", 1);

    /* bad token ids and overflow are errors, not crashes */
    eli_error err = {0};
    eli_model *m = eli_model_load(eli_shared_path("golden/models/e2b-mini-f32.gguf"), &err);
    CHECK(m != NULL, "%s", err.msg);
    if (m) {
        eli_context_params p = eli_context_default_params();
        p.n_ctx = 8;
        eli_context *c = eli_context_create(m, &p, &err);
        int32_t bad[2] = {5, 1024};
        CHECK(eli_decode(c, bad, 2, NULL, 0, &err) == ELI_ERR_INVALID_ARG && strstr(err.msg, "1024"),
              "out-of-range id: %s", err.msg);
        CHECK(eli_context_n_past(c) == 0, "a rejected batch must not advance");
        int32_t neg = -3;
        CHECK(eli_decode(c, &neg, 1, NULL, 0, &err) == ELI_ERR_INVALID_ARG && strstr(err.msg, "-3"), "negative id");
        int32_t many[9] = {2, 5, 6, 7, 8, 9, 10, 11, 12};
        CHECK(eli_decode(c, many, 9, NULL, 0, &err) == ELI_ERR_INVALID_ARG && strstr(err.msg, "overflow"),
              "overflow: %s", err.msg);
        CHECK(eli_decode(c, many, 8, NULL, 0, &err) == ELI_OK, "8 tokens fit: %s", err.msg);
        eli_context_free(c);
        eli_model_free(m);
    }
    TEST_MAIN_END();
}
