#include "kv_cache.h"

#include <stdlib.h>
#include <string.h>

#include "quants.h"

int eli_kv_type_from_name(const char *name, uint32_t *type) {
    static const struct {
        const char *name;
        uint32_t type;
    } names[] = {{"f32", ELI_TYPE_F32},   {"f16", ELI_TYPE_F16},   {"bf16", ELI_TYPE_BF16}, {"q8_0", ELI_TYPE_Q8_0},
                 {"q4_0", ELI_TYPE_Q4_0}, {"q4_1", ELI_TYPE_Q4_1}, {"q5_0", ELI_TYPE_Q5_0}, {"q5_1", ELI_TYPE_Q5_1}};
    for (size_t i = 0; name && i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(name, names[i].name)) {
            *type = names[i].type;
            return 0;
        }
    return -1;
}

eli_kv_cache *eli_kv_create(const eli_model *m, int64_t n_ctx, int64_t n_ubatch, uint32_t type, eli_error *err) {
    const eli_type_traits *tt = eli_type_info(type);
    if (!tt || !tt->quantize || !tt->dequantize ||
        (type != ELI_TYPE_F32 && type != ELI_TYPE_F16 && type != ELI_TYPE_BF16 && tt->block_size > 32)) {
        eli_fail(err, ELI_ERR_INVALID_ARG, "KV cache type %s is not supported", eli_type_name(type));
        return NULL;
    }
    if (n_ctx < 1 || n_ubatch < 1) {
        eli_fail(err, ELI_ERR_INVALID_ARG, "context size %lld and ubatch %lld must be positive", (long long)n_ctx,
                 (long long)n_ubatch);
        return NULL;
    }
    for (int il = 0; il < m->hp.n_layer; il++)
        if (m->layers[il].head_dim % (int)tt->block_size) {
            eli_fail(err, ELI_ERR_INVALID_ARG, "KV cache type %s needs head dims that are multiples of %u (layer %d has %d)",
                     tt->name, tt->block_size, il, m->layers[il].head_dim);
            return NULL;
        }
    eli_kv_cache *kv = calloc(1, sizeof *kv);
    if (!kv) goto oom;
    kv->type = type;
    kv->n_layer = m->hp.n_layer;
    kv->n_ctx = n_ctx;
    kv->layers = calloc((size_t)m->hp.n_layer, sizeof *kv->layers);
    if (!kv->layers) goto oom;
    for (int il = 0; il < m->hp.n_layer; il++) {
        const eli_layer *l = &m->layers[il];
        eli_kv_layer *c = &kv->layers[il];
        c->width = (int64_t)l->n_head_kv * l->head_dim;
        c->row_bytes = eli_row_size(type, c->width);
        if (!l->has_kv) continue;
        int64_t ring = (int64_t)m->hp.n_swa + n_ubatch;
        c->n_cells = l->is_swa && ring < n_ctx ? ring : n_ctx;
        size_t bytes = (size_t)c->n_cells * c->row_bytes;
        c->k = malloc(bytes);
        c->v = malloc(bytes);
        c->cell_pos = malloc((size_t)c->n_cells * sizeof *c->cell_pos);
        if (!c->k || !c->v || !c->cell_pos) goto oom;
        kv->bytes += 2 * bytes;
    }
    eli_kv_clear(kv);
    return kv;
oom:
    eli_kv_free(kv);
    eli_fail(err, ELI_ERR_OOM, "out of memory for a KV cache of %lld cells", (long long)n_ctx);
    return NULL;
}

void eli_kv_free(eli_kv_cache *kv) {
    if (!kv) return;
    if (kv->layers)
        for (int il = 0; il < kv->n_layer; il++) {
            free(kv->layers[il].k);
            free(kv->layers[il].v);
            free(kv->layers[il].cell_pos);
        }
    free(kv->layers);
    free(kv);
}

void eli_kv_clear(eli_kv_cache *kv) {
    for (int il = 0; il < kv->n_layer; il++) {
        eli_kv_layer *c = &kv->layers[il];
        for (int64_t i = 0; i < c->n_cells; i++) c->cell_pos[i] = -1;
    }
}

void eli_kv_store(eli_kv_cache *kv, int il, int32_t pos, const float *k, const float *v) {
    eli_kv_layer *c = &kv->layers[il];
    int64_t cell = pos % c->n_cells;
    c->cell_pos[cell] = pos;
    eli_quantize_row(kv->type, k, c->k + (size_t)cell * c->row_bytes, c->width);
    eli_quantize_row(kv->type, v, c->v + (size_t)cell * c->row_bytes, c->width);
}

int eli_kv_has(const eli_kv_cache *kv, int il, int32_t pos) {
    const eli_kv_layer *c = &kv->layers[il];
    return c->cell_pos && pos >= 0 && c->cell_pos[pos % c->n_cells] == pos;
}

int eli_kv_truncate(eli_kv_cache *kv, int32_t n_keep, int n_swa) {
    /* A query at n_keep (the next position) sees n_keep - n_swa + 1 .. n_keep - 1 on sliding layers and
     * everything on full layers (full caches never overwrite). */
    for (int il = 0; il < kv->n_layer; il++) {
        const eli_kv_layer *c = &kv->layers[il];
        if (!c->cell_pos || c->n_cells >= kv->n_ctx) continue;
        int32_t lo = n_keep - n_swa + 1 > 0 ? n_keep - n_swa + 1 : 0;
        for (int32_t p = lo; p < n_keep; p++)
            if (!eli_kv_has(kv, il, p)) return 0;
    }
    for (int il = 0; il < kv->n_layer; il++) {
        eli_kv_layer *c = &kv->layers[il];
        for (int64_t i = 0; c->cell_pos && i < c->n_cells; i++)
            if (c->cell_pos[i] >= n_keep) c->cell_pos[i] = -1;
    }
    return 1;
}
