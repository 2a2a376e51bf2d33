/* SDOT (Armv8.2 dotprod) for the NEON kernel files (kernels_neon.c, tquant_neon.c), which include this
 * after <arm_neon.h> on aarch64 only. Functions using it carry DOTPROD and are only called after the
 * HWCAP_ASIMDDP check of kernels.c. GCC's arm_neon.h declares vdotq_s32 under target
 * "arch=armv8.2-a+dotprod" (any CPU with dotprod implements Armv8.2); clang's arm_neon.h (up to 15 at least)
 * only declares it when the whole file is built with dotprod, so with clang SDOT is emitted through inline
 * assembly instead. Not a public header. */
#ifndef ELI_NEON_DOTPROD_H
#define ELI_NEON_DOTPROD_H

#if defined(__clang__)
#define DOTPROD __attribute__((target("dotprod")))
#else
#define DOTPROD __attribute__((target("arch=armv8.2-a+dotprod")))
#endif
#if defined(__clang__) && !defined(__ARM_FEATURE_DOTPROD)
static inline DOTPROD int32x4_t sdot(int32x4_t acc, int8x16_t a, int8x16_t b) {
    __asm__("sdot %0.4s, %1.16b, %2.16b" : "+w"(acc) : "w"(a), "w"(b));
    return acc;
}
#else
#define sdot vdotq_s32
#endif

#endif
