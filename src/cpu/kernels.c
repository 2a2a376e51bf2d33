/* The kernel tables: the scalar reference (quants.c) and the best one for this CPU. */
#include "kernels.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"
#include "pack.h"

/* kernels_avx2.c: data only, its functions may be called only after the CPUID check below */
#if defined(__x86_64__) || defined(__i386__)
extern const eli_kernels eli_kernels_avx2_table, eli_kernels_avx512_table;
/* tquant_avx2.c, tquant_avx512.c: the rotated-codebook kernels (tq4_0 weights, low-bit KV), laid over a table */
extern const eli_kernels eli_tquant_avx2_table, eli_tquant_avx512_table;
#endif
/* kernels_neon.c (aarch64 only): data, plus the dotprod probe (getauxval HWCAP_ASIMDDP) */
#if defined(__aarch64__)
extern const eli_kernels eli_kernels_neon_table, eli_kernels_neon_dotprod_table;
extern const eli_kernels eli_tquant_neon_table, eli_tquant_neon_dotprod_table; /* tquant_neon.c */
int eli_kernels_neon_has_dotprod(void);
#endif

/* element i of cache row r (F32 or F16) */
static inline float ref_elem(int f16, const uint8_t *r, int64_t i) {
    return f16 ? eli_fp16_to_fp32(((const eli_fp16 *)r)[i]) : ((const float *)r)[i];
}

static inline void ref_qk(int f16, int64_t d, int nc, const void *rows, size_t rb, int G, const float *q, float *s,
                          size_t ss) {
    for (int j = 0; j < nc; j++) {
        const uint8_t *r = (const uint8_t *)rows + (size_t)j * rb;
        for (int g = 0; g < G; g++) {
            float acc = 0.0f;
            for (int64_t i = 0; i < d; i++) acc += ref_elem(f16, r, i) * q[(size_t)g * d + i];
            s[(size_t)g * ss + j] = acc;
        }
    }
}

static inline void ref_pv(int f16, int64_t d, int nc, const void *rows, size_t rb, int G, const float *p, size_t ss,
                          float *out) {
    for (int j = 0; j < nc; j++) {
        const uint8_t *r = (const uint8_t *)rows + (size_t)j * rb;
        for (int g = 0; g < G; g++)
            for (int64_t i = 0; i < d; i++) out[(size_t)g * d + i] += p[(size_t)g * ss + j] * ref_elem(f16, r, i);
    }
}

static void ref_qk_f32(int64_t d, int nc, const void *rows, size_t rb, int G, const float *q, float *s, size_t ss) {
    ref_qk(0, d, nc, rows, rb, G, q, s, ss);
}
static void ref_qk_f16(int64_t d, int nc, const void *rows, size_t rb, int G, const float *q, float *s, size_t ss) {
    ref_qk(1, d, nc, rows, rb, G, q, s, ss);
}
static void ref_pv_f32(int64_t d, int nc, const void *rows, size_t rb, int G, const float *p, size_t ss, float *out) {
    ref_pv(0, d, nc, rows, rb, G, p, ss, out);
}
static void ref_pv_f16(int64_t d, int nc, const void *rows, size_t rb, int G, const float *p, size_t ss, float *out) {
    ref_pv(1, d, nc, rows, rb, G, p, ss, out);
}

static void ref_f16_to_f32(int64_t n, const eli_fp16 *x, float *y) {
    for (int64_t i = 0; i < n; i++) y[i] = eli_fp16_to_fp32(x[i]);
}

static void ref_scale_f32(int64_t n, float a, float *y) {
    for (int64_t i = 0; i < n; i++) y[i] *= a;
}

static void ref_softcap_f32(int64_t n, float c, float *x) {
    const float inv = 1.0f / c;
    for (int64_t i = 0; i < n; i++) x[i] = tanhf(x[i] * inv) * c;
}

static float ref_exp_sum_f32(int64_t n, float m, float *x) {
    float sum = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        x[i] = expf(x[i] - m);
        sum += x[i];
    }
    return sum;
}

static eli_kernels ref_table, avx2_table, avx512_table, neon_table, neon_dp_table, *best_table;
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

/* every non-NULL entry of over into dst (a weight type's vec_dot comes with its row, tile and gemm kernels) */
static void apply(eli_kernels *dst, const eli_kernels *over) {
    for (int t = 0; t < ELI_TYPE_COUNT; t++) {
        if (over->vec_dot[t]) {
            dst->vec_dot[t] = over->vec_dot[t];
            dst->vec_dot_nr[t] = over->vec_dot_nr[t];
            dst->nr[t] = over->vec_dot_nr[t] ? over->nr[t] : 1;
            dst->gemv[t] = over->gemv[t];
            dst->gemm[t] = over->gemm[t];
            dst->gemm_nr[t] = over->gemm[t] ? over->gemm_nr[t] : 0;
        }
        if (over->packed_gemv[t]) dst->packed_gemv[t] = over->packed_gemv[t];
        if (over->packed_gemm[t]) dst->packed_gemm[t] = over->packed_gemm[t];
        if (over->quantize[t]) dst->quantize[t] = over->quantize[t];
        if (over->attn_qk[t]) dst->attn_qk[t] = over->attn_qk[t];
        if (over->attn_pv[t]) dst->attn_pv[t] = over->attn_pv[t];
    }
    for (int i = 0; i < ELI_KVQ_COUNT; i++) {
        if (over->kvq.score[i]) dst->kvq.score[i] = over->kvq.score[i];
        if (over->kvq.decode[i]) dst->kvq.decode[i] = over->kvq.decode[i];
    }
    if (over->f16_to_f32) dst->f16_to_f32 = over->f16_to_f32;
    if (over->scale_f32) dst->scale_f32 = over->scale_f32;
    if (over->softcap_f32) dst->softcap_f32 = over->softcap_f32;
    if (over->exp_sum_f32) dst->exp_sum_f32 = over->exp_sum_f32;
}

/* dst = base with every non-NULL entry of over applied; the packed kernels are over's only (a table
 * without its own multiplies the row-major data rather than run the reference's packed loops) */
static void overlay(eli_kernels *dst, const eli_kernels *base, const eli_kernels *over) {
    *dst = *base;
    dst->name = over->name;
    memset(dst->packed_gemv, 0, sizeof dst->packed_gemv);
    memset(dst->packed_gemm, 0, sizeof dst->packed_gemm);
    apply(dst, over);
}

static void init_tables(void) {
    memset(&ref_table, 0, sizeof ref_table);
    ref_table.name = "reference";
    for (uint32_t t = 0; t < ELI_TYPE_COUNT; t++) {
        const eli_type_traits *tt = eli_type_info(t);
        if (!tt) continue;
        ref_table.vec_dot[t] = tt->vec_dot;
        ref_table.nr[t] = 1;
        ref_table.quantize[t] = tt->quantize;
    }
    ref_table.packed_gemv[ELI_TYPE_Q4_0] = eli_pack_gemv_Q4_0_ref;
    ref_table.packed_gemm[ELI_TYPE_Q4_0] = eli_pack_gemm_Q4_0_ref;
    ref_table.packed_gemv[ELI_TYPE_Q4_K] = eli_pack_gemv_Q4_K_ref;
    ref_table.packed_gemm[ELI_TYPE_Q4_K] = eli_pack_gemm_Q4_K_ref;
    ref_table.packed_gemv[ELI_TYPE_F16] = eli_pack_gemv_F16_ref;
    ref_table.packed_gemm[ELI_TYPE_F16] = eli_pack_gemm_F16_ref;
    ref_table.attn_qk[ELI_TYPE_F32] = ref_qk_f32;
    ref_table.attn_qk[ELI_TYPE_F16] = ref_qk_f16;
    ref_table.attn_pv[ELI_TYPE_F32] = ref_pv_f32;
    ref_table.attn_pv[ELI_TYPE_F16] = ref_pv_f16;
    for (int i = 0; i < ELI_KVQ_COUNT; i++) {
        ref_table.kvq.score[i] = eli_kvq_score_ref;
        ref_table.kvq.decode[i] = eli_kvq_keys_only(ELI_KVQ_FIRST + (uint32_t)i) ? NULL : eli_kvq_decode_ref;
    }
    ref_table.kvq.pv = eli_kvq_pv_fma;
    ref_table.f16_to_f32 = ref_f16_to_f32;
    ref_table.scale_f32 = ref_scale_f32;
    ref_table.softcap_f32 = ref_softcap_f32;
    ref_table.exp_sum_f32 = ref_exp_sum_f32;
    best_table = &ref_table;

    const eli_cpu_features *f = eli_cpu_get();
#if defined(__x86_64__) || defined(__i386__)
    if (eli_kernels_avx2_table.name && f->avx2 && f->fma && f->f16c) {
        overlay(&avx2_table, &ref_table, &eli_kernels_avx2_table);
        apply(&avx2_table, &eli_tquant_avx2_table);
        avx2_table.kvq.pv = avx2_table.attn_pv[ELI_TYPE_F32];
        best_table = &avx2_table;
        /* the AVX-512 table covers some formats only: laid over the AVX2 one */
        if (eli_kernels_avx512_table.name && f->avx512f && f->avx512bw && f->avx512vl && f->avx512vnni) {
            overlay(&avx512_table, &avx2_table, &eli_kernels_avx512_table);
            apply(&avx512_table, &eli_tquant_avx512_table);
            avx512_table.kvq.pv = avx512_table.attn_pv[ELI_TYPE_F32];
            best_table = &avx512_table;
        }
    }
#endif
#if defined(__aarch64__)
    if (eli_kernels_neon_table.name && f->neon) {
        overlay(&neon_table, &ref_table, &eli_kernels_neon_table);
        apply(&neon_table, &eli_tquant_neon_table);
        neon_table.kvq.pv = neon_table.attn_pv[ELI_TYPE_F32];
        best_table = &neon_table;
        if (eli_kernels_neon_dotprod_table.name && eli_kernels_neon_has_dotprod()) {
            overlay(&neon_dp_table, &ref_table, &eli_kernels_neon_dotprod_table);
            apply(&neon_dp_table, &eli_tquant_neon_table);
            apply(&neon_dp_table, &eli_tquant_neon_dotprod_table);
            neon_dp_table.kvq.pv = neon_dp_table.attn_pv[ELI_TYPE_F32];
            best_table = &neon_dp_table;
        }
    }
#endif
    (void)f;
}

const eli_kernels *eli_kernels_reference(void) {
    pthread_once(&tables_once, init_tables);
    return &ref_table;
}

const eli_kernels *eli_kernels_avx2(void) {
    pthread_once(&tables_once, init_tables);
    return avx2_table.name ? &avx2_table : NULL;
}

const eli_kernels *eli_kernels_avx512(void) {
    pthread_once(&tables_once, init_tables);
    return avx512_table.name ? &avx512_table : NULL;
}

const eli_kernels *eli_kernels_neon(void) {
    pthread_once(&tables_once, init_tables);
    return neon_table.name ? &neon_table : NULL;
}

const eli_kernels *eli_kernels_neon_dotprod(void) {
    pthread_once(&tables_once, init_tables);
    return neon_dp_table.name ? &neon_dp_table : NULL;
}

int eli_kernels_all(const eli_kernels **out, int cap) {
    pthread_once(&tables_once, init_tables);
    const eli_kernels *all[] = {&ref_table, &avx2_table, &avx512_table, &neon_table, &neon_dp_table};
    int n = 0;
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (all[i]->name && n < cap) out[n++] = all[i];
    return n;
}

const eli_kernels *eli_kernels_named(const char *name) {
    pthread_once(&tables_once, init_tables);
    const eli_kernels *all[] = {&ref_table, &avx2_table, &avx512_table, &neon_table, &neon_dp_table};
    for (size_t i = 0; name && i < sizeof all / sizeof all[0]; i++)
        if (all[i]->name && !strcmp(name, all[i]->name)) return all[i];
    return NULL;
}

const eli_kernels *eli_kernels_best(void) {
    pthread_once(&tables_once, init_tables);
    return best_table;
}
