#include "report.h"

#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

namespace fa3bench {

std::string format_number(const char* printf_format, double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, printf_format, value);
  return buffer;
}

std::string format_bytes(double bytes) {
  if (bytes >= (1u << 30)) return format_number("%.1f GiB", bytes / (1u << 30));
  return format_number("%.1f MiB", bytes / (1u << 20));
}

bool row_succeeded(const ResultRow& row) {
  if (row.skipped) return true;
  if (!row.timing || !row.note.empty()) return false;
  if (row.check && !row.check->pass) return false;
  if (row.backward_check && !row.backward_check->pass) return false;
  if (row.baseline.state == BaselineResult::State::Failed) return false;
  if (row.baseline.check && !row.baseline.check->pass) return false;
  return true;
}

namespace {

Cell none() { return {"-", std::nullopt}; }
Cell text(const std::string& s) { return {s, std::nullopt}; }
// A number: shown with printf_format, written exactly; inf/nan stay text (JSON has neither).
Cell number(const char* printf_format, double value) {
  Cell c{format_number(printf_format, value), std::nullopt};
  if (std::isfinite(value)) c.number = value;
  return c;
}
Cell integer(int64_t value) {
  Cell c = number("%.0f", static_cast<double>(value));
  c.integer = true;
  return c;
}
Cell ms(double value) { return number("%.4f", value); }
Cell error(double value) { return number("%.2e", value); }
Cell verdict(bool pass) { return text(pass ? "PASS" : "FAIL"); }

void add_problem_cells(const ResultRow& row, std::vector<Cell>& cells) {
  const Problem& p = row.problem;
  cells.push_back(text(direction_label(row.direction)));
  cells.push_back(text(dtype_label(p.dtype)));
  cells.push_back(integer(p.head_dim));
  cells.push_back(integer(p.causal ? 1 : 0));
  cells.push_back(integer(p.batch));
  cells.push_back(integer(p.heads));
  cells.push_back(integer(p.kv_heads));
  cells.push_back(integer(p.seqlen_q));
  cells.push_back(integer(p.seqlen_k));
  cells.push_back(text(row.config));
  cells.push_back(row.sets > 0 ? integer(row.sets) : none());
}

void add_timing_cells(const ResultRow& row, std::vector<Cell>& cells) {
  if (!row.timing) {
    for (int i = 0; i < 4; ++i) cells.push_back(none());
    return;
  }
  cells.push_back(ms(row.timing->median_ms));
  cells.push_back(ms(row.timing->p10_ms));
  cells.push_back(ms(row.timing->p90_ms));
  cells.push_back(
      number("%.1f", tflops(direction_flops(row.problem, row.direction), row.timing->median_ms)));
}

void add_check_cells(const std::optional<CheckResult>& check, std::vector<Cell>& cells) {
  if (!check) {
    for (int i = 0; i < 5; ++i) cells.push_back(none());
    return;
  }
  cells.push_back(error(check->o_error));
  cells.push_back(error(check->plain_o_error));
  cells.push_back(check->has_lse ? error(check->lse_error) : none());
  cells.push_back(check->has_lse ? error(check->plain_lse_error) : none());
  cells.push_back(verdict(check->pass));
}

void add_backward_check_cells(const std::optional<BackwardCheckResult>& check,
                              std::vector<Cell>& cells) {
  if (!check) {
    for (int i = 0; i < 7; ++i) cells.push_back(none());
    return;
  }
  for (const auto& [ours, plain] : {std::pair{check->dq_error, check->plain_dq_error},
                                    std::pair{check->dk_error, check->plain_dk_error},
                                    std::pair{check->dv_error, check->plain_dv_error}}) {
    cells.push_back(error(ours));
    cells.push_back(error(plain));
  }
  cells.push_back(verdict(check->pass));
}

void add_baseline_cells(const ResultRow& row, std::vector<Cell>& cells) {
  const BaselineResult& b = row.baseline;
  using State = BaselineResult::State;
  if (b.state != State::Timed) {
    cells.push_back(b.state == State::Skipped ? text(b.reason)
                                              : (b.state == State::Failed ? text("error") : none()));
    cells.push_back(none());
    cells.push_back(none());
    return;
  }
  cells.push_back(ms(b.timing.median_ms));
  cells.push_back(number("%.1f", tflops(forward_flops(row.problem), b.timing.median_ms)));
  if (row.timing && row.timing->median_ms > 0)
    cells.push_back(number("%.2fx", b.timing.median_ms / row.timing->median_ms));
  else
    cells.push_back(none());
}

void add_baseline_check_cells(const ResultRow& row, std::vector<Cell>& cells) {
  const std::optional<CheckResult>& c = row.baseline.check;
  cells.push_back(c ? error(c->o_error) : none());
  cells.push_back(c ? verdict(c->pass) : none());
}

std::string note_of(const ResultRow& row) {
  std::string note = row.note;
  if (row.baseline.state == BaselineResult::State::Failed)
    note += (note.empty() ? "" : "; ") + std::string("baseline: ") + row.baseline.reason;
  return note;
}

std::string pad(const std::string& s, const Column& c) {
  if (static_cast<int>(s.size()) >= c.width) return s;
  const std::string fill(static_cast<size_t>(c.width) - s.size(), ' ');
  return c.left_aligned ? s + fill : fill + s;
}

std::string join_padded(const std::vector<std::string>& texts, const std::vector<Column>& columns) {
  std::string line;
  for (size_t i = 0; i < columns.size(); ++i) {
    const bool last = i + 1 == columns.size();
    std::string cell = last && columns[i].left_aligned ? texts[i] : pad(texts[i], columns[i]);
    line += (i ? "  " : "") + cell;
  }
  while (!line.empty() && line.back() == ' ') line.pop_back();
  return line + "\n";
}

std::string csv_field(const Cell& c) {
  if (!c.number && c.text == "-") return "";
  std::string s = c.number ? format_number(c.integer ? "%.0f" : "%.17g", *c.number) : c.text;
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string quoted = "\"";
  for (char ch : s) quoted += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return quoted + "\"";
}

nlohmann::ordered_json json_value(const Cell& c) {
  if (c.number && c.integer) return static_cast<int64_t>(*c.number);
  if (c.number) return *c.number;
  if (c.text == "-") return nullptr;
  return c.text;
}

}  // namespace

std::vector<Column> report_columns(const ReportLayout& layout) {
  std::vector<Column> columns = {
      {"dir", 6, true},     {"dtype", 5, true},   {"hdim", 4, false},    {"causal", 6, false},
      {"batch", 5, false},  {"heads", 5, false},   {"kv_heads", 8, false},
      {"seqlen_q", 8, false}, {"seqlen_k", 8, false}, {"config", layout.config_width, true},
      {"sets", 4, false},   {"ms", 9, false},      {"p10", 9, false},
      {"p90", 9, false},    {"TFLOPS", 7, false},
  };
  if (layout.check)
    for (const char* name : {"err", "plain_err", "lse_err", "plain_lse_err", "check"})
      columns.push_back({name, name == std::string("check") ? 5 : 9, false});
  else if (layout.backward_check)
    for (const char* name : {"dq_err", "plain_dq_err", "dk_err", "plain_dk_err", "dv_err",
                             "plain_dv_err", "check"})
      columns.push_back({name, name == std::string("check") ? 5 : 12, false});
  if (layout.baseline) {
    columns.push_back({"std_ms", 14, false});
    columns.push_back({"std_TFLOPS", 10, false});
    columns.push_back({"speedup", 7, false});
    if (layout.check) {
      columns.push_back({"std_err", 9, false});
      columns.push_back({"std_check", 9, false});
    }
  }
  if (layout.variant) columns.push_back({"variant", layout.variant_width, true});
  columns.push_back({"note", 0, true});
  return columns;
}

std::vector<Cell> report_cells(const ResultRow& row, const ReportLayout& layout) {
  std::vector<Cell> cells;
  add_problem_cells(row, cells);
  add_timing_cells(row, cells);
  if (layout.check) add_check_cells(row.check, cells);
  else if (layout.backward_check) add_backward_check_cells(row.backward_check, cells);
  if (layout.baseline) {
    add_baseline_cells(row, cells);
    if (layout.check) add_baseline_check_cells(row, cells);
  }
  if (layout.variant) cells.push_back(text(row.variant.empty() ? "-" : row.variant));
  cells.push_back(text(note_of(row)));
  return cells;
}

std::string table_header(const ReportLayout& layout) {
  const std::vector<Column> columns = report_columns(layout);
  std::vector<std::string> names;
  for (const Column& c : columns) names.push_back(c.name);
  return join_padded(names, columns);
}

std::string table_line(const ResultRow& row, const ReportLayout& layout) {
  std::vector<std::string> texts;
  for (const Cell& c : report_cells(row, layout)) texts.push_back(c.text);
  return join_padded(texts, report_columns(layout));
}

std::string header_lines(const Header& header) {
  std::string out;
  for (const HeaderField& f : header) out += "# " + f.key + ": " + f.text + "\n";
  return out;
}

std::string csv_document(const ReportLayout& layout, const std::vector<ResultRow>& rows) {
  std::ostringstream out;
  const std::vector<Column> columns = report_columns(layout);
  for (size_t i = 0; i < columns.size(); ++i) out << (i ? "," : "") << columns[i].name;
  out << "\n";
  for (const ResultRow& row : rows) {
    const std::vector<Cell> cells = report_cells(row, layout);
    for (size_t i = 0; i < cells.size(); ++i) out << (i ? "," : "") << csv_field(cells[i]);
    out << "\n";
  }
  return out.str();
}

std::string json_document(const Header& header, const ReportLayout& layout,
                          const std::vector<ResultRow>& rows) {
  nlohmann::ordered_json doc;
  nlohmann::ordered_json head = nlohmann::ordered_json::object();
  for (const HeaderField& f : header)
    head[f.key] = f.number ? nlohmann::ordered_json(*f.number) : nlohmann::ordered_json(f.text);
  doc["header"] = head;
  const std::vector<Column> columns = report_columns(layout);
  nlohmann::ordered_json records = nlohmann::ordered_json::array();
  for (const ResultRow& row : rows) {
    const std::vector<Cell> cells = report_cells(row, layout);
    nlohmann::ordered_json record = nlohmann::ordered_json::object();
    for (size_t i = 0; i < columns.size(); ++i) record[columns[i].name] = json_value(cells[i]);
    records.push_back(record);
  }
  doc["rows"] = records;
  return doc.dump(2) + "\n";
}

}  // namespace fa3bench
