// The rules on tensor descriptors that fa3_forward's and fa3_backward's checks share. Pure
// host code: runs and is tested without a GPU.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "fa3/fa3.h"
#include "kernels/fwd_config.h"
#include "runtime/error.h"

namespace fa3 {

// The largest sequence length, head count and batch fa3 accepts: kernels index rows with
// 32-bit integers and the grid has at most 2^31 - 1 blocks.
constexpr int64_t kMaxExtent = 2147483647;
// The longest sequence the kernels take: they index rows and keys with 32-bit integers, also
// after rounding a length up to whole blocks of up to 256 rows or keys (lab kernels have
// 176-256), and a causal forward adds seqlen_k to a row index up to seqlen_q + 255: with
// lengths (and, causal, their sum) at most 2^31 - 256, none of these passes 2^31 - 1.
constexpr int64_t kMaxBlockedSeqlen = kMaxExtent - 255;

// Rules on one tensor descriptor, and whether two share memory, with the forward's sentences.
// No heap allocation on the success path: the checks run on every call.
namespace tensor_rules {

using Int128 = __int128;

Error invalid(const std::string& message);  // FA3_ERR_INVALID_ARGUMENT
std::string num(int64_t v);
std::string pointer_text(const void* p);
const char* dtype_text(fa3_dtype d);  // "FA3_BF16"

struct Dim {
  const char* name;  // "batch", "seqlen", "heads"
  int64_t size;
  int64_t stride;    // elements
  const char* stride_name;
};
std::array<Dim, 3> outer_dims(const fa3_tensor& t);

// Byte range [first, last] the tensor's elements occupy (strides positive where size > 1).
struct ByteRange {
  Int128 first, last;
};
ByteRange byte_range(const fa3_tensor& t, int64_t element_bytes);
bool overlaps(const ByteRange& a, const ByteRange& b);

// batch, seqlen and heads in [1, kMaxExtent].
Error check_sizes(const fa3_tensor& t, const char* name);
// seqlen at most kMaxBlockedSeqlen; `call` names the function in the sentence.
Error check_seqlen_for_blocks(const fa3_tensor& t, const char* name, const char* call);
// The rules every layout shares, around a layout's own rule for a dimension: each dimension
// that steps (size > 1) has a positive stride, then passes `dim_rule(d, field)` (field:
// "<name>-><stride_name>"); the tensor's last byte lies below 2^64. The first broken rule is
// reported.
template <class DimRule>
Error check_strides(const fa3_tensor& t, const char* name, int64_t element_bytes,
                    DimRule dim_rule) {
  for (const Dim& d : outer_dims(t)) {
    if (d.size == 1) continue;
    const std::string field = std::string(name) + "->" + d.stride_name;
    if (d.stride <= 0)
      return invalid(field + " must be positive when " + name + "->" + d.name + " > 1 (got " +
                     num(d.stride) + ")");
    Error e = dim_rule(d, field);
    if (e.failed()) return e;
  }
  if (byte_range(t, element_bytes).last >= (static_cast<Int128>(1) << 64))
    return invalid(std::string(name) + " extends past the end of the address space (its sizes and strides overflow 64-bit addresses)");
  return Error::ok();
}

// TMA's rules (cuTensorMapEncodeTiled): 16-byte aligned base, strides positive multiples of
// 16 bytes below 2^40. A dimension of size 1 is never stepped along, so its stride is free.
Error check_layout(const fa3_tensor& t, const char* name, int64_t element_bytes);
// No two elements of an output may share memory: the kernels write every element exactly
// once, in parallel.
Error check_no_self_overlap(const fa3_tensor& t, const char* name);
// The fields of fa3_params both directions read (p may be NULL: the defaults): causal 0 or
// 1, softmax_scale finite and >= 0; *causal and *scale (0 -> 1/sqrt(head_dim)) on success.
// Reads nothing past softmax_scale and causal (callers built against the first, shorter
// fa3_params pass it to fa3_forward).
Error check_attention_params(const fa3_params* p, int64_t head_dim, bool* causal, float* scale);
// "<t_name>-><field> (t_value) must equal <ref_name>-><field> (ref_value)"
Error check_same(const char* field, const char* t_name, int64_t t_value, const char* ref_name,
                 int64_t ref_value);
// The shape fields a ForwardProblem and a BackwardProblem share, from the checked q and k.
template <class Problem>
void set_problem_shape(const fa3_tensor& q, const fa3_tensor& k, Problem* prob) {
  prob->dtype = q.dtype == FA3_BF16 ? DType::BF16 : DType::F16;
  prob->head_dim = static_cast<int>(q.head_dim);
  prob->batch = q.batch;
  prob->seqlen_q = q.seqlen;
  prob->seqlen_k = k.seqlen;
  prob->heads = q.heads;
  prob->heads_kv = k.heads;
}

// The descriptor and its data are not NULL.
Error check_present(const fa3_tensor* t, const char* name);
// t's dtype is q's.
Error check_dtype(const fa3_tensor& t, const char* name, const fa3_tensor& q);
// batch, seqlen, heads and head_dim of `t` equal those of `ref`.
Error check_shape(const fa3_tensor& t, const char* name, const fa3_tensor& ref,
                  const char* ref_name);
// The bytes of the fp32 (batch, heads, seqlen_q) LSE of q's problem.
Int128 lse_bytes(const fa3_tensor& q);

// Whether two tensors of 2-byte elements share an element. Exact where every dimension that
// both step along has one stride in both (views of one packed buffer, or equal layouts);
// Unknown where fa3 cannot tell cheaply (different strides over interleaved byte ranges).
enum class Sharing { None, Some, Unknown };
Sharing element_sharing(const fa3_tensor& a, const fa3_tensor& b);
// A contiguous byte buffer as a tensor of 2-byte elements (one row), for element_sharing.
fa3_tensor as_row(const void* data, Int128 bytes);
// "<a> overlaps <b> in memory: <rule>", or for Unknown why fa3 cannot tell them apart.
Error sharing_error(Sharing s, const char* a, const char* b, const char* rule);

}  // namespace tensor_rules

}  // namespace fa3
