/* SIGBUS guard of file mappings (mapguard.h). */
#include "mapguard.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* base 0: free; CLAIMED: taken by a registration still writing len (the handler skips both) */
#define CLAIMED ((uintptr_t)1)

typedef struct {
    _Atomic uintptr_t base;
    _Atomic size_t len;
    atomic_int faulted;
} guarded_range;

static guarded_range ranges[ELI_MAPGUARD_SLOTS];
static atomic_int n_slots_used; /* high-water mark: the handler scans only these */
static struct sigaction previous;
static pthread_once_t install_once = PTHREAD_ONCE_INIT;
static int installed;

/* The handler of the SIGBUS that is not ours: what was installed before us, else the default action. */
static void chain(int sig, siginfo_t *info, void *uctx) {
    if (previous.sa_flags & SA_SIGINFO) {
        previous.sa_sigaction(sig, info, uctx);
        return;
    }
    if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN) {
        previous.sa_handler(sig);
        return;
    }
    /* ignoring a SIGBUS that another process sent is fine; a fault cannot be ignored (the read would fault
     * again forever), so it takes the default action like the kernel gives it: the signal is blocked while
     * this handler runs, so the raised one is delivered, and kills, as soon as it returns */
    if (previous.sa_handler == SIG_IGN && info->si_code <= 0) return;
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(SIGBUS, &dfl, NULL);
    raise(SIGBUS);
}

/* Only async-signal-safe work: atomic loads and stores and one mmap system call (whose errno must not
 * reach the interrupted code). */
static void on_sigbus(int sig, siginfo_t *info, void *uctx) {
    const int saved_errno = errno;
    const uintptr_t addr = (uintptr_t)info->si_addr;
    const int n = atomic_load_explicit(&n_slots_used, memory_order_acquire);
    for (int i = 0; info->si_code > 0 && i < n; i++) {
        const uintptr_t base = atomic_load_explicit(&ranges[i].base, memory_order_acquire);
        if (base <= CLAIMED) continue;
        const size_t len = atomic_load_explicit(&ranges[i].len, memory_order_relaxed);
        if (addr - base >= len) continue;
        /* the whole mapping at once: every page past the new end would fault in turn, and a half-zero model
         * is no better than an all-zero one */
        if (mmap((void *)base, len, PROT_READ, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) == MAP_FAILED) break;
        atomic_store_explicit(&ranges[i].faulted, 1, memory_order_release);
        errno = saved_errno;
        return;
    }
    errno = saved_errno;
    chain(sig, info, uctx);
}

static void install(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    /* previous is complete before a SIGBUS can reach on_sigbus */
    installed = sigaction(SIGBUS, NULL, &previous) == 0 && sigaction(SIGBUS, &sa, NULL) == 0;
}

int eli_mapguard_register(const void *base, size_t len, eli_error *err) {
    if (!base || !len) return eli_fail(err, ELI_ERR_INVALID_ARG, "mapguard: empty mapping");
    /* the mapping holds whole pages: a fault anywhere in its last one is ours too */
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    len = (len + page - 1) / page * page;
    pthread_once(&install_once, install);
    if (!installed) return eli_fail(err, ELI_ERR_FFI_FAULT, "mapguard: cannot install the SIGBUS handler");
    for (int i = 0; i < ELI_MAPGUARD_SLOTS; i++) {
        uintptr_t expected = 0;
        if (!atomic_compare_exchange_strong(&ranges[i].base, &expected, CLAIMED)) continue;
        atomic_store_explicit(&ranges[i].len, len, memory_order_relaxed);
        atomic_store_explicit(&ranges[i].faulted, 0, memory_order_relaxed);
        atomic_store_explicit(&ranges[i].base, (uintptr_t)base, memory_order_release); /* publishes len */
        int used = atomic_load(&n_slots_used);
        while (used < i + 1 && !atomic_compare_exchange_weak(&n_slots_used, &used, i + 1)) {
        }
        return i;
    }
    return eli_fail(err, ELI_ERR_OOM, "mapguard: more than %d files mapped at once", ELI_MAPGUARD_SLOTS);
}

void eli_mapguard_unregister(int id) {
    if (id >= 0 && id < ELI_MAPGUARD_SLOTS) atomic_store_explicit(&ranges[id].base, 0, memory_order_release);
}

int eli_mapguard_faulted(int id) {
    return id >= 0 && id < ELI_MAPGUARD_SLOTS && atomic_load_explicit(&ranges[id].faulted, memory_order_acquire);
}
