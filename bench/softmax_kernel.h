// The softmax step of the standard-attention baseline (the paper's "standard attention":
// S = QK^T and P = softmax(S) materialized in device memory): row-wise P = softmax(scale * S)
// with the causal mask, S and P in the 16-bit input dtype as a framework keeps them.
// Implemented in softmax_kernel.cu (nvcc, sm_90a); callable from g++-compiled code.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace fa3bench {

// scores, probs: rows x seqlen_k, row-major, fp16 (is_bf16 false) or bf16; rows =
// batch * heads * seqlen_q with the query position of row r at r % seqlen_q. Causal masking
// is bottom-right aligned: query i sees keys j <= i + seqlen_k - seqlen_q; a row that sees no
// key gets P = 0. The softmax is taken in fp32. Enqueued on `stream`; returns the launch
// status (cudaErrorInvalidValue for shapes past the grid limits).
cudaError_t launch_attention_softmax(const void* scores, void* probs, int64_t rows,
                                     int64_t seqlen_q, int64_t seqlen_k, float scale, bool causal,
                                     bool is_bf16, cudaStream_t stream);

}  // namespace fa3bench
