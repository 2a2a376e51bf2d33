/* Error paths of the Gemma 4 model binder (src/model.c): every problem must be refused with a message that
 * names the key or tensor and says what is wrong, and eli_model_from_gguf() must take ownership of the file
 * on success only (ASan/LSan in `make asan` catch a double close or a leak).
 *
 * Files come from two sources, both rewritten through one edit function (drop / set keys, drop / retype /
 * reshape / add tensors; tests/gguf_writer.h does the writing):
 *  - a tiny synthetic gemma4 model (3 layers: SWA, full, KV-shared SWA; per-layer embeddings), built here;
 *  - the golden e2b-mini-f32.gguf and moe-mini-f32.gguf from shared/golden/models. */
#include <math.h>
#include <stdint.h>
#include <unistd.h>

#include "gguf.h"
#include "gguf_edit.h"
#include "gguf_writer.h"
#include "model.h"
#include "quants.h"
#include "test.h"

/* ---------------------------------------------------------------------------------------------------- */
/* The synthetic model */

typedef struct {
    int n_layer;
    uint8_t swa[4];
    int n_shared; /* last layers without K/V */
    int ple;      /* per-layer embeddings */
} synth_cfg;

#define S_EMBD 256
#define S_VOCAB 8
#define S_HEAD 2
#define S_HD_FULL 64
#define S_HD_SWA 32
#define S_PL 16

static const synth_cfg SYNTH = {3, {1, 0, 1}, 1, 1};

static int synth_nff(int il) { return il == 2 ? 128 : 64; }

static void synth_tensor(gw_file *w, const char *name, uint32_t n_dims, uint64_t ne0, uint64_t ne1, float value) {
    uint64_t ne[4] = {ne0, ne1, 1, 1};
    size_t n = (size_t)(ne0 * ne1);
    float *d = calloc(n, sizeof *d);
    for (size_t i = 0; i < n; i++) d[i] = value;
    gw_tensor(w, name, ELI_TYPE_F32, n_dims, ne, d, n * sizeof *d);
    free(d);
}

static uint8_t *build_synth(const synth_cfg *c, size_t *size) {
    gw_file w;
    gw_init(&w);
    const int L = c->n_layer;
    int32_t nkv[4], nff[4];
    for (int i = 0; i < L; i++) nkv[i] = 1, nff[i] = synth_nff(i);
    gw_kv_str(&w, "general.architecture", "gemma4");
    gw_kv_str(&w, "general.name", "synthetic");
    gw_kv_u32(&w, "gemma4.block_count", (uint32_t)L);
    gw_kv_u32(&w, "gemma4.context_length", 4096);
    gw_kv_u32(&w, "gemma4.embedding_length", S_EMBD);
    gw_kv_u32(&w, "gemma4.attention.head_count", S_HEAD);
    gw_kv_arr_i32(&w, "gemma4.attention.head_count_kv", nkv, (uint64_t)L);
    gw_kv_arr_i32(&w, "gemma4.feed_forward_length", nff, (uint64_t)L);
    gw_kv_arr_bool(&w, "gemma4.attention.sliding_window_pattern", c->swa, (uint64_t)L);
    gw_kv_u32(&w, "gemma4.attention.key_length", S_HD_FULL);
    gw_kv_u32(&w, "gemma4.attention.value_length", S_HD_FULL);
    gw_kv_u32(&w, "gemma4.attention.key_length_swa", S_HD_SWA);
    gw_kv_u32(&w, "gemma4.attention.value_length_swa", S_HD_SWA);
    gw_kv_u32(&w, "gemma4.rope.dimension_count", S_HD_FULL);
    gw_kv_u32(&w, "gemma4.rope.dimension_count_swa", S_HD_SWA);
    gw_kv_f32(&w, "gemma4.rope.freq_base", 1e6f);
    gw_kv_f32(&w, "gemma4.rope.freq_base_swa", 1e4f);
    gw_kv_f32(&w, "gemma4.attention.layer_norm_rms_epsilon", 1e-6f);
    gw_kv_u32(&w, "gemma4.attention.sliding_window", 16);
    gw_kv_u32(&w, "gemma4.attention.shared_kv_layers", (uint32_t)c->n_shared);
    gw_kv_u32(&w, "gemma4.embedding_length_per_layer_input", c->ple ? S_PL : 0);
    gw_kv_f32(&w, "gemma4.final_logit_softcapping", 25.0f);

    synth_tensor(&w, "rope_freqs.weight", 1, S_HD_FULL / 2, 1, 1.0f);
    synth_tensor(&w, "token_embd.weight", 2, S_EMBD, S_VOCAB, 0.01f);
    if (c->ple) {
        synth_tensor(&w, "per_layer_token_embd.weight", 2, (uint64_t)S_PL * L, S_VOCAB, 0.01f);
        synth_tensor(&w, "per_layer_model_proj.weight", 2, S_EMBD, (uint64_t)S_PL * L, 0.01f);
        synth_tensor(&w, "per_layer_proj_norm.weight", 1, S_PL, 1, 1.0f);
    }
    synth_tensor(&w, "output_norm.weight", 1, S_EMBD, 1, 1.0f);
    char nm[64];
#define T(suffix, nd, a, b, v) (snprintf(nm, sizeof nm, "blk.%d.%s", il, suffix), synth_tensor(&w, nm, nd, a, b, v))
    for (int il = 0; il < L; il++) {
        const uint64_t hd = c->swa[il] ? S_HD_SWA : S_HD_FULL, dq = hd * S_HEAD, dkv = hd;
        const uint64_t ff = (uint64_t)synth_nff(il);
        T("attn_norm.weight", 1, S_EMBD, 1, 1.0f);
        T("attn_q.weight", 2, S_EMBD, dq, 0.0f);
        T("attn_q_norm.weight", 1, hd, 1, 1.0f);
        if (il < L - c->n_shared) {
            T("attn_k.weight", 2, S_EMBD, dkv, 0.0f);
            T("attn_v.weight", 2, S_EMBD, dkv, 0.0f);
            T("attn_k_norm.weight", 1, hd, 1, 1.0f);
        }
        T("attn_output.weight", 2, dq, S_EMBD, 0.0f);
        T("post_attention_norm.weight", 1, S_EMBD, 1, 1.0f);
        T("layer_output_scale.weight", 1, 1, 1, 0.5f + 0.125f * (float)il);
        T("ffn_norm.weight", 1, S_EMBD, 1, 1.0f);
        T("ffn_gate.weight", 2, S_EMBD, ff, 0.0f);
        T("ffn_up.weight", 2, S_EMBD, ff, 0.0f);
        T("ffn_down.weight", 2, ff, S_EMBD, 0.0f);
        T("post_ffw_norm.weight", 1, S_EMBD, 1, 1.0f);
        if (c->ple) {
            T("inp_gate.weight", 2, S_EMBD, S_PL, 0.0f);
            T("proj.weight", 2, S_PL, S_EMBD, 0.0f);
            T("post_norm.weight", 1, S_EMBD, 1, 1.0f);
        }
    }
#undef T
    uint8_t *buf = gw_finish(&w, size);
    gw_free(&w);
    return buf;
}

/* ---------------------------------------------------------------------------------------------------- */
/* Harness */

typedef struct {
    uint8_t *buf;
    eli_gguf_file *f;
} opened;

static opened open_edited(const eli_gguf_file *src, const edit *e, const char *what) {
    opened o = {0};
    size_t size;
    o.buf = rewrite(src, e, &size);
    eli_error err = {0};
    o.f = eli_gguf_open_memory(o.buf, size, &err);
    CHECK(o.f != NULL, "%s: the edited file does not open as GGUF: %s", what, err.msg);
    return o;
}

/* Expects eli_model_from_gguf to fail with a message containing n1 (and n2); the file stays the caller's. */
static void expect_model_fail(const eli_gguf_file *src, const edit *e, const char *what, const char *n1, const char *n2) {
    opened o = open_edited(src, e, what);
    if (o.f) {
        eli_error err = {0};
        uint64_t nt = eli_gguf_n_tensors(o.f);
        eli_model *m = eli_model_from_gguf(o.f, &err);
        CHECK(m == NULL, "%s: model loaded but should have failed", what);
        if (m) {
            eli_model_free(m); /* closes o.f */
        } else {
            CHECK(err.code < 0 && err.msg[0], "%s: no message", what);
            if (n1) CHECK(strstr(err.msg, n1) != NULL, "%s: message '%s' lacks '%s'", what, err.msg, n1);
            if (n2) CHECK(strstr(err.msg, n2) != NULL, "%s: message '%s' lacks '%s'", what, err.msg, n2);
            /* the caller still owns a working file */
            const eli_gguf_tensor *t0 = eli_gguf_tensor_at(o.f, 0);
            CHECK(eli_gguf_n_tensors(o.f) == nt && t0 && eli_gguf_find_tensor(o.f, t0->name) == t0, "%s: file intact", what);
            eli_gguf_close(o.f);
        }
    }
    free(o.buf);
}

/* Expects success; returns the model (free with eli_model_free, then free(*buf)). */
static eli_model *expect_model_ok(const eli_gguf_file *src, const edit *e, const char *what, uint8_t **buf) {
    opened o = open_edited(src, e, what);
    *buf = o.buf;
    if (!o.f) return NULL;
    eli_error err = {0};
    eli_model *m = eli_model_from_gguf(o.f, &err);
    CHECK(m != NULL, "%s: %s", what, err.msg);
    if (!m) {
        eli_gguf_close(o.f);
        return NULL;
    }
    CHECK(m->file == o.f, "%s: the model owns the file", what);
    return m;
}

static void expect_model_ok_free(const eli_gguf_file *src, const edit *e, const char *what) {
    uint8_t *buf;
    eli_model *m = expect_model_ok(src, e, what, &buf);
    eli_model_free(m);
    free(buf);
}

/* ---------------------------------------------------------------------------------------------------- */
/* Tests on the synthetic model */

static void test_synth_baseline(const eli_gguf_file *src) {
    edit e = {0};
    uint8_t *buf;
    eli_model *m = expect_model_ok(src, &e, "synthetic baseline", &buf);
    if (m) {
        const eli_hparams *hp = &m->hp;
        CHECK(hp->n_layer == 3 && hp->n_embd == S_EMBD && hp->n_vocab == S_VOCAB && hp->n_ctx_train == 4096, "dims");
        CHECK(hp->head_dim_full == S_HD_FULL && hp->head_dim_swa == S_HD_SWA && hp->n_rot_full == S_HD_FULL &&
                  hp->n_rot_swa == S_HD_SWA,
              "head dims");
        CHECK(hp->n_swa == 16 && hp->n_shared_kv == 1 && hp->n_layer_kv == 2 && hp->n_pl == S_PL, "swa/shared/ple");
        CHECK(hp->rope_base_full == 1e6f && hp->rope_base_swa == 1e4f && hp->rms_eps == 1e-6f &&
                  hp->final_softcap == 25.0f,
              "floats");
        CHECK(hp->n_expert == 0 && hp->n_expert_used == 0, "no experts");
        CHECK(m->tied_output && m->output.data == m->token_embd.data, "tied output");
        CHECK(m->rope_freqs && m->rope_freqs[0] == 1.0f && m->output_norm && m->output_norm[255] == 1.0f, "vectors");
        CHECK(m->ple_token_embd.data && m->ple_token_embd.cols == S_PL * 3 && m->ple_model_proj.rows == S_PL * 3 &&
                  m->ple_proj_norm,
              "ple");
        const eli_layer *l = m->layers;
        CHECK(l[0].is_swa && !l[1].is_swa && l[2].is_swa, "pattern");
        CHECK(l[0].head_dim == S_HD_SWA && l[1].head_dim == S_HD_FULL && l[2].head_dim == S_HD_SWA, "layer head dims");
        CHECK(l[0].has_kv && l[1].has_kv && !l[2].has_kv && l[2].kv_source == 0 && l[0].kv_source == 0 &&
                  l[1].kv_source == 1,
              "kv sharing");
        CHECK(!l[0].k_eq_v && l[0].wv.data && !l[2].wk.data, "k/v");
        CHECK(l[0].n_ff == 64 && l[1].n_ff == 64 && l[2].n_ff == 128, "n_ff");
        CHECK(l[0].out_scale == 0.5f && l[2].out_scale == 0.75f && l[1].has_out_scale, "out scale");
        CHECK(l[1].wq.cols == S_EMBD && l[1].wq.rows == 2 * S_HD_FULL && l[1].wq.row_bytes == S_EMBD * 4 &&
                  l[1].wq.n_mat == 1 && !strcmp(l[1].wq.name, "blk.1.attn_q.weight"),
              "wq");
        CHECK(!l[0].is_moe && l[0].inp_gate.data && l[0].proj.data && l[0].ple_post_norm, "ffn/ple layer");
        CHECK(m->weight_bytes > 0 && m->weight_bytes <= eli_gguf_file_size(m->file), "weight bytes");
    }
    eli_model_free(m);
    free(buf);
    eli_model_free(NULL);
}

static void test_synth_arch(const eli_gguf_file *src) {
    static const char *const bad[] = {"llama", "gemma3", "gemma4x", "gemma", "", "Gemma4"};
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        edit e = {0};
        set_str(&e, "general.architecture", bad[k]);
        char msg[64];
        snprintf(msg, sizeof msg, "unsupported architecture '%s'", bad[k]);
        expect_model_fail(src, &e, "architecture", msg, NULL);
        edit_free(&e);
    }
    edit e = {0};
    drop_key(&e, "general.architecture");
    expect_model_fail(src, &e, "no architecture", "missing key 'general.architecture'", NULL);
    edit_free(&e);
    set_u32(&e, "general.architecture", 4);
    expect_model_fail(src, &e, "architecture type", "general.architecture", "str");
    edit_free(&e);
    char longname[300];
    memset(longname, 'x', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    set_str(&e, "general.architecture", longname);
    expect_model_fail(src, &e, "long architecture", "unsupported architecture 'xxxx", NULL);
    edit_free(&e);
}

static int optional_tensor(const char *name) {
    return strstr(name, "attn_v.weight") || !strcmp(name, "rope_freqs.weight") || strstr(name, "layer_output_scale");
}

static void test_synth_missing_tensors(const eli_gguf_file *src) {
    edit e = {0};
    drop_tensor(&e, "blk.0.attn_q.weight");
    expect_model_fail(src, &e, "missing attn_q", "missing tensor 'blk.0.attn_q.weight'", NULL);
    edit_free(&e);
    /* every tensor of the file: dropping a required one is named, dropping an optional one is fine */
    int n_required = 0;
    for (uint64_t i = 0; i < eli_gguf_n_tensors(src); i++) {
        const char *name = eli_gguf_tensor_at(src, i)->name;
        drop_tensor(&e, name);
        if (optional_tensor(name)) {
            uint8_t *buf;
            eli_model *m = expect_model_ok(src, &e, name, &buf);
            if (m && strstr(name, "attn_v.weight")) {
                int il = name[4] - '0';
                CHECK(m->layers[il].k_eq_v && !m->layers[il].wv.data, "%s absent: K = V", name);
            }
            if (m && !strcmp(name, "rope_freqs.weight")) CHECK(m->rope_freqs == NULL, "no rope_freqs");
            if (m && strstr(name, "layer_output_scale")) {
                int il = name[4] - '0';
                CHECK(m->layers[il].out_scale == 1.0f && !m->layers[il].has_out_scale, "%s absent: scale 1", name);
            }
            eli_model_free(m);
            free(buf);
        } else {
            char msg[128];
            snprintf(msg, sizeof msg, "missing tensor '%s'", name);
            expect_model_fail(src, &e, name, msg, NULL);
            n_required++;
        }
        edit_free(&e);
    }
    CHECK(n_required > 40, "%d required tensors", n_required);
}

static void test_synth_shapes(const eli_gguf_file *src) {
    static const struct {
        const char *name;
        uint32_t n_dims;
        uint64_t ne[3];
        const char *found, *expected;
    } cases[] = {
        {"blk.1.ffn_up.weight", 2, {256, 32, 1}, "{256, 32, 1, 1}", "expected {256, 64, 1, 1}"},
        {"blk.1.ffn_up.weight", 3, {256, 64, 2}, "{256, 64, 2, 1}", "expected {256, 64, 1, 1}"},
        {"blk.0.attn_q.weight", 2, {64, 256, 1}, "{64, 256, 1, 1}", "expected {256, 64, 1, 1}"}, /* transposed */
        {"blk.1.attn_k.weight", 2, {256, 128, 1}, "{256, 128, 1, 1}", "expected {256, 64, 1, 1}"},
        {"blk.2.ffn_down.weight", 2, {64, 256, 1}, "{64, 256, 1, 1}", "expected {128, 256, 1, 1}"},
        {"blk.0.attn_norm.weight", 1, {255, 1, 1}, "{255, 1, 1, 1}", "expected {256, 1, 1, 1}"},
        {"blk.0.attn_q_norm.weight", 1, {64, 1, 1}, "{64, 1, 1, 1}", "expected {32, 1, 1, 1}"},
        {"blk.0.layer_output_scale.weight", 1, {2, 1, 1}, "{2, 1, 1, 1}", "expected {1, 1, 1, 1}"},
        {"output_norm.weight", 2, {256, 2, 1}, "{256, 2, 1, 1}", "expected {256, 1, 1, 1}"},
        {"rope_freqs.weight", 1, {16, 1, 1}, "{16, 1, 1, 1}", "expected {32, 1, 1, 1}"},
        {"token_embd.weight", 2, {128, 8, 1}, "{128, 8, 1, 1}", "expected {256, 8, 1, 1}"},
        {"per_layer_token_embd.weight", 2, {32, 8, 1}, "{32, 8, 1, 1}", "expected {48, 8, 1, 1}"},
        {"per_layer_model_proj.weight", 2, {256, 16, 1}, "{256, 16, 1, 1}", "expected {256, 48, 1, 1}"},
        {"blk.2.proj.weight", 2, {256, 16, 1}, "{256, 16, 1, 1}", "expected {16, 256, 1, 1}"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        edit e = {0};
        reshape(&e, cases[k].name, cases[k].n_dims, cases[k].ne[0], cases[k].ne[1], cases[k].ne[2]);
        char who[96];
        snprintf(who, sizeof who, "tensor '%s' has shape %s", cases[k].name, cases[k].found);
        expect_model_fail(src, &e, cases[k].name, who, cases[k].expected);
        edit_free(&e);
    }
    /* a vocabulary the embedding table cannot be */
    edit e = {0};
    reshape(&e, "token_embd.weight", 2, 256, 0, 1);
    expect_model_fail(src, &e, "empty vocabulary", "token_embd.weight", "vocabulary");
    edit_free(&e);
    /* a changed vocabulary must match the per-layer embedding table */
    reshape(&e, "token_embd.weight", 2, 256, 16, 1);
    expect_model_fail(src, &e, "vocab 16", "per_layer_token_embd.weight", "expected {48, 16, 1, 1}");
    edit_free(&e);
}

static const char *const REQUIRED_KEYS[] = {
    "gemma4.block_count",
    "gemma4.context_length",
    "gemma4.embedding_length",
    "gemma4.attention.head_count",
    "gemma4.feed_forward_length",
    "gemma4.attention.sliding_window_pattern",
    "gemma4.attention.key_length_swa",
    "gemma4.attention.layer_norm_rms_epsilon",
    "gemma4.attention.sliding_window",
    "gemma4.embedding_length_per_layer_input",
};

static void test_synth_keys(const eli_gguf_file *src) {
    for (size_t k = 0; k < sizeof REQUIRED_KEYS / sizeof *REQUIRED_KEYS; k++) {
        edit e = {0};
        drop_key(&e, REQUIRED_KEYS[k]);
        char msg[128];
        snprintf(msg, sizeof msg, "missing required key '%s'", REQUIRED_KEYS[k]);
        expect_model_fail(src, &e, REQUIRED_KEYS[k], msg, NULL);
        edit_free(&e);
    }
    /* optional keys with defaults */
    edit e = {0};
    drop_key(&e, "gemma4.final_logit_softcapping");
    drop_key(&e, "gemma4.rope.freq_base");
    drop_key(&e, "gemma4.rope.freq_base_swa");
    drop_key(&e, "gemma4.attention.value_length");
    drop_key(&e, "gemma4.attention.value_length_swa");
    drop_key(&e, "gemma4.rope.dimension_count");
    drop_key(&e, "gemma4.rope.dimension_count_swa");
    {
        uint8_t *buf;
        eli_model *m = expect_model_ok(src, &e, "optional keys absent", &buf);
        if (m)
            CHECK(m->hp.final_softcap == 30.0f && m->hp.rope_base_full == 10000.0f && m->hp.rope_base_swa == 10000.0f &&
                      m->hp.n_rot_full == S_HD_FULL && m->hp.n_rot_swa == S_HD_SWA,
                  "defaults: softcap %g", (double)m->hp.final_softcap);
        eli_model_free(m);
        free(buf);
    }
    edit_free(&e);
    /* absent head_count_kv: no GQA (2 KV heads), so the K/V tensors no longer fit */
    drop_key(&e, "gemma4.attention.head_count_kv");
    expect_model_fail(src, &e, "no head_count_kv", "blk.0.attn_k.weight", "expected {256, 64, 1, 1}");
    edit_free(&e);
    /* absent key_length: n_embd / n_head = 128 */
    drop_key(&e, "gemma4.attention.key_length");
    drop_key(&e, "gemma4.attention.value_length");
    expect_model_fail(src, &e, "no key_length", "blk.1.attn_q.weight", "expected {256, 256, 1, 1}");
    edit_free(&e);
    /* absent shared_kv_layers: layer 2 must have its own K */
    drop_key(&e, "gemma4.attention.shared_kv_layers");
    expect_model_fail(src, &e, "no shared_kv_layers", "missing tensor 'blk.2.attn_k.weight'", NULL);
    edit_free(&e);
}

static void test_synth_types(const eli_gguf_file *src) {
    static const struct {
        const char *name;
        uint32_t type;
        const char *tname;
    } bad[] = {
        {"blk.0.attn_q.weight", ELI_TYPE_Q2_K, "q2_K (id 10)"},
        {"blk.0.attn_q.weight", ELI_TYPE_Q3_K, "q3_K (id 11)"},
        {"blk.1.ffn_gate.weight", ELI_TYPE_IQ2_XXS, "iq2_xxs (id 16)"},
        {"blk.1.ffn_gate.weight", ELI_TYPE_IQ4_NL, "iq4_nl (id 20)"},
        {"blk.0.attn_q.weight", ELI_TYPE_Q8_K, "q8_K (id 15)"},   /* activation format: no dot product */
        {"blk.0.attn_q.weight", ELI_TYPE_Q8_1, "q8_1 (id 9)"},
        {"output_norm.weight", ELI_TYPE_I8, "i8 (id 24)"},
        {"output_norm.weight", ELI_TYPE_F64, "f64 (id 28)"},
        {"token_embd.weight", ELI_TYPE_MXFP4, "mxfp4 (id 39)"},
        {"blk.2.layer_output_scale.weight", ELI_TYPE_I32, "i32 (id 26)"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        edit e = {0};
        retype(&e, bad[k].name, bad[k].type);
        char who[96];
        snprintf(who, sizeof who, "tensor '%s'", bad[k].name);
        expect_model_fail(src, &e, bad[k].tname, who, bad[k].tname);
        edit_free(&e);
    }
    /* computable types load (data are zeros: valid for every format) */
    static const struct {
        const char *name;
        uint32_t type;
    } good[] = {
        {"blk.0.attn_q.weight", ELI_TYPE_Q8_0},  {"blk.0.attn_q.weight", ELI_TYPE_Q4_K},
        {"blk.1.ffn_gate.weight", ELI_TYPE_Q6_K}, {"blk.1.ffn_down.weight", ELI_TYPE_Q4_0},
        {"token_embd.weight", ELI_TYPE_BF16},    {"blk.0.attn_norm.weight", ELI_TYPE_F16},
        {"blk.0.attn_norm.weight", ELI_TYPE_Q8_0}, {"blk.0.attn_k.weight", ELI_TYPE_Q5_K},
    };
    for (size_t k = 0; k < sizeof good / sizeof *good; k++) {
        edit e = {0};
        retype(&e, good[k].name, good[k].type);
        uint8_t *buf;
        char what[96];
        snprintf(what, sizeof what, "%s as %s", good[k].name, eli_type_name(good[k].type));
        eli_model *m = expect_model_ok(src, &e, what, &buf);
        if (m && !strcmp(good[k].name, "blk.0.attn_q.weight"))
            CHECK(m->layers[0].wq.type == good[k].type &&
                      m->layers[0].wq.row_bytes == eli_row_size(good[k].type, S_EMBD),
                  "%s: weight type/row bytes", what);
        if (m && !strcmp(good[k].name, "blk.0.attn_norm.weight"))
            CHECK(m->layers[0].attn_norm[0] == 0.0f, "%s dequantized (zeros)", what);
        eli_model_free(m);
        free(buf);
        edit_free(&e);
    }
}

static void test_synth_per_layer(const eli_gguf_file *src) {
    static const int32_t ff2[2] = {64, 64}, ff4[4] = {64, 64, 128, 128};
    edit e = {0};
    set_i32s(&e, "gemma4.feed_forward_length", ff2, 2);
    expect_model_fail(src, &e, "ff 2 entries", "gemma4.feed_forward_length", "has 2 entries, expected block_count = 3");
    edit_free(&e);
    set_i32s(&e, "gemma4.feed_forward_length", ff4, 4);
    expect_model_fail(src, &e, "ff 4 entries", "gemma4.feed_forward_length", "has 4 entries");
    edit_free(&e);
    set_i32s(&e, "gemma4.feed_forward_length", NULL, 0);
    expect_model_fail(src, &e, "ff 0 entries", "gemma4.feed_forward_length", "has 0 entries");
    edit_free(&e);
    static const int32_t ff_zero[3] = {64, 0, 128}, ff_neg[3] = {64, 64, -128};
    set_i32s(&e, "gemma4.feed_forward_length", ff_zero, 3);
    expect_model_fail(src, &e, "ff 0 value", "gemma4.feed_forward_length", "[1] = 0");
    edit_free(&e);
    set_i32s(&e, "gemma4.feed_forward_length", ff_neg, 3);
    expect_model_fail(src, &e, "ff negative", "gemma4.feed_forward_length", "[2] = -128");
    edit_free(&e);
    /* a scalar applies to every layer: layer 2's 128-wide FFN no longer fits */
    set_u32(&e, "gemma4.feed_forward_length", 64);
    expect_model_fail(src, &e, "ff scalar", "blk.2.ffn_gate.weight", "expected {256, 64, 1, 1}");
    edit_free(&e);
    {
        static const char *const strs[3] = {"64", "64", "128"};
        gw_buf *b = set_key(&e, "gemma4.feed_forward_length", GGUF_VT_ARRAY);
        gw_arr(b, GGUF_VT_STRING, 3);
        for (int i = 0; i < 3; i++) gw_str(b, strs[i]);
        expect_model_fail(src, &e, "ff strings", "gemma4.feed_forward_length", NULL);
        edit_free(&e);
    }
    gw_str(set_key(&e, "gemma4.feed_forward_length", GGUF_VT_STRING), "64");
    expect_model_fail(src, &e, "ff string", "gemma4.feed_forward_length", "str");
    edit_free(&e);
    static const uint8_t pat2[2] = {1, 0};
    set_bools(&e, "gemma4.attention.sliding_window_pattern", pat2, 2);
    expect_model_fail(src, &e, "pattern 2 entries", "gemma4.attention.sliding_window_pattern", "has 2 entries");
    edit_free(&e);
    {
        gw_buf *b = set_key(&e, "gemma4.attention.sliding_window_pattern", GGUF_VT_ARRAY);
        gw_arr(b, GGUF_VT_UINT8, 3), gw_u8(b, 1), gw_u8(b, 2), gw_u8(b, 1);
        expect_model_fail(src, &e, "pattern value 2", "gemma4.attention.sliding_window_pattern", "[1] = 2");
        edit_free(&e);
        b = set_key(&e, "gemma4.attention.sliding_window_pattern", GGUF_VT_ARRAY);
        gw_arr(b, GGUF_VT_UINT8, 3), gw_u8(b, 1), gw_u8(b, 0), gw_u8(b, 1);
        expect_model_ok_free(src, &e, "pattern as u8");
        edit_free(&e);
    }
    static const int32_t kv2[2] = {1, 1}, kv3[3] = {1, 3, 1}, kv0[3] = {1, 0, 1};
    set_i32s(&e, "gemma4.attention.head_count_kv", kv2, 2);
    expect_model_fail(src, &e, "kv 2 entries", "gemma4.attention.head_count_kv", "has 2 entries");
    edit_free(&e);
    set_i32s(&e, "gemma4.attention.head_count_kv", kv3, 3);
    expect_model_fail(src, &e, "kv 3 heads", "layer 1", "not a multiple of head_count_kv 3");
    edit_free(&e);
    set_i32s(&e, "gemma4.attention.head_count_kv", kv0, 3);
    expect_model_fail(src, &e, "kv 0 heads", "gemma4.attention.head_count_kv", "[1] = 0");
    edit_free(&e);
    static const int32_t heads[3] = {2, 4, 2};
    set_i32s(&e, "gemma4.attention.head_count", heads, 3);
    expect_model_fail(src, &e, "head_count array", "blk.1.attn_q.weight", "expected {256, 256, 1, 1}");
    edit_free(&e);
}

static void test_synth_values(const eli_gguf_file *src) {
    edit e = {0};
    set_u32(&e, "gemma4.block_count", 0);
    expect_model_fail(src, &e, "0 layers", "gemma4.block_count", "outside");
    edit_free(&e);
    set_u32(&e, "gemma4.block_count", 100000);
    expect_model_fail(src, &e, "100000 layers", "gemma4.block_count", "outside");
    edit_free(&e);
    set_u32(&e, "gemma4.block_count", 4);
    expect_model_fail(src, &e, "4 layers", "expected block_count = 4", NULL);
    edit_free(&e);
    set_str(&e, "gemma4.block_count", "3");
    expect_model_fail(src, &e, "block_count string", "gemma4.block_count", NULL);
    edit_free(&e);
    set_f32(&e, "gemma4.block_count", 3.5f);
    expect_model_fail(src, &e, "block_count 3.5", "gemma4.block_count", NULL);
    edit_free(&e);
    gw_u64(set_key(&e, "gemma4.block_count", GGUF_VT_UINT64), 1ull << 32 | 3);
    expect_model_fail(src, &e, "block_count 2^32+3", "gemma4.block_count", NULL);
    edit_free(&e);
    gw_u32(set_key(&e, "gemma4.block_count", GGUF_VT_INT32), (uint32_t)-3);
    expect_model_fail(src, &e, "block_count -3", "gemma4.block_count", NULL);
    edit_free(&e);
    gw_u16(set_key(&e, "gemma4.block_count", GGUF_VT_UINT16), 3);
    expect_model_ok_free(src, &e, "block_count as u16");
    edit_free(&e);
    set_u32(&e, "gemma4.embedding_length", 0);
    expect_model_fail(src, &e, "n_embd 0", "gemma4.embedding_length", "outside");
    edit_free(&e);
    set_u32(&e, "gemma4.attention.value_length", 32);
    expect_model_fail(src, &e, "key_length != value_length", "key_length 64 != value_length 32", NULL);
    edit_free(&e);
    set_u32(&e, "gemma4.attention.value_length_swa", 64);
    expect_model_fail(src, &e, "swa key != value", "key_length_swa 32 != value_length_swa 64", NULL);
    edit_free(&e);
    set_u32(&e, "gemma4.attention.key_length_swa", 2048);
    drop_key(&e, "gemma4.attention.value_length_swa");
    drop_key(&e, "gemma4.rope.dimension_count_swa");
    expect_model_fail(src, &e, "head dim 2048", "exceed", NULL);
    edit_free(&e);
    set_u32(&e, "gemma4.rope.dimension_count", 63);
    expect_model_fail(src, &e, "odd rope dims", "rope dimension counts 63/32", NULL);
    edit_free(&e);
    set_u32(&e, "gemma4.rope.dimension_count_swa", 64);
    expect_model_fail(src, &e, "rope dims > head dim", "rope dimension counts 64/64", NULL);
    edit_free(&e);
    set_f32(&e, "gemma4.attention.layer_norm_rms_epsilon", -1e-6f);
    expect_model_fail(src, &e, "negative eps", "epsilon", "negative");
    edit_free(&e);
    set_f32(&e, "gemma4.attention.layer_norm_rms_epsilon", NAN);
    expect_model_fail(src, &e, "NaN eps", "gemma4.attention.layer_norm_rms_epsilon", "not finite");
    edit_free(&e);
    gw_f64(set_key(&e, "gemma4.attention.layer_norm_rms_epsilon", GGUF_VT_FLOAT64), 1e300);
    expect_model_fail(src, &e, "eps 1e300", "gemma4.attention.layer_norm_rms_epsilon", "not finite");
    edit_free(&e);
    set_f32(&e, "gemma4.rope.freq_base", 0.0f);
    expect_model_fail(src, &e, "freq base 0", "freq bases", "positive");
    edit_free(&e);
    set_f32(&e, "gemma4.rope.freq_base_swa", INFINITY);
    expect_model_fail(src, &e, "freq base inf", "gemma4.rope.freq_base_swa", "not finite");
    edit_free(&e);
    set_f32(&e, "gemma4.final_logit_softcapping", -30.0f);
    expect_model_fail(src, &e, "negative softcap", "final_logit_softcapping", "negative");
    edit_free(&e);
    set_u32(&e, "gemma4.final_logit_softcapping", 0);
    {
        uint8_t *buf;
        eli_model *m = expect_model_ok(src, &e, "softcap 0 (u32)", &buf);
        if (m) CHECK(m->hp.final_softcap == 0.0f, "softcap 0");
        eli_model_free(m);
        free(buf);
    }
    edit_free(&e);
    set_u32(&e, "gemma4.attention.shared_kv_layers", 3);
    expect_model_fail(src, &e, "all layers shared", "gemma4.attention.shared_kv_layers", "outside [0, 2]");
    edit_free(&e);
    set_u32(&e, "gemma4.attention.sliding_window", 0);
    expect_model_fail(src, &e, "window 0", "gemma4.attention.sliding_window", "outside");
    edit_free(&e);
    set_u32(&e, "gemma4.expert_count", 2);
    set_u32(&e, "gemma4.expert_used_count", 3);
    expect_model_fail(src, &e, "used > experts", "expert_used_count 3 > expert_count 2", NULL);
    edit_free(&e);
    set_u32(&e, "gemma4.embedding_length_per_layer_input", 8);
    expect_model_fail(src, &e, "n_pl 8", "per_layer_token_embd.weight", "expected {24, 8, 1, 1}");
    edit_free(&e);
    set_u32(&e, "gemma4.embedding_length_per_layer_input", 0);
    expect_model_ok_free(src, &e, "PLE tensors ignored when n_pl = 0");
    edit_free(&e);
}

static void test_synth_structure(const eli_gguf_file *src) {
    edit e = {0};
    /* a KV-shared layer must not carry its own K */
    add_tensor(&e, "blk.2.attn_k.weight", 2, S_EMBD, S_HD_SWA, 1);
    expect_model_fail(src, &e, "shared layer with K", "layer 2 is KV-shared", "'blk.2.attn_k.weight'");
    edit_free(&e);
    /* a KV-shared layer whose KV geometry differs from its source */
    static const int32_t kv[3] = {1, 1, 2};
    set_i32s(&e, "gemma4.attention.head_count_kv", kv, 3);
    expect_model_fail(src, &e, "shared layer geometry", "layer 2 (KV-shared)", "source layer 0");
    edit_free(&e);
    /* non-finite small tensors */
    fill(&e, "blk.1.ffn_norm.weight", NAN);
    expect_model_fail(src, &e, "NaN norm", "tensor 'blk.1.ffn_norm.weight' element 0 is not finite", NULL);
    edit_free(&e);
    fill(&e, "blk.0.layer_output_scale.weight", INFINITY);
    expect_model_fail(src, &e, "inf scale", "blk.0.layer_output_scale.weight", "not finite");
    edit_free(&e);
    fill(&e, "rope_freqs.weight", -INFINITY);
    expect_model_fail(src, &e, "inf rope freqs", "rope_freqs.weight", "not finite");
    edit_free(&e);
    /* an MoE layer without expert hparams */
    add_tensor(&e, "blk.0.ffn_gate_inp.weight", 2, S_EMBD, 4, 1);
    expect_model_fail(src, &e, "moe without counts", "layer 0 is MoE", "expert_count");
    edit_free(&e);
    set_u32(&e, "gemma4.expert_count", 4);
    set_u32(&e, "gemma4.expert_used_count", 2);
    set_u32(&e, "gemma4.expert_feed_forward_length", 32);
    add_tensor(&e, "blk.0.ffn_gate_inp.weight", 2, S_EMBD, 4, 1);
    expect_model_fail(src, &e, "moe without scale", "missing tensor 'blk.0.ffn_gate_inp.scale'", NULL);
    edit_free(&e);
    /* an explicit output matrix of the wrong shape, and a right one (untied) */
    add_tensor(&e, "output.weight", 2, S_EMBD, S_VOCAB + 1, 1);
    expect_model_fail(src, &e, "output shape", "tensor 'output.weight'", "expected {256, 8, 1, 1}");
    edit_free(&e);
    add_tensor(&e, "output.weight", 2, S_EMBD, S_VOCAB, 1);
    {
        uint8_t *buf;
        eli_model *m = expect_model_ok(src, &e, "untied output", &buf);
        if (m) CHECK(!m->tied_output && m->output.data && m->output.data != m->token_embd.data, "untied");
        eli_model_free(m);
        free(buf);
    }
    edit_free(&e);
    /* a KV-shared layer with no earlier layer of its type: layers full, full, swa with 1 shared */
    synth_cfg c = {3, {0, 0, 1}, 1, 0};
    size_t size;
    uint8_t *buf = build_synth(&c, &size);
    eli_gguf_file *f = eli_gguf_open_memory(buf, size, NULL);
    CHECK(f != NULL, "ffs synthetic model");
    if (f) expect_model_fail(f, &e, "no kv source", "layer 2 shares KV", "no earlier sliding-window layer");
    eli_gguf_close(f);
    free(buf);
    /* the same without PLE, no sharing, loads */
    synth_cfg c2 = {2, {1, 0}, 0, 0};
    buf = build_synth(&c2, &size);
    f = eli_gguf_open_memory(buf, size, NULL);
    CHECK(f != NULL, "2-layer synthetic model");
    if (f) {
        uint8_t *b2;
        eli_model *m = expect_model_ok(f, &e, "2-layer model", &b2);
        if (m) CHECK(m->hp.n_pl == 0 && m->hp.n_shared_kv == 0 && !m->ple_token_embd.data, "2-layer hparams");
        eli_model_free(m);
        free(b2);
    }
    eli_gguf_close(f);
    free(buf);
}

/* eli_model_load: paths, prefixes, ownership through the file API */
static void test_load_paths(const eli_gguf_file *src) {
    eli_error err = {0};
    eli_model *m = eli_model_load("/nonexistent/dir/model.gguf", &err);
    CHECK(m == NULL && strstr(err.msg, "/nonexistent/dir/model.gguf"), "missing path: %s", err.msg);
    char path[] = "/tmp/eli_test_model_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    if (fd < 0) return;
    for (int k = 0; k < 2; k++) {
        edit e = {0};
        if (k == 1) set_str(&e, "general.architecture", "llama");
        size_t size;
        uint8_t *buf = rewrite(src, &e, &size);
        edit_free(&e);
        CHECK(ftruncate(fd, 0) == 0 && pwrite(fd, buf, size, 0) == (ssize_t)size, "write temp file");
        free(buf);
        m = eli_model_load(path, &err);
        if (k == 0) {
            CHECK(m != NULL, "eli_model_load(synthetic): %s", err.msg);
            if (m) CHECK(m->hp.n_layer == 3 && m->file != NULL, "loaded from file");
        } else {
            CHECK(m == NULL && strstr(err.msg, path) && strstr(err.msg, "unsupported architecture 'llama'"),
                  "llama from file: %s", err.msg);
        }
        eli_model_free(m);
    }
    close(fd);
    unlink(path);
}

/* ---------------------------------------------------------------------------------------------------- */
/* Mutations of the synthetic model's metadata and tensor directory: the binder must never crash, must
 * refuse with a message, and whatever loads must have its weights inside the file. */

static uint64_t rng_state = 0x6a09e667f3bcc908ull;

static uint64_t rng_u64(void) { /* splitmix64 */
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static int in_range(const void *at, uint64_t bytes, const uint8_t *lo, const uint8_t *hi) {
    const uint8_t *p = at;
    return p >= lo && p <= hi && bytes <= (uint64_t)(hi - p);
}

/* the weight's bytes lie in the file (binding reads nothing and copies nothing: no executor prepared it) */
static int weight_ok(const eli_weight *w, const uint8_t *lo, const uint8_t *hi) {
    if (!w->data) return 1;
    const uint64_t bytes = (uint64_t)w->row_bytes * (uint64_t)w->rows * (uint64_t)w->n_mat;
    return w->row_bytes == eli_row_size(w->type, w->cols) && w->rows > 0 && w->n_mat > 0 && in_range(w->data, bytes, lo, hi) &&
           !w->packed;
}

#ifndef MODEL_MUTATION_ITERS
#define MODEL_MUTATION_ITERS 3000
#endif

static void test_mutations(void) {
    size_t size;
    uint8_t *buf = build_synth(&SYNTH, &size);
    eli_gguf_file *f0 = eli_gguf_open_memory(buf, size, NULL);
    CHECK(f0 != NULL, "mutation seed");
    if (!f0) {
        free(buf);
        return;
    }
    size_t meta = (size_t)eli_gguf_data_offset(f0);
    eli_gguf_close(f0);
    uint8_t *orig = malloc(meta);
    memcpy(orig, buf, meta);
    static const uint64_t interesting[] = {0, 1, 2, 3, 4, 7, 8, 16, 31, 32, 63, 64, 128, 255, 256, 1023, 1024,
                                           1u << 20, 0x7FFFFFFF, 0xFFFFFFFF, UINT64_MAX};
    int loaded = 0, rejected_gguf = 0, rejected_model = 0, msgless = 0, bad = 0;
    rng_state = 3000;
    for (int it = 0; it < MODEL_MUTATION_ITERS; it++) {
        memcpy(buf, orig, meta);
        int nmut = 1 + (int)(rng_u64() % 3);
        for (int m = 0; m < nmut; m++) {
            size_t pos = (size_t)(rng_u64() % meta);
            switch (rng_u64() % 4) {
            case 0: buf[pos] ^= (uint8_t)(1u << (rng_u64() % 8)); break;
            case 1: buf[pos] = (uint8_t)rng_u64(); break;
            default: {
                uint64_t v = interesting[rng_u64() % (sizeof interesting / sizeof *interesting)];
                size_t n = rng_u64() % 2 ? 4 : 8;
                for (size_t i = 0; i < n && pos + i < meta; i++) buf[pos + i] = (uint8_t)(v >> (8 * i));
            }
            }
        }
        eli_error err = {0};
        eli_gguf_file *f = eli_gguf_open_memory(buf, size, &err);
        if (!f) {
            rejected_gguf++;
            continue;
        }
        eli_model *m = eli_model_from_gguf(f, &err);
        if (!m) {
            rejected_model++;
            msgless += err.code >= 0 || !err.msg[0];
            eli_gguf_close(f);
            continue;
        }
        loaded++;
        const uint8_t *lo = buf, *hi = buf + size;
        int ok = weight_ok(&m->token_embd, lo, hi) && weight_ok(&m->output, lo, hi) &&
                 weight_ok(&m->ple_token_embd, lo, hi) && weight_ok(&m->ple_model_proj, lo, hi) && m->hp.n_layer >= 1;
        for (int il = 0; il < m->hp.n_layer; il++) {
            const eli_layer *l = &m->layers[il];
            ok &= weight_ok(&l->wq, lo, hi) && weight_ok(&l->wk, lo, hi) && weight_ok(&l->wv, lo, hi) &&
                  weight_ok(&l->wo, lo, hi) && weight_ok(&l->ffn_gate, lo, hi) && weight_ok(&l->ffn_up, lo, hi) &&
                  weight_ok(&l->ffn_down, lo, hi) && weight_ok(&l->inp_gate, lo, hi) && weight_ok(&l->proj, lo, hi);
            ok &= l->kv_source >= 0 && l->kv_source < m->hp.n_layer && m->layers[l->kv_source].has_kv;
            ok &= l->attn_norm && l->q_norm && l->post_attn_norm && l->ffn_norm && l->post_ffw_norm;
            ok &= l->wq.rows == (int64_t)l->head_dim * l->n_head && l->n_head % l->n_head_kv == 0;
        }
        bad += !ok;
        eli_model_free(m);
    }
    printf("model mutations: %d loaded, %d rejected by gguf, %d by the model binder\n", loaded, rejected_gguf,
           rejected_model);
    CHECK(bad == 0, "%d loaded models with weights outside the file or inconsistent geometry", bad);
    CHECK(msgless == 0, "%d binder rejections without a message", msgless);
    CHECK(rejected_model > MODEL_MUTATION_ITERS / 20 && loaded > 0, "mutation mix");
    free(orig);
    free(buf);
}

/* ---------------------------------------------------------------------------------------------------- */
/* Golden files rewritten */

static void test_golden(void) {
    eli_error err = {0};
    eli_gguf_file *g = eli_gguf_open(eli_shared_path("golden/models/e2b-mini-f32.gguf"), &err);
    CHECK(g != NULL, "e2b-mini-f32.gguf: %s", err.msg);
    if (g) {
        edit e = {0};
        uint8_t *buf;
        eli_model *m = expect_model_ok(g, &e, "e2b-mini-f32 rewritten unchanged", &buf);
        if (m) {
            CHECK(m->hp.n_layer == 6 && m->hp.n_embd == 256 && m->hp.n_vocab == 1024 && m->hp.n_shared_kv == 3 &&
                      m->hp.n_pl == 32,
                  "e2b-mini hparams");
            CHECK(m->layers[3].kv_source == 1 && m->layers[5].kv_source == 2 && m->layers[3].n_ff == 256,
                  "e2b-mini kv sharing / n_ff");
            /* the rewritten weights are the golden bytes */
            const eli_gguf_tensor *t = eli_gguf_find_tensor(g, "blk.0.attn_q.weight");
            CHECK(t && !memcmp(m->layers[0].wq.data, t->data, t->nbytes), "weights copied");
        }
        eli_model_free(m);
        free(buf);

        set_str(&e, "general.architecture", "llama");
        expect_model_fail(g, &e, "golden llama", "unsupported architecture 'llama'", NULL);
        edit_free(&e);
        drop_tensor(&e, "blk.0.attn_q.weight");
        expect_model_fail(g, &e, "golden missing attn_q", "missing tensor 'blk.0.attn_q.weight'", NULL);
        edit_free(&e);
        drop_tensor(&e, "blk.1.attn_k.weight");
        expect_model_fail(g, &e, "golden missing attn_k", "missing tensor 'blk.1.attn_k.weight'", NULL);
        edit_free(&e);
        drop_tensor(&e, "per_layer_model_proj.weight");
        expect_model_fail(g, &e, "golden missing ple proj", "missing tensor 'per_layer_model_proj.weight'", NULL);
        edit_free(&e);
        reshape(&e, "blk.3.ffn_up.weight", 2, 256, 128, 1);
        expect_model_fail(g, &e, "golden shape", "tensor 'blk.3.ffn_up.weight' has shape {256, 128, 1, 1}",
                          "expected {256, 256, 1, 1}");
        edit_free(&e);
        drop_key(&e, "gemma4.attention.sliding_window");
        expect_model_fail(g, &e, "golden missing key", "missing required key 'gemma4.attention.sliding_window'", NULL);
        edit_free(&e);
        drop_key(&e, "gemma4.embedding_length");
        expect_model_fail(g, &e, "golden missing n_embd", "missing required key 'gemma4.embedding_length'", NULL);
        edit_free(&e);
        retype(&e, "blk.0.attn_q.weight", ELI_TYPE_Q2_K);
        expect_model_fail(g, &e, "golden q2_K", "tensor 'blk.0.attn_q.weight'", "q2_K (id 10)");
        edit_free(&e);
        static const int32_t ff5[5] = {128, 128, 128, 256, 256};
        set_i32s(&e, "gemma4.feed_forward_length", ff5, 5);
        expect_model_fail(g, &e, "golden ff 5", "gemma4.feed_forward_length", "has 5 entries, expected block_count = 6");
        edit_free(&e);
        static const int32_t ff_swapped[6] = {128, 128, 128, 128, 256, 256};
        set_i32s(&e, "gemma4.feed_forward_length", ff_swapped, 6);
        expect_model_fail(g, &e, "golden ff wrong", "blk.3.ffn_gate.weight", "expected {256, 128, 1, 1}");
        edit_free(&e);
        set_u32(&e, "gemma4.attention.shared_kv_layers", 2);
        expect_model_fail(g, &e, "golden shared 2", "missing tensor 'blk.3.attn_k.weight'", NULL);
        edit_free(&e);
        set_u32(&e, "gemma4.attention.shared_kv_layers", 4);
        expect_model_fail(g, &e, "golden shared 4", "layer 2 shares KV", "no earlier full-attention layer");
        edit_free(&e);
        eli_gguf_close(g);
    }
    g = eli_gguf_open(eli_shared_path("golden/models/moe-mini-f32.gguf"), &err);
    CHECK(g != NULL, "moe-mini-f32.gguf: %s", err.msg);
    if (g) {
        edit e = {0};
        expect_model_ok_free(g, &e, "moe-mini rewritten unchanged");
        drop_tensor(&e, "blk.0.ffn_gate_up_exps.weight");
        expect_model_fail(g, &e, "moe split fallback", "missing tensor 'blk.0.ffn_gate_exps.weight'", NULL);
        edit_free(&e);
        drop_key(&e, "gemma4.expert_count");
        expect_model_fail(g, &e, "moe no expert_count", "expert_used_count 2 > expert_count 0", NULL);
        edit_free(&e);
        drop_key(&e, "gemma4.expert_count");
        drop_key(&e, "gemma4.expert_used_count");
        expect_model_fail(g, &e, "moe no expert counts", "layer 0 is MoE", "0/0/64");
        edit_free(&e);
        set_u32(&e, "gemma4.expert_feed_forward_length", 32);
        expect_model_fail(g, &e, "moe expert ff", "blk.0.ffn_gate_up_exps.weight", "expected {128, 64, 8, 1}");
        edit_free(&e);
        reshape(&e, "blk.1.ffn_down_exps.weight", 3, 64, 128, 4);
        expect_model_fail(g, &e, "moe down shape", "blk.1.ffn_down_exps.weight", "expected {64, 128, 8, 1}");
        edit_free(&e);
        drop_tensor(&e, "blk.2.ffn_down_exps.scale");
        expect_model_ok_free(g, &e, "moe without optional down scale");
        edit_free(&e);
        retype(&e, "blk.0.ffn_gate_up_exps.weight", ELI_TYPE_IQ4_NL);
        expect_model_fail(g, &e, "moe iq4_nl", "blk.0.ffn_gate_up_exps.weight", "iq4_nl (id 20)");
        edit_free(&e);
        eli_gguf_close(g);
    }
}

int main(void) {
    size_t size;
    uint8_t *buf = build_synth(&SYNTH, &size);
    eli_error err = {0};
    eli_gguf_file *src = eli_gguf_open_memory(buf, size, &err);
    CHECK(src != NULL, "synthetic model: %s", err.msg);
    if (src) {
        test_synth_baseline(src);
        test_synth_arch(src);
        test_synth_missing_tensors(src);
        test_synth_shapes(src);
        test_synth_keys(src);
        test_synth_types(src);
        test_synth_per_layer(src);
        test_synth_values(src);
        test_synth_structure(src);
        test_load_paths(src);
        eli_gguf_close(src);
    }
    free(buf);
    test_mutations();
    test_golden();
    TEST_MAIN_END();
}
