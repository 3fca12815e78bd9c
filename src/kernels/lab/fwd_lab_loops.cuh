// Lab loop forms of the forward mainloop: built by `make lab` only (no production kernel uses
// them), kept so that fa3-tune and the ablation can still measure them. Both alternate two
// register buffers between steps, so every step exists in two copies, one per parity.
//   Loop::DoubleP     Algorithm 2 with P in two register buffers
//   Loop::ThreeStage  3-stage pipelining: QK^T_{j+1} and PV_{j-1} in flight under softmax_j
#pragma once

#include <type_traits>

#include "kernels/fwd/mainloop.cuh"

namespace fa3::lab {

template <class Tr>
using PFrag = uint32_t[Tr::kBlockN / 16][4];

// How many of the steps it = 1 .. n_blocks - 1 (the blocks after the first) need the mask.
template <class Tr, bool S>
__device__ __forceinline__ int masked_steps(const ConsumerMainloop<Tr, S>& m, int n_blocks) {
  return min(n_blocks - 1, max(0, m.masked_iterations(n_blocks) - 1));
}

// Runs step(Bool<mask>, Bool<parity>, it) for the steps it = 1 .. steps of a loop whose
// register buffers alternate between steps: in pairs of parity 0 then 1, so each buffer
// stays a compile-time name. Steps 1 .. masked need the mask: the masked pairs round that
// up to even (masking an extra block is harmless) unless that passes the last step; then
// the last step is a lone one and takes the mask itself. Returns whether `steps` was odd.
template <class Step>
__device__ __forceinline__ bool paired_steps(int steps, int masked, Step&& step) {
  using T = std::true_type;
  using F = std::false_type;
  const int masked_pairs_end = min(steps, (masked + 1) & ~1);
  int it = 1;
  for (; it + 1 <= masked_pairs_end; it += 2) {
    step(T{}, F{}, it);
    step(T{}, T{}, it + 1);
  }
  for (; it + 1 <= steps; it += 2) {
    step(F{}, F{}, it);
    step(F{}, T{}, it + 1);
  }
  if (it > steps) return false;
  if (it <= masked) step(T{}, F{}, it);
  else step(F{}, F{}, it);
  return true;
}

template <bool Second, class Buf>
__device__ __forceinline__ Buf& pick(Buf& first, Buf& second) {
  if constexpr (Second) return second;
  else return first;
}

// Algorithm 2 with P in two register buffers (Loop::DoubleP). Step j issues QK^T_j, then
// waits (wait_group 1) for PV_{j-2}, rescales O, issues PV_{j-1} with P_{j-1}, and runs
// softmax_j under it, writing P_j into the other buffer. The loop holds no wait_group 0: the
// only wait for a PV comes after the next QK^T is issued, a point ptxas cannot move it from,
// so the softmax stays under the PV GEMM.
template <class Tr>
struct DoubleP {
  float s[Tr::kBlockN / 2];
  PFrag<Tr> p_a, p_b;
  float rescale[2];                        // from the latest softmax, for O before its PV
  tile::PipelineState<Tr::kStages> k_st;   // stage of the block whose QK^T is issued next
  tile::PipelineState<Tr::kStages> v_cur;  // stage of P_cur's block (PV issued this step)
  tile::PipelineState<Tr::kStages> v_old;  // stage of the block before it (its PV in flight)
  bool pv_in_flight = false;               // whether a PV (of v_old's block) is pending
};

template <bool Mask, class Tr, bool S>
__device__ __forceinline__ void double_p_step(ConsumerMainloop<Tr, S>& m, float (&o)[ConsumerMainloop<Tr, S>::kOAcc],
                                              int n_block, DoubleP<Tr>& x, PFrag<Tr>& p_cur,
                                              PFrag<Tr>& p_next, const TurnScheduler<Tr>& turns) {
  m.sm.k_pipe.consumer_wait(x.k_st);
  m.sm.v_pipe.consumer_wait(x.v_cur);
  turns.begin();
  m.issue_qk(x.s, x.k_st);      // QK^T_j
  ptx::wgmma_wait_group<1>();   // the older group, PV_{j-2}, is done (if there was one)
  tile::pin_registers(o);
  if (x.pv_in_flight) m.release_v(x.v_old);
  m.rescale_o(o, x.rescale);      // O_{j-2} -> relative to m_{j-1}
  m.issue_pv(o, p_cur, x.v_cur);  // O += P_{j-1} V_{j-1}
  turns.end();
  ptx::wgmma_wait_group<1>();     // QK^T_j is done; PV_{j-1} stays in flight
  tile::pin_registers(x.s);
  m.release_k(x.k_st);
  m.template softmax_block<Mask>(x.s, n_block, x.rescale);  // under PV_{j-1}
  m.to_p_frag(x.s, p_next);
  x.pv_in_flight = true;
  x.v_old = x.v_cur;
  x.v_cur = x.k_st;
  x.k_st.advance();
}

// The last PV, with P_last in p_last.
template <class Tr, bool S>
__device__ __forceinline__ void double_p_finish(ConsumerMainloop<Tr, S>& m, float (&o)[ConsumerMainloop<Tr, S>::kOAcc],
                                                DoubleP<Tr>& x, PFrag<Tr>& p_last,
                                                const TurnScheduler<Tr>& turns) {
  m.release_q();
  m.sm.v_pipe.consumer_wait(x.v_cur);
  turns.begin();
  ptx::wgmma_wait_group<0>();
  tile::pin_registers(o);
  if (x.pv_in_flight) m.release_v(x.v_old);
  m.rescale_o(o, x.rescale);
  m.issue_pv(o, p_last, x.v_cur);
  turns.end();
  ptx::wgmma_wait_group<0>();
  tile::pin_registers(o);
  m.release_v(x.v_cur);
}

template <class Tr, bool S>
__device__ __forceinline__ void run_double_p(ConsumerMainloop<Tr, S>& m, float (&o)[ConsumerMainloop<Tr, S>::kOAcc],
                                             int n_blocks, const TurnScheduler<Tr>& turns) {
  static_assert(!Tr::kAscending, "ascending: the plain pipelined loop only");
  DoubleP<Tr> x;
  x.k_st = m.next_stage;
  m.first_block(x.s, x.p_a, x.rescale, x.k_st, n_blocks - 1, m.masked_iterations(n_blocks) > 0,
                turns);
  x.v_cur = x.k_st;
  x.k_st.advance();
  // Step of parity 0 issues PV with p_a and writes the new P into p_b; parity 1 the reverse.
  const bool odd = paired_steps(n_blocks - 1, masked_steps(m, n_blocks), [&](auto mask, auto parity, int it) {
    constexpr bool kOne = decltype(parity)::value;
    double_p_step<decltype(mask)::value>(m, o, n_blocks - 1 - it, x, pick<kOne>(x.p_a, x.p_b),
                                         pick<kOne>(x.p_b, x.p_a), turns);
  });
  // (Branches, not a selected reference: registers cannot be indexed at run time.)
  if (odd) double_p_finish(m, o, x, x.p_b, turns);
  else double_p_finish(m, o, x, x.p_a, turns);
  m.next_stage = x.k_st;
}

// 3-stage pipelining (Loop::ThreeStage): step j issues QK^T_{j+1} and PV_{j-1}, and runs the
// softmax of block j, whose S the previous step computed, under both. Two S and two P
// buffers alternate between steps.
template <class Tr>
struct ThreeStage {
  float s_a[Tr::kBlockN / 2], s_b[Tr::kBlockN / 2];
  PFrag<Tr> p_a, p_b;
  float rescale[2];                       // from the latest softmax, for O before its PV
  tile::PipelineState<Tr::kStages> k_st;  // stage of block j+1 (its QK^T is issued next)
  tile::PipelineState<Tr::kStages> v_st;  // stage of block j-1 (its PV is issued next)
};

// HasNext: a compile-time choice, as a conditional wgmma makes ptxas serialize them all.
template <bool Mask, bool HasNext, class Tr, bool S>
__device__ __forceinline__ void three_stage_step(ConsumerMainloop<Tr, S>& m, float (&o)[ConsumerMainloop<Tr, S>::kOAcc],
                                                 int it, int n_blocks, ThreeStage<Tr>& x,
                                                 float (&s_cur)[Tr::kBlockN / 2],
                                                 float (&s_next)[Tr::kBlockN / 2],
                                                 PFrag<Tr>& p_cur, PFrag<Tr>& p_next,
                                                 const TurnScheduler<Tr>& turns) {
  // ptxas kept both stages of this loop in per-thread registers, every lane holding the
  // same one: each wgmma descriptor was rebuilt in vector registers and moved over with
  // R2UR every step (fa3-sass's uniform_operands check). From lane 0 they are warp-uniform
  // to it.
  x.k_st = warp_uniform(x.k_st);
  x.v_st = warp_uniform(x.v_st);
  if (HasNext) m.sm.k_pipe.consumer_wait(x.k_st);  // line 8
  m.sm.v_pipe.consumer_wait(x.v_st);               // line 10
  turns.begin();
  if (HasNext) m.issue_qk(s_next, x.k_st);  // line 9: S_next, not waited for
  m.rescale_o(o, x.rescale);                 // line 11
  m.issue_pv(o, p_cur, x.v_st);              // line 12: O += P_{j-1} V_{j-1}, not waited for
  turns.end();
  m.template softmax_block<Mask>(s_cur, n_blocks - 1 - it, x.rescale);  // line 13, under both
  m.to_p_frag(s_cur, p_next);
  ptx::wgmma_wait_group<0>();  // line 14
  tile::pin_registers(o);
  if (HasNext) {
    tile::pin_registers(s_next);
    m.release_k(x.k_st);
    x.k_st.advance();
  }
  m.release_v(x.v_st);
  x.v_st.advance();
}

template <class Tr, bool S>
__device__ __forceinline__ void run_three_stage(ConsumerMainloop<Tr, S>& m, float (&o)[ConsumerMainloop<Tr, S>::kOAcc],
                                                int n_blocks, const TurnScheduler<Tr>& turns) {
  static_assert(!Tr::kAscending, "ascending: the plain pipelined loop only");
  ThreeStage<Tr> x;
  x.v_st = m.next_stage;
  x.k_st = m.next_stage;
  // Lines 2-6: S_0, then S_1 in flight while the softmax of block 0 runs.
  m.first_qk(x.s_a, x.k_st, turns);
  x.k_st.advance();
  const bool second = n_blocks > 1;
  if (second) {
    m.sm.k_pipe.consumer_wait(x.k_st);
    turns.begin();
    m.issue_qk(x.s_b, x.k_st);
    turns.end();
  }
  if (m.masked_iterations(n_blocks) > 0) m.template softmax_block<true>(x.s_a, n_blocks - 1, x.rescale);
  else m.template softmax_block<false>(x.s_a, n_blocks - 1, x.rescale);
  m.to_p_frag(x.s_a, x.p_a);
  ptx::wgmma_wait_group<0>();
  tile::pin_registers(x.s_b);
  if (second) {
    m.release_k(x.k_st);
    x.k_st.advance();
  }
  // Lines 7-17 for blocks 1 .. n_blocks - 2, each with a next block. Parity 0: S_j in s_b,
  // S_{j+1} into s_a, P_{j-1} in p_a, P_j into p_b.
  const int masked = masked_steps(m, n_blocks);
  auto step = [&](auto mask, auto parity, int it, auto has_next) {
    constexpr bool kOne = decltype(parity)::value;
    three_stage_step<decltype(mask)::value, decltype(has_next)::value>(
        m, o, it, n_blocks, x, pick<kOne>(x.s_b, x.s_a), pick<kOne>(x.s_a, x.s_b),
        pick<kOne>(x.p_a, x.p_b), pick<kOne>(x.p_b, x.p_a), turns);
  };
  // The last block's step (no next QK^T), then lines 18-24, the last PV, with P_last in
  // `p_last`.
  auto finish = [&](auto& p_last) {
    m.release_q();
    m.sm.v_pipe.consumer_wait(x.v_st);
    turns.begin();
    m.rescale_o(o, x.rescale);
    m.issue_pv(o, p_last, x.v_st);
    turns.end();
    ptx::wgmma_wait_group<0>();
    tile::pin_registers(o);
    m.release_v(x.v_st);
  };
  using T = std::true_type;
  using F = std::false_type;
  if (n_blocks == 1) {
    finish(x.p_a);
  } else {
    const bool odd = paired_steps(n_blocks - 2, min(masked, n_blocks - 2),
                                  [&](auto mask, auto parity, int it) { step(mask, parity, it, T{}); });
    const int last = n_blocks - 1;
    // (Branches, not selected references: registers cannot be indexed at run time.)
    if (odd) {
      if (last <= masked) step(T{}, T{}, last, F{});
      else step(F{}, T{}, last, F{});
      finish(x.p_a);
    } else {
      if (last <= masked) step(T{}, F{}, last, F{});
      else step(F{}, F{}, last, F{});
      finish(x.p_b);
    }
  }
  m.next_stage = x.k_st;
}

}  // namespace fa3::lab
