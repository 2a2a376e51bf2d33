/* eliza-infer bench -m FILE [-p 512] [-n 128] [-t N] [--depth D] [--kv f16|f32] [--reference] [--json]
 *
 * Prefill: one batch of p random tokens from an empty cache (tok/s; its wall time is the time to first
 * token, since the batch returns the logits of its last position). Decode: n tokens one at a time after
 * D tokens already in the cache (tok/s). Weight bytes, the bytes a decode step reads (every matrix once,
 * one row of each embedding table, plus the K/V it attends to), the achieved GB/s, and a memory-read
 * bandwidth probe with the same thread count (the roofline). Peak RSS from getrusage and VmHWM. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "forward.h"
#ifndef ELI_BENCH_BASELINE
#include "kernels.h"
#endif
#include "quants.h"
#include "threadpool.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int usage(void) {
    fprintf(stderr, "usage: eliza-infer bench -m FILE [-p 512] [-n 128] [-t THREADS] [--depth D] [--kv f16|f32]\n"
                    "                         [--reference] [--json]\n"
                    "  -p N         prompt tokens for the prefill measurement (0 = skip)\n"
                    "  -n N         tokens decoded one at a time (0 = skip)\n"
                    "  --depth D    tokens already in the KV cache when decoding starts\n"
                    "  --reference  scalar reference kernels (the \"reference\" backend)\n");
    return 2;
}

/* ---- memory bandwidth probe: every thread sums its slice of a buffer much larger than the caches ---- */

typedef struct {
    const uint64_t *buf;
    size_t n;
    uint64_t sums[256];
} bw_job;

static void bw_task(void *ctx, int ith, int nth) {
    bw_job *j = ctx;
    int64_t b, e;
    eli_split((int64_t)j->n / 8, ith, nth, &b, &e);
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0, s4 = 0, s5 = 0, s6 = 0, s7 = 0;
    for (int64_t i = b * 8; i < e * 8; i += 8) {
        s0 += j->buf[i], s1 += j->buf[i + 1], s2 += j->buf[i + 2], s3 += j->buf[i + 3];
        s4 += j->buf[i + 4], s5 += j->buf[i + 5], s6 += j->buf[i + 6], s7 += j->buf[i + 7];
    }
    if (ith < 256) j->sums[ith] = s0 + s1 + s2 + s3 + s4 + s5 + s6 + s7;
}

static double bandwidth_probe(int threads) {
    const size_t bytes = (size_t)512 << 20;
    uint64_t *buf = malloc(bytes);
    eli_pool *pool = eli_pool_create(threads);
    if (!buf || !pool) {
        free(buf);
        eli_pool_free(pool);
        return 0;
    }
    for (size_t i = 0; i < bytes / 8; i++) buf[i] = i;
    bw_job j;
    memset(&j, 0, sizeof j);
    j.buf = buf;
    j.n = bytes / 8;
    double best = 0;
    for (int rep = 0; rep < 4; rep++) {
        double t0 = now_s();
        eli_pool_run(pool, bw_task, &j);
        double dt = now_s() - t0;
        double gbs = (double)bytes / dt / 1e9;
        if (gbs > best) best = gbs;
    }
    uint64_t sink = 0;
    for (int i = 0; i < 256; i++) sink += j.sums[i];
    if (sink == 42) fprintf(stderr, " ");
    free(buf);
    eli_pool_free(pool);
    return best;
}

static long peak_rss_kb(void) {
    long hwm = -1;
    FILE *f = fopen("/proc/self/status", "r");
    if (f) {
        char line[256];
        while (fgets(line, sizeof line, f))
            if (!strncmp(line, "VmHWM:", 6)) hwm = strtol(line + 6, NULL, 10);
        fclose(f);
    }
    if (hwm < 0) {
        struct rusage ru;
        if (!getrusage(RUSAGE_SELF, &ru)) hwm = ru.ru_maxrss;
    }
    return hwm;
}

static uint64_t weight_bytes_of(const eli_weight *w) {
    return w->data ? (uint64_t)w->row_bytes * (uint64_t)w->rows * (uint64_t)(w->n_mat > 0 ? w->n_mat : 1) : 0;
}

/* bytes one decode step reads at KV depth `depth`: all matrices (routed experts: only n_expert_used of
 * them), one row of each embedding table (the tied output head reads token_embd fully) and the K/V rows
 * that every layer attends to */
static double decode_bytes(const eli_model *m, int64_t depth, uint32_t kv_type) {
    const eli_hparams *hp = &m->hp;
    double b = 0;
    b += m->tied_output ? (double)weight_bytes_of(&m->token_embd) : (double)m->token_embd.row_bytes;
    if (!m->tied_output) b += (double)weight_bytes_of(&m->output);
    if (m->ple_token_embd.data) b += (double)m->ple_token_embd.row_bytes;
    b += (double)weight_bytes_of(&m->ple_model_proj);
    for (int il = 0; il < hp->n_layer; il++) {
        const eli_layer *l = &m->layers[il];
        const eli_weight *ws[] = {&l->wq, &l->wk, &l->wv, &l->wo, &l->ffn_gate, &l->ffn_up, &l->ffn_down,
                                  &l->gate_inp, &l->inp_gate, &l->proj};
        for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++) b += (double)weight_bytes_of(ws[i]);
        const eli_weight *ex[] = {&l->gate_up_exps, &l->gate_exps, &l->up_exps, &l->down_exps};
        for (size_t i = 0; i < sizeof ex / sizeof ex[0]; i++)
            if (ex[i]->data && ex[i]->n_mat > 0)
                b += (double)weight_bytes_of(ex[i]) / (double)ex[i]->n_mat * hp->n_expert_used;
        int64_t seen = depth + 1;
        if (l->is_swa && seen > hp->n_swa) seen = hp->n_swa;
        b += 2.0 * (double)seen * (double)eli_row_size(kv_type, (int64_t)l->n_head_kv * l->head_dim);
    }
    return b;
}

int cli_bench(int argc, char **argv) {
    const char *path = NULL;
    long long p = 512, n = 128, threads = 0, depth = 0;
    int json = 0, reference = 0;
    uint32_t kv = ELI_TYPE_F16;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) return usage(), 0;
        if (!strcmp(a, "-m")) path = i + 1 < argc ? argv[++i] : NULL;
        else if (!strcmp(a, "-p")) { if (cli_parse_int("-p", i + 1 < argc ? argv[++i] : NULL, 0, 1 << 20, &p)) return 2; }
        else if (!strcmp(a, "-n")) { if (cli_parse_int("-n", i + 1 < argc ? argv[++i] : NULL, 0, 1 << 20, &n)) return 2; }
        else if (!strcmp(a, "-t")) { if (cli_parse_int("-t", i + 1 < argc ? argv[++i] : NULL, 0, 1024, &threads)) return 2; }
        else if (!strcmp(a, "--depth")) { if (cli_parse_int("--depth", i + 1 < argc ? argv[++i] : NULL, 0, 1 << 22, &depth)) return 2; }
        else if (!strcmp(a, "--kv")) { if (cli_parse_kv_type(i + 1 < argc ? argv[++i] : NULL, &kv)) return 2; }
        else if (!strcmp(a, "--json")) json = 1;
        else if (!strcmp(a, "--reference")) reference = 1;
        else return cli_die("bench: unknown option '%s'", a), usage();
    }
    if (!path) return usage();
    if (threads == 0) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        threads = c > 0 ? c : 1;
    }
    eli_error err = {0};
    double t0 = now_s();
    eli_model *m = eli_model_load(path, &err);
    if (!m) return cli_die("%s", err.msg);
    const double load_s = now_s() - t0;
    const eli_hparams *hp = &m->hp;

    eli_context_params cp = eli_context_default_params();
    int64_t need = p > depth + n ? p : depth + n;
    cp.n_ctx = need + 1;
    cp.n_ubatch = 512;
    cp.kv_type = kv;
    cp.n_threads = (int)threads;
#ifndef ELI_BENCH_BASELINE
    cp.reference_kernels = reference;
    const char *kname = reference ? eli_kernels_reference()->name : eli_kernels_best()->name;
#else
    const char *kname = "baseline";
    (void)reference;
#endif
    if (cp.n_ctx > hp->n_ctx_train) {
        eli_model_free(m);
        return cli_die("bench: %lld positions exceed the model's context of %d", (long long)cp.n_ctx, hp->n_ctx_train);
    }
    eli_context *c = eli_context_create(m, &cp, &err);
    if (!c) {
        eli_model_free(m);
        return cli_die("%s", err.msg);
    }
    int64_t ntok = need > 0 ? need : 1;
    int32_t *toks = malloc(sizeof(int32_t) * (size_t)ntok);
    float *logits = malloc(sizeof(float) * (size_t)hp->n_vocab);
    if (!toks || !logits) return cli_die("out of memory");
    uint64_t rs = 0x2545F4914F6CDD1DULL;
    for (int64_t i = 0; i < ntok; i++) {
        rs ^= rs << 13, rs ^= rs >> 7, rs ^= rs << 17;
        toks[i] = (int32_t)(3 + rs % (uint64_t)(hp->n_vocab - 3));
    }
    toks[0] = 2; /* <bos> */

    /* warm-up: page the weights in and wake the pool */
    int rc = eli_decode(c, toks, 1, logits, 0, &err);
    double pp_s = 0, tg_s = 0;
    if (!rc && p > 0) {
        eli_context_reset(c);
        double t = now_s();
        rc = eli_decode(c, toks, p, logits, 0, &err);
        pp_s = now_s() - t;
    }
    if (!rc && n > 0) {
        eli_context_reset(c);
        if (depth > 0) rc = eli_decode(c, toks, depth, NULL, 0, &err);
        double t = now_s();
        for (long long i = 0; i < n && !rc; i++) rc = eli_decode(c, toks + depth + i, 1, logits, 0, &err);
        tg_s = now_s() - t;
    }
    if (rc) {
        free(toks), free(logits);
        eli_context_free(c);
        eli_model_free(m);
        return cli_die("decode: %s", err.msg);
    }
    const double bytes_tok = decode_bytes(m, depth + n / 2, kv);
    const long rss = peak_rss_kb(); /* before the probe's buffer */
    const double bw = bandwidth_probe((int)threads);
    const double pp_tps = p > 0 ? (double)p / pp_s : 0, tg_tps = n > 0 ? (double)n / tg_s : 0;
    const double gbs = tg_tps * bytes_tok / 1e9;
    if (json) {
        printf("{\"model\": \"%s\", \"kernels\": \"%s\", \"threads\": %lld, \"kv_type\": \"%s\", \"n_prompt\": %lld, "
               "\"n_gen\": %lld, \"depth\": %lld, \"load_s\": %.4f, \"prefill_tok_s\": %.3f, \"ttft_ms\": %.3f, "
               "\"decode_tok_s\": %.3f, \"decode_ms_per_tok\": %.3f, \"weight_bytes\": %llu, "
               "\"decode_bytes_per_tok\": %.0f, \"decode_gb_s\": %.3f, \"probe_gb_s\": %.3f, "
               "\"roofline_fraction\": %.4f, \"peak_rss_kb\": %ld}\n",
               path, kname, threads, eli_type_name(kv), p, n, depth, load_s, pp_tps, pp_s * 1e3, tg_tps,
               n > 0 ? tg_s * 1e3 / (double)n : 0, (unsigned long long)m->weight_bytes, bytes_tok, gbs, bw,
               bw > 0 ? gbs / bw : 0, rss);
    } else {
        printf("model            %s\n", path);
        printf("kernels          %s, %lld threads, %s KV cache\n", kname, threads, eli_type_name(kv));
        printf("weights          %.1f MiB (load %.3f s)\n", (double)m->weight_bytes / 1048576.0, load_s);
        if (p > 0) printf("prefill pp%-6lld %10.2f tok/s   (TTFT %.1f ms)\n", p, pp_tps, pp_s * 1e3);
        if (n > 0)
            printf("decode  tg%-6lld %10.2f tok/s   (%.2f ms/tok at depth %lld)\n", n, tg_tps, tg_s * 1e3 / (double)n,
                   depth);
        printf("decode bytes/tok %10.1f MiB\n", bytes_tok / 1048576.0);
        printf("decode bandwidth %10.2f GB/s   (probe %.2f GB/s, %.0f%% of it)\n", gbs, bw, bw > 0 ? 100 * gbs / bw : 0);
        printf("peak RSS         %10.1f MiB\n", (double)rss / 1024.0);
    }
    free(toks), free(logits);
    eli_context_free(c);
    eli_model_free(m);
    return 0;
}
