#include "gguf_write.h"

#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "gguf.h"
#include "quants.h"

#define ALIGN 32
#define OUT_BUF (4u << 20)

typedef struct {
    uint8_t *p;
    size_t n, cap;
    int oom;
} mbuf;

static void put(mbuf *b, const void *src, size_t n) {
    if (b->oom) return;
    if (n > b->cap - b->n) {
        size_t cap = b->cap ? b->cap : 4096;
        while (n > cap - b->n) cap *= 2;
        uint8_t *p = realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, src, n);
    b->n += n;
}
static void put_le(mbuf *b, uint64_t v, size_t n) {
    uint8_t t[8];
    for (size_t i = 0; i < n; i++) t[i] = (uint8_t)(v >> (8 * i));
    put(b, t, n);
}
static void put_strn(mbuf *b, const char *s, uint64_t n) {
    put_le(b, n, 8);
    put(b, s, (size_t)n);
}
static void put_str(mbuf *b, const char *s) { put_strn(b, s, strlen(s)); }

/* the body of a value as the reader decoded it (its type already written) */
static void put_value(mbuf *b, const eli_gguf_value *v) {
    if (v->type == GGUF_VT_STRING) {
        put_strn(b, v->v.str.ptr, v->v.str.len);
    } else if (v->type == GGUF_VT_ARRAY) {
        const uint32_t et = v->v.arr.elem_type;
        put_le(b, et, 4);
        put_le(b, v->v.arr.n, 8);
        for (uint64_t i = 0; et == GGUF_VT_STRING && i < v->v.arr.n; i++)
            put_strn(b, v->v.arr.strs[i].ptr, v->v.arr.strs[i].len);
        for (uint64_t i = 0; et == GGUF_VT_ARRAY && i < v->v.arr.n; i++) put_value(b, &v->v.arr.items[i]);
        if (et != GGUF_VT_STRING && et != GGUF_VT_ARRAY) put(b, v->v.arr.raw, eli_gguf_scalar_size(et) * (size_t)v->v.arr.n);
    } else if (v->type == GGUF_VT_FLOAT32) {
        const float f = (float)v->v.f64; /* the reader widened the float exactly */
        uint32_t u;
        memcpy(&u, &f, 4);
        put_le(b, u, 4);
    } else if (v->type == GGUF_VT_FLOAT64) {
        uint64_t u;
        memcpy(&u, &v->v.f64, 8);
        put_le(b, u, 8);
    } else {
        put_le(b, v->v.u64, eli_gguf_scalar_size(v->type)); /* the signed types' low bytes are their bits */
    }
}

typedef struct {
    uint64_t size; /* bytes of data */
} tinfo;

struct eli_gguf_writer {
    eli_atomic_file *f;
    mbuf kv, ti;
    uint64_t n_kv, n_tensors;
    tinfo *t;
    size_t t_cap;
    uint64_t data_off; /* offset of the next tensor in the data section */
    int started;       /* header written */
    uint64_t cur;      /* tensor receiving data */
    uint64_t cur_done; /* bytes of it received */
    uint64_t pos;      /* bytes written into the data section */
    uint8_t *out;
    size_t out_n;
};

eli_gguf_writer *eli_gguf_writer_open(const char *path, eli_error *err) {
    eli_gguf_writer *w = calloc(1, sizeof *w);
    if (!w || !(w->out = malloc(OUT_BUF))) {
        free(w);
        eli_fail(err, ELI_ERR_OOM, "out of memory");
        return NULL;
    }
    if (!(w->f = eli_atomic_open(path, err))) {
        free(w->out);
        free(w);
        return NULL;
    }
    return w;
}

static int check(eli_gguf_writer *w, eli_error *err) {
    if (w->kv.oom || w->ti.oom) return eli_fail(err, ELI_ERR_OOM, "out of memory building the GGUF header");
    return ELI_OK;
}

static int kv_head(eli_gguf_writer *w, const char *key, uint32_t type, eli_error *err) {
    if (w->started) return eli_fail(err, ELI_ERR_INVALID_ARG, "gguf writer: metadata '%s' after tensor data", key);
    put_str(&w->kv, key);
    put_le(&w->kv, type, 4);
    w->n_kv++;
    return ELI_OK;
}

int eli_gguf_set_u32(eli_gguf_writer *w, const char *key, uint32_t v, eli_error *err) {
    if (kv_head(w, key, GGUF_VT_UINT32, err)) return err ? err->code : ELI_ERR_INVALID_ARG;
    put_le(&w->kv, v, 4);
    return check(w, err);
}
int eli_gguf_set_i32(eli_gguf_writer *w, const char *key, int32_t v, eli_error *err) {
    if (kv_head(w, key, GGUF_VT_INT32, err)) return err ? err->code : ELI_ERR_INVALID_ARG;
    put_le(&w->kv, (uint32_t)v, 4);
    return check(w, err);
}
int eli_gguf_set_f32(eli_gguf_writer *w, const char *key, float v, eli_error *err) {
    if (kv_head(w, key, GGUF_VT_FLOAT32, err)) return err ? err->code : ELI_ERR_INVALID_ARG;
    uint32_t u;
    memcpy(&u, &v, 4);
    put_le(&w->kv, u, 4);
    return check(w, err);
}
int eli_gguf_set_bool(eli_gguf_writer *w, const char *key, int v, eli_error *err) {
    if (kv_head(w, key, GGUF_VT_BOOL, err)) return err ? err->code : ELI_ERR_INVALID_ARG;
    put_le(&w->kv, v ? 1 : 0, 1);
    return check(w, err);
}
int eli_gguf_set_str(eli_gguf_writer *w, const char *key, const char *v, eli_error *err) {
    if (kv_head(w, key, GGUF_VT_STRING, err)) return err ? err->code : ELI_ERR_INVALID_ARG;
    put_str(&w->kv, v);
    return check(w, err);
}


int eli_gguf_set_arr(eli_gguf_writer *w, const char *key, uint32_t elem_type, const void *data, uint64_t n,
                     eli_error *err) {
    const size_t es = eli_gguf_scalar_size(elem_type);
    if (!es) return eli_fail(err, ELI_ERR_INVALID_ARG, "gguf writer: '%s': bad array element type %u", key, elem_type);
    if (kv_head(w, key, GGUF_VT_ARRAY, err)) return err ? err->code : ELI_ERR_INVALID_ARG;
    put_le(&w->kv, elem_type, 4);
    put_le(&w->kv, n, 8);
    const uint8_t *p = data; /* little-endian host (as quants.c assumes) */
    put(&w->kv, p, es * (size_t)n);
    return check(w, err);
}

int eli_gguf_set_arr_str(eli_gguf_writer *w, const char *key, const char *const *v, uint64_t n, eli_error *err) {
    if (kv_head(w, key, GGUF_VT_ARRAY, err)) return err ? err->code : ELI_ERR_INVALID_ARG;
    put_le(&w->kv, GGUF_VT_STRING, 4);
    put_le(&w->kv, n, 8);
    for (uint64_t i = 0; i < n; i++) put_str(&w->kv, v[i]);
    return check(w, err);
}

int eli_gguf_copy_kv(eli_gguf_writer *w, const char *key, const eli_gguf_value *v, eli_error *err) {
    if (v->type >= GGUF_VT_COUNT) return eli_fail(err, ELI_ERR_INVALID_ARG, "gguf writer: '%s': bad value type %u", key, v->type);
    if (kv_head(w, key, v->type, err)) return err ? err->code : ELI_ERR_INVALID_ARG;
    put_value(&w->kv, v);
    return check(w, err);
}

int eli_gguf_add_tensor(eli_gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims, const int64_t *ne,
                        eli_error *err) {
    if (w->started) return eli_fail(err, ELI_ERR_INVALID_ARG, "gguf writer: tensor '%s' after tensor data", name);
    if (n_dims < 1 || n_dims > GGUF_MAX_DIMS) return eli_fail(err, ELI_ERR_INVALID_ARG, "tensor '%s': %u dims", name, n_dims);
    uint64_t rows = 1;
    for (uint32_t d = 1; d < n_dims; d++) rows *= (uint64_t)ne[d];
    const size_t rs = eli_row_size(type, ne[0]);
    if (!rs) return eli_fail(err, ELI_ERR_INVALID_ARG, "tensor '%s': %lld values per row do not fit type %s", name,
                             (long long)ne[0], eli_type_name(type));
    if (w->n_tensors == w->t_cap) {
        size_t cap = w->t_cap ? 2 * w->t_cap : 256;
        tinfo *t = realloc(w->t, cap * sizeof *t);
        if (!t) return eli_fail(err, ELI_ERR_OOM, "out of memory");
        w->t = t;
        w->t_cap = cap;
    }
    w->t[w->n_tensors].size = (uint64_t)rs * rows;
    put_str(&w->ti, name);
    put_le(&w->ti, n_dims, 4);
    for (uint32_t d = 0; d < n_dims; d++) put_le(&w->ti, (uint64_t)ne[d], 8);
    put_le(&w->ti, type, 4);
    put_le(&w->ti, w->data_off, 8);
    w->data_off += (w->t[w->n_tensors].size + ALIGN - 1) / ALIGN * ALIGN;
    w->n_tensors++;
    return check(w, err);
}

static int flush(eli_gguf_writer *w, eli_error *err) {
    int rc = w->out_n ? eli_atomic_write(w->f, w->out, w->out_n, err) : ELI_OK;
    w->out_n = 0;
    return rc;
}

static int emit(eli_gguf_writer *w, const void *data, size_t n, eli_error *err) {
    const uint8_t *p = data;
    while (n) {
        size_t k = OUT_BUF - w->out_n < n ? OUT_BUF - w->out_n : n;
        if (p) memcpy(w->out + w->out_n, p, k);
        else memset(w->out + w->out_n, 0, k);
        w->out_n += k;
        if (p) p += k;
        n -= k;
        if (w->out_n == OUT_BUF) {
            int rc = flush(w, err);
            if (rc) return rc;
        }
    }
    return ELI_OK;
}

static int start(eli_gguf_writer *w, eli_error *err) {
    mbuf h = {0};
    put(&h, "GGUF", 4);
    put_le(&h, 3, 4);
    put_le(&h, w->n_tensors, 8);
    put_le(&h, w->n_kv, 8);
    if (h.oom) return eli_fail(err, ELI_ERR_OOM, "out of memory");
    int rc = emit(w, h.p, h.n, err);
    free(h.p);
    if (!rc) rc = emit(w, w->kv.p, w->kv.n, err);
    if (!rc) rc = emit(w, w->ti.p, w->ti.n, err);
    const size_t hdr = 24 + w->kv.n + w->ti.n;
    if (!rc) rc = emit(w, NULL, (ALIGN - hdr % ALIGN) % ALIGN, err);
    w->started = 1;
    return rc;
}

int eli_gguf_write_data(eli_gguf_writer *w, const void *data, size_t n, eli_error *err) {
    int rc;
    if (!w->started && (rc = start(w, err))) return rc;
    const uint8_t *p = data;
    while (n) {
        if (w->cur >= w->n_tensors) return eli_fail(err, ELI_ERR_INVALID_ARG, "gguf writer: more data than tensors");
        const uint64_t left = w->t[w->cur].size - w->cur_done;
        const size_t k = left < n ? (size_t)left : n;
        if ((rc = emit(w, p, k, err))) return rc;
        p += k, n -= k, w->cur_done += k, w->pos += k;
        if (w->cur_done == w->t[w->cur].size) {
            const uint64_t pad = (ALIGN - w->pos % ALIGN) % ALIGN;
            if ((rc = emit(w, NULL, (size_t)pad, err))) return rc;
            w->pos += pad;
            w->cur++;
            w->cur_done = 0;
        }
    }
    return ELI_OK;
}

uint64_t eli_gguf_data_remaining(const eli_gguf_writer *w) {
    uint64_t r = 0;
    for (uint64_t i = w->cur; i < w->n_tensors; i++) r += w->t[i].size;
    return r - w->cur_done;
}

static void release(eli_gguf_writer *w) {
    free(w->kv.p), free(w->ti.p), free(w->t), free(w->out);
    free(w);
}

int eli_gguf_writer_commit(eli_gguf_writer *w, eli_error *err) {
    int rc = ELI_OK;
    if (!w->started) rc = start(w, err);
    /* zero-size tensors complete without data */
    while (!rc && w->cur < w->n_tensors && w->t[w->cur].size == 0) w->cur++;
    if (!rc && w->cur < w->n_tensors)
        rc = eli_fail(err, ELI_ERR_INVALID_ARG, "gguf writer: %llu bytes of tensor data missing",
                      (unsigned long long)eli_gguf_data_remaining(w));
    if (!rc) rc = flush(w, err);
    if (rc) {
        eli_atomic_abort(w->f);
        release(w);
        return rc;
    }
    rc = eli_atomic_commit(w->f, err);
    release(w);
    return rc;
}

void eli_gguf_writer_abort(eli_gguf_writer *w) {
    if (!w) return;
    eli_atomic_abort(w->f);
    release(w);
}
