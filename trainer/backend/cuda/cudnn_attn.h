/*
 * cudnn_attn.h - softmax attention through cuDNN's fused SDPA operations
 * (cuDNN's C backend API, cudnn_graph.h: CUDNN_BACKEND_OPERATION_SDPA_FWD_
 * and _BWD_DESCRIPTOR), loaded at run time (dlopen), for the CUDA backend
 * (issue 40).  Plain C; no global state; errors are codes (TR_CUDNN_*)
 * with one line in the caller's buffer; nothing prints.
 *
 * The attention is the tr_ops one (backend.h, tr_attn_dims): per sequence
 * n and head j, out_j = softmax(q_j k_j^T / sqrt(dh)) v_j, where head j of
 * a row is the contiguous chunk [j*dh, (j+1)*dh) of that row, rows ldq/
 * ldk/ldv/ldo elements apart and sequences sq/sk/sv/so apart; no mask.
 * q, k, v, out and the gradients are 16-bit (TR_PREC_BF16 or _FP16, one
 * type for all of a call).  The statistics are fp32 log-sum-exp of the
 * scaled scores, stats[(n*heads + j)*Tq + t] = log sum_s exp(q_t.k_s /
 * sqrt(dh)) (natural log; cuDNN's Stats), [N, heads, Tq] contiguous: the
 * layout every GPU path shares (tr_sizes.attention_saved: Tq floats per
 * sequence and head).
 *
 * Wiring (the CUDA backend):
 *   tr_cudnn_attn *ca;
 *   if (tr_cudnn_attn_open(&ca, NULL, stream, 0, err, n) != 0) -> another
 *       path (err says why: no library, too old, no device, ...)
 *   tr_cudnn_attn_version(ca), tr_cudnn_attn_library(ca): for reports
 *   per call d (at start-up or on first use; plans are cached by shape):
 *   if (tr_cudnn_attn_supported(&d, dt, err, n) != 0) -> another path
 *   ws = tr_cudnn_attn_workspace_bound(&d, backward) bytes from the
 *       backend's allocator (the planner counts the same bound);
 *   tr_cudnn_attn_forward(ca, &d, dt, out, stats, q, k, v, ws, ws_bytes,
 *       err, n): out and stats written, on the stream given at open;
 *   tr_cudnn_attn_backward(ca, &d, dt, dq, dk, dv, dout, q, k, v, out,
 *       stats, ws, ws_bytes, err, n): dq, dk, dv WRITTEN (=), not added
 *       (ws: tr_cudnn_attn_workspace_bound(&d, 1) bytes, non-NULL).
 *   A nonzero return from either: nothing was launched (the plan could not
 *   be made, or no engine fits the workspace): the caller takes another
 *   path for that shape (a shape without a plan stays so, the same line
 *   returned, cuDNN not asked again).  tr_cudnn_attn_close(ca) at the end.
 *   Every pointer is device memory aligned to 16 bytes (refused otherwise).
 *
 * Determinism: by default only engines without cuDNN's numerical note
 * NONDETERMINISTIC are taken (cudnn_graph.h of 9.19 has no deterministic
 * attribute on the SDPA backward descriptor; the note on each engine is
 * how the backend API says it); TR_CUDNN_NONDETERMINISTIC at open lets the
 * heuristics' first choice run.
 *
 * Versions: the oldest library opened is TR_CUDNN_MIN_VERSION (9.13.0, the
 * first with the SDPA forward operation descriptor, enum 41); the
 * backward takes TR_CUDNN_MIN_VERSION_BWD (9.17.0, the first with the SDPA
 * backward descriptor, enum 43) and is refused below it
 * (TR_CUDNN_EUNSUPPORTED, before anything is built).  The versions are
 * those the cuDNN 9 headers' history gives for the two enums.
 *
 * The backward: the SDPA backward operation where the library's graphs
 * take it; else (cuDNN 9.19.0: its tensors and operation finalize, its
 * operation graph does not: CUDNN_STATUS_BAD_PARAM, "outputGraph.
 * buildDAG()"; 9.19's graph builder has a node for the SDPA forward and
 * none for the backward) the same backward as a composite graph of cuDNN
 * matmul, pointwise, reduction and reshape operations (FlashAttention-2's
 * order, the scores virtual), which 9.19 finalizes without a device for
 * every call of tiny, small and base.  The composite backward keeps the
 * rows' sum(dO * O) (fp32 [N, heads, Tq], 256-byte aligned) at the start
 * of the caller's workspace, cuDNN's workspace after it; both within
 * tr_cudnn_attn_workspace_bound.  Whether cuDNN has an engine for the
 * composite graph shows only on a device (tr_cudnn_attn_graph reaching
 * the plan); without one the backward returns TR_CUDNN_EPLAN, nothing
 * launched, and the caller takes another path's backward, which reads
 * the same statistics.
 */
#ifndef SA1B_TRAINER_BACKEND_CUDA_CUDNN_ATTN_H
#define SA1B_TRAINER_BACKEND_CUDA_CUDNN_ATTN_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"

#define TR_CUDNN_MIN_VERSION 91300
#define TR_CUDNN_MIN_VERSION_BWD 91700

/* error codes (0: success) */
enum {
    TR_CUDNN_OK = 0,
    TR_CUDNN_ELOAD = -1,        /* no library, or a symbol missing from it */
    TR_CUDNN_EVERSION = -2,     /* older than TR_CUDNN_MIN_VERSION */
    TR_CUDNN_EHANDLE = -3,      /* cudnnCreate/cudnnSetStream failed (no device, ...) */
    TR_CUDNN_EUNSUPPORTED = -4, /* a shape or type this path does not take */
    TR_CUDNN_EGRAPH = -5,       /* cuDNN refused a descriptor or the operation graph */
    TR_CUDNN_EPLAN = -6,        /* no engine (deterministic, within the workspace) made a plan */
    TR_CUDNN_EEXEC = -7,        /* cudnnBackendExecute failed */
    TR_CUDNN_ENOMEM = -8,
    TR_CUDNN_EARG = -9          /* a pointer or argument the interface does not take */
};

/* open flags */
enum {
    TR_CUDNN_NONDETERMINISTIC = 1, /* allow engines cuDNN notes as non-deterministic */
    TR_CUDNN_NO_HANDLE = 2         /* load and check the library only (no cudnnCreate, no
                                    * device needed): tr_cudnn_attn_graph works, the
                                    * calls refuse with TR_CUDNN_EHANDLE */
};

typedef struct tr_cudnn_attn tr_cudnn_attn;

/* Loads cuDNN (lib: a path, or NULL for libcudnn.so.9 from the loader's
 * path, then from the toolkit's library directory), checks its version,
 * resolves every function this module calls, and (without
 * TR_CUDNN_NO_HANDLE) creates a handle on stream (a cudaStream_t; NULL:
 * the default stream).  0, or a TR_CUDNN_* code with one line in err and
 * *out NULL. */
int tr_cudnn_attn_open(tr_cudnn_attn **out, const char *lib, void *stream, unsigned flags, char *err,
                       size_t err_len);
/* Destroys the plans and the handle and unloads the library (NULL: nothing). */
void tr_cudnn_attn_close(tr_cudnn_attn *ca);
/* cudnnGetVersion() of the library loaded (e.g. 91900) and its path. */
size_t tr_cudnn_attn_version(const tr_cudnn_attn *ca);
const char *tr_cudnn_attn_library(const tr_cudnn_attn *ca);

/* 0 when the call d in dtype dt is one this path takes, else
 * TR_CUDNN_EUNSUPPORTED with one line naming what (the head dim dh must be
 * a multiple of 8 from 8 to 128 (cuDNN's bound for the backward below
 * 9.23); row and sequence strides multiples of 8 elements (16 bytes); dt
 * bf16 or fp16; sizes positive).  A pure function: no library needed. */
int tr_cudnn_attn_supported(const tr_attn_dims *d, int dt, char *err, size_t err_len);

/* The tensors of a call as cuDNN is given them: dims and strides in
 * elements, in cuDNN's [batch, heads, sequence, head dim] order. */
enum {
    TR_CUDNN_T_Q = 0, /* also dq */
    TR_CUDNN_T_K,     /* also dk */
    TR_CUDNN_T_V,     /* also dv */
    TR_CUDNN_T_O,     /* also dout */
    TR_CUDNN_T_STATS, /* [N, heads, Tq, 1], fp32 */
    TR_CUDNN_T_COUNT
};
void tr_cudnn_attn_layout(const tr_attn_dims *d, int which, int64_t dims[4], int64_t strides[4]);

/* Bytes of workspace the call d takes at most (backward 0: forward, 1:
 * backward): engines that need more are not taken.  A pure function of
 * the dims (backend_cuda_sizes.c, every build), so that the planner counts
 * it without a device:
 *   forward:  8 * N*heads*Tq        (fp32 row maximum and sum) + 1 MiB
 *   backward: 4 * N*heads*Tq*(dh+2) (fp32 dQ accumulator, rows' D, stats)
 *           + 8 * N*heads*Tk*dh     (fp32 dK and dV accumulators)  + 1 MiB
 * A GPU run (scripts/gpu-check attn) checks each plan's workspace against
 * it. */
size_t tr_cudnn_attn_workspace_bound(const tr_attn_dims *d, int backward);

/* How far tr_cudnn_attn_graph got */
enum {
    TR_CUDNN_STAGE_NONE = 0,
    TR_CUDNN_STAGE_TENSORS, /* every tensor descriptor finalized */
    TR_CUDNN_STAGE_OP,      /* and the SDPA operation descriptor */
    TR_CUDNN_STAGE_GRAPH,   /* and the operation graph */
    TR_CUDNN_STAGE_PLAN     /* and an execution plan (a handle, so a device, needed) */
};
/* Builds the descriptors of the call d (forward, or backward 1) and
 * finalizes them as far as cuDNN allows (without a handle: no plan), all
 * destroyed again; *stage says how far it got, *composite (NULL: not
 * asked) 1 when the backward went to the composite graph.  0 when it
 * reached the plan, or the graph without a handle; else a code and one
 * line.  Used by the tests and gpu-check; the calls build their own
 * (cached) plans. */
int tr_cudnn_attn_graph(tr_cudnn_attn *ca, const tr_attn_dims *d, int dt, int backward, int *stage, int *composite,
                        char *err, size_t err_len);

/* out [as d's o], stats [N, heads, Tq] fp32 from q, k, v. */
int tr_cudnn_attn_forward(tr_cudnn_attn *ca, const tr_attn_dims *d, int dt, void *out, float *stats,
                          const void *q, const void *k, const void *v, void *ws, size_t ws_bytes, char *err,
                          size_t err_len);
/* dq, dk, dv written (=) from dout and the forward's q, k, v, out, stats. */
int tr_cudnn_attn_backward(tr_cudnn_attn *ca, const tr_attn_dims *d, int dt, void *dq, void *dk, void *dv,
                           const void *dout, const void *q, const void *k, const void *v, const void *out,
                           const float *stats, void *ws, size_t ws_bytes, char *err, size_t err_len);

#endif
