// fa3-tune's human-readable report (stdout): per key and bucket every kernel's median and
// TFLOPS with its check, the winner and its margin over the current table's pick; then the
// ranges of each measured key next to the current table's, and every failed check. Pure
// host code.
#pragma once

#include <string>
#include <vector>

#include "runtime/tuning_table.h"
#include "tune_plan.h"
#include "tune_table.h"

namespace fa3tune {

// "PASS", or "FAIL (O error 1.2e-01 > 2 x 3.0e-03 + 1e-5; ...)", or "-" when not checked.
std::string check_text(const KernelMeasurement& m);

// The block of one (key, bucket): a heading, one line per kernel (the winner marked with
// '*'), then the winner and its margin over `current_pick` (the current table's kernel for
// the measured problem; "" when it has none).
std::string bucket_report(const BucketResult& r, const std::string& current_pick);

// One line per measured key: its new ranges, and the current table's for the same key
// ("unchanged" when they are the same).
std::string ranges_summary(const std::vector<MeasuredKey>& measured,
                           const fa3::TuningTable& current);

// The kernels that failed their check or did not run, and the problems that could not run,
// one line each; "" when there are none.
std::string failure_summary(const std::vector<BucketResult>& results);
// How many lines failure_summary has.
int failure_count(const std::vector<BucketResult>& results);

}  // namespace fa3tune
