/* GGUF reader: parses the header, metadata and tensor directory of a mapped file, validating every
 * field against the bytes that are actually there. See gguf.h for the contract. */
#include "gguf.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "os.h"
#include "quants.h"

#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_MAX_NAME 256        /* tensor name length limit (ggml itself uses 64) */
#define GGUF_MAX_ARRAY_DEPTH 8   /* nested arrays deeper than this are refused */

struct eli_gguf_file {
    const uint8_t *base;
    size_t size;
    eli_os_map map; /* the mapped file (fd -1 for a memory buffer) */
    char *path;     /* for messages; NULL for a memory buffer */
    uint32_t version;
    uint32_t alignment;
    uint64_t data_offset;
    uint64_t n_kv;
    eli_gguf_kv *kv;
    uint64_t n_tensors;
    eli_gguf_tensor *tensors;
    /* open-addressing hash tables of indices (+1; 0 = empty), capacity a power of two */
    uint64_t *kv_index, *tensor_index;
    uint64_t kv_cap, tensor_cap;
};

typedef struct {
    const uint8_t *base;
    size_t size;
    size_t pos;
    eli_error *err;
    const char *ctx; /* what is being read, for messages */
} reader;

static int rd_need(reader *r, uint64_t n) {
    if (n > r->size - r->pos)
        return eli_fail(r->err, ELI_ERR_INVALID_ARG,
                        "truncated file: %s needs %llu bytes at offset %zu but only %zu remain", r->ctx,
                        (unsigned long long)n, r->pos, r->size - r->pos);
    return ELI_OK;
}

static int rd_bytes(reader *r, void *dst, size_t n) {
    int rc = rd_need(r, n);
    if (rc) return rc;
    memcpy(dst, r->base + r->pos, n);
    r->pos += n;
    return ELI_OK;
}

static int rd_u32(reader *r, uint32_t *v) {
    uint8_t b[4];
    int rc = rd_bytes(r, b, 4);
    if (rc) return rc;
    *v = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
    return ELI_OK;
}

static int rd_u64(reader *r, uint64_t *v) {
    uint32_t lo, hi;
    int rc = rd_u32(r, &lo);
    if (!rc) rc = rd_u32(r, &hi);
    if (!rc) *v = (uint64_t)hi << 32 | lo;
    return rc;
}

static int rd_str(reader *r, eli_gguf_str *s) {
    uint64_t len;
    int rc = rd_u64(r, &len);
    if (rc) return rc;
    if ((rc = rd_need(r, len))) return rc;
    s->ptr = (const char *)r->base + r->pos;
    s->len = len;
    r->pos += (size_t)len;
    return ELI_OK;
}

size_t eli_gguf_scalar_size(uint32_t t) {
    switch (t) {
    case GGUF_VT_UINT8: case GGUF_VT_INT8: case GGUF_VT_BOOL: return 1;
    case GGUF_VT_UINT16: case GGUF_VT_INT16: return 2;
    case GGUF_VT_UINT32: case GGUF_VT_INT32: case GGUF_VT_FLOAT32: return 4;
    case GGUF_VT_UINT64: case GGUF_VT_INT64: case GGUF_VT_FLOAT64: return 8;
    default: return 0;
    }
}

const char *eli_gguf_type_name(uint32_t t) {
    static const char *names[GGUF_VT_COUNT] = {"u8",  "i8",  "u16",   "i16", "u32", "i32", "f32",
                                               "bool", "str", "array", "u64", "i64", "f64"};
    return t < GGUF_VT_COUNT ? names[t] : "invalid";
}

static uint64_t load_le(const uint8_t *p, size_t n) {
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* Decodes one scalar of type t from p into v (integers extended, floats widened). */
static void decode_scalar(uint32_t t, const uint8_t *p, eli_gguf_value *v) {
    uint64_t raw = load_le(p, eli_gguf_scalar_size(t));
    v->type = t;
    switch (t) {
    case GGUF_VT_INT8: v->v.i64 = (int8_t)raw; break;
    case GGUF_VT_INT16: v->v.i64 = (int16_t)raw; break;
    case GGUF_VT_INT32: v->v.i64 = (int32_t)raw; break;
    case GGUF_VT_INT64: v->v.i64 = (int64_t)raw; break;
    case GGUF_VT_FLOAT32: {
        uint32_t u = (uint32_t)raw;
        float f;
        memcpy(&f, &u, 4);
        v->v.f64 = f;
        break;
    }
    case GGUF_VT_FLOAT64: memcpy(&v->v.f64, &raw, 8); break;
    default: v->v.u64 = raw; break;
    }
}

static void value_free(eli_gguf_value *v) {
    if (v->type != GGUF_VT_ARRAY) return;
    free(v->v.arr.strs);
    if (v->v.arr.items) {
        for (uint64_t i = 0; i < v->v.arr.n; i++) value_free(&v->v.arr.items[i]);
        free(v->v.arr.items);
    }
}

static int rd_value(reader *r, uint32_t type, eli_gguf_value *v, int depth, const char *key) {
    memset(v, 0, sizeof *v);
    v->type = type;
    int rc;
    if (type == GGUF_VT_STRING) return rd_str(r, &v->v.str);
    if (type != GGUF_VT_ARRAY) {
        size_t sz = eli_gguf_scalar_size(type);
        if (!sz) return eli_fail(r->err, ELI_ERR_INVALID_ARG, "key '%s': unknown value type %u", key, type);
        if ((rc = rd_need(r, sz))) return rc;
        decode_scalar(type, r->base + r->pos, v);
        if (type == GGUF_VT_BOOL && v->v.u64 > 1)
            return eli_fail(r->err, ELI_ERR_INVALID_ARG, "key '%s': bool value %llu is not 0 or 1", key,
                            (unsigned long long)v->v.u64);
        r->pos += sz;
        return ELI_OK;
    }
    if (depth >= GGUF_MAX_ARRAY_DEPTH)
        return eli_fail(r->err, ELI_ERR_INVALID_ARG, "key '%s': arrays nested deeper than %d", key,
                        GGUF_MAX_ARRAY_DEPTH);
    uint32_t et;
    uint64_t n;
    if ((rc = rd_u32(r, &et)) || (rc = rd_u64(r, &n))) return rc;
    if (et >= GGUF_VT_COUNT)
        return eli_fail(r->err, ELI_ERR_INVALID_ARG, "key '%s': unknown array element type %u", key, et);
    v->v.arr.elem_type = et;
    size_t remaining = r->size - r->pos;
    if (et == GGUF_VT_STRING || et == GGUF_VT_ARRAY) {
        /* every element takes at least 8 (string length) or 12 (array header) bytes */
        uint64_t min_elem = et == GGUF_VT_STRING ? 8 : 12;
        if (n > remaining / min_elem)
            return eli_fail(r->err, ELI_ERR_INVALID_ARG,
                            "key '%s': array of %llu %s elements cannot fit in the %zu bytes left", key,
                            (unsigned long long)n, eli_gguf_type_name(et), remaining);
        if (et == GGUF_VT_STRING) {
            v->v.arr.strs = calloc(n ? n : 1, sizeof(eli_gguf_str));
            if (!v->v.arr.strs) return eli_fail(r->err, ELI_ERR_OOM, "key '%s': out of memory", key);
            v->v.arr.n = n;
            for (uint64_t i = 0; i < n; i++)
                if ((rc = rd_str(r, &v->v.arr.strs[i]))) return rc;
        } else {
            v->v.arr.items = calloc(n ? n : 1, sizeof(eli_gguf_value));
            if (!v->v.arr.items) return eli_fail(r->err, ELI_ERR_OOM, "key '%s': out of memory", key);
            v->v.arr.n = n;
            for (uint64_t i = 0; i < n; i++)
                if ((rc = rd_value(r, GGUF_VT_ARRAY, &v->v.arr.items[i], depth + 1, key))) return rc;
        }
        return ELI_OK;
    }
    size_t es = eli_gguf_scalar_size(et);
    if (n > remaining / es)
        return eli_fail(r->err, ELI_ERR_INVALID_ARG,
                        "key '%s': array of %llu %s elements needs more than the %zu bytes left", key,
                        (unsigned long long)n, eli_gguf_type_name(et), remaining);
    v->v.arr.n = n;
    v->v.arr.raw = r->base + r->pos;
    if (et == GGUF_VT_BOOL)
        for (uint64_t i = 0; i < n; i++)
            if (v->v.arr.raw[i] > 1)
                return eli_fail(r->err, ELI_ERR_INVALID_ARG, "key '%s': bool element %llu is %u, not 0 or 1",
                                key, (unsigned long long)i, v->v.arr.raw[i]);
    r->pos += (size_t)(n * es);
    return ELI_OK;
}

static uint64_t hash_name(const char *s) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

/* Builds an index table over n names; returns the index of a duplicate (+1) or 0, -1 on OOM. */
static int64_t build_index(uint64_t n, const char *(*name_at)(const eli_gguf_file *, uint64_t), const eli_gguf_file *f,
                           uint64_t **table, uint64_t *cap) {
    uint64_t c = 16;
    while (c < 2 * n) c <<= 1;
    uint64_t *t = calloc(c, sizeof *t);
    if (!t) return -1;
    *table = t;
    *cap = c;
    for (uint64_t i = 0; i < n; i++) {
        const char *nm = name_at(f, i);
        uint64_t h = hash_name(nm) & (c - 1);
        while (t[h]) {
            if (!strcmp(name_at(f, t[h] - 1), nm)) return (int64_t)i + 1;
            h = (h + 1) & (c - 1);
        }
        t[h] = i + 1;
    }
    return 0;
}

static const char *kv_name_at(const eli_gguf_file *f, uint64_t i) { return f->kv[i].key; }
static const char *tensor_name_at(const eli_gguf_file *f, uint64_t i) { return f->tensors[i].name; }

static int64_t lookup(const uint64_t *table, uint64_t cap, const char *name,
                      const char *(*name_at)(const eli_gguf_file *, uint64_t), const eli_gguf_file *f) {
    if (!table || !name) return -1;
    uint64_t h = hash_name(name) & (cap - 1);
    while (table[h]) {
        if (!strcmp(name_at(f, table[h] - 1), name)) return (int64_t)table[h] - 1;
        h = (h + 1) & (cap - 1);
    }
    return -1;
}

/* Copies a eli_gguf_str into a NUL-terminated string; refuses embedded NULs. */
static char *dup_name(eli_gguf_str s, const char *what, uint64_t idx, eli_error *err) {
    if (memchr(s.ptr, 0, s.len)) {
        eli_fail(err, ELI_ERR_INVALID_ARG, "%s #%llu: name contains a NUL byte", what, (unsigned long long)idx);
        return NULL;
    }
    char *c = malloc(s.len + 1);
    if (!c) {
        eli_fail(err, ELI_ERR_OOM, "%s #%llu: out of memory", what, (unsigned long long)idx);
        return NULL;
    }
    memcpy(c, s.ptr, s.len);
    c[s.len] = '\0';
    return c;
}

static int parse(eli_gguf_file *f, eli_error *err) {
    reader r = {f->base, f->size, 0, err, "header"};
    int rc;
    char magic[4];
    if ((rc = rd_bytes(&r, magic, 4))) return rc;
    if (memcmp(magic, "GGUF", 4))
        return eli_fail(err, ELI_ERR_INVALID_ARG, "not a GGUF file (magic %02x %02x %02x %02x)", (uint8_t)magic[0],
                        (uint8_t)magic[1], (uint8_t)magic[2], (uint8_t)magic[3]);
    if ((rc = rd_u32(&r, &f->version))) return rc;
    if (f->version != 2 && f->version != 3)
        return eli_fail(err, ELI_ERR_INVALID_ARG, "unsupported GGUF version %u (expected 2 or 3)", f->version);
    uint64_t n_tensors, n_kv;
    if ((rc = rd_u64(&r, &n_tensors)) || (rc = rd_u64(&r, &n_kv))) return rc;
    /* each kv needs >= 8 (key len) + 4 (type) + 1 bytes, each tensor info >= 8 + 4 + 8 + 4 + 8 */
    if (n_kv > (f->size - r.pos) / 13)
        return eli_fail(err, ELI_ERR_INVALID_ARG, "metadata count %llu is impossible for a %zu-byte file",
                        (unsigned long long)n_kv, f->size);
    if (n_tensors > (f->size - r.pos) / 32)
        return eli_fail(err, ELI_ERR_INVALID_ARG, "tensor count %llu is impossible for a %zu-byte file",
                        (unsigned long long)n_tensors, f->size);

    f->kv = calloc(n_kv ? n_kv : 1, sizeof *f->kv);
    if (!f->kv) return eli_fail(err, ELI_ERR_OOM, "out of memory for %llu metadata entries", (unsigned long long)n_kv);
    char ctx[96];
    for (uint64_t i = 0; i < n_kv; i++) {
        snprintf(ctx, sizeof ctx, "metadata entry #%llu", (unsigned long long)i);
        r.ctx = ctx;
        eli_gguf_str key;
        uint32_t type;
        if ((rc = rd_str(&r, &key))) return rc;
        if (key.len == 0) return eli_fail(err, ELI_ERR_INVALID_ARG, "metadata entry #%llu has an empty key", (unsigned long long)i);
        if (!(f->kv[i].key = dup_name(key, "metadata entry", i, err))) return err ? err->code : ELI_ERR_INVALID_ARG;
        f->n_kv = i + 1;
        snprintf(ctx, sizeof ctx, "key '%.64s'", f->kv[i].key);
        if ((rc = rd_u32(&r, &type))) return rc;
        if (type >= GGUF_VT_COUNT)
            return eli_fail(err, ELI_ERR_INVALID_ARG, "key '%s': unknown value type %u", f->kv[i].key, type);
        if ((rc = rd_value(&r, type, &f->kv[i].value, 0, f->kv[i].key))) return rc;
    }
    int64_t dup = build_index(f->n_kv, kv_name_at, f, &f->kv_index, &f->kv_cap);
    if (dup < 0) return eli_fail(err, ELI_ERR_OOM, "out of memory");
    if (dup) return eli_fail(err, ELI_ERR_INVALID_ARG, "duplicate metadata key '%s'", f->kv[dup - 1].key);

    f->alignment = GGUF_DEFAULT_ALIGNMENT;
    const eli_gguf_value *al = eli_gguf_find(f, "general.alignment");
    if (al) {
        if (al->type != GGUF_VT_UINT32)
            return eli_fail(err, ELI_ERR_INVALID_ARG, "general.alignment has type %s, expected u32", eli_gguf_type_name(al->type));
        uint64_t a = al->v.u64;
        if (a == 0 || (a & (a - 1)) || a > (1u << 20))
            return eli_fail(err, ELI_ERR_INVALID_ARG, "general.alignment %llu is not a power of two <= 1 MiB", (unsigned long long)a);
        f->alignment = (uint32_t)a;
    }

    f->tensors = calloc(n_tensors ? n_tensors : 1, sizeof *f->tensors);
    if (!f->tensors) return eli_fail(err, ELI_ERR_OOM, "out of memory for %llu tensors", (unsigned long long)n_tensors);
    for (uint64_t i = 0; i < n_tensors; i++) {
        eli_gguf_tensor *t = &f->tensors[i];
        snprintf(ctx, sizeof ctx, "tensor info #%llu", (unsigned long long)i);
        r.ctx = ctx;
        eli_gguf_str name;
        if ((rc = rd_str(&r, &name))) return rc;
        if (name.len == 0 || name.len >= GGUF_MAX_NAME)
            return eli_fail(err, ELI_ERR_INVALID_ARG, "tensor #%llu: name length %llu is not in [1, %d)",
                            (unsigned long long)i, (unsigned long long)name.len, GGUF_MAX_NAME);
        if (!(t->name = dup_name(name, "tensor", i, err))) return err ? err->code : ELI_ERR_INVALID_ARG;
        f->n_tensors = i + 1;
        snprintf(ctx, sizeof ctx, "tensor '%s'", t->name);
        if ((rc = rd_u32(&r, &t->n_dims))) return rc;
        if (t->n_dims == 0 || t->n_dims > GGUF_MAX_DIMS)
            return eli_fail(err, ELI_ERR_INVALID_ARG, "tensor '%s': %u dimensions (expected 1..%d)", t->name, t->n_dims,
                            GGUF_MAX_DIMS);
        int64_t nel = 1, nonzero = 1; /* the product of the non-zero dims must fit too, so that any
                                          partial product a consumer computes cannot overflow */
        for (uint32_t d = 0; d < GGUF_MAX_DIMS; d++) {
            uint64_t ne = 1;
            if (d < t->n_dims && (rc = rd_u64(&r, &ne))) return rc;
            if (ne > (uint64_t)INT64_MAX)
                return eli_fail(err, ELI_ERR_INVALID_ARG, "tensor '%s': dimension %u is negative", t->name, d);
            t->ne[d] = (int64_t)ne;
            if (ne && nonzero > INT64_MAX / (int64_t)ne)
                return eli_fail(err, ELI_ERR_INVALID_ARG, "tensor '%s': element count overflows", t->name);
            if (ne) nonzero *= (int64_t)ne;
            nel *= (int64_t)ne;
        }
        if ((rc = rd_u32(&r, &t->type)) || (rc = rd_u64(&r, &t->offset))) return rc;
        const eli_type_traits *tt = eli_type_info(t->type);
        if (!tt) return eli_fail(err, ELI_ERR_INVALID_ARG, "tensor '%s': unknown type id %u", t->name, t->type);
        if (t->ne[0] % tt->block_size)
            return eli_fail(err, ELI_ERR_INVALID_ARG, "tensor '%s': row length %lld is not a multiple of the %s block size %u",
                            t->name, (long long)t->ne[0], tt->name, tt->block_size);
        uint64_t blocks = (uint64_t)nel / tt->block_size;
        if (blocks > UINT64_MAX / tt->type_size)
            return eli_fail(err, ELI_ERR_INVALID_ARG, "tensor '%s': byte size overflows", t->name);
        t->nbytes = blocks * tt->type_size;
        if (t->offset % f->alignment)
            return eli_fail(err, ELI_ERR_INVALID_ARG, "tensor '%s': data offset %llu is not a multiple of the alignment %u",
                            t->name, (unsigned long long)t->offset, f->alignment);
    }
    dup = build_index(f->n_tensors, tensor_name_at, f, &f->tensor_index, &f->tensor_cap);
    if (dup < 0) return eli_fail(err, ELI_ERR_OOM, "out of memory");
    if (dup) return eli_fail(err, ELI_ERR_INVALID_ARG, "duplicate tensor name '%s'", f->tensors[dup - 1].name);

    uint64_t data = ((uint64_t)r.pos + f->alignment - 1) / f->alignment * f->alignment;
    if (n_tensors && data > f->size)
        return eli_fail(err, ELI_ERR_INVALID_ARG, "truncated file: tensor data would start at %llu, file has %zu bytes",
                        (unsigned long long)data, f->size);
    f->data_offset = data;
    uint64_t avail = f->size > data ? f->size - data : 0;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        eli_gguf_tensor *t = &f->tensors[i];
        if (t->offset > avail || t->nbytes > avail - t->offset)
            return eli_fail(err, ELI_ERR_INVALID_ARG,
                            "tensor '%s': data [%llu, +%llu) lies outside the %llu bytes of the data section", t->name,
                            (unsigned long long)t->offset, (unsigned long long)t->nbytes, (unsigned long long)avail);
        t->data = f->base + data + t->offset;
    }
    return ELI_OK;
}

static eli_gguf_file *open_common(eli_gguf_file *f, eli_error *err) {
    if (parse(f, err) != ELI_OK) {
        eli_gguf_close(f);
        return NULL;
    }
    return f;
}

eli_gguf_file *eli_gguf_open_memory(const void *buf, size_t size, eli_error *err) {
    if (!buf && size) {
        eli_fail(err, ELI_ERR_INVALID_ARG, "NULL buffer");
        return NULL;
    }
    eli_gguf_file *f = calloc(1, sizeof *f);
    if (!f) {
        eli_fail(err, ELI_ERR_OOM, "out of memory");
        return NULL;
    }
    f->base = buf;
    f->size = size;
    f->map.fd = -1;
    f->map.guard = -1;
    return open_common(f, err);
}

eli_gguf_file *eli_gguf_open(const char *path, eli_error *err) {
    if (!path) {
        eli_fail(err, ELI_ERR_INVALID_ARG, "NULL path");
        return NULL;
    }
    eli_gguf_file *f = calloc(1, sizeof *f);
    if (!f || !(f->path = strdup(path))) {
        free(f);
        eli_fail(err, ELI_ERR_OOM, "out of memory");
        return NULL;
    }
    if (eli_os_map_file(path, &f->map, err)) {
        free(f->path), free(f);
        return NULL;
    }
    f->base = f->map.base;
    f->size = f->map.size;
    f = open_common(f, err);
    if (f && eli_gguf_check_mapping(f, err)) {
        eli_gguf_close(f);
        f = NULL;
    } else if (!f) {
        eli_error_prefix(err, "%s", path);
    }
    return f;
}

void eli_gguf_close(eli_gguf_file *f) {
    if (!f) return;
    for (uint64_t i = 0; i < f->n_kv; i++) {
        free(f->kv[i].key);
        value_free(&f->kv[i].value);
    }
    free(f->kv);
    for (uint64_t i = 0; i < f->n_tensors; i++) free(f->tensors[i].name);
    free(f->tensors);
    free(f->kv_index);
    free(f->tensor_index);
    if (f->map.fd >= 0) eli_os_unmap_file(&f->map);
    free(f->path);
    free(f);
}

int eli_gguf_check_mapping(const eli_gguf_file *f, eli_error *err) {
    if (!eli_os_map_faulted(&f->map)) return ELI_OK;
    return eli_fail(err, ELI_ERR_BUNDLE_INVALID, "model file '%s' shrank while mapped (it had %zu bytes): reload it",
                    f->path, f->size);
}

uint32_t eli_gguf_version(const eli_gguf_file *f) { return f->version; }
uint64_t eli_gguf_file_size(const eli_gguf_file *f) { return f->size; }
uint32_t eli_gguf_alignment(const eli_gguf_file *f) { return f->alignment; }
uint64_t eli_gguf_data_offset(const eli_gguf_file *f) { return f->data_offset; }
const void *eli_gguf_mapping(const eli_gguf_file *f) { return f->base; }

/* the file offset of the n bytes the mapping shows at p, -1 when they are not all inside the file */
static int64_t file_offset(const eli_gguf_file *f, const void *at, size_t n) {
    const uint8_t *p = at;
    return p < f->base || n > f->size || (size_t)(p - f->base) > f->size - n ? -1 : (int64_t)(p - f->base);
}

int eli_gguf_read_at(const eli_gguf_file *f, const void *at, size_t n, void *dst) {
    const int64_t off = file_offset(f, at, n);
    if (off < 0) return EINVAL;
    if (f->map.fd < 0) {
        memcpy(dst, at, n);
        return 0;
    }
    return eli_os_read_at(&f->map, (uint64_t)off, n, dst);
}

void eli_gguf_advise_random(const eli_gguf_file *f, const void *at, size_t n) { eli_os_advise(&f->map, at, n, ELI_OS_RANDOM); }

void eli_gguf_drop_pages(const eli_gguf_file *f, const void *at, size_t n) { eli_os_advise(&f->map, at, n, ELI_OS_DROP); }
uint64_t eli_gguf_n_kv(const eli_gguf_file *f) { return f->n_kv; }
const eli_gguf_kv *eli_gguf_kv_at(const eli_gguf_file *f, uint64_t i) { return i < f->n_kv ? &f->kv[i] : NULL; }
uint64_t eli_gguf_n_tensors(const eli_gguf_file *f) { return f->n_tensors; }
const eli_gguf_tensor *eli_gguf_tensor_at(const eli_gguf_file *f, uint64_t i) { return i < f->n_tensors ? &f->tensors[i] : NULL; }

const eli_gguf_value *eli_gguf_find(const eli_gguf_file *f, const char *key) {
    int64_t i = lookup(f->kv_index, f->kv_cap, key, kv_name_at, f);
    return i < 0 ? NULL : &f->kv[i].value;
}

const eli_gguf_tensor *eli_gguf_find_tensor(const eli_gguf_file *f, const char *name) {
    int64_t i = lookup(f->tensor_index, f->tensor_cap, name, tensor_name_at, f);
    return i < 0 ? NULL : &f->tensors[i];
}

int64_t eli_gguf_tensor_nelements(const eli_gguf_tensor *t) { return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]; }

uint64_t eli_gguf_value_count(const eli_gguf_value *v) { return v->type == GGUF_VT_ARRAY ? v->v.arr.n : 1; }

/* Resolves a scalar or array element into a decoded scalar value. */
static int element(const eli_gguf_value *v, uint64_t idx, eli_gguf_value *out, const char *what, eli_error *err) {
    if (v->type != GGUF_VT_ARRAY) {
        if (idx) return eli_fail(err, ELI_ERR_INVALID_ARG, "%s: index %llu of a scalar", what, (unsigned long long)idx);
        *out = *v;
        return ELI_OK;
    }
    uint32_t et = v->v.arr.elem_type;
    if (idx >= v->v.arr.n)
        return eli_fail(err, ELI_ERR_INVALID_ARG, "%s: index %llu out of range (array has %llu elements)", what,
                        (unsigned long long)idx, (unsigned long long)v->v.arr.n);
    if (!eli_gguf_scalar_size(et))
        return eli_fail(err, ELI_ERR_INVALID_ARG, "%s: array of %s is not numeric", what, eli_gguf_type_name(et));
    decode_scalar(et, v->v.arr.raw + idx * eli_gguf_scalar_size(et), out);
    return ELI_OK;
}

int eli_gguf_value_i64(const eli_gguf_value *v, uint64_t idx, int64_t *out, const char *what, eli_error *err) {
    eli_gguf_value s = {0};
    int rc = element(v, idx, &s, what, err);
    if (rc) return rc;
    switch (s.type) {
    case GGUF_VT_UINT8: case GGUF_VT_UINT16: case GGUF_VT_UINT32: case GGUF_VT_UINT64: case GGUF_VT_BOOL:
        if (s.v.u64 > (uint64_t)INT64_MAX) return eli_fail(err, ELI_ERR_INVALID_ARG, "%s: value out of range", what);
        *out = (int64_t)s.v.u64;
        return ELI_OK;
    case GGUF_VT_INT8: case GGUF_VT_INT16: case GGUF_VT_INT32: case GGUF_VT_INT64: *out = s.v.i64; return ELI_OK;
    case GGUF_VT_FLOAT32: case GGUF_VT_FLOAT64:
        if (!(s.v.f64 >= -9.2e18 && s.v.f64 <= 9.2e18) || s.v.f64 != (double)(int64_t)s.v.f64)
            return eli_fail(err, ELI_ERR_INVALID_ARG, "%s: %g is not an integer", what, s.v.f64);
        *out = (int64_t)s.v.f64;
        return ELI_OK;
    default: return eli_fail(err, ELI_ERR_INVALID_ARG, "%s: has type %s, expected a number", what, eli_gguf_type_name(s.type));
    }
}

int eli_gguf_value_f64(const eli_gguf_value *v, uint64_t idx, double *out, const char *what, eli_error *err) {
    eli_gguf_value s = {0};
    int rc = element(v, idx, &s, what, err);
    if (rc) return rc;
    switch (s.type) {
    case GGUF_VT_FLOAT32: case GGUF_VT_FLOAT64: *out = s.v.f64; return ELI_OK;
    case GGUF_VT_INT8: case GGUF_VT_INT16: case GGUF_VT_INT32: case GGUF_VT_INT64: *out = (double)s.v.i64; return ELI_OK;
    case GGUF_VT_UINT8: case GGUF_VT_UINT16: case GGUF_VT_UINT32: case GGUF_VT_UINT64: case GGUF_VT_BOOL:
        *out = (double)s.v.u64;
        return ELI_OK;
    default: return eli_fail(err, ELI_ERR_INVALID_ARG, "%s: has type %s, expected a number", what, eli_gguf_type_name(s.type));
    }
}

int eli_gguf_get_u32(const eli_gguf_file *f, const char *key, uint32_t *out, eli_error *err) {
    const eli_gguf_value *v = eli_gguf_find(f, key);
    if (!v) return 0;
    if (v->type == GGUF_VT_ARRAY) return eli_fail(err, ELI_ERR_INVALID_ARG, "%s: is an array, expected a scalar", key);
    int64_t x = 0;
    int rc = eli_gguf_value_i64(v, 0, &x, key, err);
    if (rc) return rc;
    if (x < 0 || x > UINT32_MAX) return eli_fail(err, ELI_ERR_INVALID_ARG, "%s: value %lld out of range for u32", key, (long long)x);
    *out = (uint32_t)x;
    return 1;
}

int eli_gguf_get_f32(const eli_gguf_file *f, const char *key, float *out, eli_error *err) {
    const eli_gguf_value *v = eli_gguf_find(f, key);
    if (!v) return 0;
    if (v->type == GGUF_VT_ARRAY) return eli_fail(err, ELI_ERR_INVALID_ARG, "%s: is an array, expected a scalar", key);
    double x = 0;
    int rc = eli_gguf_value_f64(v, 0, &x, key, err);
    if (rc) return rc;
    *out = (float)x;
    return 1;
}

int eli_gguf_get_bool(const eli_gguf_file *f, const char *key, int *out, eli_error *err) {
    const eli_gguf_value *v = eli_gguf_find(f, key);
    if (!v) return 0;
    if (v->type != GGUF_VT_BOOL)
        return eli_fail(err, ELI_ERR_INVALID_ARG, "%s: has type %s, expected bool", key, eli_gguf_type_name(v->type));
    *out = v->v.u64 != 0;
    return 1;
}

int eli_gguf_get_str(const eli_gguf_file *f, const char *key, eli_gguf_str *out, eli_error *err) {
    const eli_gguf_value *v = eli_gguf_find(f, key);
    if (!v) return 0;
    if (v->type != GGUF_VT_STRING)
        return eli_fail(err, ELI_ERR_INVALID_ARG, "%s: has type %s, expected str", key, eli_gguf_type_name(v->type));
    *out = v->v.str;
    return 1;
}

int eli_gguf_get_arr(const eli_gguf_file *f, const char *key, uint32_t elem_type, const eli_gguf_value **out, eli_error *err) {
    const eli_gguf_value *v = eli_gguf_find(f, key);
    if (!v) return 0;
    if (v->type != GGUF_VT_ARRAY)
        return eli_fail(err, ELI_ERR_INVALID_ARG, "%s: has type %s, expected an array", key, eli_gguf_type_name(v->type));
    if (elem_type != GGUF_VT_COUNT && v->v.arr.elem_type != elem_type)
        return eli_fail(err, ELI_ERR_INVALID_ARG, "%s: is an array of %s, expected %s", key,
                        eli_gguf_type_name(v->v.arr.elem_type), eli_gguf_type_name(elem_type));
    *out = v;
    return 1;
}

int eli_gguf_str_eq(eli_gguf_str s, const char *c) { return strlen(c) == s.len && !memcmp(s.ptr, c, s.len); }
