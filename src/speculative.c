/* MTP speculative decoding: draft, verify in one batch, accept, roll back; see speculative.h. */
#include "speculative.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PAUSE_MAX 256   /* longest pause, in tokens */
#define SPEED_SAMPLES 4 /* plain steps measured before the first round, rounds before their costs count (greedy) */
/* plain steps of a new stream that are not measured (greedy): the first decode steps after a prefill run
 * up to twice as slow as the later ones (eliza-1-nano, 2026-12-02: 0.64, 0.56, 0.51, 0.39, then 0.32 ms)
 * while the weights come back into the caches, and counting them made rounds look cheap against them */
#define WARMUP 4
#define PROBE_EVERY 256 /* tokens committed by rounds between two re-measurements of plain steps (greedy) */
#define DECAY 0.9       /* weight of the acceptance counts per round: the rate follows the text */
#define COST_RING 9     /* measured costs: the median of the last COST_RING samples counts (greedy) */
/* The costs of a draft step and of each verified token after the first, relative to a plain step, that
 * sampling (temperature > 0) assumes instead of measuring them, so that its window never depends on
 * timing; measured on eliza-1-nano (2026-12-01: a plain step 0.68-0.72 ms, a draft step 0.17 ms, a verify
 * batch of 4 tokens 1.57 ms and of 7 2.73 ms, one thread). */
#define NOMINAL_DRAFT 0.25
#define NOMINAL_TOKEN 0.45

/* The last COST_RING samples of a cost; their median is what counts, so that one preempted step (or one
 * lucky one, e.g. a verify batch that had the second core to itself) moves nothing. */
typedef struct {
    double v[COST_RING];
    int n, next;
} eli_cost;

static void cost_add(eli_cost *c, double sample) {
    c->v[c->next] = sample;
    c->next = (c->next + 1) % COST_RING;
    if (c->n < COST_RING) c->n++;
}

static double cost_median(const eli_cost *c) {
    double v[COST_RING];
    for (int i = 0; i < c->n; i++) { /* insertion sort */
        int j = i;
        for (; j > 0 && v[j - 1] > c->v[i]; j--) v[j] = v[j - 1];
        v[j] = c->v[i];
    }
    return v[(c->n - 1) / 2];
}

struct eli_spec {
    const eli_model *tm;
    eli_xdraft *drafter;
    int draft_min, draft_max, window;
    float temperature;
    uint64_t seed, rng;
    int pause, pause_len; /* tokens left in the pause; the next pause */
    /* acceptance: decayed counts of accepted and rejected drafts (their ratio estimates the chance that
     * a draft is accepted after its predecessors were) */
    double n_acc, n_rej;
    /* greedy only, measured (seconds): a plain step, a draft step, and what a verify batch costs per token
     * beyond the first; plain steps since the last probe, rounds measured */
    eli_cost t_plain, t_draft, t_token;
    int n_plain, n_rounds, since_probe, warmup; /* warmup: plain steps left to skip before measuring */
    eli_spec_stats stats;
    /* scratch */
    int32_t *batch;          /* [draft_max + 1] */
    float *q;                /* drafter distributions [draft_max][V] (sampling only) */
    float *dlogits, *h, *h2; /* [V], [E_target] x2 */
    float *logits, *hidden;  /* verify outputs [draft_max + 1][V], [draft_max + 1][E_target] */
    float *p;                /* [V] */
};

/* splitmix64: a small, well-mixed generator for the acceptance draws */
static double uniform01(eli_spec *s) {
    uint64_t z = (s->rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (double)(z >> 11) * (1.0 / 9007199254740992.0);
}

/* Index drawn from weights w[n] (not necessarily normalized; all >= 0, sum > 0). */
static int32_t draw(eli_spec *s, const float *w, int32_t n) {
    double total = 0;
    for (int32_t i = 0; i < n; i++) total += w[i];
    double u = uniform01(s) * total, acc = 0;
    int32_t last = 0;
    for (int32_t i = 0; i < n; i++) {
        if (w[i] <= 0) continue;
        acc += w[i];
        last = i;
        if (u < acc) return i;
    }
    return last;
}

static int32_t argmax(const float *x, int32_t n) {
    int32_t b = 0;
    for (int32_t i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

void eli_spec_free(eli_spec *s) {
    if (!s) return;
    eli_draft_free(s->drafter);
    free(s->batch), free(s->q), free(s->dlogits), free(s->h), free(s->h2), free(s->logits), free(s->hidden), free(s->p);
    free(s);
}

eli_spec *eli_spec_create(eli_xmodel *draft, eli_xseq *target, int draft_min, int draft_max, float temperature,
                          uint64_t seed, eli_error *err) {
    if (draft_min < 1 || draft_max < draft_min || draft_max > 64) {
        eli_fail(err, ELI_ERR_INVALID_ARG, "draft window [%d, %d] must satisfy 1 <= draft_min <= draft_max <= 64", draft_min,
                 draft_max);
        return NULL;
    }
    eli_spec *s = calloc(1, sizeof *s);
    if (!s) {
        eli_fail(err, ELI_ERR_OOM, "out of memory");
        return NULL;
    }
    s->tm = target->xm->model;
    s->draft_min = draft_min;
    s->draft_max = draft_max;
    s->temperature = temperature;
    s->seed = seed;
    const size_t V = (size_t)s->tm->hp.n_vocab, E = (size_t)s->tm->hp.n_embd, W = (size_t)draft_max;
    if (!(s->drafter = eli_draft_create(draft, target, err))) goto fail;
    s->batch = malloc((W + 1) * sizeof *s->batch);
    s->q = temperature > 0 ? malloc(W * V * sizeof *s->q) : NULL;
    s->dlogits = malloc(V * sizeof(float));
    s->h = malloc(E * sizeof(float));
    s->h2 = malloc(E * sizeof(float));
    s->logits = malloc((W + 1) * V * sizeof(float));
    s->hidden = malloc((W + 1) * E * sizeof(float));
    s->p = malloc(V * sizeof(float));
    if (!s->batch || (temperature > 0 && !s->q) || !s->dlogits || !s->h || !s->h2 || !s->logits || !s->hidden || !s->p) {
        eli_fail(err, ELI_ERR_OOM, "out of memory for speculative decoding");
        goto fail;
    }
    eli_spec_reset(s);
    return s;
fail:
    eli_spec_free(s);
    return NULL;
}

void eli_spec_reset(eli_spec *s) {
    s->window = s->draft_min;
    s->pause = 0;
    s->pause_len = 8;
    /* an optimistic prior worth two drafts (3 in 4 accepted), so that MTP is tried; the real counts
     * outweigh it within a few rounds */
    s->n_acc = 1.5;
    s->n_rej = 0.5;
    memset(&s->t_plain, 0, sizeof s->t_plain);
    memset(&s->t_draft, 0, sizeof s->t_draft);
    memset(&s->t_token, 0, sizeof s->t_token);
    s->n_plain = s->n_rounds = s->since_probe = 0;
    s->warmup = WARMUP;
    s->rng = s->seed ^ 0x6D7470ull; /* "mtp" */
    s->stats.window = s->window;
}

eli_spec_stats eli_spec_get_stats(const eli_spec *s) { return s->stats; }

static int greedy(const eli_spec *s) { return !(s->temperature > 0); }

int eli_spec_window(eli_spec *s, int64_t max_tokens) {
    if (s->pause > 0) {
        s->pause--;
        return 0;
    }
    /* greedy: a few plain steps first, and again now and then, so the costs compare with a plain step */
    if (greedy(s)) {
        if (s->n_plain < SPEED_SAMPLES) return 0;
        if (s->since_probe >= PROBE_EVERY) {
            s->since_probe = 0;
            s->n_plain = 0;
            return 0;
        }
    }
    int64_t w = s->window;
    if (w > max_tokens - 1) w = max_tokens - 1; /* a round returns up to w + 1 tokens */
    return w > 0 ? (int)w : 0;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Only greedy decoding uses timing (its output does not depend on the window). */
void eli_spec_note_plain(eli_spec *s, double seconds) {
    if (!greedy(s)) return;
    if (s->warmup > 0) {
        s->warmup--;
        return;
    }
    cost_add(&s->t_plain, seconds);
    if (s->n_plain < 1000) s->n_plain++;
}

/* Chooses the next window: the w in [draft_min, draft_max] with the most tokens per unit of time, a round
 * of w drafts yielding 1 + a + a^2 + .. + a^w tokens on average (a: the acceptance rate) for the cost of
 * w draft steps and a verify batch of w + 1 tokens (a plain step plus w verified tokens), and pauses
 * drafting (for a growing number of tokens) when even that is slower than plain steps. Greedy uses the
 * measured costs; sampling the nominal ones, so that its decisions depend on the sampled tokens only and
 * a seed gives the same sequence in every run. */
static void adapt(eli_spec *s) {
    const double a = s->n_acc / (s->n_acc + s->n_rej);
    double draft = NOMINAL_DRAFT, token = NOMINAL_TOKEN;
    /* a few rounds are measured before their costs replace the nominal ones: one sample is mostly noise */
    const double plain = s->t_plain.n ? cost_median(&s->t_plain) : 0;
    const int measured = greedy(s) && s->n_rounds >= SPEED_SAMPLES && plain > 0;
    if (measured) {
        draft = cost_median(&s->t_draft) / plain;
        token = cost_median(&s->t_token) / plain;
    }
    double best = 0, yield = 1, ak = 1;
    int best_w = s->draft_min;
    for (int w = 1; w <= s->draft_max; w++) {
        ak *= a;
        yield += ak;
        const double speed = yield / (1.0 + w * (draft + token)); /* relative to plain steps */
        if (w >= s->draft_min && speed > best) best = speed, best_w = w;
    }
    s->window = best_w;
    s->stats.window = best_w;
    if (best < 1.0 && (measured || !greedy(s))) {
        s->pause = s->pause_len;
        s->pause_len = s->pause_len * 2 < PAUSE_MAX ? s->pause_len * 2 : PAUSE_MAX;
    } else {
        s->pause_len = 8;
    }
}

int eli_spec_round(eli_spec *s, eli_xseq *target, eli_sampler *smp, int32_t id_last, float *h_last, int w, int32_t *out,
                   int *n_out, int *drafted, int *accepted, eli_error *err) {
    const int32_t V = s->tm->hp.n_vocab;
    const size_t E = (size_t)s->tm->hp.n_embd;
    const int32_t P = (int32_t)eli_seq_n_past(target);
    const int greedy = !(s->temperature > 0);
    int rc = ELI_OK;
    *n_out = 0;
    *drafted = *accepted = 0;
    if (w < 1 || w > s->draft_max) return eli_fail(err, ELI_ERR_INVALID_ARG, "draft window %d out of range", w);
    const double t0 = now_s();

    /* draft: every step at position P, fed with the previous step's hidden state; the sampler's drafting
     * stages (a grammar) mask each step as if the drafts before it were accepted, and the window ends where
     * they leave nothing */
    s->batch[0] = id_last;
    memcpy(s->h, h_last, E * sizeof(float));
    eli_sampler_draft_begin(smp);
    for (int i = 0; i < w; i++) {
        if ((rc = eli_draft_step(s->drafter, target, s->batch[i], P, s->h, s->dlogits, s->h2, err))) break;
        const int32_t left = eli_sampler_draft_mask(smp, s->dlogits, err);
        if (left <= 0) {
            rc = left;
            w = i;
            break;
        }
        if (greedy) {
            s->batch[i + 1] = argmax(s->dlogits, V);
        } else {
            float *q = s->q + (size_t)i * V;
            for (int32_t j = 0; j < V; j++) s->dlogits[j] /= s->temperature;
            eli_softmax(s->dlogits, (size_t)V, q);
            s->batch[i + 1] = draw(s, q, V);
        }
        if (i + 1 < w && (rc = eli_sampler_draft_accept(smp, s->batch[i + 1], err))) break;
        float *t = s->h;
        s->h = s->h2;
        s->h2 = t;
    }
    eli_sampler_draft_end(smp);
    if (rc) return rc;

    /* verify [id_last, d_1 .. d_w] in one target pass */
    const double t1 = now_s();
    const eli_outputs o = {s->logits, s->hidden, 1};
    if ((rc = eli_seq_decode_tokens(target, s->batch, w + 1, &o, err))) return rc;

    /* accept drafts while the target agrees; then one token from the target (greedy: the target's token
     * straight from the sampler, without its distribution over the vocabulary) */
    int a = 0;
    for (; a <= w; a++) {
        int32_t best = -1;
        if (greedy) rc = eli_sampler_sample(smp, s->logits + (size_t)a * V, &best, err);
        else rc = eli_sampler_probs(smp, s->logits + (size_t)a * V, s->p, err) < 0;
        if (rc) return rc < 0 ? rc : err ? err->code : ELI_ERR_INVALID_ARG;
        if (a == w) { /* every draft accepted: the bonus token */
            out[(*n_out)++] = greedy ? best : draw(s, s->p, V);
            break;
        }
        const int32_t d = s->batch[a + 1];
        int ok;
        if (greedy) {
            ok = best == d;
        } else {
            const float *q = s->q + (size_t)a * V;
            ok = q[d] > 0 && uniform01(s) < (double)s->p[d] / q[d];
        }
        if (ok) {
            out[(*n_out)++] = d;
            if ((rc = eli_sampler_accept(smp, d, err))) return rc;
            continue;
        }
        /* rejected: the target's token, from the residual distribution max(0, p - q) when sampling */
        if (greedy) {
            out[(*n_out)++] = best;
        } else {
            const float *q = s->q + (size_t)a * V;
            double mass = 0;
            for (int32_t j = 0; j < V; j++) {
                s->p[j] = s->p[j] > q[j] ? s->p[j] - q[j] : 0.0f;
                mass += s->p[j];
            }
            if (!(mass > 0) && (rc = eli_sampler_probs(smp, s->logits + (size_t)a * V, s->p, err)) < 0) return rc;
            out[(*n_out)++] = draw(s, s->p, V);
        }
        break;
    }
    if ((rc = eli_sampler_accept(smp, out[*n_out - 1], err))) return rc;

    /* keep id_last and the accepted drafts; drop the rejected positions everywhere */
    if (!eli_seq_truncate(target, P + a + 1))
        return eli_fail(err, ELI_ERR_INVALID_ARG, "cannot roll back the cache to %d positions", P + a + 1);
    memcpy(h_last, s->hidden + (size_t)a * E, E * sizeof(float));
    *drafted = w;
    *accepted = a;
    if (greedy && w > 0) { /* w is 0 when a grammar left the drafter nothing to draft */
        const double t2 = now_s();
        cost_add(&s->t_draft, (t1 - t0) / w);
        if (s->t_plain.n) {
            const double tok = (t2 - t1 - cost_median(&s->t_plain)) / w;
            cost_add(&s->t_token, tok > 0 ? tok : 0);
            if (s->n_rounds < 1000) s->n_rounds++;
        }
    }
    s->since_probe += *n_out;
    s->n_acc = DECAY * s->n_acc + a;
    s->n_rej = DECAY * s->n_rej + (a < w);
    s->stats.rounds++;
    s->stats.drafted += w;
    s->stats.accepted += a;
    adapt(s);
    return ELI_OK;
}

void eli_spec_get_resume(const eli_spec *s, eli_spec_resume *r) {
    r->rng = s->rng;
    r->window = s->window;
    r->pause = s->pause;
    r->pause_len = s->pause_len;
    r->n_acc = s->n_acc;
    r->n_rej = s->n_rej;
}

int eli_spec_resume_check(const eli_spec_resume *r, eli_error *err) {
    if (!(isfinite(r->n_acc) && isfinite(r->n_rej) && r->n_acc >= 0 && r->n_rej >= 0 && r->n_acc + r->n_rej > 0) ||
        r->pause < 0 || r->pause > PAUSE_MAX || r->pause_len < 1 || r->pause_len > PAUSE_MAX || r->window < 1 ||
        r->window > 64)
        return eli_fail(err, ELI_ERR_INVALID_ARG,
                        "MTP state out of range (window %d, pause %d / %d, acceptance counts %g / %g)", r->window,
                        r->pause, r->pause_len, r->n_acc, r->n_rej);
    return ELI_OK;
}

void eli_spec_set_resume(eli_spec *s, const eli_spec_resume *r) {
    s->rng = r->rng;
    s->window = r->window < s->draft_min ? s->draft_min : r->window > s->draft_max ? s->draft_max : r->window;
    s->stats.window = s->window;
    s->pause = r->pause;
    s->pause_len = r->pause_len;
    s->n_acc = r->n_acc;
    s->n_rej = r->n_rej;
}
