/*
 * vmlimit.h - the process's address-space limit (RLIMIT_AS, what `ulimit -v`
 * sets and some clusters impose) against what a run maps.  A mapping the
 * limit refuses does not always come back as an error: OpenBLAS 0.3.21
 * (Debian 12) retries a refused buffer forever.  So the trainer reserves
 * what its threads need up front (the CPU backend's warm-up GEMM) and
 * compares the rest with the planner's prediction before the first step.
 */
#ifndef SA1B_VMLIMIT_H
#define SA1B_VMLIMIT_H

#include <stdint.h>

/* The limit in bytes; 0 when there is none. */
uint64_t tr_vm_limit(void);

/* Bytes of address space the process maps now (VmSize); 0 when unknown. */
uint64_t tr_vm_size(void);

/* Bytes of memory the system can still give (MemAvailable); 0 when unknown. */
uint64_t tr_vm_available(void);

/* What one compute thread maps before and in its first GEMM, bounded
 * above: OpenBLAS's per-thread buffer (128 MiB in Debian 12's builds),
 * a glibc malloc arena (64 MiB) and the thread's stack (8 MiB); measured
 * 205 MiB per concurrent thread with OpenBLAS 0.3.21. */
#define TR_VM_PER_THREAD ((uint64_t)256 << 20)

/* What a loader worker maps: a malloc arena and its stack. */
#define TR_VM_PER_WORKER ((uint64_t)80 << 20)

#endif
