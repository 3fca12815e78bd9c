// v85: does programmatic dependent launch hang the GPU with nothing of fa3 in it?
// The backward's launch pattern with kernels that only wait: per call a new non-blocking
// stream, a preprocess (ordinary launch, griddepcontrol.launch_dependents at its start), a main
// kernel (launch_dependents at its start, setmaxnreg, then griddepcontrol.wait; one CTA an SM
// by its shared memory and its registers, the whole register file) and a postprocess
// (griddepcontrol.wait first), the last two by programmatic dependent launch as chosen; an
// event after each call; the stream dropped. (docs/runs/2026-11-29-v85/h200_2 ran a first form
// without setmaxnreg: 10 registers, other CTAs beside a main one; it never hung.) STREAMS calls without waiting,
// ROUNDS times; each round's calls waited for at most 60 s (then: the unfinished calls, exit 2).
//   nvcc -std=c++17 -O2 -gencode=arch=compute_90a,code=sm_90a -o build/pdl_repro lab/pdl_repro/pdl_repro.cu
//   build/pdl_repro PDL(none|main|post|both) [STREAMS=40] [ROUNDS=10] [MAIN_CTAS=32] [ALLOC_MIB=0]
//                   [MEMSET=0] [PRE_TRIGGER=1] [MAIN_TRIGGER=1]
// ALLOC_MIB > 0: a cudaMalloc of that many MiB before each call (as the handle's pool grows, or
// the tests' caller workspaces), freed after its round; MEMSET=1: each also filled by a
// cudaMemset on the legacy stream, awaited (the tests' poison) before the call. Rounds with
// MEMSET=2 alternate: even rounds fill, odd rounds do not (the tests' caller sections, then
// the pool's). PRE_TRIGGER, MAIN_TRIGGER: where those kernels say launch_dependents (0 nowhere,
// 1 at the start, 2 after the work). PDL_REPRO_WAIT_S: the bound of a round (60 s).
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#define CHECK(x)                                                                         \
  do {                                                                                   \
    cudaError_t e_ = (x);                                                                \
    if (e_ != cudaSuccess) {                                                             \
      std::fprintf(stderr, "%s: %s (line %d)\n", #x, cudaGetErrorString(e_), __LINE__); \
      std::exit(1);                                                                      \
    }                                                                                    \
  } while (0)

__device__ __forceinline__ void spin_ns(unsigned long long ns) {
  unsigned long long start;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  for (;;) {
    unsigned long long now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    if (now - start >= ns) break;
  }
}

// trigger: where a kernel says griddepcontrol.launch_dependents: 0 nowhere (its dependent
// launches as its CTAs end), 1 at its start, 2 after its work.
__global__ void pre(int* out, int trigger) {
  if (trigger == 1) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  spin_ns(10000);
  if (threadIdx.x == 0) out[blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z)] = 1;
  if (trigger == 2) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}

// As the backward's main kernel: three warpgroups in one CTA an SM, warpgroup 0 down to 24
// registers and the others up to 240 (setmaxnreg), the wait for the preprocess after that.
__global__ void __launch_bounds__(384, 1) mainloop(int* out, int trigger) {
  extern __shared__ int smem[];
  if (trigger == 1) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  if (threadIdx.x < 128)
    asm volatile("setmaxnreg.dec.sync.aligned.u32 24;" ::: "memory");
  else
    asm volatile("setmaxnreg.inc.sync.aligned.u32 240;" ::: "memory");
  asm volatile("griddepcontrol.wait;" ::: "memory");
  smem[threadIdx.x] = out[threadIdx.x];
  spin_ns(100000);
  __syncthreads();
  if (threadIdx.x == 0) out[4096 + blockIdx.x] = smem[blockIdx.x % blockDim.x] + 1;
  if (trigger == 2) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}

__global__ void post(int* out) {
  __shared__ int tile[64 * 68];
  asm volatile("griddepcontrol.wait;" ::: "memory");
  tile[threadIdx.x] = out[4096 + threadIdx.x % 32];
  spin_ns(10000);
  __syncthreads();
  if (threadIdx.x == 0) out[8192 + blockIdx.x] = tile[5];
}

int main(int argc, char** argv) {
  const std::string pdl = argc > 1 ? argv[1] : "both";
  const int streams = argc > 2 ? std::atoi(argv[2]) : 40;
  const int rounds = argc > 3 ? std::atoi(argv[3]) : 10;
  const int main_ctas = argc > 4 ? std::atoi(argv[4]) : 32;
  const int alloc_mib = argc > 5 ? std::atoi(argv[5]) : 0;
  const int memset_mode = argc > 6 ? std::atoi(argv[6]) : 0;
  const int pre_trigger = argc > 7 ? std::atoi(argv[7]) : 1;
  const int main_trigger = argc > 8 ? std::atoi(argv[8]) : 1;
  const char* wait_env = std::getenv("PDL_REPRO_WAIT_S");
  const int wait_ms = 1000 * (wait_env ? std::atoi(wait_env) : 60);
  const bool pdl_main = pdl == "main" || pdl == "both", pdl_post = pdl == "post" || pdl == "both";
  if (!pdl_main && !pdl_post && pdl != "none") {
    std::fprintf(stderr, "PDL must be none, main, post or both\n");
    return 1;
  }
  const int kMainSmem = 200 * 1024;
  CHECK(cudaFuncSetAttribute(mainloop, cudaFuncAttributeMaxDynamicSharedMemorySize, kMainSmem));
  std::printf("pdl=%s streams=%d rounds=%d main_ctas=%d alloc_mib=%d memset=%d pre_trigger=%d "
              "main_trigger=%d\n", pdl.c_str(), streams, rounds, main_ctas, alloc_mib, memset_mode,
              pre_trigger, main_trigger);
  std::vector<int*> buffers(static_cast<size_t>(streams));
  for (auto& b : buffers) CHECK(cudaMalloc(&b, 16384 * sizeof(int)));
  for (int round = 0; round < rounds; ++round) {
    std::vector<void*> allocations;
    const bool fill = memset_mode == 1 || (memset_mode == 2 && round % 2 == 0);
    std::vector<cudaEvent_t> done(static_cast<size_t>(streams));
    for (int c = 0; c < streams; ++c) {
      if (alloc_mib > 0) {
        void* p = nullptr;
        const size_t bytes = static_cast<size_t>(alloc_mib) << 20;
        CHECK(cudaMalloc(&p, bytes));
        allocations.push_back(p);
        if (fill) {
          CHECK(cudaMemset(p, 0xff, bytes));
          CHECK(cudaStreamSynchronize(cudaStreamLegacy));
        }
      }
      cudaStream_t s;
      CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
      int* out = buffers[static_cast<size_t>(c)];
      cudaLaunchAttribute attr;
      std::memset(&attr, 0, sizeof attr);
      attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
      attr.val.programmaticStreamSerializationAllowed = 1;
      cudaLaunchConfig_t cfg;
      std::memset(&cfg, 0, sizeof cfg);
      cfg.stream = s;
      cfg.gridDim = dim3(16, 8, 2);
      cfg.blockDim = dim3(128);
      CHECK(cudaLaunchKernelEx(&cfg, pre, out, pre_trigger));
      cfg.gridDim = dim3(main_ctas);
      cfg.blockDim = dim3(384);
      cfg.dynamicSmemBytes = kMainSmem;
      cfg.attrs = pdl_main ? &attr : nullptr;
      cfg.numAttrs = pdl_main ? 1 : 0;
      CHECK(cudaLaunchKernelEx(&cfg, mainloop, out, main_trigger));
      cfg.gridDim = dim3(16, 8, 2);
      cfg.blockDim = dim3(128);
      cfg.dynamicSmemBytes = 0;
      cfg.attrs = pdl_post ? &attr : nullptr;
      cfg.numAttrs = pdl_post ? 1 : 0;
      CHECK(cudaLaunchKernelEx(&cfg, post, out));
      CHECK(cudaEventCreateWithFlags(&done[static_cast<size_t>(c)], cudaEventDisableTiming));
      CHECK(cudaEventRecord(done[static_cast<size_t>(c)], s));
      CHECK(cudaStreamDestroy(s));
    }
    std::string stuck;
    for (int waited_ms = 0; waited_ms <= wait_ms; waited_ms += 10) {
      stuck.clear();
      for (int c = 0; c < streams; ++c) {
        const cudaError_t q = cudaEventQuery(done[static_cast<size_t>(c)]);
        if (q == cudaErrorNotReady) stuck += " " + std::to_string(c);
        else if (q != cudaSuccess) { std::printf("round %d call %d: %s\n", round, c, cudaGetErrorString(q)); return 1; }
      }
      if (stuck.empty()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (!stuck.empty()) {
      std::printf("HANG: round %d, calls unfinished after %d s:%s\n", round, wait_ms / 1000, stuck.c_str());
      std::fflush(stdout);
      std::_Exit(2);
    }
    for (cudaEvent_t e : done) CHECK(cudaEventDestroy(e));
    for (void* p : allocations) CHECK(cudaFree(p));
  }
  std::printf("PASS: %d rounds of %d calls\n", rounds, streams);
  return 0;
}
