/* backend_cuda_stub.c - stands in for backend_cuda.cu when CUDA is not
 * built (configure --with-cuda=no, or no toolkit found). */
#include "backend/backend.h"
#include "backend_cuda.h"

#include <stdio.h>

tr_backend *tr_backend_cuda_create(int n_threads, char *err, size_t err_len)
{
    return tr_backend_cuda_create_on(0, n_threads, err, err_len);
}

tr_backend *tr_backend_cuda_create_on(int device, int n_threads, char *err, size_t err_len)
{
    (void)device, (void)n_threads;
    snprintf(err, err_len, "cuda backend not available in this build (configure --with-cuda)");
    return NULL;
}

void *tr_backend_cuda_stream(tr_backend *be)
{
    (void)be;
    return NULL;
}

int tr_backend_cuda_error(tr_backend *be, char *err, size_t err_len)
{
    (void)be, (void)err, (void)err_len;
    return 0;
}

int tr_backend_cuda_set_tf32(tr_backend *be, int on, char *err, size_t err_len)
{
    (void)be, (void)on;
    snprintf(err, err_len, "cuda backend not available in this build (configure --with-cuda)");
    return -1;
}

int tr_cuda_device_memory(uint64_t *free_bytes, uint64_t *total_bytes, char *err, size_t err_len)
{
    *free_bytes = *total_bytes = 0;
    snprintf(err, err_len, "cuda backend not available in this build (configure --with-cuda)");
    return -1;
}
