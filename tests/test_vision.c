/* The vision tower against llama.cpp's mtmd (src/image.c, src/vision.c):
 *  - image decoding: PNG / JPEG / WebP fixtures (tests/data/mm/images, tools/mm/make_test_images.py) against
 *    the pixels they must give, EXIF orientation, and hostile files (every truncation, corrupt bytes,
 *    huge dimensions, other formats) that must fail with a message;
 *  - preprocessing: the resized image byte-identical to mtmd's (hashes in tests/data/mm/preproc.txt);
 *  - embeddings: the golden projector (../shared/golden/mm) and our random projectors (tests/data/mm:
 *    F16 + GELU + shared clamps, Q8_0 + pooling 2 + std + out scale, F32 + GQA + patch 8, SiLU, no gate), n_tokens and
 *    the preprocessed size exact, values within the bounds of issue 18 or tighter;
 *  - hostile projectors for the vision binder. */
#include <math.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gguf.h"
#include "mmproj_edit.h"
#include "image.h"
#include "mmproj.h"
#include "test.h"
#include "test_exec.h"
#include "vision.h"

#define DATA ELI_SOURCE_DIR "/tests/data/mm/"
#define GOLDEN_MMPROJ "golden/mm/mmproj-gemma4-a.gguf"

static uint8_t *read_all(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc(len > 0 ? (size_t)len : 1);
    *n = b ? fread(b, 1, (size_t)len, f) : 0;
    fclose(f);
    return b;
}

/* A binary PPM (P6, maxval 255) as an image. */
static int read_ppm(const char *path, eli_image *img) {
    size_t n;
    uint8_t *b = read_all(path, &n);
    int w, h, mx, off = 0;
    if (!b || sscanf((const char *)b, "P6 %d %d %d%n", &w, &h, &mx, &off) != 3 || mx != 255 ||
        (size_t)off + 1 + (size_t)w * h * 3 != n || eli_image_alloc(img, w, h, NULL)) {
        free(b);
        return -1;
    }
    memcpy(img->rgb, b + off + 1, (size_t)w * h * 3);
    free(b);
    return 0;
}

static int same_image(const eli_image *a, const eli_image *b) {
    return a->w == b->w && a->h == b->h && !memcmp(a->rgb, b->rgb, (size_t)a->w * a->h * 3);
}

/* ---- decoding ---- */

static void test_decode(void) {
    static const struct {
        const char *file, *want;
    } cases[] = {
        {"rgb8.png", "src.want.ppm"},     {"rgba16.png", "src.want.ppm"},     {"gray8.png", "gray8.want.ppm"},
        {"gray2.png", "gray2.want.ppm"},  {"palette.png", "palette.want.ppm"}, {"interlaced.png", "src.want.ppm"},
        {"exif8.png", "exif8.want.ppm"},  {"rgb.jpg", "rgb.jpg.want.ppm"},   {"gray.jpg", "gray.jpg.want.ppm"},
        {"exif6.jpg", "exif6.want.ppm"},  {"lossless.webp", "src.want.ppm"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        eli_image got, want;
        eli_error err = {0};
        char path[512];
        snprintf(path, sizeof path, DATA "images/%s", cases[i].want);
        CHECK(read_ppm(path, &want) == 0, "%s unreadable", path);
        snprintf(path, sizeof path, DATA "images/%s", cases[i].file);
        const int rc = eli_image_load(path, &got, &err);
        CHECK(rc == ELI_OK, "%s: %s", cases[i].file, err.msg);
        CHECK(!rc && same_image(&got, &want), "%s: %dx%d, expected the pixels of %s (%dx%d)", cases[i].file, got.w, got.h,
              cases[i].want, want.w, want.h);
        eli_image_free(&got);
        eli_image_free(&want);
    }
}

/* Every proper prefix of every fixture fails cleanly; corrupt bytes never crash (ASan checks the reads). */
static void test_truncated_and_corrupt(void) {
    static const char *const files[] = {"rgb8.png", "rgba16.png", "palette.png", "interlaced.png",
                                        "rgb.jpg",  "exif6.jpg",  "lossless.webp"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char path[512];
        snprintf(path, sizeof path, DATA "images/%s", files[i]);
        size_t n;
        uint8_t *b = read_all(path, &n);
        CHECK(b && n > 0, "%s", path);
        if (!b) continue;
        int bad = 0;
        for (size_t len = 0; len < n; len++) {
            uint8_t *cut = malloc(len ? len : 1); /* exactly len bytes: ASan sees any over-read */
            memcpy(cut, b, len);
            eli_image img;
            eli_error err = {0};
            const int rc = eli_image_decode(cut, len, &img, &err);
            if (rc >= 0 || !err.msg[0] || img.rgb) bad++;
            eli_image_free(&img);
            free(cut);
        }
        CHECK(bad == 0, "%s: %d truncations decoded or failed without a message", files[i], bad);
        uint32_t s = 99;
        for (int trial = 0; trial < 200; trial++) {
            uint8_t *c = malloc(n);
            memcpy(c, b, n);
            for (int k = 0; k < 3; k++) {
                s = s * 1103515245u + 12345u;
                c[(s >> 8) % n] ^= (uint8_t)(1 + (s >> 20) % 255);
            }
            eli_image img;
            eli_error err = {0};
            if (eli_image_decode(c, n, &img, &err) == ELI_OK)
                CHECK(img.w > 0 && img.h > 0 && img.rgb, "a corrupt file that decodes gives an image");
            else
                CHECK(err.msg[0] && !img.rgb, "a failure comes with a message");
            eli_image_free(&img);
            free(c);
        }
        free(b);
    }
}

static uint32_t crc32_of(const uint8_t *p, size_t n) {
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) c = c >> 1 ^ (0xEDB88320u & (0u - (c & 1)));
    }
    return ~c;
}

static void put_be32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8), p[3] = (uint8_t)v;
}

static void expect_fail(const uint8_t *b, size_t n, const char *want, const char *what) {
    eli_image img;
    eli_error err = {0};
    const int rc = eli_image_decode(b, n, &img, &err);
    CHECK(rc < 0 && strstr(err.msg, want) && !img.rgb, "%s: rc %d, message '%s', expected '%s'", what, rc, err.msg, want);
    eli_image_free(&img);
}

/* Decompression bombs are refused from the header, before any pixel is allocated. */
static void test_limits(void) {
    size_t n;
    uint8_t *png = read_all(DATA "images/rgb8.png", &n);
    static const uint32_t dims[][2] = {{100000, 100000}, {20000, 10}, {8192, 8193}};
    for (size_t i = 0; png && i < sizeof dims / sizeof dims[0]; i++) {
        put_be32(png + 16, dims[i][0]); /* IHDR data starts at 16: width, height */
        put_be32(png + 20, dims[i][1]);
        put_be32(png + 29, crc32_of(png + 12, 17));
        eli_image img;
        eli_error err = {0};
        const int rc = eli_image_decode(png, n, &img, &err);
        CHECK(rc < 0 && (strstr(err.msg, "limit") || strstr(err.msg, "outside")), "PNG %ux%u: '%s'", dims[i][0], dims[i][1],
              err.msg);
        eli_image_free(&img);
    }
    free(png);
    uint8_t *jpg = read_all(DATA "images/rgb.jpg", &n);
    for (size_t i = 0; jpg && i + 9 < n; i++)
        if (jpg[i] == 0xFF && jpg[i + 1] == 0xC0) { /* SOF0: length, precision, height, width */
            jpg[i + 5] = jpg[i + 6] = jpg[i + 7] = jpg[i + 8] = 0xEA;
            expect_fail(jpg, n, "outside the limits", "JPEG 60138x60138");
            break;
        }
    free(jpg);
    expect_fail((const uint8_t *)"GIF89a\x01\0\x01\0\0\0\0;", 14, "GIF image format", "GIF");
    expect_fail((const uint8_t *)"BM\0\0\0\0\0\0\0\0\0\0\0\0", 14, "BMP image format", "BMP");
    expect_fail((const uint8_t *)"hello, world, not an image", 26, "unrecognised image format", "text");
    expect_fail((const uint8_t *)"\x89PNG", 4, "too short", "4 bytes");
    eli_image img;
    eli_error err = {0};
    CHECK(eli_image_load("/nonexistent/x.png", &img, &err) < 0 && strstr(err.msg, "/nonexistent/x.png"), "%s", err.msg);
}

/* ---- EXIF ---- */

static void test_exif(void) {
    /* a minimal little-endian block with orientation 6, then hostile variants of it */
    uint8_t t[26] = {'I', 'I', 42, 0, 8, 0, 0, 0, 1, 0, 0x12, 0x01, 3, 0, 1, 0, 0, 0, 6, 0, 0, 0, 0, 0, 0, 0};
    CHECK(eli_exif_orientation(t, sizeof t) == 6, "LE orientation");
    int bad = 0;
    for (size_t len = 0; len < 22; len++) {
        uint8_t *cut = malloc(len ? len : 1);
        memcpy(cut, t, len);
        bad += eli_exif_orientation(cut, len) != 1;
        free(cut);
    }
    CHECK(!bad, "truncated blocks give 1 (%d did not)", bad);
    uint8_t h[26];
    memcpy(h, t, sizeof h);
    h[18] = 9;
    CHECK(eli_exif_orientation(h, sizeof h) == 1, "orientation 9 ignored");
    memcpy(h, t, sizeof h), h[12] = 4; /* LONG instead of SHORT */
    CHECK(eli_exif_orientation(h, sizeof h) == 1, "wrong type ignored");
    memcpy(h, t, sizeof h), h[4] = 0xF0, h[7] = 0x7F; /* IFD far outside */
    CHECK(eli_exif_orientation(h, sizeof h) == 1, "IFD offset outside");
    memcpy(h, t, sizeof h), h[8] = 0xFF, h[9] = 0xFF, h[10] = 0; /* 65535 entries in a 26-byte block */
    CHECK(eli_exif_orientation(h, sizeof h) == 1, "entry count beyond the block");
    memcpy(h, t, sizeof h), h[2] = 43;
    CHECK(eli_exif_orientation(h, sizeof h) == 1, "bad magic");
    CHECK(eli_exif_orientation(NULL, 0) == 1, "NULL");

    /* orientations as a group: 2, 3, 4, 5, 7 are involutions, 6 and 8 inverses, 6 twice is 3 */
    eli_image a;
    eli_image_alloc(&a, 5, 3, NULL);
    for (int i = 0; i < 45; i++) a.rgb[i] = (uint8_t)(i * 7 + 1);
    static const int seq[][3] = {{2, 2, 0}, {3, 3, 0}, {4, 4, 0}, {5, 5, 0}, {7, 7, 0}, {6, 8, 0}, {8, 6, 0}, {6, 6, 3}};
    for (size_t i = 0; i < sizeof seq / sizeof seq[0]; i++) {
        eli_image b;
        eli_image_alloc(&b, a.w, a.h, NULL);
        memcpy(b.rgb, a.rgb, 45);
        eli_image_orient(&b, seq[i][0], NULL);
        CHECK((seq[i][0] >= 5) == (b.w == 3), "orientation %d sides", seq[i][0]);
        eli_image_orient(&b, seq[i][1], NULL);
        eli_image_orient(&b, seq[i][2], NULL);
        CHECK(same_image(&a, &b), "orientations %d, %d, %d compose to the identity", seq[i][0], seq[i][1], seq[i][2]);
        eli_image_free(&b);
    }
    eli_image_free(&a);
}

/* ---- preprocessing and embeddings ---- */

static uint64_t fnv1a(const uint8_t *p, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

static const char *projector_path(const char *name) {
    static char buf[512];
    if (!strcmp(name, "golden")) return eli_shared_path(GOLDEN_MMPROJ);
    snprintf(buf, sizeof buf, DATA "%s", name);
    return buf;
}

static void test_preproc(void) {
    FILE *f = fopen(DATA "preproc.txt", "r");
    CHECK(f != NULL, "preproc.txt");
    char line[512], proj[128], img[128];
    int n = 0;
    while (f && fgets(line, sizeof line, f)) {
        int w, h;
        unsigned long long want;
        if (line[0] == '#' || sscanf(line, "%127s %127s %d %d %llx", proj, img, &w, &h, &want) != 5) continue;
        eli_error err = {0};
        eli_mmproj *p = eli_mmproj_open(projector_path(proj), &err);
        eli_vision *v = p ? eli_vision_load(p, &err) : NULL;
        char path[512];
        snprintf(path, sizeof path, "golden/mm/inputs/%s.png", img);
        eli_image src, pre;
        CHECK(v && eli_image_load(eli_shared_path(path), &src, &err) == ELI_OK, "%s %s: %s", proj, img, err.msg);
        if (v && src.rgb) {
            CHECK(eli_vision_preprocess(v, &src, &pre, &err) == ELI_OK, "%s", err.msg);
            CHECK(pre.w == w && pre.h == h, "%s %s: %dx%d, llama.cpp %dx%d", proj, img, pre.w, pre.h, w, h);
            CHECK(pre.rgb && fnv1a(pre.rgb, (size_t)pre.w * pre.h * 3) == want, "%s %s: resized image differs from llama.cpp's",
                  proj, img);
            eli_image_free(&pre);
            n++;
        }
        eli_image_free(&src);
        eli_vision_free(v);
        eli_mmproj_free(p);
    }
    if (f) fclose(f);
    CHECK(n == 8, "%d preprocessed images checked", n);
}

typedef struct {
    const char *proj, *image, *ref; /* ref: relative to ../shared (golden) or tests/data/mm */
    int golden, n_tokens, w, h;
    double rel, max; /* bounds */
} embd_case;

static void check_embd(const embd_case *c, int threads) {
    eli_error err = {0};
    test_tower tt;
    const int opened = !test_tower_open(projector_path(c->proj), ELI_MM_VISION, threads, &tt, &err);
    char path[512];
    snprintf(path, sizeof path, "golden/mm/inputs/%s.png", c->image);
    eli_image img;
    eli_vision_embd e = {0};
    int rc = opened ? eli_image_load(eli_shared_path(path), &img, &err) : -1;
    if (!rc) rc = eli_vision_encode(tt.t, &img, &e, &err);
    CHECK(rc == ELI_OK, "%s %s: %s", c->proj, c->image, err.msg);
    if (!rc) {
        CHECK(e.n_tokens == c->n_tokens && e.width == c->w && e.height == c->h && e.n_embd == 256 &&
                  e.grid_w * e.grid_h == e.n_tokens,
              "%s %s: %d tokens %dx%d, llama.cpp %d tokens %dx%d", c->proj, c->image, e.n_tokens, e.width, e.height,
              c->n_tokens, c->w, c->h);
        if (c->golden) snprintf(path, sizeof path, "%s/%s", ELI_SHARED_DIR, c->ref);
        else snprintf(path, sizeof path, DATA "%s", c->ref);
        size_t n;
        float *ref = (float *)read_all(path, &n);
        CHECK(ref && n == (size_t)e.n_tokens * e.n_embd * sizeof(float), "%s: %zu bytes", path, ref ? n : 0);
        if (ref && n == (size_t)e.n_tokens * e.n_embd * sizeof(float)) {
            double d2 = 0, r2 = 0, mx = 0;
            for (size_t i = 0; i < n / sizeof(float); i++) {
                const double d = (double)e.embd[i] - ref[i];
                d2 += d * d, r2 += (double)ref[i] * ref[i], mx = fabs(d) > mx ? fabs(d) : mx;
            }
            const double rel = sqrt(d2 / r2);
            CHECK(rel <= c->rel && mx <= c->max, "%s %s: rel RMS %.3g (bound %.3g), max |diff| %.3g (bound %.3g)", c->proj,
                  c->image, rel, c->rel, mx, c->max);
            printf("  %-20s %-24s rel RMS %.2e  max |diff| %.2e\n", c->proj, c->image, rel, mx);
        }
        free(ref);
        eli_image_free(&img);
    }
    eli_vision_embd_free(&e);
    test_tower_close(&tt);
}

static void test_embeddings(void) {
    static const embd_case cases[] = {
        {"golden", "img1_gradient_200x150", "golden/mm/ref/a__img1_gradient_200x150.embd.f32", 1, 48, 384, 288, 1e-4, 1e-3},
        {"golden", "img2_checker_512x512", "golden/mm/ref/a__img2_checker_512x512.embd.f32", 1, 121, 528, 528, 1e-4, 1e-3},
        {"golden", "img3_noise_1000x333", "golden/mm/ref/a__img3_noise_1000x333.embd.f32", 1, 147, 1008, 336, 1e-4, 1e-3},
        {"golden", "img4_rings_1600x1200", "golden/mm/ref/a__img4_rings_1600x1200.embd.f32", 1, 266, 912, 672, 1e-4, 1e-3},
        {"mmproj-b-f16.gguf", "img1_gradient_200x150", "b-f16__img1_gradient_200x150.embd.f32", 0, 48, 384, 288, 1e-3, 5e-3},
        {"mmproj-b-f16.gguf", "img3_noise_1000x333", "b-f16__img3_noise_1000x333.embd.f32", 0, 147, 1008, 336, 1e-3, 5e-3},
        {"mmproj-c-q8_0.gguf", "img1_gradient_200x150", "c-q8_0__img1_gradient_200x150.embd.f32", 0, 48, 256, 192, 2e-3, 2e-2},
        {"mmproj-d-gqa.gguf", "img1_gradient_200x150", "d-gqa__img1_gradient_200x150.embd.f32", 0, 48, 192, 144, 1e-4, 1e-3},
        {"mmproj-d-gqa.gguf", "img2_checker_512x512", "d-gqa__img2_checker_512x512.embd.f32", 0, 256, 384, 384, 1e-4, 1e-3},
        {"mmproj-e-silu.gguf", "img1_gradient_200x150", "e-silu__img1_gradient_200x150.embd.f32", 0, 48, 384, 288, 1e-4, 1e-3},
        {"mmproj-f-nogate.gguf", "img1_gradient_200x150", "f-nogate__img1_gradient_200x150.embd.f32", 0, 48, 384, 288, 1e-3, 5e-3},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_embd(&cases[i], i % 2 ? 2 : 1);
}

/* The thread count changes nothing: every matmul row and softmax row is computed the same way by any thread. */
static void test_threads(void) {
    eli_error err = {0};
    test_tower tt;
    const int opened = !test_tower_open(DATA "mmproj-b-f16.gguf", ELI_MM_VISION, 1, &tt, &err);
    eli_image img = {0};
    CHECK(opened && eli_image_load(eli_shared_path("golden/mm/inputs/img1_gradient_200x150.png"), &img, &err) == ELI_OK, "%s",
          err.msg);
    if (opened && img.rgb) {
        eli_vision_embd a = {0}, b = {0};
        CHECK(eli_vision_encode(tt.t, &img, &a, &err) == ELI_OK && test_tower_prepare(&tt, 3, &err) == ELI_OK &&
                  eli_vision_encode(tt.t, &img, &b, &err) == ELI_OK,
              "%s", err.msg);
        CHECK(a.embd && b.embd && !memcmp(a.embd, b.embd, (size_t)a.n_tokens * a.n_embd * sizeof(float)),
              "1 and 3 threads give the same bits");
        eli_vision_embd_free(&a);
        eli_vision_embd_free(&b);
        eli_image_free(&img);
    }
    test_tower_close(&tt);
}

/* ---- hostile projectors (vision binder) ---- */

static void e_no_patch(edit *e) { drop_tensor(e, "v.patch_embd.weight"); }
static void e_patch_shape(edit *e) { reshape(e, "v.patch_embd.weight", 4, 16, 16, 4); }
static void e_no_pos(edit *e) { drop_tensor(e, "v.position_embd.weight"); }
static void e_pos_shape(edit *e) { reshape(e, "v.position_embd.weight", 3, 96, 128, 3); }
static void e_std_zero(edit *e) {
    gw_buf *b = set_key(e, "clip.vision.image_std", GGUF_VT_ARRAY);
    gw_arr(b, GGUF_VT_FLOAT32, 3);
    gw_f32(b, 1), gw_f32(b, 0), gw_f32(b, 1);
}
static void e_no_mean(edit *e) { drop_key(e, "clip.vision.image_mean"); }
static void e_gelu_silu(edit *e) {
    gw_u8(set_key(e, "clip.use_gelu", GGUF_VT_BOOL), 1);
    gw_u8(set_key(e, "clip.use_silu", GGUF_VT_BOOL), 1);
}
static void e_type(edit *e) { set_str(e, "clip.vision.projector_type", "gemma3"); }
static void e_proj_dim(edit *e) { set_u32(e, "clip.vision.projection_dim", 255); }
static void e_qkv(edit *e) { add_tensor(e, "v.blk.1.attn_qkv.weight", 2, 96, 288, 1); }
static void e_no_down(edit *e) { drop_tensor(e, "v.blk.1.ffn_down.weight"); }
static void e_qnorm(edit *e) { reshape(e, "v.blk.0.attn_q_norm.weight", 1, 31, 1, 1); }
static void e_patch_size(edit *e) { set_u32(e, "clip.vision.patch_size", 0); }
static void e_merge(edit *e) { set_u32(e, "clip.vision.projector.scale_factor", 1000); }
static void e_pos_nan(edit *e) { fill(e, "v.position_embd.weight", NAN); }
static void e_token_side(edit *e) {
    set_u32(e, "clip.vision.patch_size", 200);
    set_u32(e, "clip.vision.projector.scale_factor", 64);
}
static void e_head_dim(edit *e) { set_u32(e, "clip.vision.attention.head_dim", 30); }

static void test_hostile_projectors(void) {
    static const struct {
        edit_fn fn;
        const char *want;
    } cases[] = {
        {e_no_patch, "missing tensor 'v.patch_embd.weight'"},
        {e_patch_shape, "'v.patch_embd.weight' has shape"},
        {e_no_pos, "missing tensor 'v.position_embd.weight'"},
        {e_pos_shape, "'v.position_embd.weight' has shape"},
        {e_std_zero, "image_std'[1] is 0"},
        {e_no_mean, "clip.vision.image_mean"},
        {e_gelu_silu, "both clip.use_gelu and clip.use_silu"},
        {e_type, "'gemma3' is not supported"},
        {e_proj_dim, "'mm.input_projection.weight' has shape"},
        {e_qkv, "fused QKV"},
        {e_no_down, "missing tensor 'v.blk.1.ffn_down.weight'"},
        {e_qnorm, "'v.blk.0.attn_q_norm.weight' has shape"},
        {e_patch_size, "clip.vision.patch_size"},
        {e_merge, "scale_factor"},
        {e_pos_nan, "not finite"},
        {e_token_side, "exceeds 1024"},
        {e_head_dim, "not a multiple of 4"},
    };
    eli_error err = {0};
    eli_gguf_file *src = eli_gguf_open(eli_shared_path(GOLDEN_MMPROJ), &err);
    CHECK(src != NULL, "%s", err.msg);
    for (size_t i = 0; src && i < sizeof cases / sizeof cases[0]; i++) {
        uint8_t *buf;
        eli_mmproj *p = mmproj_edited(src, cases[i].fn, &buf, &err);
        eli_vision *v = p ? eli_vision_load(p, &err) : NULL;
        CHECK(!v && strstr(err.msg, cases[i].want), "case %zu: message '%s', expected '%s'", i, err.msg, cases[i].want);
        eli_vision_free(v);
        eli_mmproj_free(p);
        free(buf);
    }
    eli_gguf_close(src);
    /* an image wider than the position table: a clear error (llama.cpp aborts) */
    test_tower tt;
    eli_image img;
    eli_vision_embd e;
    if (!test_tower_open(DATA "mmproj-d-gqa.gguf", ELI_MM_VISION, 1, &tt, &err) &&
        !eli_image_load(eli_shared_path("golden/mm/inputs/img3_noise_1000x333.png"), &img, &err)) {
        CHECK(eli_vision_encode(tt.t, &img, &e, &err) < 0 && strstr(err.msg, "the position table has 64"), "%s", err.msg);
        eli_image_free(&img);
    } else {
        CHECK(0, "%s", err.msg);
    }
    test_tower_close(&tt);
}

/* ---- the CLI ---- */

/* Runs an eliza-infer command line; its stdout into out (NUL-terminated), returns the exit status. */
static int run_cli(const char *args, char *out, size_t cap) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s' %s 2>/dev/null", ELI_CLI, args);
    FILE *p = popen(cmd, "r");
    size_t n = p ? fread(out, 1, cap - 1, p) : 0;
    out[n] = '\0';
    const int st = p ? pclose(p) : -1;
    return st >= 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* embed-image writes exactly what eli_vision_encode returns and prints "n_tokens WxH"; bench-image prints its
 * times; a bad image is exit status 1 with nothing written. */
static void test_cli(void) {
    char out_path[] = "/tmp/eli_test_vision_XXXXXX";
    const int fd = mkstemp(out_path);
    CHECK(fd >= 0, "mkstemp");
    if (fd < 0) return;
    close(fd);
    const char *proj = eli_shared_path(GOLDEN_MMPROJ), *img = eli_shared_path("golden/mm/inputs/img1_gradient_200x150.png");
    char args[1536], out[1024];
    snprintf(args, sizeof args, "embed-image --mmproj '%s' --image '%s' -t 2 -o '%s'", proj, img, out_path);
    CHECK(run_cli(args, out, sizeof out) == 0 && !strcmp(out, "48 384x288\n"), "embed-image printed '%s'", out);
    size_t n;
    float *got = (float *)read_all(out_path, &n);
    eli_error err = {0};
    test_tower tt;
    eli_image im;
    eli_vision_embd e = {0};
    if (!test_tower_open(proj, ELI_MM_VISION, 1, &tt, &err) && !eli_image_load(img, &im, &err)) {
        CHECK(eli_vision_encode(tt.t, &im, &e, &err) == ELI_OK, "%s", err.msg);
        eli_image_free(&im);
    }
    CHECK(got && e.embd && n == (size_t)e.n_tokens * e.n_embd * sizeof(float) && !memcmp(got, e.embd, n),
          "embed-image wrote %zu bytes, the library's embeddings are %zu", got ? n : 0,
          (size_t)e.n_tokens * e.n_embd * sizeof(float));
    free(got);
    eli_vision_embd_free(&e);
    test_tower_close(&tt);
    snprintf(args, sizeof args, "bench-image --mmproj '%s' --image '%s' --reps 2", proj, img);
    CHECK(run_cli(args, out, sizeof out) == 0 && strstr(out, "48 tokens") && strstr(out, "encode ms median"), "bench-image: '%s'",
          out);
    unlink(out_path);
    snprintf(args, sizeof args, "embed-image --mmproj '%s' --image '%s' -o '%s'", proj, DATA "preproc.txt", out_path);
    CHECK(run_cli(args, out, sizeof out) == 1 && access(out_path, F_OK) != 0, "a text file as image: exit 1, no output");
    snprintf(args, sizeof args, "embed-image --mmproj '%s' --image '%s'", proj, img);
    CHECK(run_cli(args, out, sizeof out) == 2, "embed-image without -o: usage");
}

int main(void) {
    if (!eli_vision_available()) {
        eli_image img;
        eli_error err = {0};
        CHECK(eli_image_decode("\x89PNG\r\n\x1a\n....", 12, &img, &err) == ELI_ERR_NOT_IMPLEMENTED, "%s", err.msg);
        printf("vision compiled out (ELI_VISION=OFF): only the probe is checked\n");
        TEST_MAIN_END();
    }
    test_decode();
    test_truncated_and_corrupt();
    test_limits();
    test_exif();
    test_preproc();
    test_embeddings();
    test_threads();
    test_hostile_projectors();
    test_cli();
    TEST_MAIN_END();
}
