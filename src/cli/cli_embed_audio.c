/* eliza-infer embed-audio --mmproj FILE --audio WAV [-t N] -o OUT.f32
 * Writes the audio tower's soft-token embeddings as raw little-endian float32 [n_tokens][n_embd] and
 * prints n_tokens and the number of mel frames. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "fileio.h"
#include "resample.h"

static int usage(void) {
    fprintf(stderr, "usage: eliza-infer embed-audio --mmproj FILE --audio WAV [-t THREADS] -o OUT.f32\n");
    return 2;
}

int cli_audio_open(const char *mmproj, const char *wav, int threads, cli_audio *a) {
    memset(a, 0, sizeof *a);
    eli_error err = {0};
    eli_pcm pcm;
    if (cli_tower_open(mmproj, ELI_MM_AUDIO, threads, &a->tower)) return 1;
    if (eli_wav_load(wav, &pcm, &err)) {
        cli_audio_close(a);
        return cli_die("%s", err.msg);
    }
    const int rc = eli_pcm_to_mono16k(&pcm, &a->pcm, &a->n, &err);
    eli_pcm_free(&pcm);
    if (rc) {
        cli_audio_close(a);
        return cli_die("%s: %s", wav, err.msg);
    }
    return 0;
}

void cli_audio_close(cli_audio *a) {
    free(a->pcm);
    cli_tower_close(&a->tower);
    memset(a, 0, sizeof *a);
}

/* The options embed-audio and bench-audio share: consumes argv[*i] (and its value): 1 consumed, 0 not
 * one, -1 bad value. */
int cli_audio_option(int argc, char **argv, int *i, const char **mmproj, const char **wav, int *threads) {
    const char *a = argv[*i], *v = *i + 1 < argc ? argv[*i + 1] : NULL;
    long long x;
    if (!strcmp(a, "--mmproj")) *mmproj = v;
    else if (!strcmp(a, "--audio")) *wav = v;
    else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
        if (cli_parse_int(a, v, 1, 1024, &x)) return -1;
        *threads = (int)x;
    } else return 0;
    if (!v) return cli_die("%s needs a value", a), -1;
    (*i)++;
    return 1;
}

int cli_embed_audio(int argc, char **argv) {
    const char *mmproj = NULL, *wav = NULL, *outp = NULL;
    int threads = 0;
    for (int i = 1; i < argc; i++) {
        const int c = cli_audio_option(argc, argv, &i, &mmproj, &wav, &threads);
        if (c < 0) return 2;
        if (c) continue;
        if (!strcmp(argv[i], "-o") || !strcmp(argv[i], "--output")) {
            if (i + 1 >= argc) return cli_die("embed-audio: %s needs a value", argv[i]), 2;
            outp = argv[++i];
        } else if (!strcmp(argv[i], "--help")) return usage(), 0;
        else return cli_bad_option("embed-audio", argv[i], i + 1 < argc);
    }
    if (!mmproj || !wav || !outp) return usage();
    cli_audio a;
    if (cli_audio_open(mmproj, wav, threads, &a)) return 1;
    eli_error err = {0};
    float *emb = NULL;
    int64_t n_tok = 0, n_frames = 0;
    int rc = 1;
    if (eli_audio_embed(a.tower.xt, a.pcm, a.n, &emb, &n_tok, &n_frames, &err)) cli_die("%s: %s", wav, err.msg);
    else if (eli_write_file_atomic(outp, emb, (size_t)n_tok * (size_t)eli_audio_n_embd(a.tower.audio) * sizeof *emb, &err))
        cli_die("%s", err.msg);
    else {
        printf("n_tokens %lld\nn_mel_frames %lld\nn_embd %d\n", (long long)n_tok, (long long)n_frames,
               eli_audio_n_embd(a.tower.audio));
        rc = 0;
    }
    free(emb);
    cli_audio_close(&a);
    return rc;
}
