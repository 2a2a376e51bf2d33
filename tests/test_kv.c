/* KV cache layout and window checkpoints on the golden models: predicted bytes equal the allocation, ring
 * sizes, truncation limits, checkpoint take / restore / invalidation / bound, and exactness: resuming from a
 * checkpoint and recomputing only the tokens after it gives the same logits as a fresh prefill, and an
 * eli_gen session with ubatch 4 continues after reset_keep exactly like a fresh prefill of the same tokens. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "engine.h"
#include "forward.h"
#include "kv_cache.h"
#include "kv_types.h"
#include "quants.h"
#include "test.h"
#include "test_exec.h"

static void test_layout(void) {
    static const char *models[] = {"e2b-mini-f32", "e2b-mini-q8_0", "dense-kv-mini-f32", "moe-mini-f32"};
    static const char *types[] = {"f16", "f32", "q8_0", "q4_0"};
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        char rel[256];
        snprintf(rel, sizeof rel, "golden/models/%s.gguf", models[i]);
        eli_error err = {0};
        eli_model *m = eli_model_load(eli_shared_path(rel), &err);
        CHECK(m != NULL, "%s: %s", rel, err.msg);
        if (!m) continue;
        const int64_t ctxs[] = {1, 17, 100, 256, 4096}, ubs[] = {1, 4, 512};
        /* K and V types alike (t2 = 0) and mixed (t2 = 1: V is the next type of the list) */
        for (size_t t = 0; t < 8; t++)
            for (size_t c = 0; c < 5; c++)
                for (size_t u = 0; u < 3; u++) {
                    uint32_t tk, tv;
                    eli_kv_type_from_name(types[t % 4], &tk);
                    eli_kv_type_from_name(types[(t % 4 + t / 4) % 4], &tv);
                    eli_kv_cache *kv = eli_kv_create(m, ctxs[c], ubs[u], tk, tv, 1, &err);
                    if (!kv) continue; /* a block type that does not divide the head dim */
                    CHECK(kv->type_k == tk && kv->type_v == tv, "types kept");
                    size_t swa, full;
                    size_t pred = eli_kv_predict_bytes(m, ctxs[c], ubs[u], tk, tv, &swa, &full);
                    CHECK(pred == kv->bytes && swa == kv->bytes_swa && full == kv->bytes_full,
                          "%s %s/%s ctx %lld ub %lld: predicted %zu actual %zu", models[i], types[t % 4],
                          types[(t % 4 + t / 4) % 4], (long long)ctxs[c], (long long)ubs[u], pred, kv->bytes);
                    for (int il = 0; il < m->hp.n_layer; il++) {
                        const eli_layer *l = &m->layers[il];
                        const eli_kv_layer *kl = &kv->layers[il];
                        if (!l->has_kv) CHECK(!kl->k && !kl->v && kl->n_cells == 0, "shared layer %d stores nothing", il);
                        else if (l->is_swa)
                            CHECK(kl->n_cells == (m->hp.n_swa + ubs[u] < ctxs[c] ? m->hp.n_swa + ubs[u] : ctxs[c]),
                                  "ring of layer %d", il);
                        else CHECK(kl->n_cells == ctxs[c], "full layer %d", il);
                    }
                    eli_kv_free(kv);
                }
        eli_model_free(m);
    }
}

static int bits_equal(const float *a, const float *b, size_t n) { return !memcmp(a, b, n * sizeof *a); }

static void test_checkpoints(void) {
    int32_t seq[96];
    read_ids(eli_shared_path("golden/models/e2b-mini.tokens.txt"), seq, 96);
    eli_error err = {0};
    eli_model *m = eli_model_load(eli_shared_path("golden/models/e2b-mini-f32.gguf"), &err);
    CHECK(m != NULL, "load: %s", err.msg);
    if (!m) return;
    const int V = m->hp.n_vocab;
    eli_context_params p = eli_context_default_params();
    p.n_ctx = 256;
    p.n_ubatch = 4; /* rings of 16 + 4 cells */
    p.reserve = 0;
    eli_context *c = eli_context_create(m, &p, &err), *f = eli_context_create(m, &p, &err);
    CHECK(c && f, "contexts: %s", err.msg);
    if (!c || !f) return;
    eli_kv_cache *kv = eli_context_kv_mut(c);
    const size_t one = eli_kv_checkpoint_bytes(kv);
    CHECK(one > 0 && kv->max_ckpt == 1 && kv->ckpt_bytes == 0, "one checkpoint of %zu bytes, allocated lazily", one);
    p.reserve = 1;
    eli_context *r = eli_context_create(m, &p, &err);
    CHECK(r && eli_context_kv_mut(r)->ckpt_bytes == one, "reserved: the checkpoint allocated up front");
    eli_context_free(r);
    float *la = malloc((size_t)10 * V * sizeof *la), *lb = malloc((size_t)10 * V * sizeof *lb);

    CHECK(!eli_decode(c, seq, 60, NULL, 0, &err), "decode 60");
    eli_context_checkpoint(c);
    CHECK(kv->ckpt_bytes == one && kv->n_ckpt_taken == 1, "checkpoint at 60 (%zu bytes)", kv->ckpt_bytes);
    CHECK(!eli_decode(c, seq + 60, 36, NULL, 0, &err), "decode to 96");
    CHECK(!eli_context_truncate(c, 70), "the rings no longer hold what 70 needs");
    CHECK(eli_context_resume(c, 70) == 60 && eli_context_n_past(c) == 60, "resume 70 from the checkpoint at 60");
    CHECK(!eli_decode(c, seq + 60, 10, NULL, 0, &err) && !eli_decode(c, seq + 70, 10, la, 1, &err), "recompute + continue");
    CHECK(!eli_decode(f, seq, 70, NULL, 0, &err) && !eli_decode(f, seq + 70, 10, lb, 1, &err), "fresh");
    CHECK(bits_equal(la, lb, (size_t)10 * V), "checkpoint resume == fresh prefill (bitwise, 10 rows)");
    CHECK(kv->ckpt[0].pos == 60 && kv->n_ckpt_restored == 1, "the checkpoint at 60 stays valid");

    /* resume to a point before the checkpoint whose window the checkpoint still holds: no recompute */
    eli_context_reset(c);
    CHECK(!eli_decode(c, seq, 60, NULL, 0, &err), "decode 60");
    eli_context_checkpoint(c);
    CHECK(!eli_decode(c, seq + 60, 36, NULL, 0, &err), "decode to 96");
    CHECK(eli_context_resume(c, 50) == -1, "50 needs 35..49: the checkpoint's ring holds 40..59 only");
    CHECK(eli_context_resume(c, 57) == 57, "resume 57 straight from the checkpoint at 60");
    CHECK(kv->ckpt[0].pos == -1, "the checkpoint at 60 is gone after a resume below it");
    CHECK(!eli_decode(c, seq + 57, 10, la, 1, &err), "continue at 57");
    eli_context_reset(f);
    CHECK(!eli_decode(f, seq, 57, NULL, 0, &err) && !eli_decode(f, seq + 57, 10, lb, 1, &err), "fresh 57");
    CHECK(bits_equal(la, lb, (size_t)10 * V), "checkpoint truncated to 57 == fresh");

    /* nothing usable: -1 and the cache unchanged */
    eli_context_reset(c);
    CHECK(!eli_decode(c, seq, 96, NULL, 0, &err), "decode 96");
    CHECK(eli_context_resume(c, 30) == -1 && eli_context_n_past(c) == 96, "no checkpoint: -1, unchanged");
    CHECK(eli_context_resume(c, 95) == 95, "a short rewind needs no checkpoint");

    /* a truncation below a checkpoint drops it; clear drops all */
    eli_context_reset(c);
    CHECK(!eli_decode(c, seq, 60, NULL, 0, &err), "decode 60");
    eli_context_checkpoint(c);
    CHECK(eli_context_truncate(c, 55) && kv->ckpt[0].pos == -1, "truncate below the checkpoint drops it");

    /* bounded: at most max checkpoints, the oldest replaced, memory counted and reused */
    eli_kv_set_max_checkpoints(kv, 2);
    eli_context_reset(c);
    for (int k = 1; k <= 4; k++) {
        CHECK(!eli_decode(c, seq + (k - 1) * 20, 20, NULL, 0, &err), "decode");
        eli_context_checkpoint(c);
    }
    CHECK(kv->ckpt_bytes == 2 * one, "two checkpoints' memory: %zu", kv->ckpt_bytes);
    CHECK((kv->ckpt[0].pos == 60 && kv->ckpt[1].pos == 80) || (kv->ckpt[0].pos == 80 && kv->ckpt[1].pos == 60),
          "the newest two are kept: %d %d", kv->ckpt[0].pos, kv->ckpt[1].pos);
    CHECK(eli_context_resume(c, 70) == 60, "the nearest usable one for 70 is 60 (80's ring starts at 60)");
    eli_kv_set_max_checkpoints(kv, 0);
    CHECK(kv->ckpt_bytes == 0 && kv->max_ckpt == 0, "max 0 frees them");
    eli_context_checkpoint(c);
    CHECK(kv->ckpt_bytes == 0, "and takes none");

    /* no rings (n_ubatch covers the context): checkpoints are never needed nor taken */
    eli_context_params q = p;
    q.n_ubatch = 512;
    eli_context *g = eli_context_create(m, &q, &err);
    CHECK(g && eli_kv_checkpoint_bytes(eli_context_kv_mut(g)) == 0, "no rings, no checkpoint bytes");
    eli_context_free(g);

    free(la), free(lb);
    eli_context_free(c);
    eli_context_free(f);
    eli_model_free(m);
}

/* eli_gen, ubatch 4: a chat whose third step regenerates the second reply (reset_keep to the end of the
 * second prompt, whose window the rings lost) continues exactly like a fresh prefill of the same tokens. */
static void test_gen_reset_keep(void) {
    int32_t seq[96];
    read_ids(eli_shared_path("golden/models/e2b-mini.tokens.txt"), seq, 96);
    eli_error err = {0};
    test_model t;
    CHECK(!test_model_load(eli_shared_path("golden/models/e2b-mini-f32.gguf"), 1, NULL, &t, &err), "load: %s", err.msg);
    if (!t.m) return;
    eli_gen_params p = eli_gen_default_params();
    p.seq.n_ctx = 256;
    p.seq.n_ubatch = 4;
    p.sampling.temperature = 0;
    p.max_tokens = 10;
    for (int n_ckpt = 0; n_ckpt <= 2; n_ckpt++) {
        p.seq.n_ckpt = n_ckpt;
        eli_gen *a = eli_gen_create(t.xm->exec, t.xm, t.tok, &p, &err), *b = eli_gen_create(t.xm->exec, t.xm, t.tok, &p, &err);
        CHECK(a && b, "create");
        if (!a || !b) break;
        int32_t out[16], ref[16];
        size_t n;
        CHECK(!eli_gen_prefill(a, seq, 40, NULL, &err), "turn 1 prompt");
        eli_gen_next(a, out, 16, &n, NULL, 0, NULL, NULL, NULL, &err);
        CHECK(n == 10, "turn 1 reply");
        CHECK(eli_gen_reset_keep(a, 50) == 50, "turn 2: keep everything");
        CHECK(!eli_gen_prefill(a, seq + 40, 40, NULL, &err), "turn 2 prompt");
        eli_gen_next(a, out, 16, &n, NULL, 0, NULL, NULL, NULL, &err);
        CHECK(n == 10 && eli_gen_n_committed(a) == 100, "turn 2 reply");
        int32_t hist[100];
        memcpy(hist, eli_gen_tokens(a), sizeof hist);
        CHECK(eli_gen_reset_keep(a, 90) == 90, "regenerate turn 2: keep 90");
        eli_gen_next(a, out, 16, &n, NULL, 0, NULL, NULL, NULL, &err);
        CHECK(!eli_gen_prefill(b, hist, 90, NULL, &err), "fresh prefill of the same 90");
        size_t nr;
        eli_gen_next(b, ref, 16, &nr, NULL, 0, NULL, NULL, NULL, &err);
        CHECK(n == 10 && nr == n && !memcmp(out, ref, n * sizeof *out), "checkpoints %d: after reset_keep == fresh", n_ckpt);
        CHECK(!memcmp(out, hist + 90, n * sizeof *out), "and == the original reply (greedy)");
        eli_gen_free(a);
        eli_gen_free(b);
    }
    test_model_free(&t);
}

/* Resident pages of p[0..n) (mincore over the pages it spans), -1 on error. */
static long resident_pages(const void *p, size_t n) {
    const uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
    const uintptr_t lo = (uintptr_t)p & ~(pg - 1), hi = ((uintptr_t)p + n + pg - 1) & ~(pg - 1);
    unsigned char *v = malloc((hi - lo) / pg);
    long r = -1;
    if (v && !mincore((void *)lo, hi - lo, v)) {
        r = 0;
        for (size_t i = 0; i < (hi - lo) / pg; i++) r += v[i] & 1;
    }
    free(v);
    return r;
}

/* eli_context_params.reserve: every page of the KV cache and of the window checkpoints is resident right
 * after creation (so RSS cannot grow with the conversation), and ELIZA_LLM_RESERVE is validated. */
static void test_reserve(void) {
    eli_error err = {0};
    eli_model *m = eli_model_load(eli_shared_path("golden/models/e2b-mini-f32.gguf"), &err);
    CHECK(m != NULL, "load: %s", err.msg);
    if (!m) return;
    eli_context_params p = eli_context_default_params();
    p.n_ctx = 4096;
    p.n_ubatch = 64;
    p.reserve = 1;
    eli_context *c = eli_context_create(m, &p, &err);
    CHECK(c != NULL, "reserved context: %s", err.msg);
    if (c) {
        const eli_kv_cache *kv = eli_context_kv_mut(c);
        const long pg = sysconf(_SC_PAGESIZE);
        long want = 0, got = 0;
        for (int il = 0; il < kv->n_layer; il++) {
            const eli_kv_layer *l = &kv->layers[il];
            if (!l->k) continue;
            const size_t kb = (size_t)l->n_cells * l->row_bytes_k, vb = (size_t)l->n_cells * l->row_bytes_v;
            want += (long)(kb / (size_t)pg) + (long)(vb / (size_t)pg);
            got += resident_pages(l->k, kb) + resident_pages(l->v, vb);
        }
        const size_t one = eli_kv_checkpoint_bytes(kv);
        for (int i = 0; i < kv->max_ckpt && one; i++) {
            want += (long)(one / (size_t)pg);
            got += kv->ckpt[i].data ? resident_pages(kv->ckpt[i].data, one) : 0;
        }
        CHECK(want > 100 && got >= want, "reserved: %ld of %ld KV + checkpoint pages resident", got, want);
    }
    eli_context_free(c);
    static const int bad[] = {2, -1};
    for (size_t i = 0; i < 2; i++) {
        p.reserve = bad[i];
        c = eli_context_create(m, &p, &err);
        CHECK(!c && strstr(err.msg, "reserve"), "reserve %d refused: %s", bad[i], err.msg);
        eli_context_free(c);
    }
    p.reserve = 0;
    c = eli_context_create(m, &p, &err);
    CHECK(c && eli_context_kv_mut(c)->ckpt_bytes == 0, "reserve 0: lazy (%s)", c ? "ok" : err.msg);
    eli_context_free(c);
    eli_model_free(m);
}

int main(void) {
    test_reserve();
    test_layout();
    test_checkpoints();
    test_gen_reset_keep();
    TEST_MAIN_END();
}
