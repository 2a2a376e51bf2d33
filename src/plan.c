/* Memory planner (plan.h). */
#include "plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec.h"
#include "kv_types.h"
#include "os.h"
#include "quants.h"

#define MIB (1024ull * 1024ull)

eli_plan_params eli_plan_default_params(void) {
    eli_plan_params p = {4096, 512, ELI_TYPE_F16, ELI_TYPE_F16, 0, 1};
    return p;
}

/* Tokenizer heap without measuring: per token its text twice (text + piece), offsets, type/flag bytes and
 * hash slots, about 48 bytes plus the text. */
static uint64_t estimate_tokenizer(int64_t n_vocab, uint64_t text_bytes) { return (uint64_t)n_vocab * 48 + 2 * text_bytes; }

/* Everything but the weights, from the model struct (geometry only): the sequence's part is what the
 * default executor says it allocates (exec.h plan). */
static int plan_core(const eli_model *m, const eli_plan_params *pp, eli_plan *o, eli_error *err) {
    eli_plan_params p = pp ? *pp : eli_plan_default_params();
    const eli_hparams *hp = &m->hp;
    eli_seq_params sp = eli_seq_default();
    sp.n_ctx = p.n_ctx > 0 ? p.n_ctx : 4096;
    if (sp.n_ctx > hp->n_ctx_train) sp.n_ctx = hp->n_ctx_train;
    sp.n_ubatch = p.n_ubatch > 0 ? p.n_ubatch : 512;
    if (sp.n_ubatch > sp.n_ctx) sp.n_ubatch = sp.n_ctx;
    sp.kv_type_k = p.kv_type_k;
    sp.kv_type_v = p.kv_type_v;
    sp.n_threads = p.n_threads > 0 ? p.n_threads : eli_os_cpu_count();
    if (p.n_ckpt < 0 || p.n_ckpt > 64) return eli_fail(err, ELI_ERR_INVALID_ARG, "%d checkpoints: expected 0..64", p.n_ckpt);
    sp.n_ckpt = p.n_ckpt;
    eli_seq_memory mem;
    int rc = eli_exec_default()->plan(m, &sp, &mem, err);
    if (rc) return rc;
    o->n_ctx = sp.n_ctx;
    o->n_ubatch = sp.n_ubatch;
    o->n_threads = sp.n_threads;
    o->n_ckpt = sp.n_ckpt;
    o->swa_cells = hp->n_swa + sp.n_ubatch < sp.n_ctx ? hp->n_swa + sp.n_ubatch : sp.n_ctx;
    o->kv_swa = mem.kv_swa;
    o->kv_full = mem.kv_full;
    o->kv_ckpt = mem.kv_ckpt;
    o->scratch = mem.scratch;
    /* eli_gen: tokens (capacity doubles from 256), logits + hidden, sampler candidates/probabilities */
    uint64_t cap = 256;
    while ((int64_t)cap < sp.n_ctx) cap *= 2;
    o->session = cap * 4 + (uint64_t)hp->n_vocab * (4 + 12) + (uint64_t)hp->n_embd * 4;
    o->baseline = 4 * MIB + (uint64_t)sp.n_threads * 64 * 1024;
    return ELI_OK;
}

static void finish(eli_plan *o) {
    o->peak_rss = o->baseline + o->weights_resident + o->kv_swa + o->kv_full + o->kv_ckpt + o->scratch +
                  o->session + o->tokenizer;
}

int eli_plan_model(const eli_model *m, const eli_plan_params *p, uint64_t tokenizer_bytes, eli_plan *out, eli_error *err) {
    memset(out, 0, sizeof *out);
    int rc = plan_core(m, p, out, err);
    if (rc) return rc;
    out->file_bytes = eli_gguf_file_size(m->file);
    const eli_weight *pl = &m->ple_token_embd;
    out->ple_table = pl->data ? (uint64_t)pl->rows * pl->row_bytes : 0;
    out->weights_resident = out->file_bytes - out->ple_table;
    if (!tokenizer_bytes) {
        uint64_t text = 0;
        const eli_gguf_value *v = eli_gguf_find(m->file, "tokenizer.ggml.tokens");
        if (v && v->type == GGUF_VT_ARRAY && v->v.arr.strs)
            for (uint64_t i = 0; i < v->v.arr.n; i++) text += v->v.arr.strs[i].len;
        tokenizer_bytes = estimate_tokenizer(m->hp.n_vocab, text);
    }
    out->tokenizer = tokenizer_bytes;
    finish(out);
    return ELI_OK;
}

/* ---- the true geometries (spec section 4) ---- */

typedef struct {
    const char *name;
    int L, E, H, kv_swa, kv_full, ff, wide_from, ff_wide, swa, period, shared, pl, ctx, k_eq_v, n_exp, n_exp_used, ff_exp;
} arch_geom;

static const arch_geom ARCHS[] = {
    {"e2b", 35, 1536, 8, 1, 1, 6144, 15, 12288, 512, 5, 20, 256, 131072, 0, 0, 0, 0},
    {"e4b", 42, 2560, 8, 2, 2, 10240, -1, 0, 512, 6, 18, 256, 131072, 0, 0, 0, 0},
    {"12b", 48, 3840, 16, 8, 1, 15360, -1, 0, 1024, 6, 0, 0, 262144, 1, 0, 0, 0},
    {"26b-a4b", 30, 2816, 16, 8, 2, 2112, -1, 0, 1024, 6, 0, 0, 262144, 1, 128, 8, 704},
    {"31b", 60, 5376, 32, 16, 4, 21504, -1, 0, 1024, 6, 0, 0, 262144, 1, 0, 0, 0},
};

enum { W_F16, W_Q8_0, W_Q4_0, W_Q4_K_M };

/* llama.cpp's use_more_bits: the first and last eighth and every third layer in between */
static int more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

typedef enum { T_MAT, T_TOKEN_EMBD, T_PLE_TABLE, T_PLE_PROJ, T_ROUTER, T_ATTN_V, T_FFN_DOWN } tkind;

static uint32_t pick_type(int wt, tkind k, int64_t cols, int i, int n) {
    if (k == T_PLE_PROJ || k == T_ROUTER) return ELI_TYPE_F32;
    switch (wt) {
    case W_F16: return ELI_TYPE_F16;
    case W_Q8_0: return ELI_TYPE_Q8_0;
    case W_Q4_0:
        if (k == T_TOKEN_EMBD) return ELI_TYPE_Q6_K;
        if (k == T_PLE_TABLE) return ELI_TYPE_Q8_0;
        return ELI_TYPE_Q4_0;
    default: {
        if (k == T_TOKEN_EMBD) return cols % 256 ? ELI_TYPE_Q8_0 : ELI_TYPE_Q6_K;
        if (k == T_PLE_TABLE) return ELI_TYPE_Q8_0;
        int hi = (k == T_ATTN_V || k == T_FFN_DOWN) && more_bits(i, n);
        if (hi) return cols % 256 ? ELI_TYPE_Q8_0 : ELI_TYPE_Q6_K;
        return cols % 256 ? ELI_TYPE_Q5_0 : ELI_TYPE_Q4_K;
    }
    }
}

static uint64_t set_w(eli_weight *w, uint32_t type, int64_t cols, int64_t rows, int64_t n_mat) {
    w->type = type, w->cols = cols, w->rows = rows, w->n_mat = n_mat;
    w->row_bytes = eli_row_size(type, cols);
    return (uint64_t)w->row_bytes * (uint64_t)rows * (uint64_t)n_mat;
}

/* Fills m (hp + layers with typed weight shapes, no data) for a geometry; returns the tensor bytes. */
static uint64_t synth_model(const arch_geom *g, int wt, eli_model *m, eli_layer *layers, uint64_t *ple_table) {
    memset(m, 0, sizeof *m);
    eli_hparams *hp = &m->hp;
    hp->n_layer = g->L, hp->n_embd = g->E, hp->n_vocab = 262144, hp->n_ctx_train = g->ctx;
    hp->head_dim_full = 512, hp->head_dim_swa = 256, hp->n_rot_full = 512, hp->n_rot_swa = 256;
    hp->n_swa = g->swa, hp->n_shared_kv = g->shared, hp->n_layer_kv = g->L - g->shared, hp->n_pl = g->pl;
    hp->n_expert = g->n_exp, hp->n_expert_used = g->n_exp_used, hp->n_ff_exp = g->ff_exp;
    m->layers = layers;
    const int64_t E = g->E, V = hp->n_vocab, W = (int64_t)g->pl * g->L;
    uint64_t bytes = 0, f32 = 0;
    bytes += set_w(&m->token_embd, pick_type(wt, T_TOKEN_EMBD, E, 0, 1), E, V, 1);
    m->output = m->token_embd;
    m->tied_output = 1;
    f32 += E + 256 + (uint64_t)g->pl; /* output_norm, rope_freqs, per_layer_proj_norm */
    *ple_table = 0;
    if (g->pl) {
        *ple_table = set_w(&m->ple_token_embd, pick_type(wt, T_PLE_TABLE, W, 0, 1), W, V, 1);
        bytes += *ple_table;
        bytes += set_w(&m->ple_model_proj, pick_type(wt, T_PLE_PROJ, E, 0, 1), E, W, 1);
    }
    int n_v = 0, i_v = 0;
    for (int il = 0; il < g->L; il++) {
        const int swa = il % g->period != g->period - 1;
        if (il < g->L - g->shared && (swa || !g->k_eq_v)) n_v++;
    }
    for (int il = 0; il < g->L; il++) {
        eli_layer *l = &layers[il];
        memset(l, 0, sizeof *l);
        l->is_swa = il % g->period != g->period - 1;
        l->n_head = g->H;
        l->n_head_kv = l->is_swa ? g->kv_swa : g->kv_full;
        l->head_dim = l->is_swa ? 256 : 512;
        l->n_rot = l->head_dim;
        l->n_ff = g->wide_from >= 0 && il >= g->wide_from ? g->ff_wide : g->ff;
        l->has_kv = il < hp->n_layer_kv;
        l->kv_source = il;
        l->is_moe = g->n_exp > 0;
        const int64_t dq = (int64_t)l->head_dim * l->n_head, dkv = (int64_t)l->head_dim * l->n_head_kv;
        bytes += set_w(&l->wq, pick_type(wt, T_MAT, E, il, g->L), E, dq, 1);
        bytes += set_w(&l->wo, pick_type(wt, T_MAT, dq, il, g->L), dq, E, 1);
        f32 += 4 * (uint64_t)E + (uint64_t)l->head_dim + 1; /* attn/post-attn/ffn/post-ffw norms, q_norm, out scale */
        if (l->has_kv) {
            bytes += set_w(&l->wk, pick_type(wt, T_MAT, E, il, g->L), E, dkv, 1);
            if (l->is_swa || !g->k_eq_v) bytes += set_w(&l->wv, pick_type(wt, T_ATTN_V, E, i_v++, n_v), E, dkv, 1);
            else l->k_eq_v = 1;
            f32 += (uint64_t)l->head_dim;
        }
        bytes += set_w(&l->ffn_gate, pick_type(wt, T_MAT, E, il, g->L), E, l->n_ff, 1);
        bytes += set_w(&l->ffn_up, pick_type(wt, T_MAT, E, il, g->L), E, l->n_ff, 1);
        bytes += set_w(&l->ffn_down, pick_type(wt, T_FFN_DOWN, l->n_ff, il, g->L), l->n_ff, E, 1);
        if (l->is_moe) {
            const int64_t X = g->n_exp, F = g->ff_exp;
            bytes += set_w(&l->gate_inp, pick_type(wt, T_ROUTER, E, il, g->L), E, X, 1);
            bytes += set_w(&l->gate_up_exps, pick_type(wt, T_MAT, E, il, g->L), E, 2 * F, X);
            bytes += set_w(&l->down_exps, pick_type(wt, T_FFN_DOWN, F, il, g->L), F, E, X);
            f32 += 4 * (uint64_t)E + (uint64_t)X;
        }
        if (g->pl) {
            bytes += set_w(&l->inp_gate, pick_type(wt, T_MAT, E, il, g->L), E, g->pl, 1);
            bytes += set_w(&l->proj, pick_type(wt, T_MAT, g->pl, il, g->L), g->pl, E, 1);
            f32 += (uint64_t)E;
        }
    }
    /* KV-shared layers read the last owning layer of their kind */
    for (int il = hp->n_layer_kv; il < g->L; il++)
        for (int j = hp->n_layer_kv - 1; j >= 0; j--)
            if (layers[j].is_swa == layers[il].is_swa) {
                layers[il].kv_source = j;
                break;
            }
    return bytes + 4 * f32;
}

static int parse_arch(const char *arch, const char *wtype, const arch_geom **g, int *wt, eli_error *err) {
    *g = NULL;
    for (size_t i = 0; arch && i < sizeof ARCHS / sizeof ARCHS[0]; i++)
        if (!strcmp(arch, ARCHS[i].name)) *g = &ARCHS[i];
    if (!*g) return eli_fail(err, ELI_ERR_INVALID_ARG, "unknown arch '%s' (e2b, e4b, 12b, 31b, 26b-a4b)", arch ? arch : "");
    static const char *names[] = {"f16", "q8_0", "q4_0", "q4_k_m"};
    for (int i = 0; i < 4; i++)
        if (wtype && !strcmp(wtype, names[i])) {
            *wt = i;
            return ELI_OK;
        }
    return eli_fail(err, ELI_ERR_INVALID_ARG, "unknown weight type '%s' (f16, q8_0, q4_0, q4_k_m)", wtype ? wtype : "");
}

/* The true geometry of an arch as a model struct without a file, its layers in *layers (the caller frees
 * them); *tensors and *ple the bytes of all tensors and of the PLE table. */
static int arch_model(const char *arch, const char *wtype, eli_model *m, eli_layer **layers, uint64_t *tensors,
                      uint64_t *ple, eli_error *err) {
    const arch_geom *g;
    int wt;
    int rc = parse_arch(arch, wtype, &g, &wt, err);
    if (rc) return rc;
    if (!(*layers = calloc((size_t)g->L, sizeof **layers))) return eli_fail(err, ELI_ERR_OOM, "out of memory");
    *tensors = synth_model(g, wt, m, *layers, ple);
    return ELI_OK;
}

int eli_plan_arch(const char *arch, const char *wtype, const eli_plan_params *p, eli_plan *out, eli_error *err) {
    memset(out, 0, sizeof *out);
    eli_model m;
    eli_layer *layers;
    uint64_t tensors = 0, ple = 0;
    int rc = arch_model(arch, wtype, &m, &layers, &tensors, &ple, err);
    if (rc) return rc;
    rc = plan_core(&m, p, out, err);
    if (!rc) {
        /* metadata: the 262144-token vocabulary (text, scores, types) and the merges, about 12 MiB */
        const uint64_t meta = 12 * MIB;
        out->file_bytes = tensors + meta;
        out->ple_table = ple;
        out->weights_resident = out->file_bytes - ple;
        out->tokenizer = estimate_tokenizer(m.hp.n_vocab, (uint64_t)m.hp.n_vocab * 7);
        finish(out);
    }
    free(layers);
    return rc;
}

int64_t eli_plan_fit(const eli_model *m, const char *arch, const char *wtype, const eli_plan_params *pp,
                     uint64_t tokenizer_bytes, uint64_t bytes, eli_error *err) {
    eli_plan_params p = pp ? *pp : eli_plan_default_params();
    eli_plan o;
    p.n_ctx = 1;
    int rc = m ? eli_plan_model(m, &p, tokenizer_bytes, &o, err) : eli_plan_arch(arch, wtype, &p, &o, err);
    if (rc) return -1;
    if (o.peak_rss > bytes) return 0;
    int64_t lo = 1, hi = m ? m->hp.n_ctx_train : 0;
    if (!m) {
        const arch_geom *g;
        int wt;
        parse_arch(arch, wtype, &g, &wt, NULL);
        hi = g->ctx;
    }
    while (lo < hi) { /* largest n with peak(n) <= bytes; peak grows with n */
        int64_t mid = lo + (hi - lo + 1) / 2;
        p.n_ctx = mid;
        rc = m ? eli_plan_model(m, &p, tokenizer_bytes, &o, err) : eli_plan_arch(arch, wtype, &p, &o, err);
        if (rc) return -1;
        if (o.peak_rss <= bytes) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

static void kv_type_bytes(const eli_model *m, uint32_t type, uint64_t *full, uint64_t *swa, uint64_t *elems) {
    *full = *swa = *elems = 0;
    for (int il = 0; il < m->hp.n_layer; il++) {
        const eli_layer *l = &m->layers[il];
        if (!l->has_kv) continue;
        const size_t rb = eli_kv_row_bytes(type, l->n_head_kv, l->head_dim);
        if (!rb) { /* one layer the type cannot hold: the type cannot hold the model */
            *full = *swa = 0;
            return;
        }
        *(l->is_swa ? swa : full) += rb;
        *elems += (uint64_t)l->n_head_kv * (uint64_t)l->head_dim;
    }
}

int eli_plan_kv_type_bytes(const eli_model *m, const char *arch, const char *wtype, uint32_t type, uint64_t *full,
                           uint64_t *swa, uint64_t *elems, eli_error *err) {
    if (m) {
        kv_type_bytes(m, type, full, swa, elems);
        return ELI_OK;
    }
    eli_model sm;
    eli_layer *layers;
    uint64_t tensors = 0, ple = 0;
    int rc = arch_model(arch, wtype, &sm, &layers, &tensors, &ple, err);
    if (rc) return rc;
    kv_type_bytes(&sm, type, full, swa, elems);
    free(layers);
    return ELI_OK;
}

/* ---- measurements ---- */

void eli_plan_ple_resident(const eli_model *m, uint64_t *mapped, uint64_t *cached) {
    const eli_weight *pl = &m->ple_token_embd;
    eli_os_resident(pl->data, pl->data ? (size_t)pl->rows * pl->row_bytes : 0, mapped, cached);
}

static uint64_t status_bytes(const char *key) {
    const long kb = eli_os_proc_kb("/proc/self/status", key);
    return kb > 0 ? (uint64_t)kb * 1024 : 0;
}

uint64_t eli_plan_vm_rss(void) { return status_bytes("VmRSS"); }
uint64_t eli_plan_vm_hwm(void) { return status_bytes("VmHWM"); }
