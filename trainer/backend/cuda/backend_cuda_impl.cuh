// backend_cuda_impl.cuh - what the CUDA backend's translation units share
// (backend_cuda.cu: memory, GEMMs, every op but attention, the backend;
// backend_cuda_attn.cu: the fused and blocked attentions;
// backend_cuda_flash.cu: the flash attention; backend_cuda_prof.cu: the
// profiler): the backend's struct, cuBLAS's entry points, the error record,
// typed elements and the reductions every kernel uses.  Internal to those
// files.
#ifndef SA1B_TRAINER_BACKEND_CUDA_IMPL_CUH
#define SA1B_TRAINER_BACKEND_CUDA_IMPL_CUH

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>

extern "C" {
#include "backend/backend.h"
}

namespace sa1b_cuda {

// cuBLAS, loaded when the backend starts (its libraries are 600 MB of
// address space that a CPU run must not map: ulimit -v)
struct blas_api {
    void *lib;
    decltype(&cublasCreate_v2) create;
    decltype(&cublasDestroy_v2) destroy;
    decltype(&cublasSetStream_v2) set_stream;
    decltype(&cublasSetMathMode) set_math_mode;
    // the C entry point (C++ also sees an inline overload taking cudaDataType)
    cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void *,
                              const void *, cudaDataType, int, const void *, cudaDataType, int, const void *, void *,
                              cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
    cublasStatus_t (*gemm_sb)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void *,
                              const void *, cudaDataType, int, long long, const void *, cudaDataType, int, long long,
                              const void *, void *, cudaDataType, int, long long, int, cublasComputeType_t,
                              cublasGemmAlgo_t);
    decltype(&cublasGetStatusString) status_string;
};

struct attn_state; // auto's table and cuDNN's handle (backend_cuda_attn_check.cu)

struct cuda_backend {
    tr_backend be;        // first: free(cb) frees it
    tr_ops ops;
    tr_mem host;          // pinned host memory (be.host_mem)
    cudaStream_t st;
    blas_api api;
    cublasHandle_t blas;
    double *band;         // CS_CAP doubles: the first pass of the column sums
    int attn_mode;        // TR_CUDA_ATTN_*: --attention / SA1B_CUDA_ATTN (auto: attn_tab, else the rule)
    struct attn_state *attn; // auto's paths by shape, cuDNN's handle (backend_cuda_attn_check.cu); NULL: none yet
    int sync_each;        // SA1B_CUDA_SYNC set: every launch waits, so a fault names its kernel
    int device;           // the GPU it runs on (the loader threads' pinned hooks set it)
    struct prof_state *prof; // SA1B_CUDA_PROFILE set: the events of backend_cuda_prof.cu
    int failed;
    char err[320];
};

// The profile (tr_backend_opts.profile, SA1B_CUDA_PROFILE=FILE;
// backend_cuda_prof.cu): an event after every launch (prof_mark) and GEMM
// (prof_gemm, by shape), the device time between them summed by call site,
// the table written to FILE when the backend is freed.  prof_open: 0
// (nothing to do without a file), or -1 when its events cannot be made.
int prof_open(cuda_backend *c, const char *path);
void prof_mark(cuda_backend *c, const char *name, const char *file, int line);
void prof_gemm(cuda_backend *c, const char *name, const char *file, int line, int M, int N, int K, int batch);
void prof_close(cuda_backend *c);

inline cuda_backend *CB(tr_backend *be) { return reinterpret_cast<cuda_backend *>(be); }

// ---- errors ------------------------------------------------------------------

inline void record(cuda_backend *c, const char *file, int line, const char *what, const char *msg)
{
    if (c->failed) return;
    c->failed = 1;
    snprintf(c->err, sizeof c->err, "%s:%d: %s: %s", file, line, what, msg);
}

inline int ck_cuda(cuda_backend *c, cudaError_t e, const char *what, const char *file, int line)
{
    if (e == cudaSuccess) return 0;
    record(c, file, line, what, cudaGetErrorString(e));
    return -1;
}

inline int ck_blas(cuda_backend *c, cublasStatus_t s, const char *what, const char *file, int line)
{
    if (s == CUBLAS_STATUS_SUCCESS) return 0;
    record(c, file, line, what, c->api.status_string(s));
    return -1;
}

#define CK(c, call) ck_cuda((c), (call), #call, __FILE__, __LINE__)
#define CKB(c, call) ck_blas((c), (call), #call, __FILE__, __LINE__)
// after a kernel launch: a bad configuration shows here, a fault later
// (at once, named, with SA1B_CUDA_SYNC in the environment: a debugging aid)
inline int launched(cuda_backend *c, const char *name, const char *file, int line)
{
    if (ck_cuda(c, cudaGetLastError(), name, file, line)) return -1;
    if (c->prof) prof_mark(c, name, file, line);
    return c->sync_each ? ck_cuda(c, cudaStreamSynchronize(c->st), name, file, line) : 0;
}
#define LAUNCHED(c, name) launched((c), (name), __FILE__, __LINE__)
#define UNSUPPORTED(c, ...)                                                                  \
    do {                                                                                     \
        char m_[160];                                                                        \
        snprintf(m_, sizeof m_, __VA_ARGS__);                                                \
        record((c), __FILE__, __LINE__, "unsupported", m_);                                  \
    } while (0)

// ---- typed elements ------------------------------------------------------------

__device__ __forceinline__ float ldt(tr_ten t, size_t i)
{
    if (t.dt == TR_PREC_FP32) return static_cast<const float *>(t.p)[i];
    return tr_from_16(static_cast<const uint16_t *>(t.p)[i], t.dt);
}

__device__ __forceinline__ void stt(tr_ten t, size_t i, float x)
{
    if (t.dt == TR_PREC_FP32) static_cast<float *>(t.p)[i] = x;
    else static_cast<uint16_t *>(t.p)[i] = tr_to_16(x, t.dt);
}

__device__ __forceinline__ size_t gtid() { return blockIdx.x * (size_t)blockDim.x + threadIdx.x; }
__device__ __forceinline__ size_t gstride() { return (size_t)gridDim.x * blockDim.x; }

#define FOR_N(i, n) for (size_t i = gtid(); i < (n); i += gstride())

const int TPB = 256;

inline unsigned grid_for(size_t n)
{
    size_t g = (n + TPB - 1) / TPB;
    return (unsigned)(g < 1 ? 1 : g > 65535 * 16 ? 65535 * 16 : g);
}

// warp sums: the xor butterfly gives every lane the same bits
__device__ __forceinline__ float warp_sum(float v)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ double warp_sum_d(double v)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// A workspace; NULL when out of memory (recorded by the allocator: the
// model's step reports it).
inline void *work(tr_backend *be, size_t n_bytes) { return tr_mem_alloc_raw(&be->mem, TR_MEM_WORK, n_bytes); }

// ---- GEMM types, warps, block reductions ----------------------------------------

inline cudaDataType_t blas_type(int dt)
{
    return dt == TR_PREC_FP32 ? CUDA_R_32F : dt == TR_PREC_BF16 ? CUDA_R_16BF : CUDA_R_16F;
}

const int WPB = TPB / 32; // warps per block

__device__ __forceinline__ size_t warp_id() { return gtid() / 32; }

inline unsigned warp_grid(size_t rows) { return (unsigned)((rows + WPB - 1) / WPB); }

// the block's sum of v (every thread gets it); sh [TPB]
template <typename T>
__device__ T block_sum(T v, T *sh)
{
    sh[threadIdx.x] = v;
    __syncthreads();
    for (int o = TPB / 2; o > 0; o >>= 1) {
        if ((int)threadIdx.x < o) sh[threadIdx.x] += sh[threadIdx.x + o];
        __syncthreads();
    }
    T r = sh[0];
    __syncthreads();
    return r;
}

// ---- the attentions -----------------------------------------------------------
//
// Every path saves backend.h's statistics: the fp32 log-sum-exp of each
// query row, [N, heads, Tq] dense from att.p whatever att's type (cuDNN's
// Stats), and its backward takes P = exp(scale q.k - lse) from them and
// D = rowsum(dout * out) from the forward's output; dq, dk and dv written.

// the lse of query row t of (sequence, head) idx = n heads + j
__device__ __forceinline__ float *attn_lse(tr_ten att, const tr_attn_dims &d, size_t idx, int t)
{
    return static_cast<float *>(att.p) + idx * (size_t)d.Tq + t;
}

// backend_cuda_attn.cu
void cu_attention_forward(tr_backend *be, tr_ten out, tr_ten att, tr_ten q, tr_ten k, tr_ten v, const tr_attn_dims *d);
void cu_attention_backward(tr_backend *be, tr_ten dq, tr_ten dk, tr_ten dv, tr_ten dout, tr_ten out, tr_ten q,
                           tr_ten k, tr_ten v, tr_ten att, const tr_attn_dims *d);
// D [N, heads, Tq] (fp32, idx Tq + t) = rowsum(dout * out) of every head's
// query row, a warp a row (fixed-order sums), launched on c's stream
void attn_rowdot(cuda_backend *c, float *D, tr_ten dout, tr_ten out, const tr_attn_dims *d);
// backend_cuda_flash.cu (TR_CUDA_ATTN_FLASH): 1 when it took the call, 0 when it cannot
int flash_attn_forward(tr_backend *be, tr_ten out, tr_ten att, tr_ten q, tr_ten k, tr_ten v, const tr_attn_dims *d);
int flash_attn_backward(tr_backend *be, tr_ten dq, tr_ten dk, tr_ten dv, tr_ten dout, tr_ten out, tr_ten q, tr_ten k,
                        tr_ten v, tr_ten att, const tr_attn_dims *d);
// backend_cuda_attn_check.cu: the path of a call (TR_CUDA_ATTN_*: the forced
// one, auto's choice for its shape, or TR_CUDA_ATTN_AUTO: the rule)
int attn_mode_for(const cuda_backend *c, const tr_attn_dims *d, int dt);
// frees c->attn (cuDNN closed): cu_destroy
void attn_state_free(cuda_backend *c);
// the cuDNN path (TR_CUDA_ATTN_CUDNN, cudnn_attn.h), as flash's: 1 when it took
// the call, 0 when cuDNN is absent or declines it (the rule's path then)
int cudnn_attn_forward(tr_backend *be, tr_ten out, tr_ten att, tr_ten q, tr_ten k, tr_ten v, const tr_attn_dims *d);
int cudnn_attn_backward(tr_backend *be, tr_ten dq, tr_ten dk, tr_ten dv, tr_ten dout, tr_ten out, tr_ten q, tr_ten k,
                        tr_ten v, tr_ten att, const tr_attn_dims *d);

} // namespace sa1b_cuda

#endif
