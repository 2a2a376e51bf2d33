/* GBNF grammars (src/grammar.c, src/grammar_match.c) and the checker CLI (`eliza-infer grammar`):
 *   - 784 + 9 cases classified by llama.cpp's own grammar engine (tests/data/grammar/README.md), run
 *     through `eliza-infer grammar --check-jsonl`;
 *   - parse errors name the line, the column and the problem;
 *   - hostile grammars (deep nesting, huge repetitions, left recursion, exponential ambiguity, long rule
 *     chains) end in a clear error or a bounded run, never a crash or a hang;
 *   - partial UTF-8 across calls, snapshot / restore, serialised positions (and hostile ones). */
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "grammar.h"
#include "grammar_match.h"
#include "json.h"
#include "test.h"

/* The CLI's output lines for `grammar --check-jsonl path extra`, in one malloc'ed buffer (lines split
 * in place); returns the number of lines. */
static size_t run_checker(const char *path, const char *extra, char **buf, char ***lines) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s' grammar --check-jsonl '%s' %s", ELI_CLI, path, extra);
    FILE *p = popen(cmd, "r");
    size_t cap = 1 << 16, n = 0, n_lines = 0;
    *buf = malloc(cap);
    while (p && *buf) {
        if (n + 1 == cap) *buf = realloc(*buf, cap *= 2);
        size_t got = fread(*buf + n, 1, cap - n - 1, p);
        if (!got) break;
        n += got;
    }
    int st = p ? pclose(p) : -1;
    CHECK(st == 0, "%s: exit status %d", cmd, st);
    (*buf)[n] = '\0';
    *lines = malloc((n + 1) * sizeof **lines);
    for (char *s = *buf; *s;) {
        char *nl = strchr(s, '\n');
        (*lines)[n_lines++] = s;
        if (!nl) break;
        *nl = '\0';
        s = nl + 1;
    }
    return n_lines;
}

/* Every case of a data file against the checker: the word, or "error: ..." for "error". */
static void test_reference_cases(const char *file, const char *extra) {
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/grammar/%s", ELI_SOURCE_DIR, file);
    size_t len;
    char *data = test_read_file(path, &len), *out, **lines;
    CHECK(data != NULL, "cannot read %s", path);
    if (!data) return;
    size_t n_out = run_checker(path, extra, &out, &lines), n = 0;
    for (char *line = data; *line; n++) {
        char *nl = strchr(line, '\n');
        size_t l = nl ? (size_t)(nl - line) : strlen(line);
        eli_json *c = eli_json_parse(line, l, NULL);
        const char *want = c ? eli_json_get_str(c, "expect") : NULL;
        const char *got = n < n_out ? lines[n] : "(missing)";
        int ok = want && (!strcmp(want, "error") ? !strncmp(got, "error: ", 7) : !strcmp(got, want));
        CHECK(ok, "%s line %zu: want %s, got '%s': %.*s", file, n + 1, want ? want : "?", got, (int)(l > 300 ? 300 : l), line);
        eli_json_free(c);
        line = nl ? nl + 1 : line + l;
    }
    CHECK(n == n_out && n > 0, "%s: %zu cases, %zu answers", file, n, n_out);
    free(out);
    free(lines);
    free(data);
}

/* ---- parse errors ----------------------------------------------------------------------------- */

static int parse(const char *text, eli_grammar **g, eli_error *err) {
    eli_error_clear(err);
    *g = NULL;
    return eli_grammar_parse(text, strlen(text), NULL, g, err);
}

static void expect_error(const char *text, const char *want, int line) {
    eli_error err;
    eli_grammar *g;
    int rc = parse(text, &g, &err);
    CHECK(rc == ELI_ERR_INVALID_ARG && g == NULL, "line %d: rc %d for %s", line, rc, text);
    CHECK(strstr(err.msg, want) != NULL, "line %d: message '%s' lacks '%s'", line, err.msg, want);
    eli_grammar_free(g);
}
#define BAD(text, want) expect_error(text, want, __LINE__)

static void test_errors(void) {
    BAD("root ::= \"abc", "line 1, column 10: unterminated string");
    BAD("root ::= [a-z", "line 1, column 10: unterminated character class");
    BAD("root ::= x\n", "line 1, column 10: undefined rule 'x'");
    BAD("a ::= \"x\"\nroot ::= a b\n", "line 2, column 12: undefined rule 'b'");
    BAD("foo ::= \"a\"", "no rule named 'root'");
    BAD("", "the grammar is empty");
    BAD("root ::= \"\\q\"", "line 1, column 11: unknown escape \\q");
    BAD("root ::= \"\\x4g\"", "escape \\x needs 2 hex digits");
    BAD("root ::= \"\\u12\"", "escape \\u needs 4 hex digits");
    BAD("root ::= [z-a]", "line 1, column 11: bad range");
    BAD("root ::= [\\u0100-\\u00ff]", "bad range");
    BAD("root ::= \"a\" (\n  \"b\"\n", "line 3, column 1: expecting ')' to close the group opened at line 1, column 14");
    BAD("root ::= \"a\" )", "expecting the end of rule 'root' (a newline), found ')'");
    BAD("root := \"a\"", "expecting '::=' after rule name 'root'");
    BAD("root ::= *", "repetition without a preceding item");
    BAD("root ::= \"a\"{2,1}", "the maximum is below the minimum");
    BAD("root ::= \"a\"{x}", "expecting a number in {...} repetition");
    BAD("root ::= \"a\"{1,2", "expecting '}' to close the repetition");
    BAD("root ::= <[12]", "expecting '>' in token reference");
    BAD("root ::= <hello>", "needs a vocabulary");
    BAD("root ::= !\"a\"", "expecting '<' after '!'");
    BAD("root ::= a\na ::= a \"x\" | \"y\"", "left recursion through rule 'a'");
    BAD("root ::= a\na ::= b a \"x\" | \"y\"\nb ::= c\nc ::= \"\" | \"z\"", "left recursion through rule 'a'");
    BAD("root ::= (\"\" | \"a\")*", "left recursion through rule 'root'");
    BAD("root ::= \"\xff\"", "invalid UTF-8");
    BAD("root ::= [\xc3]", "invalid UTF-8");
    eli_error err;
    eli_grammar *g;
    const char nul[] = "root ::= \"a\0\"";
    CHECK(eli_grammar_parse(nul, sizeof nul - 1, NULL, &g, &err) == ELI_ERR_INVALID_ARG && strstr(err.msg, "NUL byte"),
          "NUL: %s", err.msg);
    /* column counts characters: 'é' is one */
    BAD("root ::= \"é\" \"\\z\"", "line 1, column 15: unknown escape");
}

/* ---- hostile grammars ------------------------------------------------------------------------- */

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Matches text (NULL: only builds the machine); returns 1/0 for accepted/refused, negative on error. */
static int run(const char *grammar, const char *text, eli_error *err) {
    eli_grammar *g;
    int rc = eli_grammar_parse(grammar, strlen(grammar), NULL, &g, err);
    if (rc) return rc;
    eli_grammar_machine *m;
    rc = eli_grammar_machine_new(g, &m, err);
    if (!rc) {
        eli_grammar_pos p = eli_grammar_start(m);
        rc = text ? eli_grammar_accept_bytes(m, &p, text, strlen(text), err) : 1;
        if (rc == 1 && text) rc = eli_grammar_is_complete(m, p) ? 1 : 2;
        eli_grammar_machine_free(m);
    }
    eli_grammar_free(g);
    return rc;
}

static char *repeat_str(const char *s, size_t times, const char *head, const char *tail) {
    size_t l = strlen(s), h = strlen(head), t = strlen(tail);
    char *out = malloc(h + l * times + t + 1);
    memcpy(out, head, h);
    for (size_t i = 0; i < times; i++) memcpy(out + h + i * l, s, l);
    memcpy(out + h + l * times, tail, t + 1);
    return out;
}

static void test_hostile(void) {
    eli_error err;
    double t0 = now();
    /* deep nesting: refused past ELI_GRAMMAR_MAX_NESTING, fine below */
    char *deep = repeat_str("(", 100000, "root ::= ", "");
    CHECK(run(deep, "", &err) == ELI_ERR_INVALID_ARG && strstr(err.msg, "nested deeper than 256"), "deep: %s", err.msg);
    free(deep);
    char *open = repeat_str("(", 200, "root ::= ", "\"a\""), *ok = repeat_str(")", 200, open, "");
    CHECK(run(ok, "a", &err) == 1, "200 nested groups: %s", err.msg);
    free(open), free(ok);
    /* repetition counts and the expanded size */
    CHECK(run("root ::= \"a\"{100001}", "a", &err) == ELI_ERR_INVALID_ARG && strstr(err.msg, "above the limit"), "%s", err.msg);
    CHECK(run("root ::= \"a\"{99999999999999999999}", "a", &err) == ELI_ERR_INVALID_ARG, "overflowing count");
    CHECK(run("root ::= \"abcdefghijklmnopqrstuvwxyz\"{100000}", "a", &err) == ELI_ERR_INVALID_ARG &&
              strstr(err.msg, "grammar too large"),
          "expanded size: %s", err.msg);
    char *abs = repeat_str("ab", 10000, "", "");
    CHECK(run("root ::= ((((\"ab\"{10}){10}){10}){10})", abs, &err) == 1, "nested repetitions stay linear: %s", err.msg);
    free(abs);
    char *xs = repeat_str("x", 5000, "", "");
    CHECK(run("root ::= \"x\"{5000}", xs, &err) == 1, "exact count 5000 (above llama.cpp's 2000): %s", err.msg);
    free(xs);
    /* exponential ambiguity: 2^n stacks after n a's */
    CHECK(run("root ::= x\nx ::= \"a\" x \"b\" | \"a\" x \"c\" | \"\"", "aaaaaaaaaaaaaaaaaaaa", &err) == ELI_ERR_INVALID_ARG &&
              strstr(err.msg, "too ambiguous"),
          "ambiguity: %s", err.msg);
    /* a chain of 200000 rules; a 50000-word alternation */
    size_t n_rules = 200000;
    char *chain = malloc(n_rules * 32 + 64), *w = chain;
    w += sprintf(w, "root ::= r0\n");
    for (size_t i = 0; i + 1 < n_rules; i++) w += sprintf(w, "r%zu ::= r%zu\n", i, i + 1);
    sprintf(w, "r%zu ::= \"end\"\n", n_rules - 1);
    CHECK(run(chain, "end", &err) == 1, "rule chain: %s", err.msg);
    free(chain);
    char *words = malloc(50000 * 16 + 64);
    w = words + sprintf(words, "root ::= \"w0\"");
    for (int i = 1; i < 50000; i++) w += sprintf(w, " | \"w%d\"", i);
    CHECK(run(words, "w49999", &err) == 1 && run(words, "w5000", &err) == 1 && run(words, "w50000", &err) == 0, "alternation");
    free(words);
    /* a rule that only refers to itself (not left-growing, but it can never start) */
    CHECK(run("root ::= root", "", &err) == ELI_ERR_INVALID_ARG, "root ::= root: %s", err.msg);
    CHECK(run("root ::= a | \"x\"\na ::= root", "x", &err) == ELI_ERR_INVALID_ARG, "indirect self loop: %s", err.msg);
    double dt = now() - t0;
    CHECK(dt < 15, "hostile grammars took %.1f s", dt);
}

/* ---- positions -------------------------------------------------------------------------------- */

/* A machine for grammar text (the grammar in *g); NULL (a failed check) if either fails. */
static eli_grammar_machine *machine_for(const char *text, eli_grammar **g) {
    eli_error err = {0};
    eli_grammar_machine *m = NULL;
    CHECK(!parse(text, g, &err) && !eli_grammar_machine_new(*g, &m, &err), "%s: %s", text, err.msg);
    return m;
}

static void test_positions(void) {
    eli_error err = {0};
    eli_grammar *g;
    eli_grammar_machine *m = machine_for("root ::= \"x\" ( \"é\" | \"€\" | \"😀\" )+ \"!\"", &g);
    if (!m) return;
    eli_grammar_pos p = eli_grammar_start(m);
    CHECK(eli_grammar_accept_bytes(m, &p, "x\xC3", 2, &err) == 1 && p.n_partial == 1, "a character split across calls");
    eli_grammar_pos snap = p;
    CHECK(eli_grammar_accept_bytes(m, &p, "\xA9", 1, &err) == 1 && p.n_partial == 0, "é completed");
    CHECK(eli_grammar_accept_bytes(m, &p, "\xE2\x82", 2, &err) == 1 && p.n_partial == 2, "two bytes of €");
    CHECK(eli_grammar_accept_bytes(m, &p, "\xAD", 1, &err) == 0 && p.n_partial == 2, "€'s prefix cannot become U+20AD");
    CHECK(eli_grammar_accept_bytes(m, &p, "\xAC!", 2, &err) == 1 && eli_grammar_is_complete(m, p), "€ then !");
    CHECK(eli_grammar_accept_bytes(m, &p, "!", 1, &err) == 0 && eli_grammar_is_complete(m, p), "nothing after !");
    /* restore the snapshot taken inside é */
    p = snap;
    CHECK(!eli_grammar_is_complete(m, p), "restored");
    CHECK(eli_grammar_accept_bytes(m, &p, "\xA9!", 2, &err) == 1 && eli_grammar_is_complete(m, p), "restored then é!");
    /* bytes that could only start characters the grammar refuses are refused at once */
    p = eli_grammar_start(m);
    CHECK(eli_grammar_accept_bytes(m, &p, "x\xC4", 2, &err) == 0, "U+01xx lead byte refused");
    CHECK(eli_grammar_accept_bytes(m, &p, "x\xF0\x9F", 3, &err) == 1, "emoji prefix taken");
    CHECK(eli_grammar_accept_bytes(m, &p, "\x98\x81", 2, &err) == 0, "but not U+1F601");
    p = eli_grammar_start(m);
    CHECK(eli_grammar_accept_bytes(m, &p, "x\xC0\x80", 3, &err) == 0, "overlong form refused");
    CHECK(eli_grammar_accept_bytes(m, &p, "x\xED\xA0\x80", 4, &err) == 0, "surrogate refused");

    /* serialised positions: round trip, into a second machine of the same grammar */
    p = eli_grammar_start(m);
    CHECK(eli_grammar_accept_bytes(m, &p, "x\xE2\x82", 3, &err) == 1, "prefix");
    uint8_t *blob;
    size_t len;
    CHECK(!eli_grammar_pos_save(m, p, &blob, &len, &err), "%s", err.msg);
    eli_grammar_machine *m2;
    CHECK(!eli_grammar_machine_new(g, &m2, &err), "%s", err.msg);
    eli_grammar_pos q;
    CHECK(!eli_grammar_pos_load(m2, blob, len, &q, &err), "load: %s", err.msg);
    CHECK(q.n_partial == 2 && eli_grammar_accept_bytes(m2, &q, "\xAC!", 2, &err) == 1 && eli_grammar_is_complete(m2, q),
          "the loaded position continues");
    /* hostile blobs: every truncation, every single-byte change either loads a valid position or fails
     * cleanly (ASan watches); a few must fail with their reason */
    uint8_t *bad = malloc(len);
    for (size_t cut = 0; cut < len; cut++) CHECK(eli_grammar_pos_load(m2, blob, cut, &q, &err) != 0, "truncated at %zu", cut);
    for (size_t i = 0; i < len; i++)
        for (int bit = 0; bit < 8; bit++) {
            memcpy(bad, blob, len);
            bad[i] ^= (uint8_t)(1u << bit);
            if (eli_grammar_pos_load(m2, bad, len, &q, &err) == 0)
                CHECK(eli_grammar_accept_bytes(m2, &q, "!", 1, &err) >= 0, "a loaded position runs");
        }
    memcpy(bad, blob, len);
    bad[8] ^= 1;
    CHECK(eli_grammar_pos_load(m2, bad, len, &q, &err) && strstr(err.msg, "different grammar"), "%s", err.msg);
    free(bad);
    free(blob);
    eli_grammar_machine_free(m2);
    eli_grammar_machine_free(m);
    eli_grammar_free(g);
}

/* token references, as the token layer and the checker feed them */
static void test_token_refs(void) {
    eli_error err = {0};
    eli_grammar *g;
    eli_grammar_machine *m = machine_for("root ::= \"a\" ( <[5]> | !<[7]> \"z\" )", &g);
    if (!m) return;
    eli_grammar_pos p = eli_grammar_start(m);
    CHECK(eli_gm_next_token(m, p.state, 5) == ELI_GM_DEAD, "no token before 'a'");
    CHECK(eli_grammar_accept_bytes(m, &p, "a", 1, &err) == 1, "a");
    uint32_t s5 = eli_gm_next_token(m, p.state, 5), s7 = eli_gm_next_token(m, p.state, 7), s9 = eli_gm_next_token(m, p.state, 9);
    CHECK(s5 != ELI_GM_DEAD && eli_grammar_is_complete(m, (eli_grammar_pos){s5, 0, {0}}), "<[5]> completes (5 is also not 7)");
    CHECK(s7 == ELI_GM_DEAD, "!<[7]> refuses 7");
    CHECK(s9 != ELI_GM_DEAD && !eli_grammar_is_complete(m, (eli_grammar_pos){s9, 0, {0}}), "!<[7]> takes 9, then z");
    eli_grammar_machine_free(m);
    eli_grammar_free(g);
}

/* Mutated grammars (every case grammar with random bytes changed, inserted, cut) parse or fail
 * cleanly, and what parses runs over random text (ASan and UBSan watch the build that runs this). */
static void test_mutations(void) {
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/grammar/cases.jsonl", ELI_SOURCE_DIR);
    size_t len;
    char *data = test_read_file(path, &len);
    CHECK(data != NULL, "%s", path);
    if (!data) return;
    static const char pieces[] = "\"[]()|*+?{},-^.\\<>!#:= \nax0\xc3\xa9";
    uint64_t rng = 12345;
    int parsed = 0, total = 0;
    char *prev = NULL; /* the previous line's grammar (cases come grouped by grammar) */
    for (char *line = data; *line;) {
        char *nl = strchr(line, '\n');
        size_t l = nl ? (size_t)(nl - line) : strlen(line);
        eli_json *c = eli_json_parse(line, l, NULL);
        const char *g = c ? eli_json_get_str(c, "grammar") : NULL;
        if (g && (!prev || strcmp(prev, g))) { /* each distinct grammar once */
            size_t gl = strlen(g);
            for (int k = 0; k < 12; k++) {
                char buf[4096];
                size_t n = gl < sizeof buf - 8 ? gl : sizeof buf - 8;
                memcpy(buf, g, n);
                for (int e = 0; e < 1 + k % 3; e++) {
                    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
                    size_t at = n ? rng % (n + 1) : 0;
                    char ch = pieces[(rng >> 20) % (sizeof pieces - 1)];
                    switch ((rng >> 40) % 3) {
                    case 0: if (at < n) buf[at] = ch; break;                                  /* change */
                    case 1: memmove(buf + at + 1, buf + at, n - at), buf[at] = ch, n++; break; /* insert */
                    default: n = at; break;                                                    /* cut */
                    }
                }
                eli_error err;
                char text[16];
                for (int i = 0; i < 16; i++) text[i] = pieces[(rng >> (i * 3)) % (sizeof pieces - 1)];
                int rc = 0;
                eli_grammar *gr;
                if (eli_grammar_parse(buf, n, NULL, &gr, &err) == ELI_OK) {
                    eli_grammar_machine *m;
                    if (eli_grammar_machine_new(gr, &m, &err) == ELI_OK) {
                        eli_grammar_pos p = eli_grammar_start(m);
                        for (int i = 0; i < 16 && rc >= 0; i++) rc = eli_grammar_accept_bytes(m, &p, text + i, 1, &err);
                        eli_grammar_machine_free(m);
                    }
                    eli_grammar_free(gr);
                    parsed++;
                } else {
                    CHECK(err.msg[0] != '\0', "a refused grammar has a message");
                }
                total++;
            }
        }
        free(prev);
        prev = g ? strdup(g) : NULL;
        line = nl ? nl + 1 : line + l;
        eli_json_free(c);
    }
    free(prev);
    CHECK(total > 1000 && parsed > 0, "%d mutations, %d parsed", total, parsed);
    free(data);
}

int main(void) {
    test_reference_cases("cases.jsonl", "");
    char vocab[1200];
    snprintf(vocab, sizeof vocab, "-m '%s'", eli_shared_path("golden/tokenizer/gemma4-vocab.gguf"));
    test_reference_cases("cases_vocab.jsonl", vocab);
    test_errors();
    test_hostile();
    test_positions();
    test_token_refs();
    test_mutations();
    TEST_MAIN_END();
}
