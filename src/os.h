/* The platform behind one interface (as SQLite's os_*.c): file mappings and positional reads, anonymous
 * and huge-page memory, page touching and residency, available memory, CPU count, /proc readings. The
 * rest of the library makes no such call itself; os_posix.c implements this for Linux and other POSIX
 * systems (what Linux alone has, it uses where present and does without elsewhere). */
#ifndef ELI_OS_H
#define ELI_OS_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"

/* A whole regular file mapped read-only, its descriptor kept open for positional reads. */
typedef struct eli_os_map {
    const uint8_t *base; /* size bytes (a valid pointer to nothing when the file is empty) */
    size_t size;
    int fd;
    int mapped;
    int guard; /* the mapping's id in mapguard.h, -1 when there is none */
} eli_os_map;

/* Maps path, guarded (mapguard.h): a file another process cuts shorter while it is mapped reads as zeros
 * from then on instead of killing the process, and eli_os_map_faulted says so. ELI_ERR_INVALID_ARG
 * (cannot open, not a regular file) or ELI_ERR_OOM (cannot map or guard), naming the path. */
int eli_os_map_file(const char *path, eli_os_map *m, eli_error *err);
void eli_os_unmap_file(eli_os_map *m);
/* 1 once a read of the mapping faulted (the file shrank): what was read from it since is zeros. */
int eli_os_map_faulted(const eli_os_map *m);
/* n bytes of the file at offset off into dst, with pread (never through the mapping: a file cut shorter
 * since it was mapped gives an error here, not a signal). 0, or an errno value (EIO for a short file). */
int eli_os_read_at(const eli_os_map *m, uint64_t off, size_t n, void *dst);

/* Access hints for part of a mapped file (ignored where unsupported). */
enum eli_os_advice {
    ELI_OS_RANDOM,     /* reads in no order: no readahead around them */
    ELI_OS_SEQUENTIAL, /* read once front to back */
    ELI_OS_DROP        /* the pages leave this process (the page cache keeps them; a later access reads
                        * them back): widened to the kernel's fault-around window so that none of them
                        * stays mapped at the edges */
};
void eli_os_advise(const eli_os_map *m, const void *p, size_t n, enum eli_os_advice a);

/* Anonymous read-write memory of at least n bytes, aligned to align (a power of two); huge pages are
 * asked for when huge is set. NULL when it cannot be had. Freed with eli_os_free. */
void *eli_os_alloc(size_t n, size_t align, int huge, void **block, size_t *block_len);
void eli_os_free(void *block, size_t block_len);
/* Makes every page of p[0..n) resident now, by writing it (fresh anonymous memory has no page until its
 * first write; a memset may be turned into a calloc that touches nothing). */
void eli_os_touch(void *p, size_t n);
/* Bytes of p[0..n) mapped into this process (counted in RSS) and in the page cache; UINT64_MAX each
 * when it cannot be told. */
void eli_os_resident(const void *p, size_t n, uint64_t *mapped, uint64_t *cached);

/* Memory the system could give without swapping (Linux MemAvailable, else half the physical memory). */
uint64_t eli_os_mem_available(void);
/* Online CPUs (at least 1). */
int eli_os_cpu_count(void);
size_t eli_os_page_size(void);
/* A "key: N kB" line of a /proc file in KiB, -1 when absent or unreadable: "VmRSS", "VmHWM", "RssAnon",
 * "RssFile" of /proc/self/status, "MemAvailable" of /proc/meminfo. */
long eli_os_proc_kb(const char *file, const char *key);

#endif
