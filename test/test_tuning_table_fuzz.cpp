// Hostile tuning tables: whatever bytes a table file holds, loading it gives FA3_OK or
// FA3_ERR_TUNING_TABLE with one sentence that names the file - never a crash, a hang or an
// escaping exception. Every input goes through the loader's C++ entry (TuningTable::parse)
// and, from a file, through fa3_tuning_table_validate, which must say the same. Deterministic:
// fixed seeds, and only the generator's raw output (distributions differ between libraries).
#include <dlfcn.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "fa3/fa3.h"
#include "runtime/kernel_registry.h"
#include "runtime/tuning_table.h"

using Json = nlohmann::ordered_json;
using namespace fa3;

namespace {

// One file per process, rewritten by every case that goes through the C API; it is also the
// source name TuningTable::parse is given, so both paths must produce the same sentence. In
// memory where Linux offers it: on a disk, rewriting the file takes milliseconds a case.
const std::string& scratch_path() {
  static const std::string path = [] {
    const std::filesystem::path dir = std::filesystem::is_directory("/dev/shm")
                                          ? std::filesystem::path("/dev/shm")
                                          : std::filesystem::temp_directory_path();
    return (dir / ("fa3_test_fuzz_" + std::to_string(getpid()) + ".json")).string();
  }();
  return path;
}

std::string prefix() { return "tuning table '" + scratch_path() + "': "; }

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A sentence a person can read in a terminal or a log: valid UTF-8, no control characters
// (a NUL would cut fa3_last_error() short, a newline would break the one-line promise).
bool printable_utf8_line(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    size_t extra;
    uint32_t cp;
    if (c < 0x80) {
      if (c < 0x20 || c == 0x7f) return false;
      ++i;
      continue;
    } else if ((c & 0xe0) == 0xc0) {
      extra = 1, cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      extra = 2, cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      extra = 3, cp = c & 0x07;
    } else {
      return false;
    }
    if (i + extra >= s.size()) return false;
    for (size_t k = 1; k <= extra; ++k) {
      const unsigned char cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    const uint32_t least[] = {0, 0x80, 0x800, 0x10000};
    if (cp < least[extra] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += extra + 1;
  }
  return true;
}

// The start of an input for failure reports, with bytes a terminal cannot show escaped.
std::string excerpt(const std::string& bytes) {
  std::string out;
  for (size_t i = 0; i < bytes.size() && out.size() < 160; ++i) {
    const unsigned char c = static_cast<unsigned char>(bytes[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    }
  }
  return out + " (" + std::to_string(bytes.size()) + " bytes)";
}

// The promise every input must keep.
void check_promise(const Error& e, const std::string& expected_prefix) {
  if (!e.failed()) return;
  INFO("message: " << excerpt(e.message));
  REQUIRE(e.status == FA3_ERR_TUNING_TABLE);
  REQUIRE(e.message.rfind(expected_prefix, 0) == 0);
  REQUIRE(e.message.size() > expected_prefix.size() + 8);
  REQUIRE(printable_utf8_line(e.message));
}

// The loader's C++ entry, against the kernels compiled into this library.
Error parse_text(const std::string& text) {
  TuningTable t;
  const Error e = TuningTable::parse(text, scratch_path(), compiled_forward_and_backward_kernels(), &t);
  check_promise(e, prefix());
  return e;
}

// The same bytes from a file through the C API: the same status and the same sentence.
Error validate_text(const std::string& text) {
  const Error e = parse_text(text);
  write_file(scratch_path(), text);
  const fa3_status s = fa3_tuning_table_validate(scratch_path().c_str());
  const std::string message = fa3_last_error();
  REQUIRE(s == e.status);
  REQUIRE(message == e.message);
  return e;
}

void remove_scratch() { std::remove(scratch_path().c_str()); }

Json builtin_doc() { return Json::parse(builtin_tuning_table_text()); }

// `doc` dumped on one line with the value at `pointer` replaced by raw text (numbers a DOM
// cannot hold, nesting a DOM should not be asked to dump); *column is the column of line 1
// where the raw text starts.
std::string with_raw_value(Json doc, const std::string& pointer, const std::string& raw,
                           size_t* column = nullptr) {
  doc[Json::json_pointer(pointer)] = "@RAW@";
  std::string text = doc.dump();
  const size_t at = text.find("\"@RAW@\"");
  text.replace(at, 7, raw);
  if (column) *column = at + 1;
  return text;
}

std::string repeat(const std::string& s, size_t n) {
  std::string out;
  out.reserve(s.size() * n);
  for (size_t i = 0; i < n; ++i) out += s;
  return out;
}

// What "fast" means for the inputs that once took quadratic or cubic time (10 to 25 s): they
// take well under a second now, and 5 s leaves room for a slow, shared machine.
constexpr double kSlowSeconds = 5.0;

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

const std::string kTooDeep = "nesting deeper than 64 levels at line ";
const std::string kTooDeepWhy = " (a table nests its arrays and objects 5 deep)";

}  // namespace

TEST_CASE("fuzz: deep nesting is an error at the 65th level and not a stack overflow",
          "[cpu][tuning]") {
  const size_t kLevels = 200000;
  SECTION("200,000 nested arrays, closed and unclosed") {
    const std::string open(kLevels, '[');
    CHECK(validate_text(open + std::string(kLevels, ']')).message ==
          prefix() + kTooDeep + "1, column 65" + kTooDeepWhy);
    CHECK(validate_text(open).message == prefix() + kTooDeep + "1, column 65" + kTooDeepWhy);
  }
  SECTION("200,000 nested objects") {
    // {"":{"":...: the 65th '{' starts at offset 64 * 4 (and the file stays under 1 MiB).
    const std::string text = repeat("{\"\":", kLevels) + "1" + std::string(kLevels, '}');
    CHECK(validate_text(text).message == prefix() + kTooDeep + "1, column 257" + kTooDeepWhy);
  }
  SECTION("arrays and objects alternating, over several lines") {
    const std::string text = "\n\n  " + repeat("[{\"\":", kLevels / 2);
    // Levels 1..64 take 32 pairs (5 bytes each); the 65th level is the next '['.
    CHECK(validate_text(text).message == prefix() + kTooDeep + "3, column 163" + kTooDeepWhy);
  }
  SECTION("deep values inside a valid table") {
    for (const char* pointer : {"/version", "/info/notes", "/entries/3/match/seqlen_q",
                                "/entries/0/config/block_m"}) {
      INFO(pointer);
      int depth = 0;
      for (const char* c = pointer; *c; ++c) depth += *c == '/';
      // The value at a pointer of d tokens sits inside d containers; its arrays add the rest.
      size_t column = 0;
      const std::string text = with_raw_value(
          builtin_doc(), pointer, std::string(kLevels, '[') + std::string(kLevels, ']'), &column);
      column += 64 - depth;
      CHECK(validate_text(text).message ==
            prefix() + kTooDeep + "1, column " + std::to_string(column) + kTooDeepWhy);
    }
  }
  SECTION("64 levels are allowed") {
    const std::string text = std::string(64, '[') + std::string(64, ']');
    CHECK(validate_text(text).message ==
          prefix() + "the top level must be an object (got " + std::string(57, '[') + "...)");
    CHECK(validate_text(std::string(65, '[') + std::string(65, ']')).message ==
          prefix() + kTooDeep + "1, column 65" + kTooDeepWhy);
  }
  remove_scratch();
}

TEST_CASE("fuzz: fa3_create with a deeply nested table fails with FA3_ERR_TUNING_TABLE",
          "[cpu][tuning]") {
  // The fake driver (test/fake_cuda) next to this executable, so the same call with a valid
  // table shows that the failure is the table's and not the machine's.
  char exe[PATH_MAX] = {};
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  REQUIRE(n > 0);
  std::string fake = exe;
  fake = fake.substr(0, fake.rfind('/')) + "/libfakecuda.so";
  void* lib = dlopen(fake.c_str(), RTLD_NOW);
  if (!lib) FAIL("dlopen " << fake << ": " << dlerror());
  auto reset = reinterpret_cast<void (*)()>(dlsym(lib, "fake_cuda_reset"));
  REQUIRE(reset != nullptr);
  reset();
  setenv("FA3_LIBCUDA", fake.c_str(), 1);
  struct UnsetOnExit {  // also when a REQUIRE ends the test early
    ~UnsetOnExit() { unsetenv("FA3_LIBCUDA"); }
  } unset_on_exit;

  write_file(scratch_path(), builtin_tuning_table_text());
  fa3_handle* h = nullptr;
  REQUIRE(fa3_create(&h, 0, scratch_path().c_str()) == FA3_OK);
  REQUIRE(fa3_destroy(h) == FA3_OK);

  write_file(scratch_path(), std::string(200000, '[') + std::string(200000, ']'));
  h = nullptr;
  CHECK(fa3_create(&h, 0, scratch_path().c_str()) == FA3_ERR_TUNING_TABLE);
  CHECK(h == nullptr);
  CHECK(std::string(fa3_last_error()) == prefix() + kTooDeep + "1, column 65" + kTooDeepWhy);

  remove_scratch();
}

TEST_CASE("fuzz: huge and odd numbers where integers are expected", "[cpu][tuning]") {
  const Json doc = builtin_doc();
  const std::string head_dim = "/entries/0/match/head_dim";
  const std::string rule = "entries[0].match.head_dim must be one of 64, 128, 256 (got ";

  SECTION("numbers a double cannot hold") {
    const std::string longest = "1" + std::string(100000, '0');
    for (const std::string& raw : {std::string("1e400"), std::string("-1e400"),
                                   std::string("123456789e999999999999"), longest}) {
      size_t column = 0;
      const std::string text = with_raw_value(doc, head_dim, raw, &column);
      const std::string shown = raw.size() > 60 ? raw.substr(0, 57) + "..." : raw;
      CHECK(validate_text(text).message == prefix() + "number " + shown + " at line 1, column " +
                                               std::to_string(column) + " is out of range");
    }
    CHECK(validate_text("{\"version\": 1e400}").message ==
          prefix() + "number 1e400 at line 1, column 13 is out of range");
  }
  SECTION("numbers that are not one of the head dims") {
    const std::pair<const char*, const char*> cases[] = {
        {"99999999999999999999", "1e+20"},
        {"18446744073709551616", "1.8446744073709552e+19"},
        {"18446744073709551615", "18446744073709551615"},
        {"-9223372036854775808", "-9223372036854775808"},
        {"-9223372036854775809", "-9.223372036854776e+18"},
        {"-0", "0"},
        {"-0.0", "-0.0"},
        {"1.5", "1.5"},
        {"64.0", "64.0"},
        {"6.4e1", "64.0"},
        {"1e-400", "0.0"},
        {"4294967360", "4294967360"},  // 64 + 2^32: must not wrap to 64
    };
    for (const auto& [raw, got] : cases) {
      INFO(raw);
      CHECK(validate_text(with_raw_value(doc, head_dim, raw)).message ==
            prefix() + rule + got + ")");
    }
  }
  SECTION("huge sequence lengths and versions") {
    CHECK(validate_text(with_raw_value(doc, "/entries/0/match/seqlen_q/1", "1e19")).message ==
          prefix() +
              "entries[0].match.seqlen_q must be [lo, hi] with integers 1 <= lo <= hi <= "
              "2147483647 (got [1,1e+19])");
    CHECK(validate_text(with_raw_value(doc, "/version", "99999999999999999999")).message ==
          prefix() + "version must be 1 (got 1e+20)");
    CHECK(validate_text(with_raw_value(doc, "/version", "4294967297")).message ==
          prefix() + "version must be 1 (got 4294967297)");
  }
  remove_scratch();
}

TEST_CASE("fuzz: NUL bytes and invalid UTF-8 and odd or repeated keys", "[cpu][tuning]") {
  const std::string allowed = " (allowed: version, arch, info, entries)";
  SECTION("a NUL byte outside and inside a string, and after a whole valid table") {
    const std::string outside = std::string("{\"version\": 1,") + '\0' + "}";
    CHECK(validate_text(outside).message ==
          prefix() + "a NUL byte at line 1, column 15: a table is JSON text, which has none");
    const std::string inside = std::string("{\"version\": 1, \"arch\": \"sm") + '\0' + "\"}";
    CHECK(validate_text(inside).message ==
          prefix() + "a NUL byte at line 1, column 27: a table is JSON text, which has none");
    // The JSON library's lexer stops at a NUL: what follows one was never read.
    const std::string table = builtin_doc().dump(1);
    const size_t lines = static_cast<size_t>(std::count(table.begin(), table.end(), '\n'));
    const std::string trailing = table + "\n" + '\0' + "not json {{{[[[";
    CHECK(validate_text(trailing).message ==
          prefix() + "a NUL byte at line " + std::to_string(lines + 2) +
              ", column 1: a table is JSON text, which has none");
  }
  SECTION("escaped control characters in a key are shown escaped") {
    CHECK(validate_text("{\"version\": 1, \"a\\u0000b\\nc\x7f\": 2}").message ==
          prefix() + "the top level has unknown key \"a\\u0000b\\nc\\u007f\"" + allowed);
    Json doc = builtin_doc();
    doc["info"]["x\ty"] = 3;
    CHECK(validate_text(doc.dump()).message == prefix() + "info.x\\ty must be a string (got 3)");
  }
  SECTION("invalid UTF-8 inside and outside strings") {
    for (const std::string& bad : {std::string("\xff"), std::string("\xc3\x28"),
                                   std::string("\xed\xa0\x80"), std::string("\xf4\x90\x80\x80"),
                                   std::string("\xe2\x82")}) {
      INFO(excerpt(bad));
      CHECK_THAT(validate_text("{\"version\": 1, \"arch\": \"" + bad + "\"}").message,
                 Catch::StartsWith(prefix() + "not valid JSON: "));
      CHECK_THAT(validate_text("{\"version\": 1, " + bad + "}").message,
                 Catch::StartsWith(prefix() + "not valid JSON: "));
    }
    CHECK_THAT(validate_text("{\"version\": 1, \"arch\": \"\\ud800\"}").message,
               Catch::StartsWith(prefix() + "not valid JSON: "));
  }
  SECTION("valid UTF-8 is kept whole, also where a long value is shortened") {
    CHECK(validate_text("{\"version\": 1, \"ключ\": 2}").message ==
          prefix() + "the top level has unknown key \"ключ\"" + allowed);
    const std::string arch = "x" + repeat("é", 100);
    // shown() cuts a value at 57 bytes, which falls inside the 28th two-byte character here.
    CHECK(validate_text("{\"version\": 1, \"arch\": \"" + arch + "\"}").message ==
          prefix() + "arch must be \"sm_90a\" (got \"x" + repeat("é", 27) + "...)");
  }
  SECTION("a long key and a long unterminated string keep the sentence short") {
    const std::string key(100000, 'k');
    CHECK(validate_text("{\"version\": 1, \"" + key + "\": 2}").message ==
          prefix() + "the top level has unknown key \"" + std::string(56, 'k') + "..." +
              allowed);
    const Error e = validate_text("{\"version\": 1, \"arch\": \"" + std::string(500000, 'x'));
    CHECK_THAT(e.message, Catch::StartsWith(prefix() + "not valid JSON: "));
    CHECK(e.message.size() < 400);
  }
  SECTION("repeated keys, at any depth, with long keys shortened in the path") {
    CHECK(validate_text("{\"version\": 1, \"info\": {\"a\": \"\", \"a\": \"\"}}").message ==
          prefix() + "info has key \"a\" twice");
    const std::string key(1000, 'k');
    CHECK(validate_text("{\"" + key + "\": [0, {\"x\": 1, \"x\": 2}]}").message ==
          prefix() + std::string(57, 'k') + "...[1] has key \"x\" twice");
    // A repeat before a syntax error is the first error in the document.
    CHECK(validate_text("{\"version\": 1, \"version\": 1,,}").message ==
          prefix() + "the top level has key \"version\" twice");
  }
  SECTION("an object of 75,000 keys loads in linear time") {
    std::string info = "{";
    for (int i = 0; i < 75000; ++i)
      info += (i ? ", \"" : "\"") + std::to_string(i) + "\": \"\"";
    const Json doc = builtin_doc();
    TuningTable t;
    const auto start = std::chrono::steady_clock::now();
    const Error e = TuningTable::parse(with_raw_value(doc, "/info", info + "}"), "many.json",
                                       compiled_forward_and_backward_kernels(), &t);
    INFO(e.message);
    REQUIRE_FALSE(e.failed());
    CHECK(seconds_since(start) < kSlowSeconds);
    CHECK(t.info().size() == 75000);
    CHECK(validate_text(with_raw_value(doc, "/info", info + ", \"74999x\": 1}")).message ==
          prefix() + "info.74999x must be a string (got 1)");
  }
  remove_scratch();
}

TEST_CASE("fuzz: a table file may be 1 MiB at most; an endless one is refused",
          "[cpu][tuning]") {
  const std::string too_big =
      prefix() + "larger than 1 MiB (1048576 bytes), the most a table may be";
  std::string text = builtin_tuning_table_text();
  text.resize(1048576, ' ');
  CHECK_FALSE(validate_text(text).failed());
  text += ' ';
  CHECK(validate_text(text).message == too_big);
  CHECK(validate_text(std::string(8 << 20, '[')).message == too_big);
  // A device that never ends: the reader must stop, not grow until memory runs out.
  CHECK(fa3_tuning_table_validate("/dev/zero") == FA3_ERR_TUNING_TABLE);
  CHECK(std::string(fa3_last_error()) ==
        "tuning table '/dev/zero': larger than 1 MiB (1048576 bytes), the most a table may be");
  remove_scratch();
}

TEST_CASE("fuzz: a valid table of thousands of entries is checked in quadratic time",
          "[cpu][tuning]") {
  Json doc = builtin_doc();
  doc["info"] = Json::object();
  Json entries = Json::array();
  std::string kernel;  // a bf16 d128 non-causal kernel of the built-in table
  for (Json& e : doc["entries"]) {
    e.erase("config");
    const Json& m = e["match"];
    if (m["dtype"] == "bf16" && m["head_dim"] == 128 && m["causal"] == false) {
      if (kernel.empty()) kernel = e["kernel"];
      continue;
    }
    entries.push_back(e);
  }
  auto bf16_d128 = [&](int64_t q_lo, int64_t q_hi, int64_t k_lo, int64_t k_hi) {
    return Json{{"match",
                 {{"direction", "fwd"},
                  {"dtype", "bf16"},
                  {"head_dim", 128},
                  {"causal", false},
                  {"seqlen_q", {q_lo, q_hi}},
                  {"seqlen_k", {k_lo, k_hi}}}},
                {"kernel", kernel}};
  };
  // A staircase: row seqlen_q = i is split at seqlen_k = i, so 2n entries cut the square into
  // n^2 cells that are all covered; the last row loses one cell in the second table.
  const int64_t n = 2500, kMax = 2147483647;
  Json with_gap;
  for (int64_t i = 1; i <= n; ++i) {
    entries.push_back(bf16_d128(i, i, i, kMax));
    if (i == n) with_gap = entries;
    if (i > 1) {
      entries.push_back(bf16_d128(i, i, 1, i - 1));
      if (i == n) with_gap.push_back(bf16_d128(i, i, 1, i - 2));
    }
  }
  entries.push_back(bf16_d128(n + 1, kMax, 1, kMax));
  with_gap.push_back(entries.back());

  doc["entries"] = entries;
  const std::string text = doc.dump();
  REQUIRE(text.size() < (1 << 20));
  auto start = std::chrono::steady_clock::now();
  const Error e = parse_text(text);
  INFO(e.message);
  CHECK_FALSE(e.failed());
  CHECK(seconds_since(start) < kSlowSeconds);

  doc["entries"] = with_gap;
  start = std::chrono::steady_clock::now();
  CHECK(parse_text(doc.dump()).message ==
        prefix() + "no entry covers fwd bf16 head_dim 128 non-causal at seqlen_q=2500, " +
            "seqlen_k=2499");
  CHECK(seconds_since(start) < kSlowSeconds);
}

TEST_CASE("fuzz: random bytes are rejected with a sentence", "[cpu][tuning]") {
  std::mt19937 rng(20261126);
  const std::string json_bytes = "{}[]{}[]\"\"\"::,,,,0123456789.eE+-truefalsenull  \n\t\\u/ab";
  for (int i = 0; i < 1500; ++i) {
    std::string text(rng() % 400, '\0');
    for (char& c : text)
      c = i % 2 ? json_bytes[rng() % json_bytes.size()] : static_cast<char>(rng() & 0xff);
    INFO("case " << i << ": " << excerpt(text));
    CHECK(validate_text(text).failed());
  }
  remove_scratch();
}

TEST_CASE("fuzz: truncations of the built-in table", "[cpu][tuning]") {
  const std::string text = builtin_tuning_table_text();
  const size_t complete = text.rfind('}') + 1;  // from here on only whitespace is missing
  // Every cut through the top level, the info strings and the first entries, and through the
  // closing brackets; every 11th byte in between, where the entries repeat one layout (11
  // lands on other offsets in each). All 30,000 cuts take some 8 s, as each parse reads the
  // whole prefix.
  auto cut_here = [&](size_t n) { return n < 2048 || n + 512 > text.size() || n % 11 == 0; };
  for (size_t n = 0; n <= text.size(); ++n) {
    if (!cut_here(n)) continue;
    const std::string prefix_bytes = text.substr(0, n);
    const Error e = n % 8 == 0 ? validate_text(prefix_bytes) : parse_text(prefix_bytes);
    INFO("truncated to " << n << " of " << text.size() << " bytes");
    if (n < complete) {
      REQUIRE(e.message.rfind(prefix() + "not valid JSON: ", 0) == 0);
    } else {
      REQUIRE_FALSE(e.failed());
    }
  }
  remove_scratch();
}

TEST_CASE("fuzz: random mutations of the built-in table", "[cpu][tuning]") {
  const Json base = builtin_doc();
  const Json flat = base.flatten();  // JSON pointer -> scalar value
  std::vector<std::string> leaves;
  for (const auto& item : flat.items()) leaves.push_back(item.key());
  const std::vector<Json> odd_values = {
      nullptr, -1, 0, 2147483648LL, uint64_t{18446744073709551615u}, 1.5, -0.0, "", "fwd",
      "bwd",   "bf16", true, Json::array(), Json::object(), Json::array({1, 2}), 128, 256};
  const std::vector<std::string> odd_text = {
      "[", "]", "{", "}", "\"", ",", ":", "1e400", "-0", "99999999999999999999",
      std::string(1, '\0'), "\xff", "\xc3\x28", "\\u0000", "\"version\": 2,", "[[[[[[[[", "null",
      "\"\\ud800\"", "\"kernel\": \"x\",", "\n", std::string(100, '['), "/*", "\xef\xbb\xbf"};

  std::mt19937_64 rng(0xfa3);
  int accepted = 0, not_json = 0, schema = 0;
  for (int i = 0; i < 1600; ++i) {
    // Values swapped and replaced in the DOM keep the document JSON, so the schema and the
    // coverage checks see them; byte edits afterwards exercise the parser.
    Json doc = base;
    const int value_edits = static_cast<int>(rng() % 3);
    for (int k = 0; k < value_edits; ++k) {
      Json& a = doc[Json::json_pointer(leaves[rng() % leaves.size()])];
      if (rng() % 2) {
        std::swap(a, doc[Json::json_pointer(leaves[rng() % leaves.size()])]);
      } else {
        a = odd_values[rng() % odd_values.size()];
      }
    }
    std::string text = doc.dump(rng() % 2 ? 2 : -1);
    const int byte_edits =
        value_edits == 0 ? 1 + static_cast<int>(rng() % 3) : static_cast<int>(rng() % 2);
    for (int k = 0; k < byte_edits && !text.empty(); ++k) {
      const size_t at = rng() % text.size();
      const size_t len = 1 + rng() % 24;
      switch (rng() % 5) {
        case 0:  // flip a bit
          text[at] = static_cast<char>(text[at] ^ (1 << (rng() % 8)));
          break;
        case 1:  // any byte
          text[at] = static_cast<char>(rng() & 0xff);
          break;
        case 2:  // delete a run
          text.erase(at, len);
          break;
        case 3:  // duplicate a run somewhere
          text.insert(rng() % (text.size() + 1), text.substr(at, len));
          break;
        case 4:  // a hostile token
          text.insert(at, odd_text[rng() % odd_text.size()]);
          break;
      }
    }
    INFO("mutant " << i << ": " << excerpt(text));
    const Error e = validate_text(text);
    if (!e.failed())
      ++accepted;
    else if (e.message.rfind(prefix() + "not valid JSON: ", 0) == 0)
      ++not_json;
    else
      ++schema;
  }
  // The mutants reach every stage: some still load, many break the syntax, many the schema
  // or the coverage.
  INFO("accepted " << accepted << ", not JSON " << not_json << ", schema " << schema);
  CHECK(accepted >= 10);
  CHECK(not_json >= 400);
  CHECK(schema >= 400);
  remove_scratch();
}
