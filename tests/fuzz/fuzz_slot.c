/* Slot restore on mutated slot files (seeds: files saved from a short stream of the golden e2b-mini model,
 * fuzz_slot_stream.h). The harness writes the input to a file after fixing its trailing checksum, so the
 * mutations reach the header, counts, positions and rows behind the checksum test. A restore must either
 * fail with a message and leave the sequence as it was (empty), or give a consistent state (tokens in the
 * vocabulary, finite logits that the restored sampler samples) that then decodes one more token. */
#include <fcntl.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "fuzz.h"
#include "fuzz_slot_stream.h"
#include "slot.h"

static eli_model *model;
static eli_xseq *seq;
static eli_sampler *sampler;
static float *logits, *hidden;
static char path[256];

static void remove_file(void) { unlink(path); }

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    eli_error err = {0};
    const eli_exec_options o = {NULL, 1};
    const eli_seq_params p = fuzz_slot_params();
    const eli_sampler_params sp = fuzz_slot_sampler_params();
    model = eli_model_load(FUZZ_SLOT_MODEL, &err);
    eli_xmodel *xm = model ? eli_exec_prepare(eli_exec_default(), model, &o, &err) : NULL;
    seq = xm ? eli_seq_create(eli_exec_default(), xm, &p, &err) : NULL;
    if (seq && eli_sampler_create(&sp, model->hp.n_vocab, &sampler, &err)) seq = NULL;
    logits = model ? malloc((size_t)model->hp.n_vocab * sizeof *logits) : NULL;
    hidden = model ? malloc((size_t)model->hp.n_embd * sizeof *hidden) : NULL;
    const char *dir = getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/fuzz_slot.XXXXXX", dir && *dir ? dir : "/tmp");
    const int fd = mkstemp(path);
    if (!seq || !logits || !hidden || fd < 0) {
        fprintf(stderr, "fuzz_slot: %s\n", seq ? "no temporary file or memory" : err.msg);
        exit(1);
    }
    close(fd);
    atexit(remove_file);
    return 0;
}

static void write_input(const uint8_t *data, size_t size) {
    uint8_t *buf = malloc(size ? size : 1);
    FUZZ_ASSERT(buf != NULL, "out of memory");
    memcpy(buf, data, size);
    if (size >= 8) {
        const uint64_t sum = eli_hash64_bytes(buf, size - 8);
        memcpy(buf + size - 8, &sum, 8);
    }
    const int fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
    FUZZ_ASSERT(fd >= 0 && write(fd, buf, size) == (ssize_t)size, "cannot write %s", path);
    close(fd);
    free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    write_input(data, size);
    eli_seq_reset(seq);
    eli_sampler_reset(sampler);
    eli_slot_state st;
    memset(&st, 0, sizeof st);
    st.sampler = sampler;
    eli_error err = {0};
    int rc = eli_slot_restore(path, seq, &st, logits, hidden, &err);
    if (rc != ELI_OK) {
        FUZZ_ASSERT(rc < 0 && err.msg[0], "restore failed without a message");
        FUZZ_ASSERT(eli_seq_n_past(seq) == 0, "a failed restore changed the sequence");
        return 0;
    }
    const int64_t n_past = eli_seq_n_past(seq);
    FUZZ_ASSERT(st.tokens && st.n_tokens <= st.cap_tokens && st.n_tokens == n_past + st.pending,
                "restored state: %lld tokens (cap %lld), n_past %lld, pending %d", (long long)st.n_tokens,
                (long long)st.cap_tokens, (long long)n_past, st.pending);
    for (int64_t i = 0; i < st.n_tokens; i++)
        FUZZ_ASSERT(st.tokens[i] >= 0 && st.tokens[i] < model->hp.n_vocab, "restored token %d", st.tokens[i]);
    for (int i = 0; st.logits_valid && i < model->hp.n_vocab; i++)
        FUZZ_ASSERT(isfinite(logits[i]), "restored logit %d is %g", i, (double)logits[i]);
    if (st.logits_valid) {
        int32_t token;
        FUZZ_ASSERT(eli_sampler_sample(sampler, logits, &token, &err) == ELI_OK && token >= 0 &&
                        token < model->hp.n_vocab,
                    "sampling the restored logits with the restored sampler: %s", err.msg);
    }
    if (n_past < eli_seq_n_ctx(seq)) {
        const int32_t next = st.pending ? st.tokens[st.n_tokens - 1] : 1;
        const eli_outputs out = {logits, NULL, 0};
        rc = eli_seq_decode_tokens(seq, &next, 1, &out, &err);
        FUZZ_ASSERT(rc == ELI_OK, "decode after a restore: %s", err.msg);
    }
    free(st.tokens);
    return 0;
}
