/* Strict RFC 8259 JSON parser (recursive descent into a small DOM) and string escaper.
 *
 * The input is untrusted (CLI files, bundle manifests), so the parser:
 *   - limits nesting depth (ELI_JSON_MAX_DEPTH) so recursion cannot exhaust the stack;
 *   - validates UTF-8 everywhere it can appear (inside strings; anything else must be ASCII grammar),
 *     rejecting overlong forms, UTF-16 surrogates encoded in UTF-8 and code points above U+10FFFF;
 *   - rejects raw control characters (< 0x20) in strings, lone or mis-ordered \u surrogates, and
 *     anything the grammar does not allow (leading zeros, "+1", ".5", trailing commas, NaN, comments);
 *   - checks every size computation so a huge input fails with OOM instead of wrapping.
 * The only leniency is a leading UTF-8 byte order mark, which RFC 8259 section 8.1 lets parsers ignore.
 *
 * Extension to json.h: a NUMBER also keeps its literal text in str / str_len (e.g. "1.0", "-0", "1e2"),
 * because some consumers must tell an integer literal from a float one, as Python's json module does
 * (the chat template prints 1 and 1.0 differently), or need integers beyond 2^53 exactly. */
#include "json.h"

#include <errno.h>
#include <locale.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define ELI_JSON_MAX_DEPTH 128

typedef struct {
    const char *s;
    size_t len;
    size_t pos;
    eli_error *err;
} parser;

static int fail_at(parser *p, size_t at, int code, const char *what) {
    return eli_fail(p->err, code, "JSON parse error at byte %zu: %s", at, what);
}

static void skip_ws(parser *p) {
    while (p->pos < p->len) {
        char c = p->s[p->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
        p->pos++;
    }
}

/* Frees what a value owns (not the value struct itself, which lives in its parent's items array). */
static void free_contents(eli_json *v) {
    if (!v) return;
    switch (v->type) {
    case ELI_JSON_STRING:
    case ELI_JSON_NUMBER: free(v->str); break;
    case ELI_JSON_ARRAY:
    case ELI_JSON_OBJECT:
        for (size_t i = 0; i < v->n; i++) {
            free_contents(&v->items[i]);
            if (v->keys) free(v->keys[i]);
        }
        free(v->items);
        free(v->keys);
        break;
    default: break;
    }
    memset(v, 0, sizeof *v);
}

void eli_json_free(eli_json *v) {
    if (!v) return;
    free_contents(v);
    free(v);
}

/* ---- strings ---------------------------------------------------------------------------------- */

/* Length of the valid UTF-8 sequence starting at s[0] (at most avail bytes), or 0 if invalid.
 * Follows the well-formed byte table of Unicode 15 section 3.9 (table 3-7). */
static size_t utf8_valid_len(const unsigned char *s, size_t avail) {
    unsigned char c = s[0];
    if (c < 0x80) return 1;
    size_t need;
    unsigned char lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
    if (c >= 0xC2 && c <= 0xDF) need = 2;
    else if (c == 0xE0) need = 3, lo = 0xA0;            /* no overlong 3-byte forms */
    else if (c >= 0xE1 && c <= 0xEC) need = 3;
    else if (c == 0xED) need = 3, hi = 0x9F;            /* no UTF-16 surrogates U+D800..DFFF */
    else if (c >= 0xEE && c <= 0xEF) need = 3;
    else if (c == 0xF0) need = 4, lo = 0x90;            /* no overlong 4-byte forms */
    else if (c >= 0xF1 && c <= 0xF3) need = 4;
    else if (c == 0xF4) need = 4, hi = 0x8F;            /* nothing above U+10FFFF */
    else return 0;                                      /* 0x80..0xC1 and 0xF5..0xFF never lead */
    if (avail < need) return 0;
    if (s[1] < lo || s[1] > hi) return 0;
    for (size_t i = 2; i < need; i++)
        if (s[i] < 0x80 || s[i] > 0xBF) return 0;
    return need;
}

static size_t utf8_encode(uint32_t cp, char *out) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

static int hex4(const char *s, uint32_t *out) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        char c = s[i];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (uint32_t)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (uint32_t)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (uint32_t)(c - 'A' + 10);
        else return -1;
    }
    *out = v;
    return 0;
}

/* Parses a string literal at p->pos (which is at the opening quote). Two passes: the first validates
 * and finds the closing quote, which bounds the output size (an escape never expands: "\uXXXX" is 6
 * bytes for at most 3 UTF-8 bytes, a surrogate pair is 12 bytes for 4), the second decodes. */
static int parse_string(parser *p, char **out, size_t *out_len) {
    size_t start = p->pos; /* opening quote */
    size_t i = start + 1;
    const unsigned char *u = (const unsigned char *)p->s;
    for (;;) {
        if (i >= p->len) return fail_at(p, start, ELI_ERR_INVALID_ARG, "unterminated string");
        unsigned char c = u[i];
        if (c == '"') break;
        if (c < 0x20) return fail_at(p, i, ELI_ERR_INVALID_ARG, "raw control character in string");
        if (c == '\\') {
            if (i + 1 >= p->len) return fail_at(p, start, ELI_ERR_INVALID_ARG, "unterminated string");
            char e = p->s[i + 1];
            if (e == 'u') {
                uint32_t cp;
                if (i + 6 > p->len || hex4(p->s + i + 2, &cp))
                    return fail_at(p, i, ELI_ERR_INVALID_ARG, "bad \\u escape (need 4 hex digits)");
                if (cp >= 0xDC00 && cp <= 0xDFFF)
                    return fail_at(p, i, ELI_ERR_INVALID_ARG, "lone low surrogate in \\u escape");
                if (cp >= 0xD800 && cp <= 0xDBFF) {
                    uint32_t lo;
                    if (i + 12 > p->len || p->s[i + 6] != '\\' || p->s[i + 7] != 'u' || hex4(p->s + i + 8, &lo) ||
                        lo < 0xDC00 || lo > 0xDFFF)
                        return fail_at(p, i, ELI_ERR_INVALID_ARG, "high surrogate not followed by a low surrogate");
                    i += 12;
                } else {
                    i += 6;
                }
                continue;
            }
            if (!strchr("\"\\/bfnrt", e) || e == '\0')
                return fail_at(p, i, ELI_ERR_INVALID_ARG, "invalid escape character");
            i += 2;
            continue;
        }
        size_t n = utf8_valid_len(u + i, p->len - i);
        if (!n) return fail_at(p, i, ELI_ERR_INVALID_ARG, "invalid UTF-8 in string");
        i += n;
    }
    size_t end = i; /* closing quote */
    char *buf = malloc(end - start); /* content length + 1 for the NUL, at most */
    if (!buf) return fail_at(p, start, ELI_ERR_OOM, "out of memory");
    size_t o = 0;
    for (i = start + 1; i < end;) {
        char c = p->s[i];
        if (c != '\\') {
            buf[o++] = c;
            i++;
            continue;
        }
        char e = p->s[i + 1];
        switch (e) {
        case '"': buf[o++] = '"'; break;
        case '\\': buf[o++] = '\\'; break;
        case '/': buf[o++] = '/'; break;
        case 'b': buf[o++] = '\b'; break;
        case 'f': buf[o++] = '\f'; break;
        case 'n': buf[o++] = '\n'; break;
        case 'r': buf[o++] = '\r'; break;
        case 't': buf[o++] = '\t'; break;
        default: { /* 'u', validated above */
            uint32_t cp = 0, lo = 0;
            hex4(p->s + i + 2, &cp);
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                hex4(p->s + i + 8, &lo);
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                i += 6;
            }
            o += utf8_encode(cp, buf + o);
            i += 6;
            continue;
        }
        }
        i += 2;
    }
    buf[o] = '\0';
    *out = buf;
    *out_len = o;
    p->pos = end + 1;
    return ELI_OK;
}

/* ---- numbers ---------------------------------------------------------------------------------- */

/* number = [ "-" ] int [ frac ] [ exp ];  int = "0" / digit1-9 *DIGIT. The span is validated by hand,
 * then converted with strtod on a NUL-terminated copy (the input need not be NUL-terminated, and strtod
 * alone would accept hex, "inf", leading '+' and so on). */
static int parse_number(parser *p, eli_json *v) {
    size_t start = p->pos, i = p->pos;
    const char *s = p->s;
#define DIGIT(k) ((k) < p->len && s[k] >= '0' && s[k] <= '9')
    if (i < p->len && s[i] == '-') i++;
    if (!DIGIT(i)) return fail_at(p, i, ELI_ERR_INVALID_ARG, "invalid number");
    if (s[i] == '0') {
        i++;
        if (DIGIT(i)) return fail_at(p, i, ELI_ERR_INVALID_ARG, "leading zero in number");
    } else {
        while (DIGIT(i)) i++;
    }
    if (i < p->len && s[i] == '.') {
        i++;
        if (!DIGIT(i)) return fail_at(p, i, ELI_ERR_INVALID_ARG, "expected digit after decimal point");
        while (DIGIT(i)) i++;
    }
    if (i < p->len && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < p->len && (s[i] == '+' || s[i] == '-')) i++;
        if (!DIGIT(i)) return fail_at(p, i, ELI_ERR_INVALID_ARG, "expected digit in exponent");
        while (DIGIT(i)) i++;
    }
#undef DIGIT
    size_t n = i - start;
    char *lit = malloc(n + 1); /* kept as v->str, see the note at eli_json_parse */
    char small[64];
    char *tmp = n < sizeof small ? small : malloc(n + 1);
    if (!lit || !tmp) {
        free(lit);
        if (tmp != small) free(tmp);
        return fail_at(p, start, ELI_ERR_OOM, "out of memory");
    }
    memcpy(lit, s + start, n);
    lit[n] = '\0';
    memcpy(tmp, lit, n + 1);
    /* strtod honours LC_NUMERIC: if the host application switched to a locale with a ',' decimal
     * separator, swap the '.' so the same text still parses. */
    const char *dp = localeconv()->decimal_point;
    if (dp && dp[0] && dp[0] != '.' && !dp[1]) {
        char *dot = strchr(tmp, '.');
        if (dot) *dot = dp[0];
    }
    errno = 0;
    char *end;
    double d = strtod(tmp, &end);
    int bad = (size_t)(end - tmp) != n;
    if (tmp != small) free(tmp);
    /* A finite literal that overflows a double has no faithful value; underflow to 0 is fine. */
    if (bad || isinf(d)) {
        free(lit);
        return fail_at(p, start, ELI_ERR_INVALID_ARG, bad ? "invalid number" : "number out of range");
    }
    v->number = d;
    v->str = lit;
    v->str_len = n;
    p->pos = i;
    return ELI_OK;
}

/* ---- values ----------------------------------------------------------------------------------- */

static int parse_value(parser *p, eli_json *v, int depth);

/* Appends one zeroed slot to a container; grows geometrically. */
static eli_json *push_item(parser *p, eli_json *v, size_t *cap, int with_key) {
    if (v->n == *cap) {
        size_t nc = *cap ? *cap * 2 : 4;
        if (nc > SIZE_MAX / sizeof(eli_json)) return NULL;
        eli_json *items = realloc(v->items, nc * sizeof *items);
        if (!items) return NULL;
        v->items = items;
        if (with_key) {
            char **keys = realloc(v->keys, nc * sizeof *keys);
            if (!keys) return NULL;
            v->keys = keys;
        }
        *cap = nc;
    }
    (void)p;
    eli_json *slot = &v->items[v->n];
    memset(slot, 0, sizeof *slot);
    if (with_key) v->keys[v->n] = NULL;
    v->n++;
    return slot;
}

static int parse_container(parser *p, eli_json *v, int depth, int is_object) {
    if (depth >= ELI_JSON_MAX_DEPTH) return fail_at(p, p->pos, ELI_ERR_INVALID_ARG, "nesting too deep");
    char close = is_object ? '}' : ']';
    v->type = is_object ? ELI_JSON_OBJECT : ELI_JSON_ARRAY;
    p->pos++; /* opening bracket */
    size_t cap = 0;
    skip_ws(p);
    if (p->pos < p->len && p->s[p->pos] == close) {
        p->pos++;
        return ELI_OK;
    }
    for (;;) {
        skip_ws(p);
        eli_json *slot = push_item(p, v, &cap, is_object);
        if (!slot) return fail_at(p, p->pos, ELI_ERR_OOM, "out of memory");
        if (is_object) {
            if (p->pos >= p->len || p->s[p->pos] != '"')
                return fail_at(p, p->pos, ELI_ERR_INVALID_ARG, "expected string key");
            size_t klen;
            int rc = parse_string(p, &v->keys[v->n - 1], &klen);
            if (rc) return rc;
            skip_ws(p);
            if (p->pos >= p->len || p->s[p->pos] != ':')
                return fail_at(p, p->pos, ELI_ERR_INVALID_ARG, "expected ':' after key");
            p->pos++;
            skip_ws(p);
        }
        int rc = parse_value(p, slot, depth + 1);
        if (rc) return rc;
        skip_ws(p);
        if (p->pos >= p->len)
            return fail_at(p, p->pos, ELI_ERR_INVALID_ARG, is_object ? "unterminated object" : "unterminated array");
        char c = p->s[p->pos];
        if (c == ',') {
            p->pos++;
            continue;
        }
        if (c == close) {
            p->pos++;
            return ELI_OK;
        }
        return fail_at(p, p->pos, ELI_ERR_INVALID_ARG, is_object ? "expected ',' or '}'" : "expected ',' or ']'");
    }
}

static int match_literal(parser *p, const char *lit) {
    size_t n = strlen(lit);
    if (p->len - p->pos < n || memcmp(p->s + p->pos, lit, n)) return 0;
    p->pos += n;
    return 1;
}

static int parse_value(parser *p, eli_json *v, int depth) {
    if (p->pos >= p->len) return fail_at(p, p->pos, ELI_ERR_INVALID_ARG, "unexpected end of input");
    char c = p->s[p->pos];
    switch (c) {
    case '{': return parse_container(p, v, depth, 1);
    case '[': return parse_container(p, v, depth, 0);
    case '"':
        v->type = ELI_JSON_STRING;
        return parse_string(p, &v->str, &v->str_len);
    case 't':
    case 'f':
    case 'n':
        if (match_literal(p, "true")) {
            v->type = ELI_JSON_BOOL;
            v->boolean = 1;
        } else if (match_literal(p, "false")) {
            v->type = ELI_JSON_BOOL;
            v->boolean = 0;
        } else if (match_literal(p, "null")) {
            v->type = ELI_JSON_NULL;
        } else {
            return fail_at(p, p->pos, ELI_ERR_INVALID_ARG, "invalid literal");
        }
        return ELI_OK;
    default:
        if (c == '-' || (c >= '0' && c <= '9')) {
            v->type = ELI_JSON_NUMBER;
            return parse_number(p, v);
        }
        return fail_at(p, p->pos, ELI_ERR_INVALID_ARG, "unexpected character");
    }
}

eli_json *eli_json_parse(const char *text, size_t len, eli_error *err) {
    if (!text && len) {
        eli_fail(err, ELI_ERR_INVALID_ARG, "JSON parse error: NULL text");
        return NULL;
    }
    parser p = {text ? text : "", len, 0, err};
    if (len >= 3 && !memcmp(text, "\xEF\xBB\xBF", 3)) p.pos = 3;
    eli_json *root = calloc(1, sizeof *root);
    if (!root) {
        eli_fail(err, ELI_ERR_OOM, "JSON parse error: out of memory");
        return NULL;
    }
    skip_ws(&p);
    int rc = parse_value(&p, root, 0);
    if (!rc) {
        skip_ws(&p);
        if (p.pos != p.len) rc = fail_at(&p, p.pos, ELI_ERR_INVALID_ARG, "trailing characters after value");
    }
    if (rc) {
        eli_json_free(root);
        return NULL;
    }
    return root;
}

/* ---- accessors -------------------------------------------------------------------------------- */

const eli_json *eli_json_get(const eli_json *v, const char *key) {
    if (!v || v->type != ELI_JSON_OBJECT || !key) return NULL;
    for (size_t i = 0; i < v->n; i++)
        if (!strcmp(v->keys[i], key)) return &v->items[i];
    return NULL;
}

const char *eli_json_get_str(const eli_json *v, const char *key) {
    const eli_json *m = eli_json_get(v, key);
    return m && m->type == ELI_JSON_STRING ? m->str : NULL;
}

int eli_json_get_bool(const eli_json *v, const char *key, int dflt) {
    const eli_json *m = eli_json_get(v, key);
    return m && m->type == ELI_JSON_BOOL ? m->boolean : dflt;
}

/* ---- quoting ---------------------------------------------------------------------------------- */

/* Escapes '"', '\\' and control characters (< 0x20, as \u00XX); valid UTF-8 passes through unchanged.
 * Each byte of an invalid UTF-8 sequence becomes \ufffd, so the result is always valid JSON. */
char *eli_json_quote(const char *s, size_t len) {
    if (!s) len = 0;
    /* Worst case is 6 output bytes per input byte ("\u00XX" or "\ufffd"), plus quotes and NUL. */
    if (len > (SIZE_MAX - 3) / 6) return NULL;
    char *out = malloc(len * 6 + 3);
    if (!out) return NULL;
    static const char hex[] = "0123456789abcdef";
    const unsigned char *u = (const unsigned char *)s;
    size_t o = 0;
    out[o++] = '"';
    for (size_t i = 0; i < len;) {
        unsigned char c = u[i];
        if (c == '"' || c == '\\') {
            out[o++] = '\\';
            out[o++] = (char)c;
            i++;
        } else if (c < 0x20) {
            memcpy(out + o, "\\u00", 4);
            out[o + 4] = hex[c >> 4];
            out[o + 5] = hex[c & 15];
            o += 6;
            i++;
        } else {
            size_t n = utf8_valid_len(u + i, len - i);
            if (n) {
                memcpy(out + o, s + i, n);
                o += n;
                i += n;
            } else {
                memcpy(out + o, "\\ufffd", 6);
                o += 6;
                i++;
            }
        }
    }
    out[o++] = '"';
    out[o] = '\0';
    return out;
}
