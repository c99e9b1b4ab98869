/*
 * backend_cuda.h - the CUDA backend (backend_cuda.cu) and what it adds to
 * the backend interface (backend/backend.h): its creation on a device with
 * its settings (tr_backend_opts: TF32, the path of its attention, sync,
 * the profile), its stream, its attention's rule, and the device's memory.
 *
 * Its ops return void, so the first CUDA or cuBLAS call that fails (or an
 * operand it cannot take, such as a fused attention head of more than 128
 * dimensions) is recorded as "file:line: call: the library's message";
 * from then on every op does nothing and download fills its destination
 * with 0xff bytes (NaN for floats and doubles), so that a step's loss and
 * gradient norm read back as not finite; be->error says it.  In a build
 * without CUDA (backend_cuda_stub.c) there is never a CUDA backend.
 */
#ifndef SA1B_TRAINER_BACKEND_CUDA_H
#define SA1B_TRAINER_BACKEND_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"

/* The CUDA backend (backend_cuda.cu) with the settings of o (its device,
 * TF32, its attention's path, sync after every op, the profile file): NULL
 * with a one-line message in err when the build has no CUDA
 * (backend_cuda_stub.c), the machine has no such device, or the device
 * cannot be set up.  Its first error afterwards: be->error
 * (tr_backend_error). */
tr_backend *tr_backend_cuda_create(const tr_backend_opts *o, char *err, size_t err_len);

/* Its sizes and traits, plain C in every build so that the planner
 * predicts a GPU's peak anywhere (backend_cuda_sizes.c). */
extern const tr_sizes tr_cuda_sizes;
extern const tr_traits tr_cuda_traits;


/* The attentions of the CUDA backend (backend_cuda_sizes.c, where the
 * planner reads their workspaces): a call over long sequences (both Tq
 * and Tk at least 64) runs blocked, R query rows of every head at a time
 * through cuBLAS (tr_cuda_attn_rows(d) = R), a short one in the fused
 * kernel: the rule.  tr_backend_opts.attention (sa1b-train --attention,
 * the environment's SA1B_CUDA_ATTN, registry.h) picks the path:
 *  - TR_CUDA_ATTN_AUTO: the path backend_cuda_attn_check.cu chose for the
 *    call's shape by checking the candidates (cuDNN, then flash, then the
 *    rule's) against the blocked reference at start-up
 *    (tr_cuda_attn_choose); a shape it did not check takes the rule;
 *  - TR_CUDA_ATTN_FUSED, TR_CUDA_ATTN_BLOCKED: every call on that path;
 *  - TR_CUDA_ATTN_FLASH (backend_cuda_flash.cu: q, k, v of one 16-bit
 *    type, heads of at most 64 dimensions, on the tensor cores, the scores
 *    never in device memory) and TR_CUDA_ATTN_CUDNN (cuDNN's fused SDPA:
 *    the 16-bit calls cuDNN supports) take the calls they can and leave
 *    the others to the rule.
 * The planner assumes the rule. */
enum { TR_CUDA_ATTN_AUTO, TR_CUDA_ATTN_FUSED, TR_CUDA_ATTN_BLOCKED, TR_CUDA_ATTN_FLASH, TR_CUDA_ATTN_CUDNN };
int tr_cuda_attn_blocked(const tr_attn_dims *d, int mode);
int tr_cuda_attn_rows(const tr_attn_dims *d);
/* bytes of workspace of a path: the forward's, or the backward's */
size_t tr_cuda_attn_workspace(const tr_attn_dims *d, int blocked, int backward);

/* Auto's start-up check (backend_cuda_attn_check.cu): for each of the n
 * attention shapes (the model's, tr_model_attn_shapes; N is not part of a
 * shape: the check runs one or two sequences) with operands of type dt,
 * the first candidate (cuDNN, flash, the rule's path, blocked) that gives
 * the blocked path's results on fixed seeded tensors; each candidate
 * refused says so in one line through log(ctx, line).  A backend whose
 * mode is not auto checks nothing (0).  0, or -1 with err when the
 * reference itself fails (the backend's error). */
typedef void (*tr_cuda_attn_log)(void *ctx, const char *line);
int tr_cuda_attn_choose(tr_backend *be, const tr_attn_dims *shapes, int n, int dt, tr_cuda_attn_log log, void *ctx,
                        char *err, size_t err_len);

/* The path auto's check chose for the shape of d with operands of type dt
 * (TR_CUDA_ATTN_*), or -1: not checked (the rule). */
int tr_cuda_attn_chosen(tr_backend *be, const tr_attn_dims *d, int dt);

/* Whether the path (TR_CUDA_ATTN_FUSED ... CUDNN) takes the call d with
 * operands of type dt on be (a CUDA backend), else 0 with why (the shape,
 * the type, a library absent or too old): what scripts/gpu-check attn
 * reports of a path it cannot measure; taken by cuDNN: 1 with why its
 * version and library). */
int tr_cuda_attn_takes(tr_backend *be, const tr_attn_dims *d, int dt, int path, char *why, size_t len);

/* The free and total memory of the device this process's CUDA backend
 * uses (what --memory-budget auto plans for); 0, or -1 with err (no
 * device, no CUDA in this build). */
int tr_cuda_device_memory(uint64_t *free_bytes, uint64_t *total_bytes, char *err, size_t err_len);


/* The stream (a cudaStream_t) every op of be runs on, for the collectives
 * of a data-parallel job (dist_nccl.h), which run in order with the ops;
 * NULL when be is not a CUDA backend. */
void *tr_backend_cuda_stream(tr_backend *be);

#endif
