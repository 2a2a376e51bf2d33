/* A host bridge built the way the eliza Android JNI bridge is: a shared library that references every
 * symbol of the host surface (../shared/spec/ffi.md, "The whole host surface"), linked against
 * libelizainference with -Wl,--no-undefined, so a single missing symbol fails the link here and
 * System.loadLibrary (dlopen RTLD_NOW) there. bridge_run drives the library through a few of them as a
 * host does; tests/host/loader.c loads this bridge with RTLD_NOW and runs it. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "eliza_inference.h"

/* Every symbol, by address: what the JNI bridge's native methods amount to for the linker. */
typedef void (*any_fn)(void);
#define SYM(name) (any_fn)(void (*)(void))name
static const any_fn every_symbol[] = {
    SYM(eliza_inference_abi_version), SYM(eliza_inference_create), SYM(eliza_inference_destroy),
    SYM(eliza_inference_mmap_acquire), SYM(eliza_inference_mmap_evict), SYM(eliza_inference_llm_stream_open),
    SYM(eliza_inference_llm_stream_prefill), SYM(eliza_inference_llm_stream_next), SYM(eliza_inference_llm_stream_cancel),
    SYM(eliza_inference_llm_stream_reset), SYM(eliza_inference_llm_stream_reset_keep),
    SYM(eliza_inference_llm_stream_save_slot), SYM(eliza_inference_llm_stream_restore_slot),
    SYM(eliza_inference_llm_stream_close), SYM(eliza_inference_llm_stream_supported), SYM(eliza_inference_llm_mtp_supported),
    SYM(eliza_inference_llm_kv_quant_supported), SYM(eliza_inference_tokenize), SYM(eliza_inference_detokenize),
    SYM(eliza_inference_embed), SYM(eliza_inference_llm_eot_score), SYM(eliza_inference_tokenize_supported),
    SYM(eliza_inference_embed_supported), SYM(eliza_inference_llm_eot_supported), SYM(eliza_inference_free_string),
    SYM(eliza_inference_free_tokens), SYM(eliza_inference_vision_supported), SYM(eliza_inference_vision_stream_supported),
    SYM(eliza_inference_describe_image), SYM(eliza_inference_describe_image_stream_open),
    SYM(eliza_inference_asr_transcribe), SYM(eliza_inference_asr_stream_supported), SYM(eliza_inference_asr_stream_open),
    SYM(eliza_inference_asr_stream_feed), SYM(eliza_inference_asr_stream_partial), SYM(eliza_inference_asr_stream_finish),
    SYM(eliza_inference_asr_stream_close), SYM(eliza_inference_tts_synthesize), SYM(eliza_inference_tts_stream_supported),
    SYM(eliza_inference_tts_synthesize_stream), SYM(eliza_inference_cancel_tts), SYM(eliza_inference_encode_reference),
    SYM(eliza_inference_kokoro_load), SYM(eliza_inference_kokoro_synthesize), SYM(eliza_inference_kokoro_sample_rate),
    SYM(eliza_inference_vad_supported), SYM(eliza_inference_vad_open), SYM(eliza_inference_vad_process),
    SYM(eliza_inference_vad_reset), SYM(eliza_inference_vad_close), SYM(eliza_inference_wakeword_supported),
    SYM(eliza_inference_wakeword_open), SYM(eliza_inference_wakeword_score), SYM(eliza_inference_wakeword_reset),
    SYM(eliza_inference_wakeword_close), SYM(eliza_inference_speaker_supported), SYM(eliza_inference_speaker_open),
    SYM(eliza_inference_speaker_embed), SYM(eliza_inference_speaker_free), SYM(eliza_inference_speaker_close),
    SYM(eliza_inference_diariz_supported), SYM(eliza_inference_diariz_open), SYM(eliza_inference_diariz_segment),
    SYM(eliza_inference_diariz_close), SYM(eliza_inference_set_verifier_callback),
};

static int failures;

static void expect(int ok, const char *fmt, ...) {
    if (ok) return;
    failures++;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "bridge: FAIL ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
}

/* A NOT_IMPLEMENTED answer whose message names what is missing. */
static void absent(int rc, char *err, const char *what, const char *call) {
    expect(rc == ELIZA_ERR_NOT_IMPLEMENTED && err && strstr(err, what), "%s: rc %d, '%s'", call, rc, err ? err : "");
    eliza_inference_free_string(err);
}

/* Returns the number of symbols bound, or -1 after printing what failed. */
__attribute__((visibility("default"))) int bridge_run(const char *model) {
    failures = 0;
    const int n_symbols = (int)(sizeof every_symbol / sizeof every_symbol[0]);
    for (int i = 0; i < n_symbols; i++) expect(every_symbol[i] != NULL, "symbol %d is NULL", i);
    expect(!strcmp(eliza_inference_abi_version(), "13"), "abi %s", eliza_inference_abi_version());
    expect(eliza_inference_llm_stream_supported() == 1 && eliza_inference_llm_mtp_supported() == 1 &&
               eliza_inference_llm_kv_quant_supported() == 1 && eliza_inference_tokenize_supported() == 1,
           "the four probes a host requires");

    char *err = NULL;
    EliInferenceContext *c = eliza_inference_create(model, &err);
    expect(c != NULL, "create: %s", err ? err : "");
    eliza_inference_free_string(err), err = NULL;
    if (!c) return -1;
    int32_t *ids = NULL;
    size_t n = 0;
    expect(eliza_inference_tokenize(c, "Hello there", 11, 1, 0, &ids, &n, &err) == ELIZA_OK && n > 1, "tokenize");
    eliza_llm_stream_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.max_tokens = 8, cfg.slot_id = -1, cfg.n_gpu_layers = -1, cfg.context_size = 128;
    cfg.cache_type_k = "f16", cfg.cache_type_v = "q8_0";
    EliLlmStream *s = eliza_inference_llm_stream_open(c, &cfg, &err);
    expect(s != NULL, "open: %s", err ? err : "");
    int total = 0, rc = 0;
    if (s && eliza_inference_llm_stream_prefill(s, ids, n, NULL) == ELIZA_OK)
        for (int guard = 0; guard < 20 && rc == 0; guard++) {
            int32_t out[3];
            size_t got = 0;
            char text[64];
            rc = eliza_inference_llm_stream_next(s, out, 3, &got, text, sizeof text, NULL, NULL, NULL);
            total += (int)got;
        }
    expect(rc == 1 && total == 8, "8 tokens in steps of 3: rc %d, %d tokens", rc, total);
    eliza_inference_llm_stream_close(s);
    eliza_inference_free_tokens(ids);

    /* the families this build has no engine for: honest answers, NULL-safe closes */
    expect(!eliza_inference_vision_supported() && !eliza_inference_asr_stream_supported() &&
               !eliza_inference_tts_stream_supported() && !eliza_inference_vad_supported() &&
               !eliza_inference_wakeword_supported() && !eliza_inference_speaker_supported() &&
               !eliza_inference_diariz_supported(),
           "probes of the absent families say 0");
    float pcm[160] = {0}, prob = -1;
    char text[64];
    rc = eliza_inference_tts_synthesize(c, "hi", 2, NULL, pcm, 160, &err);
    absent(rc, err, "text-to-speech", "tts_synthesize");
    err = NULL;
    expect(eliza_inference_vad_open(c, 16000, &err) == NULL, "vad_open returns NULL");
    absent(ELIZA_ERR_NOT_IMPLEMENTED, err, "voice activity", "vad_open");
    err = NULL;
    rc = eliza_inference_wakeword_score(NULL, pcm, 160, &prob, &err);
    absent(rc, err, "wake-word", "wakeword_score");
    err = NULL;
    rc = eliza_inference_asr_transcribe(c, pcm, 160, 16000, text, sizeof text, &err);
    absent(rc, err, "speech recognition", "asr_transcribe");
    expect(eliza_inference_cancel_tts(c, NULL) == ELIZA_OK, "cancel_tts with nothing running");
    expect(eliza_inference_kokoro_sample_rate(c) < 0, "no Kokoro model");
    eliza_inference_vad_close(NULL), eliza_inference_wakeword_close(NULL), eliza_inference_speaker_close(NULL);
    eliza_inference_speaker_free(NULL), eliza_inference_diariz_close(NULL), eliza_inference_asr_stream_close(NULL);
    eliza_inference_destroy(c);
    return failures ? -1 : n_symbols;
}
