/* eliza-infer plan: predicted resident memory of one stream (plan.h), optionally measured side by side. */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "engine.h"
#include "kv_types.h"
#include "model.h"
#include "plan.h"
#include "tokenizer.h"

static int usage(void) {
    fprintf(stderr,
            "usage: eliza-infer plan (-m FILE | --arch e2b|e4b|12b|31b|26b-a4b --type f16|q8_0|q4_0|q4_k_m) --ctx N\n"
            "                        [--kv TYPE] [--kv-k TYPE] [--kv-v TYPE] [--ubatch N] [--threads N] [--checkpoints N]\n"
            "                        [--fit-ram BYTES[K|M|G]] [--measure N]\n"
            "  --kv TYPE  KV cache type of K and V (f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 tbq4_0 tbq3_0 q4_polar;\n"
            "             default f16); --kv-k / --kv-v set one of them (qjl1_256: K only). Every type's bytes per\n"
            "             position are printed after the plan\n"
            "  --fit-ram  also print the largest context whose peak RSS fits in BYTES\n"
            "  --measure  (-m only) decode N positions of random tokens and print measured VmHWM, KV and PLE\n"
            "             resident bytes next to the prediction\n");
    return 2;
}

static int parse_bytes(const char *s, uint64_t *out) {
    char *end;
    double v = s ? strtod(s, &end) : -1;
    if (!s || end == s || v < 0) return -1;
    double mul = 1;
    if (*end == 'K' || *end == 'k') mul = 1024.0, end++;
    else if (*end == 'M' || *end == 'm') mul = 1024.0 * 1024, end++;
    else if (*end == 'G' || *end == 'g') mul = 1024.0 * 1024 * 1024, end++;
    if (*end == 'i') end++;
    if (*end == 'B') end++;
    if (*end) return -1;
    *out = (uint64_t)(v * mul);
    return 0;
}

static void row(const char *what, uint64_t b) { printf("  %-22s %14llu  (%.2f MiB)\n", what, (unsigned long long)b, b / 1048576.0); }

static void print_plan(const eli_plan *o) {
    printf("context %lld, ubatch %lld, sliding ring %lld cells, %d threads, %d window checkpoint(s)\n", (long long)o->n_ctx,
           (long long)o->n_ubatch, (long long)o->swa_cells, o->n_threads, o->n_ckpt);
    row("file", o->file_bytes);
    row("weights resident", o->weights_resident);
    row("PLE table (on disk)", o->ple_table);
    row("KV sliding rings", o->kv_swa);
    row("KV full layers", o->kv_full);
    row("KV checkpoints", o->kv_ckpt);
    row("scratch", o->scratch);
    row("session", o->session);
    row("tokenizer", o->tokenizer);
    row("process baseline", o->baseline);
    row("peak RSS", o->peak_rss);
}

/* K and V bytes per position for every cache type the geometry can hold. */
static int print_kv_types(const eli_model *m, const char *arch, const char *wtype) {
    printf("KV cache per position, K or V (layers that store K/V; sliding layers per ring cell):\n"
           "  type        full layers  sliding layers  bits/value\n");
    for (int i = 0; i < eli_kv_type_count(); i++) {
        const uint32_t t = eli_kv_type_at(i);
        uint64_t full, swa, elems;
        eli_error err = {0};
        if (eli_plan_kv_type_bytes(m, arch, wtype, t, &full, &swa, &elems, &err)) return cli_die("%s", err.msg);
        if (!full && !swa) {
            printf("  %-10s  (the head dims do not fit this type)\n", eli_kv_type_name(t));
            continue;
        }
        printf("  %-10s %12llu %15llu %11.4f%s\n", eli_kv_type_name(t), (unsigned long long)full, (unsigned long long)swa,
               8.0 * (double)(full + swa) / (double)elems, eli_kv_type_holds_values(t) ? "" : "  (K only)");
    }
    return 0;
}

static uint64_t heap_in_use(void) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
    struct mallinfo2 mi = mallinfo2();
    return (uint64_t)mi.uordblks + (uint64_t)mi.hblkhd;
#else
    return 0;
#endif
}

int cli_plan(int argc, char **argv) {
    const char *path = NULL, *arch = NULL, *wtype = NULL;
    eli_plan_params p = eli_plan_default_params();
    eli_config cfg;
    eli_error cerr = {0};
    if (eli_config_read(&cfg, &cerr)) return cli_die("%s", cerr.msg);
    p.n_ckpt = cfg.n_ckpt; /* ELIZA_LLM_KV_CHECKPOINTS, unless --checkpoints says otherwise */
    uint64_t fit = 0;
    long long measure = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long long x;
        if ((!strcmp(a, "-m") || !strcmp(a, "--model")) && v) path = v, i++;
        else if (!strcmp(a, "--arch") && v) arch = v, i++;
        else if (!strcmp(a, "--type") && v) wtype = v, i++;
        else if (!strcmp(a, "--ctx") || !strcmp(a, "-c")) {
            if (cli_parse_int(a, v, 1, INT32_MAX, &x)) return 2;
            p.n_ctx = x, i++;
        } else if (!strcmp(a, "--ubatch")) {
            if (cli_parse_int(a, v, 1, INT32_MAX, &x)) return 2;
            p.n_ubatch = x, i++;
        } else if (!strcmp(a, "--threads") || !strcmp(a, "-t")) {
            if (cli_parse_int(a, v, 1, 1024, &x)) return 2;
            p.n_threads = (int)x, i++;
        } else if (!strcmp(a, "--checkpoints")) {
            if (cli_parse_int(a, v, 0, 64, &x)) return 2;
            p.n_ckpt = (int)x, i++;
        } else if ((x = cli_parse_kv_option(a, v, &p.kv_type_k, &p.kv_type_v))) {
            if (x < 0) return 2;
            i++;
        } else if (!strcmp(a, "--fit-ram")) {
            if (parse_bytes(v, &fit)) return cli_die("plan: --fit-ram: '%s' is not a byte count", v ? v : ""), 2;
            i++;
        } else if (!strcmp(a, "--measure")) {
            if (cli_parse_int(a, v, 1, INT32_MAX, &measure)) return 2;
            i++;
        } else if (!strcmp(a, "--help")) {
            return usage(), 0;
        } else {
            return cli_die("plan: unknown option '%s'", a), usage();
        }
    }
    if (!path == !arch) return cli_die("plan: give either -m FILE or --arch"), usage();
    if (arch && !wtype) return cli_die("plan: --arch needs --type"), usage();
    eli_error err = {0};
    eli_plan o;
    if (arch) {
        if (measure) return cli_die("plan: --measure needs -m FILE");
        if (eli_plan_arch(arch, wtype, &p, &o, &err)) return cli_die("%s", err.msg);
        printf("arch %s, weights %s (true geometry, no file; metadata and tokenizer estimated)\n", arch, wtype);
        print_plan(&o);
        if (print_kv_types(NULL, arch, wtype)) return 1;
        if (fit) {
            int64_t n = eli_plan_fit(NULL, arch, wtype, &p, 0, fit, &err);
            if (n < 0) return cli_die("%s", err.msg);
            printf("largest context within %llu bytes: %lld\n", (unsigned long long)fit, (long long)n);
        }
        return 0;
    }
    /* --measure runs tokens, so it prepares the weights as a stream would */
    cli_model cm = {0};
    if (measure ? cli_prepare(path, &cm) : !(cm.m = eli_model_load(path, &err)))
        return measure ? 1 : cli_die("%s", err.msg);
    const eli_model *m = cm.m;
    const uint64_t h0 = heap_in_use();
    eli_tokenizer *tok = eli_tokenizer_load(m->file, &err);
    const uint64_t tok_bytes = tok && heap_in_use() > h0 ? heap_in_use() - h0 : 0;
    if (!tok) {
        cli_unload(&cm);
        return cli_die("%s", err.msg);
    }
    int rc = 0;
    if (eli_plan_model(m, &p, tok_bytes, &o, &err)) {
        rc = cli_die("%s", err.msg);
        goto done;
    }
    printf("model %s (tokenizer heap %s)\n", path, tok_bytes ? "measured" : "estimated");
    print_plan(&o);
    if (print_kv_types(m, NULL, NULL)) {
        rc = 1;
        goto done;
    }
    uint64_t mapped, cached;
    eli_plan_ple_resident(m, &mapped, &cached);
    if (o.ple_table)
        printf("PLE table now: %llu of %llu bytes mapped in this process, %llu in the page cache\n",
               (unsigned long long)mapped, (unsigned long long)o.ple_table, (unsigned long long)cached);
    if (fit) {
        int64_t n = eli_plan_fit(m, NULL, NULL, &p, tok_bytes, fit, &err);
        if (n < 0) {
            rc = cli_die("%s", err.msg);
            goto done;
        }
        printf("largest context within %llu bytes: %lld\n", (unsigned long long)fit, (long long)n);
    }
    if (measure) {
        eli_gen_params gp = eli_gen_default_params();
        gp.seq.n_ctx = o.n_ctx;
        gp.seq.n_ubatch = o.n_ubatch;
        gp.seq.kv_type_k = p.kv_type_k;
        gp.seq.kv_type_v = p.kv_type_v;
        gp.seq.n_threads = o.n_threads;
        gp.seq.reserve = cm.cfg.reserve;
        gp.seq.n_ckpt = o.n_ckpt;
        if (measure > o.n_ctx) measure = o.n_ctx;
        eli_gen *g = eli_gen_create(cm.xm->exec, cm.xm, tok, &gp, &err);
        int32_t *ids = g ? malloc((size_t)measure * sizeof *ids) : NULL;
        if (!ids) {
            eli_gen_free(g);
            rc = cli_die("%s", g ? "out of memory" : err.msg);
            goto done;
        }
        uint64_t r = 0x9E3779B97F4A7C15ull;
        for (long long i = 0; i < measure; i++) {
            r = r * 6364136223846793005ull + 1442695040888963407ull;
            ids[i] = i ? (int32_t)((r >> 33) % (uint64_t)m->hp.n_vocab) : 2;
        }
        const double t0 = cli_now();
        if (eli_gen_prefill(g, ids, (size_t)measure, NULL, &err)) rc = cli_die("%s", err.msg);
        const double t1 = cli_now();
        eli_gen_reset_keep(g, measure); /* a turn boundary: takes the window checkpoint a chat would hold */
        eli_plan_ple_resident(m, &mapped, &cached);
        printf("measured after decoding %lld positions (%.2f s):\n", measure, t1 - t0);
        row("VmHWM", eli_plan_vm_hwm());
        row("VmRSS", eli_plan_vm_rss());
        if (o.ple_table) {
            row("PLE mapped", mapped);
            row("PLE page cache", cached);
        }
        printf("  predicted peak RSS %.2f MiB (a full context of %lld); measured / predicted = %.3f\n",
               o.peak_rss / 1048576.0, (long long)o.n_ctx, (double)eli_plan_vm_hwm() / (double)o.peak_rss);
        free(ids);
        eli_gen_free(g);
    }
done:
    eli_tokenizer_free(tok);
    cli_unload(&cm);
    return rc;
}
