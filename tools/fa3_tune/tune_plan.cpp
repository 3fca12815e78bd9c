#include "tune_plan.h"

#include <cmath>

namespace fa3tune {

// ---- keys ---------------------------------------------------------------------------------

std::vector<fa3::MatchKey> all_keys(fa3::Direction direction) {
  std::vector<fa3::MatchKey> keys;
  for (fa3::DType dtype : {fa3::DType::F16, fa3::DType::BF16})
    for (int head_dim : {64, 128, 256})
      for (bool causal : {false, true})
        keys.push_back({direction, dtype, head_dim, causal});
  return keys;
}

namespace {

template <typename T>
bool contains(const std::vector<T>& list, const T& x) {
  for (const T& item : list)
    if (item == x) return true;
  return false;
}

}  // namespace

std::vector<fa3::MatchKey> selected_keys(const std::vector<fa3::DType>& dtypes,
                                         const std::vector<int>& head_dims,
                                         const std::vector<bool>& causal,
                                         fa3::Direction direction) {
  std::vector<fa3::MatchKey> keys;
  for (const fa3::MatchKey& key : all_keys(direction))
    if (contains(dtypes, key.dtype) && contains(head_dims, key.head_dim) &&
        contains(causal, key.causal))
      keys.push_back(key);
  return keys;
}

bool same_key(const fa3::MatchKey& a, const fa3::MatchKey& b) {
  return a.direction == b.direction && a.dtype == b.dtype && a.head_dim == b.head_dim &&
         a.causal == b.causal;
}

std::string key_label(const fa3::MatchKey& key) {
  return std::string(key.direction == fa3::Direction::Backward ? "bwd " : "") +
         fa3::dtype_name(key.dtype) + " d" + std::to_string(key.head_dim) +
         (key.causal ? " causal" : " non-causal");
}

std::vector<std::string> kernels_for_key(const fa3::MatchKey& key,
                                         const std::vector<fa3::KernelInfo>& kernels) {
  std::vector<std::string> names;
  for (const fa3::KernelInfo& k : kernels) {
    if (k.direction != key.direction) continue;
    const bool backward = k.direction == fa3::Direction::Backward;
    const bool fits = backward ? k.bwd.dtype == key.dtype && k.bwd.head_dim == key.head_dim &&
                                     k.bwd.causal == key.causal
                               : k.fwd.dtype == key.dtype && k.fwd.head_dim == key.head_dim &&
                                     k.fwd.causal == key.causal;
    if (fits) names.push_back(k.name);
  }
  return names;
}

// ---- seqlen buckets -----------------------------------------------------------------------

std::vector<int64_t> measured_seqlens(bool quick) {
  if (quick) return {1024, 4096, 16384};
  return {512, 1024, 2048, 4096, 8192, 16384};
}

int64_t bucket_boundary(int64_t below, int64_t above) {
  const double mean = std::sqrt(static_cast<double>(below) * static_cast<double>(above));
  // Candidates around the mean: the powers of two p <= mean < 2p, with 1.5p between them.
  int64_t p = 1;
  while (static_cast<double>(2 * p) <= mean) p *= 2;
  int64_t best = p;
  for (int64_t candidate : {p + p / 2, 2 * p})
    if (std::fabs(static_cast<double>(candidate) - mean) <=
        std::fabs(static_cast<double>(best) - mean))
      best = candidate;
  // Each bucket must keep its measured length: below < boundary <= above.
  if (best <= below) best = below + 1;
  if (best > above) best = above;
  return best;
}

std::vector<SeqlenBucket> seqlen_buckets(const std::vector<int64_t>& measured) {
  std::vector<SeqlenBucket> buckets;
  for (size_t i = 0; i < measured.size(); ++i) {
    SeqlenBucket b;
    b.measured_at = measured[i];
    b.lo = i == 0 ? 1 : bucket_boundary(measured[i - 1], measured[i]);
    b.hi = i + 1 == measured.size() ? kMaxSeqlen : bucket_boundary(measured[i], measured[i + 1]) - 1;
    buckets.push_back(b);
  }
  return buckets;
}

fa3bench::Problem tune_problem(const fa3::MatchKey& key, int64_t seqlen) {
  fa3bench::Options o;  // batch, heads unset: the paper's rule
  o.dtypes = {key.dtype == fa3::DType::BF16 ? fa3bench::DType::BF16 : fa3bench::DType::F16};
  o.head_dims = {key.head_dim};
  o.causal = {key.causal};
  o.seqlens = {seqlen};
  return fa3bench::build_problems(o).at(0);
}

// ---- measurements and winners -------------------------------------------------------------

KernelMeasurement measurement_from_row(const fa3bench::ResultRow& row) {
  KernelMeasurement m;
  m.kernel = row.config;
  m.note = row.note;
  if (row.check) {
    m.check = row.check->pass ? KernelMeasurement::Check::Passed : KernelMeasurement::Check::Failed;
    m.check_result = row.check;
  }
  if (row.backward_check) {
    m.check = row.backward_check->pass ? KernelMeasurement::Check::Passed
                                       : KernelMeasurement::Check::Failed;
    m.backward_check_result = row.backward_check;
  }
  if (row.timing && row.note.empty()) {
    m.timing = row.timing;
    m.tflops = fa3bench::tflops(fa3bench::direction_flops(row.problem, row.direction),
                                row.timing->median_ms);
  }
  return m;
}

std::optional<size_t> pick_winner(const std::vector<KernelMeasurement>& measurements) {
  std::optional<size_t> best;
  for (size_t i = 0; i < measurements.size(); ++i) {
    const KernelMeasurement& m = measurements[i];
    if (!m.eligible()) continue;
    if (!best || m.timing->median_ms < measurements[*best].timing->median_ms) best = i;
  }
  return best;
}

std::optional<double> margin(const KernelMeasurement& winner, const KernelMeasurement& other) {
  if (!winner.timing || !other.timing || other.tflops <= 0) return std::nullopt;
  return winner.tflops / other.tflops - 1.0;
}

// ---- table ranges -------------------------------------------------------------------------

std::vector<KernelRange> merge_ranges(const std::vector<KernelRange>& ranges) {
  std::vector<KernelRange> merged;
  for (const KernelRange& r : ranges) {
    if (!merged.empty() && merged.back().kernel == r.kernel && merged.back().hi + 1 == r.lo)
      merged.back().hi = r.hi;
    else
      merged.push_back(r);
  }
  return merged;
}

std::vector<KernelRange> key_ranges(const std::vector<BucketResult>& buckets) {
  std::vector<KernelRange> ranges;
  for (const BucketResult& b : buckets)
    ranges.push_back({b.bucket.lo, b.bucket.hi, b.winner ? b.kernels.at(*b.winner).kernel : ""});
  return merge_ranges(ranges);
}

}  // namespace fa3tune
