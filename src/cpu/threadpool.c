/* Persistent pool. A job is published by bumping `generation`; workers spin on it for a bounded number
 * of iterations (with a pause instruction) before sleeping on the condvar, and the caller spins the same
 * way on `pending` before sleeping, so back-to-back jobs (every matmul of a decode step) cost no futex
 * wake. Sleepers are counted so the publisher only takes the mutex when someone actually sleeps; the
 * counter and the word it guards are both seq_cst, so a sleeper and a publisher cannot miss each other. */
#include "threadpool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#elif defined(__aarch64__)
#define cpu_relax() __asm__ volatile("yield" ::: "memory")
#else
#define cpu_relax() ((void)0)
#endif

/* Tens of microseconds of spinning (a pause is ~10-150 cycles depending on the core): longer than the
 * gap between two ops of a decode step, short enough that an idle pool goes to sleep quickly. */
#define SPIN_ITERS 4096

struct eli_pool {
    int n;
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t work_cv, done_cv;
    eli_pool_fn fn;
    void *ctx;
    atomic_ulong generation; /* bumped for every job */
    atomic_int pending;      /* workers still running the current job */
    atomic_int sleepers;     /* workers blocked (or about to block) on work_cv */
    atomic_int caller_sleeping;
    atomic_int quit;
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
    for (;;) {
        unsigned long g;
        int spins = 0;
        while ((g = atomic_load(&p->generation)) == seen && !atomic_load(&p->quit)) {
            if (spins < SPIN_ITERS) {
                /* a yield now and then: on an oversubscribed machine the thread we wait for may need
                 * this core */
                if ((++spins & 255) == 0) sched_yield();
                else cpu_relax();
                continue;
            }
            pthread_mutex_lock(&p->mu);
            atomic_fetch_add(&p->sleepers, 1);
            atomic_thread_fence(memory_order_seq_cst); /* see eli_pool_run */
            while (atomic_load(&p->generation) == seen && !atomic_load(&p->quit)) pthread_cond_wait(&p->work_cv, &p->mu);
            atomic_fetch_sub(&p->sleepers, 1);
            pthread_mutex_unlock(&p->mu);
        }
        if (atomic_load(&p->quit)) break;
        seen = g;
        p->fn(p->ctx, ith, p->n);
        const int last = atomic_fetch_sub(&p->pending, 1) == 1;
        atomic_thread_fence(memory_order_seq_cst);
        if (last && atomic_load(&p->caller_sleeping)) {
            pthread_mutex_lock(&p->mu);
            pthread_cond_signal(&p->done_cv);
            pthread_mutex_unlock(&p->mu);
        }
    }
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
    atomic_init(&p->generation, 0);
    atomic_init(&p->pending, 0);
    atomic_init(&p->sleepers, 0);
    atomic_init(&p->caller_sleeping, 0);
    atomic_init(&p->quit, 0);
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
    atomic_store(&p->quit, 1);
    pthread_cond_broadcast(&p->work_cv);
    pthread_mutex_unlock(&p->mu);
    if (p->threads)
        for (int i = 1; i < p->n; i++) pthread_join(p->threads[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->work_cv);
    pthread_cond_destroy(&p->done_cv);
    free(p->threads);
    free(p);
}

int eli_pool_size(const eli_pool *p) { return p ? p->n : 1; }

/* About 40 us of work on one core. Every hand-off wakes the workers and waits for the slowest: on the
 * 2 shared cores measured here (load average 5-6) a nano decode step took 0.64-2.0 ms with every op on
 * 2 threads, 0.54 with only ops above this size (its 8192 x 256 head), 0.47 on one thread; a verify batch
 * of 4 tokens 1.8-4.1 ms, 2.0 and 1.57. Larger models' matrices (2048 x 2048 and up) all stay above it. */
#define POOL_MIN_WORK (1 << 20)

eli_pool *eli_pool_for(eli_pool *p, int64_t work) { return work >= POOL_MIN_WORK ? p : NULL; }

void eli_pool_run(eli_pool *p, eli_pool_fn fn, void *ctx) {
    if (!p || p->n == 1) {
        fn(ctx, 0, 1);
        return;
    }
    p->fn = fn;
    p->ctx = ctx;
    atomic_store(&p->pending, p->n - 1);
    atomic_fetch_add(&p->generation, 1); /* publishes fn/ctx (seq_cst) */
    /* Each side of a sleep handshake writes its own word, then reads the other's. seq_cst atomics already
     * order that store before that load in C11; the explicit fences make it hold on translators that map
     * acquire/release atomics without a full barrier (qemu-user running aarch64 code on x86 lost a wake-up
     * without them). One fence per job, on the paths that may sleep. */
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load(&p->sleepers) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->work_cv);
        pthread_mutex_unlock(&p->mu);
    }
    fn(ctx, 0, p->n);
    for (int spins = 0; atomic_load(&p->pending) != 0; spins++) {
        if (spins < SPIN_ITERS) {
            if ((spins & 255) == 255) sched_yield();
            else cpu_relax();
            continue;
        }
        pthread_mutex_lock(&p->mu);
        atomic_store(&p->caller_sleeping, 1);
        atomic_thread_fence(memory_order_seq_cst);
        while (atomic_load(&p->pending) != 0) pthread_cond_wait(&p->done_cv, &p->mu);
        atomic_store(&p->caller_sleeping, 0);
        pthread_mutex_unlock(&p->mu);
        break;
    }
}

void eli_split(int64_t n, int ith, int nth, int64_t *begin, int64_t *end) {
    int64_t chunk = (n + nth - 1) / nth;
    int64_t b = chunk * ith, e = b + chunk;
    if (b > n) b = n;
    if (e > n) e = n;
    *begin = b;
    *end = e;
}
