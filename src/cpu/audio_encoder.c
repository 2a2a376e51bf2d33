/* The Gemma 4 audio tower's encoder on the CPU (audio.h binds it; ../shared/spec/gemma4-mm.md "Audio
 * encoder", as llama.cpp's mtmd computes it): one 30-second chunk's log-mel through the subsampling
 * convolutions, the conformer blocks and the projection, on the kernels and the thread pool. */
#include "fp_exact.h" /* the depthwise convolution's and first convolution's sums are llama.cpp's, bit for bit */

#include "tower.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"
#include "quants.h"

typedef struct {
    eli_pool *pool;
    const eli_kernels *k;
    eli_buf scratch;
    eli_error *err;
} runner;

/* y[T][rows] = l(x[T][cols]); x is clamped in place first (see the header). */
static int linear(runner *r, const eli_mm_linear *l, float *x, int64_t T, float *y) {
    return eli_mm_linear_apply(r->pool, r->k, l, x, T, y, &r->scratch, r->err);
}

static int matmul(runner *r, const eli_weight *w, const float *x, int64_t T, float *y) {
    return eli_matmul_k(r->pool, r->k, w, 0, x, T, y, &r->scratch) ? eli_fail(r->err, ELI_ERR_OOM, "out of memory multiplying '%s'", w->name)
                                                                   : ELI_OK;
}

static void rms_rows(float *y, const float *x, const float *w, int64_t T, int64_t n) {
    for (int64_t t = 0; t < T; t++) eli_rms_norm(y + t * n, x + t * n, w, n, ELI_AUDIO_NORM_EPS);
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
static int run_half_ffn(runner *r, const eli_audio_half_ffn *f, acts *a, int64_t D) {
    const int64_t T = a->T, F = f->up.w.rows;
    rms_rows(a->h, a->x, f->norm, T, D);
    int rc = linear(r, &f->up, a->h, T, a->big);
    if (rc) return rc;
    for (int64_t i = 0; i < T * F; i++) a->big[i] = silu(a->big[i]);
    if ((rc = linear(r, &f->down, a->big, T, a->h))) return rc;
    if (f->post_norm) rms_rows(a->h, a->h, f->post_norm, T, D);
    for (int64_t i = 0; i < T * D; i++) a->x[i] += a->h[i] * ELI_AUDIO_RES_WEIGHT;
    return ELI_OK;
}

typedef struct {
    const eli_audio *e;
    const acts *a;
} attn_job;

/* Tokens split over the threads: each head of a query against the ELI_AUDIO_WINDOW keys ending at it. */
static void attn_task(void *ctx, int ith, int nth) {
    const attn_job *j = ctx;
    const int64_t D = j->e->D, H = j->e->n_head, d = j->e->d_head;
    const acts *a = j->a;
    int64_t t0, t1;
    eli_split(a->T, ith, nth, &t0, &t1);
    for (int64_t t = t0; t < t1; t++) {
        const int64_t nk = t + 1 < ELI_AUDIO_WINDOW ? t + 1 : ELI_AUDIO_WINDOW;
        for (int64_t h = 0; h < H; h++) {
            const float *q = a->q + t * D + h * d;
            float s[ELI_AUDIO_WINDOW];
            float mx = -INFINITY;
            for (int64_t j2 = 0; j2 < nk; j2++) { /* key t - j2 at distance j2 */
                const float *kr = a->k + (t - j2) * D + h * d;
                const float *pr = a->rel + j2 * D + h * d;
                float ac = 0.0f, bd = 0.0f;
                for (int64_t i = 0; i < d; i++) ac += q[i] * kr[i];
                for (int64_t i = 0; i < d; i++) bd += q[i] * pr[i];
                s[j2] = tanhf((ac + bd) * (1.0f / ELI_AUDIO_SOFTCAP)) * ELI_AUDIO_SOFTCAP;
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

static int run_attention(runner *r, const eli_audio *e, const eli_audio_block *l, acts *a) {
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
    /* the relative-position logits' keys: attn_k_rel times the sinusoids, [ELI_AUDIO_N_REL][D] */
    if ((rc = matmul(r, &l->k_rel, e->pos_emb, ELI_AUDIO_N_REL, a->rel))) return rc;
    attn_job j = {e, a};
    eli_pool_run(eli_pool_for(r->pool, T * D * ELI_AUDIO_WINDOW * 3), attn_task, &j);
    if ((rc = linear(r, &l->o, a->att, T, a->h))) return rc;
    if (l->attn_post_norm) rms_rows(a->h, a->h, l->attn_post_norm, T, D);
    for (int64_t i = 0; i < T * D; i++) a->x[i] += a->h[i];
    return ELI_OK;
}

static int run_conv_module(runner *r, const eli_audio *e, const eli_audio_block *l, acts *a) {
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
            const float scale = 1.0f / sqrtf((float)(sq / (double)C) + ELI_AUDIO_NORM_EPS);
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

/* One subsampling convolution: in [H][W][cin] (channel fastest) -> out [eli_audio_halve(H)][eli_audio_halve(W)][cout], with
 * bias, LayerNorm and ReLU. cols is scratch for CONV_TILE_PIXELS x 9 cin floats. */
static int run_conv(runner *r, const eli_audio *e, int i, const float *in, int64_t H, int64_t W, float *out,
                    float *cols) {
    const int64_t cin = i ? e->C[0] : 1, cout = e->C[i], OH = eli_audio_halve(H), OW = eli_audio_halve(W), n = OH * OW, K9 = 9 * cin;
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

int eli_cpu_audio_encode(const eli_audio *e, eli_pool *pool, const eli_kernels *k, const float *mel, int64_t T, float *out,
                         eli_error *err) {
    if (T < 1) return eli_fail(err, ELI_ERR_INVALID_ARG, "no mel frames to encode");
    if (T > ELI_MEL_CHUNK_SAMPLES / ELI_MEL_HOP + 1)
        return eli_fail(err, ELI_ERR_INVALID_ARG, "%lld mel frames is more than one 30-second chunk", (long long)T);
    const int64_t T1 = eli_audio_halve(T), T2 = eli_audio_halve(T1), D = e->D;
    const int64_t n0 = T1 * e->F[0] * e->C[0], n1 = T2 * e->F[1] * e->C[1];
    int64_t wide = 2 * (int64_t)e->n_conv;
    for (int il = 0; il < e->n_layer; il++)
        if (e->blk[il].ffn.up.w.rows > wide) wide = e->blk[il].ffn.up.w.rows;
    if (e->pre_out.w.data && e->pre_out.w.rows > wide) wide = e->pre_out.w.rows;
    if (wide < D) wide = D;
    const int64_t n_cols = CONV_TILE_PIXELS * 9 * (int64_t)(e->C[0] > 1 ? e->C[0] : 1);
    const int64_t att_w = D > e->n_conv ? D : e->n_conv; /* the attention output, then the GLU's */
    /* one allocation: the subsampling buffers, then the block activations */
    const int64_t total = n0 + n1 + n_cols + T2 * (5 * D + wide + att_w) + ELI_AUDIO_N_REL * D;
    float *mem = malloc((size_t)total * sizeof *mem), *next = mem;
    if (!mem) return eli_fail(err, ELI_ERR_OOM, "out of memory for the audio encoder's activations (%lld floats)", (long long)total);
    float *s0 = take(&next, n0), *s1 = take(&next, n1), *cols = take(&next, n_cols);
    acts a;
    a.T = T2;
    a.x = take(&next, T2 * D), a.h = take(&next, T2 * D), a.q = take(&next, T2 * D), a.k = take(&next, T2 * D);
    a.v = take(&next, T2 * D), a.big = take(&next, T2 * wide), a.att = take(&next, T2 * att_w), a.rel = take(&next, ELI_AUDIO_N_REL * D);
    runner r = {pool, k, {0}, err};
    int rc;
    if ((rc = run_conv(&r, e, 0, mel, T, e->n_mel, s0, cols)) || (rc = run_conv(&r, e, 1, s0, T1, e->F[0], s1, cols)) ||
        (rc = linear(&r, &e->in_proj, s1, T2, a.x)))
        goto done;
    for (int il = 0; il < e->n_layer; il++) {
        const eli_audio_block *l = &e->blk[il];
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

