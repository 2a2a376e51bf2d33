/* Writes the binary seeds of the fuzz corpora (make fuzz-seeds; the outputs are committed):
 *   corpus/fuzz_gguf/: a tiny valid Gemma 4 model with a tokenizer (src/gguf_write.h), its truncations at
 *     the header, the metadata and the tensor data, and a file with every metadata value type;
 *   corpus/fuzz_slot/: slot files of a short stream of the golden e2b-mini model (fuzz_slot_stream.h), one
 *     with the logits and one with the hidden state, both with the sampler's penalty history.
 * Usage: fuzz_seeds CORPUS_DIR */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fileio.h"
#include "fuzz_slot_stream.h"
#include "gguf.h"
#include "gguf_write.h"
#include "quants.h"
#include "slot.h"

#define E 16    /* n_embd */
#define L 2     /* layers: sliding, full */
#define HD 8    /* head dim, both kinds */
#define NH 2    /* heads */
#define FF 16   /* n_ff */
#define PL 4    /* per-layer embedding width */
#define V 24    /* vocabulary */

static const char *const TOKENS[V] = {"<pad>", "<eos>", "<bos>", "<unk>", "<|turn>", "<turn|>", "<0x0A>", "<0xC3>",
                                      "<0xB6>", "\xe2\x96\x81", "a", "b", "c", "d", "e", "ab", "\xe2\x96\x81\x61", "cd",
                                      "\n", "\xe2\x96\x81\xe2\x96\x81", "<mask>", "abcd", "e\xe2\x96\x81", "\xc3\xb6"};
static const int32_t TYPES[V] = {3, 3, 3, 2, 3, 3, 6, 6, 6, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 4, 1, 1, 1};
static const char *const MERGES[] = {"a b", "\xe2\x96\x81 a", "c d", "ab cd", "\xe2\x96\x81 \xe2\x96\x81",
                                     "e \xe2\x96\x81"};

typedef struct {
    const char *name;
    uint32_t type, n_dims;
    int64_t ne[2];
    float fill; /* 0: small pseudo-random values */
} tensor;

static int ok(int rc, const eli_error *err) {
    if (rc < 0) fprintf(stderr, "fuzz_seeds: %s\n", err->msg);
    return rc >= 0;
}

static int tiny_tensors(tensor *t) {
    int n = 0;
    t[n++] = (tensor){"token_embd.weight", ELI_TYPE_F32, 2, {E, V}, 0};
    t[n++] = (tensor){"rope_freqs.weight", ELI_TYPE_F32, 1, {HD / 2, 1}, 1};
    t[n++] = (tensor){"per_layer_token_embd.weight", ELI_TYPE_F16, 2, {PL * L, V}, 0};
    t[n++] = (tensor){"per_layer_model_proj.weight", ELI_TYPE_F16, 2, {E, PL * L}, 0};
    t[n++] = (tensor){"per_layer_proj_norm.weight", ELI_TYPE_F32, 1, {PL, 1}, 1};
    t[n++] = (tensor){"output_norm.weight", ELI_TYPE_F32, 1, {E, 1}, 1};
    for (int il = 0; il < L; il++) {
        static const struct {
            const char *suffix;
            int n_dims;
            int64_t ne0, ne1;
            float fill;
        } blk[] = {{"attn_norm", 1, E, 1, 1},       {"attn_q", 2, E, NH * HD, 0},  {"attn_q_norm", 1, HD, 1, 1},
                   {"attn_k", 2, E, HD, 0},         {"attn_v", 2, E, HD, 0},       {"attn_k_norm", 1, HD, 1, 1},
                   {"attn_output", 2, NH * HD, E, 0}, {"post_attention_norm", 1, E, 1, 1},
                   {"layer_output_scale", 1, 1, 1, 1}, {"ffn_norm", 1, E, 1, 1},   {"ffn_gate", 2, E, FF, 0},
                   {"ffn_up", 2, E, FF, 0},         {"ffn_down", 2, FF, E, 0},     {"post_ffw_norm", 1, E, 1, 1},
                   {"inp_gate", 2, E, PL, 0},       {"proj", 2, PL, E, 0},         {"post_norm", 1, E, 1, 1}};
        static char buf[L][sizeof blk / sizeof blk[0]][48];
        for (size_t k = 0; k < sizeof blk / sizeof blk[0]; k++) {
            snprintf(buf[il][k], sizeof buf[il][k], "blk.%d.%s.weight", il, blk[k].suffix);
            t[n++] = (tensor){buf[il][k], blk[k].n_dims == 2 ? ELI_TYPE_F16 : ELI_TYPE_F32, (uint32_t)blk[k].n_dims,
                              {blk[k].ne0, blk[k].ne1}, blk[k].fill};
        }
    }
    return n;
}

/* a tiny Gemma 4 model (all of the E-model features but MoE) with a gemma4 tokenizer */
static int write_tiny_model(const char *path) {
    eli_error err = {0};
    eli_gguf_writer *w = eli_gguf_writer_open(path, &err);
    if (!w) return ok(-1, &err);
    const int32_t n_kv[L] = {1, 1}, n_ff[L] = {FF, FF};
    const uint8_t swa[L] = {1, 0};
    int rc = eli_gguf_set_str(w, "general.architecture", "gemma4", &err);
#define U32(k, v) \
    if (!rc) rc = eli_gguf_set_u32(w, "gemma4." k, v, &err)
#define F32(k, v) \
    if (!rc) rc = eli_gguf_set_f32(w, "gemma4." k, v, &err)
    U32("block_count", L);
    U32("context_length", 64);
    U32("embedding_length", E);
    U32("attention.head_count", NH);
    U32("attention.key_length", HD);
    U32("attention.value_length", HD);
    U32("attention.key_length_swa", HD);
    U32("attention.value_length_swa", HD);
    U32("rope.dimension_count", HD);
    U32("rope.dimension_count_swa", HD);
    U32("attention.sliding_window", 4);
    U32("attention.shared_kv_layers", 0);
    U32("embedding_length_per_layer_input", PL);
    F32("rope.freq_base", 1e6f);
    F32("rope.freq_base_swa", 1e4f);
    F32("attention.layer_norm_rms_epsilon", 1e-6f);
    F32("final_logit_softcapping", 30.0f);
#undef U32
#undef F32
    if (!rc) rc = eli_gguf_set_arr(w, "gemma4.attention.head_count_kv", GGUF_VT_INT32, n_kv, L, &err);
    if (!rc) rc = eli_gguf_set_arr(w, "gemma4.feed_forward_length", GGUF_VT_INT32, n_ff, L, &err);
    if (!rc) rc = eli_gguf_set_arr(w, "gemma4.attention.sliding_window_pattern", GGUF_VT_BOOL, swa, L, &err);
    if (!rc) rc = eli_gguf_set_str(w, "tokenizer.ggml.model", "gemma4", &err);
    if (!rc) rc = eli_gguf_set_arr_str(w, "tokenizer.ggml.tokens", TOKENS, V, &err);
    if (!rc) rc = eli_gguf_set_arr(w, "tokenizer.ggml.token_type", GGUF_VT_INT32, TYPES, V, &err);
    if (!rc) rc = eli_gguf_set_arr_str(w, "tokenizer.ggml.merges", MERGES, sizeof MERGES / sizeof MERGES[0], &err);
    if (!rc) rc = eli_gguf_set_u32(w, "tokenizer.ggml.bos_token_id", 2, &err);
    if (!rc) rc = eli_gguf_set_u32(w, "tokenizer.ggml.eos_token_id", 1, &err);
    if (!rc) rc = eli_gguf_set_u32(w, "tokenizer.ggml.unknown_token_id", 3, &err);
    if (!rc) rc = eli_gguf_set_u32(w, "tokenizer.ggml.padding_token_id", 0, &err);
    tensor t[64];
    const int n = tiny_tensors(t);
    for (int i = 0; i < n && !rc; i++) rc = eli_gguf_add_tensor(w, t[i].name, t[i].type, t[i].n_dims, t[i].ne, &err);
    uint32_t state = 12345;
    for (int i = 0; i < n && !rc; i++) {
        for (int64_t k = 0; k < t[i].ne[0] * t[i].ne[1] && !rc; k++) {
            state = state * 1664525u + 1013904223u;
            const float v = t[i].fill != 0 ? t[i].fill : ((float)(state >> 8) / 16777216.0f - 0.5f) * 0.5f;
            if (t[i].type == ELI_TYPE_F16) {
                const eli_fp16 h = eli_fp32_to_fp16(v);
                rc = eli_gguf_write_data(w, &h, sizeof h, &err);
            } else {
                rc = eli_gguf_write_data(w, &v, sizeof v, &err);
            }
        }
    }
    if (rc) {
        eli_gguf_writer_abort(w);
        return ok(rc, &err);
    }
    return ok(eli_gguf_writer_commit(w, &err), &err);
}

static unsigned char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    const long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = len > 0 ? malloc((size_t)len) : NULL;
    if (b && fread(b, 1, (size_t)len, f) != (size_t)len) free(b), b = NULL;
    fclose(f);
    *n = b ? (size_t)len : 0;
    return b;
}

static int write_prefix(const char *dir, const char *name, const unsigned char *b, size_t n) {
    char p[1024];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    eli_error err = {0};
    return ok(eli_write_file_atomic(p, b, n, &err), &err);
}

/* a GGUF holding one value of every metadata type, arrays of each scalar type, of strings and of arrays */
static int write_value_types(const char *path) {
    eli_error err = {0};
    eli_gguf_writer *w = eli_gguf_writer_open(path, &err);
    if (!w) return ok(-1, &err);
    static const uint8_t u8s[3] = {1, 0, 255};
    static const int32_t i32s[3] = {-1, 0, 2147483647};
    static const float f32s[2] = {1.5f, -0.0f};
    static const uint64_t u64s[2] = {0, 18446744073709551615ull};
    static const double f64s[2] = {1e-300, 3.25};
    static const char *const strs[2] = {"x", ""};
    int rc = eli_gguf_set_u32(w, "u32", 7, &err);
    if (!rc) rc = eli_gguf_set_i32(w, "i32", -7, &err);
    if (!rc) rc = eli_gguf_set_f32(w, "f32", 0.5f, &err);
    if (!rc) rc = eli_gguf_set_bool(w, "bool", 1, &err);
    if (!rc) rc = eli_gguf_set_str(w, "str", "gemma4", &err);
    if (!rc) rc = eli_gguf_set_arr(w, "arr.u8", GGUF_VT_UINT8, u8s, 3, &err);
    if (!rc) rc = eli_gguf_set_arr(w, "arr.i8", GGUF_VT_INT8, u8s, 3, &err);
    if (!rc) rc = eli_gguf_set_arr(w, "arr.u16", GGUF_VT_UINT16, f32s, 2, &err);
    if (!rc) rc = eli_gguf_set_arr(w, "arr.i16", GGUF_VT_INT16, f32s, 2, &err);
    if (!rc) rc = eli_gguf_set_arr(w, "arr.i32", GGUF_VT_INT32, i32s, 3, &err);
    if (!rc) rc = eli_gguf_set_arr(w, "arr.f32", GGUF_VT_FLOAT32, f32s, 2, &err);
    if (!rc) rc = eli_gguf_set_arr(w, "arr.u64", GGUF_VT_UINT64, u64s, 2, &err);
    if (!rc) rc = eli_gguf_set_arr(w, "arr.i64", GGUF_VT_INT64, u64s, 2, &err);
    if (!rc) rc = eli_gguf_set_arr(w, "arr.f64", GGUF_VT_FLOAT64, f64s, 2, &err);
    if (!rc) rc = eli_gguf_set_arr(w, "arr.bool", GGUF_VT_BOOL, u8s, 2, &err);
    if (!rc) rc = eli_gguf_set_arr_str(w, "arr.str", strs, 2, &err);
    const int64_t ne[1] = {4};
    static const float data[4] = {1, 2, 3, 4};
    if (!rc) rc = eli_gguf_add_tensor(w, "t", ELI_TYPE_F32, 1, ne, &err);
    if (!rc) rc = eli_gguf_write_data(w, data, sizeof data, &err);
    if (rc) {
        eli_gguf_writer_abort(w);
        return ok(rc, &err);
    }
    return ok(eli_gguf_writer_commit(w, &err), &err);
}

static int gguf_seeds(const char *dir) {
    char p[1024];
    snprintf(p, sizeof p, "%s/tiny-model.gguf", dir);
    if (!write_tiny_model(p)) return 0;
    size_t n;
    unsigned char *b = slurp(p, &n);
    eli_error err = {0};
    eli_gguf_file *f = b ? eli_gguf_open_memory(b, n, &err) : NULL;
    if (!f) return ok(-1, &err);
    const size_t data_off = (size_t)eli_gguf_data_offset(f);
    eli_gguf_close(f);
    /* magic only; magic + version + counts; the middle of the metadata; the tensor directory cut; data cut */
    const struct {
        const char *name;
        size_t len;
    } cuts[] = {{"cut-magic.gguf", 4},
                {"cut-counts.gguf", 24},
                {"cut-metadata.gguf", data_off / 2},
                {"cut-directory.gguf", data_off - 40},
                {"cut-data.gguf", data_off + (n - data_off) / 2}};
    int good = 1;
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) good &= write_prefix(dir, cuts[i].name, b, cuts[i].len);
    free(b);
    snprintf(p, sizeof p, "%s/value-types.gguf", dir);
    return good && write_value_types(p);
}

static int slot_seeds(const char *dir) {
    eli_error err = {0};
    eli_model *m = eli_model_load(FUZZ_SLOT_MODEL, &err);
    const eli_exec_options o = {NULL, 1};
    const eli_seq_params p = fuzz_slot_params();
    eli_xmodel *xm = m ? eli_exec_prepare(eli_exec_default(), m, &o, &err) : NULL;
    eli_xseq *c = xm ? eli_seq_create(eli_exec_default(), xm, &p, &err) : NULL;
    float *logits = m ? malloc((size_t)m->hp.n_vocab * sizeof *logits) : NULL;
    float *hidden = m ? malloc((size_t)m->hp.n_embd * sizeof *hidden) : NULL;
    int32_t tokens[8] = {2, 651, 3, 17, 900, 5, 44, 1000};
    const eli_sampler_params sp = fuzz_slot_sampler_params();
    eli_sampler *smp = NULL;
    int good = c && logits && hidden && ok(eli_sampler_create(&sp, m->hp.n_vocab, &smp, &err), &err);
    for (int i = 0; good && i < 5; i++) eli_sampler_note(smp, tokens[i]);
    if (good) {
        const eli_outputs out = {logits, hidden, 0};
        good = ok(eli_seq_decode_tokens(c, tokens, 5, &out, &err), &err);
    }
    /* 5 tokens in the cache and a pending sixth with the logits; then the same without them, with the hidden
     * state, after a sixth decode */
    eli_slot_state st = {.tokens = tokens, .n_tokens = 6, .cap_tokens = 8, .pending = 1, .logits_valid = 1,
                         .n_generated = 1, .sampler = smp};
    char path[1024];
    snprintf(path, sizeof path, "%s/logits.slot", dir);
    if (good) good = ok(eli_slot_save(path, c, &st, logits, hidden, &err), &err);
    if (good) {
        const eli_outputs out = {NULL, hidden, 0};
        good = ok(eli_seq_decode_tokens(c, tokens + 5, 1, &out, &err), &err);
    }
    if (good) good = ok(eli_sampler_accept(smp, tokens[5], &err), &err);
    st = (eli_slot_state){.tokens = tokens, .n_tokens = 6, .cap_tokens = 8, .hidden_valid = 1, .done = 1,
                          .n_generated = 2, .sampler = smp};
    snprintf(path, sizeof path, "%s/hidden.slot", dir);
    if (good) good = ok(eli_slot_save(path, c, &st, logits, hidden, &err), &err);
    if (!c) ok(-1, &err);
    free(logits), free(hidden);
    eli_sampler_free(smp);
    eli_seq_free(c);
    eli_xmodel_release(xm);
    eli_model_free(m);
    return good;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: fuzz_seeds CORPUS_DIR\n");
        return 2;
    }
    char dir[2][1024];
    snprintf(dir[0], sizeof dir[0], "%s/fuzz_gguf", argv[1]);
    snprintf(dir[1], sizeof dir[1], "%s/fuzz_slot", argv[1]);
    for (int i = 0; i < 2; i++)
        if (mkdir(dir[i], 0755) && errno != EEXIST) {
            fprintf(stderr, "fuzz_seeds: cannot create %s: %s\n", dir[i], strerror(errno));
            return 1;
        }
    return gguf_seeds(dir[0]) && slot_seeds(dir[1]) ? 0 : 1;
}
