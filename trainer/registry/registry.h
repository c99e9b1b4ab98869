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
 * SA1B_CUDA_ATTN=fused|blocked|flash (the attention's path; anything else:
 * the rule), SA1B_CUDA_SYNC (not empty, not 0: wait for every op),
 * SA1B_CUDA_PROFILE=FILE (the device time by call site).  The program
 * sets the rest from its flags. */
void tr_backend_opts_init(tr_backend_opts *o, int n_threads);

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
