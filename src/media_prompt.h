/* A prompt with images and audio in it, as the model reads it (../shared/spec/gemma4-mm.md "In the prompt"):
 *   image: the text "<|image>", its soft tokens as one bidirectional span, the text "<image|>";
 *   audio: the text "<|audio>", the soft tokens of all its 30-second chunks (causal; one span per chunk, so a
 *          reset_keep can keep whole chunks), the text "<audio|>".
 * The chat template renders a media content part as a placeholder (chat.h ELI_CHAT_IMAGE_PART,
 * ELI_CHAT_AUDIO_PART); the rendered text is cut there into n_media + 1 runs of token ids, each media's
 * markers attached to the text around it and tokenised with it (special tokens parsed), as llama.cpp's mtmd
 * tokenises the text chunks around a media. Media i's rows go between run i and run i + 1.
 *
 * Shared by the C ABI (describe_image, the ASR streams, prefill_image / prefill_audio) and the CLI (run,
 * transcribe, chat), which prefill through a sink: a generation session or a stream behind the ABI. */
#ifndef ELI_MEDIA_PROMPT_H
#define ELI_MEDIA_PROMPT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "engine.h"
#include "error.h"
#include "tokenizer.h"

typedef enum eli_media_kind { ELI_MEDIA_IMAGE = 0, ELI_MEDIA_AUDIO = 1 } eli_media_kind;

/* The instructions of describe_image and transcription when the caller gives none. */
#define ELI_VISION_DEFAULT_PROMPT "Describe this image."
#define ELI_ASR_DEFAULT_PROMPT "Transcribe this audio."

typedef struct eli_media_prompt {
    int n_media;
    eli_media_kind *kinds; /* [n_media] */
    int32_t **ids;         /* [n_media + 1] runs */
    size_t *n_ids;
} eli_media_prompt;

/* A media's soft-token embeddings: n rows of n_embd floats (the text model's width). */
typedef struct eli_media_rows {
    const float *rows;
    int64_t n;
    int n_embd;
} eli_media_rows;

/* Where a prompt goes: token ids, or embedding rows as one span (bidirectional or causal). */
typedef struct eli_media_sink {
    void *p;
    int (*ids)(void *p, const int32_t *ids, size_t n, eli_error *err);
    int (*rows)(void *p, const float *rows, int64_t n, int bidir, eli_error *err);
} eli_media_sink;

/* Rows per span of audio: one 30-second chunk's soft tokens. */
int64_t eli_media_audio_span(void);

/* The chat-template rendering of an optional system turn and one user turn whose content is the media parts
 * (kinds, in order) and then text (NULL: none), with the generation prompt (*out malloc'ed). */
int eli_media_render_turn(const char *system, const char *text, const eli_media_kind *kinds, int n_media, char **out,
                          eli_error *err);

/* Cuts rendered text (len bytes) at its media placeholders, which must be n_media of the given kinds in
 * order (text that spells a placeholder itself is refused: the count or order no longer matches), and
 * tokenises the runs (special tokens parsed, nothing added: the rendering spells "<bos>"). */
int eli_media_prompt_split(const eli_tokenizer *tok, const char *text, size_t len, const eli_media_kind *kinds,
                           int n_media, eli_media_prompt *out, eli_error *err);
/* eli_media_render_turn, then eli_media_prompt_split. */
int eli_media_user_turn(const eli_tokenizer *tok, const char *system, const char *text, const eli_media_kind *kinds,
                        int n_media, eli_media_prompt *out, eli_error *err);
void eli_media_prompt_free(eli_media_prompt *p); /* NULL-safe, leaves it empty */

/* The prompt as a session's committed positions: the ids, ELI_MEDIA_ID for each row (*out malloc'ed). */
int eli_media_prompt_flatten(const eli_media_prompt *p, const eli_media_rows *media, int32_t **out, int64_t *n,
                             eli_error *err);
/* Sends the positions from `from` on (0: the whole prompt) to the sink: the runs' ids and the media's rows.
 * from may fall inside a run or an audio's rows, not inside an image's (its rows only exist together). */
int eli_media_prompt_prefill(const eli_media_prompt *p, const eli_media_rows *media, int64_t from,
                             const eli_media_sink *sink, eli_error *err);
/* One media's rows from row `from` on: an image as one bidirectional span, audio as causal spans that end
 * at its 30-second chunks' boundaries. */
int eli_media_rows_prefill(eli_media_kind kind, const eli_media_rows *m, int64_t from, const eli_media_sink *sink,
                           eli_error *err);

/* A generation session as a sink (cancel may be NULL). */
typedef struct eli_media_gen_sink {
    eli_gen *g;
    const atomic_int *cancel;
} eli_media_gen_sink;
eli_media_sink eli_media_sink_of_gen(eli_media_gen_sink *s);

#endif
