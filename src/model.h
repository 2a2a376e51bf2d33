/* Gemma 4 model: hyperparameters from the gemma4.* GGUF keys and tensors bound with shape checks.
 * The weights are bound in the file mapping; an executor's prepare (exec.h) may then move the matrices
 * into memory of its own and layouts of its own (the CPU's: cpu/pack.h). Small 1-D tensors (norms,
 * scales, rope factors) are converted to f32 arrays owned by the model. See ../shared/spec/gemma4.md
 * sections 1, 2 and 4. Nothing here knows about kernels or devices. */
#ifndef ELI_MODEL_H
#define ELI_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "gguf.h"

/* A matrix (in the file mapping, or copied out of it by an executor): `rows` rows of `cols` values of
 * `type` (ggml layout {cols, rows[, n_mat]}). */
typedef struct eli_weight {
    const void *data; /* NULL when the tensor is absent */
    uint32_t type;
    int64_t cols, rows, n_mat; /* n_mat > 1 for stacked expert matrices */
    size_t row_bytes;
    const char *name;
    const void *packed; /* an executor's copy in a layout of its own (the CPU's interleaved rows, cpu/pack.h),
                         * or NULL: computed from data */
    size_t packed_row_bytes; /* the copy's bytes per row */
} eli_weight;

typedef struct eli_layer {
    /* geometry */
    int is_swa;
    int n_head, n_head_kv, head_dim, n_rot;
    int n_ff;
    float rope_base;
    int has_kv;    /* owns K/V (otherwise reads kv_source's cache) */
    int kv_source; /* layer whose cache this layer reads (itself when has_kv) */
    int k_eq_v;    /* has_kv and no attn_v: V is the raw K projection */
    int is_moe;

    /* attention */
    const float *attn_norm, *q_norm, *k_norm, *post_attn_norm;
    eli_weight wq, wk, wv, wo;
    float out_scale; /* layer_output_scale, 1 when absent */
    int has_out_scale;

    /* dense FFN (the shared expert on MoE layers) */
    const float *ffn_norm, *post_ffw_norm;
    eli_weight ffn_gate, ffn_up, ffn_down;

    /* MoE */
    const float *gate_inp_scale, *pre_ffw_norm_2, *post_ffw_norm_1, *post_ffw_norm_2, *down_exps_scale;
    eli_weight gate_inp;                   /* {n_embd, n_expert} */
    eli_weight gate_up_exps;               /* fused {n_embd, 2*n_ff_exp, n_expert}, or absent */
    eli_weight gate_exps, up_exps;         /* split layout */
    eli_weight down_exps;                  /* {n_ff_exp, n_embd, n_expert} */

    /* per-layer embedding injection */
    eli_weight inp_gate, proj;
    const float *ple_post_norm;
} eli_layer;

typedef struct eli_hparams {
    int n_layer, n_embd, n_vocab, n_ctx_train;
    int head_dim_full, head_dim_swa, n_rot_full, n_rot_swa;
    int n_swa;
    int n_shared_kv;       /* last n layers have no K/V */
    int n_layer_kv;        /* layers that own K/V = n_layer - n_shared_kv */
    int n_pl;              /* per-layer embedding width (0 = no PLE) */
    int n_expert, n_expert_used, n_ff_exp;
    float rope_base_full, rope_base_swa;
    float rms_eps;
    float final_softcap;   /* 0 = none */
    int n_embd_out;        /* assistant: the target's n_embd (backbone width); 0 otherwise */
} eli_hparams;

typedef struct eli_model {
    eli_gguf_file *file;
    char *arch_name;
    int is_assistant; /* gemma4-assistant: an MTP drafter (spec section 6) */
    eli_hparams hp;
    eli_layer *layers;
    eli_weight token_embd, output; /* output == token_embd when tied */
    int tied_output;
    const float *output_norm;
    const float *rope_freqs; /* {n_rot_full/2} or NULL */
    eli_weight ple_token_embd, ple_model_proj;
    const float *ple_proj_norm;
    eli_weight nextn_pre_proj, nextn_post_proj; /* assistant: {2*n_embd_out, n_embd}, {n_embd, n_embd_out} */
    /* assistant's centroid-masked head (E2B/E4B drafters; HF use_ordered_embeddings): the vocabulary in
     * n_centroids equal clusters; only the tokens of the centroid_top_k best clusters get logits */
    eli_weight masked_centroids;   /* {n_embd, n_centroids}, or absent */
    int32_t *masked_ordering;      /* [n_vocab]: cluster c holds ordering[c*V/n_c .. (c+1)*V/n_c) */
    int n_centroids, centroid_top_k;
    void **owned; /* copies of small tensors (f32 vectors, the masked ordering), freed with the model */
    size_t n_owned;
    uint64_t weight_bytes; /* bytes of all tensor data in the file */
} eli_model;

/* Loads a gemma4 or gemma4-assistant GGUF (the file is opened and mapped; the model owns it): binds the
 * tensors, reads no weight (an executor's prepare does, exec.h). */
eli_model *eli_model_load(const char *path, eli_error *err);
/* Binds a model over an already opened file; takes ownership of f on success. */
eli_model *eli_model_from_gguf(eli_gguf_file *f, eli_error *err);
void eli_model_free(eli_model *m);
/* Checks an assistant model (an MTP drafter) against its target (vocabulary, backbone width, layer
 * geometry) and points each of its layers at the target layer whose cache it reads. Once, after loading. */
int eli_model_bind_assistant(eli_model *draft, const eli_model *target, eli_error *err);
/* Per-layer-embedding row r, dequantized into out (n_pl * n_layer floats). Its bytes are read from the
 * file (eli_gguf_read_at: pread into raw, ple_token_embd.row_bytes bytes) rather than through the mapping, so
 * the table never becomes resident in this process however many distinct tokens a conversation sees
 * (a mapped read would keep every row it touched, and the pages around it that Linux maps on a fault).
 * ELI_ERR_INVALID_ARG when the read fails (r is the caller's valid token id). */
int eli_model_ple_row(const eli_model *m, int64_t r, void *raw, float *out, eli_error *err);

#endif
