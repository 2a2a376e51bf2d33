/* The tokenizer on arbitrary bytes, with the real Gemma 4 vocabulary (../shared/golden/tokenizer) and the
 * embedded model's (models/eliza-1-nano). The first input byte picks the vocabulary and the flags; the rest
 * is text, or (flag IDS) token ids, two bytes each, some of them out of range.
 *
 * Invariants: tokenize never fails on any bytes and gives ids in range; for valid UTF-8 without U+2581 (the
 * vocabulary's spelling of a space) the pieces of the ids (special tokens spelled out) are exactly the text,
 * and detokenize gives the text back too unless its clean-up of spaces before punctuation applies; the
 * streaming decoder's output, concatenated, equals the concatenated pieces; detokenize and the decoder
 * refuse out-of-range ids (the decoder then continues unchanged). */
#include <string.h>

#include "fuzz.h"
#include "gguf.h"
#include "tokenizer.h"

enum { VOCAB_NANO = 1, ADD_SPECIAL = 2, PARSE_SPECIAL = 4, UNPARSE_SPECIAL = 8, IDS = 16 };

static eli_tokenizer *vocab[2];

static eli_tokenizer *load(const char *path) {
    eli_error err = {0};
    eli_gguf_file *f = eli_gguf_open(path, &err);
    eli_tokenizer *t = f ? eli_tokenizer_load(f, &err) : NULL;
    eli_gguf_close(f);
    if (!t) {
        fprintf(stderr, "fuzz_tokenizer: %s\n", err.msg);
        exit(1);
    }
    return t;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    vocab[0] = load(ELI_SHARED_DIR "/golden/tokenizer/gemma4-vocab.gguf");
    vocab[1] = load(ELI_SOURCE_DIR "/models/eliza-1-nano/text/eliza-1-nano.gguf");
    return 0;
}

/* strict UTF-8 (no overlong forms, surrogates or code points past U+10FFFF): the text a round trip keeps */
static int valid_utf8(const uint8_t *s, size_t n) {
    for (size_t i = 0; i < n;) {
        const uint8_t c = s[i];
        size_t len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
        if (!len || len > n - i) return 0;
        uint32_t cp = len == 1 ? c : len == 2 ? c & 0x1Fu : len == 3 ? c & 0x0Fu : c & 0x07u;
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xC0) != 0x80) return 0;
            cp = cp << 6 | (s[i + k] & 0x3Fu);
        }
        static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
        if (cp < min_cp[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
        i += len;
    }
    return 1;
}

static int has(const uint8_t *s, size_t n, const char *needle, size_t k) {
    for (size_t i = 0; i + k <= n; i++)
        if (!memcmp(s + i, needle, k)) return 1;
    return 0;
}

/* detokenize drops the space of " ?", " !", " .", " ,", " '" (llama.cpp's clean-up) */
static int cleanup_applies(const uint8_t *s, size_t n) {
    for (size_t i = 0; i + 1 < n; i++)
        if (s[i] == ' ' && strchr("?!.,'", s[i + 1]) && s[i + 1]) return 1;
    return 0;
}

typedef struct {
    char *p;
    size_t n, cap;
} bytes;

static int same(const void *a, size_t na, const void *b, size_t nb) { return na == nb && (!na || !memcmp(a, b, na)); }

static void append(bytes *b, const char *p, size_t n) {
    if (n > b->cap - b->n) {
        b->cap = (b->cap + n) * 2;
        b->p = realloc(b->p, b->cap);
        FUZZ_ASSERT(b->p != NULL, "out of memory");
    }
    if (n) memcpy(b->p + b->n, p, n);
    b->n += n;
}

/* the concatenated pieces of the in-range ids */
static bytes pieces(const eli_tokenizer *t, const int32_t *ids, size_t n, int unparse) {
    bytes b = {0};
    for (size_t i = 0; i < n; i++) {
        size_t len;
        const char *p = eli_tokenizer_token_piece(t, ids[i], unparse, &len);
        if (p) append(&b, p, len);
    }
    return b;
}

/* the streaming decoder over all ids: out-of-range ones are refused and change nothing */
static void check_decoder(const eli_tokenizer *t, const int32_t *ids, size_t n, int unparse) {
    eli_error err = {0};
    eli_decoder *d = eli_decoder_new(t, unparse, &err);
    FUZZ_ASSERT(d != NULL, "decoder: %s", err.msg);
    bytes got = {0};
    for (size_t i = 0; i < n; i++) {
        const char *out;
        size_t len;
        const int in_range = ids[i] >= 0 && ids[i] < eli_tokenizer_n_vocab(t);
        const int rc = eli_decoder_feed(d, ids[i], &out, &len, &err);
        FUZZ_ASSERT(in_range ? rc == ELI_OK : rc == ELI_ERR_INVALID_ARG, "feed(%d) returned %d", ids[i], rc);
        if (rc == ELI_OK) append(&got, out, len);
    }
    const char *out;
    size_t len;
    eli_decoder_flush(d, &out, &len);
    append(&got, out, len);
    bytes want = pieces(t, ids, n, unparse);
    FUZZ_ASSERT(same(got.p, got.n, want.p, want.n), "decoder gave %zu bytes, the pieces are %zu", got.n,
                want.n);
    free(got.p), free(want.p);
    eli_decoder_free(d);
}

static void check_text(const eli_tokenizer *t, const uint8_t *text, size_t n, int flags) {
    const int add = (flags & ADD_SPECIAL) != 0, parse = (flags & PARSE_SPECIAL) != 0;
    int32_t *ids = NULL;
    size_t n_ids = 0;
    eli_error err = {0};
    int rc = eli_tokenize(t, (const char *)text, n, add, parse, &ids, &n_ids, &err);
    FUZZ_ASSERT(rc == ELI_OK, "tokenize failed: %s", err.msg);
    for (size_t i = 0; i < n_ids; i++)
        FUZZ_ASSERT(ids[i] >= 0 && ids[i] < eli_tokenizer_n_vocab(t), "id %d out of range", ids[i]);
    FUZZ_ASSERT(!add || (n_ids >= 1 && ids[0] == eli_tokenizer_bos(t)), "no BOS first");
    if (valid_utf8(text, n) && !has(text, n, "\xe2\x96\x81", 3)) {
        bytes p = pieces(t, ids + add, n_ids - (size_t)add, 1);
        FUZZ_ASSERT(same(p.p, p.n, text, n), "pieces (%zu bytes) differ from the text (%zu bytes)", p.n, n);
        free(p.p);
        if (!cleanup_applies(text, n)) {
            char *out = NULL;
            size_t out_len = 0;
            rc = eli_detokenize(t, ids, n_ids, add, 1, &out, &out_len, &err);
            FUZZ_ASSERT(rc == ELI_OK, "detokenize: %s", err.msg);
            FUZZ_ASSERT(same(out, out_len, text, n), "detokenize(tokenize(x)) != x (%zu vs %zu bytes)",
                        out_len, n);
            free(out);
        }
    }
    check_decoder(t, ids, n_ids, (flags & UNPARSE_SPECIAL) != 0);
    free(ids);
}

static void check_ids(const eli_tokenizer *t, const uint8_t *data, size_t n, int flags) {
    const size_t n_ids = n / 2;
    int32_t *ids = malloc((n_ids ? n_ids : 1) * sizeof *ids);
    FUZZ_ASSERT(ids != NULL, "out of memory");
    int all_in_range = 1;
    for (size_t i = 0; i < n_ids; i++) {
        /* a few ids past either end of the vocabulary */
        ids[i] = (int32_t)((uint32_t)data[2 * i] | (uint32_t)data[2 * i + 1] << 8) % (eli_tokenizer_n_vocab(t) + 16) - 8;
        all_in_range &= ids[i] >= 0 && ids[i] < eli_tokenizer_n_vocab(t);
    }
    char *out = NULL;
    size_t out_len = 0;
    eli_error err = {0};
    const int unparse = (flags & UNPARSE_SPECIAL) != 0;
    int rc = eli_detokenize(t, ids, n_ids, (flags & ADD_SPECIAL) != 0, unparse, &out, &out_len, &err);
    FUZZ_ASSERT(all_in_range ? rc == ELI_OK : rc == ELI_ERR_INVALID_ARG, "detokenize returned %d: %s", rc, err.msg);
    free(out);
    check_decoder(t, ids, n_ids, unparse);
    free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const int flags = data[0];
    const eli_tokenizer *t = vocab[(flags & VOCAB_NANO) != 0];
    if (flags & IDS)
        check_ids(t, data + 1, size - 1, flags);
    else
        check_text(t, data + 1, size - 1, flags);
    return 0;
}
