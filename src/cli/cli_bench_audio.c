/* eliza-infer bench-audio --mmproj FILE --audio WAV [-t N] [--reps R]
 * Times the audio tower on one clip: a warm-up, then R encodes (log-mel + encoder from the decoded 16 kHz
 * PCM); prints each, their mean and minimum, and the real-time factor (encode time / audio duration). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static int usage(void) {
    fprintf(stderr, "usage: eliza-infer bench-audio --mmproj FILE --audio WAV [-t THREADS] [--reps R]\n");
    return 2;
}

int cli_bench_audio(int argc, char **argv) {
    const char *mmproj = NULL, *wav = NULL;
    int threads = 0;
    long long reps = 5;
    for (int i = 1; i < argc; i++) {
        const int c = cli_audio_option(argc, argv, &i, &mmproj, &wav, &threads);
        if (c < 0) return 2;
        if (c) continue;
        if (!strcmp(argv[i], "--reps")) {
            if (cli_parse_int(argv[i], i + 1 < argc ? argv[i + 1] : NULL, 1, 1000, &reps)) return 2;
            i++;
        } else if (!strcmp(argv[i], "--help")) return usage(), 0;
        else return cli_bad_option("bench-audio", argv[i], i + 1 < argc);
    }
    if (!mmproj || !wav) return usage();
    cli_audio a;
    if (cli_audio_open(mmproj, wav, threads, &a)) return 1;
    eli_error err = {0};
    const double audio_s = (double)a.n / 16000.0;
    double sum = 0.0, best = 0.0;
    int64_t n_tok = 0;
    for (long long r = -1; r < reps; r++) { /* r = -1: warm-up, not counted */
        float *emb;
        const double t0 = cli_now();
        if (eli_audio_embed(a.enc, a.pool, a.pcm, a.n, &emb, &n_tok, NULL, &err)) {
            cli_audio_close(&a);
            return cli_die("%s: %s", wav, err.msg);
        }
        const double ms = (cli_now() - t0) * 1e3;
        free(emb);
        if (r < 0) continue;
        printf("rep %lld: encode %.2f ms\n", r + 1, ms);
        sum += ms;
        best = r == 0 || ms < best ? ms : best;
    }
    const double mean = sum / (double)reps;
    printf("audio %.3f s, %lld tokens, %d threads\n", audio_s, (long long)n_tok, eli_pool_size(a.pool));
    printf("encode ms: mean %.2f, min %.2f\nreal-time factor: %.4f (mean), %.4f (min)\n", mean, best, mean / 1e3 / audio_s,
           best / 1e3 / audio_s);
    cli_audio_close(&a);
    return 0;
}
