/* The towers of a C ABI context (tower_cache.h). One mutex guards the slots' contents; each prepared tower
 * also has a mutex of its own, held for the length of one encode, so loading or evicting the other kind (or
 * another projector) never waits for an encode of this one. */
#include "tower_cache.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "audio.h"
#include "config.h"
#include "image.h"
#include "vision.h"

/* One projector file and the towers of it that are loaded. */
typedef struct slot {
    char *path; /* NULL while no projector is open */
    eli_mmproj *proj;
    eli_vision *vision;
    eli_audio *audio;
    eli_xtower *xt[2];             /* by eli_mm_tower */
    int users[2];                  /* begins without their end */
    pthread_mutex_t encode[2];     /* held during one encode */
} slot;

struct eli_tower_cache {
    pthread_mutex_t mu;
    pthread_cond_t idle; /* a use ended */
    char *bundle_path, *bundle_dir;
    slot bundle, named;
    int holders[2];
};

static const char *const tower_word[2] = {"vision", "audio"};

static void slot_init(slot *s) {
    memset(s, 0, sizeof *s);
    pthread_mutex_init(&s->encode[0], NULL);
    pthread_mutex_init(&s->encode[1], NULL);
}

/* Drops the tower of that kind (if loaded); the projector goes when no tower is left. */
static void slot_drop(slot *s, eli_mm_tower kind) {
    eli_xtower_release(s->xt[kind]);
    s->xt[kind] = NULL;
    if (kind == ELI_MM_VISION) eli_vision_free(s->vision), s->vision = NULL;
    else eli_audio_free(s->audio), s->audio = NULL;
    if (!s->xt[0] && !s->xt[1]) {
        eli_mmproj_free(s->proj);
        free(s->path);
        s->proj = NULL;
        s->path = NULL;
    }
}

static void slot_fini(slot *s) {
    slot_drop(s, ELI_MM_VISION);
    slot_drop(s, ELI_MM_AUDIO);
    pthread_mutex_destroy(&s->encode[0]);
    pthread_mutex_destroy(&s->encode[1]);
}

eli_tower_cache *eli_tower_cache_new(const char *bundle_mmproj, const char *bundle_dir, eli_error *err) {
    eli_tower_cache *tc = calloc(1, sizeof *tc);
    if (!tc || (bundle_mmproj && !(tc->bundle_path = strdup(bundle_mmproj))) || !(tc->bundle_dir = strdup(bundle_dir))) {
        if (tc) free(tc->bundle_path);
        free(tc);
        eli_fail(err, ELI_ERR_OOM, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&tc->mu, NULL);
    pthread_cond_init(&tc->idle, NULL);
    slot_init(&tc->bundle);
    slot_init(&tc->named);
    return tc;
}

void eli_tower_cache_free(eli_tower_cache *tc) {
    if (!tc) return;
    slot_fini(&tc->bundle);
    slot_fini(&tc->named);
    pthread_mutex_destroy(&tc->mu);
    pthread_cond_destroy(&tc->idle);
    free(tc->bundle_path);
    free(tc->bundle_dir);
    free(tc);
}

/* NOT_IMPLEMENTED unless the projector p (opened from path) holds that tower and this build can use it. */
static int tower_usable(const eli_mmproj *p, const char *path, eli_mm_tower kind, eli_error *err) {
    if (kind == ELI_MM_VISION && !eli_vision_available())
        return eli_fail(err, ELI_ERR_NOT_IMPLEMENTED,
                        "this build decodes no images (built without ELI_VISION: libpng, libjpeg and libwebp)");
    if (!eli_mmproj_type(p, kind))
        return eli_fail(err, ELI_ERR_NOT_IMPLEMENTED, "projector '%s' has no %s tower (clip.has_%s_encoder)", path,
                        tower_word[kind], tower_word[kind]);
    return ELI_OK;
}

static int no_bundle_projector(const eli_tower_cache *tc, eli_mm_tower kind, eli_error *err) {
    return eli_fail(err, ELI_ERR_NOT_IMPLEMENTED, "%s input needs a projector: bundle '%s' has no vision/mmproj-*.gguf",
                    kind == ELI_MM_VISION ? "image" : "audio", tc->bundle_dir);
}

int eli_tower_cache_present(eli_tower_cache *tc, eli_mm_tower kind, eli_error *err) {
    if (!tc->bundle_path) return no_bundle_projector(tc, kind, err);
    pthread_mutex_lock(&tc->mu);
    /* an open projector answers; else the file is opened (its header only) and closed again */
    eli_mmproj *p = tc->bundle.proj ? tc->bundle.proj : eli_mmproj_open(tc->bundle_path, err);
    int rc = p ? tower_usable(p, tc->bundle_path, kind, err) : err ? err->code : ELI_ERR_INVALID_ARG;
    if (p != tc->bundle.proj) eli_mmproj_free(p);
    pthread_mutex_unlock(&tc->mu);
    return rc;
}

/* Loads the tower of that kind of projector path into s (caller holds mu; s holds path's projector or none). */
static int slot_load(slot *s, const char *path, eli_mm_tower kind, int n_embd_text, eli_error *err) {
    if (s->xt[kind]) {
        const int e = kind == ELI_MM_VISION ? eli_vision_n_embd(s->vision) : eli_audio_n_embd(s->audio);
        return e == n_embd_text ? ELI_OK
                                : eli_fail(err, ELI_ERR_INVALID_ARG, "projector '%s': %s embeddings of width %d, the text model's is %d",
                                           path, tower_word[kind], e, n_embd_text);
    }
    eli_config cfg;
    int rc = eli_config_read(&cfg, err);
    if (rc) return rc;
    if (!s->proj) {
        if (!(s->path = strdup(path))) return eli_fail(err, ELI_ERR_OOM, "out of memory");
        if (!(s->proj = eli_mmproj_open(path, err))) {
            free(s->path);
            s->path = NULL;
            return err && err->code ? err->code : ELI_ERR_INVALID_ARG;
        }
    }
    eli_vision *v = NULL;
    eli_audio *a = NULL;
    if ((rc = tower_usable(s->proj, path, kind, err))) goto fail;
    if (kind == ELI_MM_VISION ? !(v = eli_vision_load(s->proj, err)) : !(a = eli_audio_load(s->proj, err))) {
        rc = err && err->code ? err->code : ELI_ERR_INVALID_ARG;
        eli_error_prefix(err, "projector '%s'", path);
        goto fail;
    }
    const int e = v ? eli_vision_n_embd(v) : eli_audio_n_embd(a);
    if (e != n_embd_text) {
        rc = eli_fail(err, ELI_ERR_INVALID_ARG,
                      "projector '%s': its %s embeddings are %d wide (projection_dim), the text model's n_embd is %d: "
                      "it belongs to another model",
                      path, tower_word[kind], e, n_embd_text);
        goto fail;
    }
    const eli_exec_options o = {cfg.kernels, cfg.repack};
    eli_xtower *xt = v ? eli_vision_prepare(eli_exec_default(), v, &o, 0, err) : eli_audio_prepare(eli_exec_default(), a, &o, 0, err);
    if (!xt) {
        rc = err && err->code ? err->code : ELI_ERR_INVALID_ARG;
        goto fail;
    }
    s->vision = v ? v : s->vision;
    s->audio = a ? a : s->audio;
    s->xt[kind] = xt;
    return ELI_OK;
fail:
    eli_vision_free(v);
    eli_audio_free(a);
    slot_drop(s, kind); /* a projector without towers is not kept */
    return rc;
}

int eli_tower_cache_load(eli_tower_cache *tc, eli_mm_tower kind, int n_embd_text, eli_error *err) {
    if (!tc->bundle_path) return no_bundle_projector(tc, kind, err);
    pthread_mutex_lock(&tc->mu);
    int rc = slot_load(&tc->bundle, tc->bundle_path, kind, n_embd_text, err);
    pthread_mutex_unlock(&tc->mu);
    return rc;
}

int eli_tower_cache_evict(eli_tower_cache *tc, eli_mm_tower kind, eli_error *err) {
    pthread_mutex_lock(&tc->mu);
    int rc = ELI_OK;
    if (tc->holders[kind] > 0) {
        rc = eli_fail(err, ELI_ERR_INVALID_ARG, "the %s tower is in use by %d open stream(s); close them first", tower_word[kind],
                      tc->holders[kind]);
    } else {
        slot *const slots[2] = {&tc->bundle, &tc->named};
        for (int i = 0; i < 2; i++) {
            while (slots[i]->users[kind] > 0) pthread_cond_wait(&tc->idle, &tc->mu);
            slot_drop(slots[i], kind);
        }
    }
    pthread_mutex_unlock(&tc->mu);
    return rc;
}

void eli_tower_cache_hold(eli_tower_cache *tc, eli_mm_tower kind, int delta) {
    pthread_mutex_lock(&tc->mu);
    tc->holders[kind] += delta;
    pthread_mutex_unlock(&tc->mu);
}

int eli_tower_cache_begin(eli_tower_cache *tc, eli_mm_tower kind, const char *path, int n_embd_text, eli_tower_use *use,
                          eli_error *err) {
    memset(use, 0, sizeof *use);
    if (path && !*path) path = NULL;
    if (!path && !tc->bundle_path) return no_bundle_projector(tc, kind, err);
    const int named = path && (!tc->bundle_path || strcmp(path, tc->bundle_path));
    slot *s = named ? &tc->named : &tc->bundle;
    pthread_mutex_lock(&tc->mu);
    /* another projector named before: replaced once its users are done (look again after every wait) */
    while (named && s->path && strcmp(s->path, path)) {
        if (s->users[0] + s->users[1] > 0) {
            pthread_cond_wait(&tc->idle, &tc->mu);
            continue;
        }
        slot_drop(s, ELI_MM_VISION);
        slot_drop(s, ELI_MM_AUDIO);
    }
    int rc = slot_load(s, named ? path : tc->bundle_path, kind, n_embd_text, err);
    if (!rc) s->users[kind]++;
    pthread_mutex_unlock(&tc->mu);
    if (rc) return rc;
    pthread_mutex_lock(&s->encode[kind]);
    use->xt = s->xt[kind];
    use->slot = s;
    use->kind = kind;
    return ELI_OK;
}

void eli_tower_cache_end(eli_tower_cache *tc, eli_tower_use *use) {
    slot *s = use->slot;
    if (!s) return;
    pthread_mutex_unlock(&s->encode[use->kind]);
    pthread_mutex_lock(&tc->mu);
    s->users[use->kind]--;
    pthread_cond_broadcast(&tc->idle);
    pthread_mutex_unlock(&tc->mu);
    memset(use, 0, sizeof *use);
}
