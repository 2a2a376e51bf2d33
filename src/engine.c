/* The built-in engine's generation session (engine.h) and its two backend tables: "builtin" (the fast
 * kernels for this CPU) and "reference" (the same engine on the plain scalar kernels only). */
#include "engine.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "grammar_stage.h"
#include "kv_types.h"
#include "quants.h"
#include "slot.h"

struct eli_gen {
    const eli_model *m;
    const eli_tokenizer *tok;
    eli_gen_params p;
    eli_xseq *seq;
    eli_sampler *smp;
    eli_decoder *dec;

    int32_t *tokens; /* committed positions: token ids, ELI_MEDIA_ID for an embedding row of a media span */
    int64_t n_tokens, cap_tokens;
    eli_media_span *media; /* the spans of embedding rows among them, in order (kept: a recompute needs them) */
    int n_media, cap_media;
    int pending;      /* tokens[n_tokens - 1] is emitted but not yet in the KV cache */
    float *logits;    /* next-token logits after the last position in the KV cache */
    int logits_valid;
    float *hidden;    /* final hidden state of the last position in the KV cache (the drafter's input) */
    int hidden_valid;
    eli_spec *spec;   /* MTP, or NULL */

    int64_t n_generated;
    int64_t n_prompt_decoded; /* see eli_gen_n_prompt_decoded */
    int done;
    char *carry; /* decoded text not yet delivered (a step stops before overflowing text_cap) */
    size_t n_carry, cap_carry;
};

eli_gen_params eli_gen_default_params(void) {
    eli_gen_params p;
    p.seq = eli_seq_default();
    p.sampling = eli_sampler_default_params();
    p.max_tokens = 0;
    p.draft = NULL;
    p.draft_min = p.draft_max = 0;
    p.on_verify = NULL;
    p.on_verify_user = NULL;
    p.grammar = NULL;
    p.grammar_len = 0;
    p.grammar_vocab = NULL;
    return p;
}

/* ---- media spans ---- */

/* Forgets the spans from index i on. */
static void drop_media(eli_gen *g, int i) {
    for (int k = i; k < g->n_media; k++) free(g->media[k].embd);
    if (i < g->n_media) g->n_media = i;
}

/* The span holding position pos, or NULL. */
static const eli_media_span *media_at(const eli_gen *g, int64_t pos) {
    for (int i = 0; i < g->n_media; i++)
        if (pos >= g->media[i].pos && pos < g->media[i].pos + g->media[i].n) return &g->media[i];
    return NULL;
}

/* pos, or the start of the span it falls inside: a span's rows are kept or recomputed whole (an image's rows
 * attend to each other both ways, so part of one has no exact state of its own). */
static int64_t media_floor(const eli_gen *g, int64_t pos) {
    const eli_media_span *sp = media_at(g, pos);
    return sp && pos > sp->pos ? sp->pos : pos;
}

/* Keeps the spans that end at or before n (the caller floors n to a span boundary first). */
static void keep_media(eli_gen *g, int64_t n) {
    int i = 0;
    while (i < g->n_media && g->media[i].pos + g->media[i].n <= n) i++;
    drop_media(g, i);
}

void eli_gen_free(eli_gen *g) {
    if (!g) return;
    eli_seq_free(g->seq);
    eli_sampler_free(g->smp);
    eli_decoder_free(g->dec);
    eli_spec_free(g->spec);
    free(g->tokens);
    drop_media(g, 0);
    free(g->media);
    free(g->logits);
    free(g->hidden);
    free(g->carry);
    free(g);
}

eli_gen *eli_gen_create(const eli_exec *exec, eli_xmodel *xm, const eli_tokenizer *tok, const eli_gen_params *p,
                        eli_error *err) {
    const eli_model *m = xm->model;
    if (eli_tokenizer_n_vocab(tok) > m->hp.n_vocab) {
        eli_fail(err, ELI_ERR_INVALID_ARG, "tokenizer has %d tokens but the model only %d", eli_tokenizer_n_vocab(tok),
                 m->hp.n_vocab);
        return NULL;
    }
    eli_gen *g = calloc(1, sizeof *g);
    if (!g) {
        eli_fail(err, ELI_ERR_OOM, "out of memory");
        return NULL;
    }
    g->m = m;
    g->tok = tok;
    g->p = p ? *p : eli_gen_default_params();
    if (!(g->seq = eli_seq_create(exec, xm, &g->p.seq, err))) goto fail;
    if (eli_sampler_create(&g->p.sampling, m->hp.n_vocab, &g->smp, err)) goto fail;
    if (g->p.grammar) {
        eli_sampler_stage st;
        if (!g->p.grammar_vocab) {
            eli_fail(err, ELI_ERR_INVALID_ARG, "a grammar needs the tokenizer's grammar index");
            goto fail;
        }
        if (eli_grammar_stage_create(g->p.grammar, g->p.grammar_len, tok, g->p.grammar_vocab, &st, NULL, err) ||
            eli_sampler_add_stage(g->smp, &st, err))
            goto fail;
    }
    if (!(g->dec = eli_decoder_new(tok, 0, err))) goto fail;
    g->cap_tokens = 256;
    g->tokens = malloc((size_t)g->cap_tokens * sizeof *g->tokens);
    g->logits = malloc((size_t)m->hp.n_vocab * sizeof *g->logits);
    g->hidden = malloc((size_t)m->hp.n_embd * sizeof *g->hidden);
    if (!g->tokens || !g->logits || !g->hidden) {
        eli_fail(err, ELI_ERR_OOM, "out of memory");
        goto fail;
    }
    const int64_t ub = eli_seq_params_of(g->seq).n_ubatch;
    if (g->p.draft && g->p.draft_max + 1 > ub) {
        /* a verify batch and its rollback must fit the sliding rings (n_swa + n_ubatch cells) */
        eli_fail(err, ELI_ERR_INVALID_ARG, "draft_max %d needs n_ubatch >= %d (have %lld)", g->p.draft_max, g->p.draft_max + 1,
                 (long long)ub);
        goto fail;
    }
    if (g->p.draft && g->p.draft_min > 0 && g->p.draft_max > 0 &&
        !(g->spec = eli_spec_create(g->p.draft, g->seq, g->p.draft_min, g->p.draft_max, g->p.sampling.temperature,
                                    g->p.sampling.seed, err)))
        goto fail;
    return g;
fail:
    eli_gen_free(g);
    return NULL;
}

eli_spec_stats eli_gen_spec_stats(const eli_gen *g) {
    eli_spec_stats z = {0, 0, 0, 0};
    return g->spec ? eli_spec_get_stats(g->spec) : z;
}

int64_t eli_gen_n_committed(const eli_gen *g) { return g->n_tokens; }
const int32_t *eli_gen_tokens(const eli_gen *g) { return g->tokens; }
int64_t eli_gen_n_generated(const eli_gen *g) { return g->n_generated; }
int64_t eli_gen_n_prompt_decoded(const eli_gen *g) { return g->n_prompt_decoded; }
int eli_gen_done(const eli_gen *g) { return g->done; }

static int push_token(eli_gen *g, int32_t t) {
    if (g->n_tokens == g->cap_tokens) {
        int32_t *n = realloc(g->tokens, (size_t)(2 * g->cap_tokens) * sizeof *n);
        if (!n) return ELI_ERR_OOM;
        g->tokens = n;
        g->cap_tokens *= 2;
    }
    g->tokens[g->n_tokens++] = t;
    return ELI_OK;
}

static int push_text(eli_gen *g, const char *s, size_t n) {
    if (g->n_carry + n > g->cap_carry) {
        size_t nc = (g->n_carry + n) * 2 + 64;
        char *c = realloc(g->carry, nc);
        if (!c) return ELI_ERR_OOM;
        g->carry = c;
        g->cap_carry = nc;
    }
    memcpy(g->carry + g->n_carry, s, n);
    g->n_carry += n;
    return ELI_OK;
}

/* Decodes committed positions [from, to) into the cache, keeping the logits of the last one: runs of token
 * ids and the embedding rows of media spans, in ubatch-sized chunks (a bidirectional span, never longer than
 * a ubatch, in one chunk of its own). from is never inside a span (media_floor). */
static int decode_range(eli_gen *g, int64_t from, int64_t to, const atomic_int *cancel, eli_error *err) {
    const int64_t chunk = eli_seq_params_of(g->seq).n_ubatch, E = g->m->hp.n_embd;
    for (int64_t i = from; i < to;) {
        if (cancel && atomic_load(cancel)) return eli_fail(err, ELI_ERR_CANCELLED, "cancelled");
        const eli_media_span *sp = g->tokens[i] == ELI_MEDIA_ID ? media_at(g, i) : NULL;
        if (g->tokens[i] == ELI_MEDIA_ID && !sp) return eli_fail(err, ELI_ERR_FFI_FAULT, "position %lld has no media row", (long long)i);
        int64_t n = to - i < chunk ? to - i : chunk;
        if (sp) {
            if (sp->pos + sp->n - i < n) n = sp->pos + sp->n - i;
        } else {
            for (int64_t k = 1; k < n; k++)
                if (g->tokens[i + k] == ELI_MEDIA_ID) {
                    n = k;
                    break;
                }
        }
        const eli_outputs out = {g->logits, g->hidden, 0};
        const eli_span whole = {0, n};
        const eli_batch b = {n, sp ? NULL : g->tokens + i, sp ? sp->embd + (i - sp->pos) * E : NULL,
                             sp && sp->bidir ? &whole : NULL, sp && sp->bidir ? 1 : 0};
        int rc = eli_seq_decode(g->seq, &b, i + n == to ? &out : NULL, err);
        if (rc) return rc;
        i += n;
    }
    g->logits_valid = g->hidden_valid = to > from;
    return ELI_OK;
}

/* Re-feeds the sampler's penalty window from the last committed tokens. */
static void resync_sampler(eli_gen *g) {
    eli_sampler_reset(g->smp);
    const int64_t window = g->p.sampling.repeat_last_n;
    int64_t from = g->n_tokens > window ? g->n_tokens - window : 0;
    for (int64_t i = from; i < g->n_tokens; i++)
        if (g->tokens[i] != ELI_MEDIA_ID) eli_sampler_note(g->smp, g->tokens[i]);
}

/* Makes g->logits the prediction after the last committed position. */
static int ensure_logits(eli_gen *g, const atomic_int *cancel, eli_error *err) {
    const int64_t past = eli_seq_n_past(g->seq);
    if (g->pending) {
        int rc = decode_range(g, past, g->n_tokens, cancel, err);
        if (rc) return rc;
        g->pending = 0;
        return ELI_OK;
    }
    if (g->logits_valid) return ELI_OK;
    if (g->n_tokens == 0) return eli_fail(err, ELI_ERR_INVALID_ARG, "nothing to continue from: prefill a prompt first");
    /* the logits were dropped (reset_keep): recompute the last position (a media span's whole) */
    const int64_t last = media_floor(g, g->n_tokens - 1);
    const int64_t from = eli_seq_truncate(g->seq, last) ? last : 0;
    if (!from) eli_seq_reset(g->seq);
    g->n_prompt_decoded += g->n_tokens - from;
    return decode_range(g, from, g->n_tokens, cancel, err);
}

/* After a prefill's decode: on an error keep what reached the cache (whole chunks, whole media spans) and
 * forget the rest; else the end of a prompt, where the next turn's reset_keep usually lands. */
static int prefill_done(eli_gen *g, int rc) {
    g->pending = 0;
    if (rc) {
        int64_t keep = media_floor(g, eli_seq_n_past(g->seq));
        if (keep < eli_seq_n_past(g->seq) && !eli_seq_truncate(g->seq, keep)) {
            eli_seq_reset(g->seq);
            keep = 0;
        }
        g->n_tokens = keep;
        keep_media(g, keep);
        g->logits_valid = g->hidden_valid = 0;
        resync_sampler(g);
        return rc;
    }
    eli_seq_checkpoint(g->seq);
    return ELI_OK;
}

int eli_gen_prefill(eli_gen *g, const int32_t *ids, size_t n, const atomic_int *cancel, eli_error *err) {
    const int V = g->m->hp.n_vocab;
    /* the size first, so no id beyond the caller's array is ever read. The committed tokens include the
     * last generated one, which takes a position too; once the context is full it never gets one, so
     * there may be one more committed token than positions (no room then: not a negative one). */
    const int64_t n_ctx = eli_seq_n_ctx(g->seq), room = n_ctx > g->n_tokens ? n_ctx - g->n_tokens : 0;
    if (n > (size_t)room)
        return eli_fail(err, ELI_ERR_INVALID_ARG,
                        "context overflow: %zu new tokens do not fit: %lld of the context's %lld positions are taken "
                        "(the last generated token included), %lld are free",
                        n, (long long)(g->n_tokens < n_ctx ? g->n_tokens : n_ctx), (long long)n_ctx, (long long)room);
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= V)
            return eli_fail(err, ELI_ERR_INVALID_ARG, "token id %d at index %zu is outside the vocabulary [0, %d)", ids[i], i, V);
    g->done = 0;
    g->n_generated = 0;
    eli_sampler_new_generation(g->smp);
    if (n == 0) return ELI_OK;
    for (size_t i = 0; i < n; i++)
        if (push_token(g, ids[i])) return eli_fail(err, ELI_ERR_OOM, "out of memory");
    for (size_t i = 0; i < n; i++) eli_sampler_note(g->smp, ids[i]);
    /* the pending token (if any) goes into the cache with the new ones, in one batch */
    const int64_t from = eli_seq_n_past(g->seq);
    int rc = decode_range(g, from, g->n_tokens, cancel, err);
    g->n_prompt_decoded += eli_seq_n_past(g->seq) - from; /* on an error: the whole chunks that got in */
    return prefill_done(g, rc);
}

int eli_gen_prefill_embd(eli_gen *g, const float *embd, int64_t n, int bidir, const atomic_int *cancel, eli_error *err) {
    const int64_t n_ctx = eli_seq_n_ctx(g->seq), room = n_ctx > g->n_tokens ? n_ctx - g->n_tokens : 0;
    const int64_t E = g->m->hp.n_embd, ub = eli_seq_params_of(g->seq).n_ubatch;
    if (n < 0 || (n > 0 && !embd)) return eli_fail(err, ELI_ERR_INVALID_ARG, "no embedding rows given for %lld rows", (long long)n);
    if (n > room)
        return eli_fail(err, ELI_ERR_INVALID_ARG, "context overflow: %lld embedding rows do not fit: %lld of %lld positions are free",
                        (long long)n, (long long)room, (long long)n_ctx);
    if (bidir && n > ub)
        return eli_fail(err, ELI_ERR_INVALID_ARG,
                        "a bidirectional span of %lld rows is longer than the stream's n_ubatch (%lld): it must be decoded in "
                        "one batch",
                        (long long)n, (long long)ub);
    for (int64_t i = 0; i < n * E; i++)
        if (!isfinite(embd[i]))
            return eli_fail(err, ELI_ERR_INVALID_ARG, "embedding row %lld value %lld is not finite", (long long)(i / E), (long long)(i % E));
    g->done = 0;
    g->n_generated = 0;
    eli_sampler_new_generation(g->smp);
    if (n == 0) return ELI_OK;
    if (g->n_media == g->cap_media) {
        const int cap = g->cap_media ? 2 * g->cap_media : 4;
        eli_media_span *m = realloc(g->media, (size_t)cap * sizeof *m);
        if (!m) return eli_fail(err, ELI_ERR_OOM, "out of memory");
        g->media = m;
        g->cap_media = cap;
    }
    eli_media_span sp = {g->n_tokens, n, bidir != 0, malloc((size_t)(n * E) * sizeof(float))};
    if (!sp.embd) return eli_fail(err, ELI_ERR_OOM, "out of memory for %lld embedding rows", (long long)n);
    memcpy(sp.embd, embd, (size_t)(n * E) * sizeof(float));
    for (int64_t i = 0; i < n; i++)
        if (push_token(g, ELI_MEDIA_ID)) {
            g->n_tokens = sp.pos;
            free(sp.embd);
            return eli_fail(err, ELI_ERR_OOM, "out of memory");
        }
    g->media[g->n_media++] = sp;
    const int64_t from = eli_seq_n_past(g->seq);
    int rc = decode_range(g, from, g->n_tokens, cancel, err);
    g->n_prompt_decoded += eli_seq_n_past(g->seq) - from;
    return prefill_done(g, rc);
}

/* Moves up to cap - 1 bytes of complete UTF-8 characters from carry to out (NUL-terminated). */
static void deliver_text(eli_gen *g, char *out, size_t cap) {
    if (!cap) {
        g->n_carry = 0;
        return;
    }
    size_t n = g->n_carry < cap - 1 ? g->n_carry : cap - 1;
    if (n < g->n_carry)
        while (n > 0 && ((unsigned char)g->carry[n] & 0xC0) == 0x80) n--; /* never split a character */
    out[n] = '\0';
    if (!n) return;
    memcpy(out, g->carry, n);
    memmove(g->carry, g->carry + n, g->n_carry - n);
    g->n_carry -= n;
}

static double eli_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Commits a generated token: history, counters, text. Returns 1 when it ends the stream (EOG: not
 * emitted), 0 when emitted, negative on error. */
static int commit(eli_gen *g, int32_t t, int32_t *tokens_out, size_t *n, eli_error *err) {
    if (eli_tokenizer_is_eog(g->tok, t)) {
        g->done = 1;
        return 1;
    }
    if (push_token(g, t)) return eli_fail(err, ELI_ERR_OOM, "out of memory");
    g->n_generated++;
    tokens_out[(*n)++] = t;
    const char *piece;
    size_t len;
    int rc = eli_decoder_feed(g->dec, t, &piece, &len, err);
    if (!rc && len && push_text(g, piece, len)) rc = eli_fail(err, ELI_ERR_OOM, "out of memory");
    return rc;
}

/* One MTP round: the drafts the target accepts plus its own token. */
static int spec_step(eli_gen *g, int w, int32_t *tokens_out, size_t *n, int32_t *drafted, int32_t *accepted,
                     eli_error *err) {
    int32_t out[65];
    int n_round, dr, ac;
    int rc = eli_spec_round(g->spec, g->seq, g->smp, g->tokens[g->n_tokens - 1], g->hidden, w, out, &n_round, &dr, &ac, err);
    if (rc) {
        /* the cache may hold part of a verify batch: forget it, keep the committed tokens */
        eli_seq_truncate(g->seq, g->n_tokens - 1);
        g->logits_valid = g->hidden_valid = 0;
        resync_sampler(g);
        return rc;
    }
    *drafted += dr;
    *accepted += ac;
    if (g->p.on_verify) {
        /* output-token indices count from the first token generated since the last prefill */
        const int base = (int)g->n_generated;
        const EliVerifierEvent ev = {out, (size_t)ac, ac < dr ? base + ac : -1, ac < dr ? base + dr : -1,
                                     out + ac, ac < dr ? 1u : 0u};
        g->p.on_verify(g->p.on_verify_user, &ev);
    }
    /* the cache now holds the old pending token and the accepted drafts; the last token is pending */
    g->logits_valid = 0;
    for (int k = 0; k < n_round; k++) {
        int r = commit(g, out[k], tokens_out, n, err);
        if (r < 0) return r;
        if (r == 1) { /* EOG: the cache must hold exactly the committed tokens */
            eli_seq_truncate(g->seq, g->n_tokens);
            g->pending = 0;
            g->hidden_valid = 0;
            break;
        }
    }
    return ELI_OK;
}

int eli_gen_next(eli_gen *g, int32_t *tokens_out, size_t tokens_cap, size_t *n_out, char *text_out, size_t text_cap,
                 int32_t *drafted, int32_t *accepted, const atomic_int *cancel, eli_error *err) {
    int32_t dr = 0, ac = 0;
    size_t n = 0;
    int rc = ELI_OK;
    *n_out = 0;
    while (!g->done && n < tokens_cap && (!text_cap || g->n_carry < text_cap - 1)) {
        if (cancel && atomic_load(cancel)) {
            rc = eli_fail(err, ELI_ERR_CANCELLED, "cancelled");
            break;
        }
        int64_t room = (int64_t)(tokens_cap - n);
        if (g->p.max_tokens > 0 && g->p.max_tokens - g->n_generated < room) room = g->p.max_tokens - g->n_generated;
        if (room <= 0) {
            g->done = 1;
            break;
        }
        const int64_t free_cells = eli_seq_n_ctx(g->seq) - eli_seq_n_past(g->seq);
        if (g->pending && free_cells <= 0) {
            g->done = 1; /* the context is full: nothing more can be generated */
            break;
        }
        /* MTP when a drafter is on and the state has what a round needs; a round writes w + 1 cells */
        int w = g->spec && g->pending && g->hidden_valid ? eli_spec_window(g->spec, room < free_cells ? room : free_cells) : 0;
        if (w > 0) {
            if ((rc = spec_step(g, w, tokens_out, &n, &dr, &ac, err))) break;
            continue;
        }
        const int timed = g->spec && g->pending; /* a plain step whose decode MTP could have replaced */
        const double t0 = timed ? eli_now_s() : 0;
        if ((rc = ensure_logits(g, cancel, err))) break;
        int32_t t;
        if ((rc = eli_sampler_sample(g->smp, g->logits, &t, err))) break;
        if (timed) eli_spec_note_plain(g->spec, eli_now_s() - t0);
        if ((rc = eli_sampler_accept(g->smp, t, err))) break;
        g->pending = 1;
        g->logits_valid = 0; /* the hidden state stays: it is that of the position before the pending token */
        int r = commit(g, t, tokens_out, &n, err);
        if (r == 1) g->pending = 0; /* the EOG token is not part of the sequence */
        if (r < 0) {
            rc = r;
            break;
        }
    }
    /* the step that used up max_tokens or the context is the final one: the host needs no further call
     * that yields nothing */
    if (!rc && !g->done &&
        ((g->p.max_tokens > 0 && g->n_generated >= g->p.max_tokens) ||
         (g->pending && eli_seq_n_past(g->seq) >= eli_seq_n_ctx(g->seq))))
        g->done = 1;
    if (g->done) {
        const char *piece;
        size_t len;
        eli_decoder_flush(g->dec, &piece, &len);
        if (len && push_text(g, piece, len)) return eli_fail(err, ELI_ERR_OOM, "out of memory");
    }
    *n_out = n;
    if (drafted) *drafted = dr;
    if (accepted) *accepted = ac;
    if (text_out) deliver_text(g, text_out, text_cap);
    else g->n_carry = 0;
    if (rc) return rc;
    return g->done && g->n_carry == 0 ? 1 : 0;
}

void eli_gen_reset(eli_gen *g) {
    eli_seq_reset(g->seq);
    eli_sampler_reset(g->smp); /* history cleared, random stream restarted from the seed */
    eli_decoder_reset(g->dec);
    g->n_tokens = 0;
    drop_media(g, 0);
    g->pending = 0;
    g->logits_valid = g->hidden_valid = 0;
    g->n_generated = 0;
    g->done = 0;
    g->n_carry = 0;
    if (g->spec) eli_spec_reset(g->spec);
}

int64_t eli_gen_reset_keep(eli_gen *g, int64_t n_keep) {
    if (n_keep < 0) n_keep = 0;
    if (n_keep > g->n_tokens) n_keep = g->n_tokens;
    n_keep = media_floor(g, n_keep);
    g->done = 0;
    g->n_generated = 0;
    g->n_carry = 0;
    eli_decoder_reset(g->dec);
    if (n_keep == g->n_tokens) {
        eli_seq_checkpoint(g->seq); /* a turn boundary: a later reset_keep back to here recomputes nothing */
        return n_keep;
    }
    const int64_t past = eli_seq_n_past(g->seq);
    g->n_tokens = n_keep;
    keep_media(g, n_keep);
    if (g->pending && n_keep == past) {
        g->pending = 0; /* the dropped token never reached the cache: its logits are still current */
    } else if (n_keep < past) {
        g->pending = 0;
        g->logits_valid = g->hidden_valid = 0;
        /* truncate; when the sliding rings overwrote part of the prefix, resume from the nearest window
         * checkpoint <= n_keep (or from 0) and recompute the rest (exact) */
        int64_t from = eli_seq_resume(g->seq, n_keep);
        if (from >= 0 && media_floor(g, from) != from) from = eli_seq_truncate(g->seq, media_floor(g, from)) ? media_floor(g, from) : -1;
        if (from < 0) {
            eli_seq_reset(g->seq);
            from = 0;
        }
        eli_error err = {0};
        g->n_prompt_decoded += n_keep - from;
        if (from < n_keep && decode_range(g, from, n_keep, NULL, &err)) {
            eli_seq_reset(g->seq);
            g->n_tokens = 0;
            drop_media(g, 0);
        }
    }
    eli_seq_checkpoint(g->seq);
    resync_sampler(g);
    return g->n_tokens;
}

/* ---- the backend tables ---- */

struct eli_backend_session {
    eli_gen *gen;
    eli_model *own_drafter;    /* loaded for this stream from cfg->mtp_drafter_path */
    eli_xmodel *own_xdrafter;  /* ... and prepared on the stream's executor */
};

static int always(void) { return 1; }
static int serves_any(const char *bundle_dir) {
    (void)bundle_dir;
    return 1;
}
static int rank_builtin(void) { return 0; }
static int rank_reference(void) { return -1; } /* never chosen automatically */

int eli_gen_context_size(int64_t requested, const eli_model *m, int64_t fallback, int64_t *out, eli_error *err) {
    if (requested < 0) return eli_fail(err, ELI_ERR_INVALID_ARG, "context_size %lld is negative", (long long)requested);
    int64_t n = requested ? requested : fallback > 0 ? fallback : 8192;
    if (n > m->hp.n_ctx_train) n = m->hp.n_ctx_train;
    *out = n;
    return ELI_OK;
}

/* The stream's drafter: its own (cfg->mtp_drafter_path, loaded, bound and prepared here) or the bundle's;
 * MTP that was asked for and has none is an error, never a silent fallback. */
static int stream_drafter(const eli_backend_env *env, const eliza_llm_stream_config_t *cfg, eli_backend_session *s,
                          eli_xmodel **out, eli_error *err) {
    if (!(cfg->mtp_drafter_path && *cfg->mtp_drafter_path)) {
        *out = env->drafter;
        return env->drafter ? ELI_OK
                            : eli_fail(err, ELI_ERR_BUNDLE_INVALID,
                                       "MTP requested but the bundle has no mtp/ drafter and no mtp_drafter_path is set");
    }
    const eli_exec_options o = {env->config->kernels, env->config->repack};
    if (!(s->own_drafter = eli_model_load(cfg->mtp_drafter_path, err)) ||
        eli_model_bind_assistant(s->own_drafter, env->xm->model, err) ||
        !(s->own_xdrafter = eli_exec_prepare(env->xm->exec, s->own_drafter, &o, err))) {
        eli_error_prefix(err, "MTP drafter '%s'", cfg->mtp_drafter_path);
        return err ? err->code : ELI_ERR_INVALID_ARG;
    }
    *out = s->own_xdrafter;
    return ELI_OK;
}

static void free_session(eli_backend_session *s) {
    if (!s) return;
    eli_gen_free(s->gen);
    eli_xmodel_release(s->own_xdrafter);
    eli_model_free(s->own_drafter);
    free(s);
}

static eli_backend_session *open_session(const eli_backend_env *env, const eliza_llm_stream_config_t *cfg,
                                         const eli_exec *exec, eli_error *err) {
    const eli_config *c = env->config;
    eli_gen_params p = eli_gen_default_params();
    if (eli_gen_context_size(cfg->context_size, env->xm->model, c->n_ctx, &p.seq.n_ctx, err)) return NULL;
    if (eli_kv_types_from_names(cfg->cache_type_k, cfg->cache_type_v, &p.seq.kv_type_k, &p.seq.kv_type_v, err)) return NULL;
    p.seq.reserve = c->reserve;
    p.seq.n_ckpt = c->n_ckpt;
    p.max_tokens = cfg->max_tokens > 0 ? cfg->max_tokens : 0;
    /* only what the host asked for: every filter is off unless the config turns it on */
    p.sampling.temperature = cfg->temperature;
    p.sampling.top_p = cfg->top_p > 0 && cfg->top_p < 1 ? cfg->top_p : 1.0f;
    p.sampling.top_k = cfg->top_k > 0 ? cfg->top_k : 0;
    p.sampling.min_p = 0.0f;
    p.sampling.repeat_penalty = cfg->repeat_penalty != 0 && cfg->repeat_penalty != 1 ? cfg->repeat_penalty : 1.0f;
    p.sampling.seed = c->seed;
    eli_backend_session *s = calloc(1, sizeof *s);
    if (!s) {
        eli_fail(err, ELI_ERR_OOM, "out of memory");
        return NULL;
    }
    if (cfg->draft_min > 0 && cfg->draft_max > 0) {
        if (stream_drafter(env, cfg, s, &p.draft, err)) goto fail;
        p.draft_min = cfg->draft_min;
        p.draft_max = cfg->draft_max;
    }
    p.on_verify = env->on_verify;
    p.on_verify_user = env->on_verify_user;
    if (cfg->gbnf_grammar && *cfg->gbnf_grammar) {
        p.grammar = cfg->gbnf_grammar;
        p.grammar_len = strlen(cfg->gbnf_grammar);
        p.grammar_vocab = env->grammar_vocab;
    }
    if (!(s->gen = eli_gen_create(exec, env->xm, env->tok, &p, err))) goto fail;
    return s;
fail:
    free_session(s);
    return NULL;
}

static eli_backend_session *open_builtin(const eli_backend_env *env, const eliza_llm_stream_config_t *cfg, eli_error *err) {
    return open_session(env, cfg, env->xm->exec, err);
}

static eli_backend_session *open_reference(const eli_backend_env *env, const eliza_llm_stream_config_t *cfg,
                                           eli_error *err) {
    const eli_exec *ref = eli_exec_named("reference", err);
    return ref ? open_session(env, cfg, ref, err) : NULL;
}

static int s_prefill(eli_backend_session *s, const int32_t *ids, size_t n, const atomic_int *cancel, eli_error *err) {
    return eli_gen_prefill(s->gen, ids, n, cancel, err);
}

static int s_prefill_embd(eli_backend_session *s, const float *embd, int64_t n, int bidir, const atomic_int *cancel,
                          eli_error *err) {
    return eli_gen_prefill_embd(s->gen, embd, n, bidir, cancel, err);
}

static int s_next(eli_backend_session *s, int32_t *tokens_out, size_t tokens_cap, size_t *n_out, char *text_out,
                  size_t text_cap, int32_t *drafted, int32_t *accepted, const atomic_int *cancel, eli_error *err) {
    return eli_gen_next(s->gen, tokens_out, tokens_cap, n_out, text_out, text_cap, drafted, accepted, cancel, err);
}

static int s_reset(eli_backend_session *s) {
    eli_gen_reset(s->gen);
    return ELI_OK;
}

static int s_reset_keep(eli_backend_session *s, int32_t n_keep) { return (int)eli_gen_reset_keep(s->gen, n_keep); }

int eli_gen_save(eli_gen *g, const char *path, eli_error *err) {
    eli_slot_state st = {g->tokens,    g->n_tokens,     g->cap_tokens, g->media, g->n_media,       g->pending,
                         g->logits_valid, g->hidden_valid, g->done,    g->n_generated, g->smp, g->spec != NULL, {0}};
    if (g->spec) eli_spec_get_resume(g->spec, &st.mtp);
    return eli_slot_save(path, g->seq, &st, g->logits, g->hidden, err);
}

int eli_gen_restore(eli_gen *g, const char *path, eli_error *err) {
    eli_slot_state st;
    st.sampler = g->smp; /* loaded with the rest: the penalties' history, the random stream, a grammar */
    const int64_t past = eli_seq_n_past(g->seq);
    int rc = eli_slot_restore(path, g->seq, &st, g->logits, g->hidden, err);
    if (rc && eli_seq_n_past(g->seq) != past) eli_gen_reset(g); /* the file was cut mid-copy: the sequence was reset */
    if (rc) return rc;
    free(g->tokens);
    g->tokens = st.tokens;
    g->n_tokens = st.n_tokens;
    g->cap_tokens = st.cap_tokens;
    drop_media(g, 0);
    free(g->media);
    g->media = st.media;
    g->n_media = g->cap_media = st.n_media;
    g->pending = st.pending;
    g->logits_valid = st.logits_valid;
    g->hidden_valid = st.hidden_valid; /* with the MTP state: a restored stream drafts exactly where the original does */
    g->done = st.done;
    g->n_generated = st.n_generated;
    g->n_carry = 0;
    eli_decoder_reset(g->dec);
    if (g->spec) { /* the saved MTP state, or a fresh one when the file's stream did not draft */
        eli_spec_reset(g->spec);
        if (st.has_mtp) eli_spec_set_resume(g->spec, &st.mtp);
    }
    return ELI_OK;
}

static int s_save(eli_backend_session *s, const char *path, eli_error *err) { return eli_gen_save(s->gen, path, err); }

static int s_restore(eli_backend_session *s, const char *path, eli_error *err) { return eli_gen_restore(s->gen, path, err); }

static void s_close(eli_backend_session *s) { free_session(s); }

/* A throwaway sequence over ids (f32 K and V: exact scores), on the executor that opens streams. */
static int run_once(const eli_backend_env *env, const eli_exec *exec, const int32_t *ids, size_t n, float *hidden,
                    float *logits, eli_error *err) {
    eli_seq_params p = eli_seq_default();
    p.n_ctx = (int64_t)n;
    p.kv_type_k = p.kv_type_v = ELI_TYPE_F32;
    p.reserve = 0;
    p.n_ckpt = 0;
    eli_xseq *seq = eli_seq_create(exec, env->xm, &p, err);
    if (!seq) return err ? err->code : ELI_ERR_INVALID_ARG;
    const eli_outputs out = {hidden ? NULL : logits, hidden, hidden != NULL};
    int rc = eli_seq_decode_tokens(seq, ids, (int64_t)n, &out, err);
    eli_seq_free(seq);
    return rc;
}

static int run_builtin(const eli_backend_env *env, const int32_t *ids, size_t n, float *hidden, float *logits,
                       eli_error *err) {
    return run_once(env, env->xm->exec, ids, n, hidden, logits, err);
}

static int run_reference(const eli_backend_env *env, const int32_t *ids, size_t n, float *hidden, float *logits,
                         eli_error *err) {
    const eli_exec *ref = eli_exec_named("reference", err);
    return ref ? run_once(env, ref, ids, n, hidden, logits, err) : ELI_ERR_NOT_IMPLEMENTED;
}

#define ENGINE_SHARED                                                                                                \
    .available = always, .can_serve = serves_any, .prefill = s_prefill, .prefill_embd = s_prefill_embd, .next = s_next, \
    .reset = s_reset, .reset_keep = s_reset_keep, .save = s_save, .restore = s_restore, .close = s_close

const eli_backend eli_backend_engine_builtin = {.name = "builtin", .preference_rank = rank_builtin, .open = open_builtin,
                                                .run_once = run_builtin, ENGINE_SHARED};
const eli_backend eli_backend_engine_reference = {.name = "reference", .preference_rank = rank_reference,
                                                  .open = open_reference, .run_once = run_reference, ENGINE_SHARED};
