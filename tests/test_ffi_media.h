/* For the tests of image and audio input through the C ABI: temporary bundle directories (text/ and mtp/
 * linked to a model's folders, vision/ holding a link named mmproj-test.gguf to a projector file; any of
 * them may be left out), whole files, and checks of an error's code and message. */
#ifndef ELI_TEST_FFI_MEDIA_H
#define ELI_TEST_FFI_MEDIA_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "eliza_inference.h"

typedef struct test_bundle {
    char dir[256];
} test_bundle;

static inline void test_bundle_path(const test_bundle *b, const char *rel, char *out, size_t cap) {
    snprintf(out, cap, "%s/%s", b->dir, rel);
}

/* 0 on success. */
static inline int test_bundle_make(test_bundle *b, const char *text_dir, const char *mtp_dir, const char *mmproj) {
    snprintf(b->dir, sizeof b->dir, "/tmp/eli_bundle_XXXXXX");
    if (!mkdtemp(b->dir)) return -1;
    char p[320];
    int rc = 0;
    if (text_dir) test_bundle_path(b, "text", p, sizeof p), rc |= symlink(text_dir, p);
    if (mtp_dir) test_bundle_path(b, "mtp", p, sizeof p), rc |= symlink(mtp_dir, p);
    if (mmproj) {
        test_bundle_path(b, "vision", p, sizeof p);
        rc |= mkdir(p, 0700);
        test_bundle_path(b, "vision/mmproj-test.gguf", p, sizeof p);
        rc |= symlink(mmproj, p);
    }
    return rc;
}

static inline void test_bundle_remove(test_bundle *b) {
    static const char *const links[] = {"text", "mtp", "vision/mmproj-test.gguf", "vision"};
    char p[320];
    for (size_t i = 0; i < sizeof links / sizeof links[0]; i++) {
        test_bundle_path(b, links[i], p, sizeof p);
        if (unlink(p)) rmdir(p);
    }
    rmdir(b->dir);
}

/* rc is code and the message *err holds every one of the NULL-terminated words; frees the message. */
static inline int says(int rc, int code, char **err, const char *const *words) {
    int ok = rc == code && *err != NULL;
    for (; ok && *words; words++) ok = strstr(*err, *words) != NULL;
    if (!ok) fprintf(stderr, "  got %d: %s\n", rc, *err ? *err : "(no message)");
    eliza_inference_free_string(*err);
    *err = NULL;
    return ok;
}
#define SAYS(rc, code, err, ...) says(rc, code, &(err), (const char *const[]){__VA_ARGS__, NULL})

#endif
