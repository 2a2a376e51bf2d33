/* eliza-infer chat-template: renders a conversation with the Gemma 4 chat template and prints the prompt
 * text exactly (no newline is added), e.g. to feed `eliza-infer tokenize` or to diff against another
 * implementation. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat.h"
#include "cli.h"
#include "json.h"

static void usage(FILE *out) {
    fprintf(out,
            "usage: eliza-infer chat-template --messages FILE.json [--tools FILE.json] [--thinking]\n"
            "                                 [--no-generation-prompt]\n"
            "\n"
            "Prints the Gemma 4 prompt for a conversation.\n"
            "  --messages FILE        a JSON array of messages, or an object {\"messages\": [...], \"tools\": [...]}\n"
            "  --tools FILE           a JSON array of tool declarations (overrides \"tools\" in the messages file)\n"
            "  --thinking             enable thinking (<|think|> in the system turn)\n"
            "  --no-generation-prompt do not open the model's turn at the end\n");
}

static eli_json *load_json(const char *path) {
    size_t len;
    char *text = cli_read_file(path, &len);
    if (!text) return NULL;
    eli_error err;
    eli_error_clear(&err);
    eli_json *v = eli_json_parse(text, len, &err);
    free(text);
    if (!v) cli_die("%s: %s", path, err.msg);
    return v;
}

int cli_chat_template(int argc, char **argv) {
    const char *messages_path = NULL, *tools_path = NULL;
    eli_chat_options opt = eli_chat_default_options();
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--messages") || !strcmp(a, "--tools")) {
            if (i + 1 >= argc) return cli_die("%s needs a value", a), 2;
            if (!strcmp(a, "--messages")) messages_path = argv[++i];
            else tools_path = argv[++i];
        } else if (!strcmp(a, "--thinking")) {
            opt.enable_thinking = 1;
        } else if (!strcmp(a, "--no-generation-prompt")) {
            opt.add_generation_prompt = 0;
        } else {
            fprintf(stderr, "eliza-infer chat-template: unknown option '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (!messages_path) {
        usage(stderr);
        return 2;
    }

    int rc = 1;
    eli_json *doc = load_json(messages_path);
    eli_json *tools_doc = tools_path ? load_json(tools_path) : NULL;
    char *prompt = NULL;
    if (!doc || (tools_path && !tools_doc)) goto done;

    eli_error err;
    eli_error_clear(&err);
    const eli_json *messages, *tools;
    if (eli_chat_split_document(doc, &messages, &tools, &err)) {
        cli_die("%s: %s", messages_path, err.msg);
        goto done;
    }
    opt.tools = tools_doc ? tools_doc : tools;
    size_t len;
    if (eli_chat_render(messages, &opt, &prompt, &len, &err)) {
        cli_die("%s", err.msg);
        goto done;
    }
    if (fwrite(prompt, 1, len, stdout) != len || fflush(stdout)) {
        cli_die("cannot write the prompt");
        goto done;
    }
    rc = 0;
done:
    free(prompt);
    eli_json_free(doc);
    eli_json_free(tools_doc);
    return rc;
}
