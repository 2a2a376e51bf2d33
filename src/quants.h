/* Weight and activation formats, bit-compatible with the ggml/GGUF block layouts.
 *
 * Every format has a plain scalar reference implementation here (dequantize, quantize, dot product);
 * SIMD kernels elsewhere are tested against these. Dot products follow ggml's scheme: the right-hand
 * operand (the activation) is first quantized to the weight's `vec_dot_type` (Q8_0 for Q4_0/Q5_0/Q8_0,
 * Q8_1 for Q4_1/Q5_1, Q8_K for the K-quants, F16 for F16, BF16 for BF16, F32 for F32) and the dot is
 * computed block by block as ggml's reference does, so logits match llama.cpp closely. */
#ifndef ELI_QUANTS_H
#define ELI_QUANTS_H

#include <stddef.h>
#include <stdint.h>

/* ggml type ids as stored in GGUF tensor infos. */
enum eli_type {
    ELI_TYPE_F32 = 0,
    ELI_TYPE_F16 = 1,
    ELI_TYPE_Q4_0 = 2,
    ELI_TYPE_Q4_1 = 3,
    ELI_TYPE_Q5_0 = 6,
    ELI_TYPE_Q5_1 = 7,
    ELI_TYPE_Q8_0 = 8,
    ELI_TYPE_Q8_1 = 9,
    ELI_TYPE_Q2_K = 10,
    ELI_TYPE_Q3_K = 11,
    ELI_TYPE_Q4_K = 12,
    ELI_TYPE_Q5_K = 13,
    ELI_TYPE_Q6_K = 14,
    ELI_TYPE_Q8_K = 15,
    ELI_TYPE_IQ2_XXS = 16,
    ELI_TYPE_IQ2_XS = 17,
    ELI_TYPE_IQ3_XXS = 18,
    ELI_TYPE_IQ1_S = 19,
    ELI_TYPE_IQ4_NL = 20,
    ELI_TYPE_IQ3_S = 21,
    ELI_TYPE_IQ2_S = 22,
    ELI_TYPE_IQ4_XS = 23,
    ELI_TYPE_I8 = 24,
    ELI_TYPE_I16 = 25,
    ELI_TYPE_I32 = 26,
    ELI_TYPE_I64 = 27,
    ELI_TYPE_F64 = 28,
    ELI_TYPE_IQ1_M = 29,
    ELI_TYPE_BF16 = 30,
    ELI_TYPE_TQ1_0 = 34,
    ELI_TYPE_TQ2_0 = 35,
    ELI_TYPE_MXFP4 = 39,
    /* Our own types. Their ids are far above ggml's (0..42 today, a few added a year) so that ggml never
     * gives another type the same number: a file with them is refused by llama.cpp ("invalid ggml type")
     * instead of being misread, and is read by us. The low-bit KV cache types continue at 112 (kvquant.h). */
    ELI_TYPE_TQ4_0 = 96, /* rotated 4-bit codebook weights, 4.25 bits (tquant.h) */
    ELI_TYPE_Q8_TQ = 97, /* its activation: rotated like the weights, 8 bits, one scale per 256 */
    ELI_TYPE_COUNT = 98
};

#define ELI_QK4_0 32
#define ELI_QK4_1 32
#define ELI_QK5_0 32
#define ELI_QK5_1 32
#define ELI_QK8_0 32
#define ELI_QK8_1 32
#define ELI_QK_K 256
#define ELI_K_SCALE_SIZE 12

typedef uint16_t eli_fp16;
typedef uint16_t eli_bf16;

/* Block layouts (packed exactly as in GGUF files; all fields little-endian). */
typedef struct { eli_fp16 d; uint8_t qs[ELI_QK4_0 / 2]; } eli_block_q4_0;
typedef struct { eli_fp16 d, m; uint8_t qs[ELI_QK4_1 / 2]; } eli_block_q4_1;
typedef struct { eli_fp16 d; uint8_t qh[4]; uint8_t qs[ELI_QK5_0 / 2]; } eli_block_q5_0;
typedef struct { eli_fp16 d, m; uint8_t qh[4]; uint8_t qs[ELI_QK5_1 / 2]; } eli_block_q5_1;
typedef struct { eli_fp16 d; int8_t qs[ELI_QK8_0]; } eli_block_q8_0;
typedef struct { eli_fp16 d, s; int8_t qs[ELI_QK8_1]; } eli_block_q8_1; /* s = d * sum(qs) */
typedef struct {
    eli_fp16 d, dmin;
    uint8_t scales[ELI_K_SCALE_SIZE];
    uint8_t qs[ELI_QK_K / 2];
} eli_block_q4_K;
typedef struct {
    eli_fp16 d, dmin;
    uint8_t scales[ELI_K_SCALE_SIZE];
    uint8_t qh[ELI_QK_K / 8];
    uint8_t qs[ELI_QK_K / 2];
} eli_block_q5_K;
typedef struct {
    uint8_t ql[ELI_QK_K / 2];
    uint8_t qh[ELI_QK_K / 4];
    int8_t scales[ELI_QK_K / 16];
    eli_fp16 d;
} eli_block_q6_K;
typedef struct {
    float d;
    int8_t qs[ELI_QK_K];
    int16_t bsums[ELI_QK_K / 16];
} eli_block_q8_K;
/* TQ4_0: 256 weights rotated by tquant.h's map for 256 values, coded as 4-bit Lloyd-Max levels; w =
 * unrotate(d * m * level[code]), m = 7 + (3-bit code of the 16 weights) (tquant.h); qs as tbq4_0's codes
 * (kvquant.h): per 64 weights, byte j holds weight j (low nibble) and j + 32 (high nibble). */
typedef struct {
    eli_fp16 d;
    uint8_t scales[6]; /* 16 x 3-bit multiplier codes, bit stream */
    uint8_t qs[ELI_QK_K / 2];
} eli_block_tq4_0;
/* Q8_TQ: 256 activations rotated the same way, x = d * qs (round to nearest even, |qs| <= 127). */
typedef struct {
    float d;
    int8_t qs[ELI_QK_K];
} eli_block_q8_tq;

/* Scalar reference kernels of one format. Row lengths must be multiples of the block size. */
typedef void (*eli_dequantize_fn)(const void *src, float *dst, int64_t n);
typedef void (*eli_quantize_fn)(const float *src, void *dst, int64_t n);
/* Dot of a weight row x (this type) with an activation row y (already in vec_dot_type). */
typedef float (*eli_vec_dot_fn)(int64_t n, const void *x, const void *y);

typedef struct eli_type_traits {
    const char *name;
    uint32_t block_size;    /* elements per block */
    uint32_t type_size;     /* bytes per block */
    uint32_t vec_dot_type;  /* activation format of vec_dot */
    eli_dequantize_fn dequantize; /* NULL: the engine cannot compute with this type */
    eli_quantize_fn quantize;     /* NULL: no quantizer */
    eli_vec_dot_fn vec_dot;       /* NULL: no dot product */
} eli_type_traits;

/* Traits of a ggml type id; NULL when the id is not a known ggml type. Types whose layout is known but
 * that the engine cannot compute with have dequantize == NULL. */
const eli_type_traits *eli_type_info(uint32_t type);
/* "Q4_K" etc., or "unknown". */
const char *eli_type_name(uint32_t type);
/* Bytes of a row of n elements; 0 when the type is unknown or n is not a multiple of its block size. */
size_t eli_row_size(uint32_t type, int64_t n);

/* Half-precision conversions (IEEE binary16 with round-to-nearest-even; bfloat16 rounds to nearest even,
 * NaN kept quiet). */
float eli_fp16_to_fp32(eli_fp16 h);
eli_fp16 eli_fp32_to_fp16(float f);
float eli_bf16_to_fp32(eli_bf16 h);
eli_bf16 eli_fp32_to_bf16(float f);

/* Q4_K / Q5_K: sub-block j's (0..7) 6-bit scale and min from a block's 12 scale bytes; and all 8 of both
 * packed into the 12 bytes (scales[] need not be cleared first). */
void eli_q4_K_scale_min(int j, const uint8_t *scales, uint8_t *sc, uint8_t *m);
void eli_q4_K_set_scales_mins(uint8_t *scales, const uint8_t ls[8], const uint8_t lm[8]);

/* Generic entry points over the traits table (type must be supported). */
void eli_dequantize_row(uint32_t type, const void *src, float *dst, int64_t n);
void eli_quantize_row(uint32_t type, const float *src, void *dst, int64_t n);
float eli_vec_dot(uint32_t type, int64_t n, const void *x, const void *y);

#endif
