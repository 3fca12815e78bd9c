#include "runtime/tuning_table.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <nlohmann/json.hpp>
#include <optional>
#include <unordered_set>

#include "runtime/embedded.h"

namespace fa3 {

// ordered_json keeps keys in document order, so "the first error" is the first in the file.
using Json = nlohmann::ordered_json;

namespace {

constexpr int64_t kMaxSeqlen = 2147483647;
constexpr SeqlenRange kAllSeqlens{1, kMaxSeqlen};

// Limits on what a table file may be, so that any bytes give an error and not a crash or a
// hang. A real table is tens of KiB and nests 5 deep (top level, entries, an entry, match,
// seqlen_q); nesting is bounded because the JSON library dumps and compares values
// recursively, and 200,000 levels overflow the stack.
constexpr size_t kMaxTableBytes = size_t{1} << 20;
constexpr int kMaxNesting = 64;
constexpr int kTableNesting = 5;

// ---- supported keys and their slots ---------------------------------------------------

constexpr int kHeadDims[] = {64, 128, 256};

int head_dim_index(int head_dim) {
  for (int i = 0; i < static_cast<int>(std::size(kHeadDims)); ++i)
    if (kHeadDims[i] == head_dim) return i;
  return -1;
}

// The slot of a supported key in TuningTable's index; -1 when the key is not supported.
int slot_of(Direction direction, DType dtype, int head_dim, bool causal) {
  const int h = head_dim_index(head_dim);
  if (h < 0) return -1;
  return ((static_cast<int>(direction) * 2 + static_cast<int>(dtype)) * 3 + h) * 2 +
         (causal ? 1 : 0);
}

int slot_of(const MatchKey& k) { return slot_of(k.direction, k.dtype, k.head_dim, k.causal); }

// The supported keys of one direction, in slot order (the order gaps are reported in).
std::vector<MatchKey> supported_keys(Direction direction) {
  std::vector<MatchKey> keys;
  for (DType dtype : {DType::F16, DType::BF16})
    for (int head_dim : kHeadDims)
      for (bool causal : {false, true})
        keys.push_back({direction, dtype, head_dim, causal});
  return keys;
}

bool same_key(const MatchKey& a, const MatchKey& b) { return slot_of(a) == slot_of(b); }

// ---- schema violations ----------------------------------------------------------------

// The sentence after "tuning table '<source>': " of the first rule the document breaks.
// Thrown only inside this file; TuningTable::parse turns it into an Error.
struct Violation {
  std::string sentence;
};

[[noreturn]] void violate(std::string sentence) { throw Violation{std::move(sentence)}; }

// `text`, cut to at most 60 bytes on a UTF-8 character boundary, so a message stays a line
// and stays valid UTF-8.
std::string shortened(const std::string& text) {
  constexpr size_t kMaxBytes = 60;
  if (text.size() <= kMaxBytes) return text;
  size_t cut = kMaxBytes - 3;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xc0) == 0x80) --cut;
  return text.substr(0, cut) + "...";
}

// JSON text of a value with every control character escaped: dump() escapes those below
// 0x20, DEL is escaped here, so a key or string cannot break or blank out the message. The
// parser only makes valid UTF-8, but `replace` keeps dump() from ever throwing on a string
// that is not.
std::string dumped(const Json& value) {
  const std::string text = value.dump(-1, ' ', false, Json::error_handler_t::replace);
  std::string escaped;
  for (char c : text) {
    if (c == '\x7f')
      escaped += "\\u007f";
    else
      escaped += c;
  }
  return escaped;
}

// A JSON value as it appears after "got" in a message.
std::string shown(const Json& value) { return shortened(dumped(value)); }

// A key as a part of a path ("info.<key>"): escaped like a JSON string, without the quotes.
std::string path_key(const std::string& key) {
  const std::string quoted = dumped(Json(key));
  return shortened(quoted.substr(1, quoted.size() - 2));
}

[[noreturn]] void unknown_key(const std::string& object, const std::string& key,
                              const std::string& allowed) {
  violate(object + " has unknown key " + shown(Json(key)) + " (allowed: " + allowed + ")");
}

void require(const Json& object, const char* key, const std::string& path) {
  if (!object.contains(key)) violate(path + key + " is required");
}

// The value of `v` when it is a JSON integer in [lo, hi]; nullopt otherwise (also for
// 128.0, "128" and integers beyond int64).
std::optional<int64_t> integer_in(const Json& v, int64_t lo, int64_t hi) {
  if (!v.is_number_integer()) return std::nullopt;
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi)) return std::nullopt;
  const int64_t x = v.get<int64_t>();
  if (x < lo || x > hi) return std::nullopt;
  return x;
}

// ---- reading the document ------------------------------------------------------------

// "line 3, column 17" of a byte offset, counted as the JSON library counts in its messages.
std::string line_and_column(const std::string& text, size_t offset) {
  size_t line = 1, line_start = 0;
  for (size_t i = 0; i < offset && i < text.size(); ++i)
    if (text[i] == '\n') ++line, line_start = i + 1;
  return "line " + std::to_string(line) + ", column " + std::to_string(offset - line_start + 1);
}

// The offset of the '[' or '{' that opens nesting level `level`, in a text that is valid JSON
// up to there (strings may contain brackets, so they are skipped).
size_t offset_of_level(const std::string& text, int level) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth == level) return i;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return text.size();
}

// The JSON library's messages quote the bytes it last read: any bytes, invalid UTF-8
// included, as many as an unterminated string holds. They are shortened to one line of
// printable ASCII.
std::string library_message(std::string message, const std::string& last_token) {
  const std::string quote = "last read: '";
  const size_t at = message.find(quote + last_token);
  if (at != std::string::npos)
    message.replace(at + quote.size(), last_token.size(), shortened(last_token));
  std::string printable;
  for (unsigned char c : message) {
    if (c >= 0x20 && c < 0x7f) {
      printable += static_cast<char>(c);
    } else {
      char hex[5];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      printable += hex;
    }
  }
  return printable;
}

// Builds the document from the parser's events, enforcing on the way what a DOM cannot tell
// afterwards or should never hold: nesting beyond kMaxNesting (stopped at the opening
// bracket, before a deep DOM exists) and repeated keys (nlohmann keeps the last without a
// word; a table with "kernel" twice does not say which it means). Objects are assembled
// from their members at once: inserting keys one by one into an ordered_json object is a
// linear search each, quadratic for a hostile object of 100,000 keys. The parser itself is
// iterative, so no input recurses.
class DocumentBuilder : public nlohmann::json_sax<Json> {
 public:
  explicit DocumentBuilder(const std::string& text) : text_(text) {}

  bool null() override { return add(Json(nullptr)); }
  bool boolean(bool value) override { return add(Json(value)); }
  bool number_integer(number_integer_t value) override { return add(Json(value)); }
  bool number_unsigned(number_unsigned_t value) override { return add(Json(value)); }
  bool number_float(number_float_t value, const string_t&) override { return add(Json(value)); }
  bool string(string_t& value) override { return add(Json(std::move(value))); }
  bool binary(binary_t& value) override { return add(Json(std::move(value))); }

  bool start_object(std::size_t) override { return open(true); }
  bool start_array(std::size_t) override { return open(false); }

  bool key(string_t& key) override {
    Level& level = levels_.back();
    if (!level.keys.insert(key).second) {
      problem_ = path_of_current_object() + " has key " + shown(Json(key)) + " twice";
      return false;
    }
    level.members.emplace_back(std::move(key), Json());
    return true;
  }

  bool end_object() override {
    std::vector<std::pair<std::string, Json>> members = std::move(levels_.back().members);
    levels_.pop_back();
    return add(Json(Json::object_t(std::make_move_iterator(members.begin()),
                                   std::make_move_iterator(members.end()))));
  }

  bool end_array() override {
    Json::array_t elements = std::move(levels_.back().elements);
    levels_.pop_back();
    return add(Json(std::move(elements)));
  }

  bool parse_error(std::size_t position, const std::string& last_token,
                   const Json::exception& e) override {
    // 406: a number beyond a double (1e400). It is valid JSON, so the sentence says what the
    // number is and where, in place of the library's "number overflow parsing".
    if (e.id == 406) {
      const size_t start = position >= last_token.size() ? position - last_token.size() : 0;
      problem_ = "number " + shortened(last_token) + " at " + line_and_column(text_, start) +
                 " is out of range";
    } else {
      problem_ = "not valid JSON: " + library_message(e.what(), last_token);
    }
    return false;
  }

  // Why the parse stopped: set whenever sax_parse returned false.
  const std::string& problem() const { return problem_; }
  Json take_document() { return std::move(document_); }

 private:
  struct Level {
    bool is_object;
    std::vector<std::pair<std::string, Json>> members;  // an object's, the current one last
    std::unordered_set<std::string> keys;               // an object's keys, to find a repeat
    Json::array_t elements;                             // an array's complete elements
  };

  bool open(bool is_object) {
    if (levels_.size() == static_cast<size_t>(kMaxNesting)) {
      problem_ = "nesting deeper than " + std::to_string(kMaxNesting) + " levels at " +
                 line_and_column(text_, offset_of_level(text_, kMaxNesting + 1)) +
                 " (a table nests its arrays and objects " + std::to_string(kTableNesting) +
                 " deep)";
      return false;
    }
    levels_.push_back(Level{is_object, {}, {}, {}});
    return true;
  }

  bool add(Json value) {
    if (levels_.empty()) {
      document_ = std::move(value);
    } else if (levels_.back().is_object) {
      levels_.back().members.back().second = std::move(value);
    } else {
      levels_.back().elements.push_back(std::move(value));
    }
    return true;
  }

  // "entries[2].match": each enclosing level contributes where the parser is inside it.
  std::string path_of_current_object() const {
    std::string path;
    for (size_t i = 0; i + 1 < levels_.size(); ++i) {
      const Level& l = levels_[i];
      if (l.is_object)
        path += (path.empty() ? "" : ".") + path_key(l.members.back().first);
      else
        path += "[" + std::to_string(l.elements.size()) + "]";
    }
    return path.empty() ? "the top level" : path;
  }

  const std::string& text_;
  std::vector<Level> levels_;
  Json document_;
  std::string problem_;
};

// ---- one entry ------------------------------------------------------------------------

// A match object as written: the required fields stay empty until seen.
struct Match {
  std::optional<Direction> direction;
  std::optional<DType> dtype;
  std::optional<int> head_dim;
  std::optional<bool> causal;
  SeqlenRange seqlen_q = kAllSeqlens, seqlen_k = kAllSeqlens;
};

Direction parse_direction(const Json& v, const std::string& path) {
  for (Direction d : {Direction::Forward, Direction::Backward})
    if (v == direction_name(d)) return d;
  violate(path + " must be one of \"fwd\", \"bwd\" (got " + shown(v) + ")");
}

DType parse_dtype(const Json& v, const std::string& path) {
  if (v == dtype_name(DType::F16)) return DType::F16;
  if (v == dtype_name(DType::BF16)) return DType::BF16;
  violate(path + " must be one of \"f16\", \"bf16\" (got " + shown(v) + ")");
}

int parse_head_dim(const Json& v, const std::string& path) {
  const std::optional<int64_t> x = integer_in(v, 0, 1 << 30);
  if (!x || head_dim_index(static_cast<int>(*x)) < 0)
    violate(path + " must be one of 64, 128, 256 (got " + shown(v) + ")");
  return static_cast<int>(*x);
}

bool parse_bool(const Json& v, const std::string& path) {
  if (!v.is_boolean()) violate(path + " must be true or false (got " + shown(v) + ")");
  return v.get<bool>();
}

SeqlenRange parse_range(const Json& v, const std::string& path) {
  std::optional<int64_t> lo, hi;
  if (v.is_array() && v.size() == 2) {
    lo = integer_in(v[0], 1, kMaxSeqlen);
    hi = integer_in(v[1], 1, kMaxSeqlen);
  }
  if (!lo || !hi || *lo > *hi)
    violate(path + " must be [lo, hi] with integers 1 <= lo <= hi <= 2147483647 (got " + shown(v) +
            ")");
  return {*lo, *hi};
}

MatchKey parse_match(const Json& v, const std::string& path, SeqlenRange* seqlen_q,
                     SeqlenRange* seqlen_k) {
  if (!v.is_object()) violate(path + " must be an object (got " + shown(v) + ")");
  Match m;
  for (const auto& item : v.items()) {
    const std::string& key = item.key();
    const std::string at = path + "." + key;
    if (key == "direction")
      m.direction = parse_direction(item.value(), at);
    else if (key == "dtype")
      m.dtype = parse_dtype(item.value(), at);
    else if (key == "head_dim")
      m.head_dim = parse_head_dim(item.value(), at);
    else if (key == "causal")
      m.causal = parse_bool(item.value(), at);
    else if (key == "seqlen_q")
      m.seqlen_q = parse_range(item.value(), at);
    else if (key == "seqlen_k")
      m.seqlen_k = parse_range(item.value(), at);
    else
      unknown_key(path, key, "direction, dtype, head_dim, causal, seqlen_q, seqlen_k");
  }
  for (const char* key : {"direction", "dtype", "head_dim", "causal"}) require(v, key, path + ".");
  *seqlen_q = m.seqlen_q;
  *seqlen_k = m.seqlen_k;
  return {*m.direction, *m.dtype, *m.head_dim, *m.causal};
}

std::string join(const std::vector<std::string>& parts, const char* separator) {
  std::string out;
  for (const std::string& part : parts) out += (out.empty() ? "" : separator) + part;
  return out;
}

const KernelInfo& parse_kernel(const Json& v, const std::string& path,
                               const std::vector<KernelInfo>& kernels) {
  if (!v.is_string()) violate(path + " must be a string (got " + shown(v) + ")");
  for (const KernelInfo& k : kernels)
    if (k.name == v.get_ref<const std::string&>()) return k;
  violate(path + " " + shown(v) +
          " is not a kernel compiled into the library (fa3-table kernels lists them)");
}

// The config object of a kernel of `direction`: fwd_config_json or bwd_config_json.
Json config_json(Direction direction, const KernelInfo& kernel) {
  return direction == Direction::Backward ? bwd_config_json(kernel.bwd) : fwd_config_json(kernel.fwd);
}

// The direction an entry object declares, as far as it can be told before the entry is read:
// its config's keys are those of that direction's kernels. (A match without a valid
// direction is reported when the match is read.)
Direction declared_direction(const Json& entry) {
  const auto match = entry.find("match");
  if (match != entry.end() && match->is_object()) {
    const auto direction = match->find("direction");
    if (direction != match->end() && *direction == direction_name(Direction::Backward))
      return Direction::Backward;
  }
  return Direction::Forward;
}

// The shape of a config object: known keys, each with the JSON type config_json gives it for
// the entry's direction. Its values are compared with the kernel once the whole entry is read.
void check_config_shape(const Json& v, Direction direction, const std::string& path) {
  if (!v.is_object()) violate(path + " must be an object (got " + shown(v) + ")");
  const Json schema = config_json(direction, KernelInfo{});
  for (const auto& item : v.items()) {
    const std::string at = path + "." + item.key();
    if (!schema.contains(item.key())) {
      std::string allowed;
      for (const auto& field : schema.items())
        allowed += (allowed.empty() ? "" : ", ") + field.key();
      unknown_key(path, item.key(), allowed);
    }
    const Json& expected = schema[item.key()];
    if (expected.is_boolean())
      parse_bool(item.value(), at);
    else if (expected.is_number_integer() && !item.value().is_number_integer())
      violate(at + " must be an integer (got " + shown(item.value()) + ")");
    else if (expected.is_string() && !item.value().is_string())
      violate(at + " must be a string (got " + shown(item.value()) + ")");
  }
}

void check_config_values(const Json& v, const KernelInfo& kernel, const std::string& path) {
  const Json actual = config_json(kernel.direction, kernel);
  for (const auto& item : v.items()) {
    const Json& compiled = actual[item.key()];
    if (item.value() != compiled)
      violate(path + "." + item.key() + " is " + shown(item.value()) + ", but kernel \"" +
              kernel.name + "\" is compiled with " + item.key() + " " + shown(compiled));
  }
}

void check_kernel_fits(const KernelInfo& kernel, const MatchKey& key, const std::string& path) {
  auto mismatch = [&](const char* field, const std::string& kernel_value,
                      const std::string& match_value) {
    violate(path + " \"" + kernel.name + "\" does not fit its match (kernel " + field + " " +
            kernel_value + ", match " + field + " " + match_value + ")");
  };
  if (kernel.direction != key.direction)
    mismatch("direction", direction_name(kernel.direction), direction_name(key.direction));
  const bool backward = kernel.direction == Direction::Backward;
  const DType dtype = backward ? kernel.bwd.dtype : kernel.fwd.dtype;
  const int head_dim = backward ? kernel.bwd.head_dim : kernel.fwd.head_dim;
  const bool causal = backward ? kernel.bwd.causal : kernel.fwd.causal;
  if (dtype != key.dtype) mismatch("dtype", dtype_name(dtype), dtype_name(key.dtype));
  if (head_dim != key.head_dim)
    mismatch("head_dim", std::to_string(head_dim), std::to_string(key.head_dim));
  if (causal != key.causal)
    mismatch("causal", causal ? "true" : "false", key.causal ? "true" : "false");
}

TuningEntry parse_entry(const Json& v, const std::string& path,
                        const std::vector<KernelInfo>& kernels) {
  if (!v.is_object()) violate(path + " must be an object (got " + shown(v) + ")");
  TuningEntry entry{};
  const KernelInfo* kernel = nullptr;
  const Json* config = nullptr;
  for (const auto& item : v.items()) {
    const std::string& key = item.key();
    const std::string at = path + "." + key;
    if (key == "match")
      entry.key = parse_match(item.value(), at, &entry.seqlen_q, &entry.seqlen_k);
    else if (key == "kernel")
      kernel = &parse_kernel(item.value(), at, kernels);
    else if (key == "config") {
      check_config_shape(item.value(), declared_direction(v), at);
      config = &item.value();
    } else
      unknown_key(path, key, "match, kernel, config");
  }
  require(v, "match", path + ".");
  require(v, "kernel", path + ".");
  // Cross-checks need the whole entry, whatever order its keys came in.
  check_kernel_fits(*kernel, entry.key, path + ".kernel");
  if (kernel->direction == Direction::Forward && !kernel_for_call(*kernel, /*with_lse=*/true, kernels))
    violate(path + ".kernel \"" + kernel->name + "\" sums the softmax rows by the PV GEMM (_ls), "
            "so the calls that ask for the LSE run a twin without _ls, and none is compiled into "
            "the library (" + join(fwd_lse_twin_names(kernel->fwd), ", ") + ")");
  if (config) check_config_values(*config, *kernel, path + ".config");
  entry.kernel = *kernel;
  return entry;
}

// ---- the document ---------------------------------------------------------------------

// Checked before anything else: the version decides what every other key means.
void check_version(const Json& doc) {
  require(doc, "version", "");
  const Json& version = doc["version"];
  if (!version.is_number_integer() || version != 1)
    violate("version must be 1 (got " + shown(version) + ")");
}

void check_arch(const Json& v) {
  if (v != "sm_90a") violate("arch must be \"sm_90a\" (got " + shown(v) + ")");
}

std::vector<std::pair<std::string, std::string>> parse_info(const Json& v) {
  if (!v.is_object()) violate("info must be an object (got " + shown(v) + ")");
  std::vector<std::pair<std::string, std::string>> info;
  for (const auto& item : v.items()) {
    if (!item.value().is_string())
      violate("info." + path_key(item.key()) + " must be a string (got " + shown(item.value()) +
              ")");
    info.emplace_back(item.key(), item.value().get<std::string>());
  }
  return info;
}

std::vector<TuningEntry> parse_entries(const Json& v, const std::vector<KernelInfo>& kernels) {
  if (!v.is_array() || v.empty())
    violate("entries must be a non-empty array (got " + shown(v) + ")");
  std::vector<TuningEntry> entries;
  for (size_t i = 0; i < v.size(); ++i)
    entries.push_back(parse_entry(v[i], "entries[" + std::to_string(i) + "]", kernels));
  return entries;
}

// ---- coverage -------------------------------------------------------------------------

std::string at_point(int64_t seqlen_q, int64_t seqlen_k) {
  return "seqlen_q=" + std::to_string(seqlen_q) + ", seqlen_k=" + std::to_string(seqlen_k);
}

// Two entries of one key may not both cover a point; the witness is the lowest corner of
// their intersection. Pairs are reported in document order of the later entry.
void check_no_overlap(const std::vector<TuningEntry>& entries) {
  for (size_t j = 0; j < entries.size(); ++j) {
    for (size_t i = 0; i < j; ++i) {
      const TuningEntry& a = entries[i];
      const TuningEntry& b = entries[j];
      if (!same_key(a.key, b.key)) continue;
      const int64_t q = std::max(a.seqlen_q.lo, b.seqlen_q.lo);
      const int64_t k = std::max(a.seqlen_k.lo, b.seqlen_k.lo);
      if (a.seqlen_q.contains(q) && b.seqlen_q.contains(q) && a.seqlen_k.contains(k) &&
          b.seqlen_k.contains(k))
        violate("entries[" + std::to_string(i) + "] and entries[" + std::to_string(j) +
                "] both cover " + describe(a.key) + " at " + at_point(q, k));
    }
  }
}

// The ranges' boundaries cut [1, kMaxSeqlen] into intervals no entry boundary crosses.
std::vector<int64_t> interval_starts(const std::vector<SeqlenRange>& ranges) {
  std::vector<int64_t> starts{1};
  for (const SeqlenRange& r : ranges) {
    starts.push_back(r.lo);
    if (r.hi < kMaxSeqlen) starts.push_back(r.hi + 1);
  }
  std::sort(starts.begin(), starts.end());
  starts.erase(std::unique(starts.begin(), starts.end()), starts.end());
  return starts;
}

// Coordinate compression over seqlen_q: no entry begins or ends between two consecutive
// interval starts, so one row per start stands for all the rows up to the next. The entries
// holding a row are disjoint in seqlen_k (check_no_overlap ran first), so taken in order of
// seqlen_k.lo, the first one that does not begin where the previous ended shows the row's
// lowest hole. O(n^2) for n entries of a key: testing one point per cell of the grid was
// O(n^3), 20 seconds for a valid hostile table of 1 MiB.
void check_no_gap(const std::vector<TuningEntry>& entries, const MatchKey& key) {
  std::vector<const TuningEntry*> of_key;
  std::vector<SeqlenRange> q_ranges;
  for (const TuningEntry& e : entries) {
    if (!same_key(e.key, key)) continue;
    of_key.push_back(&e);
    q_ranges.push_back(e.seqlen_q);
  }
  std::sort(of_key.begin(), of_key.end(), [](const TuningEntry* a, const TuningEntry* b) {
    return a->seqlen_k.lo < b->seqlen_k.lo;
  });
  for (int64_t q : interval_starts(q_ranges)) {
    int64_t k = 1;  // the lowest seqlen_k of this row not covered so far
    for (const TuningEntry* e : of_key) {
      if (!e->seqlen_q.contains(q)) continue;
      if (e->seqlen_k.lo > k) break;
      k = std::max(k, e->seqlen_k.hi + 1);
    }
    if (k <= kMaxSeqlen) violate("no entry covers " + describe(key) + " at " + at_point(q, k));
  }
}

// Every forward key must be covered; a backward key only with BackwardCoverage::Required or
// when the table has an entry for it (a key without any runs the first compiled kernel that
// fits, select_backward_kernel).
void check_coverage(const std::vector<TuningEntry>& entries, BackwardCoverage backward) {
  check_no_overlap(entries);
  for (const MatchKey& key : supported_keys(Direction::Forward)) check_no_gap(entries, key);
  for (const MatchKey& key : supported_keys(Direction::Backward)) {
    const bool has_entry = std::any_of(entries.begin(), entries.end(),
                                       [&](const TuningEntry& e) { return same_key(e.key, key); });
    if (has_entry || backward == BackwardCoverage::Required) check_no_gap(entries, key);
  }
}

// The keys after version, in document order.
void parse_top_level(const Json& doc, const std::vector<KernelInfo>& kernels,
                     std::vector<std::pair<std::string, std::string>>* info,
                     std::vector<TuningEntry>* entries) {
  for (const auto& item : doc.items()) {
    const std::string& key = item.key();
    if (key == "version") continue;  // checked first, by check_version
    if (key == "arch")
      check_arch(item.value());
    else if (key == "info")
      *info = parse_info(item.value());
    else if (key == "entries")
      *entries = parse_entries(item.value(), kernels);
    else
      unknown_key("the top level", key, "version, arch, info, entries");
  }
  require(doc, "arch", "");
  require(doc, "entries", "");
}

Error table_error(const std::string& source, const std::string& sentence) {
  return make_error(FA3_ERR_TUNING_TABLE, "tuning table '" + source + "': " + sentence);
}

Error read_text_file(const std::string& path, std::string* text) {
  auto cannot_read = [&](int err) {
    return make_error(FA3_ERR_TUNING_TABLE,
                      "tuning table '" + path + "' cannot be read: " + std::strerror(err));
  };
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return cannot_read(errno);
  // One byte past the limit is enough for parse to refuse the file; reading stops there, so
  // an endless file (/dev/zero) cannot exhaust memory.
  char buffer[1 << 16];
  size_t n;
  while (text->size() <= kMaxTableBytes &&
         (n = std::fread(buffer, 1, std::min(sizeof buffer, kMaxTableBytes + 1 - text->size()),
                         f)) > 0)
    text->append(buffer, n);
  // fread reports a failed read(2) (EISDIR for a directory) through ferror and errno.
  const int err = std::ferror(f) ? errno : 0;
  std::fclose(f);
  return err ? cannot_read(err) : Error::ok();
}

}  // namespace

const char* direction_name(Direction d) { return d == Direction::Backward ? "bwd" : "fwd"; }

std::string describe(const MatchKey& key) {
  return std::string(direction_name(key.direction)) + " " + dtype_name(key.dtype) + " head_dim " +
         std::to_string(key.head_dim) + (key.causal ? " causal" : " non-causal");
}

Json fwd_config_json(const FwdConfig& c) {
  Json j{{"block_m", c.block_m},
         {"block_n", c.block_n},
         {"stages", c.stages},
         {"consumer_warpgroups", c.consumer_warpgroups},
         {"producer_regs", c.producer_regs()},
         {"consumer_regs", c.consumer_regs()}};
  // The name's options, as the registry names them (src/kernels/fwd_names.h).
  for (const FwdOption& o : kFwdOptions) {
    const int v = fwd_field_value(c, o.field);
    if (o.kind == FwdFieldKind::Bool) j[o.key] = v != 0;
    else if (o.kind == FwdFieldKind::Int) j[o.key] = v;
    else j[o.key] = fwd_option_value_word(c, o);
  }
  return j;
}

Json bwd_config_json(const BwdConfig& c) {
  return Json{{"block_m", c.block_m},
              {"block_n", c.block_n},
              {"stages", c.stages},
              {"consumer_warpgroups", c.consumer_warpgroups},
              {"producer_regs", c.producer_regs()},
              {"consumer_regs", c.consumer_regs()},
              {"kv_split", bwd_kv_split_word(c.kv_split)},
              {"dq_split", bwd_dq_split_word(c.dq_split)},
              {"rotated_walk", c.rotated_walk},
              {"first_store", c.first_store},
              {"persistent", c.persistent},
              {"causal", c.causal}};
}

std::string builtin_tuning_table_text() {
  return std::string(reinterpret_cast<const char*>(kEmbeddedTuningTable.begin),
                     reinterpret_cast<const char*>(kEmbeddedTuningTable.end));
}

Error TuningTable::parse(const std::string& json_text, const std::string& source,
                         const std::vector<KernelInfo>& kernels, TuningTable* out,
                         BackwardCoverage backward) {
  if (json_text.size() > kMaxTableBytes)
    return table_error(source, "larger than 1 MiB (" + std::to_string(kMaxTableBytes) +
                                   " bytes), the most a table may be");
  // The JSON library's lexer takes a NUL byte for the end of its input and would accept
  // anything after one; a raw NUL is never valid JSON.
  const size_t nul = json_text.find('\0');
  if (nul != std::string::npos)
    return table_error(source, "a NUL byte at " + line_and_column(json_text, nul) +
                                   ": a table is JSON text, which has none");
  DocumentBuilder builder(json_text);
  if (!Json::sax_parse(json_text, &builder)) return table_error(source, builder.problem());
  const Json doc = builder.take_document();

  TuningTable table;
  table.source_ = source;
  try {
    if (!doc.is_object()) violate("the top level must be an object (got " + shown(doc) + ")");
    check_version(doc);
    parse_top_level(doc, kernels, &table.info_, &table.entries_);
    check_coverage(table.entries_, backward);
  } catch (const Violation& v) {
    return table_error(source, v.sentence);
  }
  table.build_index();
  *out = std::move(table);
  return Error::ok();
}

Error TuningTable::load_file(const std::string& path, const std::vector<KernelInfo>& kernels,
                             TuningTable* out) {
  std::string text;
  Error e = read_text_file(path, &text);
  if (e.failed()) return e;
  return parse(text, path, kernels, out);
}

Error TuningTable::load_builtin(TuningTable* out) {
  return parse(builtin_tuning_table_text(), "built-in", compiled_forward_and_backward_kernels(),
               out, BackwardCoverage::Required);
}

void TuningTable::build_index() {
  for (size_t i = 0; i < entries_.size(); ++i) {
    const TuningEntry& e = entries_[i];
    slots_[slot_of(e.key)].push_back({e.seqlen_q, e.seqlen_k, i});
  }
}

const KernelInfo* TuningTable::select(const ProblemKey& p) const {
  const int slot = slot_of(p.direction, p.dtype, p.head_dim, p.causal);
  if (slot < 0) return nullptr;
  for (const Rule& rule : slots_[slot])
    if (rule.seqlen_q.contains(p.seqlen_q) && rule.seqlen_k.contains(p.seqlen_k))
      return &entries_[rule.entry].kernel;
  return nullptr;
}

}  // namespace fa3
