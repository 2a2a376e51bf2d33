/* A prompt with media (media_prompt.h). */
#include "media_prompt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audio.h"
#include "chat.h"
#include "json.h"
#include "slot.h"
#include "vision.h"

static const char *const placeholder[2] = {ELI_CHAT_IMAGE_PART, ELI_CHAT_AUDIO_PART};
static const char *const begin_marker[2] = {ELI_VISION_MARKER_BEGIN, ELI_AUDIO_BEGIN};
static const char *const end_marker[2] = {ELI_VISION_MARKER_END, ELI_AUDIO_END};
static const char *const part_type[2] = {"image", "audio"};

int64_t eli_media_audio_span(void) { return eli_audio_chunk_tokens(eli_mel_frames(ELI_MEL_CHUNK_SAMPLES)); }

int eli_media_render_turn(const char *system, const char *text, const eli_media_kind *kinds, int n_media, char **out,
                          eli_error *err) {
    *out = NULL;
    char *qs = system ? eli_json_quote(system, strlen(system)) : NULL, *qt = text ? eli_json_quote(text, strlen(text)) : NULL;
    const size_t cap = (qs ? strlen(qs) : 0) + (qt ? strlen(qt) : 0) + (size_t)n_media * 24 + 160;
    char *doc = (!system || qs) && (!text || qt) ? malloc(cap) : NULL;
    if (!doc) {
        free(qs), free(qt);
        return eli_fail(err, ELI_ERR_OOM, "out of memory");
    }
    size_t w = 0;
    w += (size_t)snprintf(doc + w, cap - w, "[");
    if (qs) w += (size_t)snprintf(doc + w, cap - w, "{\"role\":\"system\",\"content\":%s},", qs);
    w += (size_t)snprintf(doc + w, cap - w, "{\"role\":\"user\",\"content\":[");
    for (int i = 0; i < n_media; i++) w += (size_t)snprintf(doc + w, cap - w, "%s{\"type\":\"%s\"}", i ? "," : "", part_type[kinds[i]]);
    if (qt) w += (size_t)snprintf(doc + w, cap - w, "%s{\"type\":\"text\",\"text\":%s}", n_media ? "," : "", qt);
    snprintf(doc + w, cap - w, "]}]");
    free(qs), free(qt);
    eli_json *msgs = eli_json_parse(doc, strlen(doc), err);
    free(doc);
    if (!msgs) return err ? err->code : ELI_ERR_INVALID_ARG;
    const eli_chat_options opt = eli_chat_default_options();
    size_t len;
    int rc = eli_chat_render(msgs, &opt, out, &len, err);
    eli_json_free(msgs);
    if (rc) eli_error_prefix(err, "chat template");
    return rc;
}

void eli_media_prompt_free(eli_media_prompt *p) {
    if (!p) return;
    for (int i = 0; p->ids && i <= p->n_media; i++) free(p->ids[i]);
    free(p->ids);
    free(p->n_ids);
    free(p->kinds);
    memset(p, 0, sizeof *p);
}

/* The next placeholder at or after text + at: its offset (len when none) and kind. */
static size_t next_placeholder(const char *text, size_t len, size_t at, eli_media_kind *kind) {
    for (size_t i = at; i < len; i++)
        for (int k = 0; k < 2; k++) {
            const size_t pl = strlen(placeholder[k]);
            if (len - i >= pl && !memcmp(text + i, placeholder[k], pl)) {
                *kind = (eli_media_kind)k;
                return i;
            }
        }
    return len;
}

int eli_media_prompt_split(const eli_tokenizer *tok, const char *text, size_t len, const eli_media_kind *kinds,
                           int n_media, eli_media_prompt *out, eli_error *err) {
    memset(out, 0, sizeof *out);
    /* the placeholders first: their number and kinds must be the caller's media */
    int found = 0;
    eli_media_kind k;
    for (size_t at = next_placeholder(text, len, 0, &k); at < len; at = next_placeholder(text, len, at + 1, &k), found++)
        if (found < n_media && k != kinds[found])
            return eli_fail(err, ELI_ERR_INVALID_ARG, "media %d is %s but the prompt has an %s placeholder there ('%s')", found,
                            part_type[kinds[found]], part_type[k], placeholder[k]);
    if (found != n_media)
        return eli_fail(err, ELI_ERR_INVALID_ARG,
                        "the prompt has %d media placeholder(s) for %d media: a text that spells '%s' or '%s' itself is refused",
                        found, n_media, placeholder[0], placeholder[1]);
    out->n_media = n_media;
    out->kinds = malloc((size_t)(n_media > 0 ? n_media : 1) * sizeof *out->kinds);
    out->ids = calloc((size_t)n_media + 1, sizeof *out->ids);
    out->n_ids = calloc((size_t)n_media + 1, sizeof *out->n_ids);
    char *piece = malloc(len + 32);
    int rc = out->kinds && out->ids && out->n_ids && piece ? ELI_OK : eli_fail(err, ELI_ERR_OOM, "out of memory");
    size_t from = 0;
    for (int i = 0; !rc && i <= n_media; i++) {
        if (i < n_media) out->kinds[i] = kinds[i];
        const size_t to = i < n_media ? next_placeholder(text, len, from, &k) : len;
        /* run i: the end marker of media i - 1, the text up to media i, its begin marker */
        size_t w = 0;
        if (i > 0) w += (size_t)sprintf(piece, "%s", end_marker[kinds[i - 1]]);
        memcpy(piece + w, text + from, to - from);
        w += to - from;
        if (i < n_media) w += (size_t)sprintf(piece + w, "%s", begin_marker[kinds[i]]);
        rc = eli_tokenize(tok, piece, w, 0, 1, &out->ids[i], &out->n_ids[i], err);
        if (i < n_media) from = to + strlen(placeholder[kinds[i]]);
    }
    free(piece);
    if (rc) eli_media_prompt_free(out);
    return rc;
}

int eli_media_user_turn(const eli_tokenizer *tok, const char *system, const char *text, const eli_media_kind *kinds,
                        int n_media, eli_media_prompt *out, eli_error *err) {
    memset(out, 0, sizeof *out);
    char *rendered;
    int rc = eli_media_render_turn(system, text, kinds, n_media, &rendered, err);
    if (rc) return rc;
    rc = eli_media_prompt_split(tok, rendered, strlen(rendered), kinds, n_media, out, err);
    free(rendered);
    return rc;
}

int eli_media_prompt_flatten(const eli_media_prompt *p, const eli_media_rows *media, int32_t **out, int64_t *n,
                             eli_error *err) {
    int64_t total = 0;
    for (int i = 0; i <= p->n_media; i++) total += (int64_t)p->n_ids[i] + (i < p->n_media ? media[i].n : 0);
    int32_t *ids = malloc((size_t)(total > 0 ? total : 1) * sizeof *ids);
    if (!ids) return eli_fail(err, ELI_ERR_OOM, "out of memory for %lld positions", (long long)total);
    int64_t w = 0;
    for (int i = 0; i <= p->n_media; i++) {
        if (p->n_ids[i]) memcpy(ids + w, p->ids[i], p->n_ids[i] * sizeof *ids);
        w += (int64_t)p->n_ids[i];
        for (int64_t r = 0; i < p->n_media && r < media[i].n; r++) ids[w++] = ELI_MEDIA_ID;
    }
    *out = ids;
    *n = total;
    return ELI_OK;
}

int eli_media_rows_prefill(eli_media_kind kind, const eli_media_rows *m, int64_t from, const eli_media_sink *sink,
                           eli_error *err) {
    if (from >= m->n) return ELI_OK;
    if (kind == ELI_MEDIA_IMAGE) {
        if (from > 0)
            return eli_fail(err, ELI_ERR_INVALID_ARG, "cannot continue inside an image's rows (row %lld of %lld)", (long long)from,
                            (long long)m->n);
        return sink->rows(sink->p, m->rows, m->n, 1, err);
    }
    const int64_t span = eli_media_audio_span();
    for (int64_t r = from; r < m->n;) {
        const int64_t end = (r / span + 1) * span < m->n ? (r / span + 1) * span : m->n;
        int rc = sink->rows(sink->p, m->rows + r * m->n_embd, end - r, 0, err);
        if (rc) return rc;
        r = end;
    }
    return ELI_OK;
}

int eli_media_prompt_prefill(const eli_media_prompt *p, const eli_media_rows *media, int64_t from,
                             const eli_media_sink *sink, eli_error *err) {
    int64_t pos = 0; /* where the current run or media begins */
    for (int i = 0; i <= p->n_media; i++) {
        const int64_t n = (int64_t)p->n_ids[i];
        if (from < pos + n) {
            const int64_t skip = from > pos ? from - pos : 0;
            int rc = sink->ids(sink->p, p->ids[i] + skip, (size_t)(n - skip), err);
            if (rc) return rc;
        }
        pos += n;
        if (i == p->n_media) break;
        if (from < pos + media[i].n) {
            int rc = eli_media_rows_prefill(p->kinds[i], &media[i], from > pos ? from - pos : 0, sink, err);
            if (rc) return rc;
        }
        pos += media[i].n;
    }
    return ELI_OK;
}

static int gen_ids(void *p, const int32_t *ids, size_t n, eli_error *err) {
    const eli_media_gen_sink *s = p;
    return eli_gen_prefill(s->g, ids, n, s->cancel, err);
}

static int gen_rows(void *p, const float *rows, int64_t n, int bidir, eli_error *err) {
    const eli_media_gen_sink *s = p;
    return eli_gen_prefill_embd(s->g, rows, n, bidir, s->cancel, err);
}

eli_media_sink eli_media_sink_of_gen(eli_media_gen_sink *s) { return (eli_media_sink){s, gen_ids, gen_rows}; }
