/* Slot files and window checkpoints (slot.h). */
#include "slot.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bytes.h"
#include "fileio.h"
#include "kv_types.h"
#include "os.h"
#include "quants.h"
#include "sampler.h"

/* ---- hash ---- */

#define P1 0x9E3779B185EBCA87ull
#define P2 0xC2B2AE3D27D4EB4Full
#define P3 0x165667B19E3779F9ull
#define P4 0x85EBCA77C2B2AE63ull
#define P5 0x27D4EB2F165667C5ull

static uint64_t rotl64(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
static uint64_t rd64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}
static uint32_t rd32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}
static uint64_t xround(uint64_t acc, uint64_t in) { return rotl64(acc + in * P2, 31) * P1; }
static uint64_t xmerge(uint64_t acc, uint64_t v) { return (acc ^ xround(0, v)) * P1 + P4; }

void eli_hash64_init(eli_hash64 *h) {
    memset(h, 0, sizeof *h);
    h->v[0] = P1 + P2;
    h->v[1] = P2;
    h->v[2] = 0;
    h->v[3] = (uint64_t)0 - P1;
}

static void stripe(eli_hash64 *h, const uint8_t *p) {
    for (int i = 0; i < 4; i++) h->v[i] = xround(h->v[i], rd64(p + 8 * i));
}

void eli_hash64_update(eli_hash64 *h, const void *data, size_t len) {
    const uint8_t *p = data;
    h->total += len;
    if (h->n_buf) {
        size_t take = 32 - h->n_buf < len ? 32 - h->n_buf : len;
        memcpy(h->buf + h->n_buf, p, take);
        h->n_buf += take, p += take, len -= take;
        if (h->n_buf < 32) return;
        stripe(h, h->buf);
        h->n_buf = 0;
    }
    for (; len >= 32; p += 32, len -= 32) stripe(h, p);
    memcpy(h->buf, p, len);
    h->n_buf = len;
}

uint64_t eli_hash64_final(const eli_hash64 *h) {
    uint64_t r;
    if (h->total >= 32) {
        r = rotl64(h->v[0], 1) + rotl64(h->v[1], 7) + rotl64(h->v[2], 12) + rotl64(h->v[3], 18);
        for (int i = 0; i < 4; i++) r = xmerge(r, h->v[i]);
    } else {
        r = P5;
    }
    r += h->total;
    const uint8_t *p = h->buf;
    size_t n = h->n_buf;
    for (; n >= 8; p += 8, n -= 8) r = rotl64(r ^ xround(0, rd64(p)), 27) * P1 + P4;
    if (n >= 4) r = rotl64(r ^ ((uint64_t)rd32(p) * P1), 23) * P2 + P3, p += 4, n -= 4;
    for (; n; p++, n--) r = rotl64(r ^ (*p * P5), 11) * P1;
    r ^= r >> 33, r *= P2, r ^= r >> 29, r *= P3, r ^= r >> 32;
    return r;
}

uint64_t eli_hash64_bytes(const void *data, size_t len) {
    eli_hash64 h;
    eli_hash64_init(&h);
    eli_hash64_update(&h, data, len);
    return eli_hash64_final(&h);
}

uint64_t eli_model_identity(const eli_model *m) {
    const uint8_t *base = eli_gguf_mapping(m->file);
    const uint64_t head = eli_gguf_data_offset(m->file), size = eli_gguf_file_size(m->file);
    uint64_t n = head + (size - head < 4096 ? size - head : 4096);
    return eli_hash64_bytes(base, (size_t)n);
}

/* ---- file layout ---- */

static const char MAGIC[8] = {'E', 'L', 'I', 'S', 'L', 'O', 'T', 0};
#define ENDIAN_MARK 0x01020304u
#define F_PENDING 1u
#define F_LOGITS 2u
#define F_DONE 4u
#define F_MTP 8u
#define F_HIDDEN 16u

typedef struct {
    char magic[8];
    uint32_t version, endian;
    uint64_t model_hash;
    uint32_t n_layer, n_embd, n_vocab, n_swa;
    int64_t n_ctx, n_ubatch;
    uint32_t kv_type_k, kv_type_v, flags, reserved0;
    int64_t n_tokens, n_past, n_generated;
    uint64_t sampler_bytes, state_bytes, n_media, reserved1;
    int32_t mtp_window, mtp_pause, mtp_pause_len;
    uint32_t reserved;
    uint64_t mtp_rng;
    double mtp_n_acc, mtp_n_rej;
} slot_header;

typedef struct {
    int64_t pos, n;
    uint32_t bidir, reserved;
} media_record;

/* buffered, hashing writer over an atomic file */
typedef struct {
    eli_atomic_file *f;
    eli_hash64 h;
    uint8_t buf[1 << 16];
    size_t n;
    int rc;
    eli_error *err;
} writer;

static void w_flush(writer *w) {
    if (w->n && !w->rc) w->rc = eli_atomic_write(w->f, w->buf, w->n, w->err);
    w->n = 0;
}

static void w_put(void *wp, const void *data, size_t len) {
    writer *w = wp;
    if (w->rc) return;
    eli_hash64_update(&w->h, data, len);
    if (len > sizeof w->buf / 2) {
        w_flush(w);
        if (!w->rc) w->rc = eli_atomic_write(w->f, data, len, w->err);
        return;
    }
    if (w->n + len > sizeof w->buf) w_flush(w);
    memcpy(w->buf + w->n, data, len);
    w->n += len;
}

/* counts the bytes a put sequence would write */
static void count_put(void *total, const void *data, size_t len) {
    (void)data;
    *(uint64_t *)total += len;
}

int eli_slot_save(const char *path, eli_xseq *seq, const eli_slot_state *st, const float *logits, const float *hidden,
                  eli_error *err) {
    if (!path || !*path) return eli_fail(err, ELI_ERR_INVALID_ARG, "save_slot: empty path");
    const eli_model *m = seq->xm->model;
    const eli_seq_params sp = eli_seq_params_of(seq);
    slot_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, MAGIC, 8);
    h.version = ELI_SLOT_VERSION;
    h.endian = ENDIAN_MARK;
    h.model_hash = eli_model_identity(m);
    h.n_layer = (uint32_t)m->hp.n_layer;
    h.n_embd = (uint32_t)m->hp.n_embd;
    h.n_vocab = (uint32_t)m->hp.n_vocab;
    h.n_swa = (uint32_t)m->hp.n_swa;
    h.n_ctx = sp.n_ctx;
    h.n_ubatch = sp.n_ubatch;
    h.kv_type_k = sp.kv_type_k;
    h.kv_type_v = sp.kv_type_v;
    h.flags = (st->pending ? F_PENDING : 0) | (st->logits_valid && logits ? F_LOGITS : 0) | (st->done ? F_DONE : 0) |
              (st->has_mtp ? F_MTP : 0) | (st->hidden_valid && hidden ? F_HIDDEN : 0);
    h.n_tokens = st->n_tokens;
    h.n_past = eli_seq_n_past(seq);
    h.n_generated = st->n_generated;
    h.sampler_bytes = st->sampler ? eli_sampler_state_size(st->sampler) : 0;
    h.n_media = (uint64_t)st->n_media;
    int rc = eli_seq_save_state(seq, count_put, &h.state_bytes, err);
    if (rc) return rc;
    if (st->has_mtp) {
        h.mtp_window = st->mtp.window, h.mtp_pause = st->mtp.pause, h.mtp_pause_len = st->mtp.pause_len;
        h.mtp_rng = st->mtp.rng, h.mtp_n_acc = st->mtp.n_acc, h.mtp_n_rej = st->mtp.n_rej;
    }

    writer *w = malloc(sizeof *w);
    uint8_t *smp = h.sampler_bytes ? malloc((size_t)h.sampler_bytes) : NULL;
    if (!w || (h.sampler_bytes && !smp)) {
        free(w), free(smp);
        return eli_fail(err, ELI_ERR_OOM, "save_slot: out of memory");
    }
    w->n = 0, w->rc = 0, w->err = err;
    eli_hash64_init(&w->h);
    if (!(w->f = eli_atomic_open(path, err))) {
        free(w), free(smp);
        return err ? err->code : ELI_ERR_INVALID_ARG;
    }
    w_put(w, &h, sizeof h);
    w_put(w, st->tokens, (size_t)st->n_tokens * sizeof *st->tokens);
    for (int i = 0; i < st->n_media; i++) {
        const eli_media_span *span = &st->media[i];
        const media_record rec = {span->pos, span->n, (uint32_t)(span->bidir != 0), 0};
        w_put(w, &rec, sizeof rec);
        w_put(w, span->embd, (size_t)(span->n * m->hp.n_embd) * sizeof *span->embd);
    }
    if (h.flags & F_LOGITS) w_put(w, logits, (size_t)m->hp.n_vocab * sizeof *logits);
    if (h.flags & F_HIDDEN) w_put(w, hidden, (size_t)m->hp.n_embd * sizeof *hidden);
    if (smp) eli_sampler_save(st->sampler, smp), w_put(w, smp, (size_t)h.sampler_bytes);
    if (!w->rc && (rc = eli_seq_save_state(seq, w_put, w, err))) w->rc = rc;
    w_flush(w);
    uint64_t sum = eli_hash64_final(&w->h);
    if (!w->rc) w->rc = eli_atomic_write(w->f, &sum, sizeof sum, err);
    rc = w->rc;
    if (rc) eli_atomic_abort(w->f);
    else rc = eli_atomic_commit(w->f, err);
    free(w), free(smp);
    if (rc) eli_error_prefix(err, "save_slot '%s'", path);
    return rc;
}

/* ---- restore ---- */

/* The index of the first of n (unaligned) floats at p that is NaN or infinite, or -1. */
static int64_t first_nonfinite(const uint8_t *p, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        float v;
        memcpy(&v, p + 4 * i, sizeof v);
        if (!isfinite(v)) return i;
    }
    return -1;
}

/* The header: version, checksum, model identity, configuration, counts. */
static int check_header(const uint8_t *base, size_t size, const eli_model *m, const eli_seq_params *sp, slot_header *h,
                        eli_error *err) {
    /* the version first (its offset is the same in every version), so an older file is named as such */
    if (size < 16 || memcmp(base, MAGIC, 8))
        return eli_fail(err, ELI_ERR_INVALID_ARG, "not a slot file (%zu bytes, bad magic or too short)", size);
    memcpy(&h->version, base + offsetof(slot_header, version), sizeof h->version);
    static const char *const lacks[] = {"the sampler's random state", "the MTP state",
                                        "separate K and V cache types and the sampler's whole state",
                                        "embedding rows (images, audio)"};
    _Static_assert(sizeof lacks / sizeof *lacks == ELI_SLOT_VERSION - 1, "one reason per older version");
    if (h->version >= 1 && h->version < ELI_SLOT_VERSION)
        return eli_fail(err, ELI_ERR_INVALID_ARG,
                        "slot file version %u is not supported: it lacks %s (this build reads version %d; save the "
                        "slot again)",
                        h->version, lacks[h->version - 1], ELI_SLOT_VERSION);
    if (h->version != ELI_SLOT_VERSION)
        return eli_fail(err, ELI_ERR_INVALID_ARG, "slot file version %u is not supported (this build reads version %d)",
                        h->version, ELI_SLOT_VERSION);
    if (size < sizeof *h + 8) return eli_fail(err, ELI_ERR_INVALID_ARG, "not a slot file (%zu bytes, too short)", size);
    memcpy(h, base, sizeof *h);
    if (h->endian != ENDIAN_MARK)
        return eli_fail(err, ELI_ERR_INVALID_ARG, "slot file was written on a machine of another byte order");
    uint64_t sum;
    memcpy(&sum, base + size - 8, 8);
    if (eli_hash64_bytes(base, size - 8) != sum)
        return eli_fail(err, ELI_ERR_INVALID_ARG, "slot file is corrupted or truncated (checksum mismatch, %zu bytes)", size);
    const uint64_t id = eli_model_identity(m);
    if (h->model_hash != id)
        return eli_fail(err, ELI_ERR_INVALID_ARG,
                        "slot file was saved from another model (identity %016llx, %u layers, n_embd %u, n_vocab %u); "
                        "this stream's model is %016llx (%d layers, n_embd %d, n_vocab %d)",
                        (unsigned long long)h->model_hash, h->n_layer, h->n_embd, h->n_vocab, (unsigned long long)id,
                        m->hp.n_layer, m->hp.n_embd, m->hp.n_vocab);
    if (h->n_layer != (uint32_t)m->hp.n_layer || h->n_vocab != (uint32_t)m->hp.n_vocab || h->n_swa != (uint32_t)m->hp.n_swa ||
        h->n_embd != (uint32_t)m->hp.n_embd)
        return eli_fail(err, ELI_ERR_INVALID_ARG, "slot file geometry does not match the model");
    if (h->n_ctx != sp->n_ctx || h->n_ubatch != sp->n_ubatch || h->kv_type_k != sp->kv_type_k || h->kv_type_v != sp->kv_type_v)
        return eli_fail(err, ELI_ERR_INVALID_ARG,
                        "slot file was saved with another stream configuration: n_ctx %lld, n_ubatch %lld, KV %s/%s; "
                        "this stream has n_ctx %lld, n_ubatch %lld, KV %s/%s",
                        (long long)h->n_ctx, (long long)h->n_ubatch, eli_kv_type_name(h->kv_type_k), eli_kv_type_name(h->kv_type_v),
                        (long long)sp->n_ctx, (long long)sp->n_ubatch, eli_kv_type_name(sp->kv_type_k), eli_kv_type_name(sp->kv_type_v));
    if (h->flags & ~(F_PENDING | F_LOGITS | F_DONE | F_MTP | F_HIDDEN))
        return eli_fail(err, ELI_ERR_INVALID_ARG, "slot file has unknown flags");
    const int pending = (h->flags & F_PENDING) != 0;
    /* a stream whose context is full holds one token more than positions (the last one generated,
     * pending, never gets a cell): n_tokens == n_past + pending allows it */
    if (h->n_past < 0 || h->n_past > sp->n_ctx || h->n_tokens != h->n_past + pending || h->n_generated < 0 ||
        h->n_generated > h->n_tokens)
        return eli_fail(err, ELI_ERR_INVALID_ARG, "slot file counts are inconsistent (n_tokens %lld, n_past %lld, pending %d)",
                        (long long)h->n_tokens, (long long)h->n_past, pending);
    return ELI_OK;
}

/* The media section: spans in order, disjoint, inside the tokens, covering exactly their ELI_MEDIA_ID
 * positions, bidirectional ones no longer than a ubatch, every value finite. Advances cur past it. */
static int check_media(eli_reader *cur, const uint8_t *toks, const slot_header *h, int64_t E, int64_t n_ubatch, eli_error *err) {
    int64_t end = 0; /* where the previous span ended */
    for (uint64_t i = 0; i < h->n_media; i++) {
        const uint8_t *r = eli_read_bytes(cur, sizeof(media_record));
        if (!r) return eli_fail(err, ELI_ERR_INVALID_ARG, "slot file media span %llu truncated", (unsigned long long)i);
        media_record mr;
        memcpy(&mr, r, sizeof mr);
        if (mr.pos < end || mr.n < 1 || mr.n > h->n_tokens - mr.pos || mr.bidir > 1 || mr.reserved || (mr.bidir && mr.n > n_ubatch))
            return eli_fail(err, ELI_ERR_INVALID_ARG, "slot file media span %llu (positions %lld + %lld) is out of place",
                            (unsigned long long)i, (long long)mr.pos, (long long)mr.n);
        for (int64_t p = end; p < mr.pos + mr.n; p++) {
            int32_t t;
            memcpy(&t, toks + 4 * p, sizeof t);
            if ((t == ELI_MEDIA_ID) != (p >= mr.pos))
                return eli_fail(err, ELI_ERR_INVALID_ARG, "slot file position %lld is %s a media span", (long long)p,
                                p >= mr.pos ? "a token inside" : "an embedding row outside");
        }
        const uint8_t *rows = eli_read_bytes(cur, (uint64_t)(mr.n * E) * sizeof(float));
        if (!rows) return eli_fail(err, ELI_ERR_INVALID_ARG, "slot file media span %llu rows truncated", (unsigned long long)i);
        const int64_t bad = first_nonfinite(rows, mr.n * E);
        if (bad >= 0)
            return eli_fail(err, ELI_ERR_INVALID_ARG, "slot file media span %llu value %lld is not finite", (unsigned long long)i,
                            (long long)bad);
        end = mr.pos + mr.n;
    }
    for (int64_t p = end; p < h->n_tokens; p++) {
        int32_t t;
        memcpy(&t, toks + 4 * p, sizeof t);
        if (t == ELI_MEDIA_ID)
            return eli_fail(err, ELI_ERR_INVALID_ARG, "slot file position %lld is an embedding row outside a media span", (long long)p);
    }
    return ELI_OK;
}

static void free_media(eli_media_span *spans, int n) {
    for (int i = 0; spans && i < n; i++) free(spans[i].embd);
    free(spans);
}

/* Copies the checked media section at p into spans (n of them, zeroed): 0, or -1 out of memory. */
static int load_media(const uint8_t *p, int n, int64_t E, eli_media_span *spans) {
    for (int i = 0; i < n; i++) {
        media_record mr;
        memcpy(&mr, p, sizeof mr);
        p += sizeof mr;
        const size_t bytes = (size_t)(mr.n * E) * sizeof(float);
        spans[i] = (eli_media_span){mr.pos, mr.n, (int)mr.bidir, malloc(bytes)};
        if (!spans[i].embd) return -1;
        memcpy(spans[i].embd, p, bytes);
        p += bytes;
    }
    return 0;
}

static int restore_mapped(const eli_os_map *map, eli_xseq *seq, eli_slot_state *st, float *logits, float *hidden,
                          eli_error *err) {
    const uint8_t *base = map->base;
    const size_t size = map->size;
    const eli_model *m = seq->xm->model;
    const eli_seq_params sp = eli_seq_params_of(seq);
    slot_header h;
    int rc = check_header(base, size, m, &sp, &h, err);
    if (rc) return rc;
    const eli_spec_resume mtp = {h.mtp_rng, h.mtp_window, h.mtp_pause, h.mtp_pause_len, h.mtp_n_acc, h.mtp_n_rej};
    if ((h.flags & F_MTP) && (rc = eli_spec_resume_check(&mtp, err))) return rc;

    eli_reader cur = {base + sizeof h, size - 8 - sizeof h};
    const uint8_t *toks = eli_read_bytes(&cur, (uint64_t)h.n_tokens * sizeof(int32_t));
    if (!toks) return eli_fail(err, ELI_ERR_INVALID_ARG, "slot file tokens truncated");
    int64_t n_media_rows = 0;
    for (int64_t i = 0; i < h.n_tokens; i++) {
        int32_t t;
        memcpy(&t, toks + 4 * i, sizeof t);
        n_media_rows += t == ELI_MEDIA_ID;
        if (t != ELI_MEDIA_ID && (t < 0 || t >= m->hp.n_vocab))
            return eli_fail(err, ELI_ERR_INVALID_ARG, "slot file token %d at %lld is outside the vocabulary", t, (long long)i);
    }
    if (h.n_media > (uint64_t)n_media_rows)
        return eli_fail(err, ELI_ERR_INVALID_ARG, "slot file has %llu media spans for %lld embedding rows",
                        (unsigned long long)h.n_media, (long long)n_media_rows);
    const uint8_t *media = cur.p;
    if ((rc = check_media(&cur, toks, &h, m->hp.n_embd, sp.n_ubatch, err))) return rc;
    const uint8_t *lg = NULL, *hd = NULL, *smp, *state;
    if ((h.flags & F_LOGITS) && !(lg = eli_read_bytes(&cur, (uint64_t)m->hp.n_vocab * sizeof(float))))
        return eli_fail(err, ELI_ERR_INVALID_ARG, "slot file logits truncated");
    if ((h.flags & F_HIDDEN) && !(hd = eli_read_bytes(&cur, (uint64_t)m->hp.n_embd * sizeof(float))))
        return eli_fail(err, ELI_ERR_INVALID_ARG, "slot file hidden state truncated");
    if (!(smp = eli_read_bytes(&cur, h.sampler_bytes))) return eli_fail(err, ELI_ERR_INVALID_ARG, "slot file sampler state truncated");
    if (!(state = eli_read_bytes(&cur, h.state_bytes))) return eli_fail(err, ELI_ERR_INVALID_ARG, "slot file sequence state truncated");
    if (cur.left) return eli_fail(err, ELI_ERR_INVALID_ARG, "slot file has %zu unexpected trailing bytes", cur.left);
    /* the sampler would draw from them: a NaN or infinity is a damaged file, not a distribution */
    int64_t bad = lg ? first_nonfinite(lg, m->hp.n_vocab) : -1;
    if (bad >= 0) return eli_fail(err, ELI_ERR_INVALID_ARG, "slot file logit %lld is not finite", (long long)bad);
    if (hd && (bad = first_nonfinite(hd, m->hp.n_embd)) >= 0)
        return eli_fail(err, ELI_ERR_INVALID_ARG, "slot file hidden state value %lld is not finite", (long long)bad);
    const int64_t cap = h.n_tokens > 256 ? h.n_tokens : 256;
    int32_t *tokens = malloc((size_t)cap * sizeof *tokens);
    eli_media_span *spans = h.n_media ? calloc((size_t)h.n_media, sizeof *spans) : NULL;
    if (!tokens || (h.n_media && (!spans || load_media(media, (int)h.n_media, m->hp.n_embd, spans)))) {
        free(tokens);
        free_media(spans, (int)h.n_media);
        return eli_fail(err, ELI_ERR_OOM, "restore_slot: out of memory");
    }

    /* everything above read the file; if it shrank meanwhile (the guard turned its pages into zeros), what
     * was checked is not what is there */
    if (eli_os_map_faulted(map)) {
        free(tokens);
        free_media(spans, (int)h.n_media);
        return eli_fail(err, ELI_ERR_INVALID_ARG, "slot file shrank while it was read");
    }
    /* the sampler and the sequence each check their part before changing anything; the sampler's state as
     * it was comes back when the sequence refuses its part */
    const size_t old_n = st->sampler ? eli_sampler_state_size(st->sampler) : 0;
    uint8_t *old = old_n ? malloc(old_n) : NULL;
    if (old_n && !old) rc = eli_fail(err, ELI_ERR_OOM, "restore_slot: out of memory");
    if (!rc && st->sampler) {
        eli_sampler_save(st->sampler, old);
        rc = eli_sampler_load(st->sampler, smp, (size_t)h.sampler_bytes, err);
    }
    if (!rc && (rc = eli_seq_load_state(seq, state, (size_t)h.state_bytes, err)) && st->sampler)
        (void)eli_sampler_load(st->sampler, old, old_n, NULL);
    if (!rc && eli_seq_n_past(seq) != h.n_past) /* the sequence's own count must agree with the header's */
        rc = eli_fail(err, ELI_ERR_INVALID_ARG, "slot file's sequence holds %lld positions, its header says %lld",
                      (long long)eli_seq_n_past(seq), (long long)h.n_past);
    free(old);
    if (rc) {
        free(tokens);
        free_media(spans, (int)h.n_media);
        return rc;
    }
    memcpy(tokens, toks, (size_t)h.n_tokens * sizeof *tokens);
    st->media = spans;
    st->n_media = (int)h.n_media;
    if (lg && logits) memcpy(logits, lg, (size_t)m->hp.n_vocab * sizeof *logits);
    if (hd && hidden) memcpy(hidden, hd, (size_t)m->hp.n_embd * sizeof *hidden);
    st->tokens = tokens;
    st->n_tokens = h.n_tokens;
    st->cap_tokens = cap;
    st->pending = (h.flags & F_PENDING) != 0;
    st->logits_valid = lg != NULL;
    st->hidden_valid = hd != NULL;
    st->done = (h.flags & F_DONE) != 0;
    st->n_generated = h.n_generated;
    st->has_mtp = (h.flags & F_MTP) != 0;
    st->mtp = mtp;
    return ELI_OK;
}

int eli_slot_restore(const char *path, eli_xseq *seq, eli_slot_state *st, float *logits, float *hidden, eli_error *err) {
    if (!path || !*path) return eli_fail(err, ELI_ERR_INVALID_ARG, "restore_slot: empty path");
    eli_os_map map;
    int rc = eli_os_map_file(path, &map, err);
    if (rc) {
        eli_error_prefix(err, "restore_slot");
        return rc;
    }
    if (map.size < sizeof(slot_header) + 8) {
        eli_os_unmap_file(&map);
        return eli_fail(err, ELI_ERR_INVALID_ARG, "restore_slot '%s': not a slot file (%zu bytes, too short)", path,
                        map.size);
    }
    eli_os_advise(&map, map.base, map.size, ELI_OS_SEQUENTIAL);
    rc = restore_mapped(&map, seq, st, logits, hidden, err);
    if (!rc && eli_os_map_faulted(&map)) {
        /* cut between the checks and the copy: the sequence holds zeros, so it starts over */
        eli_seq_reset(seq);
        free(st->tokens);
        free_media(st->media, st->n_media);
        rc = eli_fail(err, ELI_ERR_INVALID_ARG, "slot file shrank while it was read: the stream's sequence was reset");
    }
    eli_os_unmap_file(&map);
    if (rc) eli_error_prefix(err, "restore_slot '%s'", path);
    return rc;
}
