/* JSON schema -> GBNF (json_schema.h).
 *
 * One walk over the schema: each schema becomes a grammar expression, named rules for objects, arrays,
 * strings with constraints, alternatives and $ref targets (a $ref target gets its rule before its body
 * is built, so recursive schemas refer to it by name), and shared rules (ws, string, number, ...) that
 * are written once, only when used. */
#include "json_schema.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar.h"
#include "json.h"
#include "json_schema_pattern.h"
#include "strbuf.h"

/* ---- shared rules ----------------------------------------------------------------------------- */

enum { P_WS, P_CHAR, P_STRING, P_NUMBER, P_INTEGER, P_BOOLEAN, P_NULL, P_VALUE, P_OBJECT, P_ARRAY, P_COUNT };

#define WS_BODY "[ \\t\\n]{0,20}"
#define CHAR_BODY "[^\"\\\\\\x00-\\x1F] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4} )"
#define STRING_BODY "\"\\\"\" char* \"\\\"\""
#define NUMBER_BODY "\"-\"? ( \"0\" | [1-9] [0-9]{0,15} ) ( \".\" [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,3} )?"
#define INTEGER_BODY "\"-\"? ( \"0\" | [1-9] [0-9]{0,15} )"
#define BOOLEAN_BODY "\"true\" | \"false\""
#define NULL_BODY "\"null\""
#define VALUE_BODY "object | array | string | number | boolean | null"
#define OBJECT_BODY "\"{\" ws ( string ws \":\" ws value ( ws \",\" ws string ws \":\" ws value )* ws )? \"}\""
#define ARRAY_BODY "\"[\" ws ( value ( ws \",\" ws value )* ws )? \"]\""

static const struct {
    const char *name, *body;
    unsigned deps; /* other shared rules the body uses */
} prims[P_COUNT] = {
    [P_WS] = {"ws", WS_BODY, 0},
    [P_CHAR] = {"char", CHAR_BODY, 0},
    [P_STRING] = {"string", STRING_BODY, 1u << P_CHAR},
    [P_NUMBER] = {"number", NUMBER_BODY, 0},
    [P_INTEGER] = {"integer", INTEGER_BODY, 0},
    [P_BOOLEAN] = {"boolean", BOOLEAN_BODY, 0},
    [P_NULL] = {"null", NULL_BODY, 0},
    [P_VALUE] = {"value", VALUE_BODY,
                 1u << P_OBJECT | 1u << P_ARRAY | 1u << P_STRING | 1u << P_NUMBER | 1u << P_BOOLEAN | 1u << P_NULL},
    [P_OBJECT] = {"object", OBJECT_BODY, 1u << P_WS | 1u << P_STRING | 1u << P_VALUE},
    [P_ARRAY] = {"array", ARRAY_BODY, 1u << P_WS | 1u << P_VALUE},
};

/* ---- the converter ---------------------------------------------------------------------------- */

#define MAX_COUNT ELI_GRAMMAR_MAX_REPEAT /* largest minItems / maxItems / minLength / maxLength */

typedef struct {
    char *name;
    eli_strbuf body;
} rule;

typedef struct {
    const eli_json *root;
    rule *rules;
    size_t n_rules, cap_rules;
    char **ref_keys;   /* $ref strings already given a rule, */
    size_t *ref_rules; /* and that rule */
    size_t n_refs, cap_refs;
    unsigned prims_used;
    eli_error *err;
    int failed, code;
    int depth; /* of visit(): the top schema's own rule (depth 1) alone may be named root */
    char path[512]; /* where in the schema we are, for messages */
} conv;

static int fail(conv *c, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static int fail(conv *c, const char *fmt, ...) {
    if (!c->failed) {
        char msg[400];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        eli_fail(c->err, ELI_ERR_INVALID_ARG, "JSON schema at %s: %s", c->path, msg);
        c->failed = 1;
        c->code = ELI_ERR_INVALID_ARG;
    }
    return -1;
}

static int oom(conv *c) {
    if (!c->failed) eli_fail(c->err, ELI_ERR_OOM, "JSON schema: out of memory");
    c->failed = 1;
    c->code = ELI_ERR_OOM;
    return -1;
}

static const char *prim(conv *c, int p) {
    c->prims_used |= 1u << p;
    return prims[p].name;
}

static int name_taken(const conv *c, const char *name) {
    if (!strcmp(name, "root") && c->depth != 1) return 1;
    for (int p = 0; p < P_COUNT; p++)
        if (!strcmp(prims[p].name, name)) return 1;
    for (size_t i = 0; i < c->n_rules; i++)
        if (!strcmp(c->rules[i].name, name)) return 1;
    return 0;
}

/* A new rule named after hint (characters GBNF names cannot hold become '-'), made unique. */
static int add_rule(conv *c, const char *hint, size_t *out) {
    char base[96];
    size_t n = 0;
    for (const char *h = hint; *h && n < sizeof base - 1; h++) {
        char ch = *h;
        int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9');
        if (ok) base[n++] = ch;
        else if (n && base[n - 1] != '-') base[n++] = '-';
    }
    while (n && base[n - 1] == '-') n--;
    base[n] = '\0';
    if (!n) snprintf(base, sizeof base, "r");
    char name[128];
    snprintf(name, sizeof name, "%s", base);
    for (int k = 2; name_taken(c, name); k++) snprintf(name, sizeof name, "%s-%d", base, k);
    if (c->n_rules == c->cap_rules) {
        size_t cap = c->cap_rules ? c->cap_rules * 2 : 16;
        rule *r = realloc(c->rules, cap * sizeof *r);
        if (!r) return oom(c);
        c->rules = r;
        c->cap_rules = cap;
    }
    rule *r = &c->rules[c->n_rules];
    memset(r, 0, sizeof *r);
    if (!(r->name = strdup(name))) return oom(c);
    *out = c->n_rules++;
    return 0;
}

/* Appends a rule with the given body to expr by name. */
static int emit_rule(conv *c, const char *hint, eli_strbuf *body, eli_strbuf *expr) {
    size_t r;
    if (add_rule(c, hint, &r)) {
        free(body->p);
        return -1;
    }
    c->rules[r].body = *body;
    memset(body, 0, sizeof *body);
    eli_sb_puts(expr, c->rules[r].name);
    return 0;
}

/* Appends "path/key" to c->path for the duration of a sub-visit; returns the old length. */
static size_t path_push(conv *c, const char *key) {
    size_t old = strlen(c->path);
    snprintf(c->path + old, sizeof c->path - old, "/%s", key);
    return old;
}

/* ---- keywords --------------------------------------------------------------------------------- */

static const char *const annotations[] = {"title", "description", "default", "examples", "$schema", "$id", "$comment",
                                          "deprecated", "readOnly", "writeOnly", "$defs", "definitions"};
static const char *const supported[] = {"type", "properties", "required", "additionalProperties", "enum", "const",
                                        "items", "minItems", "maxItems", "minLength", "maxLength", "pattern",
                                        "anyOf", "oneOf", "$ref"};

static int in_list(const char *k, const char *const *list, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!strcmp(k, list[i])) return 1;
    return 0;
}

static int check_keywords(conv *c, const eli_json *s) {
    for (size_t i = 0; i < s->n; i++) {
        const char *k = s->keys[i];
        if (in_list(k, annotations, sizeof annotations / sizeof *annotations)) continue;
        if (!in_list(k, supported, sizeof supported / sizeof *supported)) return fail(c, "unsupported keyword '%s'", k);
    }
    return 0;
}

/* A count keyword (minItems, ...): a non-negative integer up to MAX_COUNT; dflt when absent. */
static int get_count(conv *c, const eli_json *s, const char *key, uint64_t dflt, uint64_t *out) {
    const eli_json *v = eli_json_get(s, key);
    *out = dflt;
    if (!v) return 0;
    if (v->type != ELI_JSON_NUMBER || v->number < 0 || v->number != floor(v->number))
        return fail(c, "'%s' must be a non-negative integer", key);
    if (v->number > MAX_COUNT) return fail(c, "'%s' above %u is not supported", key, (unsigned)MAX_COUNT);
    *out = (uint64_t)v->number;
    return 0;
}

/* ---- constants -------------------------------------------------------------------------------- */

/* Compact JSON text of a value (keys in their order, numbers as written). */
static void sb_json(eli_strbuf *b, const eli_json *v) {
    switch (v->type) {
    case ELI_JSON_NULL: eli_sb_puts(b, "null"); break;
    case ELI_JSON_BOOL: eli_sb_puts(b, v->boolean ? "true" : "false"); break;
    case ELI_JSON_NUMBER: eli_sb_put(b, v->str, v->str_len); break;
    case ELI_JSON_STRING: {
        char *q = eli_json_quote(v->str, v->str_len);
        if (!q) b->oom = 1;
        else eli_sb_puts(b, q);
        free(q);
        break;
    }
    case ELI_JSON_ARRAY:
    case ELI_JSON_OBJECT:
        eli_sb_puts(b, v->type == ELI_JSON_ARRAY ? "[" : "{");
        for (size_t i = 0; i < v->n; i++) {
            if (i) eli_sb_puts(b, ",");
            if (v->type == ELI_JSON_OBJECT) {
                char *q = eli_json_quote(v->keys[i], strlen(v->keys[i]));
                if (!q) b->oom = 1;
                else eli_sb_puts(b, q);
                free(q);
                eli_sb_puts(b, ":");
            }
            sb_json(b, &v->items[i]);
        }
        eli_sb_puts(b, v->type == ELI_JSON_ARRAY ? "]" : "}");
        break;
    default: break;
    }
}

static int emit_constant(conv *c, const eli_json *v, eli_strbuf *expr) {
    eli_strbuf text = {0};
    sb_json(&text, v);
    if (text.oom) {
        free(text.p);
        return oom(c);
    }
    eli_sb_gbnf_literal(expr, text.p, text.n);
    free(text.p);
    return 0;
}

/* ---- schemas ---------------------------------------------------------------------------------- */

static int visit(conv *c, const eli_json *s, const char *hint, eli_strbuf *expr);

/* The target of a local JSON pointer ("#", "#/a/b", with ~0 ~1 escapes), or NULL. */
static const eli_json *resolve(const eli_json *root, const char *ref) {
    if (ref[0] != '#') return NULL;
    const eli_json *v = root;
    const char *p = ref + 1;
    while (*p == '/') {
        p++;
        char key[256];
        size_t n = 0;
        while (*p && *p != '/' && n < sizeof key - 1) {
            if (p[0] == '~' && p[1] == '0') key[n++] = '~', p += 2;
            else if (p[0] == '~' && p[1] == '1') key[n++] = '/', p += 2;
            else key[n++] = *p++;
        }
        key[n] = '\0';
        if (v->type == ELI_JSON_OBJECT) {
            v = eli_json_get(v, key);
        } else if (v->type == ELI_JSON_ARRAY) {
            char *end;
            unsigned long i = strtoul(key, &end, 10);
            v = *key && !*end && i < v->n ? &v->items[i] : NULL;
        } else {
            v = NULL;
        }
        if (!v) return NULL;
    }
    return *p ? NULL : v;
}

static int visit_ref(conv *c, const eli_json *s, eli_strbuf *expr) {
    const eli_json *ref = eli_json_get(s, "$ref");
    if (ref->type != ELI_JSON_STRING) return fail(c, "'$ref' must be a string");
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->keys[i], "$ref") && !in_list(s->keys[i], annotations, sizeof annotations / sizeof *annotations))
            return fail(c, "'%s' beside '$ref' is not supported", s->keys[i]);
    for (size_t i = 0; i < c->n_refs; i++)
        if (!strcmp(c->ref_keys[i], ref->str)) {
            eli_sb_puts(expr, c->rules[c->ref_rules[i]].name);
            return 0;
        }
    const eli_json *target = resolve(c->root, ref->str);
    if (!target) return fail(c, "$ref '%s' is not a local reference that resolves (only \"#...\" pointers are)", ref->str);
    const char *slash = strrchr(ref->str, '/');
    size_t r;
    if (add_rule(c, slash && slash[1] ? slash + 1 : "root-ref", &r)) return -1;
    if (c->n_refs == c->cap_refs) {
        size_t cap = c->cap_refs ? c->cap_refs * 2 : 8;
        char **k = realloc(c->ref_keys, cap * sizeof *k);
        if (!k) return oom(c);
        c->ref_keys = k;
        size_t *v = realloc(c->ref_rules, cap * sizeof *v);
        if (!v) return oom(c);
        c->ref_rules = v;
        c->cap_refs = cap;
    }
    if (!(c->ref_keys[c->n_refs] = strdup(ref->str))) return oom(c);
    c->ref_rules[c->n_refs++] = r;
    char saved[sizeof c->path];
    memcpy(saved, c->path, sizeof saved);
    snprintf(c->path, sizeof c->path, "%s", ref->str);
    eli_strbuf body = {0};
    int rc = visit(c, target, c->rules[r].name, &body);
    memcpy(c->path, saved, sizeof saved);
    if (rc) {
        free(body.p);
        return -1;
    }
    c->rules[r].body = body;
    eli_sb_puts(expr, c->rules[r].name);
    return 0;
}

static int visit_object(conv *c, const eli_json *s, const char *hint, eli_strbuf *expr) {
    const eli_json *props = eli_json_get(s, "properties"), *req = eli_json_get(s, "required"),
                   *extra = eli_json_get(s, "additionalProperties");
    if (props && props->type != ELI_JSON_OBJECT) return fail(c, "'properties' must be an object");
    if (req && req->type != ELI_JSON_ARRAY) return fail(c, "'required' must be an array of property names");
    for (size_t i = 0; req && i < req->n; i++) {
        if (req->items[i].type != ELI_JSON_STRING) return fail(c, "'required' must be an array of property names");
        if (!props || !eli_json_get(props, req->items[i].str))
            return fail(c, "required property '%s' is not in 'properties'", req->items[i].str);
    }
    int extra_ok = extra && (extra->type == ELI_JSON_OBJECT || (extra->type == ELI_JSON_BOOL && extra->boolean));
    if (extra && !extra_ok && extra->type != ELI_JSON_BOOL) return fail(c, "'additionalProperties' must be a boolean or a schema");
    const char *ws = prim(c, P_WS);
    eli_strbuf body = {0};
    size_t n = props ? props->n : 0;
    if (n == 0) {
        if (!extra_ok) {
            if (!props && !extra) { /* {"type": "object"}: any object */
                eli_sb_puts(expr, prim(c, P_OBJECT));
                return 0;
            }
            eli_sb_printf(&body, "\"{\" %s \"}\"", ws);
            return emit_rule(c, hint, &body, expr);
        }
        eli_strbuf value = {0}; /* a map: any keys, values of one schema */
        char sub[128];
        snprintf(sub, sizeof sub, "%s-value", hint);
        size_t old = path_push(c, "additionalProperties");
        int rc = extra->type == ELI_JSON_BOOL ? (eli_sb_puts(&value, prim(c, P_VALUE)), 0) : visit(c, extra, sub, &value);
        c->path[old] = '\0';
        if (rc) {
            free(value.p);
            return -1;
        }
        const char *str = prim(c, P_STRING);
        eli_sb_printf(&body, "\"{\" %s ( %s %s \":\" %s ", ws, str, ws, ws);
        eli_sb_put(&body, value.p, value.n);
        eli_sb_printf(&body, " ( %s \",\" %s %s %s \":\" %s ", ws, ws, str, ws, ws);
        eli_sb_put(&body, value.p, value.n);
        eli_sb_printf(&body, " )* %s )? \"}\"", ws);
        free(value.p);
        return emit_rule(c, hint, &body, expr);
    }
    if (extra_ok) return fail(c, "'additionalProperties' other than false beside 'properties' is not supported");
    /* one rule per property's key-value pair, then for i = n-1 .. 0:
     *   rest_i:  what may follow once something came before (each present pair after a comma)
     *   first_i: a non-empty run starting at property i or later */
    char **kv = calloc(n, sizeof *kv);
    int *required = calloc(n, sizeof *required);
    int rc = !kv || !required ? oom(c) : 0;
    for (size_t i = 0; i < n && !rc; i++) {
        for (size_t j = 0; req && j < req->n; j++) required[i] |= !strcmp(req->items[j].str, props->keys[i]);
        eli_strbuf pair = {0}, value = {0};
        char sub[160];
        snprintf(sub, sizeof sub, "%s-%s", hint, props->keys[i]);
        size_t old = path_push(c, "properties");
        path_push(c, props->keys[i]);
        rc = visit(c, &props->items[i], sub, &value);
        c->path[old] = '\0';
        if (!rc) {
            char *q = eli_json_quote(props->keys[i], strlen(props->keys[i]));
            if (!q) rc = oom(c);
            else eli_sb_gbnf_literal(&pair, q, strlen(q));
            free(q);
            eli_sb_printf(&pair, " %s \":\" %s ", ws, ws);
            eli_sb_put(&pair, value.p, value.n);
            eli_strbuf name = {0};
            snprintf(sub, sizeof sub, "%s-%s-kv", hint, props->keys[i]);
            if (!rc) rc = emit_rule(c, sub, &pair, &name);
            kv[i] = name.p;
        }
        free(value.p);
        free(pair.p);
    }
    char *rest = NULL, *first = NULL; /* rule names of rest_{i+1}, first_{i+1} */
    for (size_t i = n; i-- > 0 && !rc;) {
        eli_strbuf b = {0}, name = {0};
        char sub[160];
        if (i + 1 < n) { /* rest_{i+1} is only needed when something follows property i */
            eli_sb_printf(&b, required[i + 1] ? "%s \",\" %s %s" : "( %s \",\" %s %s )?", ws, ws, kv[i + 1]);
            if (rest) eli_sb_printf(&b, " %s", rest);
            snprintf(sub, sizeof sub, "%s-rest", hint);
            rc = emit_rule(c, sub, &b, &name);
            free(rest);
            rest = name.p;
            memset(&name, 0, sizeof name);
        }
        if (rc) break;
        eli_sb_puts(&b, kv[i]);
        if (i + 1 < n) eli_sb_printf(&b, " %s", rest);
        if (!required[i] && first) eli_sb_printf(&b, " | %s", first);
        snprintf(sub, sizeof sub, "%s-first", hint);
        rc = emit_rule(c, sub, &b, &name);
        free(first);
        first = name.p;
    }
    int any_required = 0;
    for (size_t i = 0; i < n; i++) any_required |= required[i];
    if (!rc) {
        if (any_required) eli_sb_printf(&body, "\"{\" %s %s %s \"}\"", ws, first, ws);
        else eli_sb_printf(&body, "\"{\" %s ( %s %s )? \"}\"", ws, first, ws);
        rc = emit_rule(c, hint, &body, expr);
    }
    for (size_t i = 0; kv && i < n; i++) free(kv[i]);
    free(kv);
    free(required);
    free(rest);
    free(first);
    return rc;
}

static int visit_array(conv *c, const eli_json *s, const char *hint, eli_strbuf *expr) {
    const eli_json *items = eli_json_get(s, "items");
    uint64_t min, max;
    if (get_count(c, s, "minItems", 0, &min) || get_count(c, s, "maxItems", UINT64_MAX, &max)) return -1;
    if (max < min) return fail(c, "'maxItems' is below 'minItems'");
    if (items && items->type == ELI_JSON_ARRAY) return fail(c, "'items' as an array (tuple) is not supported");
    if (!items && min == 0 && max == UINT64_MAX) {
        eli_sb_puts(expr, prim(c, P_ARRAY));
        return 0;
    }
    const char *ws = prim(c, P_WS);
    eli_strbuf item = {0}, body = {0};
    char sub[128];
    snprintf(sub, sizeof sub, "%s-item", hint);
    size_t old = path_push(c, "items");
    int rc = items ? visit(c, items, sub, &item) : (eli_sb_puts(&item, prim(c, P_VALUE)), 0);
    c->path[old] = '\0';
    if (rc) {
        free(item.p);
        return -1;
    }
    if (max == 0) {
        eli_sb_printf(&body, "\"[\" %s \"]\"", ws);
    } else {
        eli_sb_printf(&body, "\"[\" %s %s", ws, min == 0 ? "( " : "");
        eli_sb_put(&body, item.p, item.n);
        if (max != 1) {
            eli_sb_printf(&body, " ( %s \",\" %s ", ws, ws);
            eli_sb_put(&body, item.p, item.n);
            eli_sb_puts(&body, " )");
            eli_sb_gbnf_repeat(&body, min ? min - 1 : 0, max == UINT64_MAX ? UINT64_MAX : max - 1);
        }
        eli_sb_printf(&body, " %s %s\"]\"", ws, min == 0 ? ")? " : "");
    }
    free(item.p);
    return emit_rule(c, hint, &body, expr);
}

static int visit_string(conv *c, const eli_json *s, const char *hint, eli_strbuf *expr) {
    uint64_t min, max;
    const eli_json *pat = eli_json_get(s, "pattern");
    if (get_count(c, s, "minLength", 0, &min) || get_count(c, s, "maxLength", UINT64_MAX, &max)) return -1;
    if (max < min) return fail(c, "'maxLength' is below 'minLength'");
    eli_strbuf body = {0};
    if (pat) {
        if (eli_json_get(s, "minLength") || eli_json_get(s, "maxLength"))
            return fail(c, "'pattern' together with 'minLength' / 'maxLength' is not supported");
        if (pat->type != ELI_JSON_STRING) return fail(c, "'pattern' must be a string");
        char why[300];
        int used_char = 0, rc = eli_json_pattern_gbnf(pat->str, pat->str_len, prims[P_CHAR].name, &body, &used_char, why, sizeof why);
        if (used_char) prim(c, P_CHAR);
        if (rc) {
            free(body.p);
            return rc == ELI_ERR_OOM ? oom(c) : fail(c, "%s", why);
        }
        return emit_rule(c, hint, &body, expr);
    }
    if (min == 0 && max == UINT64_MAX) {
        eli_sb_puts(expr, prim(c, P_STRING));
        return 0;
    }
    eli_sb_printf(&body, "\"\\\"\" %s", prim(c, P_CHAR));
    eli_sb_gbnf_repeat(&body, min, max);
    eli_sb_puts(&body, " \"\\\"\"");
    return emit_rule(c, hint, &body, expr);
}

/* The schema for one type name. */
static int visit_type(conv *c, const eli_json *s, const char *type, const char *hint, eli_strbuf *expr) {
    if (!strcmp(type, "object")) return visit_object(c, s, hint, expr);
    if (!strcmp(type, "array")) return visit_array(c, s, hint, expr);
    if (!strcmp(type, "string")) return visit_string(c, s, hint, expr);
    int p = !strcmp(type, "number") ? P_NUMBER : !strcmp(type, "integer") ? P_INTEGER : !strcmp(type, "boolean") ? P_BOOLEAN
            : !strcmp(type, "null")                                                                         ? P_NULL
                                                                                                            : -1;
    if (p < 0) return fail(c, "unknown type '%s'", type);
    eli_sb_puts(expr, prim(c, p));
    return 0;
}

static int visit_alternatives(conv *c, const eli_json *list, const char *key, const char *hint, eli_strbuf *expr) {
    if (list->type != ELI_JSON_ARRAY || list->n == 0) return fail(c, "'%s' must be a non-empty array of schemas", key);
    eli_strbuf body = {0};
    for (size_t i = 0; i < list->n; i++) {
        char sub[128], idx[48];
        snprintf(sub, sizeof sub, "%s-%zu", hint, i);
        snprintf(idx, sizeof idx, "%s/%zu", key, i);
        size_t old = path_push(c, idx);
        if (i) eli_sb_puts(&body, " | ");
        int rc = visit(c, &list->items[i], sub, &body);
        c->path[old] = '\0';
        if (rc) {
            free(body.p);
            return -1;
        }
    }
    return emit_rule(c, hint, &body, expr);
}

static int visit_schema(conv *c, const eli_json *s, const char *hint, eli_strbuf *expr);

static int visit(conv *c, const eli_json *s, const char *hint, eli_strbuf *expr) {
    if (c->failed) return -1;
    c->depth++;
    int rc = visit_schema(c, s, hint, expr);
    c->depth--;
    return rc;
}

static int visit_schema(conv *c, const eli_json *s, const char *hint, eli_strbuf *expr) {
    if (s->type == ELI_JSON_BOOL) {
        if (!s->boolean) return fail(c, "the schema false matches nothing");
        eli_sb_puts(expr, prim(c, P_VALUE));
        return 0;
    }
    if (s->type != ELI_JSON_OBJECT) return fail(c, "a schema must be an object or a boolean");
    if (check_keywords(c, s)) return -1;
    if (eli_json_get(s, "$ref")) return visit_ref(c, s, expr);
    const eli_json *type = eli_json_get(s, "type"), *any = eli_json_get(s, "anyOf"), *one = eli_json_get(s, "oneOf");
    const eli_json *cnst = eli_json_get(s, "const"), *en = eli_json_get(s, "enum");
    if (any && one) return fail(c, "'anyOf' together with 'oneOf' is not supported");
    if ((any || one) && (type || cnst || en)) return fail(c, "'%s' beside 'type', 'const' or 'enum' is not supported", any ? "anyOf" : "oneOf");
    if (any || one) return visit_alternatives(c, any ? any : one, any ? "anyOf" : "oneOf", hint, expr);
    if (cnst) return emit_constant(c, cnst, expr);
    if (en) {
        if (en->type != ELI_JSON_ARRAY || en->n == 0) return fail(c, "'enum' must be a non-empty array");
        eli_strbuf body = {0};
        for (size_t i = 0; i < en->n; i++) {
            if (i) eli_sb_puts(&body, " | ");
            if (emit_constant(c, &en->items[i], &body)) {
                free(body.p);
                return -1;
            }
        }
        return emit_rule(c, hint, &body, expr);
    }
    if (type && type->type == ELI_JSON_ARRAY) {
        if (type->n == 0) return fail(c, "'type' must not be an empty list");
        eli_strbuf body = {0};
        for (size_t i = 0; i < type->n; i++) {
            if (type->items[i].type != ELI_JSON_STRING) {
                free(body.p);
                return fail(c, "'type' must be a string or a list of strings");
            }
            char sub[128];
            snprintf(sub, sizeof sub, "%s-%s", hint, type->items[i].str);
            if (i) eli_sb_puts(&body, " | ");
            if (visit_type(c, s, type->items[i].str, sub, &body)) {
                free(body.p);
                return -1;
            }
        }
        return emit_rule(c, hint, &body, expr);
    }
    if (type && type->type != ELI_JSON_STRING) return fail(c, "'type' must be a string or a list of strings");
    if (type) return visit_type(c, s, type->str, hint, expr);
    /* no type: what the keywords imply, else any value */
    if (eli_json_get(s, "properties") || eli_json_get(s, "required") || eli_json_get(s, "additionalProperties"))
        return visit_object(c, s, hint, expr);
    if (eli_json_get(s, "items") || eli_json_get(s, "minItems") || eli_json_get(s, "maxItems"))
        return visit_array(c, s, hint, expr);
    if (eli_json_get(s, "minLength") || eli_json_get(s, "maxLength") || eli_json_get(s, "pattern"))
        return visit_string(c, s, hint, expr);
    eli_sb_puts(expr, prim(c, P_VALUE));
    return 0;
}

int eli_json_schema_to_gbnf(const char *schema, size_t len, char **out, eli_error *err) {
    *out = NULL;
    eli_error jerr = {0};
    eli_json *root = eli_json_parse(schema, len, &jerr);
    if (!root) return eli_fail(err, jerr.code, "JSON schema: %s", jerr.msg);
    conv c = {.root = root, .err = err, .path = "#"};
    eli_strbuf top = {0};
    int rc = visit(&c, root, "root", &top);
    eli_strbuf g = {0};
    if (!rc) {
        /* root first (an alias when the top schema is a shared rule or a $ref), then the rest in order */
        size_t r0 = SIZE_MAX;
        for (size_t i = 0; i < c.n_rules; i++)
            if (!strcmp(c.rules[i].name, "root")) r0 = i;
        if (r0 == SIZE_MAX) eli_sb_printf(&g, "root ::= %s\n", top.p);
        for (size_t k = 0; k <= c.n_rules; k++) {
            size_t i = k == 0 ? r0 : k - 1;
            if (i == SIZE_MAX || (k > 0 && i == r0)) continue;
            eli_sb_printf(&g, "%s ::= ", c.rules[i].name);
            eli_sb_put(&g, c.rules[i].body.p ? c.rules[i].body.p : "", c.rules[i].body.n);
            eli_sb_puts(&g, "\n");
        }
        unsigned used = c.prims_used;
        for (int changed = 1; changed;) { /* close over the shared rules' own uses */
            changed = 0;
            for (int p = 0; p < P_COUNT; p++)
                if ((used >> p & 1) && (used | prims[p].deps) != used) used |= prims[p].deps, changed = 1;
        }
        for (int p = 0; p < P_COUNT; p++)
            if (used >> p & 1) eli_sb_printf(&g, "%s ::= %s\n", prims[p].name, prims[p].body);
        if (g.oom) rc = oom(&c);
    }
    for (size_t i = 0; i < c.n_rules; i++) {
        free(c.rules[i].name);
        free(c.rules[i].body.p);
    }
    for (size_t i = 0; i < c.n_refs; i++) free(c.ref_keys[i]);
    free(c.rules);
    free(c.ref_keys);
    free(c.ref_rules);
    eli_json_free(root);
    if (!rc && top.oom) rc = oom(&c);
    free(top.p);
    if (rc) {
        free(g.p);
        return c.code;
    }
    *out = g.p;
    return ELI_OK;
}

const char *eli_json_value_gbnf(void) {
    return "root ::= value\n"
           "value ::= " VALUE_BODY "\n"
           "object ::= " OBJECT_BODY "\n"
           "array ::= " ARRAY_BODY "\n"
           "string ::= " STRING_BODY "\n"
           "char ::= " CHAR_BODY "\n"
           "number ::= " NUMBER_BODY "\n"
           "boolean ::= " BOOLEAN_BODY "\n"
           "null ::= " NULL_BODY "\n"
           "ws ::= " WS_BODY "\n";
}
