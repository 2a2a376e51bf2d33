/* The multimodal towers a C ABI context keeps (ffi_mm.c, ffi_asr.c): the vision and the audio tower of the
 * bundle's projector (vision/mmproj-*.gguf), and the vision tower of the projector a call named by path
 * (the last one named: naming another replaces it once the calls using it are done). A tower is loaded on
 * first use or by mmap_acquire, bound and prepared on the default executor with the environment's options
 * (config.h: ELI_KERNELS, ELIZA_LLM_REPACK), and refused when its embeddings are not the text model's width.
 *
 * A use reserves a tower for one encode (begin ... end): the encodes of one prepared tower run one at a
 * time (exec.h). Eviction waits for the encodes in flight and is refused while holders (open ASR streams)
 * keep the audio tower, as the text model's is while streams are open. */
#ifndef ELI_TOWER_CACHE_H
#define ELI_TOWER_CACHE_H

#include "error.h"
#include "exec.h"
#include "mmproj.h"

typedef struct eli_tower_cache eli_tower_cache;

/* bundle_mmproj: the bundle's projector, NULL when it has none; bundle_dir names the bundle in messages. */
eli_tower_cache *eli_tower_cache_new(const char *bundle_mmproj, const char *bundle_dir, eli_error *err);
/* Frees every tower (no use may be in flight). NULL-safe. */
void eli_tower_cache_free(eli_tower_cache *tc);

/* ELI_OK when the bundle's tower of that kind can be loaded, else ELI_ERR_NOT_IMPLEMENTED naming what is
 * missing: a projector in the bundle, image decoding in this build (vision), that tower in the projector. */
int eli_tower_cache_present(eli_tower_cache *tc, eli_mm_tower kind, eli_error *err);
/* Loads the bundle's tower of that kind (mmap_acquire); n_embd_text is the text model's width. */
int eli_tower_cache_load(eli_tower_cache *tc, eli_mm_tower kind, int n_embd_text, eli_error *err);
/* Drops every tower of that kind (mmap_evict): waits for the encodes in flight; ELI_ERR_INVALID_ARG while
 * holders keep it. */
int eli_tower_cache_evict(eli_tower_cache *tc, eli_mm_tower kind, eli_error *err);
/* A holder of the bundle's tower of that kind comes (+1) or goes (-1). */
void eli_tower_cache_hold(eli_tower_cache *tc, eli_mm_tower kind, int delta);

typedef struct eli_tower_use {
    eli_xtower *xt; /* the prepared tower, for one encode (eli_vision_encode, eli_audio_embed) */
    void *slot;
    eli_mm_tower kind;
} eli_tower_use;
/* Reserves the tower of that kind of projector path (NULL or the bundle's path: the bundle's), loading it
 * first when needed; eli_tower_cache_end gives it back. */
int eli_tower_cache_begin(eli_tower_cache *tc, eli_mm_tower kind, const char *path, int n_embd_text, eli_tower_use *use,
                          eli_error *err);
void eli_tower_cache_end(eli_tower_cache *tc, eli_tower_use *use);

#endif
