/* Speech recognition through the C ABI on a bundle made here (eliza-1-nano's text/ and mtp/, the golden
 * projector as vision/mmproj-test.gguf). The random-weight tower and the demo model make nonsense text; what
 * is checked is the mechanics:
 * - asr_transcribe is deterministic; band-limited audio gives the same transcript at 16 and at 48 kHz (the
 *   resampler's output differs from the 16 kHz samples by its passband ripple, about 3e-5 of the
 *   amplitude; the greedy choices of this model win by margins far larger than what that moves);
 * - a stream fed 31.5 s in pieces, with partial transcripts at 10 and 31 s: each equals asr_transcribe of
 *   the audio so far, finish equals asr_transcribe of all of it, and the encoder ran the first 30-second
 *   chunk once (the mel frames it saw, counted through the test hook, are exactly that chunk once plus
 *   each transcript's current chunk); the same at 48 kHz in uneven pieces (the streaming resampler);
 * - token ids out: capacity in, count out, truncation to the capacity;
 * - misuse and hostile input: rates, NaN, NULL, a size that cannot fit (refused before reading), feed after
 *   finish, calls after close, double close, close racing a partial, destroy with a stream open, evicting
 *   the towers or the text model under an open stream, projectors without an audio tower or of another
 *   width. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "audio.h"
#include "eliza_inference.h"
#include "ffi_internal.h"
#include "test.h"
#include "test_ffi_media.h"

#define NANO ELI_SOURCE_DIR "/models/eliza-1-nano"
#define PROJ "golden/mm/mmproj-gemma4-a.gguf"
#define CAP 32 /* transcript bytes: short transcripts keep the test fast */

/* Band-limited audio (tones up to 5.1 kHz, slowly modulated), sampled at rate. */
static float *tones(int rate, double seconds, int64_t *n) {
    *n = (int64_t)(seconds * rate);
    float *x = malloc((size_t)*n * sizeof *x);
    for (int64_t i = 0; i < *n; i++) {
        const double t = (double)i / rate;
        x[i] = (float)((0.25 + 0.1 * sin(2 * M_PI * 0.7 * t)) * sin(2 * M_PI * 330 * t) + 0.15 * sin(2 * M_PI * 1234 * t + 0.5) +
                       0.1 * sin(2 * M_PI * (2000 + 400 * sin(2 * M_PI * 0.3 * t)) * t) + 0.05 * sin(2 * M_PI * 5100 * t));
    }
    return x;
}

static int transcribe(EliInferenceContext *c, const float *pcm, int64_t n, int rate, char *out) {
    char *err = NULL;
    const int rc = eliza_inference_asr_transcribe(c, pcm, (size_t)n, rate, out, CAP, &err);
    CHECK(rc >= 0, "transcribe %lld samples at %d Hz: %s", (long long)n, rate, err ? err : "");
    eliza_inference_free_string(err);
    return rc;
}


static void test_transcribe(EliInferenceContext *c) {
    int64_t n16, n48;
    float *x16 = tones(16000, 2.5, &n16), *x48 = tones(48000, 2.5, &n48);
    char a[CAP], b[CAP], d[CAP];
    const int na = transcribe(c, x16, n16, 16000, a);
    CHECK(na > 0 && transcribe(c, x16, n16, 16000, b) == na && !strcmp(a, b), "deterministic: '%s' / '%s'", a, b);
    transcribe(c, x48, n48, 48000, d);
    CHECK(!strcmp(a, d), "16 kHz '%s' == 48 kHz '%s'", a, d);
    printf("transcript of 2.5 s of tones: '%s'\n", a);
    /* no audio, and too little for one mel frame: "" */
    CHECK(transcribe(c, x16, 0, 16000, b) == 0 && !*b, "no audio");
    CHECK(transcribe(c, x16, 1, 16000, b) == 0 && !*b, "one sample");
    free(x16), free(x48);
}

static int partial(EliAsrStream *s, int final, char *out, int32_t *ids, size_t *n_ids) {
    char *err = NULL;
    const int rc = final ? eliza_inference_asr_stream_finish(s, out, CAP, ids, n_ids, &err)
                         : eliza_inference_asr_stream_partial(s, out, CAP, ids, n_ids, &err);
    CHECK(rc >= 0, "%s: %s", final ? "finish" : "partial", err ? err : "");
    eliza_inference_free_string(err);
    return rc;
}

/* A stream fed x in pieces of `piece` samples, a partial once `at[i]` samples are in (ascending, 0-ended),
 * then finish; each transcript is compared with asr_transcribe of the same audio. Returns the stream's
 * encoded mel frames and, in *want_frames, what they are when a finished chunk is encoded once. */
static int64_t stream_check(EliInferenceContext *c, const float *x, int64_t n, int rate, int64_t piece, const int64_t *at,
                            int64_t *want_frames) {
    char *err = NULL, got[CAP], want[CAP];
    EliAsrStream *s = eliza_inference_asr_stream_open(c, rate, &err);
    CHECK(s != NULL, "open: %s", err ? err : "");
    eliza_inference_free_string(err), err = NULL;
    if (!s) return -1;
    *want_frames = 0;
    int64_t fed = 0, chunks_done = 0;
    int same = 1, n_partials = 0;
    while (fed < n) {
        const int64_t k = piece < n - fed ? piece : n - fed;
        const int rc = eliza_inference_asr_stream_feed(s, x + fed, (size_t)k, &err);
        CHECK(rc == (int)k, "feed %lld: %d %s", (long long)k, rc, err ? err : "");
        eliza_inference_free_string(err), err = NULL;
        fed += k;
        if ((*at && fed >= *at) || fed == n) {
            const int final = fed == n;
            partial(s, final, got, NULL, NULL);
            transcribe(c, x, fed, rate, want);
            same &= !strcmp(got, want);
            if (strcmp(got, want)) fprintf(stderr, "  at %lld samples: stream '%s', transcribe '%s'\n", (long long)fed, got, want);
            n_partials++;
            if (*at) at++;
            /* what the encoder must have seen: each finished chunk once, each transcript's current chunk */
            const int64_t n16 = rate == 16000 ? fed : -1; /* at other rates only the count of transcripts is known */
            if (n16 >= 0) {
                const int64_t full = n16 / ELI_MEL_CHUNK_SAMPLES;
                for (; chunks_done < full; chunks_done++) *want_frames += eli_mel_frames(ELI_MEL_CHUNK_SAMPLES);
                *want_frames += eli_mel_frames(n16 % ELI_MEL_CHUNK_SAMPLES);
            }
        }
    }
    CHECK(same, "%d transcripts of the stream == asr_transcribe of the audio so far (%d Hz)", n_partials, rate);
    const int64_t frames = eli_ffi_asr_encoded_frames(s);
    eliza_inference_asr_stream_close(s);
    return frames;
}

static void test_stream(EliInferenceContext *c) {
    int64_t n, want_frames;
    float *x = tones(16000, 31.5, &n);
    const int64_t at16[] = {10 * 16000, 31 * 16000, 0};
    const int64_t frames = stream_check(c, x, n, 16000, 8000, at16, &want_frames);
    CHECK(frames == want_frames, "the encoder saw %lld mel frames; the first chunk once and each transcript's current chunk make %lld",
          (long long)frames, (long long)want_frames);
    printf("31.5 s stream, 3 transcripts: %lld mel frames encoded (re-encoding the finished chunk would add %lld per transcript)\n",
           (long long)frames, (long long)eli_mel_frames(ELI_MEL_CHUNK_SAMPLES));
    free(x);
    x = tones(48000, 3.0, &n);
    const int64_t at48[] = {48000, 0};
    stream_check(c, x, n, 48000, 4801, at48, &want_frames);
    free(x);
}

static void test_tokens(EliInferenceContext *c) {
    int64_t n;
    float *x = tones(16000, 1.5, &n);
    EliAsrStream *s = eliza_inference_asr_stream_open(c, 16000, NULL);
    char text[CAP], *err = NULL;
    int32_t ids[600], few[4];
    size_t n_all = 600, n_few = 4, n_count = 0;
    CHECK(s && eliza_inference_asr_stream_feed(s, x, (size_t)n, NULL) == (int)n, "feed");
    partial(s, 0, text, ids, &n_all);
    partial(s, 0, text, few, &n_few);
    partial(s, 0, text, NULL, &n_count);
    CHECK(n_all > 4 && n_few == 4 && n_count == n_all && !memcmp(ids, few, sizeof few),
          "ids: %zu, truncated to %zu, counted %zu", n_all, n_few, n_count);
    char scratch[CAP];
    int rc = eliza_inference_asr_stream_partial(s, scratch, CAP, ids, NULL, &err);
    CHECK(SAYS(rc, ELIZA_ERR_INVALID_ARG, err, "io_n_tokens"), "out_tokens without a capacity");
    rc = eliza_inference_asr_stream_partial(s, NULL, CAP, NULL, NULL, &err);
    CHECK(SAYS(rc, ELIZA_ERR_INVALID_ARG, err, "out_text"), "NULL out_text");
    /* feed is all or nothing */
    x[100] = NAN;
    rc = eliza_inference_asr_stream_feed(s, x, 200, &err);
    CHECK(SAYS(rc, ELIZA_ERR_INVALID_ARG, err, "sample 100", "finite"), "NaN PCM");
    rc = eliza_inference_asr_stream_feed(s, NULL, 200, &err);
    CHECK(SAYS(rc, ELIZA_ERR_INVALID_ARG, err, "NULL"), "NULL pcm");
    rc = eliza_inference_asr_stream_feed(s, x, (size_t)-1, &err);
    CHECK(SAYS(rc, ELIZA_ERR_INVALID_ARG, err, "n_samples"), "huge n, refused before reading");
    rc = eliza_inference_asr_stream_feed(s, x, 16000 * 100, &err);
    CHECK(SAYS(rc, ELIZA_ERR_INVALID_ARG, err, "do not fit", "holds at most"), "more than the context holds, refused before reading");
    CHECK(eliza_inference_asr_stream_feed(s, x, 0, NULL) == 0, "feeding nothing");
    char again[CAP];
    size_t n_again = 600;
    partial(s, 0, again, ids, &n_again);
    CHECK(!strcmp(text, again) && n_again == n_all, "refused feeds changed nothing");
    /* evicting what an open ASR stream uses is refused */
    rc = eliza_inference_mmap_evict(c, "asr", &err);
    CHECK(SAYS(rc, ELIZA_ERR_INVALID_ARG, err, "in use"), "evict asr under an open stream");
    rc = eliza_inference_mmap_evict(c, "text", &err);
    CHECK(SAYS(rc, ELIZA_ERR_INVALID_ARG, err, "in use"), "evict text under an open stream");
    /* finish is final */
    partial(s, 1, text, NULL, NULL);
    rc = eliza_inference_asr_stream_feed(s, x + 200, 100, &err);
    CHECK(SAYS(rc, ELIZA_ERR_INVALID_ARG, err, "finished"), "feed after finish");
    partial(s, 0, again, NULL, NULL);
    CHECK(!strcmp(text, again), "partial after finish: the final transcript");
    eliza_inference_asr_stream_close(s);
    eliza_inference_asr_stream_close(s); /* double close */
    eliza_inference_asr_stream_close(NULL);
    rc = eliza_inference_asr_stream_feed(s, x + 200, 100, &err);
    CHECK(SAYS(rc, ELIZA_ERR_INVALID_ARG, err, "closed ASR stream"), "feed after close");
    rc = eliza_inference_asr_stream_finish(s, text, CAP, NULL, NULL, &err);
    CHECK(SAYS(rc, ELIZA_ERR_INVALID_ARG, err, "closed ASR stream"), "finish after close");
    CHECK(eliza_inference_mmap_evict(c, "asr", NULL) == ELIZA_OK, "evict asr once the stream is closed");
    free(x);
    for (int r = 0; r < 3; r++) {
        static const int bad[] = {0, -16000, 999};
        s = eliza_inference_asr_stream_open(c, bad[r], &err);
        CHECK(!s && SAYS(ELIZA_ERR_INVALID_ARG, ELIZA_ERR_INVALID_ARG, err, "sample_rate_hz"), "rate %d", bad[r]);
    }
    const float one = 0.5f;
    rc = eliza_inference_asr_transcribe(c, &one, 1, 0, text, CAP, &err);
    CHECK(SAYS(rc, ELIZA_ERR_INVALID_ARG, err, "sample_rate_hz 0"), "transcribe at rate 0");
    rc = eliza_inference_asr_transcribe(c, &one, (size_t)-1, 16000, text, CAP, &err);
    CHECK(SAYS(rc, ELIZA_ERR_INVALID_ARG, err, "do not fit"), "transcribe of a size that cannot fit");
    rc = eliza_inference_asr_transcribe(c, NULL, 10, 16000, text, CAP, &err);
    CHECK(SAYS(rc, ELIZA_ERR_INVALID_ARG, err, "NULL"), "transcribe of NULL");
}

typedef struct {
    EliAsrStream *s;
    int rc;
} racer;

static void *run_partial(void *p) {
    racer *r = p;
    char text[CAP];
    r->rc = eliza_inference_asr_stream_partial(r->s, text, CAP, NULL, NULL, NULL);
    return NULL;
}

static void test_races(EliInferenceContext *c) {
    int64_t n;
    float *x = tones(16000, 4.0, &n);
    for (int round = 0; round < 3; round++) {
        EliAsrStream *s = eliza_inference_asr_stream_open(c, 16000, NULL);
        CHECK(s && eliza_inference_asr_stream_feed(s, x, (size_t)n, NULL) == (int)n, "feed");
        racer r = {s, 1};
        pthread_t th;
        pthread_create(&th, NULL, run_partial, &r);
        const struct timespec ts = {0, 2000000L * round};
        nanosleep(&ts, NULL);
        eliza_inference_asr_stream_close(s);
        pthread_join(th, NULL);
        CHECK(r.rc >= 0 || r.rc == ELIZA_ERR_CANCELLED || r.rc == ELIZA_ERR_INVALID_ARG, "close racing partial: %d", r.rc);
    }
    /* destroy with a stream open: the stream goes with the context */
    char *err = NULL;
    test_bundle b;
    CHECK(!test_bundle_make(&b, NANO "/text", NULL, eli_shared_path(PROJ)), "bundle");
    EliInferenceContext *c2 = eliza_inference_create(b.dir, NULL);
    EliAsrStream *s = c2 ? eliza_inference_asr_stream_open(c2, 16000, NULL) : NULL;
    CHECK(s && eliza_inference_asr_stream_feed(s, x, 16000, NULL) == 16000, "a stream on a second context");
    eliza_inference_destroy(c2);
    const int rc = eliza_inference_asr_stream_feed(s, x, 100, &err);
    CHECK(SAYS(rc, ELIZA_ERR_INVALID_ARG, err, "closed ASR stream"), "a stream of a destroyed context");
    eliza_inference_asr_stream_close(s);
    CHECK(!eliza_inference_asr_stream_open(c2, 16000, NULL), "open on a destroyed context");
    test_bundle_remove(&b);
    free(x);
}

/* Bundles whose projector has no audio tower, or one of another width. */
static void test_projectors(void) {
    static const struct {
        const char *proj;
        int code;
        const char *word;
    } cases[] = {{ELI_SOURCE_DIR "/tests/data/mm/mmproj-b-f16.gguf", ELIZA_ERR_NOT_IMPLEMENTED, "no audio tower"},
                 {ELI_SOURCE_DIR "/tests/data/mm/a-q8.gguf", ELIZA_ERR_INVALID_ARG, "another model"}};
    const float pcm[3200] = {0};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        test_bundle b;
        CHECK(!test_bundle_make(&b, NANO "/text", NULL, cases[i].proj), "bundle");
        EliInferenceContext *c = eliza_inference_create(b.dir, NULL);
        char text[CAP], *err = NULL;
        int rc = eliza_inference_asr_transcribe(c, pcm, 3200, 16000, text, CAP, &err);
        CHECK(SAYS(rc, cases[i].code, err, cases[i].word), "%s: transcribe", cases[i].proj);
        rc = eliza_inference_mmap_acquire(c, "asr", &err);
        CHECK(SAYS(rc, cases[i].code, err, cases[i].word), "%s: acquire asr", cases[i].proj);
        CHECK(!eliza_inference_asr_stream_open(c, 16000, NULL), "%s: stream open", cases[i].proj);
        eliza_inference_destroy(c);
        test_bundle_remove(&b);
    }
}

int main(void) {
    test_bundle b;
    CHECK(!test_bundle_make(&b, NANO "/text", NANO "/mtp", eli_shared_path(PROJ)), "bundle");
    char *err = NULL;
    EliInferenceContext *c = eliza_inference_create(b.dir, &err);
    CHECK(c != NULL, "create: %s", err ? err : "");
    if (c) {
        test_transcribe(c);
        test_stream(c);
        test_tokens(c);
        test_races(c);
    }
    test_projectors();
    eliza_inference_destroy(c);
    test_bundle_remove(&b);
    TEST_MAIN_END();
}
