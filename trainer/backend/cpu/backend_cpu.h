/*
 * backend_cpu.h - the CPU backend (backend_cpu.c): OpenBLAS (or a plain C
 * GEMM) and a thread pool; 16-bit operands widened to fp32 per op
 * (backend_widen.h).
 */
#ifndef SA1B_TRAINER_BACKEND_CPU_H
#define SA1B_TRAINER_BACKEND_CPU_H

#include "backend/backend.h"

/* The CPU backend with n_threads >= 1 pool and BLAS threads; NULL with a
 * one-line message in err when its threads cannot start or memory is out. */
tr_backend *tr_backend_cpu_create(int n_threads, char *err, size_t err_len);

/* Its sizes and traits, known without an instance (the planner's, and the
 * meta backend's default target). */
extern const tr_sizes tr_cpu_sizes;
extern const tr_traits tr_cpu_traits;

/* Plain C GEMM, row-major, same contract as tr_ops.gemm (the fallback when
 * OpenBLAS is absent; also a reference for tests). */
void tr_gemm_ref(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda,
                 const float *B, int ldb, float beta, float *C, int ldc);
#endif
