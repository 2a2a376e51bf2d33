/* The C host test: loads libelizainference the way the hosts do and checks the host surface against the
 * spec rather than our own header.
 *   1. dlopen(libelizainference, RTLD_NOW), then dlsym every eliza_inference_* name that
 *      ../shared/spec/ffi.md mentions (the desktop host binds them all in one table); the two ABI-14
 *      Kokoro names the spec forbids must be absent (the desktop host refuses a "13" library that has them).
 *   2. dlopen(the JNI-style bridge, RTLD_NOW): bridge.c references every symbol and was linked with
 *      -Wl,--no-undefined; its bridge_run drives the library.
 * Usage: test_host_c LIBRARY BRIDGE SPEC_MD MODEL */
#include <ctype.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_NAMES 256

/* Every distinct eliza_inference_<name> word of the file (a word ends at a character that cannot be part
 * of a C identifier; one ending in '_' is a prefix, such as eliza_inference_<feature>_supported). */
static int spec_names(const char *path, char names[][96], int cap) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    static char text[1 << 20];
    size_t len = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[len] = '\0';
    int n = 0;
    const char *prefix = "eliza_inference_";
    for (const char *p = strstr(text, prefix); p; p = strstr(p + 1, prefix)) {
        if (p > text && (isalnum((unsigned char)p[-1]) || p[-1] == '_')) continue;
        size_t w = 0;
        while (isalnum((unsigned char)p[w]) || p[w] == '_') w++;
        if (w == strlen(prefix) || p[w - 1] == '_' || w >= 96) continue;
        int dup = 0;
        for (int i = 0; i < n && !dup; i++) dup = strlen(names[i]) == w && !strncmp(names[i], p, w);
        if (dup || n == cap) continue;
        memcpy(names[n], p, w);
        names[n++][w] = '\0';
    }
    return n;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: %s LIBRARY BRIDGE SPEC_MD MODEL\n", argv[0]);
        return 2;
    }
    int fails = 0;
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "FAIL dlopen %s: %s\n", argv[1], dlerror());
        return 1;
    }
    static char names[MAX_NAMES][96];
    const int n = spec_names(argv[3], names, MAX_NAMES);
    static const char *const forbidden[] = {"eliza_inference_kokoro_g2p_kind", "eliza_inference_kokoro_synthesize_ipa"};
    int bound = 0, absent_ok = 0;
    for (int i = 0; i < n; i++) {
        int is_forbidden = 0;
        for (size_t k = 0; k < 2; k++) is_forbidden |= !strcmp(names[i], forbidden[k]);
        void *sym = dlsym(lib, names[i]);
        if (is_forbidden) {
            absent_ok += sym == NULL;
            if (sym) fprintf(stderr, "FAIL %s is exported (ABI 14 only)\n", names[i]), fails++;
        } else if (!sym) {
            fprintf(stderr, "FAIL %s is missing\n", names[i]), fails++;
        } else {
            bound++;
        }
    }
    if (n < 60 || absent_ok != 2) fprintf(stderr, "FAIL the spec lists %d names, %d forbidden ones seen\n", n, absent_ok), fails++;
    printf("spec names: %d, bound with RTLD_NOW: %d, ABI-14 names absent: %d\n", n, bound, absent_ok);

    void *bridge = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
    if (!bridge) {
        fprintf(stderr, "FAIL dlopen %s: %s\n", argv[2], dlerror());
        return 1;
    }
    int (*run)(const char *) = (int (*)(const char *))dlsym(bridge, "bridge_run");
    const int linked = run ? run(argv[4]) : -1;
    if (linked != bound) fprintf(stderr, "FAIL the bridge linked %d symbols, the spec has %d\n", linked, bound), fails++;
    else printf("JNI-style bridge: %d symbols linked with --no-undefined, loaded with RTLD_NOW, run: ok\n", linked);
    dlclose(bridge);
    dlclose(lib);
    printf("%s\n", fails ? "FAILED" : "ok");
    return fails ? 1 : 0;
}
