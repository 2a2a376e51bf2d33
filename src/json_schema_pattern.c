/* JSON schema "pattern" -> GBNF (json_schema_pattern.h): a recursive-descent reading of the regex
 * subset that writes the grammar as it goes. Character sets are kept as code point ranges until they
 * are written, so negation and the characters JSON must escape are handled exactly. */
#include "json_schema_pattern.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar.h"
#include "utf8.h"

typedef struct {
    const char *s;
    size_t n, pos;
    int depth;
    const char *char_rule; /* the rule of one JSON string character ('.' and the unanchored ends) */
    int used_char, failed, oom;
    char *why;
    size_t why_len;
} regex;

static int fail(regex *re, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static int fail(regex *re, const char *fmt, ...) {
    if (!re->failed) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(re->why, re->why_len, fmt, ap);
        va_end(ap);
        re->failed = 1;
    }
    return -1;
}

static int oom(regex *re) {
    re->oom = 1;
    return fail(re, "out of memory");
}

static const char *char_rule(regex *re) {
    re->used_char = 1;
    return re->char_rule;
}

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
        if (!r) return oom(re);
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
    return re->failed ? -1 : 0;
}

/* A GBNF class item for code point cp (escaped so any character is safe inside [ ]). */
static void sb_class_cp(eli_strbuf *b, uint32_t cp) {
    if (cp < 0x80 && ((cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z')))
        eli_sb_printf(b, "%c", (char)cp);
    else if (cp <= 0xFF) eli_sb_printf(b, "\\x%02X", cp);
    else if (cp <= 0xFFFF) eli_sb_printf(b, "\\u%04X", cp);
    else eli_sb_printf(b, "\\U%08X", cp);
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
static int emit_set(regex *re, const cp_set *s, eli_strbuf *e) {
    eli_strbuf cls = {0};
    int alts = 0;
    eli_sb_puts(e, "(");
    for (size_t i = 0; i < s->n; i++) {
        uint32_t lo = s->r[i].lo, hi = s->r[i].hi;
        for (uint32_t cp = lo; cp <= hi; cp++) {
            if (cp >= 0x20 && cp != '"' && cp != '\\') { /* a run JSON writes as it is */
                uint32_t end = cp;
                while (end < hi && end + 1 != '"' && end + 1 != '\\') end++;
                sb_class_cp(&cls, cp);
                if (end > cp) eli_sb_puts(&cls, "-"), sb_class_cp(&cls, end);
                cp = end;
                continue;
            }
            char esc[8];
            json_escape_of(cp, esc);
            eli_sb_puts(e, alts++ ? " | " : " ");
            eli_sb_gbnf_literal(e, esc, strlen(esc));
        }
    }
    if (cls.n) {
        eli_sb_puts(e, alts++ ? " | [" : " [");
        eli_sb_put(e, cls.p, cls.n);
        eli_sb_puts(e, "]");
    }
    free(cls.p);
    eli_sb_puts(e, " )");
    if (!alts) return fail(re, "pattern: a character class matches nothing");
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
            if (d < 0) return fail(re, "pattern: \\u needs 4 hex digits"), -1;
            v = v << 4 | (uint32_t)d;
            re->pos++;
        }
        return v;
    }
    default:
        if ((unsigned char)e < 0x80 && !((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') || (e >= '0' && e <= '9')))
            return (unsigned char)e; /* an escaped punctuation character stands for itself */
        return fail(re, "pattern: unsupported escape \\%c", e), -1;
    }
}

/* The next literal character of the pattern (UTF-8), or -1. */
static int64_t re_char(regex *re) {
    uint32_t cp;
    int l = eli_utf8_decode((const unsigned char *)re->s + re->pos, re->n - re->pos, &cp);
    if (!l) return fail(re, "pattern: invalid UTF-8"), -1;
    re->pos += (size_t)l;
    return cp;
}

static int re_bracket(regex *re, eli_strbuf *e) {
    re->pos++; /* '[' */
    int negated = re->pos < re->n && re->s[re->pos] == '^';
    if (negated) re->pos++;
    cp_set s = {0};
    int rc = 0, first = 1;
    while (!rc) {
        if (re->pos >= re->n) {
            rc = fail(re, "pattern: unterminated [ ]");
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
            if (re->failed) {
                rc = -1;
                break;
            }
            char x = re->s[re->pos];
            if (x == 'D' || x == 'W' || x == 'S') {
                rc = fail(re, "pattern: \\%c inside [ ] is not supported", x);
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
                rc = fail(re, "pattern: range runs backwards");
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

static int re_alternatives(regex *re, eli_strbuf *e, int *has_empty);

/* A quantifier at re->pos, if any: *min, *max (UINT64_MAX: none); 0 none, 1 one, -1 error. */
static int re_quantifier(regex *re, uint64_t *min, uint64_t *max) {
    if (re->pos >= re->n) return 0;
    char q = re->s[re->pos];
    if (q == '*' || q == '+' || q == '?') {
        *min = q == '+';
        *max = q == '?' ? 1 : UINT64_MAX;
        re->pos++;
    } else if (q == '{') {
        uint64_t m = 0, n = 0;
        int has_n = 0, ok = 0;
        size_t p = re->pos + 1, digits = 0;
        while (p < re->n && re->s[p] >= '0' && re->s[p] <= '9' && m <= ELI_GRAMMAR_MAX_REPEAT) m = m * 10 + (unsigned)(re->s[p++] - '0'), digits++;
        if (digits && p < re->n && re->s[p] == '}') ok = 1, n = m, has_n = 1;
        else if (digits && p < re->n && re->s[p] == ',') {
            p++;
            size_t d2 = 0;
            while (p < re->n && re->s[p] >= '0' && re->s[p] <= '9' && n <= ELI_GRAMMAR_MAX_REPEAT) n = n * 10 + (unsigned)(re->s[p++] - '0'), d2++;
            has_n = d2 > 0;
            ok = p < re->n && re->s[p] == '}';
        }
        if (!ok) return fail(re, "pattern: bad {m,n} repetition");
        if (m > ELI_GRAMMAR_MAX_REPEAT || (has_n && (n > ELI_GRAMMAR_MAX_REPEAT || n < m))) return fail(re, "pattern: bad repetition counts");
        re->pos = p + 1;
        *min = m;
        *max = has_n ? n : UINT64_MAX;
    } else {
        return 0;
    }
    if (re->pos < re->n && re->s[re->pos] == '?') re->pos++; /* lazy: the same strings */
    else if (re->pos < re->n && re->s[re->pos] == '+') return fail(re, "pattern: possessive quantifiers are not supported");
    return 1;
}

/* One atom and its quantifier; *wrote: whether it added anything (a group of empty alternatives does
 * not). A group with an empty alternative is written without it and made optional instead, and a
 * repeated one repeats its non-empty part from zero times: a repeated item that can be empty by
 * itself would be left recursion to the GBNF parser ((|a)+ is a*). */
static int re_atom(regex *re, eli_strbuf *e, int *wrote) {
    char ch = re->s[re->pos];
    eli_strbuf atom = {0};
    int rc = 0, optional = 0;
    *wrote = 1;
    if (ch == '(') {
        if (++re->depth > 64) return fail(re, "pattern: groups nested deeper than 64");
        re->pos++;
        if (re->pos + 1 < re->n && re->s[re->pos] == '?') {
            if (re->s[re->pos + 1] != ':') return fail(re, "pattern: (?%c ...) is not supported", re->s[re->pos + 1]);
            re->pos += 2;
        }
        eli_sb_puts(&atom, "(");
        int n_alts = re_alternatives(re, &atom, &optional);
        rc = n_alts < 0 ? -1 : 0;
        if (!rc && (re->pos >= re->n || re->s[re->pos] != ')')) rc = fail(re, "pattern: missing ')'");
        re->pos++;
        re->depth--;
        eli_sb_puts(&atom, " )");
        if (!rc && n_alts == 0) *wrote = 0;
    } else if (ch == '[') {
        rc = re_bracket(re, &atom);
    } else if (ch == '.') {
        re->pos++;
        eli_sb_puts(&atom, char_rule(re));
    } else if (ch == '\\' && re->pos + 1 < re->n) {
        re->pos++;
        char x = re->s[re->pos];
        cp_set s = {0};
        if (x == 'b' || x == 'B') return fail(re, "pattern: \\%c (word boundary) is not supported", x);
        if ((x >= '1' && x <= '9') || x == 'k') return fail(re, "pattern: backreferences are not supported");
        int lower = x == 'D' || x == 'W' || x == 'S';
        if (re_class_escape(re, lower ? (char)(x + 32) : x, &s) == 0) {
            re->pos++;
            rc = set_normalize(re, &s, lower);
            if (!rc) rc = emit_set(re, &s, &atom);
        } else if (!re->failed) {
            int64_t cp = re_escape_char(re);
            if (cp < 0 || set_add(re, &s, (uint32_t)cp, (uint32_t)cp)) rc = -1;
            else rc = emit_set(re, &s, &atom);
        } else {
            rc = -1;
        }
        free(s.r);
    } else if (ch == '*' || ch == '+' || ch == '?' || ch == '{') {
        return fail(re, "pattern: '%c' has nothing to repeat", ch);
    } else if (ch == '^' || ch == '$') {
        return fail(re, "pattern: '%c' is only supported at the start / end", ch);
    } else {
        int64_t cp = re_char(re);
        cp_set s = {0};
        if (cp < 0 || set_add(re, &s, (uint32_t)cp, (uint32_t)cp)) rc = -1;
        else rc = emit_set(re, &s, &atom);
        free(s.r);
    }
    uint64_t min = 1, max = 1;
    int q = rc ? 0 : re_quantifier(re, &min, &max);
    if (rc || q < 0) {
        free(atom.p);
        return -1;
    }
    if (*wrote) {
        eli_sb_put(e, atom.p, atom.n);
        eli_sb_gbnf_repeat(e, optional ? 0 : min, max);
    }
    free(atom.p);
    return 0;
}

/* One alternative: the number of atoms written (0: it is empty), -1 on error. */
static int re_sequence(regex *re, eli_strbuf *e) {
    int n = 0;
    while (re->pos < re->n && re->s[re->pos] != '|' && re->s[re->pos] != ')') {
        if (re->s[re->pos] == '$' && re->pos + 1 == re->n) break;
        eli_strbuf one = {0};
        int wrote;
        eli_sb_puts(&one, " ");
        int rc = re_atom(re, &one, &wrote);
        if (!rc && wrote) eli_sb_put(e, one.p, one.n), n++;
        free(one.p);
        if (rc) return -1;
    }
    return n;
}

/* The alternatives into e, joined by " |", leaving out the empty ones (*has_empty says there was one).
 * Returns how many were written, -1 on error. */
static int re_alternatives(regex *re, eli_strbuf *e, int *has_empty) {
    int written = 0;
    for (;;) {
        eli_strbuf alt = {0};
        int n = re_sequence(re, &alt);
        if (n > 0) {
            if (written++) eli_sb_puts(e, " |");
            eli_sb_put(e, alt.p, alt.n);
        } else if (n == 0) {
            *has_empty = 1;
        }
        free(alt.p);
        if (n < 0) return -1;
        if (re->pos >= re->n || re->s[re->pos] != '|') return written;
        re->pos++;
    }
}

int eli_json_pattern_gbnf(const char *pattern, size_t len, const char *char_rule_name, eli_strbuf *out, int *used_char,
                          char *why, size_t why_len) {
    regex re = {pattern, len, 0, 0, char_rule_name, 0, 0, 0, why, why_len};
    int anchored_start = len && pattern[0] == '^';
    int anchored_end = len && pattern[len - 1] == '$' && !(len >= 2 && pattern[len - 2] == '\\');
    if (anchored_start) re.pos = 1;
    eli_sb_puts(out, "\"\\\"\" ");
    if (!anchored_start) eli_sb_printf(out, "%s* ", char_rule(&re));
    eli_sb_puts(out, "(");
    int has_empty = 0, n_alts = re_alternatives(&re, out, &has_empty), rc = n_alts < 0 ? -1 : 0;
    if (!rc && re.pos < re.n && re.s[re.pos] == ')') rc = fail(&re, "pattern: unbalanced ')'");
    if (!rc && anchored_end) re.pos++;
    if (!rc && re.pos != re.n) rc = fail(&re, "pattern: unexpected '%c'", re.s[re.pos]);
    eli_sb_puts(out, n_alts == 0 ? " \"\" )" : has_empty ? " )?" : " )");
    if (!anchored_end) eli_sb_printf(out, " %s*", char_rule(&re));
    eli_sb_puts(out, " \"\\\"\"");
    *used_char = re.used_char;
    if (re.oom || out->oom) return ELI_ERR_OOM;
    return rc ? ELI_ERR_INVALID_ARG : ELI_OK;
}
