/* eliza-infer subcommands. Each returns the process exit status (0 ok, 1 error, 2 usage). */
#ifndef ELI_CLI_H
#define ELI_CLI_H

#include <stddef.h>
#include <stdint.h>

int cli_info(int argc, char **argv);
int cli_logits(int argc, char **argv);
int cli_tokenize(int argc, char **argv);
int cli_chat_template(int argc, char **argv);

/* Prints "eliza-infer: <msg>" to stderr and returns 1. */
int cli_die(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

/* Parses a decimal integer option value; returns 0 on success, prints an error and returns -1 otherwise. */
int cli_parse_int(const char *opt, const char *s, long long lo, long long hi, long long *out);
int cli_parse_float(const char *opt, const char *s, double *out);

/* "f32" / "f16" to a KV cache type; prints an error and returns -1 otherwise. */
int cli_parse_kv_type(const char *s, uint32_t *out);
/* Whitespace- or comma-separated token ids into a malloc'ed array; prints an error and returns -1. */
int cli_parse_tokens(const char *s, int32_t **out, size_t *n_out);

#endif
