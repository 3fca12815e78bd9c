// FlashAttention-3 forward (paper Algorithms 1 and 2), composed from the role modules of
// src/kernels/fwd/:
//   traits     the compile-time view of the Config, the shared-memory plan, named barriers
//   scheduler  which tile (query block, head, batch) each CTA computes, and in which order
//   producer   TMA loads of Q_i and of K_j, V_j into the s-stage pipeline (Alg. 1 lines 2-10)
//   mainloop   a consumer warpgroup's steps over the key blocks (Alg. 1 lines 15-23; Alg. 2)
//   mask       the causal diagonal and the seqlen_k tail
//   epilogue   O_i = diag(l_i)^-1 O_i, its TMA store, and L_i (Alg. 1 lines 24-25)
// and the online softmax of the tile library (tile/softmax.cuh, lines 18-19).
//
// One CTA computes O_i for blocks of block_m query rows:
//   warpgroup 0       the producer: one thread loads Q_i and streams K_j, V_j; with a Q warp
//                     (Tiles::CrossTileQWarp*) a thread of its second warp loads Q_i; the
//                     warpgroup gives its registers away.
//   warpgroups 1..W   consumers: each owns 64 query rows; S = Q K^T (SS-wgmma, or RS with Q
//                     in registers), online softmax in fp32, P in 16-bit registers,
//                     O += P V (RS-wgmma); pingpong turns between them (Section 3.1).
// Key blocks are visited from the last to the first, so the blocks that need masking (the
// causal diagonal, the seqlen_k tail) come first, while the row max is still being found
// (FwdConfig::ascending visits them first to last).
#pragma once

#include <stdint.h>

#include "kernels/fwd/epilogue.cuh"
#include "kernels/fwd/mainloop.cuh"
#include "kernels/fwd/producer.cuh"
#include "kernels/fwd/reference_loops.cuh"
#include "kernels/fwd/scheduler.cuh"
#include "kernels/fwd/traits.cuh"
#include "ptx/barrier.cuh"
#include "ptx/cluster.cuh"
#include "ptx/math.cuh"
#include "ptx/mbarrier.cuh"
#include "ptx/regs.cuh"
#include "ptx/tma.cuh"
#include "tile/fragment.cuh"
#include "tile/pipeline.cuh"

namespace fa3 {

// Algorithm 1 lines 13-25 with Algorithm 2 as its mainloop, for the tiles of a cross-tile
// CTA as one pipeline. A tile's last PV GEMM (Alg. 2 line 19) goes out in one turn with the
// next tile's first QK^T (line 4, on the other Q buffer), and the tile's epilogue (line 20)
// runs after the next tile's first softmax (line 6), under nobody's GEMM but the other
// warpgroups': the tensor cores see the tile boundary as one more step. The softmax state of
// a tile is final before the next one's first softmax, so only O is carried into the next
// tile, until its epilogue.
template <class Tr, bool SumByMma>
__device__ __forceinline__ void fwd_consumer_cross_tile(const FwdParams& p, const FwdSmem<Tr>& sm,
                                                        int wg,
                                                        ConsumerMainloop<Tr, SumByMma>& loop,
                                                        const TurnScheduler<Tr>& turns) {
  using Mainloop = ConsumerMainloop<Tr, SumByMma>;
  const uint32_t wg_rows = Tr::warpgroup_rows_offset(wg);
  // Makes the k-th tile, w, the loop's current one (Alg. 2 lines 2-3: its Q landed, its rows,
  // a fresh softmax); returns how many of its key blocks need the mask.
  auto enter_tile = [&](int k, const FwdWork<Tr>& w) {
    if constexpr (!Tr::kDynamic) tile::mbarrier_wait(sm.q_full_bar(k), sm.q_parity(k));
    loop.q_rows = sm.q_buffer(k) + wg_rows;
    loop.load_q_frags();  // (every QK^T of the tile before has completed by now)
    loop.first_row = w.first_row(wg);
    loop.softmax.init();
    return loop.masked_iterations(w.n_blocks);
  };
  int k = 0;
  FwdWork<Tr> w;
  if (consumer_work_at<Tr>(p, sm, k, &w) >= p.num_tiles) return;
  int n_masked = enter_tile(k, w);
  float o[Mainloop::kOAcc];
  tile::fill(o, 0.0f);
  typename Mainloop::Pipelined x;
  x.k_st = loop.next_stage;
  if (w.n_blocks > 0) loop.open_tile(x, w.n_blocks, n_masked, turns);  // lines 3-6
  for (;;) {
    x.k_st = warp_uniform(x.k_st);
    x.v_st = warp_uniform(x.v_st);
    if (w.n_blocks > 0) loop.pipelined_steps(o, w.n_blocks, n_masked, x, turns);  // lines 7-17
    // Every QK^T of tile k is done; its last PV (if it has keys) is still to go out.
    // Row sums in O (SumByMma): 1/l and the LSE wait for the tile's last PV; keep m.
    float inv_sum[2], lse[2], row_max[2];
    if constexpr (SumByMma) loop.softmax.copy_max(row_max);
    else loop.softmax.finalize(inv_sum, lse);
    const int first_row = loop.first_row;
    FwdWork<Tr> next = w;
    const bool more = consumer_work_at<Tr>(p, sm, k + 1, &next) < p.num_tiles;
    if (more) n_masked = enter_tile(k + 1, next);
    if (more && w.n_blocks > 0 && next.n_blocks > 0) {
      // Lines 18-19 of tile k with lines 3-6 of tile k+1, then tile k's line 20.
      loop.boundary_step(o, next.n_blocks, n_masked, x, turns, [&] {
        if constexpr (SumByMma) Mainloop::finalize_from_o(row_max, o, inv_sum, lse);
        fwd_epilogue<Tr>(p, sm, w, wg, k, first_row, loop.thread_in_wg, inv_sum, lse, o);
        tile::fill(o, 0.0f);
      });
    } else {
      if (w.n_blocks > 0) loop.last_pv(o, x.p_frag, x.v_st, turns, x.p_half);  // lines 18-19
      if constexpr (SumByMma) Mainloop::finalize_from_o(row_max, o, inv_sum, lse);
      fwd_epilogue<Tr>(p, sm, w, wg, k, first_row, loop.thread_in_wg, inv_sum, lse, o);
      if (!more) break;
      tile::fill(o, 0.0f);
      if (next.n_blocks > 0) loop.open_tile(x, next.n_blocks, n_masked, turns);
    }
    w = next;
    ++k;
  }
}

// Algorithm 1 lines 11-25 for consumer warpgroup `wg`, for every tile of this CTA: with
// Algorithm 2 as the mainloop (Loop::Pipelined), or one of the reference loop forms.
// SumByMma: the row sums by the PV GEMM (FwdConfig::row_sum_mma).
template <class Tr, bool SumByMma>
__device__ __forceinline__ void fwd_consumer(const FwdParams& p, const FwdSmem<Tr>& sm, int wg) {
  using Mainloop = ConsumerMainloop<Tr, SumByMma>;
  const int thread_in_wg = static_cast<int>(threadIdx.x % 128);
  const uint32_t wg_rows = Tr::warpgroup_rows_offset(wg);
  const TurnScheduler<Tr> turns(wg);
  Mainloop loop{p, sm, thread_in_wg, thread_in_wg % 32, 0, sm.q + wg_rows, {}, {}};
  loop.is_loader = !Tr::kWarpSpecialized && threadIdx.x == 0;
  if constexpr (Tr::kCrossTile) {
    fwd_consumer_cross_tile<Tr, SumByMma>(p, sm, wg, loop, turns);
  } else {
    consumer_tiles<Tr>(p, sm, [&](int tile, int k) {
      const FwdWork<Tr> w(p, tile);
      if constexpr (Tr::kPersistent) loop.next_stage = warp_uniform(loop.next_stage);
      if constexpr (!Tr::kWarpSpecialized)
        if (loop.is_loader) loop.loader.start(p, sm, w);
      loop.first_row = w.first_row(wg);
      // Line 13.
      float o[Mainloop::kOAcc];
      tile::fill(o, 0.0f);
      loop.softmax.init();
      if constexpr (!Tr::kDynamic) tile::mbarrier_wait(sm.q_full_bar(k), sm.q_parity(k));  // line 14
      if (w.n_blocks > 0) {  // lines 15-23
        if constexpr (Tr::kLoop == Loop::Pipelined) loop.run_pipelined(o, w.n_blocks, turns);
        else run_other_loop(loop, o, w.n_blocks, turns);
      } else {
        loop.release_q();
      }
      float inv_sum[2], lse[2];
      loop.finalize(o, inv_sum, lse);  // line 24
      fwd_epilogue<Tr>(p, sm, w, wg, k, loop.first_row, thread_in_wg, inv_sum, lse, o);  // 25
    });
  }
  // Shared memory must outlive the reads of the last O store.
  if (thread_in_wg == 0) ptx::bulk_wait_group_read<0>();
}

// The kernel: Algorithm 1 line 1 (the pipeline's barriers), then the roles of lines 2-10 (the
// producer) and 11-25 (the consumers).
template <class C>
__device__ __forceinline__ void fwd_kernel(const FwdParams& p) {
  using Tr = FwdTraits<C>;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  // The dynamic shared-memory base is only guaranteed 16-byte aligned; swizzled tiles need
  // 1024 (FwdSmemLayout reserves the slack).
  const uint32_t base = (ptx::smem_address(smem_raw) + 1023u) & ~1023u;
  const FwdSmem<Tr> sm(base);

  if (threadIdx.x == 0) {
    for (int b = 0; b < Tr::kQBuffers; ++b) {
      ptx::mbarrier_init(sm.q_full_bar(b), 1);
      // Every consumer thread's arrival (release_q, fwd_epilogue).
      ptx::mbarrier_init(sm.q_empty_bar(b), 128 * Tr::kConsumers);
      if constexpr (Tr::kQWarp) ptx::mbarrier_init(sm.tile_ready_bar(b), 1);
    }
    if constexpr (Tr::kQWarp) ptx::mbarrier_init(sm.draw_go, 1);
    sm.k_pipe.init(4 * Tr::kConsumers);
    sm.v_pipe.init(4 * Tr::kConsumers);
    ptx::fence_mbarrier_init();
  }
  if constexpr (Tr::kRowSumMma) {
    // Every V stage's chunk after its head_dim columns: 16-bit ones (the PV GEMM's 8 extra
    // columns read the first 8 of them), written before the barrier below, read by wgmma.
    constexpr uint32_t kOnePair = Tr::kIsBF16 ? 0x3f803f80u : 0x3c003c00u;
    for (int st = 0; st < Tr::kStages; ++st)
      for (uint32_t i = threadIdx.x; i < Tr::KVTile::kChunkBytes / 4; i += blockDim.x)
        ptx::st_shared_u32(sm.v_stage(st) + Tr::KVTile::kBytes + 4 * i, kOnePair);
    ptx::fence_proxy_async_shared();
  }
  // In a cluster, the other CTAs' loads and releases reach this CTA's barriers: all must be
  // initialized first.
  if constexpr (Tr::kCluster > 1) {
    ptx::cluster_arrive_release();
    ptx::cluster_wait_acquire();
  } else {
    __syncthreads();
  }

  // Warp-uniform to the compiler, not only in fact: a consumer's first row, and from it
  // (causal) how many of its key blocks take the mask, depend on it. Read from threadIdx,
  // it made ptxas keep the loop counts, and so the K/V stage index and phase and every
  // wgmma descriptor, in per-thread registers (R2UR, LOP3 and IMAD.MOV per GEMM: 11% more
  // instructions per key block in the causal d128 kernel than the non-causal one, ncu).
  const int warpgroup = warp_uniform(static_cast<int>(threadIdx.x / 128));
  if constexpr (!Tr::kWarpSpecialized) {
    fwd_consumer<Tr, false>(p, sm, warpgroup);
  } else if (warpgroup == 0) {
    // Line 3: the producer needs few registers; give them to the consumers.
    ptx::setmaxnreg_dec<Tr::kProducerRegs>();
    if (threadIdx.x == 0) fwd_producer<Tr>(p, sm);
    if (Tr::kQWarp && threadIdx.x == 32) fwd_q_loader<Tr>(p, sm);
  } else {
    ptx::setmaxnreg_inc<Tr::kConsumerRegs>();  // line 12
    fwd_consumer<Tr, Tr::kRowSumMma>(p, sm, warpgroup - 1);
  }
  // A CTA's shared memory must outlive the other CTAs' releases of its stages (arrivals on
  // its empty barriers): no CTA exits before every CTA of the cluster is done.
  if constexpr (Tr::kCluster > 1) {
    ptx::cluster_arrive_release();
    ptx::cluster_wait_acquire();
  }
}

}  // namespace fa3
