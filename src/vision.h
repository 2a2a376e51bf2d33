/* The Gemma 4 vision tower (projector type gemma4v) as llama.cpp's mtmd computes it
 * (../shared/spec/gemma4-mm.md): an image becomes n_tokens soft-token embeddings of the text model's width.
 *
 *   preprocess: aspect-preserving bilinear resize to a multiple of patch x pooling (48) within 40..280
 *               tokens, centred on a black canvas (byte-identical to mtmd's resized image);
 *   encode:     16x16 patch convolution (inputs and kernel rounded to fp16, as ggml's im2col does), the
 *               2-D position tables, the ViT blocks (RMS norms, q/k norms, 2-D NEOX RoPE base 100, V
 *               norm, bidirectional attention with scale 1, GELU-quick / GELU / SiLU gated FFN, post
 *               norms, per-block out scale), 3x3 average pooling x sqrt(E), standardisation, RMS norm
 *               and the projection (clippable linears with the file's clamps throughout).
 * Every hyperparameter comes from the file. This file binds the tower and preprocesses images; a device
 * encodes (exec.h: eli_vision_prepare, then eli_vision_encode; the CPU's is src/cpu/vision_encoder.c). */
#ifndef ELI_VISION_H
#define ELI_VISION_H

#include <stdint.h>

#include "error.h"
#include "image.h"
#include "mmproj.h"

struct eli_xtower;

/* The text around an image's soft tokens in the prompt (tokenised with special tokens parsed). */
#define ELI_VISION_MARKER_BEGIN "<|image>"
#define ELI_VISION_MARKER_END "<image|>"
/* The soft-token budget of an image (llama.cpp's gemma4v limits). */
#define ELI_VISION_MIN_TOKENS 40
#define ELI_VISION_MAX_TOKENS 280

typedef enum eli_vision_act { ELI_VISION_GELU_QUICK, ELI_VISION_GELU, ELI_VISION_SILU } eli_vision_act;

typedef struct eli_vision_layer {
    const float *ln1, *ln1_b, *ln2, *ln2_b, *attn_post_norm, *ffn_post_norm, *ls1, *ls2;
    const float *q_norm, *k_norm; /* [head_dim] per head, or [n_head * head_dim] over the whole row */
    int qk_norm_per_head;
    eli_mm_linear q, k, v, o, gate, up, down; /* gate absent: act(up) */
    const float *out_scale;                   /* [1] or [n_embd], or NULL */
    int out_scale_n;
} eli_vision_layer;

/* The bound tower (read by the devices' encoders). */
typedef struct eli_vision {
    eli_mmproj *p;
    eli_mm_hparams hp;
    int patch, merge, n_embd_text, pos_size;
    float mean[3], std[3];
    eli_vision_act act;
    eli_weight patch_w; /* {3 * patch^2, n_embd}, F16: ggml's conv rounds kernel and pixels to fp16 */
    void *patch_f16;
    const float *pos;   /* [2][pos_size][n_embd]: plane 0 by patch column, plane 1 by patch row */
    eli_vision_layer *layers;
    const float *std_bias, *std_scale;
    eli_mm_linear proj; /* mm.input_projection {n_embd, n_embd_text} */
} eli_vision;

/* Binds the vision tower of a projector (which must outlive it). */
eli_vision *eli_vision_load(eli_mmproj *p, eli_error *err);
void eli_vision_free(eli_vision *v);
/* The width of the embeddings (the text model's n_embd). */
int eli_vision_n_embd(const eli_vision *v);

/* The size the encoder sees for a w x h image (a multiple of patch x pooling on both sides). */
void eli_vision_target_size(const eli_vision *v, int w, int h, int *tw, int *th);
/* The resized image on its canvas, as mtmd makes it (out is allocated). */
int eli_vision_preprocess(const eli_vision *v, const eli_image *img, eli_image *out, eli_error *err);

typedef struct eli_vision_embd {
    float *embd;        /* [n_tokens][n_embd], malloc'ed */
    int n_tokens, n_embd;
    int width, height;  /* the preprocessed size */
    int grid_w, grid_h; /* tokens per row and per column: n_tokens = grid_w * grid_h, row-major */
} eli_vision_embd;

/* Preprocesses an image and encodes it on a tower prepared from v (eli_vision_prepare). */
int eli_vision_encode(struct eli_xtower *t, const eli_image *img, eli_vision_embd *out, eli_error *err);
void eli_vision_embd_free(eli_vision_embd *e);

#endif
