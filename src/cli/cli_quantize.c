/* eliza-infer quantize IN.gguf OUT.gguf TYPE [--threads N]
 *
 * Writes the model of IN.gguf in file type TYPE (quantize.h: llama-quantize's tensor choices and layout,
 * byte for byte, for the types llama.cpp has; tq4_0 is ours). */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "os.h"
#include "quantize.h"

static void usage(FILE *out) {
    int n;
    const eli_qftype *all = eli_qftype_all(&n);
    fprintf(out, "usage: eliza-infer quantize IN.gguf OUT.gguf TYPE [--threads N]\n  TYPE:");
    for (int i = 0; i < n; i++) fprintf(out, " %s", all[i].name);
    fprintf(out, "\n  (q4_k, q5_k: every weight in that type; the others follow llama.cpp's mixture rules)\n");
}

int cli_quantize(int argc, char **argv) {
    const char *pos[3] = {NULL, NULL, NULL};
    int n_pos = 0;
    long long threads = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--threads") || !strcmp(a, "-t")) {
            if (cli_parse_int(a, v, 1, 256, &threads)) return 2;
            i++;
        } else if (a[0] == '-' && a[1]) {
            return cli_bad_option("quantize", a, v != NULL);
        } else if (n_pos < 3) {
            pos[n_pos++] = a;
        } else {
            usage(stderr);
            return 2;
        }
    }
    if (n_pos != 3) {
        usage(stderr);
        return 2;
    }
    const eli_qftype *ft = eli_qftype_find(pos[2]);
    if (!ft) {
        cli_die("unknown type '%s'", pos[2]);
        usage(stderr);
        return 2;
    }
    if (!threads) threads = eli_os_cpu_count();
    eli_error err = {0};
    eli_quantize_stats st;
    const double t0 = cli_now();
    if (eli_quantize_file(pos[0], pos[1], ft, (int)threads, &st, &err)) return cli_die("%s", err.msg);
    printf("%s: %s, %llu tensors (%llu converted, %llu fell back to another type), %.2f MiB -> %.2f MiB, "
           "%.3f bits per weight, %.1f s\n",
           pos[1], ft->name, (unsigned long long)st.n_tensors, (unsigned long long)st.n_quantized,
           (unsigned long long)st.n_fallback, (double)st.bytes_in / 1048576.0, (double)st.bytes_out / 1048576.0,
           st.n_weights ? 8.0 * (double)st.bytes_out / (double)st.n_weights : 0.0, cli_now() - t0);
    return 0;
}
