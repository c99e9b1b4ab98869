/*
 * backend_cuda_sizes.c - what the CUDA backend saves and takes (backend.h,
 * tr_sizes), in plain C so that every build (the ASan one, one without
 * CUDA) plans for a GPU: sa1b-train --plan --backend cuda.  The backend
 * these sizes describe is issue 16's; a run on a GPU checks them against
 * its allocator (scripts/gpu-check).
 */
#include "backend/backend.h"
#include "backend_cuda.h"
#include "cudnn_attn.h"

/* Attention keeps, per query row, the softmax's log of the sum of
 * exponentials in fp32 (backend.h's layout, fp32 [N, heads, Tq] from att,
 * every path's): two 16-bit elements a row, or in an fp32 att one fp32 of
 * the first Tq of each (sequence, head) and one spare; never Tq x Tk. */
static size_t cuda_attention_saved(size_t Tq, size_t Tk)
{
    (void)Tk;
    return 2 * Tq;
}

/* Long sequences run blocked: R rows of queries of every head at a time,
 * their scores in fp32, the probabilities (and in the backward the
 * scores' gradients) in a buffer of 4 bytes an element, R chosen so that
 * these take at most about ATTN_BLOCK_BYTES. */
#define ATTN_BLOCK_MIN 64
#define ATTN_BLOCK_BYTES ((size_t)96 << 20)

int tr_cuda_attn_blocked(const tr_attn_dims *d, int mode)
{
    if (mode == TR_CUDA_ATTN_FUSED || mode == TR_CUDA_ATTN_BLOCKED) return mode == TR_CUDA_ATTN_BLOCKED;
    return d->Tq >= ATTN_BLOCK_MIN && d->Tk >= ATTN_BLOCK_MIN;
}

int tr_cuda_attn_rows(const tr_attn_dims *d)
{
    size_t per_row = (size_t)d->heads * (size_t)d->Tk * 12; /* scores, their gradients, probabilities */
    size_t r = per_row ? ATTN_BLOCK_BYTES / per_row : 16;
    r = r / 16 * 16;
    if (r < 16) r = 16;
    return r < (size_t)d->Tq ? (int)r : d->Tq;
}

/* The blocked forward: the scores and the probabilities of R rows.  Its
 * backward: those, the probabilities' gradients, and dK and dV of one
 * sequence summed in fp32 [Tk, heads dh] before they are written to dk
 * and dv (each row's D = sum(dO * O) made where it is used).  The fused
 * (and the flash) backward computes dQ in a pass of its own (no float
 * atomics): the rows' D = sum(dO * O) in fp32 [N, heads, Tq]. */
size_t tr_cuda_attn_workspace(const tr_attn_dims *d, int blocked, int backward)
{
    size_t H = (size_t)d->heads, Tk = (size_t)d->Tk;
    if (!blocked) return backward ? (size_t)d->N * H * (size_t)d->Tq * sizeof(float) : 0;
    size_t block = H * (size_t)tr_cuda_attn_rows(d) * Tk;
    if (!backward) return block * (sizeof(float) + sizeof(float));
    return block * 3 * sizeof(float) + 2 * Tk * H * (size_t)d->dh * sizeof(float);
}

static size_t cuda_attention_fwd_workspace(const tr_attn_dims *d)
{
    return tr_cuda_attn_workspace(d, tr_cuda_attn_blocked(d, TR_CUDA_ATTN_AUTO), 0);
}

static size_t cuda_attention_workspace(const tr_attn_dims *d)
{
    return tr_cuda_attn_workspace(d, tr_cuda_attn_blocked(d, TR_CUDA_ATTN_AUTO), 1);
}

/* cuDNN's SDPA (cudnn_attn.h): the bound its engines are held to, in
 * fp32 accumulators: the forward's row maximum and sum; the backward's dQ
 * accumulator with the rows' D and statistics, and dK and dV accumulators
 * (a deterministic engine keeps them per sequence and head); 1 MiB for
 * the engines' own scratch. */
size_t tr_cudnn_attn_workspace_bound(const tr_attn_dims *d, int backward)
{
    size_t rows = (size_t)d->N * (size_t)d->heads, dh = (size_t)d->dh, slack = (size_t)1 << 20;
    if (!backward) return rows * (size_t)d->Tq * 2 * sizeof(float) + slack;
    return rows * (size_t)d->Tq * (dh + 2) * sizeof(float) + rows * (size_t)d->Tk * dh * 2 * sizeof(float) + slack;
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

const tr_sizes tr_cuda_sizes = {.attention_saved = cuda_attention_saved,
                                 .attention_workspace = cuda_attention_workspace,
                                 .loss_workspace = cuda_loss_workspace,
                                 .convt_scratch = cuda_convt_scratch,
                                 .attention_fwd_workspace = cuda_attention_fwd_workspace};
/* 16-bit operands read as they are */
const tr_traits tr_cuda_traits = {.dec_chunk = cuda_dec_chunk, .enc_images = cuda_enc_images, .widens16 = 0};
