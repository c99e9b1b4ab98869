/* test-cuda-probe.c - the nvcc-built unit links and, with a GPU, runs; a
 * build that found nvcc but dropped CUDA (configure --with-cuda=check)
 * fails here. */
#include "tap.h"
#include "cuda_probe.h"

int main(void)
{
    char msg[256];
    int rc = cuda_probe_run(1 << 16, msg, sizeof msg);
#ifdef SA1B_CUDA_DROPPED
    if (rc == CUDA_PROBE_NOT_BUILT) { /* nvcc was there: the build must not lose the backend silently */
        tap_plan(1);
        tap_ok(0, "configure found nvcc but dropped the CUDA backend: %s", SA1B_CUDA_DROPPED);
        return tap_done();
    }
#endif
    if (rc == CUDA_PROBE_NOT_BUILT || rc == CUDA_PROBE_NO_DEVICE) tap_skip_all(msg);
    tap_plan(1);
    tap_ok(rc == CUDA_PROBE_OK, "kernel result and cuBLAS handle: %s", msg);
    return tap_done();
}
