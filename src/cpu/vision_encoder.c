/* The Gemma 4 vision tower's encoder on the CPU (vision.h binds it; references are to llama.cpp tools/mtmd
 * at 3f545becc, models/gemma4v.cpp and clip.cpp's build_vit / build_attn / build_ffn): the patch
 * embedding, the ViT blocks with 2-D RoPE and bidirectional attention, pooling, standardisation and the
 * projection. Matmuls and attention are batched matmuls on the thread pool; the per-token steps between
 * them are split over the pool by tokens, so the result does not depend on the thread count. */
#include "tower.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"
#include "quants.h"

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
    const eli_vision_layer *l;
    token_step step;
} tokens_job;

static void token(const encoder *en, const eli_vision_layer *l, token_step step, int t) {
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
        case ELI_VISION_GELU: eli_geglu(en->k, F, a, other); break;
        case ELI_VISION_GELU_QUICK: eli_geglu_quick(en->k, F, a, other); break;
        case ELI_VISION_SILU:
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

static void tokens(encoder *en, const eli_vision_layer *l, token_step step) {
    tokens_job j = {en, l, step};
    eli_pool_run(eli_pool_for(en->pool, (int64_t)en->P * en->v->hp.n_embd * 8), tokens_task, &j);
}

static int layer(encoder *en, const eli_vision_layer *l, eli_error *err) {
    const int P = en->P;
    int rc;
    tokens(en, l, STEP_LN1);
    /* q, k, v in llama.cpp's order: each input clamp acts in place on cur, so k sees q's too */
    if ((rc = eli_mm_linear_apply(en->pool, en->k, &l->q, en->cur, P, en->q, &en->scratch, err)) ||
        (rc = eli_mm_linear_apply(en->pool, en->k, &l->k, en->cur, P, en->kk, &en->scratch, err)) ||
        (rc = eli_mm_linear_apply(en->pool, en->k, &l->v, en->cur, P, en->vv, &en->scratch, err)))
        return rc;
    tokens(en, l, STEP_QKV);
    if ((rc = attention(en))) return eli_fail(err, rc, "out of memory in the vision attention");
    if ((rc = eli_mm_linear_apply(en->pool, en->k, &l->o, en->attn, P, en->o, &en->scratch, err))) return rc;
    tokens(en, l, STEP_ATTN_OUT);
    /* the FFN: gate before up (llama.cpp's execution order of their in-place input clamps) */
    if (l->gate.w.data && (rc = eli_mm_linear_apply(en->pool, en->k, &l->gate, en->cur, P, en->gate, &en->scratch, err))) return rc;
    if ((rc = eli_mm_linear_apply(en->pool, en->k, &l->up, en->cur, P, en->up, &en->scratch, err))) return rc;
    tokens(en, l, STEP_ACT);
    if ((rc = eli_mm_linear_apply(en->pool, en->k, &l->down, l->gate.w.data ? en->gate : en->up, P, en->o, &en->scratch, err)))
        return rc;
    tokens(en, l, STEP_FFN_OUT);
    return ELI_OK;
}

static float *grab(float **at, size_t n) {
    float *p = *at;
    *at += (n + 15) & ~(size_t)15;
    return p;
}

static int encode(encoder *en, const eli_image *img, float *out, eli_error *err) {
    const eli_vision *v = en->v;
    const eli_mm_hparams *hp = &v->hp;
    const int ps = v->patch, E = hp->n_embd, K = 3 * ps * ps, M = v->merge;
    const int P = en->P = en->gx * en->gy;
    const size_t QD = (size_t)hp->n_head * hp->head_dim, KD = (size_t)hp->n_head_kv * hp->head_dim;
    const size_t F = (size_t)hp->n_ff, D = (size_t)hp->head_dim;
    const size_t wide = (size_t)(K > E ? K : E) > QD ? (size_t)(K > E ? K : E) : QD;
    const size_t total = (size_t)P * (2 * (size_t)E + wide + QD + 2 * KD + QD + 2 * F + 3 * D) + (size_t)P * P +
                         D * P + 64 * 16;
    if (P < 1) return eli_fail(err, ELI_ERR_INVALID_ARG, "an image of no patches");
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
    rc = eli_mm_linear_apply(en->pool, en->k, &v->proj, pooled, N, out, &en->scratch, err);
done:
    free(arena);
    return rc;
}

int eli_cpu_vision_encode(const eli_vision *v, eli_pool *pool, const eli_kernels *k, const eli_image *img, float *out,
                          eli_error *err) {
    encoder en;
    memset(&en, 0, sizeof en);
    en.v = v, en.pool = pool, en.k = k, en.gx = img->w / v->patch, en.gy = img->h / v->patch;
    const int rc = encode(&en, img, out, err);
    eli_buf_free(&en.scratch);
    return rc;
}
