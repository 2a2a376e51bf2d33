#include "cpu.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

static unsigned long long read_xcr0(void) {
    unsigned lo, hi;
    /* xgetbv with ecx = 0, encoded as bytes so no -mxsave is needed */
    __asm__ volatile(".byte 0x0f, 0x01, 0xd0" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((unsigned long long)hi << 32) | lo;
}
#endif

static eli_cpu_features feats;
static pthread_once_t feats_once = PTHREAD_ONCE_INIT;

static void detect(void) {
    memset(&feats, 0, sizeof feats);
#if defined(__x86_64__) || defined(__i386__)
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return;
    const int osxsave = (c >> 27) & 1, avx = (c >> 28) & 1;
    const int fma = (c >> 12) & 1, f16c = (c >> 29) & 1;
    if (!osxsave || !avx) return;
    const unsigned long long xcr0 = read_xcr0();
    const int ymm_ok = (xcr0 & 6) == 6;            /* SSE + AVX state */
    const int zmm_ok = ymm_ok && (xcr0 & 0xe0) == 0xe0; /* opmask + ZMM_Hi256 + Hi16_ZMM */
    if (!ymm_ok) return;
    unsigned max_leaf = __get_cpuid_max(0, NULL);
    if (max_leaf < 7) return;
    __cpuid_count(7, 0, a, b, c, d);
    feats.avx2 = (b >> 5) & 1;
    feats.fma = fma;
    feats.f16c = f16c;
    if (zmm_ok) {
        feats.avx512f = (b >> 16) & 1;
        feats.avx512bw = (b >> 30) & 1;
        feats.avx512vl = (b >> 31) & 1;
        feats.avx512vnni = (c >> 11) & 1;
    }
    unsigned a1, b1, c1, d1;
    __cpuid_count(7, 1, a1, b1, c1, d1);
    feats.avxvnni = (a1 >> 4) & 1;
    (void)b1, (void)c1, (void)d1;
#elif defined(__aarch64__)
    feats.neon = 1;
#endif
}

const eli_cpu_features *eli_cpu_get(void) {
    pthread_once(&feats_once, detect);
    return &feats;
}

const char *eli_cpu_describe(char *buf, int cap) {
    const eli_cpu_features *f = eli_cpu_get();
    if (cap <= 0) return buf;
    buf[0] = 0;
    int n = 0;
#define F_(x)                                                                                 \
    if (f->x && n < cap) n += snprintf(buf + n, (size_t)(cap - n), "%s%s", n ? " " : "", #x);
    F_(avx2) F_(fma) F_(f16c) F_(avx512f) F_(avx512bw) F_(avx512vl) F_(avx512vnni) F_(avxvnni) F_(neon)
#undef F_
    if (!n) snprintf(buf, (size_t)cap, "none");
    return buf;
}
