/* JSON schema -> GBNF grammar (grammar.h), for constrained generation of JSON.
 *
 * Supported: type (one or a list), properties, required, additionalProperties (false, absent = no other
 * properties; true or a schema only on objects without properties: a map), enum, const, items,
 * minItems / maxItems, minLength / maxLength, pattern (a regex subset, below), anyOf / oneOf (as
 * alternatives: oneOf's exclusivity is not enforced), $ref to local JSON pointers ("#", "#/$defs/x",
 * "#/definitions/x", ...; recursion allowed), numbers, integers, booleans, null; a schema `true` or `{}`
 * is any JSON value. Annotations (title, description, default, examples, $schema, $id, $comment,
 * deprecated, readOnly, writeOnly, $defs, definitions) are ignored. Any other keyword is an error that
 * names it, so a schema is never silently enforced less than it says.
 *
 * Objects: the properties come in the schema's order, each optional one may be left out. Values are
 * separated by at most 20 whitespace characters. Numbers are JSON numbers (integers: no fraction or
 * exponent).
 *
 * pattern: literals and escapes (\. \\ \/ \n \t \uXXXX ...), classes [a-z] [^...] with \d \w \s inside,
 * . (any character), \d \w \s \D \W \S, groups ( ) and (?: ), alternation |, quantifiers * + ? {m}
 * {m,} {m,n} (lazy forms match the same strings); ^ and $ only at the ends. Without ^ (or $) the
 * pattern may be preceded (or followed) by anything, as JSON Schema's unanchored search means. Not
 * supported (an error): backreferences, lookaround, \b, named groups. The grammar describes the string
 * as written in JSON, so a pattern character that JSON must escape (", \, controls) is matched in its
 * escaped form. */
#ifndef ELI_JSON_SCHEMA_H
#define ELI_JSON_SCHEMA_H

#include <stddef.h>

#include "error.h"

/* Converts the schema (JSON text, len bytes) into a GBNF grammar with start rule `root`: *out is
 * malloc'ed and NUL-terminated. */
int eli_json_schema_to_gbnf(const char *schema, size_t len, char **out, eli_error *err);

/* The GBNF of any JSON value (the CLI's --json), NUL-terminated, static. */
const char *eli_json_value_gbnf(void);

#endif
