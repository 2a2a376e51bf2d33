/* The Gemma 4 vision tower (see vision.h). References are to llama.cpp tools/mtmd at 3f545becc:
 * mtmd-image.cpp (calc_size_preserved_ratio, resize, resize_bilinear), clip.cpp (build_vit, build_attn,
 * build_ffn, the gemma4v hparams and clamp loading). The encoder itself is a device's (src/cpu/vision_encoder.c). */
#include "fp_exact.h" /* the resize is compared byte for byte: no contraction of its float steps */

#include "vision.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec.h"
#include "quants.h"

int eli_vision_n_embd(const eli_vision *v) { return v->n_embd_text; }

/* ---- loading ---- */

static int vec(eli_vision *v, const float **out, const char *name, int64_t n, eli_error *err) {
    const int64_t ne[4] = {n, 1, 1, 1};
    return eli_mmproj_f32_tensor(v->p, name, 0, ne, out, err);
}

static int bind_layer(eli_vision *v, int il, eli_error *err) {
    eli_vision_layer *l = &v->layers[il];
    const eli_mm_hparams *hp = &v->hp;
    const int64_t E = hp->n_embd, D = hp->head_dim, QD = (int64_t)hp->n_head * D, KD = (int64_t)hp->n_head_kv * D;
    char name[96];
    int rc;
#define NAME(s) (snprintf(name, sizeof name, "v.blk.%d.%s", il, s), name)
    if (eli_gguf_find_tensor(v->p->file, NAME("attn_qkv.weight")))
        return eli_fail(err, ELI_ERR_INVALID_ARG, "tensor '%s': a fused QKV projection is not a gemma4v layout", name);
    if ((rc = vec(v, &l->ln1, NAME("ln1.weight"), E, err)) || (rc = vec(v, &l->ln1_b, NAME("ln1.bias"), E, err)) ||
        (rc = vec(v, &l->ln2, NAME("ln2.weight"), E, err)) || (rc = vec(v, &l->ln2_b, NAME("ln2.bias"), E, err)) ||
        (rc = vec(v, &l->attn_post_norm, NAME("attn_post_norm.weight"), E, err)) ||
        (rc = vec(v, &l->ffn_post_norm, NAME("ffn_post_norm.weight"), E, err)) ||
        (rc = vec(v, &l->ls1, NAME("ls1.weight"), E, err)) || (rc = vec(v, &l->ls2, NAME("ls2.weight"), E, err)))
        return rc;
    /* q/k norms: per head when their length is the head size (llama.cpp's norm_per_head), else the row */
    const eli_gguf_tensor *qn = eli_gguf_find_tensor(v->p->file, NAME("attn_q_norm.weight"));
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
    const eli_gguf_tensor *os = eli_gguf_find_tensor(v->p->file, NAME("out_scale.weight"));
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
    v->act = gelu ? ELI_VISION_GELU : silu ? ELI_VISION_SILU : ELI_VISION_GELU_QUICK;
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
    const eli_gguf_tensor *pt = eli_gguf_find_tensor(v->p->file, "v.position_embd.weight");
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

/* ---- encoding (on a device) ---- */

int eli_vision_encode(eli_xtower *t, const eli_image *img, eli_vision_embd *out, eli_error *err) {
    memset(out, 0, sizeof *out);
    const eli_vision *v = t->vision;
    if (!v) return eli_fail(err, ELI_ERR_INVALID_ARG, "not a vision tower");
    eli_image pre;
    int rc = eli_vision_preprocess(v, img, &pre, err);
    if (rc) return rc;
    const int gx = pre.w / v->patch, gy = pre.h / v->patch, n = (gx / v->merge) * (gy / v->merge);
    if (gx > v->pos_size || gy > v->pos_size)
        rc = eli_fail(err, ELI_ERR_INVALID_ARG, "the image needs %d x %d patches, the position table has %d per axis", gx, gy,
                      v->pos_size);
    else if (!(out->embd = malloc((size_t)n * (size_t)v->n_embd_text * sizeof(float))))
        rc = eli_fail(err, ELI_ERR_OOM, "out of memory for %d embeddings", n);
    else if ((rc = eli_xtower_encode_image(t, &pre, out->embd, err))) {
        free(out->embd);
        out->embd = NULL;
    } else {
        out->n_tokens = n;
        out->n_embd = v->n_embd_text;
        out->width = pre.w;
        out->height = pre.h;
        out->grid_w = gx / v->merge;
        out->grid_h = gy / v->merge;
    }
    eli_image_free(&pre);
    return rc;
}

void eli_vision_embd_free(eli_vision_embd *e) {
    free(e->embd);
    memset(e, 0, sizeof *e);
}
