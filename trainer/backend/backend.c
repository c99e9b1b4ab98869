/*
 * backend.c - what every backend shares (backend.h): its release, and host
 * access to its memory.  It knows no backend (registry/ makes them).
 */
#include "backend.h"

#include <stdlib.h>

void tr_backend_free(tr_backend *be)
{
    if (be) be->destroy(be);
}

const void *tr_host_view(tr_backend *be, const void *src, size_t n, void **owned)
{
    *owned = NULL;
    if (be->host_mem == &be->mem || !src) return src;
    if (!(*owned = malloc(n ? n : 1))) return NULL;
    be->ops->download(be, *owned, src, n);
    return *owned;
}

void *tr_host_stage(tr_backend *be, void *dst, size_t n, void **owned)
{
    *owned = NULL;
    if (be->host_mem == &be->mem || !dst) return dst;
    return *owned = malloc(n ? n : 1);
}

void tr_host_commit(tr_backend *be, void *dst, void *owned, size_t n)
{
    if (!owned) return;
    be->ops->upload(be, dst, owned, n);
    free(owned);
}
