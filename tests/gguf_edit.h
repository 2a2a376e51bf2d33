/* GGUF edits for tests: copy a parsed GGUF file with keys dropped or set and tensors dropped, retyped,
 * reshaped, filled or added (tests/gguf_writer.h does the writing), to make every kind of broken file out of
 * a good one. A tensor whose new type and shape keep its byte size keeps its data; others get zeros. */
#ifndef ELI_TEST_GGUF_EDIT_H
#define ELI_TEST_GGUF_EDIT_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "gguf_writer.h"
#include "quants.h"

#define MAX_EDITS 8

typedef struct {
    const char *key;
    uint32_t type;
    gw_buf val; /* the value's payload */
} kv_set;

typedef struct {
    const char *name;
    int drop;
    int add;          /* append a new tensor (type and shape must be given) */
    int64_t type;     /* -1: keep */
    uint32_t n_dims;  /* 0: keep the shape */
    uint64_t ne[4];
    int fill;         /* 1: fill an F32 tensor with fill_value */
    float fill_value;
} tensor_edit;

typedef struct {
    const char *drop_keys[MAX_EDITS];
    int n_drop;
    kv_set sets[MAX_EDITS];
    int n_set;
    tensor_edit tens[MAX_EDITS];
    int n_tens;
} edit;

static inline void edit_free(edit *e) {
    for (int i = 0; i < e->n_set; i++) free(e->sets[i].val.p);
    memset(e, 0, sizeof *e);
}

static inline void drop_key(edit *e, const char *key) { e->drop_keys[e->n_drop++] = key; }

/* Sets (or adds) a key; returns the buffer to write the value payload into. */
static inline gw_buf *set_key(edit *e, const char *key, uint32_t type) {
    kv_set *s = &e->sets[e->n_set++];
    s->key = key;
    s->type = type;
    return &s->val;
}
static inline void set_u32(edit *e, const char *key, uint32_t v) { gw_u32(set_key(e, key, GGUF_VT_UINT32), v); }
static inline void set_f32(edit *e, const char *key, float v) { gw_f32(set_key(e, key, GGUF_VT_FLOAT32), v); }
static inline void set_str(edit *e, const char *key, const char *v) { gw_str(set_key(e, key, GGUF_VT_STRING), v); }
static inline void set_i32s(edit *e, const char *key, const int32_t *v, int n) {
    gw_buf *b = set_key(e, key, GGUF_VT_ARRAY);
    gw_arr(b, GGUF_VT_INT32, (uint64_t)n);
    for (int i = 0; i < n; i++) gw_u32(b, (uint32_t)v[i]);
}
static inline void set_bools(edit *e, const char *key, const uint8_t *v, int n) {
    gw_buf *b = set_key(e, key, GGUF_VT_ARRAY);
    gw_arr(b, GGUF_VT_BOOL, (uint64_t)n);
    gw_put(b, v, (size_t)n);
}

static inline tensor_edit *tensor(edit *e, const char *name) {
    tensor_edit *t = &e->tens[e->n_tens++];
    memset(t, 0, sizeof *t);
    t->name = name;
    t->type = -1;
    return t;
}
static inline void drop_tensor(edit *e, const char *name) { tensor(e, name)->drop = 1; }
static inline void retype(edit *e, const char *name, uint32_t type) { tensor(e, name)->type = type; }
static inline void reshape(edit *e, const char *name, uint32_t n_dims, uint64_t ne0, uint64_t ne1, uint64_t ne2) {
    tensor_edit *t = tensor(e, name);
    t->n_dims = n_dims;
    t->ne[0] = ne0, t->ne[1] = ne1, t->ne[2] = ne2, t->ne[3] = 1;
}
static inline void add_tensor(edit *e, const char *name, uint32_t n_dims, uint64_t ne0, uint64_t ne1, uint64_t ne2) {
    tensor_edit *t = tensor(e, name);
    t->add = 1;
    t->type = ELI_TYPE_F32;
    t->n_dims = n_dims;
    t->ne[0] = ne0, t->ne[1] = ne1, t->ne[2] = ne2, t->ne[3] = 1;
}
static inline void fill(edit *e, const char *name, float v) {
    tensor_edit *t = tensor(e, name);
    t->fill = 1;
    t->fill_value = v;
}

static inline size_t tensor_bytes(uint32_t type, const uint64_t *ne) {
    return eli_row_size(type, (int64_t)ne[0]) * (size_t)(ne[1] * ne[2] * ne[3]);
}

static inline void write_tensor(gw_file *w, const char *name, uint32_t type, uint32_t n_dims, const uint64_t *ne,
                         const void *src, const tensor_edit *te) {
    size_t nb = tensor_bytes(type, ne);
    if (te && te->fill && type == ELI_TYPE_F32) {
        float *d = malloc(nb ? nb : 1);
        for (size_t i = 0; i < nb / 4; i++) d[i] = te->fill_value;
        gw_tensor(w, name, type, n_dims, ne, d, nb);
        free(d);
    } else {
        gw_tensor(w, name, type, n_dims, ne, src, nb);
    }
}

/* Copies src with the edits applied; returns a malloc'ed file of *size bytes. */
static inline uint8_t *rewrite(const eli_gguf_file *src, const edit *e, size_t *size) {
    gw_file w;
    gw_init(&w);
    w.alignment = eli_gguf_alignment(src);
    int used[MAX_EDITS] = {0};
    for (uint64_t i = 0; i < eli_gguf_n_kv(src); i++) {
        const eli_gguf_kv *kv = eli_gguf_kv_at(src, i);
        int skip = 0;
        for (int k = 0; k < e->n_drop; k++) skip |= !strcmp(kv->key, e->drop_keys[k]);
        for (int k = 0; k < e->n_set && !skip; k++)
            if (!strcmp(kv->key, e->sets[k].key)) {
                gw_put(gw_kv(&w, kv->key, e->sets[k].type), e->sets[k].val.p, e->sets[k].val.n);
                used[k] = skip = 1;
            }
        if (skip) continue;
        gw_value(gw_kv(&w, kv->key, kv->value.type), &kv->value);
    }
    for (int k = 0; k < e->n_set; k++)
        if (!used[k]) gw_put(gw_kv(&w, e->sets[k].key, e->sets[k].type), e->sets[k].val.p, e->sets[k].val.n);
    for (uint64_t i = 0; i < eli_gguf_n_tensors(src); i++) {
        const eli_gguf_tensor *t = eli_gguf_tensor_at(src, i);
        const tensor_edit *te = NULL;
        for (int k = 0; k < e->n_tens; k++)
            if (!e->tens[k].add && !strcmp(e->tens[k].name, t->name)) te = &e->tens[k];
        if (te && te->drop) continue;
        uint32_t type = te && te->type >= 0 ? (uint32_t)te->type : t->type;
        uint32_t n_dims = t->n_dims;
        uint64_t ne[4];
        for (int d = 0; d < 4; d++) ne[d] = (uint64_t)t->ne[d];
        if (te && te->n_dims) {
            n_dims = te->n_dims;
            memcpy(ne, te->ne, sizeof ne);
        }
        int same = type == t->type && tensor_bytes(type, ne) == t->nbytes;
        write_tensor(&w, t->name, type, n_dims, ne, same ? t->data : NULL, te);
    }
    for (int k = 0; k < e->n_tens; k++) {
        const tensor_edit *te = &e->tens[k];
        if (te->add) write_tensor(&w, te->name, (uint32_t)te->type, te->n_dims, te->ne, NULL, te);
    }
    uint8_t *buf = gw_finish(&w, size);
    gw_free(&w);
    return buf;
}

typedef void (*edit_fn)(edit *e);

/* src rewritten with the edits that fn makes. */
static inline uint8_t *rewrite_with(const eli_gguf_file *src, edit_fn fn, size_t *size) {
    edit e;
    memset(&e, 0, sizeof e);
    fn(&e);
    uint8_t *buf = rewrite(src, &e, size);
    edit_free(&e);
    return buf;
}

#endif
