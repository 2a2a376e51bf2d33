/* The Gemma 4 forward pass. Reads top to bottom like ../shared/spec/gemma4.md section 3; the kernels it
 * calls live in ops.c. Every op except attention is per token; a ubatch of T tokens first writes its K/V
 * rows into the cache, then every query attends to the cells its mask allows (spec 3.5). */
#include "forward.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "os.h"
#include "quants.h"

struct eli_context {
    const eli_model *m;
    eli_context_params params; /* as resolved */
    eli_kv_cache *kv;
    eli_pool *pool;
    int64_t n_ctx, n_ubatch, n_past;

    /* per-ubatch activations, T <= n_ubatch rows each */
    float *x;      /* residual stream [T][E] */
    float *xn;     /* normed input of a sublayer [T][E] */
    float *tmp;    /* sublayer output [T][E] */
    float *tmp2;   /* second sublayer output (MoE) [T][E] */
    float *q;      /* [T][H*d] */
    float *k, *v;  /* [T][Hkv*d] */
    float *att;    /* attention output [T][H*d] */
    float *gate, *up; /* [T][n_ff_max] */
    float *ple;    /* [T][L*n_pl] */
    float *ple_tok; /* [T][L*n_pl] */
    uint8_t *ple_raw; /* one row of the PLE table as stored, read from the file (eli_model_ple_row) */
    float *scores; /* per thread: [nth][n_ctx] */
    float *attn_tmp; /* per thread: [nth][2 * head_dim_max] */
    float *moe_rn, *moe_y; /* MoE router input and one expert's output [E] */
    eli_buf qbuf;  /* activations converted for the matmul */
    const eli_kernels *kern; /* kernel table (kernels.h) */
    int flash;     /* fused attention on f32/f16 caches (off with the reference kernels) */
    uint8_t *flash_work; /* per thread: [nth][flash_work_bytes] */
    size_t flash_work_bytes;
    /* decode attention split by rows (attend_split): ubatches of up to split_tokens tokens */
    int64_t split_tokens;
    float *split_part;   /* the segments' partials: sums [tokens][KV heads][head blocks][segments][block's heads][d],
                          * then maxima and exp-sums [...][block's heads] */
    uint8_t *split_q;    /* the prepared queries [tokens][H], flash_query_bytes apart (64-byte aligned) */
    void *split_q_mem;
    int32_t *row_hi; /* [n_ubatch]: the last position each row of a chunk attends to (past itself inside a
                      * bidirectional span) */
};

eli_context_params eli_context_default_params(void) {
    eli_context_params p = {0, 512, ELI_TYPE_F16, ELI_TYPE_F16, 0, NULL, 1, 1};
    return p;
}

int64_t eli_context_n_past(const eli_context *c) { return c->n_past; }
int64_t eli_context_n_ctx(const eli_context *c) { return c->n_ctx; }
const eli_model *eli_context_model(const eli_context *c) { return c->m; }

void eli_context_reset(eli_context *c) {
    c->n_past = 0;
    eli_kv_clear(c->kv);
}

void eli_context_free(eli_context *c) {
    if (!c) return;
    eli_kv_free(c->kv);
    eli_pool_free(c->pool);
    free(c->x), free(c->xn), free(c->tmp), free(c->tmp2), free(c->q), free(c->k), free(c->v), free(c->att);
    free(c->gate), free(c->up), free(c->ple), free(c->ple_tok), free(c->ple_raw), free(c->scores), free(c->attn_tmp), free(c->moe_rn), free(c->moe_y);
    free(c->flash_work);
    free(c->split_part), free(c->split_q_mem);
    free(c->row_hi);
    eli_buf_free(&c->qbuf);
    free(c);
}

static float *alloc_f32(int64_t n) { return malloc((size_t)(n > 0 ? n : 1) * sizeof(float)); }

/* The defaults and clamps eli_context_create applies. */
static int resolve_params(const eli_model *m, const eli_context_params *params, eli_context_params *out, eli_error *err) {
    eli_context_params p = params ? *params : eli_context_default_params();
    const eli_hparams *hp = &m->hp;
    if (p.n_ctx < 0 || p.n_ubatch < 0 || p.n_threads < 0 || p.n_threads > 1024 || (p.reserve != 0 && p.reserve != 1) ||
        p.n_ckpt < 0 || p.n_ckpt > 64)
        return eli_fail(err, ELI_ERR_INVALID_ARG,
                        "invalid context parameters (n_ctx %lld, n_ubatch %lld, n_threads %d, reserve %d, checkpoints %d)",
                        (long long)p.n_ctx, (long long)p.n_ubatch, p.n_threads, p.reserve, p.n_ckpt);
    if (p.n_ctx == 0) p.n_ctx = hp->n_ctx_train < 4096 ? hp->n_ctx_train : 4096;
    if (p.n_ctx > hp->n_ctx_train) p.n_ctx = hp->n_ctx_train;
    if (p.n_ubatch == 0) p.n_ubatch = 512;
    if (p.n_ubatch > p.n_ctx) p.n_ubatch = p.n_ctx;
    if (p.n_threads == 0) p.n_threads = eli_os_cpu_count();
    if (!p.kernels) p.kernels = eli_kernels_best();
    *out = p;
    return ELI_OK;
}

/* Element counts of every scratch buffer, in one place for eli_context_create and eli_context_scratch_bytes. */
enum { SB_X, SB_XN, SB_TMP, SB_TMP2, SB_Q, SB_K, SB_V, SB_ATT, SB_GATE, SB_UP, SB_PLE, SB_PLE_TOK, SB_SCORES, SB_ATTN_TMP,
       SB_MOE_RN, SB_MOE_Y, SB_SPLIT_PART, SB_N_F32 };
/* The split decode path keeps the partials of every segment of up to SPLIT_TOKENS_MAX tokens, as many as fit
 * in SPLIT_PART_BYTES (at least one token: 8.5 MB for E2B at 128K positions). */
#define SPLIT_TOKENS_MAX 8
#define SPLIT_PART_BYTES ((int64_t)8 << 20)
typedef struct {
    int64_t f32[SB_N_F32];   /* floats per buffer */
    int64_t split_tokens;
    size_t split_q_bytes;    /* the prepared queries of split_tokens tokens, with room to align */
    size_t flash_work_bytes; /* per thread */
    size_t qbuf_bytes;       /* the largest activation conversion a matmul asks for */
    size_t ple_raw_bytes;    /* one stored PLE row */
} scratch_sizes;

static size_t conv_bytes(const eli_weight *w, int64_t rows) {
    const eli_type_traits *tt = w->cols > 0 ? eli_type_info(w->type) : NULL;
    if (!tt || tt->vec_dot_type == ELI_TYPE_F32) return 0;
    return eli_row_size(tt->vec_dot_type, w->cols) * (size_t)rows;
}

static void scratch_layout(const eli_model *m, const eli_context_params *p, scratch_sizes *s) {
    const eli_hparams *hp = &m->hp;
    int64_t qmax = 0, kvmax = 0, ffmax = 0, hmax = 1;
    int gmax = 1;
    for (int il = 0; il < hp->n_layer; il++) {
        const eli_layer *l = &m->layers[il];
        int64_t dq = (int64_t)l->n_head * l->head_dim, dkv = (int64_t)l->n_head_kv * l->head_dim;
        qmax = dq > qmax ? dq : qmax;
        kvmax = dkv > kvmax ? dkv : kvmax;
        ffmax = l->n_ff > ffmax ? l->n_ff : ffmax;
        hmax = l->n_head > hmax ? l->n_head : hmax;
        if (l->is_moe && 2 * hp->n_ff_exp > ffmax) ffmax = 2 * (int64_t)hp->n_ff_exp;
        if (l->n_head_kv > 0 && l->n_head / l->n_head_kv > gmax) gmax = l->n_head / l->n_head_kv;
    }
    const int64_t U = p->n_ubatch, E = hp->n_embd, W = (int64_t)hp->n_pl * hp->n_layer;
    const int64_t dmax = hp->head_dim_full > hp->head_dim_swa ? hp->head_dim_full : hp->head_dim_swa;
    int64_t *f = s->f32;
    f[SB_X] = f[SB_XN] = f[SB_TMP] = f[SB_TMP2] = U * E;
    f[SB_Q] = f[SB_ATT] = U * qmax;
    f[SB_K] = f[SB_V] = U * kvmax;
    f[SB_GATE] = f[SB_UP] = U * ffmax;
    f[SB_PLE] = f[SB_PLE_TOK] = U * W;
    f[SB_SCORES] = (int64_t)p->n_threads * p->n_ctx;
    f[SB_ATTN_TMP] = (int64_t)p->n_threads * 2 * dmax;
    f[SB_MOE_RN] = f[SB_MOE_Y] = E;
    /* a window of at most n_ctx positions touches at most n_ctx / SEG + 2 segments; one thread never splits */
    const int64_t per_token = (p->n_ctx / ELI_FLASH_SEG + 2) * (qmax + 2 * hmax);
    s->split_tokens = p->n_threads < 2 ? 0 : SPLIT_PART_BYTES / (per_token * (int64_t)sizeof(float));
    if (p->n_threads >= 2 && s->split_tokens < 1) s->split_tokens = 1;
    if (s->split_tokens > SPLIT_TOKENS_MAX) s->split_tokens = SPLIT_TOKENS_MAX;
    if (s->split_tokens > U) s->split_tokens = U;
    f[SB_SPLIT_PART] = s->split_tokens * per_token;
    s->split_q_bytes = (size_t)(s->split_tokens * hmax) * ((size_t)dmax * sizeof(float) + 64) + 64;
    s->flash_work_bytes = (eli_attend_flash_work_size(gmax, (int)dmax) + 63) & ~(size_t)63;
    s->ple_raw_bytes = hp->n_pl ? m->ple_token_embd.row_bytes : 0;
    /* matmul inputs converted to a weight's vec_dot type: at most U rows (eli_matmul_k) */
    s->qbuf_bytes = conv_bytes(&m->output, U) > conv_bytes(&m->ple_model_proj, U) ? conv_bytes(&m->output, U)
                                                                                   : conv_bytes(&m->ple_model_proj, U);
    for (int il = 0; il < hp->n_layer; il++) {
        const eli_layer *l = &m->layers[il];
        const eli_weight *ws[] = {&l->wq,       &l->wk,      &l->wv,           &l->wo,        &l->ffn_gate,
                                  &l->ffn_up,   &l->ffn_down, &l->gate_inp,    &l->gate_up_exps, &l->gate_exps,
                                  &l->up_exps,  &l->down_exps, &l->inp_gate,   &l->proj};
        for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++)
            if (conv_bytes(ws[i], U) > s->qbuf_bytes) s->qbuf_bytes = conv_bytes(ws[i], U);
    }
}

size_t eli_context_scratch_bytes(const eli_model *m, const eli_context_params *params) {
    eli_context_params p = eli_context_default_params();
    if (resolve_params(m, params, &p, NULL)) return 0;
    scratch_sizes s;
    scratch_layout(m, &p, &s);
    size_t n = 0;
    for (int i = 0; i < SB_N_F32; i++) n += (size_t)(s.f32[i] > 0 ? s.f32[i] : 1) * sizeof(float);
    return n + s.flash_work_bytes * (size_t)p.n_threads + s.ple_raw_bytes + s.split_q_bytes;
}

size_t eli_context_qbuf_bound(const eli_model *m, const eli_context_params *params) {
    eli_context_params p = eli_context_default_params();
    if (resolve_params(m, params, &p, NULL)) return 0;
    scratch_sizes s;
    scratch_layout(m, &p, &s);
    return s.qbuf_bytes;
}

eli_context *eli_context_create(const eli_model *m, const eli_context_params *params, eli_error *err) {
    eli_context_params p = eli_context_default_params();
    if (resolve_params(m, params, &p, err)) return NULL;
    eli_context *c = calloc(1, sizeof *c);
    if (!c) {
        eli_fail(err, ELI_ERR_OOM, "out of memory");
        return NULL;
    }
    c->m = m;
    c->params = p;
    c->n_ctx = p.n_ctx;
    c->n_ubatch = p.n_ubatch;
    if (!(c->kv = eli_kv_create(m, p.n_ctx, p.n_ubatch, p.kv_type_k, p.kv_type_v, p.n_ckpt, err))) goto fail_quiet;
    if (!(c->pool = eli_pool_create(p.n_threads))) goto oom;

    scratch_sizes s;
    scratch_layout(m, &p, &s);
    float **bufs[SB_N_F32] = {&c->x,    &c->xn,  &c->tmp, &c->tmp2,    &c->q,      &c->k,      &c->v,      &c->att,
                              &c->gate, &c->up,  &c->ple, &c->ple_tok, &c->scores, &c->attn_tmp, &c->moe_rn, &c->moe_y,
                              &c->split_part};
    for (int i = 0; i < SB_N_F32; i++)
        if (!(*bufs[i] = alloc_f32(s.f32[i]))) goto oom;
    c->kern = p.kernels;
    c->flash = c->kern != eli_kernels_reference() && eli_attend_flash_ok(p.kv_type_k, p.kv_type_v);
    if (!(c->row_hi = malloc((size_t)p.n_ubatch * sizeof *c->row_hi))) goto oom;
    c->flash_work_bytes = s.flash_work_bytes;
    c->flash_work = malloc(c->flash_work_bytes * (size_t)p.n_threads);
    c->ple_raw = malloc(s.ple_raw_bytes ? s.ple_raw_bytes : 1);
    c->split_tokens = s.split_tokens;
    c->split_q_mem = malloc(s.split_q_bytes);
    if (!c->flash_work || !c->ple_raw || !c->split_q_mem) goto oom;
    c->split_q = (uint8_t *)(((uintptr_t)c->split_q_mem + 63) & ~(uintptr_t)63);
    if (p.reserve) {
        if (eli_kv_reserve(c->kv, err)) goto fail_quiet;
        for (int i = 0; i < SB_N_F32; i++) eli_os_touch(*bufs[i], (size_t)(s.f32[i] > 0 ? s.f32[i] : 1) * sizeof(float));
        eli_os_touch(c->flash_work, c->flash_work_bytes * (size_t)p.n_threads);
        eli_os_touch(c->ple_raw, s.ple_raw_bytes);
        eli_os_touch(c->split_q_mem, s.split_q_bytes);
        if (s.qbuf_bytes && !eli_buf_reserve(&c->qbuf, s.qbuf_bytes)) goto oom;
        eli_os_touch(c->qbuf.p, s.qbuf_bytes);
    }
    return c;
oom:
    eli_fail(err, ELI_ERR_OOM, "out of memory for a context of %lld tokens", (long long)p.n_ctx);
fail_quiet:
    eli_context_free(c);
    return NULL;
}

/* ---- attention over the cache ---- */

typedef struct {
    eli_context *c;
    const eli_layer *l;
    int64_t T, pos0;
    /* attend_split: segments per window, heads per unit (a block of one KV head's group), and the rows that
     * one block of heads reads, over all tokens and KV heads */
    int64_t n_seg, rows;
    int heads_per_unit;
    int32_t lo[SPLIT_TOKENS_MAX], hi[SPLIT_TOKENS_MAX];
} attn_job;

/* The positions [p_lo, p_hi] token t of the ubatch sees: causal, or to the end of a bidirectional span;
 * sliding-window layers see the n_swa - 1 positions before the query too (a later key is never masked by
 * the window, as in llama.cpp). */
static void attn_window(const attn_job *j, int64_t t, int32_t *p_lo, int32_t *p_hi) {
    const int32_t pos = (int32_t)(j->pos0 + t), n_swa = j->c->m->hp.n_swa;
    *p_hi = j->c->row_hi[t];
    *p_lo = j->l->is_swa && pos - n_swa + 1 > 0 ? pos - n_swa + 1 : 0;
}

/* parallel over (token, head): each thread walks whole windows */
static void attn_task(void *ctx, int ith, int nth) {
    const attn_job *j = ctx;
    const eli_layer *l = j->l;
    const int d = l->head_dim, H = l->n_head, group = l->n_head / l->n_head_kv;
    float *scores = j->c->scores + (int64_t)ith * j->c->n_ctx;
    float *tmp = j->c->attn_tmp + (int64_t)ith * 2 * l->head_dim;
    int64_t b, e;
    eli_split(j->T * H, ith, nth, &b, &e);
    for (int64_t i = b; i < e;) {
        const int64_t t = i / H;
        const int h = (int)(i % H), g = h / group; /* contiguous GQA groups, as HF repeat_kv */
        int32_t p_lo, p_hi;
        attn_window(j, t, &p_lo, &p_hi);
        const eli_kv_view view = eli_kv_head(j->c->kv, l->kv_source, g, d);
        const float *q = j->c->q + t * H * d + (int64_t)h * d;
        float *out = j->c->att + t * H * d + (int64_t)h * d;
        if (j->c->flash) {
            /* the heads of this thread's range that share this KV head, in one pass over the cache */
            int n = (g + 1) * group - h;
            if (n > e - i) n = (int)(e - i);
            eli_attend_flash(j->c->kern, q, n, d, &view, p_lo, p_hi, j->c->flash_work + (size_t)ith * j->c->flash_work_bytes,
                             out);
            i += n;
        } else {
            eli_attend(j->c->kern, q, d, &view, p_lo, p_hi, scores, tmp, out);
            i++;
        }
    }
}

/* ---- decode: the rows of each window split between threads ----
 * With few tokens there are too few (token, head) items to share, and the heads that share a KV head would
 * each read its rows again: E2B has one KV head, so at depth every thread re-read the whole cache for its
 * heads. Here a unit is (token, KV head, block of its query heads, segment of ELI_FLASH_SEG positions): every
 * thread reads only its segments, once for all heads of the block, and the partials are merged per head in
 * position order afterwards, the steps eli_attend_flash takes on one thread: identical bits. */

/* The split part of the partials: sums (Gb * d floats per unit), then maxima and sums of exponentials. */
static float *split_sums(const attn_job *j) { return j->c->split_part; }
static float *split_max(const attn_job *j) {
    return j->c->split_part + j->T * j->n_seg * j->l->n_head * j->l->head_dim;
}
static float *split_expsum(const attn_job *j) { return split_max(j) + j->T * j->n_seg * j->l->n_head; }

static void split_span_task(void *ctx, int ith, int nth) {
    const attn_job *j = ctx;
    const eli_layer *l = j->l;
    const int d = l->head_dim, H = l->n_head, Hkv = l->n_head_kv, G = H / Hkv, Gb = j->heads_per_unit;
    const int64_t NS = j->n_seg, nblk = G / Gb;
    float *s = (float *)(void *)(j->c->flash_work + (size_t)ith * j->c->flash_work_bytes);
    /* the units in order, each thread taking those that start in its share of the rows: segments differ in
     * length (a window's first and last), so sharing out units by count could leave a thread idle */
    const int64_t rows = j->rows * nblk, r_begin = rows * ith / nth, r_end = rows * (ith + 1) / nth;
    int64_t r = 0;
    for (int64_t u = 0; u < j->T * Hkv * nblk * NS && r < r_end; u++) {
        const int64_t k = u % NS, blk = u / NS % nblk, g = u / NS / nblk % Hkv, t = u / NS / nblk / Hkv;
        const int32_t first = j->lo[t] / ELI_FLASH_SEG * ELI_FLASH_SEG;
        const int64_t seg0 = (int64_t)first + k * ELI_FLASH_SEG;
        if (seg0 > j->hi[t]) continue; /* this token's window has fewer segments */
        const int32_t p_a = seg0 > j->lo[t] ? (int32_t)seg0 : j->lo[t], p_b = eli_flash_segment_end(p_a, j->hi[t]);
        const int64_t r0 = r;
        r += p_b - p_a + 1;
        if (r0 < r_begin) continue;
        const eli_kv_view view = eli_kv_head(j->c->kv, l->kv_source, (int)g, d);
        const int64_t h0 = t * H + g * G + blk * Gb; /* the first query head of the unit, over all tokens */
        const uint8_t *qp = j->c->split_q + (size_t)h0 * eli_flash_query_bytes(&view, d);
        eli_flash_span(j->c->kern, &view, qp, Gb, d, p_a, p_b, s, split_sums(j) + u * Gb * d, split_max(j) + u * Gb,
                       split_expsum(j) + u * Gb);
    }
}

static void split_merge_task(void *ctx, int ith, int nth) {
    const attn_job *j = ctx;
    const eli_layer *l = j->l;
    const int d = l->head_dim, H = l->n_head, Hkv = l->n_head_kv, G = H / Hkv, Gb = j->heads_per_unit;
    const int64_t NS = j->n_seg, nblk = G / Gb;
    int64_t b, e;
    eli_split(j->T * H, ith, nth, &b, &e);
    for (int64_t i = b; i < e; i++) {
        const int64_t t = i / H, h = i % H, g = h / G, blk = h % G / Gb, gi = h % Gb;
        const int64_t n = j->hi[t] / ELI_FLASH_SEG - j->lo[t] / ELI_FLASH_SEG + 1;
        const eli_kv_view view = eli_kv_head(j->c->kv, l->kv_source, (int)g, d);
        float *out = j->c->att + i * d, mx = -INFINITY, sum = 0.0f;
        for (int64_t k = 0; k < n; k++) {
            const int64_t u = ((t * Hkv + g) * nblk + blk) * NS + k;
            eli_flash_merge(1, d, out, &mx, &sum, split_sums(j) + (u * Gb + gi) * d, split_max(j) + u * Gb + gi,
                            split_expsum(j) + u * Gb + gi);
        }
        eli_flash_finish(j->c->kern, &view, 1, d, &sum, out);
    }
}

static void attend_split(eli_context *c, attn_job *j, int64_t work) {
    const eli_layer *l = j->l;
    const int d = l->head_dim, H = l->n_head, Hkv = l->n_head_kv, G = H / Hkv;
    const int nth = eli_pool_size(c->pool);
    /* the windows; how many segments the longest has, and the longest segment. Blocks of fewer heads when the
     * segments are too few to share out evenly (the longest more than 1.25x a thread's share of the rows: short
     * windows); each block reads its rows again, so no more blocks than that needs */
    int64_t longest = 0;
    j->n_seg = j->rows = 0;
    for (int64_t t = 0; t < j->T; t++) {
        attn_window(j, t, &j->lo[t], &j->hi[t]);
        j->rows += (int64_t)(j->hi[t] - j->lo[t] + 1) * Hkv;
        int64_t n = 0;
        for (int32_t p0 = j->lo[t], p1; p0 <= j->hi[t]; p0 = p1 + 1, n++) {
            p1 = eli_flash_segment_end(p0, j->hi[t]);
            if (p1 - p0 + 1 > longest) longest = p1 - p0 + 1;
        }
        if (n > j->n_seg) j->n_seg = n;
    }
    int Gb = G;
    while (Gb % 2 == 0 && 4 * longest * nth > 5 * j->rows * (G / Gb)) Gb /= 2;
    j->heads_per_unit = Gb;
    /* every query head prepared once (rotated on a low-bit K), not once per segment */
    for (int64_t t = 0; t < j->T; t++)
        for (int g = 0; g < Hkv; g++) {
            const eli_kv_view view = eli_kv_head(c->kv, l->kv_source, g, d);
            const int64_t h0 = t * H + (int64_t)g * G;
            eli_flash_prepare(c->kern, &view, c->q + h0 * d, G, d, c->split_q + (size_t)h0 * eli_flash_query_bytes(&view, d));
        }
    eli_pool_run(eli_pool_for(c->pool, work), split_span_task, j);
    eli_pool_run(eli_pool_for(c->pool, j->T * H * j->n_seg * d), split_merge_task, j);
}

/* ---- the layers ---- */

static int attention_block(eli_context *c, int il, int64_t T, int64_t pos0) {
    const eli_model *m = c->m;
    const eli_hparams *hp = &m->hp;
    const eli_layer *l = &m->layers[il];
    const int64_t E = hp->n_embd;
    const int d = l->head_dim, H = l->n_head, Hkv = l->n_head_kv;
    const float *ff = l->is_swa ? NULL : m->rope_freqs; /* proportional RoPE on full layers */
    int rc;

    /* (a) a = RMSw(h, attn_norm); q = RoPE(RMSw(attn_q·a, q_norm)) per head */
    for (int64_t t = 0; t < T; t++) eli_rms_norm(c->xn + t * E, c->x + t * E, l->attn_norm, E, hp->rms_eps);
    if ((rc = eli_matmul_k(c->pool, c->kern, &l->wq, 0, c->xn, T, c->q, &c->qbuf))) return rc;
    for (int64_t t = 0; t < T; t++) {
        float *q = c->q + t * H * d;
        for (int h = 0; h < H; h++) eli_rms_norm(q + h * d, q + h * d, l->q_norm, d, hp->rms_eps);
        eli_rope_neox(q, H, d, l->n_rot, (int32_t)(pos0 + t), l->rope_base, ff);
    }

    /* (b) K and V of this layer into the cache (KV-shared layers skip this and read their source's) */
    if (l->has_kv) {
        if ((rc = eli_matmul_k(c->pool, c->kern, &l->wk, 0, c->xn, T, c->k, &c->qbuf))) return rc;
        if (l->k_eq_v)
            memcpy(c->v, c->k, (size_t)(T * Hkv * d) * sizeof(float)); /* V = raw K projection */
        else if ((rc = eli_matmul_k(c->pool, c->kern, &l->wv, 0, c->xn, T, c->v, &c->qbuf)))
            return rc;
        for (int64_t t = 0; t < T; t++) {
            float *k = c->k + t * Hkv * d, *v = c->v + t * Hkv * d;
            for (int h = 0; h < Hkv; h++) {
                eli_rms_norm(k + h * d, k + h * d, l->k_norm, d, hp->rms_eps);
                eli_rms_norm(v + h * d, v + h * d, NULL, d, hp->rms_eps); /* weightless V norm */
            }
            eli_rope_neox(k, Hkv, d, l->n_rot, (int32_t)(pos0 + t), l->rope_base, ff);
            eli_kv_store(c->kv, il, (int32_t)(pos0 + t), k, v);
        }
    }

    /* (c) attention, scale 1.0, then the output projection */
    attn_job j = {.c = c, .l = l, .T = T, .pos0 = pos0};
    /* the work: Q·K and P·V over the cells each query sees (at most the window on sliding layers) */
    int64_t cells = pos0 + T;
    if (l->is_swa && cells > hp->n_swa) cells = hp->n_swa;
    const int64_t work = 2 * T * H * cells * d;
    if (c->flash && T <= c->split_tokens && eli_pool_for(c->pool, work)) attend_split(c, &j, work);
    else eli_pool_run(eli_pool_for(c->pool, work), attn_task, &j);
    if ((rc = eli_matmul_k(c->pool, c->kern, &l->wo, 0, c->att, T, c->tmp, &c->qbuf))) return rc;

    /* (d) h1 = h + RMSw(attn, post_attention_norm) */
    for (int64_t t = 0; t < T; t++) {
        float *o = c->tmp + t * E, *x = c->x + t * E;
        eli_rms_norm(o, o, l->post_attn_norm, E, hp->rms_eps);
        for (int64_t i = 0; i < E; i++) x[i] += o[i];
    }
    return ELI_OK;
}

/* out = down · (gelu(gate·in) ⊙ (up·in)) for T rows; gate/up are [T][n] */
static int geglu_mlp(eli_context *c, const eli_weight *wg, const eli_weight *wu, const eli_weight *wd, int64_t mat,
                     const float *in, int64_t T, float *out) {
    int rc;
    const int64_t n = wg->rows;
    if ((rc = eli_matmul_k(c->pool, c->kern, wg, mat, in, T, c->gate, &c->qbuf))) return rc;
    if ((rc = eli_matmul_k(c->pool, c->kern, wu, mat, in, T, c->up, &c->qbuf))) return rc;
    eli_geglu(c->kern, T * n, c->gate, c->up);
    return eli_matmul_k(c->pool, c->kern, wd, mat, c->gate, T, out, &c->qbuf);
}

/* (e') the routed experts of one token: out = Σ_{e∈top-k} w_e · (down_e · geglu_e(u)) · scale_e */
static int moe_experts(eli_context *c, const eli_layer *l, const float *h1, const float *u, float *out) {
    const eli_hparams *hp = &c->m->hp;
    const int64_t E = hp->n_embd, F = hp->n_ff_exp;
    const int X = hp->n_expert, K = hp->n_expert_used;
    float *rn = c->moe_rn;
    int rc;
    /* router: weightless RMS norm of h1, ×1/√n_embd, ×scale, then softmax over all experts */
    eli_rms_norm(rn, h1, NULL, E, hp->rms_eps);
    const float inv_sqrt_e = 1.0f / sqrtf((float)E);
    for (int64_t i = 0; i < E; i++) rn[i] = rn[i] * inv_sqrt_e * l->gate_inp_scale[i];
    float probs[4096];
    if ((rc = eli_matmul_k(c->pool, c->kern, &l->gate_inp, 0, rn, 1, probs, &c->qbuf))) return rc;
    eli_softmax_inplace(probs, X);
    /* top-k by probability, highest first */
    int sel[4096];
    char used[4096];
    memset(used, 0, (size_t)X);
    double sum = 0.0;
    for (int k = 0; k < K; k++) {
        int best = -1;
        for (int e = 0; e < X; e++)
            if (!used[e] && (best < 0 || probs[e] > probs[best])) best = e;
        used[best] = 1;
        sel[k] = best;
        sum += probs[best];
    }
    float denom = (float)sum;
    if (denom < 6.103515625e-5f) denom = 6.103515625e-5f;
    for (int64_t i = 0; i < E; i++) out[i] = 0.0f;
    float *y = c->moe_y;
    for (int k = 0; k < K; k++) {
        const int e = sel[k];
        if (l->gate_up_exps.data) {
            if ((rc = eli_matmul_k(c->pool, c->kern, &l->gate_up_exps, e, u, 1, c->gate, &c->qbuf))) return rc;
            eli_geglu(c->kern, F, c->gate, c->gate + F);
            if ((rc = eli_matmul_k(c->pool, c->kern, &l->down_exps, e, c->gate, 1, y, &c->qbuf))) return rc;
        } else if ((rc = geglu_mlp(c, &l->gate_exps, &l->up_exps, &l->down_exps, e, u, 1, y))) {
            return rc;
        }
        const float s = l->down_exps_scale ? l->down_exps_scale[e] : 1.0f;
        const float w = probs[e] / denom;
        for (int64_t i = 0; i < E; i++) out[i] += y[i] * s * w;
    }
    return ELI_OK;
}

static int ffn_block(eli_context *c, int il, int64_t T) {
    const eli_hparams *hp = &c->m->hp;
    const eli_layer *l = &c->m->layers[il];
    const int64_t E = hp->n_embd;
    int rc;
    /* (e) f = RMSw(h1, ffn_norm); m = down·(gelu(gate·f) ⊙ up·f) */
    for (int64_t t = 0; t < T; t++) eli_rms_norm(c->xn + t * E, c->x + t * E, l->ffn_norm, E, hp->rms_eps);
    if ((rc = geglu_mlp(c, &l->ffn_gate, &l->ffn_up, &l->ffn_down, 0, c->xn, T, c->tmp))) return rc;
    if (l->is_moe) {
        /* (e') m = RMSw(m1 + m2, post_ffw_norm), m1 = RMSw(dense, post_ffw_norm_1), m2 = RMSw(experts, ..._2) */
        for (int64_t t = 0; t < T; t++) {
            float *m1 = c->tmp + t * E, *h1 = c->x + t * E, *u = c->xn + t * E;
            float *m2 = c->tmp2 + t * E;
            eli_rms_norm(m1, m1, l->post_ffw_norm_1, E, hp->rms_eps);
            eli_rms_norm(u, h1, l->pre_ffw_norm_2, E, hp->rms_eps);
            if ((rc = moe_experts(c, l, h1, u, m2))) return rc;
            eli_rms_norm(m2, m2, l->post_ffw_norm_2, E, hp->rms_eps);
            for (int64_t i = 0; i < E; i++) m1[i] += m2[i];
        }
    }
    /* h2 = h1 + RMSw(m, post_ffw_norm) */
    for (int64_t t = 0; t < T; t++) {
        float *o = c->tmp + t * E, *x = c->x + t * E;
        eli_rms_norm(o, o, l->post_ffw_norm, E, hp->rms_eps);
        for (int64_t i = 0; i < E; i++) x[i] += o[i];
    }
    return ELI_OK;
}

/* (f) h3 = h2 + RMSw(proj · (gelu(inp_gate · h2) ⊙ ple[il]), post_norm) */
static int ple_block(eli_context *c, int il, int64_t T) {
    const eli_hparams *hp = &c->m->hp;
    const eli_layer *l = &c->m->layers[il];
    const int64_t E = hp->n_embd, P = hp->n_pl, W = P * hp->n_layer;
    int rc;
    if ((rc = eli_matmul_k(c->pool, c->kern, &l->inp_gate, 0, c->x, T, c->gate, &c->qbuf))) return rc;
    for (int64_t t = 0; t < T; t++) eli_geglu(c->kern, P, c->gate + t * P, c->ple + t * W + il * P);
    if ((rc = eli_matmul_k(c->pool, c->kern, &l->proj, 0, c->gate, T, c->tmp, &c->qbuf))) return rc;
    for (int64_t t = 0; t < T; t++) {
        float *o = c->tmp + t * E, *x = c->x + t * E;
        eli_rms_norm(o, o, l->ple_post_norm, E, hp->rms_eps);
        for (int64_t i = 0; i < E; i++) x[i] += o[i];
    }
    return ELI_OK;
}

/* 3.1 embeddings and 3.2 per-layer inputs for a chunk: token rows (the embedding row times sqrt(n_embd)),
 * or embedding rows taken as they are (soft tokens: an image's or an audio clip's), whose per-layer token
 * input is that of token 0, the padding token (llama.cpp's gemma4 graph for embedding input) */
static int embed(eli_context *c, const int32_t *tokens, const float *embd, int64_t T, eli_error *err) {
    const eli_model *m = c->m;
    const eli_hparams *hp = &m->hp;
    const int64_t E = hp->n_embd;
    const float scale = sqrtf((float)E);
    if (!tokens) memcpy(c->x, embd, (size_t)(T * E) * sizeof(float));
    for (int64_t t = 0; tokens && t < T; t++) {
        float *x = c->x + t * E;
        eli_weight_row(&m->token_embd, 0, tokens[t], x);
        for (int64_t i = 0; i < E; i++) x[i] *= scale;
    }
    if (!hp->n_pl) return ELI_OK;
    const int64_t P = hp->n_pl, W = P * hp->n_layer;
    const float tok_scale = sqrtf((float)P), proj_scale = 1.0f / sqrtf((float)E), comb_scale = 1.0f / sqrtf(2.0f);
    int rc = eli_matmul_k(c->pool, c->kern, &m->ple_model_proj, 0, c->x, T, c->ple, &c->qbuf);
    if (rc) return eli_fail(err, rc, "out of memory during the forward pass");
    for (int64_t t = 0; t < T; t++) {
        float *tok = c->ple_tok + t * W, *pr = c->ple + t * W;
        if ((rc = eli_model_ple_row(m, tokens ? tokens[t] : 0, c->ple_raw, tok, err))) return rc; /* from the file */
        for (int64_t il = 0; il < hp->n_layer; il++) {
            float *p = pr + il * P;
            for (int64_t i = 0; i < P; i++) p[i] *= proj_scale;
            eli_rms_norm(p, p, m->ple_proj_norm, P, hp->rms_eps);
        }
        for (int64_t i = 0; i < W; i++) pr[i] = (pr[i] + tok[i] * tok_scale) * comb_scale;
    }
    return ELI_OK;
}

/* 3.4 head for the rows [first, T): y = RMSw(h, output_norm) to hidden, softcapped logits to logits */
static int head(eli_context *c, int64_t first, int64_t T, float *logits, float *hidden) {
    const eli_model *m = c->m;
    const eli_hparams *hp = &m->hp;
    const int64_t E = hp->n_embd, n = T - first;
    for (int64_t t = first; t < T; t++) eli_rms_norm(c->xn + (t - first) * E, c->x + t * E, m->output_norm, E, hp->rms_eps);
    if (hidden) memcpy(hidden, c->xn, (size_t)(n * E) * sizeof(float));
    if (!logits) return ELI_OK;
    int rc = eli_matmul_k(c->pool, c->kern, &m->output, 0, c->xn, n, logits, &c->qbuf);
    if (rc) return rc;
    if (hp->final_softcap > 0) c->kern->softcap_f32(n * hp->n_vocab, hp->final_softcap, logits);
    return ELI_OK;
}

/* One chunk of T rows (tokens or embd) at n_past; spans: the bidirectional ones inside it, their rows
 * counted from the chunk's row first. */
static int forward_ubatch(eli_context *c, const int32_t *tokens, const float *embd, int64_t T, const eli_span *spans,
                          int n_spans, int64_t first, float *logits, float *hidden, int all, eli_error *err) {
    const eli_model *m = c->m;
    const int64_t pos0 = c->n_past;
    for (int64_t t = 0; t < T; t++) c->row_hi[t] = (int32_t)(pos0 + t);
    for (int i = 0; i < n_spans; i++)
        for (int64_t t = spans[i].begin - first; t < spans[i].end - first; t++)
            c->row_hi[t] = (int32_t)(pos0 + spans[i].end - first - 1);
    int rc = embed(c, tokens, embd, T, err);
    if (rc) return rc; /* nothing was written to the cache */
    for (int il = 0; il < m->hp.n_layer && !rc; il++) {
        const eli_layer *l = &m->layers[il];
        if ((rc = attention_block(c, il, T, pos0)) || (rc = ffn_block(c, il, T)) ||
            (m->hp.n_pl && (rc = ple_block(c, il, T))))
            break;
        if (l->has_out_scale) /* (g) the whole residual stream is scaled */
            for (int64_t i = 0; i < T * m->hp.n_embd; i++) c->x[i] *= l->out_scale;
    }
    if (!rc && (logits || hidden)) rc = head(c, all ? 0 : T - 1, T, logits, hidden);
    if (rc) return eli_fail(err, rc, "out of memory during the forward pass");
    /* a model file cut shorter while mapped reads as zeros (mapguard.h): nothing computed from it counts */
    if ((rc = eli_gguf_check_mapping(m->file, err))) return rc;
    c->n_past += T;
    return ELI_OK;
}

static int check_batch(const eli_context *c, const eli_batch *b, eli_error *err) {
    const eli_hparams *hp = &c->m->hp;
    if (b->n < 0 || (b->n > 0 && !b->tokens == !b->embd))
        return eli_fail(err, ELI_ERR_INVALID_ARG, "a batch of %lld rows needs token ids or embedding rows (one of them)",
                        (long long)b->n);
    if (b->n > c->n_ctx - c->n_past)
        return eli_fail(err, ELI_ERR_INVALID_ARG, "context overflow: %lld tokens at position %lld exceed n_ctx %lld",
                        (long long)b->n, (long long)c->n_past, (long long)c->n_ctx);
    for (int64_t i = 0; b->tokens && i < b->n; i++)
        if (b->tokens[i] < 0 || b->tokens[i] >= hp->n_vocab)
            return eli_fail(err, ELI_ERR_INVALID_ARG, "token id %d at index %lld is outside the vocabulary [0, %d)",
                            b->tokens[i], (long long)i, hp->n_vocab);
    if (b->n_bidir < 0 || (b->n_bidir > 0 && !b->bidir))
        return eli_fail(err, ELI_ERR_INVALID_ARG, "%d bidirectional spans without an array", b->n_bidir);
    for (int i = 0; i < b->n_bidir; i++) {
        const eli_span *sp = &b->bidir[i];
        if (sp->begin < (i ? b->bidir[i - 1].end : 0) || sp->end <= sp->begin || sp->end > b->n)
            return eli_fail(err, ELI_ERR_INVALID_ARG, "bidirectional span %d [%lld, %lld) is empty, unsorted, overlapping or "
                                                      "outside the %lld rows",
                            i, (long long)sp->begin, (long long)sp->end, (long long)b->n);
        if (sp->end - sp->begin > c->n_ubatch)
            return eli_fail(err, ELI_ERR_INVALID_ARG,
                            "bidirectional span %d of %lld rows is longer than a forward chunk (n_ubatch %lld)", i,
                            (long long)(sp->end - sp->begin), (long long)c->n_ubatch);
    }
    return ELI_OK;
}

int eli_decode_batch(eli_context *c, const eli_batch *b, const eli_outputs *out, eli_error *err) {
    const eli_hparams *hp = &c->m->hp;
    int rc = check_batch(c, b, err);
    if (rc) return rc;
    const eli_outputs none = {NULL, NULL, 0};
    if (!out) out = &none;
    int span = 0; /* the first span not yet decoded */
    for (int64_t done = 0; done < b->n;) {
        int64_t T = b->n - done < c->n_ubatch ? b->n - done : c->n_ubatch;
        /* a span is never split: the chunk ends before one it would cut (it fits in the next: <= n_ubatch) */
        for (int i = span; i < b->n_bidir; i++)
            if (b->bidir[i].begin < done + T && b->bidir[i].end > done + T) T = b->bidir[i].begin - done;
        const int first_span = span;
        while (span < b->n_bidir && b->bidir[span].end <= done + T) span++;
        const int last = done + T == b->n;
        float *lg = NULL, *hd = NULL;
        if (out->all) {
            lg = out->logits ? out->logits + done * hp->n_vocab : NULL;
            hd = out->hidden ? out->hidden + done * hp->n_embd : NULL;
        } else if (last) {
            lg = out->logits;
            hd = out->hidden;
        }
        const int32_t *tokens = b->tokens ? b->tokens + done : NULL;
        const float *embd = b->tokens ? NULL : b->embd + done * hp->n_embd;
        const eli_span *spans = span > first_span ? b->bidir + first_span : NULL;
        if ((rc = forward_ubatch(c, tokens, embd, T, spans, span - first_span, done, lg, hd, out->all, err)))
            return rc;
        done += T;
    }
    return ELI_OK;
}

int eli_decode_ex(eli_context *c, const int32_t *tokens, int64_t n, const eli_outputs *out, eli_error *err) {
    const eli_batch b = {n, tokens, NULL, NULL, 0};
    return eli_decode_batch(c, &b, out, err);
}

int eli_decode(eli_context *c, const int32_t *tokens, int64_t n, float *logits, int all_logits, eli_error *err) {
    const eli_outputs out = {logits, NULL, all_logits};
    return eli_decode_ex(c, tokens, n, &out, err);
}

int eli_context_truncate(eli_context *c, int64_t n_keep) {
    if (n_keep < 0 || n_keep > c->n_past) return 0;
    if (!eli_kv_truncate(c->kv, (int32_t)n_keep, c->m->hp.n_swa)) return 0;
    c->n_past = n_keep;
    return 1;
}

const eli_kv_cache *eli_context_kv(const eli_context *c) { return c->kv; }
eli_pool *eli_context_pool(eli_context *c) { return c->pool; }
const eli_kernels *eli_context_kernels(const eli_context *c) { return c->kern; }

eli_kv_cache *eli_context_kv_mut(eli_context *c) { return c->kv; }
eli_context_params eli_context_get_params(const eli_context *c) { return c->params; }

void eli_context_checkpoint(eli_context *c) { eli_kv_checkpoint_take(c->kv, (int32_t)c->n_past); }

int64_t eli_context_resume(eli_context *c, int64_t n_keep) {
    if (eli_context_truncate(c, n_keep)) return n_keep;
    if (n_keep < 0 || n_keep > c->n_past) return -1;
    const int32_t r = eli_kv_checkpoint_restore(c->kv, (int32_t)n_keep, c->m->hp.n_swa);
    if (r < 0) return -1;
    c->n_past = r;
    return r;
}

void eli_context_save_state(const eli_context *c, void (*put)(void *w, const void *p, size_t n), void *w) {
    const int64_t n_past = c->n_past;
    put(w, &n_past, sizeof n_past);
    eli_kv_save(c->kv, put, w);
}

int eli_context_load_state(eli_context *c, const uint8_t *p, size_t n, eli_error *err) {
    int64_t n_past;
    if (n < sizeof n_past) return eli_fail(err, ELI_ERR_INVALID_ARG, "sequence state of %zu bytes is too short", n);
    memcpy(&n_past, p, sizeof n_past);
    if (n_past < 0 || n_past > c->n_ctx)
        return eli_fail(err, ELI_ERR_INVALID_ARG, "sequence state holds %lld positions, the context %lld", (long long)n_past,
                        (long long)c->n_ctx);
    int rc = eli_kv_load(c->kv, p + sizeof n_past, n - sizeof n_past, (int32_t)n_past, c->m->hp.n_swa, err);
    if (!rc) c->n_past = n_past;
    return rc;
}
