/* cudnn_attn_stub.c - stands in for cudnn_attn.c in a build without CUDA
 * or without cuDNN's headers (cudnn_attn.h): every call says so, and the
 * caller takes another attention path. */
#include "cudnn_attn.h"

#include <stdio.h>

#define NOT_BUILT "cuDNN attention not in this build (configure found no CUDA or no cudnn_graph.h)"

int tr_cudnn_attn_open(tr_cudnn_attn **out, const char *lib, void *stream, unsigned flags, char *err,
                       size_t err_len)
{
    (void)lib, (void)stream, (void)flags;
    *out = NULL;
    snprintf(err, err_len, NOT_BUILT);
    return TR_CUDNN_ELOAD;
}

void tr_cudnn_attn_close(tr_cudnn_attn *ca) { (void)ca; }
size_t tr_cudnn_attn_version(const tr_cudnn_attn *ca) { return (void)ca, 0; }
const char *tr_cudnn_attn_library(const tr_cudnn_attn *ca) { return (void)ca, ""; }

int tr_cudnn_attn_graph(tr_cudnn_attn *ca, const tr_attn_dims *d, int dt, int backward, int *stage, int *composite,
                        char *err, size_t err_len)
{
    (void)ca, (void)d, (void)dt, (void)backward;
    *stage = TR_CUDNN_STAGE_NONE;
    if (composite) *composite = 0;
    snprintf(err, err_len, NOT_BUILT);
    return TR_CUDNN_ELOAD;
}

int tr_cudnn_attn_forward(tr_cudnn_attn *ca, const tr_attn_dims *d, int dt, void *out, float *stats,
                          const void *q, const void *k, const void *v, void *ws, size_t ws_bytes, char *err,
                          size_t err_len)
{
    (void)ca, (void)d, (void)dt, (void)out, (void)stats, (void)q, (void)k, (void)v, (void)ws, (void)ws_bytes;
    snprintf(err, err_len, NOT_BUILT);
    return TR_CUDNN_ELOAD;
}

int tr_cudnn_attn_backward(tr_cudnn_attn *ca, const tr_attn_dims *d, int dt, void *dq, void *dk, void *dv,
                           const void *dout, const void *q, const void *k, const void *v, const void *out,
                           const float *stats, void *ws, size_t ws_bytes, char *err, size_t err_len)
{
    (void)ca, (void)d, (void)dt, (void)dq, (void)dk, (void)dv, (void)dout, (void)q, (void)k, (void)v, (void)out;
    (void)stats, (void)ws, (void)ws_bytes;
    snprintf(err, err_len, NOT_BUILT);
    return TR_CUDNN_ELOAD;
}
