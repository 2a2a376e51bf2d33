/* Backend registry and selection (see backend.h). */
#include "backend.h"

#include <stdio.h>
#include <string.h>

/* Defined in engine.c: the built-in engine and the same engine on the scalar reference kernels. */
extern const eli_backend eli_backend_engine_builtin;
extern const eli_backend eli_backend_engine_reference;

static const eli_backend *const registry[] = {&eli_backend_engine_builtin, &eli_backend_engine_reference, NULL};

const eli_backend *eli_backend_builtin(void) { return &eli_backend_engine_builtin; }
const eli_backend *const *eli_backend_registry(void) { return registry; }

static int is_builtin_name(const char *n) { return !strcmp(n, "builtin") || !strcmp(n, "cpu") || !strcmp(n, "eliza"); }

const eli_backend *eli_backend_select(const char *bundle_dir, const char *want, eli_error *err) {
    if (want && *want) {
        if (is_builtin_name(want)) return eli_backend_builtin();
        for (const eli_backend *const *b = registry; *b; b++) {
            if (strcmp((*b)->name, want)) continue;
            if (!(*b)->available()) {
                eli_fail(err, ELI_ERR_INVALID_ARG, "ELIZA_LLM_BACKEND=%s: backend is not available on this host", want);
                return NULL;
            }
            if (!(*b)->can_serve(bundle_dir)) {
                eli_fail(err, ELI_ERR_INVALID_ARG, "ELIZA_LLM_BACKEND=%s: backend cannot serve bundle '%s'", want, bundle_dir);
                return NULL;
            }
            return *b;
        }
        char names[256] = "";
        for (const eli_backend *const *b = registry; *b; b++)
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", b == registry ? "" : ", ", (*b)->name);
        eli_fail(err, ELI_ERR_INVALID_ARG, "ELIZA_LLM_BACKEND=%s: no such backend (registered: %s)", want, names);
        return NULL;
    }
    const eli_backend *best = NULL;
    int best_rank = 0;
    for (const eli_backend *const *b = registry; *b; b++) {
        int r = (*b)->preference_rank();
        if (r > best_rank && (*b)->available() && (*b)->can_serve(bundle_dir)) best = *b, best_rank = r;
    }
    return best ? best : eli_backend_builtin();
}
