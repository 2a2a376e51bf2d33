/* One error convention for the whole library.
 *
 * Internal functions that can fail take an `eli_error *` as their last argument and return a negative
 * status (the ELIZA_ERR_* values of the public header) on failure, after writing a one-line,
 * human-readable reason into it. A NULL `eli_error *` is allowed: the message is dropped. */
#ifndef ELI_ERROR_H
#define ELI_ERROR_H

#include <stdarg.h>

#define ELI_OK 0
#define ELI_ERR_NOT_IMPLEMENTED (-1)
#define ELI_ERR_INVALID_ARG (-2)
#define ELI_ERR_BUNDLE_INVALID (-3)
#define ELI_ERR_FFI_FAULT (-4)
#define ELI_ERR_OOM (-5)
#define ELI_ERR_ABI_MISMATCH (-6)
#define ELI_ERR_CANCELLED (-7)

typedef struct eli_error {
    int code;       /* last status written, ELI_OK when none */
    char msg[512];  /* NUL-terminated reason */
} eli_error;

/* Writes a printf-style message into err (if non-NULL) and returns code. */
int eli_fail(eli_error *err, int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Prepends "prefix: " to an existing message (for adding context such as a file name). */
void eli_error_prefix(eli_error *err, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

void eli_error_clear(eli_error *err);

#endif
