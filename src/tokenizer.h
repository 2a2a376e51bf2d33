/* Gemma 4 tokenizer ("gemma4" in GGUF): SentencePiece-style BPE over raw UTF-8 with byte fallback,
 * reproducing llama.cpp's tokenization and detokenization id for id and byte for byte.
 *
 * Encoding (eli_tokenize):
 *   1. Special-token partition: CONTROL tokens (only when parse_special) and USER_DEFINED tokens (always)
 *      are cut out of the text, longest token text first, every occurrence left to right.
 *   2. In each remaining fragment every ' ' becomes U+2581 '▁'; the bytes are read as UTF-8 the way
 *      llama.cpp reads them (a malformed sequence becomes U+FFFD, one byte at a time).
 *   3. The fragment is split into maximal runs of '\n' and of everything else (one linear pass).
 *      A newline-only run that is itself a token is emitted whole.
 *   4. Otherwise BPE: start from single characters and repeatedly merge the adjacent pair with the
 *      lowest merge rank (leftmost first on ties). A final piece that is not a token is emitted as its
 *      bytes, `<0xXX>` each.
 *   add_special prepends BOS (Gemma 4 always adds BOS; llama.cpp forces it on).
 *
 * Load-time fix-ups copied in behaviour from llama.cpp: the end-of-generation set is found by token text
 * (`<eos>`, `<turn|>`, `<|tool_response>`, ...) and those tokens gain the CONTROL attribute; `</s>` is
 * removed from it again when `<|tool_response>` exists. Net effect on the Gemma 4 vocab:
 * `<|tool_response>` is matched only with parse_special and hidden in plain detokenization, `</s>` is
 * ordinary text.
 *
 * The tokenizer copies everything it needs out of the GGUF: the file may be closed after load.
 * A loaded tokenizer is immutable; it may be shared by threads. A decoder belongs to one thread. */
#ifndef ELI_TOKENIZER_H
#define ELI_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "gguf.h"

/* GGUF token types (tokenizer.ggml.token_type), as stored in the file. */
enum eli_token_type {
    ELI_TOKEN_UNDEFINED = 0,
    ELI_TOKEN_NORMAL = 1,
    ELI_TOKEN_UNKNOWN = 2,
    ELI_TOKEN_CONTROL = 3,
    ELI_TOKEN_USER_DEFINED = 4,
    ELI_TOKEN_UNUSED = 5,
    ELI_TOKEN_BYTE = 6
};

typedef struct eli_tokenizer eli_tokenizer;

/* Loads the tokenizer from the GGUF metadata (tokenizer.ggml.*). Requires model "gemma4", the token,
 * token_type and merges arrays, and bos_token_id; validates counts, ids and byte tokens. NULL + err
 * (naming the key) on failure. */
eli_tokenizer *eli_tokenizer_load(const eli_gguf_file *f, eli_error *err);
void eli_tokenizer_free(eli_tokenizer *t);

/* Vocabulary size (number of token ids). */
int32_t eli_tokenizer_n_vocab(const eli_tokenizer *t);
/* Special ids from the metadata; -1 when absent. */
int32_t eli_tokenizer_bos(const eli_tokenizer *t);
int32_t eli_tokenizer_eos(const eli_tokenizer *t);
int32_t eli_tokenizer_unk(const eli_tokenizer *t);
int32_t eli_tokenizer_pad(const eli_tokenizer *t);
/* Whether add_special prepends BOS (always 1 for gemma4). */
int eli_tokenizer_add_bos(const eli_tokenizer *t);
/* Entries of tokenizer.ggml.merges (rank = index), including any that can never apply. */
int eli_tokenizer_n_merges(const eli_tokenizer *t);

/* The token's text as stored in the vocabulary (with '▁' for spaces, `<0x41>` for byte tokens); not
 * NUL-terminated, *len receives its length. NULL for an id out of range. */
const char *eli_tokenizer_token_text(const eli_tokenizer *t, int32_t id, size_t *len);
/* The bytes the token renders to in detokenization (llama.cpp's token_to_piece): NORMAL tokens with
 * '▁' turned back into ' ', BYTE tokens as their one byte, USER_DEFINED tokens as their text, CONTROL
 * tokens as their text only when unparse_special (empty otherwise). Not NUL-terminated; NULL for an id
 * out of range. */
const char *eli_tokenizer_token_piece(const eli_tokenizer *t, int32_t id, int unparse_special, size_t *len);
/* Token id of an exact vocabulary text, or -1. */
int32_t eli_tokenizer_find(const eli_tokenizer *t, const char *text, size_t len);
/* GGUF token type as stored (enum eli_token_type), -1 for an id out of range. */
int eli_tokenizer_token_type(const eli_tokenizer *t, int32_t id);
/* End-of-generation token (`<eos>`, `<turn|>`, `<|tool_response>` on Gemma 4). 0 for bad ids. */
int eli_tokenizer_is_eog(const eli_tokenizer *t, int32_t id);
/* CONTROL after llama.cpp's load-time fix-ups (so `<|tool_response>` counts). 0 for bad ids. */
int eli_tokenizer_is_control(const eli_tokenizer *t, int32_t id);

/* Tokenizes len bytes of text (any bytes; NUL allowed). On success *out_ids is a malloc'ed array of
 * *out_n ids (never NULL, free() it). Returns ELI_OK or a negative ELI_ERR_*. */
int eli_tokenize(const eli_tokenizer *t, const char *text, size_t len, int add_special, int parse_special,
                 int32_t **out_ids, size_t *out_n, eli_error *err);

/* llama_detokenize: concatenates the token pieces (CONTROL tokens only with unparse_special), after
 * dropping a leading BOS when remove_special, then applies llama.cpp's clean-up of spaces before
 * punctuation (Gemma 4 sets clean_spaces). *out is malloc'ed and NUL-terminated (the text itself may
 * contain NULs: use *out_len). An id out of range is an error. */
int eli_detokenize(const eli_tokenizer *t, const int32_t *ids, size_t n, int remove_special, int unparse_special,
                   char **out, size_t *out_len, eli_error *err);

/* Streaming decoder: feed ids one at a time, get the bytes that complete UTF-8 characters. A trailing
 * partial UTF-8 sequence (e.g. the first of the byte tokens <0xE2><0x82><0xAC>) is held back until the
 * bytes that complete it arrive; bytes that can never become valid UTF-8 are passed through unchanged,
 * so the concatenated output equals the concatenated token pieces exactly. The space clean-up of
 * eli_detokenize is not applied (as in llama.cpp's streamed output). */
typedef struct eli_decoder eli_decoder;

eli_decoder *eli_decoder_new(const eli_tokenizer *t, int unparse_special, eli_error *err);
void eli_decoder_free(eli_decoder *d);
/* Forgets held bytes (start of a new sequence). */
void eli_decoder_reset(eli_decoder *d);
/* Feeds one id. On success *out / *out_len hold the newly completed bytes (possibly 0 of them), valid
 * until the next call on d. An id out of range is an error and leaves d unchanged. */
int eli_decoder_feed(eli_decoder *d, int32_t id, const char **out, size_t *out_len, eli_error *err);
/* Returns whatever is still held (an incomplete sequence) and empties d. */
void eli_decoder_flush(eli_decoder *d, const char **out, size_t *out_len);

#endif
