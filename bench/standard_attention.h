// The baseline of the paper's comparisons: "standard attention", S = QK^T and
// P = softmax(scale * S) materialized in device memory in the input dtype (GEMM, softmax,
// GEMM), as a framework computes it. The GEMMs are cuBLAS's, loaded at run time (dlopen; no
// link dependency), the softmax is softmax_kernel.cu.
#pragma once

#include <cuda_runtime_api.h>
#include <cublas_api.h>

#include <cstddef>
#include <memory>
#include <string>

#include "baseline_gemms.h"
#include "cuda_util.h"
#include "problems.h"

namespace fa3bench {

class Cublas {
 public:
  // Loads libcublas.so.13 (then libcublas.so) and creates a handle that launches on `stream`.
  // nullptr when it cannot, with the reason in *why.
  static std::unique_ptr<Cublas> load(cudaStream_t stream, std::string* why);
  ~Cublas();
  Cublas(const Cublas&) = delete;
  Cublas& operator=(const Cublas&) = delete;

  const std::string& library_name() const { return library_name_; }
  // fp32 accumulation, 16-bit A, B and C of `type` (CUDA_R_16F / CUDA_R_16BF).
  Outcome gemm(const StridedBatchedGemm& g, cudaDataType type, const char* what);

 private:
  Cublas() = default;
  std::string status_name(cublasStatus_t s) const;

  using CreateFn = cublasStatus_t (*)(cublasHandle_t*);
  using DestroyFn = cublasStatus_t (*)(cublasHandle_t);
  using SetStreamFn = cublasStatus_t (*)(cublasHandle_t, cudaStream_t);
  using GemmFn = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int,
                                    int, const void*, const void*, cudaDataType, int, long long int,
                                    const void*, cudaDataType, int, long long int, const void*,
                                    void*, cudaDataType, int, long long int, int,
                                    cublasComputeType_t, cublasGemmAlgo_t);
  using StatusStringFn = const char* (*)(cublasStatus_t);

  void* library_ = nullptr;
  std::string library_name_;
  cublasHandle_t handle_ = nullptr;
  cudaStream_t stream_ = nullptr;
  CreateFn create_ = nullptr;
  DestroyFn destroy_ = nullptr;
  SetStreamFn set_stream_ = nullptr;
  GemmFn gemm_ = nullptr;
  StatusStringFn status_string_ = nullptr;  // optional, for messages
};

// Device memory the baseline needs besides the inputs: S and P, batch*heads*Sq*Sk 16-bit
// values each.
size_t standard_attention_scratch_bytes(const Problem& p);

// Enqueues S = QK^T, P = softmax(S / sqrt(head_dim)) (causal-masked), O = PV on `stream`
// (the one `cublas` launches on). scores, probs: standard_attention_scratch_bytes(p) / 2
// bytes each.
Outcome run_standard_attention(Cublas& cublas, const Problem& p, const AttentionBuffers& buffers,
                               void* scores, void* probs, cudaStream_t stream);

}  // namespace fa3bench
