/* eliza-infer bench-grammar: the per-token cost of a grammar constraint over a whole vocabulary (a
 * benchmark, not a test).
 *
 *   eliza-infer bench-grammar -m VOCAB_OR_MODEL.gguf (--grammar FILE.gbnf | --json-schema FILE.json | --json)
 *                             [--text FILE] [--tokens N] [--seed S]
 *
 * The token sequence is --text (tokenized; it must match the grammar) or a random generation under the
 * grammar: random logits, masked, argmax, with a pull towards tokens that close strings and containers
 * now and then (so values end); when the grammar completes, it starts over, until N tokens. The
 * sequence is then replayed, and each token timed for:
 *   apply+accept   the mask (cached per grammar state) written into a row of logits (-INFINITY for every
 *                  refused token), then the token accepted: what constraining every step costs;
 *   uncached       the same with the mask cache off: the trie walk every token;
 *   allows+accept  the check of the one chosen token, then accept: the path taken whenever the token a
 *                  sampler draws is allowed (the mask is needed only when it is not).
 * Each is run twice on one matcher: "cold" is the first pass (the grammar automaton is built as it
 * goes, as in the first use on a stream), "warm" the second. Times are the calling thread's CPU time:
 * the constraint runs on one thread, and CPU time stays honest when other work shares the machine. */
#include <math.h>
#include <stdint.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "grammar.h"
#include "grammar_vocab.h"
#include "json_schema.h"
#include "tokenizer.h"

static int usage(FILE *out, int status) {
    fprintf(out, "usage: eliza-infer bench-grammar -m VOCAB_OR_MODEL.gguf (--grammar FILE.gbnf | --json-schema FILE.json | --json)\n"
                 "                               [--text FILE] [--tokens N] [--seed S]\n"
                 "  --text FILE   the token sequence to replay (default: a random generation under the grammar)\n"
                 "  --tokens N    length of the random sequence (default 256)\n");
    return status;
}

static double cpu_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static uint64_t rng_state;
static double next_unit(void) {
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) * 0x1.0p-53;
}

/* A random generation of n tokens under the grammar (starting over whenever it completes). */
static int generate(eli_grammar_matcher *m, const eli_tokenizer *tok, int32_t *out, size_t n, eli_error *err) {
    int32_t n_vocab = eli_tokenizer_n_vocab(tok);
    float *logits = malloc((size_t)n_vocab * sizeof *logits);
    uint8_t *closing = malloc((size_t)n_vocab);
    if (!logits || !closing) {
        free(logits), free(closing);
        return eli_fail(err, ELI_ERR_OOM, "out of memory");
    }
    for (int32_t t = 0; t < n_vocab; t++) {
        size_t l;
        const char *p = eli_tokenizer_token_piece(tok, t, 0, &l);
        closing[t] = memchr(p, '"', l) || memchr(p, ']', l) || memchr(p, '}', l);
    }
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        if (eli_grammar_matcher_complete(m)) eli_grammar_matcher_reset(m);
        int pull = next_unit() < 0.125;
        for (int32_t t = 0; t < n_vocab; t++) logits[t] = (float)next_unit() + (pull && closing[t] ? 1.0f : 0.0f);
        if ((rc = eli_grammar_apply(m, logits, err))) break;
        int32_t best = -1;
        for (int32_t t = 0; t < n_vocab; t++)
            if (logits[t] != -INFINITY && !eli_tokenizer_is_eog(tok, t) && (best < 0 || logits[t] > logits[best])) best = t;
        if (best < 0) rc = eli_fail(err, ELI_ERR_INVALID_ARG, "the grammar allows no token after %zu tokens", i);
        else rc = eli_grammar_accept_token(m, best, err);
        out[i] = best;
    }
    free(logits);
    free(closing);
    return rc;
}

enum { MODE_APPLY, MODE_UNCACHED, MODE_ALLOWS, N_MODES };
static const char *const mode_names[N_MODES] = {"apply+accept", "uncached", "allows+accept"};

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Replays ids through m in one mode; per-token times (seconds) into dt. restart: start the grammar over
 * whenever it completes (as the random generation did). */
static int replay(eli_grammar_matcher *m, const int32_t *ids, size_t n, int mode, int restart, float *logits, double *dt,
                  eli_error *err) {
    eli_grammar_matcher_reset(m);
    eli_grammar_matcher_cache_masks(m, mode != MODE_UNCACHED);
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        if (restart && eli_grammar_matcher_complete(m)) eli_grammar_matcher_reset(m);
        double t0 = cpu_now();
        if (mode == MODE_ALLOWS) {
            int ok = eli_grammar_allows(m, ids[i], err);
            rc = ok < 0 ? ok : ok ? 0 : eli_fail(err, ELI_ERR_INVALID_ARG, "token %zu (%d) does not match the grammar", i, ids[i]);
        } else {
            rc = eli_grammar_apply(m, logits, err);
        }
        if (!rc) rc = eli_grammar_accept_token(m, ids[i], err);
        dt[i] = cpu_now() - t0;
    }
    eli_grammar_matcher_cache_masks(m, 1);
    return rc;
}

static void report(const char *name, const char *pass, double *dt, size_t n) {
    double sum = 0;
    for (size_t i = 0; i < n; i++) sum += dt[i];
    qsort(dt, n, sizeof *dt, cmp_double);
    printf("%-14s %-5s %10.1f %10.1f %10.1f %10.1f\n", name, pass, sum / (double)n * 1e6, dt[n / 2] * 1e6,
           dt[(size_t)((double)(n - 1) * 0.99)] * 1e6, dt[n - 1] * 1e6);
}

int cli_bench_grammar(int argc, char **argv) {
    const char *model = NULL, *gfile = NULL, *sfile = NULL, *tfile = NULL;
    int any_json = 0;
    long long n_tokens = 256, seed = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) return usage(stdout, 0);
        if (!strcmp(a, "--json")) {
            any_json = 1;
            continue;
        }
        if (!strcmp(a, "--tokens") || !strcmp(a, "--seed")) {
            if (cli_parse_int(a, i + 1 < argc ? argv[i + 1] : NULL, a[2] == 't' ? 1 : 0, a[2] == 't' ? 1000000 : INT64_MAX,
                              a[2] == 't' ? &n_tokens : &seed))
                return 2;
            i++;
            continue;
        }
        const char **dst = !strcmp(a, "-m") || !strcmp(a, "--model") ? &model
                           : !strcmp(a, "--grammar")                 ? &gfile
                           : !strcmp(a, "--json-schema")             ? &sfile
                           : !strcmp(a, "--text")                    ? &tfile
                                                                     : NULL;
        if (!dst || i + 1 >= argc) return cli_bad_option("bench-grammar", a, i + 1 < argc);
        *dst = argv[++i];
    }
    if (!model) return cli_die("bench-grammar: -m VOCAB_OR_MODEL.gguf is required"), 2;
    if (!!gfile + !!sfile + any_json != 1) return cli_die("bench-grammar: give one of --grammar, --json-schema, --json"), 2;
    rng_state = 0x9E3779B97F4A7C15ull ^ (uint64_t)seed;

    eli_tokenizer *tok;
    if (cli_load_vocab(model, &tok)) return 1;
    eli_error err = {0};
    char *gtext = NULL, *text = NULL;
    size_t glen = 0, tlen = 0;
    int status = 0;
    if (!(gtext = cli_grammar_text(gfile, sfile, any_json, &glen))) status = 1;
    eli_grammar_vocab *v = NULL;
    eli_grammar *g = NULL;
    eli_grammar_matcher *m = NULL;
    int32_t *ids = NULL;
    size_t n = 0;
    double t0 = cpu_now(), t_vocab = 0;
    if (!status && eli_grammar_vocab_new(tok, &v, &err)) status = cli_die("%s", err.msg);
    t_vocab = cpu_now() - t0;
    if (!status && eli_grammar_parse(gtext, glen, tok, &g, &err)) status = cli_die("%s", err.msg);
    if (!status && eli_grammar_matcher_new(g, v, &m, &err)) status = cli_die("%s", err.msg);
    if (!status && tfile) {
        text = cli_read_file(tfile, &tlen);
        if (text && tlen && text[tlen - 1] == '\n') tlen--; /* the file's last line end is not part of the text */
        if (!text) status = 1;
        else if (eli_tokenize(tok, text, tlen, 0, 0, &ids, &n, &err)) status = cli_die("%s: %s", tfile, err.msg);
    } else if (!status) {
        n = (size_t)n_tokens;
        ids = malloc(n * sizeof *ids);
        if (!ids || generate(m, tok, ids, n, &err)) status = cli_die("generation: %s", ids ? err.msg : "out of memory");
    }
    int32_t n_vocab = eli_tokenizer_n_vocab(tok);
    float *logits = calloc((size_t)n_vocab, sizeof *logits);
    double *dt = malloc((n ? n : 1) * sizeof *dt);
    if (!status && (!logits || !dt)) status = cli_die("out of memory");
    if (!status) {
        printf("vocabulary: %d tokens, index built in %.0f ms of CPU, %.1f MB\n", n_vocab, t_vocab * 1e3,
               (double)eli_grammar_vocab_bytes(v) / 1e6);
        printf("sequence: %zu tokens (%s)\n", n, tfile ? tfile : "random generation under the grammar");
        printf("%-14s %-5s %10s %10s %10s %10s   (microseconds of CPU per token)\n", "", "", "mean", "median", "p99", "max");
        /* a fresh matcher per mode, so that each mode's cold pass builds the automaton itself */
        for (int mode = 0; mode < N_MODES && !status; mode++) {
            eli_grammar_matcher_free(m);
            m = NULL;
            if (eli_grammar_matcher_new(g, v, &m, &err)) {
                status = cli_die("%s", err.msg);
                break;
            }
            for (int pass = 0; pass < 2 && !status; pass++) {
                if (replay(m, ids, n, mode, !tfile, logits, dt, &err)) status = cli_die("%s", err.msg);
                else report(mode_names[mode], pass ? "warm" : "cold", dt, n);
            }
        }
        const eli_grammar_machine *gm = m ? eli_grammar_matcher_machine(m) : NULL;
        if (gm) printf("grammar automaton: %u states, %u stack nodes\n", gm->n_states, gm->n_nodes);
    }
    free(logits);
    free(dt);
    free(ids);
    free(text);
    free(gtext);
    eli_grammar_matcher_free(m);
    eli_grammar_free(g);
    eli_grammar_vocab_free(v);
    eli_tokenizer_free(tok);
    if (!status && (fflush(stdout) || ferror(stdout))) status = cli_die("write error on stdout");
    return status;
}
