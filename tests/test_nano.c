/* The embedded eliza-1-nano bundle (models/eliza-1-nano) against its independent PyTorch reference
 * (tools/train/gemma4_ref.py; data in tests/data/nano_ref.*, see tools/train/README.md):
 * - the text model's logits for a fixed 64-token sequence: mean KLD <= 1e-5 with an f32 KV cache;
 * - one draft round of the MTP drafter (3 steps at a constant position): mean KLD <= 1e-5;
 * - greedy generation with the drafter is identical to greedy without it, and so are rounds of a fixed
 *   window, which accept more than half the drafts;
 * - the bundle's manifest lists the files with their sizes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "drafter.h"
#include "engine.h"
#include "quants.h"
#include "sampler.h"
#include "speculative.h"
#include "test.h"
#include "test_kld.h"
#include "test_exec.h"

#define BUNDLE ELI_SOURCE_DIR "/models/eliza-1-nano"
#define DATA ELI_SOURCE_DIR "/tests/data/"

static float *read_f32(const char *path, size_t n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    float *d = malloc(n * sizeof *d);
    size_t got = d ? fread(d, sizeof *d, n, f) : 0;
    fclose(f);
    if (got != n) free(d), d = NULL;
    return d;
}

int main(void) {
    eli_error err = {0};
    test_model tm, td;
    CHECK(!test_model_load(BUNDLE "/text/eliza-1-nano.gguf", 1, NULL, &tm, &err), "%s", err.msg);
    CHECK(tm.m && !test_model_load(BUNDLE "/mtp/drafter-nano.gguf", 0, tm.m, &td, &err), "%s", err.msg);
    if (!tm.m || !td.m) TEST_MAIN_END();
    const eli_model *m = tm.m, *d = td.m;
    const int V = m->hp.n_vocab;
    CHECK(m->hp.n_pl > 0 && m->hp.n_shared_kv > 0, "nano uses per-layer embeddings and KV sharing");

    /* the text model vs the reference */
    int32_t ids[64];
    FILE *f = fopen(DATA "nano_ref.tokens.txt", "r");
    int n = 0;
    long x;
    while (f && n < 64 && fscanf(f, "%ld", &x) == 1) ids[n++] = (int32_t)x;
    if (f) fclose(f);
    CHECK(n == 64, "tokens: %d", n);
    float *want = read_f32(DATA "nano_ref.logits.f32", (size_t)64 * V);
    CHECK(want != NULL, "reference logits");
    eli_context_params cp = eli_context_default_params();
    cp.n_ctx = 128;
    cp.kv_type_k = cp.kv_type_v = ELI_TYPE_F32;
    eli_context *c = eli_context_create(m, &cp, &err);
    float *got = malloc(sizeof(float) * (size_t)64 * V);
    CHECK(c && eli_decode(c, ids, 64, got, 1, &err) == ELI_OK, "%s", err.msg);
    if (want) {
        double k = test_mean_kld(want, got, 64, V, NULL);
        printf("nano text model vs PyTorch reference: mean KLD %.3g\n", k);
        CHECK(k <= 1e-5, "mean KLD %.3g > 1e-5", k);
    }

    /* one draft round vs the reference: target holds 0..31; id_last = ids[32] at position 32 */
    /* nano_ref.draft.txt: "# ..." comment lines, then "n_ctx N", "id_last T", "n_draft K", "drafted d1 .. dK" */
    int32_t round[4] = {-1, -1, -1, -1};
    n = 0;
    f = fopen(DATA "nano_ref.draft.txt", "r");
    char line[512];
    while (f && fgets(line, sizeof line, f)) {
        long a, b, c2;
        if (sscanf(line, "id_last %ld", &a) == 1) round[0] = (int32_t)a, n++;
        if (sscanf(line, "drafted %ld %ld %ld", &a, &b, &c2) == 3) round[1] = (int32_t)a, round[2] = (int32_t)b, round[3] = (int32_t)c2, n += 3;
    }
    if (f) fclose(f);
    float *dwant = read_f32(DATA "nano_ref.draft.logits.f32", (size_t)3 * V);
    CHECK(dwant != NULL, "reference draft logits");
    if (dwant && n == 4) {
        eli_context_reset(c);
        const int E = m->hp.n_embd;
        float *h = malloc(sizeof(float) * (size_t)E), *h2 = malloc(sizeof(float) * (size_t)E);
        float *dl = malloc(sizeof(float) * (size_t)3 * V);
        eli_outputs o = {NULL, h, 0};
        CHECK(eli_decode_ex(c, ids, 32, &o, &err) == ELI_OK, "%s", err.msg);
        eli_drafter *dr = eli_drafter_create(d, m, cp.n_ctx, &err);
        int32_t t = round[0];
        int same = 1;
        for (int s = 0; s < 3; s++) {
            CHECK(eli_drafter_step(dr, c, t, 32, h, dl + (size_t)s * V, h2, &err) == ELI_OK, "%s", err.msg);
            int best = 0;
            for (int j = 1; j < V; j++) best = dl[(size_t)s * V + j] > dl[(size_t)s * V + best] ? j : best;
            same &= best == round[s + 1];
            t = best;
            memcpy(h, h2, sizeof(float) * (size_t)E);
        }
        double k = test_mean_kld(dwant, dl, 3, V, NULL);
        printf("nano drafter round vs PyTorch reference: mean KLD %.3g, drafted ids %s\n", k, same ? "equal" : "DIFFER");
        CHECK(k <= 1e-5 && same, "draft KLD %.3g, ids %s", k, same ? "equal" : "differ");
        eli_drafter_free(dr);
        free(h), free(h2), free(dl);
    }

    /* greedy with the drafter == greedy without, and the drafter earns its keep */
    const eli_tokenizer *tok = tm.tok;
    int32_t a[128], b[128];
    int na = 0, nb = 0;
    int64_t drafted = 0, accepted = 0;
    for (int pass = 0; pass < 2 && tok; pass++) {
        eli_gen_params p = eli_gen_default_params();
        p.seq.n_ctx = 256;
        p.sampling.temperature = 0;
        p.max_tokens = 96;
        if (pass) p.draft = td.xm, p.draft_min = 1, p.draft_max = 6;
        eli_gen *g = eli_gen_create(tm.xm->exec, tm.xm, tok, &p, &err);
        CHECK(g && eli_gen_prefill(g, ids, 64, NULL, &err) == ELI_OK, "%s", err.msg);
        int32_t *out = pass ? b : a, step[16];
        int *cnt = pass ? &nb : &na;
        for (int r = 0; r == 0 && g;) {
            size_t k;
            r = eli_gen_next(g, step, 8, &k, NULL, 0, NULL, NULL, NULL, &err);
            for (size_t i = 0; i < k && *cnt < 128; i++) out[(*cnt)++] = step[i];
        }
        if (pass && g) drafted = eli_gen_spec_stats(g).drafted, accepted = eli_gen_spec_stats(g).accepted;
        eli_gen_free(g);
    }
    printf("nano greedy with MTP: %d tokens, %lld drafted, %lld accepted\n", nb, (long long)drafted, (long long)accepted);
    CHECK(na == nb && na > 0 && !memcmp(a, b, sizeof(int32_t) * (size_t)na), "greedy with MTP == without (%d vs %d)", na, nb);
    CHECK(drafted == 0 || accepted > 0, "drafts accepted (%lld / %lld)", (long long)accepted, (long long)drafted);

    /* the drafter earns its keep: rounds of a fixed window (the engine's window and pauses follow the
     * measured speed, which varies) accept more than half the drafts and give the same tokens */
    {
        eli_seq_params rp = eli_seq_default();
        rp.n_ctx = 256;
        eli_xseq *rctx = eli_seq_create(tm.xm->exec, tm.xm, &rp, &err);
        eli_spec *s = rctx ? eli_spec_create(td.xm, rctx, 1, 2, 0.0f, 0, &err) : NULL;
        eli_sampler_params sp = eli_sampler_default_params();
        sp.temperature = 0;
        eli_sampler *smp = NULL;
        CHECK(s && eli_sampler_create(&sp, V, &smp, &err) == ELI_OK, "%s", err.msg);
        float *lg = malloc(sizeof(float) * (size_t)V), *h = malloc(sizeof(float) * (size_t)m->hp.n_embd);
        const eli_outputs o = {lg, h, 0};
        int32_t seq[140];
        int nr = 0;
        long rd = 0, ra = 0;
        if (s && smp && eli_seq_decode_tokens(rctx, ids, 64, &o, &err) == ELI_OK) {
            int32_t last = 0;
            for (int32_t i = 1; i < V; i++) last = lg[i] > lg[last] ? i : last;
            eli_sampler_accept(smp, last, NULL);
            seq[nr++] = last;
            while (nr < na) {
                int32_t out[8];
                int k, dr, ac;
                if (eli_spec_round(s, rctx, smp, last, h, 2, out, &k, &dr, &ac, &err)) break;
                for (int i = 0; i < k; i++) seq[nr++] = out[i];
                last = out[k - 1];
                rd += dr, ra += ac;
            }
        }
        printf("nano greedy rounds of 2 drafts: %d tokens, %ld drafted, %ld accepted\n", nr, rd, ra);
        CHECK(nr >= na && !memcmp(seq, a, sizeof(int32_t) * (size_t)na), "fixed-window rounds == plain greedy");
        CHECK(ra * 2 > rd, "the nano drafter's greedy acceptance is above 50%% (%ld / %ld)", ra, rd);
        free(lg), free(h);
        eli_sampler_free(smp);
        eli_spec_free(s);
        eli_seq_free(rctx);
    }

    /* the manifest names both files with their sizes */
    f = fopen(BUNDLE "/eliza-1.manifest.json", "rb");
    CHECK(f != NULL, "manifest");
    if (f) {
        char buf[1 << 16];
        size_t len = fread(buf, 1, sizeof buf - 1, f);
        buf[len] = '\0';
        fclose(f);
        struct stat st;
        char size[64];
        stat(BUNDLE "/text/eliza-1-nano.gguf", &st);
        snprintf(size, sizeof size, "%lld", (long long)st.st_size);
        CHECK(strstr(buf, "eliza-1-nano.gguf") && strstr(buf, "drafter-nano.gguf") && strstr(buf, "sha256") && strstr(buf, size),
              "manifest lists the files, their sha256 and sizes");
    }
    free(want), free(got), free(dwant);
    eli_context_free(c);
    test_model_free(&td);
    test_model_free(&tm);
    TEST_MAIN_END();
}
