#include "fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct eli_atomic_file {
    int fd;
    char *path, *tmp;
};

eli_atomic_file *eli_atomic_open(const char *path, eli_error *err) {
    static atomic_uint counter;
    if (!path || !*path) {
        eli_fail(err, ELI_ERR_INVALID_ARG, "empty output path");
        return NULL;
    }
    eli_atomic_file *f = calloc(1, sizeof *f);
    size_t n = strlen(path) + 64;
    if (!f || !(f->path = strdup(path)) || !(f->tmp = malloc(n))) goto oom;
    snprintf(f->tmp, n, "%s.tmp.%ld.%u", path, (long)getpid(), atomic_fetch_add(&counter, 1));
    f->fd = open(f->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (f->fd < 0) {
        eli_fail(err, ELI_ERR_INVALID_ARG, "cannot create '%s': %s", f->tmp, strerror(errno));
        free(f->path), free(f->tmp), free(f);
        return NULL;
    }
    return f;
oom:
    if (f) free(f->path), free(f->tmp), free(f);
    eli_fail(err, ELI_ERR_OOM, "out of memory");
    return NULL;
}

int eli_atomic_write(eli_atomic_file *f, const void *data, size_t len, eli_error *err) {
    const char *p = data;
    while (len) {
        ssize_t w = write(f->fd, p, len);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return eli_fail(err, ELI_ERR_INVALID_ARG, "write to '%s' failed: %s", f->tmp, strerror(errno));
        p += w;
        len -= (size_t)w;
    }
    return ELI_OK;
}

static void release(eli_atomic_file *f) {
    free(f->path);
    free(f->tmp);
    free(f);
}

void eli_atomic_abort(eli_atomic_file *f) {
    if (!f) return;
    close(f->fd);
    unlink(f->tmp);
    release(f);
}

int eli_atomic_commit(eli_atomic_file *f, eli_error *err) {
    int rc = ELI_OK;
    if (fsync(f->fd)) rc = eli_fail(err, ELI_ERR_INVALID_ARG, "fsync of '%s' failed: %s", f->tmp, strerror(errno));
    if (close(f->fd) && !rc) rc = eli_fail(err, ELI_ERR_INVALID_ARG, "close of '%s' failed: %s", f->tmp, strerror(errno));
    f->fd = -1;
    if (!rc && rename(f->tmp, f->path))
        rc = eli_fail(err, ELI_ERR_INVALID_ARG, "rename to '%s' failed: %s", f->path, strerror(errno));
    if (rc) unlink(f->tmp);
    release(f);
    return rc;
}

int eli_write_file_atomic(const char *path, const void *data, size_t len, eli_error *err) {
    eli_atomic_file *f = eli_atomic_open(path, err);
    if (!f) return err ? err->code : ELI_ERR_INVALID_ARG;
    int rc = eli_atomic_write(f, data, len, err);
    if (rc) {
        eli_atomic_abort(f);
        return rc;
    }
    return eli_atomic_commit(f, err);
}
