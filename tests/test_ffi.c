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

/* Runs next() with 32-token steps until it returns 1; returns the number of tokens. */
static int generate(EliLlmStream *s, int32_t *out, int cap, char *text, size_t text_cap) {
    int n = 0;
    size_t used = 0;
    if (text_cap) text[0] = '\0';
    for (int guard = 0; guard < 1000; guard++) {
        int32_t step[32];
        size_t got = 0;
        char buf[1024];
        char *err = NULL;
        int rc = eliza_inference_llm_stream_next(s, step, 32, &got, buf, sizeof buf, NULL, NULL, &err);
        if (rc < 0) {
            fprintf(stderr, "next: %s\n", err ? err : "?");
            eliza_inference_free_string(err);
            return -1;
        }
        for (size_t i = 0; i < got && n < cap; i++) out[n++] = step[i];
        size_t bl = strlen(buf);
        if (text_cap && used + bl < text_cap) memcpy(text + used, buf, bl + 1), used += bl;
        if (rc == 1) return n;
    }
    return -1;
}

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
    int *ids = NULL;
    size_t n = 0;
    char *err = NULL;
    const char *text = "Hello";
    CHECK(eliza_inference_tokenize(c, text, strlen(text), 1, 0, &ids, &n, &err) == ELIZA_OK && n >= 2 && ids[0] == 2,
          "tokenize: %s", err ? err : "");
    char out[256];
    int w = eliza_inference_detokenize(c, ids, n, 1, 0, out, sizeof out, &err);
    CHECK(w == 5 && !strcmp(out, "Hello"), "detokenize round trip: %d '%s'", w, out);
    err = NULL;
    CHECK(eliza_inference_detokenize(c, ids, n, 1, 0, out, 3, &err) == ELIZA_ERR_INVALID_ARG && err && strstr(err, "6"),
          "small buffer names the size: %s", err ? err : "");
    eliza_inference_free_string(err);
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
    cfg.cache_type_k = "f32";
    cfg.cache_type_v = "q8_0";
    CHECK(eliza_inference_llm_stream_open(c, &cfg, NULL) == NULL, "K and V types must match");
    cfg = greedy_cfg(16);
    cfg.draft_min = 3, cfg.draft_max = 2;
    CHECK(eliza_inference_llm_stream_open(c, &cfg, NULL) == NULL, "draft_min > draft_max");
    cfg = greedy_cfg(16);
    cfg.gbnf_grammar = "root ::= \"a\"";
    CHECK(eliza_inference_llm_stream_open(c, &cfg, NULL) == NULL, "grammar is refused, not ignored");
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
}

int main(void) {
    test_basics();
    char *err = NULL;
    EliInferenceContext *c = eliza_inference_create(eli_shared_path(MODEL), &err);
    CHECK(c != NULL, "create on a .gguf path: %s", err ? err : "");
    if (c) {
        test_text_utils(c);
        test_streams(c);
        test_backends(c);
        test_mtp(c);
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
