/* save_slot / restore_slot on the golden e2b-mini model: through the C ABI (greedy continuation of a
 * restored stream equals the original's, i.e. llama.cpp's greedy ids), through eli_gen with small ubatches
 * (true sliding rings, pending token, restored into a fresh session), and rejection of files from another
 * model or configuration, truncated and corrupted files, plus a mutation loop that must never crash; a
 * sampled (temperature > 0) stream restored from a file continues exactly, and version 1 / 2 files are
 * refused; with MTP on eliza-1-nano (greedy and sampled) a restored stream continues exactly too; a stream on
 * low-bit KV types (K qjl1_256, V tbq3_0) too. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "eliza_inference.h"
#include "engine.h"
#include "slot.h"
#include "test.h"
#include "test_exec.h"
#include "test_ffi_config.h"

#define MODEL "golden/models/e2b-mini-f32.gguf"
#define OTHER "golden/models/e2b-mini-q8_0.gguf"

/* next() with steps of `step` tokens until the stream ends or `limit` tokens came; returns the count */
static int gen_abi(EliLlmStream *s, int32_t *out, int limit, int step) {
    int n = 0;
    while (n < limit) {
        int32_t buf[32];
        size_t got = 0;
        int rc = eliza_inference_llm_stream_next(s, buf, (size_t)step, &got, NULL, 0, NULL, NULL, NULL);
        if (rc < 0) return -1;
        for (size_t i = 0; i < got && n < limit; i++) out[n++] = buf[i];
        if (rc == 1) break;
    }
    return n;
}

static char tmpdir[64];

static long file_size(const char *p) {
    struct stat st;
    return stat(p, &st) ? -1 : (long)st.st_size;
}

static unsigned char *slurp(const char *p, long *n) {
    FILE *f = fopen(p, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    *n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)*n);
    if (b && fread(b, 1, (size_t)*n, f) != (size_t)*n) free(b), b = NULL;
    fclose(f);
    return b;
}

static void spit(const char *p, const unsigned char *b, long n) {
    FILE *f = fopen(p, "wb");
    if (!f) return;
    fwrite(b, 1, (size_t)n, f);
    fclose(f);
}

static void test_abi(void) {
    int32_t seq[96], greedy[16], out[32];
    read_ids(eli_shared_path("golden/models/e2b-mini.tokens.txt"), seq, 96);
    read_ids(eli_shared_path("golden/models/e2b-mini-f32.greedy.txt"), greedy, 16);
    char *err = NULL;
    EliInferenceContext *c = eliza_inference_create(eli_shared_path(MODEL), &err);
    CHECK(c != NULL, "create: %s", err ? err : "");
    if (!c) return;
    eliza_llm_stream_config_t cfg = greedy_cfg(16);
    EliLlmStream *a = eliza_inference_llm_stream_open(c, &cfg, &err);
    CHECK(a && eliza_inference_llm_stream_prefill(a, seq, 96, NULL) == ELIZA_OK, "open + prefill");
    /* 6 tokens, then save (the 6th is pending: emitted, not yet in the cache) */
    int n = gen_abi(a, out, 6, 1);
    CHECK(n == 6 && !memcmp(out, greedy, 6 * sizeof *out), "first 6 tokens greedy");
    const char *slot = eli_test_path_in(tmpdir, "a.slot");
    CHECK(eliza_inference_llm_stream_save_slot(a, slot, &err) == ELIZA_OK, "save: %s", err ? err : "");
    eliza_inference_free_string(err), err = NULL;
    CHECK(file_size(slot) > 0, "slot file written");
    int n_rest = gen_abi(a, out + 6, 32, 4);
    CHECK(n_rest == 10 && !memcmp(out, greedy, 16 * sizeof *out), "original continues greedily (%d)", n_rest);

    /* a fresh stream restored from the file continues exactly like the original did */
    EliLlmStream *b = eliza_inference_llm_stream_open(c, &cfg, NULL);
    CHECK(eliza_inference_llm_stream_restore_slot(b, slot, &err) == ELIZA_OK, "restore: %s", err ? err : "");
    eliza_inference_free_string(err), err = NULL;
    int32_t out2[32];
    int n2 = gen_abi(b, out2, 32, 3);
    CHECK(n2 == 10 && !memcmp(out2, greedy + 6, 10 * sizeof *out2), "restored stream continues greedily (%d)", n2);
    /* restoring into a used stream replaces its state; reset_keep still works after a restore */
    CHECK(eliza_inference_llm_stream_restore_slot(b, slot, NULL) == ELIZA_OK, "restore over a used stream");
    CHECK(eliza_inference_llm_stream_reset_keep(b, 96) == 96, "reset_keep after restore");
    n2 = gen_abi(b, out2, 32, 8);
    CHECK(n2 == 16 && !memcmp(out2, greedy, 16 * sizeof *out2), "reset_keep(96) after restore == fresh");

    /* another configuration is refused, naming what differs */
    eliza_llm_stream_config_t cfg2 = greedy_cfg(16);
    cfg2.context_size = 128;
    EliLlmStream *d = eliza_inference_llm_stream_open(c, &cfg2, NULL);
    CHECK(eliza_inference_llm_stream_restore_slot(d, slot, &err) == ELIZA_ERR_INVALID_ARG && err && strstr(err, "n_ctx 256") &&
              strstr(err, "n_ctx 128"),
          "other n_ctx refused: %s", err ? err : "");
    eliza_inference_free_string(err), err = NULL;
    eliza_inference_llm_stream_close(d);
    cfg2 = greedy_cfg(16);
    cfg2.cache_type_k = cfg2.cache_type_v = "f32";
    d = eliza_inference_llm_stream_open(c, &cfg2, NULL);
    CHECK(eliza_inference_llm_stream_restore_slot(d, slot, &err) == ELIZA_ERR_INVALID_ARG && err && strstr(err, "KV f16") &&
              strstr(err, "KV f32"),
          "other KV type refused: %s", err ? err : "");
    eliza_inference_free_string(err), err = NULL;
    eliza_inference_llm_stream_close(d);

    /* a file from another model is refused */
    EliInferenceContext *c2 = eliza_inference_create(eli_shared_path(OTHER), NULL);
    CHECK(c2 != NULL, "create other model");
    if (c2) {
        EliLlmStream *o = eliza_inference_llm_stream_open(c2, &cfg, NULL);
        CHECK(eliza_inference_llm_stream_restore_slot(o, slot, &err) == ELIZA_ERR_INVALID_ARG && err &&
                  strstr(err, "another model"),
              "other model refused: %s", err ? err : "");
        eliza_inference_free_string(err), err = NULL;
        eliza_inference_llm_stream_close(o);
        eliza_inference_destroy(c2);
    }

    /* truncated / corrupted / garbage files are refused and leave the stream usable and unchanged */
    long size;
    unsigned char *img = slurp(slot, &size);
    CHECK(img != NULL && size > 200, "read slot back");
    if (img) {
        const char *bad = eli_test_path_in(tmpdir, "bad.slot");
        spit(bad, img, size / 2);
        CHECK(eliza_inference_llm_stream_restore_slot(b, bad, &err) == ELIZA_ERR_INVALID_ARG && err && strstr(err, "checksum"),
              "truncated refused: %s", err ? err : "");
        eliza_inference_free_string(err), err = NULL;
        img[size / 3] ^= 0x40;
        spit(bad, img, size);
        CHECK(eliza_inference_llm_stream_restore_slot(b, bad, &err) == ELIZA_ERR_INVALID_ARG && err && strstr(err, "checksum"),
              "corrupted refused: %s", err ? err : "");
        eliza_inference_free_string(err), err = NULL;
        img[size / 3] ^= 0x40;
        spit(bad, img, 10);
        CHECK(eliza_inference_llm_stream_restore_slot(b, bad, NULL) == ELIZA_ERR_INVALID_ARG, "tiny file refused");
        CHECK(eliza_inference_llm_stream_restore_slot(b, eli_test_path_in(tmpdir, "missing.slot"), NULL) == ELIZA_ERR_INVALID_ARG,
              "missing file refused");
        CHECK(eliza_inference_llm_stream_restore_slot(b, "", NULL) == ELIZA_ERR_INVALID_ARG, "empty path");
        CHECK(eliza_inference_llm_stream_save_slot(b, "/nonexistent/dir/x.slot", &err) == ELIZA_ERR_INVALID_ARG && err,
              "unwritable path: %s", err ? err : "");
        eliza_inference_free_string(err), err = NULL;
        /* b is unchanged by the failures: it still holds the state of the last good restore + reset_keep */
        CHECK(eliza_inference_llm_stream_reset_keep(b, 96) == 96, "stream still usable");
        n2 = gen_abi(b, out2, 32, 8);
        CHECK(n2 == 16 && !memcmp(out2, greedy, 16 * sizeof *out2), "greedy after refused restores");

        /* mutation loop: flip bytes (at random offsets, header included) and fix the checksum so the parser
         * itself is exercised; also random truncations. Never a crash; a restore that passes must leave a
         * usable stream. */
        uint64_t rng = 0x1234567;
        int accepted = 0, refused = 0;
        unsigned char *m = malloc((size_t)size);
        for (int it = 0; it < 300 && m; it++) {
            memcpy(m, img, (size_t)size);
            long len = size;
            int kind = it % 3;
            for (int k = 0; k < 1 + it % 4; k++) {
                rng = rng * 6364136223846793005ull + 1442695040888963407ull;
                long off = (long)((rng >> 33) % (uint64_t)(it % 2 ? 160 : size - 8));
                m[off] ^= (unsigned char)(1u << ((rng >> 20) & 7));
            }
            if (kind == 1) { /* re-seal: valid checksum over mutated content */
                uint64_t sum = eli_hash64_bytes(m, (size_t)size - 8);
                memcpy(m + size - 8, &sum, 8);
            } else if (kind == 2) {
                rng = rng * 6364136223846793005ull + 1442695040888963407ull;
                len = (long)((rng >> 33) % (uint64_t)size);
            }
            spit(bad, m, len);
            int rc = eliza_inference_llm_stream_restore_slot(b, bad, NULL);
            if (rc == ELIZA_OK) {
                accepted++;
                int32_t tmp[8];
                gen_abi(b, tmp, 8, 8);
            } else {
                refused++;
            }
        }
        free(m);
        printf("mutation loop: %d refused, %d accepted (flips inside K/V rows or logits are valid files)\n", refused,
               accepted);
        CHECK(refused > 150, "most mutations refused (%d)", refused);
        unlink(bad);
        free(img);
    }
    eliza_inference_llm_stream_close(a);
    eliza_inference_llm_stream_close(b);
    eliza_inference_destroy(c);
    unlink(slot);
}

/* eli_gen with ubatch 4: the window rings (16 + 4 cells) wrap many times; save with a pending token and
 * with valid logits, restore into a fresh session, continue identically. */
static void test_rings(void) {
    int32_t seq[96];
    read_ids(eli_shared_path("golden/models/e2b-mini.tokens.txt"), seq, 96);
    eli_error err = {0};
    test_model t;
    CHECK(!test_model_load(eli_shared_path(MODEL), 1, NULL, &t, &err), "load: %s", err.msg);
    if (!t.m) return;
    eli_gen_params p = eli_gen_default_params();
    p.seq.n_ctx = 256;
    p.seq.n_ubatch = 4;
    p.sampling.temperature = 0;
    p.max_tokens = 0;
    for (int variant = 0; variant < 2; variant++) {
        eli_gen *a = eli_gen_create(t.xm->exec, t.xm, t.tok, &p, &err), *b = eli_gen_create(t.xm->exec, t.xm, t.tok, &p, &err);
        CHECK(a && b, "create: %s", err.msg);
        if (!a || !b) break;
        CHECK(!eli_gen_prefill(a, seq, 96, NULL, &err), "prefill: %s", err.msg);
        int32_t ref[40], got[40];
        size_t n = 0;
        if (variant == 1) { /* save right after the prefill (logits valid, nothing pending) */
        } else {
            eli_gen_next(a, ref, 7, &n, NULL, 0, NULL, NULL, NULL, &err); /* 7 generated, the last pending */
        }
        const char *slot = eli_test_path_in(tmpdir, "r.slot");
        CHECK(!eli_gen_save(a, slot, &err), "save: %s", err.msg);
        size_t na = 0, nb = 0;
        eli_gen_next(a, ref, 40, &na, NULL, 0, NULL, NULL, NULL, &err);
        CHECK(!eli_gen_restore(b, slot, &err), "restore: %s", err.msg);
        CHECK(eli_gen_n_committed(b) == 96 + (int64_t)n, "committed %lld", (long long)eli_gen_n_committed(b));
        eli_gen_next(b, got, 40, &nb, NULL, 0, NULL, NULL, NULL, &err);
        CHECK(na == 40 && nb == na && !memcmp(ref, got, na * sizeof *ref), "ring variant %d: restored == original", variant);
        unlink(slot);
        eli_gen_free(a);
        eli_gen_free(b);
    }
    /* a session with another ubatch (other ring size) refuses the file */
    eli_gen *a = eli_gen_create(t.xm->exec, t.xm, t.tok, &p, &err);
    eli_gen_params p8 = p;
    p8.seq.n_ubatch = 8;
    eli_gen *b = eli_gen_create(t.xm->exec, t.xm, t.tok, &p8, &err);
    if (a && b && !eli_gen_prefill(a, seq, 40, NULL, &err)) {
        const char *slot = eli_test_path_in(tmpdir, "u.slot");
        CHECK(!eli_gen_save(a, slot, &err), "save");
        CHECK(eli_gen_restore(b, slot, &err) == ELI_ERR_INVALID_ARG && strstr(err.msg, "n_ubatch 4") &&
                  strstr(err.msg, "n_ubatch 8"),
              "other ubatch refused: %s", err.msg);
        unlink(slot);
    }
    eli_gen_free(a);
    eli_gen_free(b);
    test_model_free(&t);
}

static void test_hash(void) {
    /* streaming == one shot, at every split */
    unsigned char buf[200];
    for (int i = 0; i < 200; i++) buf[i] = (unsigned char)(i * 7 + 3);
    uint64_t one = eli_hash64_bytes(buf, sizeof buf);
    int same = 1;
    for (size_t cut = 0; cut <= sizeof buf; cut += 13) {
        eli_hash64 h;
        eli_hash64_init(&h);
        eli_hash64_update(&h, buf, cut);
        eli_hash64_update(&h, buf + cut, sizeof buf - cut);
        same &= eli_hash64_final(&h) == one;
    }
    CHECK(same, "streaming hash == one-shot hash");
    /* XXH64 of the empty input with seed 0 */
    CHECK(eli_hash64_bytes("", 0) == 0xEF46DB3751D8E999ull, "XXH64('') = %016llx", (unsigned long long)eli_hash64_bytes("", 0));
}

/* The golden sequence into seq and a context on the golden model (NULL after a failed CHECK). */
static EliInferenceContext *golden_context(int32_t seq[96]) {
    read_ids(eli_shared_path("golden/models/e2b-mini.tokens.txt"), seq, 96);
    char *err = NULL;
    EliInferenceContext *c = eliza_inference_create(eli_shared_path(MODEL), &err);
    CHECK(c != NULL, "create: %s", err ? err : "");
    eliza_inference_free_string(err);
    return c;
}

/* At temperature > 0 a restored stream continues exactly like the original (the sampler's random state is
 * in the file); a version 1 file (without it) is refused, naming the version. */
static void test_sampled(void) {
    int32_t seq[96], want[16], got[16];
    char *err = NULL;
    EliInferenceContext *c = golden_context(seq);
    if (!c) return;
    eliza_llm_stream_config_t cfg = greedy_cfg(22);
    cfg.temperature = 1.0f;
    EliLlmStream *a = eliza_inference_llm_stream_open(c, &cfg, &err);
    CHECK(a && eliza_inference_llm_stream_prefill(a, seq, 96, NULL) == ELIZA_OK, "open + prefill");
    CHECK(gen_abi(a, got, 6, 2) == 6, "6 sampled tokens");
    const char *slot = eli_test_path_in(tmpdir, "sampled.slot");
    CHECK(eliza_inference_llm_stream_save_slot(a, slot, NULL) == ELIZA_OK, "save");
    const int n_want = gen_abi(a, want, 16, 3);
    EliLlmStream *b = eliza_inference_llm_stream_open(c, &cfg, NULL);
    CHECK(eliza_inference_llm_stream_restore_slot(b, slot, &err) == ELIZA_OK, "restore: %s", err ? err : "");
    eliza_inference_free_string(err), err = NULL;
    const int n_got = gen_abi(b, got, 16, 5);
    CHECK(n_want == 16 && n_got == n_want && !memcmp(got, want, sizeof(int32_t) * 16),
          "restored sampled stream continues exactly (%d / %d tokens)", n_got, n_want);

    long n = 0;
    unsigned char *bytes = slurp(slot, &n);
    CHECK(bytes && n > 16, "read the slot file");
    if (bytes && n > 16) {
        const uint32_t v1 = 1;
        memcpy(bytes + 8, &v1, sizeof v1);
        const char *old = eli_test_path_in(tmpdir, "v1.slot");
        spit(old, bytes, n);
        CHECK(eliza_inference_llm_stream_restore_slot(b, old, &err) == ELIZA_ERR_INVALID_ARG && err &&
                  strstr(err, "version 1") && strstr(err, "random state"),
              "version 1 refused: %s", err ? err : "");
        eliza_inference_free_string(err), err = NULL;
        const uint32_t v2 = 2;
        memcpy(bytes + 8, &v2, sizeof v2);
        spit(old, bytes, n);
        CHECK(eliza_inference_llm_stream_restore_slot(b, old, &err) == ELIZA_ERR_INVALID_ARG && err &&
                  strstr(err, "version 2") && strstr(err, "MTP state"),
              "version 2 refused: %s", err ? err : "");
        eliza_inference_free_string(err), err = NULL;
        const uint32_t v4 = 4;
        memcpy(bytes + 8, &v4, sizeof v4);
        spit(old, bytes, n);
        CHECK(eliza_inference_llm_stream_restore_slot(b, old, &err) == ELIZA_ERR_INVALID_ARG && err &&
                  strstr(err, "version 4") && strstr(err, "embedding rows"),
              "version 4 refused: %s", err ? err : "");
        eliza_inference_free_string(err), err = NULL;
        unlink(old);
    }
    free(bytes);
    unlink(slot);
    eliza_inference_llm_stream_close(a);
    eliza_inference_llm_stream_close(b);
    eliza_inference_destroy(c);
}

/* next() until limit tokens, summing the MTP counts the steps report */
static int gen_mtp(EliLlmStream *s, int32_t *out, int limit, long *drafted, long *accepted) {
    int n = 0;
    while (n < limit) {
        int32_t buf[32], dr = 0, ac = 0;
        size_t got = 0;
        int rc = eliza_inference_llm_stream_next(s, buf, (size_t)(limit - n < 8 ? limit - n : 8), &got, NULL, 0, &dr, &ac, NULL);
        if (rc < 0) return -1;
        *drafted += dr, *accepted += ac;
        for (size_t i = 0; i < got && n < limit; i++) out[n++] = buf[i];
        if (rc == 1) break;
    }
    return n;
}

/* Issue 8 item 5: MTP with save / restore on eliza-1-nano and its drafter (accepted often, so rounds are
 * under way when the slot is saved). Greedy: the restored stream continues with the tokens of plain greedy
 * decoding. Sampled: the slot keeps the MTP state (its random stream, window, pause, acceptance counts)
 * with the sampler's, so the restored stream gives the very tokens the original gives. */
static void test_mtp(void) {
    char *err = NULL;
    EliInferenceContext *c = eliza_inference_create(ELI_SOURCE_DIR "/models/eliza-1-nano", &err);
    CHECK(c != NULL, "nano bundle: %s", err ? err : "");
    if (!c) return;
    const char *text = "It is a truth universally acknowledged, that a single man in possession of a good fortune";
    int *ids = NULL;
    size_t n_ids = 0;
    CHECK(eliza_inference_tokenize(c, text, strlen(text), 1, 0, &ids, &n_ids, NULL) == ELIZA_OK && n_ids > 8, "tokenize");
    enum { HEAD = 10, TAIL = 40 };
    for (int sampled = 0; sampled < 2; sampled++) {
        eliza_llm_stream_config_t cfg = greedy_cfg(HEAD + TAIL);
        cfg.context_size = 512;
        cfg.temperature = sampled ? 0.9f : 0.0f;
        cfg.draft_min = 1, cfg.draft_max = 4;
        int32_t head[HEAD], want[TAIL], got[TAIL], plain[HEAD + TAIL];
        long dr = 0, ac = 0, dr_b = 0, ac_b = 0;
        EliLlmStream *a = eliza_inference_llm_stream_open(c, &cfg, &err);
        CHECK(a && eliza_inference_llm_stream_prefill(a, ids, n_ids, NULL) == ELIZA_OK, "MTP stream: %s", err ? err : "");
        if (!a) break;
        CHECK(gen_mtp(a, head, HEAD, &dr, &ac) == HEAD, "%d tokens before the save", HEAD);
        const char *slot = eli_test_path_in(tmpdir, "mtp.slot");
        CHECK(eliza_inference_llm_stream_save_slot(a, slot, NULL) == ELIZA_OK, "save");
        CHECK(gen_mtp(a, want, TAIL, &dr, &ac) == TAIL, "%d tokens after", TAIL);
        EliLlmStream *b = eliza_inference_llm_stream_open(c, &cfg, NULL);
        CHECK(b && eliza_inference_llm_stream_restore_slot(b, slot, &err) == ELIZA_OK, "restore: %s", err ? err : "");
        CHECK(gen_mtp(b, got, TAIL, &dr_b, &ac_b) == TAIL && !memcmp(got, want, sizeof want),
              "%s MTP: the restored stream continues with the original's tokens", sampled ? "sampled" : "greedy");
        CHECK(ac > 0 && ac_b > 0, "drafts accepted before and after the restore (%ld / %ld of %ld / %ld)", ac, ac_b, dr,
              dr_b);
        if (!sampled) {
            eliza_llm_stream_config_t pc = cfg;
            pc.draft_min = pc.draft_max = 0;
            EliLlmStream *p = eliza_inference_llm_stream_open(c, &pc, NULL);
            CHECK(p && eliza_inference_llm_stream_prefill(p, ids, n_ids, NULL) == ELIZA_OK &&
                      gen_abi(p, plain, HEAD + TAIL, 5) == HEAD + TAIL && !memcmp(plain, head, sizeof head) &&
                      !memcmp(plain + HEAD, got, sizeof got),
                  "greedy MTP before and after the restore == plain greedy decoding");
            /* the MTP slot restores into a stream without MTP too (greedy: the same continuation) */
            CHECK(eliza_inference_llm_stream_restore_slot(p, slot, NULL) == ELIZA_OK &&
                      gen_abi(p, plain, TAIL, 3) == TAIL && !memcmp(plain, want, sizeof want),
                  "an MTP slot restored into a plain stream");
            eliza_inference_llm_stream_close(p);
        } else {
            /* a broken MTP record is refused with its fields named, and the stream keeps working */
            long n = 0;
            unsigned char *bytes = slurp(slot, &n);
            if (bytes) {
                const int32_t bad = 1000; /* the pause: longer than the longest */
                memcpy(bytes + 132, &bad, sizeof bad); /* header offset of the MTP pause (slot.h layout) */
                const uint64_t sum = eli_hash64_bytes(bytes, (size_t)n - 8);
                memcpy(bytes + n - 8, &sum, sizeof sum);
                const char *broken = eli_test_path_in(tmpdir, "mtp-bad.slot");
                spit(broken, bytes, n);
                CHECK(eliza_inference_llm_stream_restore_slot(b, broken, &err) == ELIZA_ERR_INVALID_ARG && err &&
                          strstr(err, "MTP state") && strstr(err, "pause 1000"),
                      "out-of-range MTP state refused: %s", err ? err : "");
                eliza_inference_free_string(err), err = NULL;
                unlink(broken);
            }
            free(bytes);
        }
        unlink(slot);
        eliza_inference_llm_stream_close(a);
        eliza_inference_llm_stream_close(b);
    }
    eliza_inference_free_tokens(ids);
    eliza_inference_destroy(c);
}

/* A stream on low-bit K and V types (K qjl1_256, V tbq3_0): the slot file records them, a restored stream
 * continues exactly like the original, and a stream of other low-bit types refuses the file, naming both. */
static void test_lowbit(void) {
    int32_t seq[96], a16[16], b16[16];
    char *err = NULL;
    EliInferenceContext *c = golden_context(seq);
    if (!c) return;
    eliza_llm_stream_config_t cfg = greedy_cfg(16);
    cfg.cache_type_k = "qjl1_256", cfg.cache_type_v = "tbq3_0";
    EliLlmStream *a = eliza_inference_llm_stream_open(c, &cfg, &err), *b = eliza_inference_llm_stream_open(c, &cfg, NULL);
    CHECK(a && b && eliza_inference_llm_stream_prefill(a, seq, 96, NULL) == ELIZA_OK, "open + prefill: %s", err ? err : "");
    const char *slot = eli_test_path_in(tmpdir, "lowbit.slot");
    CHECK(gen_abi(a, a16, 6, 1) == 6 && eliza_inference_llm_stream_save_slot(a, slot, NULL) == ELIZA_OK, "6 tokens, save");
    CHECK(gen_abi(a, a16 + 6, 10, 4) == 10, "the original's next 10");
    CHECK(eliza_inference_llm_stream_restore_slot(b, slot, &err) == ELIZA_OK, "restore: %s", err ? err : "");
    eliza_inference_free_string(err), err = NULL;
    CHECK(gen_abi(b, b16, 10, 3) == 10 && !memcmp(b16, a16 + 6, 10 * sizeof *b16), "restored low-bit stream continues exactly");
    cfg.cache_type_k = "tbq4_0";
    EliLlmStream *d = eliza_inference_llm_stream_open(c, &cfg, NULL);
    CHECK(d && eliza_inference_llm_stream_restore_slot(d, slot, &err) == ELIZA_ERR_INVALID_ARG && err && strstr(err, "qjl1_256") &&
              strstr(err, "tbq4_0"),
          "other K type refused: %s", err ? err : "");
    eliza_inference_free_string(err);
    eliza_inference_llm_stream_close(a), eliza_inference_llm_stream_close(b), eliza_inference_llm_stream_close(d);
    eliza_inference_destroy(c);
    remove(slot);
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/eli_slot_XXXXXX");
    if (!mkdtemp(tmpdir)) return 1;
    test_hash();
    test_abi();
    test_sampled();
    test_rings();
    test_mtp();
    test_lowbit();
    rmdir(tmpdir);
    TEST_MAIN_END();
}
