/* The eliza_inference_* C ABI: argument validation, the out_error convention, the bundle context and the
 * dispatch of every stream call to the backend that opened it. Handles are checked against a registry
 * of live objects, so a call on a closed stream or destroyed context is an error, not a crash. */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backend.h"
#include "drafter.h"
#include "eliza_inference.h"
#include "forward.h"
#include "kv_cache.h"
#include "model.h"
#include "quants.h"
#include "tokenizer.h"

struct EliInferenceContext {
    char *bundle_dir;
    char *text_path;
    char *mtp_path;
    pthread_mutex_t mu; /* serializes loads, evictions and stream registration */
    eli_model *model;
    eli_tokenizer *tok;
    eli_model *drafter; /* the bundle's mtp/ drafter, bound to model */
    int n_streams;
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

static int fail(char **out_error, const char *fn, int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
static int fail(char **out_error, const char *fn, int code, const char *fmt, ...) {
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    set_error(out_error, fn, msg);
    return code;
}

static int fail_err(char **out_error, const char *fn, const eli_error *err) {
    set_error(out_error, fn, err->msg);
    return err->code < 0 ? err->code : ELIZA_ERR_INVALID_ARG;
}

/* ---- live handle registries ---- */

typedef struct {
    pthread_mutex_t mu;
    void **items;
    size_t n, cap;
} handle_set;

static handle_set live_contexts = {PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0};
static handle_set live_streams = {PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0};

static int set_add(handle_set *hs, void *p) {
    pthread_mutex_lock(&hs->mu);
    int ok = 1;
    if (hs->n == hs->cap) {
        size_t nc = hs->cap ? 2 * hs->cap : 16;
        void **g = realloc(hs->items, nc * sizeof *g);
        if (g) hs->items = g, hs->cap = nc;
        else ok = 0;
    }
    if (ok) hs->items[hs->n++] = p;
    pthread_mutex_unlock(&hs->mu);
    return ok;
}

static void set_remove(handle_set *hs, void *p) {
    pthread_mutex_lock(&hs->mu);
    for (size_t i = 0; i < hs->n; i++)
        if (hs->items[i] == p) {
            hs->items[i] = hs->items[--hs->n];
            break;
        }
    pthread_mutex_unlock(&hs->mu);
}

static int set_has(handle_set *hs, const void *p) {
    if (!p) return 0;
    pthread_mutex_lock(&hs->mu);
    int found = 0;
    for (size_t i = 0; i < hs->n && !found; i++) found = hs->items[i] == p;
    pthread_mutex_unlock(&hs->mu);
    return found;
}

/* An open stream of context c, or NULL. */
static EliLlmStream *stream_of(EliInferenceContext *c) {
    EliLlmStream *s = NULL;
    pthread_mutex_lock(&live_streams.mu);
    for (size_t i = 0; i < live_streams.n && !s; i++)
        if (((EliLlmStream *)live_streams.items[i])->ctx == c) s = live_streams.items[i];
    pthread_mutex_unlock(&live_streams.mu);
    return s;
}

#define ctx_live(c) set_has(&live_contexts, (c))
#define stream_live(s) set_has(&live_streams, (s))

/* ---- version, probes, ownership ---- */

const char *eliza_inference_abi_version(void) { return ELIZA_INFERENCE_ABI_VERSION; }
int eliza_inference_llm_stream_supported(void) { return 1; }
int eliza_inference_llm_mtp_supported(void) { return 1; }
int eliza_inference_llm_kv_quant_supported(void) { return 1; }
int eliza_inference_tokenize_supported(void) { return 1; }
int eliza_inference_embed_supported(void) { return 1; }
int eliza_inference_llm_eot_supported(void) { return 1; }
void eliza_inference_free_string(char *s) { free(s); }
void eliza_inference_free_tokens(int *tokens) { free(tokens); }

/* ---- bundle ---- */

static int is_regular(const char *p) {
    struct stat st;
    return !stat(p, &st) && S_ISREG(st.st_mode);
}

static int ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* First .gguf in dir (sorted by name) whose lowercase name contains none of the excluded words. */
static char *find_gguf(const char *dir, const char *const *exclude) {
    DIR *d = opendir(dir);
    if (!d) return NULL;
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!ends_with(e->d_name, ".gguf")) continue;
        char low[512];
        size_t i;
        for (i = 0; e->d_name[i] && i < sizeof low - 1; i++)
            low[i] = (char)(e->d_name[i] >= 'A' && e->d_name[i] <= 'Z' ? e->d_name[i] + 32 : e->d_name[i]);
        low[i] = '\0';
        int skip = 0;
        for (const char *const *x = exclude; x && *x; x++) skip |= strstr(low, *x) != NULL;
        if (skip) continue;
        if (n == cap) {
            char **g = realloc(names, (cap = cap ? 2 * cap : 8) * sizeof *g);
            if (!g) break;
            names = g;
        }
        if (!(names[n] = strdup(e->d_name))) break;
        n++;
    }
    closedir(d);
    char *best = NULL;
    if (n) {
        qsort(names, n, sizeof *names, cmp_str);
        for (size_t i = 0; i < n && !best; i++) {
            size_t len = strlen(dir) + strlen(names[i]) + 2;
            char *p = malloc(len);
            if (!p) break;
            snprintf(p, len, "%s/%s", dir, names[i]);
            if (is_regular(p)) best = p;
            else free(p);
        }
    }
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
    return best;
}

static char *join(const char *a, const char *b) {
    size_t n = strlen(a) + strlen(b) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", a, b);
    return p;
}

EliInferenceContext *eliza_inference_create(const char *bundle_dir, char **out_error) {
    static const char fn[] = "eliza_inference_create";
    if (!bundle_dir || !*bundle_dir) {
        fail(out_error, fn, ELIZA_ERR_INVALID_ARG, "bundle_dir is NULL or empty");
        return NULL;
    }
    struct stat st;
    if (stat(bundle_dir, &st)) {
        fail(out_error, fn, ELIZA_ERR_BUNDLE_INVALID, "'%s': %s", bundle_dir, strerror(errno));
        return NULL;
    }
    EliInferenceContext *c = calloc(1, sizeof *c);
    if (!c || !(c->bundle_dir = strdup(bundle_dir))) {
        free(c);
        fail(out_error, fn, ELIZA_ERR_OOM, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&c->mu, NULL);
    if (S_ISREG(st.st_mode)) {
        c->text_path = strdup(bundle_dir); /* a single .gguf file */
    } else if (S_ISDIR(st.st_mode)) {
        static const char *const text_exclude[] = {"mmproj", "tokenizer", "codec", NULL};
        char *text_dir = join(bundle_dir, "text"), *mtp_dir = join(bundle_dir, "mtp");
        if (text_dir) c->text_path = find_gguf(text_dir, text_exclude);
        if (mtp_dir) c->mtp_path = find_gguf(mtp_dir, NULL);
        free(text_dir);
        free(mtp_dir);
        if (!c->text_path) {
            fail(out_error, fn, ELIZA_ERR_BUNDLE_INVALID, "bundle '%s' has no text/*.gguf model", bundle_dir);
            eliza_inference_destroy(c);
            return NULL;
        }
    } else {
        fail(out_error, fn, ELIZA_ERR_BUNDLE_INVALID, "'%s' is neither a directory nor a file", bundle_dir);
        eliza_inference_destroy(c);
        return NULL;
    }
    if (!c->text_path || !set_add(&live_contexts, c)) {
        fail(out_error, fn, ELIZA_ERR_OOM, "out of memory");
        eliza_inference_destroy(c);
        return NULL;
    }
    return c;
}

/* Loads the text model and its tokenizer (caller holds c->mu). */
static int load_text_locked(EliInferenceContext *c, eli_error *err) {
    if (c->model) return ELI_OK;
    eli_model *m = eli_model_load(c->text_path, err);
    if (!m) return err->code ? err->code : ELI_ERR_INVALID_ARG;
    eli_tokenizer *t = eli_tokenizer_load(m->file, err);
    if (!t) {
        eli_error_prefix(err, "%s", c->text_path);
        eli_model_free(m);
        return err->code ? err->code : ELI_ERR_INVALID_ARG;
    }
    c->model = m;
    c->tok = t;
    return ELI_OK;
}

/* Loads the bundle's drafter and binds it to the text model (caller holds c->mu). */
static int load_mtp_locked(EliInferenceContext *c, eli_error *err) {
    int rc = load_text_locked(c, err);
    if (rc || c->drafter) return rc;
    if (!c->mtp_path) return eli_fail(err, ELI_ERR_BUNDLE_INVALID, "bundle '%s' has no mtp/*.gguf drafter", c->bundle_dir);
    eli_model *d = eli_model_load(c->mtp_path, err);
    if (!d) return err->code ? err->code : ELI_ERR_INVALID_ARG;
    if ((rc = eli_drafter_bind(d, c->model, err))) {
        eli_error_prefix(err, "%s", c->mtp_path);
        eli_model_free(d);
        return rc;
    }
    c->drafter = d;
    return ELI_OK;
}

static int ensure_text(EliInferenceContext *c, eli_error *err) {
    pthread_mutex_lock(&c->mu);
    int rc = load_text_locked(c, err);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

void eliza_inference_destroy(EliInferenceContext *c) {
    if (!c) return;
    set_remove(&live_contexts, c);
    /* streams still open on this context are closed with it */
    for (EliLlmStream *s; (s = stream_of(c));) eliza_inference_llm_stream_close(s);
    eli_model_free(c->drafter);
    eli_tokenizer_free(c->tok);
    eli_model_free(c->model);
    pthread_mutex_destroy(&c->mu);
    free(c->bundle_dir);
    free(c->text_path);
    free(c->mtp_path);
    free(c);
}

static int check_region(const char *region, char **out_error, const char *fn) {
    if (!region) return fail(out_error, fn, ELIZA_ERR_INVALID_ARG, "region is NULL");
    if (!strcmp(region, "text") || !strcmp(region, "mtp")) return ELIZA_OK;
    if (!strcmp(region, "vision"))
        return fail(out_error, fn, ELIZA_ERR_NOT_IMPLEMENTED, "region '%s' is not available in this build", region);
    return fail(out_error, fn, ELIZA_ERR_INVALID_ARG, "unknown region '%s' (known: text, mtp, vision)", region);
}

int eliza_inference_mmap_acquire(EliInferenceContext *c, const char *region, char **out_error) {
    static const char fn[] = "eliza_inference_mmap_acquire";
    if (!ctx_live(c)) return fail(out_error, fn, ELIZA_ERR_INVALID_ARG, "invalid or destroyed context");
    int rc = check_region(region, out_error, fn);
    if (rc) return rc;
    eli_error err = {0};
    pthread_mutex_lock(&c->mu);
    rc = !strcmp(region, "mtp") ? load_mtp_locked(c, &err) : load_text_locked(c, &err);
    pthread_mutex_unlock(&c->mu);
    return rc ? fail_err(out_error, fn, &err) : ELIZA_OK;
}

int eliza_inference_mmap_evict(EliInferenceContext *c, const char *region, char **out_error) {
    static const char fn[] = "eliza_inference_mmap_evict";
    if (!ctx_live(c)) return fail(out_error, fn, ELIZA_ERR_INVALID_ARG, "invalid or destroyed context");
    int rc = check_region(region, out_error, fn);
    if (rc) return rc;
    pthread_mutex_lock(&c->mu);
    if (c->n_streams > 0) {
        int n = c->n_streams;
        pthread_mutex_unlock(&c->mu);
        return fail(out_error, fn, ELIZA_ERR_INVALID_ARG, "region '%s' is in use by %d open stream(s); close them first",
                    region, n);
    }
    /* the drafter is bound to the text model, so it goes with it */
    eli_model_free(c->drafter);
    c->drafter = NULL;
    if (!strcmp(region, "text")) {
        eli_tokenizer_free(c->tok);
        eli_model_free(c->model);
        c->tok = NULL;
        c->model = NULL;
    }
    pthread_mutex_unlock(&c->mu);
    return ELIZA_OK;
}

/* ---- streams ---- */

static int valid_float(float v) { return isfinite(v); }

/* Validates the parts of the config every backend relies on. */
static int check_config(const eliza_llm_stream_config_t *cfg, char **out_error, const char *fn) {
    if (!valid_float(cfg->temperature) || !valid_float(cfg->top_p) || !valid_float(cfg->repeat_penalty))
        return fail(out_error, fn, ELIZA_ERR_INVALID_ARG, "temperature, top_p and repeat_penalty must be finite");
    if (cfg->repeat_penalty < 0)
        return fail(out_error, fn, ELIZA_ERR_INVALID_ARG, "repeat_penalty %g is negative", (double)cfg->repeat_penalty);
    if (cfg->context_size < 0)
        return fail(out_error, fn, ELIZA_ERR_INVALID_ARG, "context_size %d is negative", cfg->context_size);
    if (cfg->draft_min < 0 || cfg->draft_max < 0 || (cfg->draft_max > 0 && cfg->draft_min > cfg->draft_max))
        return fail(out_error, fn, ELIZA_ERR_INVALID_ARG, "draft_min %d / draft_max %d are not a valid window",
                    cfg->draft_min, cfg->draft_max);
    uint32_t tk, tv;
    const char *k = cfg->cache_type_k && *cfg->cache_type_k ? cfg->cache_type_k : "f16";
    const char *v = cfg->cache_type_v && *cfg->cache_type_v ? cfg->cache_type_v : "f16";
    if (eli_kv_type_from_name(k, &tk))
        return fail(out_error, fn, ELIZA_ERR_INVALID_ARG,
                    "unknown cache_type_k '%s' (known: f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1)", k);
    if (eli_kv_type_from_name(v, &tv))
        return fail(out_error, fn, ELIZA_ERR_INVALID_ARG,
                    "unknown cache_type_v '%s' (known: f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1)", v);
    if (tk != tv)
        return fail(out_error, fn, ELIZA_ERR_INVALID_ARG, "cache_type_k '%s' and cache_type_v '%s' must be the same", k, v);
    if (cfg->gbnf_grammar && *cfg->gbnf_grammar)
        return fail(out_error, fn, ELIZA_ERR_NOT_IMPLEMENTED, "GBNF grammars are not supported in this build");
    return ELIZA_OK;
}

EliLlmStream *eliza_inference_llm_stream_open(EliInferenceContext *c, const eliza_llm_stream_config_t *cfg,
                                              char **out_error) {
    static const char fn[] = "eliza_inference_llm_stream_open";
    if (!ctx_live(c)) {
        fail(out_error, fn, ELIZA_ERR_INVALID_ARG, "invalid or destroyed context");
        return NULL;
    }
    if (!cfg) {
        fail(out_error, fn, ELIZA_ERR_INVALID_ARG, "cfg is NULL");
        return NULL;
    }
    if (check_config(cfg, out_error, fn)) return NULL;
    eli_error err = {0};
    const eli_backend *be = eli_backend_select(c->bundle_dir, &err);
    if (!be) {
        fail_err(out_error, fn, &err);
        return NULL;
    }
    EliLlmStream *s = calloc(1, sizeof *s);
    if (!s) {
        fail(out_error, fn, ELIZA_ERR_OOM, "out of memory");
        return NULL;
    }
    pthread_mutex_lock(&c->mu);
    const int bundle_mtp = cfg->draft_min > 0 && cfg->draft_max > 0 && !(cfg->mtp_drafter_path && *cfg->mtp_drafter_path);
    int rc = bundle_mtp ? load_mtp_locked(c, &err) : load_text_locked(c, &err);
    if (!rc) {
        eli_backend_env env = {c->bundle_dir, c->text_path, c->mtp_path, c->model, c->tok, bundle_mtp ? c->drafter : NULL};
        s->session = be->open(&env, cfg, &err);
        if (!s->session) rc = err.code ? err.code : ELI_ERR_INVALID_ARG;
    }
    if (!rc) c->n_streams++;
    pthread_mutex_unlock(&c->mu);
    if (rc) {
        free(s);
        fail_err(out_error, fn, &err);
        return NULL;
    }
    s->ctx = c;
    s->backend = be;
    atomic_init(&s->cancel, 0);
    if (!set_add(&live_streams, s)) {
        eliza_inference_llm_stream_close(s);
        fail(out_error, fn, ELIZA_ERR_OOM, "out of memory");
        return NULL;
    }
    return s;
}

int eliza_inference_llm_stream_prefill(EliLlmStream *s, const int32_t *ids, size_t n, char **out_error) {
    static const char fn[] = "eliza_inference_llm_stream_prefill";
    if (!stream_live(s)) return fail(out_error, fn, ELIZA_ERR_INVALID_ARG, "invalid or closed stream");
    if (n && !ids) return fail(out_error, fn, ELIZA_ERR_INVALID_ARG, "ids is NULL with n = %zu", n);
    if (atomic_load(&s->cancel)) return fail(out_error, fn, ELIZA_ERR_CANCELLED, "stream was cancelled");
    eli_error err = {0};
    int rc = s->backend->prefill(s->session, ids, n, &s->cancel, &err);
    return rc < 0 ? fail_err(out_error, fn, &err) : ELIZA_OK;
}

int eliza_inference_llm_stream_next(EliLlmStream *s, int32_t *tokens_out, size_t tokens_cap, size_t *num_tokens_out,
                                    char *text_out, size_t text_cap, int32_t *drafted, int32_t *accepted,
                                    char **out_error) {
    static const char fn[] = "eliza_inference_llm_stream_next";
    if (num_tokens_out) *num_tokens_out = 0;
    if (drafted) *drafted = 0;
    if (accepted) *accepted = 0;
    if (text_out && text_cap) text_out[0] = '\0';
    if (!stream_live(s)) return fail(out_error, fn, ELIZA_ERR_INVALID_ARG, "invalid or closed stream");
    if (!tokens_out || !tokens_cap) return fail(out_error, fn, ELIZA_ERR_INVALID_ARG, "tokens_out is NULL or tokens_cap is 0");
    if (!num_tokens_out) return fail(out_error, fn, ELIZA_ERR_INVALID_ARG, "num_tokens_out is NULL");
    if (!text_out && text_cap) return fail(out_error, fn, ELIZA_ERR_INVALID_ARG, "text_out is NULL with text_cap %zu", text_cap);
    if (text_cap && text_cap < 5)
        return fail(out_error, fn, ELIZA_ERR_INVALID_ARG, "text_cap %zu cannot hold one UTF-8 character and the NUL (need >= 5, or 0 for no text)",
                    text_cap);
    if (atomic_load(&s->cancel)) return fail(out_error, fn, ELIZA_ERR_CANCELLED, "stream was cancelled");
    eli_error err = {0};
    int rc = s->backend->next(s->session, tokens_out, tokens_cap, num_tokens_out, text_out, text_cap, drafted, accepted,
                              &s->cancel, &err);
    return rc < 0 ? fail_err(out_error, fn, &err) : rc;
}

int eliza_inference_llm_stream_cancel(EliLlmStream *s) {
    if (!stream_live(s)) return ELIZA_ERR_INVALID_ARG;
    atomic_store(&s->cancel, 1);
    return ELIZA_OK;
}

int eliza_inference_llm_stream_reset(EliLlmStream *s) {
    if (!stream_live(s)) return ELIZA_ERR_INVALID_ARG;
    atomic_store(&s->cancel, 0);
    return s->backend->reset(s->session);
}

int eliza_inference_llm_stream_reset_keep(EliLlmStream *s, int32_t n_keep) {
    if (!stream_live(s)) return ELIZA_ERR_INVALID_ARG;
    atomic_store(&s->cancel, 0);
    return s->backend->reset_keep(s->session, n_keep < 0 ? 0 : n_keep);
}

int eliza_inference_llm_stream_save_slot(EliLlmStream *s, const char *path, char **out_error) {
    static const char fn[] = "eliza_inference_llm_stream_save_slot";
    if (!stream_live(s)) return fail(out_error, fn, ELIZA_ERR_INVALID_ARG, "invalid or closed stream");
    if (!path || !*path) return fail(out_error, fn, ELIZA_ERR_INVALID_ARG, "path is NULL or empty");
    eli_error err = {0};
    return s->backend->save(s->session, path, &err) ? fail_err(out_error, fn, &err) : ELIZA_OK;
}

int eliza_inference_llm_stream_restore_slot(EliLlmStream *s, const char *path, char **out_error) {
    static const char fn[] = "eliza_inference_llm_stream_restore_slot";
    if (!stream_live(s)) return fail(out_error, fn, ELIZA_ERR_INVALID_ARG, "invalid or closed stream");
    if (!path || !*path) return fail(out_error, fn, ELIZA_ERR_INVALID_ARG, "path is NULL or empty");
    eli_error err = {0};
    return s->backend->restore(s->session, path, &err) ? fail_err(out_error, fn, &err) : ELIZA_OK;
}

void eliza_inference_llm_stream_close(EliLlmStream *s) {
    if (!stream_live(s)) return;
    set_remove(&live_streams, s);
    s->backend->close(s->session);
    pthread_mutex_lock(&s->ctx->mu);
    s->ctx->n_streams--;
    pthread_mutex_unlock(&s->ctx->mu);
    free(s);
}

/* ---- text utilities ---- */

int eliza_inference_tokenize(EliInferenceContext *c, const char *text, size_t text_len, int add_special,
                             int parse_special, int **out_tokens, size_t *out_n, char **out_error) {
    static const char fn[] = "eliza_inference_tokenize";
    if (out_tokens) *out_tokens = NULL;
    if (out_n) *out_n = 0;
    if (!ctx_live(c)) return fail(out_error, fn, ELIZA_ERR_INVALID_ARG, "invalid or destroyed context");
    if (!out_tokens || !out_n) return fail(out_error, fn, ELIZA_ERR_INVALID_ARG, "out_tokens or out_n is NULL");
    if (!text && text_len) return fail(out_error, fn, ELIZA_ERR_INVALID_ARG, "text is NULL with text_len %zu", text_len);
    eli_error err = {0};
    if (ensure_text(c, &err)) return fail_err(out_error, fn, &err);
    int32_t *ids = NULL;
    size_t n = 0;
    if (eli_tokenize(c->tok, text ? text : "", text_len, add_special, parse_special, &ids, &n, &err))
        return fail_err(out_error, fn, &err);
    /* int and int32_t are the same type on every platform we build for */
    _Static_assert(sizeof(int) == sizeof(int32_t), "int must be 32-bit");
    if (!ids && !(ids = malloc(sizeof *ids))) return fail(out_error, fn, ELIZA_ERR_OOM, "out of memory");
    *out_tokens = (int *)ids;
    *out_n = n;
    return ELIZA_OK;
}

int eliza_inference_detokenize(EliInferenceContext *c, const int *tokens, size_t n, int remove_special,
                               int unparse_special, char *out_text, size_t max_text_bytes, char **out_error) {
    static const char fn[] = "eliza_inference_detokenize";
    if (!ctx_live(c)) return fail(out_error, fn, ELIZA_ERR_INVALID_ARG, "invalid or destroyed context");
    if (n && !tokens) return fail(out_error, fn, ELIZA_ERR_INVALID_ARG, "tokens is NULL with n = %zu", n);
    if (!out_text || !max_text_bytes) return fail(out_error, fn, ELIZA_ERR_INVALID_ARG, "out_text is NULL or max_text_bytes is 0");
    if (n > (size_t)INT32_MAX) return fail(out_error, fn, ELIZA_ERR_INVALID_ARG, "too many tokens");
    eli_error err = {0};
    if (ensure_text(c, &err)) return fail_err(out_error, fn, &err);
    char *text = NULL;
    size_t len = 0;
    if (eli_detokenize(c->tok, (const int32_t *)tokens, n, remove_special, unparse_special, &text, &len, &err))
        return fail_err(out_error, fn, &err);
    if (len + 1 > max_text_bytes || len > (size_t)INT32_MAX) {
        free(text);
        return fail(out_error, fn, ELIZA_ERR_INVALID_ARG, "buffer of %zu bytes is too small: %zu bytes needed (with the NUL)",
                    max_text_bytes, len + 1);
    }
    memcpy(out_text, text, len);
    out_text[len] = '\0';
    free(text);
    return (int)len;
}

/* Runs ids through a temporary context and returns the requested outputs for every row or the last. */
static int run_once(EliInferenceContext *c, const int32_t *ids, size_t n, const eli_outputs *out, eli_error *err) {
    eli_context_params p = eli_context_default_params();
    p.n_ctx = (int64_t)n;
    p.kv_type = ELI_TYPE_F32;
    eli_context *x = eli_context_create(c->model, &p, err);
    if (!x) return err->code;
    int rc = eli_decode_ex(x, ids, (int64_t)n, out, err);
    eli_context_free(x);
    return rc;
}

int eliza_inference_embed(EliInferenceContext *c, const char *text, size_t text_len, int pooling, float *out,
                          size_t out_capacity, int *out_dim, char **out_error) {
    static const char fn[] = "eliza_inference_embed";
    if (!ctx_live(c)) return fail(out_error, fn, ELIZA_ERR_INVALID_ARG, "invalid or destroyed context");
    if (pooling != ELIZA_POOLING_MEAN && pooling != ELIZA_POOLING_CLS && pooling != ELIZA_POOLING_LAST)
        return fail(out_error, fn, ELIZA_ERR_INVALID_ARG, "pooling %d is not MEAN (1), CLS (2) or LAST (3)", pooling);
    if (!text && text_len) return fail(out_error, fn, ELIZA_ERR_INVALID_ARG, "text is NULL with text_len %zu", text_len);
    eli_error err = {0};
    if (ensure_text(c, &err)) return fail_err(out_error, fn, &err);
    const int E = c->model->hp.n_embd;
    if (out_dim) *out_dim = E;
    if (!out || out_capacity < (size_t)E)
        return fail(out_error, fn, ELIZA_ERR_INVALID_ARG, "out_capacity %zu is smaller than the embedding dimension %d",
                    out_capacity, E);
    int32_t *ids = NULL;
    size_t n = 0;
    if (eli_tokenize(c->tok, text ? text : "", text_len, 1, 0, &ids, &n, &err)) return fail_err(out_error, fn, &err);
    if (n > (size_t)c->model->hp.n_ctx_train) {
        free(ids);
        return fail(out_error, fn, ELIZA_ERR_INVALID_ARG, "text is %zu tokens, more than the context %d", n,
                    c->model->hp.n_ctx_train);
    }
    float *hidden = n ? malloc(n * (size_t)E * sizeof *hidden) : NULL;
    if (n && !hidden) {
        free(ids);
        return fail(out_error, fn, ELIZA_ERR_OOM, "out of memory");
    }
    eli_outputs o = {NULL, hidden, 1};
    int rc = n ? run_once(c, ids, n, &o, &err) : ELI_OK;
    free(ids);
    if (rc) {
        free(hidden);
        return fail_err(out_error, fn, &err);
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
    return ELIZA_OK;
}

int eliza_inference_llm_eot_score(EliInferenceContext *c, const int32_t *ids, size_t n, int32_t target_id,
                                  float *out_target_prob, int32_t *out_top_token, float *out_top_prob,
                                  char **out_error) {
    static const char fn[] = "eliza_inference_llm_eot_score";
    if (!ctx_live(c)) return fail(out_error, fn, ELIZA_ERR_INVALID_ARG, "invalid or destroyed context");
    if (!ids || !n) return fail(out_error, fn, ELIZA_ERR_INVALID_ARG, "ids is NULL or empty");
    eli_error err = {0};
    if (ensure_text(c, &err)) return fail_err(out_error, fn, &err);
    const int V = c->model->hp.n_vocab;
    if (target_id < 0 || target_id >= V)
        return fail(out_error, fn, ELIZA_ERR_INVALID_ARG, "target_id %d is outside the vocabulary [0, %d)", target_id, V);
    if (n > (size_t)c->model->hp.n_ctx_train)
        return fail(out_error, fn, ELIZA_ERR_INVALID_ARG, "%zu ids exceed the context %d", n, c->model->hp.n_ctx_train);
    float *logits = malloc((size_t)V * sizeof *logits);
    if (!logits) return fail(out_error, fn, ELIZA_ERR_OOM, "out of memory");
    eli_outputs o = {logits, NULL, 0};
    if (run_once(c, ids, n, &o, &err)) {
        free(logits);
        return fail_err(out_error, fn, &err);
    }
    eli_softmax_inplace(logits, V);
    int top = 0;
    for (int i = 1; i < V; i++)
        if (logits[i] > logits[top]) top = i;
    if (out_target_prob) *out_target_prob = logits[target_id];
    if (out_top_token) *out_top_token = top;
    if (out_top_prob) *out_top_prob = logits[top];
    free(logits);
    return ELIZA_OK;
}
