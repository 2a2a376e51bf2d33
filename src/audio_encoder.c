#include "fp_exact.h" /* the depthwise convolution's and first convolution's sums are llama.cpp's, bit for bit */

#include "audio_encoder.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audio_mel.h"
#include "ops.h"
#include "quants.h"

#define NORM_EPS 1e-6f   /* every norm of the tower; llama.cpp ignores the file's value for gemma4a */
#define RES_WEIGHT 0.5f  /* the half-step feed-forwards */
#define ATT_WINDOW 12    /* a query sees itself and the 11 frames before it */
#define N_REL 13         /* relative positions 0..12 are projected (12 is masked out, but costs nothing) */
#define SOFTCAP 50.0f
#define MAX_KERNEL 64    /* depthwise kernel sizes accepted */

typedef struct {
    const float *norm, *post_norm; /* post_norm optional */
    eli_mm_linear up, down;
} half_ffn;

typedef struct {
    half_ffn ffn, ffn1;
    const float *attn_norm, *attn_post_norm, *q_scale, *k_scale; /* all but attn_norm optional */
    eli_mm_linear q, k, v, o;
    eli_weight k_rel;
    const float *conv_norm, *conv_post_norm; /* before pw1; after the depthwise conv (optional) */
    eli_mm_linear pw1, pw2;
    const float *dw, *dw_b; /* dw [n_conv][K]; dw_b optional */
    const float *out_norm;  /* ln2, optional */
} audio_block;

struct eli_audio_encoder {
    int n_layer, D, n_head, d_head, n_ff, n_mel;
    int C[2], F[2]; /* channels and frequency bins after each subsampling convolution */
    int n_conv, K;  /* GLU width and depthwise kernel size of the conv module */
    int n_embd;
    eli_weight conv[2]; /* the kernels rounded to f16 (as ggml's im2col path multiplies them), rows = channels */
    eli_fp16 *conv_f16[2];
    const float *conv_b[2], *conv_ln[2];
    eli_mm_linear in_proj, pre_out, mm_proj; /* pre_out.w.data NULL when absent */
    const float *soft_emb_norm;
    audio_block *blk;
    float *pos_emb; /* [N_REL][D]: the sinusoid of relative position r in row r */
    eli_mel_frontend mel;
};

/* ---- binding ---- */

typedef struct {
    eli_audio_encoder *e;
    eli_mmproj *p;
    eli_error *err;
} binder;

static int floats(binder *b, const float **out, const char *name, int required, int64_t ne0, int64_t ne1, int64_t ne2) {
    const int64_t ne[4] = {ne0, ne1, ne2, 1};
    return eli_mmproj_f32_tensor(b->p, name, required, ne, out, b->err);
}

/* A projection; keep_bias 0 drops a bias llama.cpp's graph never adds (ffn, pw1/pw2, q/k/v). */
static int linear_of(binder *b, eli_mm_linear *l, const char *prefix, int keep_bias, int64_t n_in, int64_t n_out) {
    const int rc = eli_mmproj_linear(b->p, l, prefix, 1, n_in, n_out, b->err);
    if (!keep_bias) l->bias = NULL;
    return rc;
}

/* A subsampling convolution a.conv1d.i: kernel {3, 3, cin, cout} rounded to f16, optional bias {1, 1, cout}
 * (the shape llama.cpp's graph can add), optional LayerNorm weight {cout}. */
static int bind_conv(binder *b, int i, int cin) {
    eli_audio_encoder *e = b->e;
    char name[64];
    snprintf(name, sizeof name, "a.conv1d.%d.weight", i);
    const gguf_tensor *t = gguf_find_tensor(b->p->file, name);
    if (!t) return eli_fail(b->err, ELI_ERR_INVALID_ARG, "missing tensor '%s'", name);
    const int64_t cout = t->ne[3];
    if (cout < 1 || cout > ELI_MM_MAX_DIM)
        return eli_fail(b->err, ELI_ERR_INVALID_ARG, "tensor '%s' has %lld output channels", name, (long long)cout);
    const float *k;
    const int64_t ne[4] = {3, 3, cin, cout}, cols = 9 * (int64_t)cin;
    int rc = eli_mmproj_f32_tensor(b->p, name, 1, ne, &k, b->err);
    if (rc) return rc;
    e->C[i] = (int)cout;
    if (!(e->conv_f16[i] = malloc((size_t)(cols * cout) * sizeof *e->conv_f16[i])))
        return eli_fail(b->err, ELI_ERR_OOM, "out of memory for '%s'", name);
    for (int64_t j = 0; j < cols * cout; j++) e->conv_f16[i][j] = eli_fp32_to_fp16(k[j]);
    eli_weight *w = &e->conv[i];
    w->data = e->conv_f16[i];
    w->type = ELI_TYPE_F16;
    w->cols = cols;
    w->rows = cout;
    w->n_mat = 1;
    w->row_bytes = eli_row_size(ELI_TYPE_F16, cols);
    w->name = t->name;
    snprintf(name, sizeof name, "a.conv1d.%d.bias", i);
    if ((rc = floats(b, &e->conv_b[i], name, 0, 1, 1, cout))) return rc;
    snprintf(name, sizeof name, "a.conv1d.%d.norm.weight", i);
    return floats(b, &e->conv_ln[i], name, 0, cout, 1, 1);
}

static int bind_block(binder *b, int il) {
    eli_audio_encoder *e = b->e;
    audio_block *l = &e->blk[il];
    const int64_t D = e->D, F = e->n_ff;
    char nm[160], nm2[32];
    int rc;
#define NAME(s) (snprintf(nm, sizeof nm, "a.blk.%d.%s", il, s), nm)
    half_ffn *h[2] = {&l->ffn, &l->ffn1};
    const char *sfx[2] = {"", "_1"};
    for (int i = 0; i < 2; i++) {
        snprintf(nm2, sizeof nm2, "ffn_norm%s.weight", sfx[i]);
        if ((rc = floats(b, &h[i]->norm, NAME(nm2), 1, D, 1, 1))) return rc;
        snprintf(nm2, sizeof nm2, "ffn_post_norm%s.weight", sfx[i]);
        if ((rc = floats(b, &h[i]->post_norm, NAME(nm2), 0, D, 1, 1))) return rc;
        snprintf(nm2, sizeof nm2, "ffn_up%s", sfx[i]);
        if ((rc = linear_of(b, &h[i]->up, NAME(nm2), 0, D, F))) return rc;
        snprintf(nm2, sizeof nm2, "ffn_down%s", sfx[i]);
        if ((rc = linear_of(b, &h[i]->down, NAME(nm2), 0, F, D))) return rc;
    }
    if ((rc = floats(b, &l->attn_norm, NAME("attn_pre_norm.weight"), 0, D, 1, 1))) return rc;
    if (!l->attn_norm && (rc = floats(b, &l->attn_norm, NAME("ln1.weight"), 0, D, 1, 1))) return rc;
    if (!l->attn_norm) return eli_fail(b->err, ELI_ERR_INVALID_ARG, "audio block %d has neither attn_pre_norm nor ln1", il);
    if ((rc = floats(b, &l->attn_post_norm, NAME("attn_post_norm.weight"), 0, D, 1, 1))) return rc;
    if ((rc = floats(b, &l->q_scale, NAME("per_dim_scale.weight"), 0, e->d_head, 1, 1))) return rc;
    if ((rc = floats(b, &l->k_scale, NAME("per_dim_k_scale.weight"), 0, e->d_head, 1, 1))) return rc;
    if ((rc = linear_of(b, &l->q, NAME("attn_q"), 0, D, D)) || (rc = linear_of(b, &l->k, NAME("attn_k"), 0, D, D)) ||
        (rc = linear_of(b, &l->v, NAME("attn_v"), 0, D, D)) || (rc = linear_of(b, &l->o, NAME("attn_out"), 1, D, D)))
        return rc;
    /* optional in llama.cpp's loader, but its encoder aborts without it (an unused graph input) */
    if ((rc = eli_mmproj_matrix(b->p, &l->k_rel, NAME("attn_k_rel.weight"), 1, D, D, b->err)) ||
        (rc = eli_mmproj_pack(b->p, &l->k_rel, b->err)))
        return rc;
    /* the GGUF's conv_norm is the norm before pw1 and norm_conv the one after the depthwise convolution
     * (llama.cpp's loader swaps the names back) */
    if ((rc = floats(b, &l->conv_norm, NAME("conv_norm.weight"), 1, D, 1, 1))) return rc;
    const gguf_tensor *pw1 = gguf_find_tensor(b->p->file, NAME("conv_pw1.weight"));
    if (!pw1) return eli_fail(b->err, ELI_ERR_INVALID_ARG, "missing tensor '%s'", nm);
    if (pw1->ne[1] < 2 || pw1->ne[1] % 2 || pw1->ne[1] > 2 * (int64_t)ELI_MM_MAX_DIM)
        return eli_fail(b->err, ELI_ERR_INVALID_ARG, "tensor '%s' has %lld rows, not an even GLU width", nm, (long long)pw1->ne[1]);
    const int64_t G = pw1->ne[1] / 2;
    if (il == 0) e->n_conv = (int)G;
    if (G != e->n_conv)
        return eli_fail(b->err, ELI_ERR_INVALID_ARG, "audio block %d has conv width %lld, block 0 %d", il, (long long)G, e->n_conv);
    if ((rc = linear_of(b, &l->pw1, NAME("conv_pw1"), 0, D, 2 * G))) return rc;
    const gguf_tensor *dw = gguf_find_tensor(b->p->file, NAME("conv_dw.weight"));
    if (!dw) return eli_fail(b->err, ELI_ERR_INVALID_ARG, "missing tensor '%s'", nm);
    if (il == 0) e->K = (int)(dw->ne[0] >= 1 && dw->ne[0] <= MAX_KERNEL ? dw->ne[0] : 0);
    if (e->K < 1 || dw->ne[0] != e->K)
        return eli_fail(b->err, ELI_ERR_INVALID_ARG, "tensor '%s' has kernel size %lld (1..%d, the same in every block)", nm,
                        (long long)dw->ne[0], MAX_KERNEL);
    if ((rc = floats(b, &l->dw, nm, 1, e->K, G, 1))) return rc;
    if ((rc = floats(b, &l->dw_b, NAME("conv_dw.bias"), 0, G, 1, 1))) return rc;
    if ((rc = floats(b, &l->conv_post_norm, NAME("norm_conv.weight"), 0, G, 1, 1))) return rc;
    if ((rc = linear_of(b, &l->pw2, NAME("conv_pw2"), 0, G, D))) return rc;
    if ((rc = floats(b, &l->out_norm, NAME("ln2.weight"), 0, D, 1, 1))) return rc;
#undef NAME
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
    const char *type = eli_mmproj_type(b->p, ELI_MM_AUDIO);
    if (!type) return eli_fail(b->err, ELI_ERR_INVALID_ARG, "the projector has no audio encoder");
    if (strcmp(type, "gemma4a"))
        return eli_fail(b->err, ELI_ERR_INVALID_ARG, "audio projector type '%s' is not supported (only gemma4a)", type);
    eli_mm_hparams hp;
    int rc = eli_mmproj_hparams(b->p, ELI_MM_AUDIO, &hp, b->err);
    if (rc || (rc = eli_mmproj_u32(b->p, "clip.audio.num_mel_bins", 1, 1, ELI_MEL_MAX_BINS, &e->n_mel, b->err))) return rc;
    e->n_layer = hp.n_layer, e->D = hp.n_embd, e->n_head = hp.n_head, e->d_head = hp.head_dim, e->n_ff = hp.n_ff;
    /* the graph splits the width into heads and builds its sinusoids over the whole width */
    if ((int64_t)e->n_head * e->d_head != e->D || hp.n_head_kv != hp.n_head)
        return eli_fail(b->err, ELI_ERR_INVALID_ARG, "audio encoder: %d heads of %d (%d KV heads) do not make its width %d",
                        e->n_head, e->d_head, hp.n_head_kv, e->D);
    if ((rc = bind_conv(b, 0, 1)) || (rc = bind_conv(b, 1, e->C[0]))) return rc;
    e->F[0] = (e->n_mel - 1) / 2 + 1;
    e->F[1] = (e->F[0] - 1) / 2 + 1;
    if ((rc = linear_of(b, &e->in_proj, "a.input_projection", 1, (int64_t)e->C[1] * e->F[1], e->D))) return rc;
    if (!(e->blk = calloc((size_t)e->n_layer, sizeof *e->blk))) return eli_fail(b->err, ELI_ERR_OOM, "out of memory");
    for (int il = 0; il < e->n_layer; il++)
        if ((rc = bind_block(b, il))) return rc;
    /* a.pre_encode.out {D, P} is optional; the embedder then takes the encoder's width */
    int64_t P = e->D;
    const gguf_tensor *po = gguf_find_tensor(b->p->file, "a.pre_encode.out.weight");
    if (po) {
        P = po->ne[1];
        if (P < 1 || P > ELI_MM_MAX_DIM)
            return eli_fail(b->err, ELI_ERR_INVALID_ARG, "tensor 'a.pre_encode.out.weight' has %lld rows", (long long)P);
        if ((rc = linear_of(b, &e->pre_out, "a.pre_encode.out", 1, e->D, P))) return rc;
    }
    if ((rc = floats(b, &e->soft_emb_norm, "mm.a.soft_emb_norm.weight", 0, P, 1, 1))) return rc;
    e->n_embd = hp.proj_dim;
    if ((rc = linear_of(b, &e->mm_proj, "mm.a.input_projection", 1, P, e->n_embd))) return rc;
    if (!(e->pos_emb = malloc((size_t)N_REL * (size_t)e->D * sizeof *e->pos_emb)))
        return eli_fail(b->err, ELI_ERR_OOM, "out of memory");
    make_pos_emb(e->pos_emb, e->D);
    return eli_mel_init(&e->mel, e->n_mel, b->err);
}

eli_audio_encoder *eli_audio_encoder_create(eli_mmproj *p, eli_error *err) {
    eli_audio_encoder *e = calloc(1, sizeof *e);
    if (!e) {
        eli_fail(err, ELI_ERR_OOM, "out of memory");
        return NULL;
    }
    binder b = {e, p, err};
    if (bind_all(&b)) {
        eli_audio_encoder_free(e);
        return NULL;
    }
    return e;
}

void eli_audio_encoder_free(eli_audio_encoder *e) {
    if (!e) return;
    free(e->conv_f16[0]);
    free(e->conv_f16[1]);
    free(e->blk);
    free(e->pos_emb);
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
    eli_buf scratch;
    eli_error *err;
} runner;

/* y[T][rows] = l(x[T][cols]); x is clamped in place first (see the header). */
static int linear(runner *r, const eli_mm_linear *l, float *x, int64_t T, float *y) {
    return eli_mm_linear_apply(r->pool, l, x, T, y, &r->scratch, r->err);
}

static int matmul(runner *r, const eli_weight *w, const float *x, int64_t T, float *y) {
    return eli_matmul_k(r->pool, NULL, w, 0, x, T, y, &r->scratch) ? eli_fail(r->err, ELI_ERR_OOM, "out of memory multiplying '%s'", w->name)
                                                                   : ELI_OK;
}

static void rms_rows(float *y, const float *x, const float *w, int64_t T, int64_t n) {
    for (int64_t t = 0; t < T; t++) eli_rms_norm(y + t * n, x + t * n, w, n, NORM_EPS);
}

static float silu(float x) { return x / (1.0f + expf(-x)); }

/* The next n floats of a buffer carved in order. */
static float *take(float **next, int64_t n) {
    float *p = *next;
    *next += n;
    return p;
}

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
                const float *pr = a->rel + j2 * D + h * d;
                float ac = 0.0f, bd = 0.0f;
                for (int64_t i = 0; i < d; i++) ac += q[i] * kr[i];
                for (int64_t i = 0; i < d; i++) bd += q[i] * pr[i];
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
    if ((rc = matmul(r, &l->k_rel, e->pos_emb, N_REL, a->rel))) return rc;
    attn_job j = {e, a};
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

typedef struct {
    const float *cols; /* np rows of 9 */
    const eli_fp16 *w; /* cout rows of 9 */
    int64_t np, cout;
    float *out;
} conv0_job;

/* The first convolution's 9-term dots, as ggml sums a dot of fewer than 16 halves: each product of the
 * fp16-rounded operands (exact in float) added in double, rounded to float once. (The kernels' float
 * chains round every step; the first layer's outputs go on to be rounded to fp16 again, and a last-bit
 * difference there grows in Q8_0 towers: see audio_mel.c.) */
static void conv0_task(void *ctx, int ith, int nth) {
    const conv0_job *j = ctx;
    int64_t p0, p1;
    eli_split(j->np, ith, nth, &p0, &p1);
    for (int64_t p = p0; p < p1; p++) {
        float x[9];
        for (int k = 0; k < 9; k++) x[k] = eli_fp16_to_fp32(eli_fp32_to_fp16(j->cols[p * 9 + k]));
        for (int64_t c = 0; c < j->cout; c++) {
            double sum = 0.0;
            for (int k = 0; k < 9; k++) sum += (double)(x[k] * eli_fp16_to_fp32(j->w[c * 9 + k]));
            j->out[p * j->cout + c] = (float)sum;
        }
    }
}

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
        if (cin == 1) {
            conv0_job j = {cols, e->conv_f16[0], np, cout, out + p0 * cout};
            eli_pool_run(eli_pool_for(r->pool, np * cout * 9), conv0_task, &j);
        } else {
            int rc = matmul(r, &e->conv[i], cols, np, out + p0 * cout);
            if (rc) return rc;
        }
    }
    if (e->conv_b[i])
        for (int64_t p = 0; p < n; p++)
            for (int64_t c = 0; c < cout; c++) out[p * cout + c] += e->conv_b[i][c];
    layer_norm_relu(out, n, cout, e->conv_ln[i]);
    return ELI_OK;
}

int eli_audio_encode_mel(const eli_audio_encoder *e, eli_pool *pool, const float *mel, int64_t T, float *out, eli_error *err) {
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
    const int64_t att_w = D > e->n_conv ? D : e->n_conv; /* the attention output, then the GLU's */
    /* one allocation: the subsampling buffers, then the block activations */
    const int64_t total = n0 + n1 + n_cols + T2 * (5 * D + wide + att_w) + N_REL * D;
    float *mem = malloc((size_t)total * sizeof *mem), *next = mem;
    if (!mem) return eli_fail(err, ELI_ERR_OOM, "out of memory for the audio encoder's activations (%lld floats)", (long long)total);
    float *s0 = take(&next, n0), *s1 = take(&next, n1), *cols = take(&next, n_cols);
    acts a;
    a.T = T2;
    a.x = take(&next, T2 * D), a.h = take(&next, T2 * D), a.q = take(&next, T2 * D), a.k = take(&next, T2 * D);
    a.v = take(&next, T2 * D), a.big = take(&next, T2 * wide), a.att = take(&next, T2 * att_w), a.rel = take(&next, N_REL * D);
    runner r = {pool, {0}, err};
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
    return rc;
}

int64_t eli_audio_mel(const eli_audio_encoder *e, const float *pcm, int64_t n, float *out) {
    if (n > ELI_MEL_CHUNK_SAMPLES) n = ELI_MEL_CHUNK_SAMPLES;
    eli_mel_chunk(&e->mel, pcm, n, out);
    return eli_mel_frames(n);
}

int eli_audio_embed(const eli_audio_encoder *e, eli_pool *pool, const float *pcm, int64_t n, float **out, int64_t *n_tokens,
                    int64_t *n_frames, eli_error *err) {
    *out = NULL;
    *n_tokens = 0;
    if (n_frames) *n_frames = 0;
    /* PCM from a host: a NaN or an infinity would reach every embedding of its chunk */
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(pcm[i])) return eli_fail(err, ELI_ERR_INVALID_ARG, "audio sample %lld is not a finite number", (long long)i);
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
        eli_audio_mel(e, pcm + off, len, mel);
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
