/* A projector GGUF with edits (gguf_edit.h), opened from memory as the loaders see a file: the hostile-
 * projector tests of test_mmproj, test_vision and test_audio each feed a list of edits through it. */
#ifndef ELI_TEST_MMPROJ_EDIT_H
#define ELI_TEST_MMPROJ_EDIT_H

#include "gguf_edit.h"
#include "mmproj.h"

/* src rewritten by fn and bound as a projector; NULL with err set when the open or the bind refuses it.
 * *buf holds the file's bytes: free it after the projector. */
static inline eli_mmproj *mmproj_edited(const eli_gguf_file *src, edit_fn fn, uint8_t **buf, eli_error *err) {
    size_t n;
    *buf = rewrite_with(src, fn, &n);
    eli_error_clear(err);
    eli_gguf_file *f = eli_gguf_open_memory(*buf, n, err);
    eli_mmproj *p = f ? eli_mmproj_from_gguf(f, err) : NULL;
    if (f && !p) eli_gguf_close(f);
    return p;
}

#endif
