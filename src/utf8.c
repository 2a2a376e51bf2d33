#include "utf8.h"

int eli_utf8_lead(unsigned char b, unsigned char *lo2, unsigned char *hi2) {
    if (b < 0x80) return 1;
    if (b < 0xC2 || b > 0xF4) return 0;
    *lo2 = b == 0xE0 ? 0xA0 : b == 0xF0 ? 0x90 : 0x80; /* shortest form only */
    *hi2 = b == 0xED ? 0x9F : b == 0xF4 ? 0x8F : 0xBF; /* no surrogates, nothing above U+10FFFF */
    return b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
}

int eli_utf8_decode(const unsigned char *s, size_t n, uint32_t *cp) {
    if (n == 0) return 0;
    unsigned char lo = 0, hi = 0;
    int len = eli_utf8_lead(s[0], &lo, &hi);
    if (len == 0 || (size_t)len > n) return 0;
    if (len == 1) {
        *cp = s[0];
        return 1;
    }
    if (s[1] < lo || s[1] > hi) return 0;
    uint32_t v = s[0] & (0x7Fu >> len);
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        v = v << 6 | (s[i] & 0x3Fu);
    }
    *cp = v;
    return len;
}

int eli_utf8_encode(uint32_t cp, char out[4]) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    int len = cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
    for (int i = len - 1; i > 0; i--, cp >>= 6) out[i] = (char)(0x80 | (cp & 0x3F));
    out[0] = (char)(((0xFF00u >> len) & 0xFFu) | cp); /* 2: 0xC0, 3: 0xE0, 4: 0xF0 */
    return len;
}
