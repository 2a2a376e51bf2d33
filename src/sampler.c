/* Sampler chain; the semantics and the order are documented in sampler.h.
 *
 * Cost per token is O(n_vocab) plus O(n_vocab log k) for top-k, and a sort only of the tokens that can
 * still matter: with top-k, the k survivors; without it, the min-p survivors (top-p and min-p each keep
 * a prefix of the tokens sorted by logit, so the final set is the shorter prefix and the min-p filter can
 * run before the sort without changing the result, provided top-p's normalizer is computed first). */
#include "sampler.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define ELI_SAMPLER_MAX_HISTORY 65536

typedef struct {
    float logit;
    int32_t id;
} cand;

struct eli_sampler {
    eli_sampler_params p;
    int32_t n_vocab;
    uint64_t rng[4];
    /* penalty history: ring buffer of the last repeat_last_n accepted tokens */
    int32_t *hist;
    size_t hist_len, hist_pos;
    int32_t *hist_sorted; /* scratch for counting */
    cand *c;              /* scratch, n_vocab entries */
    double *prob;         /* scratch, n_vocab entries: final probabilities of c[0..m) */
};

/* ---- RNG: xoshiro256** (Blackman & Vigna), seeded through splitmix64 so that any 64-bit seed, zero
 * included, gives a well-mixed non-zero state. */

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t rng_next(uint64_t s[4]) {
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

/* Uniform in [0, 1) with 53 random bits. */
static double rng_uniform(uint64_t s[4]) { return (double)(rng_next(s) >> 11) * (1.0 / 9007199254740992.0); }

static void rng_seed(uint64_t s[4], uint64_t seed) {
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) s[i] = splitmix64(&x);
}

/* ---- parameters ------------------------------------------------------------------------------- */

eli_sampler_params eli_sampler_default_params(void) {
    eli_sampler_params p;
    memset(&p, 0, sizeof p);
    p.temperature = 0.8f;
    p.top_k = 40;
    p.top_p = 0.95f;
    p.min_p = 0.05f;
    p.repeat_penalty = 1.0f;
    p.frequency_penalty = 0.0f;
    p.presence_penalty = 0.0f;
    p.repeat_last_n = 64;
    p.seed = 0;
    return p;
}

int eli_sampler_create(const eli_sampler_params *params, int32_t n_vocab, eli_sampler **out, eli_error *err) {
    if (out) *out = NULL;
    if (!out) return eli_fail(err, ELI_ERR_INVALID_ARG, "sampler: NULL output pointer");
    eli_sampler_params p = params ? *params : eli_sampler_default_params();
    if (n_vocab <= 0) return eli_fail(err, ELI_ERR_INVALID_ARG, "sampler: n_vocab %d must be positive", (int)n_vocab);
    if (!isfinite(p.temperature)) return eli_fail(err, ELI_ERR_INVALID_ARG, "sampler: temperature is not finite");
    if (!(p.top_p >= 0)) return eli_fail(err, ELI_ERR_INVALID_ARG, "sampler: top_p %g must be >= 0", p.top_p);
    if (!(p.min_p >= 0 && p.min_p <= 1)) return eli_fail(err, ELI_ERR_INVALID_ARG, "sampler: min_p %g not in [0, 1]", p.min_p);
    if (!(p.repeat_penalty > 0) || !isfinite(p.repeat_penalty))
        return eli_fail(err, ELI_ERR_INVALID_ARG, "sampler: repeat_penalty %g must be > 0", p.repeat_penalty);
    if (!isfinite(p.frequency_penalty) || !isfinite(p.presence_penalty))
        return eli_fail(err, ELI_ERR_INVALID_ARG, "sampler: frequency/presence penalty is not finite");
    if (p.repeat_last_n < 0 || p.repeat_last_n > ELI_SAMPLER_MAX_HISTORY)
        return eli_fail(err, ELI_ERR_INVALID_ARG, "sampler: repeat_last_n %d not in [0, %d]", (int)p.repeat_last_n,
                        ELI_SAMPLER_MAX_HISTORY);
    eli_sampler *s = calloc(1, sizeof *s);
    if (!s) return eli_fail(err, ELI_ERR_OOM, "sampler: out of memory");
    s->p = p;
    s->n_vocab = n_vocab;
    size_t hist_cap = p.repeat_last_n ? (size_t)p.repeat_last_n : 1;
    s->hist = malloc(hist_cap * sizeof *s->hist);
    s->hist_sorted = malloc(hist_cap * sizeof *s->hist_sorted);
    s->c = malloc((size_t)n_vocab * sizeof *s->c);
    s->prob = malloc((size_t)n_vocab * sizeof *s->prob);
    if (!s->hist || !s->hist_sorted || !s->c || !s->prob) {
        eli_sampler_free(s);
        return eli_fail(err, ELI_ERR_OOM, "sampler: out of memory");
    }
    eli_sampler_reset(s);
    *out = s;
    return ELI_OK;
}

void eli_sampler_free(eli_sampler *s) {
    if (!s) return;
    free(s->hist);
    free(s->hist_sorted);
    free(s->c);
    free(s->prob);
    free(s);
}

void eli_sampler_reset(eli_sampler *s) {
    if (!s) return;
    s->hist_len = s->hist_pos = 0;
    rng_seed(s->rng, s->p.seed);
}

void eli_sampler_get_rng(const eli_sampler *s, uint64_t state[4]) { memcpy(state, s->rng, sizeof s->rng); }

void eli_sampler_set_rng(eli_sampler *s, const uint64_t state[4]) { memcpy(s->rng, state, sizeof s->rng); }

void eli_sampler_reseed(eli_sampler *s, uint64_t seed) {
    if (!s) return;
    s->p.seed = seed;
    eli_sampler_reset(s);
}

void eli_sampler_accept(eli_sampler *s, int32_t token) {
    if (!s || token < 0 || token >= s->n_vocab || !s->p.repeat_last_n) return;
    size_t cap = (size_t)s->p.repeat_last_n;
    s->hist[s->hist_pos] = token;
    s->hist_pos = (s->hist_pos + 1) % cap;
    if (s->hist_len < cap) s->hist_len++;
}

/* ---- the chain -------------------------------------------------------------------------------- */

/* Total order used everywhere: higher logit first, then lower id. It makes every selection and sort
 * reproducible regardless of the algorithm. */
static int better(const cand *a, const cand *b) { return a->logit > b->logit || (a->logit == b->logit && a->id < b->id); }

static int cmp_cand(const void *x, const void *y) {
    const cand *a = x, *b = y;
    return better(a, b) ? -1 : better(b, a) ? 1 : 0;
}

static int cmp_i32(const void *x, const void *y) {
    int32_t a = *(const int32_t *)x, b = *(const int32_t *)y;
    return (a > b) - (a < b);
}

/* Applies the penalties to c[] (still indexed by token id), once per distinct token in the history. */
static void apply_penalties(eli_sampler *s) {
    const eli_sampler_params *p = &s->p;
    if (!s->hist_len || (p->repeat_penalty == 1.0f && p->frequency_penalty == 0.0f && p->presence_penalty == 0.0f))
        return;
    memcpy(s->hist_sorted, s->hist, s->hist_len * sizeof *s->hist);
    qsort(s->hist_sorted, s->hist_len, sizeof *s->hist_sorted, cmp_i32);
    for (size_t i = 0; i < s->hist_len;) {
        size_t j = i;
        while (j < s->hist_len && s->hist_sorted[j] == s->hist_sorted[i]) j++;
        float *l = &s->c[s->hist_sorted[i]].logit;
        if (*l <= 0) *l *= p->repeat_penalty;
        else *l /= p->repeat_penalty;
        *l -= (float)(j - i) * p->frequency_penalty + p->presence_penalty;
        i = j;
    }
}

/* Moves the k best candidates of c[0..n) to c[0..k), sorted best first. A min-heap of the k best seen
 * so far (worst at the root) keeps this O(n log k). */
static void select_top_k(cand *c, size_t n, size_t k) {
    /* heap in c[0..k): parent of i is (i-1)/2; root is the worst */
    for (size_t i = 1; i < k; i++) { /* sift up */
        size_t j = i;
        while (j > 0 && better(&c[(j - 1) / 2], &c[j])) {
            cand t = c[j];
            c[j] = c[(j - 1) / 2];
            c[(j - 1) / 2] = t;
            j = (j - 1) / 2;
        }
    }
    for (size_t i = k; i < n; i++) {
        if (!better(&c[i], &c[0])) continue;
        c[0] = c[i];
        size_t j = 0; /* sift down */
        for (;;) {
            size_t l = 2 * j + 1, r = l + 1, w = j;
            if (l < k && better(&c[w], &c[l])) w = l;
            if (r < k && better(&c[w], &c[r])) w = r;
            if (w == j) break;
            cand t = c[j];
            c[j] = c[w];
            c[w] = t;
            j = w;
        }
    }
    qsort(c, k, sizeof *c, cmp_cand);
}

/* Runs the chain on logits; leaves the surviving candidates in s->c[0..m) with their final probabilities
 * in s->prob[0..m) and returns m >= 1. */
static size_t run_chain(eli_sampler *s, const float *logits) {
    const eli_sampler_params *p = &s->p;
    size_t n = (size_t)s->n_vocab;
    cand *c = s->c;
    for (size_t i = 0; i < n; i++) {
        c[i].id = (int32_t)i;
        /* NaN can never win; +inf is clamped so that exp(l - max) stays defined. */
        float l = logits[i];
        c[i].logit = isnan(l) ? -INFINITY : l == INFINITY ? FLT_MAX : l;
    }
    apply_penalties(s);

    size_t best = 0;
    for (size_t i = 1; i < n; i++)
        if (better(&c[i], &c[best])) best = i;
    /* Greedy, or nothing finite to sample from. */
    if (p->temperature <= 0 || c[best].logit == -INFINITY) {
        c[0] = c[best];
        s->prob[0] = 1.0;
        return 1;
    }
    double max = c[best].logit;

    size_t m = n;
    int sorted = 0;
    if (p->top_k > 0 && (size_t)p->top_k < n) {
        select_top_k(c, n, (size_t)p->top_k);
        m = (size_t)p->top_k;
        sorted = 1;
    }

    /* top-p's normalizer: the softmax (temperature 1) over what top-k left. */
    double z = 0;
    int use_top_p = p->top_p < 1.0f;
    if (use_top_p)
        for (size_t i = 0; i < m; i++) z += exp((double)c[i].logit - max);

    /* min-p: keep logit >= max + log(min_p), i.e. prob >= min_p * max prob. Order-preserving compaction;
     * the best token always survives. */
    if (p->min_p > 0) {
        double thr = log((double)p->min_p);
        size_t o = 0;
        for (size_t i = 0; i < m; i++)
            if ((double)c[i].logit - max >= thr) c[o++] = c[i];
        m = o;
    }

    if (use_top_p) {
        if (!sorted) {
            /* Sorting a whole vocabulary is slow (~50 ms for 262k entries). The top-p set is the shortest
             * sorted prefix reaching the mass, and {logit >= max - gap} is itself a prefix: once its mass
             * reaches top_p (with a margin for rounding), the top-p set lies inside it and only it needs
             * sorting. Widen the gap until that holds; the result is exact either way. */
            double need = (double)p->top_p * z * (1.0 + 1e-9);
            for (double gap = 8.0; gap <= 512.0; gap *= 2.0) {
                double mass = 0;
                size_t cnt = 0;
                for (size_t i = 0; i < m; i++)
                    if ((double)c[i].logit - max >= -gap) mass += exp((double)c[i].logit - max), cnt++;
                if (mass < need) continue;
                if (cnt < m) {
                    size_t o = 0;
                    for (size_t i = 0; i < m; i++)
                        if ((double)c[i].logit - max >= -gap) c[o++] = c[i];
                    m = o;
                }
                break;
            }
            qsort(c, m, sizeof *c, cmp_cand);
        }
        double cum = 0;
        for (size_t i = 0; i < m; i++) {
            cum += exp((double)c[i].logit - max) / z;
            if (cum >= p->top_p) {
                m = i + 1;
                break;
            }
        }
    }

    /* Temperature, then the softmax of the survivors. */
    double inv_t = 1.0 / p->temperature, sum = 0;
    for (size_t i = 0; i < m; i++) sum += s->prob[i] = exp(((double)c[i].logit - max) * inv_t);
    for (size_t i = 0; i < m; i++) s->prob[i] /= sum;
    return m;
}

int32_t eli_sampler_sample(eli_sampler *s, const float *logits) {
    size_t m = run_chain(s, logits);
    /* Greedy consumes no randomness; otherwise exactly one draw per call, even with one survivor, so the
     * random stream does not depend on how many tokens the filters kept. */
    if (s->p.temperature <= 0) return s->c[0].id;
    double u = rng_uniform(s->rng), cum = 0;
    for (size_t i = 0; i < m; i++) {
        cum += s->prob[i];
        if (u < cum) return s->c[i].id;
    }
    return s->c[m - 1].id; /* u within rounding of 1 */
}

int32_t eli_sampler_probs(eli_sampler *s, const float *logits, float *probs) {
    size_t m = run_chain(s, logits);
    memset(probs, 0, (size_t)s->n_vocab * sizeof *probs);
    for (size_t i = 0; i < m; i++) probs[s->c[i].id] = (float)s->prob[i];
    return (int32_t)m;
}

void eli_softmax(const float *logits, size_t n, float *probs) {
    if (!n) return;
    double max = -INFINITY;
    for (size_t i = 0; i < n; i++)
        if (!isnan(logits[i]) && logits[i] > max) max = logits[i];
    if (max == -INFINITY) {
        for (size_t i = 0; i < n; i++) probs[i] = 1.0f / (float)n;
        return;
    }
    double sum = 0;
    for (size_t i = 0; i < n; i++) sum += isnan(logits[i]) ? 0 : exp((double)logits[i] - max);
    for (size_t i = 0; i < n; i++) probs[i] = isnan(logits[i]) ? 0.0f : (float)(exp((double)logits[i] - max) / sum);
}
