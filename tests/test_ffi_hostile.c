/* The C ABI used as a hostile integrator would (issue "Hostile use"): calls racing each other on other
 * threads, stale and garbage handles, a context filled to the last position, bundle manifests that lie.
 * Every race runs enough iterations to hit its window under ASan and TSan (make asan / make tsan): before
 * the fixes, cancel racing close and tokenize racing evict were use-after-frees, and a second destroy
 * crashed. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "eliza_inference.h"
#include "test.h"
#include "test_ffi_config.h"

#define MODEL "golden/models/e2b-mini-f32.gguf"

/* ---- cancel racing close ---- */

typedef struct {
    EliLlmStream *_Atomic s;
    atomic_int stop, calls;
} canceller;

static void *cancel_loop(void *arg) {
    canceller *c = arg;
    while (!atomic_load(&c->stop)) {
        eliza_inference_llm_stream_cancel(atomic_load(&c->s)); /* OK, or INVALID_ARG once closed: never a crash */
        atomic_fetch_add(&c->calls, 1);
    }
    return NULL;
}

static void test_cancel_close(EliInferenceContext *ctx, const int32_t *seq) {
    canceller c;
    atomic_init(&c.s, NULL);
    atomic_init(&c.stop, 0);
    atomic_init(&c.calls, 0);
    pthread_t th;
    pthread_create(&th, NULL, cancel_loop, &c);
    int opened = 0;
    for (int i = 0; i < 300; i++) {
        eliza_llm_stream_config_t cfg = greedy_cfg(4);
        cfg.context_size = 16;
        EliLlmStream *s = eliza_inference_llm_stream_open(ctx, &cfg, NULL);
        opened += s != NULL;
        atomic_store(&c.s, s);
        if (i % 3 == 0) eliza_inference_llm_stream_prefill(s, seq, 8, NULL);
        eliza_inference_llm_stream_close(s);
    }
    atomic_store(&c.stop, 1);
    pthread_join(th, NULL);
    CHECK(opened == 300 && atomic_load(&c.calls) > 0, "%d streams closed under %d racing cancels", opened,
          atomic_load(&c.calls));
}

/* close while another thread is inside next(): the call is cancelled and waited for */
typedef struct {
    EliLlmStream *s;
    int rc;
    atomic_int started;
} runner;

static void *next_loop(void *arg) {
    runner *r = arg;
    int32_t out[4];
    size_t got;
    atomic_store(&r->started, 1);
    do r->rc = eliza_inference_llm_stream_next(r->s, out, 4, &got, NULL, 0, NULL, NULL, NULL);
    while (r->rc == 0);
    return NULL;
}

static void test_close_while_running(EliInferenceContext *ctx, const int32_t *seq) {
    int ok = 0;
    for (int i = 0; i < 20; i++) {
        eliza_llm_stream_config_t cfg = greedy_cfg(0);
        cfg.context_size = 256;
        runner r = {eliza_inference_llm_stream_open(ctx, &cfg, NULL), 0, 0};
        if (!r.s || eliza_inference_llm_stream_prefill(r.s, seq, 96, NULL)) continue;
        pthread_t th;
        pthread_create(&th, NULL, next_loop, &r);
        while (!atomic_load(&r.started)) sched_yield();
        eliza_inference_llm_stream_close(r.s);
        pthread_join(th, NULL);
        /* the loop ended: cancelled mid-call, refused as closed, or the stream had ended */
        ok += r.rc == ELIZA_ERR_CANCELLED || r.rc == ELIZA_ERR_INVALID_ARG || r.rc == 1;
    }
    CHECK(ok == 20, "close with next() running on another thread: %d of 20 clean", ok);
}

/* ---- text utilities racing eviction ---- */

typedef struct {
    EliInferenceContext *c;
    const int32_t *seq;
    char want[64]; /* what detokenize gives without a race (the golden mini vocabulary keeps its '▁') */
    int want_len;
    atomic_int stop, ok, bad;
} user_job;

static void *text_user(void *arg) {
    user_job *j = arg;
    while (!atomic_load(&j->stop)) {
        int32_t *ids = NULL;
        size_t n = 0;
        char text[256];
        float emb[256], p = 0;
        int dim = 0, top = 0;
        int good = eliza_inference_tokenize(j->c, "hello there", 11, 1, 0, &ids, &n, NULL) == ELIZA_OK && n > 1;
        good &= eliza_inference_detokenize(j->c, ids, n, 1, 0, text, sizeof text, NULL) == j->want_len &&
                !strcmp(text, j->want);
        eliza_inference_free_tokens(ids);
        good &= eliza_inference_embed(j->c, "x y", 3, ELIZA_POOLING_MEAN, emb, 256, &dim, NULL) == ELIZA_OK;
        good &= eliza_inference_llm_eot_score(j->c, j->seq, 8, 1, &p, &top, NULL, NULL) == ELIZA_OK;
        atomic_fetch_add(good ? &j->ok : &j->bad, 1);
    }
    return NULL;
}

static void test_use_evict(EliInferenceContext *c, const int32_t *seq) {
    user_job j = {c, seq, {0}, 0, 0, 0, 0};
    int32_t *ids = NULL;
    size_t n = 0;
    CHECK(eliza_inference_tokenize(c, "hello there", 11, 1, 0, &ids, &n, NULL) == ELIZA_OK, "tokenize");
    j.want_len = eliza_inference_detokenize(c, ids, n, 1, 0, j.want, sizeof j.want, NULL);
    eliza_inference_free_tokens(ids);
    pthread_t th[2];
    for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, text_user, &j);
    int evicted = 0;
    for (int i = 0; i < 200; i++) {
        evicted += eliza_inference_mmap_evict(c, "text", NULL) == ELIZA_OK;
        if (i % 2) eliza_inference_mmap_acquire(c, "text", NULL);
    }
    atomic_store(&j.stop, 1);
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    CHECK(evicted == 200 && atomic_load(&j.ok) > 0 && atomic_load(&j.bad) == 0,
          "tokenize/detokenize/embed/eot racing %d evictions: %d rounds right, %d wrong", evicted, atomic_load(&j.ok),
          atomic_load(&j.bad));
}

/* ---- stale and garbage handles ---- */

static void *destroy_thread(void *c) {
    eliza_inference_destroy(c);
    return NULL;
}

static void test_stale_handles(void) {
    EliInferenceContext *c = eliza_inference_create(eli_shared_path(MODEL), NULL);
    CHECK(c != NULL, "create");
    eliza_inference_destroy(c);
    eliza_inference_destroy(c); /* a second destroy is refused, not run */
    char *err = NULL;
    CHECK(eliza_inference_mmap_acquire(c, "text", &err) == ELIZA_ERR_INVALID_ARG && err && strstr(err, "destroyed"),
          "a destroyed context is named: %s", err ? err : "");
    eliza_inference_free_string(err);
    /* pointers that never were handles: nothing dereferences them */
    long junk[16] = {0};
    EliInferenceContext *fake = (EliInferenceContext *)junk;
    EliLlmStream *fake_s = (EliLlmStream *)(junk + 4);
    eliza_inference_destroy(fake);
    eliza_inference_llm_stream_close(fake_s);
    int32_t *ids = NULL;
    size_t n = 0;
    eliza_llm_stream_config_t cfg = greedy_cfg(4);
    int32_t out[4];
    size_t got;
    CHECK(eliza_inference_tokenize(fake, "a", 1, 0, 0, &ids, &n, NULL) == ELIZA_ERR_INVALID_ARG &&
              eliza_inference_llm_stream_open(fake, &cfg, NULL) == NULL &&
              eliza_inference_llm_stream_next(fake_s, out, 4, &got, NULL, 0, NULL, NULL, NULL) == ELIZA_ERR_INVALID_ARG &&
              eliza_inference_llm_stream_cancel(fake_s) == ELIZA_ERR_INVALID_ARG &&
              eliza_inference_llm_stream_reset_keep(fake_s, 3) == ELIZA_ERR_INVALID_ARG &&
              eliza_inference_set_verifier_callback(fake, NULL, NULL, NULL) == ELIZA_ERR_INVALID_ARG,
          "garbage handles are refused");
    int zero = 1;
    for (int i = 0; i < 16; i++) zero &= junk[i] == 0;
    CHECK(zero, "nothing was written through a garbage handle");
    /* destroy racing destroy: exactly one runs */
    for (int i = 0; i < 50; i++) {
        EliInferenceContext *d = eliza_inference_create(eli_shared_path(MODEL), NULL);
        pthread_t th;
        pthread_create(&th, NULL, destroy_thread, d);
        eliza_inference_destroy(d);
        pthread_join(th, NULL);
    }
    CHECK(1, "concurrent destroys of one context");
}

/* ---- a context filled to the last position ---- */

static int drain(EliLlmStream *s, int32_t *out, int cap) {
    int n = 0;
    for (int guard = 0; guard < 1000; guard++) {
        int32_t step[8];
        size_t got = 0;
        int rc = eliza_inference_llm_stream_next(s, step, 8, &got, NULL, 0, NULL, NULL, NULL);
        for (size_t i = 0; i < got && n < cap; i++) out[n++] = step[i];
        if (rc) return rc < 0 ? rc : n;
    }
    return -1;
}

static void test_full_context(EliInferenceContext *c, const int32_t *seq) {
    char *err = NULL;
    eliza_llm_stream_config_t cfg = greedy_cfg(0);
    cfg.context_size = 100;
    EliLlmStream *s = eliza_inference_llm_stream_open(c, &cfg, NULL);
    int32_t out[16];
    CHECK(s && eliza_inference_llm_stream_prefill(s, seq, 96, NULL) == ELIZA_OK && drain(s, out, 16) == 5,
          "96 + 5 generated tokens fill a context of 100 (the 5th without a cell)");
    /* the size is checked before any id is read: a huge n with a one-element array is refused cleanly */
    const int32_t one = seq[0];
    CHECK(eliza_inference_llm_stream_prefill(s, &one, (size_t)1 << 40, &err) == ELIZA_ERR_INVALID_ARG && err &&
              strstr(err, "overflow") && strstr(err, "0 are free"),
          "a huge n after the context filled: %s", err ? err : "");
    eliza_inference_free_string(err), err = NULL;
    CHECK(eliza_inference_llm_stream_prefill(s, &one, 1, &err) == ELIZA_ERR_INVALID_ARG && err &&
              strstr(err, "100 of the context's 100"),
          "one more token: %s", err ? err : "");
    eliza_inference_free_string(err), err = NULL;
    CHECK(eliza_inference_llm_stream_prefill(s, &one, 0, NULL) == ELIZA_OK, "n = 0 is still fine");
    /* the refused prefills changed nothing: the committed tokens are all still there */
    CHECK(eliza_inference_llm_stream_reset_keep(s, 1000) == 101, "101 committed tokens kept");

    /* a slot saved at a full context restores (it holds n_past + 1 tokens) and continues exactly */
    char slot[] = "/tmp/eli_full_slot_XXXXXX";
    int fd = mkstemp(slot);
    if (fd >= 0) close(fd);
    CHECK(eliza_inference_llm_stream_save_slot(s, slot, &err) == ELIZA_OK, "save at a full context: %s", err ? err : "");
    eliza_inference_free_string(err), err = NULL;
    EliLlmStream *r = eliza_inference_llm_stream_open(c, &cfg, NULL);
    CHECK(r && eliza_inference_llm_stream_restore_slot(r, slot, &err) == ELIZA_OK, "restore at a full context: %s",
          err ? err : "");
    eliza_inference_free_string(err), err = NULL;
    CHECK(r && eliza_inference_llm_stream_reset_keep(r, 1000) == 101, "the restored stream holds the 101 tokens");
    int32_t again[16];
    CHECK(r && eliza_inference_llm_stream_reset_keep(r, 96) == 96 && drain(r, again, 16) == 5 &&
              !memcmp(again, out, 5 * sizeof *out),
          "the restored stream continues as the original did");
    eliza_inference_llm_stream_close(r);
    unlink(slot);

    /* one position short of full: the pending token needs the last cell, so nothing more fits */
    eliza_inference_llm_stream_reset(s);
    eliza_inference_llm_stream_close(s);
    cfg = greedy_cfg(4);
    cfg.context_size = 100;
    s = eliza_inference_llm_stream_open(c, &cfg, NULL);
    CHECK(s && eliza_inference_llm_stream_prefill(s, seq, 96, NULL) == ELIZA_OK && drain(s, out, 16) == 4, "96 + 4");
    CHECK(eliza_inference_llm_stream_prefill(s, &one, 1, &err) == ELIZA_ERR_INVALID_ARG && err && strstr(err, "0 are free"),
          "100 committed tokens in 100 positions: %s", err ? err : "");
    eliza_inference_free_string(err), err = NULL;
    CHECK(eliza_inference_llm_stream_reset_keep(s, 99) == 99 && eliza_inference_llm_stream_prefill(s, &one, 1, NULL) == ELIZA_OK,
          "after dropping one token, one fits again");
    eliza_inference_llm_stream_close(s);
}

/* ---- bundle manifests ---- */

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (f) fputs(text, f), fclose(f);
}

static void test_manifest(void) {
    char dir[] = "/tmp/eli_manifest_XXXXXX", p[600], man[600];
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    snprintf(p, sizeof p, "%s/text", dir), mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/text/m.gguf", dir);
    CHECK(symlink(eli_shared_path(MODEL), p) == 0, "symlink");
    struct stat st;
    stat(p, &st);
    snprintf(man, sizeof man, "%s/eliza-1.manifest.json", dir);
    char text[512];
    static const struct {
        const char *fmt;
        const char *want; /* in the error; NULL = accepted */
    } cases[] = {
        {"{\"files\": [{\"path\": \"text/m.gguf\", \"size\": %lld}]}", NULL},
        {"{\"files\": {\"text\": [{\"path\": \"text/m.gguf\", \"sizeBytes\": %lld}]}}", NULL},
        {"{\"name\": \"no files listed\", \"x\": %lld}", NULL},
        {"{\"files\": [{\"path\": \"text/m.gguf\", \"size\": %lld1}]}", "bytes"},
        {"{\"files\": [{\"path\": \"text/gone.gguf\", \"size\": %lld}]}", "text/gone.gguf"},
        {"{\"files\": [{\"path\": \"../m.gguf\", \"size\": %lld}]}", "inside the bundle"},
        {"{\"files\": [{\"path\": \"/etc/passwd\", \"size\": %lld}]}", "inside the bundle"},
        {"{\"files\": [{\"size\": %lld}]}", "path"},
        {"{\"files\": [{\"path\": \"text/m.gguf\", \"size\": -%lld}]}", "byte count"},
        {"{\"files\": 7, \"n\": %lld}", "not an array"},
        {"[%lld]", "not a JSON object"},
        {"{\"files\": [%lld", "manifest"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(text, sizeof text, cases[i].fmt, (long long)st.st_size);
        write_file(man, text);
        char *err = NULL;
        EliInferenceContext *c = eliza_inference_create(dir, &err);
        if (!cases[i].want) CHECK(c != NULL, "manifest %s: %s", text, err ? err : "");
        else
            CHECK(!c && err && strstr(err, cases[i].want) && strstr(err, "bundle"), "manifest %s refused: %s", text,
                  err ? err : "(accepted)");
        eliza_inference_free_string(err);
        eliza_inference_destroy(c);
    }
    unlink(man);
    unlink(p);
    snprintf(p, sizeof p, "%s/text", dir), rmdir(p);
    rmdir(dir);
}

int main(void) {
    int32_t seq[96];
    CHECK(read_ids(eli_shared_path("golden/models/e2b-mini.tokens.txt"), seq, 96) == 96, "tokens");
    char *err = NULL;
    EliInferenceContext *c = eliza_inference_create(eli_shared_path(MODEL), &err);
    CHECK(c != NULL, "create: %s", err ? err : "");
    if (c) {
        test_cancel_close(c, seq);
        test_close_while_running(c, seq);
        test_use_evict(c, seq);
        test_full_context(c, seq);
        eliza_inference_destroy(c);
    }
    test_stale_handles();
    test_manifest();
    TEST_MAIN_END();
}
