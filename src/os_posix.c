/* os.h for Linux and other POSIX systems. */
#include "os.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mapguard.h"

int eli_os_map_file(const char *path, eli_os_map *m, eli_error *err) {
    memset(m, 0, sizeof *m);
    m->fd = -1;
    m->guard = -1;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return eli_fail(err, ELI_ERR_INVALID_ARG, "cannot open '%s': %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
        close(fd);
        return eli_fail(err, ELI_ERR_INVALID_ARG, "'%s' is not a regular file", path);
    }
    const size_t size = (size_t)st.st_size;
    void *map = NULL;
    if (size && (map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0)) == MAP_FAILED) {
        close(fd);
        return eli_fail(err, ELI_ERR_OOM, "cannot map '%s': %s", path, strerror(errno));
    }
    m->base = map ? map : (const uint8_t *)"";
    m->size = size;
    m->fd = fd;
    m->mapped = map != NULL;
    m->guard = -1;
    /* guarded before the first read: a file cut while its header is parsed is an error, not a SIGBUS */
    if (m->mapped && (m->guard = eli_mapguard_register(m->base, m->size, err)) < 0) {
        eli_error_prefix(err, "%s", path);
        eli_os_unmap_file(m);
        return err ? err->code : ELI_ERR_OOM;
    }
    return ELI_OK;
}

int eli_os_map_faulted(const eli_os_map *m) { return eli_mapguard_faulted(m->guard); }

void eli_os_unmap_file(eli_os_map *m) {
    eli_mapguard_unregister(m->guard);
    if (m->mapped) munmap((void *)m->base, m->size);
    if (m->fd >= 0) close(m->fd);
    memset(m, 0, sizeof *m);
    m->fd = -1;
    m->guard = -1;
}

int eli_os_read_at(const eli_os_map *m, uint64_t off, size_t n, void *dst) {
    if (off > m->size || n > m->size - off) return EINVAL;
    for (size_t done = 0; done < n;) {
        const ssize_t r = pread(m->fd, (uint8_t *)dst + done, n - done, (off_t)(off + done));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return r < 0 ? errno : EIO; /* 0: the file was cut shorter under us */
        done += (size_t)r;
    }
    return 0;
}

void eli_os_advise(const eli_os_map *m, const void *p, size_t n, enum eli_os_advice a) {
    const uint8_t *at = p;
    if (!m->mapped || at < m->base || n > m->size || (size_t)(at - m->base) > m->size - n) return;
    if (a == ELI_OS_RANDOM) {
        (void)posix_fadvise(m->fd, (off_t)(at - m->base), (off_t)n, POSIX_FADV_RANDOM);
        return;
    }
    if (a == ELI_OS_SEQUENTIAL) {
        (void)madvise((void *)((uintptr_t)at & ~(uintptr_t)(eli_os_page_size() - 1)), n, MADV_SEQUENTIAL);
        return;
    }
    /* out to Linux's fault-around window, 64 KiB by default: a fault maps the page cache's neighbouring
     * pages with the faulting one, which would otherwise stay mapped on both sides of the range; the
     * mapping starts on a page, and madvise rounds a partial last page up */
    const uintptr_t w = 65536, base = (uintptr_t)m->base, end = base + m->size;
    uintptr_t lo = (uintptr_t)at & ~(w - 1), hi = ((uintptr_t)at + n + w - 1) & ~(w - 1);
    if (lo < base) lo = base;
    if (hi > end) hi = end;
    /* a private, read-only file mapping: the pages come back from the file on the next access */
    if (hi > lo) (void)madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

void *eli_os_alloc(size_t n, size_t align, int huge, void **block, size_t *block_len) {
    *block = NULL;
    *block_len = 0;
    if (!n || !align || (align & (align - 1)) || n > SIZE_MAX - align) return NULL;
    const size_t len = n + align;
    void *map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED) return NULL;
    uint8_t *p = (uint8_t *)(((uintptr_t)map + align - 1) & ~(uintptr_t)(align - 1));
#ifdef MADV_HUGEPAGE
    if (huge) (void)madvise(p, n, MADV_HUGEPAGE);
#else
    (void)huge;
#endif
    *block = map;
    *block_len = len;
    return p;
}

void eli_os_free(void *block, size_t block_len) {
    if (block) munmap(block, block_len);
}

void eli_os_touch(void *p, size_t n) {
#ifdef MADV_POPULATE_WRITE
    /* the whole pages inside the range in one call (Linux >= 5.14): no fault per page */
    const uintptr_t pg = (uintptr_t)eli_os_page_size();
    const uintptr_t lo = ((uintptr_t)p + pg - 1) & ~(pg - 1), hi = ((uintptr_t)p + n) & ~(pg - 1);
    if (hi > lo) (void)madvise((void *)lo, hi - lo, MADV_POPULATE_WRITE);
#endif
    /* the partial pages at the ends, and everything where the call is unknown or failed (writing into an
     * already resident page costs next to nothing) */
    volatile uint8_t *b = p;
    for (size_t i = 0; i < n; i += 4096) b[i] = 0;
    if (n) b[n - 1] = 0;
}

void eli_os_resident(const void *p, size_t n, uint64_t *mapped, uint64_t *cached) {
    *mapped = *cached = UINT64_MAX;
    if (!n) {
        *mapped = *cached = 0;
        return;
    }
    const uint64_t pg = eli_os_page_size();
    const uintptr_t lo = (uintptr_t)p & ~(uintptr_t)(pg - 1);
    const uintptr_t hi = ((uintptr_t)p + n + pg - 1) & ~(uintptr_t)(pg - 1);
    const size_t pages = (hi - lo) / pg;
    unsigned char *vec = malloc(pages);
    if (vec && !mincore((void *)lo, hi - lo, vec)) {
        uint64_t c = 0;
        for (size_t i = 0; i < pages; i++) c += vec[i] & 1;
        *cached = c * pg;
    }
    free(vec);
    /* /proc/self/pagemap: bit 63 of each page's entry says it is present in this process */
    int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    uint64_t present = 0, buf[512];
    int ok = 1;
    for (size_t i = 0; i < pages && ok;) {
        size_t k = pages - i < 512 ? pages - i : 512;
        off_t off = (off_t)((lo / pg + i) * sizeof(uint64_t));
        if (pread(fd, buf, k * sizeof *buf, off) != (ssize_t)(k * sizeof *buf)) ok = 0;
        for (size_t j = 0; ok && j < k; j++) present += buf[j] >> 63;
        i += k;
    }
    close(fd);
    if (ok) *mapped = present * pg;
}

long eli_os_proc_kb(const char *file, const char *key) {
    FILE *f = fopen(file, "r");
    if (!f) return -1;
    char line[256];
    long kb = -1;
    const size_t kl = strlen(key);
    while (kb < 0 && fgets(line, sizeof line, f))
        if (!strncmp(line, key, kl) && line[kl] == ':') kb = strtol(line + kl + 1, NULL, 10);
    fclose(f);
    return kb;
}

uint64_t eli_os_mem_available(void) {
    const long kb = eli_os_proc_kb("/proc/meminfo", "MemAvailable");
    if (kb > 0) return (uint64_t)kb * 1024;
    const long pages = sysconf(_SC_PHYS_PAGES);
    return pages > 0 ? (uint64_t)pages * eli_os_page_size() / 2 : 0;
}

int eli_os_cpu_count(void) {
    const long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

size_t eli_os_page_size(void) {
    const long pg = sysconf(_SC_PAGESIZE);
    return pg > 0 ? (size_t)pg : 4096;
}
