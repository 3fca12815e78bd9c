// Kernel names are the configs: the name grammar, its round trip, and the compiled set.
#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <initializer_list>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fa3/fa3.h"
#include "runtime/kernel_registry.h"

namespace {
// The config of a kernel name that must parse, and that fwd_kernel_name gives back unchanged.
fa3::FwdConfig round_trip(const std::string& name) {
  const auto c = fa3::parse_fwd_kernel_name(name);
  REQUIRE(c);
  CHECK(fa3::fwd_kernel_name(*c) == name);
  return *c;
}
}  // namespace

TEST_CASE("forward kernel names parse into their configs and back", "[cpu][registry]") {
  const auto c = fa3::parse_fwd_kernel_name("fa3_fwd_bf16_d128_m128_n176_s2_w2_causal");
  REQUIRE(c);
  CHECK_FALSE(c->overlap());
  CHECK_FALSE(c->pingpong);
  CHECK(c->dtype == fa3::DType::BF16);
  CHECK(c->head_dim == 128);
  CHECK(c->block_m == 128);
  CHECK(c->block_n == 176);
  CHECK(c->stages == 2);
  CHECK(c->consumer_warpgroups == 2);
  CHECK(c->causal);
  CHECK(fa3::fwd_kernel_name(*c) == "fa3_fwd_bf16_d128_m128_n176_s2_w2_causal");

  const auto pp = fa3::parse_fwd_kernel_name("fa3_fwd_f16_d64_m192_n128_s2_w3_ov_pp_causal");
  REQUIRE(pp);
  CHECK(pp->overlap());
  CHECK(pp->pingpong);
  CHECK(pp->causal);
  CHECK(pp->consumer_warpgroups == 3);
  CHECK(fa3::fwd_kernel_name(*pp) == "fa3_fwd_f16_d64_m192_n128_s2_w3_ov_pp_causal");

  const auto three = fa3::parse_fwd_kernel_name("fa3_fwd_bf16_d128_m128_n64_s2_w2_ov3_pp");
  REQUIRE(three);
  CHECK(three->overlap());
  CHECK(three->three_stage());
  CHECK(three->warp_specialized());
  CHECK(fa3::fwd_kernel_name(*three) == "fa3_fwd_bf16_d128_m128_n64_s2_w2_ov3_pp");

  const auto b2 = fa3::parse_fwd_kernel_name("fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_b2_pp_causal");
  REQUIRE(b2);
  CHECK(b2->overlap());
  CHECK(b2->b2_order());
  CHECK_FALSE(b2->double_p());
  CHECK(b2->pingpong);
  CHECK(fa3::fwd_kernel_name(*b2) == "fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_b2_pp_causal");
  CHECK_FALSE(fa3::parse_fwd_kernel_name("fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_pp")->b2_order());
  const auto cr = fa3::parse_fwd_kernel_name("fa3_fwd_f16_d256_m128_n80_s2_w2_ov_cr_pp_causal");
  REQUIRE(cr);
  CHECK(cr->conditional_rescale());
  CHECK(cr->pingpong);
  CHECK(fa3::fwd_kernel_name(*cr) == "fa3_fwd_f16_d256_m128_n80_s2_w2_ov_cr_pp_causal");
  CHECK_FALSE(fa3::parse_fwd_kernel_name("fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_pp")->conditional_rescale());
  const auto c2 = fa3::parse_fwd_kernel_name("fa3_fwd_bf16_d256_m128_n80_s2_w2_ov_cr_pp_c2");
  REQUIRE(c2);
  CHECK(c2->cluster_m == 2);
  CHECK(c2->conditional_rescale());
  CHECK(fa3::fwd_kernel_name(*c2) == "fa3_fwd_bf16_d256_m128_n80_s2_w2_ov_cr_pp_c2");
  CHECK(fa3::parse_fwd_kernel_name("fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_pp")->cluster_m == 1);
  const auto as = fa3::parse_fwd_kernel_name("fa3_fwd_bf16_d64_m192_n112_s2_w3_ov_cr_as_pp_ps_causal");
  REQUIRE(as);
  CHECK(as->ascending);
  CHECK(as->conditional_rescale());
  CHECK(as->persistent());
  CHECK(fa3::fwd_kernel_name(*as) == "fa3_fwd_bf16_d64_m192_n112_s2_w3_ov_cr_as_pp_ps_causal");
  CHECK_FALSE(fa3::parse_fwd_kernel_name("fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_pp")->ascending);
  const auto ew = fa3::parse_fwd_kernel_name("fa3_fwd_bf16_d128_m128_n176_s2_w2_ov_ew_pp_c2");
  REQUIRE(ew);
  CHECK(ew->exp_after_pv_wait);
  CHECK(ew->cluster_m == 2);
  CHECK(fa3::fwd_kernel_name(*ew) == "fa3_fwd_bf16_d128_m128_n176_s2_w2_ov_ew_pp_c2");
  const auto xt = fa3::parse_fwd_kernel_name("fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_pp_ps_xt_causal");
  REQUIRE(xt);
  CHECK(xt->cross_tile());
  CHECK(xt->persistent());
  CHECK(fa3::fwd_kernel_name(*xt) == "fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_pp_ps_xt_causal");
  CHECK_FALSE(xt->q_warp());
  const auto qw = fa3::parse_fwd_kernel_name("fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_pp_ps_xt_qw_causal");
  REQUIRE(qw);
  CHECK(qw->q_warp());
  CHECK(qw->cross_tile());
  CHECK(fa3::fwd_kernel_name(*qw) == "fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_pp_ps_xt_qw_causal");
  // Its two more barriers (tile_ready per Q buffer, draw_go) fit in the same shared memory.
  CHECK(fa3::FwdSmemLayout::of(*qw).total_bytes == fa3::FwdSmemLayout::of(*xt).total_bytes + 24);
  // Two Q buffers, O over the Q buffer of its tile.
  const fa3::FwdSmemLayout lx = fa3::FwdSmemLayout::of(*xt);
  CHECK(lx.q_buffers == 2);
  CHECK(lx.o_over_q());
  CHECK(lx.k_offset == 2 * lx.q_bytes);
  CHECK(lx.total_bytes <= fa3::kFwdSmemLimit);
  CHECK(fa3::FwdSmemLayout::of(*fa3::parse_fwd_kernel_name("fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_pp"))
            .q_buffers == 1);

  const auto hb =
      fa3::parse_fwd_kernel_name("fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_cr_as_hb_pp_ps_xt_qw_causal");
  REQUIRE(hb);
  CHECK(hb->half_blocks);
  CHECK(hb->ascending);
  CHECK(hb->cross_tile());
  CHECK(fa3::fwd_kernel_name(*hb) == "fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_cr_as_hb_pp_ps_xt_qw_causal");
  CHECK_FALSE(qw->half_blocks);
  // Half a key block must be whole k-steps of 16 keys, and only the plain pipelined loop has it.
  CHECK_FALSE(fa3::parse_fwd_kernel_name("fa3_fwd_bf16_d256_m128_n80_s2_w2_ov_hb_pp_causal"));
  CHECK_FALSE(fa3::parse_fwd_kernel_name("fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_b2_hb_pp_causal"));
  CHECK_FALSE(fa3::parse_fwd_kernel_name("fa3_fwd_bf16_d128_m128_n128_s2_w2_hb_causal"));

  // _q3: after _qw (and only with it); three Q buffers, a 16-byte tile slot each.
  const auto q3 = round_trip("fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_cr_pp_ps_xt_qw_q3_causal");
  CHECK(q3.three_q_buffers());
  CHECK(q3.q_warp());
  CHECK_FALSE(qw->three_q_buffers());
  const fa3::FwdSmemLayout l3 = fa3::FwdSmemLayout::of(q3);
  CHECK(l3.q_buffers == 3);
  CHECK(l3.k_offset == 3 * l3.q_bytes);
  CHECK(l3.o_over_q());
  CHECK(l3.total_bytes <= fa3::kFwdSmemLimit);
  CHECK(fa3::fwd_tile_slot_bytes(2) == 32);
  CHECK(fa3::fwd_tile_slot_bytes(3) == 48);

  // _dy: after _q3; persistent non-causal only (causal persistent kernels always draw).
  const auto dy = round_trip("fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_pp_ps_xt_dy");
  CHECK(dy.dynamic_schedule);
  CHECK(dy.persistent());
  CHECK_FALSE(qw->dynamic_schedule);

  // _os: after _q3, with _qw and two Q buffers.
  const auto os = round_trip("fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_cr_pp_ps_xt_qw_os_dy");
  CHECK(os.q_warp_stores_o());
  CHECK(os.dynamic_schedule);
  CHECK_FALSE(qw->q_warp_stores_o());
  CHECK(round_trip("fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_cr_hb_pp_ps_xt_qw_os_causal").half_blocks);

  // cr_im: the lazy row max with integer maxima, one spelling of row_max.
  const auto im = round_trip("fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_cr_im_hb_pp_ps_xt_qw_os_qr_causal");
  CHECK(im.int_max());
  CHECK(im.conditional_rescale());
  CHECK(round_trip("fa3_fwd_f16_d256_m128_n64_s2_w2_ov_cr_im_pp").int_max());
  CHECK_FALSE(round_trip("fa3_fwd_f16_d256_m128_n64_s2_w2_ov_cr_pp").int_max());

  // _ef, _el: after _dy, each alone or both; _el not with a cluster's multicast loads.
  const auto ef = round_trip("fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_cr_pp_ps_xt_qw_dy_ef");
  CHECK(ef.evict_first_q_o);
  CHECK_FALSE(ef.evict_last_kv);
  const auto el = round_trip("fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_cr_hb_pp_ps_xt_qw_el_causal");
  CHECK(el.evict_last_kv);
  CHECK_FALSE(el.evict_first_q_o);
  const auto efel = round_trip("fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_cr_pp_ps_xt_qw_dy_ef_el");
  CHECK(efel.evict_first_q_o);
  CHECK(efel.evict_last_kv);
  CHECK(round_trip("fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_pp_ef_c2").cluster_m == 2);

  // _qr: after _dy, before _ef; cross-tile kernels with two consumer warpgroups, d <= 128.
  const auto qr = round_trip("fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_cr_pp_ps_xt_qw_dy_qr_ef_el");
  CHECK(qr.q_in_registers);
  CHECK(qr.evict_last_kv);
  CHECK_FALSE(ef.q_in_registers);
  CHECK(round_trip("fa3_fwd_f16_d64_m128_n128_s2_w2_ov_pp_ps_xt_qr_causal").q_in_registers);

  const auto nows = fa3::parse_fwd_kernel_name("fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_nows_causal");
  REQUIRE(nows);
  CHECK_FALSE(nows->warp_specialized());
  CHECK_FALSE(nows->three_stage());
  CHECK(nows->threads() == 256);
  CHECK(nows->consumer_regs() == 0);
  CHECK(fa3::fwd_kernel_name(*nows) == "fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_nows_causal");

  const auto ps = fa3::parse_fwd_kernel_name("fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_pp_ps");
  REQUIRE(ps);
  CHECK(ps->threads() == 384);
  const fa3::FwdSmemLayout l = fa3::FwdSmemLayout::of(*ps);
  CHECK(l.o_offset != l.q_offset);  // persistent: O has its own tile
  CHECK(fa3::FwdSmemLayout::of(*nows).o_offset == fa3::FwdSmemLayout::of(*nows).q_offset);
  // Persistent where Q, the K/V stages and an O tile do not fit together: O goes over Q.
  const auto ps256 = fa3::parse_fwd_kernel_name("fa3_fwd_bf16_d256_m128_n80_s2_w2_ov_pp_ps_causal");
  REQUIRE(ps256);
  CHECK(fa3::FwdSmemLayout::of(*ps256).o_over_q());
  CHECK(fa3::FwdSmemLayout::of(*ps256).total_bytes <= fa3::kFwdSmemLimit);
  CHECK_FALSE(l.o_over_q());

  for (const char* bad : {"fa3_fwd_bf16_d128_m128_n128_s2_w2_pp",         // pingpong needs overlap
                          "fa3_fwd_bf16_d128_m128_n128_s2_w2_pp_ov",      // flag order
                          "fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_im_pp",   // im: needs cr
                          "fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_im_cr_pp",  // flag order
                          "fa3_fwd_bf16_d128_m128_n128_s2_w2_causal_ov",  // flag order
                          "fa3_fwd_bf16_d256_m128_n96_s2_w2",             // shared memory
                          "fa3_fwd_bf16_d128_m128_n64_s2_w2_ov3_p2",      // ov3 excludes p2
                          "fa3_fwd_bf16_d128_m128_n64_s2_w2_ov3_b2",      // ov3 excludes b2
                          "fa3_fwd_bf16_d128_m128_n64_s2_w2_b2",          // b2 needs overlap
                          "fa3_fwd_bf16_d128_m128_n64_s2_w2_ov_p2_b2",    // p2 or b2, not both
                          "fa3_fwd_bf16_d128_m128_n64_s2_w2_ov_pp_b2",    // flag order
                          "fa3_fwd_bf16_d128_m128_n64_s2_w2_ov_pp_cr",    // flag order
                          "fa3_fwd_bf16_d128_m128_n64_s2_w2_ov_ps_nows",  // nows: not persistent
                          "fa3_fwd_bf16_d128_m128_n64_s2_w2_nows_ov",     // flag order
                          "fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_c2_pp",   // flag order
                          "fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_pp_c2_causal",  // c2: not causal
                          "fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_pp_ps_c2",  // c2: not persistent
                          "fa3_fwd_bf16_d128_m128_n128_s2_w2_c2_nows",    // c2: needs the producer
                          "fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_pp_as",   // flag order
                          "fa3_fwd_bf16_d128_m128_n128_s2_w2_as",         // as: needs overlap
                          "fa3_fwd_bf16_d128_m128_n112_s2_w2_ov_p2_as",   // as: not with p2
                          "fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_b2_as",   // as: not with b2
                          "fa3_fwd_bf16_d128_m128_n64_s2_w2_ov3_as",      // as: not with ov3
                          "fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_as_nows", // as: needs the producer
                          "fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_pp_xt",   // xt: needs ps
                          "fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_pp_ps_qw",  // qw: needs xt
                          "fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_pp_ps_qw_xt",  // flag order
                          "fa3_fwd_bf16_d128_m128_n128_s2_w2_ew",         // ew: needs overlap
                          "fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_b2_ew",   // ew: not with b2
                          "fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_as_ew",   // flag order
                          "fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_pp_xt_ps",  // flag order
                          "fa3_fwd_bf16_d128_m128_n112_s2_w2_ov_p2_pp_ps_xt",  // xt: not with p2
                          "fa3_fwd_bf16_d256_m128_n64_s2_w2_ov_pp_ps_xt", // xt: two Q buffers
                          "fa3_fwd_bf16_d96_m128_n128_s2_w2",       // head dim
                          "fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_pp_ps_xt_q3",  // q3: needs qw
                          "fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_pp_ps_q3_qw_xt",  // flag order
                          "fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_pp_dy",  // dy: needs ps
                          "fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_pp_ps_dy_causal",  // dy: not causal
                          "fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_pp_ps_xt_dy_qw",  // flag order
                          "fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_pp_ps_xt_os",  // os: needs qw
                          "fa3_fwd_bf16_d64_m192_n128_s2_w3_ov_pp_ps_xt_qw_q3_os",  // os: two Q buffers
                          "fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_pp_ps_xt_qw_dy_os",  // flag order
                          "fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_pp_ps_el_ef",  // flag order
                          "fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_pp_ps_qr",  // qr: needs xt
                          "fa3_fwd_bf16_d256_m128_n64_s2_w2_ov_pp_ps_xt_qr",  // qr: d <= 128
                          "fa3_fwd_bf16_d64_m192_n128_s2_w3_ov_pp_ps_xt_qw_q3_qr",  // qr: w2
                          "fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_pp_ps_xt_qw_qr_dy",  // flag order
                          "fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_pp_el_c2",  // el: not multicast
                          "fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_pp_ps_ef_dy",  // flag order
                          "fa3_fwd_bf16_d128_m192_n128_s2_w2",      // block_m != 64 * w
                          "fa3_fwd_bf16_d128_m128_n120_s2_w2",      // block_n % 16
                          "fa3_fwd_bf16_d256_m128_n256_s4_w2",      // shared memory
                          "fa3_fwd_f16_d128_m128_n64_s1_w2_ov_p2_pp",   // one stage: waits
                          "fa3_fwd_f16_d128_m128_n64_s1_w2_ov_p2_nows", // for itself
                          "fa3_fwd_f16_d128_m128_n64_s1_w2_ov3_pp",
                          "fa3_fwd_fp32_d128_m128_n128_s2_w2",      // dtype
                          "fa3_fwd_bf16_d128_m128_n128_s2_w2_cusal", // flag
                          "fa3_fwd_bf16_d0128_m128_n128_s2_w2",     // leading zero
                          "fa3_fwd_bf16_d128_m128_n128_s2",         // missing token
                          "fa3_bwd_bf16_d128_m128_n128_s2_w2"})
    CHECK_FALSE(fa3::parse_fwd_kernel_name(bad));
}

namespace {
// Whether two configs agree on every field a name spells.
bool same_name_fields(const fa3::FwdConfig& a, const fa3::FwdConfig& b) {
  for (const fa3::FwdOption& o : fa3::kFwdOptions)
    if (fa3::fwd_field_value(a, o.field) != fa3::fwd_field_value(b, o.field)) return false;
  return a.dtype == b.dtype && a.head_dim == b.head_dim && a.block_m == b.block_m &&
         a.block_n == b.block_n && a.stages == b.stages &&
         a.consumer_warpgroups == b.consumer_warpgroups;
}

std::vector<std::string> tokens_of(const char* spelling) {
  std::vector<std::string> tokens;
  std::istringstream in(spelling);
  for (std::string t; std::getline(in, t, '_');) tokens.push_back(t);
  return tokens;
}
}  // namespace

TEST_CASE("every config prints as a name that parses back into it", "[cpu][registry]") {
  // Every combination of every option's values (the registry's spellings), over tile shapes of
  // each head dim: the valid ones round-trip, the others print as names the parser rejects.
  struct Tile {
    fa3::DType dtype;
    int head_dim, block_m, block_n, stages, warpgroups;
  };
  const Tile tiles[] = {{fa3::DType::F16, 64, 192, 112, 2, 3}, {fa3::DType::BF16, 64, 128, 128, 3, 2},
                        {fa3::DType::BF16, 128, 128, 128, 2, 2}, {fa3::DType::F16, 128, 128, 176, 2, 2},
                        {fa3::DType::BF16, 256, 128, 80, 2, 2}};
  std::vector<std::set<int>> values_seen(fa3::kFwdOptionCount);
  size_t valid = 0;
  for (const Tile& t : tiles) {
    std::vector<int> spelling(fa3::kFwdOptionCount, 0);  // a mixed-radix counter
    for (;;) {
      fa3::FwdConfig c;
      c.dtype = t.dtype;
      c.head_dim = t.head_dim;
      c.block_m = t.block_m;
      c.block_n = t.block_n;
      c.stages = t.stages;
      c.consumer_warpgroups = t.warpgroups;
      for (int i = 0; i < fa3::kFwdOptionCount; ++i)
        fa3::set_fwd_field(c, fa3::kFwdOptions[i].field,
                           fa3::kFwdOptions[i].spellings[spelling[i]].value);
      const std::string name = fa3::fwd_kernel_name(c);
      const std::optional<fa3::FwdConfig> parsed = fa3::parse_fwd_kernel_name(name);
      if (parsed.has_value() != fa3::fwd_config_is_valid(c)) FAIL_CHECK(name);
      if (parsed) {
        ++valid;
        if (!same_name_fields(*parsed, c)) FAIL_CHECK(name);
        for (int i = 0; i < fa3::kFwdOptionCount; ++i) values_seen[i].insert(spelling[i]);
      }
      int i = 0;
      while (i < fa3::kFwdOptionCount && ++spelling[i] == fa3::kFwdOptions[i].count) spelling[i++] = 0;
      if (i == fa3::kFwdOptionCount) break;
    }
  }
  CHECK(valid > 1000);
  // Each spelling of each option is in some valid config: none is dead.
  for (int i = 0; i < fa3::kFwdOptionCount; ++i) {
    INFO(fa3::kFwdOptions[i].key);
    CHECK(values_seen[i].size() == static_cast<size_t>(fa3::kFwdOptions[i].count));
  }
}

TEST_CASE("the registry's tokens are unambiguous", "[cpu][registry]") {
  // A token belongs to one option: the parser's longest match per option then never takes a
  // token that another option spells, and fa3-sass can read options in any order.
  std::set<std::string> seen_spellings;
  for (int a = 0; a < fa3::kFwdOptionCount; ++a) {
    const fa3::FwdOption& o = fa3::kFwdOptions[a];
    INFO(o.key);
    CHECK(std::string(o.spellings[0].tokens).empty());  // the default, spelled by nothing
    for (int i = 1; i < o.count; ++i) {
      CHECK_FALSE(std::string(o.spellings[i].tokens).empty());
      CHECK(seen_spellings.insert(o.spellings[i].tokens).second);
      if (o.kind == fa3::FwdFieldKind::Enum) CHECK(o.spellings[i].word != nullptr);
      for (const std::string& token : tokens_of(o.spellings[i].tokens)) {
        INFO(token);
        CHECK_FALSE(token.empty());
        for (int b = 0; b < fa3::kFwdOptionCount; ++b) {
          if (b == a) continue;
          for (int j = 1; j < fa3::kFwdOptions[b].count; ++j) {
            const std::vector<std::string> other = tokens_of(fa3::kFwdOptions[b].spellings[j].tokens);
            CHECK(std::find(other.begin(), other.end(), token) == other.end());
          }
        }
      }
    }
  }
}

TEST_CASE("row sums by the PV GEMM (_ls): pipelined, warp-specialized, head dim <= 128",
          "[cpu][registry]") {
  const auto ls = fa3::parse_fwd_kernel_name(
      "fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_cr_im_ls_pp_ps_xt_qw_dy_qr");
  REQUIRE(ls);
  CHECK(ls->row_sum_mma);
  CHECK(ls->row_max == fa3::RowMax::LazyIntMax);
  // Each V stage carries a 128-byte chunk of ones per key row.
  const auto plain = fa3::parse_fwd_kernel_name(
      "fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_cr_im_pp_ps_xt_qw_dy_qr");
  REQUIRE(plain);
  CHECK(fa3::FwdSmemLayout::of(*ls).v_stage_bytes ==
        fa3::FwdSmemLayout::of(*plain).v_stage_bytes + 128 * 128);
  for (const char* bad : {"fa3_fwd_bf16_d256_m128_n64_s2_w2_ov_ls_pp",    // N = 264 > 256
                          "fa3_fwd_bf16_d128_m128_n128_s2_w2_ls",         // not pipelined
                          "fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_ls_nows",  // no producer
                          "fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_b2_ls_pp"}) {
    INFO(bad);
    CHECK_FALSE(fa3::parse_fwd_kernel_name(bad));
  }
}

TEST_CASE("a name's parts spell it, each with its meaning", "[cpu][registry]") {
  const std::string name = "fa3_fwd_bf16_d128_m128_n176_s2_w2_ov_ew_pp_c2";
  const std::vector<fa3::NamePart> parts = fa3::explain_fwd_kernel_name(name);
  REQUIRE(parts.size() == 2 + fa3::kFwdNumberCount + fa3::kFwdOptionCount);
  std::string spelled;
  for (const fa3::NamePart& p : parts) {
    INFO(p.field);
    CHECK_FALSE(p.meaning.empty());
    if (!p.tokens.empty()) spelled += (spelled.empty() ? "" : "_") + p.tokens;
    // The lab-only options that the name sets, and nothing else, are marked.
    CHECK(p.lab_only == (p.field == "exp_after_pv_wait" || p.field == "cluster_m"));
  }
  CHECK(spelled == name);
  CHECK(parts[2].field == "head_dim");
  CHECK(parts[2].value == "128");
  const auto loop = std::find_if(parts.begin(), parts.end(),
                                 [](const fa3::NamePart& p) { return p.field == "loop"; });
  REQUIRE(loop != parts.end());
  CHECK(loop->tokens == "ov");
  CHECK(loop->value == "pipelined");
}

TEST_CASE("a backward name's parts spell it, each with its meaning", "[cpu][registry]") {
  for (const std::string name : {"fa3_bwd_bf16_d64_m128_n128_s2_w2_dqq_rw",
                                 "fa3_bwd_bf16_d64_m128_n128_s2_w2_dqq_rw_fs",
                                 "fa3_bwd_bf16_d64_m128_n128_s2_w2_dqq_rw_pt",
                                 "fa3_bwd_bf16_d128_m64_n128_s2_w2_dqh_fs_pt_causal",
                                 "fa3_bwd_f16_d64_m128_n128_s2_w2_dqq_pt_causal",
                                 "fa3_bwd_f16_d128_m64_n128_s2_w2_dqh_p32_causal",
                                 "fa3_bwd_bf16_d256_m64_n80_s1_w2_kvt_dqh_causal",
                                 "fa3_bwd_f16_d64_m64_n128_s2_w2"}) {
    INFO(name);
    const std::vector<fa3::NamePart> parts = fa3::explain_bwd_kernel_name(name);
    REQUIRE(parts.size() == 14);  // direction, dtype, five numbers, seven options
    std::string spelled;
    for (const fa3::NamePart& p : parts) {
      INFO(p.field);
      CHECK_FALSE(p.meaning.empty());
      CHECK_FALSE(p.lab_only);
      if (!p.tokens.empty()) spelled += (spelled.empty() ? "" : "_") + p.tokens;
    }
    CHECK(spelled == name);
    // The values are the tuning table's config words.
    const fa3::BwdConfig c = fa3::parse_bwd_kernel_name(name).value();
    CHECK(parts[7].field == "kv_split");
    CHECK(parts[7].value == fa3::bwd_kv_split_word(c.kv_split));
    CHECK(parts[8].field == "dq_split");
    CHECK(parts[8].value == fa3::bwd_dq_split_word(c.dq_split));
  }
  const std::vector<fa3::NamePart> parts =
      fa3::explain_bwd_kernel_name("fa3_bwd_f16_d128_m64_n128_s2_w2_dqh_p32_causal");
  CHECK(parts[2].value == "128");
  CHECK(parts[11].field == "producer_regs");
  CHECK(parts[11].value == "32");
  CHECK(parts[9].tokens.empty());  // rotated_walk at its default
  CHECK(parts[9].value == "false");
  CHECK(parts[10].field == "first_store");
  CHECK(parts[10].tokens.empty());
  CHECK(parts[10].value == "false");
  CHECK(fa3::explain_bwd_kernel_name("fa3_bwd_bf16_d64_m128_n128_s2_w2_dqq_rw_causal").empty());
  CHECK(fa3::explain_bwd_kernel_name("fa3_fwd_bf16_d128_m128_n128_s2_w2").empty());
}

TEST_CASE("docs/tuning_table.md embeds the registry's token table as generated",
          "[cpu][registry]") {
  // Tests run from the repository root.
  std::ifstream doc("docs/tuning_table.md");
  REQUIRE(doc.good());
  const std::string begin = "<!-- tokens: generated by fa3-table tokens --markdown -->";
  const std::string end = "<!-- end tokens -->";
  std::string line, block;
  bool inside = false, closed = false;
  while (std::getline(doc, line)) {
    if (line == begin) {
      inside = true;
    } else if (line == end && inside) {
      closed = true;
      break;
    } else if (inside) {
      block += line + "\n";
    }
  }
  INFO("regenerate the block between the markers with `build/fa3-table tokens --markdown`");
  REQUIRE(closed);
  CHECK(block == fa3::fwd_tokens_markdown());
}

namespace {
// The words of a make variable of src/kernels/kernels.mk, from its `NAME :=` line to the first
// line that does not end in a backslash (tests run from the repository root).
std::vector<std::string> kernels_mk_words(const std::string& variable) {
  std::ifstream mk("src/kernels/kernels.mk");
  REQUIRE(mk.good());
  std::vector<std::string> words;
  std::string line;
  bool inside = false;
  while (std::getline(mk, line)) {
    if (!inside && line.rfind(variable + " :=", 0) != 0) continue;
    if (!inside) line = line.substr(variable.size() + 3);
    inside = true;
    const bool more = !line.empty() && line.back() == '\\';
    if (more) line.pop_back();
    std::istringstream in(line);
    for (std::string w; in >> w;) words.push_back(w);
    if (!more) break;
  }
  REQUIRE(inside);
  return words;
}

std::set<std::string> production_kernels() {
  const std::vector<std::string> words = kernels_mk_words("FWD_PRODUCTION_KERNELS");
  return {words.begin(), words.end()};
}

std::set<std::string> lab_kernels() {
  std::set<std::string> lab;
  for (const std::string& tile : kernels_mk_words("FWD_LAB_TILES"))
    for (const char* dtype : {"f16", "bf16"}) lab.insert(std::string("fa3_fwd_") + dtype + "_" + tile);
  return lab;
}

std::set<std::string> backward_kernels() {
  const std::vector<std::string> words = kernels_mk_words("BWD_PRODUCTION_KERNELS");
  return {words.begin(), words.end()};
}

std::set<std::string> backward_lab_kernels() {
  const std::vector<std::string> words = kernels_mk_words("BWD_LAB_KERNELS");
  return {words.begin(), words.end()};
}

// The kernels the built-in tuning table names in its entries of `direction` ("fwd", "bwd").
std::set<std::string> table_kernels(const std::string& direction) {
  std::ifstream in("src/runtime/tuning_table.json");
  REQUIRE(in.good());
  const nlohmann::json table = nlohmann::json::parse(in);
  std::set<std::string> names;
  for (const auto& entry : table.at("entries"))
    if (entry.at("match").at("direction") == direction)
      names.insert(entry.at("kernel").get<std::string>());
  return names;
}
}  // namespace

TEST_CASE("the production set holds every table kernel and stays within its budget",
          "[cpu][registry]") {
  const std::set<std::string> production = production_kernels();
  for (const std::string& name : table_kernels("fwd")) {
    INFO("the built-in tuning table picks " << name
         << ": it must be in FWD_PRODUCTION_KERNELS of src/kernels/kernels.mk");
    CHECK(production.count(name) == 1);
  }
  // The backward's picks are production kernels too, and every production backward kernel is
  // a pick (BWD_PRODUCTION_KERNELS has no budget: one kernel per key, and at d128 non-causal
  // a second one, _dqt_rw_fs_pt for seqlen_q from 1024).
  const std::set<std::string> backward = backward_kernels();
  const std::set<std::string> backward_picks = table_kernels("bwd");
  CHECK(backward_picks.size() == 14);
  CHECK(backward_picks == backward);
  for (const std::string& name : backward_picks) {
    INFO("the built-in tuning table picks " << name
         << ": it must be in BWD_PRODUCTION_KERNELS of src/kernels/kernels.mk");
    CHECK(backward.count(name) == 1);
  }
  for (const std::string& name : production) {
    INFO(name);
    const auto cfg = fa3::parse_fwd_kernel_name(name);
    REQUIRE(cfg);
    CHECK(fa3::fwd_kernel_name(*cfg) == name);
  }
  // Every production kernel is compiled by every clean build (CI, `make test`): the budget
  // keeps that build within its five minutes on two cores (README, "Build time").
  INFO("FWD_PRODUCTION_KERNELS has " << production.size() << " kernels; the budget is "
       << fa3::kProductionForwardBudget << " (promote a lab kernel only in place of another)");
  CHECK(production.size() <= static_cast<size_t>(fa3::kProductionForwardBudget));
}

TEST_CASE("every lab kernel name parses and prints back unchanged", "[cpu][registry]") {
  for (const std::string& name : lab_kernels()) {
    INFO(name);
    std::string why;
    const auto cfg = fa3::parse_fwd_kernel_name(name, &why);
    INFO(why);
    REQUIRE(cfg);
    CHECK(fa3::fwd_kernel_name(*cfg) == name);
  }
}

TEST_CASE("every production kernel with PV-GEMM row sums has an LSE twin in production",
          "[cpu][registry]") {
  const std::set<std::string> production = production_kernels();
  for (const std::string& name : production) {
    const auto cfg = fa3::parse_fwd_kernel_name(name);
    REQUIRE(cfg);
    if (!cfg->row_sum_mma) continue;
    const std::vector<std::string> twins = fa3::fwd_lse_twin_names(*cfg);
    INFO(name << " serves calls without an LSE; calls with one run the first of its twins in "
              "the library, and one must be in FWD_PRODUCTION_KERNELS too");
    CHECK(std::any_of(twins.begin(), twins.end(),
                      [&](const std::string& t) { return production.count(t) == 1; }));
  }
  CHECK(fa3::fwd_lse_twin_names(*fa3::parse_fwd_kernel_name(
            "fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_cr_im_ls_pp_ps_xt_qw_dy_qr")) ==
        std::vector<std::string>{"fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_cr_im_pp_ps_xt_qw_dy_qr",
                                 "fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_cr_pp_ps_xt_qw_dy_qr",
                                 "fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_pp_ps_xt_qw_dy_qr"});
  CHECK(fa3::fwd_lse_twin_names(*fa3::parse_fwd_kernel_name(
            "fa3_fwd_f16_d64_m128_n128_s2_w2_ov_cr_ls_hb_pp_ps_xt_qw_q3_causal")) ==
        std::vector<std::string>{"fa3_fwd_f16_d64_m128_n128_s2_w2_ov_cr_hb_pp_ps_xt_qw_q3_causal",
                                 "fa3_fwd_f16_d64_m128_n128_s2_w2_ov_hb_pp_ps_xt_qw_q3_causal"});
  CHECK(fa3::fwd_lse_twin_names(*fa3::parse_fwd_kernel_name("fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_pp"))
            .empty());
}

TEST_CASE("every _ls kernel of the lab has an LSE twin in the lab build", "[cpu][registry]") {
  // make lab's library holds production and lab together: fa3-tune checks each kernel with
  // an LSE there, which an _ls kernel answers with its twin.
  std::set<std::string> all = production_kernels();
  const std::set<std::string> lab = lab_kernels();
  all.insert(lab.begin(), lab.end());
  for (const std::string& name : all) {
    const auto cfg = fa3::parse_fwd_kernel_name(name);
    REQUIRE(cfg);
    if (!cfg->row_sum_mma) continue;
    const std::vector<std::string> twins = fa3::fwd_lse_twin_names(*cfg);
    INFO(name << ": none of its twins is in src/kernels/kernels.mk");
    CHECK(std::any_of(twins.begin(), twins.end(),
                      [&](const std::string& t) { return all.count(t) == 1; }));
  }
}

TEST_CASE("the library holds exactly the kernels of its kernel set", "[cpu][registry]") {
  const std::set<std::string> production = production_kernels();
  const std::set<std::string> lab = lab_kernels();
  std::set<std::string> compiled;
  for (int i = 0; i < fa3_kernel_count(); ++i) {
    const std::string name = fa3_kernel_name(i);
    compiled.insert(name);
    if (const auto bwd = fa3::parse_bwd_kernel_name(name)) {
      CHECK(fa3::bwd_kernel_name(*bwd) == name);
      CHECK(fa3::find_any_compiled_kernel(name)->direction == fa3::Direction::Backward);
    } else {
      const auto cfg = fa3::parse_fwd_kernel_name(name);
      REQUIRE(cfg);
      CHECK(fa3::fwd_kernel_name(*cfg) == name);
    }
    const void* data = nullptr;
    size_t size = 0;
    REQUIRE(fa3_kernel_cubin(name.c_str(), &data, &size) == FA3_OK);
    REQUIRE(size > 4);
    CHECK(std::string(static_cast<const char*>(data), 4) == "\x7f" "ELF");
  }
  // `make`: the production set; `make lab` (build/lab/): production and lab together.
  std::set<std::string> expected = production;
  const std::set<std::string> backward = backward_kernels();
  expected.insert(backward.begin(), backward.end());
  bool lab_build = false;
  for (const std::string& name : compiled)
    lab_build = lab_build || (production.count(name) == 0 && backward.count(name) == 0);
  if (lab_build) {
    expected.insert(lab.begin(), lab.end());
    const std::set<std::string> backward_lab = backward_lab_kernels();
    expected.insert(backward_lab.begin(), backward_lab.end());
  }
  CHECK(compiled == expected);
}

TEST_CASE("backward kernel names: grammar, a kernel for each dtype, head dim and mask",
          "[cpu][registry]") {
  const std::set<std::string> backward = backward_kernels();
  std::set<std::string> covered;
  for (const std::string& name : backward) {
    std::string why;
    const auto cfg = fa3::parse_bwd_kernel_name(name, &why);
    INFO(name << ": " << why);
    REQUIRE(cfg);
    CHECK(fa3::bwd_kernel_name(*cfg) == name);
    CHECK_FALSE(fa3::parse_fwd_kernel_name(name));
    covered.insert(std::string(fa3::dtype_name(cfg->dtype)) + "_d" +
                   std::to_string(cfg->head_dim) + (cfg->causal ? "_causal" : ""));
  }
  CHECK(covered.size() == 12);
  // d128 non-causal: _dqh below 1024 query rows, _dqt_rw_fs_pt from there.
  CHECK(backward.size() == 14);
  for (const std::string& name : backward_lab_kernels()) {
    INFO(name << " (BWD_LAB_KERNELS)");
    CHECK(fa3::parse_bwd_kernel_name(name));
    CHECK(backward.count(name) == 0);
  }
  for (const char* dtype : {"f16", "bf16"})
    for (const char* d : {"_d64", "_d128"})
      for (const char* mask : {"", "_causal"}) {
        INFO(std::string(dtype) + d + mask + " has no backward kernel in BWD_PRODUCTION_KERNELS");
        CHECK(covered.count(std::string(dtype) + d + mask) == 1);
      }
  // Each rule of the grammar and of bwd_config_is_valid has a sentence.
  std::string why;
  CHECK_FALSE(fa3::parse_bwd_kernel_name("fa3_bwd_f32_d64_m64_n128_s2_w2", &why));
  CHECK(why.find("fa3_bwd_f16 or fa3_bwd_bf16") != std::string::npos);
  CHECK_FALSE(fa3::parse_bwd_kernel_name("fa3_bwd_f16_d64_m64_n128_s2", &why));
  CHECK(why.find("_s<stages>_w<warpgroups>") != std::string::npos);
  CHECK_FALSE(fa3::parse_bwd_kernel_name("fa3_bwd_f16_d64_m64_n128_s2_w2_causalx", &why));
  CHECK(why.find("ends after") != std::string::npos);
  CHECK_FALSE(fa3::parse_bwd_kernel_name("fa3_bwd_f16_d96_m64_n128_s2_w2", &why));
  CHECK(why.find("bwd_config_is_valid") != std::string::npos);
  CHECK_FALSE(fa3::parse_bwd_kernel_name(std::string("fa3_bwd_f16_d64_m64_n128_s2_w2\0x", 32), &why));
  // Backward kernels are not forward kernels: forward calls and the forward's entries of the
  // tuning table never see them.
  for (const fa3::KernelInfo& k : fa3::compiled_kernels()) CHECK(k.direction == fa3::Direction::Forward);
  const std::set<std::string> backward_lab = backward_lab_kernels();
  for (const fa3::KernelInfo& k : fa3::compiled_backward_kernels()) {
    CHECK(k.direction == fa3::Direction::Backward);
    CHECK(backward.count(k.name) + backward_lab.count(k.name) == 1);
    CHECK(fa3::find_compiled_kernel(k.name) == nullptr);
    CHECK(fa3::find_any_compiled_kernel(k.name) == &k);
  }
}

// Each name spells a backward kernel in the grammar but breaks a rule of bwd_config_is_valid.
static void check_invalid_bwd_configs(std::initializer_list<const char*> names) {
  std::string why;
  for (const char* bad : names) {
    INFO(bad);
    CHECK_FALSE(fa3::parse_bwd_kernel_name(bad, &why));
    CHECK(why.find("bwd_config_is_valid") != std::string::npos);
  }
}

TEST_CASE("the _kvt backward: 80-key blocks at head dim 256, dQ in a ring of three buffers",
          "[cpu][registry]") {
  const auto c = fa3::parse_bwd_kernel_name("fa3_bwd_bf16_d256_m64_n80_s1_w2_kvt_dqh_causal");
  REQUIRE(c);
  CHECK(c->kv_transposed());
  CHECK(c->kv_split_head_dim());
  CHECK(c->kv_box_rows() == 80);
  CHECK(c->s_cols() == 40);  // each warpgroup's keys of S and dP
  CHECK(c->dq_piece_cols() == 64);
  CHECK(c->dq_pieces() == 4);
  CHECK(c->dq_slots() == 3);
  CHECK(c->ds_stages() == 1);
  const fa3::BwdSmemLayout l = fa3::BwdSmemLayout::of(*c);
  CHECK(l.kv_bytes == 80 * 256 * 2);
  CHECK(l.ds_bytes == 80 * 64 * 2);
  CHECK(l.dq_bytes == 64 * 64 * 4);
  CHECK(l.total_bytes <= fa3::kBwdSmemLimit);
  // Every tile starts on the 1024-byte swizzle pattern.
  for (uint32_t offset : {l.k_offset, l.v_offset, l.q_offset, l.do_offset, l.ds_offset, l.p_offset, l.dq_offset})
    CHECK(offset % 1024 == 0);
  // The other key-split kernels keep a buffer per warpgroup and 64-row boxes.
  const auto h = fa3::parse_bwd_kernel_name("fa3_bwd_bf16_d256_m64_n64_s1_w2_kvh_dqh");
  REQUIRE(h);
  CHECK_FALSE(h->kv_transposed());
  CHECK(h->kv_box_rows() == 64);
  CHECK(h->dq_pieces() == 2);
  CHECK(h->dq_slots() == 2);
  // _kvt's shapes are those it is written for.
  check_invalid_bwd_configs({"fa3_bwd_bf16_d256_m64_n64_s1_w2_kvt_dqh", "fa3_bwd_bf16_d256_m64_n80_s2_w2_kvt_dqh",
                             "fa3_bwd_bf16_d128_m64_n80_s1_w2_kvt_dqh", "fa3_bwd_bf16_d256_m64_n80_s1_w2_kvt_dqq",
                             "fa3_bwd_bf16_d256_m64_n80_s1_w2_kvh_dqh"});
  std::string why;
  CHECK_FALSE(fa3::parse_bwd_kernel_name("fa3_bwd_bf16_d256_m64_n80_s1_w2_dqh_kvt", &why));
  CHECK(why.find("_kvh or _kvt") != std::string::npos);
}

TEST_CASE("one Q/dO stage only where the consumers release dO_i (_kvh, _kvt)", "[cpu][registry]") {
  // With one stage dO_i has barriers of its own (split_qdo_barriers), which only the _kvh and
  // _kvt consumers release: any other kernel's producer would wait for the second step's.
  check_invalid_bwd_configs({"fa3_bwd_bf16_d64_m64_n128_s1_w2", "fa3_bwd_bf16_d128_m64_n128_s1_w2_dqh",
                             "fa3_bwd_bf16_d64_m128_n128_s1_w2_dqq_causal",
                             "fa3_bwd_bf16_d128_m80_n128_s1_w2_dqt"});
  CHECK(fa3::parse_bwd_kernel_name("fa3_bwd_bf16_d64_m64_n128_s2_w2"));
  CHECK(fa3::parse_bwd_kernel_name("fa3_bwd_bf16_d256_m64_n64_s1_w2_kvh_dqh"));
  CHECK(fa3::parse_bwd_kernel_name("fa3_bwd_bf16_d256_m64_n80_s1_w2_kvt_dqh"));
}

TEST_CASE("the _dqt backward: dQ^T, 80-row query blocks at head dim 128", "[cpu][registry]") {
  const auto c = fa3::parse_bwd_kernel_name("fa3_bwd_bf16_d128_m80_n128_s2_w2_dqt");
  REQUIRE(c);
  CHECK(c->dq_split == fa3::DqSplit::HeadDimT);
  CHECK(c->dq_transposed());
  CHECK(c->block_m == 80);
  CHECK(fa3::bwd_kernel_name(*c) == "fa3_bwd_bf16_d128_m80_n128_s2_w2_dqt");
  // A warpgroup's part: dQ^T's 64 head-dim rows x the 80 queries, one piece a warpgroup.
  CHECK(c->dq_rows() == 64);
  CHECK(c->dq_cols() == 80);
  CHECK(c->dq_pieces() == 2);
  CHECK(c->dq_slots() == 2);
  CHECK(c->s_cols() == 80);
  CHECK(c->q_box_rows() == 80);  // one box per 80-row Q_i or dO_i
  const fa3::BwdSmemLayout l = fa3::BwdSmemLayout::of(*c);
  CHECK(l.qdo_stage_bytes == 80u * 128 * 2);
  CHECK(l.ds_bytes == 80u * 128 * 2);
  CHECK(l.dq_bytes == 64u * 80 * 4);
  CHECK(l.total_bytes <= fa3::kBwdSmemLimit);
  for (uint32_t offset : {l.k_offset, l.v_offset, l.q_offset, l.do_offset, l.ds_offset, l.dq_offset})
    CHECK(offset % 1024 == 0);
  // The 64-row kernels keep 64-row boxes (two for 128 rows).
  CHECK(fa3::parse_bwd_kernel_name("fa3_bwd_bf16_d64_m128_n128_s2_w2_dqq")->q_box_rows() == 64);
  CHECK(fa3::parse_bwd_kernel_name("fa3_bwd_bf16_d128_m64_n128_s2_w2_dqh")->q_box_rows() == 64);
  CHECK(fa3::parse_bwd_kernel_name("fa3_bwd_f16_d128_m64_n128_s2_w2_dqt_causal"));
  // _dqt is written for head dim 128 with 64- or 80-row blocks; the other splits not for 80.
  check_invalid_bwd_configs({"fa3_bwd_bf16_d64_m80_n128_s2_w2_dqt", "fa3_bwd_bf16_d128_m128_n128_s2_w2_dqt",
                             "fa3_bwd_bf16_d128_m80_n128_s2_w2_dqh", "fa3_bwd_bf16_d128_m80_n128_s2_w2",
                             "fa3_bwd_bf16_d256_m64_n80_s1_w2_kvt_dqt"});
  CHECK_FALSE(fa3::parse_bwd_kernel_name("fa3_bwd_bf16_d128_m80_n128_s2_w2_dqt_dqh"));
}

TEST_CASE("the _rw backward: a rotated walk, non-causal only", "[cpu][registry]") {
  const auto c = fa3::parse_bwd_kernel_name("fa3_bwd_bf16_d64_m128_n128_s2_w2_dqq_rw");
  REQUIRE(c);
  CHECK(c->rotated_walk);
  CHECK_FALSE(c->causal);
  CHECK(fa3::bwd_kernel_name(*c) == "fa3_bwd_bf16_d64_m128_n128_s2_w2_dqq_rw");
  const auto base = fa3::parse_bwd_kernel_name("fa3_bwd_bf16_d64_m128_n128_s2_w2_dqq");
  REQUIRE(base);
  CHECK_FALSE(base->rotated_walk);
  CHECK(fa3::bwd_kernel_name(*base) == "fa3_bwd_bf16_d64_m128_n128_s2_w2_dqq");
  // Before _p32, after the dQ split; causal walks are staggered by construction.
  CHECK(fa3::parse_bwd_kernel_name("fa3_bwd_bf16_d128_m64_n128_s2_w2_dqh_rw_p32"));
  std::string why;
  CHECK_FALSE(fa3::parse_bwd_kernel_name("fa3_bwd_bf16_d64_m128_n128_s2_w2_dqq_rw_causal", &why));
  CHECK(why.find("bwd_config_is_valid") != std::string::npos);
  CHECK_FALSE(fa3::parse_bwd_kernel_name("fa3_bwd_bf16_d64_m128_n128_s2_w2_rw_dqq", &why));
  CHECK(why.find("_rw") != std::string::npos);
}

TEST_CASE("the _fs backward: a query block's first dQ writer stores, staggered walks only",
          "[cpu][registry]") {
  for (const std::string name : {"fa3_bwd_bf16_d64_m128_n128_s2_w2_dqq_rw_fs",
                                 "fa3_bwd_f16_d128_m64_n128_s2_w2_dqh_fs_pt_causal",
                                 "fa3_bwd_f16_d128_m64_n128_s2_w2_dqh_fs_p32_causal",
                                 "fa3_bwd_bf16_d256_m64_n80_s1_w2_kvt_dqh_fs_causal"}) {
    INFO(name);
    const auto c = fa3::parse_bwd_kernel_name(name);
    REQUIRE(c);
    CHECK(c->first_store);
    CHECK(fa3::bwd_kernel_name(*c) == name);
  }
  CHECK_FALSE(fa3::parse_bwd_kernel_name("fa3_bwd_bf16_d64_m128_n128_s2_w2_dqq_rw")->first_store);
  // A pair's CTAs that walk the query blocks in step (non-causal without _rw) would all wait
  // for one first store at every block: not a kernel.
  std::string why;
  CHECK_FALSE(fa3::parse_bwd_kernel_name("fa3_bwd_bf16_d128_m64_n128_s2_w2_dqh_fs", &why));
  CHECK(why.find("bwd_config_is_valid") != std::string::npos);
  // The token's place: after _rw, before _p32 and _pt.
  CHECK_FALSE(fa3::parse_bwd_kernel_name("fa3_bwd_bf16_d64_m128_n128_s2_w2_dqq_fs_rw", &why));
  CHECK(why.find("_fs") != std::string::npos);
  CHECK_FALSE(fa3::parse_bwd_kernel_name("fa3_bwd_bf16_d128_m64_n128_s2_w2_dqh_pt_fs_causal"));
}

TEST_CASE("the _pt backward: persistent, where a warpgroup's dK and dV fit its dQ buffer",
          "[cpu][registry]") {
  const auto c = fa3::parse_bwd_kernel_name("fa3_bwd_bf16_d64_m128_n128_s2_w2_dqq_pt_causal");
  REQUIRE(c);
  CHECK(c->persistent);
  CHECK(c->causal);
  CHECK(fa3::bwd_kernel_name(*c) == "fa3_bwd_bf16_d64_m128_n128_s2_w2_dqq_pt_causal");
  CHECK(fa3::parse_bwd_kernel_name("fa3_bwd_f16_d64_m128_n128_s2_w2_dqq_rw_pt"));
  const std::vector<fa3::NamePart> parts =
      fa3::explain_bwd_kernel_name("fa3_bwd_bf16_d64_m128_n128_s2_w2_dqq_pt_causal");
  CHECK(parts[12].field == "persistent");
  CHECK(parts[12].tokens == "pt");
  CHECK(parts[12].value == "true");
  // A warpgroup's 64 keys of dK (8 KB at d64, 16 KB at d128) must fit its dQ buffer (64 x 64
  // fp32, 16 KB, at d64 _dqq and d128 _dqh); dV's go there too at d64, into a buffer of their
  // own at d128 (bwd_config.h, dv_staging_bytes). _kvh / _kvt are not persistent; the
  // head-dim split of dQ only with the causal mask (the form built and measured, v36).
  const auto d128 = fa3::parse_bwd_kernel_name("fa3_bwd_bf16_d128_m64_n128_s2_w2_dqh_pt_causal");
  REQUIRE(d128);
  CHECK(d128->persistent);
  CHECK_FALSE(d128->dkv_fit_dq_buffer());
  CHECK(d128->dv_staging_bytes() == 2 * 64 * 128 * 2);
  CHECK(c->dkv_fit_dq_buffer());
  CHECK(c->dv_staging_bytes() == 0);
  CHECK(fa3::BwdSmemLayout::of(*d128).total_bytes <= fa3::kBwdSmemLimit);
  std::string why;
  CHECK_FALSE(fa3::parse_bwd_kernel_name("fa3_bwd_bf16_d128_m64_n128_s2_w2_dqh_pt", &why));
  CHECK(why.find("bwd_config_is_valid") != std::string::npos);
  // _dqt: no shared memory is left for dV_j's rows; each warpgroup stages them in a dS^T stage.
  const auto dqt = fa3::parse_bwd_kernel_name("fa3_bwd_bf16_d128_m80_n128_s2_w2_dqt_pt");
  REQUIRE(dqt);
  CHECK(dqt->dv_staged_in_ds());
  CHECK(dqt->dv_staging_bytes() == 0);
  CHECK_FALSE(d128->dv_staged_in_ds());
  CHECK(fa3::BwdSmemLayout::of(*dqt).total_bytes <= fa3::kBwdSmemLimit);
  CHECK_FALSE(fa3::parse_bwd_kernel_name("fa3_bwd_bf16_d256_m64_n80_s1_w2_kvt_dqh_pt"));
  // Only the form built and measured: the query split of dQ, two stages.
  CHECK_FALSE(fa3::parse_bwd_kernel_name("fa3_bwd_bf16_d64_m64_n128_s2_w2_pt"));
  CHECK_FALSE(fa3::parse_bwd_kernel_name("fa3_bwd_bf16_d64_m128_n128_s3_w2_dqq_pt_causal"));
  // The token's place: after _p32, before _causal.
  CHECK_FALSE(fa3::parse_bwd_kernel_name("fa3_bwd_bf16_d64_m128_n128_s2_w2_pt_dqq_causal", &why));
  CHECK(why.find("_pt") != std::string::npos);
  CHECK_FALSE(fa3::parse_bwd_kernel_name("fa3_bwd_bf16_d64_m128_n128_s2_w2_dqq_causal_pt"));
}

TEST_CASE("the _p32 backward: setmaxnreg 32 / 232", "[cpu][registry]") {
  const auto c = fa3::parse_bwd_kernel_name("fa3_bwd_bf16_d128_m64_n128_s2_w2_dqh_p32_causal");
  REQUIRE(c);
  CHECK(c->producer_regs_32);
  CHECK(c->causal);
  CHECK(c->producer_regs() == 32);
  CHECK(c->consumer_regs() == 232);
  CHECK(fa3::bwd_kernel_name(*c) == "fa3_bwd_bf16_d128_m64_n128_s2_w2_dqh_p32_causal");
  // What the producer gives up the consumers get: a CTA has 168 registers a thread (384
  // threads) at launch, for 24/240 and 32/232 alike.
  CHECK(128 * c->producer_regs() + 256 * c->consumer_regs() <= 168 * 384);
  const auto base = fa3::parse_bwd_kernel_name("fa3_bwd_bf16_d128_m64_n128_s2_w2_dqh_causal");
  REQUIRE(base);
  CHECK(128 * base->producer_regs() + 256 * base->consumer_regs() <= 168 * 384);
  CHECK(base->producer_regs() == 24);
  CHECK(base->consumer_regs() == 240);
  // The same shared-memory plan: only the registers differ.
  CHECK(fa3::BwdSmemLayout::of(*c).total_bytes == fa3::BwdSmemLayout::of(*base).total_bytes);
  std::string why;
  CHECK_FALSE(fa3::parse_bwd_kernel_name("fa3_bwd_bf16_d128_m64_n128_s2_w2_p32_dqh_causal", &why));
  CHECK(why.find("_p32") != std::string::npos);
}
