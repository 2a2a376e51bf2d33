/* A host program built only from the installed header and `pkg-config --cflags --libs elizainference`. */
#include <eliza_inference.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    if (strcmp(eliza_inference_abi_version(), ELIZA_INFERENCE_ABI_VERSION)) return 3;
    char *err = NULL;
    EliInferenceContext *c = eliza_inference_create(argv[1], &err);
    if (!c) {
        fprintf(stderr, "%s\n", err);
        eliza_inference_free_string(err);
        return 1;
    }
    int *ids = NULL;
    size_t n = 0;
    if (eliza_inference_tokenize(c, "Hello", 5, 1, 0, &ids, &n, &err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    char text[64];
    int w = eliza_inference_detokenize(c, ids, n, 1, 0, text, sizeof text, &err);
    printf("abi %s, %zu tokens, round trip '%s'\n", eliza_inference_abi_version(), n, w >= 0 ? text : "?");
    eliza_inference_free_tokens(ids);
    eliza_inference_destroy(c);
    return w == 5 && !strcmp(text, "Hello") ? 0 : 1;
}
