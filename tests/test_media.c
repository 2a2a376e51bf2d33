/* Embedding rows in a generation session (engine.h eli_gen_prefill_embd: an image's or an audio clip's soft
 * tokens) on eliza-1-nano and its drafter:
 * - a bidirectional span changes what follows it (its rows see each other both ways), a causal one of the
 *   same rows gives other logits;
 * - reset_keep recomputes through a span exactly (no checkpoints, rings overwritten), and a reset_keep
 *   inside a span keeps none of it;
 * - a slot file carries the rows: the restored stream continues with the very tokens of the original;
 * - MTP with a span in the prefix gives the tokens of plain greedy decoding;
 * - bad rows (not finite, a bidirectional span longer than a ubatch, past the context) are refused and
 *   change nothing. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine.h"
#include "slot.h"
#include "test.h"
#include "test_exec.h"

#define NANO ELI_SOURCE_DIR "/models/eliza-1-nano"
#define N_A 20   /* tokens before the span */
#define N_S 40   /* rows in the span */
#define N_B 200  /* tokens after it */
#define N_GEN 24 /* tokens generated */

static int32_t prompt_a[N_A], prompt_b[N_B];
static float *rows; /* N_S x n_embd */

/* Deterministic rows of RMS about 1 (what a projector's final RMS norm gives). */
static void make_rows(int E) {
    rows = malloc((size_t)N_S * E * sizeof *rows);
    uint32_t x = 12345;
    for (int i = 0; i < N_S * E; i++) {
        x = x * 1664525u + 1013904223u;
        rows[i] = ((float)(x >> 8) / 16777216.0f - 0.5f) * 3.4641f;
    }
}

static eli_gen *open_gen(const test_model *t, eli_xmodel *draft, int n_ckpt) {
    eli_gen_params p = eli_gen_default_params();
    p.seq.n_ctx = 512;
    p.seq.n_ubatch = 64; /* rings of n_swa + 64 cells: the prompt overruns them */
    p.seq.kv_type_k = p.seq.kv_type_v = ELI_TYPE_F32;
    p.seq.n_ckpt = n_ckpt;
    p.sampling.temperature = 0;
    p.draft = draft;
    p.draft_min = draft ? 1 : 0;
    p.draft_max = draft ? 3 : 0;
    eli_error err = {0};
    eli_gen *g = eli_gen_create(t->xm->exec, t->xm, t->tok, &p, &err);
    CHECK(g != NULL, "eli_gen_create: %s", err.msg);
    return g;
}

/* Prefills a[0..na) (when na > 0), the span (bidir), then b[0..nb). */
static int prefill(eli_gen *g, int na, int bidir, int nb) {
    eli_error err = {0};
    int rc = na > 0 ? eli_gen_prefill(g, prompt_a, (size_t)na, NULL, &err) : 0;
    if (!rc) rc = eli_gen_prefill_embd(g, rows, N_S, bidir, NULL, &err);
    if (!rc && nb > 0) rc = eli_gen_prefill(g, prompt_b, (size_t)nb, NULL, &err);
    CHECK(rc == 0, "prefill: %s", err.msg);
    return rc;
}

static int generate(eli_gen *g, int32_t *out, int n) {
    eli_error err = {0};
    int got = 0;
    while (got < n) {
        int32_t step[8];
        size_t k;
        int r = eli_gen_next(g, step, (size_t)(n - got < 8 ? n - got : 8), &k, NULL, 0, NULL, NULL, NULL, &err);
        for (size_t i = 0; i < k; i++) out[got++] = step[i];
        if (r < 0) CHECK(0, "next: %s", err.msg);
        if (r != 0) break;
    }
    return got;
}

/* The reference continuation: a fresh session over A, span, B. */
static int fresh(const test_model *t, eli_xmodel *draft, int bidir, int32_t *out) {
    eli_gen *g = open_gen(t, draft, 1);
    int n = g && !prefill(g, N_A, bidir, N_B) ? generate(g, out, N_GEN) : -1;
    eli_gen_free(g);
    return n;
}

static void test_bidir_matters(const test_model *t) {
    /* the logits after the span through the sequence layer, bidirectional and causal */
    const int64_t E = t->m->hp.n_embd, V = t->m->hp.n_vocab;
    float *lg[2] = {malloc((size_t)V * sizeof(float)), malloc((size_t)V * sizeof(float))};
    for (int bidir = 0; bidir < 2; bidir++) {
        eli_seq_params sp = eli_seq_default();
        sp.n_ctx = 256;
        sp.kv_type_k = sp.kv_type_v = ELI_TYPE_F32;
        eli_error err = {0};
        eli_xseq *s = eli_seq_create(t->xm->exec, t->xm, &sp, &err);
        const eli_span whole = {0, N_S};
        const eli_batch b = {N_S, NULL, rows, bidir ? &whole : NULL, bidir};
        const eli_outputs out = {lg[bidir], NULL, 0};
        CHECK(s && !eli_seq_decode_tokens(s, prompt_a, N_A, NULL, &err) && !eli_seq_decode(s, &b, NULL, &err) &&
                  !eli_seq_decode_tokens(s, prompt_b, 4, &out, &err),
              "decode: %s", err.msg);
        eli_seq_free(s);
    }
    double mx = 0;
    for (int64_t i = 0; i < V; i++) mx = fabs(lg[0][i] - lg[1][i]) > mx ? fabs(lg[0][i] - lg[1][i]) : mx;
    CHECK(mx > 1e-2, "a bidirectional span gives other logits than a causal one (max |diff| %g)", mx);
    (void)E;
    free(lg[0]), free(lg[1]);
}

static void test_reset_keep(const test_model *t, const int32_t *want) {
    int32_t got[N_GEN];
    /* no checkpoints: keeping a prefix the rings no longer hold recomputes it from 0, through the span */
    eli_gen *g = open_gen(t, NULL, 0);
    if (!g || prefill(g, N_A, 1, N_B)) return eli_gen_free(g);
    int n = generate(g, got, 4);
    const int64_t keep = N_A + N_S + 70, before = eli_gen_n_prompt_decoded(g);
    CHECK(n == 4 && eli_gen_reset_keep(g, keep) == keep, "reset_keep(%lld)", (long long)keep);
    CHECK(eli_gen_n_prompt_decoded(g) - before >= keep, "the kept prefix was recomputed (%lld positions)",
          (long long)(eli_gen_n_prompt_decoded(g) - before));
    eli_error err = {0};
    CHECK(!eli_gen_prefill(g, prompt_b + 70, N_B - 70, NULL, &err), "%s", err.msg);
    n = generate(g, got, N_GEN);
    CHECK(n == N_GEN && !memcmp(got, want, sizeof got), "after a recompute through the span: the fresh continuation");
    /* inside the span: none of it is kept */
    CHECK(eli_gen_reset_keep(g, N_A + N_S / 2) == N_A, "reset_keep inside the span keeps the %d tokens before it", N_A);
    CHECK(eli_gen_n_committed(g) == N_A, "%lld committed", (long long)eli_gen_n_committed(g));
    CHECK(!eli_gen_prefill_embd(g, rows, N_S, 1, NULL, &err) && !eli_gen_prefill(g, prompt_b, N_B, NULL, &err), "%s", err.msg);
    n = generate(g, got, N_GEN);
    CHECK(n == N_GEN && !memcmp(got, want, sizeof got), "span prefilled again after the cut: the fresh continuation");
    const int32_t *toks = eli_gen_tokens(g);
    CHECK(toks[N_A - 1] == prompt_a[N_A - 1] && toks[N_A] == ELI_MEDIA_ID && toks[N_A + N_S - 1] == ELI_MEDIA_ID &&
              toks[N_A + N_S] == prompt_b[0],
          "the span's positions are ELI_MEDIA_ID");
    eli_gen_free(g);
}

static void test_slot(const test_model *t, const int32_t *want) {
    char path[] = "/tmp/eli_test_media_XXXXXX";
    const int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    if (fd < 0) return;
    close(fd);
    int32_t got[N_GEN];
    eli_error err = {0};
    eli_gen *g = open_gen(t, NULL, 1);
    if (!g || prefill(g, N_A, 1, N_B)) return eli_gen_free(g);
    int n = generate(g, got, 6);
    CHECK(n == 6 && !eli_gen_save(g, path, &err), "save: %s", err.msg);
    eli_gen_free(g);
    /* a session with other history restores the file and continues like the original */
    g = open_gen(t, NULL, 1);
    CHECK(g && !eli_gen_prefill(g, prompt_b, 30, NULL, &err) && !eli_gen_restore(g, path, &err), "restore: %s", err.msg);
    n = generate(g, got + 6, N_GEN - 6);
    CHECK(n == N_GEN - 6 && !memcmp(got, want, sizeof got), "the restored stream continues with the original's tokens");
    /* and a reset_keep after the restore still has the rows to recompute with */
    CHECK(eli_gen_reset_keep(g, N_A + N_S + N_B) == N_A + N_S + N_B, "reset_keep after restore");
    n = generate(g, got, N_GEN);
    CHECK(n == N_GEN && !memcmp(got, want, sizeof got), "regenerated after restore + reset_keep");
    eli_gen_free(g);
    unlink(path);
}

static void test_mtp(const test_model *t, eli_xmodel *draft, const int32_t *want) {
    int32_t got[N_GEN];
    CHECK(fresh(t, draft, 1, got) == N_GEN && !memcmp(got, want, sizeof got), "MTP with a span in the prefix == plain greedy");
}

static void test_refused(const test_model *t) {
    const int64_t E = t->m->hp.n_embd;
    eli_gen *g = open_gen(t, NULL, 1);
    if (!g) return;
    eli_error err = {0};
    CHECK(!eli_gen_prefill(g, prompt_a, N_A, NULL, &err), "%s", err.msg);
    float *bad = malloc((size_t)(600 * E) * sizeof *bad);
    memcpy(bad, rows, (size_t)(N_S * E) * sizeof *bad);
    bad[3 * E + 7] = NAN;
    CHECK(eli_gen_prefill_embd(g, bad, N_S, 1, NULL, &err) < 0 && strstr(err.msg, "row 3 value 7 is not finite"), "%s", err.msg);
    for (int64_t i = 0; i < 600 * E; i++) bad[i] = 0.5f;
    CHECK(eli_gen_prefill_embd(g, bad, 65, 1, NULL, &err) < 0 && strstr(err.msg, "n_ubatch"), "%s", err.msg);
    CHECK(eli_gen_prefill_embd(g, bad, 600, 0, NULL, &err) < 0 && strstr(err.msg, "context overflow"), "%s", err.msg);
    CHECK(eli_gen_prefill_embd(g, NULL, 3, 0, NULL, &err) < 0, "NULL rows refused");
    CHECK(eli_gen_n_committed(g) == N_A, "nothing changed (%lld committed)", (long long)eli_gen_n_committed(g));
    /* a causal span may be longer than a ubatch: it is decoded in chunks */
    CHECK(!eli_gen_prefill_embd(g, bad, 150, 0, NULL, &err) && eli_gen_n_committed(g) == N_A + 150, "%s", err.msg);
    free(bad);
    eli_gen_free(g);
}

int main(void) {
    test_model t, d;
    eli_error err = {0};
    CHECK(!test_model_load(NANO "/text/eliza-1-nano.gguf", 1, NULL, &t, &err), "%s", err.msg);
    CHECK(!test_model_load(NANO "/mtp/drafter-nano.gguf", 0, t.m, &d, &err), "%s", err.msg);
    if (!t.xm || !d.xm) {
        TEST_MAIN_END();
    }
    int32_t *ids = NULL;
    size_t n = 0;
    const char *text = "It is a truth universally acknowledged, that a single man in possession of a good fortune, must be "
                       "in want of a wife. However little known the feelings or views of such a man may be on his first "
                       "entering a neighbourhood, this truth is so well fixed in the minds of the surrounding families, "
                       "that he is considered the rightful property of some one or other of their daughters. My dear Mr. "
                       "Bennet, said his lady to him one day, have you heard that Netherfield Park is let at last? Mr. "
                       "Bennet replied that he had not. But it is, returned she; for Mrs. Long has just been here, and she "
                       "told me all about it. Mr. Bennet made no answer.";
    char twice[2048];
    snprintf(twice, sizeof twice, "%s %s", text, text);
    CHECK(!eli_tokenize(t.tok, twice, strlen(twice), 0, 0, &ids, &n, &err) && n >= N_A + N_B, "%zu tokens: %s", n, err.msg);
    if (n >= N_A + N_B) {
        memcpy(prompt_a, ids, sizeof prompt_a);
        memcpy(prompt_b, ids + N_A, sizeof prompt_b);
        make_rows(t.m->hp.n_embd);
        int32_t want[N_GEN];
        CHECK(fresh(&t, NULL, 1, want) == N_GEN, "fresh continuation");
        test_bidir_matters(&t);
        test_reset_keep(&t, want);
        test_slot(&t, want);
        test_mtp(&t, d.xm, want);
        test_refused(&t);
        free(rows);
    }
    free(ids);
    test_model_free(&d);
    test_model_free(&t);
    TEST_MAIN_END();
}
