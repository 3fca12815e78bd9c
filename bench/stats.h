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

}  // namespace fa3bench
