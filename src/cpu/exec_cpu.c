/* The CPU executor (exec.h): the forward pass of forward.c over the kernels of kernels.h, weights packed
 * at prepare (pack.h), KV caches of kv_cache.h, the drafter of drafter.h. Two tables share it all: "cpu",
 * on the best kernel table this CPU runs (or the one named by the options), and "reference", on the
 * plain scalar kernels (never chosen by default; the "reference" backend). Models prepared by one serve
 * sequences of the other: the reference table has scalar kernels for every packed layout. */
#include <stdlib.h>
#include <string.h>

#include "drafter.h"
#include "exec.h"
#include "forward.h"
#include "kernels.h"
#include "kv_cache.h"
#include "kv_types.h"
#include "os.h"
#include "pack.h"
#include "tower.h"

typedef struct {
    eli_xmodel base;
    const eli_kernels *kernels; /* what the matrices were packed for */
    void *block;                /* the packed copy (eli_model_pack), NULL when the weights stay mapped */
    size_t block_len;
} cpu_model;

typedef struct {
    eli_xseq base;
    eli_context *ctx;
} cpu_seq;

typedef struct {
    eli_xdraft base;
    eli_drafter *d;
} cpu_draft;

extern const eli_exec eli_exec_cpu, eli_exec_reference;

static int always(void) { return 1; }
static const char *describe_cpu(const eli_xmodel *xm) { return ((const cpu_model *)xm)->kernels->name; }
static const char *describe_reference(const eli_xmodel *xm) {
    (void)xm;
    return eli_kernels_reference()->name;
}

static void release(eli_xmodel *xm) {
    cpu_model *cm = (cpu_model *)xm;
    eli_os_free(cm->block, cm->block_len);
    free(cm);
}

static eli_xmodel *prepare_with(const eli_exec *exec, eli_model *m, const eli_kernels *k, int repack, eli_error *err) {
    cpu_model *cm = calloc(1, sizeof *cm);
    if (!cm) {
        eli_fail(err, ELI_ERR_OOM, "out of memory");
        return NULL;
    }
    cm->base.exec = exec;
    cm->base.model = m;
    cm->kernels = k;
    if (repack && eli_model_pack(m, k, &cm->block, &cm->block_len, err)) {
        free(cm);
        return NULL;
    }
    if (eli_gguf_check_mapping(m->file, err)) { /* the copy read zeros from a file cut shorter meanwhile */
        release(&cm->base);
        return NULL;
    }
    return &cm->base;
}

/* The "cpu" table's kernels: the options' named table, or the best this CPU runs. */
static const eli_kernels *cpu_kernels(const eli_exec_options *o, eli_error *err) {
    const char *name = o && o->kernels && *o->kernels ? o->kernels : NULL;
    const eli_kernels *k = name ? eli_kernels_named(name) : eli_kernels_best();
    if (!k)
        eli_fail(err, ELI_ERR_INVALID_ARG,
                 "kernel table '%s' is unknown or this CPU cannot run it (reference, avx2, avx512, neon, neon-dotprod)", name);
    return k;
}

static int repack_of(const eli_exec_options *o) { return o ? o->repack : 1; }

static eli_xmodel *prepare_cpu(eli_model *m, const eli_exec_options *o, eli_error *err) {
    const eli_kernels *k = cpu_kernels(o, err);
    return k ? prepare_with(&eli_exec_cpu, m, k, repack_of(o), err) : NULL;
}

static eli_xmodel *prepare_reference(eli_model *m, const eli_exec_options *o, eli_error *err) {
    return prepare_with(&eli_exec_reference, m, eli_kernels_reference(), repack_of(o), err);
}


static eli_context_params context_params(const eli_seq_params *p) {
    eli_context_params c = eli_context_default_params();
    c.n_ctx = p->n_ctx;
    c.n_ubatch = p->n_ubatch;
    c.kv_type_k = p->kv_type_k;
    c.kv_type_v = p->kv_type_v;
    c.n_threads = p->n_threads;
    c.reserve = p->reserve;
    c.n_ckpt = p->n_ckpt;
    return c;
}

/* The memory plan of a sequence: the same code that allocates it sizes it. */
static int plan(const eli_model *m, const eli_seq_params *p, eli_seq_memory *out, eli_error *err) {
    eli_context_params c = context_params(p);
    int rc = eli_kv_check_types(m, c.kv_type_k, c.kv_type_v, err);
    if (rc) return rc;
    const size_t scratch = eli_context_scratch_bytes(m, &c);
    if (!scratch) return eli_fail(err, ELI_ERR_INVALID_ARG, "invalid sequence parameters");
    /* the clamps eli_context_create applies */
    int64_t n_ctx = c.n_ctx > 0 ? c.n_ctx : 4096, n_ub = c.n_ubatch > 0 ? c.n_ubatch : 512;
    if (n_ctx > m->hp.n_ctx_train) n_ctx = m->hp.n_ctx_train;
    if (n_ub > n_ctx) n_ub = n_ctx;
    eli_kv_predict_bytes(m, n_ctx, n_ub, c.kv_type_k, c.kv_type_v, &out->kv_swa, &out->kv_full);
    /* a checkpoint: every true ring's cells (positions + K + V) */
    const int64_t ring = eli_kv_layer_cells(1, m->hp.n_swa, n_ctx, n_ub);
    size_t one = 0;
    for (int il = 0; ring < n_ctx && il < m->hp.n_layer; il++) {
        const eli_layer *l = &m->layers[il];
        if (l->has_kv && l->is_swa)
            one += (size_t)ring * (4 + eli_kv_row_bytes(c.kv_type_k, l->n_head_kv, l->head_dim) +
                                   eli_kv_row_bytes(c.kv_type_v, l->n_head_kv, l->head_dim));
    }
    out->kv_ckpt = one * (size_t)c.n_ckpt;
    out->scratch = scratch + eli_context_qbuf_bound(m, &c);
    return ELI_OK;
}

static eli_xseq *seq_create(eli_xmodel *xm, const eli_seq_params *p, eli_error *err, const eli_exec *exec,
                            const eli_kernels *k) {
    cpu_seq *s = calloc(1, sizeof *s);
    if (!s) {
        eli_fail(err, ELI_ERR_OOM, "out of memory");
        return NULL;
    }
    eli_context_params c = context_params(p);
    c.kernels = k;
    if (!(s->ctx = eli_context_create(xm->model, &c, err))) {
        free(s);
        return NULL;
    }
    s->base.exec = exec;
    s->base.xm = xm;
    return &s->base;
}

static eli_xseq *seq_create_cpu(eli_xmodel *xm, const eli_seq_params *p, eli_error *err) {
    return seq_create(xm, p, err, &eli_exec_cpu, ((cpu_model *)xm)->kernels);
}

static eli_xseq *seq_create_reference(eli_xmodel *xm, const eli_seq_params *p, eli_error *err) {
    return seq_create(xm, p, err, &eli_exec_reference, eli_kernels_reference());
}

#define CTX(s) (((cpu_seq *)(s))->ctx)

static void seq_free(eli_xseq *s) {
    eli_context_free(CTX(s));
    free(s);
}

static eli_seq_params seq_params(const eli_xseq *s) {
    const eli_context_params c = eli_context_get_params(CTX(s));
    const eli_seq_params p = {c.n_ctx, c.n_ubatch, c.kv_type_k, c.kv_type_v, c.n_threads, c.reserve, c.n_ckpt};
    return p;
}

static int64_t n_past(const eli_xseq *s) { return eli_context_n_past(CTX(s)); }

static int decode(eli_xseq *s, const eli_batch *b, const eli_outputs *out, eli_error *err) {
    return eli_decode_batch(CTX(s), b, out, err);
}

static void reset(eli_xseq *s) { eli_context_reset(CTX(s)); }
static int truncate_to(eli_xseq *s, int64_t n_keep) { return eli_context_truncate(CTX(s), n_keep); }
static void checkpoint(eli_xseq *s) { eli_context_checkpoint(CTX(s)); }
static int64_t resume(eli_xseq *s, int64_t n_keep) { return eli_context_resume(CTX(s), n_keep); }

static int save_state(eli_xseq *s, void (*put)(void *w, const void *p, size_t n), void *w, eli_error *err) {
    (void)err;
    eli_context_save_state(CTX(s), put, w);
    return ELI_OK;
}

static int load_state(eli_xseq *s, const uint8_t *p, size_t n, eli_error *err) {
    return eli_context_load_state(CTX(s), p, n, err);
}

static eli_xdraft *draft_create(eli_xmodel *draft, eli_xseq *target, eli_error *err) {
    cpu_draft *d = calloc(1, sizeof *d);
    if (!d) {
        eli_fail(err, ELI_ERR_OOM, "out of memory");
        return NULL;
    }
    if (!(d->d = eli_drafter_create(draft->model, target->xm->model, eli_context_n_ctx(CTX(target)), err))) {
        free(d);
        return NULL;
    }
    d->base.exec = target->exec;
    return &d->base;
}

static void draft_free(eli_xdraft *d) {
    eli_drafter_free(((cpu_draft *)d)->d);
    free(d);
}

static int draft_step(eli_xdraft *d, eli_xseq *target, int32_t t, int32_t pos, const float *h_in, float *logits,
                      float *h_out, eli_error *err) {
    return eli_drafter_step(((cpu_draft *)d)->d, CTX(target), t, pos, h_in, logits, h_out, err);
}

static eli_xtower *vision_prepare_cpu(eli_vision *v, const eli_exec_options *o, int n_threads, eli_error *err) {
    const eli_kernels *k = cpu_kernels(o, err);
    return k ? eli_cpu_tower_prepare(&eli_exec_cpu, k, v, NULL, repack_of(o), n_threads, err) : NULL;
}

static eli_xtower *audio_prepare_cpu(eli_audio *a, const eli_exec_options *o, int n_threads, eli_error *err) {
    const eli_kernels *k = cpu_kernels(o, err);
    return k ? eli_cpu_tower_prepare(&eli_exec_cpu, k, NULL, a, repack_of(o), n_threads, err) : NULL;
}

static eli_xtower *vision_prepare_reference(eli_vision *v, const eli_exec_options *o, int n_threads, eli_error *err) {
    return eli_cpu_tower_prepare(&eli_exec_reference, eli_kernels_reference(), v, NULL, repack_of(o), n_threads, err);
}

static eli_xtower *audio_prepare_reference(eli_audio *a, const eli_exec_options *o, int n_threads, eli_error *err) {
    return eli_cpu_tower_prepare(&eli_exec_reference, eli_kernels_reference(), NULL, a, repack_of(o), n_threads, err);
}

/* What both tables share: everything but the kernel choice. */
#define CPU_SHARED                                                                                                   \
    .available = always, .release = release, .plan = plan, .seq_free = seq_free, .seq_params = seq_params,            \
    .n_past = n_past, .decode = decode, .reset = reset, .truncate = truncate_to, .checkpoint = checkpoint,            \
    .resume = resume, .save_state = save_state, .load_state = load_state, .draft_create = draft_create,               \
    .draft_free = draft_free, .draft_step = draft_step, .tower_release = eli_cpu_tower_release,                      \
    .vision_encode = eli_cpu_tower_encode_image, .audio_encode = eli_cpu_tower_encode_audio

const eli_exec eli_exec_cpu = {.name = "cpu", .family = "cpu", .rank = 10, .describe = describe_cpu, .prepare = prepare_cpu,
                               .seq_create = seq_create_cpu, .vision_prepare = vision_prepare_cpu,
                               .audio_prepare = audio_prepare_cpu, CPU_SHARED};

/* rank 0: only ever chosen by name */
const eli_exec eli_exec_reference = {.name = "reference", .family = "cpu", .rank = 0, .describe = describe_reference,
                                     .prepare = prepare_reference, .seq_create = seq_create_reference,
                                     .vision_prepare = vision_prepare_reference, .audio_prepare = audio_prepare_reference,
                                     CPU_SHARED};
