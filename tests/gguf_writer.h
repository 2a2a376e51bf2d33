/* Header-only GGUF writer for tests: builds GGUF files in memory, field by field, so tests can make both
 * valid files and every kind of broken one. Nothing here validates anything: the writer emits exactly
 * what it is told (bad counts, bad types, misaligned offsets), which is the point.
 *
 * Layout produced by gw_finish(): "GGUF", version, n_tensors, n_kv, the metadata bytes, the tensor-info
 * bytes, zero padding up to `alignment` (only when there is tensor data or a tensor), then the data bytes.
 * gw_tensor() pads the data section to `alignment` BEFORE each tensor, so a file ends exactly at the end
 * of its last tensor's data (every proper prefix of a file with a non-empty last tensor is truncated).
 * The returned buffer is malloc'ed with exactly the file's size, so ASan catches any over-read. */
#ifndef ELI_TEST_GGUF_WRITER_H
#define ELI_TEST_GGUF_WRITER_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"

typedef struct gw_buf {
    uint8_t *p;
    size_t n, cap;
} gw_buf;

static inline void gw_put(gw_buf *b, const void *src, size_t n) {
    if (n > b->cap - b->n) {
        size_t cap = b->cap ? b->cap : 256;
        while (n > cap - b->n) cap *= 2;
        uint8_t *p = realloc(b->p, cap);
        if (!p) {
            fprintf(stderr, "gguf_writer: out of memory\n");
            abort();
        }
        b->p = p;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, src, n);
    b->n += n;
}

static inline void gw_le(gw_buf *b, uint64_t v, size_t n) {
    uint8_t t[8];
    for (size_t i = 0; i < n; i++) t[i] = (uint8_t)(v >> (8 * i));
    gw_put(b, t, n);
}

static inline void gw_u8(gw_buf *b, uint8_t v) { gw_le(b, v, 1); }
static inline void gw_u16(gw_buf *b, uint16_t v) { gw_le(b, v, 2); }
static inline void gw_u32(gw_buf *b, uint32_t v) { gw_le(b, v, 4); }
static inline void gw_u64(gw_buf *b, uint64_t v) { gw_le(b, v, 8); }
static inline void gw_f32(gw_buf *b, float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    gw_u32(b, u);
}
static inline void gw_f64(gw_buf *b, double d) {
    uint64_t u;
    memcpy(&u, &d, 8);
    gw_u64(b, u);
}
static inline void gw_zeros(gw_buf *b, size_t n) {
    static const uint8_t z[64];
    while (n) {
        size_t k = n < sizeof z ? n : sizeof z;
        gw_put(b, z, k);
        n -= k;
    }
}
/* A GGUF string: u64 length then the bytes (may contain NULs). */
static inline void gw_strn(gw_buf *b, const char *s, uint64_t len) {
    gw_u64(b, len);
    gw_put(b, s, (size_t)len);
}
static inline void gw_str(gw_buf *b, const char *s) { gw_strn(b, s, strlen(s)); }

/* Little-endian patch of an already written field (e.g. header counts after gw_finish). */
static inline void gw_patch(uint8_t *p, uint64_t v, size_t n) {
    for (size_t i = 0; i < n; i++) p[i] = (uint8_t)(v >> (8 * i));
}

typedef struct gw_file {
    uint32_t version;   /* 3 by default */
    uint32_t alignment; /* layout alignment (32 by default); set general.alignment yourself to match */
    uint64_t n_kv, n_tensors;
    gw_buf kv, ti, data;
} gw_file;

static inline void gw_init(gw_file *w) {
    memset(w, 0, sizeof *w);
    w->version = 3;
    w->alignment = 32;
}

static inline void gw_free(gw_file *w) {
    free(w->kv.p);
    free(w->ti.p);
    free(w->data.p);
    memset(w, 0, sizeof *w);
}

/* Starts a metadata entry (key, then type) and returns the buffer its value is written into. */
static inline gw_buf *gw_kvn(gw_file *w, const char *key, uint64_t key_len, uint32_t type) {
    gw_strn(&w->kv, key, key_len);
    gw_u32(&w->kv, type);
    w->n_kv++;
    return &w->kv;
}
static inline gw_buf *gw_kv(gw_file *w, const char *key, uint32_t type) { return gw_kvn(w, key, strlen(key), type); }

static inline void gw_kv_u8(gw_file *w, const char *k, uint8_t v) { gw_u8(gw_kv(w, k, GGUF_VT_UINT8), v); }
static inline void gw_kv_i8(gw_file *w, const char *k, int8_t v) { gw_u8(gw_kv(w, k, GGUF_VT_INT8), (uint8_t)v); }
static inline void gw_kv_u16(gw_file *w, const char *k, uint16_t v) { gw_u16(gw_kv(w, k, GGUF_VT_UINT16), v); }
static inline void gw_kv_i16(gw_file *w, const char *k, int16_t v) { gw_u16(gw_kv(w, k, GGUF_VT_INT16), (uint16_t)v); }
static inline void gw_kv_u32(gw_file *w, const char *k, uint32_t v) { gw_u32(gw_kv(w, k, GGUF_VT_UINT32), v); }
static inline void gw_kv_i32(gw_file *w, const char *k, int32_t v) { gw_u32(gw_kv(w, k, GGUF_VT_INT32), (uint32_t)v); }
static inline void gw_kv_u64(gw_file *w, const char *k, uint64_t v) { gw_u64(gw_kv(w, k, GGUF_VT_UINT64), v); }
static inline void gw_kv_i64(gw_file *w, const char *k, int64_t v) { gw_u64(gw_kv(w, k, GGUF_VT_INT64), (uint64_t)v); }
static inline void gw_kv_f32(gw_file *w, const char *k, float v) { gw_f32(gw_kv(w, k, GGUF_VT_FLOAT32), v); }
static inline void gw_kv_f64(gw_file *w, const char *k, double v) { gw_f64(gw_kv(w, k, GGUF_VT_FLOAT64), v); }
static inline void gw_kv_bool(gw_file *w, const char *k, uint8_t v) { gw_u8(gw_kv(w, k, GGUF_VT_BOOL), v); }
static inline void gw_kv_str(gw_file *w, const char *k, const char *v) { gw_str(gw_kv(w, k, GGUF_VT_STRING), v); }

/* Array header (element type and count); the elements follow. */
static inline void gw_arr(gw_buf *b, uint32_t elem_type, uint64_t n) {
    gw_u32(b, elem_type);
    gw_u64(b, n);
}
static inline void gw_kv_arr_u32(gw_file *w, const char *k, const uint32_t *v, uint64_t n) {
    gw_buf *b = gw_kv(w, k, GGUF_VT_ARRAY);
    gw_arr(b, GGUF_VT_UINT32, n);
    for (uint64_t i = 0; i < n; i++) gw_u32(b, v[i]);
}
static inline void gw_kv_arr_i32(gw_file *w, const char *k, const int32_t *v, uint64_t n) {
    gw_buf *b = gw_kv(w, k, GGUF_VT_ARRAY);
    gw_arr(b, GGUF_VT_INT32, n);
    for (uint64_t i = 0; i < n; i++) gw_u32(b, (uint32_t)v[i]);
}
static inline void gw_kv_arr_bool(gw_file *w, const char *k, const uint8_t *v, uint64_t n) {
    gw_buf *b = gw_kv(w, k, GGUF_VT_ARRAY);
    gw_arr(b, GGUF_VT_BOOL, n);
    gw_put(b, v, (size_t)n);
}
static inline void gw_kv_arr_str(gw_file *w, const char *k, const char *const *v, uint64_t n) {
    gw_buf *b = gw_kv(w, k, GGUF_VT_ARRAY);
    gw_arr(b, GGUF_VT_STRING, n);
    for (uint64_t i = 0; i < n; i++) gw_str(b, v[i]);
}

/* Serializes a parsed value's payload (not its type tag) exactly as GGUF stores it; used to copy or
 * rewrite an existing file. */
static inline size_t gw_scalar_size(uint32_t t) {
    switch (t) {
    case GGUF_VT_UINT8: case GGUF_VT_INT8: case GGUF_VT_BOOL: return 1;
    case GGUF_VT_UINT16: case GGUF_VT_INT16: return 2;
    case GGUF_VT_UINT32: case GGUF_VT_INT32: case GGUF_VT_FLOAT32: return 4;
    case GGUF_VT_UINT64: case GGUF_VT_INT64: case GGUF_VT_FLOAT64: return 8;
    default: return 0;
    }
}
static inline void gw_value(gw_buf *b, const eli_gguf_value *v) {
    switch (v->type) {
    case GGUF_VT_STRING: gw_strn(b, v->v.str.ptr, v->v.str.len); return;
    case GGUF_VT_FLOAT32: gw_f32(b, (float)v->v.f64); return;
    case GGUF_VT_FLOAT64: gw_f64(b, v->v.f64); return;
    case GGUF_VT_INT8: case GGUF_VT_INT16: case GGUF_VT_INT32: case GGUF_VT_INT64:
        gw_le(b, (uint64_t)v->v.i64, gw_scalar_size(v->type));
        return;
    case GGUF_VT_ARRAY: {
        uint32_t et = v->v.arr.elem_type;
        gw_arr(b, et, v->v.arr.n);
        if (et == GGUF_VT_STRING)
            for (uint64_t i = 0; i < v->v.arr.n; i++) gw_strn(b, v->v.arr.strs[i].ptr, v->v.arr.strs[i].len);
        else if (et == GGUF_VT_ARRAY)
            for (uint64_t i = 0; i < v->v.arr.n; i++) gw_value(b, &v->v.arr.items[i]);
        else
            gw_put(b, v->v.arr.raw, (size_t)(v->v.arr.n * gw_scalar_size(et)));
        return;
    }
    default: gw_le(b, v->v.u64, gw_scalar_size(v->type)); return;
    }
}

/* A tensor info with an explicit offset (no data is written). ne holds n_dims values. */
static inline void gw_tensor_info_n(gw_file *w, const char *name, uint64_t name_len, uint32_t type,
                                    uint32_t n_dims, const uint64_t *ne, uint64_t offset) {
    gw_strn(&w->ti, name, name_len);
    gw_u32(&w->ti, n_dims);
    for (uint32_t d = 0; d < n_dims; d++) gw_u64(&w->ti, ne[d]);
    gw_u32(&w->ti, type);
    gw_u64(&w->ti, offset);
    w->n_tensors++;
}
static inline void gw_tensor_info(gw_file *w, const char *name, uint32_t type, uint32_t n_dims, const uint64_t *ne,
                                  uint64_t offset) {
    gw_tensor_info_n(w, name, strlen(name), type, n_dims, ne, offset);
}

/* Pads the data section to the alignment, then appends nbytes of data (zeros when src is NULL) and a
 * tensor info pointing at it. Returns the tensor's offset. */
static inline uint64_t gw_tensor(gw_file *w, const char *name, uint32_t type, uint32_t n_dims, const uint64_t *ne,
                                 const void *src, size_t nbytes) {
    size_t a = w->alignment ? w->alignment : 1;
    gw_zeros(&w->data, (a - w->data.n % a) % a);
    uint64_t off = w->data.n;
    if (src) gw_put(&w->data, src, nbytes);
    else gw_zeros(&w->data, nbytes);
    gw_tensor_info(w, name, type, n_dims, ne, off);
    return off;
}

/* Offset of the metadata section in a finished file. */
#define GW_HEADER_SIZE 24u

/* Assembles the file; returns a malloc'ed buffer of exactly *size bytes. */
static inline uint8_t *gw_finish(const gw_file *w, size_t *size) {
    gw_buf b = {0};
    gw_put(&b, "GGUF", 4);
    gw_u32(&b, w->version);
    gw_u64(&b, w->n_tensors);
    gw_u64(&b, w->n_kv);
    gw_put(&b, w->kv.p, w->kv.n);
    gw_put(&b, w->ti.p, w->ti.n);
    if (w->n_tensors || w->data.n) {
        size_t a = w->alignment ? w->alignment : 1;
        gw_zeros(&b, (a - b.n % a) % a);
        gw_put(&b, w->data.p, w->data.n);
    }
    uint8_t *out = malloc(b.n ? b.n : 1);
    if (!out) abort();
    memcpy(out, b.p, b.n);
    *size = b.n;
    free(b.p);
    return out;
}

#endif
