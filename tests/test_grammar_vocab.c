/* Token masks over the real Gemma 4 vocabulary (262,144 tokens, src/grammar_vocab.c), checked against
 * brute force: every token's piece fed byte by byte into a copy of the grammar position (plus the token
 * reference and end-of-generation rules), at every position along tokenized texts, for grammars that
 * exercise the trie walk's shortcuts (string bodies, bounded repetitions, number runs), token
 * references, and characters split across byte tokens. Also: eli_grammar_allows and eli_grammar_apply
 * agree with the mask, accept_token refuses what the mask refuses, and masks cached per state equal
 * fresh ones. */
#include <math.h>

#include "gguf.h"
#include "grammar.h"
#include "grammar_match.h"
#include "grammar_stage.h"
#include "grammar_vocab.h"
#include "sampler.h"
#include "test.h"
#include "tokenizer.h"

static const eli_tokenizer *tok;
static const eli_grammar_vocab *vocab;

/* Whether token t may follow pos, the slow way. */
static int brute_allows(eli_grammar_machine *gm, eli_grammar_pos pos, int32_t t) {
    size_t len;
    const char *piece = eli_tokenizer_token_piece(tok, t, 0, &len);
    if (eli_tokenizer_is_eog(tok, t)) return eli_grammar_is_complete(gm, pos);
    int ref = pos.n_partial == 0 && eli_gm_next_token(gm, pos.state, t) != ELI_GM_DEAD;
    if (eli_tokenizer_is_control(tok, t) || len == 0) return ref;
    eli_grammar_pos tmp = pos;
    return eli_grammar_accept_bytes(gm, &tmp, piece, len, NULL) == 1 || ref;
}

/* Compares the mask at the matcher's position with brute force over the whole vocabulary. */
static int check_position(eli_grammar_matcher *m, const char *what, size_t step) {
    eli_error err = {0};
    const uint64_t *bits;
    int32_t n = eli_tokenizer_n_vocab(tok);
    CHECK(!eli_grammar_mask(m, &bits, &err), "%s: mask: %s", what, err.msg);
    if (!bits) return 0;
    eli_grammar_machine *gm = eli_grammar_matcher_machine(m);
    eli_grammar_pos pos = eli_grammar_matcher_pos(m);
    static float logits[1 << 18];
    for (int32_t t = 0; t < n; t++) logits[t] = (float)(t % 7);
    CHECK(n <= (1 << 18) && !eli_grammar_apply(m, logits, &err), "%s: apply: %s", what, err.msg);
    int bad = 0, allowed = 0;
    for (int32_t t = 0; t < n; t++) {
        int want = brute_allows(gm, pos, t), got = (int)(bits[t >> 6] >> (t & 63) & 1);
        if (logits[t] != (want ? (float)(t % 7) : -INFINITY) && bad++ < 5)
            CHECK(0, "%s step %zu: token %d: logit %g after apply, allowed %d", what, step, t, logits[t], want);
        allowed += got;
        if (want != got && bad++ < 5) {
            size_t l;
            const char *p = eli_tokenizer_token_piece(tok, t, 1, &l);
            CHECK(0, "%s step %zu: token %d '%.*s': mask %d, brute force %d", what, step, t, (int)l, p, got, want);
        }
        if (t % 97 == 0) CHECK(eli_grammar_allows(m, t, &err) == want, "%s step %zu: allows(%d)", what, step, t);
    }
    CHECK(!bad, "%s step %zu: %d tokens differ", what, step, bad);
    return allowed;
}

/* A matcher for grammar text over the vocabulary (the grammar in *g); NULL (a failed check) on error. */
static eli_grammar_matcher *matcher_for(const char *g_text, eli_grammar **g) {
    eli_error err = {0};
    eli_grammar_matcher *m = NULL;
    *g = NULL;
    CHECK(!eli_grammar_parse(g_text, strlen(g_text), tok, g, &err) && !eli_grammar_matcher_new(*g, vocab, &m, &err), "%s: %s",
          g_text, err.msg);
    return m;
}

/* Walks a text's tokens through grammar text g, checking the mask before each token and at the end. */
static void walk(const char *what, const char *g_text, const char *text, int cached) {
    eli_error err = {0};
    eli_grammar *g;
    eli_grammar_matcher *m = matcher_for(g_text, &g);
    if (!m) return;
    eli_grammar_matcher_cache_masks(m, cached);
    int32_t *ids;
    size_t n;
    CHECK(!eli_tokenize(tok, text, strlen(text), 0, 0, &ids, &n, &err), "tokenize");
    for (size_t i = 0; i <= n; i++) {
        int allowed = check_position(m, what, i);
        if (i == n) break;
        CHECK(allowed > 0, "%s step %zu: nothing allowed", what, i);
        CHECK(!eli_grammar_accept_token(m, ids[i], &err), "%s step %zu: token %d refused: %s", what, i, ids[i], err.msg);
    }
    CHECK(eli_grammar_matcher_complete(m), "%s: text complete", what);
    CHECK(!eli_grammar_accept_token(m, eli_tokenizer_eos(tok), &err) && eli_grammar_matcher_complete(m), "%s: <eos> at the end",
          what);
    free(ids);
    eli_grammar_matcher_free(m);
    eli_grammar_free(g);
}

static const char *const json_gbnf =
    "root ::= ws value ws\n"
    "value ::= object | array | string | number | \"true\" | \"false\" | \"null\"\n"
    "object ::= \"{\" ws ( member ( ws \",\" ws member )* ws )? \"}\"\n"
    "member ::= string ws \":\" ws value\n"
    "array ::= \"[\" ws ( value ( ws \",\" ws value )* ws )? \"]\"\n"
    "string ::= \"\\\"\" ( [^\"\\\\\\x00-\\x1f] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4} ) )* \"\\\"\"\n"
    "number ::= \"-\"? ( \"0\" | [1-9] [0-9]* ) ( \".\" [0-9]+ )? ( [eE] [-+]? [0-9]+ )?\n"
    "ws ::= [ \\t\\n\\r]*\n";

static const char *const envelope_gbnf =
    "root ::= \"{\" ws \"\\\"thought\\\":\" ws str ws \",\" ws \"\\\"replyText\\\":\" ws str ws \",\" ws "
    "\"\\\"actions\\\":\" ws \"[\" ws ( str ( ws \",\" ws str )* ws )? \"]\" ws \"}\"\n"
    "str ::= \"\\\"\" ( [^\"\\\\\\x00-\\x1f] | \"\\\\\" [\"\\\\/bfnrtu] )* \"\\\"\"\n"
    "ws ::= [ \\n]{0,4}\n";

/* A character split across byte tokens, the pending bytes' masks, and byte tokens that cannot start a
 * character the grammar takes. */
static void test_partial(void) {
    eli_error err = {0};
    eli_grammar *g;
    eli_grammar_matcher *m = matcher_for("root ::= ( \"€\" | \"é\" | [a-c] )+", &g);
    if (!m) return;
    int32_t e2 = eli_tokenizer_find(tok, "<0xE2>", 6), x82 = eli_tokenizer_find(tok, "<0x82>", 6),
            xac = eli_tokenizer_find(tok, "<0xAC>", 6), c3 = eli_tokenizer_find(tok, "<0xC3>", 6),
            xa9 = eli_tokenizer_find(tok, "<0xA9>", 6), f0 = eli_tokenizer_find(tok, "<0xF0>", 6);
    CHECK(e2 >= 0 && x82 >= 0 && xac >= 0 && c3 >= 0 && xa9 >= 0 && f0 >= 0, "byte tokens");
    check_position(m, "partial", 0);
    CHECK(eli_grammar_allows(m, e2, &err) == 1 && eli_grammar_allows(m, c3, &err) == 1, "leads of € and é");
    CHECK(eli_grammar_allows(m, f0, &err) == 0 && eli_grammar_allows(m, x82, &err) == 0, "no 4-byte lead, no continuation");
    CHECK(!eli_grammar_accept_token(m, e2, &err), "<0xE2>");
    int allowed = check_position(m, "partial", 1);
    CHECK(allowed == 1 && eli_grammar_allows(m, x82, &err) == 1, "only <0x82> continues € (%d allowed)", allowed);
    CHECK(!eli_grammar_accept_token(m, x82, &err), "<0x82>");
    allowed = check_position(m, "partial", 2);
    CHECK(allowed == 1 && eli_grammar_allows(m, xac, &err) == 1, "only <0xAC> ends € (%d allowed)", allowed);
    CHECK(eli_grammar_accept_token(m, eli_tokenizer_eos(tok), &err) == ELI_ERR_INVALID_ARG, "no <eos> inside a character");
    CHECK(!eli_grammar_accept_token(m, xac, &err) && eli_grammar_matcher_complete(m), "€ complete");
    check_position(m, "partial", 3);
    /* a text token after a pending lead byte is refused, as is one mid-character */
    CHECK(!eli_grammar_accept_token(m, c3, &err), "<0xC3>");
    int32_t a = eli_tokenizer_find(tok, "a", 1);
    CHECK(a >= 0 && eli_grammar_allows(m, a, &err) == 0, "'a' cannot follow a lead byte");
    CHECK(!eli_grammar_accept_token(m, xa9, &err) && eli_grammar_matcher_complete(m), "é complete");
    eli_grammar_matcher_free(m);
    eli_grammar_free(g);
}

/* Token references: control tokens only through them; !<[id]> takes any one token but that one (and
 * the end-of-generation tokens only once complete). */
static void test_token_refs(void) {
    eli_error err = {0};
    eli_grammar *g;
    eli_grammar_matcher *m = matcher_for("root ::= \"x\" ( <|turn> | !<[2]> ) \"y\"", &g);
    if (!m) return;
    int32_t x = eli_tokenizer_find(tok, "x", 1), turn = eli_tokenizer_find(tok, "<|turn>", 7);
    CHECK(x >= 0 && turn == 105, "ids");
    CHECK(eli_grammar_allows(m, turn, &err) == 0, "control token refused where text is expected");
    CHECK(!eli_grammar_accept_token(m, x, &err), "x");
    int allowed = check_position(m, "refs", 1);
    CHECK(allowed == eli_tokenizer_n_vocab(tok) - 1 - 3, "all but <bos> (2) and the 3 end tokens: %d", allowed);
    CHECK(eli_grammar_allows(m, turn, &err) == 1 && eli_grammar_allows(m, 2, &err) == 0, "<|turn> yes, <bos> no");
    CHECK(!eli_grammar_accept_token(m, turn, &err), "<|turn>");
    check_position(m, "refs", 2);
    eli_grammar_matcher_free(m);
    eli_grammar_free(g);
}

/* Random logits for step i of a run (a pure function of seed and step, so a run can be replayed). */
static void step_logits(float *logits, int32_t n, uint64_t seed, int step) {
    uint64_t x = seed ^ (uint64_t)step * 0x9E3779B97F4A7C15ull;
    for (int32_t t = 0; t < n; t++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        logits[t] = (float)(x >> 40) * 0x1.0p-24f * 8.0f;
    }
}

/* The grammar as a sampler stage: greedy draws are the argmax of the masked logits (an independent
 * matcher masks a copy), sampled distributions put no mass on refused tokens, and a sampler state saved
 * mid-generation (a slot file's) loads back, at another size, and continues identically. */
static void test_sampler_stage(void) {
    eli_error err = {0};
    int32_t n = eli_tokenizer_n_vocab(tok);
    float *logits = malloc((size_t)n * sizeof *logits), *ref = malloc((size_t)n * sizeof *ref), *probs = malloc((size_t)n * sizeof *probs);
    for (int greedy = 1; greedy >= 0; greedy--) {
        eli_sampler_params sp = eli_sampler_default_params();
        sp.temperature = greedy ? 0.0f : 1.0f;
        sp.seed = 7;
        eli_sampler *smp = NULL;
        eli_sampler_stage stage;
        eli_grammar *g;
        eli_grammar_matcher *check = matcher_for(envelope_gbnf, &g);
        CHECK(!eli_sampler_create(&sp, n, &smp, &err), "%s", err.msg);
        CHECK(!eli_grammar_stage_create(envelope_gbnf, strlen(envelope_gbnf), tok, vocab, &stage, NULL, &err), "%s", err.msg);
        CHECK(!eli_sampler_add_stage(smp, &stage, &err), "%s", err.msg);
        eli_sampler_note(smp, 5); /* a prompt token: not the grammar's */
        int32_t run[64];
        uint8_t *saved = NULL;
        size_t saved_n = 0;
        int steps = 0, ended = 0;
        for (; steps < 64 && !ended; steps++) {
            step_logits(logits, n, 11, steps);
            if (steps == 1) { /* a slot file's snapshot */
                saved_n = eli_sampler_state_size(smp);
                saved = malloc(saved_n);
                eli_sampler_save(smp, saved);
            }
            int32_t t = -1;
            CHECK(!eli_sampler_sample(smp, logits, &t, &err), "sample: %s", err.msg);
            if (greedy) {
                memcpy(ref, logits, (size_t)n * sizeof *ref);
                CHECK(!eli_grammar_apply(check, ref, &err), "%s", err.msg);
                int32_t best = 0;
                for (int32_t i = 1; i < n; i++)
                    if (ref[i] > ref[best]) best = i;
                CHECK(t == best, "step %d: greedy %d, masked argmax %d", steps, t, best);
            } else {
                CHECK(eli_sampler_probs(smp, logits, probs, &err) > 0, "probs: %s", err.msg);
                int bad = 0;
                for (int32_t i = 0; i < n; i++) bad += probs[i] > 0 && eli_grammar_allows(check, i, &err) != 1;
                CHECK(bad == 0, "step %d: %d refused tokens with probability", steps, bad);
                CHECK(eli_grammar_allows(check, t, &err) == 1, "step %d: drew refused token %d", steps, t);
            }
            run[steps] = t;
            ended = eli_tokenizer_is_eog(tok, t);
            CHECK(!eli_sampler_accept(smp, t, &err) && !eli_grammar_accept_token(check, t, &err), "accept %d: %s", t, err.msg);
        }
        CHECK(saved != NULL, "snapshot taken");
        /* back to step 1 (the state there has another size than now), and the same steps again */
        CHECK(saved && eli_sampler_state_size(smp) != saved_n, "the grammar's state changed size");
        CHECK(saved && !eli_sampler_load(smp, saved, saved_n, &err), "load: %s", err.msg);
        for (int i = 1; i < steps; i++) {
            int32_t t = -1;
            step_logits(logits, n, 11, i);
            CHECK(!eli_sampler_sample(smp, logits, &t, &err) && t == run[i], "replayed step %d: %d, first %d", i, t, run[i]);
            CHECK(!eli_sampler_accept(smp, t, &err), "%s", err.msg);
        }
        /* a damaged snapshot is refused and changes nothing */
        if (saved) {
            size_t cur = eli_sampler_state_size(smp);
            saved[saved_n - 5] ^= 0x40;
            CHECK(eli_sampler_load(smp, saved, saved_n, &err) != 0 && eli_sampler_state_size(smp) == cur, "damaged snapshot");
        }
        free(saved);
        eli_sampler_free(smp);
        eli_grammar_matcher_free(check);
        eli_grammar_free(g);
    }
    eli_error e2 = {0};
    eli_sampler_stage bad;
    CHECK(eli_grammar_stage_create("root ::= \"a", 11, tok, vocab, &bad, NULL, &e2) == ELI_ERR_INVALID_ARG &&
              strstr(e2.msg, "line 1, column 10"),
          "stage of a bad grammar: %s", e2.msg);
    free(logits), free(ref), free(probs);
}

int main(void) {
    eli_error err = {0};
    eli_gguf_file *f = eli_gguf_open(eli_shared_path("golden/tokenizer/gemma4-vocab.gguf"), &err);
    CHECK(f != NULL, "%s", err.msg);
    if (!f) TEST_MAIN_END();
    eli_tokenizer *t = eli_tokenizer_load(f, &err);
    eli_gguf_close(f);
    eli_grammar_vocab *v = NULL;
    CHECK(t && !eli_grammar_vocab_new(t, &v, &err), "%s", err.msg);
    tok = t;
    vocab = v;
    if (v) {
        walk("json", json_gbnf, "{\"n\": [\"y\\n\\u00e9\", -12.5e3, {\"p\": [true, null, {}]}], \"é\": \"日本 😀\"}", 1);
        walk("json (uncached)", json_gbnf, "[1, \"a b\", {\"k\": false}]", 0);
        walk("envelope", envelope_gbnf, "{\"thought\": \"Hi.\", \"replyText\": \"Hello!\", \"actions\": [\"REPLY\"]}", 1);
        walk("bounded", "root ::= \"<\" [a-z ]{0,30} \">\" [0-9]{1,6}", "<hello world and more>123456", 1);
        walk("bounded string", "root ::= \"\\\"\" [^\"\\\\]{0,12} \"\\\"\" [0-9]*", "\"ab cd, é!\"42", 1);
        walk("words", "root ::= ( \"the\" | \"theory\" | \"thermal\" | \" \" | [.,] )+", "the theory, the thermal. the", 1);
        test_partial();
        test_token_refs();
        test_sampler_stage();
    }
    eli_grammar_vocab_free(v);
    eli_tokenizer_free(t);
    TEST_MAIN_END();
}
