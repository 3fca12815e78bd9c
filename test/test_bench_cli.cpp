// fa3-bench's command line and the pure functions behind its numbers: options and their
// error sentences, the paper's grid, the FLOP formula, the timing statistics, the input-set
// count, the --check comparison (forward and backward) and the report formats. No GPU needed.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "../bench/backward_check.h"
#include "../bench/baseline_gemms.h"
#include "../bench/check.h"
#include "../bench/inputs.h"
#include "../bench/options.h"
#include "../bench/problems.h"
#include "../bench/report.h"
#include "../bench/stats.h"
#include "support/half.h"
#include "support/reference.h"

using namespace fa3bench;

namespace {

ParseResult parse(std::vector<std::string> args) {
  args.insert(args.begin(), "fa3-bench");
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  return parse_options(static_cast<int>(argv.size()), argv.data());
}

Options parse_ok(const std::vector<std::string>& args) {
  const ParseResult r = parse(args);
  INFO(r.message);
  REQUIRE(r.status == 0);
  REQUIRE_FALSE(r.exit_now);
  return r.options;
}

// Asserts an argument error: exit status 2 and one sentence that names the option.
void expect_argument_error(const std::vector<std::string>& args, const std::string& names) {
  const ParseResult r = parse(args);
  INFO("args: " << [&] { std::string s; for (auto& a : args) s += a + " "; return s; }()
                << "\nmessage: " << r.message);
  CHECK(r.status == 2);
  CHECK(r.exit_now);
  CHECK(r.message.rfind("fa3-bench: ", 0) == 0);
  CHECK(r.message.find(names) != std::string::npos);
  CHECK(r.message.find('\n') == std::string::npos);
  CHECK(r.message.back() == '.');
}

// Unmasked (i, j) pairs by brute force: query i sees key j when j <= i + Sk - Sq.
int64_t brute_force_pairs(int64_t sq, int64_t sk) {
  int64_t pairs = 0;
  for (int64_t i = 0; i < sq; ++i)
    for (int64_t j = 0; j < sk; ++j) pairs += j <= i + sk - sq ? 1 : 0;
  return pairs;
}

}  // namespace

// ---- options ------------------------------------------------------------------------------

TEST_CASE("--help documents every option", "[cpu][bench]") {
  const ParseResult r = parse({"--help"});
  CHECK(r.status == 0);
  CHECK(r.exit_now);
  CHECK(r.message == help_text());
  CHECK(parse({"-h"}).message == help_text());
  const std::vector<std::string> spec = {
      "--dtype", "--hdim", "--causal", "--seqlen", "--batch", "--heads", "--kv-heads",
      "--seqlen-q", "--seqlen-k", "--direction", "--deterministic", "--warmup", "--iters", "--rounds",
      "--cooldown", "--config",
      "--all-configs", "--ablation", "--check", "--no-baseline", "--csv", "--json",
      "--device", "--table", "--list-configs", "--help"};
  for (const std::string& name : spec) {
    INFO(name);
    CHECK(help_text().find("  " + name + " ") != std::string::npos);
  }
  for (const std::string& name : option_names()) {
    INFO(name);
    CHECK(help_text().find("  " + name + " ") != std::string::npos);
  }
  CHECK(option_names().size() == spec.size());
}

TEST_CASE("defaults are the paper's grid in bf16", "[cpu][bench]") {
  const Options o = parse_ok({});
  CHECK(o.dtypes == std::vector<DType>{DType::BF16});
  CHECK(o.head_dims == std::vector<int>{64, 128, 256});
  CHECK(o.causal == std::vector<bool>{false, true});
  CHECK(o.seqlens == std::vector<int64_t>{512, 1024, 2048, 4096, 8192, 16384});
  CHECK_FALSE(o.batch);
  CHECK_FALSE(o.heads);
  CHECK_FALSE(o.seqlen_q);
  CHECK(o.baseline);
  CHECK_FALSE(o.check);
  CHECK(o.iters > 0);
  CHECK(o.warmup >= 0);
  CHECK(o.rounds == 1);
  CHECK(o.cooldown == 0);
  CHECK(o.direction == Direction::Fwd);
  CHECK_FALSE(o.deterministic);
  CHECK(build_problems(o).size() == 36);
}

TEST_CASE("--direction picks fwd, bwd or fwdbwd; --deterministic goes with the backward", "[cpu][bench]") {
  CHECK(parse_ok({"--direction", "fwd"}).direction == Direction::Fwd);
  CHECK(parse_ok({"--direction=forward"}).direction == Direction::Fwd);
  CHECK(parse_ok({"--direction", "bwd"}).direction == Direction::Bwd);
  CHECK(parse_ok({"--direction", "Backward"}).direction == Direction::Bwd);
  CHECK(parse_ok({"--direction", "fwdbwd"}).direction == Direction::FwdBwd);
  CHECK(parse_ok({"--direction", "FWD+BWD"}).direction == Direction::FwdBwd);
  CHECK(std::string(direction_label(Direction::Fwd)) == "fwd");
  CHECK(std::string(direction_label(Direction::Bwd)) == "bwd");
  CHECK(std::string(direction_label(Direction::FwdBwd)) == "fwdbwd");

  Options o = parse_ok({"--direction", "bwd", "--deterministic", "--hdim", "64,128", "--seqlen",
                        "512,1k,2k,4k,8k,16k", "--dtype", "bf16", "--rounds", "3"});
  CHECK(o.direction == Direction::Bwd);
  CHECK(o.deterministic);
  CHECK(o.rounds == 3);
  CHECK(build_problems(o).size() == 2 * 2 * 6);  // the problems do not depend on the direction
  o = parse_ok({"--direction", "fwdbwd", "--kv-heads", "4", "--check", "--no-baseline"});
  CHECK(o.direction == Direction::FwdBwd);
  CHECK_FALSE(o.deterministic);
  CHECK(o.check);

  expect_argument_error({"--direction", "sideways"}, "--direction");
  expect_argument_error({"--direction", ""}, "--direction");
  expect_argument_error({"--deterministic"}, "--deterministic");  // the forward has no order
  expect_argument_error({"--direction", "fwd", "--deterministic"}, "--deterministic");
  expect_argument_error({"--direction", "bwd", "--deterministic=1"}, "--deterministic");
  expect_argument_error({"--direction", "bwd", "--config", "fa3_fwd_bf16_d128_m128_n128_s2_w2"},
                        "--config");
  expect_argument_error({"--direction", "fwdbwd", "--all-configs"}, "--all-configs");
  expect_argument_error({"--ablation", "--direction", "bwd"}, "--ablation");
}

TEST_CASE("options parse their values", "[cpu][bench]") {
  Options o = parse_ok({"--dtype", "f16,half,bf16,fp16", "--hdim=128", "--causal", "1",
                        "--seqlen", "1k,2K,300", "--iters=50", "--warmup", "0", "--check",
                        "--no-baseline", "--csv", "out.csv", "--json=out.json", "--device", "1",
                        "--table", "t.json", "--direction", "fwd"});
  CHECK(o.dtypes == std::vector<DType>{DType::F16, DType::BF16});
  CHECK(o.head_dims == std::vector<int>{128});
  CHECK(o.causal == std::vector<bool>{true});
  CHECK(o.seqlens == std::vector<int64_t>{1024, 2048, 300});
  CHECK(o.iters == 50);
  CHECK(o.warmup == 0);
  CHECK(o.check);
  CHECK_FALSE(o.baseline);
  CHECK(o.csv_path == "out.csv");
  CHECK(o.json_path == "out.json");
  CHECK(o.device == 1);
  CHECK(o.table_path == "t.json");

  o = parse_ok({"--seqlen-q", "128", "--seqlen-k", "4k", "--batch", "2", "--heads", "8",
                "--kv-heads", "2"});
  REQUIRE(o.seqlen_q);
  CHECK(*o.seqlen_q == 128);
  CHECK(*o.seqlen_k == 4096);
  CHECK(*o.batch == 2);
  CHECK(*o.heads == 8);
  CHECK(*o.kv_heads == 2);

  o = parse_ok({"--seqlen-q", "100"});  // the other length defaults to the same
  CHECK(*o.seqlen_k == 100);
  o = parse_ok({"--seqlen-k", "77"});
  CHECK(*o.seqlen_q == 77);

  o = parse_ok({"--config", "fa3_fwd_bf16_d128_m128_n128_s2_w2"});
  CHECK(o.config == "fa3_fwd_bf16_d128_m128_n128_s2_w2");
  CHECK(parse_ok({"--all-configs"}).all_configs);
  CHECK(parse_ok({"--ablation", "--check", "--iters", "5"}).ablation);
  o = parse_ok({"--ablation", "--rounds", "5", "--cooldown=1.5"});  // Table 2, in rounds
  CHECK(o.ablation);
  CHECK(o.rounds == 5);
  CHECK(o.cooldown == 1.5);
  CHECK(parse_ok({"--cooldown", "0"}).cooldown == 0);
  CHECK(parse_ok({"--list-configs"}).list_configs);
  CHECK(parse_ok({"--kv-heads", "4"}).kv_heads == 4);  // divides 32, 16 and 8
}

TEST_CASE("each argument error is one sentence and exit status 2", "[cpu][bench]") {
  expect_argument_error({"--dtype", "fp32"}, "--dtype");
  expect_argument_error({"--dtype", ""}, "--dtype");
  expect_argument_error({"--hdim", "96"}, "--hdim");
  expect_argument_error({"--hdim", "64,96"}, "--hdim");
  expect_argument_error({"--causal", "2"}, "--causal");
  expect_argument_error({"--seqlen", "0"}, "--seqlen");
  expect_argument_error({"--seqlen", "512,,1k"}, "--seqlen");
  expect_argument_error({"--seqlen", "abc"}, "--seqlen");
  expect_argument_error({"--seqlen", "-5"}, "--seqlen");
  expect_argument_error({"--seqlen", "99999999999"}, "--seqlen");
  expect_argument_error({"--seqlen-q", "0"}, "--seqlen-q");
  expect_argument_error({"--batch", "0"}, "--batch");
  expect_argument_error({"--heads", "x"}, "--heads");
  expect_argument_error({"--iters", "0"}, "--iters");
  expect_argument_error({"--iters"}, "--iters");
  expect_argument_error({"--warmup", "-1"}, "--warmup");
  expect_argument_error({"--rounds", "0"}, "--rounds");
  expect_argument_error({"--rounds", "1001"}, "--rounds");
  expect_argument_error({"--iters", "2147483647"}, "--iters");
  expect_argument_error({"--iters", "1000001"}, "--iters");
  expect_argument_error({"--warmup", "1000001"}, "--warmup");
  CHECK(parse_ok({"--iters", "1000000", "--warmup", "0", "--rounds", "1000"}).iters == 1000000);
  expect_argument_error({"--cooldown", "-1"}, "--cooldown");
  expect_argument_error({"--cooldown", "1x"}, "--cooldown");
  expect_argument_error({"--cooldown", "2000"}, "--cooldown");
  expect_argument_error({"--device", "gpu0"}, "--device");
  expect_argument_error({"--kv-heads", "3", "--heads", "32"}, "--kv-heads");
  expect_argument_error({"--kv-heads", "64", "--heads", "32"}, "--kv-heads");
  expect_argument_error({"--kv-heads", "3"}, "--kv-heads");  // heads from the paper: 2048/D
  expect_argument_error({"--frobnicate"}, "--frobnicate");
  expect_argument_error({"extra"}, "extra");
  expect_argument_error({"--direction", "sideways"}, "--direction");
  expect_argument_error({"--check=yes"}, "--check");
  expect_argument_error({"--config", ""}, "--config");
  expect_argument_error({"--config", "x", "--all-configs"}, "--all-configs");
  expect_argument_error({"--seqlen", "512", "--seqlen-q", "100"}, "--seqlen");
  expect_argument_error({"--ablation", "--hdim", "64"}, "--ablation");
  expect_argument_error({"--ablation", "--config", "x"}, "--config");
  expect_argument_error({"--csv"}, "--csv");
  // A separate value that begins with "--" is a forgotten one: the option after it would
  // otherwise be swallowed as a file name.
  expect_argument_error({"--csv", "--check"}, "--check");
  expect_argument_error({"--json", "--deterministic"}, "--json");
  expect_argument_error({"--table", "--all-configs"}, "--table=--all-configs");
  CHECK(parse_ok({"--csv=--odd.csv"}).csv_path == "--odd.csv");
  // Sizes whose products overflow int64 (Q: 2^30 x 2^30 x 1 x 64 = 2^66 elements).
  expect_argument_error({"--batch", "1073741824", "--heads", "1073741824", "--seqlen", "1",
                         "--hdim", "64"},
                        "--batch");
  expect_argument_error({"--batch", "2000000000", "--heads", "1", "--seqlen-q", "1",
                         "--seqlen-k", "1000000000", "--hdim", "256"},
                        "2^61");  // K and V: 2^69 elements
  // 2^55 elements: no GPU holds it, but nothing overflows (fa3 and the allocator say no).
  CHECK(*parse_ok({"--batch", "65535", "--heads", "65535", "--seqlen", "16k", "--hdim", "256"})
             .batch == 65535);
}

TEST_CASE("--config must name a compiled kernel", "[cpu][bench]") {
  const std::vector<std::string> compiled = {"fa3_fwd_bf16_d128_m128_n128_s2_w2",
                                             "fa3_fwd_bf16_d128_m128_n128_s2_w2_causal"};
  CHECK(config_name_error("fa3_fwd_bf16_d128_m128_n128_s2_w2", compiled).empty());
  const std::string e = config_name_error("fa3_fwd_bf16_d96_m128_n128_s2_w2", compiled);
  CHECK(e.rfind("fa3-bench: --config fa3_fwd_bf16_d96_m128_n128_s2_w2 ", 0) == 0);
  CHECK(e.find("--list-configs") != std::string::npos);
  CHECK(e.back() == '.');
  CHECK_FALSE(config_name_error("anything", {}).empty());
}

// ---- problems and FLOPs -------------------------------------------------------------------

TEST_CASE("the paper's grid: 6 seqlens, batch = 16384/S, heads = 2048/D", "[cpu][bench]") {
  for (int d : {64, 128, 256}) {
    const std::vector<Problem> grid = paper_grid(DType::BF16, d, true);
    REQUIRE(grid.size() == 6);
    std::vector<int64_t> seqlens;
    for (const Problem& p : grid) {
      seqlens.push_back(p.seqlen_q);
      CHECK(p.seqlen_k == p.seqlen_q);
      CHECK(p.batch * p.seqlen_q == 16384);
      CHECK(p.heads * p.head_dim == 2048);
      CHECK(p.kv_heads == p.heads);
      CHECK(p.causal);
      CHECK(p.head_dim == d);
    }
    CHECK(seqlens == std::vector<int64_t>{512, 1024, 2048, 4096, 8192, 16384});
  }
}

TEST_CASE("build_problems: dtype x hdim x causal x seqlen and the one-shape options", "[cpu][bench]") {
  std::vector<Problem> ps = build_problems(parse_ok({"--dtype", "fp16,bf16", "--hdim", "64,256"}));
  REQUIRE(ps.size() == 2 * 2 * 2 * 6);
  CHECK(ps.front().dtype == DType::F16);
  CHECK(ps.front().head_dim == 64);
  CHECK_FALSE(ps.front().causal);
  CHECK(ps.front().seqlen_q == 512);
  CHECK(ps[6].causal);
  CHECK(ps.back().dtype == DType::BF16);
  CHECK(ps.back().head_dim == 256);
  CHECK(ps.back().seqlen_q == 16384);

  ps = build_problems(parse_ok({"--hdim", "128", "--causal", "1", "--seqlen-q", "1000",
                                "--seqlen-k", "3000", "--batch", "3", "--heads", "12",
                                "--kv-heads", "4"}));
  REQUIRE(ps.size() == 1);
  CHECK(ps[0].seqlen_q == 1000);
  CHECK(ps[0].seqlen_k == 3000);
  CHECK(ps[0].batch == 3);
  CHECK(ps[0].heads == 12);
  CHECK(ps[0].kv_heads == 4);

  ps = build_problems(parse_ok({"--hdim", "64", "--causal", "0", "--seqlen", "3000,32k"}));
  REQUIRE(ps.size() == 2);
  CHECK(ps[0].batch == 16384 / 3000);
  CHECK(ps[1].batch == 1);  // never below 1
  CHECK(ps[1].seqlen_q == 32768);

  ps = build_problems(parse_ok({"--ablation"}));
  REQUIRE(ps.size() == 1);
  CHECK(ps[0].dtype == DType::F16);
  CHECK(ps[0].batch == 4);
  CHECK(ps[0].seqlen_q == 8448);
  CHECK(ps[0].seqlen_k == 8448);
  CHECK(ps[0].heads == 16);
  CHECK(ps[0].head_dim == 128);
  CHECK_FALSE(ps[0].causal);
}

TEST_CASE("FLOPs follow the paper's formula", "[cpu][bench]") {
  Problem p;
  p.batch = 4;
  p.heads = 16;
  p.kv_heads = 4;  // GQA does not change the work
  p.head_dim = 128;
  p.seqlen_q = p.seqlen_k = 8448;
  const double full = 4.0 * 4 * 16 * 8448.0 * 8448.0 * 128;
  CHECK(forward_flops(p) == full);
  p.causal = true;
  CHECK(forward_flops(p) == full / 2);  // the paper halves, it does not count S(S+1)/2

  p.seqlen_q = 1000;
  p.seqlen_k = 3000;
  CHECK(forward_flops(p) == 4.0 * 128 * 4 * 16 * static_cast<double>(brute_force_pairs(1000, 3000)));
  p.causal = false;
  CHECK(forward_flops(p) == 4.0 * 4 * 16 * 1000.0 * 3000.0 * 128);

  CHECK(tflops(1e12, 1000.0) == Approx(1.0));
  CHECK(tflops(2e12, 1.0) == Approx(2000.0));
}

TEST_CASE("backward FLOPs: 2.5x the forward's, fwdbwd 3.5x (the paper's 5 GEMMs to 2)", "[cpu][bench]") {
  Problem p = paper_grid(DType::BF16, 128, false)[4];  // B=2, H=16, S=8192
  const double forward = 4.0 * 2 * 16 * 8192.0 * 8192.0 * 128;
  CHECK(direction_flops(p, Direction::Fwd) == forward);
  CHECK(direction_flops(p, Direction::Bwd) == 2.5 * forward);
  CHECK(direction_flops(p, Direction::FwdBwd) == 3.5 * forward);
  p.causal = true;  // halved like the forward's
  CHECK(direction_flops(p, Direction::Bwd) == 2.5 * forward / 2);
  CHECK(direction_flops(p, Direction::FwdBwd) == 3.5 * forward / 2);
  p.seqlen_q = 1000;
  p.seqlen_k = 3000;  // causal with Sq != Sk: the unmasked pairs, x 2.5
  CHECK(direction_flops(p, Direction::Bwd) ==
        2.5 * 4.0 * 128 * 2 * 16 * static_cast<double>(brute_force_pairs(1000, 3000)));
  // 1 ms of a bwd row of the 16k d64 causal problem (B=1, H=32):
  Problem q = paper_grid(DType::BF16, 64, true)[5];
  CHECK(tflops(direction_flops(q, Direction::Bwd), 1.0) ==
        Approx(2.5 * 4.0 * 32 * 16384.0 * 16384.0 * 64 / 2 / 1e9));
}

TEST_CASE("causal pairs match brute-force counting", "[cpu][bench]") {
  for (int64_t sq : {1, 2, 3, 7, 64, 127, 300})
    for (int64_t sk : {1, 2, 5, 7, 64, 129, 300}) {
      INFO("Sq=" << sq << " Sk=" << sk);
      CHECK(causal_pairs(sq, sk) == brute_force_pairs(sq, sk));
    }
  CHECK(causal_pairs(16384, 16384) == 16384LL * 16385 / 2);
  CHECK(causal_pairs(5, 2) == 3);  // rows 0-2 see nothing, row 3 sees 1 key, row 4 sees 2
}

TEST_CASE("input sets: >= 3 x L2, capped by memory", "[cpu][bench]") {
  const size_t l2 = 50u << 20;
  CHECK(buffer_sets(100u << 20, l2, size_t{40} << 30) == 2);   // 200 MiB >= 150 MiB
  CHECK(buffer_sets(150u << 20, l2, size_t{40} << 30) == 1);   // exactly 3 x L2
  // Small problems too: 150 sets for 40 launches, so that the sets the launches read were
  // pushed out of L2 by the filling of the others (sets are filled in order).
  CHECK(buffer_sets(1u << 20, l2, size_t{40} << 30) == 150);
  CHECK(buffer_sets(1u << 20, l2, 10u << 20) == 10);           // no more than fit
  CHECK(buffer_sets(1u << 30, l2, 512u << 20) == 0);           // not even one fits
  for (size_t bytes : {size_t{1000}, size_t{7} << 20, size_t{33} << 20}) {
    const int sets = buffer_sets(bytes, l2, size_t{80} << 30);
    CHECK(static_cast<size_t>(sets) * bytes >= 3 * l2);
    CHECK(static_cast<size_t>(sets - 1) * bytes < 3 * l2);
  }
}

TEST_CASE("the variant column says a kernel's options in the registry's words", "[cpu][bench]") {
  CHECK(kernel_variant("fa3_fwd_f16_d128_m128_n128_s2_w2") == "loop=sequential, producer=warpgroup");
  CHECK(kernel_variant("fa3_fwd_f16_d128_m128_n128_s2_w2_causal") ==
        "loop=sequential, producer=warpgroup");
  CHECK(kernel_variant("fa3_fwd_f16_d128_m128_n128_s2_w2_ov_pp") ==
        "loop=pipelined, pingpong, producer=warpgroup");
  CHECK(kernel_variant("fa3_fwd_f16_d128_m128_n128_s2_w2_ov_nows") ==
        "loop=pipelined, producer=inline_consumer");
  CHECK(kernel_variant("fa3_fwd_f16_d128_m128_n64_s2_w2_ov3_pp").find("loop=three_stage") == 0);
  CHECK(kernel_variant("fa3_fwd_f16_d128_m128_n128_s2_w2_ov_b2_pp").find("loop=b2_order") == 0);
  CHECK(kernel_variant("fa3_fwd_f16_d128_m128_n112_s2_w2_ov_p2_pp_ps") ==
        "loop=double_p, pingpong, tiles=persistent, producer=warpgroup");
  CHECK(kernel_variant("fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_cr_im_pp_ps_xt_qw_dy_qr_ef_el") ==
        "loop=pipelined, row_max=lazy_int_max, pingpong, tiles=cross_tile_q_warp, "
        "dynamic_schedule, q_in_registers, evict_first_q_o, evict_last_kv, producer=warpgroup");
  CHECK(kernel_variant("fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_pp_c2").find("cluster_m=2") !=
        std::string::npos);
  // A name the registry rejects says why, whatever the reason.
  CHECK(kernel_variant("fa3_fwd_f16_d128_m128_n128_s2_w2_zz").rfind("not a forward kernel name: ", 0) == 0);
  CHECK(kernel_variant("fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_cr_ls_pp") ==
        "loop=pipelined, row_max=lazy, row_sum_mma, pingpong, producer=warpgroup");
}

// ---- statistics ---------------------------------------------------------------------------

TEST_CASE("median and percentiles interpolate between ranks", "[cpu][bench]") {
  CHECK(percentile({1, 2, 3, 4}, 0.5) == Approx(2.5));
  CHECK(percentile({4, 1, 3, 2, 5}, 0.5) == Approx(3));  // unsorted input
  std::vector<double> eleven;
  for (int i = 1; i <= 11; ++i) eleven.push_back(i);
  CHECK(percentile(eleven, 0.1) == Approx(2));
  CHECK(percentile(eleven, 0.9) == Approx(10));
  CHECK(percentile(eleven, 0.0) == Approx(1));
  CHECK(percentile(eleven, 1.0) == Approx(11));
  CHECK(percentile({10, 20}, 0.1) == Approx(11));
  CHECK(percentile({7}, 0.9) == Approx(7));
  CHECK(percentile({}, 0.5) == 0);
  const TimingStats t = summarize({3, 1, 2, 5, 4});
  CHECK(t.median_ms == Approx(3));
  CHECK(t.p10_ms == Approx(1.4));
  CHECK(t.p90_ms == Approx(4.6));
  CHECK(t.samples == 5);
}

TEST_CASE("timing rounds: the median of the rounds' medians, percentiles over all samples",
          "[cpu][bench]") {
  // One slow round (a GPU moment) does not move the figure; pooled samples would.
  const TimingStats t = summarize_rounds({{1.0, 1.1, 1.2}, {2.0, 2.1, 2.2}, {1.05, 1.15, 1.25}});
  CHECK(t.median_ms == Approx(1.15));
  CHECK(summarize({1.0, 1.1, 1.2, 2.0, 2.1, 2.2, 1.05, 1.15, 1.25}).median_ms == Approx(1.2));
  CHECK(t.samples == 9);
  CHECK(t.p10_ms == Approx(1.04));
  CHECK(t.p90_ms == Approx(2.12));
  // One round is summarize; an empty round (a kernel that failed in it) counts for nothing.
  const TimingStats one = summarize_rounds({{3, 1, 2, 5, 4}, {}});
  CHECK(one.median_ms == Approx(3));
  CHECK(one.samples == 5);
  CHECK(summarize_rounds({}).samples == 0);
}

// ---- inputs and --check -------------------------------------------------------------------

TEST_CASE("inputs are normal(0,1) 16-bit values, never zero, reproducible", "[cpu][bench]") {
  for (DType dtype : {DType::F16, DType::BF16}) {
    const size_t n = 3'000'000;  // spans several independently seeded chunks
    const std::vector<uint16_t> bits = random_normal_16bit(n, dtype, 7);
    const std::vector<float> x = to_float(bits.data(), n, dtype);
    double sum = 0, sum_sq = 0;
    size_t zeros = 0, non_finite = 0;
    for (float v : x) {
      sum += v;
      sum_sq += double(v) * v;
      zeros += v == 0.0f;
      non_finite += !std::isfinite(v);
    }
    CHECK(zeros == 0);
    CHECK(non_finite == 0);
    CHECK(std::fabs(sum / n) < 0.01);
    CHECK(std::sqrt(sum_sq / n) == Approx(1.0).epsilon(0.01));
    const std::vector<uint16_t> shorter = random_normal_16bit(1'500'000, dtype, 7);
    CHECK(std::equal(shorter.begin(), shorter.end(), bits.begin()));
    CHECK(random_normal_16bit(1000, dtype, 8) != std::vector<uint16_t>(bits.begin(), bits.begin() + 1000));
  }
}

TEST_CASE("--check samples every row of small problems, 512 spread rows of large ones", "[cpu][bench]") {
  Problem small;
  small.batch = 2;
  small.heads = small.kv_heads = 4;
  small.seqlen_q = small.seqlen_k = 512;  // 4096 rows: all of them
  CHECK(sample_rows(small).size() == 4096);

  Problem large = paper_grid(DType::BF16, 128, true)[3];  // B=4, H=16, S=4096
  const std::vector<RowIndex> rows = sample_rows(large);
  CHECK(rows.size() <= static_cast<size_t>(kSampledRows));
  CHECK(rows.size() > static_cast<size_t>(kSampledRows) * 9 / 10);
  CHECK(std::is_sorted(rows.begin(), rows.end()));
  std::set<int64_t> batches, heads;
  int first = 0, last = 0;
  for (const RowIndex& r : rows) {
    CHECK(r.batch >= 0);
    CHECK(r.batch < large.batch);
    CHECK(r.head >= 0);
    CHECK(r.head < large.heads);
    CHECK(r.row >= 0);
    CHECK(r.row < large.seqlen_q);
    batches.insert(r.batch);
    heads.insert(r.head);
    first += r.row == 0;
    last += r.row == large.seqlen_q - 1;
  }
  CHECK(batches.size() == static_cast<size_t>(large.batch));
  CHECK(heads.size() == static_cast<size_t>(large.heads));
  CHECK(first > 1);
  CHECK(last > 1);

  Problem one_long;  // B*H = 1: the rows are spread over positions only
  one_long.seqlen_q = one_long.seqlen_k = 100000;
  CHECK(sample_rows(one_long).size() > 350);  // the boundary rows coincide

  // Decoding shapes: every position is a sequence's first or last row, and the rows must
  // still reach every head and far more than 64 batches (they once took heads 0 only).
  for (int64_t seqlen_q : {1, 2}) {
    Problem decode;
    decode.batch = 16384;
    decode.heads = 32;
    decode.kv_heads = 8;
    decode.seqlen_q = seqlen_q;
    decode.seqlen_k = 16384;
    std::set<int64_t> decode_batches, decode_heads;
    for (const RowIndex& r : sample_rows(decode)) {
      CHECK(r.batch < decode.batch);
      CHECK(r.head < decode.heads);
      CHECK(r.row < seqlen_q);
      decode_batches.insert(r.batch);
      decode_heads.insert(r.head);
    }
    CHECK(decode_heads.size() == 32);
    CHECK(decode_batches.size() > 300);
  }
}

TEST_CASE("error measure and rule", "[cpu][bench]") {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  CHECK(abs_error(1.5, 1.0) == 0.5);
  CHECK(abs_error(-inf, -inf) == 0);  // a row with nothing to attend
  CHECK(abs_error(0.0, -inf) == inf);
  CHECK(abs_error(-inf, 0.0) == inf);
  CHECK(abs_error(nan, 0.0) == inf);
  CHECK(within_error_rule(2e-3, 1e-3));
  CHECK(within_error_rule(2e-3 + 5e-6, 1e-3));
  CHECK_FALSE(within_error_rule(2.1e-3, 1e-3));
  CHECK(within_error_rule(1e-5, 0));
  CHECK_FALSE(within_error_rule(nan, 1.0));
  CHECK_FALSE(within_error_rule(inf, 1.0));
  CHECK_FALSE(within_error_rule(1e-3, inf));  // a plain error that bounds nothing
  CHECK_FALSE(within_error_rule(inf, inf));
  CHECK_FALSE(within_error_rule(1e-3, nan));
}

TEST_CASE("--check passes plain attention's output and fails wrong or unwritten output", "[cpu][bench]") {
  for (DType dtype : {DType::F16, DType::BF16}) {
    Problem p;  // causal with Sq > Sk: the first rows see no key (O = 0, LSE = -inf)
    p.dtype = dtype;
    p.batch = 2;
    p.heads = 4;
    p.kv_heads = 2;
    p.head_dim = 64;
    p.seqlen_q = 9;
    p.seqlen_k = 6;
    p.causal = true;
    const bool is_bf16 = dtype == DType::BF16;
    const size_t nq = static_cast<size_t>(p.q_elements()), nk = static_cast<size_t>(p.kv_elements());
    const std::vector<uint16_t> bits = random_normal_16bit(nq + 2 * nk, dtype, 11);
    const std::vector<float> q = to_float(bits.data(), nq, dtype);
    const std::vector<float> k = to_float(bits.data() + nq, nk, dtype);
    const std::vector<float> v = to_float(bits.data() + nq + nk, nk, dtype);
    const Reference ref = compute_reference(p, q.data(), k.data(), v.data());
    REQUIRE(ref.rows.size() == static_cast<size_t>(p.query_rows()));
    CHECK(ref.plain_o_error > 0);

    // "Ours" = the plain attention, LSE = the reference's: within the rule.
    std::vector<uint16_t> o(nq);
    std::vector<float> lse(static_cast<size_t>(p.query_rows()));
    const fa3test::AttentionShape shape = attention_shape(p);
    for (int64_t b = 0; b < p.batch; ++b)
      for (int64_t h = 0; h < p.heads; ++h)
        for (int64_t i = 0; i < p.seqlen_q; ++i) {
          std::vector<float> row(64);
          float plain_lse = 0;
          fa3test::plain_row(shape, q.data(), k.data(), v.data(), b, h, i, is_bf16, row.data(),
                             &plain_lse);
          for (int c = 0; c < 64; ++c)
            o[static_cast<size_t>(((b * p.seqlen_q + i) * p.heads + h) * 64 + c)] =
                fa3test::to_16bit(row[c], is_bf16);
          double ref_o[64], ref_lse = 0;
          fa3test::reference_row(shape, q.data(), k.data(), v.data(), b, h, i, ref_o, &ref_lse);
          lse[static_cast<size_t>((b * p.heads + h) * p.seqlen_q + i)] = static_cast<float>(ref_lse);
        }
    CheckResult c = compare_with_reference(p, ref, o.data(), lse.data());
    CHECK(c.pass);
    CHECK(c.has_lse);
    CHECK(c.o_error == Approx(ref.plain_o_error));
    CHECK(c.lse_error < 1e-5);
    CHECK(compare_with_reference(p, ref, o.data(), nullptr).pass);  // the baseline: no LSE

    std::vector<uint16_t> wrong = o;
    wrong[wrong.size() / 2] ^= 0x4000;  // one value far off
    CHECK_FALSE(compare_with_reference(p, ref, wrong.data(), lse.data()).pass);

    std::vector<uint16_t> unwritten = o;  // the NaN poison left in one value
    unwritten.back() = 0xFFFF;
    c = compare_with_reference(p, ref, unwritten.data(), lse.data());
    CHECK_FALSE(c.pass);
    CHECK(std::isinf(c.o_error));

    std::vector<float> bad_lse = lse;
    bad_lse[0] = 0.0f;  // row 0 sees no key: its LSE must be -inf
    CHECK_FALSE(compare_with_reference(p, ref, o.data(), bad_lse.data()).pass);
  }
}

// ---- the backward check -------------------------------------------------------------------

namespace {

std::vector<uint16_t> to_16bit(const std::vector<double>& x, bool is_bf16) {
  std::vector<uint16_t> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = fa3test::to_16bit(static_cast<float>(x[i]), is_bf16);
  return out;
}
std::vector<uint16_t> to_16bit(const std::vector<float>& x, bool is_bf16) {
  std::vector<uint16_t> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = fa3test::to_16bit(x[i], is_bf16);
  return out;
}

// Q, K, V and dO of p (the bench's inputs) and the whole float64 backward.
struct BackwardCase {
  std::vector<float> q, k, v, dout;
  std::vector<double> dq, dk, dv;
  explicit BackwardCase(const Problem& p, uint64_t seed) {
    const size_t nq = static_cast<size_t>(p.q_elements()), nk = static_cast<size_t>(p.kv_elements());
    const std::vector<uint16_t> bits = random_normal_16bit(2 * nq + 2 * nk, p.dtype, seed);
    q = to_float(bits.data(), nq, p.dtype);
    k = to_float(bits.data() + nq, nk, p.dtype);
    v = to_float(bits.data() + nq + nk, nk, p.dtype);
    dout = to_float(bits.data() + nq + 2 * nk, nq, p.dtype);
    fa3test::reference_backward(attention_shape(p), q.data(), k.data(), v.data(), dout.data(), &dq,
                                &dk, &dv);
  }
  BackwardReference reference(const Problem& p) const {
    return compute_backward_reference(p, q.data(), k.data(), v.data(), dout.data());
  }
};

}  // namespace

TEST_CASE("backward check samples whole groups, every position of short sequences", "[cpu][bench]") {
  Problem small;  // GQA, causal with Sq > Sk
  small.batch = 2;
  small.heads = 4;
  small.kv_heads = 2;
  small.head_dim = 64;
  small.seqlen_q = 9;
  small.seqlen_k = 6;
  small.causal = true;
  BackwardSample s = sample_backward(small);
  CHECK(s.groups.size() == 4);  // all (batch, K/V head) pairs
  CHECK(s.query_rows == std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8});
  CHECK(s.key_rows == std::vector<int64_t>{0, 1, 2, 3, 4, 5});

  // 16k d128: one group costs 16k x 16k x 128, over the budget: one group, 128 spread positions.
  const Problem long_one = paper_grid(DType::BF16, 128, false)[5];
  s = sample_backward(long_one);
  REQUIRE(s.groups.size() == 1);
  CHECK(s.groups[0] == BackwardSample::Group{0, 0});
  CHECK(s.query_rows.size() == static_cast<size_t>(kBackwardSampledPositions));
  CHECK(s.query_rows.front() == 0);
  CHECK(s.query_rows.back() == long_one.seqlen_q - 1);
  CHECK(std::is_sorted(s.query_rows.begin(), s.query_rows.end()));
  CHECK(std::adjacent_find(s.query_rows.begin(), s.query_rows.end()) == s.query_rows.end());
  CHECK(s.key_rows == s.query_rows);

  // 2k d64 causal (B=8, H=32): cheap groups, kBackwardMaxGroups of them from first to last.
  const Problem many = paper_grid(DType::BF16, 64, true)[2];
  s = sample_backward(many);
  REQUIRE(s.groups.size() == static_cast<size_t>(kBackwardMaxGroups));
  CHECK(s.groups.front() == BackwardSample::Group{0, 0});
  CHECK(s.groups.back() == BackwardSample::Group{many.batch - 1, many.kv_heads - 1});
  for (size_t i = 1; i < s.groups.size(); ++i)
    CHECK(std::make_pair(s.groups[i - 1].batch, s.groups[i - 1].kv_head) <
          std::make_pair(s.groups[i].batch, s.groups[i].kv_head));

  Problem mqa = long_one;  // 16 query heads per K/V head: a group costs 16x, still one group
  mqa.kv_heads = 1;
  CHECK(sample_backward(mqa).groups.size() == 1);
}

TEST_CASE("backward check: the plain backward passes, wrong or unwritten gradients fail (GQA, causal)",
          "[cpu][bench]") {
  for (DType dtype : {DType::F16, DType::BF16}) {
    Problem p;  // causal with Sq > Sk: rows 0-2 see no key (dQ = 0, nothing added to dK, dV)
    p.dtype = dtype;
    p.batch = 2;
    p.heads = 4;
    p.kv_heads = 2;
    p.head_dim = 64;
    p.seqlen_q = 9;
    p.seqlen_k = 6;
    p.causal = true;
    INFO(problem_label(p));
    const bool is_bf16 = dtype == DType::BF16;
    const BackwardCase inputs(p, 17);
    const BackwardReference ref = inputs.reference(p);
    REQUIRE(ref.dq.size() == inputs.dq.size());  // every row of every group: the whole problem
    CHECK(ref.plain_dq_error > 0);
    CHECK(ref.plain_dk_error > 0);
    CHECK(ref.plain_dv_error > 0);

    // Ours = the float64 gradients rounded to 16 bits: within the rule.
    const std::vector<uint16_t> dq = to_16bit(inputs.dq, is_bf16), dk = to_16bit(inputs.dk, is_bf16),
                                dv = to_16bit(inputs.dv, is_bf16);
    BackwardCheckResult c = compare_backward(p, ref, dq.data(), dk.data(), dv.data());
    CHECK(c.pass);
    CHECK(c.failure.empty());
    CHECK(c.plain_dk_error == ref.plain_dk_error);

    // Ours = the plain same-precision backward: its error is the plain error, within the rule.
    std::vector<float> plain_dq, plain_dk, plain_dv;
    fa3test::plain_backward(attention_shape(p), inputs.q.data(), inputs.k.data(), inputs.v.data(),
                            inputs.dout.data(), is_bf16, &plain_dq, &plain_dk, &plain_dv);
    const std::vector<uint16_t> pq = to_16bit(plain_dq, is_bf16), pk = to_16bit(plain_dk, is_bf16),
                                pv = to_16bit(plain_dv, is_bf16);
    c = compare_backward(p, ref, pq.data(), pk.data(), pv.data());
    CHECK(c.pass);
    CHECK(c.dq_error == Approx(ref.plain_dq_error));
    CHECK(c.dk_error == Approx(ref.plain_dk_error));
    CHECK(c.dv_error == Approx(ref.plain_dv_error));

    std::vector<uint16_t> wrong = dk;
    wrong[wrong.size() / 2] ^= 0x4000;  // one value far off
    c = compare_backward(p, ref, dq.data(), wrong.data(), dv.data());
    CHECK_FALSE(c.pass);
    CHECK(c.failure.rfind("dk error ", 0) == 0);
    CHECK(c.failure.find("dq") == std::string::npos);

    std::vector<uint16_t> unwritten = dv;  // the NaN poison left in one value
    unwritten.back() = 0xFFFF;
    c = compare_backward(p, ref, dq.data(), dk.data(), unwritten.data());
    CHECK_FALSE(c.pass);
    CHECK(std::isinf(c.dv_error));

    std::vector<uint16_t> masked = dq;  // row 0 sees no key: its dQ must be 0
    masked[0] = fa3test::to_16bit(0.5f, is_bf16);
    c = compare_backward(p, ref, masked.data(), dk.data(), dv.data());
    CHECK_FALSE(c.pass);
    CHECK(c.dq_error == 0.5);

    // GQA: dK of a K/V head is the sum over its query heads; one head's share is not it.
    BackwardCase one_head = inputs;
    std::vector<float> dout_one = inputs.dout;
    for (size_t i = 0; i < dout_one.size(); ++i)
      if ((i / 64) % 4 % 2 == 1) dout_one[i] = 0;  // heads 1 and 3: no gradient flows
    fa3test::reference_backward(attention_shape(p), inputs.q.data(), inputs.k.data(),
                                inputs.v.data(), dout_one.data(), &one_head.dq, &one_head.dk,
                                &one_head.dv);
    const std::vector<uint16_t> share = to_16bit(one_head.dv, is_bf16);
    CHECK_FALSE(compare_backward(p, ref, dq.data(), dk.data(), share.data()).pass);
  }
}

TEST_CASE("backward check of a sampled problem reads the sampled rows at their place", "[cpu][bench]") {
  Problem p;  // 6 groups, 4 checked; 300 positions, 128 checked
  p.dtype = DType::BF16;
  p.batch = 3;
  p.heads = 4;
  p.kv_heads = 2;
  p.head_dim = 64;
  p.seqlen_q = p.seqlen_k = 300;
  const BackwardCase inputs(p, 23);
  const BackwardReference ref = inputs.reference(p);
  const BackwardSample& s = ref.sample;
  REQUIRE(s.groups.size() == 4);
  REQUIRE(s.query_rows.size() == static_cast<size_t>(kBackwardSampledPositions));
  // The sampled reference values are the whole reference's at their (batch, seqlen, head).
  const int64_t group = p.heads / p.kv_heads, nq = static_cast<int64_t>(s.query_rows.size());
  const int64_t nk = static_cast<int64_t>(s.key_rows.size());
  for (size_t gi = 0; gi < s.groups.size(); ++gi) {
    const int64_t b = s.groups[gi].batch, hk = s.groups[gi].kv_head;
    for (int64_t hh = 0; hh < group; ++hh)
      for (int64_t r = 0; r < nq; r += 37) {
        const int64_t i = s.query_rows[static_cast<size_t>(r)], h = hk * group + hh;
        for (int64_t c = 0; c < 64; c += 9)
          CHECK(ref.dq[static_cast<size_t>(((gi * group + hh) * nq + r) * 64 + c)] ==
                inputs.dq[static_cast<size_t>(((b * 300 + i) * p.heads + h) * 64 + c)]);
      }
    for (int64_t r = 0; r < nk; r += 41) {
      const int64_t j = s.key_rows[static_cast<size_t>(r)];
      for (int64_t c = 0; c < 64; c += 9) {
        const size_t at = static_cast<size_t>(((b * 300 + j) * p.kv_heads + hk) * 64 + c);
        CHECK(ref.dk[static_cast<size_t>((gi * nk + r) * 64 + c)] == inputs.dk[at]);
        CHECK(ref.dv[static_cast<size_t>((gi * nk + r) * 64 + c)] == inputs.dv[at]);
      }
    }
  }
  const std::vector<uint16_t> dq = to_16bit(inputs.dq, true), dk = to_16bit(inputs.dk, true),
                              dv = to_16bit(inputs.dv, true);
  CHECK(compare_backward(p, ref, dq.data(), dk.data(), dv.data()).pass);
  // A wrong value in a sampled dK row fails; one outside the sample is not seen.
  const int64_t b = s.groups[1].batch, hk = s.groups[1].kv_head, j = s.key_rows[5];
  std::vector<uint16_t> wrong = dk;
  wrong[static_cast<size_t>(((b * 300 + j) * p.kv_heads + hk) * 64 + 3)] ^= 0x4000;
  CHECK_FALSE(compare_backward(p, ref, dq.data(), wrong.data(), dv.data()).pass);
  std::vector<uint16_t> unseen = dq;
  const int64_t not_sampled = s.query_rows[1] - 1;  // between positions 0 and ~2
  REQUIRE(not_sampled > 0);
  unseen[static_cast<size_t>(((b * 300 + not_sampled) * p.heads + hk * group) * 64)] ^= 0x4000;
  CHECK(compare_backward(p, ref, unseen.data(), dk.data(), dv.data()).pass);
}

// ---- the standard-attention baseline's layout ---------------------------------------------

namespace {

// cublasGemmStridedBatchedEx's definition, on the host: fp32 accumulation, 16-bit output.
void cpu_gemm(const StridedBatchedGemm& g, bool is_bf16) {
  for (int e = 0; e < g.batch; ++e) {
    const uint16_t* a = static_cast<const uint16_t*>(g.a) + e * g.stride_a;
    const uint16_t* b = static_cast<const uint16_t*>(g.b) + e * g.stride_b;
    uint16_t* c = static_cast<uint16_t*>(g.c) + e * g.stride_c;
    for (int i = 0; i < g.m; ++i)
      for (int j = 0; j < g.n; ++j) {
        float acc = 0;
        for (int l = 0; l < g.k; ++l) {
          const uint16_t op_a = g.transpose_a ? a[l + static_cast<int64_t>(i) * g.lda]
                                              : a[i + static_cast<int64_t>(l) * g.lda];
          acc += fa3test::from_16bit(op_a, is_bf16) *
                 fa3test::from_16bit(b[l + static_cast<int64_t>(j) * g.ldb], is_bf16);
        }
        c[i + static_cast<int64_t>(j) * g.ldc] = fa3test::to_16bit(acc, is_bf16);
      }
  }
}

// What softmax_kernel.cu computes, on the host: P = softmax(scale * S) per row, causal
// bottom-right aligned, in fp32, rounded to 16 bits.
void cpu_softmax(const Problem& p, const std::vector<uint16_t>& s, std::vector<uint16_t>& probs) {
  const bool is_bf16 = p.dtype == DType::BF16;
  const double scale = 1.0 / std::sqrt(static_cast<double>(p.head_dim));
  for (int64_t r = 0; r < p.query_rows(); ++r) {
    const int64_t i = r % p.seqlen_q;
    const int64_t visible =
        p.causal ? std::min(p.seqlen_k, std::max<int64_t>(0, i + p.seqlen_k - p.seqlen_q + 1))
                 : p.seqlen_k;
    float max_score = -std::numeric_limits<float>::infinity(), sum = 0;
    for (int64_t j = 0; j < visible; ++j)
      max_score = std::max(max_score, float(fa3test::from_16bit(s[r * p.seqlen_k + j], is_bf16) * scale));
    for (int64_t j = 0; j < visible; ++j)
      sum += std::exp(float(fa3test::from_16bit(s[r * p.seqlen_k + j], is_bf16) * scale) - max_score);
    for (int64_t j = 0; j < p.seqlen_k; ++j) {
      const float x = float(fa3test::from_16bit(s[r * p.seqlen_k + j], is_bf16) * scale);
      probs[r * p.seqlen_k + j] = fa3test::to_16bit(j < visible ? std::exp(x - max_score) / sum : 0.f, is_bf16);
    }
  }
}

}  // namespace

TEST_CASE("the baseline's GEMM descriptors compute standard attention (GQA, causal)", "[cpu][bench]") {
  struct Shape { int64_t batch, heads, kv_heads, sq, sk; bool causal; DType dtype; };
  for (const Shape& shape : {Shape{2, 4, 2, 9, 6, true, DType::BF16}, Shape{1, 6, 6, 5, 11, true, DType::F16},
                             Shape{2, 4, 1, 7, 7, false, DType::F16}, Shape{3, 2, 2, 4, 3, false, DType::BF16}}) {
    Problem p;
    p.batch = shape.batch;
    p.heads = shape.heads;
    p.kv_heads = shape.kv_heads;
    p.head_dim = 64;
    p.seqlen_q = shape.sq;
    p.seqlen_k = shape.sk;
    p.causal = shape.causal;
    p.dtype = shape.dtype;
    INFO(problem_label(p));
    const bool is_bf16 = p.dtype == DType::BF16;
    const size_t nq = static_cast<size_t>(p.q_elements()), nk = static_cast<size_t>(p.kv_elements());
    const std::vector<uint16_t> bits = random_normal_16bit(nq + 2 * nk, p.dtype, 3);
    std::vector<uint16_t> o(nq, 0xFFFF);  // NaN: every value must be written
    std::vector<uint16_t> scores(static_cast<size_t>(p.query_rows() * p.seqlen_k), 0xFFFF);
    std::vector<uint16_t> probs(scores.size(), 0xFFFF);
    const AttentionBuffers x{bits.data(), bits.data() + nq, bits.data() + nq + nk, o.data()};
    CHECK(head_groups(p).size() == static_cast<size_t>(p.batch * (p.heads / p.kv_heads)));
    for (const HeadGroup& hg : head_groups(p)) cpu_gemm(scores_gemm(p, x, scores.data(), hg), is_bf16);
    cpu_softmax(p, scores, probs);
    for (const HeadGroup& hg : head_groups(p)) cpu_gemm(output_gemm(p, x, probs.data(), hg), is_bf16);

    const std::vector<float> q = to_float(bits.data(), nq, p.dtype);
    const std::vector<float> k = to_float(bits.data() + nq, nk, p.dtype);
    const std::vector<float> v = to_float(bits.data() + nq + nk, nk, p.dtype);
    const Reference ref = compute_reference(p, q.data(), k.data(), v.data());
    const CheckResult c = compare_with_reference(p, ref, o.data(), nullptr);
    CHECK(c.pass);
    CHECK(c.o_error <= ref.plain_o_error * 1.5 + 1e-6);  // it is the plain attention
  }
}

// ---- report -------------------------------------------------------------------------------

namespace {

ResultRow sample_result_row() {
  ResultRow row;
  row.problem = paper_grid(DType::BF16, 128, true)[3];
  row.config = "fa3_fwd_bf16_d128_m128_n128_s2_w2_causal";
  row.sets = 3;
  row.timing = summarize({1.0, 1.1, 0.9});
  CheckResult c;
  c.o_error = 1e-3;
  c.plain_o_error = 2e-3;
  c.lse_error = 1e-6;
  c.plain_lse_error = 1e-2;
  c.has_lse = true;
  c.pass = true;
  row.check = c;
  row.baseline.state = BaselineResult::State::Timed;
  row.baseline.timing = summarize({4.0});
  return row;
}

}  // namespace

TEST_CASE("table, CSV and JSON carry the same columns", "[cpu][bench]") {
  ReportLayout layout;
  layout.check = layout.baseline = true;
  layout.config_width = 40;
  ResultRow ok = sample_result_row();
  ResultRow skipped = ok;
  skipped.baseline.state = BaselineResult::State::Skipped;
  skipped.baseline.reason = "needs 9.0 GiB";
  ResultRow failed = ok;
  failed.timing.reset();
  failed.check.reset();
  failed.note = "fa3_forward: unsupported, with a comma";
  CHECK(row_succeeded(ok));
  CHECK(row_succeeded(skipped));
  CHECK_FALSE(row_succeeded(failed));

  const std::vector<Column> columns = report_columns(layout);
  std::vector<std::string> names;
  for (const Column& c : columns) names.push_back(c.name);
  for (const char* expected : {"dir", "dtype", "hdim", "causal", "batch", "heads", "kv_heads", "seqlen_q",
                               "seqlen_k", "config", "sets", "ms", "p10", "p90", "TFLOPS", "err",
                               "plain_err", "lse_err", "check", "std_ms", "std_TFLOPS", "speedup",
                               "std_err", "std_check", "note"})
    CHECK(std::find(names.begin(), names.end(), expected) != names.end());

  const std::string line = table_line(ok, layout);
  // B=4 H=16 S=4096 d128 causal: 4*4*16*4096^2*128/2 flops in 1 ms.
  CHECK(line.find(format_number("%.1f", tflops(forward_flops(ok.problem), 1.0))) != std::string::npos);
  CHECK(line.find("4.00x") != std::string::npos);
  CHECK(line.find("PASS") != std::string::npos);
  CHECK(table_line(skipped, layout).find("needs 9.0 GiB") != std::string::npos);
  CHECK(table_header(layout).find("std_TFLOPS") != std::string::npos);

  const std::vector<ResultRow> rows = {ok, skipped, failed};
  std::istringstream csv(csv_document(layout, rows));
  std::string header;
  std::getline(csv, header);
  CHECK(std::count(header.begin(), header.end(), ',') + 1 == static_cast<long>(columns.size()));
  int lines = 0;
  std::string first_row;
  for (std::string l; std::getline(csv, l);) {
    if (++lines == 1) first_row = l;
  }
  CHECK(lines == 3);
  // The CSV's numbers are unrounded (docs/bench.md): TFLOPS reads back as the very double.
  {
    std::vector<std::string> names_in_csv, fields;
    std::istringstream h(header), f(first_row);
    for (std::string x; std::getline(h, x, ',');) names_in_csv.push_back(x);
    for (std::string x; std::getline(f, x, ',');) fields.push_back(x);
    const size_t at = static_cast<size_t>(
        std::find(names_in_csv.begin(), names_in_csv.end(), "TFLOPS") - names_in_csv.begin());
    REQUIRE(at < fields.size());
    CHECK(std::stod(fields[at]) ==
          tflops(direction_flops(ok.problem, ok.direction), ok.timing->median_ms));
  }

  Header info = {{"gpu", "NVIDIA H100", std::nullopt}, {"sm_count", "132", 132.0}};
  const nlohmann::json doc = nlohmann::json::parse(json_document(info, layout, rows));
  CHECK(doc["header"]["gpu"] == "NVIDIA H100");
  CHECK(doc["header"]["sm_count"] == 132);
  REQUIRE(doc["rows"].size() == 3);
  for (const auto& record : doc["rows"]) CHECK(record.size() == columns.size());
  CHECK(doc["rows"][0]["ms"].get<double>() == Approx(1.0));
  CHECK(doc["rows"][0]["speedup"].get<double>() == Approx(4.0));
  CHECK(doc["rows"][0]["check"] == "PASS");
  CHECK(doc["rows"][1]["std_ms"] == "needs 9.0 GiB");
  CHECK(doc["rows"][2]["ms"].is_null());
  CHECK(doc["rows"][2]["note"] == "fa3_forward: unsupported, with a comma");
}

TEST_CASE("backward rows: the direction, its TFLOPS, the gradients' check, skipped rows", "[cpu][bench]") {
  ReportLayout layout;
  layout.backward_check = true;
  layout.config_width = 40;
  ResultRow bwd;
  bwd.problem = paper_grid(DType::BF16, 128, true)[3];
  bwd.direction = Direction::Bwd;
  bwd.config = "fa3_backward";
  bwd.sets = 2;
  bwd.timing = summarize({1.0, 1.1, 0.9});
  BackwardCheckResult c;
  c.dq_error = 1e-3;
  c.plain_dq_error = 2e-3;
  c.dk_error = 3e-3;
  c.plain_dk_error = 4e-3;
  c.dv_error = 5e-4;
  c.plain_dv_error = 6e-4;
  c.pass = true;
  bwd.backward_check = c;
  CHECK(row_succeeded(bwd));

  ResultRow failed = bwd;
  failed.backward_check->pass = false;
  failed.backward_check->failure = "dk error 9.00e-03 > 2 x plain 4.00e-03 + 1e-5";
  CHECK_FALSE(row_succeeded(failed));

  ResultRow skipped = bwd;  // head dim 256: no backward kernels yet
  skipped.problem.head_dim = 256;
  skipped.timing.reset();
  skipped.backward_check.reset();
  skipped.sets = 0;
  skipped.skipped = true;
  skipped.note = "skipped: fa3_backward_workspace_size: q->head_dim 256 is not supported";
  CHECK(row_succeeded(skipped));  // not a failure
  ResultRow not_run = skipped;
  not_run.skipped = false;
  CHECK_FALSE(row_succeeded(not_run));

  const std::vector<Column> columns = report_columns(layout);
  std::vector<std::string> names;
  for (const Column& col : columns) names.push_back(col.name);
  for (const char* expected : {"dir", "TFLOPS", "dq_err", "plain_dq_err", "dk_err", "plain_dk_err",
                               "dv_err", "plain_dv_err", "check", "note"})
    CHECK(std::find(names.begin(), names.end(), expected) != names.end());
  for (const char* absent : {"err", "lse_err", "std_ms"})
    CHECK(std::find(names.begin(), names.end(), absent) == names.end());

  const std::string line = table_line(bwd, layout);
  CHECK(line.rfind("bwd ", 0) == 0);  // the first column
  CHECK(line.find(format_number("%.1f", 2.5 * tflops(forward_flops(bwd.problem), 1.0))) !=
        std::string::npos);
  CHECK(line.find("PASS") != std::string::npos);
  CHECK(table_line(failed, layout).find("FAIL") != std::string::npos);
  CHECK(table_line(skipped, layout).find("skipped: ") != std::string::npos);
  ResultRow both = bwd;
  both.direction = Direction::FwdBwd;
  CHECK(table_line(both, layout).rfind("fwdbwd ", 0) == 0);
  CHECK(table_line(both, layout).find(format_number("%.1f", 3.5 * tflops(forward_flops(bwd.problem), 1.0))) !=
        std::string::npos);

  const nlohmann::json doc = nlohmann::json::parse(json_document({}, layout, {bwd, skipped}));
  REQUIRE(doc["rows"].size() == 2);
  for (const auto& record : doc["rows"]) CHECK(record.size() == columns.size());
  CHECK(doc["rows"][0]["dir"] == "bwd");
  CHECK(doc["rows"][0]["dk_err"].get<double>() == Approx(3e-3));
  CHECK(doc["rows"][0]["plain_dv_err"].get<double>() == Approx(6e-4));
  CHECK(doc["rows"][0]["TFLOPS"].get<double>() ==
        Approx(2.5 * tflops(forward_flops(bwd.problem), 1.0)).epsilon(1e-3));
  CHECK(doc["rows"][1]["ms"].is_null());
  CHECK(doc["rows"][1]["check"].is_null());

  // A forward row says fwd, and the forward layout has no gradient columns.
  ResultRow fwd = sample_result_row();
  ReportLayout forward_layout;
  forward_layout.check = true;
  CHECK(table_line(fwd, forward_layout).rfind("fwd ", 0) == 0);
  const std::string header = table_header(forward_layout);
  CHECK(header.rfind("dir ", 0) == 0);
  CHECK(header.find("dq_err") == std::string::npos);
}
