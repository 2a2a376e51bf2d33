/* The eliza_inference_* C ABI: argument validation, the out_error convention, the bundle context and the
 * dispatch of every stream call to the backend that opened it.
 *
 * Handles are checked against registries of live objects (handles.h) and referenced for the duration of
 * every call, so a call on a closed stream or destroyed context is an error, not a crash, and closing a
 * handle waits for the calls other threads are making on it. A context's text model is used by calls
 * without a stream (tokenize, detokenize, embed, eot_score) under a read lock that loading and evicting
 * take for writing: an eviction never frees a model a call is still reading. */
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "bundle.h"
#include "config.h"
#include "eliza_inference.h"
#include "engine.h"
#include "exec.h"
#include "ffi_internal.h"
#include "grammar_vocab.h"
#include "handles.h"
#include "kv_types.h"
#include "model.h"
#include "sampler.h"
#include "tokenizer.h"

struct EliInferenceContext {
    eli_bundle bundle;
    pthread_mutex_t mu;           /* serializes loads, evictions and stream registration */
    pthread_cond_t streams_gone;  /* n_streams dropped (destroy waits for 0) */
    pthread_rwlock_t use;         /* read: a call using the text model without a stream; write: (un)setting it */
    eli_model *model;
    eli_xmodel *xm; /* model, prepared on the default executor */
    eli_tokenizer *tok;
    eli_grammar_vocab *gvocab; /* tok's index for grammars, built by the first stream with one */
    eli_model *drafter; /* the bundle's mtp/ drafter, bound to model */
    eli_xmodel *xdrafter;
    int n_streams;
    pthread_mutex_t verify_mu; /* recursive: held while the verifier callback runs, which may clear itself */
    eliza_verifier_cb verify_cb;
    void *verify_user;
};

struct EliLlmStream {
    EliInferenceContext *ctx;
    const eli_backend *backend;
    eli_backend_session *session;
    atomic_int cancel;
};

/* ---- errors ---- */

static void set_error(char **out_error, const char *fn, const char *msg) {
    if (!out_error) return;
    const char *prefix = "[libelizainference] ";
    size_t n = strlen(prefix) + strlen(fn) + 2 + strlen(msg) + 1;
    char *s = malloc(n);
    if (s) snprintf(s, n, "%s%s: %s", prefix, fn, msg);
    *out_error = s;
}

int eli_ffi_fail(char **out_error, const char *fn, int code, const char *fmt, ...) {
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    set_error(out_error, fn, msg);
    return code;
}

int eli_ffi_fail_err(char **out_error, const char *fn, const eli_error *err) {
    set_error(out_error, fn, err->msg);
    return err->code < 0 ? err->code : ELIZA_ERR_INVALID_ARG;
}

int eli_ffi_absent(char **out_error, const char *fn, const char *family) {
    return eli_ffi_fail(out_error, fn, ELIZA_ERR_NOT_IMPLEMENTED, "%s", family);
}

/* ---- live handles ---- */

static eli_handle_set live_contexts = ELI_HANDLE_SET_INIT;
static eli_handle_set live_streams = ELI_HANDLE_SET_INIT;

/* A host that unloads the library (dlclose) gets the registries' memory back. */
__attribute__((destructor)) static void free_registries(void) {
    eli_handle_set_free(&live_streams);
    eli_handle_set_free(&live_contexts);
}

#define BAD_CTX "invalid or destroyed context"
#define BAD_STREAM "invalid or closed stream"

/* ---- version, probes, ownership ---- */

const char *eliza_inference_abi_version(void) { return ELIZA_INFERENCE_ABI_VERSION; }

const char *eliza_inference_strerror(int code) {
    switch (code) {
    case ELIZA_ERR_NOT_IMPLEMENTED: return "ELIZA_ERR_NOT_IMPLEMENTED: this build or bundle lacks the feature";
    case ELIZA_ERR_INVALID_ARG: return "ELIZA_ERR_INVALID_ARG: a bad argument, handle, configuration, state or file";
    case ELIZA_ERR_BUNDLE_INVALID: return "ELIZA_ERR_BUNDLE_INVALID: the bundle or one of its model files is unusable";
    case ELIZA_ERR_FFI_FAULT: return "ELIZA_ERR_FFI_FAULT: an internal invariant failed";
    case ELIZA_ERR_OOM: return "ELIZA_ERR_OOM: out of memory";
    case ELIZA_ERR_ABI_MISMATCH: return "ELIZA_ERR_ABI_MISMATCH: a struct or file of another ABI generation";
    case ELIZA_ERR_CANCELLED: return "ELIZA_ERR_CANCELLED: the stream was cancelled";
    default: return code >= 0 ? "ELIZA_OK" : "unknown status code";
    }
}

int eliza_inference_llm_stream_supported(void) { return 1; }
int eliza_inference_llm_mtp_supported(void) { return 1; }
int eliza_inference_llm_kv_quant_supported(void) { return 1; }
int eliza_inference_tokenize_supported(void) { return 1; }
int eliza_inference_embed_supported(void) { return 1; }
int eliza_inference_llm_eot_supported(void) { return 1; }
void eliza_inference_free_string(char *s) { free(s); }
void eliza_inference_free_tokens(int32_t *tokens) { free(tokens); }

/* ---- context ---- */

/* The prepared models go before the models they rewired. */
static void drop_drafter(EliInferenceContext *c) {
    eli_xmodel_release(c->xdrafter);
    eli_model_free(c->drafter);
    c->xdrafter = NULL;
    c->drafter = NULL;
}

static void drop_text(EliInferenceContext *c) {
    drop_drafter(c);
    eli_xmodel_release(c->xm);
    eli_grammar_vocab_free(c->gvocab);
    c->gvocab = NULL;
    eli_tokenizer_free(c->tok);
    eli_model_free(c->model);
    c->xm = NULL;
    c->tok = NULL;
    c->model = NULL;
}

static void free_context(EliInferenceContext *c) {
    drop_text(c);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->streams_gone);
    pthread_rwlock_destroy(&c->use);
    pthread_mutex_destroy(&c->verify_mu);
    eli_bundle_free(&c->bundle);
}

EliInferenceContext *eliza_inference_create(const char *bundle_dir, char **out_error) {
    static const char fn[] = "eliza_inference_create";
    EliInferenceContext *c = calloc(1, sizeof *c);
    if (!c) {
        eli_ffi_fail(out_error, fn, ELIZA_ERR_OOM, "out of memory");
        return NULL;
    }
    eli_error err = {0};
    if (eli_bundle_open(bundle_dir, &c->bundle, &err)) {
        free(c);
        eli_ffi_fail_err(out_error, fn, &err);
        return NULL;
    }
    pthread_mutexattr_t recursive;
    pthread_mutexattr_init(&recursive);
    pthread_mutexattr_settype(&recursive, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->streams_gone, NULL);
    pthread_rwlockattr_t prefer_writer;
    pthread_rwlockattr_init(&prefer_writer);
#if defined(__GLIBC__)
    /* glibc's default lets a steady stream of readers (tokenize on several threads) starve an eviction */
    pthread_rwlockattr_setkind_np(&prefer_writer, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
#endif
    pthread_rwlock_init(&c->use, &prefer_writer);
    pthread_rwlockattr_destroy(&prefer_writer);
    pthread_mutex_init(&c->verify_mu, &recursive);
    pthread_mutexattr_destroy(&recursive);
    if (!eli_handle_add(&live_contexts, c)) {
        free_context(c);
        free(c);
        eli_ffi_fail(out_error, fn, ELIZA_ERR_OOM, "out of memory");
        return NULL;
    }
    return c;
}

/* A model of the bundle loaded and prepared on the default executor with the configured options. */
static int load_prepared(const char *path, eli_model **m, eli_xmodel **xm, const eli_model *target, eli_error *err) {
    eli_config cfg;
    int rc = eli_config_read(&cfg, err);
    if (rc) return rc;
    const eli_exec_options o = {cfg.kernels, cfg.repack};
    if (!(*m = eli_model_load(path, err))) return err->code ? err->code : ELI_ERR_INVALID_ARG;
    if ((target && (rc = eli_model_bind_assistant(*m, target, err))) ||
        !(*xm = eli_exec_prepare(eli_exec_default(), *m, &o, err))) {
        eli_error_prefix(err, "%s", path);
        eli_model_free(*m);
        *m = NULL;
        return err->code ? err->code : ELI_ERR_INVALID_ARG;
    }
    return ELI_OK;
}

/* Loads the text model and its tokenizer (caller holds c->mu); they are published under the write lock. */
static int load_text_locked(EliInferenceContext *c, eli_error *err) {
    if (c->model) return ELI_OK;
    eli_model *m;
    eli_xmodel *xm;
    int rc = load_prepared(c->bundle.text_path, &m, &xm, NULL, err);
    if (rc) return rc;
    eli_tokenizer *t = eli_tokenizer_load(m->file, err);
    if (!t) {
        eli_error_prefix(err, "%s", c->bundle.text_path);
        eli_xmodel_release(xm);
        eli_model_free(m);
        return err->code ? err->code : ELI_ERR_INVALID_ARG;
    }
    pthread_rwlock_wrlock(&c->use);
    c->model = m;
    c->xm = xm;
    c->tok = t;
    pthread_rwlock_unlock(&c->use);
    return ELI_OK;
}

/* Loads the bundle's drafter and binds it to the text model (caller holds c->mu). */
static int load_mtp_locked(EliInferenceContext *c, eli_error *err) {
    int rc = load_text_locked(c, err);
    if (rc || c->drafter) return rc;
    if (!c->bundle.mtp_path)
        return eli_fail(err, ELI_ERR_NOT_IMPLEMENTED, "bundle '%s' has no mtp/*.gguf drafter", c->bundle.dir);
    return load_prepared(c->bundle.mtp_path, &c->drafter, &c->xdrafter, c->model, err);
}

/* Read-locks the context's text model, loading it first when needed; text_end unlocks. */
static int text_begin(EliInferenceContext *c, eli_error *err) {
    for (;;) {
        pthread_rwlock_rdlock(&c->use);
        if (c->model) return ELI_OK;
        pthread_rwlock_unlock(&c->use);
        pthread_mutex_lock(&c->mu);
        int rc = load_text_locked(c, err);
        pthread_mutex_unlock(&c->mu);
        if (rc) return rc;
        /* an eviction may come in between: look again */
    }
}

static void text_end(EliInferenceContext *c) { pthread_rwlock_unlock(&c->use); }

static void raise_cancel(void *p) { atomic_store(&((EliLlmStream *)p)->cancel, 1); }

static void close_retired_stream(EliLlmStream *s) {
    EliInferenceContext *c = s->ctx;
    s->backend->close(s->session);
    pthread_mutex_lock(&c->mu);
    if (--c->n_streams == 0) pthread_cond_broadcast(&c->streams_gone);
    pthread_mutex_unlock(&c->mu);
    eli_handle_bury(&live_streams, s);
}

static int stream_of_context(const void *s, const void *c) { return ((const EliLlmStream *)s)->ctx == c; }

void eliza_inference_destroy(EliInferenceContext *c) {
    /* no new call gets c from here on; the calls in flight finish first */
    if (!eli_handle_retire(&live_contexts, c, NULL)) return;
    /* the streams still open on it are closed with it (cancelled first, waited for) */
    for (EliLlmStream *s; (s = eli_handle_find(&live_streams, stream_of_context, c));)
        if (eli_handle_retire(&live_streams, s, raise_cancel)) close_retired_stream(s);
    /* a close racing this one on another thread finishes before c goes */
    pthread_mutex_lock(&c->mu);
    while (c->n_streams > 0) pthread_cond_wait(&c->streams_gone, &c->mu);
    pthread_mutex_unlock(&c->mu);
    free_context(c);
    eli_handle_bury(&live_contexts, c);
}

/* ---- regions ---- */

enum region { R_TEXT, R_MTP, R_VISION, R_ASR, R_TTS, R_VAD, R_WAKEWORD };

static int parse_region(const char *name, enum region *r, char **out_error, const char *fn) {
    static const struct {
        const char *name;
        enum region r;
    } regions[] = {{"text", R_TEXT},  {"mtp", R_MTP}, {"dflash", R_MTP}, {"vision", R_VISION},
                   {"asr", R_ASR},    {"tts", R_TTS}, {"vad", R_VAD},    {"wakeword", R_WAKEWORD}};
    if (!name) return eli_ffi_fail(out_error, fn, ELIZA_ERR_INVALID_ARG, "region is NULL");
    for (size_t i = 0; i < sizeof regions / sizeof regions[0]; i++)
        if (!strcmp(name, regions[i].name)) {
            *r = regions[i].r;
            return ELIZA_OK;
        }
    return eli_ffi_fail(out_error, fn, ELIZA_ERR_INVALID_ARG,
                "unknown region '%s' (known: text, mtp, dflash, vision, asr, tts, vad, wakeword)", name);
}

/* ELIZA_OK when the region's component exists in this build and bundle, else NOT_IMPLEMENTED naming it. */
static int region_present(const EliInferenceContext *c, enum region r, const char *name, char **out_error,
                          const char *fn) {
    switch (r) {
    case R_TEXT: return ELIZA_OK;
    case R_MTP:
        return c->bundle.mtp_path ? ELIZA_OK
                                  : eli_ffi_fail(out_error, fn, ELIZA_ERR_NOT_IMPLEMENTED,
                                         "region '%s': bundle '%s' has no mtp/*.gguf drafter", name, c->bundle.dir);
    case R_VISION:
    case R_ASR:
        return eli_ffi_fail(out_error, fn, ELIZA_ERR_NOT_IMPLEMENTED, "region '%s': this build has no %s", name,
                    r == R_VISION ? "image input (Gemma 4 vision is not built in)"
                                  : "speech recognition (Gemma 4 audio input is not built in)");
    default:
        return eli_ffi_fail(out_error, fn, ELIZA_ERR_NOT_IMPLEMENTED, "region '%s': this build has no %s engine", name,
                    r == R_TTS ? "text-to-speech" : r == R_VAD ? "voice activity" : "wake-word");
    }
}

int eliza_inference_mmap_acquire(EliInferenceContext *c, const char *region, char **out_error) {
    static const char fn[] = "eliza_inference_mmap_acquire";
    if (!eli_handle_acquire(&live_contexts, c)) return eli_ffi_fail(out_error, fn, ELIZA_ERR_INVALID_ARG, BAD_CTX);
    enum region r = R_TEXT;
    int rc = parse_region(region, &r, out_error, fn);
    if (!rc) rc = region_present(c, r, region, out_error, fn);
    if (!rc) {
        eli_error err = {0};
        pthread_mutex_lock(&c->mu);
        rc = r == R_MTP ? load_mtp_locked(c, &err) : load_text_locked(c, &err);
        pthread_mutex_unlock(&c->mu);
        if (rc) rc = eli_ffi_fail_err(out_error, fn, &err);
    }
    eli_handle_release(&live_contexts, c);
    return rc;
}

int eliza_inference_mmap_evict(EliInferenceContext *c, const char *region, char **out_error) {
    static const char fn[] = "eliza_inference_mmap_evict";
    if (!eli_handle_acquire(&live_contexts, c)) return eli_ffi_fail(out_error, fn, ELIZA_ERR_INVALID_ARG, BAD_CTX);
    enum region r = R_TEXT;
    int rc = parse_region(region, &r, out_error, fn);
    if (!rc) rc = region_present(c, r, region, out_error, fn);
    if (!rc) {
        pthread_mutex_lock(&c->mu);
        if (c->n_streams > 0) {
            rc = eli_ffi_fail(out_error, fn, ELIZA_ERR_INVALID_ARG, "region '%s' is in use by %d open stream(s); close them first",
                      region, c->n_streams);
        } else {
            /* the drafter is bound to the text model, so it goes with it; calls reading the model finish first */
            pthread_rwlock_wrlock(&c->use);
            if (r == R_TEXT) drop_text(c);
            else drop_drafter(c);
            pthread_rwlock_unlock(&c->use);
        }
        pthread_mutex_unlock(&c->mu);
    }
    eli_handle_release(&live_contexts, c);
    return rc;
}

/* ---- speculative-decoding events ---- */

int eliza_inference_set_verifier_callback(EliInferenceContext *c, eliza_verifier_cb cb, void *user_data,
                                          char **out_error) {
    static const char fn[] = "eliza_inference_set_verifier_callback";
    if (!eli_handle_acquire(&live_contexts, c)) return eli_ffi_fail(out_error, fn, ELIZA_ERR_INVALID_ARG, BAD_CTX);
    /* taken while an invocation runs: after this returns the old callback is never called again */
    pthread_mutex_lock(&c->verify_mu);
    c->verify_cb = cb;
    c->verify_user = cb ? user_data : NULL;
    pthread_mutex_unlock(&c->verify_mu);
    eli_handle_release(&live_contexts, c);
    return ELIZA_OK;
}

static void verify_event(void *user, const EliVerifierEvent *ev) {
    EliInferenceContext *c = user; /* alive: a context outlives its streams */
    pthread_mutex_lock(&c->verify_mu);
    if (c->verify_cb) c->verify_cb(ev, c->verify_user);
    pthread_mutex_unlock(&c->verify_mu);
}

/* ---- streams ---- */

/* Validates the parts of the config every backend relies on. */
static int check_config(const eliza_llm_stream_config_t *cfg, char **out_error, const char *fn) {
    if (!isfinite(cfg->temperature) || !isfinite(cfg->top_p) || !isfinite(cfg->repeat_penalty))
        return eli_ffi_fail(out_error, fn, ELIZA_ERR_INVALID_ARG, "temperature, top_p and repeat_penalty must be finite");
    if (cfg->repeat_penalty < 0)
        return eli_ffi_fail(out_error, fn, ELIZA_ERR_INVALID_ARG, "repeat_penalty %g is negative", (double)cfg->repeat_penalty);
    if (cfg->context_size < 0)
        return eli_ffi_fail(out_error, fn, ELIZA_ERR_INVALID_ARG,
                    "context_size %d is negative (a host built against the older 80-byte struct passes whatever lies "
                    "at offset 80: pass the 88-byte eliza_llm_stream_config_t)",
                    cfg->context_size);
    if (cfg->draft_min < 0 || cfg->draft_max < 0 || (cfg->draft_max > 0 && cfg->draft_min > cfg->draft_max))
        return eli_ffi_fail(out_error, fn, ELIZA_ERR_INVALID_ARG, "draft_min %d / draft_max %d are not a valid window",
                    cfg->draft_min, cfg->draft_max);
    uint32_t tk, tv;
    eli_error err = {0};
    if (eli_kv_types_from_names(cfg->cache_type_k, cfg->cache_type_v, &tk, &tv, &err)) return eli_ffi_fail_err(out_error, fn, &err);
    return ELIZA_OK;
}

static EliLlmStream *open_stream(EliInferenceContext *c, const eliza_llm_stream_config_t *cfg, char **out_error,
                                 const char *fn) {
    if (!cfg) {
        eli_ffi_fail(out_error, fn, ELIZA_ERR_INVALID_ARG, "cfg is NULL");
        return NULL;
    }
    if (check_config(cfg, out_error, fn)) return NULL;
    eli_error err = {0};
    eli_config knobs;
    const eli_backend *be = eli_config_read(&knobs, &err) ? NULL : eli_backend_select(c->bundle.dir, knobs.backend, &err);
    if (!be) {
        eli_ffi_fail_err(out_error, fn, &err);
        return NULL;
    }
    EliLlmStream *s = calloc(1, sizeof *s);
    if (!s) {
        eli_ffi_fail(out_error, fn, ELIZA_ERR_OOM, "out of memory");
        return NULL;
    }
    s->ctx = c;
    s->backend = be;
    atomic_init(&s->cancel, 0);
    pthread_mutex_lock(&c->mu);
    const int bundle_mtp = cfg->draft_min > 0 && cfg->draft_max > 0 && !(cfg->mtp_drafter_path && *cfg->mtp_drafter_path);
    int rc = bundle_mtp ? load_mtp_locked(c, &err) : load_text_locked(c, &err);
    /* the grammar index of the tokenizer: built once (a fraction of a second), shared by every stream */
    if (!rc && cfg->gbnf_grammar && *cfg->gbnf_grammar && !c->gvocab) rc = eli_grammar_vocab_new(c->tok, &c->gvocab, &err);
    if (!rc) {
        const eli_backend_env env = {.bundle_dir = c->bundle.dir, .text_path = c->bundle.text_path,
                                     .mtp_path = c->bundle.mtp_path, .xm = c->xm, .tok = c->tok,
                                     .drafter = bundle_mtp ? c->xdrafter : NULL, .config = &knobs,
                                     .grammar_vocab = c->gvocab, .on_verify = verify_event, .on_verify_user = c};
        s->session = be->open(&env, cfg, &err);
        if (!s->session) rc = err.code ? err.code : ELI_ERR_INVALID_ARG;
    }
    if (!rc) c->n_streams++;
    pthread_mutex_unlock(&c->mu);
    if (rc) {
        free(s);
        eli_ffi_fail_err(out_error, fn, &err);
        return NULL;
    }
    if (!eli_handle_add(&live_streams, s)) {
        close_retired_stream(s);
        eli_ffi_fail(out_error, fn, ELIZA_ERR_OOM, "out of memory");
        return NULL;
    }
    return s;
}

EliLlmStream *eliza_inference_llm_stream_open(EliInferenceContext *c, const eliza_llm_stream_config_t *cfg,
                                              char **out_error) {
    static const char fn[] = "eliza_inference_llm_stream_open";
    if (!eli_handle_acquire(&live_contexts, c)) {
        eli_ffi_fail(out_error, fn, ELIZA_ERR_INVALID_ARG, BAD_CTX);
        return NULL;
    }
    EliLlmStream *s = open_stream(c, cfg, out_error, fn);
    eli_handle_release(&live_contexts, c);
    return s;
}

int eliza_inference_llm_stream_prefill(EliLlmStream *s, const int32_t *ids, size_t n, char **out_error) {
    static const char fn[] = "eliza_inference_llm_stream_prefill";
    if (!eli_handle_acquire(&live_streams, s)) return eli_ffi_fail(out_error, fn, ELIZA_ERR_INVALID_ARG, BAD_STREAM);
    int rc = ELIZA_OK;
    eli_error err = {0};
    if (n && !ids) rc = eli_ffi_fail(out_error, fn, ELIZA_ERR_INVALID_ARG, "ids is NULL with n = %zu", n);
    else if (atomic_load(&s->cancel)) rc = eli_ffi_fail(out_error, fn, ELIZA_ERR_CANCELLED, "stream was cancelled");
    else if (s->backend->prefill(s->session, ids, n, &s->cancel, &err) < 0) rc = eli_ffi_fail_err(out_error, fn, &err);
    eli_handle_release(&live_streams, s);
    return rc;
}

int eliza_inference_llm_stream_next(EliLlmStream *s, int32_t *tokens_out, size_t tokens_cap, size_t *num_tokens_out,
                                    char *text_out, size_t text_cap, int32_t *drafted, int32_t *accepted,
                                    char **out_error) {
    static const char fn[] = "eliza_inference_llm_stream_next";
    if (num_tokens_out) *num_tokens_out = 0;
    if (drafted) *drafted = 0;
    if (accepted) *accepted = 0;
    if (text_out && text_cap) text_out[0] = '\0';
    if (!tokens_out || !tokens_cap) return eli_ffi_fail(out_error, fn, ELIZA_ERR_INVALID_ARG, "tokens_out is NULL or tokens_cap is 0");
    if (!num_tokens_out) return eli_ffi_fail(out_error, fn, ELIZA_ERR_INVALID_ARG, "num_tokens_out is NULL");
    if (!text_out && text_cap) return eli_ffi_fail(out_error, fn, ELIZA_ERR_INVALID_ARG, "text_out is NULL with text_cap %zu", text_cap);
    if (text_cap && text_cap < 5)
        return eli_ffi_fail(out_error, fn, ELIZA_ERR_INVALID_ARG,
                    "text_cap %zu cannot hold one UTF-8 character and the NUL (need >= 5, or 0 for no text)", text_cap);
    if (!eli_handle_acquire(&live_streams, s)) return eli_ffi_fail(out_error, fn, ELIZA_ERR_INVALID_ARG, BAD_STREAM);
    int rc;
    eli_error err = {0};
    if (atomic_load(&s->cancel)) rc = eli_ffi_fail(out_error, fn, ELIZA_ERR_CANCELLED, "stream was cancelled");
    else if ((rc = s->backend->next(s->session, tokens_out, tokens_cap, num_tokens_out, text_out, text_cap, drafted,
                                    accepted, &s->cancel, &err)) < 0)
        rc = eli_ffi_fail_err(out_error, fn, &err);
    eli_handle_release(&live_streams, s);
    return rc;
}

int eliza_inference_llm_stream_cancel(EliLlmStream *s) {
    /* the reference keeps s alive across the store, whatever close does on another thread */
    if (!eli_handle_acquire(&live_streams, s)) return ELIZA_ERR_INVALID_ARG;
    atomic_store(&s->cancel, 1);
    eli_handle_release(&live_streams, s);
    return ELIZA_OK;
}

int eliza_inference_llm_stream_reset(EliLlmStream *s) {
    if (!eli_handle_acquire(&live_streams, s)) return ELIZA_ERR_INVALID_ARG;
    atomic_store(&s->cancel, 0);
    int rc = s->backend->reset(s->session);
    eli_handle_release(&live_streams, s);
    return rc;
}

int eliza_inference_llm_stream_reset_keep(EliLlmStream *s, int32_t n_keep) {
    if (!eli_handle_acquire(&live_streams, s)) return ELIZA_ERR_INVALID_ARG;
    atomic_store(&s->cancel, 0);
    int rc = s->backend->reset_keep(s->session, n_keep < 0 ? 0 : n_keep);
    eli_handle_release(&live_streams, s);
    return rc;
}

static int slot_io(EliLlmStream *s, const char *path, int save, char **out_error, const char *fn) {
    if (!eli_handle_acquire(&live_streams, s)) return eli_ffi_fail(out_error, fn, ELIZA_ERR_INVALID_ARG, BAD_STREAM);
    int rc = ELIZA_OK;
    eli_error err = {0};
    if (!path || !*path) rc = eli_ffi_fail(out_error, fn, ELIZA_ERR_INVALID_ARG, "path is NULL or empty");
    else if ((save ? s->backend->save : s->backend->restore)(s->session, path, &err)) rc = eli_ffi_fail_err(out_error, fn, &err);
    eli_handle_release(&live_streams, s);
    return rc;
}

int eliza_inference_llm_stream_save_slot(EliLlmStream *s, const char *path, char **out_error) {
    return slot_io(s, path, 1, out_error, "eliza_inference_llm_stream_save_slot");
}

int eliza_inference_llm_stream_restore_slot(EliLlmStream *s, const char *path, char **out_error) {
    return slot_io(s, path, 0, out_error, "eliza_inference_llm_stream_restore_slot");
}

void eliza_inference_llm_stream_close(EliLlmStream *s) {
    if (eli_handle_retire(&live_streams, s, raise_cancel)) close_retired_stream(s);
}

/* ---- text utilities ---- */

int eliza_inference_tokenize(EliInferenceContext *c, const char *text, size_t text_len, int add_special,
                             int parse_special, int32_t **out_tokens, size_t *out_n, char **out_error) {
    static const char fn[] = "eliza_inference_tokenize";
    if (out_tokens) *out_tokens = NULL;
    if (out_n) *out_n = 0;
    if (!out_tokens || !out_n) return eli_ffi_fail(out_error, fn, ELIZA_ERR_INVALID_ARG, "out_tokens or out_n is NULL");
    if (!text && text_len) return eli_ffi_fail(out_error, fn, ELIZA_ERR_INVALID_ARG, "text is NULL with text_len %zu", text_len);
    if (!eli_handle_acquire(&live_contexts, c)) return eli_ffi_fail(out_error, fn, ELIZA_ERR_INVALID_ARG, BAD_CTX);
    eli_error err = {0};
    int rc = text_begin(c, &err);
    int32_t *ids = NULL;
    size_t n = 0;
    if (!rc) {
        rc = eli_tokenize(c->tok, text ? text : "", text_len, add_special, parse_special, &ids, &n, &err);
        text_end(c);
    }
    eli_handle_release(&live_contexts, c);
    if (rc) return eli_ffi_fail_err(out_error, fn, &err);
    if (!ids && !(ids = malloc(sizeof *ids))) return eli_ffi_fail(out_error, fn, ELIZA_ERR_OOM, "out of memory");
    *out_tokens = ids;
    *out_n = n;
    return ELIZA_OK;
}

/* The longest prefix of text[0..len) of at most cap bytes that does not end inside a UTF-8 character. */
static size_t utf8_prefix(const char *text, size_t len, size_t cap) {
    if (len <= cap) return len;
    size_t n = cap;
    while (n > 0 && ((unsigned char)text[n] & 0xC0) == 0x80) n--;
    return n;
}

int eliza_inference_detokenize(EliInferenceContext *c, const int32_t *tokens, size_t n, int remove_special,
                               int unparse_special, char *out_text, size_t max_text_bytes, char **out_error) {
    static const char fn[] = "eliza_inference_detokenize";
    if (n && !tokens) return eli_ffi_fail(out_error, fn, ELIZA_ERR_INVALID_ARG, "tokens is NULL with n = %zu", n);
    if (!out_text || !max_text_bytes) return eli_ffi_fail(out_error, fn, ELIZA_ERR_INVALID_ARG, "out_text is NULL or max_text_bytes is 0");
    if (n > (size_t)INT32_MAX) return eli_ffi_fail(out_error, fn, ELIZA_ERR_INVALID_ARG, "too many tokens");
    out_text[0] = '\0';
    if (!eli_handle_acquire(&live_contexts, c)) return eli_ffi_fail(out_error, fn, ELIZA_ERR_INVALID_ARG, BAD_CTX);
    eli_error err = {0};
    char *text = NULL;
    size_t len = 0;
    int rc = text_begin(c, &err);
    if (!rc) {
        rc = eli_detokenize(c->tok, tokens, n, remove_special, unparse_special, &text, &len, &err);
        text_end(c);
    }
    eli_handle_release(&live_contexts, c);
    if (rc) return eli_ffi_fail_err(out_error, fn, &err);
    /* a short buffer gets what fits, cut at a character boundary (the hosts' contract) */
    const size_t cap = max_text_bytes - 1 < (size_t)INT32_MAX ? max_text_bytes - 1 : (size_t)INT32_MAX;
    const size_t w = utf8_prefix(text, len, cap);
    memcpy(out_text, text, w);
    out_text[w] = '\0';
    free(text);
    return (int)w;
}

/* One pass over ids on the selected backend (caller holds the text read lock): the hidden states of every
 * row when hidden is set, else the last row's logits. */
static int run_once(EliInferenceContext *c, const eli_config *knobs, const int32_t *ids, size_t n, float *hidden,
                    float *logits, eli_error *err) {
    const eli_backend *be = eli_backend_select(c->bundle.dir, knobs->backend, err);
    if (!be) return err->code;
    if (!be->run_once) return eli_fail(err, ELI_ERR_NOT_IMPLEMENTED, "backend '%s' has no embedding or scoring pass", be->name);
    const eli_backend_env env = {.bundle_dir = c->bundle.dir, .text_path = c->bundle.text_path, .mtp_path = c->bundle.mtp_path,
                                 .xm = c->xm, .tok = c->tok, .config = knobs};
    return be->run_once(&env, ids, n, hidden, logits, err);
}

/* embed's work under the text read lock: tokenize, decode, pool, normalize into out[E]. */
static int embed_locked(EliInferenceContext *c, const char *text, size_t text_len, int pooling, float *out, eli_error *err) {
    const int E = c->model->hp.n_embd;
    int32_t *ids = NULL;
    size_t n = 0;
    int rc = eli_tokenize(c->tok, text ? text : "", text_len, 1, 0, &ids, &n, err);
    if (rc) return rc;
    if (n > (size_t)c->model->hp.n_ctx_train) {
        free(ids);
        return eli_fail(err, ELI_ERR_INVALID_ARG, "text is %zu tokens, more than the context %d", n, c->model->hp.n_ctx_train);
    }
    float *hidden = n ? malloc(n * (size_t)E * sizeof *hidden) : NULL;
    if (n && !hidden) {
        free(ids);
        return eli_fail(err, ELI_ERR_OOM, "out of memory");
    }
    eli_config knobs;
    if (!(rc = eli_config_read(&knobs, err)) && n) rc = run_once(c, &knobs, ids, n, hidden, NULL, err);
    free(ids);
    if (rc) {
        free(hidden);
        return rc;
    }
    double norm = 0;
    for (int i = 0; i < E; i++) {
        double v = 0;
        if (n && pooling == ELIZA_POOLING_MEAN) {
            for (size_t t = 0; t < n; t++) v += hidden[t * (size_t)E + (size_t)i];
            v /= (double)n;
        } else if (n) {
            v = hidden[(pooling == ELIZA_POOLING_CLS ? 0 : n - 1) * (size_t)E + (size_t)i];
        }
        out[i] = (float)v;
        norm += v * v;
    }
    free(hidden);
    if (norm > 0) {
        const double inv = 1.0 / sqrt(norm);
        for (int i = 0; i < E; i++) out[i] = (float)(out[i] * inv);
    }
    return ELI_OK;
}

int eliza_inference_embed(EliInferenceContext *c, const char *text, size_t text_len, int pooling, float *out,
                          size_t out_capacity, int *out_dim, char **out_error) {
    static const char fn[] = "eliza_inference_embed";
    if (pooling != ELIZA_POOLING_MEAN && pooling != ELIZA_POOLING_CLS && pooling != ELIZA_POOLING_LAST)
        return eli_ffi_fail(out_error, fn, ELIZA_ERR_INVALID_ARG, "pooling %d is not MEAN (1), CLS (2) or LAST (3)", pooling);
    if (!text && text_len) return eli_ffi_fail(out_error, fn, ELIZA_ERR_INVALID_ARG, "text is NULL with text_len %zu", text_len);
    if (!eli_handle_acquire(&live_contexts, c)) return eli_ffi_fail(out_error, fn, ELIZA_ERR_INVALID_ARG, BAD_CTX);
    eli_error err = {0};
    int rc = text_begin(c, &err);
    if (!rc) {
        const int E = c->model->hp.n_embd;
        if (out_dim) *out_dim = E;
        if (!out) rc = eli_fail(&err, ELI_ERR_INVALID_ARG, "out is NULL (*out_dim now holds the dimension, %d)", E);
        else if (out_capacity < (size_t)E)
            rc = eli_fail(&err, ELI_ERR_INVALID_ARG, "out_capacity %zu is smaller than the embedding dimension %d",
                          out_capacity, E);
        else rc = embed_locked(c, text, text_len, pooling, out, &err);
        text_end(c);
    }
    eli_handle_release(&live_contexts, c);
    return rc ? eli_ffi_fail_err(out_error, fn, &err) : ELIZA_OK;
}

/* eot_score's work under the text read lock. */
static int eot_locked(EliInferenceContext *c, const int32_t *ids, size_t n, int32_t target_id, float *out_target_prob,
                      int32_t *out_top_token, float *out_top_prob, eli_error *err) {
    const int V = c->model->hp.n_vocab;
    if (target_id < 0 || target_id >= V)
        return eli_fail(err, ELI_ERR_INVALID_ARG, "target_id %d is outside the vocabulary [0, %d)", target_id, V);
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= V)
            return eli_fail(err, ELI_ERR_INVALID_ARG, "token id %d at index %zu is outside the vocabulary [0, %d)", ids[i], i, V);
    /* more ids than the scoring context holds: the last ones that fit (the end of the turn is what counts) */
    eli_config knobs;
    int64_t cap;
    int rc = eli_config_read(&knobs, err);
    if (rc || (rc = eli_gen_context_size(0, c->model, knobs.n_ctx, &cap, err))) return rc;
    if (n > (size_t)cap) ids += n - (size_t)cap, n = (size_t)cap;
    float *logits = malloc((size_t)V * sizeof *logits);
    if (!logits) return eli_fail(err, ELI_ERR_OOM, "out of memory");
    if ((rc = run_once(c, &knobs, ids, n, NULL, logits, err))) {
        free(logits);
        return rc;
    }
    eli_softmax(logits, (size_t)V, logits); /* in place */
    int top = 0;
    for (int i = 1; i < V; i++)
        if (logits[i] > logits[top]) top = i;
    if (out_target_prob) *out_target_prob = logits[target_id];
    if (out_top_token) *out_top_token = top;
    if (out_top_prob) *out_top_prob = logits[top];
    free(logits);
    return ELI_OK;
}

int eliza_inference_llm_eot_score(EliInferenceContext *c, const int32_t *ids, size_t n, int32_t target_id,
                                  float *out_target_prob, int32_t *out_top_token, float *out_top_prob,
                                  char **out_error) {
    static const char fn[] = "eliza_inference_llm_eot_score";
    if (!ids || !n) return eli_ffi_fail(out_error, fn, ELIZA_ERR_INVALID_ARG, "ids is NULL or empty");
    if (!eli_handle_acquire(&live_contexts, c)) return eli_ffi_fail(out_error, fn, ELIZA_ERR_INVALID_ARG, BAD_CTX);
    eli_error err = {0};
    int rc = text_begin(c, &err);
    if (!rc) {
        rc = eot_locked(c, ids, n, target_id, out_target_prob, out_top_token, out_top_prob, &err);
        text_end(c);
    }
    eli_handle_release(&live_contexts, c);
    return rc ? eli_ffi_fail_err(out_error, fn, &err) : ELIZA_OK;
}
