/* Gemma 4 tokenizer: see tokenizer.h for the algorithm and the behaviour it reproduces.
 *
 * Data layout. Every string the BPE can ever produce or consume gets a "string id" (sid): the token ids
 * 0..n_vocab-1 first, then any merge half or merge result that is not itself a token. A symbol's sid
 * is the sid of its text (or -1 when its text is in no table), so merge lookups hash two integers
 * instead of two strings, and this is exact even for merges whose halves are not tokens: a symbol can
 * take part in a merge only if its text is one of the merge's halves, and every half has a sid.
 * On the Gemma 4 vocab every half and result is a token, so no extra strings exist. */
#include "tokenizer.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Token attributes, as llama.cpp derives them from the GGUF token type and its load-time fix-ups. */
#define ATTR_UNKNOWN 0x01u
#define ATTR_UNUSED 0x02u
#define ATTR_NORMAL 0x04u
#define ATTR_CONTROL 0x08u
#define ATTR_USER_DEFINED 0x10u
#define ATTR_BYTE 0x20u
#define ATTR_UNDEFINED 0x40u
#define FLAG_EOG 0x80u /* not an attribute: member of the end-of-generation set */

/* Input limit: symbol offsets and indices are 32-bit, and each input byte can grow to 3 bytes. */
#define MAX_TEXT_BYTES ((size_t)512 << 20)

/* "▁" U+2581, SentencePiece's visible space. */
static const char SPACE_MARK[3] = {'\xe2', '\x96', '\x81'};

typedef struct {
    uint64_t key;   /* (uint64)left sid << 32 | right sid */
    int32_t rank;   /* merge index; -1 marks an empty slot */
    int32_t result; /* sid of left+right */
} pair_slot;

struct eli_tokenizer {
    int32_t n_vocab;
    uint32_t n_strings; /* n_vocab + extra merge strings */
    char *text;         /* all string texts, back to back */
    uint32_t *text_off; /* n_strings + 1 offsets into text */
    uint32_t text_cap, off_cap;

    uint8_t *type;  /* GGUF token type per token */
    uint8_t *flags; /* ATTR_* | FLAG_EOG per token */

    char *piece;         /* rendered bytes per token (unparse_special form) */
    uint32_t *piece_off; /* n_vocab + 1 */

    uint32_t *str_slot; /* text -> sid hash; slot holds sid + 1, 0 = empty */
    uint32_t str_mask, str_count;

    pair_slot *pair; /* (left sid, right sid) -> rank, result */
    uint64_t pair_mask;
    int32_t n_merges;

    int32_t byte_tok[256]; /* token of "<0xXX>", -1 if absent */
    int32_t *special;      /* CONTROL / USER_DEFINED / UNKNOWN ids, longest text first */
    uint32_t n_special;

    int32_t bos, eos, unk, pad;
    int add_bos, add_eos, add_space_prefix, clean_spaces;
};

/* ---------------------------------------------------------------------------------------------- */
/* small helpers */

static uint64_t hash_bytes(const char *s, size_t n) {
    /* FNV-1a, then a final avalanche so the low bits used for the slot index are well mixed. */
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 0x100000001b3ull;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return h;
}

static uint64_t hash_u64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

static const char *sid_text(const eli_tokenizer *t, uint32_t sid, size_t *len) {
    *len = t->text_off[sid + 1] - t->text_off[sid];
    return t->text + t->text_off[sid];
}

typedef struct {
    char *p;
    size_t n, cap;
} bytebuf;

static int bb_reserve(bytebuf *b, size_t extra) {
    if (extra > SIZE_MAX - b->n) return -1;
    size_t need = b->n + extra;
    if (need <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need) cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    char *p = realloc(b->p, cap);
    if (!p) return -1;
    b->p = p;
    b->cap = cap;
    return 0;
}

static int bb_append(bytebuf *b, const void *src, size_t n) {
    if (bb_reserve(b, n)) return -1;
    if (n) memcpy(b->p + b->n, src, n);
    b->n += n;
    return 0;
}

typedef struct {
    int32_t *v;
    size_t n, cap;
} idvec;

static int iv_push(idvec *a, int32_t id) {
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 64;
        int32_t *v = realloc(a->v, cap * sizeof *v);
        if (!v) return -1;
        a->v = v;
        a->cap = cap;
    }
    a->v[a->n++] = id;
    return 0;
}

/* ---------------------------------------------------------------------------------------------- */
/* string table */

/* Index of the slot holding text, or of the empty slot where it would go. */
static uint32_t str_probe(const eli_tokenizer *t, const char *s, size_t n) {
    uint32_t i = (uint32_t)hash_bytes(s, n) & t->str_mask;
    for (;;) {
        uint32_t v = t->str_slot[i];
        if (!v) return i;
        size_t len;
        const char *txt = sid_text(t, v - 1, &len);
        if (len == n && !memcmp(txt, s, n)) return i;
        i = (i + 1) & t->str_mask;
    }
}

static int32_t str_find(const eli_tokenizer *t, const char *s, size_t n) {
    uint32_t v = t->str_slot[str_probe(t, s, n)];
    return v ? (int32_t)(v - 1) : -1;
}

static int str_rehash(eli_tokenizer *t, uint32_t cap) {
    uint32_t *slot = calloc(cap, sizeof *slot);
    if (!slot) return -1;
    free(t->str_slot);
    t->str_slot = slot;
    t->str_mask = cap - 1;
    /* Re-insert in sid order; for duplicate token texts the later id wins, as in llama.cpp's map. */
    for (uint32_t sid = 0; sid < t->n_strings; sid++) {
        size_t len;
        const char *s = sid_text(t, sid, &len);
        t->str_slot[str_probe(t, s, len)] = sid + 1;
    }
    return 0;
}

/* Appends a string to the arena as a new sid (not yet hashed). */
static int arena_add(eli_tokenizer *t, const char *s, size_t n, eli_error *err) {
    uint32_t used = t->text_off[t->n_strings];
    if (n > UINT32_MAX - used || t->n_strings >= INT32_MAX - 1)
        return eli_fail(err, ELI_ERR_INVALID_ARG, "tokenizer strings exceed 4 GiB");
    if (used + n > t->text_cap) {
        uint64_t cap = (uint64_t)t->text_cap * 2 + n + 64;
        if (cap > UINT32_MAX) cap = UINT32_MAX;
        char *p = realloc(t->text, (size_t)cap);
        if (!p) return eli_fail(err, ELI_ERR_OOM, "out of memory for tokenizer strings");
        t->text = p;
        t->text_cap = (uint32_t)cap;
    }
    if (t->n_strings + 2 > t->off_cap) {
        uint32_t cap = t->off_cap * 2 + 16;
        uint32_t *p = realloc(t->text_off, (size_t)cap * sizeof *p);
        if (!p) return eli_fail(err, ELI_ERR_OOM, "out of memory for tokenizer strings");
        t->text_off = p;
        t->off_cap = cap;
    }
    if (n) memcpy(t->text + used, s, n);
    t->n_strings++;
    t->text_off[t->n_strings] = used + (uint32_t)n;
    return ELI_OK;
}

/* sid of a string, adding it as an extra (non-token) string when it is in no table. */
static int str_intern(eli_tokenizer *t, const char *s, size_t n, int32_t *sid, eli_error *err) {
    int32_t found = str_find(t, s, n);
    if (found >= 0) {
        *sid = found;
        return ELI_OK;
    }
    int rc = arena_add(t, s, n, err);
    if (rc) return rc;
    uint32_t id = t->n_strings - 1;
    t->str_count++;
    if ((uint64_t)t->str_count * 2 > (uint64_t)t->str_mask + 1) {
        if (t->str_mask >= 0x7fffffffu || str_rehash(t, (t->str_mask + 1) * 2))
            return eli_fail(err, ELI_ERR_OOM, "out of memory for the tokenizer string table");
    } else {
        t->str_slot[str_probe(t, s, n)] = id + 1;
    }
    *sid = (int32_t)id;
    return ELI_OK;
}

/* ---------------------------------------------------------------------------------------------- */
/* merge table */

static pair_slot *pair_probe(const eli_tokenizer *t, uint64_t key) {
    uint64_t i = hash_u64(key) & t->pair_mask;
    for (;;) {
        pair_slot *s = &t->pair[i];
        if (s->rank < 0 || s->key == key) return s;
        i = (i + 1) & t->pair_mask;
    }
}

static inline uint64_t pair_key(int32_t l, int32_t r) { return (uint64_t)(uint32_t)l << 32 | (uint32_t)r; }

/* ---------------------------------------------------------------------------------------------- */
/* loading */

void eli_tokenizer_free(eli_tokenizer *t) {
    if (!t) return;
    free(t->text);
    free(t->text_off);
    free(t->type);
    free(t->flags);
    free(t->piece);
    free(t->piece_off);
    free(t->str_slot);
    free(t->pair);
    free(t->special);
    free(t);
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Reads an optional token-id key; it must name a token. */
static int read_id(const eli_gguf_file *f, const char *key, int32_t n_vocab, int32_t *out, eli_error *err) {
    uint32_t v;
    int rc = eli_gguf_get_u32(f, key, &v, err);
    if (rc < 0) return rc;
    if (rc == 0) return ELI_OK;
    if (v >= (uint32_t)n_vocab)
        return eli_fail(err, ELI_ERR_BUNDLE_INVALID, "%s: token id %u is out of range (vocabulary has %d tokens)",
                        key, v, n_vocab);
    *out = (int32_t)v;
    return ELI_OK;
}

static int read_flag(const eli_gguf_file *f, const char *key, int *out, eli_error *err) {
    int rc = eli_gguf_get_bool(f, key, out, err);
    return rc < 0 ? rc : ELI_OK;
}

static int load_tokens(eli_tokenizer *t, const eli_gguf_file *f, eli_error *err) {
    const eli_gguf_value *toks, *types;
    int rc = eli_gguf_get_arr(f, "tokenizer.ggml.tokens", GGUF_VT_STRING, &toks, err);
    if (rc < 0) return rc;
    if (rc == 0) return eli_fail(err, ELI_ERR_BUNDLE_INVALID, "tokenizer.ggml.tokens: missing");
    uint64_t n = toks->v.arr.n;
    if (n == 0 || n > (uint64_t)INT32_MAX / 2)
        return eli_fail(err, ELI_ERR_BUNDLE_INVALID, "tokenizer.ggml.tokens: %llu tokens is not a usable vocabulary size",
                        (unsigned long long)n);
    t->n_vocab = (int32_t)n;

    rc = eli_gguf_get_arr(f, "tokenizer.ggml.token_type", GGUF_VT_INT32, &types, err);
    if (rc < 0) return rc;
    if (rc == 0) return eli_fail(err, ELI_ERR_BUNDLE_INVALID, "tokenizer.ggml.token_type: missing");
    if (types->v.arr.n != n)
        return eli_fail(err, ELI_ERR_BUNDLE_INVALID, "tokenizer.ggml.token_type: %llu entries for %llu tokens",
                        (unsigned long long)types->v.arr.n, (unsigned long long)n);

    t->type = malloc((size_t)n);
    t->flags = malloc((size_t)n);
    t->off_cap = (uint32_t)n + 16;
    t->text_off = malloc((size_t)t->off_cap * sizeof *t->text_off);
    if (!t->type || !t->flags || !t->text_off) return eli_fail(err, ELI_ERR_OOM, "out of memory for the vocabulary");
    t->text_off[0] = 0;

    for (uint64_t i = 0; i < n; i++) {
        eli_gguf_str s = toks->v.arr.strs[i];
        /* llama.cpp reads these through C strings; a NUL would silently truncate the token there. */
        if (s.len && memchr(s.ptr, 0, (size_t)s.len))
            return eli_fail(err, ELI_ERR_BUNDLE_INVALID, "tokenizer.ggml.tokens[%llu]: contains a NUL byte",
                            (unsigned long long)i);
        char empty[32];
        const char *txt = s.ptr;
        size_t len = (size_t)s.len;
        if (len == 0) { /* llama.cpp renames empty tokens so that they stay unique */
            len = (size_t)snprintf(empty, sizeof empty, "[EMPTY_%llu]", (unsigned long long)i);
            txt = empty;
        }
        if ((rc = arena_add(t, txt, len, err))) return rc;

        int64_t ty;
        if ((rc = eli_gguf_value_i64(types, i, &ty, "tokenizer.ggml.token_type", err))) return rc;
        static const uint8_t attr_of_type[7] = {ATTR_UNDEFINED, ATTR_NORMAL,  ATTR_UNKNOWN, ATTR_CONTROL,
                                                ATTR_USER_DEFINED, ATTR_UNUSED, ATTR_BYTE};
        if (ty < 0 || ty > 6)
            return eli_fail(err, ELI_ERR_BUNDLE_INVALID, "tokenizer.ggml.token_type[%llu]: unknown type %lld",
                            (unsigned long long)i, (long long)ty);
        t->type[i] = (uint8_t)ty;
        t->flags[i] = attr_of_type[ty];
        if (ty == ELI_TOKEN_BYTE &&
            !(len == 6 && !memcmp(txt, "<0x", 3) && hexval(txt[3]) >= 0 && hexval(txt[4]) >= 0 && txt[5] == '>'))
            return eli_fail(err, ELI_ERR_BUNDLE_INVALID, "tokenizer.ggml.tokens[%llu]: byte token '%.*s' is not <0xXX>",
                            (unsigned long long)i, (int)(len > 32 ? 32 : len), txt);
    }

    uint32_t cap = 1024;
    while (cap < (uint32_t)n * 2) cap *= 2;
    t->str_count = (uint32_t)n;
    if (str_rehash(t, cap)) return eli_fail(err, ELI_ERR_OOM, "out of memory for the vocabulary hash");
    return ELI_OK;
}

static int load_merges(eli_tokenizer *t, const eli_gguf_file *f, eli_error *err) {
    const eli_gguf_value *m;
    int rc = eli_gguf_get_arr(f, "tokenizer.ggml.merges", GGUF_VT_STRING, &m, err);
    if (rc < 0) return rc;
    if (rc == 0) return eli_fail(err, ELI_ERR_BUNDLE_INVALID, "tokenizer.ggml.merges: missing (required for gemma4)");
    uint64_t n = m->v.arr.n;
    if (n > (uint64_t)INT32_MAX / 4)
        return eli_fail(err, ELI_ERR_BUNDLE_INVALID, "tokenizer.ggml.merges: %llu merges is too many", (unsigned long long)n);
    t->n_merges = (int32_t)n;

    uint64_t cap = 1024;
    while (cap < n * 2) cap *= 2;
    t->pair = malloc((size_t)cap * sizeof *t->pair);
    if (!t->pair) return eli_fail(err, ELI_ERR_OOM, "out of memory for %llu merges", (unsigned long long)n);
    for (uint64_t i = 0; i < cap; i++) t->pair[i].rank = -1;
    t->pair_mask = cap - 1;

    bytebuf cat = {0};
    for (uint64_t i = 0; i < n; i++) {
        eli_gguf_str s = m->v.arr.strs[i];
        if (s.len && memchr(s.ptr, 0, (size_t)s.len)) {
            free(cat.p);
            return eli_fail(err, ELI_ERR_BUNDLE_INVALID, "tokenizer.ggml.merges[%llu]: contains a NUL byte",
                            (unsigned long long)i);
        }
        /* llama.cpp splits at the first space at index >= 1 (so a left half may itself be a space). A merge
         * without one, or with an empty half, can never match a symbol: it only uses up its rank. */
        const char *sp = s.len > 1 ? memchr(s.ptr + 1, ' ', (size_t)s.len - 1) : NULL;
        if (!sp) continue;
        size_t ln = (size_t)(sp - s.ptr), rn = (size_t)s.len - ln - 1;
        if (rn == 0) continue;
        int32_t l, r, res;
        if ((rc = str_intern(t, s.ptr, ln, &l, err)) || (rc = str_intern(t, sp + 1, rn, &r, err))) {
            free(cat.p);
            return rc;
        }
        pair_slot *slot = pair_probe(t, pair_key(l, r));
        if (slot->rank >= 0) continue; /* a repeated pair keeps its first (lowest) rank */
        cat.n = 0;
        if (bb_append(&cat, s.ptr, ln) || bb_append(&cat, sp + 1, rn)) {
            free(cat.p);
            return eli_fail(err, ELI_ERR_OOM, "out of memory reading merges");
        }
        if ((rc = str_intern(t, cat.p, cat.n, &res, err))) {
            free(cat.p);
            return rc;
        }
        slot->key = pair_key(l, r);
        slot->rank = (int32_t)i;
        slot->result = res;
    }
    free(cat.p);
    return ELI_OK;
}

/* llama.cpp's end-of-generation detection by token text (the part of its list that is not model-family
 * specific FIM handling); each such token also becomes CONTROL. */
static const char *const EOG_TEXTS[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
    "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
    "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
    "<\xef\xbd\x9c" "end\xe2\x96\x81" "of\xe2\x96\x81" "sentence\xef\xbd\x9c>", "[e~[",
};

static int32_t find_cstr(const eli_tokenizer *t, const char *s) {
    int32_t id = str_find(t, s, strlen(s));
    return id < t->n_vocab ? id : -1;
}

static bool eog_has(const eli_tokenizer *t, const char *s) {
    int32_t id = find_cstr(t, s);
    return id >= 0 && (t->flags[id] & FLAG_EOG);
}

static void setup_eog(eli_tokenizer *t, int32_t eot, int32_t eom) {
    for (size_t i = 0; i < sizeof EOG_TEXTS / sizeof EOG_TEXTS[0]; i++) {
        int32_t id = find_cstr(t, EOG_TEXTS[i]);
        if (id >= 0) t->flags[id] |= FLAG_EOG | ATTR_CONTROL;
    }
    /* The metadata's own end tokens join the set without changing their attributes. */
    if (t->eos >= 0) t->flags[t->eos] |= FLAG_EOG;
    if (eot >= 0) t->flags[eot] |= FLAG_EOG;
    if (eom >= 0) t->flags[eom] |= FLAG_EOG;
    /* Harmony-style vocabularies: "<|end|>" is not an end of generation when the return/call tokens are. */
    bool call = eog_has(t, "<|call|>") || eog_has(t, "<|calls|>");
    if (eog_has(t, "<|end|>") && call && (eog_has(t, "<|return|>") || eog_has(t, "<|flush|>"))) {
        int32_t id = find_cstr(t, "<|end|>");
        t->flags[id] = ATTR_USER_DEFINED;
    }
    /* Gemma 4: "</s>" is an ordinary piece when "<|tool_response>" is an end token. */
    if (eog_has(t, "<|tool_response>") && eog_has(t, "</s>")) {
        int32_t id = find_cstr(t, "</s>");
        t->flags[id] = ATTR_NORMAL;
    }
}

/* Order of the special-token list: longer text first, then lower id. */
static bool special_before(const eli_tokenizer *t, int32_t x, int32_t y) {
    uint32_t lx = t->text_off[x + 1] - t->text_off[x], ly = t->text_off[y + 1] - t->text_off[y];
    return lx != ly ? lx > ly : x < y;
}

/* Insertion sort by (length desc, id asc): the list is a few dozen tokens, and qsort has no context
 * argument in C11. llama.cpp's order among equal lengths is unspecified; ids make ours deterministic. */
static void sort_special(eli_tokenizer *t) {
    for (uint32_t i = 1; i < t->n_special; i++) {
        int32_t v = t->special[i];
        uint32_t j = i;
        while (j > 0 && special_before(t, v, t->special[j - 1])) {
            t->special[j] = t->special[j - 1];
            j--;
        }
        t->special[j] = v;
    }
}

/* Rendered bytes of every token in the unparse_special form (llama.cpp's token_to_piece cache). */
static int build_pieces(eli_tokenizer *t, eli_error *err) {
    t->piece_off = malloc(((size_t)t->n_vocab + 1) * sizeof *t->piece_off);
    /* A piece is never longer than the token text (▁ becomes one byte, <0xXX> one byte). */
    t->piece = malloc((size_t)t->text_off[t->n_vocab] + 1);
    if (!t->piece_off || !t->piece) return eli_fail(err, ELI_ERR_OOM, "out of memory for token pieces");
    uint32_t o = 0;
    for (int32_t id = 0; id < t->n_vocab; id++) {
        t->piece_off[id] = o;
        size_t len;
        const char *s = sid_text(t, (uint32_t)id, &len);
        uint8_t a = t->flags[id];
        if (a & (ATTR_UNKNOWN | ATTR_CONTROL | ATTR_USER_DEFINED)) {
            memcpy(t->piece + o, s, len);
            o += (uint32_t)len;
        } else if (a & ATTR_NORMAL) {
            for (size_t i = 0; i < len;) {
                if (i + 3 <= len && !memcmp(s + i, SPACE_MARK, 3)) {
                    t->piece[o++] = ' ';
                    i += 3;
                } else {
                    t->piece[o++] = s[i++];
                }
            }
        } else if (a & ATTR_BYTE) {
            t->piece[o++] = (char)(hexval(s[3]) << 4 | hexval(s[4]));
        } /* UNUSED / UNDEFINED render as nothing */
    }
    t->piece_off[t->n_vocab] = o;
    return ELI_OK;
}

eli_tokenizer *eli_tokenizer_load(const eli_gguf_file *f, eli_error *err) {
    eli_gguf_str model;
    int rc = eli_gguf_get_str(f, "tokenizer.ggml.model", &model, err);
    if (rc < 0) return NULL;
    if (rc == 0) {
        eli_fail(err, ELI_ERR_BUNDLE_INVALID, "tokenizer.ggml.model: missing (the GGUF has no tokenizer)");
        return NULL;
    }
    if (!eli_gguf_str_eq(model, "gemma4")) {
        eli_fail(err, ELI_ERR_BUNDLE_INVALID, "tokenizer.ggml.model is '%.*s', expected 'gemma4'",
                 (int)(model.len > 64 ? 64 : model.len), model.ptr);
        return NULL;
    }

    eli_tokenizer *t = calloc(1, sizeof *t);
    if (!t) {
        eli_fail(err, ELI_ERR_OOM, "out of memory for the tokenizer");
        return NULL;
    }
    t->bos = t->eos = t->unk = t->pad = -1;
    int32_t eot = -1, eom = -1;
    /* Gemma 4 flags as llama.cpp sets them for its pre-tokenizer; add_bos is forced on (llama.cpp
     * PR #21500) and a false key only logs a warning there. */
    t->add_bos = 1;
    t->add_eos = 0;
    t->add_space_prefix = 0;
    t->clean_spaces = 1;

    if ((rc = load_tokens(t, f, err)) || (rc = load_merges(t, f, err))) goto fail;
    if ((rc = read_id(f, "tokenizer.ggml.bos_token_id", t->n_vocab, &t->bos, err)) ||
        (rc = read_id(f, "tokenizer.ggml.eos_token_id", t->n_vocab, &t->eos, err)) ||
        (rc = read_id(f, "tokenizer.ggml.unknown_token_id", t->n_vocab, &t->unk, err)) ||
        (rc = read_id(f, "tokenizer.ggml.padding_token_id", t->n_vocab, &t->pad, err)) ||
        (rc = read_id(f, "tokenizer.ggml.eot_token_id", t->n_vocab, &eot, err)) ||
        (rc = read_id(f, "tokenizer.ggml.eom_token_id", t->n_vocab, &eom, err)))
        goto fail;
    int add_bos_key = 1; /* read only to check its type: gemma4 adds BOS either way */
    if ((rc = read_flag(f, "tokenizer.ggml.add_bos_token", &add_bos_key, err)) ||
        (rc = read_flag(f, "tokenizer.ggml.add_eos_token", &t->add_eos, err)) ||
        (rc = read_flag(f, "tokenizer.ggml.add_space_prefix", &t->add_space_prefix, err)))
        goto fail;
    (void)add_bos_key;
    if (t->bos < 0) {
        rc = eli_fail(err, ELI_ERR_BUNDLE_INVALID, "tokenizer.ggml.bos_token_id: missing (gemma4 always adds BOS)");
        goto fail;
    }
    if (t->add_eos && t->eos < 0) {
        rc = eli_fail(err, ELI_ERR_BUNDLE_INVALID, "tokenizer.ggml.add_eos_token is true but eos_token_id is not set");
        goto fail;
    }

    for (int i = 0; i < 256; i++) {
        char b[7];
        snprintf(b, sizeof b, "<0x%02X>", i);
        t->byte_tok[i] = find_cstr(t, b);
    }

    setup_eog(t, eot, eom);

    t->special = malloc(((size_t)t->n_vocab) * sizeof *t->special);
    if (!t->special) {
        rc = eli_fail(err, ELI_ERR_OOM, "out of memory for the special-token list");
        goto fail;
    }
    for (int32_t id = 0; id < t->n_vocab; id++)
        if (t->flags[id] & (ATTR_CONTROL | ATTR_USER_DEFINED | ATTR_UNKNOWN)) t->special[t->n_special++] = id;
    sort_special(t);

    if ((rc = build_pieces(t, err))) goto fail;
    return t;

fail:
    (void)rc;
    eli_tokenizer_free(t);
    return NULL;
}

/* ---------------------------------------------------------------------------------------------- */
/* accessors */

int32_t eli_tokenizer_n_vocab(const eli_tokenizer *t) { return t->n_vocab; }
int32_t eli_tokenizer_bos(const eli_tokenizer *t) { return t->bos; }
int32_t eli_tokenizer_eos(const eli_tokenizer *t) { return t->eos; }
int32_t eli_tokenizer_unk(const eli_tokenizer *t) { return t->unk; }
int32_t eli_tokenizer_pad(const eli_tokenizer *t) { return t->pad; }
int eli_tokenizer_add_bos(const eli_tokenizer *t) { return t->add_bos; }
int eli_tokenizer_n_merges(const eli_tokenizer *t) { return t->n_merges; }

static bool valid_id(const eli_tokenizer *t, int32_t id) { return id >= 0 && id < t->n_vocab; }

const char *eli_tokenizer_token_text(const eli_tokenizer *t, int32_t id, size_t *len) {
    if (!valid_id(t, id)) return NULL;
    return sid_text(t, (uint32_t)id, len);
}

const char *eli_tokenizer_token_piece(const eli_tokenizer *t, int32_t id, int unparse_special, size_t *len) {
    if (!valid_id(t, id)) return NULL;
    if (!unparse_special && (t->flags[id] & (ATTR_UNKNOWN | ATTR_CONTROL))) {
        *len = 0;
        return t->piece + t->piece_off[id];
    }
    *len = t->piece_off[id + 1] - t->piece_off[id];
    return t->piece + t->piece_off[id];
}

int32_t eli_tokenizer_find(const eli_tokenizer *t, const char *text, size_t len) {
    int32_t id = str_find(t, text, len);
    return id < t->n_vocab ? id : -1;
}

int eli_tokenizer_token_type(const eli_tokenizer *t, int32_t id) { return valid_id(t, id) ? t->type[id] : -1; }
int eli_tokenizer_is_eog(const eli_tokenizer *t, int32_t id) { return valid_id(t, id) && (t->flags[id] & FLAG_EOG); }
int eli_tokenizer_is_control(const eli_tokenizer *t, int32_t id) {
    return valid_id(t, id) && (t->flags[id] & ATTR_CONTROL);
}

/* ---------------------------------------------------------------------------------------------- */
/* encoding */

/* Reads one code point the way llama.cpp's unicode_cpt_from_utf8 does: structure only (no overlong,
 * surrogate or range checks); a bad lead or missing continuation is U+FFFD for one byte. */
static uint32_t read_cpt(const uint8_t *s, size_t n, size_t *i) {
    size_t k = *i;
    uint8_t b = s[k];
    int need;
    uint32_t cp;
    if (b < 0x80) {
        *i = k + 1;
        return b;
    } else if ((b & 0xe0) == 0xc0) {
        need = 1, cp = b & 0x1f;
    } else if ((b & 0xf0) == 0xe0) {
        need = 2, cp = b & 0x0f;
    } else if ((b & 0xf8) == 0xf0) {
        need = 3, cp = b & 0x07;
    } else {
        *i = k + 1;
        return 0xfffd;
    }
    if ((size_t)need >= n - k) { /* not enough bytes left */
        *i = k + 1;
        return 0xfffd;
    }
    for (int j = 1; j <= need; j++) {
        if ((s[k + j] & 0xc0) != 0x80) {
            *i = k + 1;
            return 0xfffd;
        }
        cp = cp << 6 | (s[k + j] & 0x3f);
    }
    *i = k + 1 + (size_t)need;
    return cp;
}

static size_t put_cpt(char *o, uint32_t cp) {
    /* llama.cpp would throw for a code point above U+10FFFF (a 4-byte form F4 90.. - F7 ..); we write
     * U+FFFD instead of failing the whole call. */
    if (cp > 0x10ffff) cp = 0xfffd;
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xc0 | cp >> 6);
        o[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xe0 | cp >> 12);
        o[1] = (char)(0x80 | (cp >> 6 & 0x3f));
        o[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    o[0] = (char)(0xf0 | cp >> 18);
    o[1] = (char)(0x80 | (cp >> 12 & 0x3f));
    o[2] = (char)(0x80 | (cp >> 6 & 0x3f));
    o[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

/* Byte length of the UTF-8 sequence a lead byte announces (llama.cpp's unicode_len_utf8). */
static size_t utf8_len(uint8_t b) {
    static const uint8_t len[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return len[b >> 4];
}

typedef struct {
    size_t start;
    uint32_t len; /* 0 once merged into its left neighbour */
    int32_t sid;  /* -1: text in no table, takes part in no merge */
    int32_t prev, next;
} symbol;

typedef struct {
    int32_t rank, left, right, result;
    uint32_t size; /* byte length of left + right when queued; a mismatch later means it is stale */
} bigram;

/* Per-call scratch, reused across the runs of one eli_tokenize call. */
typedef struct {
    symbol *sym;
    size_t sym_cap;
    bigram *heap;
    size_t heap_n, heap_cap;
    bytebuf norm; /* the fragment with ▁ for spaces, re-encoded code point by code point */
} workspace;

static bool bigram_less(const bigram *a, const bigram *b) {
    return a->rank < b->rank || (a->rank == b->rank && a->left < b->left);
}

static int heap_push(workspace *w, bigram g) {
    if (w->heap_n == w->heap_cap) {
        size_t cap = w->heap_cap ? w->heap_cap * 2 : 256;
        bigram *h = realloc(w->heap, cap * sizeof *h);
        if (!h) return -1;
        w->heap = h;
        w->heap_cap = cap;
    }
    size_t i = w->heap_n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!bigram_less(&g, &w->heap[p])) break;
        w->heap[i] = w->heap[p];
        i = p;
    }
    w->heap[i] = g;
    return 0;
}

static bigram heap_pop(workspace *w) {
    bigram top = w->heap[0];
    bigram last = w->heap[--w->heap_n];
    size_t n = w->heap_n, i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && bigram_less(&w->heap[c + 1], &w->heap[c])) c++;
        if (!bigram_less(&w->heap[c], &last)) break;
        w->heap[i] = w->heap[c];
        i = c;
    }
    if (n) w->heap[i] = last;
    return top;
}

/* Queues the pair (left, right) if some merge joins their texts. */
static int try_pair(const eli_tokenizer *t, workspace *w, int32_t left, int32_t right) {
    if (left < 0 || right < 0) return 0;
    const symbol *l = &w->sym[left], *r = &w->sym[right];
    if (l->sid < 0 || r->sid < 0) return 0;
    const pair_slot *p = pair_probe(t, pair_key(l->sid, r->sid));
    if (p->rank < 0) return 0;
    bigram g = {p->rank, left, right, p->result, l->len + r->len};
    return heap_push(w, g);
}

static int emit_piece(const eli_tokenizer *t, const char *s, size_t n, int32_t sid, idvec *out) {
    if (sid >= 0 && sid < t->n_vocab) return iv_push(out, sid);
    /* Byte fallback; a byte with no <0xXX> token is dropped, as llama.cpp does. */
    for (size_t i = 0; i < n; i++) {
        int32_t b = t->byte_tok[(uint8_t)s[i]];
        if (b >= 0 && iv_push(out, b)) return -1;
    }
    return 0;
}

/* BPE over one run (no newline inside, or a newline-only run that is not a token). */
static int bpe_run(const eli_tokenizer *t, workspace *w, const char *s, size_t n, idvec *out) {
    size_t nsym = 0;
    for (size_t i = 0; i < n;) {
        size_t cl = utf8_len((uint8_t)s[i]);
        if (cl > n - i) cl = n - i;
        if (nsym == w->sym_cap) {
            size_t cap = w->sym_cap ? w->sym_cap * 2 : 256;
            symbol *p = realloc(w->sym, cap * sizeof *p);
            if (!p) return -1;
            w->sym = p;
            w->sym_cap = cap;
        }
        symbol *y = &w->sym[nsym];
        y->start = i;
        y->len = (uint32_t)cl;
        y->sid = str_find(t, s + i, cl);
        y->prev = (int32_t)nsym - 1;
        y->next = i + cl < n ? (int32_t)nsym + 1 : -1;
        nsym++;
        i += cl;
    }

    w->heap_n = 0;
    for (size_t i = 1; i < nsym; i++)
        if (try_pair(t, w, (int32_t)i - 1, (int32_t)i)) return -1;

    while (w->heap_n) {
        bigram g = heap_pop(w);
        symbol *l = &w->sym[g.left], *r = &w->sym[g.right];
        /* Stale entry: one side was merged away, or grew (then the summed length differs). */
        if (l->len == 0 || r->len == 0 || l->len + r->len != g.size) continue;
        l->len += r->len;
        l->sid = g.result;
        r->len = 0;
        l->next = r->next;
        if (r->next >= 0) w->sym[r->next].prev = g.left;
        if (try_pair(t, w, l->prev, g.left) || try_pair(t, w, g.left, l->next)) return -1;
    }

    for (int32_t i = nsym ? 0 : -1; i >= 0; i = w->sym[i].next)
        if (emit_piece(t, s + w->sym[i].start, w->sym[i].len, w->sym[i].sid, out)) return -1;
    return 0;
}

/* One raw fragment (between special tokens): escape spaces, normalize, split newline runs, BPE. */
static int encode_fragment(const eli_tokenizer *t, workspace *w, const char *text, size_t len, idvec *out) {
    /* Spaces become ▁ before llama.cpp reads code points; a space is never a continuation byte, so
     * mapping U+0020 to U+2581 while decoding gives the same code points as escaping first. */
    w->norm.n = 0;
    if (bb_reserve(&w->norm, len * 3)) return -1;
    const uint8_t *u = (const uint8_t *)text;
    for (size_t i = 0; i < len;) {
        uint32_t cp = read_cpt(u, len, &i);
        if (cp == ' ') cp = 0x2581;
        w->norm.n += put_cpt(w->norm.p + w->norm.n, cp);
    }

    const char *s = w->norm.p;
    size_t n = w->norm.n;
    for (size_t i = 0; i < n;) {
        bool nl = s[i] == '\n';
        size_t j = i + 1;
        while (j < n && (s[j] == '\n') == nl) j++;
        if (nl) {
            /* A newline-only run that is a token stays whole (llama.cpp PR #21343). */
            int32_t id = eli_tokenizer_find(t, s + i, j - i);
            if (id >= 0) {
                if (iv_push(out, id)) return -1;
                i = j;
                continue;
            }
        }
        if (bpe_run(t, w, s + i, j - i, out)) return -1;
        i = j;
    }
    return 0;
}

typedef struct {
    int32_t token; /* -1: raw text */
    size_t off, len;
} fragment;

typedef struct {
    fragment *v;
    size_t n, cap;
} fraglist;

static int fl_push(fraglist *l, int32_t token, size_t off, size_t len) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        fragment *v = realloc(l->v, cap * sizeof *v);
        if (!v) return -1;
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = (fragment){token, off, len};
    return 0;
}

static const char *find_bytes(const char *hay, size_t n, const char *needle, size_t m) {
    if (m == 0 || m > n) return NULL;
    const char *end = hay + (n - m) + 1;
    for (const char *p = hay; p < end;) {
        p = memchr(p, (unsigned char)needle[0], (size_t)(end - p));
        if (!p) return NULL;
        if (!memcmp(p, needle, m)) return p;
        p++;
    }
    return NULL;
}

/* llama.cpp's tokenizer_st_partition: for each special token in turn (longest first), cut every
 * occurrence out of every raw fragment, left to right. */
static int partition(const eli_tokenizer *t, const char *text, size_t len, int parse_special, fraglist *cur,
                     fraglist *next) {
    cur->n = 0;
    if (len && fl_push(cur, -1, 0, len)) return -1;
    for (uint32_t k = 0; k < t->n_special; k++) {
        int32_t id = t->special[k];
        if (!parse_special && (t->flags[id] & (ATTR_CONTROL | ATTR_UNKNOWN))) continue;
        size_t m;
        const char *tok = sid_text(t, (uint32_t)id, &m);
        bool any = false;
        next->n = 0;
        for (size_t f = 0; f < cur->n; f++) {
            fragment fr = cur->v[f];
            if (fr.token >= 0) {
                if (fl_push(next, fr.token, 0, 0)) return -1;
                continue;
            }
            size_t off = fr.off, rem = fr.len;
            const char *hit;
            while ((hit = find_bytes(text + off, rem, tok, m))) {
                size_t at = (size_t)(hit - text);
                any = true;
                if (at > off && fl_push(next, -1, off, at - off)) return -1;
                if (fl_push(next, id, 0, 0)) return -1;
                rem -= at - off + m;
                off = at + m;
            }
            if (rem && fl_push(next, -1, off, rem)) return -1;
        }
        if (any) {
            fraglist tmp = *cur;
            *cur = *next;
            *next = tmp;
        }
    }
    return 0;
}

int eli_tokenize(const eli_tokenizer *t, const char *text, size_t len, int add_special, int parse_special,
                 int32_t **out_ids, size_t *out_n, eli_error *err) {
    *out_ids = NULL;
    *out_n = 0;
    if (!text && len) return eli_fail(err, ELI_ERR_INVALID_ARG, "tokenize: NULL text");
    if (len > MAX_TEXT_BYTES)
        return eli_fail(err, ELI_ERR_INVALID_ARG, "tokenize: text of %zu bytes exceeds the %zu-byte limit", len,
                        MAX_TEXT_BYTES);

    idvec out = {0};
    fraglist a = {0}, b = {0};
    workspace w = {0};
    int rc = ELI_OK;

    if ((add_special && t->add_bos && iv_push(&out, t->bos)) || partition(t, text, len, parse_special, &a, &b)) {
        rc = ELI_ERR_OOM;
        goto done;
    }
    for (size_t f = 0; f < a.n; f++) {
        const fragment *fr = &a.v[f];
        if (fr->token >= 0 ? iv_push(&out, fr->token) : encode_fragment(t, &w, text + fr->off, fr->len, &out)) {
            rc = ELI_ERR_OOM;
            goto done;
        }
    }
    if (add_special && t->add_eos && iv_push(&out, t->eos)) rc = ELI_ERR_OOM;

done:
    free(a.v);
    free(b.v);
    free(w.sym);
    free(w.heap);
    free(w.norm.p);
    if (rc == ELI_OK && !out.v && !(out.v = malloc(sizeof *out.v))) rc = ELI_ERR_OOM;
    if (rc) {
        free(out.v);
        return eli_fail(err, rc, "tokenize: out of memory (%zu bytes of text)", len);
    }
    *out_ids = out.v;
    *out_n = out.n;
    return ELI_OK;
}

/* ---------------------------------------------------------------------------------------------- */
/* decoding */

/* llama.cpp's clean_up_tokenization_spaces, three in-place passes over the whole text:
 * " ?" " !" " ." " ," lose the space; " ' " becomes "'"; " 's" " 'm" " 're" " 've" lose the space.
 * Each pass tests the characters of its own input (the in-place writes never run ahead of the reads). */
static size_t clean_spaces(char *s, size_t n) {
    if (n == 0) return 0;
    size_t o = 1;
    for (size_t i = 1; i < n; i++) {
        char x = s[i];
        if (s[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) o--;
        s[o++] = x;
    }

    n = o;
    o = 1;
    for (size_t i = 1; i < n; i++) {
        char x = s[i];
        if (x == '\'' && i + 1 < n && s[i - 1] == ' ' && s[i + 1] == ' ') {
            o--;           /* drop the space before */
            s[++i] = '\0'; /* drop the space after; the NUL also keeps it from counting as the next "previous" space */
        }
        s[o++] = x;
    }

    n = o;
    o = 1;
    for (size_t i = 1; i < n; i++) {
        char x = s[i];
        if (s[i - 1] == ' ' && x == '\'' && i + 1 < n) {
            char x1 = s[i + 1];
            if (x1 == 's' || x1 == 'm')
                o--;
            else if (i + 2 < n && ((x1 == 'r' && s[i + 2] == 'e') || (x1 == 'v' && s[i + 2] == 'e')))
                o--;
        }
        s[o++] = x;
    }
    return o;
}

static int check_ids(const eli_tokenizer *t, const int32_t *ids, size_t n, eli_error *err) {
    for (size_t i = 0; i < n; i++)
        if (!valid_id(t, ids[i]))
            return eli_fail(err, ELI_ERR_INVALID_ARG, "token id %d at position %zu is out of range [0, %d)", ids[i], i,
                            t->n_vocab);
    return ELI_OK;
}

int eli_detokenize(const eli_tokenizer *t, const int32_t *ids, size_t n, int remove_special, int unparse_special,
                   char **out, size_t *out_len, eli_error *err) {
    *out = NULL;
    *out_len = 0;
    if (!ids && n) return eli_fail(err, ELI_ERR_INVALID_ARG, "detokenize: NULL ids");
    int rc = check_ids(t, ids, n, err);
    if (rc) return rc;

    bool strip_space = t->add_space_prefix;
    if (remove_special && t->add_bos && n > 0 && ids[0] == t->bos) {
        strip_space = false;
        ids++;
        n--;
    }
    if (remove_special && t->add_eos && n > 0 && ids[n - 1] == t->eos) n--;

    bytebuf b = {0};
    if (bb_reserve(&b, 1)) return eli_fail(err, ELI_ERR_OOM, "detokenize: out of memory");
    for (size_t i = 0; i < n; i++) {
        size_t len = 0;
        const char *p = eli_tokenizer_token_piece(t, ids[i], unparse_special, &len);
        if (strip_space && len && p[0] == ' ') p++, len--;
        strip_space = false;
        if (bb_append(&b, p, len)) {
            free(b.p);
            return eli_fail(err, ELI_ERR_OOM, "detokenize: out of memory");
        }
    }
    if (t->clean_spaces) b.n = clean_spaces(b.p, b.n);
    if (bb_append(&b, "", 1)) {
        free(b.p);
        return eli_fail(err, ELI_ERR_OOM, "detokenize: out of memory");
    }
    *out = b.p;
    *out_len = b.n - 1;
    return ELI_OK;
}

struct eli_decoder {
    const eli_tokenizer *tok;
    int unparse_special;
    uint8_t held[4]; /* a trailing UTF-8 prefix that may still complete */
    size_t n_held;
    bytebuf buf; /* output of the last call */
};

eli_decoder *eli_decoder_new(const eli_tokenizer *t, int unparse_special, eli_error *err) {
    eli_decoder *d = calloc(1, sizeof *d);
    if (!d) {
        eli_fail(err, ELI_ERR_OOM, "out of memory for a decoder");
        return NULL;
    }
    d->tok = t;
    d->unparse_special = unparse_special;
    return d;
}

void eli_decoder_free(eli_decoder *d) {
    if (!d) return;
    free(d->buf.p);
    free(d);
}

void eli_decoder_reset(eli_decoder *d) { d->n_held = 0; }

/* Continuation byte ranges after each lead (RFC 3629 table): the second byte is restricted for E0, ED,
 * F0 and F4 so that overlongs, surrogates and code points above U+10FFFF are never "incomplete". */
static bool cont_ok(uint8_t lead, size_t pos, uint8_t c) {
    if (pos == 1) {
        if (lead == 0xe0) return c >= 0xa0 && c <= 0xbf;
        if (lead == 0xed) return c >= 0x80 && c <= 0x9f;
        if (lead == 0xf0) return c >= 0x90 && c <= 0xbf;
        if (lead == 0xf4) return c >= 0x80 && c <= 0x8f;
    }
    return (c & 0xc0) == 0x80;
}

/* Number of trailing bytes that are a proper prefix of a valid UTF-8 character (0..3). */
static size_t incomplete_tail(const uint8_t *s, size_t n) {
    for (size_t k = 1; k <= 3 && k <= n; k++) {
        uint8_t b = s[n - k];
        if ((b & 0xc0) == 0x80) continue; /* continuation: look further back for the lead */
        size_t need = b >= 0xc2 && b <= 0xdf ? 2 : b >= 0xe0 && b <= 0xef ? 3 : b >= 0xf0 && b <= 0xf4 ? 4 : 0;
        if (need <= k) return 0; /* ASCII, invalid lead, or the character is already complete */
        for (size_t j = 1; j < k; j++)
            if (!cont_ok(b, j, s[n - k + j])) return 0;
        return k;
    }
    return 0;
}

int eli_decoder_feed(eli_decoder *d, int32_t id, const char **out, size_t *out_len, eli_error *err) {
    *out = NULL;
    *out_len = 0;
    size_t len;
    const char *p = eli_tokenizer_token_piece(d->tok, id, d->unparse_special, &len);
    if (!p)
        return eli_fail(err, ELI_ERR_INVALID_ARG, "token id %d is out of range [0, %d)", id, d->tok->n_vocab);
    d->buf.n = 0;
    if (bb_append(&d->buf, d->held, d->n_held) || bb_append(&d->buf, p, len))
        return eli_fail(err, ELI_ERR_OOM, "decoder: out of memory");
    if (d->buf.n == 0) { /* an empty piece and nothing held */
        *out = "";
        return ELI_OK;
    }
    size_t tail = incomplete_tail((const uint8_t *)d->buf.p, d->buf.n);
    d->n_held = tail;
    if (tail) memcpy(d->held, d->buf.p + d->buf.n - tail, tail);
    *out = d->buf.p;
    *out_len = d->buf.n - tail;
    return ELI_OK;
}

void eli_decoder_flush(eli_decoder *d, const char **out, size_t *out_len) {
    d->buf.n = 0;
    if (d->n_held && bb_append(&d->buf, d->held, d->n_held) == 0) {
        *out = d->buf.p;
        *out_len = d->buf.n;
    } else {
        *out = "";
        *out_len = 0;
    }
    d->n_held = 0;
}
