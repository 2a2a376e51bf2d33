/* The Gemma 4 chat template, in C: renders an OpenAI-style messages array into the prompt text that the
 * official Jinja template produces (llama.cpp models/templates/google-gemma-4-31B-it.jinja as of commit
 * 3fc65063d, PR #21704 "better align to the updated official gemma4 template", rendered with Python
 * Jinja2 semantics; see the top of chat.c for the exact rules and the few deliberate deviations).
 *
 * messages: a JSON array of objects
 *   {"role": "system" | "developer" | "user" | "assistant" | "tool",
 *    "content": "text" | [{"type": "text", "text": "..."} | {"type": "image"} | {"type": "audio"} |
 *                         {"type": "video"}, ...],
 *    "reasoning_content" / "reasoning": "..."            (assistant; kept only where the template keeps it)
 *    "tool_calls": [{"id": "...", "function": {"name": "...", "arguments": {...} or "json text"}}]
 *    "tool_responses": [{"name": "...", "response": ...}] (assistant; Gemma-native form)
 *    "tool_call_id" / "name": "..."                      (tool) }
 * tools: a JSON array of {"type": "function", "function": {"name", "description", "parameters", ...}}. */
#ifndef ELI_CHAT_H
#define ELI_CHAT_H

#include <stddef.h>

#include "error.h"
#include "json.h"

/* What a media content part renders as: where the media goes (the caller puts the media's markers and
 * embeddings there, media_prompt.h). */
#define ELI_CHAT_IMAGE_PART "<|image|>"
#define ELI_CHAT_AUDIO_PART "<|audio|>"

typedef struct {
    int add_generation_prompt; /* append the opening of the model's turn (default 1) */
    int enable_thinking;       /* <|think|> in the system turn; no empty thought channel (default 0) */
    const eli_json *tools;     /* array of tool declarations, or NULL (default NULL) */
} eli_chat_options;

eli_chat_options eli_chat_default_options(void);

/* Renders messages into a malloc'ed, NUL-terminated prompt (*out, length in *out_len if non-NULL).
 * The text starts with the literal "<bos>" and contains the special-token spellings (<|turn> ...), so
 * tokenize it with special tokens enabled and without adding another BOS. Returns ELI_OK, or
 * ELI_ERR_INVALID_ARG with a message naming the offending message index, or ELI_ERR_OOM. */
int eli_chat_render(const eli_json *messages, const eli_chat_options *opt, char **out, size_t *out_len,
                    eli_error *err);

/* Accepts what a --messages file may hold: either a messages array, or an object {"messages": [...],
 * "tools": [...]} (tools optional). Sets *messages and *tools (NULL when absent) to parts of doc. */
int eli_chat_split_document(const eli_json *doc, const eli_json **messages, const eli_json **tools,
                            eli_error *err);

#endif
