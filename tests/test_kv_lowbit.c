/* The low-bit KV cache types (kvquant.h: tbq4_0, tbq3_0, q4_polar, qjl1_256 for K only) in the CPU cache
 * and attention:
 *  - names, row bytes and the errors (qjl1_256 as V, head dims that are not a power of two in 32..512);
 *  - attention straight from the codes (eli_attend, eli_attend_flash; every kernel table) equals attention
 *    in double precision over the DEQUANTIZED rows (eli_kvq_dequantize) with the query as the kernels see it
 *    (tbq rounds the rotated query to int8: that rounding is part of the format, so the reference applies
 *    it too), within float rounding, on ring windows that wrap, at head dims 64, 256 and 512;
 *  - the golden minis (96 tokens, and a 1504-token text far past the sliding window) against llama.cpp's
 *    f32-KV logits: finite, mean KLD within the bounds below, one token at a time == one batch, the
 *    reference kernels (eli_attend) == the fused path;
 *  - slot state save / load and truncate + checkpoint resume bit-exact, the MTP drafter over a low-bit cache;
 *  - decode at depth, where the rows of each window are split between threads (forward.c, attend_split): 1, 2
 *    and 3 threads give the same bits, on plain and low-bit caches.
 * The KLD bounds are about twice what this build measured (BENCHMARKS.md, "Low-bit KV cache (issue 20)", has
 * every pair): on the minis' head dims (64 and 128) tbq has no per-16 multipliers, so tbq4_0 sits at q4_0's
 * level and tbq3_0 above it; no ordering between the types is asserted. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drafter.h"
#include "forward.h"
#include "kernels.h"
#include "kv_cache.h"
#include "kv_types.h"
#include "kvquant.h"
#include "ops.h"
#include "quants.h"
#include "test.h"
#include "test_exec.h"
#include "test_kld.h"

#define N_TOK 96
#define N_LONG 1504 /* the committed text; the test runs its first N_LONG_RUN tokens (48 sliding windows) */
#define N_LONG_RUN 768
#define LONG_STRIDE 64 /* the committed long-text rows: positions 63, 127, .. (tests/data/kv_lowbit/README.md) */

static uint64_t rng = 0x243F6A8885A308D3ull;
static float gauss(void) {
    double u = 0;
    for (int i = 0; i < 12; i++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        u += (double)(rng >> 11) / 9007199254740992.0;
    }
    return (float)(u - 6.0);
}

static uint32_t type_of(const char *name) {
    uint32_t t = 0;
    CHECK(!eli_kv_type_from_name(name, &t), "type %s", name);
    return t;
}

/* ---- names, sizes, errors ---- */

static void test_names_and_errors(void) {
    static const char *names[] = {"tbq4_0", "tbq3_0", "q4_polar", "qjl1_256"};
    for (int i = 0; i < 4; i++) {
        const uint32_t t = type_of(names[i]);
        CHECK(eli_kvq_is_type(t) && !strcmp(eli_kv_type_name(t), names[i]) && strstr(eli_kv_type_names(), names[i]),
              "%s: a known cache type, listed", names[i]);
        for (int d = 256; d <= 512; d *= 2) {
            const size_t rb = eli_kv_row_bytes(t, 2, d);
            CHECK(rb == 2 * eli_kvq_head_bytes(t, d) && rb > 0, "%s at %d: row bytes %zu", names[i], d, rb);
            printf("%-8s head dim %d: %.4f bits per element\n", names[i], d, 8.0 * (double)rb / (2.0 * d));
        }
        CHECK(eli_kv_row_bytes(t, 1, 96) == 0 && eli_kv_row_bytes(t, 1, 16) == 0 && eli_kv_row_bytes(t, 1, 1024) == 0,
              "%s: no rows at head dims 96, 16, 1024", names[i]);
    }
    uint32_t k = 0, v = 0;
    eli_error err = {0};
    CHECK(!eli_kv_types_from_names("qjl1_256", "q4_polar", &k, &v, &err) && k == ELI_KV_QJL1_256 && v == ELI_KV_Q4_POLAR,
          "K qjl1_256 with V q4_polar: %s", err.msg);
    CHECK(!eli_kv_types_from_names("q8_0", "tbq3_0", &k, &v, &err) && k == ELI_TYPE_Q8_0 && v == ELI_KV_TBQ3_0, "q8_0 / tbq3_0");
    CHECK(eli_kv_types_from_names("f16", "qjl1_256", &k, &v, &err) == ELI_ERR_INVALID_ARG && strstr(err.msg, "cache_type_v") &&
              strstr(err.msg, "keys only"),
          "qjl1_256 as V: %s", err.msg);
    CHECK(eli_kv_types_from_names("tbq5_0", NULL, &k, &v, &err) == ELI_ERR_INVALID_ARG && strstr(err.msg, "tbq5_0") &&
              strstr(err.msg, "q4_polar"),
          "an unknown name lists the known ones: %s", err.msg);

    /* the device's check on a model's geometry: one layer of each head dim */
    eli_layer layers[2];
    memset(layers, 0, sizeof layers);
    eli_model m;
    memset(&m, 0, sizeof m);
    m.layers = layers;
    m.hp.n_layer = 2;
    static const int bad[] = {96, 16, 1024};
    for (int i = 0; i < 3; i++) {
        layers[0].head_dim = 64, layers[1].head_dim = bad[i];
        CHECK(eli_kv_check_types(&m, ELI_KV_TBQ3_0, ELI_TYPE_F16, &err) == ELI_ERR_INVALID_ARG &&
                  strstr(err.msg, "powers of two from 32 to 512") && strstr(err.msg, "tbq3_0"),
              "head dim %d: %s", bad[i], err.msg);
        CHECK(eli_kv_check_types(&m, ELI_TYPE_F16, ELI_KV_Q4_POLAR, &err) == ELI_ERR_INVALID_ARG && strstr(err.msg, "V cache"),
              "V q4_polar at head dim %d: %s", bad[i], err.msg);
    }
    layers[1].head_dim = 512;
    CHECK(!eli_kv_check_types(&m, ELI_KV_QJL1_256, ELI_KV_TBQ4_0, &err), "64 and 512: %s", err.msg);
    CHECK(eli_kv_check_types(&m, ELI_TYPE_F16, ELI_KV_QJL1_256, &err) == ELI_ERR_INVALID_ARG && strstr(err.msg, "keys only"),
          "V qjl1_256 at the device: %s", err.msg);
}

/* ---- attention from the codes == attention over the dequantized rows ---- */

/* In double precision: G heads of q (d floats each) over rows p_lo..p_hi (cell p % n_cells) of f32 K and V. */
static void attend_ref(const float *q, int G, int d, const float *kf, const float *vf, int64_t n_cells, int32_t p_lo,
                       int32_t p_hi, double *out) {
    const int64_t n = (int64_t)p_hi - p_lo + 1;
    double *s = malloc(sizeof(double) * (size_t)n);
    for (int g = 0; g < G; g++) {
        double mx = -INFINITY, sum = 0;
        for (int64_t j = 0; j < n; j++) {
            const float *kr = kf + (size_t)((p_lo + j) % n_cells) * d;
            double acc = 0;
            for (int i = 0; i < d; i++) acc += (double)q[g * d + i] * kr[i];
            s[j] = acc;
            mx = acc > mx ? acc : mx;
        }
        for (int64_t j = 0; j < n; j++) sum += (s[j] = exp(s[j] - mx));
        for (int i = 0; i < d; i++) out[g * d + i] = 0;
        for (int64_t j = 0; j < n; j++) {
            const float *vr = vf + (size_t)((p_lo + j) % n_cells) * d;
            for (int i = 0; i < d; i++) out[g * d + i] += s[j] / sum * vr[i];
        }
    }
    free(s);
}

/* The query a low-bit K's kernels score with: tbq rounds Rq to dq * int8 (kvquant.h), rotated back here
 * with the format's own inverse rotation; polar and qjl score with the exact query. */
static void query_as_scored(const eli_kvq *kq, const float *q, float *qs, void *qp) {
    if (!kq || (kq->type != ELI_KV_TBQ4_0 && kq->type != ELI_KV_TBQ3_0)) {
        memcpy(qs, q, sizeof(float) * (size_t)(kq ? kq->d : 0));
        return;
    }
    eli_kvq_prepare_query(kq, q, qp);
    float dq;
    memcpy(&dq, qp, sizeof dq);
    const int8_t *q8 = (const int8_t *)qp + 64;
    for (int i = 0; i < kq->d; i++) qs[i] = dq * (float)q8[i];
    eli_kvq_finish(kq, qs, qs);
}

/* One side of the cache: n_cells random rows of d values, as codes (type t) and as the f32 rows they decode
 * to; view fields for it. */
typedef struct {
    uint8_t *codes;
    float *rows;
    size_t rb;
    eli_kvq *c;
} side;

static int side_make(side *s, uint32_t t, int d, int64_t n_cells, float scale) {
    memset(s, 0, sizeof *s);
    float *x = malloc(sizeof(float) * (size_t)d);
    s->rows = malloc(sizeof(float) * (size_t)(n_cells * d));
    eli_error err = {0};
    if (t != ELI_TYPE_F32 && !(s->c = eli_kvq_create(t, d, &err))) {
        CHECK(0, "codec %s/%d: %s", eli_kv_type_name(t), d, err.msg);
        return -1;
    }
    s->rb = s->c ? s->c->head_bytes : sizeof(float) * (size_t)d;
    s->codes = malloc(s->rb * (size_t)n_cells);
    for (int64_t r = 0; r < n_cells; r++) {
        for (int i = 0; i < d; i++) x[i] = scale * gauss();
        uint8_t *code = s->codes + (size_t)r * s->rb;
        float *row = s->rows + (size_t)r * d;
        if (s->c) {
            eli_kvq_quantize(s->c, x, 1, code);
            eli_kvq_dequantize(s->c, code, 1, row);
        } else {
            memcpy(code, x, s->rb);
            memcpy(row, x, s->rb);
        }
    }
    free(x);
    return 0;
}

static void side_free(side *s) {
    eli_kvq_free(s->c);
    free(s->codes), free(s->rows);
}

static void test_direct_vs_dequantized(void) {
    /* the scalar reference and the table this CPU runs (test_kernels holds every table to the reference) */
    const eli_kernels *tables[2] = {eli_kernels_reference(), eli_kernels_best()};
    const int n_tables = tables[1] == tables[0] ? 1 : 2;
    static const char *pairs[][2] = {{"tbq4_0", "tbq4_0"}, {"tbq3_0", "tbq3_0"},   {"q4_polar", "q4_polar"},
                                     {"qjl1_256", "q4_polar"}, {"qjl1_256", "f32"}, {"f32", "tbq3_0"},
                                     {"tbq3_0", "q4_polar"}, {"q4_polar", "tbq4_0"}};
    static const int dims[] = {64, 256, 512};
    enum { G = 4, CELLS = 200 };
    double worst = 0;
    for (size_t di = 0; di < 3; di++)
        for (size_t pi = 0; pi < sizeof pairs / sizeof pairs[0]; pi++) {
            const int d = dims[di];
            const uint32_t tk = type_of(pairs[pi][0]), tv = type_of(pairs[pi][1]);
            side K, V;
            /* keys scaled so that scores spread over a few units, as attention logits do */
            if (side_make(&K, tk, d, CELLS, 2.0f / sqrtf((float)d)) || side_make(&V, tv, d, CELLS, 1.0f)) {
                side_free(&K), side_free(&V);
                continue;
            }
            const eli_kv_view view = {K.codes, V.codes, tk, tv, K.rb, V.rb, CELLS, K.c, V.c};
            float *q = malloc(sizeof(float) * G * (size_t)d), *qs = malloc(sizeof(float) * G * (size_t)d);
            float *got = malloc(sizeof(float) * G * (size_t)d), *tmp = malloc(sizeof(float) * 2 * (size_t)d);
            float *scores = malloc(sizeof(float) * 1024);
            double *want = malloc(sizeof(double) * G * (size_t)d);
            void *qp = aligned_alloc(64, 4 * (size_t)d + 64), *work = malloc(eli_attend_flash_work_size(G, d));
            for (int i = 0; i < G * d; i++) q[i] = gauss();
            for (int g = 0; g < G; g++) query_as_scored(K.c, q + g * d, qs + g * d, qp);
            if (!K.c) memcpy(qs, q, sizeof(float) * G * (size_t)d);
            /* windows: one row, inside the ring, ending at the ring's end, wrapping past it, the whole ring */
            static const int32_t win[][2] = {{7, 7}, {10, 90}, {120, 199}, {150, 260}, {200, 399}};
            for (size_t wi = 0; wi < sizeof win / sizeof win[0]; wi++) {
                attend_ref(qs, G, d, K.rows, V.rows, CELLS, win[wi][0], win[wi][1], want);
                double scale = 0;
                for (int i = 0; i < G * d; i++) scale = fabs(want[i]) > scale ? fabs(want[i]) : scale;
                for (int ti = 0; ti < n_tables; ti++)
                    for (int flash = 0; flash < 2; flash++) {
                        if (flash && !eli_attend_flash_ok(tk, tv)) continue;
                        if (flash) eli_attend_flash(tables[ti], q, G, d, &view, win[wi][0], win[wi][1], work, got);
                        else
                            for (int g = 0; g < G; g++)
                                eli_attend(tables[ti], q + g * d, d, &view, win[wi][0], win[wi][1], scores, tmp, got + g * d);
                        double err = 0;
                        for (int i = 0; i < G * d; i++) err = fmax(err, fabs(got[i] - want[i]));
                        err /= scale;
                        worst = err > worst ? err : worst;
                        CHECK(err <= 2e-5, "K %s V %s d %d window %d..%d, %s %s: max error %.3g of max |out| %.3g",
                              pairs[pi][0], pairs[pi][1], d, win[wi][0], win[wi][1], tables[ti]->name,
                              flash ? "fused" : "eli_attend", err, scale);
                    }
            }
            free(q), free(qs), free(got), free(tmp), free(scores), free(want), free(qp), free(work);
            side_free(&K), side_free(&V);
        }
    printf("attention from the codes vs over the dequantized rows: largest error %.3g of max |out|\n", worst);
}

/* ---- the golden minis against llama.cpp ---- */

static float *logits_of(const eli_model *m, const int32_t *ids, int n, uint32_t tk, uint32_t tv, int step, int reference,
                        int64_t n_ctx) {
    eli_context_params p = eli_context_default_params();
    p.kernels = reference ? eli_kernels_reference() : NULL;
    p.n_ctx = n_ctx;
    p.kv_type_k = tk;
    p.kv_type_v = tv;
    p.n_threads = step ? 1 : 2;
    p.reserve = 0;
    eli_error err = {0};
    eli_context *c = eli_context_create(m, &p, &err);
    float *lg = c ? malloc(sizeof(float) * (size_t)n * (size_t)m->hp.n_vocab) : NULL;
    int rc = lg ? 0 : -1;
    for (int i = 0; step && !rc && i < n; i++) rc = eli_decode(c, ids + i, 1, lg + (size_t)i * m->hp.n_vocab, 0, &err);
    if (!step && !rc) rc = eli_decode(c, ids, n, lg, 1, &err);
    CHECK(!rc, "K %s V %s: %s", eli_kv_type_name(tk), eli_kv_type_name(tv), err.msg);
    if (rc) free(lg), lg = NULL;
    eli_context_free(c);
    return lg;
}

static int all_finite(const float *x, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return 0;
    return 1;
}

typedef struct {
    const char *k, *v;
    double bound; /* mean KLD against llama.cpp's f32-KV logits */
    int paths;    /* also one token at a time and on the reference kernels (eli_attend) */
} kv_pair;

static void check_golden(const char *model, const char *base, const kv_pair *pairs, size_t n_pairs) {
    char path[256];
    snprintf(path, sizeof path, "golden/models/%s.gguf", model);
    eli_error err = {0};
    test_model t;
    CHECK(!test_model_load(eli_shared_path(path), 0, NULL, &t, &err), "%s", err.msg);
    if (!t.m) return;
    int32_t ids[N_TOK];
    snprintf(path, sizeof path, "golden/models/%s.tokens.txt", base);
    CHECK(read_ids(eli_shared_path(path), ids, N_TOK) == N_TOK, "tokens");
    snprintf(path, sizeof path, "golden/models/%s.logits.f32", model);
    const int V = t.m->hp.n_vocab;
    size_t len = 0;
    float *want = (float *)test_read_file(eli_shared_path(path), &len);
    CHECK(want && len == sizeof(float) * N_TOK * (size_t)V, "%s", path);
    for (size_t i = 0; want && i < n_pairs; i++) {
        const uint32_t tk = type_of(pairs[i].k), tv = type_of(pairs[i].v);
        float *batch = logits_of(t.m, ids, N_TOK, tk, tv, 0, 0, 128);
        if (batch) {
            double mx;
            const double kld = test_mean_kld(want, batch, N_TOK, V, &mx);
            printf("%-17s K %-8s V %-8s mean KLD %.3e (max %.3e)\n", model, pairs[i].k, pairs[i].v, kld, mx);
            CHECK(all_finite(batch, (size_t)N_TOK * V), "%s %s/%s: finite", model, pairs[i].k, pairs[i].v);
            CHECK(kld <= pairs[i].bound, "%s K %s V %s: mean KLD %.3g > %.3g", model, pairs[i].k, pairs[i].v, kld, pairs[i].bound);
        }
        float *step = batch && pairs[i].paths ? logits_of(t.m, ids, N_TOK, tk, tv, 1, 0, 128) : NULL;
        float *ref = step ? logits_of(t.m, ids, N_TOK, tk, tv, 0, 1, 128) : NULL;
        if (ref) {
            const double ds = test_mean_kld(batch, step, N_TOK, V, NULL), dr = test_mean_kld(batch, ref, N_TOK, V, NULL);
            printf("%-17s K %-8s V %-8s step vs batch %.2e  reference kernels vs fused %.2e\n", model, pairs[i].k, pairs[i].v,
                   ds, dr);
            /* a matmul rounding a K or V value differently can move one code, and eli_attend rounds the probabilities
             * to f16 on an f16 V where the fused path does not: 3e-4 is a few % of the types' KLD */
            CHECK(all_finite(step, (size_t)N_TOK * V) && ds <= 3e-4 && dr <= 3e-4, "%s K %s V %s: step vs batch %.3g, reference vs fused %.3g", model, pairs[i].k,
                  pairs[i].v, ds, dr);
        }
        free(batch), free(step), free(ref);
    }
    free(want);
    test_model_free(&t);
}

static void test_golden(void) {
    /* e2b-mini measured (mean KLD): q4_0 8.3e-3, tbq4_0 8.4e-3, tbq3_0 2.9e-2, q4_polar 9.8e-3, qjl1_256/f16 1.9e-1 */
    static const kv_pair e2b[] = {{"tbq4_0", "tbq4_0", 1.7e-2, 1}, {"tbq3_0", "tbq3_0", 6e-2, 0}, {"q4_polar", "q4_polar", 2e-2, 0},
                                  {"qjl1_256", "f16", 0.4, 1},     {"q8_0", "q4_polar", 8e-3, 0},   {"f16", "tbq3_0", 3e-2, 0}};
    check_golden("e2b-mini-f32", "e2b-mini", e2b, sizeof e2b / sizeof e2b[0]);
    static const kv_pair dense[] = {{"tbq3_0", "q4_polar", 1e-1, 1}, {"qjl1_256", "tbq4_0", 1.0, 0}};
    check_golden("dense-kv-mini-f32", "dense-kv-mini", dense, sizeof dense / sizeof dense[0]);
    static const kv_pair moe[] = {{"tbq3_0", "tbq4_0", 1e-1, 0}};
    check_golden("moe-mini-f32", "moe-mini", moe, sizeof moe / sizeof moe[0]);
}

/* 768 tokens of English (sliding window 16): every 64th position against llama.cpp's f32-KV logits (BENCHMARKS.md
 * has all 1504 positions and every type). */
static void test_long(void) {
    eli_error err = {0};
    test_model t;
    CHECK(!test_model_load(eli_shared_path("golden/models/e2b-mini-f32.gguf"), 0, NULL, &t, &err), "%s", err.msg);
    if (!t.m) return;
    const int V = t.m->hp.n_vocab, rows = N_LONG / LONG_STRIDE, run_rows = N_LONG_RUN / LONG_STRIDE;
    int32_t *ids = malloc(sizeof(int32_t) * N_LONG);
    CHECK(read_ids(ELI_SOURCE_DIR "/tests/data/kv_lowbit/long.tokens.txt", ids, N_LONG) == N_LONG, "long tokens");
    size_t len = 0;
    float *want = (float *)test_read_file(ELI_SOURCE_DIR "/tests/data/kv_lowbit/e2b-mini-f32.long.logits.f32", &len);
    float *sel = malloc(sizeof(float) * (size_t)rows * V);
    CHECK(want && len == sizeof(float) * (size_t)rows * V, "long reference logits");
    /* measured here: f32 3.1e-9, tbq3_0 2.1e-2, qjl1_256/q4_polar 1.7e-1 */
    static const kv_pair pairs[] = {{"f32", "f32", 1e-6, 0}, {"tbq3_0", "tbq3_0", 6e-2, 0}, {"qjl1_256", "q4_polar", 0.4, 0}};
    for (size_t i = 0; want && i < sizeof pairs / sizeof pairs[0]; i++) {
        float *lg = logits_of(t.m, ids, N_LONG_RUN, type_of(pairs[i].k), type_of(pairs[i].v), 0, 0, 1024);
        if (!lg) continue;
        for (int r = 0; r < run_rows; r++)
            memcpy(sel + (size_t)r * V, lg + (size_t)(LONG_STRIDE - 1 + r * LONG_STRIDE) * V, sizeof(float) * V);
        double mx;
        const double kld = test_mean_kld(want, sel, run_rows, V, &mx);
        printf("e2b-mini %d tokens K %-8s V %-8s mean KLD %.3e (max %.3e) over %d positions\n", N_LONG_RUN, pairs[i].k,
               pairs[i].v, kld, mx, run_rows);
        CHECK(all_finite(lg, (size_t)N_LONG_RUN * V) && kld <= pairs[i].bound, "long K %s V %s: KLD %.3g > %.3g", pairs[i].k,
              pairs[i].v, kld, pairs[i].bound);
        free(lg);
    }
    free(ids), free(want), free(sel);
    test_model_free(&t);
}

/* Decode one token at a time after 1400 positions: the full layers' windows span 6 segments of
 * ELI_FLASH_SEG positions and their work (2 * 4 heads * 1400 cells * 128) is past the pool's hand-off size, so
 * with 2 and 3 threads each window's segments are shared out (and partials merged), with 1 thread the
 * segments run in order on the caller. The logits must not differ in a single bit. */
static void test_split_decode(void) {
    eli_error err = {0};
    test_model t;
    CHECK(!test_model_load(eli_shared_path("golden/models/e2b-mini-f32.gguf"), 0, NULL, &t, &err), "%s", err.msg);
    if (!t.m) return;
    enum { PREFILL = 1400, STEPS = 12 };
    const int V = t.m->hp.n_vocab;
    int32_t *ids = malloc(sizeof(int32_t) * N_LONG);
    CHECK(read_ids(ELI_SOURCE_DIR "/tests/data/kv_lowbit/long.tokens.txt", ids, N_LONG) == N_LONG, "long tokens");
    static const char *pairs[][2] = {{"f16", "f16"}, {"tbq3_0", "tbq4_0"}, {"qjl1_256", "q4_polar"}};
    float *lg[3];
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        for (int th = 1; th <= 3; th++) {
            eli_context_params p = eli_context_default_params();
            p.n_ctx = 2048;
            p.n_threads = th;
            p.kv_type_k = type_of(pairs[i][0]);
            p.kv_type_v = type_of(pairs[i][1]);
            eli_context *c = eli_context_create(t.m, &p, &err);
            lg[th - 1] = malloc(sizeof(float) * STEPS * (size_t)V);
            int rc = !c || eli_decode(c, ids, PREFILL, NULL, 0, &err);
            for (int s = 0; !rc && s < STEPS; s++) rc = eli_decode(c, ids + PREFILL + s, 1, lg[th - 1] + (size_t)s * V, 0, &err);
            CHECK(!rc, "%s/%s, %d threads: %s", pairs[i][0], pairs[i][1], th, err.msg);
            eli_context_free(c);
        }
        const size_t bytes = sizeof(float) * STEPS * (size_t)V;
        CHECK(all_finite(lg[0], STEPS * (size_t)V) && !memcmp(lg[0], lg[1], bytes) && !memcmp(lg[0], lg[2], bytes),
              "K %s V %s: decode at depth 1400 with 1, 2 and 3 threads differs", pairs[i][0], pairs[i][1]);
        for (int th = 0; th < 3; th++) free(lg[th]);
    }
    free(ids);
    test_model_free(&t);
}

/* ---- state: slots, truncation, checkpoints; the drafter ---- */

typedef struct {
    uint8_t *p;
    size_t n, cap;
} membuf;

static void put_mem(void *w, const void *p, size_t n) {
    membuf *b = w;
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, p, n);
    b->n += n;
}

static void test_state(void) {
    int32_t seq[N_TOK];
    read_ids(eli_shared_path("golden/models/e2b-mini.tokens.txt"), seq, N_TOK);
    eli_error err = {0};
    test_model t;
    CHECK(!test_model_load(eli_shared_path("golden/models/e2b-mini-f32.gguf"), 0, NULL, &t, &err), "%s", err.msg);
    if (!t.m) return;
    const int V = t.m->hp.n_vocab;
    static const char *pairs[][2] = {{"tbq3_0", "q4_polar"}, {"qjl1_256", "tbq4_0"}};
    float *la = malloc(sizeof(float) * 10 * (size_t)V), *lb = malloc(sizeof(float) * 10 * (size_t)V);
    for (size_t i = 0; i < 2; i++) {
        eli_context_params p = eli_context_default_params();
        p.n_ctx = 256;
        p.n_ubatch = 4; /* sliding rings of 16 + 4 cells: truncation needs the checkpoint */
        p.kv_type_k = type_of(pairs[i][0]);
        p.kv_type_v = type_of(pairs[i][1]);
        eli_context *c = eli_context_create(t.m, &p, &err), *f = eli_context_create(t.m, &p, &err);
        CHECK(c && f, "contexts: %s", err.msg);
        if (!c || !f) continue;
        /* slot state: saved, loaded into a fresh context, the same bytes and the same continuation */
        membuf s1 = {0}, s2 = {0};
        CHECK(!eli_decode(c, seq, 60, NULL, 0, &err), "%s", err.msg);
        eli_context_save_state(c, put_mem, &s1);
        CHECK(!eli_context_load_state(f, s1.p, s1.n, &err), "load: %s", err.msg);
        eli_context_save_state(f, put_mem, &s2);
        CHECK(s1.n == s2.n && !memcmp(s1.p, s2.p, s1.n), "%s/%s: the state saved again is the same %zu bytes", pairs[i][0],
              pairs[i][1], s1.n);
        CHECK(!eli_decode(c, seq + 60, 10, la, 1, &err) && !eli_decode(f, seq + 60, 10, lb, 1, &err), "%s", err.msg);
        CHECK(!memcmp(la, lb, sizeof(float) * 10 * (size_t)V), "%s/%s: restored state continues bit-exactly", pairs[i][0],
              pairs[i][1]);
        /* a state of other cache types is refused, naming the row sizes */
        eli_context_params o = p;
        o.kv_type_k = ELI_TYPE_F16;
        eli_context *g = eli_context_create(t.m, &o, &err);
        CHECK(g && eli_context_load_state(g, s1.p, s1.n, &err) == ELI_ERR_INVALID_ARG && strstr(err.msg, "bytes"),
              "another K type: %s", err.msg);
        eli_context_free(g);
        free(s1.p), free(s2.p);

        /* truncate + checkpoint: resuming 70 from the checkpoint at 60 == a fresh prefill of 70 */
        eli_context_reset(c), eli_context_reset(f);
        CHECK(!eli_decode(c, seq, 60, NULL, 0, &err), "decode 60");
        eli_context_checkpoint(c);
        CHECK(!eli_decode(c, seq + 60, 36, NULL, 0, &err), "decode to 96");
        CHECK(!eli_context_truncate(c, 70) && eli_context_resume(c, 70) == 60, "resume 70 from the checkpoint at 60");
        CHECK(!eli_decode(c, seq + 60, 10, NULL, 0, &err) && !eli_decode(c, seq + 70, 10, la, 1, &err), "recompute");
        CHECK(!eli_decode(f, seq, 70, NULL, 0, &err) && !eli_decode(f, seq + 70, 10, lb, 1, &err), "fresh");
        CHECK(!memcmp(la, lb, sizeof(float) * 10 * (size_t)V), "%s/%s: checkpoint resume == fresh prefill, bitwise",
              pairs[i][0], pairs[i][1]);
        CHECK(eli_context_truncate(c, 78), "a short truncation needs no checkpoint");
        CHECK(!eli_decode(c, seq + 78, 2, la, 1, &err) && !memcmp(la, lb + (size_t)8 * V, sizeof(float) * 2 * (size_t)V),
              "%s/%s: truncate to 78 and decode again == the same rows", pairs[i][0], pairs[i][1]);
        eli_context_free(c), eli_context_free(f);
    }
    free(la), free(lb);
    test_model_free(&t);
}

/* The drafter reads the target's low-bit cache: its logits against the same step over an f32 cache, and its
 * fused path against eli_attend (a context on the reference kernels). */
static float *draft_logits(const test_model *t, const test_model *d, const int32_t *seq, uint32_t tk, uint32_t tv,
                           int reference) {
    eli_context_params p = eli_context_default_params();
    p.n_ctx = 64;
    p.kv_type_k = tk, p.kv_type_v = tv;
    p.kernels = reference ? eli_kernels_reference() : NULL;
    eli_error err = {0};
    eli_context *c = eli_context_create(t->m, &p, &err);
    eli_drafter *dr = c ? eli_drafter_create(d->m, t->m, 64, &err) : NULL;
    float *h = malloc(sizeof(float) * 2 * (size_t)t->m->hp.n_embd), *h2 = h + t->m->hp.n_embd;
    float *lg = malloc(sizeof(float) * (size_t)t->m->hp.n_vocab);
    const eli_outputs o = {NULL, h, 0};
    int rc = !dr || eli_decode_ex(c, seq, 40, &o, &err) || eli_drafter_step(dr, c, seq[40], 40, h, lg, h2, &err);
    CHECK(!rc, "drafter over K %s V %s: %s", eli_kv_type_name(tk), eli_kv_type_name(tv), err.msg);
    if (rc) free(lg), lg = NULL;
    eli_drafter_free(dr);
    eli_context_free(c);
    free(h);
    return lg;
}

static void test_drafter(void) {
    int32_t seq[N_TOK];
    read_ids(eli_shared_path("golden/models/e2b-mini.tokens.txt"), seq, N_TOK);
    eli_error err = {0};
    test_model t, d;
    CHECK(!test_model_load(eli_shared_path("golden/models/e2b-mini-f32.gguf"), 0, NULL, &t, &err), "%s", err.msg);
    if (!t.m) return;
    CHECK(!test_model_load(eli_shared_path("golden/models/assistant-mini-f32.gguf"), 0, t.m, &d, &err), "%s", err.msg);
    const int V = t.m->hp.n_vocab;
    float *base = d.m ? draft_logits(&t, &d, seq, ELI_TYPE_F32, ELI_TYPE_F32, 0) : NULL;
    static const char *pairs[][2] = {{"tbq3_0", "tbq3_0"}, {"qjl1_256", "q4_polar"}, {"q8_0", "tbq4_0"}};
    for (size_t i = 0; base && i < 3; i++) {
        const uint32_t tk = type_of(pairs[i][0]), tv = type_of(pairs[i][1]);
        float *fused = draft_logits(&t, &d, seq, tk, tv, 0), *plain = draft_logits(&t, &d, seq, tk, tv, 1);
        if (fused && plain) {
            const double kb = test_mean_kld(base, fused, 1, V, NULL), kp = test_mean_kld(fused, plain, 1, V, NULL);
            printf("drafter over K %-8s V %-8s: KLD vs f32 cache %.3e, reference kernels vs fused %.2e\n", pairs[i][0],
                   pairs[i][1], kb, kp);
            CHECK(all_finite(fused, (size_t)V) && kb > 0 && kb < 0.5, "drafter %s/%s: KLD vs f32 cache %.3g", pairs[i][0],
                  pairs[i][1], kb);
            CHECK(kp <= 1e-4, "drafter %s/%s: reference vs fused %.3g", pairs[i][0], pairs[i][1], kp);
        }
        free(fused), free(plain);
    }
    free(base);
    test_model_free(&d);
    test_model_free(&t);
}

int main(void) {
    test_names_and_errors();
    test_direct_vs_dequantized();
    test_golden();
    test_long();
    test_split_decode();
    test_state();
    test_drafter();
    TEST_MAIN_END();
}
