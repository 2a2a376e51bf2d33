/* eliza-infer bench-audio --mmproj FILE --audio WAV [-t N] [--reps R]
 * Times the audio tower on one clip: a warm-up, then R runs over its 30-second chunks of the decoded 16 kHz
 * PCM, each timed as log-mel and encoder separately (the encoder alone is what llama.cpp's
 * mtmd_encode_chunk does; its mel runs in mtmd_tokenize). Prints each run, the mean and minimum, and the
 * real-time factors (time / audio duration). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audio_mel.h"
#include "cli.h"

static int usage(void) {
    fprintf(stderr, "usage: eliza-infer bench-audio --mmproj FILE --audio WAV [-t THREADS] [--reps R]\n");
    return 2;
}

/* One run over every chunk: the seconds of the log-mel and of the encoder. */
static int run_once(cli_audio *a, float *mel, float *emb, double *t_mel, double *t_enc, int64_t *n_tok, eli_error *err) {
    *t_mel = *t_enc = 0.0;
    *n_tok = 0;
    for (int64_t off = 0; off < a->n; off += ELI_MEL_CHUNK_SAMPLES) {
        const double t0 = cli_now();
        const int64_t T = eli_audio_mel(a->tower.audio, a->pcm + off, a->n - off, mel);
        const double t1 = cli_now();
        if (T > 0 && eli_xtower_encode_audio(a->tower.xt, mel, T, emb, err)) return 1;
        *t_mel += t1 - t0;
        *t_enc += cli_now() - t1;
        *n_tok += eli_audio_chunk_tokens(T);
    }
    return 0;
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
    const int64_t max_frames = eli_mel_frames(ELI_MEL_CHUNK_SAMPLES);
    float *mel = malloc((size_t)max_frames * (size_t)eli_audio_n_mel(a.tower.audio) * sizeof *mel);
    float *emb = malloc((size_t)eli_audio_chunk_tokens(max_frames) * (size_t)eli_audio_n_embd(a.tower.audio) * sizeof *emb);
    if (!mel || !emb) {
        free(mel), free(emb);
        cli_audio_close(&a);
        return cli_die("out of memory");
    }
    eli_error err = {0};
    const double audio_s = (double)a.n / 16000.0;
    double sum_mel = 0.0, sum_enc = 0.0, best_mel = 0.0, best_enc = 0.0;
    int64_t n_tok = 0;
    int rc = 0;
    for (long long r = -1; r < reps && !rc; r++) { /* r = -1: warm-up, not counted */
        double tm, te;
        if ((rc = run_once(&a, mel, emb, &tm, &te, &n_tok, &err))) {
            cli_die("%s: %s", wav, err.msg);
            break;
        }
        if (r < 0) continue;
        printf("rep %lld: log-mel %.2f ms, encoder %.2f ms\n", r + 1, tm * 1e3, te * 1e3);
        sum_mel += tm, sum_enc += te;
        best_mel = r == 0 || tm < best_mel ? tm : best_mel;
        best_enc = r == 0 || te < best_enc ? te : best_enc;
    }
    if (!rc) {
        const double mean_mel = sum_mel / (double)reps, mean_enc = sum_enc / (double)reps;
        printf("audio %.3f s, %lld tokens, %d threads\n", audio_s, (long long)n_tok, a.tower.threads);
        printf("log-mel ms: mean %.2f, min %.2f\nencode ms: mean %.2f, min %.2f\n", mean_mel * 1e3, best_mel * 1e3, mean_enc * 1e3,
               best_enc * 1e3);
        printf("real-time factor (log-mel + encoder): %.4f mean, %.4f min\n", (mean_mel + mean_enc) / audio_s,
               (best_mel + best_enc) / audio_s);
    }
    free(mel), free(emb);
    cli_audio_close(&a);
    return rc;
}
