/* The projector file's common part (src/mmproj.c): towers and projector types, the shared hyperparameters,
 * checked tensor binding, and clippable linears (clamp in, matmul, clamp out, bias) against a double
 * reference over the dequantized weights, in every weight format family; hostile projectors (edited golden
 * file and synthetic ones) must fail with a message naming the problem. */
#include <float.h>
#include <math.h>

#include "gguf.h"
#include "mmproj_edit.h"
#include "gguf_writer.h"
#include "mmproj.h"
#include "quants.h"
#include "ops.h"
#include "test.h"

#define GOLDEN "golden/mm/mmproj-gemma4-a.gguf"

static uint32_t rng_state = 12345;
static float frand(void) { /* uniform in [-1, 1) */
    rng_state = rng_state * 1664525u + 1013904223u;
    return (float)(rng_state >> 8) / (float)(1 << 23) - 1.0f;
}

static eli_mmproj *open_buf(const uint8_t *buf, size_t n, eli_error *err) {
    eli_gguf_file *f = eli_gguf_open_memory(buf, n, err);
    if (!f) return NULL;
    eli_mmproj *p = eli_mmproj_from_gguf(f, err);
    if (!p) eli_gguf_close(f);
    return p;
}

/* ---- the golden projector ---- */

static void test_golden(void) {
    eli_error err = {0};
    eli_mmproj *p = eli_mmproj_open(eli_shared_path(GOLDEN), &err);
    CHECK(p != NULL, "open: %s", err.msg);
    if (!p) return;
    CHECK(eli_mmproj_type(p, ELI_MM_VISION) && !strcmp(eli_mmproj_type(p, ELI_MM_VISION), "gemma4v"), "vision type");
    CHECK(eli_mmproj_type(p, ELI_MM_AUDIO) && !strcmp(eli_mmproj_type(p, ELI_MM_AUDIO), "gemma4a"), "audio type");
    eli_mm_hparams hp;
    CHECK(eli_mmproj_hparams(p, ELI_MM_VISION, &hp, &err) == ELI_OK, "%s", err.msg);
    CHECK(hp.n_layer == 2 && hp.n_embd == 96 && hp.n_ff == 192 && hp.n_head == 3 && hp.n_head_kv == 3 &&
              hp.head_dim == 32 && hp.proj_dim == 256 && fabsf(hp.eps - 1e-6f) < 1e-12f,
          "vision hparams %d %d %d %d %d %d %d %g", hp.n_layer, hp.n_embd, hp.n_ff, hp.n_head, hp.n_head_kv, hp.head_dim,
          hp.proj_dim, (double)hp.eps);
    CHECK(eli_mmproj_hparams(p, ELI_MM_AUDIO, &hp, &err) == ELI_OK, "%s", err.msg);
    CHECK(hp.n_layer == 2 && hp.n_embd == 96 && hp.n_ff == 384 && hp.n_head == 3 && hp.proj_dim == 256, "audio hparams");
    float mean[3] = {9, 9, 9};
    CHECK(eli_mmproj_f32_array(p, "clip.vision.image_mean", 1, 3, mean, &err) == ELI_OK && mean[0] == 0 && mean[2] == 0,
          "image_mean %s", err.msg);
    CHECK(eli_mmproj_f32_array(p, "clip.vision.image_mean", 1, 4, mean, &err) < 0 && strstr(err.msg, "at least 4"), "%s",
          err.msg);
    int v = 7;
    CHECK(eli_mmproj_u32(p, "clip.vision.no_such_key", 0, 0, 9, &v, &err) == ELI_OK && v == 7, "optional key");
    CHECK(eli_mmproj_u32(p, "clip.vision.patch_size", 1, 1, 8, &v, &err) < 0 && strstr(err.msg, "outside [1, 8]"), "%s",
          err.msg);

    /* clamps as the file has them: attn_q with output bounds, attn_out with input bounds, ffn_gate none */
    eli_mm_linear q, o, g;
    CHECK(eli_mmproj_linear(p, &q, "v.blk.0.attn_q", 1, 96, 96, &err) == ELI_OK, "%s", err.msg);
    CHECK(eli_mmproj_linear(p, &o, "v.blk.0.attn_out", 1, 96, 96, &err) == ELI_OK, "%s", err.msg);
    CHECK(eli_mmproj_linear(p, &g, "v.blk.0.ffn_gate", 1, 96, 192, &err) == ELI_OK, "%s", err.msg);
    const eli_gguf_tensor *t = eli_gguf_find_tensor(p->file, "v.blk.0.attn_q.output_max");
    CHECK(t && q.out_max == *(const float *)t->data && q.in_max == FLT_MAX && q.in_min == -FLT_MAX, "attn_q clamps");
    t = eli_gguf_find_tensor(p->file, "v.blk.0.attn_out.input_min");
    CHECK(t && o.in_min == *(const float *)t->data && o.out_min == -FLT_MAX, "attn_out clamps");
    CHECK(g.in_min == -FLT_MAX && g.out_max == FLT_MAX && !g.bias, "ffn_gate without clamps or bias");
    eli_mm_linear none;
    CHECK(eli_mmproj_linear(p, &none, "v.blk.0.no_such", 0, 96, 96, &err) == ELI_OK && !none.w.data, "optional linear");
    CHECK(eli_mmproj_linear(p, &none, "v.blk.0.no_such", 1, 96, 96, &err) < 0 && strstr(err.msg, "v.blk.0.no_such.weight"),
          "%s", err.msg);
    CHECK(eli_mmproj_linear(p, &none, "v.blk.0.attn_q", 1, 96, 97, &err) < 0 && strstr(err.msg, "has shape"), "%s", err.msg);

    /* the input clamp of attn_out acts in place and before the matmul */
    enum { T = 5 };
    float x[T * 96], x0[T * 96], y[T * 96];
    for (int i = 0; i < T * 96; i++) x0[i] = x[i] = 4.0f * frand();
    eli_buf scratch = {0};
    CHECK(eli_mm_linear_apply(NULL, eli_kernels_best(), &o, x, T, y, &scratch, &err) == ELI_OK, "%s", err.msg);
    int clamped = 0, inplace = 1;
    for (int i = 0; i < T * 96; i++) {
        const float want = x0[i] < o.in_min ? o.in_min : x0[i] > o.in_max ? o.in_max : x0[i];
        inplace &= x[i] == want;
        clamped += want != x0[i];
    }
    CHECK(inplace && clamped > 0, "input clamped in place (%d values moved)", clamped);
    double e2 = 0, r2 = 0;
    for (int tk = 0; tk < T; tk++)
        for (int r = 0; r < 96; r++) {
            double s = 0;
            for (int c = 0; c < 96; c++) s += (double)((const float *)o.w.data)[r * 96 + c] * x[tk * 96 + c];
            e2 += (s - y[tk * 96 + r]) * (s - y[tk * 96 + r]);
            r2 += s * s;
        }
    CHECK(sqrt(e2 / r2) < 1e-5, "attn_out vs double reference: rel %g", sqrt(e2 / r2));
    eli_buf_free(&scratch);
    eli_mmproj_free(p);
}

/* ---- synthetic projectors ---- */

enum { S_IN = 64, S_OUT = 48 };

typedef struct {
    uint32_t type;        /* of the matrix */
    const float *clamps;  /* in_min, in_max, out_min, out_max, or NULL */
    int bias;
} synth_linear;

/* A vision-only projector with the shared keys and one linear "mm.test" {S_IN, S_OUT}; w gets the weights
 * as they dequantize. */
static uint8_t *synth(const synth_linear *s, float *w, size_t *size) {
    gw_file f;
    gw_init(&f);
    gw_kv_str(&f, "general.architecture", "clip");
    gw_kv_bool(&f, "clip.has_vision_encoder", 1);
    gw_kv_str(&f, "clip.vision.projector_type", "gemma4v");
    gw_kv_u32(&f, "clip.vision.block_count", 1);
    gw_kv_u32(&f, "clip.vision.embedding_length", S_IN);
    gw_kv_u32(&f, "clip.vision.feed_forward_length", 128);
    gw_kv_u32(&f, "clip.vision.attention.head_count", 4);
    gw_kv_u32(&f, "clip.vision.projection_dim", S_OUT);
    gw_kv_f32(&f, "clip.vision.attention.layer_norm_epsilon", 1e-6f);
    float src[S_IN * S_OUT];
    for (int i = 0; i < S_IN * S_OUT; i++) src[i] = frand();
    const size_t rb = eli_row_size(s->type, S_IN);
    uint8_t *q = malloc(rb * S_OUT);
    for (int r = 0; r < S_OUT; r++) {
        eli_quantize_row(s->type, src + r * S_IN, q + r * rb, S_IN);
        eli_dequantize_row(s->type, q + r * rb, w + r * S_IN, S_IN);
    }
    const uint64_t ne[2] = {S_IN, S_OUT}, one[1] = {1}, nb[1] = {S_OUT};
    gw_tensor(&f, "mm.test.weight", s->type, 2, ne, q, rb * S_OUT);
    free(q);
    if (s->bias) {
        float b[S_OUT];
        for (int i = 0; i < S_OUT; i++) b[i] = frand();
        gw_tensor(&f, "mm.test.bias", ELI_TYPE_F32, 1, nb, b, sizeof b);
    }
    static const char *const names[4] = {"mm.test.input_min", "mm.test.input_max", "mm.test.output_min", "mm.test.output_max"};
    for (int i = 0; s->clamps && i < 4; i++)
        if (!isnan(s->clamps[i])) gw_tensor(&f, names[i], ELI_TYPE_F32, 1, one, &s->clamps[i], 4);
    uint8_t *buf = gw_finish(&f, size);
    gw_free(&f);
    return buf;
}

/* Every weight format family (float, 32-blocks, K-quants) against the double product of the dequantized
 * weights with the clamped input; the activation rounding of the format bounds the error. */
static void test_formats(void) {
    static const struct {
        uint32_t type;
        double tol;
    } cases[] = {{ELI_TYPE_F32, 1e-6}, {ELI_TYPE_F16, 2e-3}, {ELI_TYPE_BF16, 1e-2}, {ELI_TYPE_Q8_0, 1e-2},
                 {ELI_TYPE_Q4_0, 1e-2}, {ELI_TYPE_Q5_1, 1e-2}};
    const float clamps[4] = {-0.5f, 0.75f, -3.0f, 2.5f};
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        synth_linear s = {cases[ci].type, clamps, 1};
        static float w[S_IN * S_OUT];
        size_t n;
        uint8_t *buf = synth(&s, w, &n);
        eli_error err = {0};
        eli_mmproj *p = open_buf(buf, n, &err);
        CHECK(p != NULL, "%s: %s", eli_type_name(s.type), err.msg);
        eli_mm_linear l;
        if (!p || eli_mmproj_linear(p, &l, "mm.test", 1, S_IN, S_OUT, &err)) {
            CHECK(0, "%s: bind: %s", eli_type_name(s.type), err.msg);
            eli_mmproj_free(p);
            free(buf);
            continue;
        }
        CHECK(l.in_min == clamps[0] && l.in_max == clamps[1] && l.out_min == clamps[2] && l.out_max == clamps[3] && l.bias,
              "%s: clamps and bias bound", eli_type_name(s.type));
        enum { T = 7 };
        static float x[T * S_IN], y[T * S_OUT];
        for (int i = 0; i < T * S_IN; i++) x[i] = 2.0f * frand();
        eli_pool *pool = eli_pool_create(2);
        eli_buf scratch = {0};
        CHECK(eli_mm_linear_apply(pool, eli_kernels_best(), &l, x, T, y, &scratch, &err) == ELI_OK, "%s", err.msg);
        double e2 = 0, r2 = 0;
        int out_clamped = 0, in_ok = 1;
        for (int tk = 0; tk < T; tk++)
            for (int r = 0; r < S_OUT; r++) {
                double acc = 0;
                for (int c = 0; c < S_IN; c++) {
                    in_ok &= x[tk * S_IN + c] >= clamps[0] && x[tk * S_IN + c] <= clamps[1];
                    acc += (double)w[r * S_IN + c] * x[tk * S_IN + c];
                }
                out_clamped += acc < clamps[2] || acc > clamps[3];
                acc = acc < clamps[2] ? clamps[2] : acc > clamps[3] ? clamps[3] : acc;
                acc += l.bias[r]; /* the bias comes after the output clamp, as in llama.cpp */
                e2 += (acc - y[tk * S_OUT + r]) * (acc - y[tk * S_OUT + r]);
                r2 += acc * acc;
            }
        CHECK(in_ok, "%s: input clamped in place", eli_type_name(s.type));
        CHECK(out_clamped > 0, "%s: the output clamp is exercised", eli_type_name(s.type));
        CHECK(sqrt(e2 / r2) < cases[ci].tol, "%s: rel RMS %g vs the double reference", eli_type_name(s.type), sqrt(e2 / r2));
        eli_buf_free(&scratch);
        eli_pool_free(pool);
        eli_mmproj_free(p);
        free(buf);
    }
}

/* ---- hostile projectors ---- */


static void e_arch(edit *e) { set_str(e, "general.architecture", "gemma4"); }
static void e_no_towers(edit *e) {
    drop_key(e, "clip.has_vision_encoder");
    drop_key(e, "clip.has_audio_encoder");
}
static void e_no_type(edit *e) { drop_key(e, "clip.vision.projector_type"); }
static void e_long_type(edit *e) { set_str(e, "clip.vision.projector_type", "gemma4v-with-a-very-long-name-beyond-32"); }
static void e_type_u32(edit *e) { set_u32(e, "clip.vision.projector_type", 4); }
static void e_has_u32(edit *e) { set_u32(e, "clip.has_vision_encoder", 1); }
static void e_no_blocks(edit *e) { drop_key(e, "clip.vision.block_count"); }
static void e_zero_heads(edit *e) { set_u32(e, "clip.vision.attention.head_count", 0); }
static void e_odd_heads(edit *e) { set_u32(e, "clip.vision.attention.head_count", 5); }
static void e_kv_heads(edit *e) { set_u32(e, "clip.vision.attention.head_count_kv", 2); }
static void e_huge_embd(edit *e) { set_u32(e, "clip.vision.embedding_length", 0xFFFFFFFFu); }
static void e_eps_nan(edit *e) { set_f32(e, "clip.vision.attention.layer_norm_epsilon", NAN); }
static void e_eps_neg(edit *e) { set_f32(e, "clip.vision.attention.layer_norm_epsilon", -1.0f); }
static void e_eps_str(edit *e) { set_str(e, "clip.vision.attention.layer_norm_epsilon", "1e-6"); }
static void e_huge_heads(edit *e) {
    set_u32(e, "clip.vision.attention.head_count", 96);
    set_u32(e, "clip.vision.attention.head_dim", 4096);
}
static void e_clamp_2(edit *e) { reshape(e, "v.blk.0.attn_q.output_max", 1, 2, 1, 1); }
static void e_clamp_type(edit *e) { retype(e, "v.blk.0.attn_q.output_max", ELI_TYPE_I32); }
static void e_clamp_nan(edit *e) { fill(e, "v.blk.0.attn_q.output_max", NAN); }
static void e_weight_shape(edit *e) { reshape(e, "v.blk.0.attn_q.weight", 2, 96, 95, 1); }
static void e_weight_type(edit *e) { retype(e, "v.blk.0.attn_q.weight", ELI_TYPE_I32); }
static void e_weight_gone(edit *e) { drop_tensor(e, "v.blk.0.attn_q.weight"); }
static void e_bias_shape(edit *e) { add_tensor(e, "v.blk.0.attn_q.bias", 1, 95, 1, 1); }
static void e_bias_inf(edit *e) {
    add_tensor(e, "v.blk.0.attn_q.bias", 1, 96, 1, 1);
    e->tens[e->n_tens - 1].fill = 1;
    e->tens[e->n_tens - 1].fill_value = INFINITY;
}

static void test_hostile(void) {
    static const struct {
        edit_fn fn;
        const char *want; /* in the message */
    } cases[] = {
        {e_arch, "architecture 'gemma4'"},
        {e_no_towers, "neither a vision nor an audio"},
        {e_no_type, "no projector type"},
        {e_long_type, "not a plausible projector type"},
        {e_type_u32, "clip.vision.projector_type"},
        {e_has_u32, "clip.has_vision_encoder"},
        {e_no_blocks, "clip.vision.block_count"},
        {e_zero_heads, "attention.head_count"},
        {e_odd_heads, "not a multiple of attention.head_count 5"},
        {e_kv_heads, "head_count_kv 2"},
        {e_huge_embd, "clip.vision.embedding_length"},
        {e_eps_nan, "not finite"},
        {e_eps_neg, "negative"},
        {e_eps_str, "layer_norm_epsilon"},
        {e_huge_heads, "exceed"},
        {e_clamp_2, "has 2 elements"},
        {e_clamp_type, "expected a float type"},
        {e_clamp_nan, "is NaN"},
        {e_weight_shape, "v.blk.0.attn_q.weight' has shape"},
        {e_weight_type, "does not support"},
        {e_weight_gone, "missing tensor 'v.blk.0.attn_q.weight'"},
        {e_bias_shape, "v.blk.0.attn_q.bias' has shape"},
        {e_bias_inf, "not finite"},
    };
    eli_error err = {0};
    eli_gguf_file *src = eli_gguf_open(eli_shared_path(GOLDEN), &err);
    CHECK(src != NULL, "%s", err.msg);
    if (!src) return;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        /* open, read the vision hparams, bind the first block's q projection: the first failure counts */
        uint8_t *buf;
        eli_mmproj *p = mmproj_edited(src, cases[i].fn, &buf, &err);
        eli_mm_hparams hp;
        eli_mm_linear l;
        int rc = !p ? -1 : eli_mmproj_hparams(p, ELI_MM_VISION, &hp, &err);
        if (!rc) rc = eli_mmproj_linear(p, &l, "v.blk.0.attn_q", 1, hp.n_embd, (int64_t)hp.n_head * hp.head_dim, &err);
        CHECK(rc < 0 && strstr(err.msg, cases[i].want), "case %zu: rc %d, message '%s', expected '%s'", i, rc, err.msg,
              cases[i].want);
        eli_mmproj_free(p);
        free(buf);
    }
    eli_gguf_close(src);
}

int main(void) {
    test_golden();
    test_formats();
    test_hostile();
    TEST_MAIN_END();
}
