// Every argument rule of fa3_forward, checked on the CPU: each broken rule gives its status
// and a sentence naming the argument. The descriptors point at fake (never dereferenced)
// addresses: checking must not touch device memory.
#include <catch2/catch.hpp>

#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <limits>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "fa3/fa3.h"
#include "runtime/forward_problem.h"
#include "support/fake_cuda_client.h"

// The test binary's operator new, replaced so that a test can make host allocations fail on
// its thread (std::bad_alloc) while it calls the C API. Otherwise it is malloc's.
namespace {
thread_local int failing_allocations = 0;  // > 0: every operator new on this thread throws
}  // namespace

void* operator new(std::size_t bytes) {
  if (failing_allocations > 0) throw std::bad_alloc();
  if (void* p = std::malloc(bytes == 0 ? 1 : bytes)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace {

constexpr uintptr_t kQ = 0x100000000, kK = 0x200000000, kV = 0x300000000, kO = 0x400000000,
                    kLse = 0x500000000;

fa3_tensor tensor(uintptr_t addr, int64_t b, int64_t s, int64_t h, int64_t d,
                  fa3_dtype dtype = FA3_BF16) {
  fa3_tensor t{};
  t.data = reinterpret_cast<void*>(addr);
  t.dtype = dtype;
  t.batch = b; t.seqlen = s; t.heads = h; t.head_dim = d;
  t.stride_head = d; t.stride_seq = h * d; t.stride_batch = s * h * d;
  return t;
}

struct Args {
  fa3_tensor q = tensor(kQ, 2, 100, 8, 128), k = tensor(kK, 2, 300, 2, 128),
             v = tensor(kV, 2, 300, 2, 128), o = tensor(kO, 2, 100, 8, 128);
  float* lse = reinterpret_cast<float*>(kLse);
  fa3_params p{0.0f, 1, 0};
  const fa3_params* params = &p;

  fa3::Error check(fa3::ForwardProblem* prob = nullptr) const {
    fa3::ForwardProblem local;
    return fa3::check_forward(&q, &k, &v, &o, lse, params, prob ? prob : &local);
  }
  // Batch 1 in every tensor: lengths near 2^31 then break no size rule but the one tested.
  void one_batch() {
    for (fa3_tensor* t : {&q, &k, &v, &o}) t->batch = 1;
  }
};

struct Rule {
  const char* what;
  std::function<void(Args&)> breaks;
  fa3_status status;
  const char* message;  // exact sentence
};

}  // namespace

TEST_CASE("valid arguments describe the problem", "[cpu][api]") {
  Args a;
  fa3::ForwardProblem prob;
  const fa3::Error e = a.check(&prob);
  INFO(e.message);
  REQUIRE_FALSE(e.failed());
  CHECK(prob.dtype == fa3::DType::BF16);
  CHECK(prob.head_dim == 128);
  CHECK(prob.causal);
  CHECK(prob.batch == 2);
  CHECK(prob.seqlen_q == 100);
  CHECK(prob.seqlen_k == 300);
  CHECK(prob.heads == 8);
  CHECK(prob.heads_kv == 2);
  CHECK(prob.softmax_scale == Approx(1.0 / std::sqrt(128.0)));

  a.params = nullptr;  // defaults: non-causal, 1/sqrt(d)
  REQUIRE_FALSE(a.check(&prob).failed());
  CHECK_FALSE(prob.causal);
  a.p = {0.25f, 0, 0};
  a.params = &a.p;
  REQUIRE_FALSE(a.check(&prob).failed());
  CHECK(prob.softmax_scale == 0.25f);
}

TEST_CASE("valid strided layouts are accepted", "[cpu][api]") {
  Args a;
  // q, k, v as views of one packed (B, S, 3, H, D) buffer.
  const int64_t B = 2, S = 64, H = 4, D = 64;
  for (fa3_tensor* t : {&a.q, &a.k, &a.v}) {
    *t = tensor(kQ, B, S, H, D);
    t->stride_seq = 3 * H * D;
    t->stride_batch = S * 3 * H * D;
  }
  a.k.data = reinterpret_cast<char*>(kQ) + H * D * 2;
  a.v.data = reinterpret_cast<char*>(kQ) + 2 * H * D * 2;
  a.o = tensor(kO, B, S, H, D);
  const fa3::Error e = a.check();
  INFO(e.message);
  CHECK_FALSE(e.failed());

  // o as a fourth view of one packed (B, S, 4, H, D) buffer: it shares no element with q, k or
  // v, though its bytes lie between theirs. Shifted by one element it would share some.
  for (fa3_tensor* t : {&a.q, &a.k, &a.v}) {
    t->stride_seq = 4 * H * D;
    t->stride_batch = S * 4 * H * D;
  }
  a.o = a.q;
  a.o.data = reinterpret_cast<char*>(kQ) + 3 * H * D * 2;
  const fa3::Error e1 = a.check();
  INFO(e1.message);
  CHECK_FALSE(e1.failed());
  a.o.data = reinterpret_cast<char*>(kQ) + 3 * H * D * 2 - 16;  // TMA: 16-byte aligned
  CHECK(a.check().message == "o overlaps v in memory: the output must not alias an input");
  a.o.data = reinterpret_cast<char*>(kQ) + 3 * H * D * 2;
  // lse from o's last row on: past the buffer's end, it shares o's elements only.
  a.lse = reinterpret_cast<float*>(kQ + ((B * S - 1) * 4 * H * D + 3 * H * D) * 2);
  CHECK(a.check().message ==
        "lse overlaps o in memory: the (batch, heads, seqlen_q) fp32 LSE buffer must be separate");

  // A (B, H, S, D) output viewed as (B, S, H, D); batch 1 with stride_batch 0.
  Args b;
  b.o.stride_head = 100 * 128;
  b.o.stride_seq = 128;
  b.o.stride_batch = 8 * 100 * 128;
  b.q.batch = b.k.batch = b.v.batch = b.o.batch = 1;
  b.q.stride_batch = 0;
  const fa3::Error e2 = b.check();
  INFO(e2.message);
  CHECK_FALSE(e2.failed());

  // Padded heads (stride_head 256 for 128 columns) whose rows end after the last head's
  // columns: a row spans 7 * 256 + 128 = 1920 elements, so stride_seq 1920 shares none; 1912
  // would.
  Args c;
  c.o.stride_head = 256;
  c.o.stride_seq = 1920;
  c.o.stride_batch = 1920 * 100;
  const fa3::Error e3 = c.check();
  INFO(e3.message);
  CHECK_FALSE(e3.failed());
  c.o.stride_seq = 1912;  // TMA: a multiple of 8 elements
  CHECK(c.check().message ==
        "o->stride_seq (1912) is smaller than the extent of o's heads dimension(s) (1920 "
        "elements): different elements of the output would share memory");
}

namespace {

// Every argument rule of fa3_forward, broken one at a time.
const std::vector<Rule>& forward_rules() {
  static const std::vector<Rule> rules = {
      {"q null", [](Args& a) { a.q.data = nullptr; }, FA3_ERR_INVALID_ARGUMENT, "q->data is NULL"},
      {"o null", [](Args& a) { a.o.data = nullptr; }, FA3_ERR_INVALID_ARGUMENT, "o->data is NULL"},
      {"f32", [](Args& a) { a.q.dtype = FA3_F32; }, FA3_ERR_INVALID_ARGUMENT,
       "q->dtype must be FA3_F16 or FA3_BF16 (got FA3_F32)"},
      {"e4m3", [](Args& a) { a.q.dtype = FA3_E4M3; }, FA3_ERR_UNSUPPORTED,
       "q->dtype is FA3_E4M3: fa3_forward takes FA3_F16 or FA3_BF16 inputs"},
      {"mixed dtype", [](Args& a) { a.v.dtype = FA3_F16; }, FA3_ERR_INVALID_ARGUMENT,
       "v->dtype (FA3_F16) must equal q->dtype (FA3_BF16)"},
      {"o dtype", [](Args& a) { a.o.dtype = FA3_F16; }, FA3_ERR_INVALID_ARGUMENT,
       "o->dtype (FA3_F16) must equal q->dtype (FA3_BF16)"},
      {"head dim", [](Args& a) { a.q.head_dim = a.k.head_dim = a.v.head_dim = a.o.head_dim = 96; },
       FA3_ERR_UNSUPPORTED, "q->head_dim must be 64, 128 or 256 (got 96)"},
      {"k head dim", [](Args& a) { a.k.head_dim = 64; }, FA3_ERR_INVALID_ARGUMENT,
       "k->head_dim (64) must equal q->head_dim (128)"},
      {"zero batch", [](Args& a) { a.q.batch = 0; }, FA3_ERR_INVALID_ARGUMENT,
       "q->batch must be >= 1 (got 0)"},
      {"negative seqlen", [](Args& a) { a.k.seqlen = -5; }, FA3_ERR_INVALID_ARGUMENT,
       "k->seqlen must be >= 1 (got -5)"},
      {"zero heads", [](Args& a) { a.v.heads = 0; }, FA3_ERR_INVALID_ARGUMENT,
       "v->heads must be >= 1 (got 0)"},
      {"huge seqlen", [](Args& a) { a.q.seqlen = a.o.seqlen = int64_t{1} << 31; },
       FA3_ERR_INVALID_ARGUMENT, "q->seqlen must be at most 2147483647 (got 2147483648)"},
      {"q seqlen past whole blocks",
       [](Args& a) {
         a.one_batch();
         a.q.seqlen = a.o.seqlen = 2147483600;
       },
       FA3_ERR_INVALID_ARGUMENT,
       "q->seqlen must be at most 2147483392 for fa3_forward (got 2147483600): rounded up to "
       "whole blocks it must stay below 2^31"},
      {"k seqlen past whole blocks",
       [](Args& a) {
         a.one_batch();
         a.k.seqlen = a.v.seqlen = 2147483600;
       },
       FA3_ERR_INVALID_ARGUMENT,
       "k->seqlen must be at most 2147483392 for fa3_forward (got 2147483600): rounded up to "
       "whole blocks it must stay below 2^31"},
      {"causal diagonal past 32 bits",
       [](Args& a) {
         a.one_batch();
         a.q.seqlen = a.o.seqlen = 1000000000;
         a.k.seqlen = a.v.seqlen = 1200000000;
       },
       FA3_ERR_INVALID_ARGUMENT,
       "q->seqlen + k->seqlen (2200000000) must be at most 2147483392 for a causal fa3_forward: "
       "its diagonal is found in 32-bit arithmetic"},
      {"batch mismatch", [](Args& a) { a.k.batch = 3; }, FA3_ERR_INVALID_ARGUMENT,
       "k->batch (3) must equal q->batch (2)"},
      {"kv seqlen mismatch", [](Args& a) { a.v.seqlen = 299; }, FA3_ERR_INVALID_ARGUMENT,
       "v->seqlen (299) must equal k->seqlen (300)"},
      {"kv heads mismatch", [](Args& a) { a.v.heads = 4; }, FA3_ERR_INVALID_ARGUMENT,
       "v->heads (4) must equal k->heads (2)"},
      {"gqa", [](Args& a) { a.k.heads = a.v.heads = 3; }, FA3_ERR_INVALID_ARGUMENT,
       "q->heads (8) must be a multiple of k->heads (3) (grouped-query attention)"},
      {"o seqlen", [](Args& a) { a.o.seqlen = 99; }, FA3_ERR_INVALID_ARGUMENT,
       "o->seqlen (99) must equal q->seqlen (100)"},
      {"o heads", [](Args& a) { a.o.heads = 2; }, FA3_ERR_INVALID_ARGUMENT,
       "o->heads (2) must equal q->heads (8)"},
      {"misaligned data", [](Args& a) { a.k.data = reinterpret_cast<char*>(kK) + 8; },
       FA3_ERR_INVALID_ARGUMENT, "k->data (0x200000008) must be 16-byte aligned (TMA)"},
      {"stride not 16B", [](Args& a) { a.q.stride_seq = 8 * 128 + 4; }, FA3_ERR_INVALID_ARGUMENT,
       "q->stride_seq (1028 elements = 2056 bytes) must be a multiple of 16 bytes (TMA)"},
      {"negative stride", [](Args& a) { a.v.stride_batch = -300 * 2 * 128; },
       FA3_ERR_INVALID_ARGUMENT, "v->stride_batch must be positive when v->batch > 1 (got -76800)"},
      {"stride past 2^40", [](Args& a) { a.k.stride_batch = int64_t{1} << 39; },
       FA3_ERR_INVALID_ARGUMENT, "k->stride_batch (549755813888 elements) must be below 2^40 bytes (TMA)"},
      {"address overflow", [](Args& a) { a.q.data = reinterpret_cast<void*>(uintptr_t{0xfffffffffffff000}); },
       FA3_ERR_INVALID_ARGUMENT,
       "q extends past the end of the address space (its sizes and strides overflow 64-bit addresses)"},
      {"o rows overlap", [](Args& a) { a.o.stride_seq = 64; a.o.stride_head = 0; },
       FA3_ERR_INVALID_ARGUMENT, ""},
      {"o aliases q", [](Args& a) { a.o.data = a.q.data; }, FA3_ERR_INVALID_ARGUMENT,
       "o overlaps q in memory: the output must not alias an input"},
      {"o aliases v", [](Args& a) { a.o.data = reinterpret_cast<char*>(kV) + 1024; },
       FA3_ERR_INVALID_ARGUMENT,
       "o and v may share memory: their byte ranges interleave, and fa3 tells elements apart "
       "only for views with the same strides (such as views of one packed buffer); the output "
       "must not alias an input"},
      {"lse misaligned", [](Args& a) { a.lse = reinterpret_cast<float*>(kLse + 2); },
       FA3_ERR_INVALID_ARGUMENT, "lse (0x500000002) must be 4-byte aligned (fp32)"},
      {"lse aliases o", [](Args& a) { a.lse = reinterpret_cast<float*>(kO + 64); },
       FA3_ERR_INVALID_ARGUMENT,
       "lse overlaps o in memory: the (batch, heads, seqlen_q) fp32 LSE buffer must be separate"},
      {"causal 2", [](Args& a) { a.p.causal = 2; }, FA3_ERR_INVALID_ARGUMENT,
       "p->causal must be 0 or 1 (got 2)"},
      {"negative scale", [](Args& a) { a.p.softmax_scale = -1.0f; }, FA3_ERR_INVALID_ARGUMENT,
       "p->softmax_scale must be finite and > 0, or 0 for 1/sqrt(head_dim) (got -1.000000)"},
      {"nan scale", [](Args& a) { a.p.softmax_scale = std::nanf(""); }, FA3_ERR_INVALID_ARGUMENT,
       "p->softmax_scale must be finite and > 0, or 0 for 1/sqrt(head_dim) (got nan)"},
      {"inf scale", [](Args& a) { a.p.softmax_scale = INFINITY; }, FA3_ERR_INVALID_ARGUMENT,
       "p->softmax_scale must be finite and > 0, or 0 for 1/sqrt(head_dim) (got inf)"},
      {"scale whose log2 form overflows", [](Args& a) { a.p.softmax_scale = 3e38f; },
       FA3_ERR_INVALID_ARGUMENT,
       "p->softmax_scale is 3e+38: softmax_scale * log2(e), which the kernels use, must fit in "
       "a float, so the scale must be at most FLT_MAX / log2(e), about 2.3587e+38"},
      {"largest scale whose log2 form overflows",
       [](Args& a) { a.p.softmax_scale = std::nextafter(static_cast<float>(FLT_MAX / M_LOG2E), INFINITY); },
       FA3_ERR_INVALID_ARGUMENT, ""},
      {"grid too large", [](Args& a) {
         for (fa3_tensor* t : {&a.q, &a.k, &a.v, &a.o}) {
           t->batch = 60000; t->stride_batch = int64_t{1} << 24;
         }
         a.q.heads = a.o.heads = 40000; a.k.heads = a.v.heads = 1;
         a.q.seqlen = a.o.seqlen = 1;
         a.q.stride_head = a.o.stride_head = 128; a.q.stride_batch = a.o.stride_batch = 40000 * 128;
         a.lse = nullptr;
       },
       FA3_ERR_UNSUPPORTED, "q->batch * q->heads * ceil(q->seqlen / 64) = 2400000000 exceeds the 2^31 - 1 blocks of a grid"},
  };
  return rules;
}

}  // namespace

TEST_CASE("every broken argument rule has its status and sentence", "[cpu][api]") {
  for (const Rule& rule : forward_rules()) {
    Args a;
    rule.breaks(a);
    const fa3::Error e = a.check();
    INFO(rule.what << ": " << e.message);
    CHECK(e.status == rule.status);
    if (*rule.message) CHECK(e.message == rule.message);
    CHECK_FALSE(e.message.empty());
  }
}

TEST_CASE("fa3_forward reports each broken rule and makes no driver call", "[cpu][api][runtime]") {
  // A handle on the fake driver, whose call log shows whether anything was launched,
  // allocated or even made current.
  FakeHandle fh;
  fa3_handle* h = fh.h;
  const char* kernel = nullptr;
  {
    Args a;
    REQUIRE(fa3_forward_select(h, &a.q, &a.k, &a.v, a.params, &kernel) == FA3_OK);
  }
  const std::string picked = kernel;
  for (const Rule& rule : forward_rules()) {
    Args a;
    rule.breaks(a);
    const std::string message = a.check().message;
    INFO(rule.what << ": " << message);
    fake().reset();
    CHECK(fa3_forward(h, &a.q, &a.k, &a.v, &a.o, a.lse, a.params, nullptr) == rule.status);
    CHECK(std::string(fa3_last_error()) == message);
    CHECK(fa3_forward_with_kernel(h, picked.c_str(), &a.q, &a.k, &a.v, &a.o, a.lse, a.params,
                                  nullptr) == rule.status);
    CHECK(std::string(fa3_last_error()) == message);
    CHECK(fake().calls().empty());
  }
  // The log does see a call that passes its checks: the kernel's launch.
  Args valid;
  fake().reset();
  CHECK(fa3_forward(h, &valid.q, &valid.k, &valid.v, &valid.o, valid.lse, valid.params, nullptr) ==
        FA3_OK);
  CHECK(FakeCuda::count(fake().calls(), "cuLaunchKernelEx") == 1);
}

TEST_CASE("the 32-bit bounds on the lengths: the causal sum binds causal calls only; each holds at its last value",
          "[cpu][api]") {
  // Lengths whose sum passes 2^31 - 256, each tensor far from the others (fake addresses).
  Args a;
  a.one_batch();
  a.q.data = reinterpret_cast<void*>(uintptr_t{1} << 40);
  a.k.data = reinterpret_cast<void*>(uintptr_t{1} << 42);
  a.v.data = reinterpret_cast<void*>(uintptr_t{1} << 43);
  a.o.data = reinterpret_cast<void*>(uintptr_t{1} << 44);
  a.lse = reinterpret_cast<float*>(uintptr_t{1} << 46);
  a.q.seqlen = a.o.seqlen = 1000000000;
  a.k.seqlen = a.v.seqlen = 1200000000;
  a.p.causal = 0;
  fa3::Error e = a.check();
  INFO(e.message);
  CHECK_FALSE(e.failed());
  a.p.causal = 1;
  CHECK(a.check().status == FA3_ERR_INVALID_ARGUMENT);
  a.k.seqlen = a.v.seqlen = 2147483392 - 1000000000;  // the sum at the bound
  e = a.check();
  INFO(e.message);
  CHECK_FALSE(e.failed());
  // One length at its own bound (not causal), and one past it.
  a.p.causal = 0;
  a.k.seqlen = a.v.seqlen = 2147483392;
  e = a.check();
  INFO(e.message);
  CHECK_FALSE(e.failed());
  a.k.seqlen = a.v.seqlen = 2147483393;
  CHECK(a.check().status == FA3_ERR_INVALID_ARGUMENT);
}

TEST_CASE("an output whose rows overlap is rejected with the stride named", "[cpu][api]") {
  Args a;
  a.o.stride_seq = 64;  // < head_dim 128: consecutive rows share memory
  a.o.stride_head = 8 * 128 * 100;
  a.o.stride_batch = 8 * 128 * 100 * 8;
  const fa3::Error e = a.check();
  CHECK(e.status == FA3_ERR_INVALID_ARGUMENT);
  CHECK(e.message ==
        "o->stride_seq (64) is smaller than the extent of o's head_dim dimension(s) (128 elements): different elements of the output would share memory");
}

TEST_CASE("C API entry points reject NULL handles and pointers with a sentence", "[cpu][api]") {
  Args a;
  CHECK(fa3_forward(nullptr, &a.q, &a.k, &a.v, &a.o, nullptr, nullptr, nullptr) ==
        FA3_ERR_INVALID_ARGUMENT);
  CHECK(std::string(fa3_last_error()) == "h is NULL: create a handle with fa3_create");
  CHECK(fa3_create(nullptr, 0, nullptr) == FA3_ERR_INVALID_ARGUMENT);
  CHECK(std::string(fa3_last_error()) == "h is NULL: pass the address of a fa3_handle*");
  CHECK(fa3_destroy(nullptr) == FA3_ERR_INVALID_ARGUMENT);
  const char* name = nullptr;
  CHECK(fa3_forward_select(nullptr, &a.q, &a.k, &a.v, nullptr, &name) == FA3_ERR_INVALID_ARGUMENT);
  CHECK(fa3_forward_with_kernel(nullptr, nullptr, &a.q, &a.k, &a.v, &a.o, nullptr, nullptr,
                                nullptr) == FA3_ERR_INVALID_ARGUMENT);
  CHECK(std::string(fa3_last_error()) == "kernel_name is NULL");
  CHECK(fa3_tuning_table_validate(nullptr) == FA3_ERR_INVALID_ARGUMENT);
  const void* data = nullptr;
  size_t size = 0;
  CHECK(fa3_kernel_cubin("no_such_kernel", &data, &size) == FA3_ERR_INVALID_ARGUMENT);
  CHECK(std::string(fa3_last_error()) ==
        "kernel_name 'no_such_kernel' is not a kernel compiled into this library");
  CHECK(fa3_kernel_name(-1) == nullptr);
  CHECK(fa3_kernel_name(fa3_kernel_count()) == nullptr);
  // A successful call clears the thread's last error.
  CHECK(fa3_status_string(FA3_ERR_ARCH) == std::string("FA3_ERR_ARCH"));
  CHECK(fa3_kernel_cubin(fa3_kernel_name(0), &data, &size) == FA3_OK);
  CHECK(std::string(fa3_last_error()).empty());
  CHECK(size > 0);
}

TEST_CASE("out of host memory: a status, and no exception out of the C API", "[cpu][api]") {
  // Each call's sentence needs an allocation; on a fresh thread (its last-error string still
  // empty) so does the handler's "out of host memory", past std::string's in-place capacity:
  // neither may throw out of the C function, and the thread's last error is then empty.
  Args a;
  fa3_status forward = FA3_OK, create = FA3_OK;
  bool threw = false;
  std::string error_after = "unset";
  std::thread([&] {
    failing_allocations = 1;
    try {
      forward = fa3_forward(nullptr, &a.q, &a.k, &a.v, &a.o, nullptr, nullptr, nullptr);
      create = fa3_create(nullptr, 0, nullptr);
    } catch (...) {
      threw = true;
    }
    failing_allocations = 0;
    error_after = fa3_last_error();
  }).join();
  CHECK_FALSE(threw);
  CHECK(forward == FA3_ERR_OUT_OF_MEMORY);
  CHECK(create == FA3_ERR_OUT_OF_MEMORY);
  CHECK(error_after.empty());
  // On a thread whose last-error string has the room (a longer sentence was stored before),
  // the sentence is kept.
  CHECK(fa3_create(nullptr, 0, nullptr) == FA3_ERR_INVALID_ARGUMENT);
  failing_allocations = 1;
  const fa3_status kept = fa3_create(nullptr, 0, nullptr);
  failing_allocations = 0;
  CHECK(kept == FA3_ERR_OUT_OF_MEMORY);
  CHECK(std::string(fa3_last_error()) == "out of host memory");
  // With memory again, the same call gives its own sentence.
  CHECK(fa3_create(nullptr, 0, nullptr) == FA3_ERR_INVALID_ARGUMENT);
  CHECK(std::string(fa3_last_error()) == "h is NULL: pass the address of a fa3_handle*");
}

TEST_CASE("without a driver fa3_create says so", "[cpu][api]") {
  setenv("FA3_LIBCUDA", "/nonexistent/libcuda.so.1", 1);
  fa3_handle* h = reinterpret_cast<fa3_handle*>(0x1);
  const fa3_status s = fa3_create(&h, 0, nullptr);
  unsetenv("FA3_LIBCUDA");
  CHECK(s == FA3_ERR_NO_DRIVER);
  CHECK(h == nullptr);
  const std::string msg = fa3_last_error();
  CHECK(msg.rfind("the CUDA driver library /nonexistent/libcuda.so.1 could not be loaded (", 0) == 0);
  CHECK(msg.find("fa3 needs an NVIDIA driver and a Hopper GPU") != std::string::npos);
}

TEST_CASE("fa3_create reports a bad tuning table before looking for a driver", "[cpu][api]") {
  fa3_handle* h = nullptr;
  CHECK(fa3_create(&h, 0, "/nonexistent/table.json") == FA3_ERR_TUNING_TABLE);
  CHECK(std::string(fa3_last_error()).find("/nonexistent/table.json") != std::string::npos);
  CHECK(h == nullptr);
}
