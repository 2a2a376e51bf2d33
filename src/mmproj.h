/* A multimodal projector GGUF ("mmproj", general.architecture "clip"): the part both Gemma 4 towers (vision
 * gemma4v, audio gemma4a) share. It opens the file, says which towers it holds and of which projector type,
 * reads the clip.<tower>.* hyperparameters both towers have, and binds tensors with shape, type and value
 * checks: matrices in any weight format the text model has (quants.h), small tensors as owned f32 copies,
 * and "clippable linears" (a matrix with an optional bias and optional clamp scalars).
 *
 * The file is hostile input: every key is range-checked, every tensor's shape and type is checked before
 * its data is read, and each problem fails with a message naming the key or tensor. The tower code
 * (vision.c, audio) reads its own keys and binds its own tensors through these helpers.
 *
 * Binding only: nothing here multiplies or lays out a matrix. A device prepares a bound tower (exec.h:
 * the CPU packs its matrices, src/cpu/tower.c) and applies its linears.
 *
 * Clamps, as llama.cpp's Gemma 4 towers compute them (tools/mtmd, build_mm of gemma4v / gemma4a): a matrix
 * `<p>.weight` may come with 1-element tensors `<p>.input_min`, `<p>.input_max`, `<p>.output_min`,
 * `<p>.output_max` (missing = -FLT_MAX / FLT_MAX). The input is clamped IN PLACE before the matmul, so a
 * later linear that reads the same buffer sees the earlier clamp too (call them in llama.cpp's order);
 * the output is clamped after the matmul, and the bias `<p>.bias`, when present, is added after that. */
#ifndef ELI_MMPROJ_H
#define ELI_MMPROJ_H

#include <stdint.h>

#include "error.h"
#include "gguf.h"
#include "model.h"

/* Hard limits that keep every size computation far from overflow; real towers are well inside. */
#define ELI_MM_MAX_LAYERS 256
#define ELI_MM_MAX_DIM (1 << 16)

typedef enum eli_mm_tower { ELI_MM_VISION = 0, ELI_MM_AUDIO = 1 } eli_mm_tower;

typedef struct eli_mmproj {
    eli_gguf_file *file;
    int has[2];            /* per eli_mm_tower: clip.has_{vision,audio}_encoder */
    char proj_type[2][32]; /* per eli_mm_tower: "gemma4v", "gemma4a", ...; "" when the tower is absent */
    void **owned;          /* f32 copies of small tensors, freed with the projector */
    size_t n_owned;
} eli_mmproj;

/* The hyperparameters every tower has: clip.<tower>.{block_count, embedding_length, feed_forward_length,
 * attention.head_count, attention.head_count_kv (default head_count), attention.head_dim (default
 * embedding_length / head_count), attention.layer_norm_epsilon, projection_dim}. */
typedef struct eli_mm_hparams {
    int n_layer, n_embd, n_ff, n_head, n_head_kv, head_dim, proj_dim;
    float eps;
} eli_mm_hparams;

/* A clippable linear: y = clamp_out(W clamp_in(x)) + bias. */
typedef struct eli_mm_linear {
    eli_weight w;       /* {n_in, n_out} */
    const float *bias;  /* [n_out] or NULL */
    float in_min, in_max, out_min, out_max;
} eli_mm_linear;

/* Opens a projector file (the projector owns it). NULL + err (prefixed with the path) on failure. */
eli_mmproj *eli_mmproj_open(const char *path, eli_error *err);
/* The same over an opened file; takes ownership of f on success only. */
eli_mmproj *eli_mmproj_from_gguf(eli_gguf_file *f, eli_error *err);
void eli_mmproj_free(eli_mmproj *p);

/* "vision" / "audio": the <tower> part of the clip.<tower>.* keys. */
const char *eli_mm_tower_name(eli_mm_tower t);
/* The projector type of a tower ("gemma4v"), NULL when the file does not hold that tower. */
const char *eli_mmproj_type(const eli_mmproj *p, eli_mm_tower t);
/* The shared hyperparameters of a tower the file holds. */
int eli_mmproj_hparams(const eli_mmproj *p, eli_mm_tower t, eli_mm_hparams *hp, eli_error *err);

/* Keys. Absent and not required: *out keeps its value and ELI_OK is returned. */
int eli_mmproj_u32(const eli_mmproj *p, const char *key, int required, int lo, int hi, int *out, eli_error *err);
/* A finite float. */
int eli_mmproj_f32(const eli_mmproj *p, const char *key, int required, float *out, eli_error *err);
int eli_mmproj_bool(const eli_mmproj *p, const char *key, int *out, eli_error *err);
/* The first n elements of a numeric array key that has at least n (finite) elements. */
int eli_mmproj_f32_array(const eli_mmproj *p, const char *key, int required, int n, float *out, eli_error *err);

/* Tensors. ne gives the expected shape (ne[0] fastest, every unused dimension 1); absent and not required:
 * *out = NULL and ELI_OK. */
int eli_mmproj_tensor(const eli_mmproj *p, const char *name, int required, const int64_t ne[4], const eli_gguf_tensor **out,
                      eli_error *err);
/* The tensor dequantized to an owned f32 copy (freed with the projector); every value must be finite. */
int eli_mmproj_f32_tensor(eli_mmproj *p, const char *name, int required, const int64_t ne[4], const float **out,
                          eli_error *err);
/* A matrix {cols, rows} the kernels multiply with (any computable type of quants.h); w->data stays NULL when
 * absent and not required. */
int eli_mmproj_matrix(const eli_mmproj *p, eli_weight *w, const char *name, int required, int64_t cols, int64_t rows,
                      eli_error *err);
/* A clippable linear: `<prefix>.weight` {n_in, n_out} (l->w.data NULL when absent and not required), the
 * optional `<prefix>.bias` {n_out} and the optional clamp scalars (1 element, any float type; +-inf allowed,
 * NaN refused). */
int eli_mmproj_linear(eli_mmproj *p, eli_mm_linear *l, const char *prefix, int required, int64_t n_in, int64_t n_out,
                      eli_error *err);

#endif
