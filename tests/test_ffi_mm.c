/* Image input through the C ABI on a bundle made here: text/ and mtp/ of eliza-1-nano (n_embd 256) and the
 * golden projector (both towers, projection_dim 256, random weights) as vision/mmproj-test.gguf. The text
 * is nonsense; the mechanics are real:
 * - the probes and the regions (acquire, evict, what a bundle without a projector answers);
 * - describe_image is deterministic, its primed stream gives the same text, a short buffer gets a prefix;
 * - prefill_image on a stream equals the manual path (the markers tokenised, the tower's rows through
 *   eli_gen_prefill_embd, bidirectional) token for token; reset_keep back to before the image and the same
 *   image again gives the same continuation; a slot file with the image in its prefix restores exactly;
 *   MTP on with the image in the prefix gives the greedy tokens;
 * - a projector named by path is kept per context and replaced when another is named, also by two threads
 *   at once (their answers equal the serial ones);
 * - hostile input: bad image bytes, sizes, projector files (text, missing, without a vision tower, of
 *   another width), closed streams, a destroyed context, bad PCM for prefill_audio. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "eliza_inference.h"
#include "engine.h"
#include "gguf_edit.h"
#include "image.h"
#include "test.h"
#include "test_ffi_config.h"
#include "test_ffi_media.h"
#include "test_exec.h"

#define NANO ELI_SOURCE_DIR "/models/eliza-1-nano"
#define PROJ "golden/mm/mmproj-gemma4-a.gguf"
#define IMG1 "golden/mm/inputs/img1_gradient_200x150.png"
#define IMG2 "golden/mm/inputs/img2_checker_512x512.png"
#define N_GEN 24
#define CTX 512
#define NEVER_A_FILE "/nonexistent/mmproj-none.gguf"

static unsigned char *img1, *img2;
static size_t n_img1, n_img2;

static eliza_llm_stream_config_t cfg_greedy(int draft) {
    eliza_llm_stream_config_t c;
    memset(&c, 0, sizeof c);
    c.max_tokens = N_GEN;
    c.slot_id = -1;
    c.n_gpu_layers = -1;
    c.context_size = CTX;
    c.draft_min = draft ? 1 : 0;
    c.draft_max = draft ? 3 : 0;
    return c;
}

/* next() until k tokens came (or the stream ended); returns how many. */
static int drain_some(EliLlmStream *s, int32_t *out, int k) {
    int n = 0;
    for (int rc = 0; rc == 0 && n < k;) {
        size_t got = 0;
        rc = eliza_inference_llm_stream_next(s, out + n, (size_t)(k - n), &got, NULL, 0, NULL, NULL, NULL);
        if (rc < 0) return -1;
        n += (int)got;
    }
    return n;
}

static int32_t *ids_of(EliInferenceContext *c, const char *text, int bos, int special, size_t *n) {
    int32_t *ids = NULL;
    char *err = NULL;
    CHECK(!eliza_inference_tokenize(c, text, strlen(text), bos, special, &ids, n, &err), "tokenize: %s", err ? err : "");
    eliza_inference_free_string(err);
    return ids;
}


static void test_regions(EliInferenceContext *c, EliInferenceContext *bare) {
    CHECK(eliza_inference_vision_supported() == eli_vision_available(), "vision probe");
    CHECK(eliza_inference_vision_stream_supported() == eli_vision_available(), "vision stream probe");
    CHECK(eliza_inference_asr_stream_supported() == 1, "asr probe");
    char *err = NULL;
    for (int pass = 0; pass < 2; pass++) { /* acquire, evict, acquire again */
        CHECK(eliza_inference_mmap_acquire(c, "vision", &err) == ELIZA_OK, "acquire vision: %s", err ? err : "");
        CHECK(eliza_inference_mmap_acquire(c, "asr", &err) == ELIZA_OK, "acquire asr: %s", err ? err : "");
        if (pass) break;
        CHECK(eliza_inference_mmap_evict(c, "vision", &err) == ELIZA_OK && eliza_inference_mmap_evict(c, "asr", &err) == ELIZA_OK,
              "evict: %s", err ? err : "");
    }
    int rc = eliza_inference_mmap_acquire(bare, "vision", &err);
    CHECK(SAYS(rc, ELIZA_ERR_NOT_IMPLEMENTED, err, "region 'vision'", "vision/mmproj"), "a bundle without a projector");
    rc = eliza_inference_mmap_acquire(bare, "asr", &err);
    CHECK(SAYS(rc, ELIZA_ERR_NOT_IMPLEMENTED, err, "region 'asr'", "vision/mmproj"), "a bundle without a projector");
    char out[64];
    rc = eliza_inference_describe_image(bare, img1, n_img1, NULL, NULL, out, sizeof out, &err);
    CHECK(SAYS(rc, ELIZA_ERR_NOT_IMPLEMENTED, err, "image", "vision/mmproj"), "describe_image without a projector");
    const float pcm[1600] = {0};
    rc = eliza_inference_asr_transcribe(bare, pcm, 1600, 16000, out, sizeof out, &err);
    CHECK(SAYS(rc, ELIZA_ERR_NOT_IMPLEMENTED, err, "speech recognition", "vision/mmproj"), "transcribe without a projector");
}

static void test_describe(EliInferenceContext *c) {
    char a[96], b[96], *err = NULL;
    const int na = eliza_inference_describe_image(c, img1, n_img1, NULL, NULL, a, sizeof a, &err);
    CHECK(na > 0 && (size_t)na == strlen(a), "describe_image: %d %s", na, err ? err : "");
    eliza_inference_free_string(err), err = NULL;
    const int nb = eliza_inference_describe_image(c, img1, n_img1, NULL, NULL, b, sizeof b, &err);
    CHECK(nb == na && !strcmp(a, b), "deterministic: '%s' / '%s'", a, b);
    printf("describe_image(img1): '%s'\n", a);
    /* the primed stream: the same prompt, so the same text */
    EliLlmStream *s = eliza_inference_describe_image_stream_open(c, img1, n_img1, NULL, NULL, &err);
    CHECK(s != NULL, "stream_open: %s", err ? err : "");
    eliza_inference_free_string(err), err = NULL;
    int32_t toks[600];
    static char text[8192];
    CHECK(s && generate(s, toks, 600, text, sizeof text) > 0 && !strncmp(text, a, (size_t)na), "the primed stream: '%.95s'", text);
    eliza_inference_llm_stream_close(s);
    /* a 6-byte buffer: a prefix of at most 5 bytes, never cut inside a character */
    const int n6 = eliza_inference_describe_image(c, img1, n_img1, NULL, NULL, b, 6, &err);
    CHECK(n6 >= 0 && n6 <= 5 && !strncmp(a, b, (size_t)n6) && (n6 == 5 || (a[n6] & 0xC0) == 0x80 || a[n6] == 0), "short buffer: %d", n6);
    eliza_inference_free_string(err), err = NULL;
    /* another image, another prompt: another answer */
    const int n2 = eliza_inference_describe_image(c, img2, n_img2, NULL, "What pattern is this?", b, sizeof b, &err);
    CHECK(n2 >= 0 && strcmp(a, b), "img2: '%s'", b);
    eliza_inference_free_string(err);
}

/* The same prompt as prefill_image builds, by hand: A, "<|image>", the tower's rows (bidirectional),
 * "<image|>", B on a session like the stream's. */
static int manual_tokens(EliInferenceContext *c, const test_model *tm, const test_tower *tw, const int32_t *a, size_t na,
                         const int32_t *b, size_t nb, int32_t *out) {
    size_t n_open, n_close;
    int32_t *open = ids_of(c, "<|image>", 0, 1, &n_open), *close = ids_of(c, "<image|>", 0, 1, &n_close);
    eli_image img;
    eli_vision_embd e = {0};
    eli_error err = {0};
    eli_gen_params p = eli_gen_default_params();
    p.seq.n_ctx = CTX;
    p.seq.kv_type_k = p.seq.kv_type_v = ELI_TYPE_F16;
    p.sampling.temperature = 0;
    p.max_tokens = N_GEN;
    eli_gen *g = eli_gen_create(tm->xm->exec, tm->xm, tm->tok, &p, &err);
    int n = -1;
    if (g && !eli_image_decode(img1, n_img1, &img, &err)) {
        if (!eli_vision_encode(tw->t, &img, &e, &err) && !eli_gen_prefill(g, a, na, NULL, &err) &&
            !eli_gen_prefill(g, open, n_open, NULL, &err) && !eli_gen_prefill_embd(g, e.embd, e.n_tokens, 1, NULL, &err) &&
            !eli_gen_prefill(g, close, n_close, NULL, &err) && !eli_gen_prefill(g, b, nb, NULL, &err)) {
            n = 0;
            for (int r = 0; r == 0 && n < N_GEN;) {
                size_t k;
                r = eli_gen_next(g, out + n, 1, &k, NULL, 0, NULL, NULL, NULL, &err);
                n += (int)k;
            }
        }
        eli_image_free(&img);
    }
    CHECK(n > 0, "manual path: %s", err.msg);
    eli_vision_embd_free(&e);
    eli_gen_free(g);
    eliza_inference_free_tokens(open);
    eliza_inference_free_tokens(close);
    return n;
}

static EliLlmStream *image_stream(EliInferenceContext *c, int draft, const int32_t *a, size_t na, const int32_t *b, size_t nb) {
    char *err = NULL;
    const eliza_llm_stream_config_t cfg = cfg_greedy(draft);
    EliLlmStream *s = eliza_inference_llm_stream_open(c, &cfg, &err);
    CHECK(s && !eliza_inference_llm_stream_prefill(s, a, na, &err) &&
              !eliza_inference_llm_stream_prefill_image(s, img1, n_img1, NULL, &err) &&
              !eliza_inference_llm_stream_prefill(s, b, nb, &err),
          "stream with an image: %s", err ? err : "");
    eliza_inference_free_string(err);
    return s;
}

static void test_prefill_image(EliInferenceContext *c, const test_model *tm, const test_tower *tw) {
    size_t na, nb;
    int32_t *a = ids_of(c, "Look: ", 1, 0, &na), *b = ids_of(c, " What is it? It is", 0, 0, &nb);
    int32_t want[N_GEN], got[N_GEN];
    const int n_want = manual_tokens(c, tm, tw, a, na, b, nb, want);
    EliLlmStream *s = image_stream(c, 0, a, na, b, nb);
    int n = s ? generate(s, got, N_GEN, NULL, 0) : -1;
    CHECK(n == n_want && n == N_GEN && !memcmp(got, want, sizeof got), "prefill_image == the manual path (%d / %d tokens)", n, n_want);
    /* back to before the image, the same image again */
    char *err = NULL;
    CHECK(s && eliza_inference_llm_stream_reset_keep(s, (int32_t)na) == (int)na, "reset_keep before the image");
    CHECK(s && !eliza_inference_llm_stream_prefill_image(s, img1, n_img1, NULL, &err) &&
              !eliza_inference_llm_stream_prefill(s, b, nb, &err),
          "again: %s", err ? err : "");
    eliza_inference_free_string(err), err = NULL;
    n = s ? generate(s, got, N_GEN, NULL, 0) : -1;
    CHECK(n == N_GEN && !memcmp(got, want, sizeof got), "reset_keep before the image, the same image again: the same tokens");
    /* a reset_keep inside the image's rows keeps none of them */
    CHECK(s && eliza_inference_llm_stream_reset_keep(s, (int32_t)na + 20) < (int)na + 20, "reset_keep inside the image");
    eliza_inference_llm_stream_close(s);

    /* a slot file with the image in its prefix */
    char path[] = "/tmp/eli_test_ffi_mm_XXXXXX";
    const int fd = mkstemp(path);
    if (fd >= 0) close(fd);
    s = image_stream(c, 0, a, na, b, nb);
    int32_t first[6];
    CHECK(s && drain_some(s, first, 6) == 6 && !eliza_inference_llm_stream_save_slot(s, path, &err), "save: %s", err ? err : "");
    eliza_inference_free_string(err), err = NULL;
    eliza_inference_llm_stream_close(s);
    const eliza_llm_stream_config_t cfg = cfg_greedy(0);
    s = eliza_inference_llm_stream_open(c, &cfg, &err);
    CHECK(s && !eliza_inference_llm_stream_prefill(s, b, nb, &err) && !eliza_inference_llm_stream_restore_slot(s, path, &err),
          "restore: %s", err ? err : "");
    eliza_inference_free_string(err), err = NULL;
    n = s ? generate(s, got, N_GEN - 6, NULL, 0) : -1;
    CHECK(n == N_GEN - 6 && !memcmp(first, want, sizeof first) && !memcmp(got, want + 6, (size_t)n * sizeof *got),
          "the restored stream continues with the original's tokens");
    eliza_inference_llm_stream_close(s);
    unlink(path);

    /* MTP with the image in the prefix: the greedy tokens */
    s = image_stream(c, 1, a, na, b, nb);
    n = s ? generate(s, got, N_GEN, NULL, 0) : -1;
    CHECK(n == N_GEN && !memcmp(got, want, sizeof got), "MTP with an image in the prefix == greedy");
    eliza_inference_llm_stream_close(s);
    eliza_inference_free_tokens(a);
    eliza_inference_free_tokens(b);
}

/* ---- projectors named by path ---- */

typedef struct {
    EliInferenceContext *c;
    const char *proj;
    char text[3][48];
    int rc[3];
} describer;

static void *describe_thrice(void *p) {
    describer *d = p;
    for (int i = 0; i < 3; i++) d->rc[i] = eliza_inference_describe_image(d->c, img1, n_img1, d->proj, NULL, d->text[i], 48, NULL);
    return NULL;
}

static void test_named_projectors(EliInferenceContext *c) {
    char golden[48], other[48], *err = NULL;
    const char *pb = ELI_SOURCE_DIR "/tests/data/mm/mmproj-b-f16.gguf";
    /* the bundle's projector named by its own path is the bundle's */
    int rc = eliza_inference_describe_image(c, img1, n_img1, eli_shared_path(PROJ), NULL, golden, sizeof golden, &err);
    CHECK(rc >= 0, "golden by path: %s", err ? err : "");
    eliza_inference_free_string(err), err = NULL;
    rc = eliza_inference_describe_image(c, img1, n_img1, pb, NULL, other, sizeof other, &err);
    CHECK(rc >= 0 && strcmp(golden, other), "another projector, another answer: %s", err ? err : other);
    eliza_inference_free_string(err), err = NULL;
    /* two threads naming different projectors at once: each gets what it gets alone */
    describer d[2] = {{c, eli_shared_path(PROJ), {{0}}, {0}}, {c, pb, {{0}}, {0}}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, describe_thrice, &d[i]);
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < 3; i++)
        CHECK(d[0].rc[i] >= 0 && d[1].rc[i] >= 0 && !strcmp(d[0].text[i], golden) && !strcmp(d[1].text[i], other),
              "concurrent round %d: '%s' / '%s'", i, d[0].text[i], d[1].text[i]);
}

/* ---- hostile input ---- */

static void edit_width(edit *e) {
    set_u32(e, "clip.vision.projection_dim", 128);
    reshape(e, "mm.input_projection.weight", 2, 96, 128, 1);
}

/* The golden projector with 128-wide image embeddings, written to path. */
static int write_narrow_projector(const char *path) {
    eli_error err = {0};
    eli_gguf_file *g = eli_gguf_open(eli_shared_path(PROJ), &err);
    if (!g) return -1;
    size_t size;
    uint8_t *buf = rewrite_with(g, edit_width, &size);
    FILE *f = fopen(path, "wb");
    const int rc = f && fwrite(buf, 1, size, f) == size ? 0 : -1;
    if (f) fclose(f);
    free(buf);
    eli_gguf_close(g);
    return rc;
}

static void test_hostile(EliInferenceContext *c) {
    char out[64], *err = NULL;
    static const unsigned char junk[] = "this is no image at all, just text";
    int rc = eliza_inference_describe_image(c, junk, sizeof junk, NULL, NULL, out, sizeof out, &err);
    CHECK(SAYS(rc, ELIZA_ERR_INVALID_ARG, err, "describe_image"), "junk bytes");
    rc = eliza_inference_describe_image(c, img1, n_img1 / 2, NULL, NULL, out, sizeof out, &err);
    CHECK(SAYS(rc, ELIZA_ERR_INVALID_ARG, err, "describe_image"), "a truncated PNG");
    rc = eliza_inference_describe_image(c, NULL, 10, NULL, NULL, out, sizeof out, &err);
    CHECK(SAYS(rc, ELIZA_ERR_INVALID_ARG, err, "NULL"), "NULL bytes");
    rc = eliza_inference_describe_image(c, img1, 0, NULL, NULL, out, sizeof out, &err);
    CHECK(SAYS(rc, ELIZA_ERR_INVALID_ARG, err, "n_bytes is 0"), "no bytes");
    rc = eliza_inference_describe_image(c, img1, (size_t)-1, NULL, NULL, out, sizeof out, &err);
    CHECK(SAYS(rc, ELIZA_ERR_INVALID_ARG, err, "at most"), "a size no image has, refused before reading");
    rc = eliza_inference_describe_image(c, img1, n_img1, NULL, NULL, NULL, 64, &err);
    CHECK(SAYS(rc, ELIZA_ERR_INVALID_ARG, err, "out_text"), "NULL out_text");
    rc = eliza_inference_describe_image(c, img1, n_img1, NEVER_A_FILE, NULL, out, sizeof out, &err);
    CHECK(SAYS(rc, ELIZA_ERR_INVALID_ARG, err, NEVER_A_FILE), "a missing projector");
    rc = eliza_inference_describe_image(c, img1, n_img1, NANO "/README.md", NULL, out, sizeof out, &err);
    CHECK(SAYS(rc, ELIZA_ERR_INVALID_ARG, err, "README.md"), "a text file as projector");
    rc = eliza_inference_describe_image(c, img1, n_img1, ELI_SOURCE_DIR "/tests/data/mm/a-f16.gguf", NULL, out, sizeof out, &err);
    CHECK(SAYS(rc, ELIZA_ERR_NOT_IMPLEMENTED, err, "no vision tower", "a-f16.gguf"), "a projector without a vision tower");
    char narrow[] = "/tmp/eli_narrow_XXXXXX";
    const int fd = mkstemp(narrow);
    if (fd >= 0) close(fd);
    CHECK(!write_narrow_projector(narrow), "narrow projector written");
    rc = eliza_inference_describe_image(c, img1, n_img1, narrow, NULL, out, sizeof out, &err);
    CHECK(SAYS(rc, ELIZA_ERR_INVALID_ARG, err, "128", "256", "another model"), "a projector of another width");
    unlink(narrow);
    EliLlmStream *s = eliza_inference_describe_image_stream_open(c, junk, sizeof junk, NULL, NULL, &err);
    CHECK(!s && err && strstr(err, "describe_image_stream_open"), "stream_open on junk: %s", err ? err : "");
    eliza_inference_free_string(err), err = NULL;

    /* streams: prefill_image / prefill_audio arguments, closed streams */
    const eliza_llm_stream_config_t cfg = cfg_greedy(0);
    s = eliza_inference_llm_stream_open(c, &cfg, NULL);
    rc = eliza_inference_llm_stream_prefill_image(s, junk, sizeof junk, NULL, &err);
    CHECK(SAYS(rc, ELIZA_ERR_INVALID_ARG, err, "prefill_image"), "prefill_image of junk");
    float pcm[4000];
    for (int i = 0; i < 4000; i++) pcm[i] = 0.1f * (float)((i * 37) % 17 - 8) / 8.0f;
    pcm[1234] = NAN;
    rc = eliza_inference_llm_stream_prefill_audio(s, pcm, 4000, 16000, &err);
    CHECK(SAYS(rc, ELIZA_ERR_INVALID_ARG, err, "sample 1234", "finite"), "NaN PCM");
    pcm[1234] = 0;
    rc = eliza_inference_llm_stream_prefill_audio(s, pcm, 4000, 0, &err);
    CHECK(SAYS(rc, ELIZA_ERR_INVALID_ARG, err, "sample_rate_hz 0"), "rate 0");
    rc = eliza_inference_llm_stream_prefill_audio(s, pcm, 4000, -16000, &err);
    CHECK(SAYS(rc, ELIZA_ERR_INVALID_ARG, err, "sample_rate_hz -16000"), "a negative rate");
    rc = eliza_inference_llm_stream_prefill_audio(s, pcm, (size_t)-1, 16000, &err);
    CHECK(SAYS(rc, ELIZA_ERR_INVALID_ARG, err, "more audio than fits"), "huge n, refused before reading");
    rc = eliza_inference_llm_stream_prefill_audio(s, NULL, 4000, 16000, &err);
    CHECK(SAYS(rc, ELIZA_ERR_INVALID_ARG, err, "NULL"), "NULL pcm");
    rc = eliza_inference_llm_stream_prefill_audio(s, pcm, 0, 16000, &err);
    CHECK(SAYS(rc, ELIZA_ERR_INVALID_ARG, err, "no audio"), "no samples");
    CHECK(!eliza_inference_llm_stream_prefill_audio(s, pcm, 4000, 8000, &err), "0.5 s at 8 kHz: %s", err ? err : "");
    eliza_inference_free_string(err), err = NULL;
    eliza_inference_llm_stream_close(s);
    rc = eliza_inference_llm_stream_prefill_image(s, img1, n_img1, NULL, &err);
    CHECK(SAYS(rc, ELIZA_ERR_INVALID_ARG, err, "closed stream"), "prefill_image after close");
    rc = eliza_inference_llm_stream_prefill_audio(s, pcm, 4000, 16000, &err);
    CHECK(SAYS(rc, ELIZA_ERR_INVALID_ARG, err, "closed stream"), "prefill_audio after close");
    rc = eliza_inference_llm_stream_prefill_image(NULL, img1, n_img1, NULL, &err);
    CHECK(SAYS(rc, ELIZA_ERR_INVALID_ARG, err, "closed stream"), "prefill_image on NULL");
    rc = eliza_inference_describe_image(NULL, img1, n_img1, NULL, NULL, out, sizeof out, &err);
    CHECK(SAYS(rc, ELIZA_ERR_INVALID_ARG, err, "destroyed context"), "describe_image on NULL");
}

int main(void) {
    img1 = (unsigned char *)test_read_file(eli_shared_path(IMG1), &n_img1);
    img2 = (unsigned char *)test_read_file(eli_shared_path(IMG2), &n_img2);
    test_bundle b;
    CHECK(img1 && img2 && !test_bundle_make(&b, NANO "/text", NANO "/mtp", eli_shared_path(PROJ)), "bundle");
    if (!eli_vision_available()) {
        printf("this build decodes no images: only the probes are checked\n");
        CHECK(eliza_inference_vision_supported() == 0, "vision probe");
        test_bundle_remove(&b);
        TEST_MAIN_END();
    }
    char *err = NULL;
    EliInferenceContext *c = eliza_inference_create(b.dir, &err), *bare = eliza_inference_create(NANO, &err);
    CHECK(c && bare, "create: %s", err ? err : "");
    test_model tm;
    test_tower tw;
    eli_error e = {0};
    CHECK(!test_model_load(NANO "/text/eliza-1-nano.gguf", 1, NULL, &tm, &e), "%s", e.msg);
    CHECK(!test_tower_open(eli_shared_path(PROJ), ELI_MM_VISION, 0, &tw, &e), "%s", e.msg);
    if (c && bare && tm.xm && tw.t) {
        test_regions(c, bare);
        test_describe(c);
        test_prefill_image(c, &tm, &tw);
        test_named_projectors(c);
        test_hostile(c);
    }
    test_tower_close(&tw);
    test_model_free(&tm);
    eliza_inference_destroy(bare);
    /* after destroy: refused, no crash */
    eliza_inference_destroy(c);
    char out[16];
    int rc = eliza_inference_describe_image(c, img1, n_img1, NULL, NULL, out, sizeof out, &err);
    CHECK(SAYS(rc, ELIZA_ERR_INVALID_ARG, err, "destroyed context"), "describe_image after destroy");
    CHECK(!eliza_inference_describe_image_stream_open(c, img1, n_img1, NULL, NULL, NULL), "stream_open after destroy");
    CHECK(eliza_inference_mmap_acquire(c, "vision", NULL) == ELIZA_ERR_INVALID_ARG, "acquire after destroy");
    test_bundle_remove(&b);
    free(img1), free(img2);
    TEST_MAIN_END();
}
