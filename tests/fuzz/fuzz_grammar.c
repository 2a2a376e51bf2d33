/* GBNF grammars and JSON schemas on arbitrary bytes. Byte 0 picks the reading: as a grammar (the rest of
 * the input up to a NUL is the grammar, what follows is text fed to it), or as a JSON schema. Invariants: a
 * parse fails with a message or gives a grammar whose machine takes any text without crashing (accepting
 * a prefix, then refusing, or hitting a limit with a message); a schema converts with a message or into
 * GBNF that the parser accepts. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "grammar.h"
#include "grammar_match.h"
#include "json_schema.h"

static void feed(const eli_grammar *g, const char *text, size_t n) {
    eli_grammar_machine *m = NULL;
    eli_error err = {0};
    if (eli_grammar_machine_new(g, &m, &err)) {
        FUZZ_ASSERT(err.code < 0 && err.msg[0], "machine failed without a message");
        return;
    }
    eli_grammar_pos pos = eli_grammar_start(m);
    /* one byte at a time, as tokens split characters */
    for (size_t i = 0; i < n; i++) {
        const int r = eli_grammar_accept_bytes(m, &pos, text + i, 1, &err);
        if (r < 0) FUZZ_ASSERT(err.msg[0], "a limit without a message");
        if (r != 1) break;
    }
    (void)eli_grammar_is_complete(m, pos);
    eli_grammar_machine_free(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const char *in = (const char *)data + 1;
    const size_t n = size - 1;
    eli_error err = {0};
    eli_grammar *g = NULL;
    if (data[0] & 1) {
        char *gbnf = NULL;
        if (eli_json_schema_to_gbnf(in, n, &gbnf, &err)) {
            FUZZ_ASSERT(err.code < 0 && err.msg[0], "conversion failed without a message");
            return 0;
        }
        const int rc = eli_grammar_parse(gbnf, strlen(gbnf), NULL, &g, &err);
        /* only a size limit may refuse what the converter wrote (a deep or huge schema) */
        FUZZ_ASSERT(rc == ELI_OK || strstr(err.msg, "too large") || strstr(err.msg, "limit") || strstr(err.msg, "nest"),
                    "the converter's grammar does not parse: %s\n%s", err.msg, gbnf);
        free(gbnf);
        if (g) feed(g, "{\"a\": [1, \"x\", null, true], \"b\": {}}", 36);
        eli_grammar_free(g);
        return 0;
    }
    const char *nul = memchr(in, 0, n);
    const size_t glen = nul ? (size_t)(nul - in) : n;
    if (eli_grammar_parse(in, glen, NULL, &g, &err)) {
        FUZZ_ASSERT(err.code < 0 && err.msg[0], "parse failed without a message");
        return 0;
    }
    if (nul) feed(g, nul + 1, n - glen - 1);
    eli_grammar_free(g);
    return 0;
}
