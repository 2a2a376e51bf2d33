/* Gemma 4 model loading: hparams (spec section 1) and tensor binding with shape checks (section 2). */
#include "model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quants.h"

/* Hard limits that keep every size computation far from overflow; real models are well inside. */
#define MAX_LAYERS 512
#define MAX_DIM (1 << 20)
#define MAX_VOCAB (1 << 24)

typedef struct {
    const eli_gguf_file *f;
    const char *arch;
    eli_error *err;
} hp_reader;

static void key_name(char *buf, size_t n, const char *arch, const char *suffix) {
    snprintf(buf, n, "%s.%s", arch, suffix);
}

/* Reads a u32 key in [lo, hi]; *out keeps its default when the key is absent and !required. */
static int hp_u32(hp_reader *r, const char *suffix, int required, int lo, int hi, int *out) {
    char key[128];
    key_name(key, sizeof key, r->arch, suffix);
    uint32_t v;
    int rc = eli_gguf_get_u32(r->f, key, &v, r->err);
    if (rc < 0) return rc;
    if (rc == 0) {
        if (required) return eli_fail(r->err, ELI_ERR_INVALID_ARG, "missing required key '%s'", key);
        return ELI_OK;
    }
    if ((int64_t)v < lo || (int64_t)v > hi)
        return eli_fail(r->err, ELI_ERR_INVALID_ARG, "key '%s' = %u is outside [%d, %d]", key, v, lo, hi);
    *out = (int)v;
    return ELI_OK;
}

static int hp_f32(hp_reader *r, const char *suffix, int required, float *out) {
    char key[128];
    key_name(key, sizeof key, r->arch, suffix);
    float v;
    int rc = eli_gguf_get_f32(r->f, key, &v, r->err);
    if (rc < 0) return rc;
    if (rc == 0) {
        if (required) return eli_fail(r->err, ELI_ERR_INVALID_ARG, "missing required key '%s'", key);
        return ELI_OK;
    }
    if (!isfinite(v)) return eli_fail(r->err, ELI_ERR_INVALID_ARG, "key '%s' = %g is not finite", key, (double)v);
    *out = v;
    return ELI_OK;
}

/* A key that is either one u32 for every layer or an array of n_layer values (bools accepted for the
 * SWA pattern). Absent: every entry keeps dflt; absent and required: error. */
static int hp_per_layer(hp_reader *r, const char *suffix, int required, int n_layer, int lo, int hi, int dflt,
                        int *out) {
    char key[128];
    key_name(key, sizeof key, r->arch, suffix);
    for (int i = 0; i < n_layer; i++) out[i] = dflt;
    const eli_gguf_value *v = eli_gguf_find(r->f, key);
    if (!v) return required ? eli_fail(r->err, ELI_ERR_INVALID_ARG, "missing required key '%s'", key) : ELI_OK;
    uint64_t n = eli_gguf_value_count(v);
    if (v->type == GGUF_VT_ARRAY && n != (uint64_t)n_layer)
        return eli_fail(r->err, ELI_ERR_INVALID_ARG, "key '%s' has %llu entries, expected block_count = %d", key,
                        (unsigned long long)n, n_layer);
    for (int i = 0; i < n_layer; i++) {
        int64_t x;
        int rc = eli_gguf_value_i64(v, v->type == GGUF_VT_ARRAY ? (uint64_t)i : 0, &x, key, r->err);
        if (rc) return rc;
        if (x < lo || x > hi)
            return eli_fail(r->err, ELI_ERR_INVALID_ARG, "key '%s'[%d] = %lld is outside [%d, %d]", key, i,
                            (long long)x, lo, hi);
        out[i] = (int)x;
    }
    return ELI_OK;
}

typedef struct {
    eli_model *m;
    eli_error *err;
} binder;

static const eli_gguf_tensor *find_tensor(binder *b, const char *name, int required) {
    const eli_gguf_tensor *t = eli_gguf_find_tensor(b->m->file, name);
    if (!t && required) eli_fail(b->err, ELI_ERR_INVALID_ARG, "missing tensor '%s'", name);
    return t;
}

static int check_shape(binder *b, const eli_gguf_tensor *t, int64_t ne0, int64_t ne1, int64_t ne2) {
    int64_t want[4] = {ne0, ne1, ne2, 1};
    for (int d = 0; d < 4; d++)
        if (t->ne[d] != want[d])
            return eli_fail(b->err, ELI_ERR_INVALID_ARG,
                            "tensor '%s' has shape {%lld, %lld, %lld, %lld}, expected {%lld, %lld, %lld, %lld}", t->name,
                            (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3],
                            (long long)want[0], (long long)want[1], (long long)want[2], (long long)want[3]);
    return ELI_OK;
}

static int check_computable(binder *b, const eli_gguf_tensor *t) {
    const eli_type_traits *tt = eli_type_info(t->type);
    if (!tt || !tt->dequantize || !tt->vec_dot)
        return eli_fail(b->err, ELI_ERR_INVALID_ARG, "tensor '%s' has type %s (id %u), which this engine does not support",
                        t->name, eli_type_name(t->type), t->type);
    return ELI_OK;
}

/* Binds a matrix {cols, rows[, n_mat]}. Absent and optional: w->data stays NULL, returns OK. */
static int bind_matrix(binder *b, eli_weight *w, const char *name, int required, int64_t cols, int64_t rows,
                       int64_t n_mat) {
    memset(w, 0, sizeof *w);
    const eli_gguf_tensor *t = find_tensor(b, name, required);
    if (!t) return required ? ELI_ERR_INVALID_ARG : ELI_OK;
    int rc = check_shape(b, t, cols, rows, n_mat);
    if (!rc) rc = check_computable(b, t);
    if (rc) return rc;
    w->data = t->data;
    w->type = t->type;
    w->cols = cols;
    w->rows = rows;
    w->n_mat = n_mat;
    w->row_bytes = eli_row_size(t->type, cols);
    w->name = t->name;
    return ELI_OK;
}

/* Binds a small vector as an owned f32 copy. */
static int bind_vector(binder *b, const float **out, const char *name, int required, int64_t n) {
    *out = NULL;
    const eli_gguf_tensor *t = find_tensor(b, name, required);
    if (!t) return required ? ELI_ERR_INVALID_ARG : ELI_OK;
    int rc = check_shape(b, t, n, 1, 1);
    if (!rc) rc = check_computable(b, t);
    if (rc) return rc;
    float *v = malloc((size_t)n * sizeof *v);
    void **grown = realloc(b->m->owned, (b->m->n_owned + 1) * sizeof *grown);
    if (!v || !grown) {
        free(v);
        if (grown) b->m->owned = grown;
        return eli_fail(b->err, ELI_ERR_OOM, "out of memory for tensor '%s'", name);
    }
    b->m->owned = grown;
    b->m->owned[b->m->n_owned++] = v;
    eli_dequantize_row(t->type, t->data, v, n);
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(v[i]))
            return eli_fail(b->err, ELI_ERR_INVALID_ARG, "tensor '%s' element %lld is not finite", name, (long long)i);
    *out = v;
    return ELI_OK;
}

static int load_hparams(eli_model *m, eli_error *err, int **n_ff_out, int **n_head_out, int **n_kv_out, int **swa_out) {
    hp_reader r = {m->file, m->arch_name, err};
    eli_hparams *hp = &m->hp;
    int rc;
    if ((rc = hp_u32(&r, "block_count", 1, 1, MAX_LAYERS, &hp->n_layer))) return rc;
    if ((rc = hp_u32(&r, "context_length", 1, 1, INT32_MAX, &hp->n_ctx_train))) return rc;
    if ((rc = hp_u32(&r, "embedding_length", 1, 1, MAX_DIM, &hp->n_embd))) return rc;
    const int L = hp->n_layer;
    int *n_ff = calloc((size_t)L, sizeof *n_ff), *n_head = calloc((size_t)L, sizeof *n_head);
    int *n_kv = calloc((size_t)L, sizeof *n_kv), *swa = calloc((size_t)L, sizeof *swa);
    *n_ff_out = n_ff, *n_head_out = n_head, *n_kv_out = n_kv, *swa_out = swa;
    if (!n_ff || !n_head || !n_kv || !swa) return eli_fail(err, ELI_ERR_OOM, "out of memory");

    if ((rc = hp_per_layer(&r, "attention.head_count", 1, L, 1, MAX_DIM, 0, n_head))) return rc;
    if ((rc = hp_per_layer(&r, "attention.head_count_kv", 0, L, 1, MAX_DIM, 0, n_kv))) return rc;
    for (int i = 0; i < L; i++) {
        if (!n_kv[i]) n_kv[i] = n_head[i]; /* default: no GQA */
        if (n_head[i] % n_kv[i])
            return eli_fail(err, ELI_ERR_INVALID_ARG, "layer %d: head_count %d is not a multiple of head_count_kv %d", i,
                            n_head[i], n_kv[i]);
    }
    if ((rc = hp_per_layer(&r, "feed_forward_length", 1, L, 1, MAX_DIM, 0, n_ff))) return rc;
    if ((rc = hp_per_layer(&r, "attention.sliding_window_pattern", 1, L, 0, 1, 0, swa))) return rc;

    hp->head_dim_full = n_head[0] ? hp->n_embd / n_head[0] : 0;
    if ((rc = hp_u32(&r, "attention.key_length", 0, 1, MAX_DIM, &hp->head_dim_full))) return rc;
    int vlen = hp->head_dim_full;
    if ((rc = hp_u32(&r, "attention.value_length", 0, 1, MAX_DIM, &vlen))) return rc;
    if (vlen != hp->head_dim_full)
        return eli_fail(err, ELI_ERR_INVALID_ARG, "%s.attention.key_length %d != value_length %d", m->arch_name,
                        hp->head_dim_full, vlen);
    if ((rc = hp_u32(&r, "attention.key_length_swa", 1, 1, MAX_DIM, &hp->head_dim_swa))) return rc;
    vlen = hp->head_dim_swa;
    if ((rc = hp_u32(&r, "attention.value_length_swa", 0, 1, MAX_DIM, &vlen))) return rc;
    if (vlen != hp->head_dim_swa)
        return eli_fail(err, ELI_ERR_INVALID_ARG, "%s.attention.key_length_swa %d != value_length_swa %d",
                        m->arch_name, hp->head_dim_swa, vlen);
    if (hp->head_dim_full > 1024 || hp->head_dim_swa > 1024)
        return eli_fail(err, ELI_ERR_INVALID_ARG, "head dims %d/%d exceed the supported 1024", hp->head_dim_full,
                        hp->head_dim_swa);
    hp->n_rot_full = hp->head_dim_full;
    hp->n_rot_swa = hp->head_dim_swa;
    if ((rc = hp_u32(&r, "rope.dimension_count", 0, 2, MAX_DIM, &hp->n_rot_full))) return rc;
    if ((rc = hp_u32(&r, "rope.dimension_count_swa", 0, 2, MAX_DIM, &hp->n_rot_swa))) return rc;
    if (hp->n_rot_full > hp->head_dim_full || hp->n_rot_full % 2 || hp->n_rot_swa > hp->head_dim_swa || hp->n_rot_swa % 2)
        return eli_fail(err, ELI_ERR_INVALID_ARG, "rope dimension counts %d/%d must be even and <= head dims %d/%d",
                        hp->n_rot_full, hp->n_rot_swa, hp->head_dim_full, hp->head_dim_swa);
    if ((rc = hp_f32(&r, "attention.layer_norm_rms_epsilon", 1, &hp->rms_eps))) return rc;
    if (!(hp->rms_eps >= 0)) return eli_fail(err, ELI_ERR_INVALID_ARG, "rms epsilon %g is negative", (double)hp->rms_eps);
    if ((rc = hp_u32(&r, "attention.sliding_window", 1, 1, INT32_MAX, &hp->n_swa))) return rc;
    hp->n_shared_kv = 0;
    if ((rc = hp_u32(&r, "attention.shared_kv_layers", 0, 0, m->is_assistant ? L : L - 1, &hp->n_shared_kv))) return rc;
    hp->n_layer_kv = L - hp->n_shared_kv;
    if ((rc = hp_u32(&r, "embedding_length_per_layer_input", !m->is_assistant, 0, MAX_DIM, &hp->n_pl))) return rc;
    if (m->is_assistant) {
        /* the drafter has no K/V of its own: every layer reads the target's cache (spec 6.2) */
        hp->n_shared_kv = L;
        hp->n_layer_kv = 0;
        if ((rc = hp_u32(&r, "embedding_length_out", 1, 1, MAX_DIM, &hp->n_embd_out))) return rc;
        if (hp->n_embd_out == hp->n_embd)
            return eli_fail(err, ELI_ERR_INVALID_ARG, "%s.embedding_length_out must differ from embedding_length (%d)",
                            m->arch_name, hp->n_embd);
        int n_predict = L;
        if ((rc = hp_u32(&r, "nextn_predict_layers", 0, 1, MAX_LAYERS, &n_predict))) return rc;
        if (n_predict != L)
            return eli_fail(err, ELI_ERR_INVALID_ARG, "%s.nextn_predict_layers %d != block_count %d", m->arch_name,
                            n_predict, L);
        if (hp->n_pl) return eli_fail(err, ELI_ERR_INVALID_ARG, "an assistant model cannot have per-layer embeddings");
    }
    hp->rope_base_full = 10000.0f;
    hp->rope_base_swa = 10000.0f;
    if ((rc = hp_f32(&r, "rope.freq_base", 0, &hp->rope_base_full))) return rc;
    if ((rc = hp_f32(&r, "rope.freq_base_swa", 0, &hp->rope_base_swa))) return rc;
    if (!(hp->rope_base_full > 0) || !(hp->rope_base_swa > 0))
        return eli_fail(err, ELI_ERR_INVALID_ARG, "rope freq bases must be positive");
    hp->final_softcap = 30.0f; /* llama.cpp's default applies when the key is absent */
    if ((rc = hp_f32(&r, "final_logit_softcapping", 0, &hp->final_softcap))) return rc;
    if (m->is_assistant) hp->final_softcap = 0.0f; /* the drafter's logits are not softcapped (spec 6.3) */
    if (hp->final_softcap < 0)
        return eli_fail(err, ELI_ERR_INVALID_ARG, "final_logit_softcapping %g is negative", (double)hp->final_softcap);
    if ((rc = hp_u32(&r, "expert_count", 0, 0, 4096, &hp->n_expert))) return rc;
    if ((rc = hp_u32(&r, "expert_used_count", 0, 0, 4096, &hp->n_expert_used))) return rc;
    if ((rc = hp_u32(&r, "expert_feed_forward_length", 0, 0, MAX_DIM, &hp->n_ff_exp))) return rc;
    if (hp->n_expert_used > hp->n_expert)
        return eli_fail(err, ELI_ERR_INVALID_ARG, "expert_used_count %d > expert_count %d", hp->n_expert_used, hp->n_expert);
    return ELI_OK;
}

static int bind_layer(binder *b, int il, const int *n_ff, const int *n_head, const int *n_kv, const int *swa) {
    eli_model *m = b->m;
    const eli_hparams *hp = &m->hp;
    eli_layer *l = &m->layers[il];
    const int64_t E = hp->n_embd;
    char nm[160];
    int rc;
#define NAME(s) (snprintf(nm, sizeof nm, "blk.%d.%s", il, s), nm)
    l->is_swa = swa[il];
    l->n_head = n_head[il];
    l->n_head_kv = n_kv[il];
    l->head_dim = l->is_swa ? hp->head_dim_swa : hp->head_dim_full;
    l->n_rot = l->is_swa ? hp->n_rot_swa : hp->n_rot_full;
    l->rope_base = l->is_swa ? hp->rope_base_swa : hp->rope_base_full;
    l->n_ff = n_ff[il];
    l->has_kv = il < hp->n_layer_kv;
    const int64_t dq = (int64_t)l->head_dim * l->n_head, dkv = (int64_t)l->head_dim * l->n_head_kv;

    if ((rc = bind_vector(b, &l->attn_norm, NAME("attn_norm.weight"), 1, E))) return rc;
    if ((rc = bind_matrix(b, &l->wq, NAME("attn_q.weight"), 1, E, dq, 1))) return rc;
    if ((rc = bind_vector(b, &l->q_norm, NAME("attn_q_norm.weight"), 1, l->head_dim))) return rc;
    if ((rc = bind_matrix(b, &l->wo, NAME("attn_output.weight"), 1, dq, E, 1))) return rc;
    if ((rc = bind_vector(b, &l->post_attn_norm, NAME("post_attention_norm.weight"), 1, E))) return rc;
    if (l->has_kv) {
        l->kv_source = il;
        if ((rc = bind_matrix(b, &l->wk, NAME("attn_k.weight"), 1, E, dkv, 1))) return rc;
        if ((rc = bind_matrix(b, &l->wv, NAME("attn_v.weight"), 0, E, dkv, 1))) return rc;
        if ((rc = bind_vector(b, &l->k_norm, NAME("attn_k_norm.weight"), 1, l->head_dim))) return rc;
        l->k_eq_v = l->wv.data == NULL;
    } else if (m->is_assistant) {
        l->kv_source = -1; /* set by eli_drafter_attach from the target's layers */
    } else {
        /* KV-shared layer: reads the cache of the last layer of the same type that owns K/V. */
        l->kv_source = -1;
        for (int j = hp->n_layer_kv - 1; j >= 0; j--)
            if (swa[j] == l->is_swa) {
                l->kv_source = j;
                break;
            }
        if (l->kv_source < 0)
            return eli_fail(b->err, ELI_ERR_INVALID_ARG, "layer %d shares KV but no earlier %s layer owns K/V", il,
                            l->is_swa ? "sliding-window" : "full-attention");
        const eli_layer *src = &m->layers[l->kv_source];
        if (src->head_dim != l->head_dim || src->n_head_kv != l->n_head_kv)
            return eli_fail(b->err, ELI_ERR_INVALID_ARG,
                            "layer %d (KV-shared) has head_dim %d / %d KV heads but its source layer %d has %d / %d", il,
                            l->head_dim, l->n_head_kv, l->kv_source, src->head_dim, src->n_head_kv);
        if (find_tensor(b, NAME("attn_k.weight"), 0))
            return eli_fail(b->err, ELI_ERR_INVALID_ARG, "layer %d is KV-shared but has tensor '%s'", il, nm);
    }
    const eli_gguf_tensor *los = find_tensor(b, NAME("layer_output_scale.weight"), m->is_assistant);
    if (!los && m->is_assistant) return ELI_ERR_INVALID_ARG;
    l->out_scale = 1.0f;
    if (los) {
        const float *v;
        if ((rc = bind_vector(b, &v, nm, 1, 1))) return rc;
        l->out_scale = v[0];
        l->has_out_scale = 1;
    }

    if ((rc = bind_vector(b, &l->ffn_norm, NAME("ffn_norm.weight"), 1, E))) return rc;
    if ((rc = bind_vector(b, &l->post_ffw_norm, NAME("post_ffw_norm.weight"), 1, E))) return rc;
    if ((rc = bind_matrix(b, &l->ffn_gate, NAME("ffn_gate.weight"), 1, E, l->n_ff, 1))) return rc;
    if ((rc = bind_matrix(b, &l->ffn_up, NAME("ffn_up.weight"), 1, E, l->n_ff, 1))) return rc;
    if ((rc = bind_matrix(b, &l->ffn_down, NAME("ffn_down.weight"), 1, l->n_ff, E, 1))) return rc;

    l->is_moe = find_tensor(b, NAME("ffn_gate_inp.weight"), 0) != NULL;
    if (l->is_moe && m->is_assistant)
        return eli_fail(b->err, ELI_ERR_INVALID_ARG, "assistant layer %d has MoE tensors, which a drafter cannot have", il);
    if (l->is_moe) {
        const int64_t X = hp->n_expert, F = hp->n_ff_exp;
        if (X < 1 || hp->n_expert_used < 1 || F < 1)
            return eli_fail(b->err, ELI_ERR_INVALID_ARG,
                            "layer %d is MoE but expert_count/expert_used_count/expert_feed_forward_length are %d/%d/%d",
                            il, hp->n_expert, hp->n_expert_used, hp->n_ff_exp);
        if ((rc = bind_matrix(b, &l->gate_inp, NAME("ffn_gate_inp.weight"), 1, E, X, 1))) return rc;
        if ((rc = bind_vector(b, &l->gate_inp_scale, NAME("ffn_gate_inp.scale"), 1, E))) return rc;
        if ((rc = bind_vector(b, &l->pre_ffw_norm_2, NAME("pre_ffw_norm_2.weight"), 1, E))) return rc;
        if ((rc = bind_vector(b, &l->post_ffw_norm_1, NAME("post_ffw_norm_1.weight"), 1, E))) return rc;
        if ((rc = bind_vector(b, &l->post_ffw_norm_2, NAME("post_ffw_norm_2.weight"), 1, E))) return rc;
        if ((rc = bind_matrix(b, &l->gate_up_exps, NAME("ffn_gate_up_exps.weight"), 0, E, 2 * F, X))) return rc;
        if (!l->gate_up_exps.data) {
            if ((rc = bind_matrix(b, &l->gate_exps, NAME("ffn_gate_exps.weight"), 1, E, F, X))) return rc;
            if ((rc = bind_matrix(b, &l->up_exps, NAME("ffn_up_exps.weight"), 1, E, F, X))) return rc;
        }
        if ((rc = bind_matrix(b, &l->down_exps, NAME("ffn_down_exps.weight"), 1, F, E, X))) return rc;
        if ((rc = bind_vector(b, &l->down_exps_scale, NAME("ffn_down_exps.scale"), 0, X))) return rc;
    }

    if (hp->n_pl) {
        if ((rc = bind_matrix(b, &l->inp_gate, NAME("inp_gate.weight"), 1, E, hp->n_pl, 1))) return rc;
        if ((rc = bind_matrix(b, &l->proj, NAME("proj.weight"), 1, hp->n_pl, E, 1))) return rc;
        if ((rc = bind_vector(b, &l->ple_post_norm, NAME("post_norm.weight"), 1, E))) return rc;
    }
#undef NAME
    return ELI_OK;
}

int eli_model_ple_row(const eli_model *m, int64_t r, void *raw, float *out, eli_error *err) {
    const eli_weight *w = &m->ple_token_embd;
    const int e = eli_gguf_read_at(m->file, (const uint8_t *)w->data + (size_t)r * w->row_bytes, w->row_bytes, raw);
    if (e)
        return eli_fail(err, ELI_ERR_INVALID_ARG, "reading row %lld of '%s' from the model file: %s", (long long)r, w->name,
                        strerror(e));
    eli_dequantize_row(w->type, raw, out, w->cols);
    return ELI_OK;
}

/* The assistant's optional centroid-masked head: masked_embd_centroids.weight {n_embd, n_centroids} and
 * masked_embd_ordering {n_vocab} (i32 or i64), a permutation of the vocabulary. */
static int bind_masked_head(binder *b) {
    eli_model *m = b->m;
    const eli_hparams *hp = &m->hp;
    const eli_gguf_tensor *c = find_tensor(b, "masked_embd_centroids.weight", 0);
    const eli_gguf_tensor *o = find_tensor(b, "masked_embd_ordering", 0);
    if (!c && !o) return ELI_OK;
    if (!c || !o)
        return eli_fail(b->err, ELI_ERR_INVALID_ARG, "tensor '%s' needs '%s'", c ? c->name : o->name,
                        c ? "masked_embd_ordering" : "masked_embd_centroids.weight");
    const int64_t nc = c->ne[1];
    if (nc < 1 || nc > hp->n_vocab || hp->n_vocab % nc)
        return eli_fail(b->err, ELI_ERR_INVALID_ARG, "'%s' has %lld centroids, which do not divide the vocabulary %d", c->name,
                        (long long)nc, hp->n_vocab);
    int rc = bind_matrix(b, &m->masked_centroids, c->name, 1, hp->n_embd, nc, 1);
    if (!rc) rc = check_shape(b, o, hp->n_vocab, 1, 1);
    if (rc) return rc;
    if (o->type != ELI_TYPE_I32 && o->type != ELI_TYPE_I64)
        return eli_fail(b->err, ELI_ERR_INVALID_ARG, "tensor '%s' has type %s, expected i32 or i64", o->name,
                        eli_type_name(o->type));
    m->n_centroids = (int)nc;
    m->centroid_top_k = nc < 32 ? (int)nc : 32;
    char key[128];
    snprintf(key, sizeof key, "%s.centroid_intermediate_top_k", m->arch_name);
    uint32_t k;
    rc = eli_gguf_get_u32(m->file, key, &k, b->err);
    if (rc < 0) return rc;
    if (rc == 1) {
        if (k < 1 || k > (uint32_t)nc)
            return eli_fail(b->err, ELI_ERR_INVALID_ARG, "%s = %u is outside [1, %lld]", key, k, (long long)nc);
        m->centroid_top_k = (int)k;
    }
    int32_t *ord = malloc((size_t)hp->n_vocab * sizeof *ord);
    char *seen = calloc((size_t)hp->n_vocab, 1);
    void **grown = realloc(m->owned, (m->n_owned + 1) * sizeof *grown);
    if (grown) m->owned = grown;
    if (!ord || !seen || !grown) {
        free(ord), free(seen);
        return eli_fail(b->err, ELI_ERR_OOM, "out of memory for '%s'", o->name);
    }
    m->owned[m->n_owned++] = ord;
    for (int64_t i = 0; i < hp->n_vocab; i++) {
        int64_t v;
        if (o->type == ELI_TYPE_I32) {
            int32_t x;
            memcpy(&x, (const uint8_t *)o->data + 4 * i, 4);
            v = x;
        } else {
            memcpy(&v, (const uint8_t *)o->data + 8 * i, 8);
        }
        if (v < 0 || v >= hp->n_vocab || seen[v]) {
            free(seen);
            return eli_fail(b->err, ELI_ERR_INVALID_ARG, "'%s'[%lld] = %lld: not a permutation of the vocabulary", o->name,
                            (long long)i, (long long)v);
        }
        seen[v] = 1;
        ord[i] = (int32_t)v;
    }
    free(seen);
    m->masked_ordering = ord;
    return ELI_OK;
}

eli_model *eli_model_from_gguf(eli_gguf_file *f, eli_error *err) {
    eli_gguf_str arch;
    int rc = eli_gguf_get_str(f, "general.architecture", &arch, err);
    if (rc < 0) return NULL;
    if (rc == 0) {
        eli_fail(err, ELI_ERR_INVALID_ARG, "missing key 'general.architecture'");
        return NULL;
    }
    const int assistant = eli_gguf_str_eq(arch, "gemma4-assistant");
    if (!eli_gguf_str_eq(arch, "gemma4") && !assistant) {
        eli_fail(err, ELI_ERR_INVALID_ARG, "unsupported architecture '%.*s'", (int)(arch.len > 64 ? 64 : arch.len), arch.ptr);
        return NULL;
    }
    eli_model *m = calloc(1, sizeof *m);
    if (!m) {
        eli_fail(err, ELI_ERR_OOM, "out of memory");
        return NULL;
    }
    m->file = f;
    m->is_assistant = assistant;
    m->arch_name = strdup(assistant ? "gemma4-assistant" : "gemma4");
    int *n_ff = NULL, *n_head = NULL, *n_kv = NULL, *swa = NULL;
    binder b = {m, err};
    eli_hparams *hp = &m->hp;
    if (!m->arch_name) {
        eli_fail(err, ELI_ERR_OOM, "out of memory");
        goto fail;
    }
    if (load_hparams(m, err, &n_ff, &n_head, &n_kv, &swa)) goto fail;
    const eli_gguf_tensor *ple_t = eli_gguf_find_tensor(f, "per_layer_token_embd.weight");
    /* read one row per token with pread (eli_model_ple_row): no readahead around the rows */
    if (ple_t) eli_gguf_advise_random(f, ple_t->data, (size_t)ple_t->nbytes);

    /* The vocabulary size comes from the embedding table. */
    const eli_gguf_tensor *te = find_tensor(&b, "token_embd.weight", 1);
    if (!te) goto fail;
    if (te->ne[1] < 1 || te->ne[1] > MAX_VOCAB) {
        eli_fail(err, ELI_ERR_INVALID_ARG, "tensor 'token_embd.weight' has %lld rows, not a plausible vocabulary",
                 (long long)te->ne[1]);
        goto fail;
    }
    hp->n_vocab = (int)te->ne[1];
    if (bind_matrix(&b, &m->token_embd, "token_embd.weight", 1, hp->n_embd, hp->n_vocab, 1)) goto fail;
    if (bind_matrix(&b, &m->output, "output.weight", 0, hp->n_embd, hp->n_vocab, 1)) goto fail;
    m->tied_output = m->output.data == NULL;
    if (m->tied_output) m->output = m->token_embd;
    if (bind_vector(&b, &m->output_norm, "output_norm.weight", 1, hp->n_embd)) goto fail;
    if (bind_vector(&b, &m->rope_freqs, "rope_freqs.weight", 0, hp->n_rot_full / 2)) goto fail;
    if (hp->n_pl) {
        const int64_t W = (int64_t)hp->n_pl * hp->n_layer;
        if (bind_matrix(&b, &m->ple_token_embd, "per_layer_token_embd.weight", 1, W, hp->n_vocab, 1)) goto fail;
        if (bind_matrix(&b, &m->ple_model_proj, "per_layer_model_proj.weight", 1, hp->n_embd, W, 1)) goto fail;
        if (bind_vector(&b, &m->ple_proj_norm, "per_layer_proj_norm.weight", 1, hp->n_pl)) goto fail;
    }
    if (m->is_assistant) {
        if (bind_matrix(&b, &m->nextn_pre_proj, "nextn.pre_projection.weight", 1, 2 * (int64_t)hp->n_embd_out, hp->n_embd, 1))
            goto fail;
        if (bind_matrix(&b, &m->nextn_post_proj, "nextn.post_projection.weight", 1, hp->n_embd, hp->n_embd_out, 1))
            goto fail;
    }
    if (m->is_assistant && bind_masked_head(&b)) goto fail;
    m->layers = calloc((size_t)hp->n_layer, sizeof *m->layers);
    if (!m->layers) {
        eli_fail(err, ELI_ERR_OOM, "out of memory");
        goto fail;
    }
    for (int il = 0; il < hp->n_layer; il++)
        if (bind_layer(&b, il, n_ff, n_head, n_kv, swa)) goto fail;
    for (uint64_t i = 0; i < eli_gguf_n_tensors(f); i++) m->weight_bytes += eli_gguf_tensor_at(f, i)->nbytes;
    /* binding read the mapping: zeros, if the file was cut meanwhile (gguf.h) */
    if (eli_gguf_check_mapping(f, err)) goto fail;
    free(n_ff), free(n_head), free(n_kv), free(swa);
    return m;
fail:
    free(n_ff), free(n_head), free(n_kv), free(swa);
    m->file = NULL; /* the caller keeps the file on failure */
    eli_model_free(m);
    return NULL;
}

eli_model *eli_model_load(const char *path, eli_error *err) {
    eli_gguf_file *f = eli_gguf_open(path, err);
    if (!f) return NULL;
    eli_model *m = eli_model_from_gguf(f, err);
    if (!m) {
        eli_error_prefix(err, "%s", path);
        eli_gguf_close(f);
    }
    return m;
}

int eli_model_bind_assistant(eli_model *draft, const eli_model *target, eli_error *err) {
    const eli_hparams *dh = &draft->hp, *th = &target->hp;
    if (!draft->is_assistant) return eli_fail(err, ELI_ERR_INVALID_ARG, "drafter is not a gemma4-assistant model");
    if (target->is_assistant) return eli_fail(err, ELI_ERR_INVALID_ARG, "the target is itself an assistant model");
    if (dh->n_vocab != th->n_vocab)
        return eli_fail(err, ELI_ERR_INVALID_ARG, "drafter vocabulary %d != target vocabulary %d", dh->n_vocab, th->n_vocab);
    if (dh->n_embd_out != th->n_embd)
        return eli_fail(err, ELI_ERR_INVALID_ARG, "drafter embedding_length_out %d != target embedding_length %d",
                        dh->n_embd_out, th->n_embd);
    for (int il = 0; il < dh->n_layer; il++) {
        eli_layer *l = &draft->layers[il];
        /* the donor: the target's last layer of the same type, followed to the layer that owns its K/V */
        int src = -1;
        for (int j = th->n_layer - 1; j >= 0 && src < 0; j--)
            if (target->layers[j].is_swa == l->is_swa) src = target->layers[j].kv_source;
        if (src < 0)
            return eli_fail(err, ELI_ERR_INVALID_ARG, "drafter layer %d is %s but the target has no such layer", il,
                            l->is_swa ? "sliding-window" : "full-attention");
        const eli_layer *t = &target->layers[src];
        if (t->head_dim != l->head_dim || t->n_head_kv != l->n_head_kv)
            return eli_fail(err, ELI_ERR_INVALID_ARG,
                            "drafter layer %d has head_dim %d / %d KV heads but target layer %d has %d / %d", il,
                            l->head_dim, l->n_head_kv, src, t->head_dim, t->n_head_kv);
        l->kv_source = src;
    }
    return ELI_OK;
}

void eli_model_free(eli_model *m) {
    if (!m) return;
    for (size_t i = 0; i < m->n_owned; i++) free(m->owned[i]);
    free(m->owned);
    free(m->layers);
    free(m->arch_name);
    eli_gguf_close(m->file);
    free(m);
}
