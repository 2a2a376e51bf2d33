#include "strbuf.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void eli_sb_put(eli_strbuf *b, const char *s, size_t len) {
    if (b->oom || !len) return;
    if (len > SIZE_MAX / 2 - b->n) {
        b->oom = 1;
        return;
    }
    if (b->n + len + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + len + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, len);
    b->n += len;
    b->p[b->n] = '\0';
}

void eli_sb_puts(eli_strbuf *b, const char *s) { eli_sb_put(b, s, strlen(s)); }

void eli_sb_printf(eli_strbuf *b, const char *fmt, ...) {
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < sizeof tmp) {
        eli_sb_put(b, tmp, (size_t)n);
        return;
    }
    char *big = malloc((size_t)n + 1);
    if (!big) {
        b->oom = 1;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    eli_sb_put(b, big, (size_t)n);
    free(big);
}

void eli_sb_gbnf_literal(eli_strbuf *b, const char *s, size_t len) {
    eli_sb_puts(b, "\"");
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') eli_sb_printf(b, "\\%c", c);
        else if (c == '\n') eli_sb_puts(b, "\\n");
        else if (c == '\r') eli_sb_puts(b, "\\r");
        else if (c == '\t') eli_sb_puts(b, "\\t");
        else if (c < 0x20 || c == 0x7F) eli_sb_printf(b, "\\x%02X", c);
        else eli_sb_put(b, (const char *)&c, 1);
    }
    eli_sb_puts(b, "\"");
}

void eli_sb_gbnf_repeat(eli_strbuf *b, uint64_t min, uint64_t max) {
    if (max == UINT64_MAX) {
        if (min == 0) eli_sb_puts(b, "*");
        else if (min == 1) eli_sb_puts(b, "+");
        else eli_sb_printf(b, "{%llu,}", (unsigned long long)min);
    } else if (min == max) {
        if (min != 1) eli_sb_printf(b, "{%llu}", (unsigned long long)min);
    } else if (min == 0 && max == 1) {
        eli_sb_puts(b, "?");
    } else {
        eli_sb_printf(b, "{%llu,%llu}", (unsigned long long)min, (unsigned long long)max);
    }
}
