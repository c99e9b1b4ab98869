/* cuda_probe_stub.c - stands in for cuda_probe.cu when CUDA is not built. */
#include "cuda_probe.h"

#include <stdio.h>

int cuda_probe_run(int n, char *msg, size_t msg_size)
{
    (void)n;
    snprintf(msg, msg_size, "built without CUDA (configure --with-cuda)");
    return CUDA_PROBE_NOT_BUILT;
}
