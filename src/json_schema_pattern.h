/* A JSON schema "pattern" (the regex subset of json_schema.h) as GBNF for the JSON string that holds a
 * matching value, quotes included: characters JSON must escape (", \, controls) are matched in their
 * escaped form, and an unanchored pattern may be preceded or followed by any characters. */
#ifndef ELI_JSON_SCHEMA_PATTERN_H
#define ELI_JSON_SCHEMA_PATTERN_H

#include <stddef.h>

#include "error.h"
#include "strbuf.h"

/* Appends the grammar to out. char_rule names the rule of one JSON string character (used for '.' and
 * unanchored ends; *used_char says whether it was). ELI_OK, ELI_ERR_INVALID_ARG with the reason in
 * why (an unsupported or malformed pattern), or ELI_ERR_OOM. */
int eli_json_pattern_gbnf(const char *pattern, size_t len, const char *char_rule, eli_strbuf *out, int *used_char,
                          char *why, size_t why_len);

#endif
