/* TurboQuant-style rotated codebook quantization, shared by the tbq4_0 / tbq3_0 KV cache types (kvquant.c)
 * and the tq4_0 weights (quants.c).
 *
 * A block of n values (a power of two, 16..512) is rotated by a fixed random orthogonal map (a seeded sign
 * flip, then the fast Walsh-Hadamard transform, scaled by 1/sqrt(n)), which makes its coordinates close to
 * i.i.d. gaussian whatever the input (outlier channels are spread over the block). Each rotated coordinate
 * is coded as the nearest level of a Lloyd-Max codebook for N(0, 1) (16 or 8 int8 levels, largest 127,
 * kvquant_tables.h), at a unit set per 16 values: one float scale s per block times a small integer
 * multiplier m per 16 values (3 bits: m = 7..14, 2 bits: m = 4..7, or none: m = 1), chosen per 16 values
 * for the least squared error. A value decodes to s * (m * level[code]) -- an exact integer times s -- and a
 * dot product with an int8 vector is an integer sum per 16 values times m, then one float multiply.
 *
 * The per-16 multipliers take the local spread of the rotated values into account (a fixed-rate Lloyd-Max
 * code at one scale per block has MSE 0.0095 per unit variance at 4 bits; with 3-bit multipliers per 16
 * values 0.0055, at 3 bits 0.034 -> 0.022; tools/kvquant_tables.py, tests/test_kvquant.c). */
#ifndef ELI_TQUANT_H
#define ELI_TQUANT_H

#include <stddef.h>
#include <stdint.h>

#define ELI_TQ_MAX_N 512

/* The codebooks (int8 levels, 16 for 4 bits and 8 for 3 bits) and their int8 steps per standard deviation. */
typedef struct eli_tq_codebook {
    const int8_t *levels;
    int n_levels;
    float units;
} eli_tq_codebook;
extern const eli_tq_codebook eli_tq_cb4, eli_tq_cb3;

/* The rotation's sign flips: value i of a block (any n) is negated when bit i % 64 of word i / 64 is set. */
extern const uint64_t eli_tq_sign_bits[ELI_TQ_MAX_N / 64];
/* 1/sqrt(n) rounded to float: (float)(1.0 / sqrt((double)n)). */
float eli_tq_inv_sqrt(int n);
/* In place fast Walsh-Hadamard transform of n (power of two) floats, unnormalised: butterflies of stride
 * 1, 2, 4, .. each x[j] = a + b, x[j + h] = a - b (any vectorisation of a stage gives the same bits). */
void eli_tq_fwht(float *x, int n);
/* y = H (sign * x) * inv_sqrt(n) and its inverse x = sign * (H y * inv_sqrt(n)); y may alias x. */
void eli_tq_rotate(const float *x, float *y, int n);
void eli_tq_unrotate(const float *y, float *x, int n);

/* 4-bit codes of n values (n a multiple of 32) to n/2 bytes and back: per group of G = min(64, n) values,
 * byte j holds value j (low nibble) and value j + G/2 (high nibble). */
void eli_tq_pack4(const uint8_t *code, int n, uint8_t *qs);
void eli_tq_unpack4(const uint8_t *qs, int n, uint8_t *code);

/* The multiplier of sub-scale code k for sub-scale width bits (3, 2 or 0). */
static inline int eli_tq_mult(int bits, unsigned k) { return bits == 3 ? 7 + (int)k : bits == 2 ? 4 + (int)k : 1; }

/* Codes the n rotated values y (n a multiple of 16, at most ELI_TQ_MAX_N): code[i] (a level index),
 * sub[n/16] (sub-scale codes, all 0 when bits == 0), and returns the block scale s: with projecting set the
 * one that makes the decoded block project onto y exactly (|y|^2 / <y, u>: no systematic shrink of dot
 * products, for attention), else the least-squares one (<y, u> / |u|^2); 0 for a zero or non-finite block.
 * The scale is clamped to the fp16 range (it is stored as fp16). The codes are chosen for the unit that the
 * block's RMS gives; with search set, for the best of 7 units around it, each refined by refitting the scale
 * and choosing again (7 x 3 passes: for weights, quantized once; MSE 0.0054 -> 0.0051 on gaussian data). */
float eli_tq_quantize(const eli_tq_codebook *cb, int bits, int projecting, int search, const float *y, int n,
                      uint8_t *code, uint8_t *sub);

/* Little-endian bit streams: field k of width bits at bit k * width. */
unsigned eli_tq_bits_get(const uint8_t *p, size_t nbytes, size_t off, int width);
void eli_tq_bits_put(uint8_t *p, size_t off, unsigned v, int width);

#endif
