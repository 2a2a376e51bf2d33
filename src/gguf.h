/* GGUF reader (versions 2 and 3) over a read-only mmap.
 *
 * The file is treated as hostile: every count, length, offset, dimension and type is checked before use,
 * size arithmetic is overflow-checked, and tensor data must lie inside the file. On any problem
 * eli_gguf_open() fails with a message naming the key or tensor and what is wrong.
 *
 * Strings point into the mapping and are NOT NUL-terminated (use eli_gguf_str's len); key and tensor names
 * are copied and NUL-terminated for convenience. Scalar array payloads also point into the mapping
 * (little-endian, possibly unaligned): read them with eli_gguf_arr_get_*(). */
#ifndef ELI_GGUF_H
#define ELI_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"

enum eli_gguf_value_type {
    GGUF_VT_UINT8 = 0,
    GGUF_VT_INT8 = 1,
    GGUF_VT_UINT16 = 2,
    GGUF_VT_INT16 = 3,
    GGUF_VT_UINT32 = 4,
    GGUF_VT_INT32 = 5,
    GGUF_VT_FLOAT32 = 6,
    GGUF_VT_BOOL = 7,
    GGUF_VT_STRING = 8,
    GGUF_VT_ARRAY = 9,
    GGUF_VT_UINT64 = 10,
    GGUF_VT_INT64 = 11,
    GGUF_VT_FLOAT64 = 12,
    GGUF_VT_COUNT
};

typedef struct eli_gguf_str {
    const char *ptr; /* into the mapping; not NUL-terminated */
    uint64_t len;
} eli_gguf_str;

typedef struct eli_gguf_value eli_gguf_value;
struct eli_gguf_value {
    uint32_t type; /* enum eli_gguf_value_type */
    union {
        uint64_t u64;  /* UINT8..UINT64 and BOOL, zero-extended */
        int64_t i64;   /* INT8..INT64, sign-extended */
        double f64;    /* FLOAT32 / FLOAT64 */
        eli_gguf_str str;  /* STRING */
        struct {
            uint32_t elem_type; /* enum eli_gguf_value_type of the elements */
            uint64_t n;         /* element count */
            const uint8_t *raw; /* scalar elements: packed little-endian payload in the mapping */
            eli_gguf_str *strs;     /* STRING elements (n of them, owned by the file) */
            eli_gguf_value *items;  /* ARRAY elements: nested arrays (n of them, owned by the file) */
        } arr;
    } v;
};

typedef struct eli_gguf_kv {
    char *key; /* NUL-terminated copy */
    eli_gguf_value value;
} eli_gguf_kv;

#define GGUF_MAX_DIMS 4

typedef struct eli_gguf_tensor {
    char *name;      /* NUL-terminated copy */
    uint32_t type;   /* ggml type id (see quants.h) */
    uint32_t n_dims; /* 1..GGUF_MAX_DIMS */
    int64_t ne[GGUF_MAX_DIMS]; /* ne[0] fastest-varying; unused dims are 1 */
    uint64_t offset; /* relative to the start of the data section */
    uint64_t nbytes;
    const void *data; /* into the mapping */
} eli_gguf_tensor;

typedef struct eli_gguf_file eli_gguf_file;

/* Opens and validates a GGUF file. Returns NULL and fills err on failure. */
eli_gguf_file *eli_gguf_open(const char *path, eli_error *err);
/* Same over a caller-owned buffer (used by tests and fuzzers); the buffer must outlive the handle. */
eli_gguf_file *eli_gguf_open_memory(const void *buf, size_t size, eli_error *err);
void eli_gguf_close(eli_gguf_file *f);
/* ELI_OK while the mapping shows the file. A file truncated while mapped makes a read of its mapping fault;
 * eli_gguf_open guards its mapping (mapguard.h), so the process survives and reads zeros from then on: this
 * then fails with a message naming the file, and whatever was computed from the mapping since must be
 * discarded (it is called after such reads: parsing, binding, the forward pass). Always ELI_OK for a
 * memory buffer. */
int eli_gguf_check_mapping(const eli_gguf_file *f, eli_error *err);

uint32_t eli_gguf_version(const eli_gguf_file *f);
uint64_t eli_gguf_file_size(const eli_gguf_file *f);
uint32_t eli_gguf_alignment(const eli_gguf_file *f);
uint64_t eli_gguf_data_offset(const eli_gguf_file *f); /* file offset of the tensor data section */
const void *eli_gguf_mapping(const eli_gguf_file *f);  /* start of the file in memory */
/* Reads the n bytes that the mapping shows at `at` (inside eli_gguf_mapping's range) into dst: with pread from
 * the file opened by eli_gguf_open, so those pages of the mapping are never touched (they stay out of this
 * process's resident set; the page cache keeps them); a memory buffer is copied. 0, or an errno value
 * (EINVAL when the range is outside the file). */
int eli_gguf_read_at(const eli_gguf_file *f, const void *at, size_t n, void *dst);
/* Page-cache hint for the file range behind [at, at + n): read at random, no readahead (a failure only
 * loses the hint; nothing for a memory buffer). */
void eli_gguf_advise_random(const eli_gguf_file *f, const void *at, size_t n);
/* Drops this process's resident pages of the mapping over [at, at + n), rounded out to 64 KiB within the
 * mapping (they are read back from the file when touched again): for ranges copied elsewhere. Nothing for a memory
 * buffer, whose bytes exist only there. */
void eli_gguf_drop_pages(const eli_gguf_file *f, const void *at, size_t n);

uint64_t eli_gguf_n_kv(const eli_gguf_file *f);
const eli_gguf_kv *eli_gguf_kv_at(const eli_gguf_file *f, uint64_t i);
const eli_gguf_value *eli_gguf_find(const eli_gguf_file *f, const char *key); /* NULL if absent */

uint64_t eli_gguf_n_tensors(const eli_gguf_file *f);
const eli_gguf_tensor *eli_gguf_tensor_at(const eli_gguf_file *f, uint64_t i);
const eli_gguf_tensor *eli_gguf_find_tensor(const eli_gguf_file *f, const char *name); /* NULL if absent */
int64_t eli_gguf_tensor_nelements(const eli_gguf_tensor *t);

const char *eli_gguf_type_name(uint32_t value_type);
/* Bytes of one scalar of a value type (u8 .. f64, bool); 0 for STRING, ARRAY and unknown types. */
size_t eli_gguf_scalar_size(uint32_t value_type);

/* Numeric access to a scalar (idx must be 0) or to element idx of a scalar array.
 * Integers, bools and floats convert; a value that does not fit (negative to unsigned, fraction to
 * integer, out of range) is an error. Returns ELI_OK or a negative status with a message naming `what`. */
int eli_gguf_value_i64(const eli_gguf_value *v, uint64_t idx, int64_t *out, const char *what, eli_error *err);
int eli_gguf_value_f64(const eli_gguf_value *v, uint64_t idx, double *out, const char *what, eli_error *err);
/* Number of elements: 1 for a scalar, n for an array. */
uint64_t eli_gguf_value_count(const eli_gguf_value *v);

/* Convenience getters by key. Return 1 when found and converted, 0 when the key is absent (out is left
 * untouched), negative on a type or range error. */
int eli_gguf_get_u32(const eli_gguf_file *f, const char *key, uint32_t *out, eli_error *err);
int eli_gguf_get_f32(const eli_gguf_file *f, const char *key, float *out, eli_error *err);
int eli_gguf_get_bool(const eli_gguf_file *f, const char *key, int *out, eli_error *err);
int eli_gguf_get_str(const eli_gguf_file *f, const char *key, eli_gguf_str *out, eli_error *err);
/* Array getter: 1 found (and an array of elem_type, or any element type when elem_type is
 * GGUF_VT_COUNT), 0 absent, negative on wrong type. */
int eli_gguf_get_arr(const eli_gguf_file *f, const char *key, uint32_t elem_type, const eli_gguf_value **out,
                 eli_error *err);

/* True when s equals the NUL-terminated c string. */
int eli_gguf_str_eq(eli_gguf_str s, const char *c);

#endif
