// backend_cuda_attn.cu - the CUDA backend's attention (backend.h's
// attention_forward / attention_backward), on one of two paths that
// backend_cuda_sizes.c describes (tr_cuda_attn_blocked), both saving the
// softmax's log-sum-exp per query row (backend.h's layout, fp32 [N, heads,
// Tq], which every GPU path shares), never Tq x Tk; both backwards take
// D = rowsum(dout * out) from the forward's output and write (=) dq, dk, dv:
//  - sequences of 64 tokens and more: blocked, R query rows of every head
//    at a time through cuBLAS's tensor cores;
//  - shorter ones: a fused kernel, one warp per query or key row.
// No atomics: two runs give the same bits.
#include <cmath>
#include <cstring>

extern "C" {
#include "backend_cuda.h"
}
#include "backend_cuda_impl.cuh"

namespace sa1b_cuda {

// ---- attention: fused, one warp per query (forward, dQ) or key (dK/dV) row ----------
//
// Lane l holds head dimensions l, l + 32, ... (NPL of them: dh <= 32 NPL);
// a score is the warp sum of the lanes' partial dot products, the same
// bits in the forward and both backward passes.  Saved per query row: the
// log of the sum of exponentials (lse, fp32; attn_lse, backend_cuda_impl.cuh);
// P = exp(scale s - lse) is recomputed.

struct attn_args {
    tr_attn_dims d;
    float scale;
};

__device__ __forceinline__ float *lse_row(tr_ten att, const attn_args &a, size_t idx, int t)
{
    return attn_lse(att, a.d, idx, t);
}

template <int NPL>
__device__ __forceinline__ void load_row(float *x, tr_ten t, size_t off, int dh, int lane)
{
#pragma unroll
    for (int i = 0; i < NPL; i++) {
        int j = lane + 32 * i;
        x[i] = j < dh ? ldt(t, off + j) : 0.0f;
    }
}

// the lanes' registers x . y summed over the warp (dot_row with both rows loaded)
template <int NPL>
__device__ __forceinline__ float warp_sum_dot(const float *x, const float *y)
{
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < NPL; i++) s += x[i] * y[i];
    return warp_sum(s);
}

// x . row t[off, off + dh) summed over the warp
template <int NPL>
__device__ __forceinline__ float dot_row(const float *x, tr_ten t, size_t off, int dh, int lane)
{
    float y[NPL];
    load_row<NPL>(y, t, off, dh, lane);
    return warp_sum_dot<NPL>(x, y);
}

// dst[off + j] = x (typed, written)
template <int NPL>
__device__ __forceinline__ void store_row(tr_ten t, size_t off, const float *x, int dh, int lane)
{
#pragma unroll
    for (int i = 0; i < NPL; i++) {
        int j = lane + 32 * i;
        if (j < dh) stt(t, off + j, x[i]);
    }
}

// The warp's row of a fused kernel over `per` rows of each (sequence, head):
// idx = sequence * heads + head, t the row in it, n the sequence, hoff the
// head's first column; false past the last (sequence, head).
struct attn_row {
    size_t row, idx, n, hoff;
    int t, lane;
};

__device__ __forceinline__ bool attn_row_of(const tr_attn_dims &d, int per, attn_row *r)
{
    r->row = warp_id(), r->idx = r->row / per;
    r->lane = threadIdx.x % 32, r->t = (int)(r->row % per);
    if (r->idx >= (size_t)d.N * d.heads) return false;
    r->n = r->idx / d.heads, r->hoff = (r->idx % d.heads) * d.dh;
    return true;
}

template <int NPL>
__global__ void k_attn_fwd(tr_ten out, tr_ten att, tr_ten q, tr_ten k, tr_ten v, attn_args a)
{
    const tr_attn_dims &d = a.d;
    attn_row r;
    if (!attn_row_of(d, d.Tq, &r)) return;
    const size_t idx = r.idx, n = r.n, hoff = r.hoff;
    const int lane = r.lane, t = r.t;
    float qv[NPL], acc[NPL];
    load_row<NPL>(qv, q, n * d.sq + (size_t)t * d.ldq + hoff, d.dh, lane);
#pragma unroll
    for (int i = 0; i < NPL; i++) acc[i] = 0.0f;
    float m = -INFINITY, l = 0.0f;
    for (int j = 0; j < d.Tk; j++) {
        float s = dot_row<NPL>(qv, k, n * d.sk + (size_t)j * d.ldk + hoff, d.dh, lane) * a.scale;
        float mn = fmaxf(m, s), corr = expf(m - mn), p = expf(s - mn);
        l = l * corr + p;
        size_t vo = n * d.sv + (size_t)j * d.ldv + hoff;
#pragma unroll
        for (int i = 0; i < NPL; i++) {
            int jj = lane + 32 * i;
            acc[i] = acc[i] * corr + (jj < d.dh ? p * ldt(v, vo + jj) : 0.0f);
        }
        m = mn;
    }
    float inv = 1.0f / l;
#pragma unroll
    for (int i = 0; i < NPL; i++) acc[i] *= inv;
    store_row<NPL>(out, n * d.so + (size_t)t * d.ldo + hoff, acc, d.dh, lane);
    if (lane == 0) *lse_row(att, a, idx, t) = m + logf(l);
}

// D[row] = rowsum(dO * O) of one query row of one head (= sum_j P_ij (dO_i . v_j)
// when O = P v): a warp a row, any head size, lanes j, j + 32, ... then the butterfly
__global__ void k_attn_rowdot(float *D, tr_ten dout, tr_ten out, tr_attn_dims d)
{
    const size_t row = warp_id(); // (sequence, head) idx = row / Tq, query t = row % Tq: the same for the warp
    if (row >= (size_t)d.N * d.heads * d.Tq) return;
    const int lane = threadIdx.x % 32, t = (int)(row % d.Tq);
    const size_t idx = row / d.Tq, o = idx / d.heads * d.so + (size_t)t * d.ldo + idx % d.heads * d.dh;
    float s = 0.0f;
    for (int j = lane; j < d.dh; j += 32) s += ldt(dout, o + j) * ldt(out, o + j);
    s = warp_sum(s);
    if (lane == 0) D[row] = s;
}

void attn_rowdot(cuda_backend *c, float *D, tr_ten dout, tr_ten out, const tr_attn_dims *d)
{
    unsigned g = warp_grid((size_t)d->N * d->heads * d->Tq);
    if (c->failed || !g) return;
    k_attn_rowdot<<<g, TPB, 0, c->st>>>(D, dout, out, *d);
    LAUNCHED(c, "k_attn_rowdot");
}

// dK, dV of one key row over every query: dv = P^T dO, dk = dS^T q with dS = scale P (dP - D)
template <int NPL>
__global__ void k_attn_dkdv(tr_ten dk, tr_ten dv, const float *D, tr_ten dout, tr_ten q, tr_ten k, tr_ten v,
                            tr_ten att, attn_args a)
{
    const tr_attn_dims &d = a.d;
    attn_row r;
    if (!attn_row_of(d, d.Tk, &r)) return;
    const size_t idx = r.idx, n = r.n, hoff = r.hoff;
    const int lane = r.lane, j = r.t;
    float kv[NPL], vv[NPL], gk[NPL], gv[NPL], qi[NPL], gi[NPL];
    load_row<NPL>(kv, k, n * d.sk + (size_t)j * d.ldk + hoff, d.dh, lane);
    load_row<NPL>(vv, v, n * d.sv + (size_t)j * d.ldv + hoff, d.dh, lane);
#pragma unroll
    for (int i = 0; i < NPL; i++) gk[i] = gv[i] = 0.0f;
    for (int t = 0; t < d.Tq; t++) {
        load_row<NPL>(qi, q, n * d.sq + (size_t)t * d.ldq + hoff, d.dh, lane);
        load_row<NPL>(gi, dout, n * d.so + (size_t)t * d.ldo + hoff, d.dh, lane);
        float p = expf(warp_sum_dot<NPL>(qi, kv) * a.scale - *lse_row(att, a, idx, t));
        float dp = warp_sum_dot<NPL>(gi, vv), ds = a.scale * p * (dp - D[idx * d.Tq + t]);
#pragma unroll
        for (int i = 0; i < NPL; i++) gv[i] += p * gi[i], gk[i] += ds * qi[i];
    }
    if (dk.p) store_row<NPL>(dk, n * d.sk + (size_t)j * d.ldk + hoff, gk, d.dh, lane);
    if (dv.p) store_row<NPL>(dv, n * d.sv + (size_t)j * d.ldv + hoff, gv, d.dh, lane);
}

// dQ of one query row over every key: dq = dS k
template <int NPL>
__global__ void k_attn_dq(tr_ten dq, const float *D, tr_ten dout, tr_ten q, tr_ten k, tr_ten v, tr_ten att,
                          attn_args a)
{
    const tr_attn_dims &d = a.d;
    attn_row r;
    if (!attn_row_of(d, d.Tq, &r)) return;
    const size_t row = r.row, idx = r.idx, n = r.n, hoff = r.hoff;
    const int lane = r.lane, t = r.t;
    float qv[NPL], go[NPL], kj[NPL], gq[NPL];
    load_row<NPL>(qv, q, n * d.sq + (size_t)t * d.ldq + hoff, d.dh, lane);
    load_row<NPL>(go, dout, n * d.so + (size_t)t * d.ldo + hoff, d.dh, lane);
#pragma unroll
    for (int i = 0; i < NPL; i++) gq[i] = 0.0f;
    float lse = *lse_row(att, a, idx, t), Dt = D[row];
    for (int j = 0; j < d.Tk; j++) {
        load_row<NPL>(kj, k, n * d.sk + (size_t)j * d.ldk + hoff, d.dh, lane);
        float p = expf(warp_sum_dot<NPL>(qv, kj) * a.scale - lse);
        float dp = dot_row<NPL>(go, v, n * d.sv + (size_t)j * d.ldv + hoff, d.dh, lane);
        float ds = a.scale * p * (dp - Dt);
#pragma unroll
        for (int i = 0; i < NPL; i++) gq[i] += ds * kj[i];
    }
    store_row<NPL>(dq, n * d.sq + (size_t)t * d.ldq + hoff, gq, d.dh, lane);
}


// which instantiation holds a head of dh dimensions; 0: none
static int attn_npl(int dh) { return dh <= 32 ? 1 : dh <= 64 ? 2 : dh <= 128 ? 4 : 0; }

#define ATTN_LAUNCH(npl, kern, rows, ...)                                                      \
    do {                                                                                       \
        unsigned g_ = warp_grid(rows);                                                         \
        if (!g_) break;                                                                        \
        if (npl == 1) kern<1><<<g_, TPB, 0, c->st>>>(__VA_ARGS__);                             \
        else if (npl == 2) kern<2><<<g_, TPB, 0, c->st>>>(__VA_ARGS__);                        \
        else kern<4><<<g_, TPB, 0, c->st>>>(__VA_ARGS__);                                      \
        LAUNCHED(c, #kern);                                                                    \
    } while (0)

// the arguments of either path's kernels for the call d
static attn_args attn_make(const tr_attn_dims *d)
{
    attn_args a;
    a.d = *d;
    a.scale = 1.0f / sqrtf((float)d->dh);
    return a;
}

// the fused path's arguments and instantiation; 0: a head it cannot take
static int attn_setup(cuda_backend *c, attn_args *a, const tr_attn_dims *d)
{
    int npl = attn_npl(d->dh);
    if (!npl) {
        UNSUPPORTED(c, "attention head of %d dimensions (at most 128)", d->dh);
        return 0;
    }
    *a = attn_make(d);
    return npl;
}

// the blocked attention (below, after the block reductions); 1: it took the call
static int blk_attn_forward(tr_backend *be, tr_ten out, tr_ten att, tr_ten q, tr_ten k, tr_ten v,
                            const tr_attn_dims *d);
static int blk_attn_backward(tr_backend *be, tr_ten dq, tr_ten dk, tr_ten dv, tr_ten dout, tr_ten out, tr_ten q,
                             tr_ten k, tr_ten v, tr_ten att, const tr_attn_dims *d);

void cu_attention_forward(tr_backend *be, tr_ten out, tr_ten att, tr_ten q, tr_ten k, tr_ten v, const tr_attn_dims *d)
{
    cuda_backend *c = CB(be);
    attn_args a;
    int npl;
    const int mode = attn_mode_for(c, d, q.dt);
    if (mode == TR_CUDA_ATTN_CUDNN && cudnn_attn_forward(be, out, att, q, k, v, d)) return;
    if (mode == TR_CUDA_ATTN_FLASH && flash_attn_forward(be, out, att, q, k, v, d)) return;
    if (c->failed || blk_attn_forward(be, out, att, q, k, v, d) || !(npl = attn_setup(c, &a, d))) return;
    ATTN_LAUNCH(npl, k_attn_fwd, (size_t)d->N * d->heads * d->Tq, out, att, q, k, v, a);
}

void cu_attention_backward(tr_backend *be, tr_ten dq, tr_ten dk, tr_ten dv, tr_ten dout, tr_ten out, tr_ten q,
                           tr_ten k, tr_ten v, tr_ten att, const tr_attn_dims *d)
{
    cuda_backend *c = CB(be);
    attn_args a;
    int npl;
    if (!out.p) {
        UNSUPPORTED(c, "attention backward without the forward's output");
        return;
    }
    const int mode = attn_mode_for(c, d, q.dt);
    if (mode == TR_CUDA_ATTN_CUDNN && cudnn_attn_backward(be, dq, dk, dv, dout, out, q, k, v, att, d)) return;
    if (mode == TR_CUDA_ATTN_FLASH && flash_attn_backward(be, dq, dk, dv, dout, out, q, k, v, att, d)) return;
    if (c->failed || blk_attn_backward(be, dq, dk, dv, dout, out, q, k, v, att, d) ||
        !(npl = attn_setup(c, &a, d)))
        return;
    float *D = static_cast<float *>(work(be, tr_cuda_attn_workspace(d, 0, 1)));
    if (!D) return;
    size_t nq = (size_t)d->N * d->heads * d->Tq, nk = (size_t)d->N * d->heads * d->Tk;
    attn_rowdot(c, D, dout, out, d);
    if (dk.p || dv.p) ATTN_LAUNCH(npl, k_attn_dkdv, nk, dk, dv, D, dout, q, k, v, att, a);
    if (dq.p) ATTN_LAUNCH(npl, k_attn_dq, nq, dq, D, dout, q, k, v, att, a);
    tr_mem_free(&be->mem, D);
}

// ---- attention over long sequences: blocked, through cuBLAS -----------------------
//
// R query rows of one sequence at a time (tr_cuda_attn_rows), every head at
// once: the scores S = scale q k^T in fp32 (a GEMM strided over the heads),
// the softmax by rows (a block per row: the row's lse saved in att as the
// fused kernel saves it; P in the activations' type), out = P v (the GEMM's
// output rounded once).  The backward recomputes S and P = exp(S - lse),
// then dV += P^T dO, dP = dO v^T, dS = scale P (dP - D) with D =
// rowsum(dO O) (the forward's output), dQ = dS k (each row block written
// once), dK += dS^T q; dK and dV of a sequence are summed in fp32 over its
// row blocks and written to dk and dv once.  Memory:
// the workspace of R rows (tr_cuda_attn_workspace), linear in the sequence;
// every sum in an order fixed by the shape (cuBLAS, fixed-tree block sums).

static tr_ten ten_at(tr_ten t, size_t n) { return tr_typed(static_cast<char *>(t.p) + n * tr_prec_size(t.dt), t.dt); }

// C_b = alpha op(A_b) op(B_b) + beta C_b for b < batch (A_b = A + b sA
// elements, ...), row-major; A and B of one type, C of it or fp32
static void gemm_sb(cuda_backend *c, int ta, int tb, int M, int N, int K, float alpha, tr_ten A, int lda, long long sA,
             tr_ten B, int ldb, long long sB, float beta, tr_ten C, int ldc, long long sC, int batch)
{
    if (c->failed || M <= 0 || N <= 0 || K <= 0 || batch <= 0) return;
    CKB(c, c->api.gemm_sb(c->blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, &alpha,
                          B.p, blas_type(B.dt), ldb, sB, A.p, blas_type(A.dt), lda, sA, &beta, C.p, blas_type(C.dt),
                          ldc, sC, batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    if (c->prof) prof_gemm(c, "gemm strided", __FILE__, __LINE__, M, N, K, batch);
}

// the block's maximum of v (every thread gets it); sh [TPB]
__device__ float block_max(float v, float *sh)
{
    sh[threadIdx.x] = v;
    __syncthreads();
    for (int o = TPB / 2; o > 0; o >>= 1) {
        if ((int)threadIdx.x < o) sh[threadIdx.x] = fmaxf(sh[threadIdx.x], sh[threadIdx.x + o]);
        __syncthreads();
    }
    float r = sh[0];
    __syncthreads();
    return r;
}

// one block per (head h, row i) of a block of r rows (R apart per head):
// P = exp(S - lse) from the row's scaled scores, lse saved
__global__ void __launch_bounds__(TPB) k_blk_softmax(const float *S, tr_ten P, tr_ten att, attn_args a, size_t seq,
                                                     int t0, int R, int r)
{
    __shared__ float sh[TPB];
    int h = blockIdx.x / r, i = blockIdx.x % r, Tk = a.d.Tk;
    size_t row = ((size_t)h * R + i) * Tk;
    float m = -INFINITY, l = 0.0f;
    for (int j = threadIdx.x; j < Tk; j += TPB) m = fmaxf(m, S[row + j]);
    m = block_max(m, sh);
    for (int j = threadIdx.x; j < Tk; j += TPB) l += expf(S[row + j] - m);
    l = block_sum(l, sh);
    float lse = m + logf(l);
    for (int j = threadIdx.x; j < Tk; j += TPB) stt(P, row + j, expf(S[row + j] - lse));
    if (threadIdx.x == 0) *lse_row(att, a, seq * a.d.heads + h, t0 + i) = lse;
}

// the backward's probabilities: S becomes P = exp(S - lse) in fp32, X in its type
__global__ void __launch_bounds__(TPB) k_blk_probs(float *S, tr_ten X, tr_ten att, attn_args a, size_t seq, int t0,
                                                   int R, int r)
{
    int h = blockIdx.x / r, i = blockIdx.x % r, Tk = a.d.Tk;
    size_t row = ((size_t)h * R + i) * Tk;
    float lse = *lse_row(att, a, seq * a.d.heads + h, t0 + i);
    for (int j = threadIdx.x; j < Tk; j += TPB) {
        float p = expf(S[row + j] - lse);
        S[row + j] = p;
        stt(X, row + j, p);
    }
}

// dS = scale P (dP - D) into X, D = rowsum(dO O) of the row (query t0 + i
// of head h of sequence seq)
__global__ void __launch_bounds__(TPB) k_blk_dscores(const float *P, const float *dP, tr_ten X, tr_ten dout,
                                                     tr_ten out, attn_args a, size_t seq, int t0, int R, int r)
{
    __shared__ float sh[TPB];
    int h = blockIdx.x / r, i = blockIdx.x % r, Tk = a.d.Tk, dh = a.d.dh;
    size_t row = ((size_t)h * R + i) * Tk, o = seq * a.d.so + (size_t)(t0 + i) * a.d.ldo + (size_t)h * dh;
    float s = 0.0f;
    for (int j = threadIdx.x; j < dh; j += TPB) s += ldt(dout, o + j) * ldt(out, o + j);
    float D = block_sum(s, sh);
    for (int j = threadIdx.x; j < Tk; j += TPB) stt(X, row + j, a.scale * P[row + j] * (dP[row + j] - D));
}

// dst[off + r ld + col] = src[r W + col] for r < rows, col < W
__global__ void k_put_rows(tr_ten dst, size_t off, int ld, const float *src, int rows, int W)
{
    FOR_N(i, (size_t)rows * W) stt(dst, off + (i / W) * ld + i % W, src[i]);
}

// the blocked path's operands: q, k, v (and dout) of one type, the GEMMs'
// outputs (out, dq) of it or fp32
static bool blk_types(tr_ten q, tr_ten k, tr_ten v, tr_ten o)
{
    return k.dt == q.dt && v.dt == q.dt && (!o.p || o.dt == q.dt || o.dt == TR_PREC_FP32);
}

static int blk_attn_forward(tr_backend *be, tr_ten out, tr_ten att, tr_ten q, tr_ten k, tr_ten v, const tr_attn_dims *d)
{
    cuda_backend *c = CB(be);
    if (!tr_cuda_attn_blocked(d, attn_mode_for(c, d, q.dt)) || !blk_types(q, k, v, out)) return 0;
    attn_args a = attn_make(d);
    int R = tr_cuda_attn_rows(d), H = d->heads, Tk = d->Tk, dh = d->dh;
    size_t blk = (size_t)H * R * Tk;
    char *ws = static_cast<char *>(work(be, tr_cuda_attn_workspace(d, 1, 0)));
    if (!ws) return 1; // out of memory: the allocator's record, the step's error
    float *S = reinterpret_cast<float *>(ws);
    tr_ten X = tr_typed(ws + blk * sizeof(float), v.dt);
    for (int n = 0; n < d->N && !c->failed; n++)
        for (int t0 = 0; t0 < d->Tq && !c->failed; t0 += R) {
            int r = d->Tq - t0 < R ? d->Tq - t0 : R;
            gemm_sb(c, 0, 1, r, Tk, dh, a.scale, ten_at(q, n * d->sq + (size_t)t0 * d->ldq), d->ldq, dh,
                    ten_at(k, n * d->sk), d->ldk, dh, 0.0f, tr_f32(S), Tk, (long long)R * Tk, H);
            k_blk_softmax<<<(unsigned)(H * r), TPB, 0, c->st>>>(S, X, att, a, (size_t)n, t0, R, r);
            LAUNCHED(c, "k_blk_softmax");
            gemm_sb(c, 0, 0, r, dh, Tk, 1.0f, X, Tk, (long long)R * Tk, ten_at(v, n * d->sv), d->ldv, dh, 0.0f,
                    ten_at(out, n * d->so + (size_t)t0 * d->ldo), d->ldo, dh, H);
        }
    tr_mem_free(&be->mem, ws);
    return 1;
}

static int blk_attn_backward(tr_backend *be, tr_ten dq, tr_ten dk, tr_ten dv, tr_ten dout, tr_ten out, tr_ten q,
                             tr_ten k, tr_ten v, tr_ten att, const tr_attn_dims *d)
{
    cuda_backend *c = CB(be);
    if (!tr_cuda_attn_blocked(d, attn_mode_for(c, d, q.dt)) || !blk_types(q, k, v, dq) || dout.dt != q.dt) return 0;
    attn_args a = attn_make(d);
    int R = tr_cuda_attn_rows(d), H = d->heads, Tk = d->Tk, dh = d->dh, W = H * dh;
    size_t blk = (size_t)H * R * Tk, nkv = (size_t)Tk * W;
    char *ws = static_cast<char *>(work(be, tr_cuda_attn_workspace(d, 1, 1)));
    if (!ws) return 1;
    float *S = reinterpret_cast<float *>(ws), *dP = S + blk, *dKf = S + 3 * blk, *dVf = dKf + nkv;
    tr_ten X = tr_typed(S + 2 * blk, q.dt);
    for (int n = 0; n < d->N && !c->failed; n++) {
        if (dk.p) CK(c, cudaMemsetAsync(dKf, 0, nkv * sizeof(float), c->st));
        if (dv.p) CK(c, cudaMemsetAsync(dVf, 0, nkv * sizeof(float), c->st));
        for (int t0 = 0; t0 < d->Tq && !c->failed; t0 += R) {
            int r = d->Tq - t0 < R ? d->Tq - t0 : R;
            long long sS = (long long)R * Tk;
            tr_ten qn = ten_at(q, n * d->sq + (size_t)t0 * d->ldq), on = ten_at(dout, n * d->so + (size_t)t0 * d->ldo);
            gemm_sb(c, 0, 1, r, Tk, dh, a.scale, qn, d->ldq, dh, ten_at(k, n * d->sk), d->ldk, dh, 0.0f, tr_f32(S),
                    Tk, sS, H);
            k_blk_probs<<<(unsigned)(H * r), TPB, 0, c->st>>>(S, X, att, a, (size_t)n, t0, R, r);
            LAUNCHED(c, "k_blk_probs");
            if (dv.p) gemm_sb(c, 1, 0, Tk, dh, r, 1.0f, X, Tk, sS, on, d->ldo, dh, 1.0f, tr_f32(dVf), W, dh, H);
            if (!dq.p && !dk.p) continue;
            gemm_sb(c, 0, 1, r, Tk, dh, 1.0f, on, d->ldo, dh, ten_at(v, n * d->sv), d->ldv, dh, 0.0f, tr_f32(dP), Tk,
                    sS, H);
            k_blk_dscores<<<(unsigned)(H * r), TPB, 0, c->st>>>(S, dP, X, dout, out, a, (size_t)n, t0, R, r);
            LAUNCHED(c, "k_blk_dscores");
            if (dq.p) // (beta 0: the rows' dq written, never read)
                gemm_sb(c, 0, 0, r, dh, Tk, 1.0f, X, Tk, sS, ten_at(k, n * d->sk), d->ldk, dh, 0.0f,
                        ten_at(dq, n * d->sq + (size_t)t0 * d->ldq), d->ldq, dh, H);
            if (dk.p) gemm_sb(c, 1, 0, Tk, dh, r, 1.0f, X, Tk, sS, qn, d->ldq, dh, 1.0f, tr_f32(dKf), W, dh, H);
        }
        if (dk.p) {
            k_put_rows<<<grid_for(nkv), TPB, 0, c->st>>>(dk, n * d->sk, d->ldk, dKf, Tk, W);
            LAUNCHED(c, "k_put_rows");
        }
        if (dv.p) {
            k_put_rows<<<grid_for(nkv), TPB, 0, c->st>>>(dv, n * d->sv, d->ldv, dVf, Tk, W);
            LAUNCHED(c, "k_put_rows");
        }
    }
    tr_mem_free(&be->mem, ws);
    return 1;
}

} // namespace sa1b_cuda
