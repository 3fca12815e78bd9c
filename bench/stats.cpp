#include "stats.h"

#include <algorithm>
#include <cmath>

namespace fa3bench {

double percentile(std::vector<double> samples, double p) {
  if (samples.empty()) return 0;
  std::sort(samples.begin(), samples.end());
  const double rank = std::clamp(p, 0.0, 1.0) * static_cast<double>(samples.size() - 1);
  const size_t below = static_cast<size_t>(std::floor(rank));
  const size_t above = std::min(below + 1, samples.size() - 1);
  const double fraction = rank - static_cast<double>(below);
  return samples[below] + (samples[above] - samples[below]) * fraction;
}

TimingStats summarize(const std::vector<double>& samples_ms) {
  TimingStats t;
  t.median_ms = percentile(samples_ms, 0.5);
  t.p10_ms = percentile(samples_ms, 0.1);
  t.p90_ms = percentile(samples_ms, 0.9);
  t.samples = static_cast<int>(samples_ms.size());
  return t;
}

TimingStats summarize_rounds(const std::vector<std::vector<double>>& rounds_ms) {
  std::vector<double> medians, all;
  for (const std::vector<double>& round : rounds_ms) {
    if (round.empty()) continue;
    medians.push_back(percentile(round, 0.5));
    all.insert(all.end(), round.begin(), round.end());
  }
  TimingStats t = summarize(all);
  t.median_ms = percentile(medians, 0.5);
  return t;
}

}  // namespace fa3bench
