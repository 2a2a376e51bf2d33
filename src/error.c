#include "error.h"

#include <stdio.h>
#include <string.h>

int eli_fail(eli_error *err, int code, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        err->code = code;
    }
    return code;
}

void eli_error_prefix(eli_error *err, const char *fmt, ...) {
    if (!err) return;
    char head[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(head, sizeof head, fmt, ap);
    va_end(ap);
    char old[sizeof err->msg];
    memcpy(old, err->msg, sizeof old);
    size_t h = strlen(head);
    if (h > sizeof err->msg - 3) h = sizeof err->msg - 3;
    memcpy(err->msg, head, h);
    memcpy(err->msg + h, ": ", 2);
    size_t room = sizeof err->msg - h - 3, o = strlen(old);
    if (o > room) o = room;
    memcpy(err->msg + h + 2, old, o);
    err->msg[h + 2 + o] = '\0';
}

void eli_error_clear(eli_error *err) {
    if (!err) return;
    err->code = ELI_OK;
    err->msg[0] = '\0';
}
