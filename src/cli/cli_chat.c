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

#include "cli.h"
#include "engine.h"

static atomic_int interrupted;

static void on_sigint(int sig) {
    (void)sig;
    atomic_store(&interrupted, 1);
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
    eli_gen_params p;
    if (cli_gen_params(&p)) return 1;
    p.max_tokens = 512;
    p.seq.n_ctx = 4096;
    for (int i = 1; i < argc; i++) {
        int r = cli_parse_gen_option(argc, argv, &i, &p);
        if (r < 0) return 2;
        if (r) continue;
        if ((!strcmp(argv[i], "-m") || !strcmp(argv[i], "--model")) && i + 1 < argc) path = argv[++i];
        else if (!strcmp(argv[i], "--system") && i + 1 < argc) system = argv[++i];
        else if (!strcmp(argv[i], "--help")) return usage(stdout), 0;
        else return cli_bad_option("chat", argv[i], i + 1 < argc);
    }
    cli_model cm;
    if (cli_load(path, &cm)) return 1;
    eli_error err = {0};
    eli_gen *g = eli_gen_create(cm.xm->exec, cm.xm, cm.tok, &p, &err);
    if (!g) {
        cli_unload(&cm);
        return cli_die("%s", err.msg);
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigaction(SIGINT, &sa, NULL);

    cli_conversation conv = {0};
    if (system) cli_conv_add(&conv, "system", system, strlen(system));
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
            cli_conv_clear(&conv, 1);
            eli_gen_reset(g);
            printf("(conversation reset)\n");
            continue;
        }
        if (!len) continue;
        if (cli_conv_add(&conv, "user", line, (size_t)len)) break;
        int32_t *ids = NULL;
        size_t n_ids = 0;
        if (cli_conv_tokens(&conv, cm.tok, &ids, &n_ids, &err)) {
            cli_die("%s", err.msg);
            cli_conv_drop_last(&conv);
            continue;
        }
        int64_t kept;
        double t0 = cli_now();
        int r = cli_turn_prefill(g, ids, n_ids, &interrupted, &kept, &err);
        free(ids);
        if (r) {
            printf("%s\n", r == ELI_ERR_CANCELLED ? "(stopped)" : err.msg);
            cli_conv_drop_last(&conv);
            continue;
        }
        double t1 = cli_now();
        char *answer;
        size_t n_answer;
        r = cli_turn_answer(g, stdout, &interrupted, &answer, &n_answer, NULL, &err);
        double t2 = cli_now();
        if (r == ELI_ERR_CANCELLED) printf(" (stopped)");
        else if (r < 0) printf("\n%s", err.msg);
        printf("\n");
        fprintf(stderr, "[new prompt tokens %lld (kept %lld), %.1f ms | %lld tokens, %.1f tok/s]\n",
                (long long)n_ids - (long long)kept, (long long)kept, 1e3 * (t1 - t0), (long long)eli_gen_n_generated(g),
                (double)eli_gen_n_generated(g) / (t2 - t1 > 0 ? t2 - t1 : 1));
        cli_conv_add(&conv, "assistant", answer ? answer : "", n_answer);
        free(answer);
        /* a cancelled answer leaves the stream cancelled; the next turn goes on from the kept prefix */
    }
    free(line);
    cli_conv_free(&conv);
    eli_gen_free(g);
    cli_unload(&cm);
    return rc;
}
