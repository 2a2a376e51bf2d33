/* Strict UTF-8 (Unicode 15 section 3.9, table 3-7): no overlong forms, no UTF-16 surrogates, nothing
 * above U+10FFFF. */
#ifndef ELI_UTF8_H
#define ELI_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* The length of the sequence lead byte b starts (1 for ASCII, 2-4) and the range its second byte must
 * fall in (*lo2, *hi2; untouched for ASCII); 0 for bytes that never start a character (0x80..0xC1,
 * 0xF5..0xFF). Every byte after the second is 0x80..0xBF. */
int eli_utf8_lead(unsigned char b, unsigned char *lo2, unsigned char *hi2);
/* Decodes the character at s[0..n): returns its length (1-4) and *cp, or 0 if it is not valid. */
int eli_utf8_decode(const unsigned char *s, size_t n, uint32_t *cp);
/* Encodes cp (<= U+10FFFF, not a surrogate) into out; returns the length. */
int eli_utf8_encode(uint32_t cp, char out[4]);

#endif
