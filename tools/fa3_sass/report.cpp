#include "report.h"

#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

#include "instruction_class.h"

namespace fa3::sass {

namespace {

constexpr size_t kPictureWidth = 80;  // characters per picture row in the text report
constexpr size_t kMaxListed = 6;      // WGMMA groups listed one per line
constexpr size_t kMaxWaitsListed = 8;

std::string hex_address(uint32_t a) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%04x", a);
  return buf;
}

std::string or_unknown(const std::optional<int>& v, const std::string& unit = "") {
  return v ? std::to_string(*v) + unit : "unknown";
}

std::string pad(std::string s, size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s;
}

std::string verdict_line(const KernelReport& k) {
  size_t failed = 0;
  for (const CheckResult& c : k.checks) failed += !c.pass;
  if (failed == 0) return "PASS (" + std::to_string(k.checks.size()) + " checks)";
  return "FAIL (" + std::to_string(failed) + " of " + std::to_string(k.checks.size()) + " checks)";
}

std::string resources_line(const ResourceUsage& r) {
  return "registers " + or_unknown(r.registers) + ", static shared " + or_unknown(r.shared_bytes, " B") +
         ", stack " + or_unknown(r.stack_bytes, " B") + ", local " + or_unknown(r.local_bytes, " B");
}

std::string mix_lines(const InstructionMix& m) {
  std::ostringstream s;
  s << m.instructions << " instructions |";
  if (m.wgmma_kinds.empty()) s << " no wgmma";
  const char* separator = " ";
  for (const auto& [kind, count] : m.wgmma_kinds) {
    s << separator << kind.opcode << "." << kind.shape << " " << kind.operands << " x" << count;
    separator = ", ";
  }
  if (m.warp_mma) s << " | HMMA/IMMA x" << m.warp_mma;
  s << "\n"
    << pad("", 13) << "MUFU.EX2 " << m.mufu_ex2 << "  F2FP " << m.f2fp << "  FMNMX/VIMNMX3 " << m.fmnmx
    << "  SHFL.BFLY " << m.shfl_bfly << "  WARPGROUP.ARRIVE " << m.wgmma_arrive << "  WARPGROUP.DEPBAR "
    << m.wgmma_wait;
  s << "\n"
    << pad("", 13) << "BAR.SYNC " << m.bar_sync << "  BAR.ARV " << m.bar_arv << "  SYNCS " << m.syncs
    << "  UTMALDG " << m.utmaldg << "  UTMASTG " << m.utmastg;
  if (m.utmaredg) s << "  UTMAREDG " << m.utmaredg;
  if (m.ublkred) s << "  UBLKRED " << m.ublkred;
  if (m.float_atomic_adds) s << "  float RED/ATOM adds " << m.float_atomic_adds;
  s << "  USETMAXREG " << m.usetmaxreg_dealloc
    << " dealloc/" << m.usetmaxreg_alloc << " alloc  LDL " << m.ldl << "  STL " << m.stl;
  return s.str();
}

std::string rel(size_t index, const Mainloop& m) { return "+" + std::to_string(index - m.loop.first); }

// Under the picture: the number of the WGMMA group each position belongs to (from its first
// HGMMA to the one with gsb0), so "1111111" shows at a glance what is inside a group.
std::string group_ruler(const Mainloop& m) {
  std::string ruler(m.picture.size(), ' ');
  for (size_t g = 0; g < m.groups.size(); ++g) {
    const char mark = g < 9 ? static_cast<char>('1' + g) : '#';
    for (size_t i = m.groups[g].first; i <= m.groups[g].last; ++i) ruler[i - m.loop.first] = mark;
  }
  return ruler;
}

std::string mainloop_lines(const Mainloop& m) {
  std::ostringstream s;
  const std::string indent = pad("", 13);
  s << hex_address(m.first_address) << ".." << hex_address(m.last_address) << ", " << m.loop.size()
    << " instructions, " << m.loop.wgmma << " wgmma in " << m.groups.size() << " group"
    << (m.groups.size() == 1 ? "" : "s");
  if (m.loop.warp_mma) s << ", " << m.loop.warp_mma << " HMMA/IMMA";
  s << "\n";
  s << indent << "softmax: ";
  if (m.softmax_start)
    s << "starts at " << rel(*m.softmax_start, m) << ", " << to_string(m.softmax_position) << " WGMMA 1\n";
  else
    s << "none (no FMNMX or MUFU.EX2 in the loop)\n";
  // A serialized or unrolled loop has many groups; the first few tell the story, --json has all.
  const size_t shown_groups = m.groups.size() <= kMaxListed + 1 ? m.groups.size() : kMaxListed;
  for (size_t g = 0; g < shown_groups; ++g) {
    const WgmmaGroup& group = m.groups[g];
    s << indent << pad("WGMMA " + std::to_string(g + 1), 9)
      << pad(rel(group.first, m) + ".." + rel(group.last, m), 11) << pad(group.kind_summary(), 25) << " "
      << pad(group.interleaved() ? "interleaved" : "packed", 12) << group.between << " between ("
      << group.between_softmax << " softmax), " << group.softmax_in_flight << " softmax in flight"
      << (group.committed ? "" : ", no gsb0 inside the loop") << "\n";
  }
  if (shown_groups < m.groups.size())
    s << indent << "... and " << m.groups.size() - shown_groups << " more groups (--json lists them all)\n";
  s << indent << "waits:   ";
  if (m.waits.empty()) s << "none";
  for (size_t i = 0; i < m.waits.size() && i < kMaxWaitsListed; ++i)
    s << (i ? "  " : "") << rel(m.waits[i].index, m) << " [gsb0 <= " << m.waits[i].pending << "]";
  if (m.waits.size() > kMaxWaitsListed) s << "  ... (" << m.waits.size() << " in all)";
  s << "\n";
  const std::string groups = group_ruler(m);
  for (size_t row = 0; row < m.picture.size(); row += kPictureWidth) {
    s << indent << pad("+" + std::to_string(row), 6) << m.picture.substr(row, kPictureWidth) << "\n";
    const std::string marks = groups.substr(row, kPictureWidth);
    if (marks.find_first_not_of(' ') != std::string::npos)
      s << indent << pad("", 6) << marks.substr(0, marks.find_last_not_of(' ') + 1) << "\n";
  }
  return s.str();
}

std::string legend_line() {
  std::string s = "picture:", row = "";
  for (const LegendEntry& e : picture_legend()) {
    const std::string entry = std::string(1, e.symbol) + " " + e.meaning;
    if (!row.empty() && row.size() + 2 + entry.size() > 90) {
      s += " " + row + "\n        ";
      row.clear();
    }
    row += (row.empty() ? "" : "  ") + entry;
  }
  return s + " " + row;
}

}  // namespace

std::string text_kernel(const KernelReport& k) {
  std::ostringstream s;
  s << k.name << ": " << verdict_line(k) << "\n";
  s << "  config     " << describe(k.traits) << "\n";
  s << "  resources  " << resources_line(k.resources) << "\n";
  s << "  mix        " << mix_lines(k.mix) << "\n";
  s << "  mainloop   "
    << (k.mainloop ? mainloop_lines(*k.mainloop) : "none (no loop holds a tensor-core instruction)\n");
  s << "  checks\n";
  for (const CheckResult& c : k.checks)
    s << "    " << (c.pass ? "PASS " : "FAIL ") << pad(check_name(c.id), 22) << c.detail << "\n";
  return s.str();
}

std::string text_report(const std::vector<KernelReport>& kernels, const ReportSource& source) {
  std::ostringstream s;
  s << "fa3-sass: " << kernels.size() << " kernel" << (kernels.size() == 1 ? "" : "s") << " from "
    << source.kind;
  for (const std::string& p : source.paths) s << " " << p;
  if (!source.disassembler.empty()) s << " (disassembled with " << source.disassembler << ")";
  s << "\n\n";
  std::vector<std::string> failed;
  for (const KernelReport& k : kernels) {
    s << text_kernel(k) << "\n";
    if (!k.pass()) failed.push_back(k.name);
  }
  s << legend_line() << "\n\n";
  s << kernels.size() - failed.size() << " of " << kernels.size() << " kernels pass every check";
  if (!failed.empty()) {
    s << "; failed:";
    for (const std::string& f : failed) s << " " << f;
  }
  s << "\n";
  return s.str();
}

// ---- JSON -----------------------------------------------------------------------------

namespace {

using Json = nlohmann::ordered_json;

Json optional_int(const std::optional<int>& v) { return v ? Json(*v) : Json(nullptr); }
Json optional_int(const std::optional<size_t>& v) { return v ? Json(*v) : Json(nullptr); }

// Every option of the forward registry (src/kernels/fwd_names.h), typed as a tuning table's
// "config" object types it: enums by their word, flags as booleans, cluster_m as a number.
Json options_json(const FwdConfig& c) {
  Json j = Json::object();
  for (const FwdOption& o : kFwdOptions) {
    const int v = fwd_field_value(c, o.field);
    const FwdSpelling* spelling = fwd_spelling_of(c, o);
    if (o.kind == FwdFieldKind::Bool) j[o.key] = v != 0;
    else if (o.kind == FwdFieldKind::Enum && spelling != nullptr) j[o.key] = spelling->word;
    else j[o.key] = v;
  }
  return j;
}

Json config_json(const KernelTraits& t) {
  return Json{{"fa3_name", t.fa3_name},
              {"direction", t.direction},
              {"dtype", t.dtype},
              {"head_dim", optional_int(t.head_dim)},
              {"block_m", optional_int(t.block_m)},
              {"block_n", optional_int(t.block_n)},
              {"stages", optional_int(t.stages)},
              {"consumer_warpgroups", optional_int(t.consumer_warpgroups)},
              {"causal", t.options.causal},
              {"overlap", t.options.overlap()},
              {"pingpong", t.options.pingpong},
              {"warp_specialized", t.warp_specialized && t.options.warp_specialized()},
              {"fp8", t.fp8},
              {"role", to_string(t.role)},
              {"producer_regs", optional_int(t.producer_regs)},
              {"consumer_regs", optional_int(t.consumer_regs)},
              {"options", options_json(t.options)},
              {"unknown_tokens", t.unknown_tokens},
              {"notes", t.notes}};
}

Json resources_json(const ResourceUsage& r) {
  return Json{{"registers", optional_int(r.registers)},
              {"shared_bytes", optional_int(r.shared_bytes)},
              {"stack_bytes", optional_int(r.stack_bytes)},
              {"local_bytes", optional_int(r.local_bytes)}};
}

Json kinds_json(const std::map<WgmmaKind, size_t>& kinds) {
  Json out = Json::array();
  for (const auto& [kind, count] : kinds)
    out.push_back(
        Json{{"opcode", kind.opcode}, {"shape", kind.shape}, {"operands", kind.operands}, {"count", count}});
  return out;
}

Json mix_json(const InstructionMix& m) {
  return Json{{"instructions", m.instructions},
              {"hgmma", m.hgmma},
              {"qgmma", m.qgmma},
              {"hmma", m.warp_mma},
              {"wgmma_kinds", kinds_json(m.wgmma_kinds)},
              {"warpgroup_arrive", m.wgmma_arrive},
              {"warpgroup_depbar", m.wgmma_wait},
              {"mufu_ex2", m.mufu_ex2},
              {"f2fp", m.f2fp},
              {"fmnmx", m.fmnmx},
              {"shfl_bfly", m.shfl_bfly},
              {"bar_sync", m.bar_sync},
              {"bar_arv", m.bar_arv},
              {"syncs", m.syncs},
              {"utmaldg", m.utmaldg},
              {"utmastg", m.utmastg},
              {"utmaredg", m.utmaredg},
              {"ublkred", m.ublkred},
              {"float_atomic_adds", m.float_atomic_adds},
              {"usetmaxreg_dealloc", m.usetmaxreg_dealloc},
              {"usetmaxreg_alloc", m.usetmaxreg_alloc},
              {"ldl", m.ldl},
              {"stl", m.stl}};
}

Json serialization_json(const Serialization& s) {
  return Json{{"pairs", s.pairs}, {"separated", s.separated}, {"serialized", s.serialized()}};
}

Json mainloop_json(const Mainloop& m) {
  const size_t base = m.loop.first;
  Json groups = Json::array();
  for (const WgmmaGroup& g : m.groups)
    groups.push_back(Json{{"first", g.first - base},
                          {"last", g.last - base},
                          {"wgmma", g.wgmma},
                          {"kinds", kinds_json(g.kinds)},
                          {"between", g.between},
                          {"between_softmax", g.between_softmax},
                          {"layout", g.interleaved() ? "interleaved" : "packed"},
                          {"softmax_in_flight", g.softmax_in_flight},
                          {"softmax_math_in_flight", g.softmax_math_in_flight},
                          {"retired_at", g.retired_at ? Json(*g.retired_at - base) : Json(nullptr)},
                          {"committed", g.committed}});
  Json waits = Json::array();
  for (const WgmmaWaitSite& w : m.waits)
    waits.push_back(Json{{"offset", w.index - base}, {"pending", w.pending}});
  std::optional<size_t> softmax;
  if (m.softmax_start) softmax = *m.softmax_start - base;
  return Json{{"first_address", m.first_address},
              {"last_address", m.last_address},
              {"instructions", m.loop.size()},
              {"wgmma", m.loop.wgmma},
              {"hmma", m.loop.warp_mma},
              {"softmax_start", optional_int(softmax)},
              {"softmax_position", to_string(m.softmax_position)},
              {"groups", groups},
              {"waits", waits},
              {"picture", m.picture}};
}

Json kernel_json(const KernelReport& k) {
  Json checks = Json::array();
  for (const CheckResult& c : k.checks)
    checks.push_back(Json{{"id", check_name(c.id)}, {"pass", c.pass}, {"detail", c.detail}});
  return Json{{"name", k.name},
              {"pass", k.pass()},
              {"config", config_json(k.traits)},
              {"resources", resources_json(k.resources)},
              {"mix", mix_json(k.mix)},
              {"serialization",
               Json{{"function", serialization_json(k.serialization)},
                    {"mainloop", k.mainloop ? serialization_json(k.mainloop_serialization) : Json(nullptr)}}},
              {"mainloop", k.mainloop ? mainloop_json(*k.mainloop) : Json(nullptr)},
              {"checks", checks}};
}

}  // namespace

std::string json_report(const std::vector<KernelReport>& kernels, const ReportSource& source) {
  bool all_pass = true;
  Json list = Json::array();
  for (const KernelReport& k : kernels) {
    all_pass &= k.pass();
    list.push_back(kernel_json(k));
  }
  Json picture_alphabet = Json::object();
  for (const LegendEntry& e : picture_legend()) picture_alphabet[std::string(1, e.symbol)] = e.meaning;
  const Json doc{{"schema", "fa3-sass/1"},
                 {"source", Json{{"kind", source.kind}, {"paths", source.paths}}},
                 {"disassembler", source.disassembler.empty() ? Json(nullptr) : Json(source.disassembler)},
                 {"pass", all_pass},
                 {"picture_alphabet", picture_alphabet},
                 {"kernels", list}};
  // Names come from the input text: bytes that are not UTF-8 are replaced, not fatal.
  return doc.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

// ---- SVG ------------------------------------------------------------------------------

namespace {

constexpr int kCell = 6, kCellHeight = 18, kCellsPerRow = 160, kMargin = 12;
constexpr int kTitleHeight = 22, kGroupBarHeight = 10, kRowGap = 6;

const char* colour(char symbol) {
  switch (symbol) {
    case 'G':
      return "#d62728";
    case 'Q':
      return "#8b0000";
    case 'H':
      return "#ff00ff";
    case 'A':
      return "#ff9896";
    case 'W':
      return "#000000";
    case 'E':
      return "#2ca02c";
    case 'C':
      return "#1f77b4";
    case 'M':
      return "#9467bd";
    case 'S':
      return "#c5b0d5";
    case '+':
      return "#98df8a";
    case '*':
      return "#aec7e8";
    case 'B':
      return "#8c564b";
    case 'Y':
      return "#c49c94";
    case 'T':
      return "#e377c2";
    case 'L':
      return "#ff7f0e";
    case 'J':
      return "#555555";
    case 'R':
      return "#bcbd22";
    case 'u':
      return "#f2f2f2";
    default:
      return "#d9d9d9";
  }
}

std::string escape_xml(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '&')
      out += "&amp;";
    else if (c == '"')
      out += "&quot;";
    else
      out += c;
  }
  return out;
}

int strip_rows(const KernelReport& k) {
  if (!k.mainloop || k.mainloop->picture.empty()) return 1;
  return static_cast<int>((k.mainloop->picture.size() + kCellsPerRow - 1) / kCellsPerRow);
}

int strip_height(const KernelReport& k) {
  return kTitleHeight + strip_rows(k) * (kCellHeight + kGroupBarHeight + kRowGap) + kMargin;
}

// Cells of the mainloop, wrapped every kCellsPerRow, with a bar under each WGMMA group.
void draw_strip(std::ostringstream& s, const KernelReport& k, int top) {
  s << "<text x=\"" << kMargin << "\" y=\"" << top + 15 << "\" class=\"title\">" << escape_xml(k.name) << ": "
    << (k.pass() ? "PASS" : "FAIL") << "</text>\n";
  const int rows_top = top + kTitleHeight;
  if (!k.mainloop) {
    s << "<text x=\"" << kMargin << "\" y=\"" << rows_top + 13
      << "\">no mainloop (no loop holds a tensor-core instruction)</text>\n";
    return;
  }
  const Mainloop& m = *k.mainloop;
  const int row_pitch = kCellHeight + kGroupBarHeight + kRowGap;
  for (size_t i = 0; i < m.picture.size(); ++i) {
    const int x = kMargin + static_cast<int>(i % kCellsPerRow) * kCell;
    const int y = rows_top + static_cast<int>(i / kCellsPerRow) * row_pitch;
    s << "<rect x=\"" << x << "\" y=\"" << y << "\" width=\"" << kCell << "\" height=\"" << kCellHeight
      << "\" fill=\"" << colour(m.picture[i]) << "\"><title>+" << i << " " << m.picture[i]
      << "</title></rect>\n";
  }
  for (size_t g = 0; g < m.groups.size(); ++g) {
    for (size_t i = m.groups[g].first; i <= m.groups[g].last; ++i) {
      const size_t offset = i - m.loop.first;
      const int x = kMargin + static_cast<int>(offset % kCellsPerRow) * kCell;
      const int y = rows_top + static_cast<int>(offset / kCellsPerRow) * row_pitch + kCellHeight + 2;
      s << "<rect x=\"" << x << "\" y=\"" << y << "\" width=\"" << kCell << "\" height=\"4\" fill=\""
        << (g % 2 == 0 ? "#444444" : "#999999") << "\"/>\n";
    }
  }
}

struct LegendItem {
  int x, y;
  char symbol;
  std::string label;
};

// Swatches and names of the classes, wrapped to the picture's width.
std::vector<LegendItem> layout_legend(int top, int width) {
  std::vector<LegendItem> items;
  int x = kMargin, y = top;
  for (const LegendEntry& e : picture_legend()) {
    const std::string label = std::string(1, e.symbol) + " " + e.meaning;
    const int w = 14 + 7 * static_cast<int>(label.size()) + 10;
    if (x + w > width - kMargin) {
      x = kMargin;
      y += 18;
    }
    items.push_back({x, y, e.symbol, label});
    x += w;
  }
  return items;
}

}  // namespace

std::string svg_report(const std::vector<KernelReport>& kernels) {
  const int width = 2 * kMargin + kCellsPerRow * kCell;
  int legend_top = kMargin;
  for (const KernelReport& k : kernels) legend_top += strip_height(k);
  const std::vector<LegendItem> legend = layout_legend(legend_top, width);
  const int note_y = legend.back().y + 30;
  const int height = note_y + kMargin;

  std::ostringstream s;
  s << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height
    << "\" font-family=\"monospace\" font-size=\"12\">\n"
    << "<style>.title { font-weight: bold; }</style>\n"
    << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  int top = kMargin;
  for (const KernelReport& k : kernels) {
    draw_strip(s, k, top);
    top += strip_height(k);
  }
  for (const LegendItem& item : legend)
    s << "<rect x=\"" << item.x << "\" y=\"" << item.y << "\" width=\"10\" height=\"10\" fill=\""
      << colour(item.symbol) << "\" stroke=\"#888888\"/>\n<text x=\"" << item.x + 14 << "\" y=\""
      << item.y + 10 << "\">" << escape_xml(item.label) << "</text>\n";
  s << "<text x=\"" << kMargin << "\" y=\"" << note_y
    << "\">bars under the cells: WGMMA groups (first HGMMA to the one with gsb0)</text>\n";
  s << "</svg>\n";
  return s.str();
}

}  // namespace fa3::sass
