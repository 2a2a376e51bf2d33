/* Gemma 4 chat template, reimplemented in C.
 *
 * Reference: llama.cpp models/templates/google-gemma-4-31B-it.jinja at commit 3fc65063d (2026-04-10,
 * PR #21704, "better align to the updated official gemma4 template"), unchanged up to the [LC] HEAD
 * 3f545becc named in shared/spec/gemma4.md. The output is what Python Jinja2 renders for that template
 * (that is how Hugging Face applies chat templates): the rules, in the template's order, are
 *
 *  1. "<bos>".
 *  2. A system turn when enable_thinking, a non-empty tools list, or messages[0] is system/developer:
 *     "<|turn>system\n" + ("<|think|>\n" if thinking) + trim(messages[0].content) if it is a system or
 *     developer message (it is then consumed) + "<|tool>" + trim(declaration) + "<tool|>" per tool +
 *     "<turn|>\n".
 *  3. Every other message except role "tool", in order:
 *     - "<|turn>" + ("model" for assistant, else the role as given) + "\n", except that an assistant message
 *       whose previous non-tool message is also an assistant continues that turn (no new header);
 *     - for an assistant with tool_calls after the last user message: its reasoning ("reasoning", else
 *       "reasoning_content") as "<|channel>thought\n" + text + "\n<channel|>"; all other reasoning is
 *       dropped from the history;
 *     - each tool call as "<|tool_call>call:" + name + "{" + arguments + "}<tool_call|>";
 *     - tool results: the message's own "tool_responses" (Gemma-native), or else the run of role "tool"
 *       messages that follows it, each as "<|tool_response>response:" + name + "{...}<tool_response|>";
 *     - the content: trimmed for user/system turns; for the model, with every "<|channel>...<channel|>"
 *       span removed, then trimmed; content parts are concatenated (each trimmed) and media parts become
 *       "<|image|>", "<|audio|>", "<|video|>";
 *     - the end: "<|tool_response>" if the message made tool calls and no result followed (the model is
 *       waiting for one), nothing if results followed and there is no content (the model's turn goes on),
 *       else "<turn|>\n".
 *  4. With add_generation_prompt, unless the last message ended on a tool call or tool result:
 *     "<|turn>model\n" + ("<|channel>thought\n<channel|>" unless thinking is enabled).
 *
 * Values are printed the Jinja2 way: mappings in dictsort order (keys compared case-insensitively, ties
 * in insertion order), strings in tool syntax quoted with <|"|>, booleans as true/false, and any other
 * value with Python's str(): integers as written, floats with repr() ("1.0", "1e-05"), null as "None".
 * Declaration quirks of the template are reproduced on purpose (schema properties named like a standard
 * key such as "type" are skipped; a parameters object without "type" leaves its brace open; ...).
 *
 * Deliberate deviations, each where the template would render garbage or silently lose data:
 *  - tool-call "arguments" given as a JSON string (the OpenAI wire form) are parsed, and rendered as the
 *    object they encode, as llama.cpp does before applying this template (common/chat.cpp,
 *    func_args_not_string); a string that is not a JSON object is emitted raw, as the template does;
 *  - a first system/developer message whose content is an array of text parts uses their concatenation
 *    (the template would print Python's repr of the list);
 *  - a tool message whose content is a JSON object renders as key:value pairs, as the template's mapping
 *    branch intends (Jinja2 takes a dict for a content-parts sequence there and fails);
 *  - these are errors rather than silent output: unknown roles, a missing or null content (allowed for an
 *    assistant that has tool calls or tool responses), content parts of unknown type, a "tool" message
 *    that does not follow an assistant message with tool_calls (the template drops it), a tool response
 *    whose name cannot be resolved (the template fails on it too).
 *  - Python's str.lower()/upper() are applied to ASCII letters only (sort keys, "type" names).
 * llama.cpp's own Jinja engine differs from Python Jinja2 in two corner cases (it prints null as an empty
 * string and sorts keys case-sensitively); we follow Python, the reference implementation. */
#include "chat.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strbuf.h"

/* ---- output buffer ---------------------------------------------------------------------------- */

typedef eli_strbuf sbuf;

static void sb_put(sbuf *b, const char *s, size_t len) { eli_sb_put(b, s, len); }
static void sb_puts(sbuf *b, const char *s) { eli_sb_puts(b, s); }

/* Renderer state: the first error wins; every step returns early once rc is set. */
typedef struct {
    eli_error *err;
    int rc;
    const char *unit; /* "message" or "tool": what msg indexes, for errors */
    size_t msg;       /* index in the caller's messages (or tools) array of the item being rendered */
} ctx;

static int fail(ctx *c, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static int fail(ctx *c, const char *fmt, ...) {
    if (!c->rc) {
        char what[400];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(what, sizeof what, fmt, ap);
        va_end(ap);
        c->rc = eli_fail(c->err, ELI_ERR_INVALID_ARG, "chat template: %s %zu: %s", c->unit, c->msg, what);
    }
    return c->rc;
}

/* ---- Python / Jinja2 value semantics ---------------------------------------------------------- */

/* Member lookup as Python's dict after json.loads: the last duplicate wins. NULL is Jinja's
 * "undefined" (missing key, or the value is not a mapping). */
static const eli_json *jget(const eli_json *v, const char *key) {
    if (!v || v->type != ELI_JSON_OBJECT) return NULL;
    for (size_t i = v->n; i-- > 0;)
        if (!strcmp(v->keys[i], key)) return &v->items[i];
    return NULL;
}

static int has_key(const eli_json *v, const char *key) { return jget(v, key) != NULL; }

/* Python truthiness; undefined is false. */
static int truthy(const eli_json *v) {
    if (!v) return 0;
    switch (v->type) {
    case ELI_JSON_NULL: return 0;
    case ELI_JSON_BOOL: return v->boolean;
    case ELI_JSON_NUMBER: return v->number != 0;
    case ELI_JSON_STRING: return v->str_len > 0;
    default: return v->n > 0;
    }
}

static int is_str(const eli_json *v) { return v && v->type == ELI_JSON_STRING; }
static int is_obj(const eli_json *v) { return v && v->type == ELI_JSON_OBJECT; }
static int is_arr(const eli_json *v) { return v && v->type == ELI_JSON_ARRAY; }

static int streq(const eli_json *v, const char *s) { return is_str(v) && !strcmp(v->str, s); }

/* Python's repr(float): the shortest digit string that reads back to the same double, in fixed
 * notation when the decimal exponent is in [-4, 16), else in exponent notation with a sign and at least
 * two exponent digits. */
static void py_float(sbuf *b, double x) {
    if (isnan(x)) return sb_puts(b, "nan");
    if (isinf(x)) return sb_puts(b, x < 0 ? "-inf" : "inf");
    if (x == 0) return sb_puts(b, signbit(x) ? "-0.0" : "0.0");
    char buf[64];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*e", prec - 1, x);
        if (strtod(buf, NULL) == x) break;
    }
    /* Pull the digits and the exponent out of d.ddde±XX (the decimal point may be locale-specific). */
    char digits[32];
    size_t nd = 0;
    const char *q = buf;
    if (*q == '-') q++;
    for (; *q && *q != 'e'; q++)
        if (*q >= '0' && *q <= '9' && nd < sizeof digits - 1) digits[nd++] = *q;
    int e = *q == 'e' ? atoi(q + 1) : 0;
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    digits[nd] = '\0';
    if (x < 0) sb_puts(b, "-");
    int decpt = e + 1; /* digits[0..decpt) are the integer part */
    if (decpt <= -4 || decpt > 16) {
        sb_put(b, digits, 1);
        if (nd > 1) {
            sb_puts(b, ".");
            sb_put(b, digits + 1, nd - 1);
        }
        snprintf(buf, sizeof buf, "e%c%02d", e < 0 ? '-' : '+', e < 0 ? -e : e);
        sb_puts(b, buf);
    } else if (decpt <= 0) {
        sb_puts(b, "0.");
        for (int i = 0; i < -decpt; i++) sb_puts(b, "0");
        sb_put(b, digits, nd);
    } else if ((size_t)decpt >= nd) {
        sb_put(b, digits, nd);
        for (size_t i = nd; i < (size_t)decpt; i++) sb_puts(b, "0");
        sb_puts(b, ".0");
    } else {
        sb_put(b, digits, (size_t)decpt);
        sb_puts(b, ".");
        sb_put(b, digits + decpt, nd - (size_t)decpt);
    }
}

/* str() of a JSON number as Python's json module would load it: an integer literal (no '.', 'e', 'E')
 * becomes an int, printed exactly as written ("-0" becomes "0"); anything else a float. */
static void py_number(sbuf *b, const eli_json *v) {
    if (v->str && v->str_len) {
        if (!strpbrk(v->str, ".eE")) {
            if (!strcmp(v->str, "-0")) sb_puts(b, "0");
            else sb_put(b, v->str, v->str_len);
            return;
        }
        return py_float(b, v->number);
    }
    /* A value built without its literal: treat integral values in the exact double range as ints. */
    if (v->number == floor(v->number) && fabs(v->number) < 9007199254740992.0) {
        char buf[32];
        snprintf(buf, sizeof buf, "%.0f", v->number == 0 ? 0.0 : v->number);
        return sb_puts(b, buf);
    }
    py_float(b, v->number);
}

/* Python repr() of a str: single quotes unless the text has ' but no ". Control characters are escaped
 * as Python does for ASCII; non-ASCII text is kept (Python also escapes non-printable non-ASCII code
 * points, a corner case we do not reproduce). */
static void py_repr_str(sbuf *b, const char *s, size_t len) {
    char quote = memchr(s, '\'', len) && !memchr(s, '"', len) ? '"' : '\'';
    sb_put(b, &quote, 1);
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)s[i];
        char esc[8];
        if (ch == '\\' || ch == (unsigned char)quote) {
            esc[0] = '\\';
            esc[1] = (char)ch;
            sb_put(b, esc, 2);
        } else if (ch == '\n') sb_puts(b, "\\n");
        else if (ch == '\r') sb_puts(b, "\\r");
        else if (ch == '\t') sb_puts(b, "\\t");
        else if (ch < 0x20 || ch == 0x7f) {
            snprintf(esc, sizeof esc, "\\x%02x", ch);
            sb_puts(b, esc);
        } else sb_put(b, s + i, 1);
    }
    sb_put(b, &quote, 1);
}

static size_t *dict_order(const eli_json *obj, size_t *count);

static void py_repr(sbuf *b, const eli_json *v);

/* Python str(): what "{{ value }}" prints. */
static void py_str(sbuf *b, const eli_json *v) {
    if (!v) return; /* undefined prints nothing */
    switch (v->type) {
    case ELI_JSON_STRING: sb_put(b, v->str, v->str_len); break;
    default: py_repr(b, v); break;
    }
}

static void py_repr(sbuf *b, const eli_json *v) {
    switch (v->type) {
    case ELI_JSON_NULL: sb_puts(b, "None"); break;
    case ELI_JSON_BOOL: sb_puts(b, v->boolean ? "True" : "False"); break;
    case ELI_JSON_NUMBER: py_number(b, v); break;
    case ELI_JSON_STRING: py_repr_str(b, v->str, v->str_len); break;
    case ELI_JSON_ARRAY:
        sb_puts(b, "[");
        for (size_t i = 0; i < v->n; i++) {
            if (i) sb_puts(b, ", ");
            py_repr(b, &v->items[i]);
        }
        sb_puts(b, "]");
        break;
    default: { /* a dict prints in insertion order (first occurrence), with the last duplicate's value */
        sb_puts(b, "{");
        size_t n = 0;
        for (size_t i = 0; i < v->n; i++) {
            size_t j = 0;
            while (j < i && strcmp(v->keys[j], v->keys[i])) j++;
            if (j < i) continue; /* a later duplicate: printed at its first position */
            if (n++) sb_puts(b, ", ");
            py_repr_str(b, v->keys[i], strlen(v->keys[i]));
            sb_puts(b, ": ");
            py_repr(b, jget(v, v->keys[i]));
        }
        sb_puts(b, "}");
        break;
    }
    }
}

/* Case-insensitive comparison as Jinja2's dictsort does by default (ASCII letters folded; byte order
 * of UTF-8 equals code point order, as Python compares str). */
static int casecmp(const char *a, const char *b) {
    for (;; a++, b++) {
        unsigned char x = (unsigned char)*a, y = (unsigned char)*b;
        if (x >= 'A' && x <= 'Z') x = (unsigned char)(x - 'A' + 'a');
        if (y >= 'A' && y <= 'Z') y = (unsigned char)(y - 'A' + 'a');
        if (x != y || !x) return (int)x - (int)y;
    }
}

/* Indices of obj's members in `dictsort` order: one entry per distinct key (the index of its last
 * occurrence, which holds Python's value), stably sorted by casecmp on the key, ties in the order of
 * first occurrence. Merge sort, so large tool results stay O(n log n). Returns NULL on OOM (count 0 is
 * returned as a non-NULL 1-element allocation so the caller can tell it from OOM). */
static size_t *dict_order(const eli_json *obj, size_t *count) {
    size_t n = obj->n;
    size_t *idx = malloc((n ? n : 1) * sizeof *idx);
    size_t *tmp = malloc((n ? n : 1) * sizeof *tmp);
    if (!idx || !tmp) {
        free(idx);
        free(tmp);
        return NULL;
    }
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        size_t j = 0;
        while (j < m && strcmp(obj->keys[idx[j]], obj->keys[i])) j++;
        if (j < m) idx[j] = i; /* duplicate: keep the first position, take the later value */
        else idx[m++] = i;
    }
    /* Bottom-up stable merge sort of idx[0..m). */
    for (size_t width = 1; width < m; width *= 2) {
        for (size_t lo = 0; lo < m; lo += 2 * width) {
            size_t mid = lo + width < m ? lo + width : m, hi = lo + 2 * width < m ? lo + 2 * width : m;
            size_t a = lo, bb = mid, o = lo;
            while (a < mid && bb < hi)
                tmp[o++] = casecmp(obj->keys[idx[bb]], obj->keys[idx[a]]) < 0 ? idx[bb++] : idx[a++];
            while (a < mid) tmp[o++] = idx[a++];
            while (bb < hi) tmp[o++] = idx[bb++];
        }
        memcpy(idx, tmp, m * sizeof *idx);
    }
    free(tmp);
    *count = m;
    return idx;
}

/* Python's str.strip(): the whitespace of str.isspace(). */
static size_t space_len_at(const unsigned char *s, size_t len) {
    unsigned char c = s[0];
    if ((c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20)) return 1;
    if (c == 0xC2 && len >= 2 && (s[1] == 0x85 || s[1] == 0xA0)) return 2;
    if (c == 0xE1 && len >= 3 && s[1] == 0x9A && s[2] == 0x80) return 3; /* U+1680 */
    if (c == 0xE2 && len >= 3) {
        if (s[1] == 0x80 && ((s[2] >= 0x80 && s[2] <= 0x8A) || s[2] == 0xA8 || s[2] == 0xA9 || s[2] == 0xAF))
            return 3; /* U+2000..200A, U+2028, U+2029, U+202F */
        if (s[1] == 0x81 && s[2] == 0x9F) return 3; /* U+205F */
    }
    if (c == 0xE3 && len >= 3 && s[1] == 0x80 && s[2] == 0x80) return 3; /* U+3000 */
    return 0;
}

static void trim_span(const char *s, size_t len, size_t *start, size_t *end) {
    const unsigned char *u = (const unsigned char *)s;
    size_t a = 0, z = len, k;
    while (a < z && (k = space_len_at(u + a, z - a))) a += k;
    while (z > a) {
        /* Step back to the start of the last character (at most 3 continuation bytes). */
        size_t c0 = z - 1;
        while (c0 > a && z - c0 < 4 && (u[c0] & 0xC0) == 0x80) c0--;
        if (space_len_at(u + c0, z - c0) != z - c0) break;
        z = c0;
    }
    *start = a;
    *end = z;
}

static void put_trimmed(sbuf *b, const char *s, size_t len) {
    size_t a, z;
    trim_span(s, len, &a, &z);
    sb_put(b, s + a, z - a);
}

/* The template's strip_thinking macro: split on "<channel|>", keep of each piece what precedes its
 * first "<|channel>", join, trim. */
static void put_stripped(sbuf *b, const char *s, size_t len) {
    static const char open_tag[] = "<|channel>", close_tag[] = "<channel|>";
    const size_t ol = sizeof open_tag - 1, cl = sizeof close_tag - 1;
    sbuf kept = {0};
    size_t i = 0;
    for (;;) {
        /* piece = s[i .. next close tag or end) */
        size_t j = i;
        while (j < len && !(len - j >= cl && !memcmp(s + j, close_tag, cl))) j++;
        size_t k = i;
        while (k < j && !(j - k >= ol && !memcmp(s + k, open_tag, ol))) k++;
        sb_put(&kept, s + i, k - i);
        if (j >= len) break;
        i = j + cl;
    }
    if (kept.oom) b->oom = 1;
    else if (kept.n) put_trimmed(b, kept.p, kept.n);
    free(kept.p);
}

/* ASCII upper-case copy of str(v) ("" for undefined), as `v | upper`. NULL on OOM. */
static char *upper_dup(const eli_json *v) {
    sbuf t = {0};
    py_str(&t, v);
    sb_put(&t, "", 0);
    if (t.oom) {
        free(t.p);
        return NULL;
    }
    if (!t.p) return calloc(1, 1);
    for (char *q = t.p; *q; q++)
        if (*q >= 'a' && *q <= 'z') *q = (char)(*q - 'a' + 'A');
    return t.p;
}

/* ---- template macros -------------------------------------------------------------------------- */

#define Q "<|\"|>" /* Gemma 4's string delimiter token */

static void format_argument(ctx *c, sbuf *b, const eli_json *v, int escape_keys) {
    if (c->rc || !v) return;
    switch (v->type) {
    case ELI_JSON_STRING:
        sb_puts(b, Q);
        sb_put(b, v->str, v->str_len);
        sb_puts(b, Q);
        break;
    case ELI_JSON_BOOL: sb_puts(b, v->boolean ? "true" : "false"); break;
    case ELI_JSON_OBJECT: {
        size_t n, *order = dict_order(v, &n);
        if (!order) {
            b->oom = 1;
            return;
        }
        sb_puts(b, "{");
        for (size_t i = 0; i < n; i++) {
            if (i) sb_puts(b, ",");
            if (escape_keys) sb_puts(b, Q);
            sb_puts(b, v->keys[order[i]]);
            if (escape_keys) sb_puts(b, Q);
            sb_puts(b, ":");
            format_argument(c, b, &v->items[order[i]], escape_keys);
        }
        sb_puts(b, "}");
        free(order);
        break;
    }
    case ELI_JSON_ARRAY:
        sb_puts(b, "[");
        for (size_t i = 0; i < v->n; i++) {
            if (i) sb_puts(b, ",");
            format_argument(c, b, &v->items[i], escape_keys);
        }
        sb_puts(b, "]");
        break;
    default: py_str(b, v); break; /* numbers, null ("None") */
    }
}

/* `for item in v` over a "required" list, printing <|"|>item<|"|> joined by ','. Python iterates a
 * list by item, a dict by key and a str by character; anything else is a TypeError. */
static void format_required(ctx *c, sbuf *b, const eli_json *v) {
    if (c->rc) return;
    if (is_arr(v)) {
        for (size_t i = 0; i < v->n; i++) {
            if (i) sb_puts(b, ",");
            sb_puts(b, Q);
            py_str(b, &v->items[i]);
            sb_puts(b, Q);
        }
    } else if (is_obj(v)) {
        for (size_t i = 0; i < v->n; i++) {
            if (i) sb_puts(b, ",");
            sb_puts(b, Q);
            sb_puts(b, v->keys[i]);
            sb_puts(b, Q);
        }
    } else if (is_str(v)) {
        for (size_t i = 0; i < v->str_len;) {
            size_t k = 1;
            while (i + k < v->str_len && ((unsigned char)v->str[i + k] & 0xC0) == 0x80) k++;
            if (i) sb_puts(b, ",");
            sb_puts(b, Q);
            sb_put(b, v->str + i, k);
            sb_puts(b, Q);
            i += k;
        }
    } else {
        fail(c, "tool declaration: \"required\" must be a list");
    }
}

/* The template's format_parameters macro over a mapping of property schemas. */
static void format_parameters(ctx *c, sbuf *b, const eli_json *props) {
    static const char *const standard_keys[] = {"description", "type", "properties", "required", "nullable"};
    if (c->rc) return;
    size_t n, *order = dict_order(props, &n);
    if (!order) {
        b->oom = 1;
        return;
    }
    int found_first = 0;
    for (size_t oi = 0; oi < n && !c->rc && !b->oom; oi++) {
        const char *key = props->keys[order[oi]];
        const eli_json *value = &props->items[order[oi]];
        int standard = 0;
        for (size_t s = 0; s < sizeof standard_keys / sizeof standard_keys[0]; s++)
            if (!strcmp(key, standard_keys[s])) standard = 1;
        if (standard) continue;
        if (found_first) sb_puts(b, ",");
        found_first = 1;
        sb_puts(b, key);
        sb_puts(b, ":{");
        int add_comma = 0;
#define COMMA() (add_comma ? sb_puts(b, ",") : (void)(add_comma = 1))
        const eli_json *desc = jget(value, "description");
        if (truthy(desc)) {
            sb_puts(b, "description:" Q);
            py_str(b, desc);
            sb_puts(b, Q);
            add_comma = 1;
        }
        char *type = upper_dup(jget(value, "type"));
        if (!type) {
            b->oom = 1;
            break;
        }
        if (!strcmp(type, "STRING")) {
            const eli_json *en = jget(value, "enum");
            if (truthy(en)) {
                COMMA();
                sb_puts(b, "enum:");
                format_argument(c, b, en, 1);
            }
        } else if (!strcmp(type, "ARRAY")) {
            const eli_json *items = jget(value, "items");
            if (is_obj(items) && items->n) {
                COMMA();
                sb_puts(b, "items:{");
                size_t ni, *iorder = dict_order(items, &ni);
                if (!iorder) b->oom = 1;
                int ifirst = 0;
                for (size_t k = 0; iorder && k < ni; k++) {
                    const char *ik = items->keys[iorder[k]];
                    const eli_json *iv = &items->items[iorder[k]];
                    if (iv->type == ELI_JSON_NULL) continue;
                    if (ifirst) sb_puts(b, ",");
                    ifirst = 1;
                    if (!strcmp(ik, "properties")) {
                        sb_puts(b, "properties:{");
                        if (is_obj(iv)) format_parameters(c, b, iv);
                        sb_puts(b, "}");
                    } else if (!strcmp(ik, "required")) {
                        sb_puts(b, "required:[");
                        format_required(c, b, iv);
                        sb_puts(b, "]");
                    } else if (!strcmp(ik, "type")) {
                        sb_puts(b, "type:");
                        if (is_str(iv)) {
                            char *u = upper_dup(iv);
                            if (!u) b->oom = 1;
                            else sb_puts(b, Q), sb_puts(b, u), sb_puts(b, Q);
                            free(u);
                        } else if (is_arr(iv) || is_obj(iv)) { /* item_value | map('upper') | list */
                            sb_puts(b, "[");
                            for (size_t t = 0; t < iv->n; t++) {
                                eli_json key_as_str = {.type = ELI_JSON_STRING};
                                const eli_json *elem = &iv->items[t];
                                if (is_obj(iv)) {
                                    key_as_str.str = iv->keys[t];
                                    key_as_str.str_len = strlen(iv->keys[t]);
                                    elem = &key_as_str;
                                }
                                char *u = upper_dup(elem);
                                if (!u) b->oom = 1;
                                else sb_puts(b, t ? "," Q : Q), sb_puts(b, u), sb_puts(b, Q);
                                free(u);
                            }
                            sb_puts(b, "]");
                        } else {
                            fail(c, "tool declaration: items \"type\" must be a string or a list");
                        }
                    } else {
                        sb_puts(b, ik);
                        sb_puts(b, ":");
                        format_argument(c, b, iv, 1);
                    }
                }
                free(iorder);
                sb_puts(b, "}");
            }
        }
        if (truthy(jget(value, "nullable"))) {
            COMMA();
            sb_puts(b, "nullable:true");
        }
        if (!strcmp(type, "OBJECT")) {
            const eli_json *pr = jget(value, "properties");
            if (is_obj(pr) || is_obj(value)) {
                COMMA();
                sb_puts(b, "properties:{");
                format_parameters(c, b, is_obj(pr) ? pr : value);
                sb_puts(b, "}");
            }
            const eli_json *req = jget(value, "required");
            if (truthy(req)) {
                COMMA();
                sb_puts(b, "required:[");
                format_required(c, b, req);
                sb_puts(b, "]");
            }
        }
        COMMA();
        sb_puts(b, "type:" Q);
        sb_puts(b, type);
        sb_puts(b, Q "}");
        free(type);
#undef COMMA
    }
    free(order);
}

/* The template's format_function_declaration macro (the caller trims its result). */
static void format_function_declaration(ctx *c, sbuf *b, const eli_json *tool) {
    const eli_json *fn = jget(tool, "function");
    if (!is_obj(fn)) {
        fail(c, "tool declaration has no \"function\" object");
        return;
    }
    sb_puts(b, "declaration:");
    py_str(b, jget(fn, "name"));
    sb_puts(b, "{description:" Q);
    py_str(b, jget(fn, "description"));
    sb_puts(b, Q);
    const eli_json *params = jget(fn, "parameters");
    if (truthy(params)) {
        sb_puts(b, ",parameters:{");
        const eli_json *props = jget(params, "properties");
        if (truthy(props)) {
            if (!is_obj(props)) {
                fail(c, "tool declaration: \"parameters.properties\" must be an object");
                return;
            }
            sb_puts(b, "properties:{");
            format_parameters(c, b, props);
            sb_puts(b, "},");
        }
        const eli_json *req = jget(params, "required");
        if (truthy(req)) {
            sb_puts(b, "required:[");
            format_required(c, b, req);
            sb_puts(b, "],");
        }
        const eli_json *type = jget(params, "type");
        if (truthy(type)) {
            char *u = upper_dup(type);
            if (!u) b->oom = 1;
            else sb_puts(b, "type:" Q), sb_puts(b, u), sb_puts(b, Q "}");
            free(u);
        }
    }
    if (has_key(fn, "response")) {
        const eli_json *resp = jget(fn, "response");
        sb_puts(b, ",response:{");
        const eli_json *d = jget(resp, "description");
        if (truthy(d)) {
            sb_puts(b, "description:" Q);
            py_str(b, d);
            sb_puts(b, Q ",");
        }
        char *u = upper_dup(jget(resp, "type"));
        if (!u) b->oom = 1;
        else if (!strcmp(u, "OBJECT")) sb_puts(b, "type:" Q "OBJECT" Q "}");
        free(u);
    }
    sb_puts(b, "}");
}

/* key:value pairs of a mapping in dictsort order, values with unquoted keys (tool-call arguments and
 * tool results). */
static void format_pairs(ctx *c, sbuf *b, const eli_json *obj) {
    size_t n, *order = dict_order(obj, &n);
    if (!order) {
        b->oom = 1;
        return;
    }
    for (size_t i = 0; i < n; i++) {
        if (i) sb_puts(b, ",");
        sb_puts(b, obj->keys[order[i]]);
        sb_puts(b, ":");
        format_argument(c, b, &obj->items[order[i]], 0);
    }
    free(order);
}

/* The template's format_tool_response_block macro. */
static void format_tool_response(ctx *c, sbuf *b, const char *name, const eli_json *response) {
    sb_puts(b, "<|tool_response>response:");
    sb_puts(b, name);
    if (is_obj(response)) {
        sb_puts(b, "{");
        format_pairs(c, b, response);
        sb_puts(b, "}");
    } else {
        sb_puts(b, "{value:");
        format_argument(c, b, response, 0);
        sb_puts(b, "}");
    }
    sb_puts(b, "<tool_response|>");
}

/* ---- validation ------------------------------------------------------------------------------- */

enum role { ROLE_SYSTEM, ROLE_DEVELOPER, ROLE_USER, ROLE_ASSISTANT, ROLE_TOOL };

static int role_of(const eli_json *m) {
    static const char *const names[] = {"system", "developer", "user", "assistant", "tool"};
    const eli_json *r = jget(m, "role");
    for (int i = 0; i < 5; i++)
        if (streq(r, names[i])) return i;
    return -1;
}

/* Checks one message before anything is rendered, so that errors name the message and the template
 * logic below can rely on the shapes. */
static int validate_message(ctx *c, const eli_json *m) {
    if (!is_obj(m)) return fail(c, "not an object");
    const eli_json *r = jget(m, "role");
    if (!r) return fail(c, "has no \"role\"");
    if (!is_str(r)) return fail(c, "\"role\" is not a string");
    int role = role_of(m);
    if (role < 0) return fail(c, "unknown role '%s' (expected system, developer, user, assistant or tool)", r->str);

    const eli_json *content = jget(m, "content");
    const eli_json *calls = jget(m, "tool_calls");
    const eli_json *responses = jget(m, "tool_responses");
    int null_content = !content || content->type == ELI_JSON_NULL;
    if (null_content && !(role == ROLE_ASSISTANT && (truthy(calls) || truthy(responses))))
        return fail(c, "missing \"content\"");
    if (!null_content && role != ROLE_TOOL && !is_str(content) && !is_arr(content))
        return fail(c, "\"content\" must be a string or an array of parts");
    if (is_arr(content)) {
        for (size_t i = 0; i < content->n; i++) {
            const eli_json *part = &content->items[i];
            const eli_json *type = jget(part, "type");
            if (!is_obj(part)) return fail(c, "a content part is not an object");
            if (streq(type, "text")) {
                if (!is_str(jget(part, "text"))) return fail(c, "a text part has no string \"text\"");
            } else if (role == ROLE_TOOL) {
                continue; /* the template keeps only the text parts of a tool result */
            } else if (!streq(type, "image") && !streq(type, "audio") && !streq(type, "video")) {
                return fail(c, "unsupported content part type '%s' (expected text, image, audio or video)",
                            is_str(type) ? type->str : "(none)");
            }
        }
    }
    if (calls && calls->type != ELI_JSON_NULL) {
        if (!is_arr(calls)) return fail(c, "\"tool_calls\" must be an array");
        for (size_t i = 0; i < calls->n; i++) {
            const eli_json *fn = jget(&calls->items[i], "function");
            if (!is_obj(fn)) return fail(c, "a tool call has no \"function\" object");
            if (!is_str(jget(fn, "name"))) return fail(c, "a tool call has no string \"function.name\"");
        }
    }
    if (responses && responses->type != ELI_JSON_NULL) {
        if (!is_arr(responses)) return fail(c, "\"tool_responses\" must be an array");
        for (size_t i = 0; i < responses->n; i++) {
            const eli_json *tr = &responses->items[i];
            if (!is_obj(tr)) return fail(c, "a tool response is not an object");
            if (has_key(tr, "name") && !is_str(jget(tr, "name")))
                return fail(c, "a tool response \"name\" is not a string");
            if (!has_key(tr, "response")) return fail(c, "a tool response has no \"response\"");
        }
    }
    const eli_json *th = jget(m, "reasoning");
    if (!truthy(th)) th = jget(m, "reasoning_content");
    if (truthy(th) && !is_str(th)) return fail(c, "reasoning content must be a string");
    return ELI_OK;
}

/* ---- rendering -------------------------------------------------------------------------------- */

enum prev_type { PREV_NONE, PREV_TOOL_CALL, PREV_TOOL_RESPONSE, PREV_MEDIA };

/* Text of a tool result given as content parts: the concatenation of the text parts. */
static void put_text_parts(sbuf *b, const eli_json *parts) {
    for (size_t i = 0; i < parts->n; i++)
        if (streq(jget(&parts->items[i], "type"), "text")) py_str(b, jget(&parts->items[i], "text"));
}

/* Python ==, for the tool_call_id match (undefined and null are both None here, as .get() returns). */
static int py_eq(const eli_json *a, const eli_json *b) {
    int an = !a || a->type == ELI_JSON_NULL, bn = !b || b->type == ELI_JSON_NULL;
    if (an || bn) return an && bn;
    if (a->type == ELI_JSON_STRING || b->type == ELI_JSON_STRING)
        return a->type == b->type && a->str_len == b->str_len && !memcmp(a->str, b->str, a->str_len);
    if ((a->type == ELI_JSON_NUMBER || a->type == ELI_JSON_BOOL) && (b->type == ELI_JSON_NUMBER || b->type == ELI_JSON_BOOL)) {
        double x = a->type == ELI_JSON_BOOL ? a->boolean : a->number;
        double y = b->type == ELI_JSON_BOOL ? b->boolean : b->number;
        return x == y;
    }
    return a == b;
}

static void render_tool_call(ctx *c, sbuf *b, const eli_json *call) {
    const eli_json *fn = jget(call, "function");
    const eli_json *args = jget(fn, "arguments");
    sb_puts(b, "<|tool_call>call:");
    py_str(b, jget(fn, "name"));
    sb_puts(b, "{");
    if (is_obj(args)) {
        format_pairs(c, b, args);
    } else if (is_str(args)) {
        /* OpenAI clients send the arguments as JSON text: render the object it encodes (see the top). */
        eli_json *parsed = eli_json_parse(args->str, args->str_len, NULL);
        if (is_obj(parsed)) format_pairs(c, b, parsed);
        else sb_put(b, args->str, args->str_len);
        eli_json_free(parsed);
    }
    sb_puts(b, "}<tool_call|>");
}

static void render_content(sbuf *b, const eli_json *content, int is_model, int *prev) {
    if (is_str(content)) {
        if (is_model) put_stripped(b, content->str, content->str_len);
        else put_trimmed(b, content->str, content->str_len);
    } else if (is_arr(content)) {
        for (size_t i = 0; i < content->n; i++) {
            const eli_json *part = &content->items[i];
            const eli_json *type = jget(part, "type");
            if (streq(type, "text")) {
                const eli_json *text = jget(part, "text");
                if (is_model) put_stripped(b, text->str, text->str_len);
                else put_trimmed(b, text->str, text->str_len);
            } else if (streq(type, "image")) {
                sb_puts(b, "<|image|>");
                *prev = PREV_MEDIA;
            } else if (streq(type, "audio")) {
                sb_puts(b, "<|audio|>");
                *prev = PREV_MEDIA;
            } else if (streq(type, "video")) {
                sb_puts(b, "<|video|>");
                *prev = PREV_MEDIA;
            }
        }
    }
}

static void render(ctx *c, sbuf *b, const eli_json *messages, const eli_chat_options *o) {
    const eli_json *tools = o->tools;
    if (tools && tools->type != ELI_JSON_NULL && !is_arr(tools)) {
        c->rc = eli_fail(c->err, ELI_ERR_INVALID_ARG, "chat template: tools must be an array");
        return;
    }
    for (size_t i = 0; tools && is_arr(tools) && i < tools->n; i++)
        if (!is_obj(&tools->items[i]) || !is_obj(jget(&tools->items[i], "function"))) {
            c->rc = eli_fail(c->err, ELI_ERR_INVALID_ARG,
                             "chat template: tool %zu is not an object with a \"function\" object", i);
            return;
        }
    for (size_t i = 0; i < messages->n; i++) {
        c->msg = i;
        if (validate_message(c, &messages->items[i])) return;
    }

    const eli_json *msgs = messages->items;
    size_t n = messages->n, first = 0;
    int first_role = role_of(&msgs[0]);
    int sys_first = first_role == ROLE_SYSTEM || first_role == ROLE_DEVELOPER;

    sb_puts(b, "<bos>");
    if (o->enable_thinking || truthy(tools) || sys_first) {
        sb_puts(b, "<|turn>system\n");
        if (o->enable_thinking) sb_puts(b, "<|think|>\n");
        if (sys_first) {
            const eli_json *content = jget(&msgs[0], "content");
            if (is_str(content)) {
                put_trimmed(b, content->str, content->str_len);
            } else { /* text parts, concatenated (deviation, see the top) */
                sbuf t = {0};
                for (size_t i = 0; i < content->n; i++) {
                    const eli_json *text = jget(&content->items[i], "text");
                    if (!streq(jget(&content->items[i], "type"), "text")) {
                        c->msg = 0;
                        fail(c, "the first system message may only have text parts");
                        free(t.p);
                        return;
                    }
                    sb_put(&t, text->str, text->str_len);
                }
                if (t.oom) b->oom = 1;
                else if (t.n) put_trimmed(b, t.p, t.n);
                free(t.p);
            }
            first = 1;
        }
        for (size_t i = 0; truthy(tools) && i < tools->n && !c->rc; i++) {
            sbuf d = {0};
            c->unit = "tool";
            c->msg = i;
            format_function_declaration(c, &d, &tools->items[i]);
            sb_puts(b, "<|tool>");
            if (d.oom) b->oom = 1;
            else if (d.n) put_trimmed(b, d.p, d.n);
            free(d.p);
            sb_puts(b, "<tool|>");
        }
        sb_puts(b, "<turn|>\n");
        c->unit = "message";
    }
    if (c->rc) return;

    /* Tool messages are rendered by the assistant message they answer; any other one is an error. */
    for (size_t i = first; i < n; i++) {
        if (role_of(&msgs[i]) != ROLE_TOOL) continue;
        size_t j = i;
        while (j > first && role_of(&msgs[j - 1]) == ROLE_TOOL) j--;
        const eli_json *owner = j > first ? &msgs[j - 1] : NULL;
        if (!owner || role_of(owner) != ROLE_ASSISTANT || !truthy(jget(owner, "tool_calls")) ||
            truthy(jget(owner, "tool_responses"))) {
            c->msg = i;
            fail(c, "a tool message must follow an assistant message with tool_calls");
            return;
        }
    }

    size_t last_user = SIZE_MAX; /* none */
    for (size_t i = first; i < n; i++)
        if (role_of(&msgs[i]) == ROLE_USER) last_user = i;

    int prev = PREV_NONE;
    for (size_t i = first; i < n && !c->rc && !b->oom; i++) {
        const eli_json *m = &msgs[i];
        int role = role_of(m);
        if (role == ROLE_TOOL) continue;
        c->msg = i;
        prev = PREV_NONE;
        int is_model = role == ROLE_ASSISTANT;

        /* An assistant message right after another (tool messages aside) continues the same turn. */
        int prev_nt = -1;
        for (size_t j = i; j-- > first;) {
            int r = role_of(&msgs[j]);
            if (r != ROLE_TOOL) {
                prev_nt = r;
                break;
            }
        }
        if (!(is_model && prev_nt == ROLE_ASSISTANT)) {
            sb_puts(b, "<|turn>");
            sb_puts(b, is_model ? "model" : jget(m, "role")->str);
            sb_puts(b, "\n");
        }

        const eli_json *calls = jget(m, "tool_calls");
        const eli_json *thinking = jget(m, "reasoning");
        if (!truthy(thinking)) thinking = jget(m, "reasoning_content");
        if (truthy(thinking) && (last_user == SIZE_MAX || i > last_user) && truthy(calls)) {
            sb_puts(b, "<|channel>thought\n");
            sb_put(b, thinking->str, thinking->str_len);
            sb_puts(b, "\n<channel|>");
        }

        if (truthy(calls)) {
            for (size_t k = 0; k < calls->n; k++) render_tool_call(c, b, &calls->items[k]);
            prev = PREV_TOOL_CALL;
        }

        int had_results = 0;
        const eli_json *responses = jget(m, "tool_responses");
        if (truthy(responses)) {
            for (size_t k = 0; k < responses->n; k++) {
                const eli_json *tr = &responses->items[k];
                const eli_json *name = jget(tr, "name");
                format_tool_response(c, b, name ? name->str : "unknown", jget(tr, "response"));
                had_results = 1;
                prev = PREV_TOOL_RESPONSE;
            }
        } else if (truthy(calls)) {
            for (size_t k = i + 1; k < n && role_of(&msgs[k]) == ROLE_TOOL; k++) {
                const eli_json *follow = &msgs[k];
                /* The name: the tool call whose id equals tool_call_id (the last such), else "name".
                 * Note that a missing id equals a missing tool_call_id (None == None). */
                const eli_json *name = jget(follow, "name");
                const eli_json *call_id = jget(follow, "tool_call_id");
                for (size_t t = 0; t < calls->n; t++)
                    if (py_eq(jget(&calls->items[t], "id"), call_id))
                        name = jget(jget(&calls->items[t], "function"), "name");
                c->msg = k;
                if (!name || name->type == ELI_JSON_NULL) {
                    fail(c, "tool result has no \"name\" and its tool_call_id matches no tool call");
                    return;
                }
                if (!is_str(name)) {
                    fail(c, "tool result \"name\" is not a string");
                    return;
                }
                const eli_json *body = jget(follow, "content");
                if (is_arr(body)) {
                    sbuf t = {0};
                    put_text_parts(&t, body);
                    eli_json s = {.type = ELI_JSON_STRING, .str = t.p ? t.p : "", .str_len = t.n};
                    if (t.oom) b->oom = 1;
                    else format_tool_response(c, b, name->str, &s);
                    free(t.p);
                } else {
                    format_tool_response(c, b, name->str, body);
                }
                c->msg = i;
                had_results = 1;
                prev = PREV_TOOL_RESPONSE;
            }
        }

        const eli_json *content = jget(m, "content");
        render_content(b, content, is_model, &prev);

        if (prev == PREV_TOOL_CALL && !had_results) sb_puts(b, "<|tool_response>");
        else if (!(had_results && !truthy(content))) sb_puts(b, "<turn|>\n");
    }
    if (c->rc) return;

    if (o->add_generation_prompt && prev != PREV_TOOL_RESPONSE && prev != PREV_TOOL_CALL) {
        sb_puts(b, "<|turn>model\n");
        if (!o->enable_thinking) sb_puts(b, "<|channel>thought\n<channel|>");
    }
}

eli_chat_options eli_chat_default_options(void) {
    eli_chat_options o = {1, 0, NULL};
    return o;
}

int eli_chat_render(const eli_json *messages, const eli_chat_options *opt, char **out, size_t *out_len,
                    eli_error *err) {
    if (out) *out = NULL;
    if (out_len) *out_len = 0;
    if (!out) return eli_fail(err, ELI_ERR_INVALID_ARG, "chat template: NULL output pointer");
    if (!messages || messages->type != ELI_JSON_ARRAY)
        return eli_fail(err, ELI_ERR_INVALID_ARG, "chat template: messages must be a JSON array");
    if (!messages->n) return eli_fail(err, ELI_ERR_INVALID_ARG, "chat template: messages is empty");
    eli_chat_options o = opt ? *opt : eli_chat_default_options();
    ctx c = {err, ELI_OK, "message", 0};
    sbuf b = {0};
    render(&c, &b, messages, &o);
    if (!c.rc && b.oom) c.rc = eli_fail(err, ELI_ERR_OOM, "chat template: out of memory");
    if (c.rc) {
        free(b.p);
        return c.rc;
    }
    *out = b.p;
    if (out_len) *out_len = b.n;
    return ELI_OK;
}

int eli_chat_split_document(const eli_json *doc, const eli_json **messages, const eli_json **tools,
                            eli_error *err) {
    *messages = NULL;
    *tools = NULL;
    if (doc && doc->type == ELI_JSON_ARRAY) {
        *messages = doc;
        return ELI_OK;
    }
    if (!doc || doc->type != ELI_JSON_OBJECT)
        return eli_fail(err, ELI_ERR_INVALID_ARG, "chat: expected a messages array or an object {\"messages\": [...]}");
    const eli_json *m = jget(doc, "messages");
    if (!is_arr(m)) return eli_fail(err, ELI_ERR_INVALID_ARG, "chat: \"messages\" must be an array");
    const eli_json *t = jget(doc, "tools");
    if (t && t->type != ELI_JSON_NULL && !is_arr(t))
        return eli_fail(err, ELI_ERR_INVALID_ARG, "chat: \"tools\" must be an array");
    *messages = m;
    *tools = t && t->type != ELI_JSON_NULL ? t : NULL;
    return ELI_OK;
}
