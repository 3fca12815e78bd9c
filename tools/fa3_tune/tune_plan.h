// What fa3-tune measures and how it decides: the 12 keys of the tuning table, the seqlen
// buckets and the problem measured for each, the winner of a bucket, and the merging of
// adjacent buckets into table ranges. Pure host code (no CUDA, no fa3 calls), so the tests
// drive it without a GPU.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "../../bench/problems.h"
#include "../../bench/report.h"
#include "runtime/tuning_table.h"

namespace fa3tune {

constexpr int64_t kMaxSeqlen = 2147483647;  // the tuning table's largest sequence length

// ---- keys ---------------------------------------------------------------------------------

// The 12 keys of one direction of a complete table, in the built-in table's order: dtype
// f16, bf16 x head_dim 64, 128, 256 x non-causal, causal.
std::vector<fa3::MatchKey> all_keys(fa3::Direction direction = fa3::Direction::Forward);
// The keys of all_keys(direction) whose dtype, head_dim and causal are all in the given lists.
std::vector<fa3::MatchKey> selected_keys(const std::vector<fa3::DType>& dtypes,
                                         const std::vector<int>& head_dims,
                                         const std::vector<bool>& causal,
                                         fa3::Direction direction = fa3::Direction::Forward);
bool same_key(const fa3::MatchKey& a, const fa3::MatchKey& b);
// "bf16 d128 causal" / "bwd bf16 d128 causal": how the report names a key (fa3-bench's
// spelling of the problem; backward keys say so).
std::string key_label(const fa3::MatchKey& key);

// The kernels of `kernels` that can run `key` (same direction, dtype, head_dim and causal),
// by name, in list order.
std::vector<std::string> kernels_for_key(const fa3::MatchKey& key,
                                         const std::vector<fa3::KernelInfo>& kernels);

// ---- seqlen buckets -----------------------------------------------------------------------

// The sequence lengths measured: the paper's grid 512, 1k, 2k, 4k, 8k, 16k; --quick: 1k, 4k,
// 16k.
std::vector<int64_t> measured_seqlens(bool quick);

// The seqlen_q values [lo, hi] an entry measured at seqlen `measured_at` applies to.
struct SeqlenBucket {
  int64_t lo = 1, hi = kMaxSeqlen, measured_at = 0;
};

// Where the bucket of `below` ends and the bucket of `above` begins (the first seqlen of the
// upper one): their geometric mean (kernel speed changes with the log of the length),
// rounded to the nearest number of the form 2^k or 3 * 2^(k-1), so the table holds round
// numbers: 512 | 1024 -> 768, 4096 | 8192 -> 6144, 1024 | 4096 -> 2048.
int64_t bucket_boundary(int64_t below, int64_t above);
// One bucket per measured length (ascending, distinct, >= 1), together covering
// [1, kMaxSeqlen] without overlap: the first starts at 1, the last ends at kMaxSeqlen, and
// neighbours meet at bucket_boundary.
std::vector<SeqlenBucket> seqlen_buckets(const std::vector<int64_t>& measured);

// The problem measured for `key` at `seqlen`: the paper's grid shape (seqlen_q = seqlen_k =
// seqlen, batch = 16384 / seqlen, heads = 2048 / head_dim), built by fa3-bench's rule.
fa3bench::Problem tune_problem(const fa3::MatchKey& key, int64_t seqlen);

// ---- measurements and winners -------------------------------------------------------------

struct KernelMeasurement {
  enum class Check { NotRun, Passed, Failed };
  std::string kernel;
  std::optional<fa3bench::TimingStats> timing;  // set when the kernel was timed
  double tflops = 0;                            // by the paper's FLOP count, from the median
  Check check = Check::NotRun;
  std::optional<fa3bench::CheckResult> check_result;                   // forward
  std::optional<fa3bench::BackwardCheckResult> backward_check_result;  // backward
  std::string note;  // why it did not run, when it did not

  // Timed and passed its check: the only measurements a winner is picked from.
  bool eligible() const { return timing.has_value() && check == Check::Passed; }
};

// A fa3-bench row (from fa3bench::Runner or BackwardRunner, with the check on) as a
// measurement; TFLOPS by the row's direction (a backward is 2.5 forwards).
KernelMeasurement measurement_from_row(const fa3bench::ResultRow& row);

// The index of the eligible measurement with the smallest median (the first of equals);
// nullopt when none is eligible. A kernel that failed its check is never picked, however
// fast.
std::optional<size_t> pick_winner(const std::vector<KernelMeasurement>& measurements);

// How much faster `winner` is than `other`: winner TFLOPS / other TFLOPS - 1 (0.1 = 10%);
// nullopt when either was not timed.
std::optional<double> margin(const KernelMeasurement& winner, const KernelMeasurement& other);

// Every kernel measured for one (key, bucket).
struct BucketResult {
  fa3::MatchKey key{};
  SeqlenBucket bucket;
  fa3bench::Problem problem;
  std::vector<KernelMeasurement> kernels;
  std::optional<size_t> winner;  // pick_winner(kernels)
  std::string note;  // why the problem itself could not run (out of memory, ...), if so
};

// ---- table ranges -------------------------------------------------------------------------

// One entry of a measured key: seqlen_q in [lo, hi] runs `kernel` (seqlen_k: every length).
struct KernelRange {
  int64_t lo = 1, hi = kMaxSeqlen;
  std::string kernel;
};

// Merges neighbouring ranges (one's hi + 1 is the next one's lo) that run the same kernel;
// ranges run by the same kernel with another kernel between them stay apart. `ranges` in
// ascending seqlen order.
std::vector<KernelRange> merge_ranges(const std::vector<KernelRange>& ranges);

// The ranges of one measured key: its buckets with their winners, merged. Every bucket
// must have a winner.
std::vector<KernelRange> key_ranges(const std::vector<BucketResult>& buckets);

}  // namespace fa3tune
