#include "handles.h"

#include <stdlib.h>

/* index of p among the registered handles, or s->n (caller holds s->mu) */
static size_t index_of(const eli_handle_set *s, const void *p) {
    size_t i = 0;
    while (i < s->n && s->slots[i].p != p) i++;
    return i;
}

int eli_handle_add(eli_handle_set *s, void *p) {
    pthread_mutex_lock(&s->mu);
    int ok = 1;
    if (s->n == s->cap) {
        size_t nc = s->cap ? 2 * s->cap : 16;
        eli_handle_slot *g = realloc(s->slots, nc * sizeof *g);
        if (g) s->slots = g, s->cap = nc;
        else ok = 0;
    }
    if (ok) s->slots[s->n++] = (eli_handle_slot){p, 0, 0};
    pthread_mutex_unlock(&s->mu);
    return ok;
}

int eli_handle_acquire(eli_handle_set *s, const void *p) {
    if (!p) return 0;
    pthread_mutex_lock(&s->mu);
    const size_t i = index_of(s, p);
    const int ok = i < s->n && !s->slots[i].dying;
    if (ok) s->slots[i].refs++;
    pthread_mutex_unlock(&s->mu);
    return ok;
}

void eli_handle_release(eli_handle_set *s, const void *p) {
    pthread_mutex_lock(&s->mu);
    const size_t i = index_of(s, p);
    if (i < s->n && --s->slots[i].refs == 0 && s->slots[i].dying) pthread_cond_broadcast(&s->released);
    pthread_mutex_unlock(&s->mu);
}

int eli_handle_retire(eli_handle_set *s, void *p, void (*on_dying)(void *p)) {
    if (!p) return 0;
    pthread_mutex_lock(&s->mu);
    size_t i = index_of(s, p);
    if (i == s->n || s->slots[i].dying) {
        pthread_mutex_unlock(&s->mu);
        return 0;
    }
    s->slots[i].dying = 1;
    pthread_mutex_unlock(&s->mu);
    if (on_dying) on_dying(p); /* p stays valid: it cannot be retired twice */
    pthread_mutex_lock(&s->mu);
    /* the slot may move (another handle removed), so look it up again after every wake-up */
    while ((i = index_of(s, p)) < s->n && s->slots[i].refs > 0) pthread_cond_wait(&s->released, &s->mu);
    s->slots[i] = s->slots[--s->n];
    pthread_mutex_unlock(&s->mu);
    return 1;
}

void *eli_handle_find(eli_handle_set *s, int (*match)(const void *p, const void *arg), const void *arg) {
    void *found = NULL;
    pthread_mutex_lock(&s->mu);
    for (size_t i = 0; i < s->n && !found; i++)
        if (!s->slots[i].dying && match(s->slots[i].p, arg)) found = s->slots[i].p;
    pthread_mutex_unlock(&s->mu);
    return found;
}

void eli_handle_bury(eli_handle_set *s, void *p) {
    pthread_mutex_lock(&s->mu);
    void *old = s->tombs[s->next_tomb];
    s->tombs[s->next_tomb] = p;
    s->next_tomb = (s->next_tomb + 1) % ELI_HANDLE_TOMBS;
    pthread_mutex_unlock(&s->mu);
    free(old);
}

void eli_handle_set_free(eli_handle_set *s) {
    pthread_mutex_lock(&s->mu);
    free(s->slots);
    s->slots = NULL;
    s->n = s->cap = 0;
    for (size_t i = 0; i < ELI_HANDLE_TOMBS; i++) free(s->tombs[i]), s->tombs[i] = NULL;
    pthread_mutex_unlock(&s->mu);
}
