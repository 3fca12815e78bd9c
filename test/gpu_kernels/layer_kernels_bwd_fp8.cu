// Tiny GPU kernels for the ptx/ and tile/ additions of the backward pass and the FP8 forward,
// one feature at a time (layer_kernels_bwd_fp8.h says what each computes).
#include "gpu_kernels/layer_kernels_bwd_fp8.h"

#include <cuda_runtime.h>

#include "ptx/bulk.cuh"
#include "ptx/math.cuh"
#include "ptx/matrix.cuh"
#include "ptx/mbarrier.cuh"
#include "ptx/semaphore.cuh"
#include "ptx/tma.cuh"
#include "ptx/wgmma.cuh"
#include "tile/element.cuh"
#include "tile/fragment.cuh"
#include "tile/gemm.cuh"
#include "tile/pipeline.cuh"
#include "tile/smem_copy.cuh"
#include "tile/smem_tile.cuh"

namespace fa3test {

namespace {

namespace ptx = fa3::ptx;
namespace tile = fa3::tile;
using ptx::MmaType;

__device__ uint32_t aligned_smem_base(unsigned char* raw) {
  return (ptx::smem_address(raw) + 1023u) & ~1023u;
}

// The generic address of shared-window address `addr` in the dynamic shared memory `raw`.
__device__ unsigned char* generic_of(unsigned char* raw, uint32_t addr) {
  return raw + (addr - ptx::smem_address(raw));
}

// Writes a row-major matrix of Tile's elements (raw bytes) into the tile, 4 bytes at a time,
// with ordinary stores; then orders them before async-proxy (wgmma) reads.
template <class Tile>
__device__ void store_tile_bytes(uint32_t base, const unsigned char* m) {
  constexpr int kRowBytes = Tile::kCols * Tile::Element::kBytes;
  constexpr int kPerWord = 4 / Tile::Element::kBytes;
  for (int i = threadIdx.x; i < Tile::kRows * kRowBytes / 4; i += blockDim.x) {
    const int row = (4 * i) / kRowBytes, col = ((4 * i) % kRowBytes) / Tile::Element::kBytes;
    const unsigned char* p = m + row * kRowBytes + col * Tile::Element::kBytes;
    const uint32_t word = p[0] | (p[1] << 8) | (p[2] << 16) | (static_cast<uint32_t>(p[3]) << 24);
    static_assert(kPerWord >= 1, "4-byte words");
    ptx::st_shared_u32(base + Tile::offset(row, col), word);
  }
  ptx::fence_proxy_async_shared();
}

// Reads a tile back into a row-major byte matrix.
template <class Tile>
__device__ void load_tile_bytes(unsigned char* raw, uint32_t base, unsigned char* m) {
  constexpr int kRowBytes = Tile::kCols * Tile::Element::kBytes;
  for (int i = threadIdx.x; i < Tile::kRows * kRowBytes; i += blockDim.x) {
    const int row = i / kRowBytes, byte = i % kRowBytes;
    const int col = byte / Tile::Element::kBytes;
    m[i] = generic_of(raw, base + Tile::offset(row, col))[byte % Tile::Element::kBytes];
  }
}

// A 64 x N accumulator of the warpgroup of thread_in_wg from a row-major matrix, and back.
template <int N>
__device__ void load_accumulator(float (&acc)[N / 2], const float* m, int thread_in_wg) {
#pragma unroll
  for (int e = 0; e < N / 2; ++e)
    acc[e] = m[tile::AccLayout::row(thread_in_wg, e) * N + tile::AccLayout::col(thread_in_wg, e)];
}
template <int N>
__device__ void store_accumulator(const float (&acc)[N / 2], float* m, int thread_in_wg) {
#pragma unroll
  for (int e = 0; e < N / 2; ++e)
    m[tile::AccLayout::row(thread_in_wg, e) * N + tile::AccLayout::col(thread_in_wg, e)] = acc[e];
}

// ---- ptx/matrix.cuh ------------------------------------------------------------------------

template <int Count>
__device__ void ld_form(bool trans, uint32_t (&r)[Count], uint32_t addr) {
  if constexpr (Count == 1) {
    if (trans)
      ptx::ldmatrix_x1_trans(r, addr);
    else
      ptx::ldmatrix_x1(r, addr);
  } else if constexpr (Count == 2) {
    if (trans)
      ptx::ldmatrix_x2_trans(r, addr);
    else
      ptx::ldmatrix_x2(r, addr);
  } else {
    if (trans)
      ptx::ldmatrix_x4_trans(r, addr);
    else
      ptx::ldmatrix_x4(r, addr);
  }
}
template <int Count>
__device__ void st_form(bool trans, uint32_t addr, const uint32_t (&r)[Count]) {
  if constexpr (Count == 1) {
    if (trans)
      ptx::stmatrix_x1_trans(addr, r);
    else
      ptx::stmatrix_x1(addr, r);
  } else if constexpr (Count == 2) {
    if (trans)
      ptx::stmatrix_x2_trans(addr, r);
    else
      ptx::stmatrix_x2(addr, r);
  } else {
    if (trans)
      ptx::stmatrix_x4_trans(addr, r);
    else
      ptx::stmatrix_x4(addr, r);
  }
}

// One warp per form (blockIdx.x = form). The ldmatrix source and the stmatrix target are 32
// rows of 16 bytes at scattered slots (matrix_row_slot).
template <int Count>
__device__ void matrix_form(int form, const uint16_t* src, uint32_t* ld, uint16_t* st,
                            uint16_t (*rows)[8], uint16_t (*out)[8]) {
  const int lane = threadIdx.x;
  const bool trans = form >= 3;
  const uint32_t row_addr = ptx::smem_address(rows[(7 * lane + 3) % 32]);
  uint32_t r[Count];
  ld_form<Count>(trans, r, row_addr);
  for (int k = 0; k < 4; ++k) ld[(form * 32 + lane) * 4 + k] = k < Count ? r[k] : 0xffffffffu;
  // The non-transposed fragment of matrix k, built from src: (row l/4, cols 2q, 2q + 1).
  uint32_t w[Count];
  for (int k = 0; k < Count; ++k) {
    const uint16_t* row = src + (8 * k + lane / 4) * 8 + 2 * (lane % 4);
    w[k] = row[0] | (static_cast<uint32_t>(row[1]) << 16);
  }
  st_form<Count>(trans, ptx::smem_address(out[(7 * lane + 3) % 32]), w);
  __syncwarp();
  for (int i = lane; i < 256; i += 32) st[form * 256 + i] = out[(7 * (i / 8) + 3) % 32][i % 8];
}

__global__ void matrix_wrappers_kernel(const uint16_t* src, uint32_t* ld, uint16_t* st) {
  __shared__ __align__(16) uint16_t rows[32][8];
  __shared__ __align__(16) uint16_t out[32][8];
  const int form = blockIdx.x, lane = threadIdx.x;
  for (int i = lane; i < 256; i += 32) {
    rows[(7 * (i / 8) + 3) % 32][i % 8] = src[i];
    out[i / 8][i % 8] = 0xffff;
  }
  __syncwarp();
  switch (form % 3) {
    case 0:
      matrix_form<1>(form, src, ld, st, rows, out);
      break;
    case 1:
      matrix_form<2>(form, src, ld, st, rows, out);
      break;
    default:
      matrix_form<4>(form, src, ld, st, rows, out);
      break;
  }
}

__global__ void pack_e4m3_kernel(const float* x, int words, uint32_t* packed) {
  const int i = threadIdx.x;
  if (i < words) packed[i] = ptx::pack_e4m3x4(x[4 * i], x[4 * i + 1], x[4 * i + 2], x[4 * i + 3]);
}

// ---- tile/smem_copy.cuh: accumulator stores --------------------------------------------

template <class Elem, int N, int Rows, int Cols>
__global__ void store_acc_kernel(const float* acc_in, int row0, int col0, bool transposed,
                                 uint32_t* out) {
  using Tile = tile::SmemTile<Elem, Rows, Cols>;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const uint32_t base = aligned_smem_base(smem_raw);
  for (int i = threadIdx.x; i < static_cast<int>(Tile::kBytes / 4); i += blockDim.x)
    ptx::st_shared_u32(base + 4 * i, 0xffffffffu);
  __syncthreads();
  float acc[N / 2];
  load_accumulator<N>(acc, acc_in, threadIdx.x);
  if constexpr (Elem::kBytes == 2) {
    if (transposed)
      tile::warpgroup_store_acc_transposed<Tile, N>(acc, base, row0, col0, threadIdx.x);
    else
      tile::warpgroup_store_acc<Tile, N>(acc, base, row0, col0, threadIdx.x);
  } else {
    tile::warpgroup_store_acc<Tile, N>(acc, base, row0, col0, threadIdx.x);
  }
  __syncthreads();
  for (int i = threadIdx.x; i < Rows * Cols; i += blockDim.x) {
    const unsigned char* p = generic_of(smem_raw, base + Tile::offset(i / Cols, i % Cols));
    uint32_t bits = 0;
    for (int b = 0; b < Elem::kBytes; ++b) bits |= static_cast<uint32_t>(p[b]) << (8 * b);
    out[i] = bits;
  }
}

// ---- ldmatrix A operands into RS wgmma ---------------------------------------------------

__global__ void ldmatrix_gemm_kernel(const uint16_t* a, const uint16_t* t, const uint16_t* b,
                                     float* c1, float* c2) {
  using ATile = tile::SmemTile<tile::bf16, 128, 64>;
  using TTile = tile::SmemTile<tile::bf16, 64, 128>;
  using BTile = tile::SmemTile<tile::bf16, 64, 64>;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const uint32_t a_base = aligned_smem_base(smem_raw);
  const uint32_t t_base = a_base + ATile::kBytes, b_base = t_base + TTile::kBytes;
  store_tile_bytes<ATile>(a_base, reinterpret_cast<const unsigned char*>(a));
  store_tile_bytes<TTile>(t_base, reinterpret_cast<const unsigned char*>(t));
  store_tile_bytes<BTile>(b_base, reinterpret_cast<const unsigned char*>(b));
  __syncthreads();
  tile::AOperands<tile::bf16, 64> a_ops, t_ops;
  tile::warpgroup_load_a_operands<ATile>(a_ops, a_base, 64, threadIdx.x);
  tile::warpgroup_load_a_operands_transposed<TTile>(t_ops, t_base, 64, threadIdx.x);
  float acc[32];
  tile::warpgroup_gemm_rs_abt<64, BTile>(acc, a_ops, b_base);
  ptx::wgmma_wait_group<0>();
  tile::pin_registers(acc);
  store_accumulator<64>(acc, c1, threadIdx.x);
  tile::warpgroup_gemm_rs_abt<64, BTile>(acc, t_ops, b_base);
  ptx::wgmma_wait_group<0>();
  tile::pin_registers(acc);
  store_accumulator<64>(acc, c2, threadIdx.x);
}

// ---- e4m3 wgmma ----------------------------------------------------------------------------

__global__ void gemm_ss_e4m3_kernel(const uint8_t* a, const uint8_t* b, float* c) {
  using ATile = tile::SmemTile<tile::e4m3, 64, 128>;
  using BTile = tile::SmemTile<tile::e4m3, 224, 128>;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const uint32_t a_base = aligned_smem_base(smem_raw), b_base = a_base + ATile::kBytes;
  store_tile_bytes<ATile>(a_base, a);
  store_tile_bytes<BTile>(b_base, b);
  __syncthreads();
  float acc[112];
  tile::warpgroup_gemm_ss_abt<MmaType::E4M3, 224, ATile, BTile>(acc, a_base, 0, b_base);
  ptx::wgmma_wait_group<0>();
  tile::pin_registers(acc);
  store_accumulator<224>(acc, c, threadIdx.x);
}

__global__ void gemm_rs_e4m3_kernel(const float* p, const uint8_t* vt, float* o) {
  using VtTile = tile::SmemTile<tile::e4m3, 64, 224>;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const uint32_t vt_base = aligned_smem_base(smem_raw);
  store_tile_bytes<VtTile>(vt_base, vt);
  __syncthreads();
  float p_acc[112];
  load_accumulator<224>(p_acc, p, threadIdx.x);
  tile::AOperands<tile::e4m3, 224> p_ops;
  tile::acc_to_a(p_acc, p_ops);
  float acc[32];
  tile::fill(acc, 0.0f);
  tile::warpgroup_gemm_rs_abt<64, VtTile>(acc, p_ops, vt_base, tile::Accumulate::Yes);
  ptx::wgmma_wait_group<0>();
  tile::pin_registers(acc);
  store_accumulator<64>(acc, o, threadIdx.x);
}

__global__ void fp8_v_transpose_kernel(const float* p, const uint8_t* v, uint8_t* vt_out,
                                       float* o) {
  using VTile = tile::SmemTile<tile::e4m3, 160, 128>;
  using VtTile = tile::SmemTile<tile::e4m3, 128, 160>;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const uint32_t v_base = aligned_smem_base(smem_raw), vt_base = v_base + VTile::kBytes;
  store_tile_bytes<VTile>(v_base, v);
  __syncthreads();
  tile::warpgroup_transpose_v_e4m3<VTile, VtTile>(v_base, vt_base, threadIdx.x);
  ptx::fence_proxy_async_shared();  // stmatrix (generic proxy) -> wgmma reads
  __syncthreads();
  load_tile_bytes<VtTile>(smem_raw, vt_base, vt_out);
  float p_acc[80];
  load_accumulator<160>(p_acc, p, threadIdx.x);
  tile::AOperands<tile::e4m3, 160> p_ops;
  tile::acc_to_a(p_acc, p_ops);
  float acc[64];
  tile::warpgroup_gemm_rs_abt<128, VtTile>(acc, p_ops, vt_base);
  ptx::wgmma_wait_group<0>();
  tile::pin_registers(acc);
  store_accumulator<128>(acc, o, threadIdx.x);
}

// ---- backward SS GEMMs -----------------------------------------------------------------

__global__ void backward_gemms_kernel(const uint16_t* p, const uint16_t* dout, const float* init,
                                      const uint16_t* ds, const uint16_t* k, float* dv, float* dq) {
  using PTile = tile::SmemTile<tile::bf16, 64, 128>;  // queries x keys
  using DOTile = tile::SmemTile<tile::bf16, 64, 64>;  // queries x dims
  using DSTile = tile::SmemTile<tile::f16, 64, 128>;  // queries x keys
  using KTile = tile::SmemTile<tile::f16, 128, 64>;   // keys x dims
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const uint32_t p_base = aligned_smem_base(smem_raw), do_base = p_base + PTile::kBytes;
  const uint32_t ds_base = do_base + DOTile::kBytes, k_base = ds_base + DSTile::kBytes;
  store_tile_bytes<PTile>(p_base, reinterpret_cast<const unsigned char*>(p));
  store_tile_bytes<DOTile>(do_base, reinterpret_cast<const unsigned char*>(dout));
  store_tile_bytes<DSTile>(ds_base, reinterpret_cast<const unsigned char*>(ds));
  store_tile_bytes<KTile>(k_base, reinterpret_cast<const unsigned char*>(k));
  __syncthreads();
  const int wg = threadIdx.x / 128, t = threadIdx.x % 128;
  float acc[32];
  load_accumulator<64>(acc, init + wg * 64 * 64, t);
  tile::warpgroup_gemm_ss_atb<MmaType::BF16, 64, PTile, DOTile>(acc, p_base, 64 * wg, do_base,
                                                      tile::Accumulate::Yes);
  ptx::wgmma_wait_group<0>();
  tile::pin_registers(acc);
  store_accumulator<64>(acc, dv + wg * 64 * 64, t);
  if (wg == 0) {
    tile::warpgroup_gemm_ss_ab<MmaType::F16, 64, DSTile, KTile>(acc, ds_base, 0, k_base,
                                                      tile::Accumulate::No);
    ptx::wgmma_wait_group<0>();
    tile::pin_registers(acc);
    store_accumulator<64>(acc, dq, t);
  }
}

// ---- bulk copies and reduce-adds ---------------------------------------------------------

__global__ void bulk_reduce_kernel(const float* contrib, const float* vec, float* frag_sum,
                                   float* vec_sum, float* vec_copy,
                                   const __grid_constant__ fa3::TensorMapBytes row_map) {
  using Staging = tile::AccStagingTile<64>;
  using RowTile = tile::SmemTile<tile::f32, 64, 64>;  // two 32-column chunks = two TMA boxes
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const uint32_t row_base = aligned_smem_base(smem_raw);
  const uint32_t stage_base = row_base + RowTile::kBytes;
  const uint32_t vec_base = stage_base + Staging::kBytes, bar = vec_base + 1024;
  const int c = blockIdx.x, t = threadIdx.x;
  if (t == 0) {
    ptx::mbarrier_init(bar, 1);
    ptx::fence_mbarrier_init();
  }
  __syncthreads();
  if (t == 0) {
    ptx::mbarrier_arrive_expect_tx(bar, 1024);
    ptx::bulk_copy_global_to_shared(vec_base, vec + 256 * c, 1024, bar);
  }
  float acc[32];
  load_accumulator<64>(acc, contrib + 4096 * c, t);
  Staging::warpgroup_store(acc, stage_base, t);
  tile::warpgroup_store_acc<RowTile, 64>(acc, row_base, 0, 0, t);
  ptx::fence_proxy_async_shared();  // ordinary stores -> bulk copies (async proxy) read them
  tile::mbarrier_wait(bar, 0);
  __syncthreads();
  if (t == 0) {
    if (c % 2)
      ptx::bulk_reduce_add_f32_hinted(frag_sum, stage_base, Staging::kBytes,
                                      ptx::l2_policy_evict_last());
    else
      ptx::bulk_reduce_add_f32(frag_sum, stage_base, Staging::kBytes);
    ptx::bulk_reduce_add_f32(vec_sum, vec_base, 1024);
    ptx::bulk_copy_shared_to_global(vec_copy + 256 * c, vec_base, 1024);
    const int row0 = 30 * (c % 3);
    ptx::tma_reduce_add_4d(&row_map, row_base, 0, row0, 0, 0);
    ptx::tma_reduce_add_4d(&row_map, row_base + RowTile::kChunkBytes, 32, row0, 0, 0);
    ptx::bulk_commit_group();
    ptx::bulk_wait_group_read<0>();  // the shared sources stay until they are read
  }
}

__global__ void ordered_reduce_kernel(const float* add, float* sum, int32_t* counter) {
  __shared__ __align__(16) float values[4];
  const int c = blockIdx.x;
  if (threadIdx.x < 4) values[threadIdx.x] = add[4 * c + threadIdx.x];
  ptx::fence_proxy_async_shared();
  __syncthreads();
  if (threadIdx.x == 0) {
    while (ptx::ld_acquire_gpu(counter) != c) {
    }
    ptx::bulk_reduce_add_f32(sum, ptx::smem_address(values), 16);
    ptx::bulk_commit_group();
    ptx::bulk_wait_group<0>();  // the add is performed before the next CTA's turn
    ptx::red_add_release_gpu(counter, 1);
  }
}

// ---- host side ---------------------------------------------------------------------------

struct DeviceArrays {
  void* ptr[8] = {};
  ~DeviceArrays() {
    for (void* p : ptr) cudaFree(p);
  }
};

std::string cuda_text(cudaError_t e, const char* what) {
  return std::string(what) + ": " + cudaGetErrorString(e);
}

#define FA3_TRY(call, what)                                \
  do {                                                     \
    cudaError_t err_ = (call);                             \
    if (err_ != cudaSuccess) return cuda_text(err_, what); \
  } while (0)

template <class Kernel>
std::string allow_smem(Kernel kernel, size_t smem) {
  FA3_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(smem)),
          "cudaFuncSetAttribute");
  return {};
}

// Uploads `host` into a new allocation d.ptr[slot].
template <class T>
std::string upload(DeviceArrays& d, int slot, const std::vector<T>& host) {
  FA3_TRY(cudaMalloc(&d.ptr[slot], host.size() * sizeof(T)), "cudaMalloc");
  FA3_TRY(cudaMemcpy(d.ptr[slot], host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice),
          "cudaMemcpy");
  return {};
}
// A new allocation of n T at d.ptr[slot], poisoned with 0xff bytes.
template <class T>
std::string alloc_poisoned(DeviceArrays& d, int slot, size_t n) {
  FA3_TRY(cudaMalloc(&d.ptr[slot], n * sizeof(T)), "cudaMalloc");
  FA3_TRY(cudaMemset(d.ptr[slot], 0xff, n * sizeof(T)), "cudaMemset");
  return {};
}
template <class T>
std::string download(const DeviceArrays& d, int slot, size_t n, std::vector<T>* host) {
  host->resize(n);
  FA3_TRY(cudaMemcpy(host->data(), d.ptr[slot], n * sizeof(T), cudaMemcpyDeviceToHost),
          "cudaMemcpy");
  return {};
}

#define FA3_STEP(expr)              \
  do {                              \
    std::string err_ = (expr);      \
    if (!err_.empty()) return err_; \
  } while (0)

std::string finish(const char* name) {
  FA3_TRY(cudaGetLastError(), name);
  FA3_TRY(cudaDeviceSynchronize(), name);
  return {};
}

}  // namespace

std::string run_matrix_wrappers(const std::vector<uint16_t>& src, std::vector<uint32_t>* ld,
                                std::vector<uint16_t>* st) {
  if (src.size() != 256) return "run_matrix_wrappers: src must hold 32 x 8 values";
  DeviceArrays d;
  FA3_STEP(upload(d, 0, src));
  FA3_STEP(alloc_poisoned<uint32_t>(d, 1, kMatrixForms * 32 * 4));
  FA3_STEP(alloc_poisoned<uint16_t>(d, 2, kMatrixForms * 256));
  matrix_wrappers_kernel<<<kMatrixForms, 32>>>(static_cast<const uint16_t*>(d.ptr[0]),
                                               static_cast<uint32_t*>(d.ptr[1]),
                                               static_cast<uint16_t*>(d.ptr[2]));
  FA3_STEP(finish("matrix_wrappers_kernel"));
  FA3_STEP(download(d, 1, kMatrixForms * 32 * 4, ld));
  return download(d, 2, kMatrixForms * 256, st);
}

std::string run_pack_e4m3(const std::vector<float>& x, std::vector<uint32_t>* packed) {
  const int words = static_cast<int>(x.size() / 4);
  if (x.size() % 4 != 0 || words > 128) return "run_pack_e4m3: x.size() must be 4k, k <= 128";
  DeviceArrays d;
  FA3_STEP(upload(d, 0, x));
  FA3_STEP(alloc_poisoned<uint32_t>(d, 1, words));
  pack_e4m3_kernel<<<1, 128>>>(static_cast<const float*>(d.ptr[0]), words,
                               static_cast<uint32_t*>(d.ptr[1]));
  FA3_STEP(finish("pack_e4m3_kernel"));
  return download(d, 1, words, packed);
}

namespace {

template <class Elem, int N, int Rows, int Cols>
std::string store_acc(const std::vector<float>& acc, int row0, int col0, bool transposed,
                      std::vector<uint32_t>* out) {
  if (acc.size() != 64u * N) return "run_store_acc: acc must be 64 x n";
  const size_t smem = tile::SmemTile<Elem, Rows, Cols>::kBytes + 1024;
  auto kernel = store_acc_kernel<Elem, N, Rows, Cols>;
  FA3_STEP(allow_smem(kernel, smem));
  DeviceArrays d;
  FA3_STEP(upload(d, 0, acc));
  FA3_STEP(alloc_poisoned<uint32_t>(d, 1, Rows * Cols));
  kernel<<<1, 128, smem>>>(static_cast<const float*>(d.ptr[0]), row0, col0, transposed,
                           static_cast<uint32_t*>(d.ptr[1]));
  FA3_STEP(finish("store_acc_kernel"));
  return download(d, 1, Rows * Cols, out);
}

}  // namespace

std::string run_store_acc(int type, bool transposed, const std::vector<float>& acc,
                          std::vector<uint32_t>* tile_out) {
  if (type == 0) return store_acc<tile::f16, 64, 128, 128>(acc, 64, 64, transposed, tile_out);
  if (type == 1) return store_acc<tile::bf16, 64, 128, 128>(acc, 64, 64, transposed, tile_out);
  if (type == 2 && !transposed)
    return store_acc<tile::f32, 32, 64, 64>(acc, 0, 32, false, tile_out);
  return "run_store_acc: no such variant";
}

std::string run_ldmatrix_gemm(const std::vector<uint16_t>& a, const std::vector<uint16_t>& t,
                              const std::vector<uint16_t>& b, std::vector<float>* c1,
                              std::vector<float>* c2) {
  if (a.size() != 128 * 64 || t.size() != 64 * 128 || b.size() != 64 * 64)
    return "run_ldmatrix_gemm: a is 128 x 64, t 64 x 128, b 64 x 64";
  const size_t smem = (128 * 64 + 64 * 128 + 64 * 64) * 2 + 1024;
  FA3_STEP(allow_smem(ldmatrix_gemm_kernel, smem));
  DeviceArrays d;
  FA3_STEP(upload(d, 0, a));
  FA3_STEP(upload(d, 1, t));
  FA3_STEP(upload(d, 2, b));
  FA3_STEP(alloc_poisoned<float>(d, 3, 64 * 64));
  FA3_STEP(alloc_poisoned<float>(d, 4, 64 * 64));
  ldmatrix_gemm_kernel<<<1, 128, smem>>>(
      static_cast<const uint16_t*>(d.ptr[0]), static_cast<const uint16_t*>(d.ptr[1]),
      static_cast<const uint16_t*>(d.ptr[2]), static_cast<float*>(d.ptr[3]),
      static_cast<float*>(d.ptr[4]));
  FA3_STEP(finish("ldmatrix_gemm_kernel"));
  FA3_STEP(download(d, 3, 64 * 64, c1));
  return download(d, 4, 64 * 64, c2);
}

std::string run_gemm_ss_e4m3(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b,
                             std::vector<float>* c) {
  if (a.size() != 64 * 128 || b.size() != 224 * 128)
    return "run_gemm_ss_e4m3: a is 64 x 128, b 224 x 128";
  const size_t smem = (64 + 224) * 128 + 1024;
  FA3_STEP(allow_smem(gemm_ss_e4m3_kernel, smem));
  DeviceArrays d;
  FA3_STEP(upload(d, 0, a));
  FA3_STEP(upload(d, 1, b));
  FA3_STEP(alloc_poisoned<float>(d, 2, 64 * 224));
  gemm_ss_e4m3_kernel<<<1, 128, smem>>>(static_cast<const uint8_t*>(d.ptr[0]),
                                        static_cast<const uint8_t*>(d.ptr[1]),
                                        static_cast<float*>(d.ptr[2]));
  FA3_STEP(finish("gemm_ss_e4m3_kernel"));
  return download(d, 2, 64 * 224, c);
}

std::string run_gemm_rs_e4m3(const std::vector<float>& p, const std::vector<uint8_t>& vt,
                             std::vector<float>* o) {
  if (p.size() != 64 * 224 || vt.size() != 64 * 224)
    return "run_gemm_rs_e4m3: p is 64 x 224, vt 64 x 224";
  const size_t smem = tile::SmemTile<tile::e4m3, 64, 224>::kBytes + 1024;
  FA3_STEP(allow_smem(gemm_rs_e4m3_kernel, smem));
  DeviceArrays d;
  FA3_STEP(upload(d, 0, p));
  FA3_STEP(upload(d, 1, vt));
  FA3_STEP(alloc_poisoned<float>(d, 2, 64 * 64));
  gemm_rs_e4m3_kernel<<<1, 128, smem>>>(static_cast<const float*>(d.ptr[0]),
                                        static_cast<const uint8_t*>(d.ptr[1]),
                                        static_cast<float*>(d.ptr[2]));
  FA3_STEP(finish("gemm_rs_e4m3_kernel"));
  return download(d, 2, 64 * 64, o);
}

std::string run_fp8_v_transpose(const std::vector<float>& p, const std::vector<uint8_t>& v,
                                std::vector<uint8_t>* vt, std::vector<float>* o) {
  if (p.size() != 64 * 160 || v.size() != 160 * 128)
    return "run_fp8_v_transpose: p is 64 x 160, v 160 x 128";
  const size_t smem = tile::SmemTile<tile::e4m3, 160, 128>::kBytes +
                      tile::SmemTile<tile::e4m3, 128, 160>::kBytes + 1024;
  FA3_STEP(allow_smem(fp8_v_transpose_kernel, smem));
  DeviceArrays d;
  FA3_STEP(upload(d, 0, p));
  FA3_STEP(upload(d, 1, v));
  FA3_STEP(alloc_poisoned<uint8_t>(d, 2, 128 * 160));
  FA3_STEP(alloc_poisoned<float>(d, 3, 64 * 128));
  fp8_v_transpose_kernel<<<1, 128, smem>>>(
      static_cast<const float*>(d.ptr[0]), static_cast<const uint8_t*>(d.ptr[1]),
      static_cast<uint8_t*>(d.ptr[2]), static_cast<float*>(d.ptr[3]));
  FA3_STEP(finish("fp8_v_transpose_kernel"));
  FA3_STEP(download(d, 2, 128 * 160, vt));
  return download(d, 3, 64 * 128, o);
}

std::string run_backward_gemms(const std::vector<uint16_t>& p, const std::vector<uint16_t>& dout,
                               const std::vector<float>& init, const std::vector<uint16_t>& ds,
                               const std::vector<uint16_t>& k, std::vector<float>* dv,
                               std::vector<float>* dq) {
  if (p.size() != 64 * 128 || dout.size() != 64 * 64 || init.size() != 128 * 64 ||
      ds.size() != 64 * 128 || k.size() != 128 * 64)
    return "run_backward_gemms: p, ds are 64 x 128, dout 64 x 64, init, k 128 x 64";
  const size_t smem = (64 * 128 + 64 * 64 + 64 * 128 + 128 * 64) * 2 + 1024;
  FA3_STEP(allow_smem(backward_gemms_kernel, smem));
  DeviceArrays d;
  FA3_STEP(upload(d, 0, p));
  FA3_STEP(upload(d, 1, dout));
  FA3_STEP(upload(d, 2, init));
  FA3_STEP(upload(d, 3, ds));
  FA3_STEP(upload(d, 4, k));
  FA3_STEP(alloc_poisoned<float>(d, 5, 128 * 64));
  FA3_STEP(alloc_poisoned<float>(d, 6, 64 * 64));
  backward_gemms_kernel<<<1, 256, smem>>>(
      static_cast<const uint16_t*>(d.ptr[0]), static_cast<const uint16_t*>(d.ptr[1]),
      static_cast<const float*>(d.ptr[2]), static_cast<const uint16_t*>(d.ptr[3]),
      static_cast<const uint16_t*>(d.ptr[4]), static_cast<float*>(d.ptr[5]),
      static_cast<float*>(d.ptr[6]));
  FA3_STEP(finish("backward_gemms_kernel"));
  FA3_STEP(download(d, 5, 128 * 64, dv));
  return download(d, 6, 64 * 64, dq);
}

std::string run_bulk_reduce(int ctas, const float* contrib, const float* vec, float* frag_sum,
                            float* vec_sum, float* vec_copy, const fa3::TensorMapBytes& row_map) {
  const size_t smem = tile::SmemTile<tile::f32, 64, 64>::kBytes + tile::AccStagingTile<64>::kBytes +
                      1024 + 8 + 1024;
  FA3_STEP(allow_smem(bulk_reduce_kernel, smem));
  bulk_reduce_kernel<<<ctas, 128, smem>>>(contrib, vec, frag_sum, vec_sum, vec_copy, row_map);
  return finish("bulk_reduce_kernel");
}

std::string run_ordered_reduce(int ctas, const float* add, float* sum, int32_t* counter) {
  ordered_reduce_kernel<<<ctas, 32>>>(add, sum, counter);
  return finish("ordered_reduce_kernel");
}

}  // namespace fa3test
