/* eliza-infer logits -m FILE --tokens "ID ID ..." [--kv TYPE | --kv-k TYPE --kv-v TYPE] [-t N] [--step] -o OUT.f32
 * Writes the logits of every position as raw little-endian float32, n_tokens rows of n_vocab. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "fileio.h"
#include "exec.h"
#include "kv_types.h"
#include "quants.h"

static int usage(void) {
    fprintf(stderr,
            "usage: eliza-infer logits -m FILE --tokens \"ID ID ...\" [--kv TYPE] [--kv-k TYPE] [--kv-v TYPE] [-t THREADS]\n"
            "                          [--step] -o OUT.f32\n"
            "  --kv TYPE   KV cache type of K and V (f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 tbq4_0 tbq3_0 q4_polar,\n"
            "              and qjl1_256 for K only; default f16); --kv-k / --kv-v set one of them\n"
            "  --step      decode one token at a time instead of one batch\n");
    return 2;
}

int cli_parse_kv_option(const char *opt, const char *v, uint32_t *type_k, uint32_t *type_v) {
    const int both = !strcmp(opt, "--kv"), k = !strcmp(opt, "--kv-k"), vv = !strcmp(opt, "--kv-v");
    if (!both && !k && !vv) return 0;
    uint32_t t;
    if (!v || eli_kv_type_from_name(v, &t))
        return cli_die("%s: unknown cache type '%s' (known: %s)", opt, v ? v : "", eli_kv_type_names()), -1;
    if (!k && !eli_kv_type_holds_values(t))
        return cli_die("%s: %s holds keys only (QJL estimates q.k): use --kv-k %s with another --kv-v type", opt, v, v), -1;
    if (both || k) *type_k = t;
    if (both || vv) *type_v = t;
    return 1;
}

/* Parses whitespace-separated token ids into a malloc'ed array. */
int cli_parse_tokens(const char *s, int32_t **out, size_t *n_out) {
    size_t cap = 16, n = 0;
    int32_t *ids = malloc(cap * sizeof *ids);
    if (!ids) return cli_die("out of memory"), -1;
    const char *p = s;
    for (;;) {
        while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r' || *p == ',') p++;
        if (!*p) break;
        char *end;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        if (end == p || errno || v < INT32_MIN || v > INT32_MAX) {
            free(ids);
            return cli_die("--tokens: '%.20s' is not a token id", p), -1;
        }
        if (n == cap) {
            int32_t *g = realloc(ids, (cap *= 2) * sizeof *ids);
            if (!g) return free(ids), cli_die("out of memory"), -1;
            ids = g;
        }
        ids[n++] = (int32_t)v;
        p = end;
    }
    *out = ids;
    *n_out = n;
    return 0;
}

int cli_logits(int argc, char **argv) {
    const char *path = NULL, *tokens = NULL, *outp = NULL;
    eli_seq_params cp = eli_seq_default();
    int step = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long long x;
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) path = v, i++;
        else if (!strcmp(a, "--tokens")) tokens = v, i++;
        else if (!strcmp(a, "-o") || !strcmp(a, "--output")) outp = v, i++;
        else if ((x = cli_parse_kv_option(a, v, &cp.kv_type_k, &cp.kv_type_v))) {
            if (x < 0) return 2;
            i++;
        } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
            if (cli_parse_int(a, v, 1, 1024, &x)) return 2;
            cp.n_threads = (int)x, i++;
        } else if (!strcmp(a, "--step")) step = 1;
        else if (!strcmp(a, "--help")) return usage(), 0;
        else return cli_die("logits: unknown option '%s'", a), usage();
    }
    if (!path || !tokens || !outp) return usage();
    int32_t *ids;
    size_t n;
    if (cli_parse_tokens(tokens, &ids, &n)) return 2;
    if (!n) return free(ids), cli_die("--tokens: no token ids given");
    eli_error err = {0};
    cli_model cm;
    if (cli_prepare(path, &cm)) return free(ids), 1;
    const eli_model *m = cm.m;
    cp.n_ctx = (int64_t)n;
    cp.reserve = cm.cfg.reserve;
    cp.n_ckpt = cm.cfg.n_ckpt;
    int rc = 1;
    eli_xseq *c = eli_seq_create(cm.xm->exec, cm.xm, &cp, &err);
    float *logits = c ? malloc(n * (size_t)m->hp.n_vocab * sizeof(float)) : NULL;
    if (!c) cli_die("%s", err.msg);
    else if (!logits) cli_die("out of memory for %zu rows of logits", n);
    else {
        int ok = 0;
        if (step) {
            ok = 1;
            for (size_t i = 0; i < n && ok; i++) {
                const eli_outputs o = {logits + i * (size_t)m->hp.n_vocab, NULL, 0};
                ok = eli_seq_decode_tokens(c, ids + i, 1, &o, &err) == ELI_OK;
            }
        } else {
            const eli_outputs o = {logits, NULL, 1};
            ok = eli_seq_decode_tokens(c, ids, (int64_t)n, &o, &err) == ELI_OK;
        }
        if (!ok) cli_die("%s", err.msg);
        else if (eli_write_file_atomic(outp, logits, n * (size_t)m->hp.n_vocab * sizeof(float), &err))
            cli_die("%s", err.msg);
        else rc = 0;
    }
    free(logits);
    free(ids);
    eli_seq_free(c);
    cli_unload(&cm);
    return rc;
}
