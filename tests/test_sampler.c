/* Tests of the sampler chain (src/sampler.c). Every random test uses a fixed seed, so a statistical check
 * either always passes or always fails: it cannot flake. */
#include <math.h>

#include "sampler.h"
#include "test.h"

static eli_sampler_params plain(void) {
    /* Temperature 1, every filter and penalty off. */
    eli_sampler_params p = eli_sampler_default_params();
    p.temperature = 1.0f;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    return p;
}

/* One draw (the sampler's stages never fail in these tests). */
static int32_t draw(eli_sampler *s, const float *logits) {
    int32_t t = -1;
    eli_sampler_sample(s, logits, &t, NULL);
    return t;
}

static eli_sampler *make(const eli_sampler_params *p, int32_t n) {
    eli_sampler *s = NULL;
    eli_error err;
    eli_error_clear(&err);
    int rc = eli_sampler_create(p, n, &s, &err);
    CHECK(rc == ELI_OK && s, "create: %s", err.msg);
    return s;
}

/* A small test RNG independent of the sampler's. */
static uint64_t lcg_state = 12345;
static float frand(void) {
    lcg_state = lcg_state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((lcg_state >> 40) * (1.0 / 16777216.0));
}

static int32_t argmax(const float *x, int32_t n) {
    int32_t b = 0;
    for (int32_t i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

static void test_greedy_and_top_k_1(void) {
    enum { N = 1000 };
    static float logits[N];
    eli_sampler_params g = plain();
    g.temperature = 0.0f;
    eli_sampler_params k1 = plain();
    k1.top_k = 1;
    k1.temperature = 1.5f;
    eli_sampler *sg = make(&g, N), *sk = make(&k1, N);
    int ok_g = 1, ok_k = 1;
    for (int row = 0; row < 200; row++) {
        for (int i = 0; i < N; i++) logits[i] = frand() * 20.0f - 10.0f;
        int32_t want = argmax(logits, N);
        if (draw(sg, logits) != want) ok_g = 0;
        if (draw(sk, logits) != want) ok_k = 0;
    }
    CHECK(ok_g, "greedy picks the argmax");
    CHECK(ok_k, "top_k = 1 equals greedy at any temperature");
    /* Ties go to the lowest id; NaN never wins; +inf wins. */
    float tie[5] = {1.0f, 3.0f, NAN, 3.0f, -INFINITY};
    CHECK(draw(sg, (float[1000]){0}) == 0, "all equal -> id 0");
    eli_sampler_free(sg);
    sg = make(&g, 5);
    CHECK(draw(sg, tie) == 1, "tie -> lowest id");
    float inf[5] = {1.0f, INFINITY, 2.0f, 0.0f, 0.0f};
    CHECK(draw(sg, inf) == 1, "+inf wins");
    float probs[5];
    CHECK(eli_sampler_probs(sg, tie, probs, NULL) == 1 && probs[1] == 1.0f && probs[3] == 0.0f, "greedy probs one-hot");
    eli_sampler_free(sg);
    eli_sampler_free(sk);

    /* Sampling with temperature > 0 never returns a -inf token and copes with NaN. */
    eli_sampler_params t = plain();
    eli_sampler *st = make(&t, 5);
    int bad = 0;
    float mixed[5] = {-INFINITY, 0.0f, NAN, 0.5f, -INFINITY};
    for (int i = 0; i < 2000; i++) {
        int32_t tok = draw(st, mixed);
        if (tok != 1 && tok != 3) bad = 1;
    }
    CHECK(!bad, "only finite tokens drawn");
    float all_inf[5] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY};
    CHECK(draw(st, all_inf) == 0, "all -inf -> token 0");
    eli_sampler_free(st);
}

/* Upper 0.001 quantile of the chi-square distribution with df degrees of freedom (Wilson-Hilferty;
 * within 1% of the exact value for df >= 3, e.g. 20.7 vs 20.5 at df 5). */
static double chi_square_crit(int df) {
    double a = 2.0 / (9.0 * df), z = 3.0902; /* z: standard normal 0.999 quantile */
    double c = 1.0 - a + z * sqrt(a);
    return df * c * c * c;
}

/* Chi-square statistic of counts against probabilities. */
static double chi_square(const long *counts, const double *p, int n, long draws) {
    double chi = 0;
    for (int i = 0; i < n; i++) {
        double e = p[i] * (double)draws;
        if (e > 0) chi += (counts[i] - e) * (counts[i] - e) / e;
    }
    return chi;
}

static void test_temperature_distribution(void) {
    enum { N = 6, DRAWS = 200000 };
    const float logits[N] = {1.0f, 2.0f, 0.5f, -1.0f, 1.5f, 0.0f};
    const float temps[] = {1.0f, 0.7f, 1.8f};
    for (size_t t = 0; t < sizeof temps / sizeof temps[0]; t++) {
        eli_sampler_params p = plain();
        p.temperature = temps[t];
        p.seed = 42 + t;
        eli_sampler *s = make(&p, N);
        /* The expected distribution, computed here independently: softmax(logits / T). */
        double want[N], z = 0;
        for (int i = 0; i < N; i++) z += want[i] = exp(logits[i] / temps[t]);
        for (int i = 0; i < N; i++) want[i] /= z;
        float probs[N];
        CHECK(eli_sampler_probs(s, logits, probs, NULL) == N, "all tokens kept");
        double maxdiff = 0;
        for (int i = 0; i < N; i++) maxdiff = fmax(maxdiff, fabs(probs[i] - want[i]));
        CHECK(maxdiff < 1e-6, "probs() is softmax(l/T) at T=%g (max diff %g)", temps[t], maxdiff);
        long counts[N] = {0};
        for (long d = 0; d < DRAWS; d++) counts[draw(s, logits)]++;
        /* 5 degrees of freedom: a correct sampler exceeds the bound with probability 0.001, and the seed
         * is fixed, so this is decided once and for all. */
        double chi = chi_square(counts, want, N, DRAWS);
        CHECK(chi < chi_square_crit(N - 1), "temperature %g: chi-square %g", temps[t], chi);
        eli_sampler_free(s);
    }

    /* With filters on, the draws follow probs() (the filtered, renormalized distribution). */
    enum { V = 50 };
    float logits2[V];
    for (int i = 0; i < V; i++) logits2[i] = (float)((i * 37) % V) / 10.0f;
    eli_sampler_params p = eli_sampler_default_params(); /* top_k 40, top_p 0.95, min_p 0.05, T 0.8 */
    p.seed = 7;
    eli_sampler *s = make(&p, V);
    float probs[V];
    double want[V];
    int32_t kept = eli_sampler_probs(s, logits2, probs, NULL);
    double total = 0;
    for (int i = 0; i < V; i++) total += want[i] = probs[i];
    CHECK(kept > 1 && kept < V && fabs(total - 1.0) < 1e-6, "filtered distribution: %d kept, sum %g", kept, total);
    long counts[V] = {0};
    long bad = 0;
    for (long d = 0; d < DRAWS; d++) {
        int32_t tok = draw(s, logits2);
        counts[tok]++;
        if (probs[tok] == 0) bad++;
    }
    CHECK(bad == 0, "never draws a filtered token (%ld)", bad);
    double chi = chi_square(counts, want, V, DRAWS);
    CHECK(chi < chi_square_crit(kept - 1), "filtered chain chi-square %g (df %d)", chi, kept - 1);
    eli_sampler_free(s);
}

/* Sets logits at scattered ids to log(prob) for the given probabilities; the rest get -30 (about 1e-13
 * each, far from every threshold used below). Returns through ids[] where each probability went. */
static void scatter(float *logits, int32_t n, const double *p, int k, int32_t *ids) {
    for (int32_t i = 0; i < n; i++) logits[i] = -30.0f;
    for (int j = 0; j < k; j++) {
        ids[j] = (int32_t)((j * 7919 + 13) % n);
        logits[ids[j]] = (float)log(p[j]);
    }
}

/* Keeps the set of ids with non-zero probability under params and compares it with want_ids[0..nw). */
static void check_kept(const eli_sampler_params *p, const float *logits, int32_t n, const int32_t *want_ids, int nw,
                       const char *what) {
    eli_sampler *s = make(p, n);
    float *probs = malloc((size_t)n * sizeof *probs);
    int32_t kept = eli_sampler_probs(s, logits, probs, NULL);
    int ok = kept == nw;
    for (int j = 0; j < nw; j++) ok = ok && probs[want_ids[j]] > 0;
    CHECK(ok, "%s: kept %d, want %d", what, kept, nw);
    free(probs);
    eli_sampler_free(s);
}

static void test_filters(void) {
    enum { N = 1000 };
    static float logits[N];
    const double p4[4] = {0.5, 0.25, 0.15, 0.1};
    int32_t ids[4];
    scatter(logits, N, p4, 4, ids);

    eli_sampler_params p = plain();
    /* top-p keeps the shortest prefix reaching the mass: 0.5 | 0.75 | 0.9 | 1.0 */
    p.top_p = 0.4f;
    check_kept(&p, logits, N, ids, 1, "top_p 0.4");
    p.top_p = 0.7f;
    check_kept(&p, logits, N, ids, 2, "top_p 0.7");
    p.top_p = 0.8f;
    check_kept(&p, logits, N, ids, 3, "top_p 0.8");
    p.top_p = 0.95f;
    check_kept(&p, logits, N, ids, 4, "top_p 0.95");
    p.top_p = 0.0f;
    check_kept(&p, logits, N, ids, 1, "top_p 0 keeps one");

    /* min-p keeps prob >= min_p * 0.5 */
    p = plain();
    p.min_p = 0.25f; /* >= 0.125: three */
    check_kept(&p, logits, N, ids, 3, "min_p 0.25");
    p.min_p = 0.31f; /* >= 0.155: two */
    check_kept(&p, logits, N, ids, 2, "min_p 0.31");
    p.min_p = 1.0f;
    check_kept(&p, logits, N, ids, 1, "min_p 1");
    p.min_p = 0.1f; /* >= 0.05: the four, none of the -30 ones */
    check_kept(&p, logits, N, ids, 4, "min_p 0.1");

    /* top-k */
    p = plain();
    p.top_k = 3;
    check_kept(&p, logits, N, ids, 3, "top_k 3");
    p.top_k = N + 5;
    {
        eli_sampler *s = make(&p, N);
        float *probs = malloc(N * sizeof *probs);
        CHECK(eli_sampler_probs(s, logits, probs, NULL) == N, "top_k above n_vocab keeps all");
        free(probs);
        eli_sampler_free(s);
    }

    /* top-p renormalizes over what top-k kept: within the top 3 the masses are 0.556 | 0.833 | 1, so
     * top_p 0.8 keeps two (it keeps three without top-k, above). */
    p = plain();
    p.top_k = 3;
    p.top_p = 0.8f;
    check_kept(&p, logits, N, ids, 2, "top_k 3 + top_p 0.8");
    /* top-p and min-p together: the shorter of the two prefixes. */
    p = plain();
    p.top_p = 0.95f;
    p.min_p = 0.31f;
    check_kept(&p, logits, N, ids, 2, "top_p 0.95 + min_p 0.31");
    p.top_p = 0.4f;
    p.min_p = 0.1f;
    check_kept(&p, logits, N, ids, 1, "top_p 0.4 + min_p 0.1");

    /* Large random rows against a brute-force reference (sort everything, cut where the cumulative mass
     * reaches top_p, then cut below min_p * max), at several logit scales so the sampler's pruned sort is
     * exercised both when it can prune and when it cannot. */
    {
        enum { V = 5000 };
        static float row[V];
        static int32_t order[V];
        static float probs[V];
        const float scales[] = {0.5f, 3.0f, 12.0f};
        const float tps[] = {0.3f, 0.9f, 0.99f};
        const float mps[] = {0.0f, 0.02f};
        int all_ok = 1;
        for (size_t si = 0; si < 3; si++)
            for (size_t ti = 0; ti < 3; ti++)
                for (size_t mi = 0; mi < 2; mi++) {
                    for (int i = 0; i < V; i++) row[i] = frand() * scales[si];
                    for (int i = 0; i < V; i++) order[i] = i;
                    /* reference order: (logit desc, id asc), by insertion sort (fast enough for 5000) */
                    for (int i = 1; i < V; i++) {
                        int32_t x = order[i];
                        int j = i;
                        while (j > 0 && (row[order[j - 1]] < row[x] || (row[order[j - 1]] == row[x] && order[j - 1] > x))) {
                            order[j] = order[j - 1];
                            j--;
                        }
                        order[j] = x;
                    }
                    double mx = row[order[0]], z = 0;
                    for (int i = 0; i < V; i++) z += exp(row[i] - mx);
                    int keep = V;
                    double cum = 0;
                    for (int i = 0; i < V; i++) {
                        cum += exp(row[order[i]] - mx) / z;
                        if (cum >= tps[ti]) {
                            keep = i + 1;
                            break;
                        }
                    }
                    int keep_m = 0;
                    while (keep_m < keep && (mps[mi] == 0 || row[order[keep_m]] - mx >= log(mps[mi]))) keep_m++;
                    eli_sampler_params q = plain();
                    q.top_p = tps[ti];
                    q.min_p = mps[mi];
                    eli_sampler *s = make(&q, V);
                    int32_t kept = eli_sampler_probs(s, row, probs, NULL);
                    int ok = kept == keep_m;
                    for (int i = 0; i < keep_m && ok; i++) ok = probs[order[i]] > 0;
                    if (!ok) {
                        all_ok = 0;
                        fprintf(stderr, "scale %g top_p %g min_p %g: kept %d, reference %d\n", scales[si], tps[ti],
                                mps[mi], kept, keep_m);
                    }
                    eli_sampler_free(s);
                }
        CHECK(all_ok, "top-p/min-p match the brute-force reference");
    }

    /* Temperature does not change the set (it is applied after the filters), only the shape: at T = 2
     * the survivors of top_p 0.8 get probabilities proportional to sqrt(0.5), sqrt(0.25), sqrt(0.15). */
    p = plain();
    p.top_p = 0.8f;
    p.temperature = 2.0f;
    {
        eli_sampler *s = make(&p, N);
        float *probs = malloc(N * sizeof *probs);
        int32_t kept = eli_sampler_probs(s, logits, probs, NULL);
        double z = sqrt(0.5) + sqrt(0.25) + sqrt(0.15);
        CHECK(kept == 3 && fabs(probs[ids[0]] - sqrt(0.5) / z) < 1e-6 && fabs(probs[ids[2]] - sqrt(0.15) / z) < 1e-6,
              "temperature after filters: kept %d, p0 %g", kept, probs[ids[0]]);
        free(probs);
        eli_sampler_free(s);
    }
}

static void test_penalties(void) {
    enum { N = 4 };
    const float logits[N] = {2.0f, -1.0f, 0.5f, 0.0f};
    eli_sampler_params p = plain();
    p.repeat_penalty = 2.0f;
    eli_sampler *s = make(&p, N);
    float probs[N], want[N];

    /* No history: unchanged. */
    eli_sampler_probs(s, logits, probs, NULL);
    eli_softmax(logits, N, want);
    CHECK(fabs(probs[0] - want[0]) < 1e-6, "no history, no penalty");

    /* Positive logits are divided, negative (and zero) multiplied; a token repeated counts once. */
    eli_sampler_accept(s, 0, NULL);
    eli_sampler_accept(s, 1, NULL);
    eli_sampler_accept(s, 0, NULL);
    eli_sampler_accept(s, 3, NULL);
    eli_sampler_accept(s, -1, NULL);   /* ignored */
    eli_sampler_accept(s, 1000, NULL); /* ignored */
    const float penalized[N] = {1.0f, -2.0f, 0.5f, 0.0f};
    eli_sampler_probs(s, logits, probs, NULL);
    eli_softmax(penalized, N, want);
    double md = 0;
    for (int i = 0; i < N; i++) md = fmax(md, fabs(probs[i] - want[i]));
    CHECK(md < 1e-6, "repeat penalty 2: max diff %g", md);
    eli_sampler_free(s);

    /* The penalty flips a greedy choice. */
    p.temperature = 0;
    p.repeat_penalty = 1.5f;
    s = make(&p, 2);
    const float two[2] = {1.0f, 0.9f};
    CHECK(draw(s, two) == 0, "before accept");
    eli_sampler_accept(s, 0, NULL);
    CHECK(draw(s, two) == 1, "after accept: 1.0/1.5 < 0.9");
    eli_sampler_reset(s);
    CHECK(draw(s, two) == 0, "reset clears the history");
    eli_sampler_free(s);

    /* Window: only the last repeat_last_n tokens count (token 2 is filler that never wins). */
    p.repeat_last_n = 2;
    s = make(&p, 3);
    const float win[3] = {1.0f, 0.9f, -5.0f};
    eli_sampler_accept(s, 0, NULL);
    CHECK(draw(s, win) == 1, "window {0}: 0.667 < 0.9");
    eli_sampler_accept(s, 2, NULL);
    CHECK(draw(s, win) == 1, "window {0, 2}");
    eli_sampler_accept(s, 2, NULL);
    CHECK(draw(s, win) == 0, "window {2, 2}: 0 left");
    eli_sampler_free(s);

    /* Default window is 64. */
    p = plain();
    p.temperature = 0;
    p.repeat_penalty = 1.5f;
    CHECK(eli_sampler_default_params().repeat_last_n == 64, "default window 64");
    s = make(&p, 3);
    eli_sampler_accept(s, 0, NULL);
    for (int i = 0; i < 63; i++) eli_sampler_accept(s, 2, NULL);
    const float three[3] = {1.0f, 0.9f, -5.0f};
    CHECK(draw(s, three) == 1, "64th most recent still penalized");
    eli_sampler_accept(s, 2, NULL);
    CHECK(draw(s, three) == 0, "65th most recent not");
    eli_sampler_free(s);

    /* Frequency and presence penalties: logit -= count * freq + presence. */
    p = plain();
    p.frequency_penalty = 0.5f;
    p.presence_penalty = 0.25f;
    s = make(&p, N);
    eli_sampler_accept(s, 2, NULL);
    eli_sampler_accept(s, 2, NULL);
    eli_sampler_accept(s, 2, NULL);
    const float fp[N] = {2.0f, -1.0f, 0.5f - 1.5f - 0.25f, 0.0f};
    eli_sampler_probs(s, logits, probs, NULL);
    eli_softmax(fp, N, want);
    md = 0;
    for (int i = 0; i < N; i++) md = fmax(md, fabs(probs[i] - want[i]));
    CHECK(md < 1e-6, "frequency/presence: max diff %g", md);
    eli_sampler_free(s);

    /* repeat_last_n = 0 disables the history. */
    p = plain();
    p.temperature = 0;
    p.repeat_penalty = 100.0f;
    p.repeat_last_n = 0;
    s = make(&p, 2);
    eli_sampler_accept(s, 0, NULL);
    CHECK(draw(s, two) == 0, "no window, no penalty");
    eli_sampler_free(s);
}

static void test_determinism(void) {
    enum { N = 300, STEPS = 1000 };
    static float rows[8][N];
    for (int r = 0; r < 8; r++)
        for (int i = 0; i < N; i++) rows[r][i] = frand() * 6.0f;
    eli_sampler_params p = eli_sampler_default_params();
    p.top_k = 0;
    p.min_p = 0.0f;
    p.temperature = 1.2f;
    p.repeat_penalty = 1.1f;
    p.seed = 0xDEADBEEFCAFEull;
    eli_sampler *a = make(&p, N), *b = make(&p, N);
    p.seed++;
    eli_sampler *c = make(&p, N);
    static int32_t seq_a[STEPS];
    int same = 1, differs = 0;
    for (int t = 0; t < STEPS; t++) {
        int32_t x = draw(a, rows[t % 8]), y = draw(b, rows[t % 8]);
        int32_t z = draw(c, rows[t % 8]);
        seq_a[t] = x;
        same = same && x == y;
        differs = differs || x != z;
        eli_sampler_accept(a, x, NULL);
        eli_sampler_accept(b, y, NULL);
        eli_sampler_accept(c, z, NULL);
    }
    CHECK(same, "same seed, same sequence");
    CHECK(differs, "another seed, another sequence");
    /* reset replays the sequence from the start */
    eli_sampler_reset(a);
    int replay = 1;
    for (int t = 0; t < STEPS; t++) {
        int32_t x = draw(a, rows[t % 8]);
        replay = replay && x == seq_a[t];
        eli_sampler_accept(a, x, NULL);
    }
    CHECK(replay, "reset replays");
    /* reseed to c's seed and c's sequence follows */
    eli_sampler_reseed(a, p.seed);
    eli_sampler_reset(c);
    int follows = 1;
    for (int t = 0; t < 200; t++) {
        int32_t x = draw(a, rows[t % 8]), z = draw(c, rows[t % 8]);
        follows = follows && x == z;
    }
    CHECK(follows, "reseed");
    /* probs() consumes no randomness. */
    eli_sampler_reseed(a, 0xDEADBEEFCAFEull);
    eli_sampler_reset(b);
    static float scratch[N];
    eli_sampler_probs(a, rows[0], scratch, NULL);
    CHECK(draw(a, rows[1]) == draw(b, rows[1]), "probs does not advance the RNG");
    eli_sampler_free(a);
    eli_sampler_free(b);
    eli_sampler_free(c);

    /* Seed 0 works (splitmix64 seeding) and produces varied output. */
    p.seed = 0;
    a = make(&p, N);
    int distinct = 0;
    int32_t first = draw(a, rows[0]);
    for (int t = 0; t < 50; t++) distinct += draw(a, rows[0]) != first;
    CHECK(distinct > 0, "seed 0 is random");
    eli_sampler_free(a);
}

static void test_softmax_and_params(void) {
    float l[4] = {1000.0f, 1000.0f, -INFINITY, NAN}, pr[4];
    eli_softmax(l, 4, pr);
    CHECK(pr[0] == 0.5f && pr[1] == 0.5f && pr[2] == 0 && pr[3] == 0, "softmax large/inf/nan");
    float u[3] = {-INFINITY, -INFINITY, -INFINITY};
    eli_softmax(u, 3, pr);
    CHECK(fabsf(pr[0] - 1.0f / 3) < 1e-7f, "softmax all -inf uniform");

    eli_sampler_params d = eli_sampler_default_params();
    CHECK(d.temperature == 0.8f && d.top_k == 40 && d.top_p == 0.95f && d.min_p == 0.05f && d.repeat_penalty == 1.0f,
          "defaults");
    eli_sampler *s = NULL;
    eli_error err;
    eli_error_clear(&err);
    CHECK(eli_sampler_create(&d, 0, &s, &err) == ELI_ERR_INVALID_ARG && !s, "n_vocab 0");
    d.min_p = 2;
    CHECK(eli_sampler_create(&d, 10, &s, &err) == ELI_ERR_INVALID_ARG && strstr(err.msg, "min_p"), "min_p 2");
    d = eli_sampler_default_params();
    d.repeat_penalty = 0;
    CHECK(eli_sampler_create(&d, 10, &s, &err) == ELI_ERR_INVALID_ARG, "repeat_penalty 0");
    d = eli_sampler_default_params();
    d.repeat_last_n = -1;
    CHECK(eli_sampler_create(&d, 10, &s, &err) == ELI_ERR_INVALID_ARG, "repeat_last_n -1");
    d = eli_sampler_default_params();
    d.temperature = NAN;
    CHECK(eli_sampler_create(&d, 10, &s, &err) == ELI_ERR_INVALID_ARG, "temperature NaN");
    CHECK(eli_sampler_create(NULL, 10, &s, &err) == ELI_OK && s, "NULL params = defaults");
    eli_sampler_free(s);
    eli_sampler_free(NULL);

    /* A Gemma-sized vocabulary with the default chain. */
    enum { V = 262144 };
    float *big = malloc(V * sizeof *big);
    for (int i = 0; i < V; i++) big[i] = frand() * 30.0f;
    s = make(NULL, V);
    int ok = 1;
    for (int t = 0; t < 20; t++) {
        int32_t tok = draw(s, big);
        ok = ok && tok >= 0 && tok < V;
        eli_sampler_accept(s, tok, NULL);
    }
    CHECK(ok, "large vocabulary");
    eli_sampler_free(s);
    free(big);
}

/* A mask-only stage that allows tokens of one parity and counts what it sees; a limit of accepted tokens
 * makes it fail like a grammar at a resource limit. */
typedef struct {
    int parity, accepted, context, fail_after;
    int32_t last;
} parity_stage;

static int parity_apply(void *self, float *logits, int32_t n, eli_error *err) {
    parity_stage *p = self;
    if (p->fail_after && p->accepted >= p->fail_after) return eli_fail(err, ELI_ERR_INVALID_ARG, "parity: limit");
    for (int32_t i = 0; i < n; i++)
        if ((i & 1) != p->parity) logits[i] = -INFINITY;
    return ELI_OK;
}
static int parity_allows(void *self, int32_t t, eli_error *err) {
    parity_stage *p = self;
    if (p->fail_after && p->accepted >= p->fail_after) return eli_fail(err, ELI_ERR_INVALID_ARG, "parity: limit");
    return (t & 1) == p->parity;
}
static int parity_accept(void *self, int32_t t, int generated, eli_error *err) {
    parity_stage *p = self;
    if (!generated) return p->context++, ELI_OK;
    if ((t & 1) != p->parity) return eli_fail(err, ELI_ERR_INVALID_ARG, "parity: token %d refused", t);
    p->accepted++, p->last = t;
    return ELI_OK;
}
static void parity_reset(void *self) {
    parity_stage *p = self;
    p->accepted = p->context = 0, p->last = -1;
}
static size_t parity_size(const void *self) {
    (void)self;
    return 2 * sizeof(int32_t);
}
static void parity_save(const void *self, void *buf) {
    const parity_stage *p = self;
    const int32_t v[2] = {p->accepted, p->last};
    memcpy(buf, v, sizeof v);
}
static int parity_load(void *self, const void *buf, size_t n, eli_error *err) {
    parity_stage *p = self;
    int32_t v[2];
    memcpy(v, buf, sizeof v);
    if (n != sizeof v || v[0] < 0) return eli_fail(err, ELI_ERR_INVALID_ARG, "parity: bad state");
    p->accepted = v[0], p->last = v[1];
    return ELI_OK;
}

static eli_sampler_stage parity(parity_stage *p) {
    const eli_sampler_stage st = {.name = "parity", .self = p, .mask_only = 1, .apply = parity_apply, .allows = parity_allows,
                                  .accept = parity_accept, .reset = parity_reset, .state_size = parity_size,
                                  .save = parity_save, .load = parity_load};
    return st;
}

/* Stages: a mask-only stage narrows greedy and sampled draws alike (the greedy shortcut through allows()
 * gives the token the full mask gives), follows only generated tokens, refuses what it does not allow,
 * and its errors reach the caller; snapshots restore the whole state (random stream, penalties, stages)
 * and a snapshot of another chain is refused without changing anything. */
static void test_stages(void) {
    enum { N = 64 };
    float logits[N], masked[N], probs[N];
    eli_sampler_params g = plain();
    g.temperature = 0.0f;
    eli_sampler_params t = plain();
    t.top_k = 8;
    t.seed = 7;
    parity_stage pg = {1, 0, 0, 0, -1}, pt = {0, 0, 0, 0, -1}, pm = {1, 0, 0, 0, -1};
    eli_sampler *sg = make(&g, N), *st = make(&t, N), *sm = make(&g, N);
    eli_sampler_stage a = parity(&pg), b = parity(&pt), c = parity(&pm);
    c.mask_only = 0; /* the same stage without the shortcut: the full mask every time */
    CHECK(!eli_sampler_add_stage(sg, &a, NULL) && !eli_sampler_add_stage(st, &b, NULL) && !eli_sampler_add_stage(sm, &c, NULL),
          "add stages");
    int odd = 1, same = 1, even = 1;
    for (int row = 0; row < 300; row++) {
        for (int i = 0; i < N; i++) logits[i] = frand() * 10.0f;
        memcpy(masked, logits, sizeof masked);
        for (int i = 0; i < N; i += 2) masked[i] = -INFINITY;
        const int32_t x = draw(sg, logits), y = draw(sm, logits), z = draw(st, logits);
        odd &= x == argmax(masked, N);
        same &= x == y;
        even &= (z & 1) == 0;
        eli_sampler_accept(sg, x, NULL), eli_sampler_accept(sm, y, NULL), eli_sampler_accept(st, z, NULL);
    }
    CHECK(odd && same, "greedy through a mask-only stage: the masked argmax, shortcut or not");
    CHECK(even, "sampling draws only what the stage allows");
    CHECK(pg.accepted == 300 && pt.accepted == 300, "the stages followed every accepted token");
    eli_sampler_note(sg, 3);
    CHECK(pg.context == 1 && pg.accepted == 300, "context tokens reach the stage as context");
    eli_error err = {0};
    CHECK(eli_sampler_accept(sg, 4, &err) == ELI_ERR_INVALID_ARG && strstr(err.msg, "refused") && pg.accepted == 300,
          "a token the stage refuses: %s", err.msg);
    CHECK(eli_sampler_allows(sg, 5, NULL) == 1 && eli_sampler_allows(sg, 6, NULL) == 0, "allows");
    CHECK(eli_sampler_probs(st, logits, probs, NULL) >= 1, "probs");
    int odd_mass = 0;
    for (int i = 1; i < N; i += 2) odd_mass |= probs[i] != 0;
    CHECK(!odd_mass, "probs are zero where the stage masks");
    pg.fail_after = 300;
    int32_t tok = 99;
    CHECK(eli_sampler_sample(sg, logits, &tok, &err) == ELI_ERR_INVALID_ARG && strstr(err.msg, "limit") && tok == 99,
          "a stage error reaches the caller: %s", err.msg);
    CHECK(eli_sampler_probs(sg, logits, probs, &err) < 0, "... from probs too");
    pg.fail_after = 0;

    /* snapshots: penalties + a stage + the random stream */
    eli_sampler_params pp = plain();
    pp.repeat_penalty = 1.3f, pp.presence_penalty = 0.2f, pp.seed = 11;
    parity_stage ps = {0, 0, 0, 0, -1};
    eli_sampler *sp = make(&pp, N);
    eli_sampler_stage d = parity(&ps);
    eli_sampler_add_stage(sp, &d, NULL);
    for (int i = 0; i < 20; i++) {
        for (int j = 0; j < N; j++) logits[j] = frand() * 4.0f;
        eli_sampler_accept(sp, draw(sp, logits), NULL);
    }
    const size_t n = eli_sampler_state_size(sp);
    unsigned char *snap = malloc(n), *snap2 = malloc(n);
    eli_sampler_save(sp, snap);
    int32_t first[40], again[40];
    float rows[40][N];
    for (int i = 0; i < 40; i++) {
        for (int j = 0; j < N; j++) rows[i][j] = frand() * 4.0f;
        first[i] = draw(sp, rows[i]);
        eli_sampler_accept(sp, first[i], NULL);
    }
    CHECK(eli_sampler_load(sp, snap, n, &err) == ELI_OK, "load: %s", err.msg);
    for (int i = 0; i < 40; i++) {
        again[i] = draw(sp, rows[i]);
        eli_sampler_accept(sp, again[i], NULL);
    }
    CHECK(!memcmp(first, again, sizeof first), "a loaded snapshot continues exactly (random stream, penalties, stage)");
    eli_sampler_save(sp, snap2);
    memcpy(snap, snap2, n);
    snap[8 * 4 + 4] ^= 0xFF; /* the first stage's name */
    CHECK(eli_sampler_load(sp, snap, n, &err) == ELI_ERR_INVALID_ARG && strstr(err.msg, "penalties"),
          "another chain's snapshot: %s", err.msg);
    CHECK(eli_sampler_load(sp, snap2, n - 1, &err) == ELI_ERR_INVALID_ARG, "a truncated snapshot");
    memcpy(snap, snap2, n);
    const int32_t bad = -5;
    memcpy(snap + n - 8, &bad, sizeof bad); /* the parity stage's accepted count: its load refuses it */
    CHECK(eli_sampler_load(sp, snap, n, &err) == ELI_ERR_INVALID_ARG && strstr(err.msg, "parity"), "a stage refuses: %s",
          err.msg);
    unsigned char *now = malloc(n);
    eli_sampler_save(sp, now);
    CHECK(!memcmp(now, snap2, n), "a refused snapshot changes nothing");
    free(snap), free(snap2), free(now);
    eli_sampler_free(sp), eli_sampler_free(sg), eli_sampler_free(st), eli_sampler_free(sm);
}

int main(void) {
    test_stages();
    test_greedy_and_top_k_1();
    test_temperature_distribution();
    test_filters();
    test_penalties();
    test_determinism();
    test_softmax_and_params();
    TEST_MAIN_END();
}
