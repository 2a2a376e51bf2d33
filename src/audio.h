/* The Gemma 4 audio tower ("gemma4a" projector): log-mel frames in, soft-token embeddings in the text
 * model's width out, computed as llama.cpp's mtmd computes them (../shared/spec/gemma4-mm.md "Audio
 * encoder"), on our kernels:
 *   - subsampling: two 3x3 stride-2 convolutions over (time, frequency) with LayerNorm over channels and
 *     ReLU (inputs and kernels rounded to fp16 like ggml's convolution), the frames flattened channel
 *     fastest, a.input_projection;
 *   - conformer blocks: half-step FFN, chunked local attention (chunks of 12, each query sees itself and
 *     the 11 frames before it) with relative position logits and softcap 50, the light convolution module
 *     (GLU, causal depthwise convolution), the second half-step FFN, the block norm;
 *   - a.pre_encode.out (+bias), RMS norm (x mm.a.soft_emb_norm when present), mm.a.input_projection.
 * Every width, head count, channel count and layer count is read from the file; RMS norms use eps 1e-6
 * whatever the file says (llama.cpp hard-codes it for gemma4a). Tensors llama.cpp loads but never
 * applies (ffn/pw biases, q/k/v biases) are ignored likewise.
 *
 * "Clippable linears": a projection <p>.weight may have 1-element tensors <p>.input_min / input_max /
 * output_min / output_max. The input is clamped IN PLACE before the product, as llama.cpp does: q, k and v
 * read one normalised input and are computed v, k, q, so each sees the clamps of those before it.
 *
 * Long audio is cut into 30-second chunks (audio_mel.h), each encoded on its own; their embeddings follow
 * each other. In a prompt they sit between the texts ELI_AUDIO_BEGIN and ELI_AUDIO_END, one position per
 * embedding, causal.
 *
 * This file binds the tower and computes the log-mel; a device encodes (exec.h: eli_audio_prepare, then
 * eli_audio_embed; the CPU's encoder is src/cpu/audio_encoder.c). */
#ifndef ELI_AUDIO_H
#define ELI_AUDIO_H

#include <stdint.h>

#include "audio_mel.h"
#include "error.h"
#include "mmproj.h"
#include "quants.h"

struct eli_xtower;

#define ELI_AUDIO_BEGIN "<|audio>"
#define ELI_AUDIO_END "<audio|>"

#define ELI_AUDIO_NORM_EPS 1e-6f  /* every norm of the tower; llama.cpp ignores the file's value for gemma4a */
#define ELI_AUDIO_RES_WEIGHT 0.5f /* the half-step feed-forwards */
#define ELI_AUDIO_WINDOW 12       /* a query sees itself and the 11 frames before it */
#define ELI_AUDIO_N_REL 13        /* relative positions 0..12 are projected (12 is masked out, but costs nothing) */
#define ELI_AUDIO_SOFTCAP 50.0f

typedef struct eli_audio_half_ffn {
    const float *norm, *post_norm; /* post_norm optional */
    eli_mm_linear up, down;
} eli_audio_half_ffn;

typedef struct eli_audio_block {
    eli_audio_half_ffn ffn, ffn1;
    const float *attn_norm, *attn_post_norm, *q_scale, *k_scale; /* all but attn_norm optional */
    eli_mm_linear q, k, v, o;
    eli_weight k_rel;
    const float *conv_norm, *conv_post_norm; /* before pw1; after the depthwise conv (optional) */
    eli_mm_linear pw1, pw2;
    const float *dw, *dw_b; /* dw [n_conv][K]; dw_b optional */
    const float *out_norm;  /* ln2, optional */
} eli_audio_block;

/* The bound tower (read by the devices' encoders). */
typedef struct eli_audio {
    int n_layer, D, n_head, d_head, n_ff, n_mel;
    int C[2], F[2]; /* channels and frequency bins after each subsampling convolution */
    int n_conv, K;  /* GLU width and depthwise kernel size of the conv module */
    int n_embd;
    eli_weight conv[2]; /* the kernels rounded to f16 (as ggml's im2col path multiplies them), rows = channels */
    eli_fp16 *conv_f16[2];
    const float *conv_b[2], *conv_ln[2];
    eli_mm_linear in_proj, pre_out, mm_proj; /* pre_out.w.data NULL when absent */
    const float *soft_emb_norm;
    eli_audio_block *blk;
    float *pos_emb; /* [ELI_AUDIO_N_REL][D]: the sinusoid of relative position r in row r */
    eli_mel_frontend mel;
} eli_audio;

/* Binds the gemma4a tower of an open projector (its audio projector type "gemma4a"), which must outlive
 * the tower (the weights stay in its file and its owned copies: small tensors as f32). NULL + err when the
 * file has no such tower or it is malformed. */
eli_audio *eli_audio_load(eli_mmproj *p, eli_error *err);
void eli_audio_free(eli_audio *a);

/* The width of the embeddings (mm.a.input_projection's output: the text model's n_embd). */
int eli_audio_n_embd(const eli_audio *a);
/* Mel bins per frame (clip.audio.num_mel_bins). */
int eli_audio_n_mel(const eli_audio *a);

/* A stride-2 halving of a length (the subsampling convolutions): ceil(n / 2). */
static inline int64_t eli_audio_halve(int64_t n) { return (n - 1) / 2 + 1; }
/* Soft tokens of one chunk of T mel frames: two stride-2 halvings, ceil(ceil(T / 2) / 2). */
int64_t eli_audio_chunk_tokens(int64_t n_frames);

/* The log-mel of one chunk (the first min(n, 30 s) samples of 16 kHz mono PCM) into
 * out[frames][n_mel] (room for eli_mel_frames(ELI_MEL_CHUNK_SAMPLES) frames does for any chunk); returns
 * the number of frames (audio_mel.h: 0 for a single sample). */
int64_t eli_audio_mel(const eli_audio *a, const float *pcm, int64_t n, float *out);

/* The whole path from 16 kHz mono PCM on a tower prepared from an eli_audio (eli_audio_prepare): 30-second
 * chunks, log-mel, the device's encoder. *out (malloc'ed) receives [*n_tokens][n_embd]; *n_frames (may be
 * NULL) the mel frames of all chunks. A trailing chunk too short for a frame (one sample) adds nothing;
 * audio with no frame at all, and a sample that is not finite, are errors. */
int eli_audio_embed(struct eli_xtower *t, const float *pcm, int64_t n, float **out, int64_t *n_tokens, int64_t *n_frames,
                    eli_error *err);

#endif
