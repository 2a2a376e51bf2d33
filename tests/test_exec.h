/* Models and multimodal towers as the library runs them, for tests: loaded and prepared on the default
 * executor (the CPU's packed weights), with the tokenizer when asked for. */
#ifndef ELI_TEST_EXEC_H
#define ELI_TEST_EXEC_H

#include <string.h>

#include "audio.h"
#include "exec.h"
#include "mmproj.h"
#include "model.h"
#include "tokenizer.h"
#include "vision.h"

typedef struct test_model {
    eli_model *m;
    eli_xmodel *xm;
    eli_tokenizer *tok;
} test_model;

static inline void test_model_free(test_model *t) {
    eli_xmodel_release(t->xm);
    eli_tokenizer_free(t->tok);
    eli_model_free(t->m);
    memset(t, 0, sizeof *t);
}

/* 0, or the error (t then holds nothing). target: bind the model as its MTP drafter first. */
static inline int test_model_load(const char *path, int with_tok, const eli_model *target, test_model *t, eli_error *err) {
    memset(t, 0, sizeof *t);
    const eli_exec_options o = {NULL, 1};
    if (!(t->m = eli_model_load(path, err)) || (target && eli_model_bind_assistant(t->m, target, err)) ||
        !(t->xm = eli_exec_prepare(eli_exec_default(), t->m, &o, err)) ||
        (with_tok && !(t->tok = eli_tokenizer_load(t->m->file, err)))) {
        test_model_free(t);
        return err ? err->code : ELI_ERR_INVALID_ARG;
    }
    return ELI_OK;
}

/* A projector's vision or audio tower, bound and prepared. One prepared tower per bound tower at a time. */
typedef struct test_tower {
    eli_mmproj *p;
    eli_vision *v;
    eli_audio *a;
    eli_xtower *t;
} test_tower;

static inline void test_tower_close(test_tower *t) {
    eli_xtower_release(t->t);
    eli_vision_free(t->v);
    eli_audio_free(t->a);
    eli_mmproj_free(t->p);
    memset(t, 0, sizeof *t);
}

/* Prepares an already bound tower (t->v or t->a) again with n_threads (after releasing the last one). */
static inline int test_tower_prepare(test_tower *t, int n_threads, eli_error *err) {
    eli_xtower_release(t->t);
    const eli_exec_options o = {NULL, 1};
    t->t = t->v ? eli_vision_prepare(eli_exec_default(), t->v, &o, n_threads, err)
                : eli_audio_prepare(eli_exec_default(), t->a, &o, n_threads, err);
    return t->t ? ELI_OK : err->code;
}

/* 0, or the error (t then holds nothing). */
static inline int test_tower_open(const char *path, eli_mm_tower kind, int n_threads, test_tower *t, eli_error *err) {
    memset(t, 0, sizeof *t);
    if (!(t->p = eli_mmproj_open(path, err)) ||
        (kind == ELI_MM_VISION ? !(t->v = eli_vision_load(t->p, err)) : !(t->a = eli_audio_load(t->p, err))) ||
        test_tower_prepare(t, n_threads, err)) {
        test_tower_close(t);
        return err->code ? err->code : ELI_ERR_INVALID_ARG;
    }
    return ELI_OK;
}

#endif
