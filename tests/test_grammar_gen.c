/* Generation under a GBNF grammar through the C ABI (the stream config's gbnf_grammar), on eliza-1-nano and
 * its drafter. The grammar's language is finite here, so every stream must end by itself, and its output is
 * checked by an independent reader (src/json.h parses it and the fields are checked by hand):
 * - greedy and sampled streams follow the grammar; greedy with MTP gives the tokens of greedy without;
 * - sampled with MTP follows it too (drafts are masked, the target's tokens checked);
 * - a new prompt starts the grammar over (prefill after a finished answer, and reset_keep);
 * - a slot saved mid-answer restores into a stream of the same grammar and continues exactly;
 * - a bad grammar is refused naming its line and column, and no stream opens. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "eliza_inference.h"
#include "json.h"
#include "test.h"
#include "test_ffi_config.h"

#define NANO ELI_SOURCE_DIR "/models/eliza-1-nano"

static const char GRAMMAR[] = "root ::= \"{\\\"answer\\\": \" bool \", \\\"n\\\": \" digit digit? \", \\\"word\\\": \\\"\" "
                              "[a-z]{1,6} \"\\\"}\"\n"
                              "bool ::= \"true\" | \"false\"\n"
                              "digit ::= [0-9]\n";

/* Drains a stream: its text (NUL-terminated) and token ids; returns next()'s last status (1 = ended). */
static int drain(EliLlmStream *s, char *text, size_t cap, int32_t *ids, int *n_ids, int max_ids) {
    size_t len = 0;
    int rc = 0;
    *n_ids = 0;
    text[0] = '\0';
    while (rc == 0) {
        int32_t buf[8];
        size_t got = 0;
        char piece[256];
        rc = eliza_inference_llm_stream_next(s, buf, 8, &got, piece, sizeof piece, NULL, NULL, NULL);
        for (size_t i = 0; i < got && *n_ids < max_ids; i++) ids[(*n_ids)++] = buf[i];
        const size_t pl = strlen(piece);
        if (len + pl < cap) memcpy(text + len, piece, pl + 1), len += pl;
    }
    return rc;
}

/* The grammar's language, read independently: {"answer": true|false, "n": 0..99, "word": [a-z]{1,6}}. */
static int valid(const char *text) {
    eli_error err = {0};
    eli_json *doc = eli_json_parse(text, strlen(text), &err);
    int ok = doc && doc->type == ELI_JSON_OBJECT && doc->n == 3;
    const eli_json *a = ok ? eli_json_get(doc, "answer") : NULL, *n = ok ? eli_json_get(doc, "n") : NULL,
                   *w = ok ? eli_json_get(doc, "word") : NULL;
    ok = ok && a && a->type == ELI_JSON_BOOL && n && n->type == ELI_JSON_NUMBER &&
         n->number >= 0 && n->number <= 99 && w && w->type == ELI_JSON_STRING && w->str_len >= 1 && w->str_len <= 6;
    for (size_t i = 0; ok && i < w->str_len; i++) ok = w->str[i] >= 'a' && w->str[i] <= 'z';
    eli_json_free(doc);
    return ok;
}

static EliLlmStream *open_prompted(EliInferenceContext *c, const eliza_llm_stream_config_t *cfg, const char *prompt) {
    char *err = NULL;
    EliLlmStream *s = eliza_inference_llm_stream_open(c, cfg, &err);
    CHECK(s != NULL, "open: %s", err ? err : "");
    eliza_inference_free_string(err);
    int32_t *ids = NULL;
    size_t n = 0;
    if (s && (eliza_inference_tokenize(c, prompt, strlen(prompt), 1, 0, &ids, &n, NULL) ||
              eliza_inference_llm_stream_prefill(s, ids, n, NULL))) {
        CHECK(0, "prompt");
        eliza_inference_llm_stream_close(s);
        s = NULL;
    }
    eliza_inference_free_tokens(ids);
    return s;
}

static eliza_llm_stream_config_t grammar_cfg(float temp, int mtp) {
    eliza_llm_stream_config_t cfg = greedy_cfg(64);
    cfg.gbnf_grammar = GRAMMAR;
    cfg.temperature = temp;
    cfg.draft_min = mtp ? 1 : 0;
    cfg.draft_max = mtp ? 4 : 0;
    return cfg;
}

static void test_follows(EliInferenceContext *c) {
    static const char *const prompts[] = {"The answer is", "It is a truth universally acknowledged", "Mr. Bennet said"};
    char text[1024], text_mtp[1024];
    int32_t ids[64], ids_mtp[64];
    int n, n_mtp;
    for (size_t i = 0; i < sizeof prompts / sizeof *prompts; i++) {
        eliza_llm_stream_config_t cfg = grammar_cfg(0, 0);
        EliLlmStream *s = open_prompted(c, &cfg, prompts[i]);
        const int rc = s ? drain(s, text, sizeof text, ids, &n, 64) : -1;
        CHECK(rc == 1 && valid(text), "greedy '%s': ended %d with '%s'", prompts[i], rc, text);
        eliza_inference_llm_stream_close(s);
        cfg = grammar_cfg(0, 1);
        s = open_prompted(c, &cfg, prompts[i]);
        const int rc2 = s ? drain(s, text_mtp, sizeof text_mtp, ids_mtp, &n_mtp, 64) : -1;
        CHECK(rc2 == 1 && n_mtp == n && !memcmp(ids, ids_mtp, sizeof(int32_t) * (size_t)n),
              "greedy with MTP == without under the grammar: '%s' vs '%s'", text_mtp, text);
        eliza_inference_llm_stream_close(s);
    }
    for (int seed = 0; seed < 6; seed++) {
        eliza_llm_stream_config_t cfg = grammar_cfg(1.0f + 0.2f * (float)seed, seed % 2);
        char prompt[64];
        snprintf(prompt, sizeof prompt, "Sample %d:", seed);
        EliLlmStream *s = open_prompted(c, &cfg, prompt);
        const int rc = s ? drain(s, text, sizeof text, ids, &n, 64) : -1;
        CHECK(rc == 1 && valid(text), "sampled (temperature %.1f, MTP %d): ended %d with '%s'", 1.0 + 0.2 * seed, seed % 2, rc,
              text);
        eliza_inference_llm_stream_close(s);
    }
}

static void test_new_turns(EliInferenceContext *c) {
    eliza_llm_stream_config_t cfg = grammar_cfg(0.8f, 0);
    EliLlmStream *s = open_prompted(c, &cfg, "First:");
    char text[1024];
    int32_t ids[64];
    int n;
    int rc = s ? drain(s, text, sizeof text, ids, &n, 64) : -1;
    CHECK(rc == 1 && valid(text), "first answer '%s'", text);
    /* more prompt after a finished answer: a new generation, the grammar from its start */
    int32_t *more = NULL;
    size_t n_more = 0;
    CHECK(!eliza_inference_tokenize(c, " And then:", 10, 0, 0, &more, &n_more, NULL) &&
              !eliza_inference_llm_stream_prefill(s, more, n_more, NULL),
          "prefill a second prompt");
    rc = drain(s, text, sizeof text, ids, &n, 64);
    CHECK(rc == 1 && valid(text), "answer after a new prompt '%s'", text);
    /* and back to the first prompt with reset_keep */
    CHECK(eliza_inference_llm_stream_reset_keep(s, 2) == 2, "reset_keep");
    rc = drain(s, text, sizeof text, ids, &n, 64);
    CHECK(rc == 1 && valid(text), "answer after reset_keep '%s'", text);
    eliza_inference_free_tokens(more);
    eliza_inference_llm_stream_close(s);
}

static void test_slot(EliInferenceContext *c) {
    char path[] = "/tmp/eli_test_grammar_XXXXXX";
    const int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    if (fd < 0) return;
    close(fd);
    eliza_llm_stream_config_t cfg = grammar_cfg(1.2f, 0);
    EliLlmStream *a = open_prompted(c, &cfg, "Slot:");
    int32_t head[4], rest_a[64], rest_b[64];
    size_t got = 0;
    char *err = NULL;
    CHECK(a && eliza_inference_llm_stream_next(a, head, 4, &got, NULL, 0, NULL, NULL, NULL) == 0 && got == 4 &&
              eliza_inference_llm_stream_save_slot(a, path, &err) == ELIZA_OK,
          "save mid-answer: %s", err ? err : "");
    eliza_inference_free_string(err), err = NULL;
    char text_a[1024], text_b[1024];
    int n_a = 0, n_b = 0;
    const int rc_a = a ? drain(a, text_a, sizeof text_a, rest_a, &n_a, 64) : -1;
    EliLlmStream *b = open_prompted(c, &cfg, "Another prompt entirely");
    CHECK(b && eliza_inference_llm_stream_restore_slot(b, path, &err) == ELIZA_OK, "restore: %s", err ? err : "");
    eliza_inference_free_string(err), err = NULL;
    const int rc_b = b ? drain(b, text_b, sizeof text_b, rest_b, &n_b, 64) : -1;
    CHECK(rc_a == 1 && rc_b == 1 && n_a == n_b && !memcmp(rest_a, rest_b, sizeof(int32_t) * (size_t)n_a) && !strcmp(text_a, text_b),
          "the restored stream continues the answer exactly: '%s' vs '%s'", text_b, text_a);
    /* a stream of another grammar refuses the slot */
    eliza_llm_stream_config_t other = grammar_cfg(1.2f, 0);
    other.gbnf_grammar = "root ::= [a-z]+";
    EliLlmStream *o = open_prompted(c, &other, "Other");
    CHECK(o && eliza_inference_llm_stream_restore_slot(o, path, &err) == ELIZA_ERR_INVALID_ARG && err && strstr(err, "grammar"),
          "another grammar refuses the slot: %s", err ? err : "");
    eliza_inference_free_string(err);
    eliza_inference_llm_stream_close(o);
    eliza_inference_llm_stream_close(a);
    eliza_inference_llm_stream_close(b);
    unlink(path);
}

static void test_bad_grammar(EliInferenceContext *c) {
    eliza_llm_stream_config_t cfg = greedy_cfg(16);
    cfg.gbnf_grammar = "root ::= \"a\"\nitem ::= (\"b\" | \"c\"\n";
    char *err = NULL;
    EliLlmStream *s = eliza_inference_llm_stream_open(c, &cfg, &err);
    CHECK(!s && err && strstr(err, "line 2") && strstr(err, "column"), "bad grammar: %s", err ? err : "");
    eliza_inference_free_string(err), err = NULL;
    cfg.gbnf_grammar = "root ::= undefined-rule";
    s = eliza_inference_llm_stream_open(c, &cfg, &err);
    CHECK(!s && err && strstr(err, "undefined-rule"), "undefined rule: %s", err ? err : "");
    eliza_inference_free_string(err);
    eliza_inference_llm_stream_close(s);
}

int main(void) {
    char *err = NULL;
    EliInferenceContext *c = eliza_inference_create(NANO, &err);
    CHECK(c != NULL, "create: %s", err ? err : "");
    eliza_inference_free_string(err);
    if (c) {
        test_follows(c);
        test_new_turns(c);
        test_slot(c);
        test_bad_grammar(c);
        eliza_inference_destroy(c);
    }
    TEST_MAIN_END();
}
