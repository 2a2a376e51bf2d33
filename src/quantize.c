/* eliza-infer quantize (quantize.h): llama-quantize's tensor choices and file layout, our quantizers. */
#include "quantize.h"

#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "gguf.h"
#include "gguf_write.h"
#include "quants.h"

/* The mixture rules of llama.cpp, by the file type they belong to. */
enum { MIX_NONE, MIX_Q4_K_S, MIX_Q4_K_M, MIX_Q5_K_S, MIX_Q5_K_M };

/* general.file_type: llama.cpp's LLAMA_FTYPE numbers. tq4_0 has none there; ours is the type id, far
 * from llama.cpp's (0..41 today), so no reader takes the file for one of its own types. */
static const eli_qftype ftypes[] = {
    {"f32", 0, ELI_TYPE_F32, 0},      {"f16", 1, ELI_TYPE_F16, 0},      {"bf16", 32, ELI_TYPE_BF16, 0},
    {"q8_0", 7, ELI_TYPE_Q8_0, 0},    {"q4_0", 2, ELI_TYPE_Q4_0, 0},    {"q4_1", 3, ELI_TYPE_Q4_1, 0},
    {"q5_0", 8, ELI_TYPE_Q5_0, 0},    {"q5_1", 9, ELI_TYPE_Q5_1, 0},    {"q4_k", 14, ELI_TYPE_Q4_K, 1},
    {"q5_k", 16, ELI_TYPE_Q5_K, 1},   {"q4_k_s", 14, ELI_TYPE_Q4_K, 0}, {"q4_k_m", 15, ELI_TYPE_Q4_K, 0},
    {"q5_k_s", 16, ELI_TYPE_Q5_K, 0}, {"q5_k_m", 17, ELI_TYPE_Q5_K, 0}, {"q6_k", 18, ELI_TYPE_Q6_K, 0},
    {"tq4_0", ELI_TYPE_TQ4_0, ELI_TYPE_TQ4_0, 0},
};

const eli_qftype *eli_qftype_find(const char *name) {
    for (size_t i = 0; name && i < sizeof ftypes / sizeof ftypes[0]; i++)
        if (!strcasecmp(name, ftypes[i].name)) return &ftypes[i];
    return NULL;
}

const eli_qftype *eli_qftype_all(int *n_out) {
    *n_out = (int)(sizeof ftypes / sizeof ftypes[0]);
    return ftypes;
}

static int mixture_of(const eli_qftype *ft) {
    if (ft->pure) return MIX_NONE;
    switch (ft->ftype) {
    case 14: return MIX_Q4_K_S;
    case 15: return MIX_Q4_K_M;
    case 16: return MIX_Q5_K_S;
    case 17: return MIX_Q5_K_M;
    case ELI_TYPE_TQ4_0: return MIX_Q4_K_M; /* q4_k_m's rules, tq4_0 where it has Q4_K */
    default: return MIX_NONE;
    }
}

/* ------------------------------------------------------------------------------------------------------
 * Which tensors, which types (llama-quant.cpp)
 * ---------------------------------------------------------------------------------------------------- */

enum { CAT_TOKEN_EMBD, CAT_ATTN_Q, CAT_ATTN_V, CAT_ATTN_K, CAT_ATTN_QKV, CAT_ATTN_KV_B, CAT_ATTN_OUTPUT, CAT_FFN_UP,
       CAT_FFN_GATE, CAT_FFN_DOWN, CAT_OUTPUT, CAT_OTHER };

static int has(const char *s, const char *sub) { return strstr(s, sub) != NULL; }

static int category(const char *name) {
    if (!strcmp(name, "output.weight")) return CAT_OUTPUT;
    if (!strcmp(name, "token_embd.weight") || !strcmp(name, "per_layer_token_embd.weight")) return CAT_TOKEN_EMBD;
    if (has(name, "attn_qkv.weight")) return CAT_ATTN_QKV;
    if (has(name, "attn_kv_b.weight")) return CAT_ATTN_KV_B;
    if (has(name, "attn_v.weight")) return CAT_ATTN_V;
    if (has(name, "attn_k.weight")) return CAT_ATTN_K;
    if (has(name, "attn_q.weight")) return CAT_ATTN_Q;
    if (has(name, "attn_output.weight")) return CAT_ATTN_OUTPUT;
    if (has(name, "ffn_up")) return CAT_FFN_UP;
    if (has(name, "ffn_gate")) return CAT_FFN_GATE;
    if (has(name, "ffn_down")) return CAT_FFN_DOWN;
    return CAT_OTHER;
}

static int is_attn_v(int cat) { return cat == CAT_ATTN_V || cat == CAT_ATTN_QKV || cat == CAT_ATTN_KV_B; }

/* ggml's dimension count: trailing dimensions of 1 do not count */
static uint32_t n_dims_of(const eli_gguf_tensor *t) {
    uint32_t n = 1;
    for (uint32_t i = 1; i < t->n_dims; i++)
        if (t->ne[i] > 1) n = i + 1;
    return n;
}

/* 2-D and 3-D "*weight" tensors, but the small or special ones llama.cpp leaves as they are */
static int allows_quantization(const eli_gguf_tensor *t) {
    static const char *const keep[] = {
        "_norm.weight", "ffn_gate_inp.weight", "ffn_gate_tid2eid.weight", "altup", "laurel", "per_layer_model_proj",
        "ssm_conv1d", "shortconv.conv.weight", "indexer.k_proj.weight", "indexer.q_proj.weight",
        "time_mix_first.weight", "time_mix_w0.weight", "time_mix_w1.weight", "time_mix_w2.weight",
        "time_mix_v0.weight", "time_mix_v1.weight", "time_mix_v2.weight", "time_mix_a0.weight", "time_mix_a1.weight",
        "time_mix_a2.weight", "time_mix_g1.weight", "time_mix_g2.weight", "time_mix_decay_w1.weight",
        "time_mix_decay_w2.weight", "time_mix_lerp_fused.weight", "attn_rel_b.weight", ".position_embd",
        "sam.pos_embd", "sam.neck.", "sam.net_", ".rel_pos", ".patch_embd", ".patch_merger", "a.rvq.codebook",
        "mm.a.code_embd"};
    const char *name = t->name;
    const size_t len = strlen(name);
    if (n_dims_of(t) < 2 || len < 6 || strcmp(name + len - 6, "weight")) return 0;
    if (!strcmp(name, "position_embd.weight") || !strcmp(name, "token_types.weight")) return 0;
    for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++)
        if (has(name, keep[i])) return 0;
    return 1;
}

static int is_quantized(uint32_t type) { return type != ELI_TYPE_F32 && type != ELI_TYPE_F16 && type != ELI_TYPE_BF16; }

/* the first and last eighth of the layers and every third one between get more bits */
static int use_more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

/* "blk.N." -> N; -1 for names without a layer */
static long layer_of(const char *name) {
    if (strncmp(name, "blk.", 4) || !isdigit((unsigned char)name[4])) return -1;
    return strtol(name + 4, NULL, 10);
}

typedef struct {
    const eli_qftype *ft;
    int mix;
    int n_layer, n_expert;
    int tied;
    int n_attn_v, i_attn_v, i_ffn_down;
    uint64_t n_fallback;
} qstate;

/* llama.cpp's llama_tensor_get_type_impl, for the file types above */
static int mixture_type(qstate *qs, const eli_gguf_tensor *t, int cat, uint32_t *type, eli_error *err) {
    uint32_t nt = *type;
    const int mix = qs->mix;
    if (cat == CAT_OUTPUT || (qs->tied && cat == CAT_TOKEN_EMBD)) {
        if (t->ne[0] % eli_type_info(nt)->block_size) nt = ELI_TYPE_Q8_0;
        else if (nt != ELI_TYPE_Q8_0) nt = ELI_TYPE_Q6_K;
    } else if (cat == CAT_TOKEN_EMBD) {
        /* an untied token embedding keeps the file type's default */
    } else if (is_attn_v(cat)) {
        if ((mix == MIX_Q4_K_M || mix == MIX_Q5_K_M) && use_more_bits(qs->i_attn_v, qs->n_attn_v)) nt = ELI_TYPE_Q6_K;
        else if (mix == MIX_Q4_K_S && qs->i_attn_v < 4) nt = ELI_TYPE_Q5_K;
        if (qs->n_expert == 8) nt = ELI_TYPE_Q8_0;
        qs->i_attn_v++;
    } else if (cat == CAT_ATTN_K) {
        if (qs->n_expert == 8) nt = ELI_TYPE_Q8_0;
    } else if (cat == CAT_FFN_DOWN) {
        long i = qs->i_ffn_down;
        const int n = qs->n_layer;
        if (qs->n_expert > 1) { /* expert tensors are not in layer order: the layer comes from the name */
            i = layer_of(t->name);
            if (i < 0 || i >= n)
                return eli_fail(err, ELI_ERR_INVALID_ARG, "tensor '%s': no layer index in [0, %d) in its name", t->name, n);
        }
        if ((mix == MIX_Q4_K_M || mix == MIX_Q5_K_M) && use_more_bits((int)i, n)) nt = ELI_TYPE_Q6_K;
        else if (mix == MIX_Q4_K_S && i < n / 8) nt = ELI_TYPE_Q5_K;
        qs->i_ffn_down++;
    } else if (cat == CAT_ATTN_OUTPUT) {
        if (qs->n_expert == 8 && (mix == MIX_Q4_K_S || mix == MIX_Q4_K_M)) nt = ELI_TYPE_Q5_K;
    } else if (cat == CAT_ATTN_QKV) {
        if (mix == MIX_Q4_K_M) nt = ELI_TYPE_Q5_K;
        else if (mix == MIX_Q5_K_M) nt = ELI_TYPE_Q6_K;
    }
    *type = nt;
    return ELI_OK;
}

/* a type whose blocks do not divide the rows falls back to one whose do (llama.cpp's tensor_type_fallback) */
static int fallback_type(qstate *qs, const eli_gguf_tensor *t, uint32_t *type, eli_error *err) {
    const uint32_t nt = *type;
    if (t->ne[0] % eli_type_info(nt)->block_size == 0) return ELI_OK;
    qs->n_fallback++;
    uint32_t fb;
    switch (nt) {
    case ELI_TYPE_Q2_K:
    case ELI_TYPE_Q3_K: fb = ELI_TYPE_Q4_0; break;
    case ELI_TYPE_Q4_K:
    case ELI_TYPE_TQ4_0: fb = ELI_TYPE_Q5_0; break;
    case ELI_TYPE_Q5_K: fb = ELI_TYPE_Q5_1; break;
    case ELI_TYPE_Q6_K: fb = ELI_TYPE_Q8_0; break;
    default:
        return eli_fail(err, ELI_ERR_INVALID_ARG, "tensor '%s': rows of %lld values do not fit %s blocks and %s has no fallback type",
                        t->name, (long long)t->ne[0], eli_type_name(nt), eli_type_name(nt));
    }
    *type = t->ne[0] % eli_type_info(fb)->block_size ? ELI_TYPE_F16 : fb;
    return ELI_OK;
}

static int target_type(qstate *qs, const eli_gguf_tensor *t, uint32_t *type, eli_error *err) {
    *type = t->type;
    if (!allows_quantization(t)) return ELI_OK;
    *type = qs->ft->type;
    if (!is_quantized(*type)) return ELI_OK;
    int rc = qs->ft->pure ? ELI_OK : mixture_type(qs, t, category(t->name), type, err);
    return rc ? rc : fallback_type(qs, t, type, err);
}

/* llama.cpp's tensor order: by layer (tensors of no layer first), then by name */
static int tensor_order(const void *a, const void *b) {
    const eli_gguf_tensor *x = *(const eli_gguf_tensor *const *)a, *y = *(const eli_gguf_tensor *const *)b;
    const long lx = layer_of(x->name), ly = layer_of(y->name);
    if (lx != ly) return lx < ly ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* ------------------------------------------------------------------------------------------------------
 * Conversion, a chunk of rows at a time on n threads
 * ---------------------------------------------------------------------------------------------------- */

typedef struct {
    uint32_t tin, tout;
    int64_t cols, rows;
    const uint8_t *src;
    uint8_t *dst;
    float *f32; /* cols floats per thread */
    size_t in_row, out_row;
    int nth;
} convert_job;

typedef struct {
    const convert_job *j;
    int ith;
} convert_part;

/* rows [rows * ith / nth, rows * (ith + 1) / nth): each row's bytes are the same whichever thread makes them */
static void *convert_rows(void *arg) {
    const convert_part *pt = arg;
    const convert_job *j = pt->j;
    const int64_t b = j->rows * pt->ith / j->nth, e = j->rows * (pt->ith + 1) / j->nth;
    float *x = j->f32 + (size_t)pt->ith * (size_t)j->cols;
    for (int64_t r = b; r < e; r++) {
        eli_dequantize_row(j->tin, j->src + (size_t)r * j->in_row, x, j->cols);
        eli_quantize_row(j->tout, x, j->dst + (size_t)r * j->out_row, j->cols);
    }
    return NULL;
}

#define MAX_THREADS 256

/* the job on j->nth threads (the caller is one of them; a thread that cannot start leaves its part to the
 * caller) */
static void convert(const convert_job *j) {
    pthread_t th[MAX_THREADS];
    convert_part part[MAX_THREADS];
    int started[MAX_THREADS] = {0};
    for (int i = 0; i < j->nth; i++) part[i] = (convert_part){j, i};
    for (int i = 1; i < j->nth; i++) started[i] = pthread_create(&th[i], NULL, convert_rows, &part[i]) == 0;
    convert_rows(&part[0]);
    for (int i = 1; i < j->nth; i++) {
        if (started[i]) pthread_join(th[i], NULL);
        else convert_rows(&part[i]);
    }
}

#define CHUNK_BYTES (32u << 20) /* output bytes per chunk of rows */

static int write_tensor(eli_gguf_writer *w, int nth, const eli_gguf_tensor *t, uint32_t tout, uint8_t **buf,
                        size_t *buf_cap, float **f32, eli_error *err) {
    const int64_t cols = t->ne[0], rows = eli_gguf_tensor_nelements(t) / (cols ? cols : 1);
    if (tout == t->type) return eli_gguf_write_data(w, t->data, (size_t)t->nbytes, err);
    const eli_type_traits *ti = eli_type_info(t->type);
    if (!ti || !ti->dequantize)
        return eli_fail(err, ELI_ERR_INVALID_ARG, "tensor '%s' is %s, a type eliza-infer cannot read", t->name,
                        eli_type_name(t->type));
    const size_t in_row = eli_row_size(t->type, cols), out_row = eli_row_size(tout, cols);
    int64_t chunk = (int64_t)(CHUNK_BYTES / out_row);
    if (chunk < 1) chunk = 1;
    if (chunk > rows) chunk = rows;
    const size_t need = (size_t)chunk * out_row;
    if (need > *buf_cap) {
        uint8_t *p = realloc(*buf, need);
        if (!p) return eli_fail(err, ELI_ERR_OOM, "out of memory converting '%s'", t->name);
        *buf = p, *buf_cap = need;
    }
    float *x = realloc(*f32, sizeof(float) * (size_t)cols * (size_t)nth);
    if (!x) return eli_fail(err, ELI_ERR_OOM, "out of memory converting '%s'", t->name);
    *f32 = x;
    for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
        const int64_t n = rows - r0 < chunk ? rows - r0 : chunk;
        convert_job j = {t->type, tout, cols, n, (const uint8_t *)t->data + (size_t)r0 * in_row, *buf, x, in_row, out_row,
                         n < nth ? (int)n : nth};
        convert(&j);
        int rc = eli_gguf_write_data(w, *buf, (size_t)n * out_row, err);
        if (rc) return rc;
    }
    return ELI_OK;
}

/* ------------------------------------------------------------------------------------------------------ */

static int read_hparams(const eli_gguf_file *f, qstate *qs, eli_error *err) {
    eli_gguf_str arch;
    int rc = eli_gguf_get_str(f, "general.architecture", &arch, err);
    if (rc <= 0) return rc ? rc : eli_fail(err, ELI_ERR_INVALID_ARG, "no general.architecture");
    char key[128];
    const int al = arch.len < 64 ? (int)arch.len : 64;
    uint32_t v = 0;
    snprintf(key, sizeof key, "%.*s.block_count", al, arch.ptr);
    if ((rc = eli_gguf_get_u32(f, key, &v, err)) < 0) return rc;
    if (rc == 0 || v == 0 || v > 4096) return eli_fail(err, ELI_ERR_INVALID_ARG, "%s missing or out of range", key);
    qs->n_layer = (int)v;
    v = 0;
    snprintf(key, sizeof key, "%.*s.expert_count", al, arch.ptr);
    if ((rc = eli_gguf_get_u32(f, key, &v, err)) < 0) return rc;
    qs->n_expert = (int)(v < 1 ? 1 : v > 65536 ? 65536 : v);
    return ELI_OK;
}

int eli_quantize_file(const char *in, const char *out, const eli_qftype *ft, int n_threads, eli_quantize_stats *stats,
                      eli_error *err) {
    eli_quantize_stats st = {0};
    qstate qs = {ft, mixture_of(ft), 0, 1, 1, 0, 0, 0, 0};
    eli_gguf_file *f = eli_gguf_open(in, err);
    if (!f) return err ? err->code : ELI_ERR_INVALID_ARG;
    const uint64_t nt = eli_gguf_n_tensors(f);
    const eli_gguf_tensor **order = calloc(nt ? nt : 1, sizeof *order);
    uint32_t *types = calloc(nt ? nt : 1, sizeof *types);
    const int nth = n_threads < 1 ? 1 : n_threads > MAX_THREADS ? MAX_THREADS : n_threads;
    eli_gguf_writer *w = NULL;
    uint8_t *buf = NULL;
    size_t buf_cap = 0;
    float *f32 = NULL;
    int rc = !order || !types ? eli_fail(err, ELI_ERR_OOM, "out of memory") : read_hparams(f, &qs, err);
    for (uint64_t i = 0; !rc && i < nt; i++) {
        order[i] = eli_gguf_tensor_at(f, i);
        const int cat = category(order[i]->name);
        qs.n_attn_v += is_attn_v(cat);
        if (cat == CAT_OUTPUT) qs.tied = 0;
    }
    if (!rc) qsort(order, nt, sizeof *order, tensor_order);
    for (uint64_t i = 0; !rc && i < nt; i++) rc = target_type(&qs, order[i], &types[i], err);
    if (!rc && !(w = eli_gguf_writer_open(out, err))) rc = err ? err->code : ELI_ERR_INVALID_ARG;
    /* the input's metadata, then the quantization version and file type at the end, as llama.cpp writes them */
    for (uint64_t i = 0; !rc && i < eli_gguf_n_kv(f); i++) {
        const eli_gguf_kv *kv = eli_gguf_kv_at(f, i);
        static const char *const dropped[] = {"general.quantization_version", "general.file_type", "split.no",
                                              "split.count", "split.tensors.count"};
        int drop = 0;
        for (size_t k = 0; k < sizeof dropped / sizeof dropped[0]; k++) drop |= !strcmp(kv->key, dropped[k]);
        if (!strcmp(kv->key, "general.alignment")) rc = eli_gguf_set_u32(w, kv->key, 32, err); /* our layout's */
        else if (!drop) rc = eli_gguf_copy_kv(w, kv->key, &kv->value, err);
    }
    if (!rc) rc = eli_gguf_set_u32(w, "general.quantization_version", 2, err);
    if (!rc) rc = eli_gguf_set_u32(w, "general.file_type", ft->ftype, err);
    for (uint64_t i = 0; !rc && i < nt; i++) {
        const uint32_t nd = n_dims_of(order[i]);
        if (!eli_row_size(types[i], order[i]->ne[0]))
            rc = eli_fail(err, ELI_ERR_INVALID_ARG, "tensor '%s' (%s) cannot be written", order[i]->name, eli_type_name(types[i]));
        else rc = eli_gguf_add_tensor(w, order[i]->name, types[i], nd, order[i]->ne, err);
    }
    for (uint64_t i = 0; !rc && i < nt; i++) {
        rc = write_tensor(w, nth, order[i], types[i], &buf, &buf_cap, &f32, err);
        if (rc) eli_error_prefix(err, "tensor '%s'", order[i]->name);
        st.n_quantized += types[i] != order[i]->type;
        st.bytes_in += order[i]->nbytes;
        st.bytes_out += eli_row_size(types[i], order[i]->ne[0]) * (uint64_t)(eli_gguf_tensor_nelements(order[i]) / order[i]->ne[0]);
        st.n_weights += (uint64_t)eli_gguf_tensor_nelements(order[i]);
    }
    if (w) {
        if (!rc) rc = eli_gguf_writer_commit(w, err);
        else eli_gguf_writer_abort(w);
    }
    st.n_tensors = nt;
    st.n_fallback = qs.n_fallback;
    if (stats) *stats = st;
    free(order), free(types), free(buf), free(f32);
    eli_gguf_close(f);
    return rc;
}
