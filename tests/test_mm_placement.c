/* Media in the prompt against llama.cpp: the logits after prompts with images and audio, and 16 greedy
 * tokens, on the golden e2b-mini models and the golden projector (tests/data/mm/placement/README.md says how
 * llama.cpp's outputs were made).
 *
 * Each case rebuilds llama.cpp's prompt through our sequence layer: the text chunks' token ids exactly as
 * llama.cpp's mtmd_tokenize made them (<bos>, the markers spelled out in this small vocabulary), the media's
 * rows from our own towers (the image bidirectional, the audio causal, one position per row), then 16 greedy
 * steps (argmax, lowest id on ties). The bound: our towers differ from llama.cpp's by ~1e-5 relative and the
 * language model by ~1e-6, so the logits may differ by about 1e-3 relative. One case is also run with the
 * image forced causal against llama.cpp's forced-causal run (the mask is what differs), and the ABI's
 * prefill_image (its own marker tokens, the tower of a named projector) must give llama.cpp's greedy ids. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eliza_inference.h"
#include "image.h"
#include "json.h"
#include "resample.h"
#include "test.h"
#include "test_ffi_media.h"
#include "test_exec.h"
#include "wav.h"

#define DATA ELI_SOURCE_DIR "/tests/data/mm/placement/"
#define PROJ "golden/mm/mmproj-gemma4-a.gguf"
#define N_GREEDY 16

static unsigned char *test_img1;
static size_t n_test_img1;

typedef struct {
    const char *name; /* tests/data/mm/placement/<name>.json and .logits.f32 */
    int causal;       /* every media decoded causally (llama.cpp's forced-causal run) */
} placement_case;

static const placement_case cases[] = {
    {"a_img1_f32.mtmd", 0}, {"a_img1_f32.causal", 1}, {"a_img2_f32.mtmd", 0}, {"b_img1_f32.mtmd", 0},
    {"c_aud1_f32.mtmd", 0}, {"d_img1_aud2_f32.mtmd", 0}, {"e_img1_q40.mtmd", 0},
};

static eli_json *load_json(const char *path) {
    size_t n;
    unsigned char *buf = (unsigned char *)test_read_file(path, &n);
    eli_error err = {0};
    eli_json *j = buf ? eli_json_parse((const char *)buf, n, &err) : NULL;
    CHECK(j != NULL, "%s: %s", path, buf ? err.msg : "unreadable");
    free(buf);
    return j;
}

/* An array of numbers as int32 (malloc'ed); *n its length. */
static int32_t *ids_of(const eli_json *arr, size_t *n) {
    *n = arr && arr->type == ELI_JSON_ARRAY ? arr->n : 0;
    int32_t *ids = malloc((*n ? *n : 1) * sizeof *ids);
    for (size_t i = 0; i < *n; i++) ids[i] = (int32_t)arr->items[i].number;
    return ids;
}

static int argmax(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

/* The rows of media file `path` from our tower of that kind (*rows malloc'ed). */
static int64_t media_rows(const char *path, int image, float **rows) {
    test_tower t;
    eli_error err = {0};
    int64_t n = 0;
    *rows = NULL;
    if (test_tower_open(eli_shared_path(PROJ), image ? ELI_MM_VISION : ELI_MM_AUDIO, 0, &t, &err)) {
        CHECK(0, "tower: %s", err.msg);
        return 0;
    }
    if (image) {
        eli_image img;
        eli_vision_embd e;
        if (!eli_image_load(path, &img, &err) && !eli_vision_encode(t.t, &img, &e, &err)) *rows = e.embd, n = e.n_tokens;
        eli_image_free(&img);
    } else {
        eli_pcm pcm;
        float *mono = NULL;
        int64_t m = 0;
        if (!eli_wav_load(path, &pcm, &err)) {
            if (!eli_pcm_to_mono16k(&pcm, &mono, &m, &err)) eli_audio_embed(t.t, mono, m, rows, &n, NULL, &err);
            eli_pcm_free(&pcm);
        }
        free(mono);
    }
    CHECK(*rows != NULL, "%s: %s", path, err.msg);
    test_tower_close(&t);
    return n;
}

/* The relative RMS difference of our logits from llama.cpp's over the golden text-only sequence on the same
 * model (../shared/golden/models/<model>.logits.f32, every position of e2b-mini.tokens.txt): what the text
 * model's own arithmetic (quantized dot products summed in another order) gives without any media. */
static double text_only_rel(const test_model *tm, const char *model_path) {
    char lp[512];
    snprintf(lp, sizeof lp, "%.*s.logits.f32", (int)(strlen(model_path) - 5), model_path);
    size_t nb = 0;
    float *want = (float *)test_read_file(lp, &nb);
    int32_t ids[96];
    const int n = read_ids(eli_shared_path("golden/models/e2b-mini.tokens.txt"), ids, 96), V = tm->m->hp.n_vocab;
    CHECK(want && n == 96 && nb == (size_t)n * V * sizeof(float), "%s", lp);
    eli_seq_params sp = eli_seq_default();
    sp.n_ctx = 2048;
    sp.kv_type_k = sp.kv_type_v = ELI_TYPE_F32;
    eli_error err = {0};
    eli_xseq *s = eli_seq_create(tm->xm->exec, tm->xm, &sp, &err);
    float *got = malloc((size_t)n * V * sizeof *got);
    const eli_outputs out = {got, NULL, 1};
    double se = 0, sw = 0;
    if (want && s && !eli_seq_decode_tokens(s, ids, n, &out, &err))
        for (size_t i = 0; i < (size_t)n * V; i++) se += (got[i] - want[i]) * (double)(got[i] - want[i]), sw += (double)want[i] * want[i];
    eli_seq_free(s);
    free(got), free(want);
    return sw > 0 ? sqrt(se / sw) : 1.0;
}

/* Runs one case; the text model is loaded once per file. */
static void run_case(const placement_case *pc, const char **loaded, test_model *tm) {
    char path[512];
    snprintf(path, sizeof path, DATA "%s.json", pc->name);
    eli_json *j = load_json(path);
    if (!j) return;
    const char *model = eli_json_get_str(j, "model");
    const char *base = model ? strrchr(model, '/') : NULL;
    char model_path[512];
    snprintf(model_path, sizeof model_path, "%s/golden/models/%s", ELI_SHARED_DIR, base ? base + 1 : "?");
    eli_error err = {0};
    if (!*loaded || strcmp(*loaded, model_path)) {
        test_model_free(tm);
        free((void *)*loaded);
        CHECK(!test_model_load(model_path, 1, NULL, tm, &err), "%s: %s", model_path, err.msg);
        *loaded = tm->xm ? strdup(model_path) : NULL;
    }
    if (!tm->xm) return eli_json_free(j);
    const int V = tm->m->hp.n_vocab;
    eli_seq_params sp = eli_seq_default();
    sp.n_ctx = 2048;
    sp.n_ubatch = 512;
    sp.kv_type_k = sp.kv_type_v = ELI_TYPE_F32;
    eli_xseq *s = eli_seq_create(tm->xm->exec, tm->xm, &sp, &err);
    CHECK(s != NULL, "%s", err.msg);
    float *logits = malloc((size_t)V * sizeof *logits);
    const eli_json *chunks = eli_json_get(j, "chunks"), *media = eli_json_get(j, "media");
    int rc = s ? 0 : -1, m_i = 0;
    const eli_outputs out = {logits, NULL, 0};
    for (size_t c = 0; !rc && chunks && c < chunks->n; c++) {
        const eli_json *ch = &chunks->items[c];
        const char *type = eli_json_get_str(ch, "type");
        if (!strcmp(type, "text")) {
            size_t n;
            int32_t *ids = ids_of(eli_json_get(ch, "tokens"), &n);
            rc = eli_seq_decode_tokens(s, ids, (int64_t)n, &out, &err);
            free(ids);
            continue;
        }
        /* a media chunk: our tower's rows, as many as llama.cpp's, at its positions */
        char file[512];
        const char *m = media->items[m_i++].str;
        snprintf(file, sizeof file, "%s/golden/mm/inputs/%s", ELI_SHARED_DIR, strrchr(m, '/') + 1);
        float *rows;
        const int image = !strcmp(type, "image");
        const int64_t n = media_rows(file, image, &rows);
        const double want_n = eli_json_get(ch, "n_tokens")->number, pos = eli_json_get(ch, "pos_start")->number;
        CHECK(n == (int64_t)want_n && eli_seq_n_past(s) == (int64_t)pos, "%s chunk %zu: %lld rows at %lld, llama.cpp %g at %g", pc->name,
              c, (long long)n, (long long)eli_seq_n_past(s), want_n, pos);
        const eli_span whole = {0, n};
        const int bidir = image && !pc->causal;
        const eli_batch b = {n, NULL, rows, bidir ? &whole : NULL, bidir};
        rc = rows ? eli_seq_decode(s, &b, NULL, &err) : -1;
        free(rows);
    }
    CHECK(!rc, "%s: %s", pc->name, err.msg);
    /* the logits after the prompt */
    snprintf(path, sizeof path, DATA "%s.logits.f32", pc->name);
    size_t nb;
    float *want = (float *)test_read_file(path, &nb);
    CHECK(want && nb == (size_t)V * sizeof(float), "%s", path);
    if (!rc && want && nb == (size_t)V * sizeof(float)) {
        double mx = 0, se = 0, sw = 0;
        for (int i = 0; i < V; i++) {
            const double d = fabs((double)logits[i] - want[i]);
            mx = d > mx ? d : mx;
            se += d * d;
            sw += (double)want[i] * want[i];
        }
        const double rel = sqrt(se / sw);
        /* a quantized model differs from llama.cpp without media too (its dot products are summed in
         * another order, README.md): the media must add nothing beyond that */
        const double floor = strstr(model_path, "f32") ? 0.0 : text_only_rel(tm, model_path);
        printf("%-22s logits max |diff| %.3e, rel RMS %.3e (argmax %d, llama.cpp %d)%s", pc->name, mx, rel, argmax(logits, V),
               argmax(want, V), floor > 0 ? "" : "\n");
        if (floor > 0) printf("; text alone on this model: rel RMS %.3e\n", floor);
        CHECK(floor > 0 ? rel < 2 * floor : rel < 2e-3 && mx < 1e-2, "%s: logits rel RMS %.3e, max |diff| %.3e", pc->name, rel, mx);
        /* 16 greedy steps */
        size_t ng;
        int32_t *greedy = ids_of(eli_json_get(eli_json_get(j, "greedy"), "tokens"), &ng);
        int same = ng == N_GREEDY;
        for (int k = 0; same && k < N_GREEDY; k++) {
            const int32_t t = argmax(logits, V);
            same = t == greedy[k] && !eli_seq_decode_tokens(s, &t, 1, &out, &err);
        }
        CHECK(same, "%s: the 16 greedy tokens of llama.cpp", pc->name);
        free(greedy);
    }
    free(want);
    free(logits);
    eli_seq_free(s);
    eli_json_free(j);
}

/* The ABI's prefill_image on llama.cpp's prompt: the text around the markers as llama.cpp tokenised it, the
 * markers by the library, the image by the named projector's tower; greedy ids as llama.cpp's. */
static void test_abi(void) {
    eli_json *j = load_json(DATA "a_img1_f32.mtmd.json");
    if (!j) return;
    char *err = NULL;
    EliInferenceContext *c = eliza_inference_create(eli_shared_path("golden/models/e2b-mini-f32.gguf"), &err);
    CHECK(c != NULL, "create: %s", err ? err : "");
    int32_t *open_ids = NULL, *close_ids = NULL;
    size_t n_open = 0, n_close = 0, n0, n2, ng;
    const eli_json *chunks = eli_json_get(j, "chunks");
    int32_t *t0 = ids_of(eli_json_get(&chunks->items[0], "tokens"), &n0), *t2 = ids_of(eli_json_get(&chunks->items[2], "tokens"), &n2);
    int32_t *greedy = ids_of(eli_json_get(eli_json_get(j, "greedy"), "tokens"), &ng);
    CHECK(c && !eliza_inference_tokenize(c, "<|image>", 8, 0, 1, &open_ids, &n_open, NULL) &&
              !eliza_inference_tokenize(c, "<image|>", 8, 0, 1, &close_ids, &n_close, NULL),
          "tokenize markers");
    /* llama.cpp's text chunks end and start with the markers exactly as the library tokenises them */
    CHECK(n_open < n0 && n_close < n2 && !memcmp(t0 + n0 - n_open, open_ids, n_open * sizeof *t0) &&
              !memcmp(t2, close_ids, n_close * sizeof *t2),
          "the markers' tokens");
    eliza_llm_stream_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.max_tokens = N_GREEDY;
    cfg.context_size = 2048;
    cfg.cache_type_k = cfg.cache_type_v = "f32";
    EliLlmStream *s = c ? eliza_inference_llm_stream_open(c, &cfg, &err) : NULL;
    CHECK(s && !eliza_inference_llm_stream_prefill(s, t0, n0 - n_open, &err) &&
              !eliza_inference_llm_stream_prefill_image(s, test_img1, n_test_img1, eli_shared_path(PROJ), &err) &&
              !eliza_inference_llm_stream_prefill(s, t2 + n_close, n2 - n_close, &err),
          "prefill: %s", err ? err : "");
    eliza_inference_free_string(err), err = NULL;
    int32_t got[N_GREEDY];
    size_t n = 0;
    for (int rc = 0; s && rc == 0 && n < N_GREEDY;) {
        size_t k = 0;
        rc = eliza_inference_llm_stream_next(s, got + n, N_GREEDY - n, &k, NULL, 0, NULL, NULL, NULL);
        n += k;
    }
    CHECK(n == N_GREEDY && ng == N_GREEDY && !memcmp(got, greedy, sizeof got), "the ABI's prefill_image: llama.cpp's greedy ids");
    eliza_inference_llm_stream_close(s);
    eliza_inference_destroy(c);
    eliza_inference_free_tokens(open_ids);
    eliza_inference_free_tokens(close_ids);
    free(t0), free(t2), free(greedy);
    eli_json_free(j);
}

int main(void) {
    const int vision = eli_vision_available();
    test_img1 = (unsigned char *)test_read_file(eli_shared_path("golden/mm/inputs/img1_gradient_200x150.png"), &n_test_img1);
    CHECK(test_img1 != NULL, "img1");
    test_model tm = {0};
    const char *loaded = NULL;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        /* without image decoding only the audio cases run */
        if (!vision && strstr(cases[i].name, "img")) continue;
        run_case(&cases[i], &loaded, &tm);
    }
    test_model_free(&tm);
    free((void *)loaded);
    if (vision) test_abi();
    free(test_img1);
    TEST_MAIN_END();
}
