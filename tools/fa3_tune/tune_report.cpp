#include "tune_report.h"

#include <algorithm>
#include <cstdio>

namespace fa3tune {

namespace {

std::string format(const char* printf_format, double value) {
  char text[64];
  std::snprintf(text, sizeof text, printf_format, value);
  return text;
}

std::string pad(std::string s, size_t width) {
  if (s.size() < width) s.resize(width, ' ');
  return s;
}

std::string pad_left(const std::string& s, size_t width) {
  return s.size() < width ? std::string(width - s.size(), ' ') + s : s;
}

std::string range_text(int64_t lo, int64_t hi) {
  return "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
}

const KernelMeasurement* find_measurement(const BucketResult& r, const std::string& kernel) {
  for (const KernelMeasurement& m : r.kernels)
    if (m.kernel == kernel) return &m;
  return nullptr;
}

}  // namespace

std::string check_text(const KernelMeasurement& m) {
  using Check = KernelMeasurement::Check;
  if (m.check == Check::Passed) return "PASS";
  if (m.backward_check_result && m.check == Check::Failed)
    return "FAIL (" + m.backward_check_result->failure + ")";
  if (m.check == Check::NotRun || !m.check_result) return "-";
  const fa3bench::CheckResult& c = *m.check_result;
  std::string why = "O error " + format("%.1e", c.o_error) + " vs limit 2 x " +
                    format("%.1e", c.plain_o_error) + " + 1e-5";
  if (c.has_lse)
    why += ", LSE error " + format("%.1e", c.lse_error) + " vs limit " +
           format("%.0e", fa3bench::kLseBound);
  return "FAIL (" + why + ")";
}

std::string bucket_report(const BucketResult& r, const std::string& current_pick) {
  std::string out = "== " + key_label(r.key) + ", seqlen_q " + range_text(r.bucket.lo, r.bucket.hi) +
                    ": measured at " + fa3bench::problem_label(r.problem) + "\n";
  size_t width = 6;
  for (const KernelMeasurement& m : r.kernels) width = std::max(width, m.kernel.size());
  out += "     " + pad("kernel", width) + "  " + pad_left("median ms", 10) + "  " +
         pad_left("TFLOPS", 7) + "  check\n";
  for (size_t i = 0; i < r.kernels.size(); ++i) {
    const KernelMeasurement& m = r.kernels[i];
    const bool winner = r.winner && *r.winner == i;
    const bool failed = m.check == KernelMeasurement::Check::Failed;
    out += std::string(winner ? "  *  " : failed ? "  !  " : "     ") + pad(m.kernel, width) + "  " +
           pad_left(m.timing ? format("%.4f", m.timing->median_ms) : "-", 10) + "  " +
           pad_left(m.timing ? format("%.1f", m.tflops) : "-", 7) + "  " + check_text(m);
    if (!m.note.empty()) out += "  (did not run: " + m.note + ")";
    if (failed) out += "  <- FAILED ITS CHECK: never picked";
    out += "\n";
  }
  if (!r.note.empty()) out += "  the problem did not run: " + r.note + "\n";
  if (!r.winner) {
    out += "  winner: none - no kernel ran and passed its check for this bucket\n";
    return out;
  }
  const KernelMeasurement& w = r.kernels[*r.winner];
  out += "  winner: " + w.kernel;
  if (current_pick.empty()) {
    out += " (the current table picks no kernel here)\n";
  } else if (current_pick == w.kernel) {
    out += " = the built-in table's pick (no change)\n";
  } else {
    const KernelMeasurement* pick = find_measurement(r, current_pick);
    out += ", over the built-in table's pick " + current_pick + ": ";
    if (!pick || !pick->timing)
      out += "not measured here\n";
    else if (pick->check == KernelMeasurement::Check::Failed)
      out += "which FAILED its check\n";
    else
      out += format("%+.1f%%", 100.0 * margin(w, *pick).value_or(0)) + " (" +
             format("%.1f", pick->tflops) + " -> " + format("%.1f", w.tflops) + " TFLOPS)\n";
  }
  return out;
}

std::string ranges_summary(const std::vector<MeasuredKey>& measured,
                           const fa3::TuningTable& current) {
  std::string out;
  for (const MeasuredKey& m : measured) {
    std::string now, before;
    for (const KernelRange& r : m.ranges)
      now += (now.empty() ? "" : "; ") + range_text(r.lo, r.hi) + " " + r.kernel;
    std::vector<fa3::TuningEntry> entries;
    for (const fa3::TuningEntry& e : current.entries())
      if (same_key(e.key, m.key)) entries.push_back(e);
    std::sort(entries.begin(), entries.end(), [](const fa3::TuningEntry& a, const fa3::TuningEntry& b) {
      return a.seqlen_q.lo != b.seqlen_q.lo ? a.seqlen_q.lo < b.seqlen_q.lo : a.seqlen_k.lo < b.seqlen_k.lo;
    });
    for (const fa3::TuningEntry& e : entries) {
      before += (before.empty() ? "" : "; ") + range_text(e.seqlen_q.lo, e.seqlen_q.hi);
      if (e.seqlen_k.lo != 1 || e.seqlen_k.hi != kMaxSeqlen)
        before += " x seqlen_k " + range_text(e.seqlen_k.lo, e.seqlen_k.hi);
      before += " " + e.kernel.name;
    }
    out += "  " + key_label(m.key) + ": " + now + "\n    built-in: " +
           (before == now ? "unchanged" : before) + "\n";
  }
  return out;
}

std::string failure_summary(const std::vector<BucketResult>& results) {
  std::string out;
  for (const BucketResult& r : results) {
    const std::string problem = fa3bench::problem_label(r.problem);
    if (!r.note.empty()) out += "  PROBLEM DID NOT RUN: " + problem + ": " + r.note + "\n";
    for (const KernelMeasurement& m : r.kernels) {
      if (m.check == KernelMeasurement::Check::Failed)
        out += "  FAILED CHECK: " + m.kernel + " on " + problem + ": " + check_text(m) + "\n";
      else if (!m.note.empty())
        out += "  DID NOT RUN: " + m.kernel + " on " + problem + ": " + m.note + "\n";
    }
  }
  return out;
}

int failure_count(const std::vector<BucketResult>& results) {
  const std::string summary = failure_summary(results);
  return static_cast<int>(std::count(summary.begin(), summary.end(), '\n'));
}

}  // namespace fa3tune
