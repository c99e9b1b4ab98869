/*
 * cudnn_attn_layout.c - what cuDNN's SDPA is given for a call (cudnn_attn.h):
 * the tensors' dims and strides and which calls it takes, in plain C for
 * every build (no library needed): cudnn_attn.c builds its descriptors
 * from these very numbers, and the tests read through them.
 */
#include "cudnn_attn.h"

#include <stdio.h>

#include "common/precision.h"

void tr_cudnn_attn_layout(const tr_attn_dims *d, int which, int64_t dims[4], int64_t strides[4])
{
    int64_t T = which == TR_CUDNN_T_K || which == TR_CUDNN_T_V ? d->Tk : d->Tq;
    dims[0] = d->N, dims[1] = d->heads, dims[2] = T, dims[3] = d->dh;
    switch (which) {
    case TR_CUDNN_T_Q: strides[0] = (int64_t)d->sq, strides[2] = d->ldq; break;
    case TR_CUDNN_T_K: strides[0] = (int64_t)d->sk, strides[2] = d->ldk; break;
    case TR_CUDNN_T_V: strides[0] = (int64_t)d->sv, strides[2] = d->ldv; break;
    case TR_CUDNN_T_O: strides[0] = (int64_t)d->so, strides[2] = d->ldo; break;
    default: /* the statistics: [N, heads, Tq, 1] contiguous */
        dims[3] = 1;
        strides[0] = (int64_t)d->heads * d->Tq, strides[1] = d->Tq, strides[2] = 1, strides[3] = 1;
        return;
    }
    strides[1] = d->dh; /* head j: the chunk [j*dh, (j+1)*dh) of a row */
    strides[3] = 1;
}

int tr_cudnn_attn_supported(const tr_attn_dims *d, int dt, char *err, size_t err_len)
{
    if (dt != TR_PREC_BF16 && dt != TR_PREC_FP16)
        return snprintf(err, err_len, "cuDNN attention: %s operands (only bf16 and fp16)", tr_prec_name(dt)),
               TR_CUDNN_EUNSUPPORTED;
    if (d->N < 1 || d->Tq < 1 || d->Tk < 1 || d->heads < 1 || d->dh < 1)
        return snprintf(err, err_len, "cuDNN attention: empty call (N %d, Tq %d, Tk %d, heads %d, dh %d)", d->N,
                        d->Tq, d->Tk, d->heads, d->dh),
               TR_CUDNN_EUNSUPPORTED;
    if (d->dh % 8 || d->dh > 128)
        return snprintf(err, err_len, "cuDNN attention: head dim %d (cuDNN's SDPA takes multiples of 8 up to 128)",
                        d->dh),
               TR_CUDNN_EUNSUPPORTED;
    const int ld[4] = {d->ldq, d->ldk, d->ldv, d->ldo};
    const size_t s[4] = {d->sq, d->sk, d->sv, d->so};
    const char *name = "qkvo";
    for (int i = 0; i < 4; i++) {
        if (ld[i] % 8 || s[i] % 8)
            return snprintf(err, err_len, "cuDNN attention: %c's strides %d and %zu (multiples of 8 elements, 16 bytes)",
                            name[i], ld[i], s[i]),
                   TR_CUDNN_EUNSUPPORTED;
        if (ld[i] < d->heads * d->dh)
            return snprintf(err, err_len, "cuDNN attention: %c's row stride %d below heads x dh = %d", name[i], ld[i],
                            d->heads * d->dh),
                   TR_CUDNN_EUNSUPPORTED;
    }
    return 0;
}
