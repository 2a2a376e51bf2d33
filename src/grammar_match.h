/* Running a grammar: a code point automaton built lazily from the rules (grammar.h).
 *
 * The parse state is a set of pushdown stacks, as in any GBNF matcher: each stack lists the grammar
 * positions still to match, innermost rule on top, expanded until every top is a terminal (a code
 * point class or a token reference); the empty stack means `root` is complete. Here the stacks are
 * hash-consed (a stack is a (top position, rest-of-stack) node, each made once) and a whole set of
 * stacks is interned as one *state*, a small integer. Equal parse states are then equal integers, so:
 *   - a transition is computed once per (state, class of code points) and then looked up: per state
 *     the code points are split into groups that every stack top treats alike (the *partition*), and
 *     each group has one next state;
 *   - the caller's position is a small value (eli_grammar_pos): copying it is the snapshot, assigning
 *     it back the restore, with no allocation;
 *   - the token layer (grammar_vocab.h) can cache a whole vocabulary mask per state.
 * The automaton only grows while it is used (nothing is freed until eli_grammar_machine_free), within
 * the limits below; a grammar that needs more gets a clear error, never unbounded memory.
 *
 * Bytes come in UTF-8: a position holds the (at most 3) bytes of a character not yet complete, so a
 * token may end in the middle of a character; a byte is refused as soon as no completion of the
 * character could be matched. Text is decoded strictly (grammar.h: no overlong forms, surrogates or
 * values above U+10FFFF; such bytes never match).
 *
 * Not thread-safe: one machine per stream (it caches as it runs). The grammar must outlive it. */
#ifndef ELI_GRAMMAR_MATCH_H
#define ELI_GRAMMAR_MATCH_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "grammar.h"

/* Limits on what one machine may build. */
#define ELI_GM_MAX_NODES (1u << 23)         /* stack nodes */
#define ELI_GM_MAX_STATE_NODES (1u << 25)   /* summed sizes of all interned states */
#define ELI_GM_MAX_STACKS 65536u            /* stacks in one state (an ambiguous grammar multiplies them) */
#define ELI_GM_MAX_GROUPS 65535u            /* code point groups of one state */
#define ELI_GM_MAX_PART_BYTES (256u << 20)  /* memory of all partitions */

#define ELI_GM_DEAD 0u                  /* the empty set of stacks: nothing can follow */
#define ELI_GM_ERROR (UINT32_MAX - 1)   /* a limit was hit or memory ran out: see the machine's error */
#define ELI_GM_UNKNOWN UINT32_MAX       /* a group's next state not computed yet */

typedef struct {
    uint32_t pos;    /* symbol index of the top */
    uint32_t parent; /* the rest of the stack; node 0 is the empty stack */
} eli_gm_node;

typedef struct {
    uint32_t next;     /* next state, ELI_GM_UNKNOWN until computed */
    uint32_t rep;      /* one code point of the group */
    uint64_t ascii[2]; /* the group's ASCII members */
} eli_gm_group;

/* One allocation per partition, so pointers to it stay valid while the machine grows. */
typedef struct {
    uint32_t state;       /* whose code points these are */
    uint32_t n_iv;        /* intervals over [128, U+10FFFF]: iv_lo[i] starts one, iv_group[i] is its group */
    uint32_t n_groups;
    uint16_t ascii[128];  /* group of each ASCII code point */
    uint32_t *iv_lo;
    uint16_t *iv_group;
    eli_gm_group *groups;
} eli_gm_partition;

typedef struct {
    uint32_t first, n;          /* its stacks: state_nodes[first .. first + n), sorted node ids */
    eli_gm_partition *part;     /* NULL until computed */
    uint8_t complete;           /* holds the empty stack */
    uint8_t has_tokens;         /* some top is a token reference */
} eli_gm_state;

typedef struct eli_grammar_machine {
    const eli_grammar *g;
    eli_gm_node *nodes;
    uint32_t n_nodes, cap_nodes;
    uint32_t *node_table, node_table_cap; /* hash: node id + 1 */
    eli_gm_state *states;
    uint32_t n_states, cap_states;
    uint32_t *state_nodes;
    size_t n_state_nodes, cap_state_nodes;
    uint32_t *state_table, state_table_cap; /* hash: state id + 1 */
    size_t part_bytes;         /* memory held by partitions */
    /* scratch of the transition computations */
    uint32_t *seen, gen;       /* per node: generation it was last visited in */
    uint32_t *work, *out;
    size_t cap_work, cap_out;
    int failed;                /* a limit was hit: every later call fails with msg */
    eli_error err;
    uint32_t start;            /* the initial state */
} eli_grammar_machine;

/* A position in the text: the state before the character being decoded, plus that character's bytes
 * so far. Plain data: copy it to snapshot, assign it back to restore (same machine). */
typedef struct {
    uint32_t state;
    uint8_t n_partial;  /* bytes of an incomplete UTF-8 character held, 0..3 */
    uint8_t partial[3];
} eli_grammar_pos;

int eli_grammar_machine_new(const eli_grammar *g, eli_grammar_machine **out, eli_error *err);
void eli_grammar_machine_free(eli_grammar_machine *m);

/* The position before any text. */
eli_grammar_pos eli_grammar_start(const eli_grammar_machine *m);
/* Feeds n bytes. 1: accepted, *pos advanced; 0: the bytes cannot continue the text, *pos unchanged;
 * negative: a limit was hit (err says which), *pos unchanged. */
int eli_grammar_accept_bytes(eli_grammar_machine *m, eli_grammar_pos *pos, const char *s, size_t n, eli_error *err);
/* The text so far is a complete match of `root` (no character pending). */
int eli_grammar_is_complete(const eli_grammar_machine *m, eli_grammar_pos pos);

/* Transitions, for the token layer. The next state after code point cp (ELI_GM_DEAD if no stack takes
 * it, ELI_GM_ERROR on a limit). */
uint32_t eli_gm_next(eli_grammar_machine *m, uint32_t state, uint32_t cp);
/* The next state after token `token` matched as a token reference (<[id]> or !<[id]>) at a token
 * boundary; ELI_GM_DEAD when no top is a token reference that takes it. */
uint32_t eli_gm_next_token(eli_grammar_machine *m, uint32_t state, int32_t token);
/* The state holding the stacks of both. */
uint32_t eli_gm_union(eli_grammar_machine *m, uint32_t a, uint32_t b);
/* The partition of state's code points (computed on first use); NULL on a limit. */
eli_gm_partition *eli_gm_partition_of(eli_grammar_machine *m, uint32_t state);
/* The group of code point cp in partition p. */
static inline uint32_t eli_gm_group_of(const eli_gm_partition *p, uint32_t cp) {
    if (cp < 128) return p->ascii[cp];
    uint32_t a = 0, b = p->n_iv; /* the last interval starting at or below cp */
    while (b - a > 1) {
        uint32_t mid = (a + b) / 2;
        if (p->iv_lo[mid] <= cp) a = mid;
        else b = mid;
    }
    return p->iv_group[a];
}
/* The next state of group gi of partition p (computed on first use). */
uint32_t eli_gm_group_next(eli_grammar_machine *m, eli_gm_partition *p, uint32_t gi);
/* Whether some completion of the UTF-8 prefix pending in pos (n_partial >= 1) can be matched. */
int eli_gm_partial_viable(eli_grammar_machine *m, eli_grammar_pos pos);

/* Serialised positions, for slot files: the stacks as grammar symbol positions, tied to the grammar's
 * fingerprint, so they load into any machine of the same grammar. The size depends on the position
 * (its stacks): eli_grammar_pos_size bytes, written by eli_grammar_pos_write; _save mallocs them. */
size_t eli_grammar_pos_size(const eli_grammar_machine *m, eli_grammar_pos pos);
void eli_grammar_pos_write(const eli_grammar_machine *m, eli_grammar_pos pos, uint8_t *buf);
int eli_grammar_pos_save(const eli_grammar_machine *m, eli_grammar_pos pos, uint8_t **out, size_t *len, eli_error *err);
/* Validates everything (a hostile file gets an error, never a bad state). */
int eli_grammar_pos_load(eli_grammar_machine *m, const uint8_t *data, size_t len, eli_grammar_pos *pos, eli_error *err);

#endif
