/* eliza-infer: the command-line front end. One subcommand per file (cli_<name>.c). */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

typedef struct {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *help;
} cli_command;

static const cli_command commands[] = {
    {"info", cli_info, "print architecture, hyperparameters and tensor statistics of a GGUF"},
    {"logits", cli_logits, "write the logits of every position of a token sequence"},
    {"run", cli_run, "generate text from a prompt, streaming it to stdout"},
    {"chat", cli_chat, "interactive multi-turn chat"},
    {"tokenize", cli_tokenize, "print the token ids of a text"},
    {"chat-template", cli_chat_template, "print the Gemma 4 prompt for a JSON conversation"},
    {"plan", cli_plan, "predict resident memory (weights, KV, PLE, scratch, peak RSS) for a context"},
    {"bench-tokenizer", cli_bench_tokenizer, "tokenizer throughput in MB/s over files"},
    {"bench", cli_bench, "measure prefill / decode speed, TTFT, peak RSS and memory bandwidth"},
    {"bench-chat", cli_bench_chat, "a long multi-turn chat: prefix reuse, TTFT of follow-ups vs fresh prompts, RSS per turn"},
    {"synth", cli_synth, "write a random-weight Gemma 4 GGUF with the true geometry of a model size"},
    {"quantize", cli_quantize, "write a GGUF in another weight type (llama-quantize's mixtures, byte for byte)"},
    {"bench-kv", cli_bench_kv, "decode attention's kernels per cached row for every KV cache type"},
    {"grammar", cli_grammar, "check texts against GBNF grammars; print the GBNF of a JSON schema"},
    {"bench-grammar", cli_bench_grammar, "per-token cost of a grammar constraint over a whole vocabulary"},
    {"embed-image", cli_embed_image, "write an image's soft-token embeddings (vision projector) as float32"},
    {"bench-image", cli_bench_image, "measure the vision tower's image encode time"},
    {"embed-audio", cli_embed_audio, "write the audio tower's soft-token embeddings of a WAV file"},
    {"bench-audio", cli_bench_audio, "time the audio tower on a WAV file: encode ms and real-time factor"},
    {"transcribe", cli_transcribe, "transcribe a WAV file (the projector's audio tower and the text model, greedy)"},
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

char *cli_read_file(const char *path, size_t *len) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return cli_die("%s: cannot open: %s", path, strerror(errno)), NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        if (cap - n < 2) { /* room for one more byte and the NUL */
            char *g = cap > SIZE_MAX / 2 ? NULL : realloc(buf, cap * 2);
            if (!g) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = g;
            cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - n - 1, fp);
        n += got;
        if (got == 0) break;
    }
    int bad = ferror(fp);
    fclose(fp);
    if (!buf || bad) {
        free(buf);
        return cli_die("%s: %s", path, bad ? "read error" : "out of memory"), NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

/* The embedded default model: eliza-1-nano next to the binary (build tree: <exe>/../models, installed:
 * <prefix>/share/elizainference/models), never the current directory. */
char *cli_default_model(void) {
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return NULL;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash) return NULL;
    *slash = '\0';
    static const char *const rel[] = {"/../models/eliza-1-nano", "/../share/elizainference/models/eliza-1-nano"};
    for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
        char path[4200];
        snprintf(path, sizeof path, "%s%s/text/eliza-1-nano.gguf", exe, rel[i]);
        if (access(path, R_OK) == 0) return strdup(path);
    }
    return NULL;
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
