/*
 * cudnn_attn.c - cuDNN's fused SDPA forward and backward through its C
 * backend API (cudnn_attn.h), the library loaded with dlopen and every
 * cudnn* function resolved with dlsym, so that one binary runs where
 * cuDNN is absent (the caller takes another path).  cuDNN's headers give
 * the types and enums only; nothing links against it.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* dladdr */
#endif
#include "cudnn_attn.h"

#include <cudnn_graph.h>
#include <dlfcn.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/precision.h"

typedef cudnnBackendDescriptor_t desc_t;

typedef struct plan_entry {
    tr_attn_dims d;
    int dt, backward;
    int composite;  /* the backward as a graph of matmuls and pointwise ops (composite_backward) */
    size_t ssum_off; /* its rows' sum(dO * O) at the caller's workspace, cuDNN's workspace from here */
    int rc;          /* nonzero: the shape has no plan (plan NULL), why says why */
    char why[384];
    desc_t plan;
    int64_t ws; /* the plan's workspace, bytes */
} plan_entry;

struct tr_cudnn_attn {
    void *lib;
    size_t version;
    char path[1024];
    unsigned flags;
    cudnnHandle_t handle;
    plan_entry *plans;
    size_t n_plans, cap_plans;
    size_t (*get_version)(void);
    const char *(*get_error_string)(cudnnStatus_t);
    void (*get_last_error_string)(char *, size_t);
    cudnnStatus_t (*create)(cudnnHandle_t *);
    cudnnStatus_t (*destroy)(cudnnHandle_t);
    cudnnStatus_t (*set_stream)(cudnnHandle_t, cudaStream_t);
    cudnnStatus_t (*create_desc)(cudnnBackendDescriptorType_t, desc_t *);
    cudnnStatus_t (*destroy_desc)(desc_t);
    cudnnStatus_t (*finalize)(desc_t);
    cudnnStatus_t (*set_attr)(desc_t, cudnnBackendAttributeName_t, cudnnBackendAttributeType_t, int64_t,
                              const void *);
    cudnnStatus_t (*get_attr)(desc_t const, cudnnBackendAttributeName_t, cudnnBackendAttributeType_t, int64_t,
                              int64_t *, void *);
    cudnnStatus_t (*execute)(cudnnHandle_t, desc_t, desc_t);
};

/* the tensors' unique ids in the graphs and variant packs */
enum { UID_Q = 1, UID_K, UID_V, UID_O, UID_STATS, UID_SCALE, UID_DO, UID_DQ, UID_DK, UID_DV, UID_SSUM, UID_COUNT };
/* the composite backward's virtual tensors: uids from here */
#define UID_VIRTUAL 100
#define MAX_EXTRA 64
#define MAX_OPS 24

/* "STEP: STATUS (cuDNN's last message)" as one line */
static int fail(tr_cudnn_attn *ca, int code, cudnnStatus_t st, const char *step, char *err, size_t err_len)
{
    char last[256] = "";
    if (ca->get_last_error_string) ca->get_last_error_string(last, sizeof last);
    for (char *c = last; *c; c++)
        if (*c == '\n' || *c == '\r' || *c == '\t') *c = ' ';
    snprintf(err, err_len, "cuDNN %zu.%zu.%zu: %s: %s%s%s%s", ca->version / 10000, ca->version / 100 % 100,
             ca->version % 100, step, ca->get_error_string ? ca->get_error_string(st) : "error",
             *last ? " (" : "", last, *last ? ")" : "");
    return code;
}

/* ---- loading ------------------------------------------------------------ */

int tr_cudnn_attn_open(tr_cudnn_attn **out, const char *lib, void *stream, unsigned flags, char *err,
                       size_t err_len)
{
    *out = NULL;
    tr_cudnn_attn *ca = calloc(1, sizeof *ca);
    if (!ca) return snprintf(err, err_len, "cuDNN attention: out of memory"), TR_CUDNN_ENOMEM;
    ca->flags = flags;
    const char *names[] = {
        "libcudnn.so.9",
#ifdef SA1B_CUDNN_LIBDIR
        SA1B_CUDNN_LIBDIR "/libcudnn.so.9",
#endif
    };
    char why[512] = "";
    if (lib) {
        if (!(ca->lib = dlopen(lib, RTLD_NOW | RTLD_LOCAL))) snprintf(why, sizeof why, "%s", dlerror());
    } else {
        for (size_t i = 0; i < sizeof names / sizeof *names && !ca->lib; i++)
            if (!(ca->lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL)) && !*why)
                snprintf(why, sizeof why, "%s", dlerror());
    }
    if (!ca->lib) {
        free(ca);
        return snprintf(err, err_len, "cannot load cuDNN: %s", why), TR_CUDNN_ELOAD;
    }
    const char *missing = NULL;
    /* POSIX: a function pointer read from dlsym's void * through memcpy */
#define SYM_(field, name)                                  \
    do {                                                   \
        void *p_ = dlsym(ca->lib, name);                   \
        if (!p_ && !missing) missing = name;               \
        memcpy(&ca->field, &p_, sizeof p_);                \
    } while (0)
    SYM_(get_version, "cudnnGetVersion");
    SYM_(get_error_string, "cudnnGetErrorString");
    SYM_(get_last_error_string, "cudnnGetLastErrorString");
    SYM_(create, "cudnnCreate");
    SYM_(destroy, "cudnnDestroy");
    SYM_(set_stream, "cudnnSetStream");
    SYM_(create_desc, "cudnnBackendCreateDescriptor");
    SYM_(destroy_desc, "cudnnBackendDestroyDescriptor");
    SYM_(finalize, "cudnnBackendFinalize");
    SYM_(set_attr, "cudnnBackendSetAttribute");
    SYM_(get_attr, "cudnnBackendGetAttribute");
    SYM_(execute, "cudnnBackendExecute");
#undef SYM_
    Dl_info info;
    void *any = NULL;
    memcpy(&any, &ca->get_version, sizeof any);
    snprintf(ca->path, sizeof ca->path, "%s", any && dladdr(any, &info) && info.dli_fname ? info.dli_fname
                                               : lib ? lib : names[0]);
    if (missing) {
        snprintf(err, err_len, "cuDNN at %s lacks %s", ca->path, missing);
        tr_cudnn_attn_close(ca);
        return TR_CUDNN_ELOAD;
    }
    ca->version = ca->get_version();
    if (ca->version < TR_CUDNN_MIN_VERSION) {
        snprintf(err, err_len, "cuDNN %zu.%zu.%zu at %s is older than %d.%d.%d, the first with the SDPA "
                 "operations", ca->version / 10000, ca->version / 100 % 100, ca->version % 100, ca->path,
                 TR_CUDNN_MIN_VERSION / 10000, TR_CUDNN_MIN_VERSION / 100 % 100, TR_CUDNN_MIN_VERSION % 100);
        tr_cudnn_attn_close(ca);
        return TR_CUDNN_EVERSION;
    }
    if (!(flags & TR_CUDNN_NO_HANDLE)) {
        cudnnStatus_t st = ca->create(&ca->handle);
        if (st != CUDNN_STATUS_SUCCESS) {
            ca->handle = NULL;
            int rc = fail(ca, TR_CUDNN_EHANDLE, st, "cudnnCreate", err, err_len);
            tr_cudnn_attn_close(ca);
            return rc;
        }
        if ((st = ca->set_stream(ca->handle, (cudaStream_t)stream)) != CUDNN_STATUS_SUCCESS) {
            int rc = fail(ca, TR_CUDNN_EHANDLE, st, "cudnnSetStream", err, err_len);
            tr_cudnn_attn_close(ca);
            return rc;
        }
    }
    *out = ca;
    return 0;
}

void tr_cudnn_attn_close(tr_cudnn_attn *ca)
{
    if (!ca) return;
    for (size_t i = 0; i < ca->n_plans; i++)
        if (ca->plans[i].plan) ca->destroy_desc(ca->plans[i].plan);
    free(ca->plans);
    if (ca->handle) ca->destroy(ca->handle);
    if (ca->lib) dlclose(ca->lib);
    free(ca);
}

size_t tr_cudnn_attn_version(const tr_cudnn_attn *ca) { return ca->version; }
const char *tr_cudnn_attn_library(const tr_cudnn_attn *ca) { return ca->path; }

/* ---- the graphs ------------------------------------------------------------ */

/* The descriptors of one call: tensors by uid, the operation, the graph. */
typedef struct built {
    desc_t t[UID_COUNT];
    desc_t op, graph;
    int composite;
    desc_t extra[MAX_EXTRA]; /* the composite graph's other tensors and op descriptors */
    int n_extra;
    desc_t ops[MAX_OPS];
    int n_ops;
    int64_t next_uid;
} built;

static void unbuild(tr_cudnn_attn *ca, built *b)
{
    if (b->graph) ca->destroy_desc(b->graph);
    if (b->op) ca->destroy_desc(b->op);
    for (int i = 0; i < b->n_ops; i++) ca->destroy_desc(b->ops[i]);
    for (int i = 0; i < b->n_extra; i++) ca->destroy_desc(b->extra[i]);
    for (int i = 0; i < UID_COUNT; i++)
        if (b->t[i]) ca->destroy_desc(b->t[i]);
    memset(b, 0, sizeof *b);
}

#define SET_(desc, name, type, count, value, step)                                          \
    do {                                                                                    \
        cudnnStatus_t st_ = ca->set_attr(desc, name, type, count, value);                   \
        if (st_ != CUDNN_STATUS_SUCCESS) return fail(ca, TR_CUDNN_EGRAPH, st_, step, err, err_len); \
    } while (0)

enum { T_BY_VALUE = 1, T_VIRTUAL = 2 };

static int tensor(tr_cudnn_attn *ca, desc_t *out, int64_t uid, cudnnDataType_t type, const int64_t dims[4],
                  const int64_t strides[4], int flags, char *err, size_t err_len)
{
    int by_value = flags & T_BY_VALUE;
    cudnnStatus_t st = ca->create_desc(CUDNN_BACKEND_TENSOR_DESCRIPTOR, out);
    if (st != CUDNN_STATUS_SUCCESS) {
        *out = NULL;
        return fail(ca, TR_CUDNN_EGRAPH, st, "tensor descriptor", err, err_len);
    }
    int64_t align = by_value ? 4 : 16;
    SET_(*out, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid, "tensor id");
    SET_(*out, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type, "tensor type");
    SET_(*out, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align, "tensor alignment");
    SET_(*out, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims, "tensor dims");
    SET_(*out, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides, "tensor strides");
    if (by_value) {
        bool yes = true;
        SET_(*out, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &yes, "tensor by value");
    }
    if (flags & T_VIRTUAL) {
        bool yes = true;
        SET_(*out, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &yes, "tensor virtual");
    }
    if ((st = ca->finalize(*out)) != CUDNN_STATUS_SUCCESS)
        return fail(ca, TR_CUDNN_EGRAPH, st, "tensor descriptor finalize", err, err_len);
    return 0;
}

/* ---- the backward as a composite graph --------------------------------- */

/* A tensor of the composite graph kept in b (uid 0: the next virtual one). */
static int ctensor(tr_cudnn_attn *ca, built *b, desc_t *out, int64_t uid, cudnnDataType_t type, int64_t d0,
                   int64_t d1, int64_t d2, int64_t d3, const int64_t *strides, char *err, size_t err_len)
{
    if (b->n_extra >= MAX_EXTRA) return snprintf(err, err_len, "cuDNN attention: too many descriptors"), TR_CUDNN_EGRAPH;
    const int64_t dims[4] = {d0, d1, d2, d3};
    int64_t packed[4] = {d1 * d2 * d3, d2 * d3, d3, 1};
    int flags = uid ? 0 : T_VIRTUAL;
    if (!uid) uid = b->next_uid++;
    int rc = tensor(ca, &b->extra[b->n_extra], uid, type, dims, strides ? strides : packed, flags, err, err_len);
    *out = b->extra[b->n_extra];
    if (b->extra[b->n_extra]) b->n_extra++;
    return rc;
}

/* A descriptor of type kept in b, its attributes set by the caller. */
static int cdesc(tr_cudnn_attn *ca, built *b, cudnnBackendDescriptorType_t type, desc_t *out, int is_op, char *err,
                 size_t err_len)
{
    desc_t *slot = is_op ? (b->n_ops < MAX_OPS ? &b->ops[b->n_ops] : NULL)
                         : (b->n_extra < MAX_EXTRA ? &b->extra[b->n_extra] : NULL);
    if (!slot) return snprintf(err, err_len, "cuDNN attention: too many descriptors"), TR_CUDNN_EGRAPH;
    cudnnStatus_t st = ca->create_desc(type, slot);
    if (st != CUDNN_STATUS_SUCCESS) return fail(ca, TR_CUDNN_EGRAPH, st, "composite descriptor", err, err_len);
    if (is_op) b->n_ops++;
    else b->n_extra++;
    *out = *slot;
    return 0;
}

#define FIN_(desc, step)                                                                        \
    do {                                                                                        \
        cudnnStatus_t st_ = ca->finalize(desc);                                                 \
        if (st_ != CUDNN_STATUS_SUCCESS) return fail(ca, TR_CUDNN_EGRAPH, st_, step, err, err_len); \
    } while (0)

/* y = x (mode) [b] in fp32 */
static int cpw(tr_cudnn_attn *ca, built *b, cudnnPointwiseMode_t mode, desc_t x, desc_t bb, desc_t y, char *err,
               size_t err_len)
{
    desc_t pd, op;
    int rc;
    cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
    if ((rc = cdesc(ca, b, CUDNN_BACKEND_POINTWISE_DESCRIPTOR, &pd, 0, err, err_len))) return rc;
    SET_(pd, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode, "pointwise mode");
    SET_(pd, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &f32, "pointwise precision");
    FIN_(pd, "pointwise descriptor finalize");
    if ((rc = cdesc(ca, b, CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, &op, 1, err, err_len))) return rc;
    const cudnnBackendAttributeType_t D = CUDNN_TYPE_BACKEND_DESCRIPTOR;
    SET_(op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, D, 1, &pd, "pointwise op");
    SET_(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, D, 1, &x, "pointwise x");
    if (bb) SET_(op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, D, 1, &bb, "pointwise b");
    SET_(op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, D, 1, &y, "pointwise y");
    FIN_(op, "pointwise operation finalize");
    return 0;
}

/* c = a b (batched over the first two dims), fp32 accumulation */
static int cmm(tr_cudnn_attn *ca, built *b, desc_t a, desc_t bb, desc_t c, char *err, size_t err_len)
{
    desc_t md, op;
    int rc;
    cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
    if ((rc = cdesc(ca, b, CUDNN_BACKEND_MATMUL_DESCRIPTOR, &md, 0, err, err_len))) return rc;
    SET_(md, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f32, "matmul precision");
    FIN_(md, "matmul descriptor finalize");
    if ((rc = cdesc(ca, b, CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, &op, 1, err, err_len))) return rc;
    const cudnnBackendAttributeType_t D = CUDNN_TYPE_BACKEND_DESCRIPTOR;
    SET_(op, CUDNN_ATTR_OPERATION_MATMUL_ADESC, D, 1, &a, "matmul a");
    SET_(op, CUDNN_ATTR_OPERATION_MATMUL_BDESC, D, 1, &bb, "matmul b");
    SET_(op, CUDNN_ATTR_OPERATION_MATMUL_CDESC, D, 1, &c, "matmul c");
    SET_(op, CUDNN_ATTR_OPERATION_MATMUL_DESC, D, 1, &md, "matmul descriptor");
    FIN_(op, "matmul operation finalize");
    return 0;
}

/* y = the sum of x over its last dim, fp32 */
static int creduce(tr_cudnn_attn *ca, built *b, desc_t x, desc_t y, char *err, size_t err_len)
{
    desc_t rd, op;
    int rc;
    cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
    cudnnReduceTensorOp_t add = CUDNN_REDUCE_TENSOR_ADD;
    if ((rc = cdesc(ca, b, CUDNN_BACKEND_REDUCTION_DESCRIPTOR, &rd, 0, err, err_len))) return rc;
    SET_(rd, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &add, "reduction operator");
    SET_(rd, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f32, "reduction precision");
    FIN_(rd, "reduction descriptor finalize");
    if ((rc = cdesc(ca, b, CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, &op, 1, err, err_len))) return rc;
    const cudnnBackendAttributeType_t D = CUDNN_TYPE_BACKEND_DESCRIPTOR;
    SET_(op, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, D, 1, &x, "reduction x");
    SET_(op, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, D, 1, &y, "reduction y");
    SET_(op, CUDNN_ATTR_OPERATION_REDUCTION_DESC, D, 1, &rd, "reduction descriptor");
    FIN_(op, "reduction operation finalize");
    return 0;
}

/* y = x seen through y's dims and strides (a transpose) */
static int creshape(tr_cudnn_attn *ca, built *b, desc_t x, desc_t y, char *err, size_t err_len)
{
    desc_t op;
    int rc;
    if ((rc = cdesc(ca, b, CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR, &op, 1, err, err_len))) return rc;
    const cudnnBackendAttributeType_t D = CUDNN_TYPE_BACKEND_DESCRIPTOR;
    SET_(op, CUDNN_ATTR_OPERATION_RESHAPE_XDESC, D, 1, &x, "reshape x");
    SET_(op, CUDNN_ATTR_OPERATION_RESHAPE_YDESC, D, 1, &y, "reshape y");
    FIN_(op, "reshape operation finalize");
    return 0;
}

/* The backward as FlashAttention-2 writes it, in cuDNN's graph ops, on
 * the tensors of b (made by build):
 *   ssum = sum_e dO*O [N,H,Tq,1] (fp32, in the caller's workspace)
 *   P = exp(scale * Q K^T - stats); dV = P^T dO
 *   dS = scale * P * (dO V^T - ssum); dQ = dS K; dK = dS^T Q
 * the scores and their gradients virtual (never in memory). */
static int composite_backward(tr_cudnn_attn *ca, const tr_attn_dims *d, cudnnDataType_t t16, built *b, char *err,
                              size_t err_len)
{
    const int64_t N = d->N, H = d->heads, Tq = d->Tq, Tk = d->Tk, dh = d->dh;
    const cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
    const int64_t ss_str[4] = {H * Tq, Tq, 1, 1};
    const int64_t kT_str[4] = {(int64_t)d->sk, dh, 1, d->ldk}, vT_str[4] = {(int64_t)d->sv, dh, 1, d->ldv};
    const int64_t tr_str[4] = {H * Tq * Tk, Tq * Tk, 1, Tk}; /* [N,H,Tk,Tq] over [N,H,Tq,Tk] */
    desc_t ssum, kT, vT, dOO, S, S2, S3, P, PT, dP, dP2, dP3, dS, dST;
    int rc;
    b->next_uid = UID_VIRTUAL;
    b->composite = 1;
    if ((rc = tensor(ca, &b->t[UID_SSUM], UID_SSUM, f32, (const int64_t[4]){N, H, Tq, 1}, ss_str, 0, err, err_len)))
        return rc;
    ssum = b->t[UID_SSUM];
    if ((rc = ctensor(ca, b, &kT, UID_K, t16, N, H, dh, Tk, kT_str, err, err_len)) ||
        (rc = ctensor(ca, b, &vT, UID_V, t16, N, H, dh, Tk, vT_str, err, err_len)) ||
        (rc = ctensor(ca, b, &dOO, 0, f32, N, H, Tq, dh, NULL, err, err_len)) ||
        (rc = ctensor(ca, b, &S, 0, f32, N, H, Tq, Tk, NULL, err, err_len)) ||
        (rc = ctensor(ca, b, &S2, 0, f32, N, H, Tq, Tk, NULL, err, err_len)) ||
        (rc = ctensor(ca, b, &S3, 0, f32, N, H, Tq, Tk, NULL, err, err_len)) ||
        (rc = ctensor(ca, b, &P, 0, f32, N, H, Tq, Tk, NULL, err, err_len)) ||
        (rc = ctensor(ca, b, &PT, 0, t16, N, H, Tk, Tq, tr_str, err, err_len)) ||
        (rc = ctensor(ca, b, &dP, 0, f32, N, H, Tq, Tk, NULL, err, err_len)) ||
        (rc = ctensor(ca, b, &dP2, 0, f32, N, H, Tq, Tk, NULL, err, err_len)) ||
        (rc = ctensor(ca, b, &dP3, 0, f32, N, H, Tq, Tk, NULL, err, err_len)) ||
        (rc = ctensor(ca, b, &dS, 0, f32, N, H, Tq, Tk, NULL, err, err_len)) ||
        (rc = ctensor(ca, b, &dST, 0, t16, N, H, Tk, Tq, tr_str, err, err_len)))
        return rc;
    desc_t *t = b->t;
    if ((rc = cpw(ca, b, CUDNN_POINTWISE_MUL, t[UID_DO], t[UID_O], dOO, err, err_len)) ||
        (rc = creduce(ca, b, dOO, ssum, err, err_len)) ||
        (rc = cmm(ca, b, t[UID_Q], kT, S, err, err_len)) ||
        (rc = cpw(ca, b, CUDNN_POINTWISE_MUL, S, t[UID_SCALE], S2, err, err_len)) ||
        (rc = cpw(ca, b, CUDNN_POINTWISE_SUB, S2, t[UID_STATS], S3, err, err_len)) ||
        (rc = cpw(ca, b, CUDNN_POINTWISE_EXP, S3, NULL, P, err, err_len)) ||
        (rc = creshape(ca, b, P, PT, err, err_len)) ||
        (rc = cmm(ca, b, PT, t[UID_DO], t[UID_DV], err, err_len)) ||
        (rc = cmm(ca, b, t[UID_DO], vT, dP, err, err_len)) ||
        (rc = cpw(ca, b, CUDNN_POINTWISE_SUB, dP, ssum, dP2, err, err_len)) ||
        (rc = cpw(ca, b, CUDNN_POINTWISE_MUL, dP2, P, dP3, err, err_len)) ||
        (rc = cpw(ca, b, CUDNN_POINTWISE_MUL, dP3, t[UID_SCALE], dS, err, err_len)) ||
        (rc = creshape(ca, b, dS, dST, err, err_len)) ||
        (rc = cmm(ca, b, dST, t[UID_Q], t[UID_DK], err, err_len)) ||
        (rc = cmm(ca, b, dS, t[UID_K], t[UID_DQ], err, err_len)))
        return rc;
    cudnnStatus_t st = ca->create_desc(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, &b->graph);
    if (st != CUDNN_STATUS_SUCCESS) {
        b->graph = NULL;
        return fail(ca, TR_CUDNN_EGRAPH, st, "composite graph descriptor", err, err_len);
    }
    if (ca->handle) SET_(b->graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &ca->handle, "graph handle");
    SET_(b->graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, b->n_ops, b->ops, "graph operations");
    FIN_(b->graph, "composite backward graph finalize");
    return 0;
}

/* The tensors, the SDPA operation and its graph of the call d; *stage how
 * far it got.  b is left for unbuild in every case. */
static int build(tr_cudnn_attn *ca, const tr_attn_dims *d, int dt, int backward, built *b, int *stage, char *err,
                 size_t err_len)
{
    memset(b, 0, sizeof *b);
    *stage = TR_CUDNN_STAGE_NONE;
    int rc = tr_cudnn_attn_supported(d, dt, err, err_len);
    if (rc) return rc;
    if (backward && ca->version < TR_CUDNN_MIN_VERSION_BWD)
        return snprintf(err, err_len, "cuDNN %zu.%zu.%zu has no SDPA backward operation (from %d.%d.%d)",
                        ca->version / 10000, ca->version / 100 % 100, ca->version % 100,
                        TR_CUDNN_MIN_VERSION_BWD / 10000, TR_CUDNN_MIN_VERSION_BWD / 100 % 100,
                        TR_CUDNN_MIN_VERSION_BWD % 100),
               TR_CUDNN_EUNSUPPORTED;
    cudnnDataType_t t16 = dt == TR_PREC_BF16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_HALF;
    static const int which[UID_COUNT] = {[UID_Q] = TR_CUDNN_T_Q,   [UID_K] = TR_CUDNN_T_K,  [UID_V] = TR_CUDNN_T_V,
                                         [UID_O] = TR_CUDNN_T_O,   [UID_STATS] = TR_CUDNN_T_STATS,
                                         [UID_DO] = TR_CUDNN_T_O,  [UID_DQ] = TR_CUDNN_T_Q, [UID_DK] = TR_CUDNN_T_K,
                                         [UID_DV] = TR_CUDNN_T_V};
    int last = backward ? UID_DV : UID_SCALE;
    for (int u = UID_Q; u <= last; u++) {
        int64_t dims[4] = {1, 1, 1, 1}, strides[4] = {1, 1, 1, 1};
        if (u != UID_SCALE) tr_cudnn_attn_layout(d, which[u], dims, strides);
        cudnnDataType_t type = u == UID_STATS || u == UID_SCALE ? CUDNN_DATA_FLOAT : t16;
        if ((rc = tensor(ca, &b->t[u], u, type, dims, strides, u == UID_SCALE ? T_BY_VALUE : 0, err, err_len)))
            return rc;
    }
    *stage = TR_CUDNN_STAGE_TENSORS;
    cudnnStatus_t st =
        ca->create_desc(backward ? CUDNN_BACKEND_OPERATION_SDPA_BWD_DESCRIPTOR : CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR,
                        &b->op);
    if (st != CUDNN_STATUS_SUCCESS) {
        b->op = NULL;
        return fail(ca, TR_CUDNN_EGRAPH, st, "SDPA operation descriptor", err, err_len);
    }
    const cudnnBackendAttributeType_t D = CUDNN_TYPE_BACKEND_DESCRIPTOR;
    if (!backward) {
        SET_(b->op, CUDNN_ATTR_OPERATION_SDPA_FWD_QDESC, D, 1, &b->t[UID_Q], "SDPA forward Q");
        SET_(b->op, CUDNN_ATTR_OPERATION_SDPA_FWD_KDESC, D, 1, &b->t[UID_K], "SDPA forward K");
        SET_(b->op, CUDNN_ATTR_OPERATION_SDPA_FWD_VDESC, D, 1, &b->t[UID_V], "SDPA forward V");
        SET_(b->op, CUDNN_ATTR_OPERATION_SDPA_FWD_ODESC, D, 1, &b->t[UID_O], "SDPA forward O");
        SET_(b->op, CUDNN_ATTR_OPERATION_SDPA_FWD_STATSDESC, D, 1, &b->t[UID_STATS], "SDPA forward stats");
        SET_(b->op, CUDNN_ATTR_OPERATION_SDPA_FWD_SCALEDESC, D, 1, &b->t[UID_SCALE], "SDPA forward scale");
    } else {
        SET_(b->op, CUDNN_ATTR_OPERATION_SDPA_BWD_QDESC, D, 1, &b->t[UID_Q], "SDPA backward Q");
        SET_(b->op, CUDNN_ATTR_OPERATION_SDPA_BWD_KDESC, D, 1, &b->t[UID_K], "SDPA backward K");
        SET_(b->op, CUDNN_ATTR_OPERATION_SDPA_BWD_VDESC, D, 1, &b->t[UID_V], "SDPA backward V");
        SET_(b->op, CUDNN_ATTR_OPERATION_SDPA_BWD_ODESC, D, 1, &b->t[UID_O], "SDPA backward O");
        SET_(b->op, CUDNN_ATTR_OPERATION_SDPA_BWD_STATSDESC, D, 1, &b->t[UID_STATS], "SDPA backward stats");
        SET_(b->op, CUDNN_ATTR_OPERATION_SDPA_BWD_SCALEDESC, D, 1, &b->t[UID_SCALE], "SDPA backward scale");
        SET_(b->op, CUDNN_ATTR_OPERATION_SDPA_BWD_DODDESC, D, 1, &b->t[UID_DO], "SDPA backward dO");
        SET_(b->op, CUDNN_ATTR_OPERATION_SDPA_BWD_DQDESC, D, 1, &b->t[UID_DQ], "SDPA backward dQ");
        SET_(b->op, CUDNN_ATTR_OPERATION_SDPA_BWD_DKDESC, D, 1, &b->t[UID_DK], "SDPA backward dK");
        SET_(b->op, CUDNN_ATTR_OPERATION_SDPA_BWD_DVDESC, D, 1, &b->t[UID_DV], "SDPA backward dV");
    }
    if ((st = ca->finalize(b->op)) != CUDNN_STATUS_SUCCESS)
        return fail(ca, TR_CUDNN_EGRAPH, st, backward ? "SDPA backward finalize" : "SDPA forward finalize", err,
                    err_len);
    *stage = TR_CUDNN_STAGE_OP;
    if ((st = ca->create_desc(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, &b->graph)) != CUDNN_STATUS_SUCCESS) {
        b->graph = NULL;
        return fail(ca, TR_CUDNN_EGRAPH, st, "operation graph descriptor", err, err_len);
    }
    if (ca->handle) SET_(b->graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &ca->handle, "graph handle");
    SET_(b->graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, D, 1, &b->op, "graph operations");
    if ((st = ca->finalize(b->graph)) != CUDNN_STATUS_SUCCESS && backward) {
        /* a cuDNN whose graphs do not take the SDPA backward operation (9.19): the composite graph */
        char why[512];
        fail(ca, TR_CUDNN_EGRAPH, st, "operation graph of the SDPA backward finalize", why, sizeof why);
        ca->destroy_desc(b->graph), ca->destroy_desc(b->op);
        b->graph = b->op = NULL;
        if ((rc = composite_backward(ca, d, t16, b, err, err_len))) {
            size_t n = strlen(err);
            snprintf(err + n, err_len > n ? err_len - n : 0, " (after %s)", why);
            return rc;
        }
        *stage = TR_CUDNN_STAGE_GRAPH;
        return 0;
    }
    if (st != CUDNN_STATUS_SUCCESS)
        return fail(ca, TR_CUDNN_EGRAPH, st,
                    backward ? "operation graph of the SDPA backward finalize" : "operation graph of the SDPA forward finalize",
                    err, err_len);
    *stage = TR_CUDNN_STAGE_GRAPH;
    return 0;
}

/* 1 when the engine of config cfg carries the numerical note
 * NONDETERMINISTIC, 0 when not, -1 when its notes cannot be read */
static int nondeterministic(tr_cudnn_attn *ca, desc_t cfg)
{
    desc_t eng = NULL;
    if (ca->create_desc(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &eng) != CUDNN_STATUS_SUCCESS) return -1;
    int64_t n = 0;
    cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT + 8];
    int r = -1;
    if (ca->get_attr(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &eng) ==
            CUDNN_STATUS_SUCCESS &&
        ca->get_attr(eng, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                     (int64_t)(sizeof notes / sizeof *notes), &n, notes) == CUDNN_STATUS_SUCCESS) {
        r = 0;
        for (int64_t i = 0; i < n && i < (int64_t)(sizeof notes / sizeof *notes); i++)
            if (notes[i] == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC) r = 1;
    }
    ca->destroy_desc(eng);
    return r;
}

/* The first of the heuristics' engine configs for graph that is
 * deterministic (unless the flag), makes a plan, and needs at most bound
 * bytes of workspace. */
static int make_plan_mode(tr_cudnn_attn *ca, desc_t graph, cudnnBackendHeurMode_t mode, size_t bound, desc_t *plan,
                          int64_t *ws, char *err, size_t err_len)
{
    *plan = NULL;
    desc_t heur = NULL;
    cudnnStatus_t st = ca->create_desc(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, &heur);
    if (st != CUDNN_STATUS_SUCCESS) return fail(ca, TR_CUDNN_EPLAN, st, "heuristics descriptor", err, err_len);
    int64_t count = 0;
    desc_t *cfgs = NULL;
    int rc = 0;
    if ((st = ca->set_attr(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph)) ||
        (st = ca->set_attr(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode)) ||
        (st = ca->finalize(heur)) ||
        (st = ca->get_attr(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, NULL))) {
        rc = fail(ca, TR_CUDNN_EPLAN, st, "heuristics", err, err_len);
        goto out;
    }
    if (count < 1) {
        snprintf(err, err_len, "cuDNN %zu: the heuristics (mode %s) offer no engine for this call", ca->version,
                 mode == CUDNN_HEUR_MODE_A ? "A" : "fallback");
        rc = TR_CUDNN_EPLAN;
        goto out;
    }
    if (!(cfgs = calloc((size_t)count, sizeof *cfgs))) {
        snprintf(err, err_len, "cuDNN attention: out of memory");
        rc = TR_CUDNN_ENOMEM;
        goto out;
    }
    int64_t made = 0;
    for (; made < count; made++)
        if (ca->create_desc(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &cfgs[made]) != CUDNN_STATUS_SUCCESS) break;
    int64_t got = 0;
    if ((st = ca->get_attr(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, made, &got, cfgs))) {
        rc = fail(ca, TR_CUDNN_EPLAN, st, "heuristics' results", err, err_len);
        count = made;
        goto out;
    }
    int n_nondet = 0, n_over = 0, n_fail = 0;
    int64_t least_over = -1;
    for (int64_t i = 0; i < got && i < made && !*plan; i++) {
        if (!(ca->flags & TR_CUDNN_NONDETERMINISTIC) && nondeterministic(ca, cfgs[i]) != 0) {
            n_nondet++;
            continue;
        }
        desc_t p = NULL;
        if (ca->create_desc(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &p) != CUDNN_STATUS_SUCCESS) {
            n_fail++;
            continue;
        }
        int64_t w = 0, nw = 0;
        if (ca->set_attr(p, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &ca->handle) ||
            ca->set_attr(p, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfgs[i]) ||
            ca->finalize(p) ||
            ca->get_attr(p, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &nw, &w) || w < 0) {
            n_fail++;
            ca->destroy_desc(p);
            continue;
        }
        if ((uint64_t)w > bound) {
            n_over++;
            if (least_over < 0 || w < least_over) least_over = w;
            ca->destroy_desc(p);
            continue;
        }
        *plan = p, *ws = w;
    }
    if (!*plan) {
        snprintf(err, err_len, "cuDNN %zu: none of %lld engines (heuristics %s) made a plan (%d non-deterministic, "
                 "%d over the "
                      "workspace bound %zu bytes%s%lld, %d refused)", ca->version, (long long)got,
                      mode == CUDNN_HEUR_MODE_A ? "A" : "fallback", n_nondet, n_over,
                      bound, least_over >= 0 ? ", least over " : "", least_over >= 0 ? (long long)least_over : 0LL,
                      n_fail);
        rc = TR_CUDNN_EPLAN;
    }
out:
    if (cfgs)
        for (int64_t i = 0; i < count; i++)
            if (cfgs[i]) ca->destroy_desc(cfgs[i]);
    free(cfgs);
    ca->destroy_desc(heur);
    return rc;
}

/* Mode A's engines, then the fallback list's when none of A's made a plan
 * (the message then says both). */
static int make_plan(tr_cudnn_attn *ca, desc_t graph, size_t bound, desc_t *plan, int64_t *ws, char *err,
                     size_t err_len)
{
    char first[512];
    int rc = make_plan_mode(ca, graph, CUDNN_HEUR_MODE_A, bound, plan, ws, first, sizeof first);
    if (rc != TR_CUDNN_EPLAN) {
        if (rc) snprintf(err, err_len, "%s", first);
        return rc;
    }
    char second[512];
    rc = make_plan_mode(ca, graph, CUDNN_HEUR_MODE_FALLBACK, bound, plan, ws, second, sizeof second);
    if (rc) snprintf(err, err_len, "%s; %s", first, second);
    return rc;
}

/* Bytes at the start of the caller's workspace that the composite
 * backward keeps its rows' sum(dO * O) in (256-byte aligned); cuDNN's
 * workspace follows. */
static size_t ssum_bytes(const tr_attn_dims *d)
{
    size_t n = (size_t)d->N * (size_t)d->heads * (size_t)d->Tq * sizeof(float);
    return (n + 255) / 256 * 256;
}

/* The workspace bound left to cuDNN's engines for a call built as b */
static size_t engine_bound(const tr_attn_dims *d, int backward, const built *b)
{
    size_t bound = tr_cudnn_attn_workspace_bound(d, backward), own = b->composite ? ssum_bytes(d) : 0;
    return bound > own ? bound - own : 0;
}

int tr_cudnn_attn_graph(tr_cudnn_attn *ca, const tr_attn_dims *d, int dt, int backward, int *stage, int *composite,
                        char *err, size_t err_len)
{
    built b;
    int rc = build(ca, d, dt, backward, &b, stage, err, err_len);
    if (composite) *composite = b.composite;
    if (!rc && ca->handle) {
        desc_t plan;
        int64_t ws;
        if (!(rc = make_plan(ca, b.graph, engine_bound(d, backward, &b), &plan, &ws, err, err_len))) {
            *stage = TR_CUDNN_STAGE_PLAN;
            ca->destroy_desc(plan);
        }
    }
    unbuild(ca, &b);
    return rc;
}

static int same_dims(const tr_attn_dims *a, const tr_attn_dims *b)
{
    return a->N == b->N && a->Tq == b->Tq && a->Tk == b->Tk && a->heads == b->heads && a->dh == b->dh &&
           a->ldq == b->ldq && a->ldk == b->ldk && a->ldv == b->ldv && a->ldo == b->ldo && a->sq == b->sq &&
           a->sk == b->sk && a->sv == b->sv && a->so == b->so;
}

/* The cached plan of the call, made on first use. */
static int plan_of(tr_cudnn_attn *ca, const tr_attn_dims *d, int dt, int backward, plan_entry **out, char *err,
                   size_t err_len)
{
    for (size_t i = 0; i < ca->n_plans; i++) {
        plan_entry *e = &ca->plans[i];
        if (e->dt == dt && e->backward == backward && same_dims(&e->d, d)) {
            if (e->rc) return snprintf(err, err_len, "%s", e->why), e->rc; /* refused before: not asked again */
            return *out = e, 0;
        }
    }
    if (!ca->handle)
        return snprintf(err, err_len, "cuDNN attention opened without a handle (TR_CUDNN_NO_HANDLE)"),
               TR_CUDNN_EHANDLE;
    if (ca->n_plans == ca->cap_plans) {
        size_t cap = ca->cap_plans ? 2 * ca->cap_plans : 8;
        plan_entry *p = realloc(ca->plans, cap * sizeof *p);
        if (!p) return snprintf(err, err_len, "cuDNN attention: out of memory"), TR_CUDNN_ENOMEM;
        ca->plans = p, ca->cap_plans = cap;
    }
    built b;
    int stage;
    plan_entry e = {.d = *d, .dt = dt, .backward = backward};
    int rc = build(ca, d, dt, backward, &b, &stage, err, err_len);
    if (!rc) rc = make_plan(ca, b.graph, engine_bound(d, backward, &b), &e.plan, &e.ws, err, err_len);
    e.composite = b.composite;
    e.ssum_off = b.composite ? ssum_bytes(d) : 0;
    unbuild(ca, &b);
    if (rc) { /* kept, so that each call of the shape does not ask the heuristics again */
        e.rc = rc, e.plan = NULL;
        snprintf(e.why, sizeof e.why, "%s", err);
        ca->plans[ca->n_plans++] = e;
        return rc;
    }
    ca->plans[ca->n_plans] = e;
    *out = &ca->plans[ca->n_plans++];
    return 0;
}

static int run(tr_cudnn_attn *ca, plan_entry *e, int n, const int64_t *uids, void *const *ptrs, void *ws,
               size_t ws_bytes, char *err, size_t err_len)
{
    for (int i = 0; i < n; i++)
        if (uids[i] != UID_SCALE && ((uintptr_t)ptrs[i] % 16 || !ptrs[i]))
            return snprintf(err, err_len, "cuDNN attention: operand %d at %p not 16-byte aligned", i, ptrs[i]),
                   TR_CUDNN_EARG;
    if ((uint64_t)e->ws + e->ssum_off > ws_bytes || (e->ws + (int64_t)e->ssum_off > 0 && !ws))
        return snprintf(err, err_len, "cuDNN attention: the plan takes %llu bytes of workspace, given %zu",
                        (unsigned long long)e->ws + e->ssum_off, ws_bytes),
               TR_CUDNN_EARG;
    if (e->composite) ws = (char *)ws + e->ssum_off; /* the rows' sums first (backward) */
    desc_t vp = NULL;
    cudnnStatus_t st = ca->create_desc(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &vp);
    if (st != CUDNN_STATUS_SUCCESS) return fail(ca, TR_CUDNN_EEXEC, st, "variant pack", err, err_len);
    int rc = 0;
    if ((st = ca->set_attr(vp, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n, uids)) ||
        (st = ca->set_attr(vp, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, n, ptrs)) ||
        (st = ca->set_attr(vp, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws)) ||
        (st = ca->finalize(vp)))
        rc = fail(ca, TR_CUDNN_EEXEC, st, "variant pack", err, err_len);
    else if ((st = ca->execute(ca->handle, e->plan, vp)) != CUDNN_STATUS_SUCCESS)
        rc = fail(ca, TR_CUDNN_EEXEC, st, "execute", err, err_len);
    ca->destroy_desc(vp);
    return rc;
}

int tr_cudnn_attn_forward(tr_cudnn_attn *ca, const tr_attn_dims *d, int dt, void *out, float *stats,
                          const void *q, const void *k, const void *v, void *ws, size_t ws_bytes, char *err,
                          size_t err_len)
{
    plan_entry *e;
    int rc = plan_of(ca, d, dt, 0, &e, err, err_len);
    if (rc) return rc;
    float scale = 1.0f / sqrtf((float)d->dh);
    const int64_t uids[] = {UID_Q, UID_K, UID_V, UID_O, UID_STATS, UID_SCALE};
    void *const ptrs[] = {(void *)q, (void *)k, (void *)v, out, stats, &scale};
    return run(ca, e, 6, uids, ptrs, ws, ws_bytes, err, err_len);
}

int tr_cudnn_attn_backward(tr_cudnn_attn *ca, const tr_attn_dims *d, int dt, void *dq, void *dk, void *dv,
                           const void *dout, const void *q, const void *k, const void *v, const void *out,
                           const float *stats, void *ws, size_t ws_bytes, char *err, size_t err_len)
{
    plan_entry *e;
    int rc = plan_of(ca, d, dt, 1, &e, err, err_len);
    if (rc) return rc;
    float scale = 1.0f / sqrtf((float)d->dh);
    const int64_t uids[] = {UID_Q, UID_K, UID_V, UID_O, UID_STATS, UID_SCALE, UID_DO, UID_DQ, UID_DK, UID_DV, UID_SSUM};
    void *const ptrs[] = {(void *)q, (void *)k, (void *)v, (void *)out, (void *)stats, &scale, (void *)dout,
                          dq, dk, dv, ws};
    /* the composite graph's rows' sums: the start of the workspace */
    return run(ca, e, e->composite ? 11 : 10, uids, ptrs, ws, ws_bytes, err, err_len);
}
