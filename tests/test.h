/* Minimal test harness: CHECK records a failure and continues; TEST_MAIN_END prints
 * "N passed, N failed" and returns non-zero on any failure. */
#ifndef ELI_TEST_H
#define ELI_TEST_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int eli_test_pass, eli_test_fail;

#define CHECK(cond, ...)                                                   \
    do {                                                                   \
        if (cond) {                                                        \
            eli_test_pass++;                                               \
        } else {                                                           \
            eli_test_fail++;                                               \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                  \
            fprintf(stderr, "\n");                                         \
        }                                                                  \
    } while (0)

#define TEST_MAIN_END()                                                          \
    do {                                                                         \
        printf("%s: %d passed, %d failed\n", __FILE__, eli_test_pass, eli_test_fail); \
        return eli_test_fail ? 1 : 0;                                            \
    } while (0)

/* Reads up to cap whitespace-separated token ids from a text file; returns the count, -1 if unreadable. */
static inline int read_ids(const char *path, int32_t *ids, int cap) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    int n = 0;
    long v;
    while (n < cap && fscanf(f, "%ld", &v) == 1) ids[n++] = (int32_t)v;
    fclose(f);
    return n;
}

/* A whole file, malloc'ed and NUL-terminated (*len excludes the NUL); NULL if unreadable. */
static inline char *test_read_file(const char *path, size_t *len) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return NULL;
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    char *buf = n >= 0 ? (char *)malloc((size_t)n + 1) : NULL;
    if (buf && fread(buf, 1, (size_t)n, fp) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(fp);
    if (buf) {
        buf[n] = '\0';
        *len = (size_t)n;
    }
    return buf;
}

/* Path under the shared/ folder beside the checkout. */
static inline const char *eli_shared_path(const char *rel) {
    static char buf[8][1024];
    static int slot;
    char *b = buf[slot++ & 7];
    snprintf(b, 1024, "%s/%s", ELI_SHARED_DIR, rel);
    return b;
}

/* dir/name, in one of four rotating buffers (a call may use a few at once). */
static inline const char *eli_test_path_in(const char *dir, const char *name) {
    static char buf[4][256];
    static int slot;
    char *b = buf[slot++ & 3];
    snprintf(b, 256, "%s/%s", dir, name);
    return b;
}

#endif
