/* A model file cut while mapped (mapguard.h, gguf.h eli_gguf_check_mapping): with the weights read through the
 * mapping (ELIZA_LLM_REPACK=0) a decode on two threads after ftruncate survives, the mapping reads zeros and
 * the file is reported as shrunk, by name; a SIGBUS outside the guarded mappings still reaches the handler
 * a host installed before (chained), or kills the process when there was none (default action, in a
 * child); the per-layer-embedding rows, read with pread, fail cleanly on a cut file. */
#include <fcntl.h>
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "exec.h"
#include "gguf.h"
#include "mapguard.h"
#include "model.h"
#include "test.h"

#define MODEL "golden/models/e2b-mini-f32.gguf"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SANITIZED 1
#endif
#endif

static char tmpdir[64];

static int copy_file(const char *src, const char *dst) {
    FILE *in = fopen(src, "rb"), *out = fopen(dst, "wb");
    char buf[65536];
    size_t n;
    int ok = in && out;
    while (ok && (n = fread(buf, 1, sizeof buf, in)) > 0) ok = fwrite(buf, 1, n, out) == n;
    if (in) fclose(in);
    if (out && fclose(out)) ok = 0;
    return ok;
}

/* n bytes of a new file mapped read-only (not guarded), then the file cut to nothing: every page faults */
static volatile const uint8_t *map_then_cut(const char *path, size_t n) {
    const int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) return NULL;
    void *p = ftruncate(fd, (off_t)n) ? MAP_FAILED : mmap(NULL, n, PROT_READ, MAP_PRIVATE, fd, 0);
    const int cut = p != MAP_FAILED && ftruncate(fd, 0) == 0;
    close(fd);
    return cut ? p : NULL;
}

/* the host's own SIGBUS handler, installed before the library's */
static sigjmp_buf host_jump;
static void *volatile host_addr;
static volatile sig_atomic_t host_calls;
static void host_handler(int sig, siginfo_t *info, void *uctx) {
    (void)sig, (void)uctx;
    host_calls++;
    host_addr = info->si_addr;
    siglongjmp(host_jump, 1);
}

/* with no handler before ours, a SIGBUS outside our mappings still kills (in a child) */
static void test_default_action(void) {
    const pid_t pid = fork();
    if (pid == 0) {
        const int null = open("/dev/null", O_WRONLY); /* a sanitizer's report of the fault is expected */
        if (null >= 0) dup2(null, 2);
        void *anon = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (anon == MAP_FAILED || eli_mapguard_register(anon, 4096, NULL) < 0) _exit(3);
        volatile const uint8_t *p = map_then_cut(eli_test_path_in(tmpdir, "child.bin"), 8192);
        if (!p) _exit(3);
        (void)p[4096];
        _exit(0);
    }
    int st = 0;
    CHECK(pid > 0 && waitpid(pid, &st, 0) == pid, "fork");
    CHECK(!(WIFEXITED(st) && WEXITSTATUS(st) == 3), "child could not set up");
#ifdef SANITIZED
    /* the sanitizer's SIGBUS handler was there before ours: it reports the fault and exits */
    CHECK(!(WIFEXITED(st) && WEXITSTATUS(st) == 0), "the child survived a SIGBUS outside the guarded mappings");
#else
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGBUS, "child status %#x: expected death by SIGBUS", st);
#endif
}

static void test_chained_to_host(const eli_gguf_file *guarded) {
    volatile const uint8_t *p = map_then_cut(eli_test_path_in(tmpdir, "host.bin"), 8192);
    CHECK(p != NULL, "map a file");
    if (!p) return;
    host_calls = 0;
    /* volatile: nothing of the test's own state may be moved before the faulting read */
    static volatile sig_atomic_t read_returned;
    if (sigsetjmp(host_jump, 1) == 0) {
        (void)p[100];
        read_returned = 1;
    }
    CHECK(!read_returned, "a read past the end of the file did not fault");
    CHECK(host_calls == 1 && host_addr == (void *)(p + 100), "the host's handler got the fault (%d calls, %p vs %p)",
          (int)host_calls, host_addr, (void *)(p + 100));
    CHECK(eli_gguf_check_mapping(guarded, NULL) == ELI_OK, "another mapping's fault marked the model");
    munmap((void *)p, 8192);
}

static int all_zero(const void *p, size_t n) {
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        if (b[i]) return 0;
    return 1;
}

static int finite_all(const float *v, int n) {
    for (int i = 0; i < n; i++)
        if (!isfinite(v[i])) return 0;
    return 1;
}

/* weights read through the mapping on two threads, the file cut behind the per-layer-embedding table */
static void test_cut_while_decoding(void) {
    const char *path = eli_test_path_in(tmpdir, "mapped.gguf");
    CHECK(copy_file(eli_shared_path(MODEL), path), "copy the model");
    eli_error err = {0};
    eli_model *m = eli_model_load(path, &err);
    const eli_exec *exec = eli_exec_default();
    const eli_exec_options o = {NULL, 0}; /* ELIZA_LLM_REPACK=0 */
    eli_xmodel *xm = m ? eli_exec_prepare(exec, m, &o, &err) : NULL;
    CHECK(xm != NULL, "load: %s", err.msg);
    if (!xm) {
        eli_model_free(m);
        return;
    }
    const uint8_t *map = eli_gguf_mapping(m->file);
    const size_t size = (size_t)eli_gguf_file_size(m->file);
    const eli_weight *wq = &m->layers[0].wq;
    CHECK((const uint8_t *)wq->data > map && (const uint8_t *)wq->data < map + size, "weights in the mapping");
    CHECK(!all_zero(wq->data, 4096) && !all_zero(map, 4), "weights and header read from the file");

    eli_seq_params p = eli_seq_default();
    p.n_ctx = 32;
    p.n_threads = 2;
    eli_xseq *s = eli_seq_create(exec, xm, &p, &err);
    CHECK(s != NULL, "sequence: %s", err.msg);
    if (!s) {
        eli_xmodel_release(xm);
        eli_model_free(m);
        return;
    }
    float *logits = malloc((size_t)m->hp.n_vocab * sizeof *logits);
    const eli_outputs out = {logits, NULL, 0};
    const int32_t tokens[6] = {2, 651, 3, 17, 900, 5};
    int rc = eli_seq_decode_tokens(s, tokens, 4, &out, &err);
    CHECK(rc == ELI_OK && finite_all(logits, m->hp.n_vocab), "decode before the cut: %s", err.msg);
    CHECK(eli_gguf_check_mapping(m->file, &err) == ELI_OK, "intact file reported: %s", err.msg);

    /* the per-layer-embedding rows (read with pread) stay; the layers after them are gone */
    const eli_gguf_tensor *ple = eli_gguf_find_tensor(m->file, "per_layer_token_embd.weight");
    const size_t cut = ple ? (size_t)((const uint8_t *)ple->data - map) + (size_t)ple->nbytes : 0;
    CHECK(ple && cut < (size_t)((const uint8_t *)wq->data - map), "the layers lie after the PLE table");
    CHECK(truncate(path, (off_t)cut) == 0, "truncate");

    const int64_t past = eli_seq_n_past(s);
    rc = eli_seq_decode_tokens(s, tokens + 4, 2, &out, &err);
    CHECK(rc == ELI_ERR_BUNDLE_INVALID && strstr(err.msg, path) && strstr(err.msg, "shrank while mapped"),
          "decode over the cut file: %d %s", rc, err.msg);
    CHECK(eli_seq_n_past(s) == past, "the failed decode kept nothing (%lld positions, %lld before)", (long long)eli_seq_n_past(s),
          (long long)past);
    CHECK(all_zero(wq->data, 4096) && all_zero(map, 4), "the mapping reads zeros after the fault");
    rc = eli_seq_decode_tokens(s, tokens, 1, &out, &err);
    CHECK(rc == ELI_ERR_BUNDLE_INVALID, "a later decode is refused too: %d", rc);
    free(logits);
    eli_seq_free(s);
    eli_xmodel_release(xm);
    eli_model_free(m);

    /* opened again, the cut file is refused as such */
    m = eli_model_load(path, &err);
    CHECK(m == NULL && strstr(err.msg, "outside"), "cut file refused at load: %s", err.msg);
    eli_model_free(m);
}

/* per-layer-embedding rows come with pread: a row past the end of a cut file is a clean error */
static void test_ple_rows(void) {
    const char *path = eli_test_path_in(tmpdir, "ple.gguf");
    CHECK(copy_file(eli_shared_path(MODEL), path), "copy the model");
    eli_error err = {0};
    eli_model *m = eli_model_load(path, &err);
    CHECK(m != NULL, "load: %s", err.msg);
    if (!m) return;
    const eli_weight *w = &m->ple_token_embd;
    const uint8_t *map = eli_gguf_mapping(m->file);
    CHECK(truncate(path, (off_t)((const uint8_t *)w->data - map) + (off_t)w->row_bytes) == 0, "truncate");
    void *raw = malloc(w->row_bytes);
    float *row = malloc((size_t)w->cols * sizeof *row);
    CHECK(eli_model_ple_row(m, 0, raw, row, &err) == ELI_OK, "row 0 is still in the file: %s", err.msg);
    const int rc = eli_model_ple_row(m, m->hp.n_vocab - 1, raw, row, &err);
    CHECK(rc == ELI_ERR_INVALID_ARG && strstr(err.msg, "per_layer_token_embd.weight") && strstr(err.msg, "row"),
          "a row past the end: %d %s", rc, err.msg);
    free(raw), free(row);
    eli_model_free(m);
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/eli_mapguard_XXXXXX");
    if (!mkdtemp(tmpdir)) return 1;
    test_default_action();
    /* the host's handler comes first, the library's (installed by the first guarded mapping) chains to it */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = host_handler;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    CHECK(sigaction(SIGBUS, &sa, NULL) == 0, "install the host's handler");
    eli_error err = {0};
    eli_gguf_file *f = eli_gguf_open(eli_shared_path(MODEL), &err);
    CHECK(f != NULL, "open: %s", err.msg);
    if (f) test_chained_to_host(f);
    eli_gguf_close(f);
    test_cut_while_decoding();
    test_ple_rows();
    const char *names[] = {"child.bin", "host.bin", "mapped.gguf", "ple.gguf"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) unlink(eli_test_path_in(tmpdir, names[i]));
    rmdir(tmpdir);
    TEST_MAIN_END();
}
