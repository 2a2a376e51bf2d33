/* eliza-infer bench -m FILE [-p 512] [-n 128] [-t N] [--depth D] [--kv TYPE] [--kv-k TYPE] [--kv-v TYPE] [--compare-kv TYPE]
 *                   [--reference] [--json]
 *
 * Prefill: one batch of p random tokens from an empty cache (tok/s; its wall time is the time to first
 * token, since the batch returns the logits of its last position). Decode: n tokens one at a time after
 * D tokens already in the cache (tok/s). With --compare-kv T a second cache of type T is filled with the same D
 * tokens and the n decode steps alternate between the two in blocks of 4 (the same tokens at the same depths,
 * the order swapped every block), so that a drift of the machine's speed falls on both alike. Weight bytes, the bytes a decode step reads (every matrix once,
 * one row of each embedding table, plus the K/V it attends to), the achieved GB/s, and a memory-read
 * bandwidth probe with the same thread count (the roofline). Peak RSS from getrusage and VmHWM.
 * With --draft FILE (a gemma4-assistant drafter), also greedy generation of n tokens from a real text
 * prompt with and without MTP, alternated --mtp-reps times: tok/s of both (medians), the speedup,
 * acceptance and the window the last run settled on; and the ceiling of MTP for every window w: verify
 * batches of w + 1 of the plain run's own tokens against plain steps, what a perfect, free drafter gives
 * (--mtp-ceiling: the plain runs and the ceiling alone, for a model without a drafter). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "cli.h"
#include "engine.h"
#include "kv_types.h"
#include "os.h"
#include "plan.h"
#include "quants.h"
#include "threadpool.h"

static int usage(void) {
    fprintf(stderr, "usage: eliza-infer bench -m FILE [-p 512] [-n 128] [-t THREADS] [--depth D] [--kv TYPE] [--kv-k TYPE]\n"
                    "                         [--kv-v TYPE]\n"
                    "                         [--reference] [--json]\n"
                    "  -p N         prompt tokens for the prefill measurement (0 = skip)\n"
                    "  -n N         tokens decoded one at a time (0 = skip)\n"
                    "  --depth D    tokens already in the KV cache when decoding starts\n"
                    "  --kv TYPE    KV cache type of K and V (f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 tbq4_0 tbq3_0 q4_polar;\n"
                    "               default f16); --kv-k / --kv-v set one of them (qjl1_256: K only)\n"
                    "  --compare-kv T  a second cache with K and V of type T, filled the same way; the decode steps\n"
                    "               alternate between the two in blocks of 4, both reported (and their ratio)\n"
                    "  --reference  scalar reference kernels (the \"reference\" backend)\n"
                    "  --draft FILE MTP: greedy generation with and without this drafter (--draft-max N, default 6;\n"
                    "               --prompt-file F, default a built-in English paragraph; --mtp-reps N alternated runs\n"
                    "               of each, default 3), and the ceiling: the speedup if every draft were right and free\n"
                    "  --mtp-ceiling the ceiling alone, without a drafter (windows 1..--draft-max)\n");
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
        double t0 = cli_now();
        eli_pool_run(pool, bw_task, &j);
        double dt = cli_now() - t0;
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
    long hwm = eli_os_proc_kb("/proc/self/status", "VmHWM");
    if (hwm < 0) { /* no procfs */
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
static double decode_bytes(const eli_model *m, int64_t depth, uint32_t kv_k, uint32_t kv_v) {
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
        b += (double)seen * (double)(eli_kv_row_bytes(kv_k, l->n_head_kv, l->head_dim) +
                                     eli_kv_row_bytes(kv_v, l->n_head_kv, l->head_dim));
    }
    return b;
}

/* ---- MTP: greedy generation with and without the drafter ---- */

const char cli_sample_text[] =
    "It was a bright cold morning in the early spring, and the road that ran along the river was still wet from the "
    "night's rain. The old house at the end of it had stood empty for many years, and the people of the village said";

#define MTP_REPS_MAX 99

typedef struct {
    int64_t prompt_tokens, drafted, accepted, rounds; /* counts summed over the MTP runs */
    int reps;
    double plain_tps, mtp_tps;   /* medians over the runs */
    double speedup, lo, hi;      /* median, least and greatest of the runs' MTP / plain ratios */
    int window, identical;       /* the last run's window; every run's output equal to plain greedy's */
    int n_ceiling;               /* = draft_max */
    double ceiling[64];          /* [w - 1]: the speedup of rounds of w drafts that are always right and free */
} mtp_result;

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Generates n tokens greedily; returns tok/s of the generation (prefill excluded), or < 0 on error. */
static double timed_generation(const eli_exec *exec, eli_xmodel *xm, const eli_tokenizer *tok, const eli_gen_params *p,
                               const int32_t *ids, size_t n_ids, int32_t *out, int64_t n, eli_spec_stats *stats) {
    eli_error err = {0};
    eli_gen *g = eli_gen_create(exec, xm, tok, p, &err);
    if (!g || eli_gen_prefill(g, ids, n_ids, NULL, &err)) {
        cli_die("%s", err.msg);
        eli_gen_free(g);
        return -1;
    }
    int64_t got = 0;
    double t = cli_now();
    for (int r = 0; r == 0 && got < n;) {
        int32_t step[65];
        size_t k;
        r = eli_gen_next(g, step, 65, &k, NULL, 0, NULL, NULL, NULL, &err);
        if (r < 0) {
            cli_die("%s", err.msg);
            eli_gen_free(g);
            return -1;
        }
        for (size_t i = 0; i < k && got < n; i++) out[got++] = step[i];
    }
    t = cli_now() - t;
    if (stats) *stats = eli_gen_spec_stats(g);
    eli_gen_free(g);
    for (int64_t i = got; i < n; i++) out[i] = -1; /* an early end of generation */
    return (double)got / t;
}

/* Decodes seq[0 .. len-1] after the prompt in batches of k tokens (k = 1: plain steps), each row's greedy
 * token checked against the next one of seq; returns the seconds taken, < 0 on error. */
static double timed_batches(eli_xseq *c, eli_sampler *smp, const int32_t *ids, size_t n_ids, const int32_t *seq,
                            int64_t len, int k, float *logits) {
    eli_error err = {0};
    const int32_t V = c->xm->model->hp.n_vocab;
    const eli_outputs all = {logits, NULL, 1};
    if (!eli_seq_truncate(c, (int64_t)n_ids)) {
        eli_seq_reset(c);
        if (eli_seq_decode_tokens(c, ids, (int64_t)n_ids, NULL, &err)) return cli_die("%s", err.msg), -1;
    }
    const double t = cli_now();
    for (int64_t i = 0; i + 1 < len;) {
        const int64_t b = i + k < len ? k : len - 1 - i;
        if (eli_seq_decode_tokens(c, seq + i, b, &all, &err)) return cli_die("%s", err.msg), -1;
        for (int64_t j = 0; j < b; j++) {
            int32_t tok = -1;
            if (eli_sampler_sample(smp, logits + (size_t)j * (size_t)V, &tok, &err)) return cli_die("%s", err.msg), -1;
            if (tok != seq[i + j + 1])
                return cli_die("bench: a batch of %d tokens chose another token than plain decoding at %lld", k,
                               (long long)(i + j + 1)),
                       -1;
        }
        i += b;
    }
    return cli_now() - t;
}

/* The most MTP can give on this model and machine: rounds whose drafts are always right and cost nothing
 * (the plain run's own tokens, verified w + 1 at a time) against plain steps over the same tokens, each
 * the median of reps runs. MTP pays only where a batch of w + 1 tokens costs much less than w + 1 steps:
 * where decoding waits on memory, not where (a small model in the caches) it waits on arithmetic. */
static int mtp_ceiling(const eli_exec *exec, eli_xmodel *xm, const eli_seq_params *sp, const int32_t *ids, size_t n_ids,
                       const int32_t *seq, int64_t n, int reps, mtp_result *res) {
    const eli_model *m = xm->model;
    eli_error err = {0};
    int64_t len = 0;
    while (len < n && seq[len] >= 0) len++;
    if (len < 3) { /* the first token came from the prompt: nothing to time in batches */
        res->n_ceiling = 0;
        return 0;
    }
    eli_xseq *c = eli_seq_create(exec, xm, sp, &err);
    eli_sampler_params gp = eli_sampler_default_params();
    gp.temperature = 0;
    eli_sampler *smp = NULL;
    const int W = res->n_ceiling;
    float *logits = malloc(sizeof(float) * (size_t)(W + 1) * (size_t)m->hp.n_vocab);
    double *t = malloc(sizeof(double) * (size_t)(W + 1) * (size_t)reps);
    int rc = !c || eli_sampler_create(&gp, m->hp.n_vocab, &smp, &err) ? cli_die("%s", err.msg) : 0;
    if (!rc && (!logits || !t)) rc = cli_die("out of memory");
    for (int r = 0; !rc && r < reps; r++) /* t[w * reps + r]: w = 0 is the plain steps */
        for (int w = 0; !rc && w <= W; w++)
            if ((t[w * reps + r] = timed_batches(c, smp, ids, n_ids, seq, len, w + 1, logits)) < 0) rc = 1;
    if (!rc) {
        const double plain = median(t, reps);
        for (int w = 1; w <= W; w++) res->ceiling[w - 1] = plain / median(t + w * reps, reps);
    }
    free(logits), free(t);
    eli_sampler_free(smp);
    eli_seq_free(c);
    return rc;
}

static int bench_mtp(const eli_exec *exec, const cli_model *cm, const char *draft_path, const char *prompt_file, int64_t n,
                     int draft_max, int reps, const eli_seq_params *sp, mtp_result *res) {
    eli_error err = {0};
    const eli_model *m = cm->m;
    eli_tokenizer *tok = eli_tokenizer_load(m->file, &err);
    if (!tok) return cli_die("--draft / --mtp-ceiling need the model's tokenizer: %s", err.msg);
    eli_gen_params p;
    cli_model d = {0};
    if (cli_gen_params(&p) || (draft_path && cli_load_drafter(draft_path, cm, &p, &d))) {
        eli_tokenizer_free(tok);
        return 1;
    }
    char *text = NULL;
    size_t len = 0;
    if (prompt_file && !(text = cli_read_file(prompt_file, &len))) {
        cli_unload(&d);
        eli_tokenizer_free(tok);
        return 1;
    }
    if (len > 1 << 16) len = 1 << 16; /* the prompt is cut to 1024 tokens below: no need to tokenize more */
    int32_t *ids = NULL;
    size_t n_ids = 0;
    int rc = eli_tokenize(tok, text ? text : cli_sample_text, text ? len : strlen(cli_sample_text), 1, 0, &ids, &n_ids, &err);
    free(text);
    int32_t *a = malloc(sizeof(int32_t) * (size_t)n), *b = malloc(sizeof(int32_t) * (size_t)n);
    double *runs = malloc(sizeof(double) * 3 * (size_t)reps);
    if (rc || !a || !b || !runs) {
        cli_die("%s", rc ? err.msg : "out of memory");
        rc = 1;
    } else {
        /* a long prompt file is cut to its first tokens, leaving room for the generation in the context */
        int64_t room = (int64_t)m->hp.n_ctx_train - n - draft_max - 2;
        if (room > 1024) room = 1024;
        if (room < 1) room = 1;
        if ((int64_t)n_ids > room) n_ids = (size_t)room;
        p.seq = *sp;
        p.seq.n_ctx = (int64_t)n_ids + n + draft_max + 2;
        if (p.seq.n_ctx > m->hp.n_ctx_train) p.seq.n_ctx = m->hp.n_ctx_train;
        p.sampling.temperature = 0;
        p.max_tokens = n;
        res->prompt_tokens = (int64_t)n_ids;
        res->reps = reps;
        res->identical = 1;
        /* plain and MTP runs alternated, so that a change of the machine's speed shows in both */
        double *plain = runs, *mtp = runs + reps, *ratio = runs + 2 * reps;
        for (int r = 0; !rc && r < reps; r++) {
            eli_spec_stats st;
            p.draft = NULL;
            plain[r] = timed_generation(exec, cm->xm, tok, &p, ids, n_ids, a, n, NULL);
            rc = plain[r] < 0;
            if (!d.xm || rc) continue; /* --mtp-ceiling alone: plain runs only */
            p.draft = d.xm, p.draft_min = 1, p.draft_max = draft_max;
            mtp[r] = timed_generation(exec, cm->xm, tok, &p, ids, n_ids, b, n, &st);
            if ((rc = mtp[r] < 0)) break;
            ratio[r] = mtp[r] / plain[r];
            res->drafted += st.drafted, res->accepted += st.accepted, res->rounds += st.rounds, res->window = st.window;
            res->identical &= !memcmp(a, b, sizeof(int32_t) * (size_t)n);
        }
        if (!rc) {
            res->plain_tps = median(plain, reps);
            if (d.xm) {
                res->mtp_tps = median(mtp, reps);
                res->speedup = median(ratio, reps); /* sorted now */
                res->lo = ratio[0], res->hi = ratio[reps - 1];
            }
            res->n_ceiling = draft_max;
            rc = mtp_ceiling(exec, cm->xm, &p.seq, ids, n_ids, a, n, reps, res);
        }
    }
    free(a), free(b), free(ids), free(runs);
    cli_unload(&d);
    eli_tokenizer_free(tok);
    return rc;
}

int cli_bench(int argc, char **argv) {
    const char *path = NULL;
    long long p = 512, n = 128, threads = 0, depth = 0;
    int json = 0, reference = 0;
    const char *draft_path = NULL, *prompt_file = NULL;
    long long draft_max = 6, mtp_reps = 3;
    int ceiling_only = 0;
    uint32_t kv = ELI_TYPE_F16, kv_v = ELI_TYPE_F16, kv_cmp = 0;
    int compare = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int r = cli_parse_kv_option(a, i + 1 < argc ? argv[i + 1] : NULL, &kv, &kv_v);
        if (r < 0) return 2;
        if (r) {
            i++;
            continue;
        }
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) return usage(), 0;
        if (!strcmp(a, "-m")) path = i + 1 < argc ? argv[++i] : NULL;
        else if (!strcmp(a, "-p")) { if (cli_parse_int("-p", i + 1 < argc ? argv[++i] : NULL, 0, 1 << 20, &p)) return 2; }
        else if (!strcmp(a, "-n")) { if (cli_parse_int("-n", i + 1 < argc ? argv[++i] : NULL, 0, 1 << 20, &n)) return 2; }
        else if (!strcmp(a, "-t")) { if (cli_parse_int("-t", i + 1 < argc ? argv[++i] : NULL, 0, 1024, &threads)) return 2; }
        else if (!strcmp(a, "--depth")) { if (cli_parse_int("--depth", i + 1 < argc ? argv[++i] : NULL, 0, 1 << 22, &depth)) return 2; }
        else if (!strcmp(a, "--draft")) draft_path = i + 1 < argc ? argv[++i] : NULL;
        else if (!strcmp(a, "--prompt-file")) prompt_file = i + 1 < argc ? argv[++i] : NULL;
        else if (!strcmp(a, "--draft-max")) { if (cli_parse_int("--draft-max", i + 1 < argc ? argv[++i] : NULL, 1, 64, &draft_max)) return 2; }
        else if (!strcmp(a, "--mtp-reps")) { if (cli_parse_int("--mtp-reps", i + 1 < argc ? argv[++i] : NULL, 1, MTP_REPS_MAX, &mtp_reps)) return 2; }
        else if (!strcmp(a, "--mtp-ceiling")) ceiling_only = 1;
        else if (!strcmp(a, "--compare-kv")) {
            const char *v = i + 1 < argc ? argv[++i] : "";
            if (eli_kv_type_from_name(v, &kv_cmp) || !eli_kv_type_holds_values(kv_cmp))
                return cli_die("--compare-kv: '%s' is not a cache type for K and V (known: %s; qjl1_256 holds keys only)", v,
                               eli_kv_type_names()),
                       2;
            compare = 1;
        }
        else if (!strcmp(a, "--json")) json = 1;
        else if (!strcmp(a, "--reference")) reference = 1;
        else return cli_die("bench: unknown option '%s'", a), usage();
    }
    if (!path) return usage();
    if (threads == 0) threads = eli_os_cpu_count();
    eli_error err = {0};
    double t0 = cli_now();
    cli_model cm;
    if (cli_prepare(path, &cm)) return 1;
    const double load_s = cli_now() - t0;
    const eli_model *m = cm.m;
    const eli_hparams *hp = &m->hp;
    const eli_exec *exec = reference ? eli_exec_named("reference", &err) : cm.xm->exec;

    eli_seq_params cp = eli_seq_default();
    int64_t need = p > depth + n ? p : depth + n;
    cp.n_ctx = need + 1;
    cp.n_ubatch = 512;
    cp.kv_type_k = kv;
    cp.kv_type_v = kv_v;
    cp.n_threads = (int)threads;
    cp.reserve = cm.cfg.reserve;
    cp.n_ckpt = cm.cfg.n_ckpt;
    const char *kname = exec ? exec->describe(cm.xm) : "";
    if (cp.n_ctx > hp->n_ctx_train) {
        cli_unload(&cm);
        return cli_die("bench: %lld positions exceed the model's context of %d", (long long)cp.n_ctx, hp->n_ctx_train);
    }
    eli_xseq *c = exec ? eli_seq_create(exec, cm.xm, &cp, &err) : NULL;
    if (!c) {
        cli_unload(&cm);
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

    /* warm-up: page the weights in and wake the pool. With a prefill measurement the warm-up is that same
     * prefill, timed as the cold time to first token (it also pages in the scratch and KV memory); the
     * measured prefill then runs warm, as llama-bench's does after its warm-up run. */
    double cold_s = 0, pp_s = 0, tg_s = 0, tg_cmp_s = 0;
    eli_xseq *c_cmp = NULL;
    const eli_outputs last = {logits, NULL, 0};
    const double t_cold = cli_now();
    int rc = eli_seq_decode_tokens(c, toks, p > 0 ? p : 1, &last, &err);
    cold_s = cli_now() - t_cold;
    if (!rc && p > 0) {
        eli_seq_reset(c);
        double t = cli_now();
        rc = eli_seq_decode_tokens(c, toks, p, &last, &err);
        pp_s = cli_now() - t;
    }
    if (!rc && n > 0) {
        eli_seq_reset(c);
        if (depth > 0) rc = eli_seq_decode_tokens(c, toks, depth, NULL, &err);
        if (!rc && compare) {
            eli_seq_params cp2 = cp;
            cp2.kv_type_k = cp2.kv_type_v = kv_cmp;
            if (!(c_cmp = eli_seq_create(exec, cm.xm, &cp2, &err))) rc = 1;
            else if (depth > 0) rc = eli_seq_decode_tokens(c_cmp, toks, depth, NULL, &err);
        }
        for (long long i0 = 0; i0 < n && !rc; i0 += 4) {
            const long long nb = n - i0 < 4 ? n - i0 : 4;
            for (int side = 0; side < (c_cmp ? 2 : 1) && !rc; side++) {
                const int other = c_cmp && (i0 / 4 + side) % 2; /* who goes first swaps every block */
                const double t = cli_now();
                for (long long i = i0; i < i0 + nb && !rc; i++)
                    rc = eli_seq_decode_tokens(other ? c_cmp : c, toks + depth + i, 1, &last, &err);
                *(other ? &tg_cmp_s : &tg_s) += cli_now() - t;
            }
        }
    }
    eli_seq_free(c_cmp);
    if (rc) {
        free(toks), free(logits);
        eli_seq_free(c);
        cli_unload(&cm);
        return cli_die("decode: %s", err.msg);
    }
    const long rss = peak_rss_kb(); /* of the measured context: before the MTP runs and the probe's buffer */
    mtp_result mtp = {0};
    if ((draft_path || ceiling_only) && n > 0) {
        eli_seq_free(c), c = NULL; /* free its memory before the generation runs */
        if (bench_mtp(exec, &cm, draft_path, prompt_file, n, (int)draft_max, (int)mtp_reps, &cp, &mtp)) {
            free(toks), free(logits);
            cli_unload(&cm);
            return 1;
        }
    }
    const double bytes_tok = decode_bytes(m, depth + n / 2, kv, kv_v);
    /* the planner's prediction for this context (it also counts a tokenizer and a window checkpoint,
     * which this bench does not allocate) */
    eli_plan plan = {0};
    eli_plan_params pp = eli_plan_default_params();
    pp.n_ctx = cp.n_ctx, pp.n_ubatch = cp.n_ubatch, pp.kv_type_k = kv, pp.kv_type_v = kv_v, pp.n_threads = (int)threads;
    const double predicted_kb = eli_plan_model(m, &pp, 0, &plan, NULL) ? 0 : (double)plan.peak_rss / 1024.0;
    const double bw = bandwidth_probe((int)threads);
    const double pp_tps = p > 0 ? (double)p / pp_s : 0, tg_tps = n > 0 ? (double)n / tg_s : 0;
    const double gbs = tg_tps * bytes_tok / 1e9;
    if (json) {
        printf("{\"model\": \"%s\", \"kernels\": \"%s\", \"threads\": %lld, \"kv_type\": \"%s\", \"kv_type_v\": \"%s\", \"n_prompt\": %lld, "
               "\"n_gen\": %lld, \"depth\": %lld, \"load_s\": %.4f, \"prefill_tok_s\": %.3f, \"ttft_ms\": %.3f, \"ttft_cold_ms\": %.3f, "
               "\"decode_tok_s\": %.3f, \"decode_ms_per_tok\": %.3f, \"weight_bytes\": %llu, "
               "\"decode_bytes_per_tok\": %.0f, \"decode_gb_s\": %.3f, \"probe_gb_s\": %.3f, "
               "\"roofline_fraction\": %.4f, \"peak_rss_kb\": %ld, \"predicted_peak_rss_kb\": %.0f",
               path, kname, threads, eli_kv_type_name(kv), eli_kv_type_name(kv_v), p, n, depth, load_s, pp_tps, pp_s * 1e3, p > 0 ? cold_s * 1e3 : 0, tg_tps,
               n > 0 ? tg_s * 1e3 / (double)n : 0, (unsigned long long)m->weight_bytes, bytes_tok, gbs, bw,
               bw > 0 ? gbs / bw : 0, rss, predicted_kb);
        if (compare && n > 0)
            printf(", \"compare_kv\": {\"kv_type\": \"%s\", \"decode_tok_s\": %.3f, \"decode_ms_per_tok\": %.3f, "
                   "\"speed_ratio\": %.4f}",
                   eli_kv_type_name(kv_cmp), (double)n / tg_cmp_s, tg_cmp_s * 1e3 / (double)n, tg_s / tg_cmp_s);
        if (mtp.plain_tps > 0) {
            printf(", \"mtp\": {\"prompt_tokens\": %lld, \"runs\": %d, \"plain_tok_s\": %.3f, ", (long long)mtp.prompt_tokens,
                   mtp.reps, mtp.plain_tps);
            if (draft_path)
                printf("\"drafter\": \"%s\", \"mtp_tok_s\": %.3f, \"speedup\": %.4f, \"speedup_min\": %.4f, "
                       "\"speedup_max\": %.4f, \"drafted\": %lld, \"accepted\": %lld, \"acceptance\": %.4f, "
                       "\"tokens_per_round\": %.4f, \"window\": %d, \"identical\": %s, ",
                       draft_path, mtp.mtp_tps, mtp.speedup, mtp.lo, mtp.hi, (long long)mtp.drafted, (long long)mtp.accepted,
                       mtp.drafted ? (double)mtp.accepted / (double)mtp.drafted : 0,
                       mtp.rounds ? (double)(mtp.accepted + mtp.rounds) / (double)mtp.rounds : 0, mtp.window,
                       mtp.identical ? "true" : "false");
            printf("\"ceiling\": [");
            for (int w = 0; w < mtp.n_ceiling; w++) printf("%s%.4f", w ? ", " : "", mtp.ceiling[w]);
            printf("]}");
        }
        printf("}\n");
    } else {
        printf("model            %s\n", path);
        printf("kernels          %s, %lld threads, %s/%s K/V cache\n", kname, threads, eli_kv_type_name(kv), eli_kv_type_name(kv_v));
        printf("weights          %.1f MiB (load %.3f s)\n", (double)m->weight_bytes / 1048576.0, load_s);
        if (p > 0)
            printf("prefill pp%-6lld %10.2f tok/s   (TTFT %.1f ms; %.1f ms cold, the first prompt)\n", p, pp_tps,
                   pp_s * 1e3, cold_s * 1e3);
        if (n > 0)
            printf("decode  tg%-6lld %10.2f tok/s   (%.2f ms/tok at depth %lld)\n", n, tg_tps, tg_s * 1e3 / (double)n,
                   depth);
        if (compare && n > 0)
            printf("decode  %-8s %10.2f tok/s   (%.2f ms/tok, alternated with the above in blocks of 4: %.3fx its speed)\n",
                   eli_kv_type_name(kv_cmp), (double)n / tg_cmp_s, tg_cmp_s * 1e3 / (double)n, tg_s / tg_cmp_s);
        printf("decode bytes/tok %10.1f MiB\n", bytes_tok / 1048576.0);
        printf("decode bandwidth %10.2f GB/s   (probe %.2f GB/s, %.0f%% of it)\n", gbs, bw, bw > 0 ? 100 * gbs / bw : 0);
        printf("peak RSS         %10.1f MiB   (planner predicts %.1f MiB for this context: %.2fx)\n", (double)rss / 1024.0,
               predicted_kb / 1024.0, predicted_kb > 0 ? (double)rss / predicted_kb : 0);
        if (mtp.plain_tps > 0 && !draft_path)
            printf("MTP greedy tg%-4lld  plain %.2f tok/s (median of %d runs; %lld-token text prompt)\n", n, mtp.plain_tps,
                   mtp.reps, (long long)mtp.prompt_tokens);
        if (mtp.plain_tps > 0 && draft_path) {
            printf("MTP greedy tg%-4lld  plain %.2f tok/s, MTP %.2f tok/s: %.2fx (median of %d alternated runs, %.2f-%.2fx; "
                   "%lld-token text prompt)\n",
                   n, mtp.plain_tps, mtp.mtp_tps, mtp.speedup, mtp.reps, mtp.lo, mtp.hi, (long long)mtp.prompt_tokens);
            printf("MTP drafts       %lld drafted, %lld accepted (%.1f%%), %.2f tokens per round, window %d, output %s\n",
                   (long long)mtp.drafted, (long long)mtp.accepted,
                   mtp.drafted ? 100.0 * (double)mtp.accepted / (double)mtp.drafted : 0.0,
                   mtp.rounds ? (double)(mtp.accepted + mtp.rounds) / (double)mtp.rounds : 0.0, mtp.window,
                   mtp.identical ? "identical" : "DIFFERS");
        }
        if (mtp.plain_tps > 0) {
            if (mtp.n_ceiling) {
                printf("MTP ceiling      drafts always right and free, window 1..%d:", mtp.n_ceiling);
                for (int w = 0; w < mtp.n_ceiling; w++) printf(" %.2fx", mtp.ceiling[w]);
                printf("\n");
            } else {
                printf("MTP ceiling      not measured: the plain run generated fewer than 3 tokens\n");
            }
        }
    }
    free(toks), free(logits);
    eli_seq_free(c);
    cli_unload(&cm);
    return mtp.plain_tps > 0 && !mtp.identical ? 1 : 0;
}
