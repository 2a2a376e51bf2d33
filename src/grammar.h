/* GBNF grammars (llama.cpp's dialect): the parser and the rules it produces.
 *
 *   root   ::= object                  # rules, start rule `root`; comments run to the end of the line
 *   object ::= "{" ws ( pair ( "," ws pair )* )? "}"
 *   pair   ::= [a-z]+ ":" ws ( "x" | "\u00e9" | [^"\\] | . ) <[42]> !<|turn>
 *
 * Items: literals "..." (escapes \n \t \r \\ \" \[ \] \xHH \uHHHH \UHHHHHHHH, anything else as raw UTF-8),
 * character classes [a-z0-9_] and [^...] (the same escapes; '-' before ']' is literal), '.', rule
 * references, groups ( ... ), repetition * + ? {m} {m,} {m,n}, and token references: <[id]> (a token
 * id), <text> (the one vocabulary token whose text is "<text>") and !<...> (any one token but that one).
 * A rule body ends at the end of its line unless a '|' or an open group continues it.
 *
 * Where this differs from llama.cpp (only on inputs llama.cpp mishandles): a reversed range [z-a], a
 * repetition {m,n} with n < m (llama.cpp loops forever), invalid UTF-8 and NUL bytes in the grammar
 * text are errors; repetition counts up to ELI_GRAMMAR_MAX_REPEAT mean exactly what they say (llama.cpp
 * refuses minimums above 2000 and silently drops maximums above 2000), limited instead by the size of
 * the expanded grammar; left recursion is refused wherever the pushdown stacks would grow without
 * bound, also through rules that are only indirectly empty (llama.cpp misses those and hangs).
 *
 * A parsed grammar is immutable and may be shared by threads; the matcher (grammar_match.h) runs it. */
#ifndef ELI_GRAMMAR_H
#define ELI_GRAMMAR_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "tokenizer.h"

#define ELI_GRAMMAR_MAX_CODEPOINT 0x10FFFFu
/* Bounds on hostile grammars: text size, nesting of groups, repetition counts, expanded size. */
#define ELI_GRAMMAR_MAX_TEXT (16u << 20)
#define ELI_GRAMMAR_MAX_NESTING 256
#define ELI_GRAMMAR_MAX_REPEAT 100000u
#define ELI_GRAMMAR_MAX_SYMS (1u << 21)

/* One element of a rule body. An alternative is a run of symbols closed by ALT (another alternative
 * follows) or END (the rule's last); so the symbol after a terminal is either its successor or a close. */
enum eli_gsym_kind {
    ELI_GSYM_END,       /* end of the rule's last alternative */
    ELI_GSYM_ALT,       /* end of an alternative, another follows */
    ELI_GSYM_RULE,      /* value: rule index */
    ELI_GSYM_CLASS,     /* value: index into classes: one code point from a set */
    ELI_GSYM_TOKEN,     /* value: token id */
    ELI_GSYM_TOKEN_NOT, /* value: token id: any one token but this one */
};

typedef struct {
    uint32_t kind; /* enum eli_gsym_kind */
    uint32_t value;
} eli_gsym;

/* A set of code points as sorted, disjoint, non-adjacent ranges (negation already applied, within
 * [0, ELI_GRAMMAR_MAX_CODEPOINT]), plus its ASCII part as a bitmap for the common case. */
typedef struct {
    uint32_t lo, hi;
} eli_grange;

typedef struct {
    uint32_t first, n; /* ranges[first .. first + n) */
    uint64_t ascii[2]; /* bit c set: code point c < 128 is in the set */
} eli_gclass;

typedef struct eli_grammar {
    eli_gsym *syms;
    uint32_t n_syms;
    uint32_t *rule_start; /* first symbol of rule i */
    uint32_t n_rules;
    uint32_t root;        /* rule index of `root` */
    eli_gclass *classes;
    uint32_t n_classes;
    eli_grange *ranges;
    uint32_t n_ranges;
    uint64_t fingerprint; /* hash of the compiled rules: serialised states name the grammar they belong to */
} eli_grammar;

/* Parses GBNF text (len bytes; need not be NUL-terminated). tok (may be NULL) resolves <text> token
 * references and bounds <[id]> ones; without it <text> is an error and ids need only fit in int32.
 * Errors name the line and column and the problem. */
int eli_grammar_parse(const char *text, size_t len, const eli_tokenizer *tok, eli_grammar **out, eli_error *err);
void eli_grammar_free(eli_grammar *g);

/* Whether code point cp is in class c. */
int eli_gclass_has(const eli_grammar *g, const eli_gclass *c, uint32_t cp);

#endif
