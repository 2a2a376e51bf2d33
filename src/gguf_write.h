/* Streaming GGUF v3 writer. Metadata and tensor infos are collected in memory (they are small); tensor
 * data is then streamed in declaration order, so a multi-GB file never has to be held in memory. The file
 * is written atomically (fileio.h: temporary file, fsync, rename): a failed or aborted write leaves no
 * partial file behind.
 *
 *   w = eli_gguf_writer_open(path, err);
 *   eli_gguf_set_u32(w, "gemma4.block_count", 35); ...            metadata, any order
 *   eli_gguf_add_tensor(w, "token_embd.weight", ELI_TYPE_Q4_0, 2, ne); ...   all tensors
 *   eli_gguf_write_data(w, bytes, n); ...     the data of tensor 0, then tensor 1, ... (any chunking)
 *   eli_gguf_writer_commit(w, err);           checks that every tensor got exactly its size
 * Every function returns ELI_OK or a negative status with err set; after a failure, call
 * eli_gguf_writer_abort (commit frees the writer whatever the result). */
#ifndef ELI_GGUF_WRITE_H
#define ELI_GGUF_WRITE_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"

typedef struct eli_gguf_writer eli_gguf_writer;

eli_gguf_writer *eli_gguf_writer_open(const char *path, eli_error *err);

int eli_gguf_set_u32(eli_gguf_writer *w, const char *key, uint32_t v, eli_error *err);
int eli_gguf_set_i32(eli_gguf_writer *w, const char *key, int32_t v, eli_error *err);
int eli_gguf_set_f32(eli_gguf_writer *w, const char *key, float v, eli_error *err);
int eli_gguf_set_bool(eli_gguf_writer *w, const char *key, int v, eli_error *err);
int eli_gguf_set_str(eli_gguf_writer *w, const char *key, const char *v, eli_error *err);
/* Arrays; elem_type is a GGUF value type (gguf.h: GGUF_VT_UINT32, GGUF_VT_BOOL, ...) of a fixed size;
 * data holds n elements in that type (bool: one byte each). */
int eli_gguf_set_arr(eli_gguf_writer *w, const char *key, uint32_t elem_type, const void *data, uint64_t n,
                     eli_error *err);
int eli_gguf_set_arr_str(eli_gguf_writer *w, const char *key, const char *const *v, uint64_t n, eli_error *err);
/* A value of any type as gguf.h read it (nested arrays included), e.g. to copy another file's metadata. */
struct eli_gguf_value;
int eli_gguf_copy_kv(eli_gguf_writer *w, const char *key, const struct eli_gguf_value *v, eli_error *err);

/* Declares the next tensor (ggml type id, ne[0] fastest). Must precede the first eli_gguf_write_data. */
int eli_gguf_add_tensor(eli_gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims, const int64_t *ne,
                        eli_error *err);
/* Appends bytes of tensor data; a tensor is complete when it has received its size, and the next bytes
 * go to the next tensor (alignment padding is inserted automatically). */
int eli_gguf_write_data(eli_gguf_writer *w, const void *data, size_t n, eli_error *err);
/* Bytes of tensor data still expected (all tensors). */
uint64_t eli_gguf_data_remaining(const eli_gguf_writer *w);

int eli_gguf_writer_commit(eli_gguf_writer *w, eli_error *err);
void eli_gguf_writer_abort(eli_gguf_writer *w);

#endif
