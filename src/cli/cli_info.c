/* eliza-infer info -m FILE: architecture, hyperparameters, tensor counts by type, sizes. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "model.h"
#include "quants.h"

static int usage(void) {
    fprintf(stderr, "usage: eliza-infer info -m FILE\n");
    return 2;
}

int cli_info(int argc, char **argv) {
    const char *path = NULL;
    for (int i = 1; i < argc; i++) {
        if ((!strcmp(argv[i], "-m") || !strcmp(argv[i], "--model")) && i + 1 < argc) path = argv[++i];
        else if (!strcmp(argv[i], "--help")) return usage(), 0;
        else return cli_die("info: unknown option '%s'", argv[i]), usage();
    }
    if (!path) return usage();
    eli_error err = {0};
    eli_model *m = eli_model_load(path, &err);
    if (!m) return cli_die("%s", err.msg);
    const eli_hparams *hp = &m->hp;
    printf("file:           %s\n", path);
    printf("file size:      %llu bytes\n", (unsigned long long)eli_gguf_file_size(m->file));
    printf("gguf version:   %u, %llu metadata keys, %llu tensors, alignment %u\n", eli_gguf_version(m->file),
           (unsigned long long)eli_gguf_n_kv(m->file), (unsigned long long)eli_gguf_n_tensors(m->file), eli_gguf_alignment(m->file));
    printf("weight bytes:   %llu\n", (unsigned long long)m->weight_bytes);
    printf("architecture:   %s\n", m->arch_name);
    printf("n_layer %d  n_embd %d  n_vocab %d  context_length %d\n", hp->n_layer, hp->n_embd, hp->n_vocab,
           hp->n_ctx_train);
    printf("head_dim full %d / swa %d  n_rot full %d / swa %d  sliding_window %d\n", hp->head_dim_full,
           hp->head_dim_swa, hp->n_rot_full, hp->n_rot_swa, hp->n_swa);
    printf("rope base full %g / swa %g  rms_eps %g  final_softcap %g  output %s\n", (double)hp->rope_base_full,
           (double)hp->rope_base_swa, (double)hp->rms_eps, (double)hp->final_softcap, m->tied_output ? "tied" : "separate");
    printf("shared_kv_layers %d  per_layer_input %d  experts %d (used %d, ff %d)\n", hp->n_shared_kv, hp->n_pl,
           hp->n_expert, hp->n_expert_used, hp->n_ff_exp);
    printf("layers (type heads/kv_heads head_dim n_ff kv):\n");
    for (int il = 0; il < hp->n_layer; il++) {
        const eli_layer *l = &m->layers[il];
        printf("  %3d %-4s %2d/%-2d %4d %6d %s%s%s\n", il, l->is_swa ? "swa" : "full", l->n_head, l->n_head_kv,
               l->head_dim, l->n_ff, l->has_kv ? "own" : "shared<-", l->has_kv ? (l->k_eq_v ? " k=v" : "") : "",
               l->is_moe ? " moe" : "");
        if (!l->has_kv) printf("      (reads layer %d)\n", l->kv_source);
    }
    unsigned long long count[ELI_TYPE_COUNT] = {0}, bytes[ELI_TYPE_COUNT] = {0};
    for (uint64_t i = 0; i < eli_gguf_n_tensors(m->file); i++) {
        const eli_gguf_tensor *t = eli_gguf_tensor_at(m->file, i);
        count[t->type]++;
        bytes[t->type] += t->nbytes;
    }
    printf("tensors by type:\n");
    for (int t = 0; t < ELI_TYPE_COUNT; t++)
        if (count[t]) printf("  %-8s %5llu tensors %14llu bytes\n", eli_type_name((uint32_t)t), count[t], bytes[t]);
    eli_model_free(m);
    return 0;
}
