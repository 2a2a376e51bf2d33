/* The Gemma 4 vision tower (see vision.h). References are to llama.cpp tools/mtmd at 3f545becc:
 * mtmd-image.cpp (calc_size_preserved_ratio, resize, resize_bilinear), clip.cpp (build_vit, build_attn,
 * build_ffn, the gemma4v hparams and clamp loading) and models/gemma4v.cpp (the graph). */
#include "fp_exact.h" /* the resize is compared byte for byte: no contraction of its float steps */

#include "vision.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "ops.h"
#include "quants.h"

typedef enum { ACT_GELU_QUICK, ACT_GELU, ACT_SILU } vision_act;

typedef struct {
    const float *ln1, *ln1_b, *ln2, *ln2_b, *attn_post_norm, *ffn_post_norm, *ls1, *ls2;
    const float *q_norm, *k_norm; /* [head_dim] per head, or [n_head * head_dim] over the whole row */
    int qk_norm_per_head;
    eli_mm_linear q, k, v, o, gate, up, down; /* gate absent: act(up) */
    const float *out_scale;                   /* [1] or [n_embd], or NULL */
    int out_scale_n;
} vision_layer;

struct eli_vision {
    eli_mmproj *p;
    eli_mm_hparams hp;
    int patch, merge, n_embd_text, pos_size;
    float mean[3], std[3];
    vision_act act;
    eli_weight patch_w; /* {3 * patch^2, n_embd}, F16: ggml's conv rounds kernel and pixels to fp16 */
    void *patch_f16;
    const float *pos;   /* [2][pos_size][n_embd]: plane 0 by patch column, plane 1 by patch row */
    vision_layer *layers;
    const float *std_bias, *std_scale;
    eli_mm_linear proj; /* mm.input_projection {n_embd, n_embd_text} */
};

int eli_vision_n_embd(const eli_vision *v) { return v->n_embd_text; }

/* ---- loading ---- */

static int vec(eli_vision *v, const float **out, const char *name, int64_t n, eli_error *err) {
    const int64_t ne[4] = {n, 1, 1, 1};
    return eli_mmproj_f32_tensor(v->p, name, 0, ne, out, err);
}

static int bind_layer(eli_vision *v, int il, eli_error *err) {
    vision_layer *l = &v->layers[il];
    const eli_mm_hparams *hp = &v->hp;
    const int64_t E = hp->n_embd, D = hp->head_dim, QD = (int64_t)hp->n_head * D, KD = (int64_t)hp->n_head_kv * D;
    char name[96];
    int rc;
#define NAME(s) (snprintf(name, sizeof name, "v.blk.%d.%s", il, s), name)
    if (gguf_find_tensor(v->p->file, NAME("attn_qkv.weight")))
        return eli_fail(err, ELI_ERR_INVALID_ARG, "tensor '%s': a fused QKV projection is not a gemma4v layout", name);
    if ((rc = vec(v, &l->ln1, NAME("ln1.weight"), E, err)) || (rc = vec(v, &l->ln1_b, NAME("ln1.bias"), E, err)) ||
        (rc = vec(v, &l->ln2, NAME("ln2.weight"), E, err)) || (rc = vec(v, &l->ln2_b, NAME("ln2.bias"), E, err)) ||
        (rc = vec(v, &l->attn_post_norm, NAME("attn_post_norm.weight"), E, err)) ||
        (rc = vec(v, &l->ffn_post_norm, NAME("ffn_post_norm.weight"), E, err)) ||
        (rc = vec(v, &l->ls1, NAME("ls1.weight"), E, err)) || (rc = vec(v, &l->ls2, NAME("ls2.weight"), E, err)))
        return rc;
    /* q/k norms: per head when their length is the head size (llama.cpp's norm_per_head), else the row */
    const gguf_tensor *qn = gguf_find_tensor(v->p->file, NAME("attn_q_norm.weight"));
    l->qk_norm_per_head = !qn || qn->ne[0] == D;
    if ((rc = vec(v, &l->q_norm, NAME("attn_q_norm.weight"), l->qk_norm_per_head ? D : QD, err)) ||
        (rc = vec(v, &l->k_norm, NAME("attn_k_norm.weight"), l->qk_norm_per_head ? D : KD, err)))
        return rc;
    if ((rc = eli_mmproj_linear(v->p, &l->q, NAME("attn_q"), 1, E, QD, err)) ||
        (rc = eli_mmproj_linear(v->p, &l->k, NAME("attn_k"), 1, E, KD, err)) ||
        (rc = eli_mmproj_linear(v->p, &l->v, NAME("attn_v"), 1, E, KD, err)) ||
        (rc = eli_mmproj_linear(v->p, &l->o, NAME("attn_out"), 1, QD, E, err)) ||
        (rc = eli_mmproj_linear(v->p, &l->gate, NAME("ffn_gate"), 0, E, hp->n_ff, err)) ||
        (rc = eli_mmproj_linear(v->p, &l->up, NAME("ffn_up"), 1, E, hp->n_ff, err)) ||
        (rc = eli_mmproj_linear(v->p, &l->down, NAME("ffn_down"), 1, hp->n_ff, E, err)))
        return rc;
    const gguf_tensor *os = gguf_find_tensor(v->p->file, NAME("out_scale.weight"));
    if (os) {
        l->out_scale_n = os->ne[0] == 1 ? 1 : (int)E;
        if ((rc = vec(v, &l->out_scale, name, l->out_scale_n, err))) return rc;
    }
#undef NAME
    return ELI_OK;
}

/* The patch kernel {patch, patch, 3, n_embd} as an F16 matrix whose rows are ggml's im2col order
 * (channel, row, column). */
static int bind_patch(eli_vision *v, eli_error *err) {
    const int64_t K = 3 * (int64_t)v->patch * v->patch, E = v->hp.n_embd;
    const int64_t ne[4] = {v->patch, v->patch, 3, E};
    const float *w;
    int rc = eli_mmproj_f32_tensor(v->p, "v.patch_embd.weight", 1, ne, &w, err);
    if (rc) return rc;
    eli_fp16 *h = malloc((size_t)(K * E) * sizeof *h);
    if (!h) return eli_fail(err, ELI_ERR_OOM, "out of memory for the patch kernel");
    for (int64_t i = 0; i < K * E; i++) h[i] = eli_fp32_to_fp16(w[i]);
    v->patch_f16 = h;
    v->patch_w = (eli_weight){.data = h, .type = ELI_TYPE_F16, .cols = K, .rows = E, .n_mat = 1,
                              .row_bytes = (size_t)K * sizeof *h, .name = "v.patch_embd.weight"};
    /* left row-major: its kernel sums in llama.cpp's order here (measured: a one-block Q8_0 tower came out
     * bit-identical), and the Q8_0 towers amplify any difference in their input */
    return ELI_OK;
}

static int load_keys(eli_vision *v, eli_error *err) {
    int rc;
    if ((rc = eli_mmproj_hparams(v->p, ELI_MM_VISION, &v->hp, err))) return rc;
    if ((rc = eli_mmproj_u32(v->p, "clip.vision.patch_size", 1, 1, 256, &v->patch, err))) return rc;
    v->merge = 3; /* gemma4v's pooling kernel when the key is absent */
    if ((rc = eli_mmproj_u32(v->p, "clip.vision.projector.scale_factor", 0, 1, 64, &v->merge, err))) return rc;
    if (v->patch * v->merge > 1024)
        return eli_fail(err, ELI_ERR_INVALID_ARG, "patch size %d x pooling %d = %d pixels per token side exceeds 1024", v->patch,
                        v->merge, v->patch * v->merge);
    if (v->hp.head_dim % 4)
        return eli_fail(err, ELI_ERR_INVALID_ARG, "head size %d is not a multiple of 4 (the 2-D RoPE rotates pairs in each half)",
                        v->hp.head_dim);
    if ((rc = eli_mmproj_f32_array(v->p, "clip.vision.image_mean", 1, 3, v->mean, err)) ||
        (rc = eli_mmproj_f32_array(v->p, "clip.vision.image_std", 1, 3, v->std, err)))
        return rc;
    for (int c = 0; c < 3; c++)
        if (v->std[c] == 0.0f)
            return eli_fail(err, ELI_ERR_INVALID_ARG, "key 'clip.vision.image_std'[%d] is 0 (pixels are divided by it)", c);
    int gelu = 0, silu = 0;
    if ((rc = eli_mmproj_bool(v->p, "clip.use_gelu", &gelu, err)) || (rc = eli_mmproj_bool(v->p, "clip.use_silu", &silu, err)))
        return rc;
    if (gelu && silu) return eli_fail(err, ELI_ERR_INVALID_ARG, "both clip.use_gelu and clip.use_silu are set");
    v->act = gelu ? ACT_GELU : silu ? ACT_SILU : ACT_GELU_QUICK;
    return ELI_OK;
}

static int load(eli_vision *v, eli_error *err) {
    const char *type = eli_mmproj_type(v->p, ELI_MM_VISION);
    if (!type) return eli_fail(err, ELI_ERR_INVALID_ARG, "the projector has no vision encoder");
    if (strcmp(type, "gemma4v"))
        return eli_fail(err, ELI_ERR_INVALID_ARG, "vision projector type '%s' is not supported (expected gemma4v)", type);
    int rc = load_keys(v, err);
    if (rc) return rc;
    const int64_t E = v->hp.n_embd;
    if ((rc = bind_patch(v, err))) return rc;
    const gguf_tensor *pt = gguf_find_tensor(v->p->file, "v.position_embd.weight");
    if (!pt) return eli_fail(err, ELI_ERR_INVALID_ARG, "missing tensor 'v.position_embd.weight'");
    if (pt->ne[1] < 1 || pt->ne[1] > ELI_IMAGE_MAX_SIDE)
        return eli_fail(err, ELI_ERR_INVALID_ARG, "tensor 'v.position_embd.weight' has %lld positions per axis",
                        (long long)pt->ne[1]);
    v->pos_size = (int)pt->ne[1];
    const int64_t pos_ne[4] = {E, v->pos_size, 2, 1};
    if ((rc = eli_mmproj_f32_tensor(v->p, "v.position_embd.weight", 1, pos_ne, &v->pos, err))) return rc;
    v->layers = calloc((size_t)v->hp.n_layer, sizeof *v->layers);
    if (!v->layers) return eli_fail(err, ELI_ERR_OOM, "out of memory");
    for (int il = 0; il < v->hp.n_layer; il++)
        if ((rc = bind_layer(v, il, err))) return rc;
    if ((rc = vec(v, &v->std_bias, "v.std_bias", E, err)) || (rc = vec(v, &v->std_scale, "v.std_scale", E, err))) return rc;
    if ((rc = eli_mmproj_linear(v->p, &v->proj, "mm.input_projection", 1, E, v->hp.proj_dim, err))) return rc;
    v->n_embd_text = v->hp.proj_dim;
    return ELI_OK;
}

eli_vision *eli_vision_load(eli_mmproj *p, eli_error *err) {
    eli_vision *v = calloc(1, sizeof *v);
    if (!v) {
        eli_fail(err, ELI_ERR_OOM, "out of memory");
        return NULL;
    }
    v->p = p;
    if (load(v, err)) {
        eli_vision_free(v);
        return NULL;
    }
    return v;
}

void eli_vision_free(eli_vision *v) {
    if (!v) return;
    free(v->patch_f16);
    free(v->layers);
    free(v);
}

/* ---- preprocessing (mtmd-image.cpp), in float arithmetic as there ---- */

void eli_vision_target_size(const eli_vision *v, int w, int h, int *tw, int *th) {
    const int a = v->patch * v->merge;
    const float fa = (float)a;
    const int min_px = ELI_VISION_MIN_TOKENS * a * a, max_px = ELI_VISION_MAX_TOKENS * a * a;
    int wb = (int)roundf((float)w / fa) * a, hb = (int)roundf((float)h / fa) * a;
    wb = wb > a ? wb : a;
    hb = hb > a ? hb : a;
    if ((int64_t)hb * wb > max_px) {
        const float beta = sqrtf((float)h * (float)w / (float)max_px);
        hb = (int)floorf((float)h / beta / fa) * a;
        wb = (int)floorf((float)w / beta / fa) * a;
        hb = hb > a ? hb : a;
        wb = wb > a ? wb : a;
    } else if ((int64_t)hb * wb < min_px) {
        const float beta = sqrtf((float)min_px / ((float)h * (float)w));
        hb = (int)ceilf((float)h * beta / fa) * a;
        wb = (int)ceilf((float)w * beta / fa) * a;
    }
    *tw = wb;
    *th = hb;
}

/* The two source pixels around position p of a row or column of n (align-corners) and the second's weight. */
static void neighbours(float p, int n, int *i0, int *i1, float *frac) {
    const int a = (int)p < n - 1 ? (int)p : n - 1;
    *i0 = a;
    *i1 = a + 1 < n - 1 ? a + 1 : n - 1;
    *frac = p - (float)a;
}

/* Bilinear with align-corners ratios, no antialiasing, truncation to uint8 (mtmd's resize_bilinear). */
static void resize_bilinear(const eli_image *src, eli_image *dst, int x0, int y0, int nw, int nh) {
    const float xr = nw > 1 ? (float)(src->w - 1) / (float)(nw - 1) : 0.0f;
    const float yr = nh > 1 ? (float)(src->h - 1) / (float)(nh - 1) : 0.0f;
    for (int y = 0; y < nh; y++) {
        int sy0, sy1, sx0, sx1;
        float yf, xf;
        neighbours((float)y * yr, src->h, &sy0, &sy1, &yf);
        uint8_t *out = dst->rgb + ((size_t)(y0 + y) * dst->w + x0) * 3;
        for (int x = 0; x < nw; x++) {
            neighbours((float)x * xr, src->w, &sx0, &sx1, &xf);
            const uint8_t *p00 = src->rgb + ((size_t)sy0 * src->w + sx0) * 3, *p10 = src->rgb + ((size_t)sy0 * src->w + sx1) * 3;
            const uint8_t *p01 = src->rgb + ((size_t)sy1 * src->w + sx0) * 3, *p11 = src->rgb + ((size_t)sy1 * src->w + sx1) * 3;
            for (int c = 0; c < 3; c++) {
                const float top = (float)p00[c] + ((float)p10[c] - (float)p00[c]) * xf;
                const float bottom = (float)p01[c] + ((float)p11[c] - (float)p01[c]) * xf;
                out[3 * x + c] = (uint8_t)(top + (bottom - top) * yf);
            }
        }
    }
}

int eli_vision_preprocess(const eli_vision *v, const eli_image *img, eli_image *out, eli_error *err) {
    if (!img->rgb || img->w < 1 || img->h < 1) return eli_fail(err, ELI_ERR_INVALID_ARG, "empty image");
    int tw, th;
    eli_vision_target_size(v, img->w, img->h, &tw, &th);
    int rc = eli_image_alloc(out, tw, th, err);
    if (rc) return rc;
    if (tw == img->w && th == img->h) {
        memcpy(out->rgb, img->rgb, (size_t)tw * th * 3);
        return ELI_OK;
    }
    /* PAD_CEIL: the largest aspect-preserving size inside the target, centred on black */
    const float sw = (float)tw / (float)img->w, sh = (float)th / (float)img->h, s = sw < sh ? sw : sh;
    int nw = (int)ceilf((float)img->w * s), nh = (int)ceilf((float)img->h * s);
    nw = nw < tw ? nw : tw;
    nh = nh < th ? nh : th;
    memset(out->rgb, 0, (size_t)tw * th * 3);
    resize_bilinear(img, out, (tw - nw) / 2, (th - nh) / 2, nw, nh);
    return ELI_OK;
}

/* ---- encoding ---- */

typedef struct {
    const eli_vision *v;
    eli_pool *pool;
    const eli_kernels *k;
    eli_buf scratch;
    int P, gx, gy;
    float *h, *cur, *q, *kk, *vv, *attn, *o, *gate, *up, *kh, *vt, *qh, *s, *oh;
} encoder;

/* y = RMS(x) * w + b for n floats (w, b optional) */
static void norm(float *y, const float *x, const float *w, const float *b, int64_t n, float eps) {
    eli_rms_norm(y, x, w, n, eps);
    if (b)
        for (int64_t i = 0; i < n; i++) y[i] += b[i];
}

static void mul(float *x, const float *s, int64_t n) {
    for (int64_t i = 0; i < n; i++) x[i] *= s[i];
}

typedef struct {
    float *s;
    int n;
    const eli_kernels *k;
} softmax_job;

static void softmax_task(void *ctx, int ith, int nth) {
    const softmax_job *j = ctx;
    int64_t b, e;
    eli_split(j->n, ith, nth, &b, &e);
    for (int64_t r = b; r < e; r++) {
        float *row = j->s + r * j->n, mx = -INFINITY;
        for (int i = 0; i < j->n; i++) mx = row[i] > mx ? row[i] : mx;
        j->k->scale_f32(j->n, 1.0f / j->k->exp_sum_f32(j->n, mx, row), row);
    }
}

static int matmul_f32(encoder *en, const float *w, int64_t cols, int64_t rows, const float *x, int64_t T, float *y) {
    const eli_weight m = {.data = w, .type = ELI_TYPE_F32, .cols = cols, .rows = rows, .n_mat = 1,
                          .row_bytes = (size_t)cols * sizeof(float), .name = "attention"};
    return eli_matmul_k(en->pool, en->k, &m, 0, x, T, y, &en->scratch);
}

/* Bidirectional attention of every head over all P patches, scale 1: per head S = Q K^T, softmax by rows,
 * O = S V, each product one batched matmul (K and V^T laid out as weight matrices). */
static int attention(encoder *en) {
    const eli_mm_hparams *hp = &en->v->hp;
    const int P = en->P, D = hp->head_dim, QD = hp->n_head * D, KD = hp->n_head_kv * D;
    const int group = hp->n_head / hp->n_head_kv;
    for (int hd = 0; hd < hp->n_head; hd++) {
        const int kvh = hd / group;
        for (int t = 0; t < P; t++) {
            memcpy(en->qh + (size_t)t * D, en->q + (size_t)t * QD + (size_t)hd * D, (size_t)D * sizeof(float));
            if (hd % group == 0) {
                memcpy(en->kh + (size_t)t * D, en->kk + (size_t)t * KD + (size_t)kvh * D, (size_t)D * sizeof(float));
                for (int i = 0; i < D; i++) en->vt[(size_t)i * P + t] = en->vv[(size_t)t * KD + (size_t)kvh * D + i];
            }
        }
        int rc = matmul_f32(en, en->kh, D, P, en->qh, P, en->s);
        if (rc) return rc;
        softmax_job sj = {en->s, P, en->k};
        eli_pool_run(eli_pool_for(en->pool, (int64_t)P * P * 8), softmax_task, &sj);
        if ((rc = matmul_f32(en, en->vt, P, D, en->s, P, en->oh))) return rc;
        for (int t = 0; t < P; t++)
            memcpy(en->attn + (size_t)t * QD + (size_t)hd * D, en->oh + (size_t)t * D, (size_t)D * sizeof(float));
    }
    return ELI_OK;
}

/* The per-token steps between a layer's matmuls, split over the pool by tokens (each token's result is the
 * same whichever thread computes it). */
typedef enum { STEP_LN1, STEP_QKV, STEP_ATTN_OUT, STEP_ACT, STEP_FFN_OUT } token_step;

typedef struct {
    const encoder *en;
    const vision_layer *l;
    token_step step;
} tokens_job;

static void token(const encoder *en, const vision_layer *l, token_step step, int t) {
    const eli_mm_hparams *hp = &en->v->hp;
    const int E = hp->n_embd, D = hp->head_dim, QD = hp->n_head * D, KD = hp->n_head_kv * D;
    const float eps = hp->eps;
    float *h = en->h + (size_t)t * E, *o = en->o + (size_t)t * E;
    switch (step) {
    case STEP_LN1: norm(en->cur + (size_t)t * E, h, l->ln1, l->ln1_b, E, eps); break;
    case STEP_QKV: {
        float *q = en->q + (size_t)t * QD, *k = en->kk + (size_t)t * KD, *vr = en->vv + (size_t)t * KD;
        const int qn = l->qk_norm_per_head ? hp->n_head : 1, kn = l->qk_norm_per_head ? hp->n_head_kv : 1;
        for (int hd = 0; l->q_norm && hd < qn; hd++) norm(q + hd * QD / qn, q + hd * QD / qn, l->q_norm, NULL, QD / qn, eps);
        for (int hd = 0; l->k_norm && hd < kn; hd++) norm(k + hd * KD / kn, k + hd * KD / kn, l->k_norm, NULL, KD / kn, eps);
        /* 2-D RoPE: the first half of each head by the patch column, the second half by the patch row */
        const int32_t px = t % en->gx, py = t / en->gx;
        eli_rope_neox(q, hp->n_head, D, D / 2, px, 100.0f, NULL);
        eli_rope_neox(q + D / 2, hp->n_head, D, D / 2, py, 100.0f, NULL);
        eli_rope_neox(k, hp->n_head_kv, D, D / 2, px, 100.0f, NULL);
        eli_rope_neox(k + D / 2, hp->n_head_kv, D, D / 2, py, 100.0f, NULL);
        for (int hd = 0; hd < hp->n_head_kv; hd++) eli_rms_norm(vr + hd * D, vr + hd * D, NULL, D, eps);
        break;
    }
    case STEP_ATTN_OUT:
        if (l->ls1) mul(o, l->ls1, E);
        if (l->attn_post_norm) norm(o, o, l->attn_post_norm, NULL, E, eps);
        for (int i = 0; i < E; i++) h[i] += o[i];
        norm(en->cur + (size_t)t * E, h, l->ln2, l->ln2_b, E, eps);
        break;
    case STEP_ACT: {
        /* act(gate) * up; without a gate act(up) alone, as the product with a row of ones */
        const int64_t F = hp->n_ff;
        float *a = (l->gate.w.data ? en->gate : en->up) + t * F, *other = (l->gate.w.data ? en->up : en->gate) + t * F;
        if (!l->gate.w.data)
            for (int64_t i = 0; i < F; i++) other[i] = 1.0f;
        switch (en->v->act) {
        case ACT_GELU: eli_geglu(en->k, F, a, other); break;
        case ACT_GELU_QUICK: eli_geglu_quick(en->k, F, a, other); break;
        case ACT_SILU:
            for (int64_t i = 0; i < F; i++) a[i] = a[i] / (1.0f + expf(-a[i])) * other[i];
            break;
        }
        break;
    }
    case STEP_FFN_OUT:
        if (l->ffn_post_norm) norm(o, o, l->ffn_post_norm, NULL, E, eps);
        if (l->ls2) mul(o, l->ls2, E);
        for (int i = 0; i < E; i++) h[i] += o[i];
        if (l->out_scale)
            for (int i = 0; i < E; i++) h[i] *= l->out_scale[l->out_scale_n == 1 ? 0 : i];
        break;
    }
}

static void tokens_task(void *ctx, int ith, int nth) {
    const tokens_job *j = ctx;
    int64_t b, e;
    eli_split(j->en->P, ith, nth, &b, &e);
    for (int64_t t = b; t < e; t++) token(j->en, j->l, j->step, (int)t);
}

static void tokens(encoder *en, const vision_layer *l, token_step step) {
    tokens_job j = {en, l, step};
    eli_pool_run(eli_pool_for(en->pool, (int64_t)en->P * en->v->hp.n_embd * 8), tokens_task, &j);
}

static int layer(encoder *en, const vision_layer *l, eli_error *err) {
    const int P = en->P;
    int rc;
    tokens(en, l, STEP_LN1);
    /* q, k, v in llama.cpp's order: each input clamp acts in place on cur, so k sees q's too */
    if ((rc = eli_mm_linear_apply(en->pool, &l->q, en->cur, P, en->q, &en->scratch, err)) ||
        (rc = eli_mm_linear_apply(en->pool, &l->k, en->cur, P, en->kk, &en->scratch, err)) ||
        (rc = eli_mm_linear_apply(en->pool, &l->v, en->cur, P, en->vv, &en->scratch, err)))
        return rc;
    tokens(en, l, STEP_QKV);
    if ((rc = attention(en))) return eli_fail(err, rc, "out of memory in the vision attention");
    if ((rc = eli_mm_linear_apply(en->pool, &l->o, en->attn, P, en->o, &en->scratch, err))) return rc;
    tokens(en, l, STEP_ATTN_OUT);
    /* the FFN: gate before up (llama.cpp's execution order of their in-place input clamps) */
    if (l->gate.w.data && (rc = eli_mm_linear_apply(en->pool, &l->gate, en->cur, P, en->gate, &en->scratch, err))) return rc;
    if ((rc = eli_mm_linear_apply(en->pool, &l->up, en->cur, P, en->up, &en->scratch, err))) return rc;
    tokens(en, l, STEP_ACT);
    if ((rc = eli_mm_linear_apply(en->pool, &l->down, l->gate.w.data ? en->gate : en->up, P, en->o, &en->scratch, err)))
        return rc;
    tokens(en, l, STEP_FFN_OUT);
    return ELI_OK;
}

static float *grab(float **at, size_t n) {
    float *p = *at;
    *at += (n + 15) & ~(size_t)15;
    return p;
}

static int encode(encoder *en, const eli_image *img, eli_vision_embd *out, eli_error *err) {
    const eli_vision *v = en->v;
    const eli_mm_hparams *hp = &v->hp;
    const int ps = v->patch, E = hp->n_embd, K = 3 * ps * ps, M = v->merge;
    const int P = en->P = en->gx * en->gy;
    const size_t QD = (size_t)hp->n_head * hp->head_dim, KD = (size_t)hp->n_head_kv * hp->head_dim;
    const size_t F = (size_t)hp->n_ff, D = (size_t)hp->head_dim;
    const size_t wide = (size_t)(K > E ? K : E) > QD ? (size_t)(K > E ? K : E) : QD;
    const size_t total = (size_t)P * (2 * (size_t)E + wide + QD + 2 * KD + QD + 2 * F + 3 * D) + (size_t)P * P +
                         D * P + 64 * 16;
    float *arena = malloc(total * sizeof(float)), *at = arena;
    if (!arena) return eli_fail(err, ELI_ERR_OOM, "out of memory for %d patches", P);
    en->h = grab(&at, (size_t)P * E);
    en->cur = grab(&at, (size_t)P * wide); /* the patches (K wide) first, then the normed rows */
    en->q = grab(&at, (size_t)P * QD);
    en->kk = grab(&at, (size_t)P * KD);
    en->vv = grab(&at, (size_t)P * KD);
    en->attn = grab(&at, (size_t)P * QD);
    en->o = grab(&at, (size_t)P * E);
    en->gate = grab(&at, (size_t)P * F);
    en->up = grab(&at, (size_t)P * F);
    en->qh = grab(&at, (size_t)P * D);
    en->kh = grab(&at, (size_t)P * D);
    en->oh = grab(&at, (size_t)P * D);
    en->vt = grab(&at, D * P);
    en->s = grab(&at, (size_t)P * P);
    int rc = ELI_OK;
    /* pixels: v / 255, (v - mean) / std, then 2v - 1 (the graph's scale_bias); im2col rows (c, ky, kx) */
    for (int t = 0; t < P; t++) {
        const int px = t % en->gx, py = t / en->gx;
        float *row = en->cur + (size_t)t * K;
        for (int c = 0; c < 3; c++)
            for (int ky = 0; ky < ps; ky++)
                for (int kx = 0; kx < ps; kx++) {
                    const uint8_t u = img->rgb[((size_t)(py * ps + ky) * img->w + (size_t)(px * ps + kx)) * 3 + c];
                    const float f = ((float)u / 255.0f - v->mean[c]) / v->std[c];
                    row[(c * ps + ky) * ps + kx] = f * 2.0f - 1.0f;
                }
    }
    if (eli_matmul_k(en->pool, en->k, &v->patch_w, 0, en->cur, P, en->h, &en->scratch)) {
        rc = eli_fail(err, ELI_ERR_OOM, "out of memory in the patch embedding");
        goto done;
    }
    for (int t = 0; t < P; t++) {
        const float *ex = v->pos + (size_t)(t % en->gx) * E, *ey = v->pos + ((size_t)v->pos_size + (size_t)(t / en->gx)) * E;
        float *h = en->h + (size_t)t * E;
        for (int i = 0; i < E; i++) h[i] = h[i] + ex[i] + ey[i];
    }
    for (int il = 0; il < hp->n_layer; il++)
        if ((rc = layer(en, &v->layers[il], err))) goto done;
    /* average over M x M patch squares, times sqrt(E); then standardise and RMS-normalise */
    const int ox = en->gx / M, oy = en->gy / M, N = ox * oy;
    const float scale = sqrtf((float)E);
    float *pooled = en->o;
    for (int ty = 0; ty < oy; ty++)
        for (int tx = 0; tx < ox; tx++) {
            float *dst = pooled + ((size_t)ty * ox + tx) * E;
            for (int i = 0; i < E; i++) {
                float acc = 0.0f;
                for (int ky = 0; ky < M; ky++)
                    for (int kx = 0; kx < M; kx++) acc += en->h[((size_t)(ty * M + ky) * en->gx + (size_t)(tx * M + kx)) * E + i];
                dst[i] = acc / (float)(M * M) * scale;
            }
            if (v->std_bias && v->std_scale)
                for (int i = 0; i < E; i++) dst[i] = (dst[i] - v->std_bias[i]) * v->std_scale[i];
            eli_rms_norm(dst, dst, NULL, E, hp->eps);
        }
    out->embd = malloc((size_t)N * v->n_embd_text * sizeof(float));
    if (!out->embd) {
        rc = eli_fail(err, ELI_ERR_OOM, "out of memory for %d embeddings", N);
        goto done;
    }
    if ((rc = eli_mm_linear_apply(en->pool, &v->proj, pooled, N, out->embd, &en->scratch, err))) {
        free(out->embd);
        out->embd = NULL;
        goto done;
    }
    out->n_tokens = N;
    out->n_embd = v->n_embd_text;
    out->grid_w = ox;
    out->grid_h = oy;
done:
    free(arena);
    return rc;
}

int eli_vision_encode(const eli_vision *v, eli_pool *pool, const eli_image *img, eli_vision_embd *out, eli_error *err) {
    memset(out, 0, sizeof *out);
    eli_image pre;
    int rc = eli_vision_preprocess(v, img, &pre, err);
    if (rc) return rc;
    encoder en = {.v = v, .pool = pool, .k = eli_kernels_best(), .gx = pre.w / v->patch, .gy = pre.h / v->patch};
    if (en.gx > v->pos_size || en.gy > v->pos_size)
        rc = eli_fail(err, ELI_ERR_INVALID_ARG, "the image needs %d x %d patches, the position table has %d per axis", en.gx,
                      en.gy, v->pos_size);
    else
        rc = encode(&en, &pre, out, err);
    if (!rc) {
        out->width = pre.w;
        out->height = pre.h;
    }
    eli_buf_free(&en.scratch);
    eli_image_free(&pre);
    return rc;
}

void eli_vision_embd_free(eli_vision_embd *e) {
    free(e->embd);
    memset(e, 0, sizeof *e);
}
