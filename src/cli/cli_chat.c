/* eliza-infer chat [-m FILE] [--system TEXT] [generation options]
 * Interactive multi-turn chat. Each turn renders the whole conversation with the Gemma 4 template,
 * keeps the longest common prefix of the KV cache (reset_keep) and prefills only the new tokens.
 * Ctrl-C stops the current answer (not the program); /reset starts over; /quit (or end of input) exits. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chat.h"
#include "cli.h"
#include "engine.h"
#include "json.h"

static atomic_int interrupted;

static void on_sigint(int sig) {
    (void)sig;
    atomic_store(&interrupted, 1);
}

typedef struct {
    char **role, **content;
    size_t n, cap;
} conversation;

static int conv_add(conversation *c, const char *role, const char *content, size_t len) {
    if (c->n == c->cap) {
        size_t nc = c->cap ? 2 * c->cap : 8;
        char **r = realloc(c->role, nc * sizeof *r);
        if (!r) return -1;
        c->role = r;
        char **t = realloc(c->content, nc * sizeof *t);
        if (!t) return -1;
        c->content = t;
        c->cap = nc;
    }
    c->role[c->n] = strdup(role);
    c->content[c->n] = malloc(len + 1);
    if (!c->role[c->n] || !c->content[c->n]) return -1;
    memcpy(c->content[c->n], content, len);
    c->content[c->n][len] = '\0';
    c->n++;
    return 0;
}

static void conv_clear(conversation *c, int keep_system) {
    size_t keep = keep_system && c->n && !strcmp(c->role[0], "system") ? 1 : 0;
    for (size_t i = keep; i < c->n; i++) free(c->role[i]), free(c->content[i]);
    c->n = keep;
}

/* Drops the last message (a user turn that was not answered). */
static void conv_clear_last(conversation *c) {
    if (!c->n) return;
    c->n--;
    free(c->role[c->n]), free(c->content[c->n]);
}

/* The prompt for the whole conversation plus the generation prompt. */
static char *render(const conversation *c) {
    size_t cap = 64;
    for (size_t i = 0; i < c->n; i++) cap += strlen(c->content[i]) * 6 + 64;
    char *doc = malloc(cap), *out = NULL;
    if (!doc) return NULL;
    size_t w = (size_t)snprintf(doc, cap, "[");
    for (size_t i = 0; i < c->n; i++) {
        char *q = eli_json_quote(c->content[i], strlen(c->content[i]));
        if (!q) return free(doc), NULL;
        w += (size_t)snprintf(doc + w, cap - w, "%s{\"role\":\"%s\",\"content\":%s}", i ? "," : "", c->role[i], q);
        free(q);
    }
    snprintf(doc + w, cap - w, "]");
    eli_error err = {0};
    eli_json *msgs = eli_json_parse(doc, strlen(doc), &err);
    eli_chat_options opt = eli_chat_default_options();
    size_t len;
    if (!msgs || eli_chat_render(msgs, &opt, &out, &len, &err)) cli_die("chat template: %s", err.msg);
    eli_json_free(msgs);
    free(doc);
    return out;
}

/* Reads one line from fd 0 into *line (NUL-terminated, without the newline). Returns its length, -1 at
 * end of input, -2 when Ctrl-C was pressed. A Ctrl-C that lands between the prompt and the read must
 * not be lost (a blocking read would then wait forever), so the wait is a poll that also watches the
 * flag, and the input is buffered here rather than in stdio (poll cannot see stdio's buffer). */
static ssize_t read_line(char **line, size_t *cap) {
    static char buf[4096];
    static size_t have;
    size_t n = 0;
    for (;;) {
        size_t nl = 0;
        while (nl < have && buf[nl] != '\n') nl++;
        const int complete = nl < have;
        if (n + nl + 1 > *cap) {
            char *g = realloc(*line, n + nl + 1);
            if (!g) return -1;
            *line = g, *cap = n + nl + 1;
        }
        memcpy(*line + n, buf, nl);
        n += nl;
        (*line)[n] = '\0';
        const size_t used = complete ? nl + 1 : nl;
        memmove(buf, buf + used, have - used);
        have -= used;
        if (complete) return (ssize_t)n;
        struct pollfd pfd = {0, POLLIN, 0};
        for (;;) {
            if (atomic_load(&interrupted)) return -2;
            int r = poll(&pfd, 1, 100);
            if (r > 0) break;
            if (r < 0 && errno != EINTR) return -1;
        }
        ssize_t got = read(0, buf, sizeof buf);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) return n ? (ssize_t)n : -1; /* end of input (a last line without newline counts) */
        have = (size_t)got;
    }
}

static int usage(FILE *out) {
    fprintf(out, "usage: eliza-infer chat [-m FILE] [--system TEXT] [-n N] [--temp T] [--top-k K] [--top-p P]\n"
                    "                        [--min-p M] [--repeat-penalty R] [--seed S] [-t N] [--ctx N] [--kv TYPE]\n"
                    "commands at the prompt: /reset, /quit; Ctrl-C stops an answer\n");
    return 2;
}

int cli_chat(int argc, char **argv) {
    const char *path = NULL, *system = NULL;
    eli_gen_params p = eli_gen_default_params();
    p.max_tokens = 512;
    p.ctx.n_ctx = 4096;
    for (int i = 1; i < argc; i++) {
        int r = cli_parse_gen_option(argc, argv, &i, &p);
        if (r < 0) return 2;
        if (r) continue;
        if ((!strcmp(argv[i], "-m") || !strcmp(argv[i], "--model")) && i + 1 < argc) path = argv[++i];
        else if (!strcmp(argv[i], "--system") && i + 1 < argc) system = argv[++i];
        else if (!strcmp(argv[i], "--help")) return usage(stdout), 0;
        else return cli_bad_option("chat", argv[i], i + 1 < argc);
    }
    eli_model *m;
    eli_tokenizer *tok;
    if (cli_load(path, &m, &tok)) return 1;
    eli_error err = {0};
    eli_gen *g = eli_gen_create(m, tok, &p, &err);
    if (!g) {
        eli_tokenizer_free(tok);
        eli_model_free(m);
        return cli_die("%s", err.msg);
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigaction(SIGINT, &sa, NULL);

    conversation conv = {0};
    if (system) conv_add(&conv, "system", system, strlen(system));
    char *line = NULL;
    size_t line_cap = 0;
    int rc = 0;
    for (;;) {
        atomic_store(&interrupted, 0);
        printf("> ");
        fflush(stdout);
        ssize_t len = read_line(&line, &line_cap);
        if (len == -2) { /* Ctrl-C at the prompt: a fresh prompt */
            printf("\n");
            continue;
        }
        if (len < 0) {
            printf("\n"); /* end of input: leave the terminal on a fresh line */
            break;
        }
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = '\0';
        if (!strcmp(line, "/quit") || !strcmp(line, "/exit")) break;
        if (!strcmp(line, "/reset")) {
            conv_clear(&conv, 1);
            eli_gen_reset(g);
            printf("(conversation reset)\n");
            continue;
        }
        if (!len) continue;
        if (conv_add(&conv, "user", line, (size_t)len)) break;
        char *prompt = render(&conv);
        int32_t *ids = NULL;
        size_t n_ids = 0;
        if (!prompt || eli_tokenize(tok, prompt, strlen(prompt), 0, 1, &ids, &n_ids, &err)) {
            free(prompt);
            cli_die("%s", err.msg);
            conv_clear_last(&conv);
            continue;
        }
        free(prompt);
        /* reuse the cache for the common prefix; prefill only what is new */
        const int32_t *have = eli_gen_tokens(g);
        int64_t lcp = 0, n_have = eli_gen_n_committed(g);
        while (lcp < n_have && lcp < (int64_t)n_ids && have[lcp] == ids[lcp]) lcp++;
        if (lcp == (int64_t)n_ids) lcp--; /* something must be prefilled to get fresh logits */
        int64_t kept = eli_gen_reset_keep(g, lcp);
        double t0 = cli_now();
        int r = eli_gen_prefill(g, ids + kept, n_ids - (size_t)kept, &interrupted, &err);
        free(ids);
        if (r) {
            printf("%s\n", r == ELI_ERR_CANCELLED ? "(stopped)" : err.msg);
            conv_clear_last(&conv);
            continue;
        }
        double t1 = cli_now();
        char *answer = NULL;
        size_t n_answer = 0;
        char buf[512];
        int32_t t[16];
        for (;;) {
            size_t n;
            r = eli_gen_next(g, t, 16, &n, buf, sizeof buf, NULL, NULL, &interrupted, &err);
            if (r < 0) break;
            size_t bl = strlen(buf);
            char *grown = realloc(answer, n_answer + bl + 1);
            if (!grown) break;
            answer = grown;
            memcpy(answer + n_answer, buf, bl + 1);
            n_answer += bl;
            fputs(buf, stdout);
            fflush(stdout);
            if (r == 1) break;
        }
        double t2 = cli_now();
        if (r == ELI_ERR_CANCELLED) printf(" (stopped)");
        else if (r < 0) printf("\n%s", err.msg);
        printf("\n");
        fprintf(stderr, "[new prompt tokens %lld (kept %lld), %.1f ms | %lld tokens, %.1f tok/s]\n",
                (long long)n_ids - (long long)kept, (long long)kept, 1e3 * (t1 - t0), (long long)eli_gen_n_generated(g),
                (double)eli_gen_n_generated(g) / (t2 - t1 > 0 ? t2 - t1 : 1));
        conv_add(&conv, "assistant", answer ? answer : "", n_answer);
        free(answer);
        /* a cancelled answer leaves the stream cancelled; the next turn goes on from the kept prefix */
    }
    free(line);
    conv_clear(&conv, 0);
    free(conv.role), free(conv.content);
    eli_gen_free(g);
    eli_tokenizer_free(tok);
    eli_model_free(m);
    return rc;
}
