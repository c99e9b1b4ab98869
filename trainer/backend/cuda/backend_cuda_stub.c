/* backend_cuda_stub.c - stands in for backend_cuda.cu when CUDA is not
 * built (configure --with-cuda=no, or no toolkit found). */
#include "backend/backend.h"
#include "backend_cuda.h"

#include <stdio.h>

tr_backend *tr_backend_cuda_create(const tr_backend_opts *o, char *err, size_t err_len)
{
    (void)o;
    snprintf(err, err_len, "cuda backend not available in this build (configure --with-cuda)");
    return NULL;
}

void *tr_backend_cuda_stream(tr_backend *be)
{
    (void)be;
    return NULL;
}

int tr_cuda_device_memory(uint64_t *free_bytes, uint64_t *total_bytes, char *err, size_t err_len)
{
    *free_bytes = *total_bytes = 0;
    snprintf(err, err_len, "cuda backend not available in this build (configure --with-cuda)");
    return -1;
}

int tr_cuda_attn_choose(tr_backend *be, const tr_attn_dims *shapes, int n, int dt, tr_cuda_attn_log log, void *ctx,
                        char *err, size_t err_len)
{
    (void)be, (void)shapes, (void)n, (void)dt, (void)log, (void)ctx, (void)err, (void)err_len;
    return 0;
}

int tr_cuda_attn_takes(tr_backend *be, const tr_attn_dims *d, int dt, int path, char *why, size_t len)
{
    (void)be, (void)d, (void)dt, (void)path;
    snprintf(why, len, "cuda backend not available in this build (configure --with-cuda)");
    return 0;
}

int tr_cuda_attn_chosen(tr_backend *be, const tr_attn_dims *d, int dt)
{
    (void)be, (void)d, (void)dt;
    return -1;
}
