/* The Gemma 4 audio tower's binding, log-mel and chunking (audio.h); the encoder is a device's
 * (src/cpu/audio_encoder.c). */
#include "audio.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec.h"
#include "wav.h"

#define MAX_KERNEL 64 /* depthwise kernel sizes accepted */

/* ---- binding ---- */

typedef struct {
    eli_audio *e;
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
    eli_audio *e = b->e;
    char name[64];
    snprintf(name, sizeof name, "a.conv1d.%d.weight", i);
    const eli_gguf_tensor *t = eli_gguf_find_tensor(b->p->file, name);
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
    eli_audio *e = b->e;
    eli_audio_block *l = &e->blk[il];
    const int64_t D = e->D, F = e->n_ff;
    char nm[160], nm2[32];
    int rc;
#define NAME(s) (snprintf(nm, sizeof nm, "a.blk.%d.%s", il, s), nm)
    eli_audio_half_ffn *h[2] = {&l->ffn, &l->ffn1};
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
    if ((rc = eli_mmproj_matrix(b->p, &l->k_rel, NAME("attn_k_rel.weight"), 1, D, D, b->err))) return rc;
    /* the GGUF's conv_norm is the norm before pw1 and norm_conv the one after the depthwise convolution
     * (llama.cpp's loader swaps the names back) */
    if ((rc = floats(b, &l->conv_norm, NAME("conv_norm.weight"), 1, D, 1, 1))) return rc;
    const eli_gguf_tensor *pw1 = eli_gguf_find_tensor(b->p->file, NAME("conv_pw1.weight"));
    if (!pw1) return eli_fail(b->err, ELI_ERR_INVALID_ARG, "missing tensor '%s'", nm);
    if (pw1->ne[1] < 2 || pw1->ne[1] % 2 || pw1->ne[1] > 2 * (int64_t)ELI_MM_MAX_DIM)
        return eli_fail(b->err, ELI_ERR_INVALID_ARG, "tensor '%s' has %lld rows, not an even GLU width", nm, (long long)pw1->ne[1]);
    const int64_t G = pw1->ne[1] / 2;
    if (il == 0) e->n_conv = (int)G;
    if (G != e->n_conv)
        return eli_fail(b->err, ELI_ERR_INVALID_ARG, "audio block %d has conv width %lld, block 0 %d", il, (long long)G, e->n_conv);
    if ((rc = linear_of(b, &l->pw1, NAME("conv_pw1"), 0, D, 2 * G))) return rc;
    const eli_gguf_tensor *dw = eli_gguf_find_tensor(b->p->file, NAME("conv_dw.weight"));
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
    memset(pe, 0, (size_t)ELI_AUDIO_N_REL * (size_t)D * sizeof *pe);
    for (int r = 0; r < ELI_AUDIO_N_REL; r++)
        for (int i = 0; i < half; i++) {
            const float a = (float)r * expf(-(float)i * inc);
            pe[r * D + i] = sinf(a);
            pe[r * D + i + half] = cosf(a);
        }
}

static int bind_all(binder *b) {
    eli_audio *e = b->e;
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
    const eli_gguf_tensor *po = eli_gguf_find_tensor(b->p->file, "a.pre_encode.out.weight");
    if (po) {
        P = po->ne[1];
        if (P < 1 || P > ELI_MM_MAX_DIM)
            return eli_fail(b->err, ELI_ERR_INVALID_ARG, "tensor 'a.pre_encode.out.weight' has %lld rows", (long long)P);
        if ((rc = linear_of(b, &e->pre_out, "a.pre_encode.out", 1, e->D, P))) return rc;
    }
    if ((rc = floats(b, &e->soft_emb_norm, "mm.a.soft_emb_norm.weight", 0, P, 1, 1))) return rc;
    e->n_embd = hp.proj_dim;
    if ((rc = linear_of(b, &e->mm_proj, "mm.a.input_projection", 1, P, e->n_embd))) return rc;
    if (!(e->pos_emb = malloc((size_t)ELI_AUDIO_N_REL * (size_t)e->D * sizeof *e->pos_emb)))
        return eli_fail(b->err, ELI_ERR_OOM, "out of memory");
    make_pos_emb(e->pos_emb, e->D);
    return eli_mel_init(&e->mel, e->n_mel, b->err);
}

eli_audio *eli_audio_load(eli_mmproj *p, eli_error *err) {
    eli_audio *e = calloc(1, sizeof *e);
    if (!e) {
        eli_fail(err, ELI_ERR_OOM, "out of memory");
        return NULL;
    }
    binder b = {e, p, err};
    if (bind_all(&b)) {
        eli_audio_free(e);
        return NULL;
    }
    return e;
}

void eli_audio_free(eli_audio *e) {
    if (!e) return;
    free(e->conv_f16[0]);
    free(e->conv_f16[1]);
    free(e->blk);
    free(e->pos_emb);
    eli_mel_free(&e->mel);
    free(e);
}

int eli_audio_n_embd(const eli_audio *e) { return e->n_embd; }
int eli_audio_n_mel(const eli_audio *e) { return e->n_mel; }

int64_t eli_audio_chunk_tokens(int64_t n_frames) { return n_frames < 1 ? 0 : eli_audio_halve(eli_audio_halve(n_frames)); }

int64_t eli_audio_tokens(int64_t n, int64_t *n_frames) {
    const int64_t full = n / ELI_MEL_CHUNK_SAMPLES, rest = n % ELI_MEL_CHUNK_SAMPLES;
    const int64_t T = eli_mel_frames(ELI_MEL_CHUNK_SAMPLES), T_rest = eli_mel_frames(rest);
    if (n_frames) *n_frames = full * T + T_rest;
    return full * eli_audio_chunk_tokens(T) + eli_audio_chunk_tokens(T_rest);
}

int64_t eli_audio_mel(const eli_audio *e, const float *pcm, int64_t n, float *out) {
    if (n > ELI_MEL_CHUNK_SAMPLES) n = ELI_MEL_CHUNK_SAMPLES;
    eli_mel_chunk(&e->mel, pcm, n, out);
    return eli_mel_frames(n);
}

int eli_audio_embed(eli_xtower *t, const float *pcm, int64_t n, float **out, int64_t *n_tokens, int64_t *n_frames,
                    eli_error *err) {
    *out = NULL;
    *n_tokens = 0;
    if (n_frames) *n_frames = 0;
    const eli_audio *e = t->audio;
    if (!e) return eli_fail(err, ELI_ERR_INVALID_ARG, "not an audio tower");
    /* PCM from a host: a NaN, an infinity or a sample far past full scale would reach every embedding of its chunk */
    if (eli_pcm_check(pcm, n, "audio sample", err)) return err->code;
    int64_t frames = 0;
    const int64_t toks = eli_audio_tokens(n, &frames);
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
        int rc = eli_xtower_encode_audio(t, mel, T, emb + done * e->n_embd, err);
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
