/* The multimodal towers on the CPU (exec.h's eli_xtower): a bound vision or audio tower with its matrices
 * packed for a kernel table, a thread pool, and the encoders of vision_encoder.c and audio_encoder.c. */
#ifndef ELI_CPU_TOWER_H
#define ELI_CPU_TOWER_H

#include <stdint.h>

#include "audio.h"
#include "error.h"
#include "exec.h"
#include "image.h"
#include "kernels.h"
#include "mmproj.h"
#include "ops.h"
#include "threadpool.h"
#include "vision.h"

/* Prepares v or a (one of them) for exec on kernel table k: repack 1 gives the matrices the kernels' packed
 * layout (owned copies; the bound tower's weights point at them until release). n_threads 0 = every CPU. */
eli_xtower *eli_cpu_tower_prepare(const eli_exec *exec, const eli_kernels *k, eli_vision *v, eli_audio *a, int repack,
                                  int n_threads, eli_error *err);
void eli_cpu_tower_release(eli_xtower *t);
int eli_cpu_tower_encode_image(eli_xtower *t, const eli_image *img, float *out, eli_error *err);
int eli_cpu_tower_encode_audio(eli_xtower *t, const float *mel, int64_t T, float *out, eli_error *err);

/* The encoders: an image preprocessed to the tower's size (within its position table) into
 * out[n_tokens][n_embd_text]; one chunk's log-mel mel[T][n_mel] into out[eli_audio_chunk_tokens(T)][n_embd]. */
int eli_cpu_vision_encode(const eli_vision *v, eli_pool *pool, const eli_kernels *k, const eli_image *img, float *out,
                          eli_error *err);
int eli_cpu_audio_encode(const eli_audio *a, eli_pool *pool, const eli_kernels *k, const float *mel, int64_t T, float *out,
                         eli_error *err);

#endif
