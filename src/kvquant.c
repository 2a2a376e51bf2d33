/* The low-bit KV cache types (kvquant.h): codecs, quantizers, the query side and the scalar reference of
 * the attention kernels. The float steps of the kernels are written in the exact order kvquant.h states,
 * with explicit FMAs, so that the SIMD tables can reproduce them bit for bit. */
#include "fp_exact.h"

#include "kvquant.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kvquant_tables.h"
#include "quants.h"
#include "tquant.h"

/* ------------------------------------------------------------------------------------------------------
 * Types
 * ---------------------------------------------------------------------------------------------------- */

static const char *const kvq_names[ELI_KVQ_COUNT] = {"tbq4_0", "tbq3_0", "q4_polar", "qjl1_256"};

int eli_kvq_is_type(uint32_t type) { return type >= ELI_KVQ_FIRST && type < ELI_KVQ_FIRST + ELI_KVQ_COUNT; }

const char *eli_kvq_name(uint32_t type) { return eli_kvq_is_type(type) ? kvq_names[type - ELI_KVQ_FIRST] : NULL; }

int eli_kvq_keys_only(uint32_t type) { return type == ELI_KV_QJL1_256; }

static int dim_ok(int64_t d) { return d >= ELI_KVQ_MIN_DIM && d <= ELI_KVQ_MAX_DIM && (d & (d - 1)) == 0; }

/* tbq: the width of the per-16 multipliers (tquant.h) that fits the bit budget, 4.25 / 3.25 bits per value
 * with the fp16 scale: what is left after the codes and the scale is d/4 - 16 bits */
static int tbq_sub_bits(int64_t d) { return d >= 256 ? 3 : d == 128 ? 2 : 0; }
static size_t tbq_sub_bytes(int64_t d) { return (size_t)(tbq_sub_bits(d) * d / 128); }

size_t eli_kvq_head_bytes(uint32_t type, int64_t d) {
    if (!dim_ok(d)) return 0;
    const size_t n = (size_t)d;
    switch (type) {
    case ELI_KV_TBQ4_0: return 2 + tbq_sub_bytes(d) + n / 2;
    case ELI_KV_TBQ3_0: return 2 + tbq_sub_bytes(d) + n / 4 + n / 8;
    case ELI_KV_Q4_POLAR: return ELI_KVQ_POLAR_L1_BYTES(n) + ELI_KVQ_POLAR_UP_BYTES(n) + 2;
    case ELI_KV_QJL1_256: return n / 8 + 2;
    default: return 0;
    }
}

/* ------------------------------------------------------------------------------------------------------
 * The QJL matrix: only integer arithmetic and IEEE-exact operations (+ - * / sqrt, frexp), so every
 * machine builds the same one.
 * ---------------------------------------------------------------------------------------------------- */

#define QJL_SEED 0x6b76712d716a6c31ULL      /* "kvq-qjl1" */

static uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* uniform in (-1, 1), 53 random bits */
static double uniform_pm1(uint64_t *s) { return ((double)(splitmix64(s) >> 11) + 0.5) * 0x1p-52 - 1.0; }

/* ln x for x in (0, 1]: frexp and the atanh series (|z| <= 0.172, 20 terms: far below double rounding) */
static double exact_log(double x) {
    int e;
    double m = frexp(x, &e);
    if (m < 0.70710678118654752440) {
        m *= 2.0;
        e--;
    }
    const double z = (m - 1.0) / (m + 1.0), z2 = z * z;
    double term = z, sum = 0.0;
    for (int k = 1; k < 40; k += 2) {
        sum += term / k;
        term *= z2;
    }
    return 2.0 * sum + e * 0.69314718055994530942;
}

/* standard normals by Marsaglia's polar method, two per accepted pair */
static void fill_gaussian(float *out, size_t n, uint64_t seed) {
    uint64_t s = seed;
    for (size_t i = 0; i < n;) {
        double u, v, r;
        do {
            u = uniform_pm1(&s);
            v = uniform_pm1(&s);
            r = u * u + v * v;
        } while (r >= 1.0 || r == 0.0);
        const double f = sqrt(-2.0 * exact_log(r) / r);
        out[i++] = (float)(u * f);
        if (i < n) out[i++] = (float)(v * f);
    }
}

/* ------------------------------------------------------------------------------------------------------
 * Codec
 * ---------------------------------------------------------------------------------------------------- */

eli_kvq *eli_kvq_create(uint32_t type, int64_t head_dim, eli_error *err) {
    if (!eli_kvq_is_type(type)) {
        eli_fail(err, ELI_ERR_INVALID_ARG, "KV cache type id %u is not a low-bit KV type", (unsigned)type);
        return NULL;
    }
    if (!dim_ok(head_dim)) {
        eli_fail(err, ELI_ERR_INVALID_ARG, "KV cache type %s needs a head dim that is a power of two in %d..%d, not %lld",
                 eli_kvq_name(type), ELI_KVQ_MIN_DIM, ELI_KVQ_MAX_DIM, (long long)head_dim);
        return NULL;
    }
    eli_kvq *c = calloc(1, sizeof *c);
    if (!c) goto oom;
    const int d = (int)head_dim;
    c->type = type;
    c->d = d;
    while ((1 << c->log2d) < d) c->log2d++;
    c->head_bytes = eli_kvq_head_bytes(type, d);
    if (type == ELI_KV_QJL1_256) {
        c->query_bytes = (size_t)d * sizeof(float);
        c->qjl_factor = (float)(1.25331413731550025121 / d); /* sqrt(pi / 2) / d */
        c->proj = malloc((size_t)d * (size_t)d * sizeof(float));
        if (!c->proj) goto oom;
        fill_gaussian(c->proj, (size_t)d * (size_t)d, QJL_SEED);
        return c;
    }
    if (type == ELI_KV_Q4_POLAR) {
        c->query_bytes = (size_t)d * sizeof(float);
        c->cos1 = kvq_polar_cos1;
        c->sin1 = kvq_polar_sin1;
        c->cosl = kvq_polar_cos;
        c->sinl = kvq_polar_sin;
    } else {
        c->query_bytes = 64 + ((size_t)d + 63) / 64 * 64;
        c->cb = type == ELI_KV_TBQ4_0 ? &eli_tq_cb4 : &eli_tq_cb3;
        c->sub_bits = tbq_sub_bits(d);
        c->sub_bytes = tbq_sub_bytes(d);
    }
    return c;
oom:
    eli_kvq_free(c);
    eli_fail(err, ELI_ERR_OOM, "out of memory for the %s codec of head dim %lld", eli_kvq_name(type), (long long)head_dim);
    return NULL;
}

void eli_kvq_free(eli_kvq *c) {
    if (!c) return;
    free(c->proj);
    free(c);
}

static void rotate(const eli_kvq *c, const float *x, float *y) { eli_tq_rotate(x, y, c->d); }
static void unrotate(const eli_kvq *c, const float *y, float *x) { eli_tq_unrotate(y, x, c->d); }

/* the scale that makes s * u project onto y exactly: |y|^2 / <y, u> (0 when that is not a positive number) */
static float projecting_scale(const float *y, const float *u, int d) {
    double yy = 0.0, yu = 0.0;
    for (int i = 0; i < d; i++) {
        yy += (double)y[i] * y[i];
        yu += (double)y[i] * u[i];
    }
    const double s = yy / yu;
    return yu > 0.0 && s < 65504.0 ? (float)s : yu > 0.0 && s >= 65504.0 ? 65504.0f : 0.0f;
}

static void put_f16(uint8_t *p, float v) {
    const eli_fp16 h = eli_fp32_to_fp16(v);
    memcpy(p, &h, 2);
}

static float get_f16(const uint8_t *p) {
    eli_fp16 h;
    memcpy(&h, p, 2);
    return eli_fp16_to_fp32(h);
}

/* ------------------------------------------------------------------------------------------------------
 * tbq4_0 / tbq3_0 code layouts (kvquant.h)
 * ---------------------------------------------------------------------------------------------------- */

static void tbq_pack(const eli_kvq *c, const uint8_t *code, uint8_t *qs) {
    const int d = c->d;
    if (c->type == ELI_KV_TBQ4_0) {
        eli_tq_pack4(code, d, qs);
        return;
    }
    const int G = d < 128 ? d : 128, Q = G / 4, E = G / 8;
    for (int g0 = 0; g0 < d; g0 += G, qs += Q + E) {
        memset(qs, 0, (size_t)(Q + E));
        for (int m = 0; m < 4; m++)
            for (int j = 0; j < Q; j++) {
                const uint8_t v = code[g0 + m * Q + j];
                qs[j] |= (uint8_t)((v & 3) << (2 * m));
                if (v & 4) qs[Q + j % E] |= (uint8_t)(1u << (2 * m + j / E));
            }
    }
}

static void tbq_unpack(const eli_kvq *c, const uint8_t *qs, uint8_t *code) {
    const int d = c->d;
    if (c->type == ELI_KV_TBQ4_0) {
        eli_tq_unpack4(qs, d, code);
        return;
    }
    const int G = d < 128 ? d : 128, Q = G / 4, E = G / 8;
    for (int g0 = 0; g0 < d; g0 += G, qs += Q + E)
        for (int m = 0; m < 4; m++)
            for (int j = 0; j < Q; j++)
                code[g0 + m * Q + j] =
                    (uint8_t)(((qs[j] >> (2 * m)) & 3) | (((qs[Q + j % E] >> (2 * m + j / E)) & 1) << 2));
}

void eli_kvq_tbq_mults(const eli_kvq *c, const uint8_t *blk, int32_t *m) {
    /* the stream whole bytes at a time (the decoders call this once per row): 3 bytes hold 8 fields of 3 bits,
     * one byte 4 fields of 2 (d / 16 is a multiple of 8 from head dim 128 on) */
    const uint8_t *p = blk + 2;
    const int n = c->d / 16;
    if (c->sub_bits == 3)
        for (int k = 0; k < n; k += 8, p += 3) {
            const uint32_t v = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16;
            for (int i = 0; i < 8; i++) m[k + i] = eli_tq_mult(3, (v >> (3 * i)) & 7);
        }
    else if (c->sub_bits == 2)
        for (int k = 0; k < n; k += 4, p++)
            for (int i = 0; i < 4; i++) m[k + i] = eli_tq_mult(2, (unsigned)(*p >> (2 * i)) & 3);
    else
        for (int k = 0; k < n; k++) m[k] = eli_tq_mult(0, 0);
}

static void tbq_quantize_head(const eli_kvq *c, const float *x, uint8_t *dst) {
    float y[ELI_KVQ_MAX_DIM];
    uint8_t code[ELI_KVQ_MAX_DIM], sub[ELI_KVQ_MAX_DIM / 16];
    rotate(c, x, y);
    const float s = eli_tq_quantize(c->cb, c->sub_bits, 1, 0, y, c->d, code, sub);
    put_f16(dst, s);
    memset(dst + 2, 0, c->sub_bytes);
    for (int k = 0; c->sub_bits && k < c->d / 16; k++) eli_tq_bits_put(dst + 2, (size_t)k * c->sub_bits, sub[k], c->sub_bits);
    tbq_pack(c, code, dst + 2 + c->sub_bytes);
}

static void tbq_dequantize_head(const eli_kvq *c, const uint8_t *src, float *x) {
    uint8_t code[ELI_KVQ_MAX_DIM];
    int32_t m[ELI_KVQ_MAX_DIM / 16];
    const float s = get_f16(src);
    eli_kvq_tbq_mults(c, src, m);
    tbq_unpack(c, src + 2 + c->sub_bytes, code);
    for (int i = 0; i < c->d; i++) x[i] = s * (float)(m[i / 16] * c->cb->levels[code[i]]);
    unrotate(c, x, x);
}

/* ------------------------------------------------------------------------------------------------------
 * q4_polar
 * ---------------------------------------------------------------------------------------------------- */

void eli_kvq_polar_level(const eli_kvq *c, const uint8_t *blk, int l, float *rho) {
    const int d = c->d, n = d >> l;
    const uint8_t *up = blk + ELI_KVQ_POLAR_L1_BYTES(d);
    const size_t base = (size_t)d / 2 - ((size_t)d >> (l - 1));
    for (int i = 0; i < n; i++) {
        const unsigned k = eli_tq_bits_get(up, ELI_KVQ_POLAR_UP_BYTES(d), 3 * (base + (size_t)i), 3);
        const float a = rho[i];
        rho[i] = a * c->cosl[l - 2][k];
        rho[i + n] = a * c->sinl[l - 2][k];
    }
}

/* The unit vector a head decodes to, as its two halves e (values 0..d/2-1) and o (d/2..d-1). The radii tree
 * is walked top-down in place: rho[i] and rho[i + n] of level l - 1 from rho[i] of level l. */
static void polar_unit(const eli_kvq *c, const uint8_t *blk, float *e, float *o) {
    const int d = c->d, h = d / 2;
    float rho[ELI_KVQ_MAX_DIM / 2];
    rho[0] = 1.0f;
    for (int l = c->log2d; l >= 2; l--) eli_kvq_polar_level(c, blk, l, rho);
    const size_t l1_bytes = ELI_KVQ_POLAR_L1_BYTES(d);
    for (int i = 0; i < h; i++) {
        const unsigned k = eli_tq_bits_get(blk, l1_bytes, 5 * (size_t)i, 5);
        e[i] = rho[i] * c->cos1[k];
        o[i] = rho[i] * c->sin1[k];
    }
}

static void polar_quantize_head(const eli_kvq *c, const float *x, uint8_t *dst) {
    const int d = c->d, h = d / 2;
    float y[ELI_KVQ_MAX_DIM], rho[ELI_KVQ_MAX_DIM / 2], u[ELI_KVQ_MAX_DIM];
    rotate(c, x, y);
    memset(dst, 0, c->head_bytes);
    uint8_t *up = dst + ELI_KVQ_POLAR_L1_BYTES(d);
    const float cell = 32.0f / 6.28318530717958647692f;
    for (int i = 0; i < h; i++) {
        const float a = y[i], b = y[i + h];
        rho[i] = sqrtf(a * a + b * b);
        float t = atan2f(b, a) * cell; /* (-16, 16]; a NaN stays NaN */
        if (t < 0.0f) t += 32.0f;
        const unsigned k = t >= 0.0f && t < 32.0f ? (unsigned)t : 0;
        eli_tq_bits_put(dst, 5 * (size_t)i, k, 5);
    }
    for (int l = 2; l <= c->log2d; l++) {
        const int n = d >> l;
        const size_t base = (size_t)h - ((size_t)d >> (l - 1));
        for (int i = 0; i < n; i++) {
            const float a = rho[i], b = rho[i + n];
            const float t = atan2f(b, a); /* [0, pi/2]: both radii are >= 0 */
            unsigned k = 0;
            for (int j = 0; j < 7; j++) k += t > kvq_polar_bound[l - 2][j];
            eli_tq_bits_put(up, 3 * (base + (size_t)i), k, 3);
            rho[i] = sqrtf(a * a + b * b);
        }
    }
    polar_unit(c, dst, u, u + h);
    put_f16(dst + c->head_bytes - 2, projecting_scale(y, u, d));
}

static void polar_dequantize_head(const eli_kvq *c, const uint8_t *src, float *x) {
    const int h = c->d / 2;
    const float r = get_f16(src + c->head_bytes - 2);
    polar_unit(c, src, x, x + h);
    for (int i = 0; i < c->d; i++) x[i] *= r;
    unrotate(c, x, x);
}

/* ------------------------------------------------------------------------------------------------------
 * qjl1_256
 * ---------------------------------------------------------------------------------------------------- */

static void project(const eli_kvq *c, const float *x, float *z) {
    for (int r = 0; r < c->d; r++) {
        const float *s = c->proj + (size_t)r * c->d;
        double acc = 0.0;
        for (int i = 0; i < c->d; i++) acc += (double)s[i] * x[i];
        z[r] = (float)acc;
    }
}

static void qjl_quantize_head(const eli_kvq *c, const float *x, uint8_t *dst) {
    const int d = c->d;
    float z[ELI_KVQ_MAX_DIM];
    project(c, x, z);
    memset(dst, 0, (size_t)d / 8);
    double kk = 0.0;
    for (int i = 0; i < d; i++) {
        if (!(z[i] < 0.0f)) dst[i / 8] |= (uint8_t)(1u << (i % 8));
        kk += (double)x[i] * x[i];
    }
    const double norm = sqrt(kk);
    put_f16(dst + d / 8, norm < 65504.0 ? (float)norm : norm >= 65504.0 ? 65504.0f : 0.0f);
}

/* qjl_factor * |k| * S^T sign(S k): its dot product with q is the estimator's value */
static void qjl_dequantize_head(const eli_kvq *c, const uint8_t *src, float *x) {
    const int d = c->d;
    const float w = get_f16(src + d / 8) * c->qjl_factor;
    for (int i = 0; i < d; i++) x[i] = 0.0f;
    for (int r = 0; r < d; r++) {
        const float sg = (src[r / 8] >> (r % 8)) & 1 ? w : -w;
        const float *s = c->proj + (size_t)r * d;
        for (int i = 0; i < d; i++) x[i] += sg * s[i];
    }
}

/* ------------------------------------------------------------------------------------------------------
 * Rows, queries
 * ---------------------------------------------------------------------------------------------------- */

void eli_kvq_quantize(const eli_kvq *c, const float *x, int n_head, void *dst) {
    uint8_t *p = dst;
    for (int h = 0; h < n_head; h++, x += c->d, p += c->head_bytes) switch (c->type) {
        case ELI_KV_TBQ4_0:
        case ELI_KV_TBQ3_0: tbq_quantize_head(c, x, p); break;
        case ELI_KV_Q4_POLAR: polar_quantize_head(c, x, p); break;
        default: qjl_quantize_head(c, x, p); break;
        }
}

void eli_kvq_dequantize(const eli_kvq *c, const void *src, int n_head, float *x) {
    const uint8_t *p = src;
    for (int h = 0; h < n_head; h++, x += c->d, p += c->head_bytes) switch (c->type) {
        case ELI_KV_TBQ4_0:
        case ELI_KV_TBQ3_0: tbq_dequantize_head(c, p, x); break;
        case ELI_KV_Q4_POLAR: polar_dequantize_head(c, p, x); break;
        default: qjl_dequantize_head(c, p, x); break;
        }
}

void eli_kvq_prepare_query(const eli_kvq *c, const float *q, void *qp) {
    if (c->type == ELI_KV_QJL1_256) {
        project(c, q, qp);
        return;
    }
    if (c->type == ELI_KV_Q4_POLAR) {
        rotate(c, q, qp);
        return;
    }
    float y[ELI_KVQ_MAX_DIM];
    rotate(c, q, y);
    float amax = 0.0f;
    for (int i = 0; i < c->d; i++) amax = fabsf(y[i]) > amax ? fabsf(y[i]) : amax;
    const float id = amax > 0.0f && amax <= 3.4e38f ? 127.0f / amax : 0.0f;
    int8_t *q8 = (int8_t *)qp + 64;
    for (int i = 0; i < c->d; i++) {
        const float v = y[i] * id; /* |v| <= 127 */
        const int r = v >= 0.0f ? (int)(v + 0.5f) : -(int)(0.5f - v);
        q8[i] = (int8_t)(r > 127 ? 127 : r < -127 ? -127 : r);
    }
    const float dq = id > 0.0f ? amax / 127.0f : 0.0f;
    memcpy(qp, &dq, sizeof dq);
}

void eli_kvq_finish(const eli_kvq *c, const float *acc, float *out) { unrotate(c, acc, out); }

/* ------------------------------------------------------------------------------------------------------
 * Reference kernels
 * ---------------------------------------------------------------------------------------------------- */

static float lanes8_total(const float a[8]) {
    return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
}

float eli_kvq_polar_dot_ref(const eli_kvq *c, const float *q, const float *x) {
    const int h = c->d / 2;
    float acc[8] = {0};
    for (int i = 0; i < h; i++) {
        acc[i % 8] = fmaf(q[i], x[i], acc[i % 8]);
        acc[i % 8] = fmaf(q[i + h], x[i + h], acc[i % 8]);
    }
    return lanes8_total(acc);
}

void eli_kvq_score_decoded(const eli_kvq *c, int nc, const uint8_t *rows, size_t rb, int G, const void *qp, float *s,
                           size_t ss, eli_kvq_decode_fn decode, eli_kvq_dot_fn dot) {
    float x[ELI_KVQ_MAX_DIM];
    for (int j = 0; j < nc; j++) {
        const float scale = decode(c, rows + (size_t)j * rb, x);
        for (int g = 0; g < G; g++)
            s[(size_t)g * ss + j] = scale * dot(c, (const float *)((const uint8_t *)qp + (size_t)g * c->query_bytes), x);
    }
}

void eli_kvq_score_ref(const eli_kvq *c, int nc, const uint8_t *rows, size_t rb, int G, const void *qp, float *s,
                       size_t ss) {
    const int d = c->d;
    for (int j = 0; j < nc; j++) {
        const uint8_t *blk = rows + (size_t)j * rb;
        if (c->type == ELI_KV_TBQ4_0 || c->type == ELI_KV_TBQ3_0) {
            uint8_t code[ELI_KVQ_MAX_DIM];
            int32_t m[ELI_KVQ_MAX_DIM / 16];
            eli_kvq_tbq_mults(c, blk, m);
            tbq_unpack(c, blk + 2 + c->sub_bytes, code);
            const float sk = get_f16(blk);
            for (int g = 0; g < G; g++) {
                const uint8_t *qg = (const uint8_t *)qp + (size_t)g * c->query_bytes;
                const int8_t *q8 = (const int8_t *)(qg + 64);
                float dq;
                memcpy(&dq, qg, sizeof dq);
                int32_t isum = 0;
                for (int i0 = 0; i0 < d; i0 += 16) {
                    int32_t part = 0;
                    for (int i = i0; i < i0 + 16; i++) part += q8[i] * c->cb->levels[code[i]];
                    isum += m[i0 / 16] * part;
                }
                s[(size_t)g * ss + j] = (sk * dq) * (float)isum;
            }
        } else if (c->type == ELI_KV_Q4_POLAR) {
            eli_kvq_score_decoded(c, 1, blk, rb, G, qp, s + j, ss, eli_kvq_decode_ref, eli_kvq_polar_dot_ref);
        } else {
            const float w = get_f16(blk + d / 8) * c->qjl_factor;
            for (int g = 0; g < G; g++) {
                const float *z = (const float *)((const uint8_t *)qp + (size_t)g * c->query_bytes);
                float acc[8] = {0};
                for (int i = 0; i < d; i++) acc[i % 8] += (blk[i / 8] >> (i % 8)) & 1 ? z[i] : -z[i];
                s[(size_t)g * ss + j] = w * lanes8_total(acc);
            }
        }
    }
}

static float decode_tbq(const eli_kvq *c, const uint8_t *blk, float *x) {
    uint8_t code[ELI_KVQ_MAX_DIM];
    int32_t m[ELI_KVQ_MAX_DIM / 16];
    eli_kvq_tbq_mults(c, blk, m);
    tbq_unpack(c, blk + 2 + c->sub_bytes, code);
    for (int i = 0; i < c->d; i++) x[i] = (float)(m[i / 16] * c->cb->levels[code[i]]);
    return get_f16(blk);
}

static float decode_polar(const eli_kvq *c, const uint8_t *blk, float *x) {
    polar_unit(c, blk, x, x + c->d / 2);
    return get_f16(blk + c->head_bytes - 2);
}

float eli_kvq_decode_ref(const eli_kvq *c, const uint8_t *blk, float *x) {
    return c->type == ELI_KV_Q4_POLAR ? decode_polar(c, blk, x) : decode_tbq(c, blk, x);
}

void eli_kvq_pv_fma(int64_t d, int nc, const void *rows, size_t rb, int G, const float *p, size_t ss, float *out) {
    for (int j = 0; j < nc; j++) {
        const float *r = (const float *)((const uint8_t *)rows + (size_t)j * rb);
        for (int g = 0; g < G; g++)
            for (int64_t i = 0; i < d; i++) out[(size_t)g * d + i] = fmaf(p[(size_t)g * ss + j], r[i], out[(size_t)g * d + i]);
    }
}

#define DECODED_ROWS 16
#define DECODED_HEADS 8

void eli_kvq_accum_decoded(const eli_kvq *c, int nc, const uint8_t *rows, size_t rb, int G, const float *p, size_t ss,
                           float *acc, eli_kvq_decode_fn decode, eli_kvq_pv_fn pv) {
    const int d = c->d;
    float x[DECODED_ROWS][ELI_KVQ_MAX_DIM], scale[DECODED_ROWS], w[DECODED_HEADS][DECODED_ROWS];
    for (int j0 = 0; j0 < nc; j0 += DECODED_ROWS) {
        const int n = nc - j0 < DECODED_ROWS ? nc - j0 : DECODED_ROWS;
        for (int j = 0; j < n; j++) scale[j] = decode(c, rows + (size_t)(j0 + j) * rb, x[j]);
        for (int g0 = 0; g0 < G; g0 += DECODED_HEADS) {
            const int gb = G - g0 < DECODED_HEADS ? G - g0 : DECODED_HEADS;
            for (int g = 0; g < gb; g++)
                for (int j = 0; j < n; j++) w[g][j] = p[(size_t)(g0 + g) * ss + j0 + j] * scale[j];
            pv(d, n, x, sizeof x[0], gb, &w[0][0], DECODED_ROWS, acc + (size_t)g0 * d);
        }
    }
}
