/* eliza-infer bench-kv [--dim D] [-G N] [--rows N] [--reps R]
 *
 * The two halves of decode attention over one KV head's cache, per cached row, for every cache type: the
 * scores of G query heads (q.k) and the probability-weighted sum of the values, on random rows with the
 * best kernel table. f16 goes through the fused attention's kernels (kernels.h attn_qk / attn_pv), q8_0 and
 * q4_0 the way eli_attend computes with them today (a vec_dot per row and head against Q8_0 queries; each
 * value row dequantized per head, then summed), the low-bit types through kvquant.h (prepared queries,
 * rotated-domain sums). Rows go in chunks of 64 as in the fused attention. The types are measured in turn,
 * reps times, and the median time of each is printed: ns per row for the G heads, and the cache bytes
 * (K + V) streamed per second. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "kernels.h"
#include "kvquant.h"
#include "quants.h"

#define CHUNK 64

typedef struct {
    const char *name;
    uint32_t type; /* a ggml type or a kvquant.h id */
    eli_kvq *kc, *vc;
    size_t kb, vb; /* bytes per row */
    uint8_t *k, *v;
    double t_score[64], t_accum[64];
} kv_case;

static uint64_t bench_rng = 0x2545f4914f6cdd1dULL;
static float bench_gauss(void) {
    float s = 0.0f; /* a sum of 4 uniforms: gaussian enough for timing data */
    for (int i = 0; i < 4; i++) {
        bench_rng ^= bench_rng << 13, bench_rng ^= bench_rng >> 7, bench_rng ^= bench_rng << 17;
        s += (float)(bench_rng >> 40) * (1.0f / 16777216.0f) - 0.5f;
    }
    return s * 1.7f;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* One pass of both halves over all rows; the times go to the case's slot rep. */
static void run_case(const eli_kernels *K, kv_case *c, int d, int G, int64_t n, const uint8_t *qprep, const uint8_t *q8,
                     size_t q8_row, const float *qh, float *s, float *p, float *acc, float *vrow, int rep) {
    const eli_type_traits *tt = c->kc ? NULL : eli_type_info(c->type);
    double t0 = cli_now();
    for (int64_t j0 = 0; j0 < n; j0 += CHUNK) {
        const int nc = (int)(n - j0 < CHUNK ? n - j0 : CHUNK);
        const uint8_t *kr = c->k + (size_t)j0 * c->kb;
        if (c->kc) eli_kvq_score(K, c->kc, nc, kr, c->kb, G, qprep, s, CHUNK);
        else if (c->type == ELI_TYPE_F16) K->attn_qk[ELI_TYPE_F16](d, nc, kr, c->kb, G, qh, s, CHUNK);
        else
            for (int g = 0; g < G; g++)
                for (int j = 0; j < nc; j++)
                    s[g * CHUNK + j] = K->vec_dot[c->type](d, kr + (size_t)j * c->kb, q8 + (size_t)g * q8_row);
    }
    double t1 = cli_now();
    for (int64_t j0 = 0; j0 < n; j0 += CHUNK) {
        const int nc = (int)(n - j0 < CHUNK ? n - j0 : CHUNK);
        const uint8_t *vr = c->v + (size_t)j0 * c->vb;
        if (c->vc) eli_kvq_accumulate(K, c->vc, nc, vr, c->vb, G, p, CHUNK, acc);
        else if (c->type == ELI_TYPE_F16) K->attn_pv[ELI_TYPE_F16](d, nc, vr, c->vb, G, p, CHUNK, acc);
        else
            for (int g = 0; g < G; g++)
                for (int j = 0; j < nc; j++) {
                    tt->dequantize(vr + (size_t)j * c->vb, vrow, d);
                    for (int i = 0; i < d; i++) acc[g * d + i] += p[g * CHUNK + j] * vrow[i];
                }
    }
    double t2 = cli_now();
    c->t_score[rep] = t1 - t0;
    c->t_accum[rep] = t2 - t1;
}

int cli_bench_kv(int argc, char **argv) {
    long long d = 256, G = 8, n = 16384, reps = 5;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            printf("usage: eliza-infer bench-kv [--dim 32..512] [-G HEADS] [--rows N] [--reps R]\n"
                   "  decode attention's score and value-sum kernels per cached row of one KV head, every cache type\n"
                   "  (defaults: --dim 256 -G 8 --rows 16384 --reps 5)\n");
            return 0;
        } else if (!strcmp(a, "--dim")) {
            if (cli_parse_int(a, v, 32, 512, &d)) return 2;
            i++;
        } else if (!strcmp(a, "-G")) {
            if (cli_parse_int(a, v, 1, 64, &G)) return 2;
            i++;
        } else if (!strcmp(a, "--rows")) {
            if (cli_parse_int(a, v, 1, 1 << 24, &n)) return 2;
            i++;
        } else if (!strcmp(a, "--reps")) {
            if (cli_parse_int(a, v, 1, 64, &reps)) return 2;
            i++;
        } else {
            return cli_bad_option("bench-kv", a, v != NULL);
        }
    }
    if (d & (d - 1)) return cli_die("--dim must be a power of two"), 2;
    const eli_kernels *K = eli_kernels_best();
    static kv_case cases[] = {{.name = "f16", .type = ELI_TYPE_F16},       {.name = "q8_0", .type = ELI_TYPE_Q8_0},
                              {.name = "q4_0", .type = ELI_TYPE_Q4_0},     {.name = "tbq4_0", .type = ELI_KV_TBQ4_0},
                              {.name = "tbq3_0", .type = ELI_KV_TBQ3_0},   {.name = "q4_polar", .type = ELI_KV_Q4_POLAR},
                              {.name = "qjl1_256", .type = ELI_KV_QJL1_256}};
    const int n_cases = (int)(sizeof cases / sizeof cases[0]);
    float *x = malloc(sizeof(float) * (size_t)d * 2), *q = malloc(sizeof(float) * (size_t)(G * d)),
          *qh = malloc(sizeof(float) * (size_t)(G * d)), *s = malloc(sizeof(float) * (size_t)(G * CHUNK)),
          *p = malloc(sizeof(float) * (size_t)(G * CHUNK)), *acc = calloc((size_t)(G * d), sizeof(float)),
          *vrow = malloc(sizeof(float) * (size_t)d);
    const size_t q8_row = eli_row_size(ELI_TYPE_Q8_0, d);
    uint8_t *q8 = malloc((size_t)G * q8_row), *qprep = aligned_alloc(64, (size_t)G * (64 + 4 * (size_t)d));
    int rc = 0;
    if (!x || !q || !qh || !s || !p || !acc || !vrow || !q8 || !qprep) return cli_die("out of memory");
    for (int i = 0; i < G * d; i++) q[i] = bench_gauss();
    for (int i = 0; i < G * CHUNK; i++) p[i] = 1.0f / CHUNK;
    for (int i = 0; i < G * d; i++) qh[i] = eli_fp16_to_fp32(eli_fp32_to_fp16(q[i]));
    eli_error err = {0};
    for (int ci = 0; ci < n_cases && !rc; ci++) {
        kv_case *c = &cases[ci];
        if (eli_kvq_is_type(c->type)) {
            c->kc = eli_kvq_create(c->type, d, &err);
            /* a keys-only type is measured with tbq4_0 values */
            c->vc = c->kc ? eli_kvq_create(eli_kvq_keys_only(c->type) ? ELI_KV_TBQ4_0 : c->type, d, &err) : NULL;
            if (!c->vc) rc = cli_die("%s", err.msg);
            else c->kb = c->kc->head_bytes, c->vb = c->vc->head_bytes;
        } else {
            c->kb = c->vb = eli_row_size(c->type, d);
        }
        c->k = malloc(c->kb * (size_t)n);
        c->v = malloc(c->vb * (size_t)n);
        if (!rc && (!c->k || !c->v)) rc = cli_die("out of memory for %lld rows", n);
        for (int64_t j = 0; !rc && j < n; j++) {
            for (int i = 0; i < 2 * d; i++) x[i] = bench_gauss();
            if (c->kc) {
                eli_kvq_quantize(c->kc, x, 1, c->k + (size_t)j * c->kb);
                eli_kvq_quantize(c->vc, x + d, 1, c->v + (size_t)j * c->vb);
            } else {
                eli_quantize_row(c->type, x, c->k + (size_t)j * c->kb, d);
                eli_quantize_row(c->type, x + d, c->v + (size_t)j * c->vb, d);
            }
        }
    }
    if (!rc) {
        printf("bench-kv: kernels %s, head dim %lld, %lld query heads per KV head, %lld rows, %lld reps\n", K->name, d,
               G, n, reps);
        for (int rep = 0; rep < reps; rep++)
            for (int ci = 0; ci < n_cases; ci++) {
                kv_case *c = &cases[ci];
                if (c->kc) {
                    for (int g = 0; g < G; g++)
                        eli_kvq_prepare_query(c->kc, q + g * d, qprep + (size_t)g * c->kc->query_bytes);
                } else if (c->type != ELI_TYPE_F16) {
                    for (int g = 0; g < G; g++) eli_quantize_row(ELI_TYPE_Q8_0, q + g * d, q8 + (size_t)g * q8_row, d);
                }
                run_case(K, c, (int)d, (int)G, n, qprep, q8, q8_row, qh, s, p, acc, vrow, rep);
            }
        printf("ns per row for the %lld heads, median (min) of the reps\n", G);
        printf("%-9s %9s %17s %17s %17s %10s\n", "type", "bytes/row", "score", "accumulate", "total", "K+V GB/s");
        for (int ci = 0; ci < n_cases; ci++) {
            kv_case *c = &cases[ci];
            qsort(c->t_score, (size_t)reps, sizeof(double), cmp_double);
            qsort(c->t_accum, (size_t)reps, sizeof(double), cmp_double);
            const double ns = 1e9 / (double)n, ts = c->t_score[reps / 2] * ns, ta = c->t_accum[reps / 2] * ns;
            const double ms = c->t_score[0] * ns, ma = c->t_accum[0] * ns;
            printf("%-9s %9zu %9.1f (%5.1f) %9.1f (%5.1f) %9.1f (%5.1f) %10.2f\n", c->name, c->kb + c->vb, ts, ms, ta,
                   ma, ts + ta, ms + ma, (double)(c->kb + c->vb) / (ts + ta));
        }
        if (cases[n_cases - 1].kc) printf("(qjl1_256: keys only, its values are tbq4_0)\n");
    }
    for (int ci = 0; ci < n_cases; ci++) {
        eli_kvq_free(cases[ci].kc), eli_kvq_free(cases[ci].vc);
        free(cases[ci].k), free(cases[ci].v);
    }
    free(x), free(q), free(qh), free(s), free(p), free(acc), free(vrow), free(q8), free(qprep);
    return rc;
}
