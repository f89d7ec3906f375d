/* vx's own threads (the live stats publisher, the report's timeline
 * sampler): started so that they never hold a lock a fork() would copy. */
#ifndef VX_INTERPOSE_THREAD_H
#define VX_INTERPOSE_THREAD_H

#include <pthread.h>

/* Starts fn(arg) on a new thread that takes none of the application's
 * signals, and returns only once that thread runs fn: a fork() the
 * application makes right after finds it in vx's code, not inside the C
 * library's or a sanitizer's thread start-up, whose locks (the allocator's)
 * the child would inherit held.  Returns 0 or -errno (nothing started). */
int vx_thread_start(pthread_t *t, void *(*fn)(void *), void *arg);

#endif
