// fa3-tune's pure parts: the seqlen buckets, the keys and problems measured, winner
// selection (never a kernel that failed its check), merging neighbouring buckets, the table
// it writes (which must validate against the kernel list), filters, the report and the
// command line. No GPU needed: measurements are synthetic, kernel lists are built from names.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <vector>

#include "../tools/fa3_tune/tune_options.h"
#include "../tools/fa3_tune/tune_plan.h"
#include "../tools/fa3_tune/tune_report.h"
#include "../tools/fa3_tune/tune_table.h"
#include "runtime/kernel_registry.h"
#include "runtime/tuning_table.h"

using namespace fa3tune;
using Json = nlohmann::ordered_json;

namespace {

constexpr int64_t kMax = 2147483647;

// Kernels like src/kernels/kernels.mk's, built from their names (as test_tuning_table.cpp
// does), so these tests do not depend on what the library at hand compiled.
const char* const kTiles[] = {
    "d64_m128_n128_s2_w2",         "d64_m128_n128_s2_w2_ov_pp",  "d64_m192_n128_s2_w3_ov_pp",
    "d128_m128_n128_s2_w2",        "d128_m128_n128_s2_w2_ov",    "d128_m128_n128_s2_w2_ov_pp",
    "d128_m128_n176_s2_w2_ov_pp",  "d256_m128_n64_s2_w2",        "d256_m128_n64_s2_w2_ov_pp",
    "d256_m128_n80_s2_w2_ov_pp",
};

// Backward tiles: one per head dim as in production, and the lab's second d64 kernel.
const char* const kBackwardTiles[] = {"d64_m128_n128_s2_w2_dqq", "d64_m64_n128_s2_w2",
                                      "d128_m64_n128_s2_w2_dqh", "d256_m64_n80_s1_w2_kvt_dqh",
                                      "d256_m64_n64_s1_w2_kvh_dqh"};

fa3::KernelInfo fake_kernel(const std::string& name) {
  fa3::KernelInfo k;
  k.name = name;
  if (name.rfind("fa3_bwd_", 0) == 0) {
    k.direction = fa3::Direction::Backward;
    k.bwd = fa3::parse_bwd_kernel_name(name).value();  // throws on a typo in this file
  } else {
    k.fwd = fa3::parse_fwd_kernel_name(name).value();
  }
  return k;
}

// Forward kernels, then backward ones (what the tuning table is validated against).
std::vector<fa3::KernelInfo> fake_kernels() {
  std::vector<fa3::KernelInfo> list;
  for (const char* dtype : {"f16", "bf16"})
    for (const char* tile : kTiles)
      for (const char* causal : {"", "_causal"})
        list.push_back(fake_kernel(std::string("fa3_fwd_") + dtype + "_" + tile + causal));
  for (const char* dtype : {"f16", "bf16"})
    for (const char* tile : kBackwardTiles)
      for (const char* causal : {"", "_causal"})
        list.push_back(fake_kernel(std::string("fa3_bwd_") + dtype + "_" + tile + causal));
  return list;
}

// The production backward kernel of a key (kBackwardTiles without the lab's).
std::string backward_kernel(const fa3::MatchKey& key) {
  const char* tile = key.head_dim == 64    ? "d64_m128_n128_s2_w2_dqq"
                     : key.head_dim == 128 ? "d128_m64_n128_s2_w2_dqh"
                                           : "d256_m64_n80_s1_w2_kvt_dqh";
  return std::string("fa3_bwd_") + fa3::dtype_name(key.dtype) + "_" + tile +
         (key.causal ? "_causal" : "");
}

std::string plain_kernel(const fa3::MatchKey& key) {
  return std::string("fa3_fwd_") + fa3::dtype_name(key.dtype) + "_d" + std::to_string(key.head_dim) +
         (key.head_dim == 256 ? "_m128_n64_s2_w2" : "_m128_n128_s2_w2") + (key.causal ? "_causal" : "");
}

const fa3::MatchKey kBf16D128Causal{fa3::Direction::Forward, fa3::DType::BF16, 128, true};
const fa3::MatchKey kF16D64{fa3::Direction::Forward, fa3::DType::F16, 64, false};
const fa3::MatchKey kBwdBf16D64{fa3::Direction::Backward, fa3::DType::BF16, 64, false};

fa3::TuningTable parse_current(const Json& doc);

// A "built-in" table: one plain kernel per key, except f16 d64 non-causal, split at
// seqlen_q 4096 and at seqlen_k 100 (so kept entries must come through as they are).
fa3::TuningTable current_table() {
  Json entries = Json::array();
  for (const fa3::MatchKey& key : all_keys()) {
    Json match = {{"direction", "fwd"}, {"dtype", fa3::dtype_name(key.dtype)},
                  {"head_dim", key.head_dim}, {"causal", key.causal}};
    if (same_key(key, kF16D64)) {
      struct Split {
        int64_t q_lo, q_hi, k_lo, k_hi;
        const char* kernel;
      };
      for (const Split& s : {Split{1, 4095, 1, kMax, "fa3_fwd_f16_d64_m128_n128_s2_w2"},
                             Split{4096, kMax, 1, 99, "fa3_fwd_f16_d64_m128_n128_s2_w2"},
                             Split{4096, kMax, 100, kMax, "fa3_fwd_f16_d64_m192_n128_s2_w3_ov_pp"}}) {
        Json m = match;
        m["seqlen_q"] = Json::array({s.q_lo, s.q_hi});
        m["seqlen_k"] = Json::array({s.k_lo, s.k_hi});
        entries.push_back(Json{{"match", m}, {"kernel", s.kernel}});
      }
      continue;
    }
    entries.push_back({{"match", match}, {"kernel", plain_kernel(key)}});
  }
  const Json doc = {{"version", 1}, {"arch", "sm_90a"}, {"entries", entries}};
  return parse_current(doc);
}

// current_table() with one bwd entry per key (the production kernel) and info values of
// both directions.
fa3::TuningTable current_table_with_backward() {
  Json doc = Json::parse(table_text(tuning_table_json({}, current_table(), fake_kernels(),
                                                      TableInfo{"H100", "2026-11-01", "fa3-tune",
                                                                "fwd notes"})));
  for (const fa3::MatchKey& key : all_keys(fa3::Direction::Backward))
    doc["entries"].push_back({{"match", {{"direction", "bwd"}, {"dtype", fa3::dtype_name(key.dtype)},
                                         {"head_dim", key.head_dim}, {"causal", key.causal}}},
                              {"kernel", backward_kernel(key)}});
  doc["info"]["bwd_notes"] = "bwd notes";
  return parse_current(doc);
}

fa3::TuningTable parse_current(const Json& doc) {
  fa3::TuningTable t;
  const fa3::Error e = fa3::TuningTable::parse(doc.dump(), "current.json", fake_kernels(), &t);
  INFO(e.message);
  REQUIRE_FALSE(e.failed());
  return t;
}

fa3::TuningTable parse_ok(const std::string& text) {
  fa3::TuningTable t;
  const fa3::Error e = fa3::TuningTable::parse(text, "tuned.json", fake_kernels(), &t);
  INFO(e.message);
  REQUIRE_FALSE(e.failed());
  return t;
}

std::string selected(const fa3::TuningTable& t, const fa3::MatchKey& key, int64_t q, int64_t k) {
  const fa3::KernelInfo* kernel =
      t.select({key.direction, key.dtype, key.head_dim, key.causal, q, k});
  return kernel ? kernel->name : "(none)";
}

KernelMeasurement timed(const std::string& kernel, double median_ms,
                        KernelMeasurement::Check check = KernelMeasurement::Check::Passed) {
  KernelMeasurement m;
  m.kernel = kernel;
  fa3bench::TimingStats t;
  t.median_ms = t.p10_ms = t.p90_ms = median_ms;
  t.samples = 10;
  m.timing = t;
  m.tflops = 100.0 / median_ms;
  m.check = check;
  fa3bench::CheckResult c;
  c.o_error = check == KernelMeasurement::Check::Failed ? 0.5 : 1e-3;
  c.plain_o_error = 2e-3;
  c.has_lse = true;
  c.pass = check == KernelMeasurement::Check::Passed;
  m.check_result = c;
  return m;
}

// Buckets of one key with the given winners (one per bucket of the normal run).
std::vector<BucketResult> buckets_won_by(const fa3::MatchKey& key,
                                         const std::vector<std::string>& winners) {
  const std::vector<SeqlenBucket> buckets = seqlen_buckets(measured_seqlens(false));
  REQUIRE(winners.size() == buckets.size());
  std::vector<BucketResult> results;
  for (size_t i = 0; i < buckets.size(); ++i) {
    BucketResult r;
    r.key = key;
    r.bucket = buckets[i];
    r.problem = tune_problem(key, buckets[i].measured_at);
    r.kernels = {timed(winners[i], 1.0)};
    r.winner = pick_winner(r.kernels);
    results.push_back(r);
  }
  return results;
}

TableInfo test_info() {
  return {"NVIDIA H100 80GB HBM3", "2026-11-22", "fa3-tune --hdim 128", "notes"};
}

TuneParseResult parse(std::vector<std::string> args) {
  args.insert(args.begin(), "fa3-tune");
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  return parse_tune_options(static_cast<int>(argv.size()), argv.data());
}

void expect_argument_error(const std::vector<std::string>& args, const std::string& names) {
  const TuneParseResult r = parse(args);
  INFO("message: " << r.message);
  CHECK(r.status == 2);
  CHECK(r.exit_now);
  CHECK(r.message.rfind("fa3-tune: ", 0) == 0);
  CHECK(r.message.find(names) != std::string::npos);
  CHECK(r.message.find('\n') == std::string::npos);
  CHECK(r.message.back() == '.');
}

}  // namespace

// ---- buckets, keys, problems ----------------------------------------------------------------

TEST_CASE("tune: seqlen buckets of the normal and the quick run", "[cpu][tune]") {
  auto as_tuples = [](const std::vector<SeqlenBucket>& buckets) {
    std::vector<std::tuple<int64_t, int64_t, int64_t>> t;
    for (const SeqlenBucket& b : buckets) t.emplace_back(b.lo, b.hi, b.measured_at);
    return t;
  };
  using T = std::tuple<int64_t, int64_t, int64_t>;
  CHECK(measured_seqlens(false) == std::vector<int64_t>{512, 1024, 2048, 4096, 8192, 16384});
  CHECK(measured_seqlens(true) == std::vector<int64_t>{1024, 4096, 16384});
  CHECK(as_tuples(seqlen_buckets(measured_seqlens(false))) ==
        std::vector<T>{{1, 767, 512}, {768, 1535, 1024}, {1536, 3071, 2048},
                       {3072, 6143, 4096}, {6144, 12287, 8192}, {12288, kMax, 16384}});
  CHECK(as_tuples(seqlen_buckets(measured_seqlens(true))) ==
        std::vector<T>{{1, 2047, 1024}, {2048, 8191, 4096}, {8192, kMax, 16384}});
}

TEST_CASE("tune: buckets tile [1, max] and hold their measured length", "[cpu][tune]") {
  CHECK(bucket_boundary(512, 1024) == 768);
  CHECK(bucket_boundary(1024, 4096) == 2048);
  CHECK(bucket_boundary(1, 2) == 2);
  CHECK(bucket_boundary(100, 101) == 101);
  for (const std::vector<int64_t>& measured :
       {std::vector<int64_t>{1}, {5000}, {1, 2, 3}, {7, 1000000}, {100, 101, 3000, 3001},
        {512, 1024, 2048, 4096, 8192, 16384}}) {
    const std::vector<SeqlenBucket> buckets = seqlen_buckets(measured);
    REQUIRE(buckets.size() == measured.size());
    CHECK(buckets.front().lo == 1);
    CHECK(buckets.back().hi == kMax);
    for (size_t i = 0; i < buckets.size(); ++i) {
      CHECK(buckets[i].measured_at == measured[i]);
      CHECK(buckets[i].lo <= buckets[i].measured_at);
      CHECK(buckets[i].measured_at <= buckets[i].hi);
      if (i > 0) CHECK(buckets[i].lo == buckets[i - 1].hi + 1);
    }
  }
}

TEST_CASE("tune: keys, filters, fitting kernels and the measured problems", "[cpu][tune]") {
  const std::vector<fa3::MatchKey> keys = all_keys();
  REQUIRE(keys.size() == 12);
  CHECK(key_label(keys[0]) == "f16 d64 non-causal");
  CHECK(key_label(keys[11]) == "bf16 d256 causal");
  CHECK(same_key(keys[9], kBf16D128Causal));

  CHECK(selected_keys({fa3::DType::F16, fa3::DType::BF16}, {64, 128, 256}, {false, true}).size() == 12);
  const std::vector<fa3::MatchKey> filtered = selected_keys({fa3::DType::BF16}, {128}, {true});
  REQUIRE(filtered.size() == 1);
  CHECK(same_key(filtered[0], kBf16D128Causal));
  CHECK(selected_keys({fa3::DType::F16}, {64, 256}, {false, true}).size() == 4);

  CHECK(kernels_for_key(kBf16D128Causal, fake_kernels()) ==
        std::vector<std::string>{"fa3_fwd_bf16_d128_m128_n128_s2_w2_causal",
                                 "fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_causal",
                                 "fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_pp_causal",
                                 "fa3_fwd_bf16_d128_m128_n176_s2_w2_ov_pp_causal"});

  // The paper's grid: batch = 16384 / S, heads = 2048 / head_dim, seqlen_q = seqlen_k.
  const fa3bench::Problem p = tune_problem(kBf16D128Causal, 4096);
  CHECK(p.dtype == fa3bench::DType::BF16);
  CHECK(p.head_dim == 128);
  CHECK(p.causal);
  CHECK(p.seqlen_q == 4096);
  CHECK(p.seqlen_k == 4096);
  CHECK(p.batch == 4);
  CHECK(p.heads == 16);
  CHECK(p.kv_heads == 16);
  const fa3bench::Problem q = tune_problem(kF16D64, 16384);
  CHECK(q.dtype == fa3bench::DType::F16);
  CHECK(q.batch == 1);
  CHECK(q.heads == 32);
  CHECK_FALSE(q.causal);
}

// ---- winners ------------------------------------------------------------------------------

TEST_CASE("tune: the winner is the fastest kernel that passed its check", "[cpu][tune]") {
  using Check = KernelMeasurement::Check;
  SECTION("fastest median wins") {
    CHECK(pick_winner({timed("a", 2.0), timed("b", 1.0), timed("c", 1.5)}) == 1u);
  }
  SECTION("a faster kernel that failed its check is never picked") {
    CHECK(pick_winner({timed("a", 2.0), timed("fast_but_wrong", 0.5, Check::Failed),
                       timed("c", 1.5)}) == 2u);
  }
  SECTION("unchecked and untimed kernels are not eligible") {
    KernelMeasurement untimed;
    untimed.kernel = "did_not_run";
    untimed.check = Check::Passed;
    untimed.note = "out of memory";
    CHECK(pick_winner({timed("unchecked", 0.1, Check::NotRun), untimed, timed("ok", 3.0)}) == 2u);
  }
  SECTION("no eligible kernel: no winner") {
    CHECK_FALSE(pick_winner({}).has_value());
    CHECK_FALSE(pick_winner({timed("a", 1.0, Check::Failed)}).has_value());
  }
  SECTION("equal medians: the first") {
    CHECK(pick_winner({timed("a", 1.0), timed("b", 1.0)}) == 0u);
  }
  SECTION("margin") {
    CHECK(margin(timed("w", 1.0), timed("o", 1.25)).value() == Approx(0.25));
    KernelMeasurement untimed;
    CHECK_FALSE(margin(timed("w", 1.0), untimed).has_value());
  }
}

TEST_CASE("tune: fa3-bench rows become measurements", "[cpu][tune]") {
  fa3bench::ResultRow row;
  row.problem = tune_problem(kBf16D128Causal, 4096);
  row.config = "fa3_fwd_bf16_d128_m128_n128_s2_w2_causal";
  fa3bench::TimingStats t;
  t.median_ms = 2.0;
  row.timing = t;
  fa3bench::CheckResult c;
  c.pass = true;
  row.check = c;
  KernelMeasurement m = measurement_from_row(row);
  CHECK(m.kernel == row.config);
  CHECK(m.check == KernelMeasurement::Check::Passed);
  CHECK(m.eligible());
  // 4 * B * H * S^2 * D / 2 (causal) / time
  CHECK(m.tflops == Approx(4.0 * 4 * 16 * 4096.0 * 4096 * 128 / 2 / 2e-3 / 1e12));

  row.check->pass = false;
  m = measurement_from_row(row);
  CHECK(m.check == KernelMeasurement::Check::Failed);
  CHECK_FALSE(m.eligible());

  row.check.reset();
  m = measurement_from_row(row);
  CHECK(m.check == KernelMeasurement::Check::NotRun);
  CHECK_FALSE(m.eligible());

  row.check = c;
  row.check->pass = true;
  row.note = "fa3_forward_with_kernel: something";
  m = measurement_from_row(row);
  CHECK_FALSE(m.timing.has_value());
  CHECK_FALSE(m.eligible());
}

// ---- merging ------------------------------------------------------------------------------

TEST_CASE("tune: neighbouring buckets with the same winner merge, others do not", "[cpu][tune]") {
  auto text = [](const std::vector<KernelRange>& ranges) {
    std::string s;
    for (const KernelRange& r : ranges)
      s += std::to_string(r.lo) + "-" + std::to_string(r.hi) + ":" + r.kernel + " ";
    return s;
  };
  SECTION("one winner everywhere: one range") {
    CHECK(text(key_ranges(buckets_won_by(kBf16D128Causal, {"A", "A", "A", "A", "A", "A"}))) ==
          "1-2147483647:A ");
  }
  SECTION("runs of the same winner merge") {
    CHECK(text(key_ranges(buckets_won_by(kBf16D128Causal, {"A", "A", "B", "B", "B", "C"}))) ==
          "1-1535:A 1536-12287:B 12288-2147483647:C ");
  }
  SECTION("the same winner with another in between stays apart") {
    CHECK(text(key_ranges(buckets_won_by(kBf16D128Causal, {"A", "B", "A", "A", "B", "A"}))) ==
          "1-767:A 768-1535:B 1536-6143:A 6144-12287:B 12288-2147483647:A ");
  }
  SECTION("ranges that do not touch are not merged") {
    CHECK(text(merge_ranges({{1, 10, "A"}, {12, 20, "A"}, {21, 30, "A"}})) == "1-10:A 12-30:A ");
  }
}

// ---- the table ------------------------------------------------------------------------------

TEST_CASE("tune: the table of a full run validates and picks the measured winners",
          "[cpu][tune]") {
  const fa3::TuningTable current = current_table();
  std::vector<MeasuredKey> measured;
  for (const fa3::MatchKey& key : all_keys()) {
    std::vector<std::string> winners(6, plain_kernel(key));
    if (same_key(key, kBf16D128Causal)) {
      winners = {"fa3_fwd_bf16_d128_m128_n128_s2_w2_causal",
                 "fa3_fwd_bf16_d128_m128_n128_s2_w2_causal",
                 "fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_pp_causal",
                 "fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_pp_causal",
                 "fa3_fwd_bf16_d128_m128_n176_s2_w2_ov_pp_causal",
                 "fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_pp_causal"};
    }
    measured.push_back({key, key_ranges(buckets_won_by(key, winners))});
  }
  CHECK(unmeasured_keys(measured).empty());
  const Json doc = tuning_table_json(measured, current, fake_kernels(), test_info());
  const std::string text = table_text(doc);
  CHECK(Json::parse(text) == doc);  // the layout is only whitespace
  REQUIRE_FALSE(validate_table(text, "tuned.json", fake_kernels()).failed());
  const fa3::TuningTable t = parse_ok(text);

  CHECK(t.entries().size() == 11 + 4);  // bf16 d128 causal: 4 ranges, the others one each
  CHECK(t.info() == std::vector<std::pair<std::string, std::string>>{
                        {"gpu", "NVIDIA H100 80GB HBM3"},
                        {"date", "2026-11-22"},
                        {"generated_by", "fa3-tune --hdim 128"},
                        {"notes", "notes"}});
  CHECK(selected(t, kBf16D128Causal, 1, 1) == "fa3_fwd_bf16_d128_m128_n128_s2_w2_causal");
  CHECK(selected(t, kBf16D128Causal, 1535, 7) == "fa3_fwd_bf16_d128_m128_n128_s2_w2_causal");
  CHECK(selected(t, kBf16D128Causal, 1536, kMax) ==
        "fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_pp_causal");
  CHECK(selected(t, kBf16D128Causal, 8192, 1) == "fa3_fwd_bf16_d128_m128_n176_s2_w2_ov_pp_causal");
  CHECK(selected(t, kBf16D128Causal, kMax, kMax) ==
        "fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_pp_causal");
  // Measured keys cover every seqlen_k, and the current table's split of f16 d64 is gone.
  CHECK(selected(t, kF16D64, 5000, 5000) == "fa3_fwd_f16_d64_m128_n128_s2_w2");
  for (const fa3::TuningEntry& e : t.entries()) {
    CHECK(e.seqlen_k.lo == 1);
    CHECK(e.seqlen_k.hi == kMax);
  }
  // Every entry carries its kernel's config, as the library maps it.
  for (const Json& e : doc["entries"])
    CHECK(e["config"] == fa3::fwd_config_json(fake_kernel(e["kernel"].get<std::string>()).fwd));
  CHECK(doc["version"] == 1);
  CHECK(doc["arch"] == "sm_90a");
}

TEST_CASE("tune: a filtered run keeps the current table's entries for the other keys",
          "[cpu][tune]") {
  const fa3::TuningTable current = current_table();
  const std::vector<MeasuredKey> measured = {
      {kBf16D128Causal,
       key_ranges(buckets_won_by(kBf16D128Causal,
                                 {"fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_causal",
                                  "fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_causal",
                                  "fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_causal",
                                  "fa3_fwd_bf16_d128_m128_n176_s2_w2_ov_pp_causal",
                                  "fa3_fwd_bf16_d128_m128_n176_s2_w2_ov_pp_causal",
                                  "fa3_fwd_bf16_d128_m128_n176_s2_w2_ov_pp_causal"}))}};
  const std::vector<fa3::MatchKey> kept = unmeasured_keys(measured);
  REQUIRE(kept.size() == 11);
  for (const fa3::MatchKey& key : kept) CHECK_FALSE(same_key(key, kBf16D128Causal));

  const std::string text =
      table_text(tuning_table_json(measured, current, fake_kernels(), test_info()));
  const fa3::TuningTable t = parse_ok(text);
  CHECK(t.entries().size() == 2 + 10 + 3);  // measured: 2 ranges; kept: 10 keys x 1 + f16 d64 x 3
  CHECK(selected(t, kBf16D128Causal, 3071, 3071) == "fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_causal");
  CHECK(selected(t, kBf16D128Causal, 3072, 3072) ==
        "fa3_fwd_bf16_d128_m128_n176_s2_w2_ov_pp_causal");
  // Every other problem selects what the current table selects, splits included.
  for (const fa3::MatchKey& key : kept)
    for (int64_t q : {int64_t{1}, int64_t{4095}, int64_t{4096}, kMax})
      for (int64_t k : {int64_t{1}, int64_t{99}, int64_t{100}, kMax})
        CHECK(selected(t, key, q, k) == selected(current, key, q, k));
  CHECK(selected(t, kF16D64, 5000, 5000) == "fa3_fwd_f16_d64_m192_n128_s2_w3_ov_pp");
  CHECK(selected(t, kF16D64, 5000, 50) == "fa3_fwd_f16_d64_m128_n128_s2_w2");

  MethodSummary summary;
  summary.warmup = 10;
  summary.iters = 30;
  summary.buckets = seqlen_buckets(measured_seqlens(false));
  summary.kept_keys = kept;
  const std::string notes = method_notes(summary);
  CHECK_THAT(notes, Catch::Contains("10 warm-up + 30 timed launches, inputs rotated"));
  CHECK_THAT(notes, Catch::Contains("[1, 767] at 512"));
  CHECK_THAT(notes, Catch::Contains("[12288, 2147483647] at 16384"));
  CHECK_THAT(notes, Catch::Contains("seqlen_k [1, 2147483647]"));
  CHECK_THAT(notes, Catch::Contains("entries kept from the built-in table: f16 d64 non-causal,"));
  CHECK_THAT(notes, !Catch::Contains("bf16 d128 causal"));
  summary.kept_keys.clear();
  CHECK_THAT(method_notes(summary), !Catch::Contains("kept"));
  summary.rounds = 3;
  CHECK_THAT(method_notes(summary),
             Catch::Contains("10 warm-up + 30 timed launches in each of 3 rounds interleaved "
                             "over the kernels (a kernel's figure: the median of its rounds' "
                             "medians)"));
  summary.cooldown = 1;
  CHECK_THAT(method_notes(summary),
             Catch::Contains("medians), each kernel's launches followed by 1 x their time with "
                             "the GPU idle, inputs rotated"));
}

TEST_CASE("tune: an invalid table is caught before it is written", "[cpu][tune]") {
  const fa3::TuningTable current = current_table();
  SECTION("a kernel the library does not have") {
    const std::vector<MeasuredKey> measured = {
        {kBf16D128Causal, {{1, kMax, "fa3_fwd_bf16_d128_m128_n96_s2_w2_causal"}}}};
    const fa3::Error e = validate_table(
        table_text(tuning_table_json(measured, current, fake_kernels(), test_info())), "out.json",
        fake_kernels());
    CHECK(e.failed());
    CHECK_THAT(e.message, Catch::Contains("not a kernel compiled into the library"));
  }
  SECTION("ranges that leave a gap") {
    const std::vector<MeasuredKey> measured = {
        {kBf16D128Causal, {{1, 1000, plain_kernel(kBf16D128Causal)},
                           {1002, kMax, plain_kernel(kBf16D128Causal)}}}};
    const fa3::Error e = validate_table(
        table_text(tuning_table_json(measured, current, fake_kernels(), test_info())), "out.json",
        fake_kernels());
    CHECK(e.failed());
    CHECK_THAT(e.message, Catch::Contains("no entry covers fwd bf16 head_dim 128 causal at seqlen_q=1001"));
  }
}

TEST_CASE("tune: info values", "[cpu][tune]") {
  CHECK(utc_date(0) == "1970-01-01");
  CHECK(utc_date(1795305600) == "2026-11-22");
  const char* argv[] = {"/some/build/fa3-tune", "--quick", "--out", "t.json"};
  CHECK(generated_by(4, argv) == "fa3-tune --quick --out t.json");
  CHECK(generated_by(1, argv) == "fa3-tune");
  const char* odd[] = {"fa3-tune", "--out", "t\xff\n.json"};
  CHECK(generated_by(3, odd) == "fa3-tune --out t??.json");
  // A --base path in the notes: a byte that is not UTF-8 would make the table's JSON text
  // throw at the end of the run.
  CHECK(printable_ascii("--base /tmp/t\xe9st.json (gpu H200)") == "--base /tmp/t?st.json (gpu H200)");
}

// ---- the report ---------------------------------------------------------------------------

TEST_CASE("tune: the report shows every kernel, the winner and the margin", "[cpu][tune]") {
  using Check = KernelMeasurement::Check;
  BucketResult r;
  r.key = kBf16D128Causal;
  r.bucket = seqlen_buckets(measured_seqlens(false))[3];
  r.problem = tune_problem(kBf16D128Causal, 4096);
  r.kernels = {timed("fa3_fwd_bf16_d128_m128_n128_s2_w2_causal", 1.25),
               timed("fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_causal", 1.0),
               timed("fa3_fwd_bf16_d128_m128_n176_s2_w2_ov_pp_causal", 0.5, Check::Failed)};
  r.winner = pick_winner(r.kernels);
  REQUIRE(r.winner == 1u);

  const std::string report = bucket_report(r, "fa3_fwd_bf16_d128_m128_n128_s2_w2_causal");
  CHECK_THAT(report, Catch::StartsWith("== bf16 d128 causal, seqlen_q [3072, 6143]: measured at "
                                       "bf16 d128 causal S=4096 B=4 H=16\n"));
  CHECK_THAT(report, Catch::Contains("  *  fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_causal "));
  CHECK_THAT(report, Catch::Contains("  !  fa3_fwd_bf16_d128_m128_n176_s2_w2_ov_pp_causal"));
  CHECK_THAT(report, Catch::Contains("FAIL (O error 5.0e-01 vs limit 2 x 2.0e-03 + 1e-5"));
  CHECK_THAT(report, Catch::Contains("FAILED ITS CHECK: never picked"));
  CHECK_THAT(report, Catch::Contains("winner: fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_causal, over "
                                     "the built-in table's pick "
                                     "fa3_fwd_bf16_d128_m128_n128_s2_w2_causal: +25.0% "
                                     "(80.0 -> 100.0 TFLOPS)"));
  CHECK_THAT(bucket_report(r, "fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_causal"),
             Catch::Contains("= the built-in table's pick (no change)"));
  CHECK_THAT(bucket_report(r, "fa3_fwd_bf16_d128_m128_n176_s2_w2_ov_pp_causal"),
             Catch::Contains("which FAILED its check"));

  CHECK(failure_count({r}) == 1);
  CHECK_THAT(failure_summary({r}),
             Catch::Contains("FAILED CHECK: fa3_fwd_bf16_d128_m128_n176_s2_w2_ov_pp_causal on "
                             "bf16 d128 causal S=4096"));

  r.kernels = {timed("a", 1.0, Check::Failed)};
  r.winner = pick_winner(r.kernels);
  CHECK_THAT(bucket_report(r, "a"), Catch::Contains("winner: none"));
}

TEST_CASE("tune: the ranges summary compares with the current table", "[cpu][tune]") {
  const fa3::TuningTable current = current_table();
  const std::string plain = plain_kernel(kBf16D128Causal);
  const std::string summary = ranges_summary(
      {{kBf16D128Causal, {{1, kMax, plain}}},
       {kF16D64, {{1, 4095, "fa3_fwd_f16_d64_m128_n128_s2_w2"},
                  {4096, kMax, "fa3_fwd_f16_d64_m128_n128_s2_w2_ov_pp"}}}},
      current);
  CHECK_THAT(summary, Catch::Contains("  bf16 d128 causal: [1, 2147483647] " + plain +
                                      "\n    built-in: unchanged\n"));
  CHECK_THAT(summary, Catch::Contains("    built-in: [1, 4095] fa3_fwd_f16_d64_m128_n128_s2_w2; "
                                      "[4096, 2147483647] x seqlen_k [1, 99] "
                                      "fa3_fwd_f16_d64_m128_n128_s2_w2; "));
}

// ---- the command line ---------------------------------------------------------------------

TEST_CASE("tune: options and their defaults", "[cpu][tune]") {
  TuneParseResult r = parse({});
  REQUIRE(r.status == 0);
  REQUIRE_FALSE(r.exit_now);
  CHECK(r.options.out_path == "tuning_table.json");
  CHECK_FALSE(r.options.quick);
  CHECK(r.options.dtypes.size() == 2);
  CHECK(r.options.head_dims == std::vector<int>{64, 128, 256});
  CHECK(r.options.causal == std::vector<bool>{false, true});
  CHECK(r.options.warmup == 10);
  CHECK(r.options.iters == 30);
  CHECK(r.options.rounds == 3);
  CHECK(r.options.cooldown == 1.0);
  CHECK(r.options.device == 0);
  CHECK(r.options.base_path.empty());

  r = parse({"--quick"});
  CHECK(r.options.quick);
  CHECK(r.options.warmup == 3);
  CHECK(r.options.iters == 10);
  CHECK(r.options.rounds == 1);
  CHECK(parse({"--quick", "--rounds", "2"}).options.rounds == 2);
  CHECK(parse({"--rounds=5"}).options.rounds == 5);
  CHECK(parse({"--cooldown", "0"}).options.cooldown == 0.0);
  CHECK(parse({"--cooldown=2.5"}).options.cooldown == 2.5);

  r = parse({"--quick", "--iters=50", "--warmup", "0", "--out", "x.json", "--dtype", "BF16,bf16",
             "--hdim=256,64", "--causal", "1", "--device", "1", "--base", "earlier.json"});
  REQUIRE(r.status == 0);
  CHECK(r.options.iters == 50);
  CHECK(r.options.warmup == 0);
  CHECK(r.options.out_path == "x.json");
  CHECK(r.options.dtypes == std::vector<fa3::DType>{fa3::DType::BF16});
  CHECK(r.options.head_dims == std::vector<int>{256, 64});
  CHECK(r.options.causal == std::vector<bool>{true});
  CHECK(r.options.device == 1);
  CHECK(r.options.base_path == "earlier.json");

  r = parse({"--dtype", "fp16,half,f16"});
  CHECK(r.options.dtypes == std::vector<fa3::DType>{fa3::DType::F16});

  for (const char* help : {"--help", "-h"}) {
    r = parse({"--quick", help, "--bogus"});
    CHECK(r.status == 0);
    CHECK(r.exit_now);
    CHECK_THAT(r.message, Catch::StartsWith("Usage: fa3-tune"));
    for (const char* option : {"--out", "--quick", "--dtype", "--hdim", "--causal", "--base",
                               "--device", "--iters", "--warmup", "--rounds", "--cooldown"})
      CHECK_THAT(r.message, Catch::Contains(option));
  }
}

TEST_CASE("tune: argument errors are one sentence and exit status 2", "[cpu][tune]") {
  expect_argument_error({"--bogus"}, "unknown option '--bogus'");
  expect_argument_error({"fa3_fwd"}, "unknown option 'fa3_fwd'");
  expect_argument_error({"--out"}, "--out needs a value");
  expect_argument_error({"--iters", "2000000"}, "--iters must be at most 1000000 launches");
  expect_argument_error({"--warmup", "2000000"}, "--warmup must be at most 1000000 launches");
  expect_argument_error({"--rounds", "5000"}, "--rounds must be at most 1000 rounds");
  expect_argument_error({"--out", "--quick"}, "--out needs a value (FILE), not the option '--quick'");
  expect_argument_error({"--out="}, "--out needs a file name");
  expect_argument_error({"--base", ""}, "--base needs a file name");
  expect_argument_error({"--dtype", "fp8"}, "--dtype must be a list of fp16");
  expect_argument_error({"--dtype", ""}, "--dtype needs at least one value");
  expect_argument_error({"--dtype", "bf16,"}, "--dtype must be a list");
  expect_argument_error({"--hdim", "96"}, "--hdim must be a list of 64, 128 and 256");
  expect_argument_error({"--causal", "2"}, "--causal must be 0, 1");
  expect_argument_error({"--iters", "0"}, "--iters must be a positive integer");
  expect_argument_error({"--iters", "ten"}, "--iters must be a positive integer");
  expect_argument_error({"--warmup", "-1"}, "--warmup must be a non-negative integer");
  expect_argument_error({"--rounds", "0"}, "--rounds must be a positive integer");
  expect_argument_error({"--cooldown", "-1"}, "--cooldown must be a number from 0 to 1000 (got '-1')");
  expect_argument_error({"--cooldown", "1x"}, "--cooldown must be a number from 0 to 1000");
  expect_argument_error({"--cooldown", "nan"}, "--cooldown must be a number from 0 to 1000");
  expect_argument_error({"--device", "x"}, "--device must be a non-negative integer");
  expect_argument_error({"--quick=yes"}, "--quick is a flag and takes no value");
  expect_argument_error({"--hdim", "64", "--hdim", "128"}, "--hdim is given twice");
}

// ---- --direction bwd ----------------------------------------------------------------------

TEST_CASE("tune: --direction", "[cpu][tune]") {
  CHECK(parse({}).options.direction == fa3::Direction::Forward);
  CHECK(parse({"--direction", "fwd"}).options.direction == fa3::Direction::Forward);
  CHECK(parse({"--direction", "bwd"}).options.direction == fa3::Direction::Backward);
  CHECK(parse({"--direction=bwd", "--hdim", "128"}).options.direction == fa3::Direction::Backward);
  CHECK_THAT(parse({"--help"}).message, Catch::Contains("--direction"));
  expect_argument_error({"--direction", "fwdbwd"}, "--direction must be fwd or bwd (got 'fwdbwd')");
  expect_argument_error({"--direction", ""}, "--direction must be fwd or bwd (got '')");
  expect_argument_error({"--direction"}, "--direction needs a value");
  expect_argument_error({"--direction", "bwd", "--direction", "fwd"}, "--direction is given twice");
}

TEST_CASE("tune: backward keys, fitting kernels and rows", "[cpu][tune]") {
  const std::vector<fa3::MatchKey> keys = all_keys(fa3::Direction::Backward);
  REQUIRE(keys.size() == 12);
  for (const fa3::MatchKey& key : keys) CHECK(key.direction == fa3::Direction::Backward);
  CHECK(key_label(keys[0]) == "bwd f16 d64 non-causal");
  CHECK(key_label(kBf16D128Causal) == "bf16 d128 causal");  // forward labels unchanged
  const std::vector<fa3::MatchKey> filtered =
      selected_keys({fa3::DType::BF16}, {64}, {false}, fa3::Direction::Backward);
  REQUIRE(filtered.size() == 1);
  CHECK(same_key(filtered[0], kBwdBf16D64));
  CHECK_FALSE(same_key(kBwdBf16D64, {fa3::Direction::Forward, fa3::DType::BF16, 64, false}));
  // Backward kernels only, of the key's dtype, head dim and mask, in list order.
  CHECK(kernels_for_key(kBwdBf16D64, fake_kernels()) ==
        std::vector<std::string>{"fa3_bwd_bf16_d64_m128_n128_s2_w2_dqq",
                                 "fa3_bwd_bf16_d64_m64_n128_s2_w2"});
  CHECK(kernels_for_key(kBf16D128Causal, fake_kernels()).size() == 4);  // forward ones only
  // The problem is the forward's grid shape.
  const fa3bench::Problem p = tune_problem(kBwdBf16D64, 4096);
  CHECK(p.batch == 4);
  CHECK(p.heads == 32);
  CHECK(p.seqlen_k == 4096);

  // A BackwardRunner row: its backward check decides, TFLOPS count 2.5 forwards.
  fa3bench::ResultRow row;
  row.problem = p;
  row.direction = fa3bench::Direction::Bwd;
  row.config = "fa3_bwd_bf16_d64_m64_n128_s2_w2";
  fa3bench::TimingStats t;
  t.median_ms = 2.0;
  row.timing = t;
  fa3bench::BackwardCheckResult c;
  c.pass = true;
  row.backward_check = c;
  KernelMeasurement m = measurement_from_row(row);
  CHECK(m.check == KernelMeasurement::Check::Passed);
  CHECK(m.eligible());
  CHECK(m.tflops == Approx(2.5 * 4.0 * 4 * 32 * 4096.0 * 4096 * 64 / 2e-3 / 1e12));
  CHECK(check_text(m) == "PASS");
  row.backward_check->pass = false;
  row.backward_check->failure = "dk error 3.1e-02 > 2 x plain 1.0e-02 + 1e-5";
  m = measurement_from_row(row);
  CHECK(m.check == KernelMeasurement::Check::Failed);
  CHECK_FALSE(m.eligible());
  CHECK(check_text(m) == "FAIL (dk error 3.1e-02 > 2 x plain 1.0e-02 + 1e-5)");
}

TEST_CASE("tune: a backward run writes bwd entries and keeps the fwd ones, and vice versa",
          "[cpu][tune]") {
  const fa3::TuningTable current = current_table_with_backward();
  const std::vector<MeasuredKey> measured = {
      {kBwdBf16D64, {{1, 3071, "fa3_bwd_bf16_d64_m128_n128_s2_w2_dqq"},
                     {3072, kMax, "fa3_bwd_bf16_d64_m64_n128_s2_w2"}}}};
  CHECK(unmeasured_keys(measured, fa3::Direction::Backward).size() == 11);
  CHECK(unmeasured_keys(measured).size() == 12);  // the forward keys
  TableInfo info{"NVIDIA H200", "2026-11-27", "fa3-tune --direction bwd", "bwd method",
                 fa3::Direction::Backward};
  const Json doc = tuning_table_json(measured, current, fake_kernels(), info);
  const std::string text = table_text(doc);
  REQUIRE_FALSE(validate_table(text, "tuned.json", fake_kernels()).failed());
  const fa3::TuningTable t = parse_ok(text);
  // fwd: as before, splits included; bwd: the measured ranges, the other keys kept.
  for (const fa3::MatchKey& key : all_keys())
    for (int64_t q : {int64_t{1}, int64_t{4096}, kMax})
      for (int64_t k : {int64_t{1}, int64_t{100}})
        CHECK(selected(t, key, q, k) == selected(current, key, q, k));
  CHECK(selected(t, kBwdBf16D64, 3071, 1) == "fa3_bwd_bf16_d64_m128_n128_s2_w2_dqq");
  CHECK(selected(t, kBwdBf16D64, 3072, kMax) == "fa3_bwd_bf16_d64_m64_n128_s2_w2");
  for (const fa3::MatchKey& key : unmeasured_keys(measured, fa3::Direction::Backward))
    CHECK(selected(t, key, 5000, 5000) == backward_kernel(key));
  CHECK(t.entries().size() == current.entries().size() + 1);
  // Every bwd entry carries its kernel's backward config; the fwd entries come first.
  bool seen_backward = false;
  for (const Json& e : doc["entries"]) {
    const fa3::KernelInfo k = fake_kernel(e["kernel"].get<std::string>());
    if (e["match"]["direction"] == "bwd") {
      seen_backward = true;
      CHECK(e["config"] == fa3::bwd_config_json(k.bwd));
    } else {
      CHECK_FALSE(seen_backward);
      CHECK(e["config"] == fa3::fwd_config_json(k.fwd));
    }
  }
  // The run's info under bwd_ keys; the forward's kept.
  CHECK(t.info() == std::vector<std::pair<std::string, std::string>>{
                        {"gpu", "H100"},
                        {"date", "2026-11-01"},
                        {"generated_by", "fa3-tune"},
                        {"notes", "fwd notes"},
                        {"bwd_gpu", "NVIDIA H200"},
                        {"bwd_date", "2026-11-27"},
                        {"bwd_generated_by", "fa3-tune --direction bwd"},
                        {"bwd_notes", "bwd method"}});

  // A forward run keeps every bwd entry and the bwd_ info.
  const Json forward = tuning_table_json({}, current, fake_kernels(), test_info());
  const fa3::TuningTable f = parse_ok(table_text(forward));
  for (const fa3::MatchKey& key : all_keys(fa3::Direction::Backward))
    CHECK(selected(f, key, 1, 1) == backward_kernel(key));
  CHECK(f.info().back() == std::make_pair(std::string("bwd_notes"), std::string("bwd notes")));
  CHECK(f.info().front() == std::make_pair(std::string("gpu"), std::string("NVIDIA H100 80GB HBM3")));
  // ... and a current table without bwd entries gives a table without them (still valid).
  const fa3::TuningTable no_backward =
      parse_ok(table_text(tuning_table_json({}, current_table(), fake_kernels(), test_info())));
  CHECK(selected(no_backward, kBwdBf16D64, 1, 1) == "(none)");
}

TEST_CASE("tune: the notes of a backward run", "[cpu][tune]") {
  MethodSummary summary;
  summary.direction = fa3::Direction::Backward;
  summary.warmup = 10;
  summary.iters = 30;
  summary.buckets = seqlen_buckets(measured_seqlens(false));
  summary.kept_keys = {kBwdBf16D64};
  const std::string notes = method_notes(summary);
  CHECK_THAT(notes, Catch::StartsWith("Measured by fa3-tune --direction bwd with fa3-bench's "
                                      "method: every compiled backward kernel that fits a key"));
  CHECK_THAT(notes, Catch::Contains("float64 backward reference"));
  CHECK_THAT(notes, Catch::Contains("10 warm-up + 30 timed launches, inputs rotated"));
  CHECK_THAT(notes, !Catch::Contains("LSE"));
  CHECK_THAT(notes, Catch::Contains("entries kept from the built-in table: bwd bf16 d64 non-causal."));
}
