/* The grammar sampler stage (grammar_stage.h): the matcher behind the sampler's stage callbacks. */
#include "grammar_stage.h"

#include <stdlib.h>

#include "grammar.h"
#include "grammar_match.h"

typedef struct {
    eli_grammar *g;
    eli_grammar_matcher *m;
    eli_grammar_pos marked; /* where drafting began */
} stage;

static int stage_apply(void *self, float *logits, int32_t n_vocab, eli_error *err) {
    (void)n_vocab; /* the matcher's vocabulary is the sampler's */
    return eli_grammar_apply(((stage *)self)->m, logits, err);
}

static int stage_allows(void *self, int32_t token, eli_error *err) { return eli_grammar_allows(((stage *)self)->m, token, err); }

static int stage_accept(void *self, int32_t token, int generated, eli_error *err) {
    return generated ? eli_grammar_accept_token(((stage *)self)->m, token, err) : ELI_OK;
}

static void stage_reset(void *self) { eli_grammar_matcher_reset(((stage *)self)->m); }

static size_t stage_state_size(const void *self) {
    eli_grammar_matcher *m = ((const stage *)self)->m;
    return eli_grammar_pos_size(eli_grammar_matcher_machine(m), eli_grammar_matcher_pos(m));
}

static void stage_save(const void *self, void *buf) {
    eli_grammar_matcher *m = ((const stage *)self)->m;
    eli_grammar_pos_write(eli_grammar_matcher_machine(m), eli_grammar_matcher_pos(m), buf);
}

static int stage_load(void *self, const void *buf, size_t n, eli_error *err) {
    eli_grammar_matcher *m = ((stage *)self)->m;
    eli_grammar_pos pos;
    int rc = eli_grammar_pos_load(eli_grammar_matcher_machine(m), buf, n, &pos, err);
    if (!rc) eli_grammar_matcher_set_pos(m, pos);
    return rc;
}

static void stage_mark(void *self) {
    stage *st = self;
    st->marked = eli_grammar_matcher_pos(st->m);
}

static void stage_rewind(void *self) {
    stage *st = self;
    eli_grammar_matcher_set_pos(st->m, st->marked);
}

static void stage_free(void *self) {
    stage *st = self;
    if (!st) return;
    eli_grammar_matcher_free(st->m);
    eli_grammar_free(st->g);
    free(st);
}

int eli_grammar_stage_create(const char *gbnf, size_t len, const eli_tokenizer *tok, const eli_grammar_vocab *v,
                             eli_sampler_stage *out, eli_grammar_matcher **matcher, eli_error *err) {
    stage *st = calloc(1, sizeof *st);
    if (!st) return eli_fail(err, ELI_ERR_OOM, "grammar: out of memory");
    int rc = eli_grammar_parse(gbnf, len, tok, &st->g, err);
    if (!rc) rc = eli_grammar_matcher_new(st->g, v, &st->m, err);
    if (rc) {
        stage_free(st);
        return rc;
    }
    *out = (eli_sampler_stage){.name = "grammar", .self = st, .mask_only = 1, .apply = stage_apply, .allows = stage_allows,
                               .accept = stage_accept, .reset = stage_reset, .state_size = stage_state_size,
                               .save = stage_save, .load = stage_load, .free = stage_free, .mark = stage_mark,
                               .rewind = stage_rewind};
    if (matcher) *matcher = st->m;
    return ELI_OK;
}
