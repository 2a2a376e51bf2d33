/* Model file quantization: a GGUF in any weight type we read -> the same model in another file type
 * (eliza-infer quantize). The choice of each tensor's type, the metadata and the file layout follow
 * llama.cpp's llama-quantize (src/llama-quant.cpp, no importance matrix): with the same input the output
 * file is byte for byte llama-quantize's (tests/test_quantize.c checks this on the golden models), so files
 * made here work anywhere llama.cpp's do.
 *
 *  - which tensors: 2-D and 3-D tensors whose name ends in "weight", except norms, the MoE router, the
 *    per-layer model projection and the other small tensors llama.cpp keeps as they are;
 *  - which type: the file type's default; the *_k_m / *_k_s mixtures and the other llama.cpp file types
 *    give the token embedding (when tied to the output) Q6_K, some attn_v / ffn_down layers more bits
 *    (use_more_bits: the first and last eighth and every third layer between), Q8_0 attn_k / attn_v in
 *    8-expert models, and so on; "pure" types (q4_k, q5_k) skip these rules; a row length that the type's
 *    blocks do not divide falls back (Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, then F16);
 *  - the metadata: the input's, in its order, without the split keys, then general.quantization_version
 *    and general.file_type (llama.cpp's LLAMA_FTYPE number; ours for tq4_0);
 *  - the tensors in llama.cpp's order (layer index, then name), data aligned to 32 bytes.
 * Quantized inputs are dequantized first (what llama-quantize --allow-requantize does). The output is
 * written atomically (fileio.h). The work is split by rows over n_threads; the bytes do not depend on it.
 *
 * tq4_0 (quants.h, our type): the same mixture as q4_k_m with tq4_0 where q4_k_m has Q4_K -- see
 * quantize.c for why the id and the file type number. */
#ifndef ELI_QUANTIZE_H
#define ELI_QUANTIZE_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"

/* A file type: its name (as eliza-infer quantize takes it), general.file_type, the default tensor type and
 * whether llama.cpp's mixture rules apply. */
typedef struct eli_qftype {
    const char *name;
    uint32_t ftype;
    uint32_t type;
    int pure;
} eli_qftype;

/* The file type of a name (case-insensitive: "q4_k_m", "Q4_K_M", ...); NULL when unknown. */
const eli_qftype *eli_qftype_find(const char *name);
/* All file types, n_out receives the count. */
const eli_qftype *eli_qftype_all(int *n_out);

typedef struct eli_quantize_stats {
    uint64_t n_tensors, n_quantized, n_fallback;
    uint64_t bytes_in, bytes_out;   /* tensor data */
    uint64_t n_weights;             /* elements of all tensors */
} eli_quantize_stats;

/* Quantizes the GGUF at in into out as file type ft on n_threads threads (1..256). stats may be NULL. */
int eli_quantize_file(const char *in, const char *out, const eli_qftype *ft, int n_threads, eli_quantize_stats *stats,
                      eli_error *err);

#endif
