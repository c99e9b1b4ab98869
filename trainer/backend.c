/*
 * backend.c - the factory of the trainer's backends (backend.h): a backend
 * by name, and its release.
 */
#include "backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

tr_backend *tr_backend_create(const char *name, int n_threads, char *err, size_t err_len)
{
    if (strcmp(name, "cpu") == 0) return tr_backend_cpu_create(n_threads, err, err_len);
    if (strcmp(name, "cuda") == 0) return tr_backend_cuda_create(n_threads, err, err_len);
    snprintf(err, err_len, "%s backend not available in this build (have: cpu, cuda)", name);
    return NULL;
}

const tr_sizes *tr_backend_sizes(const char *name)
{
    if (strcmp(name, "cpu") == 0) return &tr_cpu_sizes;
    if (strcmp(name, "cuda") == 0) return &tr_cuda_sizes;
    return NULL;
}

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
