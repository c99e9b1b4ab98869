// cuda_probe.cu - one kernel and a cuBLAS handle (see cuda_probe.h).
#include "cuda_probe.h"

#include <cstdio>
#include <cstdlib>
#include <cublas_v2.h>
#include <cuda_runtime.h>

__global__ static void probe_add(const float *a, const float *b, float *c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}

extern "C" int cuda_probe_run(int n, char *msg, size_t msg_size)
{
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
        snprintf(msg, msg_size, "no CUDA device: %s", e != cudaSuccess ? cudaGetErrorString(e) : "none found");
        return CUDA_PROBE_NO_DEVICE;
    }
    cudaDeviceProp prop;
    cudaGetDeviceProperties(&prop, 0);
    size_t bytes = (size_t)n * sizeof(float);
    float *h = (float *)malloc(3 * bytes), *d = nullptr;
    if (!h) { snprintf(msg, msg_size, "out of host memory"); return CUDA_PROBE_FAILED; }
    for (int i = 0; i < n; i++) { h[i] = (float)i; h[n + i] = 2.0f * (float)i; }
    int rc = CUDA_PROBE_OK;
    if (cudaMalloc(&d, 3 * bytes) != cudaSuccess) { rc = CUDA_PROBE_FAILED; goto out; }
    cudaMemcpy(d, h, 2 * bytes, cudaMemcpyHostToDevice);
    probe_add<<<(n + 255) / 256, 256>>>(d, d + n, d + 2 * n, n);
    if (cudaGetLastError() != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess) { rc = CUDA_PROBE_FAILED; goto out; }
    cudaMemcpy(h + 2 * n, d + 2 * n, bytes, cudaMemcpyDeviceToHost);
    for (int i = 0; i < n; i++)
        if (h[2 * n + i] != 3.0f * (float)i) { rc = CUDA_PROBE_FAILED; break; }
    {
        cublasHandle_t handle;
        if (cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS) rc = CUDA_PROBE_FAILED;
        else cublasDestroy(handle);
    }
out:
    if (d) cudaFree(d);
    free(h);
    if (rc == CUDA_PROBE_OK) snprintf(msg, msg_size, "%s: kernel and cuBLAS handle ok", prop.name);
    else snprintf(msg, msg_size, "%s: probe failed", prop.name);
    return rc;
}
