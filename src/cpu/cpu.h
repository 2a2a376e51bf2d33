/* Run-time CPU feature detection (CPUID + XGETBV on x86-64; nothing elsewhere). SIMD kernels are only
 * called after these say the CPU and the OS support their instruction set. */
#ifndef ELI_CPU_H
#define ELI_CPU_H

typedef struct eli_cpu_features {
    int avx2, fma, f16c;     /* AVX2 + FMA3 + F16C, with the OS saving YMM state */
    int avx512f, avx512bw, avx512vl, avx512vnni; /* with the OS saving ZMM and opmask state */
    int avxvnni;             /* VEX-encoded AVX-VNNI */
    int neon;                /* aarch64 Advanced SIMD (always on aarch64) */
} eli_cpu_features;

/* Detected once, cached. */
const eli_cpu_features *eli_cpu_get(void);
/* "avx2 fma f16c avx512f ..." into buf. */
const char *eli_cpu_describe(char *buf, int cap);

#endif
