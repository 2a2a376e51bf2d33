#include "audio_encoder.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audio_mel.h"
#include "model.h"
#include "ops.h"
#include "quants.h"

#define NORM_EPS 1e-6f   /* every norm of the tower; llama.cpp ignores the file's value for gemma4a */
#define RES_WEIGHT 0.5f  /* the half-step feed-forwards */
#define ATT_WINDOW 12    /* a query sees itself and the 11 frames before it */
#define N_REL 13         /* relative positions 0..12 are projected (12 is masked out, but costs nothing) */
#define SOFTCAP 50.0f
#define MAX_LAYERS 256
#define MAX_DIM (1 << 16)

/* A projection: weight, optional bias, and the clamp bounds (+-FLT_MAX when absent). */
typedef struct {
    eli_weight w;
    const float *bias;
    float in_lo, in_hi, out_lo, out_hi;
} alinear;

typedef struct {
    const float *norm, *post_norm; /* post_norm optional */
    alinear up, down;
} half_ffn;

typedef struct {
    half_ffn ffn, ffn1;
    const float *attn_norm, *attn_post_norm, *q_scale, *k_scale; /* all but attn_norm optional */
    alinear q, k, v, o;
    eli_weight k_rel; /* data NULL: no relative-position logits */
    const float *conv_norm, *conv_post_norm; /* before pw1; after the depthwise conv (optional) */
    alinear pw1, pw2;
    const float *dw, *dw_b; /* dw [n_conv][K]; dw_b optional */
    const float *out_norm;  /* ln2, optional */
} audio_block;

struct eli_audio_encoder {
    int n_layer, D, n_head, d_head, n_mel;
    int C[2], F[2]; /* channels and frequency bins after each subsampling convolution */
    int n_conv, K;  /* GLU width and depthwise kernel size of the conv module */
    int n_embd;
    eli_weight conv[2]; /* the kernels rounded to f16 (as ggml's im2col path multiplies them), rows = channels */
    const float *conv_b[2], *conv_ln[2];
    alinear in_proj, pre_out, mm_proj; /* pre_out.w.data NULL when absent */
    const float *soft_emb_norm;
    audio_block *blk;
    float *pos_emb; /* [N_REL][D]: the sinusoid of relative position r in row r */
    eli_mel_frontend mel;
    void **owned;
    size_t n_owned;
};

/* ---- binding ---- */

typedef struct {
    eli_audio_encoder *e;
    const gguf_file *f;
    eli_error *err;
} binder;

static void *own(binder *b, size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    void **grown = p ? realloc(b->e->owned, (b->e->n_owned + 1) * sizeof *grown) : NULL;
    if (!grown) {
        free(p);
        eli_fail(b->err, ELI_ERR_OOM, "out of memory");
        return NULL;
    }
    b->e->owned = grown;
    b->e->owned[b->e->n_owned++] = p;
    return p;
}

static const gguf_tensor *find(binder *b, const char *name, int required) {
    const gguf_tensor *t = gguf_find_tensor(b->f, name);
    if (!t && required) eli_fail(b->err, ELI_ERR_INVALID_ARG, "missing tensor '%s'", name);
    return t;
}

static int check_shape(binder *b, const gguf_tensor *t, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3) {
    const int64_t want[4] = {ne0, ne1, ne2, ne3};
    for (int d = 0; d < 4; d++)
        if (t->ne[d] != want[d])
            return eli_fail(b->err, ELI_ERR_INVALID_ARG,
                            "tensor '%s' has shape {%lld, %lld, %lld, %lld}, expected {%lld, %lld, %lld, %lld}", t->name,
                            (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3],
                            (long long)want[0], (long long)want[1], (long long)want[2], (long long)want[3]);
    const eli_type_traits *tt = eli_type_info(t->type);
    if (!tt || !tt->dequantize || !tt->vec_dot)
        return eli_fail(b->err, ELI_ERR_INVALID_ARG, "tensor '%s' has type %s (id %u), which this engine does not support",
                        t->name, eli_type_name(t->type), t->type);
    return ELI_OK;
}

/* The n values of tensor t as an owned, finite f32 copy. */
static int copy_floats(binder *b, const gguf_tensor *t, int64_t n, const float **out) {
    float *v = own(b, (size_t)n * sizeof *v);
    if (!v) return ELI_ERR_OOM;
    eli_dequantize_row(t->type, t->data, v, n);
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(v[i]))
            return eli_fail(b->err, ELI_ERR_INVALID_ARG, "tensor '%s' element %lld is not finite", t->name, (long long)i);
    *out = v;
    return ELI_OK;
}

/* An owned f32 copy of a tensor of the given shape; *out NULL when absent and optional. */
static int bind_floats(binder *b, const float **out, const char *name, int required, int64_t ne0, int64_t ne1,
                       int64_t ne2) {
    *out = NULL;
    const gguf_tensor *t = find(b, name, required);
    if (!t) return required ? ELI_ERR_INVALID_ARG : ELI_OK;
    int rc = check_shape(b, t, ne0, ne1, ne2, 1);
    return rc ? rc : copy_floats(b, t, ne0 * ne1 * ne2, out);
}

static int bind_vector(binder *b, const float **out, const char *name, int required, int64_t n) {
    return bind_floats(b, out, name, required, n, 1, 1);
}

/* A matrix {cols, rows} left in the file mapping. */
static int bind_matrix(binder *b, eli_weight *w, const char *name, int required, int64_t cols, int64_t rows) {
    memset(w, 0, sizeof *w);
    const gguf_tensor *t = find(b, name, required);
    if (!t) return required ? ELI_ERR_INVALID_ARG : ELI_OK;
    int rc = check_shape(b, t, cols, rows, 1, 1);
    if (rc) return rc;
    w->data = t->data;
    w->type = t->type;
    w->cols = cols;
    w->rows = rows;
    w->n_mat = 1;
    w->row_bytes = eli_row_size(t->type, cols);
    w->name = t->name;
    return ELI_OK;
}

/* One clamp bound <prefix>.<what>: a 1-element tensor, or dflt when absent. */
static int bind_bound(binder *b, const char *prefix, const char *what, float dflt, float *out) {
    char name[160];
    snprintf(name, sizeof name, "%s.%s", prefix, what);
    const gguf_tensor *t = find(b, name, 0);
    *out = dflt;
    if (!t) return ELI_OK;
    if (gguf_tensor_nelements(t) != 1)
        return eli_fail(b->err, ELI_ERR_INVALID_ARG, "clamp tensor '%s' has %lld elements, expected 1", name,
                        (long long)gguf_tensor_nelements(t));
    const float *v;
    int rc = bind_floats(b, &v, name, 1, t->ne[0], t->ne[1], t->ne[2]);
    if (rc) return rc;
    *out = v[0];
    return ELI_OK;
}

/* <prefix>.weight {cols, rows}, an optional <prefix>.bias {rows} when with_bias (llama.cpp applies the bias
 * of some projections only), and the clamp bounds. */
static int bind_linear(binder *b, alinear *l, const char *prefix, int required, int with_bias, int64_t cols, int64_t rows) {
    char name[160];
    memset(l, 0, sizeof *l);
    snprintf(name, sizeof name, "%s.weight", prefix);
    int rc = bind_matrix(b, &l->w, name, required, cols, rows);
    if (rc || !l->w.data) return rc;
    snprintf(name, sizeof name, "%s.bias", prefix);
    if (with_bias && (rc = bind_vector(b, &l->bias, name, 0, rows))) return rc;
    if ((rc = bind_bound(b, prefix, "input_min", -FLT_MAX, &l->in_lo)) || (rc = bind_bound(b, prefix, "input_max", FLT_MAX, &l->in_hi)) ||
        (rc = bind_bound(b, prefix, "output_min", -FLT_MAX, &l->out_lo)) ||
        (rc = bind_bound(b, prefix, "output_max", FLT_MAX, &l->out_hi)))
        return rc;
    if (!(l->in_lo <= l->in_hi) || !(l->out_lo <= l->out_hi))
        return eli_fail(b->err, ELI_ERR_INVALID_ARG, "'%s' has clamp bounds in [%g, %g], out [%g, %g]: a minimum above its maximum",
                        prefix, (double)l->in_lo, (double)l->in_hi, (double)l->out_lo, (double)l->out_hi);
    return ELI_OK;
}

/* A subsampling convolution a.conv1d.i: kernel {3, 3, cin, cout} rounded to f16, optional bias {1, 1, cout}
 * (the shape llama.cpp's graph can add), optional LayerNorm weight {cout}. */
static int bind_conv(binder *b, int i, int cin) {
    eli_audio_encoder *e = b->e;
    char name[64];
    snprintf(name, sizeof name, "a.conv1d.%d.weight", i);
    const gguf_tensor *t = find(b, name, 1);
    if (!t) return ELI_ERR_INVALID_ARG;
    const int64_t cout = t->ne[3];
    if (cout < 1 || cout > MAX_DIM)
        return eli_fail(b->err, ELI_ERR_INVALID_ARG, "tensor '%s' has %lld output channels", name, (long long)cout);
    const float *k = NULL;
    int rc = check_shape(b, t, 3, 3, cin, cout);
    if (rc || (rc = copy_floats(b, t, 9 * (int64_t)cin * cout, &k))) return rc;
    e->C[i] = (int)cout;
    const int64_t cols = 9 * (int64_t)cin;
    eli_fp16 *h = own(b, (size_t)(cols * cout) * sizeof *h);
    if (!h) return ELI_ERR_OOM;
    for (int64_t j = 0; j < cols * cout; j++) h[j] = eli_fp32_to_fp16(k[j]);
    eli_weight *w = &e->conv[i];
    w->data = h;
    w->type = ELI_TYPE_F16;
    w->cols = cols;
    w->rows = cout;
    w->n_mat = 1;
    w->row_bytes = eli_row_size(ELI_TYPE_F16, cols);
    w->name = t->name;
    snprintf(name, sizeof name, "a.conv1d.%d.bias", i);
    if ((rc = bind_floats(b, &e->conv_b[i], name, 0, 1, 1, cout))) return rc;
    snprintf(name, sizeof name, "a.conv1d.%d.norm.weight", i);
    return bind_vector(b, &e->conv_ln[i], name, 0, cout);
}

static int bind_block(binder *b, int il) {
    eli_audio_encoder *e = b->e;
    audio_block *l = &e->blk[il];
    const int64_t D = e->D;
    char nm[160], nm2[32];
    int rc;
#define NAME(s) (snprintf(nm, sizeof nm, "a.blk.%d.%s", il, s), nm)
    /* the feed-forward width from the up projection, which every other shape then has to match */
    const gguf_tensor *up = find(b, NAME("ffn_up.weight"), 1);
    if (!up) return ELI_ERR_INVALID_ARG;
    const int64_t F = up->ne[1];
    if (F < 1 || F > MAX_DIM) return eli_fail(b->err, ELI_ERR_INVALID_ARG, "tensor '%s' has %lld rows", nm, (long long)F);
    half_ffn *h[2] = {&l->ffn, &l->ffn1};
    const char *sfx[2] = {"", "_1"};
    for (int i = 0; i < 2; i++) {
        snprintf(nm2, sizeof nm2, "ffn_norm%s.weight", sfx[i]);
        if ((rc = bind_vector(b, &h[i]->norm, NAME(nm2), 1, D))) return rc;
        snprintf(nm2, sizeof nm2, "ffn_post_norm%s.weight", sfx[i]);
        if ((rc = bind_vector(b, &h[i]->post_norm, NAME(nm2), 0, D))) return rc;
        snprintf(nm2, sizeof nm2, "ffn_up%s", sfx[i]);
        if ((rc = bind_linear(b, &h[i]->up, NAME(nm2), 1, 0, D, F))) return rc;
        snprintf(nm2, sizeof nm2, "ffn_down%s", sfx[i]);
        if ((rc = bind_linear(b, &h[i]->down, NAME(nm2), 1, 0, F, D))) return rc;
    }
    if ((rc = bind_vector(b, &l->attn_norm, NAME("attn_pre_norm.weight"), 0, D))) return rc;
    if (!l->attn_norm && (rc = bind_vector(b, &l->attn_norm, NAME("ln1.weight"), 0, D))) return rc;
    if (!l->attn_norm) return eli_fail(b->err, ELI_ERR_INVALID_ARG, "block %d has neither attn_pre_norm nor ln1", il);
    if ((rc = bind_vector(b, &l->attn_post_norm, NAME("attn_post_norm.weight"), 0, D))) return rc;
    if ((rc = bind_vector(b, &l->q_scale, NAME("per_dim_scale.weight"), 0, e->d_head))) return rc;
    if ((rc = bind_vector(b, &l->k_scale, NAME("per_dim_k_scale.weight"), 0, e->d_head))) return rc;
    if ((rc = bind_linear(b, &l->q, NAME("attn_q"), 1, 0, D, D))) return rc;
    if ((rc = bind_linear(b, &l->k, NAME("attn_k"), 1, 0, D, D))) return rc;
    if ((rc = bind_linear(b, &l->v, NAME("attn_v"), 1, 0, D, D))) return rc;
    if ((rc = bind_linear(b, &l->o, NAME("attn_out"), 1, 1, D, D))) return rc;
    if ((rc = bind_matrix(b, &l->k_rel, NAME("attn_k_rel.weight"), 0, D, D))) return rc;
    /* the GGUF's conv_norm is the norm before pw1 and norm_conv the one after the depthwise convolution
     * (llama.cpp's loader swaps the names back) */
    if ((rc = bind_vector(b, &l->conv_norm, NAME("conv_norm.weight"), 1, D))) return rc;
    const gguf_tensor *pw1 = find(b, NAME("conv_pw1.weight"), 1);
    if (!pw1) return ELI_ERR_INVALID_ARG;
    if (pw1->ne[1] < 2 || pw1->ne[1] % 2 || pw1->ne[1] > 2 * (int64_t)MAX_DIM)
        return eli_fail(b->err, ELI_ERR_INVALID_ARG, "tensor '%s' has %lld rows, not an even GLU width", nm, (long long)pw1->ne[1]);
    const int64_t G = pw1->ne[1] / 2;
    if (il == 0) e->n_conv = (int)G;
    if (G != e->n_conv)
        return eli_fail(b->err, ELI_ERR_INVALID_ARG, "block %d has conv width %lld, block 0 %d", il, (long long)G, e->n_conv);
    if ((rc = bind_linear(b, &l->pw1, NAME("conv_pw1"), 1, 0, D, 2 * G))) return rc;
    const gguf_tensor *dw = find(b, NAME("conv_dw.weight"), 1);
    if (!dw) return ELI_ERR_INVALID_ARG;
    if (il == 0) e->K = (int)(dw->ne[0] >= 1 && dw->ne[0] <= 64 ? dw->ne[0] : 0);
    if (e->K < 1 || dw->ne[0] != e->K)
        return eli_fail(b->err, ELI_ERR_INVALID_ARG, "tensor '%s' has kernel size %lld (1..64, the same in every block)", nm,
                        (long long)dw->ne[0]);
    if ((rc = bind_floats(b, &l->dw, nm, 1, e->K, G, 1))) return rc;
    if ((rc = bind_vector(b, &l->dw_b, NAME("conv_dw.bias"), 0, G))) return rc;
    if ((rc = bind_vector(b, &l->conv_post_norm, NAME("norm_conv.weight"), 0, G))) return rc;
    if ((rc = bind_linear(b, &l->pw2, NAME("conv_pw2"), 1, 0, G, D))) return rc;
    if ((rc = bind_vector(b, &l->out_norm, NAME("ln2.weight"), 0, D))) return rc;
#undef NAME
    return ELI_OK;
}

/* Reads a clip.audio.* u32 key in [lo, hi]. */
static int audio_key(binder *b, const char *suffix, int lo, int hi, int *out) {
    char key[96];
    snprintf(key, sizeof key, "clip.audio.%s", suffix);
    uint32_t v;
    int rc = gguf_get_u32(b->f, key, &v, b->err);
    if (rc < 0) return rc;
    if (rc == 0) return eli_fail(b->err, ELI_ERR_INVALID_ARG, "missing required key '%s'", key);
    if (v < (uint32_t)lo || v > (uint32_t)hi)
        return eli_fail(b->err, ELI_ERR_INVALID_ARG, "key '%s' = %u is outside [%d, %d]", key, v, lo, hi);
    *out = (int)v;
    return ELI_OK;
}

/* The sinusoid of relative position r (row r): sin of r * 10000^(-i / (D/2 - 1)) in the first half, cos in
 * the second, in float as llama.cpp builds it. */
static void make_pos_emb(float *pe, int D) {
    const int half = D / 2;
    const float inc = logf(10000.0f) / (float)(half - 1 > 1 ? half - 1 : 1);
    memset(pe, 0, (size_t)N_REL * (size_t)D * sizeof *pe);
    for (int r = 0; r < N_REL; r++)
        for (int i = 0; i < half; i++) {
            const float a = (float)r * expf(-(float)i * inc);
            pe[r * D + i] = sinf(a);
            pe[r * D + i + half] = cosf(a);
        }
}

static int bind_all(binder *b) {
    eli_audio_encoder *e = b->e;
    gguf_str type;
    int rc = gguf_get_str(b->f, "clip.audio.projector_type", &type, b->err);
    if (rc < 0) return rc;
    if (rc == 0) return eli_fail(b->err, ELI_ERR_INVALID_ARG, "the projector has no audio tower (no clip.audio.projector_type)");
    if (!gguf_str_eq(type, "gemma4a"))
        return eli_fail(b->err, ELI_ERR_INVALID_ARG, "audio projector type '%.*s' is not supported (only gemma4a)",
                        (int)(type.len > 32 ? 32 : type.len), type.ptr);
    if ((rc = audio_key(b, "block_count", 1, MAX_LAYERS, &e->n_layer)) || (rc = audio_key(b, "embedding_length", 2, MAX_DIM, &e->D)) ||
        (rc = audio_key(b, "attention.head_count", 1, MAX_DIM, &e->n_head)) ||
        (rc = audio_key(b, "num_mel_bins", 1, ELI_MEL_MAX_BINS, &e->n_mel)))
        return rc;
    if (e->D % e->n_head)
        return eli_fail(b->err, ELI_ERR_INVALID_ARG, "clip.audio.embedding_length %d is not a multiple of head_count %d", e->D,
                        e->n_head);
    e->d_head = e->D / e->n_head;
    if ((rc = bind_conv(b, 0, 1)) || (rc = bind_conv(b, 1, e->C[0]))) return rc;
    e->F[0] = (e->n_mel - 1) / 2 + 1;
    e->F[1] = (e->F[0] - 1) / 2 + 1;
    if ((rc = bind_linear(b, &e->in_proj, "a.input_projection", 1, 1, (int64_t)e->C[1] * e->F[1], e->D))) return rc;
    if (!(e->blk = own(b, (size_t)e->n_layer * sizeof *e->blk))) return ELI_ERR_OOM;
    memset(e->blk, 0, (size_t)e->n_layer * sizeof *e->blk);
    for (int il = 0; il < e->n_layer; il++)
        if ((rc = bind_block(b, il))) return rc;
    /* a.pre_encode.out {D, P} is optional; the embedder then takes the encoder's width */
    int64_t P = e->D;
    const gguf_tensor *po = find(b, "a.pre_encode.out.weight", 0);
    if (po) {
        P = po->ne[1];
        if (P < 1 || P > MAX_DIM)
            return eli_fail(b->err, ELI_ERR_INVALID_ARG, "tensor 'a.pre_encode.out.weight' has %lld rows", (long long)P);
        if ((rc = bind_linear(b, &e->pre_out, "a.pre_encode.out", 1, 1, e->D, P))) return rc;
    }
    if ((rc = bind_vector(b, &e->soft_emb_norm, "mm.a.soft_emb_norm.weight", 0, P))) return rc;
    const gguf_tensor *mp = find(b, "mm.a.input_projection.weight", 1);
    if (!mp) return ELI_ERR_INVALID_ARG;
    if (mp->ne[1] < 1 || mp->ne[1] > MAX_DIM)
        return eli_fail(b->err, ELI_ERR_INVALID_ARG, "tensor 'mm.a.input_projection.weight' has %lld rows", (long long)mp->ne[1]);
    e->n_embd = (int)mp->ne[1];
    if ((rc = bind_linear(b, &e->mm_proj, "mm.a.input_projection", 1, 1, P, e->n_embd))) return rc;
    uint32_t v;
    if ((rc = gguf_get_u32(b->f, "clip.audio.projection_dim", &v, b->err)) < 0) return rc;
    if (rc == 1 && (int64_t)v != e->n_embd)
        return eli_fail(b->err, ELI_ERR_INVALID_ARG, "clip.audio.projection_dim %u != mm.a.input_projection's %d rows", v, e->n_embd);
    if (!(e->pos_emb = own(b, (size_t)N_REL * (size_t)e->D * sizeof *e->pos_emb))) return ELI_ERR_OOM;
    make_pos_emb(e->pos_emb, e->D);
    return eli_mel_init(&e->mel, e->n_mel, b->err);
}

eli_audio_encoder *eli_audio_encoder_create(const gguf_file *f, eli_error *err) {
    eli_audio_encoder *e = calloc(1, sizeof *e);
    if (!e) {
        eli_fail(err, ELI_ERR_OOM, "out of memory");
        return NULL;
    }
    binder b = {e, f, err};
    if (bind_all(&b)) {
        eli_audio_encoder_free(e);
        return NULL;
    }
    return e;
}

void eli_audio_encoder_free(eli_audio_encoder *e) {
    if (!e) return;
    for (size_t i = 0; i < e->n_owned; i++) free(e->owned[i]);
    free(e->owned);
    eli_mel_free(&e->mel);
    free(e);
}

int eli_audio_encoder_n_embd(const eli_audio_encoder *e) { return e->n_embd; }
int eli_audio_encoder_n_mel(const eli_audio_encoder *e) { return e->n_mel; }

static int64_t halve(int64_t n) { return (n - 1) / 2 + 1; }

int64_t eli_audio_chunk_tokens(int64_t n_frames) { return n_frames < 1 ? 0 : halve(halve(n_frames)); }

/* ---- the forward pass ---- */

typedef struct {
    eli_pool *pool;
    const eli_kernels *k;
    eli_buf scratch;
} runner;

static void clamp_rows(float *x, int64_t n, float lo, float hi) {
    if (lo == -FLT_MAX && hi == FLT_MAX) return;
    for (int64_t i = 0; i < n; i++) x[i] = x[i] < lo ? lo : x[i] > hi ? hi : x[i];
}

/* y[T][rows] = l(x[T][cols]); x is clamped in place first (see the header). */
static int linear(runner *r, const alinear *l, float *x, int64_t T, float *y) {
    clamp_rows(x, T * l->w.cols, l->in_lo, l->in_hi);
    int rc = eli_matmul_k(r->pool, r->k, &l->w, 0, x, T, y, &r->scratch);
    if (rc) return rc;
    const int64_t R = l->w.rows;
    if (l->bias)
        for (int64_t t = 0; t < T; t++)
            for (int64_t i = 0; i < R; i++) y[t * R + i] += l->bias[i];
    clamp_rows(y, T * R, l->out_lo, l->out_hi);
    return ELI_OK;
}

static void rms_rows(float *y, const float *x, const float *w, int64_t T, int64_t n) {
    for (int64_t t = 0; t < T; t++) eli_rms_norm(y + t * n, x + t * n, w, n, NORM_EPS);
}

static float silu(float x) { return x / (1.0f + expf(-x)); }

/* The activations of one chunk, each [T][width]. */
typedef struct {
    int64_t T;
    float *x, *h, *q, *k, *v, *att, *big, *rel;
} acts;

/* x += 0.5 * post_norm(down(silu(up(norm(x))))) */
static int run_half_ffn(runner *r, const half_ffn *f, acts *a, int64_t D) {
    const int64_t T = a->T, F = f->up.w.rows;
    rms_rows(a->h, a->x, f->norm, T, D);
    int rc = linear(r, &f->up, a->h, T, a->big);
    if (rc) return rc;
    for (int64_t i = 0; i < T * F; i++) a->big[i] = silu(a->big[i]);
    if ((rc = linear(r, &f->down, a->big, T, a->h))) return rc;
    if (f->post_norm) rms_rows(a->h, a->h, f->post_norm, T, D);
    for (int64_t i = 0; i < T * D; i++) a->x[i] += a->h[i] * RES_WEIGHT;
    return ELI_OK;
}

typedef struct {
    const eli_audio_encoder *e;
    const acts *a;
} attn_job;

/* Tokens split over the threads: each head of a query against the ATT_WINDOW keys ending at it. */
static void attn_task(void *ctx, int ith, int nth) {
    const attn_job *j = ctx;
    const int64_t D = j->e->D, H = j->e->n_head, d = j->e->d_head;
    const acts *a = j->a;
    int64_t t0, t1;
    eli_split(a->T, ith, nth, &t0, &t1);
    for (int64_t t = t0; t < t1; t++) {
        const int64_t nk = t + 1 < ATT_WINDOW ? t + 1 : ATT_WINDOW;
        for (int64_t h = 0; h < H; h++) {
            const float *q = a->q + t * D + h * d;
            float s[ATT_WINDOW];
            float mx = -INFINITY;
            for (int64_t j2 = 0; j2 < nk; j2++) { /* key t - j2 at distance j2 */
                const float *kr = a->k + (t - j2) * D + h * d;
                float ac = 0.0f, bd = 0.0f;
                for (int64_t i = 0; i < d; i++) ac += q[i] * kr[i];
                if (a->rel) {
                    const float *pr = a->rel + j2 * D + h * d;
                    for (int64_t i = 0; i < d; i++) bd += q[i] * pr[i];
                }
                s[j2] = tanhf((ac + bd) * (1.0f / SOFTCAP)) * SOFTCAP;
                mx = s[j2] > mx ? s[j2] : mx;
            }
            double sum = 0.0;
            for (int64_t j2 = 0; j2 < nk; j2++) {
                s[j2] = expf(s[j2] - mx);
                sum += (double)s[j2];
            }
            const float inv = (float)(1.0 / sum);
            float *o = a->att + t * D + h * d;
            for (int64_t i = 0; i < d; i++) o[i] = 0.0f;
            for (int64_t j2 = 0; j2 < nk; j2++) {
                const float p = s[j2] * inv, *vr = a->v + (t - j2) * D + h * d;
                for (int64_t i = 0; i < d; i++) o[i] += p * vr[i];
            }
        }
    }
}

static int run_attention(runner *r, const eli_audio_encoder *e, const audio_block *l, acts *a) {
    const int64_t T = a->T, D = e->D, d = e->d_head;
    rms_rows(a->h, a->x, l->attn_norm, T, D);
    /* v, k, q: the order in which llama.cpp's graph clamps their shared input in place */
    int rc;
    if ((rc = linear(r, &l->v, a->h, T, a->v)) || (rc = linear(r, &l->k, a->h, T, a->k)) || (rc = linear(r, &l->q, a->h, T, a->q)))
        return rc;
    const float qs = (1.0f / sqrtf((float)d)) / logf(2.0f), ks = logf(1.0f + expf(1.0f)) / logf(2.0f);
    for (int64_t i = 0; i < T * D; i++) {
        a->q[i] *= qs;
        if (l->q_scale) a->q[i] *= l->q_scale[i % d];
        a->k[i] *= ks;
        if (l->k_scale) a->k[i] *= l->k_scale[i % d];
    }
    /* the relative-position logits' keys: attn_k_rel times the sinusoids, [N_REL][D] */
    acts ar = *a;
    ar.rel = NULL;
    if (l->k_rel.data) {
        if ((rc = eli_matmul_k(r->pool, r->k, &l->k_rel, 0, e->pos_emb, N_REL, a->rel, &r->scratch))) return rc;
        ar.rel = a->rel;
    }
    attn_job j = {e, &ar};
    eli_pool_run(eli_pool_for(r->pool, T * D * ATT_WINDOW * 3), attn_task, &j);
    if ((rc = linear(r, &l->o, a->att, T, a->h))) return rc;
    if (l->attn_post_norm) rms_rows(a->h, a->h, l->attn_post_norm, T, D);
    for (int64_t i = 0; i < T * D; i++) a->x[i] += a->h[i];
    return ELI_OK;
}

static int run_conv_module(runner *r, const eli_audio_encoder *e, const audio_block *l, acts *a) {
    const int64_t T = a->T, D = e->D, G = e->n_conv, K = e->K;
    rms_rows(a->h, a->x, l->conv_norm, T, D);
    int rc = linear(r, &l->pw1, a->h, T, a->big);
    if (rc) return rc;
    /* GLU into att ([T][G]): the first half times the sigmoid of the second */
    float *g = a->att;
    for (int64_t t = 0; t < T; t++)
        for (int64_t c = 0; c < G; c++) {
            const float *u = a->big + t * 2 * G;
            g[t * G + c] = u[c] * (1.0f / (1.0f + expf(-u[G + c])));
        }
    /* causal depthwise convolution into big: K - 1 zeros in front */
    float *y = a->big;
    for (int64_t t = 0; t < T; t++)
        for (int64_t c = 0; c < G; c++) {
            float s = 0.0f;
            for (int64_t i = 0; i < K; i++) {
                const int64_t src = t - (K - 1) + i;
                if (src >= 0) s += g[src * G + c] * l->dw[c * K + i];
            }
            y[t * G + c] = l->dw_b ? s + l->dw_b[c] : s;
        }
    if (l->conv_post_norm) rms_rows(y, y, l->conv_post_norm, T, G);
    for (int64_t i = 0; i < T * G; i++) y[i] = silu(y[i]);
    if ((rc = linear(r, &l->pw2, y, T, a->h))) return rc;
    for (int64_t i = 0; i < T * D; i++) a->x[i] += a->h[i];
    return ELI_OK;
}

/* LayerNorm over the C channels of each of n pixels (weight only), then ReLU, in place. */
static void layer_norm_relu(float *x, int64_t n, int64_t C, const float *w) {
    for (int64_t p = 0; p < n; p++) {
        float *v = x + p * C;
        if (w) {
            double sum = 0.0;
            for (int64_t c = 0; c < C; c++) sum += v[c];
            const float mean = (float)(sum / (double)C);
            double sq = 0.0;
            for (int64_t c = 0; c < C; c++) {
                v[c] -= mean;
                sq += (double)(v[c] * v[c]);
            }
            const float scale = 1.0f / sqrtf((float)(sq / (double)C) + NORM_EPS);
            for (int64_t c = 0; c < C; c++) v[c] = v[c] * scale * w[c];
        }
        for (int64_t c = 0; c < C; c++) v[c] = v[c] > 0.0f ? v[c] : 0.0f;
    }
}

/* Output pixels per im2col tile of the second convolution: bounds the column buffer. */
#define CONV_TILE_PIXELS 512

/* One subsampling convolution: in [H][W][cin] (channel fastest) -> out [halve(H)][halve(W)][cout], with
 * bias, LayerNorm and ReLU. cols is scratch for CONV_TILE_PIXELS x 9 cin floats. */
static int run_conv(runner *r, const eli_audio_encoder *e, int i, const float *in, int64_t H, int64_t W, float *out,
                    float *cols) {
    const int64_t cin = i ? e->C[0] : 1, cout = e->C[i], OH = halve(H), OW = halve(W), n = OH * OW, K9 = 9 * cin;
    for (int64_t p0 = 0; p0 < n; p0 += CONV_TILE_PIXELS) {
        const int64_t np = n - p0 < CONV_TILE_PIXELS ? n - p0 : CONV_TILE_PIXELS;
        for (int64_t p = 0; p < np; p++) {
            const int64_t oh = (p0 + p) / OW, ow = (p0 + p) % OW;
            float *c = cols + p * K9;
            /* column order (ci, kh, kw), the kernel's {3, 3, cin} element order */
            for (int64_t ci = 0; ci < cin; ci++)
                for (int64_t kh = 0; kh < 3; kh++)
                    for (int64_t kw = 0; kw < 3; kw++) {
                        const int64_t ih = 2 * oh - 1 + kh, iw = 2 * ow - 1 + kw;
                        c[ci * 9 + kh * 3 + kw] = ih >= 0 && ih < H && iw >= 0 && iw < W ? in[(ih * W + iw) * cin + ci] : 0.0f;
                    }
        }
        int rc = eli_matmul_k(r->pool, r->k, &e->conv[i], 0, cols, np, out + p0 * cout, &r->scratch);
        if (rc) return rc;
    }
    if (e->conv_b[i])
        for (int64_t p = 0; p < n; p++)
            for (int64_t c = 0; c < cout; c++) out[p * cout + c] += e->conv_b[i][c];
    layer_norm_relu(out, n, cout, e->conv_ln[i]);
    return ELI_OK;
}

int eli_audio_encode_mel(eli_audio_encoder *e, eli_pool *pool, const float *mel, int64_t T, float *out, eli_error *err) {
    if (T < 1) return eli_fail(err, ELI_ERR_INVALID_ARG, "no mel frames to encode");
    if (T > ELI_MEL_CHUNK_SAMPLES / ELI_MEL_HOP + 1)
        return eli_fail(err, ELI_ERR_INVALID_ARG, "%lld mel frames is more than one 30-second chunk", (long long)T);
    const int64_t T1 = halve(T), T2 = halve(T1), D = e->D;
    const int64_t n0 = T1 * e->F[0] * e->C[0], n1 = T2 * e->F[1] * e->C[1];
    int64_t wide = 2 * (int64_t)e->n_conv;
    for (int il = 0; il < e->n_layer; il++)
        if (e->blk[il].ffn.up.w.rows > wide) wide = e->blk[il].ffn.up.w.rows;
    if (e->pre_out.w.data && e->pre_out.w.rows > wide) wide = e->pre_out.w.rows;
    if (wide < D) wide = D;
    const int64_t n_cols = CONV_TILE_PIXELS * 9 * (int64_t)(e->C[0] > 1 ? e->C[0] : 1);
    /* one allocation: the subsampling buffers, then the block activations */
    const int64_t sizes[] = {n0, n1, n_cols, T2 * D, T2 * wide, T2 * D, T2 * D, T2 * D, T2 * D, T2 * (D > e->n_conv ? D : e->n_conv), N_REL * D};
    int64_t total = 0;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) total += sizes[i];
    float *mem = malloc((size_t)total * sizeof *mem);
    if (!mem) return eli_fail(err, ELI_ERR_OOM, "out of memory for the audio encoder's activations (%lld floats)", (long long)total);
    float *s0 = mem, *s1 = s0 + n0, *cols = s1 + n1;
    acts a = {T2, cols + n_cols, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    a.big = a.x + T2 * D;
    a.h = a.big + T2 * wide;
    a.q = a.h + T2 * D;
    a.k = a.q + T2 * D;
    a.v = a.k + T2 * D;
    a.att = a.v + T2 * D;
    a.rel = a.att + sizes[9];
    runner r = {pool, eli_kernels_best(), {0}};
    int rc;
    if ((rc = run_conv(&r, e, 0, mel, T, e->n_mel, s0, cols)) || (rc = run_conv(&r, e, 1, s0, T1, e->F[0], s1, cols)) ||
        (rc = linear(&r, &e->in_proj, s1, T2, a.x)))
        goto done;
    for (int il = 0; il < e->n_layer; il++) {
        const audio_block *l = &e->blk[il];
        if ((rc = run_half_ffn(&r, &l->ffn, &a, D)) || (rc = run_attention(&r, e, l, &a)) || (rc = run_conv_module(&r, e, l, &a)) ||
            (rc = run_half_ffn(&r, &l->ffn1, &a, D)))
            goto done;
        if (l->out_norm) rms_rows(a.x, a.x, l->out_norm, T2, D);
    }
    float *y = a.x;
    int64_t P = D;
    if (e->pre_out.w.data) {
        if ((rc = linear(&r, &e->pre_out, a.x, T2, a.big))) goto done;
        y = a.big;
        P = e->pre_out.w.rows;
    }
    rms_rows(y, y, e->soft_emb_norm, T2, P);
    rc = linear(&r, &e->mm_proj, y, T2, out);
done:
    eli_buf_free(&r.scratch);
    free(mem);
    if (rc == ELI_ERR_OOM) return eli_fail(err, rc, "out of memory in the audio encoder");
    return rc;
}

int eli_audio_embed(eli_audio_encoder *e, eli_pool *pool, const float *pcm, int64_t n, float **out, int64_t *n_tokens,
                    int64_t *n_frames, eli_error *err) {
    *out = NULL;
    *n_tokens = 0;
    if (n_frames) *n_frames = 0;
    int64_t toks = 0, frames = 0;
    for (int64_t off = 0; off < n; off += ELI_MEL_CHUNK_SAMPLES) {
        const int64_t T = eli_mel_frames(n - off < ELI_MEL_CHUNK_SAMPLES ? n - off : ELI_MEL_CHUNK_SAMPLES);
        frames += T;
        toks += eli_audio_chunk_tokens(T);
    }
    if (toks == 0) return eli_fail(err, ELI_ERR_INVALID_ARG, "%lld samples of audio are too short for one mel frame", (long long)n);
    float *emb = malloc((size_t)toks * (size_t)e->n_embd * sizeof *emb);
    float *mel = malloc((size_t)eli_mel_frames(ELI_MEL_CHUNK_SAMPLES) * (size_t)e->n_mel * sizeof *mel);
    if (!emb || !mel) {
        free(emb), free(mel);
        return eli_fail(err, ELI_ERR_OOM, "out of memory for %lld audio embeddings", (long long)toks);
    }
    int64_t done = 0;
    for (int64_t off = 0; off < n; off += ELI_MEL_CHUNK_SAMPLES) {
        const int64_t len = n - off < ELI_MEL_CHUNK_SAMPLES ? n - off : ELI_MEL_CHUNK_SAMPLES, T = eli_mel_frames(len);
        if (T == 0) continue;
        eli_mel_chunk(&e->mel, pool, pcm + off, len, mel);
        int rc = eli_audio_encode_mel(e, pool, mel, T, emb + done * e->n_embd, err);
        if (rc) {
            free(emb), free(mel);
            return rc;
        }
        done += eli_audio_chunk_tokens(T);
    }
    free(mel);
    *out = emb;
    *n_tokens = toks;
    if (n_frames) *n_frames = frames;
    return ELI_OK;
}
