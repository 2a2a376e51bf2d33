/* The session over a fake executor, linked without any device (no kernels, no forward pass): the engine,
 * the sampler, speculative decoding, slot files and the batch plumbing must work through exec.h alone.
 *
 * The fake "model" counts: after token t comes t + 1 (mod the vocabulary), shown as a logit of 10 against
 * 0 for every other token; its hidden state is the position. Its drafter guesses right except at the
 * positions listed in wrong_at, where it proposes t + 2. Every decoded batch is recorded, so the test sees
 * what the session asked of the device. The registry's two entries are defined here, so exec.c's registry
 * holds the fake. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine.h"
#include "exec.h"
#include "slot.h"
#include "test.h"

enum { CAP = 512 };

typedef struct {
    eli_xseq base;
    eli_seq_params p;
    int32_t tokens[CAP]; /* the "cache": the token at every position < n_past */
    int64_t n_past;
    int64_t n_decodes, rows, embd_rows, bidir_spans, truncations, checkpoints;
} fake_seq;

typedef struct {
    eli_xdraft base;
    int64_t steps;
} fake_draft;

extern const eli_exec eli_exec_cpu, eli_exec_reference;
static fake_seq *last_seq;
static int wrong_at[8] = {-1, -1, -1, -1, -1, -1, -1, -1};

static int32_t n_vocab(const eli_xseq *s) { return s->xm->model->hp.n_vocab; }

static int always(void) { return 1; }
static const char *describe(const eli_xmodel *xm) {
    (void)xm;
    return "fake";
}

static eli_xmodel *prepare(eli_model *m, const eli_exec_options *o, eli_error *err) {
    (void)o;
    eli_xmodel *xm = calloc(1, sizeof *xm);
    if (!xm) return eli_fail(err, ELI_ERR_OOM, "oom"), NULL;
    xm->exec = &eli_exec_cpu;
    xm->model = m;
    return xm;
}

static void release(eli_xmodel *xm) { free(xm); }

static int plan(const eli_model *m, const eli_seq_params *p, eli_seq_memory *out, eli_error *err) {
    (void)m, (void)err;
    memset(out, 0, sizeof *out);
    out->kv_full = (size_t)p->n_ctx * sizeof(int32_t);
    return ELI_OK;
}

static eli_xseq *seq_create(eli_xmodel *xm, const eli_seq_params *p, eli_error *err) {
    if (p->n_ctx > CAP) return eli_fail(err, ELI_ERR_INVALID_ARG, "fake: context %lld > %d", (long long)p->n_ctx, CAP), NULL;
    fake_seq *s = calloc(1, sizeof *s);
    if (!s) return eli_fail(err, ELI_ERR_OOM, "oom"), NULL;
    s->base.exec = &eli_exec_cpu;
    s->base.xm = xm;
    s->p = *p;
    if (!s->p.n_ctx) s->p.n_ctx = CAP;
    if (!s->p.n_ubatch) s->p.n_ubatch = 512;
    last_seq = s;
    return &s->base;
}

static void seq_free(eli_xseq *s) { free(s); }
static eli_seq_params seq_params(const eli_xseq *s) { return ((const fake_seq *)s)->p; }
static int64_t n_past(const eli_xseq *s) { return ((const fake_seq *)s)->n_past; }

static void counting_logits(int32_t t, int32_t V, float *row) {
    for (int32_t i = 0; i < V; i++) row[i] = 0;
    row[(t + 1) % V] = 10;
}

static int decode(eli_xseq *xs, const eli_batch *b, const eli_outputs *out, eli_error *err) {
    fake_seq *s = (fake_seq *)xs;
    const int32_t V = n_vocab(xs);
    const int64_t E = xs->xm->model->hp.n_embd;
    if (b->n > s->p.n_ctx - s->n_past) return eli_fail(err, ELI_ERR_INVALID_ARG, "fake: context overflow");
    s->n_decodes++;
    s->rows += b->n;
    s->embd_rows += b->embd ? b->n : 0;
    s->bidir_spans += b->n_bidir;
    for (int64_t i = 0; i < b->n; i++) {
        /* an embedding row stands for the token its first value names */
        const int32_t t = b->tokens ? b->tokens[i] : (int32_t)b->embd[i * E];
        s->tokens[s->n_past++] = t;
        const int row = out && (out->all || i == b->n - 1);
        const int64_t r = out && out->all ? i : 0;
        if (row && out->logits) counting_logits(t, V, out->logits + r * V);
        if (row && out->hidden)
            for (int64_t e = 0; e < E; e++) out->hidden[r * E + e] = (float)(s->n_past - 1);
    }
    return ELI_OK;
}

static void reset(eli_xseq *s) { ((fake_seq *)s)->n_past = 0; }

static int truncate_to(eli_xseq *xs, int64_t n_keep) {
    fake_seq *s = (fake_seq *)xs;
    if (n_keep < 0 || n_keep > s->n_past) return 0;
    s->n_past = n_keep;
    s->truncations++;
    return 1;
}

static void checkpoint(eli_xseq *s) { ((fake_seq *)s)->checkpoints++; }
static int64_t resume(eli_xseq *s, int64_t n_keep) { return truncate_to(s, n_keep) ? n_keep : -1; }

static int save_state(eli_xseq *xs, void (*put)(void *w, const void *p, size_t n), void *w, eli_error *err) {
    (void)err;
    const fake_seq *s = (const fake_seq *)xs;
    put(w, &s->n_past, sizeof s->n_past);
    put(w, s->tokens, (size_t)s->n_past * sizeof *s->tokens);
    return ELI_OK;
}

static int load_state(eli_xseq *xs, const uint8_t *p, size_t n, eli_error *err) {
    fake_seq *s = (fake_seq *)xs;
    int64_t np;
    if (n < sizeof np) return eli_fail(err, ELI_ERR_INVALID_ARG, "fake state too short");
    memcpy(&np, p, sizeof np);
    if (np < 0 || np > s->p.n_ctx || n != sizeof np + (size_t)np * sizeof(int32_t))
        return eli_fail(err, ELI_ERR_INVALID_ARG, "fake state of %zu bytes for %lld positions", n, (long long)np);
    memcpy(s->tokens, p + sizeof np, (size_t)np * sizeof(int32_t));
    s->n_past = np;
    return ELI_OK;
}

static eli_xdraft *draft_create(eli_xmodel *draft, eli_xseq *target, eli_error *err) {
    (void)draft, (void)target;
    fake_draft *d = calloc(1, sizeof *d);
    if (!d) return eli_fail(err, ELI_ERR_OOM, "oom"), NULL;
    d->base.exec = &eli_exec_cpu;
    return &d->base;
}

static void draft_free(eli_xdraft *d) { free(d); }

/* The drafter's guess after t in a round at position pos: the hidden state it hands itself carries the
 * step (h[0] = -(step + 1); the target's hidden states are positions, never negative), and the guess is
 * for position pos + step + 1. */
static int draft_step(eli_xdraft *xd, eli_xseq *target, int32_t t, int32_t pos, const float *h_in, float *logits,
                      float *h_out, eli_error *err) {
    (void)err;
    fake_draft *d = (fake_draft *)xd;
    const int32_t V = n_vocab(target);
    const int64_t E = target->xm->model->hp.n_embd;
    const int step = h_in[0] < 0 ? (int)-h_in[0] : 0, at = pos + step + 1;
    int wrong = 0;
    for (int i = 0; i < 8; i++) wrong |= wrong_at[i] == at;
    counting_logits(wrong ? (t + 1) % V : t, V, logits);
    for (int64_t e = 0; e < E; e++) h_out[e] = 0;
    h_out[0] = (float)-(step + 1);
    d->steps++;
    return ELI_OK;
}

#define FAKE_TABLE                                                                                                   \
    .available = always, .describe = describe, .prepare = prepare, .release = release, .plan = plan,                  \
    .seq_create = seq_create, .seq_free = seq_free, .seq_params = seq_params, .n_past = n_past, .decode = decode,     \
    .reset = reset, .truncate = truncate_to, .checkpoint = checkpoint, .resume = resume, .save_state = save_state,    \
    .load_state = load_state, .draft_create = draft_create, .draft_free = draft_free, .draft_step = draft_step
/* no towers: their calls answer NOT_IMPLEMENTED */
const eli_exec eli_exec_cpu = {.name = "fake", .family = "fake", .rank = 1, FAKE_TABLE};
const eli_exec eli_exec_reference = {.name = "fake-reference", .family = "fake", .rank = 0, FAKE_TABLE};

/* ---- the tests ---- */

static int run(eli_gen *g, size_t step, int32_t *out, int cap, int *calls) {
    int n = 0;
    *calls = 0;
    for (int guard = 0; guard < 1000; guard++) {
        int32_t buf[64];
        size_t k = 0;
        eli_error err = {0};
        int rc = eli_gen_next(g, buf, step, &k, NULL, 0, NULL, NULL, NULL, &err);
        (*calls)++;
        if (rc < 0) return fprintf(stderr, "next: %s\n", err.msg), -1;
        for (size_t i = 0; i < k && n < cap; i++) out[n++] = buf[i];
        if (rc == 1) return n;
    }
    return -1;
}

typedef struct {
    int events, accepted, rejected;
} verify_count;

static void on_verify(void *user, const EliVerifierEvent *ev) {
    verify_count *v = user;
    v->events++;
    v->accepted += (int)ev->n_accepted;
    if (ev->rejected_from >= 0) v->rejected += ev->rejected_to - ev->rejected_from;
}

int main(void) {
    eli_error err = {0};
    eli_model *m = eli_model_load(eli_shared_path("golden/models/e2b-mini-f32.gguf"), &err);
    eli_model *dm = m ? eli_model_load(eli_shared_path("golden/models/assistant-mini-f32.gguf"), &err) : NULL;
    eli_tokenizer *tok = m ? eli_tokenizer_load(m->file, &err) : NULL;
    CHECK(m && dm && tok && !eli_model_bind_assistant(dm, m, &err), "load: %s", err.msg);
    if (!m || !dm || !tok) TEST_MAIN_END();
    const eli_exec *exec = eli_exec_default();
    CHECK(exec == &eli_exec_cpu && !strcmp(exec->name, "fake"), "the registry holds the fake executor");
    const eli_exec_options o = {NULL, 1};
    eli_xmodel *xm = eli_exec_prepare(exec, m, &o, &err), *xd = eli_exec_prepare(exec, dm, &o, &err);
    const int32_t prompt[3] = {2, 20, 300}; /* counting on from 300 meets no end-of-generation id (1, 50, 106) */

    /* plain greedy: the counting model's tokens, the same for every step size, the last step final */
    eli_gen_params p = eli_gen_default_params();
    p.seq.n_ctx = 256;
    p.sampling.temperature = 0;
    p.max_tokens = 12;
    int32_t a[64], b[64];
    int calls;
    for (size_t step = 1; step <= 12; step += 11) {
        eli_gen *g = eli_gen_create(exec, xm, tok, &p, &err);
        CHECK(g && !eli_gen_prefill(g, prompt, 3, NULL, &err), "prefill: %s", err.msg);
        const int n = g ? run(g, step, a, 64, &calls) : -1;
        int counting = n == 12;
        for (int i = 0; counting && i < n; i++) counting = a[i] == 301 + i;
        CHECK(counting && calls == (int)((12 + step - 1) / step), "step %zu: %d tokens counting on from 300 in %d calls",
              step, n, calls);
        /* reset_keep to the prompt and again: the session truncates the sequence, nothing more */
        const int64_t truncs = last_seq->truncations;
        CHECK(eli_gen_reset_keep(g, 3) == 3 && run(g, step, b, 64, &calls) == 12 && !memcmp(a, b, sizeof(int32_t) * 12) &&
                  last_seq->truncations > truncs,
              "reset_keep(3) and the same tokens again");
        eli_gen_free(g);
    }

    /* an end-of-generation token (50, counting on from 40) ends the stream without being emitted */
    {
        const int32_t to_eog[3] = {2, 20, 40};
        eli_gen *e = eli_gen_create(exec, xm, tok, &p, &err);
        CHECK(e && !eli_gen_prefill(e, to_eog, 3, NULL, &err) && run(e, 4, a, 64, &calls) == 9 && a[8] == 49 && eli_gen_done(e),
              "41..49, then <eog> ends the stream");
        eli_gen_free(e);
    }

    /* MTP: the fake drafter is right except at three positions; greedy output equals plain, and the
     * verifier events add up */
    verify_count vc = {0};
    wrong_at[0] = 7, wrong_at[1] = 12, wrong_at[2] = 13;
    p.draft = xd, p.draft_min = 1, p.draft_max = 4;
    p.on_verify = on_verify, p.on_verify_user = &vc;
    p.max_tokens = 40;
    eli_gen *g = eli_gen_create(exec, xm, tok, &p, &err);
    CHECK(g && !eli_gen_prefill(g, prompt, 3, NULL, &err), "MTP prefill: %s", err.msg);
    const int n = g ? run(g, 8, a, 64, &calls) : -1;
    int counting = n == 40;
    for (int i = 0; counting && i < n; i++) counting = a[i] == 301 + i;
    const eli_spec_stats st = g ? eli_gen_spec_stats(g) : (eli_spec_stats){0, 0, 0, 0};
    printf("fake MTP: %d tokens, %lld rounds, %lld drafted, %lld accepted; %d events\n", n, (long long)st.rounds,
           (long long)st.drafted, (long long)st.accepted, vc.events);
    CHECK(counting, "MTP output == the counting model's");
    CHECK(st.rounds > 0 && st.accepted > 0 && st.accepted < st.drafted, "rounds with both kinds of draft");
    CHECK(vc.events == st.rounds && vc.accepted == st.accepted && vc.accepted + vc.rejected == st.drafted,
          "verifier events match the counts");

    /* a slot: the fake's state goes through the file and back, and the stream continues exactly */
    char path[] = "/tmp/eli_fake_slot_XXXXXX";
    int fd = mkstemp(path);
    if (fd >= 0) close(fd);
    eli_gen_reset_keep(g, 20);
    CHECK(!eli_gen_save(g, path, &err), "save: %s", err.msg);
    eli_gen *r = eli_gen_create(exec, xm, tok, &p, &err);
    CHECK(r && !eli_gen_restore(r, path, &err) && eli_gen_n_committed(r) == 20, "restore: %s", err.msg);
    CHECK(r && run(r, 8, b, 64, &calls) > 0 && b[0] == a[17], "the restored stream continues from position 20");
    eli_gen_free(r);
    unlink(path);
    eli_gen_free(g);

    /* embedding rows and bidirectional spans reach the device as they are */
    eli_seq_params sp = eli_seq_default();
    sp.n_ctx = 64;
    eli_xseq *s = eli_seq_create(exec, xm, &sp, &err);
    float embd[4 * 256] = {0};
    for (int i = 0; i < 4; i++) embd[i * 256] = (float)(100 + i);
    const eli_span span = {1, 3};
    const eli_batch batch = {4, NULL, embd, &span, 1};
    float logits[1024];
    const eli_outputs lo = {logits, NULL, 0};
    CHECK(s && !eli_seq_decode(s, &batch, &lo, &err) && last_seq->embd_rows == 4 && last_seq->bidir_spans == 1 &&
              logits[104] == 10,
          "an embedding batch with a span: %s", err.msg);
    eli_seq_free(s);

    eli_xmodel_release(xd);
    eli_xmodel_release(xm);
    eli_tokenizer_free(tok);
    eli_model_free(dm);
    eli_model_free(m);
    TEST_MAIN_END();
}
