/* Runs the C drafter on the fixed case of tests/data/nano_ref.draft.txt and writes its logits, so that
 * they can be compared with nano_ref.draft.logits.f32 (see README.md):
 *
 *   draft_check TARGET.gguf DRAFTER.gguf "ID ..." N_CTX N_DRAFT OUT.f32
 *
 * The target decodes ids[0:N_CTX] (f32 KV), then step 0 feeds ids[N_CTX] at position N_CTX with the target's
 * hidden state of position N_CTX-1; step i>0 feeds the argmax of step i-1 and its h_out. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drafter.h"
#include "forward.h"
#include "model.h"

int main(int argc, char **argv) {
    if (argc != 7) {
        fprintf(stderr, "usage: draft_check TARGET DRAFTER \"IDS\" N_CTX N_DRAFT OUT.f32\n");
        return 2;
    }
    eli_error err = {0};
    eli_model *t = eli_model_load(argv[1], &err);
    if (!t) { fprintf(stderr, "target: %s\n", err.msg); return 1; }
    eli_model *d = eli_model_load(argv[2], &err);
    if (!d || eli_drafter_bind(d, t, &err)) { fprintf(stderr, "drafter: %s\n", err.msg); return 1; }
    int32_t ids[4096];
    int n = 0;
    for (char *s = argv[3], *e; n < 4096; s = e) {
        long v = strtol(s, &e, 10);
        if (e == s) break;
        ids[n++] = (int32_t)v;
    }
    int n_ctx = atoi(argv[4]), n_draft = atoi(argv[5]);
    if (n_ctx < 1 || n_ctx >= n) { fprintf(stderr, "bad N_CTX\n"); return 2; }
    eli_context_params cp = eli_context_default_params();
    cp.n_ctx = 256;
    cp.kv_type = ELI_TYPE_F32;
    cp.n_threads = 1;
    eli_context *c = eli_context_create(t, &cp, &err);
    if (!c) { fprintf(stderr, "context: %s\n", err.msg); return 1; }
    int nb = t->hp.n_embd, nv = t->hp.n_vocab;
    float *h = malloc(sizeof(float) * nb), *h2 = malloc(sizeof(float) * nb);
    float *logits = malloc(sizeof(float) * nv * n_draft);
    eli_outputs out = {NULL, h, 0};
    if (eli_decode_ex(c, ids, n_ctx, &out, &err)) { fprintf(stderr, "decode: %s\n", err.msg); return 1; }
    eli_drafter *dr = eli_drafter_create(d, t, 256, &err);
    if (!dr) { fprintf(stderr, "drafter create: %s\n", err.msg); return 1; }
    int32_t tok = ids[n_ctx];
    for (int i = 0; i < n_draft; i++) {
        float *row = logits + (size_t)i * nv;
        if (eli_drafter_step(dr, c, tok, n_ctx, h, row, h2, &err)) { fprintf(stderr, "step: %s\n", err.msg); return 1; }
        int best = 0;
        for (int j = 1; j < nv; j++)
            if (row[j] > row[best]) best = j;
        printf("%d%s", best, i + 1 < n_draft ? " " : "\n");
        tok = best;
        memcpy(h, h2, sizeof(float) * nb);
    }
    FILE *f = fopen(argv[6], "wb");
    if (!f || fwrite(logits, sizeof(float), (size_t)nv * n_draft, f) != (size_t)nv * n_draft) return 1;
    fclose(f);
    return 0;
}
