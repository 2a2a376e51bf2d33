/* MTP speculative decoding (speculative.c, drafter.c) on the golden e2b-mini target + assistant-mini drafter:
 * - greedy output with MTP is identical to greedy without, across the sliding-window boundary, with
 *   rejected drafts rolled back, and after reset_keep (a second turn);
 * - at temperature > 0, the distribution of the token a round commits equals the target's own sampling
 *   distribution (speculative rejection sampling), checked over many rounds with fixed seeds;
 * - at temperature > 0 a seed gives the same tokens in every run with MTP on (the window never depends
 *   on timing), on the golden pair and on eliza-1-nano, whose drafter is accepted (windows above 1);
 * - the greedy window policy: unmeasured warm-up steps, then measured ones, then pauses that grow while
 *   the drafter is not accepted;
 * - drafter/target mismatches are rejected with clear errors. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "drafter.h"
#include "engine.h"
#include "forward.h"
#include "gguf_writer.h"
#include "quants.h"
#include "speculative.h"
#include "test.h"
#include "test_exec.h"

/* Generates up to n tokens greedily (or sampled) after prompt; returns the count. */
static int generate(const test_model *t, eli_xmodel *draft, int draft_max, float temp, const int32_t *prompt,
                    int n_prompt, int n, int32_t *out, int64_t *accepted) {
    eli_gen_params p = eli_gen_default_params();
    p.seq.n_ctx = 512;
    p.seq.kv_type_k = p.seq.kv_type_v = ELI_TYPE_F32;
    p.max_tokens = n;
    p.sampling.temperature = temp;
    p.sampling.top_k = 0, p.sampling.top_p = 1, p.sampling.min_p = 0;
    p.draft = draft;
    p.draft_min = draft ? 1 : 0;
    p.draft_max = draft_max;
    eli_error err = {0};
    eli_gen *g = eli_gen_create(t->xm->exec, t->xm, t->tok, &p, &err);
    if (!g || eli_gen_prefill(g, prompt, (size_t)n_prompt, NULL, &err)) {
        fprintf(stderr, "gen: %s\n", err.msg);
        eli_gen_free(g);
        return -1;
    }
    int got = 0;
    for (;;) {
        int32_t step[80];
        size_t k;
        int r = eli_gen_next(g, step, 80, &k, NULL, 0, NULL, NULL, NULL, &err);
        for (size_t i = 0; i < k && got < n; i++) out[got++] = step[i];
        if (r != 0) break;
    }
    if (accepted) *accepted = eli_gen_spec_stats(g).accepted;
    eli_gen_free(g);
    return got;
}

static void test_greedy_identical(const test_model *t, eli_xmodel *d, const int32_t *seq) {
    int32_t a[120], b[120];
    for (int dm = 1; dm <= 6; dm += 5) {
        int na = generate(t, NULL, 0, 0, seq, 20, 100, a, NULL);
        int64_t acc = 0;
        int nb = generate(t, d, dm, 0, seq, 20, 100, b, &acc);
        CHECK(na == 100 && nb == 100 && !memcmp(a, b, sizeof(int32_t) * 100),
              "greedy with MTP (draft_max %d) == without: %d vs %d tokens", dm, na, nb);
    }
    /* a prompt longer than the window (16) and generation far past it */
    int na = generate(t, NULL, 0, 0, seq, 96, 60, a, NULL);
    int nb = generate(t, d, 4, 0, seq, 96, 60, b, NULL);
    CHECK(na == 60 && nb == 60 && !memcmp(a, b, sizeof(int32_t) * 60), "greedy MTP after a 96-token prompt");
}

static void test_reset_keep(const test_model *t, eli_xmodel *d, const int32_t *seq) {
    eli_gen_params p = eli_gen_default_params();
    p.seq.n_ctx = 512;
    p.sampling.temperature = 0;
    p.max_tokens = 30;
    p.draft = d, p.draft_min = 1, p.draft_max = 4;
    eli_error err = {0};
    eli_gen *g = eli_gen_create(t->xm->exec, t->xm, t->tok, &p, &err);
    CHECK(g != NULL, "%s", err.msg);
    if (!g) return;
    int32_t first[64], again[64], step[16];
    size_t k;
    int n1 = 0, n2 = 0;
    eli_gen_prefill(g, seq, 40, NULL, &err);
    for (int r = 0; r == 0;) {
        r = eli_gen_next(g, step, 8, &k, NULL, 0, NULL, NULL, NULL, &err);
        for (size_t i = 0; i < k; i++) first[n1++] = step[i];
    }
    /* second turn: keep the prompt, prefill nothing new but its last token, generate again */
    CHECK(eli_gen_reset_keep(g, 39) == 39, "reset_keep");
    eli_gen_prefill(g, seq + 39, 1, NULL, &err);
    for (int r = 0; r == 0;) {
        r = eli_gen_next(g, step, 8, &k, NULL, 0, NULL, NULL, NULL, &err);
        for (size_t i = 0; i < k; i++) again[n2++] = step[i];
    }
    CHECK(n1 == 30 && n2 == 30 && !memcmp(first, again, sizeof(int32_t) * 30), "MTP after reset_keep repeats itself");
    int32_t plain[64];
    CHECK(generate(t, NULL, 0, 0, seq, 40, 30, plain, NULL) == 30 && !memcmp(plain, first, sizeof(int32_t) * 30),
          "and equals greedy without MTP");
    eli_gen_free(g);
}

/* The greedy window policy, driven as the engine drives it, with a drafter the target never agrees with:
 * the first WARMUP (4) plain steps of a stream are not measured, SPEED_SAMPLES (4) more are, then rounds
 * start; once the rounds are measured, drafting pauses for 8, 16, 32, .. tokens, so a useless drafter
 * costs a few rounds in 200 tokens (without the pauses it would be a round per token). The plain steps are
 * noted with a fixed time: nothing here depends on how fast the machine is. */
static void test_window_policy(const test_model *t, eli_xmodel *d, const int32_t *seq) {
    const eli_model *m = t->m;
    eli_seq_params cp = eli_seq_default();
    cp.n_ctx = 320;
    cp.kv_type_k = cp.kv_type_v = ELI_TYPE_F32;
    eli_error err = {0};
    eli_xseq *c = eli_seq_create(t->xm->exec, t->xm, &cp, &err);
    eli_spec *s = c ? eli_spec_create(d, c, 1, 3, 0, 0, &err) : NULL;
    eli_sampler_params sp = eli_sampler_default_params();
    sp.temperature = 0;
    eli_sampler *smp = NULL;
    eli_sampler_create(&sp, m->hp.n_vocab, &smp, &err);
    float *logits = malloc(sizeof(float) * (size_t)m->hp.n_vocab), *h = malloc(sizeof(float) * (size_t)m->hp.n_embd);
    CHECK(c && s && smp && logits && h, "%s", err.msg);
    const eli_outputs o = {logits, h, 0};
    CHECK(eli_seq_decode_tokens(c, seq, 20, &o, &err) == ELI_OK, "%s", err.msg);
    int32_t last = -1;
    eli_sampler_sample(smp, logits, &last, NULL);
    int first_round = -1, rounds = 0, accepted = 0, n = 0;
    while (n < 200) {
        const int w = eli_spec_window(s, 200 - n);
        if (w > 0) {
            int32_t out[8];
            int k = 0, dr = 0, ac = 0;
            if (eli_spec_round(s, c, smp, last, h, w, out, &k, &dr, &ac, &err)) {
                CHECK(0, "round: %s", err.msg);
                break;
            }
            if (first_round < 0) first_round = n;
            rounds++, accepted += ac, n += k;
            last = out[k - 1];
        } else {
            eli_sampler_accept(smp, last, NULL);
            CHECK(eli_seq_decode_tokens(c, &last, 1, &o, &err) == ELI_OK, "%s", err.msg);
            eli_spec_note_plain(s, 1e-4);
            eli_sampler_sample(smp, logits, &last, NULL);
            n++;
        }
    }
    CHECK(accepted == 0, "the random drafter is never accepted (%d)", accepted);
    CHECK(first_round == 8, "rounds start after 4 unmeasured and 4 measured plain steps, not at token %d", first_round);
    CHECK(rounds >= 5 && rounds <= 12, "a drafter that is never accepted gets %d rounds in 200 tokens (5..12)", rounds);
    free(logits), free(h);
    eli_sampler_free(smp);
    eli_spec_free(s);
    eli_seq_free(c);
}

/* The token a round commits first is distributed as the target's sampling distribution at that position. */
static void test_distribution(const test_model *t, eli_xmodel *d, const int32_t *seq) {
    const eli_model *m = t->m;
    const int V = m->hp.n_vocab, P = 30, ROUNDS = 4000;
    const float temp = 1.0f;
    eli_seq_params cp = eli_seq_default();
    cp.n_ctx = 64;
    cp.kv_type_k = cp.kv_type_v = ELI_TYPE_F32;
    eli_error err = {0};
    eli_xseq *c = eli_seq_create(t->xm->exec, t->xm, &cp, &err);
    float *logits = malloc(sizeof(float) * (size_t)V), *want = malloc(sizeof(float) * (size_t)V);
    float *h0 = malloc(sizeof(float) * (size_t)m->hp.n_embd), *h = malloc(sizeof(float) * (size_t)m->hp.n_embd);
    double *count = calloc((size_t)V, sizeof *count);
    /* target state: P-1 positions in the cache, id_last = seq[P-1] pending, h0 = hidden at P-2 */
    eli_outputs o = {NULL, h0, 0};
    CHECK(eli_seq_decode_tokens(c, seq, P - 1, &o, &err) == ELI_OK, "%s", err.msg);
    /* the exact distribution: the target's logits after id_last, through the same sampler chain */
    eli_sampler_params sp = eli_sampler_default_params();
    sp.temperature = temp, sp.top_k = 0, sp.top_p = 1, sp.min_p = 0;
    eli_sampler *smp = NULL;
    eli_sampler_create(&sp, V, &smp, &err);
    const eli_outputs ol = {logits, NULL, 0};
    CHECK(eli_seq_decode_tokens(c, seq + P - 1, 1, &ol, &err) == ELI_OK, "%s", err.msg);
    eli_sampler_probs(smp, logits, want, NULL);
    eli_seq_truncate(c, P - 1);
    int64_t accepted = 0, drafted = 0;
    /* one speculative state for every round: its random stream runs on, so the rounds are independent */
    eli_spec *s = eli_spec_create(d, c, 1, 3, temp, 1000, &err);
    CHECK(s != NULL, "%s", err.msg);
    for (int r = 0; s && r < ROUNDS; r++) {
        eli_sampler_reset(smp);
        memcpy(h, h0, sizeof(float) * (size_t)m->hp.n_embd);
        int32_t out[8];
        int n = 0, dr = 0, ac = 0;
        int rc = eli_spec_round(s, c, smp, seq[P - 1], h, 3, out, &n, &dr, &ac, &err);
        if (rc) {
            CHECK(0, "round: %s", err.msg);
            break;
        }
        count[out[0]] += 1;
        drafted += dr, accepted += ac;
        eli_seq_truncate(c, P - 1);
    }
    eli_spec_free(s);
    /* total variation distance between the empirical and the exact distribution, against the TV that
     * exact draws of the same size show (simulated with fixed seeds, so nothing here can flake) */
    double tv = 0;
    for (int i = 0; i < V; i++) tv += fabs(count[i] / ROUNDS - want[i]);
    tv /= 2;
    double tv_exact = 0;
    for (int rep = 0; rep < 5; rep++) {
        uint64_t st = 77 + (uint64_t)rep;
        memset(count, 0, sizeof *count * (size_t)V);
        for (int r = 0; r < ROUNDS; r++) {
            uint64_t z = (st += 0x9E3779B97F4A7C15ull);
            z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
            z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
            double u = (double)((z ^ (z >> 31)) >> 11) / 9007199254740992.0, acc = 0;
            int i = 0;
            for (; i < V - 1; i++)
                if (u < (acc += want[i])) break;
            count[i] += 1;
        }
        double tv_rep = 0;
        for (int i = 0; i < V; i++) tv_rep += fabs(count[i] / ROUNDS - want[i]);
        if (tv_rep / 2 > tv_exact) tv_exact = tv_rep / 2;
    }
    const double bound = 1.15 * tv_exact + 0.005;
    printf("distribution: TV %.4f (exact sampling of the same size: up to %.4f; bound %.4f), drafts accepted %lld / %lld\n",
           tv, tv_exact, bound, (long long)accepted, (long long)drafted);
    CHECK(tv < bound, "speculative sampling distribution differs from the target's: TV %.4f >= %.4f", tv, bound);
    CHECK(accepted > 0 && accepted < drafted, "the test must exercise both acceptance and rejection (%lld / %lld)",
          (long long)accepted, (long long)drafted);
    eli_sampler_free(smp);
    eli_seq_free(c);
    free(logits), free(want), free(h0), free(h), free(count);
}

static void test_mismatch(const eli_model *target) {
    eli_error err = {0};
    eli_model *d = eli_model_load(eli_shared_path("golden/models/assistant-mini-f32.gguf"), &err);
    eli_model *other = eli_model_load(eli_shared_path("golden/models/dense-kv-mini-f32.gguf"), &err);
    CHECK(d && other, "%s", err.msg);
    if (!d || !other) return;
    CHECK(eli_model_bind_assistant(d, other, &err) < 0 && strstr(err.msg, "embedding_length_out"),
          "drafter for a 256-wide target on a 128-wide one: %s", err.msg);
    CHECK(eli_model_bind_assistant(other, target, &err) < 0 && strstr(err.msg, "assistant"), "a non-assistant drafter: %s", err.msg);
    CHECK(eli_model_bind_assistant(d, d, &err) < 0, "assistant as target");
    eli_model_free(d);
    eli_model_free(other);
}

/* assistant-mini plus a centroid-masked head: 16 clusters of 64 tokens (a fixed random permutation),
 * random centroids, top_k clusters kept. Written to a temporary file and loaded. */
static eli_model *masked_drafter(const eli_model *target, int top_k, char *path, size_t path_cap) {
    eli_error err = {0};
    eli_gguf_file *src = eli_gguf_open(eli_shared_path("golden/models/assistant-mini-f32.gguf"), &err);
    if (!src) return NULL;
    gw_file w;
    gw_init(&w);
    for (uint64_t i = 0; i < eli_gguf_n_kv(src); i++) {
        const eli_gguf_kv *kv = eli_gguf_kv_at(src, i);
        gw_value(gw_kv(&w, kv->key, kv->value.type), &kv->value);
    }
    gw_kv_u32(&w, "gemma4-assistant.centroid_intermediate_top_k", (uint32_t)top_k);
    for (uint64_t i = 0; i < eli_gguf_n_tensors(src); i++) {
        const eli_gguf_tensor *t = eli_gguf_tensor_at(src, i);
        uint64_t ne[4] = {(uint64_t)t->ne[0], (uint64_t)t->ne[1], (uint64_t)t->ne[2], (uint64_t)t->ne[3]};
        gw_tensor(&w, t->name, t->type, t->n_dims, ne, t->data, (size_t)t->nbytes);
    }
    enum { NC = 16, V = 1024, E = 64 };
    static float cent[NC * E];
    static int32_t ord[V];
    uint64_t st = 12345;
    for (int i = 0; i < NC * E; i++) {
        st = st * 6364136223846793005ull + 1442695040888963407ull;
        cent[i] = (float)((double)(st >> 11) / 9007199254740992.0 - 0.5);
    }
    for (int i = 0; i < V; i++) ord[i] = i;
    for (int i = V - 1; i > 0; i--) { /* Fisher-Yates */
        st = st * 6364136223846793005ull + 1442695040888963407ull;
        int j = (int)((st >> 33) % (uint64_t)(i + 1));
        int32_t x = ord[i];
        ord[i] = ord[j], ord[j] = x;
    }
    const uint64_t ne_c[2] = {E, NC}, ne_o[1] = {V};
    gw_tensor(&w, "masked_embd_centroids.weight", ELI_TYPE_F32, 2, ne_c, cent, sizeof cent);
    gw_tensor(&w, "masked_embd_ordering", ELI_TYPE_I32, 1, ne_o, ord, sizeof ord);
    size_t size;
    uint8_t *buf = gw_finish(&w, &size);
    gw_free(&w);
    eli_gguf_close(src);
    snprintf(path, path_cap, "/tmp/eli_masked_%d_%ld.gguf", top_k, (long)getpid());
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(buf, 1, size, f) != size) return NULL;
    fclose(f);
    free(buf);
    eli_model *d = eli_model_load(path, &err);
    if (d && eli_model_bind_assistant(d, target, &err)) eli_model_free(d), d = NULL;
    if (!d) fprintf(stderr, "masked drafter: %s\n", err.msg);
    return d;
}

/* The masked head scores exactly the tokens of the kept clusters, with the dense head's logits. */
static void test_masked_head(const test_model *t, const eli_model *dense, const int32_t *seq) {
    const eli_model *m = t->m;
    char path_all[256], path_4[256];
    eli_model *all = masked_drafter(m, 16, path_all, sizeof path_all), *four = masked_drafter(m, 4, path_4, sizeof path_4);
    CHECK(all && four, "masked drafters load");
    if (all && four) {
        CHECK(four->n_centroids == 16 && four->centroid_top_k == 4, "centroids %d top %d", four->n_centroids,
              four->centroid_top_k);
        eli_context_params cp = eli_context_default_params();
        cp.n_ctx = 64;
        eli_error err = {0};
        eli_context *c = eli_context_create(m, &cp, &err);
        float *h = malloc(sizeof(float) * 256), *h2 = malloc(sizeof(float) * 256);
        float *ld = malloc(sizeof(float) * 1024), *la = malloc(sizeof(float) * 1024), *l4 = malloc(sizeof(float) * 1024);
        eli_outputs o = {NULL, h, 0};
        eli_decode_ex(c, seq, 40, &o, &err);
        eli_drafter *dd = eli_drafter_create(dense, m, 64, &err), *da = eli_drafter_create(all, m, 64, &err),
                    *d4 = eli_drafter_create(four, m, 64, &err);
        CHECK(!eli_drafter_step(dd, c, seq[40], 40, h, ld, h2, &err), "%s", err.msg);
        CHECK(!eli_drafter_step(da, c, seq[40], 40, h, la, h2, &err), "%s", err.msg);
        CHECK(!eli_drafter_step(d4, c, seq[40], 40, h, l4, h2, &err), "%s", err.msg);
        CHECK(!memcmp(ld, la, sizeof(float) * 1024), "all clusters kept == the dense head, bit for bit");
        float lo = INFINITY;
        for (int i = 0; i < 1024; i++) lo = l4[i] < lo ? l4[i] : lo;
        int kept = 0, same = 0;
        for (int i = 0; i < 1024; i++)
            if (l4[i] != lo || ld[i] == lo + 1.0f) kept++, same += l4[i] == ld[i];
        CHECK(kept == 4 * 64 && same == kept, "top-4 clusters: %d tokens scored (want 256), %d equal to dense", kept, same);
        eli_drafter_free(dd), eli_drafter_free(da), eli_drafter_free(d4);
        eli_context_free(c);
        free(h), free(h2), free(ld), free(la), free(l4);
        /* speculative decoding with the masked drafter still gives the target's greedy output */
        int32_t a[64], b[64];
        const eli_exec_options opt = {NULL, 1};
        eli_xmodel *xfour = eli_exec_prepare(t->xm->exec, four, &opt, &err);
        CHECK(generate(t, NULL, 0, 0, seq, 20, 48, a, NULL) == 48 && generate(t, xfour, 4, 0, seq, 20, 48, b, NULL) == 48 &&
                  !memcmp(a, b, sizeof(int32_t) * 48),
              "greedy with the masked drafter == without MTP");
        eli_xmodel_release(xfour);
    }
    eli_model_free(all), eli_model_free(four);
    unlink(path_all), unlink(path_4);
}

/* Two runs with the same seed at temperature > 0 produce the same tokens, with drafts accepted when the
 * drafter is a real one (nano); the run is long enough for pauses and windows to change many times. */
static void test_sampled_deterministic(const test_model *t, eli_xmodel *d, const int32_t *prompt, int n_prompt,
                                       int min_accepted) {
    enum { N = 160 };
    int32_t a[N], b[N];
    int64_t acc_a = 0, acc_b = 0;
    const int na = generate(t, d, 4, 0.8f, prompt, n_prompt, N, a, &acc_a);
    const int nb = generate(t, d, 4, 0.8f, prompt, n_prompt, N, b, &acc_b);
    printf("sampled with MTP twice: %d / %d tokens, %lld / %lld drafts accepted\n", na, nb, (long long)acc_a,
           (long long)acc_b);
    CHECK(na > 0 && na == nb && !memcmp(a, b, sizeof(int32_t) * (size_t)na) && acc_a == acc_b,
          "same seed at temperature 0.8 with MTP: the same tokens in both runs");
    CHECK(acc_a >= min_accepted, "drafts accepted when sampling: %lld (want >= %d)", (long long)acc_a, min_accepted);
}

static void test_sampled_deterministic_nano(void) {
    eli_error err = {0};
    test_model t, d;
    CHECK(!test_model_load(ELI_SOURCE_DIR "/models/eliza-1-nano/text/eliza-1-nano.gguf", 1, NULL, &t, &err) &&
              !test_model_load(ELI_SOURCE_DIR "/models/eliza-1-nano/mtp/drafter-nano.gguf", 0, t.m, &d, &err),
          "nano bundle: %s", err.msg);
    if (t.m && d.m) {
        const char *text = "The quick brown fox jumps over the lazy dog. The quick brown fox";
        int32_t *ids = NULL;
        size_t n_ids = 0;
        CHECK(eli_tokenize(t.tok, text, strlen(text), 1, 0, &ids, &n_ids, &err) == ELI_OK && n_ids > 4, "tokenize");
        if (n_ids > 4) test_sampled_deterministic(&t, d.xm, ids, (int)n_ids, 1);
        free(ids);
    }
    test_model_free(&d);
    test_model_free(&t);
}

int main(void) {
    eli_error err = {0};
    test_model t, d;
    CHECK(!test_model_load(eli_shared_path("golden/models/e2b-mini-f32.gguf"), 1, NULL, &t, &err) &&
              !test_model_load(eli_shared_path("golden/models/assistant-mini-f32.gguf"), 0, t.m, &d, &err),
          "%s", err.msg);
    if (!t.m || !d.m) TEST_MAIN_END();
    CHECK(d.m->layers[0].kv_source == 1 && d.m->layers[1].kv_source == 2, "donor layers %d/%d (want 1/2, spec 6.4)",
          d.m->layers[0].kv_source, d.m->layers[1].kv_source);
    int32_t seq[96];
    CHECK(read_ids(eli_shared_path("golden/models/e2b-mini.tokens.txt"), seq, 96) == 96, "tokens");
    test_greedy_identical(&t, d.xm, seq);
    test_reset_keep(&t, d.xm, seq);
    test_distribution(&t, d.xm, seq);
    test_window_policy(&t, d.xm, seq);
    test_sampled_deterministic(&t, d.xm, seq, 20, 0);
    test_sampled_deterministic_nano();
    test_mismatch(t.m);
    test_masked_head(&t, d.m, seq);
    test_model_free(&d);
    test_model_free(&t);
    TEST_MAIN_END();
}
