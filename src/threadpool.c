#include "threadpool.h"

#include <pthread.h>
#include <stdlib.h>

struct eli_pool {
    int n;
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t work_cv, done_cv;
    eli_pool_fn fn;
    void *ctx;
    unsigned long generation; /* bumped for every job */
    int pending;              /* workers still running the current job */
    int quit;
};

typedef struct {
    eli_pool *p;
    int ith;
} worker_arg;

static void *worker(void *arg) {
    worker_arg *wa = arg;
    eli_pool *p = wa->p;
    int ith = wa->ith;
    free(wa);
    unsigned long seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->quit && p->generation == seen) pthread_cond_wait(&p->work_cv, &p->mu);
        if (p->quit) break;
        seen = p->generation;
        eli_pool_fn fn = p->fn;
        void *ctx = p->ctx;
        pthread_mutex_unlock(&p->mu);
        fn(ctx, ith, p->n);
        pthread_mutex_lock(&p->mu);
        if (--p->pending == 0) pthread_cond_signal(&p->done_cv);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

eli_pool *eli_pool_create(int n_threads) {
    if (n_threads < 1) n_threads = 1;
    eli_pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->n = n_threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->work_cv, NULL);
    pthread_cond_init(&p->done_cv, NULL);
    p->threads = calloc((size_t)n_threads, sizeof *p->threads);
    if (!p->threads) {
        eli_pool_free(p);
        return NULL;
    }
    for (int i = 1; i < n_threads; i++) {
        worker_arg *wa = malloc(sizeof *wa);
        if (!wa) {
            p->n = i;
            eli_pool_free(p);
            return NULL;
        }
        wa->p = p;
        wa->ith = i;
        if (pthread_create(&p->threads[i], NULL, worker, wa)) {
            free(wa);
            p->n = i;
            eli_pool_free(p);
            return NULL;
        }
    }
    return p;
}

void eli_pool_free(eli_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->quit = 1;
    pthread_cond_broadcast(&p->work_cv);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->n; i++) pthread_join(p->threads[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->work_cv);
    pthread_cond_destroy(&p->done_cv);
    free(p->threads);
    free(p);
}

int eli_pool_size(const eli_pool *p) { return p ? p->n : 1; }

void eli_pool_run(eli_pool *p, eli_pool_fn fn, void *ctx) {
    if (!p || p->n == 1) {
        fn(ctx, 0, 1);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->ctx = ctx;
    p->pending = p->n - 1;
    p->generation++;
    pthread_cond_broadcast(&p->work_cv);
    pthread_mutex_unlock(&p->mu);
    fn(ctx, 0, p->n);
    pthread_mutex_lock(&p->mu);
    while (p->pending) pthread_cond_wait(&p->done_cv, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

void eli_split(int64_t n, int ith, int nth, int64_t *begin, int64_t *end) {
    int64_t chunk = (n + nth - 1) / nth;
    int64_t b = chunk * ith, e = b + chunk;
    if (b > n) b = n;
    if (e > n) e = n;
    *begin = b;
    *end = e;
}
