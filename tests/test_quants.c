/* Tests of the weight/activation formats (src/quants.c) against independent references:
 *  - the golden GGUF files: every quantized tensor written by llama-quantize is re-quantized from the F32
 *    master with our quantizer and compared byte for byte; dequantized tensors are compared with the master;
 *  - dot products against the f64 dot of the dequantized operands;
 *  - fp16 / bf16 conversions exhaustively against arithmetic references (ldexp, nearest-value search). */
#include <float.h>
#include <math.h>
#include <stdint.h>

#include "gguf.h"
#include "quants.h"
#include "test.h"

/* ---------------------------------------------------------------------------------------------------- */
/* Small deterministic PRNG (splitmix64) */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rng_u64(void) {
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double rng_uniform(void) { return (double)(rng_u64() >> 11) * 0x1p-53; } /* [0, 1) */

static float rng_normal(void) {
    double u1 = rng_uniform(), u2 = rng_uniform();
    if (u1 < 1e-300) u1 = 1e-300;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

static uint32_t f2u(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float u2f(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* ---------------------------------------------------------------------------------------------------- */
/* (e) traits table */

typedef struct {
    uint32_t id;
    const char *name;
    uint32_t bs, ts;
    int computable; /* has dequantize + quantize */
    int has_dot;
} expected_type;

/* Sizes as in ggml's type_traits (ggml/src/ggml.c) and block structs (ggml-common.h). */
static const expected_type expected_types[] = {
    {ELI_TYPE_F32, "f32", 1, 4, 1, 1},          {ELI_TYPE_F16, "f16", 1, 2, 1, 1},
    {ELI_TYPE_Q4_0, "q4_0", 32, 18, 1, 1},      {ELI_TYPE_Q4_1, "q4_1", 32, 20, 1, 1},
    {ELI_TYPE_Q5_0, "q5_0", 32, 22, 1, 1},      {ELI_TYPE_Q5_1, "q5_1", 32, 24, 1, 1},
    {ELI_TYPE_Q8_0, "q8_0", 32, 34, 1, 1},      {ELI_TYPE_Q8_1, "q8_1", 32, 36, 1, 0},
    {ELI_TYPE_Q2_K, "q2_K", 256, 84, 0, 0},     {ELI_TYPE_Q3_K, "q3_K", 256, 110, 0, 0},
    {ELI_TYPE_Q4_K, "q4_K", 256, 144, 1, 1},    {ELI_TYPE_Q5_K, "q5_K", 256, 176, 1, 1},
    {ELI_TYPE_Q6_K, "q6_K", 256, 210, 1, 1},    {ELI_TYPE_Q8_K, "q8_K", 256, 292, 1, 0},
    {ELI_TYPE_IQ2_XXS, "iq2_xxs", 256, 66, 0, 0}, {ELI_TYPE_IQ2_XS, "iq2_xs", 256, 74, 0, 0},
    {ELI_TYPE_IQ3_XXS, "iq3_xxs", 256, 98, 0, 0}, {ELI_TYPE_IQ1_S, "iq1_s", 256, 50, 0, 0},
    {ELI_TYPE_IQ4_NL, "iq4_nl", 32, 18, 0, 0},  {ELI_TYPE_IQ3_S, "iq3_s", 256, 110, 0, 0},
    {ELI_TYPE_IQ2_S, "iq2_s", 256, 82, 0, 0},   {ELI_TYPE_IQ4_XS, "iq4_xs", 256, 136, 0, 0},
    {ELI_TYPE_I8, "i8", 1, 1, 0, 0},            {ELI_TYPE_I16, "i16", 1, 2, 0, 0},
    {ELI_TYPE_I32, "i32", 1, 4, 0, 0},          {ELI_TYPE_I64, "i64", 1, 8, 0, 0},
    {ELI_TYPE_F64, "f64", 1, 8, 0, 0},          {ELI_TYPE_IQ1_M, "iq1_m", 256, 56, 0, 0},
    {ELI_TYPE_BF16, "bf16", 1, 2, 1, 1},        {ELI_TYPE_TQ1_0, "tq1_0", 256, 54, 0, 0},
    {ELI_TYPE_TQ2_0, "tq2_0", 256, 66, 0, 0},   {ELI_TYPE_MXFP4, "mxfp4", 32, 17, 0, 0},
    /* ours (quants.h), tested in tests/test_tq4.c */
    {ELI_TYPE_TQ4_0, "tq4_0", 256, 136, 1, 1},  {ELI_TYPE_Q8_TQ, "q8_tq", 256, 260, 1, 0},
};
#define N_EXPECTED (sizeof expected_types / sizeof expected_types[0])

static void test_traits(void) {
    int seen[ELI_TYPE_COUNT] = {0};
    for (size_t i = 0; i < N_EXPECTED; i++) {
        const expected_type *e = &expected_types[i];
        seen[e->id] = 1;
        const eli_type_traits *t = eli_type_info(e->id);
        CHECK(t != NULL, "type %u missing", e->id);
        if (!t) continue;
        CHECK(strcmp(t->name, e->name) == 0, "type %u name %s, want %s", e->id, t->name, e->name);
        CHECK(strcmp(eli_type_name(e->id), e->name) == 0, "eli_type_name(%u)", e->id);
        CHECK(t->block_size == e->bs && t->type_size == e->ts, "%s: %u/%u, want %u/%u", e->name, t->type_size,
              t->block_size, e->ts, e->bs);
        CHECK((t->dequantize != NULL) == e->computable && (t->quantize != NULL) == e->computable,
              "%s: dequantize/quantize presence", e->name);
        CHECK((t->vec_dot != NULL) == e->has_dot, "%s: vec_dot presence", e->name);
        CHECK(eli_type_info(t->vec_dot_type) != NULL, "%s: vec_dot_type %u", e->name, t->vec_dot_type);
        CHECK(eli_row_size(e->id, 0) == 0, "%s: row of 0", e->name);
        CHECK(eli_row_size(e->id, (int64_t)e->bs * 7) == (size_t)e->ts * 7, "%s: row of 7 blocks", e->name);
        CHECK(eli_row_size(e->id, -(int64_t)e->bs) == 0, "%s: negative n", e->name);
        if (e->bs > 1) CHECK(eli_row_size(e->id, (int64_t)e->bs + 1) == 0, "%s: partial block", e->name);
    }
    /* vec_dot_type pairing as in ggml-cpu's type_traits_cpu. */
    CHECK(eli_type_info(ELI_TYPE_Q4_0)->vec_dot_type == ELI_TYPE_Q8_0, "q4_0 vec_dot_type");
    CHECK(eli_type_info(ELI_TYPE_Q5_0)->vec_dot_type == ELI_TYPE_Q8_0, "q5_0 vec_dot_type");
    CHECK(eli_type_info(ELI_TYPE_Q8_0)->vec_dot_type == ELI_TYPE_Q8_0, "q8_0 vec_dot_type");
    CHECK(eli_type_info(ELI_TYPE_Q4_1)->vec_dot_type == ELI_TYPE_Q8_1, "q4_1 vec_dot_type");
    CHECK(eli_type_info(ELI_TYPE_Q5_1)->vec_dot_type == ELI_TYPE_Q8_1, "q5_1 vec_dot_type");
    CHECK(eli_type_info(ELI_TYPE_Q4_K)->vec_dot_type == ELI_TYPE_Q8_K, "q4_K vec_dot_type");
    CHECK(eli_type_info(ELI_TYPE_Q5_K)->vec_dot_type == ELI_TYPE_Q8_K, "q5_K vec_dot_type");
    CHECK(eli_type_info(ELI_TYPE_Q6_K)->vec_dot_type == ELI_TYPE_Q8_K, "q6_K vec_dot_type");
    CHECK(eli_type_info(ELI_TYPE_F16)->vec_dot_type == ELI_TYPE_F16, "f16 vec_dot_type");
    CHECK(eli_type_info(ELI_TYPE_BF16)->vec_dot_type == ELI_TYPE_BF16, "bf16 vec_dot_type");
    CHECK(eli_type_info(ELI_TYPE_F32)->vec_dot_type == ELI_TYPE_F32, "f32 vec_dot_type");

    /* Ids that are not ggml types. */
    for (uint32_t id = 0; id < ELI_TYPE_COUNT; id++) {
        if (seen[id]) continue;
        CHECK(eli_type_info(id) == NULL, "id %u should be unknown", id);
        CHECK(strcmp(eli_type_name(id), "unknown") == 0, "name of id %u", id);
        CHECK(eli_row_size(id, 256) == 0, "row size of id %u", id);
    }
    const uint32_t bad[] = {4, 5, 31, 32, 33, 36, 37, 38, 40, 41, 255, 1000, 0xffffffffu};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK(eli_type_info(bad[i]) == NULL, "id %u should be unknown", bad[i]);
        CHECK(eli_row_size(bad[i], 256) == 0, "row size of id %u", bad[i]);
        CHECK(strcmp(eli_type_name(bad[i]), "unknown") == 0, "name of id %u", bad[i]);
    }
    /* Overflowing and odd sizes. */
    CHECK(eli_row_size(ELI_TYPE_Q4_K, 255) == 0, "q4_K n=255");
    CHECK(eli_row_size(ELI_TYPE_Q4_K, 512) == 288, "q4_K n=512");
    CHECK(eli_row_size(ELI_TYPE_Q8_0, 4096) == 4352, "q8_0 n=4096");
    CHECK(eli_row_size(ELI_TYPE_F64, INT64_MAX) == 0 || sizeof(size_t) > 8, "f64 overflow");
    CHECK(eli_row_size(ELI_TYPE_F32, INT64_MIN) == 0, "INT64_MIN");
}

/* ---------------------------------------------------------------------------------------------------- */
/* (d) fp16 / bf16 */

/* Independent value of a half: (-1)^s * 2^(e-15) * (1 + m/1024), subnormals m * 2^-24. */
static double half_ref(uint16_t h) {
    const int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    double v;
    if (e == 0) v = ldexp((double)m, -24);
    else if (e == 31) v = m ? NAN : INFINITY;
    else v = ldexp((double)(1024 + m), e - 25);
    return s ? -v : v;
}

/* Reference fp32 -> fp16: nearest among the (monotonic) positive halves by binary search, ties to even. */
static uint16_t half_from_float_ref(float f) {
    if (isnan(f)) return 0x7e00;
    const uint16_t sign = signbit(f) ? 0x8000 : 0;
    const double a = fabs((double)f);
    if (a >= 65520.0) return sign | 0x7c00;
    uint16_t lo = 0, hi = 0x7bff; /* largest h with value <= a */
    while (lo < hi) {
        const uint16_t mid = (uint16_t)((lo + hi + 1) / 2);
        if (half_ref(mid) <= a) lo = mid;
        else hi = mid - 1;
    }
    const uint16_t up = (uint16_t)(lo + 1); /* 0x7c00 (inf) above 65504, handled by the >= 65520 rule */
    const double dlo = a - half_ref(lo);
    const double dhi = (up == 0x7c00 ? 65536.0 : half_ref(up)) - a;
    uint16_t r;
    if (dlo < dhi) r = lo;
    else if (dhi < dlo) r = up;
    else r = (lo & 1) ? up : lo;
    return sign | r;
}

static void test_fp16(void) {
    int bad_value = 0, bad_trip = 0, bad_nan = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        const float f = eli_fp16_to_fp32((eli_fp16)h);
        const double ref = half_ref((uint16_t)h);
        const int is_nan = ((h >> 10) & 31) == 31 && (h & 1023);
        if (is_nan) {
            /* NaN stays NaN, sign kept; back to half: quiet bit set, payload and sign kept. */
            const uint16_t back = eli_fp32_to_fp16(f);
            if (!isnan(f) || (signbit(f) != 0) != ((h & 0x8000) != 0) || back != (h | 0x0200)) bad_nan++;
            continue;
        }
        if ((double)f != ref || (signbit(f) != 0) != ((h & 0x8000) != 0)) bad_value++;
        if (eli_fp32_to_fp16(f) != h) bad_trip++;
    }
    CHECK(bad_value == 0, "%d halves convert to the wrong float", bad_value);
    CHECK(bad_trip == 0, "%d halves do not round-trip", bad_trip);
    CHECK(bad_nan == 0, "%d NaN halves mishandled", bad_nan);

    /* Ties and their neighbours between every pair of adjacent finite halves, both signs. */
    int bad_tie = 0;
    for (uint32_t h = 0; h < 0x7bff; h++) {
        const double lo = half_ref((uint16_t)h), hi = half_ref((uint16_t)(h + 1));
        const float mid = (float)((lo + hi) / 2); /* 12 significant bits: exact in float */
        if ((double)mid != (lo + hi) / 2) {
            bad_tie++;
            continue;
        }
        const uint16_t even = (h & 1) ? (uint16_t)(h + 1) : (uint16_t)h;
        for (int s = 0; s < 2; s++) {
            const float sg = s ? -1.0f : 1.0f;
            const uint16_t sb = s ? 0x8000 : 0;
            if (eli_fp32_to_fp16(sg * mid) != (sb | even)) bad_tie++;
            if (eli_fp32_to_fp16(sg * nextafterf(mid, 0.0f)) != (sb | h)) bad_tie++;
            if (eli_fp32_to_fp16(sg * nextafterf(mid, INFINITY)) != (sb | (h + 1))) bad_tie++;
        }
    }
    CHECK(bad_tie == 0, "%d tie roundings wrong", bad_tie);

    /* Selected values. */
    struct {
        float f;
        uint16_t h;
    } cases[] = {
        {0.0f, 0x0000},           {-0.0f, 0x8000},          {1.0f, 0x3c00},           {-2.0f, 0xc000},
        {65504.0f, 0x7bff},       {65519.996f, 0x7bff},     {65520.0f, 0x7c00},       {1e9f, 0x7c00},
        {-INFINITY, 0xfc00},      {INFINITY, 0x7c00},       {0x1p-24f, 0x0001},       {0x1p-25f, 0x0000},
        {0x1.000002p-25f, 0x0001}, {0x1.8p-24f, 0x0002},    {0x1.4p-23f, 0x0002},     {0x1p-14f, 0x0400},
        {0x1.ff8p-15f, 0x03ff},   {0x1.ffcp-15f, 0x0400},   {0x1.ffap-15f, 0x03ff},   {0x1.ffep-15f, 0x0400},   {0.1f, 0x2e66},           {1.0f / 3.0f, 0x3555},
        {1.00048828125f, 0x3c00}, {1.00146484375f, 0x3c02}, {-1e-10f, 0x8000},        {FLT_MIN, 0x0000},
        {2049.0f, 0x6800},        {2051.0f, 0x6802},        {0x1.0024p0f, 0x3c01},    {0x1.002p0f, 0x3c00},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const uint16_t h = eli_fp32_to_fp16(cases[i].f);
        CHECK(h == cases[i].h, "fp32_to_fp16(%a) = 0x%04x, want 0x%04x", (double)cases[i].f, h, cases[i].h);
    }
    CHECK((eli_fp32_to_fp16(NAN) & 0x7c00) == 0x7c00 && (eli_fp32_to_fp16(NAN) & 0x3ff) != 0, "NaN -> half NaN");
    CHECK((eli_fp32_to_fp16(u2f(0x7f800001u)) & 0x7e00) == 0x7e00, "signalling NaN becomes quiet, not inf");

    /* Random float bit patterns against the search reference (includes subnormal and overflow ranges). */
    int bad_rand = 0;
    for (int i = 0; i < 300000; i++) {
        const uint64_t r = rng_u64();
        uint32_t u = (uint32_t)r;
        if (i & 1) {
            /* Exponents 95..145: the subnormal, normal and overflow ranges of half. */
            const uint32_t e = 95u + (uint32_t)((r >> 32) % 51u);
            u = (u & 0x807fffffu) | (e << 23);
        }
        const float f = u2f(u);
        if (isnan(f)) continue;
        if (eli_fp32_to_fp16(f) != half_from_float_ref(f)) bad_rand++;
    }
    CHECK(bad_rand == 0, "%d random floats rounded wrongly to half", bad_rand);
}

static void test_bf16(void) {
    int bad_trip = 0, bad_nan = 0;
    for (uint32_t b = 0; b < 65536; b++) {
        const float f = eli_bf16_to_fp32((eli_bf16)b);
        if (f2u(f) != b << 16) bad_trip++;
        const int is_nan = ((b >> 7) & 0xff) == 0xff && (b & 0x7f);
        const uint16_t back = eli_fp32_to_bf16(f);
        if (is_nan) {
            if (back != (b | 0x40)) bad_nan++;
        } else if (back != b) {
            bad_trip++;
        }
    }
    CHECK(bad_trip == 0, "%d bf16 values do not round-trip", bad_trip);
    CHECK(bad_nan == 0, "%d bf16 NaNs mishandled", bad_nan);

    int bad_tie = 0;
    for (uint32_t b = 0; b < 0x7f7f; b++) {
        for (uint32_t s = 0; s < 2; s++) {
            const uint32_t sb = s << 31;
            const uint32_t mid = sb | (b << 16) | 0x8000u;
            const uint16_t even = (uint16_t)((s << 15) | ((b & 1) ? b + 1 : b));
            if (eli_fp32_to_bf16(u2f(mid)) != even) bad_tie++;
            if (eli_fp32_to_bf16(u2f(mid - 1)) != (uint16_t)((s << 15) | b)) bad_tie++;
            if (eli_fp32_to_bf16(u2f(mid + 1)) != (uint16_t)((s << 15) | (b + 1))) bad_tie++;
        }
    }
    CHECK(bad_tie == 0, "%d bf16 tie roundings wrong", bad_tie);
    CHECK(eli_fp32_to_bf16(u2f(0x7f7f8000u)) == 0x7f80, "largest finite tie -> inf");
    CHECK(eli_fp32_to_bf16(u2f(0x7f7f7fffu)) == 0x7f7f, "below the tie stays finite");
    CHECK(eli_fp32_to_bf16(u2f(0x7f800001u)) == 0x7fc0, "signalling NaN -> quiet NaN");
    CHECK(eli_fp32_to_bf16(u2f(0xffc12345u)) == 0xffc1, "quiet NaN keeps sign/payload");
    CHECK(eli_fp32_to_bf16(1e-40f) == (f2u(1e-40f) + 0x7fffu + ((f2u(1e-40f) >> 16) & 1)) >> 16 &&
              eli_fp32_to_bf16(1e-40f) != 0,
          "subnormals are rounded, not flushed");
    CHECK(eli_fp32_to_bf16(1.0f) == 0x3f80 && eli_fp32_to_bf16(-2.0f) == 0xc000, "simple values");
    CHECK(eli_fp32_to_bf16(INFINITY) == 0x7f80 && eli_fp32_to_bf16(-INFINITY) == 0xff80, "infinities");
}

/* ---------------------------------------------------------------------------------------------------- */
/* Quantize / dequantize on synthetic data */

static const uint32_t weight_types[] = {ELI_TYPE_F32, ELI_TYPE_F16, ELI_TYPE_BF16, ELI_TYPE_Q4_0, ELI_TYPE_Q4_1,
                                        ELI_TYPE_Q5_0, ELI_TYPE_Q5_1, ELI_TYPE_Q8_0, ELI_TYPE_Q4_K, ELI_TYPE_Q5_K,
                                        ELI_TYPE_Q6_K};
#define N_WEIGHT_TYPES (sizeof weight_types / sizeof weight_types[0])

/* Upper bound of rms(error)/rms(x) for Gaussian data (the theoretical noise of each format with margin). */
static double rms_bound(uint32_t type) {
    switch (type) {
    case ELI_TYPE_F32: return 0.0;
    case ELI_TYPE_F16: return 3e-4;
    case ELI_TYPE_BF16: return 3e-3;
    case ELI_TYPE_Q8_0: case ELI_TYPE_Q8_1: case ELI_TYPE_Q8_K: return 0.006;
    case ELI_TYPE_Q6_K: return 0.025;
    case ELI_TYPE_Q5_0: case ELI_TYPE_Q5_1: case ELI_TYPE_Q5_K: return 0.05;
    case ELI_TYPE_Q4_0: case ELI_TYPE_Q4_1: case ELI_TYPE_Q4_K: return 0.11;
    default: return 1.0;
    }
}

static void fill(float *x, int64_t n, int kind) {
    for (int64_t i = 0; i < n; i++) {
        switch (kind) {
        case 0: x[i] = 0.02f * rng_normal(); break;                              /* like the weights */
        case 1: x[i] = (float)(rng_uniform() * 2 - 1) * 3.0f; break;              /* uniform */
        case 2: x[i] = rng_normal() * (i % 97 == 0 ? 50.0f : 1.0f); break;        /* outliers */
        case 3: x[i] = (float)(rng_uniform() * 5.0); break;                       /* all positive */
        case 4: x[i] = -1.0f - (float)rng_uniform(); break;                       /* all negative */
        case 5: x[i] = (i / 256) % 2 ? 0.0f : rng_normal(); break;                /* zero super-blocks */
        case 6: x[i] = 1e-20f * rng_normal(); break;                              /* tiny */
        default: x[i] = 0.75f; break;                                             /* constant */
        }
    }
}

static void test_roundtrip(void) {
    enum { N = 4096, KINDS = 8 };
    static float x[N], y[N];
    static uint8_t q[N * 4 + 64];
    for (size_t ti = 0; ti < N_WEIGHT_TYPES; ti++) {
        const uint32_t type = weight_types[ti];
        const eli_type_traits *t = eli_type_info(type);
        for (int kind = 0; kind < KINDS; kind++) {
            fill(x, N, kind);
            memset(q, 0xAB, sizeof q);
            eli_quantize_row(type, x, q, N);
            /* Deterministic and confined to its row size. */
            static uint8_t q2[N * 4 + 64];
            memset(q2, 0xCD, sizeof q2);
            eli_quantize_row(type, x, q2, N);
            const size_t rs = eli_row_size(type, N);
            CHECK(memcmp(q, q2, rs) == 0, "%s kind %d: quantization not deterministic", t->name, kind);
            CHECK(q[rs] == 0xAB && q2[rs] == 0xCD, "%s: wrote past the row", t->name);
            eli_dequantize_row(type, q, y, N);
            double se = 0, sx = 0, maxerr = 0, amax = 0;
            int finite = 1;
            for (int i = 0; i < N; i++) {
                if (!isfinite(y[i])) finite = 0;
                se += ((double)y[i] - x[i]) * ((double)y[i] - x[i]);
                sx += (double)x[i] * x[i];
                if (fabs((double)y[i] - x[i]) > maxerr) maxerr = fabs((double)y[i] - x[i]);
                if (fabs(x[i]) > amax) amax = fabs(x[i]);
            }
            CHECK(finite, "%s kind %d: non-finite dequantized value", t->name, kind);
            if (kind == 0 || kind == 1) {
                const double rel = sqrt(se / sx);
                CHECK(rel <= rms_bound(type), "%s kind %d: rms error %.4g > %.4g", t->name, kind, rel, rms_bound(type));
            }
            if (kind == 7) {
                /* A constant maps to one level in every format. */
                CHECK(maxerr <= 0.75 * 2e-3, "%s: constant block error %g", t->name, maxerr);
            }
            if (kind == 6 && type != ELI_TYPE_F16) {
                /* 1e-20 values: fp16 scales underflow to zero; the result must be (near) zero, not garbage. */
                CHECK(maxerr <= amax * 1.01, "%s: tiny values error %g", t->name, maxerr);
            }
            if (kind == 5) {
                int zeros_ok = 1;
                for (int i = 0; i < N; i++)
                    if ((i / 256) % 2 && y[i] != 0.0f) zeros_ok = 0;
                CHECK(zeros_ok, "%s: zero blocks do not dequantize to zero", t->name);
            }
        }
        /* All zero input. */
        memset(x, 0, sizeof x);
        eli_quantize_row(type, x, q, N);
        eli_dequantize_row(type, q, y, N);
        int zero = 1;
        for (int i = 0; i < N; i++)
            if (y[i] != 0.0f) zero = 0;
        CHECK(zero, "%s: zeros do not survive", t->name);
    }

    /* Activation formats: Q8_K and Q8_1 invariants. */
    fill(x, N, 0);
    eli_quantize_row(ELI_TYPE_Q8_K, x, q, N);
    int bs_ok = 1, range_ok = 1;
    for (int b = 0; b < N / 256; b++) {
        eli_block_q8_K blk;
        memcpy(&blk, q + b * sizeof blk, sizeof blk);
        for (int g = 0; g < 16; g++) {
            int s = 0;
            for (int i = 0; i < 16; i++) {
                s += blk.qs[g * 16 + i];
                if (blk.qs[g * 16 + i] < -127) range_ok = 0;
            }
            if (s != blk.bsums[g]) bs_ok = 0;
        }
    }
    CHECK(bs_ok, "q8_K bsums are not the sums of 16 quants");
    CHECK(range_ok, "q8_K quants must lie in [-127, 127]");
    eli_quantize_row(ELI_TYPE_Q8_1, x, q, N);
    int s_ok = 1;
    for (int b = 0; b < N / 32; b++) {
        eli_block_q8_1 blk;
        memcpy(&blk, q + b * sizeof blk, sizeof blk);
        int s = 0;
        for (int i = 0; i < 32; i++) s += blk.qs[i];
        const float d = eli_fp16_to_fp32(blk.d), sv = eli_fp16_to_fp32(blk.s);
        if (fabsf(sv - (float)s * d) > fabsf((float)s * d) * 2e-3f + 1e-7f) s_ok = 0;
    }
    CHECK(s_ok, "q8_1 s != d * sum(qs)");
    double se = 0, sx = 0;
    eli_quantize_row(ELI_TYPE_Q8_K, x, q, N);
    eli_dequantize_row(ELI_TYPE_Q8_K, q, y, N);
    for (int i = 0; i < N; i++) {
        se += ((double)y[i] - x[i]) * ((double)y[i] - x[i]);
        sx += (double)x[i] * x[i];
    }
    CHECK(sqrt(se / sx) < 0.01, "q8_K rms error %g", sqrt(se / sx));

    /* Unaligned rows: results must not depend on the address. */
    fill(x, N, 0);
    for (size_t ti = 0; ti < N_WEIGHT_TYPES; ti++) {
        const uint32_t type = weight_types[ti];
        const size_t rs = eli_row_size(type, 512);
        static uint8_t a[8192], b[8192];
        static float ya[512], yb[512];
        eli_quantize_row(type, x, a, 512);
        eli_quantize_row(type, x, b + 1, 512);
        CHECK(memcmp(a, b + 1, rs) == 0, "%s: unaligned quantize differs", eli_type_name(type));
        eli_dequantize_row(type, a, ya, 512);
        eli_dequantize_row(type, b + 1, yb, 512);
        CHECK(memcmp(ya, yb, sizeof ya) == 0, "%s: unaligned dequantize differs", eli_type_name(type));
    }
}

/* ---------------------------------------------------------------------------------------------------- */
/* (c) dot products */

/* Checks eli_vec_dot(type, x, quantize(vdt, y)) against the f64 dot of the dequantized operands. The
 * integer parts of the kernels are exact, so only float rounding of the per-block scaling and of the
 * accumulation differs: a relative tolerance of 1e-5 of sum |x_i y_i| is ample. Returns the error ratio. */
static double check_dot(uint32_t type, const void *xq, const float *y, int64_t n, const char *what) {
    const eli_type_traits *t = eli_type_info(type);
    const uint32_t vdt = t->vec_dot_type;
    const size_t yrs = eli_row_size(vdt, n);
    uint8_t *yq = malloc(yrs + 1);
    float *xd = malloc((size_t)n * sizeof(float));
    float *yd = malloc((size_t)n * sizeof(float));
    eli_quantize_row(vdt, y, yq, n);
    eli_dequantize_row(type, xq, xd, n);
    eli_dequantize_row(vdt, yq, yd, n);
    double ref = 0, mag = 0;
    for (int64_t i = 0; i < n; i++) {
        ref += (double)xd[i] * yd[i];
        mag += fabs((double)xd[i] * yd[i]);
    }
    if (vdt == ELI_TYPE_Q8_1) {
        /* Q4_1 / Q5_1 kernels take the weights' min term from Q8_1's s = fp16(d * sum(q)) instead of
         * d16 * sum(q): by design the dot is sum((x - m) * y) + m * s per block. Reference likewise. */
        const size_t xbs = eli_row_size(type, 32);
        for (int64_t b = 0; b < n / 32; b++) {
            eli_block_q8_1 yb;
            memcpy(&yb, yq + b * sizeof yb, sizeof yb);
            eli_fp16 mh;
            memcpy(&mh, (const uint8_t *)xq + b * xbs + 2, sizeof mh); /* d, m lead both blocks */
            double ysum = 0;
            for (int i = 0; i < 32; i++) ysum += yd[b * 32 + i];
            const double m = eli_fp16_to_fp32(mh);
            ref += m * ((double)eli_fp16_to_fp32(yb.s) - ysum);
        }
    }
    const float got = eli_vec_dot(type, n, xq, yq);
    const float direct = t->vec_dot(n, xq, yq);
    const double err = fabs((double)got - ref);
    const double tol = 1e-5 * mag + 1e-30;
    CHECK(err <= tol, "%s %s n=%lld: dot %.9g vs ref %.9g (err %.3g, tol %.3g)", t->name, what, (long long)n,
          (double)got, ref, err, tol);
    CHECK(memcmp(&got, &direct, sizeof got) == 0, "%s: dispatcher differs from traits->vec_dot", t->name);
    free(yq);
    free(xd);
    free(yd);
    return mag > 0 ? err / mag : 0;
}

static void test_vec_dot(void) {
    enum { N = 2048 };
    static float x[N], y[N];
    static uint8_t xq[N * 4];
    for (size_t ti = 0; ti < N_WEIGHT_TYPES; ti++) {
        const uint32_t type = weight_types[ti];
        double worst = 0;
        for (int trial = 0; trial < 6; trial++) {
            const int64_t n = trial < 3 ? N : 256 * (trial - 2);
            fill(x, n, trial % 3);
            fill(y, n, trial == 1 ? 3 : trial % 2 ? 2 : 0); /* activations: gaussian, outliers, positive */
            eli_quantize_row(type, x, xq, n);
            const double r = check_dot(type, xq, y, n, "synthetic");
            if (r > worst) worst = r;
        }
        printf("  vec_dot %-5s: worst |dot - ref| / sum|x*y| = %.2e\n", eli_type_name(type), worst);
    }
    /* Zero activations give exactly zero. */
    for (size_t ti = 0; ti < N_WEIGHT_TYPES; ti++) {
        const uint32_t type = weight_types[ti];
        static uint8_t yq[N * 4 + 64];
        fill(x, N, 0);
        memset(y, 0, sizeof y);
        eli_quantize_row(type, x, xq, N);
        eli_quantize_row(eli_type_info(type)->vec_dot_type, y, yq, N);
        CHECK(eli_vec_dot(type, N, xq, yq) == 0.0f, "%s: dot with zeros", eli_type_name(type));
    }
    /* Hand-computed: Q8_0 x = 1..32 scaled, y = all ones. */
    {
        float a[32], b[32];
        for (int i = 0; i < 32; i++) {
            a[i] = (float)(i - 16);
            b[i] = 1.0f;
        }
        uint8_t qa[34], qb[34];
        eli_quantize_row(ELI_TYPE_Q8_0, a, qa, 32);
        eli_quantize_row(ELI_TYPE_Q8_0, b, qb, 32);
        /* -16..15 sum to -16; both scales are exact enough: d_a = 16/127, q_a = round(a*127/16). */
        const float got = eli_vec_dot(ELI_TYPE_Q8_0, 32, qa, qb);
        CHECK(fabsf(got - (-16.0f)) < 0.1f, "q8_0 hand dot %g", (double)got);
    }
}

/* ---------------------------------------------------------------------------------------------------- */
/* (a), (b), (c) on the golden files */

typedef struct {
    uint32_t type;
    long tensors, rows, exact, mismatch_within_step;
    double worst_rel_rms; /* max over tensors of rms(deq - master) / rms(master) */
    double worst_block;   /* max over blocks of max|deq - master| / amax(block of master) */
    double worst_dot;
} type_stats;

/* Per-block bound of max|deq - x| / amax(block): from the format's step size (see comments). */
static double block_bound(uint32_t type) {
    switch (type) {
    case ELI_TYPE_F16: return 1.0 / 2048;                   /* half an ulp of the largest value */
    case ELI_TYPE_Q8_0: return (0.5 + 127.0 / 2048) / 127;  /* half a step + fp16 rounding of d */
    case ELI_TYPE_Q5_0: return (1.0 + 16.0 / 2048) / 16;    /* +amax side clamps at +15: up to one step */
    case ELI_TYPE_Q4_0: return (1.0 + 8.0 / 2048) / 8;      /* likewise at +7 */
    case ELI_TYPE_Q6_K: return 1.0 / 32;                    /* sub-block scales vary; one top-level step */
    case ELI_TYPE_Q4_K: return 1.0 / 8;                     /* one 4-bit step of the super-block range */
    default: return 1.0;
    }
}

static const eli_gguf_tensor *master_of(const eli_gguf_file *m, const eli_gguf_tensor *t) {
    const eli_gguf_tensor *mt = eli_gguf_find_tensor(m, t->name);
    if (!mt) return NULL;
    if (mt->type != ELI_TYPE_F32) return NULL;
    for (int d = 0; d < GGUF_MAX_DIMS; d++)
        if (mt->ne[d] != t->ne[d]) return NULL;
    return mt;
}

static void test_golden_file(const eli_gguf_file *master, const char *file) {
    eli_error err;
    eli_error_clear(&err);
    eli_gguf_file *f = eli_gguf_open(eli_shared_path(file), &err);
    CHECK(f != NULL, "open %s: %s", file, err.msg);
    if (!f) return;

    type_stats st[ELI_TYPE_COUNT];
    memset(st, 0, sizeof st);
    long f32_tensors = 0, f32_same = 0;
    int reported = 0;

    for (uint64_t ti = 0; ti < eli_gguf_n_tensors(f); ti++) {
        const eli_gguf_tensor *t = eli_gguf_tensor_at(f, ti);
        const eli_gguf_tensor *mt = master_of(master, t);
        CHECK(mt != NULL, "%s: tensor %s has no F32 master of the same shape", file, t->name);
        if (!mt) continue;
        const eli_type_traits *tt = eli_type_info(t->type);
        CHECK(tt != NULL, "%s: %s type %u", file, t->name, t->type);
        if (!tt) continue;
        const int64_t ne0 = t->ne[0];
        const int64_t nrows = t->ne[1] * t->ne[2] * t->ne[3];
        const size_t rs = eli_row_size(t->type, ne0);
        CHECK(rs * (uint64_t)nrows == t->nbytes, "%s: %s nbytes %llu != %zu * %lld", file, t->name,
              (unsigned long long)t->nbytes, rs, (long long)nrows);
        if (t->type == ELI_TYPE_F32) {
            f32_tensors++;
            f32_same += memcmp(t->data, mt->data, t->nbytes) == 0;
            continue;
        }
        CHECK(tt->quantize && tt->dequantize, "%s: %s has type %s we cannot compute with", file, t->name, tt->name);
        if (!tt->quantize || !tt->dequantize) continue;

        type_stats *s = &st[t->type];
        s->type = t->type;
        s->tensors++;
        float *xrow = malloc((size_t)ne0 * sizeof(float));
        float *deq = malloc((size_t)ne0 * sizeof(float));
        float *deq2 = malloc((size_t)ne0 * sizeof(float));
        uint8_t *qrow = malloc(rs);
        double se = 0, sx = 0;
        for (int64_t r = 0; r < nrows; r++) {
            memcpy(xrow, (const uint8_t *)mt->data + (size_t)r * (size_t)ne0 * 4, (size_t)ne0 * 4);
            const uint8_t *frow = (const uint8_t *)t->data + (size_t)r * rs;
            /* (a) re-quantize the master row and compare bytes. */
            eli_quantize_row(t->type, xrow, qrow, ne0);
            s->rows++;
            eli_dequantize_row(t->type, frow, deq, ne0);
            if (memcmp(qrow, frow, rs) == 0) {
                s->exact++;
            } else {
                /* Not bit-identical: is it at least within one quantization step of llama.cpp's? */
                eli_dequantize_row(t->type, qrow, deq2, ne0);
                double md = 0, amax = 0;
                for (int64_t i = 0; i < ne0; i++) {
                    md = fmax(md, fabs((double)deq[i] - deq2[i]));
                    amax = fmax(amax, fabs(xrow[i]));
                }
                if (md <= amax * block_bound(t->type) * 2) s->mismatch_within_step++;
                if (reported++ < 5) {
                    size_t off = 0;
                    while (off < rs && qrow[off] == frow[off]) off++;
                    fprintf(stderr, "  %s: %s (%s) row %lld differs from byte %zu (block %zu); max |deq diff| %.3g\n",
                            file, t->name, tt->name, (long long)r, off, off / tt->type_size, md);
                }
            }
            /* (b) dequantized file row vs master. */
            for (int64_t b0 = 0; b0 < ne0; b0 += tt->block_size) {
                double amax = 0, me = 0;
                for (int64_t i = b0; i < b0 + tt->block_size; i++) {
                    const double e = fabs((double)deq[i] - xrow[i]);
                    amax = fmax(amax, fabs(xrow[i]));
                    me = fmax(me, e);
                    se += e * e;
                    sx += (double)xrow[i] * xrow[i];
                }
                /* Relative to the block's largest value, but no finer than the fp16 subnormal range
                 * (fp16 values below 2^-14 have an absolute error bound of 2^-25). */
                const double rel = me / fmax(amax, 0x1p-14);
                if (rel > s->worst_block) s->worst_block = rel;
            }
            /* (c) dot with an activation-like vector, on a sample of rows. */
            if (r % 17 == 0) {
                static float act[1 << 16];
                if (ne0 <= (int64_t)(sizeof act / sizeof act[0])) {
                    fill(act, ne0, r % 2 ? 2 : 0);
                    const double dr = check_dot(t->type, frow, act, ne0, t->name);
                    if (dr > s->worst_dot) s->worst_dot = dr;
                }
            }
        }
        const double rel_rms = sx > 0 ? sqrt(se / sx) : 0;
        if (rel_rms > s->worst_rel_rms) s->worst_rel_rms = rel_rms;
        free(xrow);
        free(deq);
        free(deq2);
        free(qrow);
    }

    printf("%s: %lld tensors (%ld F32, %ld identical to the master)\n", file, (long long)eli_gguf_n_tensors(f),
           f32_tensors, f32_same);
    CHECK(f32_same == f32_tensors, "%s: F32 tensors differ from the master", file);
    for (uint32_t ty = 0; ty < ELI_TYPE_COUNT; ty++) {
        const type_stats *s = &st[ty];
        if (!s->tensors) continue;
        const char *name = eli_type_name(ty);
        printf("  %-5s %3ld tensors: %6ld/%6ld rows bit-identical after re-quantization; "
               "rms err/rms %.4f, max block err/amax %.6f (bound %.6f), dot err %.1e\n",
               name, s->tensors, s->exact, s->rows, s->worst_rel_rms, s->worst_block, block_bound(ty), s->worst_dot);
        /* (a) llama-quantize used no imatrix here, so every row must be reproduced exactly. */
        CHECK(s->exact == s->rows, "%s: %s: only %ld of %ld rows bit-identical (%ld more within one step)", file, name,
              s->exact, s->rows, s->mismatch_within_step);
        /* (b) */
        CHECK(s->worst_block <= block_bound(ty), "%s: %s max block error %.4g > %.4g", file, name, s->worst_block,
              block_bound(ty));
        CHECK(s->worst_rel_rms <= rms_bound(ty), "%s: %s rms error %.4g > %.4g", file, name, s->worst_rel_rms,
              rms_bound(ty));
    }
    eli_gguf_close(f);
}

static void test_golden(void) {
    eli_error err;
    eli_error_clear(&err);
    eli_gguf_file *master = eli_gguf_open(eli_shared_path("golden/models/e2b-mini-f32.gguf"), &err);
    CHECK(master != NULL, "open master: %s", err.msg);
    if (!master) return;
    /* The master itself: F32 tensors only (the F32 "quantizer" is a copy). */
    const eli_gguf_tensor *emb = eli_gguf_find_tensor(master, "token_embd.weight");
    CHECK(emb && emb->type == ELI_TYPE_F32 && emb->ne[1] == 1024, "master token_embd.weight");
    CHECK(eli_gguf_find_tensor(master, "blk.0.attn_q.weight") != NULL, "master blk.0.attn_q.weight");
    const char *files[] = {"golden/models/e2b-mini-f16.gguf", "golden/models/e2b-mini-q8_0.gguf",
                           "golden/models/e2b-mini-q6_k.gguf", "golden/models/e2b-mini-q4_k_m.gguf",
                           "golden/models/e2b-mini-q4_0.gguf"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) test_golden_file(master, files[i]);

    /* Types llama-quantize chose, as documented in the golden README. */
    eli_gguf_file *f = eli_gguf_open(eli_shared_path("golden/models/e2b-mini-q4_k_m.gguf"), &err);
    if (f) {
        const eli_gguf_tensor *t = eli_gguf_find_tensor(f, "token_embd.weight");
        CHECK(t && t->type == ELI_TYPE_Q6_K, "q4_k_m token_embd is Q6_K");
        t = eli_gguf_find_tensor(f, "blk.0.attn_q.weight");
        CHECK(t && t->type == ELI_TYPE_Q4_K, "q4_k_m attn_q is Q4_K");
        eli_gguf_close(f);
    }
    eli_gguf_close(master);
}

int main(void) {
    test_traits();
    test_fp16();
    test_bf16();
    test_roundtrip();
    test_vec_dot();
    test_golden();
    TEST_MAIN_END();
}
