/* What every libFuzzer harness of tests/fuzz shares: the entry points' prototypes and the invariant check.
 * A harness feeds hostile bytes to one part of the library: an error return is a correct answer, a crash,
 * a sanitizer report, a leak or a broken invariant (FUZZ_ASSERT) is a finding. */
#ifndef ELI_FUZZ_H
#define ELI_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* abort() is what libFuzzer records as a crash, with the input that caused it */
#define FUZZ_ASSERT(cond, ...)                                                      \
    do {                                                                            \
        if (!(cond)) {                                                              \
            fprintf(stderr, "invariant broken at %s:%d: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                           \
            fprintf(stderr, "\n");                                                  \
            abort();                                                                \
        }                                                                           \
    } while (0)

#endif
