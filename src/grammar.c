/* GBNF parser: text -> rules (grammar.h).
 *
 * Recursive descent that accepts what llama.cpp's parser accepts, item for item, so a grammar written
 * for llama.cpp means the same here (see grammar.h for the few inputs where we refuse instead). The
 * repetition operators are rewritten into plain rules the way BNF usually does it, one new rule per
 * optional copy:
 *   S{m,n} -> S ... S (m times) R(n-m)      R(1) ::= S |     R(k) ::= S R(k-1) |
 *   S{m,}  -> S ... S (m times) R           R    ::= S R |
 *   S* = S{0,}   S+ = S{1,}   S? = S{0,1}
 * so the matcher only ever sees rules, alternatives, code point classes and token references.
 *
 * Everything the text controls is bounded (grammar.h: ELI_GRAMMAR_MAX_*): its size, the nesting of
 * groups (the only recursion), repetition counts and the total number of symbols after rewriting; and
 * left recursion, which would make the matcher's stacks grow forever, is refused before matching. */
#include "grammar.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "utf8.h"

#define NO_RULE UINT32_MAX
#define UNBOUNDED UINT64_MAX

typedef struct {
    eli_gsym *v;
    size_t n, cap;
} symvec;

typedef struct {
    symvec body;
    char *name;          /* NULL for rules made by groups and repetitions */
    uint32_t owner;      /* the named rule whose text made this one (itself when named) */
    int defined;
    size_t first_ref;    /* text offset of the first reference, for "undefined rule" */
} rule_def;

typedef struct {
    const char *s;
    size_t len, pos;
    const eli_tokenizer *tok;
    eli_error *err;
    rule_def *rules;
    uint32_t n_rules, cap_rules;
    uint32_t *name_index; /* open addressing: rule index + 1, 0 = empty */
    uint32_t name_cap;
    size_t total_syms;
    eli_gclass *classes;
    uint32_t n_classes, cap_classes;
    eli_grange *ranges;
    uint32_t n_ranges, cap_ranges;
    eli_grange *scratch; /* ranges of the class being parsed */
    size_t n_scratch, cap_scratch;
    uint32_t ascii_class[128]; /* class index + 1 of each single ASCII character used in a literal */
    int depth;
} parser;

/* ---- errors with a position ------------------------------------------------------------------- */

/* "line L, column C" of byte offset at (columns count characters, not bytes). */
static void line_col(const char *s, size_t at, size_t *line, size_t *col) {
    size_t l = 1, c = 1;
    for (size_t i = 0; i < at; i++) {
        if (s[i] == '\n') l++, c = 1;
        else if (((unsigned char)s[i] & 0xC0) != 0x80) c++;
    }
    *line = l;
    *col = c;
}

static int fail_at(parser *p, size_t at, int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

static int fail_at(parser *p, size_t at, int code, const char *fmt, ...) {
    if (p->err) {
        char what[400];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(what, sizeof what, fmt, ap);
        va_end(ap);
        size_t line, col;
        line_col(p->s, at, &line, &col);
        eli_fail(p->err, code, "grammar line %zu, column %zu: %s", line, col, what);
    }
    return code;
}

static int oom(parser *p) { return eli_fail(p->err, ELI_ERR_OOM, "grammar: out of memory"); }

/* A printable description of the byte at pos for messages. */
static const char *describe(const parser *p, size_t pos, char buf[16]) {
    if (pos >= p->len) return "the end of the grammar";
    unsigned char c = (unsigned char)p->s[pos];
    if (c == '\n') return "a newline";
    if (c >= 0x21 && c < 0x7F) snprintf(buf, 16, "'%c'", c);
    else snprintf(buf, 16, "byte 0x%02X", c);
    return buf;
}

/* ---- growable arrays -------------------------------------------------------------------------- */

static int grow(void **v, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : 16;
    while (c < need) {
        if (c > SIZE_MAX / 2 / elem) return -1;
        c *= 2;
    }
    void *n = realloc(*v, c * elem);
    if (!n) return -1;
    *v = n;
    *cap = c;
    return 0;
}

static int push_sym(parser *p, uint32_t rule, uint32_t kind, uint32_t value) {
    if (p->total_syms >= ELI_GRAMMAR_MAX_SYMS)
        return fail_at(p, p->pos, ELI_ERR_INVALID_ARG, "grammar too large: more than %u symbols after expanding repetitions",
                       ELI_GRAMMAR_MAX_SYMS);
    symvec *b = &p->rules[rule].body;
    if (grow((void **)&b->v, &b->cap, b->n + 1, sizeof *b->v)) return oom(p);
    b->v[b->n++] = (eli_gsym){kind, value};
    p->total_syms++;
    return 0;
}

/* ---- rule table ------------------------------------------------------------------------------- */

static uint64_t fnv1a(const void *data, size_t n, uint64_t h) {
    const unsigned char *d = data;
    for (size_t i = 0; i < n; i++) h = (h ^ d[i]) * 0x100000001b3ull;
    return h;
}
#define FNV_BASIS 0xcbf29ce484222325ull

static int new_rule(parser *p, const char *name, size_t name_len, uint32_t owner, uint32_t *out) {
    if (p->n_rules >= ELI_GRAMMAR_MAX_SYMS)
        return fail_at(p, p->pos, ELI_ERR_INVALID_ARG, "grammar too large: more than %u rules", ELI_GRAMMAR_MAX_SYMS);
    if (p->n_rules == p->cap_rules) {
        size_t cap = p->cap_rules;
        if (grow((void **)&p->rules, &cap, (size_t)p->n_rules + 1, sizeof *p->rules)) return oom(p);
        p->cap_rules = (uint32_t)cap;
    }
    rule_def *r = &p->rules[p->n_rules];
    memset(r, 0, sizeof *r);
    if (name) {
        r->name = malloc(name_len + 1);
        if (!r->name) return oom(p);
        memcpy(r->name, name, name_len);
        r->name[name_len] = '\0';
    }
    r->owner = owner == NO_RULE ? p->n_rules : owner;
    *out = p->n_rules++;
    return 0;
}

/* The rule named s[0..n), created (undefined) on first sight. */
static int rule_by_name(parser *p, const char *s, size_t n, uint32_t *out) {
    if ((size_t)p->n_rules * 2 >= p->name_cap) { /* keep the table at most half full */
        uint32_t cap = p->name_cap ? p->name_cap * 2 : 64;
        uint32_t *t = calloc(cap, sizeof *t);
        if (!t) return oom(p);
        for (uint32_t i = 0; i < p->name_cap; i++) {
            uint32_t r = p->name_index[i];
            if (!r) continue;
            const char *nm = p->rules[r - 1].name;
            uint32_t h = (uint32_t)fnv1a(nm, strlen(nm), FNV_BASIS) & (cap - 1);
            while (t[h]) h = (h + 1) & (cap - 1);
            t[h] = r;
        }
        free(p->name_index);
        p->name_index = t;
        p->name_cap = cap;
    }
    uint32_t h = (uint32_t)fnv1a(s, n, FNV_BASIS) & (p->name_cap - 1);
    for (; p->name_index[h]; h = (h + 1) & (p->name_cap - 1)) {
        const char *nm = p->rules[p->name_index[h] - 1].name;
        if (strlen(nm) == n && !memcmp(nm, s, n)) {
            *out = p->name_index[h] - 1;
            return 0;
        }
    }
    int rc = new_rule(p, s, n, NO_RULE, out);
    if (rc) return rc;
    p->name_index[h] = *out + 1;
    return 0;
}

/* ---- lexical helpers -------------------------------------------------------------------------- */

static int at_end(const parser *p) { return p->pos >= p->len; }
/* '\0' at the end: the text holds no NUL byte (refused up front), so it can stand for the end. */
static char cur(const parser *p) { return p->pos < p->len ? p->s[p->pos] : '\0'; }
static char peek(const parser *p, size_t k) { return p->pos + k < p->len ? p->s[p->pos + k] : '\0'; }

static int is_name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
}

/* Spaces, tabs and comments; newlines too when newline_ok (inside groups, after '|' and '::='). */
static void skip_space(parser *p, int newline_ok) {
    while (!at_end(p)) {
        char c = cur(p);
        if (c == '#') {
            while (!at_end(p) && cur(p) != '\n' && cur(p) != '\r') p->pos++;
        } else if (c == ' ' || c == '\t' || (newline_ok && (c == '\n' || c == '\r'))) {
            p->pos++;
        } else {
            break;
        }
    }
}

static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* One character of a literal or class: an escape or a raw UTF-8 character. The value may exceed
 * U+10FFFF (\U escapes); such a character never matches. what: "string" or "character class". */
static int parse_char(parser *p, const char *what, size_t opened, uint32_t *cp) {
    if (at_end(p)) return fail_at(p, opened, ELI_ERR_INVALID_ARG, "unterminated %s", what);
    size_t start = p->pos;
    unsigned char c = (unsigned char)cur(p);
    if (c != '\\') {
        int n = eli_utf8_decode((const unsigned char *)p->s + p->pos, p->len - p->pos, cp);
        if (!n) return fail_at(p, start, ELI_ERR_INVALID_ARG, "invalid UTF-8 in %s", what);
        p->pos += (size_t)n;
        return 0;
    }
    if (p->pos + 1 >= p->len) return fail_at(p, opened, ELI_ERR_INVALID_ARG, "unterminated %s", what);
    char e = peek(p, 1);
    p->pos += 2;
    int digits = e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 0;
    if (digits) {
        uint32_t v = 0;
        for (int i = 0; i < digits; i++) {
            int d = hex_digit(cur(p));
            if (at_end(p) || d < 0)
                return fail_at(p, start, ELI_ERR_INVALID_ARG, "escape \\%c needs %d hex digits", e, digits);
            v = v << 4 | (uint32_t)d;
            p->pos++;
        }
        *cp = v;
        return 0;
    }
    switch (e) {
    case 'n': *cp = '\n'; return 0;
    case 't': *cp = '\t'; return 0;
    case 'r': *cp = '\r'; return 0;
    case '\\': case '"': case '[': case ']': *cp = (unsigned char)e; return 0;
    default: break;
    }
    char buf[16];
    if ((unsigned char)e >= 0x21 && (unsigned char)e < 0x7F) snprintf(buf, sizeof buf, "\\%c", e);
    else snprintf(buf, sizeof buf, "\\ + byte 0x%02X", (unsigned char)e);
    return fail_at(p, start, ELI_ERR_INVALID_ARG, "unknown escape %s", buf);
}

/* ---- character classes ------------------------------------------------------------------------ */

static int range_cmp(const void *a, const void *b) {
    const eli_grange *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* Turns the scratch ranges into a class (sorted, merged, negated if asked, clipped to Unicode). */
static int add_class(parser *p, int negated, uint32_t *out) {
    eli_grange *r = p->scratch;
    size_t n = 0;
    for (size_t i = 0; i < p->n_scratch; i++) /* drop what lies entirely above U+10FFFF */
        if (r[i].lo <= ELI_GRAMMAR_MAX_CODEPOINT) {
            r[n] = r[i];
            if (r[n].hi > ELI_GRAMMAR_MAX_CODEPOINT) r[n].hi = ELI_GRAMMAR_MAX_CODEPOINT;
            n++;
        }
    qsort(r, n, sizeof *r, range_cmp);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (m && r[i].lo <= r[m - 1].hi + 1) {
            if (r[i].hi > r[m - 1].hi) r[m - 1].hi = r[i].hi;
        } else {
            r[m++] = r[i];
        }
    }
    if (negated) { /* complement within [0, U+10FFFF]: at most one range more */
        if (grow((void **)&p->scratch, &p->cap_scratch, m + 1, sizeof *p->scratch)) return oom(p);
        r = p->scratch;
        uint32_t next = 0;
        size_t k = 0;
        for (size_t i = 0; i < m; i++) {
            eli_grange g = r[i];
            if (g.lo > next) r[k++] = (eli_grange){next, g.lo - 1};
            next = g.hi + 1;
        }
        if (next <= ELI_GRAMMAR_MAX_CODEPOINT) r[k++] = (eli_grange){next, ELI_GRAMMAR_MAX_CODEPOINT};
        m = k;
    }
    if (p->n_ranges + m > ELI_GRAMMAR_MAX_SYMS || p->n_classes >= ELI_GRAMMAR_MAX_SYMS)
        return fail_at(p, p->pos, ELI_ERR_INVALID_ARG, "grammar too large: more than %u character ranges",
                       ELI_GRAMMAR_MAX_SYMS);
    size_t cap = p->cap_ranges;
    if (grow((void **)&p->ranges, &cap, p->n_ranges + m, sizeof *p->ranges)) return oom(p);
    p->cap_ranges = (uint32_t)cap;
    cap = p->cap_classes;
    if (grow((void **)&p->classes, &cap, (size_t)p->n_classes + 1, sizeof *p->classes)) return oom(p);
    p->cap_classes = (uint32_t)cap;
    eli_gclass *c = &p->classes[p->n_classes];
    c->first = p->n_ranges;
    c->n = (uint32_t)m;
    c->ascii[0] = c->ascii[1] = 0;
    for (size_t i = 0; i < m; i++) {
        p->ranges[p->n_ranges++] = r[i];
        for (uint32_t v = r[i].lo; v <= r[i].hi && v < 128; v++) c->ascii[v >> 6] |= 1ull << (v & 63);
    }
    *out = p->n_classes++;
    return 0;
}

static int scratch_add(parser *p, uint32_t lo, uint32_t hi) {
    if (grow((void **)&p->scratch, &p->cap_scratch, p->n_scratch + 1, sizeof *p->scratch)) return oom(p);
    p->scratch[p->n_scratch++] = (eli_grange){lo, hi};
    return 0;
}

/* A one-code-point class (literal characters). */
/* A one-code-point class (literal characters); an ASCII character's class is shared by all literals,
 * so a state whose stacks wait on the same character (a long alternation) sees one class. */
static int push_char(parser *p, uint32_t rule, uint32_t cp) {
    if (cp < 128 && p->ascii_class[cp]) return push_sym(p, rule, ELI_GSYM_CLASS, p->ascii_class[cp] - 1);
    p->n_scratch = 0;
    uint32_t cls;
    int rc = scratch_add(p, cp, cp);
    if (!rc) rc = add_class(p, 0, &cls);
    if (!rc && cp < 128) p->ascii_class[cp] = cls + 1;
    return rc ? rc : push_sym(p, rule, ELI_GSYM_CLASS, cls);
}

/* [ ... ] at p->pos. As in llama.cpp an empty class ([] or [^]) adds nothing. */
static int parse_class(parser *p, uint32_t rule) {
    size_t opened = p->pos++;
    int negated = 0;
    if (cur(p) == '^') {
        negated = 1;
        p->pos++;
    }
    p->n_scratch = 0;
    while (cur(p) != ']') {
        size_t at = p->pos;
        uint32_t lo, hi;
        int rc = parse_char(p, "character class", opened, &lo);
        if (rc) return rc;
        hi = lo;
        if (cur(p) == '-' && peek(p, 1) != ']') {
            p->pos++;
            if ((rc = parse_char(p, "character class", opened, &hi))) return rc;
            if (hi < lo)
                return fail_at(p, at, ELI_ERR_INVALID_ARG, "bad range: U+%04X-U+%04X runs backwards", lo, hi);
        }
        if ((rc = scratch_add(p, lo, hi))) return rc;
    }
    p->pos++; /* ']' */
    if (p->n_scratch == 0) return 0;
    uint32_t cls;
    int rc = add_class(p, negated, &cls);
    return rc ? rc : push_sym(p, rule, ELI_GSYM_CLASS, cls);
}

/* ---- token references ------------------------------------------------------------------------- */

static int parse_token(parser *p, uint32_t rule, uint32_t kind) {
    size_t start = p->pos;
    if (cur(p) != '<')
        return fail_at(p, p->pos, ELI_ERR_INVALID_ARG, "expecting '<' after '!' (a token reference)");
    p->pos++;
    int32_t id;
    if (cur(p) == '[') {
        p->pos++;
        uint64_t v = 0;
        size_t digits = 0;
        while (cur(p) >= '0' && cur(p) <= '9') {
            v = v * 10 + (uint64_t)(cur(p) - '0');
            if (v > INT32_MAX) return fail_at(p, start, ELI_ERR_INVALID_ARG, "token id too large");
            p->pos++;
            digits++;
        }
        if (!digits) return fail_at(p, p->pos, ELI_ERR_INVALID_ARG, "expecting a token id after '<['");
        if (cur(p) != ']') return fail_at(p, p->pos, ELI_ERR_INVALID_ARG, "expecting ']' in token reference");
        p->pos++;
        if (cur(p) != '>') return fail_at(p, p->pos, ELI_ERR_INVALID_ARG, "expecting '>' in token reference");
        p->pos++;
        id = (int32_t)v;
        if (p->tok && id >= eli_tokenizer_n_vocab(p->tok))
            return fail_at(p, start, ELI_ERR_INVALID_ARG, "token id %d is outside the vocabulary (%d tokens)", id,
                           eli_tokenizer_n_vocab(p->tok));
    } else {
        while (!at_end(p) && cur(p) != '>') p->pos++;
        if (at_end(p)) return fail_at(p, start, ELI_ERR_INVALID_ARG, "unterminated token reference (no '>')");
        p->pos++;
        size_t n = p->pos - start;
        if (!p->tok)
            return fail_at(p, start, ELI_ERR_INVALID_ARG, "token reference %.*s needs a vocabulary", (int)(n > 64 ? 64 : n),
                           p->s + start);
        int32_t *ids = NULL;
        size_t n_ids = 0;
        eli_error terr;
        if (eli_tokenize(p->tok, p->s + start, n, 0, 1, &ids, &n_ids, &terr)) {
            free(ids);
            return eli_fail(p->err, terr.code, "%s", terr.msg);
        }
        id = n_ids == 1 ? ids[0] : -1;
        free(ids);
        if (id < 0)
            return fail_at(p, start, ELI_ERR_INVALID_ARG, "token reference %.*s is not one token of the vocabulary",
                           (int)(n > 64 ? 64 : n), p->s + start);
    }
    return push_sym(p, rule, kind, (uint32_t)id);
}

/* ---- repetition ------------------------------------------------------------------------------- */

/* Rewrites the item body[item .. end) of rule into `item{m,n}` (n = UNBOUNDED for no maximum). */
static int repeat(parser *p, uint32_t rule, size_t item, uint64_t m, uint64_t n, size_t at) {
    symvec *b = &p->rules[rule].body;
    if (item == b->n) return fail_at(p, at, ELI_ERR_INVALID_ARG, "repetition without a preceding item");
    if (m > ELI_GRAMMAR_MAX_REPEAT || (n != UNBOUNDED && n > ELI_GRAMMAR_MAX_REPEAT))
        return fail_at(p, at, ELI_ERR_INVALID_ARG, "repetition count above the limit of %u", ELI_GRAMMAR_MAX_REPEAT);
    if (n < m)
        return fail_at(p, at, ELI_ERR_INVALID_ARG, "repetition {%llu,%llu}: the maximum is below the minimum",
                       (unsigned long long)m, (unsigned long long)n);
    size_t k = b->n - item;
    uint64_t copies = m + (n == UNBOUNDED ? 1 : n - m);
    if (copies > (ELI_GRAMMAR_MAX_SYMS - p->total_syms) / (k + 3)) /* each optional copy adds ref, ALT, END */
        return fail_at(p, at, ELI_ERR_INVALID_ARG, "grammar too large: more than %u symbols after expanding repetitions",
                       ELI_GRAMMAR_MAX_SYMS);
    eli_gsym *copy = malloc(k * sizeof *copy);
    if (!copy) return oom(p);
    memcpy(copy, b->v + item, k * sizeof *copy);
    b->n = item;
    p->total_syms -= k;
    int rc = 0;
    for (uint64_t i = 0; i < m && !rc; i++)
        for (size_t j = 0; j < k && !rc; j++) rc = push_sym(p, rule, copy[j].kind, copy[j].value);
    uint64_t optional = n == UNBOUNDED ? 1 : n - m;
    uint32_t prev = NO_RULE;
    for (uint64_t i = 0; i < optional && !rc; i++) {
        uint32_t r;
        if ((rc = new_rule(p, NULL, 0, p->rules[rule].owner, &r))) break;
        for (size_t j = 0; j < k && !rc; j++) rc = push_sym(p, r, copy[j].kind, copy[j].value);
        if (!rc && n == UNBOUNDED) rc = push_sym(p, r, ELI_GSYM_RULE, r);
        else if (!rc && prev != NO_RULE) rc = push_sym(p, r, ELI_GSYM_RULE, prev);
        if (!rc) rc = push_sym(p, r, ELI_GSYM_ALT, 0);
        if (!rc) rc = push_sym(p, r, ELI_GSYM_END, 0);
        if (!rc) p->rules[r].defined = 1;
        prev = r;
    }
    if (!rc && prev != NO_RULE) rc = push_sym(p, rule, ELI_GSYM_RULE, prev);
    free(copy);
    return rc;
}

static int parse_count(parser *p, uint64_t *v) {
    size_t start = p->pos;
    if (!(cur(p) >= '0' && cur(p) <= '9'))
        return fail_at(p, p->pos, ELI_ERR_INVALID_ARG, "expecting a number in {...} repetition");
    *v = 0;
    while (cur(p) >= '0' && cur(p) <= '9') {
        if (*v <= ELI_GRAMMAR_MAX_REPEAT) *v = *v * 10 + (uint64_t)(cur(p) - '0');
        p->pos++;
    }
    if (*v > ELI_GRAMMAR_MAX_REPEAT)
        return fail_at(p, start, ELI_ERR_INVALID_ARG, "repetition count above the limit of %u", ELI_GRAMMAR_MAX_REPEAT);
    return 0;
}

/* ---- sequences and alternatives --------------------------------------------------------------- */

static int parse_alternates(parser *p, uint32_t rule, int nested);

static int parse_sequence(parser *p, uint32_t rule, int nested) {
    size_t item = p->rules[rule].body.n; /* start of the last item: what a repetition applies to */
    int rc = 0;
    while (!at_end(p) && !rc) {
        char c = cur(p);
        size_t at = p->pos;
        symvec *b = &p->rules[rule].body;
        if (c == '"') {
            p->pos++;
            item = b->n;
            while (!rc && cur(p) != '"') {
                uint32_t cp;
                rc = parse_char(p, "string", at, &cp);
                if (!rc) rc = push_char(p, rule, cp);
            }
            if (rc) break;
            p->pos++;
        } else if (c == '[') {
            item = b->n;
            rc = parse_class(p, rule);
        } else if (c == '<' || c == '!') {
            item = b->n;
            uint32_t kind = ELI_GSYM_TOKEN;
            if (c == '!') {
                kind = ELI_GSYM_TOKEN_NOT;
                p->pos++;
            }
            rc = parse_token(p, rule, kind);
        } else if (is_name_char(c)) {
            size_t end = p->pos;
            while (end < p->len && is_name_char(p->s[end])) end++;
            uint32_t ref;
            rc = rule_by_name(p, p->s + p->pos, end - p->pos, &ref);
            if (rc) break;
            if (!p->rules[ref].defined && !p->rules[ref].first_ref) p->rules[ref].first_ref = p->pos + 1;
            p->pos = end;
            item = p->rules[rule].body.n;
            rc = push_sym(p, rule, ELI_GSYM_RULE, ref);
        } else if (c == '(') {
            if (p->depth >= ELI_GRAMMAR_MAX_NESTING)
                return fail_at(p, at, ELI_ERR_INVALID_ARG, "groups nested deeper than %d", ELI_GRAMMAR_MAX_NESTING);
            p->pos++;
            skip_space(p, 1);
            uint32_t sub;
            if ((rc = new_rule(p, NULL, 0, p->rules[rule].owner, &sub))) break;
            p->depth++;
            rc = parse_alternates(p, sub, 1);
            p->depth--;
            if (rc) break;
            p->rules[sub].defined = 1;
            if (cur(p) != ')') {
                char buf[16];
                size_t line, col;
                line_col(p->s, at, &line, &col);
                return fail_at(p, p->pos, ELI_ERR_INVALID_ARG,
                               "expecting ')' to close the group opened at line %zu, column %zu, found %s", line, col,
                               describe(p, p->pos, buf));
            }
            p->pos++;
            item = p->rules[rule].body.n;
            rc = push_sym(p, rule, ELI_GSYM_RULE, sub);
        } else if (c == '.') {
            p->pos++;
            item = b->n;
            p->n_scratch = 0;
            uint32_t cls;
            rc = scratch_add(p, 0, ELI_GRAMMAR_MAX_CODEPOINT);
            if (!rc) rc = add_class(p, 0, &cls);
            if (!rc) rc = push_sym(p, rule, ELI_GSYM_CLASS, cls);
        } else if (c == '*' || c == '+' || c == '?') {
            p->pos++;
            skip_space(p, nested);
            rc = repeat(p, rule, item, c == '+', c == '?' ? 1 : UNBOUNDED, at);
            continue;
        } else if (c == '{') {
            p->pos++;
            skip_space(p, nested);
            uint64_t m, n = UNBOUNDED;
            if ((rc = parse_count(p, &m))) break;
            skip_space(p, nested);
            if (cur(p) == '}') {
                n = m;
            } else if (cur(p) == ',') {
                p->pos++;
                skip_space(p, nested);
                if (cur(p) >= '0' && cur(p) <= '9') {
                    if ((rc = parse_count(p, &n))) break;
                    skip_space(p, nested);
                }
                if (cur(p) != '}') {
                    char buf[16];
                    return fail_at(p, p->pos, ELI_ERR_INVALID_ARG, "expecting '}' to close the repetition, found %s",
                                   describe(p, p->pos, buf));
                }
            } else {
                char buf[16];
                return fail_at(p, p->pos, ELI_ERR_INVALID_ARG, "expecting ',' or '}' in the repetition, found %s",
                               describe(p, p->pos, buf));
            }
            p->pos++;
            skip_space(p, nested);
            rc = repeat(p, rule, item, m, n, at);
            continue;
        } else {
            break;
        }
        if (!rc) skip_space(p, nested);
    }
    return rc;
}

static int parse_alternates(parser *p, uint32_t rule, int nested) {
    int rc = parse_sequence(p, rule, nested);
    while (!rc && cur(p) == '|') {
        p->pos++;
        skip_space(p, 1);
        rc = push_sym(p, rule, ELI_GSYM_ALT, 0);
        if (!rc) rc = parse_sequence(p, rule, nested);
    }
    return rc ? rc : push_sym(p, rule, ELI_GSYM_END, 0);
}

static int parse_rule(parser *p) {
    size_t start = p->pos, end = p->pos;
    while (end < p->len && is_name_char(p->s[end])) end++;
    char buf[16];
    if (end == start)
        return fail_at(p, start, ELI_ERR_INVALID_ARG, "expecting a rule name, found %s", describe(p, start, buf));
    uint32_t r;
    int rc = rule_by_name(p, p->s + start, end - start, &r);
    if (rc) return rc;
    p->pos = end;
    skip_space(p, 0);
    if (!(cur(p) == ':' && peek(p, 1) == ':' && peek(p, 2) == '='))
        return fail_at(p, p->pos, ELI_ERR_INVALID_ARG, "expecting '::=' after rule name '%s', found %s", p->rules[r].name,
                       describe(p, p->pos, buf));
    p->pos += 3;
    skip_space(p, 1);
    /* A second definition replaces the first, as in llama.cpp. */
    p->total_syms -= p->rules[r].body.n;
    p->rules[r].body.n = 0;
    if ((rc = parse_alternates(p, r, 0))) return rc;
    p->rules[r].defined = 1;
    if (cur(p) == '\r') p->pos += peek(p, 1) == '\n' ? 2 : 1;
    else if (cur(p) == '\n') p->pos++;
    else if (!at_end(p))
        return fail_at(p, p->pos, ELI_ERR_INVALID_ARG, "expecting the end of rule '%s' (a newline), found %s",
                       p->rules[r].name, describe(p, p->pos, buf));
    skip_space(p, 1);
    return 0;
}

/* ---- left recursion --------------------------------------------------------------------------- */

/* The rules that derive the empty string, by the usual worklist: an alternative becomes empty when the
 * last of its rule references does. direct_only: only rules with a literally empty alternative count
 * (llama.cpp's notion, which decides what it refuses). */
static int find_nullable(const parser *p, int direct_only, uint8_t *nullable) {
    uint32_t nr = p->n_rules;
    memset(nullable, 0, nr);
    if (direct_only) {
        for (uint32_t r = 0; r < nr; r++) {
            const symvec *b = &p->rules[r].body;
            int fresh = 1;
            for (size_t i = 0; i < b->n; i++) {
                uint32_t k = b->v[i].kind;
                if (k == ELI_GSYM_END || k == ELI_GSYM_ALT) {
                    if (fresh) nullable[r] = 1;
                    fresh = 1;
                } else {
                    fresh = 0;
                }
            }
        }
        return 0;
    }
    /* alternatives: pending reference count; occurrences of each rule, as (alternative) lists */
    size_t n_alts = 0, n_refs = 0;
    for (uint32_t r = 0; r < nr; r++)
        for (size_t i = 0; i < p->rules[r].body.n; i++) {
            uint32_t k = p->rules[r].body.v[i].kind;
            n_alts += k == ELI_GSYM_END || k == ELI_GSYM_ALT;
            n_refs += k == ELI_GSYM_RULE;
        }
    uint32_t *pending = malloc((n_alts + 1) * sizeof *pending), *alt_rule = malloc((n_alts + 1) * sizeof *alt_rule);
    uint32_t *occ_start = calloc((size_t)nr + 1, sizeof *occ_start), *occ = malloc((n_refs + 1) * sizeof *occ);
    uint32_t *queue = malloc(((size_t)nr + n_alts + 1) * sizeof *queue);
    int rc = 0;
    if (!pending || !alt_rule || !occ_start || !occ || !queue) {
        rc = -1;
        goto out;
    }
    /* pass 1: per alternative, terminals (never empty) or the count of references; occurrence counts */
    size_t a = 0;
    for (uint32_t r = 0; r < nr; r++) {
        const symvec *b = &p->rules[r].body;
        uint32_t refs = 0;
        int terminal = 0;
        for (size_t i = 0; i < b->n; i++) {
            uint32_t k = b->v[i].kind;
            if (k == ELI_GSYM_RULE) refs++, occ_start[b->v[i].value + 1]++;
            else if (k == ELI_GSYM_END || k == ELI_GSYM_ALT) {
                alt_rule[a] = r;
                pending[a++] = terminal ? UINT32_MAX : refs;
                refs = 0;
                terminal = 0;
            } else terminal = 1;
        }
    }
    for (uint32_t r = 0; r < nr; r++) occ_start[r + 1] += occ_start[r];
    uint32_t *fill = queue; /* reused as fill cursors before the queue is needed */
    memcpy(fill, occ_start, (size_t)nr * sizeof *fill);
    a = 0;
    for (uint32_t r = 0; r < nr; r++) {
        const symvec *b = &p->rules[r].body;
        for (size_t i = 0; i < b->n; i++) {
            uint32_t k = b->v[i].kind;
            if (k == ELI_GSYM_RULE) occ[fill[b->v[i].value]++] = (uint32_t)a;
            else if (k == ELI_GSYM_END || k == ELI_GSYM_ALT) a++;
        }
    }
    size_t head = 0, tail = 0;
    for (size_t i = 0; i < n_alts; i++)
        if (pending[i] == 0) queue[tail++] = alt_rule[i];
    while (head < tail) {
        uint32_t r = queue[head++];
        if (nullable[r]) continue;
        nullable[r] = 1;
        for (uint32_t j = occ_start[r]; j < occ_start[r + 1]; j++) {
            uint32_t alt = occ[j];
            if (pending[alt] != UINT32_MAX && --pending[alt] == 0) queue[tail++] = alt_rule[alt];
        }
    }
out:
    free(pending);
    free(alt_rule);
    free(occ_start);
    free(occ);
    free(queue);
    return rc;
}

typedef struct {
    uint32_t to;
    uint8_t grows; /* the reference is not the last item of its alternative: expanding it pushes */
} lc_edge;

/* Finds a cycle of left-corner references (rule A starts, after empty-deriving items, with rule B) that
 * matters: any cycle when !growing_only, else one through an edge that grows the stack. Tarjan's
 * strongly connected components, iterative (a hostile grammar may chain a million rules). Returns a
 * rule on such a cycle, NO_RULE if none, or NO_RULE - 1 when out of memory. */
static uint32_t find_left_cycle(const parser *p, const uint8_t *nullable, int growing_only) {
    uint32_t nr = p->n_rules;
    uint32_t *e_start = calloc((size_t)nr + 1, sizeof *e_start);
    size_t n_e = 0;
    if (!e_start) return NO_RULE - 1;
    /* count the edges, then fill them */
    for (uint32_t r = 0; r < nr; r++) {
        const symvec *b = &p->rules[r].body;
        int open = 1;
        for (size_t i = 0; i < b->n; i++) {
            uint32_t k = b->v[i].kind;
            if (k == ELI_GSYM_END || k == ELI_GSYM_ALT) open = 1;
            else if (k == ELI_GSYM_RULE && open) {
                e_start[r + 1]++;
                open = nullable[b->v[i].value];
            } else open = 0;
        }
    }
    for (uint32_t r = 0; r < nr; r++) e_start[r + 1] += e_start[r];
    n_e = e_start[nr];
    lc_edge *edges = malloc((n_e + 1) * sizeof *edges);
    uint32_t *index = malloc(((size_t)nr + 1) * sizeof *index), *low = malloc(((size_t)nr + 1) * sizeof *low);
    uint32_t *comp = malloc(((size_t)nr + 1) * sizeof *comp), *stack = malloc(((size_t)nr + 1) * sizeof *stack);
    uint32_t *call = malloc(((size_t)nr + 1) * sizeof *call), *next_edge = malloc(((size_t)nr + 1) * sizeof *next_edge);
    uint8_t *on_stack = calloc((size_t)nr + 1, 1);
    uint32_t found = NO_RULE;
    if (!edges || !index || !low || !comp || !stack || !call || !next_edge || !on_stack) {
        found = NO_RULE - 1;
        goto out;
    }
    for (uint32_t r = 0; r < nr; r++) {
        const symvec *b = &p->rules[r].body;
        uint32_t e = e_start[r];
        int open = 1;
        for (size_t i = 0; i < b->n; i++) {
            uint32_t k = b->v[i].kind;
            if (k == ELI_GSYM_END || k == ELI_GSYM_ALT) open = 1;
            else if (k == ELI_GSYM_RULE && open) {
                uint32_t nk = b->v[i + 1].kind; /* every body ends with END, so i + 1 exists */
                edges[e++] = (lc_edge){b->v[i].value, nk != ELI_GSYM_END && nk != ELI_GSYM_ALT};
                open = nullable[b->v[i].value];
            } else open = 0;
        }
    }
    for (uint32_t r = 0; r < nr; r++) index[r] = UINT32_MAX;
    uint32_t counter = 0, sp = 0, n_comp = 0;
    for (uint32_t root = 0; root < nr; root++) {
        if (index[root] != UINT32_MAX) continue;
        uint32_t depth = 0;
        call[depth++] = root;
        index[root] = low[root] = counter++;
        next_edge[root] = e_start[root];
        stack[sp++] = root;
        on_stack[root] = 1;
        while (depth) {
            uint32_t v = call[depth - 1];
            if (next_edge[v] < e_start[v + 1]) {
                uint32_t w = edges[next_edge[v]++].to;
                if (index[w] == UINT32_MAX) {
                    index[w] = low[w] = counter++;
                    next_edge[w] = e_start[w];
                    stack[sp++] = w;
                    on_stack[w] = 1;
                    call[depth++] = w;
                } else if (on_stack[w] && index[w] < low[v]) {
                    low[v] = index[w];
                }
                continue;
            }
            depth--;
            if (depth && low[v] < low[call[depth - 1]]) low[call[depth - 1]] = low[v];
            if (low[v] != index[v]) continue;
            uint32_t w;
            do {
                w = stack[--sp];
                on_stack[w] = 0;
                comp[w] = n_comp;
            } while (w != v);
            n_comp++;
        }
    }
    /* an edge inside one component closes a cycle */
    for (uint32_t r = 0; r < nr && found == NO_RULE; r++)
        for (uint32_t e = e_start[r]; e < e_start[r + 1]; e++)
            if (comp[edges[e].to] == comp[r] && (!growing_only || edges[e].grows)) {
                found = r;
                break;
            }
out:
    free(e_start);
    free(edges);
    free(index);
    free(low);
    free(comp);
    free(stack);
    free(call);
    free(next_edge);
    free(on_stack);
    return found;
}

static int check_left_recursion(parser *p) {
    uint8_t *nullable = malloc((size_t)p->n_rules + 1);
    if (!nullable) return oom(p);
    int rc = 0;
    for (int pass = 0; pass < 2 && !rc; pass++) {
        /* pass 0: what llama.cpp refuses (any cycle, direct emptiness); pass 1: every cycle that
         * would grow the stacks forever, with emptiness derived through other rules too. */
        if (find_nullable(p, pass == 0, nullable)) {
            rc = oom(p);
            break;
        }
        uint32_t r = find_left_cycle(p, nullable, pass == 1);
        if (r == NO_RULE - 1) rc = oom(p);
        else if (r != NO_RULE)
            rc = eli_fail(p->err, ELI_ERR_INVALID_ARG, "grammar: left recursion through rule '%s' (not supported)",
                          p->rules[p->rules[r].owner].name ? p->rules[p->rules[r].owner].name : "?");
    }
    free(nullable);
    return rc;
}

/* ---- driver ----------------------------------------------------------------------------------- */

static void free_parser(parser *p) {
    for (uint32_t i = 0; i < p->n_rules; i++) {
        free(p->rules[i].body.v);
        free(p->rules[i].name);
    }
    free(p->rules);
    free(p->name_index);
    free(p->classes);
    free(p->ranges);
    free(p->scratch);
}

/* Moves the parsed rules into one flat grammar. */
static int compile(parser *p, uint32_t root, eli_grammar **out) {
    eli_grammar *g = calloc(1, sizeof *g);
    if (!g) return oom(p);
    g->syms = malloc((p->total_syms + 1) * sizeof *g->syms);
    g->rule_start = malloc(((size_t)p->n_rules + 1) * sizeof *g->rule_start);
    if (!g->syms || !g->rule_start) {
        eli_grammar_free(g);
        return oom(p);
    }
    uint32_t n = 0;
    for (uint32_t r = 0; r < p->n_rules; r++) {
        g->rule_start[r] = n;
        memcpy(g->syms + n, p->rules[r].body.v, p->rules[r].body.n * sizeof *g->syms);
        n += (uint32_t)p->rules[r].body.n;
    }
    g->n_syms = n;
    g->n_rules = p->n_rules;
    g->root = root;
    g->classes = p->classes;
    g->n_classes = p->n_classes;
    g->ranges = p->ranges;
    g->n_ranges = p->n_ranges;
    p->classes = NULL;
    p->ranges = NULL;
    uint64_t h = fnv1a(g->syms, (size_t)n * sizeof *g->syms, FNV_BASIS);
    h = fnv1a(g->rule_start, (size_t)g->n_rules * sizeof *g->rule_start, h);
    h = fnv1a(&g->root, sizeof g->root, h);
    h = fnv1a(g->ranges, (size_t)g->n_ranges * sizeof *g->ranges, h);
    for (uint32_t i = 0; i < g->n_classes; i++) h = fnv1a(&g->classes[i].first, 2 * sizeof(uint32_t), h);
    g->fingerprint = h;
    *out = g;
    return 0;
}

int eli_grammar_parse(const char *text, size_t len, const eli_tokenizer *tok, eli_grammar **out, eli_error *err) {
    *out = NULL;
    if (!text && len) return eli_fail(err, ELI_ERR_INVALID_ARG, "grammar: NULL text");
    if (len > ELI_GRAMMAR_MAX_TEXT)
        return eli_fail(err, ELI_ERR_INVALID_ARG, "grammar: %zu bytes is above the limit of %u", len, ELI_GRAMMAR_MAX_TEXT);
    parser p = {.s = text, .len = len, .tok = tok, .err = err};
    const char *nul = len ? memchr(text, '\0', len) : NULL;
    int rc = nul ? fail_at(&p, (size_t)(nul - text), ELI_ERR_INVALID_ARG, "NUL byte in the grammar") : 0;
    if (!rc) skip_space(&p, 1);
    while (!rc && !at_end(&p)) rc = parse_rule(&p);
    uint32_t root = NO_RULE;
    for (uint32_t r = 0; r < p.n_rules && !rc; r++) {
        if (p.rules[r].defined) continue;
        rc = fail_at(&p, p.rules[r].first_ref ? p.rules[r].first_ref - 1 : 0, ELI_ERR_INVALID_ARG, "undefined rule '%s'",
                     p.rules[r].name);
    }
    if (!rc) {
        for (uint32_t r = 0; r < p.n_rules; r++)
            if (p.rules[r].name && !strcmp(p.rules[r].name, "root")) root = r;
        if (root == NO_RULE)
            rc = eli_fail(err, ELI_ERR_INVALID_ARG, "grammar: no rule named 'root' (the start rule)%s",
                          p.n_rules ? "" : ": the grammar is empty");
    }
    if (!rc) rc = check_left_recursion(&p);
    if (!rc) rc = compile(&p, root, out);
    free_parser(&p);
    return rc;
}

void eli_grammar_free(eli_grammar *g) {
    if (!g) return;
    free(g->syms);
    free(g->rule_start);
    free(g->classes);
    free(g->ranges);
    free(g);
}

int eli_gclass_has(const eli_grammar *g, const eli_gclass *c, uint32_t cp) {
    if (cp < 128) return (int)(c->ascii[cp >> 6] >> (cp & 63) & 1);
    const eli_grange *r = g->ranges + c->first;
    uint32_t lo = 0, hi = c->n; /* first range with r.hi >= cp */
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (r[mid].hi < cp) lo = mid + 1;
        else hi = mid;
    }
    return lo < c->n && r[lo].lo <= cp;
}
