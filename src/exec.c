/* The executor registry and the session's calls into it (exec.h). */
#include "exec.h"

#include <string.h>

#include "audio_mel.h"
#include "quants.h"

/* The devices, one line each: every folder exports its table(s). */
extern const eli_exec eli_exec_cpu, eli_exec_reference; /* src/cpu/ */
static const eli_exec *const registry[] = {&eli_exec_cpu, &eli_exec_reference, NULL};

const eli_exec *const *eli_exec_registry(void) { return registry; }

const eli_exec *eli_exec_default(void) {
    const eli_exec *best = NULL;
    for (const eli_exec *const *e = registry; *e; e++)
        if ((*e)->available() && (!best || (*e)->rank > best->rank)) best = *e;
    return best;
}

const eli_exec *eli_exec_named(const char *name, eli_error *err) {
    for (const eli_exec *const *e = registry; *e; e++)
        if (name && !strcmp(name, (*e)->name)) {
            if ((*e)->available()) return *e;
            eli_fail(err, ELI_ERR_NOT_IMPLEMENTED, "executor '%s' is not available on this machine", name);
            return NULL;
        }
    eli_fail(err, ELI_ERR_INVALID_ARG, "no executor named '%s'", name ? name : "(null)");
    return NULL;
}

eli_seq_params eli_seq_default(void) {
    eli_seq_params p;
    memset(&p, 0, sizeof p);
    p.kv_type_k = p.kv_type_v = ELI_TYPE_F16;
    p.reserve = 1;
    p.n_ckpt = 1;
    return p;
}

eli_xmodel *eli_exec_prepare(const eli_exec *exec, eli_model *m, const eli_exec_options *o, eli_error *err) {
    return exec->prepare(m, o, err);
}

void eli_xmodel_release(eli_xmodel *xm) {
    if (xm) xm->exec->release(xm);
}

eli_xseq *eli_seq_create(const eli_exec *exec, eli_xmodel *xm, const eli_seq_params *p, eli_error *err) {
    if (strcmp(exec->family, xm->exec->family)) {
        eli_fail(err, ELI_ERR_INVALID_ARG, "a model prepared by executor '%s' cannot serve executor '%s'", xm->exec->name,
                 exec->name);
        return NULL;
    }
    const eli_seq_params d = eli_seq_default();
    return exec->seq_create(xm, p ? p : &d, err);
}

void eli_seq_free(eli_xseq *s) {
    if (s) s->exec->seq_free(s);
}

eli_seq_params eli_seq_params_of(const eli_xseq *s) { return s->exec->seq_params(s); }
int64_t eli_seq_n_past(const eli_xseq *s) { return s->exec->n_past(s); }
int64_t eli_seq_n_ctx(const eli_xseq *s) { return s->exec->seq_params(s).n_ctx; }

int eli_seq_decode(eli_xseq *s, const eli_batch *b, const eli_outputs *out, eli_error *err) {
    return s->exec->decode(s, b, out, err);
}

int eli_seq_decode_tokens(eli_xseq *s, const int32_t *ids, int64_t n, const eli_outputs *out, eli_error *err) {
    const eli_batch b = {n, ids, NULL, NULL, 0};
    return s->exec->decode(s, &b, out, err);
}

void eli_seq_reset(eli_xseq *s) { s->exec->reset(s); }
int eli_seq_truncate(eli_xseq *s, int64_t n_keep) { return s->exec->truncate(s, n_keep); }
void eli_seq_checkpoint(eli_xseq *s) { s->exec->checkpoint(s); }
int64_t eli_seq_resume(eli_xseq *s, int64_t n_keep) { return s->exec->resume(s, n_keep); }

int eli_seq_save_state(eli_xseq *s, void (*put)(void *w, const void *p, size_t n), void *w, eli_error *err) {
    return s->exec->save_state(s, put, w, err);
}

int eli_seq_load_state(eli_xseq *s, const uint8_t *p, size_t n, eli_error *err) { return s->exec->load_state(s, p, n, err); }

eli_xdraft *eli_draft_create(eli_xmodel *draft, eli_xseq *target, eli_error *err) {
    if (strcmp(draft->exec->family, target->exec->family)) {
        eli_fail(err, ELI_ERR_INVALID_ARG, "the drafter was prepared by executor '%s', the target runs on '%s'",
                 draft->exec->name, target->exec->name);
        return NULL;
    }
    return target->exec->draft_create(draft, target, err);
}

void eli_draft_free(eli_xdraft *d) {
    if (d) d->exec->draft_free(d);
}

int eli_draft_step(eli_xdraft *d, eli_xseq *target, int32_t t, int32_t pos, const float *h_in, float *logits, float *h_out,
                   eli_error *err) {
    return d->exec->draft_step(d, target, t, pos, h_in, logits, h_out, err);
}

eli_xtower *eli_vision_prepare(const eli_exec *exec, struct eli_vision *v, const eli_exec_options *o, int n_threads,
                               eli_error *err) {
    if (!exec->vision_prepare) {
        eli_fail(err, ELI_ERR_NOT_IMPLEMENTED, "executor '%s' has no vision tower", exec->name);
        return NULL;
    }
    return exec->vision_prepare(v, o, n_threads, err);
}

eli_xtower *eli_audio_prepare(const eli_exec *exec, struct eli_audio *a, const eli_exec_options *o, int n_threads,
                              eli_error *err) {
    if (!exec->audio_prepare) {
        eli_fail(err, ELI_ERR_NOT_IMPLEMENTED, "executor '%s' has no audio tower", exec->name);
        return NULL;
    }
    return exec->audio_prepare(a, o, n_threads, err);
}

void eli_xtower_release(eli_xtower *t) {
    if (t) t->exec->tower_release(t);
}

int eli_xtower_encode_image(eli_xtower *t, const struct eli_image *img, float *out, eli_error *err) {
    if (!t->vision) return eli_fail(err, ELI_ERR_INVALID_ARG, "not a vision tower");
    return t->exec->vision_encode(t, img, out, err);
}

int eli_xtower_encode_audio(eli_xtower *t, const float *mel, int64_t T, float *out, eli_error *err) {
    if (!t->audio) return eli_fail(err, ELI_ERR_INVALID_ARG, "not an audio tower");
    if (T < 1) return eli_fail(err, ELI_ERR_INVALID_ARG, "no mel frames to encode");
    if (T > ELI_MEL_CHUNK_SAMPLES / ELI_MEL_HOP + 1)
        return eli_fail(err, ELI_ERR_INVALID_ARG, "%lld mel frames is more than one 30-second chunk", (long long)T);
    return t->exec->audio_encode(t, mel, T, out, err);
}
