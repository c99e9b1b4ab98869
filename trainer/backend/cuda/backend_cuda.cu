// backend_cuda.cu - the CUDA backend (backend.h): device memory through the
// accounting allocator (cudaMalloc behind tr_mem hooks, pinned host memory
// for the loader's batches), GEMMs through cuBLAS (loaded when the backend
// starts; cublasGemmEx: 16-bit inputs, fp32 compute, the output in its own
// type), and every other op of tr_ops as a kernel on one stream, reading and
// writing fp32, bf16 and fp16 operands as they are (widens16 = 0) and
// accumulating in fp32 (sums that feed a gradient or a statistic in double,
// in a fixed order: no float atomics anywhere, so two runs give the same
// bits).  The attention is backend_cuda_attn.cu's (and
// backend_cuda_flash.cu's), the profiler backend_cuda_prof.cu's; what the
// files share, backend_cuda_impl.cuh.
//
// Implements: column sums in two passes over bands of rows, the MODEL.md
// loss with per-pair partial sums reduced in pair order, AdamW and 8-bit
// AdamW (quant8.h).
//
// Errors: ops return void, so the first failing CUDA or cuBLAS call is
// recorded with its file:line and the library's message
// (be->error, backend_cuda.h); after it every op does nothing
// and download fills its destination with NaN bytes, so that the loss a
// step reads back is not finite and the step fails.  The library never
// prints.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>

extern "C" {
#include "backend_cuda.h"
}
#include "backend_cuda_impl.cuh"

extern "C" {
#include "common/quant8.h"
}

namespace sa1b_cuda {

#define STR2_(x) #x
#define STR_(x) STR2_(x)

// 0, or -1 with why in err
int blas_load(blas_api *b, char *err, size_t err_len)
{
    const char *names[] = {
#ifdef SA1B_CUDA_LIBDIR
        SA1B_CUDA_LIBDIR "/libcublas.so." STR_(CUBLAS_VER_MAJOR),
#endif
        "libcublas.so." STR_(CUBLAS_VER_MAJOR)};
    for (const char *n : names)
        if ((b->lib = dlopen(n, RTLD_NOW | RTLD_LOCAL))) break;
    if (!b->lib) {
        snprintf(err, err_len, "cannot load cuBLAS: %s", dlerror());
        return -1;
    }
    const char *missing = nullptr;
#define SYM_(field, name)                                                                       \
    if (!(b->field = reinterpret_cast<decltype(b->field)>(dlsym(b->lib, name))) && !missing) missing = name
    SYM_(create, "cublasCreate_v2");
    SYM_(destroy, "cublasDestroy_v2");
    SYM_(set_stream, "cublasSetStream_v2");
    SYM_(set_math_mode, "cublasSetMathMode");
    SYM_(gemm_ex, "cublasGemmEx");
    SYM_(gemm_sb, "cublasGemmStridedBatchedEx");
    SYM_(status_string, "cublasGetStatusString");
#undef SYM_
    if (missing) {
        snprintf(err, err_len, "cuBLAS has no %s", missing);
        dlclose(b->lib);
        b->lib = nullptr;
        return -1;
    }
    return 0;
}

// ---- memory --------------------------------------------------------------------

void *dev_alloc(void *ctx, size_t n)
{
    void *p = nullptr;
    cudaError_t e = cudaMalloc(&p, n);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        // an out of memory is the allocator's to report; any other error (a
        // fault an earlier kernel left) is recorded as itself, not as memory
        if (e != cudaErrorMemoryAllocation)
            record(static_cast<cuda_backend *>(ctx), __FILE__, __LINE__, "cudaMalloc", cudaGetErrorString(e));
        return nullptr;
    }
    return p;
}

void dev_free(void *ctx, void *p, size_t n)
{
    (void)n;
    CK(static_cast<cuda_backend *>(ctx), cudaFree(p));
}

void dev_zero(void *ctx, void *p, size_t n)
{
    cuda_backend *c = static_cast<cuda_backend *>(ctx);
    CK(c, cudaMemsetAsync(p, 0, n, c->st));
}

// The pinned hooks run on the loader's threads too, which have no current
// device: without cudaSetDevice the runtime would take device 0 and make a
// context there for every rank of a data-parallel job.
void *pinned_alloc(void *ctx, size_t n)
{
    (void)cudaSetDevice(static_cast<cuda_backend *>(ctx)->device);
    void *p = nullptr;
    if (cudaHostAlloc(&p, n, cudaHostAllocPortable) != cudaSuccess) {
        (void)cudaGetLastError();
        return nullptr;
    }
    return p;
}

void pinned_free(void *ctx, void *p, size_t n)
{
    (void)n;
    (void)cudaSetDevice(static_cast<cuda_backend *>(ctx)->device);
    cudaFreeHost(p); // from the loader's threads too: nothing to record there
}

void pinned_zero(void *ctx, void *p, size_t n)
{
    (void)ctx;
    memset(p, 0, n);
}

// ---- element-wise ----------------------------------------------------------------

enum { EW_GELU_F, EW_GELU_B, EW_RELU_F, EW_RELU_B, EW_ADD, EW_ACC, EW_ADD_BCAST, EW_CONVERT, EW_SCALE };

__global__ void k_ew(int kind, tr_ten o, tr_ten a, tr_ten b, size_t n, size_t row, float s)
{
    FOR_N(i, n)
    {
        float r;
        switch (kind) {
        case EW_GELU_F: r = tr_gelu(ldt(a, i)); break;
        case EW_GELU_B: r = ldt(o, i) + ldt(a, i) * tr_gelu_grad(ldt(b, i)); break;
        case EW_RELU_F: r = tr_relu(ldt(a, i)); break;
        case EW_RELU_B:
            if (!(ldt(b, i) > 0.0f)) continue;
            r = ldt(o, i) + ldt(a, i);
            break;
        case EW_ADD: r = ldt(a, i) + ldt(b, i); break;
        case EW_ACC: r = ldt(o, i) + ldt(a, i); break;
        case EW_ADD_BCAST: r = ldt(a, i) + ldt(b, i % row); break;
        case EW_SCALE: r = ldt(o, i) * s; break;
        default: r = ldt(a, i); break; // EW_CONVERT
        }
        stt(o, i, r);
    }
}

void ew(tr_backend *be, int kind, tr_ten o, tr_ten a, tr_ten b, size_t n, size_t row, float s)
{
    cuda_backend *c = CB(be);
    if (c->failed || n == 0) return;
    k_ew<<<grid_for(n), TPB, 0, c->st>>>(kind, o, a, b, n, row, s);
    LAUNCHED(c, "k_ew");
}

const tr_ten NONE = {nullptr, TR_PREC_FP32};

void cu_gelu_forward(tr_backend *be, tr_ten out, tr_ten inp, size_t n) { ew(be, EW_GELU_F, out, inp, NONE, n, 1, 0); }
void cu_gelu_backward(tr_backend *be, tr_ten dinp, tr_ten dout, tr_ten inp, size_t n)
{
    ew(be, EW_GELU_B, dinp, dout, inp, n, 1, 0);
}
void cu_relu_forward(tr_backend *be, tr_ten out, tr_ten inp, size_t n) { ew(be, EW_RELU_F, out, inp, NONE, n, 1, 0); }
void cu_relu_backward(tr_backend *be, tr_ten dinp, tr_ten dout, tr_ten inp, size_t n)
{
    ew(be, EW_RELU_B, dinp, dout, inp, n, 1, 0);
}
void cu_add(tr_backend *be, tr_ten out, tr_ten a, tr_ten b, size_t n) { ew(be, EW_ADD, out, a, b, n, 1, 0); }
void cu_accumulate(tr_backend *be, tr_ten dst, tr_ten src, size_t n) { ew(be, EW_ACC, dst, src, NONE, n, 1, 0); }
void cu_add_bcast(tr_backend *be, tr_ten out, tr_ten a, tr_ten b, size_t N, size_t n)
{
    ew(be, EW_ADD_BCAST, out, a, b, N * n, n, 0);
}
void cu_scale(tr_backend *be, float *g, size_t n, float s) { ew(be, EW_SCALE, tr_f32(g), NONE, NONE, n, 1, s); }

void cu_zero(tr_backend *be, tr_ten dst, size_t n)
{
    cuda_backend *c = CB(be);
    if (c->failed || n == 0) return;
    CK(c, cudaMemsetAsync(dst.p, 0, n * tr_prec_size(dst.dt), c->st));
}

void cu_convert(tr_backend *be, tr_ten dst, tr_ten src, size_t n)
{
    cuda_backend *c = CB(be);
    if (c->failed || n == 0) return;
    if (dst.dt == src.dt) {
        if (dst.p != src.p)
            CK(c, cudaMemcpyAsync(dst.p, src.p, n * tr_prec_size(dst.dt), cudaMemcpyDeviceToDevice, c->st));
        return;
    }
    ew(be, EW_CONVERT, dst, src, NONE, n, 1, 0);
}

// ---- host <-> device ---------------------------------------------------------------

void cu_upload(tr_backend *be, void *dst, const void *src, size_t n)
{
    cuda_backend *c = CB(be);
    if (c->failed || n == 0) return;
    if (CK(c, cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, c->st)) == 0) CK(c, cudaStreamSynchronize(c->st));
}

void cu_download(tr_backend *be, void *dst, const void *src, size_t n)
{
    cuda_backend *c = CB(be);
    if (n == 0) return;
    if (!c->failed && CK(c, cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, c->st)) == 0 &&
        CK(c, cudaStreamSynchronize(c->st)) == 0)
        return;
    memset(dst, 0xff, n); // NaN for floats and doubles: what was computed is lost
}

// ---- GEMM ------------------------------------------------------------------------


// The span of a row-major matrix of `rows` rows of `cols` at stride ld, in elements.
size_t span(int rows, int cols, int ld) { return rows > 0 ? (size_t)(rows - 1) * ld + (size_t)cols : 0; }

// t widened to fp32 over n elements into a workspace (t itself when fp32); NULL when out of memory.
float *widened(tr_backend *be, tr_ten t, size_t n, float **owned)
{
    *owned = nullptr;
    if (t.dt == TR_PREC_FP32) return static_cast<float *>(t.p);
    if (!(*owned = static_cast<float *>(work(be, n * sizeof(float))))) return nullptr;
    cu_convert(be, tr_f32(*owned), t, n);
    return *owned;
}

// C[M,N] = alpha op(A) op(B) + beta C, row-major, typed.  cuBLAS takes
// A and B of one type with C of that type or fp32; other mixes widen the
// 16-bit operands to fp32 workspaces (and narrow C back).
void gemm_t(tr_backend *be, int ta, int tb, int M, int N, int K, float alpha, tr_ten A, int lda, tr_ten B,
            int ldb, float beta, tr_ten C, int ldc)
{
    cuda_backend *c = CB(be);
    if (c->failed || M <= 0 || N <= 0) return;
    if (K == 0 && beta == 1.0f) return; // C = beta C, as the CPU's (a gradient over no rows)
    if (K <= 0) {
        UNSUPPORTED(c, "GEMM with K = %d (beta %g)", K, (double)beta);
        return;
    }
    if (A.dt == B.dt && (C.dt == A.dt || C.dt == TR_PREC_FP32)) {
        // row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T
        CKB(c, c->api.gemm_ex(c->blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K,
                            &alpha, B.p, blas_type(B.dt), ldb, A.p, blas_type(A.dt), lda, &beta, C.p,
                            blas_type(C.dt), ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        if (c->prof) prof_gemm(c, "gemm", __FILE__, __LINE__, M, N, K, 1);
        return;
    }
    size_t na = ta ? span(K, M, lda) : span(M, K, lda), nb = tb ? span(N, K, ldb) : span(K, N, ldb);
    size_t nc = span(M, N, ldc);
    float *oa, *ob, *oc = nullptr;
    float *a = widened(be, A, na, &oa), *b = a ? widened(be, B, nb, &ob) : (ob = nullptr, nullptr);
    float *cc = nullptr;
    if (a && b) {
        if (C.dt == TR_PREC_FP32) cc = static_cast<float *>(C.p);
        else if ((cc = oc = static_cast<float *>(work(be, nc * sizeof(float)))))
            cu_convert(be, tr_f32(oc), C, nc); // the gaps between rows too (ldc > N): written back as they were
    }
    if (cc) {
        gemm_t(be, ta, tb, M, N, K, alpha, tr_f32(a), lda, tr_f32(b), ldb, beta, tr_f32(cc), ldc);
        if (oc) cu_convert(be, C, tr_f32(oc), nc);
    }
    tr_mem_free(&be->mem, oa);
    tr_mem_free(&be->mem, ob);
    tr_mem_free(&be->mem, oc);
}

void cu_gemm(tr_backend *be, int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
             const float *B, int ldb, float beta, float *C, int ldc)
{
    gemm_t(be, ta, tb, M, N, K, alpha, tr_f32(A), lda, tr_f32(B), ldb, beta, tr_f32(C), ldc);
}

// ---- column sums: out[c] += sum over rows of x[r*ld + c], in double ----------------
//
// Two passes, the order of every sum fixed by the shape alone (the same
// bits on every run): blocks of CS_X columns by CS_Y row lanes each sum a
// band of rows [rows p / P, rows (p + 1) / P) into band[p][c] (lane y
// takes every CS_Y-th row, then the lanes are added in order); one thread
// per column adds the P bands.  band is the backend's own buffer of
// CS_CAP doubles (cuda_backend.band), taken once at the start like cuBLAS's
// workspace.

const int CS_X = 32, CS_Y = 8;
const size_t CS_ROWS = 512;             // rows per band at the least
const size_t CS_CAP = (size_t)1 << 20;  // doubles in the band buffer (8 MiB)
// bands at the most: the second pass adds P bands one after the other in a
// thread per column (a narrow sum over 16 M rows, the base preset's last
// bias gradient, had 32768 of them); 2048 blocks still fill the GPU
const size_t CS_PMAX = 2048;

// bands for rows rows of width doubles each (P * width <= CS_CAP); 0: too wide
int colsum_bands(size_t rows, size_t width)
{
    if (width == 0 || width > CS_CAP) return 0;
    size_t p = (rows + CS_ROWS - 1) / CS_ROWS, cap = CS_CAP / width;
    if (p > cap) p = cap;
    if (p > CS_PMAX) p = CS_PMAX; // (and gridDim.y <= 65535)
    return p < 1 ? 1 : (int)p;
}

__global__ void k_colsum_band(double *band, tr_ten x, size_t rows, int C, int ld, int P)
{
    __shared__ double sh[CS_Y][CS_X];
    int tx = threadIdx.x, ty = threadIdx.y, p = blockIdx.y;
    size_t col = (size_t)blockIdx.x * CS_X + tx, r1 = rows * (p + 1) / P;
    double s = 0.0;
    if (col < (size_t)C)
        for (size_t r = rows * p / P + ty; r < r1; r += CS_Y) s += ldt(x, r * ld + col);
    sh[ty][tx] = s;
    __syncthreads();
    if (ty == 0 && col < (size_t)C) {
        double t = 0.0;
        for (int y = 0; y < CS_Y; y++) t += sh[y][tx];
        band[(size_t)p * C + col] = t;
    }
}

// out[c] += the sum of the P bands (out NULL: skipped), bands of stride width
__global__ void k_colsum_fin(float *out, const double *band, int C, size_t width, int P)
{
    FOR_N(col, (size_t)C)
    {
        double s = 0.0;
        for (int p = 0; p < P; p++) s += band[(size_t)p * width + col];
        if (out) out[col] += (float)s;
    }
}

void colsum_add(tr_backend *be, float *out, tr_ten x, size_t rows, int C, int ld)
{
    cuda_backend *c = CB(be);
    if (c->failed || C <= 0) return;
    int P = colsum_bands(rows, (size_t)C);
    if (!P) {
        UNSUPPORTED(c, "column sums over %d columns", C);
        return;
    }
    k_colsum_band<<<dim3((unsigned)((C + CS_X - 1) / CS_X), (unsigned)P), dim3(CS_X, CS_Y), 0, c->st>>>(
        c->band, x, rows, C, ld, P);
    LAUNCHED(c, "k_colsum_band");
    k_colsum_fin<<<grid_for((size_t)C), TPB, 0, c->st>>>(out, c->band, C, (size_t)C, P);
    LAUNCHED(c, "k_colsum_fin");
}

// ---- linear ------------------------------------------------------------------------

__global__ void k_bias_rows(tr_ten out, tr_ten b, size_t N, size_t O)
{
    FOR_N(i, N * O) stt(out, i, ldt(b, i % O));
}

// out = inp w^T + b, the bias and the products summed in fp32 and rounded
// once: the bias goes into out first (exact when it has out's type, as the
// model's do) and the GEMM adds to it (beta 1); a bias of another type
// than a 16-bit out sums in an fp32 workspace.
void cu_linear_forward(tr_backend *be, tr_ten out, tr_ten inp, tr_ten w, tr_ten b, int N, int I, int O)
{
    cuda_backend *c = CB(be);
    if (c->failed) return;
    if (!b.p) {
        gemm_t(be, 0, 1, N, O, I, 1.0f, inp, I, w, I, 0.0f, out, O);
        return;
    }
    size_t n = (size_t)N * O;
    tr_ten acc = out;
    if (b.dt != out.dt && out.dt != TR_PREC_FP32 && !(acc.p = work(be, n * sizeof(float)))) return;
    if (acc.p != out.p) acc.dt = TR_PREC_FP32;
    k_bias_rows<<<grid_for(n), TPB, 0, c->st>>>(acc, b, (size_t)N, (size_t)O);
    LAUNCHED(c, "k_bias_rows");
    gemm_t(be, 0, 1, N, O, I, 1.0f, inp, I, w, I, 1.0f, acc, O);
    if (acc.p != out.p) {
        cu_convert(be, out, acc, n);
        tr_mem_free(&be->mem, acc.p);
    }
}

void cu_linear_backward(tr_backend *be, tr_ten dinp, float *dw, float *db, tr_ten dout, tr_ten inp, tr_ten w,
                        int N, int I, int O)
{
    if (dinp.p) gemm_t(be, 0, 0, N, I, O, 1.0f, dout, O, w, I, 1.0f, dinp, I);
    if (dw) gemm_t(be, 1, 0, O, I, N, 1.0f, dout, O, inp, I, 1.0f, tr_f32(dw), I);
    if (db) colsum_add(be, db, dout, (size_t)N, O, O);
}

// ---- LayerNorm: one warp per row, statistics in double as kernels.h ---------------

__global__ void k_ln_fwd(tr_ten out, float *mean, float *rstd, tr_ten inp, tr_ten w, tr_ten b, int N, int C,
                         float eps)
{
    size_t row = warp_id();
    int lane = threadIdx.x % 32;
    if (row >= (size_t)N) return;
    size_t o = row * C;
    double s = 0.0;
    for (int i = lane; i < C; i += 32) s += ldt(inp, o + i);
    double mu = warp_sum_d(s) / C, v = 0.0;
    for (int i = lane; i < C; i += 32) {
        double d = ldt(inp, o + i) - mu;
        v += d * d;
    }
    v = warp_sum_d(v) / C;
    float m = (float)mu, r = (float)(1.0 / sqrt(v + (double)eps));
    if (lane == 0) mean[row] = m, rstd[row] = r;
    if (out.p)
        for (int i = lane; i < C; i += 32) stt(out, o + i, (ldt(inp, o + i) - m) * r * ldt(w, i) + ldt(b, i));
}



void cu_layernorm_forward(tr_backend *be, tr_ten out, float *mean, float *rstd, tr_ten inp, tr_ten w, tr_ten b,
                          int N, int C, float eps)
{
    cuda_backend *c = CB(be);
    if (c->failed || N <= 0) return;
    k_ln_fwd<<<warp_grid((size_t)N), TPB, 0, c->st>>>(out, mean, rstd, inp, w, b, N, C, eps);
    LAUNCHED(c, "k_ln_fwd");
}

void cu_layernorm_stats(tr_backend *be, float *mean, float *rstd, tr_ten inp, int N, int C, float eps)
{
    cu_layernorm_forward(be, NONE, mean, rstd, inp, NONE, NONE, N, C, eps);
}

__global__ void k_ln_bwd_dx(tr_ten dinp, tr_ten dout, tr_ten inp, tr_ten w, const float *mean, const float *rstd,
                            int N, int C)
{
    size_t row = warp_id();
    int lane = threadIdx.x % 32;
    if (row >= (size_t)N) return;
    size_t o = row * C;
    float m = mean[row], r = rstd[row];
    double sg = 0.0, sgx = 0.0;
    for (int i = lane; i < C; i += 32) {
        float xh = (ldt(inp, o + i) - m) * r, g = ldt(dout, o + i) * ldt(w, i);
        sg += g;
        sgx += (double)g * xh;
    }
    float mg = (float)(warp_sum_d(sg) / C), mgx = (float)(warp_sum_d(sgx) / C);
    for (int i = lane; i < C; i += 32) {
        float xh = (ldt(inp, o + i) - m) * r, g = ldt(dout, o + i) * ldt(w, i);
        stt(dinp, o + i, ldt(dinp, o + i) + r * (g - mg - xh * mgx));
    }
}

// band[p][c] = sum over band p's rows of dy (x - mean) rstd, band[p][C + c] =
// of dy: the first pass of the column sums above (widths 2C)
__global__ void k_ln_dw_band(double *band, tr_ten dout, tr_ten inp, const float *mean, const float *rstd, int N,
                             int C, int P)
{
    __shared__ double shw[CS_Y][CS_X], shb[CS_Y][CS_X];
    int tx = threadIdx.x, ty = threadIdx.y, p = blockIdx.y;
    size_t col = (size_t)blockIdx.x * CS_X + tx, n1 = (size_t)N * (p + 1) / P;
    double sw = 0.0, sb = 0.0;
    if (col < (size_t)C)
        for (size_t n = (size_t)N * p / P + ty; n < n1; n += CS_Y) {
            size_t i = n * C + col;
            float dy = ldt(dout, i);
            sw += (double)dy * ((ldt(inp, i) - mean[n]) * rstd[n]);
            sb += dy;
        }
    shw[ty][tx] = sw, shb[ty][tx] = sb;
    __syncthreads();
    if (ty == 0 && col < (size_t)C) {
        double tw = 0.0, tb = 0.0;
        for (int y = 0; y < CS_Y; y++) tw += shw[y][tx], tb += shb[y][tx];
        band[(size_t)p * 2 * C + col] = tw, band[(size_t)p * 2 * C + C + col] = tb;
    }
}

void cu_layernorm_backward(tr_backend *be, tr_ten dinp, float *dw, float *db, tr_ten dout, tr_ten inp, tr_ten w,
                           const float *mean, const float *rstd, int N, int C)
{
    cuda_backend *c = CB(be);
    if (c->failed || N <= 0) return;
    if (dinp.p) {
        k_ln_bwd_dx<<<warp_grid((size_t)N), TPB, 0, c->st>>>(dinp, dout, inp, w, mean, rstd, N, C);
        LAUNCHED(c, "k_ln_bwd_dx");
    }
    if (dw || db) {
        int P = colsum_bands((size_t)N, 2 * (size_t)C);
        if (!P) {
            UNSUPPORTED(c, "LayerNorm of %d columns", C);
            return;
        }
        k_ln_dw_band<<<dim3((unsigned)((C + CS_X - 1) / CS_X), (unsigned)P), dim3(CS_X, CS_Y), 0, c->st>>>(
            c->band, dout, inp, mean, rstd, N, C, P);
        LAUNCHED(c, "k_ln_dw_band");
        k_colsum_fin<<<grid_for((size_t)C), TPB, 0, c->st>>>(dw, c->band, C, 2 * (size_t)C, P);
        LAUNCHED(c, "k_colsum_fin");
        k_colsum_fin<<<grid_for((size_t)C), TPB, 0, c->st>>>(db, c->band + C, C, 2 * (size_t)C, P);
        LAUNCHED(c, "k_colsum_fin");
    }
}

// ---- ConvTranspose 2x2 stride 2 -----------------------------------------------------

// out [N, 2H*2W, Co] from scratch [N*H*W, 4 Co] (+ bias), or (gather) scratch from dout
__global__ void k_convt_scatter(tr_ten out, tr_ten scratch, tr_ten b, int N, int H, int W, int Co, int gather)
{
    size_t n_out = (size_t)N * 4 * H * W * Co;
    FOR_N(e, n_out)
    {
        int o = (int)(e % Co);
        size_t px = e / Co, n = px / ((size_t)4 * H * W), yx = px % ((size_t)4 * H * W);
        int y = (int)(yx / (2 * W)), x = (int)(yx % (2 * W));
        size_t pix = n * H * W + (size_t)(y / 2) * W + x / 2;
        size_t s = pix * 4 * Co + (size_t)o * 4 + (y % 2) * 2 + x % 2;
        if (gather) stt(scratch, s, ldt(out, e));
        else stt(out, e, ldt(scratch, s) + (b.p ? ldt(b, o) : 0.0f));
    }
}

void convt_scatter(cuda_backend *c, tr_ten out, tr_ten scratch, tr_ten b, int N, int H, int W, int Co, int gather)
{
    size_t n = (size_t)N * 4 * H * W * Co;
    if (c->failed || n == 0) return;
    k_convt_scatter<<<grid_for(n), TPB, 0, c->st>>>(out, scratch, b, N, H, W, Co, gather);
    LAUNCHED(c, "k_convt_scatter");
}

void cu_convt2x2_forward(tr_backend *be, tr_ten out, tr_ten inp, tr_ten w, tr_ten b, float *scratch, int N, int H,
                         int W, int Ci, int Co)
{
    int npix = N * H * W;
    gemm_t(be, 0, 0, npix, 4 * Co, Ci, 1.0f, inp, Ci, w, 4 * Co, 0.0f, tr_f32(scratch), 4 * Co);
    convt_scatter(CB(be), out, tr_f32(scratch), b, N, H, W, Co, 0);
}

// The gradient gathered into the scratch in dout's own type (exact; half
// of the scratch for 16 bits), so that both GEMMs take their operands as
// they are: no workspace beyond the scratch the planner counts.
void cu_convt2x2_backward(tr_backend *be, tr_ten dinp, float *dw, float *db, tr_ten dout, tr_ten inp, tr_ten w,
                          float *scratch, int N, int H, int W, int Ci, int Co)
{
    int npix = N * H * W;
    tr_ten sc = tr_typed(scratch, dout.dt);
    convt_scatter(CB(be), dout, sc, NONE, N, H, W, Co, 1);
    if (dinp.p) gemm_t(be, 0, 1, npix, Ci, 4 * Co, 1.0f, sc, 4 * Co, w, 4 * Co, 1.0f, dinp, Ci);
    if (dw) gemm_t(be, 1, 0, Ci, 4 * Co, npix, 1.0f, inp, Ci, sc, 4 * Co, 1.0f, tr_f32(dw), 4 * Co);
    if (db) colsum_add(be, db, dout, (size_t)npix * 4, Co, Co);
}

// ---- input ---------------------------------------------------------------------------

__device__ __forceinline__ float norm_px(const uint8_t *image, const int32_t *content, int b, int S, int y, int x,
                                         int ch)
{
    const float mean[3] = {0.485f, 0.456f, 0.406f}, sd[3] = {0.229f, 0.224f, 0.225f};
    if (x >= content[2 * b] || y >= content[2 * b + 1]) return 0.0f;
    float v = image[(((size_t)b * S + y) * S + x) * 3 + ch];
    return (v / 255.0f - mean[ch]) / sd[ch];
}

__global__ void k_im2col(tr_ten patches, const uint8_t *image, const int32_t *content, int B, int S, int P)
{
    int G = S / P, PP = P * P;
    FOR_N(e, (size_t)B * G * G * 3 * PP)
    {
        size_t row = e / (3 * PP);
        int col = (int)(e % (3 * PP)), ch = col / PP, py = col % PP / P, px = col % P;
        int img = (int)(row / ((size_t)G * G)), tok = (int)(row % ((size_t)G * G));
        stt(patches, e, norm_px(image, content, img, S, tok / G * P + py, tok % G * P + px, ch));
    }
}

__global__ void k_image_norm(tr_ten out, const uint8_t *image, const int32_t *content, int B, int S)
{
    FOR_N(e, (size_t)B * 3 * S * S)
    {
        int x = (int)(e % S), y = (int)(e / S % S), ch = (int)(e / ((size_t)S * S) % 3), b = (int)(e / ((size_t)3 * S * S));
        stt(out, e, norm_px(image, content, b, S, y, x, ch));
    }
}

void cu_patch_im2col(tr_backend *be, tr_ten patches, const uint8_t *image, const int32_t *content, int B, int S,
                     int P)
{
    cuda_backend *c = CB(be);
    size_t n = (size_t)B * (S / P) * (S / P) * 3 * P * P;
    if (c->failed || n == 0) return;
    k_im2col<<<grid_for(n), TPB, 0, c->st>>>(patches, image, content, B, S, P);
    LAUNCHED(c, "k_im2col");
}

void cu_image_normalize(tr_backend *be, tr_ten out, const uint8_t *image, const int32_t *content, int B, int S)
{
    cuda_backend *c = CB(be);
    size_t n = (size_t)B * 3 * S * S;
    if (c->failed || n == 0) return;
    k_image_norm<<<grid_for(n), TPB, 0, c->st>>>(out, image, content, B, S);
    LAUNCHED(c, "k_image_norm");
}

// ---- prompt encoder ------------------------------------------------------------------

// element c of PE(ux, uy) [C] (sines then cosines, in double as the CPU)
__device__ __forceinline__ float pe_elem(double ux, double uy, const float *gauss, int C, int c)
{
    int h = C / 2, j = c < h ? c : c - h;
    double z = 2.0 * M_PI * ((2.0 * ux - 1.0) * gauss[j] + (2.0 * uy - 1.0) * gauss[h + j]);
    return (float)(c < h ? sin(z) : cos(z));
}

__global__ void k_pe_dense(tr_ten out, const float *gauss, int G, int C)
{
    FOR_N(e, (size_t)G * G * C)
    {
        int c = (int)(e % C), cell = (int)(e / C), r = cell / G, col = cell % G;
        stt(out, e, pe_elem((col + 0.5) / G, (r + 0.5) / G, gauss, C, c));
    }
}

void cu_pe_dense(tr_backend *be, tr_ten out, const float *gauss, int G, int C)
{
    cuda_backend *c = CB(be);
    size_t n = (size_t)G * G * C;
    if (c->failed || n == 0) return;
    k_pe_dense<<<grid_for(n), TPB, 0, c->st>>>(out, gauss, G, C);
    LAUNCHED(c, "k_pe_dense");
}

struct tok_args {
    tr_ten label_emb, not_a_point, iou_tok, mask_tok;
    int NP, K, C, S;
};

__global__ void k_tokens_fwd(tr_ten T0, const float *points, const int32_t *labels, const float *gauss, tok_args a)
{
    size_t T = (size_t)a.K + 2;
    FOR_N(e, (size_t)a.NP * T * a.C)
    {
        int c = (int)(e % a.C), t = (int)(e / a.C % T);
        size_t n = e / ((size_t)a.C * T);
        float r;
        if (t == 0) r = ldt(a.iou_tok, c);
        else if (t == 1) r = ldt(a.mask_tok, c);
        else {
            size_t pk = n * a.K + (t - 2);
            int lab = labels[pk];
            if (lab < 0) r = ldt(a.not_a_point, c);
            else
                r = pe_elem(((double)points[2 * pk] + 0.5) / a.S, ((double)points[2 * pk + 1] + 0.5) / a.S, gauss,
                            a.C, c) +
                    ldt(a.label_emb, (size_t)(lab ? 1 : 0) * a.C + c);
        }
        stt(T0, e, r);
    }
}

void cu_prompt_tokens_forward(tr_backend *be, tr_ten T0, const float *points, const int32_t *labels,
                              const float *gauss, tr_ten label_emb, tr_ten not_a_point, tr_ten iou_tok,
                              tr_ten mask_tok, int NP, int K, int C, int S)
{
    cuda_backend *c = CB(be);
    size_t n = (size_t)NP * (K + 2) * C;
    if (c->failed || n == 0) return;
    tok_args a = {label_emb, not_a_point, iou_tok, mask_tok, NP, K, C, S};
    k_tokens_fwd<<<grid_for(n), TPB, 0, c->st>>>(T0, points, labels, gauss, a);
    LAUNCHED(c, "k_tokens_fwd");
}

// one thread per channel, over the pairs and points in order (double)
__global__ void k_tokens_bwd(float *dlabel_emb, float *dnot, float *diou, float *dmask, tr_ten dT0,
                             const int32_t *labels, int NP, int K, int C)
{
    size_t T = (size_t)K + 2;
    FOR_N(c, (size_t)C)
    {
        double s0 = 0, s1 = 0, sneg = 0, spos = 0, snot = 0;
        for (int n = 0; n < NP; n++) {
            size_t t0 = (size_t)n * T * C;
            s0 += ldt(dT0, t0 + c);
            s1 += ldt(dT0, t0 + C + c);
            for (int k = 0; k < K; k++) {
                int lab = labels[(size_t)n * K + k];
                float g = ldt(dT0, t0 + (size_t)(2 + k) * C + c);
                if (lab < 0) snot += g;
                else if (lab == 0) sneg += g;
                else spos += g;
            }
        }
        if (dlabel_emb) dlabel_emb[c] += (float)sneg, dlabel_emb[C + c] += (float)spos;
        if (dnot) dnot[c] += (float)snot;
        if (diou) diou[c] += (float)s0;
        if (dmask) dmask[c] += (float)s1;
    }
}

void cu_prompt_tokens_backward(tr_backend *be, float *dlabel_emb, float *dnot_a_point, float *diou_tok,
                               float *dmask_tok, tr_ten dT0, const int32_t *labels, int NP, int K, int C)
{
    cuda_backend *c = CB(be);
    if (c->failed || C <= 0) return;
    k_tokens_bwd<<<grid_for((size_t)C), TPB, 0, c->st>>>(dlabel_emb, dnot_a_point, diou_tok, dmask_tok, dT0, labels,
                                                        NP, K, C);
    LAUNCHED(c, "k_tokens_bwd");
}

__global__ void k_keys_fwd(tr_ten Kimg, tr_ten emb, tr_ten no_mask, int M, int GG, int C, size_t n)
{
    FOR_N(e, n)
    {
        size_t row = e / C, c = e % C, pair = row / GG, g = row % GG, img = pair / M;
        stt(Kimg, e, ldt(emb, (img * GG + g) * C + c) + ldt(no_mask, c));
    }
}

// demb[img, g, c] += sum over the image's M pairs, in pair order
__global__ void k_keys_bwd(tr_ten demb, tr_ten dK, int M, int GG, int C, size_t n)
{
    FOR_N(e, n)
    {
        size_t row = e / C, c = e % C, img = row / GG, g = row % GG;
        float acc = ldt(demb, e);
        for (int m = 0; m < M; m++) acc += ldt(dK, ((img * M + m) * GG + g) * C + c);
        stt(demb, e, acc);
    }
}

void cu_keys_forward(tr_backend *be, tr_ten Kimg, tr_ten emb, tr_ten no_mask, int B, int M, int GG, int C)
{
    cuda_backend *c = CB(be);
    size_t n = (size_t)B * M * GG * C;
    if (c->failed || n == 0) return;
    k_keys_fwd<<<grid_for(n), TPB, 0, c->st>>>(Kimg, emb, no_mask, M, GG, C, n);
    LAUNCHED(c, "k_keys_fwd");
}

void cu_keys_backward(tr_backend *be, tr_ten demb, float *dno_mask, tr_ten dKimg, int B, int M, int GG, int C)
{
    cuda_backend *c = CB(be);
    size_t n = (size_t)B * GG * C;
    if (c->failed || n == 0) return;
    if (demb.p) {
        k_keys_bwd<<<grid_for(n), TPB, 0, c->st>>>(demb, dKimg, M, GG, C, n);
        LAUNCHED(c, "k_keys_bwd");
    }
    if (dno_mask) colsum_add(be, dno_mask, dKimg, (size_t)B * M * GG, C, C);
}

// out [N, C] = rows t of inp [N, T, C]; scatter: dinp[:, t, :] += dout
__global__ void k_rows(tr_ten a, tr_ten b, int N, int T, int C, int t, int scatter)
{
    FOR_N(e, (size_t)N * C)
    {
        size_t row = ((e / C) * T + t) * C + e % C;
        if (scatter) stt(a, row, ldt(a, row) + ldt(b, e));
        else stt(a, e, ldt(b, row));
    }
}

void rows(tr_backend *be, tr_ten a, tr_ten b, int N, int T, int C, int t, int scatter)
{
    cuda_backend *c = CB(be);
    size_t n = (size_t)N * C;
    if (c->failed || n == 0) return;
    k_rows<<<grid_for(n), TPB, 0, c->st>>>(a, b, N, T, C, t, scatter);
    LAUNCHED(c, "k_rows");
}

void cu_rows_gather(tr_backend *be, tr_ten out, tr_ten inp, int N, int T, int C, int t)
{
    rows(be, out, inp, N, T, C, t, 0);
}

void cu_rows_scatter_add(tr_backend *be, tr_ten dinp, tr_ten dout, int N, int T, int C, int t)
{
    rows(be, dinp, dout, N, T, C, t, 1);
}

// ---- mask logits ---------------------------------------------------------------------

__global__ void k_mdot_fwd(tr_ten logits, tr_ten U, tr_ten hyp, int RR, int c, size_t n)
{
    FOR_N(row, n)
    {
        size_t h = row / RR * c;
        float s = 0.0f;
        for (int j = 0; j < c; j++) s += ldt(U, row * c + j) * ldt(hyp, h + j);
        stt(logits, row, s);
    }
}

__global__ void k_mdot_bwd_dU(tr_ten dU, tr_ten dlogits, tr_ten hyp, int RR, int c, size_t n)
{
    FOR_N(e, n)
    {
        size_t row = e / c;
        stt(dU, e, ldt(dU, e) + ldt(dlogits, row) * ldt(hyp, row / RR * c + e % c));
    }
}

// dhyp[p, j] += sum_px dlogits * U (double): a block per pair p, the
// channels cc at a time (cc = min(c, TPB)); thread t sums channel
// j0 + t % cc over the pixels px = t / cc (mod L = TPB / cc) in order,
// then the L partial sums of a channel are added in order of t / cc
__global__ void __launch_bounds__(TPB) k_mdot_bwd_dh(tr_ten dhyp, tr_ten dlogits, tr_ten U, int RR, int c)
{
    __shared__ double sh[TPB];
    const int cc = c < TPB ? c : TPB, L = TPB / cc, t = (int)threadIdx.x, l = t / cc;
    const size_t p = blockIdx.x;
    for (int j0 = 0; j0 < c; j0 += cc) {
        const int j = j0 + t % cc;
        double acc = 0.0;
        if (l < L && j < c)
            for (int px = l; px < RR; px += L) {
                size_t row = p * RR + px;
                acc += (double)ldt(dlogits, row) * ldt(U, row * c + j);
            }
        sh[t] = acc;
        __syncthreads();
        if (t < cc && j0 + t < c) {
            double s = 0.0;
            for (int i = 0; i < L; i++) s += sh[i * cc + t];
            stt(dhyp, p * c + j0 + t, ldt(dhyp, p * c + j0 + t) + (float)s);
        }
        __syncthreads();
    }
}

void cu_mask_dot_forward(tr_backend *be, tr_ten logits, tr_ten U, tr_ten hyp, int N, int RR, int c)
{
    cuda_backend *cb = CB(be);
    size_t n = (size_t)N * RR;
    if (cb->failed || n == 0) return;
    k_mdot_fwd<<<grid_for(n), TPB, 0, cb->st>>>(logits, U, hyp, RR, c, n);
    LAUNCHED(cb, "k_mdot_fwd");
}

void cu_mask_dot_backward(tr_backend *be, tr_ten dU, tr_ten dhyp, tr_ten dlogits, tr_ten U, tr_ten hyp, int N,
                          int RR, int c)
{
    cuda_backend *cb = CB(be);
    if (cb->failed || N <= 0) return;
    if (dU.p) {
        size_t n = (size_t)N * RR * c;
        k_mdot_bwd_dU<<<grid_for(n), TPB, 0, cb->st>>>(dU, dlogits, hyp, RR, c, n);
        LAUNCHED(cb, "k_mdot_bwd_dU");
    }
    if (dhyp.p) {
        k_mdot_bwd_dh<<<(unsigned)N, TPB, 0, cb->st>>>(dhyp, dlogits, U, RR, c);
        LAUNCHED(cb, "k_mdot_bwd_dh");
    }
}

// ---- loss: one block per pair, its sums in a fixed tree; then one ordered reduction -------

__global__ void __launch_bounds__(TPB) k_loss(tr_ten dlogits, tr_ten diou, tr_ten logits, tr_ten iou,
                                             const uint8_t *masks, const uint8_t *valid, int RR, float s, double *r)
{
    __shared__ double shd[TPB];
    __shared__ unsigned long long shu[TPB];
    size_t n = blockIdx.x, o = n * RR;
    double *rn = r + n * 8;
    if (!valid[n] || s == 0.0f) {
        for (int i = threadIdx.x; i < RR; i += TPB) stt(dlogits, o + i, 0.0f);
        if (threadIdx.x == 0) stt(diou, n, 0.0f);
        if (threadIdx.x < 8) rn[threadIdx.x] = 0.0;
        return;
    }
    double sf = 0, sp = 0, sy = 0, spy = 0;
    unsigned long long inter = 0, uni = 0;
    for (int i = threadIdx.x; i < RR; i += TPB) {
        float x = ldt(logits, o + i), yi = masks[o + i] ? 1.0f : 0.0f, d;
        sf += tr_focal_pixel(x, yi, &d);
        float pr = tr_sigmoid(x);
        sp += pr;
        sy += yi;
        spy += (double)pr * yi;
        int pos = x > 0.0f;
        inter += (unsigned long long)(pos && masks[o + i]);
        uni += (unsigned long long)(pos || masks[o + i]);
    }
    sf = block_sum(sf, shd), sp = block_sum(sp, shd), sy = block_sum(sy, shd), spy = block_sum(spy, shd);
    inter = block_sum(inter, shu), uni = block_sum(uni, shu);
    double den = sp + sy + 1.0, num = 2.0 * spy + 1.0;
    double target = uni ? (double)inter / (double)uni : 1.0, di = (double)ldt(iou, n) - target;
    if (threadIdx.x == 0) {
        rn[0] = sf / (double)RR;
        rn[1] = 1.0 - num / den;
        rn[2] = di * di;
        rn[3] = target;
        for (int k = 4; k < 8; k++) rn[k] = 0.0;
        stt(diou, n, s * (float)(2.0 * di));
    }
    float cf = (float)(20.0 / (double)RR), inv_den2 = (float)(1.0 / (den * den));
    for (int i = threadIdx.x; i < RR; i += TPB) {
        float x = ldt(logits, o + i), yi = masks[o + i] ? 1.0f : 0.0f, d;
        tr_focal_pixel(x, yi, &d);
        float pr = tr_sigmoid(x), ddice_dp = -(float)(2.0 * yi * den - num) * inv_den2;
        stt(dlogits, o + i, s * (cf * d + ddice_dp * pr * (1.0f - pr)));
    }
}

// sums[k] += the valid pairs' partials, in pair order
__global__ void k_loss_sum(double *sums, const double *r, const uint8_t *valid, int N)
{
    if (threadIdx.x >= 4) return;
    double s = 0.0;
    for (int n = 0; n < N; n++)
        if (valid[n]) s += r[(size_t)n * 8 + threadIdx.x];
    sums[threadIdx.x] += s;
}

void cu_sam_loss(tr_backend *be, tr_ten dlogits, tr_ten diou, tr_ten logits, tr_ten iou, const uint8_t *masks,
                 const uint8_t *valid, int N, int RR, float scale, int count, double *sums)
{
    cuda_backend *c = CB(be);
    if (c->failed || N <= 0) return;
    double *r = static_cast<double *>(work(be, tr_cuda_sizes.loss_workspace((size_t)N, (size_t)RR)));
    if (!r) return;
    float s = count > 0 ? (float)((double)scale / count) : 0.0f;
    k_loss<<<N, TPB, 0, c->st>>>(dlogits, diou, logits, iou, masks, valid, RR, s, r);
    if (LAUNCHED(c, "k_loss") == 0) {
        k_loss_sum<<<1, 32, 0, c->st>>>(sums, r, valid, N);
        LAUNCHED(c, "k_loss_sum");
    }
    tr_mem_free(&be->mem, r);
}

// ---- optimizer -------------------------------------------------------------------------

const int SUMSQ_BLOCKS = 256;

// part[b] = sum of squares of block b's fixed share, in a fixed tree
__global__ void __launch_bounds__(TPB) k_sumsq(double *part, const float *g, size_t n)
{
    __shared__ double sh[TPB];
    size_t lo = n * blockIdx.x / SUMSQ_BLOCKS, hi = n * (blockIdx.x + 1) / SUMSQ_BLOCKS;
    double s = 0.0;
    for (size_t i = lo + threadIdx.x; i < hi; i += TPB) s += (double)g[i] * g[i];
    s = block_sum(s, sh);
    if (threadIdx.x == 0) part[blockIdx.x] = s;
}

double cu_sumsq(tr_backend *be, const float *g, size_t n)
{
    cuda_backend *c = CB(be);
    if (c->failed) return NAN;
    double *part = static_cast<double *>(work(be, SUMSQ_BLOCKS * sizeof(double))), h[SUMSQ_BLOCKS];
    if (!part) { // outside a guarded step (tr_model_scale_grads): a NaN alone would pass for an fp16 overflow
        record(c, __FILE__, __LINE__, "cu_sumsq", "out of device memory for 2 KiB of workspace");
        return NAN;
    }
    k_sumsq<<<SUMSQ_BLOCKS, TPB, 0, c->st>>>(part, g, n);
    LAUNCHED(c, "k_sumsq");
    cu_download(be, h, part, sizeof h);
    tr_mem_free(&be->mem, part);
    double s = 0.0;
    for (int i = 0; i < SUMSQ_BLOCKS; i++) s += h[i];
    return s;
}

struct adam_args {
    float lr, beta1, beta2, eps, wd, bc1, bc2;
};

__global__ void k_adamw(float *w, float *m, float *v, const float *g, size_t n, adam_args a)
{
    FOR_N(i, n) tr_adamw_elem(w + i, m + i, v + i, g[i], a.lr, a.beta1, a.beta2, a.eps, a.wd, a.bc1, a.bc2);
}

void cu_adamw(tr_backend *be, float *w, float *m, float *v, const float *g, size_t n, float lr, float beta1,
              float beta2, float eps, float wd, float bc1, float bc2)
{
    cuda_backend *c = CB(be);
    if (c->failed || n == 0) return;
    k_adamw<<<grid_for(n), TPB, 0, c->st>>>(w, m, v, g, n, adam_args{lr, beta1, beta2, eps, wd, bc1, bc2});
    LAUNCHED(c, "k_adamw");
}

// the two dynamic maps by value (2 KiB of kernel parameters: the host's arrays)
struct q8_maps {
    float m[256], v[256];
};

// one block per quantisation block: dequantise, update as tr_adamw_elem, the
// block's absmax (max: order-free), requantise; quant8.h's math
__global__ void __launch_bounds__(TPB) k_adamw8bit(float *w, uint8_t *mq, uint8_t *vq, float *mabs, float *vabs,
                                                  const float *g, size_t n, int block, adam_args a, q8_maps maps)
{
    __shared__ float sm[TR_Q8_MAX_BLOCK], sv[TR_Q8_MAX_BLOCK], shm[TPB], shv[TPB];
    size_t b = blockIdx.x, lo = b * (size_t)block;
    int len = n - lo < (size_t)block ? (int)(n - lo) : block;
    float ma = mabs[b], va = vabs[b], am = 0.0f, av = 0.0f;
    for (int i = threadIdx.x; i < len; i += TPB) {
        float m = maps.m[mq[lo + i]] * ma, v = maps.v[vq[lo + i]] * va;
        tr_adamw_elem(w + lo + i, &m, &v, g[lo + i], a.lr, a.beta1, a.beta2, a.eps, a.wd, a.bc1, a.bc2);
        sm[i] = m, sv[i] = v;
        am = fmaxf(am, fabsf(m)), av = fmaxf(av, fabsf(v));
    }
    shm[threadIdx.x] = am, shv[threadIdx.x] = av;
    __syncthreads();
    for (int o = TPB / 2; o > 0; o >>= 1) {
        if ((int)threadIdx.x < o) {
            shm[threadIdx.x] = fmaxf(shm[threadIdx.x], shm[threadIdx.x + o]);
            shv[threadIdx.x] = fmaxf(shv[threadIdx.x], shv[threadIdx.x + o]);
        }
        __syncthreads();
    }
    am = shm[0], av = shv[0];
    float im = am > 0.0f ? 1.0f / am : 0.0f, iv = av > 0.0f ? 1.0f / av : 0.0f;
    for (int i = threadIdx.x; i < len; i += TPB) {
        mq[lo + i] = tr_q8_encode(maps.m, sm[i] * im);
        vq[lo + i] = tr_q8_encode_v(maps.v, sv[i] * iv);
    }
    if (threadIdx.x == 0) mabs[b] = am, vabs[b] = av;
}

void cu_adamw8bit(tr_backend *be, float *w, uint8_t *mq, uint8_t *vq, float *mabs, float *vabs, const float *qm,
                  const float *qv, const float *g, size_t n, int block, float lr, float beta1, float beta2,
                  float eps, float wd, float bc1, float bc2)
{
    cuda_backend *c = CB(be);
    if (c->failed || n == 0) return;
    if (block < 1 || block > TR_Q8_MAX_BLOCK) {
        UNSUPPORTED(c, "8-bit AdamW block of %d (1 to %d)", block, TR_Q8_MAX_BLOCK);
        return;
    }
    q8_maps maps;
    memcpy(maps.m, qm, sizeof maps.m);
    memcpy(maps.v, qv, sizeof maps.v);
    size_t nb = (n + (size_t)block - 1) / (size_t)block;
    k_adamw8bit<<<(unsigned)nb, TPB, 0, c->st>>>(w, mq, vq, mabs, vabs, g, n, block,
                                                adam_args{lr, beta1, beta2, eps, wd, bc1, bc2}, maps);
    LAUNCHED(c, "k_adamw8bit");
}

// ---- the backend ------------------------------------------------------------------------

void cu_destroy(tr_backend *be)
{
    cuda_backend *c = CB(be);
    cudaStreamSynchronize(c->st);
    prof_close(c);
    attn_state_free(c);
    tr_mem_destroy(&be->mem);
    tr_mem_destroy(&c->host);
    c->api.destroy(c->blas);
    dlclose(c->api.lib);
    cudaFree(c->band);
    cudaStreamDestroy(c->st);
    free(c);
}

void set_ops(tr_ops *o)
{
    o->gemm = cu_gemm;
    o->linear_forward = cu_linear_forward, o->linear_backward = cu_linear_backward;
    o->layernorm_forward = cu_layernorm_forward, o->layernorm_backward = cu_layernorm_backward;
    o->layernorm_stats = cu_layernorm_stats;
    o->gelu_forward = cu_gelu_forward, o->gelu_backward = cu_gelu_backward;
    o->relu_forward = cu_relu_forward, o->relu_backward = cu_relu_backward;
    o->add = cu_add, o->accumulate = cu_accumulate, o->zero = cu_zero, o->add_bcast = cu_add_bcast;
    o->attention_forward = cu_attention_forward, o->attention_backward = cu_attention_backward;
    o->convt2x2_forward = cu_convt2x2_forward, o->convt2x2_backward = cu_convt2x2_backward;
    o->patch_im2col = cu_patch_im2col, o->image_normalize = cu_image_normalize;
    o->pe_dense = cu_pe_dense;
    o->prompt_tokens_forward = cu_prompt_tokens_forward, o->prompt_tokens_backward = cu_prompt_tokens_backward;
    o->keys_forward = cu_keys_forward, o->keys_backward = cu_keys_backward;
    o->rows_gather = cu_rows_gather, o->rows_scatter_add = cu_rows_scatter_add;
    o->mask_dot_forward = cu_mask_dot_forward, o->mask_dot_backward = cu_mask_dot_backward;
    o->sam_loss = cu_sam_loss;
    o->sumsq = cu_sumsq, o->scale = cu_scale, o->adamw = cu_adamw, o->adamw8bit = cu_adamw8bit;
    o->convert = cu_convert, o->upload = cu_upload, o->download = cu_download;
}

// cuBLAS's math mode: fp32 GEMMs in fp32 or (tf32) TF32 on the tensor
// cores; never a split-K reduction in a 16-bit output's type (backend.h
// rounds a 16-bit output once, from the fp32 result)
int set_math(cuda_backend *c, int tf32)
{
    int mode = (tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH) |
               CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION;
    return CKB(c, c->api.set_math_mode(c->blas, static_cast<cublasMath_t>(mode)));
}

} // namespace sa1b_cuda

using namespace sa1b_cuda;

static int cu_error(tr_backend *be, char *err, size_t err_len)
{
    if (!CB(be)->failed) return 0;
    snprintf(err, err_len, "%s", CB(be)->err);
    return 1;
}

extern "C" tr_backend *tr_backend_cuda_create(const tr_backend_opts *o, char *err, size_t err_len)
{
    int device = o->device, n_threads = o->n_threads, count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
        snprintf(err, err_len, "no CUDA device: %s", e != cudaSuccess ? cudaGetErrorString(e) : "none found");
        return nullptr;
    }
    /* a launcher that gives each rank a GPU of its own (CUDA_VISIBLE_DEVICES
     * per rank, as Slurm's gpus-per-task binding sets it) leaves each one
     * device to see; without that variable, two ranks on a machine of one
     * GPU stay refused in one line (below), not by NCCL */
    if (count == 1 && getenv("CUDA_VISIBLE_DEVICES")) device = 0;
    if (device < 0 || device >= count) {
        snprintf(err, err_len, "no CUDA device %d: this machine has %d (one rank per device)", device, count);
        return nullptr;
    }
    cuda_backend *c = static_cast<cuda_backend *>(calloc(1, sizeof *c));
    if (!c) {
        snprintf(err, err_len, "out of memory");
        return nullptr;
    }
    c->device = device;
    if (CK(c, cudaSetDevice(device)) || CK(c, cudaStreamCreateWithFlags(&c->st, cudaStreamNonBlocking)) ||
        CK(c, cudaMalloc(reinterpret_cast<void **>(&c->band), CS_CAP * sizeof(double)))) {
        snprintf(err, err_len, "%s", c->err);
        if (c->st) cudaStreamDestroy(c->st);
        free(c);
        return nullptr;
    }
    if (blas_load(&c->api, err, err_len) < 0) {
        cudaFree(c->band);
        cudaStreamDestroy(c->st);
        free(c);
        return nullptr;
    }
    if (CKB(c, c->api.create(&c->blas)) || CKB(c, c->api.set_stream(c->blas, c->st)) ||
        set_math(c, o->tf32) || prof_open(c, o->profile) < 0) {
        snprintf(err, err_len, "%s", c->failed ? c->err : "SA1B_CUDA_PROFILE: its events could not be made");
        if (c->blas) c->api.destroy(c->blas);
        dlclose(c->api.lib);
        cudaFree(c->band);
        cudaStreamDestroy(c->st);
        free(c);
        return nullptr;
    }
    c->attn_mode = o->attention;
    c->sync_each = o->sync_each != 0;
    tr_backend *be = &c->be;
    set_ops(&c->ops);
    be->name = "cuda";
    be->ops = &c->ops;
    be->sizes = &tr_cuda_sizes;
    be->traits = &tr_cuda_traits;
    be->fp32 = nullptr; // 16-bit operands are read as they are (widens16 = 0)
    tr_mem_hooks dev = {dev_alloc, dev_free, dev_zero, c}, pinned = {pinned_alloc, pinned_free, pinned_zero, c};
    tr_mem_init_hooks(&be->mem, &dev, 0);
    tr_mem_init_hooks(&c->host, &pinned, 0);
    be->host_mem = &c->host;
    be->n_threads = n_threads < 1 ? 1 : n_threads;
    be->impl = c;
    be->destroy = cu_destroy;
    be->error = cu_error;
    return be;
}

extern "C" int tr_cuda_device_memory(uint64_t *free_bytes, uint64_t *total_bytes, char *err, size_t err_len)
{
    int count = 0;
    size_t f = 0, t = 0;
    *free_bytes = *total_bytes = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
        snprintf(err, err_len, "no CUDA device: %s", e != cudaSuccess ? cudaGetErrorString(e) : "none found");
        return -1;
    }
    if ((e = cudaMemGetInfo(&f, &t)) != cudaSuccess) {
        snprintf(err, err_len, "cudaMemGetInfo: %s", cudaGetErrorString(e));
        return -1;
    }
    *free_bytes = f, *total_bytes = t;
    return 0;
}

extern "C" void *tr_backend_cuda_stream(tr_backend *be)
{
    if (!be || strcmp(be->name, "cuda") != 0) return nullptr;
    return CB(be)->st;
}
