// The tuning table: schema validation (every rule with its exact message), coverage,
// selection, and the built-in table. CPU only: kernel lists are built from names here.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runtime/tuning_table.h"

using Json = nlohmann::ordered_json;
using namespace fa3;

namespace {

constexpr int64_t kMax = 2147483647;

// The forward kernels of src/kernels/kernels.mk (what the built-in table may name).
const char* const kKernelsMk[] = {
    "fa3_fwd_f16_d64_m128_n128_s2_w2",   "fa3_fwd_f16_d64_m128_n128_s2_w2_causal",
    "fa3_fwd_f16_d128_m128_n128_s2_w2",  "fa3_fwd_f16_d128_m128_n128_s2_w2_causal",
    "fa3_fwd_f16_d256_m128_n64_s2_w2",   "fa3_fwd_f16_d256_m128_n64_s2_w2_causal",
    "fa3_fwd_bf16_d64_m128_n128_s2_w2",  "fa3_fwd_bf16_d64_m128_n128_s2_w2_causal",
    "fa3_fwd_bf16_d128_m128_n128_s2_w2", "fa3_fwd_bf16_d128_m128_n128_s2_w2_causal",
    "fa3_fwd_bf16_d256_m128_n64_s2_w2",  "fa3_fwd_bf16_d256_m128_n64_s2_w2_causal",
};
// Two more bf16 d128 configs, so a table can split sequence lengths between kernels.
const char* const kSmallTileKernel = "fa3_fwd_bf16_d128_m128_n64_s2_w2";
const char* const kThreeWarpgroupKernel = "fa3_fwd_bf16_d128_m192_n128_s2_w3";

// A backward kernel name for each key (valid names, not all of them compiled: d128 causal's
// _dqh_p32_causal is a lab kernel).
std::string backward_kernel(const std::string& dtype, int head_dim, bool causal) {
  const char* shape = head_dim == 64    ? "_m128_n128_s2_w2_dqq"
                      : head_dim == 128 ? "_m64_n128_s2_w2_dqh"
                                        : "_m64_n80_s1_w2_kvt_dqh";
  // d128 causal: setmaxnreg 32 / 232 (_p32).
  const char* regs = head_dim == 128 && causal ? "_p32" : "";
  return "fa3_bwd_" + dtype + "_d" + std::to_string(head_dim) + shape + regs + (causal ? "_causal" : "");
}
// A second bf16 d64 backward kernel (the lab's key split of dQ).
const char* const kBackwardLabKernel = "fa3_bwd_bf16_d64_m64_n128_s2_w2";

KernelInfo fake_kernel(const std::string& name) {
  KernelInfo k;
  k.name = name;
  if (name.rfind("fa3_bwd_", 0) == 0) {
    k.direction = Direction::Backward;
    k.bwd = parse_bwd_kernel_name(name).value();  // throws on a typo in this file
  } else {
    k.fwd = parse_fwd_kernel_name(name).value();
  }
  return k;
}

std::vector<KernelInfo> kernels_mk_list() {
  std::vector<KernelInfo> list;
  for (const char* name : kKernelsMk) list.push_back(fake_kernel(name));
  return list;
}

std::vector<KernelInfo> test_kernels() {
  std::vector<KernelInfo> list = kernels_mk_list();
  list.push_back(fake_kernel(kSmallTileKernel));
  list.push_back(fake_kernel(kThreeWarpgroupKernel));
  for (const char* dtype : {"f16", "bf16"})
    for (int head_dim : {64, 128, 256})
      for (bool causal : {false, true}) list.push_back(fake_kernel(backward_kernel(dtype, head_dim, causal)));
  list.push_back(fake_kernel(kBackwardLabKernel));
  return list;
}

std::string default_kernel(const std::string& dtype, int head_dim, bool causal) {
  return "fa3_fwd_" + dtype + "_d" + std::to_string(head_dim) +
         (head_dim == 256 ? "_m128_n64_s2_w2" : "_m128_n128_s2_w2") + (causal ? "_causal" : "");
}

Json entry(const std::string& dtype, int head_dim, bool causal, const std::string& kernel) {
  return Json{
      {"match",
       {{"direction", "fwd"}, {"dtype", dtype}, {"head_dim", head_dim}, {"causal", causal}}},
      {"kernel", kernel}};
}

// A valid table: one entry per supported key, over all sequence lengths, in the order
// f16 d64 non-causal, f16 d64 causal, ..., bf16 d256 causal (so entries[8] is bf16 d128
// non-causal).
Json valid_table() {
  Json entries = Json::array();
  for (const char* dtype : {"f16", "bf16"})
    for (int head_dim : {64, 128, 256})
      for (bool causal : {false, true})
        entries.push_back(entry(dtype, head_dim, causal, default_kernel(dtype, head_dim, causal)));
  return Json{
      {"version", 1}, {"arch", "sm_90a"}, {"info", {{"gpu", "test"}}}, {"entries", entries}};
}
constexpr int kBf16D128 = 8;  // index of the bf16 d128 non-causal entry in valid_table()

Json backward_entry(const std::string& dtype, int head_dim, bool causal, const std::string& kernel) {
  Json e = entry(dtype, head_dim, causal, kernel);
  e["match"]["direction"] = "bwd";
  return e;
}

// valid_table() with a bwd entry for every key after the forward's, in the same order (so
// entries[12 + 8] is bwd bf16 d128 non-causal).
Json valid_table_with_backward() {
  Json doc = valid_table();
  for (const char* dtype : {"f16", "bf16"})
    for (int head_dim : {64, 128, 256})
      for (bool causal : {false, true})
        doc["entries"].push_back(
            backward_entry(dtype, head_dim, causal, backward_kernel(dtype, head_dim, causal)));
  return doc;
}

Error parse_text(const std::string& text, TuningTable* out) {
  return TuningTable::parse(text, "t.json", test_kernels(), out);
}

// The message of a table that must be rejected.
std::string error_of_text(const std::string& text) {
  TuningTable t;
  const Error e = parse_text(text, &t);
  REQUIRE(e.status == FA3_ERR_TUNING_TABLE);
  return e.message;
}
std::string error_of(const Json& doc) { return error_of_text(doc.dump(2)); }

TuningTable parsed(const Json& doc) {
  TuningTable t;
  const Error e = parse_text(doc.dump(), &t);
  INFO(e.message);
  REQUIRE_FALSE(e.failed());
  return t;
}

std::string selected(const TuningTable& t, DType dtype, int head_dim, bool causal, int64_t q,
                     int64_t k, Direction direction = Direction::Forward) {
  const KernelInfo* kernel = t.select({direction, dtype, head_dim, causal, q, k});
  return kernel ? kernel->name : "(none)";
}

// Replaces valid_table()'s bf16 d128 non-causal entry by `replacements`.
Json with_bf16_d128_split(std::initializer_list<Json> replacements) {
  Json doc = valid_table();
  Json& entries = doc["entries"];
  entries.erase(entries.begin() + kBf16D128);
  int at = kBf16D128;
  for (const Json& e : replacements) entries.insert(entries.begin() + at++, e);
  return doc;
}

Json bf16_d128(Json seqlen_q, Json seqlen_k, const std::string& kernel) {
  Json e = entry("bf16", 128, false, kernel);
  e["match"]["seqlen_q"] = std::move(seqlen_q);
  e["match"]["seqlen_k"] = std::move(seqlen_k);
  return e;
}

const std::string kPrefix = "tuning table 't.json': ";

}  // namespace

TEST_CASE("a valid table parses and every key selects its kernel", "[cpu][tuning]") {
  const TuningTable t = parsed(valid_table());
  CHECK(t.source() == "t.json");
  CHECK(t.entries().size() == 12);
  REQUIRE(t.info().size() == 1);
  CHECK(t.info()[0] == std::make_pair(std::string("gpu"), std::string("test")));
  for (DType dtype : {DType::F16, DType::BF16})
    for (int head_dim : {64, 128, 256})
      for (bool causal : {false, true})
        CHECK(selected(t, dtype, head_dim, causal, 1, kMax) ==
              default_kernel(dtype_name(dtype), head_dim, causal));
}

TEST_CASE("malformed tables are rejected with the file, the entry and the reason",
          "[cpu][tuning]") {
  Json doc = valid_table();
  Json& e8 = doc["entries"][kBf16D128];

  SECTION("bad JSON") {
    const std::string m = error_of_text("{\"version\": 1,,}");
    CHECK_THAT(m, Catch::StartsWith(kPrefix + "not valid JSON: "));
    CHECK_THAT(m, Catch::Contains("line 1, column 15"));
  }
  SECTION("repeated key") {
    CHECK(error_of_text("{\"version\": 1, \"version\": 1}") ==
          kPrefix + "the top level has key \"version\" twice");
    e8["kernel"] = "KERNEL";
    std::string text = doc.dump();
    text.replace(
        text.find("\"KERNEL\""), 8,
        "\"fa3_fwd_bf16_d128_m128_n128_s2_w2\", \"kernel\": \"fa3_fwd_bf16_d128_m128_n64_s2_w2\"");
    CHECK(error_of_text(text) == kPrefix + "entries[8] has key \"kernel\" twice");
    e8["kernel"] = "fa3_fwd_bf16_d128_m128_n128_s2_w2";
    e8["match"]["seqlen_q"] = "RANGE";
    text = doc.dump();
    text.replace(text.find("\"RANGE\""), 7, "[1, 2147483647], \"seqlen_q\": [1, 5]");
    CHECK(error_of_text(text) == kPrefix + "entries[8].match has key \"seqlen_q\" twice");
  }
  SECTION("top level not an object") {
    CHECK(error_of_text("[1, 2]") == kPrefix + "the top level must be an object (got [1,2])");
  }
  SECTION("wrong version") {
    doc["version"] = 2;
    CHECK(error_of(doc) == kPrefix + "version must be 1 (got 2)");
  }
  SECTION("version as a float") {
    doc["version"] = 1.0;
    CHECK(error_of(doc) == kPrefix + "version must be 1 (got 1.0)");
  }
  SECTION("missing version") {
    doc.erase("version");
    CHECK(error_of(doc) == kPrefix + "version is required");
  }
  SECTION("wrong arch") {
    doc["arch"] = "sm_80";
    CHECK(error_of(doc) == kPrefix + "arch must be \"sm_90a\" (got \"sm_80\")");
  }
  SECTION("missing arch") {
    doc.erase("arch");
    CHECK(error_of(doc) == kPrefix + "arch is required");
  }
  SECTION("unknown top-level key") {
    doc["entires"] = Json::array();
    CHECK(error_of(doc) == kPrefix +
                               "the top level has unknown key \"entires\" (allowed: version, "
                               "arch, info, entries)");
  }
  SECTION("info value not a string") {
    doc["info"]["runs"] = 3;
    CHECK(error_of(doc) == kPrefix + "info.runs must be a string (got 3)");
  }
  SECTION("empty entries") {
    doc["entries"] = Json::array();
    CHECK(error_of(doc) == kPrefix + "entries must be a non-empty array (got [])");
  }
  SECTION("entry not an object") {
    e8 = "fa3_fwd_bf16_d128_m128_n128_s2_w2";
    CHECK(error_of(doc) ==
          kPrefix + "entries[8] must be an object (got \"fa3_fwd_bf16_d128_m128_n128_s2_w2\")");
  }
  SECTION("unknown entry key") {
    e8["kernels"] = "x";
    CHECK(error_of(doc) ==
          kPrefix + "entries[8] has unknown key \"kernels\" (allowed: match, kernel, config)");
  }
  SECTION("missing kernel") {
    e8.erase("kernel");
    CHECK(error_of(doc) == kPrefix + "entries[8].kernel is required");
  }
  SECTION("unknown match key") {
    e8["match"]["seqlen"] = Json::array({1, 2});
    CHECK(error_of(doc) == kPrefix +
                               "entries[8].match has unknown key \"seqlen\" (allowed: direction, "
                               "dtype, head_dim, causal, seqlen_q, seqlen_k)");
  }
  SECTION("missing match key") {
    e8["match"].erase("dtype");
    CHECK(error_of(doc) == kPrefix + "entries[8].match.dtype is required");
  }
  SECTION("unknown direction") {
    e8["match"]["direction"] = "backward";
    CHECK(error_of(doc) ==
          kPrefix + "entries[8].match.direction must be one of \"fwd\", \"bwd\" (got \"backward\")");
  }
  SECTION("a bwd entry naming a forward kernel") {
    e8["match"]["direction"] = "bwd";
    CHECK(error_of(doc) == kPrefix +
                               "entries[8].kernel \"fa3_fwd_bf16_d128_m128_n128_s2_w2\" does not "
                               "fit its match (kernel direction fwd, match direction bwd)");
  }
  SECTION("a fwd entry naming a backward kernel") {
    e8["kernel"] = "fa3_bwd_bf16_d128_m64_n128_s2_w2_dqh";
    CHECK(error_of(doc) == kPrefix +
                               "entries[8].kernel \"fa3_bwd_bf16_d128_m64_n128_s2_w2_dqh\" does "
                               "not fit its match (kernel direction bwd, match direction fwd)");
  }
  SECTION("unknown dtype") {
    e8["match"]["dtype"] = "e4m3";
    CHECK(error_of(doc) ==
          kPrefix + "entries[8].match.dtype must be one of \"f16\", \"bf16\" (got \"e4m3\")");
  }
  SECTION("unsupported head_dim") {
    e8["match"]["head_dim"] = 96;
    CHECK(error_of(doc) ==
          kPrefix + "entries[8].match.head_dim must be one of 64, 128, 256 (got 96)");
  }
  SECTION("head_dim as a string") {
    e8["match"]["head_dim"] = "128";
    CHECK(error_of(doc) ==
          kPrefix + "entries[8].match.head_dim must be one of 64, 128, 256 (got \"128\")");
  }
  SECTION("causal as a number") {
    e8["match"]["causal"] = 1;
    CHECK(error_of(doc) == kPrefix + "entries[8].match.causal must be true or false (got 1)");
  }
  SECTION("bad seqlen ranges") {
    const std::string rule = " must be [lo, hi] with integers 1 <= lo <= hi <= 2147483647 (got ";
    auto range_error = [&](const char* field, Json range) {
      Json d = doc;
      d["entries"][kBf16D128]["match"][field] = std::move(range);
      return error_of(d);
    };
    CHECK(range_error("seqlen_q", Json::array({1})) ==
          kPrefix + "entries[8].match.seqlen_q" + rule + "[1])");
    CHECK(range_error("seqlen_q", Json::array({5, 2})) ==
          kPrefix + "entries[8].match.seqlen_q" + rule + "[5,2])");
    CHECK(range_error("seqlen_q", Json::array({0, 10})) ==
          kPrefix + "entries[8].match.seqlen_q" + rule + "[0,10])");
    CHECK(range_error("seqlen_q", Json::array({1, "10"})) ==
          kPrefix + "entries[8].match.seqlen_q" + rule + "[1,\"10\"])");
    CHECK(range_error("seqlen_q", Json{{"lo", 1}}) ==
          kPrefix + "entries[8].match.seqlen_q" + rule + "{\"lo\":1})");
    CHECK(range_error("seqlen_k", Json::array({int64_t{2147483648}, int64_t{2147483648}})) ==
          kPrefix + "entries[8].match.seqlen_k" + rule + "[2147483648,2147483648])");
    CHECK(range_error("seqlen_k", Json::array({1, uint64_t{18446744073709551615u}})) ==
          kPrefix + "entries[8].match.seqlen_k" + rule + "[1,18446744073709551615])");
  }
  SECTION("kernel not compiled in") {
    e8["kernel"] = "fa3_fwd_bf16_d128_m128_n176_s2_w2";
    CHECK(error_of(doc) == kPrefix +
                               "entries[8].kernel \"fa3_fwd_bf16_d128_m128_n176_s2_w2\" is not a "
                               "kernel compiled into the library (fa3-table kernels lists them)");
  }
  SECTION("kernel not a string") {
    e8["kernel"] = 7;
    CHECK(error_of(doc) == kPrefix + "entries[8].kernel must be a string (got 7)");
  }
  SECTION("kernel of another dtype") {
    e8["kernel"] = "fa3_fwd_f16_d128_m128_n128_s2_w2";
    CHECK(error_of(doc) == kPrefix +
                               "entries[8].kernel \"fa3_fwd_f16_d128_m128_n128_s2_w2\" does not "
                               "fit its match (kernel dtype f16, match dtype bf16)");
  }
  SECTION("kernel of another head_dim") {
    e8["kernel"] = "fa3_fwd_bf16_d64_m128_n128_s2_w2";
    CHECK(error_of(doc) == kPrefix +
                               "entries[8].kernel \"fa3_fwd_bf16_d64_m128_n128_s2_w2\" does not "
                               "fit its match (kernel head_dim 64, match head_dim 128)");
  }
  SECTION("causal kernel for a non-causal match") {
    e8["kernel"] = "fa3_fwd_bf16_d128_m128_n128_s2_w2_causal";
    CHECK(error_of(doc) == kPrefix +
                               "entries[8].kernel \"fa3_fwd_bf16_d128_m128_n128_s2_w2_causal\" "
                               "does not fit its match (kernel causal true, match causal false)");
  }
  SECTION("a config that agrees with the kernel is accepted") {
    e8["config"] = fwd_config_json(parse_fwd_kernel_name(e8["kernel"]).value());
    CHECK(parsed(doc).entries().size() == 12);
  }
  SECTION("config disagreeing with the kernel") {
    e8["config"] = {{"block_m", 128}, {"block_n", 64}};
    CHECK(error_of(doc) ==
          kPrefix +
              "entries[8].config.block_n is 64, but kernel "
              "\"fa3_fwd_bf16_d128_m128_n128_s2_w2\" is compiled with block_n 128");
  }
  SECTION("config causal disagreeing with the kernel") {
    e8["config"] = {{"causal", true}};
    CHECK(error_of(doc) ==
          kPrefix +
              "entries[8].config.causal is true, but kernel "
              "\"fa3_fwd_bf16_d128_m128_n128_s2_w2\" is compiled with causal false");
  }
  SECTION("config checked even when it comes before the kernel") {
    Json reordered = {
        {"config", {{"stages", 3}}}, {"match", e8["match"]}, {"kernel", e8["kernel"]}};
    e8 = reordered;
    CHECK(error_of(doc) == kPrefix +
                               "entries[8].config.stages is 3, but kernel "
                               "\"fa3_fwd_bf16_d128_m128_n128_s2_w2\" is compiled with stages 2");
  }
  SECTION("unknown config key") {
    e8["config"] = {{"clusters", 2}};
    CHECK(error_of(doc) == kPrefix +
                               "entries[8].config has unknown key \"clusters\" (allowed: block_m, "
                               "block_n, stages, consumer_warpgroups, producer_regs, "
                               "consumer_regs, loop, row_max, row_sum_mma, exp_after_pv_wait, ascending, "
                               "half_blocks, pingpong, tiles, dynamic_schedule, q_in_registers, "
                               "evict_first_q_o, evict_last_kv, cluster_m, producer, causal)");
  }
  SECTION("config enum value disagreeing with the kernel") {
    e8["config"] = {{"loop", "pipelined"}};
    CHECK(error_of(doc) == kPrefix +
                               "entries[8].config.loop is \"pipelined\", but kernel "
                               "\"fa3_fwd_bf16_d128_m128_n128_s2_w2\" is compiled with loop "
                               "\"sequential\"");
  }
  SECTION("config value of the wrong type") {
    e8["config"] = {{"block_n", "128"}};
    CHECK(error_of(doc) == kPrefix + "entries[8].config.block_n must be an integer (got \"128\")");
  }
  SECTION("the first error in document order is reported") {
    doc["entries"][3]["match"]["head_dim"] = 32;
    e8["match"]["dtype"] = "f32";
    CHECK(error_of(doc) ==
          kPrefix + "entries[3].match.head_dim must be one of 64, 128, 256 (got 32)");
  }
}

TEST_CASE("coverage: overlaps and gaps are errors with a witness point", "[cpu][tuning]") {
  SECTION("overlap in seqlen_q") {
    const Json doc = with_bf16_d128_split(
        {bf16_d128({1, 4096}, {1, kMax}, kSmallTileKernel),
         bf16_d128({4000, kMax}, {1, kMax}, "fa3_fwd_bf16_d128_m128_n128_s2_w2")});
    CHECK(error_of(doc) == kPrefix +
                               "entries[8] and entries[9] both cover fwd bf16 head_dim 128 "
                               "non-causal at seqlen_q=4000, seqlen_k=1");
  }
  SECTION("overlap of a later entry with an earlier one, in two dimensions") {
    Json doc = valid_table();
    doc["entries"].push_back(entry("f16", 256, true, "fa3_fwd_f16_d256_m128_n64_s2_w2_causal"));
    doc["entries"].back()["match"]["seqlen_q"] = {300, 400};
    doc["entries"].back()["match"]["seqlen_k"] = {7, 8};
    CHECK(error_of(doc) == kPrefix +
                               "entries[5] and entries[12] both cover fwd f16 head_dim 256 "
                               "causal at seqlen_q=300, seqlen_k=7");
  }
  SECTION("gap between two seqlen_q ranges") {
    const Json doc = with_bf16_d128_split(
        {bf16_d128({1, 4096}, {1, kMax}, kSmallTileKernel),
         bf16_d128({4098, kMax}, {1, kMax}, "fa3_fwd_bf16_d128_m128_n128_s2_w2")});
    CHECK(error_of(doc) ==
          kPrefix +
              "no entry covers fwd bf16 head_dim 128 non-causal at seqlen_q=4097, seqlen_k=1");
  }
  SECTION("gap in a corner of the square") {
    const Json doc = with_bf16_d128_split(
        {bf16_d128({1, kMax}, {1, 100}, kSmallTileKernel),
         bf16_d128({1, 50}, {101, kMax}, "fa3_fwd_bf16_d128_m128_n128_s2_w2")});
    CHECK(error_of(doc) == kPrefix +
                               "no entry covers fwd bf16 head_dim 128 non-causal at seqlen_q=51, "
                               "seqlen_k=101");
  }
  SECTION("gap at the top of the range") {
    const Json doc = with_bf16_d128_split({bf16_d128({1, kMax}, {1, kMax - 1}, kSmallTileKernel)});
    CHECK(error_of(doc) == kPrefix +
                               "no entry covers fwd bf16 head_dim 128 non-causal at seqlen_q=1, "
                               "seqlen_k=2147483647");
  }
  SECTION("a key without entries") {
    Json doc = valid_table();
    doc["entries"].erase(doc["entries"].begin() + 3);  // f16 d128 causal
    CHECK(error_of(doc) ==
          kPrefix + "no entry covers fwd f16 head_dim 128 causal at seqlen_q=1, seqlen_k=1");
  }
}

TEST_CASE("files: read errors and a table on disk", "[cpu][tuning]") {
  TuningTable t;
  SECTION("a file that does not exist") {
    const Error e = TuningTable::load_file("/nonexistent/fa3.json", test_kernels(), &t);
    CHECK(e.status == FA3_ERR_TUNING_TABLE);
    CHECK(e.message ==
          "tuning table '/nonexistent/fa3.json' cannot be read: No such file or directory");
  }
  SECTION("a directory") {
    const std::string dir = std::filesystem::temp_directory_path().string();
    const Error e = TuningTable::load_file(dir, test_kernels(), &t);
    CHECK(e.message == "tuning table '" + dir + "' cannot be read: Is a directory");
  }
  SECTION("a valid file, and an invalid one naming the file") {
    const std::string path = (std::filesystem::temp_directory_path() /
                              ("fa3_test_tuning_table_" + std::to_string(getpid()) + ".json"))
                                 .string();
    std::ofstream(path) << valid_table().dump(2);
    REQUIRE_FALSE(TuningTable::load_file(path, test_kernels(), &t).failed());
    CHECK(t.source() == path);
    CHECK(t.entries().size() == 12);

    std::ofstream(path) << "{}";
    CHECK(TuningTable::load_file(path, test_kernels(), &t).message ==
          "tuning table '" + path + "': version is required");
    std::remove(path.c_str());
  }
}

TEST_CASE("select picks the entry whose ranges hold the problem", "[cpu][tuning]") {
  const std::string big = "fa3_fwd_bf16_d128_m128_n128_s2_w2";
  TuningTable t =
      parsed(with_bf16_d128_split({bf16_d128({1, 1024}, {1, 4096}, kSmallTileKernel),
                                   bf16_d128({1, 1024}, {4097, kMax}, kThreeWarpgroupKernel),
                                   bf16_d128({1025, kMax}, {1, kMax}, big)}));
  const DType bf16 = DType::BF16;

  SECTION("seqlen_q boundaries: lo, hi, hi + 1, the maximum") {
    CHECK(selected(t, bf16, 128, false, 1, 1) == kSmallTileKernel);
    CHECK(selected(t, bf16, 128, false, 1024, 1) == kSmallTileKernel);
    CHECK(selected(t, bf16, 128, false, 1025, 1) == big);
    CHECK(selected(t, bf16, 128, false, kMax, kMax) == big);
  }
  SECTION("seqlen_k boundaries") {
    CHECK(selected(t, bf16, 128, false, 512, 4096) == kSmallTileKernel);
    CHECK(selected(t, bf16, 128, false, 512, 4097) == kThreeWarpgroupKernel);
    CHECK(selected(t, bf16, 128, false, 1024, kMax) == kThreeWarpgroupKernel);
  }
  SECTION("other keys keep their own kernels") {
    CHECK(selected(t, bf16, 128, true, 1, 1) == "fa3_fwd_bf16_d128_m128_n128_s2_w2_causal");
    CHECK(selected(t, DType::F16, 128, false, 1, 1) == "fa3_fwd_f16_d128_m128_n128_s2_w2");
    CHECK(selected(t, bf16, 64, false, 1, 1) == "fa3_fwd_bf16_d64_m128_n128_s2_w2");
  }
  SECTION("problems outside the table select nothing") {
    CHECK(selected(t, bf16, 128, false, 0, 1) == "(none)");
    CHECK(selected(t, bf16, 128, false, 1, kMax + 1) == "(none)");
    CHECK(selected(t, bf16, 96, false, 1, 1) == "(none)");
  }
  SECTION("the selected kernel is the table's own copy, with its config") {
    const KernelInfo* k = t.select({Direction::Forward, bf16, 128, false, 2048, 2048});
    REQUIRE(k != nullptr);
    CHECK(k->fwd.block_m == 128);
    CHECK(k->fwd.block_n == 128);
    const KernelInfo* k3 = t.select({Direction::Forward, bf16, 128, false, 1, 5000});
    REQUIRE(k3 != nullptr);
    CHECK(k3->fwd.consumer_warpgroups == 3);
    // test_kernels() built a temporary list for the parse; the table must not point into it.
    const TuningTable copy = t;
    t = TuningTable();
    CHECK(selected(copy, bf16, 128, false, 1, 5000) == kThreeWarpgroupKernel);
    CHECK(selected(t, bf16, 128, false, 1, 5000) == "(none)");
  }
  SECTION("a failed parse leaves the table unchanged") {
    Json bad = valid_table();
    bad["version"] = 3;
    CHECK(parse_text(bad.dump(), &t).failed());
    CHECK(selected(t, bf16, 128, false, 1, 1) == kSmallTileKernel);
  }
}

// Every kernel src/kernels/kernels.mk builds (production and lab, forward and backward), independent of which
// cubins this build compiled. Tests run from the repository root.
std::vector<KernelInfo> kernels_of_kernels_mk() {
  std::ifstream mk("src/kernels/kernels.mk");
  std::vector<KernelInfo> list;
  std::string word;
  // The production names in full, the lab's tiles for both dtypes.
  while (mk >> word)
    if ((word.rfind("fa3_fwd_", 0) == 0 || word.rfind("fa3_bwd_", 0) == 0) &&
        word.find('$') == std::string::npos)
      list.push_back(fake_kernel(word));
    else if (word.rfind("d", 0) == 0 && word.find("_m") != std::string::npos)
      for (const char* dtype : {"f16", "bf16"})
        list.push_back(fake_kernel(std::string("fa3_fwd_") + dtype + "_" + word));
  return list;
}

TEST_CASE("the built-in table is a measured one, valid against the kernels of kernels.mk",
          "[cpu][tuning]") {
  const std::vector<KernelInfo> kernels = kernels_of_kernels_mk();
  REQUIRE(kernels.size() >= 24);
  TuningTable t;
  const Error e = TuningTable::parse(builtin_tuning_table_text(), "built-in", kernels, &t,
                                     BackwardCoverage::Required);
  INFO(e.message);
  REQUIRE_FALSE(e.failed());
  // Every supported problem of both directions selects a kernel of its own direction, dtype,
  // head_dim and causality.
  for (DType dtype : {DType::F16, DType::BF16})
    for (int head_dim : {64, 128, 256})
      for (bool causal : {false, true})
        for (int64_t seqlen : {int64_t{1}, int64_t{700}, int64_t{4096}, int64_t{20000}, kMax}) {
          const KernelInfo* k = t.select({Direction::Forward, dtype, head_dim, causal, seqlen, seqlen});
          REQUIRE(k != nullptr);
          CHECK(k->direction == Direction::Forward);
          CHECK(k->fwd.dtype == dtype);
          CHECK(k->fwd.head_dim == head_dim);
          CHECK(k->fwd.causal == causal);
          const KernelInfo* b = t.select({Direction::Backward, dtype, head_dim, causal, seqlen, seqlen});
          REQUIRE(b != nullptr);
          CHECK(b->direction == Direction::Backward);
          CHECK(b->bwd.dtype == dtype);
          CHECK(b->bwd.head_dim == head_dim);
          CHECK(b->bwd.causal == causal);
        }
  std::map<std::string, std::string> info(t.info().begin(), t.info().end());
  CHECK(info["generated_by"].rfind("fa3-tune", 0) == 0);
  CHECK(info["gpu"].find("H100") + info["gpu"].find("H200") != 2 * std::string::npos);
  CHECK(info["date"].size() == 10);  // YYYY-MM-DD
}

TEST_CASE("fwd_config_json writes every config field", "[cpu][tuning]") {
  const FwdConfig c = parse_fwd_kernel_name("fa3_fwd_f16_d64_m192_n96_s3_w3_ov_pp_causal").value();
  CHECK(fwd_config_json(c).dump() ==
        "{\"block_m\":192,\"block_n\":96,\"stages\":3,\"consumer_warpgroups\":3,"
        "\"producer_regs\":32,\"consumer_regs\":160,\"loop\":\"pipelined\","
        "\"row_max\":\"exact\",\"row_sum_mma\":false,\"exp_after_pv_wait\":false,\"ascending\":false,"
        "\"half_blocks\":false,\"pingpong\":true,\"tiles\":\"per_cta\","
        "\"dynamic_schedule\":false,\"q_in_registers\":false,\"evict_first_q_o\":false,"
        "\"evict_last_kv\":false,\"cluster_m\":1,\"producer\":\"warpgroup\",\"causal\":true}");
}

TEST_CASE("an entry's _ls kernel needs a twin for the calls that ask for the LSE",
          "[cpu][tuning]") {
  const std::string ls = "fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_cr_im_ls_pp_ps_xt_qw_dy_qr";
  Json doc = valid_table();
  doc["entries"][kBf16D128]["kernel"] = ls;
  std::vector<KernelInfo> kernels = test_kernels();
  kernels.push_back(fake_kernel(ls));
  TuningTable t;
  Error e = TuningTable::parse(doc.dump(), "t.json", kernels, &t);
  REQUIRE(e.status == FA3_ERR_TUNING_TABLE);
  CHECK(e.message == kPrefix + "entries[8].kernel \"" + ls +
                         "\" sums the softmax rows by the PV GEMM (_ls), so the calls that ask "
                         "for the LSE run a twin without _ls, and none is compiled into the "
                         "library (fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_cr_im_pp_ps_xt_qw_dy_qr, "
                         "fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_cr_pp_ps_xt_qw_dy_qr, "
                         "fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_pp_ps_xt_qw_dy_qr)");
  // Any of the twins will do; the first one compiled runs.
  kernels.push_back(fake_kernel("fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_pp_ps_xt_qw_dy_qr"));
  e = TuningTable::parse(doc.dump(), "t.json", kernels, &t);
  INFO(e.message);
  CHECK_FALSE(e.failed());
  const KernelInfo* pick = t.select({Direction::Forward, DType::BF16, 128, false, 4096, 4096});
  REQUIRE(pick);
  CHECK(pick->name == ls);
  CHECK(kernel_for_call(*pick, false, kernels)->name == ls);
  CHECK(kernel_for_call(*pick, true, kernels)->name ==
        "fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_pp_ps_xt_qw_dy_qr");
}

// ---- backward entries -------------------------------------------------------------------

TEST_CASE("bwd entries: parsed, selected by direction, forward keys unaffected",
          "[cpu][tuning]") {
  const TuningTable t = parsed(valid_table_with_backward());
  CHECK(t.entries().size() == 24);
  for (DType dtype : {DType::F16, DType::BF16})
    for (int head_dim : {64, 128, 256})
      for (bool causal : {false, true}) {
        CHECK(selected(t, dtype, head_dim, causal, 1, kMax, Direction::Backward) ==
              backward_kernel(dtype_name(dtype), head_dim, causal));
        CHECK(selected(t, dtype, head_dim, causal, 1, kMax) ==
              default_kernel(dtype_name(dtype), head_dim, causal));
      }
  const KernelInfo* k = t.select({Direction::Backward, DType::BF16, 256, true, 4096, 4096});
  REQUIRE(k != nullptr);
  CHECK(k->direction == Direction::Backward);
  CHECK(k->bwd.kv_split == KvSplit::Transposed);
  CHECK(k->bwd.causal);
}

TEST_CASE("bwd entries: a bwd key split between two kernels", "[cpu][tuning]") {
  Json doc = valid_table_with_backward();
  Json& bf16_d64 = doc["entries"][12 + 6];  // bwd bf16 d64 non-causal
  REQUIRE(bf16_d64["kernel"] == backward_kernel("bf16", 64, false));
  bf16_d64["match"]["seqlen_q"] = {1, 1023};
  Json upper = backward_entry("bf16", 64, false, kBackwardLabKernel);
  upper["match"]["seqlen_q"] = {1024, kMax};
  doc["entries"].push_back(upper);
  const TuningTable t = parsed(doc);
  CHECK(selected(t, DType::BF16, 64, false, 1023, 1023, Direction::Backward) ==
        backward_kernel("bf16", 64, false));
  CHECK(selected(t, DType::BF16, 64, false, 1024, 1, Direction::Backward) == kBackwardLabKernel);

  SECTION("an overlap of two bwd entries names both") {
    doc["entries"].back()["match"]["seqlen_q"] = {1000, kMax};
    CHECK(error_of(doc) == kPrefix +
                               "entries[18] and entries[24] both cover bwd bf16 head_dim 64 "
                               "non-causal at seqlen_q=1000, seqlen_k=1");
  }
  SECTION("a bwd key with entries must be covered completely") {
    doc["entries"].erase(doc["entries"].end() - 1);
    CHECK(error_of(doc) ==
          kPrefix + "no entry covers bwd bf16 head_dim 64 non-causal at seqlen_q=1024, seqlen_k=1");
  }
}

TEST_CASE("bwd coverage: optional for a user's table, required for the built-in one",
          "[cpu][tuning]") {
  // A forward-only table (every table before bwd entries existed) still loads: its backward
  // calls run the first compiled kernel that fits.
  const TuningTable forward_only = parsed(valid_table());
  CHECK(selected(forward_only, DType::BF16, 128, false, 1, 1, Direction::Backward) == "(none)");

  Json one_key = valid_table();
  one_key["entries"].push_back(backward_entry("f16", 128, true, backward_kernel("f16", 128, true)));
  const TuningTable partial = parsed(one_key);
  CHECK(selected(partial, DType::F16, 128, true, 5, 5, Direction::Backward) ==
        backward_kernel("f16", 128, true));
  CHECK(selected(partial, DType::F16, 128, false, 5, 5, Direction::Backward) == "(none)");

  // Required (the built-in table): every one of the 12 bwd keys, reported in key order.
  TuningTable t;
  Error e = TuningTable::parse(valid_table().dump(), "t.json", test_kernels(), &t,
                               BackwardCoverage::Required);
  CHECK(e.message ==
        kPrefix + "no entry covers bwd f16 head_dim 64 non-causal at seqlen_q=1, seqlen_k=1");
  e = TuningTable::parse(one_key.dump(), "t.json", test_kernels(), &t, BackwardCoverage::Required);
  CHECK(e.message ==
        kPrefix + "no entry covers bwd f16 head_dim 64 non-causal at seqlen_q=1, seqlen_k=1");
  Json all_but_one = valid_table_with_backward();
  all_but_one["entries"].erase(all_but_one["entries"].begin() + 12 + 11);  // bwd bf16 d256 causal
  e = TuningTable::parse(all_but_one.dump(), "t.json", test_kernels(), &t,
                         BackwardCoverage::Required);
  CHECK(e.message ==
        kPrefix + "no entry covers bwd bf16 head_dim 256 causal at seqlen_q=1, seqlen_k=1");
  e = TuningTable::parse(valid_table_with_backward().dump(), "t.json", test_kernels(), &t,
                         BackwardCoverage::Required);
  INFO(e.message);
  CHECK_FALSE(e.failed());
  // Forward keys stay required either way.
  Json no_forward = valid_table_with_backward();
  no_forward["entries"].erase(no_forward["entries"].begin());
  CHECK(error_of(no_forward) ==
        kPrefix + "no entry covers fwd f16 head_dim 64 non-causal at seqlen_q=1, seqlen_k=1");
}

TEST_CASE("bwd entries: kernel fit and config", "[cpu][tuning]") {
  Json doc = valid_table_with_backward();
  Json& e20 = doc["entries"][12 + kBf16D128];  // bwd bf16 d128 non-causal
  REQUIRE(e20["kernel"] == "fa3_bwd_bf16_d128_m64_n128_s2_w2_dqh");

  SECTION("a backward kernel of another key") {
    e20["kernel"] = "fa3_bwd_bf16_d128_m64_n128_s2_w2_dqh_p32_causal";
    CHECK(error_of(doc) == kPrefix +
                               "entries[20].kernel \"fa3_bwd_bf16_d128_m64_n128_s2_w2_dqh_p32_causal\" "
                               "does not fit its match (kernel causal true, match causal false)");
    e20["kernel"] = "fa3_bwd_f16_d128_m64_n128_s2_w2_dqh";
    CHECK(error_of(doc) == kPrefix +
                               "entries[20].kernel \"fa3_bwd_f16_d128_m64_n128_s2_w2_dqh\" does "
                               "not fit its match (kernel dtype f16, match dtype bf16)");
  }
  SECTION("a backward kernel not compiled in") {
    e20["kernel"] = "fa3_bwd_bf16_d128_m128_n128_s2_w2_dqh";
    CHECK(error_of(doc) == kPrefix +
                               "entries[20].kernel \"fa3_bwd_bf16_d128_m128_n128_s2_w2_dqh\" is "
                               "not a kernel compiled into the library (fa3-table kernels lists "
                               "them)");
  }
  SECTION("the kernel's own config is accepted") {
    e20["config"] = bwd_config_json(parse_bwd_kernel_name(e20["kernel"]).value());
    CHECK(parsed(doc).entries().size() == 24);
  }
  SECTION("a config disagreeing with the kernel") {
    e20["config"] = {{"block_m", 64}, {"dq_split", "queries"}};
    CHECK(error_of(doc) == kPrefix +
                               "entries[20].config.dq_split is \"queries\", but kernel "
                               "\"fa3_bwd_bf16_d128_m64_n128_s2_w2_dqh\" is compiled with "
                               "dq_split \"head_dim\"");
  }
  SECTION("a forward config key in a bwd entry") {
    e20["config"] = {{"loop", "pipelined"}};
    CHECK(error_of(doc) == kPrefix +
                               "entries[20].config has unknown key \"loop\" (allowed: block_m, "
                               "block_n, stages, consumer_warpgroups, producer_regs, "
                               "consumer_regs, kv_split, dq_split, rotated_walk, first_store, persistent, "
                               "causal)");
  }
  SECTION("a backward config key in a fwd entry") {
    doc["entries"][kBf16D128]["config"] = {{"dq_split", "keys"}};
    CHECK_THAT(error_of(doc),
               Catch::StartsWith(kPrefix + "entries[8].config has unknown key \"dq_split\""));
  }
  SECTION("a config value of the wrong type") {
    e20["config"] = {{"kv_split", false}};
    CHECK(error_of(doc) == kPrefix + "entries[20].config.kv_split must be a string (got false)");
  }
}

TEST_CASE("bwd_config_json writes every config field", "[cpu][tuning]") {
  const BwdConfig c = parse_bwd_kernel_name("fa3_bwd_f16_d256_m64_n64_s1_w2_kvh_dqh_causal").value();
  CHECK(bwd_config_json(c).dump() ==
        "{\"block_m\":64,\"block_n\":64,\"stages\":1,\"consumer_warpgroups\":2,"
        "\"producer_regs\":24,\"consumer_regs\":240,\"kv_split\":\"head_dim\","
        "\"dq_split\":\"head_dim\",\"rotated_walk\":false,\"first_store\":false,"
        "\"persistent\":false,\"causal\":true}");
  const BwdConfig d = parse_bwd_kernel_name("fa3_bwd_bf16_d64_m128_n128_s2_w2_dqq_rw_fs").value();
  CHECK(bwd_config_json(d).dump() ==
        "{\"block_m\":128,\"block_n\":128,\"stages\":2,\"consumer_warpgroups\":2,"
        "\"producer_regs\":24,\"consumer_regs\":240,\"kv_split\":\"keys\","
        "\"dq_split\":\"queries\",\"rotated_walk\":true,\"first_store\":true,"
        "\"persistent\":false,\"causal\":false}");
  CHECK(bwd_config_json(parse_bwd_kernel_name(kBackwardLabKernel).value())["dq_split"] == "keys");
  CHECK(bwd_config_json(parse_bwd_kernel_name("fa3_bwd_bf16_d256_m64_n80_s1_w2_kvt_dqh").value())["kv_split"] ==
        "transposed");
}
