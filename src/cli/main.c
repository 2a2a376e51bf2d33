/* eliza-infer: the command-line front end. One subcommand per file (cli_<name>.c). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

typedef struct {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *help;
} cli_command;

static const cli_command commands[] = {
    {"info", cli_info, "print architecture, hyperparameters and tensor statistics of a GGUF"},
    {"logits", cli_logits, "write the logits of every position of a token sequence"},
    {"tokenize", cli_tokenize, "print the token ids of a text"},
    {"chat-template", cli_chat_template, "print the Gemma 4 prompt for a JSON conversation"},
};

static void usage(FILE *out) {
    fprintf(out, "usage: eliza-infer <command> [options]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  %-14s %s\n", commands[i].name, commands[i].help);
    fprintf(out, "\n'eliza-infer <command> --help' shows the options of a command.\n");
}

int cli_die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "eliza-infer: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    return 1;
}

int cli_parse_int(const char *opt, const char *s, long long lo, long long hi, long long *out) {
    if (!s) return cli_die("%s needs a value", opt), -1;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return cli_die("%s: '%s' is not an integer in [%lld, %lld]", opt, s, lo, hi), -1;
    *out = v;
    return 0;
}

int cli_parse_float(const char *opt, const char *s, double *out) {
    if (!s) return cli_die("%s needs a value", opt), -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || v != v) return cli_die("%s: '%s' is not a number", opt, s), -1;
    *out = v;
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "eliza-infer: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
