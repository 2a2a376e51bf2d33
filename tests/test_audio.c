/* Audio input: WAV decoding, resampling, the gemma4a log-mel front end and audio encoder.
 *
 * References: llama.cpp's mtmd (golden/mm: decoded PCM, log-mel and embeddings of the golden projector;
 * tests/data/mm: embeddings of random-weight projectors written by tools/mm/make_audio_projector.py, see
 * the README there), miniaudio's output lengths, analytic sines for the resampler. Hostile WAV files and
 * projectors must fail with a message naming the problem. */
#include <float.h>
#include <math.h>
#include <unistd.h>

#include "audio.h"
#include "audio_mel.h"
#include "mmproj_edit.h"
#include "resample.h"
#include "test.h"
#include "test_exec.h"
#include "wav.h"

#define MM "golden/mm/"
#define GOLDEN_PROJ MM "mmproj-gemma4-a.gguf"
#define DATA ELI_SOURCE_DIR "/tests/data/mm/"

/* ---- helpers ---- */

static float *read_f32(const char *path, int64_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    const long bytes = ftell(f);
    fseek(f, 0, SEEK_SET);
    float *v = malloc(bytes > 0 ? (size_t)bytes : 1);
    if (v && fread(v, 1, (size_t)bytes, f) != (size_t)bytes) {
        free(v);
        v = NULL;
    }
    fclose(f);
    *n = bytes / 4;
    return v;
}

/* rms(a - b) / rms(b) and max |a - b| over n values */
static double rel_rms(const float *a, const float *b, int64_t n, double *max_abs) {
    double se = 0.0, sr = 0.0, mx = 0.0;
    for (int64_t i = 0; i < n; i++) {
        const double d = (double)a[i] - b[i];
        se += d * d;
        sr += (double)b[i] * b[i];
        mx = fabs(d) > mx ? fabs(d) : mx;
    }
    if (max_abs) *max_abs = mx;
    return sqrt(se / (sr > 0 ? sr : 1));
}

/* The tower of a projector, prepared with n_threads; 0 when it could not be opened (reported). */
static int open_tower(const char *path, int n_threads, test_tower *t) {
    eli_error err = {0};
    const int rc = test_tower_open(path, ELI_MM_AUDIO, n_threads, t, &err);
    CHECK(rc == 0, "%s: %s", path, err.msg);
    return rc == 0;
}

static int load_mono16k(const char *wav, float **pcm, int64_t *n) {
    eli_error err = {0};
    eli_pcm in;
    int rc = eli_wav_load(wav, &in, &err);
    if (!rc) rc = eli_pcm_to_mono16k(&in, pcm, n, &err);
    eli_pcm_free(&in);
    CHECK(rc == 0, "%s: %s", wav, err.msg);
    return rc;
}

/* The 16-bit sawtooth-plus-noise signal of tools/mm/make_test_wav.py, channel c of frame i. */
static int16_t saw_noise_sample(int64_t i, int c, uint32_t *x) {
    *x = *x * 1103515245u + 12345u;
    return (int16_t)(((i + 1000 * c) * 97) % 4001 - 2000 + (int64_t)((*x >> 16) % 1001) - 500);
}

/* ---- WAV files in memory ---- */

typedef struct {
    uint8_t b[4096];
    size_t n;
} wbuf;

static void put(wbuf *w, const void *p, size_t n) {
    memcpy(w->b + w->n, p, n);
    w->n += n;
}
static void put16(wbuf *w, uint16_t v) { put(w, (uint8_t[]){(uint8_t)v, (uint8_t)(v >> 8)}, 2); }
static void put32(wbuf *w, uint32_t v) { put(w, (uint8_t[]){(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)}, 4); }

/* A WAV with the given fmt fields and data bytes; extensible: WAVE_FORMAT_EXTENSIBLE with `tag` as the
 * subformat. The RIFF size is patched at the end. */
static void make_wav(wbuf *w, int tag, int extensible, int channels, uint32_t rate, int bits, const void *data, uint32_t bytes) {
    w->n = 0;
    put(w, "RIFF\0\0\0\0WAVEfmt ", 16);
    put32(w, extensible ? 40 : 16);
    put16(w, extensible ? 0xFFFE : (uint16_t)tag);
    put16(w, (uint16_t)channels);
    put32(w, rate);
    put32(w, rate * (uint32_t)(channels * bits / 8));
    put16(w, (uint16_t)(channels * bits / 8));
    put16(w, (uint16_t)bits);
    if (extensible) {
        put16(w, 22);
        put16(w, (uint16_t)bits);
        put32(w, channels == 2 ? 3 : 4);
        put16(w, (uint16_t)tag);
        put(w, "\x00\x00\x00\x00\x10\x00\x80\x00\x00\xAA\x00\x38\x9B\x71", 14);
    }
    put(w, "data", 4);
    put32(w, bytes);
    put(w, data, bytes);
    const uint32_t riff = (uint32_t)w->n - 8;
    memcpy(w->b + 4, &riff, 4);
}

/* Every sample format decodes the same values: v[i] = (i - 3) / 8 (exact in every format). */
static void test_wav_formats(void) {
    enum { N = 8 };
    float want[N];
    for (int i = 0; i < N; i++) want[i] = (float)(i - 3) / 8.0f;
    static const struct {
        int tag, bits, ext;
    } fmts[] = {{1, 16, 0}, {1, 24, 0}, {1, 32, 0}, {3, 32, 0}, {1, 16, 1}, {1, 24, 1}, {3, 32, 1}};
    for (size_t f = 0; f < sizeof fmts / sizeof fmts[0]; f++) {
        uint8_t data[N * 4];
        const int bytes = fmts[f].bits / 8;
        for (int i = 0; i < N; i++) {
            uint32_t u;
            if (fmts[f].tag == 3) memcpy(&u, &want[i], 4);
            else u = (uint32_t)(int32_t)((i - 3) * (1 << (fmts[f].bits - 4)));
            for (int k = 0; k < bytes; k++) data[i * bytes + k] = (uint8_t)(u >> 8 * k);
        }
        wbuf w;
        make_wav(&w, fmts[f].tag, fmts[f].ext, 1, 22050, fmts[f].bits, data, (uint32_t)(N * bytes));
        eli_pcm p;
        eli_error err = {0};
        const int rc = eli_wav_decode(w.b, w.n, &p, &err);
        CHECK(rc == 0 && p.n_frames == N && p.channels == 1 && p.rate == 22050, "format %zu: %s", f, err.msg);
        for (int i = 0; !rc && i < N; i++) CHECK(p.samples[i] == want[i], "format %zu sample %d: %g", f, i, (double)p.samples[i]);
        eli_pcm_free(&p);
    }
    /* the extreme 16-bit values and an odd-sized chunk (padded) before the data */
    wbuf w;
    const int16_t s[4] = {-32768, 32767, 1, -1};
    make_wav(&w, 1, 0, 2, 16000, 16, s, sizeof s);
    wbuf w2 = {{0}, 0};
    put(&w2, w.b, 36);
    put(&w2, "LIST\x03\x00\x00\x00xyz\x00", 12);
    put(&w2, w.b + 36, w.n - 36);
    eli_pcm p;
    eli_error err = {0};
    CHECK(eli_wav_decode(w2.b, w2.n, &p, &err) == 0 && p.channels == 2 && p.n_frames == 2, "%s", err.msg);
    if (p.samples) {
        CHECK(p.samples[0] == -1.0f && p.samples[1] == 32767.0f / 32768.0f, "extremes %g %g", (double)p.samples[0],
              (double)p.samples[1]);
        float *m;
        int64_t n;
        CHECK(eli_pcm_to_mono16k(&p, &m, &n, &err) == 0 && n == 2, "%s", err.msg);
        if (n == 2) CHECK(m[0] == -1.0f / 65536.0f && m[1] == 0.0f, "downmix %g %g", (double)m[0], (double)m[1]);
        free(m);
    }
    eli_pcm_free(&p);
}

typedef void (*wav_edit)(wbuf *w);
static void w_short(wbuf *w) { w->n = 10; }
static void w_not_riff(wbuf *w) { memcpy(w->b, "RIFX", 4); }
static void w_not_wave(wbuf *w) { memcpy(w->b + 8, "AVI ", 4); }
static void w_fmt_size(wbuf *w) { w->b[16] = 12; }                  /* fmt chunk of 12 bytes */
static void w_chunk_huge(wbuf *w) { memset(w->b + 16, 0xFF, 4); }   /* fmt declares 4 GiB */
static void w_no_fmt(wbuf *w) { memcpy(w->b + 12, "junk", 4); }
static void w_no_data(wbuf *w) { memcpy(w->b + 36, "dat4", 4); }
static void w_trunc_data(wbuf *w) { w->n -= 3; }
static void w_odd_frames(wbuf *w) { w->b[40] -= 1, w->n -= 1; }     /* data of 15 bytes in 2-byte frames */
static void w_channels0(wbuf *w) { w->b[22] = 0; }
static void w_channels3(wbuf *w) { w->b[22] = 3, w->b[32] = 6; }
static void w_rate0(wbuf *w) { memset(w->b + 24, 0, 4); }
static void w_rate_huge(wbuf *w) { memset(w->b + 24, 0xFF, 4); }
static void w_bits8(wbuf *w) { w->b[34] = 8, w->b[32] = 1; }
static void w_float64(wbuf *w) { w->b[20] = 3, w->b[34] = 64, w->b[32] = 8; }
static void w_align(wbuf *w) { w->b[32] = 4; }
static void w_tag(wbuf *w) { w->b[20] = 2; }                         /* ADPCM */
static void w_empty(wbuf *w) { memset(w->b + 40, 0, 4), w->n = 44; }
static void w_nan(wbuf *w) { w->b[20] = 3, w->b[34] = 32, w->b[32] = 4, memcpy(w->b + 44, "\x00\x00\xC0\x7F", 4); }
/* a finite float of 1e30 (found by fuzz_wav: resampled, such samples summed to infinity) */
static void w_huge(wbuf *w) { w->b[20] = 3, w->b[34] = 32, w->b[32] = 4, memcpy(w->b + 48, "\xCA\xF2\x49\x71", 4); }

static void test_wav_hostile(void) {
    static const struct {
        wav_edit fn;
        const char *want;
    } cases[] = {
        {w_short, "too short"},         {w_not_riff, "RIFX files are not supported"}, {w_not_wave, "not a WAV file"},
        {w_fmt_size, "shorter than 16"}, {w_chunk_huge, "truncated WAV: chunk 'fmt '"}, {w_no_fmt, "no fmt chunk"},
        {w_no_data, "no data chunk"},   {w_trunc_data, "truncated WAV: chunk 'data'"},  {w_odd_frames, "not a whole number"},
        {w_channels0, "0 channels"},    {w_channels3, "3 channels"},                   {w_rate0, "sample rate 0 Hz"},
        {w_rate_huge, "sample rate 4294967295"}, {w_bits8, "8-bit integer PCM"},       {w_float64, "64-bit float"},
        {w_align, "block align 4"},     {w_tag, "format tag 0x0002"},                  {w_empty, "no samples"},
        {w_nan, "not a finite number"}, {w_huge, "WAV sample 1 (1e+30) is beyond +-10000"},
    };
    const int16_t s[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        wbuf w;
        make_wav(&w, 1, 0, 1, 16000, 16, s, sizeof s);
        cases[i].fn(&w);
        eli_pcm p;
        eli_error err = {0};
        const int rc = eli_wav_decode(w.b, w.n, &p, &err);
        CHECK(rc < 0 && strstr(err.msg, cases[i].want) && !p.samples, "case %zu: rc %d, '%s', expected '%s'", i, rc, err.msg,
              cases[i].want);
    }
    /* an extensible header with a foreign subformat GUID */
    wbuf w;
    make_wav(&w, 1, 1, 1, 16000, 16, s, sizeof s);
    w.b[50] ^= 1;
    eli_pcm p;
    eli_error err = {0};
    CHECK(eli_wav_decode(w.b, w.n, &p, &err) < 0 && strstr(err.msg, "subformat"), "GUID: %s", err.msg);
    /* every single-byte corruption and every truncation of a valid file: an error or a decode, never a crash
     * (the sanitizer build checks the reads) */
    make_wav(&w, 1, 1, 2, 44100, 24, s, 12);
    int decoded = 0;
    for (size_t at = 0; at < w.n; at++)
        for (int v = 0; v < 256; v += 51) {
            wbuf c = w;
            c.b[at] = (uint8_t)v;
            if (!eli_wav_decode(c.b, c.n, &p, NULL)) decoded++;
            eli_pcm_free(&p);
            if (!eli_wav_decode(w.b, at, &p, NULL)) decoded++;
            eli_pcm_free(&p);
        }
    CHECK(decoded > 0, "no corrupted variant decoded at all");
    CHECK(eli_wav_load("/nonexistent/x.wav", &p, &err) < 0 && strstr(err.msg, "/nonexistent/x.wav"), "%s", err.msg);
}

/* ---- resampling ---- */

/* Output lengths: miniaudio's decoder (inside llama.cpp's mtmd) on WAVs of these rates and frame counts
 * (tests/data/mm/README.md, "resampled lengths"). */
static void test_resample_length(void) {
    static const struct {
        int rate;
        int64_t in, out;
    } cases[] = {
#include "data/mm/resample_lengths.inc"
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        CHECK(eli_resample_length(cases[i].in, cases[i].rate, ELI_AUDIO_RATE) == cases[i].out, "%d Hz, %lld frames: %lld, want %lld",
              cases[i].rate, (long long)cases[i].in, (long long)eli_resample_length(cases[i].in, cases[i].rate, ELI_AUDIO_RATE),
              (long long)cases[i].out);
}

/* Sines through the resampler against the analytic sine at 16 kHz, away from the ends (the filter's
 * half-length, 3.6 ms): the passband (to 0.9 x the lower Nyquist) within 1e-4 of the amplitude, tones above
 * 8 kHz (that would fold back) below -85 dB. */
static void test_resample_quality(void) {
    static const int rates[] = {44100, 48000, 22050, 8000};
    static const double freqs[] = {100, 1000, 3000, 3590, 5000, 7000, 7190, 8500, 9000, 12000, 15000, 20000};
    double worst_pass = 0.0, worst_stop = 0.0;
    for (size_t r = 0; r < sizeof rates / sizeof rates[0]; r++) {
        const int R = rates[r];
        const int64_t n = R / 4; /* 0.25 s */
        float *x = malloc((size_t)n * sizeof *x);
        for (size_t k = 0; k < sizeof freqs / sizeof freqs[0]; k++) {
            const double f = freqs[k], fn = 0.5 * (R < ELI_AUDIO_RATE ? R : ELI_AUDIO_RATE);
            if (f >= 0.5 * R || (f > 0.9 * fn && f < 8000.0)) continue; /* not representable, or in the transition band */
            for (int64_t i = 0; i < n; i++) x[i] = (float)(0.5 * sin(2 * M_PI * f * (double)i / R + 0.3));
            float *y;
            int64_t m;
            eli_error err = {0};
            CHECK(eli_resample(x, n, R, ELI_AUDIO_RATE, &y, &m, &err) == 0, "%s", err.msg);
            double se = 0.0;
            int64_t cnt = 0;
            for (int64_t j = 100; j < m - 100; j++, cnt++) {
                const double want = f < 8000.0 ? 0.5 * sin(2 * M_PI * f * (double)j / ELI_AUDIO_RATE + 0.3) : 0.0;
                se += (y[j] - want) * (y[j] - want);
            }
            const double err_rel = sqrt(se / (double)cnt) / (0.5 / sqrt(2.0)); /* against the sine's RMS */
            if (f < 8000.0) worst_pass = err_rel > worst_pass ? err_rel : worst_pass;
            else worst_stop = err_rel > worst_stop ? err_rel : worst_stop;
            free(y);
        }
        free(x);
    }
    printf("resampler: passband error %.2e (%.1f dB), stopband %.2e (%.1f dB)\n", worst_pass, 20 * log10(worst_pass), worst_stop,
           20 * log10(worst_stop + 1e-30));
    CHECK(worst_pass < 1e-4, "passband error %g", worst_pass);
    CHECK(worst_stop < 5.6e-5, "stopband leak %g (> -85 dB)", worst_stop);
    /* equal rates copy; rates outside the range are refused */
    const float one[3] = {1, 2, 3};
    float *y;
    int64_t m;
    eli_error err = {0};
    CHECK(eli_resample(one, 3, 16000, 16000, &y, &m, &err) == 0 && m == 3 && y[2] == 3.0f, "copy");
    free(y);
    CHECK(eli_resample(one, 3, 999, 16000, &y, &m, &err) < 0 && strstr(err.msg, "999"), "%s", err.msg);
    CHECK(eli_resample(one, 0, 8000, 16000, &y, &m, &err) < 0 && strstr(err.msg, "no samples"), "%s", err.msg);
}

/* The streaming resampler: input pushed in uneven pieces, every output read as soon as it is final (and
 * the input behind it dropped), then the rest at the end, equals eli_resample over the whole input bit for
 * bit; a provisional read of the not-yet-final outputs equals eli_resample of the input so far. */
static void test_resample_stream(void) {
    static const int rates[] = {44100, 48000, 22050, 8000, 16000};
    static const int64_t pieces[] = {1, 7, 160, 441, 1000, 3, 4801, 2};
    for (size_t r = 0; r < sizeof rates / sizeof rates[0]; r++) {
        const int R = rates[r];
        const int64_t n = R / 2 + 37;
        float *x = malloc((size_t)n * sizeof *x);
        uint32_t st = 99;
        for (int64_t i = 0; i < n; i++) {
            st = st * 1664525u + 1013904223u;
            x[i] = (float)(0.4 * sin(0.01 * (double)i) + ((double)(st >> 8) / 16777216.0 - 0.5) * 0.2);
        }
        eli_error err = {0};
        float *want = NULL;
        int64_t m = 0, taken = 0, fed = 0, provisional_ok = 1;
        CHECK(eli_resample(x, n, R, ELI_AUDIO_RATE, &want, &m, &err) == 0, "%s", err.msg);
        float *got = malloc((size_t)m * sizeof *got);
        eli_resampler *rs = eli_resampler_new(R, ELI_AUDIO_RATE, &err);
        CHECK(rs != NULL, "%s", err.msg);
        for (size_t k = 0; rs && fed < n; k++) {
            int64_t p = pieces[k % (sizeof pieces / sizeof pieces[0])];
            if (p > n - fed) p = n - fed;
            CHECK(eli_resampler_push(rs, x + fed, p, &err) == 0, "%s", err.msg);
            fed += p;
            const int64_t fin = eli_resampler_n_final(rs), total = eli_resampler_n_total(rs);
            if (k == 5 || k == 9) { /* the not-yet-final outputs, as if the input ended here */
                float *part = NULL, *tail = malloc((size_t)(total - taken + 1) * sizeof *tail);
                int64_t mp = 0;
                CHECK(eli_resample(x, fed, R, ELI_AUDIO_RATE, &part, &mp, &err) == 0 && mp == total, "%s", err.msg);
                CHECK(eli_resampler_read(rs, taken, total, tail, &err) == 0, "%s", err.msg);
                provisional_ok &= !memcmp(tail, part + taken, (size_t)(total - taken) * sizeof *tail);
                free(part), free(tail);
            }
            CHECK(fin <= total && fin >= taken, "%d Hz: final %lld of %lld", R, (long long)fin, (long long)total);
            CHECK(eli_resampler_read(rs, taken, fin, got + taken, &err) == 0, "%s", err.msg);
            taken = fin;
            eli_resampler_discard(rs, taken);
        }
        CHECK(rs && eli_resampler_n_total(rs) == m && eli_resampler_read(rs, taken, m, got + taken, &err) == 0, "%s", err.msg);
        CHECK(!memcmp(got, want, (size_t)m * sizeof *got), "%d Hz: streamed output == eli_resample, bit for bit", R);
        CHECK(provisional_ok, "%d Hz: a provisional read == eli_resample of the input so far", R);
        /* a discarded stretch cannot be read again */
        CHECK(!rs || taken < 200 || eli_resampler_read(rs, 0, 10, got, &err) < 0, "%d Hz: a discarded output refused", R);
        eli_resampler_free(rs);
        free(want), free(got), free(x);
    }
}

/* ---- golden: llama.cpp's PCM, log-mel and embeddings ---- */

static const char *const golden_cases[] = {"aud1_chirp_1p5s_16k_mono", "aud2_tones_noise_3p2s_16k_mono", "aud3_stereo_1p0s_16k",
                                           "aud4_44k1_stereo_1p3s"};
static const int64_t golden_tokens[] = {38, 80, 25, 33}, golden_frames[] = {149, 319, 99, 129};

static void test_golden(void) {
    test_tower tt;
    if (!open_tower(eli_shared_path(GOLDEN_PROJ), 1, &tt)) return;
    CHECK(eli_audio_n_embd(tt.a) == 256 && eli_audio_n_mel(tt.a) == 128, "n_embd %d n_mel %d", eli_audio_n_embd(tt.a),
          eli_audio_n_mel(tt.a));
    eli_mel_frontend fe;
    eli_error err = {0};
    CHECK(eli_mel_init(&fe, 128, &err) == 0, "%s", err.msg);
    for (int c = 0; c < 4; c++) {
        char path[512];
        int64_t n_ref, n_mel_ref, n_emb_ref;
        snprintf(path, sizeof path, "%sref/a__%s.pcm.f32", MM, golden_cases[c]);
        float *pcm_ref = read_f32(eli_shared_path(path), &n_ref);
        snprintf(path, sizeof path, "%sref/a__%s.mel.f32", MM, golden_cases[c]);
        float *mel_ref = read_f32(eli_shared_path(path), &n_mel_ref);
        snprintf(path, sizeof path, "%sref/a__%s.embd.f32", MM, golden_cases[c]);
        float *emb_ref = read_f32(eli_shared_path(path), &n_emb_ref);
        snprintf(path, sizeof path, "%sinputs/%s.wav", MM, golden_cases[c]);
        float *pcm = NULL;
        int64_t n = 0;
        load_mono16k(eli_shared_path(path), &pcm, &n);
        CHECK(pcm_ref && mel_ref && emb_ref && pcm, "%s: reference files", golden_cases[c]);
        if (!pcm_ref || !mel_ref || !emb_ref || !pcm) goto next;
        /* decoding: the same length always, the same samples for 16 kHz input */
        CHECK(n == n_ref, "%s: %lld samples, llama.cpp %lld", golden_cases[c], (long long)n, (long long)n_ref);
        if (c < 3) CHECK(n == n_ref && !memcmp(pcm, pcm_ref, (size_t)n * 4), "%s: PCM differs", golden_cases[c]);
        /* the front end from llama.cpp's PCM */
        const int64_t T = eli_mel_frames(n_ref);
        CHECK(T == golden_frames[c] && T * 128 == n_mel_ref, "%s: %lld frames", golden_cases[c], (long long)T);
        if (T * 128 == n_mel_ref) {
            float *mel = malloc((size_t)n_mel_ref * sizeof *mel);
            eli_mel_chunk(&fe, pcm_ref, n_ref, mel);
            double mx, r = rel_rms(mel, mel_ref, n_mel_ref, &mx);
            CHECK(r <= 1e-4 && mx <= 5e-3, "%s: log-mel rel RMS %g, max %g", golden_cases[c], r, mx);
            /* and bit for bit: audio_mel.c follows llama.cpp's float steps (Q8_0 towers need it) */
            CHECK(!memcmp(mel, mel_ref, (size_t)n_mel_ref * sizeof *mel), "%s: log-mel not bit-identical (max %g)", golden_cases[c], mx);
            free(mel);
        }
        /* the encoder from llama.cpp's PCM */
        float *emb;
        int64_t n_tok, n_frames;
        CHECK(eli_audio_embed(tt.t, pcm_ref, n_ref, &emb, &n_tok, &n_frames, &err) == 0, "%s", err.msg);
        CHECK(n_tok == golden_tokens[c] && n_tok * 256 == n_emb_ref && n_frames == golden_frames[c], "%s: %lld tokens, %lld frames",
              golden_cases[c], (long long)n_tok, (long long)n_frames);
        if (n_tok * 256 == n_emb_ref) {
            double mx, r = rel_rms(emb, emb_ref, n_emb_ref, &mx);
            printf("%s: embeddings rel RMS %.2e, max |diff| %.2e\n", golden_cases[c], r, mx);
            CHECK(r <= 2e-3 && mx <= 2e-2, "%s: embeddings rel RMS %g, max %g", golden_cases[c], r, mx);
        }
        free(emb);
        if (c == 3) {
            /* from our resampler's PCM: the same token count; the values differ by the resampler (ours keeps
             * 0-7.2 kHz flat and stops aliasing, miniaudio's linear one droops and lets 8-12 kHz fold back) */
            CHECK(eli_audio_embed(tt.t, pcm, n, &emb, &n_tok, &n_frames, &err) == 0, "%s", err.msg);
            CHECK(n_tok == golden_tokens[c] && n_frames == golden_frames[c], "resampled: %lld tokens", (long long)n_tok);
            if (n_tok * 256 == n_emb_ref) {
                double mx, r = rel_rms(emb, emb_ref, n_emb_ref, &mx);
                printf("%s from our resampler: embeddings rel RMS %.2e, max |diff| %.2e\n", golden_cases[c], r, mx);
            }
            free(emb);
        }
    next:
        free(pcm_ref), free(mel_ref), free(emb_ref), free(pcm);
    }
    eli_mel_free(&fe);
    test_tower_close(&tt);
}

/* ---- random-weight projectors against llama.cpp ---- */

static void test_variants(void) {
    static const struct {
        const char *proj, *wav, *ref;
    } cases[] = {
#include "data/mm/variants.inc"
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        test_tower tt;
        const int e = open_tower(cases[i].proj, 1, &tt);
        float *pcm = NULL, *emb = NULL, *emb3 = NULL;
        int64_t n = 0, n_ref = 0, n_tok = 0, n_tok3 = 0;
        float *ref = read_f32(cases[i].ref, &n_ref);
        CHECK(ref != NULL, "%s", cases[i].ref);
        eli_error err = {0};
        if (e && ref && !load_mono16k(eli_shared_path(cases[i].wav), &pcm, &n)) {
            CHECK(eli_audio_embed(tt.t, pcm, n, &emb, &n_tok, NULL, &err) == 0, "%s", err.msg);
            const int64_t ne = n_tok * eli_audio_n_embd(tt.a);
            CHECK(ne == n_ref, "%s: %lld tokens x %d, reference %lld values", cases[i].proj, (long long)n_tok,
                  eli_audio_n_embd(tt.a), (long long)n_ref);
            if (emb && ne == n_ref) {
                double mx, r = rel_rms(emb, ref, n_ref, &mx);
                printf("%s: %lld tokens, embeddings rel RMS %.2e, max |diff| %.2e\n", strrchr(cases[i].proj, '/') + 1,
                       (long long)n_tok, r, mx);
                CHECK(r <= 2e-3 && mx <= 2e-2, "%s: rel RMS %g, max %g", cases[i].proj, r, mx);
            }
            /* the thread count changes nothing */
            CHECK(test_tower_prepare(&tt, 3, &err) == 0 && eli_audio_embed(tt.t, pcm, n, &emb3, &n_tok3, NULL, &err) == 0 &&
                      n_tok3 == n_tok && !memcmp(emb, emb3, (size_t)(n_tok * eli_audio_n_embd(tt.a)) * sizeof *emb),
                  "%s: 3 threads differ", cases[i].proj);
        }
        free(pcm), free(emb), free(emb3), free(ref);
        test_tower_close(&tt);
    }
}

/* Audio longer than 30 s: chunks encoded one by one (llama.cpp's n_tokens; its embeddings around the chunk
 * boundary, kept in the reference as rows [LONG_ROW0, n_tokens)). */
#define LONG_FRAMES 496000 /* 31 s */
#define LONG_ROW0 744

static void test_long(void) {
    test_tower tt;
    const int e = open_tower(DATA "a-long.gguf", 1, &tt);
    int64_t n_ref;
    float *ref = read_f32(DATA "a-long.saw31s.rows744.embd.f32", &n_ref);
    CHECK(ref != NULL, "reference");
    float *pcm = malloc(LONG_FRAMES * sizeof *pcm);
    uint32_t x = 1;
    for (int64_t i = 0; i < LONG_FRAMES; i++) pcm[i] = (float)saw_noise_sample(i, 0, &x) / 32768.0f;
    float *emb = NULL;
    int64_t n_tok = 0, n_frames = 0;
    eli_error err = {0};
    if (e && ref) {
        CHECK(eli_audio_embed(tt.t, pcm, LONG_FRAMES, &emb, &n_tok, &n_frames, &err) == 0, "%s", err.msg);
        const int64_t E = eli_audio_n_embd(tt.a);
        CHECK(n_tok == 775 && n_frames == 2999 + 99, "%lld tokens, %lld frames", (long long)n_tok, (long long)n_frames);
        if (n_tok == 775 && n_ref == (775 - LONG_ROW0) * E) {
            double mx, r = rel_rms(emb + LONG_ROW0 * E, ref, n_ref, &mx);
            printf("31 s in two chunks: embeddings rel RMS %.2e, max |diff| %.2e\n", r, mx);
            CHECK(r <= 2e-3 && mx <= 2e-2, "long: rel RMS %g, max %g", r, mx);
        }
        /* a final chunk of one sample has no frame and adds nothing */
        float *emb1;
        int64_t n1;
        CHECK(eli_audio_embed(tt.t, pcm, ELI_MEL_CHUNK_SAMPLES + 1, &emb1, &n1, NULL, &err) == 0 && n1 == 750, "%lld", (long long)n1);
        if (n1 == 750) CHECK(!memcmp(emb1, emb, 750 * (size_t)E * sizeof *emb), "first chunk differs");
        free(emb1);
        CHECK(eli_audio_embed(tt.t, pcm, 1, &emb1, &n1, NULL, &err) < 0 && strstr(err.msg, "too short"), "%s", err.msg);
        free(emb1);
        pcm[1234] = NAN;
        CHECK(eli_audio_embed(tt.t, pcm, 2000, &emb1, &n1, NULL, &err) < 0 && strstr(err.msg, "sample 1234 is not a finite"), "%s",
              err.msg);
        free(emb1);
        pcm[1234] = -2e4f;
        CHECK(eli_audio_embed(tt.t, pcm, 2000, &emb1, &n1, NULL, &err) < 0 && strstr(err.msg, "sample 1234 (-20000) is beyond"), "%s",
              err.msg);
        free(emb1);
    }
    free(emb), free(pcm), free(ref);
    test_tower_close(&tt);
}

/* Frame counts at the edges of C's truncating division (llama.cpp's formula). */
static void test_frames(void) {
    static const int64_t n[] = {1, 2, 160, 161, 320, 321, 480, 481, 24000, 480000};
    static const int64_t want[] = {0, 1, 1, 1, 1, 2, 2, 3, 149, 2999};
    for (size_t i = 0; i < sizeof n / sizeof n[0]; i++)
        CHECK(eli_mel_frames(n[i]) == want[i], "%lld samples: %lld frames", (long long)n[i], (long long)eli_mel_frames(n[i]));
    static const int64_t frames[] = {1, 2, 3, 4, 5, 149, 2999};
    static const int64_t toks[] = {1, 1, 1, 1, 2, 38, 750};
    for (size_t i = 0; i < sizeof frames / sizeof frames[0]; i++)
        CHECK(eli_audio_chunk_tokens(frames[i]) == toks[i], "%lld frames", (long long)frames[i]);
    eli_mel_frontend fe;
    eli_error err = {0};
    CHECK(eli_mel_init(&fe, 0, &err) < 0 && strstr(err.msg, "mel bins"), "%s", err.msg);
}

/* ---- hostile projectors ---- */

static void p_type(edit *e) { set_str(e, "clip.audio.projector_type", "whisper"); }
static void p_no_audio(edit *e) { /* a vision-only projector */
    gw_u8(set_key(e, "clip.has_audio_encoder", GGUF_VT_BOOL), 0);
    gw_u8(set_key(e, "clip.has_vision_encoder", GGUF_VT_BOOL), 1);
    set_str(e, "clip.vision.projector_type", "gemma4v");
}
static void p_mel0(edit *e) { set_u32(e, "clip.audio.num_mel_bins", 0); }
static void p_no_mel(edit *e) { drop_key(e, "clip.audio.num_mel_bins"); }
static void p_heads(edit *e) { set_u32(e, "clip.audio.attention.head_count", 5); }
static void p_head_dim(edit *e) { set_u32(e, "clip.audio.attention.head_dim", 16); }
static void p_proj_dim(edit *e) { set_u32(e, "clip.audio.projection_dim", 96); }
static void p_conv_shape(edit *e) { reshape(e, "a.conv1d.0.weight", 4, 3, 5, 1); }
static void p_conv_gone(edit *e) { drop_tensor(e, "a.conv1d.1.weight"); }
static void p_conv_bias(edit *e) { reshape(e, "a.conv1d.0.bias", 1, 8, 1, 1); }
static void p_inproj(edit *e) { reshape(e, "a.input_projection.weight", 2, 480, 64, 1); }
static void p_ffn(edit *e) { reshape(e, "a.blk.1.ffn_up_1.weight", 2, 64, 127, 1); }
static void p_q_gone(edit *e) { drop_tensor(e, "a.blk.0.attn_q.weight"); }
static void p_norm_gone(edit *e) { drop_tensor(e, "a.blk.1.conv_norm.weight"); }
static void p_pw1_odd(edit *e) { reshape(e, "a.blk.0.conv_pw1.weight", 2, 64, 127, 1); }
static void p_dw(edit *e) { reshape(e, "a.blk.1.conv_dw.weight", 2, 3, 64, 1); }
static void p_dw_big(edit *e) { reshape(e, "a.blk.0.conv_dw.weight", 2, 500, 64, 1); }
static void p_scale(edit *e) { reshape(e, "a.blk.0.per_dim_scale.weight", 1, 31, 1, 1); }
static void p_nan(edit *e) { fill(e, "a.blk.1.ln2.weight", NAN); }
static void p_type_i32(edit *e) { retype(e, "a.blk.0.attn_k_rel.weight", ELI_TYPE_I32); }
static void p_clamp(edit *e) { fill(e, "a.blk.0.attn_out.input_max", NAN); }
static void p_mm(edit *e) { reshape(e, "mm.a.input_projection.weight", 2, 96, 128, 1); }
static void p_soft(edit *e) { reshape(e, "mm.a.soft_emb_norm.weight", 1, 63, 1, 1); }
static void p_blocks(edit *e) { set_u32(e, "clip.audio.block_count", 3); }

static void test_hostile_projectors(void) {
    static const struct {
        void (*fn)(edit *e);
        const char *want;
    } cases[] = {
        {p_type, "audio projector type 'whisper'"},
        {p_no_audio, "no audio encoder"},
        {p_mel0, "clip.audio.num_mel_bins"},
        {p_no_mel, "missing required key 'clip.audio.num_mel_bins'"},
        {p_heads, "head_count 5"},
        {p_head_dim, "heads of 16"},
        {p_proj_dim, "mm.a.input_projection.weight' has shape"},
        {p_conv_shape, "a.conv1d.0.weight' has shape"},
        {p_conv_gone, "missing tensor 'a.conv1d.1.weight'"},
        {p_conv_bias, "a.conv1d.0.bias' has shape"},
        {p_inproj, "a.input_projection.weight' has shape"},
        {p_ffn, "a.blk.1.ffn_up_1.weight' has shape"},
        {p_q_gone, "missing tensor 'a.blk.0.attn_q.weight'"},
        {p_norm_gone, "missing tensor 'a.blk.1.conv_norm.weight'"},
        {p_pw1_odd, "not an even GLU width"},
        {p_dw, "kernel size 3"},
        {p_dw_big, "kernel size 500"},
        {p_scale, "per_dim_scale.weight' has shape"},
        {p_nan, "a.blk.1.ln2.weight' element 0 is not finite"},
        {p_type_i32, "does not support"},
        {p_clamp, "attn_out.input_max' is NaN"},
        {p_mm, "mm.a.input_projection.weight' has shape"},
        {p_soft, "mm.a.soft_emb_norm.weight' has shape"},
        {p_blocks, "missing tensor 'a.blk.2."},
    };
    /* edits of a small projector of ours (Q8_0, biases, clamps, soft_emb_norm; checked against llama.cpp in
     * test_variants): a rewrite of the golden one, with its vision tower, costs 20 times the bytes */
    eli_error err = {0};
    eli_gguf_file *src = eli_gguf_open(DATA "a-q8.gguf", &err);
    CHECK(src != NULL, "%s", err.msg);
    if (!src) return;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint8_t *buf;
        eli_mmproj *p = mmproj_edited(src, cases[i].fn, &buf, &err);
        eli_audio *e = p ? eli_audio_load(p, &err) : NULL;
        CHECK(!e && strstr(err.msg, cases[i].want), "case %zu: '%s', expected '%s'", i, err.msg, cases[i].want);
        eli_audio_free(e);
        eli_mmproj_free(p);
        free(buf);
    }
    eli_gguf_close(src);
}

/* eliza-infer embed-audio: the printed counts and the file it writes. */
static void test_cli(void) {
    char out[256], cmd[2048], line[256];
    snprintf(out, sizeof out, "/tmp/eli_test_audio_%ld.f32", (long)getpid());
    snprintf(cmd, sizeof cmd, "%s embed-audio --mmproj %s --audio %s -t 2 -o %s 2>&1", ELI_CLI, eli_shared_path(GOLDEN_PROJ),
             eli_shared_path(MM "inputs/aud1_chirp_1p5s_16k_mono.wav"), out);
    FILE *pp = popen(cmd, "r");
    long long n_tok = -1, n_frames = -1;
    while (pp && fgets(line, sizeof line, pp)) {
        sscanf(line, "n_tokens %lld", &n_tok);
        sscanf(line, "n_mel_frames %lld", &n_frames);
    }
    CHECK(pp && pclose(pp) == 0 && n_tok == 38 && n_frames == 149, "embed-audio: %lld tokens, %lld frames", n_tok, n_frames);
    int64_t n, n_ref;
    float *emb = read_f32(out, &n), *ref = read_f32(eli_shared_path(MM "ref/a__aud1_chirp_1p5s_16k_mono.embd.f32"), &n_ref);
    CHECK(emb && ref && n == n_ref && rel_rms(emb, ref, n, NULL) <= 2e-3, "embed-audio output");
    free(emb), free(ref);
    remove(out);
    snprintf(cmd, sizeof cmd, "%s embed-audio --mmproj %s --audio /nonexistent.wav -o %s 2>&1", ELI_CLI, eli_shared_path(GOLDEN_PROJ),
             out);
    pp = popen(cmd, "r");
    int said = 0;
    while (pp && fgets(line, sizeof line, pp)) said |= strstr(line, "/nonexistent.wav") != NULL;
    CHECK(pp && pclose(pp) != 0 && said, "embed-audio on a missing file");
}

int main(void) {
    test_wav_formats();
    test_wav_hostile();
    test_resample_length();
    test_resample_quality();
    test_resample_stream();
    test_frames();
    test_golden();
    test_hostile_projectors();
    test_variants();
    test_long();
    test_cli();
    TEST_MAIN_END();
}
