/*
 * backend_cuda.h - what the CUDA backend (backend_cuda.cu; created by
 * tr_backend_cuda_create of backend.h) adds to the backend interface: its
 * first error, the choice of a device and its stream.
 *
 * Its ops return void, so the first CUDA or cuBLAS call that fails (or an
 * operand it cannot take, such as an attention head of more than 128
 * dimensions) is recorded as "file:line: call: the library's message";
 * from then on every op does nothing and download fills its destination
 * with 0xff bytes (NaN for floats and doubles), so that a step's loss and
 * gradient norm read back as not finite.  In a build without CUDA
 * (backend_cuda_stub.c) there is never a CUDA backend and never an error.
 */
#ifndef SA1B_TRAINER_BACKEND_CUDA_H
#define SA1B_TRAINER_BACKEND_CUDA_H

#include <stddef.h>

#include "backend.h"

/* 1 with the first error of be in err when be is a CUDA backend that
 * failed; 0 otherwise (any other backend). */
int tr_backend_cuda_error(tr_backend *be, char *err, size_t err_len);

/* The CUDA backend on device `device` (tr_backend_cuda_create: device 0;
 * a rank of a data-parallel job takes the device of its local rank).  NULL
 * with a one-line message in err as tr_backend_cuda_create, or when the
 * machine has no such device. */
tr_backend *tr_backend_cuda_create_on(int device, int n_threads, char *err, size_t err_len);

/* The stream (a cudaStream_t) every op of be runs on, for the collectives
 * of a data-parallel job (dist_nccl.h), which run in order with the ops;
 * NULL when be is not a CUDA backend. */
void *tr_backend_cuda_stream(tr_backend *be);

#endif
