/* eliza-infer quantize (quantize.h) against llama-quantize, whole files byte for byte:
 *  - the golden e2b-mini F16 / Q8_0 / Q6_K / Q4_K_M / Q4_0 files (../shared/golden/models, made by
 *    llama-quantize from e2b-mini-f32) directly;
 *  - every other file type, the dense-kv-mini and moe-mini mixtures (K=V layers, 8 experts: their own
 *    rules) and requantization (Q8_0 and Q4_K_M inputs) against the SHA-256 of llama-quantize's output
 *    (llama.cpp 3f545becc, run outside this repository: tests/data/quantize_ref.sha256);
 *  - the same bytes with 1 and 3 threads; the CLI; refusals: unknown type, unreadable input, a row length
 *    that no type of the mixture can hold, leaving no file behind. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "quantize.h"
#include "test.h"
#include "gguf_writer.h"

/* ---- SHA-256 (FIPS 180-4), enough for whole files ---- */

typedef struct {
    uint32_t h[8];
    uint8_t buf[64];
    uint64_t len;
} sha256_ctx;

static uint32_t ror(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

static void sha256_block(sha256_ctx *c, const uint8_t *p) {
    static const uint32_t K[64] = {
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5, 0xd807aa98,
        0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
        0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8,
        0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
        0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819,
        0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
        0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
        0xc67178f2};
    uint32_t w[64], v[8];
    for (int i = 0; i < 16; i++) w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; i++)
        w[i] = w[i - 16] + (ror(w[i - 15], 7) ^ ror(w[i - 15], 18) ^ (w[i - 15] >> 3)) + w[i - 7] +
               (ror(w[i - 2], 17) ^ ror(w[i - 2], 19) ^ (w[i - 2] >> 10));
    memcpy(v, c->h, sizeof v);
    for (int i = 0; i < 64; i++) {
        const uint32_t t1 = v[7] + (ror(v[4], 6) ^ ror(v[4], 11) ^ ror(v[4], 25)) + ((v[4] & v[5]) ^ (~v[4] & v[6])) + K[i] + w[i];
        const uint32_t t2 = (ror(v[0], 2) ^ ror(v[0], 13) ^ ror(v[0], 22)) + ((v[0] & v[1]) ^ (v[0] & v[2]) ^ (v[1] & v[2]));
        memmove(v + 1, v, 7 * sizeof v[0]);
        v[4] += t1;
        v[0] = t1 + t2;
    }
    for (int i = 0; i < 8; i++) c->h[i] += v[i];
}

/* hex digest of a file, "" when unreadable */
static void sha256_file(const char *path, char hex[65]) {
    sha256_ctx c = {{0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19}, {0}, 0};
    hex[0] = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return;
    size_t n;
    while ((n = fread(c.buf, 1, 64, f)) == 64) sha256_block(&c, c.buf), c.len += 64;
    fclose(f);
    c.len += n;
    c.buf[n++] = 0x80;
    if (n > 56) {
        memset(c.buf + n, 0, 64 - n);
        sha256_block(&c, c.buf);
        n = 0;
    }
    memset(c.buf + n, 0, 56 - n);
    for (int i = 0; i < 8; i++) c.buf[56 + i] = (uint8_t)((c.len * 8) >> (56 - 8 * i));
    sha256_block(&c, c.buf);
    for (int i = 0; i < 8; i++) snprintf(hex + 8 * i, 9, "%08x", c.h[i]);
}

static int same_file(const char *a, const char *b) {
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    int same = fa && fb;
    while (same) {
        const int x = fgetc(fa), y = fgetc(fb);
        same = x == y;
        if (x == EOF) break;
    }
    if (fa) fclose(fa);
    if (fb) fclose(fb);
    return same;
}

static char tmpdir[256];

/* a path in the test's directory; four in a ring, so one call's result survives the next three */
static const char *out_path(const char *name) {
    static char p[4][512];
    static int slot;
    char *b = p[slot++ & 3];
    snprintf(b, sizeof p[0], "%s/%s", tmpdir, name);
    return b;
}

static int quantize(const char *model, const char *type, int threads, const char *out) {
    char in[512];
    snprintf(in, sizeof in, "golden/models/%s.gguf", model);
    eli_error err = {0};
    const eli_qftype *ft = eli_qftype_find(type);
    CHECK(ft != NULL, "type %s", type);
    const int rc = ft ? eli_quantize_file(eli_shared_path(in), out, ft, threads, NULL, &err) : -1;
    CHECK(rc == 0, "%s -> %s: %s", model, type, err.msg);
    return rc;
}

static void check_golden_files(void) {
    static const char *const types[] = {"f16", "q8_0", "q6_k", "q4_k_m", "q4_0"};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        char golden[128];
        snprintf(golden, sizeof golden, "golden/models/e2b-mini-%s.gguf", types[i]);
        if (quantize("e2b-mini-f32", types[i], 2, out_path("g.gguf"))) continue;
        CHECK(same_file(out_path("g.gguf"), eli_shared_path(golden)), "e2b-mini %s: not the bytes of %s", types[i], golden);
    }
}

static void check_reference_sums(void) {
    FILE *f = fopen(ELI_SOURCE_DIR "/tests/data/quantize_ref.sha256", "r");
    CHECK(f != NULL, "tests/data/quantize_ref.sha256");
    if (!f) return;
    char want[65], model[64], type[16], got[65];
    int n = 0;
    while (fscanf(f, "%64s %63s %15s", want, model, type) == 3) {
        if (quantize(model, type, 2, out_path("r.gguf"))) continue;
        sha256_file(out_path("r.gguf"), got);
        CHECK(!strcmp(got, want), "%s -> %s: sha256 %s, llama-quantize's %s", model, type, got, want);
        n++;
    }
    fclose(f);
    CHECK(n == 22, "%d reference files", n);
}

/* the bytes do not depend on the thread count */
static void check_threads(void) {
    char a[65], b[65];
    quantize("moe-mini-f32", "q4_k_m", 1, out_path("t1.gguf"));
    quantize("moe-mini-f32", "q4_k_m", 3, out_path("t3.gguf"));
    sha256_file(out_path("t1.gguf"), a);
    sha256_file(out_path("t3.gguf"), b);
    CHECK(a[0] && !strcmp(a, b), "1 and 3 threads: %s vs %s", a, b);
}

static void check_refusals(void) {
    eli_error err = {0};
    CHECK(eli_qftype_find("q3_k") == NULL && eli_qftype_find("") == NULL && eli_qftype_find(NULL) == NULL &&
              eli_qftype_find("Q4_K_M") == eli_qftype_find("q4_k_m"),
          "type names");
    const eli_qftype *q4 = eli_qftype_find("q4_0");
    CHECK(eli_quantize_file(eli_shared_path("golden/models/e2b-mini.tokens.txt"), out_path("x.gguf"), q4, 1, NULL, &err) < 0 &&
              access(out_path("x.gguf"), F_OK) != 0,
          "not a GGUF: %s", err.msg);
    /* a 2-D weight of rows of 48 values: q4_0 blocks are 32 and q4_0 has no fallback type */
    float data[48 * 2] = {0};
    const uint64_t ne[2] = {48, 2};
    gw_file g;
    gw_init(&g);
    gw_kv_str(&g, "general.architecture", "gemma4");
    gw_kv_u32(&g, "gemma4.block_count", 1);
    gw_tensor(&g, "blk.0.attn_q.weight", 0, 2, ne, data, sizeof data);
    size_t size = 0;
    uint8_t *file = gw_finish(&g, &size);
    gw_free(&g);
    FILE *f = fopen(out_path("odd.gguf"), "wb");
    CHECK(f && fwrite(file, 1, size, f) == size, "write odd.gguf");
    if (f) fclose(f);
    free(file);
    CHECK(eli_quantize_file(out_path("odd.gguf"), out_path("y.gguf"), q4, 1, NULL, &err) == ELI_ERR_INVALID_ARG &&
              strstr(err.msg, "blk.0.attn_q.weight") && strstr(err.msg, "48") && access(out_path("y.gguf"), F_OK) != 0,
          "rows of 48: %s", err.msg);
    /* the same file in f16 works (no blocks) */
    CHECK(eli_quantize_file(out_path("odd.gguf"), out_path("y.gguf"), eli_qftype_find("f16"), 1, NULL, &err) == 0, "%s", err.msg);
}

static void check_cli(void) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s quantize %s %s q4_0 --threads 2 > %s 2>&1", ELI_CLI,
             eli_shared_path("golden/models/e2b-mini-f32.gguf"), out_path("cli.gguf"), out_path("cli.txt"));
    CHECK(system(cmd) == 0 && same_file(out_path("cli.gguf"), eli_shared_path("golden/models/e2b-mini-q4_0.gguf")),
          "eliza-infer quantize ... q4_0");
    snprintf(cmd, sizeof cmd, "%s quantize %s %s q9_9 > /dev/null 2>&1", ELI_CLI,
             eli_shared_path("golden/models/e2b-mini-f32.gguf"), out_path("bad.gguf"));
    CHECK(system(cmd) != 0 && access(out_path("bad.gguf"), F_OK) != 0, "unknown type");
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/eli_test_quantize.%d", (int)getpid());
    mkdir(tmpdir, 0700);
    check_golden_files();
    check_reference_sums();
    check_threads();
    check_refusals();
    check_cli();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    CHECK(system(cmd) == 0, "cleanup");
    TEST_MAIN_END();
}
