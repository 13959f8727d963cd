// The cuBLAS calls PowerSGD's device path makes (codecs/cuda/cublas_library.h), for the CUDA
// runtime model: built as libcublas.so.<major> beside the model's libcudart, where
// cublas_library.cpp's dlopen finds it first. Its GEMM runs on the handle's stream as one of the
// model's host kernels (fakeCudaLaunchHostKernel in fake_cudart.cpp), so it is ordered, lazily
// loaded and faulted as a kernel, and reads device memory through the model's view of it. The
// sums run in order over k in fp32: the device path's tests allow cuBLAS's rounding, not this.
#include <cublas_api.h>
#include <cuda_runtime_api.h>

#include <cstdio>

#include "fake_cudart_extensions.h"

namespace {

struct Handle {
  cudaStream_t stream = nullptr;
};

struct Gemm {
  bool transpose_a, transpose_b;
  int m, n, k, lda, ldb, ldc;
  float alpha, beta;
  const float *a, *b;
  float* c;
};

int run_gemm(void* work, char*, size_t) {
  const Gemm& g = *static_cast<const Gemm*>(work);
  for (int j = 0; j < g.n; ++j) {
    for (int i = 0; i < g.m; ++i) {
      float sum = 0.0f;
      for (int l = 0; l < g.k; ++l) {
        const float a = g.transpose_a ? g.a[l + i * g.lda] : g.a[i + l * g.lda];
        const float b = g.transpose_b ? g.b[j + l * g.ldb] : g.b[l + j * g.ldb];
        sum += a * b;
      }
      float& c = g.c[i + j * g.ldc];
      c = g.beta == 0.0f ? g.alpha * sum : g.alpha * sum + g.beta * c;
    }
  }
  return 0;
}

}  // namespace

extern "C" {

// cuBLAS's creation waits for every stream (perf/RESULTS.md, "First GPU runs").
cublasStatus_t cublasCreate_v2(cublasHandle_t* handle) {
  if (handle == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  if (cudaDeviceSynchronize() != cudaSuccess) return CUBLAS_STATUS_NOT_INITIALIZED;
  *handle = reinterpret_cast<cublasHandle_t>(new Handle());
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t handle) {
  delete reinterpret_cast<Handle*>(handle);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t) {
  return handle == nullptr ? CUBLAS_STATUS_NOT_INITIALIZED : CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  reinterpret_cast<Handle*>(handle)->stream = stream;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSgemm_v2(cublasHandle_t handle, cublasOperation_t transa,
                              cublasOperation_t transb, int m, int n, int k, const float* alpha,
                              const float* a, int lda, const float* b, int ldb, const float* beta,
                              float* c, int ldc) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (m < 0 || n < 0 || k < 0 || alpha == nullptr || beta == nullptr ||
      (transa != CUBLAS_OP_N && transa != CUBLAS_OP_T) ||
      (transb != CUBLAS_OP_N && transb != CUBLAS_OP_T) || lda < (transa == CUBLAS_OP_N ? m : k) ||
      ldb < (transb == CUBLAS_OP_N ? k : n) || ldc < m || lda < 1 || ldb < 1 || ldc < 1) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (m == 0 || n == 0) return CUBLAS_STATUS_SUCCESS;
  static const auto launch =
      fake_cudart::entry<fake_cudart::LaunchHostKernel>("fakeCudaLaunchHostKernel");
  static const auto view = fake_cudart::entry<fake_cudart::KernelView>("fakeCudaKernelView");
  if (launch == nullptr || view == nullptr) {
    fprintf(stderr, "fake cuBLAS: loaded without the CUDA runtime model\n");
    return CUBLAS_STATUS_NOT_INITIALIZED;
  }
  auto* gemm = new Gemm{transa == CUBLAS_OP_T,
                        transb == CUBLAS_OP_T,
                        m,
                        n,
                        k,
                        lda,
                        ldb,
                        ldc,
                        *alpha,
                        *beta,
                        static_cast<const float*>(view(a)),
                        static_cast<const float*>(view(b)),
                        static_cast<float*>(view(c))};
  const cudaError_t error = launch(reinterpret_cast<const void*>(&run_gemm), "cublasSgemm", dim3(1),
                                   dim3(1), reinterpret_cast<Handle*>(handle)->stream, run_gemm,
                                   gemm, [](void* work) { delete static_cast<Gemm*>(work); });
  return error == cudaSuccess ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
}

}  // extern "C"
