// The forward mainloop of one consumer warpgroup (paper Algorithm 1 lines 15-23, Algorithm 2
// lines 3-19): its state (Q rows, online softmax, the K/V stage it is at), the GEMMs of a
// step (S = Q K_j^T, O += P V_j), the softmax of a block, and the steps of the pipelined loop:
// the first block, the steady-state step, the last PV, and (cross-tile kernels) the step
// that joins two tiles. The loop forms of the paper's ablation are in fwd/reference_loops.cuh,
// the lab's in lab/fwd_lab_loops.cuh.
#pragma once

#include <stdint.h>

#include <type_traits>

#include "kernels/fwd/mask.cuh"
#include "kernels/fwd/producer.cuh"
#include "kernels/fwd/traits.cuh"
#include "ptx/barrier.cuh"
#include "ptx/wgmma.cuh"
#include "tile/fragment.cuh"
#include "tile/gemm.cuh"
#include "tile/pipeline.cuh"
#include "tile/softmax.cuh"

namespace fa3 {

// Stands in for a half-block flag (FwdConfig::half_blocks) in kernels without half blocks:
// always false, and whatever is stored in it is dropped.
struct NoHalfFlag {
  __device__ __forceinline__ NoHalfFlag& operator=(bool) { return *this; }
  __device__ __forceinline__ constexpr operator bool() const { return false; }
};

// Pingpong (paper Section 3.1): consumer warpgroups take turns at issuing their GEMMs, in
// round-robin order, through one named barrier per warpgroup. A turn ends as soon as the
// GEMMs are issued, so the next warpgroup's GEMMs queue behind them on the tensor cores while
// this warpgroup does its softmax. Without pingpong every call is a no-op.
template <class Tr>
struct TurnScheduler {
  int wg;
  static constexpr uint32_t kThreads = 2 * 128;  // the waiting warpgroup + the one handing over

  __device__ __forceinline__ explicit TurnScheduler(int consumer_wg) : wg(consumer_wg) {
    // Warpgroup 0 goes first: its predecessor (the last one) hands it the first turn.
    if (Tr::kPingpong && wg == Tr::kConsumers - 1)
      ptx::named_barrier_arrive(kBarrierTurnBase + 0, kThreads);
  }
  __device__ __forceinline__ void begin() const {
    if (Tr::kPingpong) ptx::named_barrier_sync(kBarrierTurnBase + wg, kThreads);
  }
  __device__ __forceinline__ void end() const {
    if (Tr::kPingpong)
      ptx::named_barrier_arrive(kBarrierTurnBase + (wg + 1) % Tr::kConsumers, kThreads);
  }
};

// The mainloop state of one consumer warpgroup (query rows [64 wg, 64 wg + 64) of the block).
// SumByMma: the softmax row sums come from the PV GEMM (FwdConfig::row_sum_mma), 8 columns
// wider than O; otherwise from fp32 FADDs.
template <class Tr, bool SumByMma = false>
struct ConsumerMainloop {
  static_assert(SumByMma == Tr::kRowSumMma, "the PV GEMM sums rows against V's ones chunk");
  // A consumer thread's O accumulators: its part of the 64 x head_dim O, then (SumByMma)
  // of the PV GEMM's 8 columns of row sums.
  static constexpr int kOAcc = Tr::kHeadDim / 2 + (SumByMma ? 4 : 0);
  static constexpr bool kHalfBlocks = Tr::kHalfBlocks;
  const FwdParams& p;
  const FwdSmem<Tr>& sm;
  int thread_in_wg, lane, first_row;
  uint32_t q_rows;  // this warpgroup's rows of the Q tile (of the tile's Q buffer)
  tile::OnlineSoftmax<Tr::kConditionalRescale, Tr::kIntMax, SumByMma> softmax;
  tile::PipelineState<Tr::kStages> next_stage;  // K/V stage of the next key block, across tiles
  bool is_loader = false;     // without warp specialization: this thread issues the loads
  InlineLoader<Tr> loader{};
  // Q in registers (FwdConfig::q_in_registers): this warpgroup's Q rows as the A operands of
  // the QK^T GEMM, loaded by load_q_frags once the tile's Q has landed (and every QK^T of the
  // tile before it has completed: the GEMMs read these registers while in flight).
  using QFrags = uint32_t[Tr::kHeadDim / 16][4];
  struct NoQFrags {};
  std::conditional_t<Tr::kQInRegisters, QFrags, NoQFrags> q_frags;

  __device__ __forceinline__ void load_q_frags() {
    if constexpr (Tr::kQInRegisters)
      tile::load_a_operands<typename Tr::QTile>(q_frags, q_rows, thread_in_wg);
  }

  // Half-width blocks (FwdConfig::half_blocks). A block is half-width for this warpgroup when
  // every key in its upper half is masked for all 64 of its rows (after the last row's
  // causal diagonal, or past seqlen_k): QK^T, the softmax and PV then cover the first
  // block_n/2 keys alone. S and P of the block live in the first halves of the full-width
  // arrays (the wgmma layout of an N = block_n/2 product is the first half of the
  // N = block_n one). The other half of S is
  // left as it was and never read; the other half of P is zeroed (to_p_frag), which keeps a
  // full-width PV of the block exact and, measured, keeps ptxas from serializing the
  // kernel's wgmmas (stale P registers stay live otherwise). Half is a compile-time choice
  // of whole steps (with_half): ptxas serializes every wgmma of a kernel where one group's
  // issue is split over branches.
  __device__ __forceinline__ bool upper_half_masked(int n_block) const {
    if constexpr (!kHalfBlocks) return false;
    return fa3::upper_half_masked<Tr>(p, first_row, n_block);
  }
  // The keys of a block a step covers, and the first part of S and P that holds them.
  template <bool Half>
  static constexpr int kKeys = Half ? Tr::kBlockN / 2 : Tr::kBlockN;
  template <bool Half>
  using SPart = float[kKeys<Half> / 2];
  template <bool Half>
  using PPart = uint32_t[kKeys<Half> / 16][4];
  template <bool Half>
  __device__ __forceinline__ static SPart<Half>& s_part(float (&s)[Tr::kBlockN / 2]) {
    return reinterpret_cast<SPart<Half>&>(s);
  }
  template <bool Half>
  __device__ __forceinline__ static PPart<Half>& p_part(uint32_t (&p_frag)[Tr::kBlockN / 16][4]) {
    return reinterpret_cast<PPart<Half>&>(p_frag);
  }

  // S = Q_i K_j^T for the key block in K stage `st` (one committed wgmma group, not waited).
  template <bool Half = false>
  __device__ __forceinline__ void issue_qk(float (&s)[Tr::kBlockN / 2],
                                           const tile::PipelineState<Tr::kStages>& st) {
    if constexpr (Tr::kQInRegisters)
      tile::warpgroup_gemm_rs_abt<Tr::kMma, kKeys<Half>, typename Tr::KVTile, Tr::kHeadDim>(
          s_part<Half>(s), q_frags, sm.k_stage(st.index));
    else
      tile::warpgroup_gemm_ss_abt<Tr::kMma, kKeys<Half>, typename Tr::QTile, typename Tr::KVTile>(
          s_part<Half>(s), q_rows, 0, sm.k_stage(st.index));
  }
  // O += P V_j for the key block in V stage `st` (one committed wgmma group, not waited).
  template <bool Half = false>
  __device__ __forceinline__ void issue_pv(float (&o)[kOAcc],
                                           uint32_t (&p_frag)[Tr::kBlockN / 16][4],
                                           const tile::PipelineState<Tr::kStages>& st) const {
    tile::warpgroup_gemm_rs_ab<Tr::kMma, Tr::kHeadDim, typename Tr::KVTile, kKeys<Half>,
                     SumByMma ? 8 : 0>(o, p_frag, sm.v_stage(st.index));
  }
  // Lines 18-19: for key block n_block, masks the scores (Mask: the block straddles the causal
  // diagonal or seqlen_k), turns them into P~ in place, and returns the factor O must be
  // rescaled by. Unmasked blocks carry no masking code at all.
  template <bool Mask, bool Half = false>
  __device__ __forceinline__ void softmax_block(float (&s)[Tr::kBlockN / 2], int n_block,
                                                float (&rescale)[2]) {
    if (Mask) apply_mask<Tr>(s_part<Half>(s), p, thread_in_wg, first_row, n_block * Tr::kBlockN);
    softmax.update(s_part<Half>(s), p.scale_log2, rescale);
  }
  // P~ in fp32 to the A operands of the PV GEMM, in every loop form (Half: the first half
  // of the block's, and the rest 0).
  template <bool Half = false>
  __device__ __forceinline__ static void to_p_frag(float (&s)[Tr::kBlockN / 2],
                                                   uint32_t (&p_frag)[Tr::kBlockN / 16][4]) {
    tile::acc_to_a_operands<Tr::kIsBF16, kKeys<Half>>(s_part<Half>(s), p_part<Half>(p_frag));
    if constexpr (Half)
#pragma unroll
      for (int kk = Tr::kBlockN / 32; kk < Tr::kBlockN / 16; ++kk)
#pragma unroll
        for (int r = 0; r < 4; ++r) p_frag[kk][r] = 0u;
  }
  // Blocks are visited from the last to the first (kAscending: the first to the last), and
  // the ones that need masking are the last ones: this many iterations at the start of the
  // loop (kAscending: at its end).
  __device__ __forceinline__ int masked_iterations(int n_blocks) const {
    return masked_blocks<Tr>(p, first_row, n_blocks);
  }
  __device__ __forceinline__ static void rescale_o(float (&o)[kOAcc],
                                                   const float (&rescale)[2]) {
    // The lazy row max (RowMax::Lazy*): the softmax keeps a row's max until it grows by more than
    // tile::kLazyMaxSlack, and the factor is exactly 1 until then, so a warp none of whose
    // rows moved its max skips the multiplies (after the first blocks, nearly always).
    if constexpr (Tr::kConditionalRescale)
      if (!__any_sync(0xffffffffu, rescale[0] != 1.0f || rescale[1] != 1.0f)) return;
#pragma unroll
    for (int e = 0; e < kOAcc; ++e) o[e] *= rescale[tile::AccLayout::half(e)];  // l too
  }
  // SumByMma: lines 24-25's factors from the rows' max and the sums the PV GEMM left in O's
  // last accumulators (every one of their columns holds its row's l).
  __device__ __forceinline__ static void finalize_from_o(const float (&row_max)[2],
                                                         const float (&o)[kOAcc],
                                                         float (&inv_sum)[2], float (&lse)[2]) {
    const float l[2] = {o[Tr::kHeadDim / 2], o[Tr::kHeadDim / 2 + 2]};
    tile::row_factors(row_max, l, inv_sum, lse);
  }
  // Line 24 for the tile whose last PV has completed: 1/l and the LSE per row.
  __device__ __forceinline__ void finalize(const float (&o)[kOAcc], float (&inv_sum)[2],
                                           float (&lse)[2]) const {
    if constexpr (SumByMma) finalize_from_o(softmax.row_max, o, inv_sum, lse);
    else softmax.finalize(inv_sum, lse);
  }
  // One lane per warp hands a stage back, once the warp's wgmma reading it has completed.
  // Without warp specialization the loading thread then refills it (waiting for the others).
  __device__ __forceinline__ void release_k(const tile::PipelineState<Tr::kStages>& st) {
    if (lane == 0) sm.k_pipe.consumer_release(st);
    if constexpr (!Tr::kWarpSpecialized)
      if (is_loader) loader.load_k(p, sm);
  }
  __device__ __forceinline__ void release_v(const tile::PipelineState<Tr::kStages>& st) {
    if (lane == 0) sm.v_pipe.consumer_release(st);
    if constexpr (!Tr::kWarpSpecialized)
      if (is_loader) loader.load_v(p, sm);
  }
  // Persistent: once every QK^T GEMM of the tile has completed, Q_i may be overwritten by the
  // next tile's Q while the last PV GEMM and the epilogue run. (With O over Q the epilogue
  // releases it instead, once O's store has read it.)
  // Every thread arrives, after its own read of the buffer's tile slot: a lane-0 arrival
  // orders only lane 0's read before the producer's next write of the slot (racecheck
  // reported the other lanes' reads against it).
  __device__ __forceinline__ void release_q() const {
    if constexpr (Tr::kPersistent && !Tr::kOOverQ) ptx::mbarrier_arrive(sm.q_empty);
  }


  // Half-width blocks: calls body(std::bool_constant<half>) (half only where the kernel has
  // half-width blocks), so that each arm holds whole wgmma groups, issue to wait.
  template <class Body>
  __device__ __forceinline__ static void with_half(bool half, Body&& body) {
    if constexpr (kHalfBlocks) {
      if (half) body(std::true_type{});
      else body(std::false_type{});
    } else {
      body(std::false_type{});
    }
  }

  // The pipelined loops' opening: S = Q K^T of the first visited block (the last one;
  // kAscending: the first), issued in a turn of its own and waited for.
  template <bool Half = false>
  __device__ __forceinline__ void first_qk(float (&s)[Tr::kBlockN / 2],
                                           const tile::PipelineState<Tr::kStages>& st,
                                           const TurnScheduler<Tr>& turns) {
    sm.k_pipe.consumer_wait(st);
    turns.begin();
    issue_qk<Half>(s, st);
    turns.end();
    ptx::wgmma_wait_group<0>();
    tile::pin_registers(s);
    release_k(st);
  }
  // The pipelined loops' close: O += P V of the last block, in a turn of its own, waited for.
  // (half: the block is half-width.)
  __device__ __forceinline__ void last_pv(float (&o)[kOAcc],
                                          uint32_t (&p_frag)[Tr::kBlockN / 16][4],
                                          const tile::PipelineState<Tr::kStages>& st,
                                          const TurnScheduler<Tr>& turns, bool half = false) {
    with_half(half, [&](auto half_tag) {
      sm.v_pipe.consumer_wait(st);
      turns.begin();
      issue_pv<decltype(half_tag)::value>(o, p_frag, st);
      turns.end();
      ptx::wgmma_wait_group<0>();
      tile::pin_registers(o);
      release_v(st);
    });
  }
  // Paper Algorithm 2, lines 3-6: first_qk, then its m, P and l. O is still 0: the rescale
  // factor it leaves behind (0) changes nothing. Returns whether the block was half-width.
  __device__ __forceinline__ bool first_block(float (&s)[Tr::kBlockN / 2],
                                              uint32_t (&p_frag)[Tr::kBlockN / 16][4],
                                              float (&rescale)[2],
                                              const tile::PipelineState<Tr::kStages>& st,
                                              int n_block, bool masked,
                                              const TurnScheduler<Tr>& turns) {
    const bool half = masked && upper_half_masked(n_block);
    with_half(half, [&](auto half_tag) {
      constexpr bool kHalf = decltype(half_tag)::value;
      first_qk<kHalf>(s, st, turns);
      if (masked) softmax_block<true, kHalf>(s, n_block, rescale);
      else softmax_block<false>(s, n_block, rescale);
      to_p_frag<kHalf>(s, p_frag);
    });
    return half;
  }

  // Paper Algorithm 2, lines 3-19: the QK^T of block j is issued together with the PV of
  // block j-1 (S_next and P_cur live in registers side by side), and the softmax of block j
  // is placed before the wait for the PV GEMM. ptxas, however, hoists that wait to just after
  // the row max, so only the max runs under the GEMM (fa3-sass's gemm_softmax_overlap check
  // counts what does); the lab's double-P loop is the form whose softmax stays under it.
  struct Pipelined {
    float s[Tr::kBlockN / 2];                   // S_next, then P_next in fp32
    uint32_t p_frag[Tr::kBlockN / 16][4];       // P_cur as the A operand of the PV GEMM
    float rescale[2];                           // O's factor from the latest softmax
    tile::PipelineState<Tr::kStages> k_st;      // stage of the block whose QK^T is issued next
    tile::PipelineState<Tr::kStages> v_st;      // stage of the block P_cur belongs to
    // Half-width blocks: P_cur's block is half-width. (Other kernels carry no flag at all: their
    // code stays what it was without half blocks.)
    std::conditional_t<kHalfBlocks, bool, NoHalfFlag> p_half{};
  };

  // Lines 8-16 around two hooks: QK^T of the block in stage x.k_st and PV of P_cur (V in
  // x.v_st) in one turn; softmax_and_wait() softmaxes S_next and ends with the wait for the
  // PV GEMM (lines 13-14); after_pv() runs once O is complete, before P_next is converted.
  // QkHalf, PvHalf (half-width blocks): S_next's block, P_cur's block is half-width.
  template <bool QkHalf = false, bool PvHalf = false, class SoftmaxAndWait, class AfterPv>
  __device__ __forceinline__ void step(float (&o)[kOAcc], Pipelined& x,
                                       const TurnScheduler<Tr>& turns,
                                       SoftmaxAndWait&& softmax_and_wait, AfterPv&& after_pv) {
    // Without warp specialization ptxas keeps the stages per thread (see warp_uniform).
    if constexpr (!Tr::kWarpSpecialized) {
      x.k_st = warp_uniform(x.k_st);
      x.v_st = warp_uniform(x.v_st);
    }
    sm.k_pipe.consumer_wait(x.k_st);  // line 8
    sm.v_pipe.consumer_wait(x.v_st);  // line 10
    turns.begin();
    issue_qk<QkHalf>(x.s, x.k_st);          // line 9: S_next, not waited for
    issue_pv<PvHalf>(o, x.p_frag, x.v_st);  // line 11: O += P_cur V_{j-1}, not waited for
    turns.end();
    ptx::wgmma_wait_group<1>();  // line 12: the older group, S_next, is done
    tile::pin_registers(x.s);
    release_k(x.k_st);
    softmax_and_wait();  // lines 13-14
    release_v(x.v_st);   // line 15
    after_pv();
    to_p_frag<QkHalf>(x.s, x.p_frag);  // line 16
    x.v_st = x.k_st;
    x.k_st.advance();
    x.p_half = QkHalf;
  }

  // Lines 8-16 for key block n_block. With half-width blocks a masked block may be half-width,
  // and so may the block before it in visiting order (PvMayBeHalf), whose PV this step issues.
  template <bool Mask, bool PvMayBeHalf = Mask>
  __device__ __forceinline__ void pipelined_step(float (&o)[kOAcc], int n_block,
                                                 Pipelined& x, const TurnScheduler<Tr>& turns) {
    // A half block's P is zero past its first half (to_p_frag), so a full-width PV of it is
    // exact: masked steps, rare in the loop, get arms for their QK^T only (fewer copies of
    // the step, less code for the instruction cache).
    if constexpr (Mask) {
      with_half(upper_half_masked(n_block), [&](auto qk_tag) {
        pipelined_step_as<true, decltype(qk_tag)::value, false>(o, n_block, x, turns);
      });
    } else if constexpr (PvMayBeHalf) {
      with_half(x.p_half, [&](auto pv_tag) {
        pipelined_step_as<false, false, decltype(pv_tag)::value>(o, n_block, x, turns);
      });
    } else {
      pipelined_step_as<false, false, false>(o, n_block, x, turns);
    }
  }
  template <bool Mask, bool QkHalf, bool PvHalf>
  __device__ __forceinline__ void pipelined_step_as(float (&o)[kOAcc], int n_block,
                                                    Pipelined& x, const TurnScheduler<Tr>& turns) {
    static_assert(Mask || !QkHalf, "only a masked block is half-width");
    step<QkHalf, PvHalf>(o, x, turns, [&] {
      if constexpr (Tr::kExpAfterPvWait) {
        // Line 13 in two halves: the row max under the PV GEMM, the exponentials after it.
        if (Mask) apply_mask<Tr>(x.s, p, thread_in_wg, first_row, n_block * Tr::kBlockN);
        float base[2];
        softmax.update_max(x.s, p.scale_log2, base, x.rescale);
        ptx::wgmma_wait_group<0>();  // line 14
        tile::pin_registers(o);
        // + 0 * (an accumulator of each row): the exponentials cannot start before the wait.
        // (__fmul_rn, not a bit mask: reading an accumulator as an integer made ptxas
        // serialize the wgmmas.) seqlen_q > 0, so the factor is +0 at run time.
        const float zero = static_cast<float>(p.seqlen_q >> 31);
        base[0] += __fmul_rn(o[0], zero);
        base[1] += __fmul_rn(o[2], zero);
        softmax.update_exp(x.s, p.scale_log2, base, x.rescale);
      } else {
        softmax_block<Mask, QkHalf>(x.s, n_block, x.rescale);  // line 13, under the PV GEMM
        ptx::wgmma_wait_group<0>();                            // line 14
        tile::pin_registers(o);
      }
    }, [&] { rescale_o(o, x.rescale); });
  }

  // Descending, the masked blocks are the first n_masked visited; ascending, the last.
  __device__ __forceinline__ static bool first_visited_masked(int n_blocks, int n_masked) {
    return Tr::kAscending ? n_masked == n_blocks : n_masked > 0;
  }
  // Lines 3-6 for a tile of n_blocks > 0 key blocks (n_masked of them masked): x.k_st is the
  // stage of its first block.
  __device__ __forceinline__ void open_tile(Pipelined& x, int n_blocks, int n_masked,
                                            const TurnScheduler<Tr>& turns) {
    x.p_half = first_block(x.s, x.p_frag, x.rescale, x.k_st, visited_block<Tr>(0, n_blocks),
                           first_visited_masked(n_blocks, n_masked), turns);
    x.v_st = x.k_st;
    x.k_st.advance();
  }
  // Lines 7-17: the steps after open_tile. Leaves the last block's PV to the caller.
  __device__ __forceinline__ void pipelined_steps(float (&o)[kOAcc], int n_blocks,
                                                  int n_masked, Pipelined& x,
                                                  const TurnScheduler<Tr>& turns) {
    int it = 1;  // line 7
    if constexpr (Tr::kAscending) {
      for (; it < n_blocks - n_masked; ++it) pipelined_step<false>(o, it, x, turns);
      for (; it < n_blocks; ++it) pipelined_step<true>(o, it, x, turns);
    } else {
      for (; it < n_masked; ++it) pipelined_step<true>(o, n_blocks - 1 - it, x, turns);
      // The first unmasked step issues the PV of the last masked block (visited by the loop
      // above, or first: by open_tile or a boundary step).
      if constexpr (kHalfBlocks)
        if (it < n_blocks) pipelined_step<false, true>(o, n_blocks - 1 - it++, x, turns);
      for (; it < n_blocks; ++it) pipelined_step<false>(o, n_blocks - 1 - it, x, turns);
    }
  }

  __device__ __forceinline__ void run_pipelined(float (&o)[kOAcc], int n_blocks,
                                                const TurnScheduler<Tr>& turns) {
    Pipelined x;
    x.k_st = next_stage;
    const int n_masked = masked_iterations(n_blocks);
    open_tile(x, n_blocks, n_masked, turns);
    pipelined_steps(o, n_blocks, n_masked, x, turns);
    // Lines 18-19: the last PV.
    release_q();
    last_pv(o, x.p_frag, x.v_st, turns, x.p_half);
    next_stage = x.k_st;
  }

  // Cross-tile kernels: the last PV of one tile (P in x.p_frag, V in stage x.v_st) and the
  // first QK^T of the next (on q_rows, K in stage x.k_st) in one turn, as a pipelined step
  // does within a tile; the next tile's first softmax (its state already reset) runs under
  // the PV, then `epilogue` finishes the previous tile's O once the PV is done (and leaves
  // O zeroed for the next tile).
  template <class Epilogue>
  __device__ __forceinline__ void boundary_step(float (&o)[kOAcc], int next_n_blocks,
                                                int next_n_masked, Pipelined& x,
                                                const TurnScheduler<Tr>& turns,
                                                Epilogue&& epilogue) {
    // (upper_half_masked reads the rows of the next tile: enter_tile has set them. The
    // previous tile's last PV goes at full width: exact, see pipelined_step.)
    const bool qk_half = kHalfBlocks && first_visited_masked(next_n_blocks, next_n_masked) &&
                         upper_half_masked(visited_block<Tr>(0, next_n_blocks));
    with_half(qk_half, [&](auto qk_tag) {
      constexpr bool kQkHalf = decltype(qk_tag)::value;
      step<kQkHalf, false>(o, x, turns, [&] {
        const int n_block = visited_block<Tr>(0, next_n_blocks);
        if (first_visited_masked(next_n_blocks, next_n_masked))
          softmax_block<true, kQkHalf>(x.s, n_block, x.rescale);
        else softmax_block<false>(x.s, n_block, x.rescale);
        ptx::wgmma_wait_group<0>();
        tile::pin_registers(o);
      }, epilogue);
    });
  }
};

}  // namespace fa3
