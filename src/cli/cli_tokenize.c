/* eliza-infer tokenize: token ids of a text (stdin or --text), or of every case of a JSONL file.
 *
 *   eliza-infer tokenize -m FILE [--no-bos] [--parse-special] [--text STR]
 *   eliza-infer tokenize -m FILE --jsonl CASES.jsonl
 *
 * The first form prints the ids separated by spaces and a newline (like llama-tokenize --ids without
 * brackets). The second reads one JSON object per line with "text", "add_special" (default true) and
 * "parse_special" (default false) and prints one JSON array of ids per input line, all in one process
 * so that the vocabulary is loaded once. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "gguf.h"
#include "json.h"
#include "tokenizer.h"

static void usage(void) {
    printf(
            "usage: eliza-infer tokenize -m FILE [--no-bos] [--parse-special] [--text STR]\n"
            "       eliza-infer tokenize -m FILE --jsonl CASES.jsonl\n"
            "\n"
            "  -m, --model FILE   GGUF with a gemma4 tokenizer (a vocab-only GGUF is enough)\n"
            "  --no-bos           do not prepend <bos> (add_special = false)\n"
            "  --parse-special    match control-token text such as <|turn> (parse_special = true)\n"
            "  --text STR         text to tokenize (default: all of stdin)\n"
            "  --jsonl FILE       one JSON object per line: {\"text\", \"add_special\", \"parse_special\"};\n"
            "                     prints one JSON array of ids per line\n");
}

/* Reads a whole stream into a malloc'ed buffer (NUL-terminated for convenience). */
static char *read_stream(FILE *fp, size_t *len) {
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    if (!buf) return NULL;
    for (;;) {
        if (cap - n < 4096) {
            char *p = cap > SIZE_MAX / 2 ? NULL : realloc(buf, cap * 2);
            if (!p) {
                free(buf);
                return NULL;
            }
            buf = p;
            cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - n - 1, fp);
        n += got;
        if (got == 0) break;
    }
    if (ferror(fp)) {
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

static void print_ids(const int32_t *ids, size_t n, int json) {
    if (json) putchar('[');
    for (size_t i = 0; i < n; i++) {
        if (i) fputs(json ? "," : " ", stdout);
        printf("%d", (int)ids[i]);
    }
    if (json) putchar(']');
    putchar('\n');
}

/* One JSONL file: returns the exit status. */
static int run_jsonl(const eli_tokenizer *tok, const char *path) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return cli_die("%s: cannot open: %s", path, strerror(errno));
    size_t len;
    char *all = read_stream(fp, &len);
    fclose(fp);
    if (!all) return cli_die("%s: read error or out of memory", path);

    int status = 0;
    size_t line_no = 0;
    for (size_t pos = 0; pos < len && status == 0;) {
        const char *line = all + pos;
        const char *nl = memchr(line, '\n', len - pos);
        size_t n = nl ? (size_t)(nl - line) : len - pos;
        pos += n + (nl ? 1 : 0);
        line_no++;
        if (n && line[n - 1] == '\r') n--;
        size_t k = 0;
        while (k < n && (line[k] == ' ' || line[k] == '\t')) k++;
        if (k == n) continue; /* blank line */

        eli_error err = {0};
        eli_json *obj = eli_json_parse(line, n, &err);
        if (!obj) {
            status = cli_die("%s:%zu: %s", path, line_no, err.msg);
            break;
        }
        const eli_json *text = eli_json_get(obj, "text");
        if (obj->type != ELI_JSON_OBJECT || !text || text->type != ELI_JSON_STRING) {
            status = cli_die("%s:%zu: expected an object with a string field \"text\"", path, line_no);
        } else {
            int add_special = eli_json_get_bool(obj, "add_special", 1);
            int parse_special = eli_json_get_bool(obj, "parse_special", 0);
            int32_t *ids;
            size_t n_ids;
            if (eli_tokenize(tok, text->str, text->str_len, add_special, parse_special, &ids, &n_ids, &err))
                status = cli_die("%s:%zu: %s", path, line_no, err.msg);
            else {
                print_ids(ids, n_ids, 1);
                free(ids);
            }
        }
        eli_json_free(obj);
    }
    free(all);
    if (status == 0 && (fflush(stdout) || ferror(stdout))) return cli_die("write error on stdout");
    return status;
}

int cli_tokenize(int argc, char **argv) {
    const char *model = NULL, *text = NULL, *jsonl = NULL;
    int add_special = 1, parse_special = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage();
            return 0;
        } else if (!strcmp(a, "-m") || !strcmp(a, "--model") || !strcmp(a, "--text") || !strcmp(a, "--jsonl")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "eliza-infer: %s needs a value\n", a);
                return 2;
            }
            const char *v = argv[++i];
            if (!strcmp(a, "--text"))
                text = v;
            else if (!strcmp(a, "--jsonl"))
                jsonl = v;
            else
                model = v;
        } else if (!strcmp(a, "--no-bos")) {
            add_special = 0;
        } else if (!strcmp(a, "--parse-special")) {
            parse_special = 1;
        } else {
            fprintf(stderr, "eliza-infer: tokenize: unknown option '%s' (see 'eliza-infer tokenize --help')\n", a);
            return 2;
        }
    }
    if (!model) {
        fprintf(stderr, "eliza-infer: tokenize: -m FILE is required (see 'eliza-infer tokenize --help')\n");
        return 2;
    }
    if (jsonl && (text || !add_special || parse_special)) {
        fprintf(stderr, "eliza-infer: tokenize: --jsonl takes its options from each line; "
                        "it cannot be combined with --text, --no-bos or --parse-special\n");
        return 2;
    }

    eli_error err = {0};
    eli_gguf_file *f = eli_gguf_open(model, &err);
    if (!f) return cli_die("%s", err.msg); /* eli_gguf_open names the file */
    eli_tokenizer *tok = eli_tokenizer_load(f, &err);
    eli_gguf_close(f); /* the tokenizer keeps its own copies */
    if (!tok) return cli_die("%s: %s", model, err.msg);

    int status;
    if (jsonl) {
        status = run_jsonl(tok, jsonl);
    } else {
        char *owned = NULL;
        size_t len;
        if (text) {
            len = strlen(text);
        } else {
            owned = read_stream(stdin, &len);
            if (!owned) {
                eli_tokenizer_free(tok);
                return cli_die("stdin: read error or out of memory");
            }
            text = owned;
        }
        int32_t *ids;
        size_t n;
        if (eli_tokenize(tok, text, len, add_special, parse_special, &ids, &n, &err)) {
            status = cli_die("%s", err.msg);
        } else {
            print_ids(ids, n, 0);
            free(ids);
            status = fflush(stdout) || ferror(stdout) ? cli_die("write error on stdout") : 0;
        }
        free(owned);
    }
    eli_tokenizer_free(tok);
    return status;
}
