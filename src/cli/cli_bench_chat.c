/* eliza-infer bench-chat [-m FILE] [--turns 100] [--turn-tokens 200] [-n 16] [--ctx N] [-t N] [--kv TYPE]
 *                        [--lazy] [--warmup W] [--fresh-at LIST] [--prompt-file F] [--json]
 *
 * A long multi-turn chat through the path `chat` and a host of the C ABI take: every turn renders the
 * whole conversation with the chat template, keeps the longest common prefix of the KV cache
 * (reset_keep) and prefills only the rest, then generates n tokens greedily. The user messages are
 * consecutive runs of words of a text (deterministic), each about turn-tokens tokens long.
 *
 * Per turn: prompt tokens, tokens kept, new tokens, positions the model actually computed for the prompt
 * (new tokens plus any recomputed prefix), render+tokenize time, time to first token (reset_keep +
 * prefill + first sample), decode speed, and RSS split into anonymous memory (KV cache, scratch) and file
 * pages (the mmapped weights), next to the KV bytes resident: the whole cache and its checkpoints, which
 * the context reserves at creation, or with --lazy (eli_context_params.reserve = 0) the bytes the
 * conversation has written so far.
 * For the --fresh-at turns, after the chat the session is reset and the whole conversation as it was at
 * that turn is prefilled from scratch: the TTFT a fresh prompt of that length costs, against the
 * follow-up's.
 * Summary (turns after the warm-up): RSS min/max and drift, the same for anonymous memory net of the KV
 * (what must stay flat in either mode: with --lazy the KV cache itself grows with the conversation), the
 * mean follow-up TTFT and the cost per new token early and late in the conversation. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "engine.h"
#include "json.h"
#include "os.h"
#include "plan.h"
#include "quants.h"

static int usage(FILE *out) {
    fprintf(out,
            "usage: eliza-infer bench-chat [-m FILE] [options]\n"
            "  -m FILE            model GGUF (default: the embedded eliza-1-nano)\n"
            "  --turns N          chat turns (default 100)\n"
            "  --turn-tokens N    tokens of each user message, about (default 200)\n"
            "  -n N               tokens generated per turn, greedy (default 16)\n"
            "  --ctx N            context size (default min(32768, the model's))\n"
            "  -t N               threads    --kv TYPE  KV cache type (default f16)\n"
            "  --lazy             let KV and scratch pages become resident as first written (default: reserved\n"
            "                     at creation, so RSS is what the planner predicts from the first turn on)\n"
            "  --warmup W         turns left out of the RSS and TTFT summary (default turns / 5)\n"
            "  --fresh-at LIST    turns (comma-separated) whose whole conversation is also prefilled from scratch,\n"
            "                     after the chat (default 10, turns / 2 and the last turn)\n"
            "  --prompt-file F    text the user messages are cut from (default a built-in paragraph, repeated)\n"
            "  --json             one JSON document instead of the table\n");
    return 2;
}

typedef struct {
    int64_t prompt, kept, evaluated, generated;
    double render_ms, ttft_ms, decode_tps;
    long rss_kb, anon_kb, file_kb;
    double kv_kb; /* KV bytes resident: all of it (reserved), or written by the positions in the cache (--lazy) */
    int32_t *ids;         /* the prompt, kept for a fresh prefill at the end (--fresh-at) */
    double fresh_ttft_ms; /* < 0: not measured */
    int64_t fresh_evaluated;
} turn_rec;

/* Tokens of text[0..len) (no BOS, no special tokens); -1 on error. */
static int64_t count_tokens(const eli_tokenizer *tok, const char *text, size_t len, eli_error *err) {
    int32_t *ids;
    size_t n;
    if (eli_tokenize(tok, text, len, 0, 0, &ids, &n, err)) return -1;
    free(ids);
    return (int64_t)n;
}

/* The next user message: words of text from *cursor on (wrapping around), until it tokenizes to at least
 * n_tokens tokens. The words are counted one by one (each with its leading space), and the whole message
 * is tokenized only when that estimate reaches n_tokens (merges across words make the whole shorter). */
static char *next_message(const eli_tokenizer *tok, const char *text, size_t len, size_t *cursor, int64_t n_tokens,
                          eli_error *err) {
    size_t cap = 256, n = 0;
    char *msg = malloc(cap);
    if (!msg) return eli_fail(err, ELI_ERR_OOM, "out of memory"), NULL;
    for (int64_t est = 0;;) {
        size_t i = *cursor;
        while (i < len && strchr(" \n\t\r", text[i])) i++; /* (a NUL byte matches too: it separates words) */
        if (i == len) { /* wrap around (the caller made sure the text has a word) */
            *cursor = 0;
            continue;
        }
        size_t e = i;
        while (e < len && !strchr(" \n\t\r", text[e])) e++;
        *cursor = e;
        if (n + (e - i) + 2 > cap) {
            cap = 2 * (n + (e - i) + 2);
            char *g = realloc(msg, cap);
            if (!g) return free(msg), eli_fail(err, ELI_ERR_OOM, "out of memory"), NULL;
            msg = g;
        }
        const size_t word = n;
        if (n) msg[n++] = ' ';
        memcpy(msg + n, text + i, e - i);
        n += e - i;
        msg[n] = '\0';
        const int64_t w = count_tokens(tok, msg + word, n - word, err);
        if (w < 0) return free(msg), NULL;
        if ((est += w) < n_tokens) continue;
        if ((est = count_tokens(tok, msg, n, err)) < 0) return free(msg), NULL;
        if (est >= n_tokens) return msg;
    }
}

/* min, max and (max - min) / min in % of a field over turns [from, n). */
typedef struct {
    double min, max, drift_pct;
} range;

static range range_of(const turn_rec *t, int64_t from, int64_t n, double (*field)(const turn_rec *)) {
    range r = {0, 0, 0};
    for (int64_t i = from; i < n; i++) {
        const double v = field(&t[i]);
        if (i == from || v < r.min) r.min = v;
        if (i == from || v > r.max) r.max = v;
    }
    r.drift_pct = r.min > 0 ? 100.0 * (r.max - r.min) / r.min : 0;
    return r;
}

static double f_rss(const turn_rec *t) { return (double)t->rss_kb; }
static double f_anon(const turn_rec *t) { return (double)t->anon_kb; }
static double f_file(const turn_rec *t) { return (double)t->file_kb; }
static double f_anon_net(const turn_rec *t) { return (double)t->anon_kb - t->kv_kb; }

/* Mean prefill ms per new token of the follow-up turns [from, to). */
static double ms_per_new(const turn_rec *t, int64_t from, int64_t to) {
    double ms = 0, n = 0;
    for (int64_t i = from; i < to; i++) ms += t[i].ttft_ms, n += (double)(t[i].prompt - t[i].kept);
    return n > 0 ? ms / n : 0;
}

/* "10,50,100" into the flags fresh[0..turns-1]; prints an error and returns -1 on a bad list. */
static int parse_fresh(const char *s, int64_t turns, char *fresh) {
    if (!s || !*s) return cli_die("--fresh-at needs a comma-separated list of turns"), -1;
    char *copy = strdup(s);
    if (!copy) return cli_die("out of memory"), -1;
    int rc = 0;
    for (char *save = NULL, *tokn = strtok_r(copy, ",", &save); tokn && !rc; tokn = strtok_r(NULL, ",", &save)) {
        long long v;
        if (cli_parse_int("--fresh-at", tokn, 1, turns, &v)) rc = -1;
        else fresh[v - 1] = 1;
    }
    free(copy);
    return rc;
}

int cli_bench_chat(int argc, char **argv) {
    const char *path = NULL, *prompt_file = NULL, *fresh_list = NULL;
    long long turns = 100, turn_tokens = 200, n_gen = 16, warmup = -1, ctx = 0, threads = 0;
    uint32_t kv = ELI_TYPE_F16;
    int json = 0, lazy = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) return usage(stdout), 0;
        if (!strcmp(a, "--json")) {
            json = 1;
            continue;
        }
        if (!strcmp(a, "--lazy")) {
            lazy = 1;
            continue;
        }
        static const char *const valued[] = {"-m",      "--model", "--prompt-file", "--fresh-at", "--turns", "--turn-tokens",
                                             "-n",      "--warmup", "--ctx",        "-c",         "-t",      "--threads",
                                             "--kv"};
        size_t k = 0;
        while (k < sizeof valued / sizeof valued[0] && strcmp(a, valued[k])) k++;
        if (k == sizeof valued / sizeof valued[0]) return cli_bad_option("bench-chat", a, 1);
        if (!v) return cli_die("bench-chat: %s needs a value", a), 2;
        i++;
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) path = v;
        else if (!strcmp(a, "--prompt-file")) prompt_file = v;
        else if (!strcmp(a, "--fresh-at")) fresh_list = v;
        else if (!strcmp(a, "--turns")) { if (cli_parse_int(a, v, 1, 100000, &turns)) return 2; }
        else if (!strcmp(a, "--turn-tokens")) { if (cli_parse_int(a, v, 1, 1 << 20, &turn_tokens)) return 2; }
        else if (!strcmp(a, "-n")) { if (cli_parse_int(a, v, 1, 1 << 20, &n_gen)) return 2; }
        else if (!strcmp(a, "--warmup")) { if (cli_parse_int(a, v, 0, 100000, &warmup)) return 2; }
        else if (!strcmp(a, "--ctx") || !strcmp(a, "-c")) { if (cli_parse_int(a, v, 1, INT32_MAX, &ctx)) return 2; }
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) { if (cli_parse_int(a, v, 1, 1024, &threads)) return 2; }
        else if (cli_parse_kv_option(a, v, &kv, &kv) < 0) return 2; /* --kv, the last of valued[] */
    }
    if (warmup < 0) warmup = turns / 5;
    if (warmup >= turns) return cli_die("bench-chat: --warmup %lld leaves no turn of the %lld to summarise", warmup, turns), 2;
    char *fresh = calloc((size_t)turns, 1);
    turn_rec *rec = calloc((size_t)turns, sizeof *rec);
    if (!fresh || !rec) return free(fresh), free(rec), cli_die("out of memory");
    if (fresh_list) {
        if (parse_fresh(fresh_list, turns, fresh)) return free(fresh), free(rec), 2;
    } else {
        const long long dflt[] = {10, turns / 2, turns};
        for (size_t k = 0; k < 3; k++)
            if (dflt[k] >= 2 && dflt[k] <= turns) fresh[dflt[k] - 1] = 1; /* turn 1 is a fresh prefill anyway */
    }
    char *text = NULL;
    size_t text_len = 0;
    if (prompt_file && !(text = cli_read_file(prompt_file, &text_len))) return free(fresh), free(rec), 1;

    cli_model cm = {0};
    eli_gen *g = NULL;
    cli_conversation conv = {0};
    int32_t *ids = NULL;
    char *msg = NULL, *answer = NULL;
    int rc = 1;
    eli_error err = {0};
    if (cli_load(path, &cm)) goto done;
    const eli_model *m = cm.m;
    const eli_tokenizer *tok = cm.tok;
    if (ctx > m->hp.n_ctx_train) {
        cli_die("bench-chat: --ctx %lld exceeds the model's context of %d", ctx, m->hp.n_ctx_train);
        goto done;
    }
    if (!ctx) ctx = m->hp.n_ctx_train < 32768 ? m->hp.n_ctx_train : 32768;
    eli_gen_params p;
    if (cli_gen_params(&p)) goto done;
    p.seq.n_ctx = ctx;
    p.seq.kv_type_k = p.seq.kv_type_v = kv;
    p.seq.n_threads = (int)threads;
    p.seq.reserve = !lazy;
    p.sampling.temperature = 0;
    p.max_tokens = n_gen;
    if (!(g = eli_gen_create(cm.xm->exec, cm.xm, tok, &p, &err))) {
        cli_die("%s", err.msg);
        goto done;
    }
    const char *source = text ? text : cli_sample_text;
    const size_t source_len = text ? text_len : strlen(cli_sample_text);
    size_t cursor = 0;
    {
        size_t i = 0; /* a text without a single word would never yield a message */
        while (i < source_len && strchr(" \n\t\r", source[i])) i++;
        if (i == source_len) {
            cli_die("bench-chat: %s has no words to make user messages of", prompt_file);
            goto done;
        }
    }
    if (!json) {
        printf("model %s, %s kernels, %lld-token context, %s KV cache (%s); %lld turns of ~%lld user tokens + %lld generated\n",
               path ? path : "eliza-1-nano (embedded)", cm.xm->exec->describe(cm.xm), ctx, eli_type_name(kv),
               lazy ? "lazy" : "reserved", turns, turn_tokens, n_gen);
        printf("%5s %7s %7s %6s %6s %4s %9s %9s %7s %7s %9s %9s %9s %8s\n", "turn", "prompt", "kept", "new", "eval", "gen",
               "render_ms", "ttft_ms", "ms/new", "tok/s", "rss_MiB", "anon_MiB", "file_MiB", "kv_MiB");
    }
    for (int64_t t = 0; t < turns; t++) {
        turn_rec *r = &rec[t];
        if (!(msg = next_message(tok, source, source_len, &cursor, turn_tokens, &err)) ||
            cli_conv_add(&conv, "user", msg, strlen(msg))) {
            cli_die("turn %lld: %s", (long long)t + 1, msg ? "out of memory" : err.msg);
            goto done;
        }
        free(msg), msg = NULL;
        size_t n_ids;
        const double tr = cli_now();
        if (cli_conv_tokens(&conv, tok, &ids, &n_ids, &err)) {
            cli_die("turn %lld: %s", (long long)t + 1, err.msg);
            goto done;
        }
        r->render_ms = 1e3 * (cli_now() - tr);
        if ((int64_t)n_ids + n_gen > ctx) {
            cli_die("turn %lld: the conversation (%zu tokens + %lld to generate) does not fit the %lld-token context; "
                    "raise --ctx or lower --turns / --turn-tokens",
                    (long long)t + 1, n_ids, n_gen, ctx);
            goto done;
        }
        const int64_t ev = eli_gen_n_prompt_decoded(g);
        double t_first;
        size_t n_answer;
        const double t0 = cli_now();
        int e = cli_turn_prefill(g, ids, n_ids, NULL, &r->kept, &err);
        if (!e) e = cli_turn_answer(g, NULL, NULL, &answer, &n_answer, &t_first, &err) < 0;
        const double t1 = cli_now();
        if (e || cli_conv_add(&conv, "assistant", answer, n_answer)) {
            cli_die("turn %lld: %s", (long long)t + 1, e ? err.msg : "out of memory");
            goto done;
        }
        free(answer), answer = NULL;
        r->prompt = (int64_t)n_ids;
        r->evaluated = eli_gen_n_prompt_decoded(g) - ev;
        r->generated = eli_gen_n_generated(g);
        r->ttft_ms = 1e3 * ((t_first > 0 ? t_first : t1) - t0);
        r->decode_tps = r->generated > 1 && t1 > t_first ? (double)(r->generated - 1) / (t1 - t_first) : 0;
        r->rss_kb = eli_os_proc_kb("/proc/self/status", "VmRSS");
        r->anon_kb = eli_os_proc_kb("/proc/self/status", "RssAnon");
        r->file_kb = eli_os_proc_kb("/proc/self/status", "RssFile");
        eli_seq_params sp = p.seq;
        eli_seq_memory mem = {0};
        if (lazy) sp.n_ctx = eli_gen_n_committed(g);
        cm.xm->exec->plan(m, &sp, &mem, NULL);
        r->kv_kb = (double)(mem.kv_swa + mem.kv_full) / 1024.0;
        r->fresh_ttft_ms = -1;
        if (fresh[t]) r->ids = ids, ids = NULL; /* prefilled from scratch after the last turn */
        free(ids), ids = NULL;
        if (!json) {
            const int64_t nw = r->prompt - r->kept;
            printf("%5lld %7lld %7lld %6lld %6lld %4lld %9.1f %9.1f %7.2f %7.2f %9.1f %9.1f %9.1f %8.1f\n", (long long)t + 1,
                   (long long)r->prompt, (long long)r->kept, (long long)nw, (long long)r->evaluated, (long long)r->generated,
                   r->render_ms, r->ttft_ms, nw ? r->ttft_ms / (double)nw : 0, r->decode_tps, r->rss_kb / 1024.0,
                   r->anon_kb / 1024.0, r->file_kb / 1024.0, r->kv_kb / 1024.0);
            fflush(stdout);
        }
    }

    /* The fresh prefills come after the chat, so that their long batches (which touch all of the scratch
     * buffers) do not show in the RSS of the turns: each is the same whole conversation as at its turn,
     * from an empty cache. */
    for (int64_t t = 0; t < turns; t++) {
        turn_rec *r = &rec[t];
        if (!r->ids) continue;
        fprintf(stderr, "[fresh prefill of turn %lld: %lld tokens]\n", (long long)t + 1, (long long)r->prompt);
        eli_gen_reset(g);
        const int64_t ev0 = eli_gen_n_prompt_decoded(g);
        int32_t first;
        size_t n_first;
        const double f0 = cli_now();
        if (eli_gen_prefill(g, r->ids, (size_t)r->prompt, NULL, &err) ||
            eli_gen_next(g, &first, 1, &n_first, NULL, 0, NULL, NULL, NULL, &err) < 0) {
            cli_die("fresh prefill of turn %lld: %s", (long long)t + 1, err.msg);
            goto done;
        }
        r->fresh_ttft_ms = 1e3 * (cli_now() - f0);
        r->fresh_evaluated = eli_gen_n_prompt_decoded(g) - ev0;
    }
    const long peak_kb = eli_os_proc_kb("/proc/self/status", "VmHWM");

    /* summary over the turns after the warm-up (follow-ups only: turn 1 is a fresh prompt) */
    const int64_t from = warmup > 0 ? warmup : 1, n = turns;
    const range rss = range_of(rec, warmup, n, f_rss), anon = range_of(rec, warmup, n, f_anon),
                file = range_of(rec, warmup, n, f_file), net = range_of(rec, warmup, n, f_anon_net);
    double ttft_sum = 0, new_sum = 0;
    for (int64_t i = from; i < n; i++) ttft_sum += rec[i].ttft_ms, new_sum += (double)(rec[i].prompt - rec[i].kept);
    const double n_follow = (double)(n - from);
    const int64_t quarter = (n - from + 3) / 4;
    const double early = ms_per_new(rec, from, from + quarter), late = ms_per_new(rec, n - quarter, n);
    if (json) {
        const char *shown = path ? path : "eliza-1-nano (embedded)";
        char *qpath = eli_json_quote(shown, strlen(shown));
        printf("{\"model\": %s, \"kernels\": \"%s\", \"ctx\": %lld, \"kv_type\": \"%s\", \"reserved\": %s, \"turn_tokens\": %lld, "
               "\"n_gen\": %lld, \"warmup\": %lld,\n \"turns\": [",
               qpath ? qpath : "\"\"", cm.xm->exec->describe(cm.xm), ctx, eli_type_name(kv), lazy ? "false" : "true", turn_tokens,
               n_gen, warmup);
        free(qpath);
        for (int64_t i = 0; i < n; i++) {
            const turn_rec *r = &rec[i];
            printf("%s\n  {\"turn\": %lld, \"prompt_tokens\": %lld, \"kept\": %lld, \"new_tokens\": %lld, \"evaluated\": %lld, "
                   "\"generated\": %lld, \"render_ms\": %.3f, \"ttft_ms\": %.3f, \"decode_tok_s\": %.3f, \"rss_kb\": %ld, "
                   "\"rss_anon_kb\": %ld, \"rss_file_kb\": %ld, \"kv_kb\": %.1f",
                   i ? "," : "", (long long)i + 1, (long long)r->prompt, (long long)r->kept, (long long)(r->prompt - r->kept),
                   (long long)r->evaluated, (long long)r->generated, r->render_ms, r->ttft_ms, r->decode_tps, r->rss_kb,
                   r->anon_kb, r->file_kb, r->kv_kb);
            if (r->fresh_ttft_ms >= 0)
                printf(", \"fresh_ttft_ms\": %.3f, \"fresh_evaluated\": %lld", r->fresh_ttft_ms, (long long)r->fresh_evaluated);
            printf("}");
        }
        printf("],\n \"summary\": {\"rss_min_kb\": %.0f, \"rss_max_kb\": %.0f, \"rss_drift_pct\": %.3f, "
               "\"anon_min_kb\": %.0f, \"anon_max_kb\": %.0f, \"anon_drift_pct\": %.3f, "
               "\"anon_net_of_kv_min_kb\": %.0f, \"anon_net_of_kv_max_kb\": %.0f, \"anon_net_of_kv_drift_pct\": %.3f, "
               "\"file_min_kb\": %.0f, \"file_max_kb\": %.0f, \"file_drift_pct\": %.3f, "
               "\"mean_followup_ttft_ms\": %.3f, \"mean_followup_new_tokens\": %.1f, "
               "\"followup_ms_per_new_token_first_quarter\": %.4f, \"followup_ms_per_new_token_last_quarter\": %.4f, "
               "\"peak_rss_kb\": %ld}}\n",
               rss.min, rss.max, rss.drift_pct, anon.min, anon.max, anon.drift_pct, net.min, net.max, net.drift_pct, file.min,
               file.max, file.drift_pct, n_follow > 0 ? ttft_sum / n_follow : 0, n_follow > 0 ? new_sum / n_follow : 0, early,
               late, peak_kb);
    } else {
        printf("\nturns %lld..%lld:\n", warmup + 1, turns);
        printf("  peak RSS       %9.1f MiB (the fresh prefills included)\n", peak_kb / 1024.0);
        printf("  RSS            %9.1f .. %9.1f MiB  drift %.2f%%\n", rss.min / 1024, rss.max / 1024, rss.drift_pct);
        printf("  anonymous      %9.1f .. %9.1f MiB  drift %.2f%%  (net of the KV: %.1f .. %.1f MiB, drift %.2f%%)\n",
               anon.min / 1024, anon.max / 1024, anon.drift_pct, net.min / 1024, net.max / 1024, net.drift_pct);
        printf("  file (weights) %9.1f .. %9.1f MiB  drift %.2f%%\n", file.min / 1024, file.max / 1024, file.drift_pct);
        if (n_follow > 0)
            printf("  follow-up TTFT %.1f ms on average for %.1f new tokens; %.3f ms per new token in the first quarter, "
                   "%.3f in the last\n",
                   ttft_sum / n_follow, new_sum / n_follow, early, late);
        for (int64_t i = 0; i < n; i++)
            if (rec[i].fresh_ttft_ms >= 0)
                printf("  turn %-5lld     fresh prefill of %lld tokens %.1f ms vs follow-up %.1f ms (%lld new): %.1fx\n",
                       (long long)i + 1, (long long)rec[i].prompt, rec[i].fresh_ttft_ms, rec[i].ttft_ms,
                       (long long)(rec[i].prompt - rec[i].kept), rec[i].fresh_ttft_ms / rec[i].ttft_ms);
    }
    rc = 0;
done:
    free(msg), free(answer), free(ids);
    cli_conv_free(&conv);
    eli_gen_free(g);
    cli_unload(&cm);
    for (int64_t t = 0; t < turns; t++) free(rec[t].ids);
    free(text), free(fresh), free(rec);
    return rc;
}
