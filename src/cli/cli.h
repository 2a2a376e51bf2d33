/* eliza-infer subcommands. Each returns the process exit status (0 ok, 1 error, 2 usage). */
#ifndef ELI_CLI_H
#define ELI_CLI_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "engine.h"

int cli_info(int argc, char **argv);
int cli_logits(int argc, char **argv);
int cli_tokenize(int argc, char **argv);
int cli_run(int argc, char **argv);
int cli_chat(int argc, char **argv);
int cli_chat_template(int argc, char **argv);
int cli_plan(int argc, char **argv);
int cli_bench_tokenizer(int argc, char **argv);
int cli_bench(int argc, char **argv);
int cli_bench_chat(int argc, char **argv);
int cli_synth(int argc, char **argv);
int cli_bench_kv(int argc, char **argv);
int cli_quantize(int argc, char **argv);

/* Prints "eliza-infer: <msg>" to stderr and returns 1. */
int cli_die(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

/* Parses a decimal integer option value; returns 0 on success, prints an error and returns -1 otherwise. */
int cli_parse_int(const char *opt, const char *s, long long lo, long long hi, long long *out);
int cli_parse_float(const char *opt, const char *s, double *out);
/* A whole file, malloc'ed and NUL-terminated (*len excludes the NUL); prints why and returns NULL on failure. */
char *cli_read_file(const char *path, size_t *len);

/* Shared by run / chat / bench (cli_run.c). */
double cli_now(void);
/* Consumes a generation option at argv[*i] (and its value): 1 consumed, 0 not one, -1 bad value. */
int cli_parse_gen_option(int argc, char **argv, int *i, struct eli_gen_params *p);
/* The one-line error for argv option opt that is unknown, or that lacks its value (has_next 0): returns 2. */
int cli_bad_option(const char *cmd, const char *opt, int has_next);
/* Loads path (NULL = the embedded default model) and its tokenizer; prints and returns 1 on error. */
int cli_load(const char *path, struct eli_model **m, struct eli_tokenizer **tok);
/* Loads an MTP drafter for target into p (draft, default window); NULL path: nothing. 1 on error. */
int cli_load_drafter(const char *path, const struct eli_model *target, struct eli_gen_params *p, struct eli_model **out);
/* The chat-template prompt of one user turn (and optional system turn), malloc'ed; NULL on error. */
char *cli_chat_prompt(const char *system, const char *user);

/* Shared by bench / bench-chat (cli_bench.c). */
/* A paragraph of plain English: the default text prompt of the benchmarks. */
extern const char cli_sample_text[];

/* A conversation as chat / bench-chat drive it (cli_conversation.c). */
typedef struct cli_conversation {
    char **role, **content;
    size_t n, cap;
} cli_conversation;
/* Appends a message (content: len bytes, copied); -1 when out of memory (nothing added). */
int cli_conv_add(cli_conversation *c, const char *role, const char *content, size_t len);
/* Drops every message (but a leading system message when keep_system), or the last one. */
void cli_conv_clear(cli_conversation *c, int keep_system);
void cli_conv_drop_last(cli_conversation *c);
void cli_conv_free(cli_conversation *c);
/* The token ids of the whole conversation rendered with the chat template plus the generation prompt
 * (*ids malloc'ed). */
int cli_conv_tokens(const cli_conversation *c, const eli_tokenizer *tok, int32_t **ids, size_t *n_ids, eli_error *err);
/* A turn's prompt: keeps the longest common prefix of the session's committed tokens and ids
 * (reset_keep; *kept receives what was kept) and prefills the rest. */
int cli_turn_prefill(eli_gen *g, const int32_t *ids, size_t n_ids, const atomic_int *cancel, int64_t *kept, eli_error *err);
/* Generates the answer to the end of the stream, collecting its text (*answer malloc'ed, also on error)
 * and echoing it to echo (may be NULL); *t_first (may be NULL) receives the cli_now() of the first token
 * (0 if none). Returns 1 when the stream ended, negative on error (ELI_ERR_CANCELLED: cancel was set). */
int cli_turn_answer(eli_gen *g, FILE *echo, const atomic_int *cancel, char **answer, size_t *n_answer, double *t_first,
                    eli_error *err);

/* Path of the embedded default model (malloc'ed), or NULL when it is not installed. */
char *cli_default_model(void);

/* The KV cache type options: --kv TYPE (K and V), --kv-k TYPE, --kv-v TYPE (any eli_kv_type_from_name
 * name). Returns 1 when opt is one of them and its value v was taken, 0 when opt is none of them, -1 after
 * printing an error (missing or unknown value). */
int cli_parse_kv_option(const char *opt, const char *v, uint32_t *type_k, uint32_t *type_v);
/* Whitespace- or comma-separated token ids into a malloc'ed array; prints an error and returns -1. */
int cli_parse_tokens(const char *s, int32_t **out, size_t *n_out);

#endif
