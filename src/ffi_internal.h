/* What the files of the C ABI (ffi*.c) share: the out_error convention of the public header. */
#ifndef ELI_FFI_INTERNAL_H
#define ELI_FFI_INTERNAL_H

#include "error.h"

/* Stores "[libelizainference] fn: <message>" (malloc'ed) in *out_error when out_error is not NULL and
 * returns code. */
int eli_ffi_fail(char **out_error, const char *fn, int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
/* The same with err's message; returns err's code (ELIZA_ERR_INVALID_ARG when it holds none). */
int eli_ffi_fail_err(char **out_error, const char *fn, const eli_error *err);
/* ELIZA_ERR_NOT_IMPLEMENTED with the message "<family>" (what this build lacks). */
int eli_ffi_absent(char **out_error, const char *fn, const char *family);

#endif
