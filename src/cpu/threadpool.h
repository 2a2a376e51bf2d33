/* A persistent pool of worker threads: created once per context, reused for every parallel op, so no
 * thread is created per token. eli_pool_run(pool, fn, ctx) calls fn(ctx, ith, nth) on every thread
 * (the caller is thread 0) and returns when all have finished. Work must be split by ith/nth so that
 * each output element is computed by exactly one thread: results are then identical for any nth. */
#ifndef ELI_THREADPOOL_H
#define ELI_THREADPOOL_H

#include <stdint.h>

typedef struct eli_pool eli_pool;
typedef void (*eli_pool_fn)(void *ctx, int ith, int nth);

/* n_threads >= 1 (1 = run on the caller only). NULL on failure. */
eli_pool *eli_pool_create(int n_threads);
void eli_pool_free(eli_pool *p);
int eli_pool_size(const eli_pool *p);
void eli_pool_run(eli_pool *p, eli_pool_fn fn, void *ctx);

/* The pool for an op of `work` multiply-adds (or comparable steps): p, or NULL (run it on the caller)
 * when the op is too small to be worth a hand-off. Results never depend on it (ops split by rows or
 * items, each computed the same way by whichever thread). */
eli_pool *eli_pool_for(eli_pool *p, int64_t work);

/* [begin, end) of n items for thread ith of nth, in contiguous chunks. */
void eli_split(int64_t n, int ith, int nth, int64_t *begin, int64_t *end);

#endif
