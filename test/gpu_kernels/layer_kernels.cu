// Tiny GPU kernels that exercise the ptx/ and tile/ layers one feature at a time, so a wrong
// descriptor, swizzle or fragment layout fails its own test instead of an attention test.
// Host entry points (layer_kernels.h) run one kernel and copy the result back.
#include "gpu_kernels/layer_kernels.h"

#include <cuda_runtime.h>

#include "ptx/barrier.cuh"
#include "ptx/math.cuh"
#include "ptx/mbarrier.cuh"
#include "ptx/tma.cuh"
#include "ptx/wgmma.cuh"
#include "tile/fragment.cuh"
#include "tile/gemm.cuh"
#include "tile/pipeline.cuh"
#include "tile/smem_tile.cuh"

namespace fa3test {

namespace {

using fa3::ptx::MmaType;

constexpr int kBoxRows = 64;
using BoxTile = fa3::tile::SwizzledTile<kBoxRows, 64>;

__device__ uint32_t aligned_smem_base(unsigned char* raw) {
  return (fa3::ptx::smem_address(raw) + 1023u) & ~1023u;
}

// One TMA box load (with an out-of-bounds part) into swizzled shared memory; every thread
// then reads the tile back through SwizzledTile::offset. Then the same tile is stored with
// TMA at another coordinate of `store_map`.
__global__ void tma_roundtrip_kernel(const __grid_constant__ fa3::TensorMapBytes load_map,
                                     const __grid_constant__ fa3::TensorMapBytes store_map,
                                     int4 load_coord, int4 store_coord, uint16_t* unswizzled) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const uint32_t tile = aligned_smem_base(smem_raw);
  const uint32_t bar = tile + BoxTile::kBytes;
  if (threadIdx.x == 0) {
    fa3::ptx::mbarrier_init(bar, 1);
    fa3::ptx::fence_mbarrier_init();
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    fa3::ptx::mbarrier_arrive_expect_tx(bar, BoxTile::kBytes);
    fa3::ptx::tma_load_4d(tile, &load_map, bar, load_coord.x, load_coord.y, load_coord.z,
                          load_coord.w);
  }
  // Both forms of the wait: the plain try_wait, and the one with a suspend time limit (the
  // producers' idle waits); each warp must see the whole box once it returns.
  if ((threadIdx.x / 32) % 2 == 0)
    fa3::tile::mbarrier_wait(bar, 0);
  else
    fa3::tile::mbarrier_wait_idle(bar, 0);
  const unsigned char* generic = smem_raw + (tile - fa3::ptx::smem_address(smem_raw));
  for (int i = threadIdx.x; i < kBoxRows * 64; i += blockDim.x) {
    const int row = i / 64, col = i % 64;
    unswizzled[i] = *reinterpret_cast<const uint16_t*>(generic + BoxTile::offset(row, col & ~1) +
                                                       (col & 1) * 2);
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    fa3::ptx::tma_store_4d(&store_map, tile, store_coord.x, store_coord.y, store_coord.z,
                           store_coord.w);
    fa3::ptx::bulk_commit_group();
    fa3::ptx::bulk_wait_group_read<0>();
  }
}

// Writes a row-major rows x cols 16-bit matrix into a SwizzledTile with ordinary stores.
template <class Tile>
__device__ void store_tile(uint32_t base, const uint16_t* m) {
  for (int i = threadIdx.x; i < Tile::kRows * Tile::kCols / 2; i += blockDim.x) {
    const int row = (2 * i) / Tile::kCols, col = (2 * i) % Tile::kCols;
    const uint32_t pair = m[row * Tile::kCols + col] | (static_cast<uint32_t>(m[row * Tile::kCols + col + 1]) << 16);
    fa3::ptx::st_shared_u32(base + Tile::offset(row, col), pair);
  }
  fa3::ptx::fence_proxy_async_shared();  // ordinary stores -> wgmma (async proxy) reads
}

template <int N>
__device__ void store_accumulator(const float (&acc)[N / 2], float* out) {
  const int t = threadIdx.x;
#pragma unroll
  for (int e = 0; e < N / 2; ++e)
    out[fa3::tile::AccLayout::row(t, e) * N + fa3::tile::AccLayout::col(t, e)] = acc[e];
}

// C (64 x N) = A (64 x K) * B^T with B (N x K), both K-major swizzled tiles: S = Q K^T.
template <MmaType T, int N, int K>
__global__ void gemm_ss_kernel(const uint16_t* a, const uint16_t* b, float* c) {
  using ATile = fa3::tile::SwizzledTile<64, K>;
  using BTile = fa3::tile::SwizzledTile<N, K>;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const uint32_t a_base = aligned_smem_base(smem_raw);
  const uint32_t b_base = a_base + ATile::kBytes;
  store_tile<ATile>(a_base, a);
  store_tile<BTile>(b_base, b);
  __syncthreads();
  float acc[N / 2];
  fa3::tile::warpgroup_gemm_ss_abt<T, N, ATile, BTile>(acc, a_base, 0, b_base);
  fa3::ptx::wgmma_wait_group<0>();
  fa3::tile::pin_registers(acc);
  store_accumulator<N>(acc, c);
}

// O (64 x N) = P (64 x K) * V (K x N): P built in the accumulator layout in registers and
// converted to A operands, V an MN-major swizzled tile. O += P V of the attention mainloop.
template <MmaType T, int N, int K>
__global__ void gemm_rs_kernel(const float* p, const uint16_t* v, float* o) {
  using VTile = fa3::tile::SwizzledTile<K, N>;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const uint32_t v_base = aligned_smem_base(smem_raw);
  store_tile<VTile>(v_base, v);
  __syncthreads();
  const int t = threadIdx.x;
  float p_acc[K / 2];
#pragma unroll
  for (int e = 0; e < K / 2; ++e)
    p_acc[e] = p[fa3::tile::AccLayout::row(t, e) * K + fa3::tile::AccLayout::col(t, e)];
  uint32_t a[K / 16][4];
  fa3::tile::acc_to_a_operands<T == MmaType::BF16, K>(p_acc, a);
  float acc[N / 2];
  fa3::tile::fill(acc, 0.0f);
  fa3::tile::warpgroup_gemm_rs_ab<T, N, VTile>(acc, a, v_base);
  fa3::ptx::wgmma_wait_group<0>();
  fa3::tile::pin_registers(acc);
  store_accumulator<N>(acc, o);
}

// One thread per x (n a multiple of 4, at most 4 x 128): the MUFU wrappers, and a 16-byte
// shared-memory round trip of four x per thread, stored by thread t and loaded by thread t ^ 1.
__global__ void math_wrappers_kernel(const float* x, int n, float* ex2, float* lg2, float* rcp,
                                     float* roundtrip) {
  __shared__ __align__(16) uint32_t words[4 * 128];
  const int i = threadIdx.x;
  if (i < n) {
    ex2[i] = fa3::ptx::ex2_approx(x[i]);
    lg2[i] = fa3::ptx::lg2_approx(x[i]);
    rcp[i] = fa3::ptx::rcp_approx(x[i]);
  }
  const int quads = n / 4;
  if (i < quads)
    fa3::ptx::st_shared_v4_u32(
        fa3::ptx::smem_address(&words[4 * i]),
        make_uint4(__float_as_uint(x[4 * i]), __float_as_uint(x[4 * i + 1]),
                   __float_as_uint(x[4 * i + 2]), __float_as_uint(x[4 * i + 3])));
  __syncthreads();
  const int from = i ^ 1;
  if (from < quads) {
    const uint4 v = fa3::ptx::ld_shared_v4_u32(fa3::ptx::smem_address(&words[4 * from]));
    roundtrip[4 * from] = __uint_as_float(v.x);
    roundtrip[4 * from + 1] = __uint_as_float(v.y);
    roundtrip[4 * from + 2] = __uint_as_float(v.z);
    roundtrip[4 * from + 3] = __uint_as_float(v.w);
  }
}

struct DeviceArrays {
  void* ptr[5] = {};
  ~DeviceArrays() {
    for (void* p : ptr) cudaFree(p);
  }
};

std::string cuda_text(cudaError_t e, const char* what) {
  return std::string(what) + ": " + cudaGetErrorString(e);
}

#define FA3_TRY(call, what)                          \
  do {                                               \
    cudaError_t err_ = (call);                       \
    if (err_ != cudaSuccess) return cuda_text(err_, what); \
  } while (0)

// Raises the kernel's dynamic shared-memory limit to `smem` bytes.
template <class Kernel>
std::string allow_smem(Kernel kernel, size_t smem) {
  FA3_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(smem)),
          "cudaFuncSetAttribute");
  return {};
}

}  // namespace

std::string run_tma_roundtrip(const fa3::TensorMapBytes& load_map,
                              const fa3::TensorMapBytes& store_map, const int load_coord[4],
                              const int store_coord[4], std::vector<uint16_t>* unswizzled) {
  const size_t smem = BoxTile::kBytes + 1024 + 64;
  FA3_TRY(cudaFuncSetAttribute(tma_roundtrip_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(smem)),
          "cudaFuncSetAttribute");
  DeviceArrays d;
  const size_t bytes = kBoxRows * 64 * sizeof(uint16_t);
  FA3_TRY(cudaMalloc(&d.ptr[0], bytes), "cudaMalloc");
  tma_roundtrip_kernel<<<1, 128, smem>>>(
      load_map, store_map, make_int4(load_coord[0], load_coord[1], load_coord[2], load_coord[3]),
      make_int4(store_coord[0], store_coord[1], store_coord[2], store_coord[3]),
      static_cast<uint16_t*>(d.ptr[0]));
  FA3_TRY(cudaGetLastError(), "launch tma_roundtrip_kernel");
  FA3_TRY(cudaDeviceSynchronize(), "tma_roundtrip_kernel");
  unswizzled->resize(kBoxRows * 64);
  FA3_TRY(cudaMemcpy(unswizzled->data(), d.ptr[0], bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
  return {};
}

namespace {

template <MmaType T, int N, int K>
std::string gemm_ss(const std::vector<uint16_t>& a, const std::vector<uint16_t>& b,
                    std::vector<float>* c) {
  const size_t smem = (64 * K + N * K) * 2 + 1024;
  auto kernel = gemm_ss_kernel<T, N, K>;
  std::string err = allow_smem(kernel, smem);
  if (!err.empty()) return err;
  DeviceArrays d;
  FA3_TRY(cudaMalloc(&d.ptr[0], a.size() * 2), "cudaMalloc");
  FA3_TRY(cudaMalloc(&d.ptr[1], b.size() * 2), "cudaMalloc");
  FA3_TRY(cudaMalloc(&d.ptr[2], 64 * N * sizeof(float)), "cudaMalloc");
  FA3_TRY(cudaMemcpy(d.ptr[0], a.data(), a.size() * 2, cudaMemcpyHostToDevice), "cudaMemcpy");
  FA3_TRY(cudaMemcpy(d.ptr[1], b.data(), b.size() * 2, cudaMemcpyHostToDevice), "cudaMemcpy");
  kernel<<<1, 128, smem>>>(static_cast<uint16_t*>(d.ptr[0]), static_cast<uint16_t*>(d.ptr[1]),
                           static_cast<float*>(d.ptr[2]));
  FA3_TRY(cudaGetLastError(), "launch gemm_ss_kernel");
  FA3_TRY(cudaDeviceSynchronize(), "gemm_ss_kernel");
  c->resize(64 * N);
  FA3_TRY(cudaMemcpy(c->data(), d.ptr[2], 64 * N * sizeof(float), cudaMemcpyDeviceToHost),
          "cudaMemcpy");
  return {};
}

template <MmaType T, int N, int K>
std::string gemm_rs(const std::vector<float>& p, const std::vector<uint16_t>& v,
                    std::vector<float>* o) {
  const size_t smem = K * N * 2 + 1024;
  auto kernel = gemm_rs_kernel<T, N, K>;
  std::string err = allow_smem(kernel, smem);
  if (!err.empty()) return err;
  DeviceArrays d;
  FA3_TRY(cudaMalloc(&d.ptr[0], p.size() * 4), "cudaMalloc");
  FA3_TRY(cudaMalloc(&d.ptr[1], v.size() * 2), "cudaMalloc");
  FA3_TRY(cudaMalloc(&d.ptr[2], 64 * N * sizeof(float)), "cudaMalloc");
  FA3_TRY(cudaMemcpy(d.ptr[0], p.data(), p.size() * 4, cudaMemcpyHostToDevice), "cudaMemcpy");
  FA3_TRY(cudaMemcpy(d.ptr[1], v.data(), v.size() * 2, cudaMemcpyHostToDevice), "cudaMemcpy");
  kernel<<<1, 128, smem>>>(static_cast<float*>(d.ptr[0]), static_cast<uint16_t*>(d.ptr[1]),
                           static_cast<float*>(d.ptr[2]));
  FA3_TRY(cudaGetLastError(), "launch gemm_rs_kernel");
  FA3_TRY(cudaDeviceSynchronize(), "gemm_rs_kernel");
  o->resize(64 * N);
  FA3_TRY(cudaMemcpy(o->data(), d.ptr[2], 64 * N * sizeof(float), cudaMemcpyDeviceToHost),
          "cudaMemcpy");
  return {};
}

}  // namespace

std::string run_math_wrappers(const std::vector<float>& x, MathResults* out) {
  const int n = static_cast<int>(x.size());
  if (n % 4 != 0 || n > 4 * 128) return "run_math_wrappers: x.size() must be a multiple of 4, at most 512";
  const size_t bytes = x.size() * sizeof(float);
  DeviceArrays d;  // x, ex2, lg2, rcp, the round trip
  for (void*& p : d.ptr) FA3_TRY(cudaMalloc(&p, bytes), "cudaMalloc");
  FA3_TRY(cudaMemcpy(d.ptr[0], x.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
  FA3_TRY(cudaMemset(d.ptr[4], 0xFF, bytes), "cudaMemset");
  math_wrappers_kernel<<<1, 4 * 128>>>(static_cast<const float*>(d.ptr[0]), n,
                                       static_cast<float*>(d.ptr[1]), static_cast<float*>(d.ptr[2]),
                                       static_cast<float*>(d.ptr[3]), static_cast<float*>(d.ptr[4]));
  FA3_TRY(cudaGetLastError(), "launch math_wrappers_kernel");
  FA3_TRY(cudaDeviceSynchronize(), "math_wrappers_kernel");
  std::vector<float>* outs[] = {&out->ex2, &out->lg2, &out->rcp, &out->shared_roundtrip};
  void* from[] = {d.ptr[1], d.ptr[2], d.ptr[3], d.ptr[4]};
  for (int a = 0; a < 4; ++a) {
    outs[a]->resize(x.size());
    FA3_TRY(cudaMemcpy(outs[a]->data(), from[a], bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
  }
  return {};
}

std::string run_gemm_ss(bool bf16, int n, int k, const std::vector<uint16_t>& a,
                        const std::vector<uint16_t>& b, std::vector<float>* c) {
  if (bf16 && n == 128 && k == 128) return gemm_ss<MmaType::BF16, 128, 128>(a, b, c);
  if (!bf16 && n == 64 && k == 256) return gemm_ss<MmaType::F16, 64, 256>(a, b, c);
  if (bf16 && n == 176 && k == 64) return gemm_ss<MmaType::BF16, 176, 64>(a, b, c);
  return "run_gemm_ss: shape not instantiated";
}

std::string run_gemm_rs(bool bf16, int n, int k, const std::vector<float>& p,
                        const std::vector<uint16_t>& v, std::vector<float>* o) {
  if (bf16 && n == 128 && k == 64) return gemm_rs<MmaType::BF16, 128, 64>(p, v, o);
  if (!bf16 && n == 256 && k == 64) return gemm_rs<MmaType::F16, 256, 64>(p, v, o);
  if (bf16 && n == 64 && k == 128) return gemm_rs<MmaType::BF16, 64, 128>(p, v, o);
  return "run_gemm_rs: shape not instantiated";
}

}  // namespace fa3test
