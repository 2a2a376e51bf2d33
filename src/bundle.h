/* A model bundle on disk (../shared/spec/ffi.md, "Context and bundle"): a directory with
 *   text/<model>.gguf         the target: the first .gguf under text/ (sorted by name) whose lowercase name
 *                             contains none of "mmproj", "tokenizer", "codec"
 *   mtp/drafter-<slug>.gguf   the MTP drafter (optional): the first .gguf under mtp/
 *   vision/mmproj-<slug>.gguf the image/audio projector (optional): the first .gguf under vision/ whose
 *                             lowercase name contains "mmproj"
 *   eliza-1.manifest.json     optional; when present, every file it lists must exist inside the bundle
 *                             with its declared size
 * or, for convenience, the path of one .gguf file (the text model alone). Nothing is loaded here. */
#ifndef ELI_BUNDLE_H
#define ELI_BUNDLE_H

#include <stddef.h>

#include "error.h"

typedef struct eli_bundle {
    char *dir;         /* what the caller named */
    char *text_path;   /* never NULL after a successful open */
    char *mtp_path;    /* NULL when absent */
    char *mmproj_path; /* NULL when absent */
} eli_bundle;

/* Finds the bundle's files and checks a present manifest. ELI_ERR_BUNDLE_INVALID naming the problem (no
 * such path, no text model, a manifest that does not parse or whose files are missing or of another
 * size), ELI_ERR_OOM. On failure *b holds nothing to free. */
int eli_bundle_open(const char *path, eli_bundle *b, eli_error *err);
void eli_bundle_free(eli_bundle *b);

/* Checks the manifest text (a JSON object; "files": an array of {path, size} entries or an object of such
 * arrays by role; "sizeBytes" counts as "size"; an entry without a size is only checked to exist) against
 * the files under dir. Paths must be relative and stay inside dir. */
int eli_bundle_check_manifest(const char *dir, const char *json, size_t len, eli_error *err);

#endif
