/* No process dies because a mapped file shrank.
 *
 * Reading a page of a file mapping that lies past the file's end (another process truncated the model file
 * while it was mapped) raises SIGBUS, whose default action kills the process. A mapping registered here is
 * guarded: a SIGBUS inside it replaces the whole mapping with anonymous zero pages and marks it faulted,
 * then returns, so the faulting read (and every later one) reads zeros and the thread goes on. The reader
 * then checks eli_mapguard_faulted and fails what it computed from those zeros.
 *
 * The handler is installed once, at the first registration (sigaction, SA_SIGINFO); a SIGBUS outside every
 * registered range goes to the handler that was installed before it (a host such as a JVM chains its own),
 * or takes the default action. A handler installed later by the host must chain to ours for the guard to
 * work. The registry is a fixed array of atomics: the handler reads it without a lock. */
#ifndef ELI_MAPGUARD_H
#define ELI_MAPGUARD_H

#include <stddef.h>

#include "error.h"

/* Mappings guarded at once; a registration past it fails (ELI_ERR_OOM). */
#define ELI_MAPGUARD_SLOTS 1024

/* Guards the mapping [base, base + len) (base from mmap, PROT_READ). Returns its id (>= 0), or a negative
 * status with err set when every slot is taken or the handler cannot be installed. */
int eli_mapguard_register(const void *base, size_t len, eli_error *err);
/* Stops guarding mapping id (call it before unmapping); a negative id is ignored. */
void eli_mapguard_unregister(int id);
/* 1 once a read of mapping id faulted and the mapping was replaced by zero pages, else 0. */
int eli_mapguard_faulted(int id);

#endif
