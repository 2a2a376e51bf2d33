/* Grammar constraints over a tokenizer's vocabulary: which tokens may come next.
 *
 * eli_grammar_vocab is built once per tokenizer (immutable, shareable by threads and grammars): every
 * token's piece (the bytes it detokenizes to) is sorted into a trie over code points, and each trie
 * node knows which code points occur below it and how deep it goes. Tokens fall into four kinds:
 *   text     a piece of valid, complete UTF-8: in the trie;
 *   bytes    a piece that is not (Gemma's byte tokens <0x80>..<0xFF>): fed byte by byte, so they can
 *            spell a character across tokens;
 *   special  control tokens (and empty pieces): only a token reference (<[id]>, !<[id]>) allows them;
 *   eog      end of generation: allowed exactly when the grammar is complete.
 * Any token also matches a token reference naming it (<[id]>), or one naming another (!<[id]>).
 *
 * eli_grammar_matcher runs one grammar over one vocabulary for one stream: a position in the grammar
 * (grammar_match.h) plus caches. The mask of a position walks the trie once with the grammar
 * automaton, pruning every subtree whose first code point the grammar refuses and accepting in one
 * step every subtree whose code points all keep the grammar on one path (a string body, a run of
 * digits: the common case inside JSON values); masks are then cached per grammar state, since the
 * same states recur (every token inside one string value sees the same state).
 *
 * Use: before sampling, eli_grammar_allows(the sampled token) is a check of a few code points; only
 * when it fails does the sampler need eli_grammar_apply (the full mask) and a second draw. After the
 * token is chosen, eli_grammar_accept_token. Snapshots for speculative decoding are plain copies of
 * eli_grammar_matcher_pos(); eli_grammar_pos_save / _load (grammar_match.h) serialise one. */
#ifndef ELI_GRAMMAR_VOCAB_H
#define ELI_GRAMMAR_VOCAB_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "grammar.h"
#include "grammar_match.h"
#include "tokenizer.h"

typedef struct eli_grammar_vocab eli_grammar_vocab;

int eli_grammar_vocab_new(const eli_tokenizer *tok, eli_grammar_vocab **out, eli_error *err);
void eli_grammar_vocab_free(eli_grammar_vocab *v);
int32_t eli_grammar_vocab_size(const eli_grammar_vocab *v);
/* Bytes the vocabulary index holds (for reports). */
size_t eli_grammar_vocab_bytes(const eli_grammar_vocab *v);

typedef struct eli_grammar_matcher eli_grammar_matcher;

/* g and v must outlive the matcher. Starts at the beginning of the grammar. */
int eli_grammar_matcher_new(const eli_grammar *g, const eli_grammar_vocab *v, eli_grammar_matcher **out, eli_error *err);
void eli_grammar_matcher_free(eli_grammar_matcher *m);
/* The current position (a snapshot: plain data) and setting one back (restore, rollback). */
eli_grammar_pos eli_grammar_matcher_pos(const eli_grammar_matcher *m);
void eli_grammar_matcher_set_pos(eli_grammar_matcher *m, eli_grammar_pos pos);
void eli_grammar_matcher_reset(eli_grammar_matcher *m);
/* The automaton, for eli_grammar_pos_save / _load. */
eli_grammar_machine *eli_grammar_matcher_machine(eli_grammar_matcher *m);

/* The text so far completes the grammar (end-of-generation tokens are allowed now). */
int eli_grammar_matcher_complete(const eli_grammar_matcher *m);
/* 1 if token may come next, 0 if not, negative on a limit (err). Ids out of range are not allowed. */
int eli_grammar_allows(eli_grammar_matcher *m, int32_t token, eli_error *err);
/* The allowed tokens as a bitmap (bit t of words[t / 64]; n_vocab bits, rounded up to 64). The
 * pointer stays valid until the next call on m. Masks are kept internally in trie order; this costs
 * one pass over the allowed tokens to put them in id order (eli_grammar_apply does not need it). */
int eli_grammar_mask(eli_grammar_matcher *m, const uint64_t **bits, eli_error *err);
/* Whether masks are cached per grammar state (default on; off measures the uncached walk). */
void eli_grammar_matcher_cache_masks(eli_grammar_matcher *m, int on);
/* Sets logits[t] = -INFINITY for every token t not allowed (logits has n_vocab entries). */
int eli_grammar_apply(eli_grammar_matcher *m, float *logits, eli_error *err);
/* Advances past token. ELI_ERR_INVALID_ARG (position unchanged) if it is not allowed. An end-of-
 * generation token leaves the position as it is. */
int eli_grammar_accept_token(eli_grammar_matcher *m, int32_t token, eli_error *err);

#endif
