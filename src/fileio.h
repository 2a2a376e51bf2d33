/* Files written by the library and the CLI are never half-written: data goes to a temporary file in the
 * same directory, is fsync'ed, then renamed over the destination. */
#ifndef ELI_FILEIO_H
#define ELI_FILEIO_H

#include <stddef.h>

#include "error.h"

typedef struct eli_atomic_file eli_atomic_file;

/* Starts writing path (through "<path>.tmp.<pid>.<n>"). NULL + err on failure. */
eli_atomic_file *eli_atomic_open(const char *path, eli_error *err);
int eli_atomic_write(eli_atomic_file *f, const void *data, size_t len, eli_error *err);
/* fsync + rename; the handle is freed whatever the result. */
int eli_atomic_commit(eli_atomic_file *f, eli_error *err);
/* Removes the temporary file; NULL-safe. */
void eli_atomic_abort(eli_atomic_file *f);

/* Whole-buffer convenience. */
int eli_write_file_atomic(const char *path, const void *data, size_t len, eli_error *err);

#endif
