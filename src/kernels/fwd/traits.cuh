// The forward kernel's compile-time view of its Config (FwdTraits), its shared-memory
// addresses (FwdSmem) and its named barriers: what every role module of the forward family
// (fwd/scheduler, producer, mainloop, epilogue) is written against.
#pragma once

#include <stdint.h>

#include "kernels/fwd_config.h"
#include "kernels/fwd_params.h"
#include "tile/pipeline.cuh"
#include "tile/smem_tile.cuh"

namespace fa3 {

// Named barrier ids of the forward kernel (0 is __syncthreads).
enum FwdBarrier : uint32_t {
  kBarrierEpilogueBase = 1,  // + consumer warpgroup index: its O tile is in shared memory
  kBarrierTurnBase = 4,      // + consumer warpgroup index: its turn to issue GEMMs (pingpong)
};

// Compile-time view of one FwdConfig (C::value), with the types its code needs.
template <class C>
struct FwdTraits {
  static constexpr FwdConfig kCfg = C::value;
  static_assert(fwd_config_is_valid(kCfg), "invalid forward config");
  static constexpr bool kIsBF16 = kCfg.dtype == DType::BF16;
  static constexpr ptx::MmaType kMma = kIsBF16 ? ptx::MmaType::BF16 : ptx::MmaType::F16;
  static constexpr int kHeadDim = kCfg.head_dim;
  static constexpr int kBlockM = kCfg.block_m;
  static constexpr int kBlockN = kCfg.block_n;
  static constexpr int kStages = kCfg.stages;
  static constexpr int kConsumers = kCfg.consumer_warpgroups;
  static constexpr bool kCausal = kCfg.causal;
  static constexpr Loop kLoop = kCfg.loop;
  static constexpr bool kPingpong = kCfg.pingpong;
  static constexpr bool kPersistent = kCfg.persistent();
  static constexpr bool kConditionalRescale = kCfg.conditional_rescale();
  static constexpr bool kIntMax = kCfg.int_max();
  static constexpr bool kWarpSpecialized = kCfg.warp_specialized();
  static constexpr int kCluster = kCfg.cluster_m;
  static constexpr bool kAscending = kCfg.ascending;
  static constexpr bool kCrossTile = kCfg.cross_tile();
  static constexpr bool kQWarp = kCfg.q_warp();
  static constexpr bool kExpAfterPvWait = kCfg.exp_after_pv_wait;
  static constexpr bool kHalfBlocks = kCfg.half_blocks;
  static constexpr bool kQInRegisters = kCfg.q_in_registers;
  static constexpr bool kEvictFirstQO = kCfg.evict_first_q_o;
  static constexpr bool kEvictLastKV = kCfg.evict_last_kv;
  // FwdConfig::row_sum_mma: the softmax row sums by the PV GEMM (ConsumerMainloop's
  // SumByMma); such a kernel serves calls without an LSE only (the runtime runs its twin
  // without row_sum_mma for the others).
  static constexpr bool kRowSumMma = kCfg.row_sum_mma;
  // Causal persistent kernels hand tiles out through a global counter (longest first), and
  // so do non-causal ones with FwdConfig::dynamic_schedule (in the static walk's order).
  static constexpr bool kDynamic = kCfg.draws_tiles();
  // With a Q warp and the dynamic scheduler: the Q warp draws a CTA's next tile once the
  // K/V thread has issued all but this many of the current tile's blocks. Drawing at the
  // start of the tile measured the same on the paper's grid, but binds a tile to a CTA
  // before anyone knows which CTA frees up first: with a few tiles per CTA the
  // longest-first order then no longer evens out the ends. Drawing after the last block (0)
  // left the next Q late again (d128 causal -0.5 to -2.6% on an H100).
  static constexpr int kDrawLead = 2;
  static constexpr int kProducerRegs = kCfg.producer_regs();
  static constexpr int kConsumerRegs = kCfg.consumer_regs();
  static constexpr FwdSmemLayout kSmem = FwdSmemLayout::of(kCfg);
  static constexpr int kQBuffers = static_cast<int>(kSmem.q_buffers);
  static constexpr uint32_t kTileSlotBytes = fwd_tile_slot_bytes(kSmem.q_buffers);
  // O is staged in Q's buffer: every kernel but the persistent one-tile-at-a-time ones with
  // room for an O tile of their own (FwdSmemLayout::of). Persistent ones (kOOverQ) then
  // release Q for the next tile only once O's store has read it.
  static constexpr bool kOInQBuffer = kSmem.o_over_q();
  // Three Q buffers (Tiles::CrossTileQWarp3): a Q buffer holding a stored O is handed back by the thread that
  // issued the store in the next tile's epilogue (fwd_epilogue), not right after the store;
  // the other threads hand it back in its own epilogue.
  static constexpr bool kLateQRelease = kCfg.three_q_buffers();
  // Tiles::CrossTileQWarpStoresO: the Q warp stores O; the consumers only write it to shared
  // memory.
  static constexpr bool kQWarpStoresO = kCfg.q_warp_stores_o();
  static constexpr bool kOOverQ = kPersistent && kOInQBuffer;

  using QTile = tile::SwizzledTile<kBlockM, kHeadDim>;   // Q_i, and O_i
  using KVTile = tile::SwizzledTile<kBlockN, kHeadDim>;  // one stage of K or V
  using KVPipe = tile::TmaPipeline<kStages, kCluster>;
  static_assert(QTile::kBytes == kSmem.q_bytes && KVTile::kBytes == kSmem.kv_stage_bytes, "");
  static constexpr uint32_t kRowsPerWarpgroup = 64;
  // Where consumer warpgroup wg's rows start in each 64-column chunk of the Q (and O) tile.
  __device__ __forceinline__ static uint32_t warpgroup_rows_offset(int wg) {
    return wg * kRowsPerWarpgroup * 128;
  }
};

// Shared-memory addresses of one CTA.
template <class Tr>
struct FwdSmem {
  uint32_t q, k, v, o;  // tile bases (1024-byte aligned); o == q unless O has its own tile
  uint32_t q_full;      // mbarrier per Q buffer: Q_i landed
  uint32_t q_empty;     // mbarrier per Q buffer (persistent): the consumers are done with Q_i
  uint32_t tile_slot;   // 16 bytes per Q buffer (dynamic scheduler): the tile its Q_i belongs
                        // to (tile_record), set with q_full (Q warp: with tile_ready)
  uint32_t tile_ready;  // mbarrier per Q buffer (Q warp, dynamic): the Q warp published the
                        // buffer's tile, for the K/V thread
  uint32_t draw_go;     // mbarrier (Q warp, dynamic): the K/V thread is kDrawLead blocks
                        // from the end of the current tile; the Q warp may draw the next
  typename Tr::KVPipe k_pipe, v_pipe;

  __device__ __forceinline__ explicit FwdSmem(uint32_t base) {
    constexpr uint32_t kQ = Tr::kQBuffers;
    q = base + Tr::kSmem.q_offset;
    k = base + Tr::kSmem.k_offset;
    v = base + Tr::kSmem.v_offset;
    o = base + Tr::kSmem.o_offset;
    const uint32_t bars = base + Tr::kSmem.barrier_offset;
    q_full = bars;
    q_empty = bars + 8 * kQ;
    k_pipe = {bars + 16 * kQ, bars + 16 * kQ + 8 * Tr::kStages};
    v_pipe = {bars + 16 * kQ + 16 * Tr::kStages, bars + 16 * kQ + 24 * Tr::kStages};
    tile_slot = bars + 16 * kQ + 32 * Tr::kStages;
    tile_ready = tile_slot + Tr::kTileSlotBytes;
    draw_go = tile_ready + 8 * kQ;
  }
  __device__ __forceinline__ uint32_t k_stage(uint32_t s) const { return k + s * Tr::KVTile::kBytes; }
  __device__ __forceinline__ uint32_t v_stage(uint32_t s) const { return v + s * Tr::kSmem.v_stage_bytes; }
  // The CTA's k-th tile uses Q buffer k % kQBuffers, for the (k / kQBuffers)-th time: the
  // parity its barriers are waited with. O is staged over that buffer or in its own tile.
  __device__ __forceinline__ static int q_index(int k) { return k % Tr::kQBuffers; }
  __device__ __forceinline__ static uint32_t q_parity(int k) { return (k / Tr::kQBuffers) & 1; }
  __device__ __forceinline__ uint32_t q_buffer(int k) const { return q + q_index(k) * Tr::QTile::kBytes; }
  __device__ __forceinline__ uint32_t o_buffer(int k) const { return Tr::kOInQBuffer ? q_buffer(k) : o; }
  __device__ __forceinline__ uint32_t q_full_bar(int k) const { return q_full + 8 * q_index(k); }
  __device__ __forceinline__ uint32_t q_empty_bar(int k) const { return q_empty + 8 * q_index(k); }
  __device__ __forceinline__ uint32_t tile_slot_of(int k) const { return tile_slot + 16 * q_index(k); }
  __device__ __forceinline__ uint32_t tile_ready_bar(int k) const { return tile_ready + 8 * q_index(k); }
};

// x from lane 0 of the warp, in a register the compiler knows to hold one value per warp
// (it can then live in the uniform datapath, with what is computed from it).
__device__ __forceinline__ int warp_uniform(int x) { return __shfl_sync(0xffffffffu, x, 0); }
// A K/V stage index and phase. ptxas does not always see them as warp-uniform: carried from
// one tile to the next of a persistent kernel, or around the three-stage and the
// non-warp-specialized loops, it kept them, and the address of every K and V descriptor
// computed from them, in per-thread registers (a vector add, mask and shift, then R2UR, per
// wgmma: a persistent key block cost 6% more than a one-tile-per-CTA one at d128 until the
// broadcast). Broadcast where that happened: once per tile, or per step.
template <int Stages>
__device__ __forceinline__ tile::PipelineState<Stages> warp_uniform(tile::PipelineState<Stages> st) {
  st.index = static_cast<uint32_t>(warp_uniform(static_cast<int>(st.index)));
  st.phase = static_cast<uint32_t>(warp_uniform(static_cast<int>(st.phase)));
  return st;
}


}  // namespace fa3
