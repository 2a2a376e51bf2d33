/* Reading a byte string front to back without running past its end (slot files, saved states). */
#ifndef ELI_BYTES_H
#define ELI_BYTES_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    const uint8_t *p;
    size_t left;
} eli_reader;

/* The next n bytes, or NULL (the reader unchanged) when fewer are left. */
static inline const void *eli_read_bytes(eli_reader *r, uint64_t n) {
    if (n > r->left) return NULL;
    const void *at = r->p;
    r->p += n, r->left -= (size_t)n;
    return at;
}

#endif
