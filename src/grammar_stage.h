/* A grammar as a stage of the sampler chain (sampler.h): what the sampler needs to constrain generation.
 *
 *   apply   masks a logits row: -INFINITY for every token the grammar refuses next;
 *   allows  checks one token (mask_only: greedy sampling takes the unmasked argmax when the grammar
 *           allows it, so the whole mask is computed only when the model's favourite is refused);
 *   accept  follows the generated tokens (context tokens are not the grammar's: it starts where
 *           generation starts); a refused token is an error and changes nothing;
 *   reset   back to the start of the grammar;
 *   state   the serialised position (grammar_match.h), for slot files: it loads into any stream of the
 *           same grammar text, and its size depends on the position.
 * End-of-generation tokens are allowed exactly when the grammar is complete. */
#ifndef ELI_GRAMMAR_STAGE_H
#define ELI_GRAMMAR_STAGE_H

#include <stddef.h>

#include "error.h"
#include "grammar_vocab.h"
#include "sampler.h"
#include "tokenizer.h"

/* Parses GBNF text (len bytes; tok resolves <token-text> references) and makes the stage, which owns
 * the grammar and its matcher; the vocabulary index v (one per tokenizer) must outlive it. *matcher
 * (may be NULL) receives the stage's matcher, for speculative decoding: drafts can be masked and
 * checked on a copy of its position (eli_grammar_matcher_pos / _set_pos) before verification. Errors
 * name the grammar's line and column. */
int eli_grammar_stage_create(const char *gbnf, size_t len, const eli_tokenizer *tok, const eli_grammar_vocab *v,
                             eli_sampler_stage *out, eli_grammar_matcher **matcher, eli_error *err);

#endif
