// The runtime's host paths against a fake CUDA driver (test/fake_cuda): device and
// architecture checks, context selection, lazy module loading (once, also under threads),
// the launch configuration and parameter block, and driver failures. Runs on any machine.
#include <catch2/catch.hpp>

#include <cuda.h>
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "fa3/fa3.h"
#include "kernels/fwd_config.h"
#include "kernels/fwd_params.h"
#include "runtime/forward_launch.h"
#include "runtime/kernel_registry.h"
#include "support/fake_cuda_client.h"

namespace {

// Points libfa3 at the fake driver for one test and resets it.
struct UseFakeDriver {
  UseFakeDriver() {
    setenv("FA3_LIBCUDA", fake_library_path().c_str(), 1);
    fake().reset();
  }
  ~UseFakeDriver() { unsetenv("FA3_LIBCUDA"); }
};

fa3_tensor tensor(uintptr_t addr, int64_t b, int64_t s, int64_t h, int64_t d) {
  fa3_tensor t{};
  t.data = reinterpret_cast<void*>(addr);
  t.dtype = FA3_BF16;
  t.batch = b; t.seqlen = s; t.heads = h; t.head_dim = d;
  t.stride_head = d; t.stride_seq = h * d; t.stride_batch = s * h * d;
  return t;
}

struct Problem {
  fa3_tensor q = tensor(0x100000000, 3, 1000, 8, 128), k = tensor(0x200000000, 3, 700, 2, 128),
             v = tensor(0x300000000, 3, 700, 2, 128), o = tensor(0x400000000, 3, 1000, 8, 128);
  float* lse = reinterpret_cast<float*>(0x500000000);
  fa3_params p{0.0f, 1, 0};
  fa3_status run(fa3_handle* h) { return fa3_forward(h, &q, &k, &v, &o, lse, &p, nullptr); }
  // The parameter block (and in *grid the grid's x) `kernel` was launched with on `stream`
  // (a made-up handle).
  fa3::FwdParams run_kernel(fa3_handle* h, const char* kernel, uintptr_t stream,
                            unsigned* grid_x = nullptr) {
    REQUIRE(fa3_forward_with_kernel(h, kernel, &q, &k, &v, &o, lse, &p,
                                    reinterpret_cast<void*>(stream)) == FA3_OK);
    unsigned grid = 0, block = 0, smem = 0;
    fa3::FwdParams params;
    REQUIRE(fake().last_launch(&grid, &block, &smem, &params, sizeof params) == 1);
    if (grid_x) *grid_x = grid;
    return params;
  }
};

// The first bf16 d128 kernel of 128 x 128 tiles compiled into this library whose config is as
// `wanted` says (the numbers these tests expect are those of such tiles), or nullptr. The
// tests take whichever kernel the kernel set holds: the production set changes with the
// tuning table, and only the lab set has 2-CTA cluster kernels.
const char* compiled_d128(bool (*wanted)(const fa3::FwdConfig&)) {
  for (const fa3::KernelInfo& k : fa3::compiled_kernels())
    if (k.fwd.dtype == fa3::DType::BF16 && k.fwd.head_dim == 128 && k.fwd.block_m == 128 &&
        k.fwd.block_n == 128 && wanted(k.fwd))
      return k.name.c_str();
  return nullptr;
}

bool causal_persistent(const fa3::FwdConfig& c) { return c.persistent() && c.causal; }

fa3_handle* create() {
  fa3_handle* h = nullptr;
  const fa3_status s = fa3_create(&h, 0, nullptr);
  INFO(fa3_last_error());
  REQUIRE(s == FA3_OK);
  return h;
}

// The set-up of the tile counters' tests: the fake driver, a handle (each test destroys it
// where its checks need), the problem and a compiled causal persistent d128 kernel, which
// draws its tiles from a stream's counter.
struct CounterTest {
  UseFakeDriver use;
  fa3_handle* h = create();
  Problem pr;
  const char* name = compiled_d128(causal_persistent);
  CounterTest() { REQUIRE(name); }
};

}  // namespace

TEST_CASE("fake driver: a non-Hopper GPU is refused with its name and capability", "[cpu][runtime]") {
  UseFakeDriver use;
  fake().set_device(8, 0, 1);
  fa3_handle* h = nullptr;
  CHECK(fa3_create(&h, 0, nullptr) == FA3_ERR_ARCH);
  CHECK(std::string(fa3_last_error()) ==
        "device 0 (Fake GPU sm_80) has compute capability 8.0; fa3's kernels are built for sm_90a (Hopper: H100, H200) only");
  CHECK(h == nullptr);
}

TEST_CASE("fake driver: missing devices", "[cpu][runtime]") {
  UseFakeDriver use;
  fa3_handle* h = nullptr;
  fake().set_device(9, 0, 0);
  CHECK(fa3_create(&h, 0, nullptr) == FA3_ERR_NO_DEVICE);
  CHECK(std::string(fa3_last_error()) == "device 0 does not exist: the driver sees 0 CUDA device(s)");
  fake().set_device(9, 0, 1);
  CHECK(fa3_create(&h, 3, nullptr) == FA3_ERR_INVALID_ARGUMENT);
  CHECK(std::string(fa3_last_error()) == "device 3 does not exist: the driver sees 1 CUDA device(s)");
  fake().fail("cuInit", CUDA_ERROR_NO_DEVICE);
  CHECK(fa3_create(&h, 0, nullptr) == FA3_ERR_NO_DEVICE);
  CHECK(std::string(fa3_last_error()).rfind("the CUDA driver failed to initialize (cuInit: ", 0) == 0);
}

TEST_CASE("fake driver: the launch carries the problem", "[cpu][runtime]") {
  UseFakeDriver use;
  fa3_handle* h = create();
  Problem pr;
  REQUIRE(pr.run(h) == FA3_OK);
  // The launch is of the kernel the tuning table picks, with that kernel's config.
  const char* kernel = nullptr;
  REQUIRE(fa3_forward_select(h, &pr.q, &pr.k, &pr.v, &pr.p, &kernel) == FA3_OK);
  const auto cfg = fa3::parse_fwd_kernel_name(kernel);
  REQUIRE(cfg);
  CHECK((cfg->dtype == fa3::DType::BF16 && cfg->head_dim == 128 && cfg->causal));

  unsigned grid = 0, block = 0, smem = 0;
  fa3::FwdParams params;
  REQUIRE(fake().last_launch(&grid, &block, &smem, &params, sizeof params) == 1);
  const unsigned m_blocks = static_cast<unsigned>((1000 + cfg->block_m - 1) / cfg->block_m);
  const unsigned tiles = m_blocks * 8 * 3;  // query blocks x heads x batch
  CHECK(grid == (cfg->persistent() ? std::min(tiles, 132u) : tiles));  // the fake has 132 SMs
  CHECK(block == static_cast<unsigned>(cfg->threads()));
  // (With an LSE, a pick with the row sums by the PV GEMM runs its twin without them.)
  const fa3::KernelInfo* ran =
      fa3::kernel_for_call(*fa3::find_compiled_kernel(kernel), true, fa3::compiled_kernels());
  REQUIRE(ran);
  CHECK(smem == fa3::FwdSmemLayout::of(ran->fwd).total_bytes);
  CHECK(params.seqlen_q == 1000);
  CHECK(params.seqlen_k == 700);
  CHECK(params.heads == 8);
  CHECK(params.batch == 3);
  CHECK(params.heads_per_kv_head == 4);
  CHECK(params.num_m_blocks == static_cast<int>(m_blocks));
  CHECK(params.lse == pr.lse);
  CHECK(params.scale_log2 == Approx(1.0 / std::sqrt(128.0) * M_LOG2E));
  // The fake encoder wrote (address, rank, dims, byte strides, box) into each map.
  const uint64_t* k_map = params.tma_k.opaque;
  CHECK(k_map[0] == 0x200000000u);
  CHECK(k_map[1] == 4u);
  CHECK((k_map[2] == 128u && k_map[3] == 700u && k_map[4] == 2u && k_map[5] == 3u));
  CHECK((k_map[6] == 2u * 256 && k_map[7] == 2u * 128 && k_map[8] == 2u * 700 * 256));
  CHECK((k_map[9] == 64u && k_map[10] == static_cast<unsigned>(cfg->block_n)));  // 64 x block_n
  CHECK(params.tma_q.opaque[10] == 64u);            // Q and O boxes: 64 rows per warpgroup
  CHECK(params.tma_o.opaque[0] == 0x400000000u);
  fa3_destroy(h);
}

TEST_CASE("fake driver: a 2-CTA cluster kernel gets whole clusters and half-block K/V boxes",
          "[cpu][runtime]") {
  const char* name = compiled_d128([](const fa3::FwdConfig& c) { return c.cluster_m == 2; });
  if (!name) {
    WARN("no 2-CTA cluster kernel in this library (the lab build has them): not tested");
    return;
  }
  UseFakeDriver use;
  fa3_handle* h = create();
  Problem pr;
  pr.p.causal = 0;
  unsigned grid = 0, block = 0, smem = 0;
  fa3::FwdParams params;
  for (const int64_t seqlen_q : {1000, 800, 1}) {
    INFO("seqlen_q " << seqlen_q);
    pr.q.seqlen = pr.o.seqlen = seqlen_q;
    REQUIRE(fa3_forward_with_kernel(h, name, &pr.q, &pr.k, &pr.v, &pr.o, pr.lse, &pr.p, nullptr) ==
            FA3_OK);
    REQUIRE(fake().last_launch(&grid, &block, &smem, &params, sizeof params) == 1);
    // 8, 7 and 1 query blocks: rounded up to whole clusters of 2.
    const int m_blocks = seqlen_q == 1000 ? 8 : seqlen_q == 800 ? 8 : 2;
    CHECK(params.num_m_blocks == m_blocks);
    CHECK(params.num_tiles == m_blocks * 8 * 3);
    CHECK(grid == static_cast<unsigned>(m_blocks * 8 * 3));
    CHECK(params.tma_k.opaque[10] == 64u);  // each CTA loads half of a 128-row K/V block
    CHECK(params.tma_v.opaque[10] == 64u);
    CHECK(params.tma_q.opaque[10] == 64u);
    CHECK(params.seqlen_q == seqlen_q);
  }
  fa3_destroy(h);
}

TEST_CASE("fake driver: a persistent kernel gets one CTA per SM at most", "[cpu][runtime]") {
  UseFakeDriver use;
  fa3_handle* h = create();
  Problem pr;
  pr.p.causal = 0;
  const char* name =
      compiled_d128([](const fa3::FwdConfig& c) { return c.persistent() && !c.causal; });
  REQUIRE(name);
  REQUIRE(fa3_forward_with_kernel(h, name, &pr.q, &pr.k, &pr.v, &pr.o, pr.lse, &pr.p, nullptr) ==
          FA3_OK);
  unsigned grid = 0, block = 0, smem = 0;
  fa3::FwdParams params;
  REQUIRE(fake().last_launch(&grid, &block, &smem, &params, sizeof params) == 1);
  CHECK(params.num_tiles == 8 * 8 * 3);
  CHECK(grid == 132u);  // the fake device's SM count
  pr.q.batch = pr.k.batch = pr.v.batch = pr.o.batch = 1;
  pr.q.heads = pr.o.heads = 2;
  pr.q.stride_seq = pr.o.stride_seq = 2 * 128;
  pr.q.stride_batch = pr.o.stride_batch = 1000 * 2 * 128;
  pr.k.heads = pr.v.heads = 1;
  pr.k.stride_seq = pr.v.stride_seq = 128;
  REQUIRE(fa3_forward_with_kernel(h, name, &pr.q, &pr.k, &pr.v, &pr.o, pr.lse, &pr.p, nullptr) ==
          FA3_OK);
  REQUIRE(fake().last_launch(&grid, &block, &smem, &params, sizeof params) == 1);
  CHECK(grid == 16u);  // fewer tiles than SMs: one CTA per tile
  fa3_destroy(h);
}

TEST_CASE("the causal scheduler's L2 groups: powers of two, 8 MiB of K and V, a tile per SM, at most 16 MiB",
          "[cpu][runtime]") {
  using fa3::causal_l2_group;
  const int64_t MiB = int64_t{1} << 20;
  // The paper grid on 132 SMs, block_m 128 (kv: K and V bytes of one (batch, head) pair).
  // 8 MiB decides at d64 (1k: 32 pairs, 256 tiles) ...
  CHECK(causal_l2_group(MiB / 4, 8, 512, 132) == 32);
  CHECK(causal_l2_group(2 * MiB, 64, 64, 132) == 4);
  // ... a tile per SM where 8 MiB holds fewer pairs: d128 1k 16 pairs, d256 2k 8 pairs ...
  CHECK(causal_l2_group(MiB / 2, 8, 256, 132) == 16);
  CHECK(causal_l2_group(2 * MiB, 16, 64, 132) == 8);
  // ... and more for long tiles: 132 / 128 + 132 / 64 = 3.1 pairs -> 4 at 16k, but K and V
  // at most 16 MiB where 3/4 of a tile per SM remain: d128 16k 2 pairs (256 tiles), d256 16k
  // 1 (128 tiles), d256 8k 2 (of 4), d256 4k 4 (of 8); d256 2k stays at 8 (16 MiB).
  CHECK(causal_l2_group(8 * MiB, 128, 16, 132) == 2);
  CHECK(causal_l2_group(16 * MiB, 128, 8, 132) == 1);
  CHECK(causal_l2_group(8 * MiB, 64, 16, 132) == 2);
  CHECK(causal_l2_group(4 * MiB, 32, 32, 132) == 4);
  CHECK(causal_l2_group(2 * MiB, 16, 64, 132) == 8);
  // ... not below 3/4 of a tile per SM: 64 tiles of 32 MiB each stay 2 pairs (128 tiles).
  CHECK(causal_l2_group(32 * MiB, 64, 8, 132) == 2);
  // Nearest by ratio: 22 pairs fit -> 16 (22 < 16 * sqrt 2 = 22.6), 23 -> 32; never more
  // than the pairs there are, never less than 1.
  CHECK(causal_l2_group(8 * MiB / 22, 1000, 100, 132) == 16);
  CHECK(causal_l2_group(8 * MiB / 23, 1000, 100, 132) == 32);
  CHECK(causal_l2_group(1024, 1, 24, 132) == 16);
  CHECK(causal_l2_group(1024, 1, 1, 132) == 1);
  CHECK(causal_l2_group(64 * MiB, 1 << 20, 7, 1) == 1);
  CHECK(causal_l2_group(0, 0, 5, 0) == 4);
}

TEST_CASE_METHOD(CounterTest,
                 "fake driver: causal persistent kernels get one tile counter per stream",
                 "[cpu][runtime]") {
  auto launch = [&](uintptr_t stream) {
    unsigned grid = 0;
    const fa3::FwdParams params = pr.run_kernel(h, name, stream, &grid);
    CHECK(grid == 132u);
    // K and V of a (batch, head) pair take 350 KB (700 keys x 128 x 2 bytes, twice): 23
    // pairs fit in 8 MiB; the power of two nearest that, 32, is more than the 24 pairs: 16.
    CHECK(params.l2_group == 16);
    return params.tile_counter;
  };
  uint32_t* a = launch(0x10);
  uint32_t* b = launch(0x20);
  CHECK(a != nullptr);
  CHECK(b != nullptr);
  CHECK(a != b);             // streams that may run at once never share a counter
  CHECK(launch(0x10) == a);  // launches in one stream run in order: they share one
  {
    // GQA: the 8 query heads of a K/V head share its 8 MiB (16k keys x 128 x 2 bytes, twice),
    // so 8 pairs fit in 8 MiB where without GQA 1 does (a tile per SM asks for 4, and 16 MiB
    // of K and V caps that at 2).
    Problem gqa;
    gqa.q = tensor(0x100000000, 1, 16384, 32, 128);
    gqa.o = tensor(0x400000000, 1, 16384, 32, 128);
    for (const int64_t kv_heads : {int64_t{4}, int64_t{32}}) {
      gqa.k = tensor(0x200000000, 1, 16384, kv_heads, 128);
      gqa.v = tensor(0x300000000, 1, 16384, kv_heads, 128);
      CHECK(gqa.run_kernel(h, name, 0x10).l2_group == (kv_heads == 4 ? 8 : 2));
    }
  }
  const std::string calls = fake().calls();
  CHECK(FakeCuda::count(calls, "cuMemAlloc") == 1);  // one chunk holds many counters
  CHECK(FakeCuda::count(calls, "cuMemsetD32Async") == 1);
  // Zeroed on a stream of the handle's own, waited for (not the legacy stream's cuMemsetD32,
  // which a non-blocking caller stream does not wait for).
  CHECK(calls.find("cuStreamCreate;cuMemsetD32Async;cuStreamSynchronize;cuStreamDestroy;") !=
        std::string::npos);
  // A non-causal persistent kernel walks its tiles statically, with no counter, unless it
  // draws them (_dy): then it gets the stream's counter, as causal ones do.
  pr.p.causal = 0;
  size_t non_causal = 0;
  for (const fa3::KernelInfo& k : fa3::compiled_kernels()) {
    if (k.fwd.dtype != fa3::DType::BF16 || k.fwd.head_dim != 128 || !k.fwd.persistent() ||
        k.fwd.causal)
      continue;
    INFO(k.name);
    ++non_causal;
    CHECK(pr.run_kernel(h, k.name.c_str(), 0x10).tile_counter ==
          (k.fwd.draws_tiles() ? a : nullptr));
  }
  CHECK(non_causal > 0);
  fa3_destroy(h);
  CHECK(FakeCuda::count(fake().calls(), "cuMemFree") == 1);
}

TEST_CASE_METHOD(CounterTest,
                 "fake driver: many streams: a counter each, 1024 to a block, each found again",
                 "[cpu][runtime]") {
  auto counter_of = [&](uintptr_t stream) { return pr.run_kernel(h, name, stream).tile_counter; };
  // (The call log would overflow: allocations are counted by their recorded sizes.)
  fake().reset();
  constexpr uintptr_t kStreams = 2500;
  std::vector<uint32_t*> first(kStreams);
  for (uintptr_t n = 0; n < kStreams; ++n) first[n] = counter_of(0x10000 + 16 * n);
  CHECK(fake().allocated_bytes(2) == 4096);  // 1024 + 1024 + 452 streams
  CHECK(fake().allocated_bytes(3) == 0);
  CHECK(std::set<uint32_t*>(first.begin(), first.end()).size() == kStreams);
  for (uintptr_t n = kStreams; n-- > 0;) {
    INFO("stream " << n);
    REQUIRE(counter_of(0x10000 + 16 * n) == first[n]);
  }
  CHECK(fake().allocated_bytes(3) == 0);
  fake().reset();
  fa3_destroy(h);
  CHECK(FakeCuda::count(fake().calls(), "cuMemFree") == 3);
}

TEST_CASE_METHOD(CounterTest,
                 "fake driver: a failed counter allocation launches nothing",
                 "[cpu][runtime]") {
  fake().fail("cuMemAlloc", CUDA_ERROR_OUT_OF_MEMORY);
  CHECK(fa3_forward_with_kernel(h, name, &pr.q, &pr.k, &pr.v, &pr.o, pr.lse, &pr.p, nullptr) ==
        FA3_ERR_OUT_OF_MEMORY);
  CHECK(std::string(fa3_last_error()).find("allocating tile counters (cuMemAlloc) failed") == 0);
  CHECK(FakeCuda::count(fake().calls(), "cuLaunchKernelEx") == 0);
  // Zeroing the block fails at each of its steps: nothing launched, the block freed, the
  // handle's own stream destroyed once made, and the next call allocates afresh.
  for (const char* step : {"cuStreamCreate", "cuMemsetD32Async", "cuStreamSynchronize"}) {
    INFO(step);
    fake().reset();
    fake().fail(step, CUDA_ERROR_INVALID_VALUE);
    CHECK(fa3_forward_with_kernel(h, name, &pr.q, &pr.k, &pr.v, &pr.o, pr.lse, &pr.p,
                                  nullptr) == FA3_ERR_CUDA);
    CHECK(std::string(fa3_last_error()).find(std::string("(") + step + ") failed") !=
          std::string::npos);
    const std::string calls = fake().calls();
    CHECK(FakeCuda::count(calls, "cuLaunchKernelEx") == 0);
    CHECK(FakeCuda::count(calls, "cuMemFree") == 1);
    CHECK(FakeCuda::count(calls, "cuStreamDestroy") == (std::string(step) == "cuStreamCreate" ? 0u : 1u));
  }
  fake().fail("", 0);
  fake().reset();
  CHECK(fa3_forward_with_kernel(h, name, &pr.q, &pr.k, &pr.v, &pr.o, pr.lse, &pr.p, nullptr) ==
        FA3_OK);
  CHECK(FakeCuda::count(fake().calls(), "cuMemAlloc") == 1);
  fa3_destroy(h);
}

TEST_CASE_METHOD(CounterTest,
                 "fake driver: a capture on another thread (global mode) survives the first call's "
                 "module load and tile counters",
                 "[cpu][runtime]") {
  fake().set_foreign_capture(1);
  // The fake refuses cuMemAlloc to a thread in global mode meanwhile, as the driver does, and
  // the refusal breaks the capture.
  {
    using GetProc = CUresult (*)(const char*, void**, int, cuuint64_t,
                                 CUdriverProcAddressQueryResult*);
    void* lib = dlopen(fake_library_path().c_str(), RTLD_NOW | RTLD_NOLOAD);
    REQUIRE(lib != nullptr);
    const auto get_proc = reinterpret_cast<GetProc>(dlsym(lib, "cuGetProcAddress_v2"));
    REQUIRE(get_proc != nullptr);
    void* fn = nullptr;
    REQUIRE(get_proc("cuMemAlloc", &fn, 3020, 0, nullptr) == CUDA_SUCCESS);
    CUdeviceptr p = 0;
    CHECK(reinterpret_cast<CUresult (*)(CUdeviceptr*, size_t)>(fn)(&p, 64) ==
          CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CHECK(fake().foreign_capture_invalidated() == 1);
    dlclose(lib);
  }
  fake().set_foreign_capture(1);  // a fresh capture
  const size_t allocations = FakeCuda::count(fake().calls(), "cuMemAlloc");
  // The first call of a kernel with a tile counter on a new stream: the module is loaded, a
  // block of counters allocated and zeroed (a stream wait), all in relaxed mode.
  REQUIRE(fa3_forward_with_kernel(h, name, &pr.q, &pr.k, &pr.v, &pr.o, pr.lse, &pr.p,
                                  reinterpret_cast<void*>(0x50)) == FA3_OK);
  CHECK(FakeCuda::count(fake().calls(), "cuModuleLoadData") == 1);
  CHECK(FakeCuda::count(fake().calls(), "cuMemAlloc") == allocations + 1);
  CHECK(FakeCuda::count(fake().calls(), "cuStreamSynchronize") == 1);
  CHECK(FakeCuda::count(fake().calls(), "cuLaunchKernelEx") == 1);
  CHECK(fake().foreign_capture_invalidated() == 0);
  CHECK(fake().capture_mode() == CU_STREAM_CAPTURE_MODE_GLOBAL);  // the thread's, restored
  fa3_destroy(h);  // frees the block and unloads the module, relaxed too
  CHECK(fake().foreign_capture_invalidated() == 0);
  CHECK(fake().capture_mode() == CU_STREAM_CAPTURE_MODE_GLOBAL);
  fake().set_foreign_capture(0);
}

TEST_CASE_METHOD(CounterTest,
                 "fake driver: tile counters during a graph capture: none allocated, found by the "
                 "stream's handle or spare",
                 "[cpu][runtime]") {
  void* const stream = reinterpret_cast<void*>(0x40);
  fake().set_capturing(stream);
  // No counter in the context yet: refused before cuMemAlloc, which would invalidate a capture
  // in global mode.
  CHECK(fa3_forward_with_kernel(h, name, &pr.q, &pr.k, &pr.v, &pr.o, pr.lse, &pr.p, stream) ==
        FA3_ERR_INVALID_ARGUMENT);
  CHECK(std::string(fa3_last_error()) ==
        "stream is capturing a CUDA graph and the handle has no tile counter to give it (the "
        "first call of a kernel with a dynamic tile scheduler in a context allocates them): make "
        "one such fa3_forward call outside a capture first");
  CHECK(FakeCuda::count(fake().calls(), "cuMemAlloc") == 0);
  CHECK(FakeCuda::count(fake().calls(), "cuLaunchKernelEx") == 0);
  // A call before the capture gives the stream its counter; captured calls then find it by
  // the handle (the driver refuses cuStreamGetId during a capture, as the fake does).
  fake().set_capturing(nullptr);
  REQUIRE(fa3_forward_with_kernel(h, name, &pr.q, &pr.k, &pr.v, &pr.o, pr.lse, &pr.p, stream) ==
          FA3_OK);
  unsigned grid = 0, block = 0, smem = 0;
  fa3::FwdParams direct, captured;
  REQUIRE(fake().last_launch(&grid, &block, &smem, &direct, sizeof direct) == 1);
  fake().set_capturing(stream);
  const size_t ids = FakeCuda::count(fake().calls(), "cuStreamGetId");
  REQUIRE(fa3_forward_with_kernel(h, name, &pr.q, &pr.k, &pr.v, &pr.o, pr.lse, &pr.p, stream) ==
          FA3_OK);
  REQUIRE(fake().last_launch(&grid, &block, &smem, &captured, sizeof captured) == 1);
  CHECK(captured.tile_counter == direct.tile_counter);
  // A stream first used in a capture gets a spare counter of the chunk, its own.
  void* const fresh = reinterpret_cast<void*>(0x48);
  fake().set_capturing(fresh);
  fa3::FwdParams spare;
  for (int call = 0; call < 2; ++call) {
    REQUIRE(fa3_forward_with_kernel(h, name, &pr.q, &pr.k, &pr.v, &pr.o, pr.lse, &pr.p, fresh) ==
            FA3_OK);
    fa3::FwdParams p;
    REQUIRE(fake().last_launch(&grid, &block, &smem, &p, sizeof p) == 1);
    if (call == 0) spare = p;
    CHECK(p.tile_counter != direct.tile_counter);
    CHECK(p.tile_counter == spare.tile_counter);  // the second capture finds it by the handle
  }
  // Outside a capture that stream is known by its id: a counter of its own again.
  fake().set_capturing(nullptr);
  REQUIRE(fa3_forward_with_kernel(h, name, &pr.q, &pr.k, &pr.v, &pr.o, pr.lse, &pr.p, fresh) ==
          FA3_OK);
  fa3::FwdParams by_id;
  REQUIRE(fake().last_launch(&grid, &block, &smem, &by_id, sizeof by_id) == 1);
  CHECK(by_id.tile_counter != spare.tile_counter);
  CHECK(by_id.tile_counter != direct.tile_counter);
  CHECK(FakeCuda::count(fake().calls(), "cuStreamGetId") == ids + 1);
  CHECK(FakeCuda::count(fake().calls(), "cuMemAlloc") == 1);
  CHECK(FakeCuda::count(fake().calls(), "cuLaunchKernelEx") == 5);
  // The default streams' handles stand for no one stream: refused.
  for (void* special : {reinterpret_cast<void*>(CU_STREAM_PER_THREAD),
                        reinterpret_cast<void*>(CU_STREAM_LEGACY)}) {
    fake().set_capturing(special);
    CHECK(fa3_forward_with_kernel(h, name, &pr.q, &pr.k, &pr.v, &pr.o, pr.lse, &pr.p, special) ==
          FA3_ERR_INVALID_ARGUMENT);
    CHECK(std::string(fa3_last_error()) ==
          "stream is a default stream capturing a CUDA graph: a kernel with a dynamic tile "
          "scheduler is captured only on a stream created by the caller");
  }
  CHECK(FakeCuda::count(fake().calls(), "cuLaunchKernelEx") == 5);
  // Kernels without a counter never ask.
  pr.p.causal = 0;
  fake().reset();
  fake().set_capturing(stream);
  REQUIRE(fa3_forward(h, &pr.q, &pr.k, &pr.v, &pr.o, pr.lse, &pr.p, stream) == FA3_OK);
  CHECK(FakeCuda::count(fake().calls(), "cuLaunchKernelEx") == 1);
  fa3_destroy(h);
}

TEST_CASE("fake driver: contexts", "[cpu][runtime]") {
  UseFakeDriver use;
  fa3_handle* h = create();
  Problem pr;

  SECTION("no current context: the primary context is pushed for the call, then popped") {
    fake().make_current(0);
    REQUIRE(pr.run(h) == FA3_OK);
    const std::string log = fake().calls();
    CHECK(log.find("cuCtxPushCurrent;") != std::string::npos);
    CHECK(log.find("cuCtxPopCurrent;") > log.find("cuLaunchKernelEx;"));
    CHECK_FALSE(fake().current_is_primary());
  }
  SECTION("the caller's context of the same device is used as it is") {
    fake().make_current(1);
    REQUIRE(pr.run(h) == FA3_OK);
    CHECK(FakeCuda::count(fake().calls(), "cuCtxPushCurrent") == 0);
    // a second module load: the caller's context is a different context than the primary
    fake().make_current(0);
    REQUIRE(pr.run(h) == FA3_OK);
    CHECK(FakeCuda::count(fake().calls(), "cuModuleLoadData") == 2);
  }
  SECTION("a context of another device: the primary context of ours is pushed") {
    fake().make_current(2);
    REQUIRE(pr.run(h) == FA3_OK);
    CHECK(FakeCuda::count(fake().calls(), "cuCtxPushCurrent") == 1);
  }
  fake().make_current(0);
  fa3_destroy(h);
}

TEST_CASE_METHOD(CounterTest,
                 "fake driver: a context made again at a destroyed one's address, or a reset primary "
                 "context, gets its kernels and counters afresh",
                 "[cpu][runtime]") {
  // The driver hands a destroyed context's address to a later context, and a reset primary
  // context keeps its address: what the handle loaded or allocated there is gone. The caches
  // go by cuCtxGetId's id, which the fake renews as the driver would.
  const auto run = [&] {
    return fa3_forward_with_kernel(h, name, &pr.q, &pr.k, &pr.v, &pr.o, pr.lse, &pr.p,
                                   reinterpret_cast<void*>(0x10));
  };
  fake().make_current(1);
  REQUIRE(run() == FA3_OK);
  REQUIRE(run() == FA3_OK);
  CHECK(FakeCuda::count(fake().calls(), "cuModuleLoadData") == 1);
  CHECK(FakeCuda::count(fake().calls(), "cuMemAlloc") == 1);  // the block of tile counters
  fake().renew_context(1);
  REQUIRE(run() == FA3_OK);
  CHECK(FakeCuda::count(fake().calls(), "cuModuleLoadData") == 2);
  CHECK(FakeCuda::count(fake().calls(), "cuMemAlloc") == 2);
  // The primary context (pushed for the call), then reset.
  fake().make_current(0);
  REQUIRE(run() == FA3_OK);
  fake().renew_context(0);
  REQUIRE(run() == FA3_OK);
  CHECK(FakeCuda::count(fake().calls(), "cuModuleLoadData") == 4);
  CHECK(FakeCuda::count(fake().calls(), "cuMemAlloc") == 4);
  // fa3_destroy releases what the primary context holds now, not what its reset took (whose
  // addresses may be another allocation's by then), nor the user contexts'.
  fake().reset();
  fa3_destroy(h);
  CHECK(FakeCuda::count(fake().calls(), "cuModuleUnload") == 1);
  CHECK(FakeCuda::count(fake().calls(), "cuMemFree") == 1);
}

TEST_CASE("fake driver: a kernel is loaded once per context, also under concurrent calls",
          "[cpu][runtime]") {
  UseFakeDriver use;
  fa3_handle* h = create();
  std::vector<std::thread> threads;
  std::vector<fa3_status> status(8, FA3_ERR_INTERNAL);
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      Problem pr;
      for (int i = 0; i < 10; ++i) status[static_cast<size_t>(t)] = pr.run(h);
    });
  for (std::thread& t : threads) t.join();
  for (fa3_status s : status) CHECK(s == FA3_OK);
  const std::string log = fake().calls();
  CHECK(FakeCuda::count(log, "cuModuleLoadData") == 1);
  CHECK(FakeCuda::count(log, "cuLaunchKernelEx") == 80);
  fa3_destroy(h);
  const std::string after = fake().calls();
  CHECK(FakeCuda::count(after, "cuModuleUnload") == 1);
  CHECK(FakeCuda::count(after, "cuDevicePrimaryCtxRelease") == 1);
}

TEST_CASE("fake driver: failures launch nothing and say what failed", "[cpu][runtime]") {
  UseFakeDriver use;
  fa3_handle* h = create();
  Problem pr;
  const char* picked = nullptr;
  REQUIRE(fa3_forward_select(h, &pr.q, &pr.k, &pr.v, &pr.p, &picked) == FA3_OK);
  const std::string kernel = picked;

  SECTION("a bad argument reaches no driver call") {
    pr.k.heads = pr.v.heads = 3;
    const std::string before = fake().calls();
    CHECK(pr.run(h) == FA3_ERR_INVALID_ARGUMENT);
    CHECK(fake().calls() == before);
  }
  SECTION("a tensor map the driver rejects") {
    fake().fail("cuTensorMapEncodeTiled", CUDA_ERROR_INVALID_VALUE);
    CHECK(pr.run(h) == FA3_ERR_INVALID_ARGUMENT);
    CHECK(std::string(fa3_last_error()).rfind("the driver rejected the TMA tensor map of q (cuTensorMapEncodeTiled: CUDA_ERROR_FAKE", 0) == 0);
    CHECK(FakeCuda::count(fake().calls(), "cuLaunchKernelEx") == 0);
  }
  SECTION("a failed launch") {
    fake().fail("cuLaunchKernelEx", CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES);
    CHECK(pr.run(h) == FA3_ERR_CUDA);
    CHECK(std::string(fa3_last_error()) ==
          "launching " + kernel + " (cuLaunchKernelEx) failed: CUDA_ERROR_FAKE (failure injected by the fake driver)");
  }
  SECTION("out of memory while loading the kernel") {
    fake().fail("cuModuleLoadData", CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(pr.run(h) == FA3_ERR_OUT_OF_MEMORY);
    CHECK(std::string(fa3_last_error()).find("loading kernel " + kernel + " (cuModuleLoadData) failed") == 0);
    fake().fail("", 0);
    CHECK(pr.run(h) == FA3_OK);  // not cached as failed: the next call loads it
  }
  SECTION("forcing a kernel that does not fit") {
    CHECK(fa3_forward_with_kernel(h, "fa3_fwd_f16_d128_m128_n128_s2_w2", &pr.q, &pr.k, &pr.v, &pr.o,
                                  pr.lse, &pr.p, nullptr) == FA3_ERR_UNSUPPORTED);
    CHECK(std::string(fa3_last_error()) ==
          "kernel fa3_fwd_f16_d128_m128_n128_s2_w2 does not fit this problem (bf16, head_dim 128, causal)");
    CHECK(fa3_forward_with_kernel(h, "fa3_fwd_nope", &pr.q, &pr.k, &pr.v, &pr.o, pr.lse, &pr.p,
                                  nullptr) == FA3_ERR_UNSUPPORTED);
    // A backward kernel's name: said so, not "not compiled" (fa3_kernel_name lists it).
    if (!fa3::compiled_backward_kernels().empty()) {
      const std::string backward = fa3::compiled_backward_kernels().front().name;
      CHECK(fa3_forward_with_kernel(h, backward.c_str(), &pr.q, &pr.k, &pr.v, &pr.o, pr.lse,
                                    &pr.p, nullptr) == FA3_ERR_UNSUPPORTED);
      CHECK(std::string(fa3_last_error()) ==
            "kernel " + backward + " is a backward kernel; fa3_forward_with_kernel runs forward "
            "kernels (fa3_fwd_...)");
    }
    CHECK(FakeCuda::count(fake().calls(), "cuLaunchKernelEx") == 0);
  }
  fa3_destroy(h);
}

TEST_CASE("fake driver: the table's pick is the library's kernel: its name outlives the handle, "
          "and it is loaded once however it is named",
          "[cpu][runtime]") {
  UseFakeDriver use;
  fa3_handle* h = create();
  Problem pr;
  const char* name = nullptr;
  REQUIRE(fa3_forward_select(h, &pr.q, &pr.k, &pr.v, &pr.p, &name) == FA3_OK);
  REQUIRE(name != nullptr);
  // The registry's own string (what fa3_kernel_name returns), not the handle's table's copy.
  const fa3::KernelInfo* compiled = fa3::find_compiled_kernel(name);
  REQUIRE(compiled != nullptr);
  CHECK(name == compiled->name.c_str());
  REQUIRE(pr.run(h) == FA3_OK);
  REQUIRE(fa3_forward_with_kernel(h, name, &pr.q, &pr.k, &pr.v, &pr.o, pr.lse, &pr.p, nullptr) ==
          FA3_OK);
  CHECK(FakeCuda::count(fake().calls(), "cuModuleLoadData") == 1);
  CHECK(FakeCuda::count(fake().calls(), "cuLaunchKernelEx") == 2);
  fa3_destroy(h);
  CHECK(std::string(name) == compiled->name);
}

TEST_CASE("fake driver: a call with an LSE runs the twin of a kernel with PV-GEMM row sums",
          "[cpu][runtime]") {
  const fa3::KernelInfo* ls = nullptr;
  for (const fa3::KernelInfo& k : fa3::compiled_kernels())
    if (k.fwd.row_sum_mma && k.fwd.dtype == fa3::DType::BF16 && k.fwd.head_dim == 128) ls = &k;
  if (!ls) {
    WARN("no bf16 d128 _ls kernel in this library: nothing to test");
    return;
  }
  INFO(ls->name);
  const fa3::KernelInfo* twin = fa3::kernel_for_call(*ls, true, fa3::compiled_kernels());
  REQUIRE(twin);
  CHECK_FALSE(twin->fwd.row_sum_mma);
  // The two differ in their shared memory (the ones after each V stage): the launch says
  // which one ran.
  REQUIRE(fa3::FwdSmemLayout::of(ls->fwd).total_bytes != fa3::FwdSmemLayout::of(twin->fwd).total_bytes);
  UseFakeDriver use;
  fa3_handle* h = create();
  Problem pr;
  pr.p.causal = ls->fwd.causal ? 1 : 0;
  unsigned grid = 0, block = 0, smem = 0;
  fa3::FwdParams params;
  REQUIRE(fa3_forward_with_kernel(h, ls->name.c_str(), &pr.q, &pr.k, &pr.v, &pr.o, nullptr, &pr.p,
                                  nullptr) == FA3_OK);
  REQUIRE(fake().last_launch(&grid, &block, &smem, &params, sizeof params) == 1);
  CHECK(smem == fa3::FwdSmemLayout::of(ls->fwd).total_bytes);
  CHECK(params.lse == nullptr);
  REQUIRE(fa3_forward_with_kernel(h, ls->name.c_str(), &pr.q, &pr.k, &pr.v, &pr.o, pr.lse, &pr.p,
                                  nullptr) == FA3_OK);
  REQUIRE(fake().last_launch(&grid, &block, &smem, &params, sizeof params) == 1);
  CHECK(smem == fa3::FwdSmemLayout::of(twin->fwd).total_bytes);
  CHECK(params.lse == pr.lse);
  fa3_destroy(h);
}

