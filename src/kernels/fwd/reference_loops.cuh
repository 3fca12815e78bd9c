// The loop forms of the paper's ablation (Table 2) and of fa3-sass's Appendix B.2 check:
// production reference kernels, not the production loop (fwd/mainloop.cuh, run_pipelined).
//   Loop::Sequential  Algorithm 1 as written: every GEMM waited for before its softmax
//   Loop::B2Order     Algorithm 2 in the instruction order of the paper's B.2 SASS
// (Producer::InlineConsumer, the ablation's "no warp specialization", is a loader:
// fwd/producer.cuh, InlineLoader.) The lab's loop forms are dispatched from here too.
#pragma once

#include "kernels/fwd/mainloop.cuh"
#include "kernels/lab/fwd_lab_loops.cuh"

namespace fa3 {

// Paper Algorithm 1, lines 15-23: each GEMM is waited for before the softmax that needs it.
template <bool Mask, class Tr, bool S>
__device__ __forceinline__ void sequential_step(ConsumerMainloop<Tr, S>& m, float (&o)[ConsumerMainloop<Tr, S>::kOAcc],
                                                int n_block, tile::PipelineState<Tr::kStages>& st,
                                                const TurnScheduler<Tr>& turns) {
  float s[Tr::kBlockN / 2];
  m.sm.k_pipe.consumer_wait(st);  // line 16
  turns.begin();
  m.issue_qk(s, st);  // line 17
  turns.end();
  ptx::wgmma_wait_group<0>();
  tile::pin_registers(s);
  m.release_k(st);
  float rescale[2];
  m.template softmax_block<Mask>(s, n_block, rescale);  // lines 18-19
  m.rescale_o(o, rescale);
  uint32_t p_frag[Tr::kBlockN / 16][4];
  m.to_p_frag(s, p_frag);
  m.sm.v_pipe.consumer_wait(st);  // line 20
  m.issue_pv(o, p_frag, st);      // line 21
  ptx::wgmma_wait_group<0>();
  tile::pin_registers(o);
  m.release_v(st);  // line 22
  st.advance();
}

template <class Tr, bool S>
__device__ __forceinline__ void run_sequential(ConsumerMainloop<Tr, S>& m, float (&o)[ConsumerMainloop<Tr, S>::kOAcc],
                                               int n_blocks, const TurnScheduler<Tr>& turns) {
  static_assert(!Tr::kAscending, "ascending: the plain pipelined loop only");
  tile::PipelineState<Tr::kStages> st = m.next_stage;
  const int n_masked = m.masked_iterations(n_blocks);
  int it = 0;
  for (; it < n_masked; ++it) sequential_step<true>(m, o, n_blocks - 1 - it, st, turns);
  for (; it < n_blocks; ++it) sequential_step<false>(m, o, n_blocks - 1 - it, st, turns);
  m.release_q();
  m.next_stage = st;
}

// Algorithm 2 in the order of the paper's Appendix B.2 SASS. A step starts with the softmax
// of the block whose S is complete (the previous step's wait), then issues QK^T of the next
// block, rescales O while that GEMM runs, issues the PV of the softmaxed block and waits for
// both. ptxas lays this out as B.2 shows: softmax first, the O rescale between the QK^T
// HGMMAs, the PV HGMMAs packed, one wait at the end. Measured 1-5% slower than run_pipelined
// on an H100: the row max no longer runs under the PV GEMM, and the rescale holds the
// pingpong turn longer.
template <bool Mask, class Tr, bool S>
__device__ __forceinline__ void b2_step(ConsumerMainloop<Tr, S>& m, float (&o)[ConsumerMainloop<Tr, S>::kOAcc],
                                        int n_block_done,
                                        typename ConsumerMainloop<Tr, S>::Pipelined& x,
                                        const TurnScheduler<Tr>& turns) {
  m.template softmax_block<Mask>(x.s, n_block_done, x.rescale);
  m.to_p_frag(x.s, x.p_frag);
  m.sm.k_pipe.consumer_wait(x.k_st);
  m.sm.v_pipe.consumer_wait(x.v_st);
  turns.begin();
  m.issue_qk(x.s, x.k_st);          // S of the next block
  m.rescale_o(o, x.rescale);        // PV_{j-1} completed at the previous step's wait
  m.issue_pv(o, x.p_frag, x.v_st);  // O += P_j V_j
  turns.end();
  ptx::wgmma_wait_group<0>();
  tile::pin_registers(x.s);
  tile::pin_registers(o);
  m.release_k(x.k_st);
  m.release_v(x.v_st);
  x.v_st = x.k_st;
  x.k_st.advance();
}

template <class Tr, bool S>
__device__ __forceinline__ void run_b2_order(ConsumerMainloop<Tr, S>& m, float (&o)[ConsumerMainloop<Tr, S>::kOAcc],
                                             int n_blocks, const TurnScheduler<Tr>& turns) {
  static_assert(!Tr::kAscending, "ascending: the plain pipelined loop only");
  typename ConsumerMainloop<Tr, S>::Pipelined x;
  x.k_st = m.next_stage;
  const int n_masked = m.masked_iterations(n_blocks);
  m.first_qk(x.s, x.k_st, turns);  // its softmax opens step 1
  x.v_st = x.k_st;
  x.k_st.advance();
  // Step it softmaxes block it - 1, which needs the mask if it - 1 < n_masked.
  int it = 1;
  for (; it < n_blocks && it <= n_masked; ++it) b2_step<true>(m, o, n_blocks - it, x, turns);
  for (; it < n_blocks; ++it) b2_step<false>(m, o, n_blocks - it, x, turns);
  // The last block's softmax and PV.
  m.release_q();
  if (n_masked == n_blocks) m.template softmax_block<true>(x.s, 0, x.rescale);
  else m.template softmax_block<false>(x.s, 0, x.rescale);
  m.to_p_frag(x.s, x.p_frag);
  m.rescale_o(o, x.rescale);
  m.last_pv(o, x.p_frag, x.v_st, turns);
  m.next_stage = x.k_st;
}

// A tile's key blocks (n_blocks > 0) in every loop form but the production one.
template <class Tr, bool S>
__device__ __forceinline__ void run_other_loop(ConsumerMainloop<Tr, S>& m,
                                               float (&o)[ConsumerMainloop<Tr, S>::kOAcc],
                                               int n_blocks, const TurnScheduler<Tr>& turns) {
  if constexpr (Tr::kLoop == Loop::ThreeStage) lab::run_three_stage(m, o, n_blocks, turns);
  else if constexpr (Tr::kLoop == Loop::DoubleP) lab::run_double_p(m, o, n_blocks, turns);
  else if constexpr (Tr::kLoop == Loop::B2Order) run_b2_order(m, o, n_blocks, turns);
  else run_sequential(m, o, n_blocks, turns);
}

}  // namespace fa3
