#include "runtime/tensor_rules.h"

#include <algorithm>
#include <array>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <string>

namespace fa3 {

namespace tensor_rules {

Error invalid(const std::string& message) { return make_error(FA3_ERR_INVALID_ARGUMENT, message); }

std::string num(int64_t v) { return std::to_string(v); }

std::string pointer_text(const void* p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%p", p);
  return buf;
}

const char* dtype_text(fa3_dtype d) {
  switch (d) {
    case FA3_F16: return "FA3_F16";
    case FA3_BF16: return "FA3_BF16";
    case FA3_E4M3: return "FA3_E4M3";
    case FA3_F32: return "FA3_F32";
  }
  return "an unknown dtype";
}

std::array<Dim, 3> outer_dims(const fa3_tensor& t) {
  return {{{"batch", t.batch, t.stride_batch, "stride_batch"},
          {"seqlen", t.seqlen, t.stride_seq, "stride_seq"},
          {"heads", t.heads, t.stride_head, "stride_head"}}};
}

ByteRange byte_range(const fa3_tensor& t, int64_t element_bytes) {
  Int128 last = t.head_dim - 1;
  for (const Dim& d : outer_dims(t)) last += static_cast<Int128>(d.size - 1) * d.stride;
  const Int128 base = static_cast<Int128>(reinterpret_cast<uintptr_t>(t.data));
  return {base, base + last * element_bytes + element_bytes - 1};
}
bool overlaps(const ByteRange& a, const ByteRange& b) { return a.first <= b.last && b.first <= a.last; }

Error check_sizes(const fa3_tensor& t, const char* name) {
  for (const Dim& d : outer_dims(t)) {
    if (d.size < 1)
      return invalid(std::string(name) + "->" + d.name + " must be >= 1 (got " + num(d.size) + ")");
    if (d.size > kMaxExtent)
      return invalid(std::string(name) + "->" + d.name + " must be at most 2147483647 (got " +
                     num(d.size) + ")");
  }
  return Error::ok();
}

Error check_seqlen_for_blocks(const fa3_tensor& t, const char* name, const char* call) {
  if (t.seqlen <= kMaxBlockedSeqlen) return Error::ok();
  return invalid(std::string(name) + "->seqlen must be at most " + num(kMaxBlockedSeqlen) +
                 " for " + call + " (got " + num(t.seqlen) +
                 "): rounded up to whole blocks it must stay below 2^31");
}

Error check_layout(const fa3_tensor& t, const char* name, int64_t element_bytes) {
  if (reinterpret_cast<uintptr_t>(t.data) % 16 != 0)
    return invalid(std::string(name) + "->data (" + pointer_text(t.data) +
                   ") must be 16-byte aligned (TMA)");
  return check_strides(t, name, element_bytes, [&](const Dim& d, const std::string& field) {
    const Int128 bytes = static_cast<Int128>(d.stride) * element_bytes;
    if (bytes % 16 != 0)
      return invalid(field + " (" + num(d.stride) + " elements = " +
                     num(static_cast<int64_t>(bytes)) +
                     " bytes) must be a multiple of 16 bytes (TMA)");
    if (bytes >= (static_cast<Int128>(1) << 40))
      return invalid(field + " (" + num(d.stride) + " elements) must be below 2^40 bytes (TMA)");
    return Error::ok();
  });
}

// Sorting the dimensions of size > 1 by stride, each stride must reach past the
// extent of the dimensions inside it: from their first element to their last, stride *
// (size - 1) of each plus head_dim (not stride * size, which would refuse a dimension that
// fits in the padding of the one outside it).
Error check_no_self_overlap(const fa3_tensor& t, const char* name) {
  std::array<Dim, 3> dims = outer_dims(t);
  // Dimensions of size 1 never step: sort them out of the way (stride "infinite").
  std::sort(dims.begin(), dims.end(), [](const Dim& a, const Dim& b) {
    if ((a.size > 1) != (b.size > 1)) return a.size > 1;
    return a.stride < b.stride;
  });
  Int128 extent = t.head_dim;  // elements covered by the dimensions inside the current one
  const char* inner = "head_dim";
  for (const Dim& d : dims) {
    if (d.size == 1) break;
    if (static_cast<Int128>(d.stride) < extent)
      return invalid(std::string(name) + "->" + d.stride_name + " (" + num(d.stride) +
                     ") is smaller than the extent of " + name + "'s " + inner +
                     " dimension(s) (" + num(static_cast<int64_t>(extent)) +
                     " elements): different elements of the output would share memory");
    extent += static_cast<Int128>(d.stride) * (d.size - 1);
    inner = d.name;
  }
  return Error::ok();
}

Error check_attention_params(const fa3_params* p, int64_t head_dim, bool* causal, float* scale) {
  if (p == nullptr) {
    *causal = false;
    *scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim)));
    return Error::ok();
  }
  if (p->causal != 0 && p->causal != 1)
    return invalid("p->causal must be 0 or 1 (got " + num(p->causal) + ")");
  if (!(p->softmax_scale >= 0.0f) || std::isinf(p->softmax_scale))
    return invalid("p->softmax_scale must be finite and > 0, or 0 for 1/sqrt(head_dim) (got " +
                   std::to_string(p->softmax_scale) + ")");
  // The kernels scale by softmax_scale * log2(e) in float: past FLT_MAX / log2(e) that is inf,
  // and every output NaN.
  if (static_cast<double>(p->softmax_scale) * M_LOG2E > static_cast<double>(FLT_MAX)) {
    char got[32];
    std::snprintf(got, sizeof got, "%g", static_cast<double>(p->softmax_scale));
    return invalid(std::string("p->softmax_scale is ") + got +
                   ": softmax_scale * log2(e), which the kernels use, must fit in a float, so "
                   "the scale must be at most FLT_MAX / log2(e), about 2.3587e+38");
  }
  *causal = p->causal == 1;
  *scale = p->softmax_scale != 0.0f
               ? p->softmax_scale
               : static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim)));
  return Error::ok();
}

Error check_same(const char* field, const char* t_name, int64_t t_value, const char* ref_name,
                 int64_t ref_value) {
  if (t_value == ref_value) return Error::ok();
  return invalid(std::string(t_name) + "->" + field + " (" + num(t_value) + ") must equal " +
                 ref_name + "->" + field + " (" + num(ref_value) + ")");
}

// Each of these names the argument and the rule in its sentence.
Error check_present(const fa3_tensor* t, const char* name) {
  if (!t) return invalid(std::string(name) + " is NULL: pass a tensor descriptor");
  if (!t->data) return invalid(std::string(name) + "->data is NULL");
  return Error::ok();
}

Error check_dtype(const fa3_tensor& t, const char* name, const fa3_tensor& q) {
  if (t.dtype == q.dtype) return Error::ok();
  return invalid(std::string(name) + "->dtype (" + dtype_text(t.dtype) + ") must equal q->dtype (" +
                 dtype_text(q.dtype) + ")");
}

// batch, seqlen, heads and head_dim of `t` equal those of `ref`.
Error check_shape(const fa3_tensor& t, const char* name, const fa3_tensor& ref,
                  const char* ref_name) {
  const char* fields[] = {"batch", "seqlen", "heads", "head_dim"};
  const int64_t values[] = {t.batch, t.seqlen, t.heads, t.head_dim};
  const int64_t ref_values[] = {ref.batch, ref.seqlen, ref.heads, ref.head_dim};
  for (int i = 0; i < 4; ++i) {
    Error e = check_same(fields[i], name, values[i], ref_name, ref_values[i]);
    if (e.failed()) return e;
  }
  return Error::ok();
}

Int128 lse_bytes(const fa3_tensor& q) {
  return static_cast<Int128>(q.batch) * q.heads * q.seqlen * 4;
}

namespace {

Int128 address(const void* p) { return static_cast<Int128>(reinterpret_cast<uintptr_t>(p)); }

Int128 floor_div(Int128 a, Int128 b) {  // b > 0
  Int128 q = a / b;
  if (a % b != 0 && a < 0) --q;
  return q;
}
Int128 ceil_div(Int128 a, Int128 b) { return -floor_div(-a, b); }

struct Axis {
  Int128 stride;
  int64_t a_size, b_size;
};

// Innermost (smallest stride) first; at most three axes.
void sort_by_stride(Axis* axes, int count) {
  for (int i = 1; i < count; ++i)
    for (int j = i; j > 0 && axes[j].stride < axes[j - 1].stride; --j)
      std::swap(axes[j], axes[j - 1]);
}

// Whether delta = sum over axes 0..level of y_i * stride_i + e has a solution with y_i in
// [-(b_size - 1), a_size - 1] and the rest in [lowest[level], highest[level]] (see
// element_sharing). Each axis admits the y whose remainder fits below it; where the strides
// nest (each one at least the extent inside it) those are at most two.
Sharing solve(const Axis* axes, const Int128* lowest, const Int128* highest, int level,
              Int128 delta) {
  if (level < 0) return lowest[0] <= delta && delta <= highest[0] ? Sharing::Some : Sharing::None;
  const Axis& a = axes[level];
  const Int128 y_min =
      std::max<Int128>(-(a.b_size - 1), ceil_div(delta - highest[level], a.stride));
  const Int128 y_max =
      std::min<Int128>(a.a_size - 1, floor_div(delta - lowest[level], a.stride));
  if (y_max - y_min + 1 > 4) return Sharing::Unknown;
  Sharing result = Sharing::None;
  for (Int128 y = y_min; y <= y_max; ++y) {
    const Sharing s = solve(axes, lowest, highest, level - 1, delta - y * a.stride);
    if (s == Sharing::Some) return s;
    if (s == Sharing::Unknown) result = s;
  }
  return result;
}

// The dimensions of `t` that step (size > 1), innermost first; false when they do not nest
// (a stride below the extent of what lies inside it: elements may repeat).
bool nested_axes(const fa3_tensor& t, Axis* axes, int* count) {
  *count = 0;
  for (const Dim& d : outer_dims(t))
    if (d.size > 1) axes[(*count)++] = {d.stride, d.size, d.size};
  sort_by_stride(axes, *count);
  Int128 extent = t.head_dim;
  for (int i = 0; i < *count; ++i) {
    if (axes[i].stride < extent) return false;
    extent += static_cast<Int128>(axes[i].a_size - 1) * axes[i].stride;
  }
  return true;
}

// The smallest element offset >= x of a tensor with nested axes 0..level (head_dim columns
// innermost), or -1 when there is none. Along a nested axis, the elements at y * stride + (the
// inner ones) all lie below (y + 1) * stride, so the first candidate is in block floor(x /
// stride), else at the start of the next block.
Int128 next_element(const Axis* axes, int level, int64_t head_dim, Int128 x) {
  if (x <= 0) return 0;
  if (level < 0) return x < head_dim ? x : -1;
  const Axis& a = axes[level];
  const Int128 y = std::min<Int128>(x / a.stride, a.a_size - 1);
  const Int128 inner = next_element(axes, level - 1, head_dim, x - y * a.stride);
  if (inner >= 0) return y * a.stride + inner;
  return y + 1 < a.a_size ? (y + 1) * a.stride : -1;
}

}  // namespace

Sharing element_sharing(const fa3_tensor& a, const fa3_tensor& b) {
  if (!overlaps(byte_range(a, 2), byte_range(b, 2))) return Sharing::None;
  const Int128 delta_bytes = address(b.data) - address(a.data);
  if (delta_bytes % 2 != 0) return Sharing::Unknown;
  // One of them a single run of elements (lse, a workspace, one row): whether the other has an
  // element inside it, exactly when the other's dimensions nest.
  const bool a_is_run = a.batch == 1 && a.seqlen == 1 && a.heads == 1;
  const bool b_is_run = b.batch == 1 && b.seqlen == 1 && b.heads == 1;
  if (a_is_run || b_is_run) {
    const fa3_tensor& run = a_is_run ? a : b;
    const fa3_tensor& other = a_is_run ? b : a;
    Axis nested[3];
    int levels = 0;
    if (nested_axes(other, nested, &levels)) {
      const Int128 start = (address(run.data) - address(other.data)) / 2;  // in other's elements
      const Int128 next = next_element(nested, levels - 1, other.head_dim, start);
      return next >= 0 && next < start + run.head_dim ? Sharing::Some : Sharing::None;
    }
  }
  // Element (x, c) of a (x: batch, seq, head indices; c: column) sits at sum x_i s_i + c from
  // a.data, element (x', c') of b at delta + sum x'_i s_i + c'. They coincide when delta =
  // sum y_i s_i + e, with y_i = x_i - x'_i and e = c - c' in [-(b.head_dim - 1), a.head_dim - 1].
  Axis axes[3];
  int count = 0;
  const auto da = outer_dims(a), db = outer_dims(b);
  for (int i = 0; i < 3; ++i) {
    if (da[i].size == 1 && db[i].size == 1) continue;
    if (da[i].size > 1 && db[i].size > 1 && da[i].stride != db[i].stride) return Sharing::Unknown;
    axes[count++] = {da[i].size > 1 ? da[i].stride : db[i].stride, da[i].size, db[i].size};
  }
  sort_by_stride(axes, count);
  // lowest[i], highest[i]: what the axes below i and the columns can add up to.
  Int128 lowest[4], highest[4];
  lowest[0] = -(b.head_dim - 1);
  highest[0] = a.head_dim - 1;
  for (int i = 0; i < count; ++i) {
    lowest[i + 1] = lowest[i] - static_cast<Int128>(axes[i].b_size - 1) * axes[i].stride;
    highest[i + 1] = highest[i] + static_cast<Int128>(axes[i].a_size - 1) * axes[i].stride;
  }
  return solve(axes, lowest, highest, count - 1, delta_bytes / 2);
}

fa3_tensor as_row(const void* data, Int128 bytes) {
  fa3_tensor t{};
  t.data = const_cast<void*>(data);
  t.dtype = FA3_F16;
  t.batch = t.seqlen = t.heads = 1;
  t.head_dim = static_cast<int64_t>(bytes / 2);
  return t;
}

Error sharing_error(Sharing s, const char* a, const char* b, const char* rule) {
  if (s == Sharing::Some)
    return invalid(std::string(a) + " overlaps " + b + " in memory: " + rule);
  return invalid(std::string(a) + " and " + b +
                 " may share memory: their byte ranges interleave, and fa3 tells elements apart "
                 "only for views with the same strides (such as views of one packed buffer); " +
                 rule);
}


}  // namespace tensor_rules

}  // namespace fa3
