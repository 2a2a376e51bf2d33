#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

eli_config eli_config_defaults(void) {
    eli_config c;
    memset(&c, 0, sizeof c);
    c.reserve = 1;
    c.n_ckpt = 1;
    c.repack = 1;
    return c;
}

/* name's value as an integer in [lo, hi] into *out; unset or empty leaves *out. */
static int read_int(const char *name, long long lo, long long hi, long long *out, eli_error *err) {
    const char *e = getenv(name);
    if (!e || !*e) return ELI_OK;
    char *end;
    long long v = strtoll(e, &end, 10);
    if (*end || v < lo || v > hi)
        return eli_fail(err, ELI_ERR_INVALID_ARG, "%s='%s' is not an integer in [%lld, %lld]", name, e, lo, hi);
    *out = v;
    return ELI_OK;
}

static int read_name(const char *name, char *out, size_t cap, eli_error *err) {
    const char *e = getenv(name);
    if (!e) return ELI_OK;
    if (strlen(e) >= cap) return eli_fail(err, ELI_ERR_INVALID_ARG, "%s is longer than %zu bytes", name, cap - 1);
    snprintf(out, cap, "%s", e);
    return ELI_OK;
}

int eli_config_read(eli_config *c, eli_error *err) {
    *c = eli_config_defaults();
    long long n_ctx = 0, reserve = 1, ckpt = 1, repack = 1, seed = 0;
    int rc;
    if ((rc = read_int("ELIZA_LLM_N_CTX", 1, INT32_MAX, &n_ctx, err)) || (rc = read_int("ELIZA_LLM_RESERVE", 0, 1, &reserve, err)) ||
        (rc = read_int("ELIZA_LLM_KV_CHECKPOINTS", 0, 64, &ckpt, err)) || (rc = read_int("ELIZA_LLM_REPACK", 0, 1, &repack, err)) ||
        (rc = read_int("ELIZA_LLM_SEED", 0, INT64_MAX, &seed, err)) ||
        (rc = read_name("ELIZA_LLM_BACKEND", c->backend, sizeof c->backend, err)) ||
        (rc = read_name("ELI_KERNELS", c->kernels, sizeof c->kernels, err)))
        return rc;
    c->n_ctx = n_ctx;
    c->reserve = (int)reserve;
    c->n_ckpt = (int)ckpt;
    c->repack = (int)repack;
    c->seed = (uint64_t)seed;
    return ELI_OK;
}
