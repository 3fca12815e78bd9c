// The results of a run as a table (stdout), CSV and JSON: every format shows the same
// columns, built once per row by report_cells. Pure host code.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backward_check.h"
#include "check.h"
#include "problems.h"
#include "stats.h"

namespace fa3bench {

struct BaselineResult {
  enum class State { Off, Skipped, Failed, Timed };
  State state = State::Off;
  std::string reason;  // Skipped: shown in the std_ms column ("no cuBLAS", "needs 9.0 GiB")
  TimingStats timing;  // Timed
  std::optional<CheckResult> check;
};

struct ResultRow {
  Problem problem;
  Direction direction = Direction::Fwd;  // what `timing` covers; TFLOPS by direction_flops
  std::string config = "-";  // the kernel that ran (the table's pick unless forced)
  std::string variant;       // kernel_variant(config) in --ablation / --all-configs
  int sets = 0;              // input buffer sets rotated over
  std::optional<TimingStats> timing;
  std::optional<CheckResult> check;
  std::optional<BackwardCheckResult> backward_check;  // bwd, fwdbwd
  BaselineResult baseline;
  std::string note;  // empty when the row ran; otherwise why not (fa3_last_error(), ...)
  // The problem is outside what fa3 covers in this direction (the backward of head dim 256):
  // `note` says so, and the row counts as neither a failure nor a measurement.
  bool skipped = false;
};

// true when fa3 was timed and its checks (if any) passed, and the baseline's check (if any)
// too; or the row was skipped.
bool row_succeeded(const ResultRow& row);

struct ReportLayout {
  bool check = false;     // err, plain_err, lse_err, plain_lse_err, check (+ std_err, std_check)
  // dq_err, plain_dq_err, dk_err, plain_dk_err, dv_err, plain_dv_err, check (bwd, fwdbwd);
  // not together with `check` (one check column).
  bool backward_check = false;
  bool baseline = false;  // std_ms, std_TFLOPS, speedup
  bool variant = false;   // variant
  int config_width = 8;   // the longest kernel name
  int variant_width = 48; // the longest variant description
};

struct Column {
  std::string name;
  int width = 0;
  bool left_aligned = false;
};

// One value of a row. text is what the table shows; number, when set, is the exact value
// CSV and JSON write. text "-" with no number means "no value" (empty in CSV, JSON null).
struct Cell {
  std::string text;
  std::optional<double> number;
  bool integer = false;  // number is a count: written without a fraction
};

std::vector<Column> report_columns(const ReportLayout& layout);
std::vector<Cell> report_cells(const ResultRow& row, const ReportLayout& layout);

std::string table_header(const ReportLayout& layout);
std::string table_line(const ResultRow& row, const ReportLayout& layout);

// The run's context (GPU, clocks, versions, method), printed as "# key: value" lines above
// the table and written as the "header" object of the JSON file.
struct HeaderField {
  std::string key, text;
  std::optional<double> number;
};
using Header = std::vector<HeaderField>;
std::string header_lines(const Header& header);

std::string csv_document(const ReportLayout& layout, const std::vector<ResultRow>& rows);
std::string json_document(const Header& header, const ReportLayout& layout,
                          const std::vector<ResultRow>& rows);

std::string format_number(const char* printf_format, double value);
std::string format_bytes(double bytes);  // "9.0 GiB", "300.0 MiB" below 1 GiB

}  // namespace fa3bench
