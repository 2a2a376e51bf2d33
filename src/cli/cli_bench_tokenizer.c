/* eliza-infer bench-tokenizer: tokenizer throughput (a benchmark, not a test).
 *
 *   eliza-infer bench-tokenizer -m VOCAB.gguf [--repeat N] [--parse-special] FILE...
 *
 * Each file is read whole into memory and tokenized in one eli_tokenize call (as `eliza-infer tokenize`
 * does with stdin), N times; the best time counts. Only the eli_tokenize calls are timed: loading the
 * vocabulary and reading the files are not. Prints one line per file (bytes, tokens, bytes per token,
 * seconds, MB/s with MB = 10^6 bytes) and an overall line (all bytes / the sum of the best times). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "gguf.h"
#include "tokenizer.h"

static int usage(FILE *out, int status) {
    fprintf(out, "usage: eliza-infer bench-tokenizer -m VOCAB.gguf [--repeat N] [--parse-special] FILE...\n"
                 "  -m, --model FILE   GGUF with a gemma4 tokenizer (a vocab-only GGUF is enough)\n"
                 "  --repeat N         tokenize each file N times and keep the best time (default 3)\n"
                 "  --parse-special    match control-token text (parse_special = true)\n"
                 "Each FILE is tokenized whole, with <bos>; loading and reading are not timed.\n");
    return status;
}

int cli_bench_tokenizer(int argc, char **argv) {
    const char *model = NULL;
    long long repeat = 3;
    int parse_special = 0, first_file = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) return usage(stdout, 0);
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            if (i + 1 >= argc) return cli_die("%s needs a value", a), 2;
            model = argv[++i];
        } else if (!strcmp(a, "--repeat")) {
            if (cli_parse_int(a, i + 1 < argc ? argv[i + 1] : NULL, 1, 1000000, &repeat)) return 2;
            i++;
        } else if (!strcmp(a, "--parse-special")) {
            parse_special = 1;
        } else if (!strcmp(a, "--")) {
            first_file = i + 1;
            break;
        } else if (a[0] == '-' && a[1]) {
            return cli_die("bench-tokenizer: unknown option '%s' (see 'eliza-infer bench-tokenizer --help')", a), 2;
        } else {
            first_file = i;
            break;
        }
    }
    if (!model) return cli_die("bench-tokenizer: -m VOCAB.gguf is required"), 2;
    if (!first_file || first_file >= argc) return cli_die("bench-tokenizer: no input FILE given"), 2;

    eli_error err = {0};
    eli_gguf_file *f = eli_gguf_open(model, &err);
    if (!f) return cli_die("%s", err.msg);
    eli_tokenizer *tok = eli_tokenizer_load(f, &err);
    eli_gguf_close(f);
    if (!tok) return cli_die("%s: %s", model, err.msg);

    int w = 7; /* "overall" */
    for (int i = first_file; i < argc; i++) {
        size_t l = strlen(argv[i]);
        if (l > (size_t)w) w = l > 200 ? 200 : (int)l;
    }
    printf("%-*s %12s %10s %9s %10s %9s\n", w, "file", "bytes", "tokens", "bytes/tok", "seconds", "MB/s");
    int status = 0;
    double all_bytes = 0, all_tokens = 0, all_time = 0;
    for (int i = first_file; i < argc && !status; i++) {
        size_t len;
        char *text = cli_read_file(argv[i], &len);
        if (!text) {
            status = 1;
            break;
        }
        double best = -1;
        size_t n_tokens = 0;
        for (long long r = 0; r < repeat; r++) {
            int32_t *ids;
            size_t n;
            double t0 = cli_now();
            int rc = eli_tokenize(tok, text, len, 1, parse_special, &ids, &n, &err);
            double dt = cli_now() - t0;
            if (rc) {
                status = cli_die("%s: %s", argv[i], err.msg);
                break;
            }
            free(ids);
            n_tokens = n;
            if (best < 0 || dt < best) best = dt;
        }
        free(text);
        if (status) break;
        if (best <= 0) best = 1e-9;
        printf("%-*s %12zu %10zu %9.2f %10.4f %9.2f\n", w, argv[i], len, n_tokens,
               n_tokens ? (double)len / (double)n_tokens : 0.0, best, (double)len / best / 1e6);
        fflush(stdout);
        all_bytes += (double)len;
        all_tokens += (double)n_tokens;
        all_time += best;
    }
    if (!status && all_time > 0)
        printf("%-*s %12.0f %10.0f %9.2f %10.4f %9.2f\n", w, "overall", all_bytes, all_tokens,
               all_tokens ? all_bytes / all_tokens : 0.0, all_time, all_bytes / all_time / 1e6);
    eli_tokenizer_free(tok);
    if (!status && (fflush(stdout) || ferror(stdout))) status = cli_die("write error on stdout");
    return status;
}
