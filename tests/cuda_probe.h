/*
 * cuda_probe.h - smallest proof that the CUDA path of the build is real: one
 * kernel launch and a cuBLAS handle create/destroy.  Built from
 * cuda_probe.cu by nvcc when configure finds CUDA, from cuda_probe_stub.c
 * otherwise; callers never need an #ifdef.
 */
#ifndef SA1B_CUDA_PROBE_H
#define SA1B_CUDA_PROBE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { CUDA_PROBE_OK = 0, CUDA_PROBE_NOT_BUILT = 1, CUDA_PROBE_NO_DEVICE = 2, CUDA_PROBE_FAILED = 3 };

/* Runs a vector-add kernel on n elements on device 0, checks the result on
 * the host, and creates and destroys a cuBLAS handle.  Writes a one-line
 * description into msg (device name, or why not). */
int cuda_probe_run(int n, char *msg, size_t msg_size);

#ifdef __cplusplus
}
#endif
#endif
