#include "standard_attention.h"

#include <dlfcn.h>

#include <cmath>

#include "softmax_kernel.h"

namespace fa3bench {

namespace {

template <typename Fn>
Fn symbol(void* library, const char* name) {
  return reinterpret_cast<Fn>(dlsym(library, name));
}

// The toolkit's directory as a last resort, for machines whose loader path lacks it.
constexpr const char* kCublasNames[] = {"libcublas.so.13", "libcublas.so",
                                        "/usr/local/cuda/lib64/libcublas.so.13"};

}  // namespace

std::unique_ptr<Cublas> Cublas::load(cudaStream_t stream, std::string* why) {
  std::unique_ptr<Cublas> c(new Cublas);
  for (const char* name : kCublasNames) {
    c->library_ = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (c->library_) {
      c->library_name_ = name;
      break;
    }
  }
  if (!c->library_) {
    *why = "libcublas.so.13 could not be loaded";
    return nullptr;
  }
  c->create_ = symbol<CreateFn>(c->library_, "cublasCreate_v2");
  c->destroy_ = symbol<DestroyFn>(c->library_, "cublasDestroy_v2");
  c->set_stream_ = symbol<SetStreamFn>(c->library_, "cublasSetStream_v2");
  c->gemm_ = symbol<GemmFn>(c->library_, "cublasGemmStridedBatchedEx");
  c->status_string_ = symbol<StatusStringFn>(c->library_, "cublasGetStatusString");
  if (!c->create_ || !c->destroy_ || !c->set_stream_ || !c->gemm_) {
    *why = c->library_name_ + " lacks cublasCreate_v2, cublasDestroy_v2, cublasSetStream_v2 or "
                              "cublasGemmStridedBatchedEx";
    return nullptr;
  }
  cublasStatus_t s = c->create_(&c->handle_);
  if (s != CUBLAS_STATUS_SUCCESS) {
    c->handle_ = nullptr;
    *why = "cublasCreate failed: " + c->status_name(s);
    return nullptr;
  }
  s = c->set_stream_(c->handle_, stream);
  if (s != CUBLAS_STATUS_SUCCESS) {
    *why = "cublasSetStream failed: " + c->status_name(s);
    return nullptr;
  }
  c->stream_ = stream;
  return c;
}

Cublas::~Cublas() {
  if (handle_) destroy_(handle_);
  if (library_) dlclose(library_);
}

std::string Cublas::status_name(cublasStatus_t s) const {
  const std::string number = "status " + std::to_string(static_cast<int>(s));
  return status_string_ ? std::string(status_string_(s)) + " (" + number + ")" : number;
}

Outcome Cublas::gemm(const StridedBatchedGemm& g, cudaDataType type, const char* what) {
  const float one = 1.0f, zero = 0.0f;
  const cublasStatus_t s =
      gemm_(handle_, g.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, g.m, g.n, g.k, &one,
            g.a, type, g.lda, g.stride_a, g.b, type, g.ldb, g.stride_b, &zero, g.c, type, g.ldc,
            g.stride_c, g.batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  if (s == CUBLAS_STATUS_SUCCESS) return Outcome::success();
  // A GEMM that failed on the GPU leaves a sticky CUDA error: then the context is gone.
  const cudaError_t e = cudaStreamQuery(stream_);
  if (e != cudaSuccess && e != cudaErrorNotReady)
    return cuda_outcome(e, std::string(what) + " (after " + status_name(s) + ")");
  return Outcome::failure(std::string(what) + " failed: " + status_name(s));
}

size_t standard_attention_scratch_bytes(const Problem& p) {
  const size_t scores = static_cast<size_t>(p.batch * p.heads) * static_cast<size_t>(p.seqlen_q) *
                        static_cast<size_t>(p.seqlen_k) * 2;
  return 2 * scores;  // S and P
}

Outcome run_standard_attention(Cublas& cublas, const Problem& p, const AttentionBuffers& buffers,
                               void* scores, void* probs, cudaStream_t stream) {
  if (!fits_32bit_dimensions(p))
    return Outcome::failure("the shape exceeds cuBLAS's and the softmax grid's 32-bit sizes");
  const cudaDataType type = p.dtype == DType::BF16 ? CUDA_R_16BF : CUDA_R_16F;
  const std::vector<HeadGroup> groups = head_groups(p);
  for (const HeadGroup& hg : groups) {
    const Outcome o = cublas.gemm(scores_gemm(p, buffers, scores, hg), type,
                                  "cublasGemmStridedBatchedEx (S = QK^T)");
    if (!o.ok) return o;
  }
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(p.head_dim)));
  Outcome o = cuda_outcome(
      launch_attention_softmax(scores, probs, p.query_rows(), p.seqlen_q, p.seqlen_k, scale,
                               p.causal, p.dtype == DType::BF16, stream),
      "softmax kernel launch");
  if (!o.ok) return o;
  for (const HeadGroup& hg : groups) {
    o = cublas.gemm(output_gemm(p, buffers, probs, hg), type, "cublasGemmStridedBatchedEx (O = PV)");
    if (!o.ok) return o;
  }
  return Outcome::success();
}

}  // namespace fa3bench
