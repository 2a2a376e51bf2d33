/* Projector GGUF (mmproj): towers, shared hyperparameters, checked tensor binding, clippable linears. */
#include "mmproj.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quants.h"

static const char *const TOWER_NAME[2] = {"vision", "audio"};

const char *eli_mm_tower_name(eli_mm_tower t) { return TOWER_NAME[t == ELI_MM_AUDIO]; }

const char *eli_mmproj_type(const eli_mmproj *p, eli_mm_tower t) {
    return p->has[t == ELI_MM_AUDIO] ? p->proj_type[t == ELI_MM_AUDIO] : NULL;
}

/* ---- keys ---- */

int eli_mmproj_u32(const eli_mmproj *p, const char *key, int required, int lo, int hi, int *out, eli_error *err) {
    uint32_t v;
    const int rc = eli_gguf_get_u32(p->file, key, &v, err);
    if (rc < 0) return rc;
    if (rc == 0)
        return required ? eli_fail(err, ELI_ERR_INVALID_ARG, "missing required key '%s'", key) : ELI_OK;
    if ((int64_t)v < lo || (int64_t)v > hi)
        return eli_fail(err, ELI_ERR_INVALID_ARG, "key '%s' = %u is outside [%d, %d]", key, v, lo, hi);
    *out = (int)v;
    return ELI_OK;
}

int eli_mmproj_f32(const eli_mmproj *p, const char *key, int required, float *out, eli_error *err) {
    float v;
    const int rc = eli_gguf_get_f32(p->file, key, &v, err);
    if (rc < 0) return rc;
    if (rc == 0)
        return required ? eli_fail(err, ELI_ERR_INVALID_ARG, "missing required key '%s'", key) : ELI_OK;
    if (!isfinite(v)) return eli_fail(err, ELI_ERR_INVALID_ARG, "key '%s' = %g is not finite", key, (double)v);
    *out = v;
    return ELI_OK;
}

int eli_mmproj_bool(const eli_mmproj *p, const char *key, int *out, eli_error *err) {
    const int rc = eli_gguf_get_bool(p->file, key, out, err);
    return rc < 0 ? rc : ELI_OK;
}

int eli_mmproj_f32_array(const eli_mmproj *p, const char *key, int required, int n, float *out, eli_error *err) {
    const eli_gguf_value *v;
    int rc = eli_gguf_get_arr(p->file, key, GGUF_VT_COUNT, &v, err);
    if (rc < 0) return rc;
    if (rc == 0)
        return required ? eli_fail(err, ELI_ERR_INVALID_ARG, "missing required key '%s'", key) : ELI_OK;
    if (eli_gguf_value_count(v) < (uint64_t)n)
        return eli_fail(err, ELI_ERR_INVALID_ARG, "key '%s' has %llu elements, expected at least %d", key,
                        (unsigned long long)eli_gguf_value_count(v), n);
    for (int i = 0; i < n; i++) {
        double d;
        if ((rc = eli_gguf_value_f64(v, (uint64_t)i, &d, key, err))) return rc;
        if (!isfinite(d) || fabs(d) > FLT_MAX)
            return eli_fail(err, ELI_ERR_INVALID_ARG, "key '%s'[%d] = %g is not a finite float", key, i, d);
        out[i] = (float)d;
    }
    return ELI_OK;
}

int eli_mmproj_hparams(const eli_mmproj *p, eli_mm_tower t, eli_mm_hparams *hp, eli_error *err) {
    const char *tn = eli_mm_tower_name(t);
    if (!eli_mmproj_type(p, t)) return eli_fail(err, ELI_ERR_INVALID_ARG, "the projector has no %s encoder", tn);
    memset(hp, 0, sizeof *hp);
    char key[96];
    int rc;
#define U32(suffix, required, lo, hi, field)                                                    \
    do {                                                                                        \
        snprintf(key, sizeof key, "clip.%s.%s", tn, suffix);                                    \
        if ((rc = eli_mmproj_u32(p, key, required, lo, hi, &hp->field, err))) return rc;        \
    } while (0)
    U32("block_count", 1, 1, ELI_MM_MAX_LAYERS, n_layer);
    U32("embedding_length", 1, 1, ELI_MM_MAX_DIM, n_embd);
    U32("feed_forward_length", 1, 1, ELI_MM_MAX_DIM, n_ff);
    U32("attention.head_count", 1, 1, ELI_MM_MAX_DIM, n_head);
    hp->n_head_kv = hp->n_head;
    U32("attention.head_count_kv", 0, 1, ELI_MM_MAX_DIM, n_head_kv);
    U32("attention.head_dim", 0, 1, ELI_MM_MAX_DIM, head_dim);
    U32("projection_dim", 1, 1, ELI_MM_MAX_DIM, proj_dim);
#undef U32
    if (!hp->head_dim) {
        if (hp->n_embd % hp->n_head)
            return eli_fail(err, ELI_ERR_INVALID_ARG,
                            "clip.%s.embedding_length %d is not a multiple of attention.head_count %d (and no head_dim key)",
                            tn, hp->n_embd, hp->n_head);
        hp->head_dim = hp->n_embd / hp->n_head;
    }
    if (hp->n_head % hp->n_head_kv)
        return eli_fail(err, ELI_ERR_INVALID_ARG, "clip.%s.attention.head_count %d is not a multiple of head_count_kv %d", tn,
                        hp->n_head, hp->n_head_kv);
    if ((int64_t)hp->n_head * hp->head_dim > ELI_MM_MAX_DIM)
        return eli_fail(err, ELI_ERR_INVALID_ARG, "clip.%s: %d heads of %d exceed %d", tn, hp->n_head, hp->head_dim,
                        ELI_MM_MAX_DIM);
    snprintf(key, sizeof key, "clip.%s.attention.layer_norm_epsilon", tn);
    if ((rc = eli_mmproj_f32(p, key, 1, &hp->eps, err))) return rc;
    if (hp->eps < 0.0f) return eli_fail(err, ELI_ERR_INVALID_ARG, "key '%s' = %g is negative", key, (double)hp->eps);
    return ELI_OK;
}

/* ---- tensors ---- */

static int shape_error(const eli_gguf_tensor *t, const int64_t ne[4], eli_error *err) {
    return eli_fail(err, ELI_ERR_INVALID_ARG,
                    "tensor '%s' has shape {%lld, %lld, %lld, %lld}, expected {%lld, %lld, %lld, %lld}", t->name,
                    (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3], (long long)ne[0],
                    (long long)ne[1], (long long)ne[2], (long long)ne[3]);
}

int eli_mmproj_tensor(const eli_mmproj *p, const char *name, int required, const int64_t ne[4], const eli_gguf_tensor **out,
                      eli_error *err) {
    *out = NULL;
    const eli_gguf_tensor *t = eli_gguf_find_tensor(p->file, name);
    if (!t) return required ? eli_fail(err, ELI_ERR_INVALID_ARG, "missing tensor '%s'", name) : ELI_OK;
    for (int d = 0; d < 4; d++)
        if (t->ne[d] != ne[d]) return shape_error(t, ne, err);
    const eli_type_traits *tt = eli_type_info(t->type);
    if (!tt || !tt->dequantize || !tt->vec_dot)
        return eli_fail(err, ELI_ERR_INVALID_ARG, "tensor '%s' has type %s (id %u), which this engine does not support",
                        name, eli_type_name(t->type), t->type);
    /* the kernels read F32 rows as floats and the other formats' fp16 fields as halves */
    if ((uintptr_t)t->data % (t->type == ELI_TYPE_F32 ? 4 : 2))
        return eli_fail(err, ELI_ERR_INVALID_ARG, "tensor '%s': its data is not aligned for type %s (file alignment %u)", name,
                        eli_type_name(t->type), eli_gguf_alignment(p->file));
    *out = t;
    return ELI_OK;
}

int eli_mmproj_f32_tensor(eli_mmproj *p, const char *name, int required, const int64_t ne[4], const float **out,
                          eli_error *err) {
    *out = NULL;
    const eli_gguf_tensor *t;
    int rc = eli_mmproj_tensor(p, name, required, ne, &t, err);
    if (rc || !t) return rc;
    const int64_t n = eli_gguf_tensor_nelements(t), row = t->ne[0];
    float *v = malloc((size_t)n * sizeof *v);
    void **grown = realloc(p->owned, (p->n_owned + 1) * sizeof *grown);
    if (grown) p->owned = grown;
    if (!v || !grown) {
        free(v);
        return eli_fail(err, ELI_ERR_OOM, "out of memory for tensor '%s'", name);
    }
    p->owned[p->n_owned++] = v;
    const size_t row_bytes = eli_row_size(t->type, row);
    for (int64_t r = 0; r < n / row; r++)
        eli_dequantize_row(t->type, (const uint8_t *)t->data + (size_t)r * row_bytes, v + r * row, row);
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(v[i]))
            return eli_fail(err, ELI_ERR_INVALID_ARG, "tensor '%s' element %lld is not finite", name, (long long)i);
    *out = v;
    return ELI_OK;
}

int eli_mmproj_matrix(const eli_mmproj *p, eli_weight *w, const char *name, int required, int64_t cols, int64_t rows,
                      eli_error *err) {
    memset(w, 0, sizeof *w);
    const int64_t ne[4] = {cols, rows, 1, 1};
    const eli_gguf_tensor *t;
    const int rc = eli_mmproj_tensor(p, name, required, ne, &t, err);
    if (rc || !t) return rc;
    w->data = t->data;
    w->type = t->type;
    w->cols = cols;
    w->rows = rows;
    w->n_mat = 1;
    w->row_bytes = eli_row_size(t->type, cols);
    w->name = t->name;
    return ELI_OK;
}

/* One clamp scalar `<prefix>.<what>`: 1 element of a float type; dflt when absent. */
static int clamp_scalar(const eli_mmproj *p, const char *prefix, const char *what, float dflt, float *out, eli_error *err) {
    char name[320];
    snprintf(name, sizeof name, "%s.%s", prefix, what);
    *out = dflt;
    const eli_gguf_tensor *t = eli_gguf_find_tensor(p->file, name);
    if (!t) return ELI_OK;
    if (eli_gguf_tensor_nelements(t) != 1)
        return eli_fail(err, ELI_ERR_INVALID_ARG, "clamp tensor '%s' has %lld elements, expected 1", name,
                        (long long)eli_gguf_tensor_nelements(t));
    if (t->type != ELI_TYPE_F32 && t->type != ELI_TYPE_F16 && t->type != ELI_TYPE_BF16)
        return eli_fail(err, ELI_ERR_INVALID_ARG, "clamp tensor '%s' has type %s, expected a float type", name,
                        eli_type_name(t->type));
    uint8_t raw[4] = {0};
    memcpy(raw, t->data, t->type == ELI_TYPE_F32 ? 4 : 2);
    eli_dequantize_row(t->type, raw, out, 1);
    if (isnan(*out)) return eli_fail(err, ELI_ERR_INVALID_ARG, "clamp tensor '%s' is NaN", name);
    return ELI_OK;
}

int eli_mmproj_linear(eli_mmproj *p, eli_mm_linear *l, const char *prefix, int required, int64_t n_in, int64_t n_out,
                      eli_error *err) {
    memset(l, 0, sizeof *l);
    char name[320];
    if (strlen(prefix) > 280)
        return eli_fail(err, ELI_ERR_INVALID_ARG, "tensor name prefix '%.40s...' is too long", prefix);
    snprintf(name, sizeof name, "%s.weight", prefix);
    int rc = eli_mmproj_matrix(p, &l->w, name, required, n_in, n_out, err);
    if (rc || !l->w.data) return rc;
    snprintf(name, sizeof name, "%s.bias", prefix);
    const int64_t ne[4] = {n_out, 1, 1, 1};
    if ((rc = eli_mmproj_f32_tensor(p, name, 0, ne, &l->bias, err))) return rc;
    if ((rc = clamp_scalar(p, prefix, "input_min", -FLT_MAX, &l->in_min, err))) return rc;
    if ((rc = clamp_scalar(p, prefix, "input_max", FLT_MAX, &l->in_max, err))) return rc;
    if ((rc = clamp_scalar(p, prefix, "output_min", -FLT_MAX, &l->out_min, err))) return rc;
    return clamp_scalar(p, prefix, "output_max", FLT_MAX, &l->out_max, err);
}

/* ---- the file ---- */

/* A tower's projector type: clip.projector_type when the file has it (one type for the whole file, as
 * llama.cpp reads it), else clip.<tower>.projector_type. */
static int read_tower(eli_mmproj *p, eli_mm_tower t, eli_error *err) {
    const char *tn = eli_mm_tower_name(t);
    char key[64];
    snprintf(key, sizeof key, "clip.has_%s_encoder", tn);
    int rc = eli_mmproj_bool(p, key, &p->has[t], err);
    if (rc || !p->has[t]) return rc;
    eli_gguf_str s;
    snprintf(key, sizeof key, "clip.projector_type");
    rc = eli_gguf_get_str(p->file, key, &s, err);
    if (rc == 0) {
        snprintf(key, sizeof key, "clip.%s.projector_type", tn);
        rc = eli_gguf_get_str(p->file, key, &s, err);
    }
    if (rc < 0) return rc;
    if (rc == 0) return eli_fail(err, ELI_ERR_INVALID_ARG, "the %s encoder has no projector type (key '%s')", tn, key);
    if (s.len == 0 || s.len >= sizeof p->proj_type[t] || memchr(s.ptr, 0, s.len))
        return eli_fail(err, ELI_ERR_INVALID_ARG, "key '%s' is not a plausible projector type (%llu bytes)", key,
                        (unsigned long long)s.len);
    memcpy(p->proj_type[t], s.ptr, s.len);
    p->proj_type[t][s.len] = 0;
    return ELI_OK;
}

eli_mmproj *eli_mmproj_from_gguf(eli_gguf_file *f, eli_error *err) {
    eli_gguf_str arch;
    const int rc = eli_gguf_get_str(f, "general.architecture", &arch, err);
    if (rc < 0) return NULL;
    if (rc == 1 && !eli_gguf_str_eq(arch, "clip")) {
        eli_fail(err, ELI_ERR_INVALID_ARG, "not a projector file: architecture '%.*s', expected 'clip'",
                 (int)(arch.len > 64 ? 64 : arch.len), arch.ptr);
        return NULL;
    }
    eli_mmproj *p = calloc(1, sizeof *p);
    if (!p) {
        eli_fail(err, ELI_ERR_OOM, "out of memory");
        return NULL;
    }
    p->file = f;
    if (read_tower(p, ELI_MM_VISION, err) || read_tower(p, ELI_MM_AUDIO, err)) goto fail;
    if (!p->has[ELI_MM_VISION] && !p->has[ELI_MM_AUDIO]) {
        eli_fail(err, ELI_ERR_INVALID_ARG, "the projector has neither a vision nor an audio encoder "
                                           "(clip.has_vision_encoder / clip.has_audio_encoder)");
        goto fail;
    }
    return p;
fail:
    p->file = NULL; /* the caller keeps the file on failure */
    eli_mmproj_free(p);
    return NULL;
}

eli_mmproj *eli_mmproj_open(const char *path, eli_error *err) {
    eli_gguf_file *f = eli_gguf_open(path, err);
    if (!f) return NULL;
    eli_mmproj *p = eli_mmproj_from_gguf(f, err);
    if (!p) {
        eli_error_prefix(err, "%s", path);
        eli_gguf_close(f);
    }
    return p;
}

void eli_mmproj_free(eli_mmproj *p) {
    if (!p) return;
    for (size_t i = 0; i < p->n_owned; i++) free(p->owned[i]);
    free(p->owned);
    eli_gguf_close(p->file);
    free(p);
}
