/* Token masks under a grammar (grammar_vocab.h): the vocabulary trie and the walks over it. */
#include "grammar_vocab.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "utf8.h"

enum { KIND_TEXT, KIND_BYTES, KIND_SPECIAL, KIND_EOG };

#define NONE UINT32_MAX
/* A subtree gets a summary (its code point set, for accepting it whole) only when it holds at least
 * this many tokens: below that, walking it costs about as much as checking the summary. */
#define SUMMARY_MIN_TOKENS 8
#define MASK_CACHE 32 /* masks kept per matcher (32 KiB each on Gemma 4) */
/* A node with this many children has its live children enumerated from the grammar's side (the
 * groups and intervals that lead somewhere) instead of testing every child. */
#define MANY_CHILDREN 16

/* The code point of node i is cps[i], kept apart so that scanning children reads 4 bytes each. */
typedef struct {
    uint32_t first_child, n_child; /* children are contiguous, sorted by code point */
    uint32_t tok_lo, tok_hi;       /* the subtree's tokens: positions tok_lo .. tok_hi (see order) */
    uint32_t n_here;               /* the first n_here of them end at this node */
    uint32_t summary;              /* index into sums, or NONE */
} vnode;

/* The code points that occur below a node (not the node's own) and the longest path below it; the
 * ASCII code points of its children. */
typedef struct {
    uint64_t child_ascii[2];
    uint64_t ascii[2];
    uint32_t nlo, nhi; /* non-ASCII code points lie in [nlo, nhi]; nlo > nhi when there are none */
    uint32_t depth;
} vsummary;

struct eli_grammar_vocab {
    int32_t n_vocab;
    uint8_t *kind;
    uint32_t *piece_off; /* token t's piece is pieces[piece_off[t] .. piece_off[t + 1]) */
    char *pieces;
    vnode *nodes; /* node 0 is the root (the empty prefix) */
    uint32_t *cps;
    uint32_t n_nodes, max_depth;
    vsummary *sums;
    uint32_t n_sums;
    /* Every token has a position: the text tokens in trie order (so a subtree is a run of positions),
     * then the byte-wise ones, the special ones, and the end-of-generation ones last. Masks are bitmaps
     * over positions: a subtree's tokens are set a word at a time. */
    int32_t *order;  /* token at each position */
    uint32_t *rank;  /* position of each token */
    uint8_t *length; /* code points of the text token at each position (capped at 255) */
    uint32_t n_text, n_bytes, n_eog;
    size_t bytes;
};

/* ---- building the vocabulary index ------------------------------------------------------------ */

typedef struct {
    const char *p;
    uint32_t len;
    int32_t id;
} piece_ref;

static int piece_cmp(const void *a, const void *b) {
    const piece_ref *x = a, *y = b;
    uint32_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->p, y->p, n);
    if (c) return c;
    if (x->len != y->len) return x->len < y->len ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

static int valid_utf8(const char *s, size_t n, uint32_t *n_cps) {
    uint32_t k = 0;
    for (size_t i = 0; i < n; k++) {
        uint32_t cp;
        int l = eli_utf8_decode((const unsigned char *)s + i, n - i, &cp);
        if (!l) return 0;
        i += (size_t)l;
    }
    *n_cps = k;
    return 1;
}

static uint32_t cp_at(const char *s, size_t n, size_t at, int *len) {
    uint32_t cp = 0;
    *len = eli_utf8_decode((const unsigned char *)s + at, n - at, &cp);
    return cp;
}

/* Builds the trie breadth-first, so that every node's children are contiguous: a node covers a run of
 * the sorted pieces sharing its prefix; those equal to the prefix come first, the rest split by their
 * next code point. */
static int build_trie(eli_grammar_vocab *v, const piece_ref *sorted, uint32_t n_text, size_t total_cps) {
    typedef struct {
        uint32_t node, boff; /* boff: the prefix's length in bytes */
    } item;
    v->nodes = malloc((total_cps + 1) * sizeof *v->nodes);
    v->cps = malloc((total_cps + 1) * sizeof *v->cps);
    item *queue = malloc((total_cps + 1) * sizeof *queue);
    if (!v->nodes || !v->cps || !queue) {
        free(queue);
        return -1;
    }
    v->nodes[0] = (vnode){0, 0, 0, n_text, 0, NONE};
    v->cps[0] = 0;
    v->n_nodes = 1;
    size_t head = 0, tail = 0;
    queue[tail++] = (item){0, 0};
    while (head < tail) {
        item it = queue[head++];
        vnode *nd = &v->nodes[it.node];
        uint32_t i = nd->tok_lo;
        while (i < nd->tok_hi && sorted[i].len == it.boff) i++;
        nd->n_here = i - nd->tok_lo;
        nd->first_child = v->n_nodes;
        while (i < nd->tok_hi) {
            int l;
            uint32_t cp = cp_at(sorted[i].p, sorted[i].len, it.boff, &l), j = i + 1;
            while (j < nd->tok_hi && sorted[j].len > it.boff) { /* same next code point: same bytes */
                int l2;
                if (cp_at(sorted[j].p, sorted[j].len, it.boff, &l2) != cp) break;
                j++;
            }
            uint32_t c = v->n_nodes++;
            v->nodes[c] = (vnode){0, 0, i, j, 0, NONE};
            v->cps[c] = cp;
            queue[tail++] = (item){c, it.boff + (uint32_t)l};
            i = j;
        }
        nd = &v->nodes[it.node];
        nd->n_child = v->n_nodes - nd->first_child;
    }
    free(queue);
    return 0;
}

static int keeps_summary(const vnode *nd) {
    return nd->n_child && (nd->n_child >= MANY_CHILDREN || nd->tok_hi - nd->tok_lo - nd->n_here >= SUMMARY_MIN_TOKENS);
}

/* Code point sets and depths bottom-up (children always come after their parent). */
static int build_summaries(eli_grammar_vocab *v) {
    vsummary *all = malloc((size_t)v->n_nodes * sizeof *all);
    if (!all) return -1;
    uint32_t n_keep = 0;
    for (uint32_t i = v->n_nodes; i-- > 0;) {
        const vnode *nd = &v->nodes[i];
        vsummary s = {{0, 0}, {0, 0}, UINT32_MAX, 0, 0};
        for (uint32_t c = nd->first_child; c < nd->first_child + nd->n_child; c++) {
            const vsummary *cs = &all[c];
            uint32_t cp = v->cps[c];
            s.ascii[0] |= cs->ascii[0];
            s.ascii[1] |= cs->ascii[1];
            if (cp < 128) s.ascii[cp >> 6] |= 1ull << (cp & 63), s.child_ascii[cp >> 6] |= 1ull << (cp & 63);
            uint32_t lo = cs->nlo, hi = cs->nhi;
            if (cp >= 128) {
                if (lo > hi) lo = hi = cp;
                else lo = cp < lo ? cp : lo, hi = cp > hi ? cp : hi;
            }
            if (lo <= hi) {
                if (s.nlo > s.nhi) s.nlo = lo, s.nhi = hi;
                else s.nlo = lo < s.nlo ? lo : s.nlo, s.nhi = hi > s.nhi ? hi : s.nhi;
            }
            if (cs->depth + 1 > s.depth) s.depth = cs->depth + 1;
        }
        all[i] = s;
        if (i == 0) v->max_depth = s.depth;
        if (keeps_summary(nd)) n_keep++;
    }
    v->sums = malloc((size_t)(n_keep ? n_keep : 1) * sizeof *v->sums);
    if (!v->sums) {
        free(all);
        return -1;
    }
    for (uint32_t i = 0; i < v->n_nodes; i++) {
        vnode *nd = &v->nodes[i];
        if (!keeps_summary(nd)) continue;
        nd->summary = v->n_sums;
        v->sums[v->n_sums++] = all[i];
    }
    free(all);
    return 0;
}

void eli_grammar_vocab_free(eli_grammar_vocab *v) {
    if (!v) return;
    free(v->kind);
    free(v->piece_off);
    free(v->pieces);
    free(v->nodes);
    free(v->cps);
    free(v->sums);
    free(v->order);
    free(v->rank);
    free(v->length);
    free(v);
}

int eli_grammar_vocab_new(const eli_tokenizer *tok, eli_grammar_vocab **out, eli_error *err) {
    *out = NULL;
    eli_grammar_vocab *v = calloc(1, sizeof *v);
    int32_t n = eli_tokenizer_n_vocab(tok);
    if (!v) return eli_fail(err, ELI_ERR_OOM, "grammar vocabulary: out of memory");
    v->n_vocab = n;
    size_t total = 0;
    for (int32_t t = 0; t < n; t++) {
        size_t len;
        eli_tokenizer_token_piece(tok, t, 0, &len);
        total += len;
    }
    piece_ref *refs = NULL;
    v->kind = malloc((size_t)n);
    v->piece_off = malloc(((size_t)n + 1) * sizeof *v->piece_off);
    v->pieces = malloc(total + 1);
    v->order = malloc(((size_t)n + 1) * sizeof *v->order);
    v->rank = malloc(((size_t)n + 1) * sizeof *v->rank);
    v->length = calloc((size_t)n + 1, 1);
    refs = malloc(((size_t)n + 1) * sizeof *refs);
    if (!v->kind || !v->piece_off || !v->pieces || !v->order || !v->rank || !v->length || !refs || total > UINT32_MAX)
        goto oom;
    uint32_t off = 0, n_text = 0, count[4] = {0};
    size_t total_cps = 0;
    for (int32_t t = 0; t < n; t++) {
        size_t len;
        const char *p = eli_tokenizer_token_piece(tok, t, 0, &len);
        v->piece_off[t] = off;
        memcpy(v->pieces + off, p, len);
        off += (uint32_t)len;
        uint32_t n_cps;
        if (eli_tokenizer_is_eog(tok, t)) v->kind[t] = KIND_EOG;
        else if (eli_tokenizer_is_control(tok, t) || len == 0) v->kind[t] = KIND_SPECIAL;
        else if (valid_utf8(p, len, &n_cps)) {
            v->kind[t] = KIND_TEXT;
            refs[n_text++] = (piece_ref){v->pieces + v->piece_off[t], (uint32_t)len, t};
            total_cps += n_cps;
        } else v->kind[t] = KIND_BYTES;
        count[v->kind[t]]++;
    }
    v->piece_off[n] = off;
    qsort(refs, n_text, sizeof *refs, piece_cmp);
    for (uint32_t i = 0; i < n_text; i++) {
        uint32_t n_cps = 0;
        valid_utf8(refs[i].p, refs[i].len, &n_cps);
        v->order[i] = refs[i].id;
        v->length[i] = (uint8_t)(n_cps > 255 ? 255 : n_cps);
    }
    uint32_t next[4] = {0, n_text, n_text + count[KIND_BYTES], n_text + count[KIND_BYTES] + count[KIND_SPECIAL]};
    for (int32_t t = 0; t < n; t++)
        if (v->kind[t] != KIND_TEXT) v->order[next[v->kind[t]]++] = t;
    for (int32_t i = 0; i < n; i++) v->rank[v->order[i]] = (uint32_t)i;
    v->n_text = n_text;
    v->n_bytes = count[KIND_BYTES];
    v->n_eog = count[KIND_EOG];
    if (build_trie(v, refs, n_text, total_cps) || build_summaries(v)) goto oom;
    free(refs);
    v->bytes = sizeof *v + (size_t)n * (2 + sizeof *v->piece_off + sizeof *v->order + sizeof *v->rank) + total +
               (size_t)v->n_nodes * (sizeof *v->nodes + sizeof *v->cps) + (size_t)v->n_sums * sizeof *v->sums;
    *out = v;
    return ELI_OK;
oom:
    free(refs);
    eli_grammar_vocab_free(v);
    return eli_fail(err, ELI_ERR_OOM, "grammar vocabulary: out of memory");
}

int32_t eli_grammar_vocab_size(const eli_grammar_vocab *v) { return v->n_vocab; }
size_t eli_grammar_vocab_bytes(const eli_grammar_vocab *v) { return v->bytes; }

/* ---- the matcher ------------------------------------------------------------------------------ */

typedef struct {
    uint32_t state; /* NONE: empty slot */
    uint64_t *bits;
} cached_mask;

/* A node being walked: its state, and where its children stand. A node with many children goes
 * through its live ASCII children (live: a bit set per live child), then the non-ASCII children in
 * each live interval of the partition (iv, and child..child_end within it). */
typedef struct {
    uint32_t node, state;
    eli_gm_partition *part;
    uint32_t child, child_end; /* next child to look at, and where the current run ends */
    uint32_t iv;               /* next interval (many children) */
    int many;
    uint64_t live[2];          /* ASCII children still to visit (many children) */
} frame;

struct eli_grammar_matcher {
    const eli_grammar_vocab *v;
    eli_grammar_machine *gm;
    eli_grammar_pos pos;
    size_t n_words;
    uint64_t *scratch; /* the mask of a position with a character pending (not cached), over positions */
    uint64_t *by_id;   /* eli_grammar_mask's answer, over token ids */
    float *kept;       /* eli_grammar_apply: the allowed logits while the rest is filled */
    cached_mask cache[MASK_CACHE];
    uint32_t cache_next;
    int cache_off;
    frame *frames;
};

int eli_grammar_matcher_new(const eli_grammar *g, const eli_grammar_vocab *v, eli_grammar_matcher **out, eli_error *err) {
    *out = NULL;
    eli_grammar_matcher *m = calloc(1, sizeof *m);
    if (!m) return eli_fail(err, ELI_ERR_OOM, "grammar: out of memory");
    m->v = v;
    m->n_words = ((size_t)v->n_vocab + 63) / 64;
    m->scratch = malloc(m->n_words * sizeof *m->scratch);
    m->by_id = malloc(m->n_words * sizeof *m->by_id);
    m->frames = malloc(((size_t)v->max_depth + 2) * sizeof *m->frames);
    for (int i = 0; i < MASK_CACHE; i++) m->cache[i].state = NONE;
    int rc = !m->scratch || !m->by_id || !m->frames ? eli_fail(err, ELI_ERR_OOM, "grammar: out of memory")
                                       : eli_grammar_machine_new(g, &m->gm, err);
    if (rc) {
        eli_grammar_matcher_free(m);
        return rc;
    }
    m->pos = eli_grammar_start(m->gm);
    *out = m;
    return ELI_OK;
}

void eli_grammar_matcher_free(eli_grammar_matcher *m) {
    if (!m) return;
    for (int i = 0; i < MASK_CACHE; i++) free(m->cache[i].bits);
    eli_grammar_machine_free(m->gm);
    free(m->scratch);
    free(m->by_id);
    free(m->kept);
    free(m->frames);
    free(m);
}

eli_grammar_pos eli_grammar_matcher_pos(const eli_grammar_matcher *m) { return m->pos; }
void eli_grammar_matcher_set_pos(eli_grammar_matcher *m, eli_grammar_pos pos) { m->pos = pos; }
void eli_grammar_matcher_reset(eli_grammar_matcher *m) { m->pos = eli_grammar_start(m->gm); }
eli_grammar_machine *eli_grammar_matcher_machine(eli_grammar_matcher *m) { return m->gm; }
int eli_grammar_matcher_complete(const eli_grammar_matcher *m) { return eli_grammar_is_complete(m->gm, m->pos); }

static int machine_error(eli_grammar_matcher *m, eli_error *err) { return eli_fail(err, m->gm->err.code, "%s", m->gm->err.msg); }

/* The position after token from pos: 1 (*out set), 0 not allowed, negative: a limit. A token can be
 * read both as text and as a token reference; both readings are kept (their stacks united), except
 * that a reading left inside a character cannot be united with one that is not, and the token
 * reference wins then. */
static int advance(eli_grammar_matcher *m, eli_grammar_pos pos, int32_t token, int check_only, eli_grammar_pos *out,
                   eli_error *err) {
    const eli_grammar_vocab *v = m->v;
    if (token < 0 || token >= v->n_vocab) return 0;
    int kind = v->kind[token];
    if (kind == KIND_EOG) {
        *out = pos;
        return eli_grammar_is_complete(m->gm, pos);
    }
    eli_grammar_pos text = pos;
    int text_ok = 0;
    const char *p = v->pieces + v->piece_off[token];
    size_t len = v->piece_off[token + 1] - v->piece_off[token];
    if (kind == KIND_TEXT && pos.n_partial == 0) {
        uint32_t s = pos.state;
        for (size_t i = 0; i < len && s != ELI_GM_DEAD && s != ELI_GM_ERROR;) {
            int l;
            uint32_t cp = cp_at(p, len, i, &l);
            s = eli_gm_next(m->gm, s, cp);
            i += (size_t)l;
        }
        if (s == ELI_GM_ERROR) return machine_error(m, err);
        text.state = s;
        text_ok = s != ELI_GM_DEAD;
    } else if (kind != KIND_SPECIAL) {
        text_ok = eli_grammar_accept_bytes(m->gm, &text, p, len, err);
        if (text_ok < 0) return text_ok;
    }
    if (text_ok && check_only) return 1;
    uint32_t ref = ELI_GM_DEAD;
    if (pos.n_partial == 0 && m->gm->states[pos.state].has_tokens) {
        ref = eli_gm_next_token(m->gm, pos.state, token);
        if (ref == ELI_GM_ERROR) return machine_error(m, err);
    }
    if (ref == ELI_GM_DEAD) {
        *out = text;
        return text_ok;
    }
    out->n_partial = 0;
    out->state = text_ok && text.n_partial == 0 ? eli_gm_union(m->gm, text.state, ref) : ref;
    if (out->state == ELI_GM_ERROR) return machine_error(m, err);
    return 1;
}

int eli_grammar_allows(eli_grammar_matcher *m, int32_t token, eli_error *err) {
    eli_grammar_pos out;
    return advance(m, m->pos, token, 1, &out, err);
}

int eli_grammar_accept_token(eli_grammar_matcher *m, int32_t token, eli_error *err) {
    eli_grammar_pos out;
    int ok = advance(m, m->pos, token, 0, &out, err);
    if (ok < 0) return ok;
    if (!ok) return eli_fail(err, ELI_ERR_INVALID_ARG, "grammar: token %d is not allowed here", token);
    m->pos = out;
    return ELI_OK;
}

/* Sets bits lo .. hi - 1. */
static void set_range(uint64_t *bits, uint32_t lo, uint32_t hi) {
    if (lo >= hi) return;
    uint32_t a = lo >> 6, b = (hi - 1) >> 6;
    uint64_t first = ~0ull << (lo & 63), last = ~0ull >> (63 - ((hi - 1) & 63));
    if (a == b) {
        bits[a] |= first & last;
        return;
    }
    bits[a] |= first;
    for (uint32_t w = a + 1; w < b; w++) bits[w] = ~0ull;
    bits[b] |= last;
}

static int has_bit(const uint64_t *bits, uint32_t i) { return (int)(bits[i >> 6] >> (i & 63) & 1); }
static void set_bit(uint64_t *bits, uint32_t i) { bits[i >> 6] |= 1ull << (i & 63); }

#define SUBTREE_MIXED (-2)

/* How far below node c the tokens are decided without walking, from state t: the code points below c
 * all fall in one group of t, whose next state takes them all again, and so on (a loop back to the same
 * state settles it at once) until the subtree's depth: then every token below is allowed. If at some
 * depth the group refuses them instead (a bounded repetition ran out), exactly the tokens that end above
 * that depth are allowed. Returns that depth (UINT32_MAX: all), SUBTREE_MIXED when the code points split
 * over groups (walk the children), or -1 on a limit. */
static int64_t subtree_reach(eli_grammar_matcher *m, const vnode *c, uint32_t t) {
    if (c->summary == NONE) return SUBTREE_MIXED;
    const vsummary *s = &m->v->sums[c->summary];
    uint32_t rep = s->ascii[0] ? (uint32_t)__builtin_ctzll(s->ascii[0])
                   : s->ascii[1] ? 64 + (uint32_t)__builtin_ctzll(s->ascii[1])
                                 : s->nlo;
    for (uint32_t d = 0; d < s->depth; d++) {
        eli_gm_partition *p = eli_gm_partition_of(m->gm, t);
        if (!p) return -1;
        uint32_t gi = eli_gm_group_of(p, rep);
        const eli_gm_group *g = &p->groups[gi];
        if ((s->ascii[0] & ~g->ascii[0]) || (s->ascii[1] & ~g->ascii[1])) return SUBTREE_MIXED;
        if (s->nlo <= s->nhi) { /* every interval meeting [nlo, nhi] must belong to the group */
            uint32_t a = 0, b = p->n_iv;
            while (b - a > 1) {
                uint32_t mid = (a + b) / 2;
                if (p->iv_lo[mid] <= s->nlo) a = mid;
                else b = mid;
            }
            for (; a < p->n_iv && p->iv_lo[a] <= s->nhi; a++)
                if (p->iv_group[a] != gi) return SUBTREE_MIXED;
        }
        uint32_t next = eli_gm_group_next(m->gm, p, gi);
        if (next == ELI_GM_ERROR) return -1;
        if (next == ELI_GM_DEAD) return d;
        if (next == t) return UINT32_MAX;
        t = next;
    }
    return UINT32_MAX;
}

static int start_frame(eli_grammar_matcher *m, frame *f, uint32_t node, uint32_t state) {
    const vnode *nd = &m->v->nodes[node];
    *f = (frame){node, state, NULL, nd->first_child, nd->first_child + nd->n_child, 0, 0, {0, 0}};
    if (!(f->part = eli_gm_partition_of(m->gm, state))) return -1;
    if (nd->n_child < MANY_CHILDREN) return 0;
    /* the ASCII children whose group leads somewhere */
    const vsummary *s = &m->v->sums[nd->summary];
    f->many = 1;
    for (uint32_t gi = 0; gi < f->part->n_groups; gi++) { /* (every group: next_child reads them) */
        const eli_gm_group *g = &f->part->groups[gi];
        uint32_t next = eli_gm_group_next(m->gm, f->part, gi);
        if (next == ELI_GM_ERROR) return -1;
        if (next == ELI_GM_DEAD) continue;
        f->live[0] |= g->ascii[0] & s->child_ascii[0];
        f->live[1] |= g->ascii[1] & s->child_ascii[1];
    }
    f->child = f->child_end = nd->first_child + (uint32_t)(__builtin_popcountll(s->child_ascii[0]) + __builtin_popcountll(s->child_ascii[1]));
    return 0;
}

/* The next child of f worth looking at (NONE when done). Skips every interval whose group is dead
 * (start_frame computed them all). */
static uint32_t next_child(const eli_grammar_vocab *v, frame *f) {
    if (!f->many) return f->child < f->child_end ? f->child++ : NONE;
    const vnode *nd = &v->nodes[f->node];
    const vsummary *s = &v->sums[nd->summary];
    for (int w = 0; w < 2; w++)
        if (f->live[w]) {
            uint32_t cp = (uint32_t)(64 * w + __builtin_ctzll(f->live[w]));
            f->live[w] &= f->live[w] - 1;
            uint32_t below = (uint32_t)__builtin_popcountll(s->child_ascii[0] & (cp >= 64 ? ~0ull : (1ull << cp) - 1));
            if (cp >= 64) below += (uint32_t)__builtin_popcountll(s->child_ascii[1] & ((1ull << (cp - 64)) - 1));
            return nd->first_child + below;
        }
    const uint32_t *cps = v->cps, end = nd->first_child + nd->n_child;
    while (f->child >= f->child_end) { /* the next interval holding children */
        if (f->iv >= f->part->n_iv || f->child_end >= end) return NONE;
        uint32_t iv = f->iv++;
        uint32_t lo = f->part->iv_lo[iv], hi = iv + 1 < f->part->n_iv ? f->part->iv_lo[iv + 1] : ELI_GRAMMAR_MAX_CODEPOINT + 1;
        if (f->part->groups[f->part->iv_group[iv]].next == ELI_GM_DEAD) continue;
        uint32_t a = f->child_end, b = end; /* first child at or above lo, then at or above hi */
        while (a < b) {
            uint32_t mid = (a + b) / 2;
            if (cps[mid] < lo) a = mid + 1;
            else b = mid;
        }
        b = a;
        while (b < end && cps[b] < hi) b++;
        f->child = a;
        f->child_end = b;
    }
    return f->child++;
}

/* Text tokens allowed from state: a depth-first walk of the trie along the automaton. */
static int walk_trie(eli_grammar_matcher *m, uint32_t state, uint64_t *bits) {
    const eli_grammar_vocab *v = m->v;
    frame *fr = m->frames;
    uint32_t sp = 0;
    if (start_frame(m, &fr[sp++], 0, state)) return -1;
    while (sp) {
        frame *f = &fr[sp - 1];
        uint32_t ci = next_child(v, f);
        if (ci == NONE) {
            sp--;
            continue;
        }
        const vnode *c = &v->nodes[ci];
        uint32_t next = eli_gm_group_next(m->gm, f->part, eli_gm_group_of(f->part, v->cps[ci]));
        if (next == ELI_GM_ERROR) return -1;
        if (next == ELI_GM_DEAD) continue;
        set_range(bits, c->tok_lo, c->tok_lo + c->n_here);
        if (!c->n_child) continue;
        int64_t reach = subtree_reach(m, c, next);
        if (reach == -1) return -1;
        if (reach == UINT32_MAX) {
            set_range(bits, c->tok_lo + c->n_here, c->tok_hi);
        } else if (reach >= 0) { /* the tokens no longer than depth(c) + reach code points */
            uint32_t limit = sp + (uint32_t)reach; /* c's depth is sp */
            for (uint32_t at = c->tok_lo + c->n_here; at < c->tok_hi; at++)
                if (v->length[at] <= limit) set_bit(bits, at);
        } else if (start_frame(m, &fr[sp++], ci, next)) {
            return -1;
        }
    }
    return 0;
}

/* The full mask of pos into bits, over positions. */
static int compute_mask(eli_grammar_matcher *m, eli_grammar_pos pos, uint64_t *bits, eli_error *err) {
    const eli_grammar_vocab *v = m->v;
    uint32_t n = (uint32_t)v->n_vocab, eog = n - v->n_eog;
    memset(bits, 0, m->n_words * sizeof *bits);
    if (pos.n_partial == 0) {
        if (walk_trie(m, pos.state, bits)) return machine_error(m, err);
        const eli_gm_state *s = &m->gm->states[pos.state];
        if (s->complete) set_range(bits, eog, n);
        for (uint32_t i = 0; s->has_tokens && i < s->n; i++) { /* token references on top */
            uint32_t x = m->gm->state_nodes[s->first + i];
            if (x == 0) continue;
            eli_gsym top = m->gm->g->syms[m->gm->nodes[x].pos];
            uint32_t at = top.value < n ? v->rank[top.value] : NONE;
            if (top.kind == ELI_GSYM_TOKEN && at < eog) {
                set_bit(bits, at);
            } else if (top.kind == ELI_GSYM_TOKEN_NOT) { /* every token but one (and but the ends) */
                int had = at < eog && has_bit(bits, at);
                set_range(bits, 0, eog);
                if (at < eog && !had) bits[at >> 6] &= ~(1ull << (at & 63));
            }
        }
    }
    for (uint32_t at = v->n_text; at < v->n_text + v->n_bytes; at++) {
        if (has_bit(bits, at)) continue;
        int32_t t = v->order[at];
        eli_grammar_pos tmp = pos;
        int ok = eli_grammar_accept_bytes(m->gm, &tmp, v->pieces + v->piece_off[t], v->piece_off[t + 1] - v->piece_off[t], err);
        if (ok < 0) return ok;
        if (ok) set_bit(bits, at);
    }
    return ELI_OK;
}

/* The mask of the current position over positions (cached per state). */
static int position_mask(eli_grammar_matcher *m, const uint64_t **bits, eli_error *err) {
    *bits = NULL;
    if (m->pos.n_partial || m->cache_off) {
        int rc = compute_mask(m, m->pos, m->scratch, err);
        if (!rc) *bits = m->scratch;
        return rc;
    }
    for (int i = 0; i < MASK_CACHE; i++)
        if (m->cache[i].state == m->pos.state) {
            *bits = m->cache[i].bits;
            return ELI_OK;
        }
    cached_mask *slot = &m->cache[m->cache_next];
    if (!slot->bits && !(slot->bits = malloc(m->n_words * sizeof *slot->bits)))
        return eli_fail(err, ELI_ERR_OOM, "grammar: out of memory");
    slot->state = NONE;
    int rc = compute_mask(m, m->pos, slot->bits, err);
    if (rc) return rc;
    slot->state = m->pos.state;
    m->cache_next = (m->cache_next + 1) % MASK_CACHE;
    *bits = slot->bits;
    return ELI_OK;
}

void eli_grammar_matcher_cache_masks(eli_grammar_matcher *m, int on) {
    m->cache_off = !on;
    for (int i = 0; i < MASK_CACHE; i++) m->cache[i].state = NONE;
}

int eli_grammar_mask(eli_grammar_matcher *m, const uint64_t **bits, eli_error *err) {
    const uint64_t *pos_bits;
    *bits = NULL;
    int rc = position_mask(m, &pos_bits, err);
    if (rc) return rc;
    memset(m->by_id, 0, m->n_words * sizeof *m->by_id);
    for (size_t w = 0; w < m->n_words; w++)
        for (uint64_t b = pos_bits[w]; b; b &= b - 1) {
            int32_t t = m->v->order[w * 64 + (size_t)__builtin_ctzll(b)];
            set_bit(m->by_id, (uint32_t)t);
        }
    *bits = m->by_id;
    return ELI_OK;
}

/* When under a quarter of the vocabulary is allowed, the allowed logits are kept aside, the whole row
 * filled and they are put back: a sequential fill beats scattered writes to the many refused ones. */
int eli_grammar_apply(eli_grammar_matcher *m, float *logits, eli_error *err) {
    const uint64_t *bits;
    int rc = position_mask(m, &bits, err);
    if (rc) return rc;
    const eli_grammar_vocab *v = m->v;
    size_t allowed = 0;
    for (size_t w = 0; w < m->n_words; w++) allowed += (size_t)__builtin_popcountll(bits[w]);
    if (allowed * 4 < (size_t)v->n_vocab) {
        float *kept = realloc(m->kept, (allowed ? allowed : 1) * sizeof *kept);
        if (!kept) return eli_fail(err, ELI_ERR_OOM, "grammar: out of memory");
        m->kept = kept;
        size_t k = 0;
        for (size_t w = 0; w < m->n_words; w++)
            for (uint64_t b = bits[w]; b; b &= b - 1) kept[k++] = logits[v->order[w * 64 + (size_t)__builtin_ctzll(b)]];
        for (int32_t t = 0; t < v->n_vocab; t++) logits[t] = -INFINITY;
        k = 0;
        for (size_t w = 0; w < m->n_words; w++)
            for (uint64_t b = bits[w]; b; b &= b - 1) logits[v->order[w * 64 + (size_t)__builtin_ctzll(b)]] = kept[k++];
        return ELI_OK;
    }
    for (size_t w = 0; w < m->n_words; w++) {
        uint64_t off = ~bits[w];
        if (w == m->n_words - 1 && v->n_vocab % 64) off &= (1ull << (v->n_vocab % 64)) - 1;
        for (; off; off &= off - 1) logits[v->order[w * 64 + (size_t)__builtin_ctzll(off)]] = -INFINITY;
    }
    return ELI_OK;
}
