/* eliza-infer run [-m FILE] -p TEXT [-n N] [--temp T] [--top-k K] [--top-p P] [--min-p M]
 *                 [--repeat-penalty R] [--seed S] [--chat] [--system TEXT] [-t N] [--ctx N] [--kv TYPE] [--kv-k TYPE] [--kv-v TYPE]
 *                 [--grammar FILE | --json-schema FILE | --json] [--mmproj FILE (--image IMG | --audio WAV)...]
 * Streams the generated text to stdout and prints a stats line to stderr. With images or audio the prompt is
 * one user turn of the chat template holding them, in the order given, then the prompt. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "engine.h"
#include "grammar_vocab.h"

static int usage(FILE *out) {
    fprintf(out,
            "usage: eliza-infer run [-m FILE] -p TEXT [options]\n"
            "  -m FILE            model GGUF (default: the embedded eliza-1-nano)\n"
            "  -p TEXT            prompt (an empty prompt is fine)\n"
            "  -n N               tokens to generate (default 128; 0 = until end of generation)\n"
            "  --temp T           temperature (default 0.8; 0 = greedy)\n"
            "  --top-k K --top-p P --min-p M --repeat-penalty R --seed S\n"
            "  --chat             wrap the prompt in the Gemma 4 chat template (one user turn)\n"
            "  --system TEXT      system prompt (with --chat)\n"
            "  --draft FILE       MTP speculative decoding with this gemma4-assistant drafter\n"
            "  --draft-min N --draft-max N   draft window bounds (default 1..6; the window adapts in between)\n"
            "  -t N               threads    --ctx N  context size (default 4096)\n"
            "  --kv TYPE          KV cache type of K and V (f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 tbq4_0 tbq3_0\n"
            "                     q4_polar; default f16)\n"
            "  --kv-k TYPE --kv-v TYPE       the K and the V type alone (qjl1_256: K only)\n"
            "  --grammar FILE     constrain the output to a GBNF grammar (llama.cpp's dialect)\n"
            "  --json-schema FILE constrain it to JSON valid against a schema   --json  to any JSON value\n"
            "  --mmproj FILE      the projector (vision/audio towers) for --image and --audio\n"
            "  --image IMG        an image (PNG, JPEG, WebP) in the user turn, before the prompt (repeatable)\n"
            "  --audio WAV        an audio clip likewise; images and clips keep the order given\n");
    return 2;
}

double cli_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int cli_parse_gen_option(int argc, char **argv, int *i, eli_gen_params *p) {
    const char *a = argv[*i], *v = *i + 1 < argc ? argv[*i + 1] : NULL;
    long long x;
    double f;
    if (!strcmp(a, "-n") || !strcmp(a, "--n-predict")) {
        if (cli_parse_int(a, v, 0, INT32_MAX, &x)) return -1;
        p->max_tokens = x;
    } else if (!strcmp(a, "--temp")) {
        if (cli_parse_float(a, v, &f)) return -1;
        p->sampling.temperature = (float)f;
    } else if (!strcmp(a, "--top-k")) {
        if (cli_parse_int(a, v, 0, INT32_MAX, &x)) return -1;
        p->sampling.top_k = (int32_t)x;
    } else if (!strcmp(a, "--top-p")) {
        if (cli_parse_float(a, v, &f)) return -1;
        p->sampling.top_p = (float)f;
    } else if (!strcmp(a, "--min-p")) {
        if (cli_parse_float(a, v, &f)) return -1;
        p->sampling.min_p = (float)f;
    } else if (!strcmp(a, "--repeat-penalty")) {
        if (cli_parse_float(a, v, &f)) return -1;
        p->sampling.repeat_penalty = (float)f;
    } else if (!strcmp(a, "--seed")) {
        if (cli_parse_int(a, v, 0, INT64_MAX, &x)) return -1;
        p->sampling.seed = (uint64_t)x;
    } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
        if (cli_parse_int(a, v, 1, 1024, &x)) return -1;
        p->seq.n_threads = (int)x;
    } else if (!strcmp(a, "--ctx") || !strcmp(a, "-c")) {
        if (cli_parse_int(a, v, 1, INT32_MAX, &x)) return -1;
        p->seq.n_ctx = x;
    } else if (!strcmp(a, "--draft-min")) {
        if (cli_parse_int(a, v, 1, 64, &x)) return -1;
        p->draft_min = (int)x;
    } else if (!strcmp(a, "--draft-max")) {
        if (cli_parse_int(a, v, 1, 64, &x)) return -1;
        p->draft_max = (int)x;
    } else if ((x = cli_parse_kv_option(a, v, &p->seq.kv_type_k, &p->seq.kv_type_v))) {
        if (x < 0) return -1;
    } else {
        return 0; /* not a generation option */
    }
    (*i)++;
    return 1;
}

/* path loaded and prepared as the knobs say (cm->cfg read first); bound to target when it is a drafter. */
static int load_prepared(const char *path, const eli_model *target, cli_model *cm) {
    eli_error err = {0};
    if (eli_config_read(&cm->cfg, &err) || !(cm->m = eli_model_load(path, &err)) ||
        (target && eli_model_bind_assistant(cm->m, target, &err))) {
        cli_unload(cm);
        return cli_die("%s", err.msg);
    }
    const eli_exec_options o = {cm->cfg.kernels, cm->cfg.repack};
    if (!(cm->xm = eli_exec_prepare(eli_exec_default(), cm->m, &o, &err))) {
        cli_unload(cm);
        return cli_die("%s: %s", path, err.msg);
    }
    return 0;
}

int cli_load_drafter(const char *path, const cli_model *target, eli_gen_params *p, cli_model *d) {
    memset(d, 0, sizeof *d);
    if (!path) return 0;
    if (load_prepared(path, target->m, d)) return 1;
    if (!p->draft_min) p->draft_min = 1;
    if (!p->draft_max) p->draft_max = p->draft_min > 6 ? p->draft_min : 6;
    if (p->draft_min > p->draft_max) {
        cli_unload(d);
        return cli_die("--draft-min %d > --draft-max %d", p->draft_min, p->draft_max);
    }
    p->draft = d->xm;
    return 0;
}

void cli_unload(cli_model *cm) {
    eli_xmodel_release(cm->xm);
    eli_tokenizer_free(cm->tok);
    eli_model_free(cm->m);
    cm->xm = NULL, cm->tok = NULL, cm->m = NULL;
}

int cli_gen_params(eli_gen_params *p) {
    *p = eli_gen_default_params();
    eli_config cfg;
    eli_error err = {0};
    if (eli_config_read(&cfg, &err)) return cli_die("%s", err.msg);
    p->seq.reserve = cfg.reserve;
    p->seq.n_ckpt = cfg.n_ckpt;
    p->sampling.seed = cfg.seed;
    return 0;
}

int cli_bad_option(const char *cmd, const char *opt, int has_next) {
    static const char *const with_value[] = {"-m", "--model", "-p", "--prompt", "--system", "--draft"};
    for (size_t k = 0; !has_next && k < sizeof with_value / sizeof with_value[0]; k++)
        if (!strcmp(opt, with_value[k])) return cli_die("%s: %s needs a value", cmd, opt), 2;
    return cli_die("%s: unknown option '%s' (see 'eliza-infer %s --help')", cmd, opt, cmd), 2;
}

int cli_prepare(const char *path, cli_model *cm) {
    memset(cm, 0, sizeof *cm);
    return load_prepared(path, NULL, cm);
}

int cli_load(const char *path, cli_model *cm) {
    memset(cm, 0, sizeof *cm);
    char *dflt = NULL;
    if (!path) {
        dflt = cli_default_model();
        if (!dflt) return cli_die("no -m given and the embedded model eliza-1-nano is not installed next to this binary");
        path = dflt;
    }
    int rc = load_prepared(path, NULL, cm);
    free(dflt);
    if (rc) return rc;
    eli_error err = {0};
    if (!(cm->tok = eli_tokenizer_load(cm->m->file, &err))) {
        cli_unload(cm);
        return cli_die("%s", err.msg);
    }
    return 0;
}

/* The prompt's media encoded (items[a->media.n]); 1 after printing why. */
static int encode_media(const cli_prompt_args *a, const cli_model *cm, int threads, cli_media_item *items) {
    cli_encoder enc = {a->mmproj, threads, cm->m->hp.n_embd, {0}, {0}};
    int rc = 0;
    for (int i = 0; !rc && i < a->media.n; i++) rc = cli_encode(&enc, a->media.kind[i], a->media.path[i], &items[i]);
    cli_encoder_close(&enc);
    return rc;
}

/* The prompt as runs of ids around the media: the chat template (one user turn, media first) or the raw
 * text with <bos>. */
static int build_prompt(const cli_prompt_args *a, const eli_tokenizer *tok, eli_media_prompt *mp, eli_error *err) {
    if (a->chat || a->media.n) return eli_media_user_turn(tok, a->system, a->prompt, a->media.kind, a->media.n, mp, err);
    memset(mp, 0, sizeof *mp);
    if (!(mp->ids = calloc(1, sizeof *mp->ids)) || !(mp->n_ids = calloc(1, sizeof *mp->n_ids))) {
        eli_media_prompt_free(mp);
        return eli_fail(err, ELI_ERR_OOM, "out of memory");
    }
    return eli_tokenize(tok, a->prompt, strlen(a->prompt), 1, 0, &mp->ids[0], &mp->n_ids[0], err);
}

int cli_generate(const cli_prompt_args *a, eli_gen_params *p) {
    cli_model cm, dm;
    if (cli_load(a->model, &cm)) return 1;
    if (cli_load_drafter(a->draft, &cm, p, &dm)) {
        cli_unload(&cm);
        return 1;
    }
    int rc = 1;
    eli_error err = {0};
    eli_media_prompt mp = {0};
    cli_media_item items[CLI_MAX_MEDIA] = {{0}};
    eli_media_rows rows[CLI_MAX_MEDIA];
    int64_t n_prompt = 0;
    eli_gen *g = NULL;
    char *grammar = NULL;
    eli_grammar_vocab *gvocab = NULL;
    if (a->gbnf_file || a->schema_file || a->json) {
        if (!(grammar = cli_grammar_text(a->gbnf_file, a->schema_file, a->json, &p->grammar_len))) goto done;
        if (eli_grammar_vocab_new(cm.tok, &gvocab, &err)) {
            cli_die("%s", err.msg);
            goto done;
        }
        p->grammar = grammar;
        p->grammar_vocab = gvocab;
    }
    if (encode_media(a, &cm, p->seq.n_threads, items)) goto done;
    if (build_prompt(a, cm.tok, &mp, &err)) {
        cli_die("%s", err.msg);
        goto done;
    }
    for (int i = 0; i < a->media.n; i++) rows[i] = (eli_media_rows){items[i].rows, items[i].n, items[i].n_embd};
    for (int i = 0; i <= mp.n_media; i++) n_prompt += (int64_t)mp.n_ids[i] + (i < mp.n_media ? rows[i].n : 0);
    if (!(g = eli_gen_create(cm.xm->exec, cm.xm, cm.tok, p, &err))) {
        cli_die("%s", err.msg);
        goto done;
    }
    double t0 = cli_now();
    eli_media_gen_sink gs = {g, NULL};
    const eli_media_sink sink = eli_media_sink_of_gen(&gs);
    if (eli_media_prompt_prefill(&mp, rows, 0, &sink, &err)) {
        cli_die("%s", err.msg);
        goto done;
    }
    double t1 = cli_now(), t_first = 0;
    int32_t toks[65]; /* an MTP round returns up to draft_max + 1 tokens */
    const size_t step = dm.xm ? (size_t)p->draft_max + 1 : 1;
    char buf[512];
    for (;;) {
        size_t n;
        int r = eli_gen_next(g, toks, step, &n, buf, sizeof buf, NULL, NULL, NULL, &err);
        if (r < 0) {
            cli_die("%s", err.msg);
            goto done;
        }
        if (n && !t_first) t_first = cli_now();
        fputs(buf, stdout);
        fflush(stdout);
        if (r == 1) break;
    }
    double t2 = cli_now();
    const int64_t gen = eli_gen_n_generated(g);
    fprintf(stderr, "\n[prompt %lld tokens, %.1f tok/s | generated %lld tokens, %.1f tok/s | time to first token %.1f ms]\n",
            (long long)n_prompt, n_prompt ? (double)n_prompt / (t1 - t0) : 0.0, (long long)gen,
            gen > 1 && t_first ? (double)(gen - 1) / (t2 - t_first) : 0.0, t_first ? 1e3 * (t_first - t0) : 0.0);
    if (dm.xm) {
        eli_spec_stats st = eli_gen_spec_stats(g);
        fprintf(stderr, "[MTP: %lld rounds, %lld drafted, %lld accepted (%.1f%%), window %d]\n", (long long)st.rounds,
                (long long)st.drafted, (long long)st.accepted, st.drafted ? 100.0 * (double)st.accepted / (double)st.drafted : 0.0,
                st.window);
    }
    rc = 0;
done:
    eli_gen_free(g);
    eli_grammar_vocab_free(gvocab);
    free(grammar);
    eli_media_prompt_free(&mp);
    for (int i = 0; i < a->media.n; i++) cli_media_item_free(&items[i]);
    cli_unload(&dm);
    cli_unload(&cm);
    return rc;
}

int cli_run(int argc, char **argv) {
    cli_prompt_args a = {0};
    eli_gen_params p;
    if (cli_gen_params(&p)) return 1;
    p.max_tokens = 128;
    p.seq.n_ctx = 4096;
    for (int i = 1; i < argc; i++) {
        int r = cli_parse_gen_option(argc, argv, &i, &p);
        if (!r) r = cli_media_option(argc, argv, &i, &a.mmproj, &a.media);
        if (r < 0) return 2;
        if (r) continue;
        if ((!strcmp(argv[i], "-m") || !strcmp(argv[i], "--model")) && i + 1 < argc) a.model = argv[++i];
        else if ((!strcmp(argv[i], "-p") || !strcmp(argv[i], "--prompt")) && i + 1 < argc) a.prompt = argv[++i];
        else if (!strcmp(argv[i], "--system") && i + 1 < argc) a.system = argv[++i];
        else if (!strcmp(argv[i], "--draft") && i + 1 < argc) a.draft = argv[++i];
        else if (!strcmp(argv[i], "--chat")) a.chat = 1;
        else if (!strcmp(argv[i], "--grammar") && i + 1 < argc) a.gbnf_file = argv[++i];
        else if (!strcmp(argv[i], "--json-schema") && i + 1 < argc) a.schema_file = argv[++i];
        else if (!strcmp(argv[i], "--json")) a.json = 1;
        else if (!strcmp(argv[i], "--help")) return usage(stdout), 0;
        else return cli_bad_option("run", argv[i], i + 1 < argc);
    }
    if (!!a.gbnf_file + !!a.schema_file + a.json > 1) return cli_die("run: give at most one of --grammar, --json-schema, --json"), 2;
    if (!a.prompt) return cli_die("run: -p TEXT is required (see 'eliza-infer run --help')"), 2;
    if (a.media.n && !a.mmproj) return cli_die("run: --image / --audio need --mmproj FILE (the projector)"), 2;
    return cli_generate(&a, &p);
}
