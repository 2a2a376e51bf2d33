/* Models as the library's streams run them, for tests: loaded and prepared on the default executor (the
 * CPU's packed weights), with the tokenizer when asked for. */
#ifndef ELI_TEST_EXEC_H
#define ELI_TEST_EXEC_H

#include <string.h>

#include "exec.h"
#include "model.h"
#include "tokenizer.h"

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

#endif
