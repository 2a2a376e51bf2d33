/* A multi-turn conversation as `chat` and `bench-chat` drive it: the messages so far, rendered whole with
 * the Gemma 4 template every turn (as a host of the C ABI does), and a turn's prefill that keeps the
 * longest common prefix of the KV cache (reset_keep) and computes only the new tokens. */
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
    c->n++;
    return 0;
}

void cli_conv_clear(cli_conversation *c, int keep_system) {
    size_t keep = keep_system && c->n && !strcmp(c->role[0], "system") ? 1 : 0;
    for (size_t i = keep; i < c->n; i++) free(c->role[i]), free(c->content[i]);
    c->n = keep;
}

void cli_conv_drop_last(cli_conversation *c) {
    if (!c->n) return;
    c->n--;
    free(c->role[c->n]), free(c->content[c->n]);
}

void cli_conv_free(cli_conversation *c) {
    cli_conv_clear(c, 0);
    free(c->role), free(c->content);
    c->role = c->content = NULL;
    c->cap = 0;
}

/* The prompt text of the whole conversation plus the generation prompt, malloc'ed. */
static char *render(const cli_conversation *c, eli_error *err) {
    size_t cap = 64;
    for (size_t i = 0; i < c->n; i++) cap += strlen(c->content[i]) * 6 + 64; /* \u00XX quoting at worst */
    char *doc = malloc(cap), *out = NULL;
    if (!doc) return eli_fail(err, ELI_ERR_OOM, "out of memory"), NULL;
    size_t w = (size_t)snprintf(doc, cap, "[");
    for (size_t i = 0; i < c->n; i++) {
        char *q = eli_json_quote(c->content[i], strlen(c->content[i]));
        if (!q) return free(doc), eli_fail(err, ELI_ERR_OOM, "out of memory"), NULL;
        w += (size_t)snprintf(doc + w, cap - w, "%s{\"role\":\"%s\",\"content\":%s}", i ? "," : "", c->role[i], q);
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

int cli_conv_tokens(const cli_conversation *c, const eli_tokenizer *tok, int32_t **ids, size_t *n_ids, eli_error *err) {
    char *prompt = render(c, err);
    if (!prompt) return err->code ? err->code : ELI_ERR_OOM;
    /* the rendered text starts with <bos> and spells the special tokens: no BOS added, specials parsed */
    int rc = eli_tokenize(tok, prompt, strlen(prompt), 0, 1, ids, n_ids, err);
    free(prompt);
    return rc;
}

int cli_turn_prefill(eli_gen *g, const int32_t *ids, size_t n_ids, const atomic_int *cancel, int64_t *kept, eli_error *err) {
    const int32_t *have = eli_gen_tokens(g);
    int64_t lcp = 0, n_have = eli_gen_n_committed(g);
    while (lcp < n_have && lcp < (int64_t)n_ids && have[lcp] == ids[lcp]) lcp++;
    if (lcp == (int64_t)n_ids && lcp > 0) lcp--; /* something must be prefilled to get fresh logits */
    *kept = eli_gen_reset_keep(g, lcp);
    return eli_gen_prefill(g, ids + *kept, n_ids - (size_t)*kept, cancel, err);
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
