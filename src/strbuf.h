/* A growable NUL-terminated text buffer for code that builds text piece by piece. Allocation failure
 * is sticky (oom set, later appends do nothing), so callers check once at the end. */
#ifndef ELI_STRBUF_H
#define ELI_STRBUF_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    char *p; /* NULL until something is appended */
    size_t n, cap;
    int oom;
} eli_strbuf;

void eli_sb_put(eli_strbuf *b, const char *s, size_t len);
void eli_sb_puts(eli_strbuf *b, const char *s);
void eli_sb_printf(eli_strbuf *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* GBNF spellings the JSON schema converter writes: a string literal ("...") for the UTF-8 bytes
 * s[0..len), and the repetition suffix for min..max copies (max UINT64_MAX: no maximum). */
void eli_sb_gbnf_literal(eli_strbuf *b, const char *s, size_t len);
void eli_sb_gbnf_repeat(eli_strbuf *b, uint64_t min, uint64_t max);

#endif
