/* A small, strict JSON (RFC 8259) DOM parser and string escaper, for the CLI's --jsonl / --messages
 * inputs and bundle manifests. Input is untrusted: depth, sizes and UTF-8 are validated; strings are
 * unescaped into NUL-terminated UTF-8 (they may contain NUL bytes: use str_len). A leading UTF-8 BOM is
 * ignored (RFC 8259 section 8.1). */
#ifndef ELI_JSON_H
#define ELI_JSON_H

#include <stddef.h>

#include "error.h"

enum eli_json_type { ELI_JSON_NULL, ELI_JSON_BOOL, ELI_JSON_NUMBER, ELI_JSON_STRING, ELI_JSON_ARRAY, ELI_JSON_OBJECT };

typedef struct eli_json eli_json;
struct eli_json {
    int type;        /* enum eli_json_type */
    int boolean;     /* BOOL */
    double number;   /* NUMBER */
    char *str;       /* STRING (NUL-terminated); for a NUMBER its literal text ("1.0" vs "1") */
    size_t str_len;  /* length of str in bytes */
    size_t n;        /* ARRAY / OBJECT element count */
    eli_json *items; /* ARRAY / OBJECT values */
    char **keys;     /* OBJECT keys (NUL-terminated), parallel to items */
};

/* Parses exactly one JSON value (surrounding whitespace allowed). NULL + err on failure, with the byte
 * offset of the problem in the message. */
eli_json *eli_json_parse(const char *text, size_t len, eli_error *err);
void eli_json_free(eli_json *v);

/* Object member by key (first match), NULL when absent or v is not an object. */
const eli_json *eli_json_get(const eli_json *v, const char *key);
/* Convenience: string member or NULL; number member as long long with a default. */
const char *eli_json_get_str(const eli_json *v, const char *key);
int eli_json_get_bool(const eli_json *v, const char *key, int dflt);

/* Writes s (len bytes) as a JSON string literal with quotes into a malloc'ed buffer; NULL on OOM. */
char *eli_json_quote(const char *s, size_t len);

#endif
