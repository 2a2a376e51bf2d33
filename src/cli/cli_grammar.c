/* eliza-infer grammar: check texts against GBNF grammars, or print the GBNF of a JSON schema.
 *
 *   eliza-infer grammar --check-jsonl CASES.jsonl [-m VOCAB.gguf]
 *   eliza-infer grammar --json-schema SCHEMA.json
 *
 * --check-jsonl reads one JSON object per line: "grammar" (GBNF text) and either "text" (a string) or
 * "pieces" (an array of strings, which are text, and integers, which are token ids matched by token
 * references <[id]> / !<[id]> only), and prints one word per line: accept (a complete match), prefix
 * (valid so far, not complete), reject, or "error: <message>" (the grammar does not parse). With -m, the
 * grammar may use <token-text> references, and token ids are checked against that vocabulary. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "gguf.h"
#include "grammar.h"
#include "grammar_match.h"
#include "json.h"
#include "json_schema.h"
#include "tokenizer.h"

static int usage(FILE *out, int status) {
    fprintf(out, "usage: eliza-infer grammar --check-jsonl CASES.jsonl [-m VOCAB.gguf]\n"
                 "       eliza-infer grammar --json-schema SCHEMA.json\n"
                 "  --check-jsonl FILE  lines {\"grammar\": GBNF, \"text\": STR} or {\"grammar\", \"pieces\": [STR | ID, ...]};\n"
                 "                      prints accept | prefix | reject | error: MESSAGE per line\n"
                 "  -m, --model FILE    a GGUF whose vocabulary resolves <token-text> references\n"
                 "  --json-schema FILE  print the GBNF grammar of a JSON schema\n");
    return status;
}

/* Feeds one piece (text, or a token id matched by token references). 1 taken, 0 refused, <0 error. */
static int feed(eli_grammar_machine *m, eli_grammar_pos *pos, const eli_json *piece, eli_error *err) {
    if (piece->type == ELI_JSON_STRING) return eli_grammar_accept_bytes(m, pos, piece->str, piece->str_len, err);
    if (pos->n_partial) return 0; /* a token cannot start inside a character */
    uint32_t next = eli_gm_next_token(m, pos->state, (int32_t)piece->number);
    if (next == ELI_GM_ERROR) return eli_fail(err, m->err.code, "%s", m->err.msg);
    if (next == ELI_GM_DEAD) return 0;
    pos->state = next;
    return 1;
}

/* The classification of one case, printed; returns 0, or 1 when the line itself is malformed. */
static int check_case(const eli_json *c, const eli_tokenizer *tok, const char *where) {
    const eli_json *gram = eli_json_get(c, "grammar"), *text = eli_json_get(c, "text"), *pieces = eli_json_get(c, "pieces");
    if (!gram || gram->type != ELI_JSON_STRING || !!text == !!pieces || (text && text->type != ELI_JSON_STRING) ||
        (pieces && pieces->type != ELI_JSON_ARRAY))
        return cli_die("%s: expected {\"grammar\": STRING, \"text\": STRING} or {\"grammar\", \"pieces\": ARRAY}", where);
    for (size_t i = 0; pieces && i < pieces->n; i++) {
        const eli_json *p = &pieces->items[i];
        int32_t limit = tok ? eli_tokenizer_n_vocab(tok) : INT32_MAX;
        if (p->type != ELI_JSON_STRING &&
            (p->type != ELI_JSON_NUMBER || p->number < 0 || p->number >= limit || p->number != (double)(int32_t)p->number))
            return cli_die("%s: piece %zu is neither a string nor a token id in [0, %d)", where, i, limit);
    }
    eli_error err = {0};
    eli_grammar *g = NULL;
    eli_grammar_machine *m = NULL;
    const char *word = NULL;
    if (eli_grammar_parse(gram->str, gram->str_len, tok, &g, &err) == ELI_OK && eli_grammar_machine_new(g, &m, &err) == ELI_OK) {
        eli_grammar_pos pos = eli_grammar_start(m);
        int ok = 1;
        if (text) ok = eli_grammar_accept_bytes(m, &pos, text->str, text->str_len, &err);
        for (size_t i = 0; pieces && i < pieces->n && ok == 1; i++) ok = feed(m, &pos, &pieces->items[i], &err);
        if (ok >= 0) word = ok == 0 ? "reject" : eli_grammar_is_complete(m, pos) ? "accept" : "prefix";
    }
    if (word) printf("%s\n", word);
    else printf("error: %s\n", err.msg);
    eli_grammar_machine_free(m);
    eli_grammar_free(g);
    return 0;
}

static int check_jsonl(const char *path, const eli_tokenizer *tok) {
    size_t len;
    char *all = cli_read_file(path, &len);
    if (!all) return 1;
    int status = 0;
    size_t line_no = 0;
    for (size_t at = 0; at < len && !status;) {
        const char *line = all + at;
        const char *nl = memchr(line, '\n', len - at);
        size_t n = nl ? (size_t)(nl - line) : len - at;
        at += n + (nl != NULL);
        line_no++;
        size_t k = 0;
        while (k < n && (line[k] == ' ' || line[k] == '\t' || line[k] == '\r')) k++;
        if (k == n) continue;
        char where[1100];
        snprintf(where, sizeof where, "%s:%zu", path, line_no);
        eli_error err = {0};
        eli_json *c = eli_json_parse(line, n, &err);
        if (!c) status = cli_die("%s: %s", where, err.msg);
        else status = check_case(c, tok, where);
        eli_json_free(c);
    }
    free(all);
    if (!status && (fflush(stdout) || ferror(stdout))) status = cli_die("write error on stdout");
    return status;
}

static int print_schema_grammar(const char *path) {
    size_t len;
    char *text = cli_read_file(path, &len);
    if (!text) return 1;
    eli_error err = {0};
    char *gbnf = NULL;
    int rc = eli_json_schema_to_gbnf(text, len, &gbnf, &err);
    free(text);
    if (rc) return cli_die("%s: %s", path, err.msg);
    fputs(gbnf, stdout);
    free(gbnf);
    return fflush(stdout) || ferror(stdout) ? cli_die("write error on stdout") : 0;
}

int cli_load_vocab(const char *path, eli_tokenizer **out) {
    eli_error err = {0};
    eli_gguf_file *f = eli_gguf_open(path, &err);
    if (!f) return cli_die("%s", err.msg);
    *out = eli_tokenizer_load(f, &err);
    eli_gguf_close(f);
    return *out ? 0 : cli_die("%s: %s", path, err.msg);
}

int cli_grammar(int argc, char **argv) {
    const char *jsonl = NULL, *schema = NULL, *model = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) return usage(stdout, 0);
        const char **dst = !strcmp(a, "--check-jsonl") ? &jsonl
                           : !strcmp(a, "--json-schema") ? &schema
                           : !strcmp(a, "-m") || !strcmp(a, "--model") ? &model
                                                                       : NULL;
        if (!dst || i + 1 >= argc) return cli_bad_option("grammar", a, i + 1 < argc);
        *dst = argv[++i];
    }
    if (!jsonl == !schema) return cli_die("grammar: give one of --check-jsonl FILE or --json-schema FILE"), 2;
    if (schema) return model ? (cli_die("grammar: -m goes with --check-jsonl"), 2) : print_schema_grammar(schema);
    eli_tokenizer *tok = NULL;
    if (model && cli_load_vocab(model, &tok)) return 1;
    int status = check_jsonl(jsonl, tok);
    eli_tokenizer_free(tok);
    return status;
}

char *cli_grammar_text(const char *gbnf_file, const char *schema_file, int json, size_t *len) {
    char *text = NULL;
    eli_error err = {0};
    if (gbnf_file) {
        text = cli_read_file(gbnf_file, len);
    } else if (schema_file) {
        char *schema = cli_read_file(schema_file, len);
        if (schema && eli_json_schema_to_gbnf(schema, *len, &text, &err)) cli_die("%s: %s", schema_file, err.msg);
        free(schema);
    } else if (json && !(text = strdup(eli_json_value_gbnf()))) {
        cli_die("out of memory");
    }
    if (text && !gbnf_file) *len = strlen(text);
    return text;
}
