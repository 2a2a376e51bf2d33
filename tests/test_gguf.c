/* Tests of the GGUF reader (src/gguf.c) against files built in memory by tests/gguf_writer.h:
 *  - every metadata value type round-trips (scalars, strings, arrays of each, arrays of strings, nested
 *    arrays), with the typed getters and their range checks;
 *  - tensor infos of several types and ranks, general.alignment, versions, magic;
 *  - hostile files: truncation at every byte offset, absurd counts and lengths, unknown types, bad dims,
 *    overflowing shapes, misaligned / out-of-range data, duplicates, empty / NUL names, bad bools, deep
 *    nesting; each must fail with a message naming the key or tensor;
 *  - a deterministic mutation loop (never crash; run under ASan by `make asan`);
 *  - every golden GGUF under shared/golden opens and looks sane. */
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf.h"
#include "gguf_writer.h"
#include "quants.h"
#include "test.h"

/* ---------------------------------------------------------------------------------------------------- */
/* Helpers */

static uint64_t rng_state = 0x243f6a8885a308d3ull;

static uint64_t rng_u64(void) { /* splitmix64 */
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rng_below(uint64_t n) { return n ? rng_u64() % n : 0; }

/* Opens w's file and expects failure with a message containing every non-NULL needle. */
static void expect_fail_buf(const uint8_t *buf, size_t size, const char *what, const char *n1, const char *n2) {
    eli_error err = {0};
    eli_gguf_file *f = eli_gguf_open_memory(buf, size, &err);
    CHECK(f == NULL, "%s: opened but should have failed", what);
    if (f) {
        eli_gguf_close(f);
        return;
    }
    CHECK(err.code < 0, "%s: code %d", what, err.code);
    CHECK(err.msg[0] != '\0', "%s: empty message", what);
    if (n1) CHECK(strstr(err.msg, n1) != NULL, "%s: message '%s' lacks '%s'", what, err.msg, n1);
    if (n2) CHECK(strstr(err.msg, n2) != NULL, "%s: message '%s' lacks '%s'", what, err.msg, n2);
}

static void expect_fail(gw_file *w, const char *what, const char *n1, const char *n2) {
    size_t size;
    uint8_t *buf = gw_finish(w, &size);
    expect_fail_buf(buf, size, what, n1, n2);
    free(buf);
    gw_free(w);
}

/* Opens w's file and expects success; *buf_out receives the buffer (free it after eli_gguf_close). */
static eli_gguf_file *expect_ok(gw_file *w, const char *what, uint8_t **buf_out, size_t *size_out) {
    size_t size;
    uint8_t *buf = gw_finish(w, &size);
    gw_free(w);
    eli_error err = {0};
    eli_gguf_file *f = eli_gguf_open_memory(buf, size, &err);
    CHECK(f != NULL, "%s: %s", what, err.msg);
    if (!f) {
        free(buf);
        buf = NULL;
    }
    *buf_out = buf;
    if (size_out) *size_out = size;
    return f;
}

static void expect_ok_close(gw_file *w, const char *what) {
    uint8_t *buf;
    eli_gguf_file *f = expect_ok(w, what, &buf, NULL);
    eli_gguf_close(f);
    free(buf);
}

static const uint64_t NE1[1] = {4};

/* A file whose only content is a minimal valid tensor plus one metadata entry written by the caller. */
static void one_f32_tensor(gw_file *w, const char *name) {
    static const float v[4] = {1, 2, 3, 4};
    gw_tensor(w, name, ELI_TYPE_F32, 1, NE1, v, sizeof v);
}

/* ---------------------------------------------------------------------------------------------------- */
/* The rich file: every value type, several tensors */

#define RICH_NKV 34
#define RICH_NT 8

static uint8_t tensor_byte(int t, size_t i) { return (uint8_t)(i * 7 + (size_t)t * 31 + 1); }

typedef struct {
    const char *name;
    uint32_t type;
    uint32_t n_dims;
    uint64_t ne[4];
} tdesc;

static const tdesc RICH_TENSORS[RICH_NT] = {
    {"t.f32", ELI_TYPE_F32, 2, {4, 3, 1, 1}},
    {"t.f16", ELI_TYPE_F16, 1, {8, 1, 1, 1}},
    {"t.q8_0", ELI_TYPE_Q8_0, 2, {64, 2, 1, 1}},
    {"t.q4_k", ELI_TYPE_Q4_K, 3, {256, 1, 2, 1}},
    {"t.4d", ELI_TYPE_F32, 4, {2, 1, 3, 2}},
    {"t.empty", ELI_TYPE_F32, 2, {0, 5, 1, 1}},
    {"t.bf16", ELI_TYPE_BF16, 1, {3, 1, 1, 1}},
    {"t.last.i8", ELI_TYPE_I8, 1, {5, 1, 1, 1}}, /* odd size last: every prefix is truncated */
};

static size_t tdesc_bytes(const tdesc *d) {
    return eli_row_size(d->type, (int64_t)d->ne[0]) * (size_t)(d->ne[1] * d->ne[2] * d->ne[3]);
}

static void build_rich(gw_file *w) {
    gw_init(w);
    gw_kv_u8(w, "s.u8", 200);
    gw_kv_i8(w, "s.i8", -100);
    gw_kv_u16(w, "s.u16", 60000);
    gw_kv_i16(w, "s.i16", -30000);
    gw_kv_u32(w, "s.u32", 4000000000u);
    gw_kv_i32(w, "s.i32", -2000000000);
    gw_kv_f32(w, "s.f32", 1.5f);
    gw_kv_bool(w, "s.bool.true", 1);
    gw_kv_bool(w, "s.bool.false", 0);
    gw_kv_str(w, "s.str", "hello, world");
    gw_kv_str(w, "s.str.empty", "");
    gw_strn(gw_kv(w, "s.str.nul", GGUF_VT_STRING), "a\0b", 3);
    gw_kv_u64(w, "s.u64", 0xFEDCBA9876543210ull);
    gw_kv_i64(w, "s.i64", INT64_MIN);
    gw_kv_f64(w, "s.f64", -1e300);
    gw_buf *b;
    b = gw_kv(w, "a.u8", GGUF_VT_ARRAY), gw_arr(b, GGUF_VT_UINT8, 3), gw_u8(b, 0), gw_u8(b, 1), gw_u8(b, 255);
    b = gw_kv(w, "a.i8", GGUF_VT_ARRAY), gw_arr(b, GGUF_VT_INT8, 3), gw_u8(b, 0x80), gw_u8(b, 0), gw_u8(b, 127);
    b = gw_kv(w, "a.u16", GGUF_VT_ARRAY), gw_arr(b, GGUF_VT_UINT16, 3), gw_u16(b, 0), gw_u16(b, 65535), gw_u16(b, 7);
    b = gw_kv(w, "a.i16", GGUF_VT_ARRAY), gw_arr(b, GGUF_VT_INT16, 3), gw_u16(b, 0x8000), gw_u16(b, 32767),
    gw_u16(b, 0xFFFF);
    {
        static const uint32_t u32s[3] = {0, UINT32_MAX, 42};
        static const int32_t i32s[3] = {INT32_MIN, INT32_MAX, -7};
        gw_kv_arr_u32(w, "a.u32", u32s, 3);
        gw_kv_arr_i32(w, "a.i32", i32s, 3);
    }
    b = gw_kv(w, "a.f32", GGUF_VT_ARRAY), gw_arr(b, GGUF_VT_FLOAT32, 3), gw_f32(b, 0.5f), gw_f32(b, -2.0f),
    gw_f32(b, 1e30f);
    {
        static const uint8_t bools[3] = {1, 0, 1};
        gw_kv_arr_bool(w, "a.bool", bools, 3);
    }
    b = gw_kv(w, "a.u64", GGUF_VT_ARRAY), gw_arr(b, GGUF_VT_UINT64, 3), gw_u64(b, 0), gw_u64(b, UINT64_MAX),
    gw_u64(b, 1ull << 40);
    b = gw_kv(w, "a.i64", GGUF_VT_ARRAY), gw_arr(b, GGUF_VT_INT64, 3), gw_u64(b, (uint64_t)INT64_MIN),
    gw_u64(b, (uint64_t)INT64_MAX), gw_u64(b, (uint64_t)-1);
    b = gw_kv(w, "a.f64", GGUF_VT_ARRAY), gw_arr(b, GGUF_VT_FLOAT64, 3), gw_f64(b, 1e-300), gw_f64(b, -0.0),
    gw_f64(b, 3.25);
    {
        static const char *const strs[3] = {"alpha", "", "\xce\xb3\xe2\x96\x81"};
        gw_kv_arr_str(w, "a.str", strs, 3);
    }
    gw_kv_arr_u32(w, "a.empty", NULL, 0);
    b = gw_kv(w, "a.str.empty", GGUF_VT_ARRAY), gw_arr(b, GGUF_VT_STRING, 0);
    /* [[1, 2] i32, [3] i32, [] u8] */
    b = gw_kv(w, "n.i32", GGUF_VT_ARRAY), gw_arr(b, GGUF_VT_ARRAY, 3);
    gw_arr(b, GGUF_VT_INT32, 2), gw_u32(b, 1), gw_u32(b, 2);
    gw_arr(b, GGUF_VT_INT32, 1), gw_u32(b, 3);
    gw_arr(b, GGUF_VT_UINT8, 0);
    /* [["x"], ["y", "z"]] */
    b = gw_kv(w, "n.str", GGUF_VT_ARRAY), gw_arr(b, GGUF_VT_ARRAY, 2);
    gw_arr(b, GGUF_VT_STRING, 1), gw_str(b, "x");
    gw_arr(b, GGUF_VT_STRING, 2), gw_str(b, "y"), gw_str(b, "z");
    /* [[[7 u16]], []] */
    b = gw_kv(w, "n.deep", GGUF_VT_ARRAY), gw_arr(b, GGUF_VT_ARRAY, 2);
    gw_arr(b, GGUF_VT_ARRAY, 1), gw_arr(b, GGUF_VT_UINT16, 1), gw_u16(b, 7);
    gw_arr(b, GGUF_VT_ARRAY, 0);
    b = gw_kv(w, "n.empty", GGUF_VT_ARRAY), gw_arr(b, GGUF_VT_ARRAY, 0);
    gw_kv_str(w, "general.architecture", "test");

    for (int t = 0; t < RICH_NT; t++) {
        const tdesc *d = &RICH_TENSORS[t];
        size_t n = tdesc_bytes(d);
        uint8_t *data = malloc(n ? n : 1);
        for (size_t i = 0; i < n; i++) data[i] = tensor_byte(t, i);
        gw_tensor(w, d->name, d->type, d->n_dims, d->ne, data, n);
        free(data);
    }
}

static int64_t vi64(const eli_gguf_value *v, uint64_t idx) {
    int64_t x = 0x5a5a;
    eli_error err = {0};
    int rc = eli_gguf_value_i64(v, idx, &x, "vi64", &err);
    CHECK(rc == ELI_OK, "eli_gguf_value_i64[%llu]: %s", (unsigned long long)idx, err.msg);
    return x;
}

static double vf64(const eli_gguf_value *v, uint64_t idx) {
    double x = 0;
    eli_error err = {0};
    int rc = eli_gguf_value_f64(v, idx, &x, "vf64", &err);
    CHECK(rc == ELI_OK, "eli_gguf_value_f64[%llu]: %s", (unsigned long long)idx, err.msg);
    return x;
}

static const eli_gguf_value *find_typed(const eli_gguf_file *f, const char *key, uint32_t type) {
    const eli_gguf_value *v = eli_gguf_find(f, key);
    CHECK(v != NULL, "key '%s' not found", key);
    if (v) CHECK(v->type == type, "key '%s' has type %u, want %u", key, v->type, type);
    return v && v->type == type ? v : NULL;
}

static const eli_gguf_value *find_arr(const eli_gguf_file *f, const char *key, uint32_t et, uint64_t n) {
    const eli_gguf_value *v = find_typed(f, key, GGUF_VT_ARRAY);
    if (!v) return NULL;
    CHECK(v->v.arr.elem_type == et, "%s: elem type %u, want %u", key, v->v.arr.elem_type, et);
    CHECK(v->v.arr.n == n, "%s: %llu elements, want %llu", key, (unsigned long long)v->v.arr.n, (unsigned long long)n);
    CHECK(eli_gguf_value_count(v) == n, "%s: eli_gguf_value_count", key);
    return v->v.arr.elem_type == et && v->v.arr.n == n ? v : NULL;
}

static int str_is(eli_gguf_str s, const char *c, size_t len) { return s.len == len && !memcmp(s.ptr, c, len); }

/* Expects a getter call to fail with a message naming the key. */
#define CHECK_GETTER_FAILS(call, key)                                                                     \
    do {                                                                                                  \
        eli_error e_ = {0};                                                                               \
        int rc_ = (call);                                                                                 \
        CHECK(rc_ < 0, "%s should fail (rc %d)", #call, rc_);                                             \
        CHECK(strstr(e_.msg, key) != NULL, "%s: message '%s' lacks the key", #call, e_.msg);              \
    } while (0)

static void check_rich(const eli_gguf_file *f, const uint8_t *base, size_t size, const char *what) {
    CHECK(eli_gguf_version(f) == 3, "%s: version", what);
    CHECK(eli_gguf_file_size(f) == size, "%s: size %llu vs %zu", what, (unsigned long long)eli_gguf_file_size(f), size);
    CHECK(eli_gguf_alignment(f) == 32, "%s: alignment %u", what, eli_gguf_alignment(f));
    CHECK(eli_gguf_data_offset(f) % 32 == 0, "%s: data offset %llu", what, (unsigned long long)eli_gguf_data_offset(f));
    if (base) CHECK(eli_gguf_mapping(f) == base, "%s: mapping", what);
    const uint8_t *map = eli_gguf_mapping(f);
    CHECK(map[0] == 'G' && map[3] == 'F', "%s: mapping content", what);
    CHECK(eli_gguf_n_kv(f) == RICH_NKV, "%s: n_kv %llu", what, (unsigned long long)eli_gguf_n_kv(f));
    CHECK(eli_gguf_n_tensors(f) == RICH_NT, "%s: n_tensors %llu", what, (unsigned long long)eli_gguf_n_tensors(f));
    CHECK(eli_gguf_kv_at(f, 0) && !strcmp(eli_gguf_kv_at(f, 0)->key, "s.u8"), "%s: first key", what);
    CHECK(eli_gguf_kv_at(f, RICH_NKV - 1) && !strcmp(eli_gguf_kv_at(f, RICH_NKV - 1)->key, "general.architecture"),
          "%s: last key", what);
    CHECK(eli_gguf_kv_at(f, RICH_NKV) == NULL, "%s: kv_at past the end", what);
    CHECK(eli_gguf_tensor_at(f, RICH_NT) == NULL, "%s: tensor_at past the end", what);
    for (uint64_t i = 0; i < eli_gguf_n_kv(f); i++)
        CHECK(eli_gguf_find(f, eli_gguf_kv_at(f, i)->key) == &eli_gguf_kv_at(f, i)->value, "%s: find(kv #%llu)", what,
              (unsigned long long)i);
    CHECK(eli_gguf_find(f, "s.missing") == NULL && eli_gguf_find(f, "") == NULL && eli_gguf_find(f, NULL) == NULL,
          "%s: absent keys", what);

    const eli_gguf_value *v;
    if ((v = find_typed(f, "s.u8", GGUF_VT_UINT8))) CHECK(v->v.u64 == 200 && vi64(v, 0) == 200, "s.u8");
    if ((v = find_typed(f, "s.i8", GGUF_VT_INT8))) CHECK(v->v.i64 == -100 && vi64(v, 0) == -100, "s.i8");
    if ((v = find_typed(f, "s.u16", GGUF_VT_UINT16))) CHECK(v->v.u64 == 60000, "s.u16");
    if ((v = find_typed(f, "s.i16", GGUF_VT_INT16))) CHECK(v->v.i64 == -30000, "s.i16");
    if ((v = find_typed(f, "s.u32", GGUF_VT_UINT32))) CHECK(v->v.u64 == 4000000000u, "s.u32");
    if ((v = find_typed(f, "s.i32", GGUF_VT_INT32))) CHECK(v->v.i64 == -2000000000, "s.i32");
    if ((v = find_typed(f, "s.f32", GGUF_VT_FLOAT32))) CHECK(v->v.f64 == 1.5 && vf64(v, 0) == 1.5, "s.f32");
    if ((v = find_typed(f, "s.bool.true", GGUF_VT_BOOL))) CHECK(v->v.u64 == 1, "s.bool.true");
    if ((v = find_typed(f, "s.bool.false", GGUF_VT_BOOL))) CHECK(v->v.u64 == 0, "s.bool.false");
    if ((v = find_typed(f, "s.str", GGUF_VT_STRING))) CHECK(eli_gguf_str_eq(v->v.str, "hello, world"), "s.str");
    if ((v = find_typed(f, "s.str.empty", GGUF_VT_STRING))) CHECK(v->v.str.len == 0 && eli_gguf_str_eq(v->v.str, ""), "s.str.empty");
    if ((v = find_typed(f, "s.str.nul", GGUF_VT_STRING)))
        CHECK(str_is(v->v.str, "a\0b", 3) && !eli_gguf_str_eq(v->v.str, "a"), "s.str.nul");
    if ((v = find_typed(f, "s.u64", GGUF_VT_UINT64))) {
        CHECK(v->v.u64 == 0xFEDCBA9876543210ull, "s.u64");
        int64_t x;
        CHECK(eli_gguf_value_i64(v, 0, &x, "s.u64", NULL) < 0, "s.u64 > INT64_MAX must not convert to i64");
        CHECK(vf64(v, 0) == (double)0xFEDCBA9876543210ull, "s.u64 as f64");
    }
    if ((v = find_typed(f, "s.i64", GGUF_VT_INT64))) CHECK(v->v.i64 == INT64_MIN && vi64(v, 0) == INT64_MIN, "s.i64");
    if ((v = find_typed(f, "s.f64", GGUF_VT_FLOAT64))) CHECK(v->v.f64 == -1e300, "s.f64");

    if ((v = find_arr(f, "a.u8", GGUF_VT_UINT8, 3))) CHECK(vi64(v, 0) == 0 && vi64(v, 1) == 1 && vi64(v, 2) == 255, "a.u8");
    if ((v = find_arr(f, "a.i8", GGUF_VT_INT8, 3)))
        CHECK(vi64(v, 0) == -128 && vi64(v, 1) == 0 && vi64(v, 2) == 127, "a.i8");
    if ((v = find_arr(f, "a.u16", GGUF_VT_UINT16, 3)))
        CHECK(vi64(v, 0) == 0 && vi64(v, 1) == 65535 && vi64(v, 2) == 7, "a.u16");
    if ((v = find_arr(f, "a.i16", GGUF_VT_INT16, 3)))
        CHECK(vi64(v, 0) == -32768 && vi64(v, 1) == 32767 && vi64(v, 2) == -1, "a.i16");
    if ((v = find_arr(f, "a.u32", GGUF_VT_UINT32, 3)))
        CHECK(vi64(v, 0) == 0 && vi64(v, 1) == UINT32_MAX && vi64(v, 2) == 42, "a.u32");
    if ((v = find_arr(f, "a.i32", GGUF_VT_INT32, 3)))
        CHECK(vi64(v, 0) == INT32_MIN && vi64(v, 1) == INT32_MAX && vi64(v, 2) == -7, "a.i32");
    if ((v = find_arr(f, "a.f32", GGUF_VT_FLOAT32, 3))) {
        CHECK(vf64(v, 0) == 0.5 && vf64(v, 1) == -2.0 && vf64(v, 2) == (double)1e30f, "a.f32");
        CHECK(vi64(v, 1) == -2, "a.f32[1] as integer");
        int64_t x;
        eli_error e = {0};
        CHECK(eli_gguf_value_i64(v, 0, &x, "a.f32", &e) < 0 && strstr(e.msg, "a.f32"), "0.5 is not an integer: %s", e.msg);
        CHECK(eli_gguf_value_i64(v, 2, &x, "a.f32", NULL) < 0, "1e30 is out of i64 range");
        CHECK(eli_gguf_value_i64(v, 3, &x, "a.f32", &e) < 0 && strstr(e.msg, "out of range"), "index 3: %s", e.msg);
    }
    if ((v = find_arr(f, "a.bool", GGUF_VT_BOOL, 3))) CHECK(vi64(v, 0) == 1 && vi64(v, 1) == 0 && vi64(v, 2) == 1, "a.bool");
    if ((v = find_arr(f, "a.u64", GGUF_VT_UINT64, 3))) {
        CHECK(vi64(v, 0) == 0 && vi64(v, 2) == (int64_t)1 << 40, "a.u64");
        int64_t x;
        CHECK(eli_gguf_value_i64(v, 1, &x, "a.u64", NULL) < 0, "a.u64[1] = UINT64_MAX must not convert to i64");
        CHECK(vf64(v, 1) == (double)UINT64_MAX, "a.u64[1] as f64");
    }
    if ((v = find_arr(f, "a.i64", GGUF_VT_INT64, 3)))
        CHECK(vi64(v, 0) == INT64_MIN && vi64(v, 1) == INT64_MAX && vi64(v, 2) == -1, "a.i64");
    if ((v = find_arr(f, "a.f64", GGUF_VT_FLOAT64, 3))) {
        double z = vf64(v, 1);
        CHECK(vf64(v, 0) == 1e-300 && z == 0.0 && signbit(z) && vf64(v, 2) == 3.25, "a.f64");
    }
    if ((v = find_arr(f, "a.str", GGUF_VT_STRING, 3))) {
        CHECK(eli_gguf_str_eq(v->v.arr.strs[0], "alpha") && v->v.arr.strs[1].len == 0 &&
                  eli_gguf_str_eq(v->v.arr.strs[2], "\xce\xb3\xe2\x96\x81"),
              "a.str");
        int64_t x;
        eli_error e = {0};
        CHECK(eli_gguf_value_i64(v, 0, &x, "a.str", &e) < 0 && strstr(e.msg, "not numeric"), "a.str numeric: %s", e.msg);
    }
    find_arr(f, "a.empty", GGUF_VT_UINT32, 0);
    find_arr(f, "a.str.empty", GGUF_VT_STRING, 0);
    if ((v = find_arr(f, "n.i32", GGUF_VT_ARRAY, 3))) {
        const eli_gguf_value *it = v->v.arr.items;
        CHECK(it[0].type == GGUF_VT_ARRAY && it[0].v.arr.elem_type == GGUF_VT_INT32 && it[0].v.arr.n == 2 &&
                  vi64(&it[0], 0) == 1 && vi64(&it[0], 1) == 2,
              "n.i32[0]");
        CHECK(it[1].v.arr.elem_type == GGUF_VT_INT32 && it[1].v.arr.n == 1 && vi64(&it[1], 0) == 3, "n.i32[1]");
        CHECK(it[2].v.arr.elem_type == GGUF_VT_UINT8 && it[2].v.arr.n == 0, "n.i32[2]");
        int64_t x;
        CHECK(eli_gguf_value_i64(v, 0, &x, "n.i32", NULL) < 0, "an array of arrays is not numeric");
    }
    if ((v = find_arr(f, "n.str", GGUF_VT_ARRAY, 2))) {
        const eli_gguf_value *it = v->v.arr.items;
        CHECK(it[0].v.arr.elem_type == GGUF_VT_STRING && it[0].v.arr.n == 1 && eli_gguf_str_eq(it[0].v.arr.strs[0], "x"),
              "n.str[0]");
        CHECK(it[1].v.arr.elem_type == GGUF_VT_STRING && it[1].v.arr.n == 2 && eli_gguf_str_eq(it[1].v.arr.strs[0], "y") &&
                  eli_gguf_str_eq(it[1].v.arr.strs[1], "z"),
              "n.str[1]");
    }
    if ((v = find_arr(f, "n.deep", GGUF_VT_ARRAY, 2))) {
        const eli_gguf_value *l1 = &v->v.arr.items[0];
        CHECK(l1->v.arr.elem_type == GGUF_VT_ARRAY && l1->v.arr.n == 1, "n.deep[0]");
        if (l1->v.arr.n == 1) {
            const eli_gguf_value *l2 = &l1->v.arr.items[0];
            CHECK(l2->v.arr.elem_type == GGUF_VT_UINT16 && l2->v.arr.n == 1 && vi64(l2, 0) == 7, "n.deep[0][0]");
        }
        CHECK(v->v.arr.items[1].v.arr.elem_type == GGUF_VT_ARRAY && v->v.arr.items[1].v.arr.n == 0, "n.deep[1]");
    }
    find_arr(f, "n.empty", GGUF_VT_ARRAY, 0);

    /* typed getters */
    uint32_t u = 77;
    float fl = 0;
    int bo = -1;
    eli_gguf_str s = {0};
    const eli_gguf_value *av = NULL;
    CHECK(eli_gguf_get_u32(f, "s.u8", &u, NULL) == 1 && u == 200, "get_u32(s.u8)");
    CHECK(eli_gguf_get_u32(f, "s.u32", &u, NULL) == 1 && u == 4000000000u, "get_u32(s.u32)");
    CHECK(eli_gguf_get_u32(f, "s.bool.true", &u, NULL) == 1 && u == 1, "get_u32(bool)");
    u = 77;
    CHECK(eli_gguf_get_u32(f, "s.absent", &u, NULL) == 0 && u == 77, "get_u32(absent) leaves out untouched");
    CHECK_GETTER_FAILS(eli_gguf_get_u32(f, "s.i32", &u, &e_), "s.i32");
    CHECK_GETTER_FAILS(eli_gguf_get_u32(f, "s.u64", &u, &e_), "s.u64");
    CHECK_GETTER_FAILS(eli_gguf_get_u32(f, "s.f32", &u, &e_), "s.f32");
    CHECK_GETTER_FAILS(eli_gguf_get_u32(f, "s.str", &u, &e_), "s.str");
    CHECK_GETTER_FAILS(eli_gguf_get_u32(f, "a.u32", &u, &e_), "a.u32");
    CHECK(u == 77, "failed getters leave out alone (u = %u)", u);
    CHECK(eli_gguf_get_f32(f, "s.f32", &fl, NULL) == 1 && fl == 1.5f, "get_f32(s.f32)");
    CHECK(eli_gguf_get_f32(f, "s.i16", &fl, NULL) == 1 && fl == -30000.0f, "get_f32(s.i16)");
    CHECK(eli_gguf_get_f32(f, "s.absent", &fl, NULL) == 0, "get_f32(absent)");
    CHECK_GETTER_FAILS(eli_gguf_get_f32(f, "s.str", &fl, &e_), "s.str");
    CHECK_GETTER_FAILS(eli_gguf_get_f32(f, "a.f32", &fl, &e_), "a.f32");
    CHECK(eli_gguf_get_bool(f, "s.bool.true", &bo, NULL) == 1 && bo == 1, "get_bool(true)");
    CHECK(eli_gguf_get_bool(f, "s.bool.false", &bo, NULL) == 1 && bo == 0, "get_bool(false)");
    CHECK(eli_gguf_get_bool(f, "s.absent", &bo, NULL) == 0, "get_bool(absent)");
    CHECK_GETTER_FAILS(eli_gguf_get_bool(f, "s.u8", &bo, &e_), "s.u8");
    CHECK(eli_gguf_get_str(f, "s.str", &s, NULL) == 1 && eli_gguf_str_eq(s, "hello, world"), "get_str");
    CHECK(eli_gguf_get_str(f, "s.absent", &s, NULL) == 0, "get_str(absent)");
    CHECK_GETTER_FAILS(eli_gguf_get_str(f, "s.u8", &s, &e_), "s.u8");
    CHECK_GETTER_FAILS(eli_gguf_get_str(f, "a.str", &s, &e_), "a.str");
    CHECK(eli_gguf_get_arr(f, "a.str", GGUF_VT_STRING, &av, NULL) == 1 && av == eli_gguf_find(f, "a.str"), "get_arr(str)");
    CHECK(eli_gguf_get_arr(f, "a.u8", GGUF_VT_COUNT, &av, NULL) == 1 && av == eli_gguf_find(f, "a.u8"), "get_arr(any)");
    CHECK(eli_gguf_get_arr(f, "n.i32", GGUF_VT_ARRAY, &av, NULL) == 1, "get_arr(array)");
    CHECK(eli_gguf_get_arr(f, "s.absent", GGUF_VT_STRING, &av, NULL) == 0, "get_arr(absent)");
    CHECK_GETTER_FAILS(eli_gguf_get_arr(f, "a.str", GGUF_VT_UINT32, &av, &e_), "a.str");
    CHECK_GETTER_FAILS(eli_gguf_get_arr(f, "s.u8", GGUF_VT_COUNT, &av, &e_), "s.u8");
    {
        int64_t x;
        eli_error e = {0};
        const eli_gguf_value *sv = eli_gguf_find(f, "s.u8");
        CHECK(sv && eli_gguf_value_i64(sv, 1, &x, "s.u8", &e) < 0 && strstr(e.msg, "s.u8"), "scalar index 1: %s", e.msg);
        const eli_gguf_value *st = eli_gguf_find(f, "s.str");
        double d;
        CHECK(st && eli_gguf_value_f64(st, 0, &d, "s.str", &e) < 0 && strstr(e.msg, "s.str"), "string as number: %s", e.msg);
    }

    /* tensors */
    uint64_t data_off = eli_gguf_data_offset(f);
    for (int t = 0; t < RICH_NT; t++) {
        const tdesc *d = &RICH_TENSORS[t];
        const eli_gguf_tensor *ti = eli_gguf_tensor_at(f, (uint64_t)t);
        CHECK(ti && !strcmp(ti->name, d->name), "%s: tensor #%d name", what, t);
        if (!ti) continue;
        CHECK(eli_gguf_find_tensor(f, d->name) == ti, "%s: find_tensor(%s)", what, d->name);
        CHECK(ti->type == d->type && ti->n_dims == d->n_dims, "%s: %s type/dims", what, d->name);
        for (int k = 0; k < 4; k++) CHECK(ti->ne[k] == (int64_t)d->ne[k], "%s: %s ne[%d] = %lld", what, d->name, k, (long long)ti->ne[k]);
        int64_t nel = (int64_t)(d->ne[0] * d->ne[1] * d->ne[2] * d->ne[3]);
        CHECK(eli_gguf_tensor_nelements(ti) == nel, "%s: %s nelements", what, d->name);
        size_t nb = tdesc_bytes(d);
        CHECK(ti->nbytes == nb, "%s: %s nbytes %llu want %zu", what, d->name, (unsigned long long)ti->nbytes, nb);
        CHECK(ti->offset % 32 == 0, "%s: %s offset %llu", what, d->name, (unsigned long long)ti->offset);
        CHECK((const uint8_t *)ti->data == map + data_off + ti->offset, "%s: %s data pointer", what, d->name);
        int same = 1;
        for (size_t i = 0; i < nb; i++) same &= ((const uint8_t *)ti->data)[i] == tensor_byte(t, i);
        CHECK(same, "%s: %s data bytes", what, d->name);
    }
    const eli_gguf_tensor *last = eli_gguf_tensor_at(f, RICH_NT - 1);
    CHECK(last && data_off + last->offset + last->nbytes == size, "%s: file ends with the last tensor", what);
    CHECK(eli_gguf_find_tensor(f, "t.missing") == NULL && eli_gguf_find_tensor(f, NULL) == NULL, "%s: absent tensor", what);
}

static void test_rich_roundtrip(void) {
    gw_file w;
    build_rich(&w);
    uint8_t *buf;
    size_t size;
    eli_gguf_file *f = expect_ok(&w, "rich", &buf, &size);
    if (f) check_rich(f, buf, size, "rich (memory)");
    eli_gguf_close(f);

    /* the same bytes through a real file and eli_gguf_open */
    if (buf) {
        char path[] = "/tmp/eli_test_gguf_XXXXXX";
        int fd = mkstemp(path);
        CHECK(fd >= 0, "mkstemp");
        if (fd >= 0) {
            CHECK(write(fd, buf, size) == (ssize_t)size, "write temp file");
            close(fd);
            eli_error err = {0};
            eli_gguf_file *g = eli_gguf_open(path, &err);
            CHECK(g != NULL, "eli_gguf_open(%s): %s", path, err.msg);
            if (g) {
                CHECK(eli_gguf_mapping(g) != buf, "eli_gguf_open maps the file itself");
                check_rich(g, NULL, size, "rich (file)");
                eli_gguf_close(g);
            }
            /* truncated on disk: fails and the message names the path */
            CHECK(truncate(path, (off_t)(size - 1)) == 0, "truncate");
            g = eli_gguf_open(path, &err);
            CHECK(g == NULL && strstr(err.msg, path) && strstr(err.msg, "tensor"), "truncated file: %s", err.msg);
            eli_gguf_close(g);
            CHECK(truncate(path, 0) == 0, "truncate to 0");
            g = eli_gguf_open(path, &err);
            CHECK(g == NULL && strstr(err.msg, path) && strstr(err.msg, "truncated"), "empty file: %s", err.msg);
            eli_gguf_close(g);
            unlink(path);
            g = eli_gguf_open(path, &err);
            CHECK(g == NULL && strstr(err.msg, path), "missing file: %s", err.msg);
            eli_gguf_close(g);
        }
        eli_error err = {0};
        eli_gguf_file *g = eli_gguf_open("/tmp", &err);
        CHECK(g == NULL && strstr(err.msg, "not a regular file"), "directory: %s", err.msg);
        eli_gguf_close(g);
        g = eli_gguf_open(NULL, &err);
        CHECK(g == NULL && err.code < 0, "NULL path");
        g = eli_gguf_open_memory(NULL, 16, &err);
        CHECK(g == NULL && err.code < 0, "NULL buffer");
        g = eli_gguf_open_memory(NULL, 0, &err);
        CHECK(g == NULL && err.code < 0 && strstr(err.msg, "truncated"), "empty buffer: %s", err.msg);
        CHECK(eli_gguf_open_memory(buf, 3, NULL) == NULL, "NULL err is allowed");
    }
    free(buf);
    eli_gguf_close(NULL);

    /* A copy through gw_value of every parsed entry reproduces the metadata bytes exactly. */
    build_rich(&w);
    size_t n1;
    uint8_t *b1 = gw_finish(&w, &n1);
    gw_free(&w);
    f = eli_gguf_open_memory(b1, n1, NULL);
    CHECK(f != NULL, "rich reopen");
    if (f) {
        gw_buf kv = {0};
        for (uint64_t i = 0; i < eli_gguf_n_kv(f); i++) {
            const eli_gguf_kv *e = eli_gguf_kv_at(f, i);
            gw_str(&kv, e->key);
            gw_u32(&kv, e->value.type);
            gw_value(&kv, &e->value);
        }
        CHECK(kv.n + GW_HEADER_SIZE <= n1 && !memcmp(kv.p, b1 + GW_HEADER_SIZE, kv.n), "metadata re-serialization");
        free(kv.p);
        eli_gguf_close(f);
    }
    free(b1);
}

/* ---------------------------------------------------------------------------------------------------- */
/* Alignment, versions, magic */

static void test_alignment(void) {
    static const uint32_t good[] = {1, 2, 8, 64, 4096, 1u << 20};
    for (size_t k = 0; k < sizeof good / sizeof *good; k++) {
        gw_file w;
        gw_init(&w);
        w.alignment = good[k];
        gw_kv_u32(&w, "general.alignment", good[k]);
        static const uint8_t bytes[5] = {1, 2, 3, 4, 5};
        static const uint64_t n5[1] = {5}, n3[1] = {3};
        gw_tensor(&w, "a", ELI_TYPE_I8, 1, n5, bytes, 5);
        gw_tensor(&w, "b", ELI_TYPE_I8, 1, n3, bytes, 3);
        uint8_t *buf;
        eli_gguf_file *f = expect_ok(&w, "good alignment", &buf, NULL);
        if (f) {
            CHECK(eli_gguf_alignment(f) == good[k], "alignment %u", good[k]);
            CHECK(eli_gguf_data_offset(f) % good[k] == 0, "data offset %llu, alignment %u",
                  (unsigned long long)eli_gguf_data_offset(f), good[k]);
            const eli_gguf_tensor *b = eli_gguf_find_tensor(f, "b");
            CHECK(b && b->offset == (good[k] > 5 ? good[k] : (5 + good[k] - 1) / good[k] * good[k]), "b offset %u", good[k]);
            CHECK(b && !memcmp(b->data, bytes, 3), "b data, alignment %u", good[k]);
        }
        eli_gguf_close(f);
        free(buf);
    }
    /* default 32 when absent */
    {
        gw_file w;
        gw_init(&w);
        gw_kv_u32(&w, "general.alignmentx", 7);
        one_f32_tensor(&w, "x");
        uint8_t *buf;
        eli_gguf_file *f = expect_ok(&w, "default alignment", &buf, NULL);
        if (f) CHECK(eli_gguf_alignment(f) == 32, "default alignment");
        eli_gguf_close(f);
        free(buf);
    }
    static const uint32_t bad[] = {0, 3, 48, 100, 1u << 21, 0x80000000u, UINT32_MAX};
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        gw_file w;
        gw_init(&w);
        gw_kv_u32(&w, "general.alignment", bad[k]);
        one_f32_tensor(&w, "x");
        char val[32];
        snprintf(val, sizeof val, "%u", bad[k]);
        expect_fail(&w, "bad alignment", "general.alignment", val);
    }
    /* wrong types, even with a good value */
    for (int k = 0; k < 6; k++) {
        gw_file w;
        gw_init(&w);
        switch (k) {
        case 0: gw_kv_u64(&w, "general.alignment", 64); break;
        case 1: gw_kv_i32(&w, "general.alignment", 64); break;
        case 2: gw_kv_u16(&w, "general.alignment", 64); break;
        case 3: gw_kv_str(&w, "general.alignment", "64"); break;
        case 4: gw_kv_f32(&w, "general.alignment", 64.0f); break;
        default: {
            static const uint32_t a[1] = {64};
            gw_kv_arr_u32(&w, "general.alignment", a, 1);
        }
        }
        one_f32_tensor(&w, "x");
        expect_fail(&w, "alignment type", "general.alignment", "type");
    }
    /* offsets laid out for 32 but the file says 64 */
    {
        gw_file w;
        gw_init(&w);
        gw_kv_u32(&w, "general.alignment", 64);
        one_f32_tensor(&w, "first");
        one_f32_tensor(&w, "second"); /* at offset 32 */
        expect_fail(&w, "offset vs alignment 64", "'second'", "alignment 64");
    }
    /* a data section that starts at the 64-byte boundary, not at 32 */
    {
        gw_file w;
        gw_init(&w);
        w.alignment = 64;
        gw_kv_u32(&w, "general.alignment", 64);
        gw_kv_str(&w, "pad", "1234567890123"); /* makes the tensor-info end fall between 32- and 64-multiples */
        one_f32_tensor(&w, "x");
        uint8_t *buf;
        size_t size;
        eli_gguf_file *f = expect_ok(&w, "alignment 64 data start", &buf, &size);
        if (f) {
            const eli_gguf_tensor *t = eli_gguf_find_tensor(f, "x");
            CHECK(t && ((const float *)t->data)[3] == 4.0f && eli_gguf_data_offset(f) % 64 == 0, "alignment 64 data");
        }
        eli_gguf_close(f);
        free(buf);
    }
}

static void test_versions_and_magic(void) {
    static const uint32_t versions[] = {0, 1, 2, 3, 4, 5, 0x03000000u, UINT32_MAX};
    for (size_t k = 0; k < sizeof versions / sizeof *versions; k++) {
        uint32_t ver = versions[k];
        gw_file w;
        gw_init(&w);
        w.version = ver;
        gw_kv_str(&w, "general.architecture", "test");
        one_f32_tensor(&w, "x");
        if (ver == 2 || ver == 3) {
            uint8_t *buf;
            eli_gguf_file *f = expect_ok(&w, "version", &buf, NULL);
            if (f) CHECK(eli_gguf_version(f) == ver, "version %u", ver);
            eli_gguf_close(f);
            free(buf);
        } else {
            char val[32];
            snprintf(val, sizeof val, "version %u", ver);
            expect_fail(&w, "bad version", val, NULL);
        }
    }
    static const char *const magics[] = {"GGUG", "FUGG", "gguf", "GGML", "\0\0\0\0", "GGU\0"};
    for (size_t k = 0; k < sizeof magics / sizeof *magics; k++) {
        gw_file w;
        gw_init(&w);
        one_f32_tensor(&w, "x");
        size_t size;
        uint8_t *buf = gw_finish(&w, &size);
        gw_free(&w);
        memcpy(buf, magics[k], 4);
        expect_fail_buf(buf, size, "bad magic", "not a GGUF file", NULL);
        free(buf);
    }
    /* a file with no metadata and no tensors is valid */
    {
        gw_file w;
        gw_init(&w);
        uint8_t *buf;
        size_t size;
        eli_gguf_file *f = expect_ok(&w, "empty gguf", &buf, &size);
        if (f) CHECK(size == 24 && eli_gguf_n_kv(f) == 0 && eli_gguf_n_tensors(f) == 0 && eli_gguf_find(f, "x") == NULL &&
                         eli_gguf_find_tensor(f, "x") == NULL,
                     "empty gguf");
        eli_gguf_close(f);
        free(buf);
    }
}

/* ---------------------------------------------------------------------------------------------------- */
/* Truncation at every byte */

static void truncation_sweep(gw_file *w, const char *what) {
    size_t size;
    uint8_t *full = gw_finish(w, &size);
    gw_free(w);
    int bad = 0, msgless = 0;
    for (size_t len = 0; len < size; len++) {
        uint8_t *p = malloc(len ? len : 1); /* exactly len bytes: ASan catches any read past the end */
        memcpy(p, full, len);
        eli_error err = {0};
        eli_gguf_file *f = eli_gguf_open_memory(p, len, &err);
        if (f) {
            if (bad++ < 5) fprintf(stderr, "%s: prefix of %zu/%zu bytes opened\n", what, len, size);
            eli_gguf_close(f);
        } else if (err.code >= 0 || !err.msg[0]) {
            msgless++;
        }
        free(p);
    }
    CHECK(bad == 0, "%s: %d proper prefixes opened", what, bad);
    CHECK(msgless == 0, "%s: %d failures without a message", what, msgless);
    eli_error err = {0};
    eli_gguf_file *f = eli_gguf_open_memory(full, size, &err);
    CHECK(f != NULL, "%s: full file: %s", what, err.msg);
    eli_gguf_close(f);
    free(full);
}

static void test_truncation(void) {
    gw_file w;
    build_rich(&w);
    truncation_sweep(&w, "rich");
    /* metadata only (the last byte of the file is the last byte of the last value) */
    gw_init(&w);
    gw_kv_str(&w, "a", "x");
    static const char *const strs[2] = {"p", "qq"};
    gw_kv_arr_str(&w, "b", strs, 2);
    gw_buf *b = gw_kv(&w, "c", GGUF_VT_ARRAY);
    gw_arr(b, GGUF_VT_ARRAY, 1), gw_arr(b, GGUF_VT_UINT16, 2), gw_u16(b, 1), gw_u16(b, 2);
    truncation_sweep(&w, "metadata only");
    /* alignment 64 */
    gw_init(&w);
    w.alignment = 64;
    gw_kv_u32(&w, "general.alignment", 64);
    one_f32_tensor(&w, "x");
    one_f32_tensor(&w, "y");
    truncation_sweep(&w, "alignment 64");
}

/* ---------------------------------------------------------------------------------------------------- */
/* Hostile headers */

static void put_header(gw_buf *b, uint64_t n_tensors, uint64_t n_kv) {
    gw_put(b, "GGUF", 4);
    gw_u32(b, 3);
    gw_u64(b, n_tensors);
    gw_u64(b, n_kv);
}

static void expect_fail_gwbuf(gw_buf *b, const char *what, const char *n1, const char *n2) {
    uint8_t *p = malloc(b->n);
    memcpy(p, b->p, b->n);
    expect_fail_buf(p, b->n, what, n1, n2);
    free(p);
    free(b->p);
    memset(b, 0, sizeof *b);
}

static void test_absurd_counts(void) {
    static const uint64_t huge[] = {UINT64_MAX, UINT64_MAX - 1, 1ull << 63, UINT64_MAX / 13 + 1, 1ull << 40, 1000};
    for (size_t k = 0; k < sizeof huge / sizeof *huge; k++) {
        gw_file w;
        build_rich(&w);
        size_t size;
        uint8_t *buf = gw_finish(&w, &size);
        gw_free(&w);
        gw_patch(buf + 16, huge[k], 8);
        expect_fail_buf(buf, size, "absurd n_kv", huge[k] == 1000 ? NULL : "metadata count", NULL);
        gw_patch(buf + 16, RICH_NKV, 8);
        gw_patch(buf + 8, huge[k], 8);
        expect_fail_buf(buf, size, "absurd n_tensors", huge[k] == 1000 ? NULL : "tensor count", NULL);
        free(buf);
    }
    static const uint64_t lens[] = {UINT64_MAX, UINT64_MAX - 7, UINT64_MAX - 24, 1ull << 63, 1ull << 32, 100};
    for (size_t k = 0; k < sizeof lens / sizeof *lens; k++) {
        gw_buf b = {0};
        /* key length */
        put_header(&b, 0, 1);
        gw_u64(&b, lens[k]);
        gw_put(&b, "key\0\x04\0\0\0", 8);
        expect_fail_gwbuf(&b, "absurd key length", "metadata entry #0", "truncated");
        /* string value length */
        put_header(&b, 0, 2);
        gw_str(&b, "ok"), gw_u32(&b, GGUF_VT_UINT8), gw_u8(&b, 1);
        gw_str(&b, "k.s"), gw_u32(&b, GGUF_VT_STRING), gw_u64(&b, lens[k]), gw_put(&b, "abcdefgh", 8);
        expect_fail_gwbuf(&b, "absurd string length", "key 'k.s'", NULL);
        /* array lengths of every element kind */
        static const uint32_t ets[] = {GGUF_VT_UINT8, GGUF_VT_UINT16, GGUF_VT_UINT32, GGUF_VT_UINT64, GGUF_VT_FLOAT64,
                                       GGUF_VT_BOOL,  GGUF_VT_STRING, GGUF_VT_ARRAY};
        for (size_t e = 0; e < sizeof ets / sizeof *ets; e++) {
            put_header(&b, 0, 1);
            gw_str(&b, "k.arr"), gw_u32(&b, GGUF_VT_ARRAY), gw_arr(&b, ets[e], lens[k]);
            gw_zeros(&b, 40);
            expect_fail_gwbuf(&b, "absurd array length", "key 'k.arr'", NULL);
        }
        /* element counts whose byte size wraps to a small number: n * 8 == 8 (mod 2^64) */
        put_header(&b, 0, 1);
        gw_str(&b, "k.wrap"), gw_u32(&b, GGUF_VT_ARRAY), gw_arr(&b, GGUF_VT_UINT64, (1ull << 61) + 1);
        gw_zeros(&b, 16);
        expect_fail_gwbuf(&b, "wrapping array size", "key 'k.wrap'", NULL);
        /* nested: inner array absurd */
        put_header(&b, 0, 1);
        gw_str(&b, "k.nest"), gw_u32(&b, GGUF_VT_ARRAY), gw_arr(&b, GGUF_VT_ARRAY, 2);
        gw_arr(&b, GGUF_VT_UINT8, 1), gw_u8(&b, 9);
        gw_arr(&b, GGUF_VT_STRING, lens[k]);
        gw_zeros(&b, 24);
        expect_fail_gwbuf(&b, "absurd nested array length", "key 'k.nest'", NULL);
        /* string inside an array of strings */
        put_header(&b, 0, 1);
        gw_str(&b, "k.strs"), gw_u32(&b, GGUF_VT_ARRAY), gw_arr(&b, GGUF_VT_STRING, 2);
        gw_str(&b, "fine"), gw_u64(&b, lens[k]), gw_zeros(&b, 8);
        expect_fail_gwbuf(&b, "absurd string in array", "key 'k.strs'", NULL);
        /* tensor name length */
        put_header(&b, 1, 0);
        gw_u64(&b, lens[k]);
        gw_zeros(&b, 40);
        expect_fail_gwbuf(&b, "absurd tensor name length", "tensor", "#0");
    }
    /* absurd dimensions and offsets */
    static const uint64_t dims[] = {UINT64_MAX, 1ull << 63, (1ull << 63) + 1};
    for (size_t k = 0; k < sizeof dims / sizeof *dims; k++) {
        for (uint32_t d = 0; d < 3; d++) {
            gw_file w;
            gw_init(&w);
            uint64_t ne[3] = {4, 4, 4};
            ne[d] = dims[k];
            gw_tensor_info(&w, "w.dim", ELI_TYPE_F32, 3, ne, 0);
            gw_zeros(&w.data, 256);
            char msg[64];
            snprintf(msg, sizeof msg, "dimension %u", d);
            expect_fail(&w, "negative dimension", "tensor 'w.dim'", msg);
        }
    }
    static const uint64_t offs[] = {UINT64_MAX & ~31ull, 1ull << 63, 4096, 32};
    for (size_t k = 0; k < sizeof offs / sizeof *offs; k++) {
        gw_file w;
        gw_init(&w);
        gw_tensor_info(&w, "w.off", ELI_TYPE_F32, 1, NE1, offs[k]);
        gw_zeros(&w.data, 32);
        expect_fail(&w, "offset out of range", "tensor 'w.off'", "outside");
    }
}

static void test_unknown_types(void) {
    static const uint32_t vts[] = {GGUF_VT_COUNT, 14, 100, 0x80000000u, UINT32_MAX};
    for (size_t k = 0; k < sizeof vts / sizeof *vts; k++) {
        char num[32];
        snprintf(num, sizeof num, "%u", vts[k]);
        gw_file w;
        gw_init(&w);
        gw_kv_u32(&w, "k.fine", 1);
        gw_u64(gw_kv(&w, "k.weird", vts[k]), 0);
        expect_fail(&w, "unknown value type", "key 'k.weird'", num);
        gw_init(&w);
        gw_buf *b = gw_kv(&w, "k.arr", GGUF_VT_ARRAY);
        gw_arr(b, vts[k], 1), gw_u64(b, 0);
        expect_fail(&w, "unknown array element type", "key 'k.arr'", num);
        gw_init(&w);
        b = gw_kv(&w, "k.nested", GGUF_VT_ARRAY);
        gw_arr(b, GGUF_VT_ARRAY, 2), gw_arr(b, GGUF_VT_UINT8, 0), gw_arr(b, vts[k], 1), gw_u64(b, 0);
        expect_fail(&w, "unknown nested element type", "key 'k.nested'", num);
    }
    static const uint32_t tts[] = {4, 5, 31, 32, 33, 36, 37, 38, ELI_TYPE_COUNT, 1000, UINT32_MAX};
    for (size_t k = 0; k < sizeof tts / sizeof *tts; k++) {
        gw_file w;
        gw_init(&w);
        one_f32_tensor(&w, "w.ok");
        gw_tensor(&w, "w.badtype", tts[k], 1, NE1, NULL, 256);
        char num[48];
        snprintf(num, sizeof num, "unknown type id %u", tts[k]);
        expect_fail(&w, "unknown tensor type", "tensor 'w.badtype'", num);
    }
    /* every known type id with a block-sized row opens */
    for (uint32_t t = 0; t < ELI_TYPE_COUNT; t++) {
        const eli_type_traits *tt = eli_type_info(t);
        if (!tt) continue;
        gw_file w;
        gw_init(&w);
        uint64_t ne[2] = {tt->block_size, 2};
        gw_tensor(&w, "w.t", t, 2, ne, NULL, 2 * tt->type_size);
        uint8_t *buf;
        eli_gguf_file *f = expect_ok(&w, tt->name, &buf, NULL);
        if (f) CHECK(eli_gguf_find_tensor(f, "w.t")->nbytes == 2 * tt->type_size, "%s nbytes", tt->name);
        eli_gguf_close(f);
        free(buf);
    }
}

static void test_bad_dims(void) {
    static const uint32_t nds[] = {0, 5, 8, UINT32_MAX};
    for (size_t k = 0; k < sizeof nds / sizeof *nds; k++) {
        gw_file w;
        gw_init(&w);
        static const uint64_t ne[8] = {1, 1, 1, 1, 1, 1, 1, 1};
        gw_tensor_info(&w, "w.nd", ELI_TYPE_F32, nds[k] > 8 ? 0 : nds[k], ne, 0);
        if (nds[k] > 8) gw_patch(w.ti.p + 8 + 4, nds[k], 4);
        gw_zeros(&w.data, 64);
        char msg[48];
        snprintf(msg, sizeof msg, "%u dimensions", nds[k]);
        expect_fail(&w, "bad n_dims", "tensor 'w.nd'", msg);
    }
    /* element-count overflow: products above INT64_MAX */
    static const uint64_t shapes[][4] = {
        {1ull << 32, 1ull << 32, 1, 1},
        {1ull << 62, 2, 1, 1},
        {2, 1ull << 62, 1, 1},
        {1ull << 31, 1ull << 31, 1ull << 2, 1},
        {1ull << 16, 1ull << 16, 1ull << 16, 1ull << 16},
        {3037000500ull, 3037000500ull, 1, 1}, /* just over sqrt(INT64_MAX) */
        {(uint64_t)INT64_MAX, 2, 1, 1},
    };
    for (size_t k = 0; k < sizeof shapes / sizeof *shapes; k++) {
        gw_file w;
        gw_init(&w);
        gw_tensor_info(&w, "w.big", ELI_TYPE_F32, 4, shapes[k], 0);
        gw_zeros(&w.data, 64);
        expect_fail(&w, "element count overflow", "tensor 'w.big'", "overflows");
    }
    /* byte size overflow (element count fits, bytes do not) and plain too-large tensors */
    {
        gw_file w;
        gw_init(&w);
        static const uint64_t ne[2] = {1ull << 61, 2};
        gw_tensor_info(&w, "w.bytes", ELI_TYPE_F32, 2, ne, 0);
        gw_zeros(&w.data, 64);
        expect_fail(&w, "byte size overflow", "tensor 'w.bytes'", "overflow");
        gw_init(&w);
        static const uint64_t ne2[1] = {(uint64_t)INT64_MAX / 32 * 32};
        gw_tensor_info(&w, "w.q8", ELI_TYPE_Q8_0, 1, ne2, 0);
        gw_zeros(&w.data, 64);
        expect_fail(&w, "huge q8_0", "tensor 'w.q8'", NULL);
        gw_init(&w);
        static const uint64_t ne3[1] = {1ull << 60};
        gw_tensor_info(&w, "w.huge", ELI_TYPE_F32, 1, ne3, 0);
        gw_zeros(&w.data, 64);
        expect_fail(&w, "huge tensor", "tensor 'w.huge'", "outside");
    }
    /* rows that are not a multiple of the block size */
    static const struct {
        uint32_t type;
        uint64_t ne0;
        const char *msg;
    } rows[] = {
        {ELI_TYPE_Q4_0, 33, "row length 33"}, {ELI_TYPE_Q8_0, 16, "row length 16"},
        {ELI_TYPE_Q4_K, 128, "row length 128"}, {ELI_TYPE_Q6_K, 257, "block size 256"},
        {ELI_TYPE_Q4_K, 1, "q4_K"},
    };
    for (size_t k = 0; k < sizeof rows / sizeof *rows; k++) {
        gw_file w;
        gw_init(&w);
        uint64_t ne[2] = {rows[k].ne0, 2};
        gw_tensor(&w, "w.row", rows[k].type, 2, ne, NULL, 1024);
        expect_fail(&w, "row length", "tensor 'w.row'", rows[k].msg);
    }
    /* zero-sized dims are fine */
    {
        gw_file w;
        gw_init(&w);
        static const uint64_t ne[3] = {256, 0, 7};
        gw_tensor(&w, "w.zero", ELI_TYPE_Q4_K, 3, ne, NULL, 0);
        one_f32_tensor(&w, "w.after");
        uint8_t *buf;
        eli_gguf_file *f = expect_ok(&w, "zero dims", &buf, NULL);
        if (f) {
            const eli_gguf_tensor *t = eli_gguf_find_tensor(f, "w.zero");
            CHECK(t && t->nbytes == 0 && eli_gguf_tensor_nelements(t) == 0, "zero-sized tensor");
        }
        eli_gguf_close(f);
        free(buf);
    }
}

static void test_data_placement(void) {
    /* data that runs past the end of the file */
    {
        gw_file w;
        gw_init(&w);
        gw_tensor_info(&w, "w.short", ELI_TYPE_F32, 1, NE1, 0);
        gw_zeros(&w.data, 12); /* needs 16 */
        expect_fail(&w, "short data", "tensor 'w.short'", "outside");
    }
    {
        gw_file w;
        gw_init(&w);
        one_f32_tensor(&w, "w.a");
        gw_tensor_info(&w, "w.b", ELI_TYPE_F32, 1, NE1, 64); /* data section holds 16 bytes */
        expect_fail(&w, "offset past end", "tensor 'w.b'", "outside");
    }
    {
        /* no data at all: the aligned data start lies beyond the end of the file */
        gw_file w;
        gw_init(&w);
        gw_tensor_info(&w, "w.nodat", ELI_TYPE_F32, 1, NE1, 0);
        size_t size;
        uint8_t *buf = gw_finish(&w, &size);
        gw_free(&w);
        size_t hdr = GW_HEADER_SIZE + 8 + 7 + 4 + 8 + 4 + 8; /* header + one tensor info = 63 */
        CHECK(size == 64 && hdr == 63, "layout (size %zu)", size);
        expect_fail_buf(buf, hdr, "no data section", "truncated", "would start at 64");
        expect_fail_buf(buf, size, "empty data section", "tensor 'w.nodat'", "outside");
        free(buf);
    }
    /* misaligned offsets */
    static const uint64_t offs[] = {4, 1, 31, 33, 48};
    for (size_t k = 0; k < sizeof offs / sizeof *offs; k++) {
        gw_file w;
        gw_init(&w);
        gw_tensor_info(&w, "w.mis", ELI_TYPE_F32, 1, NE1, offs[k]);
        gw_zeros(&w.data, 128);
        char msg[64];
        snprintf(msg, sizeof msg, "offset %llu", (unsigned long long)offs[k]);
        expect_fail(&w, "misaligned offset", "tensor 'w.mis'", msg);
    }
    /* overlapping tensors are allowed by the format (both views are inside the file) */
    {
        gw_file w;
        gw_init(&w);
        one_f32_tensor(&w, "w.one");
        gw_tensor_info(&w, "w.alias", ELI_TYPE_F32, 1, NE1, 0);
        uint8_t *buf;
        eli_gguf_file *f = expect_ok(&w, "aliased tensors", &buf, NULL);
        if (f) CHECK(eli_gguf_find_tensor(f, "w.one")->data == eli_gguf_find_tensor(f, "w.alias")->data, "alias");
        eli_gguf_close(f);
        free(buf);
    }
}

static void test_names(void) {
    gw_file w;
    /* duplicates */
    gw_init(&w);
    gw_kv_u32(&w, "k.dup", 1);
    gw_kv_u32(&w, "k.other", 2);
    gw_kv_str(&w, "k.dup", "again");
    expect_fail(&w, "duplicate key", "duplicate", "'k.dup'");
    gw_init(&w);
    one_f32_tensor(&w, "w.dup");
    one_f32_tensor(&w, "w.x");
    one_f32_tensor(&w, "w.dup");
    expect_fail(&w, "duplicate tensor", "duplicate tensor name", "'w.dup'");
    /* many distinct names (exercises hash collisions and table growth) */
    gw_init(&w);
    char nm[32];
    for (int i = 0; i < 300; i++) {
        snprintf(nm, sizeof nm, "k.%d", i);
        gw_kv_u32(&w, nm, (uint32_t)i * 3);
    }
    for (int i = 0; i < 300; i++) {
        snprintf(nm, sizeof nm, "blk.%d.w", i);
        one_f32_tensor(&w, nm);
    }
    {
        uint8_t *buf;
        eli_gguf_file *f = expect_ok(&w, "many names", &buf, NULL);
        if (f) {
            int ok = 1;
            for (int i = 0; i < 300; i++) {
                uint32_t u = 0;
                snprintf(nm, sizeof nm, "k.%d", i);
                ok &= eli_gguf_get_u32(f, nm, &u, NULL) == 1 && u == (uint32_t)i * 3;
                snprintf(nm, sizeof nm, "blk.%d.w", i);
                const eli_gguf_tensor *t = eli_gguf_find_tensor(f, nm);
                ok &= t && t == eli_gguf_tensor_at(f, (uint64_t)i);
            }
            CHECK(ok, "many names: lookups");
            CHECK(eli_gguf_find(f, "k.300") == NULL && eli_gguf_find_tensor(f, "blk.300.w") == NULL, "many names: absent");
        }
        eli_gguf_close(f);
        free(buf);
    }
    /* the same name for a key and a tensor is fine */
    gw_init(&w);
    gw_kv_u32(&w, "same", 1);
    one_f32_tensor(&w, "same");
    expect_ok_close(&w, "key and tensor share a name");
    /* a 1000-byte key is fine */
    {
        char longkey[1001];
        memset(longkey, 'k', 1000);
        longkey[1000] = '\0';
        gw_init(&w);
        gw_kv_u32(&w, longkey, 5);
        uint8_t *buf;
        eli_gguf_file *f = expect_ok(&w, "long key", &buf, NULL);
        uint32_t u = 0;
        if (f) CHECK(eli_gguf_get_u32(f, longkey, &u, NULL) == 1 && u == 5, "long key lookup");
        eli_gguf_close(f);
        free(buf);
    }
    /* empty key / NUL in key */
    gw_init(&w);
    gw_kv_u32(&w, "k.fine", 1);
    gw_kv_u32(&w, "", 1);
    expect_fail(&w, "empty key", "#1", "empty key");
    gw_init(&w);
    gw_u32(gw_kvn(&w, "k.a\0b", 5, GGUF_VT_UINT32), 1);
    expect_fail(&w, "NUL in key", "#0", "NUL");
    gw_init(&w);
    gw_u32(gw_kvn(&w, "\0", 1, GGUF_VT_UINT32), 1);
    expect_fail(&w, "key is one NUL", "#0", "NUL");
    /* empty tensor name / NUL in tensor name / too long */
    gw_init(&w);
    one_f32_tensor(&w, "");
    expect_fail(&w, "empty tensor name", "tensor #0", "name length 0");
    gw_init(&w);
    one_f32_tensor(&w, "w.ok");
    gw_tensor_info_n(&w, "w.a\0b", 5, ELI_TYPE_F32, 1, NE1, 0);
    expect_fail(&w, "NUL in tensor name", "tensor #1", "NUL");
    {
        char name[300];
        memset(name, 'n', sizeof name);
        gw_init(&w);
        name[255] = '\0';
        one_f32_tensor(&w, name);
        expect_ok_close(&w, "255-byte tensor name");
        gw_init(&w);
        name[255] = 'n';
        name[256] = '\0';
        one_f32_tensor(&w, name);
        expect_fail(&w, "256-byte tensor name", "tensor #0", "name length 256");
    }
}

static void test_bools_and_depth(void) {
    static const uint8_t bad_bools[] = {2, 3, 0x80, 0xFF};
    for (size_t k = 0; k < sizeof bad_bools / sizeof *bad_bools; k++) {
        gw_file w;
        gw_init(&w);
        gw_kv_bool(&w, "k.ok", 1);
        gw_kv_bool(&w, "k.bool", bad_bools[k]);
        char msg[48];
        snprintf(msg, sizeof msg, "bool value %u", bad_bools[k]);
        expect_fail(&w, "bad bool", "key 'k.bool'", msg);
        gw_init(&w);
        uint8_t arr[4] = {0, 1, 1, bad_bools[k]};
        gw_kv_arr_bool(&w, "k.bools", arr, 4);
        snprintf(msg, sizeof msg, "element 3 is %u", bad_bools[k]);
        expect_fail(&w, "bad bool element", "key 'k.bools'", msg);
        gw_init(&w);
        gw_buf *b = gw_kv(&w, "k.nbools", GGUF_VT_ARRAY);
        gw_arr(b, GGUF_VT_ARRAY, 1), gw_arr(b, GGUF_VT_BOOL, 2), gw_u8(b, 1), gw_u8(b, bad_bools[k]);
        expect_fail(&w, "bad nested bool", "key 'k.nbools'", "bool");
    }
    /* nesting depth: 8 array levels open, 9 do not; a very deep one fails without recursing forever */
    static const int levels[] = {1, 2, 8, 9, 10, 100000};
    for (size_t k = 0; k < sizeof levels / sizeof *levels; k++) {
        int L = levels[k];
        gw_file w;
        gw_init(&w);
        gw_buf *b = gw_kv(&w, "k.deep", GGUF_VT_ARRAY);
        for (int i = 0; i < L - 1; i++) gw_arr(b, GGUF_VT_ARRAY, 1);
        gw_arr(b, GGUF_VT_UINT8, 1), gw_u8(b, 42);
        if (L <= 8) {
            uint8_t *buf;
            eli_gguf_file *f = expect_ok(&w, "nesting", &buf, NULL);
            if (f) {
                const eli_gguf_value *v = eli_gguf_find(f, "k.deep");
                for (int i = 0; v && i < L - 1; i++) v = v->v.arr.n == 1 ? &v->v.arr.items[0] : NULL;
                CHECK(v && v->v.arr.elem_type == GGUF_VT_UINT8 && vi64(v, 0) == 42, "%d levels: innermost value", L);
            }
            eli_gguf_close(f);
            free(buf);
        } else {
            expect_fail(&w, "too deep", "key 'k.deep'", "nested");
        }
    }
}

/* ---------------------------------------------------------------------------------------------------- */
/* Mutation loop */

static uint64_t walk_value(const eli_gguf_value *v) {
    uint64_t h = v->type;
    switch (v->type) {
    case GGUF_VT_STRING:
        for (uint64_t i = 0; i < v->v.str.len; i++) h = h * 31 + (uint8_t)v->v.str.ptr[i];
        return h;
    case GGUF_VT_ARRAY:
        if (v->v.arr.elem_type == GGUF_VT_STRING) {
            for (uint64_t i = 0; i < v->v.arr.n; i++)
                for (uint64_t j = 0; j < v->v.arr.strs[i].len; j++) h = h * 31 + (uint8_t)v->v.arr.strs[i].ptr[j];
        } else if (v->v.arr.elem_type == GGUF_VT_ARRAY) {
            for (uint64_t i = 0; i < v->v.arr.n; i++) h += walk_value(&v->v.arr.items[i]);
        } else {
            for (uint64_t i = 0; i < v->v.arr.n; i++) {
                double d = 0;
                int64_t x = 0;
                if (eli_gguf_value_f64(v, i, &d, "m", NULL) == ELI_OK) h += (uint64_t)(d == d);
                if (eli_gguf_value_i64(v, i, &x, "m", NULL) == ELI_OK) h += (uint64_t)x;
            }
        }
        return h;
    default: {
        double d = 0;
        int64_t x = 0;
        if (eli_gguf_value_f64(v, 0, &d, "m", NULL) == ELI_OK) h += (uint64_t)(d == d);
        if (eli_gguf_value_i64(v, 0, &x, "m", NULL) == ELI_OK) h += (uint64_t)x;
        return h;
    }
    }
}

/* Checks the invariants of a file that opened; returns the number of violations. */
static int check_opened(const eli_gguf_file *f, const uint8_t *buf, size_t size, uint64_t *sink) {
    int bad = 0;
    uint32_t a = eli_gguf_alignment(f);
    bad += !(a && !(a & (a - 1)));
    bad += eli_gguf_data_offset(f) % a != 0;
    for (uint64_t i = 0; i < eli_gguf_n_kv(f); i++) {
        const eli_gguf_kv *kv = eli_gguf_kv_at(f, i);
        bad += !kv->key[0];
        bad += eli_gguf_find(f, kv->key) != &kv->value;
        *sink += walk_value(&kv->value);
    }
    for (uint64_t i = 0; i < eli_gguf_n_tensors(f); i++) {
        const eli_gguf_tensor *t = eli_gguf_tensor_at(f, i);
        bad += eli_gguf_find_tensor(f, t->name) != t;
        bad += t->n_dims < 1 || t->n_dims > GGUF_MAX_DIMS;
        bad += eli_type_info(t->type) == NULL;
        bad += t->offset % a != 0;
        for (int d = 0; d < 4; d++) bad += t->ne[d] < 0;
        bad += eli_gguf_tensor_nelements(t) < 0;
        const uint8_t *p = t->data;
        bad += p < buf + eli_gguf_data_offset(f) || t->nbytes > size || p + t->nbytes > buf + size;
        if (!bad)
            for (uint64_t j = 0; j < t->nbytes; j++) *sink += p[j]; /* ASan: every byte must be readable */
    }
    return bad;
}

static void test_mutations(void) {
    gw_file w;
    build_rich(&w);
    size_t size;
    uint8_t *orig = gw_finish(&w, &size);
    gw_free(&w);
    uint64_t meta_end;
    {
        eli_gguf_file *f = eli_gguf_open_memory(orig, size, NULL);
        CHECK(f != NULL, "mutation seed opens");
        if (!f) {
            free(orig);
            return;
        }
        meta_end = eli_gguf_data_offset(f);
        eli_gguf_close(f);
    }
    static const uint64_t interesting[] = {0,          1,          2,          3,          4,         5,
                                           7,          8,          9,          12,         13,        31,
                                           32,         33,         64,         255,        256,       0x7F,
                                           0x80,       0xFF,       0xFFFF,     0x7FFFFFFF, 0x80000000, 0xFFFFFFFF,
                                           1ull << 32, 1ull << 62, 1ull << 63, UINT64_MAX, UINT64_MAX - 1, INT64_MAX};
#ifndef MUTATION_ITERS
#define MUTATION_ITERS 20000
#endif
    const int iters = MUTATION_ITERS;
    int opened = 0, failed = 0, violations = 0, msgless = 0;
    uint64_t sink = 0;
    rng_state = 20000;
    for (int it = 0; it < iters; it++) {
        size_t len = size;
        if (rng_below(20) == 0) len = (size_t)rng_below(size + 1);
        uint8_t *p = malloc(len ? len : 1);
        memcpy(p, orig, len);
        int nmut = 1 + (int)rng_below(4);
        for (int m = 0; m < nmut && len; m++) {
            /* mostly the header, metadata and tensor infos; sometimes anywhere */
            size_t span = rng_below(5) ? (size_t)meta_end : len;
            if (span > len) span = len;
            size_t pos = (size_t)rng_below(span);
            switch (rng_below(6)) {
            case 0: p[pos] ^= (uint8_t)(1u << rng_below(8)); break;
            case 1: p[pos] = (uint8_t)rng_u64(); break;
            case 2: p[pos] = rng_below(2) ? 0x00 : 0xFF; break;
            case 3: p[pos] = (uint8_t)(p[pos] + 1 - 2 * (int)rng_below(2)); break;
            default: {
                uint64_t v = interesting[rng_below(sizeof interesting / sizeof *interesting)];
                size_t n = rng_below(2) ? 8 : 4;
                if (rng_below(4) == 0) v = rng_u64();
                for (size_t i = 0; i < n && pos + i < len; i++) p[pos + i] = (uint8_t)(v >> (8 * i));
            }
            }
        }
        eli_error err = {0};
        eli_gguf_file *f = eli_gguf_open_memory(p, len, &err);
        if (f) {
            opened++;
            violations += check_opened(f, p, len, &sink);
            eli_gguf_close(f);
        } else {
            failed++;
            msgless += err.code >= 0 || !err.msg[0];
        }
        free(p);
    }
    printf("mutations: %d opened, %d rejected (sink %llu)\n", opened, failed, (unsigned long long)(sink & 0xFF));
    CHECK(violations == 0, "%d invariant violations in mutated files that opened", violations);
    CHECK(msgless == 0, "%d rejections without a message", msgless);
    CHECK(opened > iters / 50 && failed > iters / 4, "mutation mix: %d opened, %d failed", opened, failed);
    free(orig);
}

/* ---------------------------------------------------------------------------------------------------- */
/* Golden files */

typedef struct {
    const char *file;
    const char *arch;
    uint32_t allowed[6]; /* tensor types that may appear (F32 always may); 0-terminated beyond F32 */
    uint32_t must;       /* a type that must appear */
    uint64_t n_embd, n_layer;
} golden;

static const golden GOLDEN[] = {
    {"golden/models/e2b-mini-f32.gguf", "gemma4", {0}, ELI_TYPE_F32, 256, 6},
    {"golden/models/e2b-mini-f16.gguf", "gemma4", {ELI_TYPE_F16}, ELI_TYPE_F16, 256, 6},
    {"golden/models/e2b-mini-q8_0.gguf", "gemma4", {ELI_TYPE_Q8_0}, ELI_TYPE_Q8_0, 256, 6},
    {"golden/models/e2b-mini-q6_k.gguf", "gemma4", {ELI_TYPE_Q6_K, ELI_TYPE_Q8_0}, ELI_TYPE_Q6_K, 256, 6},
    {"golden/models/e2b-mini-q4_k_m.gguf", "gemma4", {ELI_TYPE_Q4_K, ELI_TYPE_Q6_K, ELI_TYPE_Q5_0, ELI_TYPE_Q8_0},
     ELI_TYPE_Q4_K, 256, 6},
    {"golden/models/e2b-mini-q4_0.gguf", "gemma4", {ELI_TYPE_Q4_0, ELI_TYPE_Q6_K, ELI_TYPE_Q8_0}, ELI_TYPE_Q4_0, 256, 6},
    {"golden/models/dense-kv-mini-f32.gguf", "gemma4", {0}, ELI_TYPE_F32, 128, 6},
    {"golden/models/moe-mini-f32.gguf", "gemma4", {0}, ELI_TYPE_F32, 128, 4},
    {"golden/models/assistant-mini-f32.gguf", "gemma4-assistant", {0}, ELI_TYPE_F32, 64, 2},
};

static int cmp_u64pair(const void *a, const void *b) {
    const uint64_t *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

static void check_golden_common(const eli_gguf_file *f, const char *file) {
    /* every key is findable, every tensor is findable, in range, aligned, not overlapping */
    int ok = 1;
    for (uint64_t i = 0; i < eli_gguf_n_kv(f); i++) ok &= eli_gguf_find(f, eli_gguf_kv_at(f, i)->key) == &eli_gguf_kv_at(f, i)->value;
    CHECK(ok, "%s: eli_gguf_find of every key", file);
    uint64_t nt = eli_gguf_n_tensors(f);
    uint64_t *spans = malloc((nt ? nt : 1) * 2 * sizeof *spans);
    const uint8_t *base = eli_gguf_mapping(f);
    uint64_t size = eli_gguf_file_size(f), doff = eli_gguf_data_offset(f);
    ok = 1;
    for (uint64_t i = 0; i < nt; i++) {
        const eli_gguf_tensor *t = eli_gguf_tensor_at(f, i);
        const eli_type_traits *tt = eli_type_info(t->type);
        ok &= eli_gguf_find_tensor(f, t->name) == t;
        ok &= tt != NULL && t->offset % eli_gguf_alignment(f) == 0;
        ok &= (const uint8_t *)t->data == base + doff + t->offset && doff + t->offset + t->nbytes <= size;
        int64_t rows = t->ne[1] * t->ne[2] * t->ne[3];
        ok &= tt && t->nbytes == eli_row_size(t->type, t->ne[0]) * (uint64_t)rows;
        ok &= eli_gguf_tensor_nelements(t) == t->ne[0] * rows && t->n_dims >= 1 && t->n_dims <= 4;
        spans[2 * i] = t->offset;
        spans[2 * i + 1] = t->nbytes;
    }
    CHECK(ok, "%s: tensor directory consistent", file);
    qsort(spans, nt, 2 * sizeof *spans, cmp_u64pair);
    ok = 1;
    for (uint64_t i = 1; i < nt; i++) ok &= spans[2 * (i - 1)] + spans[2 * (i - 1) + 1] <= spans[2 * i];
    CHECK(ok, "%s: tensors do not overlap", file);
    free(spans);
}

static void test_golden(void) {
    eli_gguf_file *master = NULL;
    for (size_t g = 0; g < sizeof GOLDEN / sizeof *GOLDEN; g++) {
        const golden *gd = &GOLDEN[g];
        eli_error err = {0};
        eli_gguf_file *f = eli_gguf_open(eli_shared_path(gd->file), &err);
        CHECK(f != NULL, "%s: %s", gd->file, err.msg);
        if (!f) continue;
        CHECK(eli_gguf_version(f) == 3 && eli_gguf_alignment(f) == 32, "%s: version %u alignment %u", gd->file,
              eli_gguf_version(f), eli_gguf_alignment(f));
        eli_gguf_str arch = {0};
        CHECK(eli_gguf_get_str(f, "general.architecture", &arch, &err) == 1 && eli_gguf_str_eq(arch, gd->arch),
              "%s: architecture", gd->file);
        char key[128];
        uint32_t u = 0;
        snprintf(key, sizeof key, "%s.embedding_length", gd->arch);
        CHECK(eli_gguf_get_u32(f, key, &u, &err) == 1 && u == gd->n_embd, "%s: %s = %u", gd->file, key, u);
        snprintf(key, sizeof key, "%s.block_count", gd->arch);
        CHECK(eli_gguf_get_u32(f, key, &u, &err) == 1 && u == gd->n_layer, "%s: %s = %u", gd->file, key, u);
        const eli_gguf_value *toks = NULL;
        CHECK(eli_gguf_get_arr(f, "tokenizer.ggml.tokens", GGUF_VT_STRING, &toks, &err) == 1 && toks->v.arr.n == 1024,
              "%s: tokenizer.ggml.tokens", gd->file);
        if (toks && toks->v.arr.n > 2) CHECK(eli_gguf_str_eq(toks->v.arr.strs[2], "<bos>"), "%s: token 2", gd->file);
        const eli_gguf_value *pat = NULL;
        snprintf(key, sizeof key, "%s.attention.sliding_window_pattern", gd->arch);
        CHECK(eli_gguf_get_arr(f, key, GGUF_VT_BOOL, &pat, &err) == 1 && pat->v.arr.n == gd->n_layer, "%s: %s", gd->file, key);
        CHECK(eli_gguf_n_tensors(f) > 10, "%s: %llu tensors", gd->file, (unsigned long long)eli_gguf_n_tensors(f));
        int allowed = 1, seen_must = 0;
        for (uint64_t i = 0; i < eli_gguf_n_tensors(f); i++) {
            uint32_t t = eli_gguf_tensor_at(f, i)->type;
            int ok = t == ELI_TYPE_F32;
            for (int k = 0; k < 6 && gd->allowed[k]; k++) ok |= t == gd->allowed[k];
            if (!ok) fprintf(stderr, "%s: %s has type %s\n", gd->file, eli_gguf_tensor_at(f, i)->name, eli_type_name(t));
            allowed &= ok;
            seen_must |= t == gd->must;
            const eli_type_traits *tt = eli_type_info(t);
            allowed &= tt && tt->dequantize != NULL;
        }
        CHECK(allowed, "%s: tensor types", gd->file);
        CHECK(seen_must, "%s: no %s tensor", gd->file, eli_type_name(gd->must));
        const eli_gguf_tensor *te = eli_gguf_find_tensor(f, "token_embd.weight");
        CHECK(te && te->n_dims == 2 && te->ne[0] == (int64_t)gd->n_embd && te->ne[1] == 1024, "%s: token_embd", gd->file);
        CHECK(eli_gguf_find_tensor(f, "output.weight") == NULL, "%s: tied output", gd->file);
        CHECK(eli_gguf_find_tensor(f, "blk.0.attn_q.weight") != NULL && eli_gguf_find_tensor(f, "blk.99.attn_q.weight") == NULL,
              "%s: blk.0.attn_q.weight", gd->file);
        check_golden_common(f, gd->file);

        /* the quantized e2b-mini files have the same tensors (names and shapes) as the F32 master */
        if (g == 0) {
            master = f;
            CHECK(eli_gguf_n_tensors(f) == 99, "e2b-mini-f32: %llu tensors", (unsigned long long)eli_gguf_n_tensors(f));
            continue;
        }
        if (master && !strncmp(gd->file, "golden/models/e2b-mini-", 23)) {
            int same = eli_gguf_n_tensors(f) == eli_gguf_n_tensors(master);
            for (uint64_t i = 0; same && i < eli_gguf_n_tensors(master); i++) {
                const eli_gguf_tensor *mt = eli_gguf_tensor_at(master, i), *t = eli_gguf_find_tensor(f, mt->name);
                same &= t && !memcmp(t->ne, mt->ne, sizeof t->ne) && t->n_dims == mt->n_dims;
            }
            CHECK(same, "%s: same tensors as the F32 master", gd->file);
        }
        eli_gguf_close(f);
    }
    eli_gguf_close(master);

    /* the vocabulary file: metadata only, large string arrays */
    eli_error err = {0};
    eli_gguf_file *f = eli_gguf_open(eli_shared_path("golden/tokenizer/gemma4-vocab.gguf"), &err);
    CHECK(f != NULL, "gemma4-vocab.gguf: %s", err.msg);
    if (f) {
        const eli_gguf_value *toks = NULL, *merges = NULL, *scores = NULL;
        CHECK(eli_gguf_n_tensors(f) == 0, "vocab: tensors");
        CHECK(eli_gguf_get_arr(f, "tokenizer.ggml.tokens", GGUF_VT_STRING, &toks, &err) == 1 && toks->v.arr.n == 262144,
              "vocab tokens");
        CHECK(eli_gguf_get_arr(f, "tokenizer.ggml.merges", GGUF_VT_STRING, &merges, &err) == 1 && merges->v.arr.n == 514906,
              "vocab merges");
        CHECK(eli_gguf_get_arr(f, "tokenizer.ggml.scores", GGUF_VT_FLOAT32, &scores, &err) == 1 && scores->v.arr.n == 262144,
              "vocab scores");
        check_golden_common(f, "gemma4-vocab.gguf");
        eli_gguf_close(f);
    }
}

int main(void) {
    test_rich_roundtrip();
    test_alignment();
    test_versions_and_magic();
    test_truncation();
    test_absurd_counts();
    test_unknown_types();
    test_bad_dims();
    test_data_placement();
    test_names();
    test_bools_and_depth();
    test_mutations();
    test_golden();
    TEST_MAIN_END();
}
