/* A multi-turn conversation as `chat` and `bench-chat` drive it: the messages so far (and the images and
 * audio clips of chat's user turns), rendered whole with the Gemma 4 template every turn (as a host of the
 * C ABI does), and a turn's prefill that keeps the longest common prefix of the KV cache (reset_keep) and
 * computes only the new positions. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat.h"
#include "cli.h"
#include "json.h"

int cli_conv_add(cli_conversation *c, const char *role, const char *content, size_t len) {
    if (c->n == c->cap) {
        size_t nc = c->cap ? 2 * c->cap : 8;
        char **r = realloc(c->role, nc * sizeof *r);
        if (!r) return -1;
        c->role = r;
        char **t = realloc(c->content, nc * sizeof *t);
        if (!t) return -1;
        c->content = t;
        int *m = realloc(c->n_media, nc * sizeof *m);
        if (!m) return -1;
        c->n_media = m;
        c->cap = nc;
    }
    char *role_copy = strdup(role), *text = malloc(len + 1);
    if (!role_copy || !text) {
        free(role_copy), free(text);
        return -1;
    }
    memcpy(text, content, len);
    text[len] = '\0';
    c->role[c->n] = role_copy;
    c->content[c->n] = text;
    c->n_media[c->n] = 0;
    c->n++;
    return 0;
}

int cli_conv_attach(cli_conversation *c, cli_media_item *items, int k) {
    if (!c->n || k <= 0) return 0;
    if (c->n_items + (size_t)k > c->cap_items) {
        const size_t nc = 2 * (c->n_items + (size_t)k) + 4;
        cli_media_item *m = realloc(c->media, nc * sizeof *m);
        if (!m) return -1;
        c->media = m;
        c->cap_items = nc;
    }
    for (int i = 0; i < k; i++) {
        c->media[c->n_items++] = items[i];
        memset(&items[i], 0, sizeof items[i]);
    }
    c->n_media[c->n - 1] += k;
    return 0;
}

/* Drops the messages from index `from` on, with their media. */
static void drop_from(cli_conversation *c, size_t from) {
    for (size_t i = c->n; i-- > from;) {
        for (int k = 0; k < c->n_media[i]; k++) cli_media_item_free(&c->media[--c->n_items]);
        free(c->role[i]), free(c->content[i]);
    }
    if (from < c->n) c->n = from;
}

void cli_conv_clear(cli_conversation *c, int keep_system) {
    drop_from(c, keep_system && c->n && !strcmp(c->role[0], "system") ? 1 : 0);
}

void cli_conv_drop_last(cli_conversation *c) {
    if (c->n) drop_from(c, c->n - 1);
}

void cli_conv_free(cli_conversation *c) {
    cli_conv_clear(c, 0);
    free(c->role), free(c->content), free(c->n_media), free(c->media);
    memset(c, 0, sizeof *c);
}

/* The prompt text of the whole conversation plus the generation prompt, malloc'ed; a message with media has
 * its media parts, then its text. */
static char *render(const cli_conversation *c, eli_error *err) {
    size_t cap = 64;
    for (size_t i = 0; i < c->n; i++) cap += strlen(c->content[i]) * 6 + 96 + 24 * (size_t)c->n_media[i]; /* \u00XX quoting at worst */
    char *doc = malloc(cap), *out = NULL;
    if (!doc) return eli_fail(err, ELI_ERR_OOM, "out of memory"), NULL;
    size_t w = (size_t)snprintf(doc, cap, "["), item = 0;
    for (size_t i = 0; i < c->n; i++) {
        char *q = eli_json_quote(c->content[i], strlen(c->content[i]));
        if (!q) return free(doc), eli_fail(err, ELI_ERR_OOM, "out of memory"), NULL;
        w += (size_t)snprintf(doc + w, cap - w, "%s{\"role\":\"%s\",\"content\":", i ? "," : "", c->role[i]);
        if (c->n_media[i]) {
            w += (size_t)snprintf(doc + w, cap - w, "[");
            for (int k = 0; k < c->n_media[i]; k++, item++)
                w += (size_t)snprintf(doc + w, cap - w, "{\"type\":\"%s\"},", c->media[item].kind == ELI_MEDIA_IMAGE ? "image" : "audio");
            w += (size_t)snprintf(doc + w, cap - w, "{\"type\":\"text\",\"text\":%s}]}", q);
        } else {
            w += (size_t)snprintf(doc + w, cap - w, "%s}", q);
        }
        free(q);
    }
    snprintf(doc + w, cap - w, "]");
    eli_json *msgs = eli_json_parse(doc, strlen(doc), err);
    eli_chat_options opt = eli_chat_default_options();
    size_t len;
    if (!msgs || eli_chat_render(msgs, &opt, &out, &len, err)) eli_error_prefix(err, "chat template");
    eli_json_free(msgs);
    free(doc);
    return out;
}

int cli_conv_prompt(const cli_conversation *c, const eli_tokenizer *tok, eli_media_prompt *mp, eli_media_rows **rows,
                    eli_error *err) {
    *rows = NULL;
    char *prompt = render(c, err);
    eli_media_kind *kinds = malloc((c->n_items ? c->n_items : 1) * sizeof *kinds);
    eli_media_rows *r = malloc((c->n_items ? c->n_items : 1) * sizeof *r);
    int rc = !prompt ? (err->code ? err->code : ELI_ERR_OOM) : !kinds || !r ? eli_fail(err, ELI_ERR_OOM, "out of memory") : ELI_OK;
    for (size_t i = 0; !rc && i < c->n_items; i++) {
        kinds[i] = c->media[i].kind;
        r[i] = (eli_media_rows){c->media[i].rows, c->media[i].n, c->media[i].n_embd};
    }
    /* the rendered text starts with <bos> and spells the special tokens: no BOS added, specials parsed */
    if (!rc) rc = eli_media_prompt_split(tok, prompt, strlen(prompt), kinds, (int)c->n_items, mp, err);
    free(prompt);
    free(kinds);
    if (rc) free(r);
    else *rows = r;
    return rc;
}

int cli_conv_tokens(const cli_conversation *c, const eli_tokenizer *tok, int32_t **ids, size_t *n_ids, eli_error *err) {
    eli_media_prompt mp;
    eli_media_rows *rows;
    int rc = cli_conv_prompt(c, tok, &mp, &rows, err);
    if (rc) return rc;
    int64_t n = 0;
    rc = eli_media_prompt_flatten(&mp, rows, ids, &n, err);
    *n_ids = (size_t)n;
    eli_media_prompt_free(&mp);
    free(rows);
    return rc;
}

/* Keeps the longest common prefix of the session's committed positions and ids (media rows compare equal:
 * the history only grows, and a turn that failed took its media back out of the session). */
static int64_t keep_common_prefix(eli_gen *g, const int32_t *ids, size_t n_ids) {
    const int32_t *have = eli_gen_tokens(g);
    int64_t lcp = 0, n_have = eli_gen_n_committed(g);
    while (lcp < n_have && lcp < (int64_t)n_ids && have[lcp] == ids[lcp]) lcp++;
    if (lcp == (int64_t)n_ids && lcp > 0) lcp--; /* something must be prefilled to get fresh logits */
    return eli_gen_reset_keep(g, lcp);
}

int cli_turn_prefill(eli_gen *g, const int32_t *ids, size_t n_ids, const atomic_int *cancel, int64_t *kept, eli_error *err) {
    *kept = keep_common_prefix(g, ids, n_ids);
    return eli_gen_prefill(g, ids + *kept, n_ids - (size_t)*kept, cancel, err);
}

int cli_turn_prefill_prompt(eli_gen *g, const eli_media_prompt *mp, const eli_media_rows *rows, const atomic_int *cancel,
                            int64_t *kept, int64_t *n_prompt, eli_error *err) {
    int32_t *ids;
    int rc = eli_media_prompt_flatten(mp, rows, &ids, n_prompt, err);
    if (rc) return rc;
    *kept = keep_common_prefix(g, ids, (size_t)*n_prompt);
    free(ids);
    eli_media_gen_sink gs = {g, cancel};
    const eli_media_sink sink = eli_media_sink_of_gen(&gs);
    return eli_media_prompt_prefill(mp, rows, *kept, &sink, err);
}

int cli_turn_answer(eli_gen *g, FILE *echo, const atomic_int *cancel, char **answer, size_t *n_answer, double *t_first,
                    eli_error *err) {
    char buf[512];
    int32_t t[16];
    *answer = NULL, *n_answer = 0;
    if (t_first) *t_first = 0;
    for (int first = 1;; first = 0) {
        size_t n;
        /* the first step returns one token, so it shows (and is timed) as soon as it is sampled */
        int r = eli_gen_next(g, t, first ? 1 : 16, &n, buf, sizeof buf, NULL, NULL, cancel, err);
        if (r < 0) return r;
        if (n && t_first && !*t_first) *t_first = cli_now();
        size_t bl = strlen(buf);
        char *grown = realloc(*answer, *n_answer + bl + 1);
        if (!grown) return eli_fail(err, ELI_ERR_OOM, "out of memory");
        *answer = grown;
        memcpy(*answer + *n_answer, buf, bl + 1);
        *n_answer += bl;
        if (echo) {
            fputs(buf, echo);
            fflush(echo);
        }
        if (r == 1) return 1;
    }
}
