// backend_cuda_flash.cu - the CUDA backend's third attention path
// (SA1B_CUDA_ATTN=flash, not the default): tiles of 64 query and 64 key rows
// of one (sequence, head) in shared memory, their products on the tensor
// cores (WMMA, 16 x 16 x 16, fp32 sums), the scores never in device memory.
// It takes q, k, v (and dout) of one 16-bit type and heads of at most 64
// dimensions; other calls go the blocked or the fused way.
//
//  - forward: a block per 64 query rows; each warp keeps 16 rows' running
//    maximum and sum (online softmax), its output rows in fp32, rescaled
//    when the maximum moves; P = exp(s - running maximum) rounded to the
//    operands' type before P V (the blocked path rounds the normalised P:
//    not the same bits, within the tests' tolerances), the sum of the
//    unrounded P divided out at the end; saves the rows' lse as the others
//    do (backend.h's layout), so that any path's backward follows any
//    path's forward.
//  - backward, without float atomics (two runs give the same bits):
//    D = rowsum(dO O) from the forward's output (attn_rowdot, a warp a
//    row); a block per 64 query rows sums dQ = dS K over every key tile
//    (dS = scale P (dP - D), rounded to the operands' type as the blocked
//    path rounds it); then a block per 64 key rows sums dV = P^T dO and
//    dK = dS^T Q over the query tiles in fp32 and writes them to dk and dv
//    once.
// Every sum runs in an order fixed by the shapes.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>

#include <climits>
#include <cmath>
#include <cstdint>
#include <type_traits>

extern "C" {
#include "backend_cuda.h"
}
#include "backend_cuda_impl.cuh"

namespace sa1b_cuda {

using namespace nvcuda;

namespace {

const int FR = 64;      // the block's rows (queries; keys in dK/dV), 16 a warp
const int FT = 64;      // the rows of the other side in a tile
const int FWARPS = 4;   // warps of a block
const int FD = 64;      // the largest head (dh rounded up to 16)
const int LDH = FD + 8; // 16-bit tiles' row stride in elements (wmma: a multiple of 8)
const int LDF = FT + 4; // fp32 tiles' row stride (a multiple of 4; >= FD too)
const int LDP = FT + 8; // 16-bit tiles of FT columns
static_assert(FR == FT, "load_tile reads FR rows of either side");
static_assert(FR == FWARPS * 16, "16 rows a warp");

struct flash_args {
    tr_attn_dims d;
    float scale;
    int dt;            // TR_PREC_BF16 or TR_PREC_FP16: q, k, v, dout
    int D;             // dh rounded up to 16
};

// the bytes of each kernel's shared memory (the 16-bit tiles first, 128-byte aligned parts)
const size_t TILE16 = (size_t)FR * LDH * 2;            // 64 rows of a head
const size_t WARPF = (size_t)FWARPS * 16 * LDF * 4;    // a fp32 16 x 64 tile per warp
const size_t WARP16 = (size_t)FWARPS * 16 * LDP * 2;   // a 16-bit 16 x 64 tile per warp
const size_t ROWS = (size_t)FR * 4;                    // a float per row
const size_t SMEM_FWD = 3 * TILE16 + 2 * WARPF + WARP16 + 3 * ROWS;
const size_t SMEM_DQ = 4 * TILE16 + 2 * WARPF + WARP16 + 2 * ROWS;
const size_t SMEM_DKV = 4 * TILE16 + 2 * WARPF + 2 * WARP16 + 2 * ROWS;

template <int DT> struct elem;
template <> struct elem<TR_PREC_BF16> { typedef __nv_bfloat16 t; };
template <> struct elem<TR_PREC_FP16> { typedef __half t; };

typedef wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc_t;

// rows [r0, r0 + FR) of a head (base: its first element) into a tile of
// D columns: zeros past the last row (T) and past dh
__device__ void load_tile(uint16_t *tile, tr_ten t, size_t base, int ld, int r0, int T, int D, int dh)
{
    const uint16_t *src = static_cast<const uint16_t *>(t.p);
    if (dh % 8 == 0 && ld % 8 == 0 && reinterpret_cast<uintptr_t>(src + base) % 16 == 0) {
        // 16 bytes a thread: 8 columns (rows of LDH elements stay 16-byte aligned)
        const int C8 = D / 8;
        for (int i = threadIdx.x; i < FR * C8; i += blockDim.x) {
            int r = i / C8, c = i % C8 * 8;
            uint4 x = make_uint4(0, 0, 0, 0);
            if (r0 + r < T && c < dh) x = *reinterpret_cast<const uint4 *>(src + base + (size_t)(r0 + r) * ld + c);
            *reinterpret_cast<uint4 *>(tile + r * LDH + c) = x;
        }
        return;
    }
    for (int i = threadIdx.x; i < FR * D; i += blockDim.x) {
        int r = i / D, c = i % D;
        tile[r * LDH + c] = r0 + r < T && c < dh ? src[base + (size_t)(r0 + r) * ld + c] : (uint16_t)0;
    }
}

// the key and value rows [k0, k0 + FT) of the head (n, hoff) into Ks and
// Vs, between two barriers (every warp is done with the last tile before)
__device__ void next_kv(uint16_t *Ks, uint16_t *Vs, tr_ten k, tr_ten v, const tr_attn_dims &d, size_t n, size_t hoff,
                        int k0, int D)
{
    __syncthreads();
    load_tile(Ks, k, n * d.sk + hoff, d.ldk, k0, d.Tk, D, d.dh);
    load_tile(Vs, v, n * d.sv + hoff, d.ldv, k0, d.Tk, D, d.dh);
    __syncthreads();
}

// C (16 x 16 fp32) = sum over kk < K/16 of A[:, kk] B[kk, :]: A row-major at
// a (lda), B at b (ldb), column-major (b_col: element (k, n) at b[n ldb + k]) or row-major
template <typename T, bool B_COL>
__device__ void mm16(acc_t &c, const uint16_t *a, int lda, const uint16_t *b, int ldb, int K)
{
    typedef typename std::conditional<B_COL, wmma::col_major, wmma::row_major>::type layout_b;
    for (int kk = 0; kk < K / 16; kk++) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, T, layout_b> fb;
        wmma::load_matrix_sync(fa, reinterpret_cast<const T *>(a + kk * 16), lda);
        wmma::load_matrix_sync(fb, reinterpret_cast<const T *>(B_COL ? b + kk * 16 : b + (size_t)kk * 16 * ldb),
                               ldb);
        wmma::mma_sync(c, fa, fb, c);
    }
}

// out (16 x FT fp32, ld LDF) = A (16 x D rows at a) times the tile's FT rows transposed
template <typename T>
__device__ void scores16(float *out, const uint16_t *a, const uint16_t *tile, int D)
{
    for (int c = 0; c < FT / 16; c++) {
        acc_t acc;
        wmma::fill_fragment(acc, 0.0f);
        mm16<T, true>(acc, a, LDH, tile + (size_t)c * 16 * LDH, LDH, D);
        wmma::store_matrix_sync(out + c * 16, acc, LDF, wmma::mem_row_major);
    }
}

__device__ __forceinline__ float *lse_at(tr_ten att, const flash_args &a, size_t idx, int t)
{
    return attn_lse(att, a.d, idx, t);
}

// dst's 16 rows from t0 (of T; base: the head's first element, ld its
// row stride) = the warp's fragments f, through its fp32 tile tw
__device__ void put_rows(tr_ten dst, size_t base, int ld, acc_t (&f)[FD / 16], float *tw, int t0, int T, int D,
                         int dh)
{
    if (!dst.p) return;
    __syncwarp();
#pragma unroll
    for (int cd = 0; cd < FD / 16; cd++)
        if (cd < D / 16) wmma::store_matrix_sync(tw + cd * 16, f[cd], LDF, wmma::mem_row_major);
    __syncwarp();
    for (int e = threadIdx.x % 32; e < 16 * dh; e += 32) {
        int rr = e / dh, c = e % dh, t = t0 + rr;
        size_t o = base + (size_t)t * ld + c;
        if (t < T) stt(dst, o, tw[rr * LDF + c]);
    }
}

template <int DT>
__global__ void __launch_bounds__(FWARPS * 32) k_flash_fwd(tr_ten out, tr_ten att, tr_ten q, tr_ten k, tr_ten v,
                                                          flash_args a)
{
    typedef typename elem<DT>::t T;
    extern __shared__ __align__(128) unsigned char sm[];
    uint16_t *Qs = reinterpret_cast<uint16_t *>(sm), *Ks = Qs + FR * LDH, *Vs = Ks + FR * LDH;
    float *Ss = reinterpret_cast<float *>(Vs + FR * LDH), *Os = Ss + FWARPS * 16 * LDF;
    uint16_t *Ps = reinterpret_cast<uint16_t *>(Os + FWARPS * 16 * LDF);
    float *ms = reinterpret_cast<float *>(Ps + FWARPS * 16 * LDP), *ls = ms + FR, *cs = ls + FR;
    const tr_attn_dims &d = a.d;
    const int w = threadIdx.x / 32, lane = threadIdx.x % 32, D = a.D, q0 = blockIdx.y * FR;
    const size_t idx = blockIdx.x, n = idx / d.heads, hoff = (idx % d.heads) * d.dh;
    float *Sw = Ss + w * 16 * LDF, *Ow = Os + w * 16 * LDF;
    uint16_t *Pw = Ps + w * 16 * LDP;
    load_tile(Qs, q, n * d.sq + hoff, d.ldq, q0, d.Tq, D, d.dh);
    for (int i = threadIdx.x; i < FWARPS * 16 * LDF; i += blockDim.x) Os[i] = 0.0f;
    for (int i = threadIdx.x; i < FR; i += blockDim.x) ms[i] = -INFINITY, ls[i] = 0.0f;
    const int r = lane >> 1, half = lane & 1, row = w * 16 + r;
    const bool live = q0 + w * 16 < d.Tq;
    for (int k0 = 0; k0 < d.Tk; k0 += FT) {
        next_kv(Ks, Vs, k, v, d, n, hoff, k0, D);
        if (!live) continue; // the warp's rows are past Tq: it loads and waits, nothing more
        scores16<T>(Sw, Qs + (size_t)w * 16 * LDH, Ks, D);
        __syncwarp();
        // the online softmax: two lanes a row, 32 keys each (every other one: fewer bank conflicts)
        float *srow = Sw + r * LDF, mx = -INFINITY;
        for (int jj = 0, j = half; jj < 32; jj++, j += 2) {
            float s = k0 + j < d.Tk ? srow[j] * a.scale : -INFINITY;
            srow[j] = s;
            mx = fmaxf(mx, s);
        }
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        float mo = ms[row], mn = fmaxf(mo, mx); // finite: every tile has a key
        float corr = expf(mo - mn), sum = 0.0f;
        for (int jj = 0, j = half; jj < 32; jj++, j += 2) {
            float p = expf(srow[j] - mn);
            sum += p;
            Pw[r * LDP + j] = tr_to_16(p, DT);
        }
        float other = __shfl_xor_sync(0xffffffffu, sum, 1);
        sum = half ? other + sum : sum + other;
        __syncwarp();
        if (!half) ls[row] = ls[row] * corr + sum, ms[row] = mn, cs[row] = corr;
        __syncwarp();
        for (int e = lane; e < 16 * D; e += 32) Ow[(e / D) * LDF + e % D] *= cs[w * 16 + e / D];
        __syncwarp();
        for (int cd = 0; cd < D / 16; cd++) { // O += P V
            acc_t acc;
            wmma::load_matrix_sync(acc, Ow + cd * 16, LDF, wmma::mem_row_major);
            mm16<T, false>(acc, Pw, LDP, Vs + cd * 16, LDH, FT);
            wmma::store_matrix_sync(Ow + cd * 16, acc, LDF, wmma::mem_row_major);
        }
        __syncwarp();
    }
    for (int e = lane; e < 16 * d.dh; e += 32) {
        int rr = e / d.dh, c = e % d.dh, t = q0 + w * 16 + rr;
        if (t < d.Tq) stt(out, n * d.so + (size_t)t * d.ldo + hoff + c, Ow[rr * LDF + c] / ls[w * 16 + rr]);
    }
    if (lane < 16 && q0 + w * 16 + lane < d.Tq)
        *lse_at(att, a, idx, q0 + w * 16 + lane) = ms[w * 16 + lane] + logf(ls[w * 16 + lane]);
}

// dQ = dS K of the block's query rows over every key, D (rowsum(dO O)) from Dg
template <int DT>
__global__ void __launch_bounds__(FWARPS * 32) k_flash_dq(tr_ten dq, const float *Dg, tr_ten dout, tr_ten q, tr_ten k,
                                                         tr_ten v, tr_ten att, flash_args a)
{
    typedef typename elem<DT>::t T;
    extern __shared__ __align__(128) unsigned char sm[];
    uint16_t *Qs = reinterpret_cast<uint16_t *>(sm), *Gs = Qs + FR * LDH, *Ks = Gs + FR * LDH, *Vs = Ks + FR * LDH;
    float *Ss = reinterpret_cast<float *>(Vs + FR * LDH), *Ps = Ss + FWARPS * 16 * LDF;
    uint16_t *Xs = reinterpret_cast<uint16_t *>(Ps + FWARPS * 16 * LDF);
    float *lse = reinterpret_cast<float *>(Xs + FWARPS * 16 * LDP), *Dr = lse + FR;
    const tr_attn_dims &d = a.d;
    const int w = threadIdx.x / 32, lane = threadIdx.x % 32, D = a.D, q0 = blockIdx.y * FR;
    const size_t idx = blockIdx.x, n = idx / d.heads, hoff = (idx % d.heads) * d.dh;
    float *Sw = Ss + w * 16 * LDF, *dPw = Ps + w * 16 * LDF;
    uint16_t *Xw = Xs + w * 16 * LDP;
    load_tile(Qs, q, n * d.sq + hoff, d.ldq, q0, d.Tq, D, d.dh);
    load_tile(Gs, dout, n * d.so + hoff, d.ldo, q0, d.Tq, D, d.dh);
    for (int i = threadIdx.x; i < FR; i += blockDim.x) {
        bool in = q0 + i < d.Tq;
        lse[i] = in ? *lse_at(att, a, idx, q0 + i) : 0.0f;
        Dr[i] = in ? Dg[idx * d.Tq + q0 + i] : 0.0f;
    }
    const int r = lane >> 1, half = lane & 1, row = w * 16 + r;
    acc_t dqf[FD / 16]; // indexed by constants alone (unrolled loops): registers, not local memory
#pragma unroll
    for (int cd = 0; cd < FD / 16; cd++) wmma::fill_fragment(dqf[cd], 0.0f);
    const bool live = q0 + w * 16 < d.Tq;
    for (int k0 = 0; k0 < d.Tk; k0 += FT) {
        next_kv(Ks, Vs, k, v, d, n, hoff, k0, D); // (its first barrier also orders lse and Dr)
        if (!live) continue;
        scores16<T>(Sw, Qs + (size_t)w * 16 * LDH, Ks, D);  // S = Q K^T
        scores16<T>(dPw, Gs + (size_t)w * 16 * LDH, Vs, D); // dP = dO V^T
        __syncwarp();
        float Dt = Dr[row];
        for (int jj = 0, j = half; jj < 32; jj++, j += 2) {
            float p = k0 + j < d.Tk ? expf(Sw[r * LDF + j] * a.scale - lse[row]) : 0.0f;
            Xw[r * LDP + j] = tr_to_16(a.scale * p * (dPw[r * LDF + j] - Dt), DT);
        }
        __syncwarp();
#pragma unroll
        for (int cd = 0; cd < FD / 16; cd++)
            if (cd < D / 16) mm16<T, false>(dqf[cd], Xw, LDP, Ks + cd * 16, LDH, FT);
        __syncwarp();
    }
    put_rows(dq, n * d.sq + hoff, d.ldq, dqf, Sw, q0 + w * 16, d.Tq, D, d.dh);
}

// dV = P^T dO and dK = dS^T Q of the block's key rows over every query tile
template <int DT>
__global__ void __launch_bounds__(FWARPS * 32) k_flash_dkdv(tr_ten dk, tr_ten dv, const float *Dg, tr_ten dout,
                                                           tr_ten q, tr_ten k, tr_ten v, tr_ten att, flash_args a)
{
    typedef typename elem<DT>::t T;
    extern __shared__ __align__(128) unsigned char sm[];
    uint16_t *Ks = reinterpret_cast<uint16_t *>(sm), *Vs = Ks + FR * LDH, *Qs = Vs + FR * LDH, *Gs = Qs + FR * LDH;
    float *Ss = reinterpret_cast<float *>(Gs + FR * LDH), *Ps = Ss + FWARPS * 16 * LDF;
    uint16_t *P16 = reinterpret_cast<uint16_t *>(Ps + FWARPS * 16 * LDF), *X16 = P16 + FWARPS * 16 * LDP;
    float *lse = reinterpret_cast<float *>(X16 + FWARPS * 16 * LDP), *Dq = lse + FR;
    const tr_attn_dims &d = a.d;
    const int w = threadIdx.x / 32, lane = threadIdx.x % 32, D = a.D, k0 = blockIdx.y * FR;
    const size_t idx = blockIdx.x, n = idx / d.heads, hoff = (idx % d.heads) * d.dh;
    float *Stw = Ss + w * 16 * LDF, *dPtw = Ps + w * 16 * LDF;
    uint16_t *Pw = P16 + w * 16 * LDP, *Xw = X16 + w * 16 * LDP;
    load_tile(Ks, k, n * d.sk + hoff, d.ldk, k0, d.Tk, D, d.dh);
    load_tile(Vs, v, n * d.sv + hoff, d.ldv, k0, d.Tk, D, d.dh);
    const int r = lane >> 1, half = lane & 1;
    const bool live = k0 + w * 16 < d.Tk, key_in = k0 + w * 16 + r < d.Tk;
    acc_t dkf[FD / 16], dvf[FD / 16]; // constant indices alone, as dqf
#pragma unroll
    for (int cd = 0; cd < FD / 16; cd++) wmma::fill_fragment(dkf[cd], 0.0f), wmma::fill_fragment(dvf[cd], 0.0f);
    for (int q0 = 0; q0 < d.Tq; q0 += FT) {
        __syncthreads();
        load_tile(Qs, q, n * d.sq + hoff, d.ldq, q0, d.Tq, D, d.dh);
        load_tile(Gs, dout, n * d.so + hoff, d.ldo, q0, d.Tq, D, d.dh);
        for (int i = threadIdx.x; i < FT; i += blockDim.x) {
            bool in = q0 + i < d.Tq;
            lse[i] = in ? *lse_at(att, a, idx, q0 + i) : 0.0f;
            Dq[i] = in ? Dg[idx * d.Tq + q0 + i] : 0.0f;
        }
        __syncthreads();
        if (!live) continue; // the warp's key rows are past Tk
        scores16<T>(Stw, Ks + (size_t)w * 16 * LDH, Qs, D);  // S^T = K Q^T
        scores16<T>(dPtw, Vs + (size_t)w * 16 * LDH, Gs, D); // dP^T = V dO^T
        __syncwarp();
        for (int jj = 0, j = half; jj < 32; jj++, j += 2) {
            bool in = q0 + j < d.Tq && key_in; // a key row past Tk: zeros, never stored, kept finite
            float p = in ? expf(Stw[r * LDF + j] * a.scale - lse[j]) : 0.0f;
            float ds = in ? a.scale * p * (dPtw[r * LDF + j] - Dq[j]) : 0.0f;
            Pw[r * LDP + j] = tr_to_16(p, DT);
            Xw[r * LDP + j] = tr_to_16(ds, DT);
        }
        __syncwarp();
#pragma unroll
        for (int cd = 0; cd < FD / 16; cd++) {
            if (cd >= D / 16) continue;
            if (dv.p) mm16<T, false>(dvf[cd], Pw, LDP, Gs + cd * 16, LDH, FT); // dV += P^T dO
            if (dk.p) mm16<T, false>(dkf[cd], Xw, LDP, Qs + cd * 16, LDH, FT); // dK += dS^T Q
        }
    }
    put_rows(dk, n * d.sk + hoff, d.ldk, dkf, Stw, k0 + w * 16, d.Tk, D, d.dh); // written once
    put_rows(dv, n * d.sv + hoff, d.ldv, dvf, Stw, k0 + w * 16, d.Tk, D, d.dh);
}

bool is16(int dt) { return dt == TR_PREC_BF16 || dt == TR_PREC_FP16; }

// the calls the flash path takes: q, k, v (dout) of one 16-bit type, a
// head of at most FD dimensions, an output of that type or fp32
bool flash_takes(const tr_attn_dims *d, tr_ten q, tr_ten k, tr_ten v, const tr_ten *dout)
{
    return is16(q.dt) && k.dt == q.dt && v.dt == q.dt && (!dout || dout->dt == q.dt) && d->dh >= 1 &&
           d->dh <= FD && d->N >= 1 && d->heads >= 1 && d->Tq >= 1 && d->Tk >= 1 && (size_t)d->N * d->heads <= INT_MAX &&
           (d->Tq + FR - 1) / FR <= 65535 && (d->Tk + FR - 1) / FR <= 65535;
}

flash_args flash_make(const tr_attn_dims *d, int dt)
{
    flash_args a;
    a.d = *d;
    a.scale = 1.0f / sqrtf((float)d->dh);
    a.dt = dt;
    a.D = (d->dh + 15) / 16 * 16;
    return a;
}

// kern<BF16> or kern<FP16> on a grid of (sequences x heads, row tiles), its shared memory raised past 48 KB
#define FLASH_LAUNCH(c, kern, dt, tiles, smem, ...)                                                         \
    do {                                                                                                    \
        dim3 g_((unsigned)((size_t)a.d.N * a.d.heads), (unsigned)(tiles));                                  \
        if (dt == TR_PREC_BF16) {                                                                           \
            if (CK(c, cudaFuncSetAttribute(kern<TR_PREC_BF16>, cudaFuncAttributeMaxDynamicSharedMemorySize, \
                                           (int)(smem))))                                                   \
                break;                                                                                      \
            kern<TR_PREC_BF16><<<g_, FWARPS * 32, smem, c->st>>>(__VA_ARGS__);                              \
        } else {                                                                                            \
            if (CK(c, cudaFuncSetAttribute(kern<TR_PREC_FP16>, cudaFuncAttributeMaxDynamicSharedMemorySize, \
                                           (int)(smem))))                                                   \
                break;                                                                                      \
            kern<TR_PREC_FP16><<<g_, FWARPS * 32, smem, c->st>>>(__VA_ARGS__);                              \
        }                                                                                                   \
        LAUNCHED(c, #kern);                                                                                 \
    } while (0)

} // namespace

int flash_attn_forward(tr_backend *be, tr_ten out, tr_ten att, tr_ten q, tr_ten k, tr_ten v, const tr_attn_dims *d)
{
    cuda_backend *c = CB(be);
    if (!flash_takes(d, q, k, v, nullptr) || !(out.dt == q.dt || out.dt == TR_PREC_FP32)) return 0;
    if (c->failed) return 1;
    flash_args a = flash_make(d, q.dt);
    FLASH_LAUNCH(c, k_flash_fwd, q.dt, (d->Tq + FR - 1) / FR, SMEM_FWD, out, att, q, k, v, a);
    return 1;
}

int flash_attn_backward(tr_backend *be, tr_ten dq, tr_ten dk, tr_ten dv, tr_ten dout, tr_ten out, tr_ten q, tr_ten k,
                        tr_ten v, tr_ten att, const tr_attn_dims *d)
{
    cuda_backend *c = CB(be);
    if (!flash_takes(d, q, k, v, &dout)) return 0;
    if (c->failed) return 1;
    flash_args a = flash_make(d, q.dt);
    float *Dg = static_cast<float *>(work(be, tr_cuda_attn_workspace(d, 0, 1)));
    if (!Dg) return 1; // out of memory: the allocator's record, the step's error
    attn_rowdot(c, Dg, dout, out, d);
    if (!c->failed && dq.p)
        FLASH_LAUNCH(c, k_flash_dq, q.dt, (d->Tq + FR - 1) / FR, SMEM_DQ, dq, Dg, dout, q, k, v, att, a);
    if (!c->failed && (dk.p || dv.p))
        FLASH_LAUNCH(c, k_flash_dkdv, q.dt, (d->Tk + FR - 1) / FR, SMEM_DKV, dk, dv, Dg, dout, q, k, v, att, a);
    tr_mem_free(&be->mem, Dg);
    return 1;
}

} // namespace sa1b_cuda
