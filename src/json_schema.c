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
#include "utf8.h"

/* ---- text buffers ----------------------------------------------------------------------------- */

typedef struct {
    char *s;
    size_t n, cap;
    int oom;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *t = realloc(b->s, cap);
        if (!t) {
            b->oom = 1;
            return;
        }
        b->s = t;
        b->cap = cap;
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = '\0';
}

static void sb_str(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

static void sb_fmt(sbuf *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static void sb_fmt(sbuf *b, const char *fmt, ...) {
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n > 0) sb_put(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* A GBNF string literal for bytes s[0..n) (valid UTF-8). */
static void sb_literal(sbuf *b, const char *s, size_t n) {
    sb_str(b, "\"");
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') sb_fmt(b, "\\%c", c);
        else if (c == '\n') sb_str(b, "\\n");
        else if (c == '\r') sb_str(b, "\\r");
        else if (c == '\t') sb_str(b, "\\t");
        else if (c < 0x20 || c == 0x7F) sb_fmt(b, "\\x%02X", c);
        else sb_put(b, (const char *)&c, 1);
    }
    sb_str(b, "\"");
}

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
    sbuf body;
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
static int emit_rule(conv *c, const char *hint, sbuf *body, sbuf *expr) {
    size_t r;
    if (add_rule(c, hint, &r)) {
        free(body->s);
        return -1;
    }
    c->rules[r].body = *body;
    memset(body, 0, sizeof *body);
    sb_str(expr, c->rules[r].name);
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

/* {m,n} suffix for a repetition of `min` to `max` (UINT64_MAX: no maximum). */
static void sb_repeat(sbuf *b, uint64_t min, uint64_t max) {
    if (max == UINT64_MAX) {
        if (min == 0) sb_str(b, "*");
        else if (min == 1) sb_str(b, "+");
        else sb_fmt(b, "{%llu,}", (unsigned long long)min);
    } else if (min == max) {
        if (min != 1) sb_fmt(b, "{%llu}", (unsigned long long)min);
    } else if (min == 0 && max == 1) {
        sb_str(b, "?");
    } else {
        sb_fmt(b, "{%llu,%llu}", (unsigned long long)min, (unsigned long long)max);
    }
}

/* ---- constants -------------------------------------------------------------------------------- */

/* Compact JSON text of a value (keys in their order, numbers as written). */
static void sb_json(sbuf *b, const eli_json *v) {
    switch (v->type) {
    case ELI_JSON_NULL: sb_str(b, "null"); break;
    case ELI_JSON_BOOL: sb_str(b, v->boolean ? "true" : "false"); break;
    case ELI_JSON_NUMBER: sb_put(b, v->str, v->str_len); break;
    case ELI_JSON_STRING: {
        char *q = eli_json_quote(v->str, v->str_len);
        if (!q) b->oom = 1;
        else sb_str(b, q);
        free(q);
        break;
    }
    case ELI_JSON_ARRAY:
    case ELI_JSON_OBJECT:
        sb_str(b, v->type == ELI_JSON_ARRAY ? "[" : "{");
        for (size_t i = 0; i < v->n; i++) {
            if (i) sb_str(b, ",");
            if (v->type == ELI_JSON_OBJECT) {
                char *q = eli_json_quote(v->keys[i], strlen(v->keys[i]));
                if (!q) b->oom = 1;
                else sb_str(b, q);
                free(q);
                sb_str(b, ":");
            }
            sb_json(b, &v->items[i]);
        }
        sb_str(b, v->type == ELI_JSON_ARRAY ? "]" : "}");
        break;
    default: break;
    }
}

static int emit_constant(conv *c, const eli_json *v, sbuf *expr) {
    sbuf text = {0};
    sb_json(&text, v);
    if (text.oom) {
        free(text.s);
        return oom(c);
    }
    sb_literal(expr, text.s, text.n);
    free(text.s);
    return 0;
}

/* ---- patterns --------------------------------------------------------------------------------- */

typedef struct {
    conv *c;
    const char *s;
    size_t n, pos;
    int depth;
} regex;

typedef struct {
    uint32_t lo, hi;
} cp_range;

typedef struct {
    cp_range *r;
    size_t n, cap;
} cp_set;

static int set_add(regex *re, cp_set *s, uint32_t lo, uint32_t hi) {
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 8;
        cp_range *r = realloc(s->r, cap * sizeof *r);
        if (!r) return oom(re->c);
        s->r = r;
        s->cap = cap;
    }
    s->r[s->n++] = (cp_range){lo, hi};
    return 0;
}

static int range_cmp(const void *a, const void *b) {
    const cp_range *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* Sorted, merged, and complemented within [0, U+10FFFF] if negated. */
static int set_normalize(regex *re, cp_set *s, int negated) {
    qsort(s->r, s->n, sizeof *s->r, range_cmp);
    size_t m = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (m && s->r[i].lo <= s->r[m - 1].hi + 1) {
            if (s->r[i].hi > s->r[m - 1].hi) s->r[m - 1].hi = s->r[i].hi;
        } else {
            s->r[m++] = s->r[i];
        }
    }
    s->n = m;
    if (!negated) return 0;
    cp_set t = {0};
    uint32_t next = 0;
    for (size_t i = 0; i < m; i++) {
        if (s->r[i].lo > next && set_add(re, &t, next, s->r[i].lo - 1)) break;
        next = s->r[i].hi + 1;
    }
    if (next <= ELI_GRAMMAR_MAX_CODEPOINT) set_add(re, &t, next, ELI_GRAMMAR_MAX_CODEPOINT);
    free(s->r);
    *s = t;
    return re->c->failed ? -1 : 0;
}

/* A GBNF class item for code point cp (escaped so any character is safe inside [ ]). */
static void sb_class_cp(sbuf *b, uint32_t cp) {
    if (cp < 0x80 && ((cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z')))
        sb_fmt(b, "%c", (char)cp);
    else if (cp <= 0xFF) sb_fmt(b, "\\x%02X", cp);
    else if (cp <= 0xFFFF) sb_fmt(b, "\\u%04X", cp);
    else sb_fmt(b, "\\U%08X", cp);
}

/* The JSON spelling of a character that a JSON string must escape. */
static void json_escape_of(uint32_t cp, char out[8]) {
    switch (cp) {
    case '"': strcpy(out, "\\\""); break;
    case '\\': strcpy(out, "\\\\"); break;
    case '\n': strcpy(out, "\\n"); break;
    case '\r': strcpy(out, "\\r"); break;
    case '\t': strcpy(out, "\\t"); break;
    case '\b': strcpy(out, "\\b"); break;
    case '\f': strcpy(out, "\\f"); break;
    default: snprintf(out, 8, "\\u%04x", cp); break;
    }
}

/* The grammar of one character from set s, as JSON writes it inside a string: the characters JSON
 * takes as they are in one class, the ones it must escape (controls, '"', '\\') as their escapes. */
static int emit_set(regex *re, const cp_set *s, sbuf *e) {
    sbuf cls = {0};
    int alts = 0;
    sb_str(e, "(");
    for (size_t i = 0; i < s->n; i++) {
        uint32_t lo = s->r[i].lo, hi = s->r[i].hi;
        for (uint32_t cp = lo; cp <= hi; cp++) {
            if (cp >= 0x20 && cp != '"' && cp != '\\') { /* a run JSON writes as it is */
                uint32_t end = cp;
                while (end < hi && end + 1 != '"' && end + 1 != '\\') end++;
                sb_class_cp(&cls, cp);
                if (end > cp) sb_str(&cls, "-"), sb_class_cp(&cls, end);
                cp = end;
                continue;
            }
            char esc[8];
            json_escape_of(cp, esc);
            sb_str(e, alts++ ? " | " : " ");
            sb_literal(e, esc, strlen(esc));
        }
    }
    if (cls.n) {
        sb_str(e, alts++ ? " | [" : " [");
        sb_put(e, cls.s, cls.n);
        sb_str(e, "]");
    }
    free(cls.s);
    sb_str(e, " )");
    if (!alts) return fail(re->c, "pattern: a character class matches nothing");
    return 0;
}

static int re_class_escape(regex *re, char e, cp_set *s) {
    switch (e) {
    case 'd': return set_add(re, s, '0', '9');
    case 'w':
        return set_add(re, s, 'a', 'z') || set_add(re, s, 'A', 'Z') || set_add(re, s, '0', '9') || set_add(re, s, '_', '_');
    case 's': return set_add(re, s, '\t', '\r') || set_add(re, s, ' ', ' ');
    default: return 1; /* not a class escape */
    }
}

/* An escaped character (after '\\'): its code point, or -1 (error reported). */
static int64_t re_escape_char(regex *re) {
    char e = re->s[re->pos++];
    switch (e) {
    case 'n': return '\n';
    case 't': return '\t';
    case 'r': return '\r';
    case 'f': return '\f';
    case 'v': return '\v';
    case '0': return 0;
    case 'u': {
        uint32_t v = 0;
        for (int i = 0; i < 4; i++) {
            char h = re->pos < re->n ? re->s[re->pos] : 0;
            int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
            if (d < 0) return fail(re->c, "pattern: \\u needs 4 hex digits"), -1;
            v = v << 4 | (uint32_t)d;
            re->pos++;
        }
        return v;
    }
    default:
        if ((unsigned char)e < 0x80 && !((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') || (e >= '0' && e <= '9')))
            return (unsigned char)e; /* an escaped punctuation character stands for itself */
        return fail(re->c, "pattern: unsupported escape \\%c", e), -1;
    }
}

/* The next literal character of the pattern (UTF-8), or -1. */
static int64_t re_char(regex *re) {
    uint32_t cp;
    int l = eli_utf8_decode((const unsigned char *)re->s + re->pos, re->n - re->pos, &cp);
    if (!l) return fail(re->c, "pattern: invalid UTF-8"), -1;
    re->pos += (size_t)l;
    return cp;
}

static int re_bracket(regex *re, sbuf *e) {
    re->pos++; /* '[' */
    int negated = re->pos < re->n && re->s[re->pos] == '^';
    if (negated) re->pos++;
    cp_set s = {0};
    int rc = 0, first = 1;
    while (!rc) {
        if (re->pos >= re->n) {
            rc = fail(re->c, "pattern: unterminated [ ]");
            break;
        }
        if (re->s[re->pos] == ']' && !first) {
            re->pos++;
            break;
        }
        first = 0;
        int64_t lo;
        if (re->s[re->pos] == '\\' && re->pos + 1 < re->n) {
            re->pos++;
            if (re_class_escape(re, re->s[re->pos], &s) == 0) {
                re->pos++;
                continue;
            }
            if (re->c->failed) {
                rc = -1;
                break;
            }
            char x = re->s[re->pos];
            if (x == 'D' || x == 'W' || x == 'S') {
                rc = fail(re->c, "pattern: \\%c inside [ ] is not supported", x);
                break;
            }
            lo = x == 'b' ? (re->pos++, '\b') : re_escape_char(re);
        } else {
            lo = re_char(re);
        }
        if (lo < 0) {
            rc = -1;
            break;
        }
        int64_t hi = lo;
        if (re->pos + 1 < re->n && re->s[re->pos] == '-' && re->s[re->pos + 1] != ']') {
            re->pos++;
            if (re->s[re->pos] == '\\' && re->pos + 1 < re->n) {
                re->pos++;
                hi = re_escape_char(re);
            } else {
                hi = re_char(re);
            }
            if (hi < 0) {
                rc = -1;
                break;
            }
            if (hi < lo) {
                rc = fail(re->c, "pattern: range runs backwards");
                break;
            }
        }
        rc = set_add(re, &s, (uint32_t)lo, (uint32_t)hi);
    }
    if (!rc) rc = set_normalize(re, &s, negated);
    if (!rc) rc = emit_set(re, &s, e);
    free(s.r);
    return rc;
}

static int re_alternatives(regex *re, sbuf *e);

/* One atom and its quantifier. */
static int re_atom(regex *re, sbuf *e) {
    char ch = re->s[re->pos];
    sbuf atom = {0};
    int rc = 0;
    if (ch == '(') {
        if (++re->depth > 64) return fail(re->c, "pattern: groups nested deeper than 64");
        re->pos++;
        if (re->pos + 1 < re->n && re->s[re->pos] == '?') {
            if (re->s[re->pos + 1] != ':') return fail(re->c, "pattern: (?%c ...) is not supported", re->s[re->pos + 1]);
            re->pos += 2;
        }
        sb_str(&atom, "(");
        rc = re_alternatives(re, &atom);
        if (!rc && (re->pos >= re->n || re->s[re->pos] != ')')) rc = fail(re->c, "pattern: missing ')'");
        re->pos++;
        re->depth--;
        sb_str(&atom, " )");
    } else if (ch == '[') {
        rc = re_bracket(re, &atom);
    } else if (ch == '.') {
        re->pos++;
        sb_str(&atom, prim(re->c, P_CHAR));
    } else if (ch == '\\' && re->pos + 1 < re->n) {
        re->pos++;
        char x = re->s[re->pos];
        cp_set s = {0};
        if (x == 'b' || x == 'B') return fail(re->c, "pattern: \\%c (word boundary) is not supported", x);
        if ((x >= '1' && x <= '9') || x == 'k') return fail(re->c, "pattern: backreferences are not supported");
        int lower = x == 'D' || x == 'W' || x == 'S';
        if (re_class_escape(re, lower ? (char)(x + 32) : x, &s) == 0) {
            re->pos++;
            rc = set_normalize(re, &s, lower);
            if (!rc) rc = emit_set(re, &s, &atom);
        } else if (!re->c->failed) {
            int64_t cp = re_escape_char(re);
            if (cp < 0 || set_add(re, &s, (uint32_t)cp, (uint32_t)cp)) rc = -1;
            else rc = emit_set(re, &s, &atom);
        } else {
            rc = -1;
        }
        free(s.r);
    } else if (ch == '*' || ch == '+' || ch == '?' || ch == '{') {
        return fail(re->c, "pattern: '%c' has nothing to repeat", ch);
    } else if (ch == '^' || ch == '$') {
        return fail(re->c, "pattern: '%c' is only supported at the start / end", ch);
    } else {
        int64_t cp = re_char(re);
        cp_set s = {0};
        if (cp < 0 || set_add(re, &s, (uint32_t)cp, (uint32_t)cp)) rc = -1;
        else rc = emit_set(re, &s, &atom);
        free(s.r);
    }
    if (rc) {
        free(atom.s);
        return rc;
    }
    sb_put(e, atom.s, atom.n);
    free(atom.s);
    /* quantifier */
    if (re->pos < re->n) {
        char q = re->s[re->pos];
        if (q == '*' || q == '+' || q == '?') {
            sb_put(e, &q, 1);
            re->pos++;
        } else if (q == '{') {
            unsigned long long m = 0, n = 0;
            int has_n = 0, ok = 0;
            size_t p = re->pos + 1, digits = 0;
            while (p < re->n && re->s[p] >= '0' && re->s[p] <= '9' && m <= MAX_COUNT) m = m * 10 + (unsigned)(re->s[p++] - '0'), digits++;
            if (digits && p < re->n && re->s[p] == '}') ok = 1, n = m, has_n = 1;
            else if (digits && p < re->n && re->s[p] == ',') {
                p++;
                size_t d2 = 0;
                while (p < re->n && re->s[p] >= '0' && re->s[p] <= '9' && n <= MAX_COUNT) n = n * 10 + (unsigned)(re->s[p++] - '0'), d2++;
                has_n = d2 > 0;
                ok = p < re->n && re->s[p] == '}';
            }
            if (!ok) return fail(re->c, "pattern: bad {m,n} repetition");
            if (m > MAX_COUNT || (has_n && (n > MAX_COUNT || n < m))) return fail(re->c, "pattern: bad repetition counts");
            re->pos = p + 1;
            sb_repeat(e, m, has_n ? n : UINT64_MAX);
        } else {
            return 0;
        }
        if (re->pos < re->n && re->s[re->pos] == '?') re->pos++; /* lazy: the same strings */
        else if (re->pos < re->n && re->s[re->pos] == '+') return fail(re->c, "pattern: possessive quantifiers are not supported");
    }
    return 0;
}

static int re_sequence(regex *re, sbuf *e) {
    int any = 0;
    while (re->pos < re->n && re->s[re->pos] != '|' && re->s[re->pos] != ')') {
        if (re->s[re->pos] == '$' && re->pos + 1 == re->n) break;
        sb_str(e, " ");
        if (re_atom(re, e)) return -1;
        any = 1;
    }
    if (!any) sb_str(e, " \"\"");
    return 0;
}

static int re_alternatives(regex *re, sbuf *e) {
    if (re_sequence(re, e)) return -1;
    while (re->pos < re->n && re->s[re->pos] == '|') {
        re->pos++;
        sb_str(e, " |");
        if (re_sequence(re, e)) return -1;
    }
    return 0;
}

static int emit_pattern(conv *c, const eli_json *pat, sbuf *body) {
    if (pat->type != ELI_JSON_STRING) return fail(c, "'pattern' must be a string");
    regex re = {c, pat->str, pat->str_len, 0, 0};
    int anchored_start = re.n && re.s[0] == '^', anchored_end = re.n && re.s[re.n - 1] == '$' &&
                                                                !(re.n >= 2 && re.s[re.n - 2] == '\\');
    if (anchored_start) re.pos = 1;
    sb_str(body, "\"\\\"\" ");
    if (!anchored_start) sb_fmt(body, "%s* ", prim(c, P_CHAR));
    sb_str(body, "(");
    if (re_alternatives(&re, body)) return -1;
    if (re.pos < re.n && re.s[re.pos] == ')') return fail(c, "pattern: unbalanced ')'");
    if (anchored_end) re.pos++;
    if (re.pos != re.n) return fail(c, "pattern: unexpected '%c'", re.s[re.pos]);
    sb_str(body, " )");
    if (!anchored_end) sb_fmt(body, " %s*", prim(c, P_CHAR));
    sb_str(body, " \"\\\"\"");
    return 0;
}

/* ---- schemas ---------------------------------------------------------------------------------- */

static int visit(conv *c, const eli_json *s, const char *hint, sbuf *expr);

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

static int visit_ref(conv *c, const eli_json *s, sbuf *expr) {
    const eli_json *ref = eli_json_get(s, "$ref");
    if (ref->type != ELI_JSON_STRING) return fail(c, "'$ref' must be a string");
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->keys[i], "$ref") && !in_list(s->keys[i], annotations, sizeof annotations / sizeof *annotations))
            return fail(c, "'%s' beside '$ref' is not supported", s->keys[i]);
    for (size_t i = 0; i < c->n_refs; i++)
        if (!strcmp(c->ref_keys[i], ref->str)) {
            sb_str(expr, c->rules[c->ref_rules[i]].name);
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
    sbuf body = {0};
    int rc = visit(c, target, c->rules[r].name, &body);
    memcpy(c->path, saved, sizeof saved);
    if (rc) {
        free(body.s);
        return -1;
    }
    c->rules[r].body = body;
    sb_str(expr, c->rules[r].name);
    return 0;
}

static int visit_object(conv *c, const eli_json *s, const char *hint, sbuf *expr) {
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
    sbuf body = {0};
    size_t n = props ? props->n : 0;
    if (n == 0) {
        if (!extra_ok) {
            if (!props && !extra) { /* {"type": "object"}: any object */
                sb_str(expr, prim(c, P_OBJECT));
                return 0;
            }
            sb_fmt(&body, "\"{\" %s \"}\"", ws);
            return emit_rule(c, hint, &body, expr);
        }
        sbuf value = {0}; /* a map: any keys, values of one schema */
        char sub[128];
        snprintf(sub, sizeof sub, "%s-value", hint);
        size_t old = path_push(c, "additionalProperties");
        int rc = extra->type == ELI_JSON_BOOL ? (sb_str(&value, prim(c, P_VALUE)), 0) : visit(c, extra, sub, &value);
        c->path[old] = '\0';
        if (rc) {
            free(value.s);
            return -1;
        }
        const char *str = prim(c, P_STRING);
        sb_fmt(&body, "\"{\" %s ( %s %s \":\" %s ", ws, str, ws, ws);
        sb_put(&body, value.s, value.n);
        sb_fmt(&body, " ( %s \",\" %s %s %s \":\" %s ", ws, ws, str, ws, ws);
        sb_put(&body, value.s, value.n);
        sb_fmt(&body, " )* %s )? \"}\"", ws);
        free(value.s);
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
        sbuf pair = {0}, value = {0};
        char sub[160];
        snprintf(sub, sizeof sub, "%s-%s", hint, props->keys[i]);
        size_t old = path_push(c, "properties");
        path_push(c, props->keys[i]);
        rc = visit(c, &props->items[i], sub, &value);
        c->path[old] = '\0';
        if (!rc) {
            char *q = eli_json_quote(props->keys[i], strlen(props->keys[i]));
            if (!q) rc = oom(c);
            else sb_literal(&pair, q, strlen(q));
            free(q);
            sb_fmt(&pair, " %s \":\" %s ", ws, ws);
            sb_put(&pair, value.s, value.n);
            sbuf name = {0};
            snprintf(sub, sizeof sub, "%s-%s-kv", hint, props->keys[i]);
            if (!rc) rc = emit_rule(c, sub, &pair, &name);
            kv[i] = name.s;
        }
        free(value.s);
        free(pair.s);
    }
    char *rest = NULL, *first = NULL; /* rule names of rest_{i+1}, first_{i+1} */
    for (size_t i = n; i-- > 0 && !rc;) {
        sbuf b = {0}, name = {0};
        char sub[160];
        if (i + 1 < n) { /* rest_{i+1} is only needed when something follows property i */
            sb_fmt(&b, required[i + 1] ? "%s \",\" %s %s" : "( %s \",\" %s %s )?", ws, ws, kv[i + 1]);
            if (rest) sb_fmt(&b, " %s", rest);
            snprintf(sub, sizeof sub, "%s-rest", hint);
            rc = emit_rule(c, sub, &b, &name);
            free(rest);
            rest = name.s;
            memset(&name, 0, sizeof name);
        }
        if (rc) break;
        sb_str(&b, kv[i]);
        if (i + 1 < n) sb_fmt(&b, " %s", rest);
        if (!required[i] && first) sb_fmt(&b, " | %s", first);
        snprintf(sub, sizeof sub, "%s-first", hint);
        rc = emit_rule(c, sub, &b, &name);
        free(first);
        first = name.s;
    }
    int any_required = 0;
    for (size_t i = 0; i < n; i++) any_required |= required[i];
    if (!rc) {
        if (any_required) sb_fmt(&body, "\"{\" %s %s %s \"}\"", ws, first, ws);
        else sb_fmt(&body, "\"{\" %s ( %s %s )? \"}\"", ws, first, ws);
        rc = emit_rule(c, hint, &body, expr);
    }
    for (size_t i = 0; kv && i < n; i++) free(kv[i]);
    free(kv);
    free(required);
    free(rest);
    free(first);
    return rc;
}

static int visit_array(conv *c, const eli_json *s, const char *hint, sbuf *expr) {
    const eli_json *items = eli_json_get(s, "items");
    uint64_t min, max;
    if (get_count(c, s, "minItems", 0, &min) || get_count(c, s, "maxItems", UINT64_MAX, &max)) return -1;
    if (max < min) return fail(c, "'maxItems' is below 'minItems'");
    if (items && items->type == ELI_JSON_ARRAY) return fail(c, "'items' as an array (tuple) is not supported");
    if (!items && min == 0 && max == UINT64_MAX) {
        sb_str(expr, prim(c, P_ARRAY));
        return 0;
    }
    const char *ws = prim(c, P_WS);
    sbuf item = {0}, body = {0};
    char sub[128];
    snprintf(sub, sizeof sub, "%s-item", hint);
    size_t old = path_push(c, "items");
    int rc = items ? visit(c, items, sub, &item) : (sb_str(&item, prim(c, P_VALUE)), 0);
    c->path[old] = '\0';
    if (rc) {
        free(item.s);
        return -1;
    }
    if (max == 0) {
        sb_fmt(&body, "\"[\" %s \"]\"", ws);
    } else {
        sb_fmt(&body, "\"[\" %s %s", ws, min == 0 ? "( " : "");
        sb_put(&body, item.s, item.n);
        if (max != 1) {
            sb_fmt(&body, " ( %s \",\" %s ", ws, ws);
            sb_put(&body, item.s, item.n);
            sb_str(&body, " )");
            sb_repeat(&body, min ? min - 1 : 0, max == UINT64_MAX ? UINT64_MAX : max - 1);
        }
        sb_fmt(&body, " %s %s\"]\"", ws, min == 0 ? ")? " : "");
    }
    free(item.s);
    return emit_rule(c, hint, &body, expr);
}

static int visit_string(conv *c, const eli_json *s, const char *hint, sbuf *expr) {
    uint64_t min, max;
    const eli_json *pat = eli_json_get(s, "pattern");
    if (get_count(c, s, "minLength", 0, &min) || get_count(c, s, "maxLength", UINT64_MAX, &max)) return -1;
    if (max < min) return fail(c, "'maxLength' is below 'minLength'");
    sbuf body = {0};
    if (pat) {
        if (eli_json_get(s, "minLength") || eli_json_get(s, "maxLength"))
            return fail(c, "'pattern' together with 'minLength' / 'maxLength' is not supported");
        if (emit_pattern(c, pat, &body)) {
            free(body.s);
            return -1;
        }
        return emit_rule(c, hint, &body, expr);
    }
    if (min == 0 && max == UINT64_MAX) {
        sb_str(expr, prim(c, P_STRING));
        return 0;
    }
    sb_fmt(&body, "\"\\\"\" %s", prim(c, P_CHAR));
    sb_repeat(&body, min, max);
    sb_str(&body, " \"\\\"\"");
    return emit_rule(c, hint, &body, expr);
}

/* The schema for one type name. */
static int visit_type(conv *c, const eli_json *s, const char *type, const char *hint, sbuf *expr) {
    if (!strcmp(type, "object")) return visit_object(c, s, hint, expr);
    if (!strcmp(type, "array")) return visit_array(c, s, hint, expr);
    if (!strcmp(type, "string")) return visit_string(c, s, hint, expr);
    int p = !strcmp(type, "number") ? P_NUMBER : !strcmp(type, "integer") ? P_INTEGER : !strcmp(type, "boolean") ? P_BOOLEAN
            : !strcmp(type, "null")                                                                         ? P_NULL
                                                                                                            : -1;
    if (p < 0) return fail(c, "unknown type '%s'", type);
    sb_str(expr, prim(c, p));
    return 0;
}

static int visit_alternatives(conv *c, const eli_json *list, const char *key, const char *hint, sbuf *expr) {
    if (list->type != ELI_JSON_ARRAY || list->n == 0) return fail(c, "'%s' must be a non-empty array of schemas", key);
    sbuf body = {0};
    for (size_t i = 0; i < list->n; i++) {
        char sub[128], idx[48];
        snprintf(sub, sizeof sub, "%s-%zu", hint, i);
        snprintf(idx, sizeof idx, "%s/%zu", key, i);
        size_t old = path_push(c, idx);
        if (i) sb_str(&body, " | ");
        int rc = visit(c, &list->items[i], sub, &body);
        c->path[old] = '\0';
        if (rc) {
            free(body.s);
            return -1;
        }
    }
    return emit_rule(c, hint, &body, expr);
}

static int visit_schema(conv *c, const eli_json *s, const char *hint, sbuf *expr);

static int visit(conv *c, const eli_json *s, const char *hint, sbuf *expr) {
    if (c->failed) return -1;
    c->depth++;
    int rc = visit_schema(c, s, hint, expr);
    c->depth--;
    return rc;
}

static int visit_schema(conv *c, const eli_json *s, const char *hint, sbuf *expr) {
    if (s->type == ELI_JSON_BOOL) {
        if (!s->boolean) return fail(c, "the schema false matches nothing");
        sb_str(expr, prim(c, P_VALUE));
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
        sbuf body = {0};
        for (size_t i = 0; i < en->n; i++) {
            if (i) sb_str(&body, " | ");
            if (emit_constant(c, &en->items[i], &body)) {
                free(body.s);
                return -1;
            }
        }
        return emit_rule(c, hint, &body, expr);
    }
    if (type && type->type == ELI_JSON_ARRAY) {
        if (type->n == 0) return fail(c, "'type' must not be an empty list");
        sbuf body = {0};
        for (size_t i = 0; i < type->n; i++) {
            if (type->items[i].type != ELI_JSON_STRING) {
                free(body.s);
                return fail(c, "'type' must be a string or a list of strings");
            }
            char sub[128];
            snprintf(sub, sizeof sub, "%s-%s", hint, type->items[i].str);
            if (i) sb_str(&body, " | ");
            if (visit_type(c, s, type->items[i].str, sub, &body)) {
                free(body.s);
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
    sb_str(expr, prim(c, P_VALUE));
    return 0;
}

int eli_json_schema_to_gbnf(const char *schema, size_t len, char **out, eli_error *err) {
    *out = NULL;
    eli_error jerr = {0};
    eli_json *root = eli_json_parse(schema, len, &jerr);
    if (!root) return eli_fail(err, jerr.code, "JSON schema: %s", jerr.msg);
    conv c = {.root = root, .err = err, .path = "#"};
    sbuf top = {0};
    int rc = visit(&c, root, "root", &top);
    sbuf g = {0};
    if (!rc) {
        /* root first (an alias when the top schema is a shared rule or a $ref), then the rest in order */
        size_t r0 = SIZE_MAX;
        for (size_t i = 0; i < c.n_rules; i++)
            if (!strcmp(c.rules[i].name, "root")) r0 = i;
        if (r0 == SIZE_MAX) sb_fmt(&g, "root ::= %s\n", top.s);
        for (size_t k = 0; k <= c.n_rules; k++) {
            size_t i = k == 0 ? r0 : k - 1;
            if (i == SIZE_MAX || (k > 0 && i == r0)) continue;
            sb_fmt(&g, "%s ::= ", c.rules[i].name);
            sb_put(&g, c.rules[i].body.s ? c.rules[i].body.s : "", c.rules[i].body.n);
            sb_str(&g, "\n");
        }
        unsigned used = c.prims_used;
        for (int changed = 1; changed;) { /* close over the shared rules' own uses */
            changed = 0;
            for (int p = 0; p < P_COUNT; p++)
                if ((used >> p & 1) && (used | prims[p].deps) != used) used |= prims[p].deps, changed = 1;
        }
        for (int p = 0; p < P_COUNT; p++)
            if (used >> p & 1) sb_fmt(&g, "%s ::= %s\n", prims[p].name, prims[p].body);
        if (g.oom) rc = oom(&c);
    }
    for (size_t i = 0; i < c.n_rules; i++) {
        free(c.rules[i].name);
        free(c.rules[i].body.s);
    }
    for (size_t i = 0; i < c.n_refs; i++) free(c.ref_keys[i]);
    free(c.rules);
    free(c.ref_keys);
    free(c.ref_rules);
    eli_json_free(root);
    if (!rc && top.oom) rc = oom(&c);
    free(top.s);
    if (rc) {
        free(g.s);
        return c.code;
    }
    *out = g.s;
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
