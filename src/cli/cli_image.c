/* eliza-infer embed-image --mmproj FILE --image IMG [-t N] -o OUT.f32
 *   writes the projected soft-token embeddings as raw little-endian float32 [n_tokens][n_embd] and prints
 *   "n_tokens WxH" (the preprocessed size);
 * eliza-infer bench-image --mmproj FILE --image IMG [-t N] [--reps R]
 *   encodes the image R times (after one warm-up) and prints the encode time: median, min, max. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "fileio.h"
#include "vision.h"

typedef struct {
    const char *mmproj, *image, *out;
    int threads, reps;
} image_args;

static int usage(const char *cmd) {
    if (!strcmp(cmd, "embed-image"))
        fprintf(stderr, "usage: eliza-infer embed-image --mmproj FILE --image IMG [-t THREADS] -o OUT.f32\n");
    else
        fprintf(stderr, "usage: eliza-infer bench-image --mmproj FILE --image IMG [-t THREADS] [--reps R]\n");
    return 2;
}

static int parse(const char *cmd, int argc, char **argv, image_args *a) {
    *a = (image_args){.threads = 1, .reps = 5};
    const int bench = !strcmp(cmd, "bench-image");
    for (int i = 1; i < argc; i += 2) { /* every option takes a value */
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long long x;
        if (!strcmp(o, "--help")) return usage(cmd), 0;
        if (!v) return cli_bad_option(cmd, o, 0);
        if (!strcmp(o, "--mmproj")) a->mmproj = v;
        else if (!strcmp(o, "--image")) a->image = v;
        else if (!bench && (!strcmp(o, "-o") || !strcmp(o, "--output"))) a->out = v;
        else if (!strcmp(o, "-t") || !strcmp(o, "--threads")) {
            if (cli_parse_int(o, v, 1, 1024, &x)) return 2;
            a->threads = (int)x;
        } else if (bench && !strcmp(o, "--reps")) {
            if (cli_parse_int(o, v, 1, 100000, &x)) return 2;
            a->reps = (int)x;
        } else return cli_bad_option(cmd, o, 1);
    }
    if (!a->mmproj || !a->image || (!bench && !a->out)) return usage(cmd);
    return -1;
}

typedef struct {
    cli_tower tower;
    eli_image img;
} image_session;

static void session_free(image_session *s) {
    eli_image_free(&s->img);
    cli_tower_close(&s->tower);
}

static int session_open(const image_args *a, image_session *s) {
    memset(s, 0, sizeof *s);
    eli_error err = {0};
    if (cli_tower_open(a->mmproj, ELI_MM_VISION, a->threads, &s->tower)) return 1;
    if (eli_image_load(a->image, &s->img, &err)) {
        session_free(s);
        return cli_die("%s", err.msg);
    }
    return 0;
}

static int cmp_double(const void *x, const void *y) {
    const double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

int cli_embed_image(int argc, char **argv) {
    image_args a;
    int rc = parse("embed-image", argc, argv, &a);
    if (rc >= 0) return rc;
    image_session s;
    if (session_open(&a, &s)) return 1;
    eli_error err = {0};
    eli_vision_embd e;
    if (eli_vision_encode(s.tower.xt, &s.img, &e, &err) ||
        eli_write_file_atomic(a.out, e.embd, (size_t)e.n_tokens * e.n_embd * sizeof(float), &err)) {
        rc = cli_die("%s", err.msg);
    } else {
        printf("%d %dx%d\n", e.n_tokens, e.width, e.height);
        rc = 0;
    }
    eli_vision_embd_free(&e);
    session_free(&s);
    return rc;
}

int cli_bench_image(int argc, char **argv) {
    image_args a;
    int rc = parse("bench-image", argc, argv, &a);
    if (rc >= 0) return rc;
    image_session s;
    if (session_open(&a, &s)) return 1;
    double *ms = malloc((size_t)a.reps * sizeof *ms);
    eli_error err = {0};
    int w = 0, h = 0, n = 0;
    rc = ms ? 0 : cli_die("out of memory");
    for (int r = -1; !rc && r < a.reps; r++) { /* r = -1: the warm-up (page faults, thread start) */
        eli_vision_embd e;
        const double t0 = cli_now();
        if (eli_vision_encode(s.tower.xt, &s.img, &e, &err)) rc = cli_die("%s", err.msg);
        if (r >= 0) ms[r] = (cli_now() - t0) * 1e3;
        w = e.width, h = e.height, n = e.n_tokens;
        eli_vision_embd_free(&e);
    }
    if (!rc) {
        qsort(ms, (size_t)a.reps, sizeof *ms, cmp_double);
        const double med = a.reps % 2 ? ms[a.reps / 2] : (ms[a.reps / 2 - 1] + ms[a.reps / 2]) / 2;
        printf("image %dx%d, %d tokens, %d threads, %d reps: encode ms median %.1f min %.1f max %.1f\n", w, h, n, a.threads,
               a.reps, med, ms[0], ms[a.reps - 1]);
    }
    free(ms);
    session_free(&s);
    return rc;
}
