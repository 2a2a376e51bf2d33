/* eliza-infer subcommands. Each returns the process exit status (0 ok, 1 error, 2 usage). */
#ifndef ELI_CLI_H
#define ELI_CLI_H

#include <stddef.h>
#include <stdint.h>

int cli_info(int argc, char **argv);
int cli_logits(int argc, char **argv);
int cli_tokenize(int argc, char **argv);
int cli_run(int argc, char **argv);
int cli_chat(int argc, char **argv);
int cli_chat_template(int argc, char **argv);
int cli_plan(int argc, char **argv);
int cli_bench_tokenizer(int argc, char **argv);
int cli_bench(int argc, char **argv);
int cli_synth(int argc, char **argv);

/* Prints "eliza-infer: <msg>" to stderr and returns 1. */
int cli_die(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

/* Parses a decimal integer option value; returns 0 on success, prints an error and returns -1 otherwise. */
int cli_parse_int(const char *opt, const char *s, long long lo, long long hi, long long *out);
int cli_parse_float(const char *opt, const char *s, double *out);

/* Shared by run / chat / bench (cli_run.c). */
struct eli_gen_params;
struct eli_model;
struct eli_tokenizer;
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

/* Path of the embedded default model (malloc'ed), or NULL when it is not installed. */
char *cli_default_model(void);

/* "f32" / "f16" to a KV cache type; prints an error and returns -1 otherwise. */
int cli_parse_kv_type(const char *s, uint32_t *out);
/* Whitespace- or comma-separated token ids into a malloc'ed array; prints an error and returns -1. */
int cli_parse_tokens(const char *s, int32_t **out, size_t *n_out);

#endif
