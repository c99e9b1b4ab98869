/*
 * backend_cuda_sizes.c - what the CUDA backend saves and takes (backend.h,
 * tr_sizes), in plain C so that every build (the ASan one, one without
 * CUDA) plans for a GPU: sa1b-train --plan --backend cuda.  The backend
 * these sizes describe is issue 16's; a run on a GPU checks them against
 * its allocator (scripts/gpu-check).
 */
#include "backend.h"

/* A fused (flash-style) attention keeps, per query row, the softmax's log
 * of the sum of exponentials in fp32: two 16-bit elements (or one fp32 and
 * one spare) per row, never Tq x Tk. */
static size_t cuda_attention_saved(size_t Tq, size_t Tk)
{
    (void)Tk;
    return 2 * Tq;
}

/* Its backward computes dQ in a pass of its own (no float atomics): the
 * rows' D = sum(dO * O) in fp32, per sequence and head. */
static size_t cuda_attention_workspace(size_t N, size_t heads, size_t Tq, size_t Tk)
{
    (void)Tk;
    return N * heads * Tq * sizeof(float);
}

/* Per-pair sums of the loss terms, as on the CPU. */
static size_t cuda_loss_workspace(size_t N, size_t RR)
{
    (void)RR;
    return (N * 8 + 1) * sizeof(double);
}

/* The GEMM's output [pixels, 4 Co] before the scatter into 2x2 blocks. */
static size_t cuda_convt_scratch(size_t pixels, size_t Co) { return pixels * 4 * Co; }

/* Every pair and every image at once: few, large kernels. */
static int cuda_dec_chunk(int n_pairs) { return n_pairs; }
static int cuda_enc_images(int B) { return B; }

const tr_sizes tr_cuda_sizes = {cuda_attention_saved, cuda_attention_workspace, cuda_loss_workspace,
                                cuda_convt_scratch, cuda_dec_chunk, cuda_enc_images, 0};
