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

#define MAX_STAGES 8

struct eli_sampler {
    eli_sampler_params p;
    int32_t n_vocab;
    uint64_t rng[4];
    eli_sampler_stage stages[MAX_STAGES];
    int n_stages;
    float *work;  /* the logits the stages adjust, n_vocab entries (allocated with the first stage) */
    cand *c;      /* scratch, n_vocab entries */
    double *prob; /* scratch, n_vocab entries: final probabilities of c[0..m) */
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

/* ---- the penalties stage: a ring of the last repeat_last_n tokens of the context ---- */

typedef struct {
    float repeat, frequency, presence;
    int32_t n_vocab;
    size_t cap;           /* repeat_last_n */
    size_t len, pos;      /* tokens held, next slot */
    int32_t *hist;        /* cap entries */
    int32_t *sorted;      /* scratch for counting */
} penalties;

static int cmp_i32(const void *x, const void *y) {
    int32_t a = *(const int32_t *)x, b = *(const int32_t *)y;
    return (a > b) - (a < b);
}

/* Once per distinct token in the history (llama.cpp's penalties sampler). */
static int penalties_apply(void *self, float *logits, int32_t n_vocab, eli_error *err) {
    (void)n_vocab, (void)err;
    penalties *pe = self;
    if (!pe->len) return ELI_OK;
    memcpy(pe->sorted, pe->hist, pe->len * sizeof *pe->hist);
    qsort(pe->sorted, pe->len, sizeof *pe->sorted, cmp_i32);
    for (size_t i = 0; i < pe->len;) {
        size_t j = i;
        while (j < pe->len && pe->sorted[j] == pe->sorted[i]) j++;
        float *l = &logits[pe->sorted[i]];
        if (*l <= 0) *l *= pe->repeat;
        else *l /= pe->repeat;
        *l -= (float)(j - i) * pe->frequency + pe->presence;
        i = j;
    }
    return ELI_OK;
}

static int penalties_accept(void *self, int32_t token, int generated, eli_error *err) {
    (void)generated, (void)err;
    penalties *pe = self;
    if (token < 0 || token >= pe->n_vocab) return ELI_OK;
    pe->hist[pe->pos] = token;
    pe->pos = (pe->pos + 1) % pe->cap;
    if (pe->len < pe->cap) pe->len++;
    return ELI_OK;
}

static void penalties_reset(void *self) {
    penalties *pe = self;
    pe->len = pe->pos = 0;
}

static size_t penalties_state_size(const void *self) {
    const penalties *pe = self;
    return 2 * sizeof(uint64_t) + pe->cap * sizeof(int32_t);
}

static void penalties_save(const void *self, void *buf) {
    const penalties *pe = self;
    const uint64_t head[2] = {pe->len, pe->pos};
    memcpy(buf, head, sizeof head);
    memcpy((char *)buf + sizeof head, pe->hist, pe->cap * sizeof *pe->hist);
}

static int penalties_load(void *self, const void *buf, size_t n, eli_error *err) {
    penalties *pe = self;
    uint64_t head[2];
    if (n != penalties_state_size(self))
        return eli_fail(err, ELI_ERR_INVALID_ARG, "penalties state of %zu bytes, expected %zu", n, penalties_state_size(self));
    memcpy(head, buf, sizeof head);
    const int32_t *h = (const int32_t *)(const void *)((const char *)buf + sizeof head);
    if (head[0] > pe->cap || head[1] >= pe->cap || (head[0] < pe->cap && head[1] != head[0]))
        return eli_fail(err, ELI_ERR_INVALID_ARG, "penalties state: %llu tokens at slot %llu of %zu",
                        (unsigned long long)head[0], (unsigned long long)head[1], pe->cap);
    for (size_t i = 0; i < head[0]; i++) {
        int32_t t;
        memcpy(&t, h + i, sizeof t);
        if (t < 0 || t >= pe->n_vocab)
            return eli_fail(err, ELI_ERR_INVALID_ARG, "penalties state: token %d outside the vocabulary", t);
    }
    pe->len = head[0], pe->pos = head[1];
    memcpy(pe->hist, h, pe->cap * sizeof *pe->hist);
    return ELI_OK;
}

static void penalties_free(void *self) {
    penalties *pe = self;
    if (!pe) return;
    free(pe->hist);
    free(pe->sorted);
    free(pe);
}

/* The penalties stage for these parameters, or ELI_OK with none added when they are all neutral. */
static int add_penalties(eli_sampler *s, eli_error *err) {
    const eli_sampler_params *p = &s->p;
    if (!p->repeat_last_n || (p->repeat_penalty == 1.0f && p->frequency_penalty == 0.0f && p->presence_penalty == 0.0f))
        return ELI_OK;
    penalties *pe = calloc(1, sizeof *pe);
    if (pe) {
        pe->repeat = p->repeat_penalty, pe->frequency = p->frequency_penalty, pe->presence = p->presence_penalty;
        pe->n_vocab = s->n_vocab;
        pe->cap = (size_t)p->repeat_last_n;
        pe->hist = calloc(pe->cap, sizeof *pe->hist);
        pe->sorted = malloc(pe->cap * sizeof *pe->sorted);
    }
    const eli_sampler_stage st = {.name = "penalties", .self = pe, .apply = penalties_apply, .accept = penalties_accept,
                                  .reset = penalties_reset, .state_size = penalties_state_size, .save = penalties_save,
                                  .load = penalties_load, .free = penalties_free};
    if (!pe || !pe->hist || !pe->sorted) {
        penalties_free(pe);
        return eli_fail(err, ELI_ERR_OOM, "sampler: out of memory");
    }
    return eli_sampler_add_stage(s, &st, err);
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
    s->c = malloc((size_t)n_vocab * sizeof *s->c);
    s->prob = malloc((size_t)n_vocab * sizeof *s->prob);
    int rc = !s->c || !s->prob ? eli_fail(err, ELI_ERR_OOM, "sampler: out of memory") : add_penalties(s, err);
    if (rc) {
        eli_sampler_free(s);
        return rc;
    }
    eli_sampler_reset(s);
    *out = s;
    return ELI_OK;
}

int eli_sampler_add_stage(eli_sampler *s, const eli_sampler_stage *stage, eli_error *err) {
    int rc = ELI_OK;
    if (s->n_stages == MAX_STAGES) rc = eli_fail(err, ELI_ERR_INVALID_ARG, "sampler: more than %d stages", MAX_STAGES);
    else if (stage->mask_only && !stage->allows)
        rc = eli_fail(err, ELI_ERR_INVALID_ARG, "sampler: mask-only stage '%s' has no allows check", stage->name);
    else if (!s->work && !(s->work = malloc((size_t)s->n_vocab * sizeof *s->work)))
        rc = eli_fail(err, ELI_ERR_OOM, "sampler: out of memory");
    if (rc) {
        if (stage->free) stage->free(stage->self);
        return rc;
    }
    s->stages[s->n_stages++] = *stage;
    return ELI_OK;
}

void eli_sampler_free(eli_sampler *s) {
    if (!s) return;
    for (int i = 0; i < s->n_stages; i++)
        if (s->stages[i].free) s->stages[i].free(s->stages[i].self);
    free(s->work);
    free(s->c);
    free(s->prob);
    free(s);
}

void eli_sampler_reset(eli_sampler *s) {
    if (!s) return;
    for (int i = 0; i < s->n_stages; i++)
        if (s->stages[i].reset) s->stages[i].reset(s->stages[i].self);
    rng_seed(s->rng, s->p.seed);
}

void eli_sampler_new_generation(eli_sampler *s) {
    for (int i = 0; i < s->n_stages; i++)
        if (s->stages[i].mask_only && s->stages[i].reset) s->stages[i].reset(s->stages[i].self);
}

void eli_sampler_reseed(eli_sampler *s, uint64_t seed) {
    if (!s) return;
    s->p.seed = seed;
    eli_sampler_reset(s);
}

static int follow(eli_sampler *s, int32_t token, int generated, eli_error *err) {
    if (token < 0 || token >= s->n_vocab) return ELI_OK;
    for (int i = 0; i < s->n_stages; i++) {
        const eli_sampler_stage *st = &s->stages[i];
        int rc = st->accept ? st->accept(st->self, token, generated, err) : ELI_OK;
        if (rc) return rc;
    }
    return ELI_OK;
}

int eli_sampler_accept(eli_sampler *s, int32_t token, eli_error *err) { return follow(s, token, 1, err); }

void eli_sampler_note(eli_sampler *s, int32_t token) { (void)follow(s, token, 0, NULL); }

int eli_sampler_allows(eli_sampler *s, int32_t token, eli_error *err) {
    for (int i = 0; i < s->n_stages; i++) {
        const eli_sampler_stage *st = &s->stages[i];
        if (!st->mask_only) continue;
        int ok = st->allows(st->self, token, err);
        if (ok <= 0) return ok;
    }
    return 1;
}

/* ---- drafting ---- */

static int drafts(const eli_sampler_stage *st) { return st->mark && st->rewind; }

void eli_sampler_draft_begin(eli_sampler *s) {
    for (int i = 0; i < s->n_stages; i++)
        if (drafts(&s->stages[i])) s->stages[i].mark(s->stages[i].self);
}

int32_t eli_sampler_draft_mask(eli_sampler *s, float *logits, eli_error *err) {
    int any = 0;
    for (int i = 0; i < s->n_stages; i++) {
        const eli_sampler_stage *st = &s->stages[i];
        if (!drafts(st)) continue;
        int rc = st->apply(st->self, logits, s->n_vocab, err);
        if (rc) return rc;
        any = 1;
    }
    if (!any) return s->n_vocab;
    int32_t left = 0;
    for (int32_t t = 0; t < s->n_vocab; t++) left += logits[t] != -INFINITY;
    return left;
}

int eli_sampler_draft_accept(eli_sampler *s, int32_t token, eli_error *err) {
    for (int i = 0; i < s->n_stages; i++) {
        const eli_sampler_stage *st = &s->stages[i];
        if (!drafts(st)) continue;
        int rc = st->accept(st->self, token, 1, err);
        if (rc) return rc;
    }
    return ELI_OK;
}

void eli_sampler_draft_end(eli_sampler *s) {
    for (int i = 0; i < s->n_stages; i++)
        if (drafts(&s->stages[i])) s->stages[i].rewind(s->stages[i].self);
}

/* ---- snapshots: the random stream, then per stage its name (u32 length + bytes), its state (u64 length
 * + bytes) ---- */

size_t eli_sampler_state_size(const eli_sampler *s) {
    size_t n = sizeof s->rng;
    for (int i = 0; i < s->n_stages; i++) {
        const eli_sampler_stage *st = &s->stages[i];
        n += sizeof(uint32_t) + strlen(st->name) + sizeof(uint64_t) + (st->state_size ? st->state_size(st->self) : 0);
    }
    return n;
}

void eli_sampler_save(const eli_sampler *s, void *buf) {
    uint8_t *p = buf;
    memcpy(p, s->rng, sizeof s->rng);
    p += sizeof s->rng;
    for (int i = 0; i < s->n_stages; i++) {
        const eli_sampler_stage *st = &s->stages[i];
        const uint32_t nl = (uint32_t)strlen(st->name);
        const uint64_t sz = st->state_size ? st->state_size(st->self) : 0;
        memcpy(p, &nl, sizeof nl), p += sizeof nl;
        memcpy(p, st->name, nl), p += nl;
        memcpy(p, &sz, sizeof sz), p += sizeof sz;
        if (sz) st->save(st->self, p), p += sz;
    }
}

/* Checks a snapshot's layout against the chain (names and sizes) without changing anything. */
static int check_snapshot(const eli_sampler *s, const uint8_t *p, size_t n, eli_error *err) {
    if (n < sizeof s->rng) return eli_fail(err, ELI_ERR_INVALID_ARG, "sampler state of %zu bytes is too short", n);
    size_t off = sizeof s->rng;
    for (int i = 0; i < s->n_stages; i++) {
        const eli_sampler_stage *st = &s->stages[i];
        uint32_t nl;
        uint64_t sz;
        if (n - off < sizeof nl) return eli_fail(err, ELI_ERR_INVALID_ARG, "sampler state truncated at stage %d", i);
        memcpy(&nl, p + off, sizeof nl), off += sizeof nl;
        if (nl != strlen(st->name) || n - off < (size_t)nl + sizeof sz || memcmp(p + off, st->name, nl))
            return eli_fail(err, ELI_ERR_INVALID_ARG, "sampler state: stage %d is not '%s'", i, st->name);
        off += nl;
        memcpy(&sz, p + off, sizeof sz), off += sizeof sz;
        /* the size is the stage's to check (a grammar's state grows and shrinks with its position) */
        if (sz > n - off || (sz && !st->load))
            return eli_fail(err, ELI_ERR_INVALID_ARG, "sampler state: stage '%s' has %llu bytes of %zu left", st->name,
                            (unsigned long long)sz, n - off);
        off += (size_t)sz;
    }
    if (off != n) return eli_fail(err, ELI_ERR_INVALID_ARG, "sampler state has %zu bytes more than the chain", n - off);
    return ELI_OK;
}

int eli_sampler_load(eli_sampler *s, const void *buf, size_t n, eli_error *err) {
    const uint8_t *p = buf;
    int rc = check_snapshot(s, p, n, err);
    if (rc) return rc;
    /* a stage may still refuse its bytes: the state as it was comes back then */
    const size_t have = eli_sampler_state_size(s);
    uint8_t *old = malloc(have);
    if (!old) return eli_fail(err, ELI_ERR_OOM, "sampler: out of memory");
    eli_sampler_save(s, old);
    size_t off = sizeof s->rng;
    for (int i = 0; i < s->n_stages && !rc; i++) {
        const eli_sampler_stage *st = &s->stages[i];
        uint32_t nl;
        uint64_t sz;
        memcpy(&nl, p + off, sizeof nl), off += sizeof nl + nl;
        memcpy(&sz, p + off, sizeof sz), off += sizeof sz;
        if (sz) rc = st->load(st->self, p + off, (size_t)sz, err);
        off += (size_t)sz;
    }
    if (rc) {
        off = sizeof s->rng;
        for (int i = 0; i < s->n_stages; i++) { /* the old bytes always load */
            const eli_sampler_stage *st = &s->stages[i];
            uint64_t sz;
            off += sizeof(uint32_t) + strlen(st->name);
            memcpy(&sz, old + off, sizeof sz), off += sizeof sz;
            if (sz) (void)st->load(st->self, old + off, (size_t)sz, NULL);
            off += (size_t)sz;
        }
    } else {
        memcpy(s->rng, p, sizeof s->rng);
    }
    free(old);
    return rc;
}

/* ---- the chain -------------------------------------------------------------------------------- */

/* Total order used everywhere: higher logit first, then lower id. It makes every selection and sort
 * reproducible regardless of the algorithm. */
static int better(const cand *a, const cand *b) { return a->logit > b->logit || (a->logit == b->logit && a->id < b->id); }

static int cmp_cand(const void *x, const void *y) {
    const cand *a = x, *b = y;
    return better(a, b) ? -1 : better(b, a) ? 1 : 0;
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

/* NaN can never win; +inf is clamped so that exp(l - max) stays defined. */
static float clamp_logit(float l) { return isnan(l) ? -INFINITY : l == INFINITY ? FLT_MAX : l; }

/* The logits the filters see: the stages' adjustments of a clamped copy (the input itself without
 * stages). */
static int staged(eli_sampler *s, const float *logits, const float **out, eli_error *err) {
    *out = logits;
    if (!s->n_stages) return ELI_OK;
    for (int32_t i = 0; i < s->n_vocab; i++) s->work[i] = clamp_logit(logits[i]);
    for (int i = 0; i < s->n_stages; i++) {
        const eli_sampler_stage *st = &s->stages[i];
        int rc = st->apply ? st->apply(st->self, s->work, s->n_vocab, err) : ELI_OK;
        if (rc) return rc;
    }
    *out = s->work;
    return ELI_OK;
}

/* Greedy through mask-only stages: the unmasked argmax, when they all let it through, is the masked one
 * too. 1 with *token set, 0 when a full pass is needed, negative on a stage error. */
static int greedy_unmasked(eli_sampler *s, const float *logits, int32_t *token, eli_error *err) {
    for (int i = 0; i < s->n_stages; i++)
        if (!s->stages[i].mask_only) return 0;
    int32_t best = 0;
    for (int32_t i = 1; i < s->n_vocab; i++) {
        const float a = clamp_logit(logits[i]), b = clamp_logit(logits[best]);
        if (a > b) best = i;
    }
    int ok = eli_sampler_allows(s, best, err);
    if (ok == 1) *token = best;
    return ok;
}

/* Runs the chain on logits; leaves the surviving candidates in s->c[0..m) with their final probabilities
 * in s->prob[0..m) and returns m >= 1. */
static size_t run_chain(eli_sampler *s, const float *logits) {
    const eli_sampler_params *p = &s->p;
    size_t n = (size_t)s->n_vocab;
    cand *c = s->c;
    for (size_t i = 0; i < n; i++) {
        c[i].id = (int32_t)i;
        c[i].logit = clamp_logit(logits[i]);
    }

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

int eli_sampler_sample(eli_sampler *s, const float *logits, int32_t *token, eli_error *err) {
    int rc = s->n_stages && s->p.temperature <= 0 ? greedy_unmasked(s, logits, token, err) : 0;
    if (rc) return rc < 0 ? rc : ELI_OK;
    const float *l;
    if ((rc = staged(s, logits, &l, err))) return rc;
    size_t m = run_chain(s, l);
    /* Greedy consumes no randomness; otherwise exactly one draw per call, even with one survivor, so the
     * random stream does not depend on how many tokens the filters kept. */
    *token = s->c[m - 1].id; /* u within rounding of 1 */
    if (s->p.temperature <= 0) {
        *token = s->c[0].id;
        return ELI_OK;
    }
    double u = rng_uniform(s->rng), cum = 0;
    for (size_t i = 0; i < m; i++) {
        cum += s->prob[i];
        if (u < cum) {
            *token = s->c[i].id;
            break;
        }
    }
    return ELI_OK;
}

int32_t eli_sampler_probs(eli_sampler *s, const float *logits, float *probs, eli_error *err) {
    const float *l;
    int rc = staged(s, logits, &l, err);
    if (rc) return rc;
    size_t m = run_chain(s, l);
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
