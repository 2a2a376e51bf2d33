/* The assistant forward (spec 6.3), one row at a time; see drafter.h. */
#include "drafter.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kv_cache.h"
#include "ops.h"

struct eli_drafter {
    const eli_model *dm, *tm;
    int64_t n_ctx;
    float *xh;     /* [2 * n_embd_out]: target embedding ; h_in */
    float *c, *cn, *o; /* [n_embd] residual, normed, sublayer out */
    float *q, *att; /* [n_head * head_dim max] */
    float *gate, *up; /* [n_ff max] */
    float *y;      /* [n_embd] */
    float *scores, *tmp;
    void *flash_work;       /* eli_attend_flash scratch for the largest group of heads */
    float *centroid_logits; /* [n_centroids] */
    int32_t *cand;          /* [centroid_top_k * tokens per cluster]: the masked head's candidate tokens */
    float *cand_logits;
    eli_buf qbuf;
};

void eli_drafter_free(eli_drafter *d) {
    if (!d) return;
    free(d->xh), free(d->c), free(d->cn), free(d->o), free(d->q), free(d->att), free(d->gate), free(d->up);
    free(d->y), free(d->scores), free(d->tmp), free(d->flash_work), free(d->centroid_logits), free(d->cand), free(d->cand_logits);
    eli_buf_free(&d->qbuf);
    free(d);
}

eli_drafter *eli_drafter_create(const eli_model *draft, const eli_model *target, int64_t n_ctx, eli_error *err) {
    eli_drafter *d = calloc(1, sizeof *d);
    if (!d) {
        eli_fail(err, ELI_ERR_OOM, "out of memory");
        return NULL;
    }
    const eli_hparams *hp = &draft->hp;
    int64_t qmax = 0, ffmax = 0, dmax = 0, gmax = 1;
    for (int il = 0; il < hp->n_layer; il++) {
        const eli_layer *l = &draft->layers[il];
        if ((int64_t)l->n_head * l->head_dim > qmax) qmax = (int64_t)l->n_head * l->head_dim;
        if (l->n_ff > ffmax) ffmax = l->n_ff;
        if (l->head_dim > dmax) dmax = l->head_dim;
        if (l->n_head / l->n_head_kv > gmax) gmax = l->n_head / l->n_head_kv;
    }
    d->dm = draft;
    d->tm = target;
    d->n_ctx = n_ctx;
    d->xh = malloc(sizeof(float) * 2 * (size_t)hp->n_embd_out);
    d->c = malloc(sizeof(float) * (size_t)hp->n_embd);
    d->cn = malloc(sizeof(float) * (size_t)hp->n_embd);
    d->o = malloc(sizeof(float) * (size_t)hp->n_embd);
    d->y = malloc(sizeof(float) * (size_t)hp->n_embd);
    d->q = malloc(sizeof(float) * (size_t)qmax);
    d->att = malloc(sizeof(float) * (size_t)qmax);
    d->gate = malloc(sizeof(float) * (size_t)ffmax);
    d->up = malloc(sizeof(float) * (size_t)ffmax);
    d->scores = malloc(sizeof(float) * (size_t)(n_ctx > 0 ? n_ctx : 1));
    d->tmp = malloc(sizeof(float) * 2 * (size_t)dmax);
    d->flash_work = malloc(eli_attend_flash_work_size((int)gmax, (int)dmax));
    const int masked = draft->masked_centroids.data != NULL;
    if (masked) {
        const size_t n_cand = (size_t)draft->centroid_top_k * (size_t)(hp->n_vocab / draft->n_centroids);
        d->centroid_logits = malloc(sizeof(float) * (size_t)draft->n_centroids);
        d->cand = malloc(sizeof(int32_t) * n_cand);
        d->cand_logits = malloc(sizeof(float) * n_cand);
    }
    if (!d->xh || !d->c || !d->cn || !d->o || !d->y || !d->q || !d->att || !d->gate || !d->up || !d->scores || !d->tmp || !d->flash_work ||
        (masked && (!d->centroid_logits || !d->cand || !d->cand_logits))) {
        eli_drafter_free(d);
        eli_fail(err, ELI_ERR_OOM, "out of memory for the drafter");
        return NULL;
    }
    return d;
}

/* The centroid-masked head (HF Gemma4AssistantMaskedEmbedder): score the centroids, keep the top-k
 * clusters, compute logits only for their tokens; every other token gets (smallest kept logit - 1). */
static int masked_head(eli_drafter *d, eli_pool *pool, const eli_kernels *k, float *logits) {
    const eli_model *dm = d->dm;
    const int nc = dm->n_centroids, top = dm->centroid_top_k, per = dm->hp.n_vocab / nc;
    int rc = eli_matmul_k(pool, k, &dm->masked_centroids, 0, d->y, 1, d->centroid_logits, &d->qbuf);
    if (rc) return rc;
    int n = 0;
    for (int s = 0; s < top; s++) { /* top-k clusters, highest first (ties: lower index) */
        int best = -1;
        for (int c = 0; c < nc; c++)
            if (d->centroid_logits[c] > -INFINITY && (best < 0 || d->centroid_logits[c] > d->centroid_logits[best])) best = c;
        if (best < 0) break;
        d->centroid_logits[best] = -INFINITY;
        memcpy(d->cand + n, dm->masked_ordering + (size_t)best * per, sizeof(int32_t) * (size_t)per);
        n += per;
    }
    if ((rc = eli_matmul_rows(pool, k, &dm->output, d->cand, n, d->y, d->cand_logits, &d->qbuf))) return rc;
    float lo = INFINITY;
    for (int i = 0; i < n; i++) lo = d->cand_logits[i] < lo ? d->cand_logits[i] : lo;
    for (int i = 0; i < dm->hp.n_vocab; i++) logits[i] = lo - 1.0f;
    for (int i = 0; i < n; i++) logits[d->cand[i]] = d->cand_logits[i];
    return ELI_OK;
}

/* c += RMSw(o, w) */
static void add_normed(float *c, float *o, const float *w, int64_t n, float eps) {
    eli_rms_norm(o, o, w, n, eps);
    for (int64_t i = 0; i < n; i++) c[i] += o[i];
}

int eli_drafter_step(eli_drafter *d, eli_context *target, int32_t t, int32_t pos, const float *h_in, float *logits,
                     float *h_out, eli_error *err) {
    const eli_model *dm = d->dm, *tm = d->tm;
    const eli_hparams *hp = &dm->hp;
    const int64_t E = hp->n_embd, B = hp->n_embd_out;
    if (t < 0 || t >= tm->hp.n_vocab) return eli_fail(err, ELI_ERR_INVALID_ARG, "draft token %d out of range", t);
    if (pos < 1 || pos > d->n_ctx || pos > eli_context_n_past(target))
        return eli_fail(err, ELI_ERR_INVALID_ARG, "draft position %d: the target cache holds %lld positions", pos,
                        (long long)eli_context_n_past(target));
    /* The drafter runs on the calling thread: its matmuls are tiny (n_embd 128, a few microseconds each,
     * the head 8192 x 128), and handing them to the target's pool cost more than it saved here (2 cores,
     * shared: a draft step 0.17 ms on one thread, 0.11-0.70 ms through the pool, 0.28-0.38 vs 0.41-0.86 ms
     * on average), as a worker must be scheduled for every hand-off. */
    eli_pool *const pool = NULL;
    const eli_kernels *k = eli_context_kernels(target);
    const eli_kv_cache *kv = eli_context_kv(target);
    int rc;

    /* 1-2: c = pre_projection · [target embedding(t) · √backbone ; h_in] */
    eli_weight_row(&tm->token_embd, 0, t, d->xh);
    const float scale = sqrtf((float)B);
    for (int64_t i = 0; i < B; i++) d->xh[i] *= scale;
    memcpy(d->xh + B, h_in, (size_t)B * sizeof(float));
    if ((rc = eli_matmul_k(pool, k, &dm->nextn_pre_proj, 0, d->xh, 1, d->c, &d->qbuf))) goto oom;

    /* 3: Q-only layers over the target's donor caches, at the constant position pos */
    for (int il = 0; il < hp->n_layer; il++) {
        const eli_layer *l = &dm->layers[il];
        const int dd = l->head_dim, H = l->n_head, group = l->n_head / l->n_head_kv;
        eli_rms_norm(d->cn, d->c, l->attn_norm, E, hp->rms_eps);
        if ((rc = eli_matmul_k(pool, k, &l->wq, 0, d->cn, 1, d->q, &d->qbuf))) goto oom;
        for (int h = 0; h < H; h++) eli_rms_norm(d->q + h * dd, d->q + h * dd, l->q_norm, dd, hp->rms_eps);
        eli_rope_neox(d->q, H, dd, l->n_rot, pos, l->rope_base, l->is_swa ? NULL : dm->rope_freqs);
        int32_t p_lo = 0, p_hi = pos - 1; /* the target holds 0 .. pos-1; the query sits at pos */
        if (l->is_swa && pos - hp->n_swa + 1 > 0) p_lo = pos - hp->n_swa + 1;
        if (p_hi < p_lo) {
            memset(d->att, 0, sizeof(float) * (size_t)H * dd);
        } else if (k != eli_kernels_reference() && eli_attend_flash_ok(kv->type_k, kv->type_v)) {
            /* as the target does: the heads sharing a KV head in one fused pass over the cache */
            for (int g = 0; g < l->n_head_kv; g++) {
                const eli_kv_view view = eli_kv_head(kv, l->kv_source, g, dd);
                eli_attend_flash(k, d->q + (size_t)g * group * dd, group, dd, &view, p_lo, p_hi, d->flash_work,
                                 d->att + (size_t)g * group * dd);
            }
        } else {
            for (int h = 0; h < H; h++) {
                const eli_kv_view view = eli_kv_head(kv, l->kv_source, h / group, dd);
                eli_attend(k, d->q + h * dd, dd, &view, p_lo, p_hi, d->scores, d->tmp, d->att + h * dd);
            }
        }
        if ((rc = eli_matmul_k(pool, k, &l->wo, 0, d->att, 1, d->o, &d->qbuf))) goto oom;
        add_normed(d->c, d->o, l->post_attn_norm, E, hp->rms_eps);
        eli_rms_norm(d->cn, d->c, l->ffn_norm, E, hp->rms_eps);
        if ((rc = eli_matmul_k(pool, k, &l->ffn_gate, 0, d->cn, 1, d->gate, &d->qbuf))) goto oom;
        if ((rc = eli_matmul_k(pool, k, &l->ffn_up, 0, d->cn, 1, d->up, &d->qbuf))) goto oom;
        eli_geglu(k, l->n_ff, d->gate, d->up);
        if ((rc = eli_matmul_k(pool, k, &l->ffn_down, 0, d->gate, 1, d->o, &d->qbuf))) goto oom;
        add_normed(d->c, d->o, l->post_ffw_norm, E, hp->rms_eps);
        for (int64_t i = 0; i < E; i++) d->c[i] *= l->out_scale;
    }

    /* 4-5: logits from the drafter's own tied head (no softcap), h_out = post_projection · y */
    eli_rms_norm(d->y, d->c, dm->output_norm, E, hp->rms_eps);
    if (dm->masked_centroids.data) rc = masked_head(d, pool, k, logits);
    else rc = eli_matmul_k(pool, k, &dm->output, 0, d->y, 1, logits, &d->qbuf);
    if (rc) goto oom;
    if ((rc = eli_matmul_k(pool, k, &dm->nextn_post_proj, 0, d->y, 1, h_out, &d->qbuf))) goto oom;
    return eli_gguf_check_mapping(dm->file, err); /* a drafter file cut shorter while mapped reads as zeros */
oom:
    return eli_fail(err, rc, "out of memory in a draft step");
}
