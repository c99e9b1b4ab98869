/*
 * registry.h - the trainer's backends by name ("cpu", "cuda"): the one
 * place that knows them all, above backend/cpu, backend/meta and
 * backend/cuda, so that the contract (backend/backend.h) knows none.
 */
#ifndef SA1B_TRAINER_REGISTRY_H
#define SA1B_TRAINER_REGISTRY_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"

/* The options of a backend with n_threads host threads: device 0, TF32
 * off, and the switches of the environment, read here alone:
 * SA1B_CUDA_ATTN=auto|cudnn|flash|blocked|fused (the attention's path,
 * tr_backend_attention_parse; anything else: auto; sa1b-train's
 * --attention wins over it and refuses a bad name), SA1B_CUDA_SYNC (not empty, not 0: wait for every op),
 * SA1B_CUDA_PROFILE=FILE (the device time by call site).  The program
 * sets the rest from its flags. */
void tr_backend_opts_init(tr_backend_opts *o, int n_threads);

/* The CUDA attention's path of a name (auto, cudnn, flash, blocked,
 * fused: backend_cuda.h's TR_CUDA_ATTN_*), -1 for another (or NULL); the
 * name of a path; SA1B_CUDA_ATTN when set and not empty, else NULL. */
int tr_backend_attention_parse(const char *name);
const char *tr_backend_attention_name(int mode);
const char *tr_backend_attention_env(void);

/* Auto's start-up check of the attention's paths for the n shapes the
 * model runs (tr_model_attn_shapes) with operands of type dt
 * (backend_cuda.h, tr_cuda_attn_choose): a line through log(ctx, line)
 * for each path refused.  Nothing to do on the CPU (one attention) or
 * with a path forced (0).  0, or -1 with err. */
int tr_backend_check_attention(tr_backend *be, const tr_attn_dims *shapes, int n, int dt,
                               void (*log)(void *ctx, const char *line), void *ctx, char *err, size_t err_len);

/* A backend by name ("cpu", "cuda") with the options o.  NULL with a
 * message in err when the name is unknown or not compiled in, or the
 * backend cannot start. */
tr_backend *tr_backend_create_with(const char *name, const tr_backend_opts *o, char *err, size_t err_len);

/* The same with tr_backend_opts_init's options for n_threads (n_threads >=
 * 1 sets the CPU's thread pool and BLAS threads). */
tr_backend *tr_backend_create(const char *name, int n_threads, char *err, size_t err_len);

/* The sizes of the backend of that name (what the planner counts for it);
 * NULL when the name is unknown or not compiled in. */
const tr_sizes *tr_backend_sizes(const char *name);
/* And its traits (how it wants the model's work cut); NULL as above. */
const tr_traits *tr_backend_traits(const char *name);

/* The memory the backend of that name could still take now, in bytes,
 * and what it is (*what): the device's free memory for cuda; the host's
 * available memory, within the room an address-space limit leaves, for
 * the CPU.  0, or -1 with err (no device, an unknown name). */
int tr_backend_free_memory(const char *name, uint64_t *bytes, const char **what, char *err, size_t err_len);

#endif
