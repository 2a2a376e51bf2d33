/* The live handles of the C ABI (contexts, streams, ...): every call checks its handle here before it
 * dereferences it, so a stale, closed or garbage pointer is refused with an error instead of a crash.
 *
 * A call that uses a handle holds a reference for its duration (acquire ... release). Closing a handle
 * (retire) first marks it dying, so no new call can acquire it, then waits until the calls in flight
 * have released it: close racing cancel, or destroy racing tokenize on other threads, never frees
 * memory a call is still using. The freed handle's block is then kept in a quarantine of the last
 * ELI_HANDLE_TOMBS closed handles (bury) before it goes back to malloc, so a stale pointer does not
 * come to name a new object of the same address right away (a second destroy of a context is refused,
 * not run on whatever now lives there). */
#ifndef ELI_HANDLES_H
#define ELI_HANDLES_H

#include <pthread.h>
#include <stddef.h>

#define ELI_HANDLE_TOMBS 256

typedef struct eli_handle_slot {
    void *p;
    int refs;  /* calls in flight */
    int dying; /* retire has started: no new acquire */
} eli_handle_slot;

typedef struct eli_handle_set {
    pthread_mutex_t mu;
    pthread_cond_t released;
    eli_handle_slot *slots;
    size_t n, cap;
    void *tombs[ELI_HANDLE_TOMBS];
    size_t next_tomb;
} eli_handle_set;

#define ELI_HANDLE_SET_INIT {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, 0, 0, {0}, 0}

/* Registers p; 0 when out of memory. */
int eli_handle_add(eli_handle_set *s, void *p);
/* 1 and a reference when p is live and not dying (release it), else 0. Never dereferences p. */
int eli_handle_acquire(eli_handle_set *s, const void *p);
void eli_handle_release(eli_handle_set *s, const void *p);
/* Starts closing p: 0 when p is not live or another retire already started; else marks it dying, calls
 * on_dying(p) (may be NULL; e.g. to raise a cancel flag so a call in flight stops early), waits until
 * no call holds it, unregisters it and returns 1. The caller then frees it and buries the block. */
int eli_handle_retire(eli_handle_set *s, void *p, void (*on_dying)(void *p));
/* A live, not dying handle for which match(p, arg) is true (not acquired: only to retire it), or NULL. */
void *eli_handle_find(eli_handle_set *s, int (*match)(const void *p, const void *arg), const void *arg);
/* Keeps the block p (already unregistered) in the quarantine, freeing the oldest one there. */
void eli_handle_bury(eli_handle_set *s, void *p);
/* Frees the set's own memory (the registry and the quarantine), when the library is unloaded. */
void eli_handle_set_free(eli_handle_set *s);

#endif
