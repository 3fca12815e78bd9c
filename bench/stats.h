// Summary statistics of the timed launches. Pure host code.
#pragma once

#include <vector>

namespace fa3bench {

struct TimingStats {
  double median_ms = 0, p10_ms = 0, p90_ms = 0;
  int samples = 0;
};

// The p-th quantile (p in [0, 1]) with linear interpolation between the closest ranks
// (numpy's default): rank p * (n - 1) of the sorted samples. 0 for no samples.
double percentile(std::vector<double> samples, double p);
TimingStats summarize(const std::vector<double>& samples_ms);

// Timing rounds of one kernel, taken interleaved with other kernels' rounds: the median is
// the median of the rounds' medians, so a slow moment of the GPU that falls on one round
// moves no kernel's figure much; p10 and p90 are over every sample of every round.
TimingStats summarize_rounds(const std::vector<std::vector<double>>& rounds_ms);

}  // namespace fa3bench
