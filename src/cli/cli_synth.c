/* eliza-infer synth --arch e2b|e4b|12b|31b|26b-a4b --type f16|q8_0|q4_0|q4_k_m [--layers N] [--seed S]
 *                    [-t THREADS] -o FILE
 *
 * Writes a random-weight Gemma 4 GGUF with the true geometry of that size (../shared/spec/gemma4.md
 * sections 1, 2, 4 and 7): every gemma4.* key, tied output, rope_freqs, PLE tensors (E2B/E4B), KV-shared
 * layers, K=V full layers (12B/31B/26B-A4B), MoE tensors (26B-A4B) and a 262144-token tokenizer block with
 * the special tokens at their real ids and a small valid merges list. Weights are N(0, 0.02) (norm
 * weights and scales 1), so activations stay finite; they are generated and quantized a chunk of rows at
 * a time on the thread pool and streamed through the GGUF writer, never the whole file in memory.
 * --layers N keeps the first N layers (the shared-KV tail shrinks in proportion). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "os.h"
#include "gguf.h"
#include "gguf_write.h"
#include "quants.h"
#include "threadpool.h"

typedef struct {
    const char *name;
    int n_layer, n_embd, n_head, n_head_kv_swa, n_head_kv_full, n_ff, n_swa, full_period, n_shared, n_pl;
    int k_eq_v, double_wide, n_expert, n_expert_used, n_ff_exp;
    uint32_t n_ctx;
} arch_def;

static const arch_def archs[] = {
    {"e2b", 35, 1536, 8, 1, 1, 6144, 512, 5, 20, 256, 0, 1, 0, 0, 0, 131072},
    {"e4b", 42, 2560, 8, 2, 2, 10240, 512, 6, 18, 256, 0, 0, 0, 0, 0, 131072},
    {"12b", 48, 3840, 16, 8, 1, 15360, 1024, 6, 0, 0, 1, 0, 0, 0, 0, 262144},
    {"26b-a4b", 30, 2816, 16, 8, 2, 2112, 1024, 6, 0, 0, 1, 0, 128, 8, 704, 262144},
    {"31b", 60, 5376, 32, 16, 4, 21504, 1024, 6, 0, 0, 1, 0, 0, 0, 0, 262144},
};

#define N_VOCAB 262144
#define HD_SWA 256
#define HD_FULL 512

enum { FILL_RANDOM, FILL_ONES, FILL_ROPE };

typedef struct {
    char name[96];
    uint32_t type;
    uint32_t n_dims;
    int64_t ne[3];
    int fill;
} tdef;

typedef struct {
    tdef *t;
    size_t n, cap;
} tlist;

static tdef *add(tlist *l, uint32_t type, int fill, uint32_t n_dims, int64_t ne0, int64_t ne1, int64_t ne2,
                 const char *fmt, int il) {
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 256;
        l->t = realloc(l->t, l->cap * sizeof *l->t);
        if (!l->t) {
            fprintf(stderr, "eliza-infer: out of memory\n");
            exit(1);
        }
    }
    tdef *t = &l->t[l->n++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, fmt, il);
    /* a block type must divide the row: K-quants fall back to Q8_0 (as llama-quantize falls back) */
    if (eli_type_info(type)->block_size > 1 && ne0 % (int64_t)eli_type_info(type)->block_size) type = ELI_TYPE_Q8_0;
    if (eli_type_info(type)->block_size > 1 && ne0 % (int64_t)eli_type_info(type)->block_size) type = ELI_TYPE_F16;
    t->type = type, t->fill = fill, t->n_dims = n_dims;
    t->ne[0] = ne0, t->ne[1] = ne1, t->ne[2] = ne2;
    return t;
}

/* ---- parallel row generation ---- */

typedef struct {
    const tdef *t;
    uint64_t seed, tindex;
    int64_t r0, nrows, cols;
    size_t row_bytes;
    uint8_t *out;
    float *scratch; /* [nth][cols] */
} gen_job;

static uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static void gen_task(void *ctx, int ith, int nth) {
    const gen_job *j = ctx;
    int64_t b, e;
    eli_split(j->nrows, ith, nth, &b, &e);
    float *x = j->scratch + (size_t)ith * (size_t)j->cols;
    for (int64_t r = b; r < e; r++) {
        const int64_t row = j->r0 + r;
        if (j->t->fill == FILL_ONES) {
            for (int64_t i = 0; i < j->cols; i++) x[i] = 1.0f;
        } else if (j->t->fill == FILL_ROPE) {
            /* proportional RoPE: int(512 * 0.25 / 2) = 64 rotated pairs, the rest frozen */
            for (int64_t i = 0; i < j->cols; i++) x[i] = i < 64 ? 1.0f : 1e30f;
        } else {
            uint64_t s = j->seed ^ (j->tindex * 0x100000001b3ULL) ^ ((uint64_t)row << 20);
            splitmix(&s);
            uint64_t st = splitmix(&s) | 1;
            for (int64_t i = 0; i < j->cols; i++) {
                /* Irwin-Hall(4) approximation of N(0, 1), times 0.02 */
                float u = 0;
                for (int k = 0; k < 4; k++) {
                    st ^= st << 13, st ^= st >> 7, st ^= st << 17;
                    u += (float)(st >> 40) * (1.0f / 16777216.0f);
                }
                x[i] = (u - 2.0f) * 1.7320508f * 0.02f;
            }
        }
        eli_quantize_row(j->t->type, x, j->out + (size_t)r * j->row_bytes, j->cols);
    }
}

static int usage(void) {
    fprintf(stderr, "usage: eliza-infer synth --arch e2b|e4b|12b|31b|26b-a4b --type f16|q8_0|q4_0|q4_k_m [--layers N]\n"
                    "                         [--seed S] [-t THREADS] -o FILE\n");
    return 2;
}

int cli_synth(int argc, char **argv) {
    const char *arch_s = NULL, *type_s = NULL, *out = NULL;
    long long layers = 0, seed = 1, threads = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) return usage(), 0;
        if (!strcmp(a, "--arch")) arch_s = i + 1 < argc ? argv[++i] : NULL;
        else if (!strcmp(a, "--type")) type_s = i + 1 < argc ? argv[++i] : NULL;
        else if (!strcmp(a, "-o")) out = i + 1 < argc ? argv[++i] : NULL;
        else if (!strcmp(a, "--layers")) { if (cli_parse_int("--layers", i + 1 < argc ? argv[++i] : NULL, 1, 1000, &layers)) return 2; }
        else if (!strcmp(a, "--seed")) { if (cli_parse_int("--seed", i + 1 < argc ? argv[++i] : NULL, 0, INT64_MAX, &seed)) return 2; }
        else if (!strcmp(a, "-t")) { if (cli_parse_int("-t", i + 1 < argc ? argv[++i] : NULL, 0, 1024, &threads)) return 2; }
        else return cli_die("synth: unknown option '%s'", a), usage();
    }
    if (!arch_s || !type_s || !out) return usage();
    const arch_def *A = NULL;
    for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++)
        if (!strcmp(arch_s, archs[i].name)) A = &archs[i];
    if (!A) return cli_die("synth: unknown --arch '%s'", arch_s), 2;
    uint32_t mt, emb_t, file_type;
    int kq = 0;
    if (!strcmp(type_s, "f16")) mt = ELI_TYPE_F16, emb_t = ELI_TYPE_F16, file_type = 1;
    else if (!strcmp(type_s, "q8_0")) mt = ELI_TYPE_Q8_0, emb_t = ELI_TYPE_Q8_0, file_type = 7;
    else if (!strcmp(type_s, "q4_0")) mt = ELI_TYPE_Q4_0, emb_t = ELI_TYPE_Q6_K, file_type = 2;
    else if (!strcmp(type_s, "q4_k_m")) mt = ELI_TYPE_Q4_K, emb_t = ELI_TYPE_Q6_K, file_type = 15, kq = 1;
    else return cli_die("synth: unknown --type '%s'", type_s), 2;
    if (threads == 0) threads = eli_os_cpu_count();

    const int L = layers > 0 ? (int)layers : A->n_layer;
    int n_shared = (int)((long long)A->n_shared * L / A->n_layer);
    /* the layers that own K/V must include a sliding and a full layer for the shared ones to read */
    if (n_shared && L - n_shared < A->full_period) n_shared = 0;
    const int E = A->n_embd, P = A->n_pl;
    int *is_swa = calloc((size_t)L, sizeof(int));
    uint32_t *n_ff = calloc((size_t)L, sizeof(uint32_t)), *hkv = calloc((size_t)L, sizeof(uint32_t));
    uint8_t *pattern = calloc((size_t)L, 1);
    if (!is_swa || !n_ff || !hkv || !pattern) return cli_die("out of memory");
    for (int il = 0; il < L; il++) {
        is_swa[il] = il % A->full_period != A->full_period - 1;
        pattern[il] = (uint8_t)is_swa[il];
        n_ff[il] = (uint32_t)(A->double_wide && il >= L - n_shared ? 2 * A->n_ff : A->n_ff);
        hkv[il] = (uint32_t)(is_swa[il] ? A->n_head_kv_swa : A->n_head_kv_full);
    }

    /* ---- tensors ---- */
    tlist tl = {0};
    add(&tl, emb_t, FILL_RANDOM, 2, E, N_VOCAB, 1, "token_embd.weight", 0);
    add(&tl, ELI_TYPE_F32, FILL_ONES, 1, E, 1, 1, "output_norm.weight", 0);
    add(&tl, ELI_TYPE_F32, FILL_ROPE, 1, HD_FULL / 2, 1, 1, "rope_freqs.weight", 0);
    if (P) {
        add(&tl, mt, FILL_RANDOM, 2, (int64_t)P * L, N_VOCAB, 1, "per_layer_token_embd.weight", 0);
        add(&tl, mt, FILL_RANDOM, 2, E, (int64_t)P * L, 1, "per_layer_model_proj.weight", 0);
        add(&tl, ELI_TYPE_F32, FILL_ONES, 1, P, 1, 1, "per_layer_proj_norm.weight", 0);
    }
    for (int il = 0; il < L; il++) {
        const int hd = is_swa[il] ? HD_SWA : HD_FULL;
        const int has_kv = il < L - n_shared;
        const int has_v = has_kv && !(A->k_eq_v && !is_swa[il]);
        /* Q4_K_M: attn_v and ffn_down in Q6_K on the first and last eighth and every third layer between */
        const int more = kq && (il < L / 8 || il >= 7 * L / 8 || (il - L / 8) % 3 == 2);
        const uint32_t vt = more ? ELI_TYPE_Q6_K : mt;
        add(&tl, ELI_TYPE_F32, FILL_ONES, 1, E, 1, 1, "blk.%d.attn_norm.weight", il);
        add(&tl, mt, FILL_RANDOM, 2, E, (int64_t)hd * A->n_head, 1, "blk.%d.attn_q.weight", il);
        if (has_kv) add(&tl, mt, FILL_RANDOM, 2, E, (int64_t)hd * hkv[il], 1, "blk.%d.attn_k.weight", il);
        if (has_v) add(&tl, vt, FILL_RANDOM, 2, E, (int64_t)hd * hkv[il], 1, "blk.%d.attn_v.weight", il);
        add(&tl, mt, FILL_RANDOM, 2, (int64_t)hd * A->n_head, E, 1, "blk.%d.attn_output.weight", il);
        add(&tl, ELI_TYPE_F32, FILL_ONES, 1, hd, 1, 1, "blk.%d.attn_q_norm.weight", il);
        if (has_kv) add(&tl, ELI_TYPE_F32, FILL_ONES, 1, hd, 1, 1, "blk.%d.attn_k_norm.weight", il);
        add(&tl, ELI_TYPE_F32, FILL_ONES, 1, E, 1, 1, "blk.%d.post_attention_norm.weight", il);
        add(&tl, ELI_TYPE_F32, FILL_ONES, 1, 1, 1, 1, "blk.%d.layer_output_scale.weight", il);
        add(&tl, ELI_TYPE_F32, FILL_ONES, 1, E, 1, 1, "blk.%d.ffn_norm.weight", il);
        add(&tl, mt, FILL_RANDOM, 2, E, n_ff[il], 1, "blk.%d.ffn_gate.weight", il);
        add(&tl, mt, FILL_RANDOM, 2, E, n_ff[il], 1, "blk.%d.ffn_up.weight", il);
        add(&tl, vt, FILL_RANDOM, 2, n_ff[il], E, 1, "blk.%d.ffn_down.weight", il);
        add(&tl, ELI_TYPE_F32, FILL_ONES, 1, E, 1, 1, "blk.%d.post_ffw_norm.weight", il);
        if (A->n_expert) {
            add(&tl, ELI_TYPE_F32, FILL_RANDOM, 2, E, A->n_expert, 1, "blk.%d.ffn_gate_inp.weight", il);
            add(&tl, ELI_TYPE_F32, FILL_ONES, 1, E, 1, 1, "blk.%d.ffn_gate_inp.scale", il);
            add(&tl, ELI_TYPE_F32, FILL_ONES, 1, E, 1, 1, "blk.%d.pre_ffw_norm_2.weight", il);
            add(&tl, ELI_TYPE_F32, FILL_ONES, 1, E, 1, 1, "blk.%d.post_ffw_norm_1.weight", il);
            add(&tl, ELI_TYPE_F32, FILL_ONES, 1, E, 1, 1, "blk.%d.post_ffw_norm_2.weight", il);
            add(&tl, mt, FILL_RANDOM, 3, E, 2 * (int64_t)A->n_ff_exp, A->n_expert, "blk.%d.ffn_gate_up_exps.weight", il);
            add(&tl, vt, FILL_RANDOM, 3, A->n_ff_exp, E, A->n_expert, "blk.%d.ffn_down_exps.weight", il);
            add(&tl, ELI_TYPE_F32, FILL_ONES, 1, A->n_expert, 1, 1, "blk.%d.ffn_down_exps.scale", il);
        }
        if (P) {
            add(&tl, mt, FILL_RANDOM, 2, E, P, 1, "blk.%d.inp_gate.weight", il);
            add(&tl, mt, FILL_RANDOM, 2, P, E, 1, "blk.%d.proj.weight", il);
            add(&tl, ELI_TYPE_F32, FILL_ONES, 1, E, 1, 1, "blk.%d.post_norm.weight", il);
        }
    }

    /* ---- metadata ---- */
    eli_error err = {0};
    eli_gguf_writer *w = eli_gguf_writer_open(out, &err);
    if (!w) return cli_die("%s", err.msg);
    char name[64];
    snprintf(name, sizeof name, "synth-%s-%s", A->name, type_s);
    int rc = 0;
#define KV(call)              \
    do {                      \
        if (!rc) rc = (call); \
    } while (0)
    KV(eli_gguf_set_str(w, "general.architecture", "gemma4", &err));
    KV(eli_gguf_set_str(w, "general.name", name, &err));
    KV(eli_gguf_set_u32(w, "general.file_type", file_type, &err));
    KV(eli_gguf_set_u32(w, "general.quantization_version", 2, &err));
    KV(eli_gguf_set_u32(w, "gemma4.block_count", (uint32_t)L, &err));
    KV(eli_gguf_set_u32(w, "gemma4.context_length", A->n_ctx, &err));
    KV(eli_gguf_set_u32(w, "gemma4.embedding_length", (uint32_t)E, &err));
    if (A->double_wide) KV(eli_gguf_set_arr(w, "gemma4.feed_forward_length", GGUF_VT_UINT32, n_ff, (uint64_t)L, &err));
    else KV(eli_gguf_set_u32(w, "gemma4.feed_forward_length", (uint32_t)A->n_ff, &err));
    KV(eli_gguf_set_u32(w, "gemma4.attention.head_count", (uint32_t)A->n_head, &err));
    if (A->n_head_kv_swa != A->n_head_kv_full)
        KV(eli_gguf_set_arr(w, "gemma4.attention.head_count_kv", GGUF_VT_UINT32, hkv, (uint64_t)L, &err));
    else KV(eli_gguf_set_u32(w, "gemma4.attention.head_count_kv", (uint32_t)A->n_head_kv_swa, &err));
    KV(eli_gguf_set_u32(w, "gemma4.attention.key_length", HD_FULL, &err));
    KV(eli_gguf_set_u32(w, "gemma4.attention.value_length", HD_FULL, &err));
    KV(eli_gguf_set_u32(w, "gemma4.attention.key_length_swa", HD_SWA, &err));
    KV(eli_gguf_set_u32(w, "gemma4.attention.value_length_swa", HD_SWA, &err));
    KV(eli_gguf_set_f32(w, "gemma4.attention.layer_norm_rms_epsilon", 1e-6f, &err));
    KV(eli_gguf_set_u32(w, "gemma4.attention.sliding_window", (uint32_t)A->n_swa, &err));
    KV(eli_gguf_set_arr(w, "gemma4.attention.sliding_window_pattern", GGUF_VT_BOOL, pattern, (uint64_t)L, &err));
    KV(eli_gguf_set_u32(w, "gemma4.attention.shared_kv_layers", (uint32_t)n_shared, &err));
    KV(eli_gguf_set_u32(w, "gemma4.embedding_length_per_layer_input", (uint32_t)P, &err));
    KV(eli_gguf_set_f32(w, "gemma4.rope.freq_base", 1e6f, &err));
    KV(eli_gguf_set_f32(w, "gemma4.rope.freq_base_swa", 1e4f, &err));
    KV(eli_gguf_set_u32(w, "gemma4.rope.dimension_count", HD_FULL, &err));
    KV(eli_gguf_set_u32(w, "gemma4.rope.dimension_count_swa", HD_SWA, &err));
    KV(eli_gguf_set_f32(w, "gemma4.final_logit_softcapping", 30.0f, &err));
    if (A->n_expert) {
        KV(eli_gguf_set_u32(w, "gemma4.expert_count", (uint32_t)A->n_expert, &err));
        KV(eli_gguf_set_u32(w, "gemma4.expert_used_count", (uint32_t)A->n_expert_used, &err));
        KV(eli_gguf_set_u32(w, "gemma4.expert_feed_forward_length", (uint32_t)A->n_ff_exp, &err));
    }

    /* tokenizer: "<tokN>" everywhere, the specials at their ids (spec 7), byte tokens, a few letters with
     * "▁x" merges so the BPE merges list is valid */
    char **tok = calloc(N_VOCAB, sizeof *tok);
    int32_t *ttype = malloc(sizeof(int32_t) * N_VOCAB);
    char *pool = malloc((size_t)N_VOCAB * 16);
    if (!tok || !ttype || !pool) return cli_die("out of memory");
    for (int i = 0; i < N_VOCAB; i++) {
        tok[i] = pool + (size_t)i * 16;
        snprintf(tok[i], 16, "<tok%d>", i);
        ttype[i] = 1; /* normal */
    }
    static const struct { int id; const char *s; int type; } sp[] = {
        {0, "<pad>", 3}, {1, "<eos>", 3}, {2, "<bos>", 3}, {3, "<unk>", 2}, {4, "<mask>", 4},
        {46, "<|tool>", 3}, {47, "<tool|>", 3}, {48, "<|tool_call>", 4}, {49, "<tool_call|>", 4},
        {50, "<|tool_response>", 4}, {51, "<tool_response|>", 4}, {52, "<|\"|>", 4}, {98, "<|think|>", 3},
        {100, "<|channel>", 4}, {101, "<channel|>", 4}, {105, "<|turn>", 3}, {106, "<turn|>", 3},
        {107, "\n", 1}, {108, "\n\n", 1}, {109, "\n\n\n", 1}, {255999, "<|image>", 3}, {256000, "<|audio>", 3},
        {258880, "<|image|>", 3}, {258881, "<|audio|>", 3}, {258882, "<image|>", 3}, {258883, "<audio|>", 3},
        {258884, "<|video|>", 3},
    };
    for (size_t i = 0; i < sizeof sp / sizeof sp[0]; i++) {
        snprintf(tok[sp[i].id], 16, "%s", sp[i].s);
        ttype[sp[i].id] = sp[i].type;
    }
    for (int b = 0; b < 256; b++) {
        snprintf(tok[238 + b], 16, "<0x%02X>", b);
        ttype[238 + b] = 6; /* byte */
    }
    /* letters at 600.., "▁" at 700, "▁a".."▁z" at 701.. */
    char *merges_pool = malloc(26 * 16);
    const char *merges[26];
    snprintf(tok[700], 16, "\xe2\x96\x81");
    for (int c = 0; c < 26; c++) {
        snprintf(tok[600 + c], 16, "%c", 'a' + c);
        snprintf(tok[701 + c], 16, "\xe2\x96\x81%c", 'a' + c);
        snprintf(merges_pool + 16 * c, 16, "\xe2\x96\x81 %c", 'a' + c);
        merges[c] = merges_pool + 16 * c;
    }
    KV(eli_gguf_set_str(w, "tokenizer.ggml.model", "gemma4", &err));
    KV(eli_gguf_set_str(w, "tokenizer.ggml.pre", "gemma4", &err));
    KV(eli_gguf_set_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)tok, N_VOCAB, &err));
    KV(eli_gguf_set_arr(w, "tokenizer.ggml.token_type", GGUF_VT_INT32, ttype, N_VOCAB, &err));
    KV(eli_gguf_set_arr_str(w, "tokenizer.ggml.merges", merges, 26, &err));
    KV(eli_gguf_set_u32(w, "tokenizer.ggml.bos_token_id", 2, &err));
    KV(eli_gguf_set_u32(w, "tokenizer.ggml.eos_token_id", 1, &err));
    KV(eli_gguf_set_u32(w, "tokenizer.ggml.unknown_token_id", 3, &err));
    KV(eli_gguf_set_u32(w, "tokenizer.ggml.padding_token_id", 0, &err));
    KV(eli_gguf_set_bool(w, "tokenizer.ggml.add_bos_token", 1, &err));
    KV(eli_gguf_set_bool(w, "tokenizer.ggml.add_eos_token", 0, &err));
    free(tok), free(ttype), free(pool), free(merges_pool);
    for (size_t i = 0; i < tl.n && !rc; i++)
        rc = eli_gguf_add_tensor(w, tl.t[i].name, tl.t[i].type, tl.t[i].n_dims, tl.t[i].ne, &err);
    if (rc) {
        eli_gguf_writer_abort(w);
        return cli_die("%s", err.msg);
    }
    fprintf(stderr, "synth: %s %s, %d layers (%d KV-shared), %zu tensors, %.2f GiB of tensor data\n", A->name, type_s, L,
            n_shared, tl.n, (double)eli_gguf_data_remaining(w) / 1073741824.0);

    /* ---- data, a chunk of rows at a time ---- */
    eli_pool *tp = eli_pool_create((int)threads);
    int64_t max_cols = 0;
    for (size_t i = 0; i < tl.n; i++) max_cols = tl.t[i].ne[0] > max_cols ? tl.t[i].ne[0] : max_cols;
    const size_t chunk_bytes = (size_t)32 << 20;
    uint8_t *buf = malloc(chunk_bytes + (size_t)max_cols * 4);
    float *scratch = malloc(sizeof(float) * (size_t)max_cols * (size_t)threads);
    if (!tp || !buf || !scratch) return cli_die("out of memory");
    const time_t t_start = time(NULL);
    for (size_t i = 0; i < tl.n && !rc; i++) {
        const tdef *t = &tl.t[i];
        const size_t rb = eli_row_size(t->type, t->ne[0]);
        const int64_t rows = t->ne[1] * t->ne[2];
        int64_t per = (int64_t)(chunk_bytes / rb);
        if (per < 1) per = 1;
        for (int64_t r0 = 0; r0 < rows && !rc; r0 += per) {
            gen_job j = {t, (uint64_t)seed, (uint64_t)i, r0, rows - r0 < per ? rows - r0 : per, t->ne[0], rb, buf, scratch};
            eli_pool_run(tp, gen_task, &j);
            rc = eli_gguf_write_data(w, buf, (size_t)j.nrows * rb, &err);
        }
    }
    eli_pool_free(tp);
    free(buf), free(scratch), free(tl.t), free(is_swa), free(n_ff), free(hkv), free(pattern);
    if (rc) {
        eli_gguf_writer_abort(w);
        return cli_die("%s", err.msg);
    }
    if (eli_gguf_writer_commit(w, &err)) return cli_die("%s", err.msg);
    fprintf(stderr, "synth: wrote %s in %lds\n", out, (long)(time(NULL) - t_start));
    return 0;
}
