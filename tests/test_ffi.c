/* The C ABI (include/eliza_inference.h) end to end on the golden e2b-mini model (it carries a tokenizer):
 * every function, misuse, the host protocol, reset_keep, cancel from another thread, two streams in two
 * threads, the backend selector. Greedy output is checked against llama.cpp's greedy ids. */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "eliza_inference.h"
#include "test.h"
#include "test_ffi_config.h"

#define MODEL "golden/models/e2b-mini-f32.gguf"

static void test_basics(void) {
    CHECK(!strcmp(eliza_inference_abi_version(), "13"), "abi %s", eliza_inference_abi_version());
    CHECK(eliza_inference_llm_stream_supported() == 1, "stream probe");
    CHECK(eliza_inference_tokenize_supported() == 1, "tokenize probe");
    CHECK(eliza_inference_llm_kv_quant_supported() == 1, "kv quant probe");
    CHECK(eliza_inference_embed_supported() == 1 && eliza_inference_llm_eot_supported() == 1, "probes");
    CHECK(eliza_inference_llm_mtp_supported() == 1, "MTP probe");
    CHECK(sizeof(eliza_llm_stream_config_t) == 88, "config size %zu", sizeof(eliza_llm_stream_config_t));
    eliza_inference_free_string(NULL);
    eliza_inference_free_tokens(NULL);
    eliza_inference_destroy(NULL);
    eliza_inference_llm_stream_close(NULL);

    char *err = NULL;
    CHECK(eliza_inference_create(NULL, &err) == NULL && err && strstr(err, "[libelizainference] eliza_inference_create: "),
          "NULL bundle: %s", err ? err : "(none)");
    eliza_inference_free_string(err);
    err = NULL;
    CHECK(eliza_inference_create("/nonexistent/bundle", &err) == NULL && err && strstr(err, "/nonexistent/bundle"),
          "missing bundle: %s", err ? err : "(none)");
    eliza_inference_free_string(err);
    CHECK(eliza_inference_create("/nonexistent/bundle", NULL) == NULL, "NULL out_error is tolerated");
    err = NULL;
    char dir[] = "/tmp/eli_bundle_XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    CHECK(eliza_inference_create(dir, &err) == NULL && err && strstr(err, "text"), "empty bundle: %s", err ? err : "");
    eliza_inference_free_string(err);

    /* bundle layout: text/ holds an mmproj (skipped) and the model; names are taken in sorted order */
    char p[512], q[512];
    snprintf(p, sizeof p, "%s/text", dir);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/text/a-mmproj.gguf", dir);
    CHECK(symlink("/nonexistent", p) == 0, "symlink");
    snprintf(p, sizeof p, "%s/text/b-model.gguf", dir);
    snprintf(q, sizeof q, "%s", eli_shared_path(MODEL));
    CHECK(symlink(q, p) == 0, "symlink");
    err = NULL;
    EliInferenceContext *c = eliza_inference_create(dir, &err);
    CHECK(c != NULL, "bundle dir: %s", err ? err : "");
    if (c) {
        CHECK(eliza_inference_mmap_acquire(c, "text", NULL) == ELIZA_OK, "acquire text from the bundle");
        CHECK(eliza_inference_mmap_acquire(c, "bogus", NULL) == ELIZA_ERR_INVALID_ARG, "unknown region");
        CHECK(eliza_inference_mmap_acquire(c, NULL, NULL) == ELIZA_ERR_INVALID_ARG, "NULL region");
        eliza_inference_destroy(c);
    }
    snprintf(p, sizeof p, "%s/text/a-mmproj.gguf", dir);
    unlink(p);
    snprintf(p, sizeof p, "%s/text/b-model.gguf", dir);
    unlink(p);
    snprintf(p, sizeof p, "%s/text", dir);
    rmdir(p);
    rmdir(dir);
}

static void test_text_utils(EliInferenceContext *c) {
    int32_t *ids = NULL;
    size_t n = 0;
    char *err = NULL;
    const char *text = "Hello";
    CHECK(eliza_inference_tokenize(c, text, strlen(text), 1, 0, &ids, &n, &err) == ELIZA_OK && n >= 2 && ids[0] == 2,
          "tokenize: %s", err ? err : "");
    char out[256];
    int w = eliza_inference_detokenize(c, ids, n, 1, 0, out, sizeof out, &err);
    CHECK(w == 5 && !strcmp(out, "Hello"), "detokenize round trip: %d '%s'", w, out);
    /* a short buffer gets what fits and the bytes written (the hosts' contract) */
    memset(out, 'x', sizeof out);
    CHECK(eliza_inference_detokenize(c, ids, n, 1, 0, out, 3, NULL) == 2 && !strcmp(out, "He"), "truncated: '%s'", out);
    CHECK(eliza_inference_detokenize(c, ids, n, 1, 0, out, 1, NULL) == 0 && !out[0], "room for the NUL only");
    eliza_inference_free_tokens(ids);
    /* ... cut at a character boundary: "aé€" is 1 + 2 + 3 bytes */
    const char *utf = "a\xc3\xa9\xe2\x82\xac";
    CHECK(eliza_inference_tokenize(c, utf, strlen(utf), 0, 0, &ids, &n, NULL) == ELIZA_OK, "tokenize UTF-8");
    static const struct {
        size_t cap;
        int want;
    } cuts[] = {{2, 1}, {3, 1}, {4, 3}, {5, 3}, {6, 3}, {7, 6}, {64, 6}};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        int got = eliza_inference_detokenize(c, ids, n, 0, 0, out, cuts[i].cap, NULL);
        CHECK(got == cuts[i].want && strlen(out) == (size_t)got && !memcmp(out, utf, (size_t)got),
              "detokenize into %zu bytes: %d (want %d)", cuts[i].cap, got, cuts[i].want);
    }
    eliza_inference_free_tokens(ids);
    int bad[2] = {5, 5000};
    err = NULL;
    CHECK(eliza_inference_detokenize(c, bad, 2, 0, 0, out, sizeof out, &err) < 0 && err && strstr(err, "5000"),
          "bad id named: %s", err ? err : "");
    eliza_inference_free_string(err);
    ids = (int *)1;
    CHECK(eliza_inference_tokenize(c, "", 0, 0, 0, &ids, &n, NULL) == ELIZA_OK && ids != NULL && n == 0,
          "empty text gives a non-NULL empty array");
    eliza_inference_free_tokens(ids);
    CHECK(eliza_inference_tokenize(c, NULL, 3, 0, 0, &ids, &n, NULL) == ELIZA_ERR_INVALID_ARG, "NULL text");
    CHECK(eliza_inference_tokenize(c, "x", 1, 0, 0, NULL, &n, NULL) == ELIZA_ERR_INVALID_ARG, "NULL out");
    const char inv[] = "\xff\xfe ok \xc3";
    CHECK(eliza_inference_tokenize(c, inv, sizeof inv - 1, 0, 0, &ids, &n, NULL) == ELIZA_OK && n > 0,
          "invalid UTF-8 goes through byte fallback");
    eliza_inference_free_tokens(ids);

    float emb[512];
    int dim = 0;
    CHECK(eliza_inference_embed(c, "some text", 9, ELIZA_POOLING_MEAN, emb, 512, &dim, NULL) == ELIZA_OK && dim == 256,
          "embed dim %d", dim);
    double norm = 0;
    for (int i = 0; i < dim; i++) norm += (double)emb[i] * emb[i];
    CHECK(fabs(norm - 1) < 1e-4, "embedding is L2-normalized: %g", norm);
    float emb2[512];
    CHECK(eliza_inference_embed(c, "some text", 9, ELIZA_POOLING_LAST, emb2, 512, &dim, NULL) == ELIZA_OK, "LAST");
    CHECK(eliza_inference_embed(c, "some text", 9, ELIZA_POOLING_CLS, emb2, 512, &dim, NULL) == ELIZA_OK, "CLS");
    dim = 0;
    emb[0] = 12345.0f;
    CHECK(eliza_inference_embed(c, "x", 1, ELIZA_POOLING_MEAN, emb, 10, &dim, NULL) == ELIZA_ERR_INVALID_ARG && dim == 256 &&
              emb[0] == 12345.0f,
          "short capacity writes nothing and reports the dimension");
    dim = 0;
    err = NULL;
    CHECK(eliza_inference_embed(c, "x", 1, ELIZA_POOLING_MEAN, NULL, 0, &dim, &err) == ELIZA_ERR_INVALID_ARG && dim == 256 &&
              err && strstr(err, "out is NULL") && !strstr(err, "capacity"),
          "out NULL asks for the dimension: %s", err ? err : "");
    eliza_inference_free_string(err), err = NULL;
    CHECK(eliza_inference_embed(c, "x", 1, ELIZA_POOLING_NONE, emb, 512, &dim, NULL) == ELIZA_ERR_INVALID_ARG, "NONE");

    int32_t seq[96], greedy[16];
    CHECK(read_ids(eli_shared_path("golden/models/e2b-mini.tokens.txt"), seq, 96) == 96, "tokens");
    CHECK(read_ids(eli_shared_path("golden/models/e2b-mini-f32.greedy.txt"), greedy, 16) == 16, "greedy");
    float tp = -1, top_p = -1;
    int32_t top = -1;
    CHECK(eliza_inference_llm_eot_score(c, seq, 96, 1, &tp, &top, &top_p, NULL) == ELIZA_OK, "eot score");
    CHECK(top == greedy[0] && top_p > 0 && top_p <= 1 && tp >= 0 && tp <= top_p, "eot: top %d (want %d) p %g target %g", top,
          greedy[0], top_p, tp);
    CHECK(eliza_inference_llm_eot_score(c, seq, 96, 99999, &tp, &top, &top_p, NULL) == ELIZA_ERR_INVALID_ARG, "bad target");
    /* more ids than the scoring context: the tail that fits is scored, exactly as if only it were given */
    setenv("ELIZA_LLM_N_CTX", "64", 1);
    float tp64 = -1, top_p64 = -1, tp_tail = -2, top_p_tail = -2;
    int32_t top64 = -1, top_tail = -2;
    CHECK(eliza_inference_llm_eot_score(c, seq, 96, 1, &tp64, &top64, &top_p64, &err) == ELIZA_OK, "96 ids in 64: %s",
          err ? err : "");
    eliza_inference_free_string(err), err = NULL;
    unsetenv("ELIZA_LLM_N_CTX");
    CHECK(eliza_inference_llm_eot_score(c, seq + 32, 64, 1, &tp_tail, &top_tail, &top_p_tail, NULL) == ELIZA_OK, "the tail");
    CHECK(tp64 == tp_tail && top64 == top_tail && top_p64 == top_p_tail, "tail truncation: %g/%d/%g vs %g/%d/%g", tp64,
          top64, top_p64, tp_tail, top_tail, top_p_tail);
    int32_t bad_ids[3] = {seq[0], -4, seq[1]};
    CHECK(eliza_inference_llm_eot_score(c, bad_ids, 3, 1, &tp, &top, &top_p, &err) == ELIZA_ERR_INVALID_ARG && err &&
              strstr(err, "-4"),
          "eot: a bad id is named: %s", err ? err : "");
    eliza_inference_free_string(err);
}

typedef struct {
    EliInferenceContext *c;
    const int32_t *prompt;
    int n_prompt;
    int32_t out[64];
    int n_out;
} gen_job;

static void *gen_thread(void *arg) {
    gen_job *j = arg;
    eliza_llm_stream_config_t cfg = greedy_cfg(24);
    EliLlmStream *s = eliza_inference_llm_stream_open(j->c, &cfg, NULL);
    j->n_out = -1;
    if (s && eliza_inference_llm_stream_prefill(s, j->prompt, (size_t)j->n_prompt, NULL) == ELIZA_OK)
        j->n_out = generate(s, j->out, 64, NULL, 0);
    eliza_inference_llm_stream_close(s);
    return NULL;
}

typedef struct {
    EliLlmStream *s;
    atomic_int stop;
} cancel_job;

static void *cancel_thread(void *arg) {
    cancel_job *j = arg;
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
    eliza_inference_llm_stream_cancel(j->s);
    return NULL;
}

static void test_streams(EliInferenceContext *c) {
    int32_t seq[96], greedy[16];
    read_ids(eli_shared_path("golden/models/e2b-mini.tokens.txt"), seq, 96);
    read_ids(eli_shared_path("golden/models/e2b-mini-f32.greedy.txt"), greedy, 16);
    char *err = NULL;

    /* config validation */
    eliza_llm_stream_config_t cfg = greedy_cfg(16);
    cfg.cache_type_k = "q9_9";
    CHECK(eliza_inference_llm_stream_open(c, &cfg, &err) == NULL && err && strstr(err, "q9_9"), "unknown cache type: %s",
          err ? err : "");
    eliza_inference_free_string(err), err = NULL;
    cfg = greedy_cfg(16);
    cfg.cache_type_k = "tbq3_0", cfg.cache_type_v = "qjl1_256";
    CHECK(eliza_inference_llm_stream_open(c, &cfg, &err) == NULL && err && strstr(err, "keys only") &&
              strstr(err, "cache_type_v"),
          "QJL holds keys only: %s", err ? err : "");
    eliza_inference_free_string(err), err = NULL;
    cfg = greedy_cfg(16);
    cfg.draft_min = 3, cfg.draft_max = 2;
    CHECK(eliza_inference_llm_stream_open(c, &cfg, NULL) == NULL, "draft_min > draft_max");
    cfg = greedy_cfg(16);
    cfg.gbnf_grammar = "root ::= \"a\" (";
    CHECK(eliza_inference_llm_stream_open(c, &cfg, NULL) == NULL, "a grammar that does not parse is refused, not ignored");
    cfg = greedy_cfg(16);
    cfg.temperature = NAN;
    CHECK(eliza_inference_llm_stream_open(c, &cfg, NULL) == NULL, "NaN temperature");
    CHECK(eliza_inference_llm_stream_open(c, NULL, NULL) == NULL, "NULL cfg");
    CHECK(eliza_inference_llm_stream_open(NULL, &cfg, NULL) == NULL, "NULL ctx");

    /* the host protocol: greedy output equals llama.cpp's greedy ids */
    cfg = greedy_cfg(16);
    EliLlmStream *s = eliza_inference_llm_stream_open(c, &cfg, &err);
    CHECK(s != NULL, "open: %s", err ? err : "");
    if (!s) return;
    CHECK(eliza_inference_llm_stream_prefill(s, seq, 96, &err) == ELIZA_OK, "prefill: %s", err ? err : "");
    int32_t out[64];
    char text[4096];
    int n = generate(s, out, 64, text, sizeof text);
    CHECK(n == 16 && !memcmp(out, greedy, sizeof greedy), "greedy via the pipe: %d tokens, first %d want %d", n, out[0],
          greedy[0]);
    size_t got = 99;
    char buf[64];
    CHECK(eliza_inference_llm_stream_next(s, out, 8, &got, buf, sizeof buf, NULL, NULL, NULL) == 1 && got == 0 && !buf[0],
          "after the end, next keeps returning 1");
    CHECK(eliza_inference_mmap_evict(c, "text", &err) == ELIZA_ERR_INVALID_ARG, "evict while a stream is open is refused");
    eliza_inference_free_string(err), err = NULL;

    /* second turn: reset_keep with the common prefix, then the same continuation again */
    CHECK(eliza_inference_llm_stream_reset_keep(s, 96) == 96, "reset_keep keeps the prompt");
    n = generate(s, out, 64, NULL, 0);
    CHECK(n == 16 && !memcmp(out, greedy, sizeof greedy), "continuation after reset_keep");
    CHECK(eliza_inference_llm_stream_reset_keep(s, 1000) == 96 + 16, "reset_keep clamps to n_past");
    CHECK(eliza_inference_llm_stream_reset_keep(s, 50) == 50, "reset_keep(50)");
    CHECK(eliza_inference_llm_stream_prefill(s, seq + 50, 46, NULL) == ELIZA_OK, "prefill the rest");
    n = generate(s, out, 64, NULL, 0);
    CHECK(n == 16 && !memcmp(out, greedy, sizeof greedy), "reset_keep(50) + rest == fresh prefill");

    /* bad input */
    int32_t bad = 5000;
    CHECK(eliza_inference_llm_stream_prefill(s, &bad, 1, &err) == ELIZA_ERR_INVALID_ARG && err && strstr(err, "5000"),
          "out-of-range id: %s", err ? err : "");
    eliza_inference_free_string(err), err = NULL;
    CHECK(eliza_inference_llm_stream_prefill(s, NULL, 3, NULL) == ELIZA_ERR_INVALID_ARG, "NULL ids");
    CHECK(eliza_inference_llm_stream_prefill(s, NULL, 0, NULL) == ELIZA_OK, "n == 0 is OK");
    CHECK(eliza_inference_llm_stream_next(s, NULL, 8, &got, buf, sizeof buf, NULL, NULL, NULL) == ELIZA_ERR_INVALID_ARG,
          "NULL tokens_out");
    CHECK(eliza_inference_llm_stream_next(s, out, 0, &got, buf, sizeof buf, NULL, NULL, NULL) == ELIZA_ERR_INVALID_ARG,
          "zero tokens_cap");
    CHECK(eliza_inference_llm_stream_next(s, out, 8, &got, buf, 2, NULL, NULL, NULL) == ELIZA_ERR_INVALID_ARG, "tiny text_cap");
    int32_t big[300];
    for (int i = 0; i < 300; i++) big[i] = seq[i % 96];
    CHECK(eliza_inference_llm_stream_reset(s) == ELIZA_OK, "reset");
    CHECK(eliza_inference_llm_stream_prefill(s, big, 300, &err) == ELIZA_ERR_INVALID_ARG && err && strstr(err, "overflow"),
          "context overflow: %s", err ? err : "");
    eliza_inference_free_string(err), err = NULL;
    CHECK(eliza_inference_llm_stream_next(s, out, 8, &got, buf, sizeof buf, NULL, NULL, &err) == ELIZA_ERR_INVALID_ARG,
          "next with nothing prefilled");
    eliza_inference_free_string(err), err = NULL;

    /* cancel: holds until reset; honoured between prefill batches and before the next token */
    CHECK(eliza_inference_llm_stream_prefill(s, seq, 96, NULL) == ELIZA_OK, "prefill");
    CHECK(eliza_inference_llm_stream_cancel(s) == ELIZA_OK, "cancel");
    CHECK(eliza_inference_llm_stream_next(s, out, 8, &got, buf, sizeof buf, NULL, NULL, NULL) == ELIZA_ERR_CANCELLED, "cancelled");
    CHECK(eliza_inference_llm_stream_prefill(s, seq, 4, NULL) == ELIZA_ERR_CANCELLED, "still cancelled");
    CHECK(eliza_inference_llm_stream_reset(s) == ELIZA_OK, "reset clears cancel");
    CHECK(eliza_inference_llm_stream_prefill(s, seq, 96, NULL) == ELIZA_OK, "prefill after reset");
    n = generate(s, out, 64, NULL, 0);
    CHECK(n == 16 && !memcmp(out, greedy, sizeof greedy), "same greedy output after reset");
    eliza_inference_llm_stream_close(s);
    CHECK(eliza_inference_llm_stream_prefill(s, seq, 4, NULL) == ELIZA_ERR_INVALID_ARG, "prefill after close");
    CHECK(eliza_inference_llm_stream_next(s, out, 8, &got, buf, sizeof buf, NULL, NULL, NULL) == ELIZA_ERR_INVALID_ARG,
          "next after close");
    CHECK(eliza_inference_llm_stream_reset(s) == ELIZA_ERR_INVALID_ARG, "reset after close");
    CHECK(eliza_inference_llm_stream_cancel(s) == ELIZA_ERR_INVALID_ARG, "cancel after close");
    eliza_inference_llm_stream_close(s); /* double close is harmless */

    /* cancel from another thread during a long prefill and during generation */
    cfg = greedy_cfg(0);
    cfg.context_size = 4096;
    s = eliza_inference_llm_stream_open(c, &cfg, NULL);
    int32_t *longp = malloc(4000 * sizeof *longp);
    for (int i = 0; i < 4000; i++) longp[i] = seq[i % 96];
    cancel_job cj = {s, 0};
    pthread_t th;
    pthread_create(&th, NULL, cancel_thread, &cj);
    int rc = eliza_inference_llm_stream_prefill(s, longp, 4000, NULL);
    pthread_join(th, NULL);
    CHECK(rc == ELIZA_ERR_CANCELLED, "cancel during prefill: %d", rc);
    eliza_inference_llm_stream_reset(s);
    CHECK(eliza_inference_llm_stream_prefill(s, seq, 96, NULL) == ELIZA_OK, "prefill");
    pthread_create(&th, NULL, cancel_thread, &cj);
    int steps = 0;
    for (; steps < 100000; steps++) {
        rc = eliza_inference_llm_stream_next(s, out, 1, &got, buf, sizeof buf, NULL, NULL, NULL);
        if (rc != 0) break;
    }
    pthread_join(th, NULL);
    CHECK(rc == ELIZA_ERR_CANCELLED, "cancel during generation: rc %d after %d steps", rc, steps);
    eliza_inference_llm_stream_close(s);
    free(longp);

    /* two streams in two threads produce what they produce alone */
    gen_job a = {c, seq, 96, {0}, 0}, b = {c, seq + 10, 60, {0}, 0}, a1 = a, b1 = b;
    gen_thread(&a1);
    gen_thread(&b1);
    pthread_t ta, tb;
    pthread_create(&ta, NULL, gen_thread, &a);
    pthread_create(&tb, NULL, gen_thread, &b);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    CHECK(a.n_out == 24 && a.n_out == a1.n_out && !memcmp(a.out, a1.out, sizeof a.out), "stream A alone == concurrent");
    CHECK(b.n_out == 24 && b.n_out == b1.n_out && !memcmp(b.out, b1.out, sizeof b.out), "stream B alone == concurrent");

    CHECK(eliza_inference_mmap_evict(c, "text", NULL) == ELIZA_OK, "evict with no stream open");
    CHECK(eliza_inference_mmap_acquire(c, "text", NULL) == ELIZA_OK, "acquire again");
}

/* Pulls one next() step of up to cap tokens; returns its rc and appends the tokens to out[*n]. */
static int step_into(EliLlmStream *s, size_t cap, int32_t *out, int *n, int out_cap) {
    int32_t step[64];
    size_t got = 0;
    char buf[512];
    int rc = eliza_inference_llm_stream_next(s, step, cap, &got, buf, sizeof buf, NULL, NULL, NULL);
    for (size_t i = 0; i < got && *n < out_cap; i++) out[(*n)++] = step[i];
    return rc;
}

/* What the hosts rely on (../shared/spec/ffi.md, "Behaviour the hosts rely on"), each measured against
 * the real hosts. */
static void test_host_behaviour(EliInferenceContext *c) {
    int32_t seq[96], greedy[16], out[64];
    read_ids(eli_shared_path("golden/models/e2b-mini.tokens.txt"), seq, 96);
    read_ids(eli_shared_path("golden/models/e2b-mini-f32.greedy.txt"), greedy, 16);
    char *err = NULL;

    /* region names: known ones whose component is absent are NOT_IMPLEMENTED, not "unknown region" */
    static const char *const absent[] = {"mtp", "dflash", "vision", "asr", "tts", "vad", "wakeword"};
    for (size_t i = 0; i < sizeof absent / sizeof absent[0]; i++) {
        for (int evict = 0; evict < 2; evict++) {
            int rc = evict ? eliza_inference_mmap_evict(c, absent[i], &err) : eliza_inference_mmap_acquire(c, absent[i], &err);
            CHECK(rc == ELIZA_ERR_NOT_IMPLEMENTED && err && strstr(err, absent[i]) && !strstr(err, "unknown"),
                  "%s '%s' on a bare model: %d %s", evict ? "evict" : "acquire", absent[i], rc, err ? err : "");
            eliza_inference_free_string(err), err = NULL;
        }
    }
    CHECK(eliza_inference_mmap_acquire(c, "speech", &err) == ELIZA_ERR_INVALID_ARG && err && strstr(err, "unknown"),
          "a name outside the list: %s", err ? err : "");
    eliza_inference_free_string(err), err = NULL;

    /* K and V types set independently, the low-bit ones too: every pair opens and streams; an f32/f16 pair
     * keeps llama.cpp's greedy ids (test_models and test_kv_lowbit measure every pair's KLD) */
    static const char *const pairs[][2] = {{"f16", "q8_0"},      {"q8_0", "q4_0"},   {"f32", "f16"},
                                           {"bf16", "q5_1"},     {NULL, "f32"},      {"qjl1_256", "q4_polar"},
                                           {"tbq3_0", "tbq3_0"}, {"q8_0", "tbq4_0"}, {"tbq4_0", "f16"}};
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        eliza_llm_stream_config_t cfg = greedy_cfg(16);
        cfg.cache_type_k = pairs[i][0];
        cfg.cache_type_v = pairs[i][1];
        EliLlmStream *s = eliza_inference_llm_stream_open(c, &cfg, &err);
        CHECK(s != NULL, "K %s V %s: %s", pairs[i][0] ? pairs[i][0] : "(NULL)", pairs[i][1], err ? err : "");
        eliza_inference_free_string(err), err = NULL;
        if (!s) continue;
        int n = 0;
        if (eliza_inference_llm_stream_prefill(s, seq, 96, NULL) == ELIZA_OK) n = generate(s, out, 64, NULL, 0);
        CHECK(n == 16, "K %s V %s: %d tokens", pairs[i][0] ? pairs[i][0] : "(NULL)", pairs[i][1], n);
        if (i == 2) CHECK(!memcmp(out, greedy, sizeof greedy), "K f32 V f16: llama.cpp's greedy ids");
        eliza_inference_llm_stream_close(s);
    }

    /* the step that reaches max_tokens returns 1: no extra call that yields nothing */
    static const size_t caps[] = {32, 16, 8, 5, 1};
    for (size_t i = 0; i < sizeof caps / sizeof caps[0]; i++) {
        eliza_llm_stream_config_t cfg = greedy_cfg(16);
        EliLlmStream *s = eliza_inference_llm_stream_open(c, &cfg, NULL);
        if (!s || eliza_inference_llm_stream_prefill(s, seq, 96, NULL)) {
            CHECK(0, "open/prefill");
            eliza_inference_llm_stream_close(s);
            continue;
        }
        int n = 0, calls = 0, rc = 0, empty = 0;
        while (calls < 100 && (rc = step_into(s, caps[i], out, &n, 64)) == 0) calls++;
        calls++;
        const int prev = n;
        CHECK(rc == 1 && n == 16 && !memcmp(out, greedy, sizeof greedy) && calls == (int)((16 + caps[i] - 1) / caps[i]),
              "step size %zu: rc %d, %d tokens in %d calls", caps[i], rc, n, calls);
        empty = step_into(s, caps[i], out, &n, 64) == 1 && n == prev;
        CHECK(empty, "after the final step, next keeps returning 1 with nothing");
        eliza_inference_llm_stream_close(s);
    }
    /* ... and so does the step that fills the context */
    {
        eliza_llm_stream_config_t cfg = greedy_cfg(0);
        cfg.context_size = 100;
        EliLlmStream *s = eliza_inference_llm_stream_open(c, &cfg, NULL);
        int n = 0, calls = 0, rc = -99;
        if (s && eliza_inference_llm_stream_prefill(s, seq, 96, NULL) == ELIZA_OK)
            while (calls++ < 100 && (rc = step_into(s, 2, out, &n, 64)) == 0) {}
        /* 96 prompt positions + 4 generated tokens fill 100 cells, and the 5th is emitted without a cell */
        CHECK(rc == 1 && n == 5 && calls == 3 && !memcmp(out, greedy, 5 * sizeof *out),
              "a full context ends the stream in the step that fills it: rc %d, %d tokens, %d calls", rc, n, calls);
        eliza_inference_llm_stream_close(s);
    }

    /* a host built against the older 80-byte struct leaves garbage at offset 80: validated, never a crash */
    {
        unsigned char raw[sizeof(eliza_llm_stream_config_t)];
        eliza_llm_stream_config_t base = greedy_cfg(4);
        static const int32_t garbage[] = {-1, INT32_MIN, (int32_t)0xDEADBEEF, INT32_MAX, 7};
        for (size_t i = 0; i < sizeof garbage / sizeof garbage[0]; i++) {
            memcpy(raw, &base, sizeof raw);
            memcpy(raw + 80, &garbage[i], sizeof garbage[i]);
            memset(raw + 84, 0xA5, 4);
            eliza_llm_stream_config_t cfg;
            memcpy(&cfg, raw, sizeof cfg);
            EliLlmStream *s = eliza_inference_llm_stream_open(c, &cfg, &err);
            if (garbage[i] < 0)
                CHECK(!s && err && strstr(err, "context_size") && strstr(err, "88-byte"), "offset 80 = %d refused: %s",
                      garbage[i], err ? err : "");
            else {
                /* a positive value is a context size: clamped to the trained context */
                const int n_ok = s && eliza_inference_llm_stream_prefill(s, seq, 4, NULL) == ELIZA_OK;
                CHECK(n_ok, "offset 80 = %d is a context size (clamped): %s", garbage[i], err ? err : "");
                if (garbage[i] == 7) CHECK(eliza_inference_llm_stream_prefill(s, seq, 4, NULL) == ELIZA_ERR_INVALID_ARG,
                                           "context_size 7 holds 7 positions");
            }
            eliza_inference_free_string(err), err = NULL;
            eliza_inference_llm_stream_close(s);
        }
    }

    /* status codes are named */
    CHECK(strstr(eliza_inference_strerror(ELIZA_ERR_CANCELLED), "ELIZA_ERR_CANCELLED") &&
              !strcmp(eliza_inference_strerror(3), "ELIZA_OK") && strstr(eliza_inference_strerror(-99), "unknown"),
          "strerror");
}

/* What the verifier callback saw: every event's fields, concatenated. */
typedef struct {
    int n_events, n_accepted, n_rejected, n_corrected, bad;
    int accepted[256], a_len;
    int rej_from[64], corrected[64];
    pthread_t thread;
} verify_log;

static void on_verify(const EliVerifierEvent *ev, void *user) {
    verify_log *l = user;
    l->n_events++;
    if (!pthread_equal(pthread_self(), l->thread)) l->bad++; /* the thread that drives the stream */
    if ((ev->rejected_from < 0) != (ev->rejected_to < 0) || (ev->rejected_from >= 0 && ev->rejected_to <= ev->rejected_from) ||
        ev->n_corrected != (ev->rejected_from >= 0 ? 1u : 0u) || (ev->n_accepted && !ev->accepted_token_ids))
        l->bad++;
    for (size_t i = 0; i < ev->n_accepted && l->a_len < 256; i++) l->accepted[l->a_len++] = ev->accepted_token_ids[i];
    l->n_accepted += (int)ev->n_accepted;
    if (ev->rejected_from >= 0) {
        l->n_rejected += ev->rejected_to - ev->rejected_from;
        if (l->n_corrected < 64) l->rej_from[l->n_corrected] = ev->rejected_from, l->corrected[l->n_corrected] = ev->corrected_token_ids[0];
        l->n_corrected++;
    }
}

/* A greedy stream's output (MTP with window 1..4 when mtp), with its drafted / accepted totals. */
static int run_stream(EliInferenceContext *c, const int32_t *prompt, int n_prompt, int mtp, int32_t *out, int cap,
                      int *drafted, int *accepted) {
    eliza_llm_stream_config_t cfg = greedy_cfg(cap);
    if (mtp) cfg.draft_min = 1, cfg.draft_max = 4;
    EliLlmStream *s = eliza_inference_llm_stream_open(c, &cfg, NULL);
    int n = 0;
    *drafted = *accepted = 0;
    if (s && eliza_inference_llm_stream_prefill(s, prompt, (size_t)n_prompt, NULL) == ELIZA_OK)
        for (int guard = 0; guard < 1000; guard++) {
            int32_t step[4], d = 0, a = 0;
            size_t got = 0;
            int rc = eliza_inference_llm_stream_next(s, step, 4, &got, NULL, 0, &d, &a, NULL);
            for (size_t i = 0; i < got && n < cap; i++) out[n++] = step[i];
            *drafted += d, *accepted += a;
            if (rc != 0) break;
        }
    eliza_inference_llm_stream_close(s);
    return n;
}

/* The verifier events of MTP streams on the embedded eliza-1-nano (whose trained drafter is accepted most
 * of the time, so both kinds of round occur) against their output: the accepted drafts are, event by
 * event, runs of the output in order; every correction is the output token at rejected_from; the totals
 * are next()'s drafted / accepted; after clearing, no event comes. */
static void test_verifier(void) {
    char *err = NULL;
    EliInferenceContext *c = eliza_inference_create(ELI_SOURCE_DIR "/models/eliza-1-nano", &err);
    CHECK(c != NULL, "nano bundle: %s", err ? err : "");
    if (!c) return;
    verify_log l;
    memset(&l, 0, sizeof l);
    l.thread = pthread_self();
    CHECK(eliza_inference_set_verifier_callback(NULL, on_verify, &l, &err) == ELIZA_ERR_INVALID_ARG && err, "NULL context");
    eliza_inference_free_string(err);
    int *prompt = NULL;
    size_t n_prompt = 0;
    const char *text = "It is a truth universally acknowledged, that a single man in possession of a good fortune";
    CHECK(eliza_inference_tokenize(c, text, strlen(text), 1, 0, &prompt, &n_prompt, NULL) == ELIZA_OK, "tokenize");
    enum { N = 96 };
    int32_t plain[N], out[N];
    int d0, a0, drafted, accepted;
    const int n_plain = run_stream(c, prompt, (int)n_prompt, 0, plain, N, &d0, &a0);
    CHECK(eliza_inference_set_verifier_callback(c, on_verify, &l, NULL) == ELIZA_OK, "set the callback");
    const int n = run_stream(c, prompt, (int)n_prompt, 1, out, N, &drafted, &accepted);
    CHECK(n == N && n_plain == N && !memcmp(out, plain, sizeof out), "MTP output with a callback == plain greedy");
    printf("verifier: %d events, %d accepted, %d rejected, %d corrected (next: %d drafted, %d accepted)\n", l.n_events,
           l.n_accepted, l.n_rejected, l.n_corrected, drafted, accepted);
    CHECK(l.n_events > 0 && l.bad == 0, "%d events, %d malformed or on another thread", l.n_events, l.bad);
    CHECK(l.n_accepted > 0 && l.n_rejected > 0, "both accepted (%d) and rejected (%d) drafts occur", l.n_accepted,
          l.n_rejected);
    CHECK(l.n_accepted == accepted && l.n_accepted + l.n_rejected == drafted,
          "events: %d accepted + %d rejected vs next(): %d of %d", l.n_accepted, l.n_rejected, accepted, drafted);
    int ok = 1;
    for (int i = 0; i < l.n_corrected && i < 64; i++) ok &= l.rej_from[i] < n && out[l.rej_from[i]] == l.corrected[i];
    CHECK(ok, "every correction is the output token at rejected_from");
    int pos = 0, in_order = 1;
    for (int i = 0; i < l.a_len; i++) {
        while (pos < n && out[pos] != l.accepted[i]) pos++;
        in_order &= pos < n;
        pos++;
    }
    CHECK(in_order, "the accepted drafts appear in the output in order");
    /* cleared: no more events */
    CHECK(eliza_inference_set_verifier_callback(c, NULL, NULL, NULL) == ELIZA_OK, "clear");
    const int before = l.n_events;
    run_stream(c, prompt, (int)n_prompt, 1, out, N, &drafted, &accepted);
    CHECK(l.n_events == before && drafted > 0, "no event after clearing (%d drafted)", drafted);
    eliza_inference_free_tokens(prompt);
    eliza_inference_destroy(c);
}

/* MTP through the pipe: a bundle with text/ and mtp/, and an explicit mtp_drafter_path. */
static void test_mtp(EliInferenceContext *plain) {
    int32_t seq[96], greedy[16], out[64];
    read_ids(eli_shared_path("golden/models/e2b-mini.tokens.txt"), seq, 96);
    read_ids(eli_shared_path("golden/models/e2b-mini-f32.greedy.txt"), greedy, 16);
    char dir[] = "/tmp/eli_mtp_XXXXXX", p[600], q[600];
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    snprintf(p, sizeof p, "%s/text", dir), mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/mtp", dir), mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/text/e2b-mini.gguf", dir);
    snprintf(q, sizeof q, "%s", eli_shared_path(MODEL));
    CHECK(symlink(q, p) == 0, "symlink");
    snprintf(p, sizeof p, "%s/mtp/drafter-mini.gguf", dir);
    snprintf(q, sizeof q, "%s", eli_shared_path("golden/models/assistant-mini-f32.gguf"));
    CHECK(symlink(q, p) == 0, "symlink");
    char *err = NULL;
    EliInferenceContext *c = eliza_inference_create(dir, &err);
    CHECK(c != NULL, "bundle with mtp/: %s", err ? err : "");
    eliza_llm_stream_config_t cfg = greedy_cfg(16);
    cfg.draft_min = 1, cfg.draft_max = 4;
    if (c) {
        CHECK(eliza_inference_mmap_acquire(c, "mtp", &err) == ELIZA_OK, "acquire mtp: %s", err ? err : "");
        EliLlmStream *s = eliza_inference_llm_stream_open(c, &cfg, &err);
        CHECK(s != NULL, "open with MTP: %s", err ? err : "");
        if (s && eliza_inference_llm_stream_prefill(s, seq, 96, NULL) == ELIZA_OK) {
            int n = 0, drafted = 0;
            for (int guard = 0; guard < 100; guard++) {
                int32_t step[32], d = 0, a = 0;
                size_t got = 0;
                char buf[1024];
                int rc = eliza_inference_llm_stream_next(s, step, 32, &got, buf, sizeof buf, &d, &a, NULL);
                for (size_t i = 0; i < got && n < 64; i++) out[n++] = step[i];
                drafted += d;
                CHECK(a >= 0 && a <= d, "accepted %d of %d", a, d);
                if (rc != 0) break;
            }
            CHECK(n == 16 && !memcmp(out, greedy, sizeof greedy), "greedy with MTP through the pipe == llama.cpp greedy");
            CHECK(drafted > 0, "next reports drafted tokens (%d)", drafted);
        }
        CHECK(eliza_inference_mmap_evict(c, "mtp", NULL) == ELIZA_ERR_INVALID_ARG, "evict mtp while in use is refused");
        eliza_inference_llm_stream_close(s);
        CHECK(eliza_inference_mmap_acquire(c, "dflash", &err) == ELIZA_OK, "dflash names the drafter: %s", err ? err : "");
        CHECK(eliza_inference_mmap_evict(c, "mtp", NULL) == ELIZA_OK, "evict mtp");
        eliza_inference_destroy(c);
    }
    /* a context over a bare .gguf has no bundle drafter: MTP needs mtp_drafter_path */
    err = NULL;
    CHECK(eliza_inference_llm_stream_open(plain, &cfg, &err) == NULL && err && strstr(err, "mtp"), "no drafter: %s",
          err ? err : "");
    eliza_inference_free_string(err), err = NULL;
    cfg.mtp_drafter_path = q;
    EliLlmStream *s = eliza_inference_llm_stream_open(plain, &cfg, &err);
    CHECK(s != NULL, "explicit mtp_drafter_path: %s", err ? err : "");
    eliza_inference_llm_stream_close(s);
    cfg.mtp_drafter_path = eli_shared_path("golden/models/dense-kv-mini-f32.gguf");
    CHECK(eliza_inference_llm_stream_open(plain, &cfg, &err) == NULL && err && strstr(err, "assistant"),
          "a target model as drafter is refused: %s", err ? err : "");
    eliza_inference_free_string(err);
    snprintf(p, sizeof p, "%s/text/e2b-mini.gguf", dir), unlink(p);
    snprintf(p, sizeof p, "%s/mtp/drafter-mini.gguf", dir), unlink(p);
    snprintf(p, sizeof p, "%s/text", dir), rmdir(p);
    snprintf(p, sizeof p, "%s/mtp", dir), rmdir(p);
    rmdir(dir);
}

static void test_backends(EliInferenceContext *c) {
    int32_t seq[96], greedy[16], out[64];
    read_ids(eli_shared_path("golden/models/e2b-mini.tokens.txt"), seq, 96);
    read_ids(eli_shared_path("golden/models/e2b-mini-f32.greedy.txt"), greedy, 16);
    eliza_llm_stream_config_t cfg = greedy_cfg(16);
    char *err = NULL;
    setenv("ELIZA_LLM_BACKEND", "no-such-backend", 1);
    CHECK(eliza_inference_llm_stream_open(c, &cfg, &err) == NULL && err && strstr(err, "no-such-backend"),
          "hard select of an unknown backend fails: %s", err ? err : "");
    eliza_inference_free_string(err), err = NULL;
    setenv("ELIZA_LLM_BACKEND", "reference", 1);
    EliLlmStream *s = eliza_inference_llm_stream_open(c, &cfg, &err);
    CHECK(s != NULL, "reference backend: %s", err ? err : "");
    if (s && eliza_inference_llm_stream_prefill(s, seq, 96, NULL) == ELIZA_OK) {
        int n = generate(s, out, 64, NULL, 0);
        CHECK(n == 16 && !memcmp(out, greedy, sizeof greedy), "reference backend greedy");
    }
    eliza_inference_llm_stream_close(s);
    setenv("ELIZA_LLM_BACKEND", "builtin", 1);
    s = eliza_inference_llm_stream_open(c, &cfg, NULL);
    CHECK(s != NULL, "builtin by name");
    eliza_inference_llm_stream_close(s);
    unsetenv("ELIZA_LLM_BACKEND");
    /* the knobs reach the library at its edge, checked there (config.h) */
    setenv("ELIZA_LLM_RESERVE", "2", 1);
    CHECK(eliza_inference_llm_stream_open(c, &cfg, &err) == NULL && err && strstr(err, "ELIZA_LLM_RESERVE"),
          "a bad knob fails the open naming it: %s", err ? err : "");
    eliza_inference_free_string(err), err = NULL;
    unsetenv("ELIZA_LLM_RESERVE");
    CHECK(eliza_inference_mmap_evict(c, "text", NULL) == ELIZA_OK, "evict");
    setenv("ELIZA_LLM_REPACK", "yes", 1);
    CHECK(eliza_inference_mmap_acquire(c, "text", &err) == ELIZA_ERR_INVALID_ARG && err && strstr(err, "ELIZA_LLM_REPACK"),
          "a bad ELIZA_LLM_REPACK fails the load: %s", err ? err : "");
    eliza_inference_free_string(err), err = NULL;
    setenv("ELIZA_LLM_REPACK", "0", 1);
    s = eliza_inference_llm_stream_open(c, &cfg, NULL);
    CHECK(s && eliza_inference_llm_stream_prefill(s, seq, 96, NULL) == ELIZA_OK && generate(s, out, 64, NULL, 0) == 16 &&
              !memcmp(out, greedy, sizeof greedy),
          "ELIZA_LLM_REPACK=0: the mapped weights give the same greedy ids");
    eliza_inference_llm_stream_close(s);
    unsetenv("ELIZA_LLM_REPACK");
    eliza_inference_mmap_evict(c, "text", NULL);
}

int main(void) {
    test_basics();
    char *err = NULL;
    EliInferenceContext *c = eliza_inference_create(eli_shared_path(MODEL), &err);
    CHECK(c != NULL, "create on a .gguf path: %s", err ? err : "");
    if (c) {
        test_text_utils(c);
        test_streams(c);
        test_host_behaviour(c);
        test_backends(c);
        test_mtp(c);
        test_verifier();
        /* destroying a context closes its open streams */
        eliza_llm_stream_config_t cfg = greedy_cfg(4);
        EliLlmStream *s = eliza_inference_llm_stream_open(c, &cfg, NULL);
        CHECK(s != NULL, "open before destroy");
        eliza_inference_destroy(c);
        CHECK(eliza_inference_llm_stream_reset(s) == ELIZA_ERR_INVALID_ARG, "stream of a destroyed context");
        CHECK(eliza_inference_mmap_acquire(c, "text", NULL) == ELIZA_ERR_INVALID_ARG, "destroyed context");
    }
    TEST_MAIN_END();
}
