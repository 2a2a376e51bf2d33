#include "kv_cache.h"

#include <stdlib.h>
#include <string.h>

#include "bytes.h"
#include "kv_types.h"
#include "os.h"
#include "quants.h"

#define MAX_CHECKPOINTS 64

int64_t eli_kv_layer_cells(int is_swa, int n_swa, int64_t n_ctx, int64_t n_ubatch) {
    const int64_t ring = (int64_t)n_swa + n_ubatch;
    return is_swa && ring < n_ctx ? ring : n_ctx;
}

size_t eli_kv_predict_bytes(const eli_model *m, int64_t n_ctx, int64_t n_ubatch, uint32_t type_k, uint32_t type_v,
                            size_t *swa, size_t *full) {
    size_t s = 0, f = 0;
    for (int il = 0; il < m->hp.n_layer; il++) {
        const eli_layer *l = &m->layers[il];
        if (!l->has_kv) continue;
        const size_t bytes = (size_t)eli_kv_layer_cells(l->is_swa, m->hp.n_swa, n_ctx, n_ubatch) *
                             (eli_kv_row_bytes(type_k, l->n_head_kv, l->head_dim) +
                              eli_kv_row_bytes(type_v, l->n_head_kv, l->head_dim));
        if (l->is_swa) s += bytes;
        else f += bytes;
    }
    if (swa) *swa = s;
    if (full) *full = f;
    return s + f;
}

static int check_type(const eli_model *m, const char *what, uint32_t type, eli_error *err) {
    const eli_type_traits *tt = eli_type_info(type);
    const int low_bit = eli_kvq_is_type(type);
    if (!low_bit && (!tt || !tt->quantize || !tt->dequantize ||
                     (type != ELI_TYPE_F32 && type != ELI_TYPE_F16 && type != ELI_TYPE_BF16 && tt->block_size > 32)))
        return eli_fail(err, ELI_ERR_INVALID_ARG, "%s cache type %s is not supported", what, eli_kv_type_name(type));
    for (int il = 0; il < m->hp.n_layer; il++) {
        const int d = m->layers[il].head_dim;
        if (eli_kv_row_bytes(type, 1, d)) continue;
        if (low_bit)
            return eli_fail(err, ELI_ERR_INVALID_ARG,
                            "%s cache type %s needs head dims that are powers of two from %d to %d (layer %d has %d)", what,
                            eli_kv_type_name(type), ELI_KVQ_MIN_DIM, ELI_KVQ_MAX_DIM, il, d);
        return eli_fail(err, ELI_ERR_INVALID_ARG, "%s cache type %s needs head dims that are multiples of %u (layer %d has %d)",
                        what, tt->name, tt->block_size, il, d);
    }
    return ELI_OK;
}

int eli_kv_check_types(const eli_model *m, uint32_t type_k, uint32_t type_v, eli_error *err) {
    int rc = check_type(m, "K", type_k, err);
    if (rc || (rc = check_type(m, "V", type_v, err))) return rc;
    if (!eli_kv_type_holds_values(type_v))
        return eli_fail(err, ELI_ERR_INVALID_ARG,
                        "V cache type %s holds keys only (QJL estimates q.k, it cannot give the values back): use it for K "
                        "with another V type",
                        eli_kv_type_name(type_v));
    return ELI_OK;
}

/* The cache's codec of a low-bit type at head dim d, made on first use; NULL for the other types. */
static const eli_kvq *codec_for(eli_kv_cache *kv, uint32_t type, int d, eli_error *err, int *rc) {
    if (!eli_kvq_is_type(type)) return NULL;
    for (int i = 0; i < kv->n_codecs; i++)
        if (kv->codecs[i]->type == type && kv->codecs[i]->d == d) return kv->codecs[i];
    eli_kvq *c = eli_kvq_create(type, d, err);
    if (!c) {
        *rc = err ? err->code : ELI_ERR_OOM;
        return NULL;
    }
    kv->codecs[kv->n_codecs++] = c;
    return c;
}

eli_kv_cache *eli_kv_create(const eli_model *m, int64_t n_ctx, int64_t n_ubatch, uint32_t type_k, uint32_t type_v,
                            int n_ckpt, eli_error *err) {
    if (eli_kv_check_types(m, type_k, type_v, err)) return NULL;
    if (n_ctx < 1 || n_ubatch < 1) {
        eli_fail(err, ELI_ERR_INVALID_ARG, "context size %lld and ubatch %lld must be positive", (long long)n_ctx,
                 (long long)n_ubatch);
        return NULL;
    }
    eli_kv_cache *kv = calloc(1, sizeof *kv);
    if (!kv) goto oom;
    kv->type_k = type_k;
    kv->type_v = type_v;
    kv->n_layer = m->hp.n_layer;
    kv->n_ctx = n_ctx;
    kv->layers = calloc((size_t)m->hp.n_layer, sizeof *kv->layers);
    kv->codecs = calloc(2 * (size_t)m->hp.n_layer + 1, sizeof *kv->codecs); /* at most a K and a V codec per layer */
    if (!kv->layers || !kv->codecs) goto oom;
    for (int il = 0; il < m->hp.n_layer; il++) {
        const eli_layer *l = &m->layers[il];
        eli_kv_layer *c = &kv->layers[il];
        c->width = (int64_t)l->n_head_kv * l->head_dim;
        c->row_bytes_k = eli_kv_row_bytes(type_k, l->n_head_kv, l->head_dim);
        c->row_bytes_v = eli_kv_row_bytes(type_v, l->n_head_kv, l->head_dim);
        if (!l->has_kv) continue;
        int rc = ELI_OK;
        c->kq = codec_for(kv, type_k, l->head_dim, err, &rc);
        if (!rc) c->vq = codec_for(kv, type_v, l->head_dim, err, &rc);
        if (rc) {
            eli_kv_free(kv);
            return NULL;
        }
        c->n_cells = eli_kv_layer_cells(l->is_swa, m->hp.n_swa, n_ctx, n_ubatch);
        const size_t kb = (size_t)c->n_cells * c->row_bytes_k, vb = (size_t)c->n_cells * c->row_bytes_v;
        c->k = malloc(kb);
        c->v = malloc(vb);
        c->cell_pos = malloc((size_t)c->n_cells * sizeof *c->cell_pos);
        if (!c->k || !c->v || !c->cell_pos) goto oom;
        kv->bytes += kb + vb;
        if (l->is_swa) kv->bytes_swa += kb + vb;
        else kv->bytes_full += kb + vb;
    }
    eli_kv_set_max_checkpoints(kv, n_ckpt);
    if (kv->max_ckpt && !kv->ckpt) goto oom;
    eli_kv_clear(kv);
    return kv;
oom:
    eli_kv_free(kv);
    eli_fail(err, ELI_ERR_OOM, "out of memory for a KV cache of %lld cells", (long long)n_ctx);
    return NULL;
}

int eli_kv_reserve(eli_kv_cache *kv, eli_error *err) {
    for (int il = 0; il < kv->n_layer; il++) {
        eli_kv_layer *c = &kv->layers[il];
        if (!c->k) continue;
        eli_os_touch(c->k, (size_t)c->n_cells * c->row_bytes_k);
        eli_os_touch(c->v, (size_t)c->n_cells * c->row_bytes_v);
    }
    const size_t one = eli_kv_checkpoint_bytes(kv);
    for (int i = 0; one && i < kv->max_ckpt; i++) {
        eli_kv_checkpoint *cp = &kv->ckpt[i];
        if (!cp->data) {
            if (!(cp->data = malloc(one)))
                return eli_fail(err, ELI_ERR_OOM, "out of memory for %d window checkpoints of %zu bytes", kv->max_ckpt, one);
            kv->ckpt_bytes += one;
        }
        eli_os_touch(cp->data, one);
    }
    return ELI_OK;
}

void eli_kv_free(eli_kv_cache *kv) {
    if (!kv) return;
    if (kv->layers)
        for (int il = 0; il < kv->n_layer; il++) {
            free(kv->layers[il].k);
            free(kv->layers[il].v);
            free(kv->layers[il].cell_pos);
        }
    for (int i = 0; kv->ckpt && i < kv->max_ckpt; i++) free(kv->ckpt[i].data);
    for (int i = 0; i < kv->n_codecs; i++) eli_kvq_free(kv->codecs[i]);
    free(kv->codecs);
    free(kv->ckpt);
    free(kv->layers);
    free(kv);
}

void eli_kv_clear(eli_kv_cache *kv) {
    for (int il = 0; il < kv->n_layer; il++) {
        eli_kv_layer *c = &kv->layers[il];
        for (int64_t i = 0; i < c->n_cells; i++) c->cell_pos[i] = -1;
    }
    for (int i = 0; kv->ckpt && i < kv->max_ckpt; i++) kv->ckpt[i].pos = -1;
}

void eli_kv_store(eli_kv_cache *kv, int il, int32_t pos, const float *k, const float *v) {
    eli_kv_layer *c = &kv->layers[il];
    int64_t cell = pos % c->n_cells;
    c->cell_pos[cell] = pos;
    uint8_t *kr = c->k + (size_t)cell * c->row_bytes_k, *vr = c->v + (size_t)cell * c->row_bytes_v;
    if (c->kq) eli_kvq_quantize(c->kq, k, (int)(c->width / c->kq->d), kr);
    else eli_quantize_row(kv->type_k, k, kr, c->width);
    if (c->vq) eli_kvq_quantize(c->vq, v, (int)(c->width / c->vq->d), vr);
    else eli_quantize_row(kv->type_v, v, vr, c->width);
}

eli_kv_view eli_kv_head(const eli_kv_cache *kv, int il, int g, int d) {
    const eli_kv_layer *c = &kv->layers[il];
    const eli_kv_view v = {c->k + eli_kv_row_bytes(kv->type_k, g, d),
                           c->v + eli_kv_row_bytes(kv->type_v, g, d),
                           kv->type_k,
                           kv->type_v,
                           c->row_bytes_k,
                           c->row_bytes_v,
                           c->n_cells,
                           c->kq,
                           c->vq};
    return v;
}

int eli_kv_has(const eli_kv_cache *kv, int il, int32_t pos) {
    const eli_kv_layer *c = &kv->layers[il];
    return c->cell_pos && pos >= 0 && c->cell_pos[pos % c->n_cells] == pos;
}

int eli_kv_window_ok(const int32_t *cell_pos, int64_t n_cells, int full, int32_t n, int n_swa) {
    /* a query at n sees n - n_swa + 1 .. n - 1 on sliding layers, everything before it on full ones */
    int32_t lo = full ? 0 : (n - n_swa + 1 > 0 ? n - n_swa + 1 : 0);
    if (n - lo > n_cells) return 0;
    for (int32_t p = lo; p < n; p++)
        if (cell_pos[p % n_cells] != p) return 0;
    return 1;
}

static int is_ring(const eli_kv_cache *kv, const eli_kv_layer *c) { return c->cell_pos && c->n_cells < kv->n_ctx; }

static void drop_from(eli_kv_cache *kv, int32_t n_keep) {
    for (int il = 0; il < kv->n_layer; il++) {
        eli_kv_layer *c = &kv->layers[il];
        for (int64_t i = 0; c->cell_pos && i < c->n_cells; i++)
            if (c->cell_pos[i] >= n_keep) c->cell_pos[i] = -1;
    }
    for (int i = 0; kv->ckpt && i < kv->max_ckpt; i++)
        if (kv->ckpt[i].pos > n_keep) kv->ckpt[i].pos = -1;
}

int eli_kv_truncate(eli_kv_cache *kv, int32_t n_keep, int n_swa) {
    /* full caches never overwrite: only the rings can miss a position */
    for (int il = 0; il < kv->n_layer; il++) {
        const eli_kv_layer *c = &kv->layers[il];
        if (is_ring(kv, c) && !eli_kv_window_ok(c->cell_pos, c->n_cells, 0, n_keep, n_swa)) return 0;
    }
    drop_from(kv, n_keep);
    return 1;
}

/* ---- window checkpoints ---- */

static size_t ring_bytes(const eli_kv_layer *c) {
    return (size_t)c->n_cells * (sizeof *c->cell_pos + c->row_bytes_k + c->row_bytes_v);
}

size_t eli_kv_checkpoint_bytes(const eli_kv_cache *kv) {
    size_t n = 0;
    for (int il = 0; il < kv->n_layer; il++)
        if (is_ring(kv, &kv->layers[il])) n += ring_bytes(&kv->layers[il]);
    return n;
}

void eli_kv_set_max_checkpoints(eli_kv_cache *kv, int n) {
    if (n < 0) n = 0;
    if (n > MAX_CHECKPOINTS) n = MAX_CHECKPOINTS;
    const size_t one = eli_kv_checkpoint_bytes(kv);
    for (int i = n; kv->ckpt && i < kv->max_ckpt; i++)
        if (kv->ckpt[i].data) {
            free(kv->ckpt[i].data);
            kv->ckpt_bytes -= one;
        }
    eli_kv_checkpoint *c = n ? realloc(kv->ckpt, (size_t)n * sizeof *c) : (free(kv->ckpt), NULL);
    if (n && !c) { /* keep what there was (fewer slots) */
        if (n < kv->max_ckpt) kv->max_ckpt = n;
        return;
    }
    for (int i = kv->max_ckpt; i < n; i++) c[i].pos = -1, c[i].data = NULL;
    kv->ckpt = c;
    kv->max_ckpt = n;
}

/* A checkpoint holds the cell_pos arrays of every ring first (aligned), then their K and V rows. */
static void ckpt_copy(eli_kv_cache *kv, uint8_t *data, int to_ckpt) {
    size_t pos_off = 0, row_off = 0;
    for (int il = 0; il < kv->n_layer; il++)
        if (is_ring(kv, &kv->layers[il])) row_off += (size_t)kv->layers[il].n_cells * sizeof(int32_t);
    for (int il = 0; il < kv->n_layer; il++) {
        eli_kv_layer *c = &kv->layers[il];
        if (!is_ring(kv, c)) continue;
        const size_t np = (size_t)c->n_cells * sizeof *c->cell_pos;
        const size_t kb = (size_t)c->n_cells * c->row_bytes_k, vb = (size_t)c->n_cells * c->row_bytes_v;
        if (to_ckpt) {
            memcpy(data + pos_off, c->cell_pos, np);
            memcpy(data + row_off, c->k, kb);
            memcpy(data + row_off + kb, c->v, vb);
        } else {
            memcpy(c->cell_pos, data + pos_off, np);
            memcpy(c->k, data + row_off, kb);
            memcpy(c->v, data + row_off + kb, vb);
        }
        pos_off += np;
        row_off += kb + vb;
    }
}

int eli_kv_checkpoint_take(eli_kv_cache *kv, int32_t pos) {
    const size_t one = eli_kv_checkpoint_bytes(kv);
    if (!one || !kv->max_ckpt || pos <= 0) return 0;
    int slot = 0;
    for (int i = 0; i < kv->max_ckpt; i++) {
        if (kv->ckpt[i].pos == pos) return 0; /* already there */
        if (kv->ckpt[i].pos < kv->ckpt[slot].pos) slot = i; /* an unused one (-1) or the oldest */
    }
    eli_kv_checkpoint *cp = &kv->ckpt[slot];
    if (!cp->data) {
        if (!(cp->data = malloc(one))) return 0;
        kv->ckpt_bytes += one;
    }
    ckpt_copy(kv, cp->data, 1);
    cp->pos = pos;
    kv->n_ckpt_taken++;
    return 1;
}

/* The position a checkpoint can resume n_keep from, or -1. */
static int32_t usable(const eli_kv_cache *kv, const eli_kv_checkpoint *cp, int32_t n_keep, int n_swa) {
    if (cp->pos < 0 || !cp->data) return -1;
    const int32_t r = cp->pos < n_keep ? cp->pos : n_keep;
    const int32_t *cell_pos = (const int32_t *)(const void *)cp->data;
    for (int il = 0; il < kv->n_layer; il++) {
        const eli_kv_layer *c = &kv->layers[il];
        if (!is_ring(kv, c)) continue;
        if (!eli_kv_window_ok(cell_pos, c->n_cells, 0, r, n_swa)) return -1;
        cell_pos += c->n_cells;
    }
    return r;
}

int32_t eli_kv_checkpoint_restore(eli_kv_cache *kv, int32_t n_keep, int n_swa) {
    int best = -1;
    int32_t best_r = -1;
    for (int i = 0; i < kv->max_ckpt; i++) {
        int32_t r = usable(kv, &kv->ckpt[i], n_keep, n_swa);
        if (r > best_r) best = i, best_r = r;
    }
    if (best < 0) return -1;
    ckpt_copy(kv, kv->ckpt[best].data, 0);
    drop_from(kv, best_r);
    kv->n_ckpt_restored++;
    return best_r;
}

/* ---- the cells as bytes (slot files) ---- */

/* One layer's record: its index, whether it has storage, then (with storage) the cells, the K and V row
 * sizes and the number of used cells, followed by their positions (in cell order), K rows and V rows. */
typedef struct {
    uint32_t index, has;
    int64_t n_cells;
    uint64_t row_bytes_k, row_bytes_v;
    int64_t n_used;
} layer_record;

/* the rows of the occupied cells of one array (K or V), runs of adjacent cells in one put */
static void put_rows(const eli_kv_layer *c, const uint8_t *rows, size_t row_bytes, void (*put)(void *, const void *, size_t),
                     void *w) {
    for (int64_t i = 0; i < c->n_cells;) {
        if (c->cell_pos[i] < 0) {
            i++;
            continue;
        }
        int64_t j = i;
        while (j < c->n_cells && c->cell_pos[j] >= 0) j++;
        put(w, rows + (size_t)i * row_bytes, (size_t)(j - i) * row_bytes);
        i = j;
    }
}

void eli_kv_save(const eli_kv_cache *kv, void (*put)(void *w, const void *p, size_t n), void *w) {
    for (int il = 0; il < kv->n_layer; il++) {
        const eli_kv_layer *c = &kv->layers[il];
        layer_record r = {(uint32_t)il, c->cell_pos != NULL, c->n_cells, c->row_bytes_k, c->row_bytes_v, 0};
        if (!r.has) {
            r.n_cells = 0, r.row_bytes_k = r.row_bytes_v = 0;
            put(w, &r, sizeof r);
            continue;
        }
        for (int64_t i = 0; i < c->n_cells; i++) r.n_used += c->cell_pos[i] >= 0;
        put(w, &r, sizeof r);
        for (int64_t i = 0; i < c->n_cells; i++)
            if (c->cell_pos[i] >= 0) put(w, &c->cell_pos[i], sizeof c->cell_pos[i]);
        put_rows(c, c->k, c->row_bytes_k, put, w);
        put_rows(c, c->v, c->row_bytes_v, put, w);
    }
}

/* Checks one layer's record against the cache; fills pos_tmp (n_cells) with its cell map. */
static int check_layer(eli_reader *cur, const eli_kv_cache *kv, int il, int n_swa, int32_t n_past, int32_t *pos_tmp,
                       layer_record *out, const uint8_t **out_pos, eli_error *err) {
    const void *rec = eli_read_bytes(cur, sizeof *out);
    if (!rec) return eli_fail(err, ELI_ERR_INVALID_ARG, "layer %d: record truncated", il);
    layer_record l;
    memcpy(&l, rec, sizeof l);
    const eli_kv_layer *c = &kv->layers[il];
    if (l.index != (uint32_t)il) return eli_fail(err, ELI_ERR_INVALID_ARG, "layer record %u where %d was expected", l.index, il);
    if ((l.has != 0) != (c->cell_pos != NULL) || l.has > 1)
        return eli_fail(err, ELI_ERR_INVALID_ARG, "layer %d: K/V storage flag %u does not match this model", il, l.has);
    *out = l;
    *out_pos = NULL;
    if (!l.has) return ELI_OK;
    if (l.n_cells != c->n_cells || l.row_bytes_k != c->row_bytes_k || l.row_bytes_v != c->row_bytes_v)
        return eli_fail(err, ELI_ERR_INVALID_ARG,
                        "layer %d: the file has %lld cells of %llu + %llu bytes, this stream %lld cells of %zu + %zu bytes",
                        il, (long long)l.n_cells, (unsigned long long)l.row_bytes_k, (unsigned long long)l.row_bytes_v,
                        (long long)c->n_cells, c->row_bytes_k, c->row_bytes_v);
    if (l.n_used < 0 || l.n_used > c->n_cells)
        return eli_fail(err, ELI_ERR_INVALID_ARG, "layer %d: %lld used cells out of %lld", il, (long long)l.n_used,
                        (long long)c->n_cells);
    const uint8_t *pos = eli_read_bytes(cur, (size_t)l.n_used * sizeof(int32_t));
    if (!pos || !eli_read_bytes(cur, (size_t)l.n_used * c->row_bytes_k) || !eli_read_bytes(cur, (size_t)l.n_used * c->row_bytes_v))
        return eli_fail(err, ELI_ERR_INVALID_ARG, "layer %d: cells truncated", il);
    for (int64_t i = 0; i < c->n_cells; i++) pos_tmp[i] = -1;
    int64_t last_cell = -1;
    for (int64_t i = 0; i < l.n_used; i++) {
        int32_t p;
        memcpy(&p, pos + 4 * i, sizeof p);
        if (p < 0 || p >= n_past)
            return eli_fail(err, ELI_ERR_INVALID_ARG, "layer %d: cell position %d outside [0, %d)", il, p, n_past);
        const int64_t cell = p % c->n_cells;
        if (cell <= last_cell)
            return eli_fail(err, ELI_ERR_INVALID_ARG, "layer %d: cells out of order or duplicated at position %d", il, p);
        last_cell = cell;
        pos_tmp[cell] = p;
    }
    const int full = c->n_cells >= kv->n_ctx;
    if (!eli_kv_window_ok(pos_tmp, c->n_cells, full, n_past, n_swa))
        return eli_fail(err, ELI_ERR_INVALID_ARG, "layer %d: the cells do not hold what position %d needs", il, n_past);
    *out_pos = pos;
    return ELI_OK;
}

int eli_kv_load(eli_kv_cache *kv, const uint8_t *p, size_t n, int32_t n_past, int n_swa, eli_error *err) {
    if (n_past < 0 || n_past > kv->n_ctx)
        return eli_fail(err, ELI_ERR_INVALID_ARG, "%d positions in a cache of %lld", n_past, (long long)kv->n_ctx);
    int64_t max_cells = 1;
    for (int il = 0; il < kv->n_layer; il++)
        if (kv->layers[il].n_cells > max_cells) max_cells = kv->layers[il].n_cells;
    int32_t *pos_tmp = malloc((size_t)max_cells * sizeof *pos_tmp);
    layer_record *recs = calloc((size_t)kv->n_layer, sizeof *recs);
    const uint8_t **poss = calloc((size_t)kv->n_layer, sizeof *poss);
    int rc = !pos_tmp || !recs || !poss ? eli_fail(err, ELI_ERR_OOM, "out of memory") : ELI_OK;
    eli_reader cur = {p, n};
    /* every layer is checked before the cache is touched */
    for (int il = 0; !rc && il < kv->n_layer; il++)
        rc = check_layer(&cur, kv, il, n_swa, n_past, pos_tmp, &recs[il], &poss[il], err);
    if (!rc && cur.left) rc = eli_fail(err, ELI_ERR_INVALID_ARG, "%zu unexpected bytes after the layers", cur.left);
    if (!rc) {
        eli_kv_clear(kv);
        for (int il = 0; il < kv->n_layer; il++) {
            eli_kv_layer *c = &kv->layers[il];
            if (!poss[il]) continue;
            const int64_t used = recs[il].n_used;
            const size_t kb = c->row_bytes_k, vb = c->row_bytes_v;
            const uint8_t *krows = poss[il] + 4 * (size_t)used, *vrows = krows + (size_t)used * kb;
            for (int64_t i = 0; i < used; i++) {
                int32_t pos;
                memcpy(&pos, poss[il] + 4 * i, sizeof pos);
                const int64_t cell = pos % c->n_cells;
                c->cell_pos[cell] = pos;
                memcpy(c->k + (size_t)cell * kb, krows + (size_t)i * kb, kb);
                memcpy(c->v + (size_t)cell * vb, vrows + (size_t)i * vb, vb);
            }
        }
    }
    free(pos_tmp), free(recs), free(poss);
    return rc;
}
