#include "kv_cache.h"

#include <stdlib.h>
#include <string.h>

#include "quants.h"

size_t eli_kv_elem_size(uint32_t type) { return type == ELI_TYPE_F16 ? 2 : 4; }

eli_kv_cache *eli_kv_create(const eli_model *m, int64_t n_ctx, int64_t n_ubatch, uint32_t type, eli_error *err) {
    if (type != ELI_TYPE_F32 && type != ELI_TYPE_F16) {
        eli_fail(err, ELI_ERR_INVALID_ARG, "KV cache type %s is not supported (use f32 or f16)", eli_type_name(type));
        return NULL;
    }
    if (n_ctx < 1 || n_ubatch < 1) {
        eli_fail(err, ELI_ERR_INVALID_ARG, "context size %lld and ubatch %lld must be positive", (long long)n_ctx,
                 (long long)n_ubatch);
        return NULL;
    }
    eli_kv_cache *kv = calloc(1, sizeof *kv);
    if (!kv) goto oom;
    kv->type = type;
    kv->n_layer = m->hp.n_layer;
    kv->n_ctx = n_ctx;
    kv->layers = calloc((size_t)m->hp.n_layer, sizeof *kv->layers);
    if (!kv->layers) goto oom;
    const size_t es = eli_kv_elem_size(type);
    for (int il = 0; il < m->hp.n_layer; il++) {
        const eli_layer *l = &m->layers[il];
        eli_kv_layer *c = &kv->layers[il];
        c->width = (int64_t)l->n_head_kv * l->head_dim;
        if (!l->has_kv) continue;
        int64_t ring = (int64_t)m->hp.n_swa + n_ubatch;
        c->n_cells = l->is_swa && ring < n_ctx ? ring : n_ctx;
        size_t bytes = (size_t)c->n_cells * (size_t)c->width * es;
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
    if (kv->type == ELI_TYPE_F16) {
        eli_fp16 *K = (eli_fp16 *)c->k + cell * c->width, *V = (eli_fp16 *)c->v + cell * c->width;
        for (int64_t i = 0; i < c->width; i++) {
            K[i] = eli_fp32_to_fp16(k[i]);
            V[i] = eli_fp32_to_fp16(v[i]);
        }
    } else {
        memcpy((float *)c->k + cell * c->width, k, (size_t)c->width * sizeof(float));
        memcpy((float *)c->v + cell * c->width, v, (size_t)c->width * sizeof(float));
    }
}

int eli_kv_has(const eli_kv_cache *kv, int il, int32_t pos) {
    const eli_kv_layer *c = &kv->layers[il];
    return c->cell_pos && pos >= 0 && c->cell_pos[pos % c->n_cells] == pos;
}
