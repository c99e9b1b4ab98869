/* test-cuda-probe.c - the nvcc-built unit links and, with a GPU, runs. */
#include "tap.h"
#include "cuda_probe.h"

int main(void)
{
    char msg[256];
    int rc = cuda_probe_run(1 << 16, msg, sizeof msg);
    if (rc == CUDA_PROBE_NOT_BUILT || rc == CUDA_PROBE_NO_DEVICE) tap_skip_all(msg);
    tap_plan(1);
    tap_ok(rc == CUDA_PROBE_OK, "kernel result and cuBLAS handle: %s", msg);
    return tap_done();
}
