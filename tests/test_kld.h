/* KLD(ref || ours) of logits, per row in float64 (the golden README's definition), for the tests that
 * compare against llama.cpp's or PyTorch's logits. */
#ifndef ELI_TEST_KLD_H
#define ELI_TEST_KLD_H

#include <math.h>
#include <stddef.h>

/* The mean over rows of KLD(ref || ours), rows of n logits; the largest row's into *max when max != NULL. */
static inline double test_mean_kld(const float *ref, const float *ours, int rows, int n, double *max) {
    double total = 0, top = 0;
    for (int r = 0; r < rows; r++) {
        const float *a = ref + (size_t)r * n, *b = ours + (size_t)r * n;
        double ma = -INFINITY, mb = -INFINITY, sa = 0, sb = 0, kld = 0;
        for (int j = 0; j < n; j++) ma = a[j] > ma ? a[j] : ma, mb = b[j] > mb ? b[j] : mb;
        for (int j = 0; j < n; j++) sa += exp(a[j] - ma), sb += exp(b[j] - mb);
        for (int j = 0; j < n; j++) {
            double pa = a[j] - ma - log(sa), pb = b[j] - mb - log(sb);
            kld += exp(pa) * (pa - pb);
        }
        total += kld / rows;
        top = kld > top ? kld : top;
    }
    if (max) *max = top;
    return total;
}

#endif
