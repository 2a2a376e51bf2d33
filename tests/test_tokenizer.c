/* Tokenizer exactness against llama.cpp's golden ids and detokenized bytes (shared/golden/tokenizer),
 * plus the streaming decoder, bad ids, and load-time validation on small GGUFs built in memory. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "json.h"
#include "test.h"
#include "tokenizer.h"

/* Calls fn on every parsed line of a JSONL file; returns the number of lines. */
typedef void (*line_fn)(const eli_tokenizer *tok, const eli_json *obj, void *ctx);
static size_t for_each_line(const char *rel, const eli_tokenizer *tok, line_fn fn, void *ctx) {
    size_t len, n_lines = 0;
    char *all = test_read_file(eli_shared_path(rel), &len);
    CHECK(all != NULL, "cannot read %s", eli_shared_path(rel));
    if (!all) return 0;
    for (char *line = all; line < all + len;) {
        char *nl = memchr(line, '\n', (size_t)(all + len - line));
        size_t n = nl ? (size_t)(nl - line) : (size_t)(all + len - line);
        if (n) {
            eli_error err = {0};
            eli_json *obj = eli_json_parse(line, n, &err);
            CHECK(obj != NULL, "%s line %zu: %s", rel, n_lines + 1, err.msg);
            if (obj) {
                fn(tok, obj, ctx);
                eli_json_free(obj);
            }
            n_lines++;
        }
        line = nl ? nl + 1 : all + len;
    }
    free(all);
    return n_lines;
}

/* ids array of a JSON object member into a malloc'ed int32 array. */
static int32_t *json_ids(const eli_json *obj, const char *key, size_t *n) {
    const eli_json *a = eli_json_get(obj, key);
    *n = 0;
    if (!a || a->type != ELI_JSON_ARRAY) return NULL;
    int32_t *ids = malloc((a->n ? a->n : 1) * sizeof *ids);
    for (size_t i = 0; i < a->n; i++) ids[i] = (int32_t)a->items[i].number;
    *n = a->n;
    return ids;
}

typedef struct {
    size_t matched, total;
} tally;

static void check_case(const eli_tokenizer *tok, const eli_json *obj, void *ctx) {
    tally *t = ctx;
    const char *name = eli_json_get_str(obj, "name");
    const eli_json *text = eli_json_get(obj, "text");
    size_t n_want;
    int32_t *want = json_ids(obj, "ids", &n_want);
    t->total++;
    if (!text || text->type != ELI_JSON_STRING || !want) {
        CHECK(0, "%s: malformed case", name ? name : "?");
        free(want);
        return;
    }
    int32_t *got;
    size_t n_got;
    eli_error err = {0};
    int rc = eli_tokenize(tok, text->str, text->str_len, eli_json_get_bool(obj, "add_special", 0),
                          eli_json_get_bool(obj, "parse_special", 0), &got, &n_got, &err);
    CHECK(rc == ELI_OK, "%s: %s", name, err.msg);
    if (rc == ELI_OK) {
        size_t i = 0;
        while (i < n_got && i < n_want && got[i] == want[i]) i++;
        if (i == n_got && i == n_want) {
            t->matched++;
        } else {
            CHECK(0, "%s: ids differ at %zu of %zu/%zu: got %d, want %d", name, i, n_got, n_want,
                  i < n_got ? got[i] : -1, i < n_want ? want[i] : -1);
        }
        free(got);
    }
    free(want);
}

static void test_encode_file(const eli_tokenizer *tok, const char *rel) {
    tally t = {0, 0};
    for_each_line(rel, tok, check_case, &t);
    printf("%s: %zu/%zu cases match\n", rel, t.matched, t.total);
    CHECK(t.total > 0 && t.matched == t.total, "%s: %zu of %zu cases match", rel, t.matched, t.total);
}

static int hex_equal(const char *bytes, size_t n, const char *hex) {
    if (!hex || strlen(hex) != 2 * n) return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        if (sscanf(hex + 2 * i, "%2x", &v) != 1 || (unsigned char)bytes[i] != v) return 0;
    }
    return 1;
}

/* Valid UTF-8 (RFC 3629: no overlongs, surrogates, or code points above U+10FFFF). */
static int utf8_valid(const unsigned char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        unsigned char b = s[i];
        size_t k = b < 0x80 ? 1 : b >= 0xc2 && b <= 0xdf ? 2 : b >= 0xe0 && b <= 0xef ? 3 : b >= 0xf0 && b <= 0xf4 ? 4 : 0;
        if (!k || k > n - i) return 0;
        for (size_t j = 1; j < k; j++)
            if ((s[i + j] & 0xc0) != 0x80) return 0;
        if ((b == 0xe0 && s[i + 1] < 0xa0) || (b == 0xed && s[i + 1] > 0x9f) || (b == 0xf0 && s[i + 1] < 0x90) ||
            (b == 0xf4 && s[i + 1] > 0x8f))
            return 0;
        i += k;
    }
    return 1;
}

typedef struct {
    tally special, plain;
    size_t stream_ok, stream_total;
} detok_tally;

/* The streaming decoder over ids must reproduce the concatenated pieces exactly, and every chunk must
 * be valid UTF-8 whenever the whole is. */
static int stream_matches(const eli_tokenizer *tok, const int32_t *ids, size_t n, int unparse) {
    char *want = NULL, *got = NULL;
    size_t nw = 0, ng = 0;
    for (size_t i = 0; i < n; i++) {
        size_t len;
        const char *p = eli_tokenizer_token_piece(tok, ids[i], unparse, &len);
        want = realloc(want, nw + len + 1);
        memcpy(want + nw, p, len);
        nw += len;
    }
    int whole_valid = utf8_valid((const unsigned char *)want, nw), chunks_valid = 1, ok = 1;
    eli_error err = {0};
    eli_decoder *d = eli_decoder_new(tok, unparse, &err);
    for (size_t i = 0; i <= n && ok; i++) {
        const char *out;
        size_t len;
        if (i < n)
            ok = eli_decoder_feed(d, ids[i], &out, &len, &err) == ELI_OK;
        else
            eli_decoder_flush(d, &out, &len);
        if (!ok) break;
        if (!utf8_valid((const unsigned char *)out, len)) chunks_valid = 0;
        got = realloc(got, ng + len + 1);
        memcpy(got + ng, out, len);
        ng += len;
    }
    eli_decoder_free(d);
    ok = ok && ng == nw && (nw == 0 || !memcmp(got, want, nw)) && (!whole_valid || chunks_valid);
    free(want);
    free(got);
    return ok;
}

static void check_detok(const eli_tokenizer *tok, const eli_json *obj, void *ctx) {
    detok_tally *t = ctx;
    const char *name = eli_json_get_str(obj, "name");
    size_t n;
    int32_t *ids = json_ids(obj, "ids", &n);
    CHECK(ids != NULL, "%s: no ids", name ? name : "?");
    if (!ids) return;
    for (int unparse = 1; unparse >= 0; unparse--) {
        tally *tt = unparse ? &t->special : &t->plain;
        const char *hex = eli_json_get_str(obj, unparse ? "text_special_hex" : "text_plain_hex");
        char *out;
        size_t len;
        eli_error err = {0};
        int rc = eli_detokenize(tok, ids, n, 0, unparse, &out, &len, &err);
        tt->total++;
        CHECK(rc == ELI_OK, "%s: %s", name, err.msg);
        if (rc) continue;
        if (hex_equal(out, len, hex))
            tt->matched++;
        else
            CHECK(0, "%s (%s): got '%.*s', want hex %s", name, unparse ? "special" : "plain", (int)len, out, hex);
        free(out);
        t->stream_total++;
        if (stream_matches(tok, ids, n, unparse))
            t->stream_ok++;
        else
            CHECK(0, "%s (%s): streamed bytes differ from the pieces", name, unparse ? "special" : "plain");
    }
    free(ids);
}

static void test_detok_file(const eli_tokenizer *tok) {
    detok_tally t = {{0, 0}, {0, 0}, 0, 0};
    for_each_line("golden/tokenizer/detok.jsonl", tok, check_detok, &t);
    printf("detok.jsonl: text_special %zu/%zu, text_plain %zu/%zu match; stream %zu/%zu\n", t.special.matched,
           t.special.total, t.plain.matched, t.plain.total, t.stream_ok, t.stream_total);
    CHECK(t.special.total > 0 && t.special.matched == t.special.total, "text_special mismatches");
    CHECK(t.plain.total > 0 && t.plain.matched == t.plain.total, "text_plain mismatches");
    CHECK(t.stream_ok == t.stream_total, "stream mismatches");
}

static void feed_expect(eli_decoder *d, int32_t id, const char *want, size_t want_len, const char *what) {
    const char *out;
    size_t len;
    eli_error err = {0};
    int rc = eli_decoder_feed(d, id, &out, &len, &err);
    CHECK(rc == ELI_OK, "%s: %s", what, err.msg);
    CHECK(rc == ELI_OK && len == want_len && !memcmp(out, want, len), "%s: got %zu bytes '%.*s'", what, len,
          (int)len, rc == ELI_OK ? out : "");
}

static int32_t byte_token(const eli_tokenizer *tok, unsigned b) {
    char name[8];
    snprintf(name, sizeof name, "<0x%02X>", b);
    return eli_tokenizer_find(tok, name, strlen(name));
}

static void test_stream(const eli_tokenizer *tok) {
    eli_error err = {0};
    eli_decoder *d = eli_decoder_new(tok, 0, &err);
    CHECK(d != NULL, "decoder: %s", err.msg);
    if (!d) return;
    int32_t e2 = byte_token(tok, 0xE2), x82 = byte_token(tok, 0x82), xac = byte_token(tok, 0xAC);
    CHECK(e2 >= 0 && x82 >= 0 && xac >= 0, "byte tokens missing");
    /* "€" = E2 82 AC split over three byte tokens: nothing until the last one. */
    feed_expect(d, e2, "", 0, "euro 1/3");
    feed_expect(d, x82, "", 0, "euro 2/3");
    feed_expect(d, xac, "\xe2\x82\xac", 3, "euro 3/3");
    int32_t hello = eli_tokenizer_find(tok, "Hello", 5);
    CHECK(hello >= 0, "no 'Hello' token");
    feed_expect(d, hello, "Hello", 5, "normal token");
    /* A held prefix comes out together with the completing text. */
    feed_expect(d, e2, "", 0, "held lead");
    feed_expect(d, x82, "", 0, "held lead + cont");
    feed_expect(d, xac, "\xe2\x82\xac", 3, "completed");
    /* A lead followed by something that can never continue it is passed through at once. */
    feed_expect(d, e2, "", 0, "lead before ascii");
    feed_expect(d, hello, "\xe2Hello", 6, "invalid sequence passes through");
    feed_expect(d, byte_token(tok, 0xFF), "\xff", 1, "0xFF is never a prefix");
    /* CONTROL tokens are silent without unparse_special, and do not disturb a held prefix. */
    feed_expect(d, e2, "", 0, "lead before control");
    feed_expect(d, eli_tokenizer_bos(tok), "", 0, "control token in plain mode");
    const char *out;
    size_t len;
    eli_decoder_flush(d, &out, &len);
    CHECK(len == 1 && (unsigned char)out[0] == 0xE2, "flush returns the incomplete byte (got %zu bytes)", len);
    eli_decoder_flush(d, &out, &len);
    CHECK(len == 0, "second flush is empty");
    /* 4-byte character over four byte tokens, with reset in between. */
    feed_expect(d, byte_token(tok, 0xF0), "", 0, "f0");
    eli_decoder_reset(d);
    feed_expect(d, hello, "Hello", 5, "after reset");
    const unsigned char smile[4] = {0xF0, 0x9F, 0x98, 0x80};
    for (int i = 0; i < 3; i++) feed_expect(d, byte_token(tok, smile[i]), "", 0, "emoji prefix");
    feed_expect(d, byte_token(tok, smile[3]), (const char *)smile, 4, "emoji complete");
    /* Bad ids are rejected and leave the decoder usable. */
    CHECK(eli_decoder_feed(d, -1, &out, &len, &err) != ELI_OK, "feed(-1) must fail");
    CHECK(eli_decoder_feed(d, eli_tokenizer_n_vocab(tok), &out, &len, &err) != ELI_OK, "feed(n_vocab) must fail");
    CHECK(strstr(err.msg, "out of range") != NULL, "message: %s", err.msg);
    feed_expect(d, hello, "Hello", 5, "after a bad id");
    eli_decoder_free(d);

    d = eli_decoder_new(tok, 1, &err);
    feed_expect(d, eli_tokenizer_bos(tok), "<bos>", 5, "control token with unparse_special");
    eli_decoder_free(d);
}

static void test_api(const eli_tokenizer *tok) {
    CHECK(eli_tokenizer_n_vocab(tok) == 262144, "n_vocab %d", eli_tokenizer_n_vocab(tok));
    CHECK(eli_tokenizer_bos(tok) == 2 && eli_tokenizer_eos(tok) == 1, "bos/eos");
    CHECK(eli_tokenizer_unk(tok) == 3 && eli_tokenizer_pad(tok) == 0, "unk/pad");
    CHECK(eli_tokenizer_add_bos(tok), "add_bos");
    CHECK(eli_tokenizer_n_merges(tok) == 514906, "merges %d", eli_tokenizer_n_merges(tok));
    /* EOG set exactly {<eos>, <turn|>, <|tool_response>}, as llama.cpp finds it. */
    int n_eog = 0;
    for (int32_t id = 0; id < eli_tokenizer_n_vocab(tok); id++) n_eog += eli_tokenizer_is_eog(tok, id);
    CHECK(n_eog == 3 && eli_tokenizer_is_eog(tok, 1) && eli_tokenizer_is_eog(tok, 106) && eli_tokenizer_is_eog(tok, 50),
          "EOG set (%d members)", n_eog);
    CHECK(!eli_tokenizer_is_eog(tok, 212) && !eli_tokenizer_is_control(tok, 212), "</s> is ordinary");
    CHECK(eli_tokenizer_is_control(tok, 50) && eli_tokenizer_token_type(tok, 50) == ELI_TOKEN_USER_DEFINED,
          "<|tool_response> is USER_DEFINED in the file, CONTROL after load");
    CHECK(eli_tokenizer_is_control(tok, 105) && !eli_tokenizer_is_control(tok, 48), "control flags");
    CHECK(eli_tokenizer_token_type(tok, 238) == ELI_TOKEN_BYTE && eli_tokenizer_token_type(tok, -1) == -1, "types");
    size_t len;
    const char *s = eli_tokenizer_token_text(tok, 138, &len);
    CHECK(s && len == 6 && !memcmp(s, "\xe2\x96\x81\xe2\x96\x81", 6), "text of 138 is '▁▁'");
    s = eli_tokenizer_token_piece(tok, 138, 0, &len);
    CHECK(s && len == 2 && !memcmp(s, "  ", 2), "piece of 138 is two spaces");
    s = eli_tokenizer_token_piece(tok, 105, 0, &len);
    CHECK(s && len == 0, "CONTROL piece is empty in plain mode");
    s = eli_tokenizer_token_piece(tok, 105, 1, &len);
    CHECK(s && len == 7 && !memcmp(s, "<|turn>", 7), "CONTROL piece with unparse_special");
    CHECK(eli_tokenizer_token_text(tok, 262144, &len) == NULL && eli_tokenizer_token_piece(tok, -5, 1, &len) == NULL,
          "bad ids give NULL");
    CHECK(eli_tokenizer_find(tok, "<turn|>", 7) == 106 && eli_tokenizer_find(tok, "no such token here", 18) == -1,
          "find");

    /* Bad ids in detokenization. */
    int32_t bad[3] = {9259, 262144, 1902};
    char *out = NULL;
    eli_error err = {0};
    CHECK(eli_detokenize(tok, bad, 3, 0, 1, &out, &len, &err) == ELI_ERR_INVALID_ARG && out == NULL,
          "detokenize rejects id 262144");
    CHECK(strstr(err.msg, "262144") && strstr(err.msg, "position 1"), "message: %s", err.msg);
    bad[1] = -1;
    CHECK(eli_detokenize(tok, bad, 3, 0, 1, &out, &len, &err) == ELI_ERR_INVALID_ARG, "detokenize rejects -1");

    /* remove_special drops the leading BOS only. */
    int32_t ids[3] = {2, 9259, 2};
    CHECK(eli_detokenize(tok, ids, 3, 1, 1, &out, &len, &err) == ELI_OK && len == 10 && !memcmp(out, "Hello<bos>", 10),
          "remove_special");
    free(out);

    /* Empty input. */
    int32_t *v;
    size_t n;
    CHECK(eli_tokenize(tok, "", 0, 1, 0, &v, &n, &err) == ELI_OK && n == 1 && v[0] == 2, "empty + BOS");
    free(v);
    CHECK(eli_tokenize(tok, NULL, 0, 0, 0, &v, &n, &err) == ELI_OK && n == 0 && v != NULL, "empty");
    free(v);

    /* Malformed UTF-8 is read as llama.cpp reads it: U+FFFD per bad byte, overlong forms re-encoded. */
    int32_t *a, *b;
    size_t na, nb;
    CHECK(eli_tokenize(tok, "\xff", 1, 0, 0, &a, &na, &err) == ELI_OK, "0xFF");
    CHECK(eli_tokenize(tok, "\xef\xbf\xbd", 3, 0, 0, &b, &nb, &err) == ELI_OK, "U+FFFD");
    CHECK(na == nb && !memcmp(a, b, na * sizeof *a), "a lone 0xFF tokenizes as U+FFFD");
    free(a);
    free(b);
    CHECK(eli_tokenize(tok, "\xc1\x81", 2, 0, 0, &a, &na, &err) == ELI_OK && na == 1 &&
              a[0] == eli_tokenizer_find(tok, "A", 1),
          "overlong C1 81 reads as 'A'");
    free(a);
}

/* ---- small GGUFs in memory --------------------------------------------------------------------- */

typedef struct {
    unsigned char *p;
    size_t n, cap;
    uint64_t n_kv;
} gbuf;

static void g_put(gbuf *b, const void *src, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 256;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, src, n);
    b->n += n;
}
static void g_u32(gbuf *b, uint32_t v) {
    unsigned char x[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16), (unsigned char)(v >> 24)};
    g_put(b, x, 4);
}
static void g_u64(gbuf *b, uint64_t v) {
    g_u32(b, (uint32_t)v);
    g_u32(b, (uint32_t)(v >> 32));
}
static void g_str(gbuf *b, const char *s) {
    g_u64(b, strlen(s));
    g_put(b, s, strlen(s));
}
static void kv_str(gbuf *b, const char *key, const char *v) {
    g_str(b, key);
    g_u32(b, GGUF_VT_STRING);
    g_str(b, v);
    b->n_kv++;
}
static void kv_u32(gbuf *b, const char *key, uint32_t v) {
    g_str(b, key);
    g_u32(b, GGUF_VT_UINT32);
    g_u32(b, v);
    b->n_kv++;
}
static void kv_strs(gbuf *b, const char *key, const char *const *v, size_t n) {
    g_str(b, key);
    g_u32(b, GGUF_VT_ARRAY);
    g_u32(b, GGUF_VT_STRING);
    g_u64(b, n);
    for (size_t i = 0; i < n; i++) g_str(b, v[i]);
    b->n_kv++;
}
static void kv_i32s(gbuf *b, const char *key, const int32_t *v, size_t n) {
    g_str(b, key);
    g_u32(b, GGUF_VT_ARRAY);
    g_u32(b, GGUF_VT_INT32);
    g_u64(b, n);
    for (size_t i = 0; i < n; i++) g_u32(b, (uint32_t)v[i]);
    b->n_kv++;
}

/* Header + the key/values in kv; the caller frees the result. */
static unsigned char *g_file(const gbuf *kv, size_t *size) {
    gbuf f = {0};
    g_put(&f, "GGUF", 4);
    g_u32(&f, 3);
    g_u64(&f, 0);
    g_u64(&f, kv->n_kv);
    if (kv->n) g_put(&f, kv->p, kv->n);
    *size = f.n;
    return f.p;
}

/* A toy gemma4 vocabulary: specials, 256 byte tokens, a few pieces and merges. */
enum { TOY_BYTES = 9, TOY_NORMAL = TOY_BYTES + 256 };
static const char *const toy_normal[] = {"a", "b", "c", "ab", "abc", "aa", "\342\226\201", "\342\226\201a",
                                         "\n", "\n\n", "qrs", "s"};
enum { TOY_N = TOY_NORMAL + (int)(sizeof toy_normal / sizeof toy_normal[0]) };

/* Which piece of the toy vocabulary to break, for the validation tests. */
enum toy_flaw { TOY_OK, TOY_NO_MERGES, TOY_SHORT_TYPES, TOY_BAD_BOS, TOY_BAD_BYTE, TOY_WRONG_MODEL, TOY_NO_MODEL };

static eli_gguf_file *toy_gguf(enum toy_flaw flaw, unsigned char **mem) {
    static char bytes[256][8];
    const char *toks[TOY_N];
    int32_t types[TOY_N];
    const char *const special[TOY_BYTES] = {"<pad>", "<eos>", "<bos>", "<unk>", "<|turn>", "<turn|>",
                                            "<|tool_response>", "</s>", "<|\"|>"};
    const int32_t special_type[TOY_BYTES] = {3, 3, 3, 3, 3, 3, 4, 1, 4};
    for (int i = 0; i < TOY_BYTES; i++) toks[i] = special[i], types[i] = special_type[i];
    for (int i = 0; i < 256; i++) {
        snprintf(bytes[i], sizeof bytes[i], "<0x%02X>", i);
        toks[TOY_BYTES + i] = bytes[i];
        types[TOY_BYTES + i] = ELI_TOKEN_BYTE;
    }
    if (flaw == TOY_BAD_BYTE) toks[TOY_BYTES + 7] = "<0xZZ>";
    for (int i = TOY_NORMAL; i < TOY_N; i++) toks[i] = toy_normal[i - TOY_NORMAL], types[i] = ELI_TOKEN_NORMAL;
    /* "q r" and "qr s": neither "q", "r" nor "qr" is a token, but "qrs" is, and llama.cpp gets there. */
    const char *const merges[] = {"a b", "ab c", "a a", "\342\226\201 a", "\n \n", "q r", "qr s", "nospace"};

    gbuf kv = {0};
    if (flaw != TOY_NO_MODEL) kv_str(&kv, "tokenizer.ggml.model", flaw == TOY_WRONG_MODEL ? "llama" : "gemma4");
    kv_strs(&kv, "tokenizer.ggml.tokens", toks, TOY_N);
    kv_i32s(&kv, "tokenizer.ggml.token_type", types, flaw == TOY_SHORT_TYPES ? TOY_N - 1 : TOY_N);
    if (flaw != TOY_NO_MERGES) kv_strs(&kv, "tokenizer.ggml.merges", merges, sizeof merges / sizeof merges[0]);
    kv_u32(&kv, "tokenizer.ggml.bos_token_id", flaw == TOY_BAD_BOS ? TOY_N : 2);
    kv_u32(&kv, "tokenizer.ggml.eos_token_id", 1);
    size_t size;
    *mem = g_file(&kv, &size);
    free(kv.p);
    eli_error err = {0};
    eli_gguf_file *f = eli_gguf_open_memory(*mem, size, &err);
    CHECK(f != NULL, "toy gguf: %s", err.msg);
    return f;
}

static void expect_reject(enum toy_flaw flaw, const char *needle) {
    unsigned char *mem;
    eli_gguf_file *f = toy_gguf(flaw, &mem);
    eli_error err = {0};
    eli_tokenizer *t = f ? eli_tokenizer_load(f, &err) : NULL;
    CHECK(f && t == NULL, "flaw %d must be rejected", (int)flaw);
    CHECK(strstr(err.msg, needle) != NULL, "flaw %d: message '%s' should name '%s'", (int)flaw, err.msg, needle);
    eli_tokenizer_free(t);
    eli_gguf_close(f);
    free(mem);
}

static void expect_ids(const eli_tokenizer *t, const char *text, int parse_special, const int32_t *want, size_t n_want) {
    int32_t *got;
    size_t n;
    eli_error err = {0};
    int rc = eli_tokenize(t, text, strlen(text), 0, parse_special, &got, &n, &err);
    CHECK(rc == ELI_OK, "'%s': %s", text, err.msg);
    if (rc) return;
    int same = n == n_want && !memcmp(got, want, n * sizeof *got);
    CHECK(same, "'%s' (parse_special %d): got %zu ids, first %d", text, parse_special, n, n ? got[0] : -1);
    free(got);
}

static int32_t toy(const char *piece) {
    for (int i = TOY_NORMAL; i < TOY_N; i++)
        if (!strcmp(toy_normal[i - TOY_NORMAL], piece)) return i;
    return -1;
}
#define B(c) (TOY_BYTES + (unsigned char)(c))
#define IDS(...) (const int32_t[]){__VA_ARGS__}, sizeof((const int32_t[]){__VA_ARGS__}) / sizeof(int32_t)

static void test_toy(void) {
    expect_reject(TOY_NO_MODEL, "tokenizer.ggml.model");
    expect_reject(TOY_WRONG_MODEL, "gemma4");
    expect_reject(TOY_NO_MERGES, "tokenizer.ggml.merges");
    expect_reject(TOY_SHORT_TYPES, "tokenizer.ggml.token_type");
    expect_reject(TOY_BAD_BOS, "tokenizer.ggml.bos_token_id");
    expect_reject(TOY_BAD_BYTE, "byte token");

    /* A GGUF with no tokenizer keys at all. */
    gbuf kv = {0};
    kv_str(&kv, "general.architecture", "gemma4");
    size_t size;
    unsigned char *mem = g_file(&kv, &size);
    free(kv.p);
    eli_error err = {0};
    eli_gguf_file *f = eli_gguf_open_memory(mem, size, &err);
    eli_tokenizer *t = f ? eli_tokenizer_load(f, &err) : NULL;
    CHECK(f && !t && strstr(err.msg, "tokenizer.ggml.model"), "no tokenizer keys: '%s'", err.msg);
    eli_gguf_close(f);
    free(mem);

    f = toy_gguf(TOY_OK, &mem);
    t = f ? eli_tokenizer_load(f, &err) : NULL;
    CHECK(t != NULL, "toy load: %s", err.msg);
    eli_gguf_close(f);
    free(mem); /* the tokenizer must not point into the file */
    if (!t) return;

    expect_ids(t, "abc", 0, IDS(toy("abc")));
    expect_ids(t, "ab", 0, IDS(toy("ab")));
    expect_ids(t, "aaa", 0, IDS(toy("aa"), toy("a"))); /* equal ranks: leftmost pair first */
    expect_ids(t, "a a", 0, IDS(toy("a"), toy("\342\226\201a")));
    expect_ids(t, "\n\n\n", 0, IDS(toy("\n\n"), toy("\n"))); /* not a token: BPE over the newlines */
    expect_ids(t, "x\n\nb", 0, IDS(B('x'), toy("\n\n"), toy("b")));
    expect_ids(t, "qrs", 0, IDS(toy("qrs")));   /* through a non-token intermediate "qr" */
    expect_ids(t, "qr", 0, IDS(B('q'), B('r'))); /* "qr" itself falls back to bytes */
    expect_ids(t, "<|turn>", 0, IDS(B('<'), B('|'), B('t'), B('u'), B('r'), B('n'), B('>')));
    expect_ids(t, "<|turn>", 1, IDS(4));
    expect_ids(t, "a<|\"|>b", 0, IDS(toy("a"), 8, toy("b"))); /* USER_DEFINED: always */
    expect_ids(t, "<|tool_response>", 1, IDS(6));             /* EOG made it CONTROL ... */
    int32_t *v;
    size_t n;
    CHECK(eli_tokenize(t, "<|tool_response>", 16, 0, 0, &v, &n, &err) == ELI_OK && n == 16, "... so not matched raw");
    free(v);
    CHECK(eli_tokenize(t, "</s>", 4, 0, 1, &v, &n, &err) == ELI_OK && n == 4 && v[0] == B('<'),
          "</s> is never matched as a token");
    free(v);
    CHECK(eli_tokenizer_is_eog(t, 1) && eli_tokenizer_is_eog(t, 5) && eli_tokenizer_is_eog(t, 6) &&
              !eli_tokenizer_is_eog(t, 7) && !eli_tokenizer_is_eog(t, 4),
          "toy EOG set");
    CHECK(eli_tokenizer_n_merges(t) == 8, "merge count includes unusable entries");

    /* Clean-up of spaces before punctuation, as llama.cpp's clean_spaces. */
    int32_t ids[] = {toy("a"), B(' '), B('.'), B(' '), B('\''), B(' '), toy("b"), B(' '), B('\''), toy("s")};
    char *out;
    size_t len;
    CHECK(eli_detokenize(t, ids, sizeof ids / sizeof ids[0], 0, 1, &out, &len, &err) == ELI_OK, "detok");
    CHECK(len == 6 && !memcmp(out, "a.'b's", 6), "clean_spaces: got '%.*s'", (int)len, out);
    free(out);
    eli_tokenizer_free(t);
}

/* Arbitrary bytes (biased toward spaces, newlines, special-token characters and UTF-8 lead and
 * continuation bytes) must tokenize without trouble, give in-range ids, and stream back without error. */
static void test_random_bytes(const eli_tokenizer *tok) {
    static const char alphabet[] = " \n\n<|>/turnbos\xe2\x96\x81\x80\xbf\xc3\xa9\xf0\x9f\xf4\x90\xc0\xff\t\r\0a.',";
    uint32_t seed = 12345;
    size_t bad = 0;
    for (int iter = 0; iter < 300; iter++) {
        char buf[700];
        size_t n = (size_t)(iter * 7 % 700);
        for (size_t i = 0; i < n; i++) {
            seed = seed * 1664525u + 1013904223u;
            buf[i] = (seed >> 24) < 200 ? alphabet[(seed >> 8) % (sizeof alphabet - 1)] : (char)(seed >> 16);
        }
        int32_t *ids;
        size_t n_ids;
        eli_error err = {0};
        if (eli_tokenize(tok, buf, n, iter & 1, iter >> 1 & 1, &ids, &n_ids, &err)) {
            bad++;
            continue;
        }
        for (size_t i = 0; i < n_ids; i++)
            if (ids[i] < 0 || ids[i] >= eli_tokenizer_n_vocab(tok)) bad++;
        if (!stream_matches(tok, ids, n_ids, iter >> 2 & 1)) bad++;
        char *out;
        size_t len;
        if (eli_detokenize(tok, ids, n_ids, iter & 1, 1, &out, &len, &err))
            bad++;
        else
            free(out);
        free(ids);
    }
    CHECK(bad == 0, "%zu problems on random input", bad);
}

int main(void) {
    test_toy();

    eli_error err = {0};
    eli_gguf_file *f = eli_gguf_open(eli_shared_path("golden/tokenizer/gemma4-vocab.gguf"), &err);
    CHECK(f != NULL, "open vocab: %s", err.msg);
    if (!f) TEST_MAIN_END();
    eli_tokenizer *tok = eli_tokenizer_load(f, &err);
    eli_gguf_close(f); /* everything below runs on the tokenizer's own copies */
    CHECK(tok != NULL, "load vocab: %s", err.msg);
    if (!tok) TEST_MAIN_END();

    test_api(tok);
    test_stream(tok);
    test_random_bytes(tok);
    test_encode_file(tok, "golden/tokenizer/cases.jsonl");
    test_encode_file(tok, "golden/tokenizer/long_no_newlines.jsonl");
    test_detok_file(tok);

    eli_tokenizer_free(tok);
    TEST_MAIN_END();
}
