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
 * embedding, causal. */
#ifndef ELI_AUDIO_ENCODER_H
#define ELI_AUDIO_ENCODER_H

#include <stdint.h>

#include "error.h"
#include "mmproj.h"
#include "threadpool.h"

#define ELI_AUDIO_BEGIN "<|audio>"
#define ELI_AUDIO_END "<audio|>"

typedef struct eli_audio_encoder eli_audio_encoder;

/* Binds the gemma4a tower of an open projector (its audio projector type "gemma4a"), which must outlive
 * the encoder (the weights stay in its file and its owned copies: small tensors as f32, matrices in the
 * packed layout where the kernels have one, eli_mmproj_pack). NULL + err when the file has no such tower or
 * it is malformed. An encoder may run from several threads at once. */
eli_audio_encoder *eli_audio_encoder_create(eli_mmproj *p, eli_error *err);
void eli_audio_encoder_free(eli_audio_encoder *e);

/* The width of the embeddings (mm.a.input_projection's output: the text model's n_embd). */
int eli_audio_encoder_n_embd(const eli_audio_encoder *e);
/* Mel bins per frame (clip.audio.num_mel_bins). */
int eli_audio_encoder_n_mel(const eli_audio_encoder *e);

/* Soft tokens of one chunk of T mel frames: two stride-2 halvings, ceil(ceil(T / 2) / 2). */
int64_t eli_audio_chunk_tokens(int64_t n_frames);

/* The log-mel of one chunk (the first min(n, 30 s) samples of 16 kHz mono PCM) into
 * out[frames][n_mel] (room for eli_mel_frames(ELI_MEL_CHUNK_SAMPLES) frames does for any chunk); returns
 * the number of frames (audio_mel.h: 0 for a single sample). */
int64_t eli_audio_mel(const eli_audio_encoder *e, const float *pcm, int64_t n, float *out);

/* Encodes one chunk's log-mel mel[T][n_mel] (T >= 1) into out[eli_audio_chunk_tokens(T)][n_embd]. */
int eli_audio_encode_mel(const eli_audio_encoder *e, eli_pool *pool, const float *mel, int64_t T, float *out, eli_error *err);

/* The whole path from 16 kHz mono PCM: 30-second chunks, log-mel, encoder. *out (malloc'ed) receives
 * [*n_tokens][n_embd]; *n_frames (may be NULL) the mel frames of all chunks. A trailing chunk too short
 * for a frame (one sample) adds nothing; audio with no frame at all is an error. */
int eli_audio_embed(const eli_audio_encoder *e, eli_pool *pool, const float *pcm, int64_t n, float **out, int64_t *n_tokens,
                    int64_t *n_frames, eli_error *err);

#endif
