/* GGUF loader + model binding on arbitrary bytes: eli_gguf_open_memory, then every metadata value through the
 * typed getters and every tensor's first and last byte (all must lie inside the input), the tokenizer load,
 * and the model binding; a model that binds (the seeds include a tiny valid one) is prepared on the default
 * executor, its weights copied out or left in place (repack, by the input's size), and decodes two tokens,
 * which must succeed: a file that binds is one the engine has promised to run. */
#include <string.h>

#include "exec.h"
#include "fuzz.h"
#include "gguf.h"
#include "model.h"
#include "tokenizer.h"

static volatile uint8_t sink;

static void touch(const void *p, uint64_t n) {
    if (!n) return;
    sink ^= ((const uint8_t *)p)[0] ^ ((const uint8_t *)p)[n - 1];
}

static void walk_value(const eli_gguf_value *v, int depth) {
    FUZZ_ASSERT(depth <= 64, "arrays nested %d deep were accepted", depth);
    int64_t i64;
    double f64;
    if (v->type == GGUF_VT_STRING) {
        touch(v->v.str.ptr, v->v.str.len);
    } else if (v->type != GGUF_VT_ARRAY) {
        (void)eli_gguf_value_i64(v, 0, &i64, "scalar", NULL);
        (void)eli_gguf_value_f64(v, 0, &f64, "scalar", NULL);
    } else if (v->v.arr.elem_type == GGUF_VT_ARRAY) {
        for (uint64_t i = 0; i < v->v.arr.n; i++) walk_value(&v->v.arr.items[i], depth + 1);
    } else if (v->v.arr.elem_type == GGUF_VT_STRING) {
        for (uint64_t i = 0; i < v->v.arr.n; i++) touch(v->v.arr.strs[i].ptr, v->v.arr.strs[i].len);
    } else {
        FUZZ_ASSERT(eli_gguf_value_count(v) == v->v.arr.n, "array count");
        if (v->v.arr.n) { /* the ends of the payload: everything between is the same arithmetic */
            (void)eli_gguf_value_i64(v, 0, &i64, "array", NULL);
            (void)eli_gguf_value_f64(v, v->v.arr.n - 1, &f64, "array", NULL);
        }
        eli_error err = {0};
        FUZZ_ASSERT(eli_gguf_value_i64(v, v->v.arr.n, &i64, "array", &err) < 0, "index past the end accepted");
    }
}

static void check_tokenizer(const eli_gguf_file *f) {
    eli_error err = {0};
    eli_tokenizer *t = eli_tokenizer_load(f, &err);
    if (!t) {
        FUZZ_ASSERT(err.code < 0 && err.msg[0], "tokenizer load failed without a message");
        return;
    }
    static const char text[] = "Hello <|turn>user\n w\xc3\xb6rld  \xe2\x82\xac\xff";
    int32_t *ids = NULL;
    size_t n = 0;
    int rc = eli_tokenize(t, text, sizeof text - 1, 1, 1, &ids, &n, &err);
    FUZZ_ASSERT(rc == ELI_OK, "tokenize: %s", err.msg);
    char *out = NULL;
    size_t out_len = 0;
    rc = eli_detokenize(t, ids, n, 1, 1, &out, &out_len, &err);
    FUZZ_ASSERT(rc == ELI_OK, "detokenize of tokenize's ids: %s", err.msg);
    free(out);
    free(ids);
    eli_tokenizer_free(t);
}

/* prepares a model that bound on the default executor, its weights copied out (repack) or left in the
 * input as in a mapping, and decodes two tokens; the budget keeps each input fast */
static void check_decode(eli_model *m, int repack) {
    if (m->weight_bytes > ((uint64_t)1 << 20) || (int64_t)m->hp.n_embd * m->hp.n_layer > 65536) return;
    eli_error err = {0};
    const eli_exec *exec = eli_exec_default();
    const eli_exec_options o = {NULL, repack};
    eli_xmodel *xm = eli_exec_prepare(exec, m, &o, &err);
    if (!xm) {
        FUZZ_ASSERT(err.code == ELI_ERR_OOM, "prepare refused a model that bound: %s", err.msg);
        return;
    }
    eli_seq_params p = eli_seq_default();
    p.n_ctx = 8;
    p.n_ubatch = 2;
    p.n_threads = 1;
    p.reserve = 0;
    eli_xseq *s = eli_seq_create(exec, xm, &p, &err);
    if (s) {
        const int32_t tokens[2] = {0, m->hp.n_vocab - 1};
        const int rc = eli_seq_decode_tokens(s, tokens, 2, NULL, &err);
        FUZZ_ASSERT(rc == ELI_OK || rc == ELI_ERR_OOM, "decode on a model that bound: %s", err.msg);
        eli_seq_free(s);
    } else {
        FUZZ_ASSERT(err.code == ELI_ERR_OOM || err.code == ELI_ERR_INVALID_ARG, "sequence: %s", err.msg);
    }
    eli_xmodel_release(xm);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    eli_error err = {0};
    eli_gguf_file *f = eli_gguf_open_memory(data, size, &err);
    if (!f) {
        FUZZ_ASSERT(err.code < 0 && err.msg[0], "open failed without a message");
        return 0;
    }
    for (uint64_t i = 0; i < eli_gguf_n_kv(f); i++) {
        const eli_gguf_kv *kv = eli_gguf_kv_at(f, i);
        FUZZ_ASSERT(eli_gguf_find(f, kv->key) != NULL, "key '%s' not found by name", kv->key);
        walk_value(&kv->value, 0);
    }
    for (uint64_t i = 0; i < eli_gguf_n_tensors(f); i++) {
        const eli_gguf_tensor *t = eli_gguf_tensor_at(f, i);
        FUZZ_ASSERT(eli_gguf_find_tensor(f, t->name) != NULL, "tensor '%s' not found by name", t->name);
        FUZZ_ASSERT((const uint8_t *)t->data >= data && t->nbytes <= size &&
                        (size_t)((const uint8_t *)t->data - data) <= size - t->nbytes,
                    "tensor '%s' data outside the input", t->name);
        touch(t->data, t->nbytes);
    }
    check_tokenizer(f);
    eli_model *m = eli_model_from_gguf(f, &err);
    if (!m) {
        FUZZ_ASSERT(err.code < 0 && err.msg[0], "model binding failed without a message");
        eli_gguf_close(f);
        return 0;
    }
    check_decode(m, (int)(size & 1));
    eli_model_free(m);
    return 0;
}
