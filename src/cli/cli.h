/* eliza-infer subcommands. Each returns the process exit status (0 ok, 1 error, 2 usage). */
#ifndef ELI_CLI_H
#define ELI_CLI_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "audio.h"
#include "config.h"
#include "engine.h"
#include "exec.h"
#include "media_prompt.h"
#include "vision.h"

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
int cli_grammar(int argc, char **argv);
int cli_bench_grammar(int argc, char **argv);
int cli_embed_image(int argc, char **argv);
int cli_bench_image(int argc, char **argv);
int cli_embed_audio(int argc, char **argv);
int cli_bench_audio(int argc, char **argv);
int cli_transcribe(int argc, char **argv);

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
/* A model as the commands use it: loaded, prepared on the default executor with the options of the
 * environment's knobs (config.h: ELIZA_LLM_REPACK, ELI_KERNELS), and its tokenizer (NULL for a drafter). */
typedef struct cli_model {
    eli_config cfg;
    eli_model *m;
    eli_xmodel *xm;
    eli_tokenizer *tok;
} cli_model;
/* Loads path (NULL = the embedded default model); prints and returns 1 on error (cm then holds nothing). */
int cli_load(const char *path, cli_model *cm);
/* The same without the tokenizer (a model file without one is fine). */
int cli_prepare(const char *path, cli_model *cm);
/* Loads an MTP drafter for target into p (draft, default window); NULL path: nothing. 1 on error. */
int cli_load_drafter(const char *path, const cli_model *target, struct eli_gen_params *p, cli_model *d);
void cli_unload(cli_model *cm);
/* The generation defaults with the environment's knobs: the sequence's memory (ELIZA_LLM_RESERVE,
 * ELIZA_LLM_KV_CHECKPOINTS) and the seed (ELIZA_LLM_SEED). Prints and returns 1 on a bad value. */
int cli_gen_params(struct eli_gen_params *p);

/* Shared by bench / bench-chat (cli_bench.c). */
/* A paragraph of plain English: the default text prompt of the benchmarks. */
extern const char cli_sample_text[];

/* A conversation as chat / bench-chat drive it (cli_conversation.c). A user message may carry media (an
 * image or audio clip each), placed before its text. */
typedef struct cli_conversation {
    char **role, **content;
    int *n_media; /* per message: how many of `media` are its own (they follow the earlier messages') */
    size_t n, cap;
    struct cli_media_item *media; /* every message's media, in order */
    size_t n_items, cap_items;
} cli_conversation;
/* Appends a message (content: len bytes, copied); -1 when out of memory (nothing added). */
int cli_conv_add(cli_conversation *c, const char *role, const char *content, size_t len);
/* Gives the last message k media (their rows now belong to the conversation); -1 when out of memory
 * (nothing attached, the items still the caller's). */
int cli_conv_attach(cli_conversation *c, struct cli_media_item *items, int k);
/* Drops every message (but a leading system message when keep_system), or the last one. */
void cli_conv_clear(cli_conversation *c, int keep_system);
void cli_conv_drop_last(cli_conversation *c);
void cli_conv_free(cli_conversation *c);
/* The whole conversation rendered with the chat template plus the generation prompt, cut at its media
 * (*mp; *rows malloc'ed: the media's rows, in order). */
int cli_conv_prompt(const cli_conversation *c, const eli_tokenizer *tok, eli_media_prompt *mp, eli_media_rows **rows,
                    eli_error *err);
/* The token ids of a conversation without media (*ids malloc'ed). */
int cli_conv_tokens(const cli_conversation *c, const eli_tokenizer *tok, int32_t **ids, size_t *n_ids, eli_error *err);
/* A turn's prompt: keeps the longest common prefix of the session's committed positions and the prompt
 * (reset_keep; *kept receives what was kept) and prefills the rest: ids, or a prompt with media. */
int cli_turn_prefill(eli_gen *g, const int32_t *ids, size_t n_ids, const atomic_int *cancel, int64_t *kept, eli_error *err);
int cli_turn_prefill_prompt(eli_gen *g, const eli_media_prompt *mp, const eli_media_rows *rows, const atomic_int *cancel,
                            int64_t *kept, int64_t *n_prompt, eli_error *err);
/* Generates the answer to the end of the stream, collecting its text (*answer malloc'ed, also on error)
 * and echoing it to echo (may be NULL); *t_first (may be NULL) receives the cli_now() of the first token
 * (0 if none). Returns 1 when the stream ended, negative on error (ELI_ERR_CANCELLED: cancel was set). */
int cli_turn_answer(eli_gen *g, FILE *echo, const atomic_int *cancel, char **answer, size_t *n_answer, double *t_first,
                    eli_error *err);

/* The tokenizer of any GGUF (a vocab-only file is enough); prints why and returns 1 on failure. */
int cli_load_vocab(const char *path, struct eli_tokenizer **out);

/* Path of the embedded default model (malloc'ed), or NULL when it is not installed. */
char *cli_default_model(void);

/* The KV cache type options: --kv TYPE (K and V), --kv-k TYPE, --kv-v TYPE (any eli_kv_type_from_name
 * name). Returns 1 when opt is one of them and its value v was taken, 0 when opt is none of them, -1 after
 * printing an error (missing or unknown value). */
int cli_parse_kv_option(const char *opt, const char *v, uint32_t *type_k, uint32_t *type_v);

/* A multimodal tower for the CLI (cli_tower.c): the projector, its bound vision or audio tower, made
 * ready on the default executor with the environment's options (ELI_KERNELS, ELIZA_LLM_REPACK). */
typedef struct cli_tower {
    eli_mmproj *proj;
    eli_vision *vision;
    eli_audio *audio;
    eli_xtower *xt;
    int threads; /* as resolved (0 asked: one per CPU) */
} cli_tower;
/* Opens the kind of tower of a projector file; prints why and returns 1 on failure. */
int cli_tower_open(const char *mmproj, eli_mm_tower kind, int threads, cli_tower *t);
void cli_tower_close(cli_tower *t);

/* Images and audio in prompts (cli_media.c): a file's soft tokens. */
typedef struct cli_media_item {
    eli_media_kind kind;
    float *rows; /* [n][n_embd], malloc'ed */
    int64_t n;
    int n_embd;
} cli_media_item;
void cli_media_item_free(cli_media_item *m);
/* Encodes files on the towers of projector mmproj, each opened when first needed (threads <= 0: one per
 * CPU) and refused unless its embeddings are n_embd_text wide. */
typedef struct cli_encoder {
    const char *mmproj;
    int threads, n_embd_text;
    cli_tower vision, audio;
} cli_encoder;
/* An image (PNG, JPEG, WebP) or a WAV file into *out; prints why and returns 1 on failure. */
int cli_encode(cli_encoder *e, eli_media_kind kind, const char *path, cli_media_item *out);
void cli_encoder_close(cli_encoder *e);
/* The --image / --audio files of a command line, in order. */
#define CLI_MAX_MEDIA 16
typedef struct cli_media_list {
    int n;
    eli_media_kind kind[CLI_MAX_MEDIA];
    const char *path[CLI_MAX_MEDIA];
} cli_media_list;
/* Consumes --mmproj FILE, --image IMG, --audio WAV at argv[*i]: 1 consumed, 0 not one of them, -1 bad value. */
int cli_media_option(int argc, char **argv, int *i, const char **mmproj, cli_media_list *list);

/* What run and transcribe generate from (cli_run.c): a prompt, optionally in the chat template (always
 * with media: one user turn holding the media, in order, then the prompt). */
typedef struct cli_prompt_args {
    const char *model, *prompt, *system, *draft, *mmproj;
    const char *gbnf_file, *schema_file; /* a grammar for the output (--grammar, --json-schema, --json) */
    int chat, json;
    cli_media_list media;
} cli_prompt_args;
/* Loads, encodes, prefills and streams the answer to stdout (stats on stderr); the exit status. */
int cli_generate(const cli_prompt_args *a, struct eli_gen_params *p);

/* Audio input for embed-audio / bench-audio (cli_embed_audio.c): the tower and the WAV decoded to 16 kHz
 * mono. */
typedef struct cli_audio {
    cli_tower tower;
    float *pcm;
    int64_t n; /* samples at 16 kHz */
} cli_audio;
/* Opens both (threads <= 0: one per CPU); prints why and returns 1 on failure. */
int cli_audio_open(const char *mmproj, const char *wav, int threads, cli_audio *a);
void cli_audio_close(cli_audio *a);
/* Consumes --mmproj FILE, --audio WAV, -t N at argv[*i]: 1 consumed, 0 not one of them, -1 bad value. */
int cli_audio_option(int argc, char **argv, int *i, const char **mmproj, const char **wav, int *threads);

/* The GBNF text of --grammar FILE, --json-schema FILE (converted) or --json (any JSON value), the first
 * given; malloc'ed, *len its length; NULL after printing why (or when none is given). */
char *cli_grammar_text(const char *gbnf_file, const char *schema_file, int json, size_t *len);

/* "f32" / "f16" to a KV cache type; prints an error and returns -1 otherwise. */
int cli_parse_kv_type(const char *s, uint32_t *out);
/* Whitespace- or comma-separated token ids into a malloc'ed array; prints an error and returns -1. */
int cli_parse_tokens(const char *s, int32_t **out, size_t *n_out);

#endif
