/* The multimodal towers on the CPU (tower.h): preparing (packing their matrices), and one encode at a time
 * on the tower's thread pool. */
#include "tower.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "os.h"
#include "pack.h"

typedef struct {
    eli_xtower base;
    const eli_kernels *k;
    eli_pool *pool;
    pthread_mutex_t mu; /* the pool runs one encode at a time */
    eli_weight **packed; /* the matrices given a packed copy (copies[i]), unhooked at release */
    void **copies;
    size_t n, cap;
    int failed; /* out of memory while packing */
} cpu_tower;

static void pack_one(cpu_tower *t, eli_weight *w) {
    if (t->failed || !w->data || w->packed || !t->k->packed_gemm[w->type] || !eli_pack_supported(w->type, w->rows, w->cols))
        return;
    if (t->n == t->cap) {
        const size_t cap = t->cap ? 2 * t->cap : 64;
        eli_weight **pw = realloc(t->packed, cap * sizeof *pw);
        if (pw) t->packed = pw;
        void **cw = realloc(t->copies, cap * sizeof *cw);
        if (cw) t->copies = cw;
        if (!pw || !cw) {
            t->failed = 1;
            return;
        }
        t->cap = cap;
    }
    const size_t row_bytes = eli_pack_row_bytes(w->type, w->cols), bytes = (size_t)w->rows * row_bytes;
    void *dst = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
    if (!dst) {
        t->failed = 1;
        return;
    }
    eli_pack(w->type, w->data, w->rows, w->cols, dst);
    w->packed = dst;
    w->packed_row_bytes = row_bytes;
    t->packed[t->n] = w;
    t->copies[t->n++] = dst;
}

/* The matrices a tower multiplies with hundreds to thousands of activation rows, where the packed kernels
 * are faster (F16 3072 x 768, 432 tokens, one thread: 30 against 47 ms). The vision patch kernel stays
 * row-major: its sums are llama.cpp's in that order, and Q8_0 towers amplify any difference in their input;
 * so do the audio subsampling kernels. */
static void pack_linear(cpu_tower *t, eli_mm_linear *l) { pack_one(t, &l->w); }

static void pack_vision(cpu_tower *t, eli_vision *v) {
    for (int il = 0; il < v->hp.n_layer; il++) {
        eli_vision_layer *l = &v->layers[il];
        eli_mm_linear *ls[] = {&l->q, &l->k, &l->v, &l->o, &l->gate, &l->up, &l->down};
        for (size_t i = 0; i < sizeof ls / sizeof *ls; i++) pack_linear(t, ls[i]);
    }
    pack_linear(t, &v->proj);
}

static void pack_audio(cpu_tower *t, eli_audio *a) {
    for (int il = 0; il < a->n_layer; il++) {
        eli_audio_block *l = &a->blk[il];
        eli_mm_linear *ls[] = {&l->ffn.up, &l->ffn.down, &l->ffn1.up, &l->ffn1.down, &l->q, &l->k, &l->v, &l->o, &l->pw1, &l->pw2};
        for (size_t i = 0; i < sizeof ls / sizeof *ls; i++) pack_linear(t, ls[i]);
        pack_one(t, &l->k_rel);
    }
    pack_linear(t, &a->in_proj);
    pack_linear(t, &a->pre_out);
    pack_linear(t, &a->mm_proj);
}

void eli_cpu_tower_release(eli_xtower *xt) {
    cpu_tower *t = (cpu_tower *)xt;
    for (size_t i = 0; i < t->n; i++) {
        t->packed[i]->packed = NULL;
        t->packed[i]->packed_row_bytes = 0;
        free(t->copies[i]);
    }
    free(t->packed);
    free(t->copies);
    eli_pool_free(t->pool);
    pthread_mutex_destroy(&t->mu);
    free(t);
}

eli_xtower *eli_cpu_tower_prepare(const eli_exec *exec, const eli_kernels *k, eli_vision *v, eli_audio *a, int repack,
                                  int n_threads, eli_error *err) {
    cpu_tower *t = calloc(1, sizeof *t);
    if (!t || pthread_mutex_init(&t->mu, NULL)) {
        free(t);
        eli_fail(err, ELI_ERR_OOM, "out of memory");
        return NULL;
    }
    t->base = (eli_xtower){exec, v, a};
    t->k = k;
    if (repack && v) pack_vision(t, v);
    if (repack && a) pack_audio(t, a);
    if (t->failed || !(t->pool = eli_pool_create(n_threads > 0 ? n_threads : eli_os_cpu_count()))) {
        eli_cpu_tower_release(&t->base);
        eli_fail(err, ELI_ERR_OOM, "out of memory preparing the %s tower", v ? "vision" : "audio");
        return NULL;
    }
    return &t->base;
}

int eli_cpu_tower_encode_image(eli_xtower *xt, const eli_image *img, float *out, eli_error *err) {
    cpu_tower *t = (cpu_tower *)xt;
    pthread_mutex_lock(&t->mu);
    const int rc = eli_cpu_vision_encode(xt->vision, t->pool, t->k, img, out, err);
    pthread_mutex_unlock(&t->mu);
    return rc;
}

int eli_cpu_tower_encode_audio(eli_xtower *xt, const float *mel, int64_t T, float *out, eli_error *err) {
    cpu_tower *t = (cpu_tower *)xt;
    pthread_mutex_lock(&t->mu);
    const int rc = eli_cpu_audio_encode(xt->audio, t->pool, t->k, mel, T, out, err);
    pthread_mutex_unlock(&t->mu);
    return rc;
}
