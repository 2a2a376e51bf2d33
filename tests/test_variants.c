/* Spec variants the golden files do not carry, made by rewriting them: each rewritten file must give the
 * same logits as the original (or the exactly predictable change), so the engine follows the spec and
 * not the fixtures. Split expert tensors vs fused; an untied output head; the softcap key absent (30 by
 * default) or 0 (off); head counts and FFN lengths as per-layer arrays instead of scalars. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "forward.h"
#include "gguf_writer.h"
#include "quants.h"
#include "test.h"

#define N_TOK 48

typedef struct {
    const char *drop_key;     /* metadata key left out */
    const char *set_key;      /* u32 / f32 / u32-array key written instead */
    uint32_t set_type;        /* GGUF_VT_UINT32, GGUF_VT_FLOAT32, or GGUF_VT_ARRAY (of u32) */
    double set_value;
    int set_n;                /* array length */
    int split_experts;        /* ffn_gate_up_exps -> ffn_gate_exps + ffn_up_exps */
    int untie;                /* add output.weight = token_embd.weight */
} variant;

static uint64_t ne_of(const eli_gguf_tensor *t, int d) { return (uint64_t)t->ne[d]; }

static eli_model *rewrite(const char *golden, const variant *v) {
    eli_error err = {0};
    eli_gguf_file *src = eli_gguf_open(eli_shared_path(golden), &err);
    if (!src) return NULL;
    gw_file w;
    gw_init(&w);
    w.alignment = eli_gguf_alignment(src);
    for (uint64_t i = 0; i < eli_gguf_n_kv(src); i++) {
        const eli_gguf_kv *kv = eli_gguf_kv_at(src, i);
        if ((v->drop_key && !strcmp(kv->key, v->drop_key)) || (v->set_key && !strcmp(kv->key, v->set_key))) continue;
        gw_value(gw_kv(&w, kv->key, kv->value.type), &kv->value);
    }
    if (v->set_key) {
        if (v->set_type == GGUF_VT_FLOAT32) gw_kv_f32(&w, v->set_key, (float)v->set_value);
        else if (v->set_type == GGUF_VT_UINT32) gw_kv_u32(&w, v->set_key, (uint32_t)v->set_value);
        else {
            uint32_t a[64];
            for (int i = 0; i < v->set_n; i++) a[i] = (uint32_t)v->set_value;
            gw_kv_arr_u32(&w, v->set_key, a, (uint64_t)v->set_n);
        }
    }
    for (uint64_t i = 0; i < eli_gguf_n_tensors(src); i++) {
        const eli_gguf_tensor *t = eli_gguf_tensor_at(src, i);
        uint64_t ne[4] = {ne_of(t, 0), ne_of(t, 1), ne_of(t, 2), ne_of(t, 3)};
        const char *suffix = strstr(t->name, "ffn_gate_up_exps.weight");
        if (v->split_experts && suffix) {
            /* per expert: rows [0, F) are the gate, [F, 2F) the up projection */
            const uint64_t F = ne[1] / 2, X = ne[2];
            const size_t row = eli_row_size(t->type, t->ne[0]);
            uint8_t *g = malloc(row * F * X), *u = malloc(row * F * X);
            for (uint64_t e = 0; e < X; e++) {
                const uint8_t *base = (const uint8_t *)t->data + e * 2 * F * row;
                memcpy(g + e * F * row, base, F * row);
                memcpy(u + e * F * row, base + F * row, F * row);
            }
            char name[128];
            const uint64_t ne2[3] = {ne[0], F, X};
            snprintf(name, sizeof name, "%.*sffn_gate_exps.weight", (int)(suffix - t->name), t->name);
            gw_tensor(&w, name, t->type, 3, ne2, g, row * F * X);
            snprintf(name, sizeof name, "%.*sffn_up_exps.weight", (int)(suffix - t->name), t->name);
            gw_tensor(&w, name, t->type, 3, ne2, u, row * F * X);
            free(g), free(u);
            continue;
        }
        gw_tensor(&w, t->name, t->type, t->n_dims, ne, t->data, (size_t)t->nbytes);
        if (v->untie && !strcmp(t->name, "token_embd.weight"))
            gw_tensor(&w, "output.weight", t->type, t->n_dims, ne, t->data, (size_t)t->nbytes);
    }
    size_t size;
    uint8_t *buf = gw_finish(&w, &size);
    gw_free(&w);
    eli_gguf_close(src);
    eli_gguf_file *f = eli_gguf_open_memory(buf, size, &err);
    eli_model *m = f ? eli_model_from_gguf(f, &err) : NULL;
    if (!m) {
        fprintf(stderr, "%s: %s\n", golden, err.msg);
        eli_gguf_close(f);
        free(buf);
        return NULL;
    }
    return m; /* buf is intentionally kept alive with the model (freed by the caller through keep) */
}

static float *logits_of(const eli_model *m, const char *tokens_file) {
    int32_t ids[N_TOK];
    FILE *f = fopen(eli_shared_path(tokens_file), "r");
    if (!f) return NULL;
    for (int i = 0; i < N_TOK; i++) {
        long x = 0;
        if (fscanf(f, "%ld", &x) != 1) x = 2;
        ids[i] = (int32_t)x;
    }
    fclose(f);
    eli_context_params p = eli_context_default_params();
    p.n_ctx = N_TOK;
    p.kv_type_k = p.kv_type_v = ELI_TYPE_F32;
    eli_error err = {0};
    eli_context *c = eli_context_create(m, &p, &err);
    float *out = malloc(sizeof(float) * (size_t)N_TOK * (size_t)m->hp.n_vocab);
    if (!c || eli_decode(c, ids, N_TOK, out, 1, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        free(out);
        out = NULL;
    }
    eli_context_free(c);
    return out;
}

/* Compares a variant against the unchanged file. mode 0: identical bits; 1: variant is uncapped. */
static void check(const char *what, const char *golden, const char *tokens, const variant *v, int mode) {
    eli_error err = {0};
    eli_model *base = eli_model_load(eli_shared_path(golden), &err);
    eli_model *var = rewrite(golden, v);
    CHECK(base && var, "%s: models load (%s)", what, err.msg);
    if (!base || !var) goto done;
    float *a = logits_of(base, tokens), *b = logits_of(var, tokens);
    CHECK(a && b, "%s: forward", what);
    if (a && b) {
        const size_t n = (size_t)N_TOK * (size_t)base->hp.n_vocab;
        double worst = 0;
        for (size_t i = 0; i < n; i++) {
            double want = mode ? 30.0 * tanh((double)b[i] / 30.0) : (double)b[i];
            double d = fabs(want - (double)a[i]);
            worst = d > worst ? d : worst;
        }
        if (mode) CHECK(worst < 1e-4, "%s: 30*tanh(uncapped/30) vs capped: max |diff| %.3g", what, worst);
        else CHECK(!memcmp(a, b, n * sizeof(float)), "%s: logits differ (max |diff| %.3g)", what, worst);
    }
    free(a), free(b);
done:
    eli_model_free(base);
    if (var) {
        const void *buf = eli_gguf_mapping(var->file);
        eli_model_free(var);
        free((void *)buf);
    }
}

int main(void) {
    variant split = {0};
    split.split_experts = 1;
    check("MoE with split gate/up experts", "golden/models/moe-mini-f32.gguf", "golden/models/moe-mini.tokens.txt", &split, 0);

    variant untie = {0};
    untie.untie = 1;
    check("untied output head", "golden/models/e2b-mini-f32.gguf", "golden/models/e2b-mini.tokens.txt", &untie, 0);

    variant nocap = {0};
    nocap.drop_key = "gemma4.final_logit_softcapping";
    check("softcap key absent (default 30)", "golden/models/e2b-mini-f32.gguf", "golden/models/e2b-mini.tokens.txt", &nocap, 0);

    variant cap0 = {0};
    cap0.set_key = "gemma4.final_logit_softcapping", cap0.set_type = GGUF_VT_FLOAT32, cap0.set_value = 0;
    check("softcap 0 (off)", "golden/models/e2b-mini-f32.gguf", "golden/models/e2b-mini.tokens.txt", &cap0, 1);

    variant heads = {0};
    heads.set_key = "gemma4.attention.head_count", heads.set_type = GGUF_VT_ARRAY, heads.set_value = 4, heads.set_n = 6;
    check("head_count as a per-layer array", "golden/models/e2b-mini-f32.gguf", "golden/models/e2b-mini.tokens.txt", &heads, 0);

    variant ff = {0};
    ff.set_key = "gemma4.feed_forward_length", ff.set_type = GGUF_VT_ARRAY, ff.set_value = 256, ff.set_n = 6;
    check("feed_forward_length as a per-layer array", "golden/models/dense-kv-mini-f32.gguf",
          "golden/models/dense-kv-mini.tokens.txt", &ff, 0);

    variant kvs = {0};
    kvs.set_key = "gemma4.attention.head_count_kv", kvs.set_type = GGUF_VT_UINT32, kvs.set_value = 2;
    /* dense-kv-mini's last layer has 1 KV head: a scalar 2 must be rejected by the shape check, not crash */
    eli_model *bad = rewrite("golden/models/dense-kv-mini-f32.gguf", &kvs);
    CHECK(bad == NULL, "a scalar head_count_kv that contradicts the tensors is rejected");
    TEST_MAIN_END();
}
