/* Included first by the files whose float results are tested bit for bit (the scalar reference kernels,
 * the SIMD kernel tables, the packed layouts): no -ffast-math, and no contraction of a * b + c into an
 * FMA, which would change the rounding (quants.c says where that was measured). The fused steps those
 * files want are written as explicit FMAs. clang's -ffp-contract=fast overrides the pragma: do not build
 * with it. Not a public header. */
#ifndef ELI_FP_EXACT_H
#define ELI_FP_EXACT_H

#if defined(__FAST_MATH__)
#error "this file must not be built with -ffast-math: it relies on exact IEEE float semantics"
#endif
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#endif
